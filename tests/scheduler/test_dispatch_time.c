/*
 * The dispatcher's time math (scheduler/ql_dispatch_time.h): strict HH:mm:ss, config
 * validation, latest due occurrence and target range. Expected instants were computed with
 * java.time (OpenJDK 17, tzdata 2025a): LocalDateTime.of(...).atZone(zone).
 */
#include "base/ql_datefmt.h"
#include "base/ql_error.h"
#include "base/ql_time.h"
#include "scheduler/ql_dispatch_time.h"

#include <criterion/criterion.h>
#include <string.h>

#define H 3600000LL
#define DAY (24 * H)

static ql_tz_t *load(const char *name) {
    ql_tz_t *tz = NULL;
    cr_assert_eq(ql_tz_load(name, &tz), 0, "load %s", name);
    return tz;
}

static void assert_date(const ql_civil_t *c, int64_t y, int mo, int d) {
    cr_assert(c->year == y && c->month == mo && c->day == d && c->hour == 0 && c->minute == 0 &&
                  c->second == 0 && c->ms == 0,
              "got %lld-%02d-%02d %02d:%02d:%02d.%03d, want %lld-%02d-%02d", (long long)c->year,
              c->month, c->day, c->hour, c->minute, c->second, c->ms, (long long)y, mo, d);
}

/* Occurrence for (zone, now, trigger "HH:mm:ss"). */
static int64_t occurrence(const char *zone, int64_t now, const char *trigger, ql_civil_t *date) {
    ql_tz_t *tz = load(zone);
    int sec;
    cr_assert_eq(ql_hms_parse(trigger, false, &sec), 0);
    int64_t occ = 0;
    cr_assert_eq(ql_dispatch_occurrence(tz, now, sec, &occ, date), 0);
    ql_tz_free(tz);
    return occ;
}

static ql_auto_build_cfg_t cfg_of(const char *trigger, int64_t offset, const char *start,
                                  const char *end) {
    ql_auto_build_cfg_t c;
    ql_err_t err = {0};
    cr_assert_eq(ql_auto_build_validate(true, trigger, offset, start, end, &c, &err), 0, "%s",
                 err.msg);
    return c;
}

static void target(const char *zone, ql_civil_t date, const ql_auto_build_cfg_t *cfg, int64_t *s,
                   int64_t *e) {
    ql_tz_t *tz = load(zone);
    cr_assert_eq(ql_dispatch_target(tz, &date, cfg, s, e), 0);
    ql_tz_free(tz);
}

#define DATE(y, mo, d) ((ql_civil_t){(y), (mo), (d), 0, 0, 0, 0})

/* ---- strict HH:mm:ss ---- */

Test(hms_parse, valid_times) {
    int s = -1;
    cr_assert_eq(ql_hms_parse("00:00:00", false, &s), 0);
    cr_assert_eq(s, 0);
    cr_assert_eq(ql_hms_parse("01:00:00", false, &s), 0);
    cr_assert_eq(s, 3600);
    cr_assert_eq(ql_hms_parse("23:59:59", false, &s), 0);
    cr_assert_eq(s, 86399);
    cr_assert_eq(ql_hms_parse("12:34:56", true, &s), 0);
    cr_assert_eq(s, 45296);
}

