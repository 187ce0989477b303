/*
 * Tests of engine/proc.c and tools/qilin-exec.c with real processes on a real uv loop.
 *
 * Every wait is a condition with a deadline: the loop is driven (a 5 ms tick keeps it waking
 * up to re-check conditions that are not loop events, such as a log file's content) until the
 * condition holds or the deadline passes, and the test then asserts the condition.
 *
 * Tests whose steps leave orphans (a shell's children after the shell died) make the test
 * process a child subreaper, so that the orphans become its children: it can then reap them
 * and assert which signal ended them, whatever PID 1 of the machine does with zombies.
 */
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "base/ql_procinfo.h"
#include "engine/ql_proc.h"

#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000
/* libuv timers run on CLOCK_MONOTONIC_COARSE, which lags uv_hrtime() by up to a tick. */
#define CLOCK_SLACK_MS 10

typedef struct run {
    uv_loop_t loop;
    uv_timer_t tick;
    ql_proc_t *proc;
    int exits;
    int closes;
    ql_proc_result_t result;    /* copy of the callback's result; output owned by the test */
    bool group_running_at_exit; /* a process of the group still ran code at the callback */
    char dir[64];               /* a fresh temporary directory */
} run_t;

/* ---- helpers ---- */

static int64_t now_ms(void) {
    return (int64_t)(uv_hrtime() / 1000000);
}

static void pause_briefly(void) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

static void tick_cb(uv_timer_t *t) {
    (void)t;
}

