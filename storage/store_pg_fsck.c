/*
 * fsck of the PostgreSQL backend (docs/postgresql.md, fsck). LMDB's fsck checks its hand-kept
 * indexes, key layouts and counters against the records; here indexes and counts are the
 * database's (index health is amcheck's job), so this checks every other rule LMDB's fsck
 * checks, stated in SQL where SQL can state it:
 *   - every record decodes, its state is legal, and its columns equal the decoded record (a
 *     column that drifted would make an index, a count or the live-job constraint answer for
 *     another record);
 *   - built segments of a model do not overlap, and a NEW one overlaps only the sources of its
 *     live refresh or merge; a NEW segment's job exists, is live and builds it (else a warning,
 *     an orphan, or a violation);
 *   - orphans: models without a project, segments without a model, steps without a job (all
 *     violations), outputs without a step, jobs without a project, live jobs without their model
 *     or segment (warnings, as on LMDB);
 *   - steps are numbered 00..n_steps-1, a SUCCEED job has only SUCCEED, WARNING or SKIP steps,
 *     a final job no RUNNING step; the ranged live jobs of a model do not overlap.
 * One REPEATABLE READ snapshot for the whole run, like LMDB's one read transaction, so it may
 * run next to live writers. Each table is read through a portal, 256 rows per FETCH.
 *
 * This file is the driver, the cursor reader and the passes up to the segments; the jobs, steps
 * and outputs are in store_pg_fsck_jobs.c.
 */
#include "store_pg_fsck_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void pgf_finding(pgf_t *f, bool violation, const char *fmt, ...) {
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

void pgf_differs(char *list, size_t cap, bool differs, const char *name) {
    if (!differs)
        return;
    size_t n = strlen(list);
    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", name);
}

/* ---- the cursor reader ---- */

static int failed(pgf_t *f, PGresult *r) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    int rc = PQstatus(f->t->conn->c) == CONNECTION_BAD ? QL_EUNAVAILABLE : pg_sqlstate_err(st);
    f->t->failed = rc;
    return rc;
}

int pgf_cur_open(pgf_t *f, pgf_cur_t *c, const char *sql) {
    *c = (pgf_cur_t){.f = f, .id = f->cursors++};
    if (f->t->failed)
        return f->t->failed;
    size_t len = strlen(sql) + 64;
    char *decl = malloc(len);
    if (!decl)
        return UV_ENOMEM;
    snprintf(decl, len, "DECLARE fc%u BINARY NO SCROLL CURSOR FOR %s", c->id, sql);
    PGresult *r = PQexecParams(f->t->conn->c, decl, 0, NULL, NULL, NULL, NULL, 1);
    free(decl);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : failed(f, r);
    PQclear(r);
    return rc;
}

int pgf_cur_next(pgf_cur_t *c) {
    if (c->r && ++c->row < c->n)
        return 1;
    if (c->end)
        return 0;
    PQclear(c->r);
    c->r = NULL;
    if (c->f->t->failed)
        return c->f->t->failed;
    char fetch[48];
    snprintf(fetch, sizeof fetch, "FETCH 256 FROM fc%u", c->id);
    c->r = PQexecParams(c->f->t->conn->c, fetch, 0, NULL, NULL, NULL, NULL, 1);
    if (PQresultStatus(c->r) != PGRES_TUPLES_OK) {
        int rc = failed(c->f, c->r);
        PQclear(c->r);
        c->r = NULL;
        c->end = true;
        return rc;
    }
    c->n = PQntuples(c->r);
    c->row = 0;
    c->end = c->n < 256;
    return c->n > 0;
}

void pgf_cur_close(pgf_cur_t *c) {
    PQclear(c->r);
    c->r = NULL;
    if (c->f->t->failed)
        return;
    char sql[32];
    snprintf(sql, sizeof sql, "CLOSE fc%u", c->id);
    PGresult *r = PQexec(c->f->t->conn->c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        failed(c->f, r);
    PQclear(r);
}

static const char *text_col(PGresult *r, int row, int col) {
    return PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col);
}

static bool valid_project_name(const char *name) {
    size_t n = strlen(name);
    return n > 0 && n <= QL_NAME_MAX;
}

/* ---- meta, projects, models ---- */

