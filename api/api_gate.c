/*
 * The gate in front of the router: what every request must pass before a route, credentials
 * or a handler see it. It keeps a browser on the server's host from reaching the API on a web
 * page's behalf:
 *
 *   - DNS rebinding: a page from evil.example whose name is made to resolve to 127.0.0.1 talks
 *     to the server as a same-origin page, but its requests say `Host: evil.example`. Only the
 *     listen address, the loopback names when listening on loopback, IP literals when listening
 *     on every address, and qilin.server.allowed-hosts pass (421 otherwise).
 *   - Cross-site writes: a form on any page can POST text/plain, form-urlencoded or multipart
 *     bodies without a CORS preflight. A write (POST, PUT, PATCH, DELETE) with a body, or with
 *     any Content-Type, must say JSON (or YAML, which ad-hoc jobs take; no browser sends either
 *     cross-site without a preflight this server never grants): 415 otherwise. A write whose
 *     Origin header is not the Host it was sent to is refused too (403): browsers send Origin
 *     on every cross-origin write, command-line clients never do.
 *
 * The decisions are pure functions over their inputs (tested as tables); the handler applies
 * them in that order and answers with a JSON error naming the header and the fix.
 */
#include "api_int.h"
#include "http/ql_http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Splits a Host header value ("name", "name:port", "[v6]", "[v6]:port") into its host part
 * (brackets removed) in out. False when it is malformed: empty, a bad port, junk around the
 * brackets, or characters a host name never has. */
static bool host_part(const char *value, char *out, size_t cap) {
    if (!value)
        return false;
    const char *end;
    const char *h = value;
    size_t n;
    if (value[0] == '[') {
        const char *close = strchr(value, ']');
        if (!close)
            return false;
        h = value + 1;
        n = (size_t)(close - h);
        end = close + 1;
    } else {
        const char *colon = strchr(value, ':');
        n = colon ? (size_t)(colon - value) : strlen(value);
        end = value + n;
    }
    if (*end == ':') {
        end++;
        if (!*end || strlen(end) > 5)
            return false;
        for (const char *p = end; *p; p++)
            if (!isdigit((unsigned char)*p))
                return false;
    } else if (*end) {
        return false;
    }
    if (n == 0 || n >= cap)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)h[i];
        if (!isalnum(c) && !strchr(".-_:%", c))
            return false;
    }
    memcpy(out, h, n);
    out[n] = '\0';
    return true;
}

/* 4 for an IPv4 literal, 6 for IPv6, 0 for a name; the address in buf (16 bytes). */
static int ip_literal(const char *host, unsigned char buf[16]) {
    if (inet_pton(AF_INET, host, buf) == 1)
        return 4;
    if (inet_pton(AF_INET6, host, buf) == 1)
        return 6;
    return 0;
}

static bool same_host(const char *a, const char *b) {
    unsigned char x[16], y[16];
    int ka = ip_literal(a, x), kb = ip_literal(b, y);
    if (ka || kb)
        return ka == kb && memcmp(x, y, ka == 4 ? 4 : 16) == 0;
    return strcasecmp(a, b) == 0;
}

static int add_name(ql_api_hosts_t *h, const char *name) {
    char **names = realloc(h->names, (h->n + 1) * sizeof *names);
    if (!names)
        return UV_ENOMEM;
    h->names = names;
    if (!(names[h->n] = strdup(name)))
        return UV_ENOMEM;
    h->n++;
    return 0;
}

int ql_api_hosts_init(ql_api_hosts_t *h, const char *listen_host, const char *const *extra,
                      size_t n_extra) {
    memset(h, 0, sizeof *h);
    unsigned char a[16];
    int kind = ip_literal(listen_host, a);
    static const unsigned char any[16] = {0};
    bool wildcard = kind && memcmp(a, any, kind == 4 ? 4 : 16) == 0;
    bool loopback = strcasecmp(listen_host, "localhost") == 0 || (kind == 4 && a[0] == 127) ||
                    (kind == 6 && IN6_IS_ADDR_LOOPBACK((struct in6_addr *)a));
    int rc = wildcard ? 0 : add_name(h, listen_host);
    h->any_ip = wildcard;
    if (!rc && (loopback || wildcard)) {
        static const char *const local[] = {"localhost", "127.0.0.1", "::1"};
        for (size_t i = 0; i < 3 && !rc; i++)
            rc = add_name(h, local[i]);
    }
    for (size_t i = 0; i < n_extra && !rc; i++)
        rc = add_name(h, extra[i]);
    if (rc)
        ql_api_hosts_free(h);
    return rc;
}

