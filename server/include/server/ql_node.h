/*
 * A job server's engine on a clock: the store, the writer, the job templates, the submission
 * service, and, when the server's mode runs jobs and it holds the job engine lock, the scheduler
 * and the dispatcher. qilind wraps one with the REST API on the real clock; the simulator
 * (docs/simulation.md) runs one on a virtual clock with an inline writer; tests and benchmarks
 * use one directly.
 *
 * DESIGN.
 * - Threads: everything but a threaded writer runs on the clock's thread (the loop thread of the
 *   real clock, the driver's thread for a virtual one). A threaded writer's answers reach the
 *   loop through a uv_async_t (coalescing: one wake-up drains every ready answer). An inline
 *   writer commits on the clock's thread only, when it is flushed: by the scheduler at the next
 *   turn of the clock after it queued something, by the dispatcher at the end of a scan's
 *   submissions, by the driver (ql_writer_call flushes; ql_writer_flush). On a virtual clock
 *   the node is then deterministic: the same driver steps give the same commits in the same
 *   order.
 * - Modes (docs/design/cluster.md): `query` only: no scheduler, no dispatcher, writes are refused
 *   by the API; `all`/`job`: the node tries the job engine lock at start and then every second
 *   (of its clock) while it is a standby, logging who holds it; it schedules (recovery first)
 *   once it holds it. The master checks every second that it still holds it (the lock, and the
 *   store's fencing epoch against its token), and at once when a write of its was refused by
 *   fencing; when the holding is over it stops the scheduler and the dispatcher and goes back
 *   to standby. Scheduler 2 (docs/zookeeper.md, Scheduler 2) differs: every job server runs its
 *   own scheduler from start to stop, each job under a ZooKeeper lock of its own
 *   (server/node_dist.c), and the election's leader adds only the dispatcher and retention.
 * - Stopping: no new picks, running steps paused or waited for (qilin.shutdown.running-steps;
 *   with `wait`, for qilin.shutdown.grace-ms at most, then they are paused anyway), the writer
 *   drained, handles closed; then the done callback runs. ql_node_abort is the process dying
 *   instead: nothing more is written by the scheduler.
 * - What the node borrows (a store, a clock, a lock, templates) outlives it: a store is the
 *   disk and a lock is shared with other servers, so a driver can stop one node and start
 *   another on them, as a restarted process would find them.
 */
#ifndef QL_NODE_H
#define QL_NODE_H

#include "config/ql_config.h"
#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_lock.h"
#include "scheduler/ql_retention.h"
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submission.h"

typedef struct ql_node ql_node_t;

typedef enum ql_node_writer_mode {
    /* The writer thread commits (group commit); answers run on the loop (the default). */
    QL_NODE_WRITER_THREAD = 0,
    /* A manual writer: commits run on the clock's thread when it is flushed (see the DESIGN).
     * For a virtual clock, where the driver decides when everything happens. */
    QL_NODE_WRITER_INLINE,
} ql_node_writer_mode_t;

/* What a driver (the simulator, tests) hangs on the node's dispatcher. Each may be NULL; arg
 * is passed to each. They run on the clock's thread and the node keeps them across the
 * dispatchers it makes (every takeover makes a new one). */
typedef struct ql_node_hooks {
    /* Each job the dispatcher created (after the node kicked its scheduler). */
    void (*on_submitted)(void *arg, const ql_id_t *job);
    /* Each decision of each scan (borrowed for the call). */
    void (*on_decision)(void *arg, const ql_decision_t *d);
    /* Fault injection: nonzero fails this dispatcher submission as a transient error. */
    int (*submit_fault)(void *arg);
    void *arg;
} ql_node_hooks_t;

