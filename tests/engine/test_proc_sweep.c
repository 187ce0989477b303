/*
 * The markers of step tries (engine/proc_sweep.c): tokens, the /proc sweep that kills the
 * processes carrying one, and the process-group kill checked against its leader's identity.
 * Real processes; each test kills and reaps what it started, also when it fails (.fini).
 */
#include "base/ql_procinfo.h"
#include "engine/ql_proc.h"
#include "tests/common/slow_exit_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_KIDS 8

static pid_t kids[MAX_KIDS];
static int n_kids;
static char tmp[64];

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void teardown(void) {
    for (int i = 0; i < n_kids; i++)
        if (kids[i] > 0) {
            kill(-kids[i], SIGKILL); /* each leads its group: its children go with it */
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
    n_kids = 0;
    if (tmp[0]) {
        char p[128];
        snprintf(p, sizeof p, "%s/grandchild", tmp);
        FILE *f = fopen(p, "r");
        int g;
        if (f && fscanf(f, "%d", &g) == 1 && g > 1)
            kill(g, SIGKILL);
        if (f)
            fclose(f);
        unlink(p);
        rmdir(tmp);
        tmp[0] = '\0';
    }
}

/* Starts /bin/sh -c script in a group of its own with exactly the environment env. */
static pid_t spawn_env(const char *script, char *const env[]) {
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        execle("/bin/sh", "sh", "-c", script, (char *)NULL, env);
        _exit(127);
    }
    cr_assert_gt(pid, 0);
    cr_assert_lt(n_kids, MAX_KIDS);
    kids[n_kids++] = pid;
    return pid;
}

/* Whether /proc/PID/environ holds entry (waits for the exec to have happened). */
static bool environ_has(pid_t pid, const char *entry) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    for (ssize_t i = 0; i < n;) {
        if (strcmp(buf + i, entry) == 0)
            return true;
        i += (ssize_t)strlen(buf + i) + 1;
    }
    return false;
}

static void wait_environ(pid_t pid, const char *entry) {
    int64_t deadline = mono_ms() + 5000;
    while (!environ_has(pid, entry)) {
        cr_assert_lt(mono_ms(), deadline, "pid %d never had %s", pid, entry);
        sched_yield();
    }
}

/* The exit status of a child within 5 s (asserted). */
static int reap(pid_t pid) {
    int64_t deadline = mono_ms() + 5000;
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0) {
        cr_assert_lt(mono_ms(), deadline, "pid %d did not end", pid);
        sched_yield();
    }
    cr_assert_eq(r, pid);
    for (int i = 0; i < n_kids; i++)
        if (kids[i] == pid)
            kids[i] = 0;
    return st;
}

static bool running(pid_t pid) {
    return waitpid(pid, NULL, WNOHANG) == 0;
}

Test(proc_sweep, tokens_are_random_hex_and_the_set_holds_each_once) {
    char a[QL_PROC_TOKEN_LEN + 1], b[QL_PROC_TOKEN_LEN + 1];
    cr_assert_eq(ql_proc_token_new(a), 0);
    cr_assert_eq(ql_proc_token_new(b), 0);
    cr_assert_eq(strlen(a), QL_PROC_TOKEN_LEN);
    cr_assert(ql_proc_token_valid(a));
    cr_assert_str_neq(a, b);
    cr_assert_not(ql_proc_token_valid(""));
    cr_assert_not(ql_proc_token_valid("0011"));
    cr_assert_not(ql_proc_token_valid("zz112233445566778899aabbccddeeff"));

    ql_proc_tokens_t *set;
    cr_assert_eq(ql_proc_tokens_new(&set), 0);
    cr_assert_eq(ql_proc_tokens_add(set, "not a token"), UV_EINVAL);
    cr_assert_eq(ql_proc_tokens_add(set, a), 0);
    cr_assert_eq(ql_proc_tokens_add(set, a), 0);
    cr_assert_eq(ql_proc_tokens_count(set), 1);
    /* Past the first table: growing keeps every token. */
    for (int i = 0; i < 999; i++) {
        char t[QL_PROC_TOKEN_LEN + 1];
        cr_assert_eq(ql_proc_token_new(t), 0);
        cr_assert_eq(ql_proc_tokens_add(set, t), 0);
    }
    cr_assert_eq(ql_proc_tokens_add(set, a), 0);
    cr_assert_eq(ql_proc_tokens_count(set), 1000);
    ql_proc_tokens_free(set);
}

