/*
 * Job templates: the step model, the loader of conf/jobs.yaml-style documents and the lookup
 * of a job type's chain. Substitution is in template_expand.c, the msgpack codec in
 * template_codec.c, ad-hoc definitions in template_adhoc.c. See ql_template.h.
 */
#include "engine/ql_template.h"
#include "storage/ql_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static const char *const kind_names[] = {"shell", "noop", "sleep", "fail", "warn", NULL};

const char *ql_step_kind_name(ql_step_kind_t kind) {
    return (unsigned)kind < 5 ? kind_names[kind] : "unknown";
}

int ql_step_kind_parse(const char *name, ql_step_kind_t *out) {
    for (int i = 0; kind_names[i]; i++)
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (ql_step_kind_t)i;
            return 0;
        }
    return QL_EINVAL;
}

/* Keys each kind accepts; every kind also takes the common ones. */
static const char *const keys_shell[] = {
    "name",    "kind",           "sim_duration",      "when", "argv", "env", "cwd", "timeout",
    "retries", "retry_interval", "warning_exit_code", NULL};
static const char *const keys_noop[] = {"name", "kind", "sim_duration", "when", NULL};
static const char *const keys_sleep[] = {"name", "kind", "sim_duration", "when", "duration", NULL};
static const char *const keys_message[] = {"name", "kind", "sim_duration", "when", "message", NULL};
static const char *const keys_any[] = {"name",
                                       "kind",
                                       "sim_duration",
                                       "when",
                                       "argv",
                                       "env",
                                       "cwd",
                                       "timeout",
                                       "retries",
                                       "retry_interval",
                                       "warning_exit_code",
                                       "duration",
                                       "message",
                                       NULL};

static const char *const *kind_keys(ql_step_kind_t kind) {
    switch (kind) {
    case QL_STEP_SHELL:
        return keys_shell;
    case QL_STEP_SLEEP:
        return keys_sleep;
    case QL_STEP_FAIL:
    case QL_STEP_WARN:
        return keys_message;
    default:
        return keys_noop;
    }
}

static bool in_list(const char *const *list, const char *s, size_t len) {
    for (size_t i = 0; list[i]; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0)
            return true;
    return false;
}

void ql_stepdef_init(ql_stepdef_t *s) {
    memset(s, 0, sizeof *s);
    s->retries = -1;
    s->retry_interval_ms = -1;
    s->sim_duration_ms = -1;
}

void ql_kv_free(ql_kv_t *kv, size_t n) {
    for (size_t i = 0; kv && i < n; i++) {
        free(kv[i].name);
        free(kv[i].value);
    }
    free(kv);
}

void ql_stepdef_clear(ql_stepdef_t *s) {
    free(s->name);
    ql_yaml_strv_free(s->argv);
    ql_kv_free(s->env, s->n_env);
    free(s->cwd);
    free(s->message);
    ql_when_free(s->when, s->n_when);
    ql_stepdef_init(s);
}

int64_t ql_stepdef_sim_duration(const ql_stepdef_t *s) {
    if (s->sim_duration_ms >= 0)
        return s->sim_duration_ms;
    return s->kind == QL_STEP_SLEEP ? s->duration_ms : 0;
}

static int dup_opt(const char *src, char **dst) {
    *dst = NULL;
    if (src && !(*dst = strdup(src)))
        return UV_ENOMEM;
    return 0;
}

