/*
 * Metadata rules enforced inside the write transaction (docs/design/metadata.md, "Rules enforced
 * inside the write transaction") and the segment effects of job outcomes (docs/design/jobs.md).
 *
 * Every submission runs the way the writer runs it: in a nested transaction of a write
 * transaction, aborted when it fails. A failing submission must leave the store byte-for-byte
 * unchanged, which the tests check by hashing every table before and after. fsck runs after
 * every scenario and must find no violation.
 */
#include "storage/storage.h"
#include "storage/store_int.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];
static ql_store_t *store;
static ql_id_t model;     /* partitioned model "m" of project "p" */
static ql_id_t fullmodel; /* full-load model "full" of project "p" */
static int64_t now = 1788192000000;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static const ql_step_spec_t steps[3] = {
    {.name = "Detect resource", .kind = "noop"},
    {.name = "Load data to index", .kind = "noop", .def = (const uint8_t *)"\x90", .def_len = 1},
    {.name = "Update metadata", .kind = "noop"},
};
static const ql_job_spec_t spec = {
    .priority = 3, .submitter = "ADMIN", .steps = steps, .n_steps = 3};

/* ---- running operations like the writer does ---- */

typedef enum { OP_BUILD, OP_MERGE, OP_REFRESH, OP_JOB, OP_DELETE, OP_PROJECT, OP_MODEL } op_kind_t;

typedef struct {
    op_kind_t kind;
    ql_id_t model;
    int64_t start, end;
    bool has_range;
    ql_id_t ids[8];
    size_t n;
    const char *type;
    const char *params; /* OP_JOB: encoded parameters (NULL: none) */
    size_t params_len;
    ql_project_t project;
    ql_model_t m;
    ql_id_t job_out, seg_out;
} op_t;

static int op_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    op_t *op = arg;
    ql_job_spec_t sp = spec;
    sp.now = ++now;
    sp.params = op->params;
    sp.params_len = op->params_len;
    switch (op->kind) {
    case OP_BUILD:
        return ql_meta_submit_build(t, &op->model, op->start, op->end, &sp, &op->job_out,
                                    &op->seg_out, err);
    case OP_MERGE:
        return ql_meta_submit_merge(t, &op->model, op->ids, op->n, &sp, &op->job_out, err);
    case OP_REFRESH:
        return ql_meta_submit_refresh(t, &op->model, &op->ids[0], &sp, &op->job_out, err);
    case OP_JOB:
        return ql_meta_submit_job(t, "p", &op->model, op->type, op->has_range, op->start, op->end,
                                  &sp, &op->job_out, err);
    case OP_DELETE:
        return ql_meta_delete_segments(t, &op->model, op->ids, op->n, err);
    case OP_PROJECT:
        return ql_meta_create_project(t, &op->project, now, err);
    case OP_MODEL:
        return ql_meta_create_model(t, &op->m, now, err);
    }
    return QL_EINVAL;
}

static int run(op_t *op, ql_err_t *err) {
    ql_txn_t *top, *child;
    cr_assert_eq(ql_txn_begin(store, true, &top), 0);
    cr_assert_eq(ql_txn_begin_nested(top, &child), 0);
    ql_err_clear(err);
    int rc = op_fn(child, op, err);
    if (rc)
        ql_txn_abort(child);
    else
        cr_assert_eq(ql_txn_commit(child), 0);
    cr_assert_eq(ql_txn_commit(top), 0);
    return rc;
}

static uint64_t store_hash(void) {
    return ql_test_store_hash(store);
}

static void ok(op_t *op) {
    ql_err_t err;
    int rc = run(op, &err);
    cr_assert_eq(rc, 0, "expected success, got %s: %s", ql_strerror(rc), err.msg);
}

/* Runs op expecting code; checks the client code (when given), that the message says something,
 * and that nothing was written. Returns the message for further checks. */
