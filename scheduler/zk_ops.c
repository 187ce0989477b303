/*
 * The asynchronous ZooKeeper requests of the session (zk_int.h): the library's completion and
 * watcher functions copy what they get and queue it for the loop; the loop drains it and calls
 * the caller back. Ownership is zk_int.h's: a request or watch belongs to its connection until
 * drained, and whatever a closed handle still owed is answered ZCLOSING or dropped.
 */
#include "zk_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OP_CREATE, OP_DELETE, OP_EXISTS, OP_GET, OP_CHILDREN };

/* ---- the library's threads ---- */

/* Queues r's answer for the loop (completion thread). */
static void answered(zk_req_t *r, int rc) {
    ql_zk_t *zk = r->conn->zk;
    r->rc = rc;
    pthread_mutex_lock(&zk->q_lock);
    if (r->prev)
        r->prev->next = r->next;
    else
        r->conn->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
    pthread_mutex_unlock(&zk->q_lock);
    r->ev.kind = EV_REQ;
    r->ev.conn = r->conn;
    r->ev.req = r;
    zk_push(zk, &r->ev);
}

static void keep_stat(zk_req_t *r, int rc, const struct Stat *stat) {
    if (rc == ZOK && stat) {
        r->stat = *stat;
        r->has_stat = true;
    }
}

static void create_done(int rc, const char *value, const struct Stat *stat, const void *data) {
    zk_req_t *r = (zk_req_t *)data;
    keep_stat(r, rc, stat);
    /* Without the node's name its maker cannot know what it holds: a lost answer, as far as it
     * can tell (the recipes then look for their node). */
    if (rc == ZOK && !(r->str = strdup(value ? value : r->path)))
        rc = ZCONNECTIONLOSS;
    if (rc == ZOK && r->ephemeral_create && atomic_exchange(&r->conn->lose_next_create, false)) {
        zk_test_drop_connection_of(r->conn->zk, r->conn);
        rc = ZCONNECTIONLOSS;
    }
    answered(r, rc);
}

static void void_done(int rc, const void *data) {
    answered((zk_req_t *)data, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data) {
    zk_req_t *r = (zk_req_t *)data;
    keep_stat(r, rc, stat);
    answered(r, rc);
}

static void data_done(int rc, const char *value, int len, const struct Stat *stat,
                      const void *data) {
    zk_req_t *r = (zk_req_t *)data;
    keep_stat(r, rc, stat);
    if (rc == ZOK) {
        size_t n = value && len > 0 ? (size_t)len : 0;
        if ((r->str = malloc(n + 1))) {
            memcpy(r->str, n ? value : "", n);
            r->str[n] = '\0';
            r->len = n;
        } else {
            rc = ZSYSTEMERROR;
        }
    }
    answered(r, rc);
}

static void children_done(int rc, const struct String_vector *v, const struct Stat *stat,
                          const void *data) {
    zk_req_t *r = (zk_req_t *)data;
    keep_stat(r, rc, stat);
    if (rc == ZOK && v && v->count > 0) {
        r->kids = calloc((size_t)v->count, sizeof *r->kids);
        for (int i = 0; r->kids && i < v->count; i++)
            if ((r->kids[r->n_kids] = strdup(v->data[i])))
                r->n_kids++;
        if (!r->kids || r->n_kids != (size_t)v->count)
            rc = ZSYSTEMERROR;
    }
    answered(r, rc);
}

static void watch_fired(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh, (void)state, (void)path;
    zk_watch_t *w = ctx;
    /* Session events reach every registered watch; the session's own watcher handles them. */
    if (type == ZOO_SESSION_EVENT || !w)
        return;
    ql_zk_t *zk = w->conn->zk;
    pthread_mutex_lock(&zk->q_lock);
    bool first = !w->fired;
    if (first) {
        w->fired = true;
        w->type = type;
        if (w->prev)
            w->prev->next = w->next;
        else
            w->conn->watches = w->next;
        if (w->next)
            w->next->prev = w->prev;
        w->prev = w->next = NULL;
    }
    pthread_mutex_unlock(&zk->q_lock);
    if (first) {
        w->ev.kind = EV_WATCH;
        w->ev.conn = w->conn;
        w->ev.watch = w;
        zk_push(zk, &w->ev);
    }
}

/* ---- the loop ---- */

static void req_free(zk_req_t *r) {
    free(r->path);
    free(r->str);
    for (size_t i = 0; i < r->n_kids; i++)
        free(r->kids[i]);
    free(r->kids);
    free(r);
}

static void watch_free(zk_watch_t *w) {
    free(w->path);
    free(w);
}

/* A request on the current handle, linked into its list (and its watch into the watches)
 * before the library can answer it. */
static zk_req_t *req_new(ql_zk_t *zk, int kind, const char *path, zk_watch_cb watch, zk_done_cb cb,
                         void *arg) {
    zk_conn_t *c = zk->cur;
    zk_req_t *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return NULL;
    }
    r->conn = c;
    r->kind = kind;
    r->cb = cb;
    r->arg = arg;
    if (watch) {
        zk_watch_t *w = calloc(1, sizeof *w);
        if (!w || !(w->path = strdup(path))) {
            free(w);
            req_free(r);
            return NULL;
        }
        w->conn = c;
        w->cb = watch;
        w->arg = arg;
        r->watch = w;
    }
    pthread_mutex_lock(&zk->q_lock);
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    if (r->watch) {
        r->watch->next = c->watches;
        if (c->watches)
            c->watches->prev = r->watch;
        c->watches = r->watch;
    }
    pthread_mutex_unlock(&zk->q_lock);
    return r;
}

