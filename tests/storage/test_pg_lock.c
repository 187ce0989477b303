/*
 * The job engine lock of a shared PostgreSQL store (storage/ql_store.h, ql_store_lock_*;
 * docs/postgresql.md, The job engine lock). Two stores opened on one schema play two hosts'
 * servers: exactly one wins, the other reads who holds it; a release, an ended session or a
 * killed process frees it; every win raises the fencing epoch; a holder whose lease is stale
 * (stopped: it stops renewing) has its session ended by the next try and is taken over, while a
 * holder that renews is never taken over; a holder whose renewals go unanswered counts itself
 * cut off; a standby that may not end the holder's session says so; a transaction-pooling
 * proxy is refused; a write left idle by a stopped client is ended so it cannot hold up the new
 * master's epoch raise. LMDB has no such lock.
 *
 * Every case but the LMDB one needs QL_TEST_STORE=pg (storage_test_pg_lock@pg). Waits poll with
 * a deadline; the lease's age is the database's clock, so the stale case polls the try itself.
 */
#include "storage/storage.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 10000

static char dir[256];
static char log_text[8192];

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void log_sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    (void)level;
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof log_text - n, "%s\n", line);
}

static ql_log_t test_log = {.level = QL_LOG_INFO, .sink = log_sink};

static ql_store_t *open_store(void) {
    return ql_test_pg_store_open(dir, sizeof dir, "ql_pglock");
}

static ql_store_lock_t *open_lock(ql_store_t *s, const char *server, int64_t lease_ms) {
    ql_store_lock_opts_t o = {
        .server_id = server, .address = "127.0.0.1:7070", .lease_ms = lease_ms, .log = &test_log};
    ql_store_lock_t *l = NULL;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_lock_open(s, &o, &l, &err), 0, "%s", err.msg);
    return l;
}

static bool try_lock(ql_store_lock_t *l, uint64_t *epoch, ql_store_holder_t *h) {
    bool got = false;
    ql_err_t err = {0};
    uint64_t e = 0;
    ql_store_holder_t scratch;
    cr_assert_eq(ql_store_lock_try(l, &got, &e, h ? h : &scratch, &err), 0, "%s", err.msg);
    if (epoch)
        *epoch = e;
    return got;
}

static uint64_t stored_epoch(ql_store_t *s) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    uint64_t e = 0;
    cr_assert_eq(ql_fence_current(t, &e), 0);
    ql_txn_abort(t);
    return e;
}

/* Polls still_held (renewing meanwhile, as the node does) until it says the holding is over;
 * returns why. */
static const char *wait_lost(ql_store_lock_t *l, int64_t deadline_ms) {
    static char why[512];
    int64_t until = ql_test_mono_ms() + deadline_ms;
    while (ql_store_lock_still_held(l, why, sizeof why)) {
        cr_assert_lt(ql_test_mono_ms(), until, "the holding never ended");
        ql_store_lock_renew(l);
        pause_ms(20);
    }
    return why;
}

Test(pg_lock, lmdb_has_no_lock_of_its_own) {
    ql_test_require_backend("lmdb");
    ql_test_tmpdir(dir, sizeof dir, "ql_pglock");
    ql_store_t *s;
    ql_test_store_open(dir, &s);
    ql_store_lock_t *l = (ql_store_lock_t *)&l;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_lock_open(s, NULL, &l, &err), UV_ENOTSUP);
    cr_assert_null(l);
    cr_assert(strstr(err.msg, "lock file"), "%s", err.msg);
    cr_assert_str_eq(ql_store_backend(s), "lmdb");
    ql_store_close(s);
}