static int check_meta(pgf_t *f) {
    uint64_t major = 0;
    int rc = ql_meta_get_u64(f->txn, "schema_major", &major);
    if (rc && rc != QL_ENOTFOUND && rc != QL_ECORRUPT)
        return rc;
    if (rc)
        PGF_VIOLATION(f, "meta: schema_major is %s", rc == QL_ENOTFOUND ? "missing" : "malformed");
    else if (major > QL_SCHEMA_MAJOR)
        PGF_VIOLATION(f, "meta: schema_major %llu is newer than this build (%d)",
                      (unsigned long long)major, QL_SCHEMA_MAJOR);
    return 0;
}

int pgf_projects(pgf_t *f) {
    pgf_cur_t c;
    int rc = pgf_cur_open(f, &c, "SELECT name, rec FROM projects ORDER BY name COLLATE \"C\"");
    while (!rc && (rc = pgf_cur_next(&c)) == 1) {
        rc = 0;
        PGresult *r = c.r;
        int i = c.row;
        const char *name = text_col(r, i, 0);
        f->r->projects++;
        ql_project_t p;
        int d = ql_project_decode_z(f->z, PQgetvalue(r, i, 1), (size_t)PQgetlength(r, i, 1), 0, &p);
        if (d) {
            PGF_VIOLATION(f, "project '%s': record does not decode: %s", name, ql_strerror(d));
            continue;
        }
        if (strcmp(p.name, name) != 0)
            PGF_VIOLATION(f, "project '%s': the record is named '%s'", name, p.name);
        if (!valid_project_name(name))
            PGF_VIOLATION(f, "project '%s': the name is not valid", name);
        ql_project_free(&p);
    }
    pgf_cur_close(&c);
    return rc;
}

int pgf_models(pgf_t *f) {
    pgf_cur_t c;
    int rc = pgf_cur_open(f, &c,
                          "SELECT m.id, m.project, m.name, m.rec, EXISTS (SELECT 1 FROM projects "
                          "p WHERE p.name = m.project) FROM models m ORDER BY m.id");
    char id[QL_ID_STR_LEN + 1];
    while (!rc && (rc = pgf_cur_next(&c)) == 1) {
        rc = 0;
        PGresult *r = c.r;
        int i = c.row;
        f->r->models++;
        ql_id_t mid;
        pg_get_uuid(r, i, 0, &mid);
        ql_id_format(&mid, id);
        ql_model_t m;
        int d = ql_model_decode_z(f->z, PQgetvalue(r, i, 3), (size_t)PQgetlength(r, i, 3), 0, &m);
        if (d) {
            PGF_VIOLATION(f, "model %s: record does not decode: %s", id, ql_strerror(d));
            continue;
        }
        char diff[64] = "";
        pgf_differs(diff, sizeof diff, !ql_id_eq(&m.id, &mid), "id");
        pgf_differs(diff, sizeof diff, strcmp(m.project, text_col(r, i, 1)) != 0, "project");
        pgf_differs(diff, sizeof diff, strcmp(m.name, text_col(r, i, 2)) != 0, "name");
        if (diff[0])
            PGF_VIOLATION(f, "model %s: columns (%s) do not match the record", id, diff);
        if (!valid_project_name(m.project))
            PGF_VIOLATION(f, "model %s '%s': project name '%s' is not valid", id, m.name,
                          m.project);
        else if (!pg_get_bool(r, i, 4))
            PGF_VIOLATION(f, "model %s '%s': its project '%s' does not exist", id, m.name,
                          m.project);
        ql_model_free(&m);
    }
    pgf_cur_close(&c);
    return rc;
}

/* ---- segments ---- */

static bool is_replacing_type(const char *type) {
    return strcmp(type, "INDEX_REFRESH") == 0 || strcmp(type, "INDEX_MERGE") == 0;
}

/* The job side of NEW segment s of an existing model: orphan warnings, or a job that builds
 * something else. With report false it only answers, silently, whether s is the NEW segment of
 * a live refresh or merge that replaces `other` (which may then overlap it). */
