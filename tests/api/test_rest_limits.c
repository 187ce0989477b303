/*
 * The job limits end to end, one test per boundary row: a job type of 63, 64 and 65 characters
 * and a chain of 99, 100 and 101 steps, first in the templates file the real qilind loads
 * (an over-limit one stops the server with a file:line error), then in an ad-hoc job posted to
 * POST /jobs (an over-limit one is a 400 naming the field). Every accepted one is submitted
 * through the REST API and must run to SUCCEED: the limits are the store's (QL_TYPE_MAX and
 * QL_JOB_STEPS_MAX in storage/ql_records.h), so what loads must also be stored and run. All
 * steps are noop steps, which ad-hoc jobs may use on every server.
 */
#include "rest_util.h"

static qd_t Q;

static void setup(void) {
    qd_init(&Q);
}

static void teardown(void) {
    if (Q.pid > 0)
        qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
}

TestSuite(limits, .init = setup, .fini = teardown, .timeout = 120);

/* A job type of exactly n characters (2 <= n < 80): "L", 'A's and a last 'Z', so that a copy
 * truncated anywhere is a different name. Static buffer. */
static const char *type_of_len(size_t n) {
    static char buf[80];
    cr_assert(n >= 2 && n < sizeof buf);
    memset(buf, 'A', n);
    buf[0] = 'L';
    buf[n - 1] = 'Z';
    buf[n] = '\0';
    return buf;
}

/* The templates file: INC_BUILD and the custom type, whose chain has n_steps noop steps, one per
 * line from line 5 on (so the 'steps' key is on line 4 and the type on line 3). Returns the
 * --set argument naming the file (static buffer). */
static const char *write_templates(const char *type, int n_steps) {
    size_t cap = 64 * 1024, o;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    o = (size_t)snprintf(text, cap,
                         "templates:\n"
                         "  INC_BUILD: {steps: [{name: build, kind: noop}]}\n"
                         "  %s:\n"
                         "    steps:\n",
                         type);
    for (int i = 0; i < n_steps; i++)
        o += (size_t)snprintf(text + o, cap - o, "      - {name: s%d, kind: noop}\n", i);
    cr_assert_lt(o, cap);
    static char path[400], arg[440];
    snprintf(path, sizeof path, "%s/jobs.yaml", Q.dir);
    write_file(path, text);
    free(text);
    snprintf(arg, sizeof arg, "qilin.jobs.templates=%s", path);
    return arg;
}

/* Starts qilind with the templates file of write_templates and creates project p1. */
static void start_with_templates(const char *type, int n_steps) {
    const char *args[] = {"--set", write_templates(type, n_steps), NULL};
    qd_start(&Q, args);
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
}

/* Starts qilind with the templates file of write_templates and expects it to refuse to start,
 * saying want (a "jobs.yaml:LINE: ..." message) on its stderr. */
static void expect_refused_templates(const char *type, int n_steps, const char *want) {
    const char *args[] = {"--data", Q.data,
                          "--set",  "qilin.server.listen=127.0.0.1:0",
                          "--set",  write_templates(type, n_steps),
                          NULL};
    cr_assert_not(qd_spawn(&Q, args), "qilind started with an over-limit template");
    cr_assert(qd_wait_exit(&Q, 20000));
    cr_assert(WIFEXITED(Q.exit_status) && WEXITSTATUS(Q.exit_status) != 0, "status %d",
              Q.exit_status);
    Q.pid = 0;
    assert_file_contains(Q.log, want);
}

/* POSTs body to /jobs and expects one job, which must then run to SUCCEED with n_steps steps
 * whose ids are <job>_00 .. <job>_<n_steps - 1>, of type type (also found by GET /jobs
 * ?job_names=type, whose values have the same limit). */
static void submit_and_succeed(const char *body, const char *type, size_t n_steps) {
    json_t *d = api_ok(&Q, "POST", "/kylin/api/jobs", body);
    json_t *jobs = json_object_get(d, "jobs");
    cr_assert_eq(json_array_size(jobs), 1);
    char job[64];
    snprintf(job, sizeof job, "%s", jstr(json_array_get(jobs, 0), "job_id"));
    json_decref(d);
    wait_job_state(&Q, "p1", job, "SUCCEED", 30000);
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail", job);
    json_t *steps = api_ok(&Q, "GET", path, NULL);
    cr_assert_eq(json_array_size(steps), n_steps);
    char want[80];
    snprintf(want, sizeof want, "%s_%02zu", job, n_steps - 1);
    cr_assert_str_eq(jstr(json_array_get(steps, n_steps - 1), "id"), want);
    json_decref(steps);
    snprintf(path, sizeof path, "/kylin/api/jobs?project=p1&job_names=%s", type);
    d = api_ok(&Q, "GET", path, NULL);
    cr_assert_eq(jint(d, "total_size"), 1, "GET /jobs?job_names=%s", type);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(d, "value"), 0), "job_name"), type);
    json_decref(d);
}

