/*
 * HTTP/1.1 connections: reading, parsing, response ordering, timeouts (http/http_server.c accepts
 * them).
 *
 * DESIGN. One loop thread (see http/ql_http.h for the request lifetime rules). Per connection:
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
 *   - Accepting, the connection limits and the server's own lifetime are in http/http_server.c;
 *     a connection leaves the server's list of unauthenticated connections (the eviction
 *     order) when a response to an authenticated request is given on it.
 */
#include "base/ql_buf.h"
#include "http_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct http_write {
    uv_write_t w;
    ql_http_conn_t *conn;
    char *data; /* owned; NULL for static data */
} http_write_t;

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";
static void conn_parse(ql_http_conn_t *c);
static void conn_flush(ql_http_conn_t *c);
static void conn_arm(ql_http_conn_t *c);
static void conn_update_reading(ql_http_conn_t *c);

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
        ql_http_server_maybe_closed(c->server);
    }
    conn_unref(c);
}

/* Closes at once: pending responses are dropped, requests held by handlers stay valid. */
void ql_http_conn_close(ql_http_conn_t *c) {
    if (c->closed)
        return;
    c->closed = true;
    c->server->n_open--;
    if (c->peer_counted)
        ql_http_peers_remove(&c->server->peers, c->peer_key);
    c->peer_counted = false;
    ql_http_conn_anon_remove(c);
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
            ql_http_conn_close(c);
        } else if (c->close_when_written && c->writes == 0) {
            ql_http_conn_close(c);
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
        ql_http_conn_close(c);
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
            ql_http_conn_close(c);
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
        ql_http_conn_close(c);
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
            ql_http_conn_close(c);
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
            ql_http_conn_close(c);
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
    case QL_HTTP_T_READ: {
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
            ql_http_conn_close(c);
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
    case QL_HTTP_T_IDLE:
        if (c->timer_first)
            s->counters.timeouts_first++;
        else
            s->counters.timeouts_idle++;
        ql_http_conn_close(c);
        return;
    case QL_HTTP_T_SEND:
        s->counters.timeouts_send++;
        ql_http_conn_close(c);
        return;
    default:
        ql_http_conn_close(c);
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
        mode = QL_HTTP_T_LINGER;
        timeout = lim->linger_ms;
    } else if (c->parsing) {
        mode = QL_HTTP_T_READ;
        timeout = lim->request_timeout_ms;
    } else if (c->head) {
        mode = QL_HTTP_T_NONE; /* a handler holds a request: its own business how long it takes */
    } else if (c->writes) {
        mode = QL_HTTP_T_SEND;
        timeout = lim->send_timeout_ms;
    } else {
        mode = QL_HTTP_T_IDLE;
        timeout = lim->idle_timeout_ms;
    }
    if (mode != c->timer_mode) {
        c->timer_mode = mode;
        if (mode != QL_HTTP_T_SEND)
            c->mark = now;
    }
    if (mode == QL_HTTP_T_READ)
        c->mark = c->read_mark;
    if (mode == QL_HTTP_T_NONE) {
        uv_timer_stop(&c->timer);
        return;
    }
    uint64_t due = c->mark + timeout;
    /* A connection that has not yet delivered the headers of a first request gets the short
     * first_request_timeout_ms from its accept, waiting or reading alike: opening connections
     * and sending nothing (or a trickle) holds a slot for seconds, not for idle_timeout_ms. */
    c->timer_first = false;
    if (!c->first_headers && (mode == QL_HTTP_T_IDLE || mode == QL_HTTP_T_READ)) {
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
            ql_http_conn_close(c);
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
        ql_http_conn_close(c);
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
            ql_http_conn_close(c);
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
        if (QL_ARRAY_RESERVE(req->hdrs, req->cap_hdrs, req->n_hdrs + 1, 8))
            return fail_cb(c, 500);
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
            ql_http_conn_close(c);
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

/* ---- starting ---- */

void ql_http_conn_start(ql_http_conn_t *c) {
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->timer_mode = QL_HTTP_T_NONE;
    conn_update_reading(c);
    conn_arm(c);
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
            ql_http_count_response(s, req->route_name, status);
            s->counters.responses_dropped++;
        }
        conn_unlink_req(c, req);
        req_free(req);
        return UV_ECONNRESET;
    }
    ql_http_count_response(s, req->route_name, status);
    if (req->user && c->anon) {
        /* Valid credentials: the connection may keep a reserved slot from now on, and is
         * never evicted. */
        ql_http_conn_anon_remove(c);
        c->probation = false;
    } else if (c->probation && !req->user && !req->close_after) {
        s->counters.probation_closed++;
        req->close_after = true;
    }
    if (ql_http_req_build(req, status, content_type, body, len) != 0) {
        conn_unlink_req(c, req);
        req_free(req);
        ql_http_conn_close(c);
        return UV_ENOMEM;
    }
    req->state = QL_HTTP_REQ_RESPONDED;
    conn_flush(c);
    return result;
}

bool ql_http_req_client_gone(const ql_http_req_t *req) {
    return req->conn->closed;
}
