/* The per-job fencing check of scheduler 2 (ql_job_fence_check in ql_meta.h; docs/zookeeper.md,
 * Scheduler 2), beside the claims of fence.c. */
#include "storage/ql_meta.h"
#include "store_ops.h"

int ql_job_fence_check(ql_txn_t *txn, const ql_id_t *job_id, uint64_t token, ql_err_t *err) {
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(job_id, id);
    ql_job_t job;
    /* The same locking point read as ql_job_claim's: on PostgreSQL a write transaction holds the
     * row until it ends, so no claim of a newer lock slips between this check and the change. */
    int rc = ql_job_get(txn, job_id, 0, &job);
    if (rc)
        return ql_err_set(err, rc, "job %s: cannot read it to check its fencing token: %s", id,
                          ql_strerror(rc));
    uint64_t held = job.fence;
    ql_job_free(&job);
    if (held == token)
        return 0;
    return ql_err_set(err, QL_EFENCED,
                      "fenced: this change of job %s was made under its lock with token %llu, "
                      "but the job's token is now %llu (another server locked and claimed it); "
                      "the change is refused",
                      id, (unsigned long long)token, (unsigned long long)held);
}
