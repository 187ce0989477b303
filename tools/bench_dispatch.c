/*
 * qilin bench dispatch (also the standalone qilin-bench-dispatch, which counts allocations): the
 * dispatcher's scan at scale (docs/performance.md, "Dispatcher").
 *
 * A store of P projects x M models (default 1,000 x 100 = 100,000 eligible models: partitioned
 * by yyyy-MM-dd, an enabled auto_segment_build config, four time zones and four configs, so 16
 * distinct time computations a scan) with S READY daily segments each (default 100), the
 * latest of which is exactly the model's current target, so every cycle is COVERED. Then:
 *   (a) warm: every cycle already COVERED in the cycle cache, whose capacity is set to twice
 *       the model count (the default 10,000 cannot hold 100,000 cycles; what the default gives
 *       at this size is measured too);
 *   (b) cold: the cycle cache cleared before each scan (the model list stays decoded);
 *   (c) fully cold: a new dispatcher per scan (the model list decoded from the store too);
 * each the median of several scans, plus the peak RSS of the measuring process and the number
 * of allocations per scan (when the binary counts them: see bench_dispatch_main.c), which must
 * not grow with S. --table repeats (a)-(c) for 1k, 10k and 100k models with 10, 100 and 1,000
 * segments each, skipping combinations above --max-segments (default 20M).
 *
 * Each store is built in one child process and measured in another, so the measuring process's
 * peak RSS (getrusage ru_maxrss, which includes the pages of the LMDB map it touched) is its
 * own. Stores live in a fresh directory under --dir (default /tmp), removed unless --keep.
 */
#include "bench.h"
#include "bench_int.h"

#include "scheduler/ql_dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 2026-09-01 02:00:00 UTC: the virtual "now" of every scan. */
#define NOW_MS 1788199200000LL
#define SEGS_PER_TXN 200000
#define MODELS_PER_PG_TXN 2000

static const char *const zones[] = {"UTC", "Asia/Shanghai", "America/New_York", "Europe/Berlin"};
#define N_ZONES (sizeof zones / sizeof zones[0])

/* Whole-day ranges (yyyy-MM-dd would truncate a partial day to an empty range), different
 * triggers and offsets: at NOW_MS some are due today, some still yesterday's. */
static const struct {
    const char *trigger;
    int offset;
    const char *start, *end;
} configs[] = {
    {"01:00:00", 1, "00:00:00", "24:00:00"},
    {"02:30:00", 1, "00:00:00", "24:00:00"},
    {"06:00:00", 2, "00:00:00", "24:00:00"},
    {"23:30:00", 1, "06:00:00", "24:00:00"},
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

static const char templates_yaml[] = "templates:\n"
                                     "  INC_BUILD:\n"
                                     "    steps: [{name: build, kind: noop}]\n";

typedef struct {
    const char *parent;
    const char *store_dir; /* --store: build there only if missing, never remove */
    bool keep;
    uint64_t projects, models_per_project, segs;
    uint64_t map_gib; /* LMDB map size; valgrind cannot reserve the default 1 TiB */
    int scans;
    bool table, main_run;
    bool ordered_ids; /* model ids increasing in scan order, not random */
    uint64_t max_segments;
    uint64_t (*allocs)(void); /* NULL: not counted */
    const char *url;          /* --url: a PostgreSQL store instead of LMDB */
} opts_t;

/* What a measuring child reports (shared memory). */
typedef struct {
    int rc;
    double setup_s, store_gib;
    double full_first_ms, full_ms, cold_ms, warm_ms, warm_default_ms; /* wall */
    double full_cpu_ms, cold_cpu_ms, warm_cpu_ms;                     /* CPU */
    double meta_ms, meta_cpu_ms; /* after a metadata change, cycle cache warm */
    double cold_min_ms, cold_max_ms, warm_min_ms, warm_max_ms;
    int64_t allocs_full, allocs_cold, allocs_warm; /* per scan, -1: not counted */
    uint64_t covered_min;                          /* fewest COVERED decisions in any scan */
    uint64_t models;
    double rss_mib;            /* peak RSS (ru_maxrss) */
    double anon_mib, file_mib; /* resident after the scans, dispatcher still alive */
} result_t;

static double ms_since(int64_t t0) {
    return (double)(ql_bench_now_ns() - t0) / 1e6;
}

/* CPU time of this process: on a shared machine a scan's wall time includes waiting for the
 * CPU, its CPU time does not (the measuring process runs one thread). */
static int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Current anonymous (heap, stacks) and file-backed (the LMDB map, ICU data) resident memory
 * from /proc/self/status, in MiB; -1 when unavailable. */
static void rss_split(double *anon, double *file) {
    *anon = *file = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long kb;
        if (sscanf(line, "RssAnon: %lu kB", &kb) == 1)
            *anon = (double)kb / 1024.0;
        else if (sscanf(line, "RssFile: %lu kB", &kb) == 1)
            *file = (double)kb / 1024.0;
    }
    fclose(f);
}

