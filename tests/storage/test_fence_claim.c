/*
 * Claims of tokens minted outside the store (storage/include/storage/ql_meta.h: ql_fence_claim,
 * ql_job_claim; docs/zookeeper.md, Tokens), through the public API on both backends: runs as
 * storage_test_fence_claim (LMDB) and storage_test_fence_claim@pg.
 */
#include "storage/storage.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static char dir[256];
static ql_store_t *store;

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_fence_claim");
    ql_test_store_open(dir, &store);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
}

TestSuite(fence_claim, .init = setup, .fini = teardown);

static ql_txn_t *wbegin(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    return t;
}

static uint64_t epoch_now(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t e;
    cr_assert_eq(ql_fence_current(t, &e), 0);
    ql_txn_abort(t);
    return e;
}

/* One claim in a transaction of its own; returns its status. */
static int claim(uint64_t token, ql_err_t *err) {
    ql_txn_t *t = wbegin();
    int rc = ql_fence_claim(t, token, err);
    if (rc) {
        ql_txn_abort(t);
        return rc;
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    return 0;
}

Test(fence_claim, the_epoch_takes_a_token_that_is_not_smaller) {
    ql_err_t err = {0};
    cr_assert_eq(epoch_now(), 0);
    cr_assert_eq(claim(0x500000007, &err), 0, "%s", err.msg);
    cr_assert_eq(epoch_now(), 0x500000007, "a first claim sets the epoch");
    cr_assert_eq(claim(0x500000007, &err), 0, "the same holding claims again: %s", err.msg);
    cr_assert_eq(epoch_now(), 0x500000007);
    cr_assert_eq(claim(0x500000003, &err), QL_EFENCED, "a stale holding is refused");
    cr_assert(strstr(err.msg, "21474836483") && strstr(err.msg, "21474836487"),
              "the message names both tokens: %s", err.msg);
    cr_assert_eq(epoch_now(), 0x500000007, "a refused claim lowers nothing");
    cr_assert_eq(claim(0x600000001, &err), 0, "%s", err.msg);
    cr_assert_eq(epoch_now(), 0x600000001);

    ql_txn_t *t = wbegin();
    cr_assert_eq(ql_fence_check(t, 0x600000001, &err), 0, "the claimed token passes checks");
    cr_assert_eq(ql_fence_check(t, 0x500000007, &err), QL_EFENCED, "the older one no longer");
    uint64_t e;
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(e, 0x600000002, "a raise continues from a claimed epoch");
    cr_assert_eq(ql_fence_claim(t, 0x600000001, &err), QL_EFENCED,
                 "a claim sees the raise of its own transaction");
    ql_txn_abort(t);
}

Test(fence_claim, bad_tokens_and_read_transactions_are_refused) {
    ql_err_t err = {0};
    cr_assert_eq(claim(0, &err), QL_EINVAL);
    cr_assert_eq(claim((uint64_t)INT64_MAX + 1, &err), QL_EINVAL, "PostgreSQL stores int8");
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_fence_claim(t, 5, &err), QL_EINVAL);
    ql_job_t none = {0};
    ql_store_new_id(store, &none.id);
    ql_txn_abort(t);
    t = wbegin();
    cr_assert_eq(ql_job_claim(t, &none.id, 5, &err), QL_ENOTFOUND, "no such job: %s", err.msg);
    ql_txn_abort(t);
    cr_assert_eq(epoch_now(), 0);
}

/* A job in state of a fresh project, committed; its id. */
static ql_id_t put_job_in(ql_state_t state, uint64_t fence) {
    ql_txn_t *t = wbegin();
    ql_project_t p = {0};
    if (ql_project_get(t, "p", 0, &p) == QL_ENOTFOUND) {
        snprintf(p.name, sizeof p.name, "p");
        p.create_time = 1;
        cr_assert_eq(ql_project_put(t, &p), 0);
    } else {
        ql_project_free(&p);
    }
    ql_job_t j = {0};
    ql_store_new_id(store, &j.id);
    snprintf(j.project, sizeof j.project, "p");
    snprintf(j.type, sizeof j.type, "INDEX_BUILD");
    j.state = state;
    j.priority = 3;
    j.create_time = j.modify_time = 10;
    j.fence = fence;
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return j.id;
}

