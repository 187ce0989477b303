/* The writer thread's wake-up of the node's loop: see node_wake.h. */
#include "node_wake.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct node_wake {
    uv_poll_t poll;
    int fd;
    atomic_bool pending;
    bool stopped;
    void (*cb)(void *arg);
    void *arg;
    void (*closed)(void *arg);
    void *closed_arg;
};

static void on_readable(uv_poll_t *p, int status, int events) {
    (void)status;
    (void)events;
    node_wake_t *w = p->data;
    uint64_t v;
    while (read(w->fd, &v, sizeof v) < 0 && errno == EINTR) {
    }
    atomic_store(&w->pending, false); /* before the callback drains (node_wake.h) */
    if (!w->stopped)
        w->cb(w->arg);
}

static void freed_on_close(uv_handle_t *h) {
    node_wake_free(h->data);
}

int node_wake_start(uv_loop_t *loop, void (*cb)(void *arg), void *arg, node_wake_t **out) {
    node_wake_t *w = calloc(1, sizeof *w);
    if (!w)
        return UV_ENOMEM;
    w->cb = cb;
    w->arg = arg;
    atomic_init(&w->pending, false);
    w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int rc = w->fd < 0 ? -errno : uv_poll_init(loop, &w->poll, w->fd);
    if (rc) {
        if (w->fd >= 0)
            close(w->fd);
        free(w);
        return rc;
    }
    w->poll.data = w;
    if ((rc = uv_poll_start(&w->poll, UV_READABLE, on_readable))) {
        uv_close((uv_handle_t *)&w->poll, freed_on_close);
        return rc;
    }
    *out = w;
    return 0;
}

void node_wake_send(node_wake_t *w) {
    if (atomic_exchange(&w->pending, true))
        return; /* the loop has yet to see the last one */
    uint64_t one = 1;
    while (write(w->fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

static void on_closed(uv_handle_t *h) {
    node_wake_t *w = h->data;
    if (w->closed)
        w->closed(w->closed_arg);
}

void node_wake_stop(node_wake_t *w, void (*closed)(void *arg), void *arg) {
    w->stopped = true;
    w->closed = closed;
    w->closed_arg = arg;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, on_closed);
}

void node_wake_free(node_wake_t *w) {
    if (!w)
        return;
    close(w->fd);
    free(w);
}
