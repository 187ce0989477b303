/*
 * Running a shell step: its parameters (QILIN_* environment and ${...} substitutions, never
 * re-parsed by a shell), the process through qilin-exec, and its result. The interface, and why
 * it is the shape it is, is in sched_shell.h: this file knows no run and no scheduler.
 */
#include "sched_shell.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    P_JOB_ID,
    P_JOB_TYPE,
    P_PROJECT,
    P_MODEL,
    P_SEG_ID,
    P_SEG_START,
    P_SEG_END,
    P_SEG_START_FMT,
    P_SEG_END_FMT,
    P_STEP_ID,
    P_YARN_QUEUE,
    P_TAG,
    P_COUNT
};

static const char *const param_names[P_COUNT] = {
    "QILIN_JOB_ID",          "QILIN_JOB_TYPE",      "QILIN_PROJECT",     "QILIN_MODEL",
    "QILIN_SEGMENT_ID",      "QILIN_SEGMENT_START", "QILIN_SEGMENT_END", "QILIN_SEGMENT_START_FMT",
    "QILIN_SEGMENT_END_FMT", "QILIN_STEP_ID",       "QILIN_YARN_QUEUE",  "QILIN_TAG",
};

typedef struct {
    char v[P_COUNT][QL_JOB_TAG_MAX + 1]; /* the tag is the longest value */
} params_t;

/* The job's tag as a step sees it: a string's value, any other JSON value as its text. */
static void tag_value(const char *tag, char *buf, size_t cap) {
    json_t *v = tag[0] == '"' ? json_loads(tag, JSON_DECODE_ANY, NULL) : NULL;
    snprintf(buf, cap, "%s", json_is_string(v) ? json_string_value(v) : tag);
    json_decref(v);
}

/* Formats an instant with the model's partition format in the project's time zone; falls back
 * to the epoch milliseconds when the model has no format or the instant cannot be shown. */
static void format_instant(const ql_tz_t *tz, const ql_datefmt_t *fmt, int64_t ms, char *buf,
                           size_t cap) {
    if (tz && fmt && ms != QL_RANGE_FULL_END) {
        ql_civil_t c;
        ql_tz_to_civil(tz, ms, &c);
        if (ql_datefmt_format(fmt, &c, buf, cap) == 0)
            return;
    }
    snprintf(buf, cap, "%lld", (long long)ms);
}

static void build_params(const ql_shell_env_t *env, const ql_job_t *j, uint32_t seq, params_t *p) {
    memset(p, 0, sizeof *p);
    ql_id_format(&j->id, p->v[P_JOB_ID]);
    snprintf(p->v[P_JOB_TYPE], sizeof p->v[0], "%s", j->type);
    snprintf(p->v[P_PROJECT], sizeof p->v[0], "%s", j->project);
    snprintf(p->v[P_MODEL], sizeof p->v[0], "%s", j->model_name);
    if (!ql_id_is_zero(&j->segment))
        ql_id_format(&j->segment, p->v[P_SEG_ID]);
    ql_step_id_format(&j->id, seq, p->v[P_STEP_ID]);
    snprintf(p->v[P_YARN_QUEUE], sizeof p->v[0], "%s", j->yarn_queue);
    tag_value(j->tag, p->v[P_TAG], sizeof p->v[0]);
    if (!j->has_range)
        return;
    snprintf(p->v[P_SEG_START], sizeof p->v[0], "%lld", (long long)j->range_start);
    snprintf(p->v[P_SEG_END], sizeof p->v[0], "%lld", (long long)j->range_end);

    /* The formatted range needs the model's format and the project's zone, chosen as for
     * submissions and the dispatcher (ql_submit_project_timezone). */
    char zone_name[128], pattern[QL_FORMAT_MAX + 1] = "";
    const char *server_tz = env->opts->default_timezone;
    ql_submit_project_timezone(NULL, server_tz, zone_name, sizeof zone_name);
    ql_txn_t *txn;
    if (ql_txn_begin(env->opts->store, false, &txn) == 0) {
        ql_project_t pr;
        if (ql_project_get(txn, j->project, 0, &pr) == 0) {
            ql_submit_project_timezone(&pr, server_tz, zone_name, sizeof zone_name);
            ql_project_free(&pr);
        }
        ql_model_t m;
        if (!ql_id_is_zero(&j->model) && ql_model_get(txn, &j->model, 0, &m) == 0) {
            if (m.partitioned)
                snprintf(pattern, sizeof pattern, "%s", m.partition_format);
            ql_model_free(&m);
        }
        ql_txn_abort(txn);
    }
    /* Zones and formats come from the scheduler's caches: a tz file parse and an ICU format
     * per step would be a good part of a short step's start. */
    const ql_tz_t *tz = NULL;
    const ql_datefmt_t *fmt = NULL;
    if (ql_tzcache_get(env->zones, zone_name, &tz))
        tz = NULL;
    if (pattern[0] && ql_submit_cache_format(env->formats, pattern, &fmt, NULL))
        fmt = NULL;
    format_instant(tz, fmt, j->range_start, p->v[P_SEG_START_FMT], sizeof p->v[0]);
    format_instant(tz, fmt, j->range_end, p->v[P_SEG_END_FMT], sizeof p->v[0]);
}