static ql_err_t fails(op_t *op, int code, const char *client_code) {
    uint64_t before = store_hash();
    ql_err_t err;
    int rc = run(op, &err);
    cr_assert_eq(rc, code, "expected %s, got %s: %s", ql_strerror(code), ql_strerror(rc), err.msg);
    cr_assert_eq(err.code, code);
    cr_assert_neq(err.msg[0], '\0', "a failure says why");
    if (client_code)
        cr_assert_str_eq(ql_error_code(rc), client_code);
    cr_assert_eq(store_hash(), before, "a failed submission changed the store (%s)", err.msg);
    return err;
}

static op_t build(int64_t s, int64_t e) {
    return (op_t){.kind = OP_BUILD, .model = model, .start = s, .end = e};
}

static op_t merge2(const ql_id_t *a, const ql_id_t *b) {
    op_t op = {.kind = OP_MERGE, .model = model, .n = 2};
    op.ids[0] = *a;
    op.ids[1] = *b;
    return op;
}

static op_t refresh(const ql_id_t *seg) {
    op_t op = {.kind = OP_REFRESH, .model = model};
    op.ids[0] = *seg;
    return op;
}

static op_t del(const ql_id_t *seg) {
    op_t op = {.kind = OP_DELETE, .model = model, .n = 1};
    op.ids[0] = *seg;
    return op;
}

/* ---- moving jobs (what the engine will do) ---- */

static void write_steps(ql_txn_t *t, const ql_job_t *j, ql_state_t st, bool warned) {
    for (uint32_t i = 0; i < j->n_steps; i++) {
        ql_step_t s;
        cr_assert_eq(ql_step_get(t, &j->id, i, &s), 0);
        s.state = (warned && i == 1) ? QL_WARNING : st;
        cr_assert_eq(ql_step_put(t, &s), 0);
        ql_step_free(&s);
    }
}

/* A non-final state: RUNNING runs the first step, ERROR fails it, the others leave steps READY. */
static void set_state(const ql_id_t *job, ql_state_t st) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, job, QL_DECODE_KEEP_EXTRA, &j), 0);
    write_steps(t, &j, QL_READY, false);
    if (st == QL_RUNNING || st == QL_ERROR) {
        ql_step_t s;
        cr_assert_eq(ql_step_get(t, job, 0, &s), 0);
        s.state = st;
        cr_assert_eq(ql_step_put(t, &s), 0);
        ql_step_free(&s);
    }
    j.state = st;
    j.modify_time = ++now;
    cr_assert_eq(ql_job_put(t, &j), 0);
    ql_job_free(&j);
    cr_assert_eq(ql_txn_commit(t), 0);
}

/* A final state with its segment effects, in one transaction. */
static void finish(const ql_id_t *job, ql_state_t st, bool warned) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, job, QL_DECODE_KEEP_EXTRA, &j), 0);
    write_steps(t, &j, st == QL_SUCCEED ? QL_SUCCEED : QL_DISCARDED, warned);
    cr_assert_eq(ql_meta_apply_job_outcome(t, &j, st, warned, ++now), 0);
    j.state = st;
    j.end_time = j.modify_time = now;
    cr_assert_eq(ql_job_put(t, &j), 0);
    ql_job_free(&j);
    cr_assert_eq(ql_txn_commit(t), 0);
}

/* Builds [s, e) to completion and returns the segment id. */
static ql_id_t built(int64_t s, int64_t e, bool warned) {
    op_t op = build(s, e);
    ok(&op);
    finish(&op.job_out, QL_SUCCEED, warned);
    return op.seg_out;
}

static bool get_seg(const ql_id_t *id, ql_segment_t *out) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    int rc = ql_segment_get(t, id, out);
    ql_txn_abort(t);
    cr_assert(rc == 0 || rc == QL_ENOTFOUND, "%s", ql_strerror(rc));
    return rc == 0;
}

