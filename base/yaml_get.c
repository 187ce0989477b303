/*
 * Reading a loaded YAML document: lookups, key checks and the typed getters, whose messages
 * all say "file:line: <what>: expected <type>, got <value>". See ql_yaml.h for the typing
 * rules and why they are strict.
 */
#include "base/ql_yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

int ql_yaml_errorf(ql_err_t *err, const ql_yaml_node_t *node, const char *fmt, ...) {
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!node)
        return ql_err_set(err, QL_EINVAL, "%s", msg);
    return ql_err_set(err, QL_EINVAL, "%s:%u: %s", node->file ? node->file : "<input>", node->line,
                      msg);
}

bool ql_yaml_is_null(const ql_yaml_node_t *node) {
    if (!node || node->kind != QL_YAML_SCALAR || !node->plain)
        return false;
    const char *s = node->str;
    return node->len == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

const char *ql_yaml_describe(const ql_yaml_node_t *node, char *buf, size_t size) {
    if (!node || ql_yaml_is_null(node)) {
        snprintf(buf, size, "null");
    } else if (node->kind == QL_YAML_SEQUENCE) {
        snprintf(buf, size, "a sequence");
    } else if (node->kind == QL_YAML_MAPPING) {
        snprintf(buf, size, "a mapping");
    } else {
        /* Quote and shorten the scalar; control characters become '?' so a message stays on
         * one line. */
        size_t max = size >= 8 ? size - 6 : 1, o = 0;
        if (max > 40)
            max = 40;
        buf[o++] = '\'';
        size_t i;
        for (i = 0; i < node->len && o < max + 1; i++) {
            unsigned char c = (unsigned char)node->str[i];
            buf[o++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
        }
        if (i < node->len) {
            memcpy(buf + o, "...", 3);
            o += 3;
        }
        buf[o++] = '\'';
        buf[o] = '\0';
    }
    return buf;
}

static const char *kind_name(ql_yaml_kind_t k) {
    return k == QL_YAML_SCALAR ? "a scalar" : k == QL_YAML_SEQUENCE ? "a sequence" : "a mapping";
}

int ql_yaml_expect(const ql_yaml_node_t *node, ql_yaml_kind_t kind, const char *what,
                   ql_err_t *err) {
    if (node->kind == kind && !(kind == QL_YAML_SCALAR && ql_yaml_is_null(node)))
        return 0;
    char desc[64];
    return ql_yaml_errorf(err, node, "%s: expected %s, got %s", what, kind_name(kind),
                          ql_yaml_describe(node, desc, sizeof desc));
}

const ql_yaml_node_t *ql_yaml_map_find(const ql_yaml_node_t *map, const char *key) {
    if (!map || map->kind != QL_YAML_MAPPING)
        return NULL;
    size_t len = strlen(key);
    for (size_t i = 0; i < map->n_pairs; i++) {
        const ql_yaml_node_t *k = map->pairs[i].key;
        if (k->len == len && memcmp(k->str, key, len) == 0)
            return map->pairs[i].value;
    }
    return NULL;
}

const char *ql_yaml_join(const char *const *names, char *buf, size_t size) {
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; names[i] && o < size; i++) {
        int w = snprintf(buf + o, size - o, "%s%s", i ? ", " : "", names[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    return buf;
}

int ql_yaml_check_keys(const ql_yaml_node_t *map, const char *const *allowed, ql_err_t *err) {
    for (size_t i = 0; i < map->n_pairs; i++) {
        const ql_yaml_node_t *k = map->pairs[i].key;
        bool ok = false;
        for (size_t j = 0; allowed[j] && !ok; j++)
            ok = strlen(allowed[j]) == k->len && memcmp(allowed[j], k->str, k->len) == 0;
        if (!ok) {
            char list[256], desc[64];
            return ql_yaml_errorf(err, k, "unknown key %s (expected one of: %s)",
                                  ql_yaml_describe(k, desc, sizeof desc),
                                  ql_yaml_join(allowed, list, sizeof list));
        }
    }
    return 0;
}

static int type_error(const ql_yaml_node_t *node, const char *what, const char *expected,
                      ql_err_t *err) {
    char desc[64];
    return ql_yaml_errorf(err, node, "%s: expected %s, got %s", what, expected,
                          ql_yaml_describe(node, desc, sizeof desc));
}

int ql_yaml_as_str(const ql_yaml_node_t *node, const char *what, const char **out, ql_err_t *err) {
    if (node->kind != QL_YAML_SCALAR || ql_yaml_is_null(node))
        return type_error(node, what, "a string", err);
    if (strlen(node->str) != node->len)
        return ql_yaml_errorf(err, node, "%s: the string contains a NUL character", what);
    *out = node->str;
    return 0;
}

int ql_yaml_as_bool(const ql_yaml_node_t *node, const char *what, bool *out, ql_err_t *err) {
    if (node->kind == QL_YAML_SCALAR && node->plain) {
        if (strcmp(node->str, "true") == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(node->str, "false") == 0) {
            *out = false;
            return 0;
        }
    }
    return type_error(node, what, "true or false", err);
}

/* Parses a decimal integer without leading zeros; false on syntax error or overflow. */
static bool parse_int(const char *s, int64_t *out) {
    bool neg = *s == '-';
    if (neg)
        s++;
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] != '\0'))
        return false;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return true;
}

int ql_yaml_as_int(const ql_yaml_node_t *node, const char *what, int64_t min, int64_t max,
                   int64_t *out, ql_err_t *err) {
    char expected[96];
    if (min == INT64_MIN && max == INT64_MAX)
        snprintf(expected, sizeof expected, "an integer");
    else if (max == INT64_MAX)
        snprintf(expected, sizeof expected, "an integer >= %lld", (long long)min);
    else
        snprintf(expected, sizeof expected, "an integer between %lld and %lld", (long long)min,
                 (long long)max);
    int64_t v;
    if (node->kind != QL_YAML_SCALAR || !node->plain || strlen(node->str) != node->len ||
        !parse_int(node->str, &v) || v < min || v > max)
        return type_error(node, what, expected, err);
    *out = v;
    return 0;
}

int ql_yaml_parse_duration(const char *s, int64_t *out_ms) {
    int64_t v;
    if (parse_int(s, &v)) {
        if (v < 0)
            return QL_EINVAL;
        *out_ms = v;
        return 0;
    }
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    int64_t total = 0;
    if (!*s)
        return QL_EINVAL;
    while (*s) {
        if (*s < '0' || *s > '9')
            return QL_EINVAL;
        int64_t n = 0;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (n > (INT64_MAX - (*s - '0')) / 10)
                return QL_EINVAL;
            n = n * 10 + (*s - '0');
        }
        size_t k, nu = sizeof units / sizeof units[0];
        /* "ms" comes first in the table so that it is not read as minutes then "s". */
        for (k = 0; k < nu; k++)
            if (strncmp(s, units[k].unit, strlen(units[k].unit)) == 0)
                break;
        if (k == nu)
            return QL_EINVAL;
        s += strlen(units[k].unit);
        if (n > (INT64_MAX - total) / units[k].ms)
            return QL_EINVAL;
        total += n * units[k].ms;
    }
    *out_ms = total;
    return 0;
}