Test(proc_sweep, kills_the_marked_processes_and_their_descendants_only, .fini = teardown) {
    char t1[QL_PROC_TOKEN_LEN + 1], t2[QL_PROC_TOKEN_LEN + 1];
    cr_assert_eq(ql_proc_token_new(t1), 0);
    cr_assert_eq(ql_proc_token_new(t2), 0);
    char e1[64], e2[64], e3[64], dirvar[96], gpath[128];
    snprintf(e1, sizeof e1, QL_PROC_TOKEN_ENV "=%s", t1);
    snprintf(e2, sizeof e2, QL_PROC_TOKEN_ENV "=%s", t2);
    snprintf(e3, sizeof e3, "X_" QL_PROC_TOKEN_ENV "=%s", t1); /* another name: not a marker */
    ql_test_tmpdir(tmp, sizeof tmp, "ql_sweep");
    snprintf(dirvar, sizeof dirvar, "T=%s", tmp);
    snprintf(gpath, sizeof gpath, "%s/grandchild", tmp);

    /* The marked one starts a grandchild that leaves its session, as a daemon does. */
    char *env1[] = {e1, dirvar, "PATH=/usr/bin:/bin", NULL};
    char *env2[] = {e2, NULL};
    char *env3[] = {e3, NULL};
    pid_t marked = spawn_env("setsid sleep 600 & echo $! > \"$T/g.tmp\"; "
                             "mv \"$T/g.tmp\" \"$T/grandchild\"; wait",
                             env1);
    pid_t other = spawn_env("exec sleep 600", env2);
    pid_t named = spawn_env("exec sleep 600", env3);
    wait_environ(marked, e1);
    wait_environ(other, e2);
    wait_environ(named, e3);
    int64_t deadline = mono_ms() + 5000;
    int g = 0;
    while (!g) {
        FILE *f = fopen(gpath, "r");
        if (f) {
            if (fscanf(f, "%d", &g) != 1)
                g = 0;
            fclose(f);
        }
        cr_assert_lt(mono_ms(), deadline, "the grandchild never started");
    }
    wait_environ(g, e1);

    ql_proc_tokens_t *set;
    cr_assert_eq(ql_proc_tokens_new(&set), 0);
    cr_assert_eq(ql_proc_tokens_add(set, t1), 0);
    ql_proc_sweep_t sw;
    cr_assert_eq(ql_proc_kill_tokens(set, QL_PROC_DRAIN_MS, &sw), 0);
    cr_assert_geq(sw.killed, 2, "the marked process and its grandchild: %u", sw.killed);
    cr_assert_geq(sw.scans, 2, "a last scan found none left");
    cr_assert_geq(sw.examined, 3);

    int st = reap(marked);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
    /* The grandchild is not our child: gone from /proc (or a zombie of init) is enough. */
    deadline = mono_ms() + 5000;
    while (environ_has(g, e1))
        cr_assert_lt(mono_ms(), deadline, "the grandchild %d survived the sweep", g);
    cr_assert(running(other), "a process with another token was killed");
    cr_assert(running(named), "a process with the token under another name was killed");

    /* Nothing is left: a second sweep kills nothing. */
    cr_assert_eq(ql_proc_kill_tokens(set, QL_PROC_DRAIN_MS, &sw), 0);
    cr_assert_eq(sw.killed, 0);
    cr_assert_eq(sw.scans, 1);
    ql_proc_tokens_free(set);
}

Test(proc_sweep, an_empty_set_reads_nothing) {
    ql_proc_tokens_t *set;
    cr_assert_eq(ql_proc_tokens_new(&set), 0);
    ql_proc_sweep_t sw;
    cr_assert_eq(ql_proc_kill_tokens(set, QL_PROC_DRAIN_MS, &sw), 0);
    cr_assert_eq(sw.scans, 0);
    ql_proc_tokens_free(set);
}

