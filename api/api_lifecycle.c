/*
 * Changing and removing projects and models, as Kylin 5's endpoints do (docs/rest.md):
 * DELETE /projects/{project}, DELETE /models/{model}, PUT /models/{model}/name and
 * PUT /models/{project}/{model}/partition_desc (with Kylin's PUT /models/{model}/partition).
 * Each change is one mutation, so it is applied whole or not at all on every backend. Jobs
 * deleted with a project or model lose their step logs once the change committed; a live job
 * that was ended has its running step stopped by the scheduler (kicked here, so at once on
 * this server; on the master's next poll from a standby, ql_sched.h).
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct change_op {
    ql_api_op_t base;
    char project[QL_NAME_MAX + 1];
    char model[QL_NAME_MAX + 1];
    char new_name[QL_NAME_MAX + 1];
    bool discard_jobs;
    /* partition: the new partition (partitioned false: full load) */
    bool partitioned;
    char column[QL_COLUMN_MAX + 1];
    char format[QL_FORMAT_MAX + 1];
    /* Written by the mutation, anew at each run (ql_writer.h). */
    ql_id_list_t deleted;
    size_t discarded, purged, ended;
    bool unchanged;
} change_op_t;

static void op_free(change_op_t *op) {
    ql_id_list_free(&op->deleted);
    free(op);
}

static void reset_outputs(change_op_t *op) {
    op->deleted.n = 0;
    op->discarded = op->purged = op->ended = 0;
    op->unchanged = false;
}

/* Removes the step logs of the deleted jobs and wakes the scheduler for the ended ones. */
static void after_commit(change_op_t *op) {
    ql_api_t *api = op->base.api;
    ql_store_t *store = ql_node_store(api->node);
    for (size_t i = 0; i < op->deleted.n; i++) {
        int rc = ql_store_remove_job_logs(store, &op->deleted.ids[i]);
        if (rc) {
            char id[QL_ID_STR_LEN + 1];
            ql_id_format(&op->deleted.ids[i], id);
            ql_log(api->log, QL_LOG_WARN, "api", "cannot remove the step logs of job %s: %s", id,
                   ql_strerror(rc));
        }
    }
    api->stats.jobs_deleted += op->deleted.n;
    if (op->discarded || op->ended)
        ql_node_kick(api->node);
}

static void drop_done(void *arg, int status, const ql_err_t *err) {
    change_op_t *op = arg;
    char what[160] = "";
    if (!status) {
        after_commit(op);
        snprintf(what, sizeof what, "%s dropped jobs_deleted=%zu jobs_discarded=%zu",
                 op->model[0] ? "model" : "project", op->deleted.n, op->discarded);
    }
    ql_api_answer_change(op->base.api, op->base.req, status, err, what);
    op_free(op);
}

/* ---- DELETE /projects/{project}?discard_jobs= ---- */

/* The dispatcher's stored decision of each model of the dropped project goes with it. */
static int forget_decision(const ql_model_t *m, void *arg) {
    return ql_dispatch_decision_forget(arg, &m->id);
}

static int project_drop_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    change_op_t *op = arg;
    reset_outputs(op);
    /* Forgotten first, in the same mutation: a refused drop rolls the forgetting back too. */
    int rc = ql_model_foreach(txn, op->project, forget_decision, txn);
    if (rc)
        return ql_err_set(err, rc, "cannot read the models of project '%s': %s", op->project,
                          ql_strerror(rc));
    return ql_project_drop(txn, op->project, op->discard_jobs, op->base.now, &op->deleted,
                           &op->discarded, err);
}

static void h_project_delete(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    const char *project = ql_http_req_param(req, "project");
    bool discard = false;
    ql_err_t err = {0};
    int rc = ql_api_query_bool(req, "discard_jobs", false, &discard, &err);
    if (!rc && strlen(project) > QL_NAME_MAX)
        rc = ql_err_set(&err, QL_ENOTFOUND, "project '%.100s...' not found", project);
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        return;
    }
    change_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op)
        return;
    snprintf(op->project, sizeof op->project, "%s", project);
    op->discard_jobs = discard;
    if (!ql_api_submit(api, req, project_drop_fn, op, drop_done))
        op_free(op);
}

/* ---- the model of a request ---- */

/* The model named in the path, in project (from the query or the body): into op. Answers and
 * returns NULL when either is missing or too long. */
static change_op_t *model_op(ql_api_t *api, ql_http_req_t *req, const char *project,
                             const char *model) {
    if (!project || !project[0]) {
        ql_api_fail(req, QL_EINVAL, "project: required (the project of model '%.100s')", model);
        return NULL;
    }
    if (strlen(project) > QL_NAME_MAX || strlen(model) > QL_NAME_MAX) {
        ql_api_fail(req, QL_ENOTFOUND, "%s: '%.100s...' not found",
                    strlen(project) > QL_NAME_MAX ? "project" : "model",
                    strlen(project) > QL_NAME_MAX ? project : model);
        return NULL;
    }
    change_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op) {
        snprintf(op->project, sizeof op->project, "%s", project);
        snprintf(op->model, sizeof op->model, "%s", model);
    }
    return op;
}

