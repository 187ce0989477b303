/*
 * Retention: the master deletes final jobs older than
 * kylin.garbage.storage.executable-survival-time-threshold, with their steps, stored outputs and
 * step logs (docs/design/jobs.md, Deleting jobs; Kylin's metadata cleanup does the same).
 *
 * DESIGN.
 * - Threads: everything runs on the loop thread of the clock (as the scheduler); the deletions
 *   are mutations of the writer (ql_meta_purge_jobs), each checking the master's fencing token
 *   inside its transaction, so a server that lost the lock deletes nothing.
 * - Small batches: one mutation deletes at most `batch` jobs, so it never holds the writer long;
 *   when a batch was full the next one follows after QL_RETENTION_BATCH_PAUSE_MS (other writes
 *   go between), else the next sweep comes after interval_ms.
 * - The step logs are removed after the batch committed; a crash in between leaves log folders
 *   of deleted jobs, which nothing reads (a log nobody removes costs disk only).
 * - Durable: nothing of its own; a sweep cut short by a stop or a crash is taken up by the next.
 */
#ifndef QL_RETENTION_H
#define QL_RETENTION_H

#include "base/base.h"
#include "storage/storage.h"

#include <stddef.h>
#include <stdint.h>

#define QL_RETENTION_BATCH_PAUSE_MS 50

typedef struct ql_retention ql_retention_t;

typedef struct ql_retention_opts {
    ql_store_t *store;   /* borrowed: the step logs of a deleted job are removed from it */
    ql_writer_t *writer; /* borrowed */
    ql_clock_t *clock;   /* borrowed */
    ql_log_t *log;       /* borrowed, may be NULL */
    int64_t survival_ms; /* a final job whose last change is older than this goes */
    int64_t interval_ms; /* between two sweeps; the first sweep starts at once */
    size_t batch;        /* jobs per transaction at most; 0: 100 */
    uint64_t fence;      /* the master's fencing token (0: none, tests) */
    bool manual_flush;   /* the writer is in manual mode: flush what is submitted */
} ql_retention_opts_t;

typedef struct ql_retention_stats {
    uint64_t removed; /* jobs deleted so far */
    uint64_t batches; /* deleting transactions committed */
    uint64_t sweeps;  /* sweeps completed (nothing older was left) */
    int last_error;   /* the last failed batch's code, 0 once one succeeds */
} ql_retention_stats_t;

/* Creates the task (not started). *out is freed by ql_retention_free. 0 or UV_ENOMEM. */
int ql_retention_new(const ql_retention_opts_t *opts, ql_retention_t **out);
/* Starts sweeping: the first sweep at once, then every interval_ms. */
void ql_retention_start(ql_retention_t *r);
/* Stops sweeping and frees r; a batch still in the writer is answered later and frees what is
 * left then (its deletions may still commit: they were checked under the fence; their logs are
 * removed then). NULL is fine. */
void ql_retention_free(ql_retention_t *r);
void ql_retention_get_stats(const ql_retention_t *r, ql_retention_stats_t *out);

#endif
