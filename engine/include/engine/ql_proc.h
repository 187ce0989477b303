/*
 * Running one shell step as a child process on a libuv loop.
 *
 * DESIGN. A ql_proc_t is one step process, spawned with uv_spawn() on the loop thread through
 * the qilin-exec helper (tools/qilin-exec.c), which arms PR_SET_PDEATHSIG and then execs the
 * step's argv without a shell. Every function here except ql_proc_spec_init(),
 * ql_proc_kill_group(), ql_proc_classify(), ql_proc_stop_reason_name() and those of Markers
 * (below, engine/proc_sweep.c) must be called on the loop's thread; those are thread-safe.
 *
 * Process group. The step runs in a new session (UV_PROCESS_DETACHED), so its process group id
 * is its pid, and everything it forks stays in that group unless it calls setsid() itself.
 * Stopping signals the whole group: SIGTERM, then SIGKILL after the grace period. The job runner
 * records the pgid (with its leader's identity, ql_proc_ident_of()) in the store after
 * ql_proc_spawn() returns; what a crashed server left behind is found by the try's marker,
 * committed before the spawn, and by that group (see Markers below). When a step completes,
 * whatever is still in its group is SIGKILLed: the runner forgets the pgid then, and nothing
 * could clean such leftovers up later (a step that wants a daemon to outlive it must setsid()
 * it; a step that is stopped instead loses those too, by its marker).
 *
 * Output. stdout and stderr share one pipe, as with `2>&1` (Kylin's redirectErrorStream), so
 * the log keeps the order the step wrote them in. Every byte goes to the log file (appended,
 * never capped). The in-memory copy kept for the store holds the LAST max_output bytes, because
 * the end of a log is where the error is; when bytes were dropped it starts with the marker
 * "...(N characters truncated)...\n" (on top of the max_output bytes). "Characters" are bytes
 * here, like Kylin's kylin.job.execute-output.max-size; the cut is moved forward to a UTF-8
 * character boundary, so valid UTF-8 output stays valid. Log writes are plain write()s on the
 * loop thread: they land in the page cache, the log is not durable state (no fsync), and a
 * queue of asynchronous writes would cost ordering logic for no gain on a local disk.
 *
 * Completion. The exit callback runs exactly once, after the process exited AND its output
 * pipe and the helper's status pipe reached EOF, so no output is lost. The one exception is a
 * step that handed its pipe to a process that left the group (setsid): after a stop has
 * escalated to SIGKILL and the process has exited, the proc waits QL_PROC_DRAIN_MS more and then
 * completes without that EOF. Without a timeout or a stop, such a step is waited for as long as
 * the pipe stays open (Kylin waits for the stream's EOF too). A stopped step's exit callback
 * also waits until no process of its group runs or holds anything (ql_proc_group_running():
 * each is a zombie): a signal is delivered when the kernel next schedules its target, and a
 * process that closed its pipes may still be on its way out, holding its file locks until its
 * memory is freed, so without the wait what the caller starts next could overlap the stopped
 * try by a moment. The wait is at most QL_PROC_DRAIN_MS; past it
 * the result says group_lingered.
 *
 * Timers. Timeout and grace use uv_timer_t on the proc's loop, not a ql_clock_t: they measure a
 * real process running in real time, which a virtual clock standing still cannot stop.
 */
#ifndef QL_PROC_H
#define QL_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "base/ql_error.h"

/* kylin.job.execute-output.max-size */
#define QL_PROC_DEFAULT_MAX_OUTPUT ((size_t)10485760)
#define QL_PROC_DEFAULT_GRACE_MS 10000
/* How long a stopped, SIGKILLed step's pipes may stay open after it exited (see DESIGN), and
 * how long ql_proc_kill_tokens() and ql_proc_kill_group_checked() wait for what they killed to
 * let go of its files (their drain_ms). Only a process the kernel cannot finish tearing down (in
 * an uninterruptible sleep, on a dead network mount) outlives it; tests pass a bound of 0 or 1
 * ms instead, to reach with an ordinary process the branches such a process takes. */
#define QL_PROC_DRAIN_MS 2000