static void proc_closed(void *arg) {
    ql_shell_try_t *t = arg;
    t->done(t);
}

/*
 * A stopped try (an action, a timeout, shutdown, a lost lock) is over, but what it started
 * outside its process group (setsid) still carries its marker and would run beside the step's
 * next try: it is swept now, on the loop thread (a pass over /proc, then the wait until what it
 * killed is a zombie: milliseconds, at most opts->proc_drain_ms). A try that ended on its own is
 * not swept: a step may leave a daemon behind on purpose (ql_proc.h, Process group).
 */
static int sweep_stopped_try(ql_shell_try_t *t) {
    ql_proc_tokens_t *set;
    if (ql_proc_tokens_new(&set))
        return UV_ENOMEM;
    ql_proc_sweep_t sw = {0};
    int rc = ql_proc_tokens_add(set, t->token);
    if (!rc)
        rc = ql_proc_kill_tokens(set, t->env->opts->proc_drain_ms, &sw);
    ql_proc_tokens_free(set);
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&t->job->id, id);
    if (rc)
        ql_log(t->env->opts->log, QL_LOG_ERROR, "scheduler",
               "cannot make sure the stopped step's processes are gone step=%02u job=%s: %s",
               t->seq, id, ql_strerror(rc));
    else if (sw.killed)
        ql_log(t->env->opts->log, QL_LOG_INFO, "scheduler",
               "killed processes the stopped step left outside its group step=%02u job=%s "
               "killed=%u",
               t->seq, id, sw.killed);
    if (!rc && sw.lingered)
        ql_log(t->env->opts->log, QL_LOG_WARN, "scheduler",
               "an exiting process of this user, whose step cannot be told, was still not gone "
               "%d ms after the sweep step=%02u job=%s lingered=%u: a process stuck in the "
               "kernel (an uninterruptible sleep) dies when the kernel lets it",
               t->env->opts->proc_drain_ms, t->seq, id, sw.lingered);
    return rc;
}

static void proc_exited(ql_proc_t *proc, ql_proc_result_t *res, void *arg) {
    ql_shell_try_t *t = arg;
    /* A try a shutdown stopped is swept also when it ended on its own meanwhile: the job goes
     * back to READY after this, and its next try must not meet what it left. */
    if ((res->stop_reason != QL_PROC_STOP_NONE || t->sweep_always) && t->token[0])
        t->swept_rc = sweep_stopped_try(t);
    if (res->group_lingered) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&t->job->id, id);
        ql_log(t->env->opts->log, QL_LOG_WARN, "scheduler",
               "a process of the stopped step's group still ran %d ms after SIGKILL step=%02u "
               "job=%s pgid=%d, or /proc could not be read to tell: a process stuck in the "
               "kernel (an uninterruptible sleep) dies when the kernel lets it",
               QL_PROC_DRAIN_MS, t->seq, id, (int)ql_proc_pgid(proc));
    }
    ql_proc_verdict_t v;
    ql_proc_classify(res, t->def->warning_exit_code > 0 ? t->def->warning_exit_code : -1, &v);
    t->outcome = v.outcome == QL_PROC_SUCCEED   ? QL_SUCCEED
                 : v.outcome == QL_PROC_WARNING ? QL_WARNING
                                                : QL_ERROR;
    free(t->msg);
    t->msg = v.msg[0] ? strdup(v.msg) : NULL;
    free(t->output);
    t->output = NULL;
    t->output_len = 0;
    if (res->output && (t->output = malloc(res->output_len + 1))) {
        memcpy(t->output, res->output, res->output_len + 1);
        t->output_len = res->output_len;
    }
    t->proc = NULL;
    ql_proc_close(proc, proc_closed);
}

_Static_assert(QL_PROC_TOKEN_LEN == QL_STEP_TOKEN_LEN, "a step record holds a ql_proc token");
_Static_assert(QL_PROC_BOOT_ID_LEN == QL_STEP_BOOT_ID_LEN, "a step record holds a boot id");

