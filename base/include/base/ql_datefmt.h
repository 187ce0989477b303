/*
 * Partition date formats (Java SimpleDateFormat patterns) and range normalization.
 *
 * DESIGN. A model's partition_date_format ("yyyy-MM-dd", "yyyyMMdd", "yyyy-MM-dd HH:mm:ss",
 * "yyyyMM", ...) decides the granularity of its segment boundaries. Patterns are formatted and
 * parsed with ICU's C API (udat), but ICU only ever sees WALL times: the formatter runs in UTC
 * and a civil time is handed to it as if it were a UTC instant, so ICU's built-in zone rules
 * (tzdata 2022e on Debian 12, wrong for zones changed since) never matter. Zone rules come from
 * ql_time.h (CCTZ, system tzdata). The formatter is non-lenient (2026-02-30 does not parse),
 * uses the "en_US_POSIX" locale (ASCII digits, English month names) and the proleptic Gregorian
 * calendar (ICU's default switches to Julian before 1582; CCTZ never does).
 *
 * Patterns. Accepted are the Java SimpleDateFormat letters that round-trip through a wall time:
 *   y (not "yy")  M / L (1..4 letters)  d  D  H  k  h / K (only with a)  a  m  s  SSS
 * plus quoted text ('T', '' for a quote) and any non-letter literal. Rejected, with a message
 * naming the field partition_date_format:
 *   - letters Java rejects ("illegal pattern character"), an unterminated quote, an empty
 *     pattern or one longer than QL_DATEFMT_PATTERN_MAX bytes;
 *   - zone fields (z Z X) and text or week fields (G E F u w W Y) that cannot round-trip;
 *   - "yy" (two-digit year: the century would come from "now"), "MMMMM" and any S other than
 *     "SSS": there ICU and Java disagree (ICU's S is fractional seconds: "S" is tenths, Java's
 *     is milliseconds; ICU's MMMMM is a one-letter narrow name, Java's is the full name);
 *     "u" is ICU's extended year but Java's day-of-week number;
 *   - patterns whose fields are not a chain from the year down: a year is required, a day of
 *     month needs a month, an hour needs a day, a minute an hour, a second a minute,
 *     milliseconds a second. So truncation is always a floor to one granularity (monotonic, never
 *     later than its input), which normalization relies on.
 * Supported wall times have years QL_DATEFMT_YEAR_MIN..QL_DATEFMT_YEAR_MAX: a fixed-width
 * "yyyy" cannot be parsed back unambiguously outside them, and year 0 would need an era.
 *
 * Threads and cost: ICU's UDateFormat is not thread-safe, so a ql_datefmt_t is used by one thread
 * at a time (even the const functions below use it internally). Opening one is expensive (ICU
 * loads locale data and builds a calendar): open a format once per distinct pattern and reuse it.
 */
#ifndef QL_DATEFMT_H
#define QL_DATEFMT_H

#include "base/ql_error.h"
#include "base/ql_time.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QL_DATEFMT_PATTERN_MAX 255
#define QL_DATEFMT_YEAR_MIN 1
#define QL_DATEFMT_YEAR_MAX 9999

typedef struct ql_datefmt ql_datefmt_t;

/*
 * Compiles pattern (UTF-8; a Java SimpleDateFormat pattern, see the rules above).
 * Returns 0 and a new format in *out, owned by the caller (free with ql_datefmt_free); QL_EINVAL
 * with err naming the field 'partition_date_format' and the reason; UV_ENOMEM; or QL_EINVAL when
 * ICU itself cannot build the formatter. err may be NULL.
 */
int ql_datefmt_open(const char *pattern, ql_datefmt_t **out, ql_err_t *err);

/* Frees a format (NULL is ignored). */
void ql_datefmt_free(ql_datefmt_t *fmt);

/* The pattern the format was opened with; borrowed, valid as long as fmt. */
const char *ql_datefmt_pattern(const ql_datefmt_t *fmt);

/*
 * Formats wall into buf (UTF-8, NUL-terminated, n bytes including the NUL).
 * Returns 0; QL_EINVAL if wall is invalid or its year is outside the supported years;
 * QL_ETOOBIG if buf is too small (buf then holds no partial text you should use).
 */
int ql_datefmt_format(const ql_datefmt_t *fmt, const ql_civil_t *wall, char *buf, size_t n);

/*
 * Parses text (UTF-8) as a wall time; fields the pattern lacks take 1970-01-01 00:00:00.000.
 * Stricter than Java: the text must be exactly what ql_datefmt_format prints for the result
 * (no leading, trailing or extra whitespace, no short numbers such as "2026-1-5" for
 * yyyy-MM-dd, month names in their printed case), so each wall time has one spelling.
 * Returns 0 and *wall; QL_EINVAL if the text does not match, names an impossible date
 * (2026-02-30) or a year outside the supported years.
 */
int ql_datefmt_parse(const ql_datefmt_t *fmt, const char *text, ql_civil_t *wall);

/*
 * Truncates in to the pattern's granularity: the wall time formatting it and parsing the text
 * back would give, so fields the pattern lacks take 1970-01-01 00:00:00.000 (yyyyMM keeps year
 * and month, day 1, 00:00:00.000). Computed without ICU when the pattern's smallest field decides
 * it (every pattern but those with a day of year D or a one-letter year y).
 * in and out may alias. Returns 0, or QL_EINVAL as for ql_datefmt_format.
 */
int ql_datefmt_truncate(const ql_datefmt_t *fmt, const ql_civil_t *in, ql_civil_t *out);

/*
 * Normalizes an instant with a partition date format in a time zone
 * (docs/design/auto-segment-build.md, step 3, [decided]): read epoch_ms as a wall time in tz,
 * truncate it with fmt; the result is the LATEST instant not after epoch_ms whose wall time in tz
 * is the truncated one. Inside a repeated hour an instant therefore keeps its own offset (01:30 EST
 * on the fall-back day with "yyyy-MM-dd HH" gives 01:00 EST, not 01:00 EDT). A truncated wall time
 * that falls in a gap resolves like java.time, later by the gap's length. Returns 0 and *out;
 * QL_EINVAL if the wall time's year is outside the supported years.
 */
int ql_normalize_instant(const ql_tz_t *tz, const ql_datefmt_t *fmt, int64_t epoch_ms,
                         int64_t *out);

/*
 * Normalizes both ends of the half-open range [start, end) with ql_normalize_instant.
 * Returns 0; QL_EEMPTYRANGE when the normalized start >= the normalized end (*ns and *ne are
 * still set, for the warning); or an error of ql_normalize_instant (outputs then unset).
 */
int ql_normalize_range(const ql_tz_t *tz, const ql_datefmt_t *fmt, int64_t start, int64_t end,
                       int64_t *ns, int64_t *ne);

#ifdef __cplusplus
}
#endif

#endif
