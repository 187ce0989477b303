/*
 * The job engine lock (docs/design/cluster.md, DefaultScheduler; docs/design/jobs.md, Job lock):
 * two job servers on one data directory. Server A is a node in a process of its own
 * (tests/scheduler/node_driver.c, spawned on this test's loop); server B is a node in this
 * process. LMDB must not be opened twice by one process, which is why A is a separate process.
 *
 * B starts while A holds the lock: it does not schedule, it says who holds the lock (A's pid),
 * and a job submitted through B is run by A (the step prints its parent's pid: A's). When A
 * stops (gracefully, or killed) the kernel releases its flock and B takes over within its
 * standby poll (1 s): it runs recovery first, then the READY jobs.
 *
 * On PostgreSQL (scheduler_test_lock@pg) the nodes pick the store's advisory lock instead of the
 * lock file, and the same cases hold: a dead process's session ends, which frees its lock.
 *
 * Waits are conditions with deadlines on the loop (UV_RUN_ONCE with a 5 ms tick).
 */
#include "scheduler/ql_submit.h"
#include "server/ql_node.h"

#include "tests/common/driver_proc.h"
#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#define DRIVER QL_BUILD_DIR "/tests/node_driver"
#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

static struct {
    char dir[64];
    char data[128];
    char templates[128];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_log_t log;
    char log_lines[64][512];
    int n_log_lines;
    ql_config_t *cfg;
    ql_node_t *b;
    ql_test_driver_t a; /* server A: node_driver in its own process */
    ql_id_t model, marker_model;
} w;

/* B's log lines, kept to check what B did and in which order. */
static void log_sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    (void)level;
    if (w.n_log_lines < 64)
        snprintf(w.log_lines[w.n_log_lines++], sizeof w.log_lines[0], "%s", line);
}

static int log_index(const char *needle) {
    for (int i = 0; i < w.n_log_lines; i++)
        if (strstr(w.log_lines[i], needle))
            return i;
    return -1;
}

/* ---- server A ---- */

static void start_a(void) {
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/a.err", w.dir); /* A's log */
    ql_test_driver_start_node(&w.a, &w.loop, DRIVER, w.data, w.templates, err_path, DEADLINE_MS);
}

static void stop_a(int sig) {
    ql_test_driver_stop(&w.a, sig, DEADLINE_MS);
}

/* ---- server B ---- */

static void start_b(void) {
    static const char *const settings[] = {"qilin.step.kill-grace-ms=300", NULL};
    w.cfg = ql_test_node_config(w.data, w.templates, settings);
    ql_err_t err = {0};
    ql_log_init(&w.log, QL_LOG_INFO);
    w.log.sink = log_sink;
    ql_node_opts_t no = {.config = w.cfg, .loop = &w.loop, .log = &w.log, .exec_helper = HELPER};
    cr_assert_eq(ql_node_start(&no, &w.b, &err), 0, "%s", err.msg);
}

static ql_id_t find_model(const char *name) {
    ql_id_t id;
    cr_assert(ql_test_node_find_model(w.b, "p", name, &id), "no model p/%s", name);
    return id;
}