int ql_stepdef_copy(const ql_stepdef_t *src, ql_stepdef_t *dst) {
    ql_stepdef_init(dst);
    dst->kind = src->kind;
    dst->timeout_ms = src->timeout_ms;
    dst->retries = src->retries;
    dst->retry_interval_ms = src->retry_interval_ms;
    dst->warning_exit_code = src->warning_exit_code;
    dst->duration_ms = src->duration_ms;
    dst->sim_duration_ms = src->sim_duration_ms;
    if (dup_opt(src->name, &dst->name) || dup_opt(src->cwd, &dst->cwd) ||
        dup_opt(src->message, &dst->message))
        goto nomem;
    if (src->argv) {
        if (!(dst->argv = calloc(src->argc + 1, sizeof *dst->argv)))
            goto nomem;
        for (size_t i = 0; i < src->argc; i++)
            if (!(dst->argv[i] = strdup(src->argv[i])))
                goto nomem;
        dst->argc = src->argc;
    }
    if (src->n_env) {
        if (!(dst->env = calloc(src->n_env, sizeof *dst->env)))
            goto nomem;
        for (size_t i = 0; i < src->n_env; i++, dst->n_env++)
            if (!(dst->env[i].name = strdup(src->env[i].name)) ||
                !(dst->env[i].value = strdup(src->env[i].value))) {
                dst->n_env++; /* so clear frees the half-copied pair */
                goto nomem;
            }
    }
    if (ql_when_copy(src, dst))
        goto nomem;
    return 0;
nomem:
    ql_stepdef_clear(dst);
    return UV_ENOMEM;
}

static bool env_name_valid(const char *s) {
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static int nomem(ql_err_t *err) {
    return ql_err_set(err, UV_ENOMEM, "out of memory");
}

static int get_dup_str(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, char **out,
                       ql_err_t *err) {
    const char *s = NULL;
    int rc = ql_yaml_get_str(map, key, need, &s, err);
    if (rc || !s)
        return rc;
    if (!(*out = strdup(s)))
        return nomem(err);
    return 0;
}

static int load_env(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                    ql_stepdef_t *out, ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "key 'env'", err);
    if (rc)
        return rc;
    if (node->n_pairs == 0)
        return 0;
    if (!(out->env = calloc(node->n_pairs, sizeof *out->env)))
        return nomem(err);
    for (size_t i = 0; i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key, *v = node->pairs[i].value;
        char what[160], desc[64];
        if (strlen(k->str) != k->len || !env_name_valid(k->str))
            return ql_yaml_errorf(err, k,
                                  "key 'env': %s is not a valid environment variable name "
                                  "([A-Za-z_][A-Za-z0-9_]*)",
                                  ql_yaml_describe(k, desc, sizeof desc));
        if (strncmp(k->str, "QILIN_", 6) == 0)
            return ql_yaml_errorf(err, k,
                                  "key 'env': '%s' is reserved: QILIN_* variables are set from "
                                  "the job's parameters",
                                  k->str);
        snprintf(what, sizeof what, "env '%s'", k->str);
        const char *s;
        if ((rc = ql_yaml_as_str(v, what, &s, err)) ||
            (rc = ql_template_check_refs(v, what, s, declared, n_declared, err)))
            return rc;
        ql_kv_t *kv = &out->env[out->n_env];
        if (!(kv->name = strdup(k->str)) || !(kv->value = strdup(s))) {
            out->n_env++;
            return nomem(err);
        }
        out->n_env++;
    }
    return 0;
}

static int load_shell(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                      ql_stepdef_t *out, ql_err_t *err) {
    int rc = ql_yaml_get_strv(node, "argv", QL_YAML_REQUIRED, true, &out->argv, &out->argc, err);
    if (rc)
        return rc;
    const ql_yaml_node_t *argv = ql_yaml_map_find(node, "argv");
    if (out->argv[0][0] == '\0')
        return ql_yaml_errorf(err, argv->items[0], "key 'argv': the program (item 1) is empty");
    for (size_t i = 0; i < out->argc; i++) {
        char what[64];
        snprintf(what, sizeof what, "key 'argv' item %zu", i + 1);
        if ((rc = ql_template_check_refs(argv->items[i], what, out->argv[i], declared, n_declared,
                                         err)))
            return rc;
    }
    const ql_yaml_node_t *v;
    if ((v = ql_yaml_map_find(node, "env")) && (rc = load_env(v, declared, n_declared, out, err)))
        return rc;
    if ((rc = get_dup_str(node, "cwd", QL_YAML_OPTIONAL, &out->cwd, err)))
        return rc;
    if (out->cwd) {
        v = ql_yaml_map_find(node, "cwd");
        if (!out->cwd[0])
            return ql_yaml_errorf(err, v, "key 'cwd': must not be empty");
        if ((rc = ql_template_check_refs(v, "key 'cwd'", out->cwd, declared, n_declared, err)))
            return rc;
    }
    if ((rc = ql_yaml_get_duration(node, "timeout", QL_YAML_OPTIONAL, &out->timeout_ms, err)))
        return rc;
    if ((v = ql_yaml_map_find(node, "timeout")) && out->timeout_ms == 0)
        return ql_yaml_errorf(err, v, "key 'timeout': must be more than 0 (omit it for none)");
    int64_t i64 = -1;
    if ((rc = ql_yaml_get_int(node, "retries", QL_YAML_OPTIONAL, 0, 1000, &i64, err)))
        return rc;
    out->retries = (int32_t)i64;
    if ((rc = ql_yaml_get_duration(node, "retry_interval", QL_YAML_OPTIONAL,
                                   &out->retry_interval_ms, err)))
        return rc;
    i64 = 0;
    if ((rc = ql_yaml_get_int(node, "warning_exit_code", QL_YAML_OPTIONAL, 1, 255, &i64, err)))
        return rc;
    out->warning_exit_code = (int32_t)i64;
    return 0;
}

