/*
 * The web console's side of qilind (docs/user-guide.md, "Web console"; docs/rest.md): the
 * files under /ui with their security headers and ETags, deep links answered with the
 * application shell, the VIEWER role (reads only; every write 403), and the read endpoints
 * the console uses (/user/authentication, /cluster, /changes, the decision's zone and next
 * trigger), against the real qilind.
 */
#include "api/api_int.h"
#include "http/ql_auth.h"
#include "rest_util.h"
#include "ui/ql_ui.h"

static qd_t q;

static void teardown(void) {
    qd_cleanup(&q);
}

static const char *ADMIN_UP = "boss:boss-secret-1";
static const char *VIEWER_UP = "watcher:watch-secret-1";

/* Starts qilind with an ADMIN and a VIEWER user. */
static void start_with_users(void) {
    qd_init(&q);
    char a[QL_AUTH_HASH_MAX], v[QL_AUTH_HASH_MAX];
    cr_assert_eq(ql_auth_hash_password("boss-secret-1", a, sizeof a), 0);
    cr_assert_eq(ql_auth_hash_password("watch-secret-1", v, sizeof v), 0);
    static char users[2 * QL_AUTH_HASH_MAX + 64];
    snprintf(users, sizeof users, "qilin.server.users=boss:%s:ADMIN;watcher:%s:viewer", a, v);
    const char *extra[] = {"--set", users, NULL};
    qd_start(&q, extra);
}

static bool has_header(const resp_t *r, const char *line) {
    return strcasestr(r->headers, line) != NULL;
}

Test(console, ui_paths_serve_the_shell_and_files_with_security_headers, .fini = teardown) {
    qd_init(&q);
    qd_start(&q, NULL);
    const char *paths[] = {"/ui", "/ui/", "/ui/projects/p/models/m", "/ui/jobs/abc?project=p"};
    for (size_t i = 0; i < 4; i++) {
        resp_t r = http_req(&q, "GET", paths[i], NULL, "", NULL);
        cr_assert_eq(r.status, 200, "%s: %ld", paths[i], r.status);
        cr_assert_str_eq(r.ctype, "text/html; charset=utf-8");
        cr_assert(strstr(r.body, "/ui/assets/js/main.js"), "%s: not the shell", paths[i]);
        cr_assert(has_header(&r, "Content-Security-Policy: default-src 'none'; script-src 'self';"),
                  "%s", r.headers);
        cr_assert(has_header(&r, "frame-ancestors 'none'"));
        cr_assert(has_header(&r, "X-Content-Type-Options: nosniff"));
        cr_assert(has_header(&r, "Cache-Control: no-cache"));
        cr_assert_eq(strlen(r.body), ql_ui_shell()->len);
        resp_free(&r);
    }
    /* Every embedded file, with its type and ETag; a 304 when the ETag still matches. */
    cr_assert_geq(ql_ui_count(), 5);
    for (size_t i = 0; i < ql_ui_count(); i++) {
        const ql_ui_asset_t *a = ql_ui_at(i);
        char path[256], inm[128];
        snprintf(path, sizeof path, "/ui/assets%s", a->path);
        resp_t r = http_req(&q, "GET", path, NULL, "", NULL);
        cr_assert_eq(r.status, 200, "%s", path);
        cr_assert_eq(r.len, a->len, "%s", path);
        cr_assert_eq(memcmp(r.body, a->body, a->len), 0, "%s", path);
        char etag[96];
        snprintf(etag, sizeof etag, "ETag: %s", a->etag);
        cr_assert(has_header(&r, etag), "%s: %s", path, r.headers);
        resp_free(&r);
        snprintf(inm, sizeof inm, "If-None-Match: W/\"x\", %s", a->etag);
        const char *h[] = {inm, NULL};
        r = http_req(&q, "GET", path, NULL, "", h);
        cr_assert_eq(r.status, 304, "%s: %ld", path, r.status);
        cr_assert_eq(r.len, 0);
        resp_free(&r);
    }
    resp_t js = http_req(&q, "GET", "/ui/assets/js/main.js", NULL, "", NULL);
    cr_assert_str_eq(js.ctype, "text/javascript; charset=utf-8");
    resp_free(&js);
    /* A missing file is 404, not the shell; writes are 405; a foreign Host is 421. */
    resp_t r = http_req(&q, "GET", "/ui/assets/js/nothing.js", NULL, "", NULL);
    cr_assert_eq(r.status, 404);
    cr_assert(has_header(&r, "X-Content-Type-Options: nosniff"));
    resp_free(&r);
    r = http_req(&q, "POST", "/ui/projects", "{}", "", NULL);
    cr_assert_eq(r.status, 405);
    resp_free(&r);
    const char *evil[] = {"Host: evil.example", NULL};
    r = http_req(&q, "GET", "/ui", NULL, "", evil);
    cr_assert_eq(r.status, 421);
    resp_free(&r);
    qd_stop_ok(&q, 10000);
}

