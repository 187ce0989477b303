/*
 * The scheduler (docs/design/jobs.md, The scheduler) in a real node: a libuv loop, the threaded
 * writer woken by uv_async, the real clock, templates from a YAML file and real shell steps through
 * qilin-exec. One test at the end uses the virtual clock, where the exact timing is the point.
 *
 * Waits are conditions with deadlines: the loop is driven (UV_RUN_ONCE, with a 5 ms tick so
 * that conditions which are not loop events, such as a process group being gone, are
 * re-checked) until the condition holds or the deadline passes. Each test has its own data
 * directory, configuration and templates file.
 *
 * Process groups: a stopped step's group is checked with kill(-pgid, 0) == ESRCH. A step's
 * children that outlived their shell are reparented to whatever reaps orphans on this machine;
 * until it reaps them they are zombies, which kill() still finds, so a group whose only members
 * are zombies also counts as gone (nothing of it can run any more).
 */
#include "scheduler/ql_submit.h"
#include "server/ql_node.h"

#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

typedef struct start_rec {
    ql_id_t job;
    uint32_t seq;
    int64_t mono_ms;
} start_rec_t;

typedef struct world {
    char dir[64];
    char data[128];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_log_t log;
    ql_config_t *cfg;
    ql_node_t *node;
    bool stopped;
    ql_id_t model; /* "m" of project "p" */
    int64_t next_create;
    /* step-start hook */
    start_rec_t starts[512];
    int n_starts;
    int not_durable; /* starts whose RUNNING state was not in the store yet */
    char not_durable_msg[256];
    /* concurrency observation */
    int max_running, max_running_p1;
    /* restart: the old try's process group, which must be gone when the new try starts */
    int old_pgid;
    int started_while_old_alive;
    /* takeover: the hook raises the fencing epoch as the first step starts (another server
     * took the lock between the pick's commit and the spawn), and keeps that try's marker */
    bool raise_at_start, raised;
    char raised_token[QL_STEP_TOKEN_LEN + 1];
} world_t;

static world_t w;

/* ---- loop and process helpers ---- */

static bool file_exists(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", w.dir, name);
    return access(path, F_OK) == 0;
}

static bool cond_file(const void *arg) {
    return file_exists(arg);
}

/* A marker step's first try has got past its `touch marker`: it is in its long sleep. */
static void wait_marker(void) {
    cr_assert(ql_test_drive_until(&w.loop, cond_file, "marker", DEADLINE_MS),
              "the step never touched its marker");
}

/* ---- store helpers ---- */

static ql_store_t *store(void) {
    return ql_node_store(w.node);
}

static ql_job_t get_job(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

static ql_step_t get_step(const ql_id_t *id, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, id, seq, &s), 0);
    ql_txn_abort(t);
    return s;
}

static ql_state_t job_state(const ql_id_t *id) {
    ql_job_t j = get_job(id);
    ql_state_t s = j.state;
    ql_job_free(&j);
    return s;
}

static ql_state_t step_state(const ql_id_t *id, uint32_t seq) {
    ql_step_t s = get_step(id, seq);
    ql_state_t st = s.state;
    ql_step_free(&s);
    return st;
}

/* The stored output of a step (malloc'd, "" when none). */
static char *output(const ql_id_t *id, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    char *out = NULL;
    size_t len;
    int rc = ql_output_get(t, id, seq, &out, &len);
    ql_txn_abort(t);
    if (rc == QL_ENOTFOUND)
        return strdup("");
    cr_assert_eq(rc, 0);
    return out;
}

/* The status of a segment, or -1 when it does not exist. */
static int seg_status(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    ql_segment_t s;
    int rc = ql_segment_get(t, id, &s), status = -1;
    if (rc == 0) {
        status = (int)s.status;
        ql_segment_free(&s);
    }
    ql_txn_abort(t);
    return status;
}

typedef struct {
    ql_id_t job;
    ql_state_t state;
} job_is_t;

static bool cond_job_is(const void *arg) {
    const job_is_t *c = arg;
    return job_state(&c->job) == c->state;
}

static void wait_job(const ql_id_t *job, ql_state_t st) {
    job_is_t c = {*job, st};
    bool ok = ql_test_drive_until(&w.loop, cond_job_is, &c, DEADLINE_MS);
    cr_assert(ok, "the job did not become %s (it is %s)", ql_state_name(st),
              ql_state_name(job_state(job)));
}

/* The process group of step seq once it runs and its pgid is recorded (asserted). */
static int wait_pgid(const ql_id_t *job, uint32_t seq) {
    int pgid = ql_test_node_wait_pgid(&w.loop, w.node, job, seq, DEADLINE_MS);
    cr_assert_gt(pgid, 0, "step %u never ran with a process group", seq);
    return pgid;
}

static void create_project(const char *name, const char *limit, const char *tz) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), true, &t), 0);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    if (limit)
        cr_assert_eq(ql_strmap_set(&p.config, "kylin.job.max-concurrent-jobs", limit), 0);
    if (tz)
        cr_assert_eq(ql_strmap_set(&p.config, "kylin.web.timezone", tz), 0);
    ql_err_t err = {0};
    cr_assert_eq(ql_meta_create_project(t, &p, BASE, &err), 0, "%s", err.msg);
    ql_project_free(&p);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    cr_assert_eq(ql_project_get(t, name, 0, &p), 0);
    if (tz)
        cr_assert_str_eq(ql_strmap_get(&p.config, "kylin.web.timezone"), tz);
    ql_project_free(&p);
    ql_txn_abort(t);
}

/* A partitioned model. The name is written as given, without the API's name rules, so that a
 * test can give it characters a shell would act on. */
static ql_id_t create_model(const char *project, const char *name, const char *set,
                            const char *format) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), true, &t), 0);
    ql_model_t m = {0};
    ql_store_new_id(store(), &m.id);
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m.project, sizeof m.project, "%s", project);
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "dt");
    snprintf(m.partition_format, sizeof m.partition_format, "%s", format ? format : "yyyy-MM-dd");
    snprintf(m.job_template, sizeof m.job_template, "%s", set ? set : "");
    m.create_time = m.modify_time = BASE;
    cr_assert_eq(ql_model_put(t, &m), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return m.id;
}

/* ---- the node ---- */

static void step_start_hook(void *arg, const ql_id_t *job, uint32_t seq);

/* Starts a node on a fresh directory with templates (in which @DIR@ stands for the test's
 * directory) and settings ("key=value", NULL-terminated). */
