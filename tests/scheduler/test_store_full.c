/*
 * A store that fills while steps run (the scheduler's side of a full map): a step's end that
 * cannot be written is kept in memory and written once there is room again, instead of leaving
 * the job RUNNING with no process until a restart.
 *
 * The scheduler runs on the virtual clock with a manual writer (as in test_sched.c) over a
 * store with a 1 MiB map. The map is filled for real (outputs of made-up jobs, written straight
 * through write transactions, from big to small values until even a small one does not fit),
 * behind some ballast: big outputs that are shrunk to one byte to give the room back, as
 * deleting old data would.
 */
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */
#define MAP_SIZE (1u << 20)
#define N_BALLAST 8
#define BALLAST_BYTES (40u << 10)

static const char yaml[] = "templates:\n"
                           "  INC_BUILD:\n"
                           "    steps:\n"
                           "      - {name: build, kind: sleep, duration: 5m}\n"
                           "      - {name: publish, kind: noop}\n";

typedef struct {
    char dir[64];
    ql_store_t *store;
    ql_templates_t *tpl;
    ql_writer_t *writer;
    ql_clock_t *clock;
    ql_sched_t *sched;
    ql_log_t log;
    ql_id_t model;
    ql_id_t ballast[N_BALLAST];
    ql_txn_t *pin; /* a read transaction held while the map is full, see fill_map */
    int failing_lines, recovered_lines, other_errors;
    char first_failing[1024];
} world_t;

static world_t w;

static void sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    if (getenv("QL_TEST_DEBUG"))
        fprintf(stderr, "%s\n", line);
    if (strstr(line, "store writes failing")) {
        if (!w.failing_lines++)
            snprintf(w.first_failing, sizeof w.first_failing, "%s", line);
    } else if (strstr(line, "store writes recovered")) {
        w.recovered_lines++;
    } else if (level >= QL_LOG_ERROR && strstr(line, "step's end")) {
        w.other_errors++;
    }
}

static int64_t log_now(void *arg) {
    (void)arg;
    return ql_clock_now_ms(w.clock);
}

static int put_output(const ql_id_t *job, size_t len) {
    char *text = malloc(len);
    cr_assert_not_null(text);
    memset(text, 'x', len);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, true, &t), 0);
    int rc = ql_output_put(t, job, 0, text, len);
    free(text);
    if (rc) {
        ql_txn_abort(t);
        return rc;
    }
    return ql_txn_commit(t);
}

/* Opens the world with the templates of tpl and the scheduler's global retry settings. */
static void open_world(const char *tpl, int retry, int64_t retry_interval_ms) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_storefull");
    ql_store_opts_t so = {.path = w.dir, .map_size = MAP_SIZE};
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &w.store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_templates_load_buffer(tpl, strlen(tpl), "jobs.yaml", &w.tpl, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_test_create_dt_model(w.store, "p", "m", BASE, &w.model, &err), 0, "%s",
                 err.msg);
    for (int i = 0; i < N_BALLAST; i++) {
        ql_store_new_id(w.store, &w.ballast[i]);
        cr_assert_eq(put_output(&w.ballast[i], BALLAST_BYTES), 0);
    }

    cr_assert_eq(ql_clock_virtual_new(BASE, &w.clock), 0);
    ql_log_init(&w.log, getenv("QL_TEST_DEBUG") ? QL_LOG_DEBUG : QL_LOG_INFO);
    w.log.sink = sink;
    w.log.now = log_now;
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(w.store, &wo, &w.writer), 0);
    ql_sched_opts_t o = {.store = w.store,
                         .writer = w.writer,
                         .clock = w.clock,
                         .log = &w.log,
                         .templates = w.tpl,
                         .max_concurrent_jobs = 1,
                         .retry = retry,
                         .retry_interval_ms = retry_interval_ms,
                         .poll_interval_ms = 30000};
    cr_assert_eq(ql_sched_new(&o, &w.sched), 0);
}

static void teardown(void) {
    if (!w.sched)
        return;
    ql_txn_abort(w.pin);
    ql_sched_free(w.sched);
    ql_writer_free(w.writer);
    ql_clock_free(w.clock);
    ql_templates_free(w.tpl);
    ql_store_close(w.store);
    ql_test_rm_tree(w.dir);
}

TestSuite(store_full, .fini = teardown, .timeout = 60);

