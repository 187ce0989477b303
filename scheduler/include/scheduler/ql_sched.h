/*
 * The job scheduler: Kylin's DefaultScheduler (a fetcher and a runner pool), made event-driven
 * (docs/design/jobs.md, The scheduler).
 *
 * DESIGN.
 * - Threads: everything here runs on the loop thread of its clock (the libuv loop for the real
 *   clock; the driver's thread for the virtual one). Store changes go through the writer; their
 *   answers arrive on the same thread (ql_writer_complete with a threaded writer; with a manual
 *   writer the scheduler flushes what it queued itself, at the next turn of its clock, through
 *   a zero-delay timer).
 * - The clock decides how a step runs: on the real clock a shell step is a process and a sleep
 *   a timer; on a virtual clock every step takes its simulated duration
 *   (ql_stepdef_sim_duration) of virtual time and no process is started.
 * - The fetcher runs every poll interval and at once (coalesced) whenever a job is submitted,
 *   resumed or finishes. It reads READY jobs in (priority, create time) order from the index and
 *   picks as many as the runner pool has room for, globally and per project.
 * - A pick is one mutation: READY -> PENDING -> RUNNING and the first unfinished step RUNNING,
 *   committed together; the step's process (or timer) starts only after that commit is durable.
 *   Each step's end and the next step's start share one commit too. A job submitted through
 *   the submission service on the master may be picked in its submission's own transaction
 *   instead (ql_sched_claim below): the same pick, one commit fewer, no fetcher pass.
 * - A job is run by at most one run record at a time (the fetcher skips jobs that still have
 *   one), so a restarted job's new try never overlaps its old process, which is stopped first.
 * - Mutations re-check the job's state inside their transaction: an answer that lost a race
 *   (a PAUSE committed between the step's end and its write) changes nothing.
 * - Jobs moved by another process (a standby's API shares the store): every fetcher pass (each
 *   poll interval, and whenever a submission, resume or step end wakes it) reads the stored
 *   state of each job it executes a step for, in one read transaction; a job no longer RUNNING
 *   there (PAUSED, DISCARDED, READY after a restart, SUICIDAL, gone) has its step stopped like
 *   a local action would, and the state found is kept. Latency: one poll interval at most;
 *   on PostgreSQL the node hears of such a change at once and calls ql_sched_notice for it.
 * - Startup recovery (ql_sched_recover): RUNNING and PENDING jobs go back to READY, recorded
 *   process groups of interrupted steps are killed, and jobs resume from the first step that
 *   did not finish. A step another server ran (a store shared by several hosts) is left to its
 *   own host, and its job waits the takeover grace, on the scheduler's clock, before it may be
 *   picked (sched_grace.c).
 * - A full store: a step's end (or a retry's start) that fails because the store cannot take
 *   it (a full map or disk) is kept in memory and written again with backoff until it commits;
 *   no job is picked meanwhile (sched_hold.c). A fencing refusal is never retried.
 * - Scheduler 2 (opts.job_locks; docs/zookeeper.md): a run holds its job's ZooKeeper lock from
 *   the pick to the job's leaving RUNNING, and its changes carry that lock's token, checked
 *   against the job's record; a refusal ends that run only. Jobs whose lock vanished are taken
 *   over (ql_sched_lock_vanished, ql_sched_adopt_orphans) instead of a startup recovery.
 */
#ifndef QL_SCHED_H
#define QL_SCHED_H

#include "engine/engine.h"
#include "scheduler/ql_zk.h"
#include "storage/storage.h"

typedef struct ql_sched ql_sched_t;

