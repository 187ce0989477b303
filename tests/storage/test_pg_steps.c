/*
 * The step cache of a PostgreSQL write transaction (storage/store_pg_steps.c, docs/postgresql.md,
 * Round trips): a locking read of a job also reads its steps, after the row lock is held, and the
 * step reads of that job answer from them. Each case checks what a step read answers: the steps
 * of the job among others, a step that is not there, the transaction's own put (a put drops the
 * cache) inside and across savepoint levels, a delete of the job, and the steps another store
 * committed while this one waited for the job's row lock.
 *
 * Each case needs QL_TEST_STORE=pg (storage_test_pg_steps@pg) and skips otherwise.
 */
#include "storage/storage.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char dir[256];

static ql_store_t *open_pg(void) {
    return ql_test_pg_store_open(dir, sizeof dir, "ql_pgsteps");
}

/* A job of n steps (seq 0, stride, 2 * stride, ...: a stride of 2 leaves gaps, so that a read
 * of a missing seq between two is asked), step k named "s<seq>" with k + 1 attempts; committed. */
static ql_job_t put_job(ql_store_t *s, uint32_t n, uint32_t stride) {
    ql_id_t m;
    ql_err_t err = {0};
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    ql_model_t found;
    int rc = ql_model_find(t, "p", "m", 0, &found);
    ql_txn_abort(t);
    if (rc == 0) {
        m = found.id;
        ql_model_free(&found);
    } else {
        cr_assert_eq(ql_test_create_daily_model(s, "p", "m", &m, &err), 0, "%s", err.msg);
    }
    ql_job_t j = {0};
    ql_store_new_id(s, &j.id);
    strcpy(j.project, "p");
    j.model = m;
    strcpy(j.type, "INC_BUILD");
    j.state = QL_READY;
    j.priority = 3;
    j.create_time = j.modify_time = 1;
    j.n_steps = n;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_job_put(t, &j), 0);
    for (uint32_t k = 0; k < n; k++) {
        ql_step_t st = {0};
        st.job = j.id;
        st.seq = stride * k;
        snprintf(st.name, sizeof st.name, "s%u", stride * k);
        strcpy(st.kind, "noop");
        st.state = QL_READY;
        st.attempts = k + 1;
        cr_assert_eq(ql_step_put(t, &st), 0);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    return j;
}

/* The attempts of step seq of job as t reads it; -1: not found. */
static long attempts_of(ql_txn_t *t, const ql_id_t *job, uint32_t seq) {
    ql_step_t st;
    int rc = ql_step_get(t, job, seq, &st);
    if (rc == QL_ENOTFOUND)
        return -1;
    cr_assert_eq(rc, 0, "%s", ql_strerror(rc));
    char want[16];
    snprintf(want, sizeof want, "s%u", seq);
    cr_assert_str_eq(st.name, want, "the step read is the one asked for");
    long a = (long)st.attempts;
    ql_step_free(&st);
    return a;
}

static void set_attempts(ql_txn_t *t, const ql_id_t *job, uint32_t seq, uint32_t attempts) {
    ql_step_t st;
    cr_assert_eq(ql_step_get(t, job, seq, &st), 0);
    st.attempts = attempts;
    cr_assert_eq(ql_step_put(t, &st), 0);
    ql_step_free(&st);
}

static void lock_job(ql_txn_t *t, const ql_id_t *id) {
    ql_job_t got;
    cr_assert_eq(ql_job_get(t, id, 0, &got), 0);
    ql_job_free(&got);
}

Test(pg_steps, step_reads_after_a_locking_read_answer_each_step_and_none_other) {
    ql_store_t *s = open_pg();
    ql_job_t j = put_job(s, 7, 2);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    lock_job(t, &j.id);
    for (uint32_t seq = 0; seq < 16; seq++)
        cr_assert_eq(attempts_of(t, &j.id, seq), seq % 2 || seq >= 14 ? -1 : (long)seq / 2 + 1,
                     "seq %u", seq);
    ql_id_t other;
    ql_store_new_id(s, &other);
    cr_assert_eq(attempts_of(t, &other, 0), -1, "another job's steps are not this one's");
    ql_txn_abort(t);

    ql_job_t none = put_job(s, 0, 2); /* no steps at all */
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    lock_job(t, &none.id);
    cr_assert_eq(attempts_of(t, &none.id, 0), -1);
    ql_txn_abort(t);
    ql_store_close(s);
}