static void start_node(const char *templates, const char *const *settings) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_sched");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    cr_assert_eq(access(HELPER, X_OK), 0, "the exec helper %s is not built", HELPER);

    char path[256];
    snprintf(path, sizeof path, "%s/jobs.yaml", w.dir);
    ql_test_write_with_dir(path, templates, w.dir);

    static const char *const fixed[] = {"qilin.step.kill-grace-ms=300", NULL};
    w.cfg = ql_test_node_config(w.data, path, fixed);
    ql_err_t err = {0};
    for (size_t i = 0; settings && settings[i]; i++)
        cr_assert_eq(ql_config_set_arg(w.cfg, settings[i], &err), 0, "%s: %s", settings[i],
                     err.msg);

    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    uv_timer_start(&w.tick, ql_test_tick_cb, 5, 5);
    ql_log_init(&w.log, getenv("QL_TEST_DEBUG") ? QL_LOG_DEBUG : QL_LOG_ERROR);
    ql_node_opts_t no = {.config = w.cfg, .loop = &w.loop, .log = &w.log, .exec_helper = HELPER};
    cr_assert_eq(ql_node_start(&no, &w.node, &err), 0, "%s", err.msg);
    cr_assert(ql_node_is_master(w.node));
    ql_sched_set_step_start_hook(ql_node_sched(w.node), step_start_hook, &w);
    create_project("p", NULL, NULL);
    w.model = create_model("p", "m", NULL, NULL);
    w.next_create = BASE;
}

static void node_stopped(void *arg) {
    ((world_t *)arg)->stopped = true;
}

static bool cond_stopped(const void *arg) {
    (void)arg;
    return w.stopped;
}

static void teardown(void) {
    if (w.node) {
        ql_node_stop(w.node, node_stopped, &w);
        cr_assert(ql_test_drive_until(&w.loop, cond_stopped, NULL, DEADLINE_MS),
                  "the node did not stop");
        w.node = NULL;
    }
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_config_free(w.cfg);
    ql_test_rm_tree(w.dir);
}

/* ---- submissions through the one submission path ---- */

typedef struct sub {
    ql_submit_op_t op; /* first: the writer hands this pointer back */
    bool done;
    int status;
    ql_err_t err;
    int64_t ack_ms;
} sub_t;

static void sub_done(void *arg, int status, const ql_err_t *err) {
    sub_t *s = arg;
    s->done = true;
    s->status = status;
    s->err = *err;
    s->ack_ms = ql_test_mono_ms();
    /* What every submitter does once its job is durable: wake the fetcher. */
    ql_node_kick(w.node);
}

static bool cond_sub(const void *arg) {
    return ((const sub_t *)arg)->done;
}

/* Submits an INC_BUILD of [start, end) of model, waits for its acknowledgement and returns the
 * job id (and the acknowledgement time, when ack_ms is not NULL). */
static ql_id_t submit_range(const ql_id_t *model, int64_t start, int64_t end, int priority,
                            int64_t *ack_ms) {
    sub_t *s = calloc(1, sizeof *s);
    s->op = (ql_submit_op_t){
        .kind = QL_SUBMIT_BUILD,
        .templates = ql_node_templates(w.node),
        .model = *model,
        .start = start,
        .end = end,
        .priority = priority,
        .submitter = "ADMIN",
        .now = ++w.next_create,
    };
    cr_assert_eq(ql_writer_submit(ql_node_writer(w.node), ql_submit_fn, &s->op, sub_done), 0);
    cr_assert(ql_test_drive_until(&w.loop, cond_sub, s, DEADLINE_MS), "no acknowledgement");
    cr_assert_eq(s->status, 0, "submit: %s", s->err.msg);
    ql_id_t job = s->op.job;
    if (ack_ms)
        *ack_ms = s->ack_ms;
    free(s);
    return job;
}

static ql_id_t submit_day(const ql_id_t *model, int day, int priority) {
    return submit_range(model, BASE + day * DAY, BASE + (day + 1) * DAY, priority, NULL);
}

static ql_id_t submit(int day) {
    return submit_day(&w.model, day, 3);
}

/* ---- the step-start hook ---- */

static void step_start_hook(void *arg, const ql_id_t *job, uint32_t seq) {
    world_t *x = arg;
    if (x->n_starts < (int)(sizeof x->starts / sizeof x->starts[0]))
        x->starts[x->n_starts++] = (start_rec_t){*job, seq, ql_test_mono_ms()};
    /* The step's RUNNING state must be durable before its process starts: a fresh read
     * transaction sees it. */
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(x->node), false, &t), 0);
    ql_job_t j;
    ql_step_t s;
    cr_assert_eq(ql_job_get(t, job, 0, &j), 0);
    cr_assert_eq(ql_step_get(t, job, seq, &s), 0);
    if (j.state != QL_RUNNING || s.state != QL_RUNNING || s.attempts == 0 || s.start_time == 0) {
        x->not_durable++;
        snprintf(x->not_durable_msg, sizeof x->not_durable_msg,
                 "step %u started while the store says job %s, step %s (attempts %u)", seq,
                 ql_state_name(j.state), ql_state_name(s.state), s.attempts);
    }
    /* Concurrency, globally and in project p1, as the store says at this instant. (The
     * scheduler's own count of runs may briefly exceed the limit: a job whose last step ended
     * gives its slot to a pick written in the same commit as its end.) */
    uint64_t all, p1;
    cr_assert_eq(ql_job_count(t, NULL, 1u << QL_RUNNING, &all), 0);
    cr_assert_eq(ql_job_count(t, "p1", 1u << QL_RUNNING, &p1), 0);
    if ((int)all > x->max_running)
        x->max_running = (int)all;
    if ((int)p1 > x->max_running_p1)
        x->max_running_p1 = (int)p1;
    if (x->old_pgid && !ql_test_group_gone(x->old_pgid))
        x->started_while_old_alive++;
    if (x->raise_at_start && !x->raised)
        memcpy(x->raised_token, s.token, sizeof x->raised_token);
    ql_job_free(&j);
    ql_step_free(&s);
    ql_txn_abort(t);
    if (x->raise_at_start && !x->raised) {
        x->raised = true;
        uint64_t e;
        cr_assert_eq(ql_txn_begin(ql_node_store(x->node), true, &t), 0);
        cr_assert_eq(ql_fence_raise(t, &e), 0);
        cr_assert_eq(ql_txn_commit(t), 0);
    }
}

static int starts_of(const ql_id_t *job, uint32_t seq) {
    int n = 0;
    for (int i = 0; i < w.n_starts; i++)
        if (ql_id_eq(&w.starts[i].job, job) && w.starts[i].seq == seq)
            n++;
    return n;
}

static void assert_durable_starts(void) {
    cr_assert_eq(w.not_durable, 0, "%s", w.not_durable_msg);
}

/* ---- chains ---- */

