/*
 * Paused servers (docs/user-guide.md, Several servers): a process stopped (SIGSTOP, a
 * debugger) while it holds something every server needs is removed within a documented bound.
 *
 * - The writer guard: a process stopped inside a write transaction of the store
 *   (tests/storage/guard_holder.c, standing in for a standby caught writing) does not stall the
 *   master's writes for longer than qilin.storage.writer-stall-ms: the master's build is
 *   acknowledged within the bound plus slack, and runs.
 * - The master's lease: a master (tests/scheduler/node_driver.c, in a process of its own)
 *   stopped for less than qilin.server.master-lease-ms is left alone; stopped for longer, the
 *   standby (a node in this process) kills it, takes the lock (raising the fencing epoch) and
 *   runs its interrupted job.
 *
 * Both use the default bounds (2000 and 5000 ms). Waits are conditions with deadlines on the
 * loop; the deadlines are the bounds plus slack, never a measurement of the normal path.
 */
#include "server/ql_node.h"
#include "tests/common/tmp_util.h"

#include "tests/common/driver_proc.h"
#include "tests/common/holder_proc.h"
#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#define DRIVER QL_BUILD_DIR "/tests/node_driver"
#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000
#define STALL_MS 2000 /* qilin.storage.writer-stall-ms's default */
#define LEASE_MS 5000 /* qilin.server.master-lease-ms's default */
#define POLL_MS 1000  /* a standby tries the lock every second */
#define SLACK_MS 3000
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

static struct {
    char dir[64];
    char data[128];
    char templates[128];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_log_t log;
    char log_lines[96][640];
    int n_log_lines;
    ql_config_t *cfg;
    ql_node_t *b;
    ql_test_driver_t a; /* server A: node_driver in its own process */
    ql_test_holder_t holder;
} w;

/* B's log lines, kept to check what B decided. */
static void log_sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    (void)level;
    if (w.n_log_lines < 96)
        snprintf(w.log_lines[w.n_log_lines++], sizeof w.log_lines[0], "%s", line);
}

static int count_log(const char *a, const char *b) {
    int n = 0;
    for (int i = 0; i < w.n_log_lines; i++)
        n += strstr(w.log_lines[i], a) && (!b || strstr(w.log_lines[i], b));
    return n;
}

static void start_b(void) {
    static const char *const settings[] = {"qilin.step.kill-grace-ms=300", NULL};
    w.cfg = ql_test_node_config(w.data, w.templates, settings);
    ql_err_t err = {0};
    ql_log_init(&w.log, QL_LOG_INFO);
    w.log.sink = log_sink;
    ql_node_opts_t no = {.config = w.cfg, .loop = &w.loop, .log = &w.log, .exec_helper = HELPER};
    cr_assert_eq(ql_node_start(&no, &w.b, &err), 0, "%s", err.msg);
}

static void start_a(void) {
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/a.err", w.dir); /* A's log */
    ql_test_driver_start_node(&w.a, &w.loop, DRIVER, w.data, w.templates, err_path, DEADLINE_MS);
}

static bool cond_model_exists(const void *arg) {
    return ql_test_node_find_model(w.b, "p", arg, NULL);
}

static void init_dirs(void) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_pause");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    snprintf(w.templates, sizeof w.templates, "%s/jobs.yaml", w.dir);
    ql_test_write_with_dir(w.templates, ql_test_ppid_templates, w.dir);
    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    uv_timer_start(&w.tick, ql_test_tick_cb, 5, 5);
}

/* B alone: the master. */
static void setup_b(void) {
    init_dirs();
    start_b();
    cr_assert(ql_node_is_master(w.b));
}

/* A the master (it creates project p and model m), B a standby. */
static void setup_ab(void) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    init_dirs();
    start_a();
    start_b();
    cr_assert(ql_test_drive_until(&w.loop, cond_model_exists, "m", DEADLINE_MS));
}

static void teardown(void) {
    /* The stopped processes first: B's writes or its stop may wait behind them. */
    ql_test_holder_reap(&w.holder);
    ql_test_driver_reap(&w.a, false, DEADLINE_MS);
    if (w.b)
        ql_test_node_stop(&w.loop, w.b, DEADLINE_MS);
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_config_free(w.cfg);
    ql_test_rm_tree(w.dir);
}

/* ---- jobs ---- */