Test(pg_steps, a_put_is_read_back_at_every_level_and_a_rollback_undoes_it) {
    ql_store_t *s = open_pg();
    ql_job_t j = put_job(s, 3, 2);
    ql_txn_t *t, *c1, *c2;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    lock_job(t, &j.id);
    cr_assert_eq(attempts_of(t, &j.id, 2), 2);
    set_attempts(t, &j.id, 2, 20);
    cr_assert_eq(attempts_of(t, &j.id, 2), 20, "the transaction reads its own put");

    /* A child that locks the job again, puts, and is released: the parent reads the put. */
    cr_assert_eq(ql_txn_begin_nested(t, &c1), 0);
    lock_job(c1, &j.id);
    cr_assert_eq(attempts_of(c1, &j.id, 2), 20);
    set_attempts(c1, &j.id, 4, 30);
    cr_assert_eq(ql_txn_commit(c1), 0);
    cr_assert_eq(attempts_of(t, &j.id, 4), 30, "a released level's put");

    /* A grandchild's put under a child that read the job, rolled back: its parent and the top
     * level read what was there before it. */
    cr_assert_eq(ql_txn_begin_nested(t, &c1), 0);
    lock_job(c1, &j.id);
    cr_assert_eq(ql_txn_begin_nested(c1, &c2), 0);
    set_attempts(c2, &j.id, 0, 40);
    cr_assert_eq(attempts_of(c2, &j.id, 0), 40);
    ql_txn_abort(c2);
    cr_assert_eq(attempts_of(c1, &j.id, 0), 1, "the rolled-back put is gone");
    set_attempts(c1, &j.id, 0, 50);
    ql_txn_abort(c1);
    cr_assert_eq(attempts_of(t, &j.id, 0), 1);

    /* Deleted with its steps, then put again without them. */
    cr_assert_eq(ql_job_delete(t, &j.id), 0);
    cr_assert_eq(attempts_of(t, &j.id, 0), -1, "the steps went with the job");
    cr_assert_eq(ql_job_put(t, &j), 0);
    lock_job(t, &j.id);
    cr_assert_eq(attempts_of(t, &j.id, 2), -1);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(s);
}

typedef struct {
    ql_store_t *store;
    ql_id_t job;
    int rc;
    long attempts; /* of step 2, read right after the job's locking read */
} locker_t;

static void *lock_and_read(void *arg) {
    locker_t *l = arg;
    ql_txn_t *t;
    ql_job_t got;
    l->attempts = -2;
    if ((l->rc = ql_txn_begin(l->store, true, &t)))
        return NULL;
    if (!(l->rc = ql_job_get(t, &l->job, 0, &got))) {
        ql_job_free(&got);
        ql_step_t st;
        if (!(l->rc = ql_step_get(t, &l->job, 2, &st))) {
            l->attempts = (long)st.attempts;
            ql_step_free(&st);
        }
    }
    ql_txn_abort(t);
    return NULL;
}

/* Store a holds the job's row lock and changes a step; store b's locking read of the job waits
 * for it, and the steps b reads with the job are the ones a committed (read after the lock is
 * held, not with the snapshot the waiting read started from). */
Test(pg_steps, the_steps_read_with_a_waiting_lock_are_those_committed_before_it_is_granted) {
    ql_store_t *a = open_pg(), *b;
    ql_test_store_open(dir, &b);
    ql_job_t j = put_job(a, 2, 2);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(a, true, &t), 0);
    lock_job(t, &j.id);
    locker_t l = {.store = b, .job = j.id};
    pthread_t th;
    pthread_create(&th, NULL, lock_and_read, &l);
    bool waited = ql_test_pg_await_lock_wait(dir, 20000);
    set_attempts(t, &j.id, 2, 9);
    cr_assert_eq(ql_txn_commit(t), 0);
    pthread_join(th, NULL);
    cr_assert(waited, "b's locking read never waited for a's row lock");
    cr_assert_eq(l.rc, 0, "%s", ql_strerror(l.rc));
    cr_assert_eq(l.attempts, 9, "b read the step as it was before a's commit");
    ql_store_close(b);
    ql_store_close(a);
}

/* ---- step puts sent with the next statement (pg_defer) ---- */

