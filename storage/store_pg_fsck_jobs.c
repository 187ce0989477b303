/*
 * PostgreSQL fsck passes over the jobs, their steps and outputs (see store_pg_fsck.c). Jobs and
 * steps are read side by side in job id order, two portals merged as LMDB's fsck merges its two
 * cursors: each job record against its columns and its steps, steps without a job on the way.
 */
#include "store_pg_fsck_int.h"

#include <string.h>

typedef struct {
    uint32_t n;
    uint32_t next_seq;
    bool bad_seq;
    bool bad_for_succeed; /* a step not SUCCEED/WARNING/SKIP */
    bool running;
} step_tally_t;

/* Step row (job, seq, rec) of cursor c, job jid. */
static void check_step(pgf_t *f, PGresult *r, int i, const char *jid, step_tally_t *t) {
    f->r->steps++;
    ql_id_t job;
    pg_get_uuid(r, i, 0, &job);
    uint32_t seq = (uint32_t)pg_get_i32(r, i, 1);
    t->n++;
    if (seq != t->next_seq)
        t->bad_seq = true;
    t->next_seq = seq + 1;
    ql_step_t s;
    int d = ql_step_decode_z(f->z, PQgetvalue(r, i, 2), (size_t)PQgetlength(r, i, 2), 0, &s);
    if (d) {
        PGF_VIOLATION(f, "step %s_%02u: record does not decode: %s", jid, seq, ql_strerror(d));
        t->bad_for_succeed = true;
        return;
    }
    if (!ql_id_eq(&s.job, &job) || s.seq != seq)
        PGF_VIOLATION(f, "step %s_%02u: the record names step %02u of another job or sequence", jid,
                      seq, s.seq);
    if ((unsigned)s.state >= QL_STATE_COUNT)
        PGF_VIOLATION(f, "step %s_%02u: state %d is not a step state", jid, seq, (int)s.state);
    if (s.state != QL_SUCCEED && s.state != QL_WARNING && s.state != QL_SKIP)
        t->bad_for_succeed = true;
    if (s.state == QL_RUNNING)
        t->running = true;
    ql_step_free(&s);
}

static void check_job_steps(pgf_t *f, const ql_job_t *j, const char *id, const step_tally_t *t) {
    if (t->n != j->n_steps)
        PGF_VIOLATION(f, "job %s: n_steps is %u but %u step records exist", id, j->n_steps, t->n);
    else if (t->bad_seq)
        PGF_VIOLATION(f, "job %s: steps are not numbered 00..%02u", id, t->n ? t->n - 1 : 0);
    if (j->state == QL_SUCCEED && t->bad_for_succeed)
        PGF_VIOLATION(f, "job %s: SUCCEED, yet a step is not SUCCEED, WARNING or SKIP", id);
    if ((unsigned)j->state < QL_JOB_STATE_COUNT && ql_state_is_final(j->state) && t->running)
        PGF_VIOLATION(f, "job %s: %s, yet a step is RUNNING", id, ql_state_name(j->state));
}

#define JOB_COLS                                                                                   \
    "SELECT j.id, j.project, j.model, j.state, j.priority, j.create_time, j.modify_time, "         \
    "j.has_range, j.range_start, j.range_end, j.fence, j.rec, EXISTS (SELECT 1 FROM projects p "   \
    "WHERE p.name = j.project), EXISTS (SELECT 1 FROM models m WHERE m.id = j.model) FROM jobs j " \
    "ORDER BY j.id"