static ql_job_t get_job(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

/* ---- fixture ---- */

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_meta");
    ql_test_store_open(dir, &store);
    op_t p = {.kind = OP_PROJECT};
    strcpy(p.project.name, "p");
    ok(&p);
    op_t m = {.kind = OP_MODEL};
    strcpy(m.m.project, "p");
    strcpy(m.m.name, "m");
    m.m.partitioned = true;
    strcpy(m.m.partition_column, "T.D");
    strcpy(m.m.partition_format, "yyyy-MM-dd");
    ok(&m);
    model = m.m.id;
    op_t f = {.kind = OP_MODEL};
    strcpy(f.m.project, "p");
    strcpy(f.m.name, "full");
    ok(&f);
    fullmodel = f.m.id;
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(meta, .init = setup, .fini = teardown);

/* ---- new INC_BUILD segments must not overlap any segment ---- */

Test(meta, build_creates_a_new_segment_and_a_ready_job) {
    op_t op = build(100, 200);
    ok(&op);
    ql_segment_t s;
    cr_assert(get_seg(&op.seg_out, &s));
    cr_assert_eq(s.status, QL_SEG_NEW);
    cr_assert_eq(s.start, 100);
    cr_assert_eq(s.end, 200);
    cr_assert(ql_id_eq(&s.job, &op.job_out));
    ql_segment_free(&s);
    ql_job_t j = get_job(&op.job_out);
    cr_assert_str_eq(j.type, "INC_BUILD");
    cr_assert_eq(j.state, QL_READY);
    cr_assert(ql_id_eq(&j.segment, &op.seg_out));
    cr_assert(j.has_range && j.range_start == 100 && j.range_end == 200);
    cr_assert_eq(j.n_steps, 3);
    cr_assert_str_eq(j.model_name, "m");
    ql_job_free(&j);
    ql_test_assert_fsck_clean(store);
}

Test(meta, overlapping_build_is_refused_whatever_the_segment_status) {
    op_t nw = build(100, 200); /* NEW */
    ok(&nw);
    built(300, 400, false); /* READY */
    built(500, 600, true);  /* WARNING */
    const int64_t probes[][2] = {
        {150, 250}, {0, 101},   {199, 300}, {120, 130}, {0, 1000}, /* NEW */
        {350, 351}, {299, 301},                                    /* READY */
        {599, 700}, {450, 550},                                    /* WARNING */
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        op_t op = build(probes[i][0], probes[i][1]);
        ql_err_t err = fails(&op, QL_ESEGOVERLAP, "KE-010022202");
        cr_assert_not_null(strstr(err.msg, "overlaps with the built segments"), "%s", err.msg);
    }
    ql_test_assert_fsck_clean(store);
}

Test(meta, adjacent_ranges_are_fine) {
    op_t a = build(100, 200), b = build(200, 300), c = build(0, 100);
    ok(&a);
    ok(&b);
    ok(&c);
    finish(&b.job_out, QL_SUCCEED, false);
    op_t d = build(300, 301);
    ok(&d);
    ql_test_assert_fsck_clean(store);
}

/* ---- a job must not be created while a non-final job targets an overlapping range ---- */

Test(meta, live_job_over_the_range_conflicts) {
    op_t job = {.kind = OP_JOB,
                .model = model,
                .type = "INDEX_BUILD",
                .has_range = true,
                .start = 1000,
                .end = 2000};
    ok(&job);
    op_t op = build(1500, 1600);
    ql_err_t err = fails(&op, QL_EJOBCONFLICT, "KE-010032206");
    cr_assert_not_null(strstr(err.msg, "a building job for the same object already exists"));
    char jid[QL_ID_STR_LEN + 1];
    ql_id_format(&job.job_out, jid);
    cr_assert_not_null(strstr(err.msg, jid), "names the job: %s", err.msg);
    op_t again = job;
    fails(&again, QL_EJOBCONFLICT, "KE-010032206");
    /* Paused and errored jobs are non-final: still a conflict. */
    set_state(&job.job_out, QL_PAUSED);
    fails(&op, QL_EJOBCONFLICT, "KE-010032206");
    set_state(&job.job_out, QL_ERROR);
    fails(&op, QL_EJOBCONFLICT, "KE-010032206");
    /* Outside its range there is no conflict. */
    op_t beside = build(2000, 2100);
    ok(&beside);
    ql_test_assert_fsck_clean(store);
}

Test(meta, a_finished_job_does_not_conflict) {
    op_t job = {.kind = OP_JOB,
                .model = model,
                .type = "INDEX_BUILD",
                .has_range = true,
                .start = 1000,
                .end = 2000};
    ok(&job);
    op_t other = job;
    other.start = 3000;
    other.end = 4000;
    ok(&other);
    finish(&job.job_out, QL_SUCCEED, false);
    finish(&other.job_out, QL_DISCARDED, false);
    op_t a = build(1500, 1600), b = build(3000, 4000);
    ok(&a);
    ok(&b);
    ql_test_assert_fsck_clean(store);
}

Test(meta, a_live_job_of_another_model_does_not_conflict) {
    op_t m2 = {.kind = OP_MODEL};
    strcpy(m2.m.project, "p");
    strcpy(m2.m.name, "m2");
    m2.m.partitioned = true;
    strcpy(m2.m.partition_column, "D");
    strcpy(m2.m.partition_format, "yyyyMMdd");
    ok(&m2);
    op_t a = build(0, 100);
    ok(&a);
    op_t b = {.kind = OP_BUILD, .model = m2.m.id, .start = 0, .end = 100};
    ok(&b);
    ql_test_assert_fsck_clean(store);
}

/* ---- builds that cannot be ---- */

Test(meta, full_load_model_is_refused) {
    op_t op = {.kind = OP_BUILD, .model = fullmodel, .start = 0, .end = 100};
    ql_err_t err = fails(&op, QL_EFULLLOAD, NULL);
    cr_assert_not_null(strstr(err.msg, "full-load"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "'full'"), "names the model: %s", err.msg);
    ql_test_assert_fsck_clean(store);
}

Test(meta, empty_range_is_refused) {
    op_t op = build(500, 500);
    ql_err_t err = fails(&op, QL_EEMPTYRANGE, NULL);
    cr_assert_not_null(strstr(err.msg, "empty"), "%s", err.msg);
    op = build(600, 500);
    fails(&op, QL_EEMPTYRANGE, NULL);
    op_t job = {.kind = OP_JOB,
                .model = model,
                .type = "INDEX_BUILD",
                .has_range = true,
                .start = 10,
                .end = 10};
    fails(&job, QL_EEMPTYRANGE, NULL);
    ql_test_assert_fsck_clean(store);
}

Test(meta, build_on_a_missing_model_is_enotfound) {
    op_t op = build(0, 1);
    ql_store_new_id(store, &op.model);
    fails(&op, QL_ENOTFOUND, NULL);
}

/* ---- merge and refresh ---- */

Test(meta, merge_rejections) {
    ql_id_t a = built(0, 100, false), b = built(100, 200, false), c = built(300, 400, false);
    op_t nw = build(200, 300);
    ok(&nw);

    op_t one = {.kind = OP_MERGE, .model = model, .n = 1};
    one.ids[0] = a;
    ql_err_t err = fails(&one, QL_EMERGE, NULL);
    cr_assert_not_null(strstr(err.msg, "at least two"), "%s", err.msg);
    op_t none = {.kind = OP_MERGE, .model = model, .n = 0};
    fails(&none, QL_EMERGE, NULL);

    op_t gap = merge2(&b, &c);
    err = fails(&gap, QL_EMERGE, NULL);
    cr_assert_not_null(strstr(err.msg, "not contiguous"), "%s", err.msg);

    op_t with_new = merge2(&b, &nw.seg_out);
    err = fails(&with_new, QL_EMERGE, NULL);
    cr_assert_not_null(strstr(err.msg, "NEW"), "%s", err.msg);

    op_t dup = merge2(&a, &a);
    err = fails(&dup, QL_EMERGE, NULL);
    cr_assert_not_null(strstr(err.msg, "twice"), "%s", err.msg);

    op_t three = {.kind = OP_MERGE, .model = model, .n = 3};
    three.ids[0] = a;
    three.ids[1] = b;
    ql_store_new_id(store, &three.ids[2]);
    fails(&three, QL_ENOTFOUND, NULL);
    ql_test_assert_fsck_clean(store);
}

Test(meta, merge_of_contiguous_ready_and_warning_segments) {
    ql_id_t b = built(100, 200, true), a = built(0, 100, false); /* listed out of order */
    op_t op = merge2(&b, &a);
    ok(&op);
    ql_job_t j = get_job(&op.job_out);
    cr_assert_str_eq(j.type, "INDEX_MERGE");
    cr_assert_eq(j.state, QL_READY);
    cr_assert(j.has_range && j.range_start == 0 && j.range_end == 200);
    cr_assert_eq(j.n_sources, 2);
    cr_assert(ql_id_eq(&j.sources[0], &a) && ql_id_eq(&j.sources[1], &b), "sorted by start");
    ql_segment_t s;
    cr_assert(get_seg(&j.segment, &s));
    cr_assert_eq(s.status, QL_SEG_NEW);
    cr_assert_eq(s.start, 0);
    cr_assert_eq(s.end, 200);
    if (!strcmp(ql_test_store_backend(), "lmdb")) /* an LMDB index detail */
        cr_assert_eq(s.layer, 1, "over its sources until the merge ends");
    cr_assert(ql_id_eq(&s.job, &op.job_out));
    ql_segment_free(&s);

    ql_txn_t *t;
    bool exists = false;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_meta_job_target_exists(t, &j, &exists), 0);
    cr_assert(exists);
    ql_txn_abort(t);
    ql_job_free(&j);
    /* The merge's NEW segment over its sources is the one overlap fsck allows. */
    ql_test_assert_fsck_clean(store);
}

