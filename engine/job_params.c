/*
 * The stored form of a job's custom parameters (ql_jobs.h, Job parameters): written by the API
 * when an ad-hoc job is submitted, read by the scheduler for every shell step of the job.
 */
#include "engine/ql_jobs.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

int ql_job_params_encode(const ql_kv_t *params, size_t n, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (n == 0)
        return 0;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int rc = msgpack_pack_map(&pk, n);
    for (size_t i = 0; !rc && i < n; i++) {
        size_t kl = strlen(params[i].name), vl = strlen(params[i].value);
        rc = msgpack_pack_str_with_body(&pk, params[i].name, kl);
        if (!rc)
            rc = msgpack_pack_str_with_body(&pk, params[i].value, vl);
    }
    if (rc) {
        msgpack_sbuffer_destroy(&sb);
        return UV_ENOMEM;
    }
    *out = sb.data; /* malloc'd by the sbuffer: the caller frees it */
    *len = sb.size;
    return 0;
}

void ql_job_params_free(ql_kv_t *kv, size_t n) {
    for (size_t i = 0; kv && i < n; i++) {
        free(kv[i].name);
        free(kv[i].value);
    }
    free(kv);
}

/* A NUL-terminated copy of a msgpack string (its bytes are not NUL-terminated). */
static char *str_copy(const msgpack_object *v) {
    char *s = malloc(v->via.str.size + 1);
    if (s) {
        memcpy(s, v->via.str.ptr, v->via.str.size);
        s[v->via.str.size] = '\0';
    }
    return s;
}

static int decode_map(const msgpack_object *map, ql_kv_t *kv, size_t *n, ql_err_t *err) {
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key, *v = &map->via.map.ptr[i].val;
        if (k->type != MSGPACK_OBJECT_STR || v->type != MSGPACK_OBJECT_STR)
            return ql_err_set(err, QL_ECORRUPT, "the job's stored parameters cannot be decoded");
        char *name = str_copy(k);
        char *value = str_copy(v);
        if (!name || !value) {
            free(name);
            free(value);
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        }
        kv[*n] = (ql_kv_t){name, value};
        (*n)++;
        /* A NUL inside the name shortens the copy: it is not the name that was stored. */
        if (strlen(name) != k->via.str.size || !ql_template_param_name_valid(name))
            return ql_err_set(err, QL_ECORRUPT,
                              "the job's stored parameter '%.64s' has an invalid name", name);
    }
    return 0;
}

int ql_job_params_decode(const char *buf, size_t len, ql_kv_t **out, size_t *n, ql_err_t *err) {
    *out = NULL;
    *n = 0;
    if (!buf || len == 0)
        return 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0, got = 0;
    ql_kv_t *kv = NULL;
    int rc = 0;
    /* Element counts are checked before msgpack-c allocates for them, as the record decoders
     * do (ql_msgpack_check_counts). */
    if (ql_msgpack_check_counts(buf, len) ||
        msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP || u.data.via.map.size > QL_TEMPLATE_MAX_PARAMS) {
        rc = ql_err_set(err, QL_ECORRUPT, "the job's stored parameters cannot be decoded");
        goto out;
    }
    if (u.data.via.map.size && !(kv = calloc(u.data.via.map.size, sizeof *kv))) {
        rc = ql_err_set(err, UV_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = decode_map(&u.data, kv, &got, err))) {
        ql_job_params_free(kv, got);
        goto out;
    }
    *out = kv;
    *n = got;
out:
    msgpack_unpacked_destroy(&u);
    return rc;
}
