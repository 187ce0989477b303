/*
 * msgpack codecs of the records. Each record is a map keyed by field name with "v" first;
 * unknown pairs kept in `extra` are appended unchanged after the known fields.
 *
 * To add a field: write it in the encoder (raising the field count), read it in the decoder's
 * field function; older records simply lack it (the decoder leaves the zeroed default), and
 * older builds keep it as extra. Raise QL_RECORD_VERSION only for a change older builds cannot
 * read safely.
 */
#include "base/ql_error.h"
#include "codec.h"

#include <stdlib.h>
#include <string.h>

#define FINISH_ENCODE(pk, out, extra)                                                              \
    do {                                                                                           \
        if ((extra)->len && ql_buf_append((out), (extra)->data, (extra)->len))                     \
            return UV_ENOMEM;                                                                      \
    } while (0)

static int ql_buf_append(ql_buf_t *b, const void *data, size_t len) {
    msgpack_packer pk;
    ql_codec_packer_init(&pk, b);
    /* The packer's write callback is the buffer append; reuse it for raw bytes. */
    return pk.callback(pk.data, data, len);
}

static void begin(msgpack_packer *pk, ql_buf_t *out, size_t fields, const ql_extra_t *extra) {
    ql_codec_packer_init(pk, out);
    msgpack_pack_map(pk, fields + 1 + extra->count);
    ql_codec_i64(pk, "v", QL_RECORD_VERSION);
}

/* ---- project ---- */

int ql_project_encode(const ql_project_t *p, ql_buf_t *out) {
    msgpack_packer pk;
    begin(&pk, out, 6, &p->extra);
    ql_codec_str(&pk, "name", p->name);
    ql_codec_str(&pk, "description", p->description);
    ql_codec_strmap(&pk, "config", &p->config);
    ql_codec_bool(&pk, "auto_segment_build_enabled", p->auto_segment_build_enabled);
    ql_codec_i64(&pk, "create_time", p->create_time);
    ql_codec_i64(&pk, "modify_time", p->modify_time);
    FINISH_ENCODE(&pk, out, &p->extra);
    return 0;
}

static int project_field(const msgpack_object *k, const msgpack_object *v, void *arg) {
    ql_project_t *p = arg;
    if (ql_codec_key_is(k, "name"))
        return ql_codec_get_str(v, p->name, sizeof p->name) ?: 1;
    if (ql_codec_key_is(k, "description"))
        return ql_codec_get_strdup(v, &p->description) ?: 1;
    if (ql_codec_key_is(k, "config"))
        return ql_codec_get_strmap(v, &p->config) ?: 1;
    if (ql_codec_key_is(k, "auto_segment_build_enabled"))
        return ql_codec_get_bool(v, &p->auto_segment_build_enabled) ?: 1;
    if (ql_codec_key_is(k, "create_time"))
        return ql_codec_get_i64(v, &p->create_time) ?: 1;
    if (ql_codec_key_is(k, "modify_time"))
        return ql_codec_get_i64(v, &p->modify_time) ?: 1;
    return 0;
}

int ql_project_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags,
                        ql_project_t *out) {
    memset(out, 0, sizeof *out);
    int rc = ql_codec_decode(z, buf, len, project_field, out,
                             (flags & QL_DECODE_KEEP_EXTRA) ? &out->extra : NULL);
    if (rc)
        ql_project_free(out);
    return rc;
}

/* ---- model ---- */

static void encode_auto_build(msgpack_packer *pk, const ql_auto_build_t *a) {
    ql_codec_key(pk, "auto_segment_build");
    if (!a->present) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_map(pk, 5);
    ql_codec_bool(pk, "enabled", a->enabled);
    ql_codec_str(pk, "trigger_time", a->trigger_time);
    ql_codec_key(pk, "logical_date_offset_days");
    if (a->logical_date_offset_days == INT64_MIN)
        msgpack_pack_nil(pk);
    else
        msgpack_pack_int64(pk, a->logical_date_offset_days);
    ql_codec_str(pk, "data_range_start_time", a->data_range_start_time);
    ql_codec_str(pk, "data_range_end_time", a->data_range_end_time);
}

