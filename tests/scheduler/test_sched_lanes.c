/*
 * The scheduler on a writer with several lanes (docs/postgresql.md, Writer lanes;
 * scheduler/sched_lanes.c): batches of step ends and picks are split into one batch per lane,
 * and whatever order the parts commit in, the store never shows more RUNNING jobs than
 * kylin.job.max-concurrent-jobs. A deferred constraint trigger, added to the test's schema,
 * checks that at every commit of the jobs table: a commit that would show one RUNNING job too
 * many fails, so the writer counts a failed mutation.
 *
 * The dealing itself (ql_sched_deal) is checked without a store, one case per rule; the end to
 * end case runs on PostgreSQL only: LMDB runs one write transaction at a time, so its writer has
 * one lane.
 */
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submission.h"
#include "scheduler/sched_int.h"
#include "server/ql_node.h"
#include "storage/storage.h"

#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEADLINE_MS 60000
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */
#define LIMIT 4
#define MODELS 8
#define PER_MODEL 24
#define JOBS (MODELS * PER_MODEL)

static char dir[64], data[128];
static uv_loop_t loop;
static uv_timer_t tick;
static ql_log_t log_;
static ql_config_t *cfg;
static ql_node_t *node;

typedef struct {
    int status;
    bool done;
    ql_id_t job;
} ack_t;

static ack_t acks[JOBS];

static void ack_cb(void *arg, const ql_submission_result_t *res) {
    ack_t *a = arg;
    a->status = res->status;
    if (res->status == 0 && res->n_jobs == 1)
        a->job = res->jobs[0];
    a->done = true;
}

static bool all_acked(const void *arg) {
    (void)arg;
    for (int i = 0; i < JOBS; i++)
        if (!acks[i].done)
            return false;
    return true;
}

static bool all_succeeded(const void *arg) {
    (void)arg;
    ql_txn_t *t;
    if (ql_txn_begin(ql_node_store(node), false, &t))
        return false;
    bool all = true;
    for (int i = 0; i < JOBS && all; i++) {
        ql_job_t j;
        all = ql_job_get(t, &acks[i].job, 0, &j) == 0 && j.state == QL_SUCCEED;
        if (all)
            ql_job_free(&j);
    }
    ql_txn_abort(t);
    return all;
}

static void teardown(void) {
    if (node)
        ql_test_node_stop(&loop, node, DEADLINE_MS);
    node = NULL;
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    ql_config_free(cfg);
    ql_test_rm_tree(dir);
}

/* The schema the node's store uses (ql_test_store_settings). */
static const char *schema_of(const char *data_dir) {
    const char *set[2];
    int n = ql_test_store_settings(data_dir, set);
    for (int i = 0; i < n; i++)
        if (strncmp(set[i], "qilin.storage.pg.schema=", 24) == 0)
            return set[i] + 24;
    cr_assert_fail("no schema for %s", data_dir);
    return NULL;
}

/* Runs fmt (with every %s the schema) on the tests' database. */
static void schema_sql(const char *schema, const char *fmt) {
    char sql[1024];
    size_t n = 0;
    for (const char *f = fmt; *f && n + QL_NAME_MAX + 1 < sizeof sql; f++) {
        if (f[0] == '%' && f[1] == 's') {
            n += (size_t)snprintf(sql + n, sizeof sql - n, "%s", schema);
            f++;
        } else {
            sql[n++] = *f;
        }
    }
    sql[n] = '\0';
    ql_test_pg_sql(sql, NULL, 0);
}

/* At every commit that wrote a job row: no more RUNNING jobs than LIMIT (2 is QL_RUNNING, 4 is
 * LIMIT: asserted below). A job's end makes its segment READY: slowing that update by 10 ms makes
 * a part of a split batch that ends jobs commit well after a part that only picks, as soon as
 * the two run on two lanes, which is the order the split must make harmless. */