int ql_yaml_as_duration(const ql_yaml_node_t *node, const char *what, int64_t *out_ms,
                        ql_err_t *err) {
    int64_t v;
    if (node->kind != QL_YAML_SCALAR || ql_yaml_is_null(node) || strlen(node->str) != node->len ||
        ql_yaml_parse_duration(node->str, &v) != 0)
        return type_error(node, what,
                          "a duration such as 500ms, 90s, 5m, 2h, 1d or 1h30m (a bare number is "
                          "milliseconds)",
                          err);
    *out_ms = v;
    return 0;
}

void ql_yaml_strv_free(char **v) {
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

int ql_yaml_as_strv(const ql_yaml_node_t *node, const char *what, bool nonempty, char ***out,
                    size_t *n, ql_err_t *err) {
    if (node->kind != QL_YAML_SEQUENCE || (nonempty && node->n_items == 0))
        return type_error(node, what,
                          nonempty ? "a non-empty sequence of strings" : "a sequence of strings",
                          err);
    char **v = calloc(node->n_items + 1, sizeof *v);
    if (!v)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < node->n_items; i++) {
        char item[128];
        const char *s = NULL;
        snprintf(item, sizeof item, "%s item %zu", what, i + 1);
        int rc = ql_yaml_as_str(node->items[i], item, &s, err);
        if (!rc && !(v[i] = strdup(s)))
            rc = ql_err_set(err, UV_ENOMEM, "out of memory");
        if (rc) {
            ql_yaml_strv_free(v);
            return rc;
        }
    }
    *out = v;
    if (n)
        *n = node->n_items;
    return 0;
}

/* Finds key for a map getter: 1 = found, 0 = absent and optional, < 0 = error. */
static int lookup(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need,
                  const ql_yaml_node_t **value, char *what, size_t size, ql_err_t *err) {
    *value = ql_yaml_map_find(map, key);
    if (!*value)
        return need == QL_YAML_REQUIRED ? ql_yaml_errorf(err, map, "missing required key '%s'", key)
                                        : 0;
    snprintf(what, size, "key '%s'", key);
    return 1;
}

int ql_yaml_get_str(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need,
                    const char **out, ql_err_t *err) {
    const ql_yaml_node_t *v;
    char what[128];
    int rc = lookup(map, key, need, &v, what, sizeof what, err);
    return rc <= 0 ? rc : ql_yaml_as_str(v, what, out, err);
}

int ql_yaml_get_bool(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, bool *out,
                     ql_err_t *err) {
    const ql_yaml_node_t *v;
    char what[128];
    int rc = lookup(map, key, need, &v, what, sizeof what, err);
    return rc <= 0 ? rc : ql_yaml_as_bool(v, what, out, err);
}

int ql_yaml_get_int(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, int64_t min,
                    int64_t max, int64_t *out, ql_err_t *err) {
    const ql_yaml_node_t *v;
    char what[128];
    int rc = lookup(map, key, need, &v, what, sizeof what, err);
    return rc <= 0 ? rc : ql_yaml_as_int(v, what, min, max, out, err);
}

int ql_yaml_get_duration(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need,
                         int64_t *out_ms, ql_err_t *err) {
    const ql_yaml_node_t *v;
    char what[128];
    int rc = lookup(map, key, need, &v, what, sizeof what, err);
    return rc <= 0 ? rc : ql_yaml_as_duration(v, what, out_ms, err);
}

int ql_yaml_get_strv(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, bool nonempty,
                     char ***out, size_t *n, ql_err_t *err) {
    const ql_yaml_node_t *v;
    char what[128];
    int rc = lookup(map, key, need, &v, what, sizeof what, err);
    return rc <= 0 ? rc : ql_yaml_as_strv(v, what, nonempty, out, n, err);
}