static int decode_auto_build(const msgpack_object *v, ql_auto_build_t *a) {
    memset(a, 0, sizeof *a);
    if (v->type == MSGPACK_OBJECT_NIL)
        return 0;
    if (v->type != MSGPACK_OBJECT_MAP)
        return QL_ECORRUPT;
    a->present = true;
    a->logical_date_offset_days = INT64_MIN;
    for (uint32_t i = 0; i < v->via.map.size; i++) {
        const msgpack_object *k = &v->via.map.ptr[i].key, *f = &v->via.map.ptr[i].val;
        int rc = 0;
        if (ql_codec_key_is(k, "enabled"))
            rc = ql_codec_get_bool(f, &a->enabled);
        else if (ql_codec_key_is(k, "trigger_time"))
            rc = ql_codec_get_str(f, a->trigger_time, sizeof a->trigger_time);
        else if (ql_codec_key_is(k, "logical_date_offset_days")) {
            if (f->type != MSGPACK_OBJECT_NIL)
                rc = ql_codec_get_i64(f, &a->logical_date_offset_days);
        } else if (ql_codec_key_is(k, "data_range_start_time"))
            rc = ql_codec_get_str(f, a->data_range_start_time, sizeof a->data_range_start_time);
        else if (ql_codec_key_is(k, "data_range_end_time"))
            rc = ql_codec_get_str(f, a->data_range_end_time, sizeof a->data_range_end_time);
        if (rc)
            return rc;
    }
    return 0;
}

int ql_model_encode(const ql_model_t *m, ql_buf_t *out) {
    msgpack_packer pk;
    begin(&pk, out, 14, &m->extra);
    ql_codec_id(&pk, "id", &m->id);
    ql_codec_str(&pk, "name", m->name);
    ql_codec_str(&pk, "project", m->project);
    ql_codec_str(&pk, "status", ql_model_status_name(m->status));
    ql_codec_str(&pk, "model_type", ql_model_type_name(m->type));
    ql_codec_bool(&pk, "partitioned", m->partitioned);
    ql_codec_str(&pk, "partition_date_column", m->partition_column);
    ql_codec_str(&pk, "partition_date_format", m->partition_format);
    ql_codec_str(&pk, "multi_partition_columns", m->multi_partition_columns);
    encode_auto_build(&pk, &m->auto_build);
    ql_codec_str(&pk, "job_template", m->job_template);
    ql_codec_strmap(&pk, "config", &m->config);
    ql_codec_i64(&pk, "create_time", m->create_time);
    ql_codec_i64(&pk, "modify_time", m->modify_time);
    FINISH_ENCODE(&pk, out, &m->extra);
    return 0;
}

static int model_field(const msgpack_object *k, const msgpack_object *v, void *arg) {
    ql_model_t *m = arg;
    char name[32];
    if (ql_codec_key_is(k, "id"))
        return ql_codec_get_id(v, &m->id) ?: 1;
    if (ql_codec_key_is(k, "name"))
        return ql_codec_get_str(v, m->name, sizeof m->name) ?: 1;
    if (ql_codec_key_is(k, "project"))
        return ql_codec_get_str(v, m->project, sizeof m->project) ?: 1;
    if (ql_codec_key_is(k, "status"))
        return (ql_codec_get_str(v, name, sizeof name) || ql_model_status_parse(name, &m->status))
                   ? QL_ECORRUPT
                   : 1;
    if (ql_codec_key_is(k, "model_type"))
        return (ql_codec_get_str(v, name, sizeof name) || ql_model_type_parse(name, &m->type))
                   ? QL_ECORRUPT
                   : 1;
    if (ql_codec_key_is(k, "partitioned"))
        return ql_codec_get_bool(v, &m->partitioned) ?: 1;
    if (ql_codec_key_is(k, "partition_date_column"))
        return ql_codec_get_str(v, m->partition_column, sizeof m->partition_column) ?: 1;
    if (ql_codec_key_is(k, "partition_date_format"))
        return ql_codec_get_str(v, m->partition_format, sizeof m->partition_format) ?: 1;
    if (ql_codec_key_is(k, "multi_partition_columns"))
        return ql_codec_get_strdup(v, &m->multi_partition_columns) ?: 1;
    if (ql_codec_key_is(k, "auto_segment_build"))
        return decode_auto_build(v, &m->auto_build) ?: 1;
    if (ql_codec_key_is(k, "job_template"))
        return ql_codec_get_str(v, m->job_template, sizeof m->job_template) ?: 1;
    if (ql_codec_key_is(k, "config"))
        return ql_codec_get_strmap(v, &m->config) ?: 1;
    if (ql_codec_key_is(k, "create_time"))
        return ql_codec_get_i64(v, &m->create_time) ?: 1;
    if (ql_codec_key_is(k, "modify_time"))
        return ql_codec_get_i64(v, &m->modify_time) ?: 1;
    return 0;
}

