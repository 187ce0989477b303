/*
 * The store contract: what every backend of storage/include/storage/ql_store.h guarantees,
 * through the public API only (docs/postgresql.md, Tests). It runs on LMDB as storage_test_
 * store_contract and on PostgreSQL as storage_test_store_contract@pg (QL_TEST_STORE=pg).
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[256];
static ql_store_t *store;

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_contract");
    ql_test_store_open(dir, &store);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
}

TestSuite(contract, .init = setup, .fini = teardown);

static ql_txn_t *wbegin(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    return t;
}

static ql_txn_t *rbegin(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    return t;
}

static void put_project(ql_txn_t *t, const char *name) {
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    p.create_time = 1;
    cr_assert_eq(ql_project_put(t, &p), 0);
}

static ql_model_t make_model(const char *project, const char *name) {
    ql_model_t m = {0};
    ql_store_new_id(store, &m.id);
    snprintf(m.project, sizeof m.project, "%s", project);
    snprintf(m.name, sizeof m.name, "%s", name);
    m.partitioned = true;
    return m;
}

static ql_segment_t make_seg(const ql_id_t *model, int64_t s, int64_t e, ql_seg_status_t st) {
    ql_segment_t g = {0};
    ql_store_new_id(store, &g.id);
    g.model = *model;
    g.start = s;
    g.end = e;
    g.status = st;
    return g;
}

static ql_job_t make_job(const char *project, const ql_id_t *model, ql_state_t st, int prio,
                         int64_t ctime, int64_t s, int64_t e) {
    ql_job_t j = {0};
    ql_store_new_id(store, &j.id);
    snprintf(j.project, sizeof j.project, "%s", project);
    if (model)
        j.model = *model;
    snprintf(j.type, sizeof j.type, "INC_BUILD");
    j.state = st;
    j.priority = prio;
    j.create_time = ctime;
    j.modify_time = ctime;
    j.has_range = s < e;
    j.range_start = s;
    j.range_end = e;
    return j;
}

/* A model in project p, committed. */
static ql_model_t setup_model(const char *project, const char *name) {
    ql_txn_t *t = wbegin();
    ql_project_t p;
    if (ql_project_get(t, project, 0, &p) == 0)
        ql_project_free(&p);
    else
        put_project(t, project);
    ql_model_t m = make_model(project, name);
    cr_assert_eq(ql_model_put(t, &m), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return m;
}

Test(contract, meta_values_round_trip_and_survive_a_reopen) {
    ql_txn_t *t = wbegin();
    cr_assert_eq(ql_meta_put_u64(t, "c_u64", 0x0102030405060708ull), 0);
    cr_assert_eq(ql_meta_put_str(t, "c_str", "hello"), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(store);
    ql_test_store_open(dir, &store);
    t = rbegin();
    uint64_t v = 0;
    char buf[8];
    cr_assert_eq(ql_meta_get_u64(t, "c_u64", &v), 0);
    cr_assert_eq(v, 0x0102030405060708ull);
    cr_assert_eq(ql_meta_get_str(t, "c_str", buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "hello");
    cr_assert_eq(ql_meta_get_str(t, "c_str", buf, 5), QL_ETOOBIG);
    cr_assert_eq(ql_meta_get_u64(t, "absent", &v), QL_ENOTFOUND);
    ql_txn_abort(t);
}

/* A deleted value is gone after the commit, deleting a missing one is fine, a read transaction
 * cannot delete, and the fencing epoch cannot be deleted at all (it only ever grows). */
Test(contract, meta_values_are_deleted_but_never_the_fencing_epoch) {
    ql_txn_t *t = wbegin();
    uint64_t epoch;
    cr_assert_eq(ql_meta_put_str(t, "c_gone", "bye"), 0);
    cr_assert_eq(ql_fence_raise(t, &epoch), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    cr_assert_eq(ql_meta_delete(t, "c_gone"), QL_EINVAL);
    ql_txn_abort(t);
    t = wbegin();
    cr_assert_eq(ql_meta_delete(t, "c_gone"), 0);
    cr_assert_eq(ql_meta_delete(t, "c_never_there"), 0);
    cr_assert_eq(ql_meta_delete(t, "job_engine_epoch"), QL_EINVAL);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    char buf[8];
    uint64_t cur = 0;
    cr_assert_eq(ql_meta_get_str(t, "c_gone", buf, sizeof buf), QL_ENOTFOUND);
    cr_assert_eq(ql_fence_current(t, &cur), 0);
    cr_assert_eq(cur, epoch);
    ql_txn_abort(t);
}

/* The data directory holds more than the store (step logs, the job engine lock file), so every
 * backend creates it, with its missing parents, and none is open to every local user. */
Test(contract, the_data_directory_is_created_when_missing) {
    char nested[400];
    snprintf(nested, sizeof nested, "%s/a/b/data", dir);
    ql_store_t *s;
    ql_test_store_open(nested, &s);
    struct stat st;
    cr_assert_eq(stat(nested, &st), 0, "%s was not created (%s)", nested, ql_test_store_backend());
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0750, "mode %03o", (unsigned)(st.st_mode & 0777));
    cr_assert_str_eq(ql_store_path(s), nested);
    ql_store_close(s);
}

Test(contract, an_aborted_write_leaves_nothing) {
    ql_txn_t *t = wbegin();
    put_project(t, "gone");
    ql_txn_abort(t);
    t = rbegin();
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "gone", 0, &p), QL_ENOTFOUND);
    ql_txn_abort(t);
}

Test(contract, a_nested_abort_leaves_the_parent_usable) {
    ql_txn_t *t = wbegin();
    put_project(t, "kept");
    ql_txn_t *n;
    cr_assert_eq(ql_txn_begin_nested(t, &n), 0);
    put_project(n, "dropped");
    ql_txn_abort(n);
    cr_assert_eq(ql_txn_begin_nested(t, &n), 0);
    put_project(n, "merged");
    cr_assert_eq(ql_txn_commit(n), 0);
    /* A refused change inside a nested transaction fails it alone. */
    cr_assert_eq(ql_txn_begin_nested(t, &n), 0);
    ql_model_t m = make_model("no-such-project", "m");
    cr_assert_eq(ql_model_put(n, &m), QL_ENOTFOUND);
    ql_txn_abort(n);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    uint64_t count;
    cr_assert_eq(ql_project_count(t, &count), 0);
    cr_assert_eq(count, 2);
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "dropped", 0, &p), QL_ENOTFOUND);
    cr_assert_eq(ql_project_get(t, "merged", 0, &p), 0);
    ql_project_free(&p);
    ql_txn_abort(t);
}

