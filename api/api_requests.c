/*
 * Request bodies of the write endpoints, parsed into plain structs before anything touches the
 * store: unknown fields, wrong types and values out of range are a 400 naming the field. Pure
 * functions (the fuzz harness drives them with arbitrary bytes).
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_root(const char *body, size_t len, json_t **root, const ql_api_field_t *fields,
                      ql_err_t *err) {
    int rc = ql_api_json_parse(body, len, root, err);
    if (!rc)
        rc = ql_api_json_check(*root, "request body", fields, err);
    return rc;
}

/* Copies a string field into a fixed buffer, refusing one that does not fit. */
static int copy_str(char *dst, size_t cap, const char *field, const char *s, ql_err_t *err) {
    size_t n = strlen(s);
    if (n >= cap)
        return ql_err_set(err, QL_EINVAL, "%s: longer than %zu characters", field, cap - 1);
    memcpy(dst, s, n + 1);
    return 0;
}

/* The project a request names (required): not empty, not longer than a name can be. Its
 * characters are not checked: a project with other characters does not exist (404). */
static int check_project(const char *project, bool required, ql_err_t *err) {
    if (required && (!project || !project[0]))
        return ql_err_set(err, QL_EINVAL, "project: must not be empty");
    if (project && strlen(project) > QL_NAME_MAX)
        return ql_err_set(err, QL_EINVAL, "project: longer than %d characters", QL_NAME_MAX);
    return 0;
}

/* parse_root for a body with a "project" field: *project borrowed from *root, checked by
 * check_project. */
static int parse_project_root(const char *body, size_t len, json_t **root,
                              const ql_api_field_t *fields, bool required, const char **project,
                              ql_err_t *err) {
    int rc = parse_root(body, len, root, fields, err);
    if (rc)
        return rc;
    *project = ql_api_json_str(*root, "project");
    return check_project(*project, required, err);
}

/* A map of config keys to values (obj, borrowed: out's keys point into it) into out (its
 * root untouched): at most QL_API_MAX_CONFIG_KEYS keys a project may set, values a string, an
 * integer, a boolean or null (no value: remove the override). where names obj in messages. */
static int parse_config_map(const json_t *obj, const char *where, ql_api_config_req_t *out,
                            ql_err_t *err) {
    if (json_object_size(obj) > QL_API_MAX_CONFIG_KEYS)
        return ql_err_set(err, QL_EINVAL, "%s: more than %d config keys", where,
                          QL_API_MAX_CONFIG_KEYS);
    const char *key;
    json_t *v;
    int rc;
    json_object_foreach((json_t *)obj, key, v) {
        char *text = NULL;
        if (json_is_string(v)) {
            text = strdup(json_string_value(v));
        } else if (json_is_integer(v)) {
            if (asprintf(&text, "%lld", (long long)json_integer_value(v)) < 0)
                text = NULL;
        } else if (json_is_boolean(v)) {
            text = strdup(json_is_true(v) ? "true" : "false");
        } else if (json_is_null(v)) {
            /* null removes the project's override. */
        } else {
            return ql_err_set(err, QL_EINVAL,
                              "%s: config key '%.128s': expected a string, an integer, a "
                              "boolean or null (to remove the override)",
                              where, key);
        }
        if (!json_is_null(v) && !text)
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        out->keys[out->n] = key;
        out->values[out->n] = text;
        out->n++;
        if (text && (rc = ql_config_validate_project_key(key, text, err)))
            return rc;
        if (!text && !ql_config_find_option(key))
            return ql_config_validate_project_key(key, "", err);
    }
    return 0;
}

