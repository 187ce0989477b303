/*
 * The dispatcher's scan and timer. See ql_dispatch.h for the design; the model list and the
 * decisions by model are in dispatch_index.c, the types they share in dispatch_int.h.
 *
 * Costs, for 100,000 models: the model list is decoded only when the metadata generation
 * changed; the time math runs once per distinct (zone, config, format) combination; a model
 * whose cycle is cached as complete costs two hash lookups; every other model is one target of
 * the scan's single ql_probe_targets call (on LMDB an overlap query, two B-tree seeks, plus a
 * walk of its few non-final jobs when a NEW segment overlaps; on PostgreSQL a share of one query
 * per 4,096 targets). The scan's buffers are kept from scan to scan: nothing is allocated per
 * model or per segment.
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
    ql_dispatch_mark(d, r);
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
        ql_dispatch_answered(d, false);
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
    ql_dispatch_answered(d, false);
}

void ql_dispatch_answered(ql_dispatcher_t *d, bool decision_write) {
    if (decision_write)
        d->persisting--;
    else
        d->pending--;
    if (d->pending || (d->freed && d->persisting))
        return;
    if (d->freed)
        release(d);
    else if (d->scanning && !decision_write)
        scan_end(d);
}

/* Why a cycle is BLOCKED (the first overlapping NEW segment that stops it), IN_PROGRESS (the
 * first NEW segment being built) or PARTIAL_OVERLAP (the first usable segment that overlaps the
 * target without covering it), for the status call's reason and the log. */
static void cycle_why(ql_cycle_state_t state, const ql_dispatch_seg_t *ds, size_t n, int64_t start,
                      int64_t end, char *why, size_t cap) {
    for (size_t i = 0; i < n; i++) {
        const ql_dispatch_seg_t *s = &ds[i];
        if (s->end <= start || s->start >= end)
            continue;
        char id[QL_ID_STR_LEN + 1], range[96];
        ql_id_format(&s->id, id);
        bool stopped = !s->has_live_job || s->job_state == QL_ERROR || s->job_state == QL_PAUSED;
        if (state == QL_CYCLE_BLOCKED && s->status == QL_SEG_NEW && !s->has_live_job) {
            snprintf(why, cap, "NEW segment %s has no non-final job (orphan)", id);
            return;
        }
        if (state == QL_CYCLE_BLOCKED && s->status == QL_SEG_NEW && stopped) {
            snprintf(why, cap, "the job of NEW segment %s is %s", id, ql_state_name(s->job_state));
            return;
        }
        if (state == QL_CYCLE_IN_PROGRESS && s->status == QL_SEG_NEW && !stopped) {
            snprintf(why, cap, "NEW segment %s is being built (its job is %s)", id,
                     ql_state_name(s->job_state));
            return;
        }
        if (state == QL_CYCLE_PARTIAL_OVERLAP && s->status != QL_SEG_NEW) {
            fmt_range(s->start, s->end, range, sizeof range);
            snprintf(why, cap,
                     "segment %s %s overlaps the target without covering it: build or merge the "
                     "rest by hand",
                     id, range);
            return;
        }
    }
}

/* The first usable segment of the covering set (the one that starts at or before the target),
 * moved to related[0] so a COVERED decision, and the cycle cache after it, names it. */
static void covering_first(const ql_dispatch_seg_t *ds, size_t n, int64_t start, drec_t *r) {
    for (size_t i = 0; i < n && i < QL_DECISION_MAX_RELATED; i++) {
        if (ds[i].status == QL_SEG_NEW || ds[i].start > start || ds[i].end <= start)
            continue;
        ql_id_t first = r->related[0];
        r->related[0] = r->related[i];
        r->related[i] = first;
        return;
    }
}

/* Classifies one model's cycle from its probe answer (the segments overlapping the target and
 * the live jobs that can own the NEW ones); why (cap bytes) says why when BLOCKED. */
