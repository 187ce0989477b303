/*
 * The submission service (scheduler/ql_submission.h) over a real store and a manual writer:
 * each job kind lands in the store as asked (a build's range normalized, a refresh of several
 * segments in one write, an ad-hoc job with its parameters); requests that cannot be carried
 * out (a bad range, a missing model, a full-load model, a build the store's rules refuse) get
 * their code and message; every request is answered exactly once, an error found before the
 * write before the call returns, a write only after its commit; and the wake-up runs once per
 * committed write, after its answer, and never for a failure.
 */
#include "scheduler/ql_submission.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */
#define NOW (BASE + 5 * DAY)

static const char yaml[] = "templates:\n"
                           "  INC_BUILD:\n"
                           "    steps: [{name: build, kind: noop}]\n"
                           "  INDEX_MERGE:\n"
                           "    steps: [{name: merge, kind: noop}]\n"
                           "  INDEX_REFRESH:\n"
                           "    steps: [{name: refresh, kind: noop}]\n"
                           "  EXPORT:\n"
                           "    params: [TABLE]\n"
                           "    steps: [{name: export, kind: noop}, {name: tell, kind: noop}]\n";

/* One answer as the callback saw it (copied: the result is borrowed for the call). */
typedef struct answer {
    int calls;
    int status;
    ql_err_t err;
    bool written;
    ql_submit_kind_t kind;
    char type[QL_TYPE_MAX + 1];
    ql_id_t model;
    size_t n_jobs;
    ql_id_t jobs[8];
    int wakes_before; /* wake-ups seen when this answer came */
} answer_t;

static struct {
    char dir[64];
    ql_store_t *store;
    ql_templates_t *tpl;
    ql_writer_t *writer;
    ql_submission_t *svc;
    ql_id_t model; /* p.m: daily (yyyy-MM-dd), project p in the server's zone */
    ql_id_t full;  /* p.full: a full-load model */
    ql_id_t east;  /* east.e: daily, project east in Asia/Shanghai */
    int wakes;
    const answer_t *last; /* the answer whose wake-up is due next (its order is checked) */
    bool wake_after_answer;
} w;

static void wake_cb(void *arg) {
    cr_assert_eq(arg, &w);
    w.wakes++;
    if (w.last)
        w.wake_after_answer = w.last->calls == 1;
}

static void done_cb(void *arg, const ql_submission_result_t *r) {
    answer_t *a = arg;
    a->calls++;
    a->status = r->status;
    a->written = r->written;
    a->kind = r->kind;
    snprintf(a->type, sizeof a->type, "%s", r->type ? r->type : "");
    a->model = r->model;
    a->n_jobs = r->n_jobs;
    a->wakes_before = w.wakes;
    if (r->status) {
        cr_assert_not_null(r->err, "an error always comes with its code and message");
        a->err = *r->err;
        cr_assert_eq(r->n_jobs, 0);
    } else {
        cr_assert_null(r->err);
    }
    cr_assert_leq(r->n_jobs, 8);
    for (size_t i = 0; i < r->n_jobs; i++)
        a->jobs[i] = r->jobs[i];
    w.last = a;
}

static void create(const char *project, const char *zone, const char *model, bool partitioned,
                   ql_id_t *id) {
    ql_txn_t *t;
    ql_err_t err = {0};
    cr_assert_eq(ql_txn_begin(w.store, true, &t), 0);
    ql_project_t p = {0};
    if (ql_project_get(t, project, 0, &p) == QL_ENOTFOUND) {
        snprintf(p.name, sizeof p.name, "%s", project);
        if (zone)
            cr_assert_eq(ql_strmap_set(&p.config, "kylin.web.timezone", zone), 0);
        cr_assert_eq(ql_meta_create_project(t, &p, BASE, &err), 0, "%s", err.msg);
    }
    ql_project_free(&p);
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "%s", model);
    snprintf(m.project, sizeof m.project, "%s", project);
    m.partitioned = partitioned;
    if (partitioned) {
        snprintf(m.partition_column, sizeof m.partition_column, "DT");
        snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    }
    cr_assert_eq(ql_meta_create_model(t, &m, BASE, &err), 0, "%s", err.msg);
    *id = m.id;
    ql_model_free(&m);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void setup(void) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_submission");
    ql_store_opts_t so = {.path = w.dir, .map_size = 64u << 20};
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &w.store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_templates_load_buffer(yaml, strlen(yaml), "jobs.yaml", &w.tpl, &err), 0, "%s",
                 err.msg);
    create("p", NULL, "m", true, &w.model);
    create("p", NULL, "full", false, &w.full);
    create("east", "Asia/Shanghai", "e", true, &w.east);
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(w.store, &wo, &w.writer), 0);
    ql_submission_opts_t o = {.writer = w.writer,
                              .templates = w.tpl,
                              .server_timezone = "UTC",
                              .wake = wake_cb,
                              .wake_arg = &w};
    cr_assert_eq(ql_submission_new(&o, &w.svc), 0);
}

