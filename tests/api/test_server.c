/*
 * qilind as a process: start-up and its refusals (config errors with file:line, the default
 * password off loopback), server modes, graceful shutdown with a running job and its resumption,
 * the second signal, two servers on one data directory (master and standby), configured users
 * with the credentials cache, and a build with the shipped conf/jobs.yaml.
 */
#include "tests/api/rest_util.h"

#include "http/ql_auth.h"

static qd_t Q, Q2;

static void teardown(void) {
    qd_cleanup(&Q2);
    qd_cleanup(&Q);
}

TestSuite(server, .fini = teardown, .timeout = 120);

#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */

/* Runs qilind with args to completion (it must exit within 20 s); returns its wait status. */
static int run_to_exit(qd_t *q, const char *const *args) {
    bool up = qd_spawn(q, args);
    cr_assert(!up, "qilind started, but it should have refused");
    cr_assert(qd_wait_exit(q, 20000));
    return q->exit_status;
}

static char *tmp_path(const qd_t *q, const char *name) {
    return path_in(q->dir, name);
}

/* ---- start-up refusals ---- */

Test(server, a_config_error_stops_start_up_with_file_and_line) {
    qd_init(&Q);
    char *cfg = tmp_path(&Q, "qilin.yaml");
    write_file(cfg, "# a config\n"
                    "qilin.log.level: info\n"
                    "qilin.server.lisen: 127.0.0.1:0\n");
    const char *args[] = {"--config", cfg, "--data", Q.data, NULL};
    int st = run_to_exit(&Q, args);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d", st);
    char want[512];
    snprintf(want, sizeof want, "%s:3:", cfg);
    assert_file_contains(Q.log, want);
    assert_file_contains(Q.log, "qilin.server.listen"); /* the suggestion */

    /* A bad value names the key; --set errors name the argument. */
    write_file(cfg, "kylin.job.max-concurrent-jobs: lots\n");
    st = run_to_exit(&Q, args);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    snprintf(want, sizeof want, "%s:1:", cfg);
    cr_assert(file_contains(Q.log, want));
    const char *set_args[] = {"--data", Q.data, "--set", "no.such.key=1", NULL};
    st = run_to_exit(&Q, set_args);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_file_contains(Q.log, "--set no.such.key=1");
    /* A missing template file is a start-up error too. */
    const char *tmpl_args[] = {"--data", Q.data,
                               "--set",  "qilin.jobs.templates=/nonexistent.yaml",
                               "--set",  "qilin.server.listen=127.0.0.1:0",
                               NULL};
    st = run_to_exit(&Q, tmpl_args);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_file_contains(Q.log, "/nonexistent.yaml");
}

Test(server, the_default_password_is_refused_off_loopback) {
    qd_init(&Q);
    const char *args[] = {"--data", Q.data, "--set", "qilin.server.listen=0.0.0.0:0", NULL};
    int st = run_to_exit(&Q, args);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    assert_file_contains(Q.log, "qilin passwd");
    assert_file_contains(Q.log, "qilin.server.users");
}

