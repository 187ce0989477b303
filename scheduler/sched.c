/*
 * The fetcher and the runner pool. See ql_sched.h for the design and invariants.
 *
 * A run (run_t) follows one job from its pick to its end on this scheduler:
 *   PICKING   the pick mutation is in flight
 *   STEP      a step is executing (a process, or a timer for built-ins and simulated steps)
 *   FINISHING the step's result is being written (with the next step's start)
 *   WAITING   a failed step waits for its retry
 *   DONE      nothing more will happen; freed once no callback refers to it (refs == 0)
 * `cancelled` marks a run whose job an action (or shutdown) took away: whatever its step
 * reports afterwards is dropped, because the action already wrote the job's new state.
 *
 * Commits per job. The mutations of many runs are applied as one batch (see submit_batch), and
 * a job whose last step has ended ("ending") gives up its slot at once: the picks that take it
 * are written in the same batch as that job's end, after it, so one commit both ends the old
 * job and starts the new one. The store never shows more RUNNING jobs than the limits allow,
 * and no step starts before its RUNNING state is durable.
 */
#include "scheduler/ql_config.h"
#include "scheduler/ql_sched.h"
#include "scheduler/sched_int.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fetch(ql_sched_t *s);
static void start_step(run_t *run);
static void run_drop(run_t *run);
static void park_run(run_t *run);
static void interrupt_run(run_t *run);
static void watch_runs(ql_sched_t *s);

/* ---- run bookkeeping ---- */

static size_t bucket_of(const ql_sched_t *s, const ql_id_t *id) {
    uint64_t h;
    memcpy(&h, id->b, 8);
    return (size_t)(h * 0x9e3779b97f4a7c15ull >> 40) & (s->n_buckets - 1);
}

run_t *ql_sched_find_run(ql_sched_t *s, const ql_id_t *id) {
    for (run_t *r = s->buckets[bucket_of(s, id)]; r; r = r->hnext)
        if (ql_id_eq(&r->job, id))
            return r;
    return NULL;
}

static run_t *run_new(ql_sched_t *s, const ql_id_t *id, const char *project) {
    run_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->s = s;
    r->job = *id;
    snprintf(r->project, sizeof r->project, "%s", project);
    ql_stepdef_init(&r->def);
    size_t b = bucket_of(s, id);
    r->hnext = s->buckets[b];
    s->buckets[b] = r;
    r->next = s->runs;
    if (s->runs)
        s->runs->prev = r;
    s->runs = r;
    s->n_runs++;
    return r;
}

static void run_unlink(run_t *r) {
    ql_sched_t *s = r->s;
    run_t **pp = &s->buckets[bucket_of(s, &r->job)];
    while (*pp && *pp != r)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = r->hnext;
    if (r->prev)
        r->prev->next = r->next;
    else
        s->runs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    s->n_runs--;
    if (r->ending)
        s->n_ending--;
}

static void run_release(run_t *r) {
    ql_stepdef_clear(&r->def);
    free(r->def_bytes);
    free(r->msg);
    free(r->output);
    ql_job_free(&r->jobinfo);
    free(r);
}

static void run_maybe_free(run_t *r) {
    if (r->phase != RUN_DONE || r->refs > 0)
        return;
    ql_sched_t *s = r->s;
    run_release(r);
    ql_sched_check_stopped(s);
}

static void timer_closed_cb(ql_timer_t *t) {
    run_t *r = (run_t *)(void *)((char *)t - offsetof(run_t, timer));
    r->refs--;
    run_maybe_free(r);
}

static void run_drop(run_t *r) {
    if (r->phase == RUN_DONE)
        return;
    r->phase = RUN_DONE;
    run_unlink(r);
    if (r->timer_init) {
        r->timer_init = false;
        r->refs++;
        /* The close callback frees the run: at once on the virtual clock, later on the real
         * one. Either way r must not be touched after this call. */
        ql_timer_close(&r->timer, timer_closed_cb);
        return;
    }
    run_maybe_free(r);
}

static void ensure_timer(run_t *r) {
    if (!r->timer_init) {
        memset(&r->timer, 0, sizeof r->timer);
        ql_timer_init(r->s->opts.clock, &r->timer);
        r->timer_init = true;
    }
}

/* ---- writer plumbing ---- */

static void flush_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_writer_flush(((ql_sched_t *)arg)->opts.writer);
}

int ql_sched_submit(ql_sched_t *s, ql_write_fn fn, void *arg, ql_write_done_cb done) {
    int rc = ql_writer_submit(s->opts.writer, fn, arg, done);
    if (rc == 0 && s->opts.virtual_steps && !s->flush_timer.armed)
        ql_timer_start(&s->flush_timer, 0, flush_cb, s);
    return rc;
}

