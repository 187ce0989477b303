/* Scheduler internals shared by sched.c, sched_pick.c, sched_step.c, sched_actions.c and
 * sched_hold.c (not public). sched_shell.c sees none of this: only sched_shell.h. */
#ifndef QL_SCHED_INT_H
#define QL_SCHED_INT_H

#include "sched_shell.h"
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"

#include <stddef.h>

typedef enum run_phase {
    RUN_PICKING,
    RUN_STEP,
    RUN_FINISHING,
    RUN_WAITING,
    RUN_DONE,
} run_phase_t;

typedef enum run_result {
    RESULT_STALE,    /* the job moved on without us: drop the run */
    RESULT_RUN,      /* picked: start the step */
    RESULT_SUICIDAL, /* its target is gone */
    RESULT_NEXT,     /* the next step (or a retry) is RUNNING: start it */
    RESULT_RETRY,    /* the step failed and waits for a retry */
    RESULT_FINISHED, /* the job ended SUCCEED */
    RESULT_FAILED,   /* the job ended ERROR */
} run_result_t;

typedef struct run run_t;
struct run {
    ql_sched_t *s;
    ql_id_t job;
    char project[QL_NAME_MAX + 1];
    run_phase_t phase;
    bool cancelled;
    /* an interrupt (shutdown: the job back to READY) is in flight or done; see ql_sched_park_run */
    bool parking;
    bool unstarted;   /* parked before its step started: the interrupt takes its try back */
    bool interrupted; /* written by interrupt_fn: it moved the job back to READY */
    /* shutdown stops the step's process before it puts the job back (see ql_sched_interrupt_run):
     * the process's end submits the interrupt, unless its marker's sweep failed
     * (shell.swept_rc < 0) */
    bool stop_first;
    int refs;    /* answers and close callbacks still to come */
    int64_t now; /* the time a mutation in flight writes */
    /* written by mutations (writer thread) while phase is PICKING or FINISHING */
    run_result_t result;
    ql_state_t final_state;
    uint32_t seq;
    uint32_t attempt;
    char token[QL_STEP_TOKEN_LEN + 1]; /* the try's marker, committed with its RUNNING */
    uint8_t *def_bytes;
    size_t def_len;
    int64_t retry_wait;
    /* the try a FINISHING mutation records, set before it is queued: the mutation may run
     * again (a batch that failed, a full map), and ql_sched_begin_step moves seq/attempt on */
    uint32_t end_seq, end_attempt;
    /* the FINISHING mutation and its answer, kept to submit it again while the store cannot
     * take it (sched_hold.c); held_next links the runs held that way */
    ql_write_fn end_fn;
    ql_write_done_cb end_done;
    run_t *held_next;
    bool held_retry; /* end_fn was submitted again by the hold: its answer is due */
    /* the step that ended was the job's last (or failed for good): the job ends with the
     * mutation in flight, and the run no longer counts against the concurrency limits */
    bool ending;
    ql_job_t jobinfo; /* the job as picked, for step parameters */
    /* the write key of its mutations (ql_writer.h, Lanes): its job's, from the fetch or the
     * pick on (ql_sched_job_key); 0 while not known (then they have every key) */
    uint64_t wkey;
    bool in_split; /* in a batch being split across the writer's lanes (sched_lanes.c) */
    /* the fencing token its changes carry: the job engine lock's epoch (opts.fence), or with
     * job_locked the token of the job's own ZooKeeper lock (scheduler 2, sched_joblock.c),
     * claimed by the pick and checked against the job's record by every later change */
    uint64_t fence;
    bool job_locked;
    bool lock_wait; /* the job's lock was asked for: its answer holds one reference */
    bool takeover;  /* a takeover of a job whose lock vanished (sched_joblock.c), not a pick */
    bool keep_lock; /* dropped without releasing the job's lock: the job waits READY for this
                       server's fetcher */
    /* the step being executed */
    ql_stepdef_t def;
    ql_state_t outcome;
    char *msg;
    char *output;
    size_t output_len;
    /* the try of a shell step (sched_shell.h): shell.proc is its process while it runs */
    ql_shell_try_t shell;
    ql_timer_t timer;
    bool timer_init;
    run_t *next, *prev, *hnext;
};

