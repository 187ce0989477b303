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
 * Commits per job. The mutations of many runs are applied as one batch (see ql_sched_submit_batch),
 * and a job whose last step has ended ("ending") gives up its slot at once: the picks that take it
 * are written in the same batch as that job's end, after it, so one commit both ends the old
 * job and starts the new one. The store never shows more RUNNING jobs than the limits allow,
 * and no step starts before its RUNNING state is durable.
 *
 * Files. This one keeps the run bookkeeping, the writer plumbing, fencing, batches and the
 * lifecycle; the pick and the fetcher are in sched_pick.c (the fetcher's decisions in the pure
 * pick_policy.c), running a step and its end in sched_step.c, actions, jobs moved by another
 * process and recovery in sched_actions.c, held step ends in sched_hold.c and the takeover grace
 * of recovered jobs in sched_grace.c. They share sched_int.h. Shell steps (sched_shell.c) do
 * not: they see only sched_shell.h, a try in and its end out through a callback, so that no
 * call goes from them back into the files above.
 */
#include "config/ql_config.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

run_t *ql_sched_run_new(ql_sched_t *s, const ql_id_t *id, const char *project) {
    run_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->s = s;
    r->job = *id;
    r->fence = s->opts.fence;
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

static void bucket_unlink(run_t *r) {
    ql_sched_t *s = r->s;
    run_t **pp = &s->buckets[bucket_of(s, &r->job)];
    while (*pp && *pp != r)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = r->hnext;
}

void ql_sched_run_set_job(run_t *r, const ql_id_t *id) {
    ql_sched_t *s = r->s;
    bucket_unlink(r);
    r->job = *id;
    size_t b = bucket_of(s, id);
    r->hnext = s->buckets[b];
    s->buckets[b] = r;
}

static void run_unlink(run_t *r) {
    ql_sched_t *s = r->s;
    bucket_unlink(r);
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

static void sched_release(ql_sched_t *s);

/* A dropped run's timer has closed. The run held s until now (n_timer_closing): the stop waits
 * for it, and ql_sched_free counts it among what s waits for before it is freed. */
static void timer_closed_cb(ql_timer_t *t) {
    run_t *r = (run_t *)(void *)((char *)t - offsetof(run_t, timer));
    ql_sched_t *s = r->s;
    s->n_timer_closing--;
    r->refs--;
    if (s->closing) { /* ql_sched_free has run */
        if (r->refs == 0)
            run_release(r);
        sched_release(s);
        return;
    }
    run_maybe_free(r);
}

void ql_sched_run_drop(run_t *r) {
    if (r->phase == RUN_DONE)
        return;
    r->phase = RUN_DONE;
    run_unlink(r);
    ql_sched_job_unlock(r);
    if (r->timer_init) {
        r->timer_init = false;
        r->refs++;
        r->s->n_timer_closing++;
        /* The close callback frees the run: at once on the virtual clock, later on the real
         * one. Either way r must not be touched after this call. */
        ql_timer_close(&r->timer, timer_closed_cb);
        return;
    }
    run_maybe_free(r);
}

void ql_sched_ensure_timer(run_t *r) {
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

/* Every write of a job takes its model's lock (docs/postgresql.md), so the model orders them;
 * a job without a model is ordered by its own id. */
uint64_t ql_sched_target_key(const ql_id_t *job, const ql_id_t *model) {
    return ql_writer_key(model && !ql_id_is_zero(model) ? model : job);
}

uint64_t ql_sched_job_key(const ql_job_t *job) {
    return ql_sched_target_key(&job->id, &job->model);
}

/* Queues fn with keys[0..n_keys) (none: every key). A manual writer commits only when flushed:
 * the scheduler flushes what it queued at the next turn of its clock (a zero-delay timer), so
 * its mutations commit in the order the clock runs its timers, which on a virtual clock is the
 * same on every run. */
static int submit_keyed(ql_sched_t *s, const uint64_t *keys, size_t n_keys, ql_write_fn fn,
                        void *arg, ql_write_done_cb done) {
    int rc = ql_writer_submit_keyed(s->opts.writer, keys, n_keys, fn, arg, done);
    if (rc == 0 && ql_writer_is_manual(s->opts.writer) && !s->flush_timer.armed)
        ql_timer_start(&s->flush_timer, 0, flush_cb, s);
    return rc;
}

int ql_sched_submit(ql_sched_t *s, ql_write_fn fn, void *arg, ql_write_done_cb done) {
    return submit_keyed(s, NULL, 0, fn, arg, done);
}

int ql_sched_submit_run(run_t *r, ql_write_fn fn, ql_write_done_cb done) {
    return submit_keyed(r->s, &r->wkey, r->wkey ? 1 : 0, fn, r, done);
}

void ql_sched_log_job(ql_sched_t *s, ql_log_level_t lvl, const run_t *r, const char *fmt, ...) {
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
int ql_sched_check_fence(ql_txn_t *txn, const ql_sched_t *s, ql_err_t *err) {
    return ql_fence_check(txn, s->opts.fence, err);
}

/* A run under its job's own lock (scheduler 2) checks the job's token instead; a job that is
 * gone passes, for the caller's own read to notice. */
int ql_sched_check_run_fence(ql_txn_t *txn, const run_t *r, ql_err_t *err) {
    if (!r->job_locked)
        return ql_fence_check(txn, r->fence, err);
    int rc = ql_job_fence_check(txn, &r->job, r->fence, err);
    return rc == QL_ENOTFOUND ? 0 : rc;
}

/* Whether status is a change refused by fencing. The first one stops fetching and tells the
 * owner; the refused change is dropped (the new holder recovers the job from the store). A run
 * under its job's own lock lost that job alone: the scheduler goes on. */
bool ql_sched_fenced_out(run_t *r, int status, const ql_err_t *err) {
    ql_sched_t *s = r->s;
    if (status != QL_EFENCED)
        return false;
    if (r->job_locked) {
        ql_sched_log_job(s, QL_LOG_WARN, r, "lost the job's lock fence=%llu reason=\"%s\"",
                         (unsigned long long)r->fence, err && err->msg[0] ? err->msg : "fenced");
        return true;
    }
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

/* Queues the batch e[0..n) as one mutation, fn(arg), with the batch's write keys: its runs'
 * and, when it picks, those of the runs whose end is in flight. A pick may take the slot of a
 * job whose end was queued before it, and must not commit before that end
 * (ql_sched_flush_finishing): sharing the end's key keeps it behind on any lane (ql_writer.h,
 * Lanes). Ends in the other parts of a batch being split (in_split) are left out: the split
 * pairs each of their picks with an end of its own part (sched_lanes.c). A run whose key is not
 * known gives the batch every key. */
static int submit_batch_keyed(ql_sched_t *s, const batch_ent_t *e, size_t n, ql_write_fn fn,
                              void *arg, ql_write_done_cb done) {
    if (ql_writer_lanes(s->opts.writer) < 2)
        return submit_keyed(s, NULL, 0, fn, arg, done); /* one lane: keys change nothing */
    bool picks = false, all = false;
    for (size_t i = 0; i < n; i++) {
        picks |= e[i].fn == ql_sched_pick_fn;
        all |= !e[i].r->wkey;
    }
    size_t cap = n + (picks ? s->n_ending : 0), k = 0;
    uint64_t one[1], *keys = all ? NULL : cap <= 1 ? one : malloc(cap * sizeof *keys);
    if (keys) {
        for (size_t i = 0; i < n; i++)
            keys[k++] = e[i].r->wkey;
        for (const run_t *r = s->runs; picks && r; r = r->next) {
            if (!r->ending || r->in_split)
                continue;
            if (!r->wkey || k == cap) {
                all = true; /* every key: the safe answer */
                break;
            }
            keys[k++] = r->wkey;
        }
    }
    int rc = submit_keyed(s, keys, all || !keys ? 0 : k, fn, arg, done);
    if (keys != one)
        free(keys);
    return rc;
}

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
        int rc = submit_batch_keyed(b->s, e, 1, e->fn, e->r, e->done);
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
int ql_sched_submit_batch(ql_sched_t *s, const batch_ent_t *e, size_t n) {
    if (n == 1)
        return submit_batch_keyed(s, e, 1, e[0].fn, e[0].r, e[0].done);
    batch_t *b = malloc(sizeof *b + n * sizeof *e);
    if (!b)
        return UV_ENOMEM;
    b->s = s;
    b->n = n;
    memcpy(b->e, e, n * sizeof *e);
    int rc = submit_batch_keyed(s, e, n, batch_fn, b, batch_done);
    if (rc)
        free(b);
    return rc;
}

void ql_sched_submit_one_or_drop(ql_sched_t *s, const batch_ent_t *e, size_t n) {
    if (n && ql_sched_submit_batch(s, e, n))
        for (size_t i = 0; i < n; i++) {
            e[i].r->refs--;
            ql_sched_run_drop(e[i].r);
        }
}

/* ---- lifecycle ---- */

/* The one call shell steps make into the scheduler besides their end (sched_shell.h). */
static int shell_submit(void *arg, ql_write_fn fn, void *fn_arg, ql_write_done_cb done) {
    return ql_sched_submit(arg, fn, fn_arg, done);
}

int ql_sched_new(const ql_sched_opts_t *opts, ql_sched_t **out) {
    *out = NULL;
    ql_sched_t *s = calloc(1, sizeof *s);
    if (!s)
        return UV_ENOMEM;
    s->opts = *opts;
    if (s->opts.proc_drain_ms <= 0)
        s->opts.proc_drain_ms = QL_PROC_DRAIN_MS;
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
    s->shell_env = (ql_shell_env_t){.opts = &s->opts,
                                    .zones = s->zones,
                                    .formats = s->formats,
                                    .submit = shell_submit,
                                    .submit_arg = s};
    ql_timer_init(opts->clock, &s->poll_timer);
    ql_timer_init(opts->clock, &s->kick_timer);
    ql_timer_init(opts->clock, &s->flush_timer);
    ql_timer_init(opts->clock, &s->finish_timer);
    ql_timer_init(opts->clock, &s->grace_timer);
    ql_timer_init(opts->clock, &s->hold_timer);
    ql_timer_init(opts->clock, &s->takeover_timer);
    s->held_tail = &s->held;
    /* Unreadable (no /proc): "" records no boot id, and a recorded one is never judged older. */
    if (ql_proc_boot_id(s->boot_id))
        s->boot_id[0] = '\0';
    s->self = (ql_step_host_t){.server_id = s->opts.server_id,
                               .boot_id = s->boot_id,
                               .spans_hosts = s->opts.spans_hosts ||
                                              (opts->store && ql_store_spans_hosts(opts->store))};
    *out = s;
    return 0;
}

void ql_sched_check_stopped(ql_sched_t *s) {
    /* An action in flight answers into s: the stop waits for it too. */
    if (!s->stopping || s->n_runs || s->n_timer_closing || !s->stop_done || s->busy || s->actions)
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
    int rc = ql_sched_check_run_fence(txn, r, err);
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
    if (ql_sched_fenced_out(r, status, err))
        ql_sched_log_job(
            s, QL_LOG_INFO, r,
            "step stopped step=%02u reason=\"the job engine lock is lost: its new holder "
            "resumes the job\"",
            r->seq);
    else if (status)
        ql_sched_log_job(s, QL_LOG_ERROR, r, "cannot put the job back to READY: %s", err->msg);
    else if (r->interrupted && s->grace_expired)
        ql_sched_log_job(
            s, QL_LOG_INFO, r,
            "job RUNNING -> READY step=%02u reason=\"server shutting down: the step outlasted "
            "qilin.shutdown.grace-ms (%lld ms)\"",
            r->seq, (long long)s->stop_grace_ms);
    else if (r->interrupted)
        ql_sched_log_job(s, QL_LOG_INFO, r,
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
void ql_sched_interrupt_run(run_t *r) {
    ql_sched_t *s = r->s;
    r->parking = true;
    if (r->shell.proc && !r->stop_first) {
        r->stop_first = true;
        ql_sched_log_job(
            s, QL_LOG_INFO, r,
            "stopping the step before the job goes back to READY step=%02u reason=\"server "
            "shutting down%s\"",
            r->seq, s->grace_expired ? ": the step outlasted qilin.shutdown.grace-ms" : "");
        ql_shell_stop(&r->shell, QL_PROC_STOP_SHUTDOWN, true);
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
void ql_sched_park_run(run_t *r) {
    r->phase = RUN_STEP; /* nothing executes: the interrupt's answer drops the run */
    r->unstarted = true;
    ql_sched_interrupt_run(r);
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
            ql_sched_interrupt_run(r);
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
         * ql_sched_watch_runs): the poll goes on, without fetching. */
        if (s->opts.poll_interval_ms > 0)
            ql_timer_start(&s->poll_timer, s->opts.poll_interval_ms, ql_sched_poll_cb, s);
    }
    ql_sched_check_stopped(s);
}

static void sched_release(ql_sched_t *s) {
    if (--s->closing == 0) {
        free(s->finishing);
        free(s->kept);
        ql_sched_grace_clear(s);
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
    /* Timers of the real clock close asynchronously: s is freed once its seven timers, the
     * timers of the runs freed below and those of runs dropped before (n_timer_closing) are
     * closed. */
    s->closing = 7 + (int)s->n_timer_closing;
    /* Queued step ends go to the writer like every other mutation, with no pick. */
    s->fetching = false;
    ql_sched_flush_finishing(s);
    for (run_t *r = s->runs, *next; r; r = next) {
        next = r->next;
        if (r->shell.proc) {
            ql_shell_stop(&r->shell, QL_PROC_STOP_SHUTDOWN, false);
            continue;
        }
        /* A run waiting on its step or retry timer (what a restart of the simulator leaves):
         * its timer must not fire into freed memory, so it goes now. A run whose mutation is
         * still queued (refs > 0) is left to the writer's answer, as before. */
        if (r->lock_wait) {
            /* Its job's lock is abandoned: that answer never comes (ql_zk_job_unlock). */
            ql_sched_job_unlock(r);
            r->lock_wait = false;
            r->refs--;
        }
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
    ql_timer_t *timers[] = {&s->poll_timer,  &s->kick_timer, &s->flush_timer,   &s->finish_timer,
                            &s->grace_timer, &s->hold_timer, &s->takeover_timer};
    for (int i = 0; i < 7; i++) {
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
