/*
 * A small router: (method, pattern with {name} segments) -> handler, plus the Basic-auth step
 * for routes that need it. Matching is a pure function over the registered routes; dispatch
 * runs on the loop thread like every handler.
 */
#include "base/ql_buf.h"
#include "http_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SEGMENTS 32

typedef struct route_seg {
    char *text; /* literal text or parameter name */
    bool param;
} route_seg_t;

typedef struct route {
    char *method;
    char *pattern;
    char *name;
    unsigned flags;
    ql_http_handler_cb handler;
    void *arg;
    size_t n_segs;
    route_seg_t segs[MAX_SEGMENTS];
} route_t;

struct ql_http_router {
    route_t *routes;
    size_t n_routes;
    size_t cap_routes;
    ql_auth_t *auth;
};

int ql_http_router_new(ql_http_router_t **out) {
    *out = calloc(1, sizeof **out);
    return *out ? 0 : UV_ENOMEM;
}

static void route_free(route_t *r) {
    free(r->method);
    free(r->pattern);
    free(r->name);
    for (size_t i = 0; i < r->n_segs; i++)
        free(r->segs[i].text);
}

void ql_http_router_free(ql_http_router_t *router) {
    if (!router)
        return;
    for (size_t i = 0; i < router->n_routes; i++)
        route_free(&router->routes[i]);
    free(router->routes);
    free(router);
}

void ql_http_router_set_auth(ql_http_router_t *router, ql_auth_t *auth) {
    router->auth = auth;
}

static bool param_name_ok(const char *s, size_t n) {
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

static int parse_pattern(route_t *r, const char *pattern) {
    if (pattern[0] != '/')
        return QL_EINVAL;
    size_t n_params = 0;
    const char *p = pattern + 1;
    size_t total = strlen(pattern);
    if (total > 1 && pattern[total - 1] == '/')
        total--; /* one trailing "/" is ignored, as when matching */
    const char *end = pattern + total;
    while (p < end) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        if (!slash)
            slash = end;
        size_t n = (size_t)(slash - p);
        if (n == 0 || r->n_segs == MAX_SEGMENTS)
            return QL_EINVAL;
        route_seg_t *seg = &r->segs[r->n_segs];
        if (p[0] == '{') {
            if (n < 3 || p[n - 1] != '}' || !param_name_ok(p + 1, n - 2) ||
                n_params == QL_HTTP_MAX_PARAMS)
                return QL_EINVAL;
            seg->param = true;
            seg->text = strndup(p + 1, n - 2);
            n_params++;
        } else {
            if (memchr(p, '{', n) || memchr(p, '}', n) || memchr(p, '%', n))
                return QL_EINVAL;
            seg->text = strndup(p, n);
        }
        if (!seg->text)
            return UV_ENOMEM;
        r->n_segs++;
        p = slash + 1;
    }
    return 0;
}

int ql_http_router_add(ql_http_router_t *router, const char *method, const char *pattern,
                       const char *name, unsigned flags, ql_http_handler_cb handler, void *arg) {
    if (!method || !*method || !pattern || !handler)
        return QL_EINVAL;
    for (size_t i = 0; i < router->n_routes; i++)
        if (strcmp(router->routes[i].method, method) == 0 &&
            strcmp(router->routes[i].pattern, pattern) == 0)
            return QL_EEXIST;
    if (QL_ARRAY_RESERVE(router->routes, router->cap_routes, router->n_routes + 1, 16))
        return UV_ENOMEM;
    route_t r = {0};
    int rc = parse_pattern(&r, pattern);
    if (!rc) {
        r.method = strdup(method);
        r.pattern = strdup(pattern);
        r.name = strdup(name ? name : pattern);
        if (!r.method || !r.pattern || !r.name)
            rc = UV_ENOMEM;
    }
    if (rc) {
        route_free(&r);
        return rc;
    }
    r.flags = flags;
    r.handler = handler;
    r.arg = arg;
    router->routes[router->n_routes++] = r;
    return 0;
}

