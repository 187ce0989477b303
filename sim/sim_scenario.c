/*
 * Loading a scenario file (docs/design/scenarios.md, File): the header keys, the server config
 * through the config table, the templates, and the set-up (projects, models, segments, the jobs of
 * NEW segments), all written down as given. Steps are parsed in sim_steps.c, expectations in
 * sim_expect.c. Every problem is reported as "file:line: reason" and fails the whole load.
 */
#include "sim_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every job type gets one built-in noop step unless the file's templates define it. */
static const char builtin_templates[] =
    "templates:\n"
    "  INC_BUILD: {steps: [{name: Build, kind: noop}]}\n"
    "  INDEX_REFRESH: {steps: [{name: Refresh, kind: noop}]}\n"
    "  INDEX_MERGE: {steps: [{name: Merge, kind: noop}]}\n"
    "  INDEX_BUILD: {steps: [{name: Build indexes, kind: noop}]}\n";

/* ---- values ---- */

int sim_copy_str(const ql_yaml_node_t *node, const char *what, char *buf, size_t cap,
                 ql_err_t *err) {
    const char *s;
    int rc = ql_yaml_as_str(node, what, &s, err);
    if (rc)
        return rc;
    if (strlen(s) >= cap)
        return ql_yaml_errorf(err, node, "%s: longer than %zu characters", what, cap - 1);
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

/* A strict "YYYY-MM-DD HH:mm:ss": exactly 19 characters, two digits per field. */
static bool parse_wall(const char *s, ql_civil_t *c) {
    static const char shape[] = "dddd-dd-dd dd:dd:dd";
    if (strlen(s) != sizeof shape - 1)
        return false;
    for (size_t i = 0; i < sizeof shape - 1; i++)
        if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != shape[i])
            return false;
    int y = atoi(s);
    memset(c, 0, sizeof *c);
    c->year = y;
    c->month = atoi(s + 5);
    c->day = atoi(s + 8);
    c->hour = atoi(s + 11);
    c->minute = atoi(s + 14);
    c->second = atoi(s + 17);
    return ql_civil_check(c) == 0;
}

int sim_parse_time(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, const char *what,
                   int64_t *out, ql_err_t *err) {
    int64_t v;
    if (node->kind == QL_YAML_SCALAR && node->plain &&
        ql_yaml_as_int(node, what, INT64_MIN, INT64_MAX, &v, NULL) == 0) {
        *out = v;
        return 0;
    }
    char desc[64];
    ql_civil_t c;
    if (node->kind != QL_YAML_SCALAR || ql_yaml_is_null(node) || !parse_wall(node->str, &c))
        return ql_yaml_errorf(err, node,
                              "%s: expected a time \"YYYY-MM-DD HH:mm:ss\" (in the file's "
                              "timezone %s) or epoch milliseconds, got %s",
                              what, sc->zone, ql_yaml_describe(node, desc, sizeof desc));
    /* ql_tz_from_civil resolves like java.time: the earlier instant of a repeated wall time,
     * later by the gap for one that does not exist. */
    if (ql_tz_from_civil(sc->tz, &c, out))
        return ql_yaml_errorf(err, node, "%s: %s is not a valid time", what, node->str);
    return 0;
}

int sim_get_time(const ql_sim_scenario_t *sc, const ql_yaml_node_t *map, const char *key,
                 int64_t *out, ql_err_t *err) {
    const ql_yaml_node_t *v = ql_yaml_map_find(map, key);
    if (!v)
        return ql_yaml_errorf(err, map, "missing required key '%s'", key);
    char what[64];
    snprintf(what, sizeof what, "key '%s'", key);
    return sim_parse_time(sc, v, what, out, err);
}

int sim_parse_range(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, const char *what,
                    int64_t *start, int64_t *end, ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_SEQUENCE, what, err);
    if (rc)
        return rc;
    if (node->n_items != 2)
        return ql_yaml_errorf(err, node, "%s: expected [start, end], got %zu items", what,
                              node->n_items);
    char w[96];
    snprintf(w, sizeof w, "%s start", what);
    if ((rc = sim_parse_time(sc, node->items[0], w, start, err)))
        return rc;
    snprintf(w, sizeof w, "%s end", what);
    return sim_parse_time(sc, node->items[1], w, end, err);
}

