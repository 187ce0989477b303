/*
 * The simulation harness behind `qilin sim` (docs/design/scenarios.md, docs/simulation.md): a
 * scenario file runs the REAL server (the node of server/ql_node.h: its scheduler, dispatcher,
 * job engine lock, fencing, server mode and store) on a virtual clock, in a fresh temporary
 * store, driven by the scenario's steps, and checks expectations.
 *
 * DESIGN.
 * - The server is a node started with the simulation's clock, store and lock, an inline writer
 *   and driver_scans; the store (the disk) and the lock (shared with the other servers that
 *   `lock:` steps name) belong to the simulation and outlive the node, so `restart` is one node
 *   aborted and a new one started on them.
 * - Determinism: the store is opened with a fixed id seed, the node's writer is inline (every
 *   commit happens in the simulator's own thread, at a point the clock's order decides), every
 *   timer and every log line use the virtual clock, and nothing reads the real time. The same
 *   file gives the same ids, decisions and output on every run.
 * - Loading (ql_sim_scenario_load_*) is strict and complete before anything runs: unknown keys
 *   at any depth, bad times, unknown models, config keys the server's config table does not
 *   know, and template errors all fail with "file:line: reason" (exit 2 of `qilin sim`).
 * - Running (ql_sim_new + ql_sim_exec, or ql_sim_run) writes the set-up as is in one write
 *   transaction, then executes the steps in order. A step that fails (an expectation that does
 *   not hold, an action the job's state refuses, an unexpected build error) reports the step
 *   number, what was expected and what was found (exit 1).
 * - `run:` drives the scans itself at the dispatcher's fixed-delay instants (a scan at the run's
 *   first instant, then one `interval` after the previous scan ended; scans take no virtual
 *   time), so that at every instant the order is exactly: the scheduler (every timer due at that
 *   instant, to quiescence), the scan, the scheduler again. The scan is the dispatcher's own
 *   ql_dispatcher_scan().
 * - Threads: everything runs on the caller's thread; a ql_sim_t is used by one thread at a time.
 *   Hooks run on that thread, inside the step that triggers them.
 */
#ifndef QL_SIM_H
#define QL_SIM_H

#include "engine/engine.h"
#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_sched.h"
#include "server/ql_node.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Result statuses, which are also the exit codes of `qilin sim`. */
enum {
    QL_SIM_PASS = 0,    /* every expectation held */
    QL_SIM_FAIL = 1,    /* a step failed: an expectation, a refused action, an unexpected error */
    QL_SIM_INVALID = 2, /* the file is invalid, or the simulation could not be set up */
};

typedef struct ql_sim_result {
    int status;     /* QL_SIM_* */
    size_t step;    /* 1-based number of the step that failed; 0: loading or set-up */
    uint32_t line;  /* that step's line in the file, 0 when none */
    char msg[4096]; /* "file:line: reason" for INVALID; the mismatches, one a line, for FAIL */
} ql_sim_result_t;

typedef struct ql_sim ql_sim_t;
typedef struct ql_sim_scenario ql_sim_scenario_t;

typedef struct ql_sim_opts {
    bool allow_shell; /* shell steps "run": they succeed after their sim_duration */
    FILE *trace;      /* borrowed, NULL: no trace; one line per model per scan */
    bool json;        /* the trace as JSON lines */
    FILE *log_out;    /* borrowed, NULL: no log lines; log lines carry virtual time */
    ql_log_level_t log_level;
    const char *tmp_dir; /* where the temporary store is made; NULL: $TMPDIR, else /tmp */
    /* NULL: the store is LMDB, in the temporary directory. Otherwise a PostgreSQL URL or
     * conninfo (borrowed): the store is a fresh schema there, named after the temporary
     * directory (qilin_sim_XXXXXX), dropped when the simulation is freed. The output is the same
     * on both backends (tests/sim/test_sim_differential.c). */
    const char *store_url;
    /* The LMDB store's map size in bytes; 0: 256 MiB (long simulations, tools/bench_retention.c,
     * need more). */
    uint64_t map_size;
    /* Hooks for tests (each may be NULL; arg is hook_arg). before_scan and after_scan run
     * around every dispatcher scan (scan steps and the scans of run steps); on_decision gets
     * each decision of a scan (borrowed for the call). */
    void (*before_scan)(void *arg, ql_sim_t *sim);
    void (*after_scan)(void *arg, ql_sim_t *sim);
    void (*on_decision)(void *arg, ql_sim_t *sim, const ql_decision_t *d);
    void *hook_arg;
} ql_sim_opts_t;

