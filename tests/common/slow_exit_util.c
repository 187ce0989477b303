/* See slow_exit_util.h. */
#include "tests/common/slow_exit_util.h"
#include "base/ql_procinfo.h"
#include "tests/common/loop_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_DEADLINE_MS 30000 /* touching 256 MiB under the sanitizers, on a loaded machine */

static pid_t start(const char *dir, char *const env[], bool threaded) {
    char lock[256], ready[256];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    snprintf(ready, sizeof ready, "%s/ready", dir);
    unlink(ready);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        char *argv[] = {"slow_exit",
                        lock,
                        threaded ? "1" : QL_TEST_SLOW_EXIT_MIB,
                        ready,
                        threaded ? "thread" : NULL,
                        NULL};
        execve(QL_TEST_SLOW_EXIT, argv, env);
        _exit(127);
    }
    cr_assert_gt(pid, 0);
    setpgid(pid, pid); /* both sides, so the caller never races the child's setpgid */
    int64_t deadline = ql_test_mono_ms() + START_DEADLINE_MS;
    while (access(ready, F_OK) != 0) {
        int st;
        cr_assert_eq(waitpid(pid, &st, WNOHANG), 0, "slow_exit ended before it was ready: %d", st);
        cr_assert_lt(ql_test_mono_ms(), deadline, "slow_exit was not ready in time");
        usleep(1000); /* a poll with a deadline: the helper has no other way to say it */
    }
    return pid;
}

pid_t ql_test_slow_exit_start(const char *dir, char *const env[]) {
    return start(dir, env, false);
}

pid_t ql_test_slow_exit_start_threaded(const char *dir, char *const env[]) {
    pid_t pid = start(dir, env, true);
    int64_t deadline = ql_test_mono_ms() + START_DEADLINE_MS;
    ql_proc_info_t info;
    while (ql_proc_info(pid, &info) == 0 && info.state != 'Z') {
        cr_assert_lt(ql_test_mono_ms(), deadline, "slow_exit's first thread did not exit");
        usleep(1000);
    }
    cr_assert_eq(kill(pid, 0), 0, "slow_exit ended altogether");
    return pid;
}

bool ql_test_slow_exit_lock_free(const char *dir) {
    char lock[256];
    snprintf(lock, sizeof lock, "%s/lock", dir);
    int fd = open(lock, O_RDWR | O_CLOEXEC);
    cr_assert_geq(fd, 0, "%s: %m", lock);
    bool free_now = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return free_now;
}