void sim_format_time(const ql_sim_scenario_t *sc, int64_t ms, char *buf, size_t cap) {
    ql_civil_t c;
    ql_tz_to_civil(sc->tz, ms, &c);
    int off = ql_tz_offset_sec(sc->tz, ms);
    char sign = off < 0 ? '-' : '+';
    if (off < 0)
        off = -off;
    snprintf(buf, cap, "%04lld-%02d-%02d %02d:%02d:%02d%c%02d:%02d", (long long)c.year, c.month,
             c.day, c.hour, c.minute, c.second, sign, off / 3600, off / 60 % 60);
}

int sim_resolve_model(const ql_sim_scenario_t *sc, const ql_yaml_node_t *map, size_t *out,
                      ql_err_t *err) {
    const ql_yaml_node_t *mn = ql_yaml_map_find(map, "model");
    const ql_yaml_node_t *pn = ql_yaml_map_find(map, "project");
    if (!mn)
        return ql_yaml_errorf(err, map, "missing required key 'model'");
    const char *model, *project = NULL;
    int rc = ql_yaml_as_str(mn, "key 'model'", &model, err);
    if (!rc && pn)
        rc = ql_yaml_as_str(pn, "key 'project'", &project, err);
    if (rc)
        return rc;
    size_t found = SIZE_MAX, n = 0;
    for (size_t i = 0; i < sc->n_models; i++) {
        const sim_model_def_t *m = &sc->models[i];
        if (strcmp(m->name, model) != 0)
            continue;
        if (project && strcmp(sc->projects[m->project].name, project) != 0)
            continue;
        found = i;
        n++;
    }
    if (n == 1) {
        *out = found;
        return 0;
    }
    if (n > 1)
        return ql_yaml_errorf(
            err, mn, "model '%s' is in several projects: add project: to say which", model);
    if (project)
        return ql_yaml_errorf(err, mn, "unknown model '%s' in project '%s'", model, project);
    return ql_yaml_errorf(err, mn, "unknown model '%s' (not in the set-up)", model);
}

/* ---- auto_segment_build, stored as written ---- */

/* A HH:mm:ss field kept as its text: missing or null is "" (which the dispatcher reports as
 * invalid), anything longer than the record keeps is refused (it could not be stored as
 * written). */
static int auto_text(const ql_yaml_node_t *map, const char *key, char *buf, size_t cap,
                     ql_err_t *err) {
    const ql_yaml_node_t *v = ql_yaml_map_find(map, key);
    buf[0] = '\0';
    if (!v || ql_yaml_is_null(v))
        return 0;
    char what[80];
    snprintf(what, sizeof what, "auto_segment_build.%s", key);
    if (v->kind != QL_YAML_SCALAR)
        return ql_yaml_errorf(err, v, "%s: expected a scalar, got %s", what,
                              v->kind == QL_YAML_SEQUENCE ? "a sequence" : "a mapping");
    return sim_copy_str(v, what, buf, cap, err);
}

int sim_parse_auto_build(const ql_yaml_node_t *node, ql_auto_build_t *out, ql_err_t *err) {
    static const char *const keys[] = {"enabled",
                                       "trigger_time",
                                       "logical_date_offset_days",
                                       "data_range_start_time",
                                       "data_range_end_time",
                                       NULL};
    memset(out, 0, sizeof *out);
    out->logical_date_offset_days = INT64_MIN;
    if (ql_yaml_is_null(node))
        return 0;
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "key 'auto_segment_build'", err);
    if (rc || (rc = ql_yaml_check_keys(node, keys, err)))
        return rc;
    out->present = true;
    if ((rc = ql_yaml_get_bool(node, "enabled", QL_YAML_OPTIONAL, &out->enabled, err)))
        return rc;
    const ql_yaml_node_t *off = ql_yaml_map_find(node, "logical_date_offset_days");
    int64_t v;
    /* Anything but an integer is stored as "not an integer", like a record of an older
     * version whose value the dispatcher cannot use. */
    if (off && off->kind == QL_YAML_SCALAR && off->plain &&
        ql_yaml_as_int(off, "offset", INT64_MIN + 1, INT64_MAX, &v, NULL) == 0)
        out->logical_date_offset_days = v;
    else if (off && off->kind != QL_YAML_SCALAR)
        return ql_yaml_errorf(err, off,
                              "auto_segment_build.logical_date_offset_days: expected "
                              "a scalar");
    if ((rc = auto_text(node, "trigger_time", out->trigger_time, sizeof out->trigger_time, err)) ||
        (rc = auto_text(node, "data_range_start_time", out->data_range_start_time,
                        sizeof out->data_range_start_time, err)) ||
        (rc = auto_text(node, "data_range_end_time", out->data_range_end_time,
                        sizeof out->data_range_end_time, err)))
        return rc;
    return 0;
}

