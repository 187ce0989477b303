/* Metadata rules: validation and the multi-record changes that create and end builds. */
#include "storage/ql_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

int ql_meta_check_name(const char *field, const char *value, ql_err_t *err) {
    size_t n = value ? strlen(value) : 0;
    if (n == 0)
        return ql_err_set(err, QL_EINVAL, "%s: must not be empty", field);
    if (n > QL_NAME_MAX)
        return ql_err_set(err, QL_EINVAL, "%s: longer than %d characters", field, QL_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = value[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return ql_err_set(err, QL_EINVAL,
                              "%s: '%s' has the character '%c'; only letters, digits and "
                              "underscores are allowed",
                              field, value, c);
    }
    return 0;
}

int ql_meta_check_range(const char *start_field, const char *end_field, int64_t start, int64_t end,
                        bool full, ql_err_t *err) {
    if (start < 0)
        return ql_err_set(err, QL_EINVAL,
                          "%s: %lld is before 1970-01-01T00:00:00Z (times are epoch milliseconds "
                          "from 0 to %lld, 9999-12-31T00:00:00Z)",
                          start_field, (long long)start, (long long)QL_TIME_MAX);
    if (full && start == 0 && end == QL_RANGE_FULL_END)
        return 0;
    if (end > QL_TIME_MAX)
        return ql_err_set(err, QL_EINVAL,
                          "%s: %lld is after 9999-12-31T00:00:00Z (times are epoch milliseconds "
                          "from 0 to %lld)",
                          end_field, (long long)end, (long long)QL_TIME_MAX);
    if (start >= end)
        return ql_err_set(err, QL_EEMPTYRANGE,
                          "the range [%lld, %lld) is empty: start must be earlier than end",
                          (long long)start, (long long)end);
    return 0;
}

int ql_meta_check_job_type(const char *field, const char *value, ql_err_t *err) {
    size_t n = value ? strlen(value) : 0;
    if (n == 0 || n > QL_TYPE_MAX || value[0] < 'A' || value[0] > 'Z')
        return ql_err_set(err, QL_EINVAL,
                          "%s: '%s' is not a job type (upper-case letters, digits and "
                          "underscores, starting with a letter, at most %d characters)",
                          field, value ? value : "", QL_TYPE_MAX);
    for (size_t i = 1; i < n; i++) {
        char c = value[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return ql_err_set(err, QL_EINVAL, "%s: '%s' is not a job type", field, value);
    }
    return 0;
}

int ql_meta_create_project(ql_txn_t *txn, ql_project_t *p, int64_t now, ql_err_t *err) {
    int rc = ql_meta_check_name("name", p->name, err);
    if (rc)
        return rc;
    ql_project_t old;
    rc = ql_project_get(txn, p->name, 0, &old);
    if (rc == 0) {
        ql_project_free(&old);
        return ql_err_set(err, QL_EEXIST, "project '%s' already exists", p->name);
    }
    if (rc != QL_ENOTFOUND)
        return ql_err_set(err, rc, "cannot read project '%s': %s", p->name, ql_strerror(rc));
    p->create_time = p->modify_time = now;
    rc = ql_project_put(txn, p);
    return rc ? ql_err_set(err, rc, "cannot store project '%s': %s", p->name, ql_strerror(rc)) : 0;
}

int ql_meta_create_model(ql_txn_t *txn, ql_model_t *m, int64_t now, ql_err_t *err) {
    int rc = ql_meta_check_name("name", m->name, err);
    if (!rc)
        rc = ql_meta_check_name("project", m->project, err);
    if (rc)
        return rc;
    ql_project_t p;
    rc = ql_project_get(txn, m->project, 0, &p);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "project '%s' not found", m->project);
    if (rc)
        return ql_err_set(err, rc, "cannot read project '%s': %s", m->project, ql_strerror(rc));
    ql_project_free(&p);
    if (m->partitioned && !m->partition_column[0])
        return ql_err_set(err, QL_EINVAL,
                          "partition_desc.partition_date_column: must not be empty");
    if (m->partitioned && !m->partition_format[0])
        return ql_err_set(err, QL_EINVAL,
                          "partition_desc.partition_date_format: must not be empty");
    if (m->job_template[0] && (rc = ql_meta_check_name("job_template", m->job_template, err)))
        return rc;
    ql_store_new_id(ql_txn_store(txn), &m->id);
    m->create_time = m->modify_time = now;
    rc = ql_model_put(txn, m);
    if (rc == QL_EEXIST)
        return ql_err_set(err, rc, "model '%s' already exists in project '%s'", m->name,
                          m->project);
    return rc ? ql_err_set(err, rc, "cannot store model '%s': %s", m->name, ql_strerror(rc)) : 0;
}

/* ---- conflict checks ---- */

typedef struct {
    int64_t start, end;
    ql_id_t found;
    ql_state_t found_state;
    bool any;
} live_probe_t;

static int live_probe_cb(const ql_live_job_t *j, void *arg) {
    live_probe_t *p = arg;
    if (!j->has_range || !ql_range_overlaps(j->start, j->end, p->start, p->end))
        return 0;
    p->found = j->id;
    p->found_state = j->state;
    p->any = true;
    return 1;
}

/* The refusal of a build whose range a live job of the model overlaps (p->any). */
static int job_conflict(const ql_model_t *m, const live_probe_t *p, ql_err_t *err) {
    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&p->found, id);
    return ql_err_set(err, QL_EJOBCONFLICT,
                      "a building job for the same object already exists: job %s of model "
                      "'%s' targets an overlapping range",
                      id, m->name);
}

