/* A step's `when:` conditions: parsing, copying and evaluation (see ql_template.h). */
#include "engine/ql_template.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

static bool known_param(const char *name, const char *const *declared, size_t n_declared) {
    for (size_t i = 0; ql_template_wellknown[i]; i++)
        if (strcmp(ql_template_wellknown[i], name) == 0)
            return true;
    for (size_t i = 0; i < n_declared; i++)
        if (strcmp(declared[i], name) == 0)
            return true;
    return false;
}

void ql_when_free(ql_when_t *w, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(w[i].param);
        ql_yaml_strv_free(w[i].values);
    }
    free(w);
}

int ql_when_load(const ql_yaml_node_t *node, const char *const *declared, size_t n_declared,
                 ql_stepdef_t *out, ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "key 'when'", err);
    if (rc)
        return rc;
    if (node->n_pairs == 0)
        return ql_yaml_errorf(err, node,
                              "key 'when': no condition (omit 'when' for a step that always runs)");
    if (!(out->when = calloc(node->n_pairs, sizeof *out->when)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key, *v = node->pairs[i].value;
        if (strlen(k->str) != k->len || !known_param(k->str, declared, n_declared))
            return ql_yaml_errorf(err, k,
                                  "key 'when': '%s' is not a job parameter (expected a QILIN_* "
                                  "parameter such as QILIN_JOB_TYPE or QILIN_MODEL, or one of the "
                                  "chain's declared params)",
                                  k->str);
        ql_when_t *w = &out->when[out->n_when++];
        if (!(w->param = strdup(k->str)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        char what[128];
        snprintf(what, sizeof what, "when '%s'", k->str);
        if (v->kind == QL_YAML_SEQUENCE) {
            if ((rc = ql_yaml_as_strv(v, what, true, &w->values, &w->n_values, err)))
                return rc;
            continue;
        }
        const char *s;
        if ((rc = ql_yaml_as_str(v, what, &s, err)))
            return rc;
        if (!(w->values = calloc(2, sizeof *w->values)) || !(w->values[0] = strdup(s)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        w->n_values = 1;
    }
    return 0;
}

int ql_when_copy(const ql_stepdef_t *src, ql_stepdef_t *dst) {
    if (!src->n_when)
        return 0;
    if (!(dst->when = calloc(src->n_when, sizeof *dst->when)))
        return UV_ENOMEM;
    for (size_t i = 0; i < src->n_when; i++) {
        const ql_when_t *a = &src->when[i];
        ql_when_t *b = &dst->when[dst->n_when++];
        if (!(b->param = strdup(a->param)) ||
            !(b->values = calloc(a->n_values + 1, sizeof *b->values)))
            return UV_ENOMEM;
        for (size_t j = 0; j < a->n_values; j++, b->n_values++)
            if (!(b->values[j] = strdup(a->values[j])))
                return UV_ENOMEM;
    }
    return 0;
}

const ql_when_t *ql_when_unmet(const ql_stepdef_t *s, const ql_param_t *params, size_t n,
                               const char **value) {
    for (size_t i = 0; i < s->n_when; i++) {
        const ql_when_t *w = &s->when[i];
        const char *v = "";
        for (size_t p = 0; p < n; p++)
            if (strcmp(params[p].name, w->param) == 0) {
                v = params[p].value ? params[p].value : "";
                break;
            }
        bool met = false;
        for (size_t j = 0; j < w->n_values && !met; j++)
            met = strcmp(w->values[j], v) == 0;
        if (!met) {
            *value = v;
            return w;
        }
    }
    return NULL;
}
