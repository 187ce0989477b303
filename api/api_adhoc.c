/*
 * POST /jobs: an ad-hoc job from a JSON or YAML definition (ql_adhoc_parse, the loader of
 * conf/jobs.yaml), its steps given or taken from the template chain of its type, submitted with
 * ql_meta_submit_job. Its custom parameters are stored with the job, in the same transaction,
 * as a msgpack map that scheduler/sched_shell.c gives to every shell step. Shell steps given in
 * the request itself need qilin.adhoc.allow-commands (403 QL_EFORBIDDEN otherwise).
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct adhoc_op {
    ql_api_op_t base;
    ql_adhoc_job_t def; /* owns the step definitions the specs borrow names from */
    ql_job_steps_t steps;
    bool has_model;
    ql_id_t model;
    char *params;
    size_t params_len;
    ql_id_t job;
} adhoc_op_t;

static void adhoc_free(adhoc_op_t *op) {
    ql_job_steps_free(&op->steps);
    ql_adhoc_job_clear(&op->def);
    free(op->params);
    free(op);
}

static int adhoc_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    adhoc_op_t *op = arg;
    ql_job_spec_t spec = {
        .priority = op->def.priority,
        .submitter = op->base.user,
        .now = op->base.now,
        .steps = op->steps.specs,
        .n_steps = op->steps.n,
    };
    int rc = ql_meta_submit_job(txn, op->def.project, op->has_model ? &op->model : NULL,
                                op->def.type, false, 0, 0, &spec, &op->job, err);
    if (rc || !op->params)
        return rc;
    /* The custom parameters travel with the job, in the same transaction that creates it. */
    ql_job_t j;
    if ((rc = ql_job_get(txn, &op->job, QL_DECODE_KEEP_EXTRA, &j)))
        return ql_err_set(err, rc, "cannot read the new job: %s", ql_strerror(rc));
    free(j.params);
    j.params = op->params;
    j.params_len = op->params_len;
    rc = ql_job_put(txn, &j);
    j.params = NULL;
    j.params_len = 0;
    ql_job_free(&j);
    return rc ? ql_err_set(err, rc, "cannot store the job's parameters: %s", ql_strerror(rc)) : 0;
}

static void adhoc_done(void *arg, int status, const ql_err_t *err) {
    adhoc_op_t *op = arg;
    ql_api_t *api = op->base.api;
    if (status) {
        api->stats.submit_failures++;
        ql_api_fail_err(op->base.req, status, err);
    } else {
        api->stats.adhoc++;
        if (ql_log_enabled(api->log, QL_LOG_INFO)) {
            char job[QL_ID_STR_LEN + 1];
            ql_id_format(&op->job, job);
            ql_log(api->log, QL_LOG_INFO, "api", "submitted ad-hoc job type=%s job=%s user=%s",
                   op->def.type, job, op->base.user);
        }
        const char *type = op->def.type;
        ql_api_ok(op->base.req, ql_api_jobs_answer(&type, &op->job, 1), NULL);
        if (!api->closing)
            ql_node_kick(api->node);
    }
    adhoc_free(op);
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

static int prepare_adhoc(ql_api_t *api, ql_http_req_t *req, adhoc_op_t *op, ql_err_t *err) {
    int rc = parse_adhoc(req, &op->def, err);
    if (rc)
        return rc == QL_EINVAL || rc == QL_ETOOBIG ? QL_EINVAL : rc;
    /* A shell step of the request's own runs any program as the server's user: only when the
     * operator said so. Steps from the templates are the operator's, so they stay allowed. */
    for (size_t i = 0; i < op->def.n_steps && !api->adhoc_commands; i++)
        if (op->def.steps[i].kind == QL_STEP_SHELL)
            return ql_err_set(err, QL_EFORBIDDEN,
                              "steps[%zu] '%s': shell steps in ad-hoc jobs are off on this "
                              "server (qilin.adhoc.allow-commands: false); use a job type of the "
                              "templates, or noop, sleep, warn or fail steps",
                              i, op->def.steps[i].name);
    const char *type = op->def.type;
    if (!strcmp(type, "INC_BUILD") || !strcmp(type, "INDEX_REFRESH") ||
        !strcmp(type, "INDEX_MERGE"))
        return ql_err_set(err, QL_EINVAL,
                          "type: %s jobs work on segments: submit them with POST or PUT "
                          "/kylin/api/models/{model}/segments",
                          type);
    ql_txn_t *txn;
    if ((rc = ql_txn_begin(ql_node_store(api->node), false, &txn)))
        return ql_err_set(err, rc, "cannot read the store: %s", ql_strerror(rc));
    ql_project_t p;
    ql_model_t m = {0};
    char set[QL_NAME_MAX + 1] = "";
    if ((rc = ql_api_get_project(txn, op->def.project, &p, err)) == 0) {
        ql_project_free(&p);
        if (op->def.model &&
            (rc = ql_api_get_model(txn, op->def.project, op->def.model, 0, &m, err)) == 0) {
            op->has_model = true;
            op->model = m.id;
            snprintf(set, sizeof set, "%s", m.job_template);
            ql_model_free(&m);
        }
    }
    ql_txn_abort(txn);
    if (rc)
        return rc;
    if (op->def.n_steps) {
        rc = ql_job_steps_from_defs(op->def.steps, op->def.n_steps, &op->steps, err);
    } else {
        const ql_chain_t *chain;
        ql_err_t ferr = {0}; /* not err itself: its message is an argument of the new one */
        if ((rc = ql_templates_find(ql_node_templates(api->node), set, type, &chain, &ferr)))
            return ql_err_set(err, QL_EINVAL,
                              "type: %s (give the job's steps, or define the type in the job "
                              "templates)",
                              ferr.msg);
        if ((rc = ql_chain_check_params(chain, op->def.params, op->def.n_params, err)))
            return rc;
        rc = ql_job_steps_from_defs(chain->steps, chain->n_steps, &op->steps, err);
    }
    if (rc)
        return rc;
    if (ql_job_params_encode(op->def.params, op->def.n_params, &op->params, &op->params_len))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    return 0;
}

static void h_submit(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    adhoc_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op)
        return;
    ql_err_t err = {0};
    int rc = prepare_adhoc(api, req, op, &err);
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        adhoc_free(op);
        return;
    }
    if (!ql_api_submit(api, req, adhoc_fn, op, adhoc_done))
        adhoc_free(op);
}

int ql_api_routes_adhoc(ql_api_t *api) {
    return ql_http_router_add(api->router, "POST", QL_API_BASE "/jobs", "jobs.submit",
                              QL_HTTP_ROUTE_AUTH, h_submit, api);
}