Test(chain, steps_run_in_order_and_each_is_persisted, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: one, kind: shell, argv: [/bin/sh, -c, 'echo one']}\n"
               "      - {name: two, kind: shell, argv: [/bin/sh, -c, 'echo two; echo err >&2']}\n"
               "      - {name: three, kind: noop}\n",
               NULL);
    ql_id_t job = submit(0);
    wait_job(&job, QL_SUCCEED);
    cr_assert_eq(w.n_starts, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(w.starts[i].seq, (uint32_t)i, "steps start in order");
    ql_job_t j = get_job(&job);
    int64_t prev_end = j.start_time;
    for (uint32_t i = 0; i < 3; i++) {
        ql_step_t s = get_step(&job, i);
        cr_assert_eq(s.state, QL_SUCCEED, "step %u", i);
        cr_assert_eq(s.attempts, 1);
        cr_assert_gt(s.start_time, 0, "the start is persisted");
        cr_assert_geq(s.start_time, prev_end, "step %u starts after the previous ended", i);
        cr_assert_geq(s.end_time, s.start_time, "the end is persisted");
        prev_end = s.end_time;
        ql_step_free(&s);
    }
    cr_assert_geq(j.end_time, prev_end);
    char *o0 = output(&job, 0), *o1 = output(&job, 1);
    cr_assert_str_eq(o0, "one\n");
    cr_assert_str_eq(o1, "two\nerr\n", "stdout and stderr are kept, in order");
    free(o0);
    free(o1);
    cr_assert_eq(seg_status(&j.segment), QL_SEG_READY);
    ql_job_free(&j);
    assert_durable_starts();
}

/* docs/design/jobs.md: READY -> SKIP when a template condition skips it; a job is SUCCEED when
 * every step is SUCCEED, WARNING or SKIP. Only model "orders" runs the middle step. */
Test(chain, a_step_whose_when_does_not_hold_is_skipped_and_the_job_succeeds, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: first, kind: noop}\n"
               "      - name: orders only\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'echo ran for $QILIN_MODEL']\n"
               "        when: {QILIN_MODEL: orders, QILIN_JOB_TYPE: [INC_BUILD, INDEX_REFRESH]}\n"
               "      - {name: last, kind: noop}\n",
               NULL);
    ql_id_t orders = create_model("p", "orders", NULL, NULL);
    ql_id_t skipped = submit_day(&w.model, 0, 3), ran = submit_day(&orders, 0, 3);
    wait_job(&skipped, QL_SUCCEED);
    wait_job(&ran, QL_SUCCEED);

    ql_step_t st = get_step(&skipped, 1);
    cr_assert_eq(st.state, QL_SKIP, "model m does not meet QILIN_MODEL: orders");
    ql_step_free(&st);
    st = get_step(&skipped, 2);
    cr_assert_eq(st.state, QL_SUCCEED, "the chain goes on after a skipped step");
    ql_step_free(&st);
    ql_job_t j = get_job(&skipped);
    cr_assert_eq(seg_status(&j.segment), QL_SEG_READY, "a skipped step is no warning");
    ql_job_free(&j);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    char *out = NULL;
    size_t len = 0;
    cr_assert_eq(ql_output_get(t, &skipped, 1, &out, &len), 0);
    ql_txn_abort(t);
    bool says = strcmp(out, "skipped: when: QILIN_MODEL is 'm', not 'orders'") == 0;
    free(out);
    cr_assert(says, "the step's output says why it was skipped");

    st = get_step(&ran, 1);
    cr_assert_eq(st.state, QL_SUCCEED, "model orders meets both conditions");
    ql_step_free(&st);
}

Test(chain, a_failing_step_stops_the_chain, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: one, kind: noop}\n"
               "      - {name: two, kind: shell, argv: [/bin/sh, -c, 'echo failing; exit 3']}\n"
               "      - {name: three, kind: noop}\n",
               NULL);
    ql_id_t job = submit(0);
    wait_job(&job, QL_ERROR);
    ql_test_drive_for(&w.loop, 100);
    cr_assert_eq(step_state(&job, 0), QL_SUCCEED);
    ql_step_t s = get_step(&job, 1);
    cr_assert_eq(s.state, QL_ERROR);
    cr_assert_not_null(s.failed_msg);
    cr_assert_not_null(strstr(s.failed_msg, "exit code 3"), "%s", s.failed_msg);
    ql_step_free(&s);
    s = get_step(&job, 2);
    cr_assert_eq(s.state, QL_READY, "the chain stops at the failed step");
    cr_assert_eq(s.start_time, 0);
    ql_step_free(&s);
    cr_assert_eq(starts_of(&job, 2), 0);
    char *o = output(&job, 1);
    cr_assert_str_eq(o, "failing\n", "a failed step's output is kept too");
    free(o);
    ql_job_t j = get_job(&job);
    cr_assert_eq(seg_status(&j.segment), QL_SEG_NEW, "an ERROR job keeps its NEW segment");
    ql_job_free(&j);
}

/* ---- retries ---- */

Test(retry, global_retries_then_error, .fini = teardown) {
    const char *set[] = {"kylin.job.retry=2", "kylin.job.retry-interval=60ms", NULL};
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: flaky, kind: shell, argv: [/bin/sh, -c, 'echo try; exit 1']}\n",
               set);
    ql_id_t job = submit(0);
    wait_job(&job, QL_ERROR);
    cr_assert_eq(starts_of(&job, 0), 3, "one try and kylin.job.retry = 2 retries");
    for (int i = 1; i < 3; i++)
        cr_assert_geq(w.starts[i].mono_ms - w.starts[i - 1].mono_ms, 55,
                      "tries are kylin.job.retry-interval apart");
    ql_step_t s = get_step(&job, 0);
    cr_assert_eq(s.attempts, 3, "attempts are counted");
    cr_assert_eq(s.state, QL_ERROR, "exhausted retries end in ERROR");
    cr_assert_not_null(strstr(s.failed_msg, "exit code 1"), "%s", s.failed_msg);
    ql_step_free(&s);
    assert_durable_starts();
}

