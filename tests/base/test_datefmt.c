/*
 * Partition date formats and normalization (base/ql_datefmt.h). Expected instants were
 * computed with java.time (OpenJDK 17, tzdata 2025a).
 */
#include "base/ql_datefmt.h"
#include "base/ql_error.h"
#include "base/ql_time.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CIV(y, mo, d, h, mi, s) ((ql_civil_t){(y), (mo), (d), (h), (mi), (s), 0})

static ql_datefmt_t *open_fmt(const char *pattern) {
    ql_datefmt_t *f = NULL;
    ql_err_t err = {0};
    int rc = ql_datefmt_open(pattern, &f, &err);
    cr_assert_eq(rc, 0, "open(%s) = %d: %s", pattern, rc, err.msg);
    cr_assert_not_null(f);
    return f;
}

static ql_tz_t *load(const char *name) {
    ql_tz_t *tz = NULL;
    cr_assert_eq(ql_tz_load(name, &tz), 0, "load %s", name);
    return tz;
}

static void assert_civil(const ql_civil_t *c, int64_t y, int mo, int d, int h, int mi, int s,
                         int ms) {
    cr_assert(c->year == y && c->month == mo && c->day == d && c->hour == h && c->minute == mi &&
                  c->second == s && c->ms == ms,
              "got %lld-%02d-%02d %02d:%02d:%02d.%03d, want %lld-%02d-%02d %02d:%02d:%02d.%03d",
              (long long)c->year, c->month, c->day, c->hour, c->minute, c->second, c->ms,
              (long long)y, mo, d, h, mi, s, ms);
}

/* A wall time with every field set, so truncation shows which fields each pattern keeps. */
static const ql_civil_t sample = {2026, 9, 17, 10, 11, 12, 345};

