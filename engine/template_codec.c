/*
 * The stored form of a step definition: a msgpack map keyed by field names.
 *
 *   v                  int     QL_STEPDEF_VERSION (required)
 *   name               str     (required)
 *   kind               str     shell | noop | sleep | fail | warn (required)
 *   argv               [str]   shell
 *   env                {str: str}
 *   cwd, message       str
 *   timeout_ms, retry_interval_ms, duration_ms, sim_duration_ms, retries, warning_exit_code
 *                      int     written only when set
 *   when               {str: [str]}  the step's conditions (parameter -> values), when any
 *
 * Field names (not positions) make the format additive: a newer Qilin may write fields an
 * older one ignores, and a missing optional field decodes to its "unset" value. The version
 * changes only when a field changes meaning; a decoder refuses versions newer than its own.
 * The blob is written inside the submit transaction and read back at run time, possibly by a
 * newer binary after an upgrade.
 */
#include "engine/ql_template.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static int pack_str(msgpack_packer *pk, const char *s) {
    size_t n = strlen(s);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

static int pack_key_str(msgpack_packer *pk, const char *key, const char *value) {
    return pack_str(pk, key) || pack_str(pk, value);
}

static int pack_key_int(msgpack_packer *pk, const char *key, int64_t value) {
    return pack_str(pk, key) || msgpack_pack_int64(pk, value);
}

int ql_stepdef_encode(const ql_stepdef_t *s, uint8_t **buf, size_t *len) {
    if (!s->name)
        return QL_EINVAL;
    size_t n = 3; /* v, name, kind */
    n += s->argv != NULL;
    n += s->n_env > 0;
    n += s->cwd != NULL;
    n += s->message != NULL;
    n += s->timeout_ms > 0;
    n += s->retries >= 0;
    n += s->retry_interval_ms >= 0;
    n += s->warning_exit_code > 0;
    n += s->kind == QL_STEP_SLEEP;
    n += s->sim_duration_ms >= 0;
    n += s->n_when > 0;

    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int bad = msgpack_pack_map(&pk, n) || pack_key_int(&pk, "v", QL_STEPDEF_VERSION) ||
              pack_key_str(&pk, "name", s->name) ||
              pack_key_str(&pk, "kind", ql_step_kind_name(s->kind));
    if (!bad && s->argv) {
        bad = pack_str(&pk, "argv") || msgpack_pack_array(&pk, s->argc);
        for (size_t i = 0; !bad && i < s->argc; i++)
            bad = pack_str(&pk, s->argv[i]);
    }
    if (!bad && s->n_env) {
        bad = pack_str(&pk, "env") || msgpack_pack_map(&pk, s->n_env);
        for (size_t i = 0; !bad && i < s->n_env; i++)
            bad = pack_str(&pk, s->env[i].name) || pack_str(&pk, s->env[i].value);
    }
    if (!bad && s->cwd)
        bad = pack_key_str(&pk, "cwd", s->cwd);
    if (!bad && s->message)
        bad = pack_key_str(&pk, "message", s->message);
    if (!bad && s->timeout_ms > 0)
        bad = pack_key_int(&pk, "timeout_ms", s->timeout_ms);
    if (!bad && s->retries >= 0)
        bad = pack_key_int(&pk, "retries", s->retries);
    if (!bad && s->retry_interval_ms >= 0)
        bad = pack_key_int(&pk, "retry_interval_ms", s->retry_interval_ms);
    if (!bad && s->warning_exit_code > 0)
        bad = pack_key_int(&pk, "warning_exit_code", s->warning_exit_code);
    if (!bad && s->kind == QL_STEP_SLEEP)
        bad = pack_key_int(&pk, "duration_ms", s->duration_ms);
    if (!bad && s->sim_duration_ms >= 0)
        bad = pack_key_int(&pk, "sim_duration_ms", s->sim_duration_ms);
    if (!bad && s->n_when) {
        bad = pack_str(&pk, "when") || msgpack_pack_map(&pk, s->n_when);
        for (size_t i = 0; !bad && i < s->n_when; i++) {
            const ql_when_t *w = &s->when[i];
            bad = pack_str(&pk, w->param) || msgpack_pack_array(&pk, w->n_values);
            for (size_t j = 0; !bad && j < w->n_values; j++)
                bad = pack_str(&pk, w->values[j]);
        }
    }
    if (bad) {
        msgpack_sbuffer_destroy(&sb);
        return UV_ENOMEM;
    }
    /* The sbuffer's memory is malloc'd: hand it over as is. */
    *len = sb.size;
    *buf = (uint8_t *)msgpack_sbuffer_release(&sb);
    if (!*buf && !(*buf = malloc(1)))
        return UV_ENOMEM;
    return 0;
}

