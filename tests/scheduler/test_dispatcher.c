/*
 * The dispatcher (scheduler/ql_dispatch.h) on a real store: submissions through the writer,
 * the states a scan reports as segments and jobs change, the cycle cache's Kylin semantics,
 * the project switch, transient failures, the in-process guard, fixed delay, master-only
 * scans, the metadata generation, the latest decision, logging, and a race with a manual build.
 *
 * Every test gets a fresh temporary store and a virtual clock standing at 2026-09-01 10:00:00
 * Asia/Shanghai (the contract's worked example): the due cycle of a daily model triggered at
 * 01:00:00 with offset 1 is [2026-08-31, 2026-09-01) local. By default the writer is in manual
 * mode and the dispatcher flushes it, so a scan ends inside ql_dispatcher_scan(); tests that
 * need a scan to stay pending flush later themselves or use the threaded writer, and wait on a
 * condition with a deadline, never a sleep.
 */
#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_submit.h"
#include "tests/common/tmp_util.h"

#include "tests/common/store_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define H 3600000LL
#define DAY (24 * H)
#define NOW0 1788199200000LL /* 2026-09-01 10:00:00 +08:00 */
#define OCC 1788195600000LL  /* 2026-09-01 01:00:00 +08:00 */
#define T0 1788105600000LL   /* 2026-08-31 00:00:00 +08:00 */
#define T1 1788192000000LL   /* 2026-09-01 00:00:00 +08:00 */
#define INTERVAL 30000

static const char templates_yaml[] = "templates:\n"
                                     "  INC_BUILD:\n"
                                     "    steps: [{name: build, kind: noop}]\n";

static char dir[64];
static ql_store_t *store;
static ql_writer_t *writer;
static ql_clock_t *clk;
static ql_templates_t *tmpl;
static ql_dispatcher_t *disp;
static ql_id_t model; /* "m" of project "p": eligible, daily, Asia/Shanghai */

/* ---- captured log lines ---- */

#define MAX_LINES 512
typedef struct {
    ql_log_level_t level;
    char text[1024];
} line_t;
static line_t lines[MAX_LINES];
static size_t n_lines;
static ql_log_t logger;

static void sink(void *arg, ql_log_level_t level, const char *text) {
    (void)arg;
    cr_assert_lt(n_lines, MAX_LINES);
    lines[n_lines].level = level;
    snprintf(lines[n_lines].text, sizeof lines[n_lines].text, "%s", text);
    n_lines++;
}

static int64_t log_now(void *arg) {
    (void)arg;
    return ql_clock_now_ms(clk);
}

/* Lines since `from` at level (QL_LOG_OFF: any level) containing every needle given. */
static size_t count_lines(size_t from, ql_log_level_t level, const char *needle,
                          const char *needle2) {
    size_t n = 0;
    for (size_t i = from; i < n_lines; i++)
        if ((level == QL_LOG_OFF || lines[i].level == level) &&
            (!needle || strstr(lines[i].text, needle)) &&
            (!needle2 || strstr(lines[i].text, needle2)))
            n++;
    return n;
}

static void dump_lines(size_t from) {
    for (size_t i = from; i < n_lines; i++)
        fprintf(stderr, "  log: %s\n", lines[i].text);
}

/* ---- the threaded writer's notify hook: answers are run on this (the "loop") thread ---- */

static pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t notify_cond = PTHREAD_COND_INITIALIZER;
static bool notified;

static void notify_cb(void *arg) {
    (void)arg;
    pthread_mutex_lock(&notify_lock);
    notified = true;
    pthread_cond_broadcast(&notify_cond);
    pthread_mutex_unlock(&notify_lock);
}

/* Waits (at most 10 s) for the writer to have answers, then runs them here. */
static void wait_answers(void) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&notify_lock);
    int rc = 0;
    while (!notified && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&notify_cond, &notify_lock, &dl);
    bool got = notified;
    notified = false;
    pthread_mutex_unlock(&notify_lock);
    cr_assert(got, "the writer did not answer within 10 s");
    ql_writer_complete(writer);
}

/* ---- store set-up ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void write_txn(int (*fn)(ql_txn_t *t, void *arg, ql_err_t *err), void *arg) {
    ql_err_t err = {0};
    int rc = ql_writer_call(writer, fn, arg, &err);
    cr_assert_eq(rc, 0, "write failed: %s (%s)", err.msg, ql_strerror(rc));
}

typedef struct {
    const char *name;
    bool on;
    const char *tz;
} project_def_t;

static int create_project_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    const project_def_t *def = arg;
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", def->name);
    p.auto_segment_build_enabled = def->on;
    if (def->tz && ql_strmap_set(&p.config, "kylin.web.timezone", def->tz))
        return UV_ENOMEM;
    int rc = ql_meta_create_project(t, &p, NOW0 - 30 * DAY, err);
    ql_project_free(&p);
    return rc;
}

typedef struct {
    const char *project, *name;
    bool enabled;
    const char *trigger;
    ql_id_t id;
} model_def_t;

static void model_init(ql_model_t *m, const char *project, const char *name, bool enabled,
                       const char *trigger) {
    memset(m, 0, sizeof *m);
    snprintf(m->project, sizeof m->project, "%s", project);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->partitioned = true;
    strcpy(m->partition_column, "DT");
    strcpy(m->partition_format, "yyyy-MM-dd");
    m->auto_build.present = true;
    m->auto_build.enabled = enabled;
    snprintf(m->auto_build.trigger_time, sizeof m->auto_build.trigger_time, "%s",
             trigger ? trigger : "01:00:00");
    m->auto_build.logical_date_offset_days = 1;
    strcpy(m->auto_build.data_range_start_time, "00:00:00");
    strcpy(m->auto_build.data_range_end_time, "24:00:00");
}

static int create_model_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    model_def_t *def = arg;
    ql_model_t m;
    model_init(&m, def->project, def->name, def->enabled, def->trigger);
    int rc = ql_meta_create_model(t, &m, NOW0 - 30 * DAY, err);
    def->id = m.id;
    ql_model_free(&m);
    return rc;
}

static ql_id_t add_model(const char *project, const char *name, bool enabled) {
    model_def_t def = {.project = project, .name = name, .enabled = enabled};
    write_txn(create_model_fn, &def);
    return def.id;
}

static void add_project(const char *name, bool on) {
    project_def_t def = {.name = name, .on = on, .tz = "Asia/Shanghai"};
    write_txn(create_project_fn, &def);
}

static void writer_manual(void) {
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(store, &wo, &writer), 0);
}

static void writer_threaded(void) {
    notified = false;
    ql_writer_opts_t wo = {.notify = notify_cb};
    cr_assert_eq(ql_writer_new(store, &wo, &writer), 0);
}

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_disp");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    o.id_seed = 42;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_clock_virtual_new(NOW0, &clk), 0);
    cr_assert_eq(
        ql_templates_load_buffer(templates_yaml, strlen(templates_yaml), "jobs.yaml", &tmpl, &err),
        0, "%s", err.msg);
    ql_log_init(&logger, QL_LOG_DEBUG);
    logger.sink = sink;
    logger.now = log_now;
    n_lines = 0;
    writer_manual();
    add_project("p", true);
    model = add_model("p", "m", true);
    disp = NULL;
}

static void teardown(void) {
    ql_dispatcher_free(disp);
    disp = NULL;
    ql_writer_free(writer);
    writer = NULL;
    ql_templates_free(tmpl);
    ql_clock_free(clk);
    ql_store_close(store);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(dispatcher, .init = setup, .fini = teardown);

/* ---- the dispatcher ---- */

