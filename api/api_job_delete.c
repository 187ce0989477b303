/*
 * DELETE /jobs?project=&job_ids=&statuses=: deletes final jobs with their steps, stored outputs
 * and step logs, as Kylin 5's (docs/rest.md, Delete jobs). The jobs are job_ids (every job of
 * the project, or of every project without one, when none is given), kept only when their status
 * is among statuses (when given). The selection and the deletion run in one write transaction,
 * so a live job among them (one that is not FINISHED or DISCARDED) refuses the whole request,
 * naming it, and nothing is deleted. The step logs go once that transaction committed.
 */
#include "api_int.h"
#include "base/ql_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct delete_op {
    ql_api_op_t base;
    char project[QL_NAME_MAX + 1]; /* "": every project */
    ql_id_t *ids;                  /* owned; job_ids as given */
    size_t n_ids;
    uint32_t mask; /* statuses: state bits, 0: any */
    /* Written by the mutation, anew at each run (ql_writer.h): the jobs deleted. */
    ql_id_t *sel;
    size_t n_sel, cap_sel;
} delete_op_t;

static void op_free(delete_op_t *op) {
    free(op->ids);
    free(op->sel);
    free(op);
}

static int sel_add(delete_op_t *op, const ql_id_t *id) {
    int rc = QL_ARRAY_RESERVE(op->sel, op->cap_sel, op->n_sel + 1, 64);
    if (rc)
        return rc;
    op->sel[op->n_sel++] = *id;
    return 0;
}

static int select_cb(const ql_id_t *id, ql_state_t state, int64_t modify_time, void *arg) {
    (void)modify_time;
    delete_op_t *op = arg;
    if (op->mask && !(op->mask & (1u << state)))
        return 0;
    return sel_add(op, id);
}

/* The selection: the listed jobs whose status is wanted (an unknown one is kept, for
 * ql_meta_delete_jobs to name), or every job of the project with a wanted status. */
static int select_jobs(ql_txn_t *txn, delete_op_t *op) {
    op->n_sel = 0;
    if (op->n_ids == 0)
        return ql_job_foreach_recent(txn, op->project[0] ? op->project : NULL, true, select_cb, op);
    for (size_t i = 0; i < op->n_ids; i++) {
        ql_job_t j;
        int rc = ql_job_get(txn, &op->ids[i], 0, &j);
        if (rc && rc != QL_ENOTFOUND)
            return rc;
        bool keep = rc == QL_ENOTFOUND || !op->mask || (op->mask & (1u << j.state));
        if (rc == 0)
            ql_job_free(&j);
        if (keep && (rc = sel_add(op, &op->ids[i])))
            return rc;
    }
    return 0;
}

static int delete_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    delete_op_t *op = arg;
    int rc = select_jobs(txn, op);
    if (rc)
        return ql_err_set(err, rc, "cannot select the jobs to delete: %s", ql_strerror(rc));
    return ql_meta_delete_jobs(txn, op->project, op->sel, op->n_sel, err);
}

static void delete_done(void *arg, int status, const ql_err_t *err) {
    delete_op_t *op = arg;
    ql_api_t *api = op->base.api;
    if (!status) {
        /* The records are gone for good; a log that cannot be removed is only logged. */
        ql_store_t *store = ql_node_store(api->node);
        for (size_t i = 0; i < op->n_sel; i++) {
            int rc = ql_store_remove_job_logs(store, &op->sel[i]);
            if (rc) {
                char id[QL_ID_STR_LEN + 1];
                ql_id_format(&op->sel[i], id);
                ql_log(api->log, QL_LOG_WARN, "api", "cannot remove the step logs of job %s: %s",
                       id, ql_strerror(rc));
            }
        }
        api->stats.jobs_deleted += op->n_sel;
    }
    char what[64];
    snprintf(what, sizeof what, "jobs deleted jobs=%zu", op->n_sel);
    ql_api_answer_change(api, op->base.req, status, err, what);
    op_free(op);
}

/* job_ids and statuses into op; 400 naming the parameter. */
static int parse_query(ql_http_req_t *req, delete_op_t *op, ql_err_t *err) {
    size_t n = ql_http_req_query_values(req, "job_ids", NULL, 0);
    if (n > QL_API_MAX_IDS)
        return ql_err_set(err, QL_EINVAL, "job_ids: more than %d ids", QL_API_MAX_IDS);
    const char *vals[QL_API_MAX_IDS];
    if (n) {
        if (!(op->ids = calloc(n, sizeof *op->ids)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        ql_http_req_query_values(req, "job_ids", vals, n);
        for (size_t i = 0; i < n; i++)
            if (ql_id_parse(vals[i], &op->ids[i]))
                return ql_err_set(err, QL_EINVAL, "job_ids[%zu]: '%.64s' is not a job id", i,
                                  vals[i]);
        op->n_ids = n;
    }
    enum { MAX_STATUSES = 16 };
    n = ql_http_req_query_values(req, "statuses", vals, MAX_STATUSES);
    if (n > MAX_STATUSES)
        return ql_err_set(err, QL_EINVAL, "statuses: more than %d values", MAX_STATUSES);
    for (size_t i = 0; i < n; i++) {
        uint32_t m = ql_job_display_mask(vals[i]);
        if (!m)
            return ql_err_set(err, QL_EINVAL,
                              "statuses: '%.64s' is not a job status (PENDING, RUNNING, ERROR, "
                              "FINISHED, STOPPED, DISCARDED)",
                              vals[i]);
        op->mask |= m;
    }
    return 0;
}

static void h_delete(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    delete_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op)
        return;
    ql_err_t err = {0};
    int rc = parse_query(req, op, &err);
    const char *project = ql_api_query_given(req, "project");
    if (!rc && project) {
        ql_txn_t *txn = ql_api_read_txn(api, req);
        if (!txn) {
            op_free(op);
            return;
        }
        ql_project_t p;
        if ((rc = ql_api_get_project(txn, project, &p, &err)) == 0) {
            snprintf(op->project, sizeof op->project, "%s", p.name);
            ql_project_free(&p);
        }
        ql_txn_abort(txn);
    }
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        op_free(op);
        return;
    }
    if (!ql_api_submit(api, req, delete_fn, op, delete_done))
        op_free(op);
}

int ql_api_routes_job_delete(ql_api_t *api) {
    return ql_http_router_add(api->router, "DELETE", QL_API_BASE "/jobs", "jobs.delete",
                              QL_HTTP_ROUTE_AUTH, h_delete, api);
}
