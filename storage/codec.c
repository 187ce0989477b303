/* msgpack helpers for the record codecs: a packer into ql_buf_t, typed field writers, and a
 * decode loop that hands every map pair to a per-record function and keeps unknown pairs. */
#include "codec.h"
#include "base/ql_error.h"

#include <stdlib.h>
#include <string.h>

static int buf_write(void *data, const char *bytes, size_t len) {
    ql_buf_t *b = data;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len)
            cap *= 2;
        uint8_t *p = realloc(b->data, cap);
        if (!p)
            return -1;
        b->data = p;
        b->cap = cap;
    }
    /* msgpack hands over (NULL, 0) for an empty bin, e.g. a job without sources: memcpy from
     * NULL is undefined even for zero bytes. */
    if (len)
        memcpy(b->data + b->len, bytes, len);
    b->len += len;
    return 0;
}

void ql_buf_reset(ql_buf_t *b) {
    b->len = 0;
}

void ql_buf_free(ql_buf_t *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void ql_codec_packer_init(msgpack_packer *pk, ql_buf_t *buf) {
    msgpack_packer_init(pk, buf, buf_write);
}

void ql_codec_key(msgpack_packer *pk, const char *key) {
    msgpack_pack_str_with_body(pk, key, strlen(key));
}

void ql_codec_str(msgpack_packer *pk, const char *key, const char *value) {
    ql_codec_key(pk, key);
    if (value)
        msgpack_pack_str_with_body(pk, value, strlen(value));
    else
        msgpack_pack_nil(pk);
}

void ql_codec_i64(msgpack_packer *pk, const char *key, int64_t value) {
    ql_codec_key(pk, key);
    msgpack_pack_int64(pk, value);
}

void ql_codec_u64(msgpack_packer *pk, const char *key, uint64_t value) {
    ql_codec_key(pk, key);
    msgpack_pack_uint64(pk, value);
}

void ql_codec_bool(msgpack_packer *pk, const char *key, bool value) {
    ql_codec_key(pk, key);
    if (value)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

void ql_codec_bin(msgpack_packer *pk, const char *key, const void *data, size_t len) {
    ql_codec_key(pk, key);
    msgpack_pack_bin_with_body(pk, data, len);
}

void ql_codec_id(msgpack_packer *pk, const char *key, const ql_id_t *id) {
    ql_codec_bin(pk, key, id->b, sizeof id->b);
}

void ql_codec_strmap(msgpack_packer *pk, const char *key, const ql_strmap_t *m) {
    ql_codec_key(pk, key);
    msgpack_pack_map(pk, m->n);
    for (size_t i = 0; i < m->n; i++) {
        msgpack_pack_str_with_body(pk, m->items[i].key, strlen(m->items[i].key));
        msgpack_pack_str_with_body(pk, m->items[i].value, strlen(m->items[i].value));
    }
}

/* The encoders write C strings, so a stored string never holds a NUL: one that does is corrupt,
 * and accepting it would cut it short at the NUL for every reader and on the next rewrite
 * (a name "a\0b" read as "a"; two map keys "a\0x" and "a\0y" merged into one). */
static bool has_nul(const msgpack_object *v) {
    return v->via.str.size && memchr(v->via.str.ptr, '\0', v->via.str.size) != NULL;
}

char *ql_codec_strdup(const msgpack_object *v) {
    char *s = malloc(v->via.str.size + 1);
    if (s) {
        if (v->via.str.size)
            memcpy(s, v->via.str.ptr, v->via.str.size);
        s[v->via.str.size] = '\0';
    }
    return s;
}

int ql_codec_get_str(const msgpack_object *v, char *dst, size_t cap) {
    if (v->type == MSGPACK_OBJECT_NIL) {
        dst[0] = '\0';
        return 0;
    }
    if (v->type != MSGPACK_OBJECT_STR || v->via.str.size >= cap || has_nul(v))
        return QL_ECORRUPT;
    memcpy(dst, v->via.str.ptr, v->via.str.size);
    dst[v->via.str.size] = '\0';
    return 0;
}

int ql_codec_get_strdup(const msgpack_object *v, char **dst) {
    free(*dst);
    *dst = NULL;
    if (v->type == MSGPACK_OBJECT_NIL)
        return 0;
    if (v->type != MSGPACK_OBJECT_STR || has_nul(v))
        return QL_ECORRUPT;
    *dst = ql_codec_strdup(v);
    return *dst ? 0 : UV_ENOMEM;
}

int ql_codec_get_i64(const msgpack_object *v, int64_t *dst) {
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (v->via.u64 > (uint64_t)INT64_MAX)
            return QL_ECORRUPT;
        *dst = (int64_t)v->via.u64;
        return 0;
    }
    if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *dst = v->via.i64;
        return 0;
    }
    return QL_ECORRUPT;
}