/* Formats sample with pattern, checks the text, truncates it and returns the truncation. */
static ql_civil_t format_and_truncate(const char *pattern, const char *want_text) {
    ql_datefmt_t *f = open_fmt(pattern);
    char buf[64];
    cr_assert_eq(ql_datefmt_format(f, &sample, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, want_text, "pattern %s", pattern);
    ql_civil_t t;
    cr_assert_eq(ql_datefmt_truncate(f, &sample, &t), 0);
    /* Truncation is idempotent: a truncated value is on the granularity already. */
    ql_civil_t t2;
    cr_assert_eq(ql_datefmt_truncate(f, &t, &t2), 0);
    cr_assert_eq(ql_civil_cmp(&t, &t2), 0);
    ql_datefmt_free(f);
    return t;
}

/* ---- truncation against ICU's round trip ---- */

/* A pseudo-random wall time of a supported year (xorshift, seeded per test for replays). */
static ql_civil_t random_wall(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    uint64_t r = *x;
    static const int64_t edge_years[] = {1, 2, 1582, 1899, 1970, 2000, 2026, 9998, 9999};
    ql_civil_t c;
    c.year = r % 4 == 0 ? edge_years[(r >> 2) % 9] : 1 + (int64_t)((r >> 2) % 9999);
    c.month = 1 + (int)((r >> 16) % 12);
    int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (c.year % 4 == 0 && c.year % 100 != 0) || c.year % 400 == 0;
    c.day = 1 + (int)((r >> 20) % (uint64_t)(mdays[c.month - 1] + (c.month == 2 && leap)));
    c.hour = (int)((r >> 26) % 24);
    c.minute = (int)((r >> 31) % 60);
    c.second = (int)((r >> 37) % 60);
    c.ms = (int)((r >> 43) % 1000);
    return c;
}

/* Truncation (which skips ICU where the pattern's smallest field says the answer) gives what
 * ICU's format-then-parse round trip gives, for every supported pattern shape: each granularity,
 * abutting and separated fields, month names, 12- and 24-hour clocks, quoted text. */
Test(datefmt_truncate, equals_the_icu_round_trip_for_every_pattern_shape) {
    const char *patterns[] = {"yyyy",
                              "y",
                              "yyyyMM",
                              "yyyy-MM",
                              "MMM yyyy",
                              "LLLL yyyy",
                              "yyyyMMdd",
                              "yyyy-MM-dd",
                              "dd.MM.yyyy",
                              "MMMM d, yyyy",
                              "yyyyMMddHH",
                              "yyyy-MM-dd HH",
                              "yyyy-MM-dd kk",
                              "yyyy-MM-dd hh a",
                              "yyyy-MM-dd KK a",
                              "yyyy-MM-dd HH:mm",
                              "yyyyMMddHHmmss",
                              "yyyy-MM-dd'T'HH:mm:ss",
                              "yyyy-MM-dd HH:mm:ss.SSS",
                              "yyyy''MM''dd",
                              "yyyy-DDD",
                              "yyyy-DDD HH:mm"};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        ql_datefmt_t *f = open_fmt(patterns[p]);
        for (int i = 0; i < 2000; i++) {
            ql_civil_t in = random_wall(&x), fast, icu;
            char text[128];
            cr_assert_eq(ql_datefmt_format(f, &in, text, sizeof text), 0);
            int icu_rc = ql_datefmt_parse(f, text, &icu);
            int rc = ql_datefmt_truncate(f, &in, &fast);
            /* "y" reads two digits back as an abbreviated year: years 10 to 99 fail both ways */
            cr_assert_eq(rc, icu_rc, "%s: '%s': truncate %d, ICU's round trip %d", patterns[p],
                         text, rc, icu_rc);
            if (rc != 0)
                continue;
            cr_assert_eq(ql_civil_cmp(&fast, &icu), 0,
                         "%s: %lld-%02d-%02d %02d:%02d:%02d.%03d truncated to %lld-%02d-%02d "
                         "%02d:%02d:%02d.%03d, ICU's round trip gives %lld-%02d-%02d "
                         "%02d:%02d:%02d.%03d",
                         patterns[p], (long long)in.year, in.month, in.day, in.hour, in.minute,
                         in.second, in.ms, (long long)fast.year, fast.month, fast.day, fast.hour,
                         fast.minute, fast.second, fast.ms, (long long)icu.year, icu.month, icu.day,
                         icu.hour, icu.minute, icu.second, icu.ms);
        }
        ql_datefmt_free(f);
    }
}

/* ---- each partition format's truncation ---- */

Test(datefmt_truncate, yyyy_MM_dd) {
    ql_civil_t t = format_and_truncate("yyyy-MM-dd", "2026-09-17");
    assert_civil(&t, 2026, 9, 17, 0, 0, 0, 0);
}

Test(datefmt_truncate, yyyyMMdd) {
    ql_civil_t t = format_and_truncate("yyyyMMdd", "20260917");
    assert_civil(&t, 2026, 9, 17, 0, 0, 0, 0);
}

Test(datefmt_truncate, yyyy_MM_dd_HH_mm_ss) {
    ql_civil_t t = format_and_truncate("yyyy-MM-dd HH:mm:ss", "2026-09-17 10:11:12");
    assert_civil(&t, 2026, 9, 17, 10, 11, 12, 0);
}

Test(datefmt_truncate, yyyyMM) {
    ql_civil_t t = format_and_truncate("yyyyMM", "202609");
    assert_civil(&t, 2026, 9, 1, 0, 0, 0, 0);
}

Test(datefmt_truncate, yyyy_MM) {
    ql_civil_t t = format_and_truncate("yyyy-MM", "2026-09");
    assert_civil(&t, 2026, 9, 1, 0, 0, 0, 0);
}

Test(datefmt_truncate, yyyy_slash_MM_slash_dd) {
    ql_civil_t t = format_and_truncate("yyyy/MM/dd", "2026/09/17");
    assert_civil(&t, 2026, 9, 17, 0, 0, 0, 0);
}

Test(datefmt_truncate, yyyy_MM_dd_HH_mm) {
    ql_civil_t t = format_and_truncate("yyyy-MM-dd HH:mm", "2026-09-17 10:11");
    assert_civil(&t, 2026, 9, 17, 10, 11, 0, 0);
}

