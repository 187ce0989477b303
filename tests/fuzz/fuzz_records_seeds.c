/*
 * Writes the seed corpus of fuzz_records: real records of every kind, encoded by the store's
 * own encoders, so the fuzzer starts from the exact bytes the store writes (every field set,
 * fields left at their defaults, nil strings, unknown fields kept in extra, the version edge).
 *
 *   fuzz_records_seeds DIR     writes seed_<kind>_<what>.msgpack files into DIR (which exists)
 *
 * The output is committed in tests/fuzz/corpus/records; rerun this after a record gains a
 * field (scripts/fuzz.sh seeds records does it) so the seeds carry the new field too.
 */
#include "storage/codec.h"
#include "storage/ql_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *out_dir;

static void write_seed(const char *kind, const char *what, const ql_buf_t *b) {
    char path[4096];
    snprintf(path, sizeof path, "%s/seed_%s_%s.msgpack", out_dir, kind, what);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static ql_id_t make_id(uint8_t seed) {
    ql_id_t id;
    for (int i = 0; i < 16; i++)
        id.b[i] = (uint8_t)(seed * 17 + i * 31 + 1);
    return id;
}

/* Two unknown fields, as a newer build would have stored them: a string and a nested map. */
static void make_extra(ql_extra_t *e) {
    ql_buf_t b = {0};
    msgpack_packer pk;
    ql_codec_packer_init(&pk, &b);
    ql_codec_str(&pk, "future_field", "kept as is");
    ql_codec_key(&pk, "future_map");
    msgpack_pack_map(&pk, 2);
    ql_codec_i64(&pk, "n", -7);
    ql_codec_bool(&pk, "on", true);
    e->data = b.data;
    e->len = b.len;
    e->count = 2;
}

/* A map with one field and the given version: the decoders' version check. */
static void write_version(int64_t version, const char *what) {
    ql_buf_t b = {0};
    msgpack_packer pk;
    ql_codec_packer_init(&pk, &b);
    msgpack_pack_map(&pk, 2);
    ql_codec_i64(&pk, "v", version);
    ql_codec_str(&pk, "name", "p1");
    write_seed("any", what, &b);
    ql_buf_free(&b);
}

static void projects(void) {
    ql_buf_t b = {0};
    ql_project_t p = {0};
    if (ql_project_encode(&p, &b))
        exit(1);
    write_seed("project", "empty", &b);

    strcpy(p.name, "sales_analytics");
    p.description = strdup("Sales, all regions");
    ql_strmap_set(&p.config, "kylin.web.timezone", "Asia/Shanghai");
    ql_strmap_set(&p.config, "kylin.job.max-concurrent-jobs", "4");
    p.auto_segment_build_enabled = true;
    p.create_time = 1788192000000;
    p.modify_time = -42;
    make_extra(&p.extra);
    ql_buf_reset(&b);
    if (ql_project_encode(&p, &b))
        exit(1);
    write_seed("project", "full", &b);
    ql_project_free(&p);
    ql_buf_free(&b);
}

static void models(void) {
    ql_buf_t b = {0};
    ql_model_t m = {0};
    m.id = make_id(1);
    strcpy(m.name, "full_load");
    strcpy(m.project, "p1");
    if (ql_model_encode(&m, &b))
        exit(1);
    write_seed("model", "full_load", &b);

    strcpy(m.name, "orders_model");
    m.status = QL_MODEL_BROKEN;
    m.type = QL_MODEL_STREAMING;
    m.partitioned = true;
    strcpy(m.partition_column, "ORDERS.ORDER_DATE");
    strcpy(m.partition_format, "yyyy-MM-dd HH:mm:ss");
    m.multi_partition_columns = strdup("REGION,CHANNEL");
    m.auto_build.present = true;
    m.auto_build.enabled = true;
    strcpy(m.auto_build.trigger_time, "01:30:00");
    m.auto_build.logical_date_offset_days = -2;
    strcpy(m.auto_build.data_range_start_time, "00:00:00");
    strcpy(m.auto_build.data_range_end_time, "23:59:59");
    strcpy(m.job_template, "nightly");
    ql_strmap_set(&m.config, "kylin.job.retry", "2");
    m.create_time = 1;
    m.modify_time = 2;
    make_extra(&m.extra);
    ql_buf_reset(&b);
    if (ql_model_encode(&m, &b))
        exit(1);
    write_seed("model", "full", &b);

    /* A stored offset that was not an integer is written back as nil. */
    m.auto_build.logical_date_offset_days = INT64_MIN;
    m.status = QL_MODEL_OFFLINE;
    ql_extra_free(&m.extra);
    ql_buf_reset(&b);
    if (ql_model_encode(&m, &b))
        exit(1);
    write_seed("model", "nil_offset", &b);
    ql_model_free(&m);
    ql_buf_free(&b);
}

static void segments(void) {
    ql_buf_t b = {0};
    ql_segment_t s = {0};
    s.id = make_id(2);
    s.model = make_id(1);
    s.start = 1788192000000;
    s.end = 1788278400000;
    s.status = QL_SEG_NEW;
    s.create_time = 1788278500000;
    s.job = make_id(3);
    if (ql_segment_encode(&s, &b))
        exit(1);
    write_seed("segment", "new", &b);

    s.status = QL_SEG_WARNING;
    s.end = QL_RANGE_FULL_END;
    s.start = 0;
    s.layer = 1;
    s.last_build_time = 1788278600000;
    make_extra(&s.extra);
    ql_buf_reset(&b);
    if (ql_segment_encode(&s, &b))
        exit(1);
    write_seed("segment", "full", &b);
    ql_segment_free(&s);
    ql_buf_free(&b);
}

static void jobs(void) {
    ql_buf_t b = {0};
    ql_job_t j = {0};
    j.id = make_id(3);
    strcpy(j.project, "p1");
    j.model = make_id(1);
    strcpy(j.model_name, "orders_model");
    strcpy(j.type, "INC_BUILD");
    j.state = QL_RUNNING;
    j.priority = QL_PRIORITY_DEFAULT;
    strcpy(j.submitter, "System");
    j.segment = make_id(2);
    j.has_range = true;
    j.range_start = 1788192000000;
    j.range_end = 1788278400000;
    j.n_steps = 3;
    j.create_time = 1788278500000;
    j.start_time = 1788278501000;
    j.modify_time = 1788278502000;
    j.fence = 7;
    if (ql_job_encode(&j, &b))
        exit(1);
    write_seed("job", "build", &b);

    /* A merge: its sources; an ad-hoc job's encoded parameters; the largest fence. */
    strcpy(j.type, "INDEX_MERGE");
    j.state = QL_SUCCEED;
    j.priority = QL_PRIORITY_MIN;
    j.n_sources = 2;
    j.sources = malloc(2 * sizeof *j.sources);
    j.sources[0] = make_id(4);
    j.sources[1] = make_id(5);
    j.params = strdup("\x81\xa3key\xa5value");
    j.params_len = strlen(j.params);
    j.end_time = 1788278900000;
    j.fence = UINT64_MAX;
    make_extra(&j.extra);
    ql_buf_reset(&b);
    if (ql_job_encode(&j, &b))
        exit(1);
    write_seed("job", "merge_full", &b);
    ql_job_free(&j);
    ql_buf_free(&b);
}

static void steps(void) {
    ql_buf_t b = {0};
    ql_step_t s = {0};
    s.job = make_id(3);
    s.seq = 0;
    strcpy(s.name, "build");
    strcpy(s.kind, "shell");
    s.state = QL_PENDING;
    if (ql_step_encode(&s, &b))
        exit(1);
    write_seed("step", "pending", &b);

    s.seq = 99;
    s.state = QL_ERROR;
    s.start_time = 1788278501000;
    s.end_time = 1788278509000;
    s.attempts = 3;
    s.retry_at = 1788278600000;
    s.pgid = 4242;
    s.failed_msg = strdup("exit status 1");
    s.def_len = 5;
    s.def = malloc(s.def_len);
    memcpy(s.def, "\x92\xa2sh\xc0", s.def_len);
    make_extra(&s.extra);
    ql_buf_reset(&b);
    if (ql_step_encode(&s, &b))
        exit(1);
    write_seed("step", "failed_full", &b);
    ql_step_free(&s);
    ql_buf_free(&b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    projects();
    models();
    segments();
    jobs();
    steps();
    write_version(QL_RECORD_VERSION, "current_version");
    write_version(QL_RECORD_VERSION + 1, "newer_version");
    return 0;
}
