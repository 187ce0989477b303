/*
 * HTTP/1.1 server: listener, connections, parsing, response ordering, timeouts.
 *
 * DESIGN. One loop thread (see api/ql_http.h for the request lifetime rules). Per connection:
 *   - refs counts what may still touch the connection's memory: its two handles (tcp, timer)
 *     until their close callbacks, every request in its FIFO or held by a handler, every write
 *     in flight. The memory is freed when refs reaches 0, never earlier, so a handler that
 *     answers after the client left finds a connection marked closed, not freed memory.
 *   - The parser is paused after every complete message (http_parser_pause in
 *     on_message_complete), so handlers never run inside http_parser_execute, and parsing stops
 *     at a message boundary when max_pipeline requests are waiting: unparsed bytes stay in rbuf
 *     and reading stops until responses drain (back-pressure instead of unbounded queues).
 *   - One timer per connection, armed for the single deadline that applies now: request
 *     (first byte of a request to its end, never extended: slowloris gets 408), send (no
 *     write progress), idle (nothing in flight), linger (after a final response). While a
 *     handler holds a request and nothing else is arriving, no deadline applies.
 *     Until the headers of its first request are complete, a connection's idle and read
 *     deadlines are capped at first_request_timeout_ms from its accept.
 *   - Errors detected while parsing become a response to the request being parsed (or to a
 *     request made for the error, when the bytes could not begin one), queued behind the
 *     earlier responses like any other, and then the connection closes gracefully:
 *     shutdown(SHUT_WR) once the writes are out, discard input until EOF or linger_ms, close.
 *   - Holding connections (ql_http.h): server->peers counts open connections per address;
 *     server->anon_oldest.. lists the unauthenticated ones in accept order, which is the
 *     eviction order when the server is full; a connection leaves that list when a response
 *     to an authenticated request is given on it, and never joins it again.
 */
#include "api/http_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { T_NONE, T_IDLE, T_READ, T_SEND, T_LINGER };

#define RBUF_SIZE 16384
#define HTTP_PARSER_HEADER_CEILING (80 * 1024)

typedef struct http_stat {
    char *route;
    int status;
    uint64_t count;
} http_stat_t;

struct ql_http_server {
    uv_loop_t *loop;
    ql_http_config_t cfg;
    uv_tcp_t listener;
    bool listening;
    bool closing;
    bool listener_closed;
    bool close_called;
    struct sockaddr_storage bound;
    ql_http_conn_t *conns;       /* every connection whose memory is alive */
    size_t n_conns;              /* connections whose handles are not yet closed */
    size_t n_open;               /* connections not closed: what max_connections limits */
    size_t n_rejecting;          /* refused connections whose handle is still closing */
    size_t n_anon;               /* open connections not authenticated: what auth_reserve bounds */
    ql_http_conn_t *anon_oldest; /* those connections in accept order, for eviction */
    ql_http_conn_t *anon_newest;
    size_t reserve;        /* auth_reserve as it applies: at most max_connections / 4 */
    ql_http_peers_t peers; /* open connections per client address */
    ql_http_close_cb close_cb;
    void *close_arg;
    ql_http_counters_t counters;
    http_stat_t *stats;
    size_t n_stats;
    size_t cap_stats;
};

struct ql_http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    ql_http_server_t *server; /* NULL once the server's close callback has run */
    uv_loop_t *loop;
    ql_http_conn_t *prev;
    ql_http_conn_t *next;
    unsigned refs;
    unsigned handles;
    http_parser parser;
    ql_http_req_t *head; /* FIFO of requests, oldest first */
    ql_http_req_t *tail;
    size_t queued;
    ql_http_req_t *parsing;   /* the request whose bytes are arriving (the tail) */
    ql_http_req_t *completed; /* set by on_message_complete for the parse loop */
    char rbuf[RBUF_SIZE];
    size_t roff;
    size_t rlen;
    bool reading;
    bool in_parse;
    bool no_more_input; /* a final request was seen or an error answered: parse no further */
    bool eof;           /* the client shut down its side */
    bool finishing;     /* the final response is queued; shutdown follows */
    bool lingering;
    bool close_when_written;
    bool closed;
    int cb_status; /* HTTP status chosen by a parser callback that stopped the parser */
    int timer_mode;
    uint64_t mark;      /* start of the current timer mode (read: the request's first byte) */
    uint64_t read_mark; /* first byte of the request being parsed */
    size_t writes;
    struct sockaddr_storage peer;
    char peer_str[INET6_ADDRSTRLEN];
    bool loopback;
    unsigned char peer_key[QL_HTTP_PEER_KEY];
    bool peer_counted;         /* counted in server->peers */
    bool anon;                 /* counted in server->n_anon: no request on it authenticated yet */
    ql_http_conn_t *anon_prev; /* the server's accept-ordered list of anon connections */
    ql_http_conn_t *anon_next;
    bool probation;     /* accepted into the reserve: one request at a time, closed after an
                           unauthenticated answer */
    bool first_headers; /* the headers of its first request are complete */
    bool timer_first;   /* the armed deadline is first_request_timeout_ms */
    uint64_t accepted_ms;
    const char *cb_why; /* static reason for cb_status 400, or NULL */
};