int ql_codec_get_bool(const msgpack_object *v, bool *dst) {
    if (v->type != MSGPACK_OBJECT_BOOLEAN)
        return QL_ECORRUPT;
    *dst = v->via.boolean;
    return 0;
}

int ql_codec_get_id(const msgpack_object *v, ql_id_t *dst) {
    if (v->type != MSGPACK_OBJECT_BIN || v->via.bin.size != sizeof dst->b)
        return QL_ECORRUPT;
    memcpy(dst->b, v->via.bin.ptr, sizeof dst->b);
    return 0;
}

int ql_codec_get_bin(const msgpack_object *v, uint8_t **dst, size_t *len) {
    free(*dst);
    *dst = NULL;
    *len = 0;
    if (v->type == MSGPACK_OBJECT_NIL)
        return 0;
    if (v->type != MSGPACK_OBJECT_BIN)
        return QL_ECORRUPT;
    if (v->via.bin.size == 0)
        return 0;
    *dst = malloc(v->via.bin.size);
    if (!*dst)
        return UV_ENOMEM;
    memcpy(*dst, v->via.bin.ptr, v->via.bin.size);
    *len = v->via.bin.size;
    return 0;
}

int ql_codec_get_strmap(const msgpack_object *v, ql_strmap_t *dst) {
    ql_strmap_free(dst);
    if (v->type != MSGPACK_OBJECT_MAP)
        return QL_ECORRUPT;
    for (uint32_t i = 0; i < v->via.map.size; i++) {
        const msgpack_object *k = &v->via.map.ptr[i].key, *val = &v->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR || val->type != MSGPACK_OBJECT_STR || has_nul(k) ||
            has_nul(val))
            return QL_ECORRUPT;
        char *ks = ql_codec_strdup(k);
        char *vs = ql_codec_strdup(val);
        int rc = (ks && vs) ? ql_strmap_set(dst, ks, vs) : UV_ENOMEM;
        free(ks);
        free(vs);
        if (rc)
            return rc;
    }
    return 0;
}

static int keep_extra(ql_extra_t *extra, const msgpack_object *key, const msgpack_object *val) {
    ql_buf_t b = {.data = extra->data, .len = extra->len, .cap = extra->len};
    msgpack_packer pk;
    ql_codec_packer_init(&pk, &b);
    if (msgpack_pack_object(&pk, *key) || msgpack_pack_object(&pk, *val)) {
        extra->data = b.data;
        return UV_ENOMEM;
    }
    extra->data = b.data;
    extra->len = b.len;
    extra->count++;
    return 0;
}

/* How the msgpack type bytes 0xc0..0xdf go on: a fixed payload, a length (bin, str; ext with
 * one more byte for its type) or a count (array, map; a map's pairs are two elements each) of
 * `width` bytes, or invalid. The fix* types are decoded inline. */
