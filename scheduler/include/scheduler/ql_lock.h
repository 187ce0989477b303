/*
 * The job engine lock (docs/design/cluster.md, DefaultScheduler): only the holder schedules on a
 * metadata store. An interface, polled by the node (a standby tries every second, the holder
 * checks every second and renews every QL_LOCK_RENEW_MS), so the ZooKeeper lock
 * (/job_engine/global_job_engine_lock) and leader election can take the other locks' place. The
 * node picks the lock from the store's backend (server/node_lock.c): the file lock on LMDB, the
 * PostgreSQL lock on PostgreSQL.
 *
 * The file lock (LMDB: servers on one host share a data directory) is an exclusive flock(2) on
 * <data>/job_engine.lock, holding the holder's pid and host. The kernel releases it when the
 * holder's process dies, however it dies, so a standby can take over without any timeout; and
 * two holders can never coexist on one host. Each acquisition raises a fencing epoch stored in
 * the metadata (meta "job_engine_epoch"), which the holder writes into the jobs it moves.
 *
 * Its lease. A holder that is stopped (SIGSTOP, a debugger) or whose loop is wedged keeps its
 * flock while it schedules nothing. So the holder renews a lease in the same file, a second
 * line "lease pid=P start=S renewed_boot_ms=T" (its pid, its start time from /proc/PID/stat
 * and CLOCK_BOOTTIME milliseconds), every QL_LOCK_RENEW_MS from its loop. A standby that tries
 * the lock (every second) and finds the lease older than lease_ms (qilin.server.master-lease-ms)
 * checks that pid and start time still name a process of its uid, SIGKILLs it, logs why, and
 * takes the freed lock the normal way, raising the epoch: whatever the old holder might still
 * write is refused by fencing. So scheduling stops for at most about lease_ms + 1 s. The lease
 * is only meaningful on one host (CLOCK_BOOTTIME and pids are per host), which the flock is too.
 *
 * The PostgreSQL lock (servers on several hosts share a PostgreSQL store) is the store's
 * session advisory lock on a session of its own (ql_store_lock_open, storage/ql_store.h), with
 * the same epoch, a holder record (server id, API address, pid, epoch) that standbys log, and
 * the same lease on the database's clock: a standby ends a stale holder's lock session
 * (pg_terminate_backend) instead of killing its process, which may be on another host.
 *
 * The ZooKeeper lock (scheduler 0 with kylin.env.zookeeper-connect-string, and scheduler 100's
 * leader election; docs/zookeeper.md) holds an ephemeral node on the server's ZooKeeper session
 * instead; its token is the node's creation zxid, claimed in the store (ql_fence_claim) before
 * the holding counts. It learns of changes by events rather than by polling: it calls `changed`
 * so that its owner looks at once, and it reports a lost connection through `suspended`.
 */
#ifndef QL_LOCK_H
#define QL_LOCK_H

#include "scheduler/ql_zk.h"
#include "storage/storage.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct ql_lock ql_lock_t;

typedef struct ql_lock_ops {
    /* What kind of lock this is, recorded by the coordination guard (ql_node.h): "file",
     * "pg", "zk" or "sim". Servers of one store must use one kind. */
    const char *kind;
    /* Tries once, without waiting for another holder. *acquired tells; when not, holder (cap
     * bytes) says who holds it, e.g. "pid 4242 on host db1, fencing epoch 7". On an error the
     * lock may say more than the code in lock->why. */
    int (*try_acquire)(ql_lock_t *lock, bool *acquired, char *holder, size_t cap);
    /* Whether a holding is still in force as far as the lock itself can tell (the file lock:
     * its file is still the one at the path; the PostgreSQL lock: its session lives and answers
     * in time). When not, lock->why may say why. The fencing epoch is checked separately. */
    bool (*still_held)(ql_lock_t *lock);
    /* The holder renews its lease (NULL: a lock without one); called every QL_LOCK_RENEW_MS
     * while held. */
    void (*renew)(ql_lock_t *lock);
    /* The renewal itself fails once the fencing epoch moved, and still_held reports it (the
     * PostgreSQL lock): the holder then need not read the epoch itself, a read that would wait
     * for the network on a master cut off from the database. */
    bool renewal_checks_epoch;
    void (*release)(ql_lock_t *lock);
    void (*free)(ql_lock_t *lock);
    /* The API address ("host:port") recorded with the holdings (NULL: a lock that records
     * none); a server listening on port 0 learns it only once it listens. */
    void (*set_address)(ql_lock_t *lock, const char *address);
} ql_lock_ops_t;