static int load_step(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                     ql_stepdef_t *out, ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "step", err);
    if (rc)
        return rc;
    /* The kind decides which keys belong; unknown keys are reported before missing ones, since
     * a misspelt key is the likelier cause of both. */
    const ql_yaml_node_t *kind_node = ql_yaml_map_find(node, "kind");
    ql_step_kind_t kind = QL_STEP_NOOP;
    bool kind_ok = kind_node && kind_node->kind == QL_YAML_SCALAR &&
                   ql_step_kind_parse(kind_node->str, &kind) == 0;
    const char *const *allowed = kind_ok ? kind_keys(kind) : keys_any;
    char list[256];
    for (size_t i = 0; i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key;
        if (!in_list(keys_any, k->str, k->len)) {
            char desc[64];
            return ql_yaml_errorf(err, k, "unknown key %s (expected one of: %s)",
                                  ql_yaml_describe(k, desc, sizeof desc),
                                  ql_yaml_join(allowed, list, sizeof list));
        }
    }
    const char *name, *kind_str;
    if ((rc = ql_yaml_get_str(node, "name", QL_YAML_REQUIRED, &name, err)))
        return rc;
    if (!name[0])
        return ql_yaml_errorf(err, ql_yaml_map_find(node, "name"), "key 'name': must not be empty");
    if (strlen(name) > 256)
        return ql_yaml_errorf(err, ql_yaml_map_find(node, "name"),
                              "key 'name': longer than 256 bytes");
    if ((rc = ql_yaml_get_str(node, "kind", QL_YAML_REQUIRED, &kind_str, err)))
        return rc;
    if (!kind_ok)
        return ql_yaml_errorf(err, kind_node, "step '%s': unknown kind '%s' (expected one of: %s)",
                              name, kind_str, ql_yaml_join(kind_names, list, sizeof list));
    for (size_t i = 0; i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key;
        if (!in_list(allowed, k->str, k->len))
            return ql_yaml_errorf(err, k,
                                  "key '%s' does not apply to a %s step (expected one of: %s)",
                                  k->str, kind_str, ql_yaml_join(allowed, list, sizeof list));
    }
    out->kind = kind;
    if (!(out->name = strdup(name)))
        return nomem(err);
    if ((rc = ql_yaml_get_duration(node, "sim_duration", QL_YAML_OPTIONAL, &out->sim_duration_ms,
                                   err)))
        return rc;
    const ql_yaml_node_t *when = ql_yaml_map_find(node, "when");
    if (when && (rc = ql_when_load(when, declared, n_declared, out, err)))
        return rc;
    switch (kind) {
    case QL_STEP_SHELL:
        return load_shell(node, declared, n_declared, out, err);
    case QL_STEP_SLEEP:
        return ql_yaml_get_duration(node, "duration", QL_YAML_REQUIRED, &out->duration_ms, err);
    case QL_STEP_FAIL:
    case QL_STEP_WARN:
        return get_dup_str(node, "message", QL_YAML_OPTIONAL, &out->message, err);
    default:
        return 0;
    }
}

