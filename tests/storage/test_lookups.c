/*
 * The lookups that save PostgreSQL statements per job (docs/performance.md, "Fewer statements
 * per job, from the callers"), on both backends: a build's target read in one lookup
 * (ql_model_find_with_project), the pick's existence checks in one (ql_model_segment_exists), a
 * read transaction without BEGIN or ROLLBACK (ql_txn_begin_lookups), and a build that writes
 * its NEW segment once, owned by its job, reading its model once when the caller has it, and
 * (PostgreSQL) the model lock taken inside the write that needs it.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static char dir[256];
static ql_store_t *store;
static ql_id_t model; /* "m" of project "p" */
static const ql_step_spec_t steps[1] = {{.name = "build", .kind = "noop"}};

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_lookups");
    ql_test_store_open(dir, &store);
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m", &model, &err), 0, "%s", err.msg);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
}

static bool is_pg(void) {
    return strcmp(ql_test_store_backend(), "pg") == 0;
}

/* A build of day d of model m; the job's and the segment's ids. spec_model: spec.model. */
static void build(const ql_id_t *m, int d, const ql_model_t *spec_model, ql_id_t *job,
                  ql_id_t *seg) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_spec_t spec = {.priority = 3,
                          .submitter = "ADMIN",
                          .now = 1000 + d,
                          .steps = steps,
                          .n_steps = 1,
                          .model = spec_model};
    ql_err_t err = {0};
    int64_t day = 86400000;
    int rc = ql_meta_submit_build(t, m, d * day, (d + 1) * day, &spec, job, seg, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
}

TestSuite(lookups, .init = setup, .fini = teardown);

Test(lookups, a_build_writes_its_new_segment_once_owned_by_its_job) {
    ql_id_t job, seg;
    build(&model, 1, NULL, &job, &seg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_segment_t s;
    cr_assert_eq(ql_segment_get(t, &seg, &s), 0);
    cr_assert(ql_id_eq(&s.job, &job), "the NEW segment names its job");
    cr_assert_eq(s.status, QL_SEG_NEW);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &job, 0, &j), 0);
    cr_assert(ql_id_eq(&j.segment, &seg));
    ql_job_free(&j);
    ql_segment_free(&s);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

Test(lookups, a_build_takes_the_callers_model_only_when_it_is_the_one_named) {
    ql_err_t err = {0};
    ql_id_t other;
    cr_assert_eq(ql_test_create_daily_model(store, "q", "o", &other, &err), 0, "%s", err.msg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_model_t mo;
    cr_assert_eq(ql_model_get(t, &other, 0, &mo), 0);
    ql_txn_abort(t);
    /* Given model o's record for a build of m: m is read, and the job is m's, in project p. */
    ql_id_t job, seg;
    build(&model, 2, &mo, &job, &seg);
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &job, 0, &j), 0);
    cr_assert(ql_id_eq(&j.model, &model));
    cr_assert_str_eq(j.project, "p");
    cr_assert_str_eq(j.model_name, "m");
    ql_job_free(&j);
    ql_txn_abort(t);
    /* Given o's own record, the build of o uses it. */
    build(&other, 2, &mo, &job, &seg);
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_job_get(t, &job, 0, &j), 0);
    cr_assert_str_eq(j.project, "q");
    cr_assert_str_eq(j.model_name, "o");
    ql_job_free(&j);
    ql_txn_abort(t);
    ql_model_free(&mo);
}

Test(lookups, model_segment_exists_needs_both) {
    ql_id_t job, seg, none;
    build(&model, 3, NULL, &job, &seg);
    ql_store_new_id(store, &none);
    ql_id_t zero = {0};
    for (int write = 0; write < 2; write++) {
        ql_txn_t *t;
        cr_assert_eq(ql_txn_begin(store, write, &t), 0);
        cr_assert_eq(ql_model_segment_exists(t, &model, &seg), 0);
        cr_assert_eq(ql_model_segment_exists(t, &model, &zero), 0, "no segment to look for");
        cr_assert_eq(ql_model_segment_exists(t, &model, &none), QL_ENOTFOUND);
        cr_assert_eq(ql_model_segment_exists(t, &none, &seg), QL_ENOTFOUND);
        cr_assert_eq(ql_model_segment_exists(t, &none, &zero), QL_ENOTFOUND);
        if (write) { /* the segment gone: the pick's check fails */
            cr_assert_eq(ql_segment_delete(t, &seg), 0);
            cr_assert_eq(ql_model_segment_exists(t, &model, &seg), QL_ENOTFOUND);
        }
        ql_txn_abort(t);
    }
}

Test(lookups, model_find_with_project_tells_a_missing_project_from_a_missing_model) {
    for (int kind = 0; kind < 3; kind++) { /* read, lookups, write */
        ql_txn_t *t;
        cr_assert_eq(kind == 1 ? ql_txn_begin_lookups(store, &t) : ql_txn_begin(store, kind, &t),
                     0);
        ql_project_t p;
        ql_model_t m;
        bool found = true;
        cr_assert_eq(ql_model_find_with_project(t, "nope", "m", 0, &p, &m, &found), QL_ENOTFOUND);
        cr_assert_not(found);
        cr_assert_eq(ql_model_find_with_project(t, "p", "nope", 0, &p, &m, &found), 0);
        cr_assert_not(found);
        cr_assert_str_eq(p.name, "p");
        ql_project_free(&p);
        cr_assert_eq(ql_model_find_with_project(t, "p", "m", 0, &p, &m, &found), 0);
        cr_assert(found);
        cr_assert_str_eq(p.name, "p");
        cr_assert(ql_id_eq(&m.id, &model));
        cr_assert_str_eq(m.project, "p");
        ql_model_free(&m);
        ql_project_free(&p);
        ql_txn_abort(t);
    }
}

