/*
 * Records as the JSON clients see (docs/design/rest-api.md): Kylin's field names, times as epoch
 * milliseconds, ids in their 36-character form, display statuses for jobs and steps.
 */
#include "api_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

json_t *ql_api_id_json(const ql_id_t *id) {
    if (ql_id_is_zero(id))
        return json_string("");
    char s[QL_ID_STR_LEN + 1];
    ql_id_format(id, s);
    return json_string(s);
}

#define K(w, k) QL_API_JW_KEY(w, k)

void ql_api_jw_project(ql_api_jw_t *w, const ql_project_t *p) {
    ql_api_jw_open(w, '{');
    K(w, "name");
    ql_api_jw_str(w, p->name);
    K(w, "description");
    ql_api_jw_str(w, p->description ? p->description : "");
    K(w, "override_kylin_properties");
    ql_api_jw_open(w, '{');
    for (size_t i = 0; i < p->config.n; i++) {
        /* Stored keys passed the option table, but escape them like any stored text. */
        ql_api_jw_key_text(w, p->config.items[i].key);
        ql_api_jw_str(w, p->config.items[i].value);
    }
    ql_api_jw_close(w, '}');
    K(w, "auto_segment_build_enabled");
    ql_api_jw_bool(w, p->auto_segment_build_enabled);
    K(w, "create_time");
    ql_api_jw_int(w, p->create_time);
    K(w, "last_modified");
    ql_api_jw_int(w, p->modify_time);
    ql_api_jw_close(w, '}');
}

static void auto_build(ql_api_jw_t *w, const ql_auto_build_t *a) {
    if (!a->present) {
        ql_api_jw_null(w);
        return;
    }
    ql_api_jw_open(w, '{');
    K(w, "enabled");
    ql_api_jw_bool(w, a->enabled);
    K(w, "trigger_time");
    ql_api_jw_str(w, a->trigger_time);
    K(w, "logical_date_offset_days");
    if (a->logical_date_offset_days == INT64_MIN)
        ql_api_jw_null(w);
    else
        ql_api_jw_int(w, a->logical_date_offset_days);
    K(w, "data_range_start_time");
    ql_api_jw_str(w, a->data_range_start_time);
    K(w, "data_range_end_time");
    ql_api_jw_str(w, a->data_range_end_time);
    ql_api_jw_close(w, '}');
}

void ql_api_jw_model(ql_api_jw_t *w, const ql_model_t *m) {
    ql_api_jw_open(w, '{');
    K(w, "uuid");
    ql_api_jw_id(w, &m->id);
    K(w, "name");
    ql_api_jw_str(w, m->name);
    K(w, "project");
    ql_api_jw_str(w, m->project);
    K(w, "status");
    ql_api_jw_str(w, ql_model_status_name(m->status));
    K(w, "model_type");
    ql_api_jw_str(w, ql_model_type_name(m->type));
    K(w, "partition_desc");
    if (m->partitioned) {
        ql_api_jw_open(w, '{');
        K(w, "partition_date_column");
        ql_api_jw_str(w, m->partition_column);
        K(w, "partition_date_format");
        ql_api_jw_str(w, m->partition_format);
        ql_api_jw_close(w, '}');
    } else {
        ql_api_jw_null(w);
    }
    K(w, "multi_partition_desc");
    if (m->multi_partition_columns) {
        ql_api_jw_open(w, '{');
        K(w, "columns");
        ql_api_jw_open(w, '[');
        const char *p = m->multi_partition_columns;
        while (*p) {
            const char *c = strchr(p, ',');
            size_t n = c ? (size_t)(c - p) : strlen(p);
            ql_api_jw_strn(w, p, n);
            p += n + (c ? 1 : 0);
        }
        ql_api_jw_close(w, ']');
        ql_api_jw_close(w, '}');
    } else {
        ql_api_jw_null(w);
    }
    K(w, "segment_config");
    ql_api_jw_open(w, '{');
    K(w, "auto_segment_build");
    auto_build(w, &m->auto_build);
    ql_api_jw_close(w, '}');
    K(w, "job_template");
    ql_api_jw_str(w, m->job_template);
    K(w, "create_time");
    ql_api_jw_int(w, m->create_time);
    K(w, "last_modified");
    ql_api_jw_int(w, m->modify_time);
    ql_api_jw_close(w, '}');
}

