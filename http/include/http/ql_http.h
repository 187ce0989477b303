/*
 * HTTP/1.1 server for Qilin's REST API, on one libuv loop, parsing with http-parser.
 *
 * DESIGN. Everything here runs on the loop thread that owns the server: accepting, parsing,
 * timers, handlers and ql_http_respond(). Work done elsewhere (a store commit on the writer
 * thread, password verification in the threadpool) comes back to the loop thread (uv_async,
 * uv_queue_work's after_work) before it responds.
 *
 * A connection keeps a FIFO of its requests in arrival order. A complete request is handed to
 * the handler at once, even when earlier requests on the same connection are still waiting for
 * their responses (HTTP pipelining); responses are written strictly in FIFO order, so a response
 * given early waits for the ones before it. At most limits.max_pipeline requests may wait per
 * connection; past that the connection stops reading (back-pressure) until responses go out.
 *
 * Lifetime of a request (the ref scheme). A request is owned by the server until its handler
 * is called; from then on the handler holds it until it calls ql_http_respond() exactly once,
 * which consumes it. The request holds a reference on its connection, so the connection's
 * memory outlives every request handed out, even after the client disconnected or the server
 * closed: the socket and timer are closed at once, and ql_http_respond() on such a request
 * just frees it (ql_http_req_client_gone() tells a handler that the answer will go nowhere).
 * A connection is freed when its two handles are closed and no request or write refers to it.
 * A generation counter was the alternative; references were chosen because the handler then
 * keeps one plain pointer and every accessor stays valid until it responds.
 *
 * Limits (see docs/http.md): headers over max_header_bytes or max_headers get 431; bodies over
 * max_body_bytes get 413 (from Content-Length before reading it, or while streaming a chunked
 * body); a request not fully received within request_timeout_ms gets 408; a connection with
 * nothing to do for idle_timeout_ms is closed; a client that does not take its response within
 * send_timeout_ms is closed; past max_connections new connections get 503. Malformed requests
 * get 400, also when they follow pipelined requests: those are answered first. After any of
 * these the connection is closed: the server half-closes and discards input for up to
 * linger_ms, so the client can read the error before the socket goes away.
 *
 * Holding connections (docs/http.md). One address (IPv4, or an IPv6 /64) may hold at most
 * max_connections_per_address connections; more get 503. A connection must deliver the headers
 * of its first request within first_request_timeout_ms of being accepted, or it is closed.
 * A connection is authenticated once a request on it was answered with valid credentials (the
 * router set ql_http_req_user()). Connections that are not may take max_connections minus the
 * reserve (auth_reserve, at most a quarter of max_connections); a connection accepted while
 * they take all of that is on probation: it is read one request at a time, and after its first
 * answer it is closed unless that request was authenticated. When the server is full, a new
 * connection takes the place of the oldest unauthenticated one that has nothing in flight (or,
 * failing that, is only receiving a request); only when there is none does it get 503. So
 * clients filling the server without credentials leave room for those that have them.
 * Errors from the server itself use the Kylin envelope {"code":"999","data":null,...}.
 */
#ifndef QL_HTTP_H
#define QL_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "http/ql_auth.h"

typedef struct ql_http_server ql_http_server_t;
typedef struct ql_http_req ql_http_req_t;
typedef struct ql_http_router ql_http_router_t;

/* Called on the loop thread with a complete request. req belongs to the handler until it calls
 * ql_http_respond() (now or later, on the loop thread). arg is the pointer registered with it. */
typedef void (*ql_http_handler_cb)(ql_http_req_t *req, void *arg);

