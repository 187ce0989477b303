/*
 * Parsing one item of a scenario's `steps:` (docs/design/scenarios.md, Steps). A step is a
 * bare word (`scan`, `restart`) or a mapping with exactly one key naming it. Names are resolved
 * against the set-up here, so a step that names an unknown model is an invalid file, not a
 * failed run.
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const step_names[] = {
    "scan",  "advance", "run", "set_time", "restart", "fail_submissions",
    "build", "job",     "set", "lock",     "expect",  NULL};

void sim_step_clear(sim_step_t *s) {
    sim_expect_clear(&s->expect);
    memset(s, 0, sizeof *s);
}

static int parse_duration(const ql_yaml_node_t *v, const char *what, int64_t *out, ql_err_t *err) {
    int rc = ql_yaml_as_duration(v, what, out, err);
    if (!rc && *out < 0)
        return ql_yaml_errorf(err, v, "%s: must not be negative", what);
    return rc;
}

static int parse_build(const ql_sim_scenario_t *sc, const ql_yaml_node_t *v, sim_step_t *st,
                       ql_err_t *err) {
    static const char *const keys[] = {"model",    "project",      "start", "end",
                                       "priority", "expect_error", NULL};
    int rc = ql_yaml_expect(v, QL_YAML_MAPPING, "build", err);
    if (rc || (rc = ql_yaml_check_keys(v, keys, err)) ||
        (rc = sim_resolve_model(sc, v, &st->model, err)) ||
        (rc = sim_get_time(sc, v, "start", &st->start, err)) ||
        (rc = sim_get_time(sc, v, "end", &st->end, err)))
        return rc;
    int64_t prio = QL_PRIORITY_DEFAULT;
    if ((rc = ql_yaml_get_int(v, "priority", QL_YAML_OPTIONAL, QL_PRIORITY_MIN, QL_PRIORITY_MAX,
                              &prio, err)))
        return rc;
    st->priority = (int)prio;
    const ql_yaml_node_t *e = ql_yaml_map_find(v, "expect_error");
    if (e) {
        if ((rc = sim_copy_str(e, "expect_error", st->expect_error, sizeof st->expect_error, err)))
            return rc;
        if (strncmp(st->expect_error, "KE-", 3) != 0 && strncmp(st->expect_error, "QL-", 3) != 0)
            return ql_yaml_errorf(err, e,
                                  "expect_error: '%s' is not an error code (KE-... or QL-...)",
                                  st->expect_error);
    }
    return 0;
}

static int parse_job(const ql_sim_scenario_t *sc, const ql_yaml_node_t *v, sim_step_t *st,
                     ql_err_t *err) {
    static const char *const keys[] = {"model", "project", "range", "action", "finish", NULL};
    int rc = ql_yaml_expect(v, QL_YAML_MAPPING, "job", err);
    if (rc || (rc = ql_yaml_check_keys(v, keys, err)) ||
        (rc = sim_resolve_model(sc, v, &st->model, err)))
        return rc;
    const ql_yaml_node_t *r = ql_yaml_map_find(v, "range");
    if (!r)
        return ql_yaml_errorf(err, v, "missing required key 'range'");
    if ((rc = sim_parse_range(sc, r, "key 'range'", &st->start, &st->end, err)))
        return rc;
    const ql_yaml_node_t *a = ql_yaml_map_find(v, "action"), *f = ql_yaml_map_find(v, "finish");
    if (!a == !f)
        return ql_yaml_errorf(err, v, "job: give exactly one of action: or finish:");
    const char *s;
    if (a) {
        if ((rc = ql_yaml_as_str(a, "action", &s, err)))
            return rc;
        if (ql_action_parse(s, &st->action))
            return ql_yaml_errorf(err, a, "action: '%s' is not PAUSE, RESUME, DISCARD or RESTART",
                                  s);
        return 0;
    }
    st->is_finish = true;
    if ((rc = ql_yaml_as_str(f, "finish", &s, err)))
        return rc;
    if (strcmp(s, "SUCCEED") == 0)
        st->finish = QL_SUCCEED;
    else if (strcmp(s, "ERROR") == 0)
        st->finish = QL_ERROR;
    else if (strcmp(s, "WARNING") == 0) {
        st->finish = QL_SUCCEED;
        st->warned = true;
    } else
        return ql_yaml_errorf(err, f, "finish: '%s' is not SUCCEED, ERROR or WARNING", s);
    return 0;
}

static int find_project(const ql_sim_scenario_t *sc, const ql_yaml_node_t *n, size_t *out,
                        ql_err_t *err) {
    const char *name;
    int rc = ql_yaml_as_str(n, "key 'project'", &name, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < sc->n_projects; i++)
        if (strcmp(sc->projects[i].name, name) == 0) {
            *out = i;
            return 0;
        }
    return ql_yaml_errorf(err, n, "unknown project '%s' (not in the set-up)", name);
}

static int parse_set(const ql_sim_scenario_t *sc, const ql_yaml_node_t *v, sim_step_t *st,
                     ql_err_t *err) {
    static const char *const pkeys[] = {"project", "auto_segment_build_enabled", "timezone", NULL};
    static const char *const mkeys[] = {"model", "project", "auto_segment_build", "status", NULL};
    int rc = ql_yaml_expect(v, QL_YAML_MAPPING, "set", err);
    if (rc)
        return rc;
    const ql_yaml_node_t *x;
    if (!ql_yaml_map_find(v, "model")) {
        st->kind = SIM_SET_PROJECT;
        if ((rc = ql_yaml_check_keys(v, pkeys, err)))
            return rc;
        if (!(x = ql_yaml_map_find(v, "project")))
            return ql_yaml_errorf(err, v, "set: needs model: or project:");
        if ((rc = find_project(sc, x, &st->project, err)))
            return rc;
        if ((x = ql_yaml_map_find(v, "auto_segment_build_enabled"))) {
            st->set_enabled = true;
            if ((rc = ql_yaml_as_bool(x, "auto_segment_build_enabled", &st->enabled, err)))
                return rc;
        }
        if ((x = ql_yaml_map_find(v, "timezone"))) {
            st->set_timezone = true;
            if (!ql_yaml_is_null(x) &&
                (rc = sim_copy_str(x, "timezone", st->timezone, sizeof st->timezone, err)))
                return rc;
        }
        if (!st->set_enabled && !st->set_timezone)
            return ql_yaml_errorf(err, v, "set: nothing to change for project '%s'",
                                  sc->projects[st->project].name);
        return 0;
    }
    st->kind = SIM_SET_MODEL;
    if ((rc = ql_yaml_check_keys(v, mkeys, err)) ||
        (rc = sim_resolve_model(sc, v, &st->model, err)))
        return rc;
    if ((x = ql_yaml_map_find(v, "auto_segment_build"))) {
        st->set_auto_build = true;
        if ((rc = sim_parse_auto_build(x, &st->auto_build, err)))
            return rc;
    }
    if ((x = ql_yaml_map_find(v, "status"))) {
        const char *s;
        st->set_status = true;
        if ((rc = ql_yaml_as_str(x, "status", &s, err)))
            return rc;
        if (ql_model_status_parse(s, &st->status))
            return ql_yaml_errorf(err, x, "status: '%s' is not ONLINE, OFFLINE or BROKEN", s);
    }
    if (!st->set_auto_build && !st->set_status)
        return ql_yaml_errorf(err, v, "set: nothing to change for model '%s'",
                              sc->models[st->model].name);
    return 0;
}

int sim_parse_lock(const ql_yaml_node_t *v, bool allow_release, char *holder, size_t cap,
                   ql_err_t *err) {
    static const char *const keys[] = {"take", NULL};
    if (allow_release && v->kind == QL_YAML_SCALAR && !ql_yaml_is_null(v) &&
        strcmp(v->str, "release") == 0) {
        holder[0] = '\0';
        return 0;
    }
    if (v->kind != QL_YAML_MAPPING)
        return ql_yaml_errorf(err, v,
                              allow_release ? "lock: expected {take: NAME} or release"
                                            : "lock: expected {take: NAME} (the other server "
                                              "that holds the job engine lock at the start)");
    int rc = ql_yaml_check_keys(v, keys, err);
    const char *name;
    if (rc || (rc = ql_yaml_get_str(v, "take", QL_YAML_REQUIRED, &name, err)))
        return rc;
    if (!name[0] || strlen(name) >= cap)
        return ql_yaml_errorf(err, v, "lock: take: the server's name must have 1 to %zu characters",
                              cap - 1);
    snprintf(holder, cap, "%s", name);
    return 0;
}

int sim_parse_step(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, sim_step_t *st,
                   ql_err_t *err) {
    memset(st, 0, sizeof *st);
    st->line = node->line;
    const char *word;
    const ql_yaml_node_t *v = NULL;
    char names[160];
    ql_yaml_join(step_names, names, sizeof names);
    if (node->kind == QL_YAML_SCALAR && !ql_yaml_is_null(node)) {
        word = node->str;
    } else if (node->kind == QL_YAML_MAPPING && node->n_pairs == 1) {
        word = node->pairs[0].key->str;
        v = node->pairs[0].value;
    } else {
        return ql_yaml_errorf(err, node,
                              "a step is one of %s, written as `- scan` or "
                              "`- advance: 90s` (one key per step)",
                              names);
    }
    int rc = 0;
    if (!strcmp(word, "scan") || !strcmp(word, "restart")) {
        st->kind = word[0] == 's' ? SIM_SCAN : SIM_RESTART;
        if (v && !ql_yaml_is_null(v))
            return ql_yaml_errorf(err, v, "step '%s' takes no value", word);
        return 0;
    }
    if (!v) {
        for (size_t i = 0; step_names[i]; i++)
            if (!strcmp(word, step_names[i]))
                return ql_yaml_errorf(err, node, "step '%s' needs a value (`- %s: ...`)", word,
                                      word);
        return ql_yaml_errorf(err, node, "unknown step '%s' (expected one of: %s)", word, names);
    }
    if (!strcmp(word, "advance")) {
        st->kind = SIM_ADVANCE;
        rc = parse_duration(v, "advance", &st->ms, err);
    } else if (!strcmp(word, "run")) {
        st->kind = SIM_RUN;
        rc = parse_duration(v, "run", &st->ms, err);
    } else if (!strcmp(word, "set_time")) {
        st->kind = SIM_SET_TIME;
        rc = sim_parse_time(sc, v, "set_time", &st->ms, err);
    } else if (!strcmp(word, "fail_submissions")) {
        st->kind = SIM_FAIL_SUBMISSIONS;
        rc = ql_yaml_as_int(v, "fail_submissions", 0, 1000000000, &st->ms, err);
    } else if (!strcmp(word, "build")) {
        st->kind = SIM_BUILD;
        rc = parse_build(sc, v, st, err);
    } else if (!strcmp(word, "job")) {
        st->kind = SIM_JOB;
        rc = parse_job(sc, v, st, err);
    } else if (!strcmp(word, "set")) {
        rc = parse_set(sc, v, st, err);
    } else if (!strcmp(word, "lock")) {
        st->kind = SIM_LOCK;
        rc = sim_parse_lock(v, true, st->holder, sizeof st->holder, err);
    } else if (!strcmp(word, "expect")) {
        st->kind = SIM_EXPECT;
        rc = sim_parse_expect(sc, v, &st->expect, err);
    } else {
        return ql_yaml_errorf(err, node->pairs[0].key, "unknown step '%s' (expected one of: %s)",
                              word, names);
    }
    if (rc)
        sim_step_clear(st);
    return rc;
}