static bool new_segment_job(pgf_t *f, const ql_segment_t *s, bool report, const ql_id_t *other) {
    char sid[QL_ID_STR_LEN + 1], jid[QL_ID_STR_LEN + 1], mid[QL_ID_STR_LEN + 1];
    ql_id_format(&s->id, sid);
    ql_id_format(&s->model, mid);
    ql_id_format(&s->job, jid);
    if (ql_id_is_zero(&s->job)) {
        if (report)
            PGF_WARNING(f, "segment %s of model %s: orphan NEW segment (no owning job)", sid, mid);
        return false;
    }
    ql_job_t j;
    int rc = ql_job_get(f->txn, &s->job, 0, &j);
    if (rc) {
        if (report && rc == QL_ENOTFOUND)
            PGF_WARNING(f, "segment %s of model %s: orphan NEW segment (its job %s does not exist)",
                        sid, mid, jid);
        else if (report) /* the job pass reports the undecodable record itself */
            PGF_WARNING(f, "segment %s of model %s: its job %s cannot be read: %s", sid, mid, jid,
                        ql_strerror(rc));
        return false;
    }
    bool replaces = false;
    if ((unsigned)j.state < QL_JOB_STATE_COUNT && ql_state_is_final(j.state)) {
        if (report)
            PGF_WARNING(f, "segment %s of model %s: orphan NEW segment (its job %s is %s)", sid,
                        mid, jid, ql_state_name(j.state));
    } else if (!ql_id_eq(&j.segment, &s->id)) {
        if (report)
            PGF_VIOLATION(f, "segment %s of model %s: its job %s builds another segment", sid, mid,
                          jid);
    } else if (!ql_id_eq(&j.model, &s->model)) {
        if (report)
            PGF_VIOLATION(f, "segment %s of model %s: its job %s belongs to another model", sid,
                          mid, jid);
    } else if (other && is_replacing_type(j.type)) {
        for (uint32_t k = 0; k < j.n_sources && !replaces; k++)
            replaces = ql_id_eq(&j.sources[k], other);
    }
    ql_job_free(&j);
    return replaces;
}

static void check_segment(pgf_t *f, PGresult *r, int i, const ql_segment_t *s, const char *sid,
                          const char *mid) {
    char diff[64] = "";
    ql_id_t id, model;
    pg_get_uuid(r, i, 0, &id);
    pg_get_uuid(r, i, 1, &model);
    pgf_differs(diff, sizeof diff, !ql_id_eq(&s->id, &id), "id");
    pgf_differs(diff, sizeof diff, !ql_id_eq(&s->model, &model), "model");
    pgf_differs(diff, sizeof diff, s->start != pg_get_i64(r, i, 2), "start_ms");
    pgf_differs(diff, sizeof diff, s->end != pg_get_i64(r, i, 3), "end_ms");
    pgf_differs(diff, sizeof diff, (int)s->status != pg_get_i16(r, i, 4), "status");
    if (diff[0])
        PGF_VIOLATION(f, "segment %s of model %s: columns (%s) do not match the record", sid, mid,
                      diff);
    if (s->start >= s->end)
        PGF_VIOLATION(f, "segment %s of model %s: empty range [%lld, %lld)", sid, mid,
                      (long long)s->start, (long long)s->end);
    bool model_exists = pg_get_bool(r, i, 6);
    if (s->status == QL_SEG_NEW && !model_exists)
        PGF_WARNING(f, "segment %s: orphan NEW segment of model %s, which does not exist", sid,
                    mid);
    else if (s->status == QL_SEG_NEW)
        new_segment_job(f, s, true, NULL);
    else if (!model_exists)
        PGF_VIOLATION(f, "segment %s (%s): its model %s does not exist", sid,
                      ql_seg_status_name(s->status), mid);
}