static void log_job(ql_sched_t *s, ql_log_level_t lvl, const run_t *r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void log_job(ql_sched_t *s, ql_log_level_t lvl, const run_t *r, const char *fmt, ...) {
    if (!ql_log_enabled(s->opts.log, lvl))
        return;
    char id[QL_ID_STR_LEN + 1], msg[1024];
    ql_id_format(&r->job, id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ql_log(s->opts.log, lvl, "scheduler", "%s job=%s project=%s", msg, id, r->project);
}

/* ---- fencing ---- */

/* Every change the scheduler makes on the strength of the job engine lock starts with this,
 * inside its own transaction (docs/design/cluster.md, Fencing). */
static int check_fence(ql_txn_t *txn, const ql_sched_t *s, ql_err_t *err) {
    return ql_fence_check(txn, s->opts.fence, err);
}

/* Whether status is a change refused by fencing. The first one stops fetching and tells the
 * owner; the refused change is dropped (the new holder recovers the job from the store). */
static bool fenced_out(ql_sched_t *s, int status, const ql_err_t *err) {
    if (status != QL_EFENCED)
        return false;
    if (!s->fenced) {
        s->fenced = true;
        ql_log(s->opts.log, QL_LOG_ERROR, "scheduler",
               "lost the job engine lock fence=%llu reason=\"%s\"; fetching stopped",
               (unsigned long long)s->opts.fence, err && err->msg[0] ? err->msg : "fenced");
        ql_sched_pause_fetching(s);
        if (s->opts.on_fenced)
            s->opts.on_fenced(s->opts.hook_arg);
    }
    return true;
}

/* ---- batches: several runs' mutations in one ---- */

/*
 * The writer gives every mutation a nested transaction of its own, and a nested transaction
 * copies each page it touches: the index pages every pick and every step end share (job states,
 * counters, recent jobs) would be copied once per job. A batch runs the mutations of several
 * runs (the picks of one fetcher pass; the step ends of one loop turn with the picks that take
 * the slots of the jobs they end) in one nested transaction, so those pages are copied once per
 * batch. If any of them fails, the batch's transaction is discarded and each run's mutation is
 * submitted again on its own, in the same order, so a failure stays that run's. The mutations
 * must therefore be safe to run again: they derive everything from the store and from fields
 * the loop thread set before submitting (end_seq, end_attempt), and write their outputs anew.
 */
typedef struct batch_ent {
    run_t *r;
    ql_write_fn fn;
    ql_write_done_cb done;
} batch_ent_t;

typedef struct batch {
    ql_sched_t *s;
    size_t n;
    batch_ent_t e[];
} batch_t;

static int batch_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    batch_t *b = arg;
    for (size_t i = 0; i < b->n; i++) {
        int rc = b->e[i].fn(txn, b->e[i].r, err);
        if (rc)
            return rc;
    }
    return 0;
}

static void batch_done(void *arg, int status, const ql_err_t *err) {
    batch_t *b = arg;
    for (size_t i = 0; i < b->n; i++) {
        const batch_ent_t *e = &b->e[i];
        if (status == 0) {
            e->done(e->r, status, err);
            continue;
        }
        int rc = ql_sched_submit(b->s, e->fn, e->r, e->done);
        if (rc) {
            ql_err_t x = {0};
            ql_err_set(&x, rc, "cannot queue the change: %s", ql_strerror(rc));
            e->done(e->r, rc, &x);
        }
    }
    free(b);
}

/* Queues the mutations e[0..n) (each run holding a reference for its answer) as one; each done
 * then runs once, in order. On failure nothing was queued. */
static int submit_batch(ql_sched_t *s, const batch_ent_t *e, size_t n) {
    if (n == 1)
        return ql_sched_submit(s, e[0].fn, e[0].r, e[0].done);
    batch_t *b = malloc(sizeof *b + n * sizeof *e);
    if (!b)
        return UV_ENOMEM;
    b->s = s;
    b->n = n;
    memcpy(b->e, e, n * sizeof *e);
    int rc = ql_sched_submit(s, batch_fn, b, batch_done);
    if (rc)
        free(b);
    return rc;
}

/* Submits e[0..n) together (see above); when that fails, drops the runs. */
static void submit_or_drop(ql_sched_t *s, const batch_ent_t *e, size_t n) {
    if (n && submit_batch(s, e, n))
        for (size_t i = 0; i < n; i++) {
            e[i].r->refs--;
            run_drop(e[i].r);
        }
}

/* ---- pick ---- */

/*
 * A step record that still carries a try's marker when its next try begins: an action (PAUSE,
 * RESTART) committed the step out of RUNNING and only then stopped the try, and a server that
 * died in between left its processes running (ql_jobs.h, ql_job_apply_action). They are swept
 * before the next try's marker is committed: one pass over /proc, on the writer thread inside
 * the transaction, as recovery does. Only that rare path pays: a try that ended on its own,
 * recovery and shutdown forget the marker once the processes are gone. Returns 0 (the marker
 * is cleared from st) or an error with err set; st is then unchanged.
 */
static int sweep_previous_try(ql_sched_t *s, ql_step_t *st, ql_err_t *err) {
    if (!st->token[0])
        return 0;
    ql_proc_tokens_t *set;
    int rc = ql_proc_tokens_new(&set);
    if (rc)
        return ql_err_set(err, rc, "out of memory");
    ql_proc_sweep_t sw = {0};
    if (!(rc = ql_proc_tokens_add(set, st->token)))
        rc = ql_proc_kill_tokens(set, &sw);
    ql_proc_tokens_free(set);
    char sid[QL_ID_STR_LEN + 8];
    ql_step_id_format(&st->job, st->seq, sid);
    if (rc)
        return ql_err_set(err, rc,
                          "step %s: cannot make sure its previous try's processes are gone: %s",
                          sid, ql_strerror(rc));
    ql_log(s->opts.log, sw.killed ? QL_LOG_WARN : QL_LOG_INFO, "scheduler",
           "swept the previous try of a step before its next try step=%s killed=%u scans=%u "
           "reason=\"an action stopped it after its commit\"",
           sid, sw.killed, sw.scans);
    st->token[0] = '\0';
    return 0;
}

/* Copies the def of step st (read by the caller, updated in place) into the run and marks it
 * RUNNING (one more attempt). A shell step's try gets its marker here, in the transaction that
 * makes it RUNNING, so that it is durable before the process exists (ql_proc.h, Markers); a
 * mutation run again draws a new one, and the run keeps the one that was committed. Simulated
 * steps start no process and get none. */
static int begin_step_rec(ql_txn_t *txn, run_t *r, ql_step_t *st, int64_t now, ql_err_t *err) {
    int rc = sweep_previous_try(r->s, st, err);
    if (rc)
        return rc;
    st->attempts++;
    st->retry_at = 0;
    st->token[0] = '\0';
    if (!r->s->opts.virtual_steps && strcmp(st->kind, "shell") == 0 && ql_proc_token_new(st->token))
        return ql_err_set(err, UV_EIO, "cannot draw a random marker for the step");
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
static int begin_step(ql_txn_t *txn, run_t *r, const ql_job_t *job, uint32_t seq, int64_t now,
                      ql_err_t *err) {
    ql_step_t st;
    int rc = ql_step_get(txn, &job->id, seq, &st);
    if (rc)
        return ql_err_set(err, rc, "cannot read step %u: %s", seq, ql_strerror(rc));
    rc = begin_step_rec(txn, r, &st, now, err);
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
static int next_unfinished(ql_txn_t *txn, const ql_job_t *job, uint32_t from, uint32_t *out,
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

static int pick_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    int64_t now = r->now;
    ql_job_t job;
    int rc = check_fence(txn, s, err);
    if (rc)
        return rc;
    rc = ql_job_get(txn, &r->job, QL_DECODE_KEEP_EXTRA, &job);
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
    job.fence = s->opts.fence;
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
    if ((rc = next_unfinished(txn, &job, 0, &seq, &warned, &first)))
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
    rc = begin_step_rec(txn, r, &first, now, err);
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

static void job_ended(run_t *r, ql_state_t state) {
    ql_sched_t *s = r->s;
    if (ql_state_is_final(state))
        s->stats.finished++;
    if (s->opts.on_job_end)
        s->opts.on_job_end(s->opts.hook_arg, &r->job, state);
}

static void pick_done(void *arg, int status, const ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    r->refs--;
    if (fenced_out(s, status, err)) {
        run_drop(r); /* not started: the job stays READY for the lock's new holder */
        return;
    }
    if (status) {
        log_job(s, QL_LOG_ERROR, r, "cannot start the job: %s", err->msg);
        run_drop(r);
        return;
    }
    switch (r->result) {
    case RESULT_STALE:
        run_drop(r);
        break;
    case RESULT_SUICIDAL:
        log_job(s, QL_LOG_WARN, r, "job READY -> SUICIDAL reason=\"its model or segment is gone\"");
        job_ended(r, QL_SUICIDAL);
        run_drop(r);
        ql_sched_kick(s);
        break;
    case RESULT_FINISHED:
        log_job(s, QL_LOG_INFO, r, "job READY -> SUCCEED reason=\"every step had finished\"");
        job_ended(r, QL_SUCCEED);
        run_drop(r);
        ql_sched_kick(s);
        break;
    default:
        s->stats.picked++;
        log_job(s, QL_LOG_INFO, r, "job READY -> PENDING -> RUNNING step=%02u attempt=%u", r->seq,
                r->attempt);
        if (r->cancelled) {
            run_drop(r);
            break;
        }
        if (s->stopping) {
            park_run(r);
            break;
        }
        start_step(r);
    }
}

/* ---- the fetcher ---- */

struct proj_slot {
    char name[QL_NAME_MAX + 1];
    int running;
    int limit; /* the project's own limit, 0: none (the server's), -1: unknown, hold its jobs */
};

typedef struct {
    ql_sched_t *s;
    ql_txn_t *txn;
    int room;
    int picked;
    batch_ent_t *batch; /* the picks of this pass, appended to what the caller submits */
    size_t n_batch;
    /* per-project running counts and limits, for this pass: every project it meets */
    struct proj_slot *proj;
    int n_proj, cap_proj;
} fetch_ctx_t;

/* The project's own kylin.job.max-concurrent-jobs (0: none), read by the configuration's typed
 * parser, with the server key's bounds and error text. A stored value that does not parse
 * (PUT /projects/{p}/config refuses one, but a store written by a build with other bounds, or
 * written directly, may hold one) gives -1: the limit the project meant is unknown, so its jobs
 * wait rather than run unlimited, and every pass logs why until a valid value is set. */
static int project_limit(ql_sched_t *s, const ql_project_t *p) {
    const char *v = ql_strmap_get(&p->config, "kylin.job.max-concurrent-jobs");
    if (!v)
        return 0;
    int64_t limit;
    ql_err_t err = {0};
    if (ql_config_parse_int("kylin.job.max-concurrent-jobs", v, &limit, &err) == 0)
        return (int)limit;
    /* Passes run many times a second under load: say it once a minute, not on every pass. */
    int64_t now = ql_clock_now_ms(s->opts.clock);
    if (!s->bad_limit_logged_ms || now - s->bad_limit_logged_ms >= 60000) {
        s->bad_limit_logged_ms = now;
        ql_log(s->opts.log, QL_LOG_ERROR, "scheduler",
               "project jobs held: its override is invalid (%s) project=%s", err.msg, p->name);
    }
    return -1;
}

/* The project's slot, added on first sight; -1 only when out of memory. */
static int project_slot(fetch_ctx_t *c, const char *name) {
    for (int i = 0; i < c->n_proj; i++)
        if (strcmp(c->proj[i].name, name) == 0)
            return i;
    if (c->n_proj == c->cap_proj) {
        int cap = c->cap_proj ? c->cap_proj * 2 : 16;
        struct proj_slot *grown = realloc(c->proj, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        c->proj = grown;
        c->cap_proj = cap;
    }
    int i = c->n_proj++;
    snprintf(c->proj[i].name, sizeof c->proj[i].name, "%s", name);
    c->proj[i].running = 0;
    c->proj[i].limit = 0;
    ql_project_t p;
    if (ql_project_get(c->txn, name, 0, &p) == 0) {
        c->proj[i].limit = project_limit(c->s, &p);
        ql_project_free(&p);
    }
    for (run_t *r = c->s->runs; r; r = r->next)
        if (!r->ending && strcmp(r->project, name) == 0)
            c->proj[i].running++;
    return i;
}

static int fetch_cb(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    (void)priority;
    (void)create_time;
    fetch_ctx_t *c = arg;
    ql_sched_t *s = c->s;
    if (ql_sched_find_run(s, id))
        return 0; /* in flight, or its previous try is still being stopped */
    ql_job_t job;
    if (ql_job_get(c->txn, id, 0, &job))
        return 0;
    int slot = project_slot(c, job.project);
    /* Without a slot (out of memory) or with an invalid override the project's limit is
     * unknown: wait for the next pass rather than risk going over it. */
    bool full = slot < 0 || c->proj[slot].limit < 0 ||
                (c->proj[slot].limit > 0 && c->proj[slot].running >= c->proj[slot].limit);
    if (!full) {
        run_t *r = run_new(s, id, job.project);
        if (r) {
            r->phase = RUN_PICKING;
            r->now = ql_clock_now_ms(s->opts.clock);
            r->refs++;
            c->batch[c->n_batch++] = (batch_ent_t){r, pick_fn, pick_done};
            c->room--;
            c->picked++;
            c->proj[slot].running++;
        }
    }
    ql_job_free(&job);
    return c->room > 0 ? 0 : 1;
}

/*
 * A fetcher pass: picks READY jobs for the room left and appends their pick mutations to
 * ents[*n..] (room for max_concurrent_jobs more entries), which the caller submits.
 */
static void fetch_into(ql_sched_t *s, batch_ent_t *ents, size_t *n) {
    /* Nothing new while step ends wait for the store (sched_hold.c). */
    if (!s->fetching || s->stopping || ql_sched_holding(s))
        return;
    /* Runs whose job is ending run nothing any more: their slots may be taken now, so that the
     * picks share a commit with those jobs' ends instead of waiting for it. */
    int room = s->opts.max_concurrent_jobs - (int)(s->n_runs - s->n_ending);
    if (room <= 0)
        return;
    s->stats.fetches++;
    fetch_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->s = s;
    c->room = room;
    c->batch = ents + *n;
    if (ql_txn_begin(s->opts.store, false, &c->txn) == 0) {
        int rc = ql_job_foreach_state_ref(c->txn, QL_READY, fetch_cb, c);
        if (rc)
            ql_log(s->opts.log, QL_LOG_ERROR, "scheduler", "fetch failed: %s", ql_strerror(rc));
        ql_txn_abort(c->txn);
    }
    *n += c->n_batch;
    free(c->proj);
    free(c);
}

static void flush_finishing(ql_sched_t *s);

static void fetch(ql_sched_t *s) {
    /* Step ends still queued go first: a pick must never be written before the end of the job
     * whose slot it takes (flush_finishing picks for those slots itself). */
    if (s->n_finishing)
        flush_finishing(s);
    batch_ent_t *ents = malloc((size_t)s->opts.max_concurrent_jobs * sizeof *ents);
    size_t n = 0;
    if (!ents)
        return;
    fetch_into(s, ents, &n);
    /* Every pick of this pass in one mutation (see submit_batch). */
    submit_or_drop(s, ents, n);
    free(ents);
}

static void kick_cb(ql_timer_t *t, void *arg) {
    (void)t;
    fetch(arg);
}

void ql_sched_kick(ql_sched_t *s) {
    if (s->fetching && !s->stopping && !s->kick_timer.armed)
        ql_timer_start(&s->kick_timer, 0, kick_cb, s);
}

/* Every poll interval: a fetcher pass (which also watches the running jobs), or, while a
 * `wait` shutdown waits for running steps, the watch alone. */
static void poll_cb(ql_timer_t *t, void *arg) {
    ql_sched_t *s = arg;
    bool fetch_now = s->fetching && !s->stopping;
    if (fetch_now || (s->stopping && s->n_runs))
        ql_timer_start(t, s->opts.poll_interval_ms, poll_cb, s);
    /* Jobs moved by another process first (a job resumed or restarted there is picked once its
     * old try is gone). Only here, once per poll interval: it reads every running job, which
     * the fetches a submission or a step end triggers (thousands a second under load) should
     * not. */
    if (fetch_now) {
        watch_runs(s);
        fetch(s);
    } else {
        watch_runs(s); /* may end a stop (and free s): nothing may follow */
    }
}

void ql_sched_start(ql_sched_t *s) {
    s->fetching = true;
    if (s->opts.poll_interval_ms > 0)
        ql_timer_start(&s->poll_timer, s->opts.poll_interval_ms, poll_cb, s);
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

/* ---- running a step ---- */

static void step_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_step_completed(arg);
}

static void complete_later(run_t *r, int64_t delay, ql_state_t outcome, const char *msg) {
    r->outcome = outcome;
    free(r->msg);
    r->msg = msg ? strdup(msg) : NULL;
    ensure_timer(r);
    ql_timer_start(&r->timer, delay < 0 ? 0 : delay, step_timer_cb, r);
}

static void start_step(run_t *r) {
    ql_sched_t *s = r->s;
    r->phase = RUN_STEP;
    ql_err_t err = {0};
    ql_stepdef_clear(&r->def);
    if (ql_stepdef_decode(r->def_bytes, r->def_len, &r->def, &err)) {
        complete_later(r, 0, QL_ERROR, err.msg[0] ? err.msg : "cannot decode the step definition");
        return;
    }
    char why[512];
    int skip = ql_sched_step_skipped(r, why, sizeof why);
    if (skip < 0) {
        complete_later(r, 0, QL_ERROR, why);
        return;
    }
    if (skip) {
        log_job(s, QL_LOG_INFO, r, "step skipped step=%02u reason=\"%s\"", r->seq, why);
        /* The reason becomes the step's output, where GET .../output and the CLI show it. */
        free(r->output);
        r->output_len = strlen("skipped: ") + strlen(why);
        if ((r->output = malloc(r->output_len + 1)))
            snprintf(r->output, r->output_len + 1, "skipped: %s", why);
        complete_later(r, 0, QL_SKIP, NULL);
        return;
    }
    s->stats.steps_run++;
    if (s->step_start_hook)
        s->step_start_hook(s->step_start_arg, &r->job, r->seq);
    const ql_stepdef_t *d = &r->def;
    ql_state_t ok = d->kind == QL_STEP_FAIL   ? QL_ERROR
                    : d->kind == QL_STEP_WARN ? QL_WARNING
                                              : QL_SUCCEED;
    const char *msg = d->message                ? d->message
                      : d->kind == QL_STEP_FAIL ? "the step failed (kind fail)"
                      : d->kind == QL_STEP_WARN ? "the step warned (kind warn)"
                                                : NULL;
    if (s->opts.virtual_steps) {
        if (d->kind == QL_STEP_SHELL && !s->opts.allow_shell) {
            complete_later(r, 0, QL_ERROR,
                           "shell steps do not run in the simulator; pass "
                           "--allow-shell to have them succeed");
            return;
        }
        complete_later(r, ql_stepdef_sim_duration(d), ok, msg);
        return;
    }
    switch (d->kind) {
    case QL_STEP_NOOP:
    case QL_STEP_FAIL:
    case QL_STEP_WARN:
        complete_later(r, 0, ok, msg);
        return;
    case QL_STEP_SLEEP:
        complete_later(r, d->duration_ms, ok, msg);
        return;
    case QL_STEP_SHELL:
        ql_sched_spawn_shell(r);
        return;
    }
}

/* ---- a step's end ---- */

static int finish_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    int64_t now = r->now;
    ql_job_t job;
    ql_step_t st;
    /* Inputs first, outputs anew: this may be a second run (see end_seq). */
    r->seq = r->end_seq;
    r->attempt = r->end_attempt;
    r->result = RESULT_STALE;
    int rc = check_fence(txn, s, err);
    if (rc)
        return rc;
    rc = ql_job_get(txn, &r->job, QL_DECODE_KEEP_EXTRA, &job);
    if (rc)
        return rc == QL_ENOTFOUND ? 0 : rc;
    if (job.state != QL_RUNNING) {
        ql_job_free(&job);
        return 0;
    }
    if ((rc = ql_step_get(txn, &job.id, r->seq, &st))) {
        ql_job_free(&job);
        return ql_err_set(err, rc, "cannot read the step: %s", ql_strerror(rc));
    }
    if (st.state != QL_RUNNING || st.attempts != r->attempt)
        goto out; /* an action or another try owns the step now */
    bool fence_changed = job.fence != s->opts.fence;
    job.fence = s->opts.fence;
    if (r->output && (rc = ql_output_put(txn, &job.id, r->seq, r->output, r->output_len)))
        goto out;
    free(st.failed_msg);
    st.failed_msg = r->msg ? strdup(r->msg) : NULL;
    if (r->outcome == QL_ERROR) {
        int retries = r->def.retries >= 0 ? r->def.retries : s->opts.retry;
        if ((int64_t)st.attempts <= retries) {
            int64_t wait = r->def.retry_interval_ms >= 0 ? r->def.retry_interval_ms
                                                         : s->opts.retry_interval_ms;
            st.retry_at = now + wait;
            r->retry_wait = wait;
            r->result = RESULT_RETRY;
            rc = ql_step_set_state(txn, &st, QL_READY, now, err);
            goto out;
        }
        r->result = RESULT_FAILED;
        r->final_state = QL_ERROR;
        if (!(rc = ql_step_set_state(txn, &st, QL_ERROR, now, err)))
            rc = ql_job_set_state(txn, &job, QL_ERROR, false, now, err);
        goto out;
    }
    if ((rc = ql_step_set_state(txn, &st, r->outcome, now, err)))
        goto out;
    uint32_t next;
    bool warned = r->outcome == QL_WARNING;
    ql_step_t nst;
    if ((rc = next_unfinished(txn, &job, r->seq + 1, &next, &warned, &nst)))
        goto out;
    if (next < job.n_steps) {
        r->result = RESULT_NEXT;
        rc = begin_step_rec(txn, r, &nst, now, err);
        ql_step_free(&nst);
        /* The job record itself only changes when its fencing token does. */
        if (!rc && fence_changed)
            rc = ql_job_put(txn, &job);
        goto out;
    }
    r->result = RESULT_FINISHED;
    r->final_state = QL_SUCCEED;
    rc = ql_job_set_state(txn, &job, QL_SUCCEED, warned, now, err);
out:
    ql_step_free(&st);
    ql_job_free(&job);
    return rc;
}

static int retry_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    run_t *r = arg;
    ql_job_t job;
    r->seq = r->end_seq;
    r->attempt = r->end_attempt;
    r->result = RESULT_STALE;
    int rc = check_fence(txn, r->s, err);
    if (rc)
        return rc;
    rc = ql_job_get(txn, &r->job, 0, &job);
    if (rc)
        return rc == QL_ENOTFOUND ? 0 : rc;
    ql_state_t state = job.state;
    ql_job_free(&job);
    if (state != QL_RUNNING)
        return 0;
    ql_step_t st;
    if ((rc = ql_step_get(txn, &r->job, r->seq, &st)))
        return ql_err_set(err, rc, "cannot read the step: %s", ql_strerror(rc));
    bool ours = st.state == QL_READY && st.attempts == r->attempt;
    ql_step_free(&st);
    if (!ours)
        return 0;
    r->result = RESULT_NEXT;
    if ((rc = ql_job_get(txn, &r->job, 0, &job)))
        return rc;
    rc = begin_step(txn, r, &job, r->seq, r->now, err);
    ql_job_free(&job);
    return rc;
}

static void step_written(void *arg, int status, const ql_err_t *err);

static void retry_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    run_t *r = arg;
    if (r->cancelled) {
        run_drop(r);
        return;
    }
    if (r->s->stopping) {
        park_run(r); /* no new try while the server stops */
        return;
    }
    r->phase = RUN_FINISHING;
    r->now = ql_clock_now_ms(r->s->opts.clock);
    r->end_seq = r->seq;
    r->end_attempt = r->attempt;
    r->end_fn = retry_fn;
    r->end_done = step_written;
    r->refs++;
    if (ql_sched_submit(r->s, retry_fn, r, step_written)) {
        r->refs--;
        run_drop(r);
    }
}

static void step_written(void *arg, int status, const ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    r->refs--;
    /* A full map or disk: the outcome (output included) stays and is written again. */
    if (ql_sched_hold_end(r, status, err))
        return;
    free(r->output);
    r->output = NULL;
    if (fenced_out(s, status, err)) {
        /* Not recorded: the lock's new holder recovered the job and runs this step again. */
        log_job(s, QL_LOG_WARN, r, "step end not recorded step=%02u reason=\"fenced\"", r->seq);
        run_drop(r);
        return;
    }
    if (status) {
        log_job(s, QL_LOG_ERROR, r, "cannot record the step's end: %s", err->msg);
        run_drop(r);
        return;
    }
    switch (r->result) {
    case RESULT_NEXT:
        log_job(s, QL_LOG_DEBUG, r, "step started step=%02u attempt=%u", r->seq, r->attempt);
        if (r->cancelled) {
            run_drop(r);
            return;
        }
        if (s->stopping) {
            park_run(r); /* the next step is RUNNING in the store but will not start */
            return;
        }
        start_step(r);
        return;
    case RESULT_RETRY:
        log_job(s, QL_LOG_WARN, r,
                "step failed, retrying step=%02u attempt=%u wait_ms=%lld reason=\"%s\"", r->seq,
                r->attempt, (long long)r->retry_wait, r->msg ? r->msg : "");
        if (s->stopping && !r->cancelled) {
            park_run(r); /* the retry comes after the restart, not during the shutdown */
            return;
        }
        r->phase = RUN_WAITING;
        ensure_timer(r);
        ql_timer_start(&r->timer, r->retry_wait, retry_timer_cb, r);
        return;
    case RESULT_FINISHED:
    case RESULT_FAILED:
        if (r->final_state == QL_ERROR)
            log_job(s, QL_LOG_WARN, r, "job RUNNING -> ERROR step=%02u reason=\"%s\"", r->seq,
                    r->msg ? r->msg : "");
        else
            log_job(s, QL_LOG_INFO, r, "job RUNNING -> SUCCEED");
        job_ended(r, r->final_state);
        run_drop(r);
        ql_sched_kick(s);
        return;
    default:
        run_drop(r);
        ql_sched_kick(s);
    }
}

/* Submits the queued step ends as one mutation, together with the picks that take the slots
 * of the jobs they end: those jobs' ends come first in the transaction, and the commit makes
 * both durable at once, so the store never holds more RUNNING jobs than the limit allows and a
 * slot costs one commit per job, not two. */
static void flush_finishing(ql_sched_t *s) {
    size_t n = s->n_finishing, m = 0;
    bool ending = false;
    s->n_finishing = 0;
    if (!n)
        return;
    batch_ent_t *ents = malloc((n + (size_t)s->opts.max_concurrent_jobs) * sizeof *ents);
    if (!ents) {
        for (size_t i = 0; i < n; i++) {
            s->finishing[i]->refs--;
            run_drop(s->finishing[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ents[m++] = (batch_ent_t){s->finishing[i], finish_fn, step_written};
        ending |= s->finishing[i]->ending;
    }
    if (ending)
        fetch_into(s, ents, &m);
    submit_or_drop(s, ents, m);
    free(ents);
}

static void finish_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    flush_finishing(arg);
}

/* Whether the step that just ended (r->outcome) ends the job: it was the last one, or it failed
 * with no retry left. Exact (finish_fn decides the same way), except for a later step a template
 * skipped, which errs on the safe side (the run keeps its slot until its end is written). */
static bool ends_job(const run_t *r) {
    if (r->outcome == QL_ERROR) {
        int retries = r->def.retries >= 0 ? r->def.retries : r->s->opts.retry;
        return (int64_t)r->attempt > retries;
    }
    return r->seq + 1 >= r->jobinfo.n_steps;
}

void ql_sched_step_completed(run_t *r) {
    ql_sched_t *s = r->s;
    if (r->cancelled) {
        run_drop(r);
        ql_sched_kick(s);
        return;
    }
    if (r->stop_first) {
        /* A shutdown stopped the step (interrupt_run): its processes are gone, put it back. */
        r->stop_first = false;
        if (r->swept_rc == 0) {
            interrupt_run(r);
            return;
        }
        log_job(s, QL_LOG_ERROR, r,
                "job left RUNNING step=%02u reason=\"the stopped step's processes may still run "
                "(%s): the next start's recovery sweeps them\"",
                r->seq, ql_strerror(r->swept_rc));
        r->cancelled = true;
        run_drop(r);
        return;
    }
    r->phase = RUN_FINISHING;
    r->now = ql_clock_now_ms(s->opts.clock);
    r->end_seq = r->seq;
    r->end_attempt = r->attempt;
    r->end_fn = finish_fn;
    r->end_done = step_written;
    r->refs++;
    /* Steps that end in the same loop turn (built-in steps started by one pick batch, processes
     * reaped together) are written together: queued here, submitted by a zero-delay timer,
     * which runs after the callbacks already due (see submit_batch for why). */
    if (s->n_finishing == s->cap_finishing) {
        size_t cap = s->cap_finishing ? s->cap_finishing * 2 : 64;
        run_t **p = realloc(s->finishing, cap * sizeof *p);
        if (!p) {
            if (ql_sched_submit(s, finish_fn, r, step_written)) {
                r->refs--;
                run_drop(r);
            }
            return;
        }
        s->finishing = p;
        s->cap_finishing = cap;
    }
    s->finishing[s->n_finishing++] = r;
    if (!s->finish_timer.armed)
        ql_timer_start(&s->finish_timer, 0, finish_timer_cb, s);
    /* Its slot is taken by the picks flush_finishing adds to this job's end. */
    if (!r->ending && ends_job(r)) {
        r->ending = true;
        s->n_ending++;
    }
}

/* ---- actions ---- */

typedef struct sched_action action_t;
struct sched_action {
    ql_sched_t *s;
    ql_id_t job;
    ql_action_t action;
    ql_state_t was;
    int64_t now;
    ql_sched_done_cb done;
    void *arg;
    action_t *next; /* s->actions: in flight */
};

static int action_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    action_t *a = arg;
    return ql_job_apply_action(txn, &a->job, a->action, a->now, &a->was, err);
}

void ql_sched_cancel_run(run_t *r, ql_proc_stop_reason_t reason) {
    if (r->cancelled || r->phase == RUN_DONE)
        return;
    r->cancelled = true;
    if (r->proc) {
        ql_proc_stop(r->proc, reason);
        return; /* the process's end drops the run */
    }
    if (r->phase == RUN_STEP || r->phase == RUN_WAITING) {
        if (r->timer_init)
            ql_timer_stop(&r->timer);
        /* run_drop may free r at once (a virtual clock closes its timer synchronously). */
        ql_sched_t *s = r->s;
        run_drop(r);
        ql_sched_kick(s);
    }
    /* PICKING / FINISHING: the mutation's answer sees `cancelled` and drops the run. */
}

static void action_done(void *arg, int status, const ql_err_t *err) {
    action_t *a = arg;
    ql_sched_t *s = a->s;
    for (action_t **pp = &s->actions; *pp; pp = &(*pp)->next)
        if (*pp == a) {
            *pp = a->next;
            break;
        }
    if (status == 0) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&a->job, id);
        ql_log(s->opts.log, QL_LOG_INFO, "scheduler", "job action %s job=%s was=%s",
               ql_action_name(a->action), id, ql_state_name(a->was));
        run_t *r = ql_sched_find_run(s, &a->job);
        if (r && a->action != QL_ACTION_RESUME) {
            ql_proc_stop_reason_t reason = a->action == QL_ACTION_PAUSE     ? QL_PROC_STOP_PAUSE
                                           : a->action == QL_ACTION_DISCARD ? QL_PROC_STOP_DISCARD
                                                                            : QL_PROC_STOP_RESTART;
            ql_sched_cancel_run(r, reason);
        }
        if (a->action == QL_ACTION_RESUME || a->action == QL_ACTION_RESTART)
            ql_sched_kick(s);
        if (s->opts.on_job_end && (a->action == QL_ACTION_DISCARD || a->action == QL_ACTION_PAUSE))
            s->opts.on_job_end(s->opts.hook_arg, &a->job,
                               a->action == QL_ACTION_DISCARD ? QL_DISCARDED : QL_PAUSED);
    }
    if (a->done)
        a->done(a->arg, status, err);
    free(a);
    ql_sched_check_stopped(s); /* a stop waits for the actions in flight; may free s */
}

int ql_sched_action(ql_sched_t *s, const ql_id_t *job, ql_action_t action, ql_sched_done_cb done,
                    void *arg) {
    action_t *a = calloc(1, sizeof *a);
    if (!a)
        return UV_ENOMEM;
    a->s = s;
    a->job = *job;
    a->action = action;
    a->now = ql_clock_now_ms(s->opts.clock);
    a->done = done;
    a->arg = arg;
    int rc = ql_sched_submit(s, action_fn, a, action_done);
    if (rc) {
        free(a);
        return rc;
    }
    a->next = s->actions;
    s->actions = a;
    return 0;
}

/* ---- jobs moved by another process ---- */

/*
 * Several servers may share a store (the job engine lock picks the one that schedules): a
 * standby's API, or any other process writing the store, applies PAUSE, DISCARD or RESTART
 * straight to the job's record, and only this scheduler can stop the step it runs. Kylin's job
 * thread checks the job's status in the metadata store; here every poll interval looks up
 * each job a run
 * executes a step or a retry wait for, in one read transaction (a fresh LMDB snapshot, which
 * sees every commit of the other processes), and stop the run of a job that is no longer
 * RUNNING: its process group gets SIGTERM, then SIGKILL after the kill grace, as with a local
 * action. The state found is left as the other process wrote it; whatever the stopped step
 * reports is dropped (a cancelled run writes nothing, and finish_fn refuses a job that is not
 * RUNNING). Runs with a local action in flight are skipped: that action's answer stops them.
 */
static bool action_pending(const ql_sched_t *s, const ql_id_t *job) {
    for (const action_t *a = s->actions; a; a = a->next)
        if (ql_id_eq(&a->job, job))
            return true;
    return false;
}

static bool watched(const run_t *r) {
    return !r->cancelled && !r->parking && (r->phase == RUN_STEP || r->phase == RUN_WAITING);
}

typedef struct moved {
    ql_id_t job;
    ql_state_t state;
    bool missing;
} moved_t;

static void watch_runs(ql_sched_t *s) {
    size_t n = 0;
    for (run_t *r = s->runs; r; r = r->next)
        n += watched(r);
    if (!n)
        return;
    moved_t *moved = malloc(n * sizeof *moved);
    ql_txn_t *txn;
    if (!moved || ql_txn_begin(s->opts.store, false, &txn)) {
        free(moved);
        return;
    }
    size_t m = 0;
    for (run_t *r = s->runs; r && m < n; r = r->next) {
        if (!watched(r) || action_pending(s, &r->job))
            continue;
        ql_job_t job;
        int rc = ql_job_get(txn, &r->job, 0, &job);
        if (rc == QL_ENOTFOUND) {
            moved[m++] = (moved_t){r->job, QL_DISCARDED, true};
        } else if (rc == 0) {
            if (job.state != QL_RUNNING)
                moved[m++] = (moved_t){r->job, job.state, false};
            ql_job_free(&job);
        }
    }
    ql_txn_abort(txn);
    s->busy++;
    for (size_t i = 0; i < m; i++) {
        /* Looked up again: stopping one run never frees another, but stay on the safe side. */
        run_t *r = ql_sched_find_run(s, &moved[i].job);
        if (!r || !watched(r))
            continue;
        const char *found = moved[i].missing ? "missing" : ql_state_name(moved[i].state);
        char what[64];
        if (moved[i].missing)
            snprintf(what, sizeof what, "deleted");
        else
            snprintf(what, sizeof what, "RUNNING -> %s", found);
        log_job(s, QL_LOG_INFO, r,
                "job %s by another process: stopping its step step=%02u attempt=%u found=%s "
                "reason=\"the stored job is no longer RUNNING\"",
                what, r->seq, r->attempt, found);
        ql_proc_stop_reason_t reason = moved[i].state == QL_PAUSED  ? QL_PROC_STOP_PAUSE
                                       : moved[i].state == QL_READY ? QL_PROC_STOP_RESTART
                                                                    : QL_PROC_STOP_DISCARD;
        ql_sched_cancel_run(r, reason);
    }
    free(moved);
    s->busy--;
    ql_sched_check_stopped(s); /* may free s */
}

/* ---- recovery ---- */

/*
 * What a crashed server's tries left behind is killed inside the recovery transaction, before
 * its commit puts the steps back to READY: until that commit no interrupted step can run again,
 * and a crash before it leaves them RUNNING with their markers for the next start to sweep
 * (ql_proc.h, Markers). A recovery that cannot prove them gone fails, and with it the holding
 * (the node tries again later): a step running beside its own next try is the worse outcome.
 */
typedef struct {
    ql_sched_t *s;
    uint64_t n;
    ql_proc_tokens_t *tokens;
    char boot_id[QL_PROC_BOOT_ID_LEN + 1];
    unsigned groups, groups_left;
    int rc; /* the first error collecting markers */
} recover_t;

static void recover_step(const ql_step_t *st, void *arg) {
    recover_t *r = arg;
    char sid[QL_ID_STR_LEN + 8];
    if (st->token[0]) {
        int rc = ql_proc_tokens_add(r->tokens, st->token);
        if (rc && !r->rc)
            r->rc = rc;
    }
    if (st->pgid <= 0)
        return;
    ql_proc_ident_t id = {.pgid = st->pgid, .start = st->pg_start};
    memcpy(id.boot_id, st->boot_id, sizeof id.boot_id);
    ql_proc_group_fate_t fate;
    int rc = ql_proc_kill_group_checked(&id, r->boot_id, &fate);
    ql_step_id_format(&st->job, st->seq, sid);
    if (rc == 0 && fate == QL_PROC_GROUP_KILLED) {
        r->groups++;
        ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
               "killed the process group of an interrupted step step=%s pgid=%d", sid, st->pgid);
        return;
    }
    r->groups_left++;
    /* A group whose leader died with the server is the usual case, counted in the summary; a
     * number that now names someone else is worth a line. */
    if (rc || fate != QL_PROC_GROUP_LEADER_GONE)
        ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
               "left the recorded process group of an interrupted step alone step=%s pgid=%d "
               "reason=\"%s\"",
               sid, st->pgid, rc ? ql_strerror(rc) : ql_proc_group_fate_name(fate));
}