/* Runs the template chain of type (a POST /jobs without steps). */
static void run_template(const char *type, size_t n_steps) {
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"type\":\"%s\"}", type);
    submit_and_succeed(body, type, n_steps);
}

/* An ad-hoc job body of type with n_steps noop steps (caller frees). */
static char *adhoc_body(const char *type, int n_steps) {
    size_t cap = 64 * 1024;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    size_t o = (size_t)snprintf(b, cap, "{\"project\":\"p1\",\"type\":\"%s\",\"steps\":[", type);
    for (int i = 0; i < n_steps; i++)
        o += (size_t)snprintf(b + o, cap - o, "%s{\"name\":\"s%d\",\"kind\":\"noop\"}",
                              i ? "," : "", i);
    o += (size_t)snprintf(b + o, cap - o, "]}");
    cr_assert_lt(o, cap);
    return b;
}

static void run_adhoc(const char *type, int n_steps) {
    char *body = adhoc_body(type, n_steps);
    submit_and_succeed(body, type, (size_t)n_steps);
    free(body);
}

static void expect_adhoc_refused(const char *type, int n_steps, const char *want) {
    char *body = adhoc_body(type, n_steps);
    api_err(&Q, "POST", "/kylin/api/jobs", body, 400, "QL-00003", want);
    free(body);
    /* Nothing was created. */
    json_t *d = api_ok(&Q, "GET", "/kylin/api/jobs?project=p1", NULL);
    cr_assert_eq(jint(d, "total_size"), 0);
    json_decref(d);
}

/* ---- the templates file ---- */

Test(limits, template_type_of_63_characters_runs) {
    start_with_templates(type_of_len(63), 1);
    run_template(type_of_len(63), 1);
}

Test(limits, template_type_of_64_characters_runs) {
    start_with_templates(type_of_len(64), 1);
    run_template(type_of_len(64), 1);
}

Test(limits, template_type_of_65_characters_is_a_file_line_error) {
    /* The message shows the first 40 characters of the name, and the rule. */
    expect_refused_templates(type_of_len(65), 1,
                             "jobs.yaml:3: key 'templates': invalid job type 'LAAAAAAAAAAAAAAAAA");
    assert_file_contains(Q.log, "a custom name matching [A-Z][A-Z0-9_]{0,63})");
}

Test(limits, template_of_99_steps_runs) {
    start_with_templates("STEPS", 99);
    run_template("STEPS", 99);
}

Test(limits, template_of_100_steps_runs) {
    start_with_templates("STEPS", 100);
    run_template("STEPS", 100);
}

Test(limits, template_of_101_steps_is_a_file_line_error) {
    expect_refused_templates("STEPS", 101,
                             "jobs.yaml:5: key 'steps': 101 steps, at most 100 are "
                             "allowed");
}

/* ---- ad-hoc jobs over REST ---- */

Test(limits, adhoc_type_of_63_characters_runs) {
    start_with_templates("STEPS", 1);
    run_adhoc(type_of_len(63), 1);
}

Test(limits, adhoc_type_of_64_characters_runs) {
    start_with_templates("STEPS", 1);
    run_adhoc(type_of_len(64), 1);
}

Test(limits, adhoc_type_of_65_characters_is_refused) {
    start_with_templates("STEPS", 1);
    char want[200];
    snprintf(want, sizeof want, "key 'type': '%s' is not a job type", type_of_len(65));
    expect_adhoc_refused(type_of_len(65), 1, want);
}

Test(limits, adhoc_job_of_99_steps_runs) {
    start_with_templates("STEPS", 1);
    run_adhoc("MANY", 99);
}

Test(limits, adhoc_job_of_100_steps_runs) {
    start_with_templates("STEPS", 1);
    run_adhoc("MANY", 100);
}

Test(limits, adhoc_job_of_101_steps_is_refused) {
    start_with_templates("STEPS", 1);
    expect_adhoc_refused("MANY", 101, "key 'steps': 101 steps, at most 100 are allowed");
}