void ql_api_segment_name(int64_t start, int64_t end, char *buf, size_t cap) {
    if (start == 0 && end == QL_RANGE_FULL_END) {
        snprintf(buf, cap, "FULL_BUILD");
        return;
    }
    char a[32], b[32];
    int64_t v[2] = {start, end};
    char *out[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        time_t secs = (time_t)(v[i] >= 0 ? v[i] / 1000 : (v[i] - 999) / 1000);
        struct tm tm;
        if (!gmtime_r(&secs, &tm) || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
            snprintf(out[i], sizeof a, "%lld", (long long)v[i]);
        else
            snprintf(out[i], sizeof a, "%04d%02d%02d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    }
    snprintf(buf, cap, "%s_%s", a, b);
}

void ql_api_jw_segment(ql_api_jw_t *w, const ql_segment_t *s) {
    char name[64];
    ql_api_segment_name(s->start, s->end, name, sizeof name);
    ql_api_jw_open(w, '{');
    K(w, "id");
    ql_api_jw_id(w, &s->id);
    K(w, "name");
    ql_api_jw_str(w, name);
    K(w, "status");
    ql_api_jw_str(w, ql_seg_status_name(s->status));
    K(w, "start");
    ql_api_jw_int(w, s->start);
    K(w, "end");
    ql_api_jw_int(w, s->end);
    K(w, "create_time");
    ql_api_jw_int(w, s->create_time);
    K(w, "last_build_time");
    ql_api_jw_int(w, s->last_build_time);
    K(w, "job_id");
    ql_api_jw_id(w, &s->job);
    ql_api_jw_close(w, '}');
}

/* Running time so far: to the end, or to now while running, or to the last change while it
 * waits (paused, in error). */
static int64_t duration(int64_t start, int64_t end, bool running, int64_t modify, int64_t now) {
    if (start <= 0)
        return 0;
    int64_t stop = end > 0 ? end : running ? now : modify;
    return stop > start ? stop - start : 0;
}

int64_t ql_api_job_duration(const ql_job_t *j, int64_t now) {
    return duration(j->start_time, j->end_time, j->state == QL_RUNNING, j->modify_time, now);
}

static int steps_cb(const ql_step_t *s, void *arg) {
    uint32_t *done = arg;
    if (s->state == QL_SUCCEED || s->state == QL_WARNING || s->state == QL_SKIP)
        (*done)++;
    return 0;
}

int ql_api_job_steps(ql_txn_t *txn, const ql_job_t *j, int64_t now, ql_api_job_steps_t *out) {
    memset(out, 0, sizeof *out);
    /* The wait before the first step started, from the record alone: to that start, to now
     * while the job waits to start, else to the job's last change (ended or stopped first). */
    int64_t until = j->start_time > 0                                  ? j->start_time
                    : (j->state == QL_READY || j->state == QL_PENDING) ? now
                                                                       : j->modify_time;
    out->wait = until > j->create_time ? until - j->create_time : 0;
    /* Steps are read only when the record cannot tell: a succeeded job did all of them, one
     * that never started none. A page of finished jobs (the usual list) reads no step. */
    if (j->state == QL_SUCCEED) {
        out->done = j->n_steps;
        return 0;
    }
    if (j->start_time <= 0)
        return 0;
    int rc = ql_step_foreach(txn, &j->id, steps_cb, &out->done);
    return rc == QL_ENOTFOUND ? 0 : rc;
}

/* A fixed-point number v / 10^decimals (v >= 0, decimals 1 or 2) without printf: these are
 * written for every job of a list. */
static void jw_fixed(ql_api_jw_t *w, uint32_t v, int decimals) {
    char buf[16];
    int i = sizeof buf;
    for (int d = 0; d < decimals; d++, v /= 10)
        buf[--i] = (char)('0' + v % 10);
    buf[--i] = '.';
    do
        buf[--i] = (char)('0' + v % 10);
    while ((v /= 10) && i > 0);
    ql_api_jw_raw(w, buf + i, sizeof buf - (size_t)i);
}

/* Kylin's step_ratio: the share of steps done, 0.99 while a job whose steps are all done has
 * not succeeded; written with two decimals. */
static void step_ratio(ql_api_jw_t *w, const ql_job_t *j, const ql_api_job_steps_t *st) {
    uint32_t pct = j->n_steps ? (uint32_t)((uint64_t)st->done * 100 / j->n_steps) : 0;
    if (pct >= 100 && j->state != QL_SUCCEED)
        pct = 99;
    if (pct > 100)
        pct = 100;
    jw_fixed(w, pct, 2);
}

void ql_api_jw_job(ql_api_jw_t *w, const ql_job_t *j, const ql_api_job_steps_t *st, int64_t now) {
    ql_api_jw_open(w, '{');
    K(w, "id");
    ql_api_jw_id(w, &j->id);
    K(w, "job_name");
    ql_api_jw_str(w, j->type);
    K(w, "job_status");
    ql_api_jw_str(w, ql_job_display_status(j->state));
    K(w, "job_state");
    ql_api_jw_str(w, ql_state_name(j->state));
    K(w, "project");
    ql_api_jw_str(w, j->project);
    K(w, "target_model");
    ql_api_jw_id(w, &j->model);
    K(w, "target_subject");
    ql_api_jw_str(w, j->model_name);
    K(w, "target_segments");
    ql_api_jw_open(w, '[');
    if (!ql_id_is_zero(&j->segment))
        ql_api_jw_id(w, &j->segment);
    ql_api_jw_close(w, ']');
    K(w, "data_range_start");
    ql_api_jw_int(w, j->has_range ? j->range_start : 0);
    K(w, "data_range_end");
    ql_api_jw_int(w, j->has_range ? j->range_end : 0);
    K(w, "submitter");
    ql_api_jw_str(w, j->submitter);
    K(w, "priority");
    ql_api_jw_int(w, j->priority);
    K(w, "create_time");
    ql_api_jw_int(w, j->create_time);
    K(w, "last_modified");
    ql_api_jw_int(w, j->modify_time);
    K(w, "exec_start_time");
    ql_api_jw_int(w, j->start_time);
    K(w, "exec_end_time");
    ql_api_jw_int(w, j->end_time);
    int64_t dur = ql_api_job_duration(j, now);
    K(w, "duration");
    ql_api_jw_int(w, dur);
    K(w, "wait_time");
    ql_api_jw_int(w, st->wait);
    K(w, "total_duration");
    ql_api_jw_int(w, st->wait + dur);
    K(w, "step_ratio");
    step_ratio(w, j, st);
    /* Kylin's progress: the percentage of steps finished (one decimal). */
    K(w, "progress");
    jw_fixed(w, j->n_steps ? (uint32_t)((uint64_t)st->done * 1000 / j->n_steps) : 0, 1);
    K(w, "steps_count");
    ql_api_jw_int(w, j->n_steps);
    /* Kylin's flags that are constant here: a discard always leaves the model consistent (its
     * NEW segment goes, the sources stay), the subject is never shown as an error, steps run
     * in a chain, and no job is a snapshot job. */
    K(w, "discard_safety");
    ql_api_jw_bool(w, true);
    K(w, "target_subject_error");
    ql_api_jw_bool(w, false);
    K(w, "job_scheduler_mode");
    ql_api_jw_strn(w, "CHAIN", 5);
    K(w, "snapshot_data_range");
    ql_api_jw_null(w);
    K(w, "related_segment");
    if (ql_id_is_zero(&j->segment))
        ql_api_jw_strn(w, "", 0);
    else
        ql_api_jw_id(w, &j->segment);
    K(w, "yarn_queue");
    if (j->yarn_queue[0])
        ql_api_jw_str(w, j->yarn_queue);
    else
        ql_api_jw_null(w);
    /* The tag is stored as the JSON text the client sent (ql_job_t.tag). */
    K(w, "tag");
    if (j->tag[0])
        ql_api_jw_raw(w, j->tag, strlen(j->tag));
    else
        ql_api_jw_null(w);
    ql_api_jw_close(w, '}');
}

static const char *step_display(ql_state_t s) {
    if (s == QL_SKIP)
        return "SKIP";
    if (s == QL_WARNING)
        return "WARNING";
    return ql_job_display_status(s);
}

void ql_api_jw_step(ql_api_jw_t *w, const ql_step_t *s, int64_t now) {
    char id[QL_ID_STR_LEN + 8];
    ql_step_id_format(&s->job, s->seq, id);
    ql_api_jw_open(w, '{');
    K(w, "id");
    ql_api_jw_str(w, id);
    K(w, "name");
    ql_api_jw_str(w, s->name);
    K(w, "sequence_id");
    ql_api_jw_int(w, s->seq);
    K(w, "step_status");
    ql_api_jw_str(w, step_display(s->state));
    K(w, "step_state");
    ql_api_jw_str(w, ql_state_name(s->state));
    K(w, "kind");
    ql_api_jw_str(w, s->kind);
    K(w, "exec_start_time");
    ql_api_jw_int(w, s->start_time);
    K(w, "exec_end_time");
    ql_api_jw_int(w, s->end_time);
    K(w, "duration");
    ql_api_jw_int(w,
                  duration(s->start_time, s->end_time, s->state == QL_RUNNING, s->start_time, now));
    K(w, "attempts");
    ql_api_jw_int(w, s->attempts);
    K(w, "failed_msg");
    ql_api_jw_str(w, s->failed_msg);
    ql_api_jw_close(w, '}');
}

json_t *ql_api_jobs_answer(const char *const *types, const ql_id_t *ids, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *j = json_object();
        json_object_set_new(j, "job_name", json_string(types[i]));
        json_object_set_new(j, "job_id", ql_api_id_json(&ids[i]));
        json_array_append_new(arr, j);
    }
    json_t *o = json_object();
    json_object_set_new(o, "jobs", arr);
    return o;
}
