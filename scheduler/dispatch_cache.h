/*
 * The dispatcher's cycle cache (not public): completed cycles keyed by (model, occurrence,
 * normalized range), at most `capacity` entries, least recently used evicted first, an entry
 * unused for `ttl_ms` expired. Single-threaded (the loop thread).
 */
#ifndef QL_DISPATCH_CACHE_H
#define QL_DISPATCH_CACHE_H

#include "scheduler/ql_dispatch.h"

typedef struct ql_cycle_key {
    ql_id_t model;
    int64_t occurrence;
    int64_t start;
    int64_t end;
} ql_cycle_key_t;

typedef struct ql_cycle_cache ql_cycle_cache_t;

int ql_cycle_cache_new(size_t capacity, int64_t ttl_ms, ql_cycle_cache_t **out);
void ql_cycle_cache_free(ql_cycle_cache_t *c);
void ql_cycle_cache_clear(ql_cycle_cache_t *c);
/* The cached state of key (touching it), or QL_CYCLE_NONE when absent or expired at now. */
ql_cycle_state_t ql_cycle_cache_get(ql_cycle_cache_t *c, const ql_cycle_key_t *key, int64_t now);
void ql_cycle_cache_put(ql_cycle_cache_t *c, const ql_cycle_key_t *key, ql_cycle_state_t state,
                        int64_t now);
/* The same, with the segment the status call names for a cached cycle: lookup copies into
 * covering and n_related (each may be NULL) what store kept (covering NULL: none, n 0). */
ql_cycle_state_t ql_cycle_cache_lookup(ql_cycle_cache_t *c, const ql_cycle_key_t *key, int64_t now,
                                       ql_id_t *covering, uint32_t *n_related);
void ql_cycle_cache_store(ql_cycle_cache_t *c, const ql_cycle_key_t *key, ql_cycle_state_t state,
                          int64_t now, const ql_id_t *covering, uint32_t n_related);
size_t ql_cycle_cache_size(const ql_cycle_cache_t *c);

#endif
