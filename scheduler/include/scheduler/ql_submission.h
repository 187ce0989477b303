/*
 * The submission service: the one way a client's request for a new job is carried out,
 * whoever passes it on (the REST API, the simulator's `build:` step, tests and benchmarks):
 * incremental builds, merges, refreshes and ad-hoc jobs. A caller parses its request, calls
 * ql_submission_submit() and answers from the done callback. (The dispatcher creates its
 * builds with ql_submit_fn directly: it decides from records it has read already and writes
 * under its fencing token.)
 *
 * DESIGN.
 * - One call, one answer. ql_submission_submit() reads the project and the model once, in one
 *   read transaction, and decodes them once; checks what needs them (a build of a
 *   partitioned model needs a range, which it normalizes with the model's partition format in the
 *   project's time zone, with the zones and ICU formats the service keeps); prepares an ad-hoc
 *   job's steps and parameters; then queues ONE writer mutation that creates every job the
 *   request asks for (ql_submit_fn for each: a refresh of n segments creates n jobs), all or
 *   none. Whatever happens, the done callback runs exactly once: with the new jobs, or with an
 *   error code and message. An error found before the write is answered before
 *   ql_submission_submit() returns; the write's outcome after the commit (the writer's rule: no
 *   caller is answered before the sync of the transaction that holds its change).
 * - Wake-up: after the answer of a write that committed, the service calls the wake hook given
 *   at creation, once per write (not per job), so the scheduler looks for the new jobs now and
 *   not at its next poll; not when every job of the write was picked in it (below). Failed
 *   submissions do not call it. The hook keeps this library free
 *   of whoever schedules (server/ passes ql_node_kick; the simulator its scheduler's kick).
 * - Picked with its submission: when the picker hook given at creation names a scheduler, each
 *   new job asks it for a slot as the request is queued (ql_sched_claim), and a job that got
 *   one is picked in the same write transaction that creates it (READY -> PENDING -> RUNNING,
 *   its first step RUNNING), its step started from the answer, before the done callback runs:
 *   no commit of the pick's own, and no wait for the fetcher (docs/design/jobs.md, The scheduler).
 *   Whatever keeps the pick from happening (no slot, an older READY job first, a stale fencing
 *   token) leaves the job READY and the submission as it was.
 * - Threads: a service is used on one thread, its owner's, which is also where the writer
 *   answers (a server's loop; in the writer's manual mode, whoever calls ql_writer_flush). It
 *   is not locked.
 * - Memory: what a request points to is borrowed for the call only; the service copies what
 *   the mutation needs. What the callback gets is borrowed for the callback.
 */
#ifndef QL_SUBMISSION_H
#define QL_SUBMISSION_H

#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ql_submission ql_submission_t;

typedef struct ql_submission_opts {
    ql_writer_t *writer;             /* borrowed: reads go to its store, the writes through it */
    const ql_templates_t *templates; /* borrowed: the job templates */
    const char *server_timezone;     /* borrowed; a build's zone when its project has none; NULL
                                        or "": UTC */
    void (*wake)(void *arg);         /* may be NULL: see Wake-up above */
    void *wake_arg;
    /* May be NULL: see Picked with its submission above. Asked on the owner's thread for each
     * request: the scheduler that may pick its jobs in their own transaction now (the master's:
     * scheduler 0's holder, scheduler 100's leader; never scheduler 2's, a standby's or a query
     * server's), or NULL. */
    ql_sched_t *(*picker)(void *arg);
    void *picker_arg;
} ql_submission_opts_t;