Test(proc_sweep, a_group_is_killed_only_while_its_recorded_leader_lives, .fini = teardown) {
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    pid_t leader = spawn_env("sleep 600 & wait", env);
    wait_environ(leader, env[0]); /* exec'd, so its group exists */
    ql_proc_ident_t id;
    cr_assert_eq(ql_proc_ident_of(leader, &id), 0);
    cr_assert_eq(id.pgid, leader);
    cr_assert_gt(id.start, 0);
    char boot[QL_PROC_BOOT_ID_LEN + 1];
    cr_assert_eq(ql_proc_boot_id(boot), 0);
    cr_assert_str_eq(id.boot_id, boot);
    ql_proc_group_fate_t fate;

    ql_proc_ident_t other = id;
    other.start = id.start + 1; /* the number, but not the process */
    cr_assert_eq(ql_proc_kill_group_checked(&other, boot, QL_PROC_DRAIN_MS, &fate), 0);
    cr_assert_eq(fate, QL_PROC_GROUP_PID_REUSED);
    other = id;
    other.boot_id[0] = other.boot_id[0] == '0' ? '1' : '0';
    cr_assert_eq(ql_proc_kill_group_checked(&other, boot, QL_PROC_DRAIN_MS, &fate), 0);
    cr_assert_eq(fate, QL_PROC_GROUP_REBOOTED);
    other = id;
    other.start = 0; /* a record from before identities were kept */
    cr_assert_eq(ql_proc_kill_group_checked(&other, boot, QL_PROC_DRAIN_MS, &fate), 0);
    cr_assert_eq(fate, QL_PROC_GROUP_UNRECORDED);
    cr_assert(running(leader), "a group that is not provably the recorded one was killed");

    cr_assert_eq(ql_proc_kill_group_checked(&id, boot, QL_PROC_DRAIN_MS, &fate), 0);
    cr_assert_eq(fate, QL_PROC_GROUP_KILLED);
    int st = reap(leader);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
    /* Reaped: the number names nobody now. */
    cr_assert_eq(ql_proc_kill_group_checked(&id, boot, QL_PROC_DRAIN_MS, &fate), 0);
    cr_assert_eq(fate, QL_PROC_GROUP_LEADER_GONE);

    other.pgid = 1;
    cr_assert_eq(ql_proc_kill_group_checked(&other, boot, QL_PROC_DRAIN_MS, &fate), UV_EINVAL);
    other.pgid = getpgrp();
    cr_assert_eq(ql_proc_kill_group_checked(&other, boot, QL_PROC_DRAIN_MS, &fate), UV_EINVAL);
    cr_assert_eq(ql_proc_ident_of(0, &other), UV_EINVAL);
}

/* ---- killed is not gone: a dying process holds its files until its memory is freed ---- */

/* A slow_exit (tests/engine/slow_exit.c) carrying token t, in tmp; returns its pid. */
static pid_t spawn_marked_slow_exit_as(char *token, bool threaded) {
    static char entry[64];
    cr_assert_eq(ql_proc_token_new(token), 0);
    snprintf(entry, sizeof entry, QL_PROC_TOKEN_ENV "=%s", token);
    ql_test_tmpdir(tmp, sizeof tmp, "ql_sweep_exit");
    char *env[] = {entry, NULL};
    pid_t pid =
        threaded ? ql_test_slow_exit_start_threaded(tmp, env) : ql_test_slow_exit_start(tmp, env);
    cr_assert_lt(n_kids, MAX_KIDS);
    kids[n_kids++] = pid;
    cr_assert_not(ql_test_slow_exit_lock_free(tmp), "slow_exit holds its lock");
    return pid;
}

static pid_t spawn_marked_slow_exit(char *token) {
    return spawn_marked_slow_exit_as(token, false);
}

/* Sweeps the one token, waiting at most drain_ms for what it killed; returns the sweep's code. */
static int sweep_token_within(const char *token, int drain_ms, ql_proc_sweep_t *sw) {
    ql_proc_tokens_t *set;
    cr_assert_eq(ql_proc_tokens_new(&set), 0);
    cr_assert_eq(ql_proc_tokens_add(set, token), 0);
    int rc = ql_proc_kill_tokens(set, drain_ms, sw);
    ql_proc_tokens_free(set);
    return rc;
}

static void sweep_token(const char *token, ql_proc_sweep_t *sw) {
    cr_assert_eq(sweep_token_within(token, QL_PROC_DRAIN_MS, sw), 0);
}