static int evaluate(const ql_probe_result_t *pr, const combo_t *c, drec_t *r, char *why,
                    size_t cap) {
    size_t n = pr->n_segs;
    ql_dispatch_seg_t dbuf[SEG_BUF];
    dbuf[0] = (ql_dispatch_seg_t){0}; /* GCC cannot see that classify reads only n entries */
    ql_dispatch_seg_t *ds = n <= SEG_BUF ? dbuf : malloc(n * sizeof *ds);
    if (!ds)
        return UV_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const ql_segment_t *s = &pr->segs[i];
        ds[i].id = s->id;
        ds[i].start = s->start;
        ds[i].end = s->end;
        ds[i].status = s->status;
        ds[i].has_live_job = false;
        ds[i].job_state = QL_READY;
        if (i < QL_DECISION_MAX_RELATED)
            r->related[i] = s->id;
        if (s->status != QL_SEG_NEW)
            continue;
        for (size_t k = 0; k < pr->n_jobs; k++)
            if (ql_id_eq(&s->job, &pr->jobs[k].id)) {
                ds[i].has_live_job = true;
                ds[i].job_state = pr->jobs[k].state;
            }
    }
    r->state = ql_dispatch_classify(c->start, c->end, ds, n);
    if (r->state == QL_CYCLE_COVERED || r->state == QL_CYCLE_COVERED_WITH_WARNING)
        covering_first(ds, n, c->start, r);
    else
        cycle_why(r->state, ds, n, c->start, c->end, why, cap);
    r->n_related = (uint32_t)n;
    if (ds != dbuf)
        free(ds);
    return 0;
}

/* What a model needs in this scan (scan_kind). */
enum { K_RECORD, K_PROBE };

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return UV_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static int scan_buffers(ql_dispatcher_t *d) {
    size_t cap_t = d->cap_targets, cap_m = d->cap_targets, cap_r = d->cap_targets;
    int rc = grow((void **)&d->scan_kind, &d->cap_kind, d->n_models, 1);
    if (!rc)
        rc = grow((void **)&d->targets, &cap_t, d->n_models, sizeof *d->targets);
    if (!rc)
        rc = grow((void **)&d->target_model, &cap_m, d->n_models, sizeof *d->target_model);
    if (!rc)
        rc = grow((void **)&d->target_rc, &cap_r, d->n_models, sizeof *d->target_rc);
    if (!rc)
        d->cap_targets = cap_t;
    return rc;
}

/* First pass: the decision fields every model gets, and the targets the store must answer (a
 * model neither skipped nor cached as covered). Nothing is recorded yet. */
static void scan_prepare(ql_dispatcher_t *d, int64_t now, int64_t mono) {
    d->n_targets = 0;
    for (size_t i = 0; i < d->n_models; i++) {
        const mentry_t *m = &d->models[i];
        drec_t *r = &d->decisions[m->decision];
        d->scan_kind[i] = K_RECORD;
        r->from_cache = false;
        r->job = (ql_id_t){0};
        r->reason = m->skip;
        if (m->skip != QL_SKIP_NONE) {
            r->state = QL_CYCLE_SKIPPED;
            r->occurrence = r->start = r->end = 0;
            r->n_related = 0;
            ql_dispatch_set_msg(r, m->skip_msg);
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
            continue;
        }
        ql_cycle_key_t key = {
            .model = m->id, .occurrence = c->occurrence, .start = c->start, .end = c->end};
        uint32_t n_rel = 0;
        ql_cycle_state_t cached =
            ql_cycle_cache_lookup(d->cache, &key, mono, &r->related[0], &n_rel);
        if (cached == QL_CYCLE_COVERED || cached == QL_CYCLE_COVERED_WITH_WARNING) {
            /* Still name the covering segment: the first of the covering set, the one the
             * cache keeps (the other related segments of the evaluation are not kept). */
            r->state = cached;
            r->n_related = n_rel ? 1 : 0;
            r->from_cache = true;
            ql_dispatch_set_msg(r, NULL);
            continue;
        }
        d->scan_kind[i] = K_PROBE;
        d->targets[d->n_targets] =
            (ql_probe_target_t){.model = m->id, .start = c->start, .end = c->end};
        d->target_model[d->n_targets] = (uint32_t)i;
        d->target_rc[d->n_targets] = QL_ETRANSIENT; /* until answered */
        d->n_targets++;
    }
}

static int probe_cb(const ql_probe_result_t *pr, void *arg) {
    ql_dispatcher_t *d = arg;
    const mentry_t *m = &d->models[d->target_model[pr->index]];
    drec_t *r = &d->decisions[m->decision];
    char why[256] = "";
    int rc = evaluate(pr, &d->combos[m->combo], r, why, sizeof why);
    d->target_rc[pr->index] = rc;
    if (!rc)
        ql_dispatch_set_msg(r, why);
    return 0;
}

