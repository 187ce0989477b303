/*
 * The REST API end to end: every endpoint of docs/design/rest-api.md against the real qilind on
 * 127.0.0.1 (port 0, read back from its "listening on" line), with a fresh data directory per
 * test and libcurl as the client. Waiting is polling with a deadline. The time_filter test
 * writes old jobs straight into the store of the stopped server (the server's clock is the real
 * one), then starts it again.
 */
#include "tests/api/rest_util.h"

#include "engine/engine.h"

static qd_t Q;

/* INC_BUILD in the style of conf/jobs.yaml (shell steps printing what they would build), fast
 * merge/refresh, a job type with a parameter, and sets whose merges and refreshes ("slow") or
 * builds ("slowbuild") wait 10 minutes. */
static const char TEMPLATES[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: Detect resource\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'printf \"detect resource: project %s model %s\\n\" "
    "\"$QILIN_PROJECT\" \"$QILIN_MODEL\"']\n"
    "      - name: Load data to index\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'printf \"building %s [%s, %s)\\n\" \"$QILIN_MODEL\" "
    "\"$QILIN_SEGMENT_START_FMT\" \"$QILIN_SEGMENT_END_FMT\"']\n"
    "      - name: Update metadata\n"
    "        kind: noop\n"
    "  INDEX_REFRESH: {steps: [{name: refresh, kind: noop}]}\n"
    "  INDEX_MERGE: {steps: [{name: merge, kind: noop}]}\n"
    "  INDEX_BUILD: {steps: [{name: build, kind: noop}]}\n"
    "  GREET:\n"
    "    params: [GREETING]\n"
    "    steps:\n"
    "      - name: greet\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'printf \"arg=%s env=%s\\n\" \"$1\" \"$QILIN_PARAM_GREETING\"', "
    "sh, \"${GREETING}\"]\n"
    "template_sets:\n"
    "  slow:\n"
    "    INDEX_MERGE: {steps: [{name: wait, kind: sleep, duration: 10m}]}\n"
    "    INDEX_REFRESH: {steps: [{name: wait, kind: sleep, duration: 10m}]}\n"
    "  slowbuild:\n"
    "    INC_BUILD: {steps: [{name: wait, kind: sleep, duration: 10m}]}\n";

#define DAY 86400000LL
/* 2026-08-31T00:00:00Z */
#define D0 1788134400000LL

static char g_templates_arg[512];

/* Applies a job action in project p1 and expects success (data ""). */
static void action_p1(const char *job, const char *what) {
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"%s\"}", job,
             what);
    json_t *d = api_ok(&Q, "PUT", "/kylin/api/jobs/status", body);
    cr_assert_str_eq(json_string_value(d), "");
    json_decref(d);
}
static char g_config_arg[400];

static void start_with(const char *const *extra) {
    qd_init(&Q);
    char path[400];
    snprintf(path, sizeof path, "%s/jobs.yaml", Q.dir);
    write_file(path, TEMPLATES);
    snprintf(g_templates_arg, sizeof g_templates_arg, "qilin.jobs.templates=%s", path);
    snprintf(path, sizeof path, "%s/qilin.yaml", Q.dir);
    write_file(path, "# test server\n"
                     "kylin.job.scheduler.poll-interval-second: 1\n"
                     "qilin.step.kill-grace-ms: 2s\n"
                     "qilin.log.level: debug\n");
    snprintf(g_config_arg, sizeof g_config_arg, "%s", path);
    /* The ad-hoc tests give their own shell steps: this server allows them (off by default,
     * tested in test_security.c). */
    const char *args[32] = {"--config",      g_config_arg, "--set",
                            g_templates_arg, "--set",      "qilin.adhoc.allow-commands=true"};
    size_t n = 6;
    for (size_t i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    qd_start(&Q, args);
}

static void setup(void) {
    start_with(NULL);
}

/* Replaces the default server of setup() with one started with extra arguments. */
static void restart_with(const char *const *extra) {
    qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
    start_with(extra);
}

/* Starts the server again on the data of the one setup() started (after qd_stop_ok). Retention
 * is off: the tests that restart put jobs that ended long ago into the store. */
static void start_again(void) {
    const char *args[] = {"--config", g_config_arg,
                          "--set",    g_templates_arg,
                          "--set",    "qilin.adhoc.allow-commands=true",
                          "--set",    "qilin.retention.interval-ms=0",
                          NULL};
    qd_start(&Q, args);
}

static void teardown(void) {
    if (Q.pid > 0)
        qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
}

TestSuite(rest, .init = setup, .fini = teardown, .timeout = 120);

/* ---- projects, the envelope, paging ---- */

Test(rest, projects_envelope_paging_and_accept) {
    json_t *p =
        api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\",\"description\":\"d\"}");
    cr_assert_str_eq(jstr(p, "name"), "p1");
    cr_assert_str_eq(jstr(p, "description"), "d");
    cr_assert_gt(jint(p, "create_time"), 1600000000000LL);
    cr_assert(json_is_false(json_object_get(p, "auto_segment_build_enabled")));
    json_decref(p);
    api_err(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}", 409, "QL-00002",
            "already exists");
    api_err(&Q, "POST", "/kylin/api/projects", "{\"name\":\"bad name\"}", 400, "QL-00003", "name");
    for (int i = 0; i < 24; i++) {
        char body[64];
        snprintf(body, sizeof body, "{\"name\":\"q%02d\"}", i);
        json_decref(api_ok(&Q, "POST", "/kylin/api/projects", body));
    }
    json_t *d = api_ok(&Q, "GET", "/kylin/api/projects", NULL);
    cr_assert_eq(jint(d, "total_size"), 25);
    cr_assert_eq(jint(d, "offset"), 0);
    cr_assert_eq(jint(d, "limit"), 10);
    cr_assert_eq(json_array_size(json_object_get(d, "value")), 10);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/projects?page_offset=2&page_size=10", NULL);
    cr_assert_eq(jint(d, "total_size"), 25);
    cr_assert_eq(jint(d, "offset"), 2);
    cr_assert_eq(json_array_size(json_object_get(d, "value")), 5);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "value"), 4), "name"), "q23");
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/projects?project=Q1", NULL);
    cr_assert_eq(jint(d, "total_size"), 10); /* q10..q19, case-insensitive substring */
    json_decref(d);
    api_err(&Q, "GET", "/kylin/api/projects?page_size=0", NULL, 400, "QL-00003", "page_size");
    api_err(&Q, "GET", "/kylin/api/projects?page_size=5000", NULL, 400, "QL-00003",
            "qilin.api.page-size-max");
    api_err(&Q, "GET", "/kylin/api/projects?page_offset=x", NULL, 400, "QL-00003", "page_offset");

    static const char *const accepts[] = {
        "Accept: application/vnd.apache.kylin-v4-public+json",
        "Accept: application/vnd.apache.kylin-v4+json",
        "Accept: application/json",
        "Accept: text/html, application/json;q=0.9",
        "Accept: */*",
    };
    for (size_t i = 0; i < sizeof accepts / sizeof accepts[0]; i++) {
        const char *h[] = {accepts[i], NULL};
        resp_t r = http_req(&Q, "GET", "/kylin/api/projects", NULL, NULL, h);
        cr_assert_eq(r.status, 200, "%s: %ld", accepts[i], r.status);
        cr_assert_str_eq(r.ctype, "application/json;charset=utf-8");
        resp_free(&r);
    }
    const char *h[] = {"Accept: text/html", NULL};
    resp_t r = http_req(&Q, "GET", "/kylin/api/projects", NULL, NULL, h);
    cr_assert_eq(r.status, 406);
    resp_free(&r);
}

/* ---- errors ---- */

