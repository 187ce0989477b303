/*
 * qilin bench jobs (also the standalone qilin-bench-jobs): the job engine benchmark
 * (docs/performance.md, "Job engine").
 *
 *   (a) idle dispatch latency: from a submission's acknowledgement (the submission service's
 *       answer, i.e. the job is durable) to its first step starting (the step-start hook, which
 * runs once the READY -> PENDING -> RUNNING pick is durable): p50/p99 over --latency-n submissions,
 * one at a time on an idle engine; (b) durable throughput: --jobs READY jobs of one noop step, then
 * as many of three noop steps, run to SUCCEED with every transition committed (group commit):
 *       jobs/s and transitions/s (job and step state changes);
 *   (c) shell-step throughput: --shell-jobs jobs of one `/bin/true` shell step (through
 *       qilin-exec), against plain fork/exec/wait loops of /bin/true, one at a time and with as
 *       many in flight as the engine may run: the limit on this machine;
 *   (d) recovery: a store of --finished SUCCEED jobs and --interrupted RUNNING ones (built with
 *       large direct write transactions, as a crashed server leaves it: each interrupted step
 *       with its try's marker and a recorded process group whose leader died with the server,
 *       so recovery sweeps /proc for them): time from the node's start to the first resumed
 *       step, and to all of them finished.
 *
 * Everything runs the real composition (ql_node: store, threaded writer waking the loop,
 * real clock, templates from a YAML file, lock, scheduler). The READY jobs of (b) and (c) are
 * created before the node starts, through the submission mutation (ql_submit_fn) in batched
 * direct transactions, so the figures are the scheduler's own. Each benchmark runs in a child
 * process so that its peak RSS (getrusage) is its own; stores live in a fresh directory under
 * --dir (default /tmp), removed at the end unless --keep.
 */
#include "bench.h"

#include "engine/ql_proc.h"
#include "scheduler/ql_submission.h"
#include "server/ql_node.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#define DAY_MS 86400000LL
#define BASE_MS 1577836800000LL /* 2020-01-01 00:00:00 UTC */

typedef struct bench_opts {
    const char *parent;
    const char *only; /* letters of the benchmarks to run, NULL: all */
    const char *exec_helper;
    int latency_n;
    int jobs;
    int shell_jobs;
    long finished;
    long interrupted;
    int concurrency;
    bool keep;
    char dir[PATH_MAX];
} bench_opts_t;

/* ---- small helpers ---- */

static double now_ms(void) {
    return (double)uv_hrtime() / 1e6;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "qilin bench jobs: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* CPU time (user + system) of this process so far, ms. */
static double cpu_ms(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* "RssAnon + RssFile" of this process now, from /proc/self/status (MiB each). */
static void rss_now(double *anon, double *file) {
    *anon = *file = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "RssAnon: %ld", &kb) == 1)
            *anon = kb / 1024.0;
        else if (sscanf(line, "RssFile: %ld", &kb) == 1)
            *file = kb / 1024.0;
    }
    fclose(f);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* ---- a world: a data directory, its templates, and a node on a loop ---- */

typedef struct world {
    const bench_opts_t *o;
    char data[PATH_MAX + 64];
    char templates[PATH_MAX + 64];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_config_t *cfg;
    ql_node_t *node;
    bool stopped;
    ql_id_t model;   /* the first model */
    ql_id_t *models; /* n_models of them, jobs spread round-robin */
    int n_models;
    /* hook */
    void (*on_start)(struct world *w, const ql_id_t *job, uint32_t seq);
    uint64_t starts;
    double first_start_ms;
    bool first_step_started; /* (a): step 00 of the job in flight started */
    double first_step_ms;
} world_t;

/* The templates of the benchmarks whose jobs have one noop step. */
#define NOOP_TEMPLATES "templates:\n  INC_BUILD:\n    steps:\n      - {name: quick, kind: noop}\n"

static void world_dirs(world_t *w, const bench_opts_t *o, const char *name, const char *yaml) {
    memset(w, 0, sizeof *w);
    w->o = o;
    snprintf(w->data, sizeof w->data, "%s/%s", o->dir, name);
    snprintf(w->templates, sizeof w->templates, "%s/%s.yaml", o->dir, name);
    FILE *f = fopen(w->templates, "w");
    if (!f || fputs(yaml, f) < 0 || fclose(f) != 0)
        fail("cannot write %s: %s", w->templates, strerror(errno));
}

