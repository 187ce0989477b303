/*
 * Running a scenario: the temporary store, the simulated server (the node, server/ql_node.h, on
 * the virtual clock with an inline writer, its scans driven from here) and every step but
 * expect: (sim_expect.c); the set-up is in sim_setup.c. See ql_sim.h for the design and
 * docs/simulation.md for the user's view.
 *
 * Invariant between steps: the writer's queue is empty. Every step that queues a mutation
 * flushes it before it returns (the scheduler's own mutations are flushed by its zero-delay
 * timer inside the same instant of a run), so `restart` never has half-applied work to lose
 * and `scan` never commits scheduler work by accident.
 */
#include "base/ql_buf.h"
#include "scheduler/ql_submission.h"
#include "server/ql_node.h"
#include "sim_int.h"

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Any fixed nonzero seed makes the store's ids the same on every run. */
#define SIM_ID_SEED 0x51a1c0ffee5eedull

static int64_t sim_now_cb(void *arg) {
    return ql_clock_now_ms(arg);
}

/* ---- created jobs, in order ---- */

void sim_note_created(ql_sim_t *sim, const ql_id_t *job) {
    if (QL_ARRAY_RESERVE(sim->created, sim->cap_created, sim->n_created + 1, 64))
        return; /* the job then sorts after the known ones; nothing else depends on it */
    sim->created[sim->n_created++] = *job;
}

size_t sim_created_rank(const ql_sim_t *sim, const ql_id_t *job) {
    for (size_t i = 0; i < sim->n_created; i++)
        if (ql_id_eq(&sim->created[i], job))
            return i;
    return SIZE_MAX;
}

/* ---- trace ---- */

static void trace_text(ql_sim_t *sim, const ql_decision_t *d) {
    char now[48], a[48], b[48], occ[48];
    sim_format_time(sim->sc, ql_clock_now_ms(sim->clock), now, sizeof now);
    FILE *f = sim->opts.trace;
    fprintf(f, "[%s] step %zu scan %s/%s: %s", now, sim->step, d->project, d->model_name,
            ql_cycle_state_name(d->state));
    if (d->state == QL_CYCLE_SKIPPED)
        fprintf(f, " reason=%s", ql_skip_reason_name(d->reason));
    if (d->target_start || d->target_end) {
        sim_format_time(sim->sc, d->target_start, a, sizeof a);
        sim_format_time(sim->sc, d->target_end, b, sizeof b);
        sim_format_time(sim->sc, d->occurrence, occ, sizeof occ);
        fprintf(f, " target=[%s, %s) occurrence=%s", a, b, occ);
    }
    if (d->n_related)
        fprintf(f, " related=%zu", d->n_related);
    if (d->from_cache)
        fprintf(f, " cached");
    if (!ql_id_is_zero(&d->job)) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&d->job, id);
        fprintf(f, " job=%s", id);
    }
    if (d->message[0])
        fprintf(f, " message=\"%s\"", d->message);
    fputc('\n', f);
}

static json_t *json_time(const ql_sim_t *sim, int64_t ms) {
    char buf[48];
    sim_format_time(sim->sc, ms, buf, sizeof buf);
    return json_string(buf);
}

static void trace_json(ql_sim_t *sim, const ql_decision_t *d) {
    json_t *o = json_object();
    if (!o)
        return;
    int64_t now = ql_clock_now_ms(sim->clock);
    json_object_set_new(o, "event", json_string("decision"));
    json_object_set_new(o, "file", json_string(sim->sc->file));
    json_object_set_new(o, "step", json_integer((json_int_t)sim->step));
    json_object_set_new(o, "time", json_time(sim, now));
    json_object_set_new(o, "time_ms", json_integer(now));
    json_object_set_new(o, "project", json_string(d->project));
    json_object_set_new(o, "model", json_string(d->model_name));
    json_object_set_new(o, "state", json_string(ql_cycle_state_name(d->state)));
    json_object_set_new(o, "reason",
                        d->reason ? json_string(ql_skip_reason_name(d->reason)) : json_null());
    if (d->target_start || d->target_end) {
        json_object_set_new(
            o, "target",
            json_pack("[o,o]", json_time(sim, d->target_start), json_time(sim, d->target_end)));
        json_object_set_new(
            o, "target_ms",
            json_pack("[I,I]", (json_int_t)d->target_start, (json_int_t)d->target_end));
        json_object_set_new(o, "occurrence", json_time(sim, d->occurrence));
        json_object_set_new(o, "occurrence_ms", json_integer(d->occurrence));
    } else {
        json_object_set_new(o, "target", json_null());
    }
    json_object_set_new(o, "related", json_integer((json_int_t)d->n_related));
    json_object_set_new(o, "from_cache", json_boolean(d->from_cache));
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&d->job, id);
    json_object_set_new(o, "job", ql_id_is_zero(&d->job) ? json_null() : json_string(id));
    json_object_set_new(o, "message", d->message[0] ? json_string(d->message) : json_null());
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (line) {
        fprintf(sim->opts.trace, "%s\n", line);
        free(line);
    }
    json_decref(o);
}