typedef struct ql_sched_opts {
    ql_store_t *store;               /* borrowed */
    ql_writer_t *writer;             /* borrowed */
    ql_clock_t *clock;               /* borrowed */
    ql_log_t *log;                   /* borrowed, may be NULL */
    const ql_templates_t *templates; /* borrowed, immutable while the scheduler lives */
    int max_concurrent_jobs;         /* kylin.job.max-concurrent-jobs (default 10) */
    int64_t poll_interval_ms;        /* kylin.job.scheduler.poll-interval-second x 1000 */
    int retry;                       /* kylin.job.retry */
    int64_t retry_interval_ms;       /* kylin.job.retry-interval */
    size_t output_max;               /* kylin.job.execute-output.max-size */
    int64_t kill_grace_ms;           /* SIGTERM -> SIGKILL */
    const char *exec_helper;         /* path of qilin-exec */
    const char *log_dir;             /* step logs: <log_dir>/<job>/<step>.log */
    const char *default_timezone;    /* kylin.web.timezone of the server, NULL: UTC */
    uint64_t fence; /* fencing token: written into every job it moves, and every change it makes
                     * is refused (QL_EFENCED) once the store's epoch moved past it; 0: none */
    /* This server among those sharing the store (docs/step-processes.md, Several hosts):
     * recorded with every try it starts, with its API address; "" records none (a step is
     * then judged as one of a single host). Copied with the options. */
    char server_id[QL_STEP_SERVER_ID_MAX + 1];     /* qilin.server.id */
    char server_addr[QL_STEP_SERVER_ADDR_MAX + 1]; /* its REST API, "host:port"; "": unknown */
    /* Judge recorded steps by their server also on a store of one host (tests); a store that
     * spans hosts (ql_store_spans_hosts) is judged so whatever this says. */
    bool spans_hosts;
    /* qilin.cluster.takeover-grace-ms: how long recovery holds a job whose RUNNING step
     * another server ran before its next try may start; 0: not at all. */
    int64_t takeover_grace_ms;
    /* How long the sweeps of interrupted and stopped tries wait for what they killed to let go
     * of its files (ql_proc_kill_tokens(), ql_proc_kill_group_checked()); <= 0:
     * QL_PROC_DRAIN_MS. Only tests set it, to reach the failure of that wait (ql_proc.h). */
    int proc_drain_ms;
    /* Scheduler 2 (docs/zookeeper.md, Scheduler 2): the per-job locks on this server's
     * ZooKeeper session (borrowed; it must outlive the scheduler). Set: the fetcher takes a
     * job's lock before its pick, the pick claims the lock's token for the job, every later
     * change of that run is checked against the job's token, and the lock is released once the
     * job is neither READY nor RUNNING; fence then guards nothing of the runs (0). NULL: every
     * change is checked against fence. */
    ql_zk_jobs_t *job_locks;
    /* With job_locks: this server's names that kylin.cube.schedule.assigned-servers may list
     * (a comma list: qilin.server.id, host name, listen and API hosts), and the server's own
     * value of that key (a project's or model's value wins). Copied with the options. */
    char assigned_names[1024];
    char assigned_default[1024];
    /* Called when a job reaches a final state, ERROR or PAUSED through this scheduler. */
    void (*on_job_end)(void *arg, const ql_id_t *job, ql_state_t state);
    /* Called once, from a write's answer, when a change was refused by fencing (another server
     * took the job engine lock). Fetching has stopped; the owner should stop the scheduler
     * (not from inside this call). */
    void (*on_fenced)(void *arg);
    void *hook_arg;
} ql_sched_opts_t;

int ql_sched_new(const ql_sched_opts_t *opts, ql_sched_t **out);
/* Stops everything at once (running processes are stopped) and frees. Prefer ql_sched_stop. */
void ql_sched_free(ql_sched_t *s);

/* Runs startup recovery through the writer and waits for it. *recovered (may be NULL) gets the
 * number of jobs put back to READY. */
int ql_sched_recover(ql_sched_t *s, uint64_t *recovered, ql_err_t *err);
/* Starts (or resumes) fetching: the poll timer and an immediate fetch. */
void ql_sched_start(ql_sched_t *s);
/* Stops fetching new jobs; running ones go on. */
void ql_sched_pause_fetching(ql_sched_t *s);
bool ql_sched_is_fetching(const ql_sched_t *s);
/* Asks for a fetch as soon as possible (coalesced). Call after a submission or resume. */
void ql_sched_kick(ql_sched_t *s);
/* Another process changed job in the store (NULL: any job may have changed), as the store's
 * change session reports it (ql_store_changes_drain): kicks the fetcher and, when this scheduler
 * runs a step or a retry wait of that job (of any job, for NULL), reads the stored state now
 * and stops the run of a job no longer RUNNING, as every poll interval does (see the DESIGN).
 * During a stop that waits for running steps, it may end the stop, whose done callback may
 * free s: nothing may use s after this call. */
void ql_sched_notice(ql_sched_t *s, const ql_id_t *job);

/* Scheduler 2 (opts.job_locks): the lock of job_id vanished (its holder released it or its
 * session ended). A job the store still has RUNNING or PENDING, without a run here and
 * assigned to this server, is taken over: its lock is taken (another server's is the end of
 * it), its token claimed and its running step put back to READY in one transaction (its
 * process groups killed when they are this host's), and after the takeover grace it runs from
 * that step. */
void ql_sched_lock_vanished(ql_sched_t *s, const char *job_id);
/* Scheduler 2: the same for every RUNNING or PENDING job whose lock is not in the latest
 * listing (ql_zk_job_listed): at start and after every new session. */
