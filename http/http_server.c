/*
 * HTTP/1.1 server: the listener, accepting under the connection limits, the server's lifetime,
 * addresses and counters. Connections themselves (reading, parsing, responding, timers) are
 * http/http.c's; DESIGN of both: http/ql_http.h and the top of http/http.c.
 *
 * Holding connections. server->peers counts open connections per address (http/http_peers.c);
 * server->anon_oldest .. anon_newest lists the unauthenticated connections in accept order,
 * which is the eviction order when the server is full. A connection is counted and listed
 * from its accept until it closes (or, for the list, until it authenticates).
 */
#include "base/ql_buf.h"
#include "http_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_PARSER_HEADER_CEILING (80 * 1024)

/* The 503 written straight to a connection the server will not serve (it is closed after).
 * REJECT_BODY is the JSON error body with msg; REJECT_503 the whole response, with len, the
 * body's length, as its Content-Length: a preprocessor string cannot count itself, so each use
 * checks len with a _Static_assert. */
#define REJECT_BODY(msg)                                                                           \
    "{\"code\":\"999\",\"data\":null,\"msg\":\"" msg "\",\"error_code\":\"QL-00023\"}"
#define REJECT_503(len, body)                                                                      \
    "HTTP/1.1 503 Service Unavailable\r\n"                                                         \
    "Content-Type: application/json;charset=utf-8\r\n"                                             \
    "Content-Length: " #len "\r\n"                                                                 \
    "Connection: close\r\n"                                                                        \
    "Retry-After: 1\r\n\r\n" body

#define FULL_BODY REJECT_BODY("too many connections, try again")
_Static_assert(sizeof FULL_BODY - 1 == 90, "update the length in reject_503");
static const char reject_503[] = REJECT_503(90, FULL_BODY);
#define ADDR_BODY REJECT_BODY("too many connections from your address, try again")
_Static_assert(sizeof ADDR_BODY - 1 == 108, "update the length in reject_addr_503");
static const char reject_addr_503[] = REJECT_503(108, ADDR_BODY);

void ql_http_limits_default(ql_http_limits_t *out) {
    out->max_header_bytes = 16 * 1024;
    out->max_headers = 100;
    out->max_body_bytes = 1024 * 1024;
    out->request_timeout_ms = 30000;
    out->idle_timeout_ms = 60000;
    out->send_timeout_ms = 30000;
    out->linger_ms = 2000;
    out->max_connections = 1024;
    out->max_pipeline = 16;
    out->max_connections_per_address = 64;
    out->first_request_timeout_ms = 10000;
    out->auth_reserve = 64;
}

/* ---- addresses ---- */

bool ql_http_addr_is_loopback(const struct sockaddr *addr) {
    if (!addr)
        return false;
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

int ql_http_parse_hostport(const char *hostport, struct sockaddr_storage *out) {
    if (!hostport || !out)
        return QL_EINVAL;
    char host[128];
    const char *port_str;
    bool v6 = false;
    if (hostport[0] == '[') {
        const char *close = strchr(hostport, ']');
        if (!close || close[1] != ':' || (size_t)(close - hostport - 1) >= sizeof host)
            return QL_EINVAL;
        memcpy(host, hostport + 1, (size_t)(close - hostport - 1));
        host[close - hostport - 1] = '\0';
        port_str = close + 2;
        v6 = true;
    } else {
        const char *colon = strrchr(hostport, ':');
        if (!colon || (size_t)(colon - hostport) >= sizeof host || strchr(hostport, ':') != colon)
            return QL_EINVAL;
        memcpy(host, hostport, (size_t)(colon - hostport));
        host[colon - hostport] = '\0';
        port_str = colon + 1;
    }
    if (!*port_str || strlen(port_str) > 5)
        return QL_EINVAL;
    int port = 0;
    for (const char *p = port_str; *p; p++) {
        if (*p < '0' || *p > '9')
            return QL_EINVAL;
        port = port * 10 + (*p - '0');
    }
    if (port > 65535)
        return QL_EINVAL;
    memset(out, 0, sizeof *out);
    if (v6)
        return uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) ? QL_EINVAL : 0;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    return uv_ip4_addr(host, port, (struct sockaddr_in *)out) ? QL_EINVAL : 0;
}

