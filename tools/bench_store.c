/*
 * qilin bench store: the storage benchmark (docs/performance.md, "Storage").
 *
 *   (a) durable "create NEW segment + INC_BUILD job" submissions per second, through the writer
 *       (group commit) and with one write transaction per submission, from 1, 8 and 64
 *       concurrent submitters, in the same run and on the same store;
 *   (b) overlap-query latency (median, p99) on N models x 100 segments, the store built with
 *       big batched transactions (set-up time reported);
 *   (c) open time of a store with a million jobs (open + the first read of a job list page),
 *       with a warm and a cold page cache, and fsck's time on it.
 *
 * Each phase runs in a child process so that its peak RSS (getrusage ru_maxrss, which counts
 * the pages of the map the phase touched) is its own. Stores live in a fresh directory under
 * --dir (default /tmp), removed at the end unless --keep.
 */
#include "bench.h"
#include "bench_int.h"

#include "storage/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DAY_MS 86400000LL
#define BASE_MS 1577836800000LL /* 2020-01-01 00:00:00 UTC */
#define MODEL_JOBS 1000         /* builds per model in the job store of phase (c) */

typedef struct {
    const char *parent;
    uint64_t models;
    uint64_t segs_per_model;
    uint64_t jobs;
    double seconds;
    uint64_t queries;
    uint64_t tx_models;
    bool keep;
    bool phase[3];
    const char *url; /* NULL: LMDB; else the PostgreSQL database of the stores */
} opts_t;

typedef struct {
    opts_t o;
    char root[1024];
} bench_t;

static double secs_since(int64_t t0) {
    return (double)(ql_bench_now_ns() - t0) / 1e9;
}

static int fail(const char *what, int rc, const char *msg) {
    fprintf(stderr, "qilin bench store: %s: %s%s%s\n", what, ql_strerror(rc), msg ? ": " : "",
            msg ? msg : "");
    return 1;
}

static int open_store(const char *path, ql_store_t **out) {
    ql_store_opts_t o = {.path = path, .map_size = 1ull << 40};
    ql_err_t err = {0};
    int rc = ql_store_open(&o, out, &err);
    if (rc)
        fail("open", rc, err.msg);
    return rc;
}

/* Opens (creating) the store of one phase, in ROOT/name; its path to dir (cap bytes). Returns 0
 * or 1 (printed). */
static int open_phase_store(const bench_t *b, const char *name, char *dir, size_t cap,
                            ql_store_t **out) {
    snprintf(dir, cap, "%s/%s", b->root, name);
    if (!b->o.url)
        return open_store(dir, out) ? 1 : 0;
    /* A schema of its own per phase, named after the run's directory, dropped at close. */
    char schema[64];
    const char *tail = strrchr(b->root, '-');
    snprintf(schema, sizeof schema, "qilin_bench_%s_%s", tail ? tail + 1 : "0", name);
    ql_store_opts_t o = {
        .path = dir, .url = b->o.url, .pg_schema = schema, .pg_drop_at_close = !b->o.keep};
    ql_err_t err = {0};
    int rc = ql_store_open(&o, out, &err);
    if (rc)
        fail("open", rc, err.msg);
    return rc ? 1 : 0;
}

static const ql_step_spec_t steps[2] = {
    {.name = "Load data to index", .kind = "noop"},
    {.name = "Update metadata", .kind = "noop"},
};

/* Creates project "bench" and n partitioned models, in transactions of 10000; ids to models. */
static int create_models(ql_store_t *store, ql_id_t *models, uint64_t n) {
    ql_txn_t *t;
    int rc = ql_txn_begin(store, true, &t);
    if (rc)
        return fail("begin", rc, NULL);
    ql_project_t p = {0};
    strcpy(p.name, "bench");
    if ((rc = ql_project_put(t, &p)))
        goto abort;
    for (uint64_t i = 0; i < n; i++) {
        ql_model_t m = {0};
        ql_store_new_id(store, &m.id);
        strcpy(m.project, "bench");
        snprintf(m.name, sizeof m.name, "model_%llu", (unsigned long long)i);
        m.partitioned = true;
        strcpy(m.partition_column, "FACT.DAY");
        strcpy(m.partition_format, "yyyy-MM-dd");
        if ((rc = ql_model_put(t, &m)))
            goto abort;
        models[i] = m.id;
        if (i % 10000 == 9999) {
            if ((rc = ql_txn_commit(t)) || (rc = ql_txn_begin(store, true, &t)))
                return fail("commit", rc, NULL);
        }
    }
    if ((rc = ql_txn_commit(t)))
        return fail("commit", rc, NULL);
    return 0;
abort:
    ql_txn_abort(t);
    return fail("create models", rc, NULL);
}

