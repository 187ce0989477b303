/*
 * Jobs, the reads: GET /jobs (filters, sorting, paging), GET /jobs/{id}/detail and the output
 * of a step. Actions are in api_job_actions.c, ad-hoc jobs in api_adhoc.c.
 *
 * Listing cost (docs/rest.md, Paging): with no filter but project and statuses and the default
 * sort (last_modified), a page reads only the index of jobs by project and modify time, skips
 * what precedes the page without decoding it, decodes the page's jobs and takes total_size from
 * the per-project state counters. Any other filter (job_names, key, subject, time_filter) decodes
 * every job of the project in index order; any other sort_by also sorts them, keeping one small
 * record per matching job.
 */
#include "api_int.h"
#include "base/ql_buf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAMES 32
#define DAY_MS 86400000LL

/* ---- GET /jobs ---- */

typedef enum sort_key {
    SORT_MODIFIED,
    SORT_CREATE,
    SORT_START,
    SORT_END,
    SORT_DURATION,
    SORT_PRIORITY,
    SORT_NAME,
    SORT_STATUS,
    SORT_ID,
    SORT_SUBJECT,
    SORT_PROJECT,
    SORT_TOTAL,
} sort_key_t;

static const char *const sort_names[] = {
    "last_modified",  "create_time", "exec_start_time",
    "exec_end_time",  "duration",    "priority",
    "job_name",       "job_status",  "id",
    "target_subject", "project",     "total_duration",
};

typedef struct sort_rec {
    ql_id_t id;
    int64_t k;     /* numeric key */
    char *s;       /* string key (owned), NULL for numeric sorts */
    int64_t mtime; /* tie-break */
} sort_rec_t;

typedef struct list {
    ql_txn_t *txn;
    int64_t now;
    uint32_t mask;
    /* Copies of the query's values: a scan may run on another thread, away from the request. */
    char project_buf[QL_NAME_MAX + 1];
    const char *project; /* NULL: every project */
    char names_buf[MAX_NAMES][QL_TYPE_MAX + 1];
    const char *names[MAX_NAMES];
    size_t n_names;
    char key_buf[QL_NAME_MAX + 1];
    const char *key;
    /* Kylin's subject: the model's uuid exactly (or, a Qilin extension, its name) */
    bool has_subject, subject_is_id;
    ql_id_t subject_id;
    char subject_name[QL_NAME_MAX + 1];
    int64_t since; /* create_time >= since; INT64_MIN: any */
    bool decode_filters;
    sort_key_t sort;
    bool reverse;
    ql_api_pager_t pg;
    ql_api_jw_t *w;
    sort_rec_t *recs;
    size_t n_recs, cap_recs;
    /* the page's jobs in index order, read together once the walk ends (ql_job_get_many) */
    ql_id_t *page_ids;
    size_t n_page, cap_page;
    int rc;
} list_t;

static bool job_matches(const list_t *l, const ql_job_t *j) {
    if (l->since != INT64_MIN && j->create_time < l->since)
        return false;
    if (l->n_names) {
        size_t i;
        for (i = 0; i < l->n_names && strcmp(l->names[i], j->type) != 0; i++)
            ;
        if (i == l->n_names)
            return false;
    }
    if (l->key && l->key[0]) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&j->id, id);
        if (!ql_api_name_contains(j->model_name, l->key) && !ql_api_name_contains(id, l->key))
            return false;
    }
    if (l->has_subject && (l->subject_is_id ? !ql_id_eq(&j->model, &l->subject_id)
                                            : strcmp(j->model_name, l->subject_name) != 0))
        return false;
    return true;
}