enum { MP_FIXED, MP_LEN, MP_EXT, MP_ARRAY, MP_MAP, MP_BAD };
static const struct {
    uint8_t how, width; /* width: payload bytes for MP_FIXED, else bytes of the length */
} mp_wide[32] = {
    {MP_FIXED, 0},  {MP_BAD, 0},   {MP_FIXED, 0}, {MP_FIXED, 0}, /* nil, -, false, true */
    {MP_LEN, 1},    {MP_LEN, 2},   {MP_LEN, 4},                  /* bin 8/16/32 */
    {MP_EXT, 1},    {MP_EXT, 2},   {MP_EXT, 4},                  /* ext 8/16/32 */
    {MP_FIXED, 4},  {MP_FIXED, 8},                               /* float 32/64 */
    {MP_FIXED, 1},  {MP_FIXED, 2}, {MP_FIXED, 4}, {MP_FIXED, 8}, /* uint 8..64 */
    {MP_FIXED, 1},  {MP_FIXED, 2}, {MP_FIXED, 4}, {MP_FIXED, 8}, /* int 8..64 */
    {MP_FIXED, 2},  {MP_FIXED, 3}, {MP_FIXED, 5}, {MP_FIXED, 9}, /* fixext 1/2/4/8 */
    {MP_FIXED, 17},                                              /* fixext 16 */
    {MP_LEN, 1},    {MP_LEN, 2},   {MP_LEN, 4},                  /* str 8/16/32 */
    {MP_ARRAY, 2},  {MP_ARRAY, 4}, {MP_MAP, 2},   {MP_MAP, 4},   /* array, map 16/32 */
};

/*
 * msgpack-c allocates an array's or a map's objects for the count in its header before reading
 * a single element, so five corrupt bytes (a map32 claiming 2^32 - 1 pairs) ask the allocator
 * for 128 GB. This walks the value without building it and refuses any container that claims
 * more elements than bytes remain (every element takes at least one), which bounds what
 * msgpack_unpack then allocates by the input's size. One linear pass, no allocation.
 */
int ql_codec_check_counts(const void *buf, size_t len) {
    const uint8_t *p = buf;
    size_t off = 0;
    uint64_t pending = 1; /* values still to read, each at least one byte */
    while (pending) {
        if (off >= len)
            return QL_ECORRUPT;
        pending--;
        uint8_t t = p[off++];
        uint64_t payload = 0, elems = 0;
        if (t <= 0x7f || t >= 0xe0) {
            /* positive or negative fixint: the type byte is the whole value */
        } else if (t <= 0x8f) {
            elems = 2u * (t & 0x0f);
        } else if (t <= 0x9f) {
            elems = t & 0x0f;
        } else if (t <= 0xbf) {
            payload = t & 0x1f;
        } else {
            unsigned how = mp_wide[t - 0xc0].how, width = mp_wide[t - 0xc0].width;
            if (how == MP_BAD)
                return QL_ECORRUPT;
            if (how == MP_FIXED) {
                payload = width;
            } else {
                if (width > len - off)
                    return QL_ECORRUPT;
                uint64_t n = 0;
                for (unsigned i = 0; i < width; i++)
                    n = n << 8 | p[off + i];
                off += width;
                if (how == MP_ARRAY || how == MP_MAP)
                    elems = how == MP_MAP ? 2 * n : n;
                else
                    payload = how == MP_EXT ? n + 1 : n;
            }
        }
        if (payload > len - off)
            return QL_ECORRUPT;
        off += payload;
        if (pending > len - off || elems > len - off - pending)
            return QL_ECORRUPT;
        pending += elems;
    }
    return 0;
}

int ql_codec_decode(msgpack_zone *zone, const void *buf, size_t len, ql_codec_field_fn field,
                    void *arg, ql_extra_t *extra) {
    msgpack_object obj;
    size_t off = 0;
    msgpack_zone_clear(zone);
    if (ql_codec_check_counts(buf, len))
        return QL_ECORRUPT;
    msgpack_unpack_return r = msgpack_unpack(buf, len, &off, zone, &obj);
    if (r != MSGPACK_UNPACK_SUCCESS || obj.type != MSGPACK_OBJECT_MAP)
        return QL_ECORRUPT;
    for (uint32_t i = 0; i < obj.via.map.size; i++) {
        const msgpack_object *k = &obj.via.map.ptr[i].key, *v = &obj.via.map.ptr[i].val;
        if (ql_codec_key_is(k, "v")) {
            int64_t version;
            if (ql_codec_get_i64(v, &version))
                return QL_ECORRUPT;
            /* Records are extended only by adding fields, which older builds keep as extra:
             * a higher version means a change this build cannot read safely. */
            if (version > QL_RECORD_VERSION)
                return QL_EVERSION;
            continue;
        }
        int rc = field(k, v, arg);
        if (rc < 0)
            return rc;
        if (rc == 0 && extra) {
            rc = keep_extra(extra, k, v);
            if (rc)
                return rc;
        }
    }
    return 0;
}
