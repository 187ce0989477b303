/*
 * Job actions made by another process reach the master's running step (user-guide.md, Several
 * servers; ql_sched.h, DESIGN). Server A, the master, is a node in a process of its own
 * (tests/scheduler/node_driver.c, polling every second); server B, a standby, is a node in this
 * process. B applies PAUSE, DISCARD, RESTART and RESUME exactly as a standby's REST API does:
 * ql_job_apply_action through its own writer, straight to the shared store. A is not told on
 * LMDB: it must notice the stored state at its next poll and stop its step's process group. On
 * PostgreSQL (the @pg run) the commit's notification makes it look at once (docs/postgresql.md,
 * Wake-ups across servers); the outcomes asserted are the same.
 *
 * The job's step sleeps 30 s on its first try and succeeds at once (printing the pid of the
 * server that runs it) on later ones; a model of template set `nap` has a built-in sleep step
 * (a timer in A, no process). Waits are conditions with deadlines on the loop
 * (UV_RUN_ONCE with a 5 ms tick); nothing sleeps.
 */
#include "scheduler/ql_submit.h"
#include "server/ql_node.h"

#include "tests/common/driver_proc.h"
#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define DRIVER QL_BUILD_DIR "/tests/node_driver"
#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000
/* A's poll (1 s) + its kill grace (500 ms) + slack for a loaded machine. */
#define NOTICE_MS 6000
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

static const char TEMPLATES[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: long\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'if [ -f marker ]; then echo ppid=$PPID; exit 0; fi; "
    "touch marker; sleep 30']\n"
    "        cwd: @DIR@\n"
    "template_sets:\n"
    "  nap:\n"
    "    INC_BUILD:\n"
    "      steps:\n"
    "        - {name: nap, kind: sleep, duration: 10m}\n";

static struct {
    char dir[64];
    char data[128];
    char templates[128];
    char a_log[160];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_log_t log;
    ql_config_t *cfg;
    ql_node_t *b;
    ql_test_driver_t a; /* server A: node_driver in its own process */
    ql_id_t model;
} w;

/* ---- server A: node_driver in its own process ---- */

static void start_a(void) {
    ql_test_driver_start_node(&w.a, &w.loop, DRIVER, w.data, w.templates, w.a_log, DEADLINE_MS);
}

/* Whether A's log (its stderr) holds every needle (NULL-terminated) on one line. */
static bool a_logged(const char *const *needles) {
    return ql_test_file_has_line(w.a_log, needles);
}

/* The line number in A's log of the nth (from 1) line holding needle, or -1. */
static int a_line(const char *needle, int nth) {
    FILE *f = fopen(w.a_log, "r");
    if (!f)
        return -1;
    char line[2048];
    int i = 0, at = -1;
    while (at < 0 && fgets(line, sizeof line, f)) {
        if (strstr(line, needle) && --nth == 0)
            at = i;
        i++;
    }
    fclose(f);
    return at;
}

static bool cond_a_logged(const void *arg) {
    return a_logged(arg);
}

/* ---- server B: a standby in this process ---- */

static void start_b(void) {
    w.cfg = ql_test_node_config(w.data, w.templates, NULL);
    ql_err_t err = {0};
    ql_log_init(&w.log, getenv("QL_TEST_DEBUG") ? QL_LOG_DEBUG : QL_LOG_ERROR);
    ql_node_opts_t no = {.config = w.cfg, .loop = &w.loop, .log = &w.log, .exec_helper = HELPER};
    cr_assert_eq(ql_node_start(&no, &w.b, &err), 0, "%s", err.msg);
    cr_assert_not(ql_node_is_master(w.b), "B must be a standby while A holds the lock");
}

static bool cond_model(const void *arg) {
    (void)arg;
    return ql_test_node_find_model(w.b, "p", "m", &w.model);
}

static void setup(void) {
    memset(&w, 0, sizeof w);
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_standby");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    snprintf(w.templates, sizeof w.templates, "%s/jobs.yaml", w.dir);
    snprintf(w.a_log, sizeof w.a_log, "%s/a.err", w.dir);
    ql_test_write_with_dir(w.templates, TEMPLATES, w.dir);
    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    uv_timer_start(&w.tick, ql_test_tick_cb, 5, 5);
    start_a();
    start_b();
    /* A creates project p and model m as soon as it runs. */
    cr_assert(ql_test_drive_until(&w.loop, cond_model, NULL, DEADLINE_MS));
}

static void teardown(void) {
    if (w.b)
        ql_test_node_stop(&w.loop, w.b, DEADLINE_MS);
    ql_test_driver_reap(&w.a, true, DEADLINE_MS);
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_config_free(w.cfg);
    ql_test_rm_tree(w.dir);
}

/* ---- jobs, through B ---- */

static ql_id_t submit_b_model(const ql_id_t *model) {
    return ql_test_node_build(&w.loop, w.b, model, BASE, BASE + DAY, BASE + 1, DEADLINE_MS);
}

static ql_id_t submit_b(void) {
    return submit_b_model(&w.model);
}

/* An action as a standby's PUT /kylin/api/jobs/status applies it: through its own writer,
 * straight to the store; the master is not told. */
typedef struct act {
    ql_id_t job;
    ql_action_t action;
    ql_state_t was;
    bool done;
    int status;
    char msg[512];
} act_t;

static int act_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    act_t *a = arg;
    return ql_job_apply_action(txn, &a->job, a->action, BASE + 2, &a->was, err);
}