static ql_store_t *open_store(world_t *w, uint64_t map_size) {
    ql_store_opts_t so = {.path = w->data, .map_size = map_size};
    ql_store_t *s;
    ql_err_t err = {0};
    if (ql_store_open(&so, &s, &err))
        fail("cannot open the store %s: %s", w->data, err.msg);
    return s;
}

/* Project "p" and n partitioned models "m0".."m<n-1>". A model with thousands of live jobs is
 * not what a server sees (and the submission's job-conflict check walks a model's live jobs),
 * so the READY jobs of (b) and (c) are spread over models, JOBS_PER_MODEL each. */
#define JOBS_PER_MODEL 200

static void create_models(world_t *w, ql_store_t *s, int n) {
    ql_txn_t *t;
    ql_err_t err = {0};
    if (ql_txn_begin(s, true, &t))
        fail("cannot begin a transaction");
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p");
    if (ql_meta_create_project(t, &p, BASE_MS, &err))
        fail("project: %s", err.msg);
    w->n_models = n < 1 ? 1 : n;
    w->models = calloc((size_t)w->n_models, sizeof *w->models);
    for (int i = 0; i < w->n_models; i++) {
        ql_model_t m = {0};
        snprintf(m.name, sizeof m.name, "m%d", i);
        snprintf(m.project, sizeof m.project, "p");
        m.partitioned = true;
        snprintf(m.partition_column, sizeof m.partition_column, "dt");
        snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
        if (ql_meta_create_model(t, &m, BASE_MS, &err))
            fail("model: %s", err.msg);
        w->models[i] = m.id;
    }
    if (ql_txn_commit(t))
        fail("cannot commit the models");
    w->model = w->models[0];
}

static void create_model(world_t *w, ql_store_t *s) {
    create_models(w, s, 1);
}

/* n READY builds, round-robin over the models (consecutive days in each), through the
 * submission mutation, in transactions of a few thousand. */
static void create_jobs(world_t *w, ql_store_t *s, const ql_templates_t *tpl, int n) {
    for (int i = 0; i < n;) {
        ql_txn_t *t;
        if (ql_txn_begin(s, true, &t))
            fail("cannot begin a transaction");
        for (int k = 0; k < 5000 && i < n; k++, i++) {
            int64_t day = i / w->n_models;
            ql_submit_op_t op = {
                .kind = QL_SUBMIT_BUILD,
                .templates = tpl,
                .model = w->models[i % w->n_models],
                .start = BASE_MS + day * DAY_MS,
                .end = BASE_MS + (day + 1) * DAY_MS,
                .priority = 3,
                .submitter = "ADMIN",
                .now = BASE_MS + i,
            };
            ql_err_t err = {0};
            if (ql_submit_fn(t, &op, &err))
                fail("submit: %s", err.msg);
        }
        if (ql_txn_commit(t))
            fail("cannot commit the jobs");
    }
}

static ql_templates_t *load_templates(world_t *w) {
    ql_templates_t *t;
    ql_err_t err = {0};
    if (ql_templates_load_file(w->templates, &t, &err))
        fail("%s", err.msg);
    return t;
}

static void tick_cb(uv_timer_t *t) {
    (void)t;
}

static void hook(void *arg, const ql_id_t *job, uint32_t seq) {
    world_t *w = arg;
    if (w->starts++ == 0)
        w->first_start_ms = now_ms();
    if (w->on_start)
        w->on_start(w, job, seq);
}

static void set(world_t *w, const char *key, const char *value) {
    char arg[PATH_MAX + 256];
    snprintf(arg, sizeof arg, "%s=%s", key, value);
    ql_err_t err = {0};
    if (ql_config_set_arg(w->cfg, arg, &err))
        fail("%s", err.msg);
}

