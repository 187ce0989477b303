/*
 * fsck pass over the jobs and their steps, which share their key prefix (the job id) and so are
 * walked side by side (a merge join): each job record (its state, range, project, model and
 * segment, its index entries), its steps (numbering, states against the job's), steps without a
 * job; then the outputs, which belong to steps.
 */
#include "fsck_int.h"

typedef struct {
    uint32_t n;
    uint32_t next_seq;
    bool bad_seq;
    bool bad_for_succeed; /* a step not SUCCEED/WARNING/SKIP */
    bool running;
} step_tally_t;

static void check_step(ql_fsck_t *f, const MDB_val *k, const MDB_val *v, const char *jid,
                       step_tally_t *t) {
    f->r->steps++;
    const uint8_t *kp = k->mv_data;
    uint32_t seq = (uint32_t)kp[16] << 24 | (uint32_t)kp[17] << 16 | (uint32_t)kp[18] << 8 | kp[19];
    t->n++;
    if (seq != t->next_seq)
        t->bad_seq = true;
    t->next_seq = seq + 1;
    ql_step_t s;
    int drc = ql_step_decode_z(f->zone, v->mv_data, v->mv_size, 0, &s);
    if (drc) {
        VIOLATION(f, "step %s_%02u: record does not decode: %s", jid, seq, ql_strerror(drc));
        t->bad_for_succeed = true;
        return;
    }
    if (memcmp(s.job.b, kp, 16) != 0 || s.seq != seq)
        VIOLATION(f, "step %s_%02u: the record names step %02u of another job or sequence", jid,
                  seq, s.seq);
    if ((unsigned)s.state >= QL_STATE_COUNT)
        VIOLATION(f, "step %s_%02u: state %d is not a step state", jid, seq, (int)s.state);
    if (s.state != QL_SUCCEED && s.state != QL_WARNING && s.state != QL_SKIP)
        t->bad_for_succeed = true;
    if (s.state == QL_RUNNING)
        t->running = true;
    ql_step_free(&s);
}

static void check_job_steps(ql_fsck_t *f, const ql_job_t *j, const char *id,
                            const step_tally_t *t) {
    if (t->n != j->n_steps)
        VIOLATION(f, "job %s: n_steps is %u but %u step records exist", id, j->n_steps, t->n);
    else if (t->bad_seq)
        VIOLATION(f, "job %s: steps are not numbered 00..%02u", id, t->n ? t->n - 1 : 0);
    if (j->state == QL_SUCCEED && t->bad_for_succeed)
        VIOLATION(f, "job %s: SUCCEED, yet a step is not SUCCEED, WARNING or SKIP", id);
    if ((unsigned)j->state < QL_JOB_STATE_COUNT && ql_state_is_final(j->state) && t->running)
        VIOLATION(f, "job %s: %s, yet a step is RUNNING", id, ql_state_name(j->state));
}

static void check_job_record(ql_fsck_t *f, const MDB_val *k, ql_job_t *j, const char *id) {
    if (memcmp(j->id.b, k->mv_data, 16) != 0)
        VIOLATION(f, "job %s: the record carries another id", id);
    if ((unsigned)j->state >= QL_JOB_STATE_COUNT) {
        VIOLATION(f, "job %s: state %s is not a job state", id, ql_state_name(j->state));
        return; /* its index keys are undefined */
    }
    if (j->has_range && j->range_start >= j->range_end)
        VIOLATION(f, "job %s: empty range [%lld, %lld)", id, (long long)j->range_start,
                  (long long)j->range_end);
    ql_fsck_proj_t *e = ql_fsck_proj_lookup(&f->projects, j->project, strlen(j->project));
    if (!e) {
        VIOLATION(f, "job %s: project name '%s' is not valid", id, j->project);
        return;
    }
    if (!e->exists)
        WARNING(f, "job %s: its project '%s' does not exist", id, j->project);
    e->jobs[j->state]++;
    f->all_jobs[j->state]++;
    ql_fsck_job_indexes(f, j, id);
    if (!ql_state_is_final(j->state) && !ql_id_is_zero(&j->model)) {
        char mid[QL_ID_STR_LEN + 1];
        ql_id_format(&j->model, mid);
        if (!exists(f, DB_MODELS, j->model.b, 16, NULL))
            WARNING(f, "job %s: %s, but its model %s does not exist (it will become SUICIDAL)", id,
                    ql_state_name(j->state), mid);
        else if (!ql_id_is_zero(&j->segment) && !exists(f, DB_SEGMENT_IDS, j->segment.b, 16, NULL))
            WARNING(f, "job %s: %s, but its segment is gone (it will become SUICIDAL)", id,
                    ql_state_name(j->state));
    }
}

