/*
 * A scenario's set-up: its projects, models, segments and jobs, written as the scenario states
 * them, in one write transaction, before the first step runs (see docs/simulation.md).
 */
#include "sim_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the set-up, as written, in one write transaction ---- */

static void step_state_for(ql_state_t job, uint32_t seq, ql_state_t *out) {
    switch (job) {
    case QL_RUNNING:
        *out = seq == 0 ? QL_RUNNING : QL_READY;
        break;
    case QL_ERROR:
        *out = seq == 0 ? QL_ERROR : QL_READY;
        break;
    case QL_SUCCEED:
        *out = QL_SUCCEED;
        break;
    case QL_DISCARDED:
    case QL_SUICIDAL:
        *out = QL_DISCARDED;
        break;
    default: /* READY, PENDING, PAUSED: nothing has run, or it was put back */
        *out = QL_READY;
    }
}

/* The segments a set-up refresh or merge replaces: a refresh the usable segment of its exact
 * range, a merge the usable segments inside its range. */
static size_t setup_sources(const sim_model_def_t *md, const ql_id_t *seg_ids, size_t self,
                            ql_id_t *out) {
    const sim_seg_def_t *s = &md->segs[self];
    bool merge = strcmp(s->job.type, "INDEX_MERGE") == 0;
    size_t n = 0;
    for (size_t i = 0; i < md->n_segs; i++) {
        const sim_seg_def_t *o = &md->segs[i];
        if (i == self || o->status == QL_SEG_NEW)
            continue;
        if (merge ? ql_range_contains(s->start, s->end, o->start, o->end)
                  : (o->start == s->start && o->end == s->end))
            out[n++] = seg_ids[i];
    }
    return n;
}

