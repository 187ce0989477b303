/*
 * fsck pass over the segments of each model (walked in key order, so one model's segments come
 * together): the record against its key and segment_ids, the segment counter, the layer-0
 * invariant, overlaps (a sorted sweep; only a live refresh or merge may overlap its sources), the
 * owning job of each NEW segment, and stale segment_ids entries.
 */
#include "fsck_int.h"

#include <stdlib.h>

static bool is_replacing_type(const char *type) {
    return strcmp(type, "INDEX_REFRESH") == 0 || strcmp(type, "INDEX_MERGE") == 0;
}

typedef struct seg_ent {
    ql_id_t id;
    int64_t start, end;
    ql_seg_status_t status;
    uint8_t layer;
    ql_id_t job;
    /* For a NEW segment: whether it is the NEW segment of a live refresh or merge, and then the
     * segments that job replaces (owned). */
    bool replacing;
    ql_id_t *sources;
    uint32_t n_sources;
} seg_ent_t;

typedef struct {
    ql_id_t model;
    bool model_exists;
    seg_ent_t *segs;
    size_t n, cap;
    bool have_l0;
    seg_ent_t last_l0; /* previous layer-0 segment (sources not owned) */
} seg_group_t;

static void group_reset(seg_group_t *g) {
    for (size_t i = 0; i < g->n; i++)
        free(g->segs[i].sources);
    g->n = 0;
    g->have_l0 = false;
}

static const char *seg_st(ql_seg_status_t s) {
    return ql_seg_status_name(s);
}

/* The job side of a NEW segment: orphan warnings, and what overlaps it may have. */
static void check_new_segment(ql_fsck_t *f, const seg_group_t *g, seg_ent_t *s) {
    char sid[QL_ID_STR_LEN + 1], jid[QL_ID_STR_LEN + 1], mid[QL_ID_STR_LEN + 1];
    ql_id_format(&s->id, sid);
    ql_id_format(&g->model, mid);
    if (ql_id_is_zero(&s->job)) {
        WARNING(f, "segment %s of model %s: orphan NEW segment (no owning job)", sid, mid);
        return;
    }
    ql_id_format(&s->job, jid);
    ql_job_t j;
    int rc = ql_job_get(f->txn, &s->job, 0, &j);
    if (rc == QL_ENOTFOUND) {
        WARNING(f, "segment %s of model %s: orphan NEW segment (its job %s does not exist)", sid,
                mid, jid);
        return;
    }
    if (rc) {
        /* The job pass reports the undecodable record itself. */
        WARNING(f, "segment %s of model %s: its job %s cannot be read: %s", sid, mid, jid,
                ql_strerror(rc));
        return;
    }
    if ((unsigned)j.state < QL_JOB_STATE_COUNT && ql_state_is_final(j.state)) {
        WARNING(f, "segment %s of model %s: orphan NEW segment (its job %s is %s)", sid, mid, jid,
                ql_state_name(j.state));
    } else if (!ql_id_eq(&j.segment, &s->id)) {
        VIOLATION(f, "segment %s of model %s: its job %s builds another segment", sid, mid, jid);
    } else if (!ql_id_eq(&j.model, &g->model)) {
        VIOLATION(f, "segment %s of model %s: its job %s belongs to another model", sid, mid, jid);
    } else if (is_replacing_type(j.type)) {
        s->replacing = true;
        s->sources = j.sources; /* taken over */
        s->n_sources = j.n_sources;
        j.sources = NULL;
        j.n_sources = 0;
    }
    ql_job_free(&j);
}

/* Whether a (a NEW segment) may overlap b: a live refresh or merge over its sources. */
static bool may_overlap(const seg_ent_t *a, const seg_ent_t *b) {
    if (a->status != QL_SEG_NEW || !a->replacing)
        return false;
    for (uint32_t i = 0; i < a->n_sources; i++)
        if (ql_id_eq(&a->sources[i], &b->id))
            return true;
    return false;
}

