/*
 * Graceful shutdown with `qilin.shutdown.running-steps: wait` (user-guide.md, Running the
 * server; configuration.md, qilin.shutdown.grace-ms): a real node on a real loop runs real shell
 * steps through qilin-exec, and ql_node_stop is asked to wait for them.
 *
 *   - a step that outlasts qilin.shutdown.grace-ms is paused anyway: the shutdown completes
 *     within a bounded time, the step's process group is gone, the store shows the job READY
 *     (written by the shutdown itself: the restart recovers nothing), and after a restart the
 *     step runs again to SUCCEED;
 *   - a step shorter than the grace finishes SUCCEED before the shutdown completes;
 *   - a chain whose step ends during the wait does not start its next step: the job goes back
 *     to READY at that step and resumes there after a restart;
 *   - a step waiting for its retry is not waited for: its job goes back to READY at once and
 *     the retry runs after the restart;
 *   - a stopped step whose marker's sweep cannot make sure a process it killed is gone leaves
 *     its job RUNNING, for the next start's recovery.
 *
 * Waits are conditions with deadlines on the loop (UV_RUN_ONCE with a 5 ms tick); nothing
 * sleeps. After a stop the store is opened read-only to see what the shutdown left.
 */
#include "scheduler/ql_submit.h"
#include "server/ql_node.h"

#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/slow_exit_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

/* The first try touches a marker and sleeps 30 s; later tries print "again" and succeed. */
static const char MARKER_STEP[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: long\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'if [ -f marker ]; then echo again; exit 0; fi; touch marker; "
    "sleep 30']\n"
    "        cwd: @DIR@\n";

static struct {
    char dir[64];
    char data[128];
    char templates[128];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_log_t log;
    char lines[256][512];
    int n_lines;
    ql_config_t *cfg;
    ql_node_t *node;
    ql_id_t model;
    int drain_ms; /* ql_node_opts_t.proc_drain_ms of the next start */
} w;

static void log_sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    (void)level;
    if (getenv("QL_TEST_DEBUG"))
        fprintf(stderr, "%s\n", line);
    if (w.n_lines < (int)(sizeof w.lines / sizeof w.lines[0]))
        snprintf(w.lines[w.n_lines++], sizeof w.lines[0], "%s", line);
}

static bool logged(const char *needle) {
    for (int i = 0; i < w.n_lines; i++)
        if (strstr(w.lines[i], needle))
            return true;
    return false;
}

static bool file_exists(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", w.dir, name);
    return access(path, F_OK) == 0;
}

static bool cond_file(const void *arg) {
    return file_exists(arg);
}

/* ---- the node ---- */

static void start(void) {
    ql_node_opts_t no = {.config = w.cfg,
                         .loop = &w.loop,
                         .log = &w.log,
                         .exec_helper = HELPER,
                         .proc_drain_ms = w.drain_ms};
    ql_err_t err = {0};
    cr_assert_eq(ql_node_start(&no, &w.node, &err), 0, "%s", err.msg);
    cr_assert(ql_node_is_master(w.node));
}

/* Asks the node to stop and waits for it; returns how long the stop took (ms). */
static int64_t stop(int64_t deadline_ms) {
    int64_t t0 = ql_test_mono_ms();
    ql_test_node_stop(&w.loop, w.node, deadline_ms);
    w.node = NULL;
    return ql_test_mono_ms() - t0;
}

/* A fresh directory, templates (@DIR@ stands for the directory), settings ("key=value",
 * NULL-terminated), project p, model m, and a running node whose sweeps wait drain_ms (0: the
 * default) for what they killed. */
static void setup_with_drain(const char *templates, const char *const *settings, int drain_ms) {
    memset(&w, 0, sizeof w);
    w.drain_ms = drain_ms;
    cr_assert_eq(access(HELPER, X_OK), 0, "the exec helper %s is not built", HELPER);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_shutdown");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    snprintf(w.templates, sizeof w.templates, "%s/jobs.yaml", w.dir);
    ql_test_write_with_dir(w.templates, templates, w.dir);

    static const char *const fixed[] = {"qilin.step.kill-grace-ms=300",
                                        "qilin.shutdown.running-steps=wait", NULL};
    w.cfg = ql_test_node_config(w.data, w.templates, fixed);
    ql_err_t err = {0};
    for (size_t i = 0; settings && settings[i]; i++)
        cr_assert_eq(ql_config_set_arg(w.cfg, settings[i], &err), 0, "%s: %s", settings[i],
                     err.msg);

    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    uv_timer_start(&w.tick, ql_test_tick_cb, 5, 5);
    ql_log_init(&w.log, QL_LOG_INFO);
    w.log.sink = log_sink;
    start();

    cr_assert_eq(ql_test_create_dt_model(ql_node_store(w.node), "p", "m", BASE, &w.model, &err), 0,
                 "%s", err.msg);
}