/* ---- (a) durable submissions per second ---- */

typedef struct {
    ql_store_t *store;
    ql_writer_t *w; /* NULL: one transaction per submission */
    ql_id_t *models;
    uint64_t n_models;
    atomic_ullong next;
    atomic_ullong done;
    atomic_ullong failed;
    int64_t deadline;
} txrun_t;

typedef struct {
    const ql_id_t *model;
    int64_t start;
} build_arg_t;

static int build_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    build_arg_t *b = arg;
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "System", .now = b->start, .steps = steps, .n_steps = 2};
    return ql_meta_submit_build(txn, b->model, b->start, b->start + DAY_MS, &spec, NULL, NULL, err);
}

static void *submitter_main(void *arg) {
    txrun_t *r = arg;
    while (ql_bench_now_ns() < r->deadline) {
        uint64_t k = atomic_fetch_add(&r->next, 1);
        build_arg_t b = {.model = &r->models[k % r->n_models],
                         .start = BASE_MS + (int64_t)(k / r->n_models) * DAY_MS};
        ql_err_t err;
        int rc;
        if (r->w) {
            rc = ql_writer_call(r->w, build_fn, &b, &err);
        } else {
            ql_txn_t *t;
            rc = ql_txn_begin(r->store, true, &t);
            if (!rc) {
                rc = build_fn(t, &b, &err);
                if (rc)
                    ql_txn_abort(t);
                else
                    rc = ql_txn_commit(t);
            }
        }
        atomic_fetch_add(rc ? &r->failed : &r->done, 1);
    }
    return NULL;
}

static int phase_txrate(bench_t *b) {
    char dir[1100];
    ql_store_t *store;
    if (open_phase_store(b, "txrate", dir, sizeof dir, &store))
        return 1;
    /* Builds rotate over the models, as daily builds of many models do; fewer models put the
     * records of one commit on fewer pages (see --tx-models). */
    const uint64_t n_models = b->o.tx_models;
    ql_id_t *models = calloc(n_models, sizeof *models);
    if (!models || create_models(store, models, n_models))
        return 1;
    printf("(a) durable submissions: create NEW segment + INC_BUILD job (2 steps), %.1f s each, "
           "builds rotating over %llu models\n",
           b->o.seconds, (unsigned long long)n_models);
    printf("%8s  %-22s %12s %12s %14s\n", "threads", "mode", "builds/s", "commits/s",
           "builds/commit");
    static const int thread_counts[3] = {1, 8, 64};
    atomic_ullong next = 0;
    for (int ti = 0; ti < 3; ti++) {
        for (int mode = 0; mode < 2; mode++) {
            int nt = thread_counts[ti];
            txrun_t r = {.store = store, .models = models, .n_models = n_models};
            atomic_store(&r.next, atomic_load(&next));
            ql_writer_stats_t before = {0}, after = {0};
            if (mode == 0) {
                int rc = ql_writer_new(store, NULL, &r.w);
                if (rc)
                    return fail("writer", rc, NULL);
            }
            pthread_t *th = calloc((size_t)nt, sizeof *th);
            int64_t t0 = ql_bench_now_ns();
            r.deadline = t0 + (int64_t)(b->o.seconds * 1e9);
            for (int i = 0; i < nt; i++)
                pthread_create(&th[i], NULL, submitter_main, &r);
            for (int i = 0; i < nt; i++)
                pthread_join(th[i], NULL);
            double el = secs_since(t0);
            free(th);
            uint64_t done = atomic_load(&r.done), failed = atomic_load(&r.failed);
            uint64_t commits = done;
            if (r.w) {
                ql_writer_get_stats(r.w, &after);
                commits = after.batches - before.batches;
                ql_writer_free(r.w);
            }
            atomic_store(&next, atomic_load(&r.next));
            if (failed)
                fprintf(stderr, "qilin bench store: %llu submissions failed\n",
                        (unsigned long long)failed);
            printf("%8d  %-22s %12.0f %12.0f %14.1f\n", nt,
                   mode == 0 ? "group commit (writer)" : "txn per submission", (double)done / el,
                   (double)commits / el, commits ? (double)done / (double)commits : 0.0);
            fflush(stdout);
        }
    }
    printf("store after (a): %.2f GiB on disk\n", ql_bench_store_gib(dir));
    free(models);
    ql_store_close(store);
    return 0;
}

