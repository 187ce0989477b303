/*
 * Request data (URL decoding, query parameters, headers) and response bytes for http/http.c.
 * Everything here runs on the loop thread and touches one request only.
 */
#include "base/ql_hex.h"
#include "http_int.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int ql_http_buf_printf(ql_http_buf_t *b, const char *fmt, ...) {
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return UV_EINVAL;
    if ((size_t)n < sizeof small)
        return ql_http_buf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return UV_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = ql_http_buf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

ql_http_req_t *ql_http_req_alloc(uv_loop_t *loop, const struct sockaddr_storage *peer,
                                 const char *peer_str, bool loopback) {
    ql_http_req_t *req = calloc(1, sizeof *req);
    if (!req)
        return NULL;
    req->loop = loop;
    req->peer = *peer;
    snprintf(req->peer_str, sizeof req->peer_str, "%s", peer_str);
    req->loopback = loopback;
    req->method = "";
    req->path = "";
    req->raw_path = "";
    req->query_raw = "";
    return req;
}

void ql_http_req_release(ql_http_req_t *req) {
    if (!req)
        return;
    ql_http_buf_free(&req->head);
    ql_http_buf_free(&req->body);
    ql_http_buf_free(&req->resp_hdrs);
    ql_http_buf_free(&req->resp);
    free(req->hdrs);
    free(req->strings);
    free(req->query);
    free(req->items);
    free(req->route_strings);
    free(req->user);
    free(req);
}

int ql_http_pct_decode(const char *s, size_t n, bool plus, char *out, size_t *out_len) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return QL_EINVAL;
            int hi = ql_hex_digit((unsigned char)s[i + 1]);
            int lo = ql_hex_digit((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0)
                return QL_EINVAL;
            c = (unsigned char)(hi * 16 + lo);
            /* An encoded NUL would silently truncate every C string made from this value. */
            if (c == 0)
                return QL_EINVAL;
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        } else if (c == 0) {
            return QL_EINVAL;
        }
        out[o++] = (char)c;
    }
    out[o] = '\0';
    *out_len = o;
    return 0;
}

/* Decodes s[0..n) into the arena at *pos (room checked by the caller's sizing). */
static int decode_into(const char *s, size_t n, bool plus, char *arena, size_t *pos,
                       const char **out) {
    size_t len;
    int rc = ql_http_pct_decode(s, n, plus, arena + *pos, &len);
    if (rc)
        return rc;
    *out = arena + *pos;
    *pos += len + 1;
    return 0;
}

static int parse_query(ql_http_req_t *req, const char *q, size_t qlen, char *arena, size_t *pos) {
    size_t pairs = 1, commas = 0;
    for (size_t i = 0; i < qlen; i++) {
        if (q[i] == '&')
            pairs++;
        else if (q[i] == ',')
            commas++;
    }
    req->query = calloc(pairs, sizeof *req->query);
    req->items = calloc(pairs + commas, sizeof *req->items);
    if (!req->query || !req->items)
        return UV_ENOMEM;
    size_t n_items = 0;
    const char *end = q + qlen;
    for (const char *p = q; p <= end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        if (!amp)
            amp = end;
        if (amp > p) {
            const char *eq = memchr(p, '=', (size_t)(amp - p));
            const char *kend = eq ? eq : amp;
            const char *v = eq ? eq + 1 : amp;
            ql_http_qparam_t *qp = &req->query[req->n_query];
            int rc = decode_into(p, (size_t)(kend - p), true, arena, pos, &qp->key);
            if (!rc)
                rc = decode_into(v, (size_t)(amp - v), true, arena, pos, &qp->value);
            if (rc)
                return rc;
            /* Items split at literal commas before decoding, so "%2C" stays in one item. */
            qp->first_item = n_items;
            for (const char *s = v; s <= amp;) {
                const char *comma = memchr(s, ',', (size_t)(amp - s));
                if (!comma)
                    comma = amp;
                if (comma > s) {
                    rc =
                        decode_into(s, (size_t)(comma - s), true, arena, pos, &req->items[n_items]);
                    if (rc)
                        return rc;
                    n_items++;
                }
                s = comma + 1;
            }
            qp->n_items = n_items - qp->first_item;
            req->n_query++;
        }
        p = amp + 1;
    }
    return 0;
}