static void setup_with(const char *templates, const char *const *settings) {
    setup_with_drain(templates, settings, 0);
}

/* Also called by a case that starts over: a second call does nothing. */
static void teardown(void) {
    ql_config_t *cfg = w.cfg;
    if (!cfg)
        return;
    w.cfg = NULL; /* first: an assertion below must not make the .fini call run it again */
    if (w.node)
        stop(DEADLINE_MS);
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_config_free(cfg);
    ql_test_rm_tree(w.dir);
}

/* ---- jobs ---- */

static ql_id_t submit(void) {
    return ql_test_node_build(&w.loop, w.node, &w.model, BASE, BASE + DAY, BASE + 1, DEADLINE_MS);
}

/* What the store holds, read through the node's store while it runs, or through a read-only
 * store of its own after a stop (the shutdown's writes, not a restart's recovery). */
typedef struct seen {
    ql_state_t job;
    ql_state_t step[2];
    uint32_t attempts[2];
    int pgid0;
    char out[2][64];
} seen_t;

static seen_t look_in(ql_store_t *st, const ql_id_t *job, uint32_t n_steps) {
    seen_t v = {0};
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(st, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, job, 0, &j), 0);
    v.job = j.state;
    ql_job_free(&j);
    for (uint32_t i = 0; i < n_steps; i++) {
        ql_step_t s;
        cr_assert_eq(ql_step_get(t, job, i, &s), 0);
        v.step[i] = s.state;
        v.attempts[i] = s.attempts;
        if (i == 0)
            v.pgid0 = s.pgid;
        ql_step_free(&s);
        char *o = NULL;
        size_t len;
        if (ql_output_get(t, job, i, &o, &len) == 0) {
            snprintf(v.out[i], sizeof v.out[i], "%s", o);
            free(o);
        }
    }
    ql_txn_abort(t);
    return v;
}

static seen_t look_stopped(const ql_id_t *job, uint32_t n_steps) {
    ql_store_opts_t so;
    ql_test_store_opts(w.data, &so); /* the backend under test, the node's store */
    so.map_size = 1ull << 30;
    so.read_only = true;
    ql_store_t *st;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &st, &err), 0, "%s", err.msg);
    seen_t v = look_in(st, job, n_steps);
    ql_store_close(st);
    return v;
}

typedef struct job_is {
    ql_id_t job;
    ql_state_t state;
} job_is_t;

static bool cond_job_is(const void *arg) {
    const job_is_t *c = arg;
    return look_in(ql_node_store(w.node), &c->job, 1).job == c->state;
}

/* The process group of step 0 once it runs and its pgid is recorded. */
typedef struct pgid_wait {
    ql_id_t job;
    int pgid;
} pgid_wait_t;

static bool cond_pgid(const void *arg) {
    pgid_wait_t *p = (pgid_wait_t *)arg;
    seen_t v = look_in(ql_node_store(w.node), &p->job, 1);
    if (v.step[0] == QL_RUNNING && v.pgid0 > 0)
        p->pgid = v.pgid0;
    return p->pgid > 0;
}

static int wait_pgid(const ql_id_t *job) {
    pgid_wait_t p = {*job, 0};
    cr_assert(ql_test_drive_until(&w.loop, cond_pgid, &p, DEADLINE_MS),
              "the step never ran with a process group");
    return p.pgid;
}

/* ---- tests ---- */

Test(shutdown_wait, a_step_that_outlasts_the_grace_is_paused_and_runs_again_after_a_restart,
     .fini = teardown) {
    const char *set[] = {"qilin.shutdown.grace-ms=200ms", NULL};
    setup_with(MARKER_STEP, set);
    ql_id_t job = submit();
    int pgid = wait_pgid(&job);
    cr_assert(ql_test_drive_until(&w.loop, cond_file, "marker", DEADLINE_MS),
              "the step never touched its marker");

    /* The grace (200 ms), SIGTERM to the group (sh and its sleep die at once; SIGKILL would
     * follow after 300 ms), the writer drained: far below the step's 30 s. */
    int64_t took = stop(5000);
    cr_assert_geq(took, 190, "the shutdown waited for the grace first (took %lld ms)",
                  (long long)took);
    cr_assert_lt(took, 3000, "the shutdown did not wait for the step (took %lld ms)",
                 (long long)took);
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "the step's process group %d survives the shutdown", pgid);
    cr_assert(logged("shutdown grace expired: pausing the steps still running running=1 "
                     "grace_ms=200"));
    cr_assert(logged("job RUNNING -> READY step=00 reason=\"server shutting down: the step "
                     "outlasted qilin.shutdown.grace-ms (200 ms)\""));

    seen_t v = look_stopped(&job, 1);
    cr_assert_eq(v.job, QL_READY, "the shutdown left the job %s", ql_state_name(v.job));
    cr_assert_eq(v.step[0], QL_READY, "the shutdown left the step %s", ql_state_name(v.step[0]));
    cr_assert_eq(v.attempts[0], 1);

    /* The restart finds nothing to recover (the shutdown wrote READY) and runs the step again. */
    w.n_lines = 0;
    start();
    job_is_t c = {job, QL_SUCCEED};
    cr_assert(ql_test_drive_until(&w.loop, cond_job_is, &c, DEADLINE_MS),
              "the job did not run to SUCCEED after the restart");
    cr_assert_not(logged("recovered interrupted jobs"), "the shutdown left something RUNNING");
    v = look_in(ql_node_store(w.node), &job, 1);
    cr_assert_eq(v.step[0], QL_SUCCEED);
    cr_assert_eq(v.attempts[0], 2, "the paused try and the one after the restart");
    cr_assert_str_eq(v.out[0], "again\n");
}

