/*
 * Running a step (a process, or a timer for built-ins and simulated steps) and recording its
 * end: the step's outcome with the next step's start, a retry's wait, the job's end. Split from
 * sched.c, whose opening comment has the design; the state they share is in sched_int.h.
 */
#include "base/ql_buf.h"
#include "config/ql_config.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- running a step ---- */

static void step_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_step_completed(arg);
}

static void complete_later(run_t *r, int64_t delay, ql_state_t outcome, const char *msg) {
    r->outcome = outcome;
    free(r->msg);
    r->msg = msg ? strdup(msg) : NULL;
    ql_sched_ensure_timer(r);
    ql_timer_start(&r->timer, delay < 0 ? 0 : delay, step_timer_cb, r);
}

/* The try of a shell step ended (sched_shell.h): its result becomes the run's. */
static void shell_done(ql_shell_try_t *t) {
    run_t *r = t->arg;
    r->refs--;
    r->outcome = t->outcome;
    free(r->msg);
    r->msg = t->msg;
    t->msg = NULL;
    free(r->output);
    r->output = t->output;
    r->output_len = t->output_len;
    t->output = NULL;
    t->output_len = 0;
    ql_sched_step_completed(r); /* drops the run when cancelled */
}

static void start_shell(run_t *r) {
    ql_shell_try_t *t = &r->shell;
    *t = (ql_shell_try_t){.env = &r->s->shell_env,
                          .job = &r->jobinfo,
                          .def = &r->def,
                          .seq = r->seq,
                          .attempt = r->attempt,
                          .token = r->token,
                          .fence = r->fence,
                          .job_locked = r->job_locked,
                          .done = shell_done,
                          .arg = r};
    r->refs++; /* released by shell_done, when the try has ended */
    ql_shell_spawn(t);
}