void ql_api_hosts_free(ql_api_hosts_t *h) {
    for (size_t i = 0; i < h->n; i++)
        free(h->names[i]);
    free(h->names);
    memset(h, 0, sizeof *h);
}

bool ql_api_host_allowed(const ql_api_hosts_t *h, const char *host_header) {
    char host[256];
    if (!host_part(host_header, host, sizeof host))
        return false;
    unsigned char a[16];
    if (h->any_ip && ip_literal(host, a))
        return true;
    for (size_t i = 0; i < h->n; i++)
        if (same_host(h->names[i], host))
            return true;
    return false;
}

bool ql_api_write_type_ok(const char *content_type) {
    static const char *const ok[] = {"application/json", "application/yaml", "application/x-yaml",
                                     "text/yaml", "text/x-yaml"};
    if (!content_type)
        return false;
    const char *p = content_type;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, "; \t");
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strlen(ok[i]) == n && strncasecmp(p, ok[i], n) == 0)
            return true;
    /* application/vnd.apache.kylin-v4-public+json and the other +json types Kylin's clients
     * send (RFC 6839 structured syntax suffix). */
    return n > 17 && strncasecmp(p, "application/", 12) == 0 &&
           strncasecmp(p + n - 5, "+json", 5) == 0;
}

bool ql_api_origin_ok(const char *origin, const char *host_header) {
    if (!origin)
        return true; /* not from a browser, or a same-origin read */
    const char *sep = strstr(origin, "://");
    if (!sep || !host_header)
        return false; /* "null" (a sandboxed page, a file:) or malformed */
    const char *hp = sep + 3;
    size_t n = strcspn(hp, "/");
    if (hp[n] == '/' && hp[n + 1])
        return false; /* an origin has no path */
    return n == strlen(host_header) && strncasecmp(hp, host_header, n) == 0;
}

static bool is_write(const char *method) {
    return !strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH") ||
           !strcmp(method, "DELETE");
}

static bool has_body(ql_http_req_t *req) {
    size_t len = 0;
    ql_http_req_body(req, &len);
    const char *cl = ql_http_req_header(req, "Content-Length");
    return len > 0 || ql_http_req_header(req, "Transfer-Encoding") ||
           (cl && strspn(cl, " \t0") != strlen(cl));
}

void ql_api_gate_handle(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    const char *host = ql_http_req_header(req, "Host");
    if (!host && ql_http_req_is_http11(req)) {
        ql_http_respond_error(req, 400, QL_EINVAL,
                              "Host: the header is required in HTTP/1.1 (RFC 9112, 3.2)");
        return;
    }
    if (host && !ql_api_host_allowed(&api->hosts, host)) {
        ql_http_respond_error(req, 421, QL_EINVAL,
                              "Host: '%.200s' is not a name of this server (its listen address, "
                              "or a name in qilin.server.allowed-hosts)",
                              host);
        return;
    }
    const char *method = ql_http_req_method(req);
    if (is_write(method)) {
        const char *ct = ql_http_req_header(req, "Content-Type");
        if ((ct || has_body(req)) && !ql_api_write_type_ok(ct)) {
            ql_http_respond_error(req, 415, QL_EINVAL,
                                  "Content-Type: '%.100s' is not accepted for %s: send the body "
                                  "as application/json (or application/yaml for ad-hoc jobs)",
                                  ct ? ct : "(none)", method);
            return;
        }
        const char *origin = ql_http_req_header(req, "Origin");
        if (!ql_api_origin_ok(origin, host)) {
            ql_http_respond_error(req, 403, QL_EFORBIDDEN,
                                  "Origin: '%.200s' is not this server (Host '%.200s'): writes "
                                  "from other web pages are refused",
                                  origin, host ? host : "");
            return;
        }
    }
    ql_http_router_handle(req, api->router);
}
