/*
 * Changing and removing projects and models through Kylin 5's endpoints, end to end against the
 * real qilind (docs/rest.md): PUT /models/{model}/name, PUT /models/{project}/{model}/
 * partition_desc and PUT /models/{model}/partition (segments purged, live jobs SUICIDAL, said in
 * the answer), DELETE /models/{model} (live jobs discarded, then removed) and
 * DELETE /projects/{project} (refused while jobs are live unless discard_jobs=true). Waiting is
 * polling with a deadline.
 */
#include "tests/api/metadata_server.h"

#include <sys/stat.h>

TestSuite(lifecycle, .init = setup, .fini = teardown, .timeout = 120);

static bool has_logs(const char *job) {
    char path[600];
    snprintf(path, sizeof path, "%s/logs/%s", Q.data, job);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* The model's GET /models entry (new reference), NULL when not listed. */
static json_t *find_model(const char *project, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/models?project=%s&page_size=100", project);
    json_t *d = api_ok(&Q, "GET", path, NULL);
    json_t *found = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(d, "value"), i, m) {
        if (strcmp(jstr(m, "name"), name) == 0)
            found = json_incref(m);
    }
    json_decref(d);
    return found;
}

static size_t segment_count(const char *project, const char *model) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/models/%s/segments?project=%s", model, project);
    json_t *d = api_ok(&Q, "GET", path, NULL);
    size_t n = json_array_size(json_object_get(d, "value"));
    json_decref(d);
    return n;
}

/* A write that must succeed: returns its msg (static buffer). */
static const char *ok_msg(const char *method, const char *path, const char *body) {
    static char msg[512];
    resp_t r = http_req(&Q, method, path, body, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s %s: %ld %s", method, path, r.status, r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "code")), "000");
    snprintf(msg, sizeof msg, "%s", json_string_value(json_object_get(r.json, "msg")));
    resp_free(&r);
    return msg;
}

Test(lifecycle, rename_a_model) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p1", "m2", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "SUCCEED", 20000);
    ok_msg("PUT", "/kylin/api/models/m1/name",
           "{\"project\":\"p1\",\"new_model_name\":\"orders\",\"description\":\"d\"}");
    json_t *m = find_model("p1", "orders");
    cr_assert_not_null(m);
    json_decref(m);
    cr_assert_null(find_model("p1", "m1"));
    cr_assert_eq(segment_count("p1", "orders"), 1, "the segments follow the model");
    api_err(&Q, "PUT", "/kylin/api/models/orders/name",
            "{\"project\":\"p1\",\"new_model_name\":\"m2\"}", 409, "QL-00002", "m2");
    api_err(&Q, "PUT", "/kylin/api/models/orders/name",
            "{\"project\":\"p1\",\"new_model_name\":\"bad name\"}", 400, "QL-00003",
            "new_model_name");
    api_err(&Q, "PUT", "/kylin/api/models/m1/name", "{\"project\":\"p1\",\"new_model_name\":\"x\"}",
            404, "QL-00001", "m1");
    api_err(&Q, "PUT", "/kylin/api/models/orders/name", "{\"project\":\"p1\"}", 400, "QL-00003",
            "new_model_name");
}

Test(lifecycle, changing_the_partition_purges_segments_and_says_so) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p1", "slow", "slowbuild");
    char done[64], live[64];
    snprintf(done, sizeof done, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", done, "SUCCEED", 20000);
    snprintf(live, sizeof live, "%s", build(&Q, "p1", "slow", D0, D0 + DAY));
    wait_job_state(&Q, "p1", live, "RUNNING", 20000);

    const char *body = "{\"partition_desc\":{\"partition_date_column\":\"DT2\","
                       "\"partition_date_format\":\"yyyyMMdd\"}}";
    const char *msg = ok_msg("PUT", "/kylin/api/models/p1/m1/partition_desc", body);
    cr_assert(strstr(msg, "1 segments were purged"), "%s", msg);
    cr_assert_eq(segment_count("p1", "m1"), 0);
    json_t *m = find_model("p1", "m1");
    json_t *pd = json_object_get(m, "partition_desc");
    cr_assert_str_eq(jstr(pd, "partition_date_column"), "DT2");
    cr_assert_str_eq(jstr(pd, "partition_date_format"), "yyyyMMdd");
    json_decref(m);
    msg = ok_msg("PUT", "/kylin/api/models/p1/m1/partition_desc", body);
    cr_assert(strstr(msg, "unchanged"), "%s", msg);
    /* The finished job stays, as history. */
    wait_job_state(&Q, "p1", done, "SUCCEED", 1000);

    /* Kylin's other endpoint, with the project in the body; the running job ends SUICIDAL. */
    msg = ok_msg("PUT", "/kylin/api/models/slow/partition",
                 "{\"project\":\"p1\",\"partition_desc\":{\"partition_date_column\":\"X\","
                 "\"partition_date_format\":\"yyyy-MM\"}}");
    cr_assert(strstr(msg, "1 live jobs ended SUICIDAL"), "%s", msg);
    wait_job_state(&Q, "p1", live, "SUICIDAL", 20000);
    cr_assert_eq(segment_count("p1", "slow"), 0);
    /* Full load from now on. */
    ok_msg("PUT", "/kylin/api/models/p1/slow/partition_desc", "{\"partition_desc\":null}");
    m = find_model("p1", "slow");
    cr_assert(json_is_null(json_object_get(m, "partition_desc")), "a full-load model");
    json_decref(m);

    api_err(&Q, "PUT", "/kylin/api/models/p1/m1/partition_desc",
            "{\"partition_desc\":{\"partition_date_column\":\"D\",\"partition_date_format\":"
            "\"yyyy-qq-'\"}}",
            400, "QL-00003", "partition_date_format");
    api_err(&Q, "PUT", "/kylin/api/models/p1/nope/partition_desc", body, 404, "QL-00001", "nope");
}

