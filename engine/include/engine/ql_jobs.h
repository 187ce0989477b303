/*
 * Jobs and steps: the state machine (docs/design/jobs.md, States), the actions PAUSE, RESUME,
 * RESTART and DISCARD, and the writes that move a job, each with its segment effects in the same
 * transaction.
 *
 * The transition tables are data (see jobs.c); every state change of a job or step in Qilin goes
 * through ql_job_set_state() / ql_step_set_state(), which refuse an illegal pair with an error
 * naming both states.
 */
#ifndef QL_JOBS_H
#define QL_JOBS_H

#include "engine/ql_template.h"
#include "storage/storage.h"

#include <stdbool.h>

bool ql_job_transition_legal(ql_state_t from, ql_state_t to);
bool ql_step_transition_legal(ql_state_t from, ql_state_t to);

/* REST display status: PENDING, RUNNING, ERROR, FINISHED, STOPPED, DISCARDED (static). */
const char *ql_job_display_status(ql_state_t s);
/* The job states a display status stands for, as a bit mask (1 << state); 0 when unknown. */
uint32_t ql_job_display_mask(const char *display);

typedef enum ql_action {
    QL_ACTION_PAUSE,
    QL_ACTION_RESUME,
    QL_ACTION_RESTART,
    QL_ACTION_DISCARD,
} ql_action_t;

const char *ql_action_name(ql_action_t a);
int ql_action_parse(const char *name, ql_action_t *out);
/* The actions table: whether a in a job of state s is allowed. */
bool ql_action_allowed(ql_action_t a, ql_state_t s);

/*
 * Moves job (decoded with extras, updated in place) to state `to` and writes it: checks the
 * transition, sets start/end/modify times, and for a final state applies the segment effects
 * (ql_meta_apply_job_outcome) in the same transaction. warned: a step finished WARNING.
 */
int ql_job_set_state(ql_txn_t *txn, ql_job_t *job, ql_state_t to, bool warned, int64_t now,
                     ql_err_t *err);
/* Moves a step (updated in place) to `to` and writes it, checking the transition. */
int ql_step_set_state(ql_txn_t *txn, ql_step_t *step, ql_state_t to, int64_t now, ql_err_t *err);

/*
 * Applies an action to a job in one transaction: the job's and its steps' states and the
 * segment effects. *was gets the job's state before (so the caller knows whether a step process
 * must be stopped). QL_EACTION (HTTP 409/400) names the action and the display state when the
 * table forbids it; QL_ENOTFOUND for an unknown job. The caller stops a RUNNING step's try only
 * after the commit, so the steps an action moves out of RUNNING keep their token, process group
 * and leader identity: a crash before the stop leaves them for the step's next try to sweep
 * (ql_proc.h, Markers). Every other transition out of RUNNING forgets them.
 */
int ql_job_apply_action(ql_txn_t *txn, const ql_id_t *job, ql_action_t action, int64_t now,
                        ql_state_t *was, ql_err_t *err);

/* Ends a live job SUICIDAL (its target is gone or going, docs/design/jobs.md): its unfinished
 * steps are DISCARDED, its NEW segment removed; a final job is left as it is. A RUNNING step's
 * process is stopped by the scheduler when it sees the job no longer RUNNING (ql_sched.h). */
int ql_job_end_suicidal(ql_txn_t *txn, const ql_id_t *job, int64_t now, ql_err_t *err);

/*
 * Removing metadata (docs/design/jobs.md, Deleting jobs; docs/rest.md): each call changes
 * everything in txn, so a failure leaves nothing half removed. Jobs deleted are appended to
 * deleted (may be NULL) for the caller to remove their step logs once txn committed
 * (ql_store_remove_job_logs); *discarded (may be NULL) gets how many live jobs were ended.
 */
typedef struct ql_id_list {
    ql_id_t *ids; /* owned: ql_id_list_free */
    size_t n, cap;
} ql_id_list_t;
int ql_id_list_add(ql_id_list_t *l, const ql_id_t *id); /* 0 or UV_ENOMEM */
void ql_id_list_free(ql_id_list_t *l);

/* Drops a model: its live jobs are discarded (as DISCARD does), then every job of the model is
 * deleted with its steps and outputs, then its segments and the model. QL_ENOTFOUND for an
 * unknown model. */
int ql_model_drop(ql_txn_t *txn, const ql_id_t *model, int64_t now, ql_id_list_t *deleted,
                  size_t *discarded, ql_err_t *err);