static void add_running_cap(const char *schema) {
    cr_assert_eq((int)QL_RUNNING, 2);
    cr_assert_eq(LIMIT, 4);
    schema_sql(schema, "CREATE FUNCTION %s.qt_running_cap() RETURNS trigger LANGUAGE plpgsql AS "
                       "$$ BEGIN IF (SELECT count(*) FROM %s.jobs WHERE state = 2) > 4 THEN RAISE "
                       "EXCEPTION 'more RUNNING jobs than the limit'; END IF; RETURN NULL; END $$");
    schema_sql(schema, "CREATE CONSTRAINT TRIGGER qt_running_cap AFTER INSERT OR UPDATE ON %s.jobs "
                       "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "
                       "%s.qt_running_cap()");
    schema_sql(schema, "CREATE FUNCTION %s.qt_slow_end() RETURNS trigger LANGUAGE plpgsql AS $$ "
                       "BEGIN PERFORM pg_sleep(0.01); RETURN NEW; END $$");
    schema_sql(schema, "CREATE TRIGGER qt_slow_end BEFORE UPDATE ON %s.segments FOR EACH ROW "
                       "EXECUTE FUNCTION %s.qt_slow_end()");
}

static ql_id_t create_model(int i) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), true, &t), 0);
    ql_model_t m = {0};
    ql_store_new_id(ql_node_store(node), &m.id);
    snprintf(m.name, sizeof m.name, "m%d", i);
    snprintf(m.project, sizeof m.project, "p");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "dt");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    m.create_time = m.modify_time = BASE;
    cr_assert_eq(ql_model_put(t, &m), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return m.id;
}

static void start(const char *templates_yaml, const char *const *settings) {
    ql_test_tmpdir(dir, sizeof dir, "ql_sched_lanes");
    snprintf(data, sizeof data, "%s/data", dir);
    char path[256];
    snprintf(path, sizeof path, "%s/jobs.yaml", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(templates_yaml, f);
    fclose(f);
    cfg = ql_test_node_config(data, path, settings);
    cr_assert_eq(uv_loop_init(&loop), 0);
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, ql_test_tick_cb, 5, 5);
    ql_log_init(&log_, getenv("QL_TEST_DEBUG") ? QL_LOG_DEBUG : QL_LOG_ERROR);
    ql_node_opts_t no = {.config = cfg, .loop = &loop, .log = &log_};
    ql_err_t err = {0};
    cr_assert_eq(ql_node_start(&no, &node, &err), 0, "%s", err.msg);
    cr_assert(ql_node_is_master(node));
}

Test(sched_lanes, split_batches_never_show_more_running_jobs_than_the_limit, .fini = teardown,
     .timeout = 180) {
    ql_test_require_backend("pg");
    static const char *const set[] = {"kylin.job.max-concurrent-jobs=4",
                                      "qilin.storage.pg.writers=2", NULL};
    start("templates:\n"
          "  INC_BUILD:\n"
          "    steps:\n"
          "      - {name: build, kind: sleep, duration: 30ms}\n",
          set);
    cr_assert_eq(ql_writer_lanes(ql_node_writer(node)), 2u);
    add_running_cap(schema_of(data));

    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), true, &t), 0);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p");
    ql_err_t err = {0};
    cr_assert_eq(ql_meta_create_project(t, &p, BASE, &err), 0, "%s", err.msg);
    ql_project_free(&p);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_id_t models[MODELS];
    for (int i = 0; i < MODELS; i++)
        models[i] = create_model(i);

    /* Every build queued at once: the jobs that find no slot wait READY, and each end of a job
     * is written with the pick that takes its slot, in batches the lanes split. */
    for (int i = 0; i < JOBS; i++) {
        int64_t day = BASE + (int64_t)(i / MODELS) * DAY;
        ql_submission_req_t req = {.kind = QL_SUBMIT_BUILD,
                                   .model_id = &models[i % MODELS],
                                   .has_range = true,
                                   .start = day,
                                   .end = day + DAY,
                                   .priority = 3,
                                   .submitter = "ADMIN",
                                   .now = BASE};
        cr_assert_eq(ql_submission_submit(ql_node_submission(node), &req, ack_cb, &acks[i]), 0);
    }
    cr_assert(ql_test_drive_until(&loop, all_acked, NULL, DEADLINE_MS), "builds not acknowledged");
    for (int i = 0; i < JOBS; i++)
        cr_assert_eq(acks[i].status, 0, "build %d refused", i);
    cr_assert(ql_test_drive_until(&loop, all_succeeded, NULL, DEADLINE_MS),
              "not every job SUCCEEDed");

    ql_writer_stats_t st;
    ql_writer_get_stats(ql_node_writer(node), &st);
    cr_assert_eq(st.failed, 0,
                 "%llu mutations failed: a commit showed more RUNNING jobs than the limit",
                 (unsigned long long)st.failed);
    ql_sched_stats_t ss;
    ql_sched_get_stats(ql_node_sched(node), &ss);
    cr_assert_eq(ss.picked, JOBS, "every job picked once");
}