Test(rest, bad_input_is_400_naming_the_problem) {
    make_model(&Q, "p1", "m1", NULL);
    const char *seg = "/kylin/api/models/m1/segments";
    api_err(&Q, "POST", seg, "{\"project\":", 400, "QL-00003", "malformed JSON");
    api_err(&Q, "POST", seg, "[1,2]", 400, "QL-00003", "expected a JSON object");
    api_err(&Q, "POST", seg, "", 400, "QL-00003", "JSON object");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"project\":\"p1\"}", 400, "QL-00003",
            "duplicate");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":1,\"end\":2,\"colour\":1}", 400,
            "QL-00003", "unknown field 'colour'");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":{},\"end\":2}", 400, "QL-00003",
            "field 'start'");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":\"12a\",\"end\":2}", 400, "QL-00003",
            "start");
    api_err(&Q, "POST", seg, "{\"project\":7,\"start\":1,\"end\":2}", 400, "QL-00003",
            "field 'project': expected a string");
    /* Kylin reads a priority's digits as its integer, nothing else. */
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":1,\"end\":2,\"priority\":\"x1\"}", 400,
            "QL-00003", "priority");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":1,\"end\":2,\"priority\":9}", 400,
            "QL-00003", "priority");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":5,\"end\":5}", 400, "QL-00003",
            "not earlier than end");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":\"9\",\"end\":\"3\"}", 400, "QL-00003",
            "not earlier than end");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\"}", 400, "QL-00014", "needs start and end");
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":1}", 400, "QL-00014", "end");
    /* Empty after normalization with yyyy-MM-dd: both ends fall on the same day. */
    api_err(&Q, "POST", seg, "{\"project\":\"p1\",\"start\":1000,\"end\":2000}", 400, "QL-00015",
            "normalization");

    /* auto_segment_build: stored only if valid, and the message names the field. */
    const char *cfg = "/kylin/api/models/m1/segment_config";
    api_err(&Q, "PUT", cfg,
            "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,\"trigger_time\":"
            "\"25:00:00\",\"logical_date_offset_days\":1,\"data_range_start_time\":\"00:00:00\","
            "\"data_range_end_time\":\"24:00:00\"}}",
            400, "QL-00003", "trigger_time");
    api_err(&Q, "PUT", cfg,
            "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,\"trigger_time\":"
            "\"01:00:00\",\"logical_date_offset_days\":0,\"data_range_start_time\":\"00:00:00\","
            "\"data_range_end_time\":\"24:00:00\"}}",
            400, "QL-00003", "logical_date_offset_days");
    api_err(&Q, "PUT", cfg,
            "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,\"trigger_time\":"
            "\"01:00:00\",\"logical_date_offset_days\":1,\"data_range_start_time\":\"10:00:00\","
            "\"data_range_end_time\":\"09:00:00\"}}",
            400, "QL-00003", "data_range_start_time");
    api_err(&Q, "PUT", cfg,
            "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,\"trigger\":\"x\"}}", 400,
            "QL-00003", "unknown field 'trigger'");
    json_t *models = api_ok(&Q, "GET", "/kylin/api/models?project=p1", NULL);
    json_t *m = json_array_get(json_object_get(models, "value"), 0);
    cr_assert(
        json_is_null(json_object_get(json_object_get(m, "segment_config"), "auto_segment_build")));
    json_decref(models);

    api_err(&Q, "PUT", "/kylin/api/projects/p1/config", "{\"kylin.no.such.key\":\"1\"}", 400,
            "QL-00003", "kylin.no.such.key");
    api_err(&Q, "PUT", "/kylin/api/projects/p1/config", "{\"kylin.web.timezone\":\"Mars/Base\"}",
            400, "QL-00003", "kylin.web.timezone");
    api_err(&Q, "PUT", "/kylin/api/projects/p1/config", "{\"qilin.server.listen\":\"x:1\"}", 400,
            "QL-00003", "cannot override");
    api_err(&Q, "PUT", "/kylin/api/jobs/status",
            "{\"job_ids\":[\"00000000-0000-0000-0000-000000000001\"],\"action\":\"JUMP\"}", 400,
            "QL-00003", "JUMP");
    api_err(&Q, "PUT", "/kylin/api/jobs/status", "{\"job_ids\":[\"nope\"],\"action\":\"PAUSE\"}",
            400, "QL-00003", "job_ids[0]");
    api_err(&Q, "GET", "/kylin/api/jobs?statuses=SLEEPING", NULL, 400, "QL-00003", "SLEEPING");
    api_err(&Q, "GET", "/kylin/api/jobs?time_filter=7", NULL, 400, "QL-00003", "time_filter");
    api_err(&Q, "GET", "/kylin/api/jobs?sort_by=colour", NULL, 400, "QL-00003", "sort_by");
    api_err(&Q, "POST", "/kylin/api/models",
            "{\"project\":\"p1\",\"name\":\"m2\",\"partition_desc\":{\"partition_date_column\":"
            "\"DT\",\"partition_date_format\":\"yyyy-MM-dd'\"}}",
            400, "QL-00003", "partition_date_format");
    api_err(&Q, "POST", "/kylin/api/models",
            "{\"project\":\"p1\",\"name\":\"m2\",\"model_type\":\"CUBE\"}", 400, "QL-00003",
            "model_type");
}

Test(rest, unknown_objects_are_404) {
    make_model(&Q, "p1", "m1", NULL);
    api_err(&Q, "GET", "/kylin/api/models/m1/segments?project=nope", NULL, 404, "QL-00001",
            "project 'nope'");
    api_err(&Q, "GET", "/kylin/api/models/zz/segments?project=p1", NULL, 404, "QL-00001",
            "model 'zz'");
    api_err(&Q, "POST", "/kylin/api/models/zz/segments",
            "{\"project\":\"p1\",\"start\":1,\"end\":2}", 404, "QL-00001", "model 'zz'");
    api_err(&Q, "DELETE",
            "/kylin/api/models/m1/segments?project=p1&ids=00000000-0000-0000-0000-000000000009",
            NULL, 404, "QL-00001", "segment");
    api_err(&Q, "GET", "/kylin/api/jobs/00000000-0000-0000-0000-000000000009/detail?project=p1",
            NULL, 404, "QL-00001", "not found");
    api_err(&Q, "PUT", "/kylin/api/jobs/status",
            "{\"project\":\"p1\",\"job_ids\":[\"00000000-0000-0000-0000-000000000009\"],"
            "\"action\":\"PAUSE\"}",
            404, "QL-00001", "not found");
    api_err(&Q, "PUT", "/kylin/api/projects/nope/config", "{\"kylin.web.timezone\":\"UTC\"}", 404,
            "QL-00001", "nope");
    api_err(&Q, "PUT", "/kylin/api/models/zz/status", "{\"project\":\"p1\",\"status\":\"OFFLINE\"}",
            404, "QL-00001", "zz");
    api_err(&Q, "GET", "/kylin/api/models/zz/auto_segment_build/status?project=p1", NULL, 404,
            "QL-00001", "zz");
    api_err(&Q, "GET", "/kylin/api/no/such/thing", NULL, 404, NULL, NULL);
    api_err(&Q, "POST", "/kylin/api/models", "{\"project\":\"nope\",\"name\":\"m\"}", 404,
            "QL-00001", "nope");
}