typedef struct ql_proc ql_proc_t;

/* Why a process was stopped; QL_PROC_STOP_NONE when it ended on its own. */
typedef enum ql_proc_stop_reason {
    QL_PROC_STOP_NONE = 0,
    QL_PROC_STOP_PAUSE,
    QL_PROC_STOP_DISCARD,
    QL_PROC_STOP_RESTART,
    QL_PROC_STOP_TIMEOUT,
    QL_PROC_STOP_SHUTDOWN,
} ql_proc_stop_reason_t;

/* One environment variable added to (or replacing one of) the server's environment. */
typedef struct ql_proc_env {
    const char *key; /* non-empty, no '=' */
    const char *value;
} ql_proc_env_t;

/*
 * What to run. Every pointer is borrowed for the duration of ql_proc_spawn() only: the proc
 * copies what it keeps. Fill it with ql_proc_spec_init() first, which sets the defaults.
 */
typedef struct ql_proc_spec {
    const char *const *argv;  /* NULL-terminated; argv[0] is the program (searched in PATH of
                                 the child's environment unless it contains '/'); required */
    const ql_proc_env_t *env; /* env_count additions to the server's environment; a key given
                                 twice takes its last value */
    size_t env_count;
    const char *cwd;         /* working directory, NULL = the server's */
    int64_t timeout_ms;      /* 0 = no timeout; on expiry the stop sequence runs */
    const char *log_path;    /* file receiving all output (appended; parent directories are
                                created); NULL = no log file */
    size_t max_output;       /* bytes kept in memory (the tail); default
                                QL_PROC_DEFAULT_MAX_OUTPUT */
    int64_t grace_ms;        /* SIGTERM -> SIGKILL delay; default QL_PROC_DEFAULT_GRACE_MS */
    const char *exec_helper; /* path of the qilin-exec binary; required */
} ql_proc_spec_t;

/*
 * How a process ended, passed to the exit callback. It and everything it points to are owned by
 * the proc and valid until the callback returns, except output: the callback may take it by
 * copying the pointer and setting result->output to NULL; it then owns it and must free() it.
 */
typedef struct ql_proc_result {
    int64_t exit_status;               /* exit code; meaningful when term_signal == 0 */
    int term_signal;                   /* signal that ended the process, 0 when it exited */
    bool timed_out;                    /* the timeout expired (stop_reason is then TIMEOUT) */
    ql_proc_stop_reason_t stop_reason; /* the first stop requested, or NONE */
    int exec_errno;                    /* errno of the helper's failed exec of argv[0], 0 when
                                          exec succeeded */
    char *output;                      /* NUL-terminated: marker (if truncated) + tail */
    size_t output_len;                 /* bytes in output, excluding the NUL */
    uint64_t output_total;             /* bytes the step wrote in all */
    uint64_t truncated;                /* bytes dropped from the in-memory copy */
    int log_error;                     /* first error writing the log (UV_E*), 0 if none; the
                                          log stops at that point, the in-memory copy does not */
    bool output_incomplete;            /* completed without the pipes' EOF (see DESIGN) */
    bool group_lingered;               /* stopped, and a process of its group still ran code
                                          QL_PROC_DRAIN_MS after (see Completion) */
    int64_t duration_ms;               /* from spawn to completion */
    int64_t timeout_ms;                /* the spec's timeout, for messages */
    char file[256];                    /* argv[0], possibly cut, for messages */
} ql_proc_result_t;

/*
 * Called once per proc that spawned successfully. result is borrowed (see ql_proc_result_t).
 * The callback may call ql_proc_close(), and nothing else ends the proc: it must be closed.
 */
typedef void (*ql_proc_exit_cb)(ql_proc_t *proc, ql_proc_result_t *result, void *arg);
/* Called when the proc's memory is about to be freed; proc is no longer usable. */
typedef void (*ql_proc_close_cb)(void *arg);

/* Fills spec with zeros and the defaults (max_output, grace_ms). */
void ql_proc_spec_init(ql_proc_spec_t *spec);

