/*
 * The dispatcher's scan and timer. See ql_dispatch.h for the design; the model list and the
 * decisions by model are in dispatch_index.c, the types they share in dispatch_int.h.
 *
 * Costs, for 100,000 models: the model list is decoded only when the metadata generation
 * changed; the time math runs once per distinct (zone, config, format) combination; a model
 * whose cycle is cached as complete costs two hash lookups; any other model costs one overlap
 * query (two B-tree seeks), plus a walk of its few non-final jobs when a NEW segment overlaps.
 * Segments are decoded into a fixed buffer: nothing is allocated per segment.
 */
#include "dispatch_cache.h"
#include "dispatch_int.h"
#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_submit.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- time math, once per combination per scan ---- */

static void compute_combo(ql_dispatcher_t *d, combo_t *c, int64_t now) {
    if (c->scan_id == d->scan_id)
        return;
    c->scan_id = d->scan_id;
    c->msg[0] = '\0';
    const ql_tz_t *tz;
    ql_err_t err = {0};
    if (ql_tzcache_get(d->tzcache, c->zone, &tz)) {
        c->rc = QL_EINVAL;
        snprintf(c->msg, sizeof c->msg, "kylin.web.timezone: '%s' is not a known time zone",
                 c->zone);
        return;
    }
    const ql_datefmt_t *fmt;
    if (ql_submit_cache_format(d->formats, c->format, &fmt, &err)) {
        c->rc = QL_EINVAL;
        snprintf(c->msg, sizeof c->msg, "partition_date_format: '%s' is not usable", c->format);
        return;
    }
    ql_civil_t date;
    int64_t start, end;
    c->rc = ql_dispatch_occurrence(tz, now, c->cfg.trigger_sec, &c->occurrence, &date);
    if (!c->rc)
        c->rc = ql_dispatch_target(tz, &date, &c->cfg, &start, &end);
    if (!c->rc)
        c->rc = ql_normalize_range(tz, fmt, start, end, &c->start, &c->end);
    if (c->rc == QL_EEMPTYRANGE) {
        c->start = start;
        c->end = end;
        snprintf(c->msg, sizeof c->msg, "range is empty after partition format normalization");
    } else if (c->rc) {
        snprintf(c->msg, sizeof c->msg, "cannot compute the target: %s", ql_strerror(c->rc));
    }
}

/* ---- logging ---- */

static void fmt_range(int64_t s, int64_t e, char *buf, size_t cap) {
    char a[40], b[40];
    ql_log_format_time(s, a, sizeof a);
    ql_log_format_time(e, b, sizeof b);
    snprintf(buf, cap, "[%s,%s)", a, b);
}

static void log_decision(ql_dispatcher_t *d, const mentry_t *m, drec_t *r) {
    if (!d->opts.log)
        return;
    bool same_cycle = r->occurrence == r->logged_occurrence && r->start == r->logged_start &&
                      r->end == r->logged_end;
    bool changed = r->state != r->logged_state || !same_cycle;
    bool failure = r->state == QL_CYCLE_RETRYABLE_FAILURE;
    /* A submission failure is logged in full once, then at debug level while it repeats: so an
     * unchanged failure is logged again, quietly. Any other state or a new cycle ends the
     * repetition, and the next failure is logged in full again. */
    if (!failure || !same_cycle)
        r->failure_logged = false;
    if (!changed && !failure)
        return;
    r->logged_state = r->state;
    r->logged_occurrence = r->occurrence;
    r->logged_start = r->start;
    r->logged_end = r->end;
    if (r->state == QL_CYCLE_SKIPPED)
        return; /* skips are reported by their own rules (see warn_skip) */
    char range[96], rel[QL_DECISION_MAX_RELATED * (QL_ID_STR_LEN + 1) + 8] = "";
    fmt_range(r->start, r->end, range, sizeof range);
    for (uint32_t i = 0; i < r->n_related && i < QL_DECISION_MAX_RELATED; i++) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&r->related[i], id);
        strcat(rel, i ? "," : "");
        strcat(rel, id);
    }
    ql_log_level_t lvl = (r->state == QL_CYCLE_COVERED_WITH_WARNING ||
                          r->state == QL_CYCLE_BLOCKED || r->state == QL_CYCLE_PARTIAL_OVERLAP)
                             ? QL_LOG_WARN
                             : QL_LOG_INFO;
    if (r->state == QL_CYCLE_RETRYABLE_FAILURE) {
        lvl = r->failure_logged ? QL_LOG_DEBUG : QL_LOG_WARN;
        r->failure_logged = true;
    }
    ql_log(d->opts.log, lvl, "dispatcher", "cycle %s project=%s model=%s target=%s related=%s%s%s",
           ql_cycle_state_name(r->state), d->projects[m->project].name, m->name, range,
           rel[0] ? rel : "-", r->msg ? " reason=" : "", r->msg ? r->msg : "");
}

