/*
 * ql_store_fsck: checks the invariants of spec/metadata.md and every index against the records,
 * inside one read transaction (so it may run next to a live writer and sees one consistent
 * snapshot).
 *
 * Cost: every table is walked once with a cursor, in key order. Record-to-index checks are exact
 * B-tree lookups. The index-to-record direction is proven by counting: each record has exactly
 * one expected entry per index (distinct, since the key holds the record's id), so once every
 * expected entry was found, the index has no stale entry iff its entry count equals the number
 * of records that expect one; only an index whose count differs is walked to name the stale
 * entries. Jobs and steps share their key prefix (the job id), so they are walked side by side
 * (a merge join) rather than with a seek per job. The only pass that is not linear is the
 * overlap check of one model's segments: a sorted sweep whose active set is the segments still
 * open at each start (one or two in every state the rules allow).
 *
 * Findings are printed one a line, "violation: ..." for a broken invariant and "warning: ..."
 * for a state the rules allow but an operator should look at (an orphan NEW segment).
 */
#include "storage/ql_meta.h"
#include "storage/store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Key layouts repeated from store_jobs.c / store_segments.c (documented in store_int.h). */
#define SEG_KEY_LEN 41
#define STATE_KEY_LEN 26
#define LIVE_KEY_LEN QL_LIVE_KEY_LEN
#define LIVE_VAL_LEN QL_LIVE_VAL_LEN
#define MODEL_KEY_LEN 40
#define RECENT_KEY_MAX (QL_NAME_MAX + 1 + 8 + 16)
#define STEP_KEY_LEN 20

/* ---- per-project tallies (models and jobs by state), a small open-addressing table ---- */

typedef struct proj_ent {
    char name[QL_NAME_MAX + 1];
    bool used;
    bool exists; /* a project record has this name */
    bool seen_m;
    bool seen_j[QL_JOB_STATE_COUNT];
    uint64_t models;
    uint64_t jobs[QL_JOB_STATE_COUNT];
} proj_ent_t;

typedef struct {
    proj_ent_t *slots;
    size_t cap, n;
} proj_table_t;

typedef struct fsck {
    ql_txn_t *txn;
    MDB_txn *mt;
    ql_store_t *store;
    FILE *out;
    ql_fsck_report_t *r;
    msgpack_zone *zone;
    proj_table_t projects;
    uint64_t all_jobs[QL_JOB_STATE_COUNT]; /* the global ("" project) counters */
    bool seen_all[QL_JOB_STATE_COUNT];
    /* Job index entries found where a job record expects them. */
    uint64_t found_state, found_recent, found_live, found_models;
} fsck_t;

static void finding(fsck_t *f, bool violation, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void finding(fsck_t *f, bool violation, const char *fmt, ...) {
    if (violation)
        f->r->violations++;
    else
        f->r->warnings++;
    if (!f->out)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(violation ? "violation: " : "warning: ", f->out);
    vfprintf(f->out, fmt, ap);
    fputc('\n', f->out);
    va_end(ap);
}

#define VIOLATION(f, ...) finding((f), true, __VA_ARGS__)
#define WARNING(f, ...) finding((f), false, __VA_ARGS__)

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* The entry for a project name of n bytes (not NUL-terminated), created when missing; NULL only
 * when out of memory or the name is too long to be a project. */
static proj_ent_t *proj_lookup(proj_table_t *t, const char *name, size_t n) {
    if (n == 0 || n > QL_NAME_MAX)
        return NULL;
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        proj_ent_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].used)
                continue;
            size_t h = hash_name(t->slots[i].name, strlen(t->slots[i].name)) & (cap - 1);
            while (slots[h].used)
                h = (h + 1) & (cap - 1);
            slots[h] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    size_t h = hash_name(name, n) & (t->cap - 1);
    while (t->slots[h].used) {
        if (strlen(t->slots[h].name) == n && memcmp(t->slots[h].name, name, n) == 0)
            return &t->slots[h];
        h = (h + 1) & (t->cap - 1);
    }
    proj_ent_t *e = &t->slots[h];
    e->used = true;
    memcpy(e->name, name, n);
    e->name[n] = '\0';
    t->n++;
    return e;
}