static int push_rec(list_t *l, const ql_job_t *j) {
    if (QL_ARRAY_RESERVE(l->recs, l->cap_recs, l->n_recs + 1, 256))
        return UV_ENOMEM;
    sort_rec_t *r = &l->recs[l->n_recs];
    memset(r, 0, sizeof *r);
    r->id = j->id;
    r->mtime = j->modify_time;
    switch (l->sort) {
    case SORT_MODIFIED:
        r->k = j->modify_time;
        break;
    case SORT_CREATE:
        r->k = j->create_time;
        break;
    case SORT_START:
        r->k = j->start_time;
        break;
    case SORT_END:
        r->k = j->end_time;
        break;
    case SORT_DURATION:
        r->k = ql_api_job_duration(j, l->now);
        break;
    case SORT_PRIORITY:
        r->k = j->priority;
        break;
    case SORT_NAME:
        r->s = strdup(j->type);
        break;
    case SORT_STATUS:
        r->s = strdup(ql_job_display_status(j->state));
        break;
    case SORT_ID: {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&j->id, id);
        r->s = strdup(id);
        break;
    }
    case SORT_SUBJECT:
        r->s = strdup(j->model_name);
        break;
    case SORT_PROJECT:
        r->s = strdup(j->project);
        break;
    case SORT_TOTAL: {
        ql_api_job_steps_t st;
        int rc = ql_api_job_steps(l->txn, j, l->now, &st);
        if (rc)
            return rc;
        r->k = st.wait + ql_api_job_duration(j, l->now);
        break;
    }
    }
    if (l->sort >= SORT_NAME && l->sort <= SORT_PROJECT && !r->s)
        return UV_ENOMEM;
    l->n_recs++;
    return 0;
}

static int cmp_rec(const void *a, const void *b) {
    const sort_rec_t *x = a, *y = b;
    int c = 0;
    if (x->s || y->s)
        c = strcmp(x->s ? x->s : "", y->s ? y->s : "");
    else
        c = (x->k > y->k) - (x->k < y->k);
    if (!c)
        c = (x->mtime > y->mtime) - (x->mtime < y->mtime);
    if (!c)
        c = memcmp(x->id.b, y->id.b, sizeof x->id.b);
    return c;
}

static int cmp_rec_rev(const void *a, const void *b) {
    return cmp_rec(b, a);
}

static int page_add(list_t *l, const ql_job_t *j) {
    ql_api_job_steps_t st;
    int rc = ql_api_job_steps(l->txn, j, l->now, &st);
    if (rc)
        return rc;
    ql_api_jw_job(l->w, j, &st, l->now);
    return l->w->b.failed ? UV_ENOMEM : 0;
}

static int recent_cb(const ql_id_t *id, ql_state_t state, int64_t mtime, void *arg) {
    (void)mtime;
    list_t *l = arg;
    if (!(l->mask & (1u << state)))
        return 0;
    bool in_order = l->sort == SORT_MODIFIED;
    /* Index order is the answer's order: what precedes the page needs no decoding unless a
     * filter has to look at the record. */
    if (in_order && !l->decode_filters) {
        uint64_t i = l->pg.seen++;
        if (i < l->pg.first)
            return 0;
        if (i - l->pg.first >= l->pg.limit)
            return 1;
        if (QL_ARRAY_RESERVE(l->page_ids, l->cap_page, l->n_page + 1, 64))
            return l->rc = UV_ENOMEM;
        l->page_ids[l->n_page++] = *id;
        return 0;
    }
    ql_job_t j;
    int rc = ql_job_get(l->txn, id, 0, &j);
    if (rc == QL_ENOTFOUND)
        return 0;
    if (rc) {
        l->rc = rc;
        return rc;
    }
    if (!in_order) {
        if (job_matches(l, &j))
            rc = push_rec(l, &j);
    } else if (job_matches(l, &j) && ql_api_pager_take(&l->pg)) {
        rc = page_add(l, &j);
    }
    ql_job_free(&j);
    if (rc)
        l->rc = rc;
    return rc;
}

static int copy_value(char *dst, size_t cap, const char *field, const char *v, ql_err_t *err) {
    size_t n = strlen(v);
    if (n >= cap)
        return ql_err_set(err, QL_EINVAL, "%s: '%.64s...' is longer than %zu characters", field, v,
                          cap - 1);
    memcpy(dst, v, n + 1);
    return 0;
}

