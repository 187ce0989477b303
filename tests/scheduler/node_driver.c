/*
 * node_driver: a job server's engine (ql_node) in a process of its own, for the tests that
 * kill, stop or race whole processes (test_crash_recovery.c, test_lock.c).
 *
 * Usage: node_driver --data DIR --templates FILE [--jobs N] [--concurrency K]
 *                    [--poll-seconds S] [--submit-every-ms MS] [--batch B] [--exit-when-done]
 *
 * It runs a node on DIR (startup recovery included, when it holds the job engine lock) and,
 * with --jobs, submits INC_BUILD jobs of model "m" in project "p" (both created if missing)
 * through the node's submission service, B every MS milliseconds, until the store holds N
 * jobs. Each job gets the next free day after the model's last segment, so a driver restarted
 * after a crash continues where the previous one stopped, whatever it had acknowledged.
 *
 * Standard output, one line per event, written with write(2) at once (the tests read it while
 * the driver runs, and a SIGKILL must not lose a line still in a stdio buffer):
 *   PID <pid>                 at start
 *   MASTER | STANDBY <holder> whether it holds the job engine lock; MASTER again on takeover
 *   ACK <job-id>              a submission is durable (the submission service's answer)
 *   DONE                      --exit-when-done: N jobs exist and every one is final
 * The node's log (INFO) goes to standard error. SIGTERM stops the node gracefully and exits 0.
 * SIGUSR1 applies PAUSE to every RUNNING job and SIGUSR2 RESUME to every PAUSED one, through the
 * node's scheduler (a local action). --set KEY=VALUE (repeatable) sets any configuration key.
 */
#include "scheduler/ql_submission.h"
#include "server/ql_node.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

typedef struct driver {
    uv_loop_t *loop;
    ql_config_t *cfg;
    ql_log_t log;
    ql_node_t *node;
    uv_timer_t timer;
    uv_signal_t sigterm, sigusr1, sigusr2;
    long jobs;
    long batch;
    long every_ms;
    bool exit_when_done;
    bool was_master;
    bool stopping;
    bool setup_done;
    int inflight;
    int64_t next_day; /* -1: not known yet */
    ql_id_t model;
} driver_t;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(STDOUT_FILENO, line + off, (size_t)(n - off));
        if (w <= 0)
            return;
        off += w;
    }
}

static void die(const char *what, const ql_err_t *err) {
    fprintf(stderr, "node_driver: %s: %s\n", what, err ? err->msg : "");
    exit(2);
}

static void set(ql_config_t *cfg, const char *key, const char *value) {
    char arg[4200];
    snprintf(arg, sizeof arg, "%s=%s", key, value);
    ql_err_t err = {0};
    if (ql_config_set_arg(cfg, arg, &err))
        die("config", &err);
}

/* Project "p" and partitioned model "m", created by whichever driver gets there first. */
static void ensure_model(driver_t *d) {
    ql_store_t *st = ql_node_store(d->node);
    ql_txn_t *t;
    ql_err_t err = {0};
    if (ql_txn_begin(st, true, &t))
        die("cannot begin a write transaction", NULL);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p");
    int rc = ql_meta_create_project(t, &p, BASE, &err);
    if (rc && rc != QL_EEXIST)
        die("project", &err);
    ql_model_t m = {0};
    if (ql_model_find(t, "p", "m", 0, &m) == 0) {
        d->model = m.id;
        ql_model_free(&m);
    } else {
        snprintf(m.name, sizeof m.name, "m");
        snprintf(m.project, sizeof m.project, "p");
        m.partitioned = true;
        snprintf(m.partition_column, sizeof m.partition_column, "dt");
        snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
        if (ql_meta_create_model(t, &m, BASE, &err))
            die("model", &err);
        d->model = m.id;
    }
    if (ql_txn_commit(t))
        die("cannot commit the model", NULL);
}

static int max_end_cb(const ql_segment_t *s, void *arg) {
    int64_t *end = arg;
    if (s->end > *end)
        *end = s->end;
    return 0;
}