typedef struct http_write {
    uv_write_t w;
    ql_http_conn_t *conn;
    char *data; /* owned; NULL for static data */
} http_write_t;

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";
#define REJECT_BODY                                                                                \
    "{\"code\":\"999\",\"data\":null,\"msg\":\"too many connections, try again\","                 \
    "\"error_code\":\"QL-00023\"}"
_Static_assert(sizeof REJECT_BODY - 1 == 90, "update Content-Length in reject_503");
static const char reject_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                 "Content-Type: application/json;charset=utf-8\r\n"
                                 "Content-Length: 90\r\n"
                                 "Connection: close\r\n"
                                 "Retry-After: 1\r\n\r\n" REJECT_BODY;
#define REJECT_ADDR_BODY                                                                           \
    "{\"code\":\"999\",\"data\":null,\"msg\":\"too many connections from your address, try "       \
    "again\",\"error_code\":\"QL-00023\"}"
_Static_assert(sizeof REJECT_ADDR_BODY - 1 == 108, "update Content-Length in reject_addr_503");
static const char reject_addr_503[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                      "Content-Type: application/json;charset=utf-8\r\n"
                                      "Content-Length: 108\r\n"
                                      "Connection: close\r\n"
                                      "Retry-After: 1\r\n\r\n" REJECT_ADDR_BODY;

static void conn_parse(ql_http_conn_t *c);
static void conn_flush(ql_http_conn_t *c);
static void conn_arm(ql_http_conn_t *c);
static void conn_close(ql_http_conn_t *c);
static void anon_remove(ql_http_conn_t *c);
static void conn_update_reading(ql_http_conn_t *c);
static void server_maybe_closed(ql_http_server_t *s);

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

static void count_response(ql_http_server_t *s, const char *route, int status) {
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
    if (s->n_stats == s->cap_stats) {
        size_t cap = s->cap_stats ? 2 * s->cap_stats : 16;
        http_stat_t *st = realloc(s->stats, cap * sizeof *st);
        if (!st)
            return; /* a lost metric is better than a lost response */
        s->stats = st;
        s->cap_stats = cap;
    }
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

/* ---- connection lifetime ---- */

static void conn_unref(ql_http_conn_t *c) {
    if (--c->refs > 0)
        return;
    ql_http_server_t *s = c->server;
    if (s) {
        if (c->prev)
            c->prev->next = c->next;
        else
            s->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
    }
    free(c);
}

static void conn_unlink_req(ql_http_conn_t *c, ql_http_req_t *req) {
    ql_http_req_t **pp = &c->head, *prev = NULL;
    while (*pp && *pp != req) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = req->next;
    if (c->tail == req)
        c->tail = prev;
    req->next = NULL;
    c->queued--;
}

/* Frees a request that is in (or was just taken out of) the FIFO, dropping its reference. */
static void req_free(ql_http_req_t *req) {
    ql_http_conn_t *c = req->conn;
    ql_http_req_release(req);
    conn_unref(c);
}

static void on_handle_close(uv_handle_t *h) {
    ql_http_conn_t *c = h->data;
    if (--c->handles == 0) {
        c->server->n_conns--;
        server_maybe_closed(c->server);
    }
    conn_unref(c);
}

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

static void anon_remove(ql_http_conn_t *c) {
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

/* Closes at once: pending responses are dropped, requests held by handlers stay valid. */
static void conn_close(ql_http_conn_t *c) {
    if (c->closed)
        return;
    c->closed = true;
    c->server->n_open--;
    if (c->peer_counted)
        ql_http_peers_remove(&c->server->peers, c->peer_key);
    c->peer_counted = false;
    anon_remove(c);
    c->parsing = NULL;
    c->completed = NULL;
    for (ql_http_req_t *req = c->head, *next; req; req = next) {
        next = req->next;
        if (req->state != QL_HTTP_REQ_HANDLING) {
            conn_unlink_req(c, req);
            req_free(req);
        }
    }
    uv_close((uv_handle_t *)&c->tcp, on_handle_close);
    uv_close((uv_handle_t *)&c->timer, on_handle_close);
}

/* ---- writing ---- */

static void on_write(uv_write_t *w, int status) {
    http_write_t *wr = (http_write_t *)w;
    ql_http_conn_t *c = wr->conn;
    free(wr->data);
    free(wr);
    c->writes--;
    if (!c->closed) {
        if (status < 0) {
            conn_close(c);
        } else if (c->close_when_written && c->writes == 0) {
            conn_close(c);
        } else {
            /* Progress: the send deadline counts from the last completed write. */
            c->mark = uv_now(c->loop);
            conn_arm(c);
        }
    }
    conn_unref(c);
}

/* Writes len bytes of data; takes ownership of data when owned (else it must be static). */
static int conn_write(ql_http_conn_t *c, char *data, size_t len, bool owned) {
    http_write_t *wr = malloc(sizeof *wr);
    if (!wr) {
        if (owned)
            free(data);
        return UV_ENOMEM;
    }
    wr->conn = c;
    wr->data = owned ? data : NULL;
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    int rc = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc) {
        free(wr->data);
        free(wr);
        return rc;
    }
    if (c->writes++ == 0)
        c->mark = uv_now(c->loop);
    c->refs++;
    return 0;
}

static void on_shutdown(uv_shutdown_t *sr, int status) {
    ql_http_conn_t *c = sr->data;
    if (c->closed)
        return;
    if (status < 0 || c->eof) {
        conn_close(c);
        return;
    }
    /* Discard what the client still sends, so closing does not reset the connection before it
     * has read our answer (a client sending a large body gets its 413 this way). */
    c->lingering = true;
    conn_arm(c);
    conn_update_reading(c);
}

/* The final response has been queued: no more input is parsed, and the connection closes
 * gracefully once the writes are out. */
static void conn_finish(ql_http_conn_t *c) {
    c->no_more_input = true;
    c->finishing = true;
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        c->close_when_written = true;
        if (c->writes == 0)
            conn_close(c);
    }
}

static void maybe_send_continue(ql_http_conn_t *c) {
    ql_http_req_t *req = c->head;
    /* A 100 may go out only when every earlier response has been written, or the client would
     * read it as the answer to an earlier request. */
    if (!req || !req->expect_continue || req->continue_sent || req->state != QL_HTTP_REQ_PARSING)
        return;
    req->continue_sent = true;
    if (conn_write(c, (char *)continue_100, sizeof continue_100 - 1, false) != 0)
        conn_close(c);
}

static void conn_flush(ql_http_conn_t *c) {
    if (c->closed)
        return;
    while (c->head && c->head->state == QL_HTTP_REQ_RESPONDED) {
        ql_http_req_t *req = c->head;
        conn_unlink_req(c, req);
        bool last = req->close_after;
        char *data = req->resp.p;
        size_t len = req->resp.len;
        req->resp.p = NULL;
        req->resp.len = req->resp.cap = 0;
        req_free(req);
        if (conn_write(c, data, len, true) != 0) {
            conn_close(c);
            return;
        }
        if (last) {
            conn_finish(c);
            break;
        }
    }
    if (c->closed)
        return;
    maybe_send_continue(c);
    if (!c->head && c->eof && !c->finishing) {
        /* The client sent everything it will send and has all its answers queued. */
        c->no_more_input = true;
        c->close_when_written = true;
        if (c->writes == 0) {
            conn_close(c);
            return;
        }
    }
    if (!c->in_parse && !c->parsing && c->roff < c->rlen && !c->no_more_input)
        conn_parse(c); /* resume after back-pressure */
    else {
        conn_update_reading(c);
        conn_arm(c);
    }
}

/* ---- timers ---- */

static void on_timer(uv_timer_t *t) {
    ql_http_conn_t *c = t->data;
    ql_http_server_t *s = c->server;
    if (c->closed)
        return;
    switch (c->timer_mode) {
    case T_READ: {
        uint64_t limit_ms = s->cfg.limits.request_timeout_ms;
        if (c->timer_first) {
            s->counters.timeouts_first++;
            limit_ms = s->cfg.limits.first_request_timeout_ms;
        } else {
            s->counters.timeouts_request++;
        }
        ql_http_req_t *req = c->parsing;
        c->parsing = NULL;
        c->no_more_input = true;
        if (!req) {
            conn_close(c);
            return;
        }
        req->state = QL_HTTP_REQ_HANDLING;
        req->close_after = true;
        s->counters.bad_requests++;
        ql_http_respond_error(req, 408, QL_ETRANSIENT,
                              c->timer_first ? "request headers not received within %llu ms"
                                             : "request not received within %llu ms",
                              (unsigned long long)limit_ms);
        return;
    }
    case T_IDLE:
        if (c->timer_first)
            s->counters.timeouts_first++;
        else
            s->counters.timeouts_idle++;
        conn_close(c);
        return;
    case T_SEND:
        s->counters.timeouts_send++;
        conn_close(c);
        return;
    default:
        conn_close(c);
        return;
    }
}

static void conn_arm(ql_http_conn_t *c) {
    if (c->closed)
        return;
    const ql_http_limits_t *lim = &c->server->cfg.limits;
    uint64_t now = uv_now(c->loop);
    int mode;
    uint64_t timeout = 0;
    if (c->lingering) {
        mode = T_LINGER;
        timeout = lim->linger_ms;
    } else if (c->parsing) {
        mode = T_READ;
        timeout = lim->request_timeout_ms;
    } else if (c->head) {
        mode = T_NONE; /* a handler holds a request: its own business how long it takes */
    } else if (c->writes) {
        mode = T_SEND;
        timeout = lim->send_timeout_ms;
    } else {
        mode = T_IDLE;
        timeout = lim->idle_timeout_ms;
    }
    if (mode != c->timer_mode) {
        c->timer_mode = mode;
        if (mode != T_SEND)
            c->mark = now;
    }
    if (mode == T_READ)
        c->mark = c->read_mark;
    if (mode == T_NONE) {
        uv_timer_stop(&c->timer);
        return;
    }
    uint64_t due = c->mark + timeout;
    /* A connection that has not yet delivered the headers of a first request gets the short
     * first_request_timeout_ms from its accept, waiting or reading alike: opening connections
     * and sending nothing (or a trickle) holds a slot for seconds, not for idle_timeout_ms. */
    c->timer_first = false;
    if (!c->first_headers && (mode == T_IDLE || mode == T_READ)) {
        uint64_t first_due = c->accepted_ms + lim->first_request_timeout_ms;
        if (first_due <= due) {
            due = first_due;
            c->timer_first = true;
        }
    }
    uv_timer_start(&c->timer, on_timer, due > now ? due - now : 0, 0);
}

/* ---- reading and parsing ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    ql_http_conn_t *c = h->data;
    /* Reading only happens once rbuf is fully parsed, so it can be reused from its start. */
    c->roff = c->rlen = 0;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void conn_eof(ql_http_conn_t *c) {
    c->eof = true;
    c->no_more_input = true;
    if (c->parsing) {
        /* A request cut short by EOF gets no answer: the client cannot read one anyway when
         * it closed, and a half-closed client that sent a partial request made a mistake. */
        ql_http_req_t *req = c->parsing;
        c->parsing = NULL;
        conn_unlink_req(c, req);
        req_free(req);
    }
    if (c->finishing) {
        conn_update_reading(c);
        return;
    }
    /* EOF while a handler still works means the client is gone, as nginx decides too: a TCP
     * half-close cannot be told from a full close here, and a client that closed completely
     * would only reset the answer. Handlers then see ql_http_req_client_gone(). */
    for (ql_http_req_t *req = c->head; req; req = req->next) {
        if (req->state == QL_HTTP_REQ_HANDLING) {
            conn_close(c);
            return;
        }
    }
    conn_flush(c);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    (void)buf;
    ql_http_conn_t *c = st->data;
    if (c->closed || n == 0)
        return;
    if (n < 0) {
        if (n == UV_EOF && !c->lingering) {
            conn_eof(c);
            return;
        }
        conn_close(c);
        return;
    }
    if (c->lingering || c->no_more_input) {
        c->roff = c->rlen = 0; /* discarded */
        return;
    }
    c->rlen = (size_t)n;
    c->roff = 0;
    conn_parse(c);
}

/* A connection on probation is read one request at a time: its first answer decides whether
 * it stays, and no later request may run (a write among them) only to lose its answer. */
static size_t conn_max_pipeline(const ql_http_conn_t *c, const ql_http_limits_t *lim) {
    return c->probation ? 1 : lim->max_pipeline;
}

static void conn_update_reading(ql_http_conn_t *c) {
    if (c->closed)
        return;
    const ql_http_limits_t *lim = &c->server->cfg.limits;
    bool want;
    if (c->lingering)
        want = !c->eof;
    else
        want = !c->no_more_input && !c->eof && c->roff >= c->rlen &&
               (c->parsing || c->queued < conn_max_pipeline(c, lim));
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
            conn_close(c);
            return;
        }
        c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static int fail_cb(ql_http_conn_t *c, int status) {
    c->cb_status = status;
    return -1;
}

/* A new request at the tail of the FIFO, holding a connection reference; NULL when out of
 * memory. */
static ql_http_req_t *conn_new_req(ql_http_conn_t *c) {
    ql_http_req_t *req = ql_http_req_alloc(c->loop, &c->peer, c->peer_str, c->loopback);
    if (!req)
        return NULL;
    req->conn = c;
    c->refs++;
    if (c->tail)
        c->tail->next = req;
    else
        c->head = req;
    c->tail = req;
    c->queued++;
    return req;
}

static int on_message_begin(http_parser *p) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = conn_new_req(c);
    if (!req)
        return fail_cb(c, 500);
    c->parsing = req;
    c->read_mark = uv_now(c->loop);
    return 0;
}

