/*
 * The other servers' wake sockets, for the LMDB commits that send them a datagram
 * (store_lmdb_changes.c; docs/architecture.md, Wake-ups across servers).
 *
 * WHY A CACHE. A commit that wakes schedulers used to open the wake/ folder and read it whole
 * (about ten system calls, 0.17 ms at the median), on the writer thread between the commit and
 * the callers' answers: on a server alone on its data directory that was a tenth of a commit
 * cycle spent finding no one. The folder changes only when a server starts or stops listening,
 * so the list of sockets is kept and read again only when the folder's modification time moved.
 *
 * WHY THE TIME CHECK IS SAFE. A socket bound or removed in wake/ sets the folder's mtime to the
 * file system's clock, which is coarse (a few ms) and may lag the clock read here. A change made
 * after a read of the folder therefore shows as a different mtime, unless it fell in the same
 * coarse tick as the change the read saw. So a listing is reused only when the mtime it saw is
 * more than RACY_NS older than the moment of the read (git's "racily clean" rule); a listing
 * taken soon after a change is read again on the next send, until one is old enough. Wake-ups
 * are a latency aid only (a scheduler's poll interval still finds every change), but none is
 * lost by this cache either.
 */
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A listing whose folder changed less than this before it was read is read again. */
#define RACY_NS (1000LL * 1000 * 1000)

typedef struct wake_peer {
    char name[64]; /* the socket's file name in wake/ */
    struct sockaddr_un addr;
} wake_peer_t;

struct lmdb_wake_peers {
    pthread_mutex_t mu; /* commits of several threads may send */
    int dir_fd;         /* wake/, kept open; -1 until it exists */
    int sock;           /* the sending socket; -1 until the first send */
    struct timespec mtime;
    bool reusable; /* the listing may be reused while the folder's mtime stays at mtime */
    wake_peer_t *peers;
    size_t n, cap;
    uint64_t scans;
};

static int64_t ts_ns(const struct timespec *t) {
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* The address of name in the wake folder: 0, or UV_ENAMETOOLONG (store_lmdb_changes.c). */
int lmdb_wake_addr(const ql_store_t *s, int dir_fd, const char *name, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path, sizeof a->sun_path, "%s/wake/%s", s->path, name);
    if (n > 0 && (size_t)n < sizeof a->sun_path)
        return 0;
    /* a unix socket path has at most 107 bytes: a longer one goes through the folder's fd */
    n = snprintf(a->sun_path, sizeof a->sun_path, "/proc/self/fd/%d/%s", dir_fd, name);
    return n > 0 && (size_t)n < sizeof a->sun_path ? 0 : UV_ENAMETOOLONG;
}

static bool is_socket_name(const char *name) {
    size_t n = strlen(name);
    return n >= 6 && n < sizeof((wake_peer_t *)0)->name && strcmp(name + n - 5, ".sock") == 0;
}

static void add_peer(ql_store_t *s, struct lmdb_wake_peers *p, const char *name) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4;
        wake_peer_t *grown = realloc(p->peers, cap * sizeof *grown);
        if (!grown) {
            p->reusable = false; /* the listing is short: read it again next time */
            return;
        }
        p->peers = grown;
        p->cap = cap;
    }
    wake_peer_t *w = &p->peers[p->n];
    if (lmdb_wake_addr(s, p->dir_fd, name, &w->addr))
        return;
    snprintf(w->name, sizeof w->name, "%s", name);
    p->n++;
}

/* Reads wake/ again into p->peers; st is the folder's stat taken before the read. */
static void rescan(ql_store_t *s, struct lmdb_wake_peers *p, const struct stat *st) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    p->n = 0;
    p->scans++;
    p->mtime = st->st_mtim;
    p->reusable = ts_ns(&now) - ts_ns(&st->st_mtim) > RACY_NS;
    int dup_fd = dup(p->dir_fd);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        p->reusable = false;
        return;
    }
    rewinddir(d); /* the duplicate shares dir_fd's offset, left at the end by the last read */
    struct dirent *e;
    while ((e = readdir(d)))
        if (is_socket_name(e->d_name))
            add_peer(s, p, e->d_name);
    closedir(d);
}

/* Opens what the first send needs; false: nobody ever listened here (no wake/ folder yet). */
static bool ready(ql_store_t *s, struct lmdb_wake_peers *p) {
    if (p->dir_fd < 0) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/wake", s->path);
        p->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (p->dir_fd < 0)
            return false;
    }
    if (p->sock < 0)
        p->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    return p->sock >= 0;
}

void lmdb_wake_peers_send(ql_store_t *s, const void *msg, size_t len, const char *self) {
    struct lmdb_wake_peers *p = ql_lmdb(s)->peers;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    struct stat st;
    if (ready(s, p) && fstat(p->dir_fd, &st) == 0) {
        if (!p->reusable || ts_ns(&st.st_mtim) != ts_ns(&p->mtime))
            rescan(s, p, &st);
        for (size_t i = 0; i < p->n; i++) {
            wake_peer_t *w = &p->peers[i];
            if (strcmp(w->name, self) == 0)
                continue;
            if (sendto(p->sock, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&w->addr,
                       sizeof w->addr) < 0 &&
                errno == ECONNREFUSED) {
                unlinkat(p->dir_fd, w->name, 0); /* its process is gone */
                p->reusable = false;
            }
        }
    }
    pthread_mutex_unlock(&p->mu);
}

int lmdb_wake_peers_open(ql_store_t *s) {
    struct lmdb_wake_peers *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return UV_ENOMEM;
    }
    p->dir_fd = p->sock = -1;
    ql_lmdb(s)->peers = p;
    return 0;
}

void lmdb_wake_peers_close(ql_store_t *s) {
    struct lmdb_wake_peers *p = ql_lmdb(s)->peers;
    if (!p)
        return;
    if (p->dir_fd >= 0)
        close(p->dir_fd);
    if (p->sock >= 0)
        close(p->sock);
    pthread_mutex_destroy(&p->mu);
    free(p->peers);
    free(p);
    ql_lmdb(s)->peers = NULL;
}

uint64_t lmdb_wake_peers_scans(ql_store_t *s) {
    struct lmdb_wake_peers *p = ql_lmdb(s)->peers;
    if (!p)
        return 0;
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->scans;
    pthread_mutex_unlock(&p->mu);
    return n;
}