/* Invalid-config and empty-range warnings: once per model per reason per day. */
static void warn_skip(ql_dispatcher_t *d, const mentry_t *m, drec_t *r, int64_t now) {
    if (r->reason != QL_SKIP_INVALID_CONFIG && r->reason != QL_SKIP_EMPTY_RANGE)
        return;
    int64_t day = now / DAY_MS;
    if (r->warned_day == day && r->warned_reason == r->reason)
        return;
    r->warned_day = day;
    r->warned_reason = r->reason;
    ql_log(d->opts.log, QL_LOG_WARN, "dispatcher",
           "model skipped project=%s model=%s reason=%s%s%s", d->projects[m->project].name, m->name,
           ql_skip_reason_name(r->reason), r->msg ? " detail=" : "", r->msg ? r->msg : "");
}

/* ---- the scan ---- */

static void scan_end(ql_dispatcher_t *d);

static void record(ql_dispatcher_t *d, const mentry_t *m, drec_t *r, int64_t now) {
    r->evaluated_at = now;
    d->stats.states[r->state]++;
    if (r->state == QL_CYCLE_SKIPPED)
        warn_skip(d, m, r, now);
    log_decision(d, m, r);
    if (d->opts.on_decision) {
        ql_decision_t pub;
        ql_dispatcher_decision(d, &r->model, &pub);
        d->opts.on_decision(d->opts.decision_arg, &pub);
    }
}

static void release(ql_dispatcher_t *d);

static void submit_done(void *arg, int status, const ql_err_t *err) {
    /* arg is &p->op: the mutation (ql_submit_fn) reads it as its ql_submit_op_t. */
    pending_t *p = (pending_t *)(void *)((char *)arg - offsetof(pending_t, op));
    ql_dispatcher_t *d = p->d;
    if (d->freed) {
        /* The owner is gone (a server stopping mid-scan): the job, if committed, stays for the
         * scheduler's recovery; nobody is left to tell. */
        free(p);
        if (--d->pending == 0)
            release(d);
        return;
    }
    drec_t *r = &d->decisions[p->decision];
    const mentry_t *m = r->mentry != UINT32_MAX ? &d->models[r->mentry] : NULL;
    if (status == 0) {
        r->state = QL_CYCLE_SUBMITTED;
        r->job = p->op.job;
        r->n_related = 1;
        r->related[0] = p->op.segment;
        r->failure_logged = false;
        ql_dispatch_set_msg(r, NULL);
        d->stats.submitted++;
        if (d->opts.on_submitted)
            d->opts.on_submitted(d->opts.hook_arg, &p->op.job);
    } else {
        r->state = QL_CYCLE_RETRYABLE_FAILURE;
        ql_dispatch_set_msg(r, err && err->msg[0] ? err->msg : ql_strerror(status));
        d->stats.submit_failures++;
    }
    if (m)
        record(d, m, r, r->evaluated_at);
    free(p);
    if (--d->pending == 0 && d->scanning)
        scan_end(d);
}

