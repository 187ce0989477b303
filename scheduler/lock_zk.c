/*
 * The job engine lock over ZooKeeper as a ql_lock_t (ql_lock.h; docs/zookeeper.md, How a server
 * uses it): scheduler 0 with a connect string holds the ephemeral node global_job_engine_lock
 * (ql_zk_lock_new), scheduler 100 leader election (ql_zk_elect_new). The node's polled
 * master/standby machinery drives it, woken at once by the lock's `changed` hook.
 *
 * DESIGN.
 * - The lock owns the server's one ZooKeeper session. The recipe is made by try_acquire when
 *   there is none, and freed by release (which deletes this server's node, so a standby takes
 *   over at once); a demotion therefore rejoins with a new node and a new, larger token. Not
 *   while the connection is lost: then release keeps the recipe (see zk_release).
 * - HELD is not yet a holding: try_acquire first claims the node's czxid in the store
 *   (ql_fence_claim, one mutation of the server's writer, waited for), and
 *   only a committed claim makes the token this server's fence. A refused claim means the
 *   holding is stale (a later one claimed more): the node is given up at once.
 * - Session states: SUSPENDED sets `suspended` (the node picks nothing new and the dispatcher
 *   scans nothing; running steps go on), RECONNECTED clears it. DOUBTFUL (suspended for
 *   qilin.cluster.suspend-kill-ms) and EXPIRED end the holding as far as still_held tells, so
 *   the node demotes and stops the running steps; EXPIRED also opens a new session at once.
 *   Any state change calls `changed`.
 * - The ensemble's identity (docs/zookeeper.md, fence_id): before it joins, the lock reads the
 *   ensemble's fence_id node (ql_zk_fence_id_new); the claim's transaction compares it with the
 *   store's record (QL_LOCK_ZK_ENSEMBLE_KEY), recording it when there is none. A different id
 *   means a reset or replaced ZooKeeper: that try fails with QL_ECOORD, saying so and naming
 *   `qilin cluster reset-coordination`; the lock gives its node up and never joins again (later
 *   tries report it as the holder's place).
 * - Everything runs on the loop thread; the claim's transaction is the only wait.
 */
#include "scheduler/ql_lock.h"
#include "scheduler/ql_zk.h"

#include "storage/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ql_lock_t base;
    ql_zk_t *zk;
    ql_zk_listener_t listener;
    ql_store_t *store;
    ql_writer_t *writer;
    ql_log_t *log;
    bool elect;
    ql_zk_lock_t *lock;    /* scheduler 0: the recipe while joined */
    ql_zk_elect_t *party;  /* scheduler 100: the recipe while joined */
    uint64_t offered;      /* the token of a HELD not claimed yet; 0: none */
    uint64_t holding;      /* the token of the recipe's current HELD (claimed or not); 0: none */
    char holder[256];      /* the holder a STANDBY named */
    char ended[256];       /* why the holding (or the session) ended, "" while it lasts */
    char failed[256];      /* FAILED's reason: the session is unusable */
    ql_zk_fence_id_t *fid; /* the read of the ensemble's fence_id, until it answers */
    char ensemble[33];     /* the ensemble's fence_id, "" until read */
    bool fid_failed;       /* the read failed: made again at the next try */
    char refused[512];     /* why this lock refuses to claim (another ensemble), "" if not */
} zk_lock_t;

static void changed(zk_lock_t *l) {
    if (l->base.changed)
        l->base.changed(l->base.changed_arg);
}