int ql_model_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags,
                      ql_model_t *out) {
    memset(out, 0, sizeof *out);
    int rc = ql_codec_decode(z, buf, len, model_field, out,
                             (flags & QL_DECODE_KEEP_EXTRA) ? &out->extra : NULL);
    if (rc)
        ql_model_free(out);
    return rc;
}

/* ---- segment ---- */

int ql_segment_encode(const ql_segment_t *s, ql_buf_t *out) {
    msgpack_packer pk;
    begin(&pk, out, 9, &s->extra);
    ql_codec_id(&pk, "id", &s->id);
    ql_codec_id(&pk, "model", &s->model);
    ql_codec_i64(&pk, "start", s->start);
    ql_codec_i64(&pk, "end", s->end);
    ql_codec_str(&pk, "status", ql_seg_status_name(s->status));
    ql_codec_i64(&pk, "create_time", s->create_time);
    ql_codec_i64(&pk, "last_build_time", s->last_build_time);
    ql_codec_id(&pk, "job", &s->job);
    ql_codec_i64(&pk, "layer", s->layer);
    FINISH_ENCODE(&pk, out, &s->extra);
    return 0;
}

static int segment_field(const msgpack_object *k, const msgpack_object *v, void *arg) {
    ql_segment_t *s = arg;
    char name[16];
    int64_t layer;
    if (ql_codec_key_is(k, "id"))
        return ql_codec_get_id(v, &s->id) ?: 1;
    if (ql_codec_key_is(k, "model"))
        return ql_codec_get_id(v, &s->model) ?: 1;
    if (ql_codec_key_is(k, "start"))
        return ql_codec_get_i64(v, &s->start) ?: 1;
    if (ql_codec_key_is(k, "end"))
        return ql_codec_get_i64(v, &s->end) ?: 1;
    if (ql_codec_key_is(k, "status"))
        return (ql_codec_get_str(v, name, sizeof name) || ql_seg_status_parse(name, &s->status))
                   ? QL_ECORRUPT
                   : 1;
    if (ql_codec_key_is(k, "create_time"))
        return ql_codec_get_i64(v, &s->create_time) ?: 1;
    if (ql_codec_key_is(k, "last_build_time"))
        return ql_codec_get_i64(v, &s->last_build_time) ?: 1;
    if (ql_codec_key_is(k, "job"))
        return ql_codec_get_id(v, &s->job) ?: 1;
    if (ql_codec_key_is(k, "layer")) {
        if (ql_codec_get_i64(v, &layer) || layer < 0 || layer > 1)
            return QL_ECORRUPT;
        s->layer = (uint8_t)layer;
        return 1;
    }
    return 0;
}

int ql_segment_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags,
                        ql_segment_t *out) {
    memset(out, 0, sizeof *out);
    int rc = ql_codec_decode(z, buf, len, segment_field, out,
                             (flags & QL_DECODE_KEEP_EXTRA) ? &out->extra : NULL);
    if (rc)
        ql_segment_free(out);
    return rc;
}

/* ---- job ---- */

