/* The PostgreSQL store's job engine lock as a ql_lock_t: the store's session advisory lock with
 * its holder record and lease (see ql_lock.h and storage/ql_store.h). */
#include "scheduler/ql_lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ql_lock_t base;
    ql_store_lock_t *lk;
} pg_lock_t;

/* The holder as a standby shows it (logs, REST, qilind's start line). The lease's age stays
 * out: a standby logs the holder each time this text changes. */
static void format_holder(const ql_store_holder_t *h, char *out, size_t cap) {
    if (!h->known)
        snprintf(out, cap, "another server (no details recorded yet)");
    else
        snprintf(out, cap,
                 "pid %ld of server %s (API %s), fencing epoch %llu, PostgreSQL backend %d", h->pid,
                 h->server_id, h->address, (unsigned long long)h->epoch, h->backend_pid);
}

static int pg_try_acquire(ql_lock_t *base, bool *acquired, char *holder, size_t cap) {
    pg_lock_t *l = (pg_lock_t *)base;
    ql_store_holder_t h;
    ql_err_t err = {0};
    uint64_t epoch = 0;
    base->why[0] = '\0';
    int rc = ql_store_lock_try(l->lk, acquired, &epoch, &h, &err);
    if (rc) {
        snprintf(base->why, sizeof base->why, "%s", err.msg);
        return rc;
    }
    if (*acquired) {
        base->held = true;
        base->fence = epoch;
    } else if (holder && cap) {
        format_holder(&h, holder, cap);
    }
    return 0;
}

static bool pg_still_held(ql_lock_t *base) {
    pg_lock_t *l = (pg_lock_t *)base;
    return base->held && ql_store_lock_still_held(l->lk, base->why, sizeof base->why);
}

static void pg_renew(ql_lock_t *base) {
    pg_lock_t *l = (pg_lock_t *)base;
    if (base->held)
        ql_store_lock_renew(l->lk);
}

static void pg_release(ql_lock_t *base) {
    pg_lock_t *l = (pg_lock_t *)base;
    ql_store_lock_release(l->lk);
    base->held = false;
    base->fence = 0;
}

static void pg_free(ql_lock_t *base) {
    pg_lock_t *l = (pg_lock_t *)base;
    ql_store_lock_close(l->lk);
    free(l);
}

static void pg_set_address(ql_lock_t *base, const char *address) {
    pg_lock_t *l = (pg_lock_t *)base;
    /* The record is informational: a failed rewrite leaves the old address until the next
     * holding, and the holding itself is unaffected. */
    (void)ql_store_lock_set_address(l->lk, address);
}

static const ql_lock_ops_t pg_ops = {
    .kind = "pg",
    .try_acquire = pg_try_acquire,
    .still_held = pg_still_held,
    .renew = pg_renew,
    .release = pg_release,
    .free = pg_free,
    .set_address = pg_set_address,
};

int ql_lock_pg_new(ql_store_t *store, const ql_lock_pg_opts_t *opts, ql_lock_t **out,
                   ql_err_t *err) {
    *out = NULL;
    pg_lock_t *l = calloc(1, sizeof *l);
    if (!l)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    ql_store_lock_opts_t so = {0};
    if (opts) {
        so.server_id = opts->server_id;
        so.address = opts->address;
        so.lease_ms = opts->lease_ms;
        so.log = opts->log;
    }
    int rc = ql_store_lock_open(store, &so, &l->lk, err);
    if (rc) {
        free(l);
        return rc;
    }
    l->base.ops = &pg_ops;
    *out = &l->base;
    return 0;
}