static void act_done(void *arg, int status, const ql_err_t *err) {
    act_t *a = arg;
    a->done = true;
    a->status = status;
    snprintf(a->msg, sizeof a->msg, "%s", err ? err->msg : "");
}

static bool cond_act(const void *arg) {
    return ((const act_t *)arg)->done;
}

static void act_b(const ql_id_t *job, ql_action_t action) {
    act_t a = {.job = *job, .action = action};
    cr_assert_eq(ql_writer_submit(ql_node_writer(w.b), act_fn, &a, act_done), 0);
    cr_assert(ql_test_drive_until(&w.loop, cond_act, &a, DEADLINE_MS));
    cr_assert_eq(a.status, 0, "%s: %s", ql_action_name(action), a.msg);
}

typedef struct seen {
    ql_state_t job, step;
    uint32_t attempts;
    int pgid;
    ql_id_t segment;
} seen_t;

static seen_t look(const ql_id_t *job) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(w.b), false, &t), 0);
    ql_job_t j;
    ql_step_t s;
    cr_assert_eq(ql_job_get(t, job, 0, &j), 0);
    cr_assert_eq(ql_step_get(t, job, 0, &s), 0);
    seen_t v = {j.state, s.state, s.attempts, s.pgid, j.segment};
    ql_step_free(&s);
    ql_job_free(&j);
    ql_txn_abort(t);
    return v;
}

typedef struct job_is {
    ql_id_t job;
    ql_state_t state;
} job_is_t;

static bool cond_job_is(const void *arg) {
    const job_is_t *c = arg;
    return look(&c->job).job == c->state;
}

static void wait_job(const ql_id_t *job, ql_state_t st) {
    job_is_t c = {*job, st};
    cr_assert(ql_test_drive_until(&w.loop, cond_job_is, &c, DEADLINE_MS),
              "the job did not become %s (it is %s)", ql_state_name(st),
              ql_state_name(look(job).job));
}

typedef struct pgid_wait {
    ql_id_t job;
    int pgid;
} pgid_wait_t;

static bool cond_running_pgid(const void *arg) {
    pgid_wait_t *p = (pgid_wait_t *)arg;
    seen_t v = look(&p->job);
    if (v.step == QL_RUNNING && v.pgid > 0)
        p->pgid = v.pgid;
    return p->pgid > 0;
}

static bool cond_marker(const void *arg) {
    (void)arg;
    char p[128];
    snprintf(p, sizeof p, "%s/marker", w.dir);
    return access(p, F_OK) == 0;
}

/* Submits through B and waits until A runs the first try (in its 30 s sleep); returns the
 * step's process group. */
static int start_long_job(ql_id_t *job) {
    *job = submit_b();
    pgid_wait_t p = {*job, 0};
    cr_assert(ql_test_drive_until(&w.loop, cond_running_pgid, &p, DEADLINE_MS),
              "A never started the step");
    cr_assert(ql_test_drive_until(&w.loop, cond_marker, NULL, DEADLINE_MS),
              "the step never touched its marker");
    return p.pgid;
}

/* The group is gone within A's poll interval and kill grace, and A logged why. */
static void assert_stopped_by_a(const ql_id_t *job, int pgid, const char *found) {
    int64_t t0 = ql_test_mono_ms();
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, NOTICE_MS),
              "the master's step (process group %d) survives the action", pgid);
    int64_t took = ql_test_mono_ms() - t0;
    char id[QL_ID_STR_LEN + 1], job_kv[QL_ID_STR_LEN + 8], found_kv[32];
    ql_id_format(job, id);
    snprintf(job_kv, sizeof job_kv, "job=%s", id);
    snprintf(found_kv, sizeof found_kv, "found=%s", found);
    const char *needles[] = {"by another process: stopping its step", job_kv, found_kv, NULL};
    cr_assert(ql_test_drive_until(&w.loop, cond_a_logged, needles, DEADLINE_MS),
              "A did not log its decision with %s and %s", job_kv, found_kv);
    cr_log_info("the master stopped the step %lld ms after the action", (long long)took);
}

static void assert_ran_on_a(const ql_id_t *job) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(w.b), false, &t), 0);
    char *out = NULL, want[64];
    size_t len;
    cr_assert_eq(ql_output_get(t, job, 0, &out, &len), 0);
    ql_txn_abort(t);
    snprintf(want, sizeof want, "ppid=%ld\n", (long)w.a.proc.pid);
    cr_assert_str_eq(out, want, "the job ran on the wrong server");
    free(out);
}

