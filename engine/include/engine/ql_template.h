/*
 * Job templates: the step definitions a job is made of, where they come from (conf/jobs.yaml,
 * a scenario's `templates:`, an ad-hoc job definition), how a step's argv/env/cwd get the
 * job's parameters, and how a step definition is stored with its job.
 *
 * DESIGN. Loading is strict and happens before anything runs: every unknown key, missing or
 * mistyped field, unknown step kind, key that belongs to another kind and unknown ${NAME}
 * fails the whole load with "file:line: reason". A loaded ql_templates_t is immutable and owns
 * deep copies of everything (the YAML document is freed after loading), so it may be shared by
 * threads and swapped atomically by whoever reloads it.
 *
 * A job snapshots its chain at submit time: each ql_stepdef_t is encoded with
 * ql_stepdef_encode() into an opaque blob kept beside the step record, so editing jobs.yaml
 * never changes a job already submitted. Parameters are substituted only when a step is about
 * to run (ql_template_expand_step), because QILIN_STEP_ID and the runner's environment are
 * known only then.
 *
 * File format (docs/job-templates.md has the full reference):
 *
 *   templates:                  # the default set: job type -> chain
 *     INC_BUILD:
 *       description: ...        # optional
 *       params: [TABLE]         # optional: custom parameters the chain may use as ${TABLE}
 *       steps: [ {name: ..., kind: shell, argv: [...]}, ... ]
 *   template_sets:              # optional: set name -> job type -> chain
 *     spark:
 *       INC_BUILD: {steps: [...]}
 *
 * A model's `job_template: spark` picks the set `spark`; job types the set lacks fall back to
 * the default set. An empty name or "default" is the default set itself.
 *
 * Substitution: in argv elements, env values and cwd, `${NAME}` is replaced by the value of
 * parameter NAME and `$${` is a literal `${`. Anything else, including `$NAME` and `$$`, is
 * kept as written (so `sh -c` scripts can read parameters from the environment). A value is
 * inserted verbatim and never re-parsed: quotes, `;`, `$(...)` or backticks in a value stay
 * data inside the one argv element that referenced it.
 */
#ifndef QL_TEMPLATE_H
#define QL_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ql_error.h"
#include "base/ql_yaml.h"
#include "storage/ql_records.h"

/* A chain has at most QL_JOB_STEPS_MAX steps and a job type at most QL_TYPE_MAX characters
 * (storage/ql_records.h owns both limits: they are the sizes of the job's records). */
/* Custom parameters of one job at most. */
#define QL_TEMPLATE_MAX_PARAMS 64
/* Version written by ql_stepdef_encode(); bumped only for incompatible changes (additions are
 * new fields, which older decoders ignore). */
#define QL_STEPDEF_VERSION 1

typedef enum ql_step_kind {
    QL_STEP_SHELL, /* runs argv as a child process (no shell unless argv says sh -c) */
    QL_STEP_NOOP,  /* succeeds at once */
    QL_STEP_SLEEP, /* succeeds after `duration` */
    QL_STEP_FAIL,  /* ends in ERROR with `message` */
    QL_STEP_WARN,  /* ends in WARNING with `message` (the job still succeeds) */
} ql_step_kind_t;

/* "shell", "noop", ... (static). */
const char *ql_step_kind_name(ql_step_kind_t kind);
/* Parses a kind name (borrowed); 0 or QL_EINVAL. */
int ql_step_kind_parse(const char *name, ql_step_kind_t *out);

/* A name and a value, both owned by whatever holds the ql_kv_t. */
typedef struct ql_kv {
    char *name;
    char *value;
} ql_kv_t;
/* Frees the names and values of the n entries at kv, then kv itself (NULL: nothing). */
void ql_kv_free(ql_kv_t *kv, size_t n);

/* A parameter for substitution; both strings borrowed for the duration of the call. */
typedef struct ql_param {
    const char *name;
    const char *value;
} ql_param_t;