static int count_header_bytes(ql_http_conn_t *c, ql_http_req_t *req, size_t n) {
    req->header_bytes += n;
    if (req->header_bytes > c->server->cfg.limits.max_header_bytes)
        return fail_cb(c, 431);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = c->parsing;
    if (count_header_bytes(c, req, len))
        return -1;
    req->url_len += len;
    return ql_http_buf_append(&req->head, at, len) ? fail_cb(c, 500) : 0;
}

/* NUL-terminates the element the previous callbacks were appending to. */
static int end_element(ql_http_req_t *req) {
    return ql_http_buf_append(&req->head, "", 1);
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = c->parsing;
    /* http-parser passes "Host " for "Host : x" (and " Host" after the request line). RFC 7230
     * 3.2.4 makes whitespace before the colon a 400: a proxy that reads the field otherwise
     * than this server would be smuggled a request. */
    if (memchr(at, ' ', len) || memchr(at, '\t', len)) {
        c->cb_why = "whitespace in a header field name";
        return fail_cb(c, 400);
    }
    /* 4: ": " and CRLF, so many tiny headers count for what they cost on the wire. */
    if (count_header_bytes(c, req, len + (req->last_cb != 1 ? 4 : 0)))
        return -1;
    if (req->headers_done)
        return 0; /* a trailer of a chunked body: counted, not kept */
    if (req->last_cb != 1) {
        if (req->n_hdrs >= c->server->cfg.limits.max_headers)
            return fail_cb(c, 431);
        if (end_element(req))
            return fail_cb(c, 500);
        if (req->n_hdrs == req->cap_hdrs) {
            size_t cap = req->cap_hdrs ? 2 * req->cap_hdrs : 8;
            ql_http_hdr_t *h = realloc(req->hdrs, cap * sizeof *h);
            if (!h)
                return fail_cb(c, 500);
            req->hdrs = h;
            req->cap_hdrs = cap;
        }
        req->hdrs[req->n_hdrs++] = (ql_http_hdr_t){req->head.len, req->head.len};
        req->last_cb = 1;
    }
    return ql_http_buf_append(&req->head, at, len) ? fail_cb(c, 500) : 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = c->parsing;
    if (count_header_bytes(c, req, len))
        return -1;
    if (req->headers_done)
        return 0;
    if (req->last_cb != 2) {
        if (end_element(req))
            return fail_cb(c, 500);
        req->hdrs[req->n_hdrs - 1].value = req->head.len;
        req->last_cb = 2;
    }
    return ql_http_buf_append(&req->head, at, len) ? fail_cb(c, 500) : 0;
}