struct ql_sched {
    ql_sched_opts_t opts;
    int64_t bad_limit_logged_ms; /* last log of an invalid project override (one a minute) */
    run_t *runs;
    size_t n_runs;
    size_t n_ending; /* runs with `ending` set */
    /* dropped runs whose timer is closing: each holds s until its close callback has run */
    size_t n_timer_closing;
    run_t **buckets;
    size_t n_buckets;
    bool fetching;
    bool stopping;
    bool fenced; /* a change was refused by fencing: the lock is lost, on_fenced was called */
    bool grace_expired; /* a `wait` shutdown ran out of its grace and paused what ran */
    int64_t stop_grace_ms;
    void (*stop_done)(void *arg);
    void *stop_arg;
    /* > 0 while a loop over the runs may drop some: the stop's done callback (which may free
     * the scheduler) waits until the loop is over */
    int busy;
    int closing;
    /* the local actions whose answer has not come yet (see ql_sched_watch_runs) */
    struct sched_action *actions;
    ql_timer_t poll_timer, kick_timer, flush_timer, grace_timer;
    /* step ends waiting to be written together (one mutation per loop turn, see
     * ql_sched_step_completed); the finish timer submits them */
    run_t **finishing;
    size_t n_finishing, cap_finishing;
    ql_timer_t finish_timer;
    ql_sched_stats_t stats;
    /* step ends (and retry starts) the store could not take, in order, waiting for the hold
     * timer to submit them again (sched_hold.c) */
    run_t *held, **held_tail;
    ql_timer_t hold_timer;
    int64_t hold_backoff_ms;
    size_t n_held_retries;        /* runs with held_retry set */
    bool writes_failing;          /* logged once when they start failing, once when they work */
    int64_t writes_failing_since; /* clock ms */
    void (*step_start_hook)(void *arg, const ql_id_t *job, uint32_t seq);
    void *step_start_arg;
    /* zones and partition formats for shell steps' *_FMT variables, opened once (loop thread) */
    ql_tzcache_t *zones;
    ql_submit_cache_t *formats;
    ql_shell_env_t shell_env; /* what shell steps read of s (sched_shell.h) */
    /* who "this host" is for recorded steps (ql_step_host.h): opts.server_id, the boot id read
     * once at ql_sched_new, and whether the store spans hosts; immutable after ql_sched_new, so
     * the writer thread's mutations read it too */
    char boot_id[QL_PROC_BOOT_ID_LEN + 1];
    ql_step_host_t self;
    /* the takeover grace (sched_grace.c): jobs whose next try waits for a try another server
     * may still run, each until a time of the clock; the timer releases them */
    struct sched_grace *grace;
    size_t n_grace, cap_grace;
    ql_timer_t takeover_timer;
    /* scheduler 2: the jobs whose lock a takeover kept for this server's fetcher
     * (sched_joblock.c, ql_sched_watch_kept) */
    ql_id_t *kept;
    size_t n_kept, cap_kept;
};

/* The write key of a job's changes (ql_writer.h, Lanes), from the job or from its id and model
 * (NULL or zero: none). */
uint64_t ql_sched_job_key(const ql_job_t *job);
uint64_t ql_sched_target_key(const ql_id_t *job, const ql_id_t *model);
/* Queues r's mutation with r's write key (every key while r's is not known), flushing a manual
 * writer at the next turn of the clock as ql_sched_submit does. */
int ql_sched_submit_run(run_t *r, ql_write_fn fn, ql_write_done_cb done);

/* One run's mutation in a batch (sched.c, "batches"): several runs' mutations in one. */
typedef struct batch_ent {
    run_t *r;
    ql_write_fn fn;
    ql_write_done_cb done;
} batch_ent_t;

/* sched.c: run bookkeeping, writer plumbing, fencing, batches, lifecycle. */
/* A new run for job id in project (RUN_PICKING, no references), linked into s; NULL without
 * memory. */
run_t *ql_sched_run_new(ql_sched_t *s, const ql_id_t *id, const char *project);
/* Moves r (linked with a job id not known yet: a pick in a submission's transaction) to job id,
 * which no other run has. */