int ql_http_req_finalize(ql_http_req_t *req) {
    const char *url = req->head.p ? req->head.p : "";
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (req->url_len == 0 || http_parser_parse_url(url, req->url_len, 0, &u) != 0)
        return QL_EINVAL;
    const char *path = "/";
    size_t plen = 1;
    if (u.field_set & (1 << UF_PATH)) {
        path = url + u.field_data[UF_PATH].off;
        plen = u.field_data[UF_PATH].len;
    }
    const char *q = "";
    size_t qlen = 0;
    if (u.field_set & (1 << UF_QUERY)) {
        q = url + u.field_data[UF_QUERY].off;
        qlen = u.field_data[UF_QUERY].len;
    }
    if (path[0] != '/')
        return QL_EINVAL;
    /* raw path + decoded path + raw query + (key, value and items: each at most the query's
     * length, plus one NUL per string, at most one string per byte plus one). */
    size_t size = 2 * (plen + 1) + (qlen + 1) + 3 * (2 * qlen + 2);
    req->strings = malloc(size);
    if (!req->strings)
        return UV_ENOMEM;
    char *a = req->strings;
    size_t pos = 0;
    memcpy(a, path, plen);
    a[plen] = '\0';
    req->raw_path = a;
    pos = plen + 1;
    int rc = decode_into(path, plen, false, a, &pos, &req->path);
    if (rc)
        return rc;
    memcpy(a + pos, q, qlen);
    a[pos + qlen] = '\0';
    req->query_raw = a + pos;
    pos += qlen + 1;
    return parse_query(req, q, qlen, a, &pos);
}

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {304, "Not Modified"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {411, "Length Required"},
    {413, "Payload Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {422, "Unprocessable Entity"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {503, "Service Unavailable"},
};

const char *ql_http_status_reason(int status) {
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == status)
            return reasons[i].reason;
    return "Unknown";
}

int ql_http_req_build(ql_http_req_t *req, int status, const char *content_type, const char *body,
                      size_t len) {
    ql_http_buf_t *b = &req->resp;
    b->len = 0;
    bool no_body = status == 204 || status == 304 || status < 200;
    int rc = ql_http_buf_printf(b, "HTTP/1.1 %d %s\r\n", status, ql_http_status_reason(status));
    if (!rc && content_type)
        rc = ql_http_buf_printf(b, "Content-Type: %s\r\n", content_type);
    if (!rc && !no_body)
        rc = ql_http_buf_printf(b, "Content-Length: %zu\r\n", len);
    if (!rc && req->close_after)
        rc = ql_http_buf_printf(b, "Connection: close\r\n");
    else if (!rc && req->http_major == 1 && req->http_minor == 0)
        rc = ql_http_buf_printf(b, "Connection: keep-alive\r\n");
    if (!rc && req->resp_hdrs.len)
        rc = ql_http_buf_append(b, req->resp_hdrs.p, req->resp_hdrs.len);
    if (!rc)
        rc = ql_http_buf_append(b, "\r\n", 2);
    if (!rc && !no_body && !req->is_head && len)
        rc = ql_http_buf_append(b, body, len);
    req->status = status;
    return rc;
}

/* ---- accessors ---- */

const char *ql_http_req_method(const ql_http_req_t *req) {
    return req->method;
}

const char *ql_http_req_path(const ql_http_req_t *req) {
    return req->path;
}

const char *ql_http_req_query_raw(const ql_http_req_t *req) {
    return req->query_raw;
}

const char *ql_http_req_query(const ql_http_req_t *req, const char *key) {
    for (size_t i = 0; i < req->n_query; i++)
        if (strcmp(req->query[i].key, key) == 0)
            return req->query[i].value;
    return NULL;
}

size_t ql_http_req_query_values(const ql_http_req_t *req, const char *key, const char **out,
                                size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < req->n_query; i++) {
        const ql_http_qparam_t *qp = &req->query[i];
        if (strcmp(qp->key, key) != 0)
            continue;
        for (size_t j = 0; j < qp->n_items; j++, n++)
            if (n < cap)
                out[n] = req->items[qp->first_item + j];
    }
    return n;
}