static void start_node(world_t *w, const char *map_size) {
    if (uv_loop_init(&w->loop))
        fail("uv_loop_init");
    uv_timer_init(&w->loop, &w->tick);
    uv_timer_start(&w->tick, tick_cb, 10, 10);
    if (ql_config_new(&w->cfg))
        fail("out of memory");
    char n[32];
    set(w, "qilin.storage.path", w->data);
    set(w, "qilin.storage.map-size", map_size);
    set(w, "qilin.jobs.templates", w->templates);
    /* The engine is measured, not retention: the seeded finished jobs must stay. */
    set(w, "qilin.retention.interval-ms", "0");
    snprintf(n, sizeof n, "%d", w->o->concurrency);
    set(w, "kylin.job.max-concurrent-jobs", n);
    ql_node_opts_t no = {.config = w->cfg, .loop = &w->loop, .exec_helper = w->o->exec_helper};
    ql_err_t err = {0};
    if (ql_node_start(&no, &w->node, &err))
        fail("cannot start the node: %s", err.msg);
    if (!ql_node_sched(w->node))
        fail("the node does not schedule (is another server holding %s?)", w->data);
    ql_sched_set_step_start_hook(ql_node_sched(w->node), hook, w);
}

static void stopped_cb(void *arg) {
    ((world_t *)arg)->stopped = true;
}

