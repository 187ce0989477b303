/*
 * The pick (a READY job becomes RUNNING with its first unfinished step) and the fetcher that
 * chooses the jobs to pick within the concurrency limits. Split from sched.c, whose opening
 * comment has the design; the state they share is in sched_int.h.
 */
#include "base/ql_buf.h"
#include "pick_policy.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pick ---- */

/*
 * A step record that still carries a try's marker when its next try begins: an action (PAUSE,
 * RESTART) committed the step out of RUNNING and only then stopped the try, and a server that
 * died in between left its processes running (ql_jobs.h, ql_job_apply_action). They are swept
 * before the next try's marker is committed: a pass over /proc and the wait for what it killed,
 * on the writer thread inside the transaction, as recovery does. Only that rare path pays: a try
 * that ended on its own, recovery and shutdown forget the marker once the processes are gone. A try
 * another server ran (or this one in an earlier boot) is not this host's to sweep (ql_step_host.h):
 * it is left to its own host, and its group number, which names nothing here, is forgotten with it.
 * Returns 0 (the marker is cleared from st) or an error with err set; st is then unchanged.
 */
static int sweep_previous_try(ql_sched_t *s, ql_step_t *st, ql_err_t *err) {
    if (!st->token[0])
        return 0;
    char sid[QL_ID_STR_LEN + 8];
    ql_step_id_format(&st->job, st->seq, sid);
    ql_step_place_t place = ql_step_place(st, &s->self);
    if (place != QL_STEP_PLACE_HERE) {
        ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
               "left the previous try of a step alone before its next try step=%s server=%s "
               "reason=\"%s\"",
               sid, st->server_id, ql_step_place_name(place));
        st->token[0] = '\0';
        st->pgid = 0;
        st->pg_start = 0;
        return 0;
    }
    ql_proc_tokens_t *set;
    int rc = ql_proc_tokens_new(&set);
    if (rc)
        return ql_err_set(err, rc, "out of memory");
    ql_proc_sweep_t sw = {0};
    if (!(rc = ql_proc_tokens_add(set, st->token)))
        rc = ql_proc_kill_tokens(set, s->opts.proc_drain_ms, &sw);
    ql_proc_tokens_free(set);
    if (rc)
        return ql_err_set(err, rc,
                          "step %s: cannot make sure its previous try's processes are gone: %s",
                          sid, ql_strerror(rc));
    ql_log(s->opts.log, sw.killed || sw.lingered ? QL_LOG_WARN : QL_LOG_INFO, "scheduler",
           "swept the previous try of a step before its next try step=%s killed=%u scans=%u "
           "exiting=%u lingered=%u reason=\"an action stopped it after its commit\"",
           sid, sw.killed, sw.scans, sw.exiting, sw.lingered);
    st->token[0] = '\0';
    return 0;
}

/* Copies the def of step st (read by the caller, updated in place) into the run and marks it
 * RUNNING (one more attempt). A shell step's try gets its marker here, with the boot id, in the
 * transaction that makes it RUNNING, so that both are durable before the process exists
 * (ql_proc.h, Markers); a mutation run again draws a new one, and the run keeps the one that
 * was committed. Simulated steps start no process and get none. Every try records the server
 * that runs it and that server's API address (ql_step_host.h): its processes and its log are
 * on that host. */
int ql_sched_begin_step_rec(ql_txn_t *txn, run_t *r, ql_step_t *st, int64_t now, ql_err_t *err) {
    ql_sched_t *s = r->s;
    int rc = sweep_previous_try(s, st, err);
    if (rc)
        return rc;
    st->attempts++;
    st->retry_at = 0;
    st->token[0] = '\0';
    if (!ql_clock_is_virtual(s->opts.clock) && strcmp(st->kind, "shell") == 0) {
        if (ql_proc_token_new(st->token))
            return ql_err_set(err, UV_EIO, "cannot draw a random marker for the step");
        memcpy(st->boot_id, s->boot_id, sizeof st->boot_id);
    }
    snprintf(st->server_id, sizeof st->server_id, "%s", s->opts.server_id);
    snprintf(st->server_addr, sizeof st->server_addr, "%s", s->opts.server_addr);
    rc = ql_step_set_state(txn, st, QL_RUNNING, now, err);
    if (!rc) {
        free(r->def_bytes);
        r->def_bytes = NULL;
        r->def_len = st->def_len;
        if (st->def_len && !(r->def_bytes = malloc(st->def_len)))
            rc = ql_err_set(err, UV_ENOMEM, "out of memory");
        else if (st->def_len)
            memcpy(r->def_bytes, st->def, st->def_len);
        r->seq = st->seq;
        r->attempt = st->attempts;
        memcpy(r->token, st->token, sizeof r->token);
    }
    return rc;
}

