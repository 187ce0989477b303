/*
 * Facts about another process of this host, read from /proc, for deciding whether a process
 * that holds a lock of the store may be killed (the writer guard, storage/writer_guard.h; the
 * job engine lock's lease, scheduler/lock_file.c).
 *
 * A pid alone is not a process: pids are reused. A process is named here by its pid and its
 * start time (field 22 of /proc/PID/stat, clock ticks since boot), which together never name two
 * processes on one boot. ql_proc_kill() checks both through a pidfd, so the signal cannot reach
 * a process that took the pid after the check.
 */
#ifndef QL_PROCINFO_H
#define QL_PROCINFO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ql_proc_info {
    char state;     /* /proc/PID/stat field 3: R, S, D, T (stopped), t (traced), Z, ... */
    uint64_t start; /* field 22: start time in clock ticks since boot */
    uid_t uid;      /* the owner of /proc/PID: the process's effective uid */
    pid_t pgrp;     /* field 5: its process group */
    bool exiting;   /* field 9 has PF_EXITING: it has begun to exit and runs no code of its own,
                     * but may still hold its files (see ql_proc_group_running()) */
} ql_proc_info_t;

/* Reads pid's facts. Returns 0, UV_ESRCH when there is no such process, or another negative
 * error. */
int ql_proc_info(pid_t pid, ql_proc_info_t *out);
/* This process's start time (0 if /proc cannot tell). */
uint64_t ql_proc_self_start(void);
/* Whether a process in this state runs no code until someone continues it: stopped by a
 * signal (T) or by a tracer (t). */
static inline bool ql_proc_is_stopped(char state) {
    return state == 'T' || state == 't';
}
/* Sends sig to the process named by pid and start time, if it still is that process. Returns 0,
 * UV_ESRCH when it is gone or the pid names another process now, or another negative error. */
int ql_proc_kill(pid_t pid, uint64_t start, int sig);
/*
 * Whether a process of group pgid may still run code or hold what it holds: one that is not a
 * zombie (state Z or X), or a zombie whose other threads still run (a first thread that called
 * pthread_exit() shows as a zombie; its pidfd tells, polling readable once all have exited). A
 * process killed by a signal is not done when it begins to exit: the kernel frees its memory first
 * (its /proc environment reads empty from then on) and closes its files after that, so a lock it
 * holds on a file, or the write end of a pipe, outlives its last instruction by as long as the
 * teardown of its memory takes (milliseconds for a large process). Only the zombie state says that
 * all of it is released. One kill(-pgid, 0) answers for a group that is gone altogether; otherwise
 * one pass over /proc (a zombie nobody has reaped yet keeps the group's number taken). When /proc
 * cannot be read the answer is true: a caller must not take a group it cannot see for stopped.
 * Thread-safe.
 */
bool ql_proc_group_running(pid_t pgid);
/* Polls ql_proc_group_running() every millisecond until it is false. Returns 0, or UV_EBUSY
 * when a process of the group still runs after timeout_ms (one stuck in an uninterruptible
 * sleep, say on a dead NFS server, dies only when the kernel lets it). Blocks; thread-safe. */
int ql_proc_group_wait_gone(pid_t pgid, int timeout_ms);
/* Milliseconds of CLOCK_BOOTTIME: monotonic, shared by every process of the host, and counting
 * time suspended, so a lease read by another process means the same thing. */
int64_t ql_boot_ms(void);

#endif
