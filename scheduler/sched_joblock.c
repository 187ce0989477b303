/*
 * Scheduler 2's per-job locks (docs/zookeeper.md, Scheduler 2): every job server runs a
 * scheduler, and a job is run only by the server holding its ZooKeeper lock, lock/<job_id>
 * (ql_zk_jobs, ql_zk.h). Split from sched_pick.c; the design of the scheduler is in ql_sched.h
 * and sched.c, the state they share in sched_int.h.
 *
 * - The pick. The fetcher plans as always (its room is this server's
 *   kylin.job.max-concurrent-jobs), leaving out jobs assigned to other servers; each planned
 *   run asks for its job's lock first, and only its answer submits the pick, which claims the
 *   lock's token for the job (ql_job_claim) in the same transaction that makes it RUNNING. A
 *   lock another server holds drops the run: that server picked the job.
 * - The token. A run under its job's lock carries that lock's token (r->fence, r->job_locked):
 *   every later change of the run checks it against the job's record in its own transaction
 *   (ql_job_fence_check), so a server whose lock was taken over can change nothing of the job.
 * - The release. The lock is kept across steps and released when the run is dropped: its job
 *   has left RUNNING (final, ERROR, PAUSED, DISCARDED, or back to READY at a shutdown), or was
 *   lost. A takeover keeps it (keep_lock): its job waits READY for this server's fetcher; if an
 *   action moves the job on before that (PAUSE, DISCARD), the poll releases the kept lock
 *   (ql_sched_watch_kept), so that the job is not tied to this server once RESUMEd.
 * - The takeover. A vanished lock (its holder's session ended) of a job the store has RUNNING
 *   or PENDING is asked for by every server it is assigned to; the one that gets it claims the
 *   token and puts the job back to READY (ql_sched_takeover_submit); the others hear that the
 *   node exists and are done.
 */
#include "base/ql_buf.h"
#include "sched_int.h"
#include "scheduler/ql_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ASSIGNED_KEY "kylin.cube.schedule.assigned-servers"

/* Whether item (len bytes) is one of the comma list names. */
static bool names_have(const char *names, const char *item, size_t len) {
    for (const char *p = names; *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && strncasecmp(p, item, len) == 0)
            return true;
        p += n;
        p += *p == ',';
    }
    return false;
}

/* Whether list (as stored: "a,b", or a YAML flow list "[a, b]") is empty or names this
 * server. */
static bool list_names_me(const char *list, const char *names) {
    static const char seps[] = ", []\"'\t";
    bool empty = true;
    for (const char *p = list; *p;) {
        p += strspn(p, seps);
        size_t n = strcspn(p, seps);
        if (!n)
            break;
        empty = false;
        if (names_have(names, p, n))
            return true;
        p += n;
    }
    return empty;
}

bool ql_sched_assigned_here(const ql_sched_t *s, ql_txn_t *txn, const ql_job_t *job,
                            const ql_project_t *proj) {
    const char *v = NULL;
    ql_model_t m;
    bool have_model = !ql_id_is_zero(&job->model) && ql_model_get(txn, &job->model, 0, &m) == 0;
    if (have_model)
        v = ql_strmap_get(&m.config, ASSIGNED_KEY);
    if (!v && proj)
        v = ql_strmap_get(&proj->config, ASSIGNED_KEY);
    if (!v)
        v = s->opts.assigned_default;
    bool here = list_names_me(v, s->opts.assigned_names);
    if (have_model)
        ql_model_free(&m);
    return here;
}

static void submit_pick(run_t *r) {
    ql_sched_t *s = r->s;
    r->now = ql_clock_now_ms(s->opts.clock);
    r->refs++;
    if (ql_sched_submit(s, ql_sched_pick_fn, r, ql_sched_pick_done)) {
        r->refs--;
        ql_sched_run_drop(r);
    }
}

static void lock_done(void *arg, int status, uint64_t token) {
    run_t *r = arg;
    ql_sched_t *s = r->s;
    r->refs--;
    r->lock_wait = false;
    if (status == 0) {
        r->job_locked = true;
        r->fence = token;
    } else if (status != QL_ELOCKED) {
        ql_sched_log_job(s, QL_LOG_WARN, r, "job lock not taken reason=\"%s\"",
                         ql_strerror(status));
    }
    if (status || r->cancelled || s->stopping) {
        ql_sched_run_drop(r); /* releases a lock just taken: nothing was claimed */
        return;
    }
    if (r->takeover)
        ql_sched_takeover_submit(r);
    else
        submit_pick(r);
}

void ql_sched_lock_and_pick(run_t *r) {
    ql_sched_t *s = r->s;
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&r->job, id);
    uint64_t token;
    if (ql_zk_job_held(s->opts.job_locks, id, &token)) {
        /* Kept by a takeover (or a pick whose run is still being dropped). */
        r->job_locked = true;
        r->fence = token;
        if (r->takeover)
            ql_sched_takeover_submit(r);
        else
            submit_pick(r);
        return;
    }
    r->refs++;
    r->lock_wait = true;
    int rc = ql_zk_job_lock(s->opts.job_locks, id, lock_done, r);
    if (rc) {
        r->refs--;
        r->lock_wait = false;
        if (rc != QL_EEXIST && rc != QL_EZOOKEEPER)
            ql_sched_log_job(s, QL_LOG_WARN, r, "job lock not asked for reason=\"%s\"",
                             ql_strerror(rc));
        ql_sched_run_drop(r);
    }
}

