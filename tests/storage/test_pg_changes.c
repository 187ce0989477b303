/*
 * Wake-ups across servers (ql_store.h, "changes made by other servers"; docs/postgresql.md,
 * Wake-ups). Two stores opened on one schema stand for two servers: what one commits, the
 * other hears on its change session; what is rolled back, nobody hears; another schema hears
 * nothing; a lost session is replaced and its first drain says "anything may have changed".
 * The LMDB store's change session has its own tests (test_lmdb_changes.c).
 *
 * Silence cannot be waited for, so every "nothing was heard" is checked against a marker job
 * committed afterwards: notifications arrive in commit order, so once the marker is heard,
 * anything committed before it has been too. Waits poll the socket with a deadline.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEADLINE_MS 10000

static char dir[256], dir2[256];

static int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static ql_store_t *open_in(char *d, size_t cap) {
    ql_test_require_backend("pg");
    if (!d[0])
        ql_test_tmpdir(d, cap, "ql_pg_changes");
    ql_store_t *s;
    ql_test_store_open(d, &s);
    return s;
}

/* A listening store (a server's) on the schema of d. */
static ql_store_t *open_listening(char *d, size_t cap) {
    ql_store_t *s = open_in(d, cap);
    ql_err_t err = {0};
    cr_assert_eq(ql_store_changes_listen(s, &err), 0, "%s", err.msg);
    cr_assert_geq(ql_store_changes_fd(s), 0);
    return s;
}

/* ---- what a listener heard ---- */

#define HEARD_MAX 1024
typedef struct heard {
    ql_id_t ids[HEARD_MAX];
    size_t n;
    unsigned anything; /* reports of "anything may have changed" */
} heard_t;

static void on_change(void *arg, const ql_id_t *job) {
    heard_t *h = arg;
    if (!job)
        h->anything++;
    else if (h->n < HEARD_MAX)
        h->ids[h->n++] = *job;
}

static bool has(const heard_t *h, const ql_id_t *id) {
    for (size_t i = 0; i < h->n; i++)
        if (ql_id_eq(&h->ids[i], id))
            return true;
    return false;
}

/* Drains s until job was heard (job NULL: until "anything"), polling its socket; asserts it
 * comes within the deadline. Returns the microseconds waited. */
static int64_t wait_heard(ql_store_t *s, heard_t *h, const ql_id_t *job) {
    int64_t start = mono_us(), deadline = start + DEADLINE_MS * 1000ll;
    for (;;) {
        int rc = ql_store_changes_drain(s, on_change, h);
        cr_assert_eq(rc, 0, "the change session broke: %s", ql_strerror(rc));
        if (job ? has(h, job) : h->anything > 0)
            return mono_us() - start;
        int64_t left = deadline - mono_us();
        cr_assert_gt(left, 0, "not heard within %d ms", DEADLINE_MS);
        struct pollfd p = {.fd = ql_store_changes_fd(s), .events = POLLIN};
        poll(&p, 1, (int)(left / 1000) + 1);
    }
}

/* ---- writing jobs ---- */

static ql_job_t adhoc(ql_store_t *s, ql_state_t st) {
    ql_job_t j = {0};
    ql_store_new_id(s, &j.id);
    strcpy(j.project, "p");
    strcpy(j.type, "ADHOC");
    j.state = st;
    j.priority = 3;
    j.create_time = j.modify_time = 1;
    return j;
}

static void put_commit(ql_store_t *s, const ql_job_t *j) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_job_put(t, j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

/* A READY job committed now, to be heard after everything committed before it. */
static ql_id_t marker(ql_store_t *s) {
    ql_job_t m = adhoc(s, QL_READY);
    put_commit(s, &m);
    return m.id;
}

static void make_project(ql_store_t *s) {
    ql_id_t model;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(s, "p", "m", &model, &err), 0, "%s", err.msg);
}

/* ---- cases ---- */