Test(contract, a_read_transaction_is_a_snapshot) {
    ql_txn_t *r = rbegin();
    uint64_t n;
    cr_assert_eq(ql_project_count(r, &n), 0);
    cr_assert_eq(n, 0);
    ql_txn_t *t = wbegin();
    put_project(t, "later");
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(ql_project_count(r, &n), 0);
    cr_assert_eq(n, 0, "a read transaction does not see a later commit");
    ql_txn_abort(r);
    r = rbegin();
    cr_assert_eq(ql_project_count(r, &n), 0);
    cr_assert_eq(n, 1);
    ql_txn_abort(r);
}

static int count_models_cb(const ql_model_t *m, void *arg) {
    (void)m;
    (*(int *)arg)++;
    return 0;
}

typedef struct {
    ql_txn_t *t;
    char names[8][QL_NAME_MAX + 1];
    int models[8];
    int n;
} nest_t;

/* Queries again from inside an iteration, as api_models.c does. */
static int nest_cb(const ql_project_t *p, void *arg) {
    nest_t *w = arg;
    snprintf(w->names[w->n], sizeof w->names[w->n], "%s", p->name);
    int rc = ql_model_foreach(w->t, p->name, count_models_cb, &w->models[w->n]);
    w->n++;
    return rc;
}

Test(contract, projects_in_name_order_with_queries_inside_the_callback) {
    setup_model("b", "m1");
    setup_model("b", "m2");
    setup_model("a", "m1");
    ql_txn_t *t = wbegin();
    put_project(t, "C");
    cr_assert_eq(ql_txn_commit(t), 0);
    nest_t w = {.t = rbegin()};
    cr_assert_eq(ql_project_foreach(w.t, nest_cb, &w), 0);
    ql_txn_abort(w.t);
    cr_assert_eq(w.n, 3);
    cr_assert_str_eq(w.names[0], "C", "byte order, as LMDB's keys");
    cr_assert_str_eq(w.names[1], "a");
    cr_assert_str_eq(w.names[2], "b");
    cr_assert_eq(w.models[1], 1);
    cr_assert_eq(w.models[2], 2);
}

static int stop_cb(const ql_project_t *p, void *arg) {
    (void)p;
    return ++*(int *)arg == 2 ? 1 : 0;
}

static int fail_cb(const ql_project_t *p, void *arg) {
    (void)p;
    (void)arg;
    return QL_EINVAL;
}

