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
    if ((rc = ql_fence_raise(txn, out))) {
        ql_txn_abort(txn);
        return rc;
    }
    return ql_txn_commit(txn);
}

static int file_try_acquire(ql_lock_t *base, bool *acquired, char *holder, size_t cap) {
    file_lock_t *l = (file_lock_t *)base;
    *acquired = false;
    if (base->held) {
        *acquired = true;
        return 0;
    }
    if (l->fd < 0) {
        l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (l->fd < 0)
            return -errno;
    }
    if (flock(l->fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK)
            return -errno;
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

/* flock(2) holds the open file, not the path: if <data>/job_engine.lock was removed or
 * replaced, another server can lock a new file there, so the holding is over. */
static bool file_still_held(ql_lock_t *base) {
    file_lock_t *l = (file_lock_t *)base;
    if (!base->held)
        return false;
    struct stat by_fd, by_path;
    if (fstat(l->fd, &by_fd) != 0 || stat(l->path, &by_path) != 0)
        return false;
    return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

static void file_release(ql_lock_t *base) {
    file_lock_t *l = (file_lock_t *)base;
    if (!base->held)
        return;
    if (ftruncate(l->fd, 0) != 0) {
        /* Stale details are harmless: the next holder rewrites them. */
    }
    flock(l->fd, LOCK_UN);
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