Test(lifecycle, deleting_a_model_discards_then_removes_its_jobs) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p1", "slow", "slowbuild");
    char done[64], live[64];
    /* The slow set's build waits 10 minutes: the model is deleted while it runs. */
    snprintf(live, sizeof live, "%s", build(&Q, "p1", "slow", D0 - DAY, D0));
    snprintf(done, sizeof done, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", done, "SUCCEED", 20000);
    wait_job_state(&Q, "p1", live, "RUNNING", 20000);

    ok_msg("DELETE", "/kylin/api/models/slow?project=p1", NULL);
    cr_assert_null(find_model("p1", "slow"));
    json_t *j = find_job(&Q, "p1", live);
    cr_assert_null(j, "the model's job is gone");
    json_t *kept = find_model("p1", "m1");
    cr_assert_not_null(kept, "another model stays");
    json_decref(kept);
    json_t *other = find_job(&Q, "p1", done);
    cr_assert_not_null(other, "another model's job stays");
    json_decref(other);
    api_err(&Q, "DELETE", "/kylin/api/models/slow?project=p1", NULL, 404, "QL-00001", "slow");
    api_err(&Q, "DELETE", "/kylin/api/models/m1", NULL, 400, "QL-00003", "project");

    /* The name is free again. */
    make_model(&Q, "p1", "slow", NULL);
}

Test(lifecycle, deleting_a_project_asks_before_discarding) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p2", "slow", "slowbuild");
    char done[64], live[64];
    snprintf(done, sizeof done, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    snprintf(live, sizeof live, "%s", build(&Q, "p2", "slow", D0, D0 + DAY));
    wait_job_state(&Q, "p1", done, "SUCCEED", 20000);
    wait_job_state(&Q, "p2", live, "RUNNING", 20000);

    api_err(&Q, "DELETE", "/kylin/api/projects/p2", NULL, 409, "QL-00007", live);
    json_t *still = find_job(&Q, "p2", live);
    cr_assert_not_null(still, "a refused drop changes nothing");
    json_decref(still);
    ok_msg("DELETE", "/kylin/api/projects/p2?discard_jobs=true", NULL);
    api_err(&Q, "GET", "/kylin/api/models?project=p2", NULL, 404, "QL-00001", "p2");
    json_t *d = api_ok(&Q, "GET", "/kylin/api/jobs?time_filter=4&page_size=100", NULL);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(d, "value"), i, j) {
        cr_assert_str_neq(jstr(j, "id"), live, "the project's jobs are gone");
    }
    json_decref(d);

    /* p1 has no live job: it goes without asking, with its logs. */
    cr_assert(has_logs(done));
    ok_msg("DELETE", "/kylin/api/projects/p1", NULL);
    cr_assert_not(has_logs(done));
    api_err(&Q, "DELETE", "/kylin/api/projects/p1", NULL, 404, "QL-00001", "p1");
    api_err(&Q, "DELETE", "/kylin/api/projects/p1?discard_jobs=maybe", NULL, 400, "QL-00003",
            "discard_jobs");
}

static bool metrics_have(const char *needle) {
    resp_t r = http_req(&Q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    bool has = r.body && strstr(r.body, needle) != NULL;
    resp_free(&r);
    return has;
}

Test(lifecycle, a_store_past_80_percent_of_its_map_is_warned_about) {
    ql_test_require_backend("lmdb"); /* a PostgreSQL store has no map size */
    qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
    qd_init(&Q);
    const char *args[] = {"--set", "qilin.storage.map-size=1MiB", NULL};
    qd_start(&Q, args);
    cr_assert(metrics_have("qilin_store_space_warning{kind=\"map\"} 0\n"));
    cr_assert(metrics_have("qilin_store_map_used_ratio 0."));
    static char body[4200];
    bool warned = false;
    for (int i = 0; i < 400 && !warned; i++) {
        int n = snprintf(body, sizeof body, "{\"name\":\"q%d\",\"description\":\"", i);
        memset(body + n, 'd', 4000);
        snprintf(body + n + 4000, sizeof body - (size_t)n - 4000, "\"}");
        resp_t r = http_req(&Q, "POST", "/kylin/api/projects", body, NULL, NULL);
        cr_assert(r.status == 200 || r.status == 507, "%ld %s", r.status, r.body);
        resp_free(&r);
        if (i % 20 == 19)
            warned = metrics_have("qilin_store_space_warning{kind=\"map\"} 1\n");
    }
    cr_assert(warned, "/metrics warns once the store passes 80%% of its map");
    wait_log(&Q, "the store passed 80% of qilin.storage.map-size", 30000);
}
