/*
 * The commands the PostgreSQL backend sends with the next statement instead of on their own
 * (docs/postgresql.md, What it guarantees, Round trips): a queued model lock that times out
 * fails its savepoint level only, and the parent commits; a job put after a locking read of the
 * job checks the row the transaction holds and follows its savepoints and deletes; nested levels
 * that run nothing leave the transaction as it was; the update of a held job row and the put of a
 * held segment go with the next statement, and their failure (a lock timeout, no row changed) is
 * their level's.
 *
 * Each case needs QL_TEST_STORE=pg (storage_test_pg_pipe@pg) and skips otherwise. Lock waits end
 * by the store's lock timeout, never by a sleep.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static char dir[256];

static ql_store_t *open_pg(int64_t lock_timeout_ms) {
    ql_test_require_backend("pg");
    if (!dir[0])
        ql_test_tmpdir(dir, sizeof dir, "ql_pgpipe");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    if (lock_timeout_ms)
        o.pg_lock_timeout_ms = lock_timeout_ms;
    ql_store_t *s;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), 0, "%s", err.msg);
    return s;
}

static ql_state_t state_of(ql_store_t *s, const ql_id_t *id) {
    ql_txn_t *t;
    ql_job_t j;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    int rc = ql_job_get(t, id, 0, &j);
    ql_txn_abort(t);
    if (rc)
        return (ql_state_t)-1;
    ql_state_t st = j.state;
    ql_job_free(&j);
    return st;
}

Test(pg_pipe, a_model_lock_that_times_out_fails_its_level_and_the_parent_commits) {
    ql_store_t *a = open_pg(0), *b = open_pg(300);
    ql_id_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(a, "p", "m", &m, &err), 0, "%s", err.msg);
    ql_txn_t *ta, *tb, *child;
    ql_job_t held = ql_test_live_job(a, &m, QL_READY, 0, 100),
             other = ql_test_live_job(b, &m, QL_READY, 200, 300);
    cr_assert_eq(ql_txn_begin(a, true, &ta), 0);
    cr_assert_eq(ql_job_put(ta, &held), 0, "a holds the model's lock until it commits");

    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    ql_project_t q = {0};
    snprintf(q.name, sizeof q.name, "before");
    cr_assert_eq(ql_project_put(tb, &q), 0);
    cr_assert_eq(ql_txn_begin_nested(tb, &child), 0);
    /* The lock goes out with the insert, in one round trip: the wait times out, the insert is
     * skipped, and only this level fails. */
    cr_assert_eq(ql_job_put(child, &other), QL_ETRANSIENT);
    ql_txn_abort(child);
    snprintf(q.name, sizeof q.name, "after");
    cr_assert_eq(ql_project_put(tb, &q), 0, "the parent is usable");
    cr_assert_eq(ql_txn_commit(tb), 0, "the lock's failure was its level's, not the parent's");
    cr_assert_eq(ql_txn_commit(ta), 0);

    cr_assert_eq(state_of(a, &held.id), QL_READY);
    cr_assert_eq((int)state_of(a, &other.id), -1, "the timed-out put left nothing");
    ql_txn_t *t;
    ql_project_t got;
    cr_assert_eq(ql_txn_begin(a, false, &t), 0);
    cr_assert_eq(ql_project_get(t, "before", 0, &got), 0);
    ql_project_free(&got);
    cr_assert_eq(ql_project_get(t, "after", 0, &got), 0);
    ql_project_free(&got);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(a);
    ql_store_close(b);
    ql_store_close(a);
}

Test(pg_pipe, a_put_after_a_locking_read_checks_the_row_the_transaction_holds) {
    ql_store_t *s = open_pg(0);
    ql_id_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(s, "p", "m", &m, &err), 0, "%s", err.msg);
    ql_job_t j = ql_test_live_job(s, &m, QL_READY, 0, 100);
    ql_txn_t *t, *child;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    ql_job_t got;
    cr_assert_eq(ql_job_get(t, &j.id, 0, &got), 0, "read FOR UPDATE: the put needs no read");
    ql_job_free(&got);
    ql_job_t moved = j;
    moved.create_time = 2;
    cr_assert_eq(ql_job_put(t, &moved), QL_EINVAL, "a job's create time never changes");
    strcpy(moved.project, "q");
    moved.create_time = j.create_time;
    cr_assert_eq(ql_job_put(t, &moved), QL_EINVAL, "nor its project");

    /* A level that wrote the job and was rolled back leaves the row as the parent holds it. */
    cr_assert_eq(ql_txn_begin_nested(t, &child), 0);
    ql_job_t running = j;
    running.state = QL_RUNNING;
    cr_assert_eq(ql_job_put(child, &running), 0);
    ql_txn_abort(child);
    ql_job_t paused = j;
    paused.state = QL_PAUSED;
    cr_assert_eq(ql_job_put(t, &paused), 0);

    /* Deleted, then put again: an insert, not an update of the row that went. */
    cr_assert_eq(ql_job_delete(t, &j.id), 0);
    ql_job_t again = j;
    again.state = QL_ERROR;
    cr_assert_eq(ql_job_put(t, &again), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(state_of(s, &j.id), QL_ERROR);
    ql_test_assert_fsck_clean(s);
    ql_store_close(s);
}