Test(rest, conflicts_are_409) {
    make_model(&Q, "p1", "m1", NULL);
    api_err(&Q, "POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"m1\"}", 409,
            "QL-00002", "already exists");
    const char *id = build(&Q, "p1", "m1", D0, D0 + DAY);
    char job[64];
    snprintf(job, sizeof job, "%s", id);
    /* Overlap with the segment of the first build, whatever its state. */
    api_err(&Q, "POST", "/kylin/api/models/m1/segments",
            "{\"project\":\"p1\",\"start\":1788177600000,\"end\":1788264000000}", 409,
            "KE-010022202", "overlaps");
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"RESUME\"}",
             job);
    api_err(&Q, "PUT", "/kylin/api/jobs/status", body, 409, "QL-00007", "FINISHED");
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"PAUSE\"}",
             job);
    api_err(&Q, "PUT", "/kylin/api/jobs/status", body, 409, "QL-00007", "PAUSE");

    /* A build in progress (slow template): its NEW segment blocks overlaps and deletes. */
    make_model(&Q, "p1", "slow1", "slowbuild");
    const char *a = build(&Q, "p1", "slow1", D0, D0 + DAY);
    char ja[64];
    snprintf(ja, sizeof ja, "%s", a);
    wait_job_state(&Q, "p1", ja, "RUNNING", 20000);
    api_err(&Q, "POST", "/kylin/api/models/slow1/segments",
            "{\"project\":\"p1\",\"start\":1788134400000,\"end\":1788220800000}", 409,
            "KE-010022202", NULL);
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/slow1/segments?project=p1", NULL);
    json_t *s0 = json_array_get(json_object_get(segs, "value"), 0);
    cr_assert_str_eq(jstr(s0, "status"), "NEW");
    /* The NEW segment of a running build may not be refreshed or deleted. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}",
             jstr(s0, "id"));
    resp_t r = http_req(&Q, "PUT", "/kylin/api/models/slow1/segments", body, NULL, NULL);
    cr_assert_eq(r.status, 409, "%s", r.body);
    resp_free(&r);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/models/slow1/segments?project=p1&ids=%s",
             jstr(s0, "id"));
    api_err(&Q, "DELETE", path, NULL, 409, "QL-00018", NULL);
    json_decref(segs);
    action_p1(ja, "DISCARD");
}

Test(rest, job_conflict_is_ke_010032206) {
    /* Builds are fast for this model's template set, merges and refreshes wait. */
    make_model(&Q, "p1", "m1", "slow");
    char j0[64], j1[64];
    snprintf(j0, sizeof j0, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    snprintf(j1, sizeof j1, "%s", build(&Q, "p1", "m1", D0 + DAY, D0 + 2 * DAY));
    wait_job_state(&Q, "p1", j0, "SUCCEED", 20000);
    wait_job_state(&Q, "p1", j1, "SUCCEED", 20000);
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 2);
    char s0[64], s1[64], body[512];
    snprintf(s0, sizeof s0, "%s", jstr(json_array_get(json_object_get(segs, "value"), 0), "id"));
    snprintf(s1, sizeof s1, "%s", jstr(json_array_get(json_object_get(segs, "value"), 1), "id"));
    json_decref(segs);
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"MERGE\",\"ids\":[\"%s\",\"%s\"]}",
             s0, s1);
    json_t *d = api_ok(&Q, "PUT", "/kylin/api/models/m1/segments", body);
    char mj[64];
    snprintf(mj, sizeof mj, "%s", jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    /* While the merge lives, its sources cannot be refreshed or merged again. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}", s1);
    api_err(&Q, "PUT", "/kylin/api/models/m1/segments", body, 409, "KE-010032206",
            "a building job for the same object already exists");
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"MERGE\",\"ids\":[\"%s\",\"%s\"]}",
             s0, s1);
    api_err(&Q, "PUT", "/kylin/api/models/m1/segments", body, 409, "KE-010032206", NULL);
    wait_job_state(&Q, "p1", mj, "RUNNING", 20000);
    action_p1(mj, "DISCARD");
    /* Discarding removed the merge's NEW segment; the sources are free again. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}", s1);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/models/m1/segments", body));
}

Test(rest, body_over_the_limit_is_413) {
    const char *extra[] = {"--set", "qilin.http.max-body-bytes=1KiB", NULL};
    restart_with(extra);
    char body[4096];
    memset(body, ' ', sizeof body - 1);
    body[sizeof body - 1] = '\0';
    memcpy(body, "{\"name\":\"p1\"}", 13);
    resp_t r = http_req(&Q, "POST", "/kylin/api/projects", body, NULL, NULL);
    cr_assert_eq(r.status, 413);
    cr_assert_not_null(r.json);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "code")), "999");
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "error_code")), "QL-00021");
    resp_free(&r);
}

/* ---- auth ---- */

Test(rest, auth_is_required_on_the_api_only) {
    resp_t r = http_req(&Q, "GET", "/kylin/api/projects", NULL, "", NULL);
    cr_assert_eq(r.status, 401);
    cr_assert(strstr(r.www_auth, "Basic"), "WWW-Authenticate: %s", r.www_auth);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "error_code")), "QL-00022");
    resp_free(&r);
    r = http_req(&Q, "GET", "/kylin/api/projects", NULL, "ADMIN:wrong", NULL);
    cr_assert_eq(r.status, 401);
    resp_free(&r);
    char lower[300];
    snprintf(lower, sizeof lower, "admin%s", strchr(generated_admin(&Q), ':'));
    r = http_req(&Q, "GET", "/kylin/api/projects", NULL, lower, NULL);
    cr_assert_eq(r.status, 200, "user names match case-insensitively");
    resp_free(&r);
    r = http_req(&Q, "GET", "/healthz", NULL, "", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok");
    resp_free(&r);
    r = http_req(&Q, "GET", "/metrics", NULL, "", NULL);
    cr_assert_eq(r.status, 401, "qilin.metrics.require-auth is true by default");
    resp_free(&r);
}

/* ---- builds ---- */

Test(rest, a_build_runs_to_ready_with_shell_steps) {
    make_model(&Q, "p1", "m1", NULL);
    char job[64];
    /* Times may be numeric strings. */
    json_t *d = api_ok(&Q, "POST", "/kylin/api/models/m1/segments",
                       "{\"project\":\"p1\",\"start\":\"1788134400000\",\"end\":\"1788220800000\","
                       "\"priority\":1}");
    snprintf(job, sizeof job, "%s", jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    json_t *j = find_job(&Q, "p1", job);
    cr_assert_str_eq(jstr(j, "job_status"), "FINISHED");
    cr_assert_str_eq(jstr(j, "job_name"), "INC_BUILD");
    cr_assert_str_eq(jstr(j, "project"), "p1");
    cr_assert_str_eq(jstr(j, "target_subject"), "m1");
    cr_assert_str_eq(jstr(j, "submitter"), "ADMIN");
    cr_assert_eq(jint(j, "priority"), 1);
    cr_assert_eq(jint(j, "data_range_start"), D0);
    cr_assert_eq(jint(j, "data_range_end"), D0 + DAY);
    cr_assert_gt(jint(j, "exec_start_time"), 0);
    cr_assert_geq(jint(j, "exec_end_time"), jint(j, "exec_start_time"));
    cr_assert_eq(jint(j, "duration"), jint(j, "exec_end_time") - jint(j, "exec_start_time"));
    cr_assert_eq(json_array_size(json_object_get(j, "target_segments")), 1);
    char seg[64];
    snprintf(seg, sizeof seg, "%s",
             json_string_value(json_array_get(json_object_get(j, "target_segments"), 0)));
    json_decref(j);

    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 1);
    json_t *s = json_array_get(json_object_get(segs, "value"), 0);
    cr_assert_str_eq(jstr(s, "id"), seg);
    cr_assert_str_eq(jstr(s, "status"), "READY");
    cr_assert_str_eq(jstr(s, "name"), "20260831000000_20260901000000");
    cr_assert_eq(jint(s, "start"), D0);
    cr_assert_eq(jint(s, "end"), D0 + DAY);
    cr_assert_gt(jint(s, "last_build_time"), 0);
    json_decref(segs);
    segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1&status=NEW", NULL);
    cr_assert_eq(jint(segs, "total_size"), 0);
    json_decref(segs);

    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail?project=p1", job);
    json_t *steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_eq(json_array_size(steps), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *st = json_array_get(steps, i);
        char want[80];
        snprintf(want, sizeof want, "%s_%02zu", job, i);
        cr_assert_str_eq(jstr(st, "id"), want);
        cr_assert_eq(jint(st, "sequence_id"), (json_int_t)i);
        cr_assert_str_eq(jstr(st, "step_status"), "FINISHED");
        cr_assert(json_is_null(json_object_get(st, "failed_msg")));
        cr_assert_gt(jint(st, "exec_start_time"), 0);
    }
    cr_assert_str_eq(jstr(json_array_get(steps, 1), "name"), "Load data to index");
    json_decref(steps);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_01/output?project=p1", job, job);
    json_t *out = api_ok(&Q, "GET", path, NULL);
    cr_assert_str_eq(jstr(out, "job_id"), job);
    cr_assert(strstr(jstr(out, "cmd_output"), "building m1 [2026-08-31, 2026-09-01)"), "%s",
              jstr(out, "cmd_output"));
    json_decref(out);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_07/output", job, job);
    api_err(&Q, "GET", path, NULL, 404, "QL-00001", NULL);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail?project=other", job);
    api_err(&Q, "GET", path, NULL, 404, "QL-00001", NULL);
}

