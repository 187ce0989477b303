/*
 * Property tests of the dispatcher, driven through the simulator core (sim/ql_sim.h) with
 * random metadata states (segments of random statuses and job states around the target, random
 * configs, zones and partition formats) and random step sequences (scans, runs, advance, set_time
 * back and forth, restarts, cache clears, manual builds racing the dispatcher, job actions and
 * finishes, failed submissions). After every step:
 *   - fsck passes (no two NEW/READY/WARNING segments of a model overlap except a live refresh's
 *     or merge's over its sources, states legal, indexes right);
 *   - no two non-final jobs of a model target overlapping ranges;
 * and around every scan:
 *   - the dispatcher never submits while a READY, WARNING or NEW segment, or a non-final job,
 *     overlaps the target (checked against the store as the scan saw it);
 *   - a cycle is submitted again only after every earlier build of it was discarded (its NEW
 *     segment gone), across restarts, cache loss and clock jumps: never two live builds;
 *   - a cycle cached as complete is skipped (COVERED or COVERED_WITH_WARNING from the cache),
 *     and every other decision equals the one a fresh dispatcher with an empty cache makes on the
 *     same store at the same instant.
 * The PRNG is seeded: QL_PROP_SEED (default fixed) and QL_PROP_RUNS (default 300) select the runs,
 * QL_PROP_BUDGET_S (default 25) bounds the time (no run starts after it, at least 20 run); a
 * failure prints the seed of its run, so `QL_PROP_SEED=<seed> QL_PROP_RUNS=1` replays it.
 */
#include "base/ql_datefmt.h"
#include "scheduler/ql_dispatch.h"
#include "sim/ql_sim.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_MODELS 4
#define MAX_SEGS 64
#define MAX_CYCLES 256
#define MAX_CYCLE_JOBS 16
#define H 3600000LL
#define DAY (24 * H)

/* ---- the PRNG (splitmix64) ---- */

static uint64_t rng_state;