/* Submits a build of day `day` through the writer; returns the job. */
static ql_id_t build(int day) {
    ql_submit_op_t op = {.kind = QL_SUBMIT_BUILD,
                         .templates = w.tpl,
                         .model = w.model,
                         .start = BASE + day * DAY,
                         .end = BASE + (day + 1) * DAY,
                         .priority = 3,
                         .now = ql_clock_now_ms(w.clock)};
    ql_err_t err = {0};
    cr_assert_eq(ql_writer_call(w.writer, ql_submit_fn, &op, &err), 0, "%s", err.msg);
    return op.job;
}

/* Fills the map: outputs of made-up jobs, each in its own commit, from 64 KiB down to 64 bytes,
 * until not even 64 bytes fit. Then a read transaction is held open, as a reader of the API
 * would: LMDB reuses the pages the last commits freed only once no reader can see them, so
 * without it a small change (a step's state) could still fit where a bigger one does not, and
 * which step end fails would depend on page counts. Returns how many outputs were written. */
static int fill_map(void) {
    int n = 0;
    for (size_t len = 64u << 10; len >= 64; len /= 2) {
        for (int i = 0; i < 100000; i++) {
            ql_id_t junk;
            ql_store_new_id(w.store, &junk);
            int rc = put_output(&junk, len);
            if (rc == QL_EMAPFULL)
                break;
            cr_assert_eq(rc, 0, "%s", ql_strerror(rc));
            n++;
        }
    }
    cr_assert_eq(ql_txn_begin(w.store, false, &w.pin), 0);
    return n;
}

/* Gives the room of the ballast back (each output shrunk to one byte, as deleting old data
 * would). */
static void free_ballast(void) {
    ql_txn_abort(w.pin);
    w.pin = NULL;
    for (int i = 0; i < N_BALLAST; i++)
        cr_assert_eq(put_output(&w.ballast[i], 1), 0, "ballast %d", i);
}

static ql_state_t job_state(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_state_t st = j.state;
    ql_job_free(&j);
    ql_txn_abort(t);
    return st;
}

static ql_step_t get_step(const ql_id_t *id, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, id, seq, &s), 0);
    ql_txn_abort(t);
    return s;
}

static void run_seconds(int n) {
    for (int i = 0; i < n; i++)
        ql_vclock_run_for(w.clock, 1000, true);
}

static unsigned running(void) {
    ql_sched_stats_t st;
    ql_sched_get_stats(w.sched, &st);
    return st.running;
}

/* The step of job that is RUNNING in the store: the one whose end is held. Which end is the
 * first not to fit depends on page counts (step 0's end changes two step records, step 1's also
 * the job's record and indexes), so the tests find it rather than assume it. */
static uint32_t held_step(const ql_id_t *job) {
    for (uint32_t seq = 0; seq < 2; seq++) {
        ql_step_t st = get_step(job, seq);
        ql_state_t state = st.state;
        ql_step_free(&st);
        if (state == QL_RUNNING)
            return seq;
    }
    cr_assert_fail("no step of the job is RUNNING");
    return 0;
}

/* Both steps end at 00:05 (the build takes 5 min, the publish no time): that is when the held
 * step ended, however much later its end is written. */
static void assert_step_ended(const ql_id_t *job, uint32_t seq) {
    ql_step_t st = get_step(job, seq);
    cr_assert_eq(st.state, QL_SUCCEED, "step %u is %s", seq, ql_state_name(st.state));
    cr_assert_eq(st.end_time, BASE + 300000, "step %u's end keeps the time it ended (+%lld ms)",
                 seq, (long long)(st.end_time - BASE));
    ql_step_free(&st);
}

