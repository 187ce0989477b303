/*
 * The REST API's life cycle (new, listen, close, free), the gates every handler passes, the
 * envelope, the error-to-status table, paging and the lookups shared by the resource files.
 * See ql_api.h for the threading and durability rules.
 */
#include "api/ql_admin_password.h"
#include "api_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define JSON_TYPE "application/json;charset=utf-8"

/* ---- status table ---- */

int ql_api_http_status(int code) {
    switch (code) {
    case 0:
        return 200;
/* Each code's default status is its row of base/ql_error_codes.def. */
#define QL_ERROR(name, value, client_code, status, ...)                                            \
    case name:                                                                                     \
        return status;
#include "base/ql_error_codes.def"
#undef QL_ERROR
    /* A system error the store reports as ENOSPC is a full disk, like QL_EDISKFULL. */
    case UV_ENOSPC:
        return 507;
    default:
        return 500;
    }
}

/* ---- envelope ---- */

void ql_api_ok(ql_http_req_t *req, json_t *data, const char *msg) {
    json_t *env = json_object();
    if (env) {
        json_object_set_new(env, "code", json_string("000"));
        json_object_set_new(env, "data", data ? data : json_null());
        json_object_set_new(env, "msg", json_string(msg ? msg : ""));
    } else {
        json_decref(data);
    }
    char *text = env ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    if (!text) {
        ql_http_respond_error(req, 500, UV_ENOMEM, "out of memory building the answer");
        return;
    }
    ql_http_respond(req, 200, JSON_TYPE, text, strlen(text));
    free(text);
}

void ql_api_redirect(ql_http_req_t *req, const char *location, const char *msg) {
    json_t *env = json_pack("{s:s, s:n, s:s}", "code", "000", "data", "msg", msg);
    char *text = env ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    if (!text || ql_http_add_header(req, "Location", location)) {
        free(text);
        ql_http_respond_error(req, 500, UV_ENOMEM, "cannot build the redirect to %s", location);
        return;
    }
    ql_http_respond(req, 307, JSON_TYPE, text, strlen(text));
    free(text);
}

void ql_api_fail(ql_http_req_t *req, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ql_http_respond_error(req, ql_api_http_status(code), code, "%s", msg);
}

void ql_api_fail_err(ql_http_req_t *req, int code, const ql_err_t *err) {
    int c = err && err->code ? err->code : code;
    const char *msg = err && err->msg[0] ? err->msg : ql_strerror(c);
    ql_http_respond_error(req, ql_api_http_status(c), c, "%s", msg);
}

/* ---- gates ---- */

static bool media_ok(const char *s, size_t n) {
    static const char *const ok[] = {
        "*/*",
        "application/*",
        "application/json",
        "application/vnd.apache.kylin-v4-public+json",
        "application/vnd.apache.kylin-v4+json",
        "application/vnd.apache.kylin-v2+json",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strlen(ok[i]) == n && strncasecmp(s, ok[i], n) == 0)
            return true;
    return false;
}

bool ql_api_accept_ok(const char *accept) {
    if (!accept)
        return true;
    const char *p = accept;
    bool any = false;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        any = true;
        const char *start = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        if (media_ok(start, (size_t)(p - start)))
            return true;
        while (*p && *p != ',')
            p++;
    }
    return !any; /* an empty header accepts anything */
}

bool ql_api_begin(ql_api_t *api, ql_http_req_t *req, unsigned flags) {
    if (api->closing) {
        ql_api_fail(req, QL_ESHUTDOWN, "the server is shutting down");
        return false;
    }
    const char *accept = ql_http_req_header(req, "Accept");
    if (!ql_api_accept_ok(accept)) {
        ql_http_respond_error(req, 406, QL_EINVAL,
                              "Accept: '%.200s' allows no JSON answer (use application/json, "
                              "application/vnd.apache.kylin-v4-public+json or "
                              "application/vnd.apache.kylin-v4+json)",
                              accept);
        return false;
    }
    if ((flags & API_WRITE) && ql_http_req_role(req) != QL_AUTH_ROLE_ADMIN) {
        const char *user = ql_http_req_user(req);
        ql_api_fail(req, QL_EFORBIDDEN,
                    "user %s has the role %s, which may read only: %s %s changes the store and "
                    "needs a user whose role is ADMIN (qilin.server.users)",
                    user ? user : "-", ql_auth_role_name(ql_http_req_role(req)),
                    ql_http_req_method(req), ql_http_req_path(req));
        return false;
    }
    if ((flags & API_WRITE) && !api->writes_allowed) {
        ql_api_fail(req, QL_EMODE,
                    "this server runs in mode '%s' (kylin.server.mode) and serves reads only: "
                    "send %s %s to a server whose mode is all or job",
                    api->mode, ql_http_req_method(req), ql_http_req_path(req));
        return false;
    }
    return true;
}