/*
 * Spawns spec's argv through spec->exec_helper on loop (borrowed; it must outlive the proc) and
 * stores a new proc in *out. The proc is owned by the library and freed after ql_proc_close()'s
 * callback. arg is passed to the callbacks as it is.
 *
 * Returns 0, or a negative code with *out untouched: UV_EINVAL for a bad spec, the UV_E* code of
 * a failed log open or of uv_spawn() (e.g. UV_ENOENT for a missing helper or cwd). err (may be
 * NULL) then names what failed. If a call returns an error its callback never runs and there is
 * nothing to close; the loop must still run once for the library to release its handles.
 *
 * A step whose argv[0] is not found is NOT a spawn error: the helper exits 127 and the result
 * carries exec_errno == ENOENT.
 */
int ql_proc_spawn(uv_loop_t *loop, const ql_proc_spec_t *spec, ql_proc_exit_cb exit_cb, void *arg,
                  ql_proc_t **out, ql_err_t *err);

/* The step's pid (the helper's, which becomes the step's at exec); valid after spawn. */
pid_t ql_proc_pid(const ql_proc_t *proc);
/* The step's process group id (== its pid: the step leads a new session). */
pid_t ql_proc_pgid(const ql_proc_t *proc);

/*
 * Stops the step: SIGTERM to its whole process group now, SIGKILL to the group after grace_ms
 * unless it completed by then. The exit callback still runs, with reason in the result. The
 * first reason stands: stopping an already stopping proc returns 0 and changes nothing.
 * Returns UV_EINVAL for QL_PROC_STOP_NONE or an unknown reason, UV_ESRCH once the proc completed.
 */
int ql_proc_stop(ql_proc_t *proc, ql_proc_stop_reason_t reason);

/*
 * Releases the proc; close_cb (may be NULL) runs with the spawn's arg once the memory is about
 * to be freed. Closing a proc that has not completed SIGKILLs its process group, waits (on the
 * loop) for the process to exit so that it is reaped, and never runs the exit callback. Call it
 * exactly once per spawned proc, from the exit callback or later.
 */
void ql_proc_close(ql_proc_t *proc, ql_proc_close_cb close_cb);

/*
 * SIGKILLs the process group pgid, unchecked. Returns 0 also when the group no longer exists
 * (ESRCH), UV_EINVAL for pgid <= 1 or the caller's own group (kill(-1) would hit every process),
 * or the UV_E* code of kill(). Thread-safe.
 *
 * A group id is a pid: once the whole group is gone the number may be reused, and a new process
 * leading a group with that id would be killed. Recovery therefore uses
 * ql_proc_kill_group_checked() with an identity recorded at spawn instead.
 */
int ql_proc_kill_group(pid_t pgid);

/*
 * Markers. What makes "an interrupted step's processes are gone before its next try starts"
 * hold at every instant, whatever moment the server dies at:
 *   - Every try of a step gets a random token (ql_proc_token_new(), 128 bits), committed in the
 *     store in the same transaction that marks the step RUNNING, that is BEFORE the process is
 *     spawned. The step gets it in its environment as QL_PROC_TOKEN_ENV, and every descendant
 *     inherits it, also one that left the process group (setsid) or was reparented.
 *   - Recovery collects the tokens of every interrupted try into a ql_proc_tokens_t and
 *     ql_proc_kill_tokens() SIGKILLs every live process of the server's user whose environment
 *     (/proc/PID/environ) holds one, scanning /proc again until a scan finds none, before the
 *     recovery is committed and so before any interrupted step may start again.
 *   - No commit forgets a token while the try's processes may run: a shutdown stops and sweeps
 *     the step before it commits the step back to READY; an action (committed before the stop)
 *     keeps the token on the step, and the step's next try sweeps it before committing its own.
 *   - The process group is still recorded after spawn (with the leader's start time and the
 *     boot id, ql_proc_ident_of()), and ql_proc_kill_group_checked() kills it only when the
 *     leader is provably the one recorded: a reused pid has another start time, a reboot
 *     another boot id (and the processes died with the machine).
 * A gap the marker cannot close: a process that wiped or replaced its environment (env -i,
 * execve with a new one) carries no token; it is still killed with its group while the group's
 * leader lives, and PR_SET_PDEATHSIG still kills the step itself. A process whose environment
 * the server may not read (another user's, a setuid or non-dumpable one) is skipped too.
 */