static void trim_value(ql_http_req_t *req, ql_http_hdr_t *h) {
    char *v = req->head.p + h->value;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = '\0';
}

static int on_headers_complete(http_parser *p) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = c->parsing;
    const ql_http_limits_t *lim = &c->server->cfg.limits;
    if (end_element(req))
        return fail_cb(c, 500);
    if (req->last_cb == 1) {
        /* A last header without a value callback: give it an empty value. */
        req->hdrs[req->n_hdrs - 1].value = req->head.len;
        if (end_element(req))
            return fail_cb(c, 500);
    }
    for (size_t i = 0; i < req->n_hdrs; i++)
        trim_value(req, &req->hdrs[i]);
    req->headers_done = true;
    c->first_headers = true;
    req->method = http_method_str((enum http_method)p->method);
    req->is_head = p->method == HTTP_HEAD;
    req->http_major = (unsigned char)p->http_major;
    req->http_minor = (unsigned char)p->http_minor;
    req->keep_alive = http_should_keep_alive(p) != 0;
    bool chunked = (p->flags & F_CHUNKED) != 0;
    bool has_length = p->content_length != ULLONG_MAX;
    if (!chunked && has_length && p->content_length > lim->max_body_bytes)
        return fail_cb(c, 413);
    const char *expect = ql_http_req_header(req, "Expect");
    if (expect) {
        if (strcasecmp(expect, "100-continue") != 0)
            return fail_cb(c, 417);
        if (p->http_major == 1 && p->http_minor >= 1 &&
            (chunked || (has_length && p->content_length > 0))) {
            req->expect_continue = true;
            maybe_send_continue(c);
        }
    }
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = c->parsing;
    if (req->body.len + len > c->server->cfg.limits.max_body_bytes)
        return fail_cb(c, 413);
    return ql_http_buf_append(&req->body, at, len) ? fail_cb(c, 500) : 0;
}

