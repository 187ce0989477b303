/*
 * ql_job_get_many (storage/include/storage/ql_store.h): the jobs of a list of ids, in that order,
 * missing ids left out. It runs on LMDB as storage_test_job_get_many and on PostgreSQL as
 * storage_test_job_get_many@pg, where it is one query per 1,024 ids.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_JOBS 1500 /* more than one PostgreSQL chunk */

static char dir[256];
static ql_store_t *store;
static ql_id_t ids[N_JOBS];

/* N_JOBS jobs of project p, job i created at time i, committed. */
static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_get_many");
    ql_test_store_open(dir, &store);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_project_t p = {.create_time = 1};
    snprintf(p.name, sizeof p.name, "p");
    cr_assert_eq(ql_project_put(t, &p), 0);
    for (int i = 0; i < N_JOBS; i++) {
        ql_job_t j = {0};
        ql_store_new_id(store, &j.id);
        snprintf(j.project, sizeof j.project, "p");
        snprintf(j.type, sizeof j.type, "ADHOC");
        j.state = QL_SUCCEED;
        j.priority = 3;
        j.create_time = j.modify_time = i + 1;
        cr_assert_eq(ql_job_put(t, &j), 0);
        ids[i] = j.id;
    }
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
}

TestSuite(job_get_many, .init = setup, .fini = teardown);

typedef struct {
    int64_t times[2 * N_JOBS];
    size_t n;
    size_t stop_after; /* 0: never */
    ql_txn_t *txn;     /* set: look each job up again from the callback */
} seen_t;

static int seen_cb(const ql_job_t *j, void *arg) {
    seen_t *s = arg;
    if (s->txn) { /* the connection is free for the callback's own statements */
        ql_job_t again;
        cr_assert_eq(ql_job_get(s->txn, &j->id, 0, &again), 0);
        cr_assert_eq(again.create_time, j->create_time);
        ql_job_free(&again);
    }
    s->times[s->n++] = j->create_time;
    return s->stop_after && s->n == s->stop_after ? 1 : 0;
}

static ql_txn_t *rbegin(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    return t;
}

Test(job_get_many, jobs_come_in_the_order_of_the_ids_across_chunks) {
    ql_id_t *rev = malloc(sizeof ids);
    for (int i = 0; i < N_JOBS; i++)
        rev[i] = ids[N_JOBS - 1 - i];
    ql_txn_t *t = rbegin();
    seen_t *s = calloc(1, sizeof *s);
    cr_assert_eq(ql_job_get_many(t, N_JOBS, rev, 0, seen_cb, s), 0);
    cr_assert_eq(s->n, N_JOBS);
    for (int i = 0; i < N_JOBS; i++)
        cr_assert_eq(s->times[i], N_JOBS - i, "position %d", i);
    ql_txn_abort(t);
    free(s);
    free(rev);
}

Test(job_get_many, a_missing_id_is_left_out_and_a_repeated_one_comes_twice) {
    ql_id_t asked[4];
    asked[0] = ids[7];
    ql_store_new_id(store, &asked[1]); /* no such job */
    asked[2] = ids[3];
    asked[3] = ids[7];
    ql_txn_t *t = rbegin();
    seen_t *s = calloc(1, sizeof *s);
    cr_assert_eq(ql_job_get_many(t, 4, asked, 0, seen_cb, s), 0);
    cr_assert_eq(s->n, 3);
    cr_assert_eq(s->times[0], 8);
    cr_assert_eq(s->times[1], 4);
    cr_assert_eq(s->times[2], 8);
    cr_assert_eq(ql_job_get_many(t, 0, asked, 0, seen_cb, s), 0, "no ids: nothing to do");
    cr_assert_eq(s->n, 3);
    ql_txn_abort(t);
    free(s);
}

Test(job_get_many, a_callback_may_stop_the_calls_or_query_again) {
    ql_txn_t *t = rbegin();
    seen_t *s = calloc(1, sizeof *s);
    s->stop_after = 5;
    cr_assert_eq(ql_job_get_many(t, N_JOBS, ids, 0, seen_cb, s), 0, "a stop is not an error");
    cr_assert_eq(s->n, 5);
    memset(s, 0, sizeof *s);
    s->txn = t;
    cr_assert_eq(ql_job_get_many(t, 50, ids, 0, seen_cb, s), 0);
    cr_assert_eq(s->n, 50);
    ql_txn_abort(t);
    free(s);
}

static int fail_cb(const ql_job_t *j, void *arg) {
    (void)j;
    (*(int *)arg)++;
    return QL_EINVAL;
}

Test(job_get_many, a_callbacks_error_is_returned_and_ends_the_calls) {
    ql_txn_t *t = rbegin();
    int calls = 0;
    cr_assert_eq(ql_job_get_many(t, 10, ids, 0, fail_cb, &calls), QL_EINVAL);
    cr_assert_eq(calls, 1);
    ql_txn_abort(t);
}
