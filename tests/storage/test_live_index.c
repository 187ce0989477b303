/*
 * The live-job index by range start (job_live, schema 2): the overlap query against a plain
 * walk of every live job, the invariant it rests on, and the upgrade of a schema-1 store.
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

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            cr_assert_fail(__VA_ARGS__);                                                           \
    } while (0)

#define DAY 86400000LL

static char dir[64];
static ql_store_t *store;

static ql_store_t *open_store(bool read_only, ql_err_t *err) {
    ql_store_opts_t o = {.path = dir, .id_seed = 7, .read_only = read_only};
    ql_store_t *s = NULL;
    ql_err_clear(err);
    ql_store_open(&o, &s, err);
    return s;
}

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_live");
    ql_err_t err;
    store = open_store(false, &err);
    cr_assert_not_null(store, "open: %s", err.msg);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
    ql_test_rm_tree(dir);
}

TestSuite(live_index, .init = setup, .fini = teardown);

static ql_txn_t *txn_begin(bool write) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, write, &t), 0);
    return t;
}

static ql_id_t put_model(ql_txn_t *t, const char *name) {
    ql_model_t m = {0};
    ql_store_new_id(store, &m.id);
    strcpy(m.project, "p");
    snprintf(m.name, sizeof m.name, "%s", name);
    m.partitioned = true;
    strcpy(m.partition_column, "D");
    strcpy(m.partition_format, "yyyy-MM-dd");
    cr_assert_eq(ql_model_put(t, &m), 0);
    return m.id;
}

static void put_project(ql_txn_t *t) {
    ql_project_t p = {0};
    strcpy(p.name, "p");
    cr_assert_eq(ql_project_put(t, &p), 0);
}

/* A job straight into the store (no rules): the index is what is under test. */
static ql_job_t put_job(ql_txn_t *t, const ql_id_t *model, bool has_range, int64_t start,
                        int64_t end, ql_state_t state) {
    ql_job_t j = {0};
    ql_store_new_id(store, &j.id);
    strcpy(j.project, "p");
    j.model = *model;
    strcpy(j.type, "INC_BUILD");
    j.state = state;
    j.priority = 3;
    j.has_range = has_range;
    j.range_start = start;
    j.range_end = end;
    j.create_time = j.modify_time = 1000;
    cr_assert_eq(ql_job_put(t, &j), 0);
    return j;
}

typedef struct {
    ql_id_t ids[512];
    int64_t starts[512];
    int n;
} seen_t;

static int seen_cb(const ql_live_job_t *j, void *arg) {
    seen_t *s = arg;
    if (s->n < 512) {
        s->ids[s->n] = j->id;
        s->starts[s->n] = j->start;
        s->n++;
    }
    return 0;
}

static int stop_cb(const ql_live_job_t *j, void *arg) {
    (void)j;
    (*(int *)arg)++;
    return 1;
}

/* What the query must return: every live ranged job of the model over [start, end). */
static void brute(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end, seen_t *out) {
    seen_t all = {0};
    CHECK(ql_job_foreach_live(t, model, seen_cb, &all) == 0, "walk");
    memset(out, 0, sizeof *out);
    for (int i = 0; i < all.n; i++) {
        ql_job_t j;
        CHECK(ql_job_get(t, &all.ids[i], 0, &j) == 0, "get");
        if (j.has_range && j.range_start < end && j.range_end > start) {
            out->ids[out->n] = j.id;
            out->starts[out->n] = j.range_start;
            out->n++;
        }
        ql_job_free(&j);
    }
}

static bool same_set(const seen_t *a, const seen_t *b) {
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        bool found = false;
        for (int k = 0; k < b->n && !found; k++)
            found = ql_id_eq(&a->ids[i], &b->ids[k]);
        if (!found)
            return false;
    }
    return true;
}