static int fail(const char *what, int rc, const char *msg) {
    fprintf(stderr, "qilin bench dispatch: %s: %s%s%s\n", what, ql_strerror(rc), msg ? ": " : "",
            msg ? msg : "");
    return rc ? rc : 1;
}

/* With --url the store is a PostgreSQL schema named after the run's directory; the last open
 * of a run (the measurement) drops it unless --keep. */
static int open_store(const char *path, const opts_t *b, bool last, ql_store_t **out) {
    ql_store_opts_t o = {.path = path, .map_size = b->map_gib << 30};
    char schema[96];
    if (b->url) {
        const char *tail = strrchr(path, '/');
        snprintf(schema, sizeof schema, "qilin_bench_dispatch_%ld_%s",
                 (long)getppid() % 100000, /* in_child: one per run */
                 tail ? tail + 1 : path);
        o.url = b->url;
        o.pg_schema = schema;
        o.pg_drop_at_close = last && !b->keep;
    }
    ql_err_t err = {0};
    int rc = ql_store_open(&o, out, &err);
    return rc ? fail("open", rc, err.msg) : 0;
}

/* ---- building the store ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/*
 * The id of the n-th model. Segments are keyed by (model id, layer, start), so the order of
 * model ids against the order a scan visits models (projects, then models, by name) decides
 * how much a cold scan's B-tree descents share pages. Random ids (the default) give the worst
 * case, whatever id scheme the store uses; --ordered-ids makes them increase in scan order,
 * the best case (what time-ordered ids give when models were created in name order).
 */
static void model_id(const opts_t *o, uint64_t n, ql_id_t *out) {
    uint64_t x = n, a = splitmix64(&x), b = splitmix64(&x);
    if (o->ordered_ids)
        for (int i = 0; i < 8; i++)
            out->b[i] = (uint8_t)(n >> (56 - 8 * i));
    else
        memcpy(out->b, &a, 8);
    memcpy(out->b + 8, &b, 8);
    out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40);
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80);
}

/* The S+1 boundaries of one (zone, config) combination: local midnights, the last two being
 * the cycle's target exactly as the dispatcher computes it. */
static int combo_bounds(const char *zone, int ci, const ql_datefmt_t *fmt, uint64_t s, int64_t *b) {
    ql_tz_t *tz;
    int rc = ql_tz_load(zone, &tz);
    if (rc)
        return fail(zone, rc, NULL);
    ql_auto_build_cfg_t cfg;
    ql_err_t err = {0};
    rc = ql_auto_build_validate(true, configs[ci].trigger, configs[ci].offset, configs[ci].start,
                                configs[ci].end, &cfg, &err);
    int64_t occ, ts, te, ns, ne;
    ql_civil_t date;
    if (!rc)
        rc = ql_dispatch_occurrence(tz, NOW_MS, cfg.trigger_sec, &occ, &date);
    if (!rc)
        rc = ql_dispatch_target(tz, &date, &cfg, &ts, &te);
    if (!rc)
        rc = ql_normalize_range(tz, fmt, ts, te, &ns, &ne);
    if (rc) {
        ql_tz_free(tz);
        return fail("target", rc, err.msg);
    }
    b[s] = ne;
    ql_civil_t start;
    ql_tz_to_civil(tz, ns, &start);
    for (uint64_t k = 0; k < s && !rc; k++) {
        ql_civil_t day;
        rc = ql_civil_add_days(&start, -(int64_t)(s - 1 - k), &day);
        if (!rc)
            rc = ql_tz_from_civil(tz, &day, &b[k]);
    }
    ql_tz_free(tz);
    return rc ? fail("boundaries", rc, NULL) : 0;
}