static int count_cb(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    (void)id;
    (void)priority;
    (void)create_time;
    (*(int *)arg)++;
    return 0;
}

/* On PostgreSQL a lookups transaction opens no transaction on the server (its statements are
 * their own), so a commit between two of its lookups is seen by the second, where a read
 * transaction keeps its snapshot; a walk (a cursor, which needs a transaction) opens one. */
Test(lookups, a_lookups_transaction_sends_no_begin_and_each_lookup_sees_the_latest_commit) {
    ql_txn_t *rt, *lt;
    cr_assert_eq(ql_txn_begin(store, false, &rt), 0);
    cr_assert_eq(ql_txn_begin_lookups(store, &lt), 0);
    cr_assert_eq(ql_model_exists(rt, &model), 0);
    cr_assert_eq(ql_model_exists(lt, &model), 0);
    ql_id_t job, seg;
    build(&model, 4, NULL, &job, &seg);
    ql_segment_t s;
    cr_assert_eq(ql_segment_get(rt, &seg, &s), QL_ENOTFOUND, "a read keeps its snapshot");
    if (is_pg()) {
        cr_assert_eq(ql_segment_get(lt, &seg, &s), 0, "a lookup sees the latest commit");
        ql_segment_free(&s);
    }
    int n = 0;
    cr_assert_eq(ql_job_foreach_state_ref(lt, QL_READY, count_cb, &n), 0);
    cr_assert_eq(n, is_pg() ? 1 : 0);
    /* From the walk on, the lookups share its snapshot: a later commit is not seen. */
    ql_id_t job2, seg2;
    build(&model, 5, NULL, &job2, &seg2);
    cr_assert_eq(ql_segment_get(lt, &seg2, &s), QL_ENOTFOUND);
    ql_txn_abort(lt);
    ql_txn_abort(rt);
    /* The sessions go back to the pool usable: a read and a lookups transaction again. */
    cr_assert_eq(ql_txn_begin_lookups(store, &lt), 0);
    cr_assert_eq(ql_segment_get(lt, &seg, &s), 0);
    ql_segment_free(&s);
    ql_txn_abort(lt);
    cr_assert_eq(ql_txn_begin(store, false, &rt), 0);
    n = 0;
    cr_assert_eq(ql_job_foreach_state_ref(rt, QL_READY, count_cb, &n), 0);
    cr_assert_eq(n, 2);
    ql_txn_abort(rt);
}

/* The model lock's key as PostgreSQL shows it in pg_locks (store_pg_locks.c: 64 bits of the id,
 * classid the high half, objid the low one). */
static long long model_locks_held(const ql_id_t *m) {
    uint64_t k = 0;
    for (int i = 0; i < 8; i++)
        k = k << 8 | (m->b[8 + i] ^ m->b[i]);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
             "classid::text::numeric * 4294967296 + objid::text::numeric = %llu",
             (unsigned long long)k);
    return ql_test_pg_scalar(sql);
}

/* A put of a job the transaction holds, and of a segment, take the model lock inside their
 * write statement (no statement of its own): it is held once they return, to the commit. A put
 * refused before its statement takes none, and the next put of the level still takes it. */
Test(lookups, a_write_that_carries_the_model_lock_holds_it_to_the_commit) {
    ql_test_require_backend("pg");
    ql_id_t job, seg;
    build(&model, 6, NULL, &job, &seg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &job, 0, &j), 0); /* FOR UPDATE: the row is held */
    cr_assert_eq(model_locks_held(&model), 0);
    snprintf(j.project, sizeof j.project, "x"); /* a job never changes project */
    cr_assert_eq(ql_job_put(t, &j), QL_EINVAL);
    snprintf(j.project, sizeof j.project, "p");
    cr_assert_eq(model_locks_held(&model), 0);
    j.state = QL_RUNNING;
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(model_locks_held(&model), 1, "the update took the model lock");
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(model_locks_held(&model), 0);
    ql_job_free(&j);
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_segment_t s;
    cr_assert_eq(ql_segment_get(t, &seg, &s), 0);
    cr_assert_eq(model_locks_held(&model), 0);
    s.status = QL_SEG_READY;
    cr_assert_eq(ql_segment_put(t, &s), 0);
    cr_assert_eq(model_locks_held(&model), 1, "the segment put took the model lock");
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_segment_free(&s);
    cr_assert_eq(model_locks_held(&model), 0);
}

/* A submission's read of its model takes the model's lock in the same statement, before its
 * overlap probes (docs/postgresql.md, rule 1); a read-only transaction takes none. */
Test(lookups, a_model_read_for_a_probe_takes_the_model_lock) {
    ql_test_require_backend("pg");
    ql_txn_t *t;
    ql_model_t m;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_model_get_for_probe(t, &model, 0, &m), 0);
    cr_assert_eq(model_locks_held(&model), 0);
    ql_model_free(&m);
    ql_txn_abort(t);
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_model_get_for_probe(t, &model, 0, &m), 0);
    cr_assert(ql_id_eq(&m.id, &model));
    cr_assert_eq(model_locks_held(&model), 1, "held from the read on");
    ql_model_free(&m);
    ql_id_t none;
    ql_store_new_id(store, &none);
    cr_assert_eq(ql_model_get_for_probe(t, &none, 0, &m), QL_ENOTFOUND);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(model_locks_held(&model), 0);
}
