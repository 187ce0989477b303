/*
 * Internals of the LMDB backend, shared by store_lmdb*.c and fsck*.c (not public).
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
#include "store_ops.h"
#include "writer_guard.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>

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

/* The LMDB backend's store and transaction (store_ops.h: the shared part comes first). */
typedef struct lmdb_store {
    ql_store_t base;
    MDB_env *env;
    MDB_dbi dbi[DB_COUNT];
    uint64_t map_size;
    ql_wguard_t *guard; /* taken around every top-level write transaction; NULL: read-only */
    /* the change session (store_lmdb_changes.c): -1 when not listening */
    int wake_fd, wake_dir;
    char wake_name[32];
    /* wake_fd for the senders (any thread that commits): a commit of this store sends nothing
     * to its own session; -1 when not listening */
    _Atomic int wake_self;
    bool wake_listened, wake_missed; /* a session was open before; the new one's first drain
                                        reports "anything" */
    struct lmdb_wake_peers *peers;   /* the other servers' sockets (store_lmdb_wake_peers.c) */
} lmdb_store_t;

typedef struct lmdb_txn {
    ql_txn_t base;
    MDB_txn *txn;
    /* jobs whose change wakes other servers, noted on this level (store_lmdb_changes.c) */
    ql_id_t *woke;
    size_t n_woke, cap_woke;
    bool woke_all;
} lmdb_txn_t;

static inline lmdb_store_t *ql_lmdb(ql_store_t *s) {
    return (lmdb_store_t *)s;
}

static inline MDB_txn *ql_mdb_txn(ql_txn_t *t) {
    return ((lmdb_txn_t *)t)->txn;
}

/* The record operations of the backend table (store_lmdb*.c; see ql_store.h for each). */
/* Wake-ups across servers (store_lmdb_changes.c; ql_store.h, "changes made by other servers"):
 * note a job whose put wakes other servers on t's level; hand a committed nested level's notes
 * to its parent; send what a committed top-level transaction noted; the change session's listen,
 * fd, drain and close. */
void lmdb_changes_note(ql_txn_t *t, const ql_id_t *job);
void lmdb_changes_merge(ql_txn_t *into, ql_txn_t *from);
void lmdb_changes_send(ql_txn_t *t);
int lmdb_changes_listen(ql_store_t *s, ql_err_t *err);
int lmdb_changes_fd(ql_store_t *s);
int lmdb_changes_drain(ql_store_t *s, ql_store_change_cb cb, void *arg);
void lmdb_changes_close(ql_store_t *s);
/* The sending side's list of wake/ sockets, read again only when the folder changed
 * (store_lmdb_wake_peers.c): send one datagram to every socket but self's; open and close with
 * the store; scans counts the folder's reads (tests). lmdb_wake_addr: name's address in wake/
 * (opened as dir_fd), 0 or UV_ENAMETOOLONG. */
struct sockaddr_un;
void lmdb_wake_peers_send(ql_store_t *s, const void *msg, size_t len, const char *self);
int lmdb_wake_peers_open(ql_store_t *s);
void lmdb_wake_peers_close(ql_store_t *s);
uint64_t lmdb_wake_peers_scans(ql_store_t *s);
int lmdb_wake_addr(const ql_store_t *s, int dir_fd, const char *name, struct sockaddr_un *a);

int lmdb_meta_get_u64(ql_txn_t *t, const char *key, uint64_t *out);
int lmdb_meta_put_u64(ql_txn_t *t, const char *key, uint64_t value);
int lmdb_meta_get_str(ql_txn_t *t, const char *key, char *buf, size_t cap);
int lmdb_meta_put_str(ql_txn_t *t, const char *key, const char *value);
int lmdb_job_get(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_job_t *out);
int lmdb_job_put(ql_txn_t *txn, const ql_job_t *j);
int lmdb_job_delete(ql_txn_t *txn, const ql_id_t *id);
int lmdb_job_foreach_state(ql_txn_t *txn, ql_state_t state, ql_job_cb cb, void *arg);
int lmdb_job_foreach_state_ref(ql_txn_t *txn, ql_state_t state, ql_job_state_ref_cb cb, void *arg);
int lmdb_job_foreach_model(ql_txn_t *txn, const ql_id_t *model, ql_job_cb cb, void *arg);
int lmdb_job_foreach_live(ql_txn_t *txn, const ql_id_t *model, ql_live_job_cb cb, void *arg);
int lmdb_job_foreach_live_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start,
                                      int64_t end, ql_live_job_cb cb, void *arg);
int lmdb_job_foreach_recent(ql_txn_t *txn, const char *project, bool oldest_first, ql_job_ref_cb cb,
                            void *arg);
int lmdb_job_count(ql_txn_t *txn, const char *project, uint32_t state_mask, uint64_t *out);
int lmdb_step_get(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, ql_step_t *out);
int lmdb_step_put(ql_txn_t *txn, const ql_step_t *s);
int lmdb_step_foreach(ql_txn_t *txn, const ql_id_t *job, ql_step_cb cb, void *arg);
int lmdb_output_get(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, char **out, size_t *len);
int lmdb_fsck(ql_store_t *store, void *out_file, ql_fsck_report_t *report);
int lmdb_output_put(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, const char *text, size_t len);
int lmdb_metadata_generation(ql_txn_t *txn, uint64_t *out);
int lmdb_project_get(ql_txn_t *txn, const char *name, unsigned flags, ql_project_t *out);
int lmdb_project_put(ql_txn_t *txn, const ql_project_t *p);
int lmdb_project_foreach(ql_txn_t *txn, ql_project_cb cb, void *arg);
int lmdb_project_count(ql_txn_t *txn, uint64_t *out);
int lmdb_project_delete(ql_txn_t *txn, const char *name);
int lmdb_model_delete(ql_txn_t *txn, const ql_id_t *id);
int lmdb_model_get(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_model_t *out);
int lmdb_model_exists(ql_txn_t *txn, const ql_id_t *id);
int lmdb_model_find(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                    ql_model_t *out);
int lmdb_model_put(ql_txn_t *txn, const ql_model_t *m);
int lmdb_model_foreach(ql_txn_t *txn, const char *project, ql_model_cb cb, void *arg);
int lmdb_model_count(ql_txn_t *txn, const char *project, uint64_t *out);
int lmdb_segment_get(ql_txn_t *txn, const ql_id_t *id, ql_segment_t *out);
int lmdb_segment_exists(ql_txn_t *txn, const ql_id_t *id);
int lmdb_segment_put(ql_txn_t *txn, ql_segment_t *s);
int lmdb_segment_delete(ql_txn_t *txn, const ql_id_t *id);
int lmdb_segment_foreach(ql_txn_t *txn, const ql_id_t *model, ql_segment_cb cb, void *arg);
int lmdb_segment_foreach_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start,
                                     int64_t end, ql_segment_cb cb, void *arg);
int lmdb_segment_count(ql_txn_t *txn, const ql_id_t *model, uint64_t *out);

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