/* ---- small helpers ---- */

static int cursor(fsck_t *f, int db, MDB_cursor **c) {
    return ql_db_cursor(f->txn, db, c);
}

static uint64_t entries(fsck_t *f, int db) {
    MDB_stat st;
    if (mdb_stat(f->mt, f->store->dbi[db], &st))
        return 0;
    return st.ms_entries;
}

static bool exists(fsck_t *f, int db, const void *key, size_t klen, MDB_val *val) {
    MDB_val v;
    return ql_db_get(f->txn, db, key, klen, val ? val : &v) == 0;
}

static void idstr(const void *bytes, char *buf) {
    ql_id_t id;
    memcpy(id.b, bytes, 16);
    ql_id_format(&id, buf);
}

static bool is_replacing_type(const char *type) {
    return strcmp(type, "INDEX_REFRESH") == 0 || strcmp(type, "INDEX_MERGE") == 0;
}

/* ---- meta and projects ---- */

static int check_meta(fsck_t *f) {
    uint64_t major;
    int rc = ql_meta_get_u64(f->txn, "schema_major", &major);
    if (rc == QL_ENOTFOUND || rc == QL_ECORRUPT)
        VIOLATION(f, "meta: schema_major is %s", rc == QL_ENOTFOUND ? "missing" : "malformed");
    else if (rc)
        return rc;
    else if (major > QL_SCHEMA_MAJOR)
        VIOLATION(f, "meta: schema_major %llu is newer than this build (%d)",
                  (unsigned long long)major, QL_SCHEMA_MAJOR);
    return 0;
}

static int check_projects(fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_PROJECTS, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        f->r->projects++;
        ql_project_t p;
        int drc = ql_project_decode_z(f->zone, v.mv_data, v.mv_size, 0, &p);
        if (drc) {
            VIOLATION(f, "project '%.*s': record does not decode: %s", (int)k.mv_size,
                      (const char *)k.mv_data, ql_strerror(drc));
            continue;
        }
        if (strlen(p.name) != k.mv_size || memcmp(p.name, k.mv_data, k.mv_size) != 0)
            VIOLATION(f, "project '%.*s': the record is named '%s'", (int)k.mv_size,
                      (const char *)k.mv_data, p.name);
        ql_project_free(&p);
        proj_ent_t *e = proj_lookup(&f->projects, k.mv_data, k.mv_size);
        if (!e) {
            rc = UV_ENOMEM;
            break;
        }
        e->exists = true;
    }
    mdb_cursor_close(c);
    return rc;
}

/* ---- models and model_names ---- */

static size_t model_name_key(uint8_t *k, const char *project, const char *name) {
    size_t pl = strlen(project), nl = strlen(name);
    memcpy(k, project, pl);
    k[pl] = '\0';
    memcpy(k + pl + 1, name, nl);
    return pl + 1 + nl;
}

