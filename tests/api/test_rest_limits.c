/*
 * The job limits end to end, one test per boundary row: a job type of 63, 64 and 65 characters
 * and a chain of 99, 100 and 101 steps, first in the templates file the real qilind loads
 * (an over-limit one stops the server with a file:line error), then in an ad-hoc job posted to
 * POST /jobs (an over-limit one is a 400 naming the field). Every accepted one is submitted
 * through the REST API and must run to SUCCEED: the limits are the store's (QL_TYPE_MAX and
 * QL_JOB_STEPS_MAX in storage/ql_records.h), so what loads must also be stored and run. All
 * steps are noop steps, which ad-hoc jobs may use on every server.
 *
 * Then a project's kylin.job.max-concurrent-jobs: PUT /projects/{p}/config refuses a bad value
 * with the server key's parser, bounds and message, and a bad value already in the store (written
 * straight into the stopped server's store) holds the project's jobs instead of being read as 0,
 * no limit.
 */
#include "tests/api/rest_util.h"

#include "storage/ql_store.h"

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

/* ---- a project's kylin.job.max-concurrent-jobs ---- */

#define MCJ "kylin.job.max-concurrent-jobs"

/* The message the server gives for value as its own setting (qilind --set, which refuses to
 * start): the part after "MCJ: ", into out. */
static void server_key_message(const char *value, char *out, size_t cap) {
    qd_t s;
    qd_init(&s);
    char set[128];
    snprintf(set, sizeof set, MCJ "=%s", value);
    const char *args[] = {"--data", s.data, "--set", "qilin.server.listen=127.0.0.1:0",
                          "--set",  set,    NULL};
    bool up = qd_spawn(&s, args);
    char *log = read_file(s.log);
    const char *m = log ? strstr(log, MCJ ": '") : NULL;
    if (up || !m) {
        qd_cleanup(&s);
        cr_assert_fail("qilind with %s: no refusal; stderr:\n%s", set, log ? log : "(none)");
    }
    m += strlen(MCJ ": ");
    size_t n = strcspn(m, "\n");
    snprintf(out, cap, "%.*s", (int)n, m);
    free(log);
    qd_wait_exit(&s, 20000);
    qd_cleanup(&s);
}

Test(limits, project_max_concurrent_jobs_bad_values_are_refused_like_the_server_key) {
    start_with_templates("STEPS", 1);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p1/config", "{\"" MCJ "\":4}"));
    static const char *const bad[] = {"abc", "-1", "99999999999", "0", "10001", "4x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[400], body[160];
        server_key_message(bad[i], want, sizeof want);
        cr_assert(strstr(want, "accepted: 1..10000"), "%s", want);
        char msg[480];
        snprintf(msg, sizeof msg, MCJ ": %s", want);
        /* As a string and, where it is one, as a JSON integer. */
        snprintf(body, sizeof body, "{\"" MCJ "\":\"%s\"}", bad[i]);
        api_err(&Q, "PUT", "/kylin/api/projects/p1/config", body, 400, "QL-00003", msg);
        if (strcmp(bad[i], "abc") != 0 && strcmp(bad[i], "4x") != 0) {
            snprintf(body, sizeof body, "{\"" MCJ "\":%s}", bad[i]);
            api_err(&Q, "PUT", "/kylin/api/projects/p1/config", body, 400, "QL-00003", msg);
        }
    }
    /* Nothing was changed: the override is still 4. */
    json_t *d = api_ok(&Q, "GET", "/kylin/api/projects?project=p1", NULL);
    json_t *p = json_array_get(json_object_get(d, "value"), 0);
    cr_assert_str_eq(jstr(json_object_get(p, "override_kylin_properties"), MCJ), "4");
    json_decref(d);
}

/* Writes value as p1's override straight into the stopped server's store. */
static void store_project_limit(const char *value) {
    ql_err_t err = {0};
    ql_store_opts_t so = {.path = Q.data};
    ql_store_t *store;
    int rc = ql_store_open(&so, &store, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, true, &txn), 0);
    ql_project_t p;
    cr_assert_eq(ql_project_get(txn, "p1", 0, &p), 0);
    cr_assert_eq(ql_strmap_set(&p.config, MCJ, value), 0);
    cr_assert_eq(ql_project_put(txn, &p), 0);
    ql_project_free(&p);
    cr_assert_eq(ql_txn_commit(txn), 0);
    ql_store_close(store);
}

static const char *submit_noop(const char *project) {
    static char id[64];
    char body[160];
    snprintf(body, sizeof body,
             "{\"project\":\"%s\",\"type\":\"ONE\",\"steps\":[{\"name\":\"s\",\"kind\":\"noop\"}]}",
             project);
    json_t *d = api_ok(&Q, "POST", "/kylin/api/jobs", body);
    snprintf(id, sizeof id, "%s", jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    return id;
}

/* A stored override that does not parse holds p1's jobs (the old code read it with atoi: 0, no
 * limit, so the job ran) and says why in the log; p2 is not affected; a valid value set through
 * the API lets the job run. */
static void stored_bad_limit_holds_jobs(const char *value) {
    static char tpl_arg[440];
    snprintf(tpl_arg, sizeof tpl_arg, "%s", write_templates("STEPS", 1));
    const char *args[] = {"--set", tpl_arg, "--set", "kylin.job.scheduler.poll-interval-second=1",
                          NULL};
    qd_start(&Q, args);
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p1\"}"));
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p2\"}"));
    qd_stop_ok(&Q, 20000);
    store_project_limit(value);
    qd_start(&Q, args);

    char held[64];
    snprintf(held, sizeof held, "%s", submit_noop("p1"));
    /* p2's job runs, through a pass that meets p1's older job first: that one must stay READY. */
    wait_job_state(&Q, "p2", submit_noop("p2"), "SUCCEED", 20000);
    json_t *j = find_job(&Q, "p1", held);
    cr_assert_str_eq(jstr(j, "job_state"), "READY", "p1's job ran with an invalid limit");
    json_decref(j);
    char want[200];
    snprintf(want, sizeof want, "project jobs held: its override is invalid (" MCJ ": '%s'", value);
    wait_log(&Q, want, 20000);
    assert_file_contains(Q.log, "accepted: 1..10000)) project=p1");

    json_decref(api_ok(&Q, "PUT", "/kylin/api/projects/p1/config", "{\"" MCJ "\":2}"));
    wait_job_state(&Q, "p1", held, "SUCCEED", 20000);
}

Test(limits, a_stored_project_limit_abc_holds_the_projects_jobs) {
    stored_bad_limit_holds_jobs("abc");
}

Test(limits, a_stored_project_limit_minus_1_holds_the_projects_jobs) {
    stored_bad_limit_holds_jobs("-1");
}

Test(limits, a_stored_project_limit_99999999999_holds_the_projects_jobs) {
    stored_bad_limit_holds_jobs("99999999999");
}
