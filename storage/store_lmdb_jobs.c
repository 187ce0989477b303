/* Jobs with their indexes and counters, steps, and step outputs. */
#include "storage/ql_meta.h"
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#define STEP_KEY_LEN 20

void ql_job_state_key(uint8_t k[QL_JOB_STATE_KEY_LEN], const ql_job_t *j) {
    k[0] = (uint8_t)j->state;
    k[1] = (uint8_t)j->priority;
    ql_put_key_i64(k + 2, j->create_time);
    memcpy(k + 10, j->id.b, 16);
}

void ql_job_live_entry(uint8_t k[QL_LIVE_KEY_LEN], uint8_t v[QL_LIVE_VAL_LEN], const ql_job_t *j) {
    memcpy(k, j->model.b, 16);
    ql_put_key_i64(k + 16, j->has_range ? j->range_start : INT64_MIN);
    memcpy(k + 24, j->id.b, 16);
    v[0] = (uint8_t)j->state;
    v[1] = j->has_range;
    ql_put_key_i64(v + 2, j->range_start);
    ql_put_key_i64(v + 10, j->range_end);
}

void ql_job_model_key(uint8_t k[QL_JOB_MODEL_KEY_LEN], const ql_job_t *j) {
    memcpy(k, j->model.b, 16);
    ql_put_key_i64(k + 16, j->create_time);
    memcpy(k + 24, j->id.b, 16);
}

size_t ql_job_recent_key(uint8_t k[QL_JOB_RECENT_KEY_MAX], const char *project, const ql_job_t *j) {
    size_t pl = strlen(project);
    memcpy(k, project, pl);
    k[pl] = '\0';
    ql_put_key_i64(k + pl + 1, j->modify_time);
    memcpy(k + pl + 9, j->id.b, 16);
    return pl + 25;
}

static size_t count_key(uint8_t *k, ql_state_t state, const char *project) {
    size_t pl = strlen(project);
    k[0] = 'J';
    k[1] = (uint8_t)state;
    memcpy(k + 2, project, pl);
    return pl + 2;
}

static int count_state(ql_txn_t *txn, const ql_job_t *j, int64_t delta) {
    uint8_t k[QL_NAME_MAX + 2];
    int rc = ql_count_add(txn, k, count_key(k, j->state, j->project), delta);
    if (!rc)
        rc = ql_count_add(txn, k, count_key(k, j->state, ""), delta);
    return rc;
}

static bool non_final(ql_state_t s) {
    return !ql_state_is_final(s);
}

int lmdb_job_get(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_job_t *out) {
    MDB_val v;
    int rc = ql_db_get(txn, DB_JOBS, id->b, 16, &v);
    if (rc)
        return rc;
    msgpack_zone *z = ql_txn_zone(txn);
    return z ? ql_job_decode_z(z, v.mv_data, v.mv_size, flags, out) : UV_ENOMEM;
}

/*
 * Moves a job's index entries and counters from old (NULL: a new job) to j. Only entries whose
 * key or value changes are written: a transition rewrites a live job's job_live value in place
 * (its key, model and range start, stays), and a job whose state stays keeps its job_states
 * entry and counters. old and j have the same project and model (ql_job_put checks).
 */