/* ---- engine hooks ---- */

static void on_decision_cb(void *arg, const ql_decision_t *d) {
    ql_sim_t *sim = arg;
    if (sim->opts.trace)
        (sim->opts.json ? trace_json : trace_text)(sim, d);
    if (sim->opts.on_decision)
        sim->opts.on_decision(sim->opts.hook_arg, sim, d);
}

/* The node has kicked its scheduler already: it runs again at this instant, after the scan (a
 * no-op outside run:, where it does not fetch). */
static void on_submitted_cb(void *arg, const ql_id_t *job) {
    sim_note_created(arg, job);
}

static int submit_fault_cb(void *arg) {
    ql_sim_t *sim = arg;
    if (sim->fail_left <= 0)
        return 0;
    sim->fail_left--;
    return 1;
}

/* ---- the engine: the server ---- */

ql_sched_t *sim_sched(ql_sim_t *sim) {
    return sim->node && ql_node_is_master(sim->node) ? ql_node_sched(sim->node) : NULL;
}

ql_dispatcher_t *sim_dispatcher(ql_sim_t *sim) {
    return sim->node && ql_node_is_master(sim->node) ? ql_node_dispatcher(sim->node) : NULL;
}

static void fill_dispatcher_opts(const ql_sim_t *sim, ql_dispatcher_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->store = sim->store;
    o->writer = sim->writer;
    o->clock = sim->clock;
    o->log = (ql_log_t *)&sim->log;
    o->templates = sim->sc->templates;
    o->manual_flush = true;
    ql_node_engine_opts(sim->sc->cfg, NULL, o);
}

/* The server starts on the simulation's store, lock and clock. It schedules at once when it
 * takes the lock (after recovery), but fetches only during run: steps (do_run), as it always
 * has in the simulator: between steps no time passes, and a fetch then would only move the
 * first fetch of the next run. */
static int engine_start(ql_sim_t *sim, ql_err_t *err) {
    ql_node_opts_t no = {
        .config = sim->sc->cfg,
        .log = &sim->log,
        .clock = sim->clock,
        .store = sim->store,
        .lock = sim->lock,
        .templates = sim->sc->templates,
        .writer = QL_NODE_WRITER_INLINE,
        .driver_scans = true,
        .hooks = {.on_submitted = on_submitted_cb,
                  .on_decision = on_decision_cb,
                  .submit_fault = submit_fault_cb,
                  .arg = sim},
    };
    int rc = ql_node_start(&no, &sim->node, err);
    if (rc)
        return rc;
    sim->writer = ql_node_writer(sim->node);
    ql_sched_t *s = sim_sched(sim);
    if (s)
        ql_sched_pause_fetching(s);
    return 0;
}

/* The process dies: everything in memory goes, nothing more is written. */
static void engine_stop(ql_sim_t *sim) {
    if (sim->node)
        ql_node_abort(sim->node, NULL, NULL);
    sim->node = NULL;
    sim->writer = NULL;
}

