/*
 * The dispatcher's pure decisions (scheduler/ql_dispatch.h): ql_dispatch_classify for every row
 * of the classification table and of the "Boundary behaviour" table of
 * docs/design/auto-segment-build.md, and ql_dispatch_eligibility for each skip reason and
 * their order.
 *
 * The target throughout is one day, [T0, T1); segments are given in the order a caller might
 * pass them, which is deliberately not always sorted (classification must not depend on it).
 */
#include "scheduler/ql_dispatch.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define H 3600000LL
#define DAY (24 * H)
/* The contract's worked example: [2026-08-31 00:00, 2026-09-01 00:00) Asia/Shanghai. */
#define T0 1788105600000LL
#define T1 (T0 + DAY)

static ql_dispatch_seg_t seg(int n, int64_t start, int64_t end, ql_seg_status_t status) {
    ql_dispatch_seg_t s = {.start = start, .end = end, .status = status, .job_state = QL_READY};
    s.id.b[15] = (uint8_t)n;
    return s;
}

static ql_dispatch_seg_t ready(int n, int64_t start, int64_t end) {
    return seg(n, start, end, QL_SEG_READY);
}

static ql_dispatch_seg_t warning(int n, int64_t start, int64_t end) {
    return seg(n, start, end, QL_SEG_WARNING);
}

/* A NEW segment owned by a non-final job in state js. */
static ql_dispatch_seg_t building(int n, int64_t start, int64_t end, ql_state_t js) {
    ql_dispatch_seg_t s = seg(n, start, end, QL_SEG_NEW);
    s.has_live_job = true;
    s.job_state = js;
    return s;
}

/* A NEW segment whose job is gone or final (an orphan). */
static ql_dispatch_seg_t orphan(int n, int64_t start, int64_t end) {
    return seg(n, start, end, QL_SEG_NEW);
}

/* The job of a NEW segment succeeded: the segment is READY now. */
static ql_dispatch_seg_t succeeded(ql_dispatch_seg_t s) {
    s.status = QL_SEG_READY;
    s.has_live_job = false;
    return s;
}

static void expect(const ql_dispatch_seg_t *segs, size_t n, ql_cycle_state_t want) {
    ql_cycle_state_t got = ql_dispatch_classify(T0, T1, segs, n);
    cr_assert_eq(got, want, "got %s, want %s", ql_cycle_state_name(got), ql_cycle_state_name(want));
}

#define EXPECT(want, ...)                                                                          \
    do {                                                                                           \
        const ql_dispatch_seg_t segs_[] = {__VA_ARGS__};                                           \
        expect(segs_, sizeof segs_ / sizeof segs_[0], (want));                                     \
    } while (0)

TestSuite(classify);

/* ---- COVERED ---- */

Test(classify, exact_ready_is_covered) {
    EXPECT(QL_CYCLE_COVERED, ready(1, T0, T1));
}

Test(classify, superset_ready_is_covered) {
    EXPECT(QL_CYCLE_COVERED, ready(1, T0 - DAY, T1 + DAY));
    /* A superset sharing one end covers too. */
    EXPECT(QL_CYCLE_COVERED, ready(1, T0, T1 + H));
    EXPECT(QL_CYCLE_COVERED, ready(1, T0 - H, T1));
}

Test(classify, adjacent_ready_pair_is_covered) {
    EXPECT(QL_CYCLE_COVERED, ready(1, T0, T0 + 6 * H), ready(2, T0 + 6 * H, T1));
    /* Given out of order, and with the pair reaching past both ends. */
    EXPECT(QL_CYCLE_COVERED, ready(2, T0 + 12 * H, T1 + DAY), ready(1, T0 - DAY, T0 + 12 * H));
    /* Three contiguous segments, unsorted. */
    EXPECT(QL_CYCLE_COVERED, ready(3, T0 + 16 * H, T1), ready(1, T0, T0 + 8 * H),
           ready(2, T0 + 8 * H, T0 + 16 * H));
}