static int index_job(ql_txn_t *txn, const ql_job_t *old, const ql_job_t *j) {
    uint8_t ok[QL_JOB_RECENT_KEY_MAX], nk[QL_JOB_RECENT_KEY_MAX], ov[QL_LIVE_VAL_LEN],
        nv[QL_LIVE_VAL_LEN];
    int rc;
    ql_job_state_key(nk, j);
    bool same = false;
    if (old) {
        ql_job_state_key(ok, old);
        same = memcmp(ok, nk, QL_JOB_STATE_KEY_LEN) == 0;
        if (!same && (rc = ql_db_del(txn, DB_JOB_STATES, ok, QL_JOB_STATE_KEY_LEN)))
            return rc;
    }
    if (!same && (rc = ql_db_put(txn, DB_JOB_STATES, nk, QL_JOB_STATE_KEY_LEN, "", 0)))
        return rc;

    /* job_recent: the project's list and every project's (under ""); the value is the state. */
    uint8_t state = (uint8_t)j->state;
    for (int every = 0; every < 2; every++) {
        const char *project = every ? "" : j->project;
        size_t nl = ql_job_recent_key(nk, project, j);
        if (old) {
            size_t ol = ql_job_recent_key(ok, project, old);
            bool same_key = ol == nl && memcmp(ok, nk, nl) == 0;
            if (same_key && old->state == j->state)
                continue;
            if (!same_key && (rc = ql_db_del(txn, DB_JOB_RECENT, ok, ol)))
                return rc;
        }
        if ((rc = ql_db_put(txn, DB_JOB_RECENT, nk, nl, &state, 1)))
            return rc;
    }

    if (!ql_id_is_zero(&j->model)) {
        bool write_live = non_final(j->state);
        if (write_live)
            ql_job_live_entry(nk, nv, j);
        if (old && non_final(old->state)) {
            ql_job_live_entry(ok, ov, old);
            bool same_key = write_live && memcmp(ok, nk, QL_LIVE_KEY_LEN) == 0;
            if (!same_key && (rc = ql_db_del(txn, DB_JOB_LIVE, ok, QL_LIVE_KEY_LEN)))
                return rc;
            if (same_key && memcmp(ov, nv, QL_LIVE_VAL_LEN) == 0)
                write_live = false;
        }
        if (write_live &&
            (rc = ql_db_put(txn, DB_JOB_LIVE, nk, QL_LIVE_KEY_LEN, nv, QL_LIVE_VAL_LEN)))
            return rc;
        if (!old) {
            ql_job_model_key(nk, j);
            if ((rc = ql_db_put(txn, DB_JOB_MODELS, nk, QL_JOB_MODEL_KEY_LEN, "", 0)))
                return rc;
        }
    }

    if (old && old->state == j->state)
        return 0;
    if (old && (rc = count_state(txn, old, -1)))
        return rc;
    return count_state(txn, j, 1);
}

int lmdb_job_put(ql_txn_t *txn, const ql_job_t *j) {
    if (ql_id_is_zero(&j->id) || !j->project[0] || (unsigned)j->state >= QL_JOB_STATE_COUNT ||
        j->priority < QL_PRIORITY_MIN || j->priority > QL_PRIORITY_MAX ||
        (j->has_range &&
         ql_meta_check_range("range_start", "range_end", j->range_start, j->range_end, true, NULL)))
        return QL_EINVAL;
    ql_job_t old;
    int rc = ql_job_get(txn, &j->id, 0, &old);
    bool existed = rc == 0;
    ql_state_t was = existed ? old.state : QL_READY;
    if (rc && rc != QL_ENOTFOUND)
        return rc;
    if (existed) {
        /* The creation-time index and the project never change for a job. */
        if (old.create_time != j->create_time || strcmp(old.project, j->project) != 0 ||
            !ql_id_eq(&old.model, &j->model))
            rc = QL_EINVAL;
        else
            rc = index_job(txn, &old, j);
        ql_job_free(&old);
    } else {
        rc = index_job(txn, NULL, j);
    }
    if (rc)
        return rc;
    ql_buf_reset(&txn->buf);
    if ((rc = ql_job_encode(j, &txn->buf)))
        return rc;
    rc = ql_db_put(txn, DB_JOBS, j->id.b, 16, txn->buf.data, txn->buf.len);
    if (rc == 0 && store_change_wakes(existed, was, j->state))
        lmdb_changes_note(txn, &j->id);
    return rc;
}

