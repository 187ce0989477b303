/*
 * Metadata rules (docs/design/metadata.md): validation, range math, and the changes that create or
 * end segments and jobs. Every function that changes records takes the write transaction it runs
 * in, so a caller (the writer, through a mutation) gets all of its records changed or none, and the
 * checks see exactly the state they change: the overlap rules are checked INSIDE the
 * transaction that creates the segment or job, which is what makes a manual build racing the
 * dispatcher (or another server) safe.
 *
 * Manual builds (REST, CLI, simulator) and the dispatcher submit through the same function,
 * ql_meta_submit_build().
 */
#ifndef QL_META_H
#define QL_META_H

#include "storage/ql_store.h"

#include <stdbool.h>
#include <stdint.h>

/* Half-open ranges [s, e). */
static inline bool ql_range_overlaps(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
    return s1 < e2 && s2 < e1;
}
static inline bool ql_range_contains(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
    return s1 <= s2 && e2 <= e1;
}
static inline bool ql_range_connects(int64_t e1, int64_t s2) {
    return e1 == s2;
}

/* A range [start, end) of epoch ms within the store's bounds (ql_records.h): 0 <= start,
 * start < end, end <= QL_TIME_MAX, or [0, QL_RANGE_FULL_END) when full is true (a full-load
 * model's segment). QL_EINVAL naming start_field or end_field; QL_EEMPTYRANGE when start >= end
 * (both within bounds). Pure. */
int ql_meta_check_range(const char *start_field, const char *end_field, int64_t start, int64_t end,
                        bool full, ql_err_t *err);

/* `[A-Za-z0-9_]{1,100}`; the error names field. */
int ql_meta_check_name(const char *field, const char *value, ql_err_t *err);
/* A job type: INC_BUILD, INDEX_REFRESH, INDEX_MERGE, INDEX_BUILD or `[A-Z][A-Z0-9_]{0,63}`
 * (at most QL_TYPE_MAX characters). The one rule for job types: the engine's
 * ql_job_type_valid() is this check. */
int ql_meta_check_job_type(const char *field, const char *value, ql_err_t *err);

/* Creates a project (QL_EEXIST when the name is taken). p->create/modify times are set. */
int ql_meta_create_project(ql_txn_t *txn, ql_project_t *p, int64_t now, ql_err_t *err);
/* Creates a model in an existing project: a new id is assigned (m->id), names validated,
 * QL_EEXIST for a duplicate name in the project. The partition format must already have been
 * checked by the caller (ICU, outside the transaction). */
int ql_meta_create_model(ql_txn_t *txn, ql_model_t *m, int64_t now, ql_err_t *err);

/* One step of a job as the engine defined it (opaque definition bytes). Borrowed. */
typedef struct ql_step_spec {
    const char *name;
    const char *kind;
    const uint8_t *def;
    size_t def_len;
} ql_step_spec_t;

/* What a new job carries besides its segment effects. All pointers borrowed. */
typedef struct ql_job_spec {
    int priority;          /* 0..4 */
    const char *submitter; /* ADMIN, a user name, or System */
    int64_t now;           /* create time */
    uint64_t fence;        /* fencing token of the submitter, 0: none */
    const ql_step_spec_t *steps;
    size_t n_steps;     /* 1..99 */
    const char *params; /* an ad-hoc job's encoded custom parameters (ql_job_t.params); NULL:
                           none */
    size_t params_len;
    /* Kylin's yarn_queue and tag (the tag as compact JSON text); NULL or "": none. At most
     * QL_JOB_QUEUE_MAX and QL_JOB_TAG_MAX bytes (QL_EINVAL naming the field). */
    const char *yarn_queue;
    const char *tag;
    /* The job's model when the caller has read it in this write transaction (with ql_model_get,
     * which holds its row lock to the end), so the submission does not read it again; NULL, or
     * another model than the one named: read here. */
    const struct ql_model *model;
} ql_job_spec_t;