Test(retry, per_step_retries_override_the_global_ones, .fini = teardown) {
    const char *set[] = {"kylin.job.retry=3", "kylin.job.retry-interval=10ms", NULL};
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - name: fails once\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'test -f marker || { touch marker; exit 1; }']\n"
               "        cwd: @DIR@\n"
               "        retries: 1\n"
               "        retry_interval: 20ms\n"
               "template_sets:\n"
               "  strict:\n"
               "    INC_BUILD:\n"
               "      steps:\n"
               "        - {name: no retry, kind: shell, argv: [/bin/false], retries: 0}\n",
               set);
    ql_id_t once = submit(0);
    wait_job(&once, QL_SUCCEED);
    ql_step_t s = get_step(&once, 0);
    cr_assert_eq(s.attempts, 2, "failed once, then succeeded");
    cr_assert_eq(s.state, QL_SUCCEED);
    ql_step_free(&s);
    cr_assert_eq(starts_of(&once, 0), 2);
    cr_assert(file_exists("marker"));

    ql_id_t strict_model = create_model("p", "strict_m", "strict", NULL);
    ql_id_t strict = submit_day(&strict_model, 0, 3);
    wait_job(&strict, QL_ERROR);
    ql_test_drive_for(&w.loop, 100);
    cr_assert_eq(starts_of(&strict, 0), 1, "retries: 0 wins over kylin.job.retry = 3");
    s = get_step(&strict, 0);
    cr_assert_eq(s.attempts, 1);
    ql_step_free(&s);
}

/* ---- timeouts ---- */

Test(timeout, a_step_over_its_timeout_is_stopped_and_fails, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: slow, kind: shell, argv: [/bin/sh, -c, 'sleep 30; echo late'],"
               " timeout: 200ms}\n",
               NULL);
    ql_id_t job = submit(0);
    int pgid = wait_pgid(&job, 0);
    int64_t t0 = ql_test_mono_ms();
    wait_job(&job, QL_ERROR);
    int64_t took = ql_test_mono_ms() - t0;
    cr_assert_lt(took, 5000, "the timeout stopped it (took %lld ms)", (long long)took);
    ql_step_t s = get_step(&job, 0);
    cr_assert_eq(s.state, QL_ERROR);
    cr_assert_not_null(s.failed_msg);
    cr_assert_not_null(strstr(s.failed_msg, "timed out"), "%s", s.failed_msg);
    cr_assert_eq(s.pgid, 0);
    ql_step_free(&s);
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "process group %d survives", pgid);
}

/* ---- actions on a running shell step ---- */

/* The second step sleeps 30 s on its first try and succeeds at once on later ones. */
#define MARKER_CHAIN                                                                               \
    "templates:\n"                                                                                 \
    "  INC_BUILD:\n"                                                                               \
    "    steps:\n"                                                                                 \
    "      - {name: first, kind: noop}\n"                                                          \
    "      - name: second\n"                                                                       \
    "        kind: shell\n"                                                                        \
    "        argv: [/bin/sh, -c, 'if [ -f marker ]; then echo again; exit 0; fi; touch marker; "   \
    "sleep 30']\n"                                                                                 \
    "        cwd: @DIR@\n"

typedef struct action_wait {
    bool done;
    int status;
    char msg[512];
} action_wait_t;

static void action_done(void *arg, int status, const ql_err_t *err) {
    action_wait_t *a = arg;
    a->done = true;
    a->status = status;
    snprintf(a->msg, sizeof a->msg, "%s", err ? err->msg : "");
}

static bool cond_action(const void *arg) {
    return ((const action_wait_t *)arg)->done;
}

static void act(const ql_id_t *job, ql_action_t a) {
    action_wait_t aw = {0};
    cr_assert_eq(ql_sched_action(ql_node_sched(w.node), job, a, action_done, &aw), 0);
    cr_assert(ql_test_drive_until(&w.loop, cond_action, &aw, DEADLINE_MS), "no answer to %s",
              ql_action_name(a));
    cr_assert_eq(aw.status, 0, "%s: %s", ql_action_name(a), aw.msg);
}

static bool cond_idle(const void *arg) {
    (void)arg;
    return ql_sched_idle(ql_node_sched(w.node));
}

Test(actions, pause_stops_the_process_and_resume_runs_the_step_again, .fini = teardown) {
    start_node(MARKER_CHAIN, NULL);
    ql_id_t job = submit(0);
    int pgid = wait_pgid(&job, 1);
    wait_marker();
    act(&job, QL_ACTION_PAUSE);
    /* The answer comes once the new states are durable. */
    cr_assert_eq(job_state(&job), QL_PAUSED);
    cr_assert_eq(step_state(&job, 1), QL_READY, "the running step returns to READY");
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "process group %d survives", pgid);
    cr_assert(ql_test_drive_until(&w.loop, cond_idle, NULL, DEADLINE_MS));
    ql_test_drive_for(&w.loop, 100);
    cr_assert_eq(job_state(&job), QL_PAUSED, "a paused job stays paused");
    cr_assert_eq(starts_of(&job, 1), 1);

    act(&job, QL_ACTION_RESUME);
    wait_job(&job, QL_SUCCEED);
    cr_assert_eq(starts_of(&job, 0), 1, "the completed step is not rerun");
    cr_assert_eq(starts_of(&job, 1), 2, "the paused step runs again");
    char *o = output(&job, 1);
    cr_assert_str_eq(o, "again\n");
    free(o);
    assert_durable_starts();
}

Test(actions, discard_stops_the_process_and_removes_the_segment, .fini = teardown) {
    start_node(MARKER_CHAIN, NULL);
    ql_id_t job = submit(0);
    ql_job_t j = get_job(&job);
    ql_id_t seg = j.segment;
    ql_job_free(&j);
    int pgid = wait_pgid(&job, 1);
    wait_marker();
    act(&job, QL_ACTION_DISCARD);
    cr_assert_eq(job_state(&job), QL_DISCARDED);
    cr_assert_eq(step_state(&job, 0), QL_SUCCEED);
    cr_assert_eq(step_state(&job, 1), QL_DISCARDED);
    cr_assert_eq(seg_status(&seg), -1, "the NEW segment went with the discard");
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "process group %d survives", pgid);
    cr_assert(ql_test_drive_until(&w.loop, cond_idle, NULL, DEADLINE_MS));
    ql_test_drive_for(&w.loop, 100);
    cr_assert_eq(starts_of(&job, 1), 1, "nothing reruns");
    cr_assert_eq(job_state(&job), QL_DISCARDED);
}

Test(actions, restart_stops_the_process_first_and_reruns_everything, .fini = teardown) {
    start_node(MARKER_CHAIN, NULL);
    ql_id_t job = submit(0);
    ql_job_t j = get_job(&job);
    ql_id_t seg = j.segment;
    ql_job_free(&j);
    int pgid = wait_pgid(&job, 1);
    wait_marker();
    w.old_pgid = pgid;
    act(&job, QL_ACTION_RESTART);
    /* The restart itself: every step READY and the job READY, its segment still NEW. (The
     * fetcher may already have picked it again; it waits for the old process to be gone.) */
    wait_job(&job, QL_SUCCEED);
    cr_assert_eq(w.started_while_old_alive, 0,
                 "a step of the restarted job started while the old process group lived");
    cr_assert(ql_test_group_gone(pgid));
    cr_assert_eq(starts_of(&job, 0), 2, "a restart reruns completed steps");
    cr_assert_eq(starts_of(&job, 1), 2);
    cr_assert_eq(seg_status(&seg), QL_SEG_READY, "the segment was kept and rebuilt");
    assert_durable_starts();
}