/* The set-up of a phase: nm model ids (owned by the caller) for nm new models, or NULL
 * (printed). *t0 is when the set-up began, for its timing. */
static ql_id_t *set_up_models(ql_store_t *store, uint64_t nm, int64_t *t0) {
    ql_id_t *models = calloc(nm, sizeof *models);
    if (!models) {
        fail("set-up", UV_ENOMEM, NULL);
        return NULL;
    }
    *t0 = ql_bench_now_ns();
    if (create_models(store, models, nm)) {
        free(models);
        return NULL;
    }
    return models;
}

/* ---- (b) overlap query latency ---- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static void print_latency(const char *what, int64_t *lat, uint64_t n, uint64_t hits) {
    qsort(lat, n, sizeof *lat, cmp_i64);
    printf("  %-28s %9.2f %9.2f %9.2f %9.2f\n", what, (double)lat[n / 2] / 1e3,
           (double)lat[n * 99 / 100] / 1e3, (double)lat[n - 1] / 1e3, (double)hits / (double)n);
}

static int phase_overlap(bench_t *b) {
    char dir[1100];
    ql_store_t *store;
    if (open_phase_store(b, "segments", dir, sizeof dir, &store))
        return 1;
    uint64_t nm = b->o.models, per = b->o.segs_per_model;
    int64_t t0;
    ql_id_t *models = set_up_models(store, nm, &t0);
    if (!models)
        return 1;
    /* One day per segment, consecutive: the shape of a daily-built model. Transactions of
     * about 50000 segments keep set-up time sane without giant dirty lists. */
    uint64_t per_txn = per ? (50000 + per - 1) / per : 1;
    ql_txn_t *t = NULL;
    int rc = 0;
    for (uint64_t i = 0; i < nm && !rc; i++) {
        if (!t && (rc = ql_txn_begin(store, true, &t)))
            break;
        for (uint64_t k = 0; k < per && !rc; k++) {
            ql_segment_t s = {0};
            ql_store_new_id(store, &s.id);
            s.model = models[i];
            s.start = BASE_MS + (int64_t)k * DAY_MS;
            s.end = s.start + DAY_MS;
            s.status = QL_SEG_READY;
            s.create_time = s.last_build_time = s.start;
            rc = ql_segment_put(t, &s);
        }
        if (!rc && (i % per_txn == per_txn - 1 || i == nm - 1)) {
            rc = ql_txn_commit(t);
            t = NULL;
        }
        if (i % 10000 == 9999) {
            fprintf(stderr, "  ... %llu models, %.0f s\r", (unsigned long long)i + 1,
                    secs_since(t0));
        }
    }
    if (rc) {
        if (t)
            ql_txn_abort(t);
        return fail("segment set-up", rc, NULL);
    }
    double setup = secs_since(t0);
    uint64_t total = nm * per;
    printf("(b) overlap query on %llu models x %llu segments = %llu segments\n",
           (unsigned long long)nm, (unsigned long long)per, (unsigned long long)total);
    printf("  set-up: %.1f s (%.0f segments/s), %.2f GiB on disk\n", setup, (double)total / setup,
           ql_bench_store_gib(dir));

    /* Random model, random range of 1 to 3 days anywhere in (and a little past) its span. */
    uint64_t q = b->o.queries, seed = 0x2545f4914f6cdd1dull;
    int64_t *lat = calloc(q, sizeof *lat);
    if (!lat)
        return fail("queries", UV_ENOMEM, NULL);
    ql_segment_t out[8];
    printf("  %-28s %9s %9s %9s %9s\n", "latency (us)", "median", "p99", "max", "hits/q");
    for (int pass = 0; pass < 2; pass++) {
        ql_txn_t *rt = NULL;
        if (pass == 0 && (rc = ql_txn_begin(store, false, &rt)))
            return fail("read", rc, NULL);
        uint64_t hits = 0;
        for (uint64_t i = 0; i < q; i++) {
            const ql_id_t *m = &models[xorshift(&seed) % nm];
            int64_t s = BASE_MS + (int64_t)(xorshift(&seed) % ((per + 2) * 24)) * 3600000;
            int64_t e = s + (int64_t)(1 + xorshift(&seed) % 3) * DAY_MS;
            size_t n = 0;
            int64_t q0 = ql_bench_now_ns();
            ql_txn_t *qt = rt;
            if (pass == 1 && (rc = ql_txn_begin(store, false, &qt)))
                return fail("read", rc, NULL);
            rc = ql_segment_overlapping(qt, m, s, e, out, 8, &n);
            if (pass == 1)
                ql_txn_abort(qt);
            lat[i] = ql_bench_now_ns() - q0;
            if (rc)
                return fail("query", rc, NULL);
            hits += n;
        }
        if (rt)
            ql_txn_abort(rt);
        print_latency(pass == 0 ? "query (in one read txn)" : "read txn + query", lat, q, hits);
    }
    free(lat);
    free(models);
    ql_store_close(store);
    return 0;
}