void ql_sched_run_set_job(run_t *r, const ql_id_t *id);
/* Marks r DONE and unlinks it; freed once no callback refers to it. r must not be used after. */
void ql_sched_run_drop(run_t *r);
/* Initialises r's timer on first use. */
void ql_sched_ensure_timer(run_t *r);
/* Logs one line about r's job: the formatted message, then job= and project=. */
void ql_sched_log_job(ql_sched_t *s, ql_log_level_t lvl, const run_t *r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The fencing check every change made on the strength of the job engine lock starts with. */
int ql_sched_check_fence(ql_txn_t *txn, const ql_sched_t *s, ql_err_t *err);
/* The same for a change of run r: its job's token when r->job_locked, else r->fence. */
int ql_sched_check_run_fence(ql_txn_t *txn, const run_t *r, ql_err_t *err);
/* Whether status is a change of r refused by fencing (the first one of the job engine lock
 * stops fetching; one of a job's lock loses that job only). */
bool ql_sched_fenced_out(run_t *r, int status, const ql_err_t *err);
/* Queues the mutations e[0..n) as one (each done runs once, in order); on failure none is. */
int ql_sched_submit_batch(ql_sched_t *s, const batch_ent_t *e, size_t n);
/* ql_sched_submit_batch; when that fails, drops the runs. */
void ql_sched_submit_one_or_drop(ql_sched_t *s, const batch_ent_t *e, size_t n);
/* sched_lanes.c: submits e[0..n) (step ends first, then picks) as ql_sched_submit_one_or_drop
 * does, split into a batch per lane of the writer when it has several. */
void ql_sched_submit_or_drop(ql_sched_t *s, const batch_ent_t *e, size_t n);
/* How that split deals e[0..n) out to n_parts parts (at most QL_WRITER_LANES_MAX): dest[i] gets
 * entry i's part. Ends in turn; a pick to the part of the first end of an ending job of its own
 * project whose part has an end it has not paired with a pick yet, then to the first part with
 * such an end of any project, else (a free slot, or one an earlier batch's end gives up) in turn.
 */
void ql_sched_deal(const batch_ent_t *e, size_t n, size_t n_parts, size_t *dest);
/* Puts r's job back to READY while the server stops (the step is stopped first if it runs). */
void ql_sched_interrupt_run(run_t *r);
/* Parks a run whose mutation answered while the server stops: it starts nothing. */
void ql_sched_park_run(run_t *r);

/* sched_pick.c: the pick and the fetcher. */
/* The pick's mutation (r READY -> PENDING -> RUNNING with its first unfinished step) and its
 * answer (starts the step). */
int ql_sched_pick_fn(ql_txn_t *txn, void *arg, ql_err_t *err);
/* The pick's body once its fencing check passed in txn: job id (r->job for the fetcher's pick;
 * the new job's id for a pick in its submission's transaction, sched_claim.c, whose run learns
 * its job only from the answer). Writes r's result and step like ql_sched_pick_fn. */
int ql_sched_pick_checked(ql_txn_t *txn, run_t *r, const ql_id_t *id, ql_err_t *err);
void ql_sched_pick_done(void *arg, int status, const ql_err_t *err);
/* Copies step st's def into r and marks the step RUNNING (one more attempt, a new marker). */
int ql_sched_begin_step_rec(ql_txn_t *txn, run_t *r, ql_step_t *st, int64_t now, ql_err_t *err);
/* ql_sched_begin_step_rec for step seq of job, read here. */
int ql_sched_begin_step(ql_txn_t *txn, run_t *r, const ql_job_t *job, uint32_t seq, int64_t now,
                        ql_err_t *err);
/* The first step of job from `from` on that is not finished (*out = n_steps when none is). */
int ql_sched_next_unfinished(ql_txn_t *txn, const ql_job_t *job, uint32_t from, uint32_t *out,
                             bool *warned, ql_step_t *found);
/* Counts r's job's end in state and tells the owner (on_job_end). */
void ql_sched_job_ended(run_t *r, ql_state_t state);
/* A fetcher pass: appends pick mutations for the room left to ents[*n..]; the caller submits. */
void ql_sched_fetch_into(ql_sched_t *s, batch_ent_t *ents, size_t *n);
/* Writes the queued step ends, then a fetcher pass, its picks submitted as one mutation. */
void ql_sched_fetch(ql_sched_t *s);
/* The poll timer's callback: a fetcher pass, or while stopping the watch of the runs alone. */
void ql_sched_poll_cb(ql_timer_t *t, void *arg);

/* sched_step.c: running a step and a step's end. */
/* Starts r's picked step (a process, or a timer for built-ins and simulated steps). */
void ql_sched_start_step(run_t *r);
/* The mutation that records r's step end (arg) with the next step's start. */
int ql_sched_finish_fn(ql_txn_t *txn, void *arg, ql_err_t *err);
/* Submits the queued step ends as one mutation, with the picks that take their slots. */
void ql_sched_flush_finishing(ql_sched_t *s);

/* sched_actions.c: actions, jobs moved by another process, recovery. */
/* Reads the jobs of the runs executing or waiting for a retry and cancels those another
 * process moved (no longer RUNNING, or deleted). May free s (ql_sched_check_stopped). */
void ql_sched_watch_runs(ql_sched_t *s);

run_t *ql_sched_find_run(ql_sched_t *s, const ql_id_t *id);
int ql_sched_submit(ql_sched_t *s, ql_write_fn fn, void *arg, ql_write_done_cb done);
/* The step of r ended (r->outcome, msg, output set): record it. */
void ql_sched_step_completed(run_t *r);
void ql_sched_cancel_run(run_t *r, ql_proc_stop_reason_t reason);
void ql_sched_check_stopped(ql_sched_t *s);

/* sched_joblock.c: scheduler 2's per-job locks (docs/zookeeper.md, Scheduler 2). */
/* Whether the job may run on this server by kylin.cube.schedule.assigned-servers (the model's,
 * else the project's proj (may be NULL), else the server's). */
bool ql_sched_assigned_here(const ql_sched_t *s, ql_txn_t *txn, const ql_job_t *job,
                            const ql_project_t *proj);
/* Takes r's job lock (or uses the one held) and then submits the pick (or, for a takeover,
 * the takeover); drops r when the lock is another server's or cannot be asked for. */
void ql_sched_lock_and_pick(run_t *r);
/* Whether job's lock node was in the latest listing and is not this server's (scheduler 2): its
 * pick would only find the node; a hint (the listing may be a moment old), false without
 * job_locks. */
bool ql_sched_locked_elsewhere(const ql_sched_t *s, const ql_id_t *job);
/* Releases r's job lock unless r keeps it (called as r is dropped); nothing without one. When r
 * keeps it, the job is remembered for ql_sched_watch_kept. */
void ql_sched_job_unlock(run_t *r);
/* Once per poll interval: releases the kept locks (see ql_sched_job_unlock) of jobs that are
 * no longer READY, RUNNING or PENDING, i.e. moved on by an action (PAUSE, DISCARD) before this
 * server's fetcher picked them; forgets those it runs again or no longer holds. */
void ql_sched_watch_kept(ql_sched_t *s);
/* The takeover's mutation and its answer (sched_actions.c): claims r->fence for the job and
 * puts the job back to READY like recovery does for one job. */
void ql_sched_takeover_submit(run_t *r);

/* sched_grace.c: the takeover grace (qilin.cluster.takeover-grace-ms). */
/* Holds job (its step seq ran on server, another host's) until `until` on s's clock: the
 * fetcher does not pick it before. Logged with the reason. Returns 0 or UV_ENOMEM (the job is
 * then not held, and that is logged too). */
int ql_sched_grace_hold(ql_sched_t *s, const ql_id_t *job, uint32_t seq, const char *server,
                        int64_t until);
/* Whether job is held now (its time has not come). */
bool ql_sched_grace_holds(const ql_sched_t *s, const ql_id_t *job);
/* Forgets every hold (the scheduler is freed). */
void ql_sched_grace_clear(ql_sched_t *s);

/* sched_hold.c. Every answer to a FINISHING run's mutation comes here first. When the write
 * failed because the store could not take it (ql_writer_store_error) and the scheduler is not
 * stopping, r is held: its outcome stays in memory and r->end_fn is submitted again, with
 * backoff, until it commits (the first such failure is logged, and so is the first success
 * after them). Returns whether r was held; if not, the caller handles the answer. */
bool ql_sched_hold_end(run_t *r, int status, const ql_err_t *err);
/* Whether new jobs must wait: step ends are held or being written again. */
bool ql_sched_holding(const ql_sched_t *s);
/* Submits every held run again at once (a stop does not wait for the backoff). */
void ql_sched_release_held(ql_sched_t *s);

#endif