/* ---- lifecycle ---- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void set_result(ql_sim_result_t *res, int status, size_t step, uint32_t line) {
    res->status = status;
    res->step = step;
    res->line = line;
}

int ql_sim_new(const ql_sim_scenario_t *sc, const ql_sim_opts_t *opts, ql_sim_t **out,
               ql_sim_result_t *res) {
    ql_sim_result_t local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    *out = NULL;
    res->status = QL_SIM_INVALID;
    if (!(opts && opts->allow_shell) && sc->shell_line) {
        snprintf(res->msg, sizeof res->msg,
                 "%s:%u: %s is a shell step: shell steps do not run in the simulator unless "
                 "--allow-shell is given (they then succeed after their sim_duration)",
                 sc->file, sc->shell_line, sc->shell_desc);
        res->line = sc->shell_line;
        return QL_SIM_INVALID;
    }
    ql_sim_t *sim = calloc(1, sizeof *sim);
    if (!sim || !(sim->model_ids = calloc(sc->n_models ? sc->n_models : 1, sizeof(ql_id_t)))) {
        free(sim);
        snprintf(res->msg, sizeof res->msg, "%s: out of memory", sc->file);
        return QL_SIM_INVALID;
    }
    sim->sc = sc;
    if (opts)
        sim->opts = *opts;
    const char *base = sim->opts.tmp_dir;
    if (!base || !base[0])
        base = getenv("TMPDIR");
    if (!base || !base[0])
        base = "/tmp";
    snprintf(sim->dir, sizeof sim->dir, "%s/qilin-sim-XXXXXX", base);
    ql_err_t err = {0};
    int rc = 0;
    if (!mkdtemp(sim->dir)) {
        rc = ql_err_set(&err, -errno, "cannot make a temporary directory in %s: %s", base,
                        strerror(errno));
        sim->dir[0] = '\0';
    }
    /* The scan interval of run: and the server's zone of build:, as the server maps them. */
    ql_dispatcher_opts_t eo = {0};
    ql_node_engine_opts(sc->cfg, NULL, &eo);
    sim->interval_ms = eo.interval_ms;
    sim->server_tz = eo.server_timezone;
    if (!rc && (rc = ql_clock_virtual_new(sc->start, &sim->clock)))
        ql_err_set(&err, rc, "cannot create the clock: %s", ql_strerror(rc));
    ql_log_init(&sim->log, sim->opts.log_out ? sim->opts.log_level : QL_LOG_OFF);
    sim->log.out = sim->opts.log_out;
    sim->log.now = sim_now_cb;
    sim->log.now_arg = sim->clock;
    if (!rc) {
        uint64_t map = sim->opts.map_size ? sim->opts.map_size : 256ull << 20;
        ql_store_opts_t so = {.path = sim->dir, .map_size = map, .id_seed = SIM_ID_SEED};
        char schema[32];
        if (sim->opts.store_url && sim->opts.store_url[0]) {
            const char *tail = strrchr(sim->dir, '-'); /* the XXXXXX mkdtemp made unique */
            snprintf(schema, sizeof schema, "qilin_sim_%s", tail ? tail + 1 : "0");
            so.url = sim->opts.store_url;
            so.pg_schema = schema;
            so.pg_drop_at_close = true;
        }
        rc = ql_store_open(&so, &sim->store, &err);
    }
    if (!rc && (rc = sim_lock_new(sim->store, &sim->lock)))
        ql_err_set(&err, rc, "out of memory");
    if (!rc && sc->lock_holder[0])
        rc = sim_lock_take(sim->lock, sc->lock_holder, &err);
    /* The server is up when the simulation begins, and the set-up is the store at that moment:
     * written after the server's start, so its startup recovery does not see it. */
    if (!rc)
        rc = engine_start(sim, &err);
    if (!rc)
        rc = sim_setup(sim, &err);
    if (rc) {
        snprintf(res->msg, sizeof res->msg, "%s: set-up: %s", sc->file,
                 err.msg[0] ? err.msg : ql_strerror(rc));
        ql_sim_free(sim);
        return QL_SIM_INVALID;
    }
    res->status = QL_SIM_PASS;
    *out = sim;
    return QL_SIM_PASS;
}