bool ql_api_begin_write(ql_api_t *api, ql_http_req_t *req, ql_api_body_t *body) {
    if (!ql_api_begin(api, req, API_WRITE))
        return false;
    body->p = ql_http_req_body(req, &body->len);
    return true;
}

ql_txn_t *ql_api_begin_read(ql_api_t *api, ql_http_req_t *req) {
    return ql_api_begin(api, req, API_READ) ? ql_api_read_txn(api, req) : NULL;
}

bool ql_api_body_refused(ql_http_req_t *req, int rc, json_t **root, const ql_err_t *err) {
    if (!rc)
        return false;
    json_decref(*root);
    *root = NULL;
    ql_api_fail_err(req, QL_EINVAL, err);
    return true;
}

bool ql_api_submit(ql_api_t *api, ql_http_req_t *req, ql_write_fn fn, void *ctx,
                   ql_write_done_cb done) {
    int rc =
        api->closing ? QL_ESHUTDOWN : ql_writer_submit(ql_node_writer(api->node), fn, ctx, done);
    if (rc == 0)
        return true;
    if (rc == QL_ESHUTDOWN)
        ql_api_fail(req, rc, "the server is shutting down");
    else
        ql_api_fail(req, rc, "cannot queue the change: %s", ql_strerror(rc));
    return false;
}

bool ql_api_submission_failed(ql_api_t *api, ql_http_req_t *req,
                              const ql_submission_result_t *res) {
    if (!res->status)
        return false;
    if (res->written)
        api->stats.submit_failures++;
    ql_api_fail_err(req, res->status, res->err);
    return true;
}

void ql_api_answer_change(ql_api_t *api, ql_http_req_t *req, int status, const ql_err_t *err,
                          const char *what) {
    if (status) {
        ql_api_fail_err(req, status, err);
        return;
    }
    ql_api_log_change(api, req, what);
    ql_api_ok(req, json_string(""), NULL);
}

void ql_api_log_change(ql_api_t *api, ql_http_req_t *req, const char *what) {
    if (!ql_log_enabled(api->log, QL_LOG_INFO))
        return;
    const char *user = ql_http_req_user(req);
    ql_log(api->log, QL_LOG_INFO, "api", "%s request=\"%s %.200s\" user=%s", what,
           ql_http_req_method(req), ql_http_req_path(req), user ? user : "-");
}

ql_txn_t *ql_api_read_txn(ql_api_t *api, ql_http_req_t *req) {
    ql_txn_t *txn;
    int rc = ql_txn_begin(ql_node_store(api->node), false, &txn);
    if (rc) {
        ql_api_fail(req, rc, "cannot read the store: %s", ql_strerror(rc));
        return NULL;
    }
    return txn;
}

void *ql_api_op_new(ql_api_t *api, ql_http_req_t *req, size_t size) {
    ql_api_op_t *op = calloc(1, size < sizeof *op ? sizeof *op : size);
    if (!op) {
        ql_api_fail(req, UV_ENOMEM, "out of memory");
        return NULL;
    }
    op->api = api;
    op->req = req;
    op->now = ql_api_now(api);
    const char *user = ql_http_req_user(req);
    snprintf(op->user, sizeof op->user, "%s", user ? user : "ADMIN");
    return op;
}

int64_t ql_api_now(ql_api_t *api) {
    return ql_clock_now_ms(ql_node_clock(api->node));
}

/* ---- query parameters and paging ---- */

const char *ql_api_query_given(ql_http_req_t *req, const char *key) {
    const char *v = ql_http_req_query(req, key);
    return v && v[0] ? v : NULL;
}

int ql_api_query_int(ql_http_req_t *req, const char *key, int64_t def, int64_t min, int64_t max,
                     int64_t *out, ql_err_t *err) {
    const char *v = ql_api_query_given(req, key);
    if (!v) {
        *out = def;
        return 0;
    }
    int64_t x;
    if (ql_api_parse_i64(v, &x))
        return ql_err_set(err, QL_EINVAL, "%s: '%.64s' is not an integer", key, v);
    if (x < min || x > max)
        return ql_err_set(err, QL_EINVAL, "%s: %lld is outside %lld..%lld", key, (long long)x,
                          (long long)min, (long long)max);
    *out = x;
    return 0;
}