static void create_marker_model(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(w.b), true, &t), 0);
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "marker_m");
    snprintf(m.project, sizeof m.project, "p");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "dt");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    snprintf(m.job_template, sizeof m.job_template, "marker");
    ql_err_t err = {0};
    cr_assert_eq(ql_meta_create_model(t, &m, BASE, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    w.marker_model = m.id;
}

static bool cond_model_exists(const void *arg) {
    return ql_test_node_find_model(w.b, "p", arg, NULL);
}

static void setup(void) {
    memset(&w, 0, sizeof w);
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_lock");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    snprintf(w.templates, sizeof w.templates, "%s/jobs.yaml", w.dir);
    ql_test_write_with_dir(w.templates, ql_test_ppid_templates, w.dir);
    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    uv_timer_start(&w.tick, ql_test_tick_cb, 5, 5);

    start_a();
    start_b();
    /* A creates project p and model m as soon as it runs. */
    cr_assert(ql_test_drive_until(&w.loop, cond_model_exists, "m", DEADLINE_MS));
    w.model = find_model("m");
}

static void teardown(void) {
    if (w.b)
        ql_test_node_stop(&w.loop, w.b, DEADLINE_MS);
    ql_test_driver_reap(&w.a, false, DEADLINE_MS);
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_config_free(w.cfg);
    ql_test_rm_tree(w.dir);
}

/* ---- jobs ---- */

/* Submits a build through B (any server may take submissions) and waits for the answer. */
static ql_id_t submit_b(const ql_id_t *model, int day) {
    return ql_test_node_build(&w.loop, w.b, model, BASE + day * DAY, BASE + (day + 1) * DAY,
                              BASE + day, DEADLINE_MS);
}

static bool cond_succeed(const void *arg) {
    ql_job_t j = ql_test_node_job(w.b, arg);
    bool ok = j.state == QL_SUCCEED;
    ql_job_free(&j);
    return ok;
}

static bool cond_b_master(const void *arg) {
    (void)arg;
    return ql_node_is_master(w.b);
}

static bool cond_marker(const void *arg) {
    (void)arg;
    char p[128];
    snprintf(p, sizeof p, "%s/marker", w.dir);
    return access(p, F_OK) == 0;
}

/* ---- tests ---- */

Test(job_lock, the_second_server_stands_by_and_takes_over_when_the_first_stops, .init = setup,
     .fini = teardown) {
    long a_pid = (long)w.a.proc.pid;
    cr_assert_not(ql_node_is_master(w.b), "B must not schedule while A holds the lock");
    cr_assert_null(ql_node_sched(w.b));
    cr_assert_null(ql_node_dispatcher(w.b));
    char want[64];
    snprintf(want, sizeof want, "pid %ld ", a_pid);
    cr_assert_not_null(strstr(ql_node_lock_holder(w.b), want), "holder '%s' should name %s",
                       ql_node_lock_holder(w.b), want);
    cr_assert_geq(log_index("standby: the job engine lock is held by pid"), 0,
                  "B logs who holds the lock");
    uint64_t a_epoch = ql_test_node_epoch(w.b);

    /* A job submitted through B is run by A (its poll finds it: B cannot kick A). */
    ql_id_t j1 = submit_b(&w.model, 0);
    cr_assert(ql_test_drive_until(&w.loop, cond_succeed, &j1, DEADLINE_MS),
              "A did not run the job");
    ql_test_node_assert_ran_on(w.b, &j1, a_pid);
    ql_job_t j = ql_test_node_job(w.b, &j1);
    cr_assert_eq(j.fence, a_epoch, "A moved it under its fencing epoch");
    ql_job_free(&j);
    ql_test_drive_for(&w.loop, 1200); /* a standby poll or more: B still stands by */
    cr_assert_not(ql_node_is_master(w.b));

    /* A stops gracefully; a job submitted meanwhile waits READY for the next master. */
    stop_a(SIGTERM);
    cr_assert(w.a.exited && w.a.exit_status == 0 && w.a.term_signal == 0,
              "A did not stop cleanly (status %lld, signal %d)", (long long)w.a.exit_status,
              w.a.term_signal);
    int64_t t0 = ql_test_mono_ms();
    ql_id_t j2 = submit_b(&w.model, 1);
    cr_assert(ql_test_drive_until(&w.loop, cond_b_master, NULL, 3000),
              "B did not take over within 3 s");
    int64_t took = ql_test_mono_ms() - t0;
    cr_assert_lt(took, 2500, "takeover took %lld ms", (long long)took);
    cr_assert_not_null(ql_node_sched(w.b));
    cr_assert_str_eq(ql_node_lock_holder(w.b), "");
    cr_assert(ql_test_drive_until(&w.loop, cond_succeed, &j2, DEADLINE_MS),
              "B did not run the READY job");
    ql_test_node_assert_ran_on(w.b, &j2, (long)getpid());
    j = ql_test_node_job(w.b, &j2);
    cr_assert_eq(j.fence, a_epoch + 1, "a new holding raises the fencing epoch");
    ql_job_free(&j);
}

Test(job_lock, a_killed_master_is_replaced_and_its_job_recovered, .init = setup, .fini = teardown) {
    long a_pid = (long)w.a.proc.pid;
    create_marker_model();
    ql_id_t job = submit_b(&w.marker_model, 0);
    int pgid = ql_test_node_wait_pgid(&w.loop, w.b, &job, 0, DEADLINE_MS);
    cr_assert_gt(pgid, 0, "A never started the step");
    cr_assert(ql_test_drive_until(&w.loop, cond_marker, NULL, DEADLINE_MS),
              "the step never touched its marker");
    cr_assert_not(ql_node_is_master(w.b));

    /* A dies with its job RUNNING: the kernel releases the lock, B takes over. */
    stop_a(SIGKILL);
    cr_assert_eq(w.a.term_signal, SIGKILL);
    cr_assert(ql_test_drive_until(&w.loop, cond_b_master, NULL, 3000),
              "B did not take over within 3 s");
    cr_assert(ql_test_drive_until(&w.loop, cond_succeed, &job, DEADLINE_MS),
              "B did not finish the job");
    ql_test_node_assert_ran_on(w.b, &job, (long)getpid());
    ql_step_t s = ql_test_node_step(w.b, &job, 0);
    cr_assert_eq(s.attempts, 2, "the interrupted try and B's");
    ql_step_free(&s);
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "the process group %d of A's try survives", pgid);

    /* Recovery ran before B scheduled anything. */
    int rec = log_index("recovered interrupted jobs count=1");
    int killed = log_index("killed the process group of an interrupted step");
    int sched = log_index("scheduling: holding the job engine lock");
    int picked = log_index("READY -> PENDING -> RUNNING");
    cr_assert_geq(rec, 0, "B logged its recovery");
    cr_assert_geq(killed, 0, "B killed what was left of A's step");
    cr_assert_geq(picked, 0);
    cr_assert_lt(rec, picked, "recovery comes before the first pick");
    cr_assert_lt(rec, sched);
    (void)a_pid;
}

