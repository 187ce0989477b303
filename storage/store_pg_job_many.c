/*
 * ql_job_get_many on PostgreSQL: the jobs of many ids in one query per chunk of ids, for the
 * pages of a job listing, which otherwise read each job with a statement of its own
 * (docs/postgresql.md, Round trips).
 *
 * The ids go as one binary uuid[] parameter, unnested WITH ORDINALITY and joined on the primary
 * key, so the rows come back in the order of the ids; an id without a job has no row. The whole
 * result of a chunk is received before the first callback, which leaves the connection free for
 * the callbacks' own queries, as pg_walk's small walks do. The query is sent unprepared (a page
 * parses it once; the session's prepared statements are for the per-job path).
 */
#include "storage/ql_meta.h"
#include "store_pg_int.h"

#include <stdlib.h>
#include <string.h>

/* Ids per query: a listing's page (at most qilin.api.page-size-max jobs) is usually one query. */
#define MANY_CHUNK 1024

static const char many_sql[] = "SELECT j.rec FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, o) "
                               "JOIN jobs j ON j.id = u.id ORDER BY u.o";

/* Answers ids[0..n) (n <= MANY_CHUNK) with buf (room for them) as the array. *stop: cb said so. */
static int many_chunk(pg_txn_t *t, const ql_id_t *ids, size_t n, uint8_t *buf, unsigned flags,
                      ql_job_cb cb, void *arg, bool *stop) {
    uint8_t *d = pg_array_head(buf, PG_OID_UUID, n);
    for (size_t i = 0; i < n; i++, d += 20) {
        pg_put_be32(d, 16);
        memcpy(d + 4, ids[i].b, 16);
    }
    pg_params_t p = {0};
    pg_p_bytes(&p, buf, PG_ARRAY_HEAD + n * 20);
    pg_call_t call = {.sql = many_sql, .p = &p, .format = 1};
    PGresult *r;
    int rc = pg_run(t, &call, &r);
    if (rc)
        return rc;
    for (int row = 0; !rc && row < PQntuples(r); row++) {
        msgpack_zone *z = ql_txn_zone(&t->base);
        ql_job_t j;
        if (!z) {
            rc = UV_ENOMEM;
            break;
        }
        if ((rc = ql_job_decode_z(z, PQgetvalue(r, row, 0), (size_t)PQgetlength(r, row, 0), flags,
                                  &j)))
            break;
        rc = cb(&j, arg);
        ql_job_free(&j);
        if (!rc && t->failed) /* a callback's statement failed this level */
            rc = t->failed;
    }
    PQclear(r);
    *stop = rc > 0;
    return rc < 0 ? rc : 0;
}

int pg_job_get_many(ql_txn_t *bt, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                    void *arg) {
    pg_txn_t *t = pgt(bt);
    if (t->failed)
        return t->failed;
    if (n == 0)
        return 0;
    size_t chunk = n < MANY_CHUNK ? n : MANY_CHUNK;
    uint8_t *buf = malloc(PG_ARRAY_HEAD + chunk * 20);
    if (!buf)
        return UV_ENOMEM;
    int rc = 0;
    bool stop = false;
    for (size_t first = 0; first < n && !rc && !stop; first += MANY_CHUNK) {
        size_t k = n - first < MANY_CHUNK ? n - first : MANY_CHUNK;
        rc = many_chunk(t, ids + first, k, buf, flags, cb, arg, &stop);
    }
    free(buf);
    return rc;
}