/* ---- (c) open a store of a million jobs ---- */

/* Finishes a build as the engine would: steps and job SUCCEED, its segment READY. */
static int finish_build(ql_txn_t *t, const ql_id_t *job, int64_t now) {
    ql_job_t j;
    int rc = ql_job_get(t, job, QL_DECODE_KEEP_EXTRA, &j);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < j.n_steps && !rc; i++) {
        ql_step_t s;
        if (!(rc = ql_step_get(t, job, i, &s))) {
            s.state = QL_SUCCEED;
            s.start_time = now;
            s.end_time = now;
            s.attempts = 1;
            rc = ql_step_put(t, &s);
            ql_step_free(&s);
        }
    }
    if (!rc)
        rc = ql_meta_apply_job_outcome(t, &j, QL_SUCCEED, false, now);
    if (!rc) {
        j.state = QL_SUCCEED;
        j.start_time = j.end_time = j.modify_time = now;
        rc = ql_job_put(t, &j);
    }
    ql_job_free(&j);
    return rc;
}

typedef struct {
    int n;
    ql_id_t ids[20];
} page_t;

static int page_cb(const ql_id_t *id, ql_state_t st, int64_t mtime, void *arg) {
    (void)st;
    (void)mtime;
    page_t *p = arg;
    p->ids[p->n++] = *id;
    return p->n == 20;
}

/* Open + what a server's first job list request reads: the count and one page of jobs. */
static int open_and_first_read(const char *dir, double *ms, ql_store_t **out) {
    int64_t t0 = ql_bench_now_ns();
    ql_store_t *store;
    if (open_store(dir, &store))
        return 1;
    ql_txn_t *t;
    int rc = ql_txn_begin(store, false, &t);
    if (rc) {
        ql_store_close(store);
        return fail("first read", rc, NULL);
    }
    uint64_t total = 0;
    page_t page = {0};
    rc = ql_job_count(t, "bench", 0xff, &total);
    if (!rc)
        rc = ql_job_foreach_recent(t, "bench", false, page_cb, &page);
    for (int i = 0; !rc && i < page.n; i++) {
        ql_job_t j;
        if (!(rc = ql_job_get(t, &page.ids[i], 0, &j)))
            ql_job_free(&j);
    }
    ql_txn_abort(t);
    *ms = (double)(ql_bench_now_ns() - t0) / 1e6;
    if (rc || page.n != 20 || total == 0) {
        ql_store_close(store);
        return fail("first read", rc, "fewer jobs than a page");
    }
    *out = store;
    return 0;
}