static int build_store(const char *dir, const opts_t *o, result_t *res) {
    int64_t t0 = ql_bench_now_ns();
    ql_datefmt_t *fmt;
    ql_err_t err = {0};
    int rc = ql_datefmt_open("yyyy-MM-dd", &fmt, &err);
    if (rc)
        return fail("format", rc, err.msg);
    uint64_t s = o->segs;
    int64_t *bounds = calloc(N_ZONES * N_CONFIGS * (s + 1), sizeof *bounds);
    if (!bounds)
        return fail("set-up", UV_ENOMEM, NULL);
    for (size_t z = 0; z < N_ZONES && !rc; z++)
        for (size_t c = 0; c < N_CONFIGS && !rc; c++)
            rc = combo_bounds(zones[z], (int)c, fmt, s, &bounds[(z * N_CONFIGS + c) * (s + 1)]);
    ql_datefmt_free(fmt);
    ql_store_t *store = NULL;
    if (rc || (rc = open_store(dir, o, false, &store))) {
        free(bounds);
        return rc;
    }
    ql_txn_t *t = NULL;
    uint64_t in_txn = 0, in_models = 0;
    for (uint64_t p = 0; p < o->projects && !rc; p++) {
        if (!t && (rc = ql_txn_begin(store, true, &t)))
            break;
        size_t z = p % N_ZONES;
        ql_project_t pr = {0};
        snprintf(pr.name, sizeof pr.name, "project_%04llu", (unsigned long long)p);
        pr.auto_segment_build_enabled = true;
        pr.create_time = pr.modify_time = NOW_MS;
        if ((rc = ql_strmap_set(&pr.config, "kylin.web.timezone", zones[z])) ||
            (rc = ql_project_put(t, &pr))) {
            ql_project_free(&pr);
            break;
        }
        ql_project_free(&pr);
        for (uint64_t i = 0; i < o->models_per_project && !rc; i++) {
            size_t c = (p / N_ZONES + i) % N_CONFIGS;
            ql_model_t m = {0};
            model_id(o, p * o->models_per_project + i + 1, &m.id);
            snprintf(m.project, sizeof m.project, "project_%04llu", (unsigned long long)p);
            snprintf(m.name, sizeof m.name, "model_%04llu", (unsigned long long)i);
            m.partitioned = true;
            strcpy(m.partition_column, "FACT.DAY");
            strcpy(m.partition_format, "yyyy-MM-dd");
            m.auto_build.present = true;
            m.auto_build.enabled = true;
            snprintf(m.auto_build.trigger_time, sizeof m.auto_build.trigger_time, "%s",
                     configs[c].trigger);
            m.auto_build.logical_date_offset_days = configs[c].offset;
            snprintf(m.auto_build.data_range_start_time, sizeof m.auto_build.data_range_start_time,
                     "%s", configs[c].start);
            snprintf(m.auto_build.data_range_end_time, sizeof m.auto_build.data_range_end_time,
                     "%s", configs[c].end);
            m.create_time = m.modify_time = NOW_MS;
            if ((rc = ql_model_put(t, &m)))
                break;
            const int64_t *b = &bounds[(z * N_CONFIGS + c) * (s + 1)];
            for (uint64_t k = 0; k < s && !rc; k++) {
                ql_segment_t seg = {0};
                ql_store_new_id(store, &seg.id);
                seg.model = m.id;
                seg.start = b[k];
                seg.end = b[k + 1];
                seg.status = QL_SEG_READY;
                seg.create_time = seg.last_build_time = b[k + 1];
                rc = ql_segment_put(t, &seg);
            }
            in_txn += s + 1;
            in_models++;
        }
        /* Large transactions, but bounded: LMDB keeps a transaction's dirty pages in memory;
         * PostgreSQL holds an advisory lock per model written until the end (its lock table
         * takes about 6,400 with the defaults: docs/postgresql.md, Errors). */
        bool full = in_txn >= SEGS_PER_TXN || (o->url && in_models >= MODELS_PER_PG_TXN);
        if (!rc && (full || p == o->projects - 1)) {
            rc = ql_txn_commit(t);
            t = NULL;
            in_txn = 0;
            in_models = 0;
        }
    }
    if (t)
        ql_txn_abort(t);
    free(bounds);
    ql_store_close(store);
    if (rc)
        return fail("store set-up", rc, NULL);
    res->setup_s = ms_since(t0) / 1e3;
    res->store_gib = ql_bench_store_gib(dir);
    return 0;
}