static int parse_list(ql_api_t *api, ql_http_req_t *req, list_t *l, ql_err_t *err) {
    const char *project = ql_api_query_given(req, "project");
    if (project) {
        if (strlen(project) > QL_NAME_MAX)
            return ql_err_set(err, QL_EINVAL, "project: longer than %d characters", QL_NAME_MAX);
        snprintf(l->project_buf, sizeof l->project_buf, "%s", project);
        l->project = l->project_buf;
    }
    const char *vals[MAX_NAMES];
    size_t n = ql_http_req_query_values(req, "statuses", vals, MAX_NAMES);
    if (n > MAX_NAMES)
        return ql_err_set(err, QL_EINVAL, "statuses: more than %d values", MAX_NAMES);
    l->mask = 0;
    for (size_t i = 0; i < n; i++) {
        /* Kylin takes its display statuses and its job states alike. */
        uint32_t m = ql_job_display_mask(vals[i]);
        ql_state_t st;
        if (!m && ql_state_parse(vals[i], &st) == 0 && st < QL_JOB_STATE_COUNT)
            m = 1u << st;
        if (!m)
            return ql_err_set(err, QL_EINVAL,
                              "statuses: '%.64s' is not a job status (PENDING, RUNNING, ERROR, "
                              "FINISHED, STOPPED, DISCARDED, or a job state: READY, PAUSED, "
                              "SUCCEED, SUICIDAL, ...)",
                              vals[i]);
        l->mask |= m;
    }
    if (!l->mask)
        l->mask = (1u << QL_JOB_STATE_COUNT) - 1;
    n = ql_http_req_query_values(req, "job_names", vals, MAX_NAMES);
    if (n > MAX_NAMES)
        return ql_err_set(err, QL_EINVAL, "job_names: more than %d values", MAX_NAMES);
    for (size_t i = 0; i < n; i++) {
        int rc = copy_value(l->names_buf[i], sizeof l->names_buf[i], "job_names", vals[i], err);
        if (rc)
            return rc;
        l->names[i] = l->names_buf[i];
    }
    l->n_names = n;
    const char *key = ql_api_query_given(req, "key");
    if (key) {
        int rc = copy_value(l->key_buf, sizeof l->key_buf, "key", key, err);
        if (rc)
            return rc;
        l->key = l->key_buf;
    }
    const char *subject = ql_api_query_given(req, "subject");
    if (subject) {
        l->has_subject = true;
        l->subject_is_id = ql_id_parse(subject, &l->subject_id) == 0;
        int rc = copy_value(l->subject_name, sizeof l->subject_name, "subject", subject, err);
        if (rc)
            return rc;
    }
    int64_t tf;
    int rc = ql_api_query_int(req, "time_filter", 4, 0, 4, &tf, err);
    if (rc)
        return ql_err_set(err, QL_EINVAL,
                          "time_filter: expected 0 (last day), 1 (last week), 2 (last month), 3 "
                          "(last year) or 4 (all)");
    static const int64_t windows[] = {DAY_MS, 7 * DAY_MS, 30 * DAY_MS, 365 * DAY_MS};
    l->since = tf < 4 ? l->now - windows[tf] : INT64_MIN;
    l->decode_filters = l->n_names || l->key || l->has_subject || l->since != INT64_MIN;
    const char *sort = ql_http_req_query(req, "sort_by");
    l->sort = SORT_MODIFIED;
    if (sort && sort[0]) {
        size_t i;
        for (i = 0; i < sizeof sort_names / sizeof sort_names[0]; i++)
            if (strcmp(sort, sort_names[i]) == 0)
                break;
        if (i == sizeof sort_names / sizeof sort_names[0])
            return ql_err_set(err, QL_EINVAL,
                              "sort_by: '%.64s' is not one of last_modified, create_time, "
                              "exec_start_time, exec_end_time, duration, total_duration, "
                              "priority, job_name, job_status, id, target_subject, project",
                              sort);
        l->sort = (sort_key_t)i;
    }
    if ((rc = ql_api_query_bool(req, "reverse", true, &l->reverse, err)))
        return rc;
    ql_api_page_t page;
    if ((rc = ql_api_paging(req, api->page_size_max, &page, err)))
        return rc;
    l->pg = ql_api_pager(&page);
    return 0;
}

static void free_recs(list_t *l) {
    for (size_t i = 0; i < l->n_recs; i++)
        free(l->recs[i].s);
    free(l->recs);
    free(l->page_ids);
}

static int page_job_cb(const ql_job_t *j, void *arg) {
    return page_add(arg, j);
}

/* Writes the jobs of l->page_ids (in that order; one gone since the walk is left out). */
static int add_page(list_t *l) {
    return ql_job_get_many(l->txn, l->n_page, l->page_ids, 0, page_job_cb, l);
}

/* The list into l->w (opened with the envelope and the page): the same code inline and on a
 * worker thread. */