Test(actions, restart_writes_ready_states, .fini = teardown) {
    /* The same restart, observed right after its answer: a fetcher that cannot pick (paused)
     * leaves the READY states in place. */
    start_node(MARKER_CHAIN, NULL);
    ql_id_t job = submit(0);
    ql_job_t j = get_job(&job);
    ql_id_t seg = j.segment;
    ql_job_free(&j);
    int pgid = wait_pgid(&job, 1);
    wait_marker();
    ql_sched_pause_fetching(ql_node_sched(w.node));
    act(&job, QL_ACTION_RESTART);
    cr_assert_eq(job_state(&job), QL_READY);
    cr_assert_eq(step_state(&job, 0), QL_READY);
    cr_assert_eq(step_state(&job, 1), QL_READY);
    cr_assert_eq(seg_status(&seg), QL_SEG_NEW);
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "process group %d survives", pgid);
    ql_sched_start(ql_node_sched(w.node));
    wait_job(&job, QL_SUCCEED);
}

/* ---- output ---- */

Test(output, the_store_keeps_a_capped_tail_and_the_log_everything, .fini = teardown) {
    const char *set[] = {"kylin.job.execute-output.max-size=1KiB", NULL};
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - name: chatty\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'i=0; while [ $i -lt 3000 ]; do echo \"line $i of "
               "the output\"; i=$((i+1)); done']\n",
               set);
    ql_id_t job = submit(0);
    wait_job(&job, QL_SUCCEED);
    size_t full = 0;
    char line[64];
    for (int i = 0; i < 3000; i++)
        full += (size_t)snprintf(line, sizeof line, "line %d of the output\n", i);

    char *o = output(&job, 0);
    size_t n = strlen(o);
    cr_assert_leq(n, 1024 + 64, "the stored output is capped (%zu bytes)", n);
    cr_assert_geq(n, 1000);
    cr_assert_not_null(strstr(o, "truncated"), "the cut is marked");
    const char *last = "line 2999 of the output\n";
    cr_assert_str_eq(o + n - strlen(last), last, "the tail is kept");
    free(o);

    char jid[QL_ID_STR_LEN + 1], sid[QL_ID_STR_LEN + 8], path[512];
    ql_id_format(&job, jid);
    ql_step_id_format(&job, 0, sid);
    snprintf(path, sizeof path, "%s/logs/%s/%s.log", w.data, jid, sid);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "the step's log %s exists", path);
    cr_assert_eq((size_t)st.st_size, full, "the log holds all %zu bytes", full);
    FILE *f = fopen(path, "r");
    cr_assert(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "line 0 of the output\n");
    fclose(f);
}

/* ---- the fetcher ---- */

Test(fetcher, picks_by_priority_then_creation_time, .fini = teardown) {
    const char *set[] = {"kylin.job.max-concurrent-jobs=1", NULL};
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: quick, kind: noop}\n",
               set);
    /* Everything is queued before the fetcher may look. */
    ql_sched_pause_fetching(ql_node_sched(w.node));
    const int prio[] = {4, 0, 3, 1, 0, 3};
    ql_id_t jobs[6];
    for (int i = 0; i < 6; i++)
        jobs[i] = submit_day(&w.model, i, prio[i]);
    ql_sched_start(ql_node_sched(w.node));
    for (int i = 0; i < 6; i++)
        wait_job(&jobs[i], QL_SUCCEED);
    /* 0 (first created), 0 (later), 1, 3, 3, 4 */
    const int order[] = {1, 4, 3, 2, 5, 0};
    cr_assert_eq(w.n_starts, 6);
    for (int i = 0; i < 6; i++)
        cr_assert(ql_id_eq(&w.starts[i].job, &jobs[order[i]]),
                  "start %d should be the job of priority %d created %d-th", i, prio[order[i]],
                  order[i]);
}

/* Largest number of jobs whose persisted [start, end] intervals overlap. */
static int max_overlap(const ql_id_t *jobs, int n) {
    int best = 0;
    for (int i = 0; i < n; i++) {
        ql_job_t a = get_job(&jobs[i]);
        int c = 0;
        for (int k = 0; k < n; k++) {
            ql_job_t b = get_job(&jobs[k]);
            if (b.start_time <= a.start_time && a.start_time < b.end_time)
                c++;
            ql_job_free(&b);
        }
        if (c > best)
            best = c;
        ql_job_free(&a);
    }
    return best;
}

Test(fetcher, never_runs_more_than_allowed, .fini = teardown) {
    const char *set[] = {"kylin.job.max-concurrent-jobs=3", NULL};
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: a, kind: sleep, duration: 30ms}\n"
               "      - {name: b, kind: shell, argv: [/bin/sleep, '0.03']}\n",
               set);
    create_project("p1", "1", NULL);
    create_project("p2", NULL, NULL);
    ql_id_t m1 = create_model("p1", "m1", NULL, NULL), m2 = create_model("p2", "m2", NULL, NULL);
    ql_id_t jobs[12], p1jobs[4];
    for (int i = 0; i < 12; i++) {
        jobs[i] = submit_day(i % 3 == 0 ? &m1 : &m2, i, 3);
        if (i % 3 == 0)
            p1jobs[i / 3] = jobs[i];
    }
    for (int i = 0; i < 12; i++)
        wait_job(&jobs[i], QL_SUCCEED);
    cr_assert_eq(w.max_running, 3, "at most 3 RUNNING at any step start, and the limit is reached");
    cr_assert_eq(w.max_running_p1, 1, "p1's own limit of 1 holds");
    cr_assert_leq(max_overlap(jobs, 12), 3, "persisted job intervals overlap at most 3 deep");
    cr_assert_eq(max_overlap(p1jobs, 4), 1, "p1's jobs never overlap");
    assert_durable_starts();
}

/* One fetcher pass meets more projects than it once had room to track (64): every project's own
 * limit still holds. 70 projects with a limit of 1, two jobs each, all READY in one pass. */