/* ---- measuring ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct {
    ql_store_t *store;
    ql_writer_t *writer;
    ql_clock_t *clock;
    ql_templates_t *templates;
    ql_log_t log;
    uint64_t log_lines;
    const opts_t *o;
    result_t *res;
} bench_t;

/* A log sink that only counts: the lines are formatted (part of a scan's cost) but not
 * written, so the figures do not depend on a terminal or disk. */
static void count_sink(void *arg, ql_log_level_t level, const char *line) {
    (void)level;
    (void)line;
    ((bench_t *)arg)->log_lines++;
}

static int64_t allocs_now(const bench_t *b) {
    return b->o->allocs ? (int64_t)b->o->allocs() : -1;
}

static int new_dispatcher(bench_t *b, size_t capacity, ql_dispatcher_t **out) {
    ql_dispatcher_opts_t o = {
        .store = b->store,
        .writer = b->writer,
        .clock = b->clock,
        .log = &b->log,
        .templates = b->templates,
        .interval_ms = 30000,
        .cache_capacity = capacity,
        .manual_flush = true,
    };
    int rc = ql_dispatcher_new(&o, out);
    return rc ? fail("dispatcher", rc, NULL) : 0;
}

/* One scan; its wall and CPU time in ms and allocation count. Every cycle must be COVERED. */
static int timed_scan(bench_t *b, ql_dispatcher_t *d, double *ms, double *cpu, int64_t *allocs) {
    int64_t a0 = allocs_now(b), c0 = cpu_ns(), t0 = ql_bench_now_ns();
    int rc = ql_dispatcher_scan(d, NULL, NULL);
    *ms = ms_since(t0);
    *cpu = (double)(cpu_ns() - c0) / 1e6;
    *allocs = b->o->allocs ? allocs_now(b) - a0 : -1;
    if (rc)
        return fail("scan", rc, NULL);
    ql_dispatcher_stats_t st;
    ql_dispatcher_get_stats(d, &st);
    uint64_t covered = st.states[QL_CYCLE_COVERED];
    if (covered < b->res->covered_min)
        b->res->covered_min = covered;
    if (covered != b->res->models) {
        fprintf(stderr, "qilin bench dispatch: only %llu of %llu cycles COVERED\n",
                (unsigned long long)covered, (unsigned long long)b->res->models);
        return 1;
    }
    return 0;
}

