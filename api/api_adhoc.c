/*
 * POST /jobs: an ad-hoc job from a JSON or YAML definition (ql_adhoc_parse, the loader of
 * conf/jobs.yaml), checked here (shell steps of its own need qilin.adhoc.allow-commands, 403
 * QL_EFORBIDDEN otherwise; segment job types have their own endpoints) and carried out by the
 * node's submission service (scheduler/ql_submission.h): its steps given or taken from the
 * template chain of its type, its custom parameters stored with the job, in the record that
 * creates it (ql_job_params_encode), and given to every shell step (scheduler/sched_shell.c).
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void adhoc_done(void *arg, const ql_submission_result_t *res) {
    ql_api_op_t *op = arg;
    ql_api_t *api = op->api;
    if (!ql_api_submission_failed(api, op->req, res)) {
        api->stats.adhoc++;
        if (ql_log_enabled(api->log, QL_LOG_INFO)) {
            char job[QL_ID_STR_LEN + 1];
            ql_id_format(&res->jobs[0], job);
            ql_log(api->log, QL_LOG_INFO, "api", "submitted ad-hoc job type=%s job=%s user=%s",
                   res->type, job, op->user);
        }
        ql_api_ok(op->req, ql_api_jobs_answer(&res->type, res->jobs, 1), NULL);
    }
    free(op);
}

static bool is_yaml(const char *ct) {
    if (!ct)
        return false;
    static const char *const yaml[] = {"application/yaml", "application/x-yaml", "text/yaml",
                                       "text/x-yaml"};
    for (size_t i = 0; i < sizeof yaml / sizeof yaml[0]; i++) {
        size_t n = strlen(yaml[i]);
        if (strncasecmp(ct, yaml[i], n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
            return true;
    }
    return false;
}

/* Parses the definition: YAML as it is; JSON checked by jansson first (one object, no
 * duplicate keys), then re-serialized on one line for the YAML layer, which reads JSON as flow
 * YAML and applies the same rules as conf/jobs.yaml. */
static int parse_adhoc(ql_http_req_t *req, ql_adhoc_job_t *def, ql_err_t *err) {
    size_t len;
    const char *body = ql_http_req_body(req, &len);
    if (is_yaml(ql_http_req_header(req, "Content-Type")))
        return ql_adhoc_parse(body, len, "<request body>", def, err);
    json_t *root;
    int rc = ql_api_json_parse(body, len, &root, err);
    if (rc)
        return rc;
    char *flat = json_dumps(root, JSON_ENSURE_ASCII);
    json_decref(root);
    if (!flat)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    rc = ql_adhoc_parse(flat, strlen(flat), "<request body>", def, err);
    free(flat);
    return rc;
}

/* Parses the definition into def (the caller's: ql_adhoc_job_clear) and applies the API's own
 * rules to it. */
static int check_adhoc(ql_api_t *api, ql_http_req_t *req, ql_adhoc_job_t *def, ql_err_t *err) {
    int rc = parse_adhoc(req, def, err);
    if (rc)
        return rc == QL_EINVAL || rc == QL_ETOOBIG ? QL_EINVAL : rc;
    /* A shell step of the request's own runs any program as the server's user: only when the
     * operator said so. Steps from the templates are the operator's, so they stay allowed. */
    for (size_t i = 0; i < def->n_steps && !api->adhoc_commands; i++)
        if (def->steps[i].kind == QL_STEP_SHELL)
            return ql_err_set(err, QL_EFORBIDDEN,
                              "steps[%zu] '%s': shell steps in ad-hoc jobs are off on this "
                              "server (qilin.adhoc.allow-commands: false); use a job type of the "
                              "templates, or noop, sleep, warn or fail steps",
                              i, def->steps[i].name);
    const char *type = def->type;
    if (!strcmp(type, "INC_BUILD") || !strcmp(type, "INDEX_REFRESH") ||
        !strcmp(type, "INDEX_MERGE"))
        return ql_err_set(err, QL_EINVAL,
                          "type: %s jobs work on segments: submit them with POST or PUT "
                          "/kylin/api/models/{model}/segments",
                          type);
    return 0;
}

static void h_submit(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    ql_api_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op)
        return;
    ql_adhoc_job_t def = {0};
    ql_err_t err = {0};
    int rc = check_adhoc(api, req, &def, &err);
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        ql_adhoc_job_clear(&def);
        free(op);
        return;
    }
    ql_submission_req_t sr = {
        .kind = QL_SUBMIT_ADHOC,
        .project = def.project,
        .model = def.model,
        .adhoc = &def,
        .priority = def.priority,
        .submitter = op->user,
        .now = op->now,
    };
    if (ql_submission_submit(ql_node_submission(api->node), &sr, adhoc_done, op)) {
        ql_api_fail(req, UV_EINVAL, "cannot submit the request");
        free(op);
    }
    ql_adhoc_job_clear(&def); /* the service copied what it keeps */
}

int ql_api_routes_adhoc(ql_api_t *api) {
    return ql_http_router_add(api->router, "POST", QL_API_BASE "/jobs", "jobs.submit",
                              QL_HTTP_ROUTE_AUTH, h_submit, api);
}