Test(meta, segments_being_refreshed_cannot_be_merged_refreshed_or_deleted) {
    ql_id_t a = built(0, 100, false), b = built(100, 200, false);
    op_t r = refresh(&a);
    ok(&r);
    ql_job_t j = get_job(&r.job_out);
    cr_assert_str_eq(j.type, "INDEX_REFRESH");
    cr_assert_eq(j.n_sources, 1);
    cr_assert(ql_id_eq(&j.sources[0], &a));
    ql_job_free(&j);

    op_t again = refresh(&a);
    fails(&again, QL_EJOBCONFLICT, "KE-010032206");
    op_t m = merge2(&a, &b);
    fails(&m, QL_EJOBCONFLICT, "KE-010032206");
    op_t d = del(&a);
    ql_err_t err = fails(&d, QL_ESEGLOCKED, NULL);
    char jid[QL_ID_STR_LEN + 1];
    ql_id_format(&r.job_out, jid);
    cr_assert_not_null(strstr(err.msg, jid), "names the job: %s", err.msg);
    op_t over = build(50, 60);
    fails(&over, QL_ESEGOVERLAP, "KE-010022202");
    /* b is not involved. */
    op_t rb = refresh(&b);
    ok(&rb);

    /* Segments being merged, likewise. */
    ql_id_t c = built(300, 400, false), e = built(400, 500, false);
    op_t mc = merge2(&c, &e);
    ok(&mc);
    op_t rc_ = refresh(&c);
    fails(&rc_, QL_EJOBCONFLICT, "KE-010032206");
    op_t me = merge2(&c, &e);
    fails(&me, QL_EJOBCONFLICT, "KE-010032206");
    op_t de = del(&e);
    fails(&de, QL_ESEGLOCKED, NULL);
    ql_test_assert_fsck_clean(store);
}

