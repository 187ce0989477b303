/*
 * The LMDB store (storage/ql_store.h): open and schema, projects, models, segments and their
 * overlap index (a property test against brute force), jobs and their indexes, steps, outputs.
 * Each test runs on a fresh store in a temporary directory.
 */
#include "storage/storage.h"
#include "storage/store_int.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Checks in loops that run thousands of times: an assertion only when one fails, because
 * Criterion reports every passing cr_assert under --full-stats (which ctest uses). */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            cr_assert_fail(__VA_ARGS__);                                                           \
    } while (0)

static char dir[64];
static ql_store_t *store;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static ql_store_t *open_store(uint64_t seed) {
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    o.id_seed = seed;
    ql_err_t err = {0};
    ql_store_t *s = NULL;
    int rc = ql_store_open(&o, &s, &err);
    cr_assert_eq(rc, 0, "open %s: %s", dir, err.msg);
    return s;
}

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_store");
    store = open_store(0);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(store, .init = setup, .fini = teardown);

static ql_txn_t *wtxn(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    return t;
}

static ql_txn_t *rtxn(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    return t;
}

static void commit(ql_txn_t *t) {
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void put_project(ql_txn_t *t, const char *name) {
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    cr_assert_eq(ql_project_put(t, &p), 0);
}

static ql_id_t put_model(ql_txn_t *t, const char *project, const char *name) {
    ql_model_t m = {0};
    ql_store_new_id(store, &m.id);
    snprintf(m.project, sizeof m.project, "%s", project);
    snprintf(m.name, sizeof m.name, "%s", name);
    m.partitioned = true;
    strcpy(m.partition_column, "D");
    strcpy(m.partition_format, "yyyy-MM-dd");
    cr_assert_eq(ql_model_put(t, &m), 0);
    return m.id;
}

/* ---- open, reopen, schema ---- */

Test(store, open_close_reopen_keeps_data) {
    cr_assert_str_eq(ql_store_path(store), dir);
    ql_txn_t *t = wtxn();
    put_project(t, "kept");
    cr_assert_eq(ql_meta_put_u64(t, "epoch", 7), 0);
    cr_assert_eq(ql_meta_put_str(t, "note", "hello"), 0);
    commit(t);
    ql_store_close(store);
    store = open_store(0);
    t = rtxn();
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "kept", 0, &p), 0);
    cr_assert_str_eq(p.name, "kept");
    ql_project_free(&p);
    uint64_t v;
    cr_assert_eq(ql_meta_get_u64(t, "epoch", &v), 0);
    cr_assert_eq(v, 7);
    char buf[16];
    cr_assert_eq(ql_meta_get_str(t, "note", buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "hello");
    cr_assert_eq(ql_meta_get_str(t, "note", buf, 3), QL_ETOOBIG);
    cr_assert_eq(ql_meta_get_u64(t, "missing", &v), QL_ENOTFOUND);
    cr_assert_eq(ql_meta_get_u64(t, "schema_major", &v), 0);
    cr_assert_eq(v, QL_SCHEMA_MAJOR);
    cr_assert(!ql_txn_is_write(t));
    cr_assert_eq(ql_meta_put_u64(t, "x", 1), QL_EINVAL, "no writes in a read transaction");
    ql_txn_abort(t);

    ql_store_stat_t st;
    cr_assert_eq(ql_store_stat(store, &st), 0);
    if (!strcmp(ql_test_store_backend(), "lmdb"))
        cr_assert_eq(st.map_size, QL_STORE_DEFAULT_MAP_SIZE);
    cr_assert_gt(st.used_bytes, 0);
    cr_assert_gt(st.file_bytes, 0);
}

Test(store, read_only_open_reads_and_refuses_writes) {
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    commit(t);
    ql_store_close(store);
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    o.read_only = true;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_begin(store, true, &t), UV_EROFS);
    t = rtxn();
    uint64_t n;
    cr_assert_eq(ql_project_count(t, &n), 0);
    cr_assert_eq(n, 1);
    ql_txn_abort(t);
}

Test(store, newer_schema_is_refused_with_a_clear_message) {
    ql_test_require_backend("lmdb"); /* LMDB's own files, layers or indexes */
    ql_txn_t *t = wtxn();
    cr_assert_eq(ql_meta_put_u64(t, "schema_major", 99), 0);
    commit(t);
    ql_store_close(store);
    store = NULL;
    ql_store_opts_t o = {.path = dir};
    ql_err_t err = {0};
    ql_store_t *s = (ql_store_t *)0x1;
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EVERSION);
    cr_assert_null(s);
    cr_assert_eq(err.code, QL_EVERSION);
    cr_assert_not_null(strstr(err.msg, dir), "names the store: %s", err.msg);
    cr_assert_not_null(strstr(err.msg, "schema 99."), "names the store's version: %s", err.msg);
    char mine[32];
    snprintf(mine, sizeof mine, "schema %d.x", QL_SCHEMA_MAJOR);
    cr_assert_not_null(strstr(err.msg, mine), "names this build's version: %s", err.msg);

    /* The refused store was not touched: putting the version back makes it open again. */
    o.read_only = true;
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EVERSION);
}