typedef struct ql_node_opts {
    const ql_config_t *config; /* borrowed; must outlive the node */
    uv_loop_t *loop;           /* borrowed; NULL only with a given virtual clock and the inline
                                  writer */
    ql_log_t *log;             /* borrowed, may be NULL */
    const char *exec_helper;   /* path of qilin-exec; NULL: next to the running executable */
    int proc_drain_ms;         /* the schedulers' wait for what their sweeps killed
                                  (ql_sched_opts_t.proc_drain_ms); 0: QL_PROC_DRAIN_MS. Tests */
    const char *config_dir;    /* relative template paths are resolved from here; NULL: cwd */
    /* Borrowed, must outlive the node; NULL: the node makes its own. */
    ql_clock_t *clock;               /* NULL: the real clock on loop */
    ql_store_t *store;               /* NULL: qilin.storage.path, opened with its settings */
    ql_lock_t *lock;                 /* NULL: the node's own (ql_lock.h): with
                                        kylin.env.zookeeper-connect-string the ZooKeeper lock
                                        (scheduler 0) or election (100), on loop; else the data
                                        directory's file lock on LMDB, the advisory lock on
                                        PostgreSQL. The node releases what it holds when it
                                        stops or aborts, and sets the lock's changed hook */
    const ql_templates_t *templates; /* NULL: loaded from qilin.jobs.templates */
    ql_node_writer_mode_t writer;
    /* The dispatcher's fixed-delay timer is not started: the driver runs every scan itself
     * (ql_dispatcher_scan on ql_node_dispatcher). The simulator does, to put each scan after
     * every timer due at its instant (docs/simulation.md, run:), which a timer of its own on
     * the same clock could not guarantee. */
    bool driver_scans;
    ql_node_hooks_t hooks;
} ql_node_opts_t;

/* Opens the store (unless given) and starts the engine. On failure *out is NULL and err says
 * why (a bad template file names file:line; a store of a newer version is refused; a job server
 * refuses scheduler 2, scheduler 100 without a ZooKeeper connect string, and a
 * qilin.cluster.suspend-kill-ms not shorter than the session timeout, naming the key). With a
 * ZooKeeper lock the node is a standby when this returns, and becomes the master when its
 * lock's event arrives. */
int ql_node_start(const ql_node_opts_t *opts, ql_node_t **out, ql_err_t *err);
/* Graceful stop; done (may be NULL) runs on the loop when everything is closed and the node is
 * freed. */
void ql_node_stop(ql_node_t *n, void (*done)(void *arg), void *arg);
/* The process dies here: the dispatcher and the scheduler are freed at once (running step
 * processes are stopped, steps in flight are forgotten and stay RUNNING in the store for the
 * next master's recovery), the lock is released as a dead process's is, what the writer still
 * has queued is applied, and the node is freed; done (may be NULL) runs then: before this
 * returns on a virtual clock, once the loop has closed the node's handles on the real one. */
void ql_node_abort(ql_node_t *n, void (*done)(void *arg), void *arg);

ql_store_t *ql_node_store(ql_node_t *n);
ql_writer_t *ql_node_writer(ql_node_t *n);
ql_clock_t *ql_node_clock(ql_node_t *n);
const ql_templates_t *ql_node_templates(ql_node_t *n);
const ql_config_t *ql_node_config(ql_node_t *n);
ql_log_t *ql_node_log(ql_node_t *n);
/* NULL unless this node schedules (mode all/job and the lock is held). */
ql_sched_t *ql_node_sched(ql_node_t *n);
ql_dispatcher_t *ql_node_dispatcher(ql_node_t *n);
/* How full the store and its disk are: the store's pages in use against qilin.storage.map-size
 * (LMDB; no map on PostgreSQL), and the free space of the data directory's file system. A server
 * measures every QL_SPACE_CHECK_MS and logs a warning when either passes its threshold (and when
 * it is back under); /metrics measures at each scrape. */
#define QL_SPACE_MAP_WARN 0.80  /* of the map size */
#define QL_SPACE_DISK_WARN 0.05 /* free share of the disk under which it is nearly full */
#define QL_SPACE_DISK_MIN_FREE (1ull << 30) /* or free bytes under which it is */
#define QL_SPACE_CHECK_MS 10000
typedef struct ql_node_space {
    uint64_t used_bytes, map_size; /* map_size 0: none (PostgreSQL) */
    double map_ratio;
    uint64_t disk_free, disk_total; /* 0 when the file system cannot be asked */
    bool map_warning, disk_warning;
} ql_node_space_t;
/* Whether a file system with free of total bytes free is nearly full (either threshold). */
bool ql_node_disk_nearly_full(uint64_t free, uint64_t total);
/* Measures store (one stat, one statvfs): 0 or the store's error. */
int ql_node_space_measure(ql_store_t *store, ql_node_space_t *out);
/* Logs what changed between two measures: a warning when a threshold is passed, a note when it
 * is back under. path names the data directory. */