int lmdb_job_foreach_state_ref(ql_txn_t *txn, ql_state_t state, ql_job_state_ref_cb cb, void *arg) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_JOB_STATES, &c);
    if (rc)
        return rc;
    uint8_t first = (uint8_t)state;
    MDB_val k = ql_val(&first, 1), v;
    int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (mrc == 0 && k.mv_size == QL_JOB_STATE_KEY_LEN && ((uint8_t *)k.mv_data)[0] == first) {
        const uint8_t *p = k.mv_data;
        ql_id_t id;
        memcpy(id.b, p + 10, 16);
        if ((rc = cb(&id, p[1], ql_get_key_i64(p + 2), arg)))
            break;
        mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

typedef struct {
    ql_txn_t *txn;
    ql_job_cb cb;
    void *arg;
} decode_walk_t;

static int decode_walk_cb(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    (void)priority;
    (void)create_time;
    decode_walk_t *w = arg;
    ql_job_t j;
    int rc = ql_job_get(w->txn, id, 0, &j);
    if (rc)
        return rc;
    rc = w->cb(&j, w->arg);
    ql_job_free(&j);
    return rc;
}

int lmdb_job_foreach_state(ql_txn_t *txn, ql_state_t state, ql_job_cb cb, void *arg) {
    decode_walk_t w = {.txn = txn, .cb = cb, .arg = arg};
    return ql_job_foreach_state_ref(txn, state, decode_walk_cb, &w);
}

int lmdb_job_foreach_model(ql_txn_t *txn, const ql_id_t *model, ql_job_cb cb, void *arg) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_JOB_MODELS, &c);
    if (rc)
        return rc;
    MDB_val k = ql_val(model->b, 16), v;
    int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (mrc == 0 && k.mv_size == QL_JOB_MODEL_KEY_LEN && memcmp(k.mv_data, model->b, 16) == 0) {
        ql_id_t id;
        memcpy(id.b, (uint8_t *)k.mv_data + 24, 16);
        ql_job_t j;
        if ((rc = ql_job_get(txn, &id, 0, &j)))
            break;
        rc = cb(&j, arg);
        ql_job_free(&j);
        if (rc)
            break;
        mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

/* One job_live entry; 1 when it is not an entry of model (the walk ends there). */
static int live_decode(const MDB_val *k, const MDB_val *v, const ql_id_t *model,
                       ql_live_job_t *out) {
    if (k->mv_size < 16 || memcmp(k->mv_data, model->b, 16) != 0)
        return 1;
    if (k->mv_size != QL_LIVE_KEY_LEN || v->mv_size != QL_LIVE_VAL_LEN)
        return QL_ECORRUPT;
    const uint8_t *p = v->mv_data;
    memcpy(out->id.b, (const uint8_t *)k->mv_data + 24, 16);
    out->state = (ql_state_t)p[0];
    out->has_range = p[1];
    out->start = ql_get_key_i64(p + 2);
    out->end = ql_get_key_i64(p + 10);
    return 0;
}

/* Visits the entries from the first key >= (model, from) while their start is below until. */
static int live_walk(MDB_cursor *c, const ql_id_t *model, int64_t from, int64_t until,
                     ql_live_job_cb cb, void *arg) {
    uint8_t seek[24];
    memcpy(seek, model->b, 16);
    ql_put_key_i64(seek + 16, from);
    MDB_val k = ql_val(seek, sizeof seek), v;
    int rc = 0;
    for (int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        ql_live_job_t lj;
        if ((rc = live_decode(&k, &v, model, &lj)))
            return rc > 0 ? 0 : rc;
        if (ql_get_key_i64((const uint8_t *)k.mv_data + 16) >= until)
            return 0;
        if ((rc = cb(&lj, arg)))
            return rc;
    }
    return 0;
}

int lmdb_job_foreach_live(ql_txn_t *txn, const ql_id_t *model, ql_live_job_cb cb, void *arg) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_JOB_LIVE, &c);
    if (rc)
        return rc;
    rc = live_walk(c, model, INT64_MIN, INT64_MAX, cb, arg);
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

/*
 * The live jobs whose range overlaps [start, end). This rests on an invariant: the ranged live
 * jobs of a model never overlap one another, because every mutation that creates a job with a
 * range refuses an overlapping live one inside its transaction (KE-010032206), and fsck checks
 * it. Sorted by start they are then sorted by end too, so the ones overlapping [start, end)
 * are the last one starting before start (when it ends after start) and those starting in
 * [start, end): one seek back, one walk forward, never the model's other live jobs.
 */
int lmdb_job_foreach_live_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start,
                                      int64_t end, ql_live_job_cb cb, void *arg) {
    if (start >= end)
        return 0;
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_JOB_LIVE, &c);
    if (rc)
        return rc;
    uint8_t seek[24];
    memcpy(seek, model->b, 16);
    ql_put_key_i64(seek + 16, start);
    MDB_val k = ql_val(seek, sizeof seek), v;
    int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    mrc = mdb_cursor_get(c, &k, &v, mrc == 0 ? MDB_PREV : MDB_LAST);
    if (mrc == 0) {
        ql_live_job_t before;
        int d = live_decode(&k, &v, model, &before);
        if (d < 0)
            rc = d;
        else if (d == 0 && before.has_range && before.end > start)
            rc = cb(&before, arg);
    }
    if (rc == 0)
        rc = live_walk(c, model, start, end, cb, arg);
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