Test(store, open_errors) {
    ql_test_require_backend("lmdb"); /* LMDB's own files, layers or indexes */
    ql_store_opts_t o = {.path = ""};
    ql_err_t err = {0};
    ql_store_t *s;
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EINVAL);
    cr_assert_not_null(strstr(err.msg, "qilin.storage.path"));
    char missing[128];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    o.path = missing;
    o.read_only = true;
    cr_assert_lt(ql_store_open(&o, &s, &err), 0, "read-only open of a missing store fails");
    cr_assert_null(s);
}

Test(store, nested_transaction_abort_leaves_parent_usable) {
    ql_txn_t *t = wtxn(), *c;
    put_project(t, "outer");
    cr_assert_eq(ql_txn_begin_nested(t, &c), 0);
    put_project(c, "discarded");
    ql_txn_abort(c);
    cr_assert_eq(ql_txn_begin_nested(t, &c), 0);
    put_project(c, "kept");
    commit(c);
    commit(t);
    t = rtxn();
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "outer", 0, &p), 0);
    ql_project_free(&p);
    cr_assert_eq(ql_project_get(t, "kept", 0, &p), 0);
    ql_project_free(&p);
    cr_assert_eq(ql_project_get(t, "discarded", 0, &p), QL_ENOTFOUND);
    cr_assert_eq(ql_txn_begin_nested(t, &c), QL_EINVAL, "no nesting in a read transaction");
    ql_txn_abort(t);
}

/* ---- projects and models ---- */

typedef struct {
    char names[16][QL_NAME_MAX + 1];
    int n;
    int stop_after;
} names_t;

static int project_names_cb(const ql_project_t *p, void *arg) {
    names_t *n = arg;
    strcpy(n->names[n->n++], p->name);
    return n->n == n->stop_after ? 1 : 0;
}

static int model_names_cb(const ql_model_t *m, void *arg) {
    names_t *n = arg;
    strcpy(n->names[n->n++], m->name);
    return n->n == n->stop_after ? 1 : 0;
}

