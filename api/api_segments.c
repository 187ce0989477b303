/*
 * Segments: manual builds (POST /models/{model}/segments), merges and refreshes (PUT), deletes
 * (DELETE) and the list (GET). Builds take the one submission path the dispatcher uses:
 * normalization here on the loop thread (ql_submit_normalize_cached, with the API's zones and
 * ICU formats), then ql_submit_fn() in the writer, which
 * re-checks overlaps and job conflicts inside the transaction that creates the segment and the
 * job. The answer goes out only after that commit; the scheduler is kicked right after.
 */
#include "api_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct seg_op {
    ql_api_op_t base;
    ql_submit_kind_t kind;
    bool remove; /* DELETE */
    ql_id_t model;
    ql_id_t *ids; /* owned: merge sources, refresh targets, deleted segments */
    size_t n_ids;
    ql_submit_op_t *subs; /* owned: one per job to create */
    size_t n_subs;
} seg_op_t;

static void op_free(seg_op_t *op) {
    free(op->ids);
    free(op->subs);
    free(op);
}

/* An operation with room for n_subs submissions. */
static seg_op_t *op_new(ql_api_t *api, ql_http_req_t *req, size_t n_subs) {
    seg_op_t *op = ql_api_op_new(api, req, sizeof *op);
    if (op && n_subs && !(op->subs = calloc(n_subs, sizeof *op->subs))) {
        free(op);
        ql_api_fail(req, UV_ENOMEM, "out of memory");
        return NULL;
    }
    if (op)
        op->n_subs = n_subs;
    return op;
}

static void init_sub(seg_op_t *op, ql_submit_op_t *s, ql_submit_kind_t kind, int priority) {
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->templates = ql_node_templates(op->base.api->node);
    s->model = op->model;
    s->priority = priority;
    s->submitter = op->base.user;
    s->now = op->base.now;
}

/* All jobs of one request in one mutation: a refresh of several segments creates all of its
 * jobs or none. */