static int phase_open(bench_t *b) {
    char dir[1100];
    ql_store_t *store;
    if (open_phase_store(b, "jobs", dir, sizeof dir, &store))
        return 1;
    uint64_t nj = b->o.jobs, nm = (nj + MODEL_JOBS - 1) / MODEL_JOBS;
    int64_t t0;
    ql_id_t *models = set_up_models(store, nm, &t0);
    if (!models)
        return 1;
    /* 99% of the jobs finished (SUCCEED, segment READY), the last of each model still READY:
     * what a store looks like after a long life. */
    ql_txn_t *t = NULL;
    int rc = 0;
    ql_err_t err = {0};
    for (uint64_t k = 0; k < nj && !rc; k++) {
        if (!t && (rc = ql_txn_begin(store, true, &t)))
            break;
        uint64_t m = k % nm, seq = k / nm;
        build_arg_t ba = {.model = &models[m], .start = BASE_MS + (int64_t)seq * DAY_MS};
        ql_job_spec_t spec = {.priority = (int)(k % 5),
                              .submitter = "System",
                              .now = BASE_MS + (int64_t)k * 1000,
                              .steps = steps,
                              .n_steps = 2};
        ql_id_t job;
        rc =
            ql_meta_submit_build(t, ba.model, ba.start, ba.start + DAY_MS, &spec, &job, NULL, &err);
        if (!rc && seq % 100 != 99)
            rc = finish_build(t, &job, spec.now + 500);
        if (!rc && k % 10000 == 9999) {
            rc = ql_txn_commit(t);
            t = NULL;
            fprintf(stderr, "  ... %llu jobs, %.0f s\r", (unsigned long long)k + 1, secs_since(t0));
        }
    }
    if (!rc && t) {
        rc = ql_txn_commit(t);
        t = NULL;
    }
    if (rc) {
        if (t)
            ql_txn_abort(t);
        return fail("job set-up", rc, err.msg[0] ? err.msg : NULL);
    }
    double setup = secs_since(t0);
    ql_store_close(store);
    printf("(c) store with %llu jobs (%llu models, 2 steps each, 99%% SUCCEED)\n",
           (unsigned long long)nj, (unsigned long long)nm);
    printf("  set-up: %.1f s (%.0f jobs/s), %.2f GiB on disk\n", setup, (double)nj / setup,
           ql_bench_store_gib(dir));

    double warm, cold;
    if (open_and_first_read(dir, &warm, &store))
        return 1;
    ql_store_close(store);
    /* Drop the data file from the page cache (it is clean: every commit was synced). */
    char file[1200];
    snprintf(file, sizeof file, "%s/data.mdb", dir);
    int fd = open(file, O_RDONLY);
    bool dropped = fd >= 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
    if (fd >= 0)
        close(fd);
    if (open_and_first_read(dir, &cold, &store))
        return 1;
    printf("  open + first read (count + a page of 20 jobs): %.2f ms warm, %.2f ms cold%s\n", warm,
           cold, dropped ? "" : " (page cache not dropped)");
    ql_fsck_report_t r;
    int64_t f0 = ql_bench_now_ns();
    if ((rc = ql_store_fsck(store, NULL, &r)))
        return fail("fsck", rc, NULL);
    printf("  fsck: %.1f s for %llu jobs, %llu steps, %llu segments: %llu violations, %llu "
           "warnings\n",
           secs_since(f0), (unsigned long long)r.jobs, (unsigned long long)r.steps,
           (unsigned long long)r.segments, (unsigned long long)r.violations,
           (unsigned long long)r.warnings);
    ql_store_close(store);
    free(models);
    return r.violations ? 1 : 0;
}

/* ---- driver ---- */

static void usage(FILE *out, const char *name) {
    fprintf(out,
            "usage: %s [--dir DIR] [--models N] [--segments-per-model N] [--jobs N]\n"
            "       [--seconds S] [--tx-models N] [--queries N] [--only tx,overlap,open] [--keep]\n"
            "       [--url URL]\n"
            "\n"
            "  --dir DIR               parent of the benchmark's stores (default /tmp); the\n"
            "                          full-size run needs about 6 GiB there\n"
            "  --models N              models of the overlap phase (default 100000)\n"
            "  --segments-per-model N  segments per model (default 100)\n"
            "  --jobs N                jobs of the open phase (default 1000000)\n"
            "  --seconds S             duration of each submission measurement (default 3)\n"
            "  --tx-models N           models the submissions rotate over (default 1000)\n"
            "  --queries N             overlap queries (default 100000)\n"
            "  --only LIST             phases to run (default all)\n"
            "  --keep                  keep the stores\n"
            "  --url URL               run phases tx and overlap on the PostgreSQL database at\n"
            "                          URL, each in a fresh schema (dropped unless --keep)\n",
            name);
}