/* Whether A's log (its stderr file) holds the text arg. */
static bool cond_a_logged(const void *arg) {
    char path[160];
    snprintf(path, sizeof path, "%s/a.err", w.dir);
    const char *needles[] = {arg, NULL};
    return ql_test_file_has_line(path, needles);
}

/* How A loses its holding while it lives. LMDB: flock(2) holds the open file, not its path, so
 * when <data>/job_engine.lock is removed B opens (creates) a new file there and locks it.
 * PostgreSQL: A's lock session is ended (as an administrator's pg_terminate_backend, or a
 * standby ending a stale master's, would), which frees the advisory lock for B. */
static void take_the_lock_from_a(void) {
    if (!strcmp(ql_test_store_backend(), "pg")) {
        int backend = ql_test_pg_lock_backend(w.data);
        cr_assert_gt(backend, 0, "nobody holds the PostgreSQL lock");
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d, 5000)", backend);
        ql_test_pg_sql(sql, NULL, 0);
        return;
    }
    char lock_path[160];
    snprintf(lock_path, sizeof lock_path, "%s/job_engine.lock", w.data);
    cr_assert_eq(unlink(lock_path), 0);
}

/* A's holding ends while A lives (take_the_lock_from_a): B takes the lock and raises the fencing
 * epoch. A must notice (its lock check, within a second), stop scheduling, and have its step
 * stopped; B recovers the job and runs it. A stays up as a standby. (docs/design/cluster.md,
 * Fencing: a stale holder's writes are refused, and no two servers run the same job at once.) */