static void stop_node(world_t *w) {
    ql_node_stop(w->node, stopped_cb, w);
    while (!w->stopped)
        uv_run(&w->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&w->tick, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    uv_loop_close(&w->loop);
    ql_config_free(w->cfg);
    free(w->models);
}

static uint64_t count(world_t *w, uint32_t mask) {
    ql_txn_t *t;
    uint64_t n = 0;
    if (ql_txn_begin(ql_node_store(w->node), false, &t) == 0) {
        ql_job_count(t, NULL, mask, &n);
        ql_txn_abort(t);
    }
    return n;
}

/* Drives the loop until n jobs are final (SUCCEED or ERROR); returns when that was seen. The
 * counters are read at most every 1 ms (the loop also wakes for every writer answer). */
static double run_until_final(world_t *w, uint64_t n) {
    double last = 0;
    for (;;) {
        uv_run(&w->loop, UV_RUN_ONCE);
        double t = now_ms();
        if (t - last < 1)
            continue;
        last = t;
        if (count(w, (1u << QL_SUCCEED) | (1u << QL_ERROR)) >= n)
            return t;
    }
}

/* ---- (a) idle dispatch latency ---- */

typedef struct {
    world_t *w;
    bool acked;
    double ack_ms;
} lat_sub_t;

static void lat_start(world_t *w, const ql_id_t *job, uint32_t seq) {
    (void)job;
    if (seq == 0) {
        w->first_step_ms = now_ms();
        w->first_step_started = true;
    }
}

/* The service's answer; it kicks the node's fetcher right after. */
static void lat_done(void *arg, const ql_submission_result_t *r) {
    lat_sub_t *s = arg;
    s->ack_ms = now_ms();
    s->acked = true;
    if (r->status)
        fail("submit: %s", r->err->msg);
}

static void bench_latency(const bench_opts_t *o, FILE *out) {
    world_t w;
    world_dirs(&w, o, "latency", NOOP_TEMPLATES);
    ql_store_t *s = open_store(&w, 1ull << 30);
    create_model(&w, s);
    ql_store_close(s);
    start_node(&w, "1GiB");
    w.on_start = lat_start;
    int n = o->latency_n;
    double *lat = calloc((size_t)n, sizeof *lat);
    /* A few unmeasured rounds warm the page cache and the allocator. */
    int warm = 20;
    for (int i = -warm; i < n; i++) {
        lat_sub_t sub = {.w = &w};
        int64_t day = i + warm;
        ql_submission_req_t req = {
            .kind = QL_SUBMIT_BUILD,
            .model_id = &w.model,
            .has_range = true,
            .start = BASE_MS + day * DAY_MS,
            .end = BASE_MS + (day + 1) * DAY_MS,
            .priority = 3,
            .submitter = "ADMIN",
            .now = BASE_MS + day,
        };
        w.first_step_started = false;
        if (ql_submission_submit(ql_node_submission(w.node), &req, lat_done, &sub))
            fail("cannot submit");
        while (!sub.acked || !w.first_step_started)
            uv_run(&w.loop, UV_RUN_ONCE);
        if (i >= 0)
            lat[i] = w.first_step_ms - sub.ack_ms;
        /* Idle again before the next one: the job finished and nothing is in flight. */
        while (!ql_sched_idle(ql_node_sched(w.node)))
            uv_run(&w.loop, UV_RUN_ONCE);
    }
    double p50 = percentile(lat, n, 0.50), p99 = percentile(lat, n, 0.99);
    double mx = lat[n - 1];
    stop_node(&w);
    /* The floor: what one synced commit of a tiny change costs on this file system, the one
     * commit (the pick) that lies between an acknowledgement and the step's start. */
    ql_store_t *st = open_store(&w, 1ull << 30);
    for (int i = 0; i < n; i++) {
        ql_txn_t *t;
        if (ql_txn_begin(st, true, &t) || ql_meta_put_u64(t, "bench", (uint64_t)i))
            fail("cannot write");
        double c0 = now_ms();
        if (ql_txn_commit(t))
            fail("cannot commit");
        lat[i] = now_ms() - c0;
    }
    ql_store_close(st);
    double f50 = percentile(lat, n, 0.50), f99 = percentile(lat, n, 0.99);
    fprintf(out,
            "(a) idle dispatch latency, ack -> first step start | n=%d | p50 %.3f ms, p99 %.3f "
            "ms, max %.3f ms | goal p50 < 1 ms, p99 < 2 ms: %s\n"
            "    floor on this file system: one synced commit of a tiny change, p50 %.3f ms, p99 "
            "%.3f ms\n",
            n, p50, p99, mx, p50 < 1 && p99 < 2 ? "met" : "MISSED", f50, f99);
    free(lat);
}

/* ---- (b) durable throughput ---- */

static void throughput_one(const bench_opts_t *o, FILE *out, int steps, const char *name) {
    world_t w;
    char yaml[1024];
    int len = snprintf(yaml, sizeof yaml, "templates:\n  INC_BUILD:\n    steps:\n");
    for (int i = 0; i < steps; i++)
        len += snprintf(yaml + len, sizeof yaml - (size_t)len,
                        "      - {name: step %d, kind: noop}\n", i);
    world_dirs(&w, o, name, yaml);
    ql_store_t *s = open_store(&w, 8ull << 30);
    create_models(&w, s, (o->jobs + JOBS_PER_MODEL - 1) / JOBS_PER_MODEL);
    ql_templates_t *tpl = load_templates(&w);
    double c0 = now_ms();
    create_jobs(&w, s, tpl, o->jobs);
    double c1 = now_ms();
    ql_templates_free(tpl);
    ql_store_close(s);

    double t0 = now_ms(), cpu0 = cpu_ms();
    start_node(&w, "8GiB");
    double t1 = run_until_final(&w, (uint64_t)o->jobs);
    double cpu = cpu_ms() - cpu0;
    uint64_t ok = count(&w, 1u << QL_SUCCEED);
    ql_writer_stats_t ws;
    ql_writer_get_stats(ql_node_writer(w.node), &ws);
    double secs = (t1 - t0) / 1000;
    /* Job: READY -> PENDING -> RUNNING -> SUCCEED; each step: READY -> RUNNING -> SUCCEED. */
    double transitions = (double)o->jobs * (3 + 2 * steps);
    fprintf(out,
            "(b) durable throughput, %d noop step%s | %d jobs, max-concurrent-jobs %d | %.0f "
            "jobs/s, %.0f transitions/s (%.2f s, CPU %.0f us/job; %llu commits, %.1f "
            "mutations each; set-up %.2f s)%s\n",
            steps, steps > 1 ? "s" : "", o->jobs, o->concurrency, o->jobs / secs,
            transitions / secs, secs, 1000 * cpu / o->jobs, (unsigned long long)ws.batches,
            ws.batches ? (double)ws.mutations / (double)ws.batches : 0, (c1 - c0) / 1000,
            ok == (uint64_t)o->jobs ? "" : " (SOME JOBS FAILED)");
    if (steps == 1)
        fprintf(out, "    goal >= 15,000 one-step jobs/s: %s\n",
                o->jobs / secs >= 15000 ? "met" : "MISSED");
    stop_node(&w);
}

static void bench_throughput(const bench_opts_t *o, FILE *out) {
    throughput_one(o, out, 1, "throughput1");
    throughput_one(o, out, 3, "throughput3");
}

/* ---- (c) shell-step throughput ---- */

/* fork + exec + wait of /bin/true, n times, with up to k in flight; processes per second. */
static double fork_exec_rate(int n, int k) {
    double t0 = now_ms();
    int running = 0, started_n = 0;
    while (started_n < n || running > 0) {
        while (started_n < n && running < k) {
            pid_t p = fork();
            if (p < 0)
                fail("fork: %s", strerror(errno));
            if (p == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
            }
            started_n++;
            running++;
        }
        int st;
        if (waitpid(-1, &st, 0) > 0)
            running--;
    }
    return n / ((now_ms() - t0) / 1000);
}

static void bench_shell(const bench_opts_t *o, FILE *out) {
    world_t w;
    world_dirs(&w, o, "shell",
               "templates:\n  INC_BUILD:\n    steps:\n"
               "      - {name: true, kind: shell, argv: [/bin/true]}\n");
    ql_store_t *s = open_store(&w, 4ull << 30);
    create_models(&w, s, (o->shell_jobs + JOBS_PER_MODEL - 1) / JOBS_PER_MODEL);
    ql_templates_t *tpl = load_templates(&w);
    create_jobs(&w, s, tpl, o->shell_jobs);
    ql_templates_free(tpl);
    ql_store_close(s);
    double t0 = now_ms();
    start_node(&w, "4GiB");
    double t1 = run_until_final(&w, (uint64_t)o->shell_jobs);
    uint64_t ok = count(&w, 1u << QL_SUCCEED);
    stop_node(&w);
    double rate = o->shell_jobs / ((t1 - t0) / 1000);
    double seq = fork_exec_rate(o->shell_jobs, 1);
    double par = fork_exec_rate(o->shell_jobs, o->concurrency);
    fprintf(out,
            "(c) shell-step throughput, one /bin/true step | %d jobs, max-concurrent-jobs %d | "
            "%.0f jobs/s | plain fork/exec/wait of /bin/true: %.0f/s one at a time, %.0f/s "
            "with %d in flight (%.0f%% of that limit)%s\n",
            o->shell_jobs, o->concurrency, rate, seq, par, o->concurrency, 100 * rate / par,
            ok == (uint64_t)o->shell_jobs ? "" : " (SOME JOBS FAILED)");
}

/* ---- (d) recovery ---- */

/* Writes a SUCCEED (or RUNNING, with its step RUNNING) job of one noop step directly. A
 * RUNNING step carries what a shell step's try leaves: a marker, and a process group whose
 * leader is gone (a number above any pid_max, in this boot). */
static void put_job(ql_txn_t *t, ql_store_t *s, const uint8_t *def, size_t def_len, long i,
                    bool running, const char *boot_id) {
    ql_job_t j = {0};
    ql_store_new_id(s, &j.id);
    snprintf(j.project, sizeof j.project, "p");
    snprintf(j.type, sizeof j.type, "BENCH_JOB");
    snprintf(j.submitter, sizeof j.submitter, "ADMIN");
    j.state = running ? QL_RUNNING : QL_SUCCEED;
    j.priority = 3;
    j.n_steps = 1;
    j.create_time = BASE_MS + i;
    j.start_time = j.create_time + 1;
    j.end_time = running ? 0 : j.create_time + 2;
    j.modify_time = j.create_time + 2;
    j.fence = 1;
    if (ql_job_put(t, &j))
        fail("cannot write a job");
    ql_step_t st = {0};
    st.job = j.id;
    snprintf(st.name, sizeof st.name, "quick");
    snprintf(st.kind, sizeof st.kind, "noop");
    st.state = running ? QL_RUNNING : QL_SUCCEED;
    st.start_time = j.start_time;
    st.end_time = j.end_time;
    st.attempts = 1;
    if (running) {
        if (ql_proc_token_new(st.token))
            fail("cannot draw a marker");
        st.pgid = (int32_t)(0x7f000000 + i % 1000000);
        st.pg_start = 1;
        snprintf(st.boot_id, sizeof st.boot_id, "%s", boot_id);
    }
    st.def = (uint8_t *)def;
    st.def_len = def_len;
    if (ql_step_put(t, &st))
        fail("cannot write a step");
}

static void build_recovery_store(const bench_opts_t *o, FILE *out) {
    world_t w;
    world_dirs(&w, o, "recovery", NOOP_TEMPLATES);
    ql_store_t *s = open_store(&w, 32ull << 30);
    create_model(&w, s);
    ql_stepdef_t def;
    ql_stepdef_init(&def);
    def.name = "quick";
    def.kind = QL_STEP_NOOP;
    uint8_t *buf;
    size_t len;
    if (ql_stepdef_encode(&def, &buf, &len))
        fail("cannot encode a step");
    char boot_id[QL_PROC_BOOT_ID_LEN + 1];
    if (ql_proc_boot_id(boot_id))
        fail("cannot read the boot id");
    double t0 = now_ms();
    long total = o->finished + o->interrupted;
    /* Interrupted jobs are spread among the finished ones, as a server's history has them. */
    long every = o->interrupted ? total / o->interrupted : 0;
    for (long i = 0; i < total;) {
        ql_txn_t *t;
        if (ql_txn_begin(s, true, &t))
            fail("cannot begin a transaction");
        for (int k = 0; k < 50000 && i < total; k++, i++)
            put_job(t, s, buf, len, i, every && i % every == every - 1, boot_id);
        if (ql_txn_commit(t))
            fail("cannot commit (map full? try a smaller --finished)");
    }
    double t1 = now_ms();
    free(buf);
    ql_txn_t *t;
    uint64_t running = 0;
    ql_txn_begin(s, false, &t);
    ql_job_count(t, NULL, 1u << QL_RUNNING, &running);
    ql_txn_abort(t);
    ql_store_stat_t st;
    ql_store_stat(s, &st);
    ql_store_close(s);
    fprintf(out,
            "(d) recovery store: %ld SUCCEED + %llu RUNNING jobs written in %.1f s with direct "
            "transactions of 50,000 jobs; %.0f MiB on disk\n",
            o->finished, (unsigned long long)running, (t1 - t0) / 1000,
            (double)st.file_bytes / (1 << 20));
}

static void bench_recovery(const bench_opts_t *o, FILE *out) {
    world_t w;
    world_dirs(&w, o, "recovery", NOOP_TEMPLATES);
    double t0 = now_ms();
    start_node(&w, "32GiB");
    double t_started = now_ms(); /* ql_node_start runs recovery before it returns */
    while (w.starts == 0)
        uv_run(&w.loop, UV_RUN_ONCE);
    double t_first = w.first_start_ms;
    double anon1, file1, anon2, file2;
    rss_now(&anon1, &file1);
    double t_all = run_until_final(&w, (uint64_t)(o->finished + o->interrupted));
    rss_now(&anon2, &file2);
    stop_node(&w);
    fprintf(out,
            "(d) recovery, %ld finished + %ld interrupted jobs | node start -> first resumed step "
            "%.1f ms (start with recovery %.1f ms) | all %ld resumed jobs SUCCEED after %.2f s "
            "| goal < 1 s: %s\n"
            "    RSS at the first resumed step: %.1f MiB heap + %.1f MiB of mapped store pages; "
            "when all are done: %.1f + %.1f MiB\n",
            o->finished, o->interrupted, t_first - t0, t_started - t0, o->interrupted,
            (t_all - t0) / 1000, t_first - t0 < 1000 ? "met" : "MISSED", anon1, file1, anon2,
            file2);
}

/* ---- running each part in its own process ---- */

typedef void (*bench_fn)(const bench_opts_t *o, FILE *out);

/* Runs fn in a child; prints its lines and its peak RSS. Returns 0 when it succeeded. */
static int run_child(const bench_opts_t *o, bench_fn fn, const char *what) {
    fflush(stdout);
    int fds[2];
    if (pipe(fds))
        fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        FILE *out = fdopen(fds[1], "w");
        fn(o, out);
        fclose(out);
        _exit(0);
    }
    close(fds[1]);
    char buf[4096];
    FILE *in = fdopen(fds[0], "r");
    while (fgets(buf, sizeof buf, in))
        fputs(buf, stdout);
    fclose(in);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid)
        fail("wait4: %s", strerror(errno));
    printf("    peak RSS of %s: %.1f MiB\n", what, (double)ru.ru_maxrss / 1024);
    fflush(stdout);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static bool wanted(const bench_opts_t *o, char c) {
    return !o->only || strchr(o->only, c);
}