typedef struct {
    const ql_id_t *jobs; /* owning job id per NEW segment */
    ql_dispatch_seg_t *segs;
    size_t n;
} owner_ctx_t;

static int owner_cb(const ql_live_job_t *j, void *arg) {
    owner_ctx_t *c = arg;
    for (size_t i = 0; i < c->n; i++)
        if (c->segs[i].status == QL_SEG_NEW && ql_id_eq(&c->jobs[i], &j->id)) {
            c->segs[i].has_live_job = true;
            c->segs[i].job_state = j->state;
        }
    return 0;
}

/* Why a BLOCKED cycle is blocked: the first overlapping NEW segment that stops it. */
static void blocked_why(const ql_dispatch_seg_t *ds, size_t n, int64_t start, int64_t end,
                        char *why, size_t cap) {
    for (size_t i = 0; i < n; i++) {
        const ql_dispatch_seg_t *s = &ds[i];
        if (s->status != QL_SEG_NEW || s->end <= start || s->start >= end)
            continue;
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&s->id, id);
        if (!s->has_live_job) {
            snprintf(why, cap, "NEW segment %s has no non-final job (orphan)", id);
            return;
        }
        if (s->job_state == QL_ERROR || s->job_state == QL_PAUSED) {
            snprintf(why, cap, "the job of NEW segment %s is %s", id, ql_state_name(s->job_state));
            return;
        }
    }
}

/* Classifies one model's cycle from the store; why (cap bytes) says why when BLOCKED. */
static int evaluate(ql_txn_t *txn, const mentry_t *m, const combo_t *c, drec_t *r, char *why,
                    size_t cap) {
    ql_segment_t buf[SEG_BUF];
    ql_segment_t *segs = buf;
    size_t n;
    int rc = ql_segment_overlapping(txn, &m->id, c->start, c->end, buf, SEG_BUF, &n);
    if (rc == QL_ETOOBIG) {
        /* Unusual (a target over more than 64 segments): take them all. */
        segs = malloc(n * sizeof *segs);
        if (!segs)
            return UV_ENOMEM;
        size_t n2;
        rc = ql_segment_overlapping(txn, &m->id, c->start, c->end, segs, n, &n2);
        n = n2;
    }
    if (rc) {
        if (segs != buf)
            free(segs);
        return rc;
    }
    ql_dispatch_seg_t dbuf[SEG_BUF];
    ql_id_t jbuf[SEG_BUF];
    ql_dispatch_seg_t *ds = n <= SEG_BUF ? dbuf : malloc(n * sizeof *ds);
    ql_id_t *jobs = n <= SEG_BUF ? jbuf : malloc(n * sizeof *jobs);
    bool any_new = false;
    int64_t new_lo = 0, new_hi = 0;
    if (!ds || !jobs) {
        rc = UV_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        ds[i].id = segs[i].id;
        ds[i].start = segs[i].start;
        ds[i].end = segs[i].end;
        ds[i].status = segs[i].status;
        ds[i].has_live_job = false;
        ds[i].job_state = QL_READY;
        jobs[i] = segs[i].job;
        if (segs[i].status == QL_SEG_NEW) {
            new_lo = any_new && new_lo < segs[i].start ? new_lo : segs[i].start;
            new_hi = any_new && new_hi > segs[i].end ? new_hi : segs[i].end;
            any_new = true;
        }
    }
    if (any_new) {
        /* A NEW segment's job has the segment's range, so the live jobs over the NEW segments'
         * span are all the owners there can be (not the model's other live jobs). */
        owner_ctx_t oc = {.jobs = jobs, .segs = ds, .n = n};
        if ((rc = ql_job_foreach_live_overlapping(txn, &m->id, new_lo, new_hi, owner_cb, &oc)))
            goto out;
    }
    r->state = ql_dispatch_classify(c->start, c->end, ds, n);
    if (r->state == QL_CYCLE_BLOCKED)
        blocked_why(ds, n, c->start, c->end, why, cap);
    r->n_related = (uint32_t)n;
    for (size_t i = 0; i < n && i < QL_DECISION_MAX_RELATED; i++)
        r->related[i] = ds[i].id;
out:
    if (ds != dbuf)
        free(ds);
    if (jobs != jbuf)
        free(jobs);
    if (segs != buf)
        free(segs);
    return rc;
}