int pgf_segments(pgf_t *f) {
    pgf_cur_t c;
    int rc = pgf_cur_open(f, &c,
                          "SELECT s.id, s.model, s.start_ms, s.end_ms, s.status, s.rec, EXISTS "
                          "(SELECT 1 FROM models m WHERE m.id = s.model) FROM segments s "
                          "ORDER BY s.model, s.start_ms, s.id");
    char sid[QL_ID_STR_LEN + 1], mid[QL_ID_STR_LEN + 1];
    while (!rc && (rc = pgf_cur_next(&c)) == 1) {
        rc = 0;
        f->r->segments++;
        ql_id_t id, model;
        pg_get_uuid(c.r, c.row, 0, &id);
        pg_get_uuid(c.r, c.row, 1, &model);
        ql_id_format(&id, sid);
        ql_id_format(&model, mid);
        ql_segment_t s;
        int d = ql_segment_decode_z(f->z, PQgetvalue(c.r, c.row, 5),
                                    (size_t)PQgetlength(c.r, c.row, 5), 0, &s);
        if (d) {
            PGF_VIOLATION(f, "segment %s of model %s: record does not decode: %s", sid, mid,
                          ql_strerror(d));
            continue;
        }
        check_segment(f, c.r, c.row, &s, sid, mid);
        ql_segment_free(&s);
        if (f->t->failed) /* a point query of the check failed the snapshot */
            rc = f->t->failed;
    }
    pgf_cur_close(&c);
    return rc;
}

/* Every overlapping pair of one model's segments, found with the range index; a pair is allowed
 * only when one is the NEW segment of a live refresh or merge that replaces the other. */
int pgf_segment_overlaps(pgf_t *f) {
    pgf_cur_t c;
    int rc = pgf_cur_open(f, &c,
                          "SELECT a.rec, b.rec FROM segments a JOIN segments b ON a.model = "
                          "b.model AND a.id < b.id AND int8range(a.start_ms, a.end_ms) && "
                          "int8range(b.start_ms, b.end_ms) ORDER BY a.model, a.start_ms, a.id, "
                          "b.start_ms, b.id");
    char mid[QL_ID_STR_LEN + 1], as[QL_ID_STR_LEN + 1], bs[QL_ID_STR_LEN + 1];
    while (!rc && (rc = pgf_cur_next(&c)) == 1) {
        rc = 0;
        ql_segment_t a, b;
        if (ql_segment_decode_z(f->z, PQgetvalue(c.r, c.row, 0), (size_t)PQgetlength(c.r, c.row, 0),
                                0, &a))
            continue; /* reported by the segment pass */
        if (ql_segment_decode_z(f->z, PQgetvalue(c.r, c.row, 1), (size_t)PQgetlength(c.r, c.row, 1),
                                0, &b)) {
            ql_segment_free(&a);
            continue;
        }
        bool allowed = (a.status == QL_SEG_NEW && new_segment_job(f, &a, false, &b.id)) ||
                       (b.status == QL_SEG_NEW && new_segment_job(f, &b, false, &a.id));
        if (!allowed) {
            ql_id_format(&a.model, mid);
            ql_id_format(&a.id, as);
            ql_id_format(&b.id, bs);
            PGF_VIOLATION(f, "model %s: segments %s [%lld, %lld) %s and %s [%lld, %lld) %s overlap",
                          mid, as, (long long)a.start, (long long)a.end,
                          ql_seg_status_name(a.status), bs, (long long)b.start, (long long)b.end,
                          ql_seg_status_name(b.status));
        }
        ql_segment_free(&a);
        ql_segment_free(&b);
        if (f->t->failed)
            rc = f->t->failed;
    }
    pgf_cur_close(&c);
    return rc;
}

/* ---- the driver ---- */

int pg_fsck(ql_store_t *s, void *out_file, ql_fsck_report_t *report) {
    ql_fsck_report_t local;
    pgf_t f = {.out = out_file, .r = report ? report : &local};
    memset(f.r, 0, sizeof *f.r);
    int rc = ql_txn_begin(s, false, &f.txn);
    if (rc)
        return rc;
    f.t = pgt(f.txn);
    f.z = ql_txn_zone(f.txn);
    if (!f.z)
        rc = UV_ENOMEM;
    else
        rc = pg_flush(f.t); /* its BEGIN: the passes below run their statements directly */
    if (!rc)
        rc = check_meta(&f);
    int (*const passes[])(pgf_t *) = {pgf_projects,         pgf_models, pgf_segments,
                                      pgf_segment_overlaps, pgf_jobs,   pgf_live_overlaps,
                                      pgf_outputs};
    for (size_t i = 0; !rc && i < sizeof passes / sizeof passes[0]; i++)
        rc = passes[i](&f);
    ql_txn_abort(f.txn);
    if (f.out)
        fflush(f.out);
    return rc;
}