/* ---- the set-up ---- */

static int parse_job_def(const ql_yaml_node_t *node, sim_job_def_t *out, ql_err_t *err) {
    static const char *const keys[] = {"type", "state", "submitter", NULL};
    memset(out, 0, sizeof *out);
    out->present = true;
    snprintf(out->type, sizeof out->type, "INC_BUILD");
    snprintf(out->submitter, sizeof out->submitter, "ADMIN");
    const ql_yaml_node_t *state = node;
    int rc;
    if (node->kind == QL_YAML_MAPPING) {
        if ((rc = ql_yaml_check_keys(node, keys, err)))
            return rc;
        const ql_yaml_node_t *t = ql_yaml_map_find(node, "type");
        if (t && (rc = sim_copy_str(t, "job type", out->type, sizeof out->type, err)))
            return rc;
        if (strcmp(out->type, "INC_BUILD") && strcmp(out->type, "INDEX_REFRESH") &&
            strcmp(out->type, "INDEX_MERGE"))
            return ql_yaml_errorf(err, t,
                                  "job type: '%s' does not own a NEW segment (expected "
                                  "INC_BUILD, INDEX_REFRESH or INDEX_MERGE)",
                                  out->type);
        const ql_yaml_node_t *sub = ql_yaml_map_find(node, "submitter");
        if (sub &&
            (rc = sim_copy_str(sub, "job submitter", out->submitter, sizeof out->submitter, err)))
            return rc;
        if (!(state = ql_yaml_map_find(node, "state")))
            return ql_yaml_errorf(err, node, "missing required key 'state'");
    }
    const char *s;
    if ((rc = ql_yaml_as_str(state, "job state", &s, err)))
        return rc;
    if (ql_state_parse(s, &out->state) || (unsigned)out->state >= QL_JOB_STATE_COUNT)
        return ql_yaml_errorf(err, state,
                              "job state: '%s' is not a job state (READY, PENDING, RUNNING, "
                              "ERROR, PAUSED, DISCARDED, SUCCEED, SUICIDAL)",
                              s);
    return 0;
}

static int parse_segment(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node,
                         sim_seg_def_t *out, ql_err_t *err) {
    static const char *const keys[] = {"start", "end", "status", "job", NULL};
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "segment", err);
    if (rc || (rc = ql_yaml_check_keys(node, keys, err)))
        return rc;
    memset(out, 0, sizeof *out);
    out->line = node->line;
    if ((rc = sim_get_time(sc, node, "start", &out->start, err)) ||
        (rc = sim_get_time(sc, node, "end", &out->end, err)))
        return rc;
    if (out->start >= out->end)
        return ql_yaml_errorf(err, node, "segment: start must be earlier than end");
    const char *status;
    if ((rc = ql_yaml_get_str(node, "status", QL_YAML_REQUIRED, &status, err)))
        return rc;
    if (ql_seg_status_parse(status, &out->status))
        return ql_yaml_errorf(err, ql_yaml_map_find(node, "status"),
                              "segment status: '%s' is not NEW, READY or WARNING", status);
    const ql_yaml_node_t *job = ql_yaml_map_find(node, "job");
    if (job) {
        if (out->status != QL_SEG_NEW)
            return ql_yaml_errorf(err, job,
                                  "job: only a NEW segment has a job that builds it (this "
                                  "one is %s)",
                                  status);
        if ((rc = parse_job_def(job, &out->job, err)))
            return rc;
    }
    return 0;
}