static ql_dispatcher_opts_t default_opts(void) {
    return (ql_dispatcher_opts_t){
        .store = store,
        .writer = writer,
        .clock = clk,
        .log = &logger,
        .templates = tmpl,
        .interval_ms = INTERVAL,
        .server_timezone = "UTC",
        .manual_flush = true,
    };
}

static void make(const ql_dispatcher_opts_t *o) {
    cr_assert_eq(ql_dispatcher_new(o, &disp), 0);
}

static void make_default(void) {
    ql_dispatcher_opts_t o = default_opts();
    make(&o);
}

static void count_cb(void *arg) {
    (*(int *)arg)++;
}

/* One scan that must end inside the call (manual flush). */
static void scan(void) {
    int done = 0;
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done), 0);
    cr_assert_eq(done, 1, "the scan did not end");
    cr_assert_not(ql_dispatcher_scanning(disp));
}

static ql_decision_t decision_of(const ql_id_t *m) {
    ql_decision_t d;
    cr_assert_eq(ql_dispatcher_decision(disp, m, &d), 0, "no decision");
    return d;
}

#define EXPECT_STATE(m, want)                                                                      \
    do {                                                                                           \
        ql_decision_t d_ = decision_of(m);                                                         \
        cr_assert_eq(d_.state, (want), "state %s, want %s (%s)", ql_cycle_state_name(d_.state),    \
                     ql_cycle_state_name(want), d_.message);                                       \
    } while (0)

/* ---- reading and changing the store ---- */

typedef struct {
    ql_job_t jobs[16];
    size_t n;
} jobs_t;

static int collect_job(const ql_job_t *j, void *arg) {
    jobs_t *c = arg;
    cr_assert_lt(c->n, 16);
    cr_assert_eq(ql_job_copy(&c->jobs[c->n++], j), 0);
    return 0;
}

static jobs_t *jobs_of(const ql_id_t *m) {
    static jobs_t c;
    for (size_t i = 0; i < c.n; i++)
        ql_job_free(&c.jobs[i]);
    c.n = 0;
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_job_foreach_model(t, m, collect_job, &c), 0);
    ql_txn_abort(t);
    return &c;
}

typedef struct {
    ql_segment_t segs[16];
    size_t n;
} segs_t;

static int collect_seg(const ql_segment_t *s, void *arg) {
    segs_t *c = arg;
    cr_assert_lt(c->n, 16);
    c->segs[c->n] = *s;
    c->segs[c->n++].extra = (ql_extra_t){0};
    return 0;
}

static segs_t segments_of(const ql_id_t *m) {
    segs_t c = {.n = 0};
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_segment_foreach(t, m, collect_seg, &c), 0);
    ql_txn_abort(t);
    return c;
}

typedef struct {
    ql_id_t job;
    ql_state_t outcome;
    bool warned;
} finish_t;

static int finish_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    finish_t *f = arg;
    return ql_job_force_finish(t, &f->job, f->outcome, f->warned, ql_clock_now_ms(clk), err);
}

static void finish_job(const ql_id_t *job, ql_state_t outcome, bool warned) {
    finish_t f = {.job = *job, .outcome = outcome, .warned = warned};
    write_txn(finish_fn, &f);
}

typedef struct {
    ql_id_t model, seg;
} del_t;

static int delete_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    del_t *x = arg;
    return ql_meta_delete_segments(t, &x->model, &x->seg, 1, err);
}

typedef struct {
    const char *name;
    bool on;
} switch_t;

static int switch_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    (void)err;
    switch_t *s = arg;
    ql_project_t p;
    int rc = ql_project_get(t, s->name, QL_DECODE_KEEP_EXTRA, &p);
    if (rc)
        return rc;
    p.auto_segment_build_enabled = s->on;
    rc = ql_project_put(t, &p);
    ql_project_free(&p);
    return rc;
}

typedef struct {
    ql_id_t id;
    void (*edit)(ql_model_t *m);
} model_edit_t;

static int model_edit_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    (void)err;
    model_edit_t *e = arg;
    ql_model_t m;
    int rc = ql_model_get(t, &e->id, QL_DECODE_KEEP_EXTRA, &m);
    if (rc)
        return rc;
    e->edit(&m);
    rc = ql_model_put(t, &m);
    ql_model_free(&m);
    return rc;
}

static void edit_model(const ql_id_t *id, void (*edit)(ql_model_t *m)) {
    model_edit_t e = {.id = *id, .edit = edit};
    write_txn(model_edit_fn, &e);
}

static ql_buf_t model_bytes(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_model_t m;
    cr_assert_eq(ql_model_get(t, id, QL_DECODE_KEEP_EXTRA, &m), 0);
    ql_txn_abort(t);
    ql_buf_t b = {0};
    cr_assert_eq(ql_model_encode(&m, &b), 0);
    ql_model_free(&m);
    return b;
}

/* A manual build (REST/CLI path): the same mutation the dispatcher queues. */
static ql_submit_op_t manual_op(const ql_id_t *m, int64_t start, int64_t end) {
    return (ql_submit_op_t){.kind = QL_SUBMIT_BUILD,
                            .templates = tmpl,
                            .model = *m,
                            .start = start,
                            .end = end,
                            .priority = QL_PRIORITY_DEFAULT,
                            .submitter = "ADMIN",
                            .now = ql_clock_now_ms(clk)};
}