static int on_message_complete(http_parser *p) {
    ql_http_conn_t *c = p->data;
    ql_http_req_t *req = c->parsing;
    c->parsing = NULL;
    c->completed = req;
    /* Upgrades (h2c, websocket) are not spoken here: answer in HTTP/1.1, then close. */
    if (p->upgrade)
        req->close_after = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void conn_dispatch(ql_http_conn_t *c, ql_http_req_t *req) {
    ql_http_server_t *s = c->server;
    if (!req->keep_alive || req->close_after) {
        req->close_after = true;
        c->no_more_input = true;
    }
    req->state = QL_HTTP_REQ_HANDLING;
    int rc = ql_http_req_finalize(req);
    if (rc == QL_EINVAL) {
        s->counters.bad_requests++;
        ql_http_respond_error(req, 400, QL_EINVAL, "malformed request target");
    } else if (rc) {
        ql_http_respond_error(req, 500, rc, "out of memory");
    } else if (s->cfg.handler) {
        s->cfg.handler(req, s->cfg.handler_arg);
    } else {
        ql_http_respond_error(req, 404, QL_ENOTFOUND, "no handler");
    }
}

/* The parser stopped on an error: answer the request being parsed and close after it. */
static void conn_fail(ql_http_conn_t *c, int status, const char *why) {
    ql_http_server_t *s = c->server;
    ql_http_req_t *req = c->parsing;
    c->parsing = NULL;
    c->no_more_input = true;
    if (!req) {
        /* The bytes could not even begin a request (junk after pipelined requests, or alone):
         * the error gets a request of its own behind the earlier ones, so they are answered
         * first (a write among them must not lose its answer, or a retry repeats it). */
        req = conn_new_req(c);
        if (!req) {
            conn_close(c);
            return;
        }
    }
    req->state = QL_HTTP_REQ_HANDLING;
    req->close_after = true;
    req->expect_continue = false;
    s->counters.bad_requests++;
    const ql_http_limits_t *lim = &s->cfg.limits;
    switch (status) {
    case 413:
        ql_http_respond_error(req, 413, QL_ETOOBIG, "request body exceeds %zu bytes",
                              lim->max_body_bytes);
        break;
    case 431:
        ql_http_respond_error(req, 431, QL_ETOOBIG,
                              "request headers exceed %zu bytes or %zu fields",
                              lim->max_header_bytes, lim->max_headers);
        break;
    case 417:
        ql_http_respond_error(req, 417, QL_EINVAL, "only Expect: 100-continue is supported");
        break;
    case 500:
        ql_http_respond_error(req, 500, UV_ENOMEM, "out of memory");
        break;
    default:
        ql_http_respond_error(req, 400, QL_EINVAL, "malformed request: %s", why);
        break;
    }
}

static void conn_parse(ql_http_conn_t *c) {
    if (c->in_parse || c->closed)
        return;
    c->in_parse = true;
    const ql_http_limits_t *lim = &c->server->cfg.limits;
    while (!c->closed && !c->no_more_input && c->roff < c->rlen) {
        if (!c->parsing && c->queued >= conn_max_pipeline(c, lim))
            break; /* back-pressure: resumed by conn_flush */
        size_t n =
            http_parser_execute(&c->parser, &parser_settings, c->rbuf + c->roff, c->rlen - c->roff);
        c->roff += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            ql_http_req_t *req = c->completed;
            c->completed = NULL;
            if (req)
                conn_dispatch(c, req);
            continue;
        }
        if (e != HPE_OK) {
            int status = c->cb_status;
            if (!status)
                status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
            conn_fail(c, status, c->cb_why ? c->cb_why : http_errno_description(e));
            break;
        }
    }
    if (c->no_more_input)
        c->roff = c->rlen = 0;
    c->in_parse = false;
    if (!c->closed) {
        conn_update_reading(c);
        conn_arm(c);
    }
}

