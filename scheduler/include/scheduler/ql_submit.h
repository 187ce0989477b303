/*
 * Submitting jobs: the mutation that creates incremental builds, merges, refreshes and ad-hoc
 * jobs, whoever asks (the submission service of ql_submission.h for the REST API, the
 * simulator's `build:` step, tests and tools; the dispatcher for its automatic builds), and
 * the normalization of a build's range.
 *
 * A submission is a writer mutation (ql_write_fn) over an op struct: it looks up the model's
 * job template, snapshots the chain's step definitions into the new job (an ad-hoc job brings
 * its steps), and calls the ql_meta_submit_* rule that re-checks overlaps inside the
 * transaction. Before queueing it, the caller normalizes a client's range with
 * ql_submit_normalize() (ICU and CCTZ run outside the writer thread; the mutation re-checks that
 * the range is not empty), or, where submissions repeat, with ql_submit_normalize_cached() and a
 * ql_submit_cache_t the caller owns, which keeps the zones and ICU formats it opened. Callers
 * that answer a client use the submission service, which does all of this for them.
 */
#ifndef QL_SUBMIT_H
#define QL_SUBMIT_H

#include "engine/engine.h"

typedef enum ql_submit_kind {
    QL_SUBMIT_BUILD,   /* INC_BUILD of [start, end) */
    QL_SUBMIT_MERGE,   /* INDEX_MERGE of segments */
    QL_SUBMIT_REFRESH, /* INDEX_REFRESH of one segment */
    QL_SUBMIT_ADHOC,   /* a job of another type (ad-hoc), with the steps it brings */
} ql_submit_kind_t;

typedef struct ql_submit_op {
    /* in (borrowed for the mutation's life) */
    ql_submit_kind_t kind;
    const ql_templates_t *templates;
    ql_id_t model;
    int64_t start, end; /* BUILD: normalized range */
    const ql_id_t *ids; /* MERGE: the segments; REFRESH: ids[0] */
    size_t n_ids;
    /* ADHOC: the job's project and type, its encoded steps (ql_job_steps_from_*) and custom
     * parameters (ql_job_params_encode; NULL: none); model is optional (zero: none) */
    const char *project;
    const char *type;
    const ql_job_steps_t *steps;
    const char *params;
    size_t params_len;
    int priority;
    const char *submitter;
    int64_t now;
    uint64_t fence; /* the dispatcher's fencing token (refused once the lock moved on); 0: none */
    const char *yarn_queue, *tag; /* kept with the job (ql_job_spec_t); NULL: none */
    /* out */
    ql_id_t job;
    ql_id_t segment;
} ql_submit_op_t;

/* The mutation: arg is a ql_submit_op_t. */
int ql_submit_fn(ql_txn_t *txn, void *arg, ql_err_t *err);

/* The job type a kind creates: INC_BUILD, INDEX_MERGE, INDEX_REFRESH; for QL_SUBMIT_ADHOC, NULL
 * (the job says its own type). Static. */
const char *ql_submit_kind_type(ql_submit_kind_t kind);

/* The time zone that applies to a project: its kylin.web.timezone, else the server's (may be
 * NULL or ""), else UTC. Copies it into buf. */
void ql_submit_project_timezone(const ql_project_t *p, const char *server_tz, char *buf,
                                size_t cap);

/* Normalizes [start, end) with the model's partition format in the project's time zone
 * (docs/design/auto-segment-build.md step 3), as the dispatcher does. QL_EEMPTYRANGE when the
 * result is empty; QL_EINVAL for an unusable zone or format (the message says which). Opens the
 * zone and the ICU format and frees them again: ql_submit_normalize_cached(NULL, ...). */
int ql_submit_normalize(const ql_project_t *p, const ql_model_t *m, const char *server_tz,
                        int64_t start, int64_t end, int64_t *ns, int64_t *ne, ql_err_t *err);

/*
 * What normalization opens, kept for the next submission: time zones by name (ql_tzcache_t)
 * and compiled partition formats by pattern, at most a fixed number of formats (the least
 * recently used one is closed to make room). Opening an ICU format costs far more than using
 * it (ql_datefmt.h).
 *
 * Threads: a cache is used by one thread at a time and is not locked; give each thread that
 * normalizes its own (one per API instance on its loop thread, one per simulation). Patterns
 * that fail to compile are not cached: each try opens them again and gets the same error.
 */
typedef struct ql_submit_cache ql_submit_cache_t;

#define QL_SUBMIT_CACHE_FORMATS 16 /* formats kept when ql_submit_cache_new is given 0 */

/* Counters of a cache, for tests and metrics. */
typedef struct ql_submit_cache_stats {
    uint64_t format_opens;     /* ql_datefmt_open calls, failed ones included */
    uint64_t format_hits;      /* lookups answered by a format already open */
    uint64_t format_evictions; /* formats closed to make room */
} ql_submit_cache_stats_t;

/* Creates an empty cache that keeps up to max_formats formats (0: QL_SUBMIT_CACHE_FORMATS) in
 * *out, owned by the caller. Returns 0 or UV_ENOMEM. */
int ql_submit_cache_new(size_t max_formats, ql_submit_cache_t **out);

/* Frees the cache with every zone and format in it (NULL is ignored). */
void ql_submit_cache_free(ql_submit_cache_t *cache);

void ql_submit_cache_get_stats(const ql_submit_cache_t *cache, ql_submit_cache_stats_t *out);

/* The compiled format of pattern, opened on first use (ql_datefmt_open's rules and errors; err
 * may be NULL). *out is borrowed from the cache: valid until the next lookup on the cache
 * (which may close it to make room) or until the cache is freed. */
int ql_submit_cache_format(ql_submit_cache_t *cache, const char *pattern, const ql_datefmt_t **out,
                           ql_err_t *err);

/* ql_submit_normalize with the zone and the format taken from cache (NULL: opened for this
 * call only). The same results and the same errors with or without a cache. */
int ql_submit_normalize_cached(ql_submit_cache_t *cache, const ql_project_t *p, const ql_model_t *m,
                               const char *server_tz, int64_t start, int64_t end, int64_t *ns,
                               int64_t *ne, ql_err_t *err);

#endif