Test(console, etag_matching_is_exact_and_takes_lists_and_weak_tags) {
    cr_assert(ql_api_etag_matches("\"abc\"", "\"abc\""));
    cr_assert(ql_api_etag_matches("W/\"abc\"", "\"abc\""));
    cr_assert(ql_api_etag_matches("\"x\", \"abc\"", "\"abc\""));
    cr_assert(ql_api_etag_matches("*", "\"abc\""));
    cr_assert_not(ql_api_etag_matches("\"abcd\"", "\"abc\""));
    cr_assert_not(ql_api_etag_matches("\"ab\"", "\"abc\""));
    cr_assert_not(ql_api_etag_matches(NULL, "\"abc\""));
    cr_assert_not(ql_api_etag_matches("", "\"abc\""));
}

Test(console, a_viewer_reads_and_every_write_is_403, .fini = teardown) {
    start_with_users();
    resp_t r = http_req(&q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", ADMIN_UP, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    resp_free(&r);
    r = http_req(&q, "GET", "/kylin/api/projects", NULL, VIEWER_UP, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    resp_free(&r);
    struct {
        const char *method, *path, *body;
    } writes[] = {
        {"POST", "/kylin/api/projects", "{\"name\":\"q\"}"},
        {"PUT", "/kylin/api/projects/p/segment_config", "{\"auto_segment_build_enabled\":true}"},
        {"PUT", "/kylin/api/jobs/status",
         "{\"job_ids\":[\"01a230ef-6e50-7001-907a-dcd9594024f9\"],\"action\":\"PAUSE\"}"},
        {"POST", "/kylin/api/jobs", "{\"project\":\"p\",\"type\":\"EXPORT\"}"},
        {"DELETE", "/kylin/api/models/m/segments?project=p&ids=x", NULL},
    };
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
        r = http_req(&q, writes[i].method, writes[i].path, writes[i].body, VIEWER_UP, NULL);
        cr_assert_eq(r.status, 403, "%s %s: %ld %s", writes[i].method, writes[i].path, r.status,
                     r.body);
        cr_assert_str_eq(json_string_value(json_object_get(r.json, "error_code")), "QL-00026");
        cr_assert(strstr(json_string_value(json_object_get(r.json, "msg")), "role VIEWER"), "%s",
                  r.body);
        resp_free(&r);
    }
    /* Nothing was created by the refused POST. */
    r = http_req(&q, "GET", "/kylin/api/projects", NULL, ADMIN_UP, NULL);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r.json, "data"), "total_size")),
                 1);
    resp_free(&r);
    /* Who am I. */
    r = http_req(&q, "GET", "/kylin/api/user/authentication", NULL, VIEWER_UP, NULL);
    json_t *d = json_object_get(r.json, "data");
    cr_assert_str_eq(jstr(d, "username"), "watcher");
    cr_assert_str_eq(jstr(d, "role"), "VIEWER");
    cr_assert(json_is_false(json_object_get(d, "writable")));
    cr_assert_eq(json_array_size(json_object_get(d, "authorities")), 1);
    resp_free(&r);
    r = http_req(&q, "GET", "/kylin/api/user/authentication", NULL, ADMIN_UP, NULL);
    d = json_object_get(r.json, "data");
    cr_assert_str_eq(jstr(d, "role"), "ADMIN");
    cr_assert(json_is_true(json_object_get(d, "writable")));
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "authorities"), 0), "authority"),
                     "ROLE_ADMIN");
    resp_free(&r);
    r = http_req(&q, "GET", "/kylin/api/user/authentication", NULL, "", NULL);
    cr_assert_eq(r.status, 401);
    resp_free(&r);
    qd_stop_ok(&q, 10000);
}

