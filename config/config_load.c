/*
 * The configuration file loader: a YAML document (base/ql_yaml.h) applied key by key through
 * ql_config_set, so a file value obeys exactly the rules of a --set or a project override.
 *
 * The YAML layer already rejects duplicate keys, a second document and bad syntax with
 * file:line; this file adds the shape rules of the config file (a flat mapping; lists as comma
 * strings or sequences; the users sequence) and keeps every message at the line it is about.
 */
#include "config/ql_config.h"

#include "base/ql_yaml.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

/*
 * A relative path value of the file at file_path, resolved against that file's folder into buf
 * (made absolute, so --print-config's output means the same wherever it is loaded from). The
 * one exception keeps files written before this rule working: when nothing exists at the
 * resolved path but the value names something that exists relative to the working directory
 * (the repository's conf/qilin.yaml once said conf/jobs.yaml, meant from the repository root),
 * the value stays as written. Returns the text to set: value itself or buf.
 */
static const char *resolve_path(const char *file_path, const char *value, char *buf, size_t cap) {
    if (value[0] == '\0' || value[0] == '/')
        return value;
    char dir[PATH_MAX];
    const char *slash = strrchr(file_path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == file_path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - file_path), file_path);
    char abs_dir[PATH_MAX];
    if (!realpath(dir, abs_dir))
        return value;
    const char *rest = value;
    for (;;) {
        if (rest[0] == '.' && rest[1] == '/') {
            rest += 2;
        } else if (rest[0] == '.' && rest[1] == '.' && rest[2] == '/' && strcmp(abs_dir, "/")) {
            *strrchr(abs_dir, '/') = '\0'; /* abs_dir is absolute and has no trailing slash */
            if (!abs_dir[0])
                snprintf(abs_dir, sizeof abs_dir, "/");
            rest += 3;
        } else {
            break;
        }
    }
    int n = snprintf(buf, cap, "%s%s%s", abs_dir, strcmp(abs_dir, "/") ? "/" : "", rest);
    if (n < 0 || (size_t)n >= cap)
        return value;
    if (access(buf, F_OK) != 0 && access(value, F_OK) == 0)
        return value;
    return buf;
}

/* A scalar's text, "" for YAML null. Fails on a non-scalar or an embedded NUL. */
static int scalar_text(const ql_yaml_node_t *node, const char *key, const char **out,
                       ql_err_t *err) {
    if (node->kind != QL_YAML_SCALAR)
        return ql_yaml_errorf(err, node, "%s takes a single value, not %s", key,
                              node->kind == QL_YAML_SEQUENCE ? "a list" : "a mapping");
    if (strlen(node->str) != node->len)
        return ql_yaml_errorf(err, node, "%s: the value contains a NUL character", key);
    *out = ql_yaml_is_null(node) ? "" : node->str;
    return 0;
}

/* A YAML sequence for a list-typed key: joined into the comma form the parser takes. */
static int load_list(ql_config_t *cfg, const ql_yaml_node_t *key, const ql_yaml_node_t *seq,
                     const char *path, ql_err_t *err) {
    size_t total = 1;
    for (size_t i = 0; i < seq->n_items; i++) {
        const ql_yaml_node_t *item = seq->items[i];
        const char *text = NULL;
        if (item->kind != QL_YAML_SCALAR)
            return ql_yaml_errorf(err, item, "%s: list items must be plain values", key->str);
        int rc = scalar_text(item, key->str, &text, err);
        if (rc != 0)
            return rc;
        /* Refused here, where the item's own line is known: a comma would split it and an
         * empty item would vanish in the join. */
        if (!*text || strchr(text, ','))
            return ql_yaml_errorf(err, item, "%s: item %zu is %s", key->str, i,
                                  *text ? "not a single value (it contains a comma)" : "empty");
        total += strlen(text) + 1;
    }
    char *joined = malloc(total);
    if (!joined)
        return ql_err_set(err, UV_ENOMEM, "%s: out of memory", path);
    size_t off = 0;
    joined[0] = '\0';
    for (size_t i = 0; i < seq->n_items; i++) {
        size_t n = seq->items[i]->len;
        if (i)
            joined[off++] = ',';
        memcpy(joined + off, seq->items[i]->str, n + 1);
        off += n;
    }
    int rc = ql_config_set(cfg, key->str, joined, path, (int)key->line, err);
    free(joined);
    return rc;
}

