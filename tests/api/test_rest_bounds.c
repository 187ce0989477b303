/*
 * The bounds of every field the REST API takes (docs/rest.md, "Bounds"), against the real
 * qilind: one row per bound, each sent to the running server and asserted on its status, its
 * error code and the field its message names, and on the store being unchanged (every listing
 * answers the same before and after). Empty strings, over-long strings, negative numbers, zero
 * where it means nothing, numbers past int64, non-strings and NUL bytes.
 */
#include "tests/api/rest_util.h"

static qd_t Q;

#define DAY 86400000LL
#define A10 "aaaaaaaaaa"
#define A100 A10 A10 A10 A10 A10 A10 A10 A10 A10 A10
#define L101 A100 "a"                      /* one past QL_NAME_MAX */
#define L600 A100 A100 A100 A100 A100 A100 /* past LMDB's key limit (511 bytes) */
#define ID1 "00000000-0000-0000-0000-000000000001"

static void setup(void) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    make_model(&Q, "p1", "m1", NULL);
    /* A project east of UTC: a build from 0 floors to its local midnight, before the epoch. */
    make_model(&Q, "p2", "m2", NULL);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p2/config",
                       "{\"kylin.web.timezone\":\"Asia/Shanghai\"}"));
}

static void teardown(void) {
    if (Q.pid > 0)
        qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
}

TestSuite(rest_bounds, .init = setup, .fini = teardown, .timeout = 120);

/* Everything the API lists, as one string: equal before and after means nothing was written. */
static char *snapshot(void) {
    static const char *const paths[] = {
        "/kylin/api/projects?page_size=100",
        "/kylin/api/models?page_size=100",
        "/kylin/api/models/m1/segments?project=p1&page_size=100",
        "/kylin/api/models/m2/segments?project=p2&page_size=100",
        "/kylin/api/jobs?page_size=100",
    };
    size_t cap = 1, len = 0;
    char *all = calloc(1, 1);
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        json_t *d = api_ok(&Q, "GET", paths[i], NULL);
        char *s = json_dumps(d, JSON_SORT_KEYS);
        json_decref(d);
        size_t n = strlen(s);
        all = realloc(all, cap += n + 1);
        memcpy(all + len, s, n);
        all[len += n] = '\n';
        all[++len] = '\0';
        free(s);
    }
    return all;
}

typedef struct row {
    const char *method, *path, *body;
    long status;
    const char *code;  /* the envelope's error_code */
    const char *field; /* must occur in msg */
} row_t;