static void teardown(void) {
    ql_writer_free(w.writer); /* answers what is still queued: before the service goes */
    ql_submission_free(w.svc);
    ql_templates_free(w.tpl);
    ql_store_close(w.store);
    ql_test_rm_tree(w.dir);
}

TestSuite(submission, .init = setup, .fini = teardown, .timeout = 60);

/* Submits req and lets the writer run until nothing is queued; asserts one answer. */
static answer_t submit(const ql_submission_req_t *req) {
    answer_t a = {0};
    cr_assert_eq(ql_submission_submit(w.svc, req, done_cb, &a), 0);
    while (ql_writer_flush(w.writer) > 0)
        ;
    cr_assert_eq(a.calls, 1, "answered %d times", a.calls);
    w.last = NULL;
    return a;
}

/* A request refused before the write: answered inside the call, nothing queued, no wake-up. */
static answer_t refused_early(const ql_submission_req_t *req, int code) {
    int wakes = w.wakes;
    uint64_t before = ql_test_store_hash(w.store);
    answer_t a = {0};
    cr_assert_eq(ql_submission_submit(w.svc, req, done_cb, &a), 0);
    cr_assert_eq(a.calls, 1, "an early error is answered before the call returns");
    cr_assert(!ql_writer_pending(w.writer), "nothing was queued");
    cr_assert_eq(ql_writer_flush(w.writer), 0);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(a.status, code, "expected %s, got %s: %s", ql_error_code(code),
                 ql_error_code(a.status), a.err.msg);
    cr_assert_eq(a.err.code, code);
    cr_assert(!a.written);
    cr_assert_eq(w.wakes, wakes, "a failure wakes nobody");
    cr_assert_eq(ql_test_store_hash(w.store), before);
    w.last = NULL;
    return a;
}

static ql_submission_req_t build_req(const char *model, int64_t start, int64_t end) {
    return (ql_submission_req_t){.kind = QL_SUBMIT_BUILD,
                                 .project = "p",
                                 .model = model,
                                 .has_range = true,
                                 .start = start,
                                 .end = end,
                                 .priority = 2,
                                 .submitter = "alice",
                                 .now = NOW};
}

