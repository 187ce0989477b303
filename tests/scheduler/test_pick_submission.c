/*
 * A submission picked in its own write transaction (docs/design/jobs.md, The scheduler; the
 * submission service's picker, ql_submission.h; ql_sched_claim in ql_sched.h): the scheduler
 * on the virtual clock with a manual writer, the submission service over the same writer, its
 * picker hook naming the scheduler (a master) or nothing (a standby). Each submission is
 * flushed alone, so its answer comes from its own commit: what the store holds then is what
 * that one transaction wrote. The job's step sleeps 5 minutes of virtual time, so a picked job
 * stays RUNNING while the clock runs the fetcher's passes (kicks and polls) after it.
 *
 * On both store backends (also run as @pg): the pick goes through the store API only.
 */
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submission.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

static const char yaml[] = "templates:\n"
                           "  INC_BUILD:\n"
                           "    steps:\n"
                           "      - {name: build, kind: sleep, duration: 5m}\n"
                           "      - {name: publish, kind: noop}\n";

/* What a submission's answer saw in the store, at its answer. */
typedef struct seen {
    int calls;
    int status;
    ql_err_t err;
    ql_id_t job;
    ql_state_t state;      /* the job's stored state */
    ql_state_t step_state; /* its first step's */
    int starts;            /* steps started by then */
} seen_t;

static struct {
    char dir[64];
    ql_store_t *store;
    ql_templates_t *tpl;
    ql_writer_t *writer;
    ql_clock_t *clock;
    ql_sched_t *sched;
    ql_submission_t *svc;
    ql_sched_t *picker; /* what the picker hook answers: the master's scheduler, or NULL */
    ql_id_t model;
    ql_id_t starts[16]; /* jobs whose step 0 started, in order */
    int n_starts;
    int n_fenced;
    int wakes; /* the submission service's wake-ups of the fetcher */
} w;

static void start_hook(void *arg, const ql_id_t *job, uint32_t seq) {
    (void)arg;
    if (seq == 0 && w.n_starts < 16)
        w.starts[w.n_starts++] = *job;
}

static void wake(void *arg) {
    (void)arg;
    w.wakes++;
}

static ql_sched_t *picker(void *arg) {
    (void)arg;
    return w.picker;
}

static void on_fenced(void *arg) {
    (void)arg;
    w.n_fenced++;
}

static uint64_t raise_epoch(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, true, &t), 0);
    uint64_t e = 0;
    cr_assert_eq(ql_fence_raise(t, &e), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return e;
}

/* A master's scheduler (fencing token 1, max_concurrent jobs at once), started: its first
 * fetch is due at the clock's next turn, which no test lets come before its first submission. */
static void open_world(int max_concurrent) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_picksub");
    ql_store_opts_t so;
    ql_test_store_opts(w.dir, &so);
    so.map_size = 64u << 20;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &w.store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_templates_load_buffer(yaml, strlen(yaml), "jobs.yaml", &w.tpl, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_test_create_dt_model(w.store, "p", "m", BASE, &w.model, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(raise_epoch(), 1, "this scheduler's holding");
    cr_assert_eq(ql_clock_virtual_new(BASE + 10 * DAY, &w.clock), 0);
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(w.store, &wo, &w.writer), 0);
    ql_sched_opts_t o = {.store = w.store,
                         .writer = w.writer,
                         .clock = w.clock,
                         .templates = w.tpl,
                         .max_concurrent_jobs = max_concurrent,
                         .poll_interval_ms = 1000,
                         .fence = 1,
                         .on_fenced = on_fenced};
    cr_assert_eq(ql_sched_new(&o, &w.sched), 0);
    ql_sched_set_step_start_hook(w.sched, start_hook, NULL);
    ql_submission_opts_t so2 = {.writer = w.writer,
                                .templates = w.tpl,
                                .server_timezone = "UTC",
                                .wake = wake,
                                .picker = picker,
                                .picker_arg = NULL};
    cr_assert_eq(ql_submission_new(&so2, &w.svc), 0);
    w.picker = w.sched;
    ql_sched_start(w.sched);
}