void ql_sim_free(ql_sim_t *sim) {
    if (!sim)
        return;
    engine_stop(sim);
    ql_lock_free(sim->lock);
    ql_store_close(sim->store);
    ql_clock_free(sim->clock);
    if (sim->dir[0])
        nftw(sim->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(sim->created);
    free(sim->model_ids);
    free(sim);
}

/* ---- steps ---- */

static void scan_done_cb(void *arg) {
    ((ql_sim_t *)arg)->scan_ended = true;
}

/* One dispatcher scan at the current instant, with the test hooks around it. */
static void scan_now(ql_sim_t *sim) {
    if (sim->opts.before_scan)
        sim->opts.before_scan(sim->opts.hook_arg, sim);
    sim->scan_ended = false;
    ql_dispatcher_t *disp = sim_dispatcher(sim); /* none on a standby or a query server */
    if (disp && ql_dispatcher_scan(disp, scan_done_cb, sim) == 0)
        /* The dispatcher flushes its own submissions (manual_flush); anything still queued
         * would be an answer it waits for. */
        while (!sim->scan_ended && ql_writer_flush(sim->writer) > 0)
            ;
    if (sim->opts.after_scan)
        sim->opts.after_scan(sim->opts.hook_arg, sim);
}

/*
 * run: the scheduler fetches, and scans happen at the run's first instant and then `interval`
 * after the previous scan ended (scans take no virtual time). At each scan instant every timer
 * due then fires first (the scheduler, to quiescence: zero-delay chains included), then the
 * scan, then whatever the scan started (the scheduler again: on_submitted kicks it). A scan or
 * timer due exactly at the end belongs to the next step.
 */
static void do_run(ql_sim_t *sim, int64_t duration) {
    ql_clock_t *c = sim->clock;
    int64_t end = ql_clock_mono_ms(c) + duration;
    int64_t next_scan = ql_clock_mono_ms(c);
    ql_sched_t *s = sim_sched(sim); /* a standby that takes over during the run starts its own */
    if (s)
        ql_sched_start(s);
    while (next_scan < end) {
        ql_vclock_run_for(c, next_scan - ql_clock_mono_ms(c), true);
        scan_now(sim);
        ql_vclock_run_due(c);
        next_scan = ql_clock_mono_ms(c) + sim->interval_ms;
    }
    ql_vclock_run_for(c, end - ql_clock_mono_ms(c), false);
    if ((s = sim_sched(sim)))
        ql_sched_pause_fetching(s);
}

static void do_restart(ql_sim_t *sim, ql_sim_result_t *res) {
    engine_stop(sim);
    ql_err_t err = {0};
    int rc = engine_start(sim, &err); /* recovery included, when the server takes the lock */
    if (rc) {
        sim_res_append(res, "restart: %s", err.msg[0] ? err.msg : ql_strerror(rc));
        res->status = QL_SIM_INVALID;
    }
}

static void fmt_range(const ql_sim_t *sim, int64_t s, int64_t e, char *buf, size_t cap) {
    char a[48], b[48];
    sim_format_time(sim->sc, s, a, sizeof a);
    sim_format_time(sim->sc, e, b, sizeof b);
    snprintf(buf, cap, "[%s, %s)", a, b);
}

typedef struct {
    bool answered;
    int status;
    ql_err_t err;
    ql_id_t job;
} build_answer_t;

static void build_done_cb(void *arg, const ql_submission_result_t *r) {
    build_answer_t *a = arg;
    a->answered = true;
    a->status = r->status;
    if (r->status)
        a->err = *r->err;
    else
        a->job = r->jobs[0];
}

/* build: the REST API's manual incremental build, through the server's submission service
 * (which wakes the scheduler: a no-op outside run:, where it does not fetch). */
static void do_build(ql_sim_t *sim, const sim_step_t *st, ql_sim_result_t *res) {
    ql_submission_req_t req = {
        .kind = QL_SUBMIT_BUILD,
        .model_id = &sim->model_ids[st->model],
        .has_range = true,
        .start = st->start,
        .end = st->end,
        .priority = st->priority,
        .submitter = "ADMIN",
        .now = ql_clock_now_ms(sim->clock),
    };
    build_answer_t a = {0};
    int rc = ql_submission_submit(ql_node_submission(sim->node), &req, build_done_cb, &a);
    while (!rc && !a.answered && ql_writer_flush(sim->writer) > 0)
        ;
    if (!rc)
        rc = a.answered ? a.status : QL_EINVAL;
    ql_err_t err = a.err;
    ql_id_t job = a.job;
    char range[128];
    fmt_range(sim, st->start, st->end, range, sizeof range);
    if (!rc)
        sim_note_created(sim, &job);
    if (!st->expect_error[0]) {
        if (rc) {
            sim_res_append(res, "build %s of %s: expected it to be accepted, found error %s: %s",
                           range, sim->sc->models[st->model].name, ql_error_code(rc), err.msg);
            res->status = QL_SIM_FAIL;
        }
        return;
    }
    if (!rc) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&job, id);
        sim_res_append(res, "build %s of %s: expected error %s, found it accepted (job %s)", range,
                       sim->sc->models[st->model].name, st->expect_error, id);
        res->status = QL_SIM_FAIL;
    } else if (strcmp(ql_error_code(rc), st->expect_error) != 0) {
        sim_res_append(res, "build %s of %s: expected error %s, found %s: %s", range,
                       sim->sc->models[st->model].name, st->expect_error, ql_error_code(rc),
                       err.msg);
        res->status = QL_SIM_FAIL;
    }
}