Test(server, help_version_and_print_config) {
    qd_init(&Q);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd %s && %s --help | grep -q -- --print-config", Q.dir, QILIND);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s --version | grep -q '^qilind '", QILIND);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "cd %s && %s --data /x/y --set kylin.job.retry=2 --print-config > out.yaml", Q.dir,
             QILIND);
    cr_assert_eq(system(cmd), 0);
    char *out = read_file(tmp_path(&Q, "out.yaml"));
    cr_assert(strstr(out, "kylin.job.retry: 2"), "%s", out);
    cr_assert(strstr(out, "/x/y"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s --bogus 2>/dev/null", QILIND);
    cr_assert_neq(system(cmd), 0);
}

/* ---- modes ---- */

Test(server, a_query_server_serves_reads_and_refuses_writes) {
    qd_init(&Q);
    /* Make some data with a normal server first. */
    qd_start(&Q, NULL);
    make_model(&Q, "p1", "m1", NULL);
    qd_stop_ok(&Q, 20000);
    const char *args[] = {"--set", "kylin.server.mode=query", NULL};
    qd_start(&Q, args);
    cr_assert(file_contains(Q.log, "mode query: no scheduler and no dispatcher"));
    json_t *d = api_ok(&Q, "GET", "/kylin/api/models?project=p1", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    json_decref(d);
    json_decref(api_ok(&Q, "GET", "/kylin/api/jobs", NULL));
    json_decref(api_ok(&Q, "GET", "/kylin/api/projects", NULL));
    json_decref(api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL));
    api_err(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p2\"}", 503, "QL-00020", "query");
    api_err(&Q, "POST", "/kylin/api/models/m1/segments",
            "{\"project\":\"p1\",\"start\":1788134400000,\"end\":1788220800000}", 503, "QL-00020",
            "query");
    api_err(&Q, "PUT", "/kylin/api/jobs/status",
            "{\"job_ids\":[\"00000000-0000-0000-0000-000000000001\"],\"action\":\"PAUSE\"}", 503,
            "QL-00020", "query");
    api_err(&Q, "PUT", "/kylin/api/projects/p1/config", "{\"kylin.web.timezone\":\"UTC\"}", 503,
            "QL-00020", "query");
    api_err(&Q, "POST", "/kylin/api/jobs", "{\"project\":\"p1\",\"type\":\"X\"}", 503, "QL-00020",
            NULL);
    resp_t r = http_req(&Q, "GET", "/kylin/api/models/m1/auto_segment_build/status?project=p1",
                        NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(json_string_value(json_object_get(r.json, "msg")), "no dispatcher"), "%s",
              r.body);
    resp_free(&r);
    r = http_req(&Q, "GET", "/healthz", NULL, "", NULL);
    cr_assert_eq(r.status, 200);
    resp_free(&r);
    qd_stop_ok(&Q, 20000);
}

/* Every write route of a query server: its answer is 503 QL-00020 naming the mode, and it
 * changes nothing. The bodies are valid ones, which a job server would accept. */
Test(server, a_query_server_refuses_every_write_route_and_serves_job_reads) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    make_model(&Q, "p1", "m1", NULL);
    char job[2][64];
    for (int i = 0; i < 2; i++) {
        snprintf(job[i], sizeof job[i], "%s",
                 build(&Q, "p1", "m1", D0 + i * DAY, D0 + (i + 1) * DAY));
        wait_job_state(&Q, "p1", job[i], "SUCCEED", 20000);
    }
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    char s0[64], s1[64];
    snprintf(s0, sizeof s0, "%s", jstr(json_array_get(json_object_get(segs, "value"), 0), "id"));
    snprintf(s1, sizeof s1, "%s", jstr(json_array_get(json_object_get(segs, "value"), 1), "id"));
    json_decref(segs);
    qd_stop_ok(&Q, 20000);

    const char *args[] = {"--set", "kylin.server.mode=query", NULL};
    qd_start(&Q, args);
    char refresh[256], merge[256], del[256], action[256];
    snprintf(refresh, sizeof refresh, "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"%s\"]}",
             s0);
    snprintf(merge, sizeof merge, "{\"project\":\"p1\",\"type\":\"MERGE\",\"ids\":[\"%s\",\"%s\"]}",
             s0, s1);
    snprintf(del, sizeof del, "/kylin/api/models/m1/segments?project=p1&ids=%s", s0);
    snprintf(action, sizeof action,
             "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"RESTART\"}", job[0]);
    const struct {
        const char *method, *path, *body, *route;
    } writes[] = {
        {"POST", "/kylin/api/projects", "{\"name\":\"p2\"}", "projects.create"},
        {"PUT", "/kylin/api/projects/p1/config", "{\"kylin.web.timezone\":\"UTC\"}",
         "projects.config"},
        {"PUT", "/kylin/api/projects/p1/segment_config", "{\"auto_segment_build_enabled\":true}",
         "projects.segment_config"},
        {"POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"m2\"}", "models.create"},
        {"PUT", "/kylin/api/models/m1/segment_config",
         "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,\"trigger_time\":"
         "\"01:00:00\",\"logical_date_offset_days\":1,\"data_range_start_time\":\"00:00:00\","
         "\"data_range_end_time\":\"24:00:00\"}}",
         "models.segment_config"},
        {"PUT", "/kylin/api/models/m1/status", "{\"project\":\"p1\",\"status\":\"OFFLINE\"}",
         "models.status"},
        {"POST", "/kylin/api/models/m1/segments",
         "{\"project\":\"p1\",\"start\":1788307200000,\"end\":1788393600000}", "segments.build"},
        {"PUT", "/kylin/api/models/m1/segments", refresh, "segments.merge_refresh"},
        {"PUT", "/kylin/api/models/m1/segments", merge, "segments.merge_refresh"},
        {"DELETE", del, NULL, "segments.delete"},
        {"PUT", "/kylin/api/jobs/status", action, "jobs.status"},
        {"POST", "/kylin/api/jobs",
         "{\"project\":\"p1\",\"type\":\"NAP\",\"steps\":[{\"name\":\"n\",\"kind\":\"noop\"}]}",
         "jobs.submit"},
    };
    size_t n_writes = sizeof writes / sizeof writes[0];
    for (size_t i = 0; i < n_writes; i++)
        api_err(&Q, writes[i].method, writes[i].path, writes[i].body, 503, "QL-00020",
                "mode 'query'");

    /* Nothing changed. */
    json_t *d = api_ok(&Q, "GET", "/kylin/api/projects", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    json_t *p = json_array_get(json_object_get(d, "value"), 0);
    cr_assert(json_is_false(json_object_get(p, "auto_segment_build_enabled")));
    cr_assert_eq(json_object_size(json_object_get(p, "override_kylin_properties")), 0);
    json_decref(d);
    d = api_ok(&Q, "GET", "/kylin/api/models?project=p1", NULL);
    cr_assert_eq(jint(d, "total_size"), 1);
    json_t *m = json_array_get(json_object_get(d, "value"), 0);
    cr_assert_str_eq(jstr(m, "status"), "ONLINE");
    cr_assert(
        json_is_null(json_object_get(json_object_get(m, "segment_config"), "auto_segment_build")));
    json_decref(d);
    segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_eq(jint(segs, "total_size"), 2);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(segs, "value"), 0), "id"), s0);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(segs, "value"), 0), "status"), "READY");
    cr_assert_str_eq(jstr(json_array_get(json_object_get(segs, "value"), 1), "id"), s1);
    json_decref(segs);
    d = api_ok(&Q, "GET", "/kylin/api/jobs", NULL);
    cr_assert_eq(jint(d, "total_size"), 2);
    json_decref(d);
    json_t *j = find_job(&Q, "p1", job[0]);
    cr_assert_str_eq(jstr(j, "job_status"), "FINISHED");
    json_decref(j);

    /* Job detail and step output. */
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail?project=p1", job[0]);
    json_t *steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_gt(json_array_size(steps), 1);
    for (size_t i = 0; i < json_array_size(steps); i++)
        cr_assert_str_eq(jstr(json_array_get(steps, i), "step_status"), "FINISHED");
    json_decref(steps);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_01/output?project=p1", job[0], job[0]);
    json_t *out = api_ok(&Q, "GET", path, NULL);
    cr_assert_str_eq(jstr(out, "job_id"), job[0]);
    cr_assert(strstr(jstr(out, "cmd_output"), "building m1 segment"), "%s",
              jstr(out, "cmd_output"));
    json_decref(out);

    /* /metrics: the store's jobs, no scheduler, and every refusal counted under its route. */
    resp_t r = http_req(&Q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert(strncmp(r.ctype, "text/plain", 10) == 0, "%s", r.ctype);
    static const char *const want[] = {
        "qilin_jobs{state=\"SUCCEED\"} 2\n",
        "qilin_scheduler_master 0\n",
        "qilin_dispatcher_active 0\n",
        "qilin_api_requests_total{route=\"segments.merge_refresh\",status=\"503\"} 2\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(r.body, want[i]))
            cr_assert_fail("/metrics lacks '%s':\n%s", want[i], r.body);
    for (size_t i = 0; i < n_writes; i++) {
        char line[160];
        snprintf(line, sizeof line, "qilin_api_requests_total{route=\"%s\",status=\"503\"} ",
                 writes[i].route);
        if (!strstr(r.body, line))
            cr_assert_fail("/metrics lacks '%s':\n%s", line, r.body);
    }
    resp_free(&r);
    qd_stop_ok(&Q, 20000);
}

Test(server, a_job_server_serves_every_endpoint) {
    qd_init(&Q);
    const char *args[] = {"--set", "kylin.server.mode=job", NULL};
    qd_start(&Q, args);
    make_model(&Q, "p1", "m1", NULL);
    const char *id = build(&Q, "p1", "m1", D0, D0 + DAY);
    char job[64];
    snprintf(job, sizeof job, "%s", id);
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    json_decref(api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL));
    qd_stop_ok(&Q, 20000);
}

