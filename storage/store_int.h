/*
 * Store internals shared by store*.c (not public).
 *
 * Tables (LMDB named databases) and their keys; integers in keys are big-endian, signed ones
 * with the sign bit flipped, so byte order is numeric order:
 *   meta           string key -> value (schema version, counters of the fencing epoch, ...)
 *   projects       name -> project record
 *   models         id(16) -> model record
 *   model_names    project '\0' name -> id(16)                      models by project
 *   segments       model(16) layer(1) start(8) id(16) -> segment record
 *   segment_ids    id(16) -> segments key(41)
 *   jobs           id(16) -> job record
 *   job_states     state(1) priority(1) create_time(8) id(16) -> ""  what the fetcher picks
 *   job_live       model(16) start(8) id(16) -> state(1) has_range(1) start(8) end(8)
 *                  non-final jobs by range start (INT64_MIN for a job without a range), so a
 *                  range's overlapping live jobs are one seek away (schema 2; 1 keyed model id)
 *   job_models     model(16) create_time(8) id(16) -> ""
 *   job_recent     project '\0' modify_time(8) id(16) -> state(1);  and the same under the
 *                  empty project "" for the list of every project's jobs
 *   counts         'J' state(1) project -> u64 | 'M' project -> u64 | 'S' model(16) -> u64
 *   steps          job(16) seq(4) -> step record
 *   outputs        job(16) seq(4) -> text
 */
#ifndef QL_STORE_INT_H
#define QL_STORE_INT_H

#include "codec.h"
#include "storage/ql_store.h"
#include "writer_guard.h"

#include <lmdb.h>
#include <pthread.h>

enum {
    DB_META,
    DB_PROJECTS,
    DB_MODELS,
    DB_MODEL_NAMES,
    DB_SEGMENTS,
    DB_SEGMENT_IDS,
    DB_JOBS,
    DB_JOB_STATES,
    DB_JOB_LIVE,
    DB_JOB_MODELS,
    DB_JOB_RECENT,
    DB_COUNTS,
    DB_STEPS,
    DB_OUTPUTS,
    DB_COUNT
};

struct ql_store {
    MDB_env *env;
    MDB_dbi dbi[DB_COUNT];
    char *path;
    uint64_t map_size;
    bool read_only;
    pthread_mutex_t id_lock;
    uint64_t id_state;   /* deterministic id generator state, 0: time-ordered random ids */
    uint64_t id_last_ms; /* time-ordered ids: the last millisecond used and its sequence */
    uint16_t id_seq;
    ql_wguard_t *guard; /* taken around every top-level write transaction; NULL: read-only */
    ql_store_commit_hook commit_hook;
    void *commit_hook_arg;
    uint64_t upgraded_major, upgraded_minor; /* the schema an open upgraded from, 0: none */
};

struct ql_txn {
    ql_store_t *store;
    MDB_txn *txn;
    ql_txn_t *parent;
    bool write;
    bool zone_ready;
    msgpack_zone zone; /* reused by every decode in this transaction */
    ql_buf_t buf;      /* encode scratch */
};

/* The job index keys (layouts above), shared by the store and fsck so the two cannot drift. */
#define QL_JOB_STATE_KEY_LEN 26
#define QL_JOB_MODEL_KEY_LEN 40
#define QL_JOB_RECENT_KEY_MAX (QL_NAME_MAX + 1 + 8 + 16)
#define QL_LIVE_KEY_LEN 40
#define QL_LIVE_VAL_LEN 18
void ql_job_state_key(uint8_t k[QL_JOB_STATE_KEY_LEN], const ql_job_t *j);
void ql_job_model_key(uint8_t k[QL_JOB_MODEL_KEY_LEN], const ql_job_t *j);
/* job_recent's key of j in project's list ("" for every project's); returns its length. */
size_t ql_job_recent_key(uint8_t k[QL_JOB_RECENT_KEY_MAX], const char *project, const ql_job_t *j);
/* A job's job_live entry (meaningful for a non-final job of a model). */
void ql_job_live_entry(uint8_t k[QL_LIVE_KEY_LEN], uint8_t v[QL_LIVE_VAL_LEN], const ql_job_t *j);
/* Rewrites the job_live keys of a schema-1 store in the schema-2 layout. */
int ql_store_migrate_job_live(ql_txn_t *txn);

/* LMDB code -> Qilin code. */
int ql_store_mdb_err(int rc);
msgpack_zone *ql_txn_zone(ql_txn_t *txn);

static inline MDB_val ql_val(const void *data, size_t len) {
    MDB_val v = {.mv_size = len, .mv_data = (void *)data};
    return v;
}

static inline void ql_put_be64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t ql_get_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* Signed values sort correctly as unsigned once the sign bit is flipped. */
static inline void ql_put_key_i64(uint8_t *p, int64_t v) {
    ql_put_be64(p, (uint64_t)v ^ (1ull << 63));
}

static inline int64_t ql_get_key_i64(const uint8_t *p) {
    return (int64_t)(ql_get_be64(p) ^ (1ull << 63));
}

int ql_db_get(ql_txn_t *txn, int db, const void *key, size_t klen, MDB_val *val);
int ql_db_put(ql_txn_t *txn, int db, const void *key, size_t klen, const void *val, size_t vlen);
int ql_db_del(ql_txn_t *txn, int db, const void *key, size_t klen); /* missing is ok */
int ql_db_cursor(ql_txn_t *txn, int db, MDB_cursor **out);
/* Adds delta to the u64 counter at key (never below zero). */
int ql_count_add(ql_txn_t *txn, const void *key, size_t klen, int64_t delta);
int ql_count_get(ql_txn_t *txn, const void *key, size_t klen, uint64_t *out);

#endif