/* ---- counters ---- */

void ql_http_count_response(ql_http_server_t *s, const char *route, int status) {
    if (!s)
        return;
    s->counters.requests++;
    if (!route)
        route = "none";
    for (size_t i = 0; i < s->n_stats; i++) {
        if (s->stats[i].status == status && strcmp(s->stats[i].route, route) == 0) {
            s->stats[i].count++;
            return;
        }
    }
    if (QL_ARRAY_RESERVE(s->stats, s->cap_stats, s->n_stats + 1, 16))
        return; /* a lost metric is better than a lost response */
    char *copy = strdup(route);
    if (!copy)
        return;
    s->stats[s->n_stats++] = (http_stat_t){copy, status, 1};
}

void ql_http_server_counters(const ql_http_server_t *server, ql_http_counters_t *out) {
    *out = server->counters;
    out->active = server->n_open;
}

void ql_http_server_foreach_stat(const ql_http_server_t *server, ql_http_stat_cb cb, void *arg) {
    for (size_t i = 0; i < server->n_stats; i++)
        cb(server->stats[i].route, server->stats[i].status, server->stats[i].count, arg);
}

uint64_t ql_http_server_stat(const ql_http_server_t *server, const char *route, int status) {
    for (size_t i = 0; i < server->n_stats; i++)
        if (server->stats[i].status == status && strcmp(server->stats[i].route, route) == 0)
            return server->stats[i].count;
    return 0;
}

/* ---- unauthenticated connections ---- */

static void anon_add(ql_http_conn_t *c) {
    ql_http_server_t *s = c->server;
    c->anon = true;
    s->n_anon++;
    c->anon_prev = s->anon_newest;
    c->anon_next = NULL;
    if (s->anon_newest)
        s->anon_newest->anon_next = c;
    else
        s->anon_oldest = c;
    s->anon_newest = c;
}

void ql_http_conn_anon_remove(ql_http_conn_t *c) {
    ql_http_server_t *s = c->server;
    if (!c->anon)
        return;
    c->anon = false;
    s->n_anon--;
    if (c->anon_prev)
        c->anon_prev->anon_next = c->anon_next;
    else
        s->anon_oldest = c->anon_next;
    if (c->anon_next)
        c->anon_next->anon_prev = c->anon_prev;
    else
        s->anon_newest = c->anon_prev;
    c->anon_prev = c->anon_next = NULL;
}

/* The connection a newcomer may take the place of when the server is full: the oldest
 * unauthenticated one with nothing in flight, else the oldest one still receiving a request
 * and nothing else. Connections with a request handed to a handler, or an answer being
 * written, are never taken (the work would be lost). NULL when there is none. */
static ql_http_conn_t *find_evictable(ql_http_server_t *s) {
    for (int pass = 0; pass < 2; pass++) {
        for (ql_http_conn_t *c = s->anon_oldest; c; c = c->anon_next) {
            if (c->closed || c->writes || c->finishing)
                continue;
            if (!c->head)
                return c;
            if (pass == 1 && c->head == c->parsing && !c->head->next)
                return c;
        }
    }
    return NULL;
}

/* ---- accepting ---- */

static void on_reject_close(uv_handle_t *h) {
    ql_http_server_t *s = h->data;
    free(h);
    s->n_rejecting--;
    ql_http_server_maybe_closed(s);
}

