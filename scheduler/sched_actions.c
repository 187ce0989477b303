/*
 * What changes a job from outside its run: local actions (pause, discard, ...), jobs another
 * process moved (seen by watching the running jobs in the store), and recovery at start. Split
 * from sched.c, whose opening comment has the design; the state they share is in sched_int.h.
 */
#include "base/ql_buf.h"
#include "config/ql_config.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (r->shell.proc) {
        ql_shell_stop(&r->shell, reason, false);
        return; /* the process's end drops the run */
    }
    if (r->phase == RUN_STEP || r->phase == RUN_WAITING) {
        if (r->timer_init)
            ql_timer_stop(&r->timer);
        /* ql_sched_run_drop may free r at once (a virtual clock closes its timer synchronously). */
        ql_sched_t *s = r->s;
        ql_sched_run_drop(r);
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
 * reports is dropped (a cancelled run writes nothing, and ql_sched_finish_fn refuses a job that is
 * not RUNNING). Runs with a local action in flight are skipped: that action's answer stops them.
 * On PostgreSQL the store also tells the master at once which job another server changed
 * (ql_store_changes_drain): ql_sched_notice runs the same look-up for that job alone.
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

/* The look-up for every watched run, or for the run of job `only` (when not NULL). */
static void watch_runs(ql_sched_t *s, const ql_id_t *only) {
    size_t n = 0;
    for (run_t *r = s->runs; r; r = r->next)
        n += watched(r) && (!only || ql_id_eq(&r->job, only));
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
        if (!watched(r) || (only && !ql_id_eq(&r->job, only)) || action_pending(s, &r->job))
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
        ql_sched_log_job(
            s, QL_LOG_INFO, r,
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

void ql_sched_watch_runs(ql_sched_t *s) {
    watch_runs(s, NULL); /* may free s */
}

void ql_sched_notice(ql_sched_t *s, const ql_id_t *job) {
    /* The kick first: the look-up may end a stop in progress and free s. A kick while the
     * scheduler stops or is not fetching does nothing. */
    ql_sched_kick(s);
    watch_runs(s, job); /* may free s */
}

/* ---- recovery ---- */

/*
 * What a crashed server's tries left behind is killed inside the recovery transaction, before
 * its commit puts the steps back to READY: until that commit no interrupted step can run again,
 * and a crash before it leaves them RUNNING with their markers for the next start to sweep
 * (ql_proc.h, Markers). A recovery that cannot prove them gone fails, and with it the holding
 * (the node tries again later): a step running beside its own next try is the worse outcome.
 *
 * A try another server ran, or this one before the machine rebooted, is not this host's to kill
 * (ql_step_host.h): it is left to its own host, logged, and its step goes back to READY all the
 * same, keeping its marker and group for that host (a commit forgets a marker only once its
 * processes are gone). The job of a RUNNING step another server ran is held for the takeover
 * grace after the commit (sched_grace.c).
 */
typedef struct {
    ql_id_t job;
    uint32_t seq;
    char server[QL_STEP_SERVER_ID_MAX + 1];
} foreign_t;

typedef struct {
    ql_sched_t *s;
    uint64_t n;
    ql_proc_tokens_t *tokens;
    char boot_id[QL_PROC_BOOT_ID_LEN + 1];
    unsigned groups, groups_left, left_elsewhere;
    foreign_t *foreign; /* RUNNING steps another server ran, for the grace */
    size_t n_foreign, cap_foreign;
    int rc;       /* the first error collecting markers */
    int group_rc; /* UV_EBUSY: a killed group still ran after opts.proc_drain_ms */
    int group_pgid;
} recover_t;

/* A try of another host: logged and, when it was running, noted for the grace. Returns true: the
 * step keeps its marker and group (see above). */
static bool leave_to_its_host(recover_t *r, const ql_step_t *st, ql_step_place_t place) {
    char sid[QL_ID_STR_LEN + 8];
    ql_step_id_format(&st->job, st->seq, sid);
    r->left_elsewhere++;
    ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
           "left the processes of an interrupted step alone step=%s server=%s pgid=%d "
           "reason=\"%s\"",
           sid, st->server_id, st->pgid, ql_step_place_name(place));
    if (place != QL_STEP_PLACE_ELSEWHERE || st->state != QL_RUNNING)
        return true;
    int rc = QL_ARRAY_RESERVE(r->foreign, r->cap_foreign, r->n_foreign + 1, 8);
    if (rc) {
        if (!r->rc)
            r->rc = rc;
        return true;
    }
    foreign_t *f = &r->foreign[r->n_foreign++];
    f->job = st->job;
    f->seq = st->seq;
    snprintf(f->server, sizeof f->server, "%s", st->server_id);
    return true;
}

static bool recover_step(const ql_step_t *st, void *arg) {
    recover_t *r = arg;
    char sid[QL_ID_STR_LEN + 8];
    ql_step_host_t self = r->s->self;
    self.boot_id = r->boot_id;
    ql_step_place_t place = ql_step_place(st, &self);
    if (place != QL_STEP_PLACE_HERE)
        return leave_to_its_host(r, st, place);
    if (st->token[0]) {
        int rc = ql_proc_tokens_add(r->tokens, st->token);
        if (rc && !r->rc)
            r->rc = rc;
    }
    if (st->pgid <= 0)
        return false;
    ql_proc_ident_t id = {.pgid = st->pgid, .start = st->pg_start};
    memcpy(id.boot_id, st->boot_id, sizeof id.boot_id);
    ql_proc_group_fate_t fate;
    int rc = ql_proc_kill_group_checked(&id, r->boot_id, r->s->opts.proc_drain_ms, &fate);
    ql_step_id_format(&st->job, st->seq, sid);
    if (rc && fate == QL_PROC_GROUP_KILLED) {
        if (!r->group_rc) {
            r->group_rc = rc;
            r->group_pgid = st->pgid;
        }
        return false;
    }
    if (rc == 0 && fate == QL_PROC_GROUP_KILLED) {
        r->groups++;
        ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
               "killed the process group of an interrupted step step=%s pgid=%d", sid, st->pgid);
        return false;
    }
    r->groups_left++;
    /* A group whose leader died with the server is the usual case, counted in the summary; a
     * number that now names someone else is worth a line. */
    if (rc || fate != QL_PROC_GROUP_LEADER_GONE)
        ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
               "left the recorded process group of an interrupted step alone step=%s pgid=%d "
               "reason=\"%s\"",
               sid, st->pgid, rc ? ql_strerror(rc) : ql_proc_group_fate_name(fate));
    return false;
}