int ql_job_encode(const ql_job_t *j, ql_buf_t *out) {
    msgpack_packer pk;
    /* yarn_queue and tag only when given: a job without them encodes as before they existed. */
    bool yq = j->yarn_queue[0], tag = j->tag[0];
    begin(&pk, out, 20 + (size_t)yq + (size_t)tag, &j->extra);
    ql_codec_id(&pk, "id", &j->id);
    ql_codec_str(&pk, "project", j->project);
    ql_codec_id(&pk, "model", &j->model);
    ql_codec_str(&pk, "model_name", j->model_name);
    ql_codec_str(&pk, "type", j->type);
    ql_codec_str(&pk, "state", ql_state_name(j->state));
    ql_codec_i64(&pk, "priority", j->priority);
    ql_codec_str(&pk, "submitter", j->submitter);
    ql_codec_id(&pk, "segment", &j->segment);
    ql_codec_bin(&pk, "sources", j->sources, j->n_sources * sizeof *j->sources);
    ql_codec_bool(&pk, "has_range", j->has_range);
    ql_codec_i64(&pk, "range_start", j->range_start);
    ql_codec_i64(&pk, "range_end", j->range_end);
    ql_codec_i64(&pk, "n_steps", j->n_steps);
    ql_codec_i64(&pk, "create_time", j->create_time);
    ql_codec_i64(&pk, "start_time", j->start_time);
    ql_codec_i64(&pk, "end_time", j->end_time);
    ql_codec_i64(&pk, "modify_time", j->modify_time);
    ql_codec_u64(&pk, "fence", j->fence);
    ql_codec_bin(&pk, "params", j->params, j->params_len);
    if (yq)
        ql_codec_str(&pk, "yarn_queue", j->yarn_queue);
    if (tag)
        ql_codec_str(&pk, "tag", j->tag);
    FINISH_ENCODE(&pk, out, &j->extra);
    return 0;
}

static int job_field(const msgpack_object *k, const msgpack_object *v, void *arg) {
    ql_job_t *j = arg;
    char name[16];
    int64_t n;
    if (ql_codec_key_is(k, "id"))
        return ql_codec_get_id(v, &j->id) ?: 1;
    if (ql_codec_key_is(k, "project"))
        return ql_codec_get_str(v, j->project, sizeof j->project) ?: 1;
    if (ql_codec_key_is(k, "model"))
        return ql_codec_get_id(v, &j->model) ?: 1;
    if (ql_codec_key_is(k, "model_name"))
        return ql_codec_get_str(v, j->model_name, sizeof j->model_name) ?: 1;
    if (ql_codec_key_is(k, "type"))
        return ql_codec_get_str(v, j->type, sizeof j->type) ?: 1;
    if (ql_codec_key_is(k, "state"))
        return (ql_codec_get_str(v, name, sizeof name) || ql_state_parse(name, &j->state))
                   ? QL_ECORRUPT
                   : 1;
    if (ql_codec_key_is(k, "priority")) {
        if (ql_codec_get_i64(v, &n) || n < QL_PRIORITY_MIN || n > QL_PRIORITY_MAX)
            return QL_ECORRUPT;
        j->priority = (int)n;
        return 1;
    }
    if (ql_codec_key_is(k, "submitter"))
        return ql_codec_get_str(v, j->submitter, sizeof j->submitter) ?: 1;
    if (ql_codec_key_is(k, "segment"))
        return ql_codec_get_id(v, &j->segment) ?: 1;
    if (ql_codec_key_is(k, "sources")) {
        size_t len;
        if (ql_codec_get_bin(v, (uint8_t **)&j->sources, &len) || len % sizeof(ql_id_t))
            return QL_ECORRUPT;
        j->n_sources = (uint32_t)(len / sizeof(ql_id_t));
        return 1;
    }
    if (ql_codec_key_is(k, "has_range"))
        return ql_codec_get_bool(v, &j->has_range) ?: 1;
    if (ql_codec_key_is(k, "range_start"))
        return ql_codec_get_i64(v, &j->range_start) ?: 1;
    if (ql_codec_key_is(k, "range_end"))
        return ql_codec_get_i64(v, &j->range_end) ?: 1;
    if (ql_codec_key_is(k, "n_steps")) {
        if (ql_codec_get_i64(v, &n) || n < 0 || n > QL_JOB_STEPS_MAX)
            return QL_ECORRUPT;
        j->n_steps = (uint32_t)n;
        return 1;
    }
    if (ql_codec_key_is(k, "create_time"))
        return ql_codec_get_i64(v, &j->create_time) ?: 1;
    if (ql_codec_key_is(k, "start_time"))
        return ql_codec_get_i64(v, &j->start_time) ?: 1;
    if (ql_codec_key_is(k, "end_time"))
        return ql_codec_get_i64(v, &j->end_time) ?: 1;
    if (ql_codec_key_is(k, "modify_time"))
        return ql_codec_get_i64(v, &j->modify_time) ?: 1;
    if (ql_codec_key_is(k, "fence")) {
        if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return QL_ECORRUPT;
        j->fence = v->via.u64;
        return 1;
    }
    if (ql_codec_key_is(k, "params"))
        return ql_codec_get_bin(v, (uint8_t **)&j->params, &j->params_len) ?: 1;
    if (ql_codec_key_is(k, "yarn_queue"))
        return ql_codec_get_str(v, j->yarn_queue, sizeof j->yarn_queue) ?: 1;
    if (ql_codec_key_is(k, "tag"))
        return ql_codec_get_str(v, j->tag, sizeof j->tag) ?: 1;
    return 0;
}

