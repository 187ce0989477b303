/*
 * Internals shared by api/http.c (server, connections), api/http_req.c (request data and
 * response bytes) and api/router.c. Not a public header: nothing outside api/ includes it.
 */
#ifndef QL_HTTP_INT_H
#define QL_HTTP_INT_H

#include <http_parser.h>
#include <netinet/in.h>

#include "api/ql_http.h"

/* A growable byte buffer; p is malloc'ed and owned by the buffer. */
typedef struct ql_http_buf {
    char *p;
    size_t len;
    size_t cap;
} ql_http_buf_t;

/* Appends n bytes of data (borrowed). Returns 0 or UV_ENOMEM. */
int ql_http_buf_append(ql_http_buf_t *b, const void *data, size_t n);
/* Appends a printf-formatted string (no NUL is counted in len). Returns 0 or UV_ENOMEM. */
int ql_http_buf_printf(ql_http_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ql_http_buf_free(ql_http_buf_t *b);

typedef struct ql_http_conn ql_http_conn_t;

/* ---- open connections per client address (api/http_peers.c) ---- */

#define QL_HTTP_PEER_KEY 16

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

/* The key connections are counted under: an IPv4 address (as ::ffff:a.b.c.d), the /64 of an
 * IPv6 address. sa is borrowed; NULL or another family gives the all-zero key. */
void ql_http_peer_key(const struct sockaddr *sa, unsigned char out[QL_HTTP_PEER_KEY]);
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