Test(store, projects) {
    ql_txn_t *t = wtxn();
    const char *order[] = {"alpha", "beta", "gamma"};
    put_project(t, "gamma");
    put_project(t, "alpha");
    ql_project_t p = {0};
    strcpy(p.name, "beta");
    p.description = "second";
    cr_assert_eq(ql_strmap_set(&p.config, "kylin.web.timezone", "UTC"), 0);
    cr_assert_eq(ql_project_put(t, &p), 0);
    ql_strmap_free(&p.config);
    ql_project_t empty = {0};
    cr_assert_eq(ql_project_put(t, &empty), QL_EINVAL);
    commit(t);

    t = rtxn();
    uint64_t n;
    cr_assert_eq(ql_project_count(t, &n), 0);
    cr_assert_eq(n, 3);
    ql_project_t got;
    cr_assert_eq(ql_project_get(t, "beta", 0, &got), 0);
    cr_assert_str_eq(got.description, "second");
    cr_assert_str_eq(ql_strmap_get(&got.config, "kylin.web.timezone"), "UTC");
    ql_project_free(&got);
    cr_assert_eq(ql_project_get(t, "delta", 0, &got), QL_ENOTFOUND);
    names_t names = {0};
    cr_assert_eq(ql_project_foreach(t, project_names_cb, &names), 0);
    cr_assert_eq(names.n, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(names.names[i], order[i]);
    names_t first = {.stop_after = 1};
    cr_assert_eq(ql_project_foreach(t, project_names_cb, &first), 0, "a stop is not an error");
    cr_assert_eq(first.n, 1);
    ql_txn_abort(t);
}

Test(store, models) {
    ql_txn_t *t = wtxn();
    put_project(t, "p1");
    put_project(t, "p2");
    ql_id_t b = put_model(t, "p1", "bravo");
    ql_id_t a = put_model(t, "p1", "alpha");
    put_model(t, "p2", "alpha"); /* the same name in another project is fine */

    /* A duplicate name in a project, and a model in a missing project. */
    ql_model_t dup = {0};
    ql_store_new_id(store, &dup.id);
    strcpy(dup.project, "p1");
    strcpy(dup.name, "alpha");
    cr_assert_eq(ql_model_put(t, &dup), QL_EEXIST);
    strcpy(dup.project, "nowhere");
    cr_assert_eq(ql_model_put(t, &dup), QL_ENOTFOUND);
    commit(t);

    t = rtxn();
    ql_model_t m;
    cr_assert_eq(ql_model_get(t, &a, 0, &m), 0);
    cr_assert_str_eq(m.name, "alpha");
    cr_assert_str_eq(m.partition_format, "yyyy-MM-dd");
    ql_model_free(&m);
    cr_assert_eq(ql_model_find(t, "p1", "bravo", 0, &m), 0);
    cr_assert(ql_id_eq(&m.id, &b));
    ql_model_free(&m);
    cr_assert_eq(ql_model_find(t, "p1", "charlie", 0, &m), QL_ENOTFOUND);
    cr_assert_eq(ql_model_find(t, "p3", "alpha", 0, &m), QL_ENOTFOUND);
    uint64_t n;
    cr_assert_eq(ql_model_count(t, "p1", &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(ql_model_count(t, "p2", &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(ql_model_count(t, "p3", &n), 0);
    cr_assert_eq(n, 0);
    names_t names = {0};
    cr_assert_eq(ql_model_foreach(t, "p1", model_names_cb, &names), 0);
    cr_assert_eq(names.n, 2);
    cr_assert_str_eq(names.names[0], "alpha");
    cr_assert_str_eq(names.names[1], "bravo");
    ql_txn_abort(t);

    /* A rename moves the name index; a rewrite under the same name keeps the count. */
    t = wtxn();
    cr_assert_eq(ql_model_get(t, &a, QL_DECODE_KEEP_EXTRA, &m), 0);
    strcpy(m.name, "aardvark");
    cr_assert_eq(ql_model_put(t, &m), 0);
    m.status = QL_MODEL_OFFLINE;
    cr_assert_eq(ql_model_put(t, &m), 0);
    ql_model_free(&m);
    commit(t);
    t = rtxn();
    cr_assert_eq(ql_model_find(t, "p1", "alpha", 0, &m), QL_ENOTFOUND);
    cr_assert_eq(ql_model_find(t, "p1", "aardvark", 0, &m), 0);
    cr_assert_eq(m.status, QL_MODEL_OFFLINE);
    ql_model_free(&m);
    cr_assert_eq(ql_model_count(t, "p1", &n), 0);
    cr_assert_eq(n, 2);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

/* ---- segments ---- */

static ql_segment_t put_seg(ql_txn_t *t, const ql_id_t *model, int64_t s, int64_t e,
                            ql_seg_status_t st) {
    ql_segment_t seg = {0};
    ql_store_new_id(store, &seg.id);
    seg.model = *model;
    seg.start = s;
    seg.end = e;
    seg.status = st;
    int rc = ql_segment_put(t, &seg);
    CHECK(rc == 0, "put [%lld, %lld): %s", (long long)s, (long long)e, ql_strerror(rc));
    return seg;
}

typedef struct {
    ql_segment_t segs[4096];
    size_t n;
} seglist_t;

static int collect_cb(const ql_segment_t *s, void *arg) {
    seglist_t *l = arg;
    CHECK(l->n < 4096, "too many segments");
    l->segs[l->n++] = *s;
    return 0;
}

Test(store, segments_put_get_delete_count) {
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    ql_id_t m = put_model(t, "p", "m");
    ql_segment_t a = put_seg(t, &m, 0, 100, QL_SEG_READY);
    ql_segment_t b = put_seg(t, &m, 100, 200, QL_SEG_WARNING);
    cr_assert_eq(a.layer, 0);
    cr_assert_eq(b.layer, 0, "touching segments do not overlap");
    ql_segment_t bad = {0};
    ql_store_new_id(store, &bad.id);
    bad.model = m;
    bad.start = 5;
    bad.end = 5;
    cr_assert_eq(ql_segment_put(t, &bad), QL_EINVAL, "an empty range is refused");
    commit(t);

    t = rtxn();
    ql_segment_t got;
    cr_assert_eq(ql_segment_get(t, &b.id, &got), 0);
    cr_assert_eq(got.start, 100);
    cr_assert_eq(got.end, 200);
    cr_assert_eq(got.status, QL_SEG_WARNING);
    cr_assert(ql_id_eq(&got.model, &m));
    ql_segment_free(&got);
    uint64_t n;
    cr_assert_eq(ql_segment_count(t, &m, &n), 0);
    cr_assert_eq(n, 2);
    ql_txn_abort(t);

    /* Update in place (status), move (range), delete. */
    t = wtxn();
    b.status = QL_SEG_READY;
    b.start = 150;
    cr_assert_eq(ql_segment_put(t, &b), 0);
    cr_assert_eq(ql_segment_count(t, &m, &n), 0);
    cr_assert_eq(n, 2, "an update is not a new segment");
    cr_assert_eq(ql_segment_delete(t, &a.id), 0);
    cr_assert_eq(ql_segment_delete(t, &a.id), QL_ENOTFOUND);
    commit(t);
    t = rtxn();
    cr_assert_eq(ql_segment_get(t, &a.id, &got), QL_ENOTFOUND);
    cr_assert_eq(ql_segment_get(t, &b.id, &got), 0);
    cr_assert_eq(got.start, 150);
    ql_segment_free(&got);
    cr_assert_eq(ql_segment_count(t, &m, &n), 0);
    cr_assert_eq(n, 1);
    seglist_t *l = calloc(1, sizeof *l);
    cr_assert_eq(ql_segment_foreach_overlapping(t, &m, 0, 150, collect_cb, l), 0);
    cr_assert_eq(l->n, 0, "the moved segment no longer covers its old range");
    free(l);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

Test(store, segment_foreach_is_in_start_order_across_layers) {
    ql_test_require_backend("lmdb"); /* LMDB's own files, layers or indexes */
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    ql_id_t m = put_model(t, "p", "m"), other = put_model(t, "p", "other");
    put_seg(t, &m, 300, 400, QL_SEG_READY);
    put_seg(t, &m, 0, 100, QL_SEG_READY);
    put_seg(t, &m, 100, 200, QL_SEG_READY);
    put_seg(t, &other, 50, 60, QL_SEG_READY);
    /* Nested over the first two (a merge's NEW segment): layer 1. */
    ql_segment_t merge = put_seg(t, &m, 0, 200, QL_SEG_NEW);
    ql_segment_t inner = put_seg(t, &m, 150, 350, QL_SEG_NEW);
    cr_assert_eq(merge.layer, 1);
    cr_assert_eq(inner.layer, 1);
    commit(t);

    t = rtxn();
    seglist_t *l = calloc(1, sizeof *l);
    cr_assert_eq(ql_segment_foreach(t, &m, collect_cb, l), 0);
    cr_assert_eq(l->n, 5);
    int64_t want[5] = {0, 0, 100, 150, 300};
    for (size_t i = 0; i < l->n; i++) {
        cr_assert_eq(l->segs[i].start, want[i], "position %zu", i);
        cr_assert(ql_id_eq(&l->segs[i].model, &m));
    }
    ql_txn_abort(t);

    /* Once the layer-0 segments under it are gone, a rewrite moves it down. */
    t = wtxn();
    ql_segment_t first = l->segs[0].layer == 0 ? l->segs[0] : l->segs[1];
    cr_assert_eq(ql_segment_delete(t, &first.id), 0);
    cr_assert_eq(ql_segment_delete(t, &l->segs[2].id), 0);
    merge.status = QL_SEG_READY;
    cr_assert_eq(ql_segment_put(t, &merge), 0);
    cr_assert_eq(merge.layer, 0);
    commit(t);
    free(l);
}

/* A small deterministic generator (xorshift64*). */
static uint64_t rnd(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static int64_t rnd_in(uint64_t *s, int64_t lo, int64_t hi) { /* [lo, hi) */
    return lo + (int64_t)(rnd(s) % (uint64_t)(hi - lo));
}

static int seg_order(const void *pa, const void *pb) {
    const ql_segment_t *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return memcmp(a->id.b, b->id.b, 16);
}

/* Compares found (any order) with the brute-force answer over all (sorted by seg_order). */
static void assert_same_set(ql_segment_t *found, size_t nf, ql_segment_t *want, size_t nw,
                            int64_t qs, int64_t qe) {
    CHECK(nf == nw, "query [%lld, %lld): %zu found, %zu overlap", (long long)qs, (long long)qe, nf,
          nw);
    qsort(found, nf, sizeof *found, seg_order);
    for (size_t i = 0; i < nf; i++)
        CHECK(ql_id_eq(&found[i].id, &want[i].id), "query [%lld, %lld): item %zu differs",
              (long long)qs, (long long)qe, i);
}

/* Segments start at 0 or later (ql_records.h): the random ranges are drawn around SEG_OFF. */
#define SEG_OFF 1000000

Test(store, overlap_query_matches_brute_force) {
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    ql_segment_t *all = calloc(4096, sizeof *all), *want = calloc(4096, sizeof *want);
    ql_segment_t *sorted = calloc(4096, sizeof *sorted);
    seglist_t *got = calloc(1, sizeof *got);
    int queries = 0;
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    ql_id_t noise = put_model(t, "p", "noise");
    put_seg(t, &noise, SEG_OFF - 1000000, SEG_OFF + 1000000, QL_SEG_READY);
    commit(t);

    for (int round = 0; round < 40; round++) {
        char name[32];
        snprintf(name, sizeof name, "m%d", round);
        t = wtxn();
        ql_id_t m = put_model(t, "p", name);
        size_t n = 0;
        /* A tiling on a grid of 10 with random gaps: many ranges touch. */
        int64_t at = SEG_OFF + rnd_in(&seed, -50, 50) * 10;
        int tiles = (int)rnd_in(&seed, 0, 60);
        for (int i = 0; i < tiles; i++) {
            int64_t len = rnd_in(&seed, 1, 6) * 10;
            all[n++] = put_seg(t, &m, at, at + len, QL_SEG_READY);
            at += len + (rnd(&seed) % 3 == 0 ? rnd_in(&seed, 1, 4) * 10 : 0);
        }
        /* Nested and straddling segments (merge/refresh NEW segments, simulation loads). */
        int nested = (int)rnd_in(&seed, 0, 12);
        for (int i = 0; i < nested; i++) {
            int64_t s = SEG_OFF + rnd_in(&seed, -60, (at - SEG_OFF) / 10 + 5) * 10;
            int64_t e = s + rnd_in(&seed, 1, 30) * (rnd(&seed) % 2 ? 10 : 1);
            all[n++] = put_seg(t, &m, s, e, QL_SEG_NEW);
        }
        /* Churn: delete some, move some (layers change on rewrite). */
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rnd(&seed) % 10;
            if (r == 0) {
                cr_assert_eq(ql_segment_delete(t, &all[i].id), 0);
                all[i] = all[--n];
                i--;
            } else if (r == 1) {
                all[i].start -= 10;
                cr_assert_eq(ql_segment_put(t, &all[i]), 0);
            }
        }
        commit(t);

        t = rtxn();
        uint64_t count;
        cr_assert_eq(ql_segment_count(t, &m, &count), 0);
        cr_assert_eq(count, n);
        /* foreach walks both layers in start order. */
        got->n = 0;
        cr_assert_eq(ql_segment_foreach(t, &m, collect_cb, got), 0);
        cr_assert_eq(got->n, n);
        for (size_t i = 1; i < got->n; i++)
            CHECK(got->segs[i - 1].start <= got->segs[i].start, "foreach is in start order");

        memcpy(sorted, all, n * sizeof *all);
        qsort(sorted, n, sizeof *sorted, seg_order);
        for (int q = 0; q < 150; q++, queries++) {
            int64_t qs, qe;
            if (n && q % 3 == 0) { /* exactly at an existing edge */
                const ql_segment_t *e = &all[rnd(&seed) % n];
                qs = rnd(&seed) % 2 ? e->end : e->start - rnd_in(&seed, 1, 30);
                qe = rnd(&seed) % 2 ? e->start : qs + rnd_in(&seed, 1, 100);
                if (qe <= qs)
                    qe = qs + 1;
            } else {
                qs = SEG_OFF + rnd_in(&seed, -700, at - SEG_OFF + 200);
                qe = qs + rnd_in(&seed, 1, 300);
            }
            size_t nw = 0;
            for (size_t i = 0; i < n; i++)
                if (ql_range_overlaps(sorted[i].start, sorted[i].end, qs, qe))
                    want[nw++] = sorted[i];

            got->n = 0;
            CHECK(ql_segment_foreach_overlapping(t, &m, qs, qe, collect_cb, got) == 0, "query");
            for (size_t i = 0; i < got->n; i++)
                CHECK(ql_id_eq(&got->segs[i].model, &m), "another model's segment");
            assert_same_set(got->segs, got->n, want, nw, qs, qe);

            size_t nn = 0;
            ql_segment_t *out = got->segs; /* reuse the buffer: 4096 entries */
            CHECK(ql_segment_overlapping(t, &m, qs, qe, out, 4096, &nn) == 0, "query");
            CHECK(nn == nw, "ql_segment_overlapping: %zu, want %zu", nn, nw);
            for (size_t i = 1; i < nn; i++)
                CHECK(out[i - 1].start < out[i].start ||
                          (out[i - 1].start == out[i].start && out[i - 1].end <= out[i].end),
                      "ql_segment_overlapping sorts by (start, end)");
            assert_same_set(out, nn, want, nw, qs, qe);

            if (nw >= 2) { /* a small cap: ETOOBIG, the first cap found, the total in n */
                ql_segment_t few[1];
                CHECK(ql_segment_overlapping(t, &m, qs, qe, few, 1, &nn) == QL_ETOOBIG,
                      "a small cap is ETOOBIG");
                CHECK(nn == nw, "the total is counted past the cap");
            }
        }
        ql_txn_abort(t);
    }
    cr_assert_geq(queries, 6000);
    free(all);
    free(want);
    free(sorted);
    free(got);
}

Test(store, half_open_edges) {
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    ql_id_t m = put_model(t, "p", "m");
    ql_segment_t a = put_seg(t, &m, 100, 200, QL_SEG_READY);
    commit(t);
    t = rtxn();
    const struct {
        int64_t s, e;
        size_t n;
    } cases[] = {
        {0, 100, 0},   {200, 300, 0}, {99, 100, 0},  {200, 201, 0}, {0, 101, 1},
        {199, 300, 1}, {100, 200, 1}, {120, 130, 1}, {0, 1000, 1},  {100, 100, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ql_segment_t out[4];
        size_t n = 99;
        cr_assert_eq(ql_segment_overlapping(t, &m, cases[i].s, cases[i].e, out, 4, &n), 0);
        cr_assert_eq(n, cases[i].n, "[%lld, %lld)", (long long)cases[i].s, (long long)cases[i].e);
        if (n)
            cr_assert(ql_id_eq(&out[0].id, &a.id));
    }
    cr_assert(!ql_range_overlaps(0, 100, 100, 200));
    cr_assert(ql_range_overlaps(0, 101, 100, 200));
    cr_assert(ql_range_connects(100, 100));
    cr_assert(ql_range_contains(0, 100, 0, 100));
    cr_assert(!ql_range_contains(0, 100, 50, 101));
    ql_txn_abort(t);
}

/* ---- jobs ---- */

static ql_job_t make_job(const char *project, const ql_id_t *model, ql_state_t st, int prio,
                         int64_t created) {
    ql_job_t j = {0};
    ql_store_new_id(store, &j.id);
    snprintf(j.project, sizeof j.project, "%s", project);
    if (model)
        j.model = *model;
    strcpy(j.type, "INDEX_BUILD");
    j.state = st;
    j.priority = prio;
    j.create_time = j.modify_time = created;
    j.has_range = true;
    j.range_start = created;
    j.range_end = created + 1;
    return j;
}

typedef struct {
    ql_id_t ids[64];
    ql_state_t states[64];
    int64_t times[64];
    int n;
} idlist_t;

static int job_ids_cb(const ql_job_t *j, void *arg) {
    idlist_t *l = arg;
    l->times[l->n] = j->create_time;
    l->states[l->n] = j->state;
    l->ids[l->n++] = j->id;
    return 0;
}

static int live_cb(const ql_live_job_t *j, void *arg) {
    idlist_t *l = arg;
    l->states[l->n] = j->state;
    l->times[l->n] = j->start;
    l->ids[l->n++] = j->id;
    cr_assert(j->has_range);
    return 0;
}

static int recent_cb(const ql_id_t *id, ql_state_t st, int64_t mtime, void *arg) {
    idlist_t *l = arg;
    l->states[l->n] = st;
    l->times[l->n] = mtime;
    l->ids[l->n++] = *id;
    return 0;
}

Test(store, jobs_and_their_indexes) {
    ql_txn_t *t = wtxn();
    put_project(t, "p1");
    put_project(t, "p2");
    ql_id_t m1 = put_model(t, "p1", "m1"), m2 = put_model(t, "p2", "m2");
    /* Create times and priorities chosen so the fetch order differs from both. */
    ql_job_t j[6] = {
        make_job("p1", &m1, QL_READY, 3, 1000),  make_job("p1", &m1, QL_READY, 1, 3000),
        make_job("p1", &m1, QL_READY, 3, 500),   make_job("p2", &m2, QL_READY, 1, 2000),
        make_job("p1", NULL, QL_READY, 0, 4000), make_job("p2", &m2, QL_ERROR, 0, 100),
    };
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ql_job_put(t, &j[i]), 0);
    ql_job_t bad = make_job("p1", &m1, QL_READY, 5, 1);
    cr_assert_eq(ql_job_put(t, &bad), QL_EINVAL, "priority 5");
    bad = make_job("p1", &m1, QL_SKIP, 1, 1);
    cr_assert_eq(ql_job_put(t, &bad), QL_EINVAL, "SKIP is not a job state");
    commit(t);

    t = rtxn();
    ql_job_t got;
    cr_assert_eq(ql_job_get(t, &j[1].id, 0, &got), 0);
    cr_assert_eq(got.priority, 1);
    cr_assert_str_eq(got.project, "p1");
    ql_job_free(&got);

    idlist_t l = {0};
    cr_assert_eq(ql_job_foreach_state(t, QL_READY, job_ids_cb, &l), 0);
    int fetch_order[] = {4, 3, 1, 2, 0}; /* (priority, create time) */
    cr_assert_eq(l.n, 5);
    for (int i = 0; i < 5; i++)
        cr_assert(ql_id_eq(&l.ids[i], &j[fetch_order[i]].id), "fetch position %d", i);

    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_model(t, &m1, job_ids_cb, &l), 0);
    int model_order[] = {2, 0, 1}; /* creation order */
    cr_assert_eq(l.n, 3);
    for (int i = 0; i < 3; i++)
        cr_assert(ql_id_eq(&l.ids[i], &j[model_order[i]].id));

    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_recent(t, "p1", false, recent_cb, &l), 0);
    int p1_newest[] = {4, 1, 0, 2};
    cr_assert_eq(l.n, 4);
    for (int i = 0; i < 4; i++)
        cr_assert(ql_id_eq(&l.ids[i], &j[p1_newest[i]].id), "p1 newest-first %d", i);
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_recent(t, "p1", true, recent_cb, &l), 0);
    cr_assert_eq(l.n, 4);
    for (int i = 0; i < 4; i++)
        cr_assert(ql_id_eq(&l.ids[i], &j[p1_newest[3 - i]].id), "p1 oldest-first %d", i);
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_recent(t, NULL, false, recent_cb, &l), 0);
    int all_newest[] = {4, 1, 3, 0, 2, 5};
    cr_assert_eq(l.n, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert(ql_id_eq(&l.ids[i], &j[all_newest[i]].id), "global newest-first %d", i);
        cr_assert_eq(l.times[i], j[all_newest[i]].modify_time);
    }
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_recent(t, NULL, true, recent_cb, &l), 0);
    cr_assert_eq(l.n, 6);
    cr_assert(ql_id_eq(&l.ids[0], &j[5].id));
    cr_assert_eq(l.states[0], QL_ERROR);
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_recent(t, "p", false, recent_cb, &l), 0);
    cr_assert_eq(l.n, 0, "a project that is a prefix of another sees none of its jobs");

    uint64_t n;
    cr_assert_eq(ql_job_count(t, "p1", 1u << QL_READY, &n), 0);
    cr_assert_eq(n, 4);
    cr_assert_eq(ql_job_count(t, NULL, 1u << QL_READY | 1u << QL_ERROR, &n), 0);
    cr_assert_eq(n, 6);
    cr_assert_eq(ql_job_count(t, "p2", 1u << QL_ERROR, &n), 0);
    cr_assert_eq(n, 1);
    ql_txn_abort(t);

    /* State changes move jobs between the indexes and counters. */
    t = wtxn();
    j[1].state = QL_RUNNING;
    j[1].modify_time = 9000;
    j[0].state = QL_SUCCEED;
    j[0].modify_time = 9500;
    j[5].state = QL_DISCARDED;
    j[5].modify_time = 9100;
    for (int i = 0; i < 6; i++)
        cr_assert_eq(ql_job_put(t, &j[i]), 0);
    ql_job_t moved = j[2];
    moved.create_time = 1;
    cr_assert_eq(ql_job_put(t, &moved), QL_EINVAL, "a job's create time never changes");
    commit(t);

    t = rtxn();
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_state(t, QL_READY, job_ids_cb, &l), 0);
    cr_assert_eq(l.n, 3);
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_state(t, QL_RUNNING, job_ids_cb, &l), 0);
    cr_assert_eq(l.n, 1);
    cr_assert(ql_id_eq(&l.ids[0], &j[1].id));

    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_live(t, &m1, live_cb, &l), 0);
    cr_assert_eq(l.n, 2, "SUCCEED is not live");
    for (int i = 0; i < l.n; i++)
        cr_assert(ql_id_eq(&l.ids[i], &j[1].id) || ql_id_eq(&l.ids[i], &j[2].id));
    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_live(t, &m2, live_cb, &l), 0);
    cr_assert_eq(l.n, 1, "DISCARDED is not live");
    cr_assert(ql_id_eq(&l.ids[0], &j[3].id));
    cr_assert_eq(l.states[0], QL_READY);

    memset(&l, 0, sizeof l);
    cr_assert_eq(ql_job_foreach_recent(t, NULL, false, recent_cb, &l), 0);
    cr_assert_eq(l.n, 6);
    cr_assert(ql_id_eq(&l.ids[0], &j[0].id));
    cr_assert_eq(l.states[0], QL_SUCCEED);
    cr_assert(ql_id_eq(&l.ids[1], &j[5].id));
    cr_assert(ql_id_eq(&l.ids[2], &j[1].id));

    cr_assert_eq(ql_job_count(t, "p1", 1u << QL_READY, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(ql_job_count(t, "p1", 1u << QL_RUNNING | 1u << QL_SUCCEED, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert_eq(ql_job_count(t, NULL, 1u << QL_ERROR, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(ql_job_count(t, NULL, 0xff, &n), 0);
    cr_assert_eq(n, 6);
    cr_assert_eq(ql_job_count(t, "p2", 1u << QL_DISCARDED, &n), 0);
    cr_assert_eq(n, 1);
    ql_txn_abort(t);
}

/* ---- steps and outputs ---- */

typedef struct {
    uint32_t seqs[8];
    int n;
} seqs_t;

static int step_cb(const ql_step_t *s, void *arg) {
    seqs_t *l = arg;
    l->seqs[l->n++] = s->seq;
    return 0;
}

Test(store, steps_and_outputs) {
    ql_txn_t *t = wtxn();
    ql_id_t job, other;
    ql_store_new_id(store, &job);
    ql_store_new_id(store, &other);
    for (uint32_t i = 0; i < 3; i++) {
        ql_step_t s = {0};
        s.job = job;
        s.seq = 2 - i; /* written out of order */
        snprintf(s.name, sizeof s.name, "step %u", s.seq);
        strcpy(s.kind, "noop");
        s.state = QL_READY;
        cr_assert_eq(ql_step_put(t, &s), 0);
    }
    ql_step_t o = {.job = other, .seq = 0, .state = QL_READY};
    cr_assert_eq(ql_step_put(t, &o), 0);
    ql_step_t bad = {.job = job, .seq = 5, .state = (ql_state_t)QL_STATE_COUNT};
    cr_assert_eq(ql_step_put(t, &bad), QL_EINVAL);
    cr_assert_eq(ql_output_put(t, &job, 1, "hello\nworld", 11), 0);
    commit(t);

    t = wtxn();
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, &job, 1, &s), 0);
    cr_assert_str_eq(s.name, "step 1");
    s.state = QL_WARNING;
    s.failed_msg = strdup("exit 3");
    cr_assert_eq(ql_step_put(t, &s), 0);
    ql_step_free(&s);
    commit(t);

    t = rtxn();
    seqs_t l = {0};
    cr_assert_eq(ql_step_foreach(t, &job, step_cb, &l), 0);
    cr_assert_eq(l.n, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(l.seqs[i], (uint32_t)i);
    cr_assert_eq(ql_step_get(t, &job, 1, &s), 0);
    cr_assert_eq(s.state, QL_WARNING);
    cr_assert_str_eq(s.failed_msg, "exit 3");
    ql_step_free(&s);
    cr_assert_eq(ql_step_get(t, &job, 3, &s), QL_ENOTFOUND);
    char *text;
    size_t len;
    cr_assert_eq(ql_output_get(t, &job, 1, &text, &len), 0);
    cr_assert_eq(len, 11);
    cr_assert_str_eq(text, "hello\nworld");
    free(text);
    cr_assert_eq(ql_output_get(t, &job, 0, &text, &len), QL_ENOTFOUND);
    ql_txn_abort(t);
}

/* ---- fsck finds what it should ---- */

Test(store, fsck_reports_broken_invariants) {
    ql_test_require_backend("lmdb"); /* LMDB's own files, layers or indexes */
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    ql_id_t m = put_model(t, "p", "m");
    ql_segment_t a = put_seg(t, &m, 0, 100, QL_SEG_READY);
    (void)a;
    put_seg(t, &m, 50, 150, QL_SEG_READY); /* overlaps a: not allowed */
    ql_segment_t orphan = put_seg(t, &m, 200, 300, QL_SEG_NEW);
    (void)orphan;
    ql_id_t gone;
    ql_store_new_id(store, &gone);
    put_seg(t, &gone, 0, 10, QL_SEG_READY); /* a READY segment of no model */
    ql_job_t j = make_job("p", &m, QL_SUCCEED, 3, 10);
    j.n_steps = 2; /* but one step record, still RUNNING */
    cr_assert_eq(ql_job_put(t, &j), 0);
    ql_step_t s = {.job = j.id, .seq = 0, .state = QL_RUNNING};
    cr_assert_eq(ql_step_put(t, &s), 0);
    commit(t);

    ql_fsck_report_t r;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(ql_store_fsck(store, out, &r), 0);
    fclose(out);
    cr_assert_eq(r.projects, 1);
    cr_assert_eq(r.models, 1);
    cr_assert_eq(r.segments, 4);
    cr_assert_eq(r.jobs, 1);
    cr_assert_eq(r.steps, 1);
    cr_assert_not_null(strstr(text, "overlap"), "%s", text);
    cr_assert_not_null(strstr(text, "warning: segment"), "orphan NEW segment: %s", text);
    cr_assert_not_null(strstr(text, "does not exist"), "%s", text);
    cr_assert_not_null(strstr(text, "n_steps is 2 but 1"), "%s", text);
    cr_assert_not_null(strstr(text, "SUCCEED, yet a step"), "%s", text);
    cr_assert_not_null(strstr(text, "yet a step is RUNNING"), "%s", text);
    cr_assert_eq(r.violations, 5, "%s", text);
    cr_assert_eq(r.warnings, 1, "%s", text);
    free(text);
}

/* Index damage, made directly in the tables: fsck names each broken entry. */
Test(store, fsck_reports_index_damage) {
    ql_test_require_backend("lmdb"); /* LMDB's own files, layers or indexes */
    ql_txn_t *t = wtxn();
    put_project(t, "p");
    ql_id_t m = put_model(t, "p", "m");
    ql_segment_t seg = put_seg(t, &m, 0, 100, QL_SEG_READY);
    ql_job_t j = make_job("p", &m, QL_READY, 2, 1000);
    cr_assert_eq(ql_job_put(t, &j), 0);
    commit(t);

    ql_fsck_report_t r;
    cr_assert_eq(ql_store_fsck(store, NULL, &r), 0);
    cr_assert_eq(r.violations, 0, "clean before the damage");

    t = wtxn();
    /* The job's fetch-order entry goes missing and a stale one appears. */
    uint8_t k[64];
    k[0] = QL_READY;
    k[1] = 2;
    ql_put_key_i64(k + 2, 1000);
    memcpy(k + 10, j.id.b, 16);
    cr_assert_eq(ql_db_del(t, DB_JOB_STATES, k, 26), 0);
    k[0] = QL_RUNNING;
    cr_assert_eq(ql_db_put(t, DB_JOB_STATES, k, 26, "", 0), 0);
    /* A model name that points nowhere, a segment without its id entry, a wrong counter. */
    ql_id_t nowhere;
    ql_store_new_id(store, &nowhere);
    cr_assert_eq(ql_db_put(t, DB_MODEL_NAMES, "p\0ghost", 7, nowhere.b, 16), 0);
    cr_assert_eq(ql_db_del(t, DB_SEGMENT_IDS, seg.id.b, 16), 0);
    uint8_t ck[17] = {'M'};
    memcpy(ck + 1, "p", 1);
    cr_assert_eq(ql_count_add(t, ck, 2, 5), 0);
    /* A step of a job that does not exist. */
    ql_step_t s = {.job = nowhere, .seq = 0, .state = QL_READY};
    cr_assert_eq(ql_step_put(t, &s), 0);
    commit(t);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(ql_store_fsck(store, out, &r), 0);
    fclose(out);
    cr_assert_not_null(strstr(text, "no job_states entry"), "%s", text);
    cr_assert_not_null(strstr(text, "job_states: stale entry"), "%s", text);
    cr_assert_not_null(strstr(text, "model_names: stale entry 'p'/'ghost'"), "%s", text);
    cr_assert_not_null(strstr(text, "no segment_ids entry"), "%s", text);
    cr_assert_not_null(strstr(text, "has 1 models, its counter says 6"), "%s", text);
    cr_assert_not_null(strstr(text, "the job does not exist"), "%s", text);
    cr_assert_eq(r.violations, 6, "%s", text);
    free(text);
}
