/*
 * Retention (scheduler/ql_retention.h) on a real store and the virtual clock: final jobs whose
 * last change is older than the survival time are deleted in batches of `batch`, oldest first,
 * with their step logs; live jobs and younger jobs stay; the count is kept; a holding that lost
 * the lock (the fencing epoch moved) deletes nothing and stops. The writer is in manual mode
 * and the task flushes it, so each batch ends inside the clock's advance: no sleeps.
 */
#include "scheduler/ql_retention.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define H 3600000LL
#define DAY (24 * H)
#define NOW0 1788199200000LL /* 2026-09-01 10:00:00 +08:00 */
#define SURVIVAL (30 * DAY)

static char dir[4096];
static ql_store_t *store;
static ql_writer_t *writer;
static ql_clock_t *clk;
static ql_retention_t *ret;
static ql_id_t model;

static const ql_step_spec_t steps[1] = {{.name = "build", .kind = "noop"}};

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "qlretention");
    ql_test_store_open(dir, &store);
    ql_err_t err;
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m", &model, &err), 0, "%s", err.msg);
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(store, &wo, &writer), 0);
    cr_assert_eq(ql_clock_virtual_new(NOW0, &clk), 0);
}

static void teardown(void) {
    ql_retention_free(ret);
    ql_writer_free(writer);
    ql_clock_free(clk);
    ql_store_close(store);
}

TestSuite(retention, .init = setup, .fini = teardown);

/* A build of day `day` that ended (st) at `end`, with a log file; its id. */
static ql_id_t job_ended(int day, ql_state_t st, int64_t end) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "ADMIN", .now = end - H, .steps = steps, .n_steps = 1};
    ql_id_t job, seg;
    ql_err_t err;
    int64_t s = (int64_t)day * DAY;
    cr_assert_eq(ql_meta_submit_build(t, &model, s, s + DAY, &spec, &job, &seg, &err), 0, "%s",
                 err.msg);
    if (st != QL_READY) {
        ql_job_t j;
        cr_assert_eq(ql_job_get(t, &job, QL_DECODE_KEEP_EXTRA, &j), 0);
        cr_assert_eq(ql_meta_apply_job_outcome(t, &j, st, false, end), 0);
        j.state = st;
        j.end_time = j.modify_time = end;
        cr_assert_eq(ql_job_put(t, &j), 0);
        ql_job_free(&j);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    char id[QL_ID_STR_LEN + 1], path[8192];
    ql_id_format(&job, id);
    snprintf(path, sizeof path, "%s/logs", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/logs/%s", dir, id);
    cr_assert_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/logs/%s/%s_00.log", dir, id, id);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("step log\n", f);
    fclose(f);
    return job;
}

static bool exists(const ql_id_t *job) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    int rc = ql_job_get(t, job, 0, &j);
    ql_txn_abort(t);
    cr_assert(rc == 0 || rc == QL_ENOTFOUND, "%s", ql_strerror(rc));
    if (rc == 0)
        ql_job_free(&j);
    return rc == 0;
}