Test(meta, refresh_of_a_new_segment_is_erefresh) {
    op_t nw = build(0, 100);
    ok(&nw);
    op_t r = refresh(&nw.seg_out);
    ql_err_t err = fails(&r, QL_EREFRESH, NULL);
    cr_assert_not_null(strstr(err.msg, "NEW"), "%s", err.msg);
    op_t missing = {.kind = OP_REFRESH, .model = model};
    ql_store_new_id(store, &missing.ids[0]);
    fails(&missing, QL_ENOTFOUND, NULL);
    ql_test_assert_fsck_clean(store);
}

/* ---- deleting segments ---- */

Test(meta, delete_under_a_ready_or_running_job_is_locked) {
    ql_id_t a = built(0, 100, false);
    op_t r = refresh(&a);
    ok(&r);
    op_t d = del(&a);
    fails(&d, QL_ESEGLOCKED, NULL);
    set_state(&r.job_out, QL_PENDING);
    fails(&d, QL_ESEGLOCKED, NULL);
    set_state(&r.job_out, QL_RUNNING);
    fails(&d, QL_ESEGLOCKED, NULL);
    /* The build's own NEW segment is locked too while the build runs. */
    op_t nb = build(200, 300);
    ok(&nb);
    op_t dn = del(&nb.seg_out);
    fails(&dn, QL_ESEGLOCKED, NULL);
    ql_test_assert_fsck_clean(store);
}