/* job: selection. Where several jobs have the range: the one whose segment still exists, then
 * a non-final one, then the newest. */
typedef struct {
    ql_sim_t *sim;
    ql_txn_t *txn;
    int64_t start, end;
    bool found;
    ql_id_t id;
    ql_state_t state;
    int score[3];
    size_t n;
} pick_t;

static int pick_cb(const ql_job_t *j, void *arg) {
    pick_t *p = arg;
    if (!j->has_range || j->range_start != p->start || j->range_end != p->end)
        return 0;
    p->n++;
    ql_segment_t s;
    bool seg = !ql_id_is_zero(&j->segment) && ql_segment_get(p->txn, &j->segment, &s) == 0;
    if (seg)
        ql_segment_free(&s);
    size_t rank = sim_created_rank(p->sim, &j->id);
    int score[3] = {seg, !ql_state_is_final(j->state), rank == SIZE_MAX ? -1 : (int)rank};
    bool better = !p->found;
    for (int i = 0; !better && i < 3 && score[i] >= p->score[i]; i++)
        better = score[i] > p->score[i];
    if (better) {
        p->found = true;
        p->id = j->id;
        p->state = j->state;
        memcpy(p->score, score, sizeof score);
    }
    return 0;
}

typedef struct {
    int status;
    ql_err_t err;
    bool answered;
} answer_t;

static void action_done_cb(void *arg, int status, const ql_err_t *err) {
    answer_t *a = arg;
    a->answered = true;
    a->status = status;
    if (err)
        a->err = *err;
}

typedef struct {
    ql_id_t id;
    ql_state_t outcome;
    bool warned;
    int64_t now;
} finish_t;

static int finish_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    finish_t *f = arg;
    return ql_job_force_finish(txn, &f->id, f->outcome, f->warned, f->now, err);
}

typedef struct {
    ql_id_t id;
    ql_action_t action;
    int64_t now;
} action_t;

static int action_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    action_t *x = arg;
    ql_state_t was;
    return ql_job_apply_action(txn, &x->id, x->action, x->now, &was, err);
}

static void do_job(ql_sim_t *sim, const sim_step_t *st, ql_sim_result_t *res) {
    char range[128];
    fmt_range(sim, st->start, st->end, range, sizeof range);
    const char *what = st->is_finish ? (st->warned               ? "finish WARNING"
                                        : st->finish == QL_ERROR ? "finish ERROR"
                                                                 : "finish SUCCEED")
                                     : ql_action_name(st->action);
    const char *model = sim->sc->models[st->model].name;
    pick_t p = {.sim = sim, .start = st->start, .end = st->end};
    int rc = ql_txn_begin(sim->store, false, &p.txn);
    if (!rc) {
        rc = ql_job_foreach_model(p.txn, &sim->model_ids[st->model], pick_cb, &p);
        ql_txn_abort(p.txn);
    }
    if (rc) {
        sim_res_append(res, "job %s: cannot read the jobs: %s", what, ql_strerror(rc));
        res->status = QL_SIM_INVALID;
        return;
    }
    if (!p.found) {
        sim_res_append(res, "job %s on %s %s: expected a job with that data range, found none",
                       what, model, range);
        res->status = QL_SIM_FAIL;
        return;
    }
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&p.id, id);
    answer_t a = {0};
    ql_sched_t *sched = sim_sched(sim);
    if (st->is_finish) {
        finish_t f = {p.id, st->finish, st->warned, ql_clock_now_ms(sim->clock)};
        a.status = ql_writer_call(sim->writer, finish_fn, &f, &a.err);
    } else if (!sched) {
        /* No scheduler here (a standby, a query server): straight to the store, as the API
         * of such a server applies an action; the master notices the job moved. */
        action_t x = {p.id, st->action, ql_clock_now_ms(sim->clock)};
        a.status = ql_writer_call(sim->writer, action_fn, &x, &a.err);
    } else if ((a.status = ql_sched_action(sched, &p.id, st->action, action_done_cb, &a)) == 0) {
        while (!a.answered && ql_writer_flush(sim->writer) > 0)
            ;
    }
    if (a.status) {
        sim_res_append(res,
                       "job %s on %s %s (job %s, %s): expected it to be allowed, found "
                       "error %s: %s",
                       what, model, range, id, ql_state_name(p.state), ql_error_code(a.status),
                       a.err.msg[0] ? a.err.msg : ql_strerror(a.status));
        res->status = QL_SIM_FAIL;
    }
}