/* Rewrites the first model unchanged: the metadata generation moves on. */
static int touch_model(bench_t *b) {
    ql_id_t id;
    model_id(b->o, 1, &id);
    ql_txn_t *t;
    int rc = ql_txn_begin(b->store, true, &t);
    if (rc)
        return fail("touch", rc, NULL);
    ql_model_t m;
    if (!(rc = ql_model_get(t, &id, QL_DECODE_KEEP_EXTRA, &m))) {
        rc = ql_model_put(t, &m);
        ql_model_free(&m);
    }
    if (rc) {
        ql_txn_abort(t);
        return fail("touch", rc, NULL);
    }
    rc = ql_txn_commit(t);
    return rc ? fail("touch", rc, NULL) : 0;
}

static int measure(const char *dir, const opts_t *o, result_t *res) {
    bench_t b = {.o = o, .res = res};
    res->models = o->projects * o->models_per_project;
    res->covered_min = UINT64_MAX;
    ql_err_t err = {0};
    int rc = open_store(dir, o, true, &b.store);
    if (rc)
        return rc;
    ql_writer_opts_t wo = {.manual = true};
    if ((rc = ql_writer_new(b.store, &wo, &b.writer)) ||
        (rc = ql_clock_virtual_new(NOW_MS, &b.clock)) ||
        (rc = ql_templates_load_buffer(templates_yaml, strlen(templates_yaml), "bench",
                                       &b.templates, &err)))
        return fail("set-up", rc, err.msg);
    ql_log_init(&b.log, QL_LOG_INFO);
    b.log.sink = count_sink;
    b.log.sink_arg = &b;

    int n = o->scans < 1 ? 1 : o->scans;
    double *t = calloc((size_t)n, sizeof *t), *c = calloc((size_t)n, sizeof *c);
    if (!t || !c)
        return fail("set-up", UV_ENOMEM, NULL);
    size_t cap = (size_t)res->models * 2;
    ql_dispatcher_t *d = NULL;

    /* (c) fully cold: a new dispatcher each time. The first ever also opens the ICU format and
     * loads the zones (CCTZ keeps zones process-wide, so later dispatchers find them). */
    for (int i = 0; i < n && !rc; i++) {
        ql_dispatcher_free(d);
        d = NULL;
        if ((rc = new_dispatcher(&b, cap, &d)))
            break;
        int64_t a;
        rc = timed_scan(&b, d, &t[i], &c[i], &a);
        if (i == 0)
            res->full_first_ms = t[i];
        res->allocs_full = a;
    }
    if (!rc) {
        res->full_ms = median(t, n);
        res->full_cpu_ms = median(c, n);
    }

    /* (b) cold: same dispatcher (model list decoded), cycle cache cleared before each scan. */
    for (int i = 0; i < n && !rc; i++) {
        ql_dispatcher_clear_cache(d);
        rc = timed_scan(&b, d, &t[i], &c[i], &res->allocs_cold);
    }
    if (!rc) {
        res->cold_ms = median(t, n);
        res->cold_cpu_ms = median(c, n);
        res->cold_min_ms = t[0];
        res->cold_max_ms = t[n - 1];
    }

    /* (a) warm: the last cold scan filled the cache with every cycle. */
    for (int i = 0; i < n && !rc; i++)
        rc = timed_scan(&b, d, &t[i], &c[i], &res->allocs_warm);
    if (!rc) {
        res->warm_ms = median(t, n);
        res->warm_cpu_ms = median(c, n);
        res->warm_min_ms = t[0];
        res->warm_max_ms = t[n - 1];
    }
    /* (d) after a metadata change: one model rewritten (as an edit of its config would), so
     * the next scan decodes the model list again while the cycle cache stays warm. */
    for (int i = 0; i < n && !rc; i++) {
        int64_t a;
        if ((rc = touch_model(&b)) == 0)
            rc = timed_scan(&b, d, &t[i], &c[i], &a);
    }
    if (!rc) {
        res->meta_ms = median(t, n);
        res->meta_cpu_ms = median(c, n);
    }
    rss_split(&res->anon_mib, &res->file_mib);
    ql_dispatcher_free(d);
    d = NULL;

    /* (a') "warm" with the default capacity of 10,000: when it cannot hold every cycle, a scan
     * in the same order each time evicts each entry before it is looked up again (LRU), so
     * this is a cold scan in disguise. Only measured when the models outnumber the default. */
    res->warm_default_ms = -1;
    if (!rc && res->models > 10000 && !(rc = new_dispatcher(&b, 0, &d))) {
        int64_t a;
        rc = timed_scan(&b, d, &t[0], &c[0], &a); /* fills (and churns) the cache */
        for (int i = 0; i < n && !rc; i++)
            rc = timed_scan(&b, d, &t[i], &c[i], &a);
        if (!rc)
            res->warm_default_ms = median(t, n);
        ql_dispatcher_free(d);
    }
    free(t);
    free(c);
    ql_templates_free(b.templates);
    ql_writer_free(b.writer);
    ql_clock_free(b.clock);
    ql_store_close(b.store);
    res->rss_mib = ql_bench_peak_rss_mib();
    return rc;
}

