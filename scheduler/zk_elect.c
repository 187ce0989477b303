/*
 * Leader election over ZooKeeper (scheduler 100, and scheduler 2's dispatcher; ql_zk.h,
 * docs/zookeeper.md): ephemeral sequential nodes <root>/leader/<guid>-n_<sequence>.
 *
 * DESIGN. A state machine on the loop, restarted on every new session:
 *   CREATING --ZOK--> LISTING (children sorted by the sequence suffix, not by name: the guid
 *   prefix would break the order) --lowest--> LEADER (token: the own node's czxid; an exists
 *   watch on the own node) or --else--> WATCHING (an exists watch on the predecessor only, so a
 *   departure wakes one participant; its deletion leads to LISTING again, never straight to
 *   LEADER: the predecessor may have left while others remain below).
 * The guid protection: when the create's answer is lost with the connection, the node may
 * exist. Once reconnected the participant lists the children and adopts the one carrying its
 * guid (FINDING, then STATING for its czxid) before it creates another; otherwise a node of its
 * own live session could lead with nobody acting on it and the election would stall until the
 * session ended. The guid is drawn anew for every join, so a node of an ended session is never
 * taken for this one's.
 */
#include "zk_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 128

typedef enum { E_IDLE, E_CREATING, E_FINDING, E_STATING, E_LISTING, E_WATCHING, E_LEADER } ephase_t;

struct ql_zk_elect {
    ql_zk_t *zk;
    ql_zk_listener_t listener;
    ql_zk_hold_cb cb;
    void *arg;
    char *dir;
    char prefix[40];         /* "<guid>-n_" */
    char name[NAME_MAX_LEN]; /* own child, "" when none */
    char node[1024];         /* its full path */
    uint64_t token;
    ephase_t phase;
    bool redo;
    uint64_t gen;
    bool leading;
    char leader[NAME_MAX_LEN]; /* the leader last reported as STANDBY */
    char holder[256];
};

static void join(ql_zk_elect_t *e);
static void list(ql_zk_elect_t *e);

static void tell(ql_zk_elect_t *e, ql_zk_hold_kind_t kind, const char *reason) {
    ql_zk_hold_event_t ev = {.kind = kind,
                             .token = e->token,
                             .holder = kind == QL_ZK_STANDBY ? e->holder : "",
                             .node = kind == QL_ZK_HELD ? e->node : "",
                             .reason = reason ? reason : ""};
    e->cb(e->arg, &ev);
}

static void stalled(ql_zk_elect_t *e, const char *what, int rc) {
    e->redo = true;
    if (!zk_lost(rc) && rc != ZCLOSING && rc != ZSESSIONEXPIRED)
        ql_log(e->zk->log, QL_LOG_ERROR, "zk", "election: %s under %s: %s", what, e->dir,
               zerror(rc));
}

static void set_name(ql_zk_elect_t *e, const char *name) {
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->node, sizeof e->node, "%s/%s", e->dir, name);
}

/* The sequence suffix of a participant's node, or -1 for a child that is not one. */
static long long seq_of(const char *name) {
    const char *p = strstr(name, "-n_");
    const char *last = NULL;
    while (p) {
        last = p;
        p = strstr(p + 1, "-n_");
    }
    if (!last || !last[3])
        return -1;
    char *end;
    long long v = strtoll(last + 3, &end, 10);
    return *end ? -1 : v;
}

typedef struct kid {
    const char *name;
    long long seq;
} kid_t;

static int kid_cmp(const void *a, const void *b) {
    const kid_t *x = a, *y = b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* ---- the leader's own node ---- */

static void own_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg);

static void own_exists(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_LEADER)
        return;
    if (r->rc == ZNONODE)
        own_watch(zk, r->gen, ZOO_DELETED_EVENT, e->node, e);
    else if (r->rc != ZOK)
        stalled(e, "cannot watch the own node", r->rc);
}

static void own_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg) {
    (void)path;
    ql_zk_elect_t *e = arg;
    if (gen != e->gen || e->phase != E_LEADER)
        return;
    if (type != ZOO_DELETED_EVENT) {
        if (zk_exists(zk, e->node, own_watch, own_exists, e))
            e->redo = true;
        return;
    }
    e->leading = false;
    tell(e, QL_ZK_LOST, "this participant's node was deleted from outside");
    join(e);
}