Test(classify, warning_in_covering_set_is_covered_with_warning) {
    EXPECT(QL_CYCLE_COVERED_WITH_WARNING, warning(1, T0, T1));
    EXPECT(QL_CYCLE_COVERED_WITH_WARNING, ready(1, T0, T0 + 6 * H), warning(2, T0 + 6 * H, T1));
    EXPECT(QL_CYCLE_COVERED_WITH_WARNING, warning(1, T0 - DAY, T1 + DAY));
}

Test(classify, warning_outside_the_target_does_not_warn) {
    /* A WARNING segment that merely touches the target is not part of the covering set. */
    EXPECT(QL_CYCLE_COVERED, ready(1, T0, T1), warning(2, T1, T1 + DAY));
}

/* ---- IN_PROGRESS ---- */

Test(classify, exact_new_with_live_job_is_in_progress) {
    EXPECT(QL_CYCLE_IN_PROGRESS, building(1, T0, T1, QL_READY));
    EXPECT(QL_CYCLE_IN_PROGRESS, building(1, T0, T1, QL_PENDING));
    EXPECT(QL_CYCLE_IN_PROGRESS, building(1, T0, T1, QL_RUNNING));
    /* After its success: COVERED. */
    EXPECT(QL_CYCLE_COVERED, succeeded(building(1, T0, T1, QL_RUNNING)));
}

Test(classify, larger_new_is_in_progress_then_covered) {
    ql_dispatch_seg_t s = building(1, T0 - DAY, T1 + DAY, QL_RUNNING);
    EXPECT(QL_CYCLE_IN_PROGRESS, s);
    EXPECT(QL_CYCLE_COVERED, succeeded(s));
}

Test(classify, smaller_new_inside_is_in_progress_then_partial) {
    ql_dispatch_seg_t s = building(1, T0 + 6 * H, T0 + 12 * H, QL_PENDING);
    EXPECT(QL_CYCLE_IN_PROGRESS, s);
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, succeeded(s));
}

Test(classify, new_partly_intersecting_is_in_progress_then_partial) {
    ql_dispatch_seg_t before = building(1, T0 - 12 * H, T0 + 12 * H, QL_RUNNING);
    ql_dispatch_seg_t after = building(2, T0 + 12 * H, T1 + 12 * H, QL_READY);
    EXPECT(QL_CYCLE_IN_PROGRESS, before);
    EXPECT(QL_CYCLE_IN_PROGRESS, after);
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, succeeded(before));
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, succeeded(after));
}

/* ---- BLOCKED ---- */

Test(classify, error_or_paused_job_is_blocked) {
    EXPECT(QL_CYCLE_BLOCKED, building(1, T0, T1, QL_ERROR));
    EXPECT(QL_CYCLE_BLOCKED, building(1, T0, T1, QL_PAUSED));
    EXPECT(QL_CYCLE_BLOCKED, building(1, T0 + H, T0 + 2 * H, QL_PAUSED));
}

Test(classify, orphan_new_is_blocked) {
    EXPECT(QL_CYCLE_BLOCKED, orphan(1, T0, T1));
    EXPECT(QL_CYCLE_BLOCKED, orphan(1, T0 - H, T0 + H));
}

Test(classify, one_blocked_and_one_in_progress_is_blocked) {
    EXPECT(QL_CYCLE_BLOCKED, building(1, T0, T0 + 12 * H, QL_RUNNING),
           building(2, T0 + 12 * H, T1, QL_ERROR));
    /* Either order. */
    EXPECT(QL_CYCLE_BLOCKED, orphan(2, T0 + 12 * H, T1), building(1, T0, T0 + 12 * H, QL_READY));
}

Test(classify, blocked_over_partial) {
    /* A stopped build next to a READY part: BLOCKED wins over PARTIAL_OVERLAP. */
    EXPECT(QL_CYCLE_BLOCKED, ready(1, T0, T0 + 12 * H), building(2, T0 + 12 * H, T1, QL_PAUSED));
}

Test(classify, in_progress_over_partial) {
    EXPECT(QL_CYCLE_IN_PROGRESS, ready(1, T0, T0 + 12 * H),
           building(2, T0 + 12 * H, T1, QL_RUNNING));
}

/* ---- coverage first ---- */

