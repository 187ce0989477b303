/*
 * The step's watcher (tools/qilin-exec.c, DESIGN; docs/step-processes.md, Several hosts): when
 * the server that started a step dies, what the step started dies with it on its own host,
 * within milliseconds, with nobody's recovery: the processes of its group and those that left
 * the group but carry its marker. A step that ends on its own keeps what it left on purpose.
 *
 * The "server" here is a process of this test: it starts qilin-exec as a server would (a child
 * in a session of its own, --parent-pid, the marker in its environment) and is then killed.
 * The step writes the pids of its two grandchildren (one in its group, one in a new session)
 * to a file. This test is a child subreaper, so every orphan comes back to it, and the teardown
 * kills whatever is left.
 */
#include "engine/ql_proc.h"
#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define DEADLINE_MS 10000

static char dir[64], pids_path[128], ended_path[128];
/* The step's marker, a new random one per server started: a late watcher of an earlier one
 * kills only its own step's processes, and two runs of this test at once (two build trees) never
 * kill each other's. */
static char token[64];
static pid_t server;
static long kids[2];

static void reap(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

static bool alive(long pid) {
    reap();
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p && p[1] == ' ')
        state = p[2];
    return state && state != 'Z' && state != 'X';
}

static void teardown(void) {
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    for (int i = 0; i < 2; i++)
        if (kids[i] > 0)
            kill((pid_t)kids[i], SIGKILL);
    reap();
    if (dir[0])
        ql_test_rm_tree(dir);
}

static void *spin(void *arg) {
    (void)arg;
    for (volatile unsigned long i = 0;; i++)
        ;
    return NULL;
}

/* The server: starts the step (sh -c script sh PIDS_PATH) through qilin-exec from its main
 * thread, then `threads` more threads that keep the CPUs busy (as qilind has its writer and
 * pool threads: a process of several threads dies thread by thread), waits for the step to
 * end, notes that in ended_path and lives on until it is killed. */