Test(shutdown_wait, a_step_shorter_than_the_grace_finishes_before_the_shutdown_completes,
     .fini = teardown) {
    const char *set[] = {"qilin.shutdown.grace-ms=20s", NULL};
    setup_with("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: short, kind: shell, argv: [/bin/sh, -c, 'sleep 0.4; echo done']}\n",
               set);
    ql_id_t job = submit();
    int pgid = wait_pgid(&job);
    int64_t took = stop(DEADLINE_MS);
    cr_assert_lt(took, 10000, "the shutdown waited for the step, not the grace (took %lld ms)",
                 (long long)took);
    cr_assert(ql_test_group_gone(pgid));
    cr_assert(logged("waiting for running steps running=1 grace_ms=20000"));
    cr_assert_not(logged("grace expired"));
    seen_t v = look_stopped(&job, 1);
    cr_assert_eq(v.job, QL_SUCCEED, "the job is %s", ql_state_name(v.job));
    cr_assert_eq(v.step[0], QL_SUCCEED);
    cr_assert_eq(v.attempts[0], 1);
    cr_assert_str_eq(v.out[0], "done\n", "its result was written before the stop completed");
}

Test(shutdown_wait, a_chain_does_not_start_its_next_step_and_resumes_there_after_a_restart,
     .fini = teardown) {
    const char *set[] = {"qilin.shutdown.grace-ms=20s", NULL};
    setup_with("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - {name: first, kind: shell, argv: [/bin/sh, -c, 'sleep 0.3; echo one']}\n"
               "      - {name: second, kind: shell, argv: [/bin/sh, -c, 'touch second; echo two'],"
               " cwd: @DIR@}\n",
               set);
    ql_id_t job = submit();
    wait_pgid(&job);
    stop(DEADLINE_MS);
    cr_assert_not(file_exists("second"), "the next step started during the shutdown");
    seen_t v = look_stopped(&job, 2);
    cr_assert_eq(v.step[0], QL_SUCCEED, "the running step finished");
    cr_assert_str_eq(v.out[0], "one\n");
    cr_assert_eq(v.step[1], QL_READY, "the next step is %s", ql_state_name(v.step[1]));
    cr_assert_eq(v.attempts[1], 0, "the next step never started");
    cr_assert_eq(v.job, QL_READY, "the job went back to READY (it is %s)", ql_state_name(v.job));

    w.n_lines = 0;
    start();
    job_is_t c = {job, QL_SUCCEED};
    cr_assert(ql_test_drive_until(&w.loop, cond_job_is, &c, DEADLINE_MS));
    cr_assert_not(logged("recovered interrupted jobs"));
    v = look_in(ql_node_store(w.node), &job, 2);
    cr_assert_eq(v.attempts[0], 1, "the finished step is not rerun");
    cr_assert_eq(v.attempts[1], 1);
    cr_assert(file_exists("second"));
}

typedef struct retry_wait {
    ql_id_t job;
} retry_wait_t;

/* The first try has failed and its retry is due later: the step is READY again, the job still
 * RUNNING. */
static bool cond_waiting_for_retry(const void *arg) {
    const retry_wait_t *c = arg;
    seen_t v = look_in(ql_node_store(w.node), &c->job, 1);
    return v.job == QL_RUNNING && v.step[0] == QL_READY && v.attempts[0] == 1;
}