Test(pg_lock, one_server_wins_and_the_other_reads_the_holder) {
    ql_store_t *a = open_store(), *b = open_store();
    cr_assert_str_eq(ql_store_backend(a), "postgresql");
    ql_store_lock_t *la = open_lock(a, "host-a:7070", 5000),
                    *lb = open_lock(b, "host-b:7070", 5000);
    uint64_t before = stored_epoch(a), epoch = 0;
    cr_assert(try_lock(la, &epoch, NULL), "the first try of a free lock wins");
    cr_assert_eq(epoch, before + 1, "winning raises the epoch");
    cr_assert_eq(stored_epoch(b), epoch, "and stores it");
    cr_assert(ql_store_lock_still_held(la, NULL, 0));

    ql_store_holder_t h;
    cr_assert_not(try_lock(lb, NULL, &h), "a second server on the schema must not win");
    cr_assert(h.known, "the holder recorded itself");
    cr_assert_str_eq(h.server_id, "host-a:7070");
    cr_assert_str_eq(h.address, "127.0.0.1:7070");
    cr_assert_eq(h.pid, (long)getpid());
    cr_assert_eq(h.epoch, epoch);
    cr_assert_eq(h.backend_pid, ql_test_pg_lock_backend(dir), "the lock's session is the holder");
    cr_assert_geq(h.lease_age_ms, 0);
    cr_assert_lt(h.lease_age_ms, 5000);
    /* The winner's own try says it holds it, the loser's keeps losing. */
    cr_assert(try_lock(la, NULL, NULL));
    cr_assert_not(try_lock(lb, NULL, NULL));
    cr_assert_eq(stored_epoch(a), epoch, "trying does not raise the epoch");

    /* A server on port 0 records its address once it listens. */
    cr_assert_eq(ql_store_lock_set_address(la, "127.0.0.1:40404"), 0);
    cr_assert_not(try_lock(lb, NULL, &h));
    cr_assert_str_eq(h.address, "127.0.0.1:40404");
    ql_store_lock_close(lb);
    ql_store_lock_close(la);
    ql_store_close(b);
    ql_store_close(a);
}

Test(pg_lock, a_release_frees_the_lock_and_every_win_raises_the_epoch) {
    ql_store_t *a = open_store(), *b = open_store();
    ql_store_lock_t *la = open_lock(a, "a", 5000), *lb = open_lock(b, "b", 5000);
    uint64_t e1, e2, e3;
    cr_assert(try_lock(la, &e1, NULL));
    ql_store_lock_release(la);
    cr_assert_not(ql_store_lock_still_held(la, NULL, 0));
    cr_assert_eq(ql_test_pg_lock_backend(dir), 0, "released");
    cr_assert(try_lock(lb, &e2, NULL), "released: the other server wins");
    cr_assert_eq(e2, e1 + 1);
    ql_store_lock_release(lb);
    cr_assert(try_lock(la, &e3, NULL), "and the first again");
    cr_assert_eq(e3, e2 + 1);
    cr_assert_eq(stored_epoch(b), e3);
    ql_store_lock_close(la); /* closing releases */
    cr_assert(try_lock(lb, NULL, NULL));
    ql_store_lock_close(lb);
    ql_store_close(b);
    ql_store_close(a);
}

Test(pg_lock, a_killed_holder_frees_the_lock) {
    ql_test_require_backend("pg");
    ql_test_tmpdir(dir, sizeof dir, "ql_pglock");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t child = fork(); /* the child makes no Criterion call */
    if (child == 0) {
        close(fds[0]);
        ql_store_t *s;
        ql_store_lock_t *l;
        ql_err_t err = {0};
        ql_store_lock_opts_t lo = {.server_id = "child", .lease_ms = 5000};
        bool got = false;
        uint64_t e;
        if (ql_store_open(&o, &s, &err) || ql_store_lock_open(s, &lo, &l, &err) ||
            ql_store_lock_try(l, &got, &e, NULL, &err) || !got)
            _exit(3);
        if (write(fds[1], "H", 1) != 1)
            _exit(4);
        for (;;)
            pause();
    }
    close(fds[1]);
    char c = 0;
    cr_assert_eq(read(fds[0], &c, 1), 1, "the child did not take the lock");
    close(fds[0]);
    ql_store_t *s;
    ql_test_store_open(dir, &s);
    ql_store_lock_t *l = open_lock(s, "standby", 5000);
    ql_store_holder_t h;
    cr_assert_not(try_lock(l, NULL, &h));
    cr_assert_str_eq(h.server_id, "child");
    cr_assert_eq(h.pid, (long)child);
    uint64_t held_epoch = h.epoch;
    cr_assert_eq(kill(child, SIGKILL), 0);
    int st;
    cr_assert_eq(waitpid(child, &st, 0), child);
    int64_t t0 = ql_test_mono_ms();
    uint64_t epoch = 0;
    while (!try_lock(l, &epoch, NULL)) {
        cr_assert_lt(ql_test_mono_ms() - t0, DEADLINE_MS,
                     "the dead process's lock was never freed");
        pause_ms(10);
    }
    fprintf(stderr, "pg_lock: the lock of a killed holder was free after %lld ms\n",
            (long long)(ql_test_mono_ms() - t0));
    cr_assert_eq(epoch, held_epoch + 1);
    ql_store_lock_close(l);
    ql_store_close(s);
}