static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int64_t rnd_range(int64_t lo, int64_t hi) { /* inclusive */
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static bool chance(int percent) {
    return (int)(rnd() % 100) < percent;
}

/* ---- one run's state ---- */

typedef struct cycle {
    ql_id_t model;
    int64_t start, end;
    ql_id_t jobs[MAX_CYCLE_JOBS];
    size_t n_jobs;
} cycle_t;

typedef struct snap_seg {
    int64_t start, end;
    ql_seg_status_t status;
} snap_seg_t;

typedef struct prop {
    uint64_t seed;
    ql_sim_t *sim;
    size_t n_models;
    ql_id_t models[MAX_MODELS];
    /* before each scan: the store as the scan sees it, and a fresh dispatcher's decisions */
    snap_seg_t snap[MAX_MODELS][MAX_SEGS];
    size_t n_snap[MAX_MODELS];
    struct {
        int64_t start, end;
    } snap_jobs[MAX_MODELS][MAX_SEGS];
    size_t n_snap_jobs[MAX_MODELS];
    ql_decision_t fresh[MAX_MODELS];
    bool has_fresh[MAX_MODELS];
    cycle_t cycles[MAX_CYCLES];
    size_t n_cycles;
    /* cycles this dispatcher decided complete from metadata since it started or its cache was
     * cleared: the only ones it may answer from its cache, with that state */
    struct {
        ql_id_t model;
        int64_t occurrence, start, end;
        ql_cycle_state_t state;
    } complete[MAX_CYCLES];
    size_t n_complete;
    size_t states[QL_CYCLE_STATE_COUNT];
    size_t cached;
    size_t scans;
    size_t submissions;
    char failure[2048];
} prop_t;

/* Records the first broken property (later ones are usually consequences). */
static void fail(prop_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(prop_t *p, const char *fmt, ...) {
    if (p->failure[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->failure, sizeof p->failure, fmt, ap);
    va_end(ap);
}

static int model_index(const prop_t *p, const ql_id_t *id) {
    for (size_t i = 0; i < p->n_models; i++)
        if (ql_id_eq(&p->models[i], id))
            return (int)i;
    return -1;
}

/* ---- hooks ---- */

typedef struct {
    prop_t *p;
    size_t m;
} snap_ctx_t;

static int snap_seg_cb(const ql_segment_t *s, void *arg) {
    snap_ctx_t *c = arg;
    if (c->p->n_snap[c->m] < MAX_SEGS)
        c->p->snap[c->m][c->p->n_snap[c->m]++] = (snap_seg_t){s->start, s->end, s->status};
    return 0;
}

static int snap_job_cb(const ql_live_job_t *j, void *arg) {
    snap_ctx_t *c = arg;
    size_t *n = &c->p->n_snap_jobs[c->m];
    if (j->has_range && *n < MAX_SEGS) {
        c->p->snap_jobs[c->m][*n].start = j->start;
        c->p->snap_jobs[c->m][*n].end = j->end;
        (*n)++;
    }
    return 0;
}

static int always_fail(void *arg) {
    (void)arg;
    return 1;
}

static void before_scan(void *arg, ql_sim_t *sim) {
    prop_t *p = arg;
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(ql_sim_store(sim), false, &txn), 0);
    for (size_t m = 0; m < p->n_models; m++) {
        snap_ctx_t c = {p, m};
        p->n_snap[m] = p->n_snap_jobs[m] = 0;
        cr_assert_eq(ql_segment_foreach(txn, &p->models[m], snap_seg_cb, &c), 0);
        cr_assert_eq(ql_job_foreach_live(txn, &p->models[m], snap_job_cb, &c), 0);
    }
    ql_txn_abort(txn);
    /* A dispatcher with an empty cache, on the same store at the same instant. Its submissions
     * all fail (injected), so it never writes: NO_OVERLAP shows as RETRYABLE_FAILURE. */
    ql_dispatcher_opts_t o;
    ql_sim_dispatcher_opts(sim, &o);
    o.log = NULL;
    o.submit_fault = always_fail;
    o.cache_capacity = 64; /* it scans once: a small cache is cheaper to make */
    ql_dispatcher_t *fresh;
    cr_assert_eq(ql_dispatcher_new(&o, &fresh), 0);
    cr_assert_eq(ql_dispatcher_scan(fresh, NULL, NULL), 0);
    for (size_t m = 0; m < p->n_models; m++)
        p->has_fresh[m] = ql_dispatcher_decision(fresh, &p->models[m], &p->fresh[m]) == 0;
    ql_dispatcher_free(fresh);
}

static bool overlaps(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
    return s1 < e2 && s2 < e1;
}

static int job_state_of(ql_sim_t *sim, const ql_id_t *job, ql_state_t *state, bool *seg_exists) {
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(ql_sim_store(sim), false, &txn), 0);
    ql_job_t j;
    int rc = ql_job_get(txn, job, 0, &j);
    if (!rc) {
        *state = j.state;
        ql_segment_t s;
        *seg_exists = ql_segment_get(txn, &j.segment, &s) == 0;
        if (*seg_exists)
            ql_segment_free(&s);
        ql_job_free(&j);
    }
    ql_txn_abort(txn);
    return rc;
}

static void on_decision(void *arg, ql_sim_t *sim, const ql_decision_t *d) {
    prop_t *p = arg;
    int m = model_index(p, &d->model);
    if (m < 0 || d->state != QL_CYCLE_SUBMITTED)
        return;
    p->submissions++;
    /* Nothing usable or building overlapped the target in the store the scan read. */
    for (size_t i = 0; i < p->n_snap[m]; i++)
        if (overlaps(p->snap[m][i].start, p->snap[m][i].end, d->target_start, d->target_end))
            fail(p, "model %s: submitted [%lld, %lld) while a %s segment [%lld, %lld) overlapped",
                 d->model_name, (long long)d->target_start, (long long)d->target_end,
                 ql_seg_status_name(p->snap[m][i].status), (long long)p->snap[m][i].start,
                 (long long)p->snap[m][i].end);
    for (size_t i = 0; i < p->n_snap_jobs[m]; i++)
        if (overlaps(p->snap_jobs[m][i].start, p->snap_jobs[m][i].end, d->target_start,
                     d->target_end))
            fail(p, "model %s: submitted [%lld, %lld) while a non-final job overlapped",
                 d->model_name, (long long)d->target_start, (long long)d->target_end);
    /* A cycle is built again only after every earlier build of it was discarded. */
    cycle_t *c = NULL;
    for (size_t i = 0; i < p->n_cycles; i++)
        if (ql_id_eq(&p->cycles[i].model, &d->model) && p->cycles[i].start == d->target_start &&
            p->cycles[i].end == d->target_end)
            c = &p->cycles[i];
    if (!c && p->n_cycles < MAX_CYCLES) {
        c = &p->cycles[p->n_cycles++];
        memset(c, 0, sizeof *c);
        c->model = d->model;
        c->start = d->target_start;
        c->end = d->target_end;
    }
    if (!c)
        return;
    for (size_t i = 0; i < c->n_jobs; i++) {
        ql_state_t st;
        bool seg;
        if (job_state_of(sim, &c->jobs[i], &st, &seg)) {
            fail(p, "model %s: an earlier build of the cycle has vanished", d->model_name);
            continue;
        }
        if ((st != QL_DISCARDED && st != QL_SUICIDAL) || seg)
            fail(p,
                 "model %s: cycle [%lld, %lld) submitted again while an earlier build of it is "
                 "%s%s",
                 d->model_name, (long long)d->target_start, (long long)d->target_end,
                 ql_state_name(st), seg ? " with its segment" : "");
    }
    if (c->n_jobs < MAX_CYCLE_JOBS)
        c->jobs[c->n_jobs++] = d->job;
}

/* SUBMITTED and RETRYABLE_FAILURE both come from NO_OVERLAP; the fresh dispatcher's submissions
 * always fail. */
static ql_cycle_state_t comparable(ql_cycle_state_t s) {
    return s == QL_CYCLE_SUBMITTED ? QL_CYCLE_RETRYABLE_FAILURE : s;
}

static void after_scan(void *arg, ql_sim_t *sim) {
    prop_t *p = arg;
    p->scans++;
    for (size_t m = 0; m < p->n_models; m++) {
        ql_decision_t d;
        if (ql_dispatcher_decision(ql_sim_dispatcher(sim), &p->models[m], &d)) {
            fail(p, "model #%zu: no decision after a scan", m);
            continue;
        }
        if (!p->has_fresh[m]) {
            fail(p, "model #%zu: the fresh dispatcher made no decision", m);
            continue;
        }
        const ql_decision_t *f = &p->fresh[m];
        size_t k = 0;
        while (k < p->n_complete &&
               !(ql_id_eq(&p->complete[k].model, &d.model) &&
                 p->complete[k].occurrence == d.occurrence &&
                 p->complete[k].start == d.target_start && p->complete[k].end == d.target_end))
            k++;
        if (d.from_cache) {
            p->cached++;
            if (d.state != QL_CYCLE_COVERED && d.state != QL_CYCLE_COVERED_WITH_WARNING)
                fail(p, "model %s: a cached decision is %s", d.model_name,
                     ql_cycle_state_name(d.state));
            else if (k == p->n_complete || p->complete[k].state != d.state)
                fail(p, "model %s: %s from the cache for a cycle never decided so from metadata",
                     d.model_name, ql_cycle_state_name(d.state));
            continue;
        }
        p->states[d.state]++;
        if ((d.state == QL_CYCLE_COVERED || d.state == QL_CYCLE_COVERED_WITH_WARNING) &&
            p->n_complete < MAX_CYCLES) {
            if (k == p->n_complete)
                p->n_complete++;
            p->complete[k].model = d.model;
            p->complete[k].occurrence = d.occurrence;
            p->complete[k].start = d.target_start;
            p->complete[k].end = d.target_end;
            p->complete[k].state = d.state;
        }
        if (comparable(d.state) != comparable(f->state) || d.reason != f->reason ||
            d.target_start != f->target_start || d.target_end != f->target_end ||
            d.occurrence != f->occurrence)
            fail(p,
                 "model %s: decided %s reason %s target [%lld, %lld) occurrence %lld; a fresh "
                 "dispatcher decides %s reason %s target [%lld, %lld) occurrence %lld",
                 d.model_name, ql_cycle_state_name(d.state), ql_skip_reason_name(d.reason),
                 (long long)d.target_start, (long long)d.target_end, (long long)d.occurrence,
                 ql_cycle_state_name(f->state), ql_skip_reason_name(f->reason),
                 (long long)f->target_start, (long long)f->target_end, (long long)f->occurrence);
    }
}

/* ---- invariants after every step ---- */

typedef struct {
    ql_live_job_t jobs[MAX_SEGS * 2];
    size_t n;
} live_list_t;

static int live_cb(const ql_live_job_t *j, void *arg) {
    live_list_t *l = arg;
    if (l->n < sizeof l->jobs / sizeof l->jobs[0])
        l->jobs[l->n++] = *j;
    return 0;
}

static void check_store(prop_t *p) {
    ql_store_t *store = ql_sim_store(p->sim);
    ql_fsck_report_t rep;
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    cr_assert_eq(ql_store_fsck(store, out, &rep), 0);
    fclose(out);
    if (rep.violations)
        fail(p, "fsck: %llu violation(s):\n%s", (unsigned long long)rep.violations, buf);
    free(buf);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, false, &txn), 0);
    for (size_t m = 0; m < p->n_models; m++) {
        live_list_t l = {.n = 0};
        cr_assert_eq(ql_job_foreach_live(txn, &p->models[m], live_cb, &l), 0);
        for (size_t a = 0; a < l.n; a++)
            for (size_t b = a + 1; b < l.n; b++)
                if (l.jobs[a].has_range && l.jobs[b].has_range &&
                    overlaps(l.jobs[a].start, l.jobs[a].end, l.jobs[b].start, l.jobs[b].end))
                    fail(p, "model #%zu: two non-final jobs (%s, %s) target overlapping ranges", m,
                         ql_state_name(l.jobs[a].state), ql_state_name(l.jobs[b].state));
    }
    ql_txn_abort(txn);
}

