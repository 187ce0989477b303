/*
 * The segments of the PostgreSQL backend: reads, puts (deferred for a segment the transaction
 * holds, docs/postgresql.md, Round trips), deletes, counts and the walks of one model. The
 * locking rules of a write transaction are in store_pg.c's DESIGN comment; each function below
 * says which it applies.
 */
#include "storage/ql_meta.h"
#include "store_pg_int.h"

#include <string.h>

/* ---- segments ---- */

static int seg_decode(pg_txn_t *t, PGresult *r, int row, unsigned flags, ql_segment_t *out) {
    msgpack_zone *z = pg_zone(t);
    return z ? ql_segment_decode_z(z, PQgetvalue(r, row, 0), (size_t)PQgetlength(r, row, 0), flags,
                                   out)
             : UV_ENOMEM;
}

/* FOR UPDATE in a write transaction: a change derived from this read cannot be lost. */
int pg_segment_get(ql_txn_t *bt, const ql_id_t *id, ql_segment_t *out) {
    pg_txn_t *t = pgt(bt);
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    PGresult *r;
    int rc = pg_one_row(t, bt->write ? S_SEG_GET_UPDATE : S_SEG_GET, &p, &r);
    if (rc)
        return rc;
    rc = seg_decode(t, r, 0, QL_DECODE_KEEP_EXTRA, out);
    PQclear(r);
    if (!rc && bt->write) {
        t->seg_held = true;
        t->seg_held_id = *id;
        t->seg_held_model = out->model;
    }
    return rc;
}

/* Whether t or a level above it holds segment id's row FOR UPDATE in model. Only this
 * transaction can change a row it holds, and a move to another model forgets it (seg_forget);
 * a delete does too, though a put after it would insert the row, which answers as well. */
static bool seg_held(const pg_txn_t *t, const ql_id_t *id, const ql_id_t *model) {
    for (; t; t = t->base.parent ? pgt(t->base.parent) : NULL)
        if (t->seg_held && ql_id_eq(&t->seg_held_id, id))
            return ql_id_eq(&t->seg_held_model, model);
    return false;
}

static void seg_forget(pg_txn_t *t, const ql_id_t *id) {
    for (; t; t = t->base.parent ? pgt(t->base.parent) : NULL)
        if (t->seg_held && ql_id_eq(&t->seg_held_id, id))
            t->seg_held = false;
}

int pg_segment_exists(ql_txn_t *bt, const ql_id_t *id) {
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    PGresult *r;
    int rc = pg_one_row(pgt(bt), S_SEG_EXISTS, &p, &r);
    PQclear(r);
    return rc;
}

/* Locks the model segment id is stored under now (QL_ENOTFOUND: there is none): a move and a
 * delete change that model's segments. */
static int lock_current_model(pg_txn_t *t, const ql_id_t *id) {
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    PGresult *r;
    int rc = pg_one_row(t, S_SEG_OLD, &p, &r);
    if (rc)
        return rc;
    ql_id_t model;
    pg_get_uuid(r, 0, 0, &model);
    PQclear(r);
    return pg_lock_model(t, &model);
}

/* Under the model lock (of the old model too, when a segment moves). The model's lock goes out
 * with the put, which writes only a segment that is new or stays in that model; one that moves
 * (no row answered) is written again after its old model's lock. */
int pg_segment_put(ql_txn_t *bt, ql_segment_t *s) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write || ql_id_is_zero(&s->id) || ql_id_is_zero(&s->model) ||
        ql_meta_check_range("start", "end", s->start, s->end, true, NULL))
        return QL_EINVAL;
    int64_t key;
    bool carry;
    int rc = pg_lock_model_carried(t, &s->model, &key, &carry);
    if (rc)
        return rc;
    s->layer = 0; /* an LMDB index detail */
    ql_buf_reset(&bt->buf);
    if ((rc = ql_segment_encode(s, &bt->buf)))
        return rc;
    pg_params_t p = {0};
    pg_p_uuid(&p, &s->id);
    pg_p_uuid(&p, &s->model);
    pg_p_i64(&p, s->start);
    pg_p_i64(&p, s->end);
    pg_p_i16(&p, (int16_t)s->status);
    pg_p_bytes(&p, bt->buf.data, bt->buf.len);
    if (carry)
        pg_p_i64(&p, key);
    if (seg_held(t, &s->id, &s->model)) {
        /* It stays in its model: the put changes the row and answers it, so it goes with the
         * level's next statement, as a held job's update does (no row: the level fails). */
        if ((rc = pg_defer_row(t, carry ? S_SEG_PUT_SAME_LOCK : S_SEG_PUT_SAME, &p, QL_ECORRUPT)))
            return rc;
        if (carry)
            pg_lock_carried(t, key);
        return 0;
    }
    PGresult *r;
    if ((rc = pg_exec(t, carry ? S_SEG_PUT_SAME_LOCK : S_SEG_PUT_SAME, &p, &r)))
        return rc;
    if (carry)
        pg_lock_carried(t, key);
    bool done = PQntuples(r) == 1;
    PQclear(r);
    if (done)
        return 0;
    seg_forget(t, &s->id); /* it moves */
    if ((rc = lock_current_model(t, &s->id)))
        return rc;
    if (carry)
        p.n--; /* the upsert takes no lock key: the lock was taken above */
    return pg_exec(t, S_SEG_UPSERT, &p, NULL);
}

int pg_segment_delete(ql_txn_t *bt, const ql_id_t *id) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write)
        return QL_EINVAL;
    seg_forget(t, id);
    int rc = lock_current_model(t, id);
    if (rc)
        return rc;
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    PGresult *r;
    if ((rc = pg_one_row(t, S_SEG_DELETE, &p, &r)))
        return rc;
    PQclear(r);
    return 0;
}

static int seg_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_segment_t s;
    int rc = seg_decode(w->t, r, row, 0, &s);
    if (rc)
        return rc;
    rc = ((ql_segment_cb)w->cb)(&s, w->arg);
    ql_segment_free(&s);
    return rc;
}

int pg_segment_foreach(ql_txn_t *bt, const ql_id_t *model, ql_segment_cb cb, void *arg) {
    return pg_model_walk(bt, model, false, 0, 0, W_SEGMENTS, seg_row, (void *)cb, arg);
}

/* The overlap probe (model_walk says why under the model lock). */
int pg_segment_foreach_overlapping(ql_txn_t *bt, const ql_id_t *model, int64_t start, int64_t end,
                                   ql_segment_cb cb, void *arg) {
    if (start >= end)
        return 0;
    return pg_model_walk(bt, model, true, start, end, W_SEG_OVERLAP, seg_row, (void *)cb, arg);
}

int pg_segment_count(ql_txn_t *bt, const ql_id_t *model, uint64_t *out) {
    pg_params_t p = {0};
    pg_p_uuid(&p, model);
    return pg_count_of(pgt(bt), S_SEG_COUNT, &p, out);
}