Test(hms_parse, one_digit_hour_rejected) {
    int s = -1;
    cr_assert_eq(ql_hms_parse("1:00:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("01:0:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("01:00:0", false, &s), QL_EINVAL);
    cr_assert_eq(s, -1, "out untouched on error");
}

Test(hms_parse, missing_seconds_rejected) {
    int s;
    cr_assert_eq(ql_hms_parse("01:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse(NULL, false, &s), QL_EINVAL);
}

Test(hms_parse, spaces_signs_and_extra_text_rejected) {
    int s;
    cr_assert_eq(ql_hms_parse(" 01:00:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("01:00:00 ", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("01: 0:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("+1:00:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("01:00:00.000", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("01-00-00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("0a:00:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("010000", false, &s), QL_EINVAL);
}

Test(hms_parse, out_of_range_rejected) {
    int s;
    cr_assert_eq(ql_hms_parse("23:60:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("23:59:60", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("25:00:00", true, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("99:99:99", true, &s), QL_EINVAL);
}

Test(hms_parse, twenty_four_only_when_allowed) {
    int s = -1;
    cr_assert_eq(ql_hms_parse("24:00:00", false, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("24:00:00", true, &s), 0);
    cr_assert_eq(s, 86400);
    cr_assert_eq(ql_hms_parse("24:00:01", true, &s), QL_EINVAL);
    cr_assert_eq(ql_hms_parse("24:01:00", true, &s), QL_EINVAL);
}

/* ---- config validation ---- */

static void assert_invalid(const char *trigger, int64_t offset, const char *start, const char *end,
                           const char *field, const char *why) {
    ql_auto_build_cfg_t c = {.trigger_sec = -7};
    ql_err_t err = {0};
    cr_assert_eq(ql_auto_build_validate(true, trigger, offset, start, end, &c, &err), QL_EINVAL);
    cr_assert_eq(err.code, QL_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "field '%s'", field);
    cr_assert(strstr(err.msg, want) != NULL, "message '%s' does not name %s", err.msg, field);
    cr_assert(strstr(err.msg, why) != NULL, "message '%s' lacks '%s'", err.msg, why);
    cr_assert_eq(c.trigger_sec, -7, "out untouched on error");
}

Test(auto_build_validate, seed_example_accepted) {
    ql_auto_build_cfg_t c;
    ql_err_t err = {0};
    cr_assert_eq(ql_auto_build_validate(true, "01:00:00", 1, "00:00:00", "24:00:00", &c, &err), 0);
    cr_assert(c.enabled);
    cr_assert_eq(c.trigger_sec, 3600);
    cr_assert_eq(c.offset_days, 1);
    cr_assert_eq(c.start_sec, 0);
    cr_assert_eq(c.end_sec, 86400);
    cr_assert_eq(ql_auto_build_validate(false, "23:59:59", QL_AUTO_BUILD_MAX_OFFSET_DAYS,
                                        "23:59:58", "23:59:59", &c, &err),
                 0);
    cr_assert(!c.enabled);
}

Test(auto_build_validate, trigger_time_rules) {
    assert_invalid("1:00:00", 1, "00:00:00", "24:00:00", "trigger_time", "HH:mm:ss");
    assert_invalid("01:00", 1, "00:00:00", "24:00:00", "trigger_time", "'01:00'");
    assert_invalid(" 01:00:00", 1, "00:00:00", "24:00:00", "trigger_time", "HH:mm:ss");
    assert_invalid("24:00:00", 1, "00:00:00", "24:00:00", "trigger_time", "HH:mm:ss");
    assert_invalid("23:60:00", 1, "00:00:00", "24:00:00", "trigger_time", "HH:mm:ss");
    assert_invalid(NULL, 1, "00:00:00", "24:00:00", "trigger_time", "required");
}

Test(auto_build_validate, offset_must_be_at_least_one) {
    assert_invalid("01:00:00", 0, "00:00:00", "24:00:00", "logical_date_offset_days", "1");
    assert_invalid("01:00:00", -1, "00:00:00", "24:00:00", "logical_date_offset_days",
                   "out of range");
    assert_invalid("01:00:00", QL_AUTO_BUILD_MAX_OFFSET_DAYS + 1, "00:00:00", "24:00:00",
                   "logical_date_offset_days", "out of range");
    assert_invalid("01:00:00", INT64_MIN, "00:00:00", "24:00:00", "logical_date_offset_days",
                   "out of range");
}

Test(auto_build_validate, start_time_rules) {
    assert_invalid("01:00:00", 1, "24:00:00", "24:00:00", "data_range_start_time", "HH:mm:ss");
    assert_invalid("01:00:00", 1, "0:00:00", "24:00:00", "data_range_start_time", "HH:mm:ss");
    assert_invalid("01:00:00", 1, NULL, "24:00:00", "data_range_start_time", "required");
}

Test(auto_build_validate, end_time_rules) {
    assert_invalid("01:00:00", 1, "00:00:00", "24:00:01", "data_range_end_time", "24:00:00");
    assert_invalid("01:00:00", 1, "00:00:00", "24:00", "data_range_end_time", "HH:mm:ss");
    assert_invalid("01:00:00", 1, "00:00:00", NULL, "data_range_end_time", "required");
}

Test(auto_build_validate, start_must_be_earlier_than_end) {
    assert_invalid("01:00:00", 1, "10:00:00", "10:00:00", "data_range_start_time",
                   "start must be earlier than end");
    assert_invalid("01:00:00", 1, "20:00:00", "10:00:00", "data_range_start_time",
                   "start must be earlier than end");
}

Test(auto_build_validate, first_bad_field_is_reported) {
    assert_invalid("bad", 0, "bad", "bad", "trigger_time", "HH:mm:ss");
    assert_invalid("01:00:00", 0, "bad", "bad", "logical_date_offset_days", "out of range");
}

/* ---- latest due occurrence ---- */

Test(occurrence, worked_example_shanghai) {
    /* now 2026-09-01 10:00:00 Shanghai, trigger 01:00:00 -> 2026-09-01 01:00:00. */
    ql_civil_t d;
    cr_assert_eq(occurrence("Asia/Shanghai", 1788228000000, "01:00:00", &d), 1788195600000);
    assert_date(&d, 2026, 9, 1);
}

Test(occurrence, now_exactly_at_trigger_is_due) {
    ql_civil_t d;
    cr_assert_eq(occurrence("Asia/Shanghai", 1788195600000, "01:00:00", &d), 1788195600000);
    assert_date(&d, 2026, 9, 1);
}

Test(occurrence, one_ms_before_trigger_is_yesterdays) {
    ql_civil_t d;
    cr_assert_eq(occurrence("Asia/Shanghai", 1788195600000 - 1, "01:00:00", &d),
                 1788195600000 - DAY);
    assert_date(&d, 2026, 8, 31);
}

Test(occurrence, midnight_trigger) {
    /* 2026-09-01 00:00:00 Shanghai exactly: today's 00:00 trigger is due. */
    ql_civil_t d;
    cr_assert_eq(occurrence("Asia/Shanghai", 1788192000000, "00:00:00", &d), 1788192000000);
    assert_date(&d, 2026, 9, 1);
    cr_assert_eq(occurrence("Asia/Shanghai", 1788192000000 - 1, "23:59:59", &d),
                 1788192000000 - 1000);
    assert_date(&d, 2026, 8, 31);
}

Test(occurrence, new_york_trigger_in_gap_moves_later) {
    /* 2026-03-08 02:30 does not exist: the trigger fires at 03:30 EDT. */
    ql_civil_t d;
    cr_assert_eq(occurrence("America/New_York", 1772955000000, "02:30:00", &d), 1772955000000);
    assert_date(&d, 2026, 3, 8);
    /* 03:29:59.999 EDT: not yet, so yesterday's 02:30 EST. */
    cr_assert_eq(occurrence("America/New_York", 1772955000000 - 1, "02:30:00", &d), 1772868600000);
    assert_date(&d, 2026, 3, 7);
}

Test(occurrence, new_york_repeated_trigger_uses_the_earlier_edt) {
    ql_civil_t d;
    /* 01:45 EDT: today's 01:30 EDT has passed. */
    cr_assert_eq(occurrence("America/New_York", 1793511000000 + 15 * 60000, "01:30:00", &d),
                 1793511000000);
    assert_date(&d, 2026, 11, 1);
    /* 01:15 EST (the second 01:15, after 01:30 EDT): still today's EDT occurrence. */
    cr_assert_eq(occurrence("America/New_York", 1793514600000 - 15 * 60000, "01:30:00", &d),
                 1793511000000);
    assert_date(&d, 2026, 11, 1);
    /* 01:15 EDT (the first): not yet; yesterday's. */
    cr_assert_eq(occurrence("America/New_York", 1793511000000 - 15 * 60000, "01:30:00", &d),
                 1793424600000);
    assert_date(&d, 2026, 10, 31);
}

Test(occurrence, berlin_trigger_in_gap) {
    ql_civil_t d;
    cr_assert_eq(occurrence("Europe/Berlin", 1774747800000, "02:30:00", &d), 1774747800000);
    assert_date(&d, 2026, 3, 29);
    cr_assert_eq(occurrence("Europe/Berlin", 1774747800000 - 1, "02:30:00", &d), 1774661400000);
    assert_date(&d, 2026, 3, 28);
}

Test(occurrence, lord_howe_half_hour_gap) {
    /* 02:15 on 2026-10-04 is skipped (02:00 -> 02:30): the trigger fires at 02:45 +11:00. */
    ql_civil_t d;
    cr_assert_eq(occurrence("Australia/Lord_Howe", 1791042000000 /* 02:40 */, "02:15:00", &d),
                 1790955900000);
    assert_date(&d, 2026, 10, 3);
    cr_assert_eq(occurrence("Australia/Lord_Howe", 1791042300000 /* 02:45 */, "02:15:00", &d),
                 1791042300000);
    assert_date(&d, 2026, 10, 4);
}

Test(occurrence, apia_day_before_skipped_day) {
    /* 2011-12-29 12:00 -10:00: today's 01:00 is due. */
    ql_civil_t d;
    cr_assert_eq(occurrence("Pacific/Apia", 1325196000000, "01:00:00", &d), 1325156400000);
    assert_date(&d, 2011, 12, 29);
}

Test(occurrence, apia_yesterday_was_skipped) {
    /* now 2011-12-31 00:30 +14:00, trigger 01:00: today's (12-31 01:00) is not due, so
     * yesterday's: 2011-12-30 01:00, which never existed and resolves 24 h later, to the same
     * instant as today's trigger (after now). Its date is still 12-30, so logical date 12-29 is
     * not lost. */
    ql_civil_t d;
    cr_assert_eq(occurrence("Pacific/Apia", 1325241000000, "01:00:00", &d), 1325242800000);
    assert_date(&d, 2011, 12, 30);
}

Test(occurrence, apia_first_trigger_after_the_skip) {
    ql_civil_t d;
    cr_assert_eq(occurrence("Pacific/Apia", 1325242800000, "01:00:00", &d), 1325242800000);
    assert_date(&d, 2011, 12, 31);
}

Test(occurrence, mexico_city_noon_is_18_utc) {
    /* No DST since 2022 (ICU 72's old rules would say 17:00 UTC). */
    ql_civil_t d;
    cr_assert_eq(occurrence("America/Mexico_City", 1782928800000, "12:00:00", &d), 1782928800000);
    assert_date(&d, 2026, 7, 1);
    cr_assert_eq(occurrence("America/Mexico_City", 1782928800000 - 1, "12:00:00", &d),
                 1782842400000);
    assert_date(&d, 2026, 6, 30);
}

Test(occurrence, negative_now_before_1970) {
    /* 1969-12-31 12:00 UTC, trigger 13:00 -> 1969-12-30 13:00 UTC. */
    ql_civil_t d;
    cr_assert_eq(occurrence("UTC", -12 * H, "13:00:00", &d), -35 * H);
    assert_date(&d, 1969, 12, 30);
}

Test(occurrence, invalid_arguments) {
    ql_tz_t *tz = load("UTC");
    int64_t occ = 5;
    cr_assert_eq(ql_dispatch_occurrence(tz, 0, -1, &occ, NULL), QL_EINVAL);
    cr_assert_eq(ql_dispatch_occurrence(tz, 0, 86400, &occ, NULL), QL_EINVAL);
    cr_assert_eq(ql_dispatch_occurrence(NULL, 0, 0, &occ, NULL), QL_EINVAL);
    cr_assert_eq(occ, 5);
    cr_assert_eq(ql_dispatch_occurrence(tz, 0, 0, NULL, NULL), 0, "outputs may be NULL");
    /* Beyond the supported civil years: an error, not an overflow. */
    cr_assert_eq(ql_dispatch_occurrence(tz, INT64_MAX, 0, &occ, NULL), QL_EINVAL);
    cr_assert_eq(occ, 5);
    ql_tz_free(tz);
}

/* ---- target range ---- */

Test(target, worked_example_shanghai) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("Asia/Shanghai", DATE(2026, 9, 1), &c, &s, &e);
    cr_assert_eq(s, 1788105600000);
    cr_assert_eq(e, 1788192000000);
}

Test(target, worked_example_end_to_end) {
    /* now -> occurrence -> target -> normalize with yyyy-MM-dd, as one scan does. */
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t occ, s, e, ns, ne;
    ql_civil_t d;
    cr_assert_eq(ql_dispatch_occurrence(tz, 1788228000000, c.trigger_sec, &occ, &d), 0);
    cr_assert_eq(occ, 1788195600000);
    cr_assert_eq(ql_dispatch_target(tz, &d, &c, &s, &e), 0);
    ql_datefmt_t *f = NULL;
    cr_assert_eq(ql_datefmt_open("yyyy-MM-dd", &f, NULL), 0);
    cr_assert_eq(ql_normalize_range(tz, f, s, e, &ns, &ne), 0);
    cr_assert_eq(ns, 1788105600000);
    cr_assert_eq(ne, 1788192000000);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(target, offset_and_partial_day) {
    /* offset 3 from 2026-09-01: logical date 08-29, [06:00, 18:30) Shanghai. */
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 3, "06:00:00", "18:30:00");
    int64_t s, e;
    target("Asia/Shanghai", DATE(2026, 9, 1), &c, &s, &e);
    int64_t aug29 = 1788105600000 - 2 * DAY;
    cr_assert_eq(s, aug29 + 6 * H);
    cr_assert_eq(e, aug29 + 18 * H + 30 * 60000);
}

Test(target, crosses_month_and_year) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("UTC", DATE(2027, 1, 1), &c, &s, &e);
    cr_assert_eq(s, 1798675200000); /* 2026-12-31 00:00 UTC */
    cr_assert_eq(e, 1798761600000); /* 2027-01-01 00:00 UTC */
    target("UTC", DATE(2024, 3, 1), &c, &s, &e);
    cr_assert_eq(e - s, DAY);
    cr_assert_eq(s, 1709164800000); /* 2024-02-29 00:00 UTC */
}

Test(target, new_york_spring_day_is_23_hours) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("America/New_York", DATE(2026, 3, 9), &c, &s, &e);
    cr_assert_eq(s, 1772946000000);
    cr_assert_eq(e, 1773028800000);
    cr_assert_eq(e - s, 23 * H);
}

Test(target, new_york_start_in_gap_moves_later) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "02:30:00", "24:00:00");
    int64_t s, e;
    target("America/New_York", DATE(2026, 3, 9), &c, &s, &e);
    cr_assert_eq(s, 1772955000000); /* 03:30 EDT */
    cr_assert_eq(e, 1773028800000);
}

Test(target, new_york_fall_day_is_25_hours_and_repeat_takes_edt) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("America/New_York", DATE(2026, 11, 2), &c, &s, &e);
    cr_assert_eq(s, 1793505600000);
    cr_assert_eq(e, 1793595600000);
    cr_assert_eq(e - s, 25 * H);
    c = cfg_of("01:00:00", 1, "01:30:00", "24:00:00");
    target("America/New_York", DATE(2026, 11, 2), &c, &s, &e);
    cr_assert_eq(s, 1793511000000, "01:30 EDT, the earlier");
}

Test(target, berlin_transition_days) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("Europe/Berlin", DATE(2026, 3, 30), &c, &s, &e);
    cr_assert_eq(s, 1774738800000);
    cr_assert_eq(e, 1774821600000);
    cr_assert_eq(e - s, 23 * H);
    target("Europe/Berlin", DATE(2026, 10, 26), &c, &s, &e);
    cr_assert_eq(s, 1792879200000);
    cr_assert_eq(e, 1792969200000);
    cr_assert_eq(e - s, 25 * H);
}

Test(target, lord_howe_day_is_23_and_a_half_hours) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("Australia/Lord_Howe", DATE(2026, 10, 5), &c, &s, &e);
    cr_assert_eq(s, 1791034200000);
    cr_assert_eq(e, 1791118800000);
    cr_assert_eq(e - s, 23 * H + 30 * 60000);
}

Test(target, apia_day_before_the_skip_is_whole) {
    /* Occurrence date 2011-12-30 (see occurrence.apia_yesterday_was_skipped): logical date
     * 12-29, whose 24:00 is 12-30 00:00, skipped, resolving to 12-31 00:00 +14:00. */
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    int64_t s, e;
    target("Pacific/Apia", DATE(2011, 12, 30), &c, &s, &e);
    cr_assert_eq(s, 1325152800000);
    cr_assert_eq(e, 1325239200000);
    cr_assert_eq(e - s, DAY);
}

Test(target, apia_skipped_logical_date_is_empty) {
    /* Occurrence 2011-12-31: logical date 12-30 never existed, so [start, end) is empty and
     * normalization reports QL_EEMPTYRANGE. */
    ql_tz_t *tz = load("Pacific/Apia");
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    ql_civil_t d = DATE(2011, 12, 31);
    int64_t s, e, ns, ne;
    cr_assert_eq(ql_dispatch_target(tz, &d, &c, &s, &e), 0);
    cr_assert_eq(s, 1325239200000);
    cr_assert_eq(e, 1325239200000);
    ql_datefmt_t *f = NULL;
    cr_assert_eq(ql_datefmt_open("yyyy-MM-dd", &f, NULL), 0);
    cr_assert_eq(ql_normalize_range(tz, f, s, e, &ns, &ne), QL_EEMPTYRANGE);
    /* The next day is whole again. */
    d = DATE(2012, 1, 1);
    cr_assert_eq(ql_dispatch_target(tz, &d, &c, &s, &e), 0);
    cr_assert_eq(s, 1325239200000);
    cr_assert_eq(e, 1325325600000);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(target, apia_trigger_on_skipped_day_start_time) {
    /* A start time on the skipped date resolves 24 h later (java.time): [12-30 10:00, 24:00)
     * becomes [12-31 10:00 +14:00, 12-31 00:00 +14:00): start after end, an empty range. */
    ql_tz_t *tz = load("Pacific/Apia");
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "10:00:00", "24:00:00");
    ql_civil_t d = DATE(2011, 12, 31);
    int64_t s, e;
    cr_assert_eq(ql_dispatch_target(tz, &d, &c, &s, &e), 0);
    cr_assert_eq(s, 1325239200000 + 10 * H);
    cr_assert_eq(e, 1325239200000);
    ql_datefmt_t *f = NULL;
    int64_t ns, ne;
    cr_assert_eq(ql_datefmt_open("yyyy-MM-dd HH:mm:ss", &f, NULL), 0);
    cr_assert_eq(ql_normalize_range(tz, f, s, e, &ns, &ne), QL_EEMPTYRANGE);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(target, mexico_city_current_rules) {
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "12:00:00");
    int64_t s, e;
    target("America/Mexico_City", DATE(2026, 7, 2), &c, &s, &e);
    cr_assert_eq(s, 1782885600000);
    cr_assert_eq(e, 1782928800000, "12:00 local == 18:00 UTC");
}

Test(target, empty_after_normalization_with_day_format) {
    /* [10:00, 20:00) with yyyy-MM-dd: both ends truncate to midnight -> QL_EEMPTYRANGE. */
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "10:00:00", "20:00:00");
    ql_civil_t d = DATE(2026, 9, 1);
    int64_t s, e, ns, ne;
    cr_assert_eq(ql_dispatch_target(tz, &d, &c, &s, &e), 0);
    cr_assert_eq(s, 1788105600000 + 10 * H);
    cr_assert_eq(e, 1788105600000 + 20 * H);
    ql_datefmt_t *f = NULL;
    cr_assert_eq(ql_datefmt_open("yyyy-MM-dd", &f, NULL), 0);
    cr_assert_eq(ql_normalize_range(tz, f, s, e, &ns, &ne), QL_EEMPTYRANGE);
    cr_assert_eq(ns, 1788105600000);
    cr_assert_eq(ne, 1788105600000);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(target, invalid_arguments) {
    ql_tz_t *tz = load("UTC");
    ql_auto_build_cfg_t c = cfg_of("01:00:00", 1, "00:00:00", "24:00:00");
    ql_civil_t bad = DATE(2026, 2, 30), ok = DATE(2026, 3, 1);
    int64_t s = 1, e = 2;
    cr_assert_eq(ql_dispatch_target(tz, &bad, &c, &s, &e), QL_EINVAL);
    ql_auto_build_cfg_t zero = c;
    zero.offset_days = 0;
    cr_assert_eq(ql_dispatch_target(tz, &ok, &zero, &s, &e), QL_EINVAL);
    ql_auto_build_cfg_t inverted = c;
    inverted.start_sec = 7200;
    inverted.end_sec = 3600;
    cr_assert_eq(ql_dispatch_target(tz, &ok, &inverted, &s, &e), QL_EINVAL);
    ql_auto_build_cfg_t past = c;
    past.end_sec = 86401;
    cr_assert_eq(ql_dispatch_target(tz, &ok, &past, &s, &e), QL_EINVAL);
    cr_assert_eq(ql_dispatch_target(tz, &ok, NULL, &s, &e), QL_EINVAL);
    cr_assert(s == 1 && e == 2, "outputs untouched on error");
    ql_tz_free(tz);
}