Test(pg_pipe, nested_levels_that_run_nothing_leave_the_transaction_as_it_was) {
    ql_store_t *s = open_pg(0);
    ql_txn_t *t, *c1, *c2;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    for (int i = 0; i < 20; i++) { /* more levels than the queue holds: none is ever sent */
        cr_assert_eq(ql_txn_begin_nested(t, &c1), 0);
        cr_assert_eq(ql_txn_begin_nested(c1, &c2), 0);
        if (i % 2)
            ql_txn_abort(c2);
        else
            cr_assert_eq(ql_txn_commit(c2), 0);
        cr_assert_eq(ql_txn_commit(c1), 0);
    }
    cr_assert_eq(ql_txn_begin_nested(t, &c1), 0);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "kept");
    cr_assert_eq(ql_project_put(c1, &p), 0);
    cr_assert_eq(ql_txn_begin_nested(c1, &c2), 0);
    snprintf(p.name, sizeof p.name, "dropped");
    cr_assert_eq(ql_project_put(c2, &p), 0);
    ql_txn_abort(c2);
    cr_assert_eq(ql_txn_commit(c1), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    ql_project_t got;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    cr_assert_eq(ql_project_get(t, "kept", 0, &got), 0);
    ql_project_free(&got);
    cr_assert_eq(ql_project_get(t, "dropped", 0, &got), QL_ENOTFOUND);
    ql_txn_abort(t);
    /* A transaction that ran nothing commits without a round trip, and so does a read. */
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(s);
}

/* ---- a job update of a held row, sent with the next statement (pg_defer_row) ---- */

static void put_job_state(ql_store_t *s, ql_job_t j, ql_state_t st) {
    ql_txn_t *t;
    ql_job_t got;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_job_get(t, &j.id, 0, &got), 0);
    ql_job_free(&got);
    j.state = st;
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static int new_project(ql_txn_t *t, const char *name) {
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", name);
    return ql_project_put(t, &p);
}

/* Reads job j FOR UPDATE in t and puts it with state st: the put is deferred, so it answers 0
 * whatever its statement will meet. */
static void lock_and_put(ql_txn_t *t, ql_job_t j, ql_state_t st) {
    ql_job_t got;
    cr_assert_eq(ql_job_get(t, &j.id, 0, &got), 0);
    ql_job_free(&got);
    j.state = st;
    cr_assert_eq(ql_job_put(t, &j), 0, "queued: no answer yet");
}

/* Store a holds the model's lock; b's update of a job row it holds carries that lock, waits
 * past b's lock timeout, and fails its level at the level's next statement, or at the level's
 * end, while the parent commits. */
Test(pg_pipe, a_held_job_update_goes_with_the_next_statement_and_fails_its_level) {
    ql_store_t *a = open_pg(0), *b = open_pg(300);
    ql_id_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(a, "p", "m", &m, &err), 0, "%s", err.msg);
    ql_job_t j = ql_test_live_job(b, &m, QL_READY, 0, 100),
             held = ql_test_live_job(a, &m, QL_READY, 200, 300);
    ql_txn_t *ta, *tb, *c1;
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    cr_assert_eq(ql_job_put(tb, &j), 0);
    cr_assert_eq(ql_txn_commit(tb), 0);
    /* The first update on b's session runs at once and prepares the statement; b's
     * transactions run one after the other, so they reuse that session. */
    put_job_state(b, j, QL_PAUSED);

    cr_assert_eq(ql_txn_begin(a, true, &ta), 0);
    cr_assert_eq(ql_job_put(ta, &held), 0, "a holds the model's lock until it commits");
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    lock_and_put(c1, j, QL_RUNNING);
    cr_assert_eq(new_project(c1, "next"), QL_ETRANSIENT, "the update's failure, with the next");
    ql_txn_abort(c1);
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(new_project(c1, "first"), 0);
    lock_and_put(c1, j, QL_RUNNING);
    cr_assert_eq(ql_txn_commit(c1), QL_ETRANSIENT, "the level fails at its end");
    cr_assert_eq(new_project(tb, "kept"), 0, "the parent is usable");
    cr_assert_eq(ql_txn_commit(tb), 0);
    cr_assert_eq(ql_txn_commit(ta), 0);
    cr_assert_eq(state_of(a, &j.id), QL_PAUSED, "no failed level's update was applied");
    cr_assert(ql_test_project_exists(a, "kept"));
    cr_assert(!ql_test_project_exists(a, "first") && !ql_test_project_exists(a, "next"));

    /* With the lock free, the update is applied with the level's next statement. */
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    lock_and_put(tb, j, QL_RUNNING);
    cr_assert_eq(new_project(tb, "after"), 0);
    cr_assert_eq(ql_txn_commit(tb), 0);
    cr_assert_eq(state_of(a, &j.id), QL_RUNNING);
    ql_test_assert_fsck_clean(a);
    ql_store_close(b);
    ql_store_close(a);
}

