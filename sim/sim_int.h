/*
 * Simulator internals shared by the sim_*.c files (not public; see ql_sim.h).
 *
 * A loaded scenario is plain data: the set-up as written (projects, models, segments and the
 * jobs that own NEW segments), the steps, and what the file configures (time zone, server
 * config, templates). Every name a step refers to (a model, a project) is resolved to an index
 * at load time, so a typo is an invalid file (exit 2), never a failed run.
 */
#ifndef QL_SIM_INT_H
#define QL_SIM_INT_H

#include "config/ql_config.h"
#include "server/ql_node.h"
#include "sim/ql_sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_ZONE_MAX 127
#define SIM_CODE_MAX 31
#define SIM_HOLDER_MAX 63

/* The job a set-up NEW segment has (`job: RUNNING` or `job: {type: ..., state: ...}`). */
typedef struct sim_job_def {
    bool present;
    char type[QL_TYPE_MAX + 1];
    ql_state_t state;
    char submitter[QL_USER_MAX + 1];
} sim_job_def_t;

typedef struct sim_seg_def {
    int64_t start, end;
    ql_seg_status_t status;
    sim_job_def_t job;
    uint32_t line;
} sim_seg_def_t;

typedef struct sim_project_def {
    char name[QL_NAME_MAX + 1];
    bool has_timezone;
    char timezone[SIM_ZONE_MAX + 1];
    bool enabled;
    uint32_t line;
} sim_project_def_t;

typedef struct sim_model_def {
    char name[QL_NAME_MAX + 1];
    size_t project; /* index into the scenario's projects */
    ql_model_type_t type;
    ql_model_status_t status;
    bool partitioned;
    char column[QL_COLUMN_MAX + 1];
    char format[QL_FORMAT_MAX + 1];
    char *multi_partition; /* owned, comma-joined; NULL: not multi-partition */
    ql_auto_build_t auto_build;
    char job_template[QL_NAME_MAX + 1];
    sim_seg_def_t *segs; /* owned */
    size_t n_segs;
    uint32_t line;
} sim_model_def_t;

typedef enum sim_step_kind {
    SIM_SCAN,
    SIM_ADVANCE,
    SIM_RUN,
    SIM_SET_TIME,
    SIM_RESTART,
    SIM_FAIL_SUBMISSIONS,
    SIM_BUILD,
    SIM_JOB,
    SIM_SET_PROJECT,
    SIM_SET_MODEL,
    SIM_LOCK,
    SIM_EXPECT,
} sim_step_kind_t;

typedef struct sim_cycle_exp {
    size_t model;
    bool has_state;
    ql_cycle_state_t state;
    bool has_target;
    int64_t start, end;
    bool has_reason;
    ql_skip_reason_t reason;
    bool has_occurrence;
    int64_t occurrence;
    bool has_from_cache;
    bool from_cache;
    uint32_t line;
} sim_cycle_exp_t;

typedef struct sim_job_exp {
    size_t model;
    bool none; /* `none: true`: the model has no job at all */
    bool has_type;
    char type[QL_TYPE_MAX + 1];
    bool has_state;
    ql_state_t state;
    bool has_range;
    int64_t start, end;
    bool has_submitter;
    char submitter[QL_USER_MAX + 1];
    uint32_t line;
} sim_job_exp_t;

typedef struct sim_seg_exp {
    size_t model;
    bool none; /* `none: true`: the model has no segment at all */
    int64_t start, end;
    ql_seg_status_t status;
    uint32_t line;
} sim_seg_exp_t;

typedef struct sim_expect {
    sim_cycle_exp_t *cycles; /* owned */
    size_t n_cycles;
    bool has_submitted;
    int64_t submitted;
    sim_job_exp_t *jobs; /* owned */
    size_t n_jobs;
    sim_seg_exp_t *segs; /* owned */
    size_t n_segs;
    /* server: the simulated server's role and the store's fencing epoch */
    bool has_master;
    bool master;
    bool has_epoch;
    int64_t epoch;
} sim_expect_t;

typedef struct sim_step {
    sim_step_kind_t kind;
    uint32_t line;
    int64_t ms;         /* ADVANCE, RUN: duration; SET_TIME: the instant; FAIL_SUBMISSIONS: count */
    size_t model;       /* BUILD, JOB, SET_MODEL */
    size_t project;     /* SET_PROJECT */
    int64_t start, end; /* BUILD: the requested range; JOB: the job's data range */
    /* BUILD */
    int priority;
    char expect_error[SIM_CODE_MAX + 1]; /* "" when no error is expected */
    /* JOB */
    bool is_finish;
    ql_action_t action;
    ql_state_t finish; /* SUCCEED or ERROR */
    bool warned;       /* finish: WARNING */
    /* SET_PROJECT */
    bool set_enabled;
    bool enabled;
    bool set_timezone;
    char timezone[SIM_ZONE_MAX + 1]; /* "" removes the project's own zone */
    /* SET_MODEL */
    bool set_auto_build;
    ql_auto_build_t auto_build;
    bool set_status;
    ql_model_status_t status;
    /* LOCK: the other server that takes the job engine lock; "" releases it */
    char holder[SIM_HOLDER_MAX + 1];
    /* EXPECT */
    sim_expect_t expect;
} sim_step_t;