static bool parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0)
        return false;
    *out = v;
    return true;
}

static int parse(int argc, char **argv, opts_t *o) {
    *o = (opts_t){.parent = "/tmp",
                  .models = 100000,
                  .segs_per_model = 100,
                  .jobs = 1000000,
                  .seconds = 3,
                  .queries = 100000,
                  .tx_models = 1000,
                  .phase = {true, true, true}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            return 1;
        } else if (!strcmp(a, "--keep")) {
            o->keep = true;
            continue;
        } else if (!v) {
            ok = false;
        } else if (!strcmp(a, "--url")) {
            o->url = v;
        } else if (!strcmp(a, "--dir")) {
            o->parent = v;
        } else if (!strcmp(a, "--models")) {
            ok = parse_u64(v, &o->models);
        } else if (!strcmp(a, "--segments-per-model")) {
            ok = parse_u64(v, &o->segs_per_model);
        } else if (!strcmp(a, "--jobs")) {
            ok = parse_u64(v, &o->jobs) && o->jobs >= 20;
        } else if (!strcmp(a, "--tx-models")) {
            ok = parse_u64(v, &o->tx_models);
        } else if (!strcmp(a, "--queries")) {
            ok = parse_u64(v, &o->queries);
        } else if (!strcmp(a, "--seconds")) {
            char *end;
            o->seconds = strtod(v, &end);
            ok = end != v && !*end && o->seconds > 0;
        } else if (!strcmp(a, "--only")) {
            memset(o->phase, 0, sizeof o->phase);
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            char *save = NULL;
            for (char *p = strtok_r(buf, ",", &save); p && ok; p = strtok_r(NULL, ",", &save)) {
                if (!strcmp(p, "tx"))
                    o->phase[0] = true;
                else if (!strcmp(p, "overlap"))
                    o->phase[1] = true;
                else if (!strcmp(p, "open"))
                    o->phase[2] = true;
                else
                    ok = false;
            }
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "%s: bad argument '%s%s%s'\n", argv[0], a, v ? " " : "", v ? v : "");
            usage(stderr, argv[0]);
            return 2;
        }
        i++;
    }
    if (o->url && o->phase[2]) {
        fprintf(stderr,
                "%s: --url: the open phase measures LMDB's page cache; use --only "
                "tx,overlap\n",
                argv[0]);
        return 2;
    }
    return 0;
}

int ql_bench_store_main(int argc, char **argv) {
    bench_t b;
    int rc = parse(argc, argv, &b.o);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (snprintf(b.root, sizeof b.root, "%s/qilin-bench-store-XXXXXX", b.o.parent) >=
        (int)sizeof b.root) {
        fprintf(stderr, "qilin bench store: --dir %s is too long\n", b.o.parent);
        return 2;
    }
    if (!mkdtemp(b.root)) {
        fprintf(stderr, "qilin bench store: cannot create a directory under %s: %s\n", b.o.parent,
                strerror(errno));
        return 1;
    }
    printf("qilin bench store: stores under %s\n\n", b.root);
    int (*phases[3])(bench_t *) = {phase_txrate, phase_overlap, phase_open};
    static const char *const names[3] = {"(a)", "(b)", "(c)"};
    int status = 0;
    for (int i = 0; i < 3; i++) {
        if (!b.o.phase[i])
            continue;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "qilin bench store: fork: %s\n", strerror(errno));
            status = 1;
            break;
        }
        if (pid == 0) {
            int prc = phases[i](&b);
            printf("  peak RSS of %s: %.0f MiB\n\n", names[i], ql_bench_peak_rss_mib());
            fflush(stdout);
            _exit(prc);
        }
        int ws;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "qilin bench store: phase %s failed\n", names[i]);
            status = 1;
        }
    }
    if (!b.o.keep)
        ql_bench_rm_rf(b.root);
    else
        printf("stores kept under %s\n", b.root);
    return status;
}
