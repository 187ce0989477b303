/* The shared submission mutation for builds, merges, refreshes and ad-hoc jobs. */
#include "scheduler/ql_submit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ql_submit_kind_type(ql_submit_kind_t kind) {
    switch (kind) {
    case QL_SUBMIT_BUILD:
        return "INC_BUILD";
    case QL_SUBMIT_MERGE:
        return "INDEX_MERGE";
    case QL_SUBMIT_REFRESH:
        return "INDEX_REFRESH";
    case QL_SUBMIT_ADHOC:
        break;
    }
    return NULL;
}

/* An ad-hoc job: its steps were prepared outside the writer; its parameters go into the record
 * the submission creates. */
static int submit_adhoc(ql_txn_t *txn, ql_submit_op_t *op, ql_err_t *err) {
    if (!op->steps || !op->project || !op->type)
        return ql_err_set(err, QL_EINVAL, "an ad-hoc job needs its project, type and steps");
    ql_job_spec_t spec = {
        .priority = op->priority,
        .submitter = op->submitter,
        .now = op->now,
        .fence = op->fence,
        .steps = op->steps->specs,
        .n_steps = op->steps->n,
        .params = op->params,
        .params_len = op->params_len,
        .yarn_queue = op->yarn_queue,
        .tag = op->tag,
    };
    return ql_meta_submit_job(txn, op->project, ql_id_is_zero(&op->model) ? NULL : &op->model,
                              op->type, false, 0, 0, &spec, &op->job, err);
}

int ql_submit_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    ql_submit_op_t *op = arg;
    ql_model_t m;
    int rc = ql_fence_check(txn, op->fence, err);
    if (rc)
        return rc;
    if (op->kind == QL_SUBMIT_ADHOC)
        return submit_adhoc(txn, op, err);
    rc = ql_model_get_for_probe(txn, &op->model, 0, &m);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "model not found");
    if (rc)
        return ql_err_set(err, rc, "cannot read the model: %s", ql_strerror(rc));
    ql_job_steps_t steps;
    rc = ql_job_steps_from_template(op->templates, m.job_template, ql_submit_kind_type(op->kind),
                                    &steps, err);
    if (rc) {
        ql_model_free(&m);
        return rc;
    }
    ql_job_spec_t spec = {
        .priority = op->priority,
        .submitter = op->submitter,
        .now = op->now,
        .fence = op->fence,
        .steps = steps.specs,
        .n_steps = steps.n,
        .yarn_queue = op->yarn_queue,
        .tag = op->tag,
        .model = &m, /* read FOR SHARE above: the submission does not read it again */
    };
    switch (op->kind) {
    case QL_SUBMIT_BUILD:
        rc = ql_meta_submit_build(txn, &op->model, op->start, op->end, &spec, &op->job,
                                  &op->segment, err);
        break;
    case QL_SUBMIT_MERGE:
        rc = ql_meta_submit_merge(txn, &op->model, op->ids, op->n_ids, &spec, &op->job, err);
        break;
    case QL_SUBMIT_REFRESH:
        rc = op->n_ids == 1
                 ? ql_meta_submit_refresh(txn, &op->model, &op->ids[0], &spec, &op->job, err)
                 : ql_err_set(err, QL_EREFRESH, "a refresh names one segment");
        break;
    case QL_SUBMIT_ADHOC:
        break; /* handled above */
    }
    ql_job_steps_free(&steps);
    ql_model_free(&m);
    return rc;
}

void ql_submit_project_timezone(const ql_project_t *p, const char *server_tz, char *buf,
                                size_t cap) {
    const char *z = p ? ql_strmap_get(&p->config, "kylin.web.timezone") : NULL;
    if (!z || !z[0])
        z = server_tz;
    if (!z || !z[0])
        z = "UTC";
    snprintf(buf, cap, "%s", z);
}

/* ---- the normalization cache ---- */

struct ql_submit_cache {
    ql_tzcache_t *zones;
    struct {
        char pattern[QL_DATEFMT_PATTERN_MAX + 1];
        ql_datefmt_t *fmt; /* NULL: a free slot */
        uint64_t used;     /* the clock at the last lookup: the smallest is evicted */
    } * fmts;
    size_t cap;
    uint64_t clock;
    ql_submit_cache_stats_t stats;
};

