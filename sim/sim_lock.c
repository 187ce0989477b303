/*
 * The job engine lock of a simulation: one lock shared by the simulated server (the node) and
 * the other servers a scenario names (`lock:`, docs/simulation.md). It lives as long as the
 * simulation, across restarts, like a lock shared by processes.
 *
 * Taking it raises the store's fencing epoch in its own write transaction, as the data
 * directory's lock does (scheduler/lock_file.c), whoever takes it. The node's view of its
 * holding (held, fence) is its own: when another server takes the lock the node is not told,
 * as a server whose lock was taken over is not; it finds out from the epoch (its next write is
 * refused by fencing, or its next check of the epoch, every second, sees it moved). The lock
 * has no lease: there is no process to kill.
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ql_lock_t base;
    ql_store_t *store;
    char other[SIM_HOLDER_MAX + 1]; /* the other server holding it, "" when none */
} sim_lock_t;

static int raise_epoch(ql_store_t *store, uint64_t *out) {
    ql_txn_t *txn;
    int rc = ql_txn_begin(store, true, &txn);
    if (rc)
        return rc;
    uint64_t epoch = 0;
    if ((rc = ql_fence_raise(txn, &epoch))) {
        ql_txn_abort(txn);
        return rc;
    }
    if ((rc = ql_txn_commit(txn)) == 0)
        *out = epoch;
    return rc;
}

static int try_acquire(ql_lock_t *lock, bool *acquired, char *holder, size_t cap) {
    sim_lock_t *l = (sim_lock_t *)lock;
    *acquired = false;
    if (l->other[0]) {
        snprintf(holder, cap, "server '%s' (the scenario's lock: step)", l->other);
        return 0;
    }
    uint64_t epoch = 0;
    int rc = raise_epoch(l->store, &epoch);
    if (rc)
        return rc;
    lock->held = true;
    lock->fence = epoch;
    *acquired = true;
    return 0;
}

static bool still_held(ql_lock_t *lock) {
    return lock->held;
}

static void release(ql_lock_t *lock) {
    lock->held = false;
    lock->fence = 0;
}

static void lock_free(ql_lock_t *lock) {
    free(lock);
}

static const ql_lock_ops_t sim_lock_ops = {
    .kind = "sim",
    .try_acquire = try_acquire,
    .still_held = still_held,
    .release = release,
    .free = lock_free,
};

int sim_lock_new(ql_store_t *store, ql_lock_t **out) {
    sim_lock_t *l = calloc(1, sizeof *l);
    if (!l)
        return UV_ENOMEM;
    l->base.ops = &sim_lock_ops;
    l->store = store;
    *out = &l->base;
    return 0;
}

int sim_lock_take(ql_lock_t *lock, const char *other, ql_err_t *err) {
    sim_lock_t *l = (sim_lock_t *)lock;
    if (l->other[0])
        return ql_err_set(err, QL_EINVAL, "lock: server '%s' already holds the job engine lock",
                          l->other);
    uint64_t epoch = 0;
    int rc = raise_epoch(l->store, &epoch);
    if (rc)
        return ql_err_set(err, rc, "lock: cannot raise the fencing epoch: %s", ql_strerror(rc));
    snprintf(l->other, sizeof l->other, "%s", other);
    return 0;
}

int sim_lock_release(ql_lock_t *lock, ql_err_t *err) {
    sim_lock_t *l = (sim_lock_t *)lock;
    if (!l->other[0])
        return ql_err_set(err, QL_EINVAL,
                          "lock: release: no other server holds the job engine lock");
    l->other[0] = '\0';
    return 0;
}
