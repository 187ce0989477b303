/*
 * Removing models and projects, and purging a model's segments (engine/ql_jobs.h) on every
 * backend: each runs in one transaction; a refused call writes nothing (the store's hash is
 * unchanged); what is removed leaves nothing behind (fsck, counts, listings); live jobs are
 * discarded (drop) or end SUICIDAL with their steps DISCARDED (purge).
 */
#include "engine/engine.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define DAY 86400000LL

static char dir[4096];
static ql_store_t *store;
static ql_id_t m1, m2;
static int64_t now = 1788220800000LL;

static const ql_step_spec_t steps[2] = {{.name = "a", .kind = "noop"},
                                        {.name = "b", .kind = "noop"}};

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "qljobdrop");
    ql_test_store_open(dir, &store);
    ql_err_t err;
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m1", &m1, &err), 0, "%s", err.msg);
    /* A second model in the same project. */
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "m2");
    snprintf(m.project, sizeof m.project, "p");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "D");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    cr_assert_eq(ql_meta_create_model(t, &m, now, &err), 0, "%s", err.msg);
    m2 = m.id;
    ql_model_free(&m);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void teardown(void) {
    ql_store_close(store);
}

TestSuite(job_drop, .init = setup, .fini = teardown);

static ql_job_spec_t spec(void) {
    ql_job_spec_t s = {
        .priority = 3, .submitter = "ADMIN", .now = ++now, .steps = steps, .n_steps = 2};
    return s;
}

static ql_id_t submit(const ql_id_t *model, int day) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_spec_t sp = spec();
    ql_id_t job;
    ql_err_t err;
    int rc = ql_meta_submit_build(t, model, day * DAY, (day + 1) * DAY, &sp, &job, NULL, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    return job;
}

/* An ad-hoc job of project p without a model. */
static ql_id_t submit_adhoc(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_spec_t sp = spec();
    ql_id_t job, none = {{0}};
    ql_err_t err;
    int rc = ql_meta_submit_job(t, "p", &none, "NAP", false, 0, 0, &sp, &job, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    return job;
}

static void succeed(const ql_id_t *job) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_err_t err;
    cr_assert_eq(ql_job_force_finish(t, job, QL_SUCCEED, false, ++now, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static ql_state_t state_of(const ql_id_t *job) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    int rc = ql_job_get(t, job, 0, &j);
    ql_txn_abort(t);
    if (rc == QL_ENOTFOUND)
        return (ql_state_t)-1;
    cr_assert_eq(rc, 0);
    ql_state_t s = j.state;
    ql_job_free(&j);
    return s;
}

static uint64_t segments_of(const ql_id_t *model) {
    ql_txn_t *t;
    uint64_t n;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_segment_count(t, model, &n), 0);
    ql_txn_abort(t);
    return n;
}

static bool model_exists(const ql_id_t *model) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    int rc = ql_model_exists(t, model);
    ql_txn_abort(t);
    cr_assert(rc == 0 || rc == QL_ENOTFOUND);
    return rc == 0;
}

typedef enum { DROP_MODEL, DROP_PROJECT, DROP_PROJECT_DISCARD, PURGE } what_t;

typedef struct {
    ql_id_list_t deleted;
    size_t discarded, purged, ended;
} result_t;

static int run(what_t what, const ql_id_t *model, result_t *r, ql_err_t *err) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_err_clear(err);
    int rc = 0;
    switch (what) {
    case DROP_MODEL:
        rc = ql_model_drop(t, model, ++now, &r->deleted, &r->discarded, err);
        break;
    case DROP_PROJECT:
    case DROP_PROJECT_DISCARD:
        rc = ql_project_drop(t, "p", what == DROP_PROJECT_DISCARD, ++now, &r->deleted,
                             &r->discarded, err);
        break;
    case PURGE:
        rc = ql_model_purge_segments(t, model, ++now, &r->purged, &r->ended, err);
        break;
    }
    if (rc)
        ql_txn_abort(t);
    else
        cr_assert_eq(ql_txn_commit(t), 0);
    return rc;
}

static bool listed(const ql_id_list_t *l, const ql_id_t *id) {
    for (size_t i = 0; i < l->n; i++)
        if (ql_id_eq(&l->ids[i], id))
            return true;
    return false;
}