int ql_store_migrate_job_live(ql_txn_t *txn) {
    enum { OLD_KEY_LEN = 32 };
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_JOB_LIVE, &c);
    if (rc)
        return rc;
    /* Collected first: the table is rewritten under the cursor otherwise. */
    size_t n = 0, cap = 0;
    uint8_t(*old)[OLD_KEY_LEN + QL_LIVE_VAL_LEN] = NULL;
    MDB_val k, v;
    for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc;
         mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size == QL_LIVE_KEY_LEN)
            continue; /* already in the new layout */
        if (k.mv_size != OLD_KEY_LEN || v.mv_size != QL_LIVE_VAL_LEN) {
            rc = QL_ECORRUPT;
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 256;
            void *p = realloc(old, ncap * sizeof *old);
            if (!p) {
                rc = UV_ENOMEM;
                break;
            }
            old = p;
            cap = ncap;
        }
        memcpy(old[n], k.mv_data, OLD_KEY_LEN);
        memcpy(old[n] + OLD_KEY_LEN, v.mv_data, QL_LIVE_VAL_LEN);
        n++;
    }
    mdb_cursor_close(c);
    for (size_t i = 0; i < n && !rc; i++) {
        const uint8_t *ok = old[i], *ov = old[i] + OLD_KEY_LEN;
        uint8_t nk[QL_LIVE_KEY_LEN];
        memcpy(nk, ok, 16);
        if (ov[1])
            memcpy(nk + 16, ov + 2, 8); /* the start, already in key encoding */
        else
            ql_put_key_i64(nk + 16, INT64_MIN);
        memcpy(nk + 24, ok + 16, 16);
        if (!(rc = ql_db_del(txn, DB_JOB_LIVE, ok, OLD_KEY_LEN)))
            rc = ql_db_put(txn, DB_JOB_LIVE, nk, QL_LIVE_KEY_LEN, ov, QL_LIVE_VAL_LEN);
    }
    free(old);
    return rc;
}

int lmdb_job_foreach_recent(ql_txn_t *txn, const char *project, bool oldest_first, ql_job_ref_cb cb,
                            void *arg) {
    if (!project)
        project = "";
    size_t pl = strlen(project);
    if (pl > QL_NAME_MAX)
        return 0;
    uint8_t prefix[QL_NAME_MAX + 2];
    memcpy(prefix, project, pl);
    prefix[pl] = '\0';
    size_t plen = pl + 1;
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_JOB_RECENT, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    int mrc;
    if (oldest_first) {
        k = ql_val(prefix, plen);
        mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    } else {
        /* The key just past the prefix: the project name followed by '\1'. */
        prefix[pl] = '\1';
        k = ql_val(prefix, plen);
        mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
        mrc = mrc == 0 ? mdb_cursor_get(c, &k, &v, MDB_PREV) : mdb_cursor_get(c, &k, &v, MDB_LAST);
        prefix[pl] = '\0';
    }
    while (mrc == 0 && k.mv_size == plen + 24 && memcmp(k.mv_data, prefix, plen) == 0) {
        if (v.mv_size != 1) {
            rc = QL_ECORRUPT;
            break;
        }
        ql_id_t id;
        memcpy(id.b, (uint8_t *)k.mv_data + plen + 8, 16);
        int64_t mtime = ql_get_key_i64((uint8_t *)k.mv_data + plen);
        if ((rc = cb(&id, (ql_state_t)((uint8_t *)v.mv_data)[0], mtime, arg)))
            break;
        mrc = mdb_cursor_get(c, &k, &v, oldest_first ? MDB_NEXT : MDB_PREV);
    }
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

int lmdb_job_count(ql_txn_t *txn, const char *project, uint32_t state_mask, uint64_t *out) {
    if (!project)
        project = "";
    *out = 0;
    if (strlen(project) > QL_NAME_MAX)
        return 0;
    for (int s = 0; s < QL_JOB_STATE_COUNT; s++) {
        if (!(state_mask & (1u << s)))
            continue;
        uint8_t k[QL_NAME_MAX + 2];
        uint64_t n;
        int rc = ql_count_get(txn, k, count_key(k, (ql_state_t)s, project), &n);
        if (rc)
            return rc;
        *out += n;
    }
    return 0;
}

/* ---- steps and outputs ---- */

static void step_key(uint8_t *k, const ql_id_t *job, uint32_t seq) {
    memcpy(k, job->b, 16);
    k[16] = (uint8_t)(seq >> 24);
    k[17] = (uint8_t)(seq >> 16);
    k[18] = (uint8_t)(seq >> 8);
    k[19] = (uint8_t)seq;
}

int lmdb_step_get(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, ql_step_t *out) {
    uint8_t k[STEP_KEY_LEN];
    step_key(k, job, seq);
    MDB_val v;
    int rc = ql_db_get(txn, DB_STEPS, k, STEP_KEY_LEN, &v);
    if (rc)
        return rc;
    msgpack_zone *z = ql_txn_zone(txn);
    return z ? ql_step_decode_z(z, v.mv_data, v.mv_size, QL_DECODE_KEEP_EXTRA, out) : UV_ENOMEM;
}

int lmdb_step_put(ql_txn_t *txn, const ql_step_t *s) {
    if ((unsigned)s->state >= QL_STATE_COUNT)
        return QL_EINVAL;
    uint8_t k[STEP_KEY_LEN];
    step_key(k, &s->job, s->seq);
    ql_buf_reset(&txn->buf);
    int rc = ql_step_encode(s, &txn->buf);
    if (rc)
        return rc;
    return ql_db_put(txn, DB_STEPS, k, STEP_KEY_LEN, txn->buf.data, txn->buf.len);
}

int lmdb_step_foreach(ql_txn_t *txn, const ql_id_t *job, ql_step_cb cb, void *arg) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_STEPS, &c);
    if (rc)
        return rc;
    msgpack_zone *z = ql_txn_zone(txn);
    MDB_val k = ql_val(job->b, 16), v;
    int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (z && mrc == 0 && k.mv_size == STEP_KEY_LEN && memcmp(k.mv_data, job->b, 16) == 0) {
        ql_step_t s;
        if ((rc = ql_step_decode_z(z, v.mv_data, v.mv_size, 0, &s)))
            break;
        rc = cb(&s, arg);
        ql_step_free(&s);
        if (rc)
            break;
        mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(c);
    if (!z)
        return UV_ENOMEM;
    return rc > 0 ? 0 : rc;
}

