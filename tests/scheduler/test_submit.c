/*
 * Build range normalization (scheduler/ql_submit.h): ql_submit_normalize and its cached variant
 * give the same ranges and the same errors, for every partition format of
 * docs/design/auto-segment-build.md step 3 in zones with and without DST, and the cache opens each
 * ICU format once (its counters), closes the least recently used one when full, and never
 * keeps a pattern that does not compile.
 */
#include "scheduler/ql_submit.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* The spec's formats, and two more granularities (an hour, a minute). */
static const char *const formats[] = {
    "yyyy-MM-dd", "yyyyMMdd", "yyyy-MM-dd HH:mm:ss", "yyyyMM", "yyyy-MM-dd HH", "yyyyMMddHHmm",
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

static int64_t utc_ms(int64_t y, int mo, int d, int h, int mi, int s, int ms) {
    ql_tz_t *tz;
    cr_assert_eq(ql_tz_load("UTC", &tz), 0);
    ql_civil_t c = {y, mo, d, h, mi, s, ms};
    int64_t out;
    cr_assert_eq(ql_tz_from_civil(tz, &c, &out), 0);
    ql_tz_free(tz);
    return out;
}

static void make_model(ql_model_t *m, const char *format) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "orders");
    m->partitioned = true;
    snprintf(m->partition_column, sizeof m->partition_column, "DT");
    snprintf(m->partition_format, sizeof m->partition_format, "%s", format);
}

/* A project whose kylin.web.timezone is zone (NULL: none, the server's applies). */
static void make_project(ql_project_t *p, const char *zone) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "demo");
    if (zone)
        cr_assert_eq(ql_strmap_set(&p->config, "kylin.web.timezone", zone), 0);
}

typedef struct result {
    int rc;
    int64_t ns, ne;
    ql_err_t err;
} result_t;

static result_t normalize(ql_submit_cache_t *cache, const ql_project_t *p, const ql_model_t *m,
                          const char *server_tz, int64_t start, int64_t end) {
    result_t r = {0};
    r.rc =
        cache ? ql_submit_normalize_cached(cache, p, m, server_tz, start, end, &r.ns, &r.ne, &r.err)
              : ql_submit_normalize(p, m, server_tz, start, end, &r.ns, &r.ne, &r.err);
    return r;
}

/* Both paths, compared field by field; returns the uncached result. */
static result_t both(ql_submit_cache_t *cache, const ql_project_t *p, const ql_model_t *m,
                     const char *server_tz, int64_t start, int64_t end) {
    result_t a = normalize(NULL, p, m, server_tz, start, end);
    result_t b = normalize(cache, p, m, server_tz, start, end);
    cr_assert_eq(a.rc, b.rc, "%s [%lld, %lld): rc %d uncached, %d cached (%s | %s)",
                 m->partition_format, (long long)start, (long long)end, a.rc, b.rc, a.err.msg,
                 b.err.msg);
    cr_assert_str_eq(a.err.msg, b.err.msg, "%s: messages differ", m->partition_format);
    if (a.rc == 0 || a.rc == QL_EEMPTYRANGE)
        cr_assert(a.ns == b.ns && a.ne == b.ne, "%s [%lld, %lld): [%lld, %lld) vs [%lld, %lld)",
                  m->partition_format, (long long)start, (long long)end, (long long)a.ns,
                  (long long)a.ne, (long long)b.ns, (long long)b.ne);
    return a;
}

