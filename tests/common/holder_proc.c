/* See holder_proc.h. */
#include "tests/common/holder_proc.h"

#include "base/ql_procinfo.h"
#include "tests/common/loop_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void ql_test_holder_start(ql_test_holder_t *h, const char *exe, const char *data, long hold_ms,
                          int64_t deadline_ms) {
    memset(h, 0, sizeof *h);
    h->out_fd = -1;
    cr_assert_eq(access(exe, X_OK), 0, "%s is not built", exe);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    char hold[32];
    snprintf(hold, sizeof hold, "%ld", hold_ms);
    char *args[] = {(char *)exe, (char *)data, hold, NULL};
    int rc = posix_spawn(&h->pid, args[0], &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    h->out_fd = p[0];
    cr_assert_eq(rc, 0, "cannot start %s", args[0]);
    char buf[64];
    size_t len = 0;
    int64_t until = ql_test_mono_ms() + deadline_ms;
    while (!memmem(buf, len, "HOLDING\n", 8)) {
        int64_t left = until - ql_test_mono_ms();
        cr_assert_gt(left, 0, "guard_holder never said HOLDING");
        struct pollfd pfd = {.fd = h->out_fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        ssize_t n = read(h->out_fd, buf + len, sizeof buf - len);
        cr_assert_gt(n, 0, "guard_holder exited before it held the transaction");
        len += (size_t)n;
        cr_assert_lt(len, sizeof buf);
    }
}

void ql_test_holder_sigstop(ql_test_holder_t *h, int64_t deadline_ms) {
    cr_assert_eq(kill(h->pid, SIGSTOP), 0);
    int64_t until = ql_test_mono_ms() + deadline_ms;
    ql_proc_info_t pi = {0};
    while (ql_proc_info(h->pid, &pi) == 0 && pi.state != 'T' && ql_test_mono_ms() < until)
        usleep(1000); /* polling the kernel's view of the child, with a deadline */
    cr_assert_eq(pi.state, 'T', "guard_holder is not stopped (state %c)", pi.state);
}

bool ql_test_holder_exited(ql_test_holder_t *h) {
    if (h->pid <= 0 || h->reaped)
        return h->reaped;
    if (waitpid(h->pid, &h->status, WNOHANG) == h->pid)
        h->reaped = true;
    return h->reaped;
}

void ql_test_holder_reap(ql_test_holder_t *h) {
    if (h->pid <= 0)
        return; /* never started (a zeroed struct's out_fd is not ours) */
    if (!ql_test_holder_exited(h)) {
        kill(h->pid, SIGKILL);
        if (waitpid(h->pid, &h->status, 0) == h->pid)
            h->reaped = true;
    }
    if (h->out_fd >= 0)
        close(h->out_fd);
    h->out_fd = -1;
}
