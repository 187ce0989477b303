/*
 * Internals shared by the passes of the PostgreSQL fsck (store_pg_fsck*.c; not public).
 *
 *   store_pg_fsck.c       the driver (one REPEATABLE READ snapshot), findings, the cursor
 *                         reader; meta, projects, models, segments and segment overlaps
 *   store_pg_fsck_jobs.c  jobs and their steps (a merge join of two cursors), live jobs that
 *                         overlap, outputs without a step
 *
 * Every table is read through a portal (DECLARE CURSOR, FETCH 256), never into one result, so a
 * large store costs the client 256 rows at a time; a pass may run point queries between two
 * fetches on the same connection (the job of a NEW segment, say).
 */
#ifndef QL_STORE_PG_FSCK_INT_H
#define QL_STORE_PG_FSCK_INT_H

#include "store_pg_int.h"

#include <stdio.h>

typedef struct pgf {
    pg_txn_t *t;
    ql_txn_t *txn;
    FILE *out;
    ql_fsck_report_t *r;
    msgpack_zone *z;
    unsigned cursors; /* cursor names used so far */
} pgf_t;

/* Counts a finding and prints it ("violation: ..." or "warning: ...") when there is an output;
 * the same lines as LMDB's fsck where the rule is the same. */
void pgf_finding(pgf_t *f, bool violation, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define PGF_VIOLATION(f, ...) pgf_finding((f), true, __VA_ARGS__)
#define PGF_WARNING(f, ...) pgf_finding((f), false, __VA_ARGS__)

/* A portal over one query (binary results), read a row at a time. */
typedef struct pgf_cur {
    pgf_t *f;
    unsigned id;
    PGresult *r; /* the current batch (owned), NULL before the first fetch */
    int row, n;
    bool end; /* the last batch was short: no FETCH after it */
} pgf_cur_t;

/* Declares a cursor for sql. Returns 0 or the mapped error (the snapshot is then unusable). */
int pgf_cur_open(pgf_t *f, pgf_cur_t *c, const char *sql);
/* Moves to the next row: 1 (then c->r, c->row is the row), 0 at the end, or a negative error. */
int pgf_cur_next(pgf_cur_t *c);
/* Frees the batch and closes the cursor (skipped once the snapshot failed). */
void pgf_cur_close(pgf_cur_t *c);

/* Appends ", name" (or "name" first) to a list of columns that differ from the record. */
void pgf_differs(char *list, size_t cap, bool differs, const char *name);

/* The passes, in the order the driver runs them. Each returns 0 or an error ending the run. */
int pgf_projects(pgf_t *f);
int pgf_models(pgf_t *f);
int pgf_segments(pgf_t *f);
int pgf_segment_overlaps(pgf_t *f);
int pgf_jobs(pgf_t *f);
int pgf_live_overlaps(pgf_t *f);
int pgf_outputs(pgf_t *f);

#endif