static void scan_models(ql_dispatcher_t *d, ql_txn_t *txn, int64_t now) {
    int64_t mono = ql_clock_mono_ms(d->opts.clock);
    for (size_t i = 0; i < d->n_models; i++) {
        const mentry_t *m = &d->models[i];
        drec_t *r = &d->decisions[m->decision];
        r->from_cache = false;
        r->job = (ql_id_t){0};
        r->reason = m->skip;
        if (m->skip != QL_SKIP_NONE) {
            r->state = QL_CYCLE_SKIPPED;
            r->occurrence = r->start = r->end = 0;
            r->n_related = 0;
            ql_dispatch_set_msg(r, m->skip_msg);
            record(d, m, r, now);
            continue;
        }
        combo_t *c = &d->combos[m->combo];
        compute_combo(d, c, now);
        r->occurrence = c->occurrence;
        r->start = c->start;
        r->end = c->end;
        r->n_related = 0;
        if (c->rc) {
            r->state = QL_CYCLE_SKIPPED;
            r->reason = c->rc == QL_EEMPTYRANGE ? QL_SKIP_EMPTY_RANGE : QL_SKIP_INVALID_CONFIG;
            ql_dispatch_set_msg(r, c->msg);
            record(d, m, r, now);
            continue;
        }
        ql_cycle_key_t key = {
            .model = m->id, .occurrence = c->occurrence, .start = c->start, .end = c->end};
        ql_cycle_state_t cached = ql_cycle_cache_get(d->cache, &key, mono);
        if (cached == QL_CYCLE_COVERED || cached == QL_CYCLE_COVERED_WITH_WARNING) {
            r->state = cached;
            r->from_cache = true;
            ql_dispatch_set_msg(r, NULL);
            record(d, m, r, now);
            continue;
        }
        char why[QL_ID_STR_LEN + 64] = "";
        int rc = evaluate(txn, m, c, r, why, sizeof why);
        if (rc) {
            r->state = QL_CYCLE_RETRYABLE_FAILURE;
            ql_dispatch_set_msg(r, ql_strerror(rc));
            record(d, m, r, now);
            continue;
        }
        ql_dispatch_set_msg(r, why);
        if (r->state == QL_CYCLE_COVERED || r->state == QL_CYCLE_COVERED_WITH_WARNING)
            ql_cycle_cache_put(d->cache, &key, r->state, mono);
        if (r->state != QL_CYCLE_NO_OVERLAP) {
            record(d, m, r, now);
            continue;
        }
        /* NO_OVERLAP: submit through the manual-build path. */
        if (d->opts.submit_fault && d->opts.submit_fault(d->opts.hook_arg)) {
            r->state = QL_CYCLE_RETRYABLE_FAILURE;
            ql_dispatch_set_msg(r, "the submission failed (injected transient failure)");
            d->stats.submit_failures++;
            record(d, m, r, now);
            continue;
        }
        pending_t *p = calloc(1, sizeof *p);
        if (!p) {
            r->state = QL_CYCLE_RETRYABLE_FAILURE;
            ql_dispatch_set_msg(r, "out of memory");
            record(d, m, r, now);
            continue;
        }
        p->d = d;
        p->decision = m->decision;
        p->op.kind = QL_SUBMIT_BUILD;
        p->op.templates = d->opts.templates;
        p->op.model = m->id;
        p->op.start = c->start;
        p->op.end = c->end;
        p->op.priority = QL_PRIORITY_DEFAULT;
        p->op.submitter = "System";
        p->op.now = now;
        p->op.fence = d->opts.fence;
        r->evaluated_at = now;
        d->pending++;
        if (ql_writer_submit(d->opts.writer, ql_submit_fn, &p->op, submit_done)) {
            d->pending--;
            free(p);
            r->state = QL_CYCLE_RETRYABLE_FAILURE;
            ql_dispatch_set_msg(r, "the store is shutting down");
            record(d, m, r, now);
        }
    }
}

