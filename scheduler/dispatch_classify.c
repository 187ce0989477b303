/* The dispatcher's pure decisions: names, eligibility, classification. */
#include "scheduler/ql_dispatch.h"

#include <string.h>

static const char *const state_names[QL_CYCLE_STATE_COUNT] = {
    "NONE",       "COVERED",   "COVERED_WITH_WARNING", "IN_PROGRESS", "BLOCKED", "PARTIAL_OVERLAP",
    "NO_OVERLAP", "SUBMITTED", "RETRYABLE_FAILURE",    "SKIPPED",
};

static const char *const reason_names[QL_SKIP_REASON_COUNT] = {
    "",
    "project_disabled",
    "broken",
    "streaming",
    "full_load",
    "multi_partition",
    "model_disabled",
    "invalid_config",
    "empty_range",
};

const char *ql_cycle_state_name(ql_cycle_state_t s) {
    return (unsigned)s < QL_CYCLE_STATE_COUNT ? state_names[s] : "UNKNOWN";
}

int ql_cycle_state_parse(const char *name, ql_cycle_state_t *out) {
    for (int i = 1; i < QL_CYCLE_STATE_COUNT; i++)
        if (strcmp(name, state_names[i]) == 0) {
            *out = (ql_cycle_state_t)i;
            return 0;
        }
    return QL_EINVAL;
}

const char *ql_skip_reason_name(ql_skip_reason_t r) {
    return (unsigned)r < QL_SKIP_REASON_COUNT ? reason_names[r] : "unknown";
}

int ql_skip_reason_parse(const char *name, ql_skip_reason_t *out) {
    for (int i = 1; i < QL_SKIP_REASON_COUNT; i++)
        if (strcmp(name, reason_names[i]) == 0) {
            *out = (ql_skip_reason_t)i;
            return 0;
        }
    return QL_EINVAL;
}

ql_skip_reason_t ql_dispatch_eligibility(const ql_project_t *p, const ql_model_t *m,
                                         ql_auto_build_cfg_t *cfg, ql_err_t *err) {
    if (!p->auto_segment_build_enabled)
        return QL_SKIP_PROJECT_DISABLED;
    if (m->status == QL_MODEL_BROKEN)
        return QL_SKIP_BROKEN;
    if (m->type == QL_MODEL_STREAMING)
        return QL_SKIP_STREAMING;
    if (!m->partitioned)
        return QL_SKIP_FULL_LOAD;
    if (m->multi_partition_columns)
        return QL_SKIP_MULTI_PARTITION;
    const ql_auto_build_t *a = &m->auto_build;
    if (!a->present || !a->enabled)
        return QL_SKIP_MODEL_DISABLED;
    if (ql_auto_build_validate(a->enabled, a->trigger_time, a->logical_date_offset_days,
                               a->data_range_start_time, a->data_range_end_time, cfg, err))
        return QL_SKIP_INVALID_CONFIG;
    return QL_SKIP_NONE;
}

ql_cycle_state_t ql_dispatch_classify(int64_t start, int64_t end, const ql_dispatch_seg_t *segs,
                                      size_t n) {
    /* Coverage first: usable (READY/WARNING) segments covering [start, end) with no gap. Walk
     * them in start order; n is small, so repeated minimum search keeps this allocation-free. */
    int64_t covered_to = start;
    bool warned = false, progress = true;
    while (progress && covered_to < end) {
        progress = false;
        /* Stop as soon as the target is covered: a segment touching its end is not part of the
         * covering set (a WARNING one there must not warn). */
        for (size_t i = 0; i < n && covered_to < end; i++) {
            const ql_dispatch_seg_t *s = &segs[i];
            if (s->status == QL_SEG_NEW || s->start > covered_to || s->end <= covered_to)
                continue;
            covered_to = s->end;
            warned |= s->status == QL_SEG_WARNING;
            progress = true;
        }
    }
    if (covered_to >= end)
        return warned ? QL_CYCLE_COVERED_WITH_WARNING : QL_CYCLE_COVERED;

    bool blocked = false, in_progress = false, usable = false;
    for (size_t i = 0; i < n; i++) {
        const ql_dispatch_seg_t *s = &segs[i];
        if (s->end <= start || s->start >= end)
            continue;
        if (s->status != QL_SEG_NEW) {
            usable = true;
        } else if (!s->has_live_job || s->job_state == QL_ERROR || s->job_state == QL_PAUSED) {
            blocked = true; /* orphan, or its build stopped */
        } else {
            in_progress = true;
        }
    }
    if (blocked)
        return QL_CYCLE_BLOCKED;
    if (in_progress)
        return QL_CYCLE_IN_PROGRESS;
    if (usable)
        return QL_CYCLE_PARTIAL_OVERLAP;
    return QL_CYCLE_NO_OVERLAP;
}