int ql_job_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags, ql_job_t *out) {
    memset(out, 0, sizeof *out);
    int rc = ql_codec_decode(z, buf, len, job_field, out,
                             (flags & QL_DECODE_KEEP_EXTRA) ? &out->extra : NULL);
    if (rc)
        ql_job_free(out);
    return rc;
}

/* ---- step ---- */

int ql_step_encode(const ql_step_t *s, ql_buf_t *out) {
    msgpack_packer pk;
    /* The markers only while a try runs: a million finished steps should not carry them. */
    bool marked = s->token[0] != '\0', grouped = s->pg_start != 0 || s->boot_id[0] != '\0';
    /* Where it ran: only once a try has run (and absent from records of older builds). */
    bool placed = s->server_id[0] != '\0', addressed = s->server_addr[0] != '\0';
    begin(&pk, out, 12 + marked + 2 * grouped + placed + addressed, &s->extra);
    ql_codec_id(&pk, "job", &s->job);
    ql_codec_i64(&pk, "seq", s->seq);
    ql_codec_str(&pk, "name", s->name);
    ql_codec_str(&pk, "kind", s->kind);
    ql_codec_str(&pk, "state", ql_state_name(s->state));
    ql_codec_i64(&pk, "start_time", s->start_time);
    ql_codec_i64(&pk, "end_time", s->end_time);
    ql_codec_i64(&pk, "attempts", s->attempts);
    ql_codec_i64(&pk, "retry_at", s->retry_at);
    ql_codec_i64(&pk, "pgid", s->pgid);
    if (marked)
        ql_codec_str(&pk, "token", s->token);
    if (grouped) {
        ql_codec_i64(&pk, "pg_start", (int64_t)s->pg_start);
        ql_codec_str(&pk, "boot_id", s->boot_id);
    }
    if (placed)
        ql_codec_str(&pk, "server_id", s->server_id);
    if (addressed)
        ql_codec_str(&pk, "server_addr", s->server_addr);
    ql_codec_str(&pk, "failed_msg", s->failed_msg);
    ql_codec_bin(&pk, "def", s->def, s->def_len);
    FINISH_ENCODE(&pk, out, &s->extra);
    return 0;
}