struct ql_sim_scenario {
    char *file; /* owned: the name used in messages */
    char *name; /* owned */
    char zone[SIM_ZONE_MAX + 1];
    ql_tz_t *tz; /* owned: the file's time zone */
    int64_t start;
    ql_config_t *cfg;          /* owned */
    ql_templates_t *templates; /* owned */
    /* The first shell step of the templates (refused without --allow-shell). */
    uint32_t shell_line;
    char shell_desc[160];
    sim_project_def_t *projects; /* owned */
    size_t n_projects;
    sim_model_def_t *models; /* owned */
    size_t n_models;
    sim_step_t *steps; /* owned */
    size_t n_steps;
    /* The other server holding the job engine lock when the simulation starts, "" for none
     * (the top-level `lock:`). */
    char lock_holder[SIM_HOLDER_MAX + 1];
};

/* Parses one item of `steps:` (node borrowed) against sc's models and time zone into out
 * (owned by the caller: sim_step_clear). */
int sim_parse_step(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, sim_step_t *out,
                   ql_err_t *err);
void sim_step_clear(sim_step_t *s);

/* Parses the expect: mapping (sim_expect.c). */
int sim_parse_expect(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, sim_expect_t *out,
                     ql_err_t *err);
void sim_expect_clear(sim_expect_t *e);

/* Reading values the way every scenario key does (sim_scenario.c). */
int sim_parse_time(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, const char *what,
                   int64_t *out, ql_err_t *err);
int sim_parse_range(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, const char *what,
                    int64_t *start, int64_t *end, ql_err_t *err);
int sim_get_time(const ql_sim_scenario_t *sc, const ql_yaml_node_t *map, const char *key,
                 int64_t *out, ql_err_t *err);
int sim_copy_str(const ql_yaml_node_t *node, const char *what, char *buf, size_t cap,
                 ql_err_t *err);
/* Resolves `model:` (and `project:` when given) of map to a model index. */
int sim_resolve_model(const ql_sim_scenario_t *sc, const ql_yaml_node_t *map, size_t *out,
                      ql_err_t *err);
/* A stored auto_segment_build written as is (null: absent). */
int sim_parse_auto_build(const ql_yaml_node_t *node, ql_auto_build_t *out, ql_err_t *err);

/* Parses a `lock:` value (a step's or the top-level one): `{take: NAME}` sets holder to NAME,
 * `release` (steps only: allow_release) sets it to "" (sim_steps.c). */
int sim_parse_lock(const ql_yaml_node_t *v, bool allow_release, char *holder, size_t cap,
                   ql_err_t *err);

/* The simulation's job engine lock (sim_lock.c), shared by the simulated server and the other
 * servers of `lock:` steps. store is borrowed and must outlive it; free with ql_lock_free. */
int sim_lock_new(ql_store_t *store, ql_lock_t **out);
/* Another server (other, copied) takes the lock, raising the store's fencing epoch; QL_EINVAL
 * when another server already holds it. */
int sim_lock_take(ql_lock_t *lock, const char *other, ql_err_t *err);
/* The other server releases the lock; QL_EINVAL when none holds it. */
int sim_lock_release(ql_lock_t *lock, ql_err_t *err);

/* Writes the scenario's set-up into sim's fresh store in one transaction (sim_setup.c). */
int sim_setup(ql_sim_t *sim, ql_err_t *err);
/* Formats an instant as the file's "YYYY-MM-DD HH:mm:ss" with its UTC offset. */
void sim_format_time(const ql_sim_scenario_t *sc, int64_t ms, char *buf, size_t cap);

/* ---- the running simulation (sim_run.c), what sim_expect.c reads ---- */

struct ql_sim {
    const ql_sim_scenario_t *sc; /* borrowed */
    ql_sim_opts_t opts;
    char dir[4096]; /* the temporary data directory */
    /* The disk and the lock outlive the server: a restart is a new node on them. */
    ql_store_t *store;
    ql_lock_t *lock;
    ql_clock_t *clock;
    ql_log_t log;
    ql_node_t *node;     /* the simulated server, on the virtual clock with an inline writer */
    ql_writer_t *writer; /* the node's, kept here for the steps that write */
    int64_t interval_ms;
    const char *server_tz; /* borrowed from the scenario's config */
    int64_t fail_left;     /* submissions still to fail (fail_submissions) */
    ql_id_t *model_ids;    /* by model index */
    /* Every job the simulation saw created, in creation order (set-up, builds, dispatcher). */
    ql_id_t *created;
    size_t n_created, cap_created;
    uint64_t system_baseline; /* System INC_BUILD jobs present after the set-up */
    size_t step;              /* 1-based number of the step running, 0 during set-up */
    bool scan_ended;
};

/* The simulated server's scheduler and dispatcher while it is the master, else NULL. */
ql_sched_t *sim_sched(ql_sim_t *sim);
ql_dispatcher_t *sim_dispatcher(ql_sim_t *sim);
/* Checks one expect: step (sim_expect.c). Fills res on a failure. */
int sim_check_expect(ql_sim_t *sim, const sim_step_t *st, ql_sim_result_t *res);
/* INC_BUILD jobs submitted by System in the store, over every model of the scenario. */
int sim_count_system_builds(ql_sim_t *sim, ql_txn_t *txn, uint64_t *out);
/* Creation rank of a job (index in sim->created), SIZE_MAX when unknown. */
size_t sim_created_rank(const ql_sim_t *sim, const ql_id_t *job);
/* Records that job was created now (the order sim_created_rank reports). */
void sim_note_created(ql_sim_t *sim, const ql_id_t *job);
/* Appends a line to res->msg (keeps what fits). */
void sim_res_append(ql_sim_result_t *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