Test(console, an_unknown_role_stops_the_server_naming_the_roles, .fini = teardown) {
    qd_init(&q);
    char h[QL_AUTH_HASH_MAX], set[QL_AUTH_HASH_MAX + 64];
    cr_assert_eq(ql_auth_hash_password("pw-12345", h, sizeof h), 0);
    snprintf(set, sizeof set, "qilin.server.users=x:%s:OPERATOR", h);
    const char *args[] = {"--data", q.data, "--set", "qilin.server.listen=127.0.0.1:0",
                          "--set",  set,    NULL};
    cr_assert_not(qd_spawn(&q, args));
    assert_file_contains(q.log, "unknown role 'OPERATOR' (accepted: ADMIN, VIEWER)");
}

/* The token of GET /changes for the query, as a string (static buffer). */
static const char *token(const char *query) {
    static char tok[64];
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/changes%s", query);
    json_t *d = api_ok(&q, "GET", path, NULL);
    snprintf(tok, sizeof tok, "%s", jstr(d, "token"));
    json_decref(d);
    return tok;
}

Test(console, the_changes_token_moves_with_jobs_segments_and_models_only, .fini = teardown) {
    qd_init(&q);
    qd_start(&q, NULL);
    make_model(&q, "p", "m", NULL);
    char t0[64], t1[64], t2[64], t3[64];
    snprintf(t0, sizeof t0, "%s", token("?project=p&model=m"));
    cr_assert_str_eq(token("?project=p&model=m"), t0, "the token moved without a change");
    const char *id = build(&q, "p", "m", 1788134400000LL, 1788220800000LL);
    char job[64];
    snprintf(job, sizeof job, "%s", id);
    snprintf(t1, sizeof t1, "%s", token("?project=p&model=m"));
    cr_assert_str_neq(t1, t0, "a build did not move the token");
    wait_job_state(&q, "p", job, "SUCCEED", 20000);
    snprintf(t2, sizeof t2, "%s", token("?project=p&model=m"));
    cr_assert_str_neq(t2, t1, "the job's end did not move the token");
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/models/m/segments?project=p");
    json_t *segs = api_ok(&q, "GET", path, NULL);
    const char *seg = jstr(json_array_get(json_object_get(segs, "value"), 0), "id");
    snprintf(path, sizeof path, "/kylin/api/models/m/segments?project=p&ids=%s", seg);
    json_decref(api_ok(&q, "DELETE", path, NULL));
    json_decref(segs);
    snprintf(t3, sizeof t3, "%s", token("?project=p&model=m"));
    cr_assert_str_neq(t3, t2, "a deleted segment did not move the token");
    json_decref(api_ok(&q, "PUT", "/kylin/api/projects/p/segment_config",
                       "{\"auto_segment_build_enabled\":true}"));
    cr_assert_str_neq(token("?project=p&model=m"), t3, "a project change did not move it");
    /* The whole store's token and bad scopes. */
    cr_assert_str_neq(token(""), "");
    api_err(&q, "GET", "/kylin/api/changes?project=nope", NULL, 404, "QL-00001", "nope");
    api_err(&q, "GET", "/kylin/api/changes?model=m", NULL, 400, "QL-00003", "project");
    api_err(&q, "GET", "/kylin/api/changes?project=p&model=nope", NULL, 404, "QL-00001", "nope");
    qd_stop_ok(&q, 10000);
}

Test(console, cluster_says_master_epoch_and_store, .fini = teardown) {
    qd_init(&q);
    qd_start(&q, NULL);
    json_t *d = api_ok(&q, "GET", "/kylin/api/cluster", NULL);
    json_t *s = json_object_get(d, "server");
    cr_assert_str_eq(jstr(s, "role"), "master");
    cr_assert_str_eq(jstr(s, "mode"), "all");
    cr_assert(json_is_true(json_object_get(json_object_get(d, "master"), "this_server")));
    cr_assert_geq(jint(d, "fencing_epoch"), 1);
    json_t *st = json_object_get(d, "store");
    cr_assert_gt(jint(st, "used_bytes"), 0);
    cr_assert(json_is_integer(json_object_get(json_object_get(d, "jobs"), "SUCCEED")));
    json_decref(d);
    qd_stop_ok(&q, 10000);
}