static int step_field(const msgpack_object *k, const msgpack_object *v, void *arg) {
    ql_step_t *s = arg;
    char name[16];
    int64_t n;
    if (ql_codec_key_is(k, "job"))
        return ql_codec_get_id(v, &s->job) ?: 1;
    if (ql_codec_key_is(k, "seq")) {
        if (ql_codec_get_i64(v, &n) || n < 0 || n >= QL_JOB_STEPS_MAX)
            return QL_ECORRUPT;
        s->seq = (uint32_t)n;
        return 1;
    }
    if (ql_codec_key_is(k, "name"))
        return ql_codec_get_str(v, s->name, sizeof s->name) ?: 1;
    if (ql_codec_key_is(k, "kind"))
        return ql_codec_get_str(v, s->kind, sizeof s->kind) ?: 1;
    if (ql_codec_key_is(k, "state"))
        return (ql_codec_get_str(v, name, sizeof name) || ql_state_parse(name, &s->state))
                   ? QL_ECORRUPT
                   : 1;
    if (ql_codec_key_is(k, "start_time"))
        return ql_codec_get_i64(v, &s->start_time) ?: 1;
    if (ql_codec_key_is(k, "end_time"))
        return ql_codec_get_i64(v, &s->end_time) ?: 1;
    if (ql_codec_key_is(k, "attempts")) {
        if (ql_codec_get_i64(v, &n) || n < 0 || n > UINT32_MAX)
            return QL_ECORRUPT;
        s->attempts = (uint32_t)n;
        return 1;
    }
    if (ql_codec_key_is(k, "retry_at"))
        return ql_codec_get_i64(v, &s->retry_at) ?: 1;
    if (ql_codec_key_is(k, "pgid")) {
        if (ql_codec_get_i64(v, &n) || n < 0 || n > INT32_MAX)
            return QL_ECORRUPT;
        s->pgid = (int32_t)n;
        return 1;
    }
    if (ql_codec_key_is(k, "token"))
        return ql_codec_get_str(v, s->token, sizeof s->token) ?: 1;
    if (ql_codec_key_is(k, "pg_start")) {
        if (ql_codec_get_i64(v, &n) || n < 0)
            return QL_ECORRUPT;
        s->pg_start = (uint64_t)n;
        return 1;
    }
    if (ql_codec_key_is(k, "boot_id"))
        return ql_codec_get_str(v, s->boot_id, sizeof s->boot_id) ?: 1;
    if (ql_codec_key_is(k, "server_id"))
        return ql_codec_get_str(v, s->server_id, sizeof s->server_id) ?: 1;
    if (ql_codec_key_is(k, "server_addr"))
        return ql_codec_get_str(v, s->server_addr, sizeof s->server_addr) ?: 1;
    if (ql_codec_key_is(k, "failed_msg"))
        return ql_codec_get_strdup(v, &s->failed_msg) ?: 1;
    if (ql_codec_key_is(k, "def"))
        return ql_codec_get_bin(v, &s->def, &s->def_len) ?: 1;
    return 0;
}

int ql_step_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags, ql_step_t *out) {
    memset(out, 0, sizeof *out);
    int rc = ql_codec_decode(z, buf, len, step_field, out,
                             (flags & QL_DECODE_KEEP_EXTRA) ? &out->extra : NULL);
    if (rc)
        ql_step_free(out);
    return rc;
}

/* Public decoders with a zone of their own (tests, tools). */
#define PUBLIC_DECODER(type, name)                                                                 \
    int ql_##name##_decode(const void *buf, size_t len, unsigned flags, type *out) {               \
        msgpack_zone z;                                                                            \
        if (!msgpack_zone_init(&z, 2048))                                                          \
            return UV_ENOMEM;                                                                      \
        int rc = ql_##name##_decode_z(&z, buf, len, flags, out);                                   \
        msgpack_zone_destroy(&z);                                                                  \
        return rc;                                                                                 \
    }

PUBLIC_DECODER(ql_project_t, project)
PUBLIC_DECODER(ql_model_t, model)
PUBLIC_DECODER(ql_segment_t, segment)
PUBLIC_DECODER(ql_job_t, job)
PUBLIC_DECODER(ql_step_t, step)

int ql_msgpack_check_counts(const void *buf, size_t len) {
    return ql_codec_check_counts(buf, len);
}