/* ---- shutdown ---- */

/* A template whose first run sleeps (until stopped) and whose later runs succeed at once: a
 * marker file tells them apart. */
static void write_marker_templates(qd_t *q, char *arg, size_t cap) {
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "templates:\n"
             "  INC_BUILD:\n"
             "    steps:\n"
             "      - name: first run waits\n"
             "        kind: shell\n"
             "        argv: [/bin/sh, -c, 'if [ -e %s/marker ]; then echo resumed; exit 0; fi; "
             "touch %s/marker; exec sleep 600']\n"
             "      - name: Update metadata\n"
             "        kind: noop\n",
             q->dir, q->dir);
    write_file(tmp_path(q, "jobs.yaml"), yaml);
    snprintf(arg, cap, "qilin.jobs.templates=%s", tmp_path(q, "jobs.yaml"));
}

Test(server, sigterm_pauses_a_running_job_which_resumes_after_restart) {
    qd_init(&Q);
    static char tmpl[512];
    write_marker_templates(&Q, tmpl, sizeof tmpl);
    const char *args[] = {"--set", tmpl, "--set", "qilin.step.kill-grace-ms=2s", NULL};
    qd_start(&Q, args);
    make_model(&Q, "p1", "m1", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "RUNNING", 20000);
    int64_t deadline = now_ms() + 20000;
    while (access(tmp_path(&Q, "marker"), F_OK) != 0) {
        cr_assert(now_ms() < deadline, "the step never started");
        poll_pause();
    }
    qd_stop_ok(&Q, 20000);
    cr_assert(file_contains(Q.log, "shutting down"));
    /* A query server does not schedule: it shows the job exactly as the shutdown left it. */
    const char *query[] = {"--set", tmpl, "--set", "kylin.server.mode=query", NULL};
    qd_start(&Q, query);
    json_t *j = find_job(&Q, "p1", job);
    cr_assert_not_null(j);
    cr_assert_str_eq(jstr(j, "job_state"), "READY");
    json_decref(j);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail", job);
    json_t *steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_str_eq(jstr(json_array_get(steps, 0), "step_state"), "READY");
    json_decref(steps);
    qd_stop_ok(&Q, 20000);
    /* A scheduling server picks it up again and finishes it. */
    qd_start(&Q, args);
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(segs, "value"), 0), "status"), "READY");
    json_decref(segs);
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_00/output", job, job);
    json_t *out = api_ok(&Q, "GET", path, NULL);
    cr_assert(strstr(jstr(out, "cmd_output"), "resumed"), "%s", jstr(out, "cmd_output"));
    json_decref(out);
    qd_stop_ok(&Q, 20000);
}

