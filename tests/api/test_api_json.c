/*
 * The REST API's pure parts, without a server: the streaming JSON writer (separators, escapes,
 * invalid UTF-8), the Accept check, integers and epoch-ms values, the field tables and the
 * request-body validators and the error-to-status table. (The stored job parameters are tested
 * with their codec, in tests/engine/test_job_params.c.)
 */
#include <criterion/criterion.h>

#include <string.h>

#include "api/api_int.h"

static char *written(ql_api_jw_t *w) {
    cr_assert(!w->b.failed);
    char *s = strndup(w->b.p, w->b.len);
    ql_api_jw_free(w);
    return s;
}

Test(jw, separators_follow_keys_and_items) {
    ql_api_jw_t w;
    ql_api_jw_init(&w);
    ql_api_jw_open(&w, '{');
    ql_api_jw_key(&w, "a");
    ql_api_jw_int(&w, -9223372036854775807LL - 1);
    ql_api_jw_key(&w, "b");
    ql_api_jw_open(&w, '[');
    ql_api_jw_int(&w, 0);
    ql_api_jw_bool(&w, true);
    ql_api_jw_null(&w);
    ql_api_jw_open(&w, '{');
    ql_api_jw_close(&w, '}');
    ql_api_jw_open(&w, '[');
    ql_api_jw_close(&w, ']');
    ql_api_jw_close(&w, ']');
    QL_API_JW_KEY(&w, "c");
    ql_api_jw_str(&w, NULL);
    ql_api_jw_key_text(&w, "k\"ey");
    ql_api_jw_int(&w, 42);
    ql_api_jw_close(&w, '}');
    char *s = written(&w);
    cr_assert_str_eq(s, "{\"a\":-9223372036854775808,\"b\":[0,true,null,{},[]],\"c\":null,"
                        "\"k\\\"ey\":42}");
    free(s);
}

Test(jw, integers_print_like_printf) {
    static const int64_t vals[] = {0,
                                   1,
                                   9,
                                   10,
                                   99,
                                   100,
                                   101,
                                   999,
                                   1000,
                                   -1,
                                   -10,
                                   -99,
                                   -100,
                                   1788134400000LL,
                                   INT64_MAX,
                                   INT64_MIN,
                                   INT64_MIN + 1,
                                   1234567890123456789LL};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        ql_api_jw_t w;
        ql_api_jw_init(&w);
        ql_api_jw_int(&w, vals[i]);
        char *s = written(&w);
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)vals[i]);
        cr_assert_str_eq(s, want);
        free(s);
    }
}

Test(jw, strings_are_escaped_and_always_valid_utf8) {
    ql_api_jw_t w;
    ql_api_jw_init(&w);
    ql_api_jw_open(&w, '[');
    ql_api_jw_str(&w, "q\"b\\n\nt\tc\x01 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x89");
    /* A lone continuation byte, a truncated sequence, an overlong form, a surrogate. */
    ql_api_jw_strn(&w,
                   "a\x80"
                   "b\xc3"
                   "c\xc0\xaf"
                   "d\xed\xa0\x80",
                   11);
    ql_api_jw_close(&w, ']');
    char *s = written(&w);
    cr_assert_str_eq(s, "[\"q\\\"b\\\\n\\nt\\tc\\u0001 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x89\","
                        "\"a\\ufffdb\\ufffdc\\ufffd\\ufffdd\\ufffd\\ufffd\\ufffd\"]");
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    cr_assert_not_null(j, "%s", je.text);
    json_decref(j);
    free(s);
}

Test(accept, the_listed_types_and_wildcards_are_accepted) {
    cr_assert(ql_api_accept_ok(NULL));
    cr_assert(ql_api_accept_ok(""));
    cr_assert(ql_api_accept_ok("application/vnd.apache.kylin-v4-public+json"));
    cr_assert(ql_api_accept_ok("application/vnd.apache.kylin-v4+json;charset=UTF-8"));
    cr_assert(ql_api_accept_ok("Application/JSON"));
    cr_assert(ql_api_accept_ok("text/html, */*;q=0.8"));
    cr_assert(ql_api_accept_ok("application/*"));
    cr_assert_not(ql_api_accept_ok("text/html"));
    cr_assert_not(ql_api_accept_ok("application/xml, text/plain"));
}

