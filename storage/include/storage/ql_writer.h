/*
 * The writer: the one owner of write transactions in a running server, applying queued
 * mutations with group commit.
 *
 * DESIGN.
 * - Callers queue mutations (a function that changes records inside a transaction). The writer
 *   takes everything queued, runs each mutation in its own nested transaction inside one write
 *   transaction, commits once (synced), and only then answers each caller. A mutation that
 *   fails (an overlap, a full map) has its nested transaction aborted and fails alone; the
 *   others in the batch still commit. A batch of one mutation runs it in the write transaction
 *   itself, which its failure aborts: the same outcome, without a nested transaction's cost.
 * - Invariant: no caller is answered before the sync of the transaction that holds its change.
 *   Durability is never relaxed: one fsync serves the whole batch, which is where the speed of
 *   group commit comes from.
 * - Threads. Threaded mode: a writer thread applies batches (one per lane, below); answers
 *   (done callbacks) run on the owner's thread when it calls ql_writer_complete(), which it
 *   does when told to by the notify hook (the node wakes its loop through an eventfd,
 *   server/node_wake.h; a wake-up may stand for several answers: complete() drains everything
 *   ready). Without a notify hook, done callbacks run on the writer thread. Manual mode
 *   (simulator, deterministic tests): nothing runs until the owner calls ql_writer_flush(),
 *   which applies and answers in the calling thread.
 * - A mutation function runs on a writer thread: it may read and write through the txn it is
 *   given, must not block, and must not touch the owner's state, nor state another mutation
 *   may touch (with lanes, mutations of different keys run at once). Its arg is borrowed until
 *   its done callback has run.
 * - A full map: a mutation that does not fit fails alone with QL_EMAPFULL. When the ones that
 *   fit leave no room for the commit itself, they are run again in smaller transactions, so a
 *   mutation function may run more than once (each earlier run's changes discarded): it must
 *   derive its changes from the transaction and its arg only, and write its outputs anew.
 * - Lanes (docs/postgresql.md, Writer lanes). On a store whose write transactions of several
 *   sessions run at once (PostgreSQL), the writer may run several lanes, threads that each
 *   apply a batch in a transaction of their own: the database's round trips and commits of one
 *   batch overlap those of another. A mutation carries write keys (ql_writer_key of each model
 *   it changes), and the lanes keep one rule: no two batches applied at once share a key, and
 *   no mutation overtakes an earlier one it shares a key with. So mutations of one model commit
 *   in the order they were queued and never wait for each other's locks across lanes;
 *   mutations of different models may commit in either order. A mutation is overtaken by one
 *   batch at most, so none waits for long. A mutation queued without keys (ql_writer_submit,
 *   ql_writer_call) has every key: it runs alone, after everything queued before it and before
 *   everything queued after it, as with one lane. Keys are a schedule, not a guarantee: the
 *   store's own locks and constraints still decide every conflict, so a mutation that touches
 *   a model its keys do not name is still correct (it may wait for a lock, or be retried after
 *   a deadlock, as any write transaction may). Manual mode and LMDB have one lane.
 * - Health: the writer keeps when it last committed, how long its oldest uncommitted mutation
 *   has waited and, while writes fail with a store error (a full map or disk), which error and
 *   since when (ql_writer_health). It does not retry: a failed mutation is answered with its
 *   error, and whoever must not lose the change (the scheduler's step ends) submits it again.
 */
#ifndef QL_WRITER_H
#define QL_WRITER_H

#include "storage/ql_store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ql_writer ql_writer_t;

/* Changes records through txn. Returns 0, or a negative code (with err set to say why) to have
 * its changes discarded. */
typedef int (*ql_write_fn)(ql_txn_t *txn, void *arg, ql_err_t *err);
/* The answer: status 0 once the change is durable, or the mutation's (or the commit's) error;
 * err is borrowed for the duration of the call. */
typedef void (*ql_write_done_cb)(void *arg, int status, const ql_err_t *err);