Test(rest, merge_refresh_and_delete) {
    make_model(&Q, "p1", "m1", NULL);
    char j0[64], j1[64];
    snprintf(j0, sizeof j0, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    snprintf(j1, sizeof j1, "%s", build(&Q, "p1", "m1", D0 + DAY, D0 + 2 * DAY));
    wait_job_state(&Q, "p1", j0, "SUCCEED", 20000);
    wait_job_state(&Q, "p1", j1, "SUCCEED", 20000);
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    char s0[64], s1[64], body[512];
    snprintf(s0, sizeof s0, "%s", jstr(json_array_get(json_object_get(segs, "value"), 0), "id"));
    snprintf(s1, sizeof s1, "%s", jstr(json_array_get(json_object_get(segs, "value"), 1), "id"));
    json_decref(segs);
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"MERGE\",\"ids\":[\"%s\"]}", s0);
    api_err(&Q, "PUT", "/kylin/api/models/m1/segments", body, 400, "QL-00003", "two");
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"SPLIT\",\"ids\":[\"%s\"]}", s0);
    api_err(&Q, "PUT", "/kylin/api/models/m1/segments", body, 400, "QL-00003", "SPLIT");
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"MERGE\",\"ids\":[\"%s\",\"%s\"]}",
             s0, s1);
    json_t *d = api_ok(&Q, "PUT", "/kylin/api/models/m1/segments", body);
    json_t *jm = json_array_get(json_object_get(d, "jobs"), 0);
    cr_assert_str_eq(jstr(jm, "job_name"), "INDEX_MERGE");
    char mj[64];
    snprintf(mj, sizeof mj, "%s", jstr(jm, "job_id"));
    json_decref(d);
    wait_job_state(&Q, "p1", mj, "SUCCEED", 20000);
    segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 1);
    json_t *merged = json_array_get(json_object_get(segs, "value"), 0);
    cr_assert_eq(jint(merged, "start"), D0);
    cr_assert_eq(jint(merged, "end"), D0 + 2 * DAY);
    cr_assert_str_eq(jstr(merged, "status"), "READY");
    char sm[64];
    snprintf(sm, sizeof sm, "%s", jstr(merged, "id"));
    json_decref(segs);

    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}", sm);
    d = api_ok(&Q, "PUT", "/kylin/api/models/m1/segments", body);
    jm = json_array_get(json_object_get(d, "jobs"), 0);
    cr_assert_str_eq(jstr(jm, "job_name"), "INDEX_REFRESH");
    snprintf(mj, sizeof mj, "%s", jstr(jm, "job_id"));
    json_decref(d);
    wait_job_state(&Q, "p1", mj, "SUCCEED", 20000);
    segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 1);
    char sr[64];
    snprintf(sr, sizeof sr, "%s", jstr(json_array_get(json_object_get(segs, "value"), 0), "id"));
    cr_assert_str_neq(sr, sm, "a refresh replaces the segment");
    json_decref(segs);

    char path[256];
    snprintf(path, sizeof path, "/kylin/api/models/m1/segments?project=p1&ids=%s", sr);
    json_t *e = api_ok(&Q, "DELETE", path, NULL);
    cr_assert_str_eq(json_string_value(e), "");
    json_decref(e);
    segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 0);
    json_decref(segs);
    api_err(&Q, "DELETE", "/kylin/api/models/m1/segments?project=p1", NULL, 400, "QL-00003", "ids");
    api_err(&Q, "DELETE", "/kylin/api/models/m1/segments?project=p1&ids=zz", NULL, 400, "QL-00003",
            "ids[0]");
}

/* Kylin's full build (docs/rest.md, Full-load models): one segment over the whole range, the
 * range of the request ignored; a second one is the overlap error, also once the first is
 * built; a refresh rebuilds it. */
Test(rest, a_full_load_model_builds_one_full_segment) {
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
    json_decref(api_ok(&Q, "POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"full\"}"));
    json_t *d = api_ok(&Q, "POST", "/kylin/api/models/full/segments", "{\"project\":\"p1\"}");
    char job[64];
    snprintf(job, sizeof job, "%s", jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"start\":%lld,\"end\":%lld}", D0, D0 + DAY);
    api_err(&Q, "POST", "/kylin/api/models/full/segments", body, 409, "KE-010022202", "overlaps");
    wait_job_state(&Q, "p1", job, "SUCCEED", 30000);
    api_err(&Q, "POST", "/kylin/api/models/full/segments", "{\"project\":\"p1\"}", 409,
            "KE-010022202", "overlaps");
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/full/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 1);
    json_t *s0 = json_array_get(json_object_get(segs, "value"), 0);
    cr_assert_str_eq(jstr(s0, "name"), "FULL_BUILD");
    cr_assert_eq(jint(s0, "start"), 0);
    cr_assert_eq(jint(s0, "end"), INT64_MAX);
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}",
             jstr(s0, "id"));
    json_decref(segs);
    d = api_ok(&Q, "PUT", "/kylin/api/models/full/segments", body);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_name"),
                     "INDEX_REFRESH");
    json_decref(d);
}

/* The ids of the model's segments in (start, end) order into ids (at most n); returns how many
 * there are (total_size). */
static size_t segment_ids(const char *model, char (*ids)[64], size_t n) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/models/%s/segments?project=p1&page_size=100", model);
    json_t *segs = api_ok(&Q, "GET", path, NULL);
    size_t total = (size_t)jint(segs, "total_size");
    for (size_t i = 0; i < n && i < json_array_size(json_object_get(segs, "value")); i++)
        snprintf(ids[i], 64, "%s", jstr(json_array_get(json_object_get(segs, "value"), i), "id"));
    json_decref(segs);
    return total;
}

static json_int_t jobs_total(const char *query) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs?%s", query);
    json_t *d = api_ok(&Q, "GET", path, NULL);
    json_int_t n = jint(d, "total_size");
    json_decref(d);
    return n;
}

