/*
 * Tests of base/procinfo.c's group check, ql_proc_group_running(), with real processes: one row
 * per state a member of a group can be in (base/ql_procinfo.h).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "base/ql_procinfo.h"
#include "tests/common/slow_exit_util.h"
#include "tests/common/tmp_util.h"

#define DEADLINE_MS 10000

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A child in a group of its own that waits to be killed; returns its pid (= the group). */
static pid_t spawn_group(void) {
    pid_t pid = fork();
    if (pid == 0) {
        /* No assertion here: the test framework reports even passing ones from the child. The
         * alarm ends it should the test fail before killing it. */
        alarm(60);
        setpgid(0, 0);
        for (;;)
            pause();
    }
    cr_assert_geq(pid, 0);
    /* Both sides set it, so that the parent's checks never race the child's setpgid(). */
    setpgid(pid, pid);
    return pid;
}

/* Polls pid's /proc state until it is want (a deadline, not a sleep). */
static bool state_becomes(pid_t pid, char want) {
    int64_t end = now_ms() + DEADLINE_MS;
    ql_proc_info_t info;
    while (now_ms() < end) {
        if (ql_proc_info(pid, &info) == 0 && info.state == want)
            return true;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return false;
}

Test(group_running, a_group_with_no_process_is_not_running) {
    pid_t pid = spawn_group();
    kill(pid, SIGKILL);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
    cr_assert_not(ql_proc_group_running(pid));
}

Test(group_running, a_live_member_is_running) {
    pid_t pid = spawn_group();
    cr_assert(ql_proc_group_running(pid));
    ql_proc_info_t info;
    cr_assert_eq(ql_proc_info(pid, &info), 0);
    cr_assert_eq(info.pgrp, pid, "the group is read from field 5");
    cr_assert_not(info.exiting);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(group_running, a_stopped_member_is_running_it_runs_again_when_continued) {
    pid_t pid = spawn_group();
    kill(pid, SIGSTOP);
    cr_assert(state_becomes(pid, 'T'));
    cr_assert(ql_proc_group_running(pid));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(group_running, a_zombie_member_is_not_running) {
    pid_t pid = spawn_group();
    kill(pid, SIGKILL);
    cr_assert(state_becomes(pid, 'Z'), "the unreaped child never showed as a zombie");
    cr_assert_eq(kill(-pid, 0), 0, "a zombie keeps the group's number taken");
    cr_assert_not(ql_proc_group_running(pid));
    waitpid(pid, NULL, 0);
}

Test(group_running, no_group_number_is_running) {
    cr_assert_not(ql_proc_group_running(0));
    cr_assert_not(ql_proc_group_running(-5));
}

/* A member killed by a signal begins to exit (PF_EXITING) and frees its memory before it closes
 * its files: until it is a zombie its lock is still held, and the group still counts. */
Test(group_running, an_exiting_member_that_still_holds_its_files_is_running) {
    char dir[64];
    ql_test_tmpdir(dir, sizeof dir, "ql_group_exit");
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    pid_t pid = ql_test_slow_exit_start(dir, env);
    cr_assert(ql_proc_group_running(pid));
    cr_assert_eq(kill(-pid, SIGKILL), 0);
    int64_t end = now_ms() + DEADLINE_MS;
    unsigned exiting_and_running = 0;
    while (ql_proc_group_running(pid)) {
        ql_proc_info_t info;
        if (ql_proc_info(pid, &info) == 0 && info.exiting && info.state != 'Z')
            exiting_and_running++;
        cr_assert_lt(now_ms(), end, "the killed group never stopped");
    }
    cr_assert(ql_test_slow_exit_lock_free(dir),
              "the group counted as stopped while its member still held its lock "
              "(seen exiting and counted running %u times)",
              exiting_and_running);
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
}

/* Kills slow_exit's group pid and waits for it: the lock in dir is free the moment the wait
 * returns. Reaps it. */
static void kill_and_see_the_lock_free(pid_t pid, const char *dir) {
    cr_assert_eq(kill(-pid, SIGKILL), 0);
    cr_assert_eq(ql_proc_group_wait_gone(pid, DEADLINE_MS), 0);
    cr_assert(ql_test_slow_exit_lock_free(dir), "the group was waited for, its lock is held");
    cr_assert_eq(waitpid(pid, NULL, 0), pid);
}

Test(group_running, waiting_for_a_killed_group_returns_once_it_let_go_of_its_files) {
    char dir[64];
    ql_test_tmpdir(dir, sizeof dir, "ql_group_wait");
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    pid_t pid = ql_test_slow_exit_start(dir, env);
    cr_assert_eq(ql_proc_group_wait_gone(pid, 0), UV_EBUSY, "it runs: no time to wait");
    kill_and_see_the_lock_free(pid, dir);
}

/* A member whose first thread exited shows as a zombie while its other threads run on. */
Test(group_running, a_member_whose_first_thread_exited_runs_while_its_other_threads_do) {
    char dir[64];
    ql_test_tmpdir(dir, sizeof dir, "ql_group_thread");
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    pid_t pid = ql_test_slow_exit_start_threaded(dir, env);
    ql_proc_info_t info;
    cr_assert_eq(ql_proc_info(pid, &info), 0);
    cr_assert_eq(info.state, 'Z', "the first thread has exited");
    cr_assert(ql_proc_group_running(pid), "its second thread runs");
    kill_and_see_the_lock_free(pid, dir);
}