/* qilin.server.users: a sequence of {name, password_hash, role} mappings. */
static int load_users(ql_config_t *cfg, const ql_yaml_node_t *key, const ql_yaml_node_t *seq,
                      const char *path, ql_err_t *err) {
    static const char *const fields[] = {"name", "password_hash", "role", NULL};
    size_t n = seq->n_items;
    ql_config_user_t *users = calloc(n ? n : 1, sizeof *users);
    int *lines = calloc(n ? n : 1, sizeof *lines);
    int rc = users && lines ? 0 : ql_err_set(err, UV_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const ql_yaml_node_t *item = seq->items[i];
        char what[64];
        snprintf(what, sizeof what, "%s[%zu]", key->str, i);
        lines[i] = (int)item->line;
        if ((rc = ql_yaml_expect(item, QL_YAML_MAPPING, what, err)) != 0 ||
            (rc = ql_yaml_check_keys(item, fields, err)) != 0)
            break;
        if ((rc = ql_yaml_get_str(item, "name", QL_YAML_REQUIRED, &users[i].name, err)) != 0 ||
            (rc = ql_yaml_get_str(item, "password_hash", QL_YAML_REQUIRED, &users[i].password_hash,
                                  err)) != 0 ||
            (rc = ql_yaml_get_str(item, "role", QL_YAML_REQUIRED, &users[i].role, err)) != 0)
            break;
    }
    if (rc == 0)
        rc = ql_config_set_users(cfg, users, n, path, (int)key->line, lines, err);
    free(users);
    free(lines);
    return rc;
}

static int load_pair(ql_config_t *cfg, const ql_yaml_pair_t *pair, const char *path,
                     ql_err_t *err) {
    const ql_yaml_node_t *key = pair->key, *value = pair->value;
    if (strlen(key->str) != key->len)
        return ql_yaml_errorf(err, key, "the key contains a NUL character");
    const ql_config_option_t *o = ql_config_find_option(key->str);
    if (!o)
        /* ql_config_set words the unknown-key message (with its "did you mean"). */
        return ql_config_set(cfg, key->str, "", path, (int)key->line, err);
    if (value->kind == QL_YAML_SEQUENCE && o->type == QL_CONFIG_LIST)
        return load_list(cfg, key, value, path, err);
    if (value->kind == QL_YAML_SEQUENCE && o->type == QL_CONFIG_USERS)
        return load_users(cfg, key, value, path, err);
    const char *text = NULL;
    int rc = scalar_text(value, o->key, &text, err);
    if (rc != 0)
        return rc;
    char resolved[2 * PATH_MAX];
    if (o->type == QL_CONFIG_PATH)
        text = resolve_path(path, text, resolved, sizeof resolved);
    return ql_config_set(cfg, o->key, text, path, (int)key->line, err);
}

int ql_config_load_file(ql_config_t *cfg, const char *path, ql_err_t *err) {
    ql_yaml_doc_t *doc = NULL;
    /* A file of nothing but comments is a valid config: every default. */
    int rc = ql_yaml_load_file(path, QL_YAML_ALLOW_EMPTY, &doc, err);
    if (rc != 0)
        return rc;
    const ql_yaml_node_t *root = ql_yaml_doc_root(doc);
    if (!ql_yaml_is_null(root) && root->kind != QL_YAML_MAPPING)
        rc = ql_yaml_errorf(err, root,
                            "expected a mapping of `key: value` lines at the top level, got %s",
                            root->kind == QL_YAML_SEQUENCE ? "a sequence" : "a single value");
    for (size_t i = 0; rc == 0 && root->kind == QL_YAML_MAPPING && i < root->n_pairs; i++)
        rc = load_pair(cfg, &root->pairs[i], path, err);
    ql_yaml_doc_free(doc);
    return rc;
}