typedef struct {
    ql_sim_t *sim;
    const sim_step_t *st;
} set_t;

static int set_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    set_t *x = arg;
    const sim_step_t *st = x->st;
    ql_sim_t *sim = x->sim;
    int64_t now = ql_clock_now_ms(sim->clock);
    int rc;
    if (st->kind == SIM_SET_PROJECT) {
        ql_project_t p;
        if ((rc = ql_project_get(txn, sim->sc->projects[st->project].name, QL_DECODE_KEEP_EXTRA,
                                 &p)))
            return ql_err_set(err, rc, "cannot read the project: %s", ql_strerror(rc));
        if (st->set_enabled)
            p.auto_segment_build_enabled = st->enabled;
        if (st->set_timezone)
            rc = ql_strmap_set(&p.config, "kylin.web.timezone",
                               st->timezone[0] ? st->timezone : NULL);
        p.modify_time = now;
        if (!rc)
            rc = ql_project_put(txn, &p);
        ql_project_free(&p);
        return rc ? ql_err_set(err, rc, "cannot store the project: %s", ql_strerror(rc)) : 0;
    }
    ql_model_t m;
    if ((rc = ql_model_get(txn, &sim->model_ids[st->model], QL_DECODE_KEEP_EXTRA, &m)))
        return ql_err_set(err, rc, "cannot read the model: %s", ql_strerror(rc));
    if (st->set_auto_build)
        m.auto_build = st->auto_build;
    if (st->set_status)
        m.status = st->status;
    m.modify_time = now;
    rc = ql_model_put(txn, &m);
    ql_model_free(&m);
    return rc ? ql_err_set(err, rc, "cannot store the model: %s", ql_strerror(rc)) : 0;
}

static int exec_step(ql_sim_t *sim, const sim_step_t *st, size_t number, ql_sim_result_t *res) {
    memset(res, 0, sizeof *res);
    sim->step = number;
    res->step = number;
    res->line = st->line;
    switch (st->kind) {
    case SIM_SCAN:
        scan_now(sim);
        break;
    case SIM_ADVANCE:
        ql_vclock_skip(sim->clock, st->ms);
        break;
    case SIM_RUN:
        do_run(sim, st->ms);
        break;
    case SIM_SET_TIME:
        ql_vclock_set_wall(sim->clock, st->ms);
        break;
    case SIM_RESTART:
        do_restart(sim, res);
        break;
    case SIM_FAIL_SUBMISSIONS:
        sim->fail_left = st->ms;
        break;
    case SIM_BUILD:
        do_build(sim, st, res);
        break;
    case SIM_JOB:
        do_job(sim, st, res);
        break;
    case SIM_SET_PROJECT:
    case SIM_SET_MODEL: {
        set_t x = {sim, st};
        ql_err_t err = {0};
        int rc = ql_writer_call(sim->writer, set_fn, &x, &err);
        if (rc) {
            sim_res_append(res, "set: %s", err.msg);
            res->status = QL_SIM_INVALID;
        }
        break;
    }
    case SIM_LOCK: {
        ql_err_t err = {0};
        int rc = st->holder[0] ? sim_lock_take(sim->lock, st->holder, &err)
                               : sim_lock_release(sim->lock, &err);
        if (rc) {
            sim_res_append(res, "%s", err.msg);
            res->status = QL_SIM_FAIL;
        }
        break;
    }
    case SIM_EXPECT:
        res->status = sim_check_expect(sim, st, res);
        break;
    }
    return res->status;
}

