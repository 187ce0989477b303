/*
 * Internals shared by http/http.c (server, connections), http/http_req.c (request data and
 * response bytes) and http/router.c. Not a public header: nothing outside api/ includes it.
 */
#ifndef QL_HTTP_INT_H
#define QL_HTTP_INT_H

#include <http_parser.h>
#include <netinet/in.h>

#include "base/ql_buf.h"
#include "http/ql_addr_key.h"
#include "http/ql_http.h"

/* A growable byte buffer (base's, first capacity QL_STRBUF_FIRST_CAP); p is malloc'ed and owned
 * by the buffer and always NUL-terminated once anything was appended. */
typedef ql_strbuf_t ql_http_buf_t;

/* Appends n bytes of data (borrowed). Returns 0 or UV_ENOMEM with the buffer unchanged. */
static inline int ql_http_buf_append(ql_http_buf_t *b, const void *data, size_t n) {
    return ql_strbuf_append(b, data, n);
}
/* Appends a printf-formatted string (no NUL is counted in len). Returns 0 or UV_ENOMEM. */
int ql_http_buf_printf(ql_http_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void ql_http_buf_free(ql_http_buf_t *b) {
    ql_strbuf_free(b);
}

typedef struct ql_http_conn ql_http_conn_t;

/* ---- open connections per client address (http/http_peers.c) ---- */

#define QL_HTTP_PEER_KEY QL_ADDR_KEY_LEN

typedef struct ql_http_peer {
    unsigned char key[QL_HTTP_PEER_KEY];
    uint32_t n; /* open connections; 0 marks an empty slot */
} ql_http_peer_t;

typedef struct ql_http_peers {
    ql_http_peer_t *slots; /* owned; cap is a power of two, or 0 before the first add */
    size_t cap;
    size_t used;
    unsigned char hash_key[16];
} ql_http_peers_t;

/* The key connections are counted under: the address key of http/ql_addr_key.h (an IPv4
 * address as ::ffff:a.b.c.d, the /64 of an IPv6 address), the same key authentication counts
 * failures under. sa is borrowed; NULL or another family gives the all-zero key. */
static inline void ql_http_peer_key(const struct sockaddr *sa,
                                    unsigned char out[QL_HTTP_PEER_KEY]) {
    ql_addr_key(sa, out);
}
/* Makes an empty table. Returns 0 or UV_EIO (libsodium cannot initialise). */
int ql_http_peers_init(ql_http_peers_t *t);
void ql_http_peers_free(ql_http_peers_t *t);
/* Open connections counted under key. */
size_t ql_http_peers_count(const ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]);
/* Counts one more connection under key. Returns 0 or UV_ENOMEM. */
int ql_http_peers_add(ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]);
/* Counts one connection less (it must have been added). */
void ql_http_peers_remove(ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]);

enum ql_http_req_state {
    QL_HTTP_REQ_PARSING,   /* bytes still arriving */
    QL_HTTP_REQ_HANDLING,  /* owned by the handler (or the server building an error) */
    QL_HTTP_REQ_RESPONDED, /* response bytes ready, waiting for the earlier responses */
};

/* ---- the server and its connections (http/http.c, http/http_server.c) ---- */

enum { QL_HTTP_T_NONE, QL_HTTP_T_IDLE, QL_HTTP_T_READ, QL_HTTP_T_SEND, QL_HTTP_T_LINGER };

#define QL_HTTP_RBUF_SIZE 16384

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
    char rbuf[QL_HTTP_RBUF_SIZE];
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

/* Closes c at once (http/http.c): pending responses are dropped, requests held by handlers stay
 * valid. Idempotent. */
void ql_http_conn_close(ql_http_conn_t *c);
/* Starts reading a freshly accepted connection and arms its timer (http/http.c). */
void ql_http_conn_start(ql_http_conn_t *c);
/* Takes c off the server's unauthenticated list, if it is on it (http/http_server.c). */
void ql_http_conn_anon_remove(ql_http_conn_t *c);
/* Calls the server's close callback once closing has finished (http/http_server.c). */
void ql_http_server_maybe_closed(ql_http_server_t *s);
/* Counts one response of route (NULL: "none") with status (http/http_server.c); s may be NULL. */
void ql_http_count_response(ql_http_server_t *s, const char *route, int status);

typedef struct ql_http_hdr {
    size_t name;  /* offset into head */
    size_t value; /* offset into head */
} ql_http_hdr_t;

typedef struct ql_http_qparam {
    const char *key;
    const char *value;
    size_t first_item;
    size_t n_items;
} ql_http_qparam_t;

typedef struct ql_http_param {
    const char *name;
    const char *value;
} ql_http_param_t;

struct ql_http_req {
    ql_http_conn_t *conn; /* referenced: conn->refs counts this request */
    ql_http_req_t *next;  /* the connection's FIFO */
    int state;
    uv_loop_t *loop;

    /* Raw request: url, then NUL-terminated name and value strings. Only appended to until the
     * headers are complete (trailers are not kept), so offsets and pointers stay valid. */
    ql_http_buf_t head;
    size_t url_len;
    ql_http_hdr_t *hdrs;
    size_t n_hdrs;
    size_t cap_hdrs;
    int last_cb; /* 0 url, 1 field, 2 value */
    size_t header_bytes;
    bool headers_done;
    ql_http_buf_t body;
    const char *method;
    unsigned char http_major;
    unsigned char http_minor;
    bool is_head;
    bool keep_alive;
    bool expect_continue;
    bool continue_sent;

    /* Decoded once the request is complete; all in one allocation. */
    char *strings;
    const char *raw_path;
    const char *path;
    const char *query_raw;
    ql_http_qparam_t *query;
    size_t n_query;
    const char **items;

    /* Set by the router, in one allocation. */
    char *route_strings;
    const char *route_name;
    const char *route_pattern;
    ql_http_param_t params[QL_HTTP_MAX_PARAMS];
    size_t n_params;
    ql_http_handler_cb route_handler;
    void *route_arg;
    char *user;
    ql_auth_role_t role;

    /* Response. */
    ql_http_buf_t resp_hdrs;
    ql_http_buf_t resp;
    int status;
    bool close_after; /* the connection closes after this response */

    struct sockaddr_storage peer;
    char peer_str[INET6_ADDRSTRLEN];
    bool loopback;
};

/* Allocates a request for a connection (copying its peer); the caller links it and takes the
 * connection reference. Returns NULL when out of memory. */
ql_http_req_t *ql_http_req_alloc(uv_loop_t *loop, const struct sockaddr_storage *peer,
                                 const char *peer_str, bool loopback);
/* Frees req's memory (not its connection reference). */
void ql_http_req_release(ql_http_req_t *req);
/* Splits the url into path and query and decodes them. Returns 0, QL_EINVAL (400), UV_ENOMEM. */
int ql_http_req_finalize(ql_http_req_t *req);
/* Writes status line, headers and body into req->resp. Returns 0 or UV_ENOMEM. */
int ql_http_req_build(ql_http_req_t *req, int status, const char *content_type, const char *body,
                      size_t len);
/* Percent-decodes s[0..n) into out (room for n bytes); '+' becomes ' ' when plus. Returns 0 and
 * the length in *out_len, or QL_EINVAL for a bad escape or an encoded NUL. */
int ql_http_pct_decode(const char *s, size_t n, bool plus, char *out, size_t *out_len);
/* The reason phrase of status ("Not Found"), "Unknown" for others (static). */
const char *ql_http_status_reason(int status);

#endif