static int check_models(fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_MODELS, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    uint64_t named = 0;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        f->r->models++;
        if (k.mv_size != 16) {
            VIOLATION(f, "models: a key of %zu bytes is not a model id", k.mv_size);
            continue;
        }
        idstr(k.mv_data, id);
        ql_model_t m;
        int drc = ql_model_decode_z(f->zone, v.mv_data, v.mv_size, 0, &m);
        if (drc) {
            VIOLATION(f, "model %s: record does not decode: %s", id, ql_strerror(drc));
            continue;
        }
        if (memcmp(m.id.b, k.mv_data, 16) != 0)
            VIOLATION(f, "model %s: the record carries another id", id);
        proj_ent_t *e = proj_lookup(&f->projects, m.project, strlen(m.project));
        if (e) {
            e->models++;
            if (!e->exists)
                VIOLATION(f, "model %s '%s': its project '%s' does not exist", id, m.name,
                          m.project);
        } else {
            VIOLATION(f, "model %s '%s': project name '%s' is not valid", id, m.name, m.project);
        }
        uint8_t nk[2 * QL_NAME_MAX + 2];
        MDB_val nv;
        if (!exists(f, DB_MODEL_NAMES, nk, model_name_key(nk, m.project, m.name), &nv))
            VIOLATION(f, "model %s '%s': no model_names entry for project '%s'", id, m.name,
                      m.project);
        else if (nv.mv_size != 16 || memcmp(nv.mv_data, k.mv_data, 16) != 0)
            VIOLATION(f, "model %s '%s': model_names maps '%s'/'%s' to another model", id, m.name,
                      m.project, m.name);
        else
            named++;
        ql_model_free(&m);
    }
    mdb_cursor_close(c);

    /* Every model found its own name entry; any further entry is stale. */
    if (entries(f, DB_MODEL_NAMES) == named)
        return 0;
    if ((rc = cursor(f, DB_MODEL_NAMES, &c)))
        return rc;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        const char *kp = k.mv_data;
        const char *sep = memchr(kp, '\0', k.mv_size);
        bool ok = false;
        ql_model_t m;
        if (sep && v.mv_size == 16 && exists(f, DB_MODELS, v.mv_data, 16, NULL)) {
            ql_id_t mid;
            memcpy(mid.b, v.mv_data, 16);
            if (ql_model_get(f->txn, &mid, 0, &m) == 0) {
                uint8_t nk[2 * QL_NAME_MAX + 2];
                size_t nl = model_name_key(nk, m.project, m.name);
                ok = nl == k.mv_size && memcmp(nk, k.mv_data, nl) == 0;
                ql_model_free(&m);
            }
        }
        if (!ok) {
            size_t pl = sep ? (size_t)(sep - kp) : k.mv_size;
            size_t nl = sep ? k.mv_size - pl - 1 : 0;
            VIOLATION(f, "model_names: stale entry '%.*s'/'%.*s' (no model of that name)", (int)pl,
                      kp, (int)nl, sep ? sep + 1 : "");
        }
    }
    mdb_cursor_close(c);
    return 0;
}

