/* The job and step state machines as tables, the actions, and the writes that move jobs. */
#include "base/ql_buf.h"
#include "engine/ql_jobs.h"

#include <stdlib.h>
#include <string.h>

#define BIT(s) (1u << (s))

/* Legal job transitions, docs/design/jobs.md: row = from, bits = to. */
static const uint32_t job_next[QL_JOB_STATE_COUNT] = {
    [QL_READY] = BIT(QL_PENDING) | BIT(QL_PAUSED) | BIT(QL_DISCARDED) | BIT(QL_SUICIDAL),
    [QL_PENDING] = BIT(QL_READY) | BIT(QL_RUNNING) | BIT(QL_ERROR) | BIT(QL_PAUSED) |
                   BIT(QL_DISCARDED) | BIT(QL_SUICIDAL),
    [QL_RUNNING] = BIT(QL_READY) | BIT(QL_SUCCEED) | BIT(QL_ERROR) | BIT(QL_PAUSED) |
                   BIT(QL_DISCARDED) | BIT(QL_SUICIDAL),
    [QL_PAUSED] = BIT(QL_READY) | BIT(QL_DISCARDED) | BIT(QL_SUICIDAL),
    [QL_ERROR] = BIT(QL_READY) | BIT(QL_DISCARDED) | BIT(QL_SUICIDAL),
    [QL_SUCCEED] = BIT(QL_READY), /* rollback, internal only */
    [QL_DISCARDED] = 0,
    [QL_SUICIDAL] = 0,
};

/* Step transitions: READY -> RUNNING -> SUCCEED/WARNING/ERROR; RUNNING -> READY (pause,
 * restart, crash); READY -> SKIP, and RUNNING -> SKIP (the job table's "steps also SKIP,
 * WARNING"); non-final -> DISCARDED; ERROR -> READY (resume); any -> READY on RESTART of the job
 * (which reruns completed steps). */
static const uint32_t step_next[QL_STATE_COUNT] = {
    [QL_READY] = BIT(QL_RUNNING) | BIT(QL_SKIP) | BIT(QL_DISCARDED),
    [QL_PENDING] = BIT(QL_READY) | BIT(QL_RUNNING) | BIT(QL_DISCARDED),
    [QL_RUNNING] = BIT(QL_SUCCEED) | BIT(QL_WARNING) | BIT(QL_ERROR) | BIT(QL_READY) |
                   BIT(QL_SKIP) | BIT(QL_DISCARDED),
    [QL_ERROR] = BIT(QL_READY) | BIT(QL_DISCARDED),
    [QL_PAUSED] = BIT(QL_READY) | BIT(QL_DISCARDED),
    [QL_SUCCEED] = BIT(QL_READY),
    [QL_WARNING] = BIT(QL_READY),
    [QL_SKIP] = BIT(QL_READY),
    [QL_DISCARDED] = 0,
    [QL_SUICIDAL] = 0,
};

bool ql_job_transition_legal(ql_state_t from, ql_state_t to) {
    if ((unsigned)from >= QL_JOB_STATE_COUNT || (unsigned)to >= QL_JOB_STATE_COUNT)
        return false;
    return job_next[from] & BIT(to);
}

bool ql_step_transition_legal(ql_state_t from, ql_state_t to) {
    if ((unsigned)from >= QL_STATE_COUNT || (unsigned)to >= QL_STATE_COUNT)
        return false;
    return step_next[from] & BIT(to);
}

const char *ql_job_display_status(ql_state_t s) {
    switch (s) {
    case QL_READY:
    case QL_PENDING:
        return "PENDING";
    case QL_RUNNING:
        return "RUNNING";
    case QL_ERROR:
        return "ERROR";
    case QL_SUCCEED:
        return "FINISHED";
    case QL_PAUSED:
        return "STOPPED";
    case QL_DISCARDED:
    case QL_SUICIDAL:
        return "DISCARDED";
    default:
        return "UNKNOWN";
    }
}

