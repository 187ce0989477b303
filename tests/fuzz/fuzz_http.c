/*
 * libFuzzer harness for the HTTP server: each input is sent over a real loopback connection to
 * a server running on this thread's loop, in slices whose size the first byte picks (so the
 * parser sees requests split at every kind of boundary), then the client half-closes and the
 * harness drives the loop until the server has closed the connection.
 *
 * The handlers call every request accessor; "/hold" defers its answer to the next loop turn
 * (pipelining behind a pending response, and answers after the client left); "/auth" goes
 * through the router's Basic auth with a trivial verifier in the threadpool. The pure pieces
 * (percent-decoding, router matching) are fed the input directly as well.
 *
 * libFuzzer gives no context pointer, so the server lives in one static: the harness's only
 * mutable global, as in every libFuzzer target.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http_int.h"
#include "http/ql_http.h"

#define MAX_HELD 64

static struct {
    bool ready;
    uv_loop_t loop;
    ql_http_server_t *server;
    ql_http_router_t *router;
    ql_auth_t *auth;
    int port;
    ql_http_req_t *held[MAX_HELD];
    size_t n_held;
} F;

static void touch(ql_http_req_t *req) {
    volatile size_t sink = 0;
    const char *vals[8];
    sink += strlen(ql_http_req_method(req)) + strlen(ql_http_req_path(req));
    sink += strlen(ql_http_req_query_raw(req));
    const char *q = ql_http_req_query(req, "project");
    sink += q ? strlen(q) : 0;
    sink += ql_http_req_query_values(req, "ids", vals, 8);
    for (size_t i = 0; i < ql_http_req_header_count(req); i++) {
        const char *n, *v;
        if (ql_http_req_header_at(req, i, &n, &v) == 0)
            sink += strlen(n) + strlen(v);
    }
    const char *h = ql_http_req_header(req, "content-type");
    sink += h ? strlen(h) : 0;
    size_t len;
    const char *body = ql_http_req_body(req, &len);
    sink += len && body[len] == '\0';
    const char *p = ql_http_req_param(req, "model");
    sink += p ? strlen(p) : 0;
    sink += ql_http_req_is_loopback(req);
    (void)sink;
}

static void h_echo(ql_http_req_t *req, void *arg) {
    (void)arg;
    touch(req);
    size_t len;
    const char *body = ql_http_req_body(req, &len);
    ql_http_add_header(req, "X-Path", ql_http_req_path(req)); /* may be refused: CR/LF */
    ql_http_respond(req, 200, "text/plain", body, len);
}

static void h_hold(ql_http_req_t *req, void *arg) {
    (void)arg;
    touch(req);
    if (F.n_held == MAX_HELD) {
        ql_http_respond_error(req, 503, QL_ETRANSIENT, "held %zu", F.n_held);
        return;
    }
    F.held[F.n_held++] = req;
}

static void respond_held(void) {
    size_t n = F.n_held;
    F.n_held = 0;
    for (size_t i = 0; i < n; i++)
        ql_http_respond(F.held[i], 202, NULL, NULL, 0);
}

static int fake_verify(const char *hash, const char *password, void *arg) {
    (void)hash;
    (void)arg;
    return strcmp(password, "KYLIN") == 0 ? 0 : QL_EAUTH;
}

static void init(void) {
    uv_loop_init(&F.loop);
    ql_http_router_new(&F.router);
    ql_http_router_add(F.router, "GET", "/echo", "echo", 0, h_echo, NULL);
    ql_http_router_add(F.router, "POST", "/echo", "echo", 0, h_echo, NULL);
    ql_http_router_add(F.router, "GET", "/hold", "hold", 0, h_hold, NULL);
    ql_http_router_add(F.router, "PUT", "/kylin/api/models/{model}/segments", "seg", 0, h_hold,
                       NULL);
    ql_http_router_add(F.router, "GET", "/kylin/api/models/{model}", "model", 0, h_echo, NULL);
    ql_http_router_add(F.router, "GET", "/auth", "auth", QL_HTTP_ROUTE_AUTH, h_echo, NULL);
    /* One user; fake_verify ignores the hash (only its format is checked) and accepts the
     * password KYLIN, which the corpus's Authorization headers send. */
    static const ql_auth_user_t users[] = {
        {"ADMIN", "$argon2id$v=19$m=65536,t=2,p=1$ZnV6eg$ZnV6eg", QL_AUTH_ROLE_ADMIN}};
    ql_auth_config_t acfg;
    ql_auth_config_default(&acfg);
    acfg.users = users;
    acfg.n_users = 1;
    acfg.verify = fake_verify;
    acfg.fail_limit = 1000000; /* every input comes from 127.0.0.1 */
    if (ql_auth_new(&F.loop, &acfg, &F.auth, NULL) != 0)
        abort();
    ql_http_router_set_auth(F.router, F.auth);
    ql_http_config_t cfg = {.handler = ql_http_router_handle, .handler_arg = F.router};
    cfg.limits.max_header_bytes = 2048;
    cfg.limits.max_headers = 16;
    cfg.limits.max_body_bytes = 4096;
    cfg.limits.request_timeout_ms = 200;
    cfg.limits.idle_timeout_ms = 200;
    cfg.limits.linger_ms = 50;
    cfg.limits.max_pipeline = 4;
    if (ql_http_server_new(&F.loop, &cfg, &F.server) != 0 ||
        ql_http_server_listen(F.server, "127.0.0.1:0") != 0 ||
        ql_http_server_port(F.server, &F.port) != 0)
        abort();
    F.ready = true;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fuzz_pure(const uint8_t *data, size_t size) {
    char *s = malloc(size + 2);
    size_t n;
    if (!s)
        return;
    memcpy(s + 1, data, size);
    s[0] = '/';
    s[size + 1] = '\0';
    ql_http_pct_decode(s, size + 1, true, s, &n); /* in place is fine: output never leads */
    memcpy(s + 1, data, size);
    s[size + 1] = '\0';
    ql_http_match_t m;
    ql_http_router_match(F.router, "GET", s, &m);
    ql_http_router_match(F.router, "PUT", s, &m);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!F.ready)
        init();
    fuzz_pure(data, size);
    size_t slice = size ? (size_t)(data[0] % 64) + 1 : 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        abort();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)F.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS)
        abort();
    size_t sent = 0;
    bool shut = false;
    int64_t deadline = mono_ms() + 3000;
    while (mono_ms() < deadline) {
        uv_run(&F.loop, UV_RUN_NOWAIT);
        respond_held();
        if (sent < size) {
            size_t n = size - sent < slice ? size - sent : slice;
            ssize_t w = send(fd, data + sent, n, MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != ENOTCONN)
                break; /* the server closed: fine */
        } else if (!shut) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        char buf[4096];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != ENOTCONN))
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 1);
    }
    close(fd);
    /* Let the server see the close and free everything before the next input. */
    ql_http_counters_t c;
    do {
        uv_run(&F.loop, UV_RUN_NOWAIT);
        respond_held();
        ql_http_server_counters(F.server, &c);
    } while (c.active > 0 && mono_ms() < deadline + 1000);
    return 0;
}