static int seg_cmp(const void *pa, const void *pb) {
    const seg_ent_t *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return memcmp(a->id.b, b->id.b, 16);
}

static int finish_group(ql_fsck_t *f, seg_group_t *g) {
    if (g->n == 0)
        return 0;
    char mid[QL_ID_STR_LEN + 1], a[QL_ID_STR_LEN + 1], b[QL_ID_STR_LEN + 1];
    ql_id_format(&g->model, mid);

    uint64_t counted;
    uint8_t ck[17] = {'S'};
    memcpy(ck + 1, g->model.b, 16);
    int rc = ql_count_get(f->txn, ck, sizeof ck, &counted);
    if (rc == QL_ECORRUPT)
        VIOLATION(f, "counts: segment count of model %s is malformed", mid);
    else if (rc)
        return rc;
    else if (counted != g->n)
        VIOLATION(f, "counts: model %s has %zu segments, its counter says %llu", mid, g->n,
                  (unsigned long long)counted);

    for (size_t i = 0; i < g->n; i++) {
        seg_ent_t *s = &g->segs[i];
        if (s->status == QL_SEG_NEW) {
            if (!g->model_exists) {
                ql_id_format(&s->id, a);
                WARNING(f, "segment %s: orphan NEW segment of model %s, which does not exist", a,
                        mid);
            } else {
                check_new_segment(f, g, s);
            }
        } else if (!g->model_exists) {
            ql_id_format(&s->id, a);
            VIOLATION(f, "segment %s (%s): its model %s does not exist", a, seg_st(s->status), mid);
        }
    }

    /* Sorted sweep: `active` holds the segments whose end is past the current start. */
    qsort(g->segs, g->n, sizeof *g->segs, seg_cmp);
    size_t *active = malloc(g->n * sizeof *active), na = 0;
    if (!active)
        return UV_ENOMEM;
    for (size_t i = 0; i < g->n; i++) {
        const seg_ent_t *s = &g->segs[i];
        size_t keep = 0;
        for (size_t x = 0; x < na; x++)
            if (g->segs[active[x]].end > s->start)
                active[keep++] = active[x];
        na = keep;
        for (size_t x = 0; x < na; x++) {
            const seg_ent_t *o = &g->segs[active[x]];
            if (may_overlap(s, o) || may_overlap(o, s))
                continue;
            ql_id_format(&o->id, a);
            ql_id_format(&s->id, b);
            VIOLATION(f, "model %s: segments %s [%lld, %lld) %s and %s [%lld, %lld) %s overlap",
                      mid, a, (long long)o->start, (long long)o->end, seg_st(o->status), b,
                      (long long)s->start, (long long)s->end, seg_st(s->status));
        }
        active[na++] = i;
    }
    free(active);
    return 0;
}

