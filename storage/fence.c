/* Fencing tokens of the job engine lock and of per-job locks: see ql_meta.h. */
#include "base/ql_buf.h"
#include "storage/ql_meta.h"
#include "store_ops.h"

#include <stdlib.h>

#define EPOCH_KEY "job_engine_epoch"

int ql_fence_current(ql_txn_t *txn, uint64_t *epoch) {
    *epoch = 0;
    int rc = ql_meta_get_u64(txn, EPOCH_KEY, epoch);
    return rc == QL_ENOTFOUND ? 0 : rc;
}

int ql_fence_raise(ql_txn_t *txn, uint64_t *epoch) {
    uint64_t cur;
    int rc = ql_fence_current(txn, &cur);
    if (rc || (rc = ql_meta_put_u64(txn, EPOCH_KEY, cur + 1)))
        return rc;
    *epoch = cur + 1;
    return 0;
}

int ql_fence_check(ql_txn_t *txn, uint64_t token, ql_err_t *err) {
    if (token == 0)
        return 0;
    uint64_t cur;
    int rc = ql_fence_current(txn, &cur);
    if (rc)
        return ql_err_set(err, rc, "cannot read the fencing epoch: %s", ql_strerror(rc));
    if (cur == token)
        return 0;
    return ql_err_set(err, QL_EFENCED,
                      "fenced: this change was made under the job engine lock with fencing token "
                      "%llu, but the lock's epoch is now %llu (another server took the lock); "
                      "the change is refused",
                      (unsigned long long)token, (unsigned long long)cur);
}

/* Tokens are stored as signed 64-bit integers on PostgreSQL; a ZooKeeper zxid is one. */
static int check_token(uint64_t token, const char *what, ql_err_t *err) {
    if (token == 0 || token > (uint64_t)INT64_MAX)
        return ql_err_set(err, QL_EINVAL,
                          "%s: the fencing token %llu is out of range (1 to 2^63-1)", what,
                          (unsigned long long)token);
    return 0;
}

int ql_fence_claim(ql_txn_t *txn, uint64_t token, ql_err_t *err) {
    int rc = check_token(token, "job engine lock", err);
    if (rc)
        return rc;
    if (!txn->write)
        return ql_err_set(err, QL_EINVAL, "job engine lock: a claim needs a write transaction");
    uint64_t cur = 0;
    if (txn->ops->fence_claim) {
        rc = txn->ops->fence_claim(txn, token, &cur);
    } else if (!(rc = ql_fence_current(txn, &cur))) {
        if (cur > token)
            rc = QL_EFENCED;
        else if (cur < token)
            rc = ql_meta_put_u64(txn, EPOCH_KEY, token);
    }
    if (rc == QL_EFENCED)
        return ql_err_set(err, QL_EFENCED,
                          "fenced: the job engine lock was acquired with token %llu, but the "
                          "store's epoch is already %llu (a later holding claimed it); this "
                          "holding is stale and must not schedule",
                          (unsigned long long)token, (unsigned long long)cur);
    if (rc)
        return ql_err_set(err, rc, "cannot claim the fencing epoch %llu: %s",
                          (unsigned long long)token, ql_strerror(rc));
    return 0;
}

int ql_job_claim(ql_txn_t *txn, const ql_id_t *job_id, uint64_t token, ql_err_t *err) {
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(job_id, id);
    int rc = check_token(token, id, err);
    if (rc)
        return rc;
    ql_job_t job;
    /* A write transaction's point read locks the row on PostgreSQL (FOR UPDATE), so no other
     * claim or change of this job interleaves until the transaction ends. */
    if ((rc = ql_job_get(txn, job_id, QL_DECODE_KEEP_EXTRA, &job)))
        return ql_err_set(err, rc, "job %s: cannot read it to claim its lock: %s", id,
                          ql_strerror(rc));
    if (job.fence > token) {
        uint64_t held = job.fence;
        ql_job_free(&job);
        return ql_err_set(err, QL_EFENCED,
                          "fenced: job %s was locked with token %llu, but a later lock of it "
                          "already claimed token %llu; this holding is stale and must not run it",
                          id, (unsigned long long)token, (unsigned long long)held);
    }
    if (job.fence != token) {
        job.fence = token;
        rc = ql_job_put(txn, &job);
    }
    ql_job_free(&job);
    if (rc)
        return ql_err_set(err, rc, "job %s: cannot record its fencing token: %s", id,
                          ql_strerror(rc));
    return 0;
}

/* The ids of the jobs of one state whose fence is set, collected before any is written (a
 * write may move the iteration's cursor on LMDB). */
typedef struct fenced_jobs {
    ql_id_t *ids;
    size_t n, cap;
} fenced_jobs_t;

static int collect_fenced(const ql_job_t *j, void *arg) {
    fenced_jobs_t *f = arg;
    if (!j->fence)
        return 0;
    int rc = QL_ARRAY_RESERVE(f->ids, f->cap, f->n + 1, 64);
    if (rc)
        return rc;
    f->ids[f->n++] = j->id;
    return 0;
}

static int unfence_jobs(ql_txn_t *txn) {
    static const ql_state_t live[] = {QL_READY, QL_PENDING, QL_RUNNING, QL_ERROR, QL_PAUSED};
    fenced_jobs_t f = {0};
    int rc = 0;
    for (size_t s = 0; !rc && s < sizeof live / sizeof live[0]; s++)
        rc = ql_job_foreach_state(txn, live[s], collect_fenced, &f);
    for (size_t i = 0; !rc && i < f.n; i++) {
        ql_job_t job;
        if ((rc = ql_job_get(txn, &f.ids[i], QL_DECODE_KEEP_EXTRA, &job)))
            break;
        job.fence = 0;
        rc = ql_job_put(txn, &job);
        ql_job_free(&job);
    }
    free(f.ids);
    return rc;
}

int ql_fence_reset(ql_txn_t *txn, uint64_t *was, ql_err_t *err) {
    if (!txn->write)
        return ql_err_set(err, QL_EINVAL, "fencing epoch: a reset needs a write transaction");
    int rc = ql_fence_current(txn, was);
    if (rc)
        return ql_err_set(err, rc, "cannot read the fencing epoch: %s", ql_strerror(rc));
    if ((rc = ql_meta_put_u64(txn, EPOCH_KEY, 0)) || (rc = unfence_jobs(txn)))
        return ql_err_set(err, rc, "cannot reset the fencing epoch: %s", ql_strerror(rc));
    return 0;
}