void ql_sched_adopt_orphans(ql_sched_t *s);

typedef void (*ql_sched_done_cb)(void *arg, int status, const ql_err_t *err);
/* Applies action to a job through the writer, then stops its step process if it was running
 * (and kicks the fetcher for RESUME/RESTART). done (may be NULL) gets the action's result. */
int ql_sched_action(ql_sched_t *s, const ql_id_t *job, ql_action_t action, ql_sched_done_cb done,
                    void *arg);

/* Graceful stop: no new picks. Running steps are stopped (SIGTERM, then SIGKILL after
 * kill_grace_ms) and, once their processes are gone and their markers swept, put back to READY,
 * at once when pause_running (the default shutdown), or else waited for, grace_ms at most (< 0:
 * without limit; 0: not at all), after which those still running are stopped and put back the
 * same way; they resume from that step after a restart. The put-back comes after the stop so
 * that a crash in between leaves the step RUNNING with its marker, for recovery. No new
 * step or retry starts meanwhile: a job whose step ends goes back to READY at its next step.
 * While it waits, jobs another process moves are still noticed (see the DESIGN). done runs on
 * the loop when nothing of the scheduler is in flight any more (possibly before this returns);
 * it may free s. */
void ql_sched_stop(ql_sched_t *s, bool pause_running, int64_t grace_ms, void (*done)(void *arg),
                   void *arg);

/*
 * A pick in a submission's own write transaction (docs/design/jobs.md, The scheduler: picked
 * with its submission). The submission service (ql_submission.h) asks, on the loop thread, as it
 * queues a new job: ql_sched_claim takes a slot for it when this scheduler fetches (it holds the
 * job engine lock and is not stopping, fenced or paused), picks without a job's own lock (not
 * scheduler 2) and the pick policy (pick_policy.h) would start a candidate of project now: the
 * slot counts against kylin.job.max-concurrent-jobs and the project's override from then on, as a
 * fetcher's pick in flight does. Inside the submission's transaction, right after the job is
 * created, ql_sched_claim_pick makes the pick the fetcher would make (READY -> PENDING ->
 * RUNNING, its first step RUNNING, under this scheduler's fencing token checked in that
 * transaction), unless the token is stale or an older READY job comes first in the policy's
 * order (the READY index holds another job before it): the job then simply stays READY, and
 * the submission goes on (a pick refused by fencing never fails it). From the submission's
 * answer, ql_sched_claim_done starts the step (or gives the slot back; a refusal by fencing stops
 * fetching as a fetcher's refused pick does) and frees the claim. Every claim taken gets exactly
 * one ql_sched_claim_done, also when the submission failed or was never queued (status != 0),
 * and the scheduler's stop waits for it. Threads: claim and done on the loop thread, the pick on
 * the writer's.
 */
typedef struct ql_sched_claim ql_sched_claim_t;
/* A slot for a new job of project, whose kylin.job.max-concurrent-jobs override is limit (the
 * project's value, NULL: none); NULL when this scheduler may not pick it now (s may be NULL). */
ql_sched_claim_t *ql_sched_claim(ql_sched_t *s, const char *project, const char *limit);
/* The pick of the new job in txn (the writer's mutation that created it). 0, the job picked or
 * left READY; an error only from the pick's own writes (the store failing), err set. */
int ql_sched_claim_pick(ql_txn_t *txn, ql_sched_claim_t *c, const ql_id_t *job, ql_err_t *err);
/* The submission's answer: status 0 (the transaction committed job) or its error (job ignored).
 * Frees c. Returns whether the job was picked (it is RUNNING: no fetcher pass needs to look
 * for it). */
bool ql_sched_claim_done(ql_sched_claim_t *c, const ql_id_t *job, int status);

typedef struct ql_sched_stats {
    uint64_t picked;    /* jobs started */
    uint64_t finished;  /* jobs that reached a final state here */
    uint64_t steps_run; /* step tries started */
    uint64_t fetches;   /* fetcher passes */
    unsigned running;   /* runs in flight now */
} ql_sched_stats_t;
void ql_sched_get_stats(const ql_sched_t *s, ql_sched_stats_t *out);
/* True when no run, pick or step mutation is in flight. */
bool ql_sched_idle(const ql_sched_t *s);

/* Hook for benchmarks and tests: called on the loop thread right before a step's process (or
 * built-in) starts, after its RUNNING state is durable. */
void ql_sched_set_step_start_hook(ql_sched_t *s,
                                  void (*hook)(void *arg, const ql_id_t *job, uint32_t seq),
                                  void *arg);

#endif
