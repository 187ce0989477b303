/*
 * Wake-ups across servers on the embedded LMDB store (docs/architecture.md, Wake-ups across
 * servers; the contract is in ql_store.h, "changes made by other servers").
 *
 * DESIGN.
 * - The channel: every server that listens binds a unix datagram socket of its own in the data
 *   directory's wake/ folder (wake/<pid>.<fd>.sock; the folder is 0700, like the store's files
 *   the server user's alone). Servers sharing an LMDB
 *   store are processes of one host, so that folder is the whole cluster.
 * - Sending: a job put that wakes a scheduler (store_change_wakes) notes the job's id on its
 *   transaction level; a committed nested level hands its notes to its parent, one rolled back
 *   drops them (as on PostgreSQL). After the top-level commit succeeded, one datagram
 *   naming the ids (16 bytes each; empty: anything may have changed) goes to every socket in
 *   wake/, without blocking, but this store's own: its process was woken already by whatever
 *   committed (a submission, an action, a step end kicks the scheduler; docs/architecture.md),
 *   and a datagram to itself would only wake its loop a second time. A socket nobody reads any more
 * (its process died) refuses it (ECONNREFUSED) and is removed. A full receive buffer drops the
 * datagram: the receiver has plenty to read already, and its poll interval still covers it.
 *   The list of sockets is kept between commits and read again only when the folder changed
 *   (store_lmdb_wake_peers.c).
 * - Receiving: the socket is the change session's descriptor; a drain reads every datagram
 *   waiting, without blocking. An idle server spends nothing on it: no timer, no system call
 *   until a datagram arrives.
 * - Addresses: a unix socket path has at most 107 bytes; a longer one is reached through
 *   /proc/self/fd/<the wake folder's descriptor>/<name>.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Ids named in one datagram at most; more are sent as "anything". */
#define WAKE_NAMED 64

void lmdb_changes_note(ql_txn_t *t, const ql_id_t *job) {
    lmdb_txn_t *lt = (lmdb_txn_t *)t;
    if (lt->woke_all)
        return;
    for (size_t i = 0; i < lt->n_woke; i++)
        if (ql_id_eq(&lt->woke[i], job))
            return;
    if (lt->n_woke == WAKE_NAMED) {
        lt->woke_all = true;
        return;
    }
    if (lt->n_woke == lt->cap_woke) {
        size_t cap = lt->cap_woke ? lt->cap_woke * 2 : 4;
        ql_id_t *p = realloc(lt->woke, cap * sizeof *p);
        if (!p) {
            lt->woke_all = true;
            return;
        }
        lt->woke = p;
        lt->cap_woke = cap;
    }
    lt->woke[lt->n_woke++] = *job;
}

void lmdb_changes_merge(ql_txn_t *into, ql_txn_t *from) {
    lmdb_txn_t *f = (lmdb_txn_t *)from;
    if (f->woke_all)
        ((lmdb_txn_t *)into)->woke_all = true;
    for (size_t i = 0; i < f->n_woke; i++)
        lmdb_changes_note(into, &f->woke[i]);
}

static int open_wake_dir(const ql_store_t *s, bool create) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/wake", s->path);
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

void lmdb_changes_send(ql_txn_t *t) {
    lmdb_txn_t *lt = (lmdb_txn_t *)t;
    if (!lt->n_woke && !lt->woke_all)
        return;
    ql_store_t *s = t->store;
    char self[32] = "";
    int self_fd = atomic_load(&ql_lmdb(s)->wake_self);
    if (self_fd >= 0)
        snprintf(self, sizeof self, "%ld.%d.sock", (long)getpid(), self_fd);
    uint8_t msg[WAKE_NAMED * 16];
    size_t len = lt->woke_all ? 0 : lt->n_woke * 16;
    for (size_t i = 0; i < len / 16; i++)
        memcpy(msg + i * 16, lt->woke[i].b, 16);
    lmdb_wake_peers_send(s, msg, len, self); /* store_lmdb_wake_peers.c */
}

/* ---- receiving ---- */

void lmdb_changes_close(ql_store_t *s) {
    lmdb_store_t *L = ql_lmdb(s);
    if (L->wake_fd < 0)
        return;
    atomic_store(&L->wake_self, -1);
    close(L->wake_fd);
    L->wake_fd = -1;
    if (L->wake_dir >= 0) {
        unlinkat(L->wake_dir, L->wake_name, 0);
        close(L->wake_dir);
        L->wake_dir = -1;
    }
}

int lmdb_changes_listen(ql_store_t *s, ql_err_t *err) {
    if (s->read_only)
        return UV_ENOTSUP;
    lmdb_store_t *L = ql_lmdb(s);
    /* A session that replaces one missed what was sent in between: say so first. */
    L->wake_missed = L->wake_listened;
    lmdb_changes_close(s);
    L->wake_dir = open_wake_dir(s, true);
    if (L->wake_dir < 0) {
        int rc = -errno;
        return ql_err_set(err, rc, "cannot open %s/wake: %s", s->path, strerror(errno));
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = fd < 0 ? -errno : 0;
    /* Named by pid and descriptor, unique while this socket is open (two stores of one process
     * on one data directory, as in tests, each have their own); a file of that name is a dead
     * process's (pids are reused) or a socket this process closed without removing. */
    snprintf(L->wake_name, sizeof L->wake_name, "%ld.%d.sock", (long)getpid(), fd);
    struct sockaddr_un a;
    if (!rc)
        rc = lmdb_wake_addr(s, L->wake_dir, L->wake_name, &a);
    if (!rc)
        unlinkat(L->wake_dir, L->wake_name, 0);
    if (!rc && bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
        rc = -errno;
    if (rc) {
        if (fd >= 0)
            close(fd);
        close(L->wake_dir);
        L->wake_dir = -1;
        return ql_err_set(err, rc, "cannot listen for changes in %s/wake: %s", s->path,
                          ql_strerror(rc));
    }
    L->wake_fd = fd;
    atomic_store(&L->wake_self, fd);
    L->wake_listened = true;
    return 0;
}

int lmdb_changes_fd(ql_store_t *s) {
    return ql_lmdb(s)->wake_fd;
}

int lmdb_changes_drain(ql_store_t *s, ql_store_change_cb cb, void *arg) {
    lmdb_store_t *L = ql_lmdb(s);
    if (L->wake_fd < 0)
        return QL_EUNAVAILABLE;
    if (L->wake_missed) {
        L->wake_missed = false;
        cb(arg, NULL);
    }
    uint8_t msg[WAKE_NAMED * 16 + 16];
    for (int i = 0; i < 1024; i++) { /* bounded: the rest wakes the next loop turn */
        ssize_t n = recv(L->wake_fd, msg, sizeof msg, MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : QL_EUNAVAILABLE;
        if (n == 0 || n % 16 != 0) {
            cb(arg, NULL);
            continue;
        }
        for (ssize_t k = 0; k < n; k += 16) {
            ql_id_t id;
            memcpy(id.b, msg + k, 16);
            cb(arg, &id);
        }
    }
    return 0;
}