#define QL_PROC_TOKEN_ENV "QILIN_STEP_TOKEN"
#define QL_PROC_TOKEN_LEN 32   /* hex digits */
#define QL_PROC_BOOT_ID_LEN 36 /* a UUID */

/* Fills out with a new random token: QL_PROC_TOKEN_LEN lowercase hex digits and a NUL.
 * Returns 0 or UV_EIO when the random source cannot be initialised. Thread-safe. */
int ql_proc_token_new(char out[QL_PROC_TOKEN_LEN + 1]);
/* Whether s is exactly QL_PROC_TOKEN_LEN hex digits. Thread-safe. */
bool ql_proc_token_valid(const char *s);

/* Who a process group's leader is, beyond its number. */
typedef struct ql_proc_ident {
    pid_t pgid;                            /* the leader's pid == the group id */
    uint64_t start;                        /* its start time, clock ticks after boot */
    char boot_id[QL_PROC_BOOT_ID_LEN + 1]; /* the boot it started in */
} ql_proc_ident_t;

/* Reads pid's start time (/proc/PID/stat field 22) and the boot id into *out (pgid = pid).
 * Returns 0, UV_ESRCH when pid does not exist, or another UV_E* code. Thread-safe. */
int ql_proc_ident_of(pid_t pid, ql_proc_ident_t *out);

/* The machine's boot id (/proc/sys/kernel/random/boot_id) into out. Returns 0 or UV_E*. */
int ql_proc_boot_id(char out[QL_PROC_BOOT_ID_LEN + 1]);

/* What ql_proc_kill_group_checked() did with a recorded group. */
typedef enum ql_proc_group_fate {
    QL_PROC_GROUP_KILLED = 0,  /* the leader was the recorded one: the group was SIGKILLed */
    QL_PROC_GROUP_UNRECORDED,  /* no start time or boot id was recorded: not provable */
    QL_PROC_GROUP_REBOOTED,    /* another boot: the processes died with the machine */
    QL_PROC_GROUP_LEADER_GONE, /* no process has the number: the marker must find the rest */
    QL_PROC_GROUP_PID_REUSED,  /* the number is another process's now */
} ql_proc_group_fate_t;

/*
 * SIGKILLs the process group id->pgid only when it is provably the recorded one: its leader
 * lives with the recorded start time, in the recorded boot; boot_id is the current one
 * (ql_proc_boot_id(), read once for many groups), and then waits until every process of the
 * group is a zombie or gone (ql_proc_group_wait_gone(), at most drain_ms: QL_PROC_DRAIN_MS but
 * in tests, see there): a killed process still holds its files, and so its locks, until the
 * kernel has freed its memory. *fate says what was done. Returns 0 (also when the group was left
 * alone), UV_EBUSY when the killed group still ran after drain_ms (*fate is
 * QL_PROC_GROUP_KILLED), UV_EINVAL for pgid <= 1 or the caller's own group, or the UV_E* code of
 * reading /proc or of kill(). A group whose leader is gone is left to ql_proc_kill_tokens(): its
 * number cannot be proved to be the step's. Blocks for the wait; thread-safe.
 */
int ql_proc_kill_group_checked(const ql_proc_ident_t *id, const char *boot_id, int drain_ms,
                               ql_proc_group_fate_t *fate);
/* "killed", "not recorded", "the machine has rebooted since", "its leader is gone", "the pid
 * belongs to another process" (static). */
const char *ql_proc_group_fate_name(ql_proc_group_fate_t fate);

/* A set of tokens (owned by the caller; not thread-safe, read-only use is). */
typedef struct ql_proc_tokens ql_proc_tokens_t;

