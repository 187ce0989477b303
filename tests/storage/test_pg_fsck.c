/*
 * fsck of the PostgreSQL backend (docs/postgresql.md, fsck): each rule with a violation planted
 * in a clean store, through the store where the store lets one in and through SQL on the
 * store's schema where it does not (a constraint dropped, a column or record rewritten). The
 * clean store reports nothing; every planted store reports exactly what was planted.
 *
 * Every case needs QL_TEST_STORE=pg (storage_test_pg_fsck@pg) and skips otherwise.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];

/* The clean store every case starts from: project p, model m; a READY segment [0, 100) built
 * by a SUCCEED job with one SUCCEED step and its output; a NEW segment over it, of a live
 * INDEX_REFRESH job (READY, one READY step) that replaces it. */
typedef struct {
    ql_store_t *s;
    ql_id_t model, built, built_job, fresh, refresh_job;
} fixture_t;

static fixture_t fx;

/* A job of model m on [0, 100) (no range when the type is INDEX_MERGE) with n_steps steps. */
static void put_job(ql_txn_t *t, ql_id_t *id, const char *type, ql_state_t st, const ql_id_t *seg,
                    const ql_id_t *source, uint32_t n_steps, ql_state_t step_state) {
    ql_job_t j = {0};
    ql_store_new_id(fx.s, id);
    j.id = *id;
    strcpy(j.project, "p");
    j.model = fx.model;
    strcpy(j.type, type);
    j.state = st;
    j.priority = 3;
    j.create_time = j.modify_time = 10;
    j.has_range = strcmp(type, "INDEX_MERGE") != 0;
    j.range_start = 0;
    j.range_end = 100;
    if (seg)
        j.segment = *seg;
    ql_id_t src;
    if (source) {
        src = *source;
        j.sources = &src;
        j.n_sources = 1;
    }
    j.n_steps = n_steps;
    cr_assert_eq(ql_job_put(t, &j), 0);
    for (uint32_t i = 0; i < n_steps; i++) {
        ql_step_t s = {.job = *id, .seq = i, .state = step_state};
        strcpy(s.name, "build");
        strcpy(s.kind, "noop");
        cr_assert_eq(ql_step_put(t, &s), 0);
    }
}

static void put_segment(ql_txn_t *t, ql_id_t *id, const ql_id_t *model, int64_t a, int64_t b,
                        ql_seg_status_t st, const ql_id_t *job) {
    ql_segment_t s = {.model = *model, .start = a, .end = b, .status = st};
    ql_store_new_id(fx.s, &s.id);
    if (job)
        s.job = *job;
    *id = s.id;
    cr_assert_eq(ql_segment_put(t, &s), 0);
}