int ql_submit_cache_new(size_t max_formats, ql_submit_cache_t **out) {
    *out = NULL;
    ql_submit_cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    c->cap = max_formats ? max_formats : QL_SUBMIT_CACHE_FORMATS;
    int rc = (c->fmts = calloc(c->cap, sizeof *c->fmts)) ? ql_tzcache_new(&c->zones) : UV_ENOMEM;
    if (rc) {
        ql_submit_cache_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void ql_submit_cache_free(ql_submit_cache_t *c) {
    if (!c)
        return;
    for (size_t i = 0; c->fmts && i < c->cap; i++)
        ql_datefmt_free(c->fmts[i].fmt);
    free(c->fmts);
    ql_tzcache_free(c->zones);
    free(c);
}

void ql_submit_cache_get_stats(const ql_submit_cache_t *c, ql_submit_cache_stats_t *out) {
    *out = c->stats;
}

int ql_submit_cache_format(ql_submit_cache_t *c, const char *pattern, const ql_datefmt_t **out,
                           ql_err_t *err) {
    size_t victim = 0;
    for (size_t i = 0; i < c->cap; i++) {
        if (c->fmts[i].fmt && strcmp(c->fmts[i].pattern, pattern) == 0) {
            c->fmts[i].used = ++c->clock;
            c->stats.format_hits++;
            *out = c->fmts[i].fmt;
            return 0;
        }
        if (c->fmts[i].used < c->fmts[victim].used)
            victim = i;
    }
    ql_datefmt_t *f;
    c->stats.format_opens++;
    int rc = ql_datefmt_open(pattern, &f, err);
    if (rc)
        return rc;
    /* ql_datefmt_open refuses patterns longer than QL_DATEFMT_PATTERN_MAX, so this one fits. */
    if (c->fmts[victim].fmt) {
        ql_datefmt_free(c->fmts[victim].fmt);
        c->stats.format_evictions++;
    }
    snprintf(c->fmts[victim].pattern, sizeof c->fmts[victim].pattern, "%s", pattern);
    c->fmts[victim].fmt = f;
    c->fmts[victim].used = ++c->clock;
    *out = f;
    return 0;
}

/* ---- normalization ---- */

int ql_submit_normalize(const ql_project_t *p, const ql_model_t *m, const char *server_tz,
                        int64_t start, int64_t end, int64_t *ns, int64_t *ne, ql_err_t *err) {
    return ql_submit_normalize_cached(NULL, p, m, server_tz, start, end, ns, ne, err);
}

int ql_submit_normalize_cached(ql_submit_cache_t *cache, const ql_project_t *p, const ql_model_t *m,
                               const char *server_tz, int64_t start, int64_t end, int64_t *ns,
                               int64_t *ne, ql_err_t *err) {
    if (!m->partitioned) {
        *ns = start;
        *ne = end;
        return 0;
    }
    char zone[128];
    ql_submit_project_timezone(p, server_tz, zone, sizeof zone);
    /* Without a cache the zone and the format are opened here and freed below. */
    ql_tz_t *own_tz = NULL;
    ql_datefmt_t *own_fmt = NULL;
    const ql_tz_t *tz = NULL;
    const ql_datefmt_t *fmt = NULL;
    int rc = cache ? ql_tzcache_get(cache->zones, zone, &tz) : ql_tz_load(zone, &own_tz);
    if (rc)
        return ql_err_set(err, QL_EINVAL, "kylin.web.timezone: '%s' is not a known time zone",
                          zone);
    if (own_tz)
        tz = own_tz;
    if (cache)
        rc = ql_submit_cache_format(cache, m->partition_format, &fmt, err);
    else if ((rc = ql_datefmt_open(m->partition_format, &own_fmt, err)) == 0)
        fmt = own_fmt;
    if (rc) {
        ql_tz_free(own_tz);
        return rc; /* err says what is wrong with the pattern (ql_datefmt_open) */
    }
    rc = ql_normalize_range(tz, fmt, start, end, ns, ne);
    ql_datefmt_free(own_fmt);
    ql_tz_free(own_tz);
    if (rc == QL_EEMPTYRANGE)
        return ql_err_set(err, rc,
                          "the range [%lld, %lld) is empty after normalization with the partition "
                          "format '%s' (start must be earlier than end)",
                          (long long)start, (long long)end, m->partition_format);
    if (rc)
        return ql_err_set(err, rc, "cannot normalize [%lld, %lld) with the partition format '%s'",
                          (long long)start, (long long)end, m->partition_format);
    return 0;
}