uint32_t ql_job_display_mask(const char *d) {
    static const struct {
        const char *name;
        uint32_t mask;
    } map[] = {
        {"PENDING", BIT(QL_READY) | BIT(QL_PENDING)},
        {"RUNNING", BIT(QL_RUNNING)},
        {"ERROR", BIT(QL_ERROR)},
        {"FINISHED", BIT(QL_SUCCEED)},
        {"STOPPED", BIT(QL_PAUSED)},
        {"DISCARDED", BIT(QL_DISCARDED) | BIT(QL_SUICIDAL)},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(d, map[i].name) == 0)
            return map[i].mask;
    return 0;
}

static const char *const action_names[] = {"PAUSE", "RESUME", "RESTART", "DISCARD"};

const char *ql_action_name(ql_action_t a) {
    return (unsigned)a < 4 ? action_names[a] : "UNKNOWN";
}

int ql_action_parse(const char *name, ql_action_t *out) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, action_names[i]) == 0) {
            *out = (ql_action_t)i;
            return 0;
        }
    return QL_EINVAL;
}

/* The actions table by display status (docs/design/jobs.md, Actions). */
bool ql_action_allowed(ql_action_t a, ql_state_t s) {
    const char *d = ql_job_display_status(s);
    switch (a) {
    case QL_ACTION_PAUSE:
        return !strcmp(d, "PENDING") || !strcmp(d, "RUNNING");
    case QL_ACTION_RESUME:
        return !strcmp(d, "ERROR") || !strcmp(d, "STOPPED");
    case QL_ACTION_RESTART:
        return !strcmp(d, "RUNNING") || !strcmp(d, "ERROR") || !strcmp(d, "STOPPED");
    case QL_ACTION_DISCARD:
        return !strcmp(d, "PENDING") || !strcmp(d, "RUNNING") || !strcmp(d, "ERROR") ||
               !strcmp(d, "STOPPED");
    }
    return false;
}

int ql_job_set_state(ql_txn_t *txn, ql_job_t *job, ql_state_t to, bool warned, int64_t now,
                     ql_err_t *err) {
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&job->id, id);
    if (!ql_job_transition_legal(job->state, to))
        return ql_err_set(err, QL_ETRANSITION, "job %s: illegal transition from %s to %s", id,
                          ql_state_name(job->state), ql_state_name(to));
    int rc = 0;
    if (ql_state_is_final(to) && (rc = ql_meta_apply_job_outcome(txn, job, to, warned, now)))
        return ql_err_set(err, rc, "job %s: cannot update its segments: %s", id, ql_strerror(rc));
    if (to == QL_RUNNING && !job->start_time)
        job->start_time = now;
    if (ql_state_is_final(to) || to == QL_ERROR)
        job->end_time = now;
    if (to == QL_READY)
        job->end_time = 0;
    job->state = to;
    job->modify_time = now;
    if ((rc = ql_job_put(txn, job)))
        return ql_err_set(err, rc, "job %s: cannot store it: %s", id, ql_strerror(rc));
    return 0;
}

/* A try that is over has no processes to find: its group and marker go with it. */
static void step_forget_processes(ql_step_t *step) {
    step->pgid = 0;
    step->pg_start = 0;
    step->token[0] = '\0';
    step->boot_id[0] = '\0';
}

/* keep_procs: the transition is an action's, committed before the step's processes are stopped
 * (the answer comes after the commit, the stop after the answer). The try's marker and group
 * stay on the step, so that a server that dies before the stop leaves them where the step's
 * next try finds them: it sweeps a marker it finds before it commits its own (ql_jobs.h). */
static int step_set_state(ql_txn_t *txn, ql_step_t *step, ql_state_t to, int64_t now,
                          bool keep_procs, ql_err_t *err) {
    char id[QL_ID_STR_LEN + 8];
    ql_step_id_format(&step->job, step->seq, id);
    if (!ql_step_transition_legal(step->state, to))
        return ql_err_set(err, QL_ETRANSITION, "step %s: illegal transition from %s to %s", id,
                          ql_state_name(step->state), ql_state_name(to));
    if (to == QL_RUNNING) {
        step->start_time = now;
        step->end_time = 0;
    } else if (to == QL_READY) {
        if (!keep_procs)
            step_forget_processes(step);
        if (step->state != QL_ERROR && step->state != QL_RUNNING) {
            step->start_time = 0;
            step->end_time = 0;
        }
    } else {
        step->end_time = now;
        if (!keep_procs)
            step_forget_processes(step);
    }
    step->state = to;
    int rc = ql_step_put(txn, step);
    return rc ? ql_err_set(err, rc, "step %s: cannot store it: %s", id, ql_strerror(rc)) : 0;
}