static int run_list(list_t *l, ql_txn_t *txn, const ql_api_page_t *page, ql_err_t *err) {
    l->txn = txn;
    int rc = 0;
    if (l->project) {
        ql_project_t p;
        if ((rc = ql_api_get_project(txn, l->project, &p, err)) == 0)
            ql_project_free(&p);
    }
    uint64_t total = 0;
    bool counted = l->sort == SORT_MODIFIED && !l->decode_filters;
    if (!rc && counted)
        rc = ql_job_count(txn, l->project, l->mask, &total);
    bool oldest_first = l->sort == SORT_MODIFIED ? !l->reverse : false;
    if (!rc)
        rc = ql_job_foreach_recent(txn, l->project, oldest_first, recent_cb, l);
    if (!rc && l->rc)
        rc = l->rc;
    if (!rc && l->sort != SORT_MODIFIED) {
        qsort(l->recs, l->n_recs, sizeof *l->recs, l->reverse ? cmp_rec_rev : cmp_rec);
        total = l->n_recs;
        for (uint64_t i = l->pg.first; !rc && i < l->n_recs && i - l->pg.first < l->pg.limit; i++) {
            if (QL_ARRAY_RESERVE(l->page_ids, l->cap_page, l->n_page + 1, 64))
                rc = UV_ENOMEM;
            else
                l->page_ids[l->n_page++] = l->recs[i].id;
        }
    } else if (!counted) {
        total = l->pg.seen;
    }
    if (!rc)
        rc = add_page(l);
    free_recs(l);
    l->recs = NULL;
    l->n_recs = 0;
    l->page_ids = NULL;
    l->n_page = l->cap_page = 0;
    if (rc && !err->code)
        ql_err_set(err, rc, "cannot list the jobs: %s", ql_strerror(rc));
    if (!rc)
        ql_api_jw_page_close(l->w, page, total);
    return rc;
}

/* A list that decodes every job of its scope runs in libuv's threadpool with its own read
 * transaction (the store allows read transactions on any thread), so a scan of a large store
 * never stalls the loop: other requests, health checks and the scheduler go on meanwhile. */
typedef struct list_work {
    uv_work_t work;
    ql_api_t *api;
    ql_http_req_t *req;
    ql_store_t *store;
    list_t l;
    ql_api_page_t page;
    ql_api_jw_t w;
    int rc;
    ql_err_t err;
} list_work_t;

static void list_work_cb(uv_work_t *wk) {
    list_work_t *lw = wk->data;
    ql_txn_t *txn;
    if ((lw->rc = ql_txn_begin(lw->store, false, &txn))) {
        ql_err_set(&lw->err, lw->rc, "cannot read the store: %s", ql_strerror(lw->rc));
        return;
    }
    lw->rc = run_list(&lw->l, txn, &lw->page, &lw->err);
    ql_txn_abort(txn);
}

static void list_after_cb(uv_work_t *wk, int status) {
    list_work_t *lw = wk->data;
    ql_api_t *api = lw->api;
    if (status == UV_ECANCELED && !lw->rc)
        lw->rc = ql_err_set(&lw->err, QL_ESHUTDOWN, "the server is shutting down");
    if (lw->rc) {
        ql_api_jw_free(&lw->w);
        ql_api_fail_err(lw->req, lw->rc, &lw->err);
    } else {
        ql_api_jw_respond(lw->req, &lw->w, NULL);
    }
    free(lw);
    ql_api_work_done(api);
}

static void h_list(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_READ))
        return;
    list_work_t *lw = calloc(1, sizeof *lw);
    if (!lw) {
        ql_api_fail(req, UV_ENOMEM, "out of memory");
        return;
    }
    list_t *l = &lw->l;
    l->now = ql_api_now(api);
    ql_err_t err = {0};
    int rc = parse_list(api, req, l, &err);
    if (rc) {
        free(lw);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    lw->page.offset = l->pg.limit ? l->pg.first / l->pg.limit : 0;
    lw->page.limit = l->pg.limit;
    ql_api_jw_page_start(&lw->w);
    l->w = &lw->w;
    if (l->sort != SORT_MODIFIED || l->decode_filters) {
        lw->api = api;
        lw->req = req;
        lw->store = ql_node_store(api->node);
        lw->work.data = lw;
        if (uv_queue_work(api->loop, &lw->work, list_work_cb, list_after_cb) == 0) {
            api->works++;
            return;
        }
        /* No threadpool: run it here. */
    }
    ql_txn_t *txn = ql_api_read_txn(api, req);
    if (!txn) {
        ql_api_jw_free(&lw->w);
        free(lw);
        return;
    }
    rc = run_list(l, txn, &lw->page, &err);
    ql_txn_abort(txn);
    if (rc) {
        ql_api_jw_free(&lw->w);
        ql_api_fail_err(req, rc, &err);
    } else {
        ql_api_jw_respond(req, &lw->w, NULL);
    }
    free(lw);
}

