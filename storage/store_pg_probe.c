/*
 * ql_probe_targets on PostgreSQL: the overlaps of many (model, start, end) targets in one query
 * per chunk of targets, instead of two round trips per target (docs/postgresql.md, "The
 * dispatcher's probe").
 *
 * The targets go as three binary arrays, unnested WITH ORDINALITY and joined against the GiST
 * index of segments (model, int8range); the NEW segments' span of each target is then joined
 * against the live-job exclusion index of jobs. One result holds both, ordered by target, kind
 * (segment before job), start, end, id, so the answers are walked in one pass and equal what the
 * per-model probes give (the contract suite compares them). The whole result of a chunk is
 * received before the first callback, which leaves the connection free for the callbacks' own
 * queries, as pg_walk's small walks do.
 */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Targets per query: a chunk's result (a few rows per target) stays a few megabytes. */
#define PROBE_CHUNK 4096

static const char probe_sql[] =
    "WITH t AS (SELECT m, s, e, i FROM unnest($1::uuid[], $2::int8[], $3::int8[]) "
    "WITH ORDINALITY AS u(m, s, e, i)), "
    "g AS (SELECT t.i, g.model, g.start_ms, g.end_ms, g.id, g.status, g.rec FROM t "
    "JOIN segments g ON g.model = t.m AND int8range(g.start_ms, g.end_ms) && "
    "int8range(t.s, greatest(t.s, t.e))), "
    "n AS (SELECT i, model, min(start_ms) AS lo, max(end_ms) AS hi FROM g WHERE status = 0 "
    "GROUP BY i, model) "
    "SELECT i, 0 AS k, start_ms, end_ms, id, rec, 0::int2 AS state FROM g "
    "UNION ALL "
    "SELECT n.i, 1, j.range_start, j.range_end, j.id, NULL::bytea, j.state FROM n "
    "JOIN jobs j ON j.model = n.model AND j.model IS NOT NULL AND j.state IN (0, 1, 2, 3, 4) "
    "AND j.has_range AND int8range(j.range_start, j.range_end) && int8range(n.lo, n.hi) "
    "ORDER BY 1, 2, 3, 4, 5";

static void put_be64(uint8_t *d, uint64_t v) {
    pg_put_be32(d, (uint32_t)(v >> 32));
    pg_put_be32(d + 4, (uint32_t)v);
}

typedef struct {
    uint8_t *models, *starts, *ends; /* the three arrays of a chunk */
    size_t cap;                      /* targets they have room for */
    ql_segment_t *segs;
    size_t cap_segs;
    ql_live_job_t *jobs;
    size_t cap_jobs;
} probe_buf_t;

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return UV_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static int encode_chunk(probe_buf_t *b, const ql_probe_target_t *tg, size_t n, pg_params_t *p) {
    if (n > b->cap) {
        free(b->models);
        free(b->starts);
        free(b->ends);
        b->models = malloc(20 + n * 20);
        b->starts = malloc(20 + n * 12);
        b->ends = malloc(20 + n * 12);
        if (!b->models || !b->starts || !b->ends) {
            b->cap = 0;
            return UV_ENOMEM;
        }
        b->cap = n;
    }
    uint8_t *m = pg_array_head(b->models, PG_OID_UUID, n);
    uint8_t *s = pg_array_head(b->starts, PG_OID_INT8, n);
    uint8_t *e = pg_array_head(b->ends, PG_OID_INT8, n);
    for (size_t i = 0; i < n; i++) {
        pg_put_be32(m, 16);
        memcpy(m + 4, tg[i].model.b, 16);
        m += 20;
        pg_put_be32(s, 8);
        put_be64(s + 4, (uint64_t)tg[i].start);
        s += 12;
        pg_put_be32(e, 8);
        put_be64(e + 4, (uint64_t)tg[i].end);
        e += 12;
    }
    pg_p_bytes(p, b->models, 20 + n * 20);
    pg_p_bytes(p, b->starts, 20 + n * 12);
    pg_p_bytes(p, b->ends, 20 + n * 12);
    return 0;
}

/* The segment record in column col of row, decoded into the transaction's zone. */
static int decode_seg(pg_txn_t *t, PGresult *r, int row, int col, ql_segment_t *out) {
    msgpack_zone *z = ql_txn_zone(&t->base);
    if (!z)
        return UV_ENOMEM;
    return ql_segment_decode_z(z, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col), 0,
                               out);
}

