/*
 * The backend table of the metadata store (private to storage/).
 *
 * DESIGN. The public functions of storage/include/storage/ql_store.h are one-line wrappers
 * (store_dispatch.c) over the operations of the backend a store was opened with: the embedded
 * LMDB store (store_lmdb*.c, lmdb.h included there only) or PostgreSQL (store_pg*.c, the only
 * files that include libpq-fe.h), as docs/design/multi-host.md describes. Every backend gives the
 * same guarantees: the contract suite tests/storage/test_store_contract.c is their definition.
 *
 * A backend embeds struct ql_store and struct ql_txn as the first member of its own store and
 * transaction structs and sets ops; the fields here are the ones the wrappers and every backend
 * share (ids, the commit hook, the decode zone and encode buffer of a transaction).
 */
#ifndef QL_STORE_OPS_H
#define QL_STORE_OPS_H

#include "codec.h"
#include "storage/ql_store.h"

#include <pthread.h>

typedef struct store_ops {
    const char *name; /* "lmdb", "postgresql": ql_store_stat_t.backend */
    /* Mutations per writer transaction at most (0: no limit of the backend's own). */
    size_t max_batch;
    /* Write transactions of several sessions run at once: the writer may run lanes
     * (ql_writer.h, Lanes). */
    bool parallel_writes;
    /* Servers on other hosts may share the store: ql_store_spans_hosts. */
    bool spans_hosts;
    void (*close)(ql_store_t *s);
    int (*maintain)(ql_store_t *s, int *cleared);
    int (*stat)(ql_store_t *s, ql_store_stat_t *out);
    /* ql_store_compact; NULL: the backend has no file of its own to compact (PostgreSQL). */
    int (*compact)(ql_store_t *s, const char *dir);
    int (*fsck)(ql_store_t *s, void *out_file, ql_fsck_report_t *report);
    /* ql_store_lock_open; NULL: the backend has no job engine lock of its own (LMDB). */
    int (*lock_open)(ql_store_t *s, const ql_store_lock_opts_t *opts, ql_store_lock_t **out,
                     ql_err_t *err);
    /* ql_store_changes_*; NULL: the backend has no change channel. */
    int (*changes_listen)(ql_store_t *s, ql_err_t *err);
    int (*changes_fd)(ql_store_t *s);
    int (*changes_drain)(ql_store_t *s, ql_store_change_cb cb, void *arg);
    /* ql_store_announce, ql_store_servers_foreach; NULL: the backend keeps no list of its
     * servers (LMDB: the data directory's presence files serve). */
    int (*announce)(ql_store_t *s, const char *server_id, long pid, const char *info);
    int (*servers_foreach)(ql_txn_t *t, ql_store_server_cb cb, void *arg);

    /* parent NULL: a top-level transaction; else a nested write transaction of parent. */
    int (*txn_begin)(ql_store_t *s, ql_txn_t *parent, bool write, ql_txn_t **out);
    /* Optional (ql_txn_begin_lookups): NULL begins an ordinary read transaction. */
    int (*txn_begin_lookups)(ql_store_t *s, ql_txn_t **out);
    int (*txn_commit)(ql_txn_t *t);
    void (*txn_abort)(ql_txn_t *t);

    int (*meta_get_u64)(ql_txn_t *t, const char *key, uint64_t *out);
    int (*meta_put_u64)(ql_txn_t *t, const char *key, uint64_t value);
    int (*meta_get_str)(ql_txn_t *t, const char *key, char *buf, size_t cap);
    int (*meta_put_str)(ql_txn_t *t, const char *key, const char *value);
    int (*meta_delete)(ql_txn_t *t, const char *key);
    int (*metadata_generation)(ql_txn_t *t, uint64_t *out);
    /* ql_fence_claim's set-if-not-larger of the epoch, in one step that locks the epoch for
     * writing (0, or QL_EFENCED with *cur the larger epoch kept); NULL: fence.c reads and writes
     * it through meta_get_u64/meta_put_u64, which is exact on a store with one writer (LMDB). */
    int (*fence_claim)(ql_txn_t *t, uint64_t token, uint64_t *cur);

    int (*project_get)(ql_txn_t *t, const char *name, unsigned flags, ql_project_t *out);
    int (*project_put)(ql_txn_t *t, const ql_project_t *p);
    int (*project_foreach)(ql_txn_t *t, ql_project_cb cb, void *arg);
    int (*project_count)(ql_txn_t *t, uint64_t *out);
    int (*project_delete)(ql_txn_t *t, const char *name);

    int (*model_get)(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_model_t *out);
    int (*model_exists)(ql_txn_t *t, const ql_id_t *id);
    /* Optional (ql_model_get_for_probe): NULL reads with model_get. */
    int (*model_get_for_probe)(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_model_t *out);
    /* Optional: both lookups of ql_model_segment_exists at once. */
    int (*model_segment_exists)(ql_txn_t *t, const ql_id_t *model, const ql_id_t *segment);
    int (*model_find)(ql_txn_t *t, const char *project, const char *name, unsigned flags,
                      ql_model_t *out);
    /* Optional: ql_model_find_with_project in one lookup. */
    int (*model_find_with_project)(ql_txn_t *t, const char *project, const char *name,
                                   unsigned flags, ql_project_t *p, ql_model_t *m, bool *found);
    int (*model_put)(ql_txn_t *t, const ql_model_t *m);
    int (*model_foreach)(ql_txn_t *t, const char *project, ql_model_cb cb, void *arg);
    int (*model_count)(ql_txn_t *t, const char *project, uint64_t *out);
    int (*model_delete)(ql_txn_t *t, const ql_id_t *id);

    int (*segment_get)(ql_txn_t *t, const ql_id_t *id, ql_segment_t *out);
    int (*segment_exists)(ql_txn_t *t, const ql_id_t *id);
    int (*segment_put)(ql_txn_t *t, ql_segment_t *s);
    int (*segment_delete)(ql_txn_t *t, const ql_id_t *id);
    int (*segment_foreach)(ql_txn_t *t, const ql_id_t *model, ql_segment_cb cb, void *arg);
    int (*segment_foreach_overlapping)(ql_txn_t *t, const ql_id_t *model, int64_t start,
                                       int64_t end, ql_segment_cb cb, void *arg);
    int (*segment_count)(ql_txn_t *t, const ql_id_t *model, uint64_t *out);

    int (*job_get)(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_job_t *out);
    /* ql_job_get_many; store_job_get_loop (store_dispatch.c) is the loop over job_get. */
    int (*job_get_many)(ql_txn_t *t, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                        void *arg);
    int (*job_put)(ql_txn_t *t, const ql_job_t *j);
    int (*job_delete)(ql_txn_t *t, const ql_id_t *id);
    int (*job_foreach_state)(ql_txn_t *t, ql_state_t state, ql_job_cb cb, void *arg);
    int (*job_foreach_state_ref)(ql_txn_t *t, ql_state_t state, ql_job_state_ref_cb cb, void *arg);
    /* NULL: ql_job_foreach_state_target walks job_foreach_state_ref without project and model. */
    int (*job_foreach_state_target)(ql_txn_t *t, ql_state_t state, ql_job_state_target_cb cb,
                                    void *arg);
    int (*job_foreach_model)(ql_txn_t *t, const ql_id_t *model, ql_job_cb cb, void *arg);
    int (*job_foreach_live)(ql_txn_t *t, const ql_id_t *model, ql_live_job_cb cb, void *arg);
    int (*job_foreach_live_overlapping)(ql_txn_t *t, const ql_id_t *model, int64_t start,
                                        int64_t end, ql_live_job_cb cb, void *arg);
    /* ql_probe_targets; store_probe_loop (store_probe.c) is the loop over the two ops above. */
    int (*probe_targets)(ql_txn_t *t, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                         void *arg);
    /* ql_probe_range; store_probe_range_pair (store_probe.c) runs the two overlap ops above. */
    int (*probe_range)(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                       ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg);
    int (*job_foreach_recent)(ql_txn_t *t, const char *project, bool oldest_first, ql_job_ref_cb cb,
                              void *arg);
    int (*job_count)(ql_txn_t *t, const char *project, uint32_t state_mask, uint64_t *out);

    int (*step_get)(ql_txn_t *t, const ql_id_t *job, uint32_t seq, ql_step_t *out);
    int (*step_put)(ql_txn_t *t, const ql_step_t *s);
    int (*step_foreach)(ql_txn_t *t, const ql_id_t *job, ql_step_cb cb, void *arg);
    int (*output_get)(ql_txn_t *t, const ql_id_t *job, uint32_t seq, char **out, size_t *len);
    int (*output_put)(ql_txn_t *t, const ql_id_t *job, uint32_t seq, const char *text, size_t len);
} store_ops_t;