/* The same for step seq, read here. */
int ql_sched_begin_step(ql_txn_t *txn, run_t *r, const ql_job_t *job, uint32_t seq, int64_t now,
                        ql_err_t *err) {
    ql_step_t st;
    int rc = ql_step_get(txn, &job->id, seq, &st);
    if (rc)
        return ql_err_set(err, rc, "cannot read step %u: %s", seq, ql_strerror(rc));
    rc = ql_sched_begin_step_rec(txn, r, &st, now, err);
    ql_step_free(&st);
    return rc;
}

static bool step_finished(ql_state_t s) {
    return s == QL_SUCCEED || s == QL_WARNING || s == QL_SKIP;
}

/* The first step at or after `from` that has not finished, or n_steps. When found is not NULL
 * and a step was found, it gets that step's record (the caller frees it), so that starting it
 * needs no second read. Steps are read only up to the one found: the job's outcome, for which
 * *warned tells whether a finished step ended WARNING, only matters once no step is left, and
 * only then are the steps before `from` read too, except step from - 1, whose state the caller
 * knows (it has just ended it; pick passes from = 0). */
int ql_sched_next_unfinished(ql_txn_t *txn, const ql_job_t *job, uint32_t from, uint32_t *out,
                             bool *warned, ql_step_t *found) {
    *out = job->n_steps;
    for (uint32_t i = from; i < job->n_steps; i++) {
        ql_step_t st;
        int rc = ql_step_get(txn, &job->id, i, &st);
        if (rc)
            return rc;
        if (!step_finished(st.state)) {
            *out = i;
            if (found)
                *found = st;
            else
                ql_step_free(&st);
            break;
        }
        if (st.state == QL_WARNING && warned)
            *warned = true;
        ql_step_free(&st);
    }
    for (uint32_t i = 0; warned && *out == job->n_steps && i + 1 < from && i < job->n_steps; i++) {
        ql_step_t st;
        int rc = ql_step_get(txn, &job->id, i, &st);
        if (rc)
            return rc;
        if (st.state == QL_WARNING)
            *warned = true;
        ql_step_free(&st);
    }
    return 0;
}

int ql_sched_pick_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    run_t *r = arg;
    /* Under a job's own lock (scheduler 2) the pick claims its token first, in this
     * transaction: a stale lock of the job cannot move it. */
    int rc = r->job_locked ? ql_job_claim(txn, &r->job, r->fence, err)
                           : ql_sched_check_run_fence(txn, r, err);
    if (rc == QL_ENOTFOUND) {
        r->result = RESULT_STALE;
        return 0;
    }
    if (rc)
        return rc;
    return ql_sched_pick_checked(txn, r, &r->job, err);
}

