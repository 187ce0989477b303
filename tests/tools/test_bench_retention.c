/*
 * The retention benchmark (tools/bench_retention.c, docs/performance.md, Retention) at a small
 * size, so the tool cannot rot: a few models built daily for a few simulated months on the
 * virtual clock. With retention on, the job and step counts level off at about survival days x
 * models while the segments (READY segments are never deleted) keep growing one a model a day,
 * and fsck is clean at every sample; with retention off, the jobs grow with the segments.
 */
#include "tools/bench.h"

#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>

#define MODELS 4
#define SURVIVAL 10
#define DAYS 60

static char g_tmp[256];

static void setup(void) {
    ql_test_tmpdir(g_tmp, sizeof g_tmp, "ql-test-bench-ret");
}

static void teardown(void) {
    ql_test_rm_tree(g_tmp);
}

TestSuite(bench_retention, .init = setup, .fini = teardown, .timeout = 300);

static void run(bool retention, ql_bench_retention_result_t *r) {
    ql_bench_retention_opts_t o;
    ql_bench_retention_defaults(&o);
    o.models = MODELS;
    o.days = DAYS;
    o.sample_days = 5;
    o.survival_days = SURVIVAL;
    o.scan_interval_ms = 6 * 3600000;
    o.batch = 3; /* a day's deletions take more than one batch */
    o.retention = retention;
    o.map_size = 64ull << 20;
    o.dir = g_tmp;
    cr_assert_eq(ql_bench_retention_run(&o, r), 0, "%s", r->msg);
    cr_assert_eq(r->n_samples, DAYS / 5 + 1);
    for (size_t i = 0; i < r->n_samples; i++) {
        const ql_bench_retention_sample_t *s = &r->samples[i];
        cr_assert_eq(s->violations, 0, "day %d", s->day);
        cr_assert_eq(s->steps, s->jobs, "one noop step a job, day %d", s->day);
        /* A build a model a day, the first (yesterday's) at the first scan. */
        cr_assert_eq(s->segments, s->day ? (uint64_t)(s->day + 1) * MODELS : 0, "day %d", s->day);
        cr_assert_gt(s->used_bytes, 0);
    }
}

Test(bench_retention, jobs_level_off_at_survival_days_times_models) {
    ql_bench_retention_result_t r;
    run(true, &r);
    /* From a few days past the survival time on, the job count stays at survival x models
     * (one day's builds either side: the sweep is hourly, the builds at 01:00). */
    for (size_t i = 0; i < r.n_samples; i++) {
        const ql_bench_retention_sample_t *s = &r.samples[i];
        if (s->day < SURVIVAL + 3)
            continue;
        cr_assert_geq(s->jobs, (SURVIVAL - 1) * MODELS, "day %d: %llu jobs", s->day,
                      (unsigned long long)s->jobs);
        cr_assert_leq(s->jobs, (SURVIVAL + 1) * MODELS, "day %d: %llu jobs", s->day,
                      (unsigned long long)s->jobs);
        cr_assert_eq(s->removed + s->jobs, s->segments, "every build is kept or removed");
    }
    cr_assert_gt(r.removed, 0);
    cr_assert_gt(r.scan[1].n, 0, "some scans followed a retention batch");
    cr_assert_gt(r.scan[0].n, 0);
    ql_bench_retention_result_free(&r);
}

Test(bench_retention, without_retention_the_jobs_keep_growing) {
    ql_bench_retention_result_t r;
    run(false, &r);
    const ql_bench_retention_sample_t *last = &r.samples[r.n_samples - 1];
    cr_assert_eq(last->jobs, last->segments);
    cr_assert_eq(last->jobs, (DAYS + 1) * MODELS);
    cr_assert_eq(r.removed, 0);
    cr_assert_eq(r.scan[1].n, 0);
    ql_bench_retention_result_free(&r);
}