Test(datefmt_truncate, yyyyMMddHH) {
    ql_civil_t t = format_and_truncate("yyyyMMddHH", "2026091710");
    assert_civil(&t, 2026, 9, 17, 10, 0, 0, 0);
}

Test(datefmt_truncate, milliseconds_with_quoted_literal) {
    ql_civil_t t = format_and_truncate("yyyy-MM-dd'T'HH:mm:ss.SSS", "2026-09-17T10:11:12.345");
    assert_civil(&t, 2026, 9, 17, 10, 11, 12, 345);
}

Test(datefmt_truncate, year_only) {
    ql_civil_t t = format_and_truncate("yyyy", "2026");
    assert_civil(&t, 2026, 1, 1, 0, 0, 0, 0);
}

Test(datefmt_truncate, month_name_is_ascii_english) {
    ql_civil_t t = format_and_truncate("dd MMM yyyy", "17 Sep 2026");
    assert_civil(&t, 2026, 9, 17, 0, 0, 0, 0);
    ql_datefmt_t *f = open_fmt("dd MMM yyyy");
    ql_civil_t c;
    cr_assert_eq(ql_datefmt_parse(f, "17 Sep 2026", &c), 0);
    cr_assert_eq(ql_datefmt_parse(f, "17 sep 2026", &c), QL_EINVAL, "printed case only");
    ql_datefmt_free(f);
}

Test(datefmt_truncate, twelve_hour_clock_with_marker) {
    ql_civil_t t = format_and_truncate("yyyy-MM-dd hh a", "2026-09-17 10 AM");
    assert_civil(&t, 2026, 9, 17, 10, 0, 0, 0);
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd hh a");
    ql_civil_t pm = CIV(2026, 9, 17, 23, 59, 0), r;
    cr_assert_eq(ql_datefmt_truncate(f, &pm, &r), 0);
    assert_civil(&r, 2026, 9, 17, 23, 0, 0, 0);
    ql_datefmt_free(f);
}

Test(datefmt_truncate, day_of_year) {
    ql_civil_t t = format_and_truncate("yyyy-DDD", "2026-260");
    assert_civil(&t, 2026, 9, 17, 0, 0, 0, 0);
}