int ql_sched_pick_checked(ql_txn_t *txn, run_t *r, const ql_id_t *id, ql_err_t *err) {
    ql_sched_t *s = r->s;
    int64_t now = r->now;
    ql_job_t job;
    int rc = ql_job_get(txn, id, QL_DECODE_KEEP_EXTRA, &job);
    if (rc == QL_ENOTFOUND) {
        r->result = RESULT_STALE;
        return 0;
    }
    if (rc)
        return ql_err_set(err, rc, "cannot read the job: %s", ql_strerror(rc));
    if (job.state != QL_READY) {
        r->result = RESULT_STALE;
        goto out;
    }
    job.fence = r->fence;
    bool exists;
    if ((rc = ql_meta_job_target_exists(txn, &job, &exists)))
        goto out;
    if (!exists) {
        r->result = RESULT_SUICIDAL;
        rc = ql_job_set_state(txn, &job, QL_SUICIDAL, false, now, err);
        goto out;
    }
    uint32_t seq;
    bool warned = false;
    ql_step_t first;
    if ((rc = ql_sched_next_unfinished(txn, &job, 0, &seq, &warned, &first)))
        goto out;
    if (seq < job.n_steps && first.token[0]) {
        /* Swept before anything is written, so that a sweep that fails leaves this one job
         * READY (tried again at a later fetch) instead of failing the whole pick batch. */
        ql_err_t why = {0};
        if (sweep_previous_try(s, &first, &why)) {
            ql_log(s->opts.log, QL_LOG_ERROR, "scheduler", "job not started: %s", why.msg);
            ql_step_free(&first);
            r->result = RESULT_STALE;
            goto out;
        }
    }
    /* READY -> PENDING -> RUNNING in one write of the record: PENDING is checked against the
     * table like any transition, but no reader could ever see it (it lives inside this
     * transaction), so writing it too would only double the job's index updates. */
    if (!ql_job_transition_legal(job.state, QL_PENDING)) {
        rc = ql_job_set_state(txn, &job, QL_PENDING, false, now, err); /* the error */
    } else {
        job.state = QL_PENDING;
        rc = ql_job_set_state(txn, &job, QL_RUNNING, false, now, err);
    }
    if (rc) {
        if (seq < job.n_steps)
            ql_step_free(&first);
        goto out;
    }
    if (seq == job.n_steps) {
        /* Every step had finished before an interruption: the job is done. */
        r->result = RESULT_FINISHED;
        r->final_state = QL_SUCCEED;
        rc = ql_job_set_state(txn, &job, QL_SUCCEED, warned, now, err);
        goto out;
    }
    rc = ql_sched_begin_step_rec(txn, r, &first, now, err);
    ql_step_free(&first);
    if (rc)
        goto out;
    ql_job_free(&r->jobinfo);
    rc = ql_job_copy(&r->jobinfo, &job);
    r->result = RESULT_RUN;
out:
    ql_job_free(&job);
    return rc;
}

void ql_sched_job_ended(run_t *r, ql_state_t state) {
    ql_sched_t *s = r->s;
    if (ql_state_is_final(state))
        s->stats.finished++;
    if (s->opts.on_job_end)
        s->opts.on_job_end(s->opts.hook_arg, &r->job, state);
}

void ql_sched_pick_done(void *arg, int status, const ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    r->refs--;
    if (ql_sched_fenced_out(r, status, err)) {
        ql_sched_run_drop(r); /* not started: the job stays READY for the lock's new holder */
        return;
    }
    if (status) {
        ql_sched_log_job(s, QL_LOG_ERROR, r, "cannot start the job: %s", err->msg);
        ql_sched_run_drop(r);
        return;
    }
    switch (r->result) {
    case RESULT_STALE:
        ql_sched_run_drop(r);
        break;
    case RESULT_SUICIDAL:
        ql_sched_log_job(s, QL_LOG_WARN, r,
                         "job READY -> SUICIDAL reason=\"its model or segment is gone\"");
        ql_sched_job_ended(r, QL_SUICIDAL);
        ql_sched_run_drop(r);
        ql_sched_kick(s);
        break;
    case RESULT_FINISHED:
        ql_sched_log_job(s, QL_LOG_INFO, r,
                         "job READY -> SUCCEED reason=\"every step had finished\"");
        ql_sched_job_ended(r, QL_SUCCEED);
        ql_sched_run_drop(r);
        ql_sched_kick(s);
        break;
    default:
        s->stats.picked++;
        r->wkey = ql_sched_job_key(&r->jobinfo);
        ql_sched_log_job(s, QL_LOG_INFO, r, "job READY -> PENDING -> RUNNING step=%02u attempt=%u",
                         r->seq, r->attempt);
        if (r->cancelled) {
            ql_sched_run_drop(r);
            break;
        }
        if (s->stopping) {
            ql_sched_park_run(r);
            break;
        }
        ql_sched_start_step(r);
    }
}

/* ---- the fetcher ---- */