/* A recovery's mutation may run again (see ql_writer.h): it starts from nothing. */
static int recover_begin(recover_t *r, ql_err_t *err) {
    r->n = 0;
    r->groups = r->groups_left = r->left_elsewhere = 0;
    r->n_foreign = 0;
    r->rc = r->group_rc = r->group_pgid = 0;
    ql_proc_tokens_free(r->tokens);
    r->tokens = NULL;
    int rc = ql_proc_tokens_new(&r->tokens);
    if (rc)
        return ql_err_set(err, rc, "out of memory");
    if ((rc = ql_proc_boot_id(r->boot_id)))
        return ql_err_set(err, rc, "cannot read the boot id: %s", ql_strerror(rc));
    return 0;
}

static int recover_sweep(recover_t *r, ql_err_t *err);

static int recover_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    recover_t *r = arg;
    int rc = ql_sched_check_fence(txn, r->s, err);
    if (rc || (rc = recover_begin(r, err)))
        return rc;
    rc = ql_jobs_recover(txn, ql_clock_now_ms(r->s->opts.clock), recover_step, r, &r->n, err);
    if (rc)
        return rc;
    return recover_sweep(r, err);
}

/* Kills what the collected markers still name, before the commit (see above). */
static int recover_sweep(recover_t *r, ql_err_t *err) {
    int rc;
    if (r->rc)
        return ql_err_set(err, r->rc, "cannot collect the markers of interrupted steps: %s",
                          ql_strerror(r->rc));
    if (r->group_rc)
        return ql_err_set(err, r->group_rc,
                          "cannot make sure the killed process group %d of an interrupted step "
                          "is gone: %s",
                          r->group_pgid, ql_strerror(r->group_rc));
    if (!ql_proc_tokens_count(r->tokens)) {
        if (r->groups_left || r->left_elsewhere)
            ql_log(r->s->opts.log, QL_LOG_INFO, "scheduler",
                   "interrupted steps: groups_killed=%u groups_left=%u left_to_their_host=%u",
                   r->groups, r->groups_left, r->left_elsewhere);
        return 0;
    }
    ql_proc_sweep_t sw;
    rc = ql_proc_kill_tokens(r->tokens, r->s->opts.proc_drain_ms, &sw);
    if (rc)
        return ql_err_set(err, rc,
                          "cannot make sure the processes of %zu interrupted steps are gone: %s",
                          ql_proc_tokens_count(r->tokens), ql_strerror(rc));
    ql_log(r->s->opts.log, sw.lingered ? QL_LOG_WARN : QL_LOG_INFO, "scheduler",
           "swept the processes of interrupted steps steps=%zu killed=%u scans=%u examined=%u "
           "unreadable=%u exiting=%u lingered=%u groups_killed=%u groups_left=%u "
           "left_to_their_host=%u",
           ql_proc_tokens_count(r->tokens), sw.killed, sw.scans, sw.examined, sw.unreadable,
           sw.exiting, sw.lingered, r->groups, r->groups_left, r->left_elsewhere);
    return 0;
}