Test(fetcher, project_limits_hold_past_64_projects_in_one_pass, .fini = teardown) {
    const char *set[] = {"kylin.job.max-concurrent-jobs=200", NULL};
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: a, kind: sleep, duration: 100ms}\n",
               set);
    enum { PROJECTS = 70 };
    static ql_id_t jobs[PROJECTS][2];
    /* Every job READY before the fetcher looks, so that one pass meets all 70 projects. */
    ql_sched_pause_fetching(ql_node_sched(w.node));
    for (int p = 0; p < PROJECTS; p++) {
        char name[16];
        snprintf(name, sizeof name, "lp%02d", p);
        create_project(name, "1", NULL);
        ql_id_t m = create_model(name, "m", NULL, NULL);
        jobs[p][0] = submit_day(&m, 0, 3);
        jobs[p][1] = submit_day(&m, 1, 3);
    }
    ql_sched_start(ql_node_sched(w.node));
    for (int p = 0; p < PROJECTS; p++) {
        wait_job(&jobs[p][0], QL_SUCCEED);
        wait_job(&jobs[p][1], QL_SUCCEED);
    }
    for (int p = 0; p < PROJECTS; p++)
        if (max_overlap(jobs[p], 2) != 1)
            cr_assert_fail("project lp%02d ran its two jobs at once (its limit is 1)", p);
}

Test(fetcher, a_submission_wakes_an_idle_fetcher_at_once, .fini = teardown) {
    /* The default poll interval (30 s): only the kick can start the job within the deadline. */
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: quick, kind: noop}\n",
               NULL);
    cr_assert_eq(ql_config_get_int(w.cfg, "kylin.job.scheduler.poll-interval-second"), 30);
    ql_test_drive_for(&w.loop, 50); /* idle: the start-up fetch found nothing */
    int64_t ack;
    ql_id_t job = submit_range(&w.model, BASE, BASE + DAY, 3, &ack);
    wait_job(&job, QL_SUCCEED);
    cr_assert_eq(w.n_starts, 1);
    int64_t latency = w.starts[0].mono_ms - ack;
    cr_assert_lt(latency, 1000, "started %lld ms after the acknowledgement", (long long)latency);
}

/* The node's submission service on the master picks a build in the transaction that creates
 * it (docs/design/jobs.md, The scheduler): RUNNING, its step started, when the client is
 * answered. */
Test(fetcher, a_masters_submission_is_running_when_it_is_acknowledged, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: nap, kind: sleep, duration: 10m}\n",
               NULL);
    ql_test_drive_for(&w.loop, 50); /* idle: the start-up fetch found nothing */
    ql_id_t job =
        ql_test_node_build(&w.loop, w.node, &w.model, BASE, BASE + DAY, BASE + 1, DEADLINE_MS);
    cr_assert_eq(job_state(&job), QL_RUNNING, "picked in its submission's transaction");
    cr_assert_eq(step_state(&job, 0), QL_RUNNING);
    cr_assert_eq(w.n_starts, 1, "its step started before the acknowledgement");
    cr_assert(ql_id_eq(&w.starts[0].job, &job));
    assert_durable_starts();
}

/* ---- parameters ---- */

#define HOSTILE "m;touch x;$(touch x)`touch y`'\"q"

Test(params, reach_the_process_verbatim_and_execute_nothing, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - name: argv\n"
               "        kind: shell\n"
               "        argv: [/usr/bin/printf, '%s\\n', '${QILIN_MODEL}', '${QILIN_JOB_ID}',\n"
               "               '${QILIN_STEP_ID}', '${QILIN_PROJECT}', '${QILIN_JOB_TYPE}',\n"
               "               '${QILIN_SEGMENT_ID}', '${QILIN_SEGMENT_START}',\n"
               "               '${QILIN_SEGMENT_END}', 'model=${QILIN_MODEL}']\n"
               "        cwd: @DIR@\n"
               "      - name: env\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'printf \"%s\\n\" \"$QILIN_MODEL\" \"$QILIN_JOB_ID\" "
               "\"$QILIN_STEP_ID\" \"$QILIN_PROJECT\" \"$QILIN_JOB_TYPE\" \"$QILIN_SEGMENT_ID\" "
               "\"$QILIN_SEGMENT_START\" \"$QILIN_SEGMENT_END\" \"model=$QILIN_MODEL\"']\n"
               "        cwd: @DIR@\n",
               NULL);
    ql_id_t m = create_model("p", HOSTILE, NULL, NULL);
    ql_id_t job = submit_day(&m, 0, 3);
    wait_job(&job, QL_SUCCEED);
    ql_job_t j = get_job(&job);
    char jid[QL_ID_STR_LEN + 1], seg[QL_ID_STR_LEN + 1];
    ql_id_format(&job, jid);
    ql_id_format(&j.segment, seg);
    for (uint32_t i = 0; i < 2; i++) {
        char sid[QL_ID_STR_LEN + 8], want[1024];
        ql_step_id_format(&job, i, sid);
        snprintf(want, sizeof want, "%s\n%s\n%s\np\nINC_BUILD\n%s\n%lld\n%lld\nmodel=%s\n", HOSTILE,
                 jid, sid, seg, (long long)BASE, (long long)(BASE + DAY), HOSTILE);
        char *o = output(&job, i);
        cr_assert_str_eq(o, want, "step %u (%s) got the parameters verbatim", i,
                         i ? "environment" : "argv");
        free(o);
    }
    ql_job_free(&j);
    cr_assert_not(file_exists("x"), "a model name was executed");
    cr_assert_not(file_exists("y"), "a model name was executed");
}

/* The fencing token of the holding that started the try, and the job id, for a step to check at
 * its own resources (docs/job-templates.md); the server's own environment cannot choose them. */
Test(params, the_step_gets_the_fencing_token_and_the_job_id, .fini = teardown) {
    setenv("QILIN_FENCE_TOKEN", "999", 1);
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - name: env\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'printf \"%s %s\\n\" \"$QILIN_FENCE_TOKEN\" "
               "\"$QILIN_JOB_ID\"']\n",
               NULL);
    unsetenv("QILIN_FENCE_TOKEN");
    ql_id_t job = submit(0);
    wait_job(&job, QL_SUCCEED);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store(), false, &t), 0);
    uint64_t epoch = 0;
    cr_assert_eq(ql_fence_current(t, &epoch), 0);
    ql_txn_abort(t);
    cr_assert_gt(epoch, 0, "the node holds the lock with a token");
    char jid[QL_ID_STR_LEN + 1], want[96];
    ql_id_format(&job, jid);
    snprintf(want, sizeof want, "%llu %s\n", (unsigned long long)epoch, jid);
    char *o = output(&job, 0);
    cr_assert_str_eq(o, want);
    free(o);
}