int ql_stepdef_from_node(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                         ql_stepdef_t *out, ql_err_t *err) {
    ql_stepdef_init(out);
    int rc = load_step(node, declared, n_declared, out, err);
    if (rc)
        ql_stepdef_clear(out);
    return rc;
}

/* ---- chains and sets ---------------------------------------------------------------------- */

bool ql_job_type_valid(const char *name) {
    /* The store's check, so that a type a template or an ad-hoc job accepts is one the store
     * takes at submission. */
    ql_err_t scratch;
    return ql_meta_check_job_type("type", name, &scratch) == 0;
}

bool ql_template_param_name_valid(const char *name) {
    return name && strlen(name) <= 64 && env_name_valid(name) && strncmp(name, "QILIN_", 6) != 0;
}

static bool set_name_valid(const char *s) {
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        bool alnum =
            (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
        if (!alnum && (n == 0 || (*p != '_' && *p != '-' && *p != '.')))
            return false;
    }
    return n >= 1 && n <= 64;
}

static void chain_clear(ql_chain_t *c) {
    free(c->job_type);
    free(c->description);
    ql_yaml_strv_free(c->params);
    for (size_t i = 0; i < c->n_steps; i++)
        ql_stepdef_clear(&c->steps[i]);
    free(c->steps);
    memset(c, 0, sizeof *c);
}

static void set_clear(ql_template_set_t *s) {
    for (size_t i = 0; i < s->n_chains; i++)
        chain_clear(&s->chains[i]);
    free(s->chains);
    free(s->name);
    memset(s, 0, sizeof *s);
}

void ql_templates_free(ql_templates_t *t) {
    if (!t)
        return;
    set_clear(&t->defaults);
    for (size_t i = 0; i < t->n_sets; i++)
        set_clear(&t->sets[i]);
    free(t->sets);
    free(t->source);
    free(t);
}

static int load_chain(const ql_yaml_node_t *key, const ql_yaml_node_t *node, ql_chain_t *c,
                      ql_err_t *err) {
    static const char *const keys[] = {"description", "params", "steps", NULL};
    char what[128];
    snprintf(what, sizeof what, "job type '%s'", key->str);
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, what, err);
    if (rc || (rc = ql_yaml_check_keys(node, keys, err)))
        return rc;
    if (!(c->job_type = strdup(key->str)))
        return nomem(err);
    if ((rc = get_dup_str(node, "description", QL_YAML_OPTIONAL, &c->description, err)))
        return rc;
    const ql_yaml_node_t *params = ql_yaml_map_find(node, "params");
    if (params) {
        if ((rc = ql_yaml_as_strv(params, "key 'params'", false, &c->params, &c->n_params, err)))
            return rc;
        if (c->n_params > QL_TEMPLATE_MAX_PARAMS)
            return ql_yaml_errorf(err, params, "key 'params': more than %d parameters",
                                  QL_TEMPLATE_MAX_PARAMS);
        for (size_t i = 0; i < c->n_params; i++) {
            if (!ql_template_param_name_valid(c->params[i]))
                return ql_yaml_errorf(err, params->items[i],
                                      "key 'params': '%s' is not a valid parameter name "
                                      "([A-Za-z_][A-Za-z0-9_]{0,63}, not starting with QILIN_)",
                                      c->params[i]);
            for (size_t j = 0; j < i; j++)
                if (strcmp(c->params[i], c->params[j]) == 0)
                    return ql_yaml_errorf(err, params->items[i],
                                          "key 'params': '%s' is declared twice", c->params[i]);
        }
    } else if (!(c->params = calloc(1, sizeof *c->params))) {
        return nomem(err);
    }
    const ql_yaml_node_t *steps = ql_yaml_map_find(node, "steps");
    if (!steps)
        return ql_yaml_errorf(err, node, "missing required key 'steps'");
    return ql_template_load_steps(steps, (const char *const *)c->params, c->n_params, &c->steps,
                                  &c->n_steps, err);
}