/*
 * A fetcher pass walks the READY index in its order and hands what it finds to the pick policy
 * (pick_policy.h): the policy decides, the walk reads the store and applies the plan. Job
 * records are read to learn their project, one at a time, so the walk does not collect the whole
 * index: it plans a chunk as soon as it holds as many candidates without a run as there is room
 * (the most that can start), applies it, and goes on with the next chunk while room is left
 * (the policy skipped some). The policy decides one candidate after another, each by the ones
 * before it, so chunks decide what one plan over the index would.
 */

/* A project the pass met: its record, whose override the policy reads. */
typedef struct {
    char name[QL_NAME_MAX + 1];
    ql_project_t rec;
    bool have_rec; /* a project that cannot be read has no limit of its own */
    bool held;     /* the policy held one of its jobs for an invalid override (logged) */
} proj_slot_t;

typedef struct {
    ql_sched_t *s;
    ql_txn_t *txn;
    int room;           /* what the policy's room was when the chunk began */
    batch_ent_t *batch; /* the picks of this pass, appended to what the caller submits */
    size_t n_batch;
    /* the chunk: candidates in index order, n_open of them without a run or a grace; cap
     * holds room of them and every job that has a run or a grace */
    ql_pick_cand_t *cands;
    ql_pick_decision_t *plan;
    uint64_t *keys; /* the write keys of each candidate's job (0: not read) */
    size_t n_cands, n_open, cap;
    /* every project the pass meets, and what the policy knows of each (parallel arrays) */
    proj_slot_t *slots;
    ql_pick_project_t *proj;
    size_t n_proj, cap_proj;
} fetch_ctx_t;

static ql_pick_limits_t pick_limits(const ql_sched_t *s) {
    /* Runs whose job is ending run nothing any more: their slots may be taken now, so that the
     * picks share a commit with those jobs' ends instead of waiting for it. */
    return (ql_pick_limits_t){.max_concurrent_jobs = s->opts.max_concurrent_jobs,
                              .running = (int)(s->n_runs - s->n_ending),
                              .holding = ql_sched_holding(s)};
}

/* The project's index, added on first sight with its record and its running count; the number
 * of projects (out of range: the policy holds the job) only when out of memory. */
static size_t project_slot(fetch_ctx_t *c, const char *name) {
    for (size_t i = 0; i < c->n_proj; i++)
        if (strcmp(c->slots[i].name, name) == 0)
            return i;
    /* Two arrays, one capacity: it counts only once both have grown. */
    size_t cap_slots = c->cap_proj, cap = c->cap_proj;
    if (QL_ARRAY_RESERVE(c->slots, cap_slots, c->n_proj + 1, 16) ||
        QL_ARRAY_RESERVE(c->proj, cap, c->n_proj + 1, 16))
        return c->n_proj;
    c->cap_proj = cap;
    size_t i = c->n_proj++;
    proj_slot_t *sl = &c->slots[i];
    snprintf(sl->name, sizeof sl->name, "%s", name);
    sl->held = false;
    sl->have_rec = ql_project_get(c->txn, name, 0, &sl->rec) == 0;
    /* The value lives in the record's map (its own memory): moving the slot does not move it. */
    c->proj[i] = (ql_pick_project_t){
        .limit =
            sl->have_rec ? ql_strmap_get(&sl->rec.config, "kylin.job.max-concurrent-jobs") : NULL};
    for (run_t *r = c->s->runs; r; r = r->next)
        if (!r->ending && strcmp(r->project, name) == 0)
            c->proj[i].running++;
    return i;
}

/* An invalid override holds its project's jobs, and the passes say why until a valid value is
 * set: for each such project a pass meets, but passes run many times a second under load, so
 * once a minute at most. */
static void log_invalid_limit(fetch_ctx_t *c, size_t project) {
    ql_sched_t *s = c->s;
    if (project >= c->n_proj || c->slots[project].held)
        return; /* out of memory for its slot: held without a word, or said already */
    c->slots[project].held = true;
    int64_t now = ql_clock_now_ms(s->opts.clock);
    if (s->bad_limit_logged_ms && now - s->bad_limit_logged_ms < 60000)
        return;
    int limit;
    ql_err_t err = {0};
    ql_pick_project_limit(c->proj[project].limit, &limit, &err);
    s->bad_limit_logged_ms = now;
    ql_log(s->opts.log, QL_LOG_ERROR, "scheduler",
           "project jobs held: its override is invalid (%s) project=%s", err.msg,
           c->slots[project].name);
}