static int recover_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    recover_t *r = arg;
    /* This may run again (see ql_writer.h): start from nothing. */
    r->n = 0;
    r->groups = r->groups_left = 0;
    r->rc = 0;
    ql_proc_tokens_free(r->tokens);
    r->tokens = NULL;
    int rc = check_fence(txn, r->s, err);
    if (rc)
        return rc;
    if ((rc = ql_proc_tokens_new(&r->tokens)))
        return ql_err_set(err, rc, "out of memory");
    if ((rc = ql_proc_boot_id(r->boot_id)))
        return ql_err_set(err, rc, "cannot read the boot id: %s", ql_strerror(rc));
    rc = ql_jobs_recover(txn, ql_clock_now_ms(r->s->opts.clock), recover_step, r, &r->n, err);
    if (rc)
        return rc;
    if (r->rc)
        return ql_err_set(err, r->rc, "cannot collect the markers of interrupted steps: %s",
                          ql_strerror(r->rc));
    if (!ql_proc_tokens_count(r->tokens)) {
        if (r->groups_left)
            ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
                   "interrupted steps: groups_killed=%u groups_left=%u", r->groups, r->groups_left);
        return 0;
    }
    ql_proc_sweep_t sw;
    rc = ql_proc_kill_tokens(r->tokens, &sw);
    if (rc)
        return ql_err_set(err, rc,
                          "cannot make sure the processes of %zu interrupted steps are gone: %s",
                          ql_proc_tokens_count(r->tokens), ql_strerror(rc));
    ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
           "swept the processes of interrupted steps steps=%zu killed=%u scans=%u examined=%u "
           "unreadable=%u groups_killed=%u groups_left=%u",
           ql_proc_tokens_count(r->tokens), sw.killed, sw.scans, sw.examined, sw.unreadable,
           r->groups, r->groups_left);
    return 0;
}

