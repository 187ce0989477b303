/*
 * Requests to the Kylin REST API (docs/design/rest-api.md) with libcurl, and the envelope check.
 *
 * Every answer is judged in one place (judge() below) so all commands agree on exit codes:
 * 2xx with {"code":"000"} is success; an error envelope is the server refusing (exit 1, its
 * msg and error_code printed); 401 is an authentication failure and anything that is not a
 * Kylin envelope (a proxy's HTML page, a different service on the port) means we are not
 * talking to a usable Qilin server (exit 3), like a refused connection.
 */
#include "base/ql_buf.h"
#include "client_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Answers larger than this are refused rather than buffered without bound. */
#define MAX_ANSWER (256u * 1024u * 1024u)
#define CONNECT_TIMEOUT_MS 10000L
/* Generous: a page of 1000 jobs, or a step output of the store's 10 MiB cap, over a slow
 * link. */
#define REQUEST_TIMEOUT_MS 300000L

typedef struct buf {
    ql_strbuf_t s; /* the answer, NUL-terminated */
    bool too_big;
} buf_t;

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *arg) {
    buf_t *b = arg;
    size_t n = size * nmemb;
    if (b->s.len + n > MAX_ANSWER) {
        b->too_big = true;
        return 0;
    }
    return ql_strbuf_append_cap(&b->s, ptr, n, 4096) ? 0 : n;
}

/* Appends s to *dst (a growing malloc'd string). Returns 0 or -1 when out of memory. */
static int append(char **dst, size_t *len, const char *s, size_t n) {
    char *d = realloc(*dst, *len + n + 1);
    if (!d)
        return -1;
    memcpy(d + *len, s, n);
    *len += n;
    d[*len] = '\0';
    *dst = d;
    return 0;
}

/* Escapes one path segment or query value. The result is malloc'd (free). */
static char *escape(const char *s) {
    /* curl_easy_escape needs no handle since 7.82; passing NULL keeps this usable before the
     * first request creates one. */
    char *e = curl_easy_escape(NULL, s, 0);
    if (!e)
        return NULL;
    char *copy = strdup(e);
    curl_free(e);
    return copy;
}

char *ql_cli_pathf(ql_cli_t *cli, const char *fmt, ...) {
    (void)cli;
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    size_t len = 0;
    int rc = append(&out, &len, "", 0);
    for (const char *p = fmt; rc == 0 && *p;) {
        const char *pct = strstr(p, "%s");
        if (!pct) {
            rc = append(&out, &len, p, strlen(p));
            break;
        }
        rc = append(&out, &len, p, (size_t)(pct - p));
        char *e = rc ? NULL : escape(va_arg(ap, const char *));
        rc = rc || !e ? -1 : append(&out, &len, e, strlen(e));
        free(e);
        p = pct + 2;
    }
    va_end(ap);
    if (rc) {
        free(out);
        return NULL;
    }
    return out;
}

static char *build_url(const ql_cli_t *cli, const char *path, const ql_cli_kv_t *query,
                       size_t n_query) {
    char *url = NULL;
    size_t len = 0;
    if (append(&url, &len, cli->base, strlen(cli->base)) || append(&url, &len, path, strlen(path)))
        goto fail;
    char sep = '?';
    for (size_t i = 0; i < n_query; i++) {
        if (!query[i].value)
            continue;
        char *k = escape(query[i].key), *v = escape(query[i].value);
        int rc = !k || !v || append(&url, &len, &sep, 1) || append(&url, &len, k, strlen(k)) ||
                 append(&url, &len, "=", 1) || append(&url, &len, v, strlen(v));
        free(k);
        free(v);
        if (rc)
            goto fail;
        sep = '&';
    }
    return url;
fail:
    free(url);
    return NULL;
}