Test(rest, a_refresh_of_several_segments_creates_one_job_per_id_or_none) {
    make_model(&Q, "p1", "m1", NULL);
    for (int i = 0; i < 3; i++) {
        char job[64];
        snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0 + i * DAY, D0 + (i + 1) * DAY));
        wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    }
    char s[3][64];
    cr_assert_eq(segment_ids("m1", s, 3), 3);
    char body[512];
    snprintf(body, sizeof body,
             "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\",\"%s\",\"%s\"]}", s[0], s[1],
             s[2]);
    json_t *d = api_ok(&Q, "PUT", "/kylin/api/models/m1/segments", body);
    json_t *jobs = json_object_get(d, "jobs");
    cr_assert_eq(json_array_size(jobs), 3, "one job per id");
    char rj[3][64];
    for (size_t i = 0; i < 3; i++) {
        cr_assert_str_eq(jstr(json_array_get(jobs, i), "job_name"), "INDEX_REFRESH");
        snprintf(rj[i], sizeof rj[i], "%s", jstr(json_array_get(jobs, i), "job_id"));
    }
    json_decref(d);
    cr_assert_str_neq(rj[0], rj[1]);
    cr_assert_str_neq(rj[1], rj[2]);
    cr_assert_str_neq(rj[0], rj[2]);
    /* The jobs are answered in the order of the ids: job i refreshes segment i. */
    for (int i = 0; i < 3; i++) {
        wait_job_state(&Q, "p1", rj[i], "SUCCEED", 20000);
        json_t *j = find_job(&Q, "p1", rj[i]);
        cr_assert_str_eq(jstr(j, "job_name"), "INDEX_REFRESH");
        cr_assert_eq(jint(j, "data_range_start"), D0 + i * DAY);
        cr_assert_eq(jint(j, "data_range_end"), D0 + (i + 1) * DAY);
        json_decref(j);
    }
    char after[3][64];
    cr_assert_eq(segment_ids("m1", after, 3), 3, "each refresh replaced its segment");
    for (int i = 0; i < 3; i++)
        cr_assert_str_neq(after[i], s[i]);
    cr_assert_eq(jobs_total("project=p1"), 6);

    /* All or none: a refresh whose last id cannot be refreshed creates no job for the ids
     * before it (their jobs were made first, in the same transaction). m2's refreshes wait. */
    make_model(&Q, "p1", "m2", "slow");
    for (int i = 0; i < 2; i++) {
        char job[64];
        snprintf(job, sizeof job, "%s", build(&Q, "p1", "m2", D0 + i * DAY, D0 + (i + 1) * DAY));
        wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    }
    char t[2][64];
    cr_assert_eq(segment_ids("m2", t, 2), 2);
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}", t[1]);
    d = api_ok(&Q, "PUT", "/kylin/api/models/m2/segments", body);
    char live[64];
    snprintf(live, sizeof live, "%s",
             jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    wait_job_state(&Q, "p1", live, "RUNNING", 20000);
    json_int_t before = jobs_total("project=p1");
    cr_assert_eq(before, 9);
    /* t[1] has a live refresh: a job conflict. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\",\"%s\"]}",
             t[0], t[1]);
    api_err(&Q, "PUT", "/kylin/api/models/m2/segments", body, 409, "KE-010032206", NULL);
    /* A well-formed id of no segment of the model. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\",\"%s\"]}",
             t[0], "00000000-0000-0000-0000-000000000009");
    api_err(&Q, "PUT", "/kylin/api/models/m2/segments", body, 404, "QL-00001", NULL);
    /* A segment of another model. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\",\"%s\"]}",
             t[0], after[0]);
    api_err(&Q, "PUT", "/kylin/api/models/m2/segments", body, 404, "QL-00001", NULL);
    /* The NEW segment of the live refresh. */
    json_t *news = api_ok(&Q, "GET", "/kylin/api/models/m2/segments?project=p1&status=NEW", NULL);
    cr_assert_eq(jint(news, "total_size"), 1);
    json_t *n0 = json_array_get(json_object_get(news, "value"), 0);
    cr_assert_eq(jint(n0, "start"), D0 + DAY);
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\",\"%s\"]}",
             t[0], jstr(n0, "id"));
    json_decref(news);
    api_err(&Q, "PUT", "/kylin/api/models/m2/segments", body, 409, "QL-00017", "NEW");
    cr_assert_eq(jobs_total("project=p1"), before, "no job was created");
    /* m2 still has its two segments and the NEW one of the live refresh, nothing for t[0]. */
    char now[4][64];
    cr_assert_eq(segment_ids("m2", now, 4), 3);
    news = api_ok(&Q, "GET", "/kylin/api/models/m2/segments?project=p1&status=NEW", NULL);
    cr_assert_eq(jint(news, "total_size"), 1);
    json_decref(news);
    /* t[0] alone can be refreshed: the refusals above were about the other id. */
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}", t[0]);
    d = api_ok(&Q, "PUT", "/kylin/api/models/m2/segments", body);
    char live0[64];
    snprintf(live0, sizeof live0, "%s",
             jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    action_p1(live, "DISCARD");
    action_p1(live0, "DISCARD");
}

/* ---- jobs ---- */

static const char *submit_adhoc(const char *body, const char *ctype) {
    static char id[64];
    const char *h[] = {ctype, NULL};
    resp_t r = http_req(&Q, "POST", "/kylin/api/jobs", body, NULL, ctype ? h : NULL);
    cr_assert_eq(r.status, 200, "%s", r.body);
    json_t *jobs = json_object_get(json_object_get(r.json, "data"), "jobs");
    cr_assert_eq(json_array_size(jobs), 1);
    snprintf(id, sizeof id, "%s", jstr(json_array_get(jobs, 0), "job_id"));
    resp_free(&r);
    return id;
}

Test(rest, job_actions_on_a_running_sleep_job) {
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
    char job[64];
    snprintf(job, sizeof job, "%s",
             submit_adhoc("{\"project\":\"p1\",\"type\":\"WAIT\",\"steps\":[{\"name\":\"nap\","
                          "\"kind\":\"sleep\",\"duration\":\"10m\"}]}",
                          NULL));
    wait_job_state(&Q, "p1", job, "RUNNING", 20000);
    json_t *j = find_job(&Q, "p1", job);
    cr_assert_str_eq(jstr(j, "job_status"), "RUNNING");
    cr_assert_gt(jint(j, "exec_start_time"), 0);
    cr_assert_eq(jint(j, "exec_end_time"), 0);
    json_decref(j);
    action_p1(job, "PAUSE");
    j = find_job(&Q, "p1", job);
    cr_assert_str_eq(jstr(j, "job_status"), "STOPPED", "answered after the commit");
    json_decref(j);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail", job);
    json_t *steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_str_eq(jstr(json_array_get(steps, 0), "step_status"), "PENDING",
                     "a paused step goes back to READY");
    json_decref(steps);
    action_p1(job, "RESUME");
    wait_job_state(&Q, "p1", job, "RUNNING", 20000);
    action_p1(job, "RESTART");
    wait_job_state(&Q, "p1", job, "RUNNING", 20000);
    action_p1(job, "DISCARD");
    j = find_job(&Q, "p1", job);
    cr_assert_str_eq(jstr(j, "job_status"), "DISCARDED");
    cr_assert_gt(jint(j, "exec_end_time"), 0);
    json_decref(j);
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"RESUME\"}",
             job);
    api_err(&Q, "PUT", "/kylin/api/jobs/status", body, 409, "QL-00007", "DISCARDED");
    snprintf(body, sizeof body,
             "{\"project\":\"p1\",\"job_ids\":[\"%s\",\"%s\"],\"action\":"
             "\"PAUSE\"}",
             job, job);
    api_err(&Q, "PUT", "/kylin/api/jobs/status", body, 400, "QL-00003", "twice");
}

Test(rest, adhoc_jobs_in_json_and_yaml_pass_their_params) {
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
    /* JSON, using the GREET template: the value reaches argv as one element and the env. */
    char j1[64];
    snprintf(j1, sizeof j1, "%s",
             submit_adhoc("{\"project\":\"p1\",\"type\":\"GREET\",\"priority\":1,"
                          "\"params\":{\"GREETING\":\"hello world; $(id)\"}}",
                          NULL));
    wait_job_state(&Q, "p1", j1, "SUCCEED", 20000);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_00/output", j1, j1);
    json_t *out = api_ok(&Q, "GET", path, NULL);
    cr_assert(strstr(jstr(out, "cmd_output"), "arg=hello world; $(id) env=hello world; $(id)"),
              "%s", jstr(out, "cmd_output"));
    json_decref(out);
    /* YAML with its own steps. */
    char j2[64];
    snprintf(j2, sizeof j2, "%s",
             submit_adhoc("project: p1\n"
                          "type: MY_EXPORT\n"
                          "params: {TABLE: sales}\n"
                          "steps:\n"
                          "  - name: export\n"
                          "    kind: shell\n"
                          "    argv: [/bin/echo, 'exporting ${TABLE}']\n"
                          "  - name: done\n"
                          "    kind: noop\n",
                          "Content-Type: application/yaml"));
    wait_job_state(&Q, "p1", j2, "SUCCEED", 20000);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_00/output", j2, j2);
    out = api_ok(&Q, "GET", path, NULL);
    cr_assert(strstr(jstr(out, "cmd_output"), "exporting sales"), "%s", jstr(out, "cmd_output"));
    json_decref(out);
    json_t *j = find_job(&Q, "p1", j2);
    cr_assert_str_eq(jstr(j, "job_name"), "MY_EXPORT");
    cr_assert_str_eq(jstr(j, "target_subject"), "");
    json_decref(j);

    const char *yh[] = {"Content-Type: application/yaml", NULL};
    resp_t r =
        http_req(&Q, "POST", "/kylin/api/jobs", "project: p1\ntype: X\nsteps: [\n", NULL, yh);
    cr_assert_eq(r.status, 400, "%s", r.body);
    cr_assert(strstr(r.body, "<request body>:"), "%s", r.body);
    resp_free(&r);
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"project\":\"p1\",\"type\":\"X\",\"colour\":1}", 400,
            "QL-00003", "colour");
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"type\":\"X\"}", 400, "QL-00003", "project");
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"project\":\"nope\",\"type\":\"GREET\"}", 404,
            "QL-00001", "nope");
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"project\":\"p1\",\"type\":\"INC_BUILD\"}", 400,
            "QL-00003", "segments");
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"project\":\"p1\",\"type\":\"GREET\"}", 400,
            "QL-00003", "GREETING");
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"project\":\"p1\",\"type\":\"NO_TEMPLATE\"}", 400,
            "QL-00003", "NO_TEMPLATE");
}

