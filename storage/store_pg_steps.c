/*
 * Steps and step outputs on PostgreSQL, and the step cache of a write transaction.
 *
 * A write transaction that reads a job FOR UPDATE (pg_job_get) reads the job's steps in the same
 * round trip, as a second statement that the server runs after the first has the row lock, with
 * a snapshot of its own (READ COMMITTED). The steps are kept with the job row the transaction
 * holds (pg_jobrow_t, kept per savepoint level like the row), and a step read of that job answers
 * from them without a statement. The engine changes a job's steps in the mutations that read the
 * job FOR UPDATE first, so while this transaction holds the lock what it read stays current; a
 * step written without the job's lock (the note of a shell step's process group) races a cached
 * read exactly as it races a read sent a round trip later, and the cache adds no other case. A
 * step put of the job, in this level or any, drops the cache of every level from the putting one
 * up (the next read goes to the server, which is always right); so does a delete of the job
 * (pg_row_forget). docs/postgresql.md, Round trips.
 */
#include "storage/ql_meta.h"
#include "store_pg_int.h"

#include <stdlib.h>
#include <string.h>

static msgpack_zone *zone(pg_txn_t *t) {
    return ql_txn_zone(&t->base);
}

/* The row of seq in cached steps r (ordered by seq), -1: none. */
static int cached_row(PGresult *r, uint32_t seq) {
    int lo = 0, hi = PQntuples(r) - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int64_t at = pg_get_i32(r, mid, 0);
        if (at == (int64_t)seq)
            return mid;
        if (at < (int64_t)seq)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int step_decode(pg_txn_t *t, PGresult *r, int row, int col, unsigned flags, ql_step_t *out) {
    msgpack_zone *z = zone(t);
    return z ? ql_step_decode_z(z, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col), flags,
                                out)
             : UV_ENOMEM;
}

int pg_step_get(ql_txn_t *bt, const ql_id_t *job, uint32_t seq, ql_step_t *out) {
    pg_txn_t *t = pgt(bt);
    PGresult *cached = bt->write ? pg_row_steps(t, job) : NULL;
    if (cached) {
        if (t->failed)
            return t->failed; /* as a statement would answer */
        int row = cached_row(cached, seq);
        return row < 0 ? QL_ENOTFOUND : step_decode(t, cached, row, 1, QL_DECODE_KEEP_EXTRA, out);
    }
    pg_params_t p = {0};
    pg_p_uuid(&p, job);
    pg_p_i32(&p, (int32_t)seq);
    PGresult *r;
    int rc = pg_one_row(t, S_STEP_GET, &p, &r);
    if (rc)
        return rc;
    rc = step_decode(t, r, 0, 0, QL_DECODE_KEEP_EXTRA, out);
    PQclear(r);
    return rc;
}

int pg_step_put(ql_txn_t *bt, const ql_step_t *s) {
    if (!bt->write || (unsigned)s->state >= QL_STATE_COUNT)
        return QL_EINVAL;
    ql_buf_reset(&bt->buf);
    int rc = ql_step_encode(s, &bt->buf);
    if (rc)
        return rc;
    pg_steps_forget(pgt(bt), &s->job);
    pg_params_t p = {0};
    pg_p_uuid(&p, &s->job);
    pg_p_i32(&p, (int32_t)s->seq);
    pg_p_bytes(&p, bt->buf.data, bt->buf.len);
    return pg_defer(pgt(bt), S_STEP_PUT, &p);
}

typedef struct {
    pg_txn_t *t;
    ql_step_cb cb;
    void *arg;
} steps_ctx_t;

static int step_row(PGresult *r, int row, void *arg) {
    steps_ctx_t *w = arg;
    ql_step_t s;
    int rc = step_decode(w->t, r, row, 0, 0, &s);
    if (rc)
        return rc;
    rc = w->cb(&s, w->arg);
    ql_step_free(&s);
    return rc;
}

int pg_step_foreach(ql_txn_t *bt, const ql_id_t *job, ql_step_cb cb, void *arg) {
    steps_ctx_t w = {.t = pgt(bt), .cb = cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_uuid(&p, job);
    return pg_walk(pgt(bt), W_STEPS, &p, step_row, &w);
}

int pg_output_get(ql_txn_t *bt, const ql_id_t *job, uint32_t seq, char **out, size_t *len) {
    pg_params_t p = {0};
    pg_p_uuid(&p, job);
    pg_p_i32(&p, (int32_t)seq);
    PGresult *r;
    int rc = pg_one_row(pgt(bt), S_OUT_GET, &p, &r);
    if (rc)
        return rc;
    size_t n = (size_t)PQgetlength(r, 0, 0);
    *out = malloc(n + 1);
    if (*out) {
        memcpy(*out, PQgetvalue(r, 0, 0), n);
        (*out)[n] = '\0';
        *len = n;
    } else {
        rc = UV_ENOMEM;
    }
    PQclear(r);
    return rc;
}

int pg_output_put(ql_txn_t *bt, const ql_id_t *job, uint32_t seq, const char *text, size_t len) {
    if (!bt->write)
        return QL_EINVAL;
    pg_params_t p = {0};
    pg_p_uuid(&p, job);
    pg_p_i32(&p, (int32_t)seq);
    pg_p_bytes(&p, text, len);
    return pg_defer(pgt(bt), S_OUT_PUT, &p);
}