int ql_sched_recover(ql_sched_t *s, uint64_t *recovered, ql_err_t *err) {
    recover_t r = {.s = s};
    int rc = ql_writer_call(s->opts.writer, recover_fn, &r, err);
    ql_proc_tokens_free(r.tokens);
    if (rc == 0) {
        if (r.n)
            ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
                   "recovered interrupted jobs count=%llu reason=\"found RUNNING or PENDING at "
                   "startup\"",
                   (unsigned long long)r.n);
        if (recovered)
            *recovered = r.n;
    }
    return rc;
}

/* ---- lifecycle ---- */

int ql_sched_new(const ql_sched_opts_t *opts, ql_sched_t **out) {
    *out = NULL;
    ql_sched_t *s = calloc(1, sizeof *s);
    if (!s)
        return UV_ENOMEM;
    s->opts = *opts;
    if (s->opts.max_concurrent_jobs <= 0)
        s->opts.max_concurrent_jobs = 10;
    if (!s->opts.output_max)
        s->opts.output_max = QL_PROC_DEFAULT_MAX_OUTPUT;
    if (!s->opts.kill_grace_ms)
        s->opts.kill_grace_ms = QL_PROC_DEFAULT_GRACE_MS;
    s->n_buckets = 64;
    while (s->n_buckets < (size_t)s->opts.max_concurrent_jobs * 2)
        s->n_buckets *= 2;
    s->buckets = calloc(s->n_buckets, sizeof *s->buckets);
    if (!s->buckets || ql_tzcache_new(&s->zones) || ql_submit_cache_new(0, &s->formats)) {
        ql_tzcache_free(s->zones);
        free(s->buckets);
        free(s);
        return UV_ENOMEM;
    }
    ql_timer_init(opts->clock, &s->poll_timer);
    ql_timer_init(opts->clock, &s->kick_timer);
    ql_timer_init(opts->clock, &s->flush_timer);
    ql_timer_init(opts->clock, &s->finish_timer);
    ql_timer_init(opts->clock, &s->grace_timer);
    ql_timer_init(opts->clock, &s->hold_timer);
    s->held_tail = &s->held;
    *out = s;
    return 0;
}