static const row_t rows[] = {
    /* POST /models/{model}/segments: times (the reproduction first). */
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":\"-86400000\",\"end\":\"0\"}", 400, "QL-00003", "start:"},
    {"POST", "/kylin/api/models/m1/segments", "{\"project\":\"p1\",\"start\":-1,\"end\":86400000}",
     400, "QL-00003", "start:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":253402214400001}", 400, "QL-00003", "end:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":\"9223372036854775807\"}", 400, "QL-00003", "end:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":\"-9223372036854775808\",\"end\":0}", 400, "QL-00003",
     "start:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":\"99999999999999999999\",\"end\":0}", 400, "QL-00003",
     "start:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":99999999999999999999}", 400, "QL-00003",
     "field 'end'"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":-99999999999999999999,\"end\":0}", 400, "QL-00003",
     "field 'start'"},
    {"POST", "/kylin/api/models/m1/segments", "{\"project\":\"p1\",\"start\":1.5,\"end\":86400000}",
     400, "QL-00003", "field 'start'"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":\"\",\"end\":86400000}", 400, "QL-00003", "start:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":true,\"end\":86400000}", 400, "QL-00003", "field 'start'"},
    {"POST", "/kylin/api/models/m1/segments", "{\"project\":\"p1\",\"start\":0,\"end\":0}", 400,
     "QL-00003", "start:"},
    {"POST", "/kylin/api/models/m2/segments", "{\"project\":\"p2\",\"start\":0,\"end\":172800000}",
     400, "QL-00003", "start:"},
    /* ... the project and the priority. */
    {"POST", "/kylin/api/models/m1/segments", "{\"project\":\"\",\"start\":0,\"end\":86400000}",
     400, "QL-00003", "project:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"" L101 "\",\"start\":0,\"end\":86400000}", 400, "QL-00003", "project:"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"" L600 "\",\"start\":0,\"end\":86400000}", 400, "QL-00003", "project:"},
    {"POST", "/kylin/api/models/m1/segments", "{\"project\":null,\"start\":0,\"end\":86400000}",
     400, "QL-00003", "'project'"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p\\u0000\",\"start\":0,\"end\":86400000}", 400, "QL-00003", "field 'project'"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":86400000,\"priority\":-1}", 400, "QL-00003",
     "priority"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":86400000,\"priority\":5}", 400, "QL-00003",
     "priority"},
    {"POST", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":86400000,\"priority\":9223372036854775807}", 400,
     "QL-00003", "priority"},
    {"POST", "/kylin/api/models/" L101 "/segments",
     "{\"project\":\"p1\",\"start\":0,\"end\":86400000}", 400, "QL-00003", "model:"},

    /* POST /models (the issue: an empty project answered QL-00010). */
    {"POST", "/kylin/api/models", "{\"project\":\"\",\"name\":\"m9\"}", 400, "QL-00003",
     "project:"},
    {"POST", "/kylin/api/models", "{\"project\":\"" L101 "\",\"name\":\"m9\"}", 400, "QL-00003",
     "project:"},
    {"POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"\"}", 400, "QL-00003", "name:"},
    {"POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"" L101 "\"}", 400, "QL-00003",
     "name:"},
    {"POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":\"m\\u0000x\"}", 400, "QL-00003",
     "field 'name'"},
    {"POST", "/kylin/api/models", "{\"project\":\"p1\",\"name\":9}", 400, "QL-00003",
     "field 'name'"},
    {"POST", "/kylin/api/models",
     "{\"project\":\"p1\",\"name\":\"m9\",\"partition_desc\":{\"partition_date_column\":\"\","
     "\"partition_date_format\":\"yyyy-MM-dd\"}}",
     400, "QL-00003", "partition_date_column"},
    {"POST", "/kylin/api/models",
     "{\"project\":\"p1\",\"name\":\"m9\",\"partition_desc\":{\"partition_date_column\":\"D\","
     "\"partition_date_format\":\"\"}}",
     400, "QL-00003", "partition_date_format"},

    /* POST /projects and PUT /projects/{project}/... */
    {"POST", "/kylin/api/projects", "{\"name\":\"\"}", 400, "QL-00003", "name:"},
    {"POST", "/kylin/api/projects", "{\"name\":\"" L101 "\"}", 400, "QL-00003", "name:"},
    {"POST", "/kylin/api/projects", "{\"name\":\"" L600 "\"}", 400, "QL-00003", "name:"},
    {"POST", "/kylin/api/projects", "{\"name\":\"q\",\"description\":\"a\\u0000\"}", 400,
     "QL-00003", "field 'description'"},
    {"PUT", "/kylin/api/projects/" L101 "/config", "{\"kylin.web.timezone\":\"UTC\"}", 400,
     "QL-00003", "project:"},
    {"PUT", "/kylin/api/projects/p1/config", "{\"\":\"UTC\"}", 400, "QL-00003", "''"},
    {"PUT", "/kylin/api/projects/p1/config", "{\"kylin.web.timezone\":true}", 400, "QL-00003",
     "kylin.web.timezone"},
    {"PUT", "/kylin/api/projects/p1/config", "{\"kylin.web.timezone\":1.5}", 400, "QL-00003",
     "kylin.web.timezone"},
    {"PUT", "/kylin/api/projects/" L101 "/segment_config", "{\"auto_segment_build_enabled\":true}",
     400, "QL-00003", "project:"},

    /* PUT /models/{model}/segment_config and /status. */
    {"PUT", "/kylin/api/models/m1/segment_config",
     "{\"project\":\"\",\"auto_segment_build\":{\"enabled\":false}}", 400, "QL-00003", "project:"},
    {"PUT", "/kylin/api/models/m1/segment_config",
     "{\"project\":\"p1\",\"auto_segment_build\":{\"logical_date_offset_days\":0}}", 400,
     "QL-00003", "logical_date_offset_days"},
    {"PUT", "/kylin/api/models/m1/segment_config",
     "{\"project\":\"p1\",\"auto_segment_build\":{\"logical_date_offset_days\":-1}}", 400,
     "QL-00003", "logical_date_offset_days"},
    {"PUT", "/kylin/api/models/m1/segment_config",
     "{\"project\":\"p1\",\"auto_segment_build\":{\"logical_date_offset_days\":36501}}", 400,
     "QL-00003", "logical_date_offset_days"},
    {"PUT", "/kylin/api/models/m1/segment_config",
     "{\"project\":\"p1\",\"auto_segment_build\":{\"logical_date_offset_days\":"
     "-9223372036854775808}}",
     400, "QL-00003", "logical_date_offset_days"},
    {"PUT", "/kylin/api/models/m1/segment_config",
     "{\"project\":\"p1\",\"auto_segment_build\":{\"trigger_time\":\"01:00:00:00:00:00:00\"}}", 400,
     "QL-00003", "trigger_time"},
    {"PUT", "/kylin/api/models/m1/status", "{\"project\":\"\",\"status\":\"OFFLINE\"}", 400,
     "QL-00003", "project:"},
    {"PUT", "/kylin/api/models/m1/status", "{\"project\":\"p1\",\"status\":\"\"}", 400, "QL-00003",
     "status:"},
    {"PUT", "/kylin/api/models/" L101 "/status", "{\"project\":\"p1\",\"status\":\"OFFLINE\"}", 400,
     "QL-00003", "model:"},

    /* PUT and DELETE /models/{model}/segments: ids. */
    {"PUT", "/kylin/api/models/m1/segments",
     "{\"project\":\"\",\"type\":\"REFRESH\",\"ids\":[\"" ID1 "\"]}", 400, "QL-00003", "project:"},
    {"PUT", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"type\":\"\",\"ids\":[\"" ID1 "\"]}", 400, "QL-00003", "type:"},
    {"PUT", "/kylin/api/models/m1/segments", "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[]}",
     400, "QL-00003", "ids:"},
    {"PUT", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[\"\"]}", 400, "QL-00003", "ids[0]"},
    {"PUT", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"type\":\"REFRESH\",\"ids\":[7]}", 400, "QL-00003", "field 'ids'"},
    {"PUT", "/kylin/api/models/m1/segments",
     "{\"project\":\"p1\",\"type\":\"MERGE\",\"ids\":[\"" ID1 "\"]}", 400, "QL-00003", "ids:"},
    {"DELETE", "/kylin/api/models/m1/segments?project=p1", NULL, 400, "QL-00003", "ids:"},
    {"DELETE", "/kylin/api/models/m1/segments?project=p1&ids=", NULL, 400, "QL-00003", "ids:"},
    {"DELETE", "/kylin/api/models/m1/segments?project=&ids=" ID1, NULL, 400, "QL-00003",
     "project:"},
    {"DELETE", "/kylin/api/models/m1/segments?project=" L101 "&ids=" ID1, NULL, 400, "QL-00003",
     "project:"},

    /* Reads: paging and filters. */
    {"GET", "/kylin/api/models/m1/segments?project=p1&page_size=0", NULL, 400, "QL-00003",
     "page_size"},
    {"GET", "/kylin/api/models/m1/segments?project=p1&page_size=-1", NULL, 400, "QL-00003",
     "page_size"},
    {"GET", "/kylin/api/models/m1/segments?project=p1&page_size=99999999999999999999", NULL, 400,
     "QL-00003", "page_size"},
    {"GET", "/kylin/api/models/m1/segments?project=p1&page_offset=-1", NULL, 400, "QL-00003",
     "page_offset"},
    {"GET", "/kylin/api/models/m1/segments?project=p1&page_offset=2147483648", NULL, 400,
     "QL-00003", "page_offset"},
    {"GET",
     "/kylin/api/models/m1/segments?project=p1&status=NEW&status=NEW&status=NEW&status=NEW&"
     "status=NEW&status=NEW&status=NEW&status=NEW&status=NEW",
     NULL, 400, "QL-00003", "status:"},
    {"GET", "/kylin/api/models/m1/segments?project=" L101, NULL, 400, "QL-00003", "project:"},
    {"GET", "/kylin/api/models?project=" L101, NULL, 400, "QL-00003", "project:"},
    {"GET", "/kylin/api/models?project=p1&exact=2", NULL, 400, "QL-00003", "exact"},
    {"GET", "/kylin/api/models/" L101 "/auto_segment_build/status?project=p1", NULL, 400,
     "QL-00003", "model:"},
    {"GET", "/kylin/api/models/m1/auto_segment_build/status", NULL, 400, "QL-00003", "project:"},
    {"GET", "/kylin/api/jobs?time_filter=-1", NULL, 400, "QL-00003", "time_filter"},
    {"GET", "/kylin/api/jobs?time_filter=5", NULL, 400, "QL-00003", "time_filter"},
    {"GET", "/kylin/api/jobs?time_filter=99999999999999999999", NULL, 400, "QL-00003",
     "time_filter"},
    {"GET", "/kylin/api/jobs?page_size=0", NULL, 400, "QL-00003", "page_size"},
    {"GET", "/kylin/api/jobs?project=" L101, NULL, 400, "QL-00003", "project:"},
    {"GET", "/kylin/api/jobs?key=" A100 A100 A100, NULL, 400, "QL-00003", "key:"},
    {"GET", "/kylin/api/jobs/nope/detail", NULL, 400, "QL-00003", "job_id:"},

    /* PUT /jobs/status and POST /jobs. */
    {"PUT", "/kylin/api/jobs/status", "{\"job_ids\":[],\"action\":\"PAUSE\"}", 400, "QL-00003",
     "job_ids:"},
    {"PUT", "/kylin/api/jobs/status", "{\"job_ids\":[\"" ID1 "\"],\"action\":\"\"}", 400,
     "QL-00003", "action:"},
    {"PUT", "/kylin/api/jobs/status",
     "{\"project\":\"" L101 "\",\"job_ids\":[\"" ID1 "\"],\"action\":\"PAUSE\"}", 400, "QL-00003",
     "project:"},
    {"POST", "/kylin/api/jobs", "{\"project\":\"\",\"type\":\"INDEX_BUILD\"}", 400, "QL-00003",
     "project"},
    {"POST", "/kylin/api/jobs", "{\"project\":\"p1\",\"type\":\"INDEX_BUILD\",\"priority\":-1}",
     400, "QL-00003", "priority"},
};