static void check_job_columns(pgf_t *f, PGresult *r, int i, const ql_job_t *j, const char *id) {
    ql_id_t jid, model;
    pg_get_uuid(r, i, 0, &jid);
    pg_get_uuid(r, i, 2, &model);
    char diff[160] = "";
    pgf_differs(diff, sizeof diff, !ql_id_eq(&j->id, &jid), "id");
    pgf_differs(diff, sizeof diff, strcmp(j->project, PQgetvalue(r, i, 1)) != 0, "project");
    pgf_differs(diff, sizeof diff, !ql_id_eq(&j->model, &model), "model");
    pgf_differs(diff, sizeof diff, (int)j->state != pg_get_i16(r, i, 3), "state");
    pgf_differs(diff, sizeof diff, j->priority != pg_get_i16(r, i, 4), "priority");
    pgf_differs(diff, sizeof diff, j->create_time != pg_get_i64(r, i, 5), "create_time");
    pgf_differs(diff, sizeof diff, j->modify_time != pg_get_i64(r, i, 6), "modify_time");
    pgf_differs(diff, sizeof diff, j->has_range != pg_get_bool(r, i, 7), "has_range");
    /* Without a range the range columns are not read (store_pg_records.c). */
    pgf_differs(diff, sizeof diff, j->has_range && j->range_start != pg_get_i64(r, i, 8),
                "range_start");
    pgf_differs(diff, sizeof diff, j->has_range && j->range_end != pg_get_i64(r, i, 9),
                "range_end");
    pgf_differs(diff, sizeof diff, (int64_t)j->fence != pg_get_i64(r, i, 10), "fence");
    if (diff[0])
        PGF_VIOLATION(f, "job %s: columns (%s) do not match the record", id, diff);
}

static void check_job_record(pgf_t *f, PGresult *r, int i, const ql_job_t *j, const char *id) {
    check_job_columns(f, r, i, j, id);
    if ((unsigned)j->state >= QL_JOB_STATE_COUNT) {
        PGF_VIOLATION(f, "job %s: state %s is not a job state", id, ql_state_name(j->state));
        return;
    }
    if (j->has_range && j->range_start >= j->range_end)
        PGF_VIOLATION(f, "job %s: empty range [%lld, %lld)", id, (long long)j->range_start,
                      (long long)j->range_end);
    size_t pl = strlen(j->project);
    if (pl == 0 || pl > QL_NAME_MAX) {
        PGF_VIOLATION(f, "job %s: project name '%s' is not valid", id, j->project);
        return;
    }
    if (!pg_get_bool(r, i, 12))
        PGF_WARNING(f, "job %s: its project '%s' does not exist", id, j->project);
    if (ql_state_is_final(j->state) || ql_id_is_zero(&j->model))
        return;
    char mid[QL_ID_STR_LEN + 1];
    ql_id_format(&j->model, mid);
    if (!pg_get_bool(r, i, 13))
        PGF_WARNING(f, "job %s: %s, but its model %s does not exist (it will become SUICIDAL)", id,
                    ql_state_name(j->state), mid);
    else if (!ql_id_is_zero(&j->segment) && ql_segment_exists(f->txn, &j->segment) == QL_ENOTFOUND)
        PGF_WARNING(f, "job %s: %s, but its segment is gone (it will become SUICIDAL)", id,
                    ql_state_name(j->state));
}

/* Steps of the cursor before job `before` (NULL: all that are left) have no job. */
static int orphan_steps(pgf_t *f, pgf_cur_t *sc, int *srow, const uint8_t *before) {
    char id[QL_ID_STR_LEN + 1];
    while (*srow == 1 && (!before || memcmp(PQgetvalue(sc->r, sc->row, 0), before, 16) < 0)) {
        f->r->steps++;
        ql_id_t job;
        pg_get_uuid(sc->r, sc->row, 0, &job);
        ql_id_format(&job, id);
        PGF_VIOLATION(f, "step of job %s: the job does not exist", id);
        *srow = pgf_cur_next(sc);
    }
    return *srow < 0 ? *srow : 0;
}

