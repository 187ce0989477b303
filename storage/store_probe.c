/*
 * ql_probe_targets and ql_probe_range: the public wrappers, and the per-model probes that are
 * LMDB's implementation (a per-model probe there is two B-tree seeks in memory, so the loop is
 * already what the one-query form of PostgreSQL buys, store_pg_probe.c). Both give one answer per
 * target, segments sorted by (start, end, id), which the contract suite compares.
 */
#include "store_ops.h"

#include <stdlib.h>
#include <string.h>

int ql_probe_targets(ql_txn_t *t, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                     void *arg) {
    if (n == 0)
        return 0;
    return t->ops->probe_targets(t, n, targets, cb, arg);
}

int ql_probe_range(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                   ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg) {
    if (start >= end)
        return 0;
    return t->ops->probe_range(t, model, start, end, seg_cb, job_cb, arg);
}

/* The segment callback's stop, kept: it ends the whole probe. */
typedef struct {
    ql_segment_cb cb;
    void *arg;
    bool stopped;
} range_seg_t;

static int range_seg_cb(const ql_segment_t *s, void *arg) {
    range_seg_t *r = arg;
    int rc = r->cb(s, r->arg);
    r->stopped = rc > 0;
    return rc;
}

int store_probe_range_pair(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                           ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg) {
    range_seg_t r = {.cb = seg_cb, .arg = arg};
    int rc = t->ops->segment_foreach_overlapping(t, model, start, end, range_seg_cb, &r);
    if (rc || r.stopped)
        return rc;
    return t->ops->job_foreach_live_overlapping(t, model, start, end, job_cb, arg);
}

typedef struct {
    ql_segment_t *segs;
    size_t n_segs, cap_segs;
    ql_live_job_t *jobs;
    size_t n_jobs, cap_jobs;
} probe_buf_t;

static int grow(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * size);
    if (!q)
        return UV_ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static int seg_cb(const ql_segment_t *s, void *arg) {
    probe_buf_t *b = arg;
    if (grow((void **)&b->segs, &b->cap_segs, b->n_segs + 1, sizeof *b->segs))
        return UV_ENOMEM;
    b->segs[b->n_segs] = *s;
    b->segs[b->n_segs].extra = (ql_extra_t){0}; /* decoded without extras: nothing to own */
    b->n_segs++;
    return 0;
}

static int job_cb(const ql_live_job_t *j, void *arg) {
    probe_buf_t *b = arg;
    if (grow((void **)&b->jobs, &b->cap_jobs, b->n_jobs + 1, sizeof *b->jobs))
        return UV_ENOMEM;
    b->jobs[b->n_jobs++] = *j;
    return 0;
}

static bool seg_less(const ql_segment_t *a, const ql_segment_t *b) {
    if (a->start != b->start)
        return a->start < b->start;
    if (a->end != b->end)
        return a->end < b->end;
    return memcmp(a->id.b, b->id.b, sizeof a->id.b) < 0;
}

/* Insertion sort: a target's overlaps are few and nearly sorted already. */
static void sort_segs(ql_segment_t *s, size_t n) {
    for (size_t i = 1; i < n; i++) {
        ql_segment_t x = s[i];
        size_t j = i;
        while (j > 0 && seg_less(&x, &s[j - 1])) {
            s[j] = s[j - 1];
            j--;
        }
        s[j] = x;
    }
}

static int probe_one(ql_txn_t *t, const ql_probe_target_t *tg, probe_buf_t *b) {
    b->n_segs = b->n_jobs = 0;
    if (tg->start >= tg->end)
        return 0;
    int rc = t->ops->segment_foreach_overlapping(t, &tg->model, tg->start, tg->end, seg_cb, b);
    if (rc)
        return rc;
    sort_segs(b->segs, b->n_segs);
    bool any_new = false;
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < b->n_segs; i++) {
        const ql_segment_t *s = &b->segs[i];
        if (s->status != QL_SEG_NEW)
            continue;
        lo = any_new && lo < s->start ? lo : s->start;
        hi = any_new && hi > s->end ? hi : s->end;
        any_new = true;
    }
    if (!any_new)
        return 0;
    return t->ops->job_foreach_live_overlapping(t, &tg->model, lo, hi, job_cb, b);
}

int store_probe_loop(ql_txn_t *t, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                     void *arg) {
    probe_buf_t b = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if ((rc = probe_one(t, &targets[i], &b)))
            break;
        ql_probe_result_t r = {
            .index = i, .segs = b.segs, .n_segs = b.n_segs, .jobs = b.jobs, .n_jobs = b.n_jobs};
        rc = cb(&r, arg);
    }
    free(b.segs);
    free(b.jobs);
    return rc;
}