Test(job_drop, a_model_goes_with_its_jobs_and_segments) {
    ql_id_t done = submit(&m1, 0), live = submit(&m1, 1), other = submit(&m2, 0);
    succeed(&done);
    cr_assert_eq(segments_of(&m1), 2);
    result_t r = {0};
    ql_err_t err;
    cr_assert_eq(run(DROP_MODEL, &m1, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.discarded, 1);
    cr_assert_eq(r.deleted.n, 2);
    cr_assert(listed(&r.deleted, &done) && listed(&r.deleted, &live));
    cr_assert_eq((int)state_of(&done), -1);
    cr_assert_eq((int)state_of(&live), -1);
    cr_assert_not(model_exists(&m1));
    cr_assert_eq(segments_of(&m1), 0);
    cr_assert(model_exists(&m2), "the other model is untouched");
    cr_assert_eq(state_of(&other), QL_READY);
    ql_txn_t *t;
    uint64_t n;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_model_count(t, "p", &n), 0);
    cr_assert_eq(n, 1);
    ql_model_t m;
    cr_assert_eq(ql_model_find(t, "p", "m1", 0, &m), QL_ENOTFOUND);
    ql_txn_abort(t);
    ql_id_list_free(&r.deleted);
    ql_test_assert_fsck_clean(store);
}

Test(job_drop, a_project_with_live_jobs_is_refused_unless_they_are_discarded) {
    ql_id_t done = submit(&m1, 0), live = submit(&m2, 0), adhoc = submit_adhoc();
    succeed(&done);
    uint64_t hash = ql_test_store_hash(store);
    result_t r = {0};
    ql_err_t err;
    cr_assert_eq(run(DROP_PROJECT, NULL, &r, &err), QL_EACTION);
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&live, id);
    cr_assert(strstr(err.msg, id), "%s", err.msg);
    cr_assert(strstr(err.msg, "discard_jobs"), "%s", err.msg);
    cr_assert_eq(ql_test_store_hash(store), hash, "a refused drop wrote nothing");
    ql_id_list_free(&r.deleted);

    r = (result_t){0};
    cr_assert_eq(run(DROP_PROJECT_DISCARD, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.discarded, 2, "the build and the ad-hoc job were live");
    cr_assert_eq(r.deleted.n, 3);
    cr_assert(listed(&r.deleted, &adhoc));
    cr_assert_not(model_exists(&m1));
    cr_assert_not(model_exists(&m2));
    ql_txn_t *t;
    uint64_t n;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "p", 0, &p), QL_ENOTFOUND);
    cr_assert_eq(ql_project_count(t, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(ql_job_count(t, NULL, 0xffffffffu, &n), 0);
    cr_assert_eq(n, 0);
    ql_txn_abort(t);
    ql_id_list_free(&r.deleted);
    ql_test_assert_fsck_clean(store);

    /* The name is free again. */
    ql_id_t again;
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m1", &again, &err), 0, "%s", err.msg);
}

Test(job_drop, a_project_without_live_jobs_goes_without_asking) {
    ql_id_t done = submit(&m1, 0);
    succeed(&done);
    result_t r = {0};
    ql_err_t err;
    cr_assert_eq(run(DROP_PROJECT, NULL, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.discarded, 0);
    cr_assert_eq(r.deleted.n, 1);
    ql_id_list_free(&r.deleted);
    ql_test_assert_fsck_clean(store);
}

Test(job_drop, purge_ends_live_jobs_suicidal_and_removes_every_segment) {
    ql_id_t done = submit(&m1, 0), live = submit(&m1, 1);
    succeed(&done);
    result_t r = {0};
    ql_err_t err;
    cr_assert_eq(run(PURGE, &m1, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(r.ended, 1);
    cr_assert_eq(r.purged, 1, "the live job's NEW segment went with its end");
    cr_assert_eq(segments_of(&m1), 0);
    cr_assert_eq(state_of(&live), QL_SUICIDAL);
    cr_assert_eq(state_of(&done), QL_SUCCEED, "a finished job stays, as history");
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    for (uint32_t seq = 0; seq < 2; seq++) {
        ql_step_t s;
        cr_assert_eq(ql_step_get(t, &live, seq, &s), 0);
        cr_assert_eq(s.state, QL_DISCARDED);
        ql_step_free(&s);
    }
    ql_txn_abort(t);
    cr_assert(model_exists(&m1));
    ql_test_assert_fsck_clean(store);
}

Test(job_drop, the_store_keeps_a_model_or_project_that_is_not_empty) {
    submit(&m1, 0);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_model_delete(t, &m1), QL_EINVAL);
    ql_txn_abort(t);
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_project_delete(t, "p"), QL_EINVAL);
    ql_txn_abort(t);
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_project_delete(t, "nope"), QL_ENOTFOUND);
    cr_assert_eq(ql_model_delete(t, &(ql_id_t){{1}}), QL_ENOTFOUND);
    ql_txn_abort(t);
}
