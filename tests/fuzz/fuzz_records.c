/*
 * libFuzzer harness for the msgpack record decoders (storage/record_codecs.c, codec.c): every
 * input is decoded as each record kind (project, model, segment, job, step), the way the store
 * decodes an LMDB value, which a corrupt or foreign file may hold.
 *
 * Besides crashes and sanitizer reports it checks the contract the store relies on:
 * - a refusal is QL_ECORRUPT, QL_EVERSION or UV_ENOMEM, and leaves the record zeroed;
 * - decoding with and without QL_DECODE_KEEP_EXTRA accepts and refuses the same inputs;
 * - an accepted record survives the stored form: encode -> decode succeeds, the decoded record
 *   equals the first field by field, and encoding it again gives the same bytes (so a rewrite
 *   by this build neither loses nor changes anything);
 * - a deep copy encodes to the same bytes.
 *
 * Build with -DQL_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt); seeds in
 * tests/fuzz/corpus/records, made by fuzz_records_seeds (real records of every kind, encoded by the
 * encoders).
 */
#include "base/ql_error.h"
#include "storage/codec.h"
#include "storage/ql_records.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One zone reused across decodes, as the store keeps one per transaction. */
static msgpack_zone fuzz_zone;

static bool is_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

static void check_refusal(int rc, const void *rec, size_t size) {
    if (rc != QL_ECORRUPT && rc != QL_EVERSION && rc != UV_ENOMEM)
        __builtin_trap();
    if (!is_zero(rec, size))
        __builtin_trap();
}

