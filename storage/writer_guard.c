/* The writer guard: see writer_guard.h for the design. */
#include "writer_guard.h"

#include "base/ql_error.h"
#include "base/ql_procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

/* After the stall bound, how often the holder is looked at again. */
#define LOOK_EVERY_MS 100

struct ql_wguard {
    pthread_mutex_t mu; /* the threads of this process, one at a time */
    int fd;
    int64_t stall_ms;
    ql_log_t *log;
    ql_log_t own_log; /* when the opener gave none */
    char path[4096];
    pid_t self;
    uint64_t self_start;
};

int ql_wguard_open(const char *dir, int64_t stall_ms, ql_log_t *log, ql_wguard_t **out) {
    *out = NULL;
    ql_wguard_t *g = calloc(1, sizeof *g);
    if (!g)
        return UV_ENOMEM;
    if (snprintf(g->path, sizeof g->path, "%s/writer.guard", dir) >= (int)sizeof g->path) {
        free(g);
        return UV_ENAMETOOLONG;
    }
    g->fd = open(g->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (g->fd < 0) {
        int rc = -errno;
        free(g);
        return rc;
    }
    pthread_mutex_init(&g->mu, NULL);
    g->stall_ms = stall_ms;
    if (log) {
        g->log = log;
    } else {
        ql_log_init(&g->own_log, QL_LOG_INFO);
        g->log = &g->own_log;
    }
    g->self = getpid();
    g->self_start = ql_proc_self_start();
    *out = g;
    return 0;
}

void ql_wguard_close(ql_wguard_t *g) {
    if (!g)
        return;
    close(g->fd);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int try_lock(ql_wguard_t *g) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(g->fd, F_SETLK, &fl) == 0)
        return 0;
    return errno == EAGAIN || errno == EACCES ? UV_EAGAIN : -errno;
}

/* Who holds the guard now (0: nobody, or a process the kernel cannot name to us). */
static pid_t holder_pid(ql_wguard_t *g) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(g->fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
        return 0;
    return fl.l_pid;
}

/* How long the holder's record says it has held the guard, if the record is that holder's. */
static int64_t held_ms(ql_wguard_t *g, pid_t pid, uint64_t start) {
    char buf[128];
    ssize_t n = pread(g->fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    long rpid;
    unsigned long long rstart;
    long long since;
    if (sscanf(buf, "pid=%ld start=%llu since_boot_ms=%lld", &rpid, &rstart, &since) != 3 ||
        rpid != (long)pid || rstart != start)
        return -1;
    return ql_boot_ms() - since;
}

typedef struct {
    bool said_running;
    bool said_other;
    pid_t killed;
} wait_state_t;

/* The stall bound has passed: look at the holder and kill it if it is stopped. */
static void look_at_holder(ql_wguard_t *g, wait_state_t *ws, int64_t waited) {
    pid_t pid = holder_pid(g);
    if (pid <= 0 || pid == ws->killed)
        return;
    ql_proc_info_t pi;
    if (ql_proc_info(pid, &pi) != 0)
        return; /* gone already: the next try takes the guard */
    if (pi.uid != geteuid()) {
        if (!ws->said_other)
            ql_log(g->log, QL_LOG_WARN, "storage",
                   "waiting for the writer guard held by pid=%ld of uid=%ld waited_ms=%lld "
                   "reason=\"another user's process is not killed; its write transaction "
                   "delays this server's writes until it ends\"",
                   (long)pid, (long)pi.uid, (long long)waited);
        ws->said_other = true;
        return;
    }
    int64_t held = held_ms(g, pid, pi.start);
    if (!ql_proc_is_stopped(pi.state)) {
        if (!ws->said_running)
            ql_log(g->log, QL_LOG_WARN, "storage",
                   "waiting for the writer guard held by pid=%ld state=%c held_ms=%lld "
                   "waited_ms=%lld reason=\"the holder is running (a slow commit or sync): it "
                   "is waited for, not killed\"",
                   (long)pid, pi.state, (long long)held, (long long)waited);
        ws->said_running = true;
        return;
    }
    /* Still the holder? The guard may have changed hands since F_GETLK. */
    if (holder_pid(g) != pid)
        return;
    int rc = ql_proc_kill(pid, pi.start, SIGKILL);
    if (rc == UV_ESRCH)
        return;
    if (rc) {
        ql_log(g->log, QL_LOG_ERROR, "storage",
               "cannot kill pid=%ld, a stopped holder of the writer guard: %s", (long)pid,
               ql_strerror(rc));
        ws->killed = pid; /* do not retry every step; its death or continuation ends the wait */
        return;
    }
    ws->killed = pid;
    ql_log(g->log, QL_LOG_WARN, "storage",
           "killed pid=%ld start=%llu, holder of the writer guard, with SIGKILL state=%c "
           "held_ms=%lld waited_ms=%lld reason=\"a %s process held the store's write "
           "transaction longer than qilin.storage.writer-stall-ms=%lld and would have stalled "
           "every server's writes for as long as it stays stopped\"",
           (long)pid, (unsigned long long)pi.start, pi.state, (long long)held, (long long)waited,
           pi.state == 't' ? "traced" : "stopped", (long long)g->stall_ms);
}

int ql_wguard_enter(ql_wguard_t *g) {
    pthread_mutex_lock(&g->mu);
    int rc = try_lock(g);
    if (rc == UV_EAGAIN) {
        wait_state_t ws = {0};
        int64_t t0 = mono_ms(), next_look = t0 + g->stall_ms;
        long step_us = 200;
        /* Ends when the guard is taken: a stopped holder is killed, a running one finishes. */
        while ((rc = try_lock(g)) == UV_EAGAIN) {
            struct timespec ts = {0, step_us * 1000};
            nanosleep(&ts, NULL);
            if (step_us < 5000)
                step_us *= 2;
            int64_t now = mono_ms();
            if (now >= next_look) {
                look_at_holder(g, &ws, now - t0);
                next_look = now + LOOK_EVERY_MS;
            }
        }
    }
    if (rc) {
        pthread_mutex_unlock(&g->mu);
        return rc;
    }
    char line[128]; /* fixed width: each record overwrites the last one whole */
    int n = snprintf(line, sizeof line, "pid=%-10ld start=%-20llu since_boot_ms=%-20lld\n",
                     (long)g->self, (unsigned long long)g->self_start, (long long)ql_boot_ms());
    if (pwrite(g->fd, line, (size_t)n, 0) < 0) {
        /* The record is for people and for the log: the lock itself is held. */
    }
    return 0;
}

void ql_wguard_leave(ql_wguard_t *g) {
    struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
    fcntl(g->fd, F_SETLK, &fl);
    pthread_mutex_unlock(&g->mu);
}