int ql_sim_exec(ql_sim_t *sim, size_t i, ql_sim_result_t *res) {
    ql_sim_result_t local;
    if (!res)
        res = &local;
    if (i >= sim->sc->n_steps) {
        memset(res, 0, sizeof *res);
        set_result(res, QL_SIM_INVALID, i + 1, 0);
        snprintf(res->msg, sizeof res->msg, "%s: there is no step %zu", sim->sc->file, i + 1);
        return res->status;
    }
    return exec_step(sim, &sim->sc->steps[i], i + 1, res);
}

int ql_sim_exec_buffer(ql_sim_t *sim, const char *buf, size_t len, ql_sim_result_t *res) {
    ql_sim_result_t local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    ql_yaml_doc_t *doc;
    ql_err_t err = {0};
    sim_step_t st;
    int rc = ql_yaml_load_buffer(buf, len, "<step>", 0, &doc, &err);
    if (!rc) {
        rc = sim_parse_step(sim->sc, ql_yaml_doc_root(doc), &st, &err);
        ql_yaml_doc_free(doc);
    }
    if (rc) {
        set_result(res, QL_SIM_INVALID, 0, 0);
        snprintf(res->msg, sizeof res->msg, "%s", err.msg);
        return res->status;
    }
    rc = exec_step(sim, &st, sim->step + 1, res);
    sim_step_clear(&st);
    return rc;
}

int ql_sim_run(const ql_sim_scenario_t *sc, const ql_sim_opts_t *opts, ql_sim_result_t *res) {
    ql_sim_result_t local;
    if (!res)
        res = &local;
    ql_sim_t *sim;
    int rc = ql_sim_new(sc, opts, &sim, res);
    for (size_t i = 0; rc == QL_SIM_PASS && i < sc->n_steps; i++)
        rc = ql_sim_exec(sim, i, res);
    ql_sim_free(sim);
    return rc;
}

int ql_sim_run_file(const char *path, const ql_sim_opts_t *opts, ql_sim_result_t *res) {
    ql_sim_result_t local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    ql_sim_scenario_t *sc;
    ql_err_t err = {0};
    if (ql_sim_scenario_load_file(path, &sc, &err)) {
        set_result(res, QL_SIM_INVALID, 0, 0);
        snprintf(res->msg, sizeof res->msg, "%s", err.msg);
        return res->status;
    }
    int rc = ql_sim_run(sc, opts, res);
    ql_sim_scenario_free(sc);
    return rc;
}

/* ---- accessors ---- */

ql_store_t *ql_sim_store(ql_sim_t *sim) {
    return sim->store;
}

ql_node_t *ql_sim_node(ql_sim_t *sim) {
    return sim->node;
}

ql_clock_t *ql_sim_clock(ql_sim_t *sim) {
    return sim->clock;
}

ql_writer_t *ql_sim_writer(ql_sim_t *sim) {
    return sim->writer;
}

ql_sched_t *ql_sim_sched(ql_sim_t *sim) {
    return sim_sched(sim);
}

ql_dispatcher_t *ql_sim_dispatcher(ql_sim_t *sim) {
    return sim_dispatcher(sim);
}

const ql_templates_t *ql_sim_templates(const ql_sim_t *sim) {
    return sim->sc->templates;
}

void ql_sim_dispatcher_opts(const ql_sim_t *sim, ql_dispatcher_opts_t *out) {
    fill_dispatcher_opts(sim, out);
}

int ql_sim_model_id(const ql_sim_t *sim, const char *project, const char *model, ql_id_t *out) {
    for (size_t i = 0; i < sim->sc->n_models; i++) {
        const sim_model_def_t *m = &sim->sc->models[i];
        if (strcmp(m->name, model) == 0 &&
            (!project || strcmp(sim->sc->projects[m->project].name, project) == 0)) {
            *out = sim->model_ids[i];
            return 0;
        }
    }
    return QL_ENOTFOUND;
}

size_t ql_sim_models(const ql_sim_t *sim) {
    return sim->sc->n_models;
}

void ql_sim_model_at(const ql_sim_t *sim, size_t i, const char **project, const char **name,
                     ql_id_t *id) {
    const sim_model_def_t *m = &sim->sc->models[i];
    if (project)
        *project = sim->sc->projects[m->project].name;
    if (name)
        *name = m->name;
    if (id)
        *id = sim->model_ids[i];
}