/* ---- scenarios ---- */

/*
 * Loads the scenario file at path (borrowed; the name used in messages). On success *out is
 * owned by the caller (ql_sim_scenario_free). Errors: QL_EINVAL with "file:line: reason", the
 * read errors of ql_yaml_load_file, UV_ENOMEM.
 */
int ql_sim_scenario_load_file(const char *path, ql_sim_scenario_t **out, ql_err_t *err);
/* The same from len bytes at buf (borrowed), named name (borrowed) in messages. */
int ql_sim_scenario_load_buffer(const char *buf, size_t len, const char *name,
                                ql_sim_scenario_t **out, ql_err_t *err);
void ql_sim_scenario_free(ql_sim_scenario_t *sc);
/* The scenario's name: and file name (borrowed from sc). */
const char *ql_sim_scenario_name(const ql_sim_scenario_t *sc);
const char *ql_sim_scenario_file(const ql_sim_scenario_t *sc);
size_t ql_sim_scenario_steps(const ql_sim_scenario_t *sc);

/* ---- running ---- */

/*
 * Creates a simulation of sc (borrowed; it must outlive the simulation) with opts (copied;
 * NULL: defaults): a temporary store, the virtual clock at the scenario's start, the writer,
 * the scheduler and the dispatcher, and the set-up written in one transaction. Returns
 * QL_SIM_PASS with *out owned by the caller (ql_sim_free), or QL_SIM_INVALID with res (may be
 * NULL) saying why and *out NULL.
 */
int ql_sim_new(const ql_sim_scenario_t *sc, const ql_sim_opts_t *opts, ql_sim_t **out,
               ql_sim_result_t *res);
/* Frees everything and removes the temporary store. NULL is a no-op. */
void ql_sim_free(ql_sim_t *sim);

/* Executes step i (0-based) of the scenario. Returns the status, details in res (may be NULL). */
int ql_sim_exec(ql_sim_t *sim, size_t i, ql_sim_result_t *res);
/*
 * Parses len bytes at buf (borrowed) as ONE step, written as an item of `steps:` would be
 * ("scan", "{advance: 90s}", "{job: {model: m1, range: [...], action: PAUSE}}"), against the
 * scenario's models and time zone, and executes it. For tests that choose each step from the
 * current state. An unparsable step is QL_SIM_INVALID.
 */
int ql_sim_exec_buffer(ql_sim_t *sim, const char *buf, size_t len, ql_sim_result_t *res);

/* Loads nothing: runs every step of sc in a fresh simulation and frees it. The status of the
 * first step that failed (res says which), or QL_SIM_PASS. */
int ql_sim_run(const ql_sim_scenario_t *sc, const ql_sim_opts_t *opts, ql_sim_result_t *res);
/* Loads the file at path and runs it: QL_SIM_INVALID when it does not load. */
int ql_sim_run_file(const char *path, const ql_sim_opts_t *opts, ql_sim_result_t *res);

/* ---- what a running simulation is made of (borrowed, valid until the next restart step for
 * the writer, until the server stops being the master or the next restart step for the
 * scheduler and dispatcher, which are NULL while it is not the master (a standby, a query
 * server), and until ql_sim_free for the rest) ---- */

ql_store_t *ql_sim_store(ql_sim_t *sim);
/* The simulated server (valid until the next restart step). */
ql_node_t *ql_sim_node(ql_sim_t *sim);
ql_clock_t *ql_sim_clock(ql_sim_t *sim);
ql_writer_t *ql_sim_writer(ql_sim_t *sim);
ql_sched_t *ql_sim_sched(ql_sim_t *sim);
ql_dispatcher_t *ql_sim_dispatcher(ql_sim_t *sim);
const ql_templates_t *ql_sim_templates(const ql_sim_t *sim);
/* The options the simulation's dispatcher was created with, hooks excluded (so a test can make
 * a second dispatcher on the same store that decides exactly like it). */
void ql_sim_dispatcher_opts(const ql_sim_t *sim, ql_dispatcher_opts_t *out);
/* The id of a set-up model (project may be NULL when the name is unique). QL_ENOTFOUND. */
int ql_sim_model_id(const ql_sim_t *sim, const char *project, const char *model, ql_id_t *out);
/* Number of models of the scenario, and the project, name and id of model i. */
size_t ql_sim_models(const ql_sim_t *sim);
void ql_sim_model_at(const ql_sim_t *sim, size_t i, const char **project, const char **name,
                     ql_id_t *id);

#endif
