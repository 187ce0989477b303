/*
 * The global job engine lock over ZooKeeper (scheduler 0 with a connect string; ql_zk.h,
 * docs/zookeeper.md): the ephemeral node <root>/global_job_engine_lock.
 *
 * DESIGN. A small state machine on the loop, restarted on every new session:
 *   CREATING --ZOK--> HELD (token: czxid; an exists watch on the own node)
 *   CREATING --ZNODEEXISTS--> CHECKING (get with a watch) --another's--> STANDBY (woken by the
 *   watch when the holder's node goes, then CREATING again)
 *   CHECKING --own session's node (an earlier answer was lost)--> HELD
 * An answer lost with the connection leaves the step to redo once RECONNECTED: a lost create
 * is resolved by CHECKING, which tells the own node by its ephemeral owner, never by its data.
 * Every answer and watch carries its session's generation; one of an ended session is ignored.
 */
#include "zk_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { L_IDLE, L_CREATING, L_CHECKING, L_STANDBY, L_HELD } lphase_t;

struct ql_zk_lock {
    ql_zk_t *zk;
    ql_zk_listener_t listener;
    ql_zk_hold_cb cb;
    void *arg;
    char *path;
    lphase_t phase;
    bool redo;    /* the current step's answer was lost: redo it once reconnected */
    uint64_t gen; /* the session of the current step */
    uint64_t token;
    bool standby_told; /* STANDBY reported for holder */
    char holder[256];
};

static void try_create(ql_zk_lock_t *l);
static void check(ql_zk_lock_t *l);

static void tell(ql_zk_lock_t *l, ql_zk_hold_kind_t kind, const char *reason) {
    ql_zk_hold_event_t ev = {.kind = kind,
                             .token = l->token,
                             .holder = kind == QL_ZK_STANDBY ? l->holder : "",
                             .node = kind == QL_ZK_HELD ? l->path : "",
                             .reason = reason ? reason : ""};
    l->cb(l->arg, &ev);
}

/* An answer that needs the step redone later, or a refusal that only a new session mends. */
static void stalled(ql_zk_lock_t *l, const char *what, int rc) {
    l->redo = true;
    if (!zk_lost(rc) && rc != ZCLOSING && rc != ZSESSIONEXPIRED)
        ql_log(l->zk->log, QL_LOG_ERROR, "zk", "job engine lock: %s %s: %s", what, l->path,
               zerror(rc));
}

static void own_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg);

static void own_exists(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    (void)zk;
    ql_zk_lock_t *l = arg;
    if (r->gen != l->gen || l->phase != L_HELD)
        return;
    if (r->rc == ZNONODE)
        own_watch(l->zk, r->gen, ZOO_DELETED_EVENT, l->path, l);
    else if (r->rc != ZOK)
        stalled(l, "cannot watch", r->rc);
}

static void hold(ql_zk_lock_t *l, uint64_t czxid) {
    l->phase = L_HELD;
    l->token = czxid;
    l->standby_told = false;
    if (zk_exists(l->zk, l->path, own_watch, own_exists, l))
        l->redo = true;
    ql_log(l->zk->log, QL_LOG_INFO, "zk", "job engine lock held: node=%s token=%llu", l->path,
           (unsigned long long)czxid);
    tell(l, QL_ZK_HELD, NULL);
}

/* The holder's node changed under its watch: deleted from outside (an operator), as far as a
 * live session can tell. */
static void own_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg) {
    (void)zk, (void)path;
    ql_zk_lock_t *l = arg;
    if (gen != l->gen || l->phase != L_HELD)
        return;
    if (type != ZOO_DELETED_EVENT) {
        if (zk_exists(l->zk, l->path, own_watch, own_exists, l))
            l->redo = true;
        return;
    }
    tell(l, QL_ZK_LOST, "the lock node was deleted from outside while this server held it");
    l->token = 0;
    try_create(l);
}

static void created(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    (void)zk;
    ql_zk_lock_t *l = arg;
    if (r->gen != l->gen || l->phase != L_CREATING)
        return;
    if (r->rc == ZOK)
        hold(l, (uint64_t)r->stat->czxid);
    else if (r->rc == ZNODEEXISTS)
        check(l);
    else
        stalled(l, "cannot create", r->rc);
}