/* One condition of a step's `when`: the step runs only if parameter `param` has one of the
 * values (compared as strings). Owned by whatever holds it. */
typedef struct ql_when {
    char *param;
    char **values; /* NULL-terminated, n_values >= 1 */
    size_t n_values;
} ql_when_t;

/*
 * One step definition. Every pointer member is owned by the struct (ql_stepdef_clear frees
 * them). Fields that do not apply to the kind are zero/NULL (or -1 where -1 means "unset").
 */
typedef struct ql_stepdef {
    char *name;
    ql_step_kind_t kind;
    /* shell */
    char **argv; /* NULL-terminated, argc >= 1 */
    size_t argc;
    ql_kv_t *env; /* extra environment; names never start with QILIN_ */
    size_t n_env;
    char *cwd;                 /* NULL: the runner's default */
    int64_t timeout_ms;        /* 0: no timeout */
    int32_t retries;           /* -1: kylin.job.retry */
    int64_t retry_interval_ms; /* -1: kylin.job.retry-interval */
    int32_t warning_exit_code; /* 0: none; else 1..255 means WARNING */
    /* sleep */
    int64_t duration_ms;
    /* fail, warn; NULL: a default message */
    char *message;
    /* every kind: virtual duration in the simulator; -1: unset (see ql_stepdef_sim_duration) */
    int64_t sim_duration_ms;
    /* every kind: the step runs only when all of these hold, else it is SKIPped */
    ql_when_t *when;
    size_t n_when;
} ql_stepdef_t;

/* Sets s to an empty definition with the "unset" values (-1) in place. */
void ql_stepdef_init(ql_stepdef_t *s);
/* Frees what s owns and re-initialises it. */
void ql_stepdef_clear(ql_stepdef_t *s);
/* Deep-copies src (borrowed) into dst (initialised by the call; the caller owns the copy). */
int ql_stepdef_copy(const ql_stepdef_t *src, ql_stepdef_t *dst);
/*
 * `when` (template_when.c). A step's `when:` maps parameter names (QILIN_* or the chain's
 * declared params) to a value or a list of values; the step runs only if every named parameter
 * has one of its values when the step is due, and is SKIPped otherwise (docs/design/jobs.md: READY
 * -> SKIP when a template condition skips it).
 */
/* Parses node (the value of `when`, borrowed) into out->when. */
int ql_when_load(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                 ql_stepdef_t *out, ql_err_t *err);
/* Frees n conditions and the array. */
void ql_when_free(ql_when_t *w, size_t n);
/* Deep-copies src's conditions into dst (whose when is empty). */
int ql_when_copy(const ql_stepdef_t *src, ql_stepdef_t *dst);
/* The first condition of s that the parameters (borrowed) do not meet, or NULL when the step
 * runs. *value gets the parameter's value ("" when it has none). */
const ql_when_t *ql_when_unmet(const ql_stepdef_t *s, const ql_param_t *params, size_t n,
                               const char **value);

/* The simulated duration: sim_duration when set, else `duration` for sleep, else 0. */
int64_t ql_stepdef_sim_duration(const ql_stepdef_t *s);

/*
 * Parses one step mapping (borrowed) into out (initialised by the call; owned by the caller on
 * success, left cleared on failure). declared (borrowed, n_declared entries, may be NULL) are
 * the custom parameter names ${NAME} may use besides the well-known QILIN_* ones.
 */
int ql_stepdef_from_node(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                         ql_stepdef_t *out, ql_err_t *err);

/*
 * Parses steps (borrowed), a non-empty sequence of at most QL_JOB_STEPS_MAX step
 * mappings, with ql_stepdef_from_node. *out is a new array of *n definitions owned by the
 * caller (ql_stepdef_clear each, then free the array).
 */
int ql_template_load_steps(const ql_yaml_node_t *steps, const char *const *declared,
                           size_t n_declared, ql_stepdef_t **out, size_t *n, ql_err_t *err);