Test(params, formatted_range_uses_the_partition_format_in_the_project_zone, .fini = teardown) {
    start_node("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - name: show\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'printf \"%s|%s\\n\" \"$QILIN_SEGMENT_START_FMT\" "
               "\"$QILIN_SEGMENT_END_FMT\"', '${QILIN_SEGMENT_START_FMT}']\n",
               NULL);
    /* Midnight in Shanghai (UTC+8) is 16:00 UTC the day before. */
    create_project("sh", NULL, "Asia/Shanghai");
    ql_id_t days = create_model("sh", "days", NULL, "yyyy-MM-dd");
    ql_id_t minutes = create_model("sh", "minutes", NULL, "yyyy-MM-dd HH:mm");
    int64_t start = BASE - 8 * 3600000LL, end = start + DAY;
    ql_id_t a = submit_range(&days, start, end, 3, NULL);
    ql_id_t b = submit_range(&minutes, start, end, 3, NULL);
    ql_id_t c = submit_range(&w.model, BASE, BASE + DAY, 3, NULL); /* project p: UTC */
    wait_job(&a, QL_SUCCEED);
    wait_job(&b, QL_SUCCEED);
    wait_job(&c, QL_SUCCEED);
    char *o = output(&a, 0);
    cr_assert_str_eq(o, "2026-09-01|2026-09-02\n");
    free(o);
    o = output(&b, 0);
    cr_assert_str_eq(o, "2026-09-01 00:00|2026-09-02 00:00\n");
    free(o);
    o = output(&c, 0);
    cr_assert_str_eq(o, "2026-09-01|2026-09-02\n");
    free(o);
}

/* ---- the virtual clock: exact retry timing ---- */

static ql_clock_t *vclock;
static int64_t vstarts[8];
static int n_vstarts;

static void vhook(void *arg, const ql_id_t *job, uint32_t seq) {
    (void)arg;
    (void)job;
    (void)seq;
    if (n_vstarts < 8)
        vstarts[n_vstarts++] = ql_clock_now_ms(vclock);
}

/* A scheduler on the virtual clock with a manual writer, templates from yaml, and project p
 * with model m, ready for a build to be submitted. */
typedef struct {
    char dir[64];
    ql_store_t *store;
    ql_templates_t *tpl;
    ql_writer_t *writer;
    ql_sched_t *sched;
    ql_id_t model;
} vsched_t;

static void vsched_open(vsched_t *v, const char *yaml, const ql_sched_opts_t *extra) {
    ql_test_tmpdir(v->dir, sizeof v->dir, "ql_vsched");
    ql_store_opts_t so;
    ql_test_store_opts(v->dir, &so);
    so.map_size = 64u << 20;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &v->store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_templates_load_buffer(yaml, strlen(yaml), "jobs.yaml", &v->tpl, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_test_create_dt_model(v->store, "p", "m", BASE, &v->model, &err), 0, "%s",
                 err.msg);

    cr_assert_eq(ql_clock_virtual_new(BASE, &vclock), 0);
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(v->store, &wo, &v->writer), 0);
    ql_sched_opts_t o = *extra;
    o.store = v->store;
    o.writer = v->writer;
    o.clock = vclock;
    o.templates = v->tpl;
    o.max_concurrent_jobs = 10;
    o.poll_interval_ms = 30000;
    cr_assert_eq(ql_sched_new(&o, &v->sched), 0);
}

/* Submits a build of [BASE, BASE + 1 day) through the writer; returns the job. */
static ql_id_t vsched_build(vsched_t *v) {
    ql_submit_op_t op = {.kind = QL_SUBMIT_BUILD,
                         .templates = v->tpl,
                         .model = v->model,
                         .start = BASE,
                         .end = BASE + DAY,
                         .priority = 3,
                         .now = BASE};
    ql_err_t err = {0};
    cr_assert_eq(ql_writer_call(v->writer, ql_submit_fn, &op, &err), 0, "%s", err.msg);
    return op.job;
}

static void vsched_close(vsched_t *v) {
    ql_sched_free(v->sched);
    ql_writer_free(v->writer);
    ql_clock_free(vclock);
    ql_templates_free(v->tpl);
    ql_store_close(v->store);
    ql_test_rm_tree(v->dir);
}

Test(virtual_clock, retries_wait_exactly_the_retry_interval) {
    static const char yaml[] = "templates:\n"
                               "  INC_BUILD:\n"
                               "    steps:\n"
                               "      - {name: build, kind: sleep, duration: 5m}\n"
                               "      - {name: flaky, kind: fail, sim_duration: 1s}\n";
    vsched_t v;
    ql_sched_opts_t extra = {.retry = 2, .retry_interval_ms = 30000 /* Kylin's default */};
    vsched_open(&v, yaml, &extra);
    ql_sched_set_step_start_hook(v.sched, vhook, NULL);
    ql_sched_start(v.sched);
    ql_id_t job = vsched_build(&v);
    ql_sched_kick(v.sched);
    for (int i = 0; i < 400; i++)
        ql_vclock_run_for(vclock, 1000, true);
    /* 5 min of build, then three 1 s tries of the failing step 30 s apart. */
    cr_assert_eq(n_vstarts, 4);
    cr_assert_eq(vstarts[1] - vstarts[0], 300000);
    cr_assert_eq(vstarts[2] - vstarts[1], 1000 + 30000);
    cr_assert_eq(vstarts[3] - vstarts[2], 1000 + 30000);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(v.store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &job, 0, &j), 0);
    cr_assert_eq(j.state, QL_ERROR);
    cr_assert_eq(j.end_time, vstarts[3] + 1000, "the job ends when the last try does");
    ql_step_t sp;
    cr_assert_eq(ql_step_get(t, &job, 1, &sp), 0);
    cr_assert_eq(sp.attempts, 3);
    ql_step_free(&sp);
    ql_job_free(&j);
    ql_txn_abort(t);
    vsched_close(&v);
}

static void flag_stopped(void *arg) {
    *(bool *)arg = true;
}

static void flag_answered(void *arg, int status, const ql_err_t *err) {
    (void)err;
    *(int *)arg = status == 0 ? 1 : -1;
}

/* A stop must not complete while an action's mutation is still queued: its answer runs in the
 * scheduler, which the stop's callback may free. */
Test(virtual_clock, a_stop_waits_for_the_actions_in_flight) {
    static const char yaml[] = "templates:\n"
                               "  INC_BUILD:\n"
                               "    steps:\n"
                               "      - {name: build, kind: sleep, duration: 5m}\n";
    vsched_t v;
    ql_sched_opts_t extra = {0};
    vsched_open(&v, yaml, &extra);
    ql_id_t job = vsched_build(&v);

    /* The scheduler never started, so nothing runs: only the action is in flight. */
    int answered = 0;
    bool stopped = false;
    cr_assert_eq(ql_sched_action(v.sched, &job, QL_ACTION_DISCARD, flag_answered, &answered), 0);
    ql_sched_stop(v.sched, true, 0, flag_stopped, &stopped);
    cr_assert_not(stopped, "stopped with the DISCARD's answer still to come");
    cr_assert_eq(ql_writer_flush(v.writer), 1);
    cr_assert_eq(answered, 1, "the DISCARD was answered");
    cr_assert(stopped, "the stop completes once the action is answered");

    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(v.store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &job, 0, &j), 0);
    cr_assert_eq(j.state, QL_DISCARDED);
    ql_job_free(&j);
    ql_txn_abort(t);
    vsched_close(&v);
}

