/* The dispatcher's occurrence and target math (see ql_dispatch_time.h). */
#include "scheduler/ql_dispatch_time.h"

#include <stddef.h>

static int two_digits(const char *p) {
    if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9')
        return -1;
    return (p[0] - '0') * 10 + (p[1] - '0');
}

int ql_hms_parse(const char *s, bool allow_24, int *out_seconds) {
    if (s == NULL)
        return QL_EINVAL;
    /* Character by character, never strtol or sscanf: they accept spaces, signs and 1 digit. */
    for (int i = 0; i < 8; i++)
        if (s[i] == '\0')
            return QL_EINVAL;
    if (s[8] != '\0' || s[2] != ':' || s[5] != ':')
        return QL_EINVAL;
    int h = two_digits(s), m = two_digits(s + 3), sec = two_digits(s + 6);
    if (h < 0 || m < 0 || sec < 0)
        return QL_EINVAL;
    if (h == 24 && m == 0 && sec == 0 && allow_24) {
        *out_seconds = 86400;
        return 0;
    }
    if (h > 23 || m > 59 || sec > 59)
        return QL_EINVAL;
    *out_seconds = h * 3600 + m * 60 + sec;
    return 0;
}

/* Quotes at most 16 bytes of a user value in messages: enough to see the mistake. */
#define SHOW "'%.16s'"

static int time_field(const char *field, const char *value, bool allow_24, int *out,
                      ql_err_t *err) {
    if (value == NULL)
        return ql_err_set(err, QL_EINVAL, "field '%s': is required", field);
    if (ql_hms_parse(value, allow_24, out) != 0)
        return ql_err_set(err, QL_EINVAL,
                          "field '%s': " SHOW " is not a time HH:mm:ss (two digits each, "
                          "00:00:00..23:59:59%s)",
                          field, value, allow_24 ? ", or 24:00:00" : "");
    return 0;
}

int ql_auto_build_validate(bool enabled, const char *trigger, int64_t offset_days,
                           const char *start, const char *end, ql_auto_build_cfg_t *out,
                           ql_err_t *err) {
    ql_auto_build_cfg_t c = {.enabled = enabled};
    int rc = time_field("trigger_time", trigger, false, &c.trigger_sec, err);
    if (rc != 0)
        return rc;
    if (offset_days < 1 || offset_days > QL_AUTO_BUILD_MAX_OFFSET_DAYS)
        return ql_err_set(err, QL_EINVAL,
                          "field 'logical_date_offset_days': %lld is out of range (an integer "
                          "from 1 to %d)",
                          (long long)offset_days, QL_AUTO_BUILD_MAX_OFFSET_DAYS);
    c.offset_days = (int)offset_days;
    rc = time_field("data_range_start_time", start, false, &c.start_sec, err);
    if (rc != 0)
        return rc;
    rc = time_field("data_range_end_time", end, true, &c.end_sec, err);
    if (rc != 0)
        return rc;
    if (c.start_sec >= c.end_sec)
        return ql_err_set(err, QL_EINVAL,
                          "field 'data_range_start_time': start must be earlier than end "
                          "(data_range_start_time " SHOW ", data_range_end_time " SHOW ")",
                          start, end);
    *out = c;
    return 0;
}

/* The instant of date (time fields ignored) at sec seconds after its midnight, 0..86400. */
static int at_time(const ql_tz_t *tz, const ql_civil_t *date, int sec, int64_t *out) {
    ql_civil_t wall = *date;
    if (sec == 86400) {
        /* 24:00:00 is the next date's 00:00:00, itself resolved like any wall time. */
        int rc = ql_civil_add_days(date, 1, &wall);
        if (rc != 0)
            return rc;
        sec = 0;
    }
    wall.hour = sec / 3600;
    wall.minute = sec / 60 % 60;
    wall.second = sec % 60;
    wall.ms = 0;
    return ql_tz_from_civil(tz, &wall, out);
}

int ql_dispatch_occurrence(const ql_tz_t *tz, int64_t now_ms, int trigger_sec,
                           int64_t *occurrence_ms, ql_civil_t *occurrence_date) {
    if (tz == NULL || trigger_sec < 0 || trigger_sec > 86399)
        return QL_EINVAL;
    ql_civil_t today;
    ql_tz_to_civil(tz, now_ms, &today);
    today.hour = today.minute = today.second = today.ms = 0;
    int64_t at;
    int rc = at_time(tz, &today, trigger_sec, &at);
    if (rc != 0)
        return rc;
    ql_civil_t date = today;
    if (at > now_ms) {
        /* Not due yet today: yesterday's trigger, taken literally (see the header's note). */
        rc = ql_civil_add_days(&today, -1, &date);
        if (rc == 0)
            rc = at_time(tz, &date, trigger_sec, &at);
        if (rc != 0)
            return rc;
    }
    if (occurrence_ms)
        *occurrence_ms = at;
    if (occurrence_date)
        *occurrence_date = date;
    return 0;
}

int ql_dispatch_target(const ql_tz_t *tz, const ql_civil_t *occurrence_date,
                       const ql_auto_build_cfg_t *cfg, int64_t *start, int64_t *end) {
    if (tz == NULL || cfg == NULL || ql_civil_check(occurrence_date) != 0)
        return QL_EINVAL;
    if (cfg->offset_days < 1 || cfg->offset_days > QL_AUTO_BUILD_MAX_OFFSET_DAYS ||
        cfg->start_sec < 0 || cfg->start_sec > 86399 || cfg->end_sec <= cfg->start_sec ||
        cfg->end_sec > 86400)
        return QL_EINVAL;
    ql_civil_t logical;
    int rc = ql_civil_add_days(occurrence_date, -(int64_t)cfg->offset_days, &logical);
    if (rc != 0)
        return rc;
    int64_t s, e;
    rc = at_time(tz, &logical, cfg->start_sec, &s);
    if (rc == 0)
        rc = at_time(tz, &logical, cfg->end_sec, &e);
    if (rc != 0)
        return rc;
    *start = s;
    *end = e;
    return 0;
}