/*
 * Checks the ${NAME} references of s (borrowed): each must be well-formed and name a
 * well-known parameter or one of declared (borrowed, n_declared). Fails with
 * "file:line: <what>: reason" at node at (borrowed).
 */
int ql_template_check_refs(const ql_yaml_node_t *at, const char *what, const char *s,
                           const char *const *declared, size_t n_declared, ql_err_t *err);

/* The chain of steps of one job type. Owns everything it points to. */
typedef struct ql_chain {
    char *job_type;
    char *description; /* NULL when absent */
    char **params;     /* declared custom parameter names, NULL-terminated (may be empty) */
    size_t n_params;
    ql_stepdef_t *steps; /* 1..QL_JOB_STEPS_MAX */
    size_t n_steps;
} ql_chain_t;

typedef struct ql_template_set {
    char *name; /* NULL for the default set */
    ql_chain_t *chains;
    size_t n_chains;
} ql_template_set_t;

typedef struct ql_templates {
    char *source; /* file or document name the templates were loaded from */
    ql_template_set_t defaults;
    ql_template_set_t *sets;
    size_t n_sets;
} ql_templates_t;

/*
 * Loaders. On success *out is new and owned by the caller (ql_templates_free); nothing is
 * allocated on failure. Errors: QL_EINVAL with "file:line: reason", the read errors of
 * ql_yaml_load_file, UV_ENOMEM.
 */
/* The file at path (borrowed), the format above. */
int ql_templates_load_file(const char *path, ql_templates_t **out, ql_err_t *err);
/* The same from a buffer (borrowed), named name (borrowed) in messages. */
int ql_templates_load_buffer(const char *buf, size_t len, const char *name, ql_templates_t **out,
                             ql_err_t *err);
/* A whole document's root (borrowed): a mapping with `templates:` and `template_sets:`. */
int ql_templates_load_root(const ql_yaml_node_t *root, ql_templates_t **out, ql_err_t *err);
/*
 * For documents that embed templates (simulation scenarios): templates is the value of a
 * `templates:` key (job type -> chain), sets that of a `template_sets:` key or NULL. Both
 * borrowed.
 */
int ql_templates_load_nodes(const ql_yaml_node_t *templates, const ql_yaml_node_t *sets,
                            ql_templates_t **out, ql_err_t *err);
/* Frees t and everything it owns. NULL is a no-op. */
void ql_templates_free(ql_templates_t *t);

/* True when set is NULL, "", "default" or the name of one of t's template sets. */
bool ql_templates_has_set(const ql_templates_t *t, const char *set);
/*
 * The chain for job_type in set (NULL, "" or "default": the default set), falling back to the
 * default set when the set lacks the type. *out is borrowed from t. QL_ENOTFOUND when the set
 * does not exist or neither has the type (the message names both).
 */
int ql_templates_find(const ql_templates_t *t, const char *set, const char *job_type,
                      const ql_chain_t **out, ql_err_t *err);

/* True when name (borrowed) is a valid job type name: [A-Z][A-Z0-9_]{0,63}, the store's rule
 * (ql_meta_check_job_type). */
bool ql_job_type_valid(const char *name);

/* The well-known parameter names, NULL-terminated: QILIN_JOB_ID, QILIN_JOB_TYPE,
 * QILIN_PROJECT, QILIN_MODEL, QILIN_SEGMENT_ID, QILIN_SEGMENT_START, QILIN_SEGMENT_END,
 * QILIN_SEGMENT_START_FMT, QILIN_SEGMENT_END_FMT, QILIN_STEP_ID, QILIN_YARN_QUEUE, QILIN_TAG
 * (Kylin's yarn_queue and tag of the request that made the job; "" when it gave none). */
extern const char *const ql_template_wellknown[];

/* True when name is a valid custom parameter name: [A-Za-z_][A-Za-z0-9_]{0,63}, not
 * starting with QILIN_ (reserved for the well-known ones). */
bool ql_template_param_name_valid(const char *name);