Test(console, a_query_server_is_not_writable_and_says_so, .fini = teardown) {
    qd_init(&q);
    const char *extra[] = {"--set", "kylin.server.mode=query", NULL};
    qd_start(&q, extra);
    json_t *d = api_ok(&q, "GET", "/kylin/api/user/authentication", NULL);
    cr_assert(json_is_false(json_object_get(d, "writable")));
    json_decref(d);
    d = api_ok(&q, "GET", "/kylin/api/cluster", NULL);
    cr_assert_str_eq(jstr(json_object_get(d, "server"), "role"), "query");
    json_decref(d);
    qd_stop_ok(&q, 10000);
}

Test(console, the_decision_gives_the_project_zone_and_the_next_trigger, .fini = teardown) {
    qd_init(&q);
    qd_start(&q, NULL);
    make_model(&q, "p", "m", NULL);
    json_decref(api_ok(&q, "PUT", "/kylin/api/projects/p/config",
                       "{\"kylin.web.timezone\":\"Asia/Shanghai\"}"));
    json_t *d = api_ok(&q, "GET", "/kylin/api/models/m/auto_segment_build/status?project=p", NULL);
    cr_assert_str_eq(jstr(d, "timezone"), "Asia/Shanghai");
    cr_assert_eq(jint(d, "next_trigger"), 0, "no schedule, no next trigger");
    json_decref(d);
    json_decref(api_ok(&q, "PUT", "/kylin/api/models/m/segment_config",
                       "{\"project\":\"p\",\"auto_segment_build\":{\"enabled\":true,"
                       "\"trigger_time\":\"01:00:00\",\"logical_date_offset_days\":1,"
                       "\"data_range_start_time\":\"00:00:00\",\"data_range_end_time\":"
                       "\"24:00:00\"}}"));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t before = (int64_t)ts.tv_sec * 1000;
    d = api_ok(&q, "GET", "/kylin/api/models/m/auto_segment_build/status?project=p", NULL);
    int64_t next = jint(d, "next_trigger");
    /* 01:00 in Shanghai (UTC+8, no daylight saving) is 17:00 UTC: the next one after now. */
    int64_t day = 86400000, hour = 3600000;
    int64_t expect = (before + 8 * hour) / day * day + hour - 8 * hour;
    if (expect <= before - 1000)
        expect += day;
    cr_assert(next == expect || next == expect + day, "next_trigger %lld, expected %lld",
              (long long)next, (long long)expect);
    cr_assert_gt(next, before - 1000);
    cr_assert_leq(next, before + day + 1000);
    json_decref(d);
    qd_stop_ok(&q, 10000);
}

/* The servers array of GET /cluster on q2 (new reference). */
static json_t *servers_of(qd_t *on) {
    json_t *d = api_ok(on, "GET", "/kylin/api/cluster", NULL);
    json_t *s = json_incref(json_object_get(d, "servers"));
    json_decref(d);
    return s;
}

static const char *role_of(json_t *servers, long pid) {
    size_t i;
    json_t *s;
    json_array_foreach(servers, i, s) {
        if (json_integer_value(json_object_get(s, "pid")) == pid)
            return json_string_value(json_object_get(s, "role"));
    }
    return NULL;
}

/* The servers array on `on` once it has n entries (asserted within timeout_ms): a server on
 * PostgreSQL drops out when the database sees its change session end, a moment after it died. */
static json_t *servers_when(qd_t *on, size_t n, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        json_t *s = servers_of(on);
        if (json_array_size(s) == n)
            return s;
        cr_assert(now_ms() < deadline, "GET /cluster lists %zu servers after %d ms, expected %zu",
                  json_array_size(s), timeout_ms, n);
        json_decref(s);
        poll_pause();
    }
}

static qd_t q2;