Test(rest_bounds, every_bound_is_a_400_naming_the_field_and_writes_nothing) {
    char *before = snapshot();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row_t *r = &rows[i];
        resp_t x = http_req(&Q, r->method, r->path, r->body, NULL, NULL);
        const char *ec = x.json ? json_string_value(json_object_get(x.json, "error_code")) : NULL;
        const char *msg = x.json ? json_string_value(json_object_get(x.json, "msg")) : NULL;
        cr_assert_eq(x.status, r->status, "row %zu: %s %.80s %s: status %ld, expected %ld: %s", i,
                     r->method, r->path, r->body ? r->body : "", x.status, r->status,
                     x.body ? x.body : "");
        cr_assert(ec && strcmp(ec, r->code) == 0, "row %zu: %s %.80s: error_code %s, expected %s",
                  i, r->method, r->path, ec ? ec : "(none)", r->code);
        cr_assert(msg && strstr(msg, r->field), "row %zu: %s %.80s: msg '%s' does not name '%s'", i,
                  r->method, r->path, msg ? msg : "(none)", r->field);
        resp_free(&x);
        char *after = snapshot();
        cr_assert_str_eq(after, before, "row %zu: %s %.80s changed the store", i, r->method,
                         r->path);
        free(after);
    }
    free(before);
}