Test(rest, job_list_filters_sorting_and_paging) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p1", "other", NULL);
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p2\"}"));
    char last[64] = "";
    for (int i = 0; i < 12; i++) {
        snprintf(last, sizeof last, "%s", build(&Q, "p1", "m1", D0 + i * DAY, D0 + (i + 1) * DAY));
        wait_job_state(&Q, "p1", last, "SUCCEED", 20000);
    }
    char oj[64];
    snprintf(oj, sizeof oj, "%s", build(&Q, "p1", "other", D0, D0 + DAY));
    wait_job_state(&Q, "p1", oj, "SUCCEED", 20000);
    json_t *d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1", NULL);
    cr_assert_eq(jint(d, "total_size"), 13);
    cr_assert_eq(json_array_size(json_object_get(d, "value")), 10);
    /* Newest first by default: the last job finished last. */
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "value"), 0), "id"), oj);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&page_offset=1", NULL);
    cr_assert_eq(json_array_size(json_object_get(d, "value")), 3);
    cr_assert_eq(jint(d, "offset"), 1);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&reverse=false&page_size=1", NULL);
    cr_assert_eq(jint(d, "total_size"), 13);
    cr_assert_eq(jint(json_array_get(json_object_get(d, "value"), 0), "data_range_start"), D0);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&statuses=FINISHED,RUNNING", NULL);
    cr_assert_eq(jint(d, "total_size"), 13);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&statuses=ERROR&statuses=STOPPED", NULL);
    cr_assert_eq(jint(d, "total_size"), 0);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p2", NULL);
    cr_assert_eq(jint(d, "total_size"), 0);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs", NULL);
    cr_assert_eq(jint(d, "total_size"), 13);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&key=OTH", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "value"), 0), "id"), oj);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&job_names=INDEX_MERGE", NULL);
    cr_assert_eq(jint(d, "total_size"), 0);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&job_names=INC_BUILD&time_filter=0", NULL);
    cr_assert_eq(jint(d, "total_size"), 13);
    json_decref(d);
    d = api_ok(&Q, "GET",
               "/kylin/api/jobs?project=p1&sort_by=create_time&reverse=false&page_size=3"
               "&page_offset=1",
               NULL);
    cr_assert_eq(jint(d, "total_size"), 13);
    cr_assert_eq(jint(json_array_get(json_object_get(d, "value"), 0), "data_range_start"),
                 D0 + 3 * DAY);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1&sort_by=target_subject", NULL);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "value"), 0), "target_subject"),
                     "other");
    json_decref(d);
    api_err(&Q, "GET", "/kylin/api/jobs?project=nope", NULL, 404, "QL-00001", "nope");
}

Test(rest, a_failed_step_shows_its_failed_msg_in_the_job_detail) {
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
    char job[64];
    snprintf(job, sizeof job, "%s",
             submit_adhoc("{\"project\":\"p1\",\"type\":\"BREAKS\",\"steps\":["
                          "{\"name\":\"first\",\"kind\":\"noop\"},"
                          "{\"name\":\"exits 3\",\"kind\":\"shell\",\"argv\":[\"/bin/sh\",\"-c\","
                          "\"echo about to fail; exit 3\"]},"
                          "{\"name\":\"never\",\"kind\":\"noop\"}]}",
                          NULL));
    wait_job_state(&Q, "p1", job, "ERROR", 20000);
    json_t *j = find_job(&Q, "p1", job);
    cr_assert_str_eq(jstr(j, "job_status"), "ERROR");
    json_decref(j);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail?project=p1", job);
    json_t *steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_eq(json_array_size(steps), 3);
    json_t *ok = json_array_get(steps, 0), *bad = json_array_get(steps, 1),
           *next = json_array_get(steps, 2);
    cr_assert_str_eq(jstr(ok, "step_status"), "FINISHED");
    cr_assert(json_is_null(json_object_get(ok, "failed_msg")));
    cr_assert_str_eq(jstr(bad, "step_status"), "ERROR");
    cr_assert_str_eq(jstr(bad, "step_state"), "ERROR");
    cr_assert_str_eq(jstr(bad, "failed_msg"), "exit code 3");
    cr_assert_eq(jint(bad, "attempts"), 1);
    cr_assert_gt(jint(bad, "exec_start_time"), 0);
    cr_assert_geq(jint(bad, "exec_end_time"), jint(bad, "exec_start_time"));
    cr_assert_str_eq(jstr(next, "step_status"), "PENDING", "the step after the failure never ran");
    cr_assert(json_is_null(json_object_get(next, "failed_msg")));
    json_decref(steps);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_01/output?project=p1", job, job);
    json_t *out = api_ok(&Q, "GET", path, NULL);
    cr_assert(strstr(jstr(out, "cmd_output"), "about to fail"), "%s", jstr(out, "cmd_output"));
    json_decref(out);

    /* A step of kind fail: its message is the failed_msg. */
    snprintf(job, sizeof job, "%s",
             submit_adhoc("{\"project\":\"p1\",\"type\":\"BREAKS\",\"steps\":[{\"name\":\"f\","
                          "\"kind\":\"fail\",\"message\":\"no data for the day\"}]}",
                          NULL));
    wait_job_state(&Q, "p1", job, "ERROR", 20000);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail", job);
    steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_str_eq(jstr(json_array_get(steps, 0), "failed_msg"), "no data for the day");
    json_decref(steps);
}

/*
 * Writes finished INC_BUILD jobs of model p1/m1 straight into the store of the stopped server,
 * job i created ages[i] ms before now on [D0 + i days, D0 + i + 1 days), through the functions
 * the server's writer uses (ql_meta_submit_build, ql_job_force_finish). The server takes its
 * create times from the real clock, which a test cannot set: old jobs can only be written into
 * the store. ids gets the job ids.
 */
