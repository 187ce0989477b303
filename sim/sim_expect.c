/*
 * Expectations (docs/design/scenarios.md, Expectations): parsing the expect: mapping and checking
 * it against the dispatcher's latest decisions and the store. A failed check lists every mismatch
 * of the step, each with what was expected and what was found, so one run shows the whole
 * difference.
 */
#include "base/ql_buf.h"
#include "sim_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_res_append(ql_sim_result_t *res, const char *fmt, ...) {
    size_t len = strlen(res->msg);
    if (len + 1 >= sizeof res->msg)
        return;
    if (len)
        res->msg[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg + len, sizeof res->msg - len, fmt, ap);
    va_end(ap);
}

void sim_expect_clear(sim_expect_t *e) {
    free(e->cycles);
    free(e->jobs);
    free(e->segs);
    memset(e, 0, sizeof *e);
}

/* ---- parsing ---- */

static int get_none(const ql_yaml_node_t *map, bool *none, ql_err_t *err) {
    *none = false;
    int rc = ql_yaml_get_bool(map, "none", QL_YAML_OPTIONAL, none, err);
    if (rc || !*none)
        return rc;
    /* `none: true` says the model has nothing of that kind; other fields would contradict it. */
    for (size_t i = 0; i < map->n_pairs; i++) {
        const char *k = map->pairs[i].key->str;
        if (strcmp(k, "model") && strcmp(k, "project") && strcmp(k, "none"))
            return ql_yaml_errorf(err, map->pairs[i].key, "'%s' cannot be combined with none: true",
                                  k);
    }
    return 0;
}

static int parse_cycle(const ql_sim_scenario_t *sc, const ql_yaml_node_t *n, sim_cycle_exp_t *c,
                       ql_err_t *err) {
    static const char *const keys[] = {"model",  "project",    "state",      "target",
                                       "reason", "occurrence", "from_cache", NULL};
    int rc = ql_yaml_expect(n, QL_YAML_MAPPING, "cycles item", err);
    if (rc || (rc = ql_yaml_check_keys(n, keys, err)) ||
        (rc = sim_resolve_model(sc, n, &c->model, err)))
        return rc;
    c->line = n->line;
    const ql_yaml_node_t *v;
    const char *s;
    if ((v = ql_yaml_map_find(n, "state"))) {
        c->has_state = true;
        if ((rc = ql_yaml_as_str(v, "state", &s, err)))
            return rc;
        if (ql_cycle_state_parse(s, &c->state) || c->state == QL_CYCLE_NONE)
            return ql_yaml_errorf(err, v, "state: '%s' is not a cycle state", s);
        if (c->state == QL_CYCLE_NO_OVERLAP)
            return ql_yaml_errorf(err, v,
                                  "state: a scan that finds NO_OVERLAP submits, so its decision "
                                  "is SUBMITTED or RETRYABLE_FAILURE");
    }
    if ((v = ql_yaml_map_find(n, "target"))) {
        c->has_target = true;
        if ((rc = sim_parse_range(sc, v, "target", &c->start, &c->end, err)))
            return rc;
    }
    if ((v = ql_yaml_map_find(n, "reason"))) {
        c->has_reason = true;
        if ((rc = ql_yaml_as_str(v, "reason", &s, err)))
            return rc;
        if (ql_skip_reason_parse(s, &c->reason))
            return ql_yaml_errorf(err, v,
                                  "reason: '%s' is not one of project_disabled, broken, "
                                  "streaming, full_load, multi_partition, model_disabled, "
                                  "invalid_config, empty_range",
                                  s);
    }
    if ((v = ql_yaml_map_find(n, "occurrence"))) {
        c->has_occurrence = true;
        if ((rc = sim_parse_time(sc, v, "occurrence", &c->occurrence, err)))
            return rc;
    }
    if ((v = ql_yaml_map_find(n, "from_cache"))) {
        c->has_from_cache = true;
        if ((rc = ql_yaml_as_bool(v, "from_cache", &c->from_cache, err)))
            return rc;
    }
    return 0;
}