static int check_job_conflict(ql_txn_t *txn, const ql_model_t *m, int64_t start, int64_t end,
                              ql_err_t *err) {
    live_probe_t p = {.start = start, .end = end};
    int rc = ql_job_foreach_live_overlapping(txn, &m->id, start, end, live_probe_cb, &p);
    if (rc)
        return ql_err_set(err, rc, "cannot read the jobs of model '%s': %s", m->name,
                          ql_strerror(rc));
    return p.any ? job_conflict(m, &p, err) : 0;
}

typedef struct {
    ql_segment_t first;
    bool any;
} seg_probe_t;

static int seg_probe_cb(const ql_segment_t *s, void *arg) {
    seg_probe_t *p = arg;
    p->first = *s;
    p->any = true;
    return 1;
}

/* A build's two probes in one call (ql_probe_range). */
typedef struct {
    seg_probe_t seg;
    live_probe_t live;
} build_probe_t;

static int build_seg_cb(const ql_segment_t *s, void *arg) {
    return seg_probe_cb(s, &((build_probe_t *)arg)->seg);
}

static int build_live_cb(const ql_live_job_t *j, void *arg) {
    return live_probe_cb(j, &((build_probe_t *)arg)->live);
}

/* The model id names into m: spec's (the caller read it in this transaction, so it is not read
 * again; *borrowed tells, and m is then a shallow copy that drop_model leaves alone) or read. */
static int load_model(ql_txn_t *txn, const ql_id_t *id, const ql_job_spec_t *spec, ql_model_t *m,
                      bool *borrowed, ql_err_t *err) {
    *borrowed = spec && spec->model && ql_id_eq(&spec->model->id, id);
    if (*borrowed) {
        *m = *spec->model;
        return 0;
    }
    int rc = ql_model_get_for_probe(txn, id, 0, m);
    if (rc == QL_ENOTFOUND) {
        char s[QL_ID_STR_LEN + 1];
        ql_id_format(id, s);
        return ql_err_set(err, rc, "model %s not found", s);
    }
    return rc ? ql_err_set(err, rc, "cannot read the model: %s", ql_strerror(rc)) : 0;
}

static void drop_model(ql_model_t *m, bool borrowed) {
    if (!borrowed)
        ql_model_free(m);
}

