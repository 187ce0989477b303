/*
 * Shell steps (not public): one try of a step of kind shell, from its parameters to its
 * process's end, behind a narrow interface. The scheduler (sched_step.c) fills a ql_shell_try_t
 * and is told the try's end through its done callback; the shell module sees no run, no
 * scheduler state and calls nothing of the scheduler but the two callbacks it is given (done,
 * and env->submit for the note of the try's process group).
 *
 * Why this shape: the scheduler must still reach into a running try, to stop its process (an
 * action, a shutdown, ql_sched_free) and to say that a shutdown's stop must sweep the try's
 * marker even if the process ends on its own meanwhile. Those are ql_shell_stop and the
 * `proc` field; everything else flows one way, in before the spawn and out in done.
 *
 * Threads: the loop thread only.
 */
#ifndef QL_SCHED_SHELL_H
#define QL_SCHED_SHELL_H

#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The fencing token of the job engine lock's holding that started a try, in every shell step's
 * environment (decimal; "0" without a lock), for the step to check at its own resources
 * (docs/job-templates.md, The processes of a step). */
#define QL_SHELL_FENCE_ENV "QILIN_FENCE_TOKEN"

/* What shell steps read of their scheduler: all borrowed, valid while the scheduler lives. */
typedef struct ql_shell_env {
    const ql_sched_opts_t *opts; /* store, clock, log, log directory, process limits, fence */
    ql_tzcache_t *zones;         /* for the *_FMT variables, opened once */
    ql_submit_cache_t *formats;
    /* queues a mutation on the scheduler's writer; 0 or an error (fn never runs then) */
    int (*submit)(void *arg, ql_write_fn fn, void *fn_arg, ql_write_done_cb done);
    void *submit_arg;
} ql_shell_env_t;

typedef struct ql_shell_try ql_shell_try_t;

struct ql_shell_try {
    /* set by the caller before ql_shell_spawn, borrowed until done has run */
    const ql_shell_env_t *env;
    const ql_job_t *job;     /* the job as picked */
    const ql_stepdef_t *def; /* the step's decoded definition */
    uint32_t seq, attempt;
    const char *token; /* the try's marker, committed with its RUNNING ("" for none) */
    /* the fencing token its writes carry and QILIN_FENCE_TOKEN shows: the job engine lock's
     * epoch, or with job_locked the token of the job's own lock (scheduler 2), checked against
     * the job's record instead (ql_job_fence_check) */
    uint64_t fence;
    bool job_locked;
    void (*done)(ql_shell_try_t *t);
    void *arg; /* the caller's */
    /* set by ql_shell_stop: sweep the marker when the process ends, whatever ended it */
    bool sweep_always;
    /* written by the shell module */
    ql_proc_t *proc;    /* the process while it runs; NULL before the spawn and once it exited */
    int swept_rc;       /* the sweep after a stopped try: 0, or why it failed (negative) */
    ql_state_t outcome; /* in done: SUCCEED, WARNING or ERROR */
    char *msg;          /* in done: why (malloc'd, may be NULL); the caller takes it */
    char *output;       /* in done: the last of the output (malloc'd, may be NULL); the caller
                         * takes it */
    size_t output_len;
};

/* Starts t's try: builds its parameters, expands the step and spawns its process. t->done runs
 * exactly once: from inside this call when the try cannot start (outcome ERROR with msg), or
 * after the process has ended and been closed. t must stay put until then. */
void ql_shell_spawn(ql_shell_try_t *t);

/* Stops t's process if it runs (a no-op otherwise); sweep asks for the marker's sweep even if the
 * process ends on its own before the stop takes effect (swept_rc then says how it went). */
void ql_shell_stop(ql_shell_try_t *t, ql_proc_stop_reason_t reason, bool sweep);

/* Whether step seq of job, of definition def, has a `when` the job's parameters do not meet: 1
 * (why, cap bytes, says which condition), 0 when it runs, -1 when the parameters cannot be read
 * (why says so; the step fails). */
int ql_shell_step_skipped(const ql_shell_env_t *env, const ql_job_t *job, const ql_stepdef_t *def,
                          uint32_t seq, char *why, size_t cap);

#endif