struct ql_lock {
    const ql_lock_ops_t *ops;
    bool held;
    uint64_t fence; /* epoch of the current holding, 0 when not held */
    char why[512];  /* why the last try failed or the holding ended, "" when the lock has no more
                       to say than its error code */
    /* The holding may still be in force but the lock cannot tell (the ZooKeeper connection is
     * lost, the session may live on): the holder starts nothing new until it clears, and
     * still_held says when it is over. Always false for the polled locks. */
    bool suspended;
    /* Set by the owner (may be NULL): a lock that learns of changes by events (ZooKeeper)
     * calls it on the loop thread after each, so the owner tries, checks or pauses at once
     * instead of at its next poll. It may run inside try_acquire too: it should only
     * schedule that look (a zero-delay timer), never act inside. */
    void (*changed)(void *arg);
    void *changed_arg;
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

typedef struct ql_lock_pg_opts {
    const char *server_id; /* recorded with each holding (ql_config_server_id); copied */
    const char *address;   /* the API's "host:port"; copied */
    int64_t lease_ms;      /* a standby ends a holder whose lease is older; 0: no lease check */
    ql_log_t *log;         /* borrowed, may be NULL: the standby's decisions */
} ql_lock_pg_opts_t;

/* The PostgreSQL store's lock (store borrowed; it must outlive the lock). Opens the lock's own
 * session at once, so a proxy that pools transactions is refused here, with err saying why. */
int ql_lock_pg_new(ql_store_t *store, const ql_lock_pg_opts_t *opts, ql_lock_t **out,
                   ql_err_t *err);

typedef struct ql_lock_zk_opts {
    uv_loop_t *loop;   /* borrowed: the session's loop; it must run until the session is freed */
    ql_store_t *store; /* borrowed, must outlive the lock: where tokens are claimed */
    /* Borrowed, may be NULL, must outlive the lock: the claim is one mutation of this writer
     * (ql_writer_call, so try_acquire must not run inside one of its answers); NULL: a write
     * transaction of the lock's own. */
    ql_writer_t *writer;
    ql_zk_opts_t zk; /* the session (ql_zk_opts_from_config); its log is the lock's too */
    bool elect;      /* scheduler 100: leader election; else the node global_job_engine_lock */
} ql_lock_zk_opts_t;

/* The ZooKeeper lock: opens the server's session (ql_zk_new) and joins the lock or the
 * election at the first try_acquire. try_acquire claims a won node's token in the store before
 * it reports the lock acquired; release deletes the node (the next server takes over at once)
 * and the next try_acquire joins anew; free closes the session on the loop (the loop must run
 * until it is closed). Errors as ql_zk_new's. */
int ql_lock_zk_new(const ql_lock_zk_opts_t *opts, ql_lock_t **out, ql_err_t *err);

/* The ZooKeeper lock's session (borrowed: it lives as long as the lock), for the recipes that
 * share it (scheduler 2's per-job locks, ql_zk_jobs_new); NULL for any other lock. */
ql_zk_t *ql_lock_zk_session(ql_lock_t *lock);

/* The meta key holding the id of the ZooKeeper ensemble (its fence_id node) that the store's job
 * servers use (docs/zookeeper.md, fence_id). The ZooKeeper lock reads the ensemble's id before it
 * joins, and its claim, in the claim's transaction, records the id when the key is missing or
 * empty and refuses with QL_ECOORD when it differs (ZooKeeper was reset or replaced: its tokens
 * restart small). The refusal lasts for the lock's life: later tries acquire nothing and name
 * the refusal as the holder. `qilin cluster reset-coordination`
 * empties the key (ql_node_reset_coordination). */
#define QL_LOCK_ZK_ENSEMBLE_KEY "coordination_zk_fence_id"

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
static inline void ql_lock_set_address(ql_lock_t *l, const char *address) {
    if (l->ops->set_address)
        l->ops->set_address(l, address);
}
static inline void ql_lock_free(ql_lock_t *l) {
    if (l)
        l->ops->free(l);
}

#endif