int ql_template_load_steps(const ql_yaml_node_t *steps, const char *const *declared,
                           size_t n_declared, ql_stepdef_t **out, size_t *n, ql_err_t *err) {
    if (steps->kind != QL_YAML_SEQUENCE || steps->n_items == 0) {
        char desc[64];
        return ql_yaml_errorf(err, steps, "key 'steps': expected a non-empty sequence, got %s",
                              ql_yaml_describe(steps, desc, sizeof desc));
    }
    if (steps->n_items > QL_JOB_STEPS_MAX)
        return ql_yaml_errorf(err, steps, "key 'steps': %zu steps, at most %d are allowed",
                              steps->n_items, QL_JOB_STEPS_MAX);
    ql_stepdef_t *v = calloc(steps->n_items, sizeof *v);
    if (!v)
        return nomem(err);
    for (size_t i = 0; i < steps->n_items; i++) {
        int rc = ql_stepdef_from_node(steps->items[i], declared, n_declared, &v[i], err);
        if (rc) {
            for (size_t j = 0; j < i; j++)
                ql_stepdef_clear(&v[j]);
            free(v);
            return rc;
        }
    }
    *out = v;
    *n = steps->n_items;
    return 0;
}

static int load_set(const ql_yaml_node_t *node, const char *what, ql_template_set_t *set,
                    ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, what, err);
    if (rc)
        return rc;
    if (node->n_pairs && !(set->chains = calloc(node->n_pairs, sizeof *set->chains)))
        return nomem(err);
    for (size_t i = 0; i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key;
        if (strlen(k->str) != k->len || !ql_job_type_valid(k->str)) {
            char desc[64];
            return ql_yaml_errorf(err, k,
                                  "%s: invalid job type %s (expected INC_BUILD, INDEX_REFRESH, "
                                  "INDEX_MERGE, INDEX_BUILD or a custom name matching "
                                  "[A-Z][A-Z0-9_]{0,%d})",
                                  what, ql_yaml_describe(k, desc, sizeof desc), QL_TYPE_MAX - 1);
        }
        rc = load_chain(k, node->pairs[i].value, &set->chains[set->n_chains++], err);
        if (rc)
            return rc;
    }
    return 0;
}