int pgf_jobs(pgf_t *f) {
    pgf_cur_t jc, sc;
    int rc = pgf_cur_open(f, &jc, JOB_COLS);
    if (rc)
        return rc;
    if ((rc = pgf_cur_open(f, &sc, "SELECT job, seq, rec FROM steps ORDER BY job, seq"))) {
        pgf_cur_close(&jc);
        return rc;
    }
    int srow = pgf_cur_next(&sc);
    char id[QL_ID_STR_LEN + 1];
    while ((rc = pgf_cur_next(&jc)) == 1) {
        f->r->jobs++;
        const uint8_t *jk = (const uint8_t *)PQgetvalue(jc.r, jc.row, 0);
        if ((rc = orphan_steps(f, &sc, &srow, jk)))
            break;
        ql_id_t jid;
        pg_get_uuid(jc.r, jc.row, 0, &jid);
        ql_id_format(&jid, id);
        step_tally_t t = {0};
        while (srow == 1 && memcmp(PQgetvalue(sc.r, sc.row, 0), jk, 16) == 0) {
            check_step(f, sc.r, sc.row, id, &t);
            srow = pgf_cur_next(&sc);
        }
        if ((rc = srow < 0 ? srow : 0))
            break;
        ql_job_t j;
        int d = ql_job_decode_z(f->z, PQgetvalue(jc.r, jc.row, 11),
                                (size_t)PQgetlength(jc.r, jc.row, 11), 0, &j);
        if (d) {
            PGF_VIOLATION(f, "job %s: record does not decode: %s", id, ql_strerror(d));
            continue;
        }
        check_job_record(f, jc.r, jc.row, &j, id);
        check_job_steps(f, &j, id, &t);
        ql_job_free(&j);
        if ((rc = f->t->failed))
            break;
    }
    if (rc == 0)
        rc = orphan_steps(f, &sc, &srow, NULL);
    pgf_cur_close(&sc);
    pgf_cur_close(&jc);
    return rc;
}

/* The ranged live jobs of a model never overlap (KE-010032206); the exclusion constraint
 * live_jobs_disjoint enforces it, so this finds only what a dropped or bypassed constraint let
 * in. */
int pgf_live_overlaps(pgf_t *f) {
    pgf_cur_t c;
    int rc = pgf_cur_open(f, &c,
                          "SELECT a.id, b.id, greatest(a.range_start, b.range_start), "
                          "least(a.range_end, b.range_end) FROM jobs a JOIN jobs b ON a.model = "
                          "b.model AND a.id < b.id AND a.state IN (0, 1, 2, 3, 4) AND b.state IN "
                          "(0, 1, 2, 3, 4) AND a.has_range AND b.has_range AND "
                          "int8range(a.range_start, a.range_end) && int8range(b.range_start, "
                          "b.range_end) ORDER BY a.id, b.id");
    char as[QL_ID_STR_LEN + 1], bs[QL_ID_STR_LEN + 1];
    while (!rc && (rc = pgf_cur_next(&c)) == 1) {
        rc = 0;
        ql_id_t a, b;
        pg_get_uuid(c.r, c.row, 0, &a);
        pg_get_uuid(c.r, c.row, 1, &b);
        ql_id_format(&a, as);
        ql_id_format(&b, bs);
        PGF_VIOLATION(f, "live jobs %s and %s of one model overlap (from %lld to %lld)", as, bs,
                      (long long)pg_get_i64(c.r, c.row, 2), (long long)pg_get_i64(c.r, c.row, 3));
    }
    pgf_cur_close(&c);
    return rc;
}

int pgf_outputs(pgf_t *f) {
    pgf_cur_t c;
    int rc = pgf_cur_open(f, &c,
                          "SELECT o.job, o.seq FROM outputs o WHERE NOT EXISTS (SELECT 1 FROM "
                          "steps s WHERE s.job = o.job AND s.seq = o.seq) ORDER BY o.job, o.seq");
    char id[QL_ID_STR_LEN + 1];
    while (!rc && (rc = pgf_cur_next(&c)) == 1) {
        rc = 0;
        ql_id_t job;
        pg_get_uuid(c.r, c.row, 0, &job);
        ql_id_format(&job, id);
        PGF_WARNING(f, "output of step %s_%02u: the step does not exist", id,
                    (unsigned)pg_get_i32(c.r, c.row, 1));
    }
    pgf_cur_close(&c);
    return rc;
}