static void on_hold(void *arg, const ql_zk_hold_event_t *ev) {
    zk_lock_t *l = arg;
    switch (ev->kind) {
    case QL_ZK_HELD:
        l->offered = l->holding = ev->token;
        l->holder[0] = '\0';
        break;
    case QL_ZK_STANDBY:
        l->offered = l->holding = 0;
        snprintf(l->holder, sizeof l->holder, "%s", ev->holder[0] ? ev->holder : "another server");
        break;
    case QL_ZK_LOST:
        l->offered = l->holding = 0;
        if (l->base.held && ev->token == l->base.fence && !l->ended[0])
            snprintf(l->ended, sizeof l->ended, "the ZooKeeper holding ended: %s", ev->reason);
        break;
    }
    changed(l);
}

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    zk_lock_t *l = arg;
    switch (ev->state) {
    case QL_ZK_SUSPENDED:
        l->base.suspended = true;
        break;
    case QL_ZK_CONNECTED:
    case QL_ZK_RECONNECTED:
        l->base.suspended = false;
        l->failed[0] = '\0';
        break;
    case QL_ZK_DOUBTFUL:
        if (l->base.held && !l->ended[0])
            snprintf(l->ended, sizeof l->ended,
                     "the ZooKeeper connection has been lost for qilin.cluster.suspend-kill-ms "
                     "(%s): another server may take over",
                     ev->reason);
        break;
    case QL_ZK_EXPIRED:
        l->base.suspended = false;
        l->offered = l->holding = 0;
        if (l->base.held && !l->ended[0])
            snprintf(l->ended, sizeof l->ended, "the ZooKeeper session ended: %s", ev->reason);
        ql_log(l->log, QL_LOG_WARN, "node",
               "ZooKeeper session ended reason=\"%s\": opening a new one; this server rejoins "
               "with a new node and a new token",
               ev->reason);
        ql_zk_reopen(zk);
        break;
    case QL_ZK_FAILED:
        l->offered = l->holding = 0;
        snprintf(l->failed, sizeof l->failed, "%s", ev->reason);
        if (l->base.held && !l->ended[0])
            snprintf(l->ended, sizeof l->ended, "the ZooKeeper session failed: %s", ev->reason);
        break;
    case QL_ZK_CONNECTING:
        break;
    }
    changed(l);
}

static bool joined(const zk_lock_t *l) {
    return l->lock || l->party;
}

static int join(zk_lock_t *l) {
    l->offered = l->holding = 0;
    l->holder[0] = '\0';
    return l->elect ? ql_zk_elect_new(l->zk, on_hold, l, &l->party)
                    : ql_zk_lock_new(l->zk, on_hold, l, &l->lock);
}

/* Gives the node up (a standby or the next participant takes over at once). */
static void leave(zk_lock_t *l) {
    ql_zk_lock_free(l->lock);
    ql_zk_elect_free(l->party);
    l->lock = NULL;
    l->party = NULL;
    l->offered = l->holding = 0;
}

static bool usable(const zk_lock_t *l) {
    ql_zk_state_t s = ql_zk_state(l->zk);
    return s == QL_ZK_CONNECTED || s == QL_ZK_RECONNECTED;
}

typedef struct {
    uint64_t token;
    const char *ensemble; /* the ensemble's fence_id */
    bool recorded;        /* set: the claim recorded it (the store had none) */
} claim_arg_t;

/* The ensemble check, then the claim, in one transaction. */
static int claim_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    claim_arg_t *a = arg;
    char rec[64] = "";
    int rc = ql_meta_get_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, rec, sizeof rec);
    if (rc && rc != QL_ENOTFOUND)
        return ql_err_set(err, rc, "cannot read the store's ZooKeeper ensemble id: %s",
                          ql_strerror(rc));
    if (rec[0] && strcmp(rec, a->ensemble))
        return ql_err_set(err, QL_ECOORD,
                          "ZooKeeper was reset or replaced: its ensemble id (the fence_id node) is "
                          "%s, but this store's job servers recorded %s; its tokens restart "
                          "small, so this server does not claim the lock. If the move is "
                          "deliberate, stop every job server, then run `qilin cluster "
                          "reset-coordination`",
                          a->ensemble, rec);
    if (!rec[0]) {
        if ((rc = ql_meta_put_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, a->ensemble)))
            return ql_err_set(err, rc, "cannot record the ZooKeeper ensemble id: %s",
                              ql_strerror(rc));
        a->recorded = true;
    }
    return ql_fence_claim(txn, a->token, err);
}