int ql_templates_load_nodes(const ql_yaml_node_t *templates, const ql_yaml_node_t *sets,
                            ql_templates_t **out, ql_err_t *err) {
    ql_templates_t *t = calloc(1, sizeof *t);
    if (!t || !(t->source = strdup(templates->file ? templates->file : "<input>"))) {
        free(t);
        return nomem(err);
    }
    int rc = load_set(templates, "key 'templates'", &t->defaults, err);
    if (!rc && sets &&
        (rc = ql_yaml_expect(sets, QL_YAML_MAPPING, "key 'template_sets'", err)) == 0) {
        if (sets->n_pairs && !(t->sets = calloc(sets->n_pairs, sizeof *t->sets)))
            rc = nomem(err);
        for (size_t i = 0; !rc && i < sets->n_pairs; i++) {
            const ql_yaml_node_t *k = sets->pairs[i].key;
            char desc[64], what[128];
            if (strlen(k->str) != k->len || !set_name_valid(k->str)) {
                rc = ql_yaml_errorf(err, k,
                                    "key 'template_sets': invalid set name %s (expected "
                                    "[A-Za-z0-9][A-Za-z0-9_.-]{0,63})",
                                    ql_yaml_describe(k, desc, sizeof desc));
            } else if (strcmp(k->str, "default") == 0) {
                rc = ql_yaml_errorf(err, k,
                                    "key 'template_sets': the name 'default' is reserved for "
                                    "the top-level templates");
            } else {
                ql_template_set_t *s = &t->sets[t->n_sets++];
                snprintf(what, sizeof what, "template set '%s'", k->str);
                if (!(s->name = strdup(k->str)))
                    rc = nomem(err);
                else
                    rc = load_set(sets->pairs[i].value, what, s, err);
            }
        }
    }
    if (rc) {
        ql_templates_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int ql_templates_load_root(const ql_yaml_node_t *root, ql_templates_t **out, ql_err_t *err) {
    static const char *const keys[] = {"templates", "template_sets", NULL};
    int rc = ql_yaml_expect(root, QL_YAML_MAPPING, "the document", err);
    if (rc || (rc = ql_yaml_check_keys(root, keys, err)))
        return rc;
    const ql_yaml_node_t *templates = ql_yaml_map_find(root, "templates");
    if (!templates)
        return ql_yaml_errorf(err, root, "missing required key 'templates'");
    return ql_templates_load_nodes(templates, ql_yaml_map_find(root, "template_sets"), out, err);
}

int ql_templates_load_buffer(const char *buf, size_t len, const char *name, ql_templates_t **out,
                             ql_err_t *err) {
    ql_yaml_doc_t *doc;
    int rc = ql_yaml_load_buffer(buf, len, name, 0, &doc, err);
    if (rc)
        return rc;
    rc = ql_templates_load_root(ql_yaml_doc_root(doc), out, err);
    ql_yaml_doc_free(doc);
    return rc;
}

int ql_templates_load_file(const char *path, ql_templates_t **out, ql_err_t *err) {
    ql_yaml_doc_t *doc;
    int rc = ql_yaml_load_file(path, 0, &doc, err);
    if (rc)
        return rc;
    rc = ql_templates_load_root(ql_yaml_doc_root(doc), out, err);
    ql_yaml_doc_free(doc);
    return rc;
}

static bool is_default_set(const char *set) {
    return !set || !set[0] || strcmp(set, "default") == 0;
}

static const ql_template_set_t *find_set(const ql_templates_t *t, const char *set) {
    if (is_default_set(set))
        return &t->defaults;
    for (size_t i = 0; i < t->n_sets; i++)
        if (strcmp(t->sets[i].name, set) == 0)
            return &t->sets[i];
    return NULL;
}

static const ql_chain_t *find_chain(const ql_template_set_t *s, const char *job_type) {
    for (size_t i = 0; i < s->n_chains; i++)
        if (strcmp(s->chains[i].job_type, job_type) == 0)
            return &s->chains[i];
    return NULL;
}

bool ql_templates_has_set(const ql_templates_t *t, const char *set) {
    return find_set(t, set) != NULL;
}

int ql_templates_find(const ql_templates_t *t, const char *set, const char *job_type,
                      const ql_chain_t **out, ql_err_t *err) {
    const ql_template_set_t *s = find_set(t, set);
    if (!s)
        return ql_err_set(err, QL_ENOTFOUND, "job template set '%s' is not defined in %s", set,
                          t->source);
    const ql_chain_t *c = find_chain(s, job_type);
    if (!c && s != &t->defaults)
        c = find_chain(&t->defaults, job_type);
    if (!c) {
        if (s != &t->defaults)
            return ql_err_set(err, QL_ENOTFOUND,
                              "no template for job type '%s' in set '%s' or the default "
                              "templates of %s",
                              job_type, set, t->source);
        return ql_err_set(err, QL_ENOTFOUND, "no template for job type '%s' in %s", job_type,
                          t->source);
    }
    *out = c;
    return 0;
}

int ql_chain_check_params(const ql_chain_t *chain, const ql_kv_t *params, size_t n, ql_err_t *err) {
    for (size_t i = 0; i < chain->n_params; i++) {
        size_t j;
        for (j = 0; j < n && strcmp(params[j].name, chain->params[i]) != 0; j++)
            ;
        if (j == n) {
            char list[256];
            return ql_err_set(err, QL_EINVAL,
                              "params: '%s' is required by the %s template (it declares: %s)",
                              chain->params[i], chain->job_type,
                              ql_yaml_join((const char *const *)chain->params, list, sizeof list));
        }
    }
    for (size_t j = 0; j < n; j++) {
        size_t i;
        for (i = 0; i < chain->n_params && strcmp(params[j].name, chain->params[i]) != 0; i++)
            ;
        if (i == chain->n_params) {
            char list[256];
            return ql_err_set(err, QL_EINVAL,
                              "params: '%s' is not a parameter of the %s template (expected "
                              "one of: %s)",
                              params[j].name, chain->job_type,
                              chain->n_params ? ql_yaml_join((const char *const *)chain->params,
                                                             list, sizeof list)
                                              : "none");
        }
    }
    return 0;
}