int ql_step_set_state(ql_txn_t *txn, ql_step_t *step, ql_state_t to, int64_t now, ql_err_t *err) {
    return step_set_state(txn, step, to, now, false, err);
}

/* Applies fn to every step of a job (read, then rewritten by fn). */
typedef int (*step_fn)(ql_txn_t *txn, ql_step_t *s, void *arg, int64_t now, ql_err_t *err);

static int for_steps(ql_txn_t *txn, const ql_job_t *job, step_fn fn, void *arg, int64_t now,
                     ql_err_t *err) {
    for (uint32_t i = 0; i < job->n_steps; i++) {
        ql_step_t s;
        int rc = ql_step_get(txn, &job->id, i, &s);
        if (rc)
            return ql_err_set(err, rc, "cannot read step %u: %s", i, ql_strerror(rc));
        rc = fn(txn, &s, arg, now, err);
        ql_step_free(&s);
        if (rc < 0)
            return rc;
        if (rc > 0)
            break;
    }
    return 0;
}

typedef struct recover_cb {
    bool (*on_step)(const ql_step_t *step, void *arg);
    void *arg;
} recover_cb_t;

static int step_running_to_ready(ql_txn_t *txn, ql_step_t *s, void *arg, int64_t now,
                                 ql_err_t *err) {
    const recover_cb_t *cb = arg;
    if (s->state != QL_RUNNING && s->state != QL_PENDING)
        return 0;
    bool keep = cb && cb->on_step && cb->on_step(s, cb->arg);
    /* Recovery (cb set) has swept the try before it commits, unless the try is another host's
     * (keep); PAUSE (no cb) has not stopped it. */
    return step_set_state(txn, s, QL_READY, now, cb == NULL || keep, err);
}

static int step_first_error_to_ready(ql_txn_t *txn, ql_step_t *s, void *arg, int64_t now,
                                     ql_err_t *err) {
    (void)arg;
    if (s->state != QL_ERROR)
        return 0;
    s->attempts = 0;
    s->retry_at = 0;
    int rc = ql_step_set_state(txn, s, QL_READY, now, err);
    return rc ? rc : 1;
}

static int step_all_to_ready(ql_txn_t *txn, ql_step_t *s, void *arg, int64_t now, ql_err_t *err) {
    (void)arg;
    s->attempts = 0;
    s->retry_at = 0;
    free(s->failed_msg);
    s->failed_msg = NULL;
    if (s->state == QL_READY) {
        s->start_time = s->end_time = 0;
        int rc = ql_step_put(txn, s);
        return rc ? ql_err_set(err, rc, "cannot store a step: %s", ql_strerror(rc)) : 0;
    }
    return step_set_state(txn, s, QL_READY, now, true, err);
}

static int step_discard(ql_txn_t *txn, ql_step_t *s, void *arg, int64_t now, ql_err_t *err) {
    (void)arg;
    if (ql_state_is_final(s->state))
        return 0;
    if (s->state == QL_ERROR || s->state == QL_PAUSED || s->state == QL_PENDING ||
        s->state == QL_READY || s->state == QL_RUNNING)
        return step_set_state(txn, s, QL_DISCARDED, now, true, err);
    return 0;
}