void ql_sched_check_stopped(ql_sched_t *s) {
    /* An action in flight answers into s: the stop waits for it too. */
    if (!s->stopping || s->n_runs || !s->stop_done || s->busy || s->actions)
        return;
    ql_timer_stop(&s->grace_timer);
    ql_timer_stop(&s->poll_timer);
    void (*done)(void *) = s->stop_done;
    s->stop_done = NULL;
    done(s->stop_arg); /* may free s */
}

/* Puts a job this scheduler runs back to READY (its RUNNING step too), unless something else
 * already moved it: the job record says whether it is still RUNNING. */
static int interrupt_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    run_t *r = arg;
    r->interrupted = false;
    ql_job_t job;
    int rc = check_fence(txn, r->s, err);
    if (rc)
        return rc;
    rc = ql_job_get(txn, &r->job, QL_DECODE_KEEP_EXTRA, &job);
    if (rc)
        return rc == QL_ENOTFOUND ? 0 : rc;
    if (job.state == QL_RUNNING) {
        ql_step_t st;
        if (ql_step_get(txn, &job.id, r->seq, &st) == 0) {
            if (st.state == QL_RUNNING && r->unstarted && st.attempts == r->attempt) {
                /* Marked RUNNING but never started: that is not a try (it would count
                 * against the step's retries). RUNNING -> READY keeps the times: reset. */
                st.attempts--;
                st.start_time = 0;
                st.end_time = 0;
            }
            if (st.state == QL_RUNNING)
                rc = ql_step_set_state(txn, &st, QL_READY, r->now, err);
            ql_step_free(&st);
        }
        if (!rc)
            rc = ql_job_set_state(txn, &job, QL_READY, false, r->now, err);
        r->interrupted = rc == 0;
    }
    ql_job_free(&job);
    return rc;
}