int ql_api_parse_project(const char *body, size_t len, ql_api_project_req_t *out, ql_err_t *err) {
    static const ql_api_field_t fields[] = {{"name", AJ_STRING, true},
                                            {"description", AJ_STRING, false},
                                            {"override_kylin_properties", AJ_OBJECT, false},
                                            {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_root(body, len, &out->root, fields, err);
    if (rc)
        return rc;
    out->name = ql_api_json_str(out->root, "name");
    out->description = ql_api_json_str(out->root, "description");
    if ((rc = ql_meta_check_name("name", out->name, err)))
        return rc;
    if (out->description && strlen(out->description) > 4096)
        return ql_err_set(err, QL_EINVAL, "description: longer than 4096 characters");
    /* Kylin's project properties: the keys a project may set, checked as PUT config checks
     * them (a null value sets nothing on a new project). */
    const json_t *props = json_object_get(out->root, "override_kylin_properties");
    if (props && !json_is_null(props))
        return parse_config_map(props, "override_kylin_properties", &out->config, err);
    return 0;
}

void ql_api_project_req_free(ql_api_project_req_t *r) {
    ql_api_config_req_free(&r->config);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

void ql_api_config_req_free(ql_api_config_req_t *r) {
    for (size_t i = 0; i < r->n; i++)
        free(r->values[i]);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

int ql_api_parse_config(const char *body, size_t len, ql_api_config_req_t *out, ql_err_t *err) {
    memset(out, 0, sizeof *out);
    int rc = ql_api_json_parse(body, len, &out->root, err);
    if (rc)
        return rc;
    if (json_object_size(out->root) == 0)
        return ql_err_set(err, QL_EINVAL,
                          "request body: expected a map of config keys to values, e.g. "
                          "{\"kylin.web.timezone\":\"Asia/Shanghai\"}");
    return parse_config_map(out->root, "request body", out, err);
}

/* Kylin's AutoMergeTimeEnum: the auto-merge, volatile and retention range units. */
static int check_time_unit(const char *field, const char *s, ql_err_t *err) {
    static const char *const units[] = {"HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR"};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(s, units[i]) == 0)
            return 0;
    return ql_err_set(err, QL_EINVAL, "%s: '%.32s' is not HOUR, DAY, WEEK, MONTH, QUARTER or YEAR",
                      field, s);
}

/* Kylin's volatile_range or retention_range object (prefix "volatile_range" or
 * "retention_range"): checked, then ignored. */
static int check_range_setting(const json_t *root, const char *prefix, ql_err_t *err) {
    const json_t *o = json_object_get(root, prefix);
    if (!o || json_is_null(o))
        return 0;
    char number[48], enabled[48], type[48];
    snprintf(number, sizeof number, "%s_number", prefix);
    snprintf(enabled, sizeof enabled, "%s_enabled", prefix);
    snprintf(type, sizeof type, "%s_type", prefix);
    const ql_api_field_t fields[] = {{number, AJ_INT, false},
                                     {enabled, AJ_BOOL, false},
                                     {type, AJ_STRING, false},
                                     {NULL, 0, false}};
    int rc = ql_api_json_check(o, prefix, fields, err);
    if (rc)
        return rc;
    if (json_integer_value(json_object_get(o, number)) < 0)
        return ql_err_set(err, QL_EINVAL, "%s.%s: must not be negative", prefix, number);
    const char *t = ql_api_json_str(o, type);
    if (t) {
        char field[96];
        snprintf(field, sizeof field, "%s.%s", prefix, type);
        return check_time_unit(field, t, err);
    }
    return 0;
}

int ql_api_parse_project_segcfg(const char *body, size_t len, ql_api_project_segcfg_req_t *out,
                                ql_err_t *err) {
    static const ql_api_field_t fields[] = {{"auto_segment_build_enabled", AJ_BOOL, false},
                                            {"auto_merge_enabled", AJ_BOOL, false},
                                            {"auto_merge_time_ranges", AJ_STRLIST, false},
                                            {"volatile_range", AJ_OBJECT, false},
                                            {"retention_range", AJ_OBJECT, false},
                                            {"create_empty_segment_enabled", AJ_BOOL, false},
                                            {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_root(body, len, &out->root, fields, err);
    if (rc)
        return rc;
    if (json_object_size(out->root) == 0)
        return ql_err_set(err, QL_EINVAL,
                          "request body: expected auto_segment_build_enabled (or Kylin's "
                          "auto_merge_enabled, auto_merge_time_ranges, ...)");
    const json_t *ranges = json_object_get(out->root, "auto_merge_time_ranges");
    for (size_t i = 0; i < json_array_size(ranges); i++) {
        char field[48];
        snprintf(field, sizeof field, "auto_merge_time_ranges[%zu]", i);
        if ((rc = check_time_unit(field, json_string_value(json_array_get(ranges, i)), err)))
            return rc;
    }
    if ((rc = check_range_setting(out->root, "volatile_range", err)) ||
        (rc = check_range_setting(out->root, "retention_range", err)))
        return rc;
    out->has_enabled = ql_api_json_has(out->root, "auto_segment_build_enabled");
    out->enabled = json_is_true(json_object_get(out->root, "auto_segment_build_enabled"));
    return 0;
}

int ql_api_parse_model(const char *body, size_t len, ql_api_model_req_t *out, ql_err_t *err) {
    static const ql_api_field_t fields[] = {
        {"project", AJ_STRING, true},         {"name", AJ_STRING, true},
        {"model_type", AJ_STRING, false},     {"status", AJ_STRING, false},
        {"partition_desc", AJ_OBJECT, false}, {"multi_partition_desc", AJ_OBJECT, false},
        {"job_template", AJ_STRING, false},   {NULL, 0, false}};
    static const ql_api_field_t part_fields[] = {{"partition_date_column", AJ_STRING, true},
                                                 {"partition_date_format", AJ_STRING, true},
                                                 {NULL, 0, false}};
    static const ql_api_field_t multi_fields[] = {{"columns", AJ_STRLIST, true}, {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    ql_model_t *m = &out->model;
    int rc = parse_root(body, len, &out->root, fields, err);
    if (rc)
        return rc;
    const char *s;
    if ((rc = copy_str(m->project, sizeof m->project, "project",
                       ql_api_json_str(out->root, "project"), err)) ||
        (rc = copy_str(m->name, sizeof m->name, "name", ql_api_json_str(out->root, "name"), err)))
        return rc;
    /* The project is checked like a name here, so that an empty one is a 400 naming the field
     * before any lookup (an empty key once reached the store as a "corrupt" error). */
    if ((rc = ql_meta_check_name("project", m->project, err)) ||
        (rc = ql_meta_check_name("name", m->name, err)))
        return rc;
    m->type = QL_MODEL_BATCH;
    if ((s = ql_api_json_str(out->root, "model_type")) && ql_model_type_parse(s, &m->type))
        return ql_err_set(err, QL_EINVAL, "model_type: '%.64s' is not BATCH or STREAMING", s);
    m->status = QL_MODEL_ONLINE;
    if ((s = ql_api_json_str(out->root, "status")) && ql_model_status_parse(s, &m->status))
        return ql_err_set(err, QL_EINVAL, "status: '%.64s' is not ONLINE, OFFLINE or BROKEN", s);
    const json_t *pd = json_object_get(out->root, "partition_desc");
    if (pd && !json_is_null(pd)) {
        if ((rc = ql_api_json_check(pd, "partition_desc", part_fields, err)))
            return rc;
        m->partitioned = true;
        if ((rc = copy_str(m->partition_column, sizeof m->partition_column,
                           "partition_desc.partition_date_column",
                           ql_api_json_str(pd, "partition_date_column"), err)) ||
            (rc = copy_str(m->partition_format, sizeof m->partition_format,
                           "partition_desc.partition_date_format",
                           ql_api_json_str(pd, "partition_date_format"), err)))
            return rc;
        if (!m->partition_column[0])
            return ql_err_set(err, QL_EINVAL,
                              "partition_desc.partition_date_column: must not be empty");
        if (!m->partition_format[0])
            return ql_err_set(err, QL_EINVAL,
                              "partition_desc.partition_date_format: must not be empty");
    }
    const json_t *mp = json_object_get(out->root, "multi_partition_desc");
    if (mp && !json_is_null(mp)) {
        if ((rc = ql_api_json_check(mp, "multi_partition_desc", multi_fields, err)))
            return rc;
        const json_t *cols = json_object_get(mp, "columns");
        if (json_array_size(cols) == 0)
            return ql_err_set(err, QL_EINVAL,
                              "multi_partition_desc.columns: expected at least one column");
        ql_api_sb_t b = {0};
        for (size_t i = 0; i < json_array_size(cols); i++) {
            const char *c = json_string_value(json_array_get(cols, i));
            if (!c[0] || strchr(c, ',') || strlen(c) > QL_COLUMN_MAX) {
                ql_api_sb_free(&b);
                return ql_err_set(err, QL_EINVAL,
                                  "multi_partition_desc.columns[%zu]: expected a column name of "
                                  "1 to %d characters without ','",
                                  i, QL_COLUMN_MAX);
            }
            ql_api_sb_printf(&b, "%s%s", i ? "," : "", c);
        }
        if (b.failed) {
            ql_api_sb_free(&b);
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        }
        m->multi_partition_columns = b.p; /* owned by the model now */
    }
    if ((s = ql_api_json_str(out->root, "job_template")) && s[0]) {
        if ((rc = copy_str(m->job_template, sizeof m->job_template, "job_template", s, err)) ||
            (rc = ql_meta_check_name("job_template", s, err)))
            return rc;
    }
    return 0;
}

int ql_api_parse_model_segcfg(const char *body, size_t len, ql_api_model_segcfg_req_t *out,
                              ql_err_t *err) {
    static const ql_api_field_t fields[] = {
        {"project", AJ_STRING, true}, {"auto_segment_build", AJ_OBJECT, true}, {NULL, 0, false}};
    static const ql_api_field_t asb[] = {{"enabled", AJ_BOOL, false},
                                         {"trigger_time", AJ_STRING, false},
                                         {"logical_date_offset_days", AJ_INT, false},
                                         {"data_range_start_time", AJ_STRING, false},
                                         {"data_range_end_time", AJ_STRING, false},
                                         {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_project_root(body, len, &out->root, fields, true, &out->project, err);
    if (rc)
        return rc;
    const json_t *a = json_object_get(out->root, "auto_segment_build");
    if ((rc = ql_api_json_check(a, "auto_segment_build", asb, err)))
        return rc;
    if (ql_api_json_has(a, "enabled")) {
        out->has_enabled = true;
        out->enabled = json_is_true(json_object_get(a, "enabled"));
    }
    out->trigger_time = ql_api_json_str(a, "trigger_time");
    out->start_time = ql_api_json_str(a, "data_range_start_time");
    out->end_time = ql_api_json_str(a, "data_range_end_time");
    if (ql_api_json_has(a, "logical_date_offset_days")) {
        out->has_offset = true;
        out->offset_days = json_integer_value(json_object_get(a, "logical_date_offset_days"));
        /* Checked here too, not only when the merged config is validated: INT64_MIN is the
         * stored config's "not set", which a client must not be able to send. */
        if (out->offset_days < 1 || out->offset_days > QL_AUTO_BUILD_MAX_OFFSET_DAYS)
            return ql_err_set(err, QL_EINVAL,
                              "auto_segment_build.logical_date_offset_days: %lld is out of range "
                              "(an integer from 1 to %d)",
                              (long long)out->offset_days, QL_AUTO_BUILD_MAX_OFFSET_DAYS);
    }
    /* Stored strings have a fixed size; a longer one can only be invalid anyway. */
    const char *const strs[] = {out->trigger_time, out->start_time, out->end_time};
    const char *const names[] = {"trigger_time", "data_range_start_time", "data_range_end_time"};
    for (int i = 0; i < 3; i++)
        if (strs[i] && strlen(strs[i]) > QL_HMS_MAX)
            return ql_err_set(err, QL_EINVAL,
                              "auto_segment_build.%s: '%.32s' is not a time of day HH:mm:ss",
                              names[i], strs[i]);
    return 0;
}

int ql_api_parse_model_status(const char *body, size_t len, ql_api_model_status_req_t *out,
                              ql_err_t *err) {
    static const ql_api_field_t fields[] = {
        {"project", AJ_STRING, true}, {"status", AJ_STRING, true}, {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_project_root(body, len, &out->root, fields, true, &out->project, err);
    if (rc)
        return rc;
    const char *s = ql_api_json_str(out->root, "status");
    if (ql_model_status_parse(s, &out->status))
        return ql_err_set(err, QL_EINVAL, "status: '%.64s' is not ONLINE, OFFLINE or BROKEN", s);
    return 0;
}

/* Kylin's optional fields of builds, merges and refreshes that Qilin keeps: priority (an integer
 * or its digits, as Kylin reads it), yarn_queue and tag (any JSON value, kept as its compact
 * text). The others of the same requests are checked by type and ignored (docs/rest.md). */
static int parse_job_extras(const json_t *root, ql_api_job_extras_t *x, ql_err_t *err) {
    x->priority = QL_PRIORITY_DEFAULT;
    const json_t *pv = json_object_get(root, "priority");
    if (pv && !json_is_null(pv)) {
        int64_t p = 0;
        if (json_is_integer(pv))
            p = json_integer_value(pv);
        else if (ql_api_parse_i64(json_string_value(pv), &p))
            return ql_err_set(err, QL_EINVAL, "priority: '%.32s' is not an integer",
                              json_string_value(pv));
        if (p < QL_PRIORITY_MIN || p > QL_PRIORITY_MAX)
            return ql_err_set(err, QL_EINVAL, "priority: %lld is outside %d..%d (0 is highest)",
                              (long long)p, QL_PRIORITY_MIN, QL_PRIORITY_MAX);
        x->priority = (int)p;
    }
    const char *q = ql_api_json_str(root, "yarn_queue");
    if (q) {
        int rc = copy_str(x->yarn_queue, sizeof x->yarn_queue, "yarn_queue", q, err);
        if (rc)
            return rc;
        for (const char *c = q; *c; c++)
            if ((unsigned char)*c < 0x20)
                return ql_err_set(err, QL_EINVAL, "yarn_queue: contains a control character");
    }
    const json_t *tag = json_object_get(root, "tag");
    if (tag && !json_is_null(tag)) {
        size_t n = json_dumpb(tag, x->tag, sizeof x->tag - 1, JSON_COMPACT | JSON_ENCODE_ANY);
        if (n == 0 || n > sizeof x->tag - 1)
            return ql_err_set(err, QL_EINVAL, "tag: longer than %d bytes as JSON text",
                              QL_JOB_TAG_MAX);
        x->tag[n] = '\0';
    }
    return 0;
}

int ql_api_parse_build(const char *body, size_t len, ql_api_build_req_t *out, ql_err_t *err) {
    static const ql_api_field_t fields[] = {{"project", AJ_STRING, true},
                                            {"start", AJ_TIME, false},
                                            {"end", AJ_TIME, false},
                                            {"priority", AJ_INTTEXT, false},
                                            {"build_all_indexes", AJ_BOOL, false},
                                            {"build_all_sub_partitions", AJ_BOOL, false},
                                            {"sub_partition_values", AJ_LISTS, false},
                                            {"ignored_snapshot_tables", AJ_STRLIST, false},
                                            {"partial_build", AJ_BOOL, false},
                                            {"batch_index_ids", AJ_INTLIST, false},
                                            {"yarn_queue", AJ_STRING, false},
                                            {"tag", AJ_ANY, false},
                                            {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_project_root(body, len, &out->root, fields, true, &out->project, err);
    if (rc)
        return rc;
    bool hs = ql_api_json_has(out->root, "start"), he = ql_api_json_has(out->root, "end");
    if (hs != he)
        return ql_err_set(err, QL_ENORANGE, "%s: a build gives both start and end, or neither",
                          hs ? "end" : "start");
    if (hs) {
        if ((rc = ql_api_json_time(json_object_get(out->root, "start"), "start", &out->start,
                                   err)) ||
            (rc = ql_api_json_time(json_object_get(out->root, "end"), "end", &out->end, err)))
            return rc;
        out->has_range = true;
        /* The store's bounds (ql_records.h), checked here so the answer names the field of
         * the request: no time before the epoch, none past 9999-12-31. */
        if (out->start < 0 || out->end > QL_TIME_MAX)
            return ql_meta_check_range("start", "end", out->start, out->end, false, err);
        if (out->start >= out->end)
            return ql_err_set(err, QL_EINVAL,
                              "start: %lld is not earlier than end %lld (ranges are [start, end) "
                              "in epoch milliseconds)",
                              (long long)out->start, (long long)out->end);
    }
    if ((rc = parse_job_extras(out->root, &out->x, err)))
        return rc;
    out->priority = out->x.priority;
    return 0;
}

void ql_api_ids_req_free(ql_api_ids_req_t *r) {
    free(r->ids);
    free(r->names);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

/* Parses an array of ids (checked as AJ_STRLIST) into out->ids: well-formed, no repeats. */
static int parse_ids(const json_t *arr, const char *field, const char *what, ql_api_ids_req_t *out,
                     ql_err_t *err) {
    size_t n = json_array_size(arr);
    if (n == 0)
        return ql_err_set(err, QL_EINVAL, "%s: expected at least one %s id", field, what);
    if (n > QL_API_MAX_IDS)
        return ql_err_set(err, QL_EINVAL, "%s: more than %d ids", field, QL_API_MAX_IDS);
    if (!(out->ids = calloc(n, sizeof *out->ids)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (ql_id_parse(s, &out->ids[i]))
            return ql_err_set(err, QL_EINVAL, "%s[%zu]: '%.64s' is not a %s id", field, i, s, what);
        for (size_t k = 0; k < i; k++)
            if (ql_id_eq(&out->ids[k], &out->ids[i]))
                return ql_err_set(err, QL_EINVAL, "%s: %s %s is named twice", field, what, s);
        out->n = i + 1;
    }
    return 0;
}

/* PUT segments' names: an owned array of strings borrowed from the body, no repeats. */
static int parse_names(const json_t *arr, ql_api_ids_req_t *out, ql_err_t *err) {
    size_t n = json_array_size(arr);
    if (n > QL_API_MAX_IDS)
        return ql_err_set(err, QL_EINVAL, "names: more than %d names", QL_API_MAX_IDS);
    if (!(out->names = calloc(n, sizeof *out->names)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        for (size_t k = 0; k < i; k++)
            if (strcmp(out->names[k], s) == 0)
                return ql_err_set(err, QL_EINVAL, "names: segment %.64s is named twice", s);
        out->names[i] = s;
        out->n_names = i + 1;
    }
    return 0;
}

int ql_api_parse_segments_put(const char *body, size_t len, ql_api_ids_req_t *out, ql_err_t *err) {
    static const ql_api_field_t fields[] = {{"project", AJ_STRING, true},
                                            {"type", AJ_STRING, false},
                                            {"ids", AJ_STRLIST, false},
                                            {"names", AJ_STRLIST, false},
                                            {"refresh_all_indexes", AJ_BOOL, false},
                                            {"ignored_snapshot_tables", AJ_STRLIST, false},
                                            {"priority", AJ_INTTEXT, false},
                                            {"partial_build", AJ_BOOL, false},
                                            {"batch_index_ids", AJ_INTLIST, false},
                                            {"yarn_queue", AJ_STRING, false},
                                            {"tag", AJ_ANY, false},
                                            {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_project_root(body, len, &out->root, fields, true, &out->project, err);
    if (rc)
        return rc;
    /* Kylin's default type is REFRESH. */
    const char *type = ql_api_json_str(out->root, "type");
    if (type && strcmp(type, "MERGE") == 0)
        out->merge = true;
    else if (type && strcmp(type, "REFRESH") != 0)
        return ql_err_set(err, QL_EINVAL, "type: '%.64s' is not MERGE or REFRESH", type);
    if ((rc = parse_job_extras(out->root, &out->x, err)))
        return rc;
    const json_t *ids = json_object_get(out->root, "ids");
    const json_t *names = json_object_get(out->root, "names");
    bool has_ids = json_array_size(ids) > 0, has_names = json_array_size(names) > 0;
    if (has_ids && has_names)
        return ql_err_set(err, QL_EINVAL,
                          "ids, names: give the segments by ids or by names, "
                          "not both");
    if (has_names) {
        if ((rc = parse_names(names, out, err)))
            return rc;
    } else if ((rc = parse_ids(ids, "ids", "segment", out, err))) {
        return rc;
    }
    size_t n = has_names ? out->n_names : out->n;
    if (out->merge && n < 2)
        return ql_err_set(err, QL_EINVAL, "%s: a merge needs at least two segments, got %zu",
                          has_names ? "names" : "ids", n);
    return 0;
}

int ql_api_parse_job_status(const char *body, size_t len, ql_api_ids_req_t *out, ql_err_t *err) {
    static const ql_api_field_t fields[] = {{"project", AJ_STRING, false},
                                            {"job_ids", AJ_STRLIST, false},
                                            {"statuses", AJ_STRLIST, false},
                                            {"action", AJ_STRING, true},
                                            {NULL, 0, false}};
    memset(out, 0, sizeof *out);
    int rc = parse_project_root(body, len, &out->root, fields, false, &out->project, err);
    if (rc)
        return rc;
    const char *action = ql_api_json_str(out->root, "action");
    if (ql_action_parse(action, &out->action))
        return ql_err_set(err, QL_EINVAL,
                          "action: '%.64s' is not PAUSE, RESUME, DISCARD or RESTART", action);
    const json_t *st = json_object_get(out->root, "statuses");
    for (size_t i = 0; i < json_array_size(st); i++) {
        const char *s = json_string_value(json_array_get(st, i));
        uint32_t m = ql_job_display_mask(s);
        if (!m)
            return ql_err_set(err, QL_EINVAL,
                              "statuses[%zu]: '%.64s' is not a job status (PENDING, RUNNING, "
                              "ERROR, FINISHED, STOPPED, DISCARDED)",
                              i, s);
        out->status_mask |= m;
    }
    const json_t *ids = json_object_get(out->root, "job_ids");
    if (json_array_size(ids) > 0)
        return parse_ids(ids, "job_ids", "job", out, err);
    /* Kylin's form for many jobs: every job of the project in the given states. */
    if (!out->status_mask)
        return ql_err_set(err, QL_EINVAL,
                          "job_ids: expected at least one job id, or statuses to act on every job "
                          "of the project in those states");
    if (!out->project || !out->project[0])
        return ql_err_set(err, QL_EINVAL, "project: required when the jobs are chosen by statuses");
    return 0;
}