typedef struct ql_http_limits {
    size_t max_header_bytes;     /* request line + headers (+ trailers); 431. Default 16 KiB,
                                    at most 80 KiB (http-parser's own ceiling) */
    size_t max_headers;          /* header fields per request; 431. Default 100 */
    size_t max_body_bytes;       /* decoded body; 413. Default 1 MiB */
    uint64_t request_timeout_ms; /* first byte to last byte of one request; 408. Default 30 s */
    uint64_t idle_timeout_ms;    /* nothing in flight on a connection; closed. Default 60 s */
    uint64_t send_timeout_ms;    /* no write progress on a response; closed. Default 30 s */
    uint64_t linger_ms;          /* discard input after a final response. Default 2 s */
    size_t max_connections;      /* open connections; 503 and close. Default 1024 */
    size_t max_pipeline;         /* requests waiting per connection. Default 16 */
    size_t max_connections_per_address; /* open connections from one IPv4 address or IPv6 /64;
                                           503 and close. Default 64 */
    uint64_t first_request_timeout_ms;  /* accept to the end of the first request's headers;
                                           closed (408 when it had started). Default 10 s */
    size_t auth_reserve; /* slots of max_connections that only authenticated connections keep
                            (at most a quarter of it); see above. Default 64 */
} ql_http_limits_t;

/* Fills out with the defaults above. */
void ql_http_limits_default(ql_http_limits_t *out);

typedef struct ql_http_config {
    ql_http_limits_t limits;    /* zero fields take their default */
    ql_http_handler_cb handler; /* NULL answers every request 404 */
    void *handler_arg;          /* borrowed; must outlive every request handed to handler */
} ql_http_config_t;

/* ---- server ---------------------------------------------------------------------------- */

/* Creates a server on loop (borrowed; it must outlive the server). cfg is copied. On success
 * *out is owned by the caller: ql_http_server_close() it, then ql_http_server_free() it from
 * (or after) the close callback. Returns 0, QL_EINVAL for bad limits, UV_ENOMEM. */
int ql_http_server_new(uv_loop_t *loop, const ql_http_config_t *cfg, ql_http_server_t **out);

/* Binds and listens on hostport (borrowed): "127.0.0.1:7070", "[::1]:0", "0.0.0.0:80",
 * "localhost:7070"; port 0 picks an ephemeral port (read it with ql_http_server_port()).
 * Call once. Returns 0, QL_EINVAL for a malformed address, or a UV_E* bind/listen error. */
int ql_http_server_listen(ql_http_server_t *server, const char *hostport);

/* The bound port, after a successful listen. Returns 0 or UV_ENOTCONN. */
int ql_http_server_port(const ql_http_server_t *server, int *port);

/* True when the server listens on a loopback address (127.0.0.0/8, ::1). */
bool ql_http_server_is_loopback(const ql_http_server_t *server);

typedef void (*ql_http_close_cb)(ql_http_server_t *server, void *arg);

/* Stops accepting, closes every connection at once (pending responses are dropped; handlers
 * that still hold requests may respond later, which then only frees them) and calls close_cb
 * (may be NULL) on the loop thread once every handle of the server is closed. Idempotent. */
void ql_http_server_close(ql_http_server_t *server, ql_http_close_cb close_cb, void *arg);

/* Frees a server whose close callback has run (close it even when it never listened). */
void ql_http_server_free(ql_http_server_t *server);

/* Parses "HOST:PORT" (see ql_http_server_listen) into out. Returns 0 or QL_EINVAL. */
int ql_http_parse_hostport(const char *hostport, struct sockaddr_storage *out);

/* True for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. addr is borrowed. */
bool ql_http_addr_is_loopback(const struct sockaddr *addr);

/* ---- counters, for /metrics ---------------------------------------------------------- */

typedef struct ql_http_counters {
    uint64_t accepted;          /* connections accepted and served */
    uint64_t rejected;          /* connections refused with 503 (max_connections) */
    uint64_t rejected_address;  /* connections refused with 503 (max_connections_per_address) */
    uint64_t probation_closed;  /* reserve connections closed after an unauthenticated request */
    uint64_t evicted;           /* idle unauthenticated connections closed for a newcomer */
    uint64_t active;            /* connections open now */
    uint64_t requests;          /* responses produced, all statuses */
    uint64_t bad_requests;      /* 400, 408, 413, 417, 431 produced by the server itself */
    uint64_t timeouts_request;  /* 408 */
    uint64_t timeouts_idle;     /* closed while idle */
    uint64_t timeouts_first;    /* closed (or 408) by first_request_timeout_ms */
    uint64_t timeouts_send;     /* closed because the client did not read */
    uint64_t responses_dropped; /* responses given after the client was gone */
} ql_http_counters_t;

void ql_http_server_counters(const ql_http_server_t *server, ql_http_counters_t *out);