Test(values, integers_and_epoch_ms) {
    int64_t v;
    cr_assert_eq(ql_api_parse_i64("1788134400000", &v), 0);
    cr_assert_eq(v, 1788134400000LL);
    cr_assert_eq(ql_api_parse_i64("-5", &v), 0);
    cr_assert_eq(v, -5);
    cr_assert_eq(ql_api_parse_i64("9223372036854775807", &v), 0);
    cr_assert_neq(ql_api_parse_i64("9223372036854775808", &v), 0);
    cr_assert_neq(ql_api_parse_i64("+5", &v), 0);
    cr_assert_neq(ql_api_parse_i64(" 5", &v), 0);
    cr_assert_neq(ql_api_parse_i64("5.0", &v), 0);
    cr_assert_neq(ql_api_parse_i64("-", &v), 0);
    cr_assert_neq(ql_api_parse_i64("", &v), 0);
    ql_err_t err = {0};
    json_t *n = json_integer(7), *s = json_string("8"), *f = json_real(1.5), *b = json_true();
    cr_assert_eq(ql_api_json_time(n, "start", &v, &err), 0);
    cr_assert_eq(v, 7);
    cr_assert_eq(ql_api_json_time(s, "start", &v, &err), 0);
    cr_assert_eq(v, 8);
    cr_assert_eq(ql_api_json_time(f, "start", &v, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "start"));
    cr_assert_eq(ql_api_json_time(b, "end", &v, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "end"));
    json_decref(n);
    json_decref(s);
    json_decref(f);
    json_decref(b);
}