/* ---- generating a scenario ---- */

static const char *const zones[] = {"UTC",           "Asia/Shanghai",       "America/New_York",
                                    "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia"};
static const char *const formats[] = {"yyyy-MM-dd", "yyyyMMdd",   "yyyy-MM-dd HH:mm:ss", "yyyyMM",
                                      "yyyy-MM",    "yyyy/MM/dd", "yyyy-MM-dd HH"};
/* Days around the interesting transitions (UTC midnight), the scenario starts near one. */
static const int64_t days[] = {
    1772928000000, /* 2026-03-08: New York springs forward */
    1793491200000, /* 2026-11-01: New York falls back */
    1774742400000, /* 2026-03-29: Berlin springs forward */
    1792886400000, /* 2026-10-25: Berlin falls back */
    1791072000000, /* 2026-10-04: Lord Howe, 30 minutes forward */
    1775347200000, /* 2026-04-05: Lord Howe, 30 minutes back */
    1325203200000, /* 2011-12-30: Apia skips the day */
    1788220800000, /* 2026-09-01 */
};
static const char *const job_states[] = {"READY",  "PENDING", "RUNNING",  "ERROR",
                                         "PAUSED", "SUCCEED", "DISCARDED"};

static void hms(char *buf, size_t cap, int sec) {
    snprintf(buf, cap, "%02d:%02d:%02d", sec / 3600, sec / 60 % 60, sec % 60);
}