/* ---- following ---- */

static void holder_got(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    (void)zk;
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_WATCHING)
        return;
    /* A leader gone already is still reported: the next listing names the next one. */
    snprintf(e->holder, sizeof e->holder, "%s", r->rc == ZOK ? r->data : "");
    ql_log(e->zk->log, QL_LOG_INFO, "zk", "election: following leader=%s holder=\"%s\" me=%s",
           e->leader, e->holder, e->name);
    tell(e, QL_ZK_STANDBY, NULL);
}

static void pred_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg) {
    (void)zk, (void)type, (void)path;
    ql_zk_elect_t *e = arg;
    if (gen == e->gen && e->phase == E_WATCHING)
        list(e);
}

static void pred_exists(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    (void)zk;
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_WATCHING)
        return;
    if (r->rc == ZNONODE)
        list(e); /* gone before the watch was set */
    else if (r->rc != ZOK)
        stalled(e, "cannot watch the predecessor", r->rc);
}

static void listed(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_LISTING)
        return;
    if (r->rc != ZOK) {
        stalled(e, "cannot list", r->rc);
        return;
    }
    kid_t *kids = calloc(r->n_kids ? r->n_kids : 1, sizeof *kids);
    if (!kids) {
        stalled(e, "cannot list", ZSYSTEMERROR);
        return;
    }
    size_t n = 0, me = SIZE_MAX;
    for (size_t i = 0; i < r->n_kids; i++) {
        long long s = seq_of(r->kids[i]);
        if (s >= 0)
            kids[n++] = (kid_t){r->kids[i], s};
    }
    qsort(kids, n, sizeof *kids, kid_cmp);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(kids[i].name, e->name))
            me = i;
    if (me == SIZE_MAX) {
        free(kids);
        if (e->leading) {
            e->leading = false;
            tell(e, QL_ZK_LOST, "this participant's node is gone");
        }
        join(e);
        return;
    }
    if (me == 0) {
        free(kids);
        e->phase = E_LEADER;
        e->leading = true;
        e->leader[0] = '\0';
        if (zk_exists(zk, e->node, own_watch, own_exists, e))
            e->redo = true;
        ql_log(zk->log, QL_LOG_INFO, "zk", "election: leading node=%s token=%llu", e->node,
               (unsigned long long)e->token);
        tell(e, QL_ZK_HELD, NULL);
        return;
    }
    char pred[1024];
    snprintf(pred, sizeof pred, "%s/%s", e->dir, kids[me - 1].name);
    bool new_leader = strcmp(e->leader, kids[0].name) != 0;
    snprintf(e->leader, sizeof e->leader, "%s", kids[0].name);
    char lead[1024];
    snprintf(lead, sizeof lead, "%s/%s", e->dir, kids[0].name);
    free(kids);
    e->phase = E_WATCHING;
    if (zk_exists(zk, pred, pred_watch, pred_exists, e))
        e->redo = true;
    if (new_leader)
        zk_get(zk, lead, NULL, holder_got, e);
}

static void list(ql_zk_elect_t *e) {
    e->phase = E_LISTING;
    e->redo = false;
    e->gen = zk_gen(e->zk);
    if (zk_children(e->zk, e->dir, NULL, listed, e))
        e->redo = true;
}

/* ---- joining ---- */

static void created(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    (void)zk;
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_CREATING)
        return;
    if (r->rc == ZOK) {
        const char *slash = strrchr(r->path, '/');
        set_name(e, slash ? slash + 1 : r->path);
        e->token = (uint64_t)r->stat->czxid;
        list(e);
    } else {
        /* A lost answer: FINDING once reconnected (the node may exist). */
        stalled(e, "cannot create a node", r->rc);
    }
}

static void stated(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_STATING)
        return;
    if (r->rc == ZNONODE || (r->rc == ZOK && r->stat->ephemeralOwner != ql_zk_session_id(zk))) {
        join(e); /* not (or no longer) this session's: start afresh */
    } else if (r->rc != ZOK) {
        stalled(e, "cannot read the own node", r->rc);
    } else {
        e->token = (uint64_t)r->stat->czxid;
        ql_log(zk->log, QL_LOG_INFO, "zk",
               "election: adopted node=%s made by this session before its answer was lost",
               e->node);
        list(e);
    }
}