static ql_submit_op_t manual_build(const ql_id_t *m, int64_t start, int64_t end) {
    ql_submit_op_t op = manual_op(m, start, end);
    write_txn(ql_submit_fn, &op);
    return op;
}

static unsigned long commits;
static void commit_hook(void *arg) {
    (void)arg;
    commits++;
}

/* ---- submission and the states that follow ---- */

Test(dispatcher, submits_no_overlap_cycle_as_system) {
    make_default();
    ql_store_set_commit_hook(store, commit_hook, NULL);
    commits = 0;
    scan();
    ql_store_set_commit_hook(store, NULL, NULL);

    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SUBMITTED, "%s", ql_cycle_state_name(d.state));
    cr_assert_not(ql_id_is_zero(&d.job));
    cr_assert_eq(d.n_related, 1);
    /* Segment and job were created by one committed transaction. */
    cr_assert_eq(commits, 2); /* then the changed decision in another */

    jobs_t *j = jobs_of(&model);
    cr_assert_eq(j->n, 1);
    ql_job_t *job = &j->jobs[0];
    cr_assert(ql_id_eq(&job->id, &d.job));
    cr_assert_str_eq(job->type, "INC_BUILD");
    cr_assert_eq(job->state, QL_READY);
    cr_assert_str_eq(job->submitter, "System");
    cr_assert_str_eq(job->project, "p");
    cr_assert(job->has_range);
    cr_assert_eq(job->range_start, T0);
    cr_assert_eq(job->range_end, T1);
    cr_assert_eq(job->create_time, NOW0);
    cr_assert_eq(job->n_steps, 1);

    segs_t s = segments_of(&model);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.segs[0].status, QL_SEG_NEW);
    cr_assert_eq(s.segs[0].start, T0);
    cr_assert_eq(s.segs[0].end, T1);
    cr_assert(ql_id_eq(&s.segs[0].job, &job->id));
    cr_assert(ql_id_eq(&job->segment, &s.segs[0].id));
    cr_assert(ql_id_eq(&d.related[0], &s.segs[0].id));

    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.scans, 1);
    cr_assert_eq(st.submitted, 1);
    cr_assert_eq(st.states[QL_CYCLE_SUBMITTED], 1);
}

Test(dispatcher, in_progress_then_covered_and_cached) {
    make_default();
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SUBMITTED);
    ql_id_t job = d.job, seg = d.related[0];

    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_IN_PROGRESS, "%s", ql_cycle_state_name(d.state));
    cr_assert_eq(d.n_related, 1);
    cr_assert(ql_id_eq(&d.related[0], &seg));
    cr_assert(ql_id_is_zero(&d.job));
    cr_assert_eq(jobs_of(&model)->n, 1, "no second job while one is building");

    finish_job(&job, QL_SUCCEED, false);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_COVERED, "%s", ql_cycle_state_name(d.state));
    cr_assert_not(d.from_cache);
    cr_assert(ql_id_eq(&d.related[0], &seg));

    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_COVERED);
    cr_assert(d.from_cache);
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.cache_entries, 1);
    cr_assert_eq(st.submitted, 1);
    cr_assert_eq(jobs_of(&model)->n, 1);
}

Test(dispatcher, cached_covered_survives_segment_deletion_until_cleared) {
    make_default();
    scan();
    ql_id_t job = decision_of(&model).job, seg = decision_of(&model).related[0];
    finish_job(&job, QL_SUCCEED, false);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_COVERED);

    /* Kylin: deleting the segment of a completed cycle does not trigger a rebuild while the
     * cycle's cache entry lives. */
    del_t x = {.model = model, .seg = seg};
    write_txn(delete_fn, &x);
    cr_assert_eq(segments_of(&model).n, 0);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_COVERED);
    cr_assert(d.from_cache);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_COVERED);
    cr_assert_eq(jobs_of(&model)->n, 1);

    /* A restart (or eviction) forgets it: metadata decides, and nothing overlaps any more. */
    ql_dispatcher_clear_cache(disp);
    scan();
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SUBMITTED, "NO_OVERLAP must be submitted, got %s",
                 ql_cycle_state_name(d.state));
    cr_assert_not(d.from_cache);
    cr_assert_eq(st.submitted, 2);
    cr_assert_eq(jobs_of(&model)->n, 2);
    segs_t s = segments_of(&model);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.segs[0].status, QL_SEG_NEW);
}

Test(dispatcher, restart_after_covered_is_covered_from_metadata) {
    make_default();
    scan();
    ql_id_t job = decision_of(&model).job;
    finish_job(&job, QL_SUCCEED, false);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_COVERED);
    /* A restart: a new dispatcher, nothing in memory. */
    ql_dispatcher_free(disp);
    make_default();
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_COVERED);
    cr_assert_not(d.from_cache);
    ql_dispatcher_reset(disp);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_COVERED);
    cr_assert_not(d.from_cache);
    cr_assert_eq(jobs_of(&model)->n, 1, "no duplicate");
}

Test(dispatcher, project_switch_off_skips_and_leaves_config) {
    make_default();
    ql_buf_t before = model_bytes(&model);
    switch_t sw = {.name = "p", .on = false};
    write_txn(switch_fn, &sw);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SKIPPED);
    cr_assert_eq(d.reason, QL_SKIP_PROJECT_DISABLED);
    cr_assert_eq(d.occurrence, 0, "nothing evaluated");
    cr_assert_eq(jobs_of(&model)->n, 0);
    ql_buf_t after = model_bytes(&model);
    cr_assert_eq(before.len, after.len);
    cr_assert_eq(memcmp(before.data, after.data, before.len), 0, "model config changed");
    ql_buf_free(&before);
    ql_buf_free(&after);

    /* Back on: the latest due cycle is processed on the next scan. */
    sw.on = true;
    write_txn(switch_fn, &sw);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_SUBMITTED);
}

static int fail_once(void *arg) {
    int *left = arg;
    return (*left)-- > 0;
}

Test(dispatcher, submit_fault_is_retried_next_scan) {
    int failures = 1;
    ql_dispatcher_opts_t o = default_opts();
    o.submit_fault = fail_once;
    o.hook_arg = &failures;
    make(&o);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_RETRYABLE_FAILURE);
    cr_assert_neq(d.message[0], '\0');
    cr_assert_eq(jobs_of(&model)->n, 0);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SUBMITTED);
    cr_assert_eq(d.message[0], '\0');
    cr_assert_eq(jobs_of(&model)->n, 1);
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.submit_failures, 1);
    cr_assert_eq(st.submitted, 1);
}