const char *ql_http_req_header(const ql_http_req_t *req, const char *name) {
    if (!req->headers_done)
        return NULL;
    for (size_t i = 0; i < req->n_hdrs; i++)
        if (strcasecmp(req->head.p + req->hdrs[i].name, name) == 0)
            return req->head.p + req->hdrs[i].value;
    return NULL;
}

size_t ql_http_req_header_count(const ql_http_req_t *req) {
    return req->headers_done ? req->n_hdrs : 0;
}

int ql_http_req_header_at(const ql_http_req_t *req, size_t i, const char **name,
                          const char **value) {
    if (!req->headers_done || i >= req->n_hdrs)
        return QL_ENOTFOUND;
    *name = req->head.p + req->hdrs[i].name;
    *value = req->head.p + req->hdrs[i].value;
    return 0;
}

const char *ql_http_req_body(const ql_http_req_t *req, size_t *len) {
    if (len)
        *len = req->body.len;
    return req->body.p ? req->body.p : "";
}

const char *ql_http_req_peer(const ql_http_req_t *req) {
    return req->peer_str;
}

const struct sockaddr *ql_http_req_peer_addr(const ql_http_req_t *req) {
    return (const struct sockaddr *)&req->peer;
}

bool ql_http_req_is_http11(const ql_http_req_t *req) {
    return req->http_major > 1 || (req->http_major == 1 && req->http_minor >= 1);
}

bool ql_http_req_is_loopback(const ql_http_req_t *req) {
    return req->loopback;
}

const char *ql_http_req_route(const ql_http_req_t *req) {
    return req->route_name;
}

const char *ql_http_req_route_pattern(const ql_http_req_t *req) {
    return req->route_pattern;
}

const char *ql_http_req_param(const ql_http_req_t *req, const char *name) {
    for (size_t i = 0; i < req->n_params; i++)
        if (strcmp(req->params[i].name, name) == 0)
            return req->params[i].value;
    return NULL;
}

const char *ql_http_req_user(const ql_http_req_t *req) {
    return req->user;
}

ql_auth_role_t ql_http_req_role(const ql_http_req_t *req) {
    return req->role;
}

uv_loop_t *ql_http_req_loop(const ql_http_req_t *req) {
    return req->loop;
}

static bool header_text_ok(const char *s, bool is_name) {
    if (is_name && !*s)
        return false;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\r' || c == '\n')
            return false;
        if (is_name && (c <= ' ' || c == ':' || c >= 0x7f))
            return false;
    }
    return true;
}

int ql_http_add_header(ql_http_req_t *req, const char *name, const char *value) {
    if (!header_text_ok(name, true) || !header_text_ok(value, false))
        return QL_EINVAL;
    return ql_http_buf_printf(&req->resp_hdrs, "%s: %s\r\n", name, value);
}

/* JSON string escaping for the error envelope: quotes, backslashes and control characters. */
static int json_escape(ql_http_buf_t *b, const char *s) {
    int rc = 0;
    for (; *s && !rc; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            rc = ql_http_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            rc = ql_http_buf_printf(b, "\\u%04x", c);
        else
            rc = ql_http_buf_append(b, s, 1);
    }
    return rc;
}

int ql_http_respond_error(ql_http_req_t *req, int status, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ql_http_buf_t b = {0};
    int rc = ql_http_buf_printf(&b, "{\"code\":\"999\",\"data\":null,\"msg\":\"");
    if (!rc)
        rc = json_escape(&b, msg);
    if (!rc)
        rc = ql_http_buf_printf(&b, "\",\"error_code\":\"%s\"}", ql_error_code(code));
    if (rc) {
        ql_http_buf_free(&b);
        return ql_http_respond(req, 500, NULL, NULL, 0);
    }
    rc = ql_http_respond(req, status, "application/json;charset=utf-8", b.p, b.len);
    ql_http_buf_free(&b);
    return rc;
}