Test(server, a_second_signal_exits_at_once) {
    qd_init(&Q);
    static char tmpl[512];
    write_marker_templates(&Q, tmpl, sizeof tmpl);
    /* With `wait`, the first SIGTERM waits for the running step (600 s). */
    const char *args[] = {"--set", tmpl, "--set", "qilin.shutdown.running-steps=wait", NULL};
    qd_start(&Q, args);
    make_model(&Q, "p1", "m1", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "RUNNING", 20000);
    kill(Q.pid, SIGTERM);
    wait_log(&Q, "shutting down", 20000);
    cr_assert(!qd_wait_exit(&Q, 300), "the first signal waits for the running step");
    kill(Q.pid, SIGTERM);
    cr_assert(qd_wait_exit(&Q, 10000));
    cr_assert(WIFEXITED(Q.exit_status) && WEXITSTATUS(Q.exit_status) != 0);
    cr_assert(file_contains(Q.log, "second signal"));
}

/* ---- two servers on one data directory ---- */

Test(server, a_second_server_on_the_same_data_is_a_standby_that_serves_reads) {
    qd_init(&Q);
    const char *args[] = {"--set", "kylin.job.scheduler.poll-interval-second=1", NULL};
    qd_start(&Q, args);
    cr_assert(file_contains(Q.log, "role=master"));
    make_model(&Q, "p1", "m1", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);

    qd_init(&Q2);
    snprintf(Q2.data, sizeof Q2.data, "%s", Q.data);
    qd_start(&Q2, args);
    char holder[64];
    snprintf(holder, sizeof holder, "held by pid %d", (int)Q.pid);
    assert_file_contains(Q2.log, "standby");
    assert_file_contains(Q2.log, holder);
    cr_assert(file_contains(Q2.log, "role=standby"));
    /* Reads on the standby see the master's data. */
    json_t *j = find_job(&Q2, "p1", job);
    cr_assert_not_null(j);
    cr_assert_str_eq(jstr(j, "job_status"), "FINISHED");
    json_decref(j);
    resp_t r = http_req(&Q2, "GET", "/kylin/api/models/m1/auto_segment_build/status?project=p1",
                        NULL, NULL, NULL);
    cr_assert(strstr(json_string_value(json_object_get(r.json, "msg")), "standby"), "%s", r.body);
    resp_free(&r);
    r = http_req(&Q2, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert(strstr(r.body, "qilin_scheduler_master 0\n"));
    resp_free(&r);
    /* A build submitted to the standby is stored there and run by the master. */
    char job2[64];
    snprintf(job2, sizeof job2, "%s", build(&Q2, "p1", "m1", D0 + DAY, D0 + 2 * DAY));
    wait_job_state(&Q, "p1", job2, "SUCCEED", 20000);
    /* A job action on the standby goes straight through its writer. */
    json_decref(api_ok(&Q2, "POST", "/kylin/api/jobs",
                       "{\"project\":\"p1\",\"type\":\"NAP\",\"steps\":[{\"name\":\"n\",\"kind\":"
                       "\"sleep\",\"duration\":\"10m\"}]}"));
    json_t *d = api_ok(&Q2, "GET", "/kylin/api/jobs?project=p1&job_names=NAP", NULL);
    char nap[64];
    snprintf(nap, sizeof nap, "%s", jstr(json_array_get(json_object_get(d, "value"), 0), "id"));
    json_decref(d);
    wait_job_state(&Q, "p1", nap, "RUNNING", 20000);
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"DISCARD\"}",
             nap);
    json_decref(api_ok(&Q2, "PUT", "/kylin/api/jobs/status", body));
    j = find_job(&Q, "p1", nap);
    cr_assert_str_eq(jstr(j, "job_status"), "DISCARDED");
    json_decref(j);
    /* When the master stops, the standby takes over. */
    qd_stop_ok(&Q, 20000);
    wait_log(&Q2, "scheduling: holding the job engine lock", 20000);
    qd_stop_ok(&Q2, 20000);
}