/* What a client asks for. Every pointer is borrowed for the call only. */
typedef struct ql_submission_req {
    ql_submit_kind_t kind;
    /* The model: by id (model_id, set: its project is read too), or by name or uuid in project
     * (the REST API's rule, ql_submission_get_model). For QL_SUBMIT_ADHOC, project is required
     * and model optional (NULL: a job of no model). */
    const ql_id_t *model_id;
    const char *project;
    const char *model;
    /* QL_SUBMIT_BUILD: the range as the client gave it (has_range false: not given) */
    bool has_range;
    int64_t start, end;
    /* QL_SUBMIT_MERGE: the segments to merge (one job); QL_SUBMIT_REFRESH: the segments to
     * refresh (a job each, in one transaction) */
    const ql_id_t *ids;
    size_t n_ids;
    /* QL_SUBMIT_ADHOC: the definition (ql_adhoc_parse): its type, its steps (none: the chain
     * of its type in the model's template set, whose custom parameters it must supply) and its
     * parameters. Its project, model and priority are the fields of this request. */
    const ql_adhoc_job_t *adhoc;
    int priority;
    /* Kylin's yarn_queue and tag (the tag as compact JSON text), kept with every job the
     * request creates; NULL: none */
    const char *yarn_queue, *tag;
    const char *submitter; /* NULL: ADMIN */
    int64_t now;           /* the jobs' create time, epoch ms */
} ql_submission_req_t;

/* The answer. Borrowed for the callback. */
typedef struct ql_submission_result {
    int status;          /* 0: the jobs are committed; else the error code */
    const ql_err_t *err; /* status != 0: the code and the message (never NULL then) */
    /* Whether the request reached the writer: a failure then is the store's rules refusing the
     * write (an overlap, a conflict) or the commit failing; before, it is the request itself
     * (no such model, a bad range) or the server (shutting down, out of memory). */
    bool written;
    ql_submit_kind_t kind;
    const char *type; /* the jobs' type: INC_BUILD, INDEX_MERGE, INDEX_REFRESH or the ad-hoc
                         job's (NULL only for an ad-hoc request without a definition) */
    ql_id_t model;    /* the model's id once it was found; zero before, or without a model */
    size_t n_jobs;    /* the new jobs (status 0), in the order of the request's ids */
    const ql_id_t *jobs;
} ql_submission_result_t;

typedef void (*ql_submission_done_cb)(void *arg, const ql_submission_result_t *res);

/* Creates a service (owned by the caller: ql_submission_free) over the borrowed parts of opts,
 * which must outlive it. Returns 0 or UV_ENOMEM. */
int ql_submission_new(const ql_submission_opts_t *opts, ql_submission_t **out);
/* Frees the service (NULL is ignored). Every write it queued must have been answered: free
 * the writer first (ql_writer_free answers what is still queued). */
void ql_submission_free(ql_submission_t *s);

/*
 * Carries out req (see DESIGN) and calls done(arg, result) exactly once, perhaps before this
 * call returns. Returns 0; UV_EINVAL only for a call that is wrong in itself (no done callback,
 * no request, a kind out of range), and then done never runs.
 *
 * Errors (the code; the message says what, in the REST API's words): the store unreadable;
 * the project's and the model's lookup (ql_submission_get_model); QL_ENORANGE for a build of a
 * partitioned model without a range (a full-load model's build is its full build, whatever range
 * it gives); the normalization's errors
 * (ql_submit_normalize); QL_EINVAL for a range that starts in a period before the epoch in the
 * project's zone, an ad-hoc job without a definition, a refresh without segments; an ad-hoc
 * job's steps and parameters (ql_job_steps_from_defs, QL_EINVAL naming `type` when the
 * templates have no chain of its type, ql_chain_check_params);
 * UV_ENOMEM; QL_ESHUTDOWN once the writer is stopping; then whatever the mutation or the commit
 * answers (written true).
 */
int ql_submission_submit(ql_submission_t *s, const ql_submission_req_t *req,
                         ql_submission_done_cb done, void *arg);

/* The service's zones and compiled partition formats, for checks made on the owner's thread
 * (a new model's format): borrowed, valid until ql_submission_free. */
ql_submit_cache_t *ql_submission_cache(ql_submission_t *s);

/* The lookups the REST API names things by, usable on any thread (they touch only txn):
 * the project named name (QL_EINVAL when it is NULL, empty or too long; QL_ENOTFOUND), and the
 * model named name, or whose uuid it is, in project (the project's errors first; QL_EINVAL
 * without a name; QL_ENOTFOUND naming both), decoded with flags (QL_DECODE_*). out is the
 * caller's to free on success. */
int ql_submission_get_project(ql_txn_t *txn, const char *name, ql_project_t *out, ql_err_t *err);
int ql_submission_get_model(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                            ql_model_t *out, ql_err_t *err);

#endif
