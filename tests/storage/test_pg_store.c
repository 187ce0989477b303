/*
 * What only the PostgreSQL backend has to show (docs/postgresql.md, Tests): several writers on
 * one store, as several hosts would be, keep LMDB's single-writer outcomes; the exclusion
 * constraint backs the overlap rule; a fence raise waits for a holder's transaction; batches
 * stay under the subtransaction cache; a lost connection reads as QL_EUNAVAILABLE and the store
 * recovers; passwords never reach a message.
 *
 * Each case needs QL_TEST_STORE=pg (storage_test_pg_store@pg) and skips otherwise, except the
 * masking case, which needs no server. Waits poll the server with a deadline, never sleep.
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

static const ql_step_spec_t steps[1] = {{.name = "build", .kind = "noop"}};

static ql_store_t *open_pg(void) {
    return ql_test_pg_store_open(dir, sizeof dir, "ql_pg");
}

Test(pg, a_password_never_reaches_a_message) {
    ql_store_opts_t o = {.path = ".", .url = "postgresql://qilin:Sekr1t@127.0.0.1:1/db"};
    ql_store_t *s = NULL;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EUNAVAILABLE);
    cr_assert_null(s);
    cr_assert_null(strstr(err.msg, "Sekr1t"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "qilin:***@127.0.0.1"), "%s", err.msg);
    o.url = "host=127.0.0.1 port=1 password='Sek r1t' user=qilin";
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EUNAVAILABLE);
    cr_assert_null(strstr(err.msg, "Sek r1t"), "%s", err.msg);
    cr_assert_null(strstr(err.msg, "r1t"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "password=***"), "%s", err.msg);
}

Test(pg, a_newer_schema_is_refused_and_left_alone) {
    ql_store_t *s = open_pg();
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_meta_put_u64(t, "schema_major", 99), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(s);
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EVERSION);
    cr_assert_not_null(strstr(err.msg, "schema 99."), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, o.pg_schema), "names the schema: %s", err.msg);
}

/* The fixture's server replicates to nobody: a store that requires synchronous replication is
 * refused, naming the key and the settings it read, and creates nothing. */
Test(pg, require_sync_replication_refuses_a_database_without_a_synchronous_standby) {
    ql_test_require_backend("pg");
    ql_test_tmpdir(dir, sizeof dir, "ql_pg");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    o.pg_require_sync_replication = true;
    ql_store_t *s = NULL;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), QL_EINVAL, "%s", err.msg);
    cr_assert_null(s);
    cr_assert_not_null(strstr(err.msg, "qilin.storage.pg.require-sync-replication"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "synchronous_standby_names=''"), "%s", err.msg);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_namespace WHERE nspname = '%s'",
             o.pg_schema);
    cr_assert_eq(ql_test_pg_scalar(sql), 0, "the refused open created its schema");
    o.pg_require_sync_replication = false;
    cr_assert_eq(ql_store_open(&o, &s, &err), 0, "%s", err.msg);
    ql_store_close(s);
}

static ql_id_t make_model(ql_store_t *s) {
    ql_id_t id;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(s, "p", "m", &id, &err), 0, "%s", err.msg);
    return id;
}

Test(pg, the_exclusion_constraint_backs_the_overlap_rule) {
    ql_store_t *s = open_pg();
    ql_id_t m = make_model(s);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    ql_job_t a = ql_test_live_job(s, &m, QL_READY, 0, 100),
             b = ql_test_live_job(s, &m, QL_RUNNING, 50, 150);
    ql_job_t c = ql_test_live_job(s, &m, QL_SUCCEED, 0, 100),
             d = ql_test_live_job(s, &m, QL_PAUSED, 100, 200);
    cr_assert_eq(ql_job_put(t, &a), 0);
    /* ql_job_put does not check the rule (meta.c does): the database refuses it anyway. */
    cr_assert_eq(ql_job_put(t, &b), QL_EJOBCONFLICT);
    cr_assert_eq(ql_job_put(t, &c), 0, "a final job on the same range");
    cr_assert_eq(ql_job_put(t, &d), 0, "half-open ranges that touch");
    cr_assert_eq(ql_txn_commit(t), 0, "the refusal left the transaction usable");
    ql_test_assert_fsck_clean(s);
    ql_store_close(s);
}

typedef struct {
    ql_store_t *store;
    const ql_id_t *model;
    pthread_barrier_t *barrier;
    int64_t start;
    int rc;
    char msg[sizeof((ql_err_t *)0)->msg];
} racer_t;

