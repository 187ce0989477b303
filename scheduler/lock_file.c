/* The embedded store's job engine lock: flock(2) on <data>/job_engine.lock. */
#include "scheduler/ql_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    ql_lock_t base;
    char *path;
    int fd;
    ql_store_t *store;
} file_lock_t;

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
    int rc = raise_epoch(l->store, &base->fence);
    if (rc) {
        flock(l->fd, LOCK_UN);
        return rc;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char line[512];
    int n = snprintf(line, sizeof line, "pid %ld on host %s, fencing epoch %llu\n", (long)getpid(),
                     host, (unsigned long long)base->fence);
    if (ftruncate(l->fd, 0) == 0 && pwrite(l->fd, line, (size_t)n, 0) < 0) {
        /* The holder's details are informational; the lock itself is held. */
    }
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

static const ql_lock_ops_t file_ops = {
    .try_acquire = file_try_acquire,
    .still_held = file_still_held,
    .release = file_release,
    .free = file_free,
};

int ql_lock_file_new(const char *dir, ql_store_t *store, ql_lock_t **out) {
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
    l->base.ops = &file_ops;
    *out = &l->base;
    return 0;
}