Test(contract, a_callback_stops_or_fails_an_iteration) {
    ql_txn_t *t = wbegin();
    put_project(t, "p1");
    put_project(t, "p2");
    put_project(t, "p3");
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    int n = 0;
    cr_assert_eq(ql_project_foreach(t, stop_cb, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(ql_project_foreach(t, fail_cb, NULL), QL_EINVAL);
    ql_txn_abort(t);
}

Test(contract, models_unique_by_name_within_a_project) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    ql_model_t dup = make_model("p", "m");
    cr_assert_eq(ql_model_put(t, &dup), QL_EEXIST);
    /* The transaction is still usable after a refused put. */
    ql_model_t other = make_model("p", "other");
    cr_assert_eq(ql_model_put(t, &other), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    ql_model_t got;
    cr_assert_eq(ql_model_find(t, "p", "m", 0, &got), 0);
    cr_assert(ql_id_eq(&got.id, &m.id));
    ql_model_free(&got);
    cr_assert_eq(ql_model_exists(t, &other.id), 0);
    uint64_t n;
    cr_assert_eq(ql_model_count(t, "p", &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(ql_model_find(t, "p", "nope", 0, &got), QL_ENOTFOUND);
    ql_txn_abort(t);
}

Test(contract, project_and_model_writes_raise_the_metadata_generation) {
    ql_txn_t *t = rbegin();
    uint64_t g0, g1;
    cr_assert_eq(ql_store_metadata_generation(t, &g0), 0);
    ql_txn_abort(t);
    setup_model("p", "m");
    t = rbegin();
    cr_assert_eq(ql_store_metadata_generation(t, &g1), 0);
    ql_txn_abort(t);
    cr_assert_geq(g1, g0 + 2, "a project and a model were written");
}

typedef struct {
    int64_t starts[16];
    int n;
} seglist_t;

static int seg_cb(const ql_segment_t *s, void *arg) {
    seglist_t *l = arg;
    l->starts[l->n++] = s->start;
    return 0;
}

Test(contract, segments_in_order_and_overlap_probes) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    ql_segment_t segs[4] = {
        make_seg(&m.id, 200, 300, QL_SEG_READY), make_seg(&m.id, 0, 100, QL_SEG_READY),
        make_seg(&m.id, 100, 200, QL_SEG_READY),
        make_seg(&m.id, 0, 300, QL_SEG_NEW), /* a merge's NEW segment over the three */
    };
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ql_segment_put(t, &segs[i]), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    t = rbegin();
    seglist_t all = {0};
    cr_assert_eq(ql_segment_foreach(t, &m.id, seg_cb, &all), 0);
    cr_assert_eq(all.n, 4);
    for (int i = 1; i < all.n; i++)
        cr_assert_leq(all.starts[i - 1], all.starts[i]);
    ql_segment_t out[4];
    size_t n;
    cr_assert_eq(ql_segment_overlapping(t, &m.id, 150, 250, out, 4, &n), 0);
    cr_assert_eq(n, 3, "[100,200), [200,300) and the merge's [0,300)");
    cr_assert_eq(out[0].start, 0);
    cr_assert_eq(out[0].end, 300);
    cr_assert_eq(out[1].start, 100);
    cr_assert_eq(out[2].start, 200);
    cr_assert_eq(ql_segment_overlapping(t, &m.id, 100, 200, out, 1, &n), QL_ETOOBIG);
    cr_assert_eq(n, 2);
    cr_assert_eq(ql_segment_overlapping(t, &m.id, 300, 400, out, 4, &n), 0);
    cr_assert_eq(n, 0, "half-open: [300, 400) touches nothing");
    uint64_t count;
    cr_assert_eq(ql_segment_count(t, &m.id, &count), 0);
    cr_assert_eq(count, 4);
    ql_segment_t got;
    cr_assert_eq(ql_segment_get(t, &segs[2].id, &got), 0);
    cr_assert_eq(got.start, 100);
    cr_assert_eq(got.status, QL_SEG_READY);
    ql_segment_free(&got);
    ql_txn_abort(t);

    t = wbegin();
    cr_assert_eq(ql_segment_delete(t, &segs[3].id), 0);
    cr_assert_eq(ql_segment_delete(t, &segs[3].id), QL_ENOTFOUND);
    segs[0].status = QL_SEG_WARNING;
    cr_assert_eq(ql_segment_put(t, &segs[0]), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    cr_assert_eq(ql_segment_exists(t, &segs[3].id), QL_ENOTFOUND);
    cr_assert_eq(ql_segment_get(t, &segs[0].id, &got), 0);
    cr_assert_eq(got.status, QL_SEG_WARNING);
    ql_segment_free(&got);
    cr_assert_eq(ql_segment_count(t, &m.id, &count), 0);
    cr_assert_eq(count, 3);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

/* A put names the segment's model: one put into another model moves it there, in a fresh
 * transaction (on PostgreSQL the put then takes the new model's lock in its own statement) and
 * after the transaction read it for writing. */
Test(contract, a_segment_put_into_another_model_moves_it) {
    ql_model_t m1 = setup_model("p", "m1"), m2 = setup_model("p", "m2");
    ql_txn_t *t = wbegin();
    ql_segment_t g = make_seg(&m1.id, 0, 100, QL_SEG_READY);
    cr_assert_eq(ql_segment_put(t, &g), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    t = wbegin();
    g.model = m2.id;
    cr_assert_eq(ql_segment_put(t, &g), 0, "moved in a fresh transaction");
    cr_assert_eq(ql_txn_commit(t), 0);
    uint64_t n1, n2;
    ql_segment_t got;
    t = rbegin();
    cr_assert_eq(ql_segment_count(t, &m1.id, &n1), 0);
    cr_assert_eq(ql_segment_count(t, &m2.id, &n2), 0);
    cr_assert_eq(ql_segment_get(t, &g.id, &got), 0);
    cr_assert(n1 == 0 && n2 == 1 && ql_id_eq(&got.model, &m2.id), "m1 %llu, m2 %llu, model m2 %d",
              (unsigned long long)n1, (unsigned long long)n2, ql_id_eq(&got.model, &m2.id));
    ql_segment_free(&got);
    ql_txn_abort(t);

    t = wbegin();
    cr_assert_eq(ql_segment_get(t, &g.id, &got), 0);
    ql_segment_free(&got);
    g.model = m1.id;
    g.status = QL_SEG_WARNING;
    cr_assert_eq(ql_segment_put(t, &g), 0, "moved back after a read for writing");
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    cr_assert_eq(ql_segment_count(t, &m1.id, &n1), 0);
    cr_assert_eq(ql_segment_count(t, &m2.id, &n2), 0);
    cr_assert_eq(ql_segment_get(t, &g.id, &got), 0);
    cr_assert(n1 == 1 && n2 == 0 && ql_id_eq(&got.model, &m1.id));
    cr_assert_eq(got.status, QL_SEG_WARNING);
    ql_segment_free(&got);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

typedef struct {
    ql_id_t ids[16];
    int64_t times[16];
    int n;
} refs_t;

static int state_ref_cb(const ql_id_t *id, int prio, int64_t ctime, void *arg) {
    (void)prio;
    refs_t *r = arg;
    r->ids[r->n] = *id;
    r->times[r->n++] = ctime;
    return 0;
}

static int recent_cb(const ql_id_t *id, ql_state_t st, int64_t mtime, void *arg) {
    (void)st;
    refs_t *r = arg;
    r->ids[r->n] = *id;
    r->times[r->n++] = mtime;
    return 0;
}

static int live_cb(const ql_live_job_t *j, void *arg) {
    refs_t *r = arg;
    r->ids[r->n] = j->id;
    r->times[r->n++] = j->start;
    return 0;
}

static int job_cb(const ql_job_t *j, void *arg) {
    refs_t *r = arg;
    r->ids[r->n] = j->id;
    r->times[r->n++] = j->create_time;
    return 0;
}

typedef struct {
    ql_id_t ids[16];
    char projects[16][QL_NAME_MAX + 1];
    ql_id_t models[16];
    bool given[16], has_model[16];
    int n;
} targets_t;

static int target_cb(const ql_id_t *id, int prio, int64_t ctime, const char *project,
                     const ql_id_t *model, void *arg) {
    (void)prio;
    (void)ctime;
    targets_t *r = arg;
    r->ids[r->n] = *id;
    r->given[r->n] = project != NULL;
    if (project)
        snprintf(r->projects[r->n], sizeof r->projects[r->n], "%s", project);
    r->has_model[r->n] = model != NULL;
    if (model)
        r->models[r->n] = *model;
    r->n++;
    return 0;
}

/* ql_job_foreach_state_target walks as the ref walk does; a project and model it gives are the
 * job's (PostgreSQL gives them, LMDB does not; a job without a model has none). */
Test(contract, the_state_walk_with_targets_gives_each_jobs_project_and_model) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    put_project(t, "q");
    ql_job_t a = make_job("p", &m.id, QL_READY, 3, 30, 0, 100);
    ql_job_t b = make_job("q", NULL, QL_READY, 1, 40, 0, 0);
    ql_job_t c = make_job("p", &m.id, QL_RUNNING, 3, 10, 200, 300);
    cr_assert_eq(ql_job_put(t, &a), 0);
    cr_assert_eq(ql_job_put(t, &b), 0);
    cr_assert_eq(ql_job_put(t, &c), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    t = rbegin();
    targets_t r = {0};
    cr_assert_eq(ql_job_foreach_state_target(t, QL_READY, target_cb, &r), 0);
    ql_txn_abort(t);
    cr_assert_eq(r.n, 2);
    cr_assert(ql_id_eq(&r.ids[0], &b.id), "priority first, as the ref walk");
    cr_assert(ql_id_eq(&r.ids[1], &a.id));
    bool pg = strcmp(ql_test_store_backend(), "pg") == 0;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(r.given[i], pg, "PostgreSQL gives the columns, LMDB does not");
    if (pg) {
        cr_assert_str_eq(r.projects[0], "q");
        cr_assert_not(r.has_model[0], "a job without a model has none");
        cr_assert_str_eq(r.projects[1], "p");
        cr_assert(r.has_model[1] && ql_id_eq(&r.models[1], &m.id));
    }
    ql_job_free(&a);
    ql_job_free(&b);
    ql_job_free(&c);
    ql_model_free(&m);
}

Test(contract, job_indexes_orders_and_counts) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    put_project(t, "q");
    ql_job_t a = make_job("p", &m.id, QL_READY, 3, 30, 0, 100);
    ql_job_t b = make_job("p", &m.id, QL_READY, 1, 40, 100, 200);
    ql_job_t c = make_job("p", &m.id, QL_READY, 3, 10, 200, 300);
    ql_job_t d = make_job("q", NULL, QL_SUCCEED, 3, 20, 0, 0);
    ql_job_t *all[4] = {&a, &b, &c, &d};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ql_job_put(t, all[i]), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    t = rbegin();
    refs_t r = {0};
    cr_assert_eq(ql_job_foreach_state_ref(t, QL_READY, state_ref_cb, &r), 0);
    cr_assert_eq(r.n, 3);
    cr_assert(ql_id_eq(&r.ids[0], &b.id), "priority first");
    cr_assert(ql_id_eq(&r.ids[1], &c.id), "then create time");
    cr_assert(ql_id_eq(&r.ids[2], &a.id));
    r.n = 0;
    cr_assert_eq(ql_job_foreach_state(t, QL_READY, job_cb, &r), 0);
    cr_assert_eq(r.n, 3);
    cr_assert(ql_id_eq(&r.ids[0], &b.id));
    r.n = 0;
    cr_assert_eq(ql_job_foreach_model(t, &m.id, job_cb, &r), 0);
    cr_assert_eq(r.n, 3);
    cr_assert_eq(r.times[0], 10);
    cr_assert_eq(r.times[2], 40);
    r.n = 0;
    cr_assert_eq(ql_job_foreach_recent(t, NULL, false, recent_cb, &r), 0);
    cr_assert_eq(r.n, 4);
    cr_assert_eq(r.times[0], 40, "most recently modified first");
    cr_assert_eq(r.times[3], 10);
    r.n = 0;
    cr_assert_eq(ql_job_foreach_recent(t, "q", true, recent_cb, &r), 0);
    cr_assert_eq(r.n, 1);
    cr_assert(ql_id_eq(&r.ids[0], &d.id));
    r.n = 0;
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m.id, 150, 250, live_cb, &r), 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.times[0], 100);
    cr_assert_eq(r.times[1], 200);
    r.n = 0;
    cr_assert_eq(ql_job_foreach_live(t, &m.id, live_cb, &r), 0);
    cr_assert_eq(r.n, 3);
    uint64_t n;
    cr_assert_eq(ql_job_count(t, NULL, 1u << QL_READY | 1u << QL_SUCCEED, &n), 0);
    cr_assert_eq(n, 4);
    cr_assert_eq(ql_job_count(t, "p", 1u << QL_SUCCEED, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(ql_job_count(t, "q", 1u << QL_SUCCEED, &n), 0);
    cr_assert_eq(n, 1);
    ql_txn_abort(t);

    /* A transition moves the job between the indexes. */
    t = wbegin();
    ql_job_t got;
    cr_assert_eq(ql_job_get(t, &a.id, QL_DECODE_KEEP_EXTRA, &got), 0);
    got.state = QL_SUCCEED;
    got.modify_time = 99;
    cr_assert_eq(ql_job_put(t, &got), 0);
    ql_job_free(&got);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    cr_assert_eq(ql_job_count(t, "p", 1u << QL_READY, &n), 0);
    cr_assert_eq(n, 2);
    r.n = 0;
    cr_assert_eq(ql_job_foreach_live(t, &m.id, live_cb, &r), 0);
    cr_assert_eq(r.n, 2, "a final job is not live");
    r.n = 0;
    cr_assert_eq(ql_job_foreach_recent(t, "p", false, recent_cb, &r), 0);
    cr_assert_eq(r.times[0], 99);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

Test(contract, a_job_never_changes_project_model_or_create_time) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    ql_job_t j = make_job("p", &m.id, QL_READY, 3, 10, 0, 100);
    cr_assert_eq(ql_job_put(t, &j), 0);
    j.create_time = 11;
    cr_assert_eq(ql_job_put(t, &j), QL_EINVAL);
    j.create_time = 10;
    j.priority = 9;
    cr_assert_eq(ql_job_put(t, &j), QL_EINVAL, "priority out of range");
    cr_assert_eq(ql_txn_commit(t), 0);
}

Test(contract, steps_and_outputs) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    ql_job_t j = make_job("p", &m.id, QL_READY, 3, 10, 0, 100);
    j.n_steps = 2;
    cr_assert_eq(ql_job_put(t, &j), 0);
    for (uint32_t i = 0; i < 2; i++) {
        ql_step_t s = {.job = j.id, .seq = 1 - i, .state = QL_READY};
        snprintf(s.name, sizeof s.name, "step%u", 1 - i);
        cr_assert_eq(ql_step_put(t, &s), 0);
    }
    cr_assert_eq(ql_output_put(t, &j.id, 0, "out\0put", 7), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = rbegin();
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, &j.id, 1, &s), 0);
    cr_assert_str_eq(s.name, "step1");
    ql_step_free(&s);
    cr_assert_eq(ql_step_get(t, &j.id, 5, &s), QL_ENOTFOUND);
    char *out;
    size_t len;
    cr_assert_eq(ql_output_get(t, &j.id, 0, &out, &len), 0);
    cr_assert_eq(len, 7);
    cr_assert_eq(memcmp(out, "out\0put", 7), 0);
    free(out);
    cr_assert_eq(ql_output_get(t, &j.id, 1, &out, &len), QL_ENOTFOUND);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

Test(contract, fencing_epoch_raise_and_check) {
    ql_txn_t *t = wbegin();
    uint64_t e;
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(e, 1);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(e, 2, "a raise inside the transaction sees the earlier one");
    cr_assert_eq(ql_txn_commit(t), 0);
    t = wbegin();
    ql_err_t err = {0};
    cr_assert_eq(ql_fence_check(t, 2, &err), 0);
    cr_assert_eq(ql_fence_check(t, 1, &err), QL_EFENCED);
    ql_txn_abort(t);
}

Test(contract, stat_names_the_backend) {
    ql_store_stat_t st;
    cr_assert_eq(ql_store_stat(store, &st), 0);
    const char *want = strcmp(ql_test_store_backend(), "pg") ? "lmdb" : "postgresql";
    cr_assert_str_eq(st.backend, want);
    cr_assert_gt(st.used_bytes, 0);
}

Test(contract, a_read_only_transaction_refuses_writes) {
    ql_txn_t *t = rbegin();
    ql_txn_t *n;
    cr_assert_eq(ql_txn_begin_nested(t, &n), QL_EINVAL);
    ql_txn_abort(t);
}

/* ---- ql_probe_targets: the answers of the per-model probes, many targets at once ---- */

#define PROBE_MAX 16

typedef struct {
    size_t index, n_segs, n_jobs;
    ql_id_t segs[PROBE_MAX], jobs[PROBE_MAX];
    int64_t seg_start[PROBE_MAX], seg_end[PROBE_MAX], job_start[PROBE_MAX];
    ql_state_t job_state[PROBE_MAX];
} probe_ans_t;

typedef struct {
    probe_ans_t *ans;
    size_t n, cap;
    int stop_after; /* > 0: return 7 from the stop_after-th call */
} probe_log_t;

static int probe_log_cb(const ql_probe_result_t *r, void *arg) {
    probe_log_t *l = arg;
    cr_assert_lt(l->n, l->cap);
    cr_assert_leq(r->n_segs, PROBE_MAX);
    cr_assert_leq(r->n_jobs, PROBE_MAX);
    probe_ans_t *a = &l->ans[l->n++];
    memset(a, 0, sizeof *a);
    a->index = r->index;
    a->n_segs = r->n_segs;
    a->n_jobs = r->n_jobs;
    for (size_t i = 0; i < r->n_segs; i++) {
        a->segs[i] = r->segs[i].id;
        a->seg_start[i] = r->segs[i].start;
        a->seg_end[i] = r->segs[i].end;
    }
    for (size_t i = 0; i < r->n_jobs; i++) {
        a->jobs[i] = r->jobs[i].id;
        a->job_start[i] = r->jobs[i].start;
        a->job_state[i] = r->jobs[i].state;
    }
    return l->stop_after > 0 && (int)l->n == l->stop_after ? 7 : 0;
}

static int ref_seg_cb(const ql_segment_t *s, void *arg) {
    probe_ans_t *a = arg;
    cr_assert_lt(a->n_segs, PROBE_MAX);
    size_t j = a->n_segs++;
    /* insert in (start, end, id) order */
    while (j > 0 && (a->seg_start[j - 1] > s->start ||
                     (a->seg_start[j - 1] == s->start &&
                      (a->seg_end[j - 1] > s->end ||
                       (a->seg_end[j - 1] == s->end &&
                        memcmp(a->segs[j - 1].b, s->id.b, sizeof s->id.b) > 0))))) {
        a->segs[j] = a->segs[j - 1];
        a->seg_start[j] = a->seg_start[j - 1];
        a->seg_end[j] = a->seg_end[j - 1];
        j--;
    }
    a->segs[j] = s->id;
    a->seg_start[j] = s->start;
    a->seg_end[j] = s->end;
    return 0;
}

static int ref_job_cb(const ql_live_job_t *j, void *arg) {
    probe_ans_t *a = arg;
    cr_assert_lt(a->n_jobs, PROBE_MAX);
    a->jobs[a->n_jobs] = j->id;
    a->job_start[a->n_jobs] = j->start;
    a->job_state[a->n_jobs++] = j->state;
    return 0;
}

/* What the per-model probes say about one target. */
static void probe_reference(ql_txn_t *t, const ql_probe_target_t *tg, ql_segment_t *all,
                            size_t n_all, probe_ans_t *a) {
    memset(a, 0, sizeof *a);
    cr_assert_eq(ql_segment_foreach_overlapping(t, &tg->model, tg->start, tg->end, ref_seg_cb, a),
                 0);
    bool any = false;
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < a->n_segs; i++)
        for (size_t k = 0; k < n_all; k++)
            if (ql_id_eq(&all[k].id, &a->segs[i]) && all[k].status == QL_SEG_NEW) {
                lo = any && lo < all[k].start ? lo : all[k].start;
                hi = any && hi > all[k].end ? hi : all[k].end;
                any = true;
            }
    if (any)
        cr_assert_eq(ql_job_foreach_live_overlapping(t, &tg->model, lo, hi, ref_job_cb, a), 0);
}

static void assert_same_answer(const probe_ans_t *got, const probe_ans_t *want, size_t index) {
    cr_assert_eq(got->index, index);
    cr_assert_eq(got->n_segs, want->n_segs, "target %zu: %zu segments, want %zu", index,
                 got->n_segs, want->n_segs);
    cr_assert_eq(got->n_jobs, want->n_jobs, "target %zu: %zu jobs, want %zu", index, got->n_jobs,
                 want->n_jobs);
    for (size_t i = 0; i < got->n_segs; i++) {
        cr_assert(ql_id_eq(&got->segs[i], &want->segs[i]), "target %zu segment %zu", index, i);
        cr_assert_eq(got->seg_start[i], want->seg_start[i]);
        cr_assert_eq(got->seg_end[i], want->seg_end[i]);
    }
    for (size_t i = 0; i < got->n_jobs; i++) {
        cr_assert(ql_id_eq(&got->jobs[i], &want->jobs[i]), "target %zu job %zu", index, i);
        cr_assert_eq(got->job_start[i], want->job_start[i]);
        cr_assert_eq(got->job_state[i], want->job_state[i]);
    }
}

typedef struct {
    ql_model_t a, b, c;
    ql_segment_t segs[6];
    ql_job_t merge, build, done, other;
} probe_fixture_t;

/* Model a: three READY days and a merge's NEW segment over them (its job RUNNING), plus a live
 * job elsewhere; model b: no segments; model c: one NEW segment of a READY job, and a final job
 * over the same range. */
static void probe_fixture(probe_fixture_t *f) {
    f->a = setup_model("p", "a");
    f->b = setup_model("p", "b");
    f->c = setup_model("p", "c");
    ql_txn_t *t = wbegin();
    f->merge = make_job("p", &f->a.id, QL_RUNNING, 3, 10, 0, 300);
    f->other = make_job("p", &f->a.id, QL_PAUSED, 3, 11, 1000, 1100);
    f->build = make_job("p", &f->c.id, QL_READY, 3, 12, 500, 600);
    f->done = make_job("p", &f->c.id, QL_SUCCEED, 3, 9, 500, 600);
    cr_assert_eq(ql_job_put(t, &f->merge), 0);
    cr_assert_eq(ql_job_put(t, &f->other), 0);
    cr_assert_eq(ql_job_put(t, &f->build), 0);
    cr_assert_eq(ql_job_put(t, &f->done), 0);
    f->segs[0] = make_seg(&f->a.id, 0, 100, QL_SEG_READY);
    f->segs[1] = make_seg(&f->a.id, 100, 200, QL_SEG_READY);
    f->segs[2] = make_seg(&f->a.id, 200, 300, QL_SEG_READY);
    f->segs[3] = make_seg(&f->a.id, 0, 300, QL_SEG_NEW);
    f->segs[3].job = f->merge.id;
    f->segs[4] = make_seg(&f->c.id, 500, 600, QL_SEG_NEW);
    f->segs[4].job = f->build.id;
    f->segs[5] = make_seg(&f->c.id, 400, 500, QL_SEG_READY);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ql_segment_put(t, &f->segs[i]), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static size_t probe_targets_of(const probe_fixture_t *f, ql_probe_target_t *tg) {
    ql_id_t unknown;
    ql_store_new_id(store, &unknown);
    const ql_probe_target_t list[] = {
        {f->a.id, 150, 250},  /* two READY days and the NEW merge: the merge job */
        {f->a.id, 300, 400},  /* half-open: touches [200,300) and [0,300) only at 300 */
        {f->a.id, 100, 200},  /* exactly one day, plus the merge */
        {f->b.id, 0, 1000},   /* a model with no segments */
        {f->a.id, 50, 50},    /* an empty target */
        {f->a.id, 90, 80},    /* an inverted one */
        {f->c.id, 550, 560},  /* the NEW build: the READY job only, not the final one */
        {f->c.id, 400, 500},  /* READY only: no jobs asked */
        {f->c.id, 0, 1000},   /* both of c */
        {unknown, 0, 1000},   /* no such model */
        {f->a.id, 1000, 1100} /* only the live job elsewhere, which is not asked for */
    };
    memcpy(tg, list, sizeof list);
    return sizeof list / sizeof list[0];
}

static void check_probe(ql_txn_t *t, probe_fixture_t *f) {
    ql_probe_target_t tg[16];
    size_t n = probe_targets_of(f, tg);
    probe_ans_t got[16], want[16];
    probe_log_t log = {.ans = got, .cap = 16};
    cr_assert_eq(ql_probe_targets(t, n, tg, probe_log_cb, &log), 0);
    cr_assert_eq(log.n, n, "one answer per target, also the empty ones");
    for (size_t i = 0; i < n; i++) {
        probe_reference(t, &tg[i], f->segs, 6, &want[i]);
        assert_same_answer(&got[i], &want[i], i);
    }
    /* The reference itself, so that the comparison cannot pass on two empty answers. */
    cr_assert_eq(got[0].n_segs, 3);
    cr_assert_eq(got[0].seg_start[0], 0);
    cr_assert_eq(got[0].seg_end[0], 300);
    cr_assert_eq(got[0].n_jobs, 1);
    cr_assert(ql_id_eq(&got[0].jobs[0], &f->merge.id));
    cr_assert_eq(got[0].job_state[0], QL_RUNNING);
    cr_assert_eq(got[1].n_segs, 0);
    cr_assert_eq(got[1].n_jobs, 0);
    cr_assert_eq(got[2].n_segs, 2);
    cr_assert_eq(got[3].n_segs, 0);
    cr_assert_eq(got[4].n_segs + got[5].n_segs, 0);
    cr_assert_eq(got[6].n_segs, 1);
    cr_assert_eq(got[6].n_jobs, 1);
    cr_assert(ql_id_eq(&got[6].jobs[0], &f->build.id));
    cr_assert_eq(got[7].n_segs, 1);
    cr_assert_eq(got[7].n_jobs, 0);
    cr_assert_eq(got[8].n_segs, 2);
    cr_assert_eq(got[8].seg_start[0], 400);
    cr_assert_eq(got[9].n_segs, 0);
    cr_assert_eq(got[10].n_segs + got[10].n_jobs, 0);
}

Test(contract, probe_targets_answers_as_the_per_model_probes) {
    probe_fixture_t f;
    probe_fixture(&f);
    ql_txn_t *t = rbegin();
    check_probe(t, &f);
    ql_txn_abort(t);
    t = wbegin(); /* a write transaction takes the model locks too */
    check_probe(t, &f);
    ql_txn_abort(t);
}

Test(contract, probe_targets_with_none_a_stop_and_many_chunks) {
    probe_fixture_t f;
    probe_fixture(&f);
    ql_txn_t *t = rbegin();
    probe_ans_t one[16];
    probe_log_t log = {.ans = one, .cap = 16};
    cr_assert_eq(ql_probe_targets(t, 0, NULL, probe_log_cb, &log), 0);
    cr_assert_eq(log.n, 0, "N = 0: no callback");

    ql_probe_target_t tg[16];
    size_t n = probe_targets_of(&f, tg);
    log = (probe_log_t){.ans = one, .cap = 16, .stop_after = 3};
    cr_assert_eq(ql_probe_targets(t, n, tg, probe_log_cb, &log), 7, "the callback's stop");
    cr_assert_eq(log.n, 3);

    /* More targets than one PostgreSQL query takes (4,096): every answer still in order. */
    size_t big = 9000;
    ql_probe_target_t *many = malloc(big * sizeof *many);
    probe_ans_t *ans = malloc(big * sizeof *ans);
    probe_ans_t want[16];
    cr_assert(many && ans);
    for (size_t i = 0; i < n; i++)
        probe_reference(t, &tg[i], f.segs, 6, &want[i]);
    for (size_t i = 0; i < big; i++)
        many[i] = tg[i % n];
    log = (probe_log_t){.ans = ans, .cap = big};
    cr_assert_eq(ql_probe_targets(t, big, many, probe_log_cb, &log), 0);
    cr_assert_eq(log.n, big);
    for (size_t i = 0; i < big; i++) {
        probe_ans_t w = want[i % n];
        assert_same_answer(&ans[i], &w, i);
    }
    free(many);
    free(ans);
    ql_txn_abort(t);
}

/* ---- ql_probe_range: a build's two probes in one call ---- */

typedef struct {
    char kind[16];  /* 's' segment, 'j' live job, in callback order */
    int64_t at[16]; /* their starts */
    int n;
    int stop_at; /* the callback that returns stop_rc (1-based; 0: none) */
    int stop_rc;
} range_log_t;

static int range_note(range_log_t *l, char kind, int64_t start) {
    cr_assert_lt(l->n, 16);
    l->kind[l->n] = kind;
    l->at[l->n++] = start;
    return l->n == l->stop_at ? l->stop_rc : 0;
}

static int range_seg_cb(const ql_segment_t *s, void *arg) {
    return range_note(arg, 's', s->start);
}

static int range_job_cb(const ql_live_job_t *j, void *arg) {
    cr_assert(j->has_range);
    return range_note(arg, 'j', j->start);
}

static int ref_seg_note(const ql_segment_t *s, void *arg) {
    return range_note(arg, 's', s->start);
}

static int ref_job_note(const ql_live_job_t *j, void *arg) {
    return range_note(arg, 'j', j->start);
}

static void put_range_fixture(const ql_model_t *m) {
    ql_txn_t *t = wbegin();
    ql_segment_t segs[] = {make_seg(&m->id, 0, 100, QL_SEG_READY),
                           make_seg(&m->id, 100, 200, QL_SEG_NEW),
                           make_seg(&m->id, 300, 400, QL_SEG_READY)};
    for (size_t i = 0; i < sizeof segs / sizeof *segs; i++)
        cr_assert_eq(ql_segment_put(t, &segs[i]), 0);
    ql_job_t jobs[] = {
        make_job("p", &m->id, QL_RUNNING, 0, 10, 100, 200),
        make_job("p", &m->id, QL_READY, 0, 11, 500, 600),
        make_job("p", &m->id, QL_SUCCEED, 0, 12, 600, 700), /* ended: not live */
        make_job("p", &m->id, QL_READY, 0, 13, 0, 0),       /* live, no range */
    };
    for (size_t i = 0; i < sizeof jobs / sizeof *jobs; i++)
        cr_assert_eq(ql_job_put(t, &jobs[i]), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

Test(contract, probe_range_answers_as_the_two_probes_segments_first) {
    ql_model_t m = setup_model("p", "m");
    put_range_fixture(&m);
    for (int write = 0; write < 2; write++) {
        ql_txn_t *t = write ? wbegin() : rbegin();
        range_log_t got = {0}, want = {0};
        cr_assert_eq(ql_probe_range(t, &m.id, 150, 650, range_seg_cb, range_job_cb, &got), 0);
        cr_assert_eq(ql_segment_foreach_overlapping(t, &m.id, 150, 650, ref_seg_note, &want), 0);
        cr_assert_eq(ql_job_foreach_live_overlapping(t, &m.id, 150, 650, ref_job_note, &want), 0);
        cr_assert_eq(got.n, 4, "two segments and two live jobs, write=%d", write);
        cr_assert_eq(got.n, want.n);
        for (int i = 0; i < got.n; i++) {
            cr_assert_eq(got.kind[i], want.kind[i], "row %d", i);
            cr_assert_eq(got.at[i], want.at[i], "row %d", i);
        }
        cr_assert_eq(got.kind[0], 's');
        cr_assert_eq(got.at[0], 100);
        cr_assert_eq(got.at[1], 300);
        cr_assert_eq(got.kind[2], 'j');
        cr_assert_eq(got.at[2], 100);
        cr_assert_eq(got.at[3], 500);
        range_log_t none = {0};
        cr_assert_eq(ql_probe_range(t, &m.id, 200, 300, range_seg_cb, range_job_cb, &none), 0);
        cr_assert_eq(none.n, 0, "half-open: [200, 300) touches nothing");
        cr_assert_eq(ql_probe_range(t, &m.id, 300, 300, range_seg_cb, range_job_cb, &none), 0);
        cr_assert_eq(none.n, 0, "an empty range probes nothing");
        ql_txn_abort(t);
    }
}

Test(contract, probe_range_stops_at_a_callbacks_word) {
    ql_model_t m = setup_model("p", "m");
    put_range_fixture(&m);
    ql_txn_t *t = rbegin();
    range_log_t seg_stop = {.stop_at = 1, .stop_rc = 1};
    cr_assert_eq(ql_probe_range(t, &m.id, 0, 1000, range_seg_cb, range_job_cb, &seg_stop), 0);
    cr_assert_eq(seg_stop.n, 1, "a segment's stop ends the jobs too");
    range_log_t job_stop = {.stop_at = 4, .stop_rc = 1};
    cr_assert_eq(ql_probe_range(t, &m.id, 0, 1000, range_seg_cb, range_job_cb, &job_stop), 0);
    cr_assert_eq(job_stop.n, 4, "three segments, then the first live job stops it");
    cr_assert_eq(job_stop.kind[3], 'j');
    range_log_t fail = {.stop_at = 5, .stop_rc = QL_EINVAL};
    cr_assert_eq(ql_probe_range(t, &m.id, 0, 1000, range_seg_cb, range_job_cb, &fail), QL_EINVAL);
    cr_assert_eq(fail.n, 5);
    ql_txn_abort(t);
}

/* ---- a long walk: every row in order across the fetches of a cursor, and a stop anywhere ---- */

typedef struct {
    ql_txn_t *t;
    int n, stop_at, reads;
    int64_t last_ctime;
    bool in_order;
} long_walk_t;

static int long_walk_cb(const ql_id_t *id, int prio, int64_t ctime, void *arg) {
    (void)prio;
    long_walk_t *w = arg;
    w->in_order = w->in_order && ctime > w->last_ctime;
    w->last_ctime = ctime;
    w->n++;
    if (w->n == 33 || w->n == 290) { /* a query inside, after the first and the second fetch */
        ql_job_t j;
        cr_assert_eq(ql_job_get(w->t, id, 0, &j), 0);
        cr_assert_eq(j.create_time, ctime);
        ql_job_free(&j);
        w->reads++;
    }
    return w->n == w->stop_at ? 1 : 0;
}

Test(contract, a_long_walk_gives_every_row_in_order_and_stops_anywhere) {
    ql_model_t m = setup_model("p", "m");
    ql_txn_t *t = wbegin();
    for (int i = 0; i < 300; i++) {
        ql_job_t j = make_job("p", &m.id, QL_READY, 0, 1000 + i, 0, 0);
        cr_assert_eq(ql_job_put(t, &j), 0);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    const int stops[] = {0, 1, 31, 32, 33, 288, 289, 300};
    for (size_t k = 0; k < sizeof stops / sizeof *stops; k++) {
        t = rbegin();
        long_walk_t w = {.t = t, .stop_at = stops[k], .in_order = true};
        cr_assert_eq(ql_job_foreach_state_ref(t, QL_READY, long_walk_cb, &w), 0);
        cr_assert_eq(w.n, stops[k] ? stops[k] : 300, "stop at %d", stops[k]);
        cr_assert(w.in_order, "stop at %d", stops[k]);
        cr_assert_eq(w.reads, (w.n >= 33) + (w.n >= 290));
        uint64_t count;
        cr_assert_eq(ql_job_count(t, "p", 1u << QL_READY, &count), 0, "usable after the walk");
        cr_assert_eq(count, 300);
        ql_txn_abort(t);
    }
}
