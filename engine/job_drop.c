/*
 * Removing a model or a project, and purging a model's segments (see ql_jobs.h). Every walk
 * collects ids first and changes records afterwards: a store's iteration must not see the
 * records it is deleting.
 */
#include "engine/ql_jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ql_id_list_add(ql_id_list_t *l, const ql_id_t *id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        ql_id_t *p = realloc(l->ids, cap * sizeof *p);
        if (!p)
            return UV_ENOMEM;
        l->ids = p;
        l->cap = cap;
    }
    l->ids[l->n++] = *id;
    return 0;
}

void ql_id_list_free(ql_id_list_t *l) {
    free(l->ids);
    memset(l, 0, sizeof *l);
}

static int collect_job(const ql_job_t *j, void *arg) {
    return ql_id_list_add(arg, &j->id);
}

static int collect_live(const ql_live_job_t *j, void *arg) {
    return ql_id_list_add(arg, &j->id);
}

static int collect_segment(const ql_segment_t *s, void *arg) {
    return ql_id_list_add(arg, &s->id);
}

typedef struct {
    ql_id_list_t all, live;
} project_jobs_t;

static int collect_project_job(const ql_id_t *id, ql_state_t state, int64_t modify_time,
                               void *arg) {
    (void)modify_time;
    project_jobs_t *p = arg;
    int rc = ql_id_list_add(&p->all, id);
    if (!rc && !ql_state_is_final(state))
        rc = ql_id_list_add(&p->live, id);
    return rc;
}

static int discard_all(ql_txn_t *txn, const ql_id_list_t *live, int64_t now, ql_err_t *err) {
    for (size_t i = 0; i < live->n; i++) {
        int rc = ql_job_apply_action(txn, &live->ids[i], QL_ACTION_DISCARD, now, NULL, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int delete_segments(ql_txn_t *txn, const ql_id_t *model, size_t *n, ql_err_t *err) {
    ql_id_list_t segs = {0};
    int rc = ql_segment_foreach(txn, model, collect_segment, &segs);
    for (size_t i = 0; i < segs.n && !rc; i++)
        rc = ql_segment_delete(txn, &segs.ids[i]);
    if (n)
        *n = segs.n;
    ql_id_list_free(&segs);
    return rc ? ql_err_set(err, rc, "cannot delete the segments: %s", ql_strerror(rc)) : 0;
}

/* Deletes the (final) jobs of ids and notes them in deleted. */
static int delete_jobs(ql_txn_t *txn, const ql_id_list_t *ids, ql_id_list_t *deleted,
                       ql_err_t *err) {
    int rc = ql_meta_delete_jobs(txn, NULL, ids->ids, ids->n, err);
    for (size_t i = 0; i < ids->n && !rc && deleted; i++)
        rc = ql_id_list_add(deleted, &ids->ids[i]);
    return rc;
}

int ql_model_drop(ql_txn_t *txn, const ql_id_t *model, int64_t now, ql_id_list_t *deleted,
                  size_t *discarded, ql_err_t *err) {
    char mid[QL_ID_STR_LEN + 1];
    ql_id_format(model, mid);
    int rc = ql_model_exists(txn, model);
    if (rc)
        return ql_err_set(err, rc, "model %s: %s", mid, ql_strerror(rc));
    ql_id_list_t live = {0}, jobs = {0};
    if (!(rc = ql_job_foreach_live(txn, model, collect_live, &live)) &&
        !(rc = discard_all(txn, &live, now, err)) &&
        !(rc = ql_job_foreach_model(txn, model, collect_job, &jobs)) &&
        !(rc = delete_jobs(txn, &jobs, deleted, err)) &&
        !(rc = delete_segments(txn, model, NULL, err)) && (rc = ql_model_delete(txn, model)))
        ql_err_set(err, rc, "cannot delete model %s: %s", mid, ql_strerror(rc));
    if (rc && !err->msg[0])
        ql_err_set(err, rc, "cannot drop model %s: %s", mid, ql_strerror(rc));
    if (!rc && discarded)
        *discarded += live.n;
    ql_id_list_free(&live);
    ql_id_list_free(&jobs);
    return rc;
}

static int collect_model(const ql_model_t *m, void *arg) {
    return ql_id_list_add(arg, &m->id);
}

/* The refusal of a project drop while jobs run: the first few, and how many. */
static int refuse_live(const char *project, const ql_id_list_t *live, ql_err_t *err) {
    char names[5 * (QL_ID_STR_LEN + 2)] = "";
    size_t used = 0;
    for (size_t i = 0; i < live->n && i < 5; i++) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&live->ids[i], id);
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", id);
    }
    return ql_err_set(err, QL_EACTION,
                      "project '%s' has %zu live jobs (%s%s): discard them first, or ask for it "
                      "with discard_jobs=true",
                      project, live->n, names, live->n > 5 ? ", ..." : "");
}

int ql_project_drop(ql_txn_t *txn, const char *project, bool discard_live, int64_t now,
                    ql_id_list_t *deleted, size_t *discarded, ql_err_t *err) {
    ql_project_t p;
    int rc = ql_project_get(txn, project, 0, &p);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "project '%.100s' not found", project);
    if (rc)
        return ql_err_set(err, rc, "cannot read project '%.100s': %s", project, ql_strerror(rc));
    ql_project_free(&p);
    project_jobs_t pj = {{0}, {0}}, left = {{0}, {0}};
    ql_id_list_t models = {0};
    rc = ql_job_foreach_recent(txn, project, true, collect_project_job, &pj);
    if (!rc && pj.live.n && !discard_live)
        rc = refuse_live(project, &pj.live, err);
    if (!rc && !(rc = discard_all(txn, &pj.live, now, err)) && discarded)
        *discarded += pj.live.n;
    if (!rc)
        rc = ql_model_foreach(txn, project, collect_model, &models);
    for (size_t i = 0; i < models.n && !rc; i++)
        rc = ql_model_drop(txn, &models.ids[i], now, deleted, NULL, err);
    /* What is left: the project's jobs without a model (ad-hoc jobs), all final by now. */
    if (!rc)
        rc = ql_job_foreach_recent(txn, project, true, collect_project_job, &left);
    if (!rc)
        rc = delete_jobs(txn, &left.all, deleted, err);
    if (!rc && (rc = ql_project_delete(txn, project)))
        ql_err_set(err, rc, "cannot delete project '%s': %s", project, ql_strerror(rc));
    if (rc && !err->msg[0])
        ql_err_set(err, rc, "cannot drop project '%s': %s", project, ql_strerror(rc));
    ql_id_list_free(&models);
    ql_id_list_free(&pj.all);
    ql_id_list_free(&pj.live);
    ql_id_list_free(&left.all);
    ql_id_list_free(&left.live);
    return rc;
}

int ql_model_purge_segments(ql_txn_t *txn, const ql_id_t *model, int64_t now, size_t *purged,
                            size_t *ended, ql_err_t *err) {
    ql_id_list_t live = {0};
    int rc = ql_job_foreach_live(txn, model, collect_live, &live);
    for (size_t i = 0; i < live.n && !rc; i++)
        rc = ql_job_end_suicidal(txn, &live.ids[i], now, err);
    if (!rc)
        rc = delete_segments(txn, model, purged, err);
    if (!rc && ended)
        *ended = live.n;
    ql_id_list_free(&live);
    return rc;
}