static int parse_model(ql_sim_scenario_t *sc, size_t project, const ql_yaml_node_t *node,
                       ql_err_t *err) {
    static const char *const keys[] = {
        "name",     "type",         "status", "partition", "multi_partition", "auto_segment_build",
        "segments", "job_template", NULL};
    static const char *const pkeys[] = {"column", "format", NULL};
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "model", err);
    if (rc || (rc = ql_yaml_check_keys(node, keys, err)))
        return rc;
    sim_model_def_t *m = &sc->models[sc->n_models];
    memset(m, 0, sizeof *m);
    m->project = project;
    m->line = node->line;
    m->auto_build.logical_date_offset_days = INT64_MIN;
    sc->n_models++;
    const ql_yaml_node_t *v = ql_yaml_map_find(node, "name");
    if (!v)
        return ql_yaml_errorf(err, node, "missing required key 'name'");
    if ((rc = sim_copy_str(v, "model name", m->name, sizeof m->name, err)))
        return rc;
    for (size_t i = 0; i + 1 < sc->n_models; i++)
        if (sc->models[i].project == project && strcmp(sc->models[i].name, m->name) == 0)
            return ql_yaml_errorf(err, v, "model '%s' is defined twice in project '%s'", m->name,
                                  sc->projects[project].name);
    const char *s;
    if ((v = ql_yaml_map_find(node, "type"))) {
        if ((rc = ql_yaml_as_str(v, "model type", &s, err)))
            return rc;
        if (ql_model_type_parse(s, &m->type))
            return ql_yaml_errorf(err, v, "model type: '%s' is not BATCH or STREAMING", s);
    }
    if ((v = ql_yaml_map_find(node, "status"))) {
        if ((rc = ql_yaml_as_str(v, "model status", &s, err)))
            return rc;
        if (ql_model_status_parse(s, &m->status))
            return ql_yaml_errorf(err, v, "model status: '%s' is not ONLINE, OFFLINE or BROKEN", s);
    }
    if ((v = ql_yaml_map_find(node, "partition"))) {
        if ((rc = ql_yaml_expect(v, QL_YAML_MAPPING, "key 'partition'", err)) ||
            (rc = ql_yaml_check_keys(v, pkeys, err)))
            return rc;
        const ql_yaml_node_t *c = ql_yaml_map_find(v, "column"), *f = ql_yaml_map_find(v, "format");
        if (!c || !f)
            return ql_yaml_errorf(err, v, "missing required key '%s'", c ? "format" : "column");
        if ((rc = sim_copy_str(c, "partition column", m->column, sizeof m->column, err)) ||
            (rc = sim_copy_str(f, "partition format", m->format, sizeof m->format, err)))
            return rc;
        m->partitioned = true;
    }
    if ((v = ql_yaml_map_find(node, "multi_partition"))) {
        char **cols;
        size_t n;
        if ((rc = ql_yaml_as_strv(v, "key 'multi_partition'", true, &cols, &n, err)))
            return rc;
        size_t len = 1;
        for (size_t i = 0; i < n; i++)
            len += strlen(cols[i]) + 1;
        if (!(m->multi_partition = calloc(1, len))) {
            ql_yaml_strv_free(cols);
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < n; i++) {
            if (i)
                strcat(m->multi_partition, ",");
            strcat(m->multi_partition, cols[i]);
        }
        ql_yaml_strv_free(cols);
    }
    if ((v = ql_yaml_map_find(node, "auto_segment_build")) &&
        (rc = sim_parse_auto_build(v, &m->auto_build, err)))
        return rc;
    if ((v = ql_yaml_map_find(node, "job_template"))) {
        if ((rc = sim_copy_str(v, "job_template", m->job_template, sizeof m->job_template, err)))
            return rc;
        if (!ql_templates_has_set(sc->templates, m->job_template))
            return ql_yaml_errorf(err, v, "job_template: there is no template set '%s'",
                                  m->job_template);
    }
    if ((v = ql_yaml_map_find(node, "segments"))) {
        if ((rc = ql_yaml_expect(v, QL_YAML_SEQUENCE, "key 'segments'", err)))
            return rc;
        if (v->n_items && !(m->segs = calloc(v->n_items, sizeof *m->segs)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        for (size_t i = 0; i < v->n_items; i++) {
            if ((rc = parse_segment(sc, v->items[i], &m->segs[i], err)))
                return rc;
            m->n_segs++;
        }
    }
    return 0;
}

static size_t count_models(const ql_yaml_node_t *projects) {
    size_t n = 0;
    for (size_t i = 0; i < projects->n_items; i++) {
        const ql_yaml_node_t *ms = ql_yaml_map_find(projects->items[i], "models");
        if (ms && ms->kind == QL_YAML_SEQUENCE)
            n += ms->n_items;
    }
    return n;
}

static int parse_projects(ql_sim_scenario_t *sc, const ql_yaml_node_t *node, ql_err_t *err) {
    static const char *const keys[] = {"name", "timezone", "auto_segment_build_enabled", "models",
                                       NULL};
    int rc = ql_yaml_expect(node, QL_YAML_SEQUENCE, "key 'projects'", err);
    if (rc)
        return rc;
    size_t nm = count_models(node);
    if ((node->n_items && !(sc->projects = calloc(node->n_items, sizeof *sc->projects))) ||
        (nm && !(sc->models = calloc(nm, sizeof *sc->models))))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < node->n_items; i++) {
        const ql_yaml_node_t *pn = node->items[i];
        if ((rc = ql_yaml_expect(pn, QL_YAML_MAPPING, "project", err)) ||
            (rc = ql_yaml_check_keys(pn, keys, err)))
            return rc;
        sim_project_def_t *p = &sc->projects[sc->n_projects++];
        p->line = pn->line;
        const ql_yaml_node_t *v = ql_yaml_map_find(pn, "name");
        if (!v)
            return ql_yaml_errorf(err, pn, "missing required key 'name'");
        if ((rc = sim_copy_str(v, "project name", p->name, sizeof p->name, err)))
            return rc;
        for (size_t k = 0; k + 1 < sc->n_projects; k++)
            if (strcmp(sc->projects[k].name, p->name) == 0)
                return ql_yaml_errorf(err, v, "project '%s' is defined twice", p->name);
        if ((v = ql_yaml_map_find(pn, "timezone"))) {
            if ((rc = sim_copy_str(v, "project timezone", p->timezone, sizeof p->timezone, err)))
                return rc;
            p->has_timezone = true;
        }
        if ((rc = ql_yaml_get_bool(pn, "auto_segment_build_enabled", QL_YAML_OPTIONAL, &p->enabled,
                                   err)))
            return rc;
        if ((v = ql_yaml_map_find(pn, "models"))) {
            if ((rc = ql_yaml_expect(v, QL_YAML_SEQUENCE, "key 'models'", err)))
                return rc;
            for (size_t k = 0; k < v->n_items; k++)
                if ((rc = parse_model(sc, sc->n_projects - 1, v->items[k], err)))
                    return rc;
        }
    }
    return 0;
}