static ql_id_t put_job(uint64_t fence) {
    return put_job_in(QL_READY, fence);
}

static uint64_t job_fence(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    uint64_t f = j.fence;
    ql_job_free(&j);
    ql_txn_abort(t);
    return f;
}

static int job_claim(const ql_id_t *id, uint64_t token, ql_err_t *err) {
    ql_txn_t *t = wbegin();
    int rc = ql_job_claim(t, id, token, err);
    if (rc) {
        ql_txn_abort(t);
        return rc;
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    return 0;
}

Test(fence_claim, a_job_takes_a_token_that_is_not_smaller) {
    ql_id_t a = put_job(0), b = put_job(40);
    ql_err_t err = {0};
    cr_assert_eq(job_claim(&a, 30, &err), 0, "%s", err.msg);
    cr_assert_eq(job_fence(&a), 30);
    cr_assert_eq(job_claim(&a, 30, &err), 0, "the same holding claims again: %s", err.msg);
    cr_assert_eq(job_claim(&a, 20, &err), QL_EFENCED, "a stale lock of the job is refused");
    cr_assert(strstr(err.msg, "20") && strstr(err.msg, "30"), "%s", err.msg);
    cr_assert_eq(job_fence(&a), 30);
    cr_assert_eq(job_claim(&a, 31, &err), 0, "%s", err.msg);
    cr_assert_eq(job_fence(&a), 31);
    cr_assert_eq(job_fence(&b), 40, "a claim changes only its job");
    cr_assert_eq(job_claim(&b, 39, &err), QL_EFENCED);
    cr_assert_eq(epoch_now(), 0, "a job's claim leaves the job engine epoch alone");
    ql_test_assert_fsck_clean(store);
}

/* `qilin cluster reset-coordination` after a move to a new ZooKeeper ensemble: its zxids start
 * small, so the epoch and the fences of the jobs that may still run go back to 0 (final jobs
 * keep theirs: nothing claims them again). */
Test(fence_claim, a_reset_lowers_the_epoch_and_the_fences_of_jobs_not_final) {
    ql_err_t err = {0};
    cr_assert_eq(claim(0x500000007, &err), 0, "%s", err.msg);
    ql_id_t ready = put_job(0x500000009), paused = put_job_in(QL_PAUSED, 0x500000006);
    ql_id_t done = put_job_in(QL_SUCCEED, 0x500000008), fresh = put_job(0);
    cr_assert_eq(claim(0x7, &err), QL_EFENCED, "before the reset a new ensemble's token loses");

    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t was;
    cr_assert_eq(ql_fence_reset(t, &was, &err), QL_EINVAL, "a read transaction cannot reset");
    ql_txn_abort(t);
    t = wbegin();
    cr_assert_eq(ql_fence_reset(t, &was, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(was, 0x500000007, "the reset says what the epoch was");
    cr_assert_eq(epoch_now(), 0);
    cr_assert_eq(job_fence(&ready), 0);
    cr_assert_eq(job_fence(&paused), 0);
    cr_assert_eq(job_fence(&fresh), 0);
    cr_assert_eq(job_fence(&done), 0x500000008, "a final job keeps its fence");

    cr_assert_eq(claim(0x7, &err), 0, "the new ensemble's first holding claims: %s", err.msg);
    cr_assert_eq(job_claim(&ready, 0x8, &err), 0, "and its first job lock: %s", err.msg);
    t = wbegin();
    cr_assert_eq(ql_fence_check(t, 0x500000007, &err), QL_EFENCED,
                 "the old ensemble's holder stays fenced out");
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(store);
}

static int job_check(const ql_id_t *id, uint64_t token, ql_err_t *err) {
    ql_txn_t *t = wbegin();
    int rc = ql_job_fence_check(t, id, token, err);
    ql_txn_abort(t);
    return rc;
}

Test(fence_claim, a_job_change_passes_only_with_the_claimed_token) {
    ql_id_t a = put_job(0);
    ql_err_t err = {0};
    cr_assert_eq(job_claim(&a, 0x700000010, &err), 0, "%s", err.msg);
    cr_assert_eq(job_check(&a, 0x700000010, &err), 0, "the claimed (equal) token: %s", err.msg);
    cr_assert_eq(job_check(&a, 0x700000009, &err), QL_EFENCED, "a smaller token is stale");
    cr_assert(strstr(err.msg, "30064771081") && strstr(err.msg, "30064771088"),
              "the message names both tokens: %s", err.msg);
    cr_assert_eq(job_check(&a, 0x700000011, &err), QL_EFENCED,
                 "a larger token that was never claimed does not pass either");
    cr_assert_eq(job_claim(&a, 0x800000001, &err), 0, "a later lock claims: %s", err.msg);
    cr_assert_eq(job_check(&a, 0x700000010, &err), QL_EFENCED, "the earlier holding is out");
    cr_assert_eq(job_check(&a, 0x800000001, &err), 0, "%s", err.msg);
    ql_job_t none = {0};
    ql_store_new_id(store, &none.id);
    cr_assert_eq(job_check(&none.id, 5, &err), QL_ENOTFOUND, "no such job: %s", err.msg);
    cr_assert_eq(epoch_now(), 0, "a job's check leaves the job engine epoch alone");
}

/* ---- claims racing from two transactions ---- */

typedef struct racer {
    bool job; /* ql_job_claim of id, else ql_fence_claim */
    ql_id_t id;
    uint64_t token;
    atomic_int done; /* 1 once the claim's transaction ended */
    int rc;
    ql_err_t err;
} racer_t;

static void *racer_main(void *arg) {
    racer_t *r = arg;
    ql_txn_t *t;
    r->rc = ql_txn_begin(store, true, &t);
    if (!r->rc) {
        r->rc = r->job ? ql_job_claim(t, &r->id, r->token, &r->err)
                       : ql_fence_claim(t, r->token, &r->err);
        if (r->rc)
            ql_txn_abort(t);
        else
            r->rc = ql_txn_commit(t);
    }
    atomic_store(&r->done, 1);
    return NULL;
}

static bool racer_done(const void *arg) {
    return atomic_load(&((const racer_t *)arg)->done) == 1;
}

/* Holds a transaction that claimed first (token first) while another thread claims second: the
 * second claim must wait for the first transaction (LMDB: one writer; PostgreSQL: the row lock)
 * and then see its outcome. Returns the second claim's status. */
static int race(bool job, const ql_id_t *id, uint64_t first, uint64_t second, bool commit_first) {
    ql_txn_t *t = wbegin();
    ql_err_t err = {0};
    cr_assert_eq(job ? ql_job_claim(t, id, first, &err) : ql_fence_claim(t, first, &err), 0, "%s",
                 err.msg);
    racer_t r = {.job = job, .token = second};
    if (id)
        r.id = *id;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, racer_main, &r), 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_t tick;
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, ql_test_tick_cb, 10, 10);
    ql_test_drive_for(&loop, 300);
    cr_assert_eq(atomic_load(&r.done), 0, "the second claim waits for the first transaction");
    if (commit_first)
        cr_assert_eq(ql_txn_commit(t), 0);
    else
        ql_txn_abort(t);
    cr_assert(ql_test_drive_until(&loop, racer_done, &r, 10000), "the second claim ends");
    pthread_join(th, NULL);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return r.rc;
}

Test(fence_claim, a_racing_smaller_claim_waits_and_is_refused) {
    cr_assert_eq(race(false, NULL, 9, 7, true), QL_EFENCED);
    cr_assert_eq(epoch_now(), 9);
    cr_assert_eq(race(false, NULL, 11, 12, true), 0, "a larger token wins after the wait");
    cr_assert_eq(epoch_now(), 12);
    cr_assert_eq(race(false, NULL, 20, 13, false), 0,
                 "an aborted claim leaves nothing to refuse the next one");
    cr_assert_eq(epoch_now(), 13);
}

Test(fence_claim, a_racing_smaller_job_claim_waits_and_is_refused) {
    ql_id_t id = put_job(0);
    cr_assert_eq(race(true, &id, 9, 7, true), QL_EFENCED);
    cr_assert_eq(job_fence(&id), 9);
    cr_assert_eq(race(true, &id, 10, 12, true), 0);
    cr_assert_eq(job_fence(&id), 12);
    ql_test_assert_fsck_clean(store);
}