/* ---- users ---- */

Test(server, configured_users_and_the_credentials_cache) {
    qd_init(&Q);
    char hash[QL_AUTH_HASH_MAX];
    cr_assert_eq(ql_auth_hash_password("s3cret pass", hash, sizeof hash), 0);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "qilin.server.users:\n"
             "  - name: alice\n"
             "    password_hash: \"%s\"\n"
             "    role: ADMIN\n",
             hash);
    char *cfg = tmp_path(&Q, "users.yaml");
    write_file(cfg, yaml);
    const char *args[] = {"--config", cfg, NULL};
    qd_start(&Q, args);
    resp_t r = http_req(&Q, "GET", "/kylin/api/projects", NULL, "ADMIN:KYLIN", NULL);
    cr_assert_eq(r.status, 401, "the default user is gone once users are configured");
    resp_free(&r);
    r = http_req(&Q, "GET", "/kylin/api/projects", NULL, "alice:wrong", NULL);
    cr_assert_eq(r.status, 401);
    resp_free(&r);
    for (int i = 0; i < 20; i++) {
        r = http_req(&Q, "GET", "/kylin/api/projects", NULL, "alice:s3cret pass", NULL);
        cr_assert_eq(r.status, 200);
        resp_free(&r);
    }
    /* The build is submitted by alice. */
    r = http_req(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}", "alice:s3cret pass", NULL);
    cr_assert_eq(r.status, 200);
    resp_free(&r);
    r = http_req(&Q, "GET", "/metrics", NULL, "alice:s3cret pass", NULL);
    cr_assert_eq(r.status, 200);
    /* Two failures (ADMIN, the wrong password) and one success were verified; the other 21
     * requests with the right password came from the cache. */
    cr_assert(strstr(r.body, "qilin_auth_verifications_total 3\n"), "%s", r.body);
    cr_assert(strstr(r.body, "qilin_auth_cache_hits_total 21\n"), "%s", r.body);
    resp_free(&r);
    qd_stop_ok(&Q, 20000);
}

Test(server, metrics_without_auth_when_configured) {
    qd_init(&Q);
    const char *args[] = {"--set", "qilin.metrics.require-auth=false", NULL};
    qd_start(&Q, args);
    resp_t r = http_req(&Q, "GET", "/metrics", NULL, "", NULL);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "qilin_info{"), "%s", r.body);
    resp_free(&r);
    r = http_req(&Q, "GET", "/kylin/api/jobs", NULL, "", NULL);
    cr_assert_eq(r.status, 401, "the API itself still needs credentials");
    resp_free(&r);
    qd_stop_ok(&Q, 20000);
}