/* The first day after every segment of the model (each job creates one). */
static int64_t first_free_day(driver_t *d) {
    ql_txn_t *t;
    if (ql_txn_begin(ql_node_store(d->node), false, &t))
        die("cannot begin a read transaction", NULL);
    int64_t end = BASE;
    ql_segment_foreach(t, &d->model, max_end_cb, &end);
    ql_txn_abort(t);
    return (end - BASE) / DAY;
}

static uint64_t count_jobs(driver_t *d, uint32_t mask) {
    ql_txn_t *t;
    uint64_t n = 0;
    if (ql_txn_begin(ql_node_store(d->node), false, &t))
        die("cannot begin a read transaction", NULL);
    ql_job_count(t, "p", mask, &n);
    ql_txn_abort(t);
    return n;
}

/* The submission service's answer (it kicks the node's fetcher after a commit). */
static void sub_done(void *arg, const ql_submission_result_t *r) {
    driver_t *d = arg;
    d->inflight--;
    if (r->status) {
        fprintf(stderr, "node_driver: submission failed: %s\n", r->err->msg);
    } else {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&r->jobs[0], id);
        say("ACK %s\n", id);
    }
}

static void submit_some(driver_t *d) {
    if (d->jobs <= 0 || d->inflight > 0)
        return;
    uint64_t have = count_jobs(d, 0xffu);
    if (d->next_day < 0)
        d->next_day = first_free_day(d);
    for (long i = 0; i < d->batch && (long)have + d->inflight < d->jobs; i++) {
        int64_t day = d->next_day++;
        ql_submission_req_t req = {
            .kind = QL_SUBMIT_BUILD,
            .model_id = &d->model,
            .has_range = true,
            .start = BASE + day * DAY,
            .end = BASE + (day + 1) * DAY,
            .priority = 3,
            .submitter = "ADMIN",
            .now = BASE + day,
        };
        d->inflight++;
        if (ql_submission_submit(ql_node_submission(d->node), &req, sub_done, d)) {
            d->inflight--;
            return;
        }
    }
}

static void stopped_cb(void *arg) {
    driver_t *d = arg;
    d->node = NULL;
    uv_close((uv_handle_t *)&d->timer, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigusr1, NULL);
    uv_close((uv_handle_t *)&d->sigusr2, NULL);
}

typedef struct {
    ql_id_t ids[64];
    size_t n;
} ids_t;

static int collect_cb(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    (void)priority;
    (void)create_time;
    ids_t *l = arg;
    if (l->n < sizeof l->ids / sizeof l->ids[0])
        l->ids[l->n++] = *id;
    return 0;
}

static void action_done(void *arg, int status, const ql_err_t *err) {
    (void)arg;
    if (status)
        fprintf(stderr, "node_driver: action failed: %s\n", err ? err->msg : "");
}

/* The action on every job in state `from` (up to 64), through the node's scheduler. */
static void act_on(driver_t *d, ql_state_t from, ql_action_t action) {
    if (d->stopping || !ql_node_is_master(d->node))
        return;
    ids_t l = {.n = 0};
    ql_txn_t *t;
    if (ql_txn_begin(ql_node_store(d->node), false, &t))
        return;
    ql_job_foreach_state_ref(t, from, collect_cb, &l);
    ql_txn_abort(t);
    for (size_t i = 0; i < l.n; i++)
        if (ql_sched_action(ql_node_sched(d->node), &l.ids[i], action, action_done, d))
            fprintf(stderr, "node_driver: cannot submit an action\n");
}

static void sigusr_cb(uv_signal_t *h, int sig) {
    driver_t *d = h->data;
    if (sig == SIGUSR1)
        act_on(d, QL_RUNNING, QL_ACTION_PAUSE);
    else
        act_on(d, QL_PAUSED, QL_ACTION_RESUME);
}

static void stop(driver_t *d) {
    if (d->stopping)
        return;
    d->stopping = true;
    uv_timer_stop(&d->timer);
    ql_node_stop(d->node, stopped_cb, d);
}