static void store_old_builds(const int64_t *ages, size_t n, char (*ids)[64]) {
    ql_err_t err = {0};
    char path[400];
    snprintf(path, sizeof path, "%s/jobs.yaml", Q.dir);
    ql_templates_t *t;
    int rc = ql_templates_load_file(path, &t, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    ql_job_steps_t steps;
    rc = ql_job_steps_from_template(t, NULL, "INC_BUILD", &steps, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    ql_store_opts_t so;
    ql_test_store_opts(Q.data, &so); /* the backend under test, the server's store */
    ql_store_t *store;
    rc = ql_store_open(&so, &store, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, true, &txn), 0);
    ql_model_t m;
    cr_assert_eq(ql_model_find(txn, "p1", "m1", 0, &m), 0);
    int64_t now = wall_ms();
    for (size_t i = 0; i < n; i++) {
        ql_job_spec_t spec = {.priority = QL_PRIORITY_DEFAULT,
                              .submitter = "ADMIN",
                              .now = now - ages[i],
                              .steps = steps.specs,
                              .n_steps = steps.n};
        ql_id_t job;
        int64_t start = D0 + (int64_t)i * DAY;
        rc = ql_meta_submit_build(txn, &m.id, start, start + DAY, &spec, &job, NULL, &err);
        cr_assert_eq(rc, 0, "%s", err.msg);
        rc = ql_job_force_finish(txn, &job, QL_SUCCEED, false, spec.now, &err);
        cr_assert_eq(rc, 0, "%s", err.msg);
        ql_id_format(&job, ids[i]);
    }
    ql_model_free(&m);
    cr_assert_eq(ql_txn_commit(txn), 0);
    ql_store_close(store);
    ql_job_steps_free(&steps);
    ql_templates_free(t);
}

static bool page_lists(const json_t *page, const char *id) {
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(page, "value"), i, j) {
        if (strcmp(jstr(j, "id"), id) == 0)
            return true;
    }
    return false;
}

Test(rest, job_list_time_filter_leaves_out_jobs_older_than_its_window) {
    make_model(&Q, "p1", "m1", NULL);
    qd_stop_ok(&Q, 20000);
    /* Each age is well inside one window and outside the narrower ones. */
    static const int64_t ages[] = {2 * 3600000LL, 3 * DAY, 20 * DAY, 200 * DAY, 500 * DAY};
    enum { N_OLD = sizeof ages / sizeof ages[0] };
    char ids[N_OLD][64];
    store_old_builds(ages, N_OLD, ids);
    start_again();
    char fresh[64];
    snprintf(fresh, sizeof fresh, "%s", build(&Q, "p1", "m1", D0 + 10 * DAY, D0 + 11 * DAY));
    wait_job_state(&Q, "p1", fresh, "SUCCEED", 20000);
    json_t *j = find_job(&Q, "p1", ids[4]);
    cr_assert_not_null(j, "the job written into the store is listed");
    cr_assert_lt(jint(j, "create_time"), wall_ms() - 400 * DAY);
    json_decref(j);

    static const int64_t windows[] = {DAY, 7 * DAY, 30 * DAY, 365 * DAY};
    /* The index walk in modify-time order, the sorted walk, and every project's jobs. */
    static const char *const variants[] = {"project=p1", "project=p1&sort_by=create_time",
                                           "project=p1&reverse=false", ""};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        for (int tf = 0; tf <= 4; tf++) {
            char path[256];
            snprintf(path, sizeof path, "/kylin/api/jobs?%s&time_filter=%d&page_size=100",
                     variants[v], tf);
            json_t *d = api_ok(&Q, "GET", path, NULL);
            json_int_t want = 1; /* the fresh build */
            for (size_t i = 0; i < N_OLD; i++) {
                bool in = tf == 4 || ages[i] < windows[tf];
                want += in;
                cr_assert_eq(page_lists(d, ids[i]), in, "%s: job %zu (age %lld ms) %s", path, i,
                             (long long)ages[i], in ? "missing" : "listed");
            }
            cr_assert(page_lists(d, fresh), "%s: the fresh build is missing", path);
            cr_assert_eq(jint(d, "total_size"), want, "%s", path);
            cr_assert_eq(json_array_size(json_object_get(d, "value")), (size_t)want, "%s", path);
            json_decref(d);
        }
    }
    /* No time_filter is all of them. */
    cr_assert_eq(jobs_total("project=p1"), N_OLD + 1);
}

/* ---- configuration endpoints and the dispatcher's status ---- */

Test(rest, project_and_model_configuration) {
    make_model(&Q, "p1", "m1", NULL);
    json_t *e = api_ok(&Q, "PUT", "/kylin/api/projects/p1/config",
                       "{\"kylin.web.timezone\":\"Asia/Shanghai\","
                       "\"kylin.job.max-concurrent-jobs\":4}");
    cr_assert_str_eq(json_string_value(e), "");
    json_decref(e);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p1/segment_config",
                       "{\"auto_segment_build_enabled\":true}"));
    api_err(&Q, "PUT", "/kylin/api/projects/p1/segment_config",
            "{\"auto_segment_build_enabled\":\"yes\"}", 400, "QL-00003",
            "auto_segment_build_enabled");
    json_t *d = api_ok(&Q, "GET", "/kylin/api/projects?project=p1", NULL);
    json_t *p = json_array_get(json_object_get(d, "value"), 0);
    json_t *ov = json_object_get(p, "override_kylin_properties");
    cr_assert_str_eq(jstr(ov, "kylin.web.timezone"), "Asia/Shanghai");
    cr_assert_str_eq(jstr(ov, "kylin.job.max-concurrent-jobs"), "4");
    cr_assert(json_is_true(json_object_get(p, "auto_segment_build_enabled")));
    json_decref(d);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p1/config",
                       "{\"kylin.job.max-concurrent-jobs\":null}"));
    d = api_ok(&Q, "GET", "/kylin/api/projects?project=p1", NULL);
    ov = json_object_get(json_array_get(json_object_get(d, "value"), 0),
                         "override_kylin_properties");
    cr_assert_null(json_object_get(ov, "kylin.job.max-concurrent-jobs"));
    json_decref(d);

    json_decref(api_ok(&Q, "PUT", "/kylin/api/models/m1/segment_config",
                       "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":false,"
                       "\"trigger_time\":\"01:00:00\",\"logical_date_offset_days\":1,"
                       "\"data_range_start_time\":\"00:00:00\",\"data_range_end_time\":"
                       "\"24:00:00\"}}"));
    /* Fields not given keep their stored values. */
    json_decref(api_ok(&Q, "PUT", "/kylin/api/models/m1/segment_config",
                       "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true}}"));
    api_err(&Q, "PUT", "/kylin/api/models/m1/segment_config",
            "{\"project\":\"p1\",\"auto_segment_build\":{\"data_range_end_time\":\"24:30:00\"}}",
            400, "QL-00003", "data_range_end_time");
    json_decref(api_ok(&Q, "PUT", "/kylin/api/models/m1/status",
                       "{\"project\":\"p1\",\"status\":\"OFFLINE\"}"));
    api_err(&Q, "PUT", "/kylin/api/models/m1/status", "{\"project\":\"p1\",\"status\":\"GONE\"}",
            400, "QL-00003", "GONE");
    api_err(&Q, "PUT", "/kylin/api/models/m1/status", "{\"status\":\"ONLINE\"}", 400, "QL-00003",
            "project");
    d = api_ok(&Q, "GET", "/kylin/api/models?project=p1&model_name=M", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    json_t *m = json_array_get(json_object_get(d, "value"), 0);
    cr_assert_str_eq(jstr(m, "status"), "OFFLINE");
    json_t *a = json_object_get(json_object_get(m, "segment_config"), "auto_segment_build");
    cr_assert(json_is_true(json_object_get(a, "enabled")));
    cr_assert_str_eq(jstr(a, "trigger_time"), "01:00:00");
    cr_assert_str_eq(jstr(a, "data_range_end_time"), "24:00:00");
    cr_assert_eq(jint(a, "logical_date_offset_days"), 1);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/models?project=p1&model_name=m&exact=true", NULL);
    cr_assert_eq(jint(d, "total_size"), 0);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/models", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    json_decref(d);
}