static void close_world(void) {
    ql_sched_free(w.sched);
    ql_writer_free(w.writer);
    ql_submission_free(w.svc);
    ql_clock_free(w.clock);
    ql_templates_free(w.tpl);
    ql_store_close(w.store);
    ql_test_rm_tree(w.dir);
}

static ql_job_t get_job(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

static ql_step_t get_step(const ql_id_t *id, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, id, seq, &s), 0);
    ql_txn_abort(t);
    return s;
}

static void done_cb(void *arg, const ql_submission_result_t *r) {
    seen_t *s = arg;
    s->calls++;
    s->status = r->status;
    s->starts = w.n_starts;
    if (r->status) {
        s->err = *r->err;
        return;
    }
    cr_assert_eq(r->n_jobs, 1);
    s->job = r->jobs[0];
    ql_job_t j = get_job(&s->job);
    s->state = j.state;
    ql_job_free(&j);
    ql_step_t st = get_step(&s->job, 0);
    s->step_state = st.state;
    ql_step_free(&st);
}

/* Submits a build of day `day` at priority and commits it alone (one flush, one transaction):
 * the answer is that commit's. */
static seen_t submit(int day, int priority) {
    ql_submission_req_t req = {.kind = QL_SUBMIT_BUILD,
                               .project = "p",
                               .model = "m",
                               .has_range = true,
                               .start = BASE + day * DAY,
                               .end = BASE + (day + 1) * DAY,
                               .priority = priority,
                               .now = ql_clock_now_ms(w.clock)};
    seen_t s = {0};
    cr_assert_eq(ql_submission_submit(w.svc, &req, done_cb, &s), 0);
    cr_assert_eq(ql_writer_flush(w.writer), 1, "the submission is the one write queued");
    cr_assert_eq(s.calls, 1);
    return s;
}

/* A job created READY behind the scheduler's back (its fetcher not run yet). */
static ql_id_t ready_job(int day, int priority, int64_t now) {
    ql_submit_op_t op = {.kind = QL_SUBMIT_BUILD,
                         .templates = w.tpl,
                         .model = w.model,
                         .start = BASE + day * DAY,
                         .end = BASE + (day + 1) * DAY,
                         .priority = priority,
                         .now = now};
    ql_err_t err = {0};
    cr_assert_eq(ql_writer_call(w.writer, ql_submit_fn, &op, &err), 0, "%s", err.msg);
    return op.job;
}

static unsigned running(void) {
    ql_sched_stats_t st;
    ql_sched_get_stats(w.sched, &st);
    return st.running;
}

static uint64_t picked(void) {
    ql_sched_stats_t st;
    ql_sched_get_stats(w.sched, &st);
    return st.picked;
}

/* Lets the clock run the fetcher's kicks and polls for ms (the steps sleep 5 minutes). */
static void run_clock(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 100)
        ql_vclock_run_for(w.clock, 100, true);
}

TestSuite(pick_submission, .timeout = 60);

Test(pick_submission, an_idle_masters_submission_is_running_after_its_own_commit) {
    open_world(4);
    int64_t t0 = ql_clock_now_ms(w.clock);
    seen_t s = submit(0, 2);
    cr_assert_eq(s.status, 0, "%s", s.err.msg);
    cr_assert_eq(s.state, QL_RUNNING, "RUNNING after the submission's own commit, got %s",
                 ql_state_name(s.state));
    cr_assert_eq(s.step_state, QL_RUNNING);
    cr_assert_eq(s.starts, 1, "its step started before the answer, with no fetcher pass");
    cr_assert(ql_id_eq(&w.starts[0], &s.job));
    ql_job_t j = get_job(&s.job);
    cr_assert_eq(j.create_time, t0);
    cr_assert_eq(j.start_time, t0, "started at the pick");
    cr_assert_eq(j.modify_time, t0);
    cr_assert_eq(j.fence, 1, "written under the master's token");
    ql_job_free(&j);
    ql_step_t st = get_step(&s.job, 0);
    cr_assert_eq(st.attempts, 1);
    cr_assert_eq(st.start_time, t0);
    ql_step_free(&st);
    cr_assert_eq(picked(), 1);
    cr_assert_eq(running(), 1);
    cr_assert_eq(w.wakes, 0, "nothing new for the fetcher to look for");

    /* The fetcher's passes after it (the kick due, ten polls) find nothing to pick. */
    run_clock(10000);
    cr_assert_eq(picked(), 1, "the fetcher did not pick it again");
    cr_assert_eq(w.n_starts, 1);
    cr_assert_eq(running(), 1);
    close_world();
}