/* A new empty set in *out, to be freed with ql_proc_tokens_free(). Returns 0 or UV_ENOMEM. */
int ql_proc_tokens_new(ql_proc_tokens_t **out);
/* Adds token (borrowed; copied). Returns 0, UV_EINVAL when it is not a token, UV_ENOMEM. */
int ql_proc_tokens_add(ql_proc_tokens_t *set, const char *token);
size_t ql_proc_tokens_count(const ql_proc_tokens_t *set);
void ql_proc_tokens_free(ql_proc_tokens_t *set);

/* What a sweep did. */
typedef struct ql_proc_sweep {
    unsigned scans;      /* passes over /proc */
    unsigned examined;   /* environments read in the first pass */
    unsigned killed;     /* SIGKILLs sent (one still exiting at the next pass counts again) */
    unsigned unreadable; /* processes of the user whose environment could not be read */
    unsigned exiting;    /* exiting processes of the user with no environment left: waited for */
    unsigned lingered;   /* of those, still not a zombie drain_ms after the last scan,
                          * or not to be waited for (no descriptor left for its pidfd) */
} ql_proc_sweep_t;

/* Passes over /proc before a sweep gives up, each one after a 1 ms pause. */
#define QL_PROC_SWEEP_MAX_SCANS 500

/*
 * SIGKILLs every live process of the caller's effective uid (but the caller) whose environment
 * holds QL_PROC_TOKEN_ENV=<a token of set>, then scans again, until a scan finds none, and then
 * waits until every process it killed is a zombie or gone. The scans alone would not do: the
 * kernel frees a dying process's memory, and with it the environment the scan reads, before it
 * closes the process's files, so a process the last scan no longer sees may still hold a lock
 * its step's next try needs. Each kill goes through a pidfd (opened before the environment is
 * read the second time, so a reused number is never signalled), and the pidfd is what is waited
 * on: it polls readable once the process has become a zombie. A process someone else killed
 * (PR_SET_PDEATHSIG, the step's watcher) may be in that state when the scan comes: every process
 * of the user that is exiting (PF_EXITING) with its environment already gone is waited for the
 * same way, since whose it was cannot be told any more. A process whose first thread has exited
 * (pthread_exit()) shows no environment of its own while its other threads run on: the
 * environment of another thread is read then. One that is still not a zombie drain_ms
 * (QL_PROC_DRAIN_MS but in tests) after the last scan is counted in stats->lingered and the
 * sweep goes on (it is not provably a step's). One scan serves the whole set, so its cost is
 * one read of the environment per process of the user, whatever the number of tokens. Returns 0
 * when none is left, UV_EBUSY when some were still found after QL_PROC_SWEEP_MAX_SCANS scans or
 * one it killed had not become a zombie drain_ms after the last scan, or the UV_E* code of
 * opening /proc or a pidfd. stats may be NULL. Blocks; thread-safe (it reads the set only).
 */
int ql_proc_kill_tokens(const ql_proc_tokens_t *set, int drain_ms, ql_proc_sweep_t *stats);

typedef enum ql_proc_outcome {
    QL_PROC_SUCCEED = 0,
    QL_PROC_WARNING,
    QL_PROC_ERROR,
} ql_proc_outcome_t;

typedef struct ql_proc_verdict {
    ql_proc_outcome_t outcome;
    char msg[320]; /* why it is not SUCCEED, e.g. "exit code 3"; empty on SUCCEED */
} ql_proc_verdict_t;

/*
 * Maps a result to a step outcome: exit code 0 -> SUCCEED, warning_exit_code (-1 = none) ->
 * WARNING, anything else -> ERROR. A failed exec ("command not found: foo"), a timeout
 * ("timed out after 5000 ms"), a stop ("stopped (PAUSE)") and a signal ("killed by signal 9
 * (SIGKILL)") are ERROR whatever the exit code, checked in that order. Both pointers are
 * borrowed for the call. Returns 0 or UV_EINVAL. Thread-safe.
 */
int ql_proc_classify(const ql_proc_result_t *result, int warning_exit_code, ql_proc_verdict_t *out);

/* "NONE", "PAUSE", "DISCARD", "RESTART", "TIMEOUT", "SHUTDOWN" (static), "?" otherwise. */
const char *ql_proc_stop_reason_name(ql_proc_stop_reason_t reason);

#endif