static void reject(ql_http_server_t *s, uv_stream_t *listener) {
    uv_tcp_t *t = malloc(sizeof *t);
    if (!t || uv_tcp_init(s->loop, t) != 0) {
        free(t);
        return;
    }
    t->data = s;
    s->n_rejecting++;
    s->counters.rejected++;
    if (uv_accept(listener, (uv_stream_t *)t) == 0) {
        /* Best effort and without a write request: a fresh socket's buffer takes it whole. */
        uv_buf_t b = uv_buf_init((char *)reject_503, sizeof reject_503 - 1);
        (void)uv_try_write((uv_stream_t *)t, &b, 1);
    }
    uv_close((uv_handle_t *)t, on_reject_close);
}

static void on_connection(uv_stream_t *listener, int status) {
    ql_http_server_t *s = listener->data;
    if (status < 0 || s->closing)
        return;
    if (s->n_open >= s->cfg.limits.max_connections && !find_evictable(s)) {
        reject(s, listener);
        return;
    }
    ql_http_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->loop = s->loop;
    c->server = s;
    if (uv_tcp_init(s->loop, &c->tcp) != 0) {
        free(c);
        return;
    }
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    c->refs = 2;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    s->n_open++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        ql_http_conn_close(c);
        return;
    }
    int namelen = sizeof c->peer;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &namelen) == 0) {
        if (c->peer.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&c->peer, c->peer_str, sizeof c->peer_str);
        else
            uv_ip4_name((struct sockaddr_in *)&c->peer, c->peer_str, sizeof c->peer_str);
        c->loopback = ql_http_addr_is_loopback((struct sockaddr *)&c->peer);
    }
    ql_http_peer_key((struct sockaddr *)&c->peer, c->peer_key);
    if (ql_http_peers_count(&s->peers, c->peer_key) >= s->cfg.limits.max_connections_per_address) {
        /* Best effort, as for max_connections: a fresh socket's buffer takes it whole. */
        s->counters.rejected_address++;
        uv_buf_t b = uv_buf_init((char *)reject_addr_503, sizeof reject_addr_503 - 1);
        (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        ql_http_conn_close(c);
        return;
    }
    if (ql_http_peers_add(&s->peers, c->peer_key) != 0) {
        ql_http_conn_close(c);
        return;
    }
    c->peer_counted = true;
    if (s->n_open > s->cfg.limits.max_connections) {
        /* Full, but an idle unauthenticated connection (checked above, and nothing ran since)
         * gives way: holding connections open without credentials cannot lock others out. */
        ql_http_conn_t *victim = find_evictable(s);
        if (victim) {
            s->counters.evicted++;
            ql_http_conn_close(victim);
        }
    }
    /* Every connection starts unauthenticated; once those take every slot but the reserve,
     * newcomers may stay only by authenticating. */
    c->probation = s->n_anon >= s->cfg.limits.max_connections - s->reserve;
    anon_add(c);
    c->accepted_ms = uv_now(s->loop);
    s->counters.accepted++;
    ql_http_conn_start(c);
}

/* ---- server ---- */