Test(submit_normalize, cached_and_uncached_agree_for_every_format) {
    ql_submit_cache_t *cache;
    cr_assert_eq(ql_submit_cache_new(0, &cache), 0);
    /* Zones from the project, from the server, and the default; New York has DST changes. */
    static const struct {
        const char *project_tz, *server_tz;
    } zones[] = {{NULL, NULL},
                 {"Asia/Shanghai", NULL},
                 {NULL, "America/New_York"},
                 {"Europe/Berlin", "America/New_York"}};
    const int64_t ranges[][2] = {
        {utc_ms(2026, 8, 31, 13, 45, 10, 123), utc_ms(2026, 9, 1, 5, 0, 0, 0)},
        {utc_ms(2026, 1, 1, 0, 0, 0, 0), utc_ms(2026, 2, 1, 0, 0, 0, 0)},
        /* Around the fall-back and spring-forward nights of America/New_York. */
        {utc_ms(2026, 11, 1, 5, 30, 0, 0), utc_ms(2026, 11, 1, 6, 30, 0, 0)},
        {utc_ms(2026, 3, 8, 6, 59, 59, 999), utc_ms(2026, 3, 8, 7, 30, 0, 0)},
        /* Empty after normalization with the coarser formats. */
        {utc_ms(2026, 8, 31, 10, 0, 0, 0), utc_ms(2026, 8, 31, 10, 0, 30, 0)},
        {utc_ms(1999, 12, 31, 23, 59, 59, 0), utc_ms(2000, 1, 1, 0, 0, 1, 0)},
    };
    size_t n_ok = 0, n_empty = 0;
    for (int round = 0; round < 2; round++) /* the second round is all cache hits */
        for (size_t z = 0; z < sizeof zones / sizeof zones[0]; z++) {
            ql_project_t p;
            make_project(&p, zones[z].project_tz);
            for (size_t f = 0; f < N_FORMATS; f++) {
                ql_model_t m;
                make_model(&m, formats[f]);
                for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
                    result_t a =
                        both(cache, &p, &m, zones[z].server_tz, ranges[r][0], ranges[r][1]);
                    cr_assert(a.rc == 0 || a.rc == QL_EEMPTYRANGE, "%s: %d %s", formats[f], a.rc,
                              a.err.msg);
                    n_ok += a.rc == 0;
                    n_empty += a.rc == QL_EEMPTYRANGE;
                }
            }
            ql_project_free(&p);
        }
    cr_assert(n_ok > 0 && n_empty > 0, "ok %zu, empty %zu", n_ok, n_empty);
    ql_submit_cache_stats_t st;
    ql_submit_cache_get_stats(cache, &st);
    cr_assert_eq(st.format_opens, N_FORMATS);
    cr_assert_eq(st.format_evictions, 0);
    ql_submit_cache_free(cache);
}

Test(submit_normalize, known_values) {
    ql_submit_cache_t *cache;
    cr_assert_eq(ql_submit_cache_new(0, &cache), 0);
    ql_project_t p;
    make_project(&p, NULL);
    static const struct {
        const char *format;
        int64_t want_start[7]; /* y, mo, d, h, mi, s, ms in UTC */
    } cases[] = {
        {"yyyy-MM-dd", {2026, 8, 31, 0, 0, 0, 0}},
        {"yyyyMMdd", {2026, 8, 31, 0, 0, 0, 0}},
        {"yyyy-MM-dd HH:mm:ss", {2026, 8, 31, 13, 45, 10, 0}},
        {"yyyyMM", {2026, 8, 1, 0, 0, 0, 0}},
    };
    int64_t start = utc_ms(2026, 8, 31, 13, 45, 10, 123), end = utc_ms(2026, 10, 2, 0, 0, 0, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ql_model_t m;
        make_model(&m, cases[i].format);
        result_t r = both(cache, &p, &m, NULL, start, end);
        cr_assert_eq(r.rc, 0, "%s: %s", cases[i].format, r.err.msg);
        const int64_t *w = cases[i].want_start;
        cr_assert_eq(r.ns,
                     utc_ms(w[0], (int)w[1], (int)w[2], (int)w[3], (int)w[4], (int)w[5], (int)w[6]),
                     "%s", cases[i].format);
    }
    /* A full-load model's range is passed through as it is, with no zone or format looked at. */
    ql_model_t full;
    make_model(&full, "");
    full.partitioned = false;
    result_t r = both(cache, &p, &full, "Not/AZone", 5, 3);
    cr_assert(r.rc == 0 && r.ns == 5 && r.ne == 3);
    ql_project_free(&p);
    ql_submit_cache_free(cache);
}