int ql_fsck_jobs(ql_fsck_t *f) {
    MDB_cursor *jc, *sc;
    int rc = cursor(f, DB_JOBS, &jc);
    if (rc)
        return rc;
    if ((rc = cursor(f, DB_STEPS, &sc))) {
        mdb_cursor_close(jc);
        return rc;
    }
    MDB_val jk, jv, sk, sv;
    bool steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_FIRST) == 0;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(jc, &jk, &jv, op) == 0; op = MDB_NEXT) {
        f->r->jobs++;
        if (jk.mv_size != 16) {
            VIOLATION(f, "jobs: a key of %zu bytes is not a job id", jk.mv_size);
            continue;
        }
        /* Steps sort before this job's: their job is missing. */
        while (steps_left && (sk.mv_size < 16 || memcmp(sk.mv_data, jk.mv_data, 16) < 0)) {
            f->r->steps++;
            if (sk.mv_size >= 16) {
                idstr(sk.mv_data, id);
                VIOLATION(f, "step of job %s: the job does not exist", id);
            } else {
                VIOLATION(f, "steps: a key of %zu bytes is not a step key", sk.mv_size);
            }
            steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_NEXT) == 0;
        }
        idstr(jk.mv_data, id);
        step_tally_t t = {0};
        while (steps_left && sk.mv_size >= 16 && memcmp(sk.mv_data, jk.mv_data, 16) == 0) {
            if (sk.mv_size == STEP_KEY_LEN) {
                check_step(f, &sk, &sv, id, &t);
            } else {
                f->r->steps++;
                VIOLATION(f, "steps: a key of %zu bytes under job %s is not a step key", sk.mv_size,
                          id);
            }
            steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_NEXT) == 0;
        }
        ql_job_t j;
        int drc = ql_job_decode_z(f->zone, jv.mv_data, jv.mv_size, 0, &j);
        if (drc) {
            VIOLATION(f, "job %s: record does not decode: %s", id, ql_strerror(drc));
            continue;
        }
        check_job_record(f, &jk, &j, id);
        check_job_steps(f, &j, id, &t);
        ql_job_free(&j);
    }
    while (steps_left) {
        f->r->steps++;
        if (sk.mv_size >= 16) {
            idstr(sk.mv_data, id);
            VIOLATION(f, "step of job %s: the job does not exist", id);
        }
        steps_left = mdb_cursor_get(sc, &sk, &sv, MDB_NEXT) == 0;
    }
    mdb_cursor_close(sc);
    mdb_cursor_close(jc);
    return ql_fsck_job_index_stale(f);
}

int ql_fsck_outputs(ql_fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_OUTPUTS, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        if (k.mv_size != STEP_KEY_LEN) {
            VIOLATION(f, "outputs: a key of %zu bytes is not a step key", k.mv_size);
            continue;
        }
        if (!exists(f, DB_STEPS, k.mv_data, STEP_KEY_LEN, NULL)) {
            idstr(k.mv_data, id);
            WARNING(f, "output of step %s_%02u: the step does not exist", id,
                    ((const uint8_t *)k.mv_data)[19]);
        }
    }
    mdb_cursor_close(c);
    return 0;
}
