/* Fencing tokens of the job engine lock: see ql_meta.h. */
#include "storage/ql_meta.h"

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