/* Drops a project with its models (ql_model_drop), segments and jobs. While it has live jobs the
 * call is refused with QL_EACTION naming them, unless discard_live: then they are discarded
 * first. QL_ENOTFOUND for an unknown project. */
int ql_project_drop(ql_txn_t *txn, const char *project, bool discard_live, int64_t now,
                    ql_id_list_t *deleted, size_t *discarded, ql_err_t *err);
/* Purges a model's segments, as Kylin does when a model's partition column or format changes:
 * its live jobs end SUICIDAL (their segments are going), then every segment is deleted; *purged
 * (may be NULL) gets how many. The model record is the caller's to rewrite. */
int ql_model_purge_segments(ql_txn_t *txn, const ql_id_t *model, int64_t now, size_t *purged,
                            size_t *ended, ql_err_t *err);

/* Ends a READY, PENDING or RUNNING job as if its steps had: SUCCEED (warned: with a WARNING
 * step) or ERROR. For the simulator's `job: finish`. */
int ql_job_force_finish(ql_txn_t *txn, const ql_id_t *job, ql_state_t outcome, bool warned,
                        int64_t now, ql_err_t *err);

/* Startup recovery: every RUNNING or PENDING job goes back to READY, and its RUNNING steps to
 * READY. Calls on_step (may be NULL) with each RUNNING or PENDING step as it was read, before
 * it is put back (its pgid, pg_start, boot_id, token and server_id still set; the step is
 * borrowed for the call), so the caller can kill what is left of the try when the try is its
 * host's (ql_step_host.h); the caller must have done so before it commits txn (see ql_proc.h,
 * Markers). on_step returns whether the step keeps its try's marker, group and boot id on the
 * READY record: true for a try of another host, which the caller could not sweep (no commit
 * forgets a marker whose processes may still run); false once the try is gone. *n gets the
 * number of jobs recovered. */
int ql_jobs_recover(ql_txn_t *txn, int64_t now, bool (*on_step)(const ql_step_t *step, void *arg),
                    void *arg, uint64_t *n, ql_err_t *err);
/* The same for one job (scheduler 2's failover: the job whose lock this server took over):
 * a RUNNING or PENDING job goes back to READY with its RUNNING steps, on_step as above;
 * *recovered tells whether it was one (a job in another state is left alone). */
int ql_job_recover_one(ql_txn_t *txn, const ql_id_t *id, int64_t now,
                       bool (*on_step)(const ql_step_t *step, void *arg), void *arg,
                       bool *recovered, ql_err_t *err);

/*
 * The encoded step definitions of a new job: the chain of `type` in template set `set` of
 * templates (or the given ad-hoc steps), ready to pass to the ql_meta_submit_* functions.
 */
typedef struct ql_job_steps {
    ql_step_spec_t *specs;
    size_t n;
    uint8_t **bufs; /* owned encodings */
} ql_job_steps_t;

int ql_job_steps_from_template(const ql_templates_t *t, const char *set, const char *type,
                               ql_job_steps_t *out, ql_err_t *err);
int ql_job_steps_from_defs(const ql_stepdef_t *defs, size_t n, ql_job_steps_t *out, ql_err_t *err);
void ql_job_steps_free(ql_job_steps_t *s);

/*
 * Job parameters: the custom parameters of an ad-hoc job (POST /jobs), stored with the job in
 * ql_job_t.params and given to each of its shell steps as ${NAME} and QILIN_PARAM_NAME. The
 * stored form is a msgpack map of string name -> string value, at most QL_TEMPLATE_MAX_PARAMS
 * entries, each name valid by ql_template_param_name_valid. The store keeps the bytes as they
 * are; this is their one encoder and their one decoder.
 */
/* Encodes params[0..n) (borrowed): *out gets a malloc'd buffer the caller frees (NULL and *len 0
 * when n is 0). Returns 0 or UV_ENOMEM. */
int ql_job_params_encode(const ql_kv_t *params, size_t n, char **out, size_t *len);
/* Decodes buf[0..len) (borrowed; NULL or empty: no parameters): *out gets *n entries, owned by
 * the caller (ql_job_params_free), NULL when there are none. Returns 0, QL_ECORRUPT (a stored
 * form that is not the above, err says what) or UV_ENOMEM; on error *out is NULL and *n 0. */
int ql_job_params_decode(const char *buf, size_t len, ql_kv_t **out, size_t *n, ql_err_t *err);
/* Frees kv[0..n) and the array (NULL is fine). */
void ql_job_params_free(ql_kv_t *kv, size_t n);

#endif