/* The same job picked by a fetcher pass records the same: states, times, token, step. */
Test(pick_submission, records_what_a_fetcher_pick_records) {
    open_world(4);
    int64_t t0 = ql_clock_now_ms(w.clock);
    w.picker = NULL;
    seen_t a = submit(0, 2);
    cr_assert_eq(a.state, QL_READY);
    ql_vclock_run_for(w.clock, 0, true); /* the fetcher's kick, at the same instant */
    cr_assert_eq(w.n_starts, 1, "the fetcher picked it");
    w.picker = w.sched;
    seen_t b = submit(1, 2);
    cr_assert_eq(b.state, QL_RUNNING);
    cr_assert_eq(w.n_starts, 2);
    ql_job_t ja = get_job(&a.job), jb = get_job(&b.job);
    cr_assert_eq(ja.state, jb.state);
    cr_assert_eq(ja.start_time, t0);
    cr_assert_eq(jb.start_time, ja.start_time);
    cr_assert_eq(jb.modify_time, ja.modify_time);
    cr_assert_eq(jb.end_time, ja.end_time);
    cr_assert_eq(jb.fence, ja.fence);
    ql_job_free(&ja);
    ql_job_free(&jb);
    for (uint32_t i = 0; i < 2; i++) {
        ql_step_t sa = get_step(&a.job, i), sb = get_step(&b.job, i);
        cr_assert_eq(sa.state, sb.state, "step %u", i);
        cr_assert_eq(sa.attempts, sb.attempts, "step %u", i);
        cr_assert_eq(sa.start_time, sb.start_time, "step %u", i);
        cr_assert_str_eq(sa.server_id, sb.server_id);
        ql_step_free(&sa);
        ql_step_free(&sb);
    }
    cr_assert_eq(picked(), 2);
    close_world();
}

Test(pick_submission, a_submission_at_full_capacity_stays_ready) {
    open_world(2);
    cr_assert_eq(submit(0, 2).state, QL_RUNNING);
    cr_assert_eq(submit(1, 2).state, QL_RUNNING);
    seen_t s = submit(2, 2);
    cr_assert_eq(s.status, 0, "%s", s.err.msg);
    cr_assert_eq(s.state, QL_READY, "no room: it waits, got %s", ql_state_name(s.state));
    cr_assert_eq(s.step_state, QL_READY);
    cr_assert_eq(w.n_starts, 2);
    cr_assert_eq(running(), 2, "the slots are exactly the two jobs'");
    cr_assert_eq(w.wakes, 1, "the job left READY wakes the fetcher");
    run_clock(10000);
    cr_assert_eq(running(), 2, "never more than max-concurrent-jobs");
    ql_job_t j = get_job(&s.job);
    cr_assert_eq(j.state, QL_READY);
    ql_job_free(&j);
    close_world();
}

/* A project's own kylin.job.max-concurrent-jobs limits its picks in submission as the
 * fetcher's (pick_policy.h, rule 5). */
Test(pick_submission, a_submission_beyond_its_projects_limit_stays_ready) {
    open_world(4);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, true, &t), 0);
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "p", 0, &p), 0);
    cr_assert_eq(ql_strmap_set(&p.config, "kylin.job.max-concurrent-jobs", "1"), 0);
    cr_assert_eq(ql_project_put(t, &p), 0);
    ql_project_free(&p);
    cr_assert_eq(ql_txn_commit(t), 0);
    cr_assert_eq(submit(0, 2).state, QL_RUNNING);
    seen_t s = submit(1, 2);
    cr_assert_eq(s.status, 0, "%s", s.err.msg);
    cr_assert_eq(s.state, QL_READY, "its project runs its one job already");
    cr_assert_eq(running(), 1);
    run_clock(10000);
    cr_assert_eq(running(), 1, "nor does the fetcher start it");
    close_world();
}

