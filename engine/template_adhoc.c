/*
 * Ad-hoc job definitions (POST /jobs): the same YAML layer and step loader as conf/jobs.yaml,
 * so a definition fails with the same "<request body>:line: reason" messages. JSON bodies are
 * YAML flow mappings and go through the same path.
 */
#include "engine/ql_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

void ql_adhoc_job_clear(ql_adhoc_job_t *job) {
    free(job->project);
    free(job->model);
    free(job->type);
    ql_kv_free(job->params, job->n_params);
    for (size_t i = 0; i < job->n_steps; i++)
        ql_stepdef_clear(&job->steps[i]);
    free(job->steps);
    memset(job, 0, sizeof *job);
}

static int name_field(const ql_yaml_node_t *root, const char *key, ql_yaml_need_t need, char **out,
                      ql_err_t *err) {
    const char *s = NULL;
    int rc = ql_yaml_get_str(root, key, need, &s, err);
    if (rc || !s)
        return rc;
    if (!s[0] || strlen(s) > 256)
        return ql_yaml_errorf(err, ql_yaml_map_find(root, key),
                              "key '%s': expected a name of 1 to 256 bytes", key);
    if (!(*out = strdup(s)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    return 0;
}

static int load_params(const ql_yaml_node_t *node, ql_adhoc_job_t *out, ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "key 'params'", err);
    if (rc)
        return rc;
    if (node->n_pairs > QL_TEMPLATE_MAX_PARAMS)
        return ql_yaml_errorf(err, node, "key 'params': more than %d parameters",
                              QL_TEMPLATE_MAX_PARAMS);
    if (node->n_pairs && !(out->params = calloc(node->n_pairs, sizeof *out->params)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key;
        if (strlen(k->str) != k->len || !ql_template_param_name_valid(k->str)) {
            char desc[64];
            return ql_yaml_errorf(err, k,
                                  "key 'params': %s is not a valid parameter name "
                                  "([A-Za-z_][A-Za-z0-9_]{0,63}, not starting with QILIN_)",
                                  ql_yaml_describe(k, desc, sizeof desc));
        }
        char what[96];
        const char *value;
        snprintf(what, sizeof what, "param '%s'", k->str);
        if ((rc = ql_yaml_as_str(node->pairs[i].value, what, &value, err)))
            return rc;
        ql_kv_t *kv = &out->params[out->n_params++];
        if (!(kv->name = strdup(k->str)) || !(kv->value = strdup(value)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    return 0;
}

static int parse_root(const ql_yaml_node_t *root, ql_adhoc_job_t *out, ql_err_t *err) {
    static const char *const keys[] = {"project", "model", "type", "priority",
                                       "params",  "steps", NULL};
    int rc = ql_yaml_expect(root, QL_YAML_MAPPING, "the job definition", err);
    if (rc || (rc = ql_yaml_check_keys(root, keys, err)))
        return rc;
    if ((rc = name_field(root, "project", QL_YAML_REQUIRED, &out->project, err)) ||
        (rc = name_field(root, "model", QL_YAML_OPTIONAL, &out->model, err)))
        return rc;
    const char *type;
    if ((rc = ql_yaml_get_str(root, "type", QL_YAML_REQUIRED, &type, err)))
        return rc;
    if (!ql_job_type_valid(type))
        return ql_yaml_errorf(err, ql_yaml_map_find(root, "type"),
                              "key 'type': '%s' is not a job type (expected INC_BUILD, "
                              "INDEX_REFRESH, INDEX_MERGE, INDEX_BUILD or a custom name "
                              "matching [A-Z][A-Z0-9_]{0,%d})",
                              type, QL_TYPE_MAX - 1);
    if (!(out->type = strdup(type)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    int64_t priority = 3;
    if ((rc = ql_yaml_get_int(root, "priority", QL_YAML_OPTIONAL, 0, 4, &priority, err)))
        return rc;
    out->priority = (int)priority;
    const ql_yaml_node_t *v;
    if ((v = ql_yaml_map_find(root, "params")) && (rc = load_params(v, out, err)))
        return rc;
    if ((v = ql_yaml_map_find(root, "steps"))) {
        const char *names[QL_TEMPLATE_MAX_PARAMS];
        for (size_t i = 0; i < out->n_params; i++)
            names[i] = out->params[i].name;
        rc = ql_template_load_steps(v, names, out->n_params, &out->steps, &out->n_steps, err);
    }
    return rc;
}

int ql_adhoc_parse(const char *buf, size_t len, const char *source_name, ql_adhoc_job_t *out,
                   ql_err_t *err) {
    memset(out, 0, sizeof *out);
    ql_yaml_doc_t *doc;
    int rc =
        ql_yaml_load_buffer(buf, len, source_name ? source_name : "<request body>", 0, &doc, err);
    if (rc)
        return rc;
    rc = parse_root(ql_yaml_doc_root(doc), out, err);
    ql_yaml_doc_free(doc);
    if (rc)
        ql_adhoc_job_clear(out);
    return rc;
}