/* Plans the chunk and applies it: a run and a pick mutation for every START. Returns the room
 * left for the next chunk. */
static int plan_chunk(fetch_ctx_t *c) {
    ql_sched_t *s = c->s;
    ql_pick_limits_t lim = pick_limits(s);
    ql_pick_plan(&lim, c->proj, c->n_proj, c->cands, c->n_cands, c->plan);
    for (size_t i = 0; i < c->n_cands; i++) {
        const ql_pick_cand_t *cand = &c->cands[c->plan[i].cand];
        if (c->plan[i].verdict == QL_PICK_LIMIT_INVALID)
            log_invalid_limit(c, cand->project);
        if (c->plan[i].verdict != QL_PICK_START)
            continue;
        run_t *r = ql_sched_run_new(s, &cand->id, c->slots[cand->project].name);
        if (!r)
            continue; /* out of memory: the job stays READY for a later pass */
        r->wkey = c->keys[c->plan[i].cand];
        r->phase = RUN_PICKING;
        r->now = ql_clock_now_ms(s->opts.clock);
        c->proj[cand->project].running++;
        if (s->opts.job_locks) {
            /* Its job's lock first (scheduler 2): the pick is submitted on its answer. */
            ql_sched_lock_and_pick(r);
            continue;
        }
        r->refs++;
        c->batch[c->n_batch++] = (batch_ent_t){r, ql_sched_pick_fn, ql_sched_pick_done};
    }
    c->n_cands = c->n_open = 0;
    lim = pick_limits(s);
    return c->room = ql_pick_room(&lim);
}

/* A candidate's project and write key from the walk, when it gave them and nothing more is
 * needed (scheduler 2 reads the job for its assignment); else from the job. Whether it is a
 * candidate here. */
static bool candidate_target(fetch_ctx_t *c, const ql_id_t *id, const char *project,
                             const ql_id_t *model) {
    ql_pick_cand_t *cand = &c->cands[c->n_cands];
    if (project && !c->s->opts.job_locks) {
        cand->project = project_slot(c, project);
        c->keys[c->n_cands] = ql_sched_target_key(id, model);
        return true;
    }
    ql_job_t job;
    if (ql_job_get(c->txn, id, 0, &job))
        return false; /* not a candidate: a later pass sees it again */
    cand->project = project_slot(c, job.project);
    c->keys[c->n_cands] = ql_sched_job_key(&job);
    const proj_slot_t *sl = cand->project < c->n_proj ? &c->slots[cand->project] : NULL;
    bool here = !c->s->opts.job_locks ||
                ql_sched_assigned_here(c->s, c->txn, &job, sl && sl->have_rec ? &sl->rec : NULL);
    ql_job_free(&job);
    return here; /* not: assigned to other servers */
}

static int fetch_cb(const ql_id_t *id, int priority, int64_t create_time, const char *project,
                    const ql_id_t *model, void *arg) {
    fetch_ctx_t *c = arg;
    ql_pick_cand_t *cand = &c->cands[c->n_cands];
    *cand = (ql_pick_cand_t){.id = *id, .priority = priority, .create_time = create_time};
    c->keys[c->n_cands] = 0;
    /* In flight, or its previous try is still being stopped, or held for the takeover grace:
     * the policy needs no project. */
    cand->has_run = ql_sched_find_run(c->s, id) != NULL;
    cand->in_grace = !cand->has_run && ql_sched_grace_holds(c->s, id);
    if (!cand->has_run && !cand->in_grace && ql_sched_locked_elsewhere(c->s, id))
        return 0; /* another server's (scheduler 2): it runs it, or keeps it for a takeover */
    if (!cand->has_run && !cand->in_grace) {
        if (!candidate_target(c, id, project, model))
            return 0;
        c->n_open++;
    }
    c->n_cands++;
    if (c->n_open < (size_t)c->room)
        return 0;
    return plan_chunk(c) > 0 ? 0 : 1;
}