/* Creates the job record and its steps. */
static int create_job(ql_txn_t *txn, const char *project, const ql_model_t *m, const char *type,
                      bool has_range, int64_t start, int64_t end, const ql_id_t *segment,
                      const ql_id_t *sources, size_t n_sources, const ql_job_spec_t *spec,
                      const ql_id_t *id, ql_id_t *job_out, ql_err_t *err) {
    if (spec->priority < QL_PRIORITY_MIN || spec->priority > QL_PRIORITY_MAX)
        return ql_err_set(err, QL_EINVAL, "priority: %d is outside %d..%d", spec->priority,
                          QL_PRIORITY_MIN, QL_PRIORITY_MAX);
    if (spec->n_steps < 1 || spec->n_steps > QL_JOB_STEPS_MAX)
        return ql_err_set(err, QL_EINVAL, "steps: a job has 1 to %d steps, not %zu",
                          QL_JOB_STEPS_MAX, spec->n_steps);
    if (spec->yarn_queue && strlen(spec->yarn_queue) > QL_JOB_QUEUE_MAX)
        return ql_err_set(err, QL_EINVAL, "yarn_queue: longer than %d bytes", QL_JOB_QUEUE_MAX);
    if (spec->tag && strlen(spec->tag) > QL_JOB_TAG_MAX)
        return ql_err_set(err, QL_EINVAL, "tag: longer than %d bytes as JSON text", QL_JOB_TAG_MAX);
    ql_job_t j = {0};
    if (id)
        j.id = *id;
    else
        ql_store_new_id(ql_txn_store(txn), &j.id);
    snprintf(j.project, sizeof j.project, "%s", project);
    if (m) {
        j.model = m->id;
        snprintf(j.model_name, sizeof j.model_name, "%s", m->name);
    }
    snprintf(j.type, sizeof j.type, "%s", type);
    snprintf(j.submitter, sizeof j.submitter, "%s", spec->submitter ? spec->submitter : "ADMIN");
    j.state = QL_READY;
    j.priority = spec->priority;
    if (segment)
        j.segment = *segment;
    j.sources = (ql_id_t *)sources; /* borrowed for the encode below */
    j.n_sources = (uint32_t)n_sources;
    j.has_range = has_range;
    j.range_start = start;
    j.range_end = end;
    j.n_steps = (uint32_t)spec->n_steps;
    j.create_time = j.modify_time = spec->now;
    j.fence = spec->fence;
    j.params = (char *)spec->params; /* borrowed for the encode below */
    j.params_len = spec->params ? spec->params_len : 0;
    snprintf(j.yarn_queue, sizeof j.yarn_queue, "%s", spec->yarn_queue ? spec->yarn_queue : "");
    snprintf(j.tag, sizeof j.tag, "%s", spec->tag ? spec->tag : "");
    int rc = ql_job_put(txn, &j);
    for (size_t i = 0; !rc && i < spec->n_steps; i++) {
        ql_step_t s = {0};
        s.job = j.id;
        s.seq = (uint32_t)i;
        snprintf(s.name, sizeof s.name, "%s", spec->steps[i].name);
        snprintf(s.kind, sizeof s.kind, "%s", spec->steps[i].kind);
        s.state = QL_READY;
        s.def = (uint8_t *)spec->steps[i].def;
        s.def_len = spec->steps[i].def_len;
        rc = ql_step_put(txn, &s);
    }
    if (rc)
        return ql_err_set(err, rc, "cannot store the job: %s", ql_strerror(rc));
    if (job_out)
        *job_out = j.id;
    return 0;
}

/* A NEW segment owned by job, whose id is made before the job is written so that the segment
 * is written once, with its owner. */
static int new_segment(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end, int64_t now,
                       ql_id_t *job, ql_segment_t *seg, ql_err_t *err) {
    memset(seg, 0, sizeof *seg);
    ql_store_new_id(ql_txn_store(txn), &seg->id);
    ql_store_new_id(ql_txn_store(txn), job);
    seg->model = *model;
    seg->start = start;
    seg->end = end;
    seg->status = QL_SEG_NEW;
    seg->create_time = now;
    seg->job = *job;
    int rc = ql_segment_put(txn, seg);
    return rc ? ql_err_set(err, rc, "cannot store the segment: %s", ql_strerror(rc)) : 0;
}