/* Judges one answer; see the top of the file. Takes nothing; borrows everything. */
static int judge(ql_cli_t *cli, long status, const buf_t *b, json_t **data) {
    json_error_t jerr;
    json_t *root = b->s.len ? json_loadb(b->s.p, b->s.len, 0, &jerr) : NULL;
    json_t *code = json_object_get(root, "code");
    const char *msg = json_string_value(json_object_get(root, "msg"));
    const char *ecode = json_string_value(json_object_get(root, "error_code"));
    int rc;
    if (status == 401) {
        rc = ql_cli_fail(cli, QL_CLI_UNREACHABLE,
                         "authentication failed for user '%s' (HTTP 401)%s%s: check --user and "
                         "--password or --password-file (or QILIN_USER, QILIN_PASSWORD, "
                         "QILIN_PASSWORD_FILE, the config file)%s%s",
                         cli->user, msg && *msg ? ": " : "", msg && *msg ? msg : "",
                         cli->pw_note[0] ? "; " : "", cli->pw_note);
    } else if (!json_is_object(root) || !json_is_string(code)) {
        /* Show the start of what came back: usually enough to recognise a proxy or another
         * service. */
        int n = b->s.len > 120 ? 120 : (int)b->s.len;
        for (int i = 0; i < n; i++)
            if ((unsigned char)b->s.p[i] < 0x20)
                n = i;
        rc = ql_cli_fail(cli, QL_CLI_UNREACHABLE,
                         "%s did not answer like a Qilin server (HTTP %ld%s%.*s%s)", cli->base,
                         status, n ? ": \"" : "", n, n ? b->s.p : "", n ? "\"" : "");
    } else if (status >= 200 && status < 300 && !strcmp(json_string_value(code), "000")) {
        if (data) {
            json_t *d = json_object_get(root, "data");
            *data = d ? json_incref(d) : json_null();
        }
        snprintf(cli->last_msg, sizeof cli->last_msg, "%s", msg ? msg : "");
        rc = QL_CLI_OK;
    } else {
        rc = ql_cli_fail(cli, QL_CLI_REFUSED, "the server refused (HTTP %ld%s%s): %s", status,
                         ecode ? ", " : "", ecode ? ecode : "", msg && *msg ? msg : "(no message)");
    }
    json_decref(root);
    return rc;
}

int ql_cli_call_raw(ql_cli_t *cli, const char *method, const char *path, const ql_cli_kv_t *query,
                    size_t n_query, const char *content_type, const char *body, size_t len,
                    json_t **data) {
    if (!cli->curl && !(cli->curl = curl_easy_init()))
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "cannot initialise libcurl");
    char *url = build_url(cli, path, query, n_query);
    if (!url)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    CURL *c = cli->curl;
    /* Reset rather than a new handle: the options go, the connection cache stays, so the
     * requests of one command (pages, polls) share one keep-alive connection. */
    curl_easy_reset(c);
    buf_t b = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    char ctype[128];
    snprintf(ctype, sizeof ctype, "Content-Type: %s", content_type ? content_type : "");
    struct curl_slist *h = NULL, *h2;
    /* Kylin's public API media type first, as Kylin's own scripts send it. */
    if (!(h2 = curl_slist_append(h, "Accept: application/vnd.apache.kylin-v4-public+json, "
                                    "application/json")))
        goto oom;
    h = h2;
    if (body) {
        if (!(h2 = curl_slist_append(h, ctype)))
            goto oom;
        h = h2;
        /* No "Expect: 100-continue" round trip for our small bodies. */
        if (!(h2 = curl_slist_append(h, "Expect:")))
            goto oom;
        h = h2;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, cli->user);
    curl_easy_setopt(c, CURLOPT_PASSWORD, cli->password);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "qilin/" QL_VERSION);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    if (!strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (body) {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        }
    }
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    int rc;
    if (b.too_big)
        rc = ql_cli_fail(cli, QL_CLI_UNREACHABLE, "the answer to %s %s is larger than %u MiB",
                         method, path, MAX_ANSWER >> 20);
    else if (cc != CURLE_OK)
        rc = ql_cli_fail(cli, QL_CLI_UNREACHABLE, "cannot reach the server at %s: %s", cli->base,
                         *errbuf ? errbuf : curl_easy_strerror(cc));
    else
        rc = judge(cli, status, &b, data);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(h);
    ql_strbuf_free(&b.s);
    free(url);
    return rc;
oom:
    curl_slist_free_all(h);
    free(url);
    return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
}

