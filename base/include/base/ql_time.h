/*
 * Time zones and civil (wall-clock) time.
 *
 * DESIGN. An instant is an int64_t count of milliseconds since 1970-01-01 00:00:00 UTC (epoch
 * ms), negative before it. A civil time (ql_civil_t) is a wall-clock reading with no zone: the
 * proleptic Gregorian calendar, no leap seconds. Zone rules come from the system tz database
 * (Debian's tzdata, kept current) through Google's CCTZ, wrapped in base/tz.cc; ICU's own
 * zone data is never used (years out of date on Debian 12: see docs/design/metadata.md, Time).
 *
 * Wall time -> instant resolves like java.time's LocalDateTime.atZone(zone):
 *   - a wall time inside a gap (spring forward, a skipped day) moves later by the gap's length:
 *     2026-03-08 02:30 in America/New_York is 03:30 EDT;
 *   - a wall time that occurs twice (fall back) takes the EARLIER instant: 2026-11-01 01:30 in
 *     America/New_York is 01:30 EDT (-04:00), not EST.
 * CCTZ's time_zone::lookup(civil_second).pre is exactly this in both cases (its header's own
 * examples: SKIPPED 02:15 -> pre 03:15 -0700; REPEATED 01:15 -> pre 01:15 -0700, the first).
 *
 * Threads: a loaded ql_tz_t is immutable, so any number of threads may use one at once. A
 * ql_tzcache_t is used by one thread at a time. Nothing here has global mutable state of its
 * own; note that CCTZ itself keeps every zone it ever loaded in a process-wide map, which is why
 * ql_tz_load() checks that a zone file exists before asking CCTZ (so random names sent by
 * clients cannot grow that map).
 */
#ifndef QL_TIME_H
#define QL_TIME_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A wall-clock time. Valid ranges (ql_civil_check): year QL_CIVIL_YEAR_MIN..QL_CIVIL_YEAR_MAX,
 * month 1..12, day 1..days in that month, hour 0..23, minute 0..59, second 0..59, ms 0..999.
 * Every function that takes a ql_civil_t from a caller checks it and returns QL_EINVAL rather
 * than normalising (CCTZ would silently turn 2026-02-30 into 2026-03-02).
 */
typedef struct ql_civil {
    int64_t year;
    int month, day, hour, minute, second, ms;
} ql_civil_t;

/* Years whose every instant, in every zone, fits an int64_t epoch ms (with margin). */
#define QL_CIVIL_YEAR_MIN (-292000000LL)
#define QL_CIVIL_YEAR_MAX 292000000LL

/* Returns 0 if every field of c is in range, QL_EINVAL otherwise (also for c == NULL). */
int ql_civil_check(const ql_civil_t *c);

/* Compares two civil times field by field: negative, 0 or positive like strcmp. */
int ql_civil_cmp(const ql_civil_t *a, const ql_civil_t *b);

/* Number of days in month (1..12) of year, proleptic Gregorian; 0 for an invalid month. */
int ql_civil_days_in_month(int64_t year, int month);

/*
 * Adds days (may be negative) to the date of in, normalising month and year (2026-03-01 - 1 day
 * = 2026-02-28); the time of day is kept. in and out may alias.
 * Returns 0, or QL_EINVAL if in is invalid or the result's year leaves the valid range.
 */
int ql_civil_add_days(const ql_civil_t *in, int64_t days, ql_civil_t *out);

/*
 * The civil time of epoch_ms read in UTC, and back. ql_civil_from_utc_ms handles negative ms by
 * floor division (-1 ms is 1969-12-31 23:59:59.999). ql_civil_to_utc_ms returns QL_EINVAL for
 * an invalid c. These are the "treat a wall time as if it were UTC" serials used with ICU.
 */
void ql_civil_from_utc_ms(int64_t epoch_ms, ql_civil_t *out);
int ql_civil_to_utc_ms(const ql_civil_t *c, int64_t *out_ms);

/* A loaded time zone (opaque, immutable). */
typedef struct ql_tz ql_tz_t;

/*
 * Loads the IANA zone iana_name ("Asia/Shanghai", "UTC", "Etc/GMT-8") from the system tz
 * database. "UTC" always succeeds, without touching the disk.
 * Returns 0 and a new zone in *out, owned by the caller (free with ql_tz_free); QL_EINVAL when
 * the name is not a known zone: not a zone-name syntax ([A-Za-z][A-Za-z0-9._+-]* components
 * separated by '/', no "." or ".." component, at most 255 bytes), no such file, a file that is
 * not a zone, "localtime" (the host's zone, not a name) or "right/..." (leap-second zones);
 * UV_ENOMEM when out of memory. CCTZ's load_time_zone() falls back to UTC silently on failure:
 * its return value is checked, never ignored.
 */
int ql_tz_load(const char *iana_name, ql_tz_t **out);

/* Frees a zone from ql_tz_load (NULL is ignored). Never call it on a zone from a cache. */
void ql_tz_free(ql_tz_t *tz);

/* The name the zone was loaded with; borrowed, valid as long as tz. */
const char *ql_tz_name(const ql_tz_t *tz);

/* The wall time of epoch_ms in tz (any int64_t, floor division for negative ms). */
void ql_tz_to_civil(const ql_tz_t *tz, int64_t epoch_ms, ql_civil_t *out);

/* The UTC offset in effect at epoch_ms, in seconds east of UTC (Asia/Shanghai: 28800). */
int ql_tz_offset_sec(const ql_tz_t *tz, int64_t epoch_ms);

/* How a wall time maps to instants in a zone. */
typedef enum ql_tz_kind {
    QL_TZ_UNIQUE = 0, /* exactly one instant: pre == post */
    QL_TZ_SKIPPED,    /* in a gap, no instant: pre (later by the gap) > post (earlier) */
    QL_TZ_REPEATED,   /* occurs twice: pre (first, earlier) < post (second, later) */
} ql_tz_kind_t;

/*
 * Looks wall up in tz. pre_ms is wall read with the offset in effect before the transition,
 * post_ms with the offset after it; for a UNIQUE time both are the instant. Any output pointer
 * may be NULL. Returns 0, or QL_EINVAL if wall is invalid (ql_civil_check).
 */
int ql_tz_lookup(const ql_tz_t *tz, const ql_civil_t *wall, ql_tz_kind_t *kind, int64_t *pre_ms,
                 int64_t *post_ms);

/*
 * The instant of wall in tz, resolved like java.time (see DESIGN: the pre instant of the
 * lookup). Returns 0, or QL_EINVAL if wall is invalid.
 */
int ql_tz_from_civil(const ql_tz_t *tz, const ql_civil_t *wall, int64_t *out_ms);

/*
 * A cache of loaded zones by name, so that callers resolving the same few names on every scan
 * do not reload them. The caller owns the cache; it is used by one thread at a time.
 */
typedef struct ql_tzcache ql_tzcache_t;

/* Creates an empty cache in *out (owned by the caller). Returns 0 or UV_ENOMEM. */
int ql_tzcache_new(ql_tzcache_t **out);

/* Frees the cache and every zone in it (NULL is ignored). */
void ql_tzcache_free(ql_tzcache_t *cache);

/*
 * Returns in *out the zone named iana_name, loading it on first use (ql_tz_load rules and
 * errors). The zone is borrowed: valid until the cache is freed. Failed names are not cached,
 * so the cache holds at most one entry per zone file of the tz database.
 */
int ql_tzcache_get(ql_tzcache_t *cache, const char *iana_name, const ql_tz_t **out);

#ifdef __cplusplus
}
#endif

#endif