/* ---- GET /jobs/{job_id}/detail and the output of a step ---- */

/* The job of the path (and of the project when one is given). */
static int path_job(ql_txn_t *txn, ql_http_req_t *req, ql_job_t *out, ql_err_t *err) {
    const char *ids = ql_http_req_param(req, "job_id");
    ql_id_t id;
    if (ql_id_parse(ids, &id))
        return ql_err_set(err, QL_EINVAL, "job_id: '%.64s' is not a job id", ids);
    int rc = ql_job_get(txn, &id, 0, out);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "job %s not found", ids);
    if (rc)
        return ql_err_set(err, rc, "cannot read job %s: %s", ids, ql_strerror(rc));
    const char *project = ql_api_query_given(req, "project");
    if (project && strcmp(project, out->project) != 0) {
        ql_job_free(out);
        return ql_err_set(err, QL_ENOTFOUND, "job %s not found in project '%.100s'", ids, project);
    }
    return 0;
}

typedef struct {
    ql_api_jw_t *w;
    int64_t now;
} steps_t;

static int step_cb(const ql_step_t *s, void *arg) {
    steps_t *st = arg;
    ql_api_jw_step(st->w, s, st->now);
    return st->w->b.failed ? UV_ENOMEM : 0;
}

/* What an endpoint about one job reads of it, in the read transaction: 0, or an error set in
 * err. */
typedef int (*job_read_fn)(ql_txn_t *txn, const ql_job_t *j, void *ctx, ql_err_t *err);

/* Opens a read transaction, reads the job the path names and calls fn with it and ctx. Returns
 * true when both succeeded (the caller answers); false after answering the error (ctx stays
 * the caller's to release). */
static bool read_job(ql_api_t *api, ql_http_req_t *req, job_read_fn fn, void *ctx) {
    ql_txn_t *txn = ql_api_begin_read(api, req);
    if (!txn)
        return false;
    ql_job_t j;
    ql_err_t err = {0};
    int rc = path_job(txn, req, &j, &err);
    if (!rc) {
        rc = fn(txn, &j, ctx, &err);
        ql_job_free(&j);
    }
    ql_txn_abort(txn);
    if (rc)
        ql_api_fail_err(req, rc, &err);
    return rc == 0;
}

static int detail_fn(ql_txn_t *txn, const ql_job_t *j, void *ctx, ql_err_t *err) {
    int rc = ql_step_foreach(txn, &j->id, step_cb, ctx);
    return rc ? ql_err_set(err, rc, "cannot read the steps: %s", ql_strerror(rc)) : 0;
}

static void h_detail(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_api_jw_t w;
    ql_api_jw_envelope(&w);
    ql_api_jw_open(&w, '[');
    steps_t st = {.w = &w, .now = ql_api_now(api)};
    if (!read_job(api, req, detail_fn, &st)) {
        ql_api_jw_free(&w);
        return;
    }
    ql_api_jw_close(&w, ']');
    ql_api_jw_respond(req, &w, NULL);
}

/* The tail of a running step's log on disk (its output reaches the store when it ends). */
#define LIVE_TAIL 65536
static char *read_log_tail(ql_api_t *api, const char *job, const char *step) {
    char path[4096];
    snprintf(path, sizeof path, "%s/logs/%s/%s.log",
             ql_config_get_str(api->cfg, "qilin.storage.path"), job, step);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    char *buf = NULL;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        off_t off = sb.st_size > LIVE_TAIL ? sb.st_size - LIVE_TAIL : 0;
        size_t want = (size_t)(sb.st_size - off);
        if ((buf = malloc(want + 1))) {
            ssize_t n = pread(fd, buf, want, off);
            buf[n > 0 ? n : 0] = '\0';
        }
    }
    close(fd);
    return buf;
}

typedef struct {
    ql_api_t *api;
    ql_http_req_t *req;
    const char *step_id;
    char *out; /* owned */
    size_t len;
    bool running;
    /* the step's latest try ran on another server, which keeps its log (ql_step_host.h) */
    bool elsewhere;
    char canon[QL_ID_STR_LEN + 8]; /* the step id as the store formats it */
    char server_id[QL_STEP_SERVER_ID_MAX + 1];
    char server_addr[QL_STEP_SERVER_ADDR_MAX + 1];
} output_t;