/*
 * Substitutes ${NAME} in in (borrowed) with params (borrowed, n entries) and turns $${ into
 * ${. *out is a new string owned by the caller (free). QL_EINVAL when a ${ is unterminated,
 * a name is malformed or has no parameter.
 */
int ql_template_subst(const char *in, const ql_param_t *params, size_t n, char **out,
                      ql_err_t *err);

/* What a runner needs to start a step. Owns every string and array. */
typedef struct ql_step_exec {
    char **argv; /* NULL-terminated; NULL for kinds other than shell */
    size_t argc;
    /* NULL-terminated "NAME=value" entries to add to the runner's base environment: every
     * parameter (well-known ones as QILIN_*, custom NAME as QILIN_PARAM_NAME), then the step's
     * own env. */
    char **envp;
    size_t n_env;
    char *cwd; /* NULL when the step has none */
} ql_step_exec_t;

/*
 * Expands step (borrowed) with params (borrowed; the caller passes every well-known one it
 * knows, "" for those that do not apply, e.g. the segment of an INDEX_BUILD, plus a job's
 * custom parameters; names must be unique). On success out (overwritten) owns new memory:
 * release it with ql_step_exec_free. QL_EINVAL names the step and the parameter without a
 * value.
 */
int ql_template_expand_step(const ql_stepdef_t *step, const ql_param_t *params, size_t n,
                            ql_step_exec_t *out, ql_err_t *err);
/* Frees what e owns and zeroes it. */
void ql_step_exec_free(ql_step_exec_t *e);

/*
 * Serialises s (borrowed) as a msgpack map keyed by field names, with "v" =
 * QL_STEPDEF_VERSION. *buf is new (malloc), owned by the caller; *len its size.
 */
int ql_stepdef_encode(const ql_stepdef_t *s, uint8_t **buf, size_t *len);
/*
 * Decodes len bytes at buf (borrowed) into out (initialised by the call; owned by the caller
 * on success, cleared on failure). Unknown fields are ignored. QL_ECORRUPT when the bytes are
 * not a valid definition (the message says why), QL_EVERSION when "v" is newer than
 * QL_STEPDEF_VERSION. err may be NULL.
 */
int ql_stepdef_decode(const uint8_t *buf, size_t len, ql_stepdef_t *out, ql_err_t *err);

/*
 * An ad-hoc job definition (POST /jobs), YAML or JSON:
 *   {project: p1, model: m1, type: MY_EXPORT, priority: 2, params: {KEY: value}, steps: [...]}
 * project and type are required; model is optional; priority is 0..4 (default 3); params map
 * names (ql_template_param_name_valid) to scalar values, used as ${KEY} in the steps and
 * given to every step as the environment variable QILIN_PARAM_KEY; steps is optional: without
 * it the job runs the template chain of its type (see ql_chain_check_params). Every string is
 * owned by the struct.
 */
typedef struct ql_adhoc_job {
    char *project;
    char *model; /* NULL when absent */
    char *type;
    int priority;
    ql_kv_t *params;
    size_t n_params;
    ql_stepdef_t *steps; /* n_steps == 0: use the template chain of type */
    size_t n_steps;
} ql_adhoc_job_t;

/*
 * Parses len bytes at buf (borrowed) named source_name (borrowed, e.g. "<request body>") in
 * messages. out is initialised by the call and owned by the caller on success
 * (ql_adhoc_job_clear); cleared on failure. Errors as the template loaders.
 */
int ql_adhoc_parse(const char *buf, size_t len, const char *source_name, ql_adhoc_job_t *out,
                   ql_err_t *err);
/* Frees what job owns and zeroes it. */
void ql_adhoc_job_clear(ql_adhoc_job_t *job);

/*
 * Checks that params (borrowed, n entries) supply exactly the custom parameters chain declares:
 * QL_EINVAL names a missing or an undeclared one.
 */
int ql_chain_check_params(const ql_chain_t *chain, const ql_kv_t *params, size_t n, ql_err_t *err);

#endif