Test(rest, a_created_model_is_answered_with_its_fields) {
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
    json_t *m = api_ok(&Q, "POST", "/kylin/api/models",
                       "{\"project\":\"p1\",\"name\":\"orders\",\"model_type\":\"BATCH\","
                       "\"status\":\"OFFLINE\",\"partition_desc\":{\"partition_date_column\":"
                       "\"DT\",\"partition_date_format\":\"yyyyMMdd\"},\"multi_partition_desc\":"
                       "{\"columns\":[\"REGION\",\"SHOP\"]},\"job_template\":\"slow\"}");
    ql_id_t id;
    cr_assert_eq(ql_id_parse(jstr(m, "uuid"), &id), 0, "uuid: %s", jstr(m, "uuid"));
    cr_assert(!ql_id_is_zero(&id));
    cr_assert_eq(strlen(jstr(m, "uuid")), 36);
    cr_assert_str_eq(jstr(m, "name"), "orders");
    cr_assert_str_eq(jstr(m, "project"), "p1");
    cr_assert_str_eq(jstr(m, "status"), "OFFLINE");
    cr_assert_str_eq(jstr(m, "model_type"), "BATCH");
    json_t *pd = json_object_get(m, "partition_desc");
    cr_assert_str_eq(jstr(pd, "partition_date_column"), "DT");
    cr_assert_str_eq(jstr(pd, "partition_date_format"), "yyyyMMdd");
    json_t *cols = json_object_get(json_object_get(m, "multi_partition_desc"), "columns");
    cr_assert_eq(json_array_size(cols), 2);
    cr_assert_str_eq(json_string_value(json_array_get(cols, 0)), "REGION");
    cr_assert_str_eq(json_string_value(json_array_get(cols, 1)), "SHOP");
    cr_assert_str_eq(jstr(m, "job_template"), "slow");
    cr_assert(
        json_is_null(json_object_get(json_object_get(m, "segment_config"), "auto_segment_build")));
    cr_assert_gt(jint(m, "create_time"), 1600000000000LL);
    cr_assert_eq(jint(m, "last_modified"), jint(m, "create_time"));
    /* The answer is the model as stored. */
    json_t *d =
        api_ok(&Q, "GET", "/kylin/api/models?project=p1&model_name=orders&exact=true", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    cr_assert(json_equal(json_array_get(json_object_get(d, "value"), 0), m),
              "GET /models differs from the answer of POST /models");
    json_decref(d);

    /* The defaults: BATCH, ONLINE, full load, no multi-partition, the default template set. */
    json_t *f = api_ok(&Q, "POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"full\"}");
    cr_assert_str_neq(jstr(f, "uuid"), jstr(m, "uuid"));
    cr_assert_str_eq(jstr(f, "name"), "full");
    cr_assert_str_eq(jstr(f, "status"), "ONLINE");
    cr_assert_str_eq(jstr(f, "model_type"), "BATCH");
    cr_assert(json_is_null(json_object_get(f, "partition_desc")));
    cr_assert(json_is_null(json_object_get(f, "multi_partition_desc")));
    cr_assert_str_eq(jstr(f, "job_template"), "");
    json_decref(f);
    json_t *st = api_ok(&Q, "POST", "/kylin/api/models",
                        "{\"project\":\"p1\",\"name\":\"stream\",\"model_type\":\"STREAMING\"}");
    cr_assert_str_eq(jstr(st, "model_type"), "STREAMING");
    json_decref(st);
    json_decref(m);
    api_err(&Q, "POST", "/kylin/api/models",
            "{\"project\":\"p1\",\"name\":\"m3\",\"job_template\":\"nosuchset\"}", 400, "QL-00003",
            "job_template");
}

Test(rest, a_segment_config_stored_without_enabled_reads_back_disabled) {
    make_model(&Q, "p1", "m1", NULL);
    json_t *e = api_ok(&Q, "PUT", "/kylin/api/models/m1/segment_config",
                       "{\"project\":\"p1\",\"auto_segment_build\":{\"trigger_time\":"
                       "\"01:00:00\",\"logical_date_offset_days\":2,\"data_range_start_time\":"
                       "\"00:00:00\",\"data_range_end_time\":\"24:00:00\"}}");
    cr_assert_str_eq(json_string_value(e), "");
    json_decref(e);
    json_t *d = api_ok(&Q, "GET", "/kylin/api/models?project=p1", NULL);
    json_t *a = json_object_get(
        json_object_get(json_array_get(json_object_get(d, "value"), 0), "segment_config"),
        "auto_segment_build");
    cr_assert(json_is_object(a), "the config is stored");
    cr_assert(json_is_false(json_object_get(a, "enabled")), "enabled defaults to false");
    cr_assert_str_eq(jstr(a, "trigger_time"), "01:00:00");
    cr_assert_eq(jint(a, "logical_date_offset_days"), 2);
    cr_assert_str_eq(jstr(a, "data_range_start_time"), "00:00:00");
    cr_assert_str_eq(jstr(a, "data_range_end_time"), "24:00:00");
    json_decref(d);
}

Test(rest, auto_segment_build_status_shows_the_dispatchers_decision) {
    const char *extra[] = {"--set", "kylin.model.auto-segment-build.dispatcher-interval-ms=200ms",
                           NULL};
    restart_with(extra);
    make_model(&Q, "p1", "m1", NULL);
    json_t *s =
        api_ok(&Q, "GET", "/kylin/api/models/m1/auto_segment_build/status?project=p1", NULL);
    cr_assert_str_neq(jstr(s, "state"), "UNKNOWN");
    json_decref(s);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/models/m1/segment_config",
                       "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,"
                       "\"trigger_time\":\"00:00:00\",\"logical_date_offset_days\":1,"
                       "\"data_range_start_time\":\"00:00:00\",\"data_range_end_time\":"
                       "\"24:00:00\"}}"));
    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p1/segment_config",
                       "{\"auto_segment_build_enabled\":true}"));
    /* The dispatcher builds yesterday and then reports the cycle covered. */
    int64_t deadline = now_ms() + 30000;
    char state[64] = "";
    for (;;) {
        s = api_ok(&Q, "GET", "/kylin/api/models/m1/auto_segment_build/status?project=p1", NULL);
        snprintf(state, sizeof state, "%s", jstr(s, "state"));
        if (strcmp(state, "COVERED") == 0) {
            cr_assert_gt(jint(s, "target_end"), jint(s, "target_start"));
            cr_assert_eq(jint(s, "target_end") - jint(s, "target_start"), DAY);
            cr_assert_gt(jint(s, "occurrence"), 0);
            cr_assert_gt(jint(s, "evaluated_at"), 0);
            cr_assert_eq(json_array_size(json_object_get(s, "related_segments")), 1);
            json_decref(s);
            break;
        }
        json_decref(s);
        cr_assert(now_ms() < deadline, "still %s", state);
        poll_pause();
    }
    json_t *d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "value"), 0), "submitter"), "System");
    json_decref(d);
}

Test(rest, healthz_and_metrics) {
    make_model(&Q, "p1", "m1", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    api_err(&Q, "POST", "/kylin/api/models/m1/segments",
            "{\"project\":\"p1\",\"start\":1788134400000,\"end\":1788220800000}", 409,
            "KE-010022202", NULL);
    resp_t r = http_req(&Q, "GET", "/healthz", NULL, "", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok");
    resp_free(&r);
    r = http_req(&Q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert(strncmp(r.ctype, "text/plain", 10) == 0, "%s", r.ctype);
    static const char *const want[] = {
        "qilin_jobs{state=\"SUCCEED\"} 1\n",
        "qilin_jobs{state=\"READY\"} 0\n",
        "qilin_submissions_total{source=\"api\",type=\"INC_BUILD\"} 1\n",
        "qilin_submission_failures_total{source=\"api\"} 1\n",
        "# TYPE qilin_dispatcher_last_scan_duration_seconds gauge\n",
        "qilin_dispatcher_last_scan_cycles{state=\"COVERED\"} ",
        "qilin_api_requests_total{route=\"segments.build\",status=\"200\"} 1\n",
        "qilin_api_requests_total{route=\"segments.build\",status=\"409\"} 1\n",
        "qilin_api_requests_total{route=\"models.create\",status=\"200\"} 1\n",
        "qilin_store_used_bytes ",
        "qilin_store_file_bytes ",
        "qilin_scheduler_master 1\n",
        "qilin_auth_cache_hits_total ",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.body, want[i]), "/metrics lacks '%s':\n%s", want[i], r.body);
    resp_free(&r);
}