/* The claim of token in the store: one mutation of the writer, or a write transaction of its
 * own without one. */
static int claim(zk_lock_t *l, uint64_t token, ql_err_t *err) {
    claim_arg_t a = {.token = token, .ensemble = l->ensemble};
    int rc;
    if (l->writer) {
        rc = ql_writer_call(l->writer, claim_fn, &a, err);
    } else {
        ql_txn_t *txn;
        if ((rc = ql_txn_begin(l->store, true, &txn)))
            return ql_err_set(err, rc, "cannot claim the fencing token: %s", ql_strerror(rc));
        if ((rc = claim_fn(txn, &a, err)))
            ql_txn_abort(txn);
        else if ((rc = ql_txn_commit(txn)))
            ql_err_set(err, rc, "cannot claim the fencing token: %s", ql_strerror(rc));
    }
    if (!rc && a.recorded)
        ql_log(l->log, QL_LOG_INFO, "node",
               "recorded the ZooKeeper ensemble of this store's job servers: fence_id=%s",
               l->ensemble);
    return rc;
}

/* The ensemble's fence_id, read (status 0) or not. */
static void fid_done(void *arg, int status, const char *id, bool created) {
    zk_lock_t *l = arg;
    (void)created;
    if (status == 0)
        snprintf(l->ensemble, sizeof l->ensemble, "%s", id);
    else
        l->fid_failed = true;
    changed(l);
}

/* 0 once the ensemble's id is known; else starts or waits for its read (1) or fails. */
static int ensemble_known(zk_lock_t *l) {
    if (l->ensemble[0])
        return 0;
    if (l->fid_failed) {
        ql_zk_fence_id_free(l->fid);
        l->fid = NULL;
        l->fid_failed = false;
    }
    if (!l->fid) {
        int rc = ql_zk_fence_id_new(l->zk, fid_done, l, &l->fid);
        if (rc) {
            snprintf(l->base.why, sizeof l->base.why, "cannot read the ensemble's fence_id: %s",
                     ql_strerror(rc));
            return rc;
        }
    }
    return l->ensemble[0] ? 0 : 1;
}

static int zk_try_acquire(ql_lock_t *base, bool *acquired, char *holder, size_t cap) {
    zk_lock_t *l = (zk_lock_t *)base;
    *acquired = false;
    base->why[0] = '\0';
    if (l->failed[0]) {
        snprintf(base->why, sizeof base->why, "ZooKeeper: %s", l->failed);
        if (ql_zk_state(l->zk) == QL_ZK_FAILED)
            ql_zk_reopen(l->zk); /* try again at the next poll */
        return QL_EZOOKEEPER;
    }
    if (l->refused[0]) {
        /* Said once, as the claim's error; the node then logs a holder only when it changes. */
        if (holder && cap)
            snprintf(holder, cap,
                     "nobody: this server does not claim it on another ZooKeeper ensemble than "
                     "the store's (see the error above; `qilin cluster reset-coordination`)");
        return 0;
    }
    int known = ensemble_known(l);
    if (known < 0)
        return known;
    if (known > 0) {
        if (holder && cap)
            snprintf(holder, cap,
                     "nobody known yet (reading the ZooKeeper ensemble's fence_id, %s)",
                     ql_zk_state_name(ql_zk_state(l->zk)));
        return 0;
    }
    if (!joined(l)) {
        int rc = join(l);
        if (rc) {
            snprintf(base->why, sizeof base->why, "cannot join the ZooKeeper %s: %s",
                     l->elect ? "election" : "lock", ql_strerror(rc));
            return rc;
        }
    }
    if (l->offered && usable(l)) {
        uint64_t token = l->offered;
        ql_err_t err = {0};
        int rc = claim(l, token, &err);
        if (rc) {
            /* Stale (a later holding claimed more) or the store failed: not a holding. Give the
             * node up so that another server is not kept waiting behind it; rejoin next time. */
            snprintf(base->why, sizeof base->why,
                     "the ZooKeeper %s was won with token %llu, but its claim failed (this "
                     "server gave its node up and rejoins): %.300s",
                     l->elect ? "election" : "lock", (unsigned long long)token, err.msg);
            leave(l);
            if (rc == QL_ECOORD) { /* it does not rejoin: the message says why and what to do */
                snprintf(l->refused, sizeof l->refused, "%s", err.msg);
                snprintf(base->why, sizeof base->why, "%s", err.msg);
            }
            return rc;
        }
        base->held = true;
        base->fence = token;
        l->ended[0] = '\0';
        *acquired = true;
        return 0;
    }
    if (holder && cap) {
        if (l->holder[0])
            snprintf(holder, cap, "%s", l->holder);
        else
            snprintf(holder, cap, "nobody known yet (ZooKeeper %s, %s)",
                     l->elect ? "election under way" : "lock not answered yet",
                     ql_zk_state_name(ql_zk_state(l->zk)));
    }
    return 0;
}

