/* The submission service: see ql_submission.h. */
#include "scheduler/ql_submission.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ql_submission {
    ql_submission_opts_t opts;
    ql_submit_cache_t *cache; /* zones and partition formats of build normalization */
};

/* One request on its way: what the mutation reads (on the writer thread) and what the answer
 * needs (on the owner's). Owned by the service from ql_submission_submit to the answer. */
typedef struct sub_op {
    ql_submission_t *svc;
    ql_submission_done_cb done;
    void *arg;
    ql_submit_kind_t kind;
    ql_id_t model;
    char *project; /* owned; ADHOC */
    char *type;    /* owned; ADHOC */
    char submitter[QL_USER_MAX + 1];
    char yarn_queue[QL_JOB_QUEUE_MAX + 1];
    char tag[QL_JOB_TAG_MAX + 1];
    ql_id_t *ids; /* owned: MERGE, REFRESH */
    size_t n_ids;
    ql_submit_op_t *subs; /* owned: one per job */
    size_t n_subs;
    ql_id_t *jobs; /* owned: the new jobs, filled from subs at the answer */
    /* owned: one per job, a slot for its pick in this transaction (NULL: none); each gets its
     * ql_sched_claim_done at the answer */
    ql_sched_claim_t **claims;
    ql_job_steps_t steps; /* ADHOC */
    char **names;         /* owned: ADHOC, the steps' names (steps.specs[i].name points here) */
    char *params;         /* owned: ADHOC, encoded */
    size_t params_len;
} sub_op_t;

int ql_submission_new(const ql_submission_opts_t *opts, ql_submission_t **out) {
    *out = NULL;
    ql_submission_t *s = calloc(1, sizeof *s);
    if (!s)
        return UV_ENOMEM;
    s->opts = *opts;
    int rc = ql_submit_cache_new(0, &s->cache);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ql_submission_free(ql_submission_t *s) {
    if (!s)
        return;
    ql_submit_cache_free(s->cache);
    free(s);
}

ql_submit_cache_t *ql_submission_cache(ql_submission_t *s) {
    return s->cache;
}

/* ---- lookups ---- */

static int check_project_name(const char *name, ql_err_t *err);

int ql_submission_get_project(ql_txn_t *txn, const char *name, ql_project_t *out, ql_err_t *err) {
    int rc = check_project_name(name, err);
    if (rc)
        return rc;
    rc = ql_project_get(txn, name, 0, out);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "project '%.100s' not found", name);
    if (rc)
        return ql_err_set(err, rc, "cannot read project '%.100s': %s", name, ql_strerror(rc));
    return 0;
}

static int check_project_name(const char *name, ql_err_t *err) {
    if (!name || !name[0])
        return ql_err_set(err, QL_EINVAL, "project: required (the project's name)");
    if (strlen(name) > QL_NAME_MAX)
        return ql_err_set(err, QL_EINVAL, "project: longer than %d characters", QL_NAME_MAX);
    return 0;
}

static int check_model_name(const char *name, ql_err_t *err) {
    if (!name || !name[0])
        return ql_err_set(err, QL_EINVAL, "model: required (the model's name or uuid)");
    if (strlen(name) > QL_NAME_MAX)
        return ql_err_set(err, QL_EINVAL, "model: longer than %d characters", QL_NAME_MAX);
    return 0;
}

/* The model of project whose uuid name is, once no model has that name. */
static int model_by_uuid(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                         ql_model_t *out, ql_err_t *err) {
    ql_id_t id;
    if (ql_id_parse(name, &id) == 0 && ql_model_get(txn, &id, flags, out) == 0) {
        if (strcmp(out->project, project) == 0)
            return 0;
        ql_model_free(out);
    }
    return ql_err_set(err, QL_ENOTFOUND, "model '%.100s' not found in project '%.100s'", name,
                      project);
}

/* The project named project into p and its model named name (or whose uuid it is) into m: the
 * project and the model by name in one lookup (ql_model_find_with_project). */
static int get_project_model(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                             ql_project_t *p, ql_model_t *m, ql_err_t *err) {
    int rc = check_project_name(project, err);
    if (rc)
        return rc;
    ql_err_t merr = {0};
    int mrc = check_model_name(name, &merr);
    if (mrc) { /* the project's errors come first */
        if ((rc = ql_submission_get_project(txn, project, p, err)))
            return rc;
        ql_project_free(p);
        if (err)
            *err = merr;
        return mrc;
    }
    bool found;
    rc = ql_model_find_with_project(txn, project, name, flags, p, m, &found);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "project '%.100s' not found", project);
    if (rc)
        return ql_err_set(err, rc, "cannot read project '%.100s' and its model '%.100s': %s",
                          project, name, ql_strerror(rc));
    if (!found && (rc = model_by_uuid(txn, project, name, flags, m, err)))
        ql_project_free(p);
    return rc;
}