/* ---- the in-process guard ---- */

Test(dispatcher, guard_with_manual_writer) {
    ql_dispatcher_opts_t o = default_opts();
    o.manual_flush = false; /* the submission waits until this test flushes */
    make(&o);
    int done = 0;
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done), 0);
    cr_assert(ql_dispatcher_scanning(disp));
    cr_assert_eq(done, 0);
    int done2 = 0;
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done2), QL_ETRANSIENT);
    cr_assert_eq(ql_writer_flush(writer), 2); /* and the decision write */
    cr_assert_eq(done, 1);
    cr_assert_eq(done2, 0, "a refused scan never reports");
    cr_assert_not(ql_dispatcher_scanning(disp));
    EXPECT_STATE(&model, QL_CYCLE_SUBMITTED);
    /* Free again: the next scan runs. */
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done2), 0);
    cr_assert_eq(done2, 1);
    EXPECT_STATE(&model, QL_CYCLE_IN_PROGRESS);
}

/* A server stopping mid-scan frees its dispatcher while the submission is still in the writer:
 * the answer that comes later must not touch freed memory (AddressSanitizer checks), and the
 * submission itself still commits. */
Test(dispatcher, free_with_a_submission_in_the_writer) {
    ql_dispatcher_opts_t o = default_opts();
    o.manual_flush = false;
    make(&o);
    cr_assert_eq(ql_dispatcher_scan(disp, NULL, NULL), 0);
    cr_assert(ql_dispatcher_scanning(disp));
    ql_dispatcher_free(disp);
    disp = NULL;
    cr_assert_eq(ql_writer_flush(writer), 1);
    cr_assert_eq(jobs_of(&model)->n, 1);
}

Test(dispatcher, guard_with_threaded_writer) {
    ql_writer_free(writer);
    writer_threaded();
    ql_dispatcher_opts_t o = default_opts();
    o.writer = writer;
    o.manual_flush = false;
    make(&o);
    int done = 0;
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done), 0);
    /* The answer can only run on this thread (ql_writer_complete), so the scan is pending. */
    cr_assert(ql_dispatcher_scanning(disp));
    cr_assert_eq(ql_dispatcher_scan(disp, NULL, NULL), QL_ETRANSIENT);
    cr_assert_eq(done, 0);
    wait_answers();
    cr_assert_eq(done, 1);
    cr_assert_not(ql_dispatcher_scanning(disp));
    EXPECT_STATE(&model, QL_CYCLE_SUBMITTED);
    cr_assert_eq(jobs_of(&model)->n, 1);
}

/* ---- fixed delay ---- */

static int64_t scan_times[16];
static size_t n_scan_times;

/* The wall time each scan evaluated "m" at (one decision per model per scan). */
static void on_decision(void *arg, const ql_decision_t *d) {
    const ql_id_t *m = arg;
    if (!ql_id_eq(&d->model, m))
        return;
    cr_assert_lt(n_scan_times, 16);
    scan_times[n_scan_times++] = d->evaluated_at;
}

Test(dispatcher, fixed_delay_from_each_scan_end) {
    n_scan_times = 0;
    ql_dispatcher_opts_t o = default_opts();
    o.on_decision = on_decision;
    o.decision_arg = &model;
    make(&o);
    ql_dispatcher_start(disp);
    /* 3.5 intervals: scans at 0, i, 2i and 3i (each ends at once, so end == start). */
    ql_vclock_run_for(clk, 3 * INTERVAL + INTERVAL / 2, false);
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.scans, 4);
    cr_assert_eq(n_scan_times, 4);
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(scan_times[i], NOW0 + (int64_t)i * INTERVAL, "scan %zu at %lld", i,
                     (long long)(scan_times[i] - NOW0));
    ql_dispatcher_stop(disp);
    ql_vclock_run_for(clk, 10 * INTERVAL, true);
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.scans, 4, "no scan after stop");
}

Test(dispatcher, fixed_delay_counts_from_the_end_of_a_slow_scan) {
    n_scan_times = 0;
    ql_dispatcher_opts_t o = default_opts();
    o.on_decision = on_decision;
    o.decision_arg = &model;
    o.manual_flush = false; /* the first scan's submission is answered when the test says */
    make(&o);
    ql_dispatcher_start(disp);
    ql_vclock_run_due(clk);
    cr_assert(ql_dispatcher_scanning(disp));
    /* While the scan runs, no next scan is armed. */
    cr_assert_eq(ql_vclock_next_due(clk), -1);
    /* The scan takes 5 s: its submission is answered then. */
    const int64_t slow = 5000;
    ql_vclock_skip(clk, slow);
    cr_assert_eq(ql_writer_flush(writer), 2); /* and the decision write */
    cr_assert_not(ql_dispatcher_scanning(disp));
    cr_assert_eq(ql_vclock_next_due(clk), slow + INTERVAL);
    /* 3.5 more intervals: scans at end+i, end+2i, end+3i (the later ones end at once). */
    ql_vclock_run_for(clk, 3 * INTERVAL + INTERVAL / 2, false);
    cr_assert_eq(n_scan_times, 4);
    cr_assert_eq(scan_times[0], NOW0);
    for (size_t i = 1; i < 4; i++)
        cr_assert_eq(scan_times[i], NOW0 + slow + (int64_t)i * INTERVAL, "scan %zu at +%lld", i,
                     (long long)(scan_times[i] - NOW0));
    ql_dispatcher_stop(disp);
}

Test(dispatcher, timer_while_scanning_waits_for_the_running_scan) {
    /* A manual scan is running when the timer fires: the timer's scan is refused by the guard
     * and re-armed, never run on top of it; the running scan's end re-arms it from there. */
    ql_dispatcher_opts_t o = default_opts();
    o.manual_flush = false;
    make(&o);
    ql_dispatcher_start(disp); /* due now */
    cr_assert_eq(ql_dispatcher_scan(disp, NULL, NULL), 0);
    cr_assert_eq(ql_vclock_run_due(clk), 1);
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.scans, 0);
    cr_assert(ql_dispatcher_scanning(disp));
    cr_assert_eq(ql_vclock_next_due(clk), INTERVAL);
    ql_vclock_skip(clk, 1000);
    cr_assert_eq(ql_writer_flush(writer), 2); /* and the decision write */
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.scans, 1);
    cr_assert_eq(ql_vclock_next_due(clk), 1000 + INTERVAL);
    cr_assert_eq(jobs_of(&model)->n, 1);
    ql_vclock_run_for(clk, INTERVAL, true);
    ql_dispatcher_get_stats(disp, &st);
    cr_assert_eq(st.scans, 2);
    cr_assert_eq(jobs_of(&model)->n, 1);
    EXPECT_STATE(&model, QL_CYCLE_IN_PROGRESS);
    ql_dispatcher_stop(disp);
}

