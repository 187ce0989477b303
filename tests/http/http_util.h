/*
 * The harness of the HTTP server tests (tests/api/test_http*.c): a real server on 127.0.0.1
 * port 0, its loop on a thread, and plain blocking sockets as clients. Code that touches the
 * server runs on the loop thread through on_loop(); waiting is always a blocking read or poll
 * with a deadline. Functions are static and may go unused in one of the including files.
 */
#ifndef QL_TEST_HTTP_UTIL_H
#define QL_TEST_HTTP_UTIL_H

#define UNUSED __attribute__((unused))

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/ql_http.h"

#define MAX_HELD 16

typedef struct srv srv_t;
typedef void (*loop_fn)(srv_t *s, void *arg);

typedef struct cmd {
    loop_fn fn;
    void *arg;
    bool done;
    struct cmd *next;
} cmd_t;

struct srv {
    uv_loop_t loop;
    uv_async_t async;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cmd_t *cmds;
    ql_http_server_t *server;
    ql_http_router_t *router;
    ql_auth_t *auth;
    int port;
    bool server_closed;
    /* Loop-thread state, read by tests through on_loop() or under mu. */
    ql_http_req_t *held[MAX_HELD];
    size_t n_held;
    int handled;
    int held_respond_rc;
    bool held_gone;
};

static srv_t S;

/* ---- the loop thread ---- */