/* docs/design/metadata.md: segments being merged or refreshed cannot be deleted until their
 * job ends, and a PAUSED or ERROR job has not ended. Once it has (DISCARDED here), the delete
 * goes through. */
Test(meta, delete_under_a_paused_or_error_job_is_refused_until_it_ends) {
    ql_id_t a = built(0, 100, false), b = built(100, 200, false);
    op_t ra = refresh(&a), rb = refresh(&b);
    ok(&ra);
    ok(&rb);
    set_state(&ra.job_out, QL_PAUSED);
    set_state(&rb.job_out, QL_ERROR);
    op_t da = del(&a), db = del(&b);
    ql_err_t e = fails(&da, QL_ESEGLOCKED, "QL-00018"); /* fails() checks nothing changed */
    cr_assert(strstr(e.msg, "has not ended (PAUSED)"), "%s", e.msg);
    e = fails(&db, QL_ESEGLOCKED, "QL-00018");
    cr_assert(strstr(e.msg, "has not ended (ERROR)"), "%s", e.msg);
    ql_segment_t s;
    cr_assert(get_seg(&a, &s));
    ql_segment_free(&s);

    finish(&ra.job_out, QL_DISCARDED, false);
    op_t again = del(&a);
    ok(&again);
    cr_assert(!get_seg(&a, &s));
    op_t missing = del(&a);
    fails(&missing, QL_ENOTFOUND, NULL);
    ql_test_assert_fsck_clean(store);
}

/* ---- outcomes ---- */

Test(meta, inc_build_outcomes) {
    op_t a = build(0, 100), b = build(100, 200), c = build(200, 300), d = build(300, 400);
    ok(&a);
    ok(&b);
    ok(&c);
    ok(&d);
    finish(&a.job_out, QL_SUCCEED, false);
    finish(&b.job_out, QL_SUCCEED, true);
    finish(&c.job_out, QL_DISCARDED, false);
    finish(&d.job_out, QL_SUICIDAL, false);
    ql_segment_t s;
    cr_assert(get_seg(&a.seg_out, &s));
    cr_assert_eq(s.status, QL_SEG_READY);
    cr_assert_eq(s.last_build_time, now - 3);
    ql_segment_free(&s);
    cr_assert(get_seg(&b.seg_out, &s));
    cr_assert_eq(s.status, QL_SEG_WARNING);
    ql_segment_free(&s);
    cr_assert(!get_seg(&c.seg_out, &s), "a discarded build's segment is removed");
    cr_assert(!get_seg(&d.seg_out, &s), "a suicidal build's segment is removed");
    /* The discarded range can be built again. */
    op_t again = build(200, 400);
    ok(&again);
    ql_test_assert_fsck_clean(store);
}

Test(meta, refresh_success_replaces_its_source) {
    ql_id_t a = built(0, 100, false);
    op_t r = refresh(&a);
    ok(&r);
    ql_job_t j = get_job(&r.job_out);
    ql_id_t fresh = j.segment;
    ql_job_free(&j);
    finish(&r.job_out, QL_SUCCEED, false);
    ql_segment_t s;
    cr_assert(!get_seg(&a, &s), "the refreshed segment is gone");
    cr_assert(get_seg(&fresh, &s));
    cr_assert_eq(s.status, QL_SEG_READY);
    cr_assert_eq(s.start, 0);
    cr_assert_eq(s.end, 100);
    ql_segment_free(&s);
    ql_test_assert_fsck_clean(store);
}

Test(meta, refresh_discard_keeps_its_source) {
    ql_id_t a = built(0, 100, false);
    op_t r = refresh(&a);
    ok(&r);
    ql_job_t j = get_job(&r.job_out);
    ql_id_t fresh = j.segment;
    ql_job_free(&j);
    finish(&r.job_out, QL_DISCARDED, false);
    ql_segment_t s;
    cr_assert(get_seg(&a, &s));
    cr_assert_eq(s.status, QL_SEG_READY);
    ql_segment_free(&s);
    cr_assert(!get_seg(&fresh, &s));
    ql_test_assert_fsck_clean(store);
}