int ql_meta_submit_build(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                         const ql_job_spec_t *spec, ql_id_t *job_out, ql_id_t *segment_out,
                         ql_err_t *err) {
    ql_model_t m;
    bool borrowed;
    int rc = load_model(txn, model, spec, &m, &borrowed, err);
    if (rc)
        return rc;
    /* A full-load model has one segment over the whole range (docs/design/metadata.md, Full
     * builds): a second one overlaps it, and is refused below like any overlap. */
    if (!m.partitioned && (start != 0 || end != QL_RANGE_FULL_END)) {
        rc = ql_err_set(err, QL_EFULLLOAD,
                        "model '%s' is a full-load model (no partition column): its build covers "
                        "the whole range [0, %lld), not [%lld, %lld)",
                        m.name, (long long)QL_RANGE_FULL_END, (long long)start, (long long)end);
        goto out;
    }
    if ((rc = ql_meta_check_range("start", "end", start, end, !m.partitioned, err)))
        goto out;
    /* Both rules' probes at once: an overlapping segment first, else an overlapping live job. */
    build_probe_t probe = {.live = {.start = start, .end = end}};
    if ((rc = ql_probe_range(txn, &m.id, start, end, build_seg_cb, build_live_cb, &probe))) {
        rc = ql_err_set(err, rc, "cannot read the segments and jobs of model '%s': %s", m.name,
                        ql_strerror(rc));
        goto out;
    }
    if (probe.seg.any) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&probe.seg.first.id, id);
        rc = ql_err_set(err, QL_ESEGOVERLAP,
                        "Can't build segment. The specified data range overlaps with the built "
                        "segments from %lld to %lld: segment %s [%lld, %lld) %s of model '%s'",
                        (long long)start, (long long)end, id, (long long)probe.seg.first.start,
                        (long long)probe.seg.first.end, ql_seg_status_name(probe.seg.first.status),
                        m.name);
        goto out;
    }
    if (probe.live.any) {
        rc = job_conflict(&m, &probe.live, err);
        goto out;
    }
    ql_segment_t seg;
    ql_id_t job;
    if ((rc = new_segment(txn, &m.id, start, end, spec->now, &job, &seg, err)) ||
        (rc = create_job(txn, m.project, &m, "INC_BUILD", true, start, end, &seg.id, NULL, 0, spec,
                         &job, NULL, err)))
        goto out;
    if (job_out)
        *job_out = job;
    if (segment_out)
        *segment_out = seg.id;
out:
    drop_model(&m, borrowed);
    return rc;
}

static int load_usable_segment(ql_txn_t *txn, const ql_model_t *m, const ql_id_t *id,
                               ql_segment_t *out, int code, ql_err_t *err) {
    char s[QL_ID_STR_LEN + 1];
    ql_id_format(id, s);
    int rc = ql_segment_get(txn, id, out);
    if (rc == 0 && !ql_id_eq(&out->model, &m->id)) {
        ql_segment_free(out);
        rc = QL_ENOTFOUND;
    }
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "segment %s not found in model '%s'", s, m->name);
    if (rc)
        return ql_err_set(err, rc, "cannot read segment %s: %s", s, ql_strerror(rc));
    if (out->status == QL_SEG_NEW) {
        ql_segment_free(out);
        return ql_err_set(err, code,
                          "segment %s is NEW (still building): only READY or WARNING "
                          "segments can be merged or refreshed",
                          s);
    }
    return 0;
}

