/*
 * The end-of-test checks of the dispatcher kill tests (test_pg_dispatch_kill.c on PostgreSQL's
 * lock, test_zk_dispatch_kill.c on ZooKeeper): each round made one new daily cycle due for every
 * model of project "p" and stopped the master while it submitted them. At the end every model
 * must have, for every round, exactly one INC_BUILD submitted by System, ended SUCCEED, with its
 * one READY segment of that round's day, and nothing else. Include after rest_util.h. On
 * PostgreSQL both slow the servers' build inserts (dr_slow_build_inserts) so that a round's
 * commits are spread and a stop can land between them. Also the models both set up
 * (dr_create_models, dr_retune_models).
 */
#ifndef QL_TEST_DISPATCH_ROUNDS_H
#define QL_TEST_DISPATCH_ROUNDS_H

#include "rest_util.h"
#include "storage/storage.h"
#include "tests/common/store_util.h"

#include <libpq-fe.h>

#define DR_DAY 86400000LL
#define DR_MAX_OFFSET 170 /* days back from the check's "today" a round may target */

/* Each build's insert into the schema of the store the servers of data_dir share takes 2, 4 or 6
 * ms longer, by its transaction's id (a trigger of the test's own). Without it the master's
 * writer lanes commit a round's builds side by side within a few ms of the first, a window that
 * a stop's moment, taken by polling, misses whenever the machine is busy. The same delay for
 * every transaction was not enough: the two lanes' batches of 48 then took about 100 ms each side
 * by side and still committed within a few ms of each other (13 of 50 kills landed on a quiet
 * machine). With delays that differ from one transaction to the next, a round's commits are
 * about 100 ms apart. */
UNUSED static void dr_slow_build_inserts(const char *data_dir) {
    const char *settings[2];
    cr_assert_eq(ql_test_store_settings(data_dir, settings), 2);
    const char *schema = strchr(settings[1], '=') + 1;
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE FUNCTION %s.qt_slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
             "PERFORM pg_sleep(0.002 * (1 + txid_current() %% 3)); RETURN NEW; END $$; "
             "CREATE TRIGGER qt_slow_insert BEFORE INSERT ON %s.jobs FOR EACH ROW "
             "EXECUTE FUNCTION %s.qt_slow_insert()",
             schema, schema, schema);
    PGconn *c = PQconnectdb(ql_test_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

typedef struct dr_seen {
    int jobs[DR_MAX_OFFSET], segments[DR_MAX_OFFSET];
    int stray; /* a record of no round's day, not a day long, or not what the dispatcher makes */
    int64_t today;
} dr_seen_t;

static int dr_offset_of(const dr_seen_t *s, int64_t start, int64_t end) {
    if (end - start != DR_DAY || start % DR_DAY || start >= s->today)
        return -1;
    int64_t off = (s->today - start) / DR_DAY;
    return off < DR_MAX_OFFSET ? (int)off : -1;
}

static int dr_job_cb(const ql_job_t *j, void *arg) {
    dr_seen_t *s = arg;
    int off = dr_offset_of(s, j->range_start, j->range_end);
    if (off < 0 || strcmp(j->type, "INC_BUILD") || strcmp(j->submitter, "System") ||
        j->state != QL_SUCCEED)
        s->stray++;
    else
        s->jobs[off]++;
    return 0;
}

static int dr_segment_cb(const ql_segment_t *g, void *arg) {
    dr_seen_t *s = arg;
    int off = dr_offset_of(s, g->start, g->end);
    if (off < 0 || g->status != QL_SEG_READY)
        s->stray++;
    else
        s->segments[off]++;
    return 0;
}

typedef struct dr_check {
    ql_txn_t *t;
    int64_t today;
    const int64_t *days; /* each round's target day (start, epoch ms) */
    int rounds;
    int n; /* models checked */
} dr_check_t;

static int dr_check_model(const ql_model_t *m, void *arg) {
    dr_check_t *c = arg;
    static dr_seen_t s;
    memset(&s, 0, sizeof s);
    s.today = c->today;
    cr_assert_eq(ql_job_foreach_model(c->t, &m->id, dr_job_cb, &s), 0);
    cr_assert_eq(ql_segment_foreach(c->t, &m->id, dr_segment_cb, &s), 0);
    cr_assert_eq(s.stray, 0, "%s: %d records that are no round's build", m->name, s.stray);
    for (int off = 0; off < DR_MAX_OFFSET; off++) {
        cr_assert_leq(s.jobs[off], 1, "%s, %d days back: %d jobs", m->name, off, s.jobs[off]);
        cr_assert_eq(s.jobs[off], s.segments[off], "%s, %d days back: %d jobs, %d segments",
                     m->name, off, s.jobs[off], s.segments[off]);
    }
    /* A round whose scan ran past midnight builds the next day: one of the two, never both. */
    for (int r = 0; r < c->rounds; r++) {
        int off = (int)((c->today - c->days[r]) / DR_DAY);
        cr_assert(off >= 1 && off < DR_MAX_OFFSET, "round %d's day is %d days back", r, off);
        cr_assert_eq(s.jobs[off] + s.jobs[off - 1], 1, "%s: round %d has %d builds", m->name, r,
                     s.jobs[off] + s.jobs[off - 1]);
    }
    c->n++;
    return 0;
}

/* Checks every model of project "p" in store against the rounds' days; expects `models` of
 * them. Offsets count from tomorrow (UTC): every build's day is before it, midnight passed or
 * not. */
UNUSED static void dr_check_models(ql_store_t *store, const int64_t *days, int rounds, int models) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    dr_check_t c = {
        .t = t, .today = wall_ms() / DR_DAY * DR_DAY + DR_DAY, .days = days, .rounds = rounds};
    cr_assert_eq(ql_model_foreach(t, "p", dr_check_model, &c), 0);
    ql_txn_abort(t);
    cr_assert_eq(c.n, models);
}