/* A trigger makes the server skip the update of one job: the deferred statement then returns
 * no row, and its level fails as corrupt when the answer arrives (with the next statement, at
 * the level's end, at the commit), exactly as the update did when it ran on its own. */
Test(pg_pipe, a_held_job_update_that_changes_no_row_fails_its_level_as_corrupt) {
    ql_store_t *s = open_pg(0);
    ql_id_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(s, "p", "m", &m, &err), 0, "%s", err.msg);
    ql_job_t j = ql_test_live_job(s, &m, QL_READY, 0, 100);
    ql_txn_t *t, *c1;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    put_job_state(s, j, QL_PAUSED); /* prepares the update on the store's session */

    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    char id[QL_ID_STR_LEN + 1], sql[1024];
    ql_id_format(&j.id, id);
    snprintf(sql, sizeof sql,
             "CREATE FUNCTION \"%s\".skip_update() RETURNS trigger LANGUAGE plpgsql AS "
             "$$BEGIN RETURN NULL; END$$; CREATE TRIGGER skip_update BEFORE UPDATE ON \"%s\".jobs "
             "FOR EACH ROW WHEN (OLD.id = '%s') EXECUTE FUNCTION \"%s\".skip_update()",
             o.pg_schema, o.pg_schema, id, o.pg_schema);
    ql_test_pg_sql(sql, NULL, 0);

    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_txn_begin_nested(t, &c1), 0);
    lock_and_put(c1, j, QL_RUNNING);
    cr_assert_eq(new_project(c1, "next"), QL_ECORRUPT, "answered with the next statement");
    ql_txn_abort(c1);
    cr_assert_eq(ql_txn_begin_nested(t, &c1), 0);
    cr_assert_eq(new_project(c1, "first"), 0);
    lock_and_put(c1, j, QL_RUNNING);
    cr_assert_eq(ql_txn_commit(c1), QL_ECORRUPT, "answered at the level's end");
    cr_assert_eq(new_project(t, "kept"), 0, "the parent is usable");
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert(ql_test_project_exists(s, "kept"));
    cr_assert(!ql_test_project_exists(s, "first") && !ql_test_project_exists(s, "next"),
              "the failed levels went");

    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(new_project(t, "top"), 0);
    lock_and_put(t, j, QL_RUNNING);
    cr_assert_eq(ql_txn_commit(t), QL_ECORRUPT, "answered at the commit, which is not sent");
    cr_assert(!ql_test_project_exists(s, "top"));
    cr_assert_eq(state_of(s, &j.id), QL_PAUSED);
    snprintf(sql, sizeof sql, "DROP TRIGGER skip_update ON \"%s\".jobs", o.pg_schema);
    ql_test_pg_sql(sql, NULL, 0);
    ql_test_assert_fsck_clean(s);
    ql_store_close(s);
}

/* ---- a put of a segment the transaction holds, sent with the next statement ---- */

static ql_segment_t new_segment(ql_store_t *s, const ql_id_t *model, int64_t start) {
    ql_segment_t g = {0};
    ql_store_new_id(s, &g.id);
    g.model = *model;
    g.start = start;
    g.end = start + 100;
    g.status = QL_SEG_NEW;
    g.create_time = 1;
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_segment_put(t, &g), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return g;
}

/* The model of segment id as s reads it now; the zero id when it is gone. */
static ql_id_t model_of_segment(ql_store_t *s, const ql_id_t *id, ql_seg_status_t *status) {
    ql_txn_t *t;
    ql_segment_t g;
    ql_id_t m = {0};
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    if (ql_segment_get(t, id, &g) == 0) {
        m = g.model;
        if (status)
            *status = g.status;
        ql_segment_free(&g);
    }
    ql_txn_abort(t);
    return m;
}

