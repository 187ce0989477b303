/*
 * Time zones and civil time (base/ql_time.h). Expected instants were computed with
 * java.time (OpenJDK 17, tzdata 2025a): LocalDateTime.of(...).atZone(zone).toInstant().
 */
#include "base/ql_error.h"
#include "base/ql_time.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#define CIV(y, mo, d, h, mi, s) ((ql_civil_t){(y), (mo), (d), (h), (mi), (s), 0})

static ql_tz_t *load(const char *name) {
    ql_tz_t *tz = NULL;
    int rc = ql_tz_load(name, &tz);
    cr_assert_eq(rc, 0, "ql_tz_load(%s) = %d", name, rc);
    cr_assert_not_null(tz);
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

static int64_t from_civil(const ql_tz_t *tz, ql_civil_t c) {
    int64_t ms = 0;
    cr_assert_eq(ql_tz_from_civil(tz, &c, &ms), 0);
    return ms;
}

/* ---- loading ---- */

Test(tz_load, utc_always_works) {
    ql_tz_t *tz = load("UTC");
    cr_assert_str_eq(ql_tz_name(tz), "UTC");
    cr_assert_eq(ql_tz_offset_sec(tz, 1788228000000), 0);
    ql_tz_free(tz);
}

Test(tz_load, utc_needs_no_tz_database) {
    /* Criterion runs each test in its own process, so TZDIR can be pointed nowhere here. */
    setenv("TZDIR", "/nonexistent-zoneinfo", 1);
    ql_tz_t *tz = NULL;
    cr_assert_eq(ql_tz_load("Asia/Shanghai", &tz), QL_EINVAL);
    tz = load("UTC");
    ql_tz_free(tz);
}

Test(tz_load, iana_zone_loads_with_its_rules) {
    ql_tz_t *tz = load("Asia/Shanghai");
    cr_assert_str_eq(ql_tz_name(tz), "Asia/Shanghai");
    cr_assert_eq(ql_tz_offset_sec(tz, 1788228000000), 8 * 3600);
    ql_tz_free(tz);
}

Test(tz_load, unknown_zone_is_einval_not_utc) {
    ql_tz_t *tz = (ql_tz_t *)0x1;
    cr_assert_eq(ql_tz_load("Mars/Olympus_Mons", &tz), QL_EINVAL);
    cr_assert_eq(tz, (ql_tz_t *)0x1, "out must be untouched on error");
    cr_assert_eq(ql_tz_load("asia/shanghai_typo", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load(NULL, &tz), QL_EINVAL);
}

Test(tz_load, file_that_is_not_a_zone_is_einval) {
    /* zone1970.tab is a regular file of the tz database but not TZif: CCTZ returns false (and
     * would silently give UTC if its return value were ignored). */
    ql_tz_t *tz = NULL;
    cr_assert_eq(ql_tz_load("zone1970.tab", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("America", &tz), QL_EINVAL, "a directory is not a zone");
}

Test(tz_load, names_that_escape_the_database_are_einval) {
    ql_tz_t *tz = NULL;
    cr_assert_eq(ql_tz_load("/etc/passwd", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("../../../etc/passwd", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("America/../Asia/Shanghai", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("file:/usr/share/zoneinfo/UTC", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("Asia//Shanghai", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("Asia/Shanghai ", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("localtime", &tz), QL_EINVAL);
    cr_assert_eq(ql_tz_load("right/UTC", &tz), QL_EINVAL);
}

Test(tz_load, etc_zones_with_signs_load) {
    /* POSIX-style signs: Etc/GMT-8 is UTC+8. */
    ql_tz_t *tz = load("Etc/GMT-8");
    cr_assert_eq(ql_tz_offset_sec(tz, 0), 8 * 3600);
    ql_tz_free(tz);
}

/* ---- cache ---- */

Test(tzcache, same_name_returns_same_borrowed_zone) {
    ql_tzcache_t *cache = NULL;
    cr_assert_eq(ql_tzcache_new(&cache), 0);
    const ql_tz_t *a = NULL, *b = NULL, *c = NULL;
    cr_assert_eq(ql_tzcache_get(cache, "Europe/Berlin", &a), 0);
    cr_assert_eq(ql_tzcache_get(cache, "Europe/Berlin", &b), 0);
    cr_assert_eq(ql_tzcache_get(cache, "UTC", &c), 0);
    cr_assert_eq(a, b);
    cr_assert_neq(a, c);
    cr_assert_str_eq(ql_tz_name(a), "Europe/Berlin");
    cr_assert_str_eq(ql_tz_name(c), "UTC");
    ql_tzcache_free(cache);
}

Test(tzcache, unknown_name_fails_every_time) {
    ql_tzcache_t *cache = NULL;
    cr_assert_eq(ql_tzcache_new(&cache), 0);
    const ql_tz_t *tz = NULL;
    cr_assert_eq(ql_tzcache_get(cache, "No/Such_Zone", &tz), QL_EINVAL);
    cr_assert_eq(ql_tzcache_get(cache, "No/Such_Zone", &tz), QL_EINVAL);
    cr_assert_null(tz);
    ql_tzcache_free(cache);
}

/* ---- instant -> civil ---- */

Test(tz_to_civil, worked_example_shanghai) {
    ql_tz_t *tz = load("Asia/Shanghai");
    ql_civil_t c;
    ql_tz_to_civil(tz, 1788228000000, &c);
    assert_civil(&c, 2026, 9, 1, 10, 0, 0, 0);
    ql_tz_free(tz);
}

Test(tz_to_civil, negative_ms_floor_division) {
    ql_tz_t *tz = load("UTC");
    ql_civil_t c;
    ql_tz_to_civil(tz, -1, &c);
    assert_civil(&c, 1969, 12, 31, 23, 59, 59, 999);
    ql_tz_to_civil(tz, -1000, &c);
    assert_civil(&c, 1969, 12, 31, 23, 59, 59, 0);
    ql_tz_to_civil(tz, -1001, &c);
    assert_civil(&c, 1969, 12, 31, 23, 59, 58, 999);
    ql_tz_to_civil(tz, 999, &c);
    assert_civil(&c, 1970, 1, 1, 0, 0, 0, 999);
    ql_tz_free(tz);
}

Test(tz_to_civil, negative_ms_in_a_zone) {
    /* 1969-12-31 23:59:59.999 UTC is 1969-12-31 19:59:59.999 in New York (EST). */
    ql_tz_t *tz = load("America/New_York");
    ql_civil_t c;
    ql_tz_to_civil(tz, -1, &c);
    assert_civil(&c, 1969, 12, 31, 18, 59, 59, 999);
    ql_tz_free(tz);
}

Test(tz_to_civil, int64_extremes) {
    ql_tz_t *tz = load("UTC");
    ql_civil_t c;
    ql_tz_to_civil(tz, INT64_MAX, &c);
    assert_civil(&c, 292278994, 8, 17, 7, 12, 55, 807);
    ql_tz_to_civil(tz, INT64_MIN, &c);
    assert_civil(&c, -292275055, 5, 16, 16, 47, 4, 192);
    ql_tz_free(tz);
    /* A zone with rules: no crash, and the year is as far out. */
    tz = load("Europe/Berlin");
    ql_tz_to_civil(tz, INT64_MAX, &c);
    cr_assert_eq(c.year, 292278994);
    ql_tz_free(tz);
}

Test(tz_to_civil, mexico_city_has_no_dst_since_2022) {
    /* ICU 72's tzdata 2022e would say 13:00 (CDT); the current rules say 12:00 CST. */
    ql_tz_t *tz = load("America/Mexico_City");
    ql_civil_t c;
    ql_tz_to_civil(tz, 1782928800000, &c); /* 2026-07-01 18:00:00 UTC */
    assert_civil(&c, 2026, 7, 1, 12, 0, 0, 0);
    cr_assert_eq(ql_tz_offset_sec(tz, 1782928800000), -6 * 3600);
    ql_tz_free(tz);
}

/* ---- civil -> instant ---- */

Test(tz_from_civil, unique_time) {
    ql_tz_t *tz = load("Asia/Shanghai");
    cr_assert_eq(from_civil(tz, CIV(2026, 8, 31, 0, 0, 0)), 1788105600000);
    ql_civil_t c = {2026, 9, 1, 1, 0, 0, 250};
    int64_t ms;
    cr_assert_eq(ql_tz_from_civil(tz, &c, &ms), 0);
    cr_assert_eq(ms, 1788195600250);
    ql_tz_free(tz);
}

Test(tz_from_civil, mexico_city_noon_is_18_utc) {
    ql_tz_t *tz = load("America/Mexico_City");
    cr_assert_eq(from_civil(tz, CIV(2026, 7, 1, 12, 0, 0)), 1782928800000);
    ql_tz_free(tz);
}

Test(tz_from_civil, new_york_gap_moves_later_by_the_gap) {
    ql_tz_t *tz = load("America/New_York");
    /* 2026-03-08 02:30 does not exist: java.time gives 03:30 EDT. */
    cr_assert_eq(from_civil(tz, CIV(2026, 3, 8, 2, 30, 0)), 1772955000000);
    ql_tz_kind_t kind;
    int64_t pre, post;
    ql_civil_t c = CIV(2026, 3, 8, 2, 30, 0);
    cr_assert_eq(ql_tz_lookup(tz, &c, &kind, &pre, &post), 0);
    cr_assert_eq(kind, QL_TZ_SKIPPED);
    cr_assert_eq(pre, 1772955000000);  /* 02:30 at -05:00 = 03:30 EDT */
    cr_assert_eq(post, 1772951400000); /* 02:30 at -04:00 = 01:30 EST */
    ql_civil_t back;
    ql_tz_to_civil(tz, pre, &back);
    assert_civil(&back, 2026, 3, 8, 3, 30, 0, 0);
    ql_tz_free(tz);
}

Test(tz_from_civil, new_york_repeated_takes_the_earlier_edt) {
    ql_tz_t *tz = load("America/New_York");
    cr_assert_eq(from_civil(tz, CIV(2026, 11, 1, 1, 30, 0)), 1793511000000);
    ql_tz_kind_t kind;
    int64_t pre, post;
    ql_civil_t c = CIV(2026, 11, 1, 1, 30, 0);
    cr_assert_eq(ql_tz_lookup(tz, &c, &kind, &pre, &post), 0);
    cr_assert_eq(kind, QL_TZ_REPEATED);
    cr_assert_eq(pre, 1793511000000);  /* 01:30 EDT (-04:00) */
    cr_assert_eq(post, 1793514600000); /* 01:30 EST (-05:00) */
    cr_assert_eq(ql_tz_offset_sec(tz, pre), -4 * 3600);
    cr_assert_eq(ql_tz_offset_sec(tz, post), -5 * 3600);
    ql_tz_free(tz);
}

Test(tz_from_civil, berlin_gap_and_repeat) {
    ql_tz_t *tz = load("Europe/Berlin");
    cr_assert_eq(from_civil(tz, CIV(2026, 3, 29, 2, 30, 0)), 1774747800000);  /* 03:30 CEST */
    cr_assert_eq(from_civil(tz, CIV(2026, 10, 25, 2, 30, 0)), 1792888200000); /* 02:30 CEST */
    ql_tz_free(tz);
}

Test(tz_from_civil, lord_howe_half_hour_shift) {
    ql_tz_t *tz = load("Australia/Lord_Howe");
    /* Spring: 02:00 +10:30 -> 02:30 +11:00; 02:15 is skipped and becomes 02:45. */
    cr_assert_eq(from_civil(tz, CIV(2026, 10, 4, 2, 15, 0)), 1791042300000);
    ql_civil_t c;
    ql_tz_to_civil(tz, 1791042300000, &c);
    assert_civil(&c, 2026, 10, 4, 2, 45, 0, 0);
    /* Autumn: 02:00 +11:00 -> 01:30 +10:30; 01:45 occurs twice, the first is +11:00. */
    ql_tz_kind_t kind;
    int64_t pre, post;
    c = CIV(2026, 4, 5, 1, 45, 0);
    cr_assert_eq(ql_tz_lookup(tz, &c, &kind, &pre, &post), 0);
    cr_assert_eq(kind, QL_TZ_REPEATED);
    cr_assert_eq(pre, 1775313900000);
    cr_assert_eq(post, 1775315700000);
    cr_assert_eq(post - pre, 30 * 60 * 1000, "a 30-minute repeat");
    ql_tz_free(tz);
}

Test(tz_from_civil, apia_skipped_day) {
    /* Samoa skipped 2011-12-30 entirely (-10:00 -> +14:00): java.time moves it 24 h later. */
    ql_tz_t *tz = load("Pacific/Apia");
    cr_assert_eq(from_civil(tz, CIV(2011, 12, 30, 12, 0, 0)), 1325282400000);
    ql_civil_t c;
    ql_tz_to_civil(tz, 1325282400000, &c);
    assert_civil(&c, 2011, 12, 31, 12, 0, 0, 0);
    ql_tz_kind_t kind;
    c = CIV(2011, 12, 30, 0, 0, 0);
    cr_assert_eq(ql_tz_lookup(tz, &c, &kind, NULL, NULL), 0);
    cr_assert_eq(kind, QL_TZ_SKIPPED);
    /* 12-30 00:00 and 12-31 00:00 are the same instant. */
    cr_assert_eq(from_civil(tz, CIV(2011, 12, 30, 0, 0, 0)),
                 from_civil(tz, CIV(2011, 12, 31, 0, 0, 0)));
    /* Midnight ending 12-29 (-10:00) is the instant 12-31 00:00 (+14:00): no real time lost. */
    cr_assert_eq(from_civil(tz, CIV(2011, 12, 31, 0, 0, 0)) -
                     from_civil(tz, CIV(2011, 12, 29, 0, 0, 0)),
                 86400000);
    ql_tz_free(tz);
}

Test(tz_from_civil, invalid_fields_are_einval_not_normalised) {
    ql_tz_t *tz = load("UTC");
    int64_t ms = 42;
    ql_civil_t bad[] = {
        CIV(2026, 2, 30, 0, 0, 0), CIV(2026, 2, 29, 0, 0, 0),
        CIV(2026, 13, 1, 0, 0, 0), CIV(2026, 0, 1, 0, 0, 0),
        CIV(2026, 4, 31, 0, 0, 0), CIV(2026, 1, 0, 0, 0, 0),
        CIV(2026, 1, 1, 24, 0, 0), CIV(2026, 1, 1, -1, 0, 0),
        CIV(2026, 1, 1, 0, 60, 0), CIV(2026, 1, 1, 0, 0, 60),
        CIV(1900, 2, 29, 0, 0, 0), {2026, 1, 1, 0, 0, 0, 1000},
        {2026, 1, 1, 0, 0, 0, -1}, CIV(QL_CIVIL_YEAR_MAX + 1, 1, 1, 0, 0, 0),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(ql_tz_from_civil(tz, &bad[i], &ms), QL_EINVAL, "case %zu", i);
        cr_assert_eq(ql_tz_lookup(tz, &bad[i], NULL, NULL, NULL), QL_EINVAL, "case %zu", i);
        cr_assert_eq(ql_civil_check(&bad[i]), QL_EINVAL, "case %zu", i);
    }
    cr_assert_eq(ms, 42, "out must be untouched on error");
    ql_civil_t leap = CIV(2024, 2, 29, 23, 59, 59), y2000 = CIV(2000, 2, 29, 0, 0, 0);
    cr_assert_eq(ql_civil_check(&leap), 0);
    cr_assert_eq(ql_civil_check(&y2000), 0);
    cr_assert_eq(ql_civil_check(NULL), QL_EINVAL);
    ql_tz_free(tz);
}

Test(tz_from_civil, year_range_ends_convert_without_overflow) {
    ql_tz_t *tz = load("Pacific/Kiritimati"); /* +14:00 */
    ql_civil_t lo = {QL_CIVIL_YEAR_MIN, 1, 1, 0, 0, 0, 0};
    ql_civil_t hi = {QL_CIVIL_YEAR_MAX, 12, 31, 23, 59, 59, 999};
    int64_t a, b;
    cr_assert_eq(ql_tz_from_civil(tz, &lo, &a), 0);
    cr_assert_eq(ql_tz_from_civil(tz, &hi, &b), 0);
    ql_civil_t back;
    ql_tz_to_civil(tz, b, &back);
    assert_civil(&back, QL_CIVIL_YEAR_MAX, 12, 31, 23, 59, 59, 999);
    ql_tz_to_civil(tz, a, &back);
    cr_assert_eq(back.year, QL_CIVIL_YEAR_MIN);
    cr_assert_lt(a, b);
    ql_tz_free(tz);
}

Test(tz_from_civil, round_trip_every_hour_of_a_dst_year) {
    /* Every instant maps to a wall time whose lookup lists that instant as pre or post. */
    ql_tz_t *tz = load("America/New_York");
    int64_t t0 = from_civil(tz, CIV(2026, 1, 1, 0, 0, 0));
    for (int64_t t = t0; t < t0 + 366LL * 86400000; t += 15 * 60 * 1000) {
        ql_civil_t c;
        ql_tz_to_civil(tz, t, &c);
        ql_tz_kind_t kind;
        int64_t pre, post;
        cr_assert_eq(ql_tz_lookup(tz, &c, &kind, &pre, &post), 0);
        cr_assert_neq(kind, QL_TZ_SKIPPED);
        cr_assert(t == pre || t == post, "t=%lld", (long long)t);
    }
    ql_tz_free(tz);
}

/* ---- civil arithmetic ---- */

Test(civil_add_days, normalises_month_and_year) {
    ql_civil_t c = {2026, 3, 1, 7, 8, 9, 10}, r;
    cr_assert_eq(ql_civil_add_days(&c, -1, &r), 0);
    assert_civil(&r, 2026, 2, 28, 7, 8, 9, 10);
    c = CIV(2024, 2, 28, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&c, 1, &r), 0);
    assert_civil(&r, 2024, 2, 29, 0, 0, 0, 0);
    c = CIV(2026, 12, 31, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&c, 1, &r), 0);
    assert_civil(&r, 2027, 1, 1, 0, 0, 0, 0);
    c = CIV(2026, 1, 1, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&c, -1, &r), 0);
    assert_civil(&r, 2025, 12, 31, 0, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&c, 36500, &r), 0);
    assert_civil(&r, 2125, 12, 8, 0, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&c, 0, &r), 0);
    assert_civil(&r, 2026, 1, 1, 0, 0, 0, 0);
}

Test(civil_add_days, aliasing_and_invalid_input) {
    ql_civil_t c = CIV(2026, 9, 1, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&c, -1, &c), 0);
    assert_civil(&c, 2026, 8, 31, 0, 0, 0, 0);
    ql_civil_t bad = CIV(2026, 2, 30, 0, 0, 0), r;
    cr_assert_eq(ql_civil_add_days(&bad, 1, &r), QL_EINVAL);
    cr_assert_eq(ql_civil_add_days(&c, INT64_MAX, &r), QL_EINVAL);
    cr_assert_eq(ql_civil_add_days(&c, INT64_MIN, &r), QL_EINVAL);
    ql_civil_t top = CIV(QL_CIVIL_YEAR_MAX, 12, 31, 0, 0, 0);
    cr_assert_eq(ql_civil_add_days(&top, 1, &r), QL_EINVAL);
}

Test(civil_utc_ms, serial_both_ways) {
    ql_civil_t c;
    ql_civil_from_utc_ms(-1, &c);
    assert_civil(&c, 1969, 12, 31, 23, 59, 59, 999);
    int64_t ms;
    cr_assert_eq(ql_civil_to_utc_ms(&c, &ms), 0);
    cr_assert_eq(ms, -1);
    c = (ql_civil_t){1, 1, 1, 0, 0, 0, 0};
    cr_assert_eq(ql_civil_to_utc_ms(&c, &ms), 0);
    cr_assert_eq(ms, -62135596800000LL, "proleptic Gregorian 0001-01-01");
    c = CIV(2026, 2, 30, 0, 0, 0);
    cr_assert_eq(ql_civil_to_utc_ms(&c, &ms), QL_EINVAL);
}

Test(civil_cmp, orders_field_by_field) {
    ql_civil_t a = {2026, 1, 1, 0, 0, 0, 1}, b = {2026, 1, 1, 0, 0, 0, 0};
    cr_assert_gt(ql_civil_cmp(&a, &b), 0);
    cr_assert_lt(ql_civil_cmp(&b, &a), 0);
    cr_assert_eq(ql_civil_cmp(&a, &a), 0);
    ql_civil_t c = {-5, 12, 31, 23, 59, 59, 999};
    cr_assert_lt(ql_civil_cmp(&c, &b), 0);
    cr_assert_eq(ql_civil_days_in_month(2026, 2), 28);
    cr_assert_eq(ql_civil_days_in_month(2000, 2), 29);
    cr_assert_eq(ql_civil_days_in_month(2100, 2), 28);
    cr_assert_eq(ql_civil_days_in_month(-4, 2), 29);
    cr_assert_eq(ql_civil_days_in_month(2026, 13), 0);
}
