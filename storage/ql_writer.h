/*
 * The writer: the one owner of write transactions in a running server, applying queued
 * mutations with group commit.
 *
 * DESIGN.
 * - Callers queue mutations (a function that changes records inside a transaction). The writer
 *   takes everything queued, runs each mutation in its own nested transaction inside one write
 *   transaction, commits once (synced), and only then answers each caller. A mutation that
 *   fails (an overlap, a full map) has its nested transaction aborted and fails alone; the
 *   others in the batch still commit.
 * - Invariant: no caller is answered before the sync of the transaction that holds its change.
 *   Durability is never relaxed: one fsync serves the whole batch, which is where the speed of
 *   group commit comes from.
 * - Threads. Threaded mode: one writer thread applies batches; answers (done callbacks) run on
 *   the owner's thread when it calls ql_writer_complete(), which it does when told to by the
 *   notify hook (a libuv server passes uv_async_send; uv_async coalesces, and complete() drains
 *   everything ready). Without a notify hook, done callbacks run on the writer thread.
 *   Manual mode (simulator, deterministic tests): nothing runs until the owner calls
 *   ql_writer_flush(), which applies and answers in the calling thread.
 * - A mutation function runs on the writer thread: it may read and write through the txn it is
 *   given, must not block, and must not touch the owner's state. Its arg is borrowed until its
 *   done callback has run.
 * - A full map: a mutation that does not fit fails alone with QL_EMAPFULL. When the ones that
 *   fit leave no room for the commit itself, they are run again in smaller transactions, so a
 *   mutation function may run more than once (each earlier run's changes discarded): it must
 *   derive its changes from the transaction and its arg only, and write its outputs anew.
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
    size_t max_batch; /* mutations per transaction at most; 0: 4096 */
} ql_writer_opts_t;

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

void ql_writer_get_stats(ql_writer_t *w, ql_writer_stats_t *out);
ql_store_t *ql_writer_store(ql_writer_t *w);

#endif