static void *race_build(void *arg) {
    racer_t *r = arg;
    ql_job_spec_t sp = {
        .priority = 3, .submitter = "ADMIN", .now = 5, .steps = steps, .n_steps = 1};
    ql_txn_t *t;
    pthread_barrier_wait(r->barrier);
    r->rc = ql_txn_begin(r->store, true, &t);
    if (r->rc)
        return NULL;
    ql_err_t err = {0};
    ql_id_t job, seg;
    r->rc = ql_meta_submit_build(t, r->model, r->start, r->start + 1000, &sp, &job, &seg, &err);
    snprintf(r->msg, sizeof r->msg, "%s", err.msg);
    if (r->rc)
        ql_txn_abort(t);
    else
        r->rc = ql_txn_commit(t);
    return NULL;
}

/* Two stores on one schema are two hosts' servers. Each round both submit the same range at
 * once: exactly one wins, and the loser saw the winner's segment in its overlap probe
 * (QL_ESEGOVERLAP) because the probe waited on the model lock; without the lock both probes
 * would see nothing and the loser would only be stopped by the constraint (QL_EJOBCONFLICT). */
Test(pg, concurrent_builds_of_one_range_from_two_stores_make_one_job) {
    ql_store_t *a = open_pg(), *b;
    ql_test_store_open(dir, &b);
    ql_id_t m = make_model(a);
    enum { ROUNDS = 40 };
    for (int i = 0; i < ROUNDS; i++) {
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, 2);
        racer_t r[2] = {{.store = a, .model = &m, .barrier = &bar, .start = i * 1000},
                        {.store = b, .model = &m, .barrier = &bar, .start = i * 1000}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++)
            pthread_create(&th[k], NULL, race_build, &r[k]);
        for (int k = 0; k < 2; k++)
            pthread_join(th[k], NULL);
        pthread_barrier_destroy(&bar);
        int wins = (r[0].rc == 0) + (r[1].rc == 0);
        if (wins != 1)
            cr_assert_fail("round %d: %d winners (%s / %s)", i, wins, r[0].msg, r[1].msg);
        int lost = r[0].rc ? r[0].rc : r[1].rc;
        if (lost != QL_ESEGOVERLAP)
            cr_assert_fail("round %d: the loser got %s, not the overlap (%s%s)", i,
                           ql_strerror(lost), r[0].msg, r[1].msg);
    }
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(a, false, &t), 0);
    uint64_t n;
    cr_assert_eq(ql_job_count(t, "p", 1u << QL_READY, &n), 0);
    cr_assert_eq(n, ROUNDS);
    cr_assert_eq(ql_segment_count(t, &m, &n), 0);
    cr_assert_eq(n, ROUNDS);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(a);
    ql_store_close(b);
    ql_store_close(a);
}

typedef struct {
    ql_store_t *store;
    atomic_bool *holder_committing;
    bool waited;
    uint64_t epoch;
    int rc;
} raiser_t;

static void *raise_epoch(void *arg) {
    raiser_t *r = arg;
    ql_txn_t *t;
    if ((r->rc = ql_txn_begin(r->store, true, &t)))
        return NULL;
    if ((r->rc = ql_fence_raise(t, &r->epoch))) {
        ql_txn_abort(t);
        return NULL;
    }
    r->waited = atomic_load(r->holder_committing);
    r->rc = ql_txn_commit(t);
    return NULL;
}

/* A holder's change checked under token 1 and a new holder's raise: the raise waits for the
 * holder's transaction (the fence row is read FOR SHARE), and after it the old token is
 * refused. */
