/*
 * The store refuses values out of its bounds as bad input: QL_EINVAL naming the field, nothing
 * written (the tables hash the same before and after). QL_ECORRUPT (QL-00010) must only ever
 * mean a corrupt store, so no value a caller passes may produce it: an empty or over-long name
 * used to reach LMDB as an empty or over-long key, whose MDB_BAD_VALSIZE was reported as a
 * corrupt store.
 *
 * One row per bound; each row runs as the writer runs a mutation (a nested transaction of a
 * write transaction, aborted when it fails).
 */
#include "storage/storage.h"
#include "storage/store_int.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY 86400000LL

static char dir[64];
static ql_store_t *store;
static ql_id_t model;     /* the daily model "m" of project "p" */
static ql_id_t fullmodel; /* the full-load model "full" of project "p" */

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_bounds");
    ql_store_opts_t o = {.path = dir};
    ql_err_t err;
    cr_assert_eq(ql_store_open(&o, &store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m", &model, &err), 0, "%s", err.msg);
    ql_model_t full = {0};
    snprintf(full.project, sizeof full.project, "p");
    snprintf(full.name, sizeof full.name, "full");
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_meta_create_model(t, &full, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    fullmodel = full.id;
}

static void teardown(void) {
    ql_store_close(store);
    ql_test_rm_tree(dir);
}

TestSuite(meta_bounds, .init = setup, .fini = teardown);

static const ql_step_spec_t steps[1] = {{.name = "Load", .kind = "noop"}};
static const ql_job_spec_t spec = {
    .priority = 3, .submitter = "ADMIN", .now = 1788192000000, .steps = steps, .n_steps = 1};

typedef enum { BUILD, JOB, MODEL, SEGMENT, JOB_PUT } kind_t;

typedef struct row {
    const char *what;
    kind_t kind;
    const char *project; /* JOB, MODEL */
    int64_t start, end;
    int code;          /* 0: accepted */
    const char *field; /* in the message (ql_meta calls; the record puts have none) */
} row_t;

static int run_row(ql_txn_t *t, const row_t *r, ql_err_t *err) {
    switch (r->kind) {
    case BUILD:
        return ql_meta_submit_build(t, &model, r->start, r->end, &spec, NULL, NULL, err);
    case JOB:
        return ql_meta_submit_job(t, r->project, NULL, "INDEX_BUILD", r->start != r->end, r->start,
                                  r->end, &spec, NULL, err);
    case MODEL: {
        ql_model_t m = {0};
        snprintf(m.project, sizeof m.project, "%s", r->project);
        snprintf(m.name, sizeof m.name, "m2");
        return ql_meta_create_model(t, &m, 1, err);
    }
    case SEGMENT: {
        ql_segment_t s = {0};
        ql_store_new_id(store, &s.id);
        s.model = r->end == QL_RANGE_FULL_END ? fullmodel : model;
        s.start = r->start;
        s.end = r->end;
        return ql_segment_put(t, &s);
    }
    case JOB_PUT: {
        ql_job_t j = {0};
        ql_store_new_id(store, &j.id);
        snprintf(j.project, sizeof j.project, "p");
        snprintf(j.type, sizeof j.type, "INDEX_BUILD");
        j.priority = 3;
        j.has_range = true;
        j.range_start = r->start;
        j.range_end = r->end;
        return ql_job_put(t, &j);
    }
    }
    return QL_EINVAL;
}

Test(meta_bounds, out_of_bounds_values_are_einval_and_write_nothing) {
    static const row_t rows[] = {
        {"a build from before the epoch", BUILD, NULL, -DAY, 0, QL_EINVAL, "start"},
        {"a build from -1 ms", BUILD, NULL, -1, DAY, QL_EINVAL, "start"},
        {"a build past 9999-12-31", BUILD, NULL, 0, QL_TIME_MAX + 1, QL_EINVAL, "end"},
        {"a build to the full-load end", BUILD, NULL, 0, QL_RANGE_FULL_END, QL_EINVAL, "end"},
        {"a build from INT64_MIN", BUILD, NULL, INT64_MIN, DAY, QL_EINVAL, "start"},
        {"an empty build", BUILD, NULL, DAY, DAY, QL_EEMPTYRANGE, "empty"},
        {"a job from before the epoch", JOB, "p", -DAY, DAY, QL_EINVAL, "start"},
        {"a job past 9999-12-31", JOB, "p", 0, QL_TIME_MAX + 1, QL_EINVAL, "end"},
        {"a job in the project ''", JOB, "", 0, 0, QL_EINVAL, "project"},
        {"a job in the project 'a-b'", JOB, "a-b", 0, 0, QL_EINVAL, "project"},
        {"a model in the project ''", MODEL, "", 0, 0, QL_EINVAL, "project"},
        {"a model in the project 'a b'", MODEL, "a b", 0, 0, QL_EINVAL, "project"},
        {"a segment from before the epoch", SEGMENT, NULL, -DAY, DAY, QL_EINVAL, NULL},
        {"a segment past 9999-12-31", SEGMENT, NULL, 0, QL_TIME_MAX + 1, QL_EINVAL, NULL},
        {"a full-load segment not from 0", SEGMENT, NULL, 1, QL_RANGE_FULL_END, QL_EINVAL, NULL},
        {"a job record from before the epoch", JOB_PUT, NULL, -DAY, DAY, QL_EINVAL, NULL},
        /* The bounds themselves are accepted. */
        {"a build of the first day", BUILD, NULL, 0, DAY, 0, NULL},
        {"a build of the last day", BUILD, NULL, QL_TIME_MAX - DAY, QL_TIME_MAX, 0, NULL},
        {"a job on the last day", JOB, "p", QL_TIME_MAX - DAY, QL_TIME_MAX, 0, NULL},
        {"a full-load segment", SEGMENT, NULL, 0, QL_RANGE_FULL_END, 0, NULL},
        {"a job record of the first day", JOB_PUT, NULL, 0, DAY, 0, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row_t *r = &rows[i];
        uint64_t before = ql_test_store_hash(store);
        ql_txn_t *top, *child;
        cr_assert_eq(ql_txn_begin(store, true, &top), 0);
        cr_assert_eq(ql_txn_begin_nested(top, &child), 0);
        ql_err_t err = {0};
        int rc = run_row(child, r, &err);
        if (rc)
            ql_txn_abort(child);
        else
            cr_assert_eq(ql_txn_commit(child), 0);
        cr_assert_eq(ql_txn_commit(top), 0);
        cr_assert_eq(rc, r->code, "%s: expected %s, got %s (%s)", r->what, ql_strerror(r->code),
                     ql_strerror(rc), err.msg);
        if (r->code) {
            cr_assert_eq(ql_test_store_hash(store), before, "%s: the store changed", r->what);
            if (r->field)
                cr_assert(strstr(err.msg, r->field), "%s: '%s' does not name %s", r->what, err.msg,
                          r->field);
        }
    }
    ql_test_assert_fsck_clean(store);
}

/* Lookups by a name that cannot be a key (empty, or longer than LMDB's key limit) are bad input,
 * never a corrupt store; a name within the key limit but over QL_NAME_MAX is simply absent. */
Test(meta_bounds, lookups_by_impossible_names_are_not_corruption) {
    char long_name[700];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "", 0, &p), QL_EINVAL);
    cr_assert_eq(ql_project_get(t, long_name, 0, &p), QL_EINVAL);
    long_name[QL_NAME_MAX + 1] = '\0';
    cr_assert_eq(ql_project_get(t, long_name, 0, &p), QL_ENOTFOUND);
    ql_model_t m;
    cr_assert_eq(ql_model_find(t, "", "m", 0, &m), QL_ENOTFOUND);
    ql_txn_abort(t);

    uint64_t before = ql_test_store_hash(store);
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_model_t bad = {0};
    snprintf(bad.name, sizeof bad.name, "m3");
    ql_err_t err = {0};
    int rc = ql_meta_create_model(t, &bad, 1, &err);
    ql_txn_abort(t);
    cr_assert_eq(rc, QL_EINVAL, "got %s: %s", ql_strerror(rc), err.msg);
    cr_assert_neq(rc, QL_ECORRUPT);
    cr_assert(strstr(err.msg, "project"), "%s", err.msg);
    cr_assert_eq(ql_test_store_hash(store), before);
}

/* The job limits of ql_records.h, the ones the engine and the API use: a type of 64 characters
 * and 100 steps (step ids _00 to _99) are stored and read back; one more of either is QL_EINVAL
 * naming the field, never a job the store cannot read back (the store once took 63 and 99, and
 * read a job of 100 steps as corrupt). */
static int submit_limits(size_t type_len, size_t n_steps, ql_id_t *job, ql_err_t *err) {
    char type[80];
    cr_assert_lt(type_len, sizeof type);
    memset(type, 'T', type_len);
    type[type_len] = '\0';
    static ql_step_spec_t many[128];
    cr_assert_leq(n_steps, sizeof many / sizeof many[0]);
    for (size_t i = 0; i < n_steps; i++)
        many[i] = (ql_step_spec_t){.name = "s", .kind = "noop"};
    ql_job_spec_t s = spec;
    s.steps = many;
    s.n_steps = n_steps;
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    int rc = ql_meta_submit_job(t, "p", NULL, type, false, 0, 0, &s, job, err);
    if (rc)
        ql_txn_abort(t);
    else
        cr_assert_eq(ql_txn_commit(t), 0);
    return rc;
}

Test(meta_bounds, a_job_type_of_64_characters_and_100_steps_are_stored_and_read_back) {
    cr_assert_eq(QL_TYPE_MAX, 64);
    cr_assert_eq(QL_JOB_STEPS_MAX, 100);
    ql_err_t err = {0};
    ql_id_t id;
    cr_assert_eq(submit_limits(64, 100, &id, &err), 0, "%s", err.msg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &id, 0, &j), 0, "a 100-step job reads back");
    cr_assert_eq(strlen(j.type), 64);
    cr_assert_eq(j.n_steps, 100);
    ql_job_free(&j);
    ql_step_t st;
    cr_assert_eq(ql_step_get(t, &id, 99, &st), 0);
    char sid[QL_ID_STR_LEN + 8], want[QL_ID_STR_LEN + 8];
    ql_step_id_format(&id, st.seq, sid);
    ql_id_format(&id, want);
    strcat(want, "_99");
    cr_assert_str_eq(sid, want);
    ql_step_free(&st);
    ql_txn_abort(t);

    err = (ql_err_t){0};
    cr_assert_eq(submit_limits(65, 1, &id, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "type: 'TTTT") && strstr(err.msg, "at most 64 characters"), "%s",
              err.msg);
    err = (ql_err_t){0};
    cr_assert_eq(submit_limits(1, 101, &id, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "steps: a job has 1 to 100 steps, not 101");
}