/* Compares a raw (percent-encoded) path segment with a literal, decoding on the fly. */
static bool seg_equals(const char *raw, size_t n, const char *lit) {
    char buf[256];
    size_t len;
    if (n >= sizeof buf || ql_http_pct_decode(raw, n, false, buf, &len) != 0)
        return false;
    return strlen(lit) == len && memcmp(buf, lit, len) == 0;
}

static void allow_add(char *allow, size_t cap, const char *method) {
    size_t mlen = strlen(method);
    /* Already listed? */
    for (const char *p = allow; (p = strstr(p, method)) != NULL; p += mlen)
        if ((p == allow || p[-1] == ' ') && (p[mlen] == ',' || p[mlen] == '\0'))
            return;
    size_t len = strlen(allow);
    size_t need = len + (len ? 2 : 0) + mlen + 1;
    if (need > cap)
        return;
    if (len) {
        memcpy(allow + len, ", ", 2);
        len += 2;
    }
    memcpy(allow + len, method, mlen + 1);
}

int ql_http_router_match(const ql_http_router_t *router, const char *method, const char *raw_path,
                         ql_http_match_t *out) {
    memset(out, 0, sizeof *out);
    if (!raw_path || raw_path[0] != '/')
        return QL_ENOTFOUND;
    size_t off[MAX_SEGMENTS], len[MAX_SEGMENTS], n_segs = 0;
    size_t total = strlen(raw_path);
    if (total > 1 && raw_path[total - 1] == '/')
        total--;
    for (size_t i = 1; i < total;) {
        const char *slash = memchr(raw_path + i, '/', total - i);
        size_t j = slash ? (size_t)(slash - raw_path) : total;
        if (j == i || n_segs == MAX_SEGMENTS)
            return QL_ENOTFOUND; /* an empty segment or a path deeper than any route */
        off[n_segs] = i;
        len[n_segs] = j - i;
        n_segs++;
        i = j + 1;
    }
    const route_t *best = NULL;
    uint64_t best_score = 0;
    bool is_head = strcmp(method, "HEAD") == 0;
    for (size_t k = 0; k < router->n_routes; k++) {
        const route_t *r = &router->routes[k];
        if (r->n_segs != n_segs)
            continue;
        uint64_t score = 0;
        size_t s;
        for (s = 0; s < n_segs; s++) {
            score <<= 1;
            if (r->segs[s].param)
                continue;
            if (!seg_equals(raw_path + off[s], len[s], r->segs[s].text))
                break;
            score |= 1;
        }
        if (s < n_segs)
            continue;
        /* The exact method beats HEAD's fallback to GET at the same specificity. */
        score <<= 1;
        if (strcmp(r->method, method) == 0)
            score |= 1;
        else if (!(is_head && strcmp(r->method, "GET") == 0)) {
            allow_add(out->allow, sizeof out->allow, r->method);
            continue;
        }
        if (!best || score > best_score) {
            best = r;
            best_score = score;
        }
    }
    if (!best)
        return QL_ENOTFOUND;
    out->allow[0] = '\0';
    out->name = best->name;
    out->pattern = best->pattern;
    out->flags = best->flags;
    out->handler = best->handler;
    out->arg = best->arg;
    for (size_t s = 0; s < n_segs; s++) {
        if (!best->segs[s].param)
            continue;
        out->param_names[out->n_params] = best->segs[s].text;
        out->param_off[out->n_params] = off[s];
        out->param_len[out->n_params] = len[s];
        out->n_params++;
    }
    return 0;
}

/* Copies the route's labels and decoded parameters into req, which must not depend on the
 * router once dispatched. */