static ql_store_t *open_pg_timeout(int64_t lock_timeout_ms) {
    ql_test_require_backend("pg");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    o.pg_lock_timeout_ms = lock_timeout_ms;
    ql_store_t *s;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), 0, "%s", err.msg);
    return s;
}

static long committed_attempts(ql_store_t *s, const ql_id_t *job, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    long a = attempts_of(t, job, seq);
    ql_txn_abort(t);
    return a;
}

static int put_project(ql_txn_t *t, const char *name) {
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    return ql_project_put(t, &p);
}

/* Store a holds step 0's row (its put is not committed); b's puts of that step wait for it past
 * b's lock timeout. The failure of a put sent with a later statement is its level's: the level
 * fails at that statement, or at its end when nothing followed, and the parent commits; at the
 * top level the commit fails. A level rolled back never sends its put; a parent's put goes out
 * before a child begins, so that its failure stays the parent's. */
Test(pg_steps, a_deferred_put_fails_its_own_level_wherever_its_answer_arrives) {
    ql_store_t *s = open_pg();
    ql_job_t j = put_job(s, 3, 1);
    ql_store_t *a = open_pg_timeout(0), *b = open_pg_timeout(300);
    ql_txn_t *ta, *tb, *c1, *c2;
    cr_assert_eq(ql_txn_begin(a, true, &ta), 0);
    lock_job(ta, &j.id);
    set_attempts(ta, &j.id, 0, 7); /* a holds step 0's row */

    /* A put is deferred once its statement is prepared on the session: b's first put (of step
     * 2, which a does not hold) runs at once and prepares it. b's transactions run one after the
     * other, so they reuse that session. */
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    set_attempts(tb, &j.id, 2, 3);
    cr_assert_eq(ql_txn_commit(tb), 0);
    ql_step_t st = {0};
    st.job = j.id;
    strcpy(st.name, "s0");
    strcpy(st.kind, "noop");
    st.state = QL_READY;
    st.attempts = 100;
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);

    /* Deferred, then answered with the level's next statement. */
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(ql_step_put(c1, &st), 0, "queued: no answer yet");
    cr_assert_eq(put_project(c1, "next"), QL_ETRANSIENT, "the put's failure, with the next");
    ql_txn_abort(c1);
    /* Deferred, answered when the level ends. */
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(put_project(c1, "first"), 0);
    cr_assert_eq(ql_step_put(c1, &st), 0);
    cr_assert_eq(ql_txn_commit(c1), QL_ETRANSIENT, "the level fails at its end");
    /* A rolled-back level never sends it (a send would wait and time out). */
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(put_project(c1, "rolled_back"), 0);
    cr_assert_eq(ql_step_put(c1, &st), 0);
    ql_txn_abort(c1);
    /* A parent's put goes out before its child begins: the child cannot begin, the parent is
     * failed alone. */
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(ql_step_put(c1, &st), 0);
    cr_assert_eq(ql_txn_begin_nested(c1, &c2), QL_ETRANSIENT);
    ql_txn_abort(c1);
    cr_assert_eq(put_project(tb, "kept"), 0, "the top level is usable");
    cr_assert_eq(ql_txn_commit(tb), 0);
    cr_assert(ql_test_project_exists(s, "kept"));
    cr_assert(!ql_test_project_exists(s, "first"), "the failed level was rolled back");
    cr_assert(!ql_test_project_exists(s, "next"));
    cr_assert(!ql_test_project_exists(s, "rolled_back"));

    /* At the top level the commit fails, and nothing of the transaction is kept. */
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    cr_assert_eq(put_project(tb, "top"), 0);
    cr_assert_eq(ql_step_put(tb, &st), 0);
    cr_assert_eq(ql_txn_commit(tb), QL_ETRANSIENT);
    cr_assert(!ql_test_project_exists(s, "top"));
    cr_assert_eq(ql_txn_commit(ta), 0);
    cr_assert_eq(committed_attempts(s, &j.id, 0), 7, "only a's put was applied");

    /* With the row free, a deferred put is applied with the level's next statement. */
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(ql_step_put(c1, &st), 0);
    cr_assert_eq(ql_txn_commit(c1), 0);
    cr_assert_eq(ql_txn_commit(tb), 0);
    cr_assert_eq(committed_attempts(s, &j.id, 0), 100);
    ql_test_assert_fsck_clean(s);
    ql_store_close(b);
    ql_store_close(a);
    ql_store_close(s);
}
