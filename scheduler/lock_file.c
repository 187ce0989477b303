/* The embedded store's job engine lock: flock(2) on <data>/job_engine.lock, with the master's
 * lease in the same file (see ql_lock.h). */
#include "scheduler/ql_lock.h"

#include "base/ql_procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* After killing a holder, how long try_acquire waits for its death to free the flock. */
#define DEATH_WAIT_MS 500

typedef struct {
    ql_lock_t base;
    char *path;
    int fd;
    ql_store_t *store;
    int64_t lease_ms; /* 0: no lease */
    ql_log_t *log;
    char line[320];    /* the holder line, then the lease line (fixed width) */
    size_t holder_len; /* length of the holder line in line */
    uint64_t self_start;
    pid_t said_pid; /* the holder last logged about, so a standby logs a case once */
} file_lock_t;

/* Rewrites the file: the holder line (for people and for try_acquire's holder text), then the
 * lease line, whose fields have fixed widths so every renewal overwrites it whole. */
static void write_lease(file_lock_t *l) {
    int n = snprintf(l->line + l->holder_len, sizeof l->line - l->holder_len,
                     "lease pid=%-10ld start=%-20llu renewed_boot_ms=%-20lld\n", (long)getpid(),
                     (unsigned long long)l->self_start, (long long)ql_boot_ms());
    if (n > 0 && pwrite(l->fd, l->line, l->holder_len + (size_t)n, 0) < 0) {
        /* A renewal that cannot be written looks like a wedged master to the standbys, which
         * is what a master that cannot write its own data directory is. */
    }
}

/* Starts a holding's text: a new holder line saying what (e.g. "fencing epoch 7"), the file
 * cut to it and the lease renewed. */