int ql_submission_get_model(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                            ql_model_t *out, ql_err_t *err) {
    ql_project_t p;
    int rc = get_project_model(txn, project, name, flags, &p, out, err);
    if (!rc)
        ql_project_free(&p);
    return rc;
}

/* Reads what req names, in one read transaction: the project always, the model unless an
 * ad-hoc job has none (*has_model false then, m untouched). */
static int read_target(ql_submission_t *s, const ql_submission_req_t *req, ql_project_t *p,
                       ql_model_t *m, bool *has_model, ql_err_t *err) {
    *has_model = false;
    ql_txn_t *txn;
    /* Lookups without a shared snapshot: what they find is advisory, the mutation reads the model
     * again with its lock (ql_submit_fn). */
    int rc = ql_txn_begin_lookups(ql_writer_store(s->opts.writer), &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot read the store: %s", ql_strerror(rc));
    if (req->model_id) {
        if ((rc = ql_model_get(txn, req->model_id, 0, m)) == QL_ENOTFOUND)
            rc = ql_err_set(err, rc, "model not found");
        else if (rc)
            rc = ql_err_set(err, rc, "cannot read the model: %s", ql_strerror(rc));
        else if ((rc = ql_submission_get_project(txn, m->project, p, err)))
            ql_model_free(m);
        else
            *has_model = true;
    } else if (req->model || req->kind != QL_SUBMIT_ADHOC) {
        if ((rc = get_project_model(txn, req->project, req->model, 0, p, m, err)) == 0)
            *has_model = true;
    } else {
        rc = ql_submission_get_project(txn, req->project, p, err);
    }
    ql_txn_abort(txn);
    return rc;
}

/* ---- answers ---- */

static void op_free(sub_op_t *op) {
    for (size_t i = 0; op->names && i < op->steps.n; i++)
        free(op->names[i]);
    free(op->names);
    ql_job_steps_free(&op->steps);
    free(op->params);
    free(op->claims);
    free(op->jobs);
    free(op->subs);
    free(op->ids);
    free(op->type);
    free(op->project);
    free(op);
}

static void answer(sub_op_t *op, int status, const ql_err_t *err, bool written) {
    /* The answer always carries a code and a message. */
    ql_err_t e = {0};
    if (status) {
        if (err)
            e = *err;
        if (!e.code)
            e.code = status;
        if (!e.msg[0])
            snprintf(e.msg, sizeof e.msg, "%s", ql_strerror(e.code));
    }
    ql_submission_result_t res = {
        .status = status,
        .err = status ? &e : NULL,
        .written = written,
        .kind = op->kind,
        .type = op->kind == QL_SUBMIT_ADHOC ? op->type : ql_submit_kind_type(op->kind),
        .model = op->model,
        .n_jobs = status ? 0 : op->n_subs,
        .jobs = status ? NULL : op->jobs,
    };
    op->done(op->arg, &res);
}

/* Answers an error found before the write and frees op. Returns 0 (the call's own result). */
static int fail_early(sub_op_t *op, int status, const ql_err_t *err) {
    answer(op, status, err, false);
    op_free(op);
    return 0;
}

/* ---- the write ---- */

/* Every job of one request in one mutation: a refresh of several segments creates all of its
 * jobs or none. */
static int submit_all_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    sub_op_t *op = arg;
    for (size_t i = 0; i < op->n_subs; i++) {
        int rc = ql_submit_fn(txn, &op->subs[i], err);
        /* Each job is picked (or left READY) before the next is created: the next one then
         * finds it before itself in the READY index only if it was left there. */
        if (!rc && op->claims && op->claims[i])
            rc = ql_sched_claim_pick(txn, op->claims[i], &op->subs[i].job, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Every claim gets its answer (status 0: the job committed) and is forgotten. Returns whether
 * every job of the request was picked. */
static bool claims_done(sub_op_t *op, int status) {
    size_t picked = 0;
    for (size_t i = 0; op->claims && i < op->n_subs; i++)
        if (op->claims[i]) {
            picked += ql_sched_claim_done(op->claims[i], &op->subs[i].job, status);
            op->claims[i] = NULL;
        }
    return picked == op->n_subs;
}

/* A slot for each job's pick in its own transaction, from the scheduler the picker names (the
 * project's override of kylin.job.max-concurrent-jobs applies as for the fetcher). */
static void take_claims(ql_submission_t *s, const ql_project_t *p, sub_op_t *op) {
    ql_sched_t *sched = s->opts.picker ? s->opts.picker(s->opts.picker_arg) : NULL;
    if (!sched || !(op->claims = calloc(op->n_subs, sizeof *op->claims)))
        return;
    const char *limit = ql_strmap_get(&p->config, "kylin.job.max-concurrent-jobs");
    for (size_t i = 0; i < op->n_subs; i++)
        if (!(op->claims[i] = ql_sched_claim(sched, p->name, limit)))
            break; /* no room for this one: the later ones wait behind it */
}

static void write_done(void *arg, int status, const ql_err_t *err) {
    sub_op_t *op = arg;
    ql_submission_t *s = op->svc;
    for (size_t i = 0; i < op->n_subs && !status; i++)
        op->jobs[i] = op->subs[i].job;
    /* The picked jobs' steps start before the client hears of the jobs; when every job was
     * picked, no fetcher pass has anything new to look for. */
    bool all_picked = claims_done(op, status);
    answer(op, status, err, true);
    op_free(op);
    if (!status && !all_picked && s->opts.wake)
        s->opts.wake(s->opts.wake_arg);
}

/* ---- what each kind checks and prepares ---- */

static int prepare_build(ql_submission_t *s, const ql_submission_req_t *req, const ql_project_t *p,
                         const ql_model_t *m, sub_op_t *op, ql_err_t *err) {
    if (!m->partitioned) {
        /* Kylin's full build: one segment over the whole range; a range given is ignored, as
         * Kylin ignores it (docs/rest.md, Full-load models). */
        op->subs[0].start = 0;
        op->subs[0].end = QL_RANGE_FULL_END;
        return 0;
    }
    if (!req->has_range)
        return ql_err_set(err, QL_ENORANGE,
                          "model '%s' is partitioned by %s: a build needs start and end (epoch ms)",
                          m->name, m->partition_column);
    int64_t ns = 0, ne = 0;
    int rc = ql_submit_normalize_cached(s->cache, p, m, s->opts.server_timezone, req->start,
                                        req->end, &ns, &ne, err);
    if (rc)
        return rc;
    /* The floor to the format's period happens in the project's zone: east of UTC, a start
     * on 1970-01-01 floors to a local midnight before the epoch, which no segment may have. */
    if (ns < 0)
        return ql_err_set(err, QL_EINVAL,
                          "start: %lld falls in a period of the partition format '%s' that begins "
                          "before 1970-01-01T00:00:00Z (at %lld in the project's time zone); start "
                          "the build at the next period",
                          (long long)req->start, m->partition_format, (long long)ns);
    op->subs[0].start = ns;
    op->subs[0].end = ne;
    return 0;
}

/* An ad-hoc job's steps (its own, or the chain of its type in the model's template set, whose
 * custom parameters it must supply) and its encoded parameters. */
static int prepare_adhoc(ql_submission_t *s, const ql_submission_req_t *req, const ql_model_t *m,
                         sub_op_t *op, ql_err_t *err) {
    const ql_adhoc_job_t *def = req->adhoc;
    if (!(op->project = strdup(req->project)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    int rc;
    if (def->n_steps) {
        rc = ql_job_steps_from_defs(def->steps, def->n_steps, &op->steps, err);
        /* The specs borrow their names from the definitions, which are the caller's and may
         * be gone before the write runs: the op keeps copies. (A chain's live as long as the
         * templates.) */
        if (!rc && !(op->names = calloc(op->steps.n, sizeof *op->names)))
            rc = ql_err_set(err, UV_ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < op->steps.n; i++) {
            if (!(op->names[i] = strdup(op->steps.specs[i].name)))
                rc = ql_err_set(err, UV_ENOMEM, "out of memory");
            else
                op->steps.specs[i].name = op->names[i];
        }
    } else {
        const ql_chain_t *chain;
        ql_err_t ferr = {0}; /* not err itself: its message is an argument of the new one */
        if ((rc = ql_templates_find(s->opts.templates, m ? m->job_template : "", def->type, &chain,
                                    &ferr)))
            return ql_err_set(err, QL_EINVAL,
                              "type: %s (give the job's steps, or define the type in the job "
                              "templates)",
                              ferr.msg);
        if ((rc = ql_chain_check_params(chain, def->params, def->n_params, err)))
            return rc;
        rc = ql_job_steps_from_defs(chain->steps, chain->n_steps, &op->steps, err);
    }
    if (rc)
        return rc;
    if (ql_job_params_encode(def->params, def->n_params, &op->params, &op->params_len))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    ql_submit_op_t *sub = &op->subs[0];
    sub->project = op->project;
    sub->type = op->type;
    sub->steps = &op->steps;
    sub->params = op->params;
    sub->params_len = op->params_len;
    return 0;
}

/* The ops of a request: one, or one per segment of a refresh. */
static int alloc_subs(const ql_submission_req_t *req, sub_op_t *op, ql_err_t *err) {
    size_t n = req->kind == QL_SUBMIT_REFRESH ? req->n_ids : 1;
    if (n == 0)
        return ql_err_set(err, QL_EINVAL, "ids: a refresh needs at least one segment");
    if (req->kind == QL_SUBMIT_MERGE || req->kind == QL_SUBMIT_REFRESH) {
        if (req->n_ids && !(op->ids = malloc(req->n_ids * sizeof *op->ids)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        if (req->n_ids)
            memcpy(op->ids, req->ids, req->n_ids * sizeof *op->ids);
        op->n_ids = req->n_ids;
    }
    if (!(op->subs = calloc(n, sizeof *op->subs)) || !(op->jobs = calloc(n, sizeof *op->jobs)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    op->n_subs = n;
    for (size_t i = 0; i < n; i++) {
        ql_submit_op_t *sub = &op->subs[i];
        sub->kind = req->kind;
        sub->templates = op->svc->opts.templates;
        sub->model = op->model;
        sub->priority = req->priority;
        sub->submitter = op->submitter;
        sub->yarn_queue = op->yarn_queue;
        sub->tag = op->tag;
        sub->now = req->now;
        sub->ids = req->kind == QL_SUBMIT_REFRESH ? &op->ids[i] : op->ids;
        sub->n_ids = req->kind == QL_SUBMIT_REFRESH ? 1 : op->n_ids;
    }
    return 0;
}

int ql_submission_submit(ql_submission_t *s, const ql_submission_req_t *req,
                         ql_submission_done_cb done, void *arg) {
    if (!s || !req || !done || (unsigned)req->kind > QL_SUBMIT_ADHOC)
        return UV_EINVAL;
    ql_err_t err = {0};
    sub_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        /* No op to answer from: the same answer, from the stack. */
        sub_op_t local = {.kind = req->kind, .done = done, .arg = arg};
        ql_err_set(&err, UV_ENOMEM, "out of memory");
        answer(&local, UV_ENOMEM, &err, false);
        return 0;
    }
    op->svc = s;
    op->done = done;
    op->arg = arg;
    op->kind = req->kind;
    snprintf(op->submitter, sizeof op->submitter, "%s", req->submitter ? req->submitter : "ADMIN");
    if ((req->yarn_queue && strlen(req->yarn_queue) > QL_JOB_QUEUE_MAX) ||
        (req->tag && strlen(req->tag) > QL_JOB_TAG_MAX)) {
        bool q = req->yarn_queue && strlen(req->yarn_queue) > QL_JOB_QUEUE_MAX;
        ql_err_set(&err, QL_EINVAL, "%s: longer than %d bytes", q ? "yarn_queue" : "tag",
                   q ? QL_JOB_QUEUE_MAX : QL_JOB_TAG_MAX);
        return fail_early(op, QL_EINVAL, &err);
    }
    snprintf(op->yarn_queue, sizeof op->yarn_queue, "%s", req->yarn_queue ? req->yarn_queue : "");
    snprintf(op->tag, sizeof op->tag, "%s", req->tag ? req->tag : "");
    if (req->kind == QL_SUBMIT_ADHOC && !req->adhoc) {
        ql_err_set(&err, QL_EINVAL, "an ad-hoc job needs its definition");
        return fail_early(op, QL_EINVAL, &err);
    }
    /* Every answer of an ad-hoc job names its type. */
    if (req->kind == QL_SUBMIT_ADHOC && !(op->type = strdup(req->adhoc->type))) {
        ql_err_set(&err, UV_ENOMEM, "out of memory");
        return fail_early(op, UV_ENOMEM, &err);
    }
    ql_project_t p;
    ql_model_t m;
    bool has_model;
    int rc = read_target(s, req, &p, &m, &has_model, &err);
    if (rc)
        return fail_early(op, rc, &err);
    if (has_model)
        op->model = m.id;
    if (!(rc = alloc_subs(req, op, &err))) {
        if (req->kind == QL_SUBMIT_BUILD)
            rc = prepare_build(s, req, &p, &m, op, &err);
        else if (req->kind == QL_SUBMIT_ADHOC)
            rc = prepare_adhoc(s, req, has_model ? &m : NULL, op, &err);
    }
    if (!rc)
        take_claims(s, &p, op);
    ql_project_free(&p);
    if (has_model)
        ql_model_free(&m);
    if (rc)
        return fail_early(op, rc, &err);
    /* Its writes take the model's lock: they are ordered by the model (ql_writer.h, Lanes). */
    uint64_t key = ql_writer_key(&op->model);
    rc = ql_writer_submit_keyed(s->opts.writer, &key, has_model ? 1 : 0, submit_all_fn, op,
                                write_done);
    if (rc == QL_ESHUTDOWN)
        ql_err_set(&err, rc, "the server is shutting down");
    else if (rc)
        ql_err_set(&err, rc, "cannot queue the change: %s", ql_strerror(rc));
    if (rc)
        claims_done(op, rc);
    return rc ? fail_early(op, rc, &err) : 0;
}