static void run_init(run_t *run) {
    memset(run, 0, sizeof *run);
    cr_assert_eq(uv_loop_init(&run->loop), 0);
    uv_timer_init(&run->loop, &run->tick);
    uv_timer_start(&run->tick, tick_cb, 5, 5);
    ql_test_tmpdir(run->dir, sizeof run->dir, "ql_proc");
    cr_assert_eq(access(HELPER, X_OK), 0, "the exec helper %s is not built", HELPER);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void on_close(void *arg) {
    ((run_t *)arg)->closes++;
}

/* Closes what is open, runs the loop until every handle is gone and removes the directory. */
static void run_fini(run_t *run) {
    if (run->proc != NULL)
        ql_proc_close(run->proc, on_close);
    uv_close((uv_handle_t *)&run->tick, NULL);
    uv_run(&run->loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&run->loop), 0, "a handle was left open");
    if (run->proc != NULL)
        cr_assert_eq(run->closes, 1);
    free(run->result.output);
    nftw(run->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void on_exit_cb(ql_proc_t *proc, ql_proc_result_t *result, void *arg) {
    run_t *run = arg;
    cr_assert_eq(proc, run->proc);
    run->exits++;
    run->result = *result;
    run->group_running_at_exit = ql_proc_group_running(ql_proc_pgid(proc));
    /* Take the output, as the job runner does to hand it to the store without a copy. */
    result->output = NULL;
}

typedef bool (*cond_fn)(run_t *run, const void *arg);

static bool drive_until(run_t *run, cond_fn cond, const void *arg, int64_t ms) {
    int64_t end = now_ms() + ms;
    while (!cond(run, arg)) {
        if (now_ms() >= end)
            return false;
        uv_run(&run->loop, UV_RUN_ONCE);
    }
    return true;
}

static bool has_exited(run_t *run, const void *arg) {
    (void)arg;
    return run->exits > 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static bool log_contains(run_t *run, const void *arg) {
    const char *const *what = arg; /* {path, needle} */
    (void)run;
    char *s = slurp(what[0], NULL);
    bool found = s != NULL && strstr(s, what[1]) != NULL;
    free(s);
    return found;
}

static void spec_for(run_t *run, ql_proc_spec_t *spec, const char *const *argv) {
    ql_proc_spec_init(spec);
    spec->argv = argv;
    spec->exec_helper = HELPER;
    (void)run;
}

static void start(run_t *run, const ql_proc_spec_t *spec) {
    ql_err_t err = {0};
    int rc = ql_proc_spawn(&run->loop, spec, on_exit_cb, run, &run->proc, &err);
    cr_assert_eq(rc, 0, "spawn failed: %s", err.msg);
    cr_assert_gt(ql_proc_pid(run->proc), 0);
    cr_assert_eq(ql_proc_pgid(run->proc), ql_proc_pid(run->proc));
}

static void wait_exit(run_t *run) {
    cr_assert(drive_until(run, has_exited, NULL, DEADLINE_MS), "the step did not complete");
    cr_assert_eq(run->exits, 1);
}

/* Runs argv to completion with the defaults. */
static void run_argv(run_t *run, const char *const *argv) {
    ql_proc_spec_t spec;
    spec_for(run, &spec, argv);
    start(run, &spec);
    wait_exit(run);
}

static ql_proc_verdict_t classify(const ql_proc_result_t *r, int warning) {
    ql_proc_verdict_t v;
    cr_assert_eq(ql_proc_classify(r, warning, &v), 0);
    return v;
}

static void become_subreaper(void) {
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

/*
 * Reaps orphans (the test is their subreaper) until no process of group pgid is left or the
 * deadline passes. Stores the signal that ended each reaped orphan (0 if it exited) in sigs.
 * Only call it when no proc is running: it reaps any child.
 */
static bool reap_group(pid_t pgid, int *sigs, int max, int *n) {
    int64_t end = now_ms() + DEADLINE_MS;
    *n = 0;
    for (;;) {
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (*n < max)
                sigs[(*n)++] = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        if (kill(-pgid, 0) != 0 && errno == ESRCH)
            return true;
        if (now_ms() >= end)
            return false;
        pause_briefly();
    }
}

/* Waits (with the deadline) for the child pid to end; returns its wait status or -1. */
static int wait_child(pid_t pid) {
    int64_t end = now_ms() + DEADLINE_MS;
    for (;;) {
        int st;
        pid_t p = waitpid(pid, &st, WNOHANG);
        if (p == pid)
            return st;
        if (p < 0 || now_ms() >= end)
            return -1;
        pause_briefly();
    }
}

/* ---- exit codes and outcomes ---- */

Test(proc, true_succeeds) {
    run_t run;
    run_init(&run);
    const char *argv[] = {"true", NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 0);
    cr_assert_eq(run.result.term_signal, 0);
    cr_assert_eq(run.result.exec_errno, 0);
    cr_assert_not(run.result.timed_out);
    cr_assert_eq(run.result.stop_reason, QL_PROC_STOP_NONE);
    cr_assert_not_null(run.result.output);
    cr_assert_eq(run.result.output_len, 0);
    cr_assert_eq(run.result.truncated, 0);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_eq(v.outcome, QL_PROC_SUCCEED);
    cr_assert_str_empty(v.msg);
    cr_assert_eq(ql_proc_stop(run.proc, QL_PROC_STOP_PAUSE), UV_ESRCH);
    run_fini(&run);
}

Test(proc, false_is_error) {
    run_t run;
    run_init(&run);
    const char *argv[] = {"false", NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 1);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_eq(v.outcome, QL_PROC_ERROR);
    cr_assert_str_eq(v.msg, "exit code 1");
    run_fini(&run);
}

Test(proc, warning_exit_code) {
    run_t run;
    run_init(&run);
    const char *argv[] = {"sh", "-c", "exit 3", NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 3);
    ql_proc_verdict_t v = classify(&run.result, 3);
    cr_assert_eq(v.outcome, QL_PROC_WARNING);
    cr_assert_str_eq(v.msg, "exit code 3 (warning)");
    v = classify(&run.result, -1);
    cr_assert_eq(v.outcome, QL_PROC_ERROR);
    cr_assert_str_eq(v.msg, "exit code 3");
    v = classify(&run.result, 4);
    cr_assert_eq(v.outcome, QL_PROC_ERROR);
    run_fini(&run);
}

Test(proc, classify_precedence) {
    ql_proc_result_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.file, sizeof r.file, "foo");
    ql_proc_verdict_t v = classify(&r, 0);
    cr_assert_eq(v.outcome, QL_PROC_SUCCEED, "exit 0 succeeds even if 0 is the warning code");

    r.term_signal = SIGKILL;
    v = classify(&r, -1);
    cr_assert_str_eq(v.msg, "killed by signal 9 (SIGKILL)");

    r.stop_reason = QL_PROC_STOP_RESTART;
    v = classify(&r, -1);
    cr_assert_str_eq(v.msg, "stopped (RESTART)");

    r.timed_out = true;
    r.stop_reason = QL_PROC_STOP_TIMEOUT;
    r.timeout_ms = 5000;
    v = classify(&r, -1);
    cr_assert_eq(v.outcome, QL_PROC_ERROR);
    cr_assert_str_eq(v.msg, "timed out after 5000 ms");

    r.exec_errno = ENOENT;
    r.exit_status = 127;
    v = classify(&r, 127);
    cr_assert_eq(v.outcome, QL_PROC_ERROR, "a failed exec is never a warning");
    cr_assert_str_eq(v.msg, "command not found: foo");

    cr_assert_eq(ql_proc_classify(NULL, -1, &v), UV_EINVAL);
    cr_assert_str_eq(ql_proc_stop_reason_name(QL_PROC_STOP_SHUTDOWN), "SHUTDOWN");
}

/* ---- output ---- */

Test(proc, stdout_and_stderr_in_result_and_log) {
    run_t run;
    run_init(&run);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/data/logs/job1/step_00.log", run.dir);
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; echo out2", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.log_path = log;
    start(&run, &spec);
    wait_exit(&run);
    cr_assert_eq(run.result.exit_status, 0);
    /* One pipe for both, so the order is the order of the writes. */
    cr_assert_str_eq(run.result.output, "out\nerr\nout2\n");
    cr_assert_eq(run.result.output_total, 13);
    cr_assert_eq(run.result.log_error, 0);
    char *text = slurp(log, NULL);
    cr_assert_not_null(text, "log file %s was not created", log);
    cr_assert_str_eq(text, "out\nerr\nout2\n");
    free(text);

    /* A second run (a retry) appends to the same log. */
    run_t again;
    run_init(&again);
    const char *argv2[] = {"echo", "retry", NULL};
    spec_for(&again, &spec, argv2);
    spec.log_path = log;
    start(&again, &spec);
    wait_exit(&again);
    text = slurp(log, NULL);
    cr_assert_str_eq(text, "out\nerr\nout2\nretry\n");
    free(text);
    run_fini(&again);
    run_fini(&run);
}

Test(proc, output_cap_keeps_tail_log_keeps_all) {
    run_t run;
    run_init(&run);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/big.log", run.dir);
    const char *argv[] = {"sh", "-c", "yes abcdefghijklmno | head -c 1048576; echo END", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.log_path = log;
    spec.max_output = 1024;
    start(&run, &spec);
    wait_exit(&run);

    /* The stream the step wrote: 65536 lines of 16 bytes, then "END\n". */
    size_t total = 1048576 + 4;
    char *expect = malloc(total + 1);
    for (size_t i = 0; i < 1048576; i += 16)
        memcpy(expect + i, "abcdefghijklmno\n", 16);
    memcpy(expect + 1048576, "END\n", 5);

    cr_assert_eq(run.result.output_total, total);
    cr_assert_eq(run.result.truncated, total - 1024);
    char marker[64];
    int mlen = snprintf(marker, sizeof marker, "...(%zu characters truncated)...\n", total - 1024);
    cr_assert_eq(run.result.output_len, (size_t)mlen + 1024);
    cr_assert_eq(memcmp(run.result.output, marker, (size_t)mlen), 0, "output starts: %.60s",
                 run.result.output);
    cr_assert_eq(memcmp(run.result.output + mlen, expect + total - 1024, 1024), 0,
                 "the kept part is not the tail");
    cr_assert_eq(run.result.output[run.result.output_len], '\0');

    size_t log_len;
    char *text = slurp(log, &log_len);
    cr_assert_eq(log_len, total);
    cr_assert_eq(memcmp(text, expect, total), 0, "the log is not the full output");
    free(text);
    free(expect);
    run_fini(&run);
}

Test(proc, output_cap_cuts_at_utf8_boundary) {
    run_t run;
    run_init(&run);
    /* Three 2-byte characters; a 3-byte cap would start inside the second one. */
    const char *argv[] = {"printf", "\xc3\xa9\xc3\xa9\xc3\xa9", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.max_output = 3;
    start(&run, &spec);
    wait_exit(&run);
    cr_assert_eq(run.result.output_total, 6);
    cr_assert_eq(run.result.truncated, 4);
    cr_assert_str_eq(run.result.output, "...(4 characters truncated)...\n\xc3\xa9");
    run_fini(&run);
}

Test(proc, waits_for_eof_after_exit) {
    run_t run;
    run_init(&run);
    /* The shell exits at once; a background child writes later through the inherited pipe. */
    const char *argv[] = {"sh", "-c", "echo start; (sleep 0.3; echo late) & exit 0", NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 0);
    cr_assert_str_eq(run.result.output, "start\nlate\n");
    cr_assert_not(run.result.output_incomplete);
    run_fini(&run);
}

/* ---- timeout and stop ---- */

Test(proc, timeout_terminates_within_grace) {
    run_t run;
    run_init(&run);
    const char *argv[] = {"sleep", "30", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.timeout_ms = 200;
    spec.grace_ms = 5000;
    start(&run, &spec);
    wait_exit(&run);
    cr_assert(run.result.timed_out);
    cr_assert_eq(run.result.stop_reason, QL_PROC_STOP_TIMEOUT);
    cr_assert_eq(run.result.term_signal, SIGTERM, "SIGTERM should have ended it, got %d",
                 run.result.term_signal);
    /* The loop's time is CLOCK_MONOTONIC_COARSE: it may lag the precise clock by a few ms. */
    cr_assert_geq(run.result.duration_ms, 200 - CLOCK_SLACK_MS);
    cr_assert_lt(run.result.duration_ms, 5000, "took %lld ms", (long long)run.result.duration_ms);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_eq(v.outcome, QL_PROC_ERROR);
    cr_assert_str_eq(v.msg, "timed out after 200 ms");
    run_fini(&run);
}

Test(proc, stop_terminates_whole_group) {
    become_subreaper();
    run_t run;
    run_init(&run);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/step.log", run.dir);
    const char *argv[] = {"sh", "-c", "sleep 30 & echo ready $!; sleep 30; wait", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.log_path = log;
    spec.grace_ms = 5000;
    start(&run, &spec);
    pid_t pgid = ql_proc_pgid(run.proc);
    const char *ready[] = {log, "ready"};
    cr_assert(drive_until(&run, log_contains, ready, DEADLINE_MS), "the step never got ready");

    cr_assert_eq(ql_proc_stop(run.proc, QL_PROC_STOP_NONE), UV_EINVAL);
    cr_assert_eq(ql_proc_stop(run.proc, QL_PROC_STOP_PAUSE), 0);
    cr_assert_eq(ql_proc_stop(run.proc, QL_PROC_STOP_DISCARD), 0, "a second stop is a no-op");
    int64_t stopped = now_ms();
    wait_exit(&run);
    /* Both sleeps hold the output pipe: EOF before the grace period ends means SIGTERM reached
     * every process of the group, not only the shell. */
    cr_assert_lt(now_ms() - stopped, 5000, "needed SIGKILL: SIGTERM did not reach the group");
    pid_t background = (pid_t)atoi(strstr(run.result.output, "ready ") + 6);
    cr_assert_gt(background, 1, "output: %s", run.result.output);
    cr_assert_eq(run.result.stop_reason, QL_PROC_STOP_PAUSE, "the first reason stands");
    cr_assert_not(run.result.timed_out);
    cr_assert_eq(run.result.term_signal, SIGTERM);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_str_eq(v.msg, "stopped (PAUSE)");

    int sigs[8], n;
    cr_assert(reap_group(pgid, sigs, 8, &n), "processes of group %d are left", (int)pgid);
    /* The shell may reap a child itself in the instant between the children's death and its
     * own, so the orphans we reap are any subset; every one must have died of SIGTERM. */
    for (int i = 0; i < n; i++)
        cr_assert_eq(sigs[i], SIGTERM, "child %d ended by signal %d, not SIGTERM", i, sigs[i]);
    cr_assert_eq(kill(-pgid, 0), -1);
    cr_assert_eq(errno, ESRCH);
    cr_assert_eq(kill(background, 0), -1, "the background sleep is still there");
    cr_assert_eq(errno, ESRCH);
    run_fini(&run);
}

Test(proc, a_stopped_step_reports_once_nothing_of_its_group_runs) {
    /* Twenty members hold no pipe: the leader's exit and EOF come while they may still be on
     * their way out, and the report must wait for them (ql_proc.h, Completion). */
    become_subreaper();
    run_t run;
    run_init(&run);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/step.log", run.dir);
    const char *argv[] = {"sh", "-c",
                          "i=0; while [ $i -lt 20 ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); "
                          "done; echo ready; exec sleep 30",
                          NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.log_path = log;
    start(&run, &spec);
    pid_t pgid = ql_proc_pgid(run.proc);
    const char *ready[] = {log, "ready"};
    cr_assert(drive_until(&run, log_contains, ready, DEADLINE_MS), "the step never got ready");
    cr_assert_eq(ql_proc_stop(run.proc, QL_PROC_STOP_RESTART), 0);
    wait_exit(&run);
    cr_assert_not(run.group_running_at_exit,
                  "the exit callback ran while a process of group %d still ran", (int)pgid);
    cr_assert_not(run.result.group_lingered);
    int sigs[32], n;
    cr_assert(reap_group(pgid, sigs, 32, &n), "processes of group %d are left", (int)pgid);
    run_fini(&run);
}

Test(proc, sigterm_ignored_gets_sigkill_after_grace) {
    become_subreaper();
    run_t run;
    run_init(&run);
    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/step.log", run.dir);
    const char *argv[] = {"sh", "-c", "trap \"\" TERM; echo ready; sleep 30", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.log_path = log;
    spec.grace_ms = 300;
    start(&run, &spec);
    pid_t pgid = ql_proc_pgid(run.proc);
    const char *ready[] = {log, "ready"};
    cr_assert(drive_until(&run, log_contains, ready, DEADLINE_MS), "the step never got ready");

    int64_t stopped = now_ms();
    cr_assert_eq(ql_proc_stop(run.proc, QL_PROC_STOP_DISCARD), 0);
    wait_exit(&run);
    int64_t took = now_ms() - stopped;
    cr_assert_geq(took, 300 - CLOCK_SLACK_MS, "ended after %lld ms, before the grace period",
                  (long long)took);
    cr_assert_lt(took, 5000);
    cr_assert_eq(run.result.term_signal, SIGKILL);
    cr_assert_eq(run.result.stop_reason, QL_PROC_STOP_DISCARD);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_str_eq(v.msg, "stopped (DISCARD)");

    int sigs[8], n;
    cr_assert(reap_group(pgid, sigs, 8, &n), "processes of group %d are left", (int)pgid);
    /* 0 when the shell reaped the sleep in the instant before its own death. */
    cr_assert_leq(n, 1);
    if (n == 1)
        cr_assert_eq(sigs[0], SIGKILL);
    run_fini(&run);
}

Test(proc, completion_kills_leftovers_in_group) {
    become_subreaper();
    run_t run;
    run_init(&run);
    /* The sleep stays in the group with its output elsewhere: the step completes at once. */
    const char *argv[] = {"sh", "-c", "(sleep 30 >/dev/null 2>&1 &); echo ok", NULL};
    run_argv(&run, argv);
    pid_t pgid = ql_proc_pgid(run.proc);
    cr_assert_eq(run.result.exit_status, 0);
    cr_assert_str_eq(run.result.output, "ok\n");
    int sigs[8], n;
    cr_assert(reap_group(pgid, sigs, 8, &n), "the leftover sleep survived the step");
    cr_assert_eq(n, 1, "expected the sleep as the one orphan, reaped %d", n);
    cr_assert_eq(sigs[0], SIGKILL);
    run_fini(&run);
}

Test(proc, escaped_pipe_holder_does_not_block_stop) {
    become_subreaper();
    run_t run;
    run_init(&run);
    /* The daemon leaves the group (setsid) but keeps the output pipe open. */
    const char *argv[] = {"sh", "-c", "setsid sleep 30 & echo $!; sleep 30", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.timeout_ms = 300;
    spec.grace_ms = 100;
    start(&run, &spec);
    wait_exit(&run);
    cr_assert(run.result.timed_out);
    cr_assert(run.result.output_incomplete);
    /* Not before the drain period. */
    cr_assert_geq(run.result.duration_ms, 300 + 100 + QL_PROC_DRAIN_MS - 3 * CLOCK_SLACK_MS);
    pid_t daemon = (pid_t)atoi(run.result.output);
    cr_assert_gt(daemon, 1, "output: %s", run.result.output);
    cr_assert_eq(kill(daemon, SIGKILL), 0, "the escaped daemon should still be alive");
    cr_assert_neq(wait_child(daemon), -1);
    run_fini(&run);
}

Test(proc, close_while_running_kills_and_never_calls_exit) {
    run_t run;
    run_init(&run);
    const char *argv[] = {"sleep", "30", NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    start(&run, &spec);
    pid_t pid = ql_proc_pid(run.proc);
    cr_assert_eq(kill(pid, 0), 0);
    ql_proc_close(run.proc, on_close);
    int64_t end = now_ms() + DEADLINE_MS;
    while (run.closes == 0 && now_ms() < end)
        uv_run(&run.loop, UV_RUN_ONCE);
    cr_assert_eq(run.closes, 1);
    cr_assert_eq(run.exits, 0);
    /* Reaped by libuv before the close completed: no zombie is left. */
    cr_assert_eq(kill(pid, 0), -1);
    cr_assert_eq(errno, ESRCH);
    run.proc = NULL;
    run_fini(&run);
}

/* ---- exec, environment, argv ---- */

Test(proc, command_not_found) {
    run_t run;
    run_init(&run);
    const char *argv[] = {"qilin-no-such-command", "x", NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 127);
    cr_assert_eq(run.result.exec_errno, ENOENT);
    cr_assert_not_null(strstr(run.result.output, "qilin-exec: command not found: qilin-no-such-"),
                       "output: %s", run.result.output);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_eq(v.outcome, QL_PROC_ERROR);
    cr_assert_str_eq(v.msg, "command not found: qilin-no-such-command");
    run_fini(&run);
}

Test(proc, not_executable) {
    run_t run;
    run_init(&run);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/script.sh", run.dir);
    FILE *f = fopen(path, "w");
    fputs("#!/bin/sh\necho hi\n", f);
    fclose(f);
    chmod(path, 0644);
    /* Not even root may execute a file without any x bit. */
    cr_assert_neq(access(path, X_OK), 0);
    const char *argv[] = {path, NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 126);
    cr_assert_eq(run.result.exec_errno, EACCES);
    ql_proc_verdict_t v = classify(&run.result, -1);
    cr_assert_not_null(strstr(v.msg, "cannot execute"), "msg: %s", v.msg);
    run_fini(&run);
}

Test(proc, env_and_cwd_reach_child) {
    run_t run;
    run_init(&run);
    setenv("QL_PROC_TEST_INHERITED", "inherited", 1);
    setenv("QL_PROC_TEST_REPLACED", "old", 1);
    ql_proc_env_t env[] = {
        {"QL_PROC_TEST_REPLACED", "new"},
        {"QL_PROC_TEST_ADDED", "first"},
        {"QL_PROC_TEST_ADDED", "a b;$(c)"},
    };
    const char *argv[] = {"sh", "-c",
                          "printf '%s|%s|%s|%s|' \"$QL_PROC_TEST_INHERITED\" "
                          "\"$QL_PROC_TEST_REPLACED\" \"$QL_PROC_TEST_ADDED\" \"$(pwd -P)\"; "
                          "env | grep -c '^QL_PROC_TEST_'",
                          NULL};
    ql_proc_spec_t spec;
    spec_for(&run, &spec, argv);
    spec.env = env;
    spec.env_count = 3;
    spec.cwd = run.dir;
    start(&run, &spec);
    wait_exit(&run);
    char real[PATH_MAX];
    cr_assert_not_null(realpath(run.dir, real));
    char expect[PATH_MAX + 64];
    snprintf(expect, sizeof expect, "inherited|new|a b;$(c)|%s|3\n", real);
    cr_assert_str_eq(run.result.output, expect);
    run_fini(&run);
}

Test(proc, argv_is_passed_verbatim) {
    run_t run;
    run_init(&run);
    char a[PATH_MAX + 32], b[PATH_MAX + 32], c[PATH_MAX + 32], m1[PATH_MAX], m2[PATH_MAX],
        m3[PATH_MAX];
    snprintf(m1, sizeof m1, "%s/semi", run.dir);
    snprintf(m2, sizeof m2, "%s/subst", run.dir);
    snprintf(m3, sizeof m3, "%s/tick", run.dir);
    snprintf(a, sizeof a, "x; touch %s", m1);
    snprintf(b, sizeof b, "$(touch %s)", m2);
    snprintf(c, sizeof c, "`touch %s`", m3);
    const char *d = "\"double\" 'single' \\ *";
    const char *argv[] = {"printf", "[%s]\\n", a, b, c, d, NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 0);
    char expect[4 * PATH_MAX];
    snprintf(expect, sizeof expect, "[%s]\n[%s]\n[%s]\n[%s]\n", a, b, c, d);
    cr_assert_str_eq(run.result.output, expect);
    cr_assert_neq(access(m1, F_OK), 0, "';' ran a command");
    cr_assert_neq(access(m2, F_OK), 0, "$() ran a command");
    cr_assert_neq(access(m3, F_OK), 0, "backticks ran a command");
    run_fini(&run);
}

Test(proc, step_inherits_only_stdio) {
    run_t run;
    run_init(&run);
    /* An fd the "server" left inheritable (dup2 clears close-on-exec). */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_assert_eq(dup2(fd, 213), 213);
    const char *argv[] = {"sh", "-c", "test -e /proc/$$/fd/213 && echo leaked || echo closed",
                          NULL};
    run_argv(&run, argv);
    cr_assert_str_eq(run.result.output, "closed\n");
    /* The premise: without the helper's clean-up the fd would have reached the step. */
    cr_assert_eq(fcntl(213, F_GETFD) & FD_CLOEXEC, 0);
    close(213);
    close(fd);
    run_fini(&run);
}

/* ---- spawn errors ---- */

static void expect_spawn_error(const ql_proc_spec_t *spec, int code) {
    run_t run;
    run_init(&run);
    ql_proc_t *proc = NULL;
    ql_err_t err = {0};
    int rc = ql_proc_spawn(&run.loop, spec, on_exit_cb, &run, &proc, &err);
    cr_assert_eq(rc, code, "got %d (%s), want %d", rc, err.msg, code);
    cr_assert_null(proc);
    cr_assert_eq(err.code, code);
    cr_assert_str_not_empty(err.msg);
    run_fini(&run); /* asserts every handle was closed */
    cr_assert_eq(run.exits, 0);
}

Test(proc, spawn_errors) {
    const char *argv[] = {"true", NULL};
    const char *empty[] = {NULL};
    ql_proc_spec_t spec;

    ql_proc_spec_init(&spec);
    spec.argv = argv;
    spec.exec_helper = "/nonexistent/qilin-exec";
    expect_spawn_error(&spec, UV_ENOENT);

    ql_proc_spec_init(&spec);
    spec.argv = argv;
    spec.exec_helper = HELPER;
    spec.cwd = "/nonexistent/dir";
    expect_spawn_error(&spec, UV_ENOENT);

    ql_proc_spec_init(&spec);
    spec.argv = empty;
    spec.exec_helper = HELPER;
    expect_spawn_error(&spec, UV_EINVAL);

    ql_proc_env_t bad[] = {{"A=B", "x"}};
    ql_proc_spec_init(&spec);
    spec.argv = argv;
    spec.exec_helper = HELPER;
    spec.env = bad;
    spec.env_count = 1;
    expect_spawn_error(&spec, UV_EINVAL);

    ql_proc_spec_init(&spec);
    spec.argv = argv;
    spec.exec_helper = HELPER;
    spec.log_path = "/dev/null/sub/step.log"; /* a parent that is not a directory */
    expect_spawn_error(&spec, UV_ENOTDIR);
}

/* ---- the exec helper ---- */

Test(proc, helper_exits_when_parent_is_not_the_expected_one) {
    run_t run;
    run_init(&run);
    char marker[PATH_MAX];
    snprintf(marker, sizeof marker, "%s/ran", run.dir);
    /* The outer helper execs the inner one in the same process, whose parent is this test, not
     * pid 1: the inner one must refuse to run the command. */
    const char *argv[] = {HELPER, "--parent-pid", "1", "--", "touch", marker, NULL};
    run_argv(&run, argv);
    cr_assert_eq(run.result.exit_status, 125);
    cr_assert_neq(access(marker, F_OK), 0, "the command ran although the parent was wrong");
    run_fini(&run);

    run_t ok;
    run_init(&ok);
    snprintf(marker, sizeof marker, "%s/ran", ok.dir);
    char self[24];
    snprintf(self, sizeof self, "%ld", (long)getpid());
    const char *argv2[] = {HELPER, "--parent-pid", self, "--", "touch", marker, NULL};
    run_argv(&ok, argv2);
    cr_assert_eq(ok.result.exit_status, 0, "output: %s", ok.result.output);
    cr_assert_eq(access(marker, F_OK), 0);
    run_fini(&ok);

    run_t usage;
    run_init(&usage);
    const char *argv3[] = {HELPER, "--parent-pid", self, NULL};
    run_argv(&usage, argv3);
    cr_assert_eq(usage.result.exit_status, 125);
    cr_assert_not_null(strstr(usage.result.output, "usage:"));
    run_fini(&usage);
}

static void noop_exit(ql_proc_t *proc, ql_proc_result_t *result, void *arg) {
    (void)proc;
    (void)result;
    (void)arg;
}

static bool proc_comm_is(pid_t pid, const char *comm) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
    char *s = slurp(path, NULL);
    bool same = s != NULL && strncmp(s, comm, strlen(comm)) == 0 && s[strlen(comm)] == '\n';
    free(s);
    return same;
}

Test(proc, step_dies_with_its_server) {
    become_subreaper();
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    /* No cr_assert may run in a forked child: with --full-stats even a passing one talks to the
     * runner over a socket whose I/O thread the child does not have, and blocks forever. */
    pid_t server = fork();
    if (server == 0) {
        /* A stand-in server: spawns a step on its loop thread, reports the pid, runs forever. */
        close(fds[0]);
        alarm(30); /* never outlive the test, even if the test fails before killing us */
        uv_loop_t loop;
        uv_loop_init(&loop);
        const char *argv[] = {"sleep", "30", NULL};
        ql_proc_spec_t spec;
        ql_proc_spec_init(&spec);
        spec.argv = argv;
        spec.exec_helper = HELPER;
        ql_proc_t *p;
        if (ql_proc_spawn(&loop, &spec, noop_exit, NULL, &p, NULL) != 0)
            _exit(1);
        pid_t pid = ql_proc_pid(p);
        if (write(fds[1], &pid, sizeof pid) != sizeof pid)
            _exit(1);
        uv_run(&loop, UV_RUN_DEFAULT);
        _exit(2);
    }
    cr_assert_gt(server, 0);
    close(fds[1]);
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, DEADLINE_MS), 1, "the stand-in server never reported");
    pid_t step = 0;
    cr_assert_eq(read(fds[0], &step, sizeof step), (ssize_t)sizeof step);
    close(fds[0]);
    cr_assert_gt(step, 1);

    /* Kill the server only once the step runs `sleep`: PDEATHSIG must be armed by then. */
    int64_t end = now_ms() + DEADLINE_MS;
    while (!proc_comm_is(step, "sleep") && now_ms() < end)
        pause_briefly();
    cr_assert(proc_comm_is(step, "sleep"), "the step never exec'ed sleep");

    cr_assert_eq(kill(server, SIGKILL), 0);
    int st = wait_child(server);
    cr_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    /* The orphaned step is now our child (subreaper): it must die of PDEATHSIG's SIGKILL. */
    st = wait_child(step);
    if (st == -1)
        kill(-step, SIGKILL);
    cr_assert_neq(st, -1, "the step outlived its server");
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "step status %#x", st);
}

/* ---- recovery ---- */

Test(proc, kill_group_kills_a_live_group) {
    become_subreaper();
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t leader = fork(); /* no cr_assert in the child: see step_dies_with_its_server */
    if (leader == 0) {
        /* A group like a crashed server's step leaves: a leader and a member. */
        close(fds[0]);
        setsid();
        pid_t member = fork();
        if (member == 0) {
            close(fds[1]);
            execlp("sleep", "sleep", "30", (char *)NULL);
            _exit(127);
        }
        if (write(fds[1], &member, sizeof member) != sizeof member)
            _exit(1);
        close(fds[1]);
        execlp("sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    cr_assert_gt(leader, 0);
    close(fds[1]);
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, DEADLINE_MS), 1);
    pid_t member = 0;
    cr_assert_eq(read(fds[0], &member, sizeof member), (ssize_t)sizeof member);
    close(fds[0]);
    /* The leader is in its own session once it has reported the member. */
    cr_assert_eq(getpgid(leader), leader);
    cr_assert_eq(kill(-leader, 0), 0);

    cr_assert_eq(ql_proc_kill_group(leader), 0);
    int st = wait_child(leader);
    cr_assert(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    int sigs[4], n;
    cr_assert(reap_group(leader, sigs, 4, &n), "the member survived");
    cr_assert_eq(n, 1);
    cr_assert_eq(sigs[0], SIGKILL);

    cr_assert_eq(ql_proc_kill_group(leader), 0, "a group that is gone is fine");
    cr_assert_eq(ql_proc_kill_group(0), UV_EINVAL);
    cr_assert_eq(ql_proc_kill_group(1), UV_EINVAL);
    cr_assert_eq(ql_proc_kill_group(-7), UV_EINVAL);
    cr_assert_eq(ql_proc_kill_group(getpgrp()), UV_EINVAL);
}