Test(meta, merge_success_replaces_its_sources_and_moves_to_layer_0) {
    ql_id_t a = built(0, 100, false), b = built(100, 200, false), c = built(200, 300, true);
    built(300, 400, false);
    op_t m = {.kind = OP_MERGE, .model = model, .n = 3};
    m.ids[0] = c;
    m.ids[1] = a;
    m.ids[2] = b;
    ok(&m);
    ql_job_t j = get_job(&m.job_out);
    ql_id_t merged = j.segment;
    ql_job_free(&j);
    finish(&m.job_out, QL_SUCCEED, false);
    ql_segment_t s;
    cr_assert(!get_seg(&a, &s));
    cr_assert(!get_seg(&b, &s));
    cr_assert(!get_seg(&c, &s));
    cr_assert(get_seg(&merged, &s));
    cr_assert_eq(s.status, QL_SEG_READY);
    cr_assert_eq(s.start, 0);
    cr_assert_eq(s.end, 300);
    if (!strcmp(ql_test_store_backend(), "lmdb"))
        cr_assert_eq(s.layer, 0, "with its sources gone the merged segment is disjoint");
    ql_segment_free(&s);

    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_segment_t out[4];
    size_t n;
    cr_assert_eq(ql_segment_overlapping(t, &model, 250, 350, out, 4, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert(ql_id_eq(&out[0].id, &merged));
    uint64_t count;
    cr_assert_eq(ql_segment_count(t, &model, &count), 0);
    cr_assert_eq(count, 2);
    ql_txn_abort(t);
    /* And nothing may be built over it. */
    op_t over = build(10, 20);
    fails(&over, QL_ESEGOVERLAP, "KE-010022202");
    ql_test_assert_fsck_clean(store);
}

/* ---- names ---- */

Test(meta, names_are_validated_with_the_field_named) {
    char longname[QL_NAME_MAX + 2];
    memset(longname, 'a', QL_NAME_MAX + 1);
    longname[QL_NAME_MAX + 1] = '\0';
    const char *bad[] = {"", longname, "sales-2024", "na\xc3\xafve", "white space"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ql_err_t err;
        cr_assert_eq(ql_meta_check_name("project", bad[i], &err), QL_EINVAL, "'%s'", bad[i]);
        cr_assert_eq(strncmp(err.msg, "project:", 8), 0, "names the field: %s", err.msg);

        op_t p = {.kind = OP_PROJECT};
        snprintf(p.project.name, sizeof p.project.name, "%s", bad[i]);
        if (strlen(bad[i]) <= QL_NAME_MAX) { /* a longer one does not fit the record */
            err = fails(&p, QL_EINVAL, "QL-00003");
            cr_assert_not_null(strstr(err.msg, "name"), "%s", err.msg);
        }
        op_t m = {.kind = OP_MODEL};
        strcpy(m.m.project, "p");
        snprintf(m.m.name, sizeof m.m.name, "%s", bad[i]);
        if (strlen(bad[i]) <= QL_NAME_MAX) {
            err = fails(&m, QL_EINVAL, NULL);
            cr_assert_not_null(strstr(err.msg, "name"), "%s", err.msg);
        }
    }
    ql_err_t err;
    cr_assert_eq(ql_meta_check_name("model", longname, &err), QL_EINVAL);
    cr_assert_not_null(strstr(err.msg, "longer than 100"), "%s", err.msg);
    cr_assert_eq(ql_meta_check_name("model", "sales-2024", &err), QL_EINVAL);
    cr_assert_not_null(strstr(err.msg, "'-'"), "names the character: %s", err.msg);
    longname[QL_NAME_MAX] = '\0';
    cr_assert_eq(ql_meta_check_name("model", longname, &err), 0, "100 characters are fine");
    cr_assert_eq(ql_meta_check_name("model", "Orders_2024", &err), 0);

    /* Other fields carry their own name. */
    op_t m = {.kind = OP_MODEL};
    strcpy(m.m.project, "p");
    strcpy(m.m.name, "ok_name");
    strcpy(m.m.job_template, "bad-template");
    err = fails(&m, QL_EINVAL, NULL);
    cr_assert_eq(strncmp(err.msg, "job_template:", 13), 0, "%s", err.msg);
    strcpy(m.m.job_template, "");
    m.m.partitioned = true;
    err = fails(&m, QL_EINVAL, NULL);
    cr_assert_not_null(strstr(err.msg, "partition_date_column"), "%s", err.msg);
    op_t job = {.kind = OP_JOB, .model = model, .type = "lower_case"};
    err = fails(&job, QL_EINVAL, NULL);
    cr_assert_eq(strncmp(err.msg, "type:", 5), 0, "%s", err.msg);
    ql_test_assert_fsck_clean(store);
}

Test(meta, duplicates_and_missing_parents) {
    op_t p = {.kind = OP_PROJECT};
    strcpy(p.project.name, "p");
    ql_err_t err = fails(&p, QL_EEXIST, NULL);
    cr_assert_not_null(strstr(err.msg, "'p'"), "%s", err.msg);
    op_t m = {.kind = OP_MODEL};
    strcpy(m.m.project, "p");
    strcpy(m.m.name, "m");
    err = fails(&m, QL_EEXIST, NULL);
    cr_assert_not_null(strstr(err.msg, "already exists"), "%s", err.msg);
    strcpy(m.m.project, "nowhere");
    err = fails(&m, QL_ENOTFOUND, NULL);
    cr_assert_not_null(strstr(err.msg, "'nowhere'"), "%s", err.msg);
    op_t job = {.kind = OP_JOB, .model = fullmodel, .type = "CUSTOM_EXPORT"};
    ok(&job); /* an ad-hoc job without a range */
    ql_test_assert_fsck_clean(store);
}

/* ---- fencing tokens (docs/design/cluster.md, Fencing) ---- */

/* An ad-hoc job's parameters are written with the job, in the record the submission creates. */
Test(meta, a_job_keeps_the_parameters_of_its_spec) {
    static const char params[] = "\x81\xa1k\xa1v"; /* {"k": "v"} */
    op_t job = {.kind = OP_JOB,
                .model = model,
                .type = "CUSTOM_EXPORT",
                .params = params,
                .params_len = sizeof params - 1};
    ok(&job);
    ql_job_t j = get_job(&job.job_out);
    cr_assert_eq(j.params_len, sizeof params - 1);
    cr_assert(memcmp(j.params, params, j.params_len) == 0);
    ql_job_free(&j);
    op_t plain = {.kind = OP_JOB, .model = model, .type = "CUSTOM_EXPORT"};
    ok(&plain);
    j = get_job(&plain.job_out);
    cr_assert_null(j.params);
    cr_assert_eq(j.params_len, 0);
    ql_job_free(&j);
}

Test(meta, fencing_epoch_starts_at_zero_and_each_raise_adds_one) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    uint64_t e = 99;
    cr_assert_eq(ql_fence_current(t, &e), 0);
    cr_assert_eq(e, 0, "no lock was ever taken");
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(e, 1);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(e, 2);
    cr_assert_eq(ql_fence_current(t, &e), 0);
    cr_assert_eq(e, 2);
    cr_assert_eq(ql_txn_commit(t), 0);
}

Test(meta, fencing_check_passes_the_current_token_and_refuses_an_old_one) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_err_t err = {0};
    cr_assert_eq(ql_fence_check(t, 0, &err), 0, "a change not made under the lock");
    uint64_t e;
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_fence_check(t, 1, &err), 0, "the holder's own token");
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_fence_check(t, 1, &err), QL_EFENCED);
    cr_assert_eq(err.code, QL_EFENCED);
    cr_assert(strstr(err.msg, "fencing token 1") && strstr(err.msg, "epoch is now 2"), "%s",
              err.msg);
    cr_assert_eq(ql_fence_check(t, 3, &err), QL_EFENCED, "a token from no holding at all");
    cr_assert_eq(ql_fence_check(t, 2, &err), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}