/* ---- segments ---- */

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
static void check_new_segment(fsck_t *f, const seg_group_t *g, seg_ent_t *s) {
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

static int finish_group(fsck_t *f, seg_group_t *g) {
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

static int check_segments(fsck_t *f) {
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

/* ---- jobs, their indexes and steps ---- */

static void job_state_key(uint8_t *k, const ql_job_t *j) {
    k[0] = (uint8_t)j->state;
    k[1] = (uint8_t)j->priority;
    ql_put_key_i64(k + 2, j->create_time);
    memcpy(k + 10, j->id.b, 16);
}

static size_t job_recent_key(uint8_t *k, const char *project, const ql_job_t *j) {
    size_t pl = strlen(project);
    memcpy(k, project, pl);
    k[pl] = '\0';
    ql_put_key_i64(k + pl + 1, j->modify_time);
    memcpy(k + pl + 9, j->id.b, 16);
    return pl + 25;
}

static void job_live_key(uint8_t *k, uint8_t *v, const ql_job_t *j) {
    ql_job_live_entry(k, v, j);
}

static void job_model_key(uint8_t *k, const ql_job_t *j) {
    memcpy(k, j->model.b, 16);
    ql_put_key_i64(k + 16, j->create_time);
    memcpy(k + 24, j->id.b, 16);
}

static void check_job_indexes(fsck_t *f, const ql_job_t *j, const char *id) {
    uint8_t k[RECENT_KEY_MAX], lv[LIVE_VAL_LEN];
    MDB_val v;
    job_state_key(k, j);
    if (!exists(f, DB_JOB_STATES, k, STATE_KEY_LEN, NULL))
        VIOLATION(f, "job %s: no job_states entry for (%s, priority %d, created %lld)", id,
                  ql_state_name(j->state), j->priority, (long long)j->create_time);
    else
        f->found_state++;
    const char *projects[2] = {j->project, ""};
    for (int i = 0; i < 2; i++) {
        size_t kl = job_recent_key(k, projects[i], j);
        if (!exists(f, DB_JOB_RECENT, k, kl, &v))
            VIOLATION(f, "job %s: no job_recent entry under %s%s%s for modify time %lld", id,
                      i ? "" : "project '", i ? "all projects" : j->project, i ? "" : "'",
                      (long long)j->modify_time);
        else if (v.mv_size != 1 || ((const uint8_t *)v.mv_data)[0] != (uint8_t)j->state)
            VIOLATION(f, "job %s: job_recent entry under %s has the wrong state", id,
                      i ? "all projects" : j->project);
        else
            f->found_recent++;
    }
    if (ql_id_is_zero(&j->model))
        return;
    job_model_key(k, j);
    if (!exists(f, DB_JOB_MODELS, k, MODEL_KEY_LEN, NULL))
        VIOLATION(f, "job %s: no job_models entry", id);
    else
        f->found_models++;
    job_live_key(k, lv, j);
    bool found = exists(f, DB_JOB_LIVE, k, LIVE_KEY_LEN, &v);
    if (ql_state_is_final(j->state)) {
        if (found)
            VIOLATION(f, "job %s: %s, yet listed in job_live", id, ql_state_name(j->state));
        return;
    }
    if (!found)
        VIOLATION(f, "job %s: %s, yet missing from job_live", id, ql_state_name(j->state));
    else if (v.mv_size != LIVE_VAL_LEN || memcmp(v.mv_data, lv, LIVE_VAL_LEN) != 0)
        VIOLATION(f, "job %s: job_live entry does not match the record (state or range)", id);
    else
        f->found_live++;
}

typedef struct {
    uint32_t n;
    uint32_t next_seq;
    bool bad_seq;
    bool bad_for_succeed; /* a step not SUCCEED/WARNING/SKIP */
    bool running;
} step_tally_t;

static void check_step(fsck_t *f, const MDB_val *k, const MDB_val *v, const char *jid,
                       step_tally_t *t) {
    f->r->steps++;
    const uint8_t *kp = k->mv_data;
    uint32_t seq = (uint32_t)kp[16] << 24 | (uint32_t)kp[17] << 16 | (uint32_t)kp[18] << 8 | kp[19];
    t->n++;
    if (seq != t->next_seq)
        t->bad_seq = true;
    t->next_seq = seq + 1;
    ql_step_t s;
    int drc = ql_step_decode_z(f->zone, v->mv_data, v->mv_size, 0, &s);
    if (drc) {
        VIOLATION(f, "step %s_%02u: record does not decode: %s", jid, seq, ql_strerror(drc));
        t->bad_for_succeed = true;
        return;
    }
    if (memcmp(s.job.b, kp, 16) != 0 || s.seq != seq)
        VIOLATION(f, "step %s_%02u: the record names step %02u of another job or sequence", jid,
                  seq, s.seq);
    if ((unsigned)s.state >= QL_STATE_COUNT)
        VIOLATION(f, "step %s_%02u: state %d is not a step state", jid, seq, (int)s.state);
    if (s.state != QL_SUCCEED && s.state != QL_WARNING && s.state != QL_SKIP)
        t->bad_for_succeed = true;
    if (s.state == QL_RUNNING)
        t->running = true;
    ql_step_free(&s);
}

static void check_job_steps(fsck_t *f, const ql_job_t *j, const char *id, const step_tally_t *t) {
    if (t->n != j->n_steps)
        VIOLATION(f, "job %s: n_steps is %u but %u step records exist", id, j->n_steps, t->n);
    else if (t->bad_seq)
        VIOLATION(f, "job %s: steps are not numbered 00..%02u", id, t->n ? t->n - 1 : 0);
    if (j->state == QL_SUCCEED && t->bad_for_succeed)
        VIOLATION(f, "job %s: SUCCEED, yet a step is not SUCCEED, WARNING or SKIP", id);
    if ((unsigned)j->state < QL_JOB_STATE_COUNT && ql_state_is_final(j->state) && t->running)
        VIOLATION(f, "job %s: %s, yet a step is RUNNING", id, ql_state_name(j->state));
}

static void check_job_record(fsck_t *f, const MDB_val *k, ql_job_t *j, const char *id) {
    if (memcmp(j->id.b, k->mv_data, 16) != 0)
        VIOLATION(f, "job %s: the record carries another id", id);
    if ((unsigned)j->state >= QL_JOB_STATE_COUNT) {
        VIOLATION(f, "job %s: state %s is not a job state", id, ql_state_name(j->state));
        return; /* its index keys are undefined */
    }
    if (j->has_range && j->range_start >= j->range_end)
        VIOLATION(f, "job %s: empty range [%lld, %lld)", id, (long long)j->range_start,
                  (long long)j->range_end);
    proj_ent_t *e = proj_lookup(&f->projects, j->project, strlen(j->project));
    if (!e) {
        VIOLATION(f, "job %s: project name '%s' is not valid", id, j->project);
        return;
    }
    if (!e->exists)
        WARNING(f, "job %s: its project '%s' does not exist", id, j->project);
    e->jobs[j->state]++;
    f->all_jobs[j->state]++;
    check_job_indexes(f, j, id);
    if (!ql_state_is_final(j->state) && !ql_id_is_zero(&j->model)) {
        char mid[QL_ID_STR_LEN + 1];
        ql_id_format(&j->model, mid);
        if (!exists(f, DB_MODELS, j->model.b, 16, NULL))
            WARNING(f, "job %s: %s, but its model %s does not exist (it will become SUICIDAL)", id,
                    ql_state_name(j->state), mid);
        else if (!ql_id_is_zero(&j->segment) && !exists(f, DB_SEGMENT_IDS, j->segment.b, 16, NULL))
            WARNING(f, "job %s: %s, but its segment is gone (it will become SUICIDAL)", id,
                    ql_state_name(j->state));
    }
}

/* Names the entries of a job index that no job record expects. `id_at` is where the job id
 * sits in the key; `expect` writes the key(s) the job expects (returns their count). */
typedef size_t (*expect_fn)(const ql_job_t *j, int which, uint8_t *k, size_t *klen);

static size_t expect_state(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    (void)which;
    job_state_key(k, j);
    *klen = STATE_KEY_LEN;
    return 1;
}

static size_t expect_recent(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    *klen = job_recent_key(k, which ? "" : j->project, j);
    return 2;
}

static size_t expect_live(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    uint8_t v[LIVE_VAL_LEN];
    (void)which;
    if (ql_id_is_zero(&j->model) || ql_state_is_final(j->state))
        return 0;
    job_live_key(k, v, j);
    *klen = LIVE_KEY_LEN;
    return 1;
}

static size_t expect_model(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    (void)which;
    if (ql_id_is_zero(&j->model))
        return 0;
    job_model_key(k, j);
    *klen = MODEL_KEY_LEN;
    return 1;
}

static int find_stale(fsck_t *f, int db, const char *name, expect_fn expect) {
    MDB_cursor *c;
    int rc = cursor(f, db, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        const uint8_t *kp = k.mv_data;
        size_t id_at;
        if (db == DB_JOB_STATES)
            id_at = 10;
        else if (db == DB_JOB_LIVE || db == DB_JOB_MODELS)
            id_at = 24;
        else
            id_at = k.mv_size >= 24 ? k.mv_size - 16 : 0;
        bool ok = false;
        if (k.mv_size >= id_at + 16) {
            ql_id_t jid;
            memcpy(jid.b, kp + id_at, 16);
            ql_job_t j;
            if (ql_job_get(f->txn, &jid, 0, &j) == 0) {
                if ((unsigned)j.state < QL_JOB_STATE_COUNT) {
                    uint8_t ek[RECENT_KEY_MAX];
                    size_t el = 0;
                    for (int w = 0; !ok && (size_t)w < expect(&j, w, ek, &el); w++)
                        ok = el == k.mv_size && memcmp(ek, kp, el) == 0;
                }
                ql_job_free(&j);
            }
            idstr(kp + id_at, id);
        } else {
            snprintf(id, sizeof id, "(key of %zu bytes)", k.mv_size);
        }
        if (!ok)
            VIOLATION(f, "%s: stale entry for job %s (no job record expects it)", name, id);
    }
    mdb_cursor_close(c);
    return 0;
}

static int check_jobs(fsck_t *f) {
    MDB_cursor *jc, *sc;
    int rc = cursor(f, DB_JOBS, &jc);
    if (rc)
        return rc;
    if ((rc = cursor(f, DB_STEPS, &sc))) {
        mdb_cursor_close(jc);
        return rc;
    }
    MDB_val jk, jv, sk, sv;
    bool steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_FIRST) == 0;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(jc, &jk, &jv, op) == 0; op = MDB_NEXT) {
        f->r->jobs++;
        if (jk.mv_size != 16) {
            VIOLATION(f, "jobs: a key of %zu bytes is not a job id", jk.mv_size);
            continue;
        }
        /* Steps sort before this job's: their job is missing. */
        while (steps_left && (sk.mv_size < 16 || memcmp(sk.mv_data, jk.mv_data, 16) < 0)) {
            f->r->steps++;
            if (sk.mv_size >= 16) {
                idstr(sk.mv_data, id);
                VIOLATION(f, "step of job %s: the job does not exist", id);
            } else {
                VIOLATION(f, "steps: a key of %zu bytes is not a step key", sk.mv_size);
            }
            steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_NEXT) == 0;
        }
        idstr(jk.mv_data, id);
        step_tally_t t = {0};
        while (steps_left && sk.mv_size >= 16 && memcmp(sk.mv_data, jk.mv_data, 16) == 0) {
            if (sk.mv_size == STEP_KEY_LEN) {
                check_step(f, &sk, &sv, id, &t);
            } else {
                f->r->steps++;
                VIOLATION(f, "steps: a key of %zu bytes under job %s is not a step key", sk.mv_size,
                          id);
            }
            steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_NEXT) == 0;
        }
        ql_job_t j;
        int drc = ql_job_decode_z(f->zone, jv.mv_data, jv.mv_size, 0, &j);
        if (drc) {
            VIOLATION(f, "job %s: record does not decode: %s", id, ql_strerror(drc));
            continue;
        }
        check_job_record(f, &jk, &j, id);
        check_job_steps(f, &j, id, &t);
        ql_job_free(&j);
    }
    while (steps_left) {
        f->r->steps++;
        if (sk.mv_size >= 16) {
            idstr(sk.mv_data, id);
            VIOLATION(f, "step of job %s: the job does not exist", id);
        }
        steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_NEXT) == 0;
    }
    mdb_cursor_close(sc);
    mdb_cursor_close(jc);

    /* Every entry found above is one a job expects, and no two jobs expect the same key (it
     * holds the job id): an index with more entries than were found has stale ones. */
    struct {
        int db;
        const char *name;
        uint64_t found;
        expect_fn fn;
    } idx[] = {
        {DB_JOB_STATES, "job_states", f->found_state, expect_state},
        {DB_JOB_RECENT, "job_recent", f->found_recent, expect_recent},
        {DB_JOB_LIVE, "job_live", f->found_live, expect_live},
        {DB_JOB_MODELS, "job_models", f->found_models, expect_model},
    };
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
        if (entries(f, idx[i].db) != idx[i].found &&
            (rc = find_stale(f, idx[i].db, idx[i].name, idx[i].fn)))
            return rc;
    return 0;
}