Test(classify, coverage_before_in_progress) {
    /* READY covers, a NEW segment (a refresh, say) overlaps it: COVERED, nothing submitted. */
    EXPECT(QL_CYCLE_COVERED, ready(1, T0, T1), building(2, T0, T1, QL_RUNNING));
    EXPECT(QL_CYCLE_COVERED, building(2, T0 - DAY, T1 + DAY, QL_READY), ready(1, T0, T1));
    /* Even a blocked NEW segment does not matter once usable segments cover the target. */
    EXPECT(QL_CYCLE_COVERED, ready(1, T0, T1), building(2, T0, T1, QL_ERROR));
    EXPECT(QL_CYCLE_COVERED_WITH_WARNING, warning(1, T0, T1), orphan(2, T0, T1));
}

/* ---- PARTIAL_OVERLAP ---- */

Test(classify, ready_partial_is_partial_overlap) {
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, ready(1, T0, T0 + 12 * H));
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, ready(1, T0 + 12 * H, T1 + DAY));
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, ready(1, T0 - DAY, T1 - 1));
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, warning(1, T0 + 1, T1));
}

Test(classify, gap_between_ready_segments_is_partial_overlap) {
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, ready(1, T0, T0 + 6 * H), ready(2, T0 + 7 * H, T1));
    /* A one-millisecond hole is a hole. */
    EXPECT(QL_CYCLE_PARTIAL_OVERLAP, ready(2, T0 + 6 * H + 1, T1 + DAY),
           ready(1, T0 - DAY, T0 + 6 * H));
}

/* ---- NO_OVERLAP ---- */

Test(classify, touching_only_segments_do_not_overlap) {
    /* Half-open ranges: a segment ending at the target's start, or starting at its end, is
     * outside it, whatever its status. */
    EXPECT(QL_CYCLE_NO_OVERLAP, ready(1, T0 - DAY, T0));
    EXPECT(QL_CYCLE_NO_OVERLAP, ready(1, T1, T1 + DAY));
    EXPECT(QL_CYCLE_NO_OVERLAP, ready(1, T0 - DAY, T0), warning(2, T1, T1 + DAY));
    EXPECT(QL_CYCLE_NO_OVERLAP, building(1, T0 - DAY, T0, QL_RUNNING));
    EXPECT(QL_CYCLE_NO_OVERLAP, building(1, T1, T1 + DAY, QL_ERROR), orphan(2, T0 - DAY, T0));
}

Test(classify, nothing_is_no_overlap) {
    cr_assert_eq(ql_dispatch_classify(T0, T1, NULL, 0), QL_CYCLE_NO_OVERLAP);
}

Test(classify, disjoint_build_elsewhere_is_no_overlap) {
    /* Another build running on a disjoint range never blocks (boundary table). */
    EXPECT(QL_CYCLE_NO_OVERLAP, building(1, T0 - 2 * DAY, T0 - DAY, QL_RUNNING));
    EXPECT(QL_CYCLE_NO_OVERLAP, building(1, T1 + DAY, T1 + 2 * DAY, QL_PAUSED));
    EXPECT(QL_CYCLE_NO_OVERLAP, orphan(1, T1 + H, T1 + 2 * H));
}

/* ---- names ---- */

Test(classify, state_and_reason_names_round_trip) {
    for (int i = 1; i < QL_CYCLE_STATE_COUNT; i++) {
        ql_cycle_state_t s;
        cr_assert_eq(ql_cycle_state_parse(ql_cycle_state_name((ql_cycle_state_t)i), &s), 0);
        cr_assert_eq((int)s, i);
    }
    for (int i = 1; i < QL_SKIP_REASON_COUNT; i++) {
        ql_skip_reason_t r;
        cr_assert_eq(ql_skip_reason_parse(ql_skip_reason_name((ql_skip_reason_t)i), &r), 0);
        cr_assert_eq((int)r, i);
    }
    cr_assert_str_eq(ql_cycle_state_name(QL_CYCLE_COVERED_WITH_WARNING), "COVERED_WITH_WARNING");
    cr_assert_str_eq(ql_skip_reason_name(QL_SKIP_EMPTY_RANGE), "empty_range");
    ql_cycle_state_t s;
    cr_assert_eq(ql_cycle_state_parse("covered", &s), QL_EINVAL);
    cr_assert_eq(ql_cycle_state_parse("NONE", &s), QL_EINVAL);
}