Test(shutdown_wait, a_step_waiting_for_its_retry_does_not_hold_the_shutdown, .fini = teardown) {
    const char *set[] = {"qilin.shutdown.grace-ms=20s", NULL};
    setup_with("templates:\n"
               "  INC_BUILD:\n"
               "    steps:\n"
               "      - name: fails once\n"
               "        kind: shell\n"
               "        argv: [/bin/sh, -c, 'test -f marker || { touch marker; exit 1; }']\n"
               "        cwd: @DIR@\n"
               "        retries: 1\n"
               "        retry_interval: 30s\n",
               set);
    ql_id_t job = submit();
    retry_wait_t c = {job};
    cr_assert(ql_test_drive_until(&w.loop, cond_waiting_for_retry, &c, DEADLINE_MS),
              "the first try did not fail into its retry wait");
    int64_t took = stop(DEADLINE_MS);
    cr_assert_lt(took, 5000, "the shutdown waited for the retry (took %lld ms)", (long long)took);
    seen_t v = look_stopped(&job, 1);
    cr_assert_eq(v.job, QL_READY, "the job is %s", ql_state_name(v.job));
    cr_assert_eq(v.step[0], QL_READY);
    cr_assert_eq(v.attempts[0], 1, "the failed try counts, no other");

    /* After the restart the retry runs (and succeeds: the marker exists). */
    start();
    job_is_t done = {job, QL_SUCCEED};
    cr_assert(ql_test_drive_until(&w.loop, cond_job_is, &done, DEADLINE_MS));
    v = look_in(ql_node_store(w.node), &job, 1);
    cr_assert_eq(v.attempts[0], 2);
}

/* The first try starts slow_exit (tests/engine/slow_exit.c) outside its group, with setsid: it
 * carries the try's marker, holds "lock" and needs 5 to 15 ms to free its 256 MiB once killed;
 * later tries print "again" and succeed. */
static const char LEAVER_STEP[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: leaver\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'if [ -f marker ]; then echo again; exit 0; fi; touch marker; "
    "setsid " QL_BUILD_DIR "/tests/engine_slow_exit lock " QL_TEST_SLOW_EXIT_MIB " ready & "
    "sleep 30']\n"
    "        cwd: @DIR@\n";

/* A shutdown stops the step's group and then sweeps its marker, which kills slow_exit. With a
 * wait of 1 ms that process is still exiting when the sweep gives up: the shutdown must not write
 * the job READY (its next try could start beside a process holding the step's lock), so it
 * leaves it RUNNING with its marker, and the next start's recovery sweeps again and runs it. A
 * case starved of the CPU for all of slow_exit's teardown tries again. */
Test(shutdown_wait, a_stopped_step_whose_sweep_cannot_finish_is_left_running_for_the_next_start,
     .fini = teardown) {
    const char *set[] = {"qilin.shutdown.grace-ms=200ms", NULL};
    bool caught = false;
    for (int attempt = 0; attempt < 5 && !caught; attempt++) {
        setup_with_drain(LEAVER_STEP, set, 1);
        ql_id_t job = submit();
        int pgid = wait_pgid(&job);
        /* 30 s: touching 256 MiB under the sanitizers on a loaded machine (slow_exit_util.c) */
        cr_assert(ql_test_drive_until(&w.loop, cond_file, "ready", 30000),
                  "slow_exit never became ready");
        cr_assert_not(ql_test_slow_exit_lock_free(w.dir), "slow_exit holds its lock");
        stop(5000);
        cr_assert(ql_test_group_gone(pgid), "the step's own group was stopped");
        if (!logged("job left RUNNING step=00")) { /* swept in time: then the lock is free */
            cr_assert(ql_test_slow_exit_lock_free(w.dir), "the shutdown swept too early");
            teardown();
            continue;
        }
        caught = true;
        cr_assert(logged("the stopped step's processes may still run (resource busy"),
                  "the reason is logged");
        seen_t v = look_stopped(&job, 1);
        cr_assert_eq(v.job, QL_RUNNING, "the shutdown left the job %s", ql_state_name(v.job));
        cr_assert_eq(v.step[0], QL_RUNNING);

        int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
        while (!ql_test_slow_exit_lock_free(w.dir))
            cr_assert_lt(ql_test_mono_ms(), deadline, "slow_exit never let go of its lock");
        w.n_lines = 0;
        w.drain_ms = 0;
        start();
        job_is_t c = {job, QL_SUCCEED};
        cr_assert(ql_test_drive_until(&w.loop, cond_job_is, &c, DEADLINE_MS),
                  "the job did not run to SUCCEED after the restart");
        cr_assert(logged("recovered interrupted jobs count=1"));
        v = look_in(ql_node_store(w.node), &job, 1);
        cr_assert_eq(v.attempts[0], 2, "the stopped try and the one after the restart");
        cr_assert_str_eq(v.out[0], "again\n");
    }
    cr_assert(caught, "slow_exit was gone before every sweep's wait ended");
}