/* ---- responding ---- */

int ql_http_respond(ql_http_req_t *req, int status, const char *content_type, const char *body,
                    size_t len) {
    ql_http_conn_t *c = req->conn;
    ql_http_server_t *s = c->server;
    int result = 0;
    if (status < 200 || status > 599) {
        status = 500;
        content_type = NULL;
        body = NULL;
        len = 0;
        result = QL_EINVAL;
    }
    if (c->closed) {
        if (s) {
            count_response(s, req->route_name, status);
            s->counters.responses_dropped++;
        }
        conn_unlink_req(c, req);
        req_free(req);
        return UV_ECONNRESET;
    }
    count_response(s, req->route_name, status);
    if (req->user && c->anon) {
        /* Valid credentials: the connection may keep a reserved slot from now on, and is
         * never evicted. */
        anon_remove(c);
        c->probation = false;
    } else if (c->probation && !req->user && !req->close_after) {
        s->counters.probation_closed++;
        req->close_after = true;
    }
    if (ql_http_req_build(req, status, content_type, body, len) != 0) {
        conn_unlink_req(c, req);
        req_free(req);
        conn_close(c);
        return UV_ENOMEM;
    }
    req->state = QL_HTTP_REQ_RESPONDED;
    conn_flush(c);
    return result;
}