int ql_job_apply_action(ql_txn_t *txn, const ql_id_t *id, ql_action_t action, int64_t now,
                        ql_state_t *was, ql_err_t *err) {
    char ids[QL_ID_STR_LEN + 1];
    ql_id_format(id, ids);
    ql_job_t job;
    int rc = ql_job_get(txn, id, QL_DECODE_KEEP_EXTRA, &job);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "job %s not found", ids);
    if (rc)
        return ql_err_set(err, rc, "cannot read job %s: %s", ids, ql_strerror(rc));
    if (was)
        *was = job.state;
    if (!ql_action_allowed(action, job.state)) {
        rc = ql_err_set(err, QL_EACTION, "job %s: %s is not allowed while the job is %s (%s)", ids,
                        ql_action_name(action), ql_job_display_status(job.state),
                        ql_state_name(job.state));
        goto out;
    }
    switch (action) {
    case QL_ACTION_PAUSE:
        if (!(rc = for_steps(txn, &job, step_running_to_ready, NULL, now, err)))
            rc = ql_job_set_state(txn, &job, QL_PAUSED, false, now, err);
        break;
    case QL_ACTION_RESUME:
        if (!(rc = for_steps(txn, &job, step_first_error_to_ready, NULL, now, err)))
            rc = ql_job_set_state(txn, &job, QL_READY, false, now, err);
        break;
    case QL_ACTION_RESTART:
        if (!(rc = for_steps(txn, &job, step_all_to_ready, NULL, now, err))) {
            /* RUNNING -> READY is legal; a restart also clears the run's times. */
            rc = ql_job_set_state(txn, &job, QL_READY, false, now, err);
            if (!rc) {
                job.start_time = 0;
                rc = ql_job_put(txn, &job);
            }
        }
        break;
    case QL_ACTION_DISCARD:
        if (!(rc = for_steps(txn, &job, step_discard, NULL, now, err)))
            rc = ql_job_set_state(txn, &job, QL_DISCARDED, false, now, err);
        break;
    }
out:
    ql_job_free(&job);
    return rc;
}

int ql_job_end_suicidal(ql_txn_t *txn, const ql_id_t *id, int64_t now, ql_err_t *err) {
    char ids[QL_ID_STR_LEN + 1];
    ql_id_format(id, ids);
    ql_job_t job;
    int rc = ql_job_get(txn, id, QL_DECODE_KEEP_EXTRA, &job);
    if (rc)
        return ql_err_set(err, rc, "job %s: %s", ids, ql_strerror(rc));
    if (!ql_state_is_final(job.state) && !(rc = for_steps(txn, &job, step_discard, NULL, now, err)))
        rc = ql_job_set_state(txn, &job, QL_SUICIDAL, false, now, err);
    ql_job_free(&job);
    return rc;
}

static int step_force(ql_txn_t *txn, ql_step_t *s, void *arg, int64_t now, ql_err_t *err) {
    const ql_state_t *to = arg;
    if (ql_state_is_final(s->state))
        return 0;
    if (s->state == QL_READY || s->state == QL_ERROR) {
        int rc = ql_step_set_state(txn, s, QL_RUNNING, now, err);
        if (rc)
            return rc;
    }
    int rc = ql_step_set_state(txn, s, *to, now, err);
    /* ERROR stops the chain at the first unfinished step. */
    return rc ? rc : (*to == QL_ERROR ? 1 : 0);
}

int ql_job_force_finish(ql_txn_t *txn, const ql_id_t *id, ql_state_t outcome, bool warned,
                        int64_t now, ql_err_t *err) {
    char ids[QL_ID_STR_LEN + 1];
    ql_id_format(id, ids);
    ql_job_t job;
    int rc = ql_job_get(txn, id, QL_DECODE_KEEP_EXTRA, &job);
    if (rc)
        return ql_err_set(err, rc, "job %s: %s", ids, ql_strerror(rc));
    if (!ql_state_is_progressing(job.state)) {
        rc = ql_err_set(err, QL_EACTION,
                        "job %s is %s: only READY, PENDING or RUNNING jobs can "
                        "be finished",
                        ids, ql_state_name(job.state));
        goto out;
    }
    ql_state_t step_to = outcome == QL_ERROR ? QL_ERROR : QL_SUCCEED;
    if ((rc = for_steps(txn, &job, step_force, &step_to, now, err)))
        goto out;
    if (warned && job.n_steps > 0) {
        ql_step_t s;
        if (!(rc = ql_step_get(txn, &job.id, job.n_steps - 1, &s))) {
            s.state = QL_WARNING;
            rc = ql_step_put(txn, &s);
            ql_step_free(&s);
        }
        if (rc)
            goto out;
    }
    if (job.state == QL_READY)
        rc = ql_job_set_state(txn, &job, QL_PENDING, false, now, err);
    if (!rc && job.state == QL_PENDING)
        rc = ql_job_set_state(txn, &job, QL_RUNNING, false, now, err);
    if (!rc)
        rc = ql_job_set_state(txn, &job, outcome == QL_ERROR ? QL_ERROR : QL_SUCCEED, warned, now,
                              err);
out:
    ql_job_free(&job);
    return rc;
}

