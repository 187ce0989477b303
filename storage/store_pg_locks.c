/*
 * The locks of a PostgreSQL write transaction (store_pg.c's DESIGN comment): the model lock,
 * kept per savepoint level, and the fence epoch, read FOR SHARE once per transaction.
 */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>

static bool level_holds(const pg_txn_t *t, int64_t key) {
    for (const pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        for (size_t i = 0; i < l->n_locked; i++)
            if (l->locked[i] == key)
                return true;
    return false;
}

int pg_lock_model(pg_txn_t *t, const ql_id_t *model) {
    if (!t->base.write || ql_id_is_zero(model))
        return 0;
    /* 64 bits of the id: its random half (the first half of a v7 id is its time). A collision
     * only costs waiting. */
    uint64_t k = 0;
    for (int i = 0; i < 8; i++)
        k = k << 8 | (model->b[8 + i] ^ model->b[i]);
    int64_t key = (int64_t)k;
    if (level_holds(t, key))
        return 0;
    if (t->n_locked == t->cap_locked) {
        size_t cap = t->cap_locked ? t->cap_locked * 2 : 8;
        int64_t *p = realloc(t->locked, cap * sizeof *p);
        if (!p)
            return UV_ENOMEM;
        t->locked = p;
        t->cap_locked = cap;
    }
    /* Queued: sent with the next statement, which the server runs after it, under the lock. A
     * lock that times out fails that statement's round trip (store_pg_pipe.c). */
    if (t->failed)
        return t->failed;
    char sql[64];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(%lld)", (long long)key);
    int rc = pg_queue(t, sql, Q_LEVEL);
    if (!rc)
        t->locked[t->n_locked++] = key;
    return rc;
}

/* The epoch is read FOR SHARE once; the value is kept by the level that read it and moves to
 * the parent when that level is released (the row lock stays with it), and is dropped with a
 * level rolled back (so is the lock). Nobody can change the row while it is share-locked, so a
 * kept value is exact until the top-level transaction ends. */
int pg_fence_epoch(pg_txn_t *t, uint64_t *out) {
    for (pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        if (l->epoch_cached) {
            *out = l->epoch;
            return l->epoch_rc;
        }
    pg_params_t p = {0};
    pg_p_text(&p, "job_engine_epoch");
    PGresult *r;
    int rc = pg_exec(t, t->base.write ? S_META_GET_SHARE : S_META_GET, &p, &r);
    if (rc)
        return rc;
    if (PQntuples(r) == 0)
        rc = QL_ENOTFOUND;
    else if (PQgetlength(r, 0, 0) != 8)
        rc = QL_ECORRUPT;
    else
        *out = (uint64_t)pg_get_i64(r, 0, 0);
    PQclear(r);
    /* A missing row takes no lock: only a value read is kept. */
    if (t->base.write && rc == 0) {
        t->epoch_cached = true;
        t->epoch_rc = rc;
        t->epoch = *out;
    }
    return rc;
}

void pg_fence_forget(pg_txn_t *t) {
    for (pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        l->epoch_cached = false;
}

void pg_merge_locks(pg_txn_t *into, pg_txn_t *from) {
    for (size_t i = 0; i < from->n_locked; i++) {
        if (into->n_locked == into->cap_locked) {
            size_t cap = into->cap_locked ? into->cap_locked * 2 : 8;
            int64_t *p = realloc(into->locked, cap * sizeof *p);
            if (!p)
                return; /* only a cache: the lock is held either way */
            into->locked = p;
            into->cap_locked = cap;
        }
        into->locked[into->n_locked++] = from->locked[i];
    }
}
