/*
 * The writer guard: a lock every process takes before it begins a write transaction on a store,
 * so that a process stopped while it writes stalls the others for a bounded time only.
 *
 * DESIGN.
 * - Why. LMDB lets one write transaction run at a time per environment, through a robust
 *   process-shared mutex in lock.mdb. A holder that is stopped (SIGSTOP, a debugger, a frozen
 *   cgroup) keeps that mutex for as long as it is stopped: nothing can make it release it, only
 *   its death does (the next locker gets EOWNERDEAD and LMDB recovers the environment). Every
 *   other server's writes, the master's step ends and picks included, would wait with it.
 * - What. Before a top-level write transaction begins, the process takes an exclusive POSIX
 *   record lock (fcntl F_SETLK) on <data>/writer.guard (0600), and writes its pid, its start
 *   time and the time into the file for whoever looks (`cat writer.guard`); it unlocks when the
 *   transaction commits or aborts. So whoever holds LMDB's write mutex holds the guard, and a
 *   waiter waits on the guard, where it can look at the holder, instead of inside LMDB.
 * - Bound. A waiter tries without blocking, in steps of 0.2 ms growing to 5 ms. Once it has
 *   waited stall_ms (qilin.storage.writer-stall-ms) it asks the kernel who holds the guard
 *   (F_GETLK gives the holder's pid: the truth, unlike the file's text, which may be a previous
 *   holder's) and reads /proc: a holder of the same uid that is stopped or traced (state T or
 *   t) is SIGKILLed, through a pidfd checked against its start time, and one line is logged
 *   saying who and why; the kernel frees the guard at its death and LMDB recovers its mutex.
 *   A holder that runs (a slow fsync, a large commit) is waited for, logged once. So no stopped
 *   process stalls another's writes for more than about stall_ms.
 * - A POSIX lock rather than flock(2): F_GETLK names the holder; a lock is not inherited by a
 *   fork (a step's process never holds it). It belongs to the process, not the thread, so the
 *   threads of one process are serialised by a mutex first (LMDB serialises them anyway), and
 *   the guard's descriptor is never closed while the store is open (closing any descriptor of
 *   the file would drop the process's lock).
 * - Cost: an uncontended begin and end add two fcntl calls and one pwrite of about 60 bytes
 *   (no sync); the writer's group commit takes the guard once per batch.
 * - Only processes of this build take the guard: an older binary on the same store still
 *   writes without it, unbounded as before.
 */
#ifndef QL_WRITER_GUARD_H
#define QL_WRITER_GUARD_H

#include "base/ql_log.h"

#include <stdint.h>

typedef struct ql_wguard ql_wguard_t;

/* Opens (creating, 0600) <dir>/writer.guard. stall_ms: how long a waiter waits before it looks
 * at the holder. log (borrowed, must outlive the guard) gets the decisions; NULL: stderr. */
int ql_wguard_open(const char *dir, int64_t stall_ms, ql_log_t *log, ql_wguard_t **out);
void ql_wguard_close(ql_wguard_t *g);
/* Takes the guard, waiting as described above. Returns 0, or a negative error (the lock call
 * itself failed; nothing is held then). */
int ql_wguard_enter(ql_wguard_t *g);
/* Releases what ql_wguard_enter took, from the same thread. */
void ql_wguard_leave(ql_wguard_t *g);

#endif