int ql_job_recover_one(ql_txn_t *txn, const ql_id_t *id, int64_t now,
                       bool (*on_step)(const ql_step_t *step, void *arg), void *arg,
                       bool *recovered, ql_err_t *err) {
    *recovered = false;
    ql_job_t job;
    int rc = ql_job_get(txn, id, QL_DECODE_KEEP_EXTRA, &job);
    if (rc)
        return ql_err_set(err, rc, "cannot read a job: %s", ql_strerror(rc));
    if (job.state == QL_RUNNING || job.state == QL_PENDING) {
        recover_cb_t cb = {on_step, arg};
        rc = for_steps(txn, &job, step_running_to_ready, &cb, now, err);
        if (!rc)
            rc = ql_job_set_state(txn, &job, QL_READY, false, now, err);
        *recovered = rc == 0;
    }
    ql_job_free(&job);
    return rc;
}

typedef struct {
    ql_id_t *ids;
    size_t n, cap;
} idlist_t;

static int collect_ids(const ql_job_t *j, void *arg) {
    idlist_t *l = arg;
    int rc = QL_ARRAY_RESERVE(l->ids, l->cap, l->n + 1, 64);
    if (rc)
        return rc;
    l->ids[l->n++] = j->id;
    return 0;
}

int ql_jobs_recover(ql_txn_t *txn, int64_t now, bool (*on_step)(const ql_step_t *step, void *arg),
                    void *arg, uint64_t *n, ql_err_t *err) {
    idlist_t l = {0};
    *n = 0;
    int rc = ql_job_foreach_state(txn, QL_RUNNING, collect_ids, &l);
    if (!rc)
        rc = ql_job_foreach_state(txn, QL_PENDING, collect_ids, &l);
    if (rc) {
        free(l.ids);
        return ql_err_set(err, rc, "cannot list interrupted jobs: %s", ql_strerror(rc));
    }
    for (size_t i = 0; i < l.n && !rc; i++) {
        bool done;
        rc = ql_job_recover_one(txn, &l.ids[i], now, on_step, arg, &done, err);
    }
    *n = l.n;
    free(l.ids);
    return rc;
}

void ql_job_steps_free(ql_job_steps_t *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->bufs ? s->bufs[i] : NULL);
    free(s->bufs);
    free(s->specs);
    memset(s, 0, sizeof *s);
}

int ql_job_steps_from_defs(const ql_stepdef_t *defs, size_t n, ql_job_steps_t *out, ql_err_t *err) {
    memset(out, 0, sizeof *out);
    out->specs = calloc(n ? n : 1, sizeof *out->specs);
    out->bufs = calloc(n ? n : 1, sizeof *out->bufs);
    if (!out->specs || !out->bufs) {
        ql_job_steps_free(out);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t len;
        int rc = ql_stepdef_encode(&defs[i], &out->bufs[i], &len);
        out->n = i + 1;
        if (rc) {
            ql_job_steps_free(out);
            return ql_err_set(err, rc, "cannot encode step %zu: %s", i, ql_strerror(rc));
        }
        out->specs[i].name = defs[i].name;
        out->specs[i].kind = ql_step_kind_name(defs[i].kind);
        out->specs[i].def = out->bufs[i];
        out->specs[i].def_len = len;
    }
    out->n = n;
    return 0;
}

int ql_job_steps_from_template(const ql_templates_t *t, const char *set, const char *type,
                               ql_job_steps_t *out, ql_err_t *err) {
    const ql_chain_t *chain;
    int rc = ql_templates_find(t, set, type, &chain, err);
    if (rc)
        return rc;
    return ql_job_steps_from_defs(chain->steps, chain->n_steps, out, err);
}
