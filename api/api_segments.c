/*
 * Segments: manual builds (POST /models/{model}/segments), merges and refreshes (PUT), deletes
 * (DELETE) and the list (GET). Builds, merges and refreshes are parsed here and carried out by
 * the node's submission service (scheduler/ql_submission.h): it looks up the model, normalizes a
 * build's range, queues the one mutation that creates the jobs (ql_submit_fn, which re-checks
 * overlaps and job conflicts inside the transaction that creates the segment and the job), and
 * answers here only after that commit; it wakes the scheduler itself.
 */
#include "api_int.h"
#include "base/ql_buf.h"

#include <stdlib.h>
#include <string.h>

typedef struct seg_op {
    ql_api_op_t base;
    ql_id_t model;
    ql_id_t *ids; /* owned: the deleted segments */
    size_t n_ids;
} seg_op_t;

static void op_free(seg_op_t *op) {
    free(op->ids);
    free(op);
}

/* The service's answer: the new jobs, or the error (counted as a submission failure when the
 * store's rules refused the write). */
static void submit_done(void *arg, const ql_submission_result_t *res) {
    ql_api_op_t *op = arg;
    ql_api_t *api = op->api;
    if (ql_api_submission_failed(api, op->req, res)) {
        free(op);
        return;
    }
    const char *types[QL_API_MAX_IDS];
    size_t n = res->n_jobs < QL_API_MAX_IDS ? res->n_jobs : QL_API_MAX_IDS;
    for (size_t i = 0; i < n; i++)
        types[i] = res->type;
    if (res->kind == QL_SUBMIT_BUILD)
        api->stats.builds += n;
    else if (res->kind == QL_SUBMIT_MERGE)
        api->stats.merges += n;
    else
        api->stats.refreshes += n;
    if (ql_log_enabled(api->log, QL_LOG_INFO)) {
        char job[QL_ID_STR_LEN + 1], model[QL_ID_STR_LEN + 1];
        ql_id_format(&res->jobs[0], job);
        ql_id_format(&res->model, model);
        ql_log(api->log, QL_LOG_INFO, "api",
               "submitted type=%s jobs=%zu first_job=%s model=%s user=%s", res->type, n, job, model,
               op->user);
    }
    ql_api_ok(op->req, ql_api_jobs_answer(types, res->jobs, n), NULL);
    free(op);
}

/* Hands req to the submission service for the request of op (answered by submit_done). */
static void submit(ql_api_t *api, ql_submission_req_t *sr, ql_api_op_t *op) {
    sr->submitter = op->user;
    sr->now = op->now;
    if (ql_submission_submit(ql_node_submission(api->node), sr, submit_done, op)) {
        ql_api_fail(op->req, UV_EINVAL, "cannot submit the request");
        free(op);
    }
}

/* ---- POST /models/{model}/segments ---- */

static void h_build(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    size_t len;
    const char *body = ql_http_req_body(req, &len);
    ql_api_build_req_t r;
    ql_err_t err = {0};
    int rc = ql_api_parse_build(body, len, &r, &err);
    if (rc) {
        json_decref(r.root);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    ql_api_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op) {
        ql_submission_req_t sr = {
            .kind = QL_SUBMIT_BUILD,
            .project = r.project,
            .model = ql_http_req_param(req, "model"),
            .has_range = r.has_range,
            .start = r.start,
            .end = r.end,
            .priority = r.priority,
            .yarn_queue = r.x.yarn_queue,
            .tag = r.x.tag,
        };
        submit(api, &sr, op);
    }
    json_decref(r.root);
}

/* ---- PUT /models/{model}/segments ---- */

typedef struct names_t {
    ql_api_ids_req_t *r;
    char name[64];
} names_t;

static int name_cb(const ql_segment_t *s, void *arg) {
    names_t *nm = arg;
    ql_api_segment_name(s->start, s->end, nm->name, sizeof nm->name);
    for (size_t i = 0; i < nm->r->n_names; i++)
        if (strcmp(nm->r->names[i], nm->name) == 0) {
            nm->r->ids[i] = s->id;
            break;
        }
    return 0;
}

/* Kylin's names (ql_api_segment_name) to the ids of the model's segments, in r->ids: every
 * name must name a segment of the model (QL_ENOTFOUND naming the first that does not). */