UNUSED static void on_async(uv_async_t *a) {
    srv_t *s = a->data;
    pthread_mutex_lock(&s->mu);
    cmd_t *list = s->cmds;
    s->cmds = NULL;
    pthread_mutex_unlock(&s->mu);
    /* Run in submission order. */
    cmd_t *rev = NULL;
    while (list) {
        cmd_t *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    for (cmd_t *c = rev, *n; c; c = n) {
        n = c->next;
        c->fn(s, c->arg);
        pthread_mutex_lock(&s->mu);
        c->done = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
}

UNUSED static void *loop_main(void *arg) {
    srv_t *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Runs fn(s, arg) on the loop thread and waits for it. */
UNUSED static void on_loop(srv_t *s, loop_fn fn, void *arg) {
    cmd_t c = {fn, arg, false, NULL};
    pthread_mutex_lock(&s->mu);
    c.next = s->cmds;
    s->cmds = &c;
    pthread_mutex_unlock(&s->mu);
    uv_async_send(&s->async);
    pthread_mutex_lock(&s->mu);
    while (!c.done)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* ---- handlers (loop thread) ---- */

UNUSED static void count_handled(srv_t *s) {
    pthread_mutex_lock(&s->mu);
    s->handled++;
    pthread_mutex_unlock(&s->mu);
}

UNUSED static void h_echo(ql_http_req_t *req, void *arg) {
    srv_t *s = arg;
    count_handled(s);
    size_t blen;
    const char *body = ql_http_req_body(req, &blen);
    const char *ids[8];
    size_t n_ids = ql_http_req_query_values(req, "ids", ids, 8);
    char out[4096];
    int n = snprintf(out, sizeof out,
                     "method=%s path=%s route=%s pattern=%s model=%s project=%s x=%s "
                     "ids=%zu:%s,%s,%s "
                     "ua=%s peer_lo=%d body=%.*s",
                     ql_http_req_method(req), ql_http_req_path(req),
                     ql_http_req_route(req) ? ql_http_req_route(req) : "-",
                     ql_http_req_route_pattern(req) ? ql_http_req_route_pattern(req) : "-",
                     ql_http_req_param(req, "model") ? ql_http_req_param(req, "model") : "-",
                     ql_http_req_query(req, "project") ? ql_http_req_query(req, "project") : "-",
                     ql_http_req_query(req, "x") ? ql_http_req_query(req, "x") : "-", n_ids,
                     n_ids > 0 ? ids[0] : "", n_ids > 1 ? ids[1] : "", n_ids > 2 ? ids[2] : "",
                     ql_http_req_header(req, "user-agent") ? ql_http_req_header(req, "USER-AGENT")
                                                           : "-",
                     ql_http_req_is_loopback(req), (int)blen, body);
    ql_http_respond(req, 200, "text/plain", out, (size_t)n);
}

UNUSED static void h_hold(ql_http_req_t *req, void *arg) {
    srv_t *s = arg;
    count_handled(s);
    cr_assert_lt(s->n_held, MAX_HELD);
    s->held[s->n_held++] = req;
}

UNUSED static void h_user(ql_http_req_t *req, void *arg) {
    srv_t *s = arg;
    count_handled(s);
    char out[256];
    int n = snprintf(out, sizeof out, "user=%s role=%s", ql_http_req_user(req),
                     ql_auth_role_name(ql_http_req_role(req)));
    ql_http_respond(req, 200, "text/plain", out, (size_t)n);
}

UNUSED static void h_big(ql_http_req_t *req, void *arg) {
    (void)arg;
    size_t n = 64u << 20; /* more than loopback socket buffers hold */
    char *body = malloc(n);
    cr_assert_not_null(body);
    memset(body, 'b', n);
    ql_http_respond(req, 200, "application/octet-stream", body, n);
    free(body);
}

UNUSED static void h_badstatus(ql_http_req_t *req, void *arg) {
    srv_t *s = arg;
    s->held_respond_rc = ql_http_respond(req, 101, "text/plain", "x", 1);
}

UNUSED static void h_error(ql_http_req_t *req, void *arg) {
    (void)arg;
    cr_assert_eq(ql_http_add_header(req, "X-Bad", "a\r\nInjected: 1"), QL_EINVAL);
    cr_assert_eq(ql_http_add_header(req, "X-Good", "yes"), 0);
    ql_http_respond_error(req, 409, QL_ESEGOVERLAP, "segment \"%s\" overlaps", "s1");
}

/* ---- server setup ---- */

typedef struct start_args {
    ql_http_limits_t limits;
    const char *listen;
} start_args_t;

UNUSED static void srv_start_on(srv_t *s, const start_args_t *a) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    cr_assert_eq(uv_loop_init(&s->loop), 0);
    cr_assert_eq(uv_async_init(&s->loop, &s->async, on_async), 0);
    s->async.data = s;
    cr_assert_eq(ql_http_router_new(&s->router), 0);
    ql_http_router_t *r = s->router;
    cr_assert_eq(ql_http_router_add(r, "GET", "/echo", "echo", 0, h_echo, s), 0);
    cr_assert_eq(ql_http_router_add(r, "POST", "/echo", "echo_post", 0, h_echo, s), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/hold", "hold", 0, h_hold, s), 0);
    cr_assert_eq(ql_http_router_add(r, "POST", "/hold", "hold", 0, h_hold, s), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/error", "error", 0, h_error, s), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/big", "big", 0, h_big, s), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/badstatus", "bad", 0, h_badstatus, s), 0);
    cr_assert_eq(ql_http_router_add(r, "PUT", "/kylin/api/models/{model}/segments",
                                    "segments_update", 0, h_echo, s),
                 0);
    cr_assert_eq(ql_http_router_add(r, "POST", "/kylin/api/models/{model}/segments",
                                    "segments_build", 0, h_echo, s),
                 0);
    cr_assert_eq(
        ql_http_router_add(r, "GET", "/kylin/api/user", "user", QL_HTTP_ROUTE_AUTH, h_user, s), 0);
    ql_http_config_t cfg = {
        .limits = a->limits, .handler = ql_http_router_handle, .handler_arg = r};
    cr_assert_eq(ql_http_server_new(&s->loop, &cfg, &s->server), 0);
    cr_assert_eq(ql_http_server_listen(s->server, a->listen ? a->listen : "127.0.0.1:0"), 0);
    cr_assert_eq(ql_http_server_port(s->server, &s->port), 0);
    cr_assert_gt(s->port, 0);
    cr_assert_eq(pthread_create(&s->thread, NULL, loop_main, s), 0);
}

UNUSED static void srv_start(const ql_http_limits_t *limits) {
    start_args_t a = {0};
    if (limits)
        a.limits = *limits;
    srv_start_on(&S, &a);
}

UNUSED static void on_server_closed(ql_http_server_t *server, void *arg) {
    srv_t *s = arg;
    (void)server;
    s->server_closed = true;
}

UNUSED static void do_close_server(srv_t *s, void *arg) {
    (void)arg;
    ql_http_server_close(s->server, on_server_closed, s);
}

UNUSED static void do_stop(srv_t *s, void *arg) {
    (void)arg;
    /* Whatever a test left held is answered now (the connection may be gone). */
    for (size_t i = 0; i < s->n_held; i++)
        ql_http_respond(s->held[i], 200, NULL, NULL, 0);
    s->n_held = 0;
    if (!s->server_closed)
        ql_http_server_close(s->server, on_server_closed, s);
    uv_close((uv_handle_t *)&s->async, NULL);
}

UNUSED static void srv_stop(void) {
    on_loop(&S, do_stop, NULL);
    pthread_join(S.thread, NULL);
    cr_assert(S.server_closed, "the close callback ran");
    /* Every handle the server opened is closed: uv_loop_close refuses otherwise. */
    cr_assert_eq(uv_loop_close(&S.loop), 0);
    ql_http_server_free(S.server);
    ql_http_router_free(S.router);
    if (S.auth)
        ql_auth_free(S.auth);
}

typedef struct counters_arg {
    ql_http_counters_t c;
    const char *route;
    int status;
    uint64_t stat;
} counters_arg_t;

UNUSED static void do_counters(srv_t *s, void *arg) {
    counters_arg_t *a = arg;
    ql_http_server_counters(s->server, &a->c);
    if (a->route)
        a->stat = ql_http_server_stat(s->server, a->route, a->status);
}

UNUSED static ql_http_counters_t counters(void) {
    counters_arg_t a = {0};
    on_loop(&S, do_counters, &a);
    return a.c;
}

UNUSED static uint64_t stat_of(const char *route, int status) {
    counters_arg_t a = {.route = route, .status = status};
    on_loop(&S, do_counters, &a);
    return a.stat;
}

UNUSED static int handled(void) {
    pthread_mutex_lock(&S.mu);
    int n = S.handled;
    pthread_mutex_unlock(&S.mu);
    return n;
}

UNUSED static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls cond() until true or 5 s pass. */
#define WAIT_FOR(cond)                                                                             \
    do {                                                                                           \
        int64_t deadline_ = now_ms() + 5000;                                                       \
        while (!(cond) && now_ms() < deadline_) {                                                  \
            struct pollfd none_;                                                                   \
            poll(&none_, 0, 2);                                                                    \
        }                                                                                          \
        cr_assert(cond, "timed out waiting for " #cond);                                           \
    } while (0)

/* ---- clients ---- */

typedef struct client {
    int fd;
    char buf[1 << 17];
    size_t len;
} client_t;

typedef struct response {
    int status;
    char headers[4096];
    char body[8192];
    size_t body_len;
} response_t;

UNUSED static client_t *cl_connect(void) {
    client_t *c = calloc(1, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(c->fd, 0);
    struct timeval tv = {5, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)S.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s",
                 strerror(errno));
    return c;
}

/* Connects to the server from the local address ip ("127.0.0.2": any of 127.0.0.0/8 is this
 * machine), so a test can be several clients. Returns the socket, or -1 when connect failed. */
UNUSED static int fd_connect_from(const char *ip) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in src = {.sin_family = AF_INET};
    cr_assert_eq(inet_pton(AF_INET, ip, &src.sin_addr), 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof src), 0, "bind %s: %s", ip,
                 strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)S.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

UNUSED static client_t *cl_connect_from(const char *ip) {
    client_t *c = calloc(1, sizeof *c);
    c->fd = fd_connect_from(ip);
    cr_assert_geq(c->fd, 0, "connect from %s: %s", ip, strerror(errno));
    return c;
}

UNUSED static void cl_close(client_t *c) {
    close(c->fd);
    free(c);
}

UNUSED static void cl_sendn(client_t *c, const char *data, size_t n) {
    while (n) {
        ssize_t w = send(c->fd, data, n, MSG_NOSIGNAL);
        if (w < 0)
            return; /* the server may have closed: the test reads what it answered */
        data += w;
        n -= (size_t)w;
    }
}

UNUSED static void cl_send(client_t *c, const char *data) {
    cl_sendn(c, data, strlen(data));
}

/* Reads more bytes; returns the count, 0 on EOF, -1 on timeout or error. */
UNUSED static ssize_t cl_fill(client_t *c) {
    if (c->len == sizeof c->buf)
        return -1;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n > 0)
        c->len += (size_t)n;
    return n < 0 ? -1 : n;
}

UNUSED static const char *find_header(const response_t *r, const char *name) {
    static char value[1024];
    size_t nl = strlen(name);
    for (const char *p = r->headers; (p = strstr(p, "\r\n")) != NULL;) {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            snprintf(value, sizeof value, "%.*s", (int)n, v);
            return value;
        }
    }
    return NULL;
}

/* Reads one response (interim 1xx included) for a request with method (for HEAD). Returns 0, or
 * -1 when the connection closed or timed out first. */
UNUSED static int cl_response_m(client_t *c, response_t *r, bool head) {
    memset(r, 0, sizeof *r);
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
        if (cl_fill(c) <= 0)
            return -1;
    size_t hlen = (size_t)(end - c->buf) + 4;
    cr_assert_lt(hlen, sizeof r->headers);
    memcpy(r->headers, c->buf, hlen);
    r->headers[hlen] = '\0';
    cr_assert_eq(sscanf(r->headers, "HTTP/1.1 %d", &r->status), 1, "status line: %s", r->headers);
    const char *cl = find_header(r, "Content-Length");
    size_t blen = cl && !head ? strtoul(cl, NULL, 10) : 0;
    while (c->len < hlen + blen)
        if (cl_fill(c) <= 0)
            return -1;
    cr_assert_lt(blen, sizeof r->body);
    memcpy(r->body, c->buf + hlen, blen);
    r->body[blen] = '\0';
    r->body_len = blen;
    memmove(c->buf, c->buf + hlen + blen, c->len - hlen - blen);
    c->len -= hlen + blen;
    return 0;
}

UNUSED static int cl_response(client_t *c, response_t *r) {
    return cl_response_m(c, r, false);
}

/* True when the server closed the connection (EOF or reset) before 5 s passed. */
UNUSED static bool cl_closed(client_t *c) {
    for (;;) {
        char tmp[4096];
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n == 0)
            return true;
        if (n < 0)
            return errno == ECONNRESET;
    }
}

/* True when no byte is waiting on the socket right now. */
UNUSED static bool cl_nothing_yet(client_t *c) {
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    return c->len == 0 && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Sends n bytes of request on a new connection and asserts the answer is 400 and the server
 * then closes the connection; case_no names the case in a failure. */
UNUSED static void cl_expect_400_close(const char *request, size_t n, size_t case_no) {
    client_t *c = cl_connect();
    cl_sendn(c, request, n);
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0, "case %zu", case_no);
    cr_assert_eq(r.status, 400, "case %zu", case_no);
    cr_assert(cl_closed(c), "case %zu", case_no);
    cl_close(c);
}

/* ---- authentication ---- */

UNUSED static int fast_hash(const char *pw, char out[crypto_pwhash_STRBYTES]) {
    return crypto_pwhash_str(out, pw, strlen(pw), crypto_pwhash_OPSLIMIT_MIN,
                             crypto_pwhash_MEMLIMIT_MIN);
}

UNUSED static void do_set_auth(srv_t *s, void *arg) {
    ql_auth_t *auth = arg;
    s->auth = auth;
    ql_http_router_set_auth(s->router, auth);
}

/* Gives the server user alice, password s3cret (an ADMIN); the tests send her header as
 * "Authorization: Basic YWxpY2U6czNjcmV0". */
UNUSED static void srv_use_alice(void) {
    char hash[crypto_pwhash_STRBYTES];
    cr_assert_geq(sodium_init(), 0);
    cr_assert_eq(fast_hash("s3cret", hash), 0);
    ql_auth_user_t users[] = {{"alice", hash, QL_AUTH_ROLE_ADMIN}};
    ql_auth_config_t cfg;
    ql_auth_config_default(&cfg);
    cfg.users = users;
    cfg.n_users = 1;
    ql_auth_t *auth;
    /* Created here, used only on the loop thread once handed over. */
    cr_assert_eq(ql_auth_new(&S.loop, &cfg, &auth, NULL), 0);
    on_loop(&S, do_set_auth, auth);
}

UNUSED static void do_respond_held(srv_t *s, void *arg) {
    size_t i = (size_t)(uintptr_t)arg;
    ql_http_req_t *req = s->held[i];
    s->held_gone = ql_http_req_client_gone(req);
    char body[64];
    int n = snprintf(body, sizeof body, "held %zu path=%s", i, ql_http_req_path(req));
    s->held_respond_rc = ql_http_respond(req, 200, "text/plain", body, (size_t)n);
    s->held[i] = NULL;
    if (i + 1 == s->n_held)
        s->n_held--;
}

UNUSED static size_t n_held(void) {
    pthread_mutex_lock(&S.mu);
    size_t n = S.n_held;
    pthread_mutex_unlock(&S.mu);
    return n;
}

#endif