static int parse_job(const ql_sim_scenario_t *sc, const ql_yaml_node_t *n, sim_job_exp_t *j,
                     ql_err_t *err) {
    static const char *const keys[] = {"model", "project", "none",      "type",
                                       "state", "range",   "submitter", NULL};
    int rc = ql_yaml_expect(n, QL_YAML_MAPPING, "jobs item", err);
    if (rc || (rc = ql_yaml_check_keys(n, keys, err)) ||
        (rc = sim_resolve_model(sc, n, &j->model, err)) || (rc = get_none(n, &j->none, err)))
        return rc;
    j->line = n->line;
    const ql_yaml_node_t *v;
    if ((v = ql_yaml_map_find(n, "type"))) {
        j->has_type = true;
        if ((rc = sim_copy_str(v, "type", j->type, sizeof j->type, err)))
            return rc;
    }
    if ((v = ql_yaml_map_find(n, "state"))) {
        const char *s;
        j->has_state = true;
        if ((rc = ql_yaml_as_str(v, "state", &s, err)))
            return rc;
        if (ql_state_parse(s, &j->state) || (unsigned)j->state >= QL_JOB_STATE_COUNT)
            return ql_yaml_errorf(err, v, "state: '%s' is not a job state", s);
    }
    if ((v = ql_yaml_map_find(n, "range"))) {
        j->has_range = true;
        if ((rc = sim_parse_range(sc, v, "range", &j->start, &j->end, err)))
            return rc;
    }
    if ((v = ql_yaml_map_find(n, "submitter"))) {
        j->has_submitter = true;
        if ((rc = sim_copy_str(v, "submitter", j->submitter, sizeof j->submitter, err)))
            return rc;
    }
    return 0;
}

static int parse_seg(const ql_sim_scenario_t *sc, const ql_yaml_node_t *n, sim_seg_exp_t *s,
                     ql_err_t *err) {
    static const char *const keys[] = {"model", "project", "none", "start", "end", "status", NULL};
    int rc = ql_yaml_expect(n, QL_YAML_MAPPING, "segments item", err);
    if (rc || (rc = ql_yaml_check_keys(n, keys, err)) ||
        (rc = sim_resolve_model(sc, n, &s->model, err)) || (rc = get_none(n, &s->none, err)))
        return rc;
    s->line = n->line;
    if (s->none)
        return 0;
    const char *st;
    if ((rc = sim_get_time(sc, n, "start", &s->start, err)) ||
        (rc = sim_get_time(sc, n, "end", &s->end, err)) ||
        (rc = ql_yaml_get_str(n, "status", QL_YAML_REQUIRED, &st, err)))
        return rc;
    if (ql_seg_status_parse(st, &s->status))
        return ql_yaml_errorf(err, ql_yaml_map_find(n, "status"),
                              "status: '%s' is not NEW, READY or WARNING", st);
    return 0;
}

/* server: {master: true, epoch: 2} */
static int parse_server(const ql_yaml_node_t *v, sim_expect_t *e, ql_err_t *err) {
    static const char *const keys[] = {"master", "epoch", NULL};
    int rc = ql_yaml_expect(v, QL_YAML_MAPPING, "key 'server'", err);
    if (rc || (rc = ql_yaml_check_keys(v, keys, err)))
        return rc;
    const ql_yaml_node_t *x;
    if ((x = ql_yaml_map_find(v, "master"))) {
        e->has_master = true;
        if ((rc = ql_yaml_as_bool(x, "master", &e->master, err)))
            return rc;
    }
    if ((x = ql_yaml_map_find(v, "epoch"))) {
        e->has_epoch = true;
        if ((rc = ql_yaml_as_int(x, "epoch", 0, INT64_MAX, &e->epoch, err)))
            return rc;
    }
    if (!e->has_master && !e->has_epoch)
        return ql_yaml_errorf(err, v, "server: nothing to check (master:, epoch:)");
    return 0;
}

