/*
 * Internals shared by the passes of ql_store_fsck (storage/fsck*.c; not public).
 *
 *   fsck.c            the driver (one read transaction, the passes in order), findings, the
 *                     per-project tallies
 *   fsck_models.c     meta, projects, models and model_names
 *   fsck_segments.c   segments and segment_ids; overlaps; the jobs of NEW segments
 *   fsck_jobs.c       jobs and their steps (a merge join), outputs
 *   fsck_job_index.c  the job indexes (job_states, job_recent, job_live, job_models) both ways;
 *                     live jobs of one model do not overlap
 *   fsck_counts.c     the counters against the tallies of the passes before
 *
 * Every pass takes the one ql_fsck_t of the run, reports what it finds through VIOLATION and
 * WARNING, and returns 0 or a negative error that ends the run (a finding is not an error).
 */
#ifndef QL_FSCK_INT_H
#define QL_FSCK_INT_H

#include "store_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Key lengths of store_lmdb_segments.c and of the steps (documented in store_int.h; the job index
 * keys come from store_int.h itself). */
#define SEG_KEY_LEN 41
#define STEP_KEY_LEN 20

/* ---- per-project tallies (models and jobs by state), a small open-addressing table ---- */

typedef struct ql_fsck_proj {
    char name[QL_NAME_MAX + 1];
    bool used;
    bool exists; /* a project record has this name */
    bool seen_m;
    bool seen_j[QL_JOB_STATE_COUNT];
    uint64_t models;
    uint64_t jobs[QL_JOB_STATE_COUNT];
} ql_fsck_proj_t;

typedef struct {
    ql_fsck_proj_t *slots;
    size_t cap, n;
} ql_fsck_projects_t;

typedef struct ql_fsck {
    ql_txn_t *txn;
    MDB_txn *mt;
    ql_store_t *store;
    FILE *out;
    ql_fsck_report_t *r;
    msgpack_zone *zone;
    ql_fsck_projects_t projects;
    uint64_t all_jobs[QL_JOB_STATE_COUNT]; /* the global ("" project) counters */
    bool seen_all[QL_JOB_STATE_COUNT];
    /* Job index entries found where a job record expects them. */
    uint64_t found_state, found_recent, found_live, found_models;
} ql_fsck_t;

/* Counts a finding in the report and prints it as one line ("violation: ..." or "warning: ...")
 * when the run has an output file. */
void ql_fsck_finding(ql_fsck_t *f, bool violation, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define VIOLATION(f, ...) ql_fsck_finding((f), true, __VA_ARGS__)
#define WARNING(f, ...) ql_fsck_finding((f), false, __VA_ARGS__)

/* The tally of a project name of n bytes (not NUL-terminated), created when missing; NULL only
 * when out of memory or the name is too long to be a project. The entry is owned by the table
 * and valid until the next lookup (which may grow it). */
ql_fsck_proj_t *ql_fsck_proj_lookup(ql_fsck_projects_t *t, const char *name, size_t n);

/* ---- small helpers ---- */

static inline int cursor(ql_fsck_t *f, int db, MDB_cursor **c) {
    return ql_db_cursor(f->txn, db, c);
}

static inline uint64_t entries(ql_fsck_t *f, int db) {
    MDB_stat st;
    if (mdb_stat(f->mt, ql_lmdb(f->store)->dbi[db], &st))
        return 0;
    return st.ms_entries;
}

static inline bool exists(ql_fsck_t *f, int db, const void *key, size_t klen, MDB_val *val) {
    MDB_val v;
    return ql_db_get(f->txn, db, key, klen, val ? val : &v) == 0;
}

static inline void idstr(const void *bytes, char *buf) {
    ql_id_t id;
    memcpy(id.b, bytes, 16);
    ql_id_format(&id, buf);
}

/* ---- the passes, in the order the driver runs them ---- */

int ql_fsck_meta(ql_fsck_t *f);
int ql_fsck_projects(ql_fsck_t *f);
int ql_fsck_models(ql_fsck_t *f);
int ql_fsck_segments(ql_fsck_t *f);
/* Jobs and steps; calls ql_fsck_job_indexes for each job record, then ql_fsck_job_index_stale. */
int ql_fsck_jobs(ql_fsck_t *f);
int ql_fsck_live_disjoint(ql_fsck_t *f);
int ql_fsck_outputs(ql_fsck_t *f);
/* Needs the tallies of every pass before it. */
int ql_fsck_counts(ql_fsck_t *f);

/* ---- the job indexes (fsck_job_index.c), for ql_fsck_jobs ---- */

/* Checks the index entries job record j (a valid job state) expects, counting those found. */
void ql_fsck_job_indexes(ql_fsck_t *f, const ql_job_t *j, const char *id);
/* Once every job record was checked: names the stale entries of each job index that has more
 * entries than were found. */
int ql_fsck_job_index_stale(ql_fsck_t *f);

#endif