Test(fields, unknown_wrong_and_missing_fields_are_named) {
    static const ql_api_field_t fields[] = {
        {"project", AJ_STRING, true}, {"ids", AJ_STRLIST, false}, {NULL, 0, false}};
    ql_err_t err = {0};
    json_t *o;
    const char *good = "{\"project\":\"p\",\"ids\":[\"a\"]}";
    cr_assert_eq(ql_api_json_parse(good, strlen(good), &o, &err), 0);
    cr_assert_eq(ql_api_json_check(o, "request body", fields, &err), 0);
    json_decref(o);
    const char *bad[][2] = {
        {"{\"project\":\"p\",\"x\":1}", "unknown field 'x' (known fields: project, ids)"},
        {"{\"project\":1}", "field 'project': expected a string, got an integer"},
        {"{\"project\":\"p\",\"ids\":[1]}", "field 'ids': expected an array of strings"},
        {"{\"ids\":[]}", "field 'project' is required"},
        {"{\"project\":null}", "field 'project' is required"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(ql_api_json_parse(bad[i][0], strlen(bad[i][0]), &o, &err), 0);
        cr_assert_eq(ql_api_json_check(o, "request body", fields, &err), QL_EINVAL);
        cr_assert(strstr(err.msg, bad[i][1]), "%s: %s", bad[i][0], err.msg);
        json_decref(o);
    }
    cr_assert_eq(ql_api_json_parse("{\"a\":1,\"a\":2}", 13, &o, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "duplicate"), "%s", err.msg);
    cr_assert_eq(ql_api_json_parse("\"x\"", 3, &o, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "got a string"), "%s", err.msg);
    cr_assert_eq(ql_api_json_parse("{\"a\":\"\\u0000\"}", 14, &o, &err), QL_EINVAL);
}

Test(bodies, builds_merges_and_actions) {
    ql_api_build_req_t b;
    ql_err_t err = {0};
    const char *ok = "{\"project\":\"p\",\"start\":\"100\",\"end\":200,\"priority\":0}";
    cr_assert_eq(ql_api_parse_build(ok, strlen(ok), &b, &err), 0);
    cr_assert(b.has_range);
    cr_assert_eq(b.start, 100);
    cr_assert_eq(b.end, 200);
    cr_assert_eq(b.priority, 0);
    json_decref(b.root);
    const char *nr = "{\"project\":\"p\"}";
    cr_assert_eq(ql_api_parse_build(nr, strlen(nr), &b, &err), 0);
    cr_assert_not(b.has_range);
    cr_assert_eq(b.priority, QL_PRIORITY_DEFAULT);
    json_decref(b.root);
    const char *eq = "{\"project\":\"p\",\"start\":5,\"end\":5}";
    cr_assert_eq(ql_api_parse_build(eq, strlen(eq), &b, &err), QL_EINVAL);
    json_decref(b.root);

    ql_api_ids_req_t r;
    const char *merge = "{\"project\":\"p\",\"type\":\"MERGE\",\"ids\":["
                        "\"00000000-0000-0000-0000-000000000001\","
                        "\"00000000-0000-0000-0000-000000000002\"]}";
    cr_assert_eq(ql_api_parse_segments_put(merge, strlen(merge), &r, &err), 0);
    cr_assert(r.merge);
    cr_assert_eq(r.n, 2);
    ql_api_ids_req_free(&r);
    const char *twice = "{\"job_ids\":[\"00000000-0000-0000-0000-000000000001\","
                        "\"00000000-0000-0000-0000-000000000001\"],\"action\":\"PAUSE\"}";
    cr_assert_eq(ql_api_parse_job_status(twice, strlen(twice), &r, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "twice"));
    ql_api_ids_req_free(&r);
    const char *act = "{\"job_ids\":[\"00000000-0000-0000-0000-000000000001\"],"
                      "\"action\":\"RESTART\"}";
    cr_assert_eq(ql_api_parse_job_status(act, strlen(act), &r, &err), 0);
    cr_assert_eq(r.action, QL_ACTION_RESTART);
    cr_assert_null(r.project);
    ql_api_ids_req_free(&r);
}

/* Kylin's optional fields: the kept ones parsed (a tag as compact JSON, a priority's digits),
 * the others only type-checked, and the size limits. */
Test(bodies, kylin_optional_fields) {
    ql_api_build_req_t b;
    ql_err_t err = {0};
    const char *all = "{\"project\":\"p\",\"start\":1,\"end\":2,\"priority\":\"1\","
                      "\"yarn_queue\":\"root.q\",\"tag\":{ \"a\" : [1, true] },"
                      "\"build_all_indexes\":false,\"build_all_sub_partitions\":true,"
                      "\"sub_partition_values\":[[\"x\",\"y\"]],\"ignored_snapshot_tables\":[],"
                      "\"partial_build\":true,\"batch_index_ids\":[1,2]}";
    cr_assert_eq(ql_api_parse_build(all, strlen(all), &b, &err), 0, "%s", err.msg);
    cr_assert_eq(b.priority, 1);
    cr_assert_str_eq(b.x.yarn_queue, "root.q");
    cr_assert_str_eq(b.x.tag, "{\"a\":[1,true]}");
    json_decref(b.root);
    const char *bad = "{\"project\":\"p\",\"sub_partition_values\":[\"x\"]}";
    cr_assert_eq(ql_api_parse_build(bad, strlen(bad), &b, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "sub_partition_values"), "%s", err.msg);
    json_decref(b.root);
    char big[QL_JOB_TAG_MAX + 64];
    int n = snprintf(big, sizeof big, "{\"project\":\"p\",\"tag\":\"");
    memset(big + n, 'x', QL_JOB_TAG_MAX - 1); /* with its quotes: one byte too many */
    snprintf(big + n + QL_JOB_TAG_MAX - 1, sizeof big - (size_t)n - QL_JOB_TAG_MAX + 1, "\"}");
    cr_assert_eq(ql_api_parse_build(big, strlen(big), &b, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "tag"), "%s", err.msg);
    json_decref(b.root);
    big[n + QL_JOB_TAG_MAX - 2] = '"'; /* one x less: exactly the limit */
    big[n + QL_JOB_TAG_MAX - 1] = '}';
    big[n + QL_JOB_TAG_MAX] = '\0';
    cr_assert_eq(ql_api_parse_build(big, strlen(big), &b, &err), 0, "%s", err.msg);
    cr_assert_eq(strlen(b.x.tag), QL_JOB_TAG_MAX);
    json_decref(b.root);

    ql_api_ids_req_t r;
    const char *names =
        "{\"project\":\"p\",\"names\":[\"FULL_BUILD\"],\"refresh_all_indexes\":true}";
    cr_assert_eq(ql_api_parse_segments_put(names, strlen(names), &r, &err), 0, "%s", err.msg);
    cr_assert_not(r.merge, "REFRESH by default");
    cr_assert_eq(r.n_names, 1);
    cr_assert_str_eq(r.names[0], "FULL_BUILD");
    ql_api_ids_req_free(&r);
    const char *both = "{\"project\":\"p\",\"names\":[\"a\"],\"ids\":["
                       "\"00000000-0000-0000-0000-000000000001\"]}";
    cr_assert_eq(ql_api_parse_segments_put(both, strlen(both), &r, &err), QL_EINVAL);
    ql_api_ids_req_free(&r);
    const char *st = "{\"project\":\"p\",\"job_ids\":[],\"statuses\":[\"STOPPED\",\"ERROR\"],"
                     "\"action\":\"RESUME\"}";
    cr_assert_eq(ql_api_parse_job_status(st, strlen(st), &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.n, 0);
    cr_assert_eq(r.status_mask, (1u << QL_PAUSED) | (1u << QL_ERROR));
    ql_api_ids_req_free(&r);

    ql_api_project_segcfg_req_t c;
    const char *kylin = "{\"auto_merge_enabled\":true,\"auto_merge_time_ranges\":[\"WEEK\"],"
                        "\"retention_range\":{\"retention_range_number\":-1}}";
    cr_assert_eq(ql_api_parse_project_segcfg(kylin, strlen(kylin), &c, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "retention_range_number"), "%s", err.msg);
    json_decref(c.root);
    const char *ours = "{\"auto_merge_enabled\":false,\"auto_segment_build_enabled\":true}";
    cr_assert_eq(ql_api_parse_project_segcfg(ours, strlen(ours), &c, &err), 0, "%s", err.msg);
    cr_assert(c.has_enabled && c.enabled);
    json_decref(c.root);
}

/* A NUL byte in a string and an integer past int64 are refused naming their field; the key of
 * an integer is found before the value jansson stopped at. */
Test(bodies, nul_bytes_and_huge_integers_name_their_field) {
    static const struct {
        const char *body, *field;
    } rows[] = {
        {"{\"name\":\"a\\u0000b\"}", "field 'name'"},
        {"{\"a\":{\"b\":[\"x\",\"\\u0000\"]}}", "field 'a.b[1]'"},
        {"{\"start\": 99999999999999999999}", "field 'start'"},
        {"{\"x\":1, \"end\" :\t-99999999999999999999}", "field 'end'"},
        {"{\"e\":1e400}", "field 'e'"},
        /* No key to name: the message still says what is wrong and where. */
        {"[99999999999999999999]", "malformed JSON at line 1"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *root = NULL;
        ql_err_t err = {0};
        cr_assert_eq(ql_api_json_parse(rows[i].body, strlen(rows[i].body), &root, &err), QL_EINVAL,
                     "%s", rows[i].body);
        cr_assert_null(root);
        cr_assert(strstr(err.msg, rows[i].field), "%s: '%s' lacks %s", rows[i].body, err.msg,
                  rows[i].field);
    }
}

Test(bodies, configs_are_validated_by_the_option_table) {
    ql_api_config_req_t c;
    ql_err_t err = {0};
    const char *ok = "{\"kylin.web.timezone\":\"Asia/Shanghai\",\"kylin.job.max-concurrent-jobs\":"
                     "3,\"kylin.cube.schedule.assigned-servers\":null}";
    cr_assert_eq(ql_api_parse_config(ok, strlen(ok), &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.n, 3);
    cr_assert_str_eq(c.values[1], "3");
    cr_assert_null(c.values[2]);
    ql_api_config_req_free(&c);
    const char *bad = "{\"kylin.job.max-concurrent-jobs\":0}";
    cr_assert_eq(ql_api_parse_config(bad, strlen(bad), &c, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "kylin.job.max-concurrent-jobs"), "%s", err.msg);
    ql_api_config_req_free(&c);

    ql_api_model_req_t m;
    const char *model = "{\"project\":\"p\",\"name\":\"m\",\"multi_partition_desc\":{\"columns\":"
                        "[\"A\",\"B\"]},\"partition_desc\":{\"partition_date_column\":\"DT\","
                        "\"partition_date_format\":\"yyyyMMdd\"}}";
    cr_assert_eq(ql_api_parse_model(model, strlen(model), &m, &err), 0, "%s", err.msg);
    cr_assert(m.model.partitioned);
    cr_assert_str_eq(m.model.multi_partition_columns, "A,B");
    ql_model_free(&m.model);
    json_decref(m.root);
}

Test(status, error_codes_map_to_http_statuses) {
    cr_assert_eq(ql_api_http_status(QL_EINVAL), 400);
    cr_assert_eq(ql_api_http_status(QL_EEMPTYRANGE), 400);
    cr_assert_eq(ql_api_http_status(QL_EAUTH), 401);
    cr_assert_eq(ql_api_http_status(QL_ENOTFOUND), 404);
    cr_assert_eq(ql_api_http_status(QL_ESEGOVERLAP), 409);
    cr_assert_eq(ql_api_http_status(QL_EJOBCONFLICT), 409);
    cr_assert_eq(ql_api_http_status(QL_EEXIST), 409);
    cr_assert_eq(ql_api_http_status(QL_EACTION), 409);
    cr_assert_eq(ql_api_http_status(QL_ETOOBIG), 413);
    cr_assert_eq(ql_api_http_status(QL_EMODE), 503);
    cr_assert_eq(ql_api_http_status(QL_EMAPFULL), 507);
    cr_assert_eq(ql_api_http_status(QL_ECORRUPT), 500);
    cr_assert_eq(ql_api_http_status(UV_ENOMEM), 500);
}
