/* Partition date formats on ICU's udat, applied to wall times only (see ql_datefmt.h). */
#include "base/ql_datefmt.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/ucal.h>
#include <unicode/udat.h>
#include <unicode/ustring.h>
#include <uv.h>

/* Formatted text is at most a few characters per pattern character (MMMM -> "September"). */
#define UBUF_MAX (QL_DATEFMT_PATTERN_MAX * 12 + 16)

/*
 * The granularity truncation floors to, when the pattern's fields say it alone: a chain from the
 * year down (check_pattern) whose smallest field is FLOOR_x. FLOOR_ROUND_TRIP: ask ICU (format,
 * then parse back), for patterns with a day of year, whose fields ICU resolves together, and
 * with a one-letter year, which ICU reads back as a two-digit year when it has two digits.
 */
typedef enum floor_unit {
    FLOOR_ROUND_TRIP,
    FLOOR_YEAR,
    FLOOR_MONTH,
    FLOOR_DAY,
    FLOOR_HOUR,
    FLOOR_MINUTE,
    FLOOR_SECOND,
    FLOOR_MS
} floor_unit_t;

struct ql_datefmt {
    UDateFormat *udf;
    floor_unit_t floor;
    char pattern[QL_DATEFMT_PATTERN_MAX + 1];
};

static const UChar utc_id[] = {'U', 'T', 'C', 0};

/* Which fields a pattern has; filled by check_pattern. */
typedef struct fields {
    bool year, month, day, doy, hour24, hour12, ampm, minute, second, ms;
    bool short_year; /* 'y' alone: ICU (like Java) parses two digits as an abbreviated year */
} fields_t;

#define PFX "field 'partition_date_format': pattern '%.64s': "