static int submit_all_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    seg_op_t *op = arg;
    for (size_t i = 0; i < op->n_subs; i++) {
        int rc = ql_submit_fn(txn, &op->subs[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

static const char *kind_type(ql_submit_kind_t k) {
    return k == QL_SUBMIT_BUILD   ? "INC_BUILD"
           : k == QL_SUBMIT_MERGE ? "INDEX_MERGE"
                                  : "INDEX_REFRESH";
}

static void submit_done(void *arg, int status, const ql_err_t *err) {
    seg_op_t *op = arg;
    ql_api_t *api = op->base.api;
    if (status) {
        api->stats.submit_failures++;
        ql_api_fail_err(op->base.req, status, err);
        op_free(op);
        return;
    }
    const char *types[QL_API_MAX_IDS];
    ql_id_t ids[QL_API_MAX_IDS];
    for (size_t i = 0; i < op->n_subs; i++) {
        types[i] = kind_type(op->subs[i].kind);
        ids[i] = op->subs[i].job;
    }
    if (op->kind == QL_SUBMIT_BUILD)
        api->stats.builds += op->n_subs;
    else if (op->kind == QL_SUBMIT_MERGE)
        api->stats.merges += op->n_subs;
    else
        api->stats.refreshes += op->n_subs;
    if (ql_log_enabled(api->log, QL_LOG_INFO)) {
        char job[QL_ID_STR_LEN + 1], model[QL_ID_STR_LEN + 1];
        ql_id_format(&ids[0], job);
        ql_id_format(&op->model, model);
        ql_log(api->log, QL_LOG_INFO, "api",
               "submitted type=%s jobs=%zu first_job=%s model=%s user=%s", types[0], op->n_subs,
               job, model, op->base.user);
    }
    ql_api_ok(op->base.req, ql_api_jobs_answer(types, ids, op->n_subs), NULL);
    if (!api->closing)
        ql_node_kick(api->node);
    op_free(op);
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
    ql_txn_t *txn = ql_api_read_txn(api, req);
    if (!txn) {
        json_decref(r.root);
        return;
    }
    ql_project_t p = {0};
    ql_model_t m = {0};
    if ((rc = ql_api_get_model(txn, r.project, ql_http_req_param(req, "model"), 0, &m, &err)) == 0)
        rc = ql_api_get_project(txn, r.project, &p, &err);
    ql_txn_abort(txn);
    int64_t ns = 0, ne = 0;
    if (!rc && !m.partitioned)
        rc = ql_err_set(&err, QL_EFULLLOAD,
                        "model '%s' is a full-load model (no partition column): incremental "
                        "builds need a partitioned model",
                        m.name);
    if (!rc && !r.has_range)
        rc = ql_err_set(&err, QL_ENORANGE,
                        "model '%s' is partitioned by %s: a build needs start and end (epoch ms)",
                        m.name, m.partition_column);
    if (!rc)
        rc = ql_submit_normalize_cached(api->norm, &p, &m,
                                        ql_config_get_str(api->cfg, "kylin.web.timezone"), r.start,
                                        r.end, &ns, &ne, &err);
    /* The floor to the format's period happens in the project's zone: east of UTC, a start
     * on 1970-01-01 floors to a local midnight before the epoch, which no segment may have. */
    if (!rc && ns < 0)
        rc = ql_err_set(&err, QL_EINVAL,
                        "start: %lld falls in a period of the partition format '%s' that begins "
                        "before 1970-01-01T00:00:00Z (at %lld in the project's time zone); start "
                        "the build at the next period",
                        (long long)r.start, m.partition_format, (long long)ns);
    ql_id_t model = m.id;
    ql_project_free(&p);
    ql_model_free(&m);
    if (rc) {
        json_decref(r.root);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    seg_op_t *op = op_new(api, req, 1);
    if (op) {
        op->kind = QL_SUBMIT_BUILD;
        op->model = model;
        init_sub(op, &op->subs[0], QL_SUBMIT_BUILD, r.priority);
        op->subs[0].start = ns;
        op->subs[0].end = ne;
        if (!ql_api_submit(api, req, submit_all_fn, op, submit_done))
            op_free(op);
    }
    json_decref(r.root);
}

/* ---- PUT /models/{model}/segments ---- */

static void h_merge_refresh(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    size_t len;
    const char *body = ql_http_req_body(req, &len);
    ql_api_ids_req_t r;
    ql_err_t err = {0};
    int rc = ql_api_parse_segments_put(body, len, &r, &err);
    ql_model_t m = {0};
    if (!rc) {
        ql_txn_t *txn = ql_api_read_txn(api, req);
        if (!txn) {
            ql_api_ids_req_free(&r);
            return;
        }
        rc = ql_api_get_model(txn, r.project, ql_http_req_param(req, "model"), 0, &m, &err);
        ql_txn_abort(txn);
    }
    if (rc) {
        ql_api_ids_req_free(&r);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    seg_op_t *op = op_new(api, req, r.merge ? 1 : r.n);
    if (op) {
        op->model = m.id;
        op->kind = r.merge ? QL_SUBMIT_MERGE : QL_SUBMIT_REFRESH;
        op->ids = r.ids; /* moved */
        op->n_ids = r.n;
        r.ids = NULL;
        for (size_t i = 0; i < op->n_subs; i++) {
            init_sub(op, &op->subs[i], op->kind, QL_PRIORITY_DEFAULT);
            op->subs[i].ids = r.merge ? op->ids : &op->ids[i];
            op->subs[i].n_ids = r.merge ? op->n_ids : 1;
        }
        if (!ql_api_submit(api, req, submit_all_fn, op, submit_done))
            op_free(op);
    }
    ql_model_free(&m);
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

static void h_delete(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_WRITE))
        return;
    size_t n = ql_http_req_query_values(req, "ids", NULL, 0);
    if (n == 0) {
        ql_api_fail(req, QL_EINVAL, "ids: required (query parameter, the segment ids to delete)");
        return;
    }
    if (n > QL_API_MAX_IDS) {
        ql_api_fail(req, QL_EINVAL, "ids: more than %d ids", QL_API_MAX_IDS);
        return;
    }
    seg_op_t *op = op_new(api, req, 0);
    if (!op)
        return;
    const char **vals = calloc(n, sizeof *vals);
    op->ids = calloc(n, sizeof *op->ids);
    if (!vals || !op->ids) {
        free(vals);
        op_free(op);
        ql_api_fail(req, UV_ENOMEM, "out of memory");
        return;
    }
    ql_http_req_query_values(req, "ids", vals, n);
    ql_err_t err = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (ql_id_parse(vals[i], &op->ids[i]))
            rc = ql_err_set(&err, QL_EINVAL, "ids[%zu]: '%.64s' is not a segment id", i, vals[i]);
        op->n_ids = i + 1;
    }
    free(vals);
    if (!rc) {
        ql_txn_t *txn = ql_api_read_txn(api, req);
        if (!txn) {
            op_free(op);
            return;
        }
        ql_model_t m;
        rc = ql_api_get_model(txn, ql_http_req_query(req, "project"),
                              ql_http_req_param(req, "model"), 0, &m, &err);
        ql_txn_abort(txn);
        if (!rc) {
            op->model = m.id;
            ql_model_free(&m);
        }
    }
    if (rc) {
        ql_api_fail_err(req, rc, &err);
        op_free(op);
        return;
    }
    op->remove = true;
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