static int usage(FILE *f, const char *name) {
    fprintf(f,
            "usage: %s [--dir DIR] [--only abcd] [--latency-n N] [--jobs N]\n"
            "         [--shell-jobs N] [--finished N] [--interrupted N]\n"
            "         [--concurrency N] [--exec-helper PATH] [--keep]\n"
            "  (a) idle dispatch latency, (b) durable noop-step throughput, (c) shell steps\n"
            "  against plain fork/exec, (d) recovery of a store of finished + interrupted jobs\n"
            "defaults: --latency-n 1000 --jobs 20000 --shell-jobs 5000 --finished 1000000\n"
            "          --interrupted 10000 --concurrency 256 (kylin.job.max-concurrent-jobs)\n"
            "          --dir /tmp; --exec-helper: qilin-exec next to this program\n",
            name);
    return 2;
}

static int bad_argument(const char *name, const char *a) {
    fprintf(stderr, "qilin bench jobs: bad argument '%s'\n", a);
    return usage(stderr, name);
}

int ql_bench_jobs_main(int argc, char **argv) {
    bench_opts_t o = {
        .parent = "/tmp",
        .latency_n = 1000,
        .jobs = 20000,
        .shell_jobs = 5000,
        .finished = 1000000,
        .interrupted = 10000,
        .concurrency = 256,
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--keep")) {
            o.keep = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            return 0;
        }
        if (i + 1 >= argc)
            return bad_argument(argv[0], a);
        const char *v = argv[++i];
        if (!strcmp(a, "--dir"))
            o.parent = v;
        else if (!strcmp(a, "--only"))
            o.only = v;
        else if (!strcmp(a, "--exec-helper"))
            o.exec_helper = v;
        else if (!strcmp(a, "--latency-n"))
            o.latency_n = atoi(v);
        else if (!strcmp(a, "--jobs"))
            o.jobs = atoi(v);
        else if (!strcmp(a, "--shell-jobs"))
            o.shell_jobs = atoi(v);
        else if (!strcmp(a, "--finished"))
            o.finished = atol(v);
        else if (!strcmp(a, "--interrupted"))
            o.interrupted = atol(v);
        else if (!strcmp(a, "--concurrency"))
            o.concurrency = atoi(v);
        else
            return bad_argument(argv[0], a);
    }
    if (o.latency_n < 1 || o.jobs < 1 || o.shell_jobs < 1 || o.finished < 0 || o.interrupted < 1 ||
        o.concurrency < 1 || o.concurrency > 10000) {
        fprintf(stderr, "qilin bench jobs: every count must be at least 1 (--finished: 0), "
                        "--concurrency at most 10000\n");
        return usage(stderr, argv[0]);
    }
    snprintf(o.dir, sizeof o.dir, "%s/qilin-bench-jobs-XXXXXX", o.parent);
    if (!mkdtemp(o.dir)) {
        fprintf(stderr, "qilin bench jobs: cannot create a directory under %s: %s\n", o.parent,
                strerror(errno));
        return 1;
    }
    printf("qilin bench jobs: stores under %s\n", o.dir);
    int rc = 0;
    if (wanted(&o, 'a'))
        rc |= run_child(&o, bench_latency, "(a)");
    if (wanted(&o, 'b'))
        rc |= run_child(&o, bench_throughput, "(b)");
    if (wanted(&o, 'c'))
        rc |= run_child(&o, bench_shell, "(c)");
    if (wanted(&o, 'd')) {
        rc |= run_child(&o, build_recovery_store, "building the (d) store");
        rc |= run_child(&o, bench_recovery, "(d) (the node from start to all jobs done)");
    }
    if (!o.keep)
        nftw(o.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc ? 1 : 0;
}
