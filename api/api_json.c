/*
 * JSON helpers of the REST API: strict body parsing (one object, no duplicate keys), field
 * tables that name unknown fields and wrong types, epoch-ms values given as numbers or numeric
 * strings, and a small text buffer. Pure functions: no server state.
 */
#include "api_int.h"
#include "base/ql_buf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jtype_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a fractional number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

/* The key of the member whose value ends at pos, where jansson stops on a number it cannot
 * hold: the text before it reads `"key" : value`. Best effort, for the message only (escaped
 * quotes in the key are not followed). */
static bool key_before(const char *body, size_t len, size_t pos, char *out, size_t cap) {
    size_t i = pos < len ? pos : len;
    while (i > 0 && body[i - 1] != ':' && body[i - 1] != ',' && body[i - 1] != '[' &&
           body[i - 1] != '{')
        i--;
    if (i == 0 || body[i - 1] != ':')
        return false;
    i--;
    while (i > 0 && (body[i - 1] == ' ' || body[i - 1] == '\t' || body[i - 1] == '\n' ||
                     body[i - 1] == '\r'))
        i--;
    if (i == 0 || body[i - 1] != '"')
        return false;
    size_t end = --i;
    while (i > 0 && body[i - 1] != '"')
        i--;
    if (i == 0)
        return false;
    size_t n = end - i < cap - 1 ? end - i : cap - 1;
    memcpy(out, body + i, n);
    out[n] = '\0';
    return memchr(out, '\0', n) == NULL;
}

/* Finds a string holding a NUL byte (\u0000) under v; path gets its field ("a.b", "ids[2]").
 * Depth is bounded by jansson's parser. */
static bool find_nul(const json_t *v, char *path, size_t cap, size_t at) {
    if (json_is_string(v))
        return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
    if (at >= cap - 1)
        return false;
    if (json_is_object(v)) {
        const char *key;
        json_t *m;
        json_object_foreach((json_t *)v, key, m) {
            int n = snprintf(path + at, cap - at, "%s%s", at ? "." : "", key);
            size_t next = n < 0 ? at : at + (size_t)n < cap ? at + (size_t)n : cap - 1;
            if (find_nul(m, path, cap, next))
                return true;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            int n = snprintf(path + at, cap - at, "[%zu]", i);
            size_t next = n < 0 ? at : at + (size_t)n < cap ? at + (size_t)n : cap - 1;
            if (find_nul(e, path, cap, next))
                return true;
        }
    }
    path[at] = '\0';
    return false;
}

int ql_api_json_parse(const char *body, size_t len, json_t **out, ql_err_t *err) {
    *out = NULL;
    if (!body || len == 0)
        return ql_err_set(err, QL_EINVAL, "request body: expected a JSON object, got nothing");
    json_error_t je;
    /* JSON_ALLOW_NUL lets a \u0000 in a string parse, only so the refusal below can name its
     * field: no string with a NUL is accepted, so every string is a C string the store can
     * keep. */
    json_t *root =
        json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    char key[65];
    if (!root && je.position > 0 && (strstr(je.text, "too big") || strstr(je.text, "overflow")) &&
        key_before(body, len, (size_t)je.position, key, sizeof key))
        return ql_err_set(err, QL_EINVAL,
                          "request body: field '%s': a number outside the 64-bit integer range "
                          "(line %d column %d: %s)",
                          key, je.line, je.column, je.text);
    if (!root)
        return ql_err_set(err, QL_EINVAL, "request body: malformed JSON at line %d column %d: %s",
                          je.line, je.column, je.text);
    char path[128] = "";
    if (find_nul(root, path, sizeof path, 0)) {
        json_decref(root);
        return ql_err_set(err, QL_EINVAL,
                          "request body: field '%s': a string with a NUL byte "
                          "(\\u0000)",
                          path[0] ? path : "(the body)");
    }
    if (!json_is_object(root)) {
        ql_err_set(err, QL_EINVAL, "request body: expected a JSON object, got %s",
                   jtype_name(root));
        json_decref(root);
        return QL_EINVAL;
    }
    *out = root;
    return 0;
}

int ql_api_parse_i64(const char *s, int64_t *out) {
    if (!s || !*s)
        return QL_EINVAL;
    const char *p = s;
    if (*p == '-')
        p++;
    if (!*p)
        return QL_EINVAL;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return QL_EINVAL;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return QL_EINVAL;
    *out = v;
    return 0;
}