/* ---- eligibility ---- */

static ql_project_t project_on(void) {
    ql_project_t p = {0};
    strcpy(p.name, "p");
    p.auto_segment_build_enabled = true;
    return p;
}

/* A healthy, eligible model: ONLINE batch, partitioned by day, a valid enabled config. */
static ql_model_t model_ok(void) {
    ql_model_t m = {0};
    strcpy(m.name, "m");
    strcpy(m.project, "p");
    m.status = QL_MODEL_ONLINE;
    m.type = QL_MODEL_BATCH;
    m.partitioned = true;
    strcpy(m.partition_column, "DT");
    strcpy(m.partition_format, "yyyy-MM-dd");
    m.auto_build.present = true;
    m.auto_build.enabled = true;
    strcpy(m.auto_build.trigger_time, "01:00:00");
    m.auto_build.logical_date_offset_days = 1;
    strcpy(m.auto_build.data_range_start_time, "00:00:00");
    strcpy(m.auto_build.data_range_end_time, "24:00:00");
    return m;
}

static ql_skip_reason_t elig(const ql_project_t *p, const ql_model_t *m, ql_err_t *err) {
    ql_auto_build_cfg_t cfg;
    ql_err_clear(err);
    return ql_dispatch_eligibility(p, m, &cfg, err);
}

#define EXPECT_SKIP(p, m, want)                                                                    \
    do {                                                                                           \
        ql_err_t e_;                                                                               \
        ql_skip_reason_t got_ = elig(&(p), &(m), &e_);                                             \
        cr_assert_eq(got_, (want), "got %s, want %s", ql_skip_reason_name(got_),                   \
                     ql_skip_reason_name(want));                                                   \
    } while (0)

Test(classify, eligible_model_gives_its_config) {
    ql_project_t p = project_on();
    ql_model_t m = model_ok();
    ql_auto_build_cfg_t cfg;
    ql_err_t err = {0};
    cr_assert_eq(ql_dispatch_eligibility(&p, &m, &cfg, &err), QL_SKIP_NONE);
    cr_assert(cfg.enabled);
    cr_assert_eq(cfg.trigger_sec, 3600);
    cr_assert_eq(cfg.offset_days, 1);
    cr_assert_eq(cfg.start_sec, 0);
    cr_assert_eq(cfg.end_sec, 86400);
}

Test(classify, offline_model_is_eligible) {
    ql_project_t p = project_on();
    ql_model_t m = model_ok();
    m.status = QL_MODEL_OFFLINE;
    EXPECT_SKIP(p, m, QL_SKIP_NONE);
}

Test(classify, each_skip_reason) {
    ql_project_t p = project_on();
    ql_model_t m = model_ok();

    ql_project_t off = p;
    off.auto_segment_build_enabled = false;
    EXPECT_SKIP(off, m, QL_SKIP_PROJECT_DISABLED);

    ql_model_t x = model_ok();
    x.status = QL_MODEL_BROKEN;
    EXPECT_SKIP(p, x, QL_SKIP_BROKEN);

    x = model_ok();
    x.type = QL_MODEL_STREAMING;
    EXPECT_SKIP(p, x, QL_SKIP_STREAMING);

    x = model_ok();
    x.partitioned = false;
    x.partition_column[0] = x.partition_format[0] = '\0';
    EXPECT_SKIP(p, x, QL_SKIP_FULL_LOAD);

    x = model_ok();
    char cols[] = "REGION,CHANNEL";
    x.multi_partition_columns = cols;
    EXPECT_SKIP(p, x, QL_SKIP_MULTI_PARTITION);

    x = model_ok();
    x.auto_build.enabled = false;
    EXPECT_SKIP(p, x, QL_SKIP_MODEL_DISABLED);

    x = model_ok();
    x.auto_build.present = false; /* no auto_segment_build config at all */
    EXPECT_SKIP(p, x, QL_SKIP_MODEL_DISABLED);
}