/*
 * The ranged live jobs of a model never overlap one another: every mutation that creates one
 * refuses an overlap (KE-010032206), and the overlap query of ql_job_foreach_live_overlapping
 * rests on it. job_live sorts a model's entries by range start, so one walk with the largest
 * end so far finds any overlap.
 */
static int check_live_disjoint(fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_JOB_LIVE, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    uint8_t model[16] = {0}, widest[16] = {0};
    int64_t max_end = INT64_MIN;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        if (k.mv_size != LIVE_KEY_LEN || v.mv_size != LIVE_VAL_LEN)
            continue; /* reported by the index checks */
        const uint8_t *kp = k.mv_data, *vp = v.mv_data;
        if (memcmp(kp, model, 16) != 0) {
            memcpy(model, kp, 16);
            max_end = INT64_MIN;
        }
        if (!vp[1])
            continue; /* no range */
        int64_t start = ql_get_key_i64(vp + 2), end = ql_get_key_i64(vp + 10);
        if (start < max_end) {
            char a[QL_ID_STR_LEN + 1], b[QL_ID_STR_LEN + 1];
            idstr(widest, a);
            idstr(kp + 24, b);
            VIOLATION(f, "live jobs %s and %s of one model overlap (from %lld to %lld)", a, b,
                      (long long)start, (long long)(end < max_end ? end : max_end));
        }
        if (end > max_end) {
            max_end = end;
            memcpy(widest, kp + 24, 16);
        }
    }
    mdb_cursor_close(c);
    return 0;
}