/* ---- the models: project "p" (automatic builds on) and its n daily models m000, m001, ... ---- */

typedef struct dr_collect {
    ql_id_t *ids;
    int n, cap;
} dr_collect_t;

UNUSED static int dr_collect_cb(const ql_model_t *m, void *arg) {
    dr_collect_t *c = arg;
    cr_assert_lt(c->n, c->cap);
    c->ids[c->n++] = m->id;
    return 0;
}

/* Creates project "p" and n models partitioned by day on DT; their ids go to ids. */
UNUSED static void dr_create_models(ql_store_t *store, ql_id_t *ids, int n) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_err_t err = {0};
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p");
    p.auto_segment_build_enabled = true;
    cr_assert_eq(ql_meta_create_project(t, &p, wall_ms(), &err), 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        ql_model_t m = {0};
        snprintf(m.project, sizeof m.project, "p");
        snprintf(m.name, sizeof m.name, "m%03d", i);
        m.partitioned = true;
        snprintf(m.partition_column, sizeof m.partition_column, "DT");
        snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
        cr_assert_eq(ql_meta_create_model(t, &m, wall_ms(), &err), 0, "%s", err.msg);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    dr_collect_t c = {ids, 0, n};
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_model_foreach(t, "p", dr_collect_cb, &c), 0);
    ql_txn_abort(t);
    cr_assert_eq(c.n, n);
}

/* Every model's automatic build, daily at 00:00 UTC, for the day `offset` days before the
 * trigger's: in one transaction, so one scan sees the new cycle of every model. */
UNUSED static void dr_retune_models(ql_store_t *store, const ql_id_t *ids, int n, int64_t offset) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    for (int i = 0; i < n; i++) {
        ql_model_t m;
        cr_assert_eq(ql_model_get(t, &ids[i], 0, &m), 0);
        ql_auto_build_t *a = &m.auto_build;
        a->present = a->enabled = true;
        snprintf(a->trigger_time, sizeof a->trigger_time, "00:00:00");
        a->logical_date_offset_days = offset;
        snprintf(a->data_range_start_time, sizeof a->data_range_start_time, "00:00:00");
        snprintf(a->data_range_end_time, sizeof a->data_range_end_time, "24:00:00");
        cr_assert_eq(ql_model_put(t, &m), 0);
        ql_model_free(&m);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
}

/* Whether the server q launched has written its "listening on" line. */
UNUSED static bool dr_serving(const qd_t *q) {
    char *s = read_file(q->log);
    bool up = s && strlen(s) > q->log_skip && strstr(s + q->log_skip, "qilind listening on ");
    free(s);
    return up;
}

/* Lines of the file holding needle. */
UNUSED static int dr_count_lines(const char *path, const char *needle) {
    char *s = read_file(path);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(s);
    return n;
}

#endif