static void timer_cb(ql_timer_t *t, void *arg);

static void scan_end(ql_dispatcher_t *d) {
    d->scanning = false;
    d->stats.scans++;
    uint64_t us = uv_hrtime() / 1000;
    d->stats.last_scan_us = (int64_t)us - d->scan_started_us;
    d->stats.last_scan_ms = d->stats.last_scan_us / 1000;
    d->stats.cache_entries = ql_cycle_cache_size(d->cache);
    if (d->timer_on)
        ql_timer_start(&d->timer, d->opts.interval_ms, timer_cb, d);
    void (*done)(void *) = d->scan_done;
    d->scan_done = NULL;
    if (done)
        done(d->scan_done_arg);
}

int ql_dispatcher_scan(ql_dispatcher_t *d, void (*done)(void *arg), void *arg) {
    if (d->scanning)
        return QL_ETRANSIENT; /* the in-process guard: never two scans at once */
    d->scanning = true;
    d->scan_done = done;
    d->scan_done_arg = arg;
    d->scan_started_us = (int64_t)(uv_hrtime() / 1000);
    d->scan_id++;
    memset(d->stats.states, 0, sizeof d->stats.states);
    if (d->opts.is_master && !d->opts.is_master(d->opts.master_arg)) {
        scan_end(d);
        return 0;
    }
    int64_t now = ql_clock_now_ms(d->opts.clock);
    ql_txn_t *txn = NULL;
    int rc = ql_txn_begin(d->opts.store, false, &txn);
    uint64_t gen = 0;
    if (!rc)
        rc = ql_store_metadata_generation(txn, &gen);
    if (!rc && (!d->list_valid || gen != d->generation))
        rc = ql_dispatch_rebuild_list(d, txn, gen);
    if (rc) {
        ql_log(d->opts.log, QL_LOG_ERROR, "dispatcher", "scan failed: %s", ql_strerror(rc));
        if (txn)
            ql_txn_abort(txn);
        scan_end(d);
        return 0;
    }
    scan_models(d, txn, now);
    ql_txn_abort(txn);
    if (d->pending && d->opts.manual_flush)
        ql_writer_flush(d->opts.writer);
    if (d->pending == 0 && d->scanning)
        scan_end(d);
    return 0;
}

bool ql_dispatcher_scanning(const ql_dispatcher_t *d) {
    return d->scanning;
}

static void timer_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_dispatcher_t *d = arg;
    if (!d->timer_on)
        return;
    if (ql_dispatcher_scan(d, NULL, NULL) == QL_ETRANSIENT)
        ql_timer_start(&d->timer, d->opts.interval_ms, timer_cb, d);
}

void ql_dispatcher_start(ql_dispatcher_t *d) {
    d->timer_on = true;
    if (!d->scanning)
        ql_timer_start(&d->timer, 0, timer_cb, d);
}

void ql_dispatcher_stop(ql_dispatcher_t *d) {
    d->timer_on = false;
    ql_timer_stop(&d->timer);
}

/* ---- lifecycle and queries ---- */