/* The try's process group, recorded after the spawn with who leads it, so that recovery kills
 * the group only while that leader lives (ql_proc_kill_group_checked). The window between the
 * spawn and this commit is covered by the marker, committed before the spawn. */
typedef struct {
    ql_id_t job;
    uint32_t seq, attempt;
    ql_proc_ident_t ident;
    uint64_t fence;
    bool job_locked;
} pgid_note_t;

static int pgid_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    pgid_note_t *n = arg;
    ql_step_t st;
    int rc = n->job_locked ? ql_job_fence_check(txn, &n->job, n->fence, err)
                           : ql_fence_check(txn, n->fence, err);
    if (rc)
        return rc == QL_ENOTFOUND ? 0 : rc;
    rc = ql_step_get(txn, &n->job, n->seq, &st);
    if (rc)
        return rc == QL_ENOTFOUND ? 0 : rc;
    if (st.state == QL_RUNNING && st.attempts == n->attempt) {
        st.pgid = (int32_t)n->ident.pgid;
        st.pg_start = n->ident.start;
        memcpy(st.boot_id, n->ident.boot_id, sizeof st.boot_id);
        rc = ql_step_put(txn, &st);
    }
    ql_step_free(&st);
    return rc;
}

static void pgid_done(void *arg, int status, const ql_err_t *err) {
    (void)status;
    (void)err;
    free(arg);
}

/* A step's parameters: the QILIN_* ones, then the job's custom ones (ad-hoc jobs, stored with
 * the job, ql_job_params_decode), which reach the step as ${NAME} and as QILIN_PARAM_NAME
 * (ql_template_expand_step namespaces them). */
typedef struct {
    params_t p;
    ql_param_t list[P_COUNT + QL_TEMPLATE_MAX_PARAMS];
    size_t n;
    ql_kv_t *custom;
    size_t n_custom;
} step_params_t;

static void step_params_clear(step_params_t *sp) {
    ql_job_params_free(sp->custom, sp->n_custom);
    sp->custom = NULL;
    sp->n_custom = 0;
}

static int step_params_build(const ql_shell_env_t *env, const ql_job_t *job, uint32_t seq,
                             step_params_t *sp, ql_err_t *err) {
    build_params(env, job, seq, &sp->p);
    for (int i = 0; i < P_COUNT; i++) {
        sp->list[i].name = param_names[i];
        sp->list[i].value = sp->p.v[i];
    }
    sp->n = P_COUNT;
    int rc = ql_job_params_decode(job->params, job->params_len, &sp->custom, &sp->n_custom, err);
    for (size_t i = 0; i < sp->n_custom; i++) {
        sp->list[sp->n].name = sp->custom[i].name;
        sp->list[sp->n].value = sp->custom[i].value;
        sp->n++;
    }
    return rc;
}

int ql_shell_step_skipped(const ql_shell_env_t *env, const ql_job_t *job, const ql_stepdef_t *def,
                          uint32_t seq, char *why, size_t cap) {
    if (!def->n_when)
        return 0;
    step_params_t sp;
    ql_err_t err = {0};
    if (step_params_build(env, job, seq, &sp, &err)) {
        snprintf(why, cap, "%s", err.msg);
        step_params_clear(&sp);
        return -1;
    }
    const char *value = "";
    const ql_when_t *unmet = ql_when_unmet(def, sp.list, sp.n, &value);
    if (unmet) {
        size_t o = (size_t)snprintf(why, cap, "when: %s is '%s', not ", unmet->param, value);
        for (size_t i = 0; i < unmet->n_values && o < cap; i++)
            o += (size_t)snprintf(why + o, cap - o, "%s'%s'", i ? " or " : "", unmet->values[i]);
    }
    step_params_clear(&sp);
    return unmet != NULL;
}

/*
 * Whether the job engine lock may have been taken by another server since this one committed
 * the step RUNNING: the store's fencing epoch is read again just before the spawn. The commit
 * itself is fenced, so a holder that lost the lock before it cannot commit; one that committed
 * just before the new holder raised the epoch would otherwise spawn after that holder's
 * recovery swept the step's marker (docs/step-processes.md). One read
 * transaction per spawn.
 */
static bool fenced_before_spawn(const ql_shell_try_t *t, ql_err_t *err) {
    const ql_sched_opts_t *o = t->env->opts;
    if (!t->fence || !o->store)
        return false;
    ql_txn_t *txn;
    if (ql_txn_begin(o->store, false, &txn))
        return false; /* the finish write's own fence check decides */
    int rc = t->job_locked ? ql_job_fence_check(txn, &t->job->id, t->fence, err)
                           : ql_fence_check(txn, t->fence, err);
    ql_txn_abort(txn);
    return rc == QL_EFENCED;
}