/* Calls cb for every (route, status) pair seen so far with its count. route is the route's
 * name, or "none" for requests that matched no route (404, 405, malformed, ...). The strings
 * are borrowed for the duration of the call. */
typedef void (*ql_http_stat_cb)(const char *route, int status, uint64_t count, void *arg);
void ql_http_server_foreach_stat(const ql_http_server_t *server, ql_http_stat_cb cb, void *arg);

/* The count of one (route, status) pair (route "none" as above), 0 when never seen. */
uint64_t ql_http_server_stat(const ql_http_server_t *server, const char *route, int status);

/* ---- requests --------------------------------------------------------------------------
 * Every string returned below is NUL-terminated and borrowed from req: valid until the handler
 * responds. None is ever NULL unless stated. */

const char *ql_http_req_method(const ql_http_req_t *req); /* "GET", "PUT", ... */
/* True for HTTP/1.1 and later (where a Host header is required), false for HTTP/1.0. */
bool ql_http_req_is_http11(const ql_http_req_t *req);
/* The path, percent-decoded ("+" stays "+"). Requests whose path has a bad escape or %00 get
 * 400 before any handler sees them. */
const char *ql_http_req_path(const ql_http_req_t *req);
/* The raw query string without "?", "" when absent. */
const char *ql_http_req_query_raw(const ql_http_req_t *req);
/* The decoded value of the first key=value with this (decoded) key; "" for "key" or "key=";
 * NULL when the key is absent. "+" decodes to a space. */
const char *ql_http_req_query(const ql_http_req_t *req, const char *key);
/* All values of key, across repeated keys and comma lists: "ids=a,b&ids=c" gives a, b, c.
 * Items are split at literal commas before decoding (so "%2C" stays inside an item) and empty
 * items are skipped. Stores up to cap pointers in out (may be NULL when cap is 0) and returns
 * the total number of items. */
size_t ql_http_req_query_values(const ql_http_req_t *req, const char *key, const char **out,
                                size_t cap);
/* The first header named name (ASCII case-insensitive), trimmed; NULL when absent. */
const char *ql_http_req_header(const ql_http_req_t *req, const char *name);
size_t ql_http_req_header_count(const ql_http_req_t *req);
/* The i-th header in arrival order. Returns 0 or QL_ENOTFOUND when i is out of range. */
int ql_http_req_header_at(const ql_http_req_t *req, size_t i, const char **name,
                          const char **value);
/* The decoded body (chunked bodies are joined) with a NUL after it; *len may be NULL. */
const char *ql_http_req_body(const ql_http_req_t *req, size_t *len);
/* The client's address as text ("127.0.0.1", "::1") and as a sockaddr; whether it is loopback. */
const char *ql_http_req_peer(const ql_http_req_t *req);
const struct sockaddr *ql_http_req_peer_addr(const ql_http_req_t *req);
bool ql_http_req_is_loopback(const ql_http_req_t *req);
/* The matched route's name and pattern (set by the router; NULL before/without it) and a path
 * parameter by name ("model" in ".../models/{model}/..."), percent-decoded, NULL when absent. */
const char *ql_http_req_route(const ql_http_req_t *req);
const char *ql_http_req_route_pattern(const ql_http_req_t *req);
const char *ql_http_req_param(const ql_http_req_t *req, const char *name);
/* The authenticated user and role (set by the router on QL_HTTP_ROUTE_AUTH routes; NULL and
 * QL_AUTH_ROLE_NONE otherwise). */
const char *ql_http_req_user(const ql_http_req_t *req);
ql_auth_role_t ql_http_req_role(const ql_http_req_t *req);
/* True once the connection is gone: a response would be dropped. */
bool ql_http_req_client_gone(const ql_http_req_t *req);
/* The loop the request came from (borrowed), for handlers that defer work. */
uv_loop_t *ql_http_req_loop(const ql_http_req_t *req);

/* Adds a response header (name and value are copied) to the response req will get. Content-Type,
 * Content-Length and Connection are set by ql_http_respond(). Returns 0, QL_EINVAL for a name or
 * value with CR, LF or NUL (header injection) or an empty name, UV_ENOMEM. */
int ql_http_add_header(ql_http_req_t *req, const char *name, const char *value);