Test(datefmt_truncate, hour_24_field_k_round_trips_midnight) {
    /* kk prints midnight as 24 (as Java does); it must parse back to 00 of the same day. */
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd kk");
    ql_civil_t mid = CIV(2026, 9, 17, 0, 30, 0), r;
    char buf[32];
    cr_assert_eq(ql_datefmt_format(f, &mid, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "2026-09-17 24");
    cr_assert_eq(ql_datefmt_truncate(f, &mid, &r), 0);
    assert_civil(&r, 2026, 9, 17, 0, 0, 0, 0);
    ql_datefmt_free(f);
}

Test(datefmt_truncate, proleptic_gregorian_before_1582) {
    /* ICU's default calendar is Julian before 1582-10-15; CCTZ's civil time never is. */
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    ql_civil_t old = CIV(1500, 3, 1, 12, 0, 0), r;
    char buf[32];
    cr_assert_eq(ql_datefmt_format(f, &old, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "1500-03-01");
    cr_assert_eq(ql_datefmt_truncate(f, &old, &r), 0);
    assert_civil(&r, 1500, 3, 1, 0, 0, 0, 0);
    ql_civil_t first = CIV(1, 1, 1, 5, 0, 0);
    cr_assert_eq(ql_datefmt_format(f, &first, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "0001-01-01");
    cr_assert_eq(ql_datefmt_truncate(f, &first, &r), 0);
    assert_civil(&r, 1, 1, 1, 0, 0, 0, 0);
    ql_datefmt_free(f);
}

Test(datefmt_truncate, host_time_zone_never_applies) {
    /* Criterion runs each test in its own process, so TZ can be set here. If ICU used the
     * default (host) zone, 02:30 on New York's spring-forward day would become 03:30. */
    setenv("TZ", "America/New_York", 1);
    tzset();
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd HH:mm");
    ql_civil_t gap = CIV(2026, 3, 8, 2, 30, 0), r;
    char buf[32];
    cr_assert_eq(ql_datefmt_format(f, &gap, buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "2026-03-08 02:30");
    cr_assert_eq(ql_datefmt_truncate(f, &gap, &r), 0);
    assert_civil(&r, 2026, 3, 8, 2, 30, 0, 0);
    ql_datefmt_free(f);
}

Test(datefmt_truncate, aliasing_in_and_out) {
    ql_datefmt_t *f = open_fmt("yyyyMM");
    ql_civil_t c = sample;
    cr_assert_eq(ql_datefmt_truncate(f, &c, &c), 0);
    assert_civil(&c, 2026, 9, 1, 0, 0, 0, 0);
    ql_datefmt_free(f);
}

Test(datefmt_truncate, unsupported_years_and_invalid_wall_are_einval) {
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    ql_civil_t r, y0 = CIV(0, 1, 1, 0, 0, 0), y10k = CIV(10000, 1, 1, 0, 0, 0),
                  bad = CIV(2026, 2, 30, 0, 0, 0);
    cr_assert_eq(ql_datefmt_truncate(f, &y0, &r), QL_EINVAL);
    cr_assert_eq(ql_datefmt_truncate(f, &y10k, &r), QL_EINVAL);
    cr_assert_eq(ql_datefmt_truncate(f, &bad, &r), QL_EINVAL);
    char buf[32];
    cr_assert_eq(ql_datefmt_format(f, &y10k, buf, sizeof buf), QL_EINVAL);
    ql_civil_t top = CIV(9999, 12, 31, 23, 59, 59);
    cr_assert_eq(ql_datefmt_truncate(f, &top, &r), 0);
    assert_civil(&r, 9999, 12, 31, 0, 0, 0, 0);
    ql_datefmt_free(f);
}

/* ---- open: accepted and rejected patterns ---- */

Test(datefmt_open, partition_formats_are_accepted) {
    const char *ok[] = {"yyyy-MM-dd",       "yyyyMMdd",   "yyyy-MM-dd HH:mm:ss",
                        "yyyyMM",           "yyyy-MM",    "yyyy/MM/dd",
                        "yyyy-MM-dd HH:mm", "yyyyMMddHH", "yyyy-MM-dd'T'HH:mm:ss.SSS",
                        "yyyy.MM.dd",       "yyyy''MM",   "LLLL yyyy"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ql_datefmt_t *f = open_fmt(ok[i]);
        cr_assert_str_eq(ql_datefmt_pattern(f), ok[i]);
        ql_datefmt_free(f);
    }
}

static void assert_rejected(const char *pattern, const char *why) {
    ql_datefmt_t *f = (ql_datefmt_t *)0x1;
    ql_err_t err = {0};
    cr_assert_eq(ql_datefmt_open(pattern, &f, &err), QL_EINVAL, "pattern '%s' accepted", pattern);
    cr_assert_eq(f, (ql_datefmt_t *)0x1, "out must be untouched on error");
    cr_assert_eq(err.code, QL_EINVAL);
    cr_assert(strstr(err.msg, "field 'partition_date_format'") != NULL, "%s", err.msg);
    cr_assert(strstr(err.msg, why) != NULL, "pattern '%s': message '%s' lacks '%s'", pattern,
              err.msg, why);
}

Test(datefmt_open, empty_and_too_long) {
    assert_rejected("", "empty");
    char longp[QL_DATEFMT_PATTERN_MAX + 2];
    memset(longp, '-', sizeof longp);
    memcpy(longp, "yyyy", 4);
    longp[sizeof longp - 1] = '\0';
    assert_rejected(longp, "longer than");
    ql_err_t err = {0};
    ql_datefmt_t *f = NULL;
    cr_assert_eq(ql_datefmt_open(NULL, &f, &err), QL_EINVAL);
}

Test(datefmt_open, zone_fields_rejected) {
    assert_rejected("yyyy-MM-dd HH:mm z", "time-zone field 'z'");
    assert_rejected("yyyy-MM-dd HH:mmZ", "time-zone field 'Z'");
    assert_rejected("yyyy-MM-dd'T'HH:mmXXX", "time-zone field 'X'");
}

Test(datefmt_open, text_and_week_fields_rejected) {
    assert_rejected("EEE yyyy-MM-dd", "'E'");
    assert_rejected("yyyy-MM-dd G", "'G'");
    assert_rejected("YYYY-MM-dd", "'Y'");
    assert_rejected("yyyy-ww", "'w'");
    assert_rejected("yyyy-MM-W", "'W'");
    assert_rejected("uuuu-MM-dd", "'u'");
    assert_rejected("yyyy-MM-F", "'F'");
}

Test(datefmt_open, illegal_letters_and_quotes_rejected) {
    /* Letters ICU knows but Java does not (Q, e, O, b, ...) are illegal here, as in Java. */
    assert_rejected("yyyy-QQ", "illegal pattern character 'Q'");
    assert_rejected("yyyy-MM-dd bb", "illegal pattern character 'b'");
    assert_rejected("yyyy-MM-dd'T", "unterminated quote");
}

Test(datefmt_open, widths_where_java_and_icu_differ_rejected) {
    assert_rejected("yy-MM-dd", "two-digit year");
    assert_rejected("yyyy-MM-dd HH:mm:ss.S", "SSS");
    assert_rejected("yyyy-MM-dd HH:mm:ss.SSSS", "SSS");
    assert_rejected("yyyy MMMMM", "more than 4");
}

Test(datefmt_open, fields_must_chain_from_the_year) {
    assert_rejected("MM-dd", "no year");
    assert_rejected("yyyy-dd", "no month");
    assert_rejected("yyyy-MM HH", "no full date");
    assert_rejected("yyyy-MM-dd mm", "no hour");
    assert_rejected("yyyy-MM-dd HH ss", "no minutes");
    assert_rejected("yyyy-MM-dd HH:mm SSS", "no seconds");
    assert_rejected("yyyy-MM-dd hh", "no am/pm");
}

/* ---- format and parse ---- */

Test(datefmt_format, buffer_too_small) {
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    char buf[16];
    cr_assert_eq(ql_datefmt_format(f, &sample, buf, 10), QL_ETOOBIG);
    cr_assert_eq(ql_datefmt_format(f, &sample, buf, 0), QL_ETOOBIG);
    cr_assert_eq(ql_datefmt_format(f, &sample, buf, 11), 0, "exact fit with the NUL");
    cr_assert_str_eq(buf, "2026-09-17");
    ql_datefmt_free(f);
}

Test(datefmt_parse, whole_text_must_match) {
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    ql_civil_t c;
    cr_assert_eq(ql_datefmt_parse(f, "2026-09-17", &c), 0);
    assert_civil(&c, 2026, 9, 17, 0, 0, 0, 0);
    cr_assert_eq(ql_datefmt_parse(f, "2026-09-17x", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2026-09-17 ", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, " 2026-09-17", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2026/09/17", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2026-9-17", &c), QL_EINVAL, "only the canonical spelling");
    cr_assert_eq(ql_datefmt_parse(f, "2026-09- 7", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, NULL, &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "\xff\xfe", &c), QL_EINVAL);
    ql_datefmt_free(f);
}

Test(datefmt_parse, not_lenient) {
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd HH:mm:ss");
    ql_civil_t c;
    cr_assert_eq(ql_datefmt_parse(f, "2026-02-30 00:00:00", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2026-13-01 00:00:00", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2026-01-01 24:00:00", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2026-01-01 23:60:00", &c), QL_EINVAL);
    cr_assert_eq(ql_datefmt_parse(f, "2024-02-29 23:59:59", &c), 0);
    assert_civil(&c, 2024, 2, 29, 23, 59, 59, 0);
    ql_datefmt_free(f);
}

Test(datefmt_parse, abutting_fields_and_missing_fields_default) {
    ql_datefmt_t *f = open_fmt("yyyyMMddHH");
    ql_civil_t c;
    cr_assert_eq(ql_datefmt_parse(f, "2026091710", &c), 0);
    assert_civil(&c, 2026, 9, 17, 10, 0, 0, 0);
    ql_datefmt_free(f);
    f = open_fmt("yyyyMM");
    cr_assert_eq(ql_datefmt_parse(f, "202602", &c), 0);
    assert_civil(&c, 2026, 2, 1, 0, 0, 0, 0);
    ql_datefmt_free(f);
}

/* ---- normalization ---- */

static int64_t norm(const char *zone, const char *pattern, int64_t ms) {
    ql_tz_t *tz = load(zone);
    ql_datefmt_t *f = open_fmt(pattern);
    int64_t out = 0;
    cr_assert_eq(ql_normalize_instant(tz, f, ms, &out), 0);
    ql_datefmt_free(f);
    ql_tz_free(tz);
    return out;
}

Test(normalize, day_format_in_project_zone) {
    /* 2026-09-01 10:00 Shanghai -> 2026-09-01 00:00 Shanghai, not 00:00 UTC. */
    cr_assert_eq(norm("Asia/Shanghai", "yyyy-MM-dd", 1788228000000), 1788192000000);
    cr_assert_eq(norm("UTC", "yyyy-MM-dd", 1788228000000), 1788220800000);
}

Test(normalize, instant_on_the_granularity_is_unchanged) {
    cr_assert_eq(norm("Asia/Shanghai", "yyyy-MM-dd", 1788105600000), 1788105600000);
    cr_assert_eq(norm("Asia/Shanghai", "yyyyMM", 1788192000000), 1788192000000); /* 09-01 */
}

Test(normalize, month_format) {
    /* 2026-09-17 10:00 Shanghai -> 2026-09-01 00:00 Shanghai. */
    cr_assert_eq(norm("Asia/Shanghai", "yyyyMM", 1789610400000), 1788192000000);
}

Test(normalize, repeated_hour_later_instant_keeps_est) {
    /* 2026-11-01 01:30 EST (the second 01:30) with "yyyy-MM-dd HH" -> 01:00 EST, not EDT. */
    cr_assert_eq(norm("America/New_York", "yyyy-MM-dd HH", 1793514600000), 1793512800000);
}

Test(normalize, repeated_hour_earlier_instant_keeps_edt) {
    /* 01:30 EDT (the first) -> 01:00 EDT; Kylin's round trip would give 01:00 EST. */
    cr_assert_eq(norm("America/New_York", "yyyy-MM-dd HH", 1793511000000), 1793509200000);
}

Test(normalize, repeated_hour_to_the_second_is_identity) {
    cr_assert_eq(norm("America/New_York", "yyyy-MM-dd HH:mm:ss", 1793514600000), 1793514600000);
    cr_assert_eq(norm("America/New_York", "yyyy-MM-dd HH:mm:ss", 1793511000000), 1793511000000);
}

Test(normalize, repeated_hour_to_the_day) {
    /* Both 01:30s belong to 2026-11-01, whose midnight is unique (EDT). */
    cr_assert_eq(norm("America/New_York", "yyyy-MM-dd", 1793514600000), 1793505600000);
    cr_assert_eq(norm("America/New_York", "yyyy-MM-dd", 1793511000000), 1793505600000);
}

Test(normalize, truncated_wall_in_a_midnight_gap) {
    /* Havana springs forward at midnight: 2026-03-08 00:00 does not exist, so the day starts
     * at 01:00 CDT (java.time: later by the 1 h gap). 10:00 CDT -> 01:00 CDT. */
    cr_assert_eq(norm("America/Havana", "yyyy-MM-dd", 1772978400000), 1772946000000);
}

Test(normalize, truncated_wall_in_a_half_hour_gap) {
    /* Lord Howe 2026-10-04: 02:00 +10:30 -> 02:30 +11:00. 02:45 truncated to the hour is 02:00,
     * in the gap: later by 30 min = 02:30 +11:00. */
    cr_assert_eq(norm("Australia/Lord_Howe", "yyyy-MM-dd HH", 1791042300000), 1791041400000);
}

Test(normalize, result_never_after_the_instant_across_transitions) {
    /* Every 10 minutes through New York's fall-back and spring-forward days, for the hour and
     * day formats: normalized <= original, and normalizing again changes nothing. */
    const char *pats[] = {"yyyy-MM-dd HH", "yyyy-MM-dd"};
    const int64_t days[] = {1793505600000 /* 2026-11-01 */, 1772946000000 /* 2026-03-08 */};
    ql_tz_t *tz = load("America/New_York");
    for (size_t p = 0; p < 2; p++) {
        ql_datefmt_t *f = open_fmt(pats[p]);
        for (size_t d = 0; d < 2; d++)
            for (int64_t t = days[d]; t < days[d] + 26 * 3600000LL; t += 600000) {
                int64_t n1, n2;
                cr_assert_eq(ql_normalize_instant(tz, f, t, &n1), 0);
                cr_assert_eq(ql_normalize_instant(tz, f, n1, &n2), 0);
                cr_assert_leq(n1, t, "%s t=%lld", pats[p], (long long)t);
                cr_assert_eq(n1, n2, "%s t=%lld", pats[p], (long long)t);
            }
        ql_datefmt_free(f);
    }
    ql_tz_free(tz);
}

Test(normalize, unsupported_year_is_einval) {
    ql_tz_t *tz = load("UTC");
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    int64_t out = 7;
    cr_assert_eq(ql_normalize_instant(tz, f, INT64_MAX, &out), QL_EINVAL);
    cr_assert_eq(ql_normalize_instant(tz, f, -62135596800001LL, &out), QL_EINVAL); /* year 0 */
    cr_assert_eq(out, 7);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(normalize_range, worked_example_unchanged) {
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    int64_t s, e;
    cr_assert_eq(ql_normalize_range(tz, f, 1788105600000, 1788192000000, &s, &e), 0);
    cr_assert_eq(s, 1788105600000);
    cr_assert_eq(e, 1788192000000);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(normalize_range, both_ends_truncated) {
    /* [2026-08-31 10:00, 2026-09-01 10:00) Shanghai -> [08-31 00:00, 09-01 00:00). */
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    int64_t s, e;
    cr_assert_eq(ql_normalize_range(tz, f, 1788141600000, 1788228000000, &s, &e), 0);
    cr_assert_eq(s, 1788105600000);
    cr_assert_eq(e, 1788192000000);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(normalize_range, empty_after_normalization) {
    /* [2026-09-01 10:00, 20:00) Shanghai with yyyy-MM-dd: both ends become 09-01 00:00. */
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd");
    int64_t s = 0, e = 0;
    cr_assert_eq(ql_normalize_range(tz, f, 1788228000000, 1788228000000 + 10 * 3600000LL, &s, &e),
                 QL_EEMPTYRANGE);
    cr_assert_eq(s, 1788192000000, "outputs are set for the warning");
    cr_assert_eq(e, 1788192000000);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}

Test(normalize_range, same_range_with_a_finer_format_is_kept) {
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_datefmt_t *f = open_fmt("yyyy-MM-dd HH:mm:ss");
    int64_t s, e;
    cr_assert_eq(ql_normalize_range(tz, f, 1788228000000, 1788228000000 + 10 * 3600000LL, &s, &e),
                 0);
    cr_assert_eq(s, 1788228000000);
    cr_assert_eq(e, 1788228000000 + 10 * 3600000LL);
    ql_datefmt_free(f);
    ql_tz_free(tz);
}