static int setup_job(ql_sim_t *sim, ql_txn_t *txn, size_t mi, const ql_id_t *seg_ids, size_t si,
                     ql_err_t *err) {
    const ql_sim_scenario_t *sc = sim->sc;
    const sim_model_def_t *md = &sc->models[mi];
    const sim_seg_def_t *sd = &md->segs[si];
    ql_job_steps_t steps;
    int rc = ql_job_steps_from_template(sc->templates, md->job_template, sd->job.type, &steps, err);
    if (rc)
        return rc;
    ql_id_t *sources = calloc(md->n_segs ? md->n_segs : 1, sizeof *sources);
    if (!sources) {
        ql_job_steps_free(&steps);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    int64_t t = sc->start;
    ql_job_t j = {0};
    ql_store_new_id(sim->store, &j.id);
    snprintf(j.project, sizeof j.project, "%s", sc->projects[md->project].name);
    j.model = sim->model_ids[mi];
    snprintf(j.model_name, sizeof j.model_name, "%s", md->name);
    snprintf(j.type, sizeof j.type, "%s", sd->job.type);
    j.state = sd->job.state;
    j.priority = QL_PRIORITY_DEFAULT;
    snprintf(j.submitter, sizeof j.submitter, "%s", sd->job.submitter);
    j.segment = seg_ids[si];
    if (strcmp(sd->job.type, "INC_BUILD") != 0) {
        j.n_sources = (uint32_t)setup_sources(md, seg_ids, si, sources);
        j.sources = sources; /* borrowed for the put */
    }
    j.has_range = true;
    j.range_start = sd->start;
    j.range_end = sd->end;
    j.n_steps = (uint32_t)steps.n;
    j.create_time = j.modify_time = t;
    if (j.state != QL_READY && j.state != QL_PENDING && j.state != QL_PAUSED)
        j.start_time = t;
    if (ql_state_is_final(j.state) || j.state == QL_ERROR)
        j.end_time = t;
    rc = ql_job_put(txn, &j);
    for (size_t i = 0; !rc && i < steps.n; i++) {
        ql_step_t s = {0};
        s.job = j.id;
        s.seq = (uint32_t)i;
        snprintf(s.name, sizeof s.name, "%s", steps.specs[i].name);
        snprintf(s.kind, sizeof s.kind, "%s", steps.specs[i].kind);
        step_state_for(j.state, s.seq, &s.state);
        if (s.state != QL_READY) {
            s.start_time = t;
            s.attempts = 1;
        }
        if (s.state != QL_READY && s.state != QL_RUNNING)
            s.end_time = t;
        if (s.state == QL_ERROR)
            s.failed_msg = "the step had failed before the simulation started (set-up)";
        s.def = (uint8_t *)steps.specs[i].def;
        s.def_len = steps.specs[i].def_len;
        rc = ql_step_put(txn, &s);
    }
    free(sources);
    ql_job_steps_free(&steps);
    if (rc)
        return ql_err_set(err, rc, "cannot store a set-up job: %s", ql_strerror(rc));
    ql_segment_t seg;
    if ((rc = ql_segment_get(txn, &seg_ids[si], &seg)))
        return ql_err_set(err, rc, "cannot read a set-up segment: %s", ql_strerror(rc));
    seg.job = j.id;
    rc = ql_segment_put(txn, &seg);
    ql_segment_free(&seg);
    if (rc)
        return ql_err_set(err, rc, "cannot store a set-up segment: %s", ql_strerror(rc));
    sim_note_created(sim, &j.id);
    return 0;
}

static int setup_model(ql_sim_t *sim, ql_txn_t *txn, size_t mi, ql_err_t *err) {
    const ql_sim_scenario_t *sc = sim->sc;
    const sim_model_def_t *md = &sc->models[mi];
    ql_model_t m = {0};
    ql_store_new_id(sim->store, &m.id);
    snprintf(m.name, sizeof m.name, "%s", md->name);
    snprintf(m.project, sizeof m.project, "%s", sc->projects[md->project].name);
    m.status = md->status;
    m.type = md->type;
    m.partitioned = md->partitioned;
    snprintf(m.partition_column, sizeof m.partition_column, "%s", md->column);
    snprintf(m.partition_format, sizeof m.partition_format, "%s", md->format);
    m.multi_partition_columns = md->multi_partition; /* borrowed for the put */
    m.auto_build = md->auto_build;
    snprintf(m.job_template, sizeof m.job_template, "%s", md->job_template);
    m.create_time = m.modify_time = sc->start;
    int rc = ql_model_put(txn, &m);
    if (rc)
        return ql_err_set(err, rc, "%s:%u: cannot store model '%s': %s", sc->file, md->line,
                          md->name, ql_strerror(rc));
    sim->model_ids[mi] = m.id;
    ql_id_t *ids = calloc(md->n_segs ? md->n_segs : 1, sizeof *ids);
    if (!ids)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < md->n_segs; i++) {
        const sim_seg_def_t *sd = &md->segs[i];
        ql_segment_t s = {0};
        ql_store_new_id(sim->store, &s.id);
        s.model = m.id;
        s.start = sd->start;
        s.end = sd->end;
        s.status = sd->status;
        s.create_time = sc->start;
        if (sd->status != QL_SEG_NEW)
            s.last_build_time = sc->start;
        if ((rc = ql_segment_put(txn, &s)))
            rc = ql_err_set(err, rc, "%s:%u: cannot store the segment: %s", sc->file, sd->line,
                            ql_strerror(rc));
        ids[i] = s.id;
    }
    for (size_t i = 0; !rc && i < md->n_segs; i++)
        if (md->segs[i].job.present)
            rc = setup_job(sim, txn, mi, ids, i, err);
    free(ids);
    return rc;
}

int sim_setup(ql_sim_t *sim, ql_err_t *err) {
    const ql_sim_scenario_t *sc = sim->sc;
    ql_txn_t *txn;
    int rc = ql_txn_begin(sim->store, true, &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot write the set-up: %s", ql_strerror(rc));
    for (size_t i = 0; !rc && i < sc->n_projects; i++) {
        const sim_project_def_t *pd = &sc->projects[i];
        ql_project_t p = {0};
        snprintf(p.name, sizeof p.name, "%s", pd->name);
        p.auto_segment_build_enabled = pd->enabled;
        p.create_time = p.modify_time = sc->start;
        if (pd->has_timezone)
            rc = ql_strmap_set(&p.config, "kylin.web.timezone", pd->timezone);
        if (!rc && (rc = ql_project_put(txn, &p)))
            rc = ql_err_set(err, rc, "%s:%u: cannot store project '%s': %s", sc->file, pd->line,
                            pd->name, ql_strerror(rc));
        ql_project_free(&p);
    }
    for (size_t i = 0; !rc && i < sc->n_models; i++)
        rc = setup_model(sim, txn, i, err);
    uint64_t n = 0;
    if (!rc)
        rc = sim_count_system_builds(sim, txn, &n);
    sim->system_baseline = n;
    if (rc) {
        ql_txn_abort(txn);
        return rc;
    }
    if ((rc = ql_txn_commit(txn)))
        return ql_err_set(err, rc, "cannot commit the set-up: %s", ql_strerror(rc));
    return 0;
}