static void holder_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg) {
    (void)zk, (void)type, (void)path;
    ql_zk_lock_t *l = arg;
    if (gen != l->gen || l->phase != L_STANDBY)
        return;
    /* Deleted: try to take it; changed (nobody does): read the holder again. */
    if (type == ZOO_DELETED_EVENT)
        try_create(l);
    else
        check(l);
}

static void checked(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_lock_t *l = arg;
    if (r->gen != l->gen || l->phase != L_CHECKING)
        return;
    if (r->rc == ZNONODE) {
        try_create(l);
    } else if (r->rc != ZOK) {
        stalled(l, "cannot read", r->rc);
    } else if (r->stat->ephemeralOwner == ql_zk_session_id(zk)) {
        /* This session made it; only the answer was lost. The get's watch guards it. */
        l->phase = L_HELD;
        l->token = (uint64_t)r->stat->czxid;
        ql_log(zk->log, QL_LOG_INFO, "zk", "job engine lock held: node=%s token=%llu", l->path,
               (unsigned long long)l->token);
        tell(l, QL_ZK_HELD, NULL);
    } else {
        l->phase = L_STANDBY;
        if (!l->standby_told || strcmp(l->holder, r->data)) {
            snprintf(l->holder, sizeof l->holder, "%s", r->data);
            l->standby_told = true;
            ql_log(zk->log, QL_LOG_INFO, "zk", "job engine lock held elsewhere: holder=\"%s\"",
                   l->holder);
            tell(l, QL_ZK_STANDBY, NULL);
        }
    }
}

static void check(ql_zk_lock_t *l) {
    l->phase = L_CHECKING;
    l->redo = false;
    l->gen = zk_gen(l->zk);
    /* Standby or own, the watch wakes this lock when the node changes or goes. */
    if (zk_get(l->zk, l->path, holder_watch, checked, l))
        l->redo = true;
}

static void try_create(ql_zk_lock_t *l) {
    l->phase = L_CREATING;
    l->redo = false;
    l->gen = zk_gen(l->zk);
    if (zk_create(l->zk, l->path, ql_zk_node_data(l->zk), ZOO_EPHEMERAL, created, l))
        l->redo = true;
}

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    ql_zk_lock_t *l = arg;
    switch (ev->state) {
    case QL_ZK_CONNECTED:
        try_create(l);
        break;
    case QL_ZK_RECONNECTED:
        if (l->phase == L_IDLE) { /* made while the session was suspended */
            try_create(l);
            break;
        }
        if (!l->redo)
            break;
        if (l->phase == L_CREATING || l->phase == L_CHECKING)
            check(l); /* a create may have been made: look before making another */
        else if (l->phase == L_HELD && !zk_exists(zk, l->path, own_watch, own_exists, l))
            l->redo = false;
        break;
    case QL_ZK_EXPIRED:
    case QL_ZK_FAILED:
        zk_cancel(zk, l);
        if (l->phase == L_HELD)
            tell(l, QL_ZK_LOST, ev->reason);
        l->phase = L_IDLE;
        l->token = 0;
        l->standby_told = false;
        break;
    default:
        break;
    }
}

int ql_zk_lock_new(ql_zk_t *zk, ql_zk_hold_cb cb, void *arg, ql_zk_lock_t **out) {
    *out = NULL;
    ql_zk_lock_t *l = calloc(1, sizeof *l);
    if (!l || asprintf(&l->path, "%s/global_job_engine_lock", ql_zk_root(zk)) < 0) {
        free(l);
        return UV_ENOMEM;
    }
    l->zk = zk;
    l->cb = cb;
    l->arg = arg;
    ql_zk_listen(zk, &l->listener, on_state, l);
    if (zk_ready(zk))
        try_create(l);
    *out = l;
    return 0;
}

void ql_zk_lock_free(ql_zk_lock_t *l) {
    if (!l)
        return;
    ql_zk_unlisten(l->zk, &l->listener);
    zk_cancel(l->zk, l);
    /* While the session lives the node is this server's: no other can have made it. A create
     * still under way is undone when it answers (zk_create's cancellation rule). */
    if (l->phase == L_HELD && zk_current(l->zk, l->gen))
        zk_delete(l->zk, l->path, NULL, NULL);
    free(l->path);
    free(l);
}
