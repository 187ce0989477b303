/*
 * DELETE /kylin/api/jobs?project=&job_ids=&statuses= end to end against the real qilind
 * (docs/rest.md, Delete jobs): final jobs go with their steps, outputs and step logs; a live job
 * among them refuses the whole request, naming it, and nothing is deleted; statuses selects the
 * project's jobs; the count is in /metrics. Waiting is polling with a deadline.
 */
#include "tests/api/metadata_server.h"

#include <sys/stat.h>

TestSuite(job_delete, .init = setup, .fini = teardown, .timeout = 120);

static bool has_logs(const char *job) {
    char path[600];
    snprintf(path, sizeof path, "%s/logs/%s", Q.data, job);
    struct stat sb;
    return stat(path, &sb) == 0;
}

static bool listed(const char *job) {
    json_t *j = find_job(&Q, "p1", job);
    json_decref(j);
    return j != NULL;
}

static void delete_ok(const char *query) {
    char path[512];
    snprintf(path, sizeof path, "/kylin/api/jobs?%s", query);
    json_t *d = api_ok(&Q, "DELETE", path, NULL);
    cr_assert_str_eq(json_string_value(d), "");
    json_decref(d);
}

Test(job_delete, final_jobs_go_and_live_ones_refuse) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p1", "slow", "slowbuild");
    char a[64], b[64];
    snprintf(a, sizeof a, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    snprintf(b, sizeof b, "%s", build(&Q, "p1", "slow", D0, D0 + DAY));
    wait_job_state(&Q, "p1", a, "SUCCEED", 20000);
    wait_job_state(&Q, "p1", b, "RUNNING", 20000);
    cr_assert(has_logs(a), "the finished build wrote its step log");

    char path[512];
    snprintf(path, sizeof path, "/kylin/api/jobs?project=p1&job_ids=%s,%s", a, b);
    api_err(&Q, "DELETE", path, NULL, 409, "QL-00007", b);
    cr_assert(listed(a), "a refused request deletes nothing");
    snprintf(path, sizeof path, "/kylin/api/jobs?project=p1");
    api_err(&Q, "DELETE", path, NULL, 409, "QL-00007", "RUNNING");

    char q[256];
    snprintf(q, sizeof q, "project=p1&job_ids=%s", a);
    delete_ok(q);
    cr_assert_not(listed(a));
    cr_assert_not(has_logs(a), "the step logs went with the job");
    snprintf(path, sizeof path, "/kylin/api/jobs/%s/detail?project=p1", a);
    api_err(&Q, "GET", path, NULL, 404, "QL-00001", NULL);
    cr_assert(listed(b));

    /* Deleted already, so not found now. */
    snprintf(path, sizeof path, "/kylin/api/jobs?project=p1&job_ids=%s", a);
    api_err(&Q, "DELETE", path, NULL, 404, "QL-00001", a);

    resp_t r = http_req(&Q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "qilin_jobs_deleted_total{source=\"api\"} 1\n"), "%s", r.body);
    cr_assert(strstr(r.body, "qilin_jobs_deleted_total{source=\"retention\"} 0\n"), "%s", r.body);
    resp_free(&r);
}

Test(job_delete, statuses_select_the_projects_jobs) {
    make_model(&Q, "p1", "m1", NULL);
    make_model(&Q, "p1", "slow", "slowbuild");
    char a[64], b[64], c[64];
    snprintf(a, sizeof a, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    snprintf(b, sizeof b, "%s", build(&Q, "p1", "slow", D0, D0 + DAY));
    wait_job_state(&Q, "p1", a, "SUCCEED", 20000);
    snprintf(c, sizeof c, "%s", build(&Q, "p1", "m1", D0 + DAY, D0 + 2 * DAY));
    wait_job_state(&Q, "p1", c, "SUCCEED", 20000);
    wait_job_state(&Q, "p1", b, "RUNNING", 20000);

    /* FINISHED: both builds of m1; the running job is not among them, so nothing refuses. */
    delete_ok("project=p1&statuses=FINISHED");
    cr_assert_not(listed(a));
    cr_assert_not(listed(c));
    cr_assert(listed(b));

    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"DISCARD\"}",
             b);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/jobs/status", body));
    wait_job_state(&Q, "p1", b, "DISCARDED", 20000);
    /* Repeated keys work like a comma list. */
    delete_ok("project=p1&statuses=FINISHED&statuses=DISCARDED");
    cr_assert_not(listed(b));

    api_err(&Q, "DELETE", "/kylin/api/jobs?project=nope", NULL, 404, "QL-00001", "nope");
    api_err(&Q, "DELETE", "/kylin/api/jobs?project=p1&statuses=DONE", NULL, 400, "QL-00003",
            "statuses");
    api_err(&Q, "DELETE", "/kylin/api/jobs?project=p1&job_ids=zz", NULL, 400, "QL-00003",
            "job_ids");
}