struct ql_store {
    const store_ops_t *ops;
    char *path; /* the data directory (step logs; the LMDB files for LMDB) */
    bool read_only;
    pthread_mutex_t id_lock;
    uint64_t id_state;   /* deterministic id generator state, 0: time-ordered random ids */
    uint64_t id_last_ms; /* time-ordered ids: the last millisecond used and its sequence */
    uint16_t id_seq;
    ql_store_commit_hook commit_hook;
    void *commit_hook_arg;
    uint64_t upgraded_major, upgraded_minor; /* the schema an open upgraded from, 0: none */
};

struct ql_txn {
    const store_ops_t *ops;
    ql_store_t *store;
    ql_txn_t *parent;
    bool write;
    bool zone_ready;
    msgpack_zone zone; /* reused by every decode in this transaction */
    ql_buf_t buf;      /* encode scratch */
};

/* Fills the shared fields of a freshly allocated (zeroed) store; 0 or UV_ENOMEM. */
int store_base_init(ql_store_t *s, const store_ops_t *ops, const ql_store_opts_t *opts);
/* Releases what store_base_init took (not s itself). */
void store_base_fini(ql_store_t *s);
/* Releases a transaction's zone and buffer (not t itself). */
void store_txn_fini(ql_txn_t *t);
/* The transaction's decode zone, created on first use; NULL when out of memory. */
msgpack_zone *ql_txn_zone(ql_txn_t *txn);
/* Runs the commit hook after a successful top-level write commit. */
void store_run_commit_hook(ql_txn_t *t);

/* ql_job_get_many as a loop of ql_job_get (LMDB's job_get_many). */
int store_job_get_loop(ql_txn_t *t, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                       void *arg);
/* ql_probe_targets as a loop of per-model probes (LMDB's probe_targets). */
int store_probe_loop(ql_txn_t *t, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                     void *arg);
/* ql_probe_range as the two per-model probes (LMDB's probe_range). */
int store_probe_range_pair(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                           ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg);

/* The backends' open functions; opts is checked by ql_store_open. */
int ql_store_lmdb_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err);
int ql_store_pg_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err);

/* Whether a job put wakes the schedulers of other servers (ql_store.h, "changes made by other
 * servers"): a new READY job, or a job moved to READY, PAUSED or DISCARDED (what a submission or
 * a job action does from outside the scheduler that runs it). existed: the job was stored
 * before, in state was. Both backends note such jobs for their commit's wake-up. */
static inline bool store_change_wakes(bool existed, ql_state_t was, ql_state_t now) {
    if (!existed)
        return now == QL_READY;
    return was != now && (now == QL_READY || now == QL_PAUSED || now == QL_DISCARDED);
}

#endif