Test(pg, a_fence_raise_waits_for_the_holders_transaction_then_fences_it) {
    ql_store_t *a = open_pg(), *b;
    ql_test_store_open(dir, &b);
    ql_txn_t *t;
    uint64_t e;
    cr_assert_eq(ql_txn_begin(a, true, &t), 0);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(e, 1);
    cr_assert_eq(ql_txn_commit(t), 0);

    cr_assert_eq(ql_txn_begin(a, true, &t), 0);
    ql_err_t err = {0};
    cr_assert_eq(ql_fence_check(t, 1, &err), 0, "%s", err.msg);
    atomic_bool committing = false;
    raiser_t r = {.store = b, .holder_committing = &committing};
    pthread_t th;
    pthread_create(&th, NULL, raise_epoch, &r);
    /* The raise is blocked on the fence row: a session of this store waits for a lock. */
    if (!ql_test_pg_await_lock_wait(dir, 20000)) {
        atomic_store(&committing, true);
        ql_txn_abort(t);
        pthread_join(th, NULL);
        cr_assert_fail("the raise never waited for the holder's transaction");
    }
    ql_project_t p = {0};
    strcpy(p.name, "under_token_1");
    cr_assert_eq(ql_project_put(t, &p), 0);
    atomic_store(&committing, true);
    cr_assert_eq(ql_txn_commit(t), 0);
    pthread_join(th, NULL);
    cr_assert_eq(r.rc, 0, "%s", ql_strerror(r.rc));
    cr_assert(r.waited, "the raise returned before the holder committed");
    cr_assert_eq(r.epoch, 2);

    cr_assert_eq(ql_txn_begin(a, true, &t), 0);
    cr_assert_eq(ql_fence_check(t, 1, &err), QL_EFENCED);
    ql_txn_abort(t);
    ql_store_close(b);
    ql_store_close(a);
}

typedef struct {
    int i;
    atomic_int *ok;
} put_arg_t;

static int put_project_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    (void)err;
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p%d", ((put_arg_t *)arg)->i);
    return ql_project_put(t, &p);
}

static void count_answer(void *arg, int status, const ql_err_t *err) {
    (void)err;
    if (status == 0)
        atomic_fetch_add(((put_arg_t *)arg)->ok, 1);
}

Test(pg, a_batch_of_49_mutations_is_split_below_the_subtransaction_cache) {
    ql_store_t *s = open_pg();
    ql_writer_t *w;
    ql_writer_opts_t o = {.manual = true};
    cr_assert_eq(ql_writer_new(s, &o, &w), 0);
    put_arg_t args[49];
    atomic_int ok = 0;
    for (int i = 0; i < 49; i++) {
        args[i] = (put_arg_t){.i = i, .ok = &ok};
        cr_assert_eq(ql_writer_submit(w, put_project_fn, &args[i], count_answer), 0);
    }
    while (ql_writer_flush(w) > 0) {
    }
    ql_writer_stats_t st;
    ql_writer_get_stats(w, &st);
    cr_assert_eq(atomic_load(&ok), 49);
    cr_assert_eq(st.max_batch, 48);
    cr_assert_eq(st.batches, 2);
    ql_writer_free(w);
    ql_store_close(s);
}

Test(pg, a_lost_connection_is_unavailable_and_the_store_recovers) {
    ql_store_t *s = open_pg();
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    uint64_t n;
    cr_assert_eq(ql_project_count(t, &n), 0);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
             "application_name = 'qilin/%s' AND state = 'idle in transaction'",
             o.pg_schema);
    cr_assert_eq(ql_test_pg_scalar(sql), 1, "the read transaction's session");
    cr_assert_eq(ql_project_count(t, &n), QL_EUNAVAILABLE);
    ql_txn_abort(t);
    /* The broken session left the pool; the next transaction gets a fresh one. */
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    ql_project_t p = {0};
    strcpy(p.name, "after");
    cr_assert_eq(ql_project_put(t, &p), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(s);
}

/* A session lost before COMMIT returned: the outcome is asked of a fresh session
 * (pg_xact_status) before the caller is answered. Here the transaction died with its session, so
 * the answer is QL_ETRANSIENT (the writer reruns such a batch), and nothing of it is stored. */
Test(pg, a_commit_cut_off_is_resolved_before_the_answer) {
    ql_store_t *s = open_pg();
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    ql_project_t p = {0};
    strcpy(p.name, "cut_off");
    cr_assert_eq(ql_project_put(t, &p), 0);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
             "application_name = 'qilin/%s' AND state = 'idle in transaction'",
             o.pg_schema);
    cr_assert_eq(ql_test_pg_scalar(sql), 1, "the write transaction's session");
    cr_assert_eq(ql_txn_commit(t), QL_ETRANSIENT);
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    cr_assert_eq(ql_project_get(t, "cut_off", 0, &p), QL_ENOTFOUND);
    ql_txn_abort(t);
    ql_store_close(s);
}

/* The fence row's share lock belongs to the savepoint level that read it: a mutation rolled back
 * (a nested transaction aborted) leaves nothing that holds up a new holder's raise, while one
 * released into its batch keeps it until the batch commits. */