static bool zk_still_held(ql_lock_t *base) {
    zk_lock_t *l = (zk_lock_t *)base;
    if (!base->held)
        return false;
    if (l->ended[0]) {
        snprintf(base->why, sizeof base->why, "%s", l->ended);
        return false;
    }
    return true;
}

/* Without a connection the node cannot be deleted: the delete would be lost with the connection,
 * leaving a node of this live session that nobody acts on, in the way of every other server
 * until the session ends. So the recipe is kept then: if the same session comes back, its
 * holding is intact and is offered again (the claim of an equal token is accepted unless a
 * later holding claimed more); if the session ends, the node goes with it and the recipe rejoins
 * on the next one. */
static void zk_release(ql_lock_t *base) {
    zk_lock_t *l = (zk_lock_t *)base;
    if (joined(l) && !usable(l))
        l->offered = l->holding;
    else
        leave(l);
    base->held = false;
    base->fence = 0;
    l->ended[0] = '\0';
}

static void zk_free(ql_lock_t *base) {
    zk_lock_t *l = (zk_lock_t *)base;
    leave(l); /* the session closes next: its nodes go with it in any case */
    ql_zk_fence_id_free(l->fid);
    base->held = false;
    ql_zk_unlisten(l->zk, &l->listener);
    /* The session closes on the loop (its nodes vanish at once); the loop runs until it is
     * freed, as for every other handle of the server. */
    ql_zk_close(l->zk, NULL, NULL);
    free(l);
}

static const ql_lock_ops_t zk_ops = {
    .kind = "zk",
    .try_acquire = zk_try_acquire,
    .still_held = zk_still_held,
    .release = zk_release,
    .free = zk_free,
};

int ql_lock_zk_new(const ql_lock_zk_opts_t *opts, ql_lock_t **out, ql_err_t *err) {
    *out = NULL;
    if (!opts->loop || !opts->store)
        return ql_err_set(err, QL_EINVAL, "the ZooKeeper lock needs a loop and a store");
    zk_lock_t *l = calloc(1, sizeof *l);
    if (!l)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    l->base.ops = &zk_ops;
    l->store = opts->store;
    l->writer = opts->writer;
    l->log = opts->zk.log;
    l->elect = opts->elect;
    int rc = ql_zk_new(opts->loop, &opts->zk, &l->zk, err);
    if (rc) {
        free(l);
        return rc;
    }
    ql_zk_listen(l->zk, &l->listener, on_state, l);
    *out = &l->base;
    return 0;
}

ql_zk_t *ql_lock_zk_session(ql_lock_t *lock) {
    return lock && lock->ops == &zk_ops ? ((zk_lock_t *)lock)->zk : NULL;
}