int ql_dispatcher_new(const ql_dispatcher_opts_t *opts, ql_dispatcher_t **out) {
    *out = NULL;
    ql_dispatcher_t *d = calloc(1, sizeof *d);
    if (!d)
        return UV_ENOMEM;
    d->opts = *opts;
    if (!d->opts.cache_capacity)
        d->opts.cache_capacity = 10000;
    if (!d->opts.cache_ttl_ms)
        d->opts.cache_ttl_ms = 2 * DAY_MS;
    if (d->opts.interval_ms <= 0)
        d->opts.interval_ms = 30000;
    int rc = ql_cycle_cache_new(d->opts.cache_capacity, d->opts.cache_ttl_ms, &d->cache);
    if (!rc)
        rc = ql_tzcache_new(&d->tzcache);
    /* Room for every pattern in practice (a handful per deployment): a scan never reopens. */
    if (!rc)
        rc = ql_submit_cache_new(256, &d->formats);
    if (!rc)
        rc = ql_timer_init(opts->clock, &d->timer);
    if (rc) {
        ql_cycle_cache_free(d->cache);
        ql_tzcache_free(d->tzcache);
        ql_submit_cache_free(d->formats);
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

static void release(ql_dispatcher_t *d) {
    for (size_t i = 0; i < d->n_decisions; i++)
        free(d->decisions[i].msg);
    ql_submit_cache_free(d->formats);
    free(d->decisions);
    free(d->dindex);
    free(d->models);
    free(d->projects);
    free(d->combos);
    ql_cycle_cache_free(d->cache);
    ql_tzcache_free(d->tzcache);
    free(d);
}

/* The timer is closed. Submissions still in the writer answer later (ql_writer_complete, or
 * ql_writer_free at the latest) and hold pointers into d, so the last of them frees it. */
static void free_dispatcher(ql_timer_t *t) {
    ql_dispatcher_t *d = (ql_dispatcher_t *)(void *)((char *)t - offsetof(ql_dispatcher_t, timer));
    if (d->pending) {
        d->freed = true;
        return;
    }
    release(d);
}

void ql_dispatcher_free(ql_dispatcher_t *d) {
    if (!d)
        return;
    ql_dispatcher_stop(d);
    ql_timer_close(&d->timer, free_dispatcher);
}

void ql_dispatcher_clear_cache(ql_dispatcher_t *d) {
    ql_cycle_cache_clear(d->cache);
}

void ql_dispatcher_reset(ql_dispatcher_t *d) {
    ql_cycle_cache_clear(d->cache);
    for (size_t i = 0; i < d->n_decisions; i++)
        free(d->decisions[i].msg);
    d->n_decisions = 0;
    if (d->dindex)
        memset(d->dindex, 0, d->n_dindex * sizeof *d->dindex);
    d->list_valid = false;
}

int ql_dispatcher_decision(const ql_dispatcher_t *d, const ql_id_t *model, ql_decision_t *out) {
    const drec_t *r = ql_dispatch_decision_find(d, model);
    if (!r || r->state == QL_CYCLE_NONE)
        return QL_ENOTFOUND;
    memset(out, 0, sizeof *out);
    out->model = r->model;
    if (r->mentry != UINT32_MAX && r->mentry < d->n_models) {
        const mentry_t *m = &d->models[r->mentry];
        snprintf(out->project, sizeof out->project, "%s", d->projects[m->project].name);
        snprintf(out->model_name, sizeof out->model_name, "%s", m->name);
    }
    out->state = r->state;
    out->reason = r->reason;
    if (r->msg)
        snprintf(out->message, sizeof out->message, "%s", r->msg);
    out->occurrence = r->occurrence;
    out->target_start = r->start;
    out->target_end = r->end;
    out->n_related = r->n_related;
    for (uint32_t i = 0; i < r->n_related && i < QL_DECISION_MAX_RELATED; i++)
        out->related[i] = r->related[i];
    out->job = r->job;
    out->evaluated_at = r->evaluated_at;
    out->from_cache = r->from_cache;
    return 0;
}

void ql_dispatcher_get_stats(const ql_dispatcher_t *d, ql_dispatcher_stats_t *out) {
    *out = d->stats;
    out->cache_entries = ql_cycle_cache_size(d->cache);
}