static int zrc_to_ql(int zrc) {
    return zrc == ZBADARGUMENTS ? QL_EINVAL : zrc == ZSYSTEMERROR ? UV_ENOMEM : QL_EZOOKEEPER;
}

/* Issues r through the library under zh_lock. When the library refuses, nobody answers: the
 * request stays linked, silenced, until its handle is closed (the library might still hold
 * it), and the caller gets an error. */
static int issue(ql_zk_t *zk, zk_req_t *r, const char *data, int mode) {
    pthread_mutex_lock(&zk->zh_lock);
    zhandle_t *zh = r->conn->zh;
    int zrc = ZINVALIDSTATE;
    watcher_fn wf = r->watch ? watch_fired : NULL;
    if (zh) {
        switch (r->kind) {
        case OP_CREATE:
            zrc = zoo_acreate2(zh, r->path, data, data ? (int)strlen(data) : -1,
                               &ZOO_OPEN_ACL_UNSAFE, mode, create_done, r);
            break;
        case OP_DELETE:
            zrc = zoo_adelete(zh, r->path, -1, void_done, r);
            break;
        case OP_EXISTS:
            zrc = zoo_awexists(zh, r->path, wf, r->watch, stat_done, r);
            break;
        case OP_GET:
            zrc = zoo_awget(zh, r->path, wf, r->watch, data_done, r);
            break;
        default:
            zrc = zoo_awget_children2(zh, r->path, wf, r->watch, children_done, r);
            break;
        }
    }
    pthread_mutex_unlock(&zk->zh_lock);
    if (zrc == ZOK)
        return 0;
    r->cb = NULL;
    if (r->watch)
        r->watch->cb = NULL;
    ql_log(zk->log, QL_LOG_WARN, "zk", "request on %s refused by the ZooKeeper client: %s", r->path,
           zerror(zrc));
    return zrc_to_ql(zrc);
}

static int submit(ql_zk_t *zk, int kind, const char *path, const char *data, int mode,
                  zk_watch_cb watch, zk_done_cb cb, void *arg) {
    if (!zk->cur || zk->cur->closing || !zk->cur->opened)
        return QL_EZOOKEEPER;
    zk_req_t *r = req_new(zk, kind, path, watch, cb, arg);
    if (!r)
        return UV_ENOMEM;
    r->ephemeral_create = kind == OP_CREATE && (mode & ZOO_EPHEMERAL);
    return issue(zk, r, data, mode);
}

int zk_create(ql_zk_t *zk, const char *path, const char *data, int mode, zk_done_cb cb, void *arg) {
    return submit(zk, OP_CREATE, path, data ? data : "", mode, NULL, cb, arg);
}