static int check_outputs(fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_OUTPUTS, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        if (k.mv_size != STEP_KEY_LEN) {
            VIOLATION(f, "outputs: a key of %zu bytes is not a step key", k.mv_size);
            continue;
        }
        if (!exists(f, DB_STEPS, k.mv_data, STEP_KEY_LEN, NULL)) {
            idstr(k.mv_data, id);
            WARNING(f, "output of step %s_%02u: the step does not exist", id,
                    ((const uint8_t *)k.mv_data)[19]);
        }
    }
    mdb_cursor_close(c);
    return 0;
}

/* ---- counters ---- */

static int check_counts(fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_COUNTS, &c);
    if (rc)
        return rc;
    MDB_cursor *segc;
    if ((rc = cursor(f, DB_SEGMENTS, &segc))) {
        mdb_cursor_close(c);
        return rc;
    }
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        const uint8_t *kp = k.mv_data;
        if (v.mv_size != 8) {
            VIOLATION(f, "counts: a value of %zu bytes under key '%c' is not a counter", v.mv_size,
                      k.mv_size ? kp[0] : '?');
            continue;
        }
        uint64_t n = ql_get_be64(v.mv_data);
        if (k.mv_size >= 2 && kp[0] == 'J') {
            unsigned st = kp[1];
            const char *pname = (const char *)kp + 2;
            size_t pl = k.mv_size - 2;
            if (st >= QL_JOB_STATE_COUNT) {
                VIOLATION(f, "counts: a job counter for state %u, which is not a job state", st);
                continue;
            }
            uint64_t real;
            if (pl == 0) {
                real = f->all_jobs[st];
                f->seen_all[st] = true;
            } else {
                proj_ent_t *e = proj_lookup(&f->projects, pname, pl);
                if (!e) {
                    VIOLATION(f, "counts: a job counter for an invalid project name");
                    continue;
                }
                real = e->jobs[st];
                e->seen_j[st] = true;
            }
            if (real != n)
                VIOLATION(f, "counts: %s%.*s%s has %llu %s jobs, its counter says %llu",
                          pl ? "project '" : "all projects", (int)pl, pname, pl ? "'" : "",
                          (unsigned long long)real, ql_state_name((ql_state_t)st),
                          (unsigned long long)n);
        } else if (k.mv_size >= 2 && kp[0] == 'M') {
            proj_ent_t *e = proj_lookup(&f->projects, (const char *)kp + 1, k.mv_size - 1);
            if (!e) {
                VIOLATION(f, "counts: a model counter for an invalid project name");
                continue;
            }
            e->seen_m = true;
            if (e->models != n)
                VIOLATION(f, "counts: project '%s' has %llu models, its counter says %llu", e->name,
                          (unsigned long long)e->models, (unsigned long long)n);
        } else if (k.mv_size == 17 && kp[0] == 'S') {
            /* Counted groups were compared in the segment pass; only a model with no segment
             * at all is left to check. */
            MDB_val sk = ql_val(kp + 1, 16), sv;
            bool any = mdb_cursor_get(segc, &sk, &sv, MDB_SET_RANGE) == 0 && sk.mv_size >= 16 &&
                       memcmp(sk.mv_data, kp + 1, 16) == 0;
            if (!any) {
                idstr(kp + 1, id);
                VIOLATION(f, "counts: model %s has no segments, its counter says %llu", id,
                          (unsigned long long)n);
            }
        } else {
            VIOLATION(f, "counts: unknown counter key of %zu bytes starting with 0x%02x", k.mv_size,
                      k.mv_size ? kp[0] : 0);
        }
    }
    mdb_cursor_close(segc);
    mdb_cursor_close(c);

    for (int s = 0; s < QL_JOB_STATE_COUNT; s++)
        if (f->all_jobs[s] && !f->seen_all[s])
            VIOLATION(f, "counts: all projects have %llu %s jobs, but there is no counter",
                      (unsigned long long)f->all_jobs[s], ql_state_name((ql_state_t)s));
    for (size_t i = 0; i < f->projects.cap; i++) {
        const proj_ent_t *e = &f->projects.slots[i];
        if (!e->used)
            continue;
        if (e->models && !e->seen_m)
            VIOLATION(f, "counts: project '%s' has %llu models, but there is no counter", e->name,
                      (unsigned long long)e->models);
        for (int s = 0; s < QL_JOB_STATE_COUNT; s++)
            if (e->jobs[s] && !e->seen_j[s])
                VIOLATION(f, "counts: project '%s' has %llu %s jobs, but there is no counter",
                          e->name, (unsigned long long)e->jobs[s], ql_state_name((ql_state_t)s));
    }
    return 0;
}

int ql_store_fsck(ql_store_t *store, void *out_file, ql_fsck_report_t *report) {
    ql_fsck_report_t local;
    fsck_t f = {.store = store, .out = out_file, .r = report ? report : &local};
    memset(f.r, 0, sizeof *f.r);
    int rc = ql_txn_begin(store, false, &f.txn);
    if (rc)
        return rc;
    f.mt = f.txn->txn;
    f.zone = ql_txn_zone(f.txn);
    if (!f.zone)
        rc = UV_ENOMEM;
    if (!rc)
        rc = check_meta(&f);
    if (!rc)
        rc = check_projects(&f);
    if (!rc)
        rc = check_models(&f);
    if (!rc)
        rc = check_segments(&f);
    if (!rc)
        rc = check_jobs(&f);
    if (!rc)
        rc = check_live_disjoint(&f);
    if (!rc)
        rc = check_outputs(&f);
    if (!rc)
        rc = check_counts(&f);
    ql_txn_abort(f.txn);
    free(f.projects.slots);
    if (f.out)
        fflush(f.out);
    return rc;
}
