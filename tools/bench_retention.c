/*
 * qilin bench retention (also the standalone qilin-bench-retention): a year of retention on the
 * virtual clock (docs/performance.md, Retention).
 *
 * The simulator's server (sim/ql_sim.h: the real node with its scheduler, dispatcher and
 * retention task, an inline writer, a virtual clock, an LMDB store) runs --models models, each
 * with a daily automatic build (trigger 01:00, offset 1 day, the built-in one-noop-step
 * INC_BUILD), for --days simulated days, one `run: 1d` step at a time, with dispatcher scans
 * every --scan-interval. Every --sample-days it records the store's used and file bytes
 * (ql_store_stat), the jobs, steps and segments (ql_store_fsck, which also checks every
 * invariant) and the jobs retention removed so far; fsck runs once more at the end.
 *
 * The cost of the cleanup to dispatching: every scan is timed on the wall clock (the hooks
 * around ql_dispatcher_scan), and classed by whether a retention batch committed since the
 * previous scan (the node's removed count moved); only scans after the survival time has passed
 * (when retention deletes every day) count. With the inline writer a batch due at a scan's
 * instant runs just before the scan, so the wall time between two scans with a batch, against
 * that without, is what the batches cost a dispatch waiting behind them. Run it once with
 * retention on and once with --no-retention for the other comparison.
 */
#include "bench.h"
#include "bench_int.h"

#include "sim/ql_sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DAY_MS 86400000LL
#define MODELS_PER_PROJECT 100

/* ---- the scenario ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf_t *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        b->p = q;
        b->cap = cap;
    }
}

/* The scenario: models in projects of 100, each built daily; no steps (the bench drives). */
static char *scenario(const ql_bench_retention_opts_t *o, size_t *len) {
    sbuf_t b = {0};
    sb_printf(&b,
              "name: a year of retention\n"
              "timezone: UTC\n"
              "start: \"2026-01-01 00:00:00\"\n"
              "config:\n"
              "  kylin.model.auto-segment-build.dispatcher-interval-ms: %lld\n"
              "  kylin.garbage.storage.executable-survival-time-threshold: %lld\n"
              "  qilin.retention.interval-ms: %lld\n"
              "  qilin.retention.batch: %d\n"
              "projects:\n",
              (long long)o->scan_interval_ms, (long long)o->survival_days * DAY_MS,
              o->retention ? (long long)o->retention_interval_ms : 0LL, o->batch);
    for (int i = 0; i < o->models; i++) {
        if (i % MODELS_PER_PROJECT == 0)
            sb_printf(&b,
                      "  - name: p%d\n"
                      "    auto_segment_build_enabled: true\n"
                      "    models:\n",
                      i / MODELS_PER_PROJECT);
        sb_printf(&b,
                  "      - name: m%d\n"
                  "        partition: {column: DT, format: yyyy-MM-dd}\n"
                  "        auto_segment_build: {enabled: true, trigger_time: \"01:00:00\", "
                  "logical_date_offset_days: 1, data_range_start_time: \"00:00:00\", "
                  "data_range_end_time: \"24:00:00\"}\n",
                  i);
    }
    sb_printf(&b, "steps:\n  - scan\n");
    *len = b.len;
    return b.p;
}

/* ---- timing the scans ---- */

/* A growable array of wall times in ms. */
typedef struct vec {
    double *v;
    size_t n, cap;
} vec_t;

static void vec_push(vec_t *a, double x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1024;
        double *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
}

typedef struct run_state {
    const ql_bench_retention_opts_t *o;
    ql_bench_retention_result_t *res;
    int64_t start_ms; /* the virtual clock at the start */
    int64_t t_before; /* wall ns at this scan's start */
    int64_t t_after;  /* wall ns at the previous scan's end, 0: none (or a sample came between) */
    uint64_t removed; /* the node's removed count at the previous scan's end */
    vec_t ms[2];      /* scan wall times by class (0: no batch since the last scan, 1: one) */
    vec_t gap[2];     /* wall time between the previous scan and this one, by class */
    vec_t slot[QL_BENCH_RETENTION_SLOTS]; /* scan wall times by time of day (ql_bench.h) */
} run_state_t;

static uint64_t removed_now(ql_sim_t *sim) {
    ql_node_t *node = ql_sim_node(sim);
    return node ? ql_node_retention_removed(node) : 0;
}

static void before_scan(void *arg, ql_sim_t *sim) {
    (void)sim;
    run_state_t *s = arg;
    s->t_before = ql_bench_now_ns();
}