/* ---- tests ---- */

Test(standby_actions, a_pause_stops_the_masters_step_and_a_resume_runs_it_again, .init = setup,
     .fini = teardown) {
    ql_id_t job;
    int pgid = start_long_job(&job);
    act_b(&job, QL_ACTION_PAUSE);
    assert_stopped_by_a(&job, pgid, "PAUSED");
    /* A wrote nothing over the pause: not the step's end, not a new try (a poll or more). */
    ql_test_drive_for(&w.loop, 1500);
    seen_t v = look(&job);
    cr_assert_eq(v.job, QL_PAUSED, "the job is %s", ql_state_name(v.job));
    cr_assert_eq(v.step, QL_READY, "the step is %s", ql_state_name(v.step));
    cr_assert_eq(v.attempts, 1);

    /* A resume through B: A picks the job at its next poll and finishes it. */
    act_b(&job, QL_ACTION_RESUME);
    wait_job(&job, QL_SUCCEED);
    v = look(&job);
    cr_assert_eq(v.step, QL_SUCCEED);
    cr_assert_eq(v.attempts, 2, "the paused try and the resumed one");
    assert_ran_on_a(&job);
}

Test(standby_actions, a_discard_stops_the_masters_step_and_stays, .init = setup, .fini = teardown) {
    ql_id_t job;
    int pgid = start_long_job(&job);
    ql_id_t seg = look(&job).segment;
    act_b(&job, QL_ACTION_DISCARD);
    assert_stopped_by_a(&job, pgid, "DISCARDED");
    ql_test_drive_for(&w.loop, 1500);
    seen_t v = look(&job);
    cr_assert_eq(v.job, QL_DISCARDED, "the job is %s", ql_state_name(v.job));
    cr_assert_eq(v.step, QL_DISCARDED, "the step is %s", ql_state_name(v.step));
    cr_assert_eq(v.attempts, 1, "nothing reran");
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(w.b), false, &t), 0);
    ql_segment_t s;
    cr_assert_eq(ql_segment_get(t, &seg, &s), QL_ENOTFOUND, "the NEW segment went with it");
    ql_txn_abort(t);
}

Test(standby_actions, a_restart_stops_the_old_try_before_the_master_runs_the_job_again,
     .init = setup, .fini = teardown) {
    ql_id_t job;
    int pgid = start_long_job(&job);
    act_b(&job, QL_ACTION_RESTART);
    assert_stopped_by_a(&job, pgid, "READY");
    /* The restarted job is picked once the old try is gone, and succeeds on A. */
    wait_job(&job, QL_SUCCEED);
    seen_t v = look(&job);
    cr_assert_eq(v.attempts, 1, "a restart counts the tries anew");
    assert_ran_on_a(&job); /* the marker's second try: the first was stopped, not finished */
    int stopped = a_line("by another process: stopping its step", 1);
    int picked_again = a_line("READY -> PENDING -> RUNNING", 2);
    cr_assert_geq(stopped, 0);
    cr_assert_gt(picked_again, stopped, "A picked the restarted job before it stopped the old try");
}

Test(standby_actions, a_pause_stops_a_built_in_step_too, .init = setup, .fini = teardown) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(w.b), true, &t), 0);
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "nap_m");
    snprintf(m.project, sizeof m.project, "p");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "dt");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    snprintf(m.job_template, sizeof m.job_template, "nap");
    ql_err_t err = {0};
    cr_assert_eq(ql_meta_create_model(t, &m, BASE, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_id_t job = submit_b_model(&m.id);
    wait_job(&job, QL_RUNNING);
    act_b(&job, QL_ACTION_PAUSE);
    char id[QL_ID_STR_LEN + 1], job_kv[QL_ID_STR_LEN + 8];
    ql_id_format(&job, id);
    snprintf(job_kv, sizeof job_kv, "job=%s", id);
    const char *needles[] = {"job RUNNING -> PAUSED by another process: stopping its step",
                             "found=PAUSED", job_kv, NULL};
    cr_assert(ql_test_drive_until(&w.loop, cond_a_logged, needles, NOTICE_MS),
              "A did not notice the pause of its sleeping step");
    /* The step is stopped, not just left to end: the job is RESUMEd and runs it again. */
    act_b(&job, QL_ACTION_RESUME);
    const char *again[] = {"READY -> PENDING -> RUNNING step=00 attempt=2", job_kv, NULL};
    cr_assert(ql_test_drive_until(&w.loop, cond_a_logged, again, NOTICE_MS),
              "A did not run the resumed job again");
    act_b(&job, QL_ACTION_DISCARD);
    const char *discarded[] = {"found=DISCARDED", job_kv, NULL};
    cr_assert(ql_test_drive_until(&w.loop, cond_a_logged, discarded, NOTICE_MS));
    cr_assert_eq(look(&job).job, QL_DISCARDED);
}