/* ---- config and templates ---- */

static int parse_config(ql_sim_scenario_t *sc, const ql_yaml_node_t *node, ql_err_t *err) {
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "key 'config'", err);
    for (size_t i = 0; !rc && i < node->n_pairs; i++) {
        const ql_yaml_node_t *k = node->pairs[i].key, *v = node->pairs[i].value;
        const ql_config_option_t *o = ql_config_find_option(k->str);
        if (!o) /* ql_config_set words the message, with the closest known key */
            return ql_config_set(sc->cfg, k->str, "", sc->file, (int)k->line, err);
        char buf[1024];
        const char *text = "";
        if (v->kind == QL_YAML_SEQUENCE && o->type == QL_CONFIG_LIST) {
            size_t off = 0;
            buf[0] = '\0';
            for (size_t j = 0; j < v->n_items; j++) {
                const ql_yaml_node_t *it = v->items[j];
                if (it->kind != QL_YAML_SCALAR || ql_yaml_is_null(it))
                    return ql_yaml_errorf(err, it, "%s: list items must be plain values", k->str);
                off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", j ? "," : "", it->str);
                if (off >= sizeof buf)
                    return ql_yaml_errorf(err, v, "%s: the list is too long", k->str);
            }
            text = buf;
        } else if (v->kind != QL_YAML_SCALAR) {
            return ql_yaml_errorf(err, v, "%s takes a single value", k->str);
        } else if (!ql_yaml_is_null(v)) {
            text = v->str;
        }
        rc = ql_config_set(sc->cfg, k->str, text, sc->file, (int)k->line, err);
    }
    return rc;
}