/* ---- the shipped templates ---- */

Test(server, a_build_with_the_shipped_job_templates_runs_to_ready) {
    qd_init(&Q);
    const char *args[] = {"--set", "qilin.jobs.templates=" QL_SOURCE_DIR "/conf/jobs.yaml", NULL};
    qd_start(&Q, args);
    make_model(&Q, "p1", "m1", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    json_t *j = find_job(&Q, "p1", job);
    cr_assert_str_eq(jstr(j, "job_status"), "FINISHED");
    json_decref(j);
    json_t *segs = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(segs, "value"), 0), "status"), "READY");
    json_decref(segs);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/steps/%s_01/output", job, job);
    json_t *out = api_ok(&Q, "GET", path, NULL);
    cr_assert(strstr(jstr(out, "cmd_output"), "building m1 segment"), "%s",
              jstr(out, "cmd_output"));
    json_decref(out);
    qd_stop_ok(&Q, 20000);
}

/* ---- the dispatcher's decisions kept in the store ---- */

#define AUTO_STATUS "/kylin/api/models/m1/auto_segment_build/status?project=p1"

/* Polls q's status of m1 (at most 20 s) until its state is want from source; returns it. */
static json_t *wait_auto_status(const qd_t *q, const char *want, const char *source) {
    int64_t deadline = now_ms() + 20000;
    for (;;) {
        json_t *s = api_ok(q, "GET", AUTO_STATUS, NULL);
        const char *src = json_string_value(json_object_get(s, "source"));
        if (!strcmp(jstr(s, "state"), want) && src && !strcmp(src, source))
            return s;
        if (now_ms() >= deadline) {
            char *log = read_file(q->log);
            fprintf(stderr, "%s\n", log ? log : "");
            free(log);
        }
        cr_assert(now_ms() < deadline, "still %s from %s", jstr(s, "state"), src ? src : "-");
        json_decref(s);
        poll_pause();
    }
}

/* The master's latest decision is what a standby and a query server answer (before, UNKNOWN):
 * the COVERED cycle with its segment, read from the store. */
Test(server, a_standby_and_a_query_server_answer_the_masters_decision) {
    qd_init(&Q);
    const char *args[] = {"--set", "kylin.model.auto-segment-build.dispatcher-interval-ms=200ms",
                          NULL};
    qd_start(&Q, args);
    make_model(&Q, "p1", "m1", NULL);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/models/m1/segment_config",
                       "{\"project\":\"p1\",\"auto_segment_build\":{\"enabled\":true,"
                       "\"trigger_time\":\"00:00:00\",\"logical_date_offset_days\":1,"
                       "\"data_range_start_time\":\"00:00:00\",\"data_range_end_time\":"
                       "\"24:00:00\"}}"));
    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p1/segment_config",
                       "{\"auto_segment_build_enabled\":true}"));
    json_t *m = wait_auto_status(&Q, "COVERED", "dispatcher");
    json_t *seg = json_array_get(json_object_get(m, "related_segments"), 0);
    cr_assert(json_is_string(seg), "COVERED names no segment");

    qd_init(&Q2);
    snprintf(Q2.data, sizeof Q2.data, "%s", Q.data);
    qd_start(&Q2, args);
    cr_assert(file_contains(Q2.log, "role=standby"));
    json_t *s = wait_auto_status(&Q2, "COVERED", "store");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(s, "related_segments"), 0)),
                     json_string_value(seg));
    cr_assert_eq(jint(s, "target_start"), jint(m, "target_start"));
    cr_assert_eq(jint(s, "target_end"), jint(m, "target_end"));
    cr_assert_str_eq(jstr(s, "model"), "m1");
    resp_t r = http_req(&Q2, "GET", AUTO_STATUS, NULL, NULL, NULL);
    const char *msg = json_string_value(json_object_get(r.json, "msg"));
    cr_assert(msg && strstr(msg, "standby") && strstr(msg, "kept in the store"), "%s", r.body);
    resp_free(&r);
    json_decref(s);
    qd_stop_ok(&Q2, 20000);
    qd_stop_ok(&Q, 20000);

    const char *query[] = {"--set", "kylin.server.mode=query", NULL};
    qd_start(&Q, query);
    s = wait_auto_status(&Q, "COVERED", "store");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(s, "related_segments"), 0)),
                     json_string_value(seg));
    json_decref(s);
    json_decref(m);
    qd_stop_ok(&Q, 20000);
}