static void teardown2(void) {
    if (q2.pid > 0) {
        kill(q2.pid, SIGKILL);
        qd_wait_exit(&q2, 5000);
    }
    qd_cleanup(&q);
}

Test(console, cluster_lists_the_servers_of_the_data_directory_and_drops_a_dead_one,
     .fini = teardown2) {
    qd_init(&q);
    qd_start(&q, NULL);
    /* A second server on the same data directory: a standby. */
    memset(&q2, 0, sizeof q2);
    snprintf(q2.dir, sizeof q2.dir, "%s", q.dir);
    snprintf(q2.data, sizeof q2.data, "%s", q.data);
    snprintf(q2.log, sizeof q2.log, "%s/qilind2.log", q.dir);
    const char *args[] = {"--data", q.data,
                          "--set",  "qilin.server.listen=127.0.0.1:0",
                          "--set",  "qilin.jobs.templates=" QL_SOURCE_DIR "/conf/jobs.yaml",
                          NULL};
    cr_assert(qd_spawn(&q2, args));
    json_t *a = servers_of(&q), *b = servers_of(&q2);
    cr_assert_eq(json_array_size(a), 2);
    cr_assert_eq(json_array_size(b), 2);
    cr_assert_str_eq(role_of(a, q.pid), "master");
    cr_assert_str_eq(role_of(a, q2.pid), "standby");
    cr_assert_str_eq(role_of(b, q.pid), "master", "the standby names the master too");
    cr_assert_str_eq(role_of(b, q2.pid), "standby");
    json_decref(a);
    json_decref(b);
    /* A killed server holds no lock on its file (on PostgreSQL: no change session): it is
     * dropped (and its file removed). */
    kill(q2.pid, SIGKILL);
    cr_assert(qd_wait_exit(&q2, 5000));
    a = servers_when(&q, 1, 5000);
    cr_assert(json_is_true(json_object_get(json_array_get(a, 0), "this_server")));
    json_decref(a);
    char stale[400];
    snprintf(stale, sizeof stale, "%s/servers/server-%ld.json", q.data, (long)q2.pid);
    cr_assert_neq(access(stale, F_OK), 0, "the dead server's file is still there");
    long pid = (long)q.pid;
    qd_stop_ok(&q, 10000);
    /* A server that stops takes its file back. */
    snprintf(stale, sizeof stale, "%s/servers/server-%ld.json", q.data, pid);
    cr_assert_neq(access(stale, F_OK), 0);
}

/* Two servers with data directories of their own on one PostgreSQL schema, as on two hosts:
 * each lists both from the store, with the same master; when the master dies the other takes
 * the lock and lists itself alone, as the master. */
static void teardown_both(void) {
    qd_cleanup(&q2);
    qd_cleanup(&q);
}

Test(console, cluster_lists_the_servers_of_a_shared_store_from_every_data_directory,
     .fini = teardown_both) {
    ql_test_require_backend("pg");
    qd_init(&q);
    qd_start(&q, NULL);
    qd_init(&q2);
    ql_test_store_share(q2.data, q.data);
    qd_start(&q2, NULL);
    json_t *a = servers_when(&q, 2, 10000), *b = servers_when(&q2, 2, 10000);
    cr_assert_str_eq(role_of(a, q.pid), "master");
    cr_assert_str_eq(role_of(a, q2.pid), "standby");
    cr_assert_str_eq(role_of(b, q.pid), "master", "the other data directory names the master");
    cr_assert_str_eq(role_of(b, q2.pid), "standby");
    json_decref(a);
    json_decref(b);
    kill(q.pid, SIGKILL);
    cr_assert(qd_wait_exit(&q, 5000));
    int64_t deadline = now_ms() + 30000;
    for (;;) {
        b = servers_of(&q2);
        const char *role = role_of(b, q2.pid);
        if (json_array_size(b) == 1 && role && !strcmp(role, "master"))
            break;
        cr_assert(now_ms() < deadline, "the survivor does not list itself alone as the master");
        json_decref(b);
        poll_pause();
    }
    cr_assert(json_is_true(json_object_get(json_array_get(b, 0), "this_server")));
    json_decref(b);
    qd_stop_ok(&q2, 10000);
}