Test(pg, a_rolled_back_fence_check_leaves_no_lock) {
    ql_store_t *a = open_pg(), *b;
    ql_test_store_open(dir, &b);
    ql_txn_t *t, *n;
    uint64_t e;
    cr_assert_eq(ql_txn_begin(a, true, &t), 0);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    cr_assert_eq(ql_txn_begin(a, true, &t), 0);
    cr_assert_eq(ql_txn_begin_nested(t, &n), 0);
    ql_err_t err = {0};
    cr_assert_eq(ql_fence_check(n, e, &err), 0, "%s", err.msg);
    ql_txn_abort(n);
    /* The raise does not wait: it would time out (QL_ETRANSIENT) behind a kept lock. */
    atomic_bool committing = true;
    raiser_t r = {.store = b, .holder_committing = &committing};
    raise_epoch(&r);
    cr_assert_eq(r.rc, 0, "%s", ql_strerror(r.rc));
    cr_assert_eq(r.epoch, e + 1);
    /* The parent reads the epoch afresh: its child's value went with the rollback. */
    cr_assert_eq(ql_fence_check(t, e, &err), QL_EFENCED);
    ql_txn_abort(t);
    ql_store_close(b);
    ql_store_close(a);
}

/* ---- a deadlock between two batches is split away ---- */

typedef struct {
    ql_store_t *store;
    const ql_id_t *model;
    pthread_barrier_t *meet; /* first run only: both batches hold their first model lock */
    bool ran;
    int status;
} lock_mut_t;

static int lock_model_fn(ql_txn_t *t, void *arg, ql_err_t *err) {
    (void)err;
    lock_mut_t *m = arg;
    ql_segment_t s = {.model = *m->model, .start = 0, .end = 10, .status = QL_SEG_NEW};
    ql_store_new_id(m->store, &s.id);
    int rc = ql_segment_put(t, &s); /* takes the model lock */
    if (!rc && m->meet && !m->ran)
        pthread_barrier_wait(m->meet);
    m->ran = true;
    return rc;
}

static void lock_answer(void *arg, int status, const ql_err_t *err) {
    (void)err;
    ((lock_mut_t *)arg)->status = status;
}

typedef struct {
    ql_writer_t *w;
} flusher_t;

static void *flush_all(void *arg) {
    flusher_t *f = arg;
    while (ql_writer_flush(f->w) > 0) {
    }
    return NULL;
}

/* Batch A locks model 1 then 2, batch B model 2 then 1, each from its own store: PostgreSQL
 * finds the deadlock and fails one statement; that writer reruns its batch in halves (lone
 * mutations, which cannot deadlock) and every mutation is answered with success. */
Test(pg, a_deadlock_between_two_batches_is_split_and_every_mutation_succeeds) {
    ql_store_t *a = open_pg(), *b;
    ql_test_store_open(dir, &b);
    ql_id_t m1, m2;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(a, "p1", "m1", &m1, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_test_create_daily_model(a, "p2", "m2", &m2, &err), 0, "%s", err.msg);
    pthread_barrier_t meet;
    pthread_barrier_init(&meet, NULL, 2);
    lock_mut_t muts[4] = {{.store = a, .model = &m1, .meet = &meet},
                          {.store = a, .model = &m2},
                          {.store = b, .model = &m2, .meet = &meet},
                          {.store = b, .model = &m1}};
    ql_writer_t *w[2];
    ql_writer_opts_t o = {.manual = true};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ql_writer_new(i ? b : a, &o, &w[i]), 0);
        for (int k = 0; k < 2; k++)
            cr_assert_eq(ql_writer_submit(w[i], lock_model_fn, &muts[2 * i + k], lock_answer), 0);
    }
    flusher_t f[2] = {{w[0]}, {w[1]}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, flush_all, &f[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&meet);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(muts[i].status, 0, "mutation %d: %s", i, ql_strerror(muts[i].status));
    ql_writer_stats_t st[2];
    for (int i = 0; i < 2; i++)
        ql_writer_get_stats(w[i], &st[i]);
    cr_assert_eq(st[0].batches + st[1].batches, 3, "one batch whole, the other in halves");
    for (int i = 0; i < 2; i++)
        ql_writer_free(w[i]);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(a, false, &t), 0);
    uint64_t n1, n2;
    cr_assert_eq(ql_segment_count(t, &m1, &n1), 0);
    cr_assert_eq(ql_segment_count(t, &m2, &n2), 0);
    cr_assert_eq(n1 + n2, 4, "each mutation applied once");
    ql_txn_abort(t);
    ql_store_close(b);
    ql_store_close(a);
}