/* ---- fencing (docs/design/cluster.md): a scheduler whose lock moved on changes nothing ---- */

static int n_fenced;

static void count_fenced(void *arg) {
    (void)arg;
    n_fenced++;
}

/* Raises the store's fencing epoch, as a new lock holder does; returns the new epoch. */
static uint64_t raise_epoch(vsched_t *v) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(v->store, true, &t), 0);
    uint64_t e = 0;
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return e;
}

static ql_job_t vsched_job(vsched_t *v, const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(v->store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

static const char fence_yaml[] = "templates:\n"
                                 "  INC_BUILD:\n"
                                 "    steps:\n"
                                 "      - {name: build, kind: sleep, duration: 5m}\n"
                                 "      - {name: publish, kind: noop}\n";

Test(virtual_clock, a_scheduler_whose_lock_moved_on_picks_nothing) {
    vsched_t v;
    n_fenced = 0;
    ql_sched_opts_t extra = {.fence = 1, .on_fenced = count_fenced};
    vsched_open(&v, fence_yaml, &extra);
    cr_assert_eq(raise_epoch(&v), 1, "this scheduler's holding");
    ql_id_t job = vsched_build(&v);
    cr_assert_eq(raise_epoch(&v), 2, "another server took the lock");
    ql_sched_start(v.sched);
    ql_sched_kick(v.sched);
    for (int i = 0; i < 70; i++)
        ql_vclock_run_for(vclock, 1000, true);
    ql_job_t j = vsched_job(&v, &job);
    cr_assert_eq(j.state, QL_READY, "the pick was refused: the job waits for the new holder");
    cr_assert_eq(j.fence, 0);
    ql_job_free(&j);
    cr_assert_eq(n_fenced, 1, "the owner is told once");
    cr_assert_not(ql_sched_is_fetching(v.sched), "fetching stopped");
    vsched_close(&v);
}

Test(virtual_clock, a_step_end_after_the_lock_moved_on_is_not_recorded) {
    vsched_t v;
    n_fenced = 0;
    ql_sched_opts_t extra = {.fence = 1, .on_fenced = count_fenced};
    vsched_open(&v, fence_yaml, &extra);
    cr_assert_eq(raise_epoch(&v), 1);
    ql_id_t job = vsched_build(&v);
    ql_sched_start(v.sched);
    ql_sched_kick(v.sched);
    ql_vclock_run_for(vclock, 1000, true);
    ql_job_t j = vsched_job(&v, &job);
    cr_assert_eq(j.state, QL_RUNNING, "picked under epoch 1");
    cr_assert_eq(j.fence, 1);
    ql_job_free(&j);

    cr_assert_eq(raise_epoch(&v), 2);
    for (int i = 0; i < 400; i++)
        ql_vclock_run_for(vclock, 1000, true);
    /* The 5 min step ended on this scheduler, but its end (and the next step's start) was
     * refused: the store still shows the step RUNNING, for the new holder's recovery. */
    j = vsched_job(&v, &job);
    cr_assert_eq(j.state, QL_RUNNING);
    cr_assert_eq(j.fence, 1, "nothing written under the stale token");
    ql_job_free(&j);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(v.store, false, &t), 0);
    ql_step_t st;
    cr_assert_eq(ql_step_get(t, &job, 0, &st), 0);
    cr_assert_eq(st.state, QL_RUNNING);
    ql_step_free(&st);
    cr_assert_eq(ql_step_get(t, &job, 1, &st), 0);
    cr_assert_eq(st.state, QL_READY, "the next step never started");
    ql_step_free(&st);
    ql_txn_abort(t);
    cr_assert_eq(n_fenced, 1);
    vsched_close(&v);
}

Test(virtual_clock, a_dispatcher_submission_under_an_old_token_is_refused_and_writes_nothing) {
    vsched_t v;
    ql_sched_opts_t extra = {0};
    vsched_open(&v, fence_yaml, &extra);
    raise_epoch(&v);
    raise_epoch(&v);
    ql_submit_op_t op = {.kind = QL_SUBMIT_BUILD,
                         .templates = v.tpl,
                         .model = v.model,
                         .start = BASE,
                         .end = BASE + DAY,
                         .priority = 3,
                         .submitter = "System",
                         .now = BASE,
                         .fence = 1};
    ql_err_t err = {0};
    cr_assert_eq(ql_writer_call(v.writer, ql_submit_fn, &op, &err), QL_EFENCED);
    cr_assert(strstr(err.msg, "fenced"), "%s", err.msg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(v.store, false, &t), 0);
    uint64_t segments = 99;
    cr_assert_eq(ql_segment_count(t, &v.model, &segments), 0);
    cr_assert_eq(segments, 0, "no segment was written");
    ql_txn_abort(t);
    op.fence = 2; /* the current holder's token */
    cr_assert_eq(ql_writer_call(v.writer, ql_submit_fn, &op, &err), 0, "%s", err.msg);
    vsched_close(&v);
}

/* ---- takeover: the epoch raised between a step's RUNNING commit and its spawn ---- */

static bool cond_demoted(const void *arg) {
    (void)arg;
    return w.raised && !ql_node_is_master(w.node);
}

/* The pick's commit was fenced under the old epoch and so allowed; another server raises the
 * epoch (and sweeps the step's marker in its recovery) before this one spawns. The spawn must
 * not happen: it would run beside the new holder's try of the step. */
Test(node, a_step_committed_before_a_takeover_is_not_spawned_after_it, .fini = teardown,
     .timeout = 30) {
    start_node("templates:\n  INC_BUILD:\n    steps:\n"
               "      - {name: s, kind: shell, argv: [/bin/sh, -c, "
               "'echo \"$QILIN_STEP_TOKEN\" >> @DIR@/ran']}\n",
               NULL);
    w.raise_at_start = true;
    submit(0);
    ql_node_kick(w.node);
    cr_assert(ql_test_drive_until(&w.loop, cond_demoted, NULL, DEADLINE_MS),
              "the scheduler never noticed the lost lock");
    cr_assert_eq(strlen(w.raised_token), QL_STEP_TOKEN_LEN);
    char path[256], line[128];
    snprintf(path, sizeof path, "%s/ran", w.dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        cr_assert_str_neq(line, w.raised_token, "the try committed before the takeover ran");
    }
    if (f)
        fclose(f);
}
