/*
 * PUT /jobs/status: PAUSE, RESUME, DISCARD and RESTART on a list of jobs. Every job is checked
 * first on a read snapshot; then each action is applied in its own transaction through the
 * scheduler when this server schedules (it stops a running step's process), or through the
 * writer directly (ql_job_apply_action) on a standby. The answer comes once every action is
 * durable.
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct action_op {
    ql_api_op_t base;
    ql_api_ids_req_t r;
    size_t pending;
    int first_rc;
    ql_err_t first_err;
} action_op_t;

static void action_finish(action_op_t *op) {
    if (op->first_rc) {
        ql_api_fail_err(op->base.req, op->first_rc, &op->first_err);
    } else {
        char what[64];
        snprintf(what, sizeof what, "job action=%s jobs=%zu", ql_action_name(op->r.action),
                 op->r.n);
        ql_api_log_change(op->base.api, op->base.req, what);
        ql_api_ok(op->base.req, json_string(""), NULL);
    }
    ql_api_ids_req_free(&op->r);
    free(op);
}

static void action_one_done(void *arg, int status, const ql_err_t *err) {
    action_op_t *op = arg;
    if (status && !op->first_rc) {
        op->first_rc = status;
        if (err)
            op->first_err = *err;
    }
    if (!status)
        op->base.api->stats.actions++;
    if (--op->pending == 0)
        action_finish(op);
}

/* Without a scheduler in this process: every action in one transaction. */
static int actions_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    action_op_t *op = arg;
    for (size_t i = 0; i < op->r.n; i++) {
        ql_state_t was;
        int rc = ql_job_apply_action(txn, &op->r.ids[i], op->r.action, op->base.now, &was, err);
        if (rc)
            return rc;
    }
    return 0;
}

static void actions_done(void *arg, int status, const ql_err_t *err) {
    action_op_t *op = arg;
    if (status) {
        op->first_rc = status;
        if (err)
            op->first_err = *err;
    } else {
        op->base.api->stats.actions += op->r.n;
    }
    action_finish(op);
}

/* Checks every job before any action is applied: it exists, is in the project, and its state
 * allows the action (the same check runs again inside each action's transaction). */
static int check_actions(ql_txn_t *txn, const ql_api_ids_req_t *r, ql_err_t *err) {
    for (size_t i = 0; i < r->n; i++) {
        char ids[QL_ID_STR_LEN + 1];
        ql_id_format(&r->ids[i], ids);
        ql_job_t j;
        int rc = ql_job_get(txn, &r->ids[i], 0, &j);
        if (rc == QL_ENOTFOUND)
            return ql_err_set(err, rc, "job %s not found", ids);
        if (rc)
            return ql_err_set(err, rc, "cannot read job %s: %s", ids, ql_strerror(rc));
        if (r->project && r->project[0] && strcmp(r->project, j.project) != 0)
            rc = ql_err_set(err, QL_ENOTFOUND, "job %s not found in project '%.100s'", ids,
                            r->project);
        else if (!ql_action_allowed(r->action, j.state))
            rc = ql_err_set(err, QL_EACTION, "job %s: %s is not allowed while the job is %s (%s)",
                            ids, ql_action_name(r->action), ql_job_display_status(j.state),
                            ql_state_name(j.state));
        ql_job_free(&j);
        if (rc)
            return rc;
    }
    return 0;
}

static void h_status(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    action_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op)
        return;
    ql_err_t err = {0};
    int rc = ql_api_parse_job_status(body.p, body.len, &op->r, &err);
    if (!rc) {
        ql_txn_t *txn = ql_api_read_txn(api, req);
        if (!txn) {
            ql_api_ids_req_free(&op->r);
            free(op);
            return;
        }
        ql_project_t p;
        if (op->r.project && op->r.project[0] &&
            (rc = ql_api_get_project(txn, op->r.project, &p, &err)) == 0)
            ql_project_free(&p);
        if (!rc)
            rc = check_actions(txn, &op->r, &err);
        ql_txn_abort(txn);
    }
    if (rc) {
        ql_api_ids_req_free(&op->r);
        free(op);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    ql_sched_t *sched = ql_node_sched(api->node);
    if (!sched) {
        if (!ql_api_submit(api, req, actions_fn, op, actions_done)) {
            ql_api_ids_req_free(&op->r);
            free(op);
        }
        return;
    }
    /* One reference for this loop, so no answer can finish the request while it runs. */
    op->pending = 1;
    for (size_t i = 0; i < op->r.n; i++) {
        rc = ql_sched_action(sched, &op->r.ids[i], op->r.action, action_one_done, op);
        if (rc) {
            if (!op->first_rc) {
                op->first_rc = rc;
                ql_err_set(&op->first_err, rc, "cannot apply %s: %s", ql_action_name(op->r.action),
                           ql_strerror(rc));
            }
            break;
        }
        op->pending++;
    }
    if (--op->pending == 0)
        action_finish(op);
}

int ql_api_routes_job_actions(ql_api_t *api) {
    return ql_http_router_add(api->router, "PUT", QL_API_BASE "/jobs/status", "jobs.status",
                              QL_HTTP_ROUTE_AUTH, h_status, api);
}