Test(pg_lock, an_ended_session_ends_the_holding) {
    ql_store_t *a = open_store(), *b = open_store();
    ql_store_lock_t *la = open_lock(a, "a", 5000), *lb = open_lock(b, "b", 5000);
    uint64_t e1, e2;
    cr_assert(try_lock(la, &e1, NULL));
    ql_store_lock_renew(la);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d, 5000)",
             ql_test_pg_lock_backend(dir));
    ql_test_pg_sql(sql, NULL, 0);
    const char *why = wait_lost(la, DEADLINE_MS);
    cr_assert(strstr(why, "session to PostgreSQL ended"), "%s", why);
    cr_assert(try_lock(lb, &e2, NULL), "the ended session's lock is free");
    cr_assert_eq(e2, e1 + 1);
    /* The old holder lets go and tries again as a standby, on a new session. */
    ql_store_lock_release(la);
    ql_store_holder_t h;
    cr_assert_not(try_lock(la, NULL, &h));
    cr_assert_str_eq(h.server_id, "b");
    cr_assert_eq(h.epoch, e2);
    ql_store_lock_close(lb);
    ql_store_lock_close(la);
    ql_store_close(b);
    ql_store_close(a);
}

/* A holder that renews keeps the lock however long a standby tries with a short lease; once it
 * stops renewing (a stopped process: its session lives on), the standby ends its session,
 * says why and takes the lock with a raised epoch, and the old holder learns it is over. */
Test(pg_lock, a_stale_lease_is_ended_and_taken_over) {
    ql_store_t *a = open_store(), *b = open_store();
    ql_store_lock_t *la = open_lock(a, "a", 1000), *lb = open_lock(b, "b", 1000);
    uint64_t e1, e2;
    cr_assert(try_lock(la, &e1, NULL));
    int held_by = ql_test_pg_lock_backend(dir);
    for (int64_t until = ql_test_mono_ms() + 2500; ql_test_mono_ms() < until;) {
        ql_store_lock_renew(la);
        cr_assert(ql_store_lock_still_held(la, NULL, 0));
        cr_assert_not(try_lock(lb, NULL, NULL), "a renewing holder was taken over");
        pause_ms(100);
    }
    cr_assert_null(strstr(log_text, "ended the master"), "%s", log_text);
    /* a stops renewing. */
    int64_t t0 = ql_test_mono_ms();
    ql_store_holder_t h;
    while (!try_lock(lb, &e2, &h)) {
        cr_assert_lt(ql_test_mono_ms() - t0, DEADLINE_MS, "the stale holder was never taken over");
        cr_assert(h.known);
        cr_assert_leq(h.lease_age_ms, 1000 + 1500, "a stale lease was left alone");
        pause_ms(20);
    }
    cr_assert_geq(ql_test_mono_ms() - t0, 900, "taken over before the lease was stale");
    cr_assert_eq(e2, e1 + 1);
    cr_assert_eq(stored_epoch(b), e2);
    cr_assert(strstr(log_text, "standby: ended the master's job engine lock session"), "%s",
              log_text);
    char needle[64];
    snprintf(needle, sizeof needle, "backend=%d server=a ", held_by);
    cr_assert(strstr(log_text, needle), "%s", log_text);
    cr_assert(strstr(log_text, "qilin.server.master-lease-ms=1000"), "%s", log_text);
    const char *why = wait_lost(la, DEADLINE_MS);
    cr_assert(strstr(why, "ended"), "%s", why);
    ql_store_lock_close(lb);
    ql_store_lock_close(la);
    ql_store_close(b);
    ql_store_close(a);
}

/* The postgres process of a stopped session, continued at exit whatever happens. */
static int stopped_backend;
static void continue_backend(void) {
    if (stopped_backend > 0)
        kill(stopped_backend, SIGCONT);
}