static int req_set_route(ql_http_req_t *req, const ql_http_match_t *m) {
    size_t size = strlen(m->name) + strlen(m->pattern) + 2;
    for (size_t i = 0; i < m->n_params; i++)
        size += strlen(m->param_names[i]) + m->param_len[i] + 2;
    char *a = malloc(size);
    if (!a)
        return UV_ENOMEM;
    req->route_strings = a;
    size_t pos = 0;
    size_t n = strlen(m->name) + 1;
    memcpy(a, m->name, n);
    req->route_name = a;
    pos += n;
    n = strlen(m->pattern) + 1;
    memcpy(a + pos, m->pattern, n);
    req->route_pattern = a + pos;
    pos += n;
    for (size_t i = 0; i < m->n_params; i++) {
        n = strlen(m->param_names[i]) + 1;
        memcpy(a + pos, m->param_names[i], n);
        req->params[i].name = a + pos;
        pos += n;
        size_t len;
        int rc = ql_http_pct_decode(req->raw_path + m->param_off[i], m->param_len[i], false,
                                    a + pos, &len);
        if (rc)
            return rc;
        req->params[i].value = a + pos;
        pos += len + 1;
    }
    req->n_params = m->n_params;
    req->route_handler = m->handler;
    req->route_arg = m->arg;
    return 0;
}

static void respond_401(ql_http_req_t *req, bool rate_limited) {
    ql_http_add_header(req, "WWW-Authenticate", "Basic realm=\"Kylin\", charset=\"UTF-8\"");
    if (rate_limited)
        ql_http_respond_error(req, 401, QL_EAUTH,
                              "too many failed logins for this user from %s: try again later",
                              ql_http_req_peer(req));
    else
        ql_http_respond_error(req, 401, QL_EAUTH,
                              "authentication required: HTTP Basic credentials of a user "
                              "configured in the server");
}

static void on_auth(int status, const ql_auth_result_t *res, void *arg) {
    ql_http_req_t *req = arg;
    if (status == 0) {
        req->user = strdup(res->user);
        if (!req->user) {
            ql_http_respond_error(req, 500, UV_ENOMEM, "out of memory");
            return;
        }
        req->role = res->role;
        req->route_handler(req, req->route_arg);
    } else if (status == QL_EAUTH) {
        respond_401(req, res && res->rate_limited);
    } else {
        ql_http_add_header(req, "Retry-After", "1");
        ql_http_respond_error(req, 503, status, "authentication unavailable: %s",
                              ql_strerror(status));
    }
}

void ql_http_router_handle(ql_http_req_t *req, void *arg) {
    ql_http_router_t *router = arg;
    ql_http_match_t m;
    if (ql_http_router_match(router, req->method, req->raw_path, &m) != 0) {
        if (m.allow[0]) {
            ql_http_add_header(req, "Allow", m.allow);
            ql_http_respond_error(req, 405, QL_EINVAL,
                                  "method %s is not allowed on %s (allowed: %s)", req->method,
                                  req->path, m.allow);
        } else {
            ql_http_respond_error(req, 404, QL_ENOTFOUND, "no API at %s %s", req->method,
                                  req->path);
        }
        return;
    }
    int rc = req_set_route(req, &m);
    if (rc == QL_EINVAL) {
        ql_http_respond_error(req, 400, QL_EINVAL, "malformed path parameter");
        return;
    }
    if (rc) {
        ql_http_respond_error(req, 500, rc, "out of memory");
        return;
    }
    if (!(m.flags & QL_HTTP_ROUTE_AUTH)) {
        m.handler(req, m.arg);
        return;
    }
    if (!router->auth) {
        respond_401(req, false);
        return;
    }
    rc = ql_auth_check(router->auth, ql_http_req_header(req, "Authorization"),
                       ql_http_req_peer_addr(req), on_auth, req);
    if (rc) {
        ql_http_add_header(req, "Retry-After", "1");
        ql_http_respond_error(req, 503, rc, "authentication unavailable: %s", ql_strerror(rc));
    }
}