/* Records the first shell step of a template document (a chain mapping per job type). */
static void find_shell(ql_sim_scenario_t *sc, const ql_yaml_node_t *set, const char *set_name) {
    if (!set || set->kind != QL_YAML_MAPPING || sc->shell_line)
        return;
    for (size_t i = 0; i < set->n_pairs; i++) {
        const ql_yaml_node_t *steps = ql_yaml_map_find(set->pairs[i].value, "steps");
        for (size_t k = 0; steps && steps->kind == QL_YAML_SEQUENCE && k < steps->n_items; k++) {
            const ql_yaml_node_t *kind = ql_yaml_map_find(steps->items[k], "kind");
            const ql_yaml_node_t *name = ql_yaml_map_find(steps->items[k], "name");
            if (kind && kind->kind == QL_YAML_SCALAR && strcmp(kind->str, "shell") == 0) {
                sc->shell_line = steps->items[k]->line;
                snprintf(sc->shell_desc, sizeof sc->shell_desc, "step '%.40s' of %s%s%.40s",
                         name && name->kind == QL_YAML_SCALAR ? name->str : "?",
                         set->pairs[i].key->str, set_name ? " in template set " : "",
                         set_name ? set_name : "");
                return;
            }
        }
    }
}

/* Gives every built-in job type the file does not define its one noop step, so a scenario that
 * only cares about INC_BUILD still can hold refreshes and merges. */
static int add_builtin_chains(ql_templates_t *t, ql_err_t *err) {
    ql_templates_t *b;
    int rc = ql_templates_load_buffer(builtin_templates, sizeof builtin_templates - 1,
                                      "<built-in templates>", &b, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < b->defaults.n_chains; i++) {
        ql_chain_t *c = &b->defaults.chains[i];
        bool have = false;
        for (size_t k = 0; k < t->defaults.n_chains; k++)
            have |= strcmp(t->defaults.chains[k].job_type, c->job_type) == 0;
        if (have)
            continue;
        ql_chain_t *p = realloc(t->defaults.chains, (t->defaults.n_chains + 1) * sizeof *p);
        if (!p) {
            ql_templates_free(b);
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        }
        t->defaults.chains = p;
        /* Moved, not copied: the built-in set gives it up. */
        p[t->defaults.n_chains++] = *c;
        memset(c, 0, sizeof *c);
    }
    ql_templates_free(b);
    return 0;
}

static int parse_templates(ql_sim_scenario_t *sc, const ql_yaml_node_t *root, ql_err_t *err) {
    const ql_yaml_node_t *t = ql_yaml_map_find(root, "templates");
    const ql_yaml_node_t *sets = ql_yaml_map_find(root, "template_sets");
    int rc;
    if (!t) {
        if (sets)
            return ql_yaml_errorf(err, sets, "template_sets: needs templates: as well");
        return ql_templates_load_buffer(builtin_templates, sizeof builtin_templates - 1,
                                        "<built-in templates>", &sc->templates, err);
    }
    if ((rc = ql_templates_load_nodes(t, sets, &sc->templates, err)))
        return rc;
    find_shell(sc, t, NULL);
    for (size_t i = 0; sets && sets->kind == QL_YAML_MAPPING && i < sets->n_pairs; i++)
        find_shell(sc, sets->pairs[i].value, sets->pairs[i].key->str);
    return add_builtin_chains(sc->templates, err);
}

/* ---- the file ---- */