/* The holder cut off from the database (its session's backend stopped: nothing answers, as
 * after a network cut) counts itself gone once a renewal waits past half the lease. */
Test(pg_lock, a_holder_whose_renewals_go_unanswered_steps_down) {
    ql_store_t *a = open_store();
    ql_store_lock_t *la = open_lock(a, "a", 2000);
    cr_assert(try_lock(la, NULL, NULL));
    ql_store_lock_renew(la);
    cr_assert(ql_store_lock_still_held(la, NULL, 0));
    stopped_backend = ql_test_pg_lock_backend(dir);
    ql_test_cleanup_add(continue_backend);
    cr_assert_eq(kill(stopped_backend, SIGSTOP), 0);
    int64_t t0 = ql_test_mono_ms();
    const char *why = wait_lost(la, DEADLINE_MS);
    int64_t took = ql_test_mono_ms() - t0;
    kill(stopped_backend, SIGCONT);
    stopped_backend = 0;
    cr_assert(strstr(why, "has not answered the lease renewal"), "%s", why);
    cr_assert_geq(took, 900, "half the lease (1 s) must pass first, took %lld ms", (long long)took);
    ql_store_lock_close(la);
    ql_store_close(a);
}

/* A standby whose role may not end the holder's session (the holder is the fixture's
 * superuser, the standby a plain role with the store's rights) leaves it alone and says so,
 * once, naming the rights it would need. */
static char weak_role[64];
static void drop_weak_role(void) {
    if (!weak_role[0])
        return;
    char sql[256];
    snprintf(sql, sizeof sql, "DROP OWNED BY %s; DROP ROLE %s", weak_role, weak_role);
    PGconn *c = PQconnectdb(ql_test_pg_url());
    PQclear(PQexec(c, sql));
    PQfinish(c);
    weak_role[0] = '\0';
}

Test(pg_lock, a_standby_that_may_not_end_the_holder_says_so) {
    ql_store_t *a = open_store();
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    if (!strncmp(o.url, "postgres", 8))
        cr_skip_test("needs a conninfo (key=value) URL to add a user to");
    ql_store_lock_t *la = open_lock(a, "a", 1000);
    cr_assert(try_lock(la, NULL, NULL));
    char db[128], sql[1024];
    ql_test_pg_sql("SELECT current_database()", db, sizeof db);
    snprintf(weak_role, sizeof weak_role, "qt_weak_%ld", (long)getpid());
    ql_test_cleanup_add(drop_weak_role);
    snprintf(sql, sizeof sql,
             "CREATE ROLE %s LOGIN; GRANT CREATE ON DATABASE \"%s\" TO %s; GRANT USAGE, CREATE "
             "ON SCHEMA %s TO %s; GRANT ALL ON ALL TABLES IN SCHEMA %s TO %s",
             weak_role, db, weak_role, o.pg_schema, weak_role, o.pg_schema, weak_role);
    ql_test_pg_sql(sql, NULL, 0);
    char url[1200];
    snprintf(url, sizeof url, "%s user=%s", o.url, weak_role);
    o.url = url;
    ql_store_t *b;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &b, &err), 0, "%s", err.msg);
    ql_store_lock_t *lb = open_lock(b, "b", 1000);
    int64_t t0 = ql_test_mono_ms();
    while (!strstr(log_text, "cannot end its lock session")) {
        cr_assert_lt(ql_test_mono_ms() - t0, DEADLINE_MS, "no refusal logged: %s", log_text);
        cr_assert_not(try_lock(lb, NULL, NULL), "the holder was taken over");
        pause_ms(50);
    }
    cr_assert(strstr(log_text, "superuser"), "%s", log_text);
    cr_assert(strstr(log_text, "pg_signal_backend"), "%s", log_text);
    for (int i = 0; i < 5; i++)
        cr_assert_not(try_lock(lb, NULL, NULL));
    const char *first = strstr(log_text, "cannot end its lock session");
    cr_assert_null(strstr(first + 1, "cannot end its lock session"), "said twice: %s", log_text);
    cr_assert(ql_store_lock_still_held(la, NULL, 0), "the holder lost its lock");
    ql_store_lock_close(lb);
    ql_store_close(b);
    ql_store_lock_close(la);
    ql_store_close(a);
    drop_weak_role();
}