Test(classify, invalid_config_names_the_field) {
    ql_project_t p = project_on();
    static const struct {
        const char *trigger;
        int64_t offset;
        const char *start, *end;
        const char *field;
    } cases[] = {
        {"1:00:00", 1, "00:00:00", "24:00:00", "trigger_time"},
        {"24:00:00", 1, "00:00:00", "24:00:00", "trigger_time"},
        {"", 1, "00:00:00", "24:00:00", "trigger_time"},
        {"01:00:00", 0, "00:00:00", "24:00:00", "logical_date_offset_days"},
        {"01:00:00", INT64_MIN, "00:00:00", "24:00:00", "logical_date_offset_days"},
        {"01:00:00", 1, "00:00 :00", "24:00:00", "data_range_start_time"},
        {"01:00:00", 1, "24:00:00", "24:00:00", "data_range_start_time"},
        {"01:00:00", 1, "00:00:00", "24:00:01", "data_range_end_time"},
        {"01:00:00", 1, "12:00:00", "12:00:00", "data_range_start_time"}, /* start >= end */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ql_model_t m = model_ok();
        snprintf(m.auto_build.trigger_time, sizeof m.auto_build.trigger_time, "%s",
                 cases[i].trigger);
        m.auto_build.logical_date_offset_days = cases[i].offset;
        snprintf(m.auto_build.data_range_start_time, sizeof m.auto_build.data_range_start_time,
                 "%s", cases[i].start);
        snprintf(m.auto_build.data_range_end_time, sizeof m.auto_build.data_range_end_time, "%s",
                 cases[i].end);
        ql_err_t err;
        cr_assert_eq(elig(&p, &m, &err), QL_SKIP_INVALID_CONFIG, "case %zu", i);
        cr_assert_not_null(strstr(err.msg, cases[i].field), "case %zu: '%s' should name %s", i,
                           err.msg, cases[i].field);
    }
}

Test(classify, skip_reasons_in_priority_order) {
    /* Start with every reason at once and remove them one by one, from the first of the spec's
     * order: each time the next one is reported. */
    ql_project_t p = project_on();
    p.auto_segment_build_enabled = false;
    ql_model_t m = model_ok();
    char cols[] = "REGION";
    m.status = QL_MODEL_BROKEN;
    m.type = QL_MODEL_STREAMING;
    m.partitioned = false;
    m.multi_partition_columns = cols;
    m.auto_build.enabled = false;
    strcpy(m.auto_build.trigger_time, "25:00:00");

    EXPECT_SKIP(p, m, QL_SKIP_PROJECT_DISABLED);
    p.auto_segment_build_enabled = true;
    EXPECT_SKIP(p, m, QL_SKIP_BROKEN);
    m.status = QL_MODEL_OFFLINE; /* offline is not a reason */
    EXPECT_SKIP(p, m, QL_SKIP_STREAMING);
    m.type = QL_MODEL_BATCH;
    EXPECT_SKIP(p, m, QL_SKIP_FULL_LOAD);
    m.partitioned = true;
    EXPECT_SKIP(p, m, QL_SKIP_MULTI_PARTITION);
    m.multi_partition_columns = NULL;
    EXPECT_SKIP(p, m, QL_SKIP_MODEL_DISABLED);
    m.auto_build.enabled = true;
    EXPECT_SKIP(p, m, QL_SKIP_INVALID_CONFIG);
    strcpy(m.auto_build.trigger_time, "01:00:00");
    EXPECT_SKIP(p, m, QL_SKIP_NONE);
}

Test(classify, project_disabled_leaves_the_model_untouched) {
    /* Eligibility only reads: the model's config is exactly as it was. */
    ql_project_t p = project_on();
    p.auto_segment_build_enabled = false;
    ql_model_t m = model_ok(), before = model_ok();
    ql_err_t err;
    cr_assert_eq(elig(&p, &m, &err), QL_SKIP_PROJECT_DISABLED);
    cr_assert_eq(memcmp(&m.auto_build, &before.auto_build, sizeof m.auto_build), 0);
}
