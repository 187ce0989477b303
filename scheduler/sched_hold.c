/*
 * Step ends the store cannot take (a full map or disk): held in memory and written again.
 *
 * DESIGN.
 * - Without this, a step whose end failed to commit had its run dropped: the job stayed
 *   RUNNING in the store with no process until a restart's recovery ran the step again. Now a
 *   FINISHING run whose mutation (the step's end with the next step's start, or a retry's
 *   start) fails with a store error (ql_writer_store_error: QL_EMAPFULL, QL_EDISKFULL, ...)
 *   keeps its outcome, message and output, and joins the held list. A fencing refusal is never
 *   held: it means the lock is lost, and the new holder recovers the job.
 * - The hold timer (the scheduler's clock, so the virtual clock drives it in tests) submits
 *   every held run again, in the order they were held, after a backoff that doubles from
 *   HOLD_BACKOFF_MIN_MS to HOLD_BACKOFF_MAX_MS. Each is written with the time its step really
 *   ended (r->now is kept). A run whose job an action moved meanwhile finds the job no longer
 *   RUNNING and is dropped by its answer, as before.
 * - While runs are held or being written again, the fetcher picks nothing: a pick would only
 *   fail too, and one that got in before a held end would take the slot of a job whose end is
 *   not durable (the store would show more RUNNING jobs than the limits allow). Once the last
 *   of them is answered, it is kicked. Steps whose end did commit go on as usual.
 * - One WARN line when writes start failing (the error, and what the operator can do), one
 *   INFO line when a held write commits again: a run of failures is two lines, not one per
 *   retry.
 * - A stop submits the held runs at once; if they fail again while stopping they are dropped
 *   (logged), and the next start's recovery puts their jobs back to READY.
 */
#include "sched_int.h"

#include <stdio.h>

#define HOLD_BACKOFF_MIN_MS 100
#define HOLD_BACKOFF_MAX_MS 5000

/* What the operator can do about code (one phrase, for the log). */
static const char *advice(int code) {
    switch (code) {
    case QL_EMAPFULL:
        return "raise qilin.storage.map-size (a restart applies it) or delete old jobs and "
               "segments";
    case QL_EDISKFULL:
        return "free space on the file system of the store";
    case QL_EMAPSIZE:
        return "give every server the same qilin.storage.map-size and restart this one";
    default:
        return "check the disk of the store and the memory of the server";
    }
}

static void hold_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_t *s = arg;
    int64_t next = s->hold_backoff_ms * 2;
    s->hold_backoff_ms = next > HOLD_BACKOFF_MAX_MS ? HOLD_BACKOFF_MAX_MS : next;
    ql_sched_release_held(s);
}

/* A write committed: ends a run of failures (logged once). */
static void writes_ok(ql_sched_t *s) {
    if (!s->writes_failing)
        return;
    s->writes_failing = false;
    s->hold_backoff_ms = HOLD_BACKOFF_MIN_MS;
    ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
           "store writes recovered: the held step ends are written failed_for_ms=%lld",
           (long long)(ql_clock_now_ms(s->opts.clock) - s->writes_failing_since));
}

bool ql_sched_hold_end(run_t *r, int status, const ql_err_t *err) {
    ql_sched_t *s = r->s;
    if (r->held_retry) {
        r->held_retry = false;
        /* The last answer of a hold (whatever it says) lets the fetcher go on. */
        if (--s->n_held_retries == 0 && !s->held)
            ql_sched_kick(s);
    }
    if (status == 0) {
        writes_ok(s);
        return false;
    }
    if (status == QL_EFENCED || !ql_writer_store_error(status) || s->stopping || !r->end_fn)
        return false;
    if (!s->writes_failing) {
        s->writes_failing = true;
        s->writes_failing_since = ql_clock_now_ms(s->opts.clock);
        s->hold_backoff_ms = HOLD_BACKOFF_MIN_MS;
        ql_log(s->opts.log, QL_LOG_WARN, "scheduler",
               "store writes failing: step ends are kept in memory and written again until they "
               "commit; no job starts meanwhile error=%s reason=\"%s\" action=\"%s\"",
               ql_error_code(status), err && err->msg[0] ? err->msg : ql_strerror(status),
               advice(status));
    }
    r->held_next = NULL;
    if (!s->held)
        s->held_tail = &s->held;
    *s->held_tail = r;
    s->held_tail = &r->held_next;
    if (!s->hold_timer.armed)
        ql_timer_start(&s->hold_timer, s->hold_backoff_ms, hold_timer_cb, s);
    return true;
}

bool ql_sched_holding(const ql_sched_t *s) {
    return s->held != NULL || s->n_held_retries > 0;
}

void ql_sched_release_held(ql_sched_t *s) {
    run_t *list = s->held;
    s->held = NULL;
    s->held_tail = &s->held;
    ql_timer_stop(&s->hold_timer);
    /* In order: the writer applies what is queued first first. A run that fails again is held
     * anew, behind those failing with it, so the order is kept. */
    for (run_t *r = list, *next; r; r = next) {
        next = r->held_next;
        r->held_next = NULL;
        r->held_retry = true;
        s->n_held_retries++;
        r->refs++;
        int rc = ql_sched_submit(s, r->end_fn, r, r->end_done);
        if (rc) {
            ql_err_t e = {0};
            ql_err_set(&e, rc, "cannot queue the change: %s", ql_strerror(rc));
            r->end_done(r, rc, &e); /* takes the reference back, and drops the run */
        }
    }
}
