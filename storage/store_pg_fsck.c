/*
 * fsck of the PostgreSQL backend. LMDB's fsck checks its hand-kept indexes against the records;
 * here the indexes are the database's (amcheck's job), so this checks what the database does not
 * enforce (docs/postgresql.md, fsck):
 *   - every record decodes and its columns equal the decoded record (a column that drifted
 *     would make an index or the live-job constraint answer for another record);
 *   - the rules of docs/design/metadata.md that SQL can state: live ranged jobs of a model do not
 *     overlap (also a constraint), non-NEW segments of a model do not overlap, every job's
 *     project exists, every step and output belongs to a job, and step numbers match n_steps.
 * One REPEATABLE READ snapshot for the whole run, like LMDB's one read transaction.
 */
#include "store_pg_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    pg_txn_t *t;
    FILE *out;
    ql_fsck_report_t *r;
} pgf_t;

static void finding(pgf_t *f, bool violation, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void finding(pgf_t *f, bool violation, const char *fmt, ...) {
    if (violation)
        f->r->violations++;
    else
        f->r->warnings++;
    if (!f->out)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(violation ? "violation: " : "warning: ", f->out);
    vfprintf(f->out, fmt, ap);
    fputc('\n', f->out);
    va_end(ap);
}

/* Runs a text query (binary results) on the run's snapshot; NULL after an error. */
static PGresult *query(pgf_t *f, const char *sql, int *rc) {
    PGresult *r = PQexecParams(f->t->conn->c, sql, 0, NULL, NULL, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        *rc = PQstatus(f->t->conn->c) == CONNECTION_BAD ? QL_EUNAVAILABLE : pg_sqlstate_err(st);
        PQclear(r);
        return NULL;
    }
    return r;
}

static int check_models(pgf_t *f) {
    int rc = 0;
    PGresult *r = query(f, "SELECT id, project, name, rec FROM models", &rc);
    if (!r)
        return rc;
    msgpack_zone *z = ql_txn_zone(&f->t->base);
    for (int i = 0; i < PQntuples(r) && z; i++) {
        ql_id_t id;
        pg_get_uuid(r, i, 0, &id);
        char ids[QL_ID_STR_LEN + 1];
        ql_id_format(&id, ids);
        ql_model_t m;
        int d = ql_model_decode_z(z, PQgetvalue(r, i, 3), (size_t)PQgetlength(r, i, 3), 0, &m);
        f->r->models++;
        if (d) {
            finding(f, true, "model %s: record does not decode: %s", ids, ql_strerror(d));
            continue;
        }
        if (!ql_id_eq(&m.id, &id) || strcmp(m.project, PQgetvalue(r, i, 1)) ||
            strcmp(m.name, PQgetvalue(r, i, 2)))
            finding(f, true, "model %s: the columns do not match the record", ids);
        ql_model_free(&m);
    }
    PQclear(r);
    r = query(f, "SELECT count(*) FROM projects", &rc);
    if (!r)
        return rc;
    f->r->projects = (uint64_t)pg_get_i64(r, 0, 0);
    PQclear(r);
    return z ? 0 : UV_ENOMEM;
}

static int check_segments(pgf_t *f) {
    int rc = 0;
    PGresult *r = query(f, "SELECT id, model, start_ms, end_ms, status, rec FROM segments", &rc);
    if (!r)
        return rc;
    msgpack_zone *z = ql_txn_zone(&f->t->base);
    for (int i = 0; i < PQntuples(r) && z; i++) {
        ql_id_t id, model;
        pg_get_uuid(r, i, 0, &id);
        pg_get_uuid(r, i, 1, &model);
        char ids[QL_ID_STR_LEN + 1];
        ql_id_format(&id, ids);
        ql_segment_t s;
        f->r->segments++;
        int d = ql_segment_decode_z(z, PQgetvalue(r, i, 5), (size_t)PQgetlength(r, i, 5), 0, &s);
        if (d) {
            finding(f, true, "segment %s: record does not decode: %s", ids, ql_strerror(d));
            continue;
        }
        if (!ql_id_eq(&s.id, &id) || !ql_id_eq(&s.model, &model) ||
            s.start != pg_get_i64(r, i, 2) || s.end != pg_get_i64(r, i, 3) ||
            (int)s.status != pg_get_i16(r, i, 4))
            finding(f, true, "segment %s: the columns do not match the record", ids);
        ql_segment_free(&s);
    }
    PQclear(r);
    if (!z)
        return UV_ENOMEM;
    /* NEW segments may overlap their sources until their job ends; built ones never overlap. */
    r = query(f,
              "SELECT a.id, b.id, a.model FROM segments a JOIN segments b ON a.model = b.model "
              "AND a.id < b.id AND a.status <> 0 AND b.status <> 0 AND int8range(a.start_ms, "
              "a.end_ms) && int8range(b.start_ms, b.end_ms)",
              &rc);
    if (!r)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        ql_id_t a, b, m;
        pg_get_uuid(r, i, 0, &a);
        pg_get_uuid(r, i, 1, &b);
        pg_get_uuid(r, i, 2, &m);
        char as[QL_ID_STR_LEN + 1], bs[QL_ID_STR_LEN + 1], ms[QL_ID_STR_LEN + 1];
        ql_id_format(&a, as);
        ql_id_format(&b, bs);
        ql_id_format(&m, ms);
        finding(f, true, "model %s: segments %s and %s overlap", ms, as, bs);
    }
    PQclear(r);
    return 0;
}