/* Reads segment g FOR UPDATE in t and puts it with status st into model. */
static int lock_and_put_segment(ql_txn_t *t, ql_segment_t g, const ql_id_t *model,
                                ql_seg_status_t st) {
    ql_segment_t got;
    cr_assert_eq(ql_segment_get(t, &g.id, &got), 0);
    ql_segment_free(&got);
    g.model = *model;
    g.status = st;
    return ql_segment_put(t, &g);
}

/* Store a holds the model's lock; b's put of a segment row it holds carries that lock and fails
 * its level at the level's next statement, while the parent commits. */
Test(pg_pipe, a_held_segment_put_goes_with_the_next_statement_and_fails_its_level) {
    ql_store_t *a = open_pg(0), *b = open_pg(300);
    ql_id_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(a, "p", "m", &m, &err), 0, "%s", err.msg);
    ql_segment_t g = new_segment(b, &m, 0);
    ql_job_t held = ql_test_live_job(a, &m, QL_READY, 200, 300);
    ql_txn_t *ta, *tb, *c1;
    /* The first held put on b's session runs at once and prepares the statement. */
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    cr_assert_eq(lock_and_put_segment(tb, g, &m, QL_SEG_NEW), 0);
    cr_assert_eq(ql_txn_commit(tb), 0);

    cr_assert_eq(ql_txn_begin(a, true, &ta), 0);
    cr_assert_eq(ql_job_put(ta, &held), 0, "a holds the model's lock until it commits");
    cr_assert_eq(ql_txn_begin(b, true, &tb), 0);
    cr_assert_eq(ql_txn_begin_nested(tb, &c1), 0);
    cr_assert_eq(lock_and_put_segment(c1, g, &m, QL_SEG_READY), 0, "queued: no answer yet");
    cr_assert_eq(new_project(c1, "next"), QL_ETRANSIENT, "the put's failure, with the next");
    ql_txn_abort(c1);
    cr_assert_eq(new_project(tb, "kept"), 0, "the parent is usable");
    cr_assert_eq(ql_txn_commit(tb), 0);
    cr_assert_eq(ql_txn_commit(ta), 0);
    ql_seg_status_t st = QL_SEG_READY;
    cr_assert(ql_id_eq((ql_id_t[]){model_of_segment(a, &g.id, &st)}, &m));
    cr_assert_eq(st, QL_SEG_NEW, "the failed level's put was not applied");
    cr_assert(ql_test_project_exists(a, "kept") && !ql_test_project_exists(a, "next"));
    ql_test_assert_fsck_clean(a);
    ql_store_close(b);
    ql_store_close(a);
}

/* A held segment moved to another model is no longer held in the first: putting it back there
 * moves it again (a deferred put of the first model would find no row to change), and a held
 * segment deleted and put again is inserted. */
Test(pg_pipe, a_held_segment_that_moves_or_goes_is_written_as_it_now_is) {
    ql_store_t *s = open_pg(0);
    ql_id_t m1, m2;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(s, "p", "m1", &m1, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_test_create_daily_model(s, "p2", "m2", &m2, &err), 0, "%s", err.msg);
    ql_segment_t g = new_segment(s, &m1, 0);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0); /* prepares the held put on the session */
    cr_assert_eq(lock_and_put_segment(t, g, &m1, QL_SEG_NEW), 0);
    cr_assert_eq(ql_txn_commit(t), 0);

    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    {
        int mrc = lock_and_put_segment(t, g, &m2, QL_SEG_NEW);
        cr_assert_eq(mrc, 0, "moved to m2: %s", ql_strerror(mrc));
    }
    g.status = QL_SEG_READY;
    cr_assert_eq(ql_segment_put(t, &g), 0, "and back to m1");
    cr_assert_eq(new_project(t, "after_move"), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_seg_status_t st = QL_SEG_NEW;
    cr_assert(ql_id_eq((ql_id_t[]){model_of_segment(s, &g.id, &st)}, &m1));
    cr_assert_eq(st, QL_SEG_READY);

    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    ql_segment_t got;
    cr_assert_eq(ql_segment_get(t, &g.id, &got), 0);
    ql_segment_free(&got);
    cr_assert_eq(ql_segment_delete(t, &g.id), 0);
    g.status = QL_SEG_NEW;
    cr_assert_eq(ql_segment_put(t, &g), 0, "put again after its delete");
    cr_assert_eq(new_project(t, "after_delete"), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert(ql_id_eq((ql_id_t[]){model_of_segment(s, &g.id, &st)}, &m1));
    cr_assert_eq(st, QL_SEG_NEW);
    ql_test_assert_fsck_clean(s);
    ql_store_close(s);
}