int ql_api_json_time(const json_t *v, const char *field, int64_t *out, ql_err_t *err) {
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && ql_api_parse_i64(json_string_value(v), out) == 0)
        return 0;
    if (json_is_string(v))
        return ql_err_set(err, QL_EINVAL,
                          "%s: '%.64s' is not epoch milliseconds (expected an integer or a "
                          "string of decimal digits)",
                          field, json_string_value(v));
    return ql_err_set(err, QL_EINVAL,
                      "%s: expected epoch milliseconds (an integer or a numeric string), got %s",
                      field, jtype_name(v));
}

static bool type_ok(const json_t *v, ql_api_jtype_t t) {
    switch (t) {
    case AJ_STRING:
        return json_is_string(v);
    case AJ_BOOL:
        return json_is_boolean(v);
    case AJ_INT:
        return json_is_integer(v);
    case AJ_TIME:
        return json_is_integer(v) || json_is_string(v);
    case AJ_OBJECT:
        return json_is_object(v);
    case AJ_STRLIST: {
        if (!json_is_array(v))
            return false;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (!json_is_string(e)) return false;
        return true;
    }
    case AJ_SCALAR:
        return json_is_string(v) || json_is_number(v) || json_is_boolean(v);
    case AJ_ANY:
        return true;
    case AJ_INTLIST: {
        if (!json_is_array(v))
            return false;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (!json_is_integer(e)) return false;
        return true;
    }
    case AJ_LISTS: {
        if (!json_is_array(v))
            return false;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (!type_ok(e, AJ_STRLIST)) return false;
        return true;
    }
    case AJ_INTTEXT:
        return json_is_integer(v) || json_is_string(v);
    }
    return false;
}

static const char *type_want(ql_api_jtype_t t) {
    switch (t) {
    case AJ_STRING:
        return "a string";
    case AJ_BOOL:
        return "true or false";
    case AJ_INT:
        return "an integer";
    case AJ_TIME:
        return "epoch milliseconds (an integer or a numeric string)";
    case AJ_OBJECT:
        return "an object";
    case AJ_STRLIST:
        return "an array of strings";
    case AJ_SCALAR:
        return "a string, number or boolean";
    case AJ_ANY:
        return "a value";
    case AJ_INTLIST:
        return "an array of integers";
    case AJ_LISTS:
        return "an array of arrays of strings";
    case AJ_INTTEXT:
        return "an integer (or a string of its digits)";
    }
    return "a value";
}

int ql_api_json_check(const json_t *obj, const char *where, const ql_api_field_t *fields,
                      ql_err_t *err) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        const ql_api_field_t *f = fields;
        while (f->name && strcmp(f->name, key) != 0)
            f++;
        if (!f->name) {
            char known[640] = "";
            size_t off = 0;
            for (const ql_api_field_t *k = fields; k->name && off < sizeof known; k++)
                off += (size_t)snprintf(known + off, sizeof known - off, "%s%s", off ? ", " : "",
                                        k->name);
            return ql_err_set(err, QL_EINVAL, "%s: unknown field '%.64s' (known fields: %s)", where,
                              key, known);
        }
        if (json_is_null(v))
            continue;
        if (!type_ok(v, f->type)) {
            if ((f->type == AJ_STRLIST || f->type == AJ_INTLIST || f->type == AJ_LISTS) &&
                json_is_array(v))
                return ql_err_set(err, QL_EINVAL, "%s: field '%s': expected %s", where, key,
                                  type_want(f->type));
            return ql_err_set(err, QL_EINVAL, "%s: field '%s': expected %s, got %s", where, key,
                              type_want(f->type), jtype_name(v));
        }
    }
    for (const ql_api_field_t *f = fields; f->name; f++)
        if (f->required && !ql_api_json_has(obj, f->name))
            return ql_err_set(err, QL_EINVAL, "%s: field '%s' is required", where, f->name);
    return 0;
}

const char *ql_api_json_str(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

bool ql_api_json_has(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v);
}

void ql_api_sb_printf(ql_api_sb_t *b, const char *fmt, ...) {
    if (b->failed)
        return;
    for (;;) {
        size_t room = b->cap - b->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        if (ql_array_reserve(&b->p, &b->cap, b->len + (size_t)n + 1, 1, 4096)) {
            b->failed = true;
            return;
        }
    }
}

void ql_api_sb_free(ql_api_sb_t *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