int ql_api_query_bool(ql_http_req_t *req, const char *key, bool def, bool *out, ql_err_t *err) {
    const char *v = ql_api_query_given(req, key);
    if (!v)
        *out = def;
    else if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = true;
    else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = false;
    else
        return ql_err_set(err, QL_EINVAL, "%s: '%.64s' is not true or false", key, v);
    return 0;
}

int ql_api_paging(ql_http_req_t *req, int64_t max, ql_api_page_t *out, ql_err_t *err) {
    int64_t off = 0, size = 0;
    int rc = ql_api_query_int(req, "page_offset", 0, 0, INT32_MAX, &off, err);
    if (rc)
        return rc;
    const char *v = ql_api_query_given(req, "page_size");
    if (v && ql_api_parse_i64(v, &size) == 0 && size > max)
        return ql_err_set(err, QL_EINVAL,
                          "page_size: %lld is larger than this server's maximum %lld "
                          "(qilin.api.page-size-max)",
                          (long long)size, (long long)max);
    if ((rc = ql_api_query_int(req, "page_size", 10, 1, max, &size, err)))
        return rc;
    out->offset = (uint64_t)off;
    out->limit = (uint64_t)size;
    return 0;
}

uint64_t ql_api_page_first(const ql_api_page_t *p) {
    if (p->limit && p->offset > UINT64_MAX / p->limit)
        return UINT64_MAX;
    return p->offset * p->limit;
}

bool ql_api_begin_page(ql_api_t *api, ql_http_req_t *req, ql_api_page_t *page) {
    if (!ql_api_begin(api, req, API_READ))
        return false;
    ql_err_t err = {0};
    if (ql_api_paging(req, api->page_size_max, page, &err)) {
        ql_api_fail_err(req, QL_EINVAL, &err);
        return false;
    }
    return true;
}

ql_api_pager_t ql_api_pager(const ql_api_page_t *p) {
    return (ql_api_pager_t){.first = ql_api_page_first(p), .limit = p->limit};
}

bool ql_api_pager_take(ql_api_pager_t *p) {
    uint64_t i = p->seen++;
    return i >= p->first && i - p->first < p->limit;
}

bool ql_api_pager_full(const ql_api_pager_t *p) {
    return p->seen >= p->first + p->limit;
}

bool ql_api_name_contains(const char *name, const char *filter) {
    if (!filter || !filter[0])
        return true;
    size_t n = strlen(filter);
    for (const char *p = name; *p; p++)
        if (strncasecmp(p, filter, n) == 0)
            return true;
    return false;
}

