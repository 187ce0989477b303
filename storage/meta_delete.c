/*
 * Deleting jobs (docs/design/jobs.md, Deleting jobs): on request (DELETE /jobs) and by age (the
 * master's retention task). Only final jobs go: a live job still owns a NEW segment and may have
 * a step running, so it is discarded first.
 */
#include "storage/ql_meta.h"

#include <stdio.h>
#include <string.h>

/* Live jobs named in a refusal at most; the message says how many more there are. */
#define NAMED_MAX 5

int ql_meta_delete_jobs(ql_txn_t *txn, const char *project, const ql_id_t *ids, size_t n,
                        ql_err_t *err) {
    char live[NAMED_MAX * (QL_ID_STR_LEN + 24)] = "";
    size_t n_live = 0, used = 0;
    for (size_t i = 0; i < n; i++) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&ids[i], id);
        ql_job_t j;
        int rc = ql_job_get(txn, &ids[i], 0, &j);
        if (rc == QL_ENOTFOUND)
            return ql_err_set(err, rc, "job %s not found", id);
        if (rc)
            return ql_err_set(err, rc, "cannot read job %s: %s", id, ql_strerror(rc));
        bool other_project = project && project[0] && strcmp(project, j.project) != 0;
        ql_state_t state = j.state;
        ql_job_free(&j);
        if (other_project)
            return ql_err_set(err, QL_ENOTFOUND, "job %s not found in project '%.100s'", id,
                              project);
        if (ql_state_is_final(state))
            continue;
        if (n_live++ < NAMED_MAX) {
            int w = snprintf(live + used, sizeof live - used, "%s%s (%s)", used ? ", " : "", id,
                             ql_state_name(state));
            if (w > 0 && (size_t)w < sizeof live - used)
                used += (size_t)w;
        }
    }
    if (n_live)
        return ql_err_set(err, QL_EACTION,
                          "job_ids: %zu of the jobs are not final and cannot be deleted: %s%s; "
                          "discard them (PUT /jobs/status, action DISCARD) or let them end first",
                          n_live, live, n_live > NAMED_MAX ? ", ..." : "");
    for (size_t i = 0; i < n; i++) {
        int rc = ql_job_delete(txn, &ids[i]);
        /* The same id twice in the list: deleted already. */
        if (rc && rc != QL_ENOTFOUND) {
            char id[QL_ID_STR_LEN + 1];
            ql_id_format(&ids[i], id);
            return ql_err_set(err, rc, "cannot delete job %s: %s", id, ql_strerror(rc));
        }
    }
    return 0;
}

typedef struct {
    int64_t before;
    size_t max, scan_left, n;
    ql_id_t *out;
} purge_walk_t;

static int purge_cb(const ql_id_t *id, ql_state_t state, int64_t modify_time, void *arg) {
    purge_walk_t *w = arg;
    if (modify_time >= w->before || w->scan_left == 0)
        return 1;
    w->scan_left--;
    if (!ql_state_is_final(state))
        return 0;
    w->out[w->n++] = *id;
    return w->n == w->max ? 1 : 0;
}

int ql_meta_purge_jobs(ql_txn_t *txn, int64_t before, size_t max, ql_id_t *out, size_t *n) {
    *n = 0;
    if (max == 0)
        return 0;
    purge_walk_t w = {
        .before = before, .max = max, .scan_left = max * QL_PURGE_SCAN_FACTOR, .out = out};
    /* Collected first: the deletions change the index the walk reads. */
    int rc = ql_job_foreach_recent(txn, NULL, true, purge_cb, &w);
    for (size_t i = 0; i < w.n && !rc; i++)
        rc = ql_job_delete(txn, &out[i]);
    if (!rc)
        *n = w.n;
    return rc;
}