Test(job_lock, a_master_that_loses_its_lock_steps_down, .init = setup, .fini = teardown) {
    create_marker_model();
    uint64_t a_epoch = ql_test_node_epoch(w.b);
    ql_id_t job = submit_b(&w.marker_model, 0);
    int pgid = ql_test_node_wait_pgid(&w.loop, w.b, &job, 0, DEADLINE_MS);
    cr_assert_gt(pgid, 0, "A never started the step");
    cr_assert(ql_test_drive_until(&w.loop, cond_marker, NULL, DEADLINE_MS));

    take_the_lock_from_a();
    cr_assert(ql_test_drive_until(&w.loop, cond_b_master, NULL, 3000),
              "B did not take the lock within 3 s");
    cr_assert_eq(ql_test_node_epoch(w.b), a_epoch + 1, "B's holding raised the epoch");
    cr_assert(ql_test_drive_until(&w.loop, cond_a_logged, "lost the job engine lock", 3000),
              "A did not step down");
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "A's step (process group %d) still runs", pgid);
    cr_assert(ql_test_drive_until(&w.loop, cond_succeed, &job, DEADLINE_MS),
              "B did not finish the job");
    ql_test_node_assert_ran_on(w.b, &job, (long)getpid());
    ql_job_t j = ql_test_node_job(w.b, &job);
    cr_assert_eq(j.fence, a_epoch + 1, "the job's last moves were B's");
    ql_job_free(&j);
    cr_assert(ql_test_drive_until(&w.loop, cond_a_logged, "standby: the job engine lock is held by",
                                  3000),
              "A went back to standby");
    cr_assert_not(w.a.exited, "A stays up");

    /* And it settles: B keeps the lock over several polls of both servers. */
    if (strcmp(ql_test_store_backend(), "pg") != 0) {
        char lock_path[160];
        struct stat st;
        snprintf(lock_path, sizeof lock_path, "%s/job_engine.lock", w.data);
        cr_assert_eq(stat(lock_path, &st), 0, "the lock file exists again");
    }
    ql_test_drive_for(&w.loop, 3500);
    cr_assert(ql_node_is_master(w.b), "B is still the master");
    cr_assert_eq(ql_test_node_epoch(w.b), a_epoch + 1, "nobody took the lock since");
}

/* ---- what a server cannot coordinate is refused at start-up, naming the setting ---- */

static void expect_start_refused2(const char *setting, const char *setting2, const char *needle) {
    char dir[256];
    ql_test_tmpdir(dir, sizeof dir, "ql_lock_refuse");
    char templates[300], data[300];
    snprintf(templates, sizeof templates, "%s/jobs.yaml", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    ql_test_write_with_dir(templates, ql_test_ppid_templates, dir);
    const char *const settings[] = {setting, setting2, NULL};
    ql_config_t *cfg = ql_test_node_config(data, templates, settings);
    ql_err_t err = {0};
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ql_node_opts_t no = {.config = cfg, .loop = &loop, .exec_helper = HELPER};
    ql_node_t *n = NULL;
    int rc = ql_node_start(&no, &n, &err);
    cr_assert_eq(rc, QL_EINVAL, "the start was not refused (%d)", rc);
    cr_assert_null(n);
    cr_assert(strstr(err.msg, needle), "%s", err.msg);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    ql_config_free(cfg);
    ql_test_rm_tree(dir);
}

static void expect_start_refused(const char *setting, const char *needle) {
    expect_start_refused2(setting, NULL, needle);
}

Test(job_lock, scheduler_2_without_zookeeper_is_refused_at_start_up) {
    expect_start_refused("kylin.job.scheduler.default=2",
                         "kylin.job.scheduler.default: 2 (distributed job servers, a lock per "
                         "job) needs ZooKeeper: set kylin.env.zookeeper-connect-string");
}

Test(job_lock, scheduler_100_without_zookeeper_is_refused_at_start_up) {
    expect_start_refused("kylin.job.scheduler.default=100",
                         "kylin.job.scheduler.default: 100 (leader election) needs ZooKeeper: "
                         "set kylin.env.zookeeper-connect-string");
}

/* Refused before any ZooKeeper is reached: nothing listens at the connect string. */
Test(job_lock, a_suspend_kill_past_the_session_timeout_is_refused_at_start_up) {
    expect_start_refused2("kylin.env.zookeeper-connect-string=127.0.0.1:9",
                          "qilin.cluster.suspend-kill-ms=10000",
                          "qilin.cluster.suspend-kill-ms: 10000 ms must be shorter than "
                          "qilin.cluster.session-timeout-ms (10000 ms)");
}