typedef struct ql_writer_opts {
    bool manual;               /* true: manual mode, see above */
    void (*notify)(void *arg); /* threaded mode: called on the writer thread when answers are
                                  ready for ql_writer_complete(); NULL: answer on the writer
                                  thread */
    void *notify_arg;
    size_t max_batch; /* mutations per transaction at most; 0: 4096 (PostgreSQL: at most 48) */
    /* threaded mode on a store whose write transactions run at once (PostgreSQL): how many
     * lanes apply batches (see Lanes), at most QL_WRITER_LANES_MAX; 0 or 1: one */
    unsigned lanes;
} ql_writer_opts_t;

#define QL_WRITER_LANES_MAX 16

typedef struct ql_writer_stats {
    uint64_t batches;   /* committed write transactions */
    uint64_t mutations; /* mutations applied (succeeded or failed) */
    uint64_t failed;    /* mutations that failed */
    uint64_t max_batch; /* largest batch so far */
} ql_writer_stats_t;

/* Starts a writer on store (borrowed; it must outlive the writer). */
int ql_writer_new(ql_store_t *store, const ql_writer_opts_t *opts, ql_writer_t **out);
/* Applies what is still queued, answers it, stops the thread, frees. Call from the owner
 * thread; in threaded mode with a notify hook the remaining answers run inside this call. */
void ql_writer_free(ql_writer_t *w);

/* Queues a mutation. Thread-safe. Returns QL_ESHUTDOWN once the writer is stopping (then done
 * is never called). */
int ql_writer_submit(ql_writer_t *w, ql_write_fn fn, void *arg, ql_write_done_cb done);
/* Queues a mutation with write keys keys[0..n_keys) (see Lanes; copied; none: every key).
 * Otherwise as ql_writer_submit. */
int ql_writer_submit_keyed(ql_writer_t *w, const uint64_t *keys, size_t n_keys, ql_write_fn fn,
                           void *arg, ql_write_done_cb done);
/* The write key of a model (or of any record that orders the mutations touching it). */
uint64_t ql_writer_key(const ql_id_t *id);
/* Queues a mutation and waits for its answer; returns its status, err (may be NULL) gets the
 * message. Not from inside a done callback or mutation. Works in every mode (manual mode
 * flushes). */
int ql_writer_call(ql_writer_t *w, ql_write_fn fn, void *arg, ql_err_t *err);

/* Threaded mode with notify: runs the done callbacks of every committed mutation. */
void ql_writer_complete(ql_writer_t *w);
/* Manual mode: applies everything queued (including what done callbacks queue meanwhile) and
 * answers it. Returns the number of mutations applied. */
size_t ql_writer_flush(ql_writer_t *w);
/* Manual mode: whether anything is queued. */
bool ql_writer_pending(ql_writer_t *w);
/* Whether w runs in manual mode (its submitters then flush what they queue). */
bool ql_writer_is_manual(const ql_writer_t *w);

void ql_writer_get_stats(ql_writer_t *w, ql_writer_stats_t *out);
/* How many lanes apply batches (1 unless opts.lanes asked for more on a store that can). */
size_t ql_writer_lanes(const ql_writer_t *w);

/* Whether code says the store could not take a write (a full map or disk, an I/O error, no
 * memory, a map grown past this process's), as opposed to a mutation refused by the rules
 * (an overlap, a conflict, a fencing refusal): a write failed that way may work later. */
bool ql_writer_store_error(int code);

/* How writes go, for health checks (GET /healthz). Ages are milliseconds of the monotonic
 * clock, measured when the call is made. */
typedef struct ql_writer_health {
    uint64_t commits;          /* write transactions committed so far */
    int64_t since_commit_ms;   /* since the last commit (since the writer started before one) */
    size_t pending;            /* mutations queued or being applied, not committed yet */
    int64_t oldest_pending_ms; /* how long the oldest of them has waited; 0 when none */
    /* Writes failing: the store error (ql_writer_store_error) of the last failed mutation, 0
     * once a batch commits with no such error. */
    int error;
    char error_msg[512];
    int64_t failing_ms; /* since the first of those failures */
    uint64_t failures;  /* mutations that failed since then */
} ql_writer_health_t;
/* Fills out. Thread-safe. */
void ql_writer_health(ql_writer_t *w, ql_writer_health_t *out);
ql_store_t *ql_writer_store(ql_writer_t *w);

#endif
