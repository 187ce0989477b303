/*
 * Models: POST /models, GET /models, PUT /models/{model}/segment_config,
 * PUT /models/{model}/status and Qilin's GET /models/{model}/auto_segment_build/status (the
 * dispatcher's latest decision).
 */
#include "api_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct model_op {
    ql_api_op_t base;
    char project[QL_NAME_MAX + 1];
    char name[QL_NAME_MAX + 1];
    ql_model_t model; /* create: the new model; updates: the model as stored */
    ql_api_model_segcfg_req_t segcfg;
    ql_model_status_t status;
} model_op_t;

static void op_free(model_op_t *op) {
    ql_model_free(&op->model);
    json_decref(op->segcfg.root);
    free(op);
}

static void model_done(void *arg, int status, const ql_err_t *err) {
    model_op_t *op = arg;
    if (status)
        ql_api_fail_err(op->base.req, status, err);
    else {
        ql_api_log_change(op->base.api, op->base.req, "model created");
        ql_api_jw_t w;
        ql_api_jw_envelope(&w);
        ql_api_jw_model(&w, &op->model);
        ql_api_jw_respond(op->base.req, &w, NULL);
    }
    op_free(op);
}

static void empty_done(void *arg, int status, const ql_err_t *err) {
    model_op_t *op = arg;
    ql_api_answer_change(op->base.api, op->base.req, status, err, "model updated");
    op_free(op);
}

/* ---- POST /models ---- */

static int create_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    model_op_t *op = arg;
    return ql_meta_create_model(txn, &op->model, op->base.now, err);
}

static void h_create(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    ql_api_model_req_t r;
    ql_err_t err = {0};
    int rc = ql_api_parse_model(body.p, body.len, &r, &err);
    json_decref(r.root);
    if (!rc && r.model.partitioned) {
        /* ICU checks the pattern here, on the loop thread, never inside the writer; the format
         * stays cached (in the submission service's cache) for the model's builds. */
        const ql_datefmt_t *fmt;
        ql_err_t ferr = {0}; /* not err itself: its message is an argument of the new one */
        if ((rc = ql_submit_cache_format(ql_submission_cache(ql_node_submission(api->node)),
                                         r.model.partition_format, &fmt, &ferr)))
            ql_err_set(&err, QL_EINVAL, "partition_desc.partition_date_format: %s", ferr.msg);
    }
    if (!rc && r.model.job_template[0] &&
        !ql_templates_has_set(ql_node_templates(api->node), r.model.job_template))
        rc = ql_err_set(&err, QL_EINVAL, "job_template: '%s' is not a template set of %s",
                        r.model.job_template, ql_node_templates(api->node)->source);
    if (rc) {
        ql_model_free(&r.model);
        ql_api_fail_err(req, QL_EINVAL, &err);
        return;
    }
    model_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op) {
        ql_model_free(&r.model);
        return;
    }
    op->model = r.model; /* moved */
    if (!ql_api_submit(api, req, create_fn, op, model_done))
        op_free(op);
}

/* ---- GET /models ---- */

typedef struct {
    ql_txn_t *txn;
    const char *filter;
    bool exact;
    ql_api_pager_t pg;
    bool counted; /* the total comes from counters: stop after the page */
    ql_api_jw_t *w;
} list_t;

static bool name_matches(const list_t *l, const char *name) {
    if (l->filter && l->exact)
        return strcasecmp(name, l->filter) == 0;
    return ql_api_name_contains(name, l->filter);
}

static int model_cb(const ql_model_t *m, void *arg) {
    list_t *l = arg;
    if (!name_matches(l, m->name))
        return 0;
    if (ql_api_pager_take(&l->pg))
        ql_api_jw_model(l->w, m);
    return l->counted && ql_api_pager_full(&l->pg) ? 1 : 0;
}

static int project_cb(const ql_project_t *p, void *arg) {
    list_t *l = arg;
    int rc = ql_model_foreach(l->txn, p->name, model_cb, l);
    if (rc)
        return rc;
    return l->counted && ql_api_pager_full(&l->pg) ? 1 : 0;
}

typedef struct {
    ql_txn_t *txn;
    uint64_t total;
} count_t;

static int count_cb(const ql_project_t *p, void *arg) {
    count_t *c = arg;
    uint64_t n;
    int rc = ql_model_count(c->txn, p->name, &n);
    c->total += n;
    return rc;
}