/* ---- master only ---- */

static bool not_master(void *arg) {
    (void)arg;
    return false;
}

Test(dispatcher, not_master_evaluates_nothing) {
    ql_dispatcher_opts_t o = default_opts();
    o.is_master = not_master;
    make(&o);
    scan();
    ql_decision_t d;
    cr_assert_eq(ql_dispatcher_decision(disp, &model, &d), QL_ENOTFOUND);
    cr_assert_eq(jobs_of(&model)->n, 0);
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    for (int i = 0; i < QL_CYCLE_STATE_COUNT; i++)
        cr_assert_eq(st.states[i], 0);
    cr_assert_eq(count_lines(0, QL_LOG_OFF, "dispatcher", NULL), 0);
}

/* ---- the metadata generation ---- */

static void enable(ql_model_t *m) {
    m->auto_build.enabled = true;
}
static void disable(ql_model_t *m) {
    m->auto_build.enabled = false;
}
static void late_trigger(ql_model_t *m) {
    strcpy(m->auto_build.trigger_time, "23:00:00"); /* not due yet today: yesterday's cycle */
}

Test(dispatcher, model_changes_are_seen_by_the_next_scan) {
    make_default();
    edit_model(&model, disable);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SKIPPED);
    cr_assert_eq(d.reason, QL_SKIP_MODEL_DISABLED);

    /* Enabled after the trigger time: the latest due cycle on the next scan. */
    edit_model(&model, enable);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SUBMITTED, "%s", ql_cycle_state_name(d.state));
    cr_assert_eq(d.occurrence, OCC);

    /* A new trigger time moves the cycle to yesterday's: a different target. */
    edit_model(&model, late_trigger);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.occurrence, OCC - DAY + 22 * H);
    cr_assert_eq(d.target_start, T0 - DAY);
    cr_assert_eq(d.target_end, T1 - DAY);
    cr_assert_eq(d.state, QL_CYCLE_SUBMITTED);

    /* A model added meanwhile is in the next scan too. */
    ql_id_t m2 = add_model("p", "m2", true);
    scan();
    EXPECT_STATE(&m2, QL_CYCLE_SUBMITTED);
}

/* ---- the latest decision ---- */

Test(dispatcher, decision_fields) {
    make_default();
    ql_decision_t d;
    cr_assert_eq(ql_dispatcher_decision(disp, &model, &d), QL_ENOTFOUND);
    scan();
    d = decision_of(&model);
    cr_assert(ql_id_eq(&d.model, &model));
    cr_assert_str_eq(d.project, "p");
    cr_assert_str_eq(d.model_name, "m");
    cr_assert_eq(d.occurrence, OCC);
    cr_assert_eq(d.target_start, T0);
    cr_assert_eq(d.target_end, T1);
    cr_assert_eq(d.evaluated_at, NOW0);
    cr_assert_eq(d.reason, QL_SKIP_NONE);
    cr_assert_eq(d.message[0], '\0');

    /* A scan an hour later: evaluated_at moves, the cycle does not. */
    ql_vclock_skip(clk, H);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_IN_PROGRESS);
    cr_assert_eq(d.evaluated_at, NOW0 + H);
    cr_assert_eq(d.occurrence, OCC);
    cr_assert_eq(d.n_related, 1);

    /* A paused build blocks the cycle, and the message says which segment. */
    ql_id_t seg = d.related[0];
    jobs_t *j = jobs_of(&model);
    ql_id_t job = j->jobs[0].id;
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_state_t was;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_apply_action(t, &job, QL_ACTION_PAUSE, NOW0 + H, &was, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    scan();
    d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_BLOCKED, "%s", ql_cycle_state_name(d.state));
    char sid[QL_ID_STR_LEN + 1];
    ql_id_format(&seg, sid);
    cr_assert_not_null(strstr(d.message, sid), "%s", d.message);
    cr_assert_not_null(strstr(d.message, "PAUSED"), "%s", d.message);
}

static void bad_trigger(ql_model_t *m) {
    strcpy(m->auto_build.trigger_time, "25:00:00");
}

static void bad_end(ql_model_t *m) {
    strcpy(m->auto_build.data_range_end_time, "24:00:01");
}

Test(dispatcher, decision_of_a_skipped_model) {
    make_default();
    edit_model(&model, bad_trigger);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SKIPPED);
    cr_assert_eq(d.reason, QL_SKIP_INVALID_CONFIG);
    cr_assert_not_null(strstr(d.message, "trigger_time"), "%s", d.message);
    cr_assert_eq(d.occurrence, 0);
    cr_assert_eq(d.evaluated_at, NOW0);
    cr_assert_eq(jobs_of(&model)->n, 0);
}

/* ---- the boundary table on a real store ---- */

Test(dispatcher, manual_exact_build_ready_is_covered) {
    make_default();
    ql_submit_op_t op = manual_build(&model, T0, T1);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_IN_PROGRESS);
    cr_assert(ql_id_eq(&d.related[0], &op.segment));
    finish_job(&op.job, QL_SUCCEED, false);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_COVERED);
    cr_assert_eq(jobs_of(&model)->n, 1, "no submit");
}

Test(dispatcher, larger_build_in_progress_then_covered) {
    make_default();
    ql_submit_op_t op = manual_build(&model, T0 - 3 * DAY, T1 + DAY);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_IN_PROGRESS);
    finish_job(&op.job, QL_SUCCEED, false);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_COVERED);
    cr_assert_eq(jobs_of(&model)->n, 1);
}

Test(dispatcher, smaller_build_in_progress_then_partial_overlap) {
    make_default();
    ql_submit_op_t op = manual_build(&model, T0, T0 + DAY / 2);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_IN_PROGRESS);
    finish_job(&op.job, QL_SUCCEED, false);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_PARTIAL_OVERLAP);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_PARTIAL_OVERLAP);
    cr_assert_eq(jobs_of(&model)->n, 1, "never fills holes");
}

