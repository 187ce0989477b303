/*
 * The ensemble's identity (ql_zk.h; docs/zookeeper.md, A reset ZooKeeper): the persistent node
 * <root>/fence_id holding 32 hex digits drawn at random by the first server that found it
 * missing. Tokens are zxids, which a new or wiped ensemble starts again from small values; a
 * store that records this id can tell such an ensemble (the id is missing or different) and
 * refuse to schedule instead of having every claim refused forever.
 *
 * DESIGN. CREATING (with a fresh id) --ZOK--> done(created); --ZNODEEXISTS--> READING (the
 * id another server made) --> done. A lost answer reads once reconnected: the node is there or
 * not, and the data says whose id it holds. Several servers starting together agree, because
 * only one create can succeed.
 */
#include "zk_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_WAITING, F_CREATING, F_READING, F_DONE } fphase_t;

struct ql_zk_fence_id {
    ql_zk_t *zk;
    ql_zk_listener_t listener;
    ql_zk_fence_id_cb cb;
    void *arg;
    char *path;
    char mine[33]; /* the id this server offers */
    fphase_t phase;
    bool redo;
    uint64_t gen;
};

static void step(ql_zk_fence_id_t *f, fphase_t phase);

static void finish(ql_zk_fence_id_t *f, int status, const char *id, bool created) {
    f->phase = F_DONE;
    zk_cancel(f->zk, f);
    f->cb(f->arg, status, id, created);
}

static bool valid_id(const char *s) {
    if (strlen(s) != 32)
        return false;
    for (const char *p = s; *p; p++)
        if (!isxdigit((unsigned char)*p))
            return false;
    return true;
}

static void answered(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_fence_id_t *f = arg;
    if (r->gen != f->gen || (f->phase != F_CREATING && f->phase != F_READING))
        return;
    if (zk_lost(r->rc)) {
        f->redo = true;
    } else if (f->phase == F_CREATING && r->rc == ZOK) {
        ql_log(zk->log, QL_LOG_INFO, "zk", "fence_id: created %s id=%s", f->path, f->mine);
        finish(f, 0, f->mine, true);
    } else if (f->phase == F_CREATING && r->rc == ZNODEEXISTS) {
        step(f, F_READING);
    } else if (f->phase == F_READING && r->rc == ZNONODE) {
        step(f, F_CREATING);
    } else if (f->phase == F_READING && r->rc == ZOK) {
        if (valid_id(r->data)) {
            finish(f, 0, r->data, !strcmp(r->data, f->mine));
        } else {
            ql_log(zk->log, QL_LOG_ERROR, "zk", "fence_id: %s holds \"%.40s\", not an id", f->path,
                   r->data);
            finish(f, QL_EZOOKEEPER, "", false);
        }
    } else if (r->rc != ZCLOSING && r->rc != ZSESSIONEXPIRED) {
        ql_log(zk->log, QL_LOG_ERROR, "zk", "fence_id: %s: %s", f->path, zerror(r->rc));
        finish(f, QL_EZOOKEEPER, "", false);
    }
}

static void step(ql_zk_fence_id_t *f, fphase_t phase) {
    f->phase = phase;
    f->redo = false;
    f->gen = zk_gen(f->zk);
    int rc = phase == F_CREATING ? zk_create(f->zk, f->path, f->mine, ZOO_PERSISTENT, answered, f)
                                 : zk_get(f->zk, f->path, NULL, answered, f);
    if (rc)
        f->redo = true;
}

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    (void)zk;
    ql_zk_fence_id_t *f = arg;
    if (f->phase == F_DONE)
        return;
    if (ev->state == QL_ZK_CONNECTED)
        step(f, f->phase == F_WAITING ? F_CREATING : F_READING);
    else if (ev->state == QL_ZK_RECONNECTED && f->phase == F_WAITING)
        step(f, F_CREATING); /* made while the session was suspended */
    else if (ev->state == QL_ZK_RECONNECTED && f->redo)
        step(f, F_READING); /* a create may have been made: read what is there */
    else if (ev->state == QL_ZK_FAILED)
        finish(f, QL_EZOOKEEPER, "", false);
}

int ql_zk_fence_id_new(ql_zk_t *zk, ql_zk_fence_id_cb cb, void *arg, ql_zk_fence_id_t **out) {
    *out = NULL;
    ql_zk_fence_id_t *f = calloc(1, sizeof *f);
    if (!f || asprintf(&f->path, "%s/fence_id", ql_zk_root(zk)) < 0) {
        free(f);
        return UV_ENOMEM;
    }
    f->zk = zk;
    f->cb = cb;
    f->arg = arg;
    zk_random_hex(f->mine);
    ql_zk_listen(zk, &f->listener, on_state, f);
    if (zk_ready(zk))
        step(f, F_CREATING);
    *out = f;
    return 0;
}

void ql_zk_fence_id_free(ql_zk_fence_id_t *f) {
    if (!f)
        return;
    ql_zk_unlisten(f->zk, &f->listener);
    zk_cancel(f->zk, f);
    free(f->path);
    free(f);
}
