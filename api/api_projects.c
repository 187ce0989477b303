/*
 * Projects: POST /projects, GET /projects, PUT /projects/{project}/config and
 * PUT /projects/{project}/segment_config. Writes are writer mutations answered after commit.
 */
#include "api_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct project_op {
    ql_api_op_t base;
    char name[QL_NAME_MAX + 1];
    ql_project_t project;       /* create: the new project; updates: the result */
    ql_api_config_req_t config; /* PUT config */
    bool has_enabled, enabled;  /* PUT segment_config */
} project_op_t;

static void op_free(project_op_t *op) {
    ql_project_free(&op->project);
    ql_api_config_req_free(&op->config);
    free(op);
}

static void respond_project(ql_http_req_t *req, const ql_project_t *p) {
    ql_api_jw_t w;
    ql_api_jw_envelope(&w);
    ql_api_jw_project(&w, p);
    ql_api_jw_respond(req, &w, NULL);
}

/* Every project write answers with the project as stored. */
static void project_done(void *arg, int status, const ql_err_t *err) {
    project_op_t *op = arg;
    if (status) {
        ql_api_fail_err(op->base.req, status, err);
    } else {
        ql_api_log_change(op->base.api, op->base.req, "project created");
        respond_project(op->base.req, &op->project);
    }
    op_free(op);
}

/* Answers "" (Kylin's data for config updates). */
static void empty_done(void *arg, int status, const ql_err_t *err) {
    project_op_t *op = arg;
    ql_api_answer_change(op->base.api, op->base.req, status, err, "project updated");
    op_free(op);
}

/* ---- POST /projects ---- */

static int create_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    project_op_t *op = arg;
    return ql_meta_create_project(txn, &op->project, op->base.now, err);
}

static void h_create(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    ql_api_project_req_t r;
    ql_err_t err = {0};
    int rc = ql_api_parse_project(body.p, body.len, &r, &err);
    if (rc) {
        ql_api_project_req_free(&r);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    project_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op) {
        snprintf(op->project.name, sizeof op->project.name, "%s", r.name);
        bool oom = r.description && !(op->project.description = strdup(r.description));
        /* Kylin's override_kylin_properties are the project's first configuration. */
        for (size_t i = 0; !oom && i < r.config.n; i++)
            oom = r.config.values[i] &&
                  ql_strmap_set(&op->project.config, r.config.keys[i], r.config.values[i]);
        if (oom) {
            ql_api_fail(req, UV_ENOMEM, "out of memory");
            op_free(op);
        } else if (!ql_api_submit(api, req, create_fn, op, project_done)) {
            op_free(op);
        }
    }
    ql_api_project_req_free(&r);
}

/* ---- GET /projects ---- */

typedef struct {
    const char *filter;
    ql_api_pager_t pg;
    ql_api_jw_t *w;
} list_t;

static int list_cb(const ql_project_t *p, void *arg) {
    list_t *l = arg;
    if (!ql_api_name_contains(p->name, l->filter))
        return 0;
    if (ql_api_pager_take(&l->pg))
        ql_api_jw_project(l->w, p);
    /* Without a filter the total comes from the counter: stop after the page. */
    return !l->filter && ql_api_pager_full(&l->pg) ? 1 : 0;
}

static void h_list(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_page_t page;
    if (!ql_api_begin_page(api, req, &page))
        return;
    const char *filter = ql_api_query_given(req, "project");
    ql_txn_t *txn = ql_api_read_txn(api, req);
    if (!txn)
        return;
    ql_api_jw_t w;
    ql_api_jw_page_start(&w);
    list_t l = {.filter = filter, .pg = ql_api_pager(&page), .w = &w};
    uint64_t total = 0;
    int rc = filter ? 0 : ql_project_count(txn, &total);
    if (!rc)
        rc = ql_project_foreach(txn, list_cb, &l);
    ql_txn_abort(txn);
    if (rc) {
        ql_api_jw_free(&w);
        ql_api_fail(req, rc, "cannot list the projects: %s", ql_strerror(rc));
        return;
    }
    ql_api_jw_page_close(&w, &page, filter ? l.pg.seen : total);
    ql_api_jw_respond(req, &w, NULL);
}