Test(dispatcher, adjacent_ready_segments_cover) {
    make_default();
    ql_submit_op_t a = manual_build(&model, T0 - DAY, T0 + DAY / 2);
    ql_submit_op_t b = manual_build(&model, T0 + DAY / 2, T1 + DAY);
    finish_job(&a.job, QL_SUCCEED, false);
    finish_job(&b.job, QL_SUCCEED, false);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_COVERED, "%s", ql_cycle_state_name(d.state));
    cr_assert_eq(d.n_related, 2);
    cr_assert(ql_id_eq(&d.related[0], &a.segment), "the segment the covering starts with first");
    /* From the cycle cache: that segment alone. */
    scan();
    d = decision_of(&model);
    cr_assert(d.from_cache);
    cr_assert_eq(d.n_related, 1);
    cr_assert(ql_id_eq(&d.related[0], &a.segment));
}

Test(dispatcher, disjoint_build_does_not_block) {
    make_default();
    manual_build(&model, T0 - 2 * DAY, T0 - DAY);
    scan();
    EXPECT_STATE(&model, QL_CYCLE_SUBMITTED);
    cr_assert_eq(jobs_of(&model)->n, 2);
}

Test(dispatcher, error_job_blocks) {
    make_default();
    ql_submit_op_t op = manual_build(&model, T0, T1);
    finish_job(&op.job, QL_ERROR, false);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_BLOCKED);
    cr_assert_not_null(strstr(d.message, "ERROR"), "%s", d.message);
    cr_assert_eq(jobs_of(&model)->n, 1);
}

static int orphan_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    (void)err;
    ql_segment_t *s = arg;
    return ql_segment_put(t, s);
}

Test(dispatcher, orphan_new_segment_blocks) {
    make_default();
    ql_segment_t s = {.model = model, .start = T0 + H, .end = T0 + 2 * H, .status = QL_SEG_NEW};
    ql_store_new_id(store, &s.id);
    write_txn(orphan_fn, &s);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_BLOCKED);
    cr_assert_not_null(strstr(d.message, "orphan"), "%s", d.message);
    cr_assert_eq(jobs_of(&model)->n, 0);
}

/* ---- logging ---- */

Test(dispatcher, logs_one_line_per_state_change) {
    make_default();
    size_t mark = n_lines;
    scan();
    cr_assert_eq(count_lines(mark, QL_LOG_INFO, "cycle SUBMITTED", "model=m "), 1);
    ql_decision_t d = decision_of(&model);
    char sid[QL_ID_STR_LEN + 1];
    ql_id_format(&d.related[0], sid);
    /* The line names the project, the model, the target range and the related segments. */
    cr_assert_eq(count_lines(mark, QL_LOG_INFO, "project=p ", sid), 1);
    cr_assert_eq(count_lines(mark, QL_LOG_OFF,
                             "target=[2026-08-30T16:00:00.000Z,"
                             "2026-08-31T16:00:00.000Z)",
                             NULL),
                 1);
    cr_assert_eq(n_lines - mark, 1, "one line per change");

    mark = n_lines;
    scan();
    cr_assert_eq(count_lines(mark, QL_LOG_INFO, "cycle IN_PROGRESS", sid), 1);
    cr_assert_eq(n_lines - mark, 1);
    mark = n_lines;
    scan();
    scan();
    cr_assert_eq(n_lines, mark, "unchanged states log nothing");

    finish_job(&d.job, QL_SUCCEED, false);
    mark = n_lines;
    scan();
    cr_assert_eq(count_lines(mark, QL_LOG_INFO, "cycle COVERED", sid), 1);
    cr_assert_eq(n_lines - mark, 1);
    mark = n_lines;
    scan(); /* from the cache now */
    cr_assert(decision_of(&model).from_cache);
    cr_assert_eq(n_lines, mark);
}

static int fail_always(void *arg) {
    (void)arg;
    return 1;
}

Test(dispatcher, repeated_submission_failure_logs_warn_once_then_debug) {
    ql_dispatcher_opts_t o = default_opts();
    o.submit_fault = fail_always;
    make(&o);
    size_t mark = n_lines;
    scan();
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "cycle RETRYABLE_FAILURE", "reason="), 1);
    cr_assert_eq(n_lines - mark, 1);
    for (int i = 0; i < 3; i++) {
        mark = n_lines;
        scan();
        if (count_lines(mark, QL_LOG_DEBUG, "cycle RETRYABLE_FAILURE", NULL) != 1)
            dump_lines(mark);
        cr_assert_eq(count_lines(mark, QL_LOG_DEBUG, "cycle RETRYABLE_FAILURE", NULL), 1);
        cr_assert_eq(count_lines(mark, QL_LOG_WARN, NULL, NULL), 0);
        cr_assert_eq(n_lines - mark, 1);
    }
    /* At the default INFO level the repeats are silent. */
    logger.level = QL_LOG_INFO;
    mark = n_lines;
    scan();
    cr_assert_eq(n_lines, mark);
}

Test(dispatcher, failure_after_a_success_logs_in_full_again) {
    int failures = 1;
    ql_dispatcher_opts_t o = default_opts();
    o.submit_fault = fail_once;
    o.hook_arg = &failures;
    make(&o);
    scan();
    scan(); /* submitted */
    EXPECT_STATE(&model, QL_CYCLE_SUBMITTED);
    /* The build is discarded (segment removed); the next submission fails again. */
    ql_id_t job = decision_of(&model).job;
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_state_t was;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_apply_action(t, &job, QL_ACTION_DISCARD, NOW0, &was, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    failures = 1;
    size_t mark = n_lines;
    scan();
    EXPECT_STATE(&model, QL_CYCLE_RETRYABLE_FAILURE);
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "cycle RETRYABLE_FAILURE", NULL), 1);
}