int ql_meta_submit_merge(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *ids, size_t n,
                         const ql_job_spec_t *spec, ql_id_t *job_out, ql_err_t *err) {
    ql_model_t m;
    bool borrowed;
    int rc = load_model(txn, model, spec, &m, &borrowed, err);
    if (rc)
        return rc;
    ql_segment_t *segs = NULL;
    if (n < 2) {
        rc = ql_err_set(err, QL_EMERGE, "ids: a merge needs at least two segments, got %zu", n);
        goto out;
    }
    if (!(segs = calloc(n, sizeof *segs))) {
        rc = ql_err_set(err, UV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < i; k++)
            if (ql_id_eq(&ids[i], &ids[k])) {
                rc = ql_err_set(err, QL_EMERGE, "ids: a segment is named twice");
                goto out;
            }
        if ((rc = load_usable_segment(txn, &m, &ids[i], &segs[i], QL_EMERGE, err)))
            goto out;
        ql_extra_free(&segs[i].extra);
    }
    for (size_t i = 1; i < n; i++) { /* sort by start */
        ql_segment_t x = segs[i];
        size_t j = i;
        while (j > 0 && x.start < segs[j - 1].start) {
            segs[j] = segs[j - 1];
            j--;
        }
        segs[j] = x;
    }
    for (size_t i = 1; i < n; i++)
        if (!ql_range_connects(segs[i - 1].end, segs[i].start)) {
            rc = ql_err_set(err, QL_EMERGE,
                            "ids: the segments are not contiguous: [%lld, %lld) and [%lld, %lld) "
                            "leave a gap or overlap",
                            (long long)segs[i - 1].start, (long long)segs[i - 1].end,
                            (long long)segs[i].start, (long long)segs[i].end);
            goto out;
        }
    int64_t start = segs[0].start, end = segs[n - 1].end;
    if ((rc = check_job_conflict(txn, &m, start, end, err)))
        goto out;
    ql_id_t *sources = calloc(n, sizeof *sources);
    if (!sources) {
        rc = ql_err_set(err, UV_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        sources[i] = segs[i].id;
    ql_segment_t seg;
    ql_id_t job;
    if (!(rc = new_segment(txn, &m.id, start, end, spec->now, &job, &seg, err)) &&
        !(rc = create_job(txn, m.project, &m, "INDEX_MERGE", true, start, end, &seg.id, sources, n,
                          spec, &job, NULL, err)) &&
        job_out)
        *job_out = job;
    free(sources);
out:
    free(segs);
    drop_model(&m, borrowed);
    return rc;
}

int ql_meta_submit_refresh(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *segment,
                           const ql_job_spec_t *spec, ql_id_t *job_out, ql_err_t *err) {
    ql_model_t m;
    bool borrowed;
    int rc = load_model(txn, model, spec, &m, &borrowed, err);
    if (rc)
        return rc;
    ql_segment_t src;
    if ((rc = load_usable_segment(txn, &m, segment, &src, QL_EREFRESH, err)))
        goto out;
    int64_t start = src.start, end = src.end;
    ql_segment_free(&src);
    if ((rc = check_job_conflict(txn, &m, start, end, err)))
        goto out;
    ql_segment_t seg;
    ql_id_t job;
    if (!(rc = new_segment(txn, &m.id, start, end, spec->now, &job, &seg, err)) &&
        !(rc = create_job(txn, m.project, &m, "INDEX_REFRESH", true, start, end, &seg.id, segment,
                          1, spec, &job, NULL, err)) &&
        job_out)
        *job_out = job;
out:
    drop_model(&m, borrowed);
    return rc;
}

int ql_meta_submit_job(ql_txn_t *txn, const char *project, const ql_id_t *model, const char *type,
                       bool has_range, int64_t start, int64_t end, const ql_job_spec_t *spec,
                       ql_id_t *job_out, ql_err_t *err) {
    int rc = ql_meta_check_job_type("type", type, err);
    if (!rc)
        rc = ql_meta_check_name("project", project, err);
    if (!rc && has_range)
        rc = ql_meta_check_range("start", "end", start, end, false, err);
    if (rc)
        return rc;
    ql_project_t p;
    rc = ql_project_get(txn, project, 0, &p);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "project '%s' not found", project);
    if (rc)
        return ql_err_set(err, rc, "cannot read project '%s': %s", project, ql_strerror(rc));
    ql_project_free(&p);
    if (!model || ql_id_is_zero(model))
        return create_job(txn, project, NULL, type, has_range, start, end, NULL, NULL, 0, spec,
                          NULL, job_out, err);
    ql_model_t m;
    bool borrowed;
    if ((rc = load_model(txn, model, spec, &m, &borrowed, err)))
        return rc;
    if (strcmp(m.project, project) != 0)
        rc = ql_err_set(err, QL_ENOTFOUND, "model '%s' is not in project '%s'", m.name, project);
    if (!rc && has_range)
        rc = check_job_conflict(txn, &m, start, end, err);
    if (!rc)
        rc = create_job(txn, project, &m, type, has_range, start, end, NULL, NULL, 0, spec, NULL,
                        job_out, err);
    drop_model(&m, borrowed);
    return rc;
}

int ql_meta_delete_segments(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *ids, size_t n,
                            ql_err_t *err) {
    ql_model_t m;
    bool borrowed;
    int rc = load_model(txn, model, NULL, &m, &borrowed, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        ql_segment_t s;
        char sid[QL_ID_STR_LEN + 1];
        ql_id_format(&ids[i], sid);
        rc = ql_segment_get(txn, &ids[i], &s);
        if (rc == 0 && !ql_id_eq(&s.model, &m.id)) {
            ql_segment_free(&s);
            rc = QL_ENOTFOUND;
        }
        if (rc == QL_ENOTFOUND) {
            rc = ql_err_set(err, rc, "segment %s not found in model '%s'", sid, m.name);
            break;
        }
        if (rc) {
            rc = ql_err_set(err, rc, "cannot read segment %s: %s", sid, ql_strerror(rc));
            break;
        }
        /* Any non-final job, PAUSED and ERROR too: until it ends it may still resume and
         * finish, and its segment effects need these segments (docs/design/metadata.md). */
        live_probe_t p = {.start = s.start, .end = s.end};
        ql_segment_free(&s);
        if ((rc = ql_job_foreach_live_overlapping(txn, &m.id, p.start, p.end, live_probe_cb, &p)))
            break;
        if (p.any) {
            char jid[QL_ID_STR_LEN + 1];
            ql_id_format(&p.found, jid);
            rc = ql_err_set(err, QL_ESEGLOCKED,
                            "segment %s is in use by job %s, which has not ended (%s): discard "
                            "that job or let it finish first",
                            sid, jid, ql_state_name(p.found_state));
            break;
        }
        if ((rc = ql_segment_delete(txn, &ids[i])))
            rc = ql_err_set(err, rc, "cannot delete segment %s: %s", sid, ql_strerror(rc));
    }
    ql_model_free(&m);
    return rc;
}

int ql_meta_apply_job_outcome(ql_txn_t *txn, const ql_job_t *job, ql_state_t final_state,
                              bool warned, int64_t now) {
    if (ql_id_is_zero(&job->segment))
        return 0;
    ql_segment_t seg;
    int rc = ql_segment_get(txn, &job->segment, &seg);
    if (rc == QL_ENOTFOUND)
        return 0; /* already gone (deleted): nothing to update */
    if (rc)
        return rc;
    if (!ql_id_eq(&seg.job, &job->id) || seg.status != QL_SEG_NEW) {
        ql_segment_free(&seg);
        return 0; /* not this job's NEW segment any more */
    }
    if (final_state == QL_SUCCEED) {
        /* Sources go first, so the result can move to the disjoint index layer. */
        for (uint32_t i = 0; i < job->n_sources && !rc; i++) {
            rc = ql_segment_delete(txn, &job->sources[i]);
            if (rc == QL_ENOTFOUND)
                rc = 0;
        }
        seg.status = warned ? QL_SEG_WARNING : QL_SEG_READY;
        seg.last_build_time = now;
        if (!rc)
            rc = ql_segment_put(txn, &seg);
    } else if (final_state == QL_DISCARDED || final_state == QL_SUICIDAL) {
        rc = ql_segment_delete(txn, &seg.id);
    }
    ql_segment_free(&seg);
    return rc;
}

int ql_meta_job_target_exists(ql_txn_t *txn, const ql_job_t *job, bool *exists) {
    /* Lookups only, no decoding: this runs for every job the scheduler picks. */
    *exists = true;
    if (ql_id_is_zero(&job->model))
        return 0;
    int rc = ql_model_segment_exists(txn, &job->model, &job->segment);
    for (uint32_t i = 0; !rc && i < job->n_sources; i++)
        rc = ql_segment_exists(txn, &job->sources[i]);
    if (rc == QL_ENOTFOUND) {
        *exists = false;
        return 0;
    }
    return rc;
}