/* The target of a config at an instant, computed with the library's time functions, so the
 * generated segments sit around it (0 when it cannot be computed). */
static void target_of(const char *zone, const char *format, int64_t now, int trig, int off, int s,
                      int e, int64_t *ts, int64_t *te) {
    *ts = *te = 0;
    ql_tz_t *tz;
    ql_datefmt_t *fmt;
    if (ql_tz_load(zone, &tz))
        return;
    if (ql_datefmt_open(format, &fmt, NULL)) {
        ql_tz_free(tz);
        return;
    }
    ql_auto_build_cfg_t cfg = {true, trig, off, s, e};
    ql_civil_t date;
    int64_t occ, a, b;
    if (ql_dispatch_occurrence(tz, now, trig, &occ, &date) ||
        ql_dispatch_target(tz, &date, &cfg, &a, &b) || ql_normalize_range(tz, fmt, a, b, ts, te))
        *ts = *te = 0;
    ql_datefmt_free(fmt);
    ql_tz_free(tz);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void gen_segments(FILE *f, int64_t ts, int64_t te, int64_t now) {
    if (ts >= te) {
        ts = now - DAY;
        te = now;
    }
    int64_t cuts[12];
    size_t n = 0;
    cuts[n++] = ts;
    cuts[n++] = te;
    int extra = (int)rnd_range(0, 6);
    for (int i = 0; i < extra; i++)
        cuts[n++] = ts + rnd_range(-48, 48 + (te - ts) / H) * H;
    qsort(cuts, n, sizeof cuts[0], cmp_i64);
    fprintf(f, "        segments:\n");
    bool any = false;
    for (size_t i = 0; i + 1 < n; i++) {
        int64_t s = cuts[i], e = cuts[i + 1];
        if (s >= e || chance(35))
            continue;
        int kind = (int)rnd_range(0, 9);
        any = true;
        if (kind <= 2) {
            fprintf(f, "          - {start: %lld, end: %lld, status: %s}\n", (long long)s,
                    (long long)e, chance(70) ? "READY" : "WARNING");
        } else if (kind <= 7) {
            int js = (int)rnd_range(-1, 6);
            if (js < 0)
                fprintf(f, "          - {start: %lld, end: %lld, status: NEW}\n", (long long)s,
                        (long long)e);
            else
                fprintf(f, "          - {start: %lld, end: %lld, status: NEW, job: %s}\n",
                        (long long)s, (long long)e, job_states[js]);
        } else {
            /* A usable segment with a live refresh of it (the overlap the rules allow). */
            fprintf(f, "          - {start: %lld, end: %lld, status: READY}\n", (long long)s,
                    (long long)e);
            fprintf(f,
                    "          - {start: %lld, end: %lld, status: NEW, job: {type: "
                    "INDEX_REFRESH, state: %s}}\n",
                    (long long)s, (long long)e, job_states[rnd_range(0, 4)]);
        }
    }
    if (!any)
        fprintf(f, "          []\n");
}

static char *gen_scenario(prop_t *p, int64_t *start_out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int64_t start = days[rnd() % (sizeof days / sizeof days[0])] + rnd_range(-30, 30) * H +
                    rnd_range(0, 59) * 60000;
    *start_out = start;
    fprintf(f, "name: property run %llu\nstart: %lld\n", (unsigned long long)p->seed,
            (long long)start);
    fprintf(f, "config:\n  kylin.model.auto-segment-build.dispatcher-interval-ms: %lld\n",
            (long long)rnd_range(5, 30) * 60000);
    if (chance(50))
        fprintf(f, "  kylin.job.max-concurrent-jobs: %d\n", (int)rnd_range(1, 3));
    fprintf(f,
            "templates:\n"
            "  INC_BUILD:\n"
            "    steps:\n"
            "      - {name: Build, kind: %s, sim_duration: %lldm}\n"
            "  INDEX_REFRESH: {steps: [{name: Refresh, kind: noop, sim_duration: %lldm}]}\n",
            chance(15)   ? "fail"
            : chance(15) ? "warn"
                         : "noop",
            (long long)rnd_range(0, 90), (long long)rnd_range(0, 60));
    fprintf(f, "projects:\n");
    size_t n_projects = (size_t)rnd_range(1, 2);
    p->n_models = 0;
    for (size_t pi = 0; pi < n_projects; pi++) {
        const char *zone = zones[rnd() % (sizeof zones / sizeof zones[0])];
        fprintf(f, "  - name: p%zu\n    timezone: %s\n    auto_segment_build_enabled: %s\n", pi,
                zone, chance(90) ? "true" : "false");
        fprintf(f, "    models:\n");
        size_t nm = (size_t)rnd_range(1, 2);
        for (size_t mi = 0; mi < nm && p->n_models < MAX_MODELS; mi++) {
            /* Mostly daily formats: sub-day ranges on them, and most logical dates on monthly
             * ones, normalize to nothing (empty_range), which classifies nothing. */
            const char *format = chance(70) ? formats[rnd() % 3 == 0 ? 0
                                                      : rnd() % 2    ? 1
                                                                     : 5]
                                            : formats[rnd() % (sizeof formats / sizeof formats[0])];
            bool hours = strstr(format, "HH") != NULL;
            int trig = (int)rnd_range(0, 23) * 3600 + (chance(30) ? 1800 : 0);
            int off = (int)rnd_range(chance(5) ? 0 : 1, 3);
            int s = 0, e = 86400;
            if (chance(hours ? 50 : 10)) {
                s = (int)rnd_range(0, 22) * 3600;
                e = (int)rnd_range(s / 3600 + 1, 24) * 3600;
            }
            if (chance(5))
                e = s; /* invalid: start must be earlier than end */
            char tb[16], sb[16], eb[16];
            hms(tb, sizeof tb, trig);
            hms(sb, sizeof sb, s);
            hms(eb, sizeof eb, e);
            fprintf(f,
                    "      - name: m%zu\n"
                    "        partition: {column: DT, format: \"%s\"}\n"
                    "        auto_segment_build: {enabled: %s, trigger_time: \"%s\", "
                    "logical_date_offset_days: %d, data_range_start_time: \"%s\", "
                    "data_range_end_time: \"%s\"}\n",
                    p->n_models, format, chance(95) ? "true" : "false", tb, off, sb, eb);
            int64_t ts, te;
            target_of(zone, format, start, trig, off < 1 ? 1 : off, s, e > s ? e : s + 3600, &ts,
                      &te);
            gen_segments(f, ts, te, start);
            p->n_models++;
        }
    }
    fprintf(f, "steps: []\n");
    fclose(f);
    return buf;
}

/* ---- random steps ---- */

typedef struct {
    char project[QL_NAME_MAX + 1];
    char model[QL_NAME_MAX + 1];
    int64_t start, end;
} job_pick_t;

typedef struct {
    job_pick_t *picks;
    size_t n, cap;
    const char *project, *model;
} pick_list_t;

static int pick_cb(const ql_job_t *j, void *arg) {
    pick_list_t *l = arg;
    if (!j->has_range || l->n == l->cap)
        return 0;
    job_pick_t *x = &l->picks[l->n++];
    snprintf(x->project, sizeof x->project, "%s", l->project);
    snprintf(x->model, sizeof x->model, "%s", l->model);
    x->start = j->range_start;
    x->end = j->range_end;
    return 0;
}

/* A random job of a random model, as a `job:` selector; false when there is none. */
static bool random_job(prop_t *p, char *sel, size_t cap) {
    job_pick_t picks[64];
    pick_list_t l = {.picks = picks, .cap = 64};
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(ql_sim_store(p->sim), false, &txn), 0);
    for (size_t m = 0; m < p->n_models; m++) {
        ql_id_t id;
        ql_sim_model_at(p->sim, m, &l.project, &l.model, &id);
        cr_assert_eq(ql_job_foreach_model(txn, &id, pick_cb, &l), 0);
    }
    ql_txn_abort(txn);
    if (!l.n)
        return false;
    const job_pick_t *x = &picks[rnd() % l.n];
    snprintf(sel, cap, "model: %s, project: %s, range: [%lld, %lld]", x->model, x->project,
             (long long)x->start, (long long)x->end);
    return true;
}