/*
 * An incremental build of [start, end) (already normalized with the partition format) on a
 * model: checks, in order, that the model exists (QL_ENOTFOUND); on a full-load model, that the
 * range is the full one [0, QL_RANGE_FULL_END) (QL_EFULLLOAD otherwise: a full build), on a
 * partitioned one that the range is within the store's bounds (QL_EINVAL naming start or end,
 * ql_meta_check_range)
 * and not empty (QL_EEMPTYRANGE), no segment of the model overlaps it, whatever its
 * status (QL_ESEGOVERLAP, KE-010022202), and no non-final job of the model targets an
 * overlapping range (QL_EJOBCONFLICT, KE-010032206); then creates a NEW segment and an
 * INC_BUILD job in READY owning it. job_out and segment_out (may be NULL) get the new ids.
 */
int ql_meta_submit_build(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                         const ql_job_spec_t *spec, ql_id_t *job_out, ql_id_t *segment_out,
                         ql_err_t *err);

/* A merge of n >= 2 READY/WARNING segments that are contiguous once sorted: a NEW segment over
 * their union and an INDEX_MERGE job whose sources they are. QL_EMERGE otherwise; QL_EJOBCONFLICT
 * when a non-final job overlaps the union. */
int ql_meta_submit_merge(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *ids, size_t n,
                         const ql_job_spec_t *spec, ql_id_t *job_out, ql_err_t *err);

/* A refresh of one READY/WARNING segment: a NEW segment of the same range and an INDEX_REFRESH
 * job whose source it is. QL_EREFRESH for a NEW segment; QL_EJOBCONFLICT as above. */
int ql_meta_submit_refresh(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *segment,
                           const ql_job_spec_t *spec, ql_id_t *job_out, ql_err_t *err);

/* A job of another type (INDEX_BUILD, ad-hoc), with an optional model and range; checks the
 * project name and the range's bounds (QL_EINVAL naming the field) and the job-conflict rule
 * when it has both. */
int ql_meta_submit_job(ql_txn_t *txn, const char *project, const ql_id_t *model, const char *type,
                       bool has_range, int64_t start, int64_t end, const ql_job_spec_t *spec,
                       ql_id_t *job_out, ql_err_t *err);

/* Deletes segments of a model: each must exist (QL_ENOTFOUND) and no non-final job of the model
 * (READY, PENDING, RUNNING, ERROR or PAUSED) may overlap it (QL_ESEGLOCKED: discard that job or
 * let it finish first). */
int ql_meta_delete_segments(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *ids, size_t n,
                            ql_err_t *err);

/* Deletes jobs with their steps, outputs and index entries, all in txn (docs/design/jobs.md,
 * Deleting jobs): every job must exist (QL_ENOTFOUND naming it), belong to project when project
 * is neither NULL nor "" (QL_ENOTFOUND), and be final: SUCCEED, DISCARDED or SUICIDAL. One that
 * is not refuses the whole call with QL_EACTION, naming the live jobs (the first few, and how
 * many). A job listed twice is deleted once. The step logs are the caller's to remove after the
 * commit (ql_store_remove_job_logs). */
int ql_meta_delete_jobs(ql_txn_t *txn, const char *project, const ql_id_t *ids, size_t n,
                        ql_err_t *err);

/* Retention's walk reads at most this many entries per job it may delete, so that old live jobs
 * (a job PAUSED for months) cost a batch a bounded time. */
#define QL_PURGE_SCAN_FACTOR 8
/* Retention: deletes, oldest change first, up to max final jobs whose last change (for a final
 * job, its end) is before `before` (epoch ms), with their steps and outputs, in txn. out (max
 * entries, the caller's) gets their ids and *n how many, for the caller to remove their step
 * logs once txn committed. *n < max means none older is left, unless the walk read its bound of
 * max * QL_PURGE_SCAN_FACTOR entries past live jobs. */
int ql_meta_purge_jobs(ql_txn_t *txn, int64_t before, size_t max, ql_id_t *out, size_t *n);

/*
 * The segment effects of a job reaching a final state, written in the same transaction as the
 * job's state (docs/design/jobs.md): SUCCEED makes its NEW segment READY (WARNING when warned) and
 * removes the segments a refresh or merge replaces; DISCARDED and SUICIDAL remove its NEW
 * segment. The job record itself is not written here.
 */