static void after_scan(void *arg, ql_sim_t *sim) {
    run_state_t *s = arg;
    int64_t t = ql_bench_now_ns();
    uint64_t removed = removed_now(sim);
    int64_t since = ql_clock_now_ms(ql_sim_clock(sim)) - s->start_ms;
    /* Only once retention deletes every day (and its off twin, the same days). */
    if (s->t_after && since / DAY_MS > s->o->survival_days + 1) {
        int cls = removed > s->removed ? 1 : 0;
        double ms = (double)(t - s->t_before) / 1e6;
        vec_push(&s->ms[cls], ms);
        vec_push(&s->gap[cls], (double)(s->t_before - s->t_after) / 1e6);
        int64_t tod = since % DAY_MS;
        size_t i = (size_t)(tod / s->o->scan_interval_ms);
        if (tod % s->o->scan_interval_ms == 0 && i < s->res->n_slots) {
            vec_push(&s->slot[i], ms);
            s->res->slot_after_batch[i] += (uint64_t)cls;
        }
    }
    s->res->scans++;
    s->removed = removed;
    s->t_after = t;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summarize(double *v, size_t n, ql_bench_retention_dist_t *d) {
    memset(d, 0, sizeof *d);
    d->n = n;
    if (!n)
        return;
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    d->mean = sum / (double)n;
    d->p50 = v[n / 2];
    d->p99 = v[(size_t)((double)(n - 1) * 0.99)];
    d->max = v[n - 1];
}

/* ---- samples ---- */

static int take_sample(ql_sim_t *sim, int day, double wall_s, ql_bench_retention_sample_t *out,
                       char *msg, size_t cap) {
    memset(out, 0, sizeof *out);
    out->day = day;
    out->wall_s = wall_s;
    ql_store_stat_t st;
    int rc = ql_store_stat(ql_sim_store(sim), &st);
    if (rc) {
        snprintf(msg, cap, "ql_store_stat: %s", ql_strerror(rc));
        return rc;
    }
    out->used_bytes = st.used_bytes;
    out->file_bytes = st.file_bytes;
    ql_fsck_report_t r;
    if ((rc = ql_store_fsck(ql_sim_store(sim), NULL, &r))) {
        snprintf(msg, cap, "fsck: %s", ql_strerror(rc));
        return rc;
    }
    out->jobs = r.jobs;
    out->steps = r.steps;
    out->segments = r.segments;
    out->violations = r.violations;
    out->removed = removed_now(sim);
    return 0;
}

static void print_sample(FILE *f, const ql_bench_retention_sample_t *s) {
    if (!f)
        return;
    fprintf(f,
            "day %3d: used %8.1f MiB  file %8.1f MiB  jobs %7llu  steps %7llu  segments "
            "%8llu  removed %8llu  violations %llu  (%.0f s)\n",
            s->day, (double)s->used_bytes / (1 << 20), (double)s->file_bytes / (1 << 20),
            (unsigned long long)s->jobs, (unsigned long long)s->steps,
            (unsigned long long)s->segments, (unsigned long long)s->removed,
            (unsigned long long)s->violations, s->wall_s);
    fflush(f);
}

/* ---- the run ---- */

static int add_sample(ql_bench_retention_result_t *res, const ql_bench_retention_sample_t *s) {
    ql_bench_retention_sample_t *a =
        realloc(res->samples, (res->n_samples + 1) * sizeof *res->samples);
    if (!a)
        return UV_ENOMEM;
    res->samples = a;
    res->samples[res->n_samples++] = *s;
    return 0;
}

/* The days, one run: step each, a sample every sample_days and at the end. */
static int drive(ql_sim_t *sim, run_state_t *st, int64_t t0) {
    const ql_bench_retention_opts_t *o = st->o;
    ql_bench_retention_result_t *res = st->res;
    static const char step[] = "{run: 1d}";
    ql_bench_retention_sample_t s;
    int rc = take_sample(sim, 0, 0, &s, res->msg, sizeof res->msg);
    if (rc || (rc = add_sample(res, &s)))
        return rc;
    print_sample(o->progress, &s);
    for (int day = 1; day <= o->days; day++) {
        ql_sim_result_t r;
        if (ql_sim_exec_buffer(sim, step, sizeof step - 1, &r) != QL_SIM_PASS) {
            snprintf(res->msg, sizeof res->msg, "day %d: %.3000s", day, r.msg);
            return QL_EINVAL;
        }
        if (day % o->sample_days && day != o->days)
            continue;
        double wall = (double)(ql_bench_now_ns() - t0) / 1e9;
        if ((rc = take_sample(sim, day, wall, &s, res->msg, sizeof res->msg)) ||
            (rc = add_sample(res, &s)))
            return rc;
        print_sample(o->progress, &s);
        st->t_after = 0; /* the sample's fsck is not time between two scans */
        if (s.violations) {
            snprintf(res->msg, sizeof res->msg, "day %d: fsck found %llu violations", day,
                     (unsigned long long)s.violations);
            return QL_EINVAL;
        }
    }
    return 0;
}

int ql_bench_retention_run(const ql_bench_retention_opts_t *o, ql_bench_retention_result_t *res) {
    memset(res, 0, sizeof *res);
    size_t len;
    char *yaml = scenario(o, &len);
    ql_sim_scenario_t *sc = NULL;
    ql_err_t err = {0};
    int rc = ql_sim_scenario_load_buffer(yaml, len, "retention.yaml", &sc, &err);
    free(yaml);
    if (rc) {
        snprintf(res->msg, sizeof res->msg, "the scenario: %s", err.msg);
        return rc;
    }
    run_state_t st = {.o = o, .res = res};
    res->n_slots = (size_t)(3 * 3600000 / o->scan_interval_ms);
    if (res->n_slots > QL_BENCH_RETENTION_SLOTS)
        res->n_slots = QL_BENCH_RETENTION_SLOTS;
    ql_sim_opts_t so = {.tmp_dir = o->dir,
                        .map_size = o->map_size,
                        .before_scan = before_scan,
                        .after_scan = after_scan,
                        .hook_arg = &st};
    ql_sim_t *sim = NULL;
    ql_sim_result_t sr;
    int64_t t0 = ql_bench_now_ns();
    if (ql_sim_new(sc, &so, &sim, &sr) != QL_SIM_PASS) {
        snprintf(res->msg, sizeof res->msg, "set-up: %.3000s", sr.msg);
        ql_sim_scenario_free(sc);
        return QL_EINVAL;
    }
    st.start_ms = ql_clock_now_ms(ql_sim_clock(sim));
    rc = drive(sim, &st, t0);
    res->wall_s = (double)(ql_bench_now_ns() - t0) / 1e9;
    res->removed = removed_now(sim);
    ql_sim_free(sim);
    ql_sim_scenario_free(sc);
    for (int i = 0; i < 2; i++) {
        summarize(st.ms[i].v, st.ms[i].n, &res->scan[i]);
        summarize(st.gap[i].v, st.gap[i].n, &res->gap[i]);
        free(st.ms[i].v);
        free(st.gap[i].v);
    }
    for (size_t i = 0; i < QL_BENCH_RETENTION_SLOTS; i++) {
        summarize(st.slot[i].v, st.slot[i].n, &res->slot[i]);
        free(st.slot[i].v);
    }
    return rc;
}

void ql_bench_retention_result_free(ql_bench_retention_result_t *res) {
    free(res->samples);
    res->samples = NULL;
    res->n_samples = 0;
}

/* ---- the command ---- */

static void print_dist(FILE *f, const char *what, const ql_bench_retention_dist_t *d) {
    fprintf(f, "  %-44s n %7zu  mean %8.3f  p50 %8.3f  p99 %8.3f  max %8.3f ms\n", what, d->n,
            d->mean, d->p50, d->p99, d->max);
}

static void report(FILE *f, const ql_bench_retention_opts_t *o,
                   const ql_bench_retention_result_t *r) {
    const ql_bench_retention_sample_t *last = &r->samples[r->n_samples - 1];
    fprintf(f,
            "end: %llu jobs (%d survival days x %d models = %d), %llu steps, %llu segments, "
            "%llu jobs removed, fsck %llu violations\n",
            (unsigned long long)last->jobs, o->survival_days, o->models,
            o->survival_days * o->models, (unsigned long long)last->steps,
            (unsigned long long)last->segments, (unsigned long long)r->removed,
            (unsigned long long)last->violations);
    fprintf(f, "scans after day %d (wall clock, of %llu scans in all):\n", o->survival_days + 1,
            (unsigned long long)r->scans);
    print_dist(f, "scan, no retention batch since the last scan", &r->scan[0]);
    print_dist(f, "scan, retention batch(es) since the last scan", &r->scan[1]);
    print_dist(f, "between two scans, no batch", &r->gap[0]);
    print_dist(f, "between two scans, with batch(es)", &r->gap[1]);
    fprintf(f, "scans of the first hours of the day, by time (the builds trigger at 01:00; "
               "the sweep that deletes follows them):\n");
    for (size_t i = 0; i < r->n_slots; i++) {
        char what[64];
        int64_t tod = (int64_t)i * o->scan_interval_ms / 1000;
        snprintf(what, sizeof what, "%02d:%02d:%02d, %llu after a batch", (int)(tod / 3600),
                 (int)(tod / 60 % 60), (int)(tod % 60), (unsigned long long)r->slot_after_batch[i]);
        print_dist(f, what, &r->slot[i]);
    }
    fprintf(f, "total %.1f s wall for %d models x %d days, retention %s\n", r->wall_s, o->models,
            o->days, o->retention ? "on" : "off");
}

static int usage(FILE *f, const char *name) {
    fprintf(f,
            "usage: %s [--models N] [--days N] [--sample-days N] [--survival-days N]\n"
            "       [--scan-interval-ms MS] [--batch N] [--no-retention] [--map-gib N] "
            "[--dir DIR]\n"
            "A year of retention on the virtual clock (docs/performance.md, Retention): N models "
            "built\n"
            "daily (default 1000, 365 days), the store sampled every 15 days, fsck at the end, "
            "and the\n"
            "dispatcher's scans timed with and without a retention batch before them.\n",
            name);
    return f == stdout ? 0 : 2;
}

static int bad_argument(const char *name, const char *a) {
    fprintf(stderr, "%s: bad argument '%s'\n", name, a);
    return usage(stderr, name);
}

static bool int_arg(const char *s, long min, long max, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

void ql_bench_retention_defaults(ql_bench_retention_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->models = 1000;
    o->days = 365;
    o->sample_days = 15;
    o->survival_days = 30;
    o->scan_interval_ms = 10 * 60000;
    o->retention_interval_ms = 3600000;
    o->batch = 100;
    o->retention = true;
    o->map_size = 4ull << 30;
}

/* Parses argv into o; 0, or the usage's exit code (0 for --help, 2 for a bad argument). */
static int parse(int argc, char **argv, ql_bench_retention_opts_t *o, bool *done) {
    *done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *done = true;
            return usage(stdout, argv[0]);
        }
        if (!strcmp(a, "--no-retention")) {
            o->retention = false;
            continue;
        }
        if (i + 1 >= argc)
            return bad_argument(argv[0], a);
        const char *val = argv[++i];
        if (!strcmp(a, "--dir"))
            o->dir = val;
        else if (!strcmp(a, "--models") && int_arg(val, 1, 100000, &v))
            o->models = (int)v;
        else if (!strcmp(a, "--days") && int_arg(val, 1, 3650, &v))
            o->days = (int)v;
        else if (!strcmp(a, "--sample-days") && int_arg(val, 1, 3650, &v))
            o->sample_days = (int)v;
        else if (!strcmp(a, "--survival-days") && int_arg(val, 1, 3650, &v))
            o->survival_days = (int)v;
        else if (!strcmp(a, "--scan-interval-ms") && int_arg(val, 100, DAY_MS, &v))
            o->scan_interval_ms = v;
        else if (!strcmp(a, "--batch") && int_arg(val, 1, 10000, &v))
            o->batch = (int)v;
        else if (!strcmp(a, "--map-gib") && int_arg(val, 1, 1024, &v))
            o->map_size = (uint64_t)v << 30;
        else
            return bad_argument(argv[0], a);
    }
    return 0;
}

int ql_bench_retention_main(int argc, char **argv) {
    ql_bench_retention_opts_t o;
    ql_bench_retention_defaults(&o);
    bool done;
    int rc = parse(argc, argv, &o, &done);
    if (rc || done)
        return rc;
    o.progress = stdout;
    printf("%d models built daily, %d days, scans every %lld ms, retention %s (survival %d "
           "days, batch %d, every %lld ms)\n",
           o.models, o.days, (long long)o.scan_interval_ms, o.retention ? "on" : "off",
           o.survival_days, o.batch, (long long)o.retention_interval_ms);
    fflush(stdout);
    ql_bench_retention_result_t r;
    rc = ql_bench_retention_run(&o, &r);
    if (rc) {
        fprintf(stderr, "%s: %s\n", argv[0], r.msg);
        ql_bench_retention_result_free(&r);
        return 1;
    }
    report(stdout, &o, &r);
    ql_bench_retention_result_free(&r);
    return 0;
}