/* A random range near the model's current decision's target, as a build. */
static void random_build(prop_t *p, char *step, size_t cap) {
    size_t m = (size_t)(rnd() % p->n_models);
    const char *project, *model;
    ql_id_t id;
    ql_sim_model_at(p->sim, m, &project, &model, &id);
    ql_decision_t d;
    int64_t now = ql_clock_now_ms(ql_sim_clock(p->sim));
    int64_t s = now - DAY, e = now;
    if (ql_dispatcher_decision(ql_sim_dispatcher(p->sim), &id, &d) == 0 && d.target_end) {
        s = d.target_start;
        e = d.target_end;
    }
    if (chance(50)) { /* not exactly the target: shifted or resized by whole hours */
        s += rnd_range(-30, 30) * H;
        e = s + rnd_range(1, 48) * H;
    }
    snprintf(step, cap, "build: {model: %s, project: %s, start: %lld, end: %lld}", model, project,
             (long long)s, (long long)e);
}

static void random_step(prop_t *p, char *step, size_t cap) {
    static const char *const actions[] = {"PAUSE", "RESUME", "DISCARD", "RESTART"};
    static const char *const outcomes[] = {"SUCCEED", "ERROR", "WARNING"};
    char sel[256];
    int r = (int)rnd_range(0, 99);
    if (r < 25) {
        snprintf(step, cap, "scan");
    } else if (r < 38) {
        snprintf(step, cap, "run: %lldm", (long long)rnd_range(1, 120));
    } else if (r < 46) {
        snprintf(step, cap, "advance: %lldm", (long long)rnd_range(1, 36 * 60));
    } else if (r < 54) {
        int64_t now = ql_clock_now_ms(ql_sim_clock(p->sim));
        snprintf(step, cap, "set_time: %lld", (long long)(now + rnd_range(-48, 48) * H));
    } else if (r < 60) {
        snprintf(step, cap, "restart");
    } else if (r < 70) {
        random_build(p, step, cap);
    } else if (r < 82 && random_job(p, sel, sizeof sel)) {
        snprintf(step, cap, "job: {%s, action: %s}", sel, actions[rnd() % 4]);
    } else if (r < 92 && random_job(p, sel, sizeof sel)) {
        snprintf(step, cap, "job: {%s, finish: %s}", sel, outcomes[rnd() % 3]);
    } else if (r < 96) {
        snprintf(step, cap, "fail_submissions: %d", (int)rnd_range(0, 2));
    } else {
        snprintf(step, cap, "clear_cache"); /* not a scenario step: done directly */
    }
}