static bool key_is(const msgpack_object *k, const char *name) {
    size_t n = strlen(name);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
           memcmp(k->via.str.ptr, name, n) == 0;
}

/* A str object as a new C string; NULL (with *bad set) when it is not a NUL-free str. */
static char *obj_str(const msgpack_object *o, int *bad) {
    if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        *bad = QL_ECORRUPT;
        return NULL;
    }
    char *s = malloc(o->via.str.size + 1);
    if (!s) {
        *bad = UV_ENOMEM;
        return NULL;
    }
    memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    return s;
}

static bool obj_int(const msgpack_object *o, int64_t min, int64_t max, int64_t *out) {
    int64_t v;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > (uint64_t)INT64_MAX)
            return false;
        v = (int64_t)o->via.u64;
    } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        v = o->via.i64;
    } else {
        return false;
    }
    if (v < min || v > max)
        return false;
    *out = v;
    return true;
}

static int corrupt(ql_err_t *err, const char *field, const char *why) {
    return ql_err_set(err, QL_ECORRUPT, "step definition: field '%s': %s", field, why);
}

static int decode_when(const msgpack_object *v, ql_stepdef_t *out, ql_err_t *err) {
    if (v->type != MSGPACK_OBJECT_MAP || v->via.map.size == 0)
        return corrupt(err, "when", "not a non-empty map");
    if (out->when)
        return corrupt(err, "when", "appears twice");
    uint32_t n = v->via.map.size;
    if (!(out->when = calloc(n, sizeof *out->when)))
        return UV_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &v->via.map.ptr[i].key, *vals = &v->via.map.ptr[i].val;
        ql_when_t *w = &out->when[out->n_when++];
        int bad = 0;
        if (!(w->param = obj_str(k, &bad)))
            return bad == UV_ENOMEM ? bad : corrupt(err, "when", "a parameter is not a string");
        if (vals->type != MSGPACK_OBJECT_ARRAY || vals->via.array.size == 0)
            return corrupt(err, "when", "values are not a non-empty array");
        if (!(w->values = calloc(vals->via.array.size + 1, sizeof *w->values)))
            return UV_ENOMEM;
        for (uint32_t j = 0; j < vals->via.array.size; j++, w->n_values++)
            if (!(w->values[j] = obj_str(&vals->via.array.ptr[j], &bad)))
                return bad == UV_ENOMEM ? bad : corrupt(err, "when", "a value is not a string");
    }
    return 0;
}