/* Collects the rows of chunk target k (1-based ordinality) from *row on, and answers it. */
static int answer(pg_txn_t *t, PGresult *r, int *row, int64_t k, size_t index, probe_buf_t *b,
                  ql_probe_cb cb, void *arg) {
    size_t ns = 0, nj = 0;
    int rows = PQntuples(r), rc = 0;
    for (; *row < rows && pg_get_i64(r, *row, 0) == k; (*row)++) {
        int i = *row;
        if (pg_get_i32(r, i, 1) == 0) {
            if ((rc = grow((void **)&b->segs, &b->cap_segs, ns + 1, sizeof *b->segs)) ||
                (rc = decode_seg(t, r, i, 5, &b->segs[ns])))
                return rc;
            ns++;
        } else {
            if ((rc = grow((void **)&b->jobs, &b->cap_jobs, nj + 1, sizeof *b->jobs)))
                return rc;
            ql_live_job_t *j = &b->jobs[nj++];
            pg_get_uuid(r, i, 4, &j->id);
            j->state = (ql_state_t)pg_get_i16(r, i, 6);
            j->has_range = true;
            j->start = pg_get_i64(r, i, 2);
            j->end = pg_get_i64(r, i, 3);
        }
    }
    ql_probe_result_t res = {
        .index = index, .segs = b->segs, .n_segs = ns, .jobs = b->jobs, .n_jobs = nj};
    return cb(&res, arg);
}

static int probe_chunk(pg_txn_t *t, const ql_probe_target_t *targets, size_t first, size_t n,
                       probe_buf_t *b, ql_probe_cb cb, void *arg) {
    int rc;
    /* In a write transaction the answer must hold until the commit: the per-model probes' lock. */
    for (size_t i = 0; i < n && t->base.write; i++)
        if ((rc = pg_lock_model(t, &targets[first + i].model)))
            return rc;
    pg_params_t p = {0};
    if ((rc = encode_chunk(b, targets + first, n, &p)))
        return rc;
    pg_call_t call = {.sql = probe_sql, .p = &p, .format = 1}; /* after the queued locks */
    PGresult *r;
    if ((rc = pg_run(t, &call, &r)))
        return rc;
    int row = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rc = answer(t, r, &row, (int64_t)i + 1, first + i, b, cb, arg);
        if (!rc && t->failed) /* a callback's statement failed this level */
            rc = t->failed;
    }
    PQclear(r);
    return rc;
}

int pg_probe_targets(ql_txn_t *bt, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                     void *arg) {
    pg_txn_t *t = pgt(bt);
    if (t->failed)
        return t->failed;
    probe_buf_t b = {0};
    int rc = 0;
    for (size_t first = 0; first < n && !rc; first += PROBE_CHUNK) {
        size_t k = n - first < PROBE_CHUNK ? n - first : PROBE_CHUNK;
        rc = probe_chunk(t, targets, first, k, &b, cb, arg);
    }
    free(b.models);
    free(b.starts);
    free(b.ends);
    free(b.segs);
    free(b.jobs);
    return rc;
}

/* ---- ql_probe_range: one build's two probes in one statement ---- */

typedef struct {
    pg_txn_t *t;
    ql_segment_cb seg_cb;
    ql_live_job_cb job_cb;
    void *arg;
} range_ctx_t;

/* A row of W_RANGE_PROBE: k, rec, id, state, start, end (store_pg_sql.c). */
static int range_row(PGresult *r, int row, void *arg) {
    range_ctx_t *c = arg;
    if (pg_get_i32(r, row, 0) == 0) {
        ql_segment_t s;
        int rc = decode_seg(c->t, r, row, 1, &s);
        if (rc)
            return rc;
        rc = c->seg_cb(&s, c->arg);
        ql_segment_free(&s);
        return rc;
    }
    ql_live_job_t j = {.has_range = true};
    pg_get_uuid(r, row, 2, &j.id);
    j.state = (ql_state_t)pg_get_i16(r, row, 3);
    j.start = pg_get_i64(r, row, 4);
    j.end = pg_get_i64(r, row, 5);
    return c->job_cb(&j, c->arg);
}

/* Under the model lock, as the two probes it replaces (pg_segment_foreach_overlapping). */
int pg_probe_range(ql_txn_t *bt, const ql_id_t *model, int64_t start, int64_t end,
                   ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg) {
    pg_txn_t *t = pgt(bt);
    int rc = pg_lock_model(t, model);
    if (rc)
        return rc;
    range_ctx_t c = {.t = t, .seg_cb = seg_cb, .job_cb = job_cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_uuid(&p, model);
    pg_p_i64(&p, start);
    pg_p_i64(&p, end);
    return pg_walk(t, W_RANGE_PROBE, &p, range_row, &c);
}