int zk_delete(ql_zk_t *zk, const char *path, zk_done_cb cb, void *arg) {
    return submit(zk, OP_DELETE, path, NULL, 0, NULL, cb, arg);
}

int zk_exists(ql_zk_t *zk, const char *path, zk_watch_cb watch, zk_done_cb cb, void *arg) {
    return submit(zk, OP_EXISTS, path, NULL, 0, watch, cb, arg);
}

int zk_get(ql_zk_t *zk, const char *path, zk_watch_cb watch, zk_done_cb cb, void *arg) {
    return submit(zk, OP_GET, path, NULL, 0, watch, cb, arg);
}

int zk_children(ql_zk_t *zk, const char *path, zk_watch_cb watch, zk_done_cb cb, void *arg) {
    return submit(zk, OP_CHILDREN, path, NULL, 0, watch, cb, arg);
}

/* Whether the library kept r's watch: exists registers one on a node and on a missing node,
 * get and children only on a node that exists. */
static bool watch_registered(const zk_req_t *r) {
    return r->rc == ZOK || (r->kind == OP_EXISTS && r->rc == ZNONODE);
}

void zk_req_drained(ql_zk_t *zk, zk_req_t *r) {
    if (r->watch && !watch_registered(r)) {
        zk_watch_t *w = r->watch;
        pthread_mutex_lock(&zk->q_lock);
        if (w->prev)
            w->prev->next = w->next;
        else
            r->conn->watches = w->next;
        if (w->next)
            w->next->prev = w->prev;
        pthread_mutex_unlock(&zk->q_lock);
        watch_free(w);
    }
    zk_result_t res = {.rc = r->rc,
                       .gen = r->conn->gen,
                       .stat = r->has_stat ? &r->stat : NULL,
                       .path = r->kind == OP_CREATE ? r->str : NULL,
                       .data = r->kind == OP_GET ? r->str : NULL,
                       .len = r->len,
                       .kids = (const char *const *)r->kids,
                       .n_kids = r->n_kids};
    if (r->cb)
        r->cb(zk, &res, r->arg);
    else if (r->ephemeral_create && r->rc == ZOK && r->conn == zk->cur && !r->conn->closing)
        /* Its maker gave it up while it was being made: undo it, or it would hold a lock (or
         * stall an election) for as long as this session lives. */
        zk_delete(zk, r->str, NULL, NULL);
    req_free(r);
}

void zk_watch_drained(ql_zk_t *zk, zk_watch_t *w) {
    if (w->cb)
        w->cb(zk, w->conn->gen, w->type, w->path, w->arg);
    watch_free(w);
}

void zk_conn_flush(ql_zk_t *zk, zk_conn_t *c) {
    pthread_mutex_lock(&zk->q_lock);
    zk_req_t *reqs = c->reqs;
    zk_watch_t *watches = c->watches;
    c->reqs = NULL;
    c->watches = NULL;
    pthread_mutex_unlock(&zk->q_lock);
    while (watches) {
        zk_watch_t *w = watches;
        watches = w->next;
        watch_free(w);
    }
    while (reqs) {
        zk_req_t *r = reqs;
        reqs = r->next;
        r->watch = NULL; /* freed above with the handle's watches */
        r->rc = ZCLOSING;
        r->has_stat = false;
        zk_req_drained(zk, r);
    }
}

void zk_cancel(ql_zk_t *zk, void *arg) {
    pthread_mutex_lock(&zk->q_lock);
    for (zk_conn_t *c = zk->conns; c; c = c->next_conn) {
        for (zk_req_t *r = c->reqs; r; r = r->next)
            if (r->arg == arg)
                r->cb = NULL;
        for (zk_watch_t *w = c->watches; w; w = w->next)
            if (w->arg == arg)
                w->cb = NULL;
    }
    for (zk_ev_t *e = zk->q_head; e; e = e->next) {
        if (e->kind == EV_REQ && e->req->arg == arg)
            e->req->cb = NULL;
        if (e->kind == EV_WATCH && e->watch->arg == arg)
            e->watch->cb = NULL;
    }
    pthread_mutex_unlock(&zk->q_lock);
}

void zk_test_lose_next_create(ql_zk_t *zk) {
    if (zk->cur)
        atomic_store(&zk->cur->lose_next_create, true);
}