static int decode_map(const msgpack_object *root, ql_stepdef_t *out, ql_err_t *err) {
    if (root->type != MSGPACK_OBJECT_MAP)
        return ql_err_set(err, QL_ECORRUPT, "step definition: not a map");
    int64_t version = -1;
    bool have_kind = false;
    const msgpack_object_map *m = &root->via.map;
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
        int bad = 0;
        int64_t x;
        if (key_is(k, "v")) {
            if (!obj_int(v, 1, INT32_MAX, &version))
                return corrupt(err, "v", "not a version number");
        } else if (key_is(k, "name")) {
            free(out->name);
            if (!(out->name = obj_str(v, &bad)))
                return bad == UV_ENOMEM ? bad : corrupt(err, "name", "not a string");
        } else if (key_is(k, "kind")) {
            char *s = obj_str(v, &bad);
            if (!s)
                return bad == UV_ENOMEM ? bad : corrupt(err, "kind", "not a string");
            bad = ql_step_kind_parse(s, &out->kind);
            free(s);
            if (bad)
                return corrupt(err, "kind", "unknown step kind");
            have_kind = true;
        } else if (key_is(k, "argv")) {
            if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size == 0)
                return corrupt(err, "argv", "not a non-empty array");
            ql_yaml_strv_free(out->argv);
            out->argc = 0;
            if (!(out->argv = calloc(v->via.array.size + 1, sizeof *out->argv)))
                return UV_ENOMEM;
            for (uint32_t j = 0; j < v->via.array.size; j++, out->argc++)
                if (!(out->argv[j] = obj_str(&v->via.array.ptr[j], &bad)))
                    return bad == UV_ENOMEM ? bad : corrupt(err, "argv", "an item is not a string");
        } else if (key_is(k, "env")) {
            if (v->type != MSGPACK_OBJECT_MAP)
                return corrupt(err, "env", "not a map");
            if (out->env)
                return corrupt(err, "env", "appears twice");
            uint32_t ne = v->via.map.size;
            if (ne && !(out->env = calloc(ne, sizeof *out->env)))
                return UV_ENOMEM;
            for (uint32_t j = 0; j < ne; j++) {
                ql_kv_t *kv = &out->env[out->n_env++];
                if (!(kv->name = obj_str(&v->via.map.ptr[j].key, &bad)) ||
                    !(kv->value = obj_str(&v->via.map.ptr[j].val, &bad)))
                    return bad == UV_ENOMEM ? bad : corrupt(err, "env", "not strings");
            }
        } else if (key_is(k, "when")) {
            if ((bad = decode_when(v, out, err)))
                return bad;
        } else if (key_is(k, "cwd")) {
            free(out->cwd);
            if (!(out->cwd = obj_str(v, &bad)))
                return bad == UV_ENOMEM ? bad : corrupt(err, "cwd", "not a string");
        } else if (key_is(k, "message")) {
            free(out->message);
            if (!(out->message = obj_str(v, &bad)))
                return bad == UV_ENOMEM ? bad : corrupt(err, "message", "not a string");
        } else if (key_is(k, "timeout_ms")) {
            if (!obj_int(v, 1, INT64_MAX, &out->timeout_ms))
                return corrupt(err, "timeout_ms", "not a positive integer");
        } else if (key_is(k, "retries")) {
            if (!obj_int(v, 0, 1000, &x))
                return corrupt(err, "retries", "not an integer in 0..1000");
            out->retries = (int32_t)x;
        } else if (key_is(k, "retry_interval_ms")) {
            if (!obj_int(v, 0, INT64_MAX, &out->retry_interval_ms))
                return corrupt(err, "retry_interval_ms", "not an integer >= 0");
        } else if (key_is(k, "warning_exit_code")) {
            if (!obj_int(v, 1, 255, &x))
                return corrupt(err, "warning_exit_code", "not an integer in 1..255");
            out->warning_exit_code = (int32_t)x;
        } else if (key_is(k, "duration_ms")) {
            if (!obj_int(v, 0, INT64_MAX, &out->duration_ms))
                return corrupt(err, "duration_ms", "not an integer >= 0");
        } else if (key_is(k, "sim_duration_ms")) {
            if (!obj_int(v, 0, INT64_MAX, &out->sim_duration_ms))
                return corrupt(err, "sim_duration_ms", "not an integer >= 0");
        }
        /* Anything else was written by a newer version and is ignored. */
    }
    if (version < 0)
        return corrupt(err, "v", "missing");
    if (version > QL_STEPDEF_VERSION)
        return ql_err_set(err, QL_EVERSION,
                          "step definition: version %lld is newer than this Qilin's (%d)",
                          (long long)version, QL_STEPDEF_VERSION);
    if (!out->name)
        return corrupt(err, "name", "missing");
    if (!have_kind)
        return corrupt(err, "kind", "missing");
    if (out->kind == QL_STEP_SHELL && !out->argv)
        return corrupt(err, "argv", "missing for a shell step");
    return 0;
}

int ql_stepdef_decode(const uint8_t *buf, size_t len, ql_stepdef_t *out, ql_err_t *err) {
    ql_stepdef_init(out);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc;
    msgpack_unpack_return r = ql_msgpack_check_counts(buf, len)
                                  ? MSGPACK_UNPACK_PARSE_ERROR
                                  : msgpack_unpack_next(&u, (const char *)buf, len, &off);
    if (r == MSGPACK_UNPACK_NOMEM_ERROR)
        rc = ql_err_set(err, UV_ENOMEM, "out of memory");
    else if (r != MSGPACK_UNPACK_SUCCESS)
        rc = ql_err_set(err, QL_ECORRUPT, "step definition: not valid msgpack");
    else if (off != len)
        rc = ql_err_set(err, QL_ECORRUPT, "step definition: %zu trailing bytes", len - off);
    else
        rc = decode_map(&u.data, out, err);
    if (rc == UV_ENOMEM)
        ql_err_set(err, rc, "out of memory");
    msgpack_unpacked_destroy(&u);
    if (rc)
        ql_stepdef_clear(out);
    return rc;
}
