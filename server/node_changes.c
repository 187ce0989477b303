/* The node's watcher of the store's change session: see node_changes.h. */
#include "node_changes.h"

#include <stdlib.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

struct node_changes {
    uv_loop_t *loop;
    ql_store_t *store;
    ql_log_t *log;
    ql_store_change_cb cb;
    void *arg;
    uv_poll_t *poll; /* the open session's watch, NULL: none (closed in its own callback) */
    uv_timer_t retry;
    uint64_t backoff_ms;
    uint64_t opened_at; /* uv_now when the session opened */
    bool failing;       /* the session is down: logged once, and once when it is back */
    bool stopping;
    int handles; /* open or closing handles: the watcher is freed when the last one closed */
    void (*closed)(void *arg);
    void *closed_arg;
};

static void handle_gone(node_changes_t *c) {
    if (--c->handles > 0)
        return;
    void (*closed)(void *) = c->closed;
    void *arg = c->closed_arg;
    free(c);
    if (closed)
        closed(arg);
}

static void poll_closed(uv_handle_t *h) {
    node_changes_t *c = h->data;
    free(h);
    handle_gone(c);
}

static void timer_closed(uv_handle_t *h) {
    handle_gone(h->data);
}

static void unwatch(node_changes_t *c) {
    if (!c->poll)
        return;
    uv_poll_stop(c->poll);
    uv_close((uv_handle_t *)c->poll, poll_closed);
    c->poll = NULL;
}

/* Forwards the store's reports until the watcher is stopped (the callback may stop it). */
static void on_change(void *arg, const ql_id_t *job) {
    node_changes_t *c = arg;
    if (!c->stopping)
        c->cb(c->arg, job);
}

static void retry_cb(uv_timer_t *t);

/* The session is gone (or did not come): stop watching it and try again after the backoff,
 * which starts over when the lost session had lived a while. */
static void lost(node_changes_t *c, bool was_open, const char *why) {
    unwatch(c);
    if (!c->failing)
        ql_log(c->log, QL_LOG_WARN, "node",
               "the store's change session is down reason=\"%s\": wake-ups from other servers "
               "wait for the poll interval until it is back",
               why);
    c->failing = true;
    if (was_open && uv_now(c->loop) - c->opened_at >= BACKOFF_MAX_MS)
        c->backoff_ms = BACKOFF_MIN_MS;
    uv_timer_start(&c->retry, retry_cb, c->backoff_ms, 0);
    c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

static void drain(node_changes_t *c) {
    int rc = ql_store_changes_drain(c->store, on_change, c);
    if (rc && !c->stopping)
        lost(c, true, ql_strerror(rc));
}

static void poll_cb(uv_poll_t *p, int status, int events) {
    (void)events;
    node_changes_t *c = p->data;
    if (status < 0)
        lost(c, true, uv_strerror(status));
    else
        drain(c);
}

/* Watches the session the store just opened; false when it cannot (then retried). */
static bool watch(node_changes_t *c) {
    uv_poll_t *p = malloc(sizeof *p);
    int rc = p ? uv_poll_init(c->loop, p, ql_store_changes_fd(c->store)) : UV_ENOMEM;
    if (rc) {
        free(p);
        lost(c, false, ql_strerror(rc));
        return false;
    }
    p->data = c;
    c->handles++;
    c->poll = p;
    uv_poll_start(p, UV_READABLE, poll_cb);
    c->opened_at = uv_now(c->loop);
    if (c->failing)
        ql_log(c->log, QL_LOG_INFO, "node",
               "the store's change session is back: wake-ups from other servers are prompt again");
    c->failing = false;
    return true;
}

static void retry_cb(uv_timer_t *t) {
    node_changes_t *c = t->data;
    if (c->stopping)
        return;
    ql_err_t err = {0};
    int rc = ql_store_changes_listen(c->store, &err);
    if (rc)
        lost(c, false, err.msg[0] ? err.msg : ql_strerror(rc));
    else if (watch(c))
        drain(c); /* a new session first reports "anything may have changed" */
}

int node_changes_start(uv_loop_t *loop, ql_store_t *store, ql_log_t *log, ql_store_change_cb cb,
                       void *arg, node_changes_t **out) {
    *out = NULL;
    ql_err_t err = {0};
    int rc = ql_store_changes_listen(store, &err);
    if (rc == UV_ENOTSUP)
        return 0; /* a read-only store: the poll interval serves */
    node_changes_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    *c = (node_changes_t){.loop = loop,
                          .store = store,
                          .log = log,
                          .cb = cb,
                          .arg = arg,
                          .backoff_ms = BACKOFF_MIN_MS,
                          .handles = 1};
    uv_timer_init(loop, &c->retry);
    c->retry.data = c;
    *out = c;
    if (rc)
        lost(c, false, err.msg[0] ? err.msg : ql_strerror(rc));
    else
        watch(c); /* the first session has missed nothing: no drain yet */
    return 0;
}

void node_changes_stop(node_changes_t *c, void (*closed)(void *arg), void *arg) {
    c->stopping = true;
    c->closed = closed;
    c->closed_arg = arg;
    unwatch(c);
    uv_timer_stop(&c->retry);
    uv_close((uv_handle_t *)&c->retry, timer_closed);
}
