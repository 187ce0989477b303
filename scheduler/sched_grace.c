/*
 * The takeover grace (docs/step-processes.md, Several hosts). A master that recovers a job
 * whose RUNNING step another server ran cannot kill that try: it runs on another host, whose
 * server may be paused (SIGSTOP, a frozen VM) or cut off from the store rather than dead, with
 * the step still running. That server stops its steps once it notices it lost its lock, and
 * dies with them if it dies (PR_SET_PDEATHSIG); the new master gives it the time to do so, the
 * grace, before the step's next try may start: the job is held, in memory, until a time of the
 * scheduler's clock (virtual in tests, never a sleep), and the fetcher leaves it (the pick
 * policy's TAKEOVER_GRACE). A timer releases the holds as they end and wakes the fetcher.
 * Jobs whose step ran here are swept at recovery and need no grace. Split from sched.c, whose
 * opening comment has the design; the state they share is in sched_int.h.
 */
#include "base/ql_buf.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sched_grace {
    ql_id_t job;
    uint32_t seq;
    int64_t since, until; /* clock ms */
    char server[QL_STEP_SERVER_ID_MAX + 1];
};

static void takeover_timer_cb(ql_timer_t *t, void *arg);

/* Arms the timer for the earliest hold, or stops it when none is left. */
static void arm(ql_sched_t *s) {
    if (!s->n_grace) {
        ql_timer_stop(&s->takeover_timer);
        return;
    }
    int64_t first = s->grace[0].until;
    for (size_t i = 1; i < s->n_grace; i++)
        if (s->grace[i].until < first)
            first = s->grace[i].until;
    int64_t delay = first - ql_clock_now_ms(s->opts.clock);
    ql_timer_start(&s->takeover_timer, delay > 0 ? delay : 0, takeover_timer_cb, s);
}

static void takeover_timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_sched_t *s = arg;
    int64_t now = ql_clock_now_ms(s->opts.clock);
    size_t kept = 0;
    for (size_t i = 0; i < s->n_grace; i++) {
        struct sched_grace *g = &s->grace[i];
        if (g->until > now) {
            s->grace[kept++] = *g;
            continue;
        }
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&g->job, id);
        ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
               "takeover grace over: the job may start again job=%s step=%02u server=%s "
               "waited_ms=%lld",
               id, g->seq, g->server, (long long)(now - g->since));
    }
    bool released = kept < s->n_grace;
    s->n_grace = kept;
    arm(s);
    if (released)
        ql_sched_kick(s);
}

int ql_sched_grace_hold(ql_sched_t *s, const ql_id_t *job, uint32_t seq, const char *server,
                        int64_t until) {
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(job, id);
    int64_t now = ql_clock_now_ms(s->opts.clock);
    int rc = QL_ARRAY_RESERVE(s->grace, s->cap_grace, s->n_grace + 1, 8);
    if (rc) {
        ql_log(s->opts.log, QL_LOG_ERROR, "scheduler",
               "cannot hold a job for the takeover grace job=%s step=%02u server=%s: %s", id, seq,
               server, ql_strerror(rc));
        return rc;
    }
    struct sched_grace *g = &s->grace[s->n_grace++];
    *g = (struct sched_grace){.job = *job, .seq = seq, .since = now, .until = until};
    snprintf(g->server, sizeof g->server, "%s", server);
    ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
           "job held for the takeover grace job=%s step=%02u server=%s grace_ms=%lld "
           "reason=\"its step was running on another server, which may be paused or cut off "
           "with the step still running: it gets the time to stop it before the next try "
           "starts\"",
           id, seq, server, (long long)(until - now));
    arm(s);
    return 0;
}

bool ql_sched_grace_holds(const ql_sched_t *s, const ql_id_t *job) {
    if (!s->n_grace)
        return false;
    int64_t now = ql_clock_now_ms(s->opts.clock);
    for (size_t i = 0; i < s->n_grace; i++)
        if (s->grace[i].until > now && ql_id_eq(&s->grace[i].job, job))
            return true;
    return false;
}

void ql_sched_grace_clear(ql_sched_t *s) {
    free(s->grace);
    s->grace = NULL;
    s->n_grace = s->cap_grace = 0;
}
