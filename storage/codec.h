/*
 * Internal msgpack helpers shared by the record codecs (records.c) and the store (not public).
 */
#ifndef QL_CODEC_H
#define QL_CODEC_H

#include "storage/ql_records.h"

#include <msgpack.h>
#include <string.h>
#include <uv.h>

/* A packer that appends to a ql_buf_t. */
void ql_codec_packer_init(msgpack_packer *pk, ql_buf_t *buf);

void ql_codec_key(msgpack_packer *pk, const char *key);
void ql_codec_str(msgpack_packer *pk, const char *key, const char *value);
void ql_codec_i64(msgpack_packer *pk, const char *key, int64_t value);
void ql_codec_u64(msgpack_packer *pk, const char *key, uint64_t value);
void ql_codec_bool(msgpack_packer *pk, const char *key, bool value);
void ql_codec_bin(msgpack_packer *pk, const char *key, const void *data, size_t len);
void ql_codec_id(msgpack_packer *pk, const char *key, const ql_id_t *id);
void ql_codec_strmap(msgpack_packer *pk, const char *key, const ql_strmap_t *m);

/* 0 when buf holds one complete msgpack value whose arrays and maps claim no more elements
 * than bytes remain, else QL_ECORRUPT; ql_codec_decode checks it before msgpack_unpack, whose
 * allocation follows those counts. */
int ql_codec_check_counts(const void *buf, size_t len);

/* Calls field(key, value, arg) for every pair of the record map in buf, decoding with zone
 * (cleared first; reuse one zone across calls to avoid allocating). field returns 1 when it
 * knew the key, 0 to have the pair kept in extra (when extra is not NULL), or a negative
 * error. Checks the format version under "v". */
typedef int (*ql_codec_field_fn)(const msgpack_object *key, const msgpack_object *val, void *arg);
int ql_codec_decode(msgpack_zone *zone, const void *buf, size_t len, ql_codec_field_fn field,
                    void *arg, ql_extra_t *extra);

/* A NUL-terminated copy of a msgpack string's bytes (which are not NUL-terminated, so strndup,
 * which may look for a NUL past them, does not fit); NULL when out of memory. */
char *ql_codec_strdup(const msgpack_object *v);

/* Whether a map key is the string name. Inline: every caller passes a literal, so strlen folds
 * to a constant and decoding a record costs no strlen per field and candidate name. */
static inline bool ql_codec_key_is(const msgpack_object *key, const char *name) {
    size_t n = strlen(name);
    return key->type == MSGPACK_OBJECT_STR && key->via.str.size == n &&
           memcmp(key->via.str.ptr, name, n) == 0;
}
int ql_codec_get_str(const msgpack_object *v, char *dst, size_t cap);
int ql_codec_get_strdup(const msgpack_object *v, char **dst);
int ql_codec_get_i64(const msgpack_object *v, int64_t *dst);
int ql_codec_get_bool(const msgpack_object *v, bool *dst);
int ql_codec_get_id(const msgpack_object *v, ql_id_t *dst);
int ql_codec_get_bin(const msgpack_object *v, uint8_t **dst, size_t *len);
int ql_codec_get_strmap(const msgpack_object *v, ql_strmap_t *dst);

/* Decoders that reuse a caller's zone (the store keeps one per transaction). */
int ql_project_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags,
                        ql_project_t *out);
int ql_model_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags,
                      ql_model_t *out);
int ql_segment_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags,
                        ql_segment_t *out);
int ql_job_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags, ql_job_t *out);
int ql_step_decode_z(msgpack_zone *z, const void *buf, size_t len, unsigned flags, ql_step_t *out);

#endif