Test(submit_normalize, cache_reuses_one_formatter_per_pattern) {
    ql_submit_cache_t *cache;
    cr_assert_eq(ql_submit_cache_new(2, &cache), 0);
    const ql_datefmt_t *f1, *f2, *f3;
    cr_assert_eq(ql_submit_cache_format(cache, "yyyy-MM-dd", &f1, NULL), 0);
    cr_assert_eq(ql_submit_cache_format(cache, "yyyy-MM-dd", &f2, NULL), 0);
    cr_assert_eq(f1, f2, "the same formatter, not a new one");
    cr_assert_str_eq(ql_datefmt_pattern(f1), "yyyy-MM-dd");
    ql_submit_cache_stats_t st;
    ql_submit_cache_get_stats(cache, &st);
    cr_assert(st.format_opens == 1 && st.format_hits == 1 && st.format_evictions == 0);

    /* Through normalization: 10 builds of one model open nothing more. */
    ql_project_t p;
    make_project(&p, "Asia/Shanghai");
    ql_model_t m;
    make_model(&m, "yyyy-MM-dd");
    for (int i = 0; i < 10; i++)
        cr_assert_eq(normalize(cache, &p, &m, NULL, 86400000LL * i, 86400000LL * (i + 2)).rc, 0);
    ql_submit_cache_get_stats(cache, &st);
    cr_assert(st.format_opens == 1 && st.format_hits == 11, "opens %llu hits %llu",
              (unsigned long long)st.format_opens, (unsigned long long)st.format_hits);

    /* Full (2 formats): a third pattern closes the least recently used one, yyyyMM here. */
    cr_assert_eq(ql_submit_cache_format(cache, "yyyyMM", &f3, NULL), 0);
    cr_assert_eq(ql_submit_cache_format(cache, "yyyy-MM-dd", &f1, NULL), 0);
    cr_assert_eq(ql_submit_cache_format(cache, "yyyyMMdd", &f3, NULL), 0);
    ql_submit_cache_get_stats(cache, &st);
    cr_assert(st.format_opens == 3 && st.format_evictions == 1);
    cr_assert_eq(ql_submit_cache_format(cache, "yyyy-MM-dd", &f2, NULL), 0);
    cr_assert_eq(f1, f2, "yyyy-MM-dd was used last: it stayed");
    cr_assert_eq(ql_submit_cache_format(cache, "yyyyMM", &f3, NULL), 0);
    ql_submit_cache_get_stats(cache, &st);
    cr_assert(st.format_opens == 4 && st.format_evictions == 2, "yyyyMM was opened again");
    cr_assert_str_eq(ql_datefmt_pattern(f3), "yyyyMM");

    /* After evictions the results are still those of the uncached path. */
    for (size_t f = 0; f < N_FORMATS; f++) {
        make_model(&m, formats[f]);
        both(cache, &p, &m, NULL, 1788199200123LL, 1788299200000LL);
    }
    ql_project_free(&p);
    ql_submit_cache_free(cache);
}

Test(submit_normalize, bad_patterns_and_zones_give_the_same_clear_error) {
    ql_submit_cache_t *cache;
    cr_assert_eq(ql_submit_cache_new(0, &cache), 0);
    ql_project_t p;
    make_project(&p, NULL);
    static const char *const bad[] = {"yyyy-MM-dd'", "yy-MM-dd", "yyyy-MM-dd z", "MM-dd", "q"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ql_model_t m;
        make_model(&m, bad[i]);
        for (int k = 0; k < 2; k++) {
            result_t r = both(cache, &p, &m, NULL, 0, 86400000LL);
            cr_assert_eq(r.rc, QL_EINVAL, "%s", bad[i]);
            cr_assert(strstr(r.err.msg, "partition_date_format") != NULL, "%s: %s", bad[i],
                      r.err.msg);
        }
    }
    /* Not cached: each try compiled the pattern again and failed again. */
    ql_submit_cache_stats_t st;
    ql_submit_cache_get_stats(cache, &st);
    cr_assert_eq(st.format_opens, 2 * sizeof bad / sizeof bad[0]);
    cr_assert_eq(st.format_hits, 0);
    const ql_datefmt_t *f = NULL;
    ql_err_t err = {0};
    cr_assert_eq(ql_submit_cache_format(cache, "yyyy-MM-dd'", &f, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "partition_date_format") != NULL, "%s", err.msg);

    /* An unknown zone, from the project or the server: the same message both ways. */
    ql_model_t m;
    make_model(&m, "yyyy-MM-dd");
    result_t r = both(cache, &p, &m, "Mars/Olympus_Mons", 0, 86400000LL);
    cr_assert_eq(r.rc, QL_EINVAL);
    cr_assert_str_eq(r.err.msg, "kylin.web.timezone: 'Mars/Olympus_Mons' is not a known time zone");
    ql_project_free(&p);
    make_project(&p, "Nowhere/City");
    r = both(cache, &p, &m, "UTC", 0, 86400000LL);
    cr_assert_eq(r.rc, QL_EINVAL);
    cr_assert_str_eq(r.err.msg, "kylin.web.timezone: 'Nowhere/City' is not a known time zone");
    ql_project_free(&p);
    ql_submit_cache_free(cache);
}