static bool has_logs(const ql_id_t *job) {
    char id[QL_ID_STR_LEN + 1], path[8192];
    ql_id_format(job, id);
    snprintf(path, sizeof path, "%s/logs/%s", dir, id);
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void start(size_t batch, uint64_t fence) {
    ql_retention_opts_t o = {.store = store,
                             .writer = writer,
                             .clock = clk,
                             .survival_ms = SURVIVAL,
                             .interval_ms = H,
                             .batch = batch,
                             .fence = fence,
                             .manual_flush = true};
    cr_assert_eq(ql_retention_new(&o, &ret), 0);
    ql_retention_start(ret);
}

static ql_retention_stats_t stats(void) {
    ql_retention_stats_t s;
    ql_retention_get_stats(ret, &s);
    return s;
}

Test(retention, old_final_jobs_go_in_batches_with_their_logs) {
    /* Five final jobs ended 40..36 days ago, one live job changed 50 days ago, one final job
     * ended 10 days ago. */
    ql_id_t old[5];
    for (int i = 0; i < 5; i++)
        old[i] = job_ended(i, i % 2 ? QL_DISCARDED : QL_SUCCEED, NOW0 - (40 - i) * DAY);
    ql_id_t live = job_ended(10, QL_READY, NOW0 - 50 * DAY);
    ql_id_t young = job_ended(11, QL_SUCCEED, NOW0 - 10 * DAY);

    start(2, 0);
    /* The first sweep starts at once: a batch of 2, then the next after the pause. */
    cr_assert_gt(ql_vclock_run_due(clk), 0);
    cr_assert_eq(stats().removed, 2);
    cr_assert_not(exists(&old[0]));
    cr_assert_not(exists(&old[1]));
    cr_assert(exists(&old[2]), "one batch at a time");
    cr_assert_not(has_logs(&old[0]));
    cr_assert(has_logs(&old[2]));
    ql_vclock_run_for(clk, QL_RETENTION_BATCH_PAUSE_MS, true);
    cr_assert_eq(stats().removed, 4);
    ql_vclock_run_for(clk, QL_RETENTION_BATCH_PAUSE_MS, true);
    cr_assert_eq(stats().removed, 5);
    cr_assert_eq(stats().sweeps, 1, "a batch short of full ends the sweep");
    cr_assert_eq(stats().batches, 3);
    for (int i = 0; i < 5; i++)
        cr_assert_not(exists(&old[i]));
    cr_assert(exists(&live), "a live job is never deleted, however old");
    cr_assert(exists(&young));
    cr_assert(has_logs(&young));

    /* Nothing more until the young job passes the threshold: 20 days on, at the next sweep. */
    ql_vclock_run_for(clk, 19 * DAY, true);
    cr_assert(exists(&young));
    ql_vclock_run_for(clk, 2 * DAY, true);
    cr_assert_not(exists(&young));
    cr_assert_not(has_logs(&young));
    cr_assert_eq(stats().removed, 6);
    cr_assert(exists(&live));
    ql_test_assert_fsck_clean(store);
}

Test(retention, a_stale_holding_deletes_nothing_and_stops) {
    ql_id_t old = job_ended(0, QL_SUCCEED, NOW0 - 40 * DAY);
    /* The holding's token is 1; another server took the lock since (epoch 2). */
    ql_txn_t *t;
    uint64_t e;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    start(10, 1);
    ql_vclock_run_due(clk);
    cr_assert(exists(&old));
    cr_assert(has_logs(&old));
    cr_assert_eq(stats().removed, 0);
    cr_assert_eq(stats().last_error, QL_EFENCED);
    cr_assert_eq(ql_vclock_next_due(clk), -1, "no further sweep is armed");
}

Test(retention, the_current_holding_deletes) {
    ql_id_t old = job_ended(0, QL_SUCCEED, NOW0 - 40 * DAY);
    ql_txn_t *t;
    uint64_t e;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    start(10, e);
    ql_vclock_run_due(clk);
    cr_assert_not(exists(&old));
    cr_assert_eq(stats().removed, 1);
    cr_assert_eq(stats().last_error, 0);
}

/* Freed while a batch waits in the writer: the batch's answer, which comes later, frees what is
 * left, and its deletions (checked under the fence) still remove the logs. */
Test(retention, freed_while_a_batch_is_in_the_writer) {
    ql_id_t old = job_ended(0, QL_SUCCEED, NOW0 - 40 * DAY);
    ql_retention_opts_t o = {.store = store,
                             .writer = writer,
                             .clock = clk,
                             .survival_ms = SURVIVAL,
                             .interval_ms = H,
                             .batch = 10};
    cr_assert_eq(ql_retention_new(&o, &ret), 0);
    ql_retention_start(ret);
    ql_vclock_run_due(clk);
    cr_assert(ql_writer_pending(writer), "the batch waits: nobody flushed");
    ql_retention_free(ret);
    ret = NULL;
    cr_assert_eq(ql_writer_flush(writer), 1);
    cr_assert_not(exists(&old));
    cr_assert_not(has_logs(&old));
    cr_assert_eq(ql_vclock_next_due(clk), -1, "nothing armed after the free");
}