/* ---- PUT /projects/{project}/config and /segment_config ---- */

static int load_project(ql_txn_t *txn, project_op_t *op, ql_err_t *err) {
    ql_project_free(&op->project);
    int rc = ql_project_get(txn, op->name, QL_DECODE_KEEP_EXTRA, &op->project);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "project '%s' not found", op->name);
    if (rc)
        return ql_err_set(err, rc, "cannot read project '%s': %s", op->name, ql_strerror(rc));
    return 0;
}

static int store_project(ql_txn_t *txn, project_op_t *op, ql_err_t *err) {
    op->project.modify_time = op->base.now;
    int rc = ql_project_put(txn, &op->project);
    return rc ? ql_err_set(err, rc, "cannot store project '%s': %s", op->name, ql_strerror(rc)) : 0;
}

static int config_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    project_op_t *op = arg;
    int rc = load_project(txn, op, err);
    for (size_t i = 0; !rc && i < op->config.n; i++)
        if (ql_strmap_set(&op->project.config, op->config.keys[i], op->config.values[i]))
            rc = ql_err_set(err, UV_ENOMEM, "out of memory");
    return rc ? rc : store_project(txn, op, err);
}

static int segcfg_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    project_op_t *op = arg;
    int rc = load_project(txn, op, err);
    if (rc)
        return rc;
    /* Kylin's own fields of the body were checked and are ignored (ql_api_project_segcfg_req_t):
     * without Qilin's flag the request changes nothing but still needs the project. */
    if (op->has_enabled)
        op->project.auto_segment_build_enabled = op->enabled;
    return store_project(txn, op, err);
}

static project_op_t *path_op(ql_api_t *api, ql_http_req_t *req) {
    const char *name = ql_http_req_param(req, "project");
    if (strlen(name) > QL_NAME_MAX) {
        ql_api_fail(req, QL_EINVAL, "project: longer than %d characters", QL_NAME_MAX);
        return NULL;
    }
    project_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op)
        snprintf(op->name, sizeof op->name, "%s", name);
    return op;
}

static void h_config(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    project_op_t *op = path_op(api, req);
    if (!op)
        return;
    ql_err_t err = {0};
    if (ql_api_parse_config(body.p, body.len, &op->config, &err)) {
        ql_api_fail_err(req, QL_EINVAL, &err);
        op_free(op);
        return;
    }
    if (!ql_api_submit(api, req, config_fn, op, empty_done))
        op_free(op);
}

static void h_segcfg(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_body_t body;
    if (!ql_api_begin_write(api, req, &body))
        return;
    ql_api_project_segcfg_req_t r;
    ql_err_t err = {0};
    if (ql_api_body_refused(req, ql_api_parse_project_segcfg(body.p, body.len, &r, &err), &r.root,
                            &err))
        return;
    json_decref(r.root);
    project_op_t *op = path_op(api, req);
    if (!op)
        return;
    op->has_enabled = r.has_enabled;
    op->enabled = r.enabled;
    if (!ql_api_submit(api, req, segcfg_fn, op, empty_done))
        op_free(op);
}

int ql_api_routes_projects(ql_api_t *api) {
    static const ql_api_route_t routes[] = {
        {"POST", QL_API_BASE "/projects", "projects.create", h_create},
        {"GET", QL_API_BASE "/projects", "projects.list", h_list},
        {"PUT", QL_API_BASE "/projects/{project}/config", "projects.config", h_config},
        {"PUT", QL_API_BASE "/projects/{project}/segment_config", "projects.segment_config",
         h_segcfg},
    };
    return ql_api_add_routes(api, routes, sizeof routes / sizeof routes[0]);
}