/* The bounds themselves are accepted: a build of the first day after the epoch and one of the
 * last day before 9999-12-31T00:00:00Z (QL_TIME_MAX). */
Test(rest_bounds, the_bounds_themselves_are_accepted) {
    json_decref(api_ok(&Q, "POST", "/kylin/api/models/m1/segments",
                       "{\"project\":\"p1\",\"start\":0,\"end\":86400000}"));
    json_decref(api_ok(&Q, "POST", "/kylin/api/models/m1/segments",
                       "{\"project\":\"p1\",\"start\":\"253402128000000\",\"end\":"
                       "\"253402214400000\"}"));
    json_t *d = api_ok(&Q, "GET", "/kylin/api/models/m1/segments?project=p1", NULL);
    json_t *v = json_object_get(d, "value");
    cr_assert_eq(json_array_size(v), 2);
    cr_assert_str_eq(jstr(json_array_get(v, 0), "name"), "19700101000000_19700102000000");
    cr_assert_str_eq(jstr(json_array_get(v, 1), "name"), "99991230000000_99991231000000");
    json_decref(d);
    /* In the zone east of UTC, the first whole local day is accepted. */
    json_decref(api_ok(&Q, "POST", "/kylin/api/models/m2/segments",
                       "{\"project\":\"p2\",\"start\":57600000,\"end\":144000000}"));
}