Test(live_index, overlap_query_matches_a_walk_of_every_live_job) {
    ql_txn_t *t = txn_begin(true);
    put_project(t);
    ql_id_t m = put_model(t, "m"), other = put_model(t, "other");
    /* Disjoint ranges of varying length with gaps, in random order; some final; some without a
     * range; the other model gets jobs over the same ranges. */
    srand(42);
    int order[60];
    for (int i = 0; i < 60; i++)
        order[i] = i;
    for (int i = 59; i > 0; i--) {
        int k = rand() % (i + 1), x = order[i];
        order[i] = order[k];
        order[k] = x;
    }
    for (int i = 0; i < 60; i++) {
        int64_t start = order[i] * 10 * DAY, len = (1 + order[i] % 7) * DAY;
        ql_state_t st = order[i] % 5 == 0 ? QL_SUCCEED : order[i] % 3 == 0 ? QL_ERROR : QL_READY;
        put_job(t, &m, true, start, start + len, st);
        put_job(t, &other, true, start, start + len, QL_READY);
    }
    put_job(t, &m, false, 0, 0, QL_READY);
    put_job(t, &m, false, 0, 0, QL_RUNNING);
    cr_assert_eq(ql_txn_commit(t), 0);

    t = txn_begin(false);
    int queries = 0;
    for (int64_t start = -3 * DAY; start < 620 * DAY; start += DAY / 2)
        for (int64_t len = DAY / 2; len <= 25 * DAY; len += 4 * DAY + DAY / 2) {
            seen_t got = {0}, want;
            CHECK(ql_job_foreach_live_overlapping(t, &m, start, start + len, seen_cb, &got) == 0,
                  "query");
            brute(t, &m, start, start + len, &want);
            CHECK(same_set(&got, &want), "[%lld, %lld): %d found, %d expected", (long long)start,
                  (long long)(start + len), got.n, want.n);
            for (int i = 1; i < got.n; i++)
                CHECK(got.starts[i - 1] < got.starts[i], "by range start");
            queries++;
        }
    cr_assert_gt(queries, 1000);
    ql_txn_abort(t);
}

Test(live_index, half_open_edges_and_the_job_starting_before) {
    ql_txn_t *t = txn_begin(true);
    put_project(t);
    ql_id_t m = put_model(t, "m");
    ql_job_t a = put_job(t, &m, true, 0, 10 * DAY, QL_PAUSED);
    put_job(t, &m, true, 10 * DAY, 11 * DAY, QL_READY);
    cr_assert_eq(ql_txn_commit(t), 0);
    t = txn_begin(false);
    seen_t s = {0};
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m, 9 * DAY, 9 * DAY + 1, seen_cb, &s), 0);
    cr_assert_eq(s.n, 1, "the job that starts before the range and ends inside it");
    cr_assert(ql_id_eq(&s.ids[0], &a.id));
    memset(&s, 0, sizeof s);
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m, 11 * DAY, 12 * DAY, seen_cb, &s), 0);
    cr_assert_eq(s.n, 0, "[10d, 11d) ends where the range starts");
    memset(&s, 0, sizeof s);
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m, -DAY, 0, seen_cb, &s), 0);
    cr_assert_eq(s.n, 0, "[0, 10d) starts where the range ends");
    memset(&s, 0, sizeof s);
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m, 5 * DAY, 5 * DAY, seen_cb, &s), 0);
    cr_assert_eq(s.n, 0, "an empty range overlaps nothing");
    int calls = 0;
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m, 0, 20 * DAY, stop_cb, &calls), 0);
    cr_assert_eq(calls, 1, "a callback returning 1 stops the walk");
    ql_txn_abort(t);
}