static void found(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_elect_t *e = arg;
    if (r->gen != e->gen || e->phase != E_FINDING)
        return;
    if (r->rc != ZOK) {
        stalled(e, "cannot list", r->rc);
        return;
    }
    for (size_t i = 0; i < r->n_kids; i++)
        if (!strncmp(r->kids[i], e->prefix, strlen(e->prefix))) {
            set_name(e, r->kids[i]);
            e->phase = E_STATING;
            if (zk_exists(zk, e->node, NULL, stated, e))
                e->redo = true;
            return;
        }
    /* The create never reached ZooKeeper: make it now, with the same guid. */
    e->phase = E_CREATING;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", e->dir, e->prefix);
    if (zk_create(zk, path, ql_zk_node_data(zk), ZOO_EPHEMERAL_SEQUENTIAL, created, e))
        e->redo = true;
}

static void find(ql_zk_elect_t *e) {
    e->phase = E_FINDING;
    e->redo = false;
    e->gen = zk_gen(e->zk);
    if (zk_children(e->zk, e->dir, NULL, found, e))
        e->redo = true;
}

static void join(ql_zk_elect_t *e) {
    char guid[33];
    zk_random_hex(guid);
    snprintf(e->prefix, sizeof e->prefix, "%s-n_", guid);
    e->name[0] = e->node[0] = '\0';
    e->token = 0;
    e->leader[0] = '\0';
    e->phase = E_CREATING;
    e->redo = false;
    e->gen = zk_gen(e->zk);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", e->dir, e->prefix);
    if (zk_create(e->zk, path, ql_zk_node_data(e->zk), ZOO_EPHEMERAL_SEQUENTIAL, created, e))
        e->redo = true;
}

static void redo(ql_zk_elect_t *e) {
    switch (e->phase) {
    case E_CREATING:
    case E_FINDING:
        find(e);
        break;
    case E_STATING:
        e->redo = false;
        if (zk_exists(e->zk, e->node, NULL, stated, e))
            e->redo = true;
        break;
    case E_LISTING:
    case E_WATCHING:
        list(e);
        break;
    case E_LEADER:
        e->redo = false;
        if (zk_exists(e->zk, e->node, own_watch, own_exists, e))
            e->redo = true;
        break;
    default:
        break;
    }
}

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    ql_zk_elect_t *e = arg;
    switch (ev->state) {
    case QL_ZK_CONNECTED:
        join(e);
        break;
    case QL_ZK_RECONNECTED:
        if (e->phase == E_IDLE) /* made while the session was suspended */
            join(e);
        else if (e->redo)
            redo(e);
        break;
    case QL_ZK_EXPIRED:
    case QL_ZK_FAILED:
        zk_cancel(zk, e);
        if (e->leading)
            tell(e, QL_ZK_LOST, ev->reason);
        e->leading = false;
        e->phase = E_IDLE;
        e->name[0] = e->node[0] = '\0';
        e->token = 0;
        break;
    default:
        break;
    }
}

int ql_zk_elect_new(ql_zk_t *zk, ql_zk_hold_cb cb, void *arg, ql_zk_elect_t **out) {
    *out = NULL;
    ql_zk_elect_t *e = calloc(1, sizeof *e);
    if (!e || asprintf(&e->dir, "%s/leader", ql_zk_root(zk)) < 0) {
        free(e);
        return UV_ENOMEM;
    }
    e->zk = zk;
    e->cb = cb;
    e->arg = arg;
    ql_zk_listen(zk, &e->listener, on_state, e);
    if (zk_ready(zk))
        join(e);
    *out = e;
    return 0;
}

void ql_zk_elect_free(ql_zk_elect_t *e) {
    if (!e)
        return;
    ql_zk_unlisten(e->zk, &e->listener);
    zk_cancel(e->zk, e);
    /* Resign: the next participant's watch fires at once. A create still under way is undone
     * when it answers; one whose answer was lost and that was not found yet stays until the
     * session ends. A node carrying this join's guid is this session's: no other has it. */
    if (e->name[0] && zk_current(e->zk, e->gen))
        zk_delete(e->zk, e->node, NULL, NULL);
    free(e->dir);
    free(e);
}

const char *ql_zk_elect_node(const ql_zk_elect_t *e) {
    return e->name;
}