/* ---- the deal (no store) ---- */

/* A batch of ends (E: of a job that ends, e: of a step that is not the last) and picks (P),
 * dealt to n_parts parts; dest as a string of part numbers. */
static void dealt(const char *batch, size_t n_parts, char *out) {
    size_t n = strlen(batch), dest[32];
    cr_assert_leq(n, 32);
    static run_t runs[32];
    batch_ent_t e[32] = {{0}};
    memset(runs, 0, sizeof runs);
    for (size_t i = 0; i < n; i++) {
        runs[i].ending = batch[i] == 'E';
        e[i] =
            (batch_ent_t){&runs[i], batch[i] == 'P' ? ql_sched_pick_fn : ql_sched_finish_fn, NULL};
    }
    ql_sched_deal(e, n, n_parts, dest);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)('0' + dest[i]);
    out[n] = '\0';
}

#define DEALT(batch, parts, want)                                                                  \
    do {                                                                                           \
        char got[33];                                                                              \
        dealt(batch, parts, got);                                                                  \
        cr_assert_str_eq(got, want, "%s in %d parts", batch, parts);                               \
    } while (0)

Test(sched_deal, each_pick_goes_with_an_end_of_a_job_that_ends) {
    DEALT("EEPP", 2, "0101");
    DEALT("EEEPPP", 3, "012012");
}

Test(sched_deal, an_end_of_a_step_that_is_not_the_last_frees_no_slot) {
    /* Part 1's end frees nothing: both picks go with part 0's... one pairs, one is left over. */
    DEALT("EePP", 2, "0100");
}

Test(sched_deal, picks_left_over_are_dealt_in_turn) {
    /* More picks than ends that end: the first pair up, the rest take free slots, in turn. */
    DEALT("EPPPP", 2, "00010");
    DEALT("EEPPPP", 2, "010101");
}

Test(sched_deal, picks_alone_are_dealt_in_turn) {
    DEALT("PPPPP", 2, "01010");
}

Test(sched_deal, more_ends_than_parts_pair_with_their_parts) {
    /* Part 0 gets ends 0 and 2 (two that end), part 1 end 1: picks fill part 0's two first. */
    DEALT("EEEPPP", 2, "010001");
}

/* Ends of ending jobs of projects a and b, then picks of b and a (E then the project, P then
 * the project): each pick goes with the end of its own project's job, whose project slot the
 * fetcher may have given it (a project's own limit), not with the first part that has room. */
Test(sched_deal, a_pick_goes_with_an_end_of_its_own_project) {
    static run_t runs[4];
    memset(runs, 0, sizeof runs);
    const char *batch[] = {"Ea", "Eb", "Pb", "Pa"};
    batch_ent_t e[4];
    for (size_t i = 0; i < 4; i++) {
        runs[i].ending = batch[i][0] == 'E';
        snprintf(runs[i].project, sizeof runs[i].project, "%s", batch[i] + 1);
        e[i] = (batch_ent_t){&runs[i], batch[i][0] == 'P' ? ql_sched_pick_fn : ql_sched_finish_fn,
                             NULL};
    }
    size_t dest[4];
    ql_sched_deal(e, 4, 2, dest);
    cr_assert_eq(dest[0], 0);
    cr_assert_eq(dest[1], 1);
    cr_assert_eq(dest[2], 1, "b's pick goes with b's end");
    cr_assert_eq(dest[3], 0, "a's pick goes with a's end");
}
