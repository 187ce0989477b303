/*
 * The pick policy (pick_policy.h has the rules). Pure: everything it decides comes from its
 * arguments, so that the table in tests/scheduler/test_pick_policy.c is the whole of it.
 */
#include "pick_policy.h"

#include "config/ql_config.h"

#include <string.h>

static const char LIMIT_KEY[] = "kylin.job.max-concurrent-jobs";

int ql_pick_project_limit(const char *value, int *limit, ql_err_t *err) {
    *limit = 0;
    if (!value)
        return 0;
    /* The configuration's typed parser, with the server key's bounds and error text: a value
     * PUT /projects/{p}/config would refuse is refused here too. A store written by a build
     * with other bounds, or written directly, may still hold one. */
    int64_t v;
    int rc = ql_config_parse_int(LIMIT_KEY, value, &v, err);
    if (rc)
        return rc;
    *limit = (int)v;
    return 0;
}

int ql_pick_room(const ql_pick_limits_t *lim) {
    if (lim->holding || lim->running >= lim->max_concurrent_jobs)
        return 0;
    return lim->max_concurrent_jobs - lim->running;
}

/* Rule 0: whether a goes before b. */
static bool cand_before(const ql_pick_cand_t *a, const ql_pick_cand_t *b) {
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->create_time != b->create_time)
        return a->create_time < b->create_time;
    return memcmp(a->id.b, b->id.b, sizeof a->id.b) < 0;
}

/* out[0..n) gets the candidates in rule 0's order: an insertion sort, stable, and one pass
 * over input that is in order already (the walk's always is). */
static void order_cands(const ql_pick_cand_t *cands, size_t n, ql_pick_decision_t *out) {
    for (size_t i = 0; i < n; i++) {
        size_t k = i;
        while (k > 0 && cand_before(&cands[i], &cands[out[k - 1].cand])) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = (ql_pick_decision_t){.cand = i, .verdict = QL_PICK_START};
    }
}

size_t ql_pick_plan(const ql_pick_limits_t *lim, ql_pick_project_t *projects, size_t n_projects,
                    const ql_pick_cand_t *cands, size_t n, ql_pick_decision_t *out) {
    order_cands(cands, n, out);
    for (size_t i = 0; i < n_projects; i++)
        projects[i].started = 0;
    int room = ql_pick_room(lim);
    size_t started = 0;
    for (size_t i = 0; i < n; i++) {
        const ql_pick_cand_t *c = &cands[out[i].cand];
        ql_pick_verdict_t *v = &out[i].verdict;
        if (lim->holding) {
            *v = QL_PICK_HOLDING;
            continue;
        }
        if (room <= 0) {
            *v = QL_PICK_NO_ROOM;
            continue;
        }
        if (c->has_run) {
            *v = QL_PICK_HAS_RUN;
            continue;
        }
        if (c->in_grace) {
            *v = QL_PICK_TAKEOVER_GRACE;
            continue;
        }
        int limit;
        ql_err_t why = {0};
        if (c->project >= n_projects ||
            ql_pick_project_limit(projects[c->project].limit, &limit, &why)) {
            *v = QL_PICK_LIMIT_INVALID;
            continue;
        }
        ql_pick_project_t *p = &projects[c->project];
        if (limit > 0 && p->running + p->started >= limit) {
            *v = QL_PICK_PROJECT_FULL;
            continue;
        }
        *v = QL_PICK_START;
        p->started++;
        room--;
        started++;
    }
    return started;
}

const char *ql_pick_verdict_name(ql_pick_verdict_t v) {
    switch (v) {
    case QL_PICK_START:
        return "START";
    case QL_PICK_HOLDING:
        return "HOLDING";
    case QL_PICK_NO_ROOM:
        return "NO_ROOM";
    case QL_PICK_HAS_RUN:
        return "HAS_RUN";
    case QL_PICK_LIMIT_INVALID:
        return "LIMIT_INVALID";
    case QL_PICK_PROJECT_FULL:
        return "PROJECT_FULL";
    case QL_PICK_TAKEOVER_GRACE:
        return "TAKEOVER_GRACE";
    }
    return "?";
}