int ql_meta_apply_job_outcome(ql_txn_t *txn, const ql_job_t *job, ql_state_t final_state,
                              bool warned, int64_t now);

/* Whether the job's target (model, NEW segment, merge/refresh sources) still exists: a job
 * whose target is gone becomes SUICIDAL. */
int ql_meta_job_target_exists(ql_txn_t *txn, const ql_job_t *job, bool *exists);

/*
 * Fencing (docs/design/cluster.md): each acquisition of the job engine lock raises an epoch kept in
 * the store (meta "job_engine_epoch"), and the holder writes that epoch, its fencing token, with
 * every change it makes on the strength of the lock. The check runs inside the change's own
 * write transaction, so a holder that lost the lock (another server took it and raised the
 * epoch) has the change refused, never applied.
 */
/* Raises the epoch by one; *epoch gets the new value (the new holder's token). */
int ql_fence_raise(ql_txn_t *txn, uint64_t *epoch);
/* The current epoch, 0 when no lock was ever taken. */
int ql_fence_current(ql_txn_t *txn, uint64_t *epoch);
/* 0 when token is the current epoch (or token is 0: a change not made under the lock);
 * QL_EFENCED, with a message naming both, when another holding began since. */
int ql_fence_check(ql_txn_t *txn, uint64_t token, ql_err_t *err);

/*
 * Claims for tokens minted outside the store (docs/zookeeper.md, Tokens). A ZooKeeper holding's
 * token is its lock node's creation zxid (czxid): it only grows, because every acquisition
 * creates a new node, but the store does not mint it, so a new holder first claims it and only
 * then makes changes under it (each checked as above, or with the job's token for a job lock).
 *
 * ql_fence_claim: sets the epoch to token unless the stored epoch is larger. An equal epoch is
 * accepted: only the same holding has that token (a holder that claims again after a spurious
 * demotion). A larger epoch refuses with QL_EFENCED, the message naming both: a later holding
 * exists and this one is stale. token must be 1 to 2^63-1 (QL_EINVAL). Needs a write
 * transaction; on PostgreSQL the epoch's row stays locked until it ends, so claims and changes
 * of other servers wait instead of interleaving.
 *
 * ql_job_claim: the same rule for one job's token (scheduler 2's per-job lock): sets the job's
 * fence to token unless the stored one is larger (QL_EFENCED), in the same transaction as the
 * change it allows (the pick). QL_ENOTFOUND when the job does not exist. On PostgreSQL the job's
 * row is locked (FOR UPDATE) until the transaction ends. An equal token changes nothing.
 */
int ql_fence_claim(ql_txn_t *txn, uint64_t token, ql_err_t *err);
int ql_job_claim(ql_txn_t *txn, const ql_id_t *job_id, uint64_t token, ql_err_t *err);
/* The check every later change made under a job's lock starts with: 0 when the job's stored
 * fence is token; QL_EFENCED, naming both, when it differs (a later lock of the job claimed
 * more; a smaller stored one cannot happen after a claim). QL_ENOTFOUND (err set) when the job
 * is gone. Reads the job's row, locked FOR UPDATE on PostgreSQL in a write transaction, so
 * that it cannot change before the transaction ends. */
int ql_job_fence_check(ql_txn_t *txn, const ql_id_t *job_id, uint64_t token, ql_err_t *err);

/*
 * The one exception to "the epoch only grows", for a deliberate move to a new ZooKeeper
 * ensemble (docs/zookeeper.md, Moving to another ensemble): a new ensemble's zxids start small,
 * so every claim of its holdings would be refused until they passed the old ensemble's. Sets the
 * epoch to 0 and the fence of every job that is not final to 0, so the first holdings of the
 * new ensemble can claim. Safe only with every job server of the store stopped: tokens are
 * compared for equality, so an old holder's token no longer matches anything, but a server still
 * running could claim again. *was gets the epoch before. Needs a write transaction; the caller
 * commits it with the rest of the reset.
 */
int ql_fence_reset(ql_txn_t *txn, uint64_t *was, ql_err_t *err);

#endif