int ql_fsck_segments(ql_fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_SEGMENTS, &c);
    if (rc)
        return rc;
    seg_group_t g = {0};
    MDB_val k, v;
    char sid[QL_ID_STR_LEN + 1], mid[QL_ID_STR_LEN + 1];
    uint64_t indexed = 0;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        f->r->segments++;
        if (k.mv_size != SEG_KEY_LEN) {
            VIOLATION(f, "segments: a key of %zu bytes is not a segment key", k.mv_size);
            continue;
        }
        const uint8_t *kp = k.mv_data;
        if (g.n == 0 || memcmp(kp, g.model.b, 16) != 0) {
            if ((rc = finish_group(f, &g)))
                break;
            group_reset(&g);
            memcpy(g.model.b, kp, 16);
            g.model_exists = exists(f, DB_MODELS, kp, 16, NULL);
        }
        idstr(kp + 25, sid);
        idstr(kp, mid);
        uint8_t layer = kp[16];
        int64_t start = ql_get_key_i64(kp + 17);

        MDB_val iv;
        if (!exists(f, DB_SEGMENT_IDS, kp + 25, 16, &iv))
            VIOLATION(f, "segment %s of model %s: no segment_ids entry", sid, mid);
        else if (iv.mv_size != SEG_KEY_LEN || memcmp(iv.mv_data, kp, SEG_KEY_LEN) != 0)
            VIOLATION(f, "segment %s of model %s: segment_ids points at another key", sid, mid);
        else
            indexed++;

        ql_segment_t s;
        int drc = ql_segment_decode_z(f->zone, v.mv_data, v.mv_size, 0, &s);
        if (drc) {
            VIOLATION(f, "segment %s of model %s: record does not decode: %s", sid, mid,
                      ql_strerror(drc));
            continue;
        }
        if (memcmp(s.id.b, kp + 25, 16) != 0 || memcmp(s.model.b, kp, 16) != 0 ||
            s.layer != layer || s.start != start)
            VIOLATION(f,
                      "segment %s of model %s: key (layer %u, start %lld) does not match the "
                      "record (layer %u, start %lld, or another id or model)",
                      sid, mid, layer, (long long)start, s.layer, (long long)s.start);
        if (layer > 1)
            VIOLATION(f, "segment %s of model %s: index layer %u does not exist", sid, mid, layer);
        if (s.start >= s.end)
            VIOLATION(f, "segment %s of model %s: empty range [%lld, %lld)", sid, mid,
                      (long long)s.start, (long long)s.end);

        if (g.n == g.cap) {
            size_t cap = g.cap ? g.cap * 2 : 16;
            seg_ent_t *segs = realloc(g.segs, cap * sizeof *segs);
            if (!segs) {
                ql_segment_free(&s);
                rc = UV_ENOMEM;
                break;
            }
            g.segs = segs;
            g.cap = cap;
        }
        seg_ent_t *e = &g.segs[g.n++];
        memset(e, 0, sizeof *e);
        e->id = s.id;
        e->start = s.start;
        e->end = s.end;
        e->status = s.status;
        e->layer = layer;
        e->job = s.job;
        ql_segment_free(&s);

        /* Layer 0 is walked in start order: disjoint iff each ends before the next starts. */
        if (layer == 0) {
            if (g.have_l0 && g.last_l0.end > e->start) {
                char other[QL_ID_STR_LEN + 1];
                ql_id_format(&g.last_l0.id, other);
                VIOLATION(f,
                          "model %s: layer-0 segments %s [%lld, %lld) and %s [%lld, %lld) "
                          "overlap (index layer invariant)",
                          mid, other, (long long)g.last_l0.start, (long long)g.last_l0.end, sid,
                          (long long)e->start, (long long)e->end);
            }
            g.last_l0 = *e;
            g.last_l0.sources = NULL;
            g.have_l0 = true;
        }
    }
    mdb_cursor_close(c);
    if (!rc)
        rc = finish_group(f, &g);
    group_reset(&g);
    free(g.segs);
    if (rc)
        return rc;

    if (entries(f, DB_SEGMENT_IDS) == indexed)
        return 0;
    if ((rc = cursor(f, DB_SEGMENT_IDS, &c)))
        return rc;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        MDB_val sv;
        bool ok = k.mv_size == 16 && v.mv_size == SEG_KEY_LEN &&
                  memcmp((const uint8_t *)v.mv_data + 25, k.mv_data, 16) == 0 &&
                  exists(f, DB_SEGMENTS, v.mv_data, SEG_KEY_LEN, &sv);
        if (!ok) {
            if (k.mv_size == 16)
                idstr(k.mv_data, sid);
            else
                snprintf(sid, sizeof sid, "(key of %zu bytes)", k.mv_size);
            VIOLATION(f, "segment_ids: stale entry for segment %s (no such segment record)", sid);
        }
    }
    mdb_cursor_close(c);
    return 0;
}