/* ---- processes ---- */

static int in_child(int (*fn)(const char *, const opts_t *, result_t *), const char *dir,
                    const opts_t *o, result_t *res) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork", -1, NULL);
    if (pid == 0) {
        res->rc = fn(dir, o, res);
        fflush(stdout);
        _exit(res->rc ? 1 : 0);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return 1;
    return res->rc;
}

/* Builds a store of p x m models with s segments each and measures it. */
static int run_config(const opts_t *base, uint64_t p, uint64_t m, uint64_t s, const char *root,
                      result_t *res) {
    opts_t o = *base;
    o.projects = p;
    o.models_per_project = m;
    o.segs = s;
    char dir[4000];
    snprintf(dir, sizeof dir, "%s/p%llu_m%llu_s%llu", root, (unsigned long long)p,
             (unsigned long long)m, (unsigned long long)s);
    memset(res, 0, sizeof *res);
    int rc = 0;
    if (o.store_dir) {
        /* A kept store (for profiling): the caller vouches that it has this shape. */
        snprintf(dir, sizeof dir, "%s", o.store_dir);
        char file[4100];
        struct stat st;
        snprintf(file, sizeof file, "%s/data.mdb", dir);
        if (stat(file, &st) != 0)
            rc = in_child(build_store, dir, &o, res);
        else
            res->store_gib = ql_bench_store_gib(dir);
    } else {
        rc = in_child(build_store, dir, &o, res);
    }
    if (!rc)
        rc = in_child(measure, dir, &o, res);
    if (!o.keep && !o.store_dir)
        ql_bench_rm_rf(dir);
    return rc;
}

static void print_allocs(const char *what, int64_t n, uint64_t models) {
    if (n < 0)
        printf("  allocations per scan, %-11s n/a (counted only by qilin-bench-dispatch)\n", what);
    else
        printf("  allocations per scan, %-11s %lld (%.3f per model)\n", what, (long long)n,
               (double)n / (double)models);
}

static void usage(FILE *f, const char *name) {
    fprintf(f,
            "usage: %s [--projects P] [--models-per-project M] [--segments S] [--scans N]\n"
            "         [--table] [--no-main] [--max-segments N] [--dir DIR] [--keep]\n"
            "         [--store DIR] [--map-gib N] [--ordered-ids] [--url URL]\n"
            "  defaults: 1000 projects x 100 models x 100 segments, 7 scans per figure,\n"
            "  --table: 1k/10k/100k models x 10/100/1000 segments (up to --max-segments,\n"
            "  default 20000000, in total)\n"
            "  --store DIR: measure the store in DIR (built there first if missing, with the\n"
            "  given shape, and kept): for profiling the scan without rebuilding\n"
            "  --map-gib N: LMDB map size (default 1024; valgrind needs a small one, e.g. 8)\n"
            "  --ordered-ids: model ids increase in scan order (best case; default: random)\n"
            "  --dir DIR: parent of the stores (default /tmp); --keep: keep them\n"
            "  --url URL: the store is a fresh schema of the PostgreSQL database at URL\n"
            "Allocations per scan are counted only by the standalone qilin-bench-dispatch.\n",
            name);
}