static void interrupt_done(void *arg, int status, const ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    r->refs--;
    if (fenced_out(s, status, err))
        log_job(s, QL_LOG_INFO, r,
                "step stopped step=%02u reason=\"the job engine lock is lost: its new holder "
                "resumes the job\"",
                r->seq);
    else if (status)
        log_job(s, QL_LOG_ERROR, r, "cannot put the job back to READY: %s", err->msg);
    else if (r->interrupted && s->grace_expired)
        log_job(s, QL_LOG_INFO, r,
                "job RUNNING -> READY step=%02u reason=\"server shutting down: the step outlasted "
                "qilin.shutdown.grace-ms (%lld ms)\"",
                r->seq, (long long)s->stop_grace_ms);
    else if (r->interrupted)
        log_job(s, QL_LOG_INFO, r,
                "job RUNNING -> READY step=%02u reason=\"server shutting down%s\"", r->seq,
                r->unstarted ? ": the step was not started" : "");
    ql_sched_cancel_run(r, QL_PROC_STOP_SHUTDOWN);
}

/*
 * Shutdown: puts r's job back to READY and drops r; the job resumes from that step after a
 * restart. A step that runs a process is stopped FIRST (SIGTERM, SIGKILL after the kill grace)
 * and its marker swept, and only then is the put-back committed (ql_sched_step_completed calls
 * back here): until that commit the step is RUNNING with its marker, so a server killed while it
 * waits for the processes to end leaves them to the next start's recovery sweep. Committing
 * first would forget the marker while they still run. The stop is bounded by the kill grace
 * (and a sweep), as before; a sweep that fails leaves the job RUNNING, for that recovery.
 */