/* Whether /proc shows pid's environment (it reads empty, or fails, once its memory is going). */
static bool environ_readable(pid_t pid) {
    char path[64], c;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool readable = read(fd, &c, 1) == 1;
    close(fd);
    return readable;
}

/* SIGKILLs pid and returns once it has begun to exit and its environment is gone, as a sweep
 * finds a process someone else killed a moment before: exiting, and no longer to be told. */
static void kill_until_exiting(pid_t pid) {
    cr_assert_eq(kill(pid, SIGKILL), 0);
    ql_proc_info_t info;
    int64_t deadline = mono_ms() + 5000;
    while (ql_proc_info(pid, &info) == 0 && info.state != 'Z' &&
           (!info.exiting || environ_readable(pid)))
        cr_assert_lt(mono_ms(), deadline, "the killed process never began to exit");
}

static void teardown_slow_exit(void) {
    for (int i = 0; i < n_kids; i++)
        if (kids[i] > 0) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
            kids[i] = 0;
        }
    n_kids = 0;
    tmp[0] = '\0'; /* the directory goes with the test's own cleanup (tmp_util.h) */
}

/* The second scan comes 1 ms after the kill, when the process has no environment left but is
 * still freeing its memory, its lock still held: a sweep that stopped there would let the next
 * try start beside it. */
Test(proc_sweep, returns_only_once_the_killed_process_let_go_of_its_files,
     .fini = teardown_slow_exit) {
    char token[QL_PROC_TOKEN_LEN + 1];
    spawn_marked_slow_exit(token);
    ql_proc_sweep_t sw;
    sweep_token(token, &sw);
    cr_assert_geq(sw.killed, 1, "a process the next scan still sees alive is killed again");
    cr_assert(ql_test_slow_exit_lock_free(tmp),
              "the sweep returned while the process it killed still held its lock");
}

/* The usual case after a crash: PR_SET_PDEATHSIG or the step's watcher killed the process a
 * moment before recovery sweeps, so the scan finds it already without an environment. */
Test(proc_sweep, waits_for_a_process_someone_else_killed_while_it_exits,
     .fini = teardown_slow_exit) {
    bool seen = false;
    /* The exiting state lasts some 5 to 15 ms: a test starved of the CPU for all of it tries
     * again rather than proving nothing. */
    for (int attempt = 0; attempt < 5 && !seen; attempt++) {
        char token[QL_PROC_TOKEN_LEN + 1];
        pid_t pid = spawn_marked_slow_exit(token);
        kill_until_exiting(pid);
        ql_proc_info_t info;
        seen =
            ql_proc_info(pid, &info) == 0 && info.state != 'Z' && !ql_test_slow_exit_lock_free(tmp);
        if (!seen) {
            teardown_slow_exit();
            continue;
        }
        ql_proc_sweep_t sw;
        sweep_token(token, &sw);
        cr_assert_eq(sw.killed, 0, "it was dying already");
        cr_assert(ql_test_slow_exit_lock_free(tmp),
                  "the sweep returned while an exiting process still held its lock "
                  "(exiting=%u lingered=%u)",
                  sw.exiting, sw.lingered);
    }
    cr_assert(seen, "never caught the process while it exited holding its lock");
}

Test(proc_sweep, a_killed_group_is_waited_for_until_it_let_go_of_its_files,
     .fini = teardown_slow_exit) {
    char token[QL_PROC_TOKEN_LEN + 1];
    pid_t pid = spawn_marked_slow_exit(token);
    ql_proc_ident_t id;
    cr_assert_eq(ql_proc_ident_of(pid, &id), 0);
    ql_proc_group_fate_t fate;
    cr_assert_eq(ql_proc_kill_group_checked(&id, id.boot_id, QL_PROC_DRAIN_MS, &fate), 0);
    cr_assert_eq(fate, QL_PROC_GROUP_KILLED);
    cr_assert(ql_test_slow_exit_lock_free(tmp),
              "the group kill returned while its process still held its lock");
}

/* /proc shows a process whose first thread exited as a zombie without an environment, while its
 * other threads run on with the marker in the memory they share. */