static ql_job_t get_job(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

/* A READY segment of p.m over day d (a build, finished). */
static ql_id_t ready_segment(int d) {
    answer_t a = submit(&(ql_submission_req_t){.kind = QL_SUBMIT_BUILD,
                                               .model_id = &w.model,
                                               .has_range = true,
                                               .start = BASE + d * DAY,
                                               .end = BASE + (d + 1) * DAY,
                                               .priority = 3,
                                               .now = NOW});
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    ql_txn_t *t;
    ql_err_t err = {0};
    cr_assert_eq(ql_txn_begin(w.store, true, &t), 0);
    cr_assert_eq(ql_job_force_finish(t, &a.jobs[0], QL_SUCCEED, false, NOW, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_job_t j = get_job(&a.jobs[0]);
    ql_id_t seg = j.segment;
    ql_job_free(&j);
    return seg;
}

/* ---- each kind ---- */

Test(submission, a_build_is_normalized_answered_after_its_commit_and_wakes_once) {
    /* Mid-day to past midnight: each end floors to its day's start in the daily format. */
    ql_submission_req_t req = build_req("m", BASE + DAY / 2, BASE + 2 * DAY + 3600000);
    answer_t a = {0};
    cr_assert_eq(ql_submission_submit(w.svc, &req, done_cb, &a), 0);
    cr_assert_eq(a.calls, 0, "no answer before the commit");
    cr_assert(ql_writer_pending(w.writer));
    cr_assert_eq(w.wakes, 0);
    cr_assert_eq(ql_writer_flush(w.writer), 1);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert(a.written);
    cr_assert_str_eq(a.type, "INC_BUILD");
    cr_assert(ql_id_eq(&a.model, &w.model));
    cr_assert_eq(a.n_jobs, 1);
    cr_assert_eq(w.wakes, 1);
    cr_assert_eq(a.wakes_before, 0, "the wake-up comes after the answer");
    cr_assert(w.wake_after_answer);

    ql_job_t j = get_job(&a.jobs[0]);
    cr_assert_str_eq(j.type, "INC_BUILD");
    cr_assert_eq(j.range_start, BASE);
    cr_assert_eq(j.range_end, BASE + 2 * DAY);
    cr_assert_str_eq(j.submitter, "alice");
    cr_assert_eq(j.priority, 2);
    cr_assert_eq(j.create_time, NOW);
    cr_assert_eq(j.n_steps, 1);
    ql_job_free(&j);
    ql_test_assert_fsck_clean(w.store);
}

Test(submission, a_merge_creates_one_job_over_its_segments) {
    ql_id_t ids[2] = {ready_segment(1), ready_segment(0)};
    int wakes = w.wakes;
    answer_t a = submit(&(ql_submission_req_t){.kind = QL_SUBMIT_MERGE,
                                               .project = "p",
                                               .model = "m",
                                               .ids = ids,
                                               .n_ids = 2,
                                               .priority = QL_PRIORITY_DEFAULT,
                                               .now = NOW});
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert_str_eq(a.type, "INDEX_MERGE");
    cr_assert_eq(a.n_jobs, 1);
    cr_assert_eq(w.wakes, wakes + 1);
    ql_job_t j = get_job(&a.jobs[0]);
    cr_assert_str_eq(j.type, "INDEX_MERGE");
    cr_assert_str_eq(j.submitter, "ADMIN", "no submitter: ADMIN");
    cr_assert_eq(j.n_sources, 2);
    cr_assert_eq(j.range_start, BASE);
    cr_assert_eq(j.range_end, BASE + 2 * DAY);
    ql_job_free(&j);
    ql_test_assert_fsck_clean(w.store);
}

Test(submission, a_refresh_of_two_segments_is_one_write_with_a_job_each) {
    ql_id_t ids[2] = {ready_segment(0), ready_segment(3)};
    int wakes = w.wakes;
    answer_t a = submit(&(ql_submission_req_t){.kind = QL_SUBMIT_REFRESH,
                                               .project = "p",
                                               .model = "m",
                                               .ids = ids,
                                               .n_ids = 2,
                                               .priority = QL_PRIORITY_DEFAULT,
                                               .now = NOW});
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert_str_eq(a.type, "INDEX_REFRESH");
    cr_assert_eq(a.n_jobs, 2);
    cr_assert_eq(w.wakes, wakes + 1, "one wake-up for the write, not one per job");
    for (int i = 0; i < 2; i++) {
        ql_job_t j = get_job(&a.jobs[i]);
        cr_assert_str_eq(j.type, "INDEX_REFRESH");
        cr_assert_eq(j.n_sources, 1);
        cr_assert(ql_id_eq(&j.sources[0], &ids[i]), "the jobs follow the request's order");
        ql_job_free(&j);
    }
}

Test(submission, a_refresh_creates_all_of_its_jobs_or_none) {
    ql_id_t ids[2] = {ready_segment(0), {{0}}};
    ql_store_new_id(w.store, &ids[1]); /* no such segment */
    int wakes = w.wakes;
    uint64_t before = ql_test_store_hash(w.store);
    answer_t a = submit(&(ql_submission_req_t){.kind = QL_SUBMIT_REFRESH,
                                               .project = "p",
                                               .model = "m",
                                               .ids = ids,
                                               .n_ids = 2,
                                               .now = NOW});
    cr_assert_eq(a.status, QL_ENOTFOUND, "%s", a.err.msg);
    cr_assert(a.written, "the store's rules refused the write");
    cr_assert_not_null(strstr(a.err.msg, "not found in model 'm'"), "%s", a.err.msg);
    cr_assert_eq(ql_test_store_hash(w.store), before, "the first refresh was not kept");
    cr_assert_eq(w.wakes, wakes);
}

static ql_adhoc_job_t adhoc(const char *text) {
    ql_adhoc_job_t def;
    ql_err_t err = {0};
    cr_assert_eq(ql_adhoc_parse(text, strlen(text), "<test>", &def, &err), 0, "%s", err.msg);
    return def;
}

Test(submission, an_adhoc_job_is_written_once_with_its_parameters) {
    ql_adhoc_job_t def = adhoc("{project: p, model: m, type: EXPORT, priority: 1,\n"
                               " params: {TABLE: sales}}\n");
    answer_t a = submit(&(ql_submission_req_t){.kind = QL_SUBMIT_ADHOC,
                                               .project = def.project,
                                               .model = def.model,
                                               .adhoc = &def,
                                               .priority = def.priority,
                                               .submitter = "bob",
                                               .now = NOW});
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert_str_eq(a.type, "EXPORT");
    cr_assert(ql_id_eq(&a.model, &w.model));
    cr_assert_eq(w.wakes, 1);
    ql_job_t j = get_job(&a.jobs[0]);
    cr_assert_str_eq(j.type, "EXPORT");
    cr_assert_str_eq(j.project, "p");
    cr_assert(ql_id_eq(&j.model, &w.model));
    cr_assert_eq(j.n_steps, 2, "the chain of its type");
    cr_assert_eq(j.priority, 1);
    cr_assert_str_eq(j.submitter, "bob");
    char *want;
    size_t want_len;
    cr_assert_eq(ql_job_params_encode(def.params, def.n_params, &want, &want_len), 0);
    cr_assert_eq(j.params_len, want_len);
    cr_assert(memcmp(j.params, want, want_len) == 0);
    free(want);
    ql_job_free(&j);
    ql_adhoc_job_clear(&def);
    ql_test_assert_fsck_clean(w.store);
}

Test(submission, an_adhoc_job_of_no_model_brings_its_own_steps) {
    ql_adhoc_job_t def = adhoc("{project: p, type: CLEANUP, steps: [{name: first one, kind: "
                               "noop}]}\n");
    ql_submission_req_t req = {.kind = QL_SUBMIT_ADHOC,
                               .project = def.project,
                               .adhoc = &def,
                               .priority = def.priority,
                               .now = NOW};
    answer_t a = {0};
    cr_assert_eq(ql_submission_submit(w.svc, &req, done_cb, &a), 0);
    /* Borrowed for the call only: gone (and its memory reused) before the write runs. */
    ql_adhoc_job_clear(&def);
    char *reuse = strdup("overwritten");
    cr_assert_eq(ql_writer_flush(w.writer), 1);
    free(reuse);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert(ql_id_is_zero(&a.model));
    ql_job_t j = get_job(&a.jobs[0]);
    cr_assert_str_eq(j.type, "CLEANUP");
    cr_assert(ql_id_is_zero(&j.model));
    cr_assert_eq(j.n_steps, 1);
    cr_assert_null(j.params);
    ql_job_free(&j);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_step_t st;
    cr_assert_eq(ql_step_get(t, &a.jobs[0], 0, &st), 0);
    ql_txn_abort(t);
    cr_assert_str_eq(st.name, "first one");
    ql_step_free(&st);
}

Test(submission, an_adhoc_job_must_supply_its_chains_parameters) {
    ql_adhoc_job_t def = adhoc("{project: p, type: EXPORT}\n");
    ql_submission_req_t req = {.kind = QL_SUBMIT_ADHOC,
                               .project = def.project,
                               .adhoc = &def,
                               .priority = def.priority,
                               .now = NOW};
    answer_t a = refused_early(&req, QL_EINVAL);
    cr_assert_not_null(strstr(a.err.msg, "TABLE"), "%s", a.err.msg);
    cr_assert_str_eq(a.type, "EXPORT", "an ad-hoc job's answer names its type");
    ql_adhoc_job_clear(&def);
    def = adhoc("{project: p, type: NOT_A_TEMPLATE}\n");
    req.adhoc = &def;
    req.project = def.project;
    a = refused_early(&req, QL_EINVAL);
    cr_assert_not_null(strstr(a.err.msg, "(give the job's steps, or define the type in the job "
                                         "templates)"),
                       "%s", a.err.msg);
    cr_assert_eq(strncmp(a.err.msg, "type: ", 6), 0, "%s", a.err.msg);
    ql_adhoc_job_clear(&def);
    req.adhoc = NULL;
    refused_early(&req, QL_EINVAL);
}

/* ---- requests that cannot be carried out ---- */

Test(submission, bad_ranges) {
    ql_submission_req_t req = build_req("m", BASE + DAY, BASE + DAY);
    answer_t a = refused_early(&req, QL_EEMPTYRANGE);
    cr_assert_not_null(strstr(a.err.msg, "is empty after normalization with the partition format "
                                         "'yyyy-MM-dd'"),
                       "%s", a.err.msg);
    req.has_range = false;
    a = refused_early(&req, QL_ENORANGE);
    cr_assert_str_eq(a.err.msg,
                     "model 'm' is partitioned by DT: a build needs start and end (epoch ms)");
    /* In Shanghai, 01:00Z on 1970-01-01 is in a day that began before the epoch. */
    req = build_req("e", 3600000, DAY);
    req.project = "east";
    a = refused_early(&req, QL_EINVAL);
    cr_assert_eq(strncmp(a.err.msg, "start: 3600000 falls in a period", 32), 0, "%s", a.err.msg);
    cr_assert_not_null(strstr(a.err.msg, "(at -28800000 in the project's time zone)"), "%s",
                       a.err.msg);
}

Test(submission, a_missing_model_or_project) {
    ql_submission_req_t req = build_req("nope", BASE, BASE + DAY);
    answer_t a = refused_early(&req, QL_ENOTFOUND);
    cr_assert_str_eq(a.err.msg, "model 'nope' not found in project 'p'");
    cr_assert(ql_id_is_zero(&a.model));
    req.model = NULL;
    a = refused_early(&req, QL_EINVAL);
    cr_assert_str_eq(a.err.msg, "model: required (the model's name or uuid)");
    req = build_req("m", BASE, BASE + DAY);
    req.project = "elsewhere";
    a = refused_early(&req, QL_ENOTFOUND);
    cr_assert_str_eq(a.err.msg, "project 'elsewhere' not found");
    req.project = NULL;
    a = refused_early(&req, QL_EINVAL);
    cr_assert_str_eq(a.err.msg, "project: required (the project's name)");
    /* By id. */
    ql_id_t gone;
    ql_store_new_id(w.store, &gone);
    req.model_id = &gone;
    a = refused_early(&req, QL_ENOTFOUND);
    cr_assert_str_eq(a.err.msg, "model not found");
    /* By uuid in the model's own project only. */
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&w.east, id);
    req = build_req(id, BASE, BASE + DAY);
    a = refused_early(&req, QL_ENOTFOUND);
    req.project = "east";
    a = submit(&req);
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert(ql_id_eq(&a.model, &w.east));
}

/* Kylin's full build: the whole range whatever the request gives, and Kylin's yarn_queue and
 * tag kept with the job; a second one overlaps the first. */
Test(submission, a_full_load_model_builds_its_whole_range_once) {
    ql_submission_req_t req = build_req("full", BASE, BASE + DAY);
    req.yarn_queue = "root.full";
    req.tag = "{\"k\":1}";
    answer_t a = submit(&req);
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert(ql_id_eq(&a.model, &w.full), "the model was found");
    cr_assert_eq(a.n_jobs, 1);
    ql_job_t j = get_job(&a.jobs[0]);
    cr_assert_str_eq(j.type, "INC_BUILD");
    cr_assert(j.has_range);
    cr_assert_eq(j.range_start, 0);
    cr_assert_eq(j.range_end, QL_RANGE_FULL_END);
    cr_assert_str_eq(j.yarn_queue, "root.full");
    cr_assert_str_eq(j.tag, "{\"k\":1}");
    ql_job_free(&j);
    req.has_range = false;
    a = submit(&req);
    cr_assert_eq(a.status, QL_ESEGOVERLAP, "%s", a.err.msg);
    cr_assert(a.written, "refused by the store's rule, in the write");
}

Test(submission, a_build_the_store_refuses_is_answered_once_and_wakes_nobody) {
    ql_submission_req_t req = build_req("m", BASE, BASE + DAY);
    answer_t a = submit(&req);
    cr_assert_eq(a.status, 0, "%s", a.err.msg);
    cr_assert_eq(w.wakes, 1);
    a = submit(&req);
    cr_assert_eq(a.status, QL_ESEGOVERLAP, "%s", a.err.msg);
    cr_assert_eq(a.err.code, QL_ESEGOVERLAP);
    cr_assert(a.written);
    cr_assert_not_null(strstr(a.err.msg, "overlaps with the built segments"), "%s", a.err.msg);
    cr_assert_eq(w.wakes, 1);
}

/* ---- answers and wake-ups ---- */

Test(submission, writes_committed_together_wake_once_each) {
    answer_t a[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        ql_submission_req_t req = build_req("m", BASE + i * DAY, BASE + (i + 1) * DAY);
        cr_assert_eq(ql_submission_submit(w.svc, &req, done_cb, &a[i]), 0);
    }
    cr_assert_eq(ql_writer_flush(w.writer), 3, "one batch, one commit");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(a[i].calls, 1);
        cr_assert_eq(a[i].status, 0, "%s", a[i].err.msg);
        cr_assert_eq(a[i].wakes_before, i, "each answer, then its wake-up");
    }
    cr_assert_eq(w.wakes, 3);
}

Test(submission, a_call_that_is_wrong_in_itself_is_never_answered) {
    ql_submission_req_t req = build_req("m", BASE, BASE + DAY);
    cr_assert_eq(ql_submission_submit(w.svc, &req, NULL, NULL), UV_EINVAL);
    answer_t a = {0};
    req.kind = (ql_submit_kind_t)(QL_SUBMIT_ADHOC + 1);
    cr_assert_eq(ql_submission_submit(w.svc, &req, done_cb, &a), UV_EINVAL);
    cr_assert_eq(ql_submission_submit(w.svc, NULL, done_cb, &a), UV_EINVAL);
    cr_assert_eq(ql_writer_flush(w.writer), 0);
    cr_assert_eq(a.calls, 0);
    cr_assert_eq(w.wakes, 0);
}

Test(submission, builds_share_the_services_formats) {
    for (int i = 0; i < 3; i++) {
        answer_t a = submit(&(ql_submission_req_t){.kind = QL_SUBMIT_BUILD,
                                                   .model_id = &w.model,
                                                   .has_range = true,
                                                   .start = BASE + i * DAY,
                                                   .end = BASE + (i + 1) * DAY,
                                                   .priority = 3,
                                                   .now = NOW});
        cr_assert_eq(a.status, 0, "%s", a.err.msg);
    }
    ql_submit_cache_stats_t st;
    ql_submit_cache_get_stats(ql_submission_cache(w.svc), &st);
    cr_assert_eq(st.format_opens, 1);
    cr_assert_eq(st.format_hits, 2);
}

Test(submission, the_lookups_name_what_is_missing) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_model_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_submission_get_model(t, "p", "m", 0, &m, &err), 0, "%s", err.msg);
    cr_assert(ql_id_eq(&m.id, &w.model));
    ql_model_free(&m);
    char too_long[QL_NAME_MAX + 2];
    memset(too_long, 'x', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    cr_assert_eq(ql_submission_get_model(t, "p", too_long, 0, &m, &err), QL_EINVAL);
    cr_assert_not_null(strstr(err.msg, "model: longer than"), "%s", err.msg);
    ql_project_t p;
    cr_assert_eq(ql_submission_get_project(t, too_long, &p, &err), QL_EINVAL);
    cr_assert_not_null(strstr(err.msg, "project: longer than"), "%s", err.msg);
    ql_txn_abort(t);
}