static void start_server_threads(const char *script, bool marked, int threads) {
    cr_assert_eq(access(HELPER, X_OK), 0, "%s is not built", HELPER);
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    ql_test_tmpdir(dir, sizeof dir, "ql_watcher");
    snprintf(pids_path, sizeof pids_path, "%s/pids", dir);
    snprintf(ended_path, sizeof ended_path, "%s/ended", dir);
    char fresh[QL_PROC_TOKEN_LEN + 1];
    cr_assert_eq(ql_proc_token_new(fresh), 0);
    snprintf(token, sizeof token, QL_PROC_TOKEN_ENV "=%s", fresh);
    server = fork(); /* no Criterion call in the children */
    if (server == 0) {
        char parent[32];
        snprintf(parent, sizeof parent, "%ld", (long)getpid());
        pid_t step = fork();
        if (step == 0) {
            setsid(); /* as uv_spawn's UV_PROCESS_DETACHED: the step leads its group */
            if (marked)
                putenv(token);
            execl(HELPER, HELPER, "--parent-pid", parent, "--", "/bin/sh", "-c", script, "sh",
                  pids_path, (char *)NULL);
            _exit(127);
        }
        for (int i = 0; i < threads; i++) {
            pthread_t t;
            pthread_create(&t, NULL, spin, NULL);
        }
        int st;
        waitpid(step, &st, 0);
        FILE *f = fopen(ended_path, "w");
        if (f) {
            fprintf(f, "%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
            fclose(f);
        }
        for (;;)
            pause();
    }
    cr_assert_gt(server, 0);
}

static void start_server(const char *script, bool marked) {
    start_server_threads(script, marked, 0);
}

static bool cond_pids_written(const void *arg) {
    (void)arg;
    FILE *f = fopen(pids_path, "r");
    if (!f)
        return false;
    int n = fscanf(f, "%ld %ld", &kids[0], &kids[1]);
    fclose(f);
    return n == 2;
}

static bool cond_kids_gone(const void *arg) {
    (void)arg;
    return !alive(kids[0]) && !alive(kids[1]);
}

static void wait_for(bool (*cond)(const void *), const char *what) {
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (!cond(NULL)) {
        cr_assert_lt(ql_test_mono_ms(), deadline, "%s", what);
        struct timespec tick = {0, 2000000};
        nanosleep(&tick, NULL);
    }
}

/* Two grandchildren that live long: one in the step's group, one in a session of its own. */
static const char long_step[] = "sleep 600 & a=$!; setsid sleep 600 & b=$!; "
                                "echo \"$a $b\" > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"; wait";

static bool cond_ended(const void *arg) {
    (void)arg;
    return access(ended_path, F_OK) == 0;
}

/* Lets time pass without waiting for anything: for a check that something does NOT happen. */
static void let_pass(int ms) {
    int64_t until = ql_test_mono_ms() + ms;
    while (ql_test_mono_ms() < until) {
        reap();
        struct timespec tick = {0, 2000000};
        nanosleep(&tick, NULL);
    }
}

Test(exec_watcher, a_dead_servers_step_processes_die_with_it_also_outside_the_group,
     .fini = teardown) {
    start_server(long_step, true);
    wait_for(cond_pids_written, "the step never started its grandchildren");
    cr_assert(alive(kids[0]) && alive(kids[1]));
    int64_t t0 = ql_test_mono_ms();
    cr_assert_eq(kill(server, SIGKILL), 0);
    waitpid(server, NULL, 0);
    server = 0;
    wait_for(cond_kids_gone, "the step's grandchildren outlived its server");
    fprintf(stderr, "exec_watcher: grandchildren gone %lld ms after the server's death\n",
            (long long)(ql_test_mono_ms() - t0));
}

/* The same with a server of several threads, ten times. Its main thread, which started the
 * step, may exit (sending the step its PDEATHSIG) before the others, and the process's pidfd
 * is readable only once the last has: the step's end can wake the watcher first, which must
 * still see that the server is dying (a zombie main thread) and kill. */
Test(exec_watcher, a_dead_multithreaded_servers_step_processes_die_with_it, .fini = teardown) {
    for (int round = 0; round < 10; round++) {
        start_server_threads(long_step, true, 8);
        wait_for(cond_pids_written, "the step never started its grandchildren");
        cr_assert(alive(kids[0]) && alive(kids[1]));
        cr_assert_eq(kill(server, SIGKILL), 0);
        waitpid(server, NULL, 0);
        server = 0;
        wait_for(cond_kids_gone, "the step's grandchildren outlived its server of several threads");
        ql_test_rm_tree(dir);
        dir[0] = '\0';
        kids[0] = kids[1] = 0;
    }
}

/* Without a marker there is no watcher (nothing to tell the try's processes by): the one that
 * left the group lives on, which is what recovery's own sweep covers where it can. */
Test(exec_watcher, an_unmarked_step_has_no_watcher, .fini = teardown) {
    start_server(long_step, false);
    wait_for(cond_pids_written, "the step never started its grandchildren");
    cr_assert_eq(kill(server, SIGKILL), 0);
    waitpid(server, NULL, 0);
    server = 0;
    /* The step itself dies by PR_SET_PDEATHSIG; give a watcher, if there were one, the time it
     * takes above many times over, then look. */
    let_pass(500);
    cr_assert(alive(kids[1]), "the grandchild in a session of its own was killed");
}

/* Whether the step's watcher has exited. Orphans come back to this test (a subreaper), so once
 * the step has ended its watcher is a child of ours; it is gone when no child is left but the
 * server and the daemon. */
static bool cond_watcher_gone(const void *arg) {
    (void)arg;
    reap();
    DIR *d = opendir("/proc");
    cr_assert_not_null(d);
    bool other = false;
    struct dirent *e;
    while (!other && (e = readdir(d))) {
        long pid = strtol(e->d_name, NULL, 10), ppid, pgrp;
        char state;
        if (pid <= 0 || pid == server || pid == kids[1])
            continue;
        if (ql_test_proc_stat(pid, &state, &ppid, &pgrp) && ppid == (long)getpid() && state != 'Z')
            other = true;
    }
    closedir(d);
    return !other;
}

/* A step that ends on its own keeps the daemon it started (its watcher exits with it), even
 * when its server dies afterwards: after the watcher has seen the step's end (one that wakes to
 * a dead server takes the server to have died first, docs/step-processes.md). */
Test(exec_watcher, a_step_that_ended_keeps_its_daemon_when_the_server_dies_later,
     .fini = teardown) {
    start_server("setsid sleep 600 & b=$!; echo \"$b $b\" > \"$1.tmp\" && mv \"$1.tmp\" \"$1\"",
                 true);
    wait_for(cond_pids_written, "the step never started its daemon");
    wait_for(cond_ended, "the step did not end on its own");
    wait_for(cond_watcher_gone, "the step's watcher did not exit after the step's end");
    cr_assert_eq(kill(server, SIGKILL), 0);
    waitpid(server, NULL, 0);
    server = 0;
    let_pass(500);
    cr_assert(alive(kids[1]), "the daemon of a step that ended on its own was killed");
}