bool ql_sched_locked_elsewhere(const ql_sched_t *s, const ql_id_t *job) {
    if (!s->opts.job_locks)
        return false;
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(job, id);
    uint64_t token;
    return ql_zk_job_listed(s->opts.job_locks, id) &&
           !ql_zk_job_held(s->opts.job_locks, id, &token);
}

void ql_sched_job_unlock(run_t *r) {
    ql_sched_t *s = r->s;
    if (s->opts.job_locks && r->keep_lock &&
        !QL_ARRAY_RESERVE(s->kept, s->cap_kept, s->n_kept + 1, 8))
        s->kept[s->n_kept++] = r->job; /* without memory: kept until the server stops */
    if (!s->opts.job_locks || r->keep_lock || (!r->job_locked && !r->lock_wait))
        return;
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&r->job, id);
    ql_zk_job_unlock(s->opts.job_locks, id);
    r->job_locked = false;
}

/* Whether a kept lock of job id is still wanted: true to keep watching it. */
static bool kept_wanted(ql_sched_t *s, ql_txn_t *txn, const ql_id_t *id) {
    char idstr[QL_ID_STR_LEN + 1];
    ql_id_format(id, idstr);
    if (ql_sched_find_run(s, id) || !ql_zk_job_held(s->opts.job_locks, idstr, NULL))
        return false; /* a run owns it again, or it is gone: nothing to watch */
    ql_job_t job;
    int rc = ql_job_get(txn, id, 0, &job);
    if (rc && rc != QL_ENOTFOUND)
        return true; /* unknown: asked again at the next poll */
    ql_state_t state = rc ? QL_DISCARDED : job.state;
    if (!rc)
        ql_job_free(&job);
    if (state == QL_READY || state == QL_RUNNING || state == QL_PENDING)
        return true;
    ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
           "job lock released job=%s state=%s reason=\"the job taken over here moved on before "
           "it was picked\"",
           idstr, rc ? "deleted" : ql_state_name(state));
    ql_zk_job_unlock(s->opts.job_locks, idstr);
    return false;
}

void ql_sched_watch_kept(ql_sched_t *s) {
    if (!s->n_kept || !s->opts.job_locks)
        return;
    ql_txn_t *txn;
    if (ql_txn_begin(s->opts.store, false, &txn))
        return;
    size_t keep = 0;
    for (size_t i = 0; i < s->n_kept; i++)
        if (kept_wanted(s, txn, &s->kept[i]))
            s->kept[keep++] = s->kept[i];
    s->n_kept = keep;
    ql_txn_abort(txn);
}

/* The takeover of job id, when nothing here runs it, the store has it RUNNING or PENDING and it
 * is assigned to this server. */
static void take_over(ql_sched_t *s, const ql_id_t *id) {
    if (s->stopping || ql_sched_find_run(s, id))
        return;
    ql_txn_t *txn;
    if (ql_txn_begin(s->opts.store, false, &txn))
        return;
    ql_job_t job;
    bool want = false;
    char project[QL_NAME_MAX + 1] = "";
    if (ql_job_get(txn, id, 0, &job) == 0) {
        if (job.state == QL_RUNNING || job.state == QL_PENDING) {
            ql_project_t p;
            bool have_p = ql_project_get(txn, job.project, 0, &p) == 0;
            want = ql_sched_assigned_here(s, txn, &job, have_p ? &p : NULL);
            if (have_p)
                ql_project_free(&p);
        }
        snprintf(project, sizeof project, "%s", job.project);
        ql_job_free(&job);
    }
    ql_txn_abort(txn);
    if (!want)
        return;
    run_t *r = ql_sched_run_new(s, id, project);
    if (!r)
        return;
    r->phase = RUN_PICKING;
    r->takeover = true;
    ql_sched_lock_and_pick(r);
}

void ql_sched_lock_vanished(ql_sched_t *s, const char *job_id) {
    ql_id_t id;
    if (!s->opts.job_locks || ql_id_parse(job_id, &id) != 0)
        return;
    ql_sched_kick(s); /* a READY job the fetcher left to that lock's holder may be picked now */
    take_over(s, &id);
}

typedef struct {
    ql_id_t *ids;
    size_t n, cap;
    const ql_sched_t *s;
} orphans_t;

static int collect_orphan(const ql_job_t *j, void *arg) {
    orphans_t *o = arg;
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&j->id, id);
    if (ql_zk_job_listed(o->s->opts.job_locks, id))
        return 0;
    int rc = QL_ARRAY_RESERVE(o->ids, o->cap, o->n + 1, 16);
    if (!rc)
        o->ids[o->n++] = j->id;
    return rc;
}

void ql_sched_adopt_orphans(ql_sched_t *s) {
    if (!s->opts.job_locks)
        return;
    orphans_t o = {.s = s};
    ql_txn_t *txn;
    if (ql_txn_begin(s->opts.store, false, &txn))
        return;
    int rc = ql_job_foreach_state(txn, QL_RUNNING, collect_orphan, &o);
    if (!rc)
        rc = ql_job_foreach_state(txn, QL_PENDING, collect_orphan, &o);
    ql_txn_abort(txn);
    if (rc)
        ql_log(s->opts.log, QL_LOG_ERROR, "scheduler", "cannot list the jobs without a lock: %s",
               ql_strerror(rc));
    if (o.n)
        ql_log(s->opts.log, QL_LOG_INFO, "scheduler",
               "jobs RUNNING or PENDING without a lock count=%zu: taking them over where they "
               "are assigned here",
               o.n);
    for (size_t i = 0; i < o.n; i++)
        take_over(s, &o.ids[i]);
    free(o.ids);
}