static void interrupt_run(run_t *r) {
    ql_sched_t *s = r->s;
    r->parking = true;
    if (r->proc && !r->stop_first) {
        r->stop_first = true;
        r->swept_rc = 0;
        log_job(s, QL_LOG_INFO, r,
                "stopping the step before the job goes back to READY step=%02u reason=\"server "
                "shutting down%s\"",
                r->seq, s->grace_expired ? ": the step outlasted qilin.shutdown.grace-ms" : "");
        ql_proc_stop(r->proc, QL_PROC_STOP_SHUTDOWN);
        return;
    }
    r->now = ql_clock_now_ms(s->opts.clock);
    r->refs++;
    if (ql_sched_submit(s, interrupt_fn, r, interrupt_done)) {
        r->refs--;
        ql_sched_cancel_run(r, QL_PROC_STOP_SHUTDOWN);
    }
}

/* A run whose mutation answered while the server stops: it starts nothing (no step, no retry)
 * and its job goes back to READY instead of staying RUNNING until the next start's recovery. */
static void park_run(run_t *r) {
    r->phase = RUN_STEP; /* nothing executes: the interrupt's answer drops the run */
    r->unstarted = true;
    interrupt_run(r);
}

/* Interrupts every run that waits for a retry and, unless waiting_only, every run that
 * executes a step; runs whose mutation is in flight are parked by its answer (they see
 * `stopping`). */