static int resolve_names(ql_api_t *api, ql_http_req_t *req, ql_api_ids_req_t *r, ql_err_t *err) {
    if (!(r->ids = calloc(r->n_names, sizeof *r->ids)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    ql_txn_t *txn;
    int rc = ql_txn_begin(ql_node_store(api->node), false, &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot read the store: %s", ql_strerror(rc));
    ql_model_t m;
    rc = ql_api_get_model(txn, r->project, ql_http_req_param(req, "model"), 0, &m, err);
    if (!rc) {
        names_t nm = {.r = r};
        if ((rc = ql_segment_foreach(txn, &m.id, name_cb, &nm)))
            ql_err_set(err, rc, "cannot list the segments: %s", ql_strerror(rc));
        for (size_t i = 0; !rc && i < r->n_names; i++)
            if (ql_id_is_zero(&r->ids[i]))
                rc = ql_err_set(err, QL_ENOTFOUND,
                                "names[%zu]: segment '%.64s' not found in "
                                "model '%s'",
                                i, r->names[i], m.name);
        ql_model_free(&m);
    }
    ql_txn_abort(txn);
    if (!rc)
        r->n = r->n_names;
    return rc;
}

static void h_merge_refresh(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    size_t len;
    const char *body = ql_http_req_body(req, &len);
    ql_api_ids_req_t r;
    ql_err_t err = {0};
    int rc = ql_api_parse_segments_put(body, len, &r, &err);
    if (!rc && r.n_names)
        rc = resolve_names(api, req, &r, &err);
    if (rc) {
        ql_api_ids_req_free(&r);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    ql_api_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op) {
        /* A merge is one job over the segments; a refresh one job per segment, all or none. */
        ql_submission_req_t sr = {
            .kind = r.merge ? QL_SUBMIT_MERGE : QL_SUBMIT_REFRESH,
            .project = r.project,
            .model = ql_http_req_param(req, "model"),
            .ids = r.ids,
            .n_ids = r.n,
            .priority = r.x.priority,
            .yarn_queue = r.x.yarn_queue,
            .tag = r.x.tag,
        };
        submit(api, &sr, op);
    }
    ql_api_ids_req_free(&r);
}

/* ---- DELETE /models/{model}/segments ---- */

static int delete_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    seg_op_t *op = arg;
    return ql_meta_delete_segments(txn, &op->model, op->ids, op->n_ids, err);
}

static void delete_done(void *arg, int status, const ql_err_t *err) {
    seg_op_t *op = arg;
    ql_api_answer_change(op->base.api, op->base.req, status, err, "segments deleted");
    op_free(op);
}

typedef struct all_t {
    ql_id_t *ids;
    size_t n, cap;
} all_t;

static int all_cb(const ql_segment_t *s, void *arg) {
    all_t *a = arg;
    if (QL_ARRAY_RESERVE(a->ids, a->cap, a->n + 1, 16))
        return UV_ENOMEM;
    a->ids[a->n++] = s->id;
    return 0;
}

/* The segments a DELETE names, in op->ids: every segment of the model (Kylin's purge=true), the
 * ids, or Kylin's names (resolved like PUT's). Runs in the read transaction, after the model. */
static int delete_targets(ql_txn_t *txn, ql_http_req_t *req, const ql_model_t *m, bool purge,
                          seg_op_t *op, ql_err_t *err) {
    if (purge) {
        all_t all = {0};
        int rc = ql_segment_foreach(txn, &m->id, all_cb, &all);
        op->ids = all.ids;
        op->n_ids = all.n;
        return rc ? ql_err_set(err, rc, "cannot list the segments: %s", ql_strerror(rc)) : 0;
    }
    size_t n_ids = ql_http_req_query_values(req, "ids", NULL, 0);
    size_t n_names = ql_http_req_query_values(req, "names", NULL, 0);
    size_t n = n_ids ? n_ids : n_names;
    if (n_ids && n_names)
        return ql_err_set(err, QL_EINVAL,
                          "ids, names: give the segments by ids or by names, "
                          "not both");
    if (n == 0)
        return ql_err_set(err, QL_EINVAL,
                          "ids: required (query parameter, the segment ids to delete; or names, "
                          "or purge=true for all of them)");
    if (n > QL_API_MAX_IDS)
        return ql_err_set(err, QL_EINVAL, "%s: more than %d", n_ids ? "ids" : "names",
                          QL_API_MAX_IDS);
    const char **vals = calloc(n, sizeof *vals);
    if (!vals || !(op->ids = calloc(n, sizeof *op->ids))) {
        free(vals);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    ql_http_req_query_values(req, n_ids ? "ids" : "names", vals, n);
    int rc = 0;
    if (n_ids) {
        for (size_t i = 0; i < n && !rc; i++) {
            if (ql_id_parse(vals[i], &op->ids[i]))
                rc =
                    ql_err_set(err, QL_EINVAL, "ids[%zu]: '%.64s' is not a segment id", i, vals[i]);
            op->n_ids = i + 1;
        }
    } else {
        ql_api_ids_req_t r = {.names = vals, .n_names = n, .ids = op->ids};
        names_t nm = {.r = &r};
        if ((rc = ql_segment_foreach(txn, &m->id, name_cb, &nm)))
            ql_err_set(err, rc, "cannot list the segments: %s", ql_strerror(rc));
        for (size_t i = 0; !rc && i < n; i++)
            if (ql_id_is_zero(&op->ids[i]))
                rc = ql_err_set(err, QL_ENOTFOUND,
                                "names[%zu]: segment '%.64s' not found in model '%s'", i, vals[i],
                                m->name);
        op->n_ids = n;
    }
    free(vals);
    return rc;
}

static void h_delete(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    ql_err_t err = {0};
    bool purge;
    /* Kylin's force (delete a segment other segments depend on) is accepted and ignored: no
     * Qilin segment depends on another. */
    int rc = ql_api_query_bool(req, "purge", false, &purge, &err);
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        return;
    }
    seg_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (!op)
        return;
    ql_txn_t *txn = ql_api_read_txn(api, req);
    if (!txn) {
        op_free(op);
        return;
    }
    ql_model_t m;
    rc = ql_api_get_model(txn, ql_http_req_query(req, "project"), ql_http_req_param(req, "model"),
                          0, &m, &err);
    if (!rc) {
        op->model = m.id;
        rc = delete_targets(txn, req, &m, purge, op, &err);
        ql_model_free(&m);
    }
    ql_txn_abort(txn);
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        op_free(op);
        return;
    }
    if (!ql_api_submit(api, req, delete_fn, op, delete_done))
        op_free(op);
}

/* ---- GET /models/{model}/segments ---- */

typedef struct {
    unsigned status_mask; /* 0: any */
    uint64_t first, limit, seen;
    ql_api_jw_t *w;
} list_t;

static int seg_cb(const ql_segment_t *s, void *arg) {
    list_t *l = arg;
    if (l->status_mask && !(l->status_mask & (1u << s->status)))
        return 0;
    uint64_t i = l->seen++;
    if (i >= l->first && i - l->first < l->limit)
        ql_api_jw_segment(l->w, s);
    return !l->status_mask && l->seen >= l->first + l->limit ? 1 : 0;
}

static void h_list(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_READ))
        return;
    ql_api_page_t page;
    ql_err_t err = {0};
    if (ql_api_paging(req, api->page_size_max, &page, &err)) {
        ql_api_fail_err(req, QL_EINVAL, &err);
        return;
    }
    list_t l = {.first = ql_api_page_first(&page), .limit = page.limit};
    const char *st[8];
    size_t n_st = ql_http_req_query_values(req, "status", st, 8);
    if (n_st > 8) {
        ql_api_fail(req, QL_EINVAL, "status: more than 8 values");
        return;
    }
    for (size_t i = 0; i < n_st; i++) {
        ql_seg_status_t s;
        if (ql_seg_status_parse(st[i], &s)) {
            ql_api_fail(req, QL_EINVAL, "status: '%.64s' is not NEW, READY or WARNING", st[i]);
            return;
        }
        l.status_mask |= 1u << s;
    }
    ql_txn_t *txn = ql_api_read_txn(api, req);
    if (!txn)
        return;
    ql_model_t m;
    int rc = ql_api_get_model(txn, ql_http_req_query(req, "project"),
                              ql_http_req_param(req, "model"), 0, &m, &err);
    uint64_t total = 0;
    ql_api_jw_t w;
    ql_api_jw_envelope(&w);
    ql_api_jw_page_open(&w);
    l.w = &w;
    if (!rc) {
        if (!l.status_mask)
            rc = ql_segment_count(txn, &m.id, &total);
        if (!rc)
            rc = ql_segment_foreach(txn, &m.id, seg_cb, &l);
        if (rc)
            ql_err_set(&err, rc, "cannot list the segments: %s", ql_strerror(rc));
        ql_model_free(&m);
    }
    ql_txn_abort(txn);
    if (rc) {
        ql_api_jw_free(&w);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    ql_api_jw_page_close(&w, &page, l.status_mask ? l.seen : total);
    ql_api_jw_respond(req, &w, NULL);
}

int ql_api_routes_segments(ql_api_t *api) {
    static const struct {
        const char *method, *name;
        ql_http_handler_cb fn;
    } routes[] = {
        {"POST", "segments.build", h_build},
        {"GET", "segments.list", h_list},
        {"PUT", "segments.merge_refresh", h_merge_refresh},
        {"DELETE", "segments.delete", h_delete},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        int rc = ql_http_router_add(api->router, routes[i].method,
                                    QL_API_BASE "/models/{model}/segments", routes[i].name,
                                    QL_HTTP_ROUTE_AUTH, routes[i].fn, api);
        if (rc)
            return rc;
    }
    return 0;
}