/* After the commit: the jobs whose step another server was running wait the grace. */
static void hold_foreign(ql_sched_t *s, const recover_t *r) {
    int64_t grace = s->opts.takeover_grace_ms, now = ql_clock_now_ms(s->opts.clock);
    for (size_t i = 0; i < r->n_foreign; i++) {
        const foreign_t *f = &r->foreign[i];
        if (grace > 0) {
            ql_sched_grace_hold(s, &f->job, f->seq, f->server, now + grace);
            continue;
        }
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&f->job, id);
        ql_log(s->opts.log, QL_LOG_WARN, "scheduler",
               "job not held: its step was running on another server step=%02u job=%s server=%s "
               "reason=\"qilin.cluster.takeover-grace-ms is 0\"",
               f->seq, id, f->server);
    }
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
        hold_foreign(s, &r);
        if (recovered)
            *recovered = r.n;
    }
    free(r.foreign);
    return rc;
}

/* ---- takeover of one job (scheduler 2) ---- */

/*
 * A job whose lock vanished while the store has it RUNNING or PENDING: its server died or lost
 * its session. The server that won the job's lock (r->fence, its token) claims the token and
 * puts the job back to READY in one transaction, as recovery does for every job at start: the
 * tries of this host are killed first, another server's are left to it and its job waits the
 * takeover grace. The run then ends keeping the lock, so that this server's fetcher picks the
 * job (no other server can: the lock is held) once the grace is over.
 */
typedef struct {
    recover_t rec;
    run_t *r;
    bool recovered;
} takeover_t;

static int takeover_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    takeover_t *t = arg;
    run_t *r = t->r;
    t->recovered = false;
    ql_job_t job;
    int rc = ql_job_get(txn, &r->job, 0, &job);
    if (rc)
        return rc == QL_ENOTFOUND ? 0 : rc;
    ql_state_t state = job.state;
    ql_job_free(&job);
    if (state != QL_RUNNING && state != QL_PENDING)
        return 0; /* moved on meanwhile (an action, or its server ended it before it died) */
    if ((rc = ql_job_claim(txn, &r->job, r->fence, err)) || (rc = recover_begin(&t->rec, err)))
        return rc;
    rc = ql_job_recover_one(txn, &r->job, r->now, recover_step, &t->rec, &t->recovered, err);
    return rc ? rc : recover_sweep(&t->rec, err);
}

static void takeover_done(void *arg, int status, const ql_err_t *err) {
    takeover_t *t = arg;
    run_t *r = t->r;
    ql_sched_t *s = r->s;
    r->refs--;
    if (status == QL_EFENCED) {
        /* The job's token is larger than a lock made now: it cannot come from this ensemble
         * (ZooKeeper was reset). The lock is kept, so that no server retries it in a loop. */
        ql_sched_log_job(s, QL_LOG_ERROR, r,
                         "job not taken over fence=%llu reason=\"%s\"; its lock is kept so that "
                         "no server retries it (see qilin cluster reset-coordination)",
                         (unsigned long long)r->fence, err->msg);
        r->keep_lock = !s->stopping;
    } else if (status) {
        ql_sched_log_job(s, QL_LOG_ERROR, r, "job not taken over fence=%llu reason=\"%s\"",
                         (unsigned long long)r->fence, err->msg);
    } else if (t->recovered) {
        ql_sched_log_job(s, QL_LOG_INFO, r,
                         "job RUNNING -> READY fence=%llu reason=\"its lock vanished: taken "
                         "over by this server\"",
                         (unsigned long long)r->fence);
        hold_foreign(s, &t->rec);
        r->keep_lock = !s->stopping; /* this server's fetcher picks it, under this lock */
    }
    ql_proc_tokens_free(t->rec.tokens);
    free(t->rec.foreign);
    free(t);
    ql_sched_run_drop(r);
    ql_sched_kick(s);
}

void ql_sched_takeover_submit(run_t *r) {
    takeover_t *t = calloc(1, sizeof *t);
    r->now = ql_clock_now_ms(r->s->opts.clock);
    r->refs++;
    if (t) {
        t->rec.s = r->s;
        t->r = r;
    }
    if (!t || ql_sched_submit(r->s, takeover_fn, t, takeover_done)) {
        r->refs--;
        free(t);
        ql_sched_run_drop(r);
    }
}