static void interrupt_runs(ql_sched_t *s, bool waiting_only) {
    s->busy++;
    for (run_t *r = s->runs, *next; r; r = next) {
        next = r->next;
        if (r->cancelled || r->parking)
            continue;
        if (r->phase == RUN_WAITING || (r->phase == RUN_STEP && !waiting_only))
            interrupt_run(r);
    }
    s->busy--;
    ql_sched_check_stopped(s);
}

/* The runs a `wait` shutdown waits for: those executing a step that nothing stops yet. */
static size_t running_steps(const ql_sched_t *s) {
    size_t n = 0;
    for (const run_t *r = s->runs; r; r = r->next)
        n += r->phase == RUN_STEP && !r->parking && !r->cancelled;
    return n;
}

static void grace_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_t *s = arg;
    if (!s->stopping || !s->n_runs)
        return;
    s->grace_expired = true;
    ql_log(s->opts.log, QL_LOG_WARN, "scheduler",
           "shutdown grace expired: pausing the steps still running running=%zu grace_ms=%lld",
           running_steps(s), (long long)s->stop_grace_ms);
    interrupt_runs(s, false); /* may end the stop (and free s) */
}

void ql_sched_stop(ql_sched_t *s, bool pause_running, int64_t grace_ms, void (*done)(void *arg),
                   void *arg) {
    ql_sched_pause_fetching(s);
    s->stopping = true;
    s->stop_done = done;
    s->stop_arg = arg;
    s->stop_grace_ms = grace_ms;
    ql_sched_release_held(s); /* one last try each, now (see sched_hold.c) */
    if (pause_running || grace_ms == 0) {
        interrupt_runs(s, false); /* may end the stop (and free s) */
        return;
    }
    /* `wait` waits for steps that run; a retry would be a new try: it comes after a restart. */
    s->busy++;
    interrupt_runs(s, true);
    s->busy--;
    if (s->n_runs) {
        size_t steps = running_steps(s);
        if (steps)
            ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
                   "waiting for running steps running=%zu grace_ms=%lld", steps,
                   (long long)grace_ms);
        if (grace_ms > 0)
            ql_timer_start(&s->grace_timer, grace_ms, grace_cb, s);
        /* While it waits, the scheduler still notices jobs another process moves (see
         * watch_runs): the poll goes on, without fetching. */
        if (s->opts.poll_interval_ms > 0)
            ql_timer_start(&s->poll_timer, s->opts.poll_interval_ms, poll_cb, s);
    }
    ql_sched_check_stopped(s);
}

static void sched_release(ql_sched_t *s) {
    if (--s->closing == 0) {
        free(s->finishing);
        free(s->buckets);
        ql_submit_cache_free(s->formats);
        ql_tzcache_free(s->zones);
        free(s);
    }
}

static void sched_timer_closed(ql_timer_t *t) {
    sched_release(t->arg);
}

/* A run freed by ql_sched_free: its timer is closed, then its memory and its hold on s go. */
static void run_timer_freed(ql_timer_t *t) {
    run_t *r = (run_t *)(void *)((char *)t - offsetof(run_t, timer));
    ql_sched_t *s = r->s;
    run_release(r);
    sched_release(s);
}

void ql_sched_free(ql_sched_t *s) {
    if (!s)
        return;
    /* Timers of the real clock close asynchronously: s is freed once its six timers and the
     * timers of the runs freed below are closed. */
    s->closing = 6;
    /* Queued step ends go to the writer like every other mutation, with no pick. */
    s->fetching = false;
    flush_finishing(s);
    for (run_t *r = s->runs, *next; r; r = next) {
        next = r->next;
        if (r->proc) {
            ql_proc_stop(r->proc, QL_PROC_STOP_SHUTDOWN);
            continue;
        }
        /* A run waiting on its step or retry timer (what a restart of the simulator leaves):
         * its timer must not fire into freed memory, so it goes now. A run whose mutation is
         * still queued (refs > 0) is left to the writer's answer, as before. */
        if (r->refs > 0)
            continue;
        run_unlink(r);
        r->phase = RUN_DONE;
        if (r->timer_init) {
            s->closing++;
            ql_timer_close(&r->timer, run_timer_freed);
        } else {
            run_release(r);
        }
    }
    ql_timer_t *timers[] = {&s->poll_timer,   &s->kick_timer,  &s->flush_timer,
                            &s->finish_timer, &s->grace_timer, &s->hold_timer};
    for (int i = 0; i < 6; i++) {
        ql_timer_stop(timers[i]);
        timers[i]->arg = s;
        ql_timer_close(timers[i], sched_timer_closed);
    }
}

void ql_sched_get_stats(const ql_sched_t *s, ql_sched_stats_t *out) {
    *out = s->stats;
    out->running = (unsigned)s->n_runs;
}

bool ql_sched_idle(const ql_sched_t *s) {
    return s->n_runs == 0;
}

void ql_sched_set_step_start_hook(ql_sched_t *s,
                                  void (*hook)(void *arg, const ql_id_t *job, uint32_t seq),
                                  void *arg) {
    s->step_start_hook = hook;
    s->step_start_arg = arg;
}
