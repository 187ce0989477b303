/*
 * The dispatcher's time math (docs/design/auto-segment-build.md, "One scan" steps 1 and 2): pure
 * functions of (time zone, now, configuration), so tests and the simulator call them directly.
 *
 * Local times resolve like java.time's LocalDateTime.atZone (see base/ql_time.h): a wall time
 * in a gap moves later by the gap, a repeated one takes the earlier instant. Thread-safe: no
 * state; a ql_tz_t may be shared between threads.
 */
#ifndef QL_DISPATCH_TIME_H
#define QL_DISPATCH_TIME_H

#include "base/ql_error.h"
#include "base/ql_time.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest accepted logical_date_offset_days (100 years): keeps every target inside the years a
 * partition date format supports. */
#define QL_AUTO_BUILD_MAX_OFFSET_DAYS 36500

/*
 * Parses a strict "HH:mm:ss": exactly 8 characters, two digits each, ':' separators, no spaces
 * or signs, 00:00:00..23:59:59; "24:00:00" (and nothing else past 23:59:59) only when allow_24
 * (data_range_end_time, midnight ending the day), giving 86400.
 * Returns 0 and the seconds since midnight in *out_seconds, or QL_EINVAL (s may be NULL).
 */
int ql_hms_parse(const char *s, bool allow_24, int *out_seconds);

/* A validated model auto_segment_build configuration, times in seconds since local midnight. */
typedef struct ql_auto_build_cfg {
    bool enabled;
    int trigger_sec; /* 0..86399 */
    int offset_days; /* 1..QL_AUTO_BUILD_MAX_OFFSET_DAYS */
    int start_sec;   /* 0..86399 */
    int end_sec;     /* 1..86400, > start_sec */
} ql_auto_build_cfg_t;

/*
 * Validates the stored fields of a model's auto_segment_build (every field is checked, whether
 * or not enabled is set: a config is stored only if it is valid). The strings are borrowed for
 * the call; NULL means the field is missing.
 * Returns 0 and *out, or QL_EINVAL with err (may be NULL) naming the first bad field in the
 * order trigger_time, logical_date_offset_days, data_range_start_time, data_range_end_time,
 * then "start must be earlier than end" under data_range_start_time.
 */
int ql_auto_build_validate(bool enabled, const char *trigger, int64_t offset_days,
                           const char *start, const char *end, ql_auto_build_cfg_t *out,
                           ql_err_t *err);

/*
 * The latest due occurrence (step 1): the local date of now_ms in tz at trigger_sec, resolved
 * like java.time, if that instant <= now_ms; else the previous local date's. Sets
 * *occurrence_ms to the occurrence instant and *occurrence_date to its local date (time fields
 * 0). Either output may be NULL.
 * Note: the rule is followed literally, so when the previous date's trigger falls in a gap that
 * reaches into today (a skipped day: Pacific/Apia 2011-12-30), "yesterday's" instant is moved
 * past now_ms too; the occurrence date is still that previous date, so its logical date is not
 * lost. Callers must not assume *occurrence_ms <= now_ms.
 * Returns 0, or QL_EINVAL if trigger_sec is outside 0..86399 or tz is NULL.
 */
int ql_dispatch_occurrence(const ql_tz_t *tz, int64_t now_ms, int trigger_sec,
                           int64_t *occurrence_ms, ql_civil_t *occurrence_date);

/*
 * The target range (step 2): logical date = occurrence_date - cfg->offset_days; start = logical
 * date at cfg->start_sec, end = logical date at cfg->end_sec (86400 = the next date at 00:00:00),
 * both resolved like java.time. The range is half-open [*start, *end) and may be empty when the
 * logical date was skipped (both ends resolve to the same instant); ql_normalize_range reports
 * that as QL_EEMPTYRANGE. Only the date fields of occurrence_date are used (its time fields
 * must still be valid).
 * Returns 0, or QL_EINVAL if occurrence_date or cfg is out of range.
 */
int ql_dispatch_target(const ql_tz_t *tz, const ql_civil_t *occurrence_date,
                       const ql_auto_build_cfg_t *cfg, int64_t *start, int64_t *end);

#ifdef __cplusplus
}
#endif

#endif