Test(live_index, conflict_found_among_many_live_jobs_of_one_model) {
    ql_txn_t *t = txn_begin(true);
    put_project(t);
    ql_id_t m = put_model(t, "m");
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_step_spec_t steps[1] = {{.name = "build", .kind = "noop"}};
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "ADMIN", .now = 1, .steps = steps, .n_steps = 1};
    ql_err_t err;
    t = txn_begin(true);
    for (int i = 0; i < 2000; i++)
        CHECK(ql_meta_submit_build(t, &m, i * DAY, (i + 1) * DAY, &spec, NULL, NULL, &err) == 0,
              "build %d: %s", i, err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);

    /* The segments refuse an overlap first (KE-010022202); with a segment gone the live job over
     * the range still refuses it (KE-010032206). */
    t = txn_begin(true);
    seen_t s = {0};
    cr_assert_eq(
        ql_job_foreach_live_overlapping(t, &m, 1234 * DAY + 1, 1234 * DAY + 2, seen_cb, &s), 0);
    cr_assert_eq(s.n, 1);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &s.ids[0], 0, &j), 0);
    cr_assert_eq(j.range_start, 1234 * DAY);
    cr_assert_eq(ql_segment_delete(t, &j.segment), 0);
    ql_job_free(&j);
    /* Inside the job's range: the live job found is the one starting before the range. */
    int rc = ql_meta_submit_build(t, &m, 1234 * DAY + DAY / 4, 1234 * DAY + DAY / 2, &spec, NULL,
                                  NULL, &err);
    cr_assert_eq(rc, QL_EJOBCONFLICT, "got %d: %s", rc, err.msg);
    ql_txn_abort(t);
}