static int check_jobs(pgf_t *f) {
    int rc = 0;
    PGresult *r = query(f,
                        "SELECT id, project, model, state, priority, create_time, modify_time, "
                        "has_range, range_start, range_end, fence, rec, "
                        "(SELECT count(*) FROM steps s WHERE s.job = j.id), "
                        "(SELECT coalesce(max(seq) + 1, 0)::int8 FROM steps s WHERE s.job = j.id), "
                        "EXISTS (SELECT 1 FROM projects p WHERE p.name = j.project) FROM jobs j",
                        &rc);
    if (!r)
        return rc;
    msgpack_zone *z = ql_txn_zone(&f->t->base);
    for (int i = 0; i < PQntuples(r) && z; i++) {
        ql_id_t id, model;
        pg_get_uuid(r, i, 0, &id);
        pg_get_uuid(r, i, 2, &model);
        char ids[QL_ID_STR_LEN + 1];
        ql_id_format(&id, ids);
        ql_job_t j;
        f->r->jobs++;
        int d = ql_job_decode_z(z, PQgetvalue(r, i, 11), (size_t)PQgetlength(r, i, 11), 0, &j);
        if (d) {
            finding(f, true, "job %s: record does not decode: %s", ids, ql_strerror(d));
            continue;
        }
        bool same = ql_id_eq(&j.id, &id) && !strcmp(j.project, PQgetvalue(r, i, 1)) &&
                    ql_id_eq(&j.model, &model) && (int)j.state == pg_get_i16(r, i, 3) &&
                    j.priority == pg_get_i16(r, i, 4) && j.create_time == pg_get_i64(r, i, 5) &&
                    j.modify_time == pg_get_i64(r, i, 6) && j.has_range == pg_get_bool(r, i, 7) &&
                    (!j.has_range || (j.range_start == pg_get_i64(r, i, 8) &&
                                      j.range_end == pg_get_i64(r, i, 9))) &&
                    (int64_t)j.fence == pg_get_i64(r, i, 10);
        if (!same)
            finding(f, true, "job %s: the columns do not match the record", ids);
        int64_t steps = pg_get_i64(r, i, 12), next = pg_get_i64(r, i, 13);
        if ((uint64_t)steps != j.n_steps)
            finding(f, true, "job %s: n_steps is %u but %lld step records exist", ids, j.n_steps,
                    (long long)steps);
        else if (next != steps)
            finding(f, true, "job %s: steps are not numbered 00..%02u", ids,
                    j.n_steps ? j.n_steps - 1 : 0);
        if (!pg_get_bool(r, i, 14))
            finding(f, true, "job %s: its project '%s' does not exist", ids, j.project);
        ql_job_free(&j);
    }
    PQclear(r);
    if (!z)
        return UV_ENOMEM;
    r = query(f,
              "SELECT a.id, b.id FROM jobs a JOIN jobs b ON a.model = b.model AND a.id < b.id AND "
              "a.state IN (0, 1, 2, 3, 4) AND b.state IN (0, 1, 2, 3, 4) AND a.has_range AND "
              "b.has_range AND int8range(a.range_start, a.range_end) && int8range(b.range_start, "
              "b.range_end)",
              &rc);
    if (!r)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        ql_id_t a, b;
        pg_get_uuid(r, i, 0, &a);
        pg_get_uuid(r, i, 1, &b);
        char as[QL_ID_STR_LEN + 1], bs[QL_ID_STR_LEN + 1];
        ql_id_format(&a, as);
        ql_id_format(&b, bs);
        finding(f, true, "jobs %s and %s: live jobs of one model overlap", as, bs);
    }
    PQclear(r);
    r = query(f,
              "SELECT 's', job FROM steps s WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = "
              "s.job) UNION ALL SELECT 'o', job FROM outputs o WHERE NOT EXISTS (SELECT 1 FROM "
              "steps s WHERE s.job = o.job AND s.seq = o.seq)",
              &rc);
    if (!r)
        return rc;
    for (int i = 0; i < PQntuples(r); i++) {
        ql_id_t j;
        pg_get_uuid(r, i, 1, &j);
        char js[QL_ID_STR_LEN + 1];
        ql_id_format(&j, js);
        finding(f, true,
                PQgetvalue(r, i, 0)[0] == 's' ? "step of job %s: the job does not exist"
                                              : "output of job %s: the step does not exist",
                js);
    }
    PQclear(r);
    r = query(f, "SELECT count(*) FROM steps", &rc);
    if (!r)
        return rc;
    f->r->steps = (uint64_t)pg_get_i64(r, 0, 0);
    PQclear(r);
    return 0;
}

int pg_fsck(ql_store_t *s, void *out_file, ql_fsck_report_t *report) {
    ql_fsck_report_t local;
    pgf_t f = {.out = out_file, .r = report ? report : &local};
    memset(f.r, 0, sizeof *f.r);
    ql_txn_t *t;
    int rc = ql_txn_begin(s, false, &t);
    if (rc)
        return rc;
    f.t = pgt(t);
    uint64_t major = 0;
    int mrc = ql_meta_get_u64(t, "schema_major", &major);
    if (mrc)
        finding(&f, true, "meta: schema_major is %s",
                mrc == QL_ENOTFOUND ? "missing" : "malformed");
    else if (major > QL_SCHEMA_MAJOR)
        finding(&f, true, "meta: schema_major %llu is newer than this build (%d)",
                (unsigned long long)major, QL_SCHEMA_MAJOR);
    if (!(rc = check_models(&f)) && !(rc = check_segments(&f)))
        rc = check_jobs(&f);
    ql_txn_abort(t);
    if (f.out)
        fflush(f.out);
    return rc;
}