static void tick_cb(uv_timer_t *t) {
    driver_t *d = t->data;
    if (d->stopping)
        return;
    bool master = ql_node_is_master(d->node);
    if (master && !d->was_master)
        say("MASTER\n");
    d->was_master = master;
    if (!d->setup_done) {
        ensure_model(d);
        d->setup_done = true;
    }
    submit_some(d);
    if (d->exit_when_done && d->inflight == 0 && (long)count_jobs(d, 0xffu) >= d->jobs) {
        uint32_t live = (1u << QL_READY) | (1u << QL_PENDING) | (1u << QL_RUNNING) |
                        (1u << QL_ERROR) | (1u << QL_PAUSED);
        if (count_jobs(d, live) == 0) {
            say("DONE\n");
            stop(d);
        }
    }
}

static void sigterm_cb(uv_signal_t *h, int sig) {
    (void)sig;
    stop(h->data);
}

int main(int argc, char **argv) {
    driver_t d = {.jobs = 0, .batch = 2, .every_ms = 15, .next_day = -1};
    const char *data = NULL, *templates = NULL, *concurrency = "4", *poll = "30";
    const char *sets[16];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--exit-when-done") == 0) {
            d.exit_when_done = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "node_driver: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--data") == 0)
            data = v;
        else if (strcmp(a, "--templates") == 0)
            templates = v;
        else if (strcmp(a, "--jobs") == 0)
            d.jobs = atol(v);
        else if (strcmp(a, "--concurrency") == 0)
            concurrency = v;
        else if (strcmp(a, "--poll-seconds") == 0)
            poll = v;
        else if (strcmp(a, "--submit-every-ms") == 0)
            d.every_ms = atol(v);
        else if (strcmp(a, "--batch") == 0)
            d.batch = atol(v);
        else if (strcmp(a, "--set") == 0 && n_sets < 16)
            sets[n_sets++] = v;
        else {
            fprintf(stderr, "node_driver: unknown option %s\n", a);
            return 2;
        }
    }
    if (!data || !templates) {
        fprintf(stderr, "usage: node_driver --data DIR --templates FILE [options]\n");
        return 2;
    }
    /* Until their handlers are installed (after recovery), an early SIGUSR is lost, not fatal. */
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN);
    say("PID %ld\n", (long)getpid());
    if (ql_config_new(&d.cfg))
        die("out of memory", NULL);
    set(d.cfg, "qilin.storage.path", data);
    set(d.cfg, "qilin.storage.map-size", "1GiB");
    set(d.cfg, "qilin.jobs.templates", templates);
    set(d.cfg, "kylin.job.max-concurrent-jobs", concurrency);
    set(d.cfg, "kylin.job.scheduler.poll-interval-second", poll);
    set(d.cfg, "qilin.step.kill-grace-ms", "500");
    for (int i = 0; i < n_sets; i++) {
        ql_err_t err = {0};
        if (ql_config_set_arg(d.cfg, sets[i], &err))
            die("config", &err);
    }
    ql_log_init(&d.log, QL_LOG_INFO);

    d.loop = uv_default_loop();
    ql_node_opts_t no = {.config = d.cfg, .loop = d.loop, .log = &d.log};
    ql_err_t err = {0};
    if (ql_node_start(&no, &d.node, &err))
        die("cannot start the node", &err);
    if (ql_node_is_master(d.node)) {
        say("MASTER\n");
        d.was_master = true;
    } else {
        say("STANDBY %s\n", ql_node_lock_holder(d.node));
    }
    uv_timer_init(d.loop, &d.timer);
    d.timer.data = &d;
    uv_timer_start(&d.timer, tick_cb, 0, (uint64_t)(d.every_ms > 0 ? d.every_ms : 15));
    uv_signal_init(d.loop, &d.sigterm);
    d.sigterm.data = &d;
    uv_signal_start(&d.sigterm, sigterm_cb, SIGTERM);
    uv_signal_init(d.loop, &d.sigusr1);
    d.sigusr1.data = &d;
    uv_signal_start(&d.sigusr1, sigusr_cb, SIGUSR1);
    uv_signal_init(d.loop, &d.sigusr2);
    d.sigusr2.data = &d;
    uv_signal_start(&d.sigusr2, sigusr_cb, SIGUSR2);
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_loop_close(d.loop);
    ql_config_free(d.cfg);
    return 0;
}
