/*
 * A pick in a submission's own write transaction: see ql_sched.h (ql_sched_claim) and
 * docs/design/jobs.md, The scheduler. The pick itself is the fetcher's (ql_sched_pick_checked
 * in sched_pick.c) and so is its answer (ql_sched_pick_done); this file decides whether there
 * may be one and keeps the slot it takes.
 */
#include "pick_policy.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stdlib.h>
#include <string.h>

struct ql_sched_claim {
    run_t *r; /* RUN_PICKING, one reference (the answer's), linked under the zero id until the
                 answer names its job */
    /* written by the mutation (writer thread), read by the answer */
    bool fenced;  /* the fencing check refused the pick: why says how */
    bool skipped; /* no pick for another reason (an older READY job, a failed read): why */
    ql_err_t why;
};

/* Runs of project, ending ones included (see ql_sched_claim). */
static int project_runs(const ql_sched_t *s, const char *project) {
    int n = 0;
    for (const run_t *r = s->runs; r; r = r->next)
        n += strcmp(r->project, project) == 0;
    return n;
}

ql_sched_claim_t *ql_sched_claim(ql_sched_t *s, const char *project, const char *limit) {
    if (!s || !s->fetching || s->stopping || s->fenced || s->opts.job_locks)
        return NULL;
    /* Runs whose job is ending still count here (the fetcher lets their slots go): their end
     * may still wait in s->finishing, and a pick must never commit before the end of the job
     * whose slot it takes (ql_sched_fetch flushes those ends first; a submission cannot). */
    ql_pick_limits_t lim = {.max_concurrent_jobs = s->opts.max_concurrent_jobs,
                            .running = (int)s->n_runs,
                            .holding = ql_sched_holding(s)};
    ql_pick_project_t proj = {.limit = limit, .running = limit ? project_runs(s, project) : 0};
    ql_pick_cand_t cand = {.project = 0};
    ql_pick_decision_t d;
    ql_pick_plan(&lim, &proj, 1, &cand, 1, &d);
    if (d.verdict != QL_PICK_START)
        return NULL;
    ql_sched_claim_t *c = calloc(1, sizeof *c);
    ql_id_t none = {{0}};
    run_t *r = c ? ql_sched_run_new(s, &none, project) : NULL;
    if (!r) {
        free(c);
        return NULL; /* out of memory: the job waits READY for the fetcher */
    }
    r->phase = RUN_PICKING;
    r->refs++;
    r->now = ql_clock_now_ms(s->opts.clock);
    c->r = r;
    return c;
}

typedef struct {
    const ql_id_t *job;
    bool first;
} ahead_t;

static int first_ready_cb(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    (void)priority;
    (void)create_time;
    ahead_t *a = arg;
    a->first = ql_id_eq(id, a->job);
    return 1; /* the first entry is all it needs */
}

int ql_sched_claim_pick(ql_txn_t *txn, ql_sched_claim_t *c, const ql_id_t *job, ql_err_t *err) {
    run_t *r = c->r;
    /* The mutation may run again (ql_writer.h): everything it writes is written anew. */
    r->result = RESULT_STALE;
    c->fenced = c->skipped = false;
    c->why = (ql_err_t){0};
    /* The fetcher's check, in this transaction (docs/design/cluster.md, Fencing). Nothing is
     * written before it: a refusal leaves the new job READY and the submission whole. */
    int rc = ql_sched_check_run_fence(txn, r, &c->why);
    if (rc) {
        c->fenced = rc == QL_EFENCED;
        c->skipped = !c->fenced;
        return 0;
    }
    /* The policy's order (rule 0: priority, create time, id) is the READY index's: a job
     * before the new one there would be picked first by a fetcher, so the new one waits with
     * it. (One the fetcher is picking right now counts too: the pick waits, it is not lost.) */
    ahead_t a = {.job = job};
    if ((rc = ql_job_foreach_state_ref(txn, QL_READY, first_ready_cb, &a)) || !a.first) {
        c->skipped = true;
        if (rc)
            ql_err_set(&c->why, rc, "cannot read the READY jobs: %s", ql_strerror(rc));
        return 0;
    }
    return ql_sched_pick_checked(txn, r, job, err);
}

bool ql_sched_claim_done(ql_sched_claim_t *c, const ql_id_t *job, int status) {
    run_t *r = c->r;
    bool fenced = c->fenced, failed_read = c->skipped && c->why.code;
    ql_err_t why = c->why;
    free(c);
    if (status) {
        /* No job (the submission failed, or never reached the writer): the slot goes back. */
        r->refs--;
        ql_sched_run_drop(r);
        return false;
    }
    ql_sched_run_set_job(r, job);
    if (failed_read)
        ql_sched_log_job(r->s, QL_LOG_WARN, r, "job left READY for the fetcher: %s", why.msg);
    /* The fetcher's answer from here: a step to start, or (not picked) a slot to give back; a
     * refusal by fencing also stops fetching and tells the owner. */
    bool picked = !fenced && r->result == RESULT_RUN;
    ql_sched_pick_done(r, fenced ? QL_EFENCED : 0, fenced ? &why : NULL); /* may free r */
    return picked;
}