/* Submits a NO_OVERLAP cycle through the manual-build path. */
static void submit_cycle(ql_dispatcher_t *d, const mentry_t *m, drec_t *r, int64_t now) {
    const combo_t *c = &d->combos[m->combo];
    if (d->opts.submit_fault && d->opts.submit_fault(d->opts.hook_arg)) {
        r->state = QL_CYCLE_RETRYABLE_FAILURE;
        ql_dispatch_set_msg(r, "the submission failed (injected transient failure)");
        d->stats.submit_failures++;
        record(d, m, r, now);
        return;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (!p) {
        r->state = QL_CYCLE_RETRYABLE_FAILURE;
        ql_dispatch_set_msg(r, "out of memory");
        record(d, m, r, now);
        return;
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
    /* Ordered by its model, as every build's submission is (ql_writer.h, Lanes). */
    uint64_t key = ql_writer_key(&m->id);
    if (ql_writer_submit_keyed(d->opts.writer, &key, 1, ql_submit_fn, &p->op, submit_done)) {
        d->pending--;
        free(p);
        r->state = QL_CYCLE_RETRYABLE_FAILURE;
        ql_dispatch_set_msg(r, "the store is shutting down");
        record(d, m, r, now);
    }
}

/* The scan: prepare every model, answer all targets with one ql_probe_targets call, then record
 * (and submit) model by model in list order, as the decisions were always made. */
static void scan_models(ql_dispatcher_t *d, ql_txn_t *txn, int64_t now) {
    int64_t mono = ql_clock_mono_ms(d->opts.clock);
    int rc = scan_buffers(d);
    if (rc) {
        ql_log(d->opts.log, QL_LOG_ERROR, "dispatcher", "scan failed: %s", ql_strerror(rc));
        return;
    }
    scan_prepare(d, now, mono);
    rc = ql_probe_targets(txn, d->n_targets, d->targets, probe_cb, d);
    for (size_t t = 0; t < d->n_targets && rc; t++)
        if (d->target_rc[t] == QL_ETRANSIENT) /* not answered: the probe failed first */
            d->target_rc[t] = rc;
    size_t t = 0;
    for (size_t i = 0; i < d->n_models; i++) {
        const mentry_t *m = &d->models[i];
        drec_t *r = &d->decisions[m->decision];
        if (d->scan_kind[i] == K_RECORD) {
            record(d, m, r, now);
            continue;
        }
        const combo_t *c = &d->combos[m->combo];
        if ((rc = d->target_rc[t++])) {
            r->state = QL_CYCLE_RETRYABLE_FAILURE;
            ql_dispatch_set_msg(r, ql_strerror(rc));
            record(d, m, r, now);
            continue;
        }
        ql_cycle_key_t key = {
            .model = m->id, .occurrence = c->occurrence, .start = c->start, .end = c->end};
        if (r->state == QL_CYCLE_COVERED || r->state == QL_CYCLE_COVERED_WITH_WARNING)
            ql_cycle_cache_store(d->cache, &key, r->state, mono, &r->related[0], r->n_related);
        if (r->state != QL_CYCLE_NO_OVERLAP) {
            record(d, m, r, now);
            continue;
        }
        submit_cycle(d, m, r, now);
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
    ql_dispatch_persist(d);
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
    free(d->dirty);
    free(d->models);
    free(d->projects);
    free(d->combos);
    free(d->scan_kind);
    free(d->targets);
    free(d->target_model);
    free(d->target_rc);
    ql_cycle_cache_free(d->cache);
    ql_tzcache_free(d->tzcache);
    free(d);
}

/* The timer is closed. Submissions still in the writer answer later (ql_writer_complete, or
 * ql_writer_free at the latest) and hold pointers into d, so the last of them frees it. */
static void free_dispatcher(ql_timer_t *t) {
    ql_dispatcher_t *d = (ql_dispatcher_t *)(void *)((char *)t - offsetof(ql_dispatcher_t, timer));
    if (d->pending || d->persisting) {
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
    d->n_dirty = 0;
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