Test(store_full, a_step_end_that_does_not_fit_is_kept_and_written_once_there_is_room) {
    open_world(yaml, 0, 0);
    ql_id_t job = build(0), next = build(1);
    ql_sched_start(w.sched);
    run_seconds(1);
    cr_assert_eq(job_state(&job), QL_RUNNING, "picked");
    cr_assert_eq(job_state(&next), QL_READY, "one job at a time");

    cr_assert_gt(fill_map(), 0);
    /* The 5 min step ends while the map is full; the end is retried for two more minutes. */
    run_seconds(300 + 120);
    cr_assert_eq(job_state(&job), QL_RUNNING, "its end could not be written");
    uint32_t held = held_step(&job);
    cr_assert_eq(running(), 1, "the scheduler still holds the job's run and its step's end");
    cr_assert_eq(job_state(&next), QL_READY, "no job was picked while the end is held");
    cr_assert_eq(w.failing_lines, 1, "one line for the run of failures (%d)", w.failing_lines);
    cr_assert(strstr(w.first_failing, "QL-00008"), "%s", w.first_failing);
    cr_assert(strstr(w.first_failing, "qilin.storage.map-size"), "%s", w.first_failing);
    cr_assert_eq(w.recovered_lines, 0);

    free_ballast();
    run_seconds(10);
    cr_assert_eq(job_state(&job), QL_SUCCEED, "the held end was written, and the job went on");
    assert_step_ended(&job, 0);
    assert_step_ended(&job, held);
    cr_assert_eq(w.recovered_lines, 1);
    cr_assert_eq(w.failing_lines, 1);
    cr_assert_eq(w.other_errors, 0, "no step end was given up");

    /* The fetcher goes on: the next job runs too. */
    run_seconds(310);
    cr_assert_eq(job_state(&next), QL_SUCCEED);
    cr_assert_eq(running(), 0);
}

static void set_flag(void *arg) {
    *(bool *)arg = true;
}

/* A stop does not wait for the backoff: the held end is written at once when there is room (a
 * job whose next step was to start goes back to READY, like any job a shutdown interrupts). */
Test(store_full, a_stop_writes_a_held_step_end_at_once) {
    open_world(yaml, 0, 0);
    ql_id_t job = build(0);
    ql_sched_start(w.sched);
    run_seconds(1);
    cr_assert_eq(job_state(&job), QL_RUNNING);
    cr_assert_gt(fill_map(), 0);
    run_seconds(300 + 60);
    cr_assert_eq(running(), 1, "the run is held with its step's end");
    cr_assert_eq(w.failing_lines, 1);
    cr_assert_eq(w.recovered_lines, 0, "the end is still held");
    uint32_t held = held_step(&job);

    free_ballast();
    bool stopped = false;
    ql_sched_stop(w.sched, true, 0, set_flag, &stopped);
    run_seconds(1); /* less than the backoff (5 s by now): only the stop can have written it */
    cr_assert(stopped, "the stop completed");
    assert_step_ended(&job, held);
    if (held == 0) {
        ql_step_t st = get_step(&job, 1);
        cr_assert_eq(st.state, QL_READY, "the next step did not start (%s)",
                     ql_state_name(st.state));
        ql_step_free(&st);
        cr_assert_eq(job_state(&job), QL_READY, "back to READY for the next start");
    } else {
        cr_assert_eq(job_state(&job), QL_SUCCEED, "the job's end was written by the stop");
    }
    cr_assert_eq(w.recovered_lines, 1);
}

/* A failed step's retry starts with a write too (the step READY -> RUNNING): held the same way,
 * so the job does not stay RUNNING with its step READY and nothing to start it. */
Test(store_full, a_retry_start_that_does_not_fit_is_kept_and_the_retry_runs_once_there_is_room) {
    static const char flaky[] = "templates:\n"
                                "  INC_BUILD:\n"
                                "    steps:\n"
                                "      - {name: flaky, kind: fail, sim_duration: 1s}\n";
    open_world(flaky, 1, 30000);
    ql_id_t job = build(0);
    ql_sched_start(w.sched);
    run_seconds(2); /* the first try failed at 00:00:01 and waits 30 s for its retry */
    ql_step_t st = get_step(&job, 0);
    cr_assert_eq(st.state, QL_READY, "waiting for its retry (%s)", ql_state_name(st.state));
    cr_assert_eq(st.attempts, 1);
    ql_step_free(&st);

    cr_assert_gt(fill_map(), 0);
    run_seconds(60);
    cr_assert_eq(running(), 1, "the run keeps its retry, whose start could not be written");
    cr_assert_eq(w.failing_lines, 1, "the retry's start failed");
    cr_assert_eq(job_state(&job), QL_RUNNING);

    free_ballast();
    run_seconds(10);
    cr_assert_eq(job_state(&job), QL_ERROR, "the retry ran (and failed too)");
    st = get_step(&job, 0);
    cr_assert_eq(st.attempts, 2, "one retry, as configured");
    ql_step_free(&st);
    cr_assert_eq(w.recovered_lines, 1);
    cr_assert_eq(running(), 0);
}
