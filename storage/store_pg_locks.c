/*
 * The locks of a PostgreSQL write transaction (store_pg.c's DESIGN comment): the model lock,
 * kept per savepoint level, and the fence epoch, read FOR SHARE once per transaction.
 */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool level_holds(const pg_txn_t *t, int64_t key) {
    for (const pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        for (size_t i = 0; i < l->n_locked; i++)
            if (l->locked[i] == key)
                return true;
    return false;
}

/* The lock of model that this level must still take: *key, and 1 with room made to note it;
 * 0 when there is none to take (a read, no model, or held by this level or a parent). */
static int lock_needed(pg_txn_t *t, const ql_id_t *model, int64_t *key) {
    if (!t->base.write || ql_id_is_zero(model))
        return 0;
    /* 64 bits of the id: its random half (the first half of a v7 id is its time). A collision
     * only costs waiting. */
    uint64_t k = 0;
    for (int i = 0; i < 8; i++)
        k = k << 8 | (model->b[8 + i] ^ model->b[i]);
    *key = (int64_t)k;
    if (level_holds(t, *key))
        return 0;
    if (t->n_locked == t->cap_locked) {
        size_t cap = t->cap_locked ? t->cap_locked * 2 : 8;
        int64_t *p = realloc(t->locked, cap * sizeof *p);
        if (!p)
            return UV_ENOMEM;
        t->locked = p;
        t->cap_locked = cap;
    }
    return t->failed ? t->failed : 1;
}

int pg_lock_model(pg_txn_t *t, const ql_id_t *model) {
    int64_t key;
    int rc = lock_needed(t, model, &key);
    if (rc <= 0)
        return rc;
    /* Queued: sent with the next statement, which the server runs after it, under the lock. A
     * lock that times out fails that statement's round trip (store_pg_pipe.c). */
    if (!(rc = pg_queue_lock(t, key)))
        t->locked[t->n_locked++] = key;
    return rc;
}

int pg_lock_model_carried(pg_txn_t *t, const ql_id_t *model, int64_t *key, bool *carry) {
    int rc = lock_needed(t, model, key);
    *carry = rc > 0;
    return rc < 0 ? rc : 0;
}

void pg_lock_carried(pg_txn_t *t, int64_t key) {
    /* lock_needed made room; a lock taken since (none between the two calls) would have used it */
    if (t->n_locked < t->cap_locked && !level_holds(t, key))
        t->locked[t->n_locked++] = key;
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

/* ---- job rows held FOR UPDATE ---- */

static pg_jobrow_t *row_slot(pg_txn_t *t, const ql_id_t *id) {
    for (size_t i = 0; i < t->n_rows; i++)
        if (ql_id_eq(&t->rows[i].id, id))
            return &t->rows[i];
    if (t->n_rows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 8;
        pg_jobrow_t *p = realloc(t->rows, cap * sizeof *p);
        if (!p)
            return NULL;
        t->rows = p;
        t->cap_rows = cap;
    }
    pg_jobrow_t *r = &t->rows[t->n_rows++];
    memset(r, 0, sizeof *r);
    return r;
}

void pg_row_note(pg_txn_t *t, const ql_id_t *id, const char *project, const ql_id_t *model,
                 int64_t create_time, int16_t state) {
    if (!t->base.write || strlen(project) > QL_NAME_MAX)
        return;
    pg_jobrow_t *r = row_slot(t, id);
    if (!r) {
        pg_row_forget(t, id); /* a parent's row may be older */
        return;
    }
    r->id = *id;
    r->model = *model;
    r->create_time = create_time;
    r->state = state;
    memcpy(r->project, project, strlen(project) + 1);
}

const pg_jobrow_t *pg_row_find(const pg_txn_t *t, const ql_id_t *id) {
    for (const pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        for (size_t i = 0; i < l->n_rows; i++)
            if (ql_id_eq(&l->rows[i].id, id))
                return &l->rows[i];
    return NULL;
}

void pg_row_forget(pg_txn_t *t, const ql_id_t *id) {
    for (pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        for (size_t i = 0; i < l->n_rows; i++)
            if (ql_id_eq(&l->rows[i].id, id)) {
                PQclear(l->rows[i].steps);
                l->rows[i--] = l->rows[--l->n_rows];
            }
}

void pg_rows_merge(pg_txn_t *into, pg_txn_t *from) {
    for (size_t i = 0; i < from->n_rows; i++) {
        pg_jobrow_t *r = row_slot(into, &from->rows[i].id);
        if (!r) {
            pg_row_forget(into, &from->rows[i].id); /* no stale row may stay */
            continue;
        }
        if (r->steps != from->rows[i].steps)
            PQclear(r->steps);
        *r = from->rows[i];
        from->rows[i].steps = NULL; /* moved to the parent */
    }
}

void pg_row_set_steps(pg_txn_t *t, const ql_id_t *id, PGresult *steps) {
    for (size_t i = 0; i < t->n_rows; i++)
        if (ql_id_eq(&t->rows[i].id, id)) {
            PQclear(t->rows[i].steps);
            t->rows[i].steps = steps;
            return;
        }
    PQclear(steps); /* no row kept (out of memory): nothing is cached */
}

PGresult *pg_row_steps(const pg_txn_t *t, const ql_id_t *id) {
    const pg_jobrow_t *r = pg_row_find(t, id);
    return r ? r->steps : NULL;
}

void pg_steps_forget(pg_txn_t *t, const ql_id_t *id) {
    for (pg_txn_t *l = t; l; l = l->base.parent ? pgt(l->base.parent) : NULL)
        for (size_t i = 0; i < l->n_rows; i++)
            if (ql_id_eq(&l->rows[i].id, id)) {
                PQclear(l->rows[i].steps);
                l->rows[i].steps = NULL;
            }
}