/* The pg_backend_pid() the lock's session reports, played by a transaction-pooling proxy: from
 * the `flip`th read on, the session seems to be on another backend. */
static int pid_reads, flip_at;
static int pooled_pid(void *arg, int pid) {
    (void)arg;
    return ++pid_reads >= flip_at ? pid + 1 : pid;
}

static ql_store_lock_t *open_pooled(ql_store_t *s, int flip, ql_err_t *err, int *rc) {
    pid_reads = 0;
    flip_at = flip;
    ql_store_lock_opts_t o = {.server_id = "a", .lease_ms = 5000, .backend_pid_hook = pooled_pid};
    ql_store_lock_t *l = NULL;
    *rc = ql_store_lock_open(s, &o, &l, err);
    return l;
}

Test(pg_lock, a_transaction_pooling_proxy_is_refused) {
    ql_store_t *s = open_store();
    ql_err_t err = {0};
    int rc;
    /* At open: the backend changes between two statements. */
    cr_assert_null(open_pooled(s, 2, &err, &rc));
    cr_assert_eq(rc, QL_EINVAL);
    cr_assert(strstr(err.msg, "moved from backend"), "%s", err.msg);
    cr_assert(strstr(err.msg, "pool_mode=transaction"), "%s", err.msg);
    cr_assert(strstr(err.msg, "qilin.storage.url"), "%s", err.msg);
    /* At a try: refused, and the lock is not left taken. */
    ql_store_lock_t *l = open_pooled(s, 3, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.msg);
    bool got = true;
    uint64_t e;
    cr_assert_eq(ql_store_lock_try(l, &got, &e, NULL, &err), QL_EINVAL);
    cr_assert_not(got);
    cr_assert(strstr(err.msg, "moved from backend"), "%s", err.msg);
    /* Its session was closed, so its backend lets go (soon after: poll). */
    for (int64_t until = ql_test_mono_ms() + DEADLINE_MS; ql_test_pg_lock_backend(dir) != 0;) {
        cr_assert_lt(ql_test_mono_ms(), until, "the refused try left the lock taken");
        pause_ms(10);
    }
    ql_store_lock_close(l);
    /* While held: the holding ends. */
    l = open_pooled(s, 4, &err, &rc);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert(try_lock(l, NULL, NULL));
    const char *why = wait_lost(l, DEADLINE_MS);
    cr_assert(strstr(why, "moved from backend"), "%s", why);
    ql_store_lock_close(l);
    ql_store_close(s);
}

/* A master stopped inside a write transaction keeps the fence row share-locked: the database
 * ends that session once it idles past the stall bound, so the new master's raise goes through
 * (it would otherwise wait out its lock timeout, 2 s, and fail). */
Test(pg_lock, a_write_left_idle_by_a_stopped_client_does_not_hold_up_the_raise) {
    ql_store_t *b = open_store();
    ql_txn_t *t;
    uint64_t e;
    cr_assert_eq(ql_txn_begin(b, true, &t), 0);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    o.writer_stall_ms = 300;
    ql_store_t *a;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &a, &err), 0, "%s", err.msg);
    ql_txn_t *ta;
    cr_assert_eq(ql_txn_begin(a, true, &ta), 0);
    uint64_t cur;
    cr_assert_eq(ql_fence_check(ta, e, &err), 0, "%s", err.msg); /* share-locks the row */
    /* a's client now does nothing, as if stopped. */
    int64_t t0 = ql_test_mono_ms();
    cr_assert_eq(ql_txn_begin(b, true, &t), 0);
    int rc = ql_fence_raise(t, &cur);
    cr_assert_eq(rc, 0, "the raise failed: %s", ql_strerror(rc));
    cr_assert_eq(ql_txn_commit(t), 0);
    int64_t took = ql_test_mono_ms() - t0;
    cr_assert_eq(cur, e + 1);
    cr_assert_geq(took, 200, "the raise did not wait for the idle transaction (%lld ms)",
                  (long long)took);
    cr_assert_lt(took, 1900, "took %lld ms", (long long)took);
    cr_assert_neq(ql_txn_commit(ta), 0, "the idle transaction was ended");
    ql_store_close(a);
    ql_store_close(b);
}