bool ql_http_req_client_gone(const ql_http_req_t *req) {
    return req->conn->closed;
}

/* ---- accepting ---- */

static void on_reject_close(uv_handle_t *h) {
    ql_http_server_t *s = h->data;
    free(h);
    s->n_rejecting--;
    server_maybe_closed(s);
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
        conn_close(c);
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
        conn_close(c);
        return;
    }
    if (ql_http_peers_add(&s->peers, c->peer_key) != 0) {
        conn_close(c);
        return;
    }
    c->peer_counted = true;
    if (s->n_open > s->cfg.limits.max_connections) {
        /* Full, but an idle unauthenticated connection (checked above, and nothing ran since)
         * gives way: holding connections open without credentials cannot lock others out. */
        ql_http_conn_t *victim = find_evictable(s);
        if (victim) {
            s->counters.evicted++;
            conn_close(victim);
        }
    }
    /* Every connection starts unauthenticated; once those take every slot but the reserve,
     * newcomers may stay only by authenticating. */
    c->probation = s->n_anon >= s->cfg.limits.max_connections - s->reserve;
    anon_add(c);
    c->accepted_ms = uv_now(s->loop);
    s->counters.accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->timer_mode = T_NONE;
    conn_update_reading(c);
    conn_arm(c);
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

static void server_maybe_closed(ql_http_server_t *s) {
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
    server_maybe_closed(s);
}

void ql_http_server_close(ql_http_server_t *server, ql_http_close_cb close_cb, void *arg) {
    if (server->closing)
        return;
    server->closing = true;
    server->close_cb = close_cb;
    server->close_arg = arg;
    uv_close((uv_handle_t *)&server->listener, on_listener_close);
    for (ql_http_conn_t *c = server->conns; c; c = c->next)
        conn_close(c);
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