/* Called first by every case (a skip inside a suite's .init would end the process early). */
static void start(void) {
    ql_test_require_backend("pg");
    ql_test_tmpdir(dir, sizeof dir, "ql_pgfsck");
    ql_test_store_open(dir, &fx.s);
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(fx.s, "p", "m", &fx.model, &err), 0, "%s", err.msg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(fx.s, true, &t), 0);
    ql_store_new_id(fx.s, &fx.built);
    ql_store_new_id(fx.s, &fx.fresh);
    put_job(t, &fx.built_job, "INC_BUILD", QL_SUCCEED, &fx.built, NULL, 1, QL_SUCCEED);
    ql_segment_t s = {.id = fx.built,
                      .model = fx.model,
                      .start = 0,
                      .end = 100,
                      .status = QL_SEG_READY,
                      .job = fx.built_job};
    cr_assert_eq(ql_segment_put(t, &s), 0);
    cr_assert_eq(ql_output_put(t, &fx.built_job, 0, "ok\n", 3), 0);
    put_job(t, &fx.refresh_job, "INDEX_REFRESH", QL_READY, &fx.fresh, &fx.built, 1, QL_READY);
    s = (ql_segment_t){.id = fx.fresh,
                       .model = fx.model,
                       .start = 0,
                       .end = 100,
                       .status = QL_SEG_NEW,
                       .job = fx.refresh_job};
    cr_assert_eq(ql_segment_put(t, &s), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void teardown(void) {
    if (fx.s)
        ql_store_close(fx.s);
    memset(&fx, 0, sizeof fx);
}

TestSuite(pg_fsck, .fini = teardown);

/* Runs sql (printf-style) on a session of the test's own, on the store's schema. */
static void sql(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sql(const char *fmt, ...) {
    char text[1024], path[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    PGconn *c = PQconnectdb(ql_test_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    snprintf(path, sizeof path, "SET search_path TO %s, public", o.pg_schema);
    PQclear(PQexec(c, path));
    PGresult *r = PQexec(c, text);
    ExecStatusType st = PQresultStatus(r);
    cr_assert(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", text,
              PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

static const char *uuid(const ql_id_t *id) {
    static char buf[4][QL_ID_STR_LEN + 1];
    static int n;
    char *b = buf[n++ % 4];
    ql_id_format(id, b);
    return b;
}

/* Runs fsck; asserts the counts of findings and that every needle (NULL-terminated list) is in
 * its output. */
static void expect(uint64_t violations, uint64_t warnings, ...) {
    ql_fsck_report_t r;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(ql_store_fsck(fx.s, out, &r), 0);
    fclose(out);
    cr_assert_eq(r.violations, violations, "violations: %llu, not %llu:\n%s",
                 (unsigned long long)r.violations, (unsigned long long)violations, text);
    cr_assert_eq(r.warnings, warnings, "warnings: %llu, not %llu:\n%s",
                 (unsigned long long)r.warnings, (unsigned long long)warnings, text);
    va_list ap;
    va_start(ap, warnings);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        cr_assert_not_null(strstr(text, needle), "no '%s' in:\n%s", needle, text);
    va_end(ap);
    free(text);
}

static ql_txn_t *write_txn(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(fx.s, true, &t), 0);
    return t;
}

Test(pg_fsck, a_clean_store_reports_nothing_and_counts_its_records) {
    start();
    ql_fsck_report_t r;
    cr_assert_eq(ql_store_fsck(fx.s, NULL, &r), 0);
    cr_assert_eq(r.violations, 0);
    cr_assert_eq(r.warnings, 0);
    cr_assert_eq(r.projects, 1);
    cr_assert_eq(r.models, 1);
    cr_assert_eq(r.segments, 2);
    cr_assert_eq(r.jobs, 2);
    cr_assert_eq(r.steps, 2);
}

/* ---- overlaps ---- */

Test(pg_fsck, built_segments_that_overlap) {
    start();
    ql_txn_t *t = write_txn();
    ql_id_t other;
    put_segment(t, &other, &fx.model, 50, 150, QL_SEG_READY, NULL);
    cr_assert_eq(ql_txn_commit(t), 0);
    /* Over the READY segment, and over the NEW one, which does not replace it. */
    expect(2, 0, "[50, 150) READY", "overlap", uuid(&other), NULL);
}

Test(pg_fsck, a_new_segment_over_a_segment_its_job_does_not_replace) {
    start();
    ql_txn_t *t = write_txn();
    ql_id_t seg, job, elsewhere;
    ql_store_new_id(fx.s, &seg);
    ql_store_new_id(fx.s, &elsewhere);
    put_job(t, &job, "INDEX_MERGE", QL_RUNNING, &seg, &elsewhere, 0, QL_READY);
    ql_segment_t s = {
        .id = seg, .model = fx.model, .start = 20, .end = 30, .status = QL_SEG_NEW, .job = job};
    cr_assert_eq(ql_segment_put(t, &s), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    /* The READY one, and the refresh's NEW one, which replaces only the READY one. */
    expect(2, 0, "[20, 30) NEW", "overlap", NULL);
}

Test(pg_fsck, a_new_segment_overlaps_its_sources_only_while_its_job_is_live) {
    start();
    ql_txn_t *t = write_txn();
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &fx.refresh_job, 0, &j), 0);
    j.state = QL_DISCARDED;
    cr_assert_eq(ql_job_put(t, &j), 0);
    ql_job_free(&j);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(1, 1, "overlap", "orphan NEW segment (its job", "is DISCARDED", NULL);
}

Test(pg_fsck, live_jobs_of_one_model_that_overlap) {
    start();
    sql("ALTER TABLE jobs DROP CONSTRAINT live_jobs_disjoint");
    ql_txn_t *t = write_txn();
    ql_id_t job;
    put_job(t, &job, "INC_BUILD", QL_PAUSED, NULL, NULL, 0, QL_READY);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(1, 0, "live jobs ", "overlap (from 0 to 100)", NULL);
}

/* ---- the job of a NEW segment ---- */

Test(pg_fsck, new_segments_without_a_live_job_are_orphans) {
    start();
    ql_txn_t *t = write_txn();
    ql_id_t a, b, gone;
    ql_store_new_id(fx.s, &gone);
    put_segment(t, &a, &fx.model, 200, 300, QL_SEG_NEW, NULL);
    put_segment(t, &b, &fx.model, 300, 400, QL_SEG_NEW, &gone);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(0, 2, "orphan NEW segment (no owning job)", "does not exist)", NULL);
}

Test(pg_fsck, a_new_segment_whose_job_builds_another_segment) {
    start();
    ql_txn_t *t = write_txn();
    ql_id_t seg;
    put_segment(t, &seg, &fx.model, 200, 300, QL_SEG_NEW, &fx.refresh_job);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(1, 0, "builds another segment", NULL);
}

/* ---- legal states ---- */

Test(pg_fsck, a_job_in_a_step_state) {
    start();
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(fx.s, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &fx.built_job, 0, &j), 0);
    ql_txn_abort(t);
    j.state = QL_SKIP; /* ql_job_put refuses it: written past the store */
    ql_buf_t b = {0};
    cr_assert_eq(ql_job_encode(&j, &b), 0);
    char *hex = malloc(2 * b.len + 1);
    for (size_t i = 0; i < b.len; i++)
        sprintf(hex + 2 * i, "%02x", ((const uint8_t *)b.data)[i]);
    sql("UPDATE jobs SET state = 8, rec = '\\x%s' WHERE id = '%s'", hex, uuid(&j.id));
    free(hex);
    ql_buf_free(&b);
    ql_job_free(&j);
    expect(1, 0, "state SKIP is not a job state", NULL);
}

Test(pg_fsck, a_record_that_does_not_decode) {
    start();
    sql("UPDATE projects SET rec = '\\xc1'");
    sql("UPDATE steps SET rec = '\\xc1' WHERE job = '%s'", uuid(&fx.refresh_job));
    expect(2, 0, "project 'p': record does not decode", "_00: record does not decode", NULL);
}

/* ---- columns equal the record ---- */

Test(pg_fsck, columns_that_drifted_from_their_records) {
    start();
    sql("UPDATE models SET name = 'n'");
    sql("UPDATE segments SET end_ms = 90, status = 2 WHERE id = '%s'", uuid(&fx.built));
    sql("UPDATE jobs SET priority = 1, fence = 7 WHERE id = '%s'", uuid(&fx.built_job));
    sql("UPDATE jobs SET range_end = 99 WHERE id = '%s'", uuid(&fx.refresh_job));
    expect(4, 0, "columns (name) do not match", "columns (end_ms, status) do not match",
           "columns (priority, fence) do not match", "columns (range_end) do not match", NULL);
}

Test(pg_fsck, a_step_column_that_drifted) {
    start();
    sql("UPDATE steps SET seq = 1 WHERE job = '%s'", uuid(&fx.refresh_job));
    expect(2, 0, "_01: the record names step 00", "steps are not numbered 00..00", NULL);
}

/* ---- orphans ---- */

Test(pg_fsck, steps_and_outputs_without_a_job) {
    start();
    ql_id_t gone;
    ql_store_new_id(fx.s, &gone);
    ql_txn_t *t = write_txn();
    ql_step_t s = {.job = gone, .seq = 0, .state = QL_READY};
    cr_assert_eq(ql_step_put(t, &s), 0);
    cr_assert_eq(ql_output_put(t, &gone, 3, "x", 1), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    char want[128];
    snprintf(want, sizeof want, "step of job %s: the job does not exist", uuid(&gone));
    expect(1, 1, want, "_03: the step does not exist", NULL);
}

Test(pg_fsck, segments_without_a_model) {
    start();
    sql("ALTER TABLE segments DROP CONSTRAINT segments_model_fkey");
    ql_id_t gone, a, b;
    ql_store_new_id(fx.s, &gone);
    ql_txn_t *t = write_txn();
    put_segment(t, &a, &gone, 0, 10, QL_SEG_READY, NULL);
    put_segment(t, &b, &gone, 10, 20, QL_SEG_NEW, NULL);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(1, 1, "(READY): its model", "orphan NEW segment of model", NULL);
}

Test(pg_fsck, a_model_without_its_project) {
    start();
    sql("ALTER TABLE models DROP CONSTRAINT models_project_fkey");
    sql("DELETE FROM projects");
    /* The model is a violation; its two jobs are warnings, as on LMDB. */
    expect(1, 2, "its project 'p' does not exist", "job ", NULL);
}

Test(pg_fsck, live_jobs_whose_segment_or_model_is_gone) {
    start();
    ql_txn_t *t = write_txn();
    cr_assert_eq(ql_segment_delete(t, &fx.fresh), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(0, 1, "its segment is gone", NULL);
    sql("ALTER TABLE segments DROP CONSTRAINT segments_model_fkey");
    sql("DELETE FROM models");
    /* The READY segment loses its model (a violation); the live job its model (a warning). */
    expect(1, 1, "does not exist (it will become SUICIDAL)", NULL);
}

/* ---- steps against their job ---- */

Test(pg_fsck, steps_that_contradict_their_job) {
    start();
    ql_txn_t *t = write_txn();
    ql_step_t s = {.job = fx.built_job, .seq = 0, .state = QL_RUNNING};
    strcpy(s.name, "build");
    cr_assert_eq(ql_step_put(t, &s), 0);
    s = (ql_step_t){.job = fx.refresh_job, .seq = 1, .state = QL_READY};
    cr_assert_eq(ql_step_put(t, &s), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    expect(3, 0, "SUCCEED, yet a step is not SUCCEED", "SUCCEED, yet a step is RUNNING",
           "n_steps is 1 but 2 step records exist", NULL);
}

Test(pg_fsck, a_missing_schema_version) {
    start();
    sql("DELETE FROM meta WHERE key = 'schema_major'");
    expect(1, 0, "meta: schema_major is missing", NULL);
}

/* Jobs and steps are merged across several FETCH batches: 600 jobs of one step each, with steps
 * of missing jobs before, among and after them, find exactly those. */
Test(pg_fsck, the_walks_span_many_fetches) {
    start();
    ql_txn_t *t = write_txn();
    ql_id_t low = {{0}}, high, mid;
    for (int i = 0; i < 600; i++) {
        if (i == 300)
            ql_store_new_id(fx.s, &mid); /* sorts among the jobs (ids grow with time) */
        ql_id_t id;
        ql_job_t j = {0};
        ql_store_new_id(fx.s, &id);
        j.id = id;
        strcpy(j.project, "p");
        strcpy(j.type, "ADHOC");
        j.state = QL_SUCCEED;
        j.priority = 3;
        j.create_time = j.modify_time = 20 + i;
        j.n_steps = 1;
        cr_assert_eq(ql_job_put(t, &j), 0);
        ql_step_t s = {.job = id, .seq = 0, .state = QL_SUCCEED};
        cr_assert_eq(ql_step_put(t, &s), 0);
    }
    low.b[15] = 1;
    memset(high.b, 0xff, 16);
    const ql_id_t *orphans[3] = {&low, &mid, &high};
    for (int i = 0; i < 3; i++) {
        ql_step_t s = {.job = *orphans[i], .seq = 0, .state = QL_READY};
        cr_assert_eq(ql_step_put(t, &s), 0);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_fsck_report_t r;
    cr_assert_eq(ql_store_fsck(fx.s, NULL, &r), 0);
    cr_assert_eq(r.jobs, 602);
    cr_assert_eq(r.steps, 605);
    cr_assert_eq(r.violations, 3);
    cr_assert_eq(r.warnings, 0);
}