static bool is_letter(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* Validates one run of `count` copies of pattern letter c. */
static int check_letter(const char *pattern, char c, size_t count, fields_t *f, ql_err_t *err) {
    switch (c) {
    case 'y':
        if (count == 2)
            return ql_err_set(err, QL_EINVAL,
                              PFX "two-digit year 'yy' is ambiguous (its century depends on the "
                                  "current date); use 'yyyy'",
                              pattern);
        f->year = true;
        f->short_year |= count < 3;
        return 0;
    case 'M':
    case 'L':
        if (count > 4)
            return ql_err_set(err, QL_EINVAL,
                              PFX "'%c' repeated more than 4 times is not supported (ICU reads "
                                  "it as a one-letter month name that cannot be parsed back)",
                              pattern, c);
        f->month = true;
        return 0;
    case 'd':
        f->day = true;
        return 0;
    case 'D':
        f->doy = true;
        return 0;
    case 'H':
    case 'k':
        f->hour24 = true;
        return 0;
    case 'h':
    case 'K':
        f->hour12 = true;
        return 0;
    case 'a':
        if (count > 3)
            return ql_err_set(err, QL_EINVAL, PFX "'a' repeated more than 3 times is not supported",
                              pattern);
        f->ampm = true;
        return 0;
    case 'm':
        f->minute = true;
        return 0;
    case 's':
        f->second = true;
        return 0;
    case 'S':
        if (count != 3)
            return ql_err_set(err, QL_EINVAL,
                              PFX "milliseconds must be written 'SSS' (for other widths Java's "
                                  "milliseconds and ICU's fractional seconds differ)",
                              pattern);
        f->ms = true;
        return 0;
    case 'z':
    case 'Z':
    case 'X':
        return ql_err_set(err, QL_EINVAL,
                          PFX "time-zone field '%c' is not supported: partition values are wall "
                              "times in the project time zone",
                          pattern, c);
    case 'G':
    case 'E':
    case 'F':
    case 'u':
    case 'w':
    case 'W':
    case 'Y':
        return ql_err_set(err, QL_EINVAL,
                          PFX "field '%c' (era, day of week or week) cannot be converted back to "
                              "a date; use y, M, d, H, m, s, SSS",
                          pattern, c);
    default:
        return ql_err_set(err, QL_EINVAL, PFX "illegal pattern character '%c'", pattern, c);
    }
}

/*
 * Walks pattern as Java's SimpleDateFormat compiles it (letter runs, quoted text, literals) and
 * applies the rules of ql_datefmt.h. ICU accepts many letters Java does not, and fails on some
 * only when formatting, so this check comes first.
 */
static int check_pattern(const char *pattern, fields_t *fields, ql_err_t *err) {
    size_t n = strlen(pattern);
    if (n == 0)
        return ql_err_set(err, QL_EINVAL, "field 'partition_date_format': must not be empty");
    if (n > QL_DATEFMT_PATTERN_MAX)
        return ql_err_set(err, QL_EINVAL, "field 'partition_date_format': longer than %d bytes",
                          QL_DATEFMT_PATTERN_MAX);
    fields_t f = {0};
    for (size_t i = 0; i < n;) {
        char c = pattern[i];
        if (c == '\'') {
            if (pattern[i + 1] == '\'') { /* '' is a literal quote */
                i += 2;
                continue;
            }
            i++;
            for (;;) {
                if (pattern[i] == '\0')
                    return ql_err_set(err, QL_EINVAL, PFX "unterminated quote", pattern);
                if (pattern[i] == '\'') {
                    if (pattern[i + 1] == '\'') {
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                i++;
            }
            continue;
        }
        if (!is_letter(c)) {
            i++;
            continue;
        }
        size_t count = 0;
        while (pattern[i] == c) {
            count++;
            i++;
        }
        int rc = check_letter(pattern, c, count, &f, err);
        if (rc != 0)
            return rc;
    }
    /* The chain rule: each field needs the next coarser one, so truncation is one floor. */
    if (!f.year)
        return ql_err_set(err, QL_EINVAL, PFX "has no year (y)", pattern);
    if (f.day && !f.month)
        return ql_err_set(err, QL_EINVAL, PFX "has a day of month (d) but no month (M)", pattern);
    if (f.hour12 && !f.ampm)
        return ql_err_set(err, QL_EINVAL,
                          PFX "has a 12-hour field (h or K) but no am/pm marker (a)", pattern);
    bool has_date = (f.month && f.day) || f.doy;
    bool has_hour = f.hour24 || f.hour12;
    if (has_hour && !has_date)
        return ql_err_set(err, QL_EINVAL, PFX "has an hour but no full date (y, M and d)", pattern);
    if (f.minute && !has_hour)
        return ql_err_set(err, QL_EINVAL, PFX "has minutes (m) but no hour (H)", pattern);
    if (f.second && !f.minute)
        return ql_err_set(err, QL_EINVAL, PFX "has seconds (s) but no minutes (m)", pattern);
    if (f.ms && !f.second)
        return ql_err_set(err, QL_EINVAL, PFX "has milliseconds (SSS) but no seconds (s)", pattern);
    *fields = f;
    return 0;
}

/* The smallest field of a chain (check_pattern passed) is what truncation floors to. */
static floor_unit_t floor_of(const fields_t *f) {
    if (f->doy || f->short_year)
        return FLOOR_ROUND_TRIP;
    if (f->ms)
        return FLOOR_MS;
    if (f->second)
        return FLOOR_SECOND;
    if (f->minute)
        return FLOOR_MINUTE;
    if (f->hour24 || f->hour12)
        return FLOOR_HOUR;
    if (f->day)
        return FLOOR_DAY;
    return f->month ? FLOOR_MONTH : FLOOR_YEAR;
}

int ql_datefmt_open(const char *pattern, ql_datefmt_t **out, ql_err_t *err) {
    if (pattern == NULL || out == NULL)
        return ql_err_set(err, QL_EINVAL, "field 'partition_date_format': missing");
    fields_t fields = {0};
    int rc = check_pattern(pattern, &fields, err);
    if (rc != 0)
        return rc;

    UChar upat[QL_DATEFMT_PATTERN_MAX + 1];
    int32_t ulen = 0;
    UErrorCode st = U_ZERO_ERROR;
    u_strFromUTF8(upat, (int32_t)(sizeof upat / sizeof upat[0]), &ulen, pattern, -1, &st);
    if (U_FAILURE(st) || st == U_STRING_NOT_TERMINATED_WARNING)
        return ql_err_set(err, QL_EINVAL, PFX "not valid UTF-8", pattern);

    ql_datefmt_t *fmt = calloc(1, sizeof *fmt);
    if (fmt == NULL)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    memcpy(fmt->pattern, pattern, strlen(pattern) + 1);
    fmt->floor = floor_of(&fields);

    st = U_ZERO_ERROR;
    fmt->udf = udat_open(UDAT_PATTERN, UDAT_PATTERN, "en_US_POSIX", utc_id, -1, upat, ulen, &st);
    if (U_FAILURE(st) || fmt->udf == NULL) {
        free(fmt);
        return ql_err_set(err, QL_EINVAL, PFX "rejected by ICU: %s", pattern, u_errorName(st));
    }
    /*
     * A pure Gregorian calendar, like CCTZ's civil time: ICU's default calendar is Julian
     * before 1582-10-15, which would shift old dates by days. -8.64e15 ms (year -271821) is
     * before every supported year.
     */
    UCalendar *cal = ucal_open(utc_id, -1, "en_US_POSIX", UCAL_GREGORIAN, &st);
    if (U_SUCCESS(st))
        ucal_setGregorianChange(cal, -8.64e15, &st);
    if (U_SUCCESS(st))
        udat_setCalendar(fmt->udf, cal); /* copies cal */
    if (cal != NULL)
        ucal_close(cal);
    /* After setCalendar: leniency lives partly in the calendar. Strict whitespace and literals. */
    udat_setLenient(fmt->udf, false);
    if (U_SUCCESS(st))
        udat_setBooleanAttribute(fmt->udf, UDAT_PARSE_ALLOW_WHITESPACE, false, &st);
    if (U_SUCCESS(st))
        udat_setBooleanAttribute(fmt->udf, UDAT_PARSE_ALLOW_NUMERIC, false, &st);
    if (U_SUCCESS(st))
        udat_setBooleanAttribute(fmt->udf, UDAT_PARSE_PARTIAL_LITERAL_MATCH, false, &st);
    if (U_SUCCESS(st))
        udat_setBooleanAttribute(fmt->udf, UDAT_PARSE_MULTIPLE_PATTERNS_FOR_MATCH, false, &st);
    if (U_FAILURE(st)) {
        ql_datefmt_free(fmt);
        return ql_err_set(err, QL_EINVAL, PFX "ICU calendar setup failed: %s", pattern,
                          u_errorName(st));
    }
    *out = fmt;
    return 0;
}

void ql_datefmt_free(ql_datefmt_t *fmt) {
    if (fmt == NULL)
        return;
    if (fmt->udf != NULL)
        udat_close(fmt->udf);
    free(fmt);
}

const char *ql_datefmt_pattern(const ql_datefmt_t *fmt) {
    return fmt->pattern;
}

static bool supported_year(int64_t year) {
    return year >= QL_DATEFMT_YEAR_MIN && year <= QL_DATEFMT_YEAR_MAX;
}

/* Formats wall (as if UTC) into ubuf; returns the UTF-16 length or a negative error. */
static int format_utf16(const ql_datefmt_t *fmt, const ql_civil_t *wall, UChar *ubuf, int32_t cap) {
    int64_t ms;
    if (ql_civil_check(wall) != 0 || !supported_year(wall->year) ||
        ql_civil_to_utc_ms(wall, &ms) != 0)
        return QL_EINVAL;
    UErrorCode st = U_ZERO_ERROR;
    int32_t len = udat_format(fmt->udf, (UDate)ms, ubuf, cap, NULL, &st);
    if (st == U_BUFFER_OVERFLOW_ERROR || st == U_STRING_NOT_TERMINATED_WARNING)
        return QL_ETOOBIG;
    if (U_FAILURE(st))
        return QL_EINVAL;
    return len;
}

/* Parses ubuf[0..len) entirely (as if UTC) into wall. */
static int parse_utf16(const ql_datefmt_t *fmt, const UChar *ubuf, int32_t len, ql_civil_t *wall) {
    UErrorCode st = U_ZERO_ERROR;
    int32_t pos = 0;
    UDate d = udat_parse(fmt->udf, ubuf, len, &pos, &st);
    /* udat_parse stops where the pattern ends and reports success: demand the whole text. */
    if (U_FAILURE(st) || pos != len)
        return QL_EINVAL;
    /* Years 1..9999 are within +-2.6e14 ms; anything else (or a NaN) is out of range. */
    if (!isfinite(d) || d < -1e15 || d > 1e15 || d != floor(d))
        return QL_EINVAL;
    ql_civil_t c;
    ql_civil_from_utc_ms((int64_t)d, &c);
    if (!supported_year(c.year))
        return QL_EINVAL;
    *wall = c;
    return 0;
}

int ql_datefmt_format(const ql_datefmt_t *fmt, const ql_civil_t *wall, char *buf, size_t n) {
    UChar ubuf[UBUF_MAX];
    int len = format_utf16(fmt, wall, ubuf, UBUF_MAX);
    if (len < 0)
        return len;
    if (n == 0)
        return QL_ETOOBIG;
    int32_t cap = n > INT32_MAX ? INT32_MAX : (int32_t)n;
    UErrorCode st = U_ZERO_ERROR;
    int32_t out_len = 0;
    u_strToUTF8(buf, cap, &out_len, ubuf, len, &st);
    if (U_FAILURE(st) || st == U_STRING_NOT_TERMINATED_WARNING) {
        buf[0] = '\0';
        return st == U_BUFFER_OVERFLOW_ERROR || st == U_STRING_NOT_TERMINATED_WARNING ? QL_ETOOBIG
                                                                                      : QL_EINVAL;
    }
    return 0;
}

int ql_datefmt_parse(const ql_datefmt_t *fmt, const char *text, ql_civil_t *wall) {
    if (text == NULL)
        return QL_EINVAL;
    UChar ubuf[UBUF_MAX];
    int32_t len = 0;
    UErrorCode st = U_ZERO_ERROR;
    u_strFromUTF8(ubuf, UBUF_MAX, &len, text, -1, &st);
    if (U_FAILURE(st) || st == U_STRING_NOT_TERMINATED_WARNING)
        return QL_EINVAL; /* invalid UTF-8 or longer than any formatted value */
    ql_civil_t c;
    int rc = parse_utf16(fmt, ubuf, len, &c);
    if (rc != 0)
        return rc;
    /*
     * ICU (like Java) skips whitespace before a numeric field even when not lenient, accepts
     * short numbers ("2026-1-5") and ignores case in names: accept only the text the pattern
     * itself would print, so one wall time has one spelling.
     */
    UChar canon[UBUF_MAX];
    int clen = format_utf16(fmt, &c, canon, UBUF_MAX);
    if (clen != len || memcmp(canon, ubuf, (size_t)len * sizeof(UChar)) != 0)
        return QL_EINVAL;
    *wall = c;
    return 0;
}

/*
 * Truncation without ICU: the same result as the round trip below (tests/base/test_datefmt.c
 * compares the two over every supported pattern shape), at a fraction of its cost; a build
 * request normalizes two instants, and the dispatcher one per model and cycle.
 */
static int floor_civil(floor_unit_t unit, const ql_civil_t *in, ql_civil_t *out) {
    if (ql_civil_check(in) != 0 || !supported_year(in->year))
        return QL_EINVAL;
    ql_civil_t t = *in;
    if (unit < FLOOR_MS)
        t.ms = 0;
    if (unit < FLOOR_SECOND)
        t.second = 0;
    if (unit < FLOOR_MINUTE)
        t.minute = 0;
    if (unit < FLOOR_HOUR)
        t.hour = 0;
    if (unit < FLOOR_DAY)
        t.day = 1;
    if (unit < FLOOR_MONTH)
        t.month = 1;
    *out = t;
    return 0;
}

int ql_datefmt_truncate(const ql_datefmt_t *fmt, const ql_civil_t *in, ql_civil_t *out) {
    if (fmt->floor != FLOOR_ROUND_TRIP)
        return floor_civil(fmt->floor, in, out);
    UChar ubuf[UBUF_MAX];
    int len = format_utf16(fmt, in, ubuf, UBUF_MAX);
    if (len < 0)
        return len;
    ql_civil_t t;
    int rc = parse_utf16(fmt, ubuf, len, &t);
    if (rc != 0)
        return rc;
    /* The chain rule of check_pattern makes this a floor; guard it, normalization relies on it. */
    if (ql_civil_cmp(&t, in) > 0)
        return QL_EINVAL;
    *out = t;
    return 0;
}

/*
 * The rule (docs/design/auto-segment-build.md step 3, [decided]): the normalized instant is the
 * LATEST instant not after epoch_ms whose wall time in tz is the truncated wall time W.
 *   - W unique: its one instant.
 *   - W repeated (a fall-back hour): the second instant (post-transition offset) if it is not
 *     after epoch_ms, else the first. An instant thus keeps its own offset: 01:30 EST truncated
 *     to the hour is 01:00 EST, 01:30 EDT is 01:00 EDT. (Kylin's SimpleDateFormat round trip
 *     would always pick one of the two; we do not copy that.)
 *   - W skipped (a gap): no instant has that wall time; resolve like java.time, later by the
 *     gap's length (CCTZ's pre). With the chain rule W is a floor to a unit boundary, and real
 *     gaps start on such boundaries, so this is still not after epoch_ms.
 * Since W is a floor of epoch_ms's own wall time, the normalization of an instant already on
 * the format's granularity is the instant itself.
 */
int ql_normalize_instant(const ql_tz_t *tz, const ql_datefmt_t *fmt, int64_t epoch_ms,
                         int64_t *out) {
    ql_civil_t wall, trunc;
    ql_tz_to_civil(tz, epoch_ms, &wall);
    int rc = ql_datefmt_truncate(fmt, &wall, &trunc);
    if (rc != 0)
        return rc;
    ql_tz_kind_t kind;
    int64_t pre, post;
    rc = ql_tz_lookup(tz, &trunc, &kind, &pre, &post);
    if (rc != 0)
        return rc;
    *out = (kind == QL_TZ_REPEATED && post <= epoch_ms) ? post : pre;
    return 0;
}

int ql_normalize_range(const ql_tz_t *tz, const ql_datefmt_t *fmt, int64_t start, int64_t end,
                       int64_t *ns, int64_t *ne) {
    int64_t s, e;
    int rc = ql_normalize_instant(tz, fmt, start, &s);
    if (rc == 0)
        rc = ql_normalize_instant(tz, fmt, end, &e);
    if (rc != 0)
        return rc;
    *ns = s;
    *ne = e;
    return s >= e ? QL_EEMPTYRANGE : 0;
}