static ql_id_t create_model(const char *name, const char *template_set) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(w.b), true, &t), 0);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p");
    ql_err_t err = {0};
    int rc = ql_meta_create_project(t, &p, BASE, &err);
    cr_assert(rc == 0 || rc == QL_EEXIST, "%s", err.msg);
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m.project, sizeof m.project, "p");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "dt");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    snprintf(m.job_template, sizeof m.job_template, "%s", template_set);
    cr_assert_eq(ql_meta_create_model(t, &m, BASE, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    return m.id;
}

static bool cond_succeed(const void *arg) {
    ql_job_t j = ql_test_node_job(w.b, arg);
    bool ok = j.state == QL_SUCCEED;
    ql_job_free(&j);
    return ok;
}

static bool cond_marker(const void *arg) {
    (void)arg;
    char p[128];
    snprintf(p, sizeof p, "%s/marker", w.dir);
    return access(p, F_OK) == 0;
}

static bool cond_b_master(const void *arg) {
    (void)arg;
    return ql_node_is_master(w.b);
}

static bool cond_a_exited(const void *arg) {
    (void)arg;
    return w.a.exited;
}

static bool cond_holder_exited(const void *arg) {
    (void)arg;
    return ql_test_holder_exited(&w.holder);
}

/* ---- tests ---- */

Test(pause, a_stopped_writer_stalls_the_masters_build_for_the_bound_only, .init = setup_b,
     .fini = teardown) {
    ql_id_t model = create_model("m", "");
    ql_test_holder_start(&w.holder, QL_TEST_GUARD_HOLDER, w.data, -1, DEADLINE_MS);
    ql_test_holder_sigstop(&w.holder, DEADLINE_MS);

    /* The submission is a write of the master's: acknowledged once the stopped holder is gone
     * (asserted by ql_test_node_build within the deadline). */
    ql_id_t job =
        ql_test_node_build(&w.loop, w.b, &model, BASE, BASE + DAY, BASE, STALL_MS + SLACK_MS);
    cr_assert(ql_test_drive_until(&w.loop, cond_succeed, &job, DEADLINE_MS),
              "the master did not run the build");
    ql_test_node_assert_ran_on(w.b, &job, (long)getpid());

    cr_assert(ql_test_drive_until(&w.loop, cond_holder_exited, NULL, SLACK_MS));
    cr_assert(WIFSIGNALED(w.holder.status) && WTERMSIG(w.holder.status) == SIGKILL,
              "the stopped writer was not killed (status %#x)", w.holder.status);
    char who[48];
    snprintf(who, sizeof who, "killed pid=%ld ", (long)w.holder.pid);
    cr_assert_eq(count_log(who, "holder of the writer guard"), 1,
                 "the master logs once whom it killed and why");
}

Test(pause, a_stopped_master_is_replaced_within_the_lease, .init = setup_ab, .fini = teardown) {
    long a_pid = (long)w.a.proc.pid;
    uint64_t a_epoch = ql_test_node_epoch(w.b);
    ql_id_t model = create_model("marker_m", "marker");
    ql_id_t job = ql_test_node_build(&w.loop, w.b, &model, BASE, BASE + DAY, BASE, DEADLINE_MS);
    int pgid = ql_test_node_wait_pgid(&w.loop, w.b, &job, 0, DEADLINE_MS);
    cr_assert_gt(pgid, 0, "A never started the step");
    cr_assert(ql_test_drive_until(&w.loop, cond_marker, NULL, DEADLINE_MS));

    /* Stopped for less than the lease: left alone, still the master afterwards. */
    cr_assert_eq(kill((pid_t)a_pid, SIGSTOP), 0);
    ql_test_drive_for(&w.loop, LEASE_MS / 2);
    cr_assert_eq(kill((pid_t)a_pid, SIGCONT), 0);
    ql_test_drive_for(&w.loop, 2 * POLL_MS + 500);
    cr_assert_not(w.a.exited, "A was killed although it renewed its lease in time");
    cr_assert_not(ql_node_is_master(w.b));
    cr_assert_eq(ql_test_node_epoch(w.b), a_epoch, "nobody took the lock");

    /* Stopped for good: B kills it within the lease plus a poll, and takes over. */
    cr_assert_eq(kill((pid_t)a_pid, SIGSTOP), 0);
    cr_assert(ql_test_drive_until(&w.loop, cond_b_master, NULL, LEASE_MS + POLL_MS + SLACK_MS),
              "B did not replace the stopped master within %d ms", LEASE_MS + POLL_MS + SLACK_MS);
    cr_assert(ql_test_drive_until(&w.loop, cond_a_exited, NULL, SLACK_MS), "A is still alive");
    cr_assert_eq(w.a.term_signal, SIGKILL, "A ended by signal %d", w.a.term_signal);
    errno = 0;
    cr_assert(kill((pid_t)a_pid, SIGCONT) != 0 && errno == ESRCH,
              "A can be continued: it is not dead");
    char who[64];
    snprintf(who, sizeof who, "standby: killed the master pid=%ld ", a_pid);
    cr_assert_eq(count_log(who, "state=T"), 1, "B logs once whom it killed and why");
    cr_assert_eq(ql_test_node_epoch(w.b), a_epoch + 1,
                 "B's holding raised the epoch: A's writes are fenced");

    /* B recovers A's interrupted job and runs it. */
    cr_assert(ql_test_drive_until(&w.loop, cond_succeed, &job, DEADLINE_MS),
              "B did not finish the job");
    ql_test_node_assert_ran_on(w.b, &job, (long)getpid());
    ql_job_t j = ql_test_node_job(w.b, &job);
    cr_assert_eq(j.fence, a_epoch + 1, "the job's last moves were B's");
    ql_job_free(&j);
    cr_assert(ql_test_drive_until(&w.loop, ql_test_cond_group_gone, &pgid, DEADLINE_MS),
              "the process group %d of A's try survives", pgid);
}

/* A new master may wait up to the stall bound for a write while it takes the lock, without
 * renewing its lease: a lease no longer than that bound is refused at start, naming both. */
Test(pause, a_lease_not_longer_than_the_stall_bound_is_refused) {
    init_dirs();
    static const char *const settings[] = {"qilin.server.master-lease-ms=2000",
                                           "qilin.storage.writer-stall-ms=2000", NULL};
    w.cfg = ql_test_node_config(w.data, w.templates, settings);
    ql_node_opts_t no = {.config = w.cfg, .loop = &w.loop, .exec_helper = HELPER};
    ql_err_t err = {0};
    ql_node_t *n = NULL;
    int rc = ql_node_start(&no, &n, &err);
    cr_assert_eq(rc, QL_EINVAL, "the start was not refused (%d)", rc);
    cr_assert_null(n);
    cr_assert(strstr(err.msg, "qilin.server.master-lease-ms: 2000 ms must be longer than "
                              "qilin.storage.writer-stall-ms (2000 ms)"),
              "%s", err.msg);
    char lock[160];
    snprintf(lock, sizeof lock, "%s/job_engine.lock", w.data);
    cr_assert_neq(access(lock, F_OK), 0, "the refused server took the lock");
    teardown();
}