static void set_holder_line(file_lock_t *l, const char *what) {
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    int n = snprintf(l->line, sizeof l->line / 2, "pid %ld on host %s, %s\n", (long)getpid(), host,
                     what);
    l->holder_len = n > 0 ? (size_t)n : 0;
    if (ftruncate(l->fd, 0) != 0) {
        /* informational, as above */
    }
    write_lease(l);
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lease line of the file, if there is one that parses. */
static bool read_lease(file_lock_t *l, long *pid, unsigned long long *start, long long *renewed) {
    char buf[512];
    ssize_t n = pread(l->fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    const char *lease = strstr(buf, "\nlease ");
    return lease && sscanf(lease + 1, "lease pid=%ld start=%llu renewed_boot_ms=%lld", pid, start,
                           renewed) == 3;
}

/*
 * A standby found the lock held: reads the holder's lease and, when it is older than lease_ms,
 * kills the holder if it is still the process that wrote it (pid and start time) and of our
 * uid. Stopped, traced or simply not renewing (its loop wedged), such a master schedules
 * nothing and keeps its flock, so no other server could take over until it dies. Returns
 * whether it killed the holder.
 */
static bool expire_lease(file_lock_t *l) {
    long pid;
    unsigned long long start;
    long long renewed;
    if (!read_lease(l, &pid, &start, &renewed))
        return false; /* a holder that writes no lease (an older build) cannot be judged */
    int64_t age = ql_boot_ms() - renewed;
    if (age <= l->lease_ms || pid == (long)getpid()) {
        l->said_pid = 0;
        return false;
    }
    ql_proc_info_t pi;
    int rc = ql_proc_info((pid_t)pid, &pi);
    if (rc || pi.start != start)
        return false; /* not the writer of that lease: a new holder that has not written yet */
    /* Read again after looking at the process: a master that was continued meanwhile has
     * renewed, and a read that raced with a renewal does not decide alone. */
    long pid2;
    unsigned long long start2;
    long long renewed2;
    if (!read_lease(l, &pid2, &start2, &renewed2) || pid2 != pid || start2 != start ||
        renewed2 != renewed)
        return false;
    if (pi.uid != geteuid()) {
        if (l->said_pid != (pid_t)pid)
            ql_log(l->log, QL_LOG_WARN, "node",
                   "standby: the master pid=%ld has not renewed its lease for %lld ms, but it "
                   "runs as uid=%ld: not killed reason=\"another user's process\"",
                   pid, (long long)age, (long)pi.uid);
        l->said_pid = (pid_t)pid;
        return false;
    }
    if ((rc = ql_proc_kill((pid_t)pid, start, SIGKILL))) {
        if (rc != UV_ESRCH && l->said_pid != (pid_t)pid)
            ql_log(l->log, QL_LOG_ERROR, "node", "standby: cannot kill the master pid=%ld: %s", pid,
                   ql_strerror(rc));
        l->said_pid = (pid_t)pid;
        return false;
    }
    const char *what = ql_proc_is_stopped(pi.state)
                           ? (pi.state == 't' ? "traced" : "stopped")
                           : "running but not renewing its lease (its loop is wedged)";
    ql_log(l->log, QL_LOG_WARN, "node",
           "standby: killed the master pid=%ld start=%llu with SIGKILL state=%c lease_age_ms=%lld "
           "reason=\"its lease is older than qilin.server.master-lease-ms=%lld: it is %s and "
           "schedules nothing while it keeps the job engine lock; its death frees the lock for "
           "this server, and the fencing epoch this server raises refuses anything it still "
           "writes\"",
           pid, start, pi.state, (long long)age, (long long)l->lease_ms, what);
    l->said_pid = 0;
    return true;
}

static int raise_epoch(ql_store_t *store, uint64_t *out) {
    ql_txn_t *txn;
    int rc = ql_txn_begin(store, true, &txn);
    if (rc)
        return rc;
    uint64_t epoch;
    if ((rc = ql_fence_raise(txn, &epoch))) {
        ql_txn_abort(txn);
        return rc;
    }
    if ((rc = ql_txn_commit(txn)) == 0)
        *out = epoch; /* only an epoch that is stored becomes the token */
    return rc;
}

/* Whether fd is the file now at path: flock(2) locks the open file, so a lock on a file that
 * was removed or replaced since it was opened excludes nobody. */
static bool is_file_at_path(int fd, const char *path) {
    struct stat by_fd, by_path;
    if (fstat(fd, &by_fd) != 0 || stat(path, &by_path) != 0)
        return false;
    return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

static void close_fd(file_lock_t *l) {
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

static int file_try_acquire(ql_lock_t *base, bool *acquired, char *holder, size_t cap) {
    file_lock_t *l = (file_lock_t *)base;
    *acquired = false;
    if (base->held) {
        *acquired = true;
        return 0;
    }
    /* A lock won on a file that is no longer at the path is worthless: open the path anew
     * (creating it) and try again; twice covers a replacement racing with this call. */
    for (int tries = 0;; tries++) {
        if (l->fd < 0) {
            /* 0600: whoever can open the file can flock it, and a foreign holder stops every
             * server of this store from scheduling. A file left 0644 by an older version is
             * tightened (when it is ours; otherwise fchmod fails and the mode stays). */
            l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
            if (l->fd < 0)
                return -errno;
            struct stat st;
            if (fstat(l->fd, &st) == 0 && (st.st_mode & 077) && st.st_uid == geteuid())
                (void)fchmod(l->fd, 0600);
        }
        if (flock(l->fd, LOCK_EX | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK)
                return -errno;
            if (!is_file_at_path(l->fd, l->path) && tries < 2) {
                close_fd(l); /* held, but on a stale file: look at the one at the path */
                continue;
            }
            if (l->lease_ms > 0 && is_file_at_path(l->fd, l->path) && expire_lease(l)) {
                /* SIGKILL ends even a stopped process at once; its flock goes with it. */
                bool freed = false;
                for (int64_t until = mono_ms() + DEATH_WAIT_MS; !freed && mono_ms() < until;) {
                    struct timespec ts = {0, 5 * 1000000};
                    nanosleep(&ts, NULL);
                    freed = flock(l->fd, LOCK_EX | LOCK_NB) == 0;
                }
                if (freed) {
                    if (is_file_at_path(l->fd, l->path))
                        break;
                    close_fd(l);
                    continue;
                }
            }
            if (holder && cap) {
                ssize_t n = pread(l->fd, holder, cap - 1, 0);
                holder[n > 0 ? n : 0] = '\0';
                char *nl = strchr(holder, '\n');
                if (nl)
                    *nl = '\0';
                if (!holder[0])
                    snprintf(holder, cap, "another process (no details written yet)");
            }
            return 0;
        }
        if (is_file_at_path(l->fd, l->path))
            break;
        close_fd(l); /* closing drops the worthless lock */
        if (tries >= 2)
            return UV_EAGAIN;
    }
    /* The lease first: raising the epoch may wait for another process's write (up to
     * qilin.storage.writer-stall-ms), and a standby must not take that for a wedged master,
     * nor read the lease a dead previous holder left in the file. */
    set_holder_line(l, "raising the fencing epoch");
    int rc = raise_epoch(l->store, &base->fence);
    if (rc) {
        if (ftruncate(l->fd, 0) != 0) {
            /* stale details are harmless, as in file_release */
        }
        flock(l->fd, LOCK_UN);
        return rc;
    }
    /* The holder's details are informational; the lock itself is held. */
    char what[48];
    snprintf(what, sizeof what, "fencing epoch %llu", (unsigned long long)base->fence);
    set_holder_line(l, what);
    base->held = true;
    *acquired = true;
    return 0;
}

/* If <data>/job_engine.lock was removed or replaced, another server can lock a new file there,
 * so the holding is over. */
static bool file_still_held(ql_lock_t *base) {
    file_lock_t *l = (file_lock_t *)base;
    return base->held && is_file_at_path(l->fd, l->path);
}

static void file_release(ql_lock_t *base) {
    file_lock_t *l = (file_lock_t *)base;
    if (!base->held)
        return;
    if (ftruncate(l->fd, 0) != 0) {
        /* Stale details are harmless: the next holder rewrites them. */
    }
    flock(l->fd, LOCK_UN);
    if (!is_file_at_path(l->fd, l->path))
        close_fd(l); /* a holding that was lost: the next try opens the file at the path */
    base->held = false;
    base->fence = 0;
}

static void file_free(ql_lock_t *base) {
    file_lock_t *l = (file_lock_t *)base;
    file_release(base);
    if (l->fd >= 0)
        close(l->fd);
    free(l->path);
    free(l);
}

static void file_renew(ql_lock_t *base) {
    file_lock_t *l = (file_lock_t *)base;
    if (base->held)
        write_lease(l);
}

static const ql_lock_ops_t file_ops = {
    .kind = "file",
    .try_acquire = file_try_acquire,
    .still_held = file_still_held,
    .renew = file_renew,
    .release = file_release,
    .free = file_free,
};

int ql_lock_file_new(const char *dir, ql_store_t *store, const ql_lock_file_opts_t *opts,
                     ql_lock_t **out) {
    file_lock_t *l = calloc(1, sizeof *l);
    if (!l)
        return UV_ENOMEM;
    size_t n = strlen(dir) + sizeof "/job_engine.lock";
    if (!(l->path = malloc(n))) {
        free(l);
        return UV_ENOMEM;
    }
    snprintf(l->path, n, "%s/job_engine.lock", dir);
    l->fd = -1;
    l->store = store;
    if (opts) {
        l->lease_ms = opts->lease_ms;
        l->log = opts->log;
    }
    l->self_start = ql_proc_self_start();
    l->base.ops = &file_ops;
    *out = &l->base;
    return 0;
}
