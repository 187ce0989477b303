/* A TCP relay for tests (tcp_relay.h). */
#include "tests/common/tcp_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct conn {
    int fd[2]; /* 0: the accepted client, 1: the upstream */
    pthread_t dir[2];
    bool running[2]; /* the direction's thread was started */
} conn_t;

typedef struct half {
    struct ql_test_relay *r;
    conn_t *c;
    int from; /* reads fd[from], writes fd[1 - from] */
} half_t;

struct ql_test_relay {
    int listen_fd;
    int stop_pipe[2];
    struct sockaddr_in to;
    pthread_t acceptor;
    pthread_mutex_t mu;
    conn_t conns[QL_TEST_RELAY_MAX];
    half_t halves[QL_TEST_RELAY_MAX][2];
    int n; /* connections accepted */
};

static void *pump(void *arg) {
    half_t *h = arg;
    int in = h->c->fd[h->from], out = h->c->fd[1 - h->from];
    char buf[16384];
    for (;;) {
        ssize_t n = recv(in, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ssize_t off = 0;
        while (off < n) {
            /* MSG_NOSIGNAL: a socket the stop shut down fails with EPIPE, no SIGPIPE. */
            ssize_t w = send(out, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                goto out;
            off += w;
        }
    }
out:
    shutdown(out, SHUT_WR);
    return NULL;
}

static void *accept_loop(void *arg) {
    struct ql_test_relay *r = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = r->listen_fd, .events = POLLIN},
                              {.fd = r->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (p[1].revents)
            return NULL;
        int a = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (a < 0)
            continue;
        int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        pthread_mutex_lock(&r->mu);
        bool room = r->n < QL_TEST_RELAY_MAX;
        pthread_mutex_unlock(&r->mu);
        if (b < 0 || !room || connect(b, (struct sockaddr *)&r->to, sizeof r->to) != 0) {
            close(a);
            if (b >= 0)
                close(b);
            continue;
        }
        pthread_mutex_lock(&r->mu);
        int i = r->n++;
        conn_t *c = &r->conns[i];
        c->fd[0] = a;
        c->fd[1] = b;
        for (int d = 0; d < 2; d++) {
            r->halves[i][d] = (half_t){.r = r, .c = c, .from = d};
            c->running[d] = pthread_create(&c->dir[d], NULL, pump, &r->halves[i][d]) == 0;
        }
        pthread_mutex_unlock(&r->mu);
    }
}

int ql_test_relay_start(const char *listen_addr, const char *to_host, int to_port,
                        ql_test_relay_t **out, int *port) {
    *out = NULL;
    struct ql_test_relay *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->listen_fd = -1;
    r->stop_pipe[0] = r->stop_pipe[1] = -1;
    pthread_mutex_init(&r->mu, NULL);
    r->to.sin_family = AF_INET;
    r->to.sin_port = htons((uint16_t)to_port);
    struct sockaddr_in a = {.sin_family = AF_INET};
    int rc = 0;
    if (inet_pton(AF_INET, to_host, &r->to.sin_addr) != 1 ||
        inet_pton(AF_INET, listen_addr, &a.sin_addr) != 1)
        rc = -EINVAL;
    socklen_t len = sizeof a;
    if (!rc && ((r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
                bind(r->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
                listen(r->listen_fd, 64) != 0 ||
                getsockname(r->listen_fd, (struct sockaddr *)&a, &len) != 0 ||
                pipe2(r->stop_pipe, O_CLOEXEC) != 0))
        rc = -errno;
    if (!rc && (rc = -pthread_create(&r->acceptor, NULL, accept_loop, r)) == 0) {
        *port = ntohs(a.sin_port);
        *out = r;
        return 0;
    }
    if (r->listen_fd >= 0)
        close(r->listen_fd);
    for (int i = 0; i < 2; i++)
        if (r->stop_pipe[i] >= 0)
            close(r->stop_pipe[i]);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return rc ? rc : -EIO;
}

int ql_test_relay_accepted(ql_test_relay_t *r) {
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

void ql_test_relay_stop(ql_test_relay_t *r) {
    if (!r)
        return;
    char b = 0;
    if (write(r->stop_pipe[1], &b, 1) != 1)
        shutdown(r->listen_fd, SHUT_RDWR);
    pthread_join(r->acceptor, NULL);
    /* No more connections now: end each, which ends its reads, then join. */
    for (int i = 0; i < r->n; i++) {
        conn_t *c = &r->conns[i];
        shutdown(c->fd[0], SHUT_RDWR);
        shutdown(c->fd[1], SHUT_RDWR);
        for (int d = 0; d < 2; d++)
            if (c->running[d])
                pthread_join(c->dir[d], NULL);
        close(c->fd[0]);
        close(c->fd[1]);
    }
    close(r->listen_fd);
    close(r->stop_pipe[0]);
    close(r->stop_pipe[1]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