int lmdb_output_get(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, char **out, size_t *len) {
    uint8_t k[STEP_KEY_LEN];
    step_key(k, job, seq);
    MDB_val v;
    int rc = ql_db_get(txn, DB_OUTPUTS, k, STEP_KEY_LEN, &v);
    if (rc)
        return rc;
    *out = malloc(v.mv_size + 1);
    if (!*out)
        return UV_ENOMEM;
    memcpy(*out, v.mv_data, v.mv_size);
    (*out)[v.mv_size] = '\0';
    *len = v.mv_size;
    return 0;
}

int lmdb_output_put(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, const char *text, size_t len) {
    uint8_t k[STEP_KEY_LEN];
    step_key(k, job, seq);
    return ql_db_put(txn, DB_OUTPUTS, k, STEP_KEY_LEN, text, len);
}

/* ---- deletion ---- */

/* Deletes every entry of db whose key starts with the job's id (its steps or outputs; keys are
 * 20 bytes, so the compare stays in bounds): one seek per entry, at most one per step. */
static int delete_job_prefixed(ql_txn_t *txn, int db, const ql_id_t *job) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, db, &c);
    if (rc)
        return rc;
    for (int i = 0;; i++) {
        MDB_val k = ql_val(job->b, 16), v;
        int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
        if (mrc == MDB_NOTFOUND || (!mrc && memcmp(k.mv_data, job->b, 16) != 0))
            break;
        if (!mrc && i == QL_JOB_STEPS_MAX) {
            rc = QL_ECORRUPT; /* more entries than a job can have steps */
            break;
        }
        if (mrc || (mrc = mdb_cursor_del(c, 0))) {
            rc = ql_store_mdb_err(mrc);
            break;
        }
    }
    mdb_cursor_close(c);
    return rc;
}

/* The record, every index entry and counter ql_job_put made for it (index_job with no new
 * state), its steps and its outputs. */
int lmdb_job_delete(ql_txn_t *txn, const ql_id_t *id) {
    if (!txn->write)
        return QL_EINVAL;
    ql_job_t j;
    int rc = ql_job_get(txn, id, 0, &j);
    if (rc)
        return rc;
    uint8_t k[QL_JOB_RECENT_KEY_MAX], v[QL_LIVE_VAL_LEN];
    ql_job_state_key(k, &j);
    rc = ql_db_del(txn, DB_JOB_STATES, k, QL_JOB_STATE_KEY_LEN);
    for (int every = 0; every < 2 && !rc; every++)
        rc = ql_db_del(txn, DB_JOB_RECENT, k, ql_job_recent_key(k, every ? "" : j.project, &j));
    if (!rc && !ql_id_is_zero(&j.model)) {
        if (non_final(j.state)) {
            ql_job_live_entry(k, v, &j);
            rc = ql_db_del(txn, DB_JOB_LIVE, k, QL_LIVE_KEY_LEN);
        }
        if (!rc) {
            ql_job_model_key(k, &j);
            rc = ql_db_del(txn, DB_JOB_MODELS, k, QL_JOB_MODEL_KEY_LEN);
        }
    }
    if (!rc)
        rc = count_state(txn, &j, -1);
    ql_job_free(&j);
    if (!rc)
        rc = delete_job_prefixed(txn, DB_STEPS, id);
    if (!rc)
        rc = delete_job_prefixed(txn, DB_OUTPUTS, id);
    if (!rc)
        rc = ql_db_del(txn, DB_JOBS, id->b, 16);
    return rc;
}