static void h_list(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_page_t page;
    if (!ql_api_begin_page(api, req, &page))
        return;
    ql_err_t err = {0};
    bool exact;
    if (ql_api_query_bool(req, "exact", false, &exact, &err)) {
        ql_api_fail_err(req, QL_EINVAL, &err);
        return;
    }
    const char *project = ql_api_query_given(req, "project");
    const char *filter = ql_api_query_given(req, "model_name");
    ql_txn_t *txn = ql_api_read_txn(api, req);
    if (!txn)
        return;
    ql_api_jw_t w;
    ql_api_jw_page_start(&w);
    list_t l = {.txn = txn,
                .filter = filter,
                .exact = exact,
                .pg = ql_api_pager(&page),
                .counted = filter == NULL,
                .w = &w};
    uint64_t total = 0;
    int rc = 0;
    if (project) {
        ql_project_t p;
        if ((rc = ql_api_get_project(txn, project, &p, &err)) == 0) {
            ql_project_free(&p);
            if (!filter)
                rc = ql_model_count(txn, project, &total);
            if (!rc)
                rc = ql_model_foreach(txn, project, model_cb, &l);
        }
    } else {
        count_t c = {.txn = txn};
        if (!filter && (rc = ql_project_foreach(txn, count_cb, &c)) == 0)
            total = c.total;
        if (!rc)
            rc = ql_project_foreach(txn, project_cb, &l);
    }
    ql_txn_abort(txn);
    if (rc) {
        ql_api_jw_free(&w);
        if (err.code)
            ql_api_fail_err(req, rc, &err);
        else
            ql_api_fail(req, rc, "cannot list the models: %s", ql_strerror(rc));
        return;
    }
    ql_api_jw_page_close(&w, &page, filter ? l.pg.seen : total);
    ql_api_jw_respond(req, &w, NULL);
}

/* ---- PUT /models/{model}/segment_config and /status ---- */

static int load_model(ql_txn_t *txn, model_op_t *op, ql_err_t *err) {
    ql_model_free(&op->model);
    return ql_api_get_model(txn, op->project, op->name, QL_DECODE_KEEP_EXTRA, &op->model, err);
}

static int store_model(ql_txn_t *txn, model_op_t *op, ql_err_t *err) {
    op->model.modify_time = op->base.now;
    int rc = ql_model_put(txn, &op->model);
    return rc ? ql_err_set(err, rc, "cannot store model '%s': %s", op->name, ql_strerror(rc)) : 0;
}

/* Merges the given fields over the stored config, validates the result and stores it: the
 * check and the write see the same record, so a config is stored only if it is valid. */
static int segcfg_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    model_op_t *op = arg;
    int rc = load_model(txn, op, err);
    if (rc)
        return rc;
    const ql_api_model_segcfg_req_t *r = &op->segcfg;
    ql_auto_build_t a = op->model.auto_build;
    if (!a.present) {
        memset(&a, 0, sizeof a);
        a.logical_date_offset_days = INT64_MIN;
    }
    bool had_trigger = a.present, had_start = a.present, had_end = a.present;
    if (r->has_enabled)
        a.enabled = r->enabled;
    if (r->trigger_time) {
        snprintf(a.trigger_time, sizeof a.trigger_time, "%s", r->trigger_time);
        had_trigger = true;
    }
    if (r->start_time) {
        snprintf(a.data_range_start_time, sizeof a.data_range_start_time, "%s", r->start_time);
        had_start = true;
    }
    if (r->end_time) {
        snprintf(a.data_range_end_time, sizeof a.data_range_end_time, "%s", r->end_time);
        had_end = true;
    }
    if (r->has_offset)
        a.logical_date_offset_days = r->offset_days;
    if (a.logical_date_offset_days == INT64_MIN && had_trigger)
        return ql_err_set(err, QL_EINVAL,
                          "auto_segment_build: field 'logical_date_offset_days': is required");
    ql_auto_build_cfg_t cfg;
    ql_err_t verr = {0};
    if (ql_auto_build_validate(a.enabled, had_trigger ? a.trigger_time : NULL,
                               a.logical_date_offset_days,
                               had_start ? a.data_range_start_time : NULL,
                               had_end ? a.data_range_end_time : NULL, &cfg, &verr))
        return ql_err_set(err, QL_EINVAL, "auto_segment_build: %s", verr.msg);
    a.present = true;
    op->model.auto_build = a;
    return store_model(txn, op, err);
}