static int load_root(ql_sim_scenario_t *sc, const ql_yaml_node_t *root, ql_err_t *err) {
    static const char *const keys[] = {"name",          "timezone", "start", "config", "templates",
                                       "template_sets", "projects", "lock",  "steps",  NULL};
    int rc = ql_yaml_expect(root, QL_YAML_MAPPING, "the scenario", err);
    if (rc || (rc = ql_yaml_check_keys(root, keys, err)))
        return rc;
    const char *name;
    if ((rc = ql_yaml_get_str(root, "name", QL_YAML_REQUIRED, &name, err)))
        return rc;
    if (!(sc->name = strdup(name)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    snprintf(sc->zone, sizeof sc->zone, "UTC");
    const ql_yaml_node_t *v = ql_yaml_map_find(root, "timezone");
    if (v && (rc = sim_copy_str(v, "key 'timezone'", sc->zone, sizeof sc->zone, err)))
        return rc;
    if (ql_tz_load(sc->zone, &sc->tz))
        return ql_yaml_errorf(err, v, "timezone: '%s' is not a known time zone", sc->zone);
    if ((rc = sim_get_time(sc, root, "start", &sc->start, err)))
        return rc;
    if ((rc = ql_config_new(&sc->cfg)))
        return ql_err_set(err, rc, "out of memory");
    if ((v = ql_yaml_map_find(root, "config")) && (rc = parse_config(sc, v, err)))
        return rc;
    if ((rc = parse_templates(sc, root, err)))
        return rc;
    if ((v = ql_yaml_map_find(root, "projects")) && (rc = parse_projects(sc, v, err)))
        return rc;
    if ((v = ql_yaml_map_find(root, "lock")) &&
        (rc = sim_parse_lock(v, false, sc->lock_holder, sizeof sc->lock_holder, err)))
        return rc;
    v = ql_yaml_map_find(root, "steps");
    if (!v)
        return ql_yaml_errorf(err, root, "missing required key 'steps'");
    if ((rc = ql_yaml_expect(v, QL_YAML_SEQUENCE, "key 'steps'", err)))
        return rc;
    if (v->n_items && !(sc->steps = calloc(v->n_items, sizeof *sc->steps)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < v->n_items; i++) {
        if ((rc = sim_parse_step(sc, v->items[i], &sc->steps[i], err)))
            return rc;
        sc->n_steps++;
    }
    return 0;
}

static int load_doc(ql_yaml_doc_t *doc, const char *name, ql_sim_scenario_t **out, ql_err_t *err) {
    ql_sim_scenario_t *sc = calloc(1, sizeof *sc);
    if (!sc || !(sc->file = strdup(name))) {
        free(sc);
        ql_yaml_doc_free(doc);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    int rc = load_root(sc, ql_yaml_doc_root(doc), err);
    ql_yaml_doc_free(doc);
    if (rc) {
        ql_sim_scenario_free(sc);
        return rc;
    }
    *out = sc;
    return 0;
}

int ql_sim_scenario_load_file(const char *path, ql_sim_scenario_t **out, ql_err_t *err) {
    *out = NULL;
    ql_yaml_doc_t *doc;
    int rc = ql_yaml_load_file(path, 0, &doc, err);
    return rc ? rc : load_doc(doc, path, out, err);
}

int ql_sim_scenario_load_buffer(const char *buf, size_t len, const char *name,
                                ql_sim_scenario_t **out, ql_err_t *err) {
    *out = NULL;
    ql_yaml_doc_t *doc;
    int rc = ql_yaml_load_buffer(buf, len, name, 0, &doc, err);
    return rc ? rc : load_doc(doc, name, out, err);
}

void ql_sim_scenario_free(ql_sim_scenario_t *sc) {
    if (!sc)
        return;
    for (size_t i = 0; i < sc->n_models; i++) {
        free(sc->models[i].multi_partition);
        free(sc->models[i].segs);
    }
    for (size_t i = 0; i < sc->n_steps; i++)
        sim_step_clear(&sc->steps[i]);
    free(sc->steps);
    free(sc->models);
    free(sc->projects);
    ql_templates_free(sc->templates);
    ql_config_free(sc->cfg);
    ql_tz_free(sc->tz);
    free(sc->name);
    free(sc->file);
    free(sc);
}

const char *ql_sim_scenario_name(const ql_sim_scenario_t *sc) {
    return sc->name;
}

const char *ql_sim_scenario_file(const ql_sim_scenario_t *sc) {
    return sc->file;
}

size_t ql_sim_scenario_steps(const ql_sim_scenario_t *sc) {
    return sc->n_steps;
}
