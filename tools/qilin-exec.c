/*
 * qilin-exec: the exec helper every shell step is started through.
 *
 * Usage: qilin-exec --parent-pid PID [--status-fd FD] -- FILE [ARG...]
 *
 * DESIGN. libuv 1.44's uv_spawn() forks and execs in one call and offers no hook that runs in
 * the child before exec, so the settings a step needs in its own process are made here, in a
 * process that then replaces itself with the step:
 *   1. prctl(PR_SET_PDEATHSIG, SIGKILL), so the step dies with the server instead of running on
 *      as an orphan. The setting survives execve() (it is cleared only for set-user-ID programs).
 *      Linux sends the signal when the parent *thread* exits, not the parent process: Qilin
 *      spawns on the loop thread, which lives exactly as long as the server, so the two are the
 *      same here. Spawning from a short-lived thread would kill steps when that thread ends.
 *   2. getppid() must still be PID. If the server died between fork() and the prctl() above,
 *      the signal was never armed and the child has already been reparented; it exits at once.
 *   3. Every fd above 2 is made close-on-exec, so the step inherits only stdin, stdout and
 *      stderr: not the server's sockets, store file or pipes that someone left inheritable (a
 *      step's orphans would otherwise keep a listening port or a pipe's write end open).
 *   4. execvp(FILE, [FILE, ARG...]): argv is passed as it is, never through a shell, so `;`,
 *      `$(...)`, backticks and quotes reach the step verbatim. (glibc's execvp runs a script
 *      without a "#!" line with /bin/sh, as POSIX asks; the arguments are still not re-parsed.)
 * The process group and session are already set by uv_spawn (UV_PROCESS_DETACHED calls
 * setsid(), so the group id is the pid the server got back): no pgid file is needed.
 *
 * PDEATHSIG covers the step process itself, not the children it forks (the setting is cleared
 * in a forked child). Those are found by the try's marker, QILIN_STEP_TOKEN, which reaches this
 * helper in its environment and is inherited by everything the step starts; the server commits
 * it before the spawn, and startup recovery kills every process carrying it before the step may
 * run again (engine/ql_proc.h, Markers). Between fork() and this helper's exec the child still
 * has the server's environment, but it runs no step code then: if the server dies there, step 2
 * makes it exit before the step exists.
 *
 * The watcher. Recovery runs where a server starts; on a store shared by several hosts the
 * master that takes over may run on another machine, where it can neither see nor kill what a
 * dead server's step left running here (docs/step-processes.md, Several hosts). So before the
 * exec, a step with a marker gets a watcher: a process of its group, detached from it by a
 * double fork (so the step's own `wait` never waits for it), that holds pidfds of the server and
 * of the step and sleeps in poll(2). When the step ends first, the watcher exits: a step that
 * ended on its own is not swept (it may leave a daemon on purpose). When the server dies first
 * (however it dies: SIGKILL, a crash, the OOM killer), the watcher SIGKILLs every process that
 * carries the try's marker (ql_proc_kill_tokens, also those that left the group with setsid),
 * then the step's whole process group, itself last. So a dead server's step processes are gone
 * within milliseconds on its own host, whoever resumes the job and wherever. The watcher keeps no
 * descriptor of the step's: stdin, stdout and stderr are /dev/null and the rest is closed, so
 * the server's pipes see EOF when the step ends. Without pidfds (kernels before 5.3) or when a
 * fork fails the step runs without a watcher, as before, and only recovery sweeps.
 *
 * When exec fails the errno goes, as a decimal line, to the status fd (if given; it is made
 * close-on-exec with the rest, so the server reads EOF without data when exec succeeds), a message
 * goes to stderr, and the exit code is 127 when the command was not found, 126 when it was found
 * but could not be executed (the shell conventions). Usage errors exit with 125.
 */
#include "engine/ql_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    QL_EXEC_EXIT_USAGE = 125,
    QL_EXEC_EXIT_NOEXEC = 126,
    QL_EXEC_EXIT_NOTFOUND = 127,
};

static int usage(const char *msg) {
    fprintf(
        stderr,
        "qilin-exec: %s\nusage: qilin-exec --parent-pid PID [--status-fd FD] -- FILE [ARG...]\n",
        msg);
    return QL_EXEC_EXIT_USAGE;
}

/* Parses a positive decimal int; returns -1 when s is not one. */
static long parse_positive(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v <= 0 || v > 0x7fffffff)
        return -1;
    return v;
}

/* Marks every fd above 2 close-on-exec (the status fd included, which is what it needs). */
static void cloexec_above_stderr(void) {
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return;
    /* Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: walk the fd table instead. */
    struct rlimit rl;
    long max = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max = (long)rl.rlim_cur;
    if (max > (1L << 20))
        max = 1L << 20;
    for (long fd = 3; fd < max; fd++)
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
}