int ql_api_add_routes(ql_api_t *api, const ql_api_route_t *routes, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int rc = ql_http_router_add(api->router, routes[i].method, routes[i].pattern,
                                    routes[i].name, QL_HTTP_ROUTE_AUTH, routes[i].fn, api);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- lookups ---- */

int ql_api_get_project(ql_txn_t *txn, const char *name, ql_project_t *out, ql_err_t *err) {
    return ql_submission_get_project(txn, name, out, err);
}

int ql_api_get_model(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                     ql_model_t *out, ql_err_t *err) {
    return ql_submission_get_model(txn, project, name, flags, out, err);
}

/* ---- life cycle ---- */

/* The generated ADMIN user when qilin.server.users is empty: its password is read from (or
 * first written to) <data>/admin.password and only its hash is kept. Writes the hash into
 * hash (caller's, QL_AUTH_HASH_MAX bytes), and into *is_default whether the password is Kylin's
 * public default (an operator may have written it into the file). */
static int generated_admin(ql_api_t *api, char *hash, bool *is_default, ql_err_t *err) {
    const char *dir = ql_config_get_str(api->cfg, "qilin.storage.path");
    char pw[QL_ADMIN_PASSWORD_MAX], path[4096];
    bool created;
    int rc = ql_admin_password_load(dir, pw, sizeof pw, &created, err);
    if (rc)
        return rc;
    rc = ql_auth_hash_password(pw, hash, QL_AUTH_HASH_MAX);
    *is_default = strcmp(pw, QL_AUTH_DEFAULT_PASSWORD) == 0;
    sodium_memzero(pw, sizeof pw);
    if (rc)
        return ql_err_set(err, rc, "cannot hash the ADMIN password: %s", ql_strerror(rc));
    /* The path, never the password: the log may be read by others. */
    ql_log(api->log, QL_LOG_INFO, "api",
           "%s user=ADMIN password_file=%s (no qilin.server.users configured)",
           created ? "generated a random password" : "password read",
           ql_admin_password_path(dir, path, sizeof path) ? path : dir);
    return 0;
}

static int make_auth(ql_api_t *api, ql_err_t *err) {
    const ql_config_user_t *users;
    size_t n = ql_config_users(api->cfg, &users);
    ql_auth_user_t *au = calloc(n ? n : 1, sizeof *au);
    if (!au)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    char hash[QL_AUTH_HASH_MAX];
    size_t k = 0;
    int rc = 0;
    bool generated = false, is_default = false;
    for (size_t i = 0; i < n && !rc; i++) {
        if (users[i].builtin) {
            /* No configured users: ADMIN with the generated password. */
            if (!(rc = generated_admin(api, hash, &is_default, err)))
                au[k++] = (ql_auth_user_t){QL_AUTH_DEFAULT_USER, hash, QL_AUTH_ROLE_ADMIN};
            generated = true;
            continue;
        }
        au[k].name = users[i].name;
        au[k].hash = users[i].password_hash;
        if (ql_auth_role_parse(users[i].role, &au[k].role))
            rc = ql_err_set(err, QL_EINVAL, "qilin.server.users: user '%s': unknown role '%s'",
                            users[i].name, users[i].role);
        k++;
    }
    if (!rc) {
        ql_auth_config_t ac;
        ql_auth_config_default(&ac);
        ac.users = au;
        ac.n_users = k;
        /* The only user is the generated ADMIN, whose password was just compared in clear. */
        ac.no_default_password = generated && k == 1 && !is_default;
        rc = ql_auth_new(api->loop, &ac, &api->auth, err);
    }
    free(au);
    return rc;
}

int ql_api_new(const ql_api_opts_t *opts, ql_api_t **out, ql_err_t *err) {
    *out = NULL;
    ql_api_t *api = calloc(1, sizeof *api);
    if (!api)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    api->loop = opts->loop;
    api->node = opts->node;
    api->log = opts->log;
    api->cfg = ql_node_config(opts->node);
    api->writes_allowed = ql_config_serves_jobs(api->cfg);
    api->page_size_max = ql_config_get_int(api->cfg, "qilin.api.page-size-max");
    ql_config_server_id(api->cfg, api->server_id, sizeof api->server_id);
    const char *const *modes;
    size_t n_modes = ql_config_get_list(api->cfg, "kylin.server.mode", &modes);
    size_t off = 0;
    for (size_t i = 0; i < n_modes && off < sizeof api->mode; i++)
        off += (size_t)snprintf(api->mode + off, sizeof api->mode - off, "%s%s", i ? "," : "",
                                modes[i]);
    api->adhoc_commands = ql_config_get_bool(api->cfg, "qilin.adhoc.allow-commands");
    const char *listen_host;
    int listen_port;
    ql_config_get_address(api->cfg, "qilin.server.listen", &listen_host, &listen_port);
    const char *const *extra_hosts;
    size_t n_extra = ql_config_get_list(api->cfg, "qilin.server.allowed-hosts", &extra_hosts);
    int rc = ql_api_hosts_init(&api->hosts, listen_host, extra_hosts, n_extra);
    if (rc) {
        free(api);
        return ql_err_set(err, rc, "out of memory");
    }
    rc = make_auth(api, err);
    if (!rc && (rc = ql_http_router_new(&api->router)))
        ql_err_set(err, rc, "out of memory");
    if (!rc) {
        ql_http_router_set_auth(api->router, api->auth);
        if ((rc = ql_api_routes_projects(api)) || (rc = ql_api_routes_models(api)) ||
            (rc = ql_api_routes_segments(api)) || (rc = ql_api_routes_jobs(api)) ||
            (rc = ql_api_routes_job_actions(api)) || (rc = ql_api_routes_job_delete(api)) ||
            (rc = ql_api_routes_lifecycle(api)) || (rc = ql_api_routes_adhoc(api)) ||
            (rc = ql_api_routes_status(api)) || (rc = ql_api_routes_ui(api)) ||
            (rc = ql_api_routes_console(api)))
            ql_err_set(err, rc, "cannot register the routes: %s", ql_strerror(rc));
    }
    if (!rc) {
        ql_http_config_t hc = {.handler = ql_api_gate_handle, .handler_arg = api};
        ql_http_limits_default(&hc.limits);
        hc.limits.max_body_bytes =
            (size_t)ql_config_get_size(api->cfg, "qilin.http.max-body-bytes");
        hc.limits.max_header_bytes =
            (size_t)ql_config_get_size(api->cfg, "qilin.http.max-header-bytes");
        if (hc.limits.max_header_bytes > 80 * 1024)
            hc.limits.max_header_bytes = 80 * 1024; /* http-parser's own ceiling */
        hc.limits.idle_timeout_ms =
            (uint64_t)ql_config_get_ms(api->cfg, "qilin.http.idle-timeout-ms");
        hc.limits.request_timeout_ms =
            (uint64_t)ql_config_get_ms(api->cfg, "qilin.http.request-timeout-ms");
        hc.limits.max_connections =
            (size_t)ql_config_get_int(api->cfg, "qilin.http.max-connections");
        hc.limits.max_connections_per_address =
            (size_t)ql_config_get_int(api->cfg, "qilin.http.max-connections-per-address");
        hc.limits.first_request_timeout_ms =
            (uint64_t)ql_config_get_ms(api->cfg, "qilin.http.first-request-timeout-ms");
        hc.limits.auth_reserve =
            (size_t)ql_config_get_int(api->cfg, "qilin.http.auth-reserved-connections");
        if ((rc = ql_http_server_new(api->loop, &hc, &api->server)))
            ql_err_set(err, rc, "cannot create the HTTP server: %s", ql_strerror(rc));
    }
    if (rc) {
        if (api->auth)
            ql_auth_free(api->auth);
        ql_http_router_free(api->router);
        ql_api_hosts_free(&api->hosts);
        /* The server was not created when rc is set: nothing is open on the loop. */
        free(api);
        return rc;
    }
    *out = api;
    return 0;
}

int ql_api_listen(ql_api_t *api, const char *hostport, ql_err_t *err) {
    int rc = ql_http_server_listen(api->server, hostport);
    if (rc)
        return ql_err_set(err, rc, "qilin.server.listen: cannot listen on %s: %s", hostport,
                          ql_strerror(rc));
    api->listening = true;
    bool loopback = ql_http_server_is_loopback(api->server);
    if ((rc = ql_auth_check_listen(api->auth, loopback, err)))
        return rc;
    int port = 0;
    ql_http_server_port(api->server, &port);
    char address[300];
    const char *colon = strrchr(hostport, ':');
    snprintf(address, sizeof address, "%.*s:%d", colon ? (int)(colon - hostport) : 0, hostport,
             port);
    ql_api_presence_start(api, address);
    /* Allowed, since an operator configured it, but never silently: every local user knows it. */
    if (ql_auth_uses_default_password(api->auth))
        ql_log(api->log, QL_LOG_WARN, "api",
               "user ADMIN accepts Kylin's public default password KYLIN (its hash is in "
               "qilin.server.users): every local user can use the API as ADMIN");
    return 0;
}

int ql_api_port(const ql_api_t *api, int *port) {
    return ql_http_server_port(api->server, port);
}

/* Closed once the server's handles are closed and no scan is running in the threadpool: the
 * store must outlive every read transaction the API opened. */
static void maybe_closed(ql_api_t *api) {
    if (!api->server_closed || api->works > 0 || !api->close_done)
        return;
    void (*done)(void *) = api->close_done;
    api->close_done = NULL;
    done(api->close_arg);
}

static void server_closed(ql_http_server_t *server, void *arg) {
    (void)server;
    ql_api_t *api = arg;
    api->server_closed = true;
    maybe_closed(api);
}

void ql_api_work_done(ql_api_t *api) {
    api->works--;
    maybe_closed(api);
}

void ql_api_close(ql_api_t *api, void (*done)(void *arg), void *arg) {
    if (api->closing)
        return;
    api->closing = true;
    ql_api_presence_stop(api);
    api->close_done = done;
    api->close_arg = arg;
    /* Verifications in flight answer their requests with 503 once they finish; the router
     * dispatches nothing new after the server is closed, so it never sees the freed auth. */
    if (api->auth) {
        ql_auth_free(api->auth);
        api->auth = NULL;
        ql_http_router_set_auth(api->router, NULL);
    }
    ql_http_server_close(api->server, server_closed, api);
}

void ql_api_free(ql_api_t *api) {
    if (!api)
        return;
    ql_api_presence_stop(api);
    ql_http_server_free(api->server);
    ql_http_router_free(api->router);
    ql_api_hosts_free(&api->hosts);
    free(api);
}

ql_http_router_t *ql_api_router(ql_api_t *api) {
    return api->router;
}

void ql_api_get_stats(const ql_api_t *api, ql_api_stats_t *out) {
    *out = api->stats;
}