/* The try could not start: it ends in ERROR, with why. */
static void fail_try(ql_shell_try_t *t, const char *why) {
    t->outcome = QL_ERROR;
    free(t->msg);
    t->msg = strdup(why);
    t->done(t);
}

void ql_shell_stop(ql_shell_try_t *t, ql_proc_stop_reason_t reason, bool sweep) {
    if (!t->proc)
        return;
    if (sweep) {
        t->sweep_always = true;
        t->swept_rc = 0;
    }
    ql_proc_stop(t->proc, reason);
}

void ql_shell_spawn(ql_shell_try_t *t) {
    const ql_sched_opts_t *o = t->env->opts;
    step_params_t sp;
    ql_step_exec_t ex;
    ql_err_t err = {0};
    t->proc = NULL;
    if (fenced_before_spawn(t, &err)) {
        /* Not started; the step's end is refused by fencing too, which stops this scheduler. */
        fail_try(t, err.msg);
        return;
    }
    if (step_params_build(t->env, t->job, t->seq, &sp, &err) ||
        ql_template_expand_step(t->def, sp.list, sp.n, &ex, &err)) {
        step_params_clear(&sp);
        fail_try(t, err.msg);
        return;
    }
    step_params_clear(&sp);
    /* Two more entries: the fencing token of the holding that started the try, and the marker,
     * last so that they win over a template's variables of those names (a step must choose
     * neither the token recovery finds it by nor the one its resources check). */
    ql_proc_env_t *env = calloc(ex.n_env + 2, sizeof *env);
    char **keys = calloc(ex.n_env + 2, sizeof *keys);
    char fence[24];
    snprintf(fence, sizeof fence, "%llu", (unsigned long long)t->fence);
    char log_path[4096];
    snprintf(log_path, sizeof log_path, "%s/%s/%s.log", o->log_dir ? o->log_dir : "logs",
             sp.p.v[P_JOB_ID], sp.p.v[P_STEP_ID]);
    int rc = (env && keys) ? 0 : UV_ENOMEM;
    size_t n_env = 0;
    for (size_t i = 0; !rc && i < ex.n_env; i++) {
        const char *eq = strchr(ex.envp[i], '=');
        if (!eq)
            continue;
        keys[n_env] = strndup(ex.envp[i], (size_t)(eq - ex.envp[i]));
        env[n_env].key = keys[n_env];
        env[n_env].value = eq + 1;
        n_env++;
    }
    if (!rc) {
        env[n_env].key = QL_SHELL_FENCE_ENV;
        env[n_env].value = fence;
        n_env++;
    }
    if (!rc && t->token[0]) {
        env[n_env].key = QL_PROC_TOKEN_ENV;
        env[n_env].value = t->token;
        n_env++;
    }
    if (!rc) {
        ql_proc_spec_t spec;
        ql_proc_spec_init(&spec);
        spec.argv = (const char *const *)ex.argv;
        spec.env = env;
        spec.env_count = n_env;
        spec.cwd = ex.cwd;
        spec.timeout_ms = t->def->timeout_ms;
        spec.log_path = log_path;
        spec.max_output = o->output_max;
        spec.grace_ms = o->kill_grace_ms;
        spec.exec_helper = o->exec_helper;
        rc = ql_proc_spawn(ql_clock_loop(o->clock), &spec, proc_exited, t, &t->proc, &err);
    }
    for (size_t i = 0; i < n_env; i++)
        free(keys[i]); /* the last two keys are static: their keys[] entries are NULL */
    free(keys);
    free(env);
    ql_step_exec_free(&ex);
    if (rc) {
        t->proc = NULL;
        fail_try(t, err.msg[0] ? err.msg : ql_strerror(rc));
        return;
    }
    pgid_note_t *n = malloc(sizeof *n);
    if (n) {
        n->job = t->job->id;
        n->fence = t->fence;
        n->job_locked = t->job_locked;
        n->seq = t->seq;
        n->attempt = t->attempt;
        /* The helper is our child and not reaped before the loop runs again, so its /proc
         * entry is there (a zombie's too); without an identity the group is not recorded, and
         * the marker alone finds the try. */
        if (ql_proc_ident_of(ql_proc_pgid(t->proc), &n->ident) != 0 ||
            t->env->submit(t->env->submit_arg, pgid_fn, n, pgid_done))
            free(n);
    }
}
