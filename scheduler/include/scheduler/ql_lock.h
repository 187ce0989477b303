/*
 * The job engine lock (docs/design/cluster.md, DefaultScheduler): only the holder schedules on a
 * metadata store. An interface, so the ZooKeeper lock (/job_engine/global_job_engine_lock) and
 * leader election can take the embedded lock's place.
 *
 * The embedded store's lock is an exclusive flock(2) on <data>/job_engine.lock, holding the
 * holder's pid and host. The kernel releases it when the holder's process dies, however it
 * dies, so a standby can take over without any timeout; and two holders can never coexist on
 * one host. Each acquisition raises a fencing epoch stored in the metadata (meta
 * "job_engine_epoch"), which the holder writes into the jobs it moves.
 *
 * The lease. A holder that is stopped (SIGSTOP, a debugger) or whose loop is wedged keeps its
 * flock while it schedules nothing. So the holder renews a lease in the same file, a second
 * line "lease pid=P start=S renewed_boot_ms=T" (its pid, its start time from /proc/PID/stat
 * and CLOCK_BOOTTIME milliseconds), every QL_LOCK_RENEW_MS from its loop. A standby that tries
 * the lock (every second) and finds the lease older than lease_ms (qilin.server.master-lease-ms)
 * checks that pid and start time still name a process of its uid, SIGKILLs it, logs why, and
 * takes the freed lock the normal way, raising the epoch: whatever the old holder might still
 * write is refused by fencing. So scheduling stops for at most about lease_ms + 1 s. The lease
 * is only meaningful on one host (CLOCK_BOOTTIME and pids are per host), which the flock is too.
 */
#ifndef QL_LOCK_H
#define QL_LOCK_H

#include "storage/storage.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct ql_lock ql_lock_t;

typedef struct ql_lock_ops {
    /* What kind of lock this is, recorded by the coordination guard (ql_node.h): "file",
     * "pg", "zk" or "sim". Servers of one store must use one kind. */
    const char *kind;
    /* Tries once, without blocking. *acquired tells; when not, holder (cap bytes) says who
     * holds it, e.g. "pid 4242 on host db1 since 2026-09-01T10:00:00Z". */
    int (*try_acquire)(ql_lock_t *lock, bool *acquired, char *holder, size_t cap);
    /* Whether a holding is still in force as far as the lock itself can tell (the file lock:
     * its file is still the one at the path). The fencing epoch is checked separately. */
    bool (*still_held)(ql_lock_t *lock);
    /* The holder renews its lease (NULL: a lock without one); called every QL_LOCK_RENEW_MS
     * while held. */
    void (*renew)(ql_lock_t *lock);
    void (*release)(ql_lock_t *lock);
    void (*free)(ql_lock_t *lock);
} ql_lock_ops_t;

struct ql_lock {
    const ql_lock_ops_t *ops;
    bool held;
    uint64_t fence; /* epoch of the current holding, 0 when not held */
};

/* How often the holder renews its lease. */
#define QL_LOCK_RENEW_MS 250

typedef struct ql_lock_file_opts {
    int64_t lease_ms; /* a standby kills a holder whose lease is older; 0: no lease check */
    ql_log_t *log;    /* borrowed, may be NULL: the standby's kill decisions */
} ql_lock_file_opts_t;

/* The embedded store's lock on dir (borrowed for the call). The store is used to raise the
 * fencing epoch on acquisition (borrowed; it must outlive the lock). opts may be NULL. */
int ql_lock_file_new(const char *dir, ql_store_t *store, const ql_lock_file_opts_t *opts,
                     ql_lock_t **out);

static inline int ql_lock_try_acquire(ql_lock_t *l, bool *acquired, char *holder, size_t cap) {
    return l->ops->try_acquire(l, acquired, holder, cap);
}
static inline bool ql_lock_still_held(ql_lock_t *l) {
    return l->ops->still_held(l);
}
static inline void ql_lock_renew(ql_lock_t *l) {
    if (l->ops->renew)
        l->ops->renew(l);
}
static inline void ql_lock_release(ql_lock_t *l) {
    l->ops->release(l);
}
static inline void ql_lock_free(ql_lock_t *l) {
    if (l)
        l->ops->free(l);
}

#endif
