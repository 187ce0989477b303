/*
 * A job server's engine on a libuv loop: the store, the writer thread, the real clock, the job
 * templates, and, when the server's mode runs jobs and it holds the job engine lock, the
 * scheduler and the dispatcher. qilind wraps one with the REST API; tests and benchmarks use
 * one directly.
 *
 * DESIGN.
 * - Threads: everything but the writer runs on the loop thread. The writer's answers reach the
 *   loop through a uv_async_t (coalescing: one wake-up drains every ready answer).
 * - Modes (docs/design/cluster.md): `query` only: no scheduler, no dispatcher, writes are refused
 * by the API; `all`/`job`: the node tries the job engine lock at start and then every second while
 *   it is a standby, logging who holds it; it schedules (recovery first) once it holds it.
 * - Stopping: no new picks, running steps paused or waited for (qilin.shutdown.running-steps;
 *   with `wait`, for qilin.shutdown.grace-ms at most, then they are paused anyway), the writer
 *   drained, handles closed; then the done callback runs.
 */
#ifndef QL_NODE_H
#define QL_NODE_H

#include "config/ql_config.h"
#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_lock.h"
#include "scheduler/ql_sched.h"

typedef struct ql_node ql_node_t;

typedef struct ql_node_opts {
    const ql_config_t *config; /* borrowed; must outlive the node */
    uv_loop_t *loop;           /* borrowed */
    ql_log_t *log;             /* borrowed, may be NULL */
    const char *exec_helper;   /* path of qilin-exec; NULL: next to the running executable */
    const char *config_dir;    /* relative template paths are resolved from here; NULL: cwd */
} ql_node_opts_t;

/* Opens the store and starts the engine. On failure *out is NULL and err says why (a bad
 * template file names file:line; a store of a newer version is refused). */
int ql_node_start(const ql_node_opts_t *opts, ql_node_t **out, ql_err_t *err);
/* Graceful stop; done (may be NULL) runs on the loop when everything is closed and the node is
 * freed. */
void ql_node_stop(ql_node_t *n, void (*done)(void *arg), void *arg);

ql_store_t *ql_node_store(ql_node_t *n);
ql_writer_t *ql_node_writer(ql_node_t *n);
ql_clock_t *ql_node_clock(ql_node_t *n);
const ql_templates_t *ql_node_templates(ql_node_t *n);
const ql_config_t *ql_node_config(ql_node_t *n);
ql_log_t *ql_node_log(ql_node_t *n);
/* NULL unless this node schedules (mode all/job and the lock is held). */
ql_sched_t *ql_node_sched(ql_node_t *n);
ql_dispatcher_t *ql_node_dispatcher(ql_node_t *n);
/* Whether this node is the job-scheduler master (holds the job engine lock). */
bool ql_node_is_master(const ql_node_t *n);
/* Who holds the lock when this node does not ("" when it does or it never looked). */
const char *ql_node_lock_holder(const ql_node_t *n);

/* Tells the scheduler (if any) that a job may be ready: call after a submission or resume. */
void ql_node_kick(ql_node_t *n);

/* The scheduler's and the dispatcher's options that come from the server's configuration cfg
 * (borrowed; the strings set point into it and are valid while it lives): the job limits, the
 * fetcher's poll interval, retries, the output cap, the step kill grace, the dispatcher's
 * interval and the server's time zone. The one place these keys become options: the node and
 * whoever builds a scheduler or dispatcher that must decide like a server's use it. Every other
 * field is left as it was (the store, writer, clock, templates, hooks and fencing are the
 * caller's). Either out may be NULL. */
void ql_node_engine_opts(const ql_config_t *cfg, ql_sched_opts_t *sched,
                         ql_dispatcher_opts_t *disp);

#endif