void ql_sched_start_step(run_t *r) {
    ql_sched_t *s = r->s;
    r->phase = RUN_STEP;
    ql_err_t err = {0};
    ql_stepdef_clear(&r->def);
    if (ql_stepdef_decode(r->def_bytes, r->def_len, &r->def, &err)) {
        complete_later(r, 0, QL_ERROR, err.msg[0] ? err.msg : "cannot decode the step definition");
        return;
    }
    char why[512];
    int skip = ql_shell_step_skipped(&s->shell_env, &r->jobinfo, &r->def, r->seq, why, sizeof why);
    if (skip < 0) {
        complete_later(r, 0, QL_ERROR, why);
        return;
    }
    if (skip) {
        ql_sched_log_job(s, QL_LOG_INFO, r, "step skipped step=%02u reason=\"%s\"", r->seq, why);
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
    /* On a virtual clock a step takes its simulated duration of virtual time and starts no
     * process (a process's time cannot be virtual); a shell step then succeeds. Whoever runs
     * templates with shell steps on one decides whether that makes sense (the simulator refuses
     * such files unless --allow-shell is given). */
    if (ql_clock_is_virtual(s->opts.clock)) {
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
        start_shell(r);
        return;
    }
}

/* ---- a step's end ---- */

int ql_sched_finish_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    int64_t now = r->now;
    ql_job_t job;
    ql_step_t st;
    /* Inputs first, outputs anew: this may be a second run (see end_seq). */
    r->seq = r->end_seq;
    r->attempt = r->end_attempt;
    r->result = RESULT_STALE;
    int rc = ql_sched_check_run_fence(txn, r, err);
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
    bool fence_changed = job.fence != r->fence;
    job.fence = r->fence;
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
    if ((rc = ql_sched_next_unfinished(txn, &job, r->seq + 1, &next, &warned, &nst)))
        goto out;
    if (next < job.n_steps) {
        r->result = RESULT_NEXT;
        rc = ql_sched_begin_step_rec(txn, r, &nst, now, err);
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
    int rc = ql_sched_check_run_fence(txn, r, err);
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
    rc = ql_sched_begin_step(txn, r, &job, r->seq, r->now, err);
    ql_job_free(&job);
    return rc;
}

static void step_written(void *arg, int status, const ql_err_t *err);

static void retry_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    run_t *r = arg;
    if (r->cancelled) {
        ql_sched_run_drop(r);
        return;
    }
    if (r->s->stopping) {
        ql_sched_park_run(r); /* no new try while the server stops */
        return;
    }
    r->phase = RUN_FINISHING;
    r->now = ql_clock_now_ms(r->s->opts.clock);
    r->end_seq = r->seq;
    r->end_attempt = r->attempt;
    r->end_fn = retry_fn;
    r->end_done = step_written;
    r->refs++;
    if (ql_sched_submit_run(r, retry_fn, step_written)) {
        r->refs--;
        ql_sched_run_drop(r);
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
    if (ql_sched_fenced_out(r, status, err)) {
        /* Not recorded: the lock's new holder recovered the job and runs this step again. */
        ql_sched_log_job(s, QL_LOG_WARN, r, "step end not recorded step=%02u reason=\"fenced\"",
                         r->seq);
        ql_sched_run_drop(r);
        return;
    }
    if (status) {
        ql_sched_log_job(s, QL_LOG_ERROR, r, "cannot record the step's end: %s", err->msg);
        ql_sched_run_drop(r);
        return;
    }
    switch (r->result) {
    case RESULT_NEXT:
        ql_sched_log_job(s, QL_LOG_DEBUG, r, "step started step=%02u attempt=%u", r->seq,
                         r->attempt);
        if (r->cancelled) {
            ql_sched_run_drop(r);
            return;
        }
        if (s->stopping) {
            ql_sched_park_run(r); /* the next step is RUNNING in the store but will not start */
            return;
        }
        ql_sched_start_step(r);
        return;
    case RESULT_RETRY:
        ql_sched_log_job(s, QL_LOG_WARN, r,
                         "step failed, retrying step=%02u attempt=%u wait_ms=%lld reason=\"%s\"",
                         r->seq, r->attempt, (long long)r->retry_wait, r->msg ? r->msg : "");
        if (s->stopping && !r->cancelled) {
            ql_sched_park_run(r); /* the retry comes after the restart, not during the shutdown */
            return;
        }
        r->phase = RUN_WAITING;
        ql_sched_ensure_timer(r);
        ql_timer_start(&r->timer, r->retry_wait, retry_timer_cb, r);
        return;
    case RESULT_FINISHED:
    case RESULT_FAILED:
        if (r->final_state == QL_ERROR)
            ql_sched_log_job(s, QL_LOG_WARN, r, "job RUNNING -> ERROR step=%02u reason=\"%s\"",
                             r->seq, r->msg ? r->msg : "");
        else
            ql_sched_log_job(s, QL_LOG_INFO, r, "job RUNNING -> SUCCEED");
        ql_sched_job_ended(r, r->final_state);
        ql_sched_run_drop(r);
        ql_sched_kick(s);
        return;
    default:
        ql_sched_run_drop(r);
        ql_sched_kick(s);
    }
}

/* Submits the queued step ends as one mutation, together with the picks that take the slots
 * of the jobs they end: those jobs' ends come first in the transaction, and the commit makes
 * both durable at once, so the store never holds more RUNNING jobs than the limit allows and a
 * slot costs one commit per job, not two. */
void ql_sched_flush_finishing(ql_sched_t *s) {
    size_t n = s->n_finishing, m = 0;
    bool ending = false;
    s->n_finishing = 0;
    if (!n)
        return;
    batch_ent_t *ents = malloc((n + (size_t)s->opts.max_concurrent_jobs) * sizeof *ents);
    if (!ents) {
        for (size_t i = 0; i < n; i++) {
            s->finishing[i]->refs--;
            ql_sched_run_drop(s->finishing[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        ents[m++] = (batch_ent_t){s->finishing[i], ql_sched_finish_fn, step_written};
        ending |= s->finishing[i]->ending;
    }
    if (ending)
        ql_sched_fetch_into(s, ents, &m);
    ql_sched_submit_or_drop(s, ents, m);
    free(ents);
}

static void finish_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_flush_finishing(arg);
}

/* Whether the step that just ended (r->outcome) ends the job: it was the last one, or it failed
 * with no retry left. Exact (ql_sched_finish_fn decides the same way), except for a later step a
 * template skipped, which errs on the safe side (the run keeps its slot until its end is written).
 */
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
        ql_sched_run_drop(r);
        ql_sched_kick(s);
        return;
    }
    if (r->stop_first) {
        /* A shutdown stopped the step (ql_sched_interrupt_run): its processes are gone, put it
         * back. */
        r->stop_first = false;
        if (r->shell.swept_rc == 0) {
            ql_sched_interrupt_run(r);
            return;
        }
        ql_sched_log_job(
            s, QL_LOG_ERROR, r,
            "job left RUNNING step=%02u reason=\"the stopped step's processes may still run "
            "(%s): the next start's recovery sweeps them\"",
            r->seq, ql_strerror(r->shell.swept_rc));
        r->cancelled = true;
        ql_sched_run_drop(r);
        return;
    }
    r->phase = RUN_FINISHING;
    r->now = ql_clock_now_ms(s->opts.clock);
    r->end_seq = r->seq;
    r->end_attempt = r->attempt;
    r->end_fn = ql_sched_finish_fn;
    r->end_done = step_written;
    r->refs++;
    /* Steps that end in the same loop turn (built-in steps started by one pick batch, processes
     * reaped together) are written together: queued here, submitted by a zero-delay timer,
     * which runs after the callbacks already due (see ql_sched_submit_batch for why). */
    if (QL_ARRAY_RESERVE(s->finishing, s->cap_finishing, s->n_finishing + 1, 64)) {
        if (ql_sched_submit_run(r, ql_sched_finish_fn, step_written)) {
            r->refs--;
            ql_sched_run_drop(r);
        }
        return;
    }
    s->finishing[s->n_finishing++] = r;
    if (!s->finish_timer.armed)
        ql_timer_start(&s->finish_timer, 0, finish_timer_cb, s);
    /* Its slot is taken by the picks ql_sched_flush_finishing adds to this job's end. */
    if (!r->ending && ends_job(r)) {
        r->ending = true;
        s->n_ending++;
    }
}