static int status_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    model_op_t *op = arg;
    int rc = load_model(txn, op, err);
    if (rc)
        return rc;
    op->model.status = op->status;
    return store_model(txn, op, err);
}

static model_op_t *path_op(ql_api_t *api, ql_http_req_t *req, const char *project) {
    const char *name = ql_http_req_param(req, "model");
    if (!project || !project[0]) {
        ql_api_fail(req, QL_EINVAL, "project: required (the project of model '%.100s')", name);
        return NULL;
    }
    if (strlen(project) > QL_NAME_MAX || strlen(name) > QL_NAME_MAX) {
        ql_api_fail(req, QL_EINVAL, "%s: longer than %d characters",
                    strlen(project) > QL_NAME_MAX ? "project" : "model", QL_NAME_MAX);
        return NULL;
    }
    model_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op) {
        snprintf(op->project, sizeof op->project, "%s", project);
        snprintf(op->name, sizeof op->name, "%s", name);
    }
    return op;
}

static void h_segcfg(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    ql_api_model_segcfg_req_t r;
    ql_err_t err = {0};
    if (ql_api_body_refused(req, ql_api_parse_model_segcfg(body.p, body.len, &r, &err), &r.root,
                            &err))
        return;
    model_op_t *op = path_op(api, req, r.project);
    if (!op) {
        json_decref(r.root);
        return;
    }
    op->segcfg = r; /* moved, with its root */
    if (!ql_api_submit(api, req, segcfg_fn, op, empty_done))
        op_free(op);
}

static void h_status(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    ql_api_model_status_req_t r;
    ql_err_t err = {0};
    if (ql_api_body_refused(req, ql_api_parse_model_status(body.p, body.len, &r, &err), &r.root,
                            &err))
        return;
    model_op_t *op = path_op(api, req, r.project);
    if (op) {
        op->status = r.status;
        if (!ql_api_submit(api, req, status_fn, op, empty_done))
            op_free(op);
    }
    json_decref(r.root);
}

/* ---- GET /models/{model}/auto_segment_build/status ---- */

static json_t *decision_json(const ql_decision_t *d) {
    json_t *o = json_object();
    json_t *rel = json_array();
    size_t n = d->n_related < QL_DECISION_MAX_RELATED ? d->n_related : QL_DECISION_MAX_RELATED;
    for (size_t i = 0; i < n; i++)
        json_array_append_new(rel, ql_api_id_json(&d->related[i]));
    json_object_set_new(o, "project", json_string(d->project));
    json_object_set_new(o, "model", json_string(d->model_name));
    json_object_set_new(o, "state", json_string(ql_cycle_state_name(d->state)));
    json_object_set_new(o, "target_start", json_integer(d->target_start));
    json_object_set_new(o, "target_end", json_integer(d->target_end));
    json_object_set_new(o, "occurrence", json_integer(d->occurrence));
    json_object_set_new(o, "related_segments", rel);
    json_object_set_new(o, "related_segments_count", json_integer((json_int_t)d->n_related));
    json_object_set_new(
        o, "reason",
        json_string(d->state == QL_CYCLE_SKIPPED ? ql_skip_reason_name(d->reason) : d->message));
    json_object_set_new(o, "message", json_string(d->message));
    json_object_set_new(o, "job_id", ql_api_id_json(&d->job));
    json_object_set_new(o, "from_cache", json_boolean(d->from_cache));
    json_object_set_new(o, "evaluated_at", json_integer(d->evaluated_at));
    return o;
}

static void auto_status_answer(ql_api_t *api, ql_http_req_t *req, const ql_decision_t *found,
                               const ql_decision_t *blank, bool has_dispatcher, json_t *extra);