/* Rewrites job_live in the schema-1 layout, (model, id), and marks the store schema 1. */
static void downgrade_to_schema_1(void) {
    ql_txn_t *t = txn_begin(true);
    MDB_cursor *c;
    cr_assert_eq(ql_db_cursor(t, DB_JOB_LIVE, &c), 0);
    uint8_t keys[64][QL_LIVE_KEY_LEN], vals[64][QL_LIVE_VAL_LEN];
    int n = 0;
    MDB_val k, v;
    for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && n < 64;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        cr_assert_eq(k.mv_size, QL_LIVE_KEY_LEN);
        memcpy(keys[n], k.mv_data, QL_LIVE_KEY_LEN);
        memcpy(vals[n], v.mv_data, QL_LIVE_VAL_LEN);
        n++;
    }
    mdb_cursor_close(c);
    cr_assert_gt(n, 0);
    for (int i = 0; i < n; i++) {
        uint8_t old[32];
        memcpy(old, keys[i], 16);
        memcpy(old + 16, keys[i] + 24, 16);
        cr_assert_eq(ql_db_del(t, DB_JOB_LIVE, keys[i], QL_LIVE_KEY_LEN), 0);
        cr_assert_eq(ql_db_put(t, DB_JOB_LIVE, old, sizeof old, vals[i], QL_LIVE_VAL_LEN), 0);
    }
    cr_assert_eq(ql_meta_put_u64(t, "schema_major", 1), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

Test(live_index, a_schema_1_store_is_upgraded_in_place_and_refused_read_only) {
    ql_txn_t *t = txn_begin(true);
    put_project(t);
    ql_id_t m = put_model(t, "m");
    ql_job_t a = put_job(t, &m, true, 0, DAY, QL_READY);
    put_job(t, &m, true, DAY, 2 * DAY, QL_ERROR);
    put_job(t, &m, false, 0, 0, QL_RUNNING);
    put_job(t, &m, true, 2 * DAY, 3 * DAY, QL_SUCCEED);
    cr_assert_eq(ql_txn_commit(t), 0);
    downgrade_to_schema_1();
    ql_store_close(store);

    ql_err_t err;
    store = open_store(true, &err);
    cr_assert_null(store, "a read-only open cannot upgrade");
    cr_assert_eq(err.code, QL_EVERSION);
    cr_assert(strstr(err.msg, "schema 1.0") && strstr(err.msg, "upgrade"), "%s", err.msg);

    store = open_store(false, &err);
    cr_assert_not_null(store, "open: %s", err.msg);
    uint64_t from_major = 0, from_minor = 9;
    cr_assert(ql_store_upgraded_from(store, &from_major, &from_minor), "the open says it upgraded");
    cr_assert_eq(from_major, 1);
    cr_assert_eq(from_minor, 0);
    t = txn_begin(false);
    uint64_t major = 0;
    cr_assert_eq(ql_meta_get_u64(t, "schema_major", &major), 0);
    cr_assert_eq(major, QL_SCHEMA_MAJOR);
    seen_t s = {0};
    cr_assert_eq(ql_job_foreach_live(t, &m, seen_cb, &s), 0);
    cr_assert_eq(s.n, 3, "every live job survives the upgrade");
    memset(&s, 0, sizeof s);
    cr_assert_eq(ql_job_foreach_live_overlapping(t, &m, DAY / 2, DAY / 2 + 1, seen_cb, &s), 0);
    cr_assert_eq(s.n, 1);
    cr_assert(ql_id_eq(&s.ids[0], &a.id));
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
    ql_store_close(store);
    store = open_store(false, &err);
    cr_assert_not_null(store, "reopen: %s", err.msg);
    cr_assert_not(ql_store_upgraded_from(store, &from_major, &from_minor),
                  "a current store is not upgraded again");
}

Test(live_index, fsck_reports_overlapping_live_jobs_of_one_model) {
    ql_txn_t *t = txn_begin(true);
    put_project(t);
    ql_id_t m = put_model(t, "m"), other = put_model(t, "other");
    put_job(t, &m, true, 0, 10 * DAY, QL_READY);
    put_job(t, &m, true, 12 * DAY, 13 * DAY, QL_READY);
    put_job(t, &other, true, 5 * DAY, 6 * DAY, QL_READY); /* another model: no overlap */
    put_job(t, &m, true, 9 * DAY, 11 * DAY, QL_SUCCEED);  /* final: not live */
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_test_assert_fsck_clean(store);

    t = txn_begin(true);
    put_job(t, &m, true, 3 * DAY, 4 * DAY, QL_PAUSED); /* inside [0, 10d): bypasses the rules */
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_fsck_report_t r;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(ql_store_fsck(store, out, &r), 0);
    fclose(out);
    cr_assert_eq(r.violations, 1, "%s", text);
    cr_assert(strstr(text, "overlap"), "%s", text);
    free(text);
}

/* ql_job_put writes only the index entries that change; whatever changes, fsck (which rebuilds
 * every expected entry from the records) and the counters must agree after each put. */
Test(live_index, every_kind_of_job_update_keeps_indexes_and_counters_exact) {
    ql_txn_t *t = txn_begin(true);
    put_project(t);
    ql_id_t m = put_model(t, "m");
    ql_job_t j = put_job(t, &m, true, 0, DAY, QL_READY);
    cr_assert_eq(ql_txn_commit(t), 0);
    struct {
        ql_state_t state;
        int priority;
        int64_t modify_time;
        int64_t start;
    } steps[] = {
        {QL_READY, 3, 1000, 0},         /* nothing changes */
        {QL_READY, 3, 2000, 0},         /* only the modify time (job_recent moves) */
        {QL_READY, 1, 2000, 0},         /* only the priority (job_states moves) */
        {QL_READY, 1, 2000, DAY / 2},   /* the range start (job_live moves) */
        {QL_RUNNING, 1, 2000, DAY / 2}, /* only the state (values and counters) */
        {QL_PAUSED, 1, 3000, DAY / 2},  {QL_SUCCEED, 1, 4000, DAY / 2}, /* final: out of job_live */
        {QL_SUCCEED, 1, 5000, DAY / 2},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        t = txn_begin(true);
        j.state = steps[i].state;
        j.priority = steps[i].priority;
        j.modify_time = steps[i].modify_time;
        j.range_start = steps[i].start;
        cr_assert_eq(ql_job_put(t, &j), 0);
        cr_assert_eq(ql_txn_commit(t), 0);
        ql_test_assert_fsck_clean(store);
        t = txn_begin(false);
        uint64_t n = 0;
        cr_assert_eq(ql_job_count(t, "p", 1u << steps[i].state, &n), 0);
        cr_assert_eq(n, 1, "update %zu: counted under its state", i);
        cr_assert_eq(ql_job_count(t, NULL, 0xffff, &n), 0);
        cr_assert_eq(n, 1, "update %zu: counted once", i);
        seen_t s = {0};
        cr_assert_eq(ql_job_foreach_live(t, &m, seen_cb, &s), 0);
        cr_assert_eq(s.n, ql_state_is_final(steps[i].state) ? 0 : 1, "update %zu", i);
        ql_txn_abort(t);
    }
}