int ql_http_server_new(uv_loop_t *loop, const ql_http_config_t *cfg, ql_http_server_t **out) {
    ql_http_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return UV_ENOMEM;
    s->loop = loop;
    if (cfg)
        s->cfg = *cfg;
    ql_http_limits_t def;
    ql_http_limits_default(&def);
    ql_http_limits_t *l = &s->cfg.limits;
    /* Zero means "default" for every limit: a zero limit would make the server useless. */
    if (!l->max_header_bytes)
        l->max_header_bytes = def.max_header_bytes;
    if (!l->max_headers)
        l->max_headers = def.max_headers;
    if (!l->max_body_bytes)
        l->max_body_bytes = def.max_body_bytes;
    if (!l->request_timeout_ms)
        l->request_timeout_ms = def.request_timeout_ms;
    if (!l->idle_timeout_ms)
        l->idle_timeout_ms = def.idle_timeout_ms;
    if (!l->send_timeout_ms)
        l->send_timeout_ms = def.send_timeout_ms;
    if (!l->linger_ms)
        l->linger_ms = def.linger_ms;
    if (!l->max_connections)
        l->max_connections = def.max_connections;
    if (!l->max_pipeline)
        l->max_pipeline = def.max_pipeline;
    if (!l->max_connections_per_address)
        l->max_connections_per_address = def.max_connections_per_address;
    if (!l->first_request_timeout_ms)
        l->first_request_timeout_ms = def.first_request_timeout_ms;
    if (!l->auth_reserve)
        l->auth_reserve = def.auth_reserve;
    /* A reserve larger than a quarter of the server would starve clients without credentials
     * (health checks, the first request of a browser) on a small max_connections. */
    s->reserve =
        l->auth_reserve < l->max_connections / 4 ? l->auth_reserve : l->max_connections / 4;
    if (l->max_header_bytes > HTTP_PARSER_HEADER_CEILING) {
        free(s);
        return QL_EINVAL;
    }
    int rc = ql_http_peers_init(&s->peers);
    if (!rc)
        rc = uv_tcp_init(loop, &s->listener);
    if (rc) {
        free(s);
        return rc;
    }
    s->listener.data = s;
    *out = s;
    return 0;
}

int ql_http_server_listen(ql_http_server_t *server, const char *hostport) {
    struct sockaddr_storage addr;
    if (server->listening || server->closing)
        return QL_EINVAL;
    int rc = ql_http_parse_hostport(hostport, &addr);
    if (rc)
        return rc;
    rc = uv_tcp_bind(&server->listener, (struct sockaddr *)&addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&server->listener, 511, on_connection);
    if (rc)
        return rc;
    int len = sizeof server->bound;
    rc = uv_tcp_getsockname(&server->listener, (struct sockaddr *)&server->bound, &len);
    if (rc)
        return rc;
    server->listening = true;
    return 0;
}

int ql_http_server_port(const ql_http_server_t *server, int *port) {
    if (!server->listening)
        return UV_ENOTCONN;
    if (server->bound.ss_family == AF_INET6)
        *port = ntohs(((const struct sockaddr_in6 *)&server->bound)->sin6_port);
    else
        *port = ntohs(((const struct sockaddr_in *)&server->bound)->sin_port);
    return 0;
}

bool ql_http_server_is_loopback(const ql_http_server_t *server) {
    return server->listening && ql_http_addr_is_loopback((const struct sockaddr *)&server->bound);
}

void ql_http_server_maybe_closed(ql_http_server_t *s) {
    if (s->closing && s->listener_closed && s->n_conns == 0 && s->n_rejecting == 0 &&
        !s->close_called) {
        s->close_called = true;
        /* Connections still alive now are only held by handlers' requests: they forget the
         * server, whose memory the owner may free from the callback. */
        for (ql_http_conn_t *c = s->conns; c; c = c->next)
            c->server = NULL;
        s->conns = NULL;
        if (s->close_cb)
            s->close_cb(s, s->close_arg);
    }
}

static void on_listener_close(uv_handle_t *h) {
    ql_http_server_t *s = h->data;
    s->listener_closed = true;
    ql_http_server_maybe_closed(s);
}

void ql_http_server_close(ql_http_server_t *server, ql_http_close_cb close_cb, void *arg) {
    if (server->closing)
        return;
    server->closing = true;
    server->close_cb = close_cb;
    server->close_arg = arg;
    uv_close((uv_handle_t *)&server->listener, on_listener_close);
    for (ql_http_conn_t *c = server->conns; c; c = c->next)
        ql_http_conn_close(c);
}

void ql_http_server_free(ql_http_server_t *server) {
    if (!server)
        return;
    for (size_t i = 0; i < server->n_stats; i++)
        free(server->stats[i].route);
    free(server->stats);
    ql_http_peers_free(&server->peers);
    free(server);
}