Test(dispatcher, invalid_config_warns_once_per_model_per_reason_per_day) {
    make_default();
    ql_id_t m2 = add_model("p", "m2", true);
    edit_model(&model, bad_trigger);
    edit_model(&m2, bad_trigger);
    size_t mark = n_lines;
    scan();
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "reason=invalid_config", "model=m "), 1);
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "reason=invalid_config", "model=m2 "), 1);
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "trigger_time", NULL), 2);
    /* Later the same day: nothing new. */
    ql_vclock_skip(clk, 3 * H);
    mark = n_lines;
    scan();
    scan();
    cr_assert_eq(n_lines, mark);
    /* Another field breaks: still invalid_config, the same reason the same day. */
    edit_model(&m2, bad_end);
    mark = n_lines;
    scan();
    cr_assert_eq(n_lines, mark, "same reason, same day");
    /* The next day: once more each. */
    ql_vclock_skip(clk, DAY);
    mark = n_lines;
    scan();
    scan();
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "reason=invalid_config", "model=m "), 1);
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "reason=invalid_config", "model=m2 "), 1);
    cr_assert_eq(n_lines - mark, 2);
}

static void half_day(ql_model_t *m) {
    /* [00:00, 12:00) of a day truncates with yyyy-MM-dd to [day, day): empty. */
    strcpy(m->auto_build.data_range_end_time, "12:00:00");
}

Test(dispatcher, empty_range_warns_once_per_day) {
    make_default();
    edit_model(&model, half_day);
    size_t mark = n_lines;
    scan();
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_SKIPPED);
    cr_assert_eq(d.reason, QL_SKIP_EMPTY_RANGE);
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "reason=empty_range",
                             "range is empty after partition format normalization"),
                 1);
    cr_assert_eq(n_lines - mark, 1);
    cr_assert_eq(jobs_of(&model)->n, 0);
}

Test(dispatcher, covered_with_warning_logs_a_warning) {
    make_default();
    scan();
    ql_decision_t d = decision_of(&model);
    finish_job(&d.job, QL_SUCCEED, true);
    segs_t s = segments_of(&model);
    cr_assert_eq(s.segs[0].status, QL_SEG_WARNING);
    size_t mark = n_lines;
    scan();
    EXPECT_STATE(&model, QL_CYCLE_COVERED_WITH_WARNING);
    cr_assert_eq(count_lines(mark, QL_LOG_WARN, "cycle COVERED_WITH_WARNING", "model=m "), 1);
    mark = n_lines;
    scan();
    cr_assert(decision_of(&model).from_cache);
    EXPECT_STATE(&model, QL_CYCLE_COVERED_WITH_WARNING);
    cr_assert_eq(n_lines, mark);
}

/* ---- a race with a manual build ---- */

typedef struct {
    ql_submit_op_t op;
    int status;
    char msg[512];
    bool answered;
} manual_t;

static void manual_done(void *arg, int status, const ql_err_t *err) {
    manual_t *m = arg;
    m->status = status;
    snprintf(m->msg, sizeof m->msg, "%s", err ? err->msg : "");
    m->answered = true;
}

static void expect_one_job_one_segment(void) {
    jobs_t *j = jobs_of(&model);
    cr_assert_eq(j->n, 1, "exactly one job for the range, got %zu", j->n);
    segs_t s = segments_of(&model);
    cr_assert_eq(s.n, 1);
}

Test(dispatcher, race_manual_build_first) {
    ql_dispatcher_opts_t o = default_opts();
    o.manual_flush = false;
    make(&o);
    /* The manual build is queued right before the dispatcher's submission: the scan still
     * sees no segment and submits; the writer applies both in order, in one batch. */
    manual_t man = {.op = manual_op(&model, T0, T1)};
    cr_assert_eq(ql_writer_submit(writer, ql_submit_fn, &man.op, manual_done), 0);
    int done = 0;
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done), 0);
    cr_assert_eq(ql_writer_flush(writer), 3); /* and the decision write */
    cr_assert_eq(done, 1);
    cr_assert(man.answered);
    cr_assert_eq(man.status, 0, "%s", man.msg);
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(d.state, QL_CYCLE_RETRYABLE_FAILURE);
    cr_assert_not_null(strstr(d.message, "overlaps with the built segments"), "%s", d.message);
    expect_one_job_one_segment();
    cr_assert_str_eq(jobs_of(&model)->jobs[0].submitter, "ADMIN");
    /* The next scan sees the manual build. */
    cr_assert_eq(ql_dispatcher_scan(disp, NULL, NULL), 0);
    EXPECT_STATE(&model, QL_CYCLE_IN_PROGRESS);
    expect_one_job_one_segment();
}

Test(dispatcher, race_dispatcher_first) {
    ql_dispatcher_opts_t o = default_opts();
    o.manual_flush = false;
    make(&o);
    int done = 0;
    cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done), 0);
    manual_t man = {.op = manual_op(&model, T0, T1)};
    cr_assert_eq(ql_writer_submit(writer, ql_submit_fn, &man.op, manual_done), 0);
    cr_assert_eq(ql_writer_flush(writer), 3); /* and the decision write */
    cr_assert_eq(done, 1);
    EXPECT_STATE(&model, QL_CYCLE_SUBMITTED);
    cr_assert(man.answered);
    cr_assert_eq(man.status, QL_ESEGOVERLAP, "%s", ql_strerror(man.status));
    cr_assert_str_eq(ql_error_code(man.status), "KE-010022202");
    expect_one_job_one_segment();
    cr_assert_str_eq(jobs_of(&model)->jobs[0].submitter, "System");
}

Test(dispatcher, race_on_the_threaded_writer) {
    /* The same race with real threads, many times over fresh models: whichever commits first
     * wins, the other fails with KE-010022202, never two jobs for one range. */
    ql_writer_free(writer);
    writer_threaded();
    ql_dispatcher_opts_t o = default_opts();
    o.writer = writer;
    o.manual_flush = false;
    make(&o);
    for (int round = 0; round < 20; round++) {
        char name[32];
        snprintf(name, sizeof name, "race%d", round);
        ql_id_t m = add_model("p", name, true);
        manual_t man = {.op = manual_op(&m, T0, T1)};
        int done = 0;
        if (round % 2)
            cr_assert_eq(ql_writer_submit(writer, ql_submit_fn, &man.op, manual_done), 0);
        cr_assert_eq(ql_dispatcher_scan(disp, count_cb, &done), 0);
        if (round % 2 == 0)
            cr_assert_eq(ql_writer_submit(writer, ql_submit_fn, &man.op, manual_done), 0);
        while (!done || !man.answered)
            wait_answers();
        /* The manual build wins either by committing between the scan's read and its
         * submission (RETRYABLE_FAILURE: the submission met the overlap) or before the scan
         * read at all (IN_PROGRESS: the scan saw the manual build's job and did not submit). */
        ql_decision_t d = decision_of(&m);
        bool disp_won = d.state == QL_CYCLE_SUBMITTED;
        cr_assert(disp_won || d.state == QL_CYCLE_RETRYABLE_FAILURE ||
                      d.state == QL_CYCLE_IN_PROGRESS,
                  "%s", ql_cycle_state_name(d.state));
        if (disp_won)
            cr_assert_eq(man.status, QL_ESEGOVERLAP, "round %d: %s", round, man.msg);
        else
            cr_assert_eq(man.status, 0, "round %d: %s", round, man.msg);
        jobs_t *j = jobs_of(&m);
        cr_assert_eq(j->n, 1, "round %d: %zu jobs", round, j->n);
        cr_assert_str_eq(j->jobs[0].submitter, disp_won ? "System" : "ADMIN");
        finish_job(&j->jobs[0].id, QL_SUCCEED, false);
    }
}