static int output_fn(ql_txn_t *txn, const ql_job_t *j, void *ctx, ql_err_t *err) {
    output_t *o = ctx;
    ql_id_t sj;
    uint32_t seq;
    ql_step_t s;
    int rc;
    if (ql_step_id_parse(o->step_id, &sj, &seq) || !ql_id_eq(&sj, &j->id))
        return ql_err_set(err, QL_ENOTFOUND, "step '%.64s' is not a step of job %s", o->step_id,
                          ql_http_req_param(o->req, "job_id"));
    if ((rc = ql_step_get(txn, &j->id, seq, &s)) == QL_ENOTFOUND)
        return ql_err_set(err, rc, "step %s not found", o->step_id);
    if (rc)
        return rc;
    o->running = s.state == QL_RUNNING;
    ql_step_host_t self = {.server_id = o->api->server_id,
                           .spans_hosts = ql_store_spans_hosts(ql_txn_store(txn))};
    o->elsewhere = ql_step_log_elsewhere(&s, &self);
    ql_step_id_format(&j->id, seq, o->canon);
    memcpy(o->server_id, s.server_id, sizeof o->server_id);
    memcpy(o->server_addr, s.server_addr, sizeof o->server_addr);
    ql_step_free(&s);
    rc = ql_output_get(txn, &j->id, seq, &o->out, &o->len);
    return rc == QL_ENOTFOUND ? 0 : rc;
}

/*
 * A running step's log is a file on the host that runs it (docs/rest.md): another server sends
 * the client there, 307 to the same path on the address the step recorded, or answers 404
 * naming that server when it recorded none.
 */
static void answer_elsewhere(ql_http_req_t *req, const output_t *o) {
    if (!o->server_addr[0]) {
        ql_api_fail(req, QL_ENOTFOUND,
                    "step %s runs on server '%s', which keeps its log and recorded no API "
                    "address: ask that server",
                    o->canon, o->server_id);
        return;
    }
    char job[QL_ID_STR_LEN + 1], msg[512];
    memcpy(job, o->canon, QL_ID_STR_LEN);
    job[QL_ID_STR_LEN] = '\0';
    const char *query = ql_http_req_query_raw(req);
    size_t cap = strlen(o->server_addr) + strlen(query) + 2 * sizeof o->canon + 64;
    char *location = malloc(cap);
    if (!location) {
        ql_api_fail(req, UV_ENOMEM, "out of memory");
        return;
    }
    snprintf(location, cap, "http://%s" QL_API_BASE "/jobs/%s/steps/%s/output%s%s", o->server_addr,
             job, o->canon, query[0] ? "?" : "", query);
    snprintf(msg, sizeof msg, "step %s runs on server '%s', which keeps its log", o->canon,
             o->server_id);
    ql_api_redirect(req, location, msg);
    free(location);
}

static void h_output(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    const char *step_id = ql_http_req_param(req, "step_id");
    output_t r = {.api = api, .req = req, .step_id = step_id};
    if (!read_job(api, req, output_fn, &r)) {
        free(r.out);
        return;
    }
    char *out = r.out;
    size_t len = r.len;
    if (!out && r.running && r.elsewhere) {
        answer_elsewhere(req, &r);
        return;
    }
    if (!out && r.running) {
        char job[QL_ID_STR_LEN + 1];
        snprintf(job, sizeof job, "%s", ql_http_req_param(req, "job_id"));
        out = read_log_tail(api, job, step_id);
        len = out ? strlen(out) : 0;
    }
    json_t *o = json_object();
    json_object_set_new(o, "job_id", json_string(ql_http_req_param(req, "job_id")));
    json_object_set_new(o, "step_id", json_string(step_id));
    /* Output bytes need not be UTF-8: invalid sequences would make the string NULL. */
    json_t *text = out ? json_stringn(out, len) : json_string("");
    if (!text) {
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)out[i] >= 0x80)
                out[i] = '?';
        text = json_stringn(out, len);
    }
    json_object_set_new(o, "cmd_output", text ? text : json_string(""));
    free(out);
    ql_api_ok(req, o, NULL);
}

int ql_api_routes_jobs(ql_api_t *api) {
    static const ql_api_route_t routes[] = {
        {"GET", QL_API_BASE "/jobs", "jobs.list", h_list},
        {"GET", QL_API_BASE "/jobs/{job_id}/detail", "jobs.detail", h_detail},
        {"GET", QL_API_BASE "/jobs/{job_id}/steps/{step_id}/output", "jobs.step_output", h_output},
    };
    return ql_api_add_routes(api, routes, sizeof routes / sizeof routes[0]);
}