/*
 * A fetcher pass: picks READY jobs for the room left and appends their pick mutations to
 * ents[*n..] (room for max_concurrent_jobs more entries), which the caller submits.
 */
void ql_sched_fetch_into(ql_sched_t *s, batch_ent_t *ents, size_t *n) {
    if (!s->fetching || s->stopping)
        return;
    /* Nothing new while step ends wait for the store (sched_hold.c), or without room. */
    ql_pick_limits_t lim = pick_limits(s);
    int room = ql_pick_room(&lim);
    if (room <= 0)
        return;
    s->stats.fetches++;
    fetch_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->s = s;
    c->room = room;
    c->batch = ents + *n;
    c->cap = (size_t)room + s->n_runs + s->n_grace;
    c->cands = malloc(c->cap * sizeof *c->cands);
    c->plan = malloc(c->cap * sizeof *c->plan);
    c->keys = malloc(c->cap * sizeof *c->keys);
    if (c->cands && c->plan && c->keys && ql_txn_begin(s->opts.store, false, &c->txn) == 0) {
        int rc = ql_job_foreach_state_target(c->txn, QL_READY, fetch_cb, c);
        if (rc)
            ql_log(s->opts.log, QL_LOG_ERROR, "scheduler", "fetch failed: %s", ql_strerror(rc));
        if (c->n_cands)
            plan_chunk(c); /* the walk ended before the room was used */
        ql_txn_abort(c->txn);
    }
    *n += c->n_batch;
    for (size_t i = 0; i < c->n_proj; i++)
        if (c->slots[i].have_rec)
            ql_project_free(&c->slots[i].rec);
    free(c->slots);
    free(c->proj);
    free(c->keys);
    free(c->plan);
    free(c->cands);
    free(c);
}

void ql_sched_fetch(ql_sched_t *s) {
    /* Step ends still queued go first: a pick must never be written before the end of the job
     * whose slot it takes (ql_sched_flush_finishing picks for those slots itself). */
    if (s->n_finishing)
        ql_sched_flush_finishing(s);
    batch_ent_t *ents = malloc((size_t)s->opts.max_concurrent_jobs * sizeof *ents);
    size_t n = 0;
    if (!ents)
        return;
    ql_sched_fetch_into(s, ents, &n);
    /* Every pick of this pass in one mutation (see ql_sched_submit_batch). */
    ql_sched_submit_or_drop(s, ents, n);
    free(ents);
}

static void kick_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_fetch(arg);
}

void ql_sched_kick(ql_sched_t *s) {
    if (s->fetching && !s->stopping && !s->kick_timer.armed)
        ql_timer_start(&s->kick_timer, 0, kick_cb, s);
}

/* Every poll interval: a fetcher pass (which also watches the running jobs), or, while a
 * `wait` shutdown waits for running steps, the watch alone. */
void ql_sched_poll_cb(ql_timer_t *t, void *arg) {
    ql_sched_t *s = arg;
    bool fetch_now = s->fetching && !s->stopping;
    if (fetch_now || (s->stopping && s->n_runs))
        ql_timer_start(t, s->opts.poll_interval_ms, ql_sched_poll_cb, s);
    /* Jobs moved by another process first (a job resumed or restarted there is picked once its
     * old try is gone). Only here, once per poll interval: it reads every running job, which
     * the fetches a submission or a step end triggers (thousands a second under load) should
     * not. */
    if (fetch_now) {
        ql_sched_watch_runs(s);
        ql_sched_watch_kept(s);
        ql_sched_fetch(s);
    } else {
        ql_sched_watch_runs(s); /* may end a stop (and free s): nothing may follow */
    }
}

void ql_sched_start(ql_sched_t *s) {
    s->fetching = true;
    if (s->opts.poll_interval_ms > 0)
        ql_timer_start(&s->poll_timer, s->opts.poll_interval_ms, ql_sched_poll_cb, s);
    ql_sched_kick(s);
}

void ql_sched_pause_fetching(ql_sched_t *s) {
    s->fetching = false;
    ql_timer_stop(&s->poll_timer);
    ql_timer_stop(&s->kick_timer);
}

bool ql_sched_is_fetching(const ql_sched_t *s) {
    return s->fetching;
}