Test(pg_changes, a_committed_ready_job_is_heard_by_another_store) {
    ql_store_t *w = open_in(dir, sizeof dir);
    make_project(w);
    ql_store_t *l = open_listening(dir, sizeof dir);
    cr_assert_eq(ql_store_changes_fd(w), -1, "only a store that listens has a session");
    heard_t h = {0};
    /* The first session of a store that opened at once has missed nothing. */
    cr_assert_eq(ql_store_changes_drain(l, on_change, &h), 0);
    cr_assert_eq(h.anything, 0);
    int64_t worst = 0;
    for (int i = 0; i < 20; i++) {
        ql_job_t j = adhoc(w, QL_READY);
        put_commit(w, &j);
        int64_t us = wait_heard(l, &h, &j.id);
        if (us > worst)
            worst = us;
    }
    cr_assert_eq(h.n, 20, "each job once: %zu", h.n);
    cr_assert_eq(h.anything, 0);
    fprintf(stderr, "pg_changes: 20 commits heard, slowest %lld us after the commit returned\n",
            (long long)worst);
    ql_store_close(l);
    ql_store_close(w);
}

Test(pg_changes, a_rolled_back_change_is_never_heard) {
    ql_store_t *w = open_in(dir, sizeof dir);
    make_project(w);
    ql_store_t *l = open_listening(dir, sizeof dir);
    ql_job_t aborted = adhoc(w, QL_READY), nested = adhoc(w, QL_READY), kept = adhoc(w, QL_READY);
    ql_txn_t *t, *n;
    cr_assert_eq(ql_txn_begin(w, true, &t), 0);
    cr_assert_eq(ql_job_put(t, &aborted), 0);
    ql_txn_abort(t);
    /* A mutation rolled back inside a committed transaction (the writer's nested level). */
    cr_assert_eq(ql_txn_begin(w, true, &t), 0);
    cr_assert_eq(ql_txn_begin_nested(t, &n), 0);
    cr_assert_eq(ql_job_put(n, &nested), 0);
    ql_txn_abort(n);
    cr_assert_eq(ql_txn_begin_nested(t, &n), 0);
    cr_assert_eq(ql_job_put(n, &kept), 0);
    cr_assert_eq(ql_txn_commit(n), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    heard_t h = {0};
    ql_id_t m = marker(w);
    wait_heard(l, &h, &m);
    cr_assert(has(&h, &kept.id), "a released level's job is notified with the commit");
    cr_assert_not(has(&h, &aborted.id), "an aborted transaction notified");
    cr_assert_not(has(&h, &nested.id), "a rolled-back level notified");
    cr_assert_eq(h.n, 2);
    ql_store_close(l);
    ql_store_close(w);
}

/* Which puts wake: the rule of store_change_wakes, through the store. */
Test(pg_changes, only_new_ready_jobs_and_moves_to_ready_paused_discarded_are_heard) {
    ql_store_t *w = open_in(dir, sizeof dir);
    make_project(w);
    ql_store_t *l = open_listening(dir, sizeof dir);
    struct {
        ql_state_t from; /* QL_STATE_COUNT: a new job */
        ql_state_t to;
        bool heard;
    } cases[] = {
        {QL_STATE_COUNT, QL_READY, true},   {QL_STATE_COUNT, QL_RUNNING, false},
        {QL_STATE_COUNT, QL_PAUSED, false}, {QL_READY, QL_RUNNING, false},
        {QL_RUNNING, QL_PAUSED, true},      {QL_RUNNING, QL_DISCARDED, true},
        {QL_RUNNING, QL_READY, true},       {QL_ERROR, QL_READY, true},
        {QL_PAUSED, QL_READY, true},        {QL_READY, QL_READY, false},
        {QL_RUNNING, QL_SUCCEED, false},    {QL_RUNNING, QL_ERROR, false},
        {QL_PAUSED, QL_PAUSED, false},      {QL_READY, QL_SUICIDAL, false},
    };
    size_t n = sizeof cases / sizeof cases[0];
    ql_id_t ids[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < n; i++) {
        ql_job_t j = adhoc(w, cases[i].from == QL_STATE_COUNT ? cases[i].to : cases[i].from);
        ids[i] = j.id;
        if (cases[i].from != QL_STATE_COUNT) {
            /* Created in `from` (itself heard when READY), then moved. */
            put_commit(w, &j);
            j.state = cases[i].to;
            j.modify_time = 2;
        }
        /* The put that is checked, alone in its transaction after the marker below. */
        heard_t before = {0};
        ql_id_t m = marker(w);
        wait_heard(l, &before, &m);
        put_commit(w, &j);
        heard_t h = {0};
        m = marker(w);
        wait_heard(l, &h, &m);
        cr_assert_eq(has(&h, &ids[i]), cases[i].heard, "case %zu: %s -> %s heard=%d", i,
                     cases[i].from == QL_STATE_COUNT ? "(new)" : ql_state_name(cases[i].from),
                     ql_state_name(cases[i].to), !cases[i].heard);
    }
    ql_store_close(l);
    ql_store_close(w);
}

Test(pg_changes, one_commit_names_its_jobs_and_too_many_read_as_anything) {
    ql_store_t *w = open_in(dir, sizeof dir);
    make_project(w);
    ql_store_t *l = open_listening(dir, sizeof dir);
    ql_txn_t *t;
    ql_job_t three[3];
    cr_assert_eq(ql_txn_begin(w, true, &t), 0);
    for (int i = 0; i < 3; i++) {
        three[i] = adhoc(w, QL_READY);
        cr_assert_eq(ql_job_put(t, &three[i]), 0);
        cr_assert_eq(ql_job_put(t, &three[i]), 0, "put twice: named once");
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    heard_t h = {0};
    wait_heard(l, &h, &three[2].id);
    cr_assert_eq(h.n, 3, "%zu ids", h.n);
    cr_assert(has(&h, &three[0].id) && has(&h, &three[1].id));
    /* More than one payload can name (8000 bytes): "anything may have changed". */
    cr_assert_eq(ql_txn_begin(w, true, &t), 0);
    for (int i = 0; i < 250; i++) {
        ql_job_t j = adhoc(w, QL_READY);
        cr_assert_eq(ql_job_put(t, &j), 0);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    h = (heard_t){0};
    wait_heard(l, &h, NULL);
    cr_assert_eq(h.n, 0);
    cr_assert_eq(h.anything, 1);
    ql_store_close(l);
    ql_store_close(w);
}

Test(pg_changes, another_schema_hears_nothing) {
    ql_store_t *w = open_in(dir, sizeof dir);
    make_project(w);
    ql_store_t *l = open_listening(dir, sizeof dir);
    ql_store_t *other = open_listening(dir2, sizeof dir2); /* a cluster of its own */
    make_project(other);
    ql_job_t j = adhoc(w, QL_READY);
    put_commit(w, &j);
    heard_t h = {0}, ho = {0};
    wait_heard(l, &h, &j.id);
    ql_id_t m = marker(other);
    wait_heard(other, &ho, &m);
    cr_assert_eq(ho.n, 1, "the other schema heard %zu jobs", ho.n);
    cr_assert_not(has(&ho, &j.id));
    cr_assert_not(has(&h, &m), "this schema heard the other's marker");
    ql_store_close(other);
    ql_store_close(l);
    ql_store_close(w);
}

/* A schema name that cannot be a channel name as it is (too long, not plain): the hashed
 * channel works for both ends and is quoted right. */
Test(pg_changes, an_unusual_schema_name_gets_a_hashed_channel) {
    ql_test_require_backend("pg");
    ql_test_tmpdir(dir, sizeof dir, "ql_pg_changes_odd");
    char schema[128];
    snprintf(schema, sizeof schema, "Qilin \"Odd\" Schema %d with a name over sixty-three bytes",
             (int)getpid());
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o); /* skips without a server */
    o.pg_schema = schema;
    ql_store_t *w, *l;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &w, &err), 0, "%s", err.msg);
    o.pg_drop_at_close = true; /* the last to close drops it */
    cr_assert_eq(ql_store_open(&o, &l, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_store_changes_listen(l, &err), 0, "%s", err.msg);
    make_project(w);
    heard_t h = {0};
    ql_id_t m = marker(w);
    wait_heard(l, &h, &m);
    ql_store_close(w);
    ql_store_close(l);
}

/* Runs sql on a session of the test's own. */
static void run_sql(const char *sql) {
    PGconn *c = PQconnectdb(ql_test_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    PQfinish(c);
}

/* An operator can wake the servers of a schema by hand; the session's descriptor is not
 * inherited by the steps a server runs. */
Test(pg_changes, a_bare_notify_reads_as_anything_and_the_fd_is_close_on_exec) {
    ql_store_t *l = open_listening(dir, sizeof dir);
    int fd = ql_store_changes_fd(l);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    char sql[256];
    snprintf(sql, sizeof sql, "NOTIFY \"qilin_jobs_%s\"", o.pg_schema);
    run_sql(sql);
    heard_t h = {0};
    wait_heard(l, &h, NULL);
    cr_assert_eq(h.anything, 1);
    cr_assert_eq(h.n, 0);
    ql_store_close(l);
}

/* Terminates the change sessions of the schema of d from a session of the test's own. */
static void kill_change_sessions(const char *d) {
    ql_store_opts_t o;
    ql_test_store_opts(d, &o);
    PGconn *c = PQconnectdb(ql_test_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    char app[128], sql[512];
    snprintf(app, sizeof app, "qilin/%s/changes", o.pg_schema);
    char *lit = PQescapeLiteral(c, app, strlen(app));
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
             "application_name = %s",
             lit);
    PQfreemem(lit);
    PGresult *r = PQexec(c, sql);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    cr_assert_eq(atoi(PQgetvalue(r, 0, 0)), 1, "one change session to end");
    PQclear(r);
    PQfinish(c);
}

Test(pg_changes, a_lost_session_is_replaced_and_reports_anything_first) {
    ql_store_t *w = open_in(dir, sizeof dir);
    make_project(w);
    ql_store_t *l = open_listening(dir, sizeof dir);
    int old_fd = ql_store_changes_fd(l);
    kill_change_sessions(dir);
    /* The drain finds the session lost (once the server's goodbye and EOF have arrived). */
    heard_t h = {0};
    int64_t deadline = mono_us() + DEADLINE_MS * 1000ll;
    int rc;
    while ((rc = ql_store_changes_drain(l, on_change, &h)) == 0) {
        cr_assert_lt(mono_us(), deadline, "the lost session was not noticed");
        struct pollfd p = {.fd = old_fd, .events = POLLIN};
        poll(&p, 1, 100);
    }
    cr_assert_eq(rc, QL_EUNAVAILABLE);
    cr_assert_eq(ql_store_changes_fd(l), old_fd, "kept open until the next listen");
    cr_assert_eq(ql_store_changes_drain(l, on_change, &h), QL_EUNAVAILABLE, "and stays broken");
    /* Committed while nobody listened: lost, hence "anything" from the new session. */
    ql_id_t missed = marker(w);
    ql_err_t err = {0};
    cr_assert_eq(ql_store_changes_listen(l, &err), 0, "%s", err.msg);
    h = (heard_t){0};
    cr_assert_eq(ql_store_changes_drain(l, on_change, &h), 0);
    cr_assert_eq(h.anything, 1, "the first drain after a reconnect reports anything");
    ql_id_t m = marker(w);
    wait_heard(l, &h, &m);
    cr_assert_not(has(&h, &missed));
    cr_assert_eq(h.anything, 1);
    ql_store_close(l);
    ql_store_close(w);
}