static bool str_eq(const char *a, const char *b) {
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool bytes_eq(const void *a, size_t alen, const void *b, size_t blen) {
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool strmap_eq(const ql_strmap_t *a, const ql_strmap_t *b) {
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!str_eq(a->items[i].key, b->items[i].key) ||
            !str_eq(a->items[i].value, b->items[i].value))
            return false;
    return true;
}

static bool extra_eq(const ql_extra_t *a, const ql_extra_t *b) {
    return a->count == b->count && bytes_eq(a->data, a->len, b->data, b->len);
}

/* Fixed-size string fields. A stored string holding a NUL is corrupt, so strcmp compares all
 * of what was decoded (bytes past the NUL may be left from an earlier duplicate key). */
#define FIELD_EQ(a, b, f) (strcmp((a)->f, (b)->f) == 0)

static bool project_eq(const ql_project_t *a, const ql_project_t *b) {
    return FIELD_EQ(a, b, name) && str_eq(a->description, b->description) &&
           strmap_eq(&a->config, &b->config) &&
           a->auto_segment_build_enabled == b->auto_segment_build_enabled &&
           a->create_time == b->create_time && a->modify_time == b->modify_time &&
           extra_eq(&a->extra, &b->extra);
}

static bool model_eq(const ql_model_t *a, const ql_model_t *b) {
    const ql_auto_build_t *x = &a->auto_build, *y = &b->auto_build;
    return ql_id_eq(&a->id, &b->id) && FIELD_EQ(a, b, name) && FIELD_EQ(a, b, project) &&
           a->status == b->status && a->type == b->type && a->partitioned == b->partitioned &&
           FIELD_EQ(a, b, partition_column) && FIELD_EQ(a, b, partition_format) &&
           str_eq(a->multi_partition_columns, b->multi_partition_columns) &&
           x->present == y->present && x->enabled == y->enabled && FIELD_EQ(x, y, trigger_time) &&
           x->logical_date_offset_days == y->logical_date_offset_days &&
           FIELD_EQ(x, y, data_range_start_time) && FIELD_EQ(x, y, data_range_end_time) &&
           FIELD_EQ(a, b, job_template) && strmap_eq(&a->config, &b->config) &&
           a->create_time == b->create_time && a->modify_time == b->modify_time &&
           extra_eq(&a->extra, &b->extra);
}

static bool segment_eq(const ql_segment_t *a, const ql_segment_t *b) {
    return ql_id_eq(&a->id, &b->id) && ql_id_eq(&a->model, &b->model) && a->start == b->start &&
           a->end == b->end && a->status == b->status && a->create_time == b->create_time &&
           a->last_build_time == b->last_build_time && ql_id_eq(&a->job, &b->job) &&
           a->layer == b->layer && extra_eq(&a->extra, &b->extra);
}

static bool job_eq(const ql_job_t *a, const ql_job_t *b) {
    return ql_id_eq(&a->id, &b->id) && FIELD_EQ(a, b, project) && ql_id_eq(&a->model, &b->model) &&
           FIELD_EQ(a, b, model_name) && FIELD_EQ(a, b, type) && a->state == b->state &&
           a->priority == b->priority && FIELD_EQ(a, b, submitter) &&
           ql_id_eq(&a->segment, &b->segment) &&
           bytes_eq(a->sources, a->n_sources * sizeof(ql_id_t), b->sources,
                    b->n_sources * sizeof(ql_id_t)) &&
           a->has_range == b->has_range && a->range_start == b->range_start &&
           a->range_end == b->range_end && a->n_steps == b->n_steps &&
           a->create_time == b->create_time && a->start_time == b->start_time &&
           a->end_time == b->end_time && a->modify_time == b->modify_time && a->fence == b->fence &&
           bytes_eq(a->params, a->params_len, b->params, b->params_len) &&
           extra_eq(&a->extra, &b->extra);
}

static bool step_eq(const ql_step_t *a, const ql_step_t *b) {
    return ql_id_eq(&a->job, &b->job) && a->seq == b->seq && FIELD_EQ(a, b, name) &&
           FIELD_EQ(a, b, kind) && a->state == b->state && a->start_time == b->start_time &&
           a->end_time == b->end_time && a->attempts == b->attempts && a->retry_at == b->retry_at &&
           a->pgid == b->pgid && str_eq(a->failed_msg, b->failed_msg) &&
           bytes_eq(a->def, a->def_len, b->def, b->def_len) && extra_eq(&a->extra, &b->extra);
}

/*
 * The checks for one record kind T (prefix ql_<name>_): decode data twice (with and without
 * the extra fields), and when that succeeds, round-trip the record through its encoding and a
 * deep copy. A macro, so the five kinds share one body with their own types and functions.
 */
#define FUZZ_KIND(T, name, eq, copyfn, data, size)                                                 \
    do {                                                                                           \
        T rec, plain, back, copy;                                                                  \
        int rc = ql_##name##_decode(data, size, QL_DECODE_KEEP_EXTRA, &rec);                       \
        int rc_plain = ql_##name##_decode_z(&fuzz_zone, data, size, 0, &plain);                    \
        if ((rc == 0) != (rc_plain == 0))                                                          \
            __builtin_trap();                                                                      \
        if (rc) {                                                                                  \
            check_refusal(rc, &rec, sizeof rec);                                                   \
            check_refusal(rc_plain, &plain, sizeof plain);                                         \
            break;                                                                                 \
        }                                                                                          \
        ql_##name##_free(&plain);                                                                  \
        ql_buf_t b1 = {0}, b2 = {0}, b3 = {0};                                                     \
        if (ql_##name##_encode(&rec, &b1))                                                         \
            __builtin_trap();                                                                      \
        if (ql_##name##_decode_z(&fuzz_zone, b1.data, b1.len, QL_DECODE_KEEP_EXTRA, &back) ||      \
            !eq(&rec, &back))                                                                      \
            __builtin_trap();                                                                      \
        if (ql_##name##_encode(&back, &b2) || !bytes_eq(b1.data, b1.len, b2.data, b2.len))         \
            __builtin_trap();                                                                      \
        if (copyfn(&copy, &rec) == 0) {                                                            \
            if (ql_##name##_encode(&copy, &b3) || !bytes_eq(b1.data, b1.len, b3.data, b3.len))     \
                __builtin_trap();                                                                  \
            ql_##name##_free(&copy);                                                               \
        }                                                                                          \
        ql_buf_free(&b1);                                                                          \
        ql_buf_free(&b2);                                                                          \
        ql_buf_free(&b3);                                                                          \
        ql_##name##_free(&back);                                                                   \
        ql_##name##_free(&rec);                                                                    \
    } while (0)

/* Segments have no copy function (they own nothing but extra); a shallow one plus the extra. */
static int segment_copy(ql_segment_t *dst, const ql_segment_t *src) {
    *dst = *src;
    memset(&dst->extra, 0, sizeof dst->extra);
    if (!src->extra.len)
        return 0;
    if (!(dst->extra.data = malloc(src->extra.len)))
        return UV_ENOMEM;
    memcpy(dst->extra.data, src->extra.data, src->extra.len);
    dst->extra.len = src->extra.len;
    dst->extra.count = src->extra.count;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool ready;
    if (!ready) {
        if (!msgpack_zone_init(&fuzz_zone, 2048))
            __builtin_trap();
        ready = true;
    }
    FUZZ_KIND(ql_project_t, project, project_eq, ql_project_copy, data, size);
    FUZZ_KIND(ql_model_t, model, model_eq, ql_model_copy, data, size);
    FUZZ_KIND(ql_segment_t, segment, segment_eq, segment_copy, data, size);
    FUZZ_KIND(ql_job_t, job, job_eq, ql_job_copy, data, size);
    FUZZ_KIND(ql_step_t, step, step_eq, ql_step_copy, data, size);
    return 0;
}