void ql_node_space_log(ql_log_t *log, const char *path, const ql_node_space_t *was,
                       const ql_node_space_t *now);

/* Final jobs this node's retention deleted since it started, over all its holdings of the job
 * engine lock (ql_retention.h; only a master runs retention). */
uint64_t ql_node_retention_removed(const ql_node_t *n);
/* The submission service every client's new job goes through (ql_submission.h), in every mode
 * (a query-only server refuses writes in its API; the service's cache still checks formats).
 * It wakes the scheduler after each committed submission. Borrowed for the node's life. */
ql_submission_t *ql_node_submission(ql_node_t *n);
/* Whether this node is the job-scheduler master (holds the job engine lock). */
bool ql_node_is_master(const ql_node_t *n);
/* Whether this server runs jobs now: the master, or with scheduler 2 every job server (its
 * own scheduler, a ZooKeeper lock per job; the master is the election's leader, which adds
 * the dispatcher). */
bool ql_node_runs_jobs(const ql_node_t *n);
/* Who holds the lock when this node does not ("" when it does or it never looked). */
const char *ql_node_lock_holder(const ql_node_t *n);
/* The address ("host:port") the API listens on, once it does: recorded with the job engine
 * lock's holdings on PostgreSQL, where standbys on other hosts show it (a server configured
 * with port 0 knows its port only then). */
void ql_node_set_api_address(ql_node_t *n, const char *address);

/* Tells the scheduler (if any) that a job may be ready: call after a resume (the submission
 * service calls it after each submission). */
void ql_node_kick(ql_node_t *n);

/* The scheduler's and the dispatcher's options that come from the server's configuration cfg
 * (borrowed; the strings set point into it and are valid while it lives): the job limits, the
 * fetcher's poll interval, retries, the output cap, the step kill grace, the dispatcher's
 * interval, the server's time zone, and (copied) the server id, API address and takeover grace
 * recorded steps are judged by (engine/ql_step_host.h). The one place these keys become options:
 * the node and whoever builds a scheduler or dispatcher that must decide like a server's use it.
 * Every other field is left as it was (the store, writer, clock, templates, hooks and fencing are
 * the caller's). Either out may be NULL. */
void ql_node_engine_opts(const ql_config_t *cfg, ql_sched_opts_t *sched,
                         ql_dispatcher_opts_t *disp);

/* ---- the coordination guard (node_guard.c) ---- */

/* How a job server with this configuration coordinates, as recorded in the store, e.g.
 * "scheduler=0 lock=file" (written into buf, cap bytes). lock_kind is the lock's ops kind. */
void ql_node_coordination(const ql_config_t *cfg, const char *lock_kind, char *buf, size_t cap);
/* Records `mine` in the store if no job server has, else compares: a different record fails
 * with QL_ECOORD and a message naming both. server_id and now_ms say who recorded it and when.
 * One write transaction. */
int ql_node_guard_coordination(ql_store_t *store, const char *mine, const char *server_id,
                               int64_t now_ms, ql_log_t *log, ql_err_t *err);
/* Clears the record and the recorded ZooKeeper ensemble (`qilin cluster reset-coordination`),
 * copying the old record into old (cap bytes; empty when there was none). When the store was
 * coordinated by ZooKeeper, also resets the fencing epoch and the live jobs' fences to 0
 * (ql_fence_reset): the next ensemble's tokens start small. *epoch_was gets the epoch it reset,
 * 0 when it did not. One write transaction. */
int ql_node_reset_coordination(ql_store_t *store, char *old, size_t cap, uint64_t *epoch_was,
                               ql_err_t *err);

#endif