/* ---- DELETE /models/{model}?project= ---- */

static int model_drop_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    change_op_t *op = arg;
    reset_outputs(op);
    ql_model_t m;
    int rc = ql_api_get_model(txn, op->project, op->model, 0, &m, err);
    if (rc)
        return rc;
    ql_id_t id = m.id;
    ql_model_free(&m);
    if ((rc = ql_dispatch_decision_forget(txn, &id)))
        return ql_err_set(err, rc, "cannot remove the model's dispatcher decision: %s",
                          ql_strerror(rc));
    return ql_model_drop(txn, &id, op->base.now, &op->deleted, &op->discarded, err);
}

static void h_model_delete(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    change_op_t *op =
        model_op(api, req, ql_http_req_query(req, "project"), ql_http_req_param(req, "model"));
    if (op && !ql_api_submit(api, req, model_drop_fn, op, drop_done))
        op_free(op);
}

/* ---- PUT /models/{model}/name ---- */

static int rename_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    change_op_t *op = arg;
    ql_model_t m;
    int rc = ql_api_get_model(txn, op->project, op->model, QL_DECODE_KEEP_EXTRA, &m, err);
    if (rc)
        return rc;
    snprintf(m.name, sizeof m.name, "%s", op->new_name);
    m.modify_time = op->base.now;
    rc = ql_model_put(txn, &m);
    ql_model_free(&m);
    if (rc == QL_EEXIST)
        return ql_err_set(err, rc,
                          "new_model_name: a model named '%s' already exists in project "
                          "'%s'",
                          op->new_name, op->project);
    return rc ? ql_err_set(err, rc, "cannot rename model '%s': %s", op->model, ql_strerror(rc)) : 0;
}

static void rename_done(void *arg, int status, const ql_err_t *err) {
    change_op_t *op = arg;
    char what[300];
    snprintf(what, sizeof what, "model renamed from=%s to=%s", op->model, op->new_name);
    ql_api_answer_change(op->base.api, op->base.req, status, err, what);
    op_free(op);
}

static void h_rename(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    static const ql_api_field_t fields[] = {{"project", AJ_STRING, true},
                                            {"new_model_name", AJ_STRING, true},
                                            {"description", AJ_STRING, false},
                                            {NULL, 0, false}};
    json_t *root = NULL;
    ql_err_t err = {0};
    int rc = ql_api_json_parse(body.p, body.len, &root, &err);
    if (!rc)
        rc = ql_api_json_check(root, "request body", fields, &err);
    const char *name = rc ? NULL : ql_api_json_str(root, "new_model_name");
    if (!rc)
        rc = ql_meta_check_name("new_model_name", name, &err);
    if (ql_api_body_refused(req, rc, &root, &err))
        return;
    change_op_t *op =
        model_op(api, req, ql_api_json_str(root, "project"), ql_http_req_param(req, "model"));
    if (op) {
        snprintf(op->new_name, sizeof op->new_name, "%s", name);
        if (!ql_api_submit(api, req, rename_fn, op, rename_done))
            op_free(op);
    }
    json_decref(root);
}

/* ---- PUT /models/{project}/{model}/partition_desc, PUT /models/{model}/partition ---- */

static int partition_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    change_op_t *op = arg;
    reset_outputs(op);
    ql_model_t m;
    int rc = ql_api_get_model(txn, op->project, op->model, QL_DECODE_KEEP_EXTRA, &m, err);
    if (rc)
        return rc;
    op->unchanged = m.partitioned == op->partitioned &&
                    (!op->partitioned || (!strcmp(m.partition_column, op->column) &&
                                          !strcmp(m.partition_format, op->format)));
    if (!op->unchanged &&
        !(rc = ql_model_purge_segments(txn, &m.id, op->base.now, &op->purged, &op->ended, err))) {
        m.partitioned = op->partitioned;
        snprintf(m.partition_column, sizeof m.partition_column, "%s", op->column);
        snprintf(m.partition_format, sizeof m.partition_format, "%s", op->format);
        m.modify_time = op->base.now;
        if ((rc = ql_model_put(txn, &m)))
            ql_err_set(err, rc, "cannot store model '%s': %s", op->model, ql_strerror(rc));
    }
    ql_model_free(&m);
    return rc;
}