Test(proc_sweep, kills_a_marked_process_whose_first_thread_has_exited, .fini = teardown_slow_exit) {
    char token[QL_PROC_TOKEN_LEN + 1];
    pid_t pid = spawn_marked_slow_exit_as(token, true);
    ql_proc_sweep_t sw;
    sweep_token(token, &sw);
    cr_assert_geq(sw.killed, 1, "the process runs on in its second thread");
    cr_assert(ql_test_slow_exit_lock_free(tmp), "its second thread still holds the lock");
    int st = reap(pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
}

/* ---- what outlives the wait: a bound of 0 or 1 ms stands in for a process the kernel cannot tear
 * down (uninterruptible sleep), which the 2 s of QL_PROC_DRAIN_MS are for ---- */

/* How many times a case tries to catch slow_exit while it frees its memory: that takes 5 to 15
 * ms, so a test starved of the CPU for all of it tries again rather than proving nothing. */
enum { CATCH_ATTEMPTS = 5 };

/* A sweep must not report success while a process it killed may still hold its files. */
Test(proc_sweep, a_killed_process_still_exiting_after_the_wait_fails_the_sweep,
     .fini = teardown_slow_exit) {
    bool caught = false;
    for (int attempt = 0; attempt < CATCH_ATTEMPTS && !caught; attempt++) {
        char token[QL_PROC_TOKEN_LEN + 1];
        spawn_marked_slow_exit(token);
        ql_proc_sweep_t sw;
        int rc = sweep_token_within(token, 0, &sw);
        cr_assert(rc == 0 || rc == UV_EBUSY, "rc %d", rc);
        cr_assert_geq(sw.killed, 1);
        if (rc == 0)
            cr_assert(ql_test_slow_exit_lock_free(tmp),
                      "the sweep succeeded while the process it killed held its lock");
        caught = rc == UV_EBUSY;
        teardown_slow_exit();
    }
    cr_assert(caught, "the process was gone before every sweep's wait");
}

/* One that was dying already cannot be told to be a step's: waited for, counted, not fatal. */
Test(proc_sweep, an_exiting_process_still_there_after_the_wait_is_counted_as_lingered,
     .fini = teardown_slow_exit) {
    bool caught = false;
    for (int attempt = 0; attempt < CATCH_ATTEMPTS && !caught; attempt++) {
        char token[QL_PROC_TOKEN_LEN + 1];
        pid_t pid = spawn_marked_slow_exit(token);
        kill_until_exiting(pid);
        ql_proc_sweep_t sw;
        cr_assert_eq(sweep_token_within(token, 0, &sw), 0, "not provably a step's");
        cr_assert_eq(sw.killed, 0, "it was dying already");
        cr_assert_leq(sw.lingered, sw.exiting, "lingered %u exiting %u", sw.lingered, sw.exiting);
        /* Not a zombie now, so not when the sweep's wait ended either (nobody reaps it here):
         * then the sweep must have counted it. (Another test's exiting process may be counted
         * too, so a count alone proves nothing.) */
        ql_proc_info_t info;
        caught = ql_proc_info(pid, &info) == 0 && info.state != 'Z';
        if (caught)
            cr_assert_geq(sw.lingered, 1, "still exiting after the sweep, yet not counted");
        teardown_slow_exit();
    }
    cr_assert(caught, "the process was gone before every sweep's wait");
}

Test(proc_sweep, a_killed_group_still_exiting_after_the_wait_is_reported_busy,
     .fini = teardown_slow_exit) {
    bool caught = false;
    for (int attempt = 0; attempt < CATCH_ATTEMPTS && !caught; attempt++) {
        char token[QL_PROC_TOKEN_LEN + 1];
        pid_t pid = spawn_marked_slow_exit(token);
        ql_proc_ident_t id;
        cr_assert_eq(ql_proc_ident_of(pid, &id), 0);
        ql_proc_group_fate_t fate;
        int rc = ql_proc_kill_group_checked(&id, id.boot_id, 1, &fate);
        cr_assert(rc == 0 || rc == UV_EBUSY, "rc %d", rc);
        cr_assert_eq(fate, QL_PROC_GROUP_KILLED, "it was killed either way");
        if (rc == 0)
            cr_assert(ql_test_slow_exit_lock_free(tmp),
                      "the group kill succeeded while its process held its lock");
        caught = rc == UV_EBUSY;
        teardown_slow_exit();
    }
    cr_assert(caught, "the group was gone before every wait");
}
