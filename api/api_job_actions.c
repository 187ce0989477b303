/*
 * PUT /jobs/status: PAUSE, RESUME, DISCARD and RESTART on a list of jobs. Every job is checked
 * first on a read snapshot; then each action is applied in its own transaction through the
 * scheduler when this server schedules (it stops a running step's process), or through the
 * writer directly (ql_job_apply_action) on a standby. The answer comes once every action is
 * durable.
 *
 * Kylin's other form, `statuses` without `job_ids`, acts on every job of the project in those
 * states: the jobs are chosen and acted on inside ONE write transaction, so a job that changes
 * state meanwhile is judged by its state at the commit; then the scheduler of this process is
 * told that jobs changed (ql_sched_notice), as when another process acts on them, and stops the
 * steps of the jobs no longer RUNNING.
 */
#include "api_int.h"
#include "base/ql_buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct action_op {
    ql_api_op_t base;
    ql_api_ids_req_t r;
    size_t pending;
    size_t n_done; /* statuses form: the jobs acted on */
    int first_rc;
    ql_err_t first_err;
} action_op_t;

static void action_finish(action_op_t *op) {
    if (op->first_rc) {
        ql_api_fail_err(op->base.req, op->first_rc, &op->first_err);
    } else {
        char what[64];
        snprintf(what, sizeof what, "job action=%s jobs=%zu", ql_action_name(op->r.action),
                 op->r.n ? op->r.n : op->n_done);
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
 * allows the action (the same check runs again inside each action's transaction). With
 * statuses too, the jobs in other states are then left out of r, as Kylin filters job_ids by
 * statuses. */
static int check_actions(ql_txn_t *txn, ql_api_ids_req_t *r, ql_err_t *err) {
    size_t kept = 0;
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
        bool keep = !r->status_mask || (r->status_mask & (1u << j.state));
        ql_job_free(&j);
        if (rc)
            return rc;
        if (keep)
            r->ids[kept++] = r->ids[i];
    }
    r->n = kept;
    return 0;
}

/* ---- statuses: every job of the project in those states ---- */

typedef struct chosen {
    ql_id_t *ids;
    size_t n, cap;
    uint32_t mask;
} chosen_t;

static int choose_cb(const ql_id_t *id, ql_state_t state, int64_t mtime, void *arg) {
    (void)mtime;
    chosen_t *c = arg;
    if (!(c->mask & (1u << state)))
        return 0;
    if (QL_ARRAY_RESERVE(c->ids, c->cap, c->n + 1, 64))
        return UV_ENOMEM;
    c->ids[c->n++] = *id;
    return 0;
}

/* Chooses the jobs first (the index walk must not see the changes it causes), then acts. */
static int statuses_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    action_op_t *op = arg;
    chosen_t c = {.mask = op->r.status_mask};
    int rc = ql_job_foreach_recent(txn, op->r.project, true, choose_cb, &c);
    if (rc)
        ql_err_set(err, rc, "cannot list the jobs: %s", ql_strerror(rc));
    for (size_t i = 0; !rc && i < c.n; i++) {
        ql_state_t was;
        rc = ql_job_apply_action(txn, &c.ids[i], op->r.action, op->base.now, &was, err);
    }
    op->n_done = rc ? 0 : c.n;
    free(c.ids);
    return rc;
}

static void statuses_done(void *arg, int status, const ql_err_t *err) {
    action_op_t *op = arg;
    ql_sched_t *sched = ql_node_sched(op->base.api->node);
    if (!status && op->n_done && sched)
        ql_sched_notice(sched, NULL);
    if (!status)
        op->base.api->stats.actions += op->n_done;
    else {
        op->first_rc = status;
        if (err)
            op->first_err = *err;
    }
    action_finish(op);
}

/* Kylin refuses a status in which the action is never allowed (JOB_ACTION_ILLEGAL), before it
 * looks at any job. */
static int check_statuses(const ql_api_ids_req_t *r, ql_err_t *err) {
    for (int s = 0; s < QL_JOB_STATE_COUNT; s++)
        if ((r->status_mask & (1u << s)) && !ql_action_allowed(r->action, (ql_state_t)s))
            return ql_err_set(err, QL_EACTION, "statuses: %s is not allowed on %s jobs (%s)",
                              ql_action_name(r->action), ql_job_display_status((ql_state_t)s),
                              ql_state_name((ql_state_t)s));
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
    bool by_status = false;
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
        by_status = op->r.n == 0;
        if (!rc)
            rc = check_statuses(&op->r, &err);
        if (!rc && !by_status)
            rc = check_actions(txn, &op->r, &err);
        ql_txn_abort(txn);
    }
    if (rc) {
        ql_api_ids_req_free(&op->r);
        free(op);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    if (by_status) {
        if (!ql_api_submit(api, req, statuses_fn, op, statuses_done)) {
            ql_api_ids_req_free(&op->r);
            free(op);
        }
        return;
    }
    if (!op->r.n) { /* every job named was in another state than the statuses */
        action_finish(op);
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