/* ---- the runs ---- */

static uint64_t env_u64(const char *name, uint64_t def) {
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : def;
}

static void one_run(prop_t *p) {
    int64_t start;
    char *text = gen_scenario(p, &start);
    ql_sim_scenario_t *sc;
    ql_err_t err = {0};
    int rc = ql_sim_scenario_load_buffer(text, strlen(text), "property.yaml", &sc, &err);
    cr_assert_eq(rc, 0, "seed %llu: the generated scenario does not load: %s\n%s",
                 (unsigned long long)p->seed, err.msg, text);
    ql_sim_opts_t opts = {
        .tmp_dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL,
        .before_scan = before_scan,
        .after_scan = after_scan,
        .on_decision = on_decision,
        .hook_arg = p,
    };
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_new(sc, &opts, &p->sim, &res), QL_SIM_PASS, "seed %llu: %s\n%s",
                 (unsigned long long)p->seed, res.msg, text);
    for (size_t m = 0; m < p->n_models; m++)
        ql_sim_model_at(p->sim, m, NULL, NULL, &p->models[m]);
    check_store(p);
    char log[8192] = "";
    size_t used = 0;
    int n_steps = (int)rnd_range(10, 40);
    for (int i = 0; i < n_steps && !p->failure[0]; i++) {
        char step[512];
        random_step(p, step, sizeof step);
        used += (size_t)snprintf(log + used, used < sizeof log ? sizeof log - used : 0,
                                 "  %d: %s\n", i + 1, step);
        if (used >= sizeof log)
            used = sizeof log - 1;
        if (strcmp(step, "clear_cache") == 0) {
            ql_dispatcher_clear_cache(ql_sim_dispatcher(p->sim));
            p->n_complete = 0;
            continue;
        }
        if (strcmp(step, "restart") == 0)
            p->n_complete = 0; /* a new process: an empty cache */
        rc = ql_sim_exec_buffer(p->sim, step, strlen(step), &res);
        /* A refused action or build is a legitimate outcome of a random step; an unparsable
         * step is a bug of this generator. */
        cr_assert_neq(rc, QL_SIM_INVALID, "seed %llu: step %s: %s", (unsigned long long)p->seed,
                      step, res.msg);
        check_store(p);
    }
    if (p->failure[0])
        cr_assert_fail("seed %llu: %s\nscenario:\n%s\nsteps:\n%s", (unsigned long long)p->seed,
                       p->failure, text, log);
    ql_sim_free(p->sim);
    ql_sim_scenario_free(sc);
    free(text);
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(dispatch_property, random_states_and_clocks, .timeout = 120) {
    uint64_t base = env_u64("QL_PROP_SEED", 20260901);
    uint64_t want = env_u64("QL_PROP_RUNS", 300);
    /* Bounded time: no new run starts after the budget (a sanitizer build on a loaded machine is
     * many times slower); the runs are seeded in order, so the first ones always run. */
    double budget = (double)env_u64("QL_PROP_BUDGET_S", 25), t0 = mono_s();
    uint64_t runs = 0;
    size_t scans = 0, submissions = 0, cached = 0, states[QL_CYCLE_STATE_COUNT] = {0};
    prop_t *p = calloc(1, sizeof *p);
    cr_assert_not_null(p);
    for (uint64_t i = 0; i < want && (i < 20 || mono_s() - t0 < budget); i++, runs++) {
        memset(p, 0, sizeof *p);
        p->seed = base + i;
        rng_state = p->seed;
        one_run(p);
        scans += p->scans;
        submissions += p->submissions;
        cached += p->cached;
        for (int k = 0; k < QL_CYCLE_STATE_COUNT; k++)
            states[k] += p->states[k];
    }
    free(p);
    /* The runs must exercise what they claim to. */
    cr_expect_gt(scans, runs * 3, "only %zu scans", scans);
    cr_expect_gt(submissions, runs / 2, "only %zu submissions", submissions);
    char dist[512];
    size_t off = 0;
    for (int k = 1; k < QL_CYCLE_STATE_COUNT; k++)
        off += (size_t)snprintf(dist + off, sizeof dist - off, " %s=%zu", ql_cycle_state_name(k),
                                states[k]);
    cr_log_info("%llu runs from seed %llu: %zu scans, %zu submissions, %zu cached decisions;%s",
                (unsigned long long)runs, (unsigned long long)base, scans, submissions, cached,
                dist);
    /* Every decision the dispatcher can make was made somewhere (for the default runs). */
    if (runs >= 100) {
        static const ql_cycle_state_t seen[] = {
            QL_CYCLE_COVERED,           QL_CYCLE_COVERED_WITH_WARNING,
            QL_CYCLE_IN_PROGRESS,       QL_CYCLE_BLOCKED,
            QL_CYCLE_PARTIAL_OVERLAP,   QL_CYCLE_SUBMITTED,
            QL_CYCLE_RETRYABLE_FAILURE, QL_CYCLE_SKIPPED};
        for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
            cr_expect_gt(states[seen[k]], 0, "no %s decision in any run",
                         ql_cycle_state_name(seen[k]));
        cr_expect_gt(cached, 0);
    }
}