static bool parse_u64(const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || *s == '-')
        return false;
    *out = v;
    return true;
}

/* Parses the command line into o. Returns -1 to go on, 0 after --help, 2 on a bad argument. */
static int parse_args(int argc, char **argv, opts_t *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t x = 0;
        if (!strcmp(a, "--table")) {
            o->table = true;
        } else if (!strcmp(a, "--no-main")) {
            o->main_run = false;
        } else if (!strcmp(a, "--ordered-ids")) {
            o->ordered_ids = true;
        } else if (!strcmp(a, "--keep")) {
            o->keep = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            return 0;
        } else if (!strcmp(a, "--dir") && v) {
            o->parent = v;
            i++;
        } else if (!strcmp(a, "--url") && v) {
            o->url = v;
            i++;
        } else if (!strcmp(a, "--store") && v) {
            o->store_dir = v;
            i++;
        } else if (v && parse_u64(v, &x) && x > 0 &&
                   (!strcmp(a, "--projects") || !strcmp(a, "--models-per-project") ||
                    !strcmp(a, "--segments") || !strcmp(a, "--scans") ||
                    !strcmp(a, "--max-segments") || !strcmp(a, "--map-gib"))) {
            if (!strcmp(a, "--projects"))
                o->projects = x;
            else if (!strcmp(a, "--models-per-project"))
                o->models_per_project = x;
            else if (!strcmp(a, "--segments"))
                o->segs = x;
            else if (!strcmp(a, "--scans"))
                o->scans = x > 1000 ? 1000 : (int)x;
            else if (!strcmp(a, "--map-gib"))
                o->map_gib = x > (1u << 20) ? (1u << 20) : x;
            else
                o->max_segments = x;
            i++;
        } else {
            fprintf(stderr, "qilin bench dispatch: bad argument '%s'\n", a);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    return -1;
}

/* The main run: (a) to (d) at the configured size, printed. */
static int run_main(const opts_t *o, const char *root, result_t *res) {
    int rc;
    uint64_t nm = o->projects * o->models_per_project;
    printf("dispatcher scan: %llu projects x %llu models = %llu models, %llu READY daily "
           "segments each (%llu segments), every cycle COVERED;\n"
           "%zu zones x %zu configs; %s model ids; median of %d scans; cycle cache "
           "capacity %llu (2 x models)\n",
           (unsigned long long)o->projects, (unsigned long long)o->models_per_project,
           (unsigned long long)nm, (unsigned long long)o->segs, (unsigned long long)(nm * o->segs),
           N_ZONES, N_CONFIGS, o->ordered_ids ? "ordered" : "random", o->scans,
           (unsigned long long)(nm * 2));
    rc = run_config(o, o->projects, o->models_per_project, o->segs, root, res);
    if (rc) {
        fprintf(stderr, "qilin bench dispatch: the run failed\n");
    } else {
        printf("  store set-up %.1f s, %.2f GiB on disk\n", res->setup_s, res->store_gib);
        printf("  (a) warm (all cycles cached)      median %8.2f ms  (min %.2f, max %.2f), "
               "CPU %.2f ms\n",
               res->warm_ms, res->warm_min_ms, res->warm_max_ms, res->warm_cpu_ms);
        printf("  (b) cold (cycle cache cleared)    median %8.2f ms  (min %.2f, max %.2f), "
               "CPU %.2f ms\n",
               res->cold_ms, res->cold_min_ms, res->cold_max_ms, res->cold_cpu_ms);
        printf("  (c) fully cold (new dispatcher)   median %8.2f ms  (first ever %.2f), "
               "CPU %.2f ms\n",
               res->full_ms, res->full_first_ms, res->full_cpu_ms);
        printf("  (d) after a metadata change       median %8.2f ms  (model list decoded "
               "again, cycles cached), CPU %.2f ms\n",
               res->meta_ms, res->meta_cpu_ms);
        if (res->warm_default_ms >= 0)
            printf("  (a') warm, default capacity 10000 median %7.2f ms  (LRU churn: "
                   "effectively cold)\n",
                   res->warm_default_ms);
        print_allocs("warm:", res->allocs_warm, res->models);
        print_allocs("cold:", res->allocs_cold, res->models);
        print_allocs("full cold:", res->allocs_full, res->models);
        printf("  peak RSS of the measuring process: %.0f MiB; after the scans: %.0f MiB "
               "anonymous (heap), %.0f MiB file-backed (store map, ICU data)\n",
               res->rss_mib, res->anon_mib, res->file_mib);
    }
    return rc;
}

/* --table: the scan time by store size, one row per (models, segments per model). */
static int run_table(const opts_t *o, const char *root, result_t *res) {
    int rc = 0;

    static const uint64_t models[] = {1000, 10000, 100000};
    static const uint64_t segs[] = {10, 100, 1000};
    printf("\nscan time by size (%s model ids; median of %d scans; ms)\n",
           o->ordered_ids ? "ordered" : "random", o->scans);
    printf("%8s %6s %11s %8s %9s %10s %9s %9s %9s %9s %11s %8s %8s\n", "models", "segs", "segments",
           "setup_s", "store_GiB", "full_cold", "cold", "cold_cpu", "warm", "warm_cpu",
           "allocs/cold", "anon_MiB", "peak_MiB");
    for (size_t i = 0; i < 3 && !rc; i++) {
        for (size_t k = 0; k < 3 && !rc; k++) {
            uint64_t total = models[i] * segs[k];
            if (total > o->max_segments) {
                printf("%8llu %6llu %11llu   skipped: more than %llu segments\n",
                       (unsigned long long)models[i], (unsigned long long)segs[k],
                       (unsigned long long)total, (unsigned long long)o->max_segments);
                continue;
            }
            rc = run_config(o, models[i] / 100, 100, segs[k], root, res);
            if (rc)
                break;
            printf("%8llu %6llu %11llu %8.1f %9.2f %10.2f %9.2f %9.2f %9.2f %9.2f %11lld "
                   "%8.0f %8.0f\n",
                   (unsigned long long)models[i], (unsigned long long)segs[k],
                   (unsigned long long)total, res->setup_s, res->store_gib, res->full_ms,
                   res->cold_ms, res->cold_cpu_ms, res->warm_ms, res->warm_cpu_ms,
                   (long long)res->allocs_cold, res->anon_mib, res->rss_mib);
            fflush(stdout);
        }
    }
    return rc;
}

int ql_bench_dispatch_run(int argc, char **argv, uint64_t (*alloc_count)(void)) {
    opts_t o = {.parent = "/tmp",
                .projects = 1000,
                .models_per_project = 100,
                .segs = 100,
                .map_gib = 1024,
                .scans = 7,
                .main_run = true,
                .max_segments = 20000000,
                .allocs = alloc_count};
    int parsed = parse_args(argc, argv, &o);
    if (parsed >= 0)
        return parsed;
    char root[3800];
    snprintf(root, sizeof root, "%s/ql-bench-dispatch-XXXXXX", o.parent);
    if (!mkdtemp(root)) {
        perror("qilin bench dispatch: mkdtemp");
        return 1;
    }
    result_t *res =
        mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        perror("qilin bench dispatch: mmap");
        return 1;
    }
    int rc = 0;
    if (o.main_run)
        rc = run_main(&o, root, res);
    if (!rc && o.table && o.store_dir) {
        fprintf(stderr, "qilin bench dispatch: --table builds its own stores, not --store\n");
        rc = 1;
    }
    if (!rc && o.table)
        rc = run_table(&o, root, res);
    munmap(res, sizeof *res);
    if (!o.keep)
        rmdir(root);
    else
        printf("stores kept under %s\n", root);
    return rc ? 1 : 0;
}

int ql_bench_dispatch_main(int argc, char **argv) {
    return ql_bench_dispatch_run(argc, argv, NULL);
}