int ql_cli_send(ql_cli_t *cli, const char *method, char *path, json_t *body, json_t **data,
                int fail_code, const char *fail_msg) {
    *data = NULL;
    int rc = path && body ? ql_cli_call(cli, method, path, NULL, 0, body, data)
                          : ql_cli_fail(cli, fail_code, "%s", fail_msg);
    free(path);
    json_decref(body);
    return rc;
}

int ql_cli_get_in(ql_cli_t *cli, char *path, const char *project, json_t **data) {
    *data = NULL;
    if (!path)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    ql_cli_kv_t q[] = {{"project", project}};
    int rc = ql_cli_call(cli, "GET", path, q, 1, NULL, data);
    free(path);
    return rc;
}

int ql_cli_call(ql_cli_t *cli, const char *method, const char *path, const ql_cli_kv_t *query,
                size_t n_query, json_t *body, json_t **data) {
    char *text = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT)))
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    int rc = ql_cli_call_raw(cli, method, path, query, n_query, "application/json;charset=utf-8",
                             text, text ? strlen(text) : 0, data);
    free(text);
    return rc;
}

int ql_cli_list(ql_cli_t *cli, const ql_cli_args_t *a, const char *path, const ql_cli_kv_t *query,
                size_t n_query, json_t **items, int64_t *total) {
    int64_t limit = 0, page_size = 100;
    int rc = ql_cli_get_int(cli, a, "limit", 1, INT64_MAX, &limit);
    if (!rc)
        rc = ql_cli_get_int(cli, a, "page-size", 1, 1000, &page_size);
    if (rc)
        return rc;
    return ql_cli_pages(cli, path, query, n_query, limit, page_size, items, total);
}

int ql_cli_pages(ql_cli_t *cli, const char *path, const ql_cli_kv_t *query, size_t n_query,
                 int64_t limit, int64_t page_size, json_t **items, int64_t *total) {
    int rc;
    if (limit && limit < page_size)
        page_size = limit;
    ql_cli_kv_t *q = calloc(n_query + 2, sizeof *q);
    json_t *all = json_array();
    if (!q || !all) {
        free(q);
        json_decref(all);
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    }
    if (n_query)
        memcpy(q, query, n_query * sizeof *q);
    char offset_s[24], size_s[24];
    snprintf(size_s, sizeof size_s, "%lld", (long long)page_size);
    q[n_query] = (ql_cli_kv_t){"page_offset", offset_s};
    q[n_query + 1] = (ql_cli_kv_t){"page_size", size_s};
    int64_t server_total = -1;
    /* page_offset is a page number, as in Kylin. Stop at an empty page, at the server's
     * total, or at --limit: every page either adds items or ends the loop, so a list that
     * changes while we read it cannot make us loop forever. */
    for (int64_t page = 0;; page++) {
        snprintf(offset_s, sizeof offset_s, "%lld", (long long)page);
        json_t *data = NULL;
        rc = ql_cli_call(cli, "GET", path, q, n_query + 2, NULL, &data);
        if (rc)
            break;
        json_t *value = json_object_get(data, "value");
        int64_t t;
        if (!json_is_array(value)) {
            json_decref(data);
            rc = ql_cli_fail(cli, QL_CLI_UNREACHABLE,
                             "GET %s: the answer is not a page (no 'value' list)", path);
            break;
        }
        if (ql_cli_json_int(json_object_get(data, "total_size"), &t) == 0)
            server_total = t;
        size_t n = json_array_size(value);
        for (size_t i = 0; i < n; i++) {
            if (limit && (int64_t)json_array_size(all) >= limit)
                break;
            json_array_append(all, json_array_get(value, i));
        }
        json_decref(data);
        int64_t got = (int64_t)json_array_size(all);
        if (n == 0 || (limit && got >= limit))
            break;
        /* A server whose maximum page is smaller than ours sends short pages: trust its
         * total when it gives one. */
        if (server_total >= 0 ? got >= server_total : (int64_t)n < page_size)
            break;
    }
    free(q);
    if (rc) {
        json_decref(all);
        return rc;
    }
    *items = all;
    *total = server_total >= 0 ? server_total : (int64_t)json_array_size(all);
    return 0;
}