/* Responds to req and consumes it: req must not be used afterwards, whatever this returns.
 * Call exactly once per request, on the loop thread, synchronously from the handler or later.
 * content_type may be NULL (no Content-Type); body (borrowed for the call; copied) may be NULL
 * when len is 0. HEAD requests get the headers only. Returns 0 when the response was queued,
 * UV_ECONNRESET when the client is gone (the response is dropped), UV_ENOMEM (the connection
 * is closed), QL_EINVAL for a status outside 200..599 (answered 500 instead:
 * interim 1xx answers are the server's business). */
int ql_http_respond(ql_http_req_t *req, int status, const char *content_type, const char *body,
                    size_t len);

/* Responds with the Kylin error envelope {"code":"999","data":null,"msg":MSG,"error_code":E},
 * E being ql_error_code(code) and MSG the formatted message (JSON-escaped). Consumes req like
 * ql_http_respond() and returns what it returns. */
int ql_http_respond_error(ql_http_req_t *req, int status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- router ---------------------------------------------------------------------------- */

enum {
    /* The route needs HTTP Basic credentials verified by the router's ql_auth_t: without them
     * the router answers 401 with WWW-Authenticate and never calls the handler. */
    QL_HTTP_ROUTE_AUTH = 1u << 0,
};

#define QL_HTTP_MAX_PARAMS 8

/* Creates an empty router; *out is owned by the caller (ql_http_router_free). */
int ql_http_router_new(ql_http_router_t **out);
/* Frees the router. It must outlive the servers that dispatch through it; requests already
 * dispatched keep copies of what they need and do not refer to the router. */
void ql_http_router_free(ql_http_router_t *router);

/* Uses auth (borrowed; must outlive the router's use) for QL_HTTP_ROUTE_AUTH routes. Without
 * an auth such routes answer 401 to everyone. */
void ql_http_router_set_auth(ql_http_router_t *router, ql_auth_t *auth);

/* Registers handler for method ("GET", ...) and pattern: a path of literal segments and
 * "{name}" segments, each of which matches one non-empty segment ("/kylin/api/models/{model}/
 * segments"). name labels the route in counters (NULL: the pattern). Strings are copied; arg
 * is borrowed and must outlive every request dispatched to handler. flags: QL_HTTP_ROUTE_*.
 * Returns 0, QL_EINVAL (malformed pattern, more than QL_HTTP_MAX_PARAMS parameters), QL_EEXIST
 * (same method and pattern), UV_ENOMEM. */
int ql_http_router_add(ql_http_router_t *router, const char *method, const char *pattern,
                       const char *name, unsigned flags, ql_http_handler_cb handler, void *arg);

typedef struct ql_http_match {
    const char *name;    /* borrowed from the router */
    const char *pattern; /* borrowed from the router */
    unsigned flags;
    ql_http_handler_cb handler;
    void *arg;
    size_t n_params;
    const char *param_names[QL_HTTP_MAX_PARAMS]; /* borrowed from the router */
    size_t param_off[QL_HTTP_MAX_PARAMS];        /* raw (still encoded) value: raw_path + off */
    size_t param_len[QL_HTTP_MAX_PARAMS];
    char allow[64]; /* on QL_ENOTFOUND: methods of routes whose path matched, "GET, PUT" */
} ql_http_match_t;

/* Looks up method and raw_path (still percent-encoded, no query; borrowed). A HEAD request
 * falls back to a GET route. Literal segments beat parameters, left to right; one trailing "/"
 * is ignored. Returns 0 and fills out, or QL_ENOTFOUND: no route for this path when
 * out->allow is "", else the path matched routes of other methods only (405, allow lists them).
 * Pure: no side effects. */
int ql_http_router_match(const ql_http_router_t *router, const char *method, const char *raw_path,
                         ql_http_match_t *out);

/* A ql_http_handler_cb that dispatches through the router given as arg: 404 or 405 (with
 * Allow) when nothing matches; auth for QL_HTTP_ROUTE_AUTH routes; then the route's handler
 * with ql_http_req_route()/ql_http_req_param() set. Install it as the server's handler. */
void ql_http_router_handle(ql_http_req_t *req, void *router);

#endif