int sim_parse_expect(const ql_sim_scenario_t *sc, const ql_yaml_node_t *node, sim_expect_t *e,
                     ql_err_t *err) {
    static const char *const keys[] = {"cycles", "submitted", "jobs", "segments", "server", NULL};
    memset(e, 0, sizeof *e);
    int rc = ql_yaml_expect(node, QL_YAML_MAPPING, "expect", err);
    if (rc || (rc = ql_yaml_check_keys(node, keys, err)))
        return rc;
    if (node->n_pairs == 0)
        return ql_yaml_errorf(err, node, "expect: nothing to check");
    const ql_yaml_node_t *v;
    if ((v = ql_yaml_map_find(node, "submitted"))) {
        e->has_submitted = true;
        if ((rc = ql_yaml_as_int(v, "submitted", 0, INT64_MAX, &e->submitted, err)))
            return rc;
    }
    if ((v = ql_yaml_map_find(node, "server")) && (rc = parse_server(v, e, err)))
        return rc;
    struct {
        const char *key;
        size_t size;
    } lists[] = {
        {"cycles", sizeof *e->cycles}, {"jobs", sizeof *e->jobs}, {"segments", sizeof *e->segs}};
    void **arrays[] = {(void **)&e->cycles, (void **)&e->jobs, (void **)&e->segs};
    size_t *counts[] = {&e->n_cycles, &e->n_jobs, &e->n_segs};
    for (int l = 0; l < 3; l++) {
        if (!(v = ql_yaml_map_find(node, lists[l].key)))
            continue;
        char what[32];
        snprintf(what, sizeof what, "key '%s'", lists[l].key);
        if ((rc = ql_yaml_expect(v, QL_YAML_SEQUENCE, what, err)))
            return rc;
        if (v->n_items && !(*arrays[l] = calloc(v->n_items, lists[l].size)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        for (size_t i = 0; i < v->n_items; i++) {
            const ql_yaml_node_t *it = v->items[i];
            rc = l == 0   ? parse_cycle(sc, it, &e->cycles[i], err)
                 : l == 1 ? parse_job(sc, it, &e->jobs[i], err)
                          : parse_seg(sc, it, &e->segs[i], err);
            if (rc)
                return rc;
            (*counts[l])++;
        }
    }
    return 0;
}

/* ---- checking ---- */

static void model_label(const ql_sim_t *sim, size_t m, char *buf, size_t cap) {
    const sim_model_def_t *d = &sim->sc->models[m];
    snprintf(buf, cap, "%s/%s", sim->sc->projects[d->project].name, d->name);
}

static void fmt_range(const ql_sim_t *sim, int64_t s, int64_t e, char *buf, size_t cap) {
    char a[48], b[48];
    sim_format_time(sim->sc, s, a, sizeof a);
    sim_format_time(sim->sc, e, b, sizeof b);
    snprintf(buf, cap, "[%s, %s) = [%lld, %lld)", a, b, (long long)s, (long long)e);
}

static void describe_decision(const ql_sim_t *sim, const ql_decision_t *d, char *buf, size_t cap) {
    char range[160] = "none";
    if (d->target_start || d->target_end)
        fmt_range(sim, d->target_start, d->target_end, range, sizeof range);
    snprintf(buf, cap, "%s%s%s target %s%s%s", ql_cycle_state_name(d->state),
             d->reason ? " reason " : "", d->reason ? ql_skip_reason_name(d->reason) : "", range,
             d->from_cache ? " (from the cycle cache)" : "", d->message[0] ? "; " : "");
    size_t n = strlen(buf);
    if (d->message[0] && n < cap)
        snprintf(buf + n, cap - n, "%s", d->message);
}

static bool check_cycles(ql_sim_t *sim, const sim_expect_t *e, ql_sim_result_t *res) {
    bool ok = true;
    for (size_t i = 0; i < e->n_cycles; i++) {
        const sim_cycle_exp_t *c = &e->cycles[i];
        char label[2 * QL_NAME_MAX + 2], found[700];
        model_label(sim, c->model, label, sizeof label);
        ql_decision_t d;
        ql_dispatcher_t *disp = sim_dispatcher(sim);
        if (!disp || ql_dispatcher_decision(disp, &sim->model_ids[c->model], &d)) {
            sim_res_append(res,
                           disp ? "%s:%u: cycles %s: expected a decision, found none (no scan "
                                  "evaluated the model since the start or the last restart)"
                                : "%s:%u: cycles %s: expected a decision, found none (the "
                                  "server is not the master: it runs no dispatcher)",
                           sim->sc->file, c->line, label);
            ok = false;
            continue;
        }
        describe_decision(sim, &d, found, sizeof found);
        if (c->has_state && d.state != c->state) {
            sim_res_append(res, "%s:%u: cycles %s: expected state %s, found %s", sim->sc->file,
                           c->line, label, ql_cycle_state_name(c->state), found);
            ok = false;
        }
        if (c->has_target && (d.target_start != c->start || d.target_end != c->end)) {
            char want[160];
            fmt_range(sim, c->start, c->end, want, sizeof want);
            sim_res_append(res, "%s:%u: cycles %s: expected target %s, found %s", sim->sc->file,
                           c->line, label, want, found);
            ok = false;
        }
        if (c->has_reason && d.reason != c->reason) {
            sim_res_append(res, "%s:%u: cycles %s: expected reason %s, found %s", sim->sc->file,
                           c->line, label, ql_skip_reason_name(c->reason), found);
            ok = false;
        }
        if (c->has_occurrence && d.occurrence != c->occurrence) {
            char want[48], got[48];
            sim_format_time(sim->sc, c->occurrence, want, sizeof want);
            sim_format_time(sim->sc, d.occurrence, got, sizeof got);
            sim_res_append(res, "%s:%u: cycles %s: expected occurrence %s, found %s (%s)",
                           sim->sc->file, c->line, label, want, got, found);
            ok = false;
        }
        if (c->has_from_cache && d.from_cache != c->from_cache) {
            sim_res_append(res,
                           "%s:%u: cycles %s: expected a decision %s the cycle cache, "
                           "found %s",
                           sim->sc->file, c->line, label, c->from_cache ? "from" : "not from",
                           found);
            ok = false;
        }
    }
    return ok;
}

/* A job as the checks see it. */
typedef struct {
    ql_id_t id;
    size_t rank;
    int64_t create_time;
    char type[QL_TYPE_MAX + 1];
    ql_state_t state;
    bool has_range;
    int64_t start, end;
    char submitter[QL_USER_MAX + 1];
} job_row_t;

typedef struct {
    const ql_sim_t *sim;
    job_row_t *rows;
    size_t n, cap;
    int rc;
} job_list_t;

static int collect_job(const ql_job_t *j, void *arg) {
    job_list_t *l = arg;
    if (QL_ARRAY_RESERVE(l->rows, l->cap, l->n + 1, 16))
        return l->rc = UV_ENOMEM;
    job_row_t *r = &l->rows[l->n++];
    r->id = j->id;
    r->rank = sim_created_rank(l->sim, &j->id);
    r->create_time = j->create_time;
    snprintf(r->type, sizeof r->type, "%s", j->type);
    r->state = j->state;
    r->has_range = j->has_range;
    r->start = j->range_start;
    r->end = j->range_end;
    snprintf(r->submitter, sizeof r->submitter, "%s", j->submitter);
    return 0;
}

/* Creation order: the order the simulation saw the jobs created in (virtual time may go back,
 * and jobs created at one instant share their create time). */
static int job_cmp(const void *pa, const void *pb) {
    const job_row_t *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->create_time != b->create_time)
        return a->create_time < b->create_time ? -1 : 1;
    return memcmp(a->id.b, b->id.b, 16);
}

static int model_jobs(ql_sim_t *sim, ql_txn_t *txn, size_t m, job_list_t *l) {
    memset(l, 0, sizeof *l);
    l->sim = sim;
    int rc = ql_job_foreach_model(txn, &sim->model_ids[m], collect_job, l);
    if (!rc)
        rc = l->rc;
    if (!rc && l->n > 1)
        qsort(l->rows, l->n, sizeof *l->rows, job_cmp);
    return rc;
}

static void describe_job(const ql_sim_t *sim, const job_row_t *r, char *buf, size_t cap) {
    char range[160] = "none";
    if (r->has_range)
        fmt_range(sim, r->start, r->end, range, sizeof range);
    snprintf(buf, cap, "{type: %s, state: %s, range: %s, submitter: %s}", r->type,
             ql_state_name(r->state), range, r->submitter);
}

static void describe_job_exp(const ql_sim_t *sim, const sim_job_exp_t *j, char *buf, size_t cap) {
    char range[160] = "";
    size_t n = 0;
    buf[0] = '\0';
    if (j->has_type)
        n += (size_t)snprintf(buf + n, cap - n, "type: %s, ", j->type);
    if (j->has_state && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "state: %s, ", ql_state_name(j->state));
    if (j->has_range && n < cap) {
        fmt_range(sim, j->start, j->end, range, sizeof range);
        n += (size_t)snprintf(buf + n, cap - n, "range: %s, ", range);
    }
    if (j->has_submitter && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "submitter: %s, ", j->submitter);
    if (n >= 2 && n < cap)
        buf[n - 2] = '\0';
}

static bool job_matches(const sim_job_exp_t *j, const job_row_t *r) {
    return (!j->has_type || strcmp(j->type, r->type) == 0) &&
           (!j->has_state || j->state == r->state) &&
           (!j->has_range || (r->has_range && j->start == r->start && j->end == r->end)) &&
           (!j->has_submitter || strcmp(j->submitter, r->submitter) == 0);
}

static bool check_jobs(ql_sim_t *sim, ql_txn_t *txn, const sim_expect_t *e, ql_sim_result_t *res,
                       int *rc) {
    bool ok = true;
    for (size_t i = 0; i < e->n_jobs; i++) {
        size_t m = e->jobs[i].model;
        bool seen = false;
        for (size_t k = 0; k < i; k++)
            seen |= e->jobs[k].model == m;
        if (seen)
            continue; /* each model is checked once, with all of its entries */
        job_list_t l;
        if ((*rc = model_jobs(sim, txn, m, &l))) {
            free(l.rows);
            return false;
        }
        char label[2 * QL_NAME_MAX + 2];
        model_label(sim, m, label, sizeof label);
        size_t want = 0;
        bool bad = false;
        for (size_t k = i; k < e->n_jobs; k++) {
            const sim_job_exp_t *j = &e->jobs[k];
            if (j->model != m || j->none)
                continue;
            if (want >= l.n || !job_matches(j, &l.rows[want])) {
                char exp[400], got[400] = "no job";
                describe_job_exp(sim, j, exp, sizeof exp);
                if (want < l.n)
                    describe_job(sim, &l.rows[want], got, sizeof got);
                sim_res_append(res, "%s:%u: jobs %s #%zu: expected {%s}, found %s", sim->sc->file,
                               j->line, label, want + 1, exp, got);
                bad = true;
            }
            want++;
        }
        if (want != l.n && !bad) {
            sim_res_append(res, "%s:%u: jobs %s: expected %zu job(s), found %zu", sim->sc->file,
                           e->jobs[i].line, label, want, l.n);
            bad = true;
        }
        if (bad) {
            for (size_t k = 0; k < l.n; k++) {
                char got[400];
                describe_job(sim, &l.rows[k], got, sizeof got);
                sim_res_append(res, "    found job #%zu of %s: %s", k + 1, label, got);
            }
            ok = false;
        }
        free(l.rows);
    }
    return ok;
}

typedef struct {
    int64_t start, end;
    ql_seg_status_t status;
} seg_row_t;

typedef struct {
    seg_row_t *rows;
    size_t n, cap;
    int rc;
} seg_list_t;

static int collect_seg(const ql_segment_t *s, void *arg) {
    seg_list_t *l = arg;
    if (QL_ARRAY_RESERVE(l->rows, l->cap, l->n + 1, 16))
        return l->rc = UV_ENOMEM;
    l->rows[l->n++] = (seg_row_t){s->start, s->end, s->status};
    return 0;
}

static int seg_cmp(const void *pa, const void *pb) {
    const seg_row_t *a = pa, *b = pb;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return (int)a->status - (int)b->status;
}

static void describe_seg(const ql_sim_t *sim, const seg_row_t *s, char *buf, size_t cap) {
    char range[160];
    fmt_range(sim, s->start, s->end, range, sizeof range);
    snprintf(buf, cap, "%s %s", range, ql_seg_status_name(s->status));
}

static bool check_segments(ql_sim_t *sim, ql_txn_t *txn, const sim_expect_t *e,
                           ql_sim_result_t *res, int *rc) {
    bool ok = true;
    for (size_t i = 0; i < e->n_segs; i++) {
        size_t m = e->segs[i].model;
        bool seen = false;
        for (size_t k = 0; k < i; k++)
            seen |= e->segs[k].model == m;
        if (seen)
            continue;
        seg_list_t found = {0}, want = {0};
        *rc = ql_segment_foreach(txn, &sim->model_ids[m], collect_seg, &found);
        if (!*rc)
            *rc = found.rc;
        for (size_t k = i; !*rc && k < e->n_segs; k++) {
            const sim_seg_exp_t *s = &e->segs[k];
            if (s->model != m || s->none)
                continue;
            ql_segment_t tmp = {.start = s->start, .end = s->end, .status = s->status};
            *rc = collect_seg(&tmp, &want);
        }
        if (*rc) {
            free(found.rows);
            free(want.rows);
            return false;
        }
        if (found.n > 1)
            qsort(found.rows, found.n, sizeof *found.rows, seg_cmp);
        if (want.n > 1)
            qsort(want.rows, want.n, sizeof *want.rows, seg_cmp);
        bool same = found.n == want.n;
        for (size_t k = 0; same && k < found.n; k++)
            same = seg_cmp(&found.rows[k], &want.rows[k]) == 0;
        if (!same) {
            char label[2 * QL_NAME_MAX + 2], buf[300];
            model_label(sim, m, label, sizeof label);
            sim_res_append(res,
                           "%s:%u: segments %s: expected %zu segment(s), found %zu:", sim->sc->file,
                           e->segs[i].line, label, want.n, found.n);
            for (size_t k = 0; k < want.n; k++) {
                describe_seg(sim, &want.rows[k], buf, sizeof buf);
                sim_res_append(res, "    expected %s", buf);
            }
            for (size_t k = 0; k < found.n; k++) {
                describe_seg(sim, &found.rows[k], buf, sizeof buf);
                sim_res_append(res, "    found    %s", buf);
            }
            ok = false;
        }
        free(found.rows);
        free(want.rows);
    }
    return ok;
}

typedef struct {
    uint64_t n;
} system_count_t;

static int count_system(const ql_job_t *j, void *arg) {
    system_count_t *c = arg;
    if (strcmp(j->type, "INC_BUILD") == 0 && strcmp(j->submitter, "System") == 0)
        c->n++;
    return 0;
}

int sim_count_system_builds(ql_sim_t *sim, ql_txn_t *txn, uint64_t *out) {
    system_count_t c = {0};
    for (size_t i = 0; i < sim->sc->n_models; i++) {
        int rc = ql_job_foreach_model(txn, &sim->model_ids[i], count_system, &c);
        if (rc)
            return rc;
    }
    *out = c.n;
    return 0;
}

int sim_check_expect(ql_sim_t *sim, const sim_step_t *st, ql_sim_result_t *res) {
    const sim_expect_t *e = &st->expect;
    bool ok = check_cycles(sim, e, res);
    ql_txn_t *txn;
    int rc = ql_txn_begin(sim->store, false, &txn);
    if (rc) {
        sim_res_append(res, "cannot read the store: %s", ql_strerror(rc));
        return QL_SIM_INVALID;
    }
    if (e->has_submitted) {
        uint64_t n = 0;
        if ((rc = sim_count_system_builds(sim, txn, &n)) == 0) {
            n -= sim->system_baseline;
            if ((int64_t)n != e->submitted) {
                sim_res_append(res,
                               "%s:%u: submitted: expected %lld INC_BUILD job(s) submitted "
                               "by System, found %llu",
                               sim->sc->file, st->line, (long long)e->submitted,
                               (unsigned long long)n);
                ok = false;
            }
        }
    }
    if (!rc && e->has_epoch) {
        uint64_t epoch = 0;
        if ((rc = ql_fence_current(txn, &epoch)) == 0 && (int64_t)epoch != e->epoch) {
            sim_res_append(res, "%s:%u: server: expected the fencing epoch %lld, found %llu",
                           sim->sc->file, st->line, (long long)e->epoch, (unsigned long long)epoch);
            ok = false;
        }
    }
    if (e->has_master && ql_node_is_master(sim->node) != e->master) {
        const char *holder = ql_node_lock_holder(sim->node);
        sim_res_append(res, "%s:%u: server: expected %s, found %s%s%s", sim->sc->file, st->line,
                       e->master ? "the master" : "not the master",
                       e->master ? "not the master" : "the master",
                       !e->master || !holder[0] ? "" : "; the job engine lock is held by ",
                       e->master ? holder : "");
        ok = false;
    }
    if (!rc)
        ok &= check_jobs(sim, txn, e, res, &rc);
    if (!rc)
        ok &= check_segments(sim, txn, e, res, &rc);
    ql_txn_abort(txn);
    if (rc) {
        sim_res_append(res, "cannot read the store: %s", ql_strerror(rc));
        return QL_SIM_INVALID;
    }
    return ok ? QL_SIM_PASS : QL_SIM_FAIL;
}