static void partition_done(void *arg, int status, const ql_err_t *err) {
    change_op_t *op = arg;
    if (status) {
        ql_api_fail_err(op->base.req, status, err);
        op_free(op);
        return;
    }
    after_commit(op);
    char msg[300];
    if (op->unchanged)
        snprintf(msg, sizeof msg, "the partition of model '%s' is unchanged: nothing purged",
                 op->model);
    else
        snprintf(msg, sizeof msg,
                 "the partition of model '%s' changed: its %zu segments were purged and its %zu "
                 "live jobs ended SUICIDAL, as Kylin does; build the model again",
                 op->model, op->purged, op->ended);
    ql_api_log_change(op->base.api, op->base.req, msg);
    ql_api_ok(op->base.req, json_string(""), msg);
    op_free(op);
}

/* {"project"?, "partition_desc": {...} | null}: the new partition into op, the format checked
 * by ICU here, on the loop thread (never inside the writer). */
static int parse_partition(ql_api_t *api, json_t *root, change_op_t *op, ql_err_t *err) {
    static const ql_api_field_t fields[] = {{"project", AJ_STRING, false},
                                            {"partition_desc", AJ_OBJECT, false},
                                            {"multi_partition_desc", AJ_OBJECT, false},
                                            {NULL, 0, false}};
    static const ql_api_field_t part_fields[] = {{"partition_date_column", AJ_STRING, true},
                                                 {"partition_date_format", AJ_STRING, true},
                                                 {NULL, 0, false}};
    int rc = ql_api_json_check(root, "request body", fields, err);
    if (rc)
        return rc;
    if (ql_api_json_has(root, "multi_partition_desc"))
        return ql_err_set(err, QL_EINVAL,
                          "multi_partition_desc: changing the sub-partition columns is not "
                          "supported; give partition_desc only");
    const json_t *pd = json_object_get(root, "partition_desc");
    if (!pd || json_is_null(pd))
        return 0; /* a full-load model from now on */
    if ((rc = ql_api_json_check(pd, "partition_desc", part_fields, err)))
        return rc;
    const char *col = ql_api_json_str(pd, "partition_date_column");
    const char *fmt = ql_api_json_str(pd, "partition_date_format");
    if (!col[0] || strlen(col) > QL_COLUMN_MAX)
        return ql_err_set(err, QL_EINVAL,
                          "partition_desc.partition_date_column: expected 1 to %d characters",
                          QL_COLUMN_MAX);
    if (!fmt[0] || strlen(fmt) > QL_FORMAT_MAX)
        return ql_err_set(err, QL_EINVAL,
                          "partition_desc.partition_date_format: expected 1 to %d characters",
                          QL_FORMAT_MAX);
    const ql_datefmt_t *df;
    ql_err_t ferr = {0};
    if (ql_submit_cache_format(ql_submission_cache(ql_node_submission(api->node)), fmt, &df, &ferr))
        return ql_err_set(err, QL_EINVAL, "partition_desc.partition_date_format: %s", ferr.msg);
    op->partitioned = true;
    snprintf(op->column, sizeof op->column, "%s", col);
    snprintf(op->format, sizeof op->format, "%s", fmt);
    return 0;
}

static void partition_request(ql_http_req_t *req, ql_api_t *api, const char *path_project) {
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    json_t *root = NULL;
    ql_err_t err = {0};
    change_op_t tmp = {0};
    int rc = ql_api_json_parse(body.p, body.len, &root, &err);
    if (!rc)
        rc = parse_partition(api, root, &tmp, &err);
    if (ql_api_body_refused(req, rc, &root, &err))
        return;
    const char *project = path_project ? path_project : ql_api_json_str(root, "project");
    change_op_t *op = model_op(api, req, project, ql_http_req_param(req, "model"));
    if (op) {
        op->partitioned = tmp.partitioned;
        memcpy(op->column, tmp.column, sizeof op->column);
        memcpy(op->format, tmp.format, sizeof op->format);
        if (!ql_api_submit(api, req, partition_fn, op, partition_done))
            op_free(op);
    }
    json_decref(root);
}

static void h_partition_desc(ql_http_req_t *req, void *arg) {
    partition_request(req, arg, ql_http_req_param(req, "project"));
}

static void h_partition(ql_http_req_t *req, void *arg) {
    partition_request(req, arg, NULL);
}

int ql_api_routes_lifecycle(ql_api_t *api) {
    static const ql_api_route_t routes[] = {
        {"DELETE", QL_API_BASE "/projects/{project}", "projects.delete", h_project_delete},
        {"DELETE", QL_API_BASE "/models/{model}", "models.delete", h_model_delete},
        {"PUT", QL_API_BASE "/models/{model}/name", "models.name", h_rename},
        {"PUT", QL_API_BASE "/models/{project}/{model}/partition_desc", "models.partition_desc",
         h_partition_desc},
        {"PUT", QL_API_BASE "/models/{model}/partition", "models.partition", h_partition},
    };
    return ql_api_add_routes(api, routes, sizeof routes / sizeof routes[0]);
}