/* ---- the decisions kept in the store ---- */

/* What a standby, a query server or a restarted server reads: the stored decision. */
static int load_stored(const ql_id_t *m, ql_decision_t *out) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    int rc = ql_dispatch_decision_load(t, m, out);
    ql_txn_abort(t);
    return rc;
}

static uint64_t decisions_written(void) {
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(disp, &st);
    return st.decisions_written;
}

/* A dropped model's decision goes with it (DELETE /models and /projects forget it in the same
 * transaction); forgetting one that was never written is fine. */
Test(dispatcher, a_stored_decision_is_forgotten) {
    make_default();
    scan();
    ql_decision_t s = {0};
    cr_assert_eq(load_stored(&model, &s), 0);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_dispatch_decision_forget(t, &model), 0);
    cr_assert_eq(ql_dispatch_decision_forget(t, &model), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(load_stored(&model, &s), QL_ENOTFOUND);
}

Test(dispatcher, decisions_are_kept_in_the_store_when_they_change) {
    make_default();
    ql_decision_t s = {0};
    cr_assert_eq(load_stored(&model, &s), QL_ENOTFOUND);
    scan();
    ql_decision_t d = decision_of(&model);
    cr_assert_eq(load_stored(&model, &s), 0);
    cr_assert_eq(s.state, QL_CYCLE_SUBMITTED, "%s", ql_cycle_state_name(s.state));
    cr_assert(ql_id_eq(&s.model, &model));
    cr_assert(ql_id_eq(&s.job, &d.job));
    cr_assert_eq(s.n_related, 1);
    cr_assert(ql_id_eq(&s.related[0], &d.related[0]));
    cr_assert_eq(s.occurrence, OCC);
    cr_assert_eq(s.target_start, T0);
    cr_assert_eq(s.target_end, T1);
    cr_assert_eq(s.evaluated_at, NOW0);
    cr_assert_eq(decisions_written(), 1);
    ql_id_t job = d.job, seg = d.related[0];

    /* IN_PROGRESS is a change, and it says why. */
    ql_vclock_skip(clk, 1000);
    scan();
    cr_assert_eq(load_stored(&model, &s), 0);
    cr_assert_eq(s.state, QL_CYCLE_IN_PROGRESS, "%s", ql_cycle_state_name(s.state));
    cr_assert(strstr(s.message, "is being built"), "%s", s.message);
    cr_assert(ql_id_eq(&s.related[0], &seg));
    cr_assert(ql_id_is_zero(&s.job));
    cr_assert_eq(decisions_written(), 2);

    /* The same decision again: not a single commit. */
    ql_store_set_commit_hook(store, commit_hook, NULL);
    commits = 0;
    ql_vclock_skip(clk, 1000);
    scan();
    scan();
    ql_store_set_commit_hook(store, NULL, NULL);
    cr_assert_eq(commits, 0);
    cr_assert_eq(decisions_written(), 2);
    cr_assert_eq(load_stored(&model, &s), 0);
    cr_assert_eq(s.evaluated_at, NOW0 + 1000, "the time the decision was reached");

    /* COVERED names its segment, from the store and then from the cycle cache. */
    finish_job(&job, QL_SUCCEED, false);
    scan();
    cr_assert_eq(load_stored(&model, &s), 0);
    cr_assert_eq(s.state, QL_CYCLE_COVERED, "%s", ql_cycle_state_name(s.state));
    cr_assert(ql_id_eq(&s.related[0], &seg));
    cr_assert_eq(decisions_written(), 3);
    scan();
    d = decision_of(&model);
    cr_assert(d.from_cache);
    cr_assert_eq(d.n_related, 1);
    cr_assert(ql_id_eq(&d.related[0], &seg), "a cached COVERED still names its segment");
    cr_assert_eq(decisions_written(), 3, "served from the cache: nothing changed");
}

Test(dispatcher, partial_overlap_says_which_segment) {
    make_default();
    ql_submit_op_t op = manual_build(&model, T0, T0 + DAY / 2);
    finish_job(&op.job, QL_SUCCEED, false);
    scan();
    ql_decision_t d = decision_of(&model), s = {0};
    cr_assert_eq(d.state, QL_CYCLE_PARTIAL_OVERLAP, "%s", ql_cycle_state_name(d.state));
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&op.segment, id);
    cr_assert(strstr(d.message, id) && strstr(d.message, "without covering"), "%s", d.message);
    cr_assert_eq(load_stored(&model, &s), 0);
    cr_assert_str_eq(s.message, d.message);
}

static int raise_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    (void)err;
    return ql_fence_raise(t, arg);
}

/* A master that lost the lock (another holding raised the epoch since) writes no decision. */
Test(dispatcher, a_fenced_master_keeps_no_decision) {
    uint64_t first, second;
    write_txn(raise_fn, &first);
    write_txn(raise_fn, &second);
    ql_dispatcher_opts_t o = default_opts();
    o.fence = first;
    make(&o);
    size_t from = n_lines;
    scan();
    EXPECT_STATE(&model, QL_CYCLE_RETRYABLE_FAILURE);
    ql_decision_t s = {0};
    cr_assert_eq(load_stored(&model, &s), QL_ENOTFOUND);
    cr_assert_eq(decisions_written(), 0);
    cr_assert_eq(count_lines(from, QL_LOG_WARN, "cannot keep decisions", NULL), 1);
    /* With the current token it is written. */
    ql_dispatcher_free(disp);
    o.fence = second;
    make(&o);
    scan();
    cr_assert_eq(load_stored(&model, &s), 0);
    cr_assert_eq(s.state, QL_CYCLE_SUBMITTED, "%s", ql_cycle_state_name(s.state));
}