static void h_auto_status(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    const char *project = ql_http_req_query(req, "project");
    const char *name = ql_http_req_param(req, "model");
    ql_txn_t *txn = ql_api_begin_read(api, req);
    if (!txn)
        return;
    ql_model_t m;
    ql_err_t err = {0};
    int rc = ql_api_get_model(txn, project, name, 0, &m, &err);
    /* The console shows times in the project's zone, and when the next cycle comes. */
    char zone[128] = "UTC";
    ql_project_t p;
    ql_decision_t d = {0}, stored = {0};
    bool have_stored = false;
    if (!rc && ql_api_get_project(txn, m.project, &p, NULL) == 0) {
        ql_api_project_zone(api, &p, zone, sizeof zone);
        ql_project_free(&p);
    }
    /* The master's latest decision as kept in the store: the answer of a server whose own
     * dispatcher has not evaluated the model (a standby, a query server, a fresh start). */
    if (!rc)
        have_stored = ql_dispatch_decision_load(txn, &m.id, &stored) == 0;
    ql_txn_abort(txn);
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        return;
    }
    json_t *extra = json_pack("{s:s, s:I}", "timezone", zone, "next_trigger",
                              (json_int_t)ql_api_next_trigger(&m, zone, ql_api_now(api)));
    d.model = m.id;
    snprintf(d.project, sizeof d.project, "%s", m.project);
    snprintf(d.model_name, sizeof d.model_name, "%s", m.name);
    ql_model_free(&m);
    ql_dispatcher_t *disp = ql_node_dispatcher(api->node);
    bool live = disp && ql_dispatcher_decision(disp, &d.model, &d) == 0;
    if (!live && have_stored) {
        memcpy(stored.project, d.project, sizeof d.project);
        memcpy(stored.model_name, d.model_name, sizeof d.model_name);
    }
    auto_status_answer(api, req, live ? &d : have_stored ? &stored : NULL, &d, disp != NULL, extra);
}

/* Says why this server has no dispatcher of its own (a query server, a standby), then tail. */
static void no_dispatcher_msg(ql_api_t *api, char *msg, size_t cap, const char *tail) {
    const char *holder = ql_node_lock_holder(api->node);
    if (!api->writes_allowed)
        snprintf(msg, cap, "this server runs in mode '%s' and has no dispatcher: %s", api->mode,
                 tail);
    else
        snprintf(msg, cap,
                 "this server is a standby and runs no dispatcher (the job engine lock is held "
                 "by %s): %s",
                 holder[0] ? holder : "another server", tail);
}

/* The answer: the decision found (this server's dispatcher's, or the master's as kept in the
 * store; NULL: none), or UNKNOWN naming the model (blank), with extra (taken) merged in. */
static void auto_status_answer(ql_api_t *api, ql_http_req_t *req, const ql_decision_t *found,
                               const ql_decision_t *blank, bool has_dispatcher, json_t *extra) {
    char msg[400] = "";
    json_t *o = decision_json(found ? found : blank);
    if (found && found == blank) {
        json_object_set_new(o, "source", json_string("dispatcher"));
    } else if (found) {
        json_object_set_new(o, "source", json_string("store"));
        const char *tail = "this is the job-scheduler master's latest decision, as kept in the "
                           "store (evaluated_at: when it was reached)";
        if (has_dispatcher)
            snprintf(msg, sizeof msg, "%s", tail);
        else
            no_dispatcher_msg(api, msg, sizeof msg, tail);
    } else if (!has_dispatcher) {
        no_dispatcher_msg(api, msg, sizeof msg, "ask the job-scheduler master");
        json_object_set_new(o, "state", json_string("UNKNOWN"));
        json_object_set_new(o, "reason", json_string("no dispatcher on this server"));
    } else {
        json_object_set_new(o, "reason", json_string("not evaluated yet"));
        snprintf(msg, sizeof msg,
                 "the dispatcher has not evaluated this model since the server started");
    }
    json_object_update(o, extra);
    json_decref(extra);
    ql_api_ok(req, o, msg[0] ? msg : NULL);
}

int ql_api_routes_models(ql_api_t *api) {
    static const ql_api_route_t routes[] = {
        {"POST", QL_API_BASE "/models", "models.create", h_create},
        {"GET", QL_API_BASE "/models", "models.list", h_list},
        {"PUT", QL_API_BASE "/models/{model}/segment_config", "models.segment_config", h_segcfg},
        {"PUT", QL_API_BASE "/models/{model}/status", "models.status", h_status},
        {"GET", QL_API_BASE "/models/{model}/auto_segment_build/status", "models.auto_build_status",
         h_auto_status},
    };
    return ql_api_add_routes(api, routes, sizeof routes / sizeof routes[0]);
}