/* The pick policy's order holds: an older READY job goes first, so the new one waits with it;
 * a job of a lower priority does not come first, so the new one goes. */
Test(pick_submission, a_submission_behind_an_older_ready_job_stays_ready) {
    open_world(4);
    int64_t now = ql_clock_now_ms(w.clock);
    ql_id_t older = ready_job(0, 2, now - 1000);
    seen_t s = submit(1, 2);
    cr_assert_eq(s.status, 0, "%s", s.err.msg);
    cr_assert_eq(s.state, QL_READY, "an older READY job comes first, got %s",
                 ql_state_name(s.state));
    cr_assert_eq(w.n_starts, 0);
    cr_assert_eq(running(), 0, "the slot went back");
    ql_vclock_run_for(w.clock, 0, true); /* the fetcher: both, the older first */
    cr_assert_eq(w.n_starts, 2);
    cr_assert(ql_id_eq(&w.starts[0], &older));
    cr_assert(ql_id_eq(&w.starts[1], &s.job));

    ql_id_t low = ready_job(2, 4, now - 1000);
    seen_t urgent = submit(3, 0);
    cr_assert_eq(urgent.state, QL_RUNNING, "a priority 4 job does not come before a 0 one");
    ql_job_t j = get_job(&low);
    cr_assert_eq(j.state, QL_READY);
    ql_job_free(&j);
    close_world();
}

/* A standby (the picker names no scheduler) and a master that may not pick now (fetching
 * paused: suspended, demoting, fenced) leave every submission READY. */
Test(pick_submission, a_standby_or_a_paused_master_never_picks_in_submission) {
    open_world(4);
    w.picker = NULL;
    seen_t s = submit(0, 2);
    cr_assert_eq(s.status, 0, "%s", s.err.msg);
    cr_assert_eq(s.state, QL_READY);
    cr_assert_eq(w.n_starts, 0);

    /* The same server's scheduler, paused: no pick, and its first pass is not run here. (At
     * priority 0, the READY job above does not come before it.) */
    w.picker = w.sched;
    ql_sched_pause_fetching(w.sched);
    seen_t p = submit(1, 0);
    cr_assert_eq(p.state, QL_READY);
    cr_assert_eq(w.n_starts, 0);
    cr_assert_eq(running(), 0);
    close_world();
}

/* Another server took the lock (the epoch moved past the token): the build is still accepted
 * and committed READY, for the new holder; only the pick is left out, and this scheduler stops
 * fetching as it does when a fetcher's pick is refused. */
Test(pick_submission, a_lost_fencing_token_keeps_the_submission_and_skips_the_pick) {
    open_world(4);
    cr_assert_eq(raise_epoch(), 2, "another server took the lock");
    seen_t s = submit(0, 2);
    cr_assert_eq(s.status, 0, "the submission must not fail: %s", s.err.msg);
    cr_assert_eq(s.state, QL_READY);
    cr_assert_eq(s.step_state, QL_READY);
    cr_assert_eq(w.n_starts, 0);
    ql_job_t j = get_job(&s.job);
    cr_assert_eq(j.fence, 0, "nothing written under the stale token");
    cr_assert_eq(j.start_time, 0);
    ql_job_free(&j);
    cr_assert_eq(w.n_fenced, 1, "the owner is told");
    cr_assert_not(ql_sched_is_fetching(w.sched));
    cr_assert_eq(running(), 0, "the slot went back");
    close_world();
}

/* A submission the store refuses (an overlapping build) gives its slot back. */
Test(pick_submission, a_refused_submission_gives_its_slot_back) {
    open_world(2);
    cr_assert_eq(submit(0, 2).state, QL_RUNNING);
    seen_t s = submit(0, 2);
    cr_assert_neq(s.status, 0, "the same range again is refused");
    cr_assert_eq(running(), 1);
    cr_assert_eq(submit(1, 2).state, QL_RUNNING, "the second slot is free");
    cr_assert_eq(running(), 2);
    close_world();
}