static int pidfd_of(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Closes every descriptor but a and b (stdin, stdout and stderr become /dev/null). */
static void keep_only(int a, int b) {
    int lo = a < b ? a : b, hi = a < b ? b : a;
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        if (null > STDERR_FILENO && null != a && null != b)
            close(null);
    }
    close_range(3, (unsigned)lo - 1, 0);
    close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
    close_range((unsigned)hi + 1, ~0U, 0);
}

/* Whether the server is dead or dying, once the step has ended: its pidfd is readable, or its
 * main thread, which started the step, is a zombie. A server of several threads (qilind) signals
 * its pidfd only once its last thread has exited; its main thread's exit sends the step its
 * PDEATHSIG before that, so the step's end can wake the watcher first. The step's exit waits for
 * the lock under which the exiting thread became a zombie, so by then the zombie shows in
 * /proc. The pid still names the server: it is not reused before the pidfd is readable. */
static bool server_gone(int server_fd, pid_t server) {
    struct pollfd p = {.fd = server_fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0)
        return true;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)server);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

/* The watcher's life (see the DESIGN): never returns. */
static void watch(int server_fd, int step_fd, pid_t server, pid_t group, const char *token) {
    keep_only(server_fd, step_fd);
    struct pollfd p[2] = {{.fd = server_fd, .events = POLLIN}, {.fd = step_fd, .events = POLLIN}};
    int n;
    do
        n = poll(p, 2, -1);
    while (n < 0 && errno == EINTR);
    /* The server first: its death may have taken the step with it (see server_gone). */
    if (n > 0 && ((p[0].revents & (POLLIN | POLLHUP)) || server_gone(server_fd, server))) {
        ql_proc_tokens_t *set = NULL;
        if (ql_proc_tokens_new(&set) == 0 && ql_proc_tokens_add(set, token) == 0)
            ql_proc_kill_tokens(set, QL_PROC_DRAIN_MS, NULL);
        ql_proc_tokens_free(set);
        kill(-group, SIGKILL);
    }
    _exit(0);
}

/* Starts the watcher of this process, which is about to exec the step (see the DESIGN). Best
 * effort: without it the step runs as it would have before. */
static void start_watcher(pid_t server) {
    const char *token = getenv(QL_PROC_TOKEN_ENV);
    if (!token || !ql_proc_token_valid(token))
        return;
    int server_fd = pidfd_of(server), step_fd = pidfd_of(getpid());
    /* The pidfd names the server only if the server still lives now: a pid is reused only
     * after its process died, and our parent's death would have changed getppid(). */
    if (server_fd < 0 || step_fd < 0 || getppid() != server) {
        if (server_fd >= 0)
            close(server_fd);
        if (step_fd >= 0)
            close(step_fd);
        return;
    }
    pid_t group = getpgid(0);
    pid_t mid = fork();
    if (mid == 0) {
        if (fork() == 0)
            watch(server_fd, step_fd, server, group, token);
        _exit(0); /* the watcher is nobody's child of the step's now */
    }
    if (mid > 0) {
        int st;
        while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
            ;
    }
    close(server_fd);
    close(step_fd);
}

int main(int argc, char **argv) {
    long parent = -1;
    long status_fd = -1;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc)
            return usage("missing option value");
        if (strcmp(argv[i], "--parent-pid") == 0) {
            parent = parse_positive(argv[++i]);
            if (parent < 0)
                return usage("--parent-pid needs a positive pid");
        } else if (strcmp(argv[i], "--status-fd") == 0) {
            status_fd = parse_positive(argv[++i]);
            if (status_fd < 0)
                return usage("--status-fd needs a positive fd");
        } else {
            return usage("unknown option");
        }
    }
    if (parent < 0)
        return usage("--parent-pid is required");
    if (i >= argc || argv[i][0] == '\0')
        return usage("no command after --");

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        fprintf(stderr, "qilin-exec: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
        return QL_EXEC_EXIT_USAGE;
    }
    /* Nobody is left to read a message: the server is gone. */
    if (getppid() != (pid_t)parent)
        _exit(QL_EXEC_EXIT_USAGE);

    if (status_fd >= 0 && fcntl((int)status_fd, F_GETFD) < 0) {
        fprintf(stderr, "qilin-exec: status fd %ld: %s\n", status_fd, strerror(errno));
        return QL_EXEC_EXIT_USAGE;
    }
    cloexec_above_stderr();
    start_watcher((pid_t)parent);

    execvp(argv[i], &argv[i]);

    int err = errno;
    if (status_fd >= 0) {
        char line[32];
        int n = snprintf(line, sizeof line, "%d\n", err);
        /* Best effort: the exit code and the message below still tell what happened. */
        ssize_t w;
        do
            w = write((int)status_fd, line, (size_t)n);
        while (w < 0 && errno == EINTR);
    }
    if (err == ENOENT) {
        fprintf(stderr, "qilin-exec: command not found: %s\n", argv[i]);
        return QL_EXEC_EXIT_NOTFOUND;
    }
    fprintf(stderr, "qilin-exec: cannot execute %s: %s\n", argv[i], strerror(err));
    return QL_EXEC_EXIT_NOEXEC;
}
