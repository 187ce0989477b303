/*
 * fsck of the job indexes (job_states, job_recent, job_live, job_models). Record to index: each
 * job record's expected entries are exact lookups, counted when found. Index to record: no two
 * jobs expect the same key (it holds the job id), so an index with more entries than were found
 * has stale ones, and only such an index is walked to name them. Also: the ranged live jobs of
 * one model do not overlap.
 */
#include "fsck_int.h"

void ql_fsck_job_indexes(ql_fsck_t *f, const ql_job_t *j, const char *id) {
    uint8_t k[QL_JOB_RECENT_KEY_MAX], lv[QL_LIVE_VAL_LEN];
    MDB_val v;
    ql_job_state_key(k, j);
    if (!exists(f, DB_JOB_STATES, k, QL_JOB_STATE_KEY_LEN, NULL))
        VIOLATION(f, "job %s: no job_states entry for (%s, priority %d, created %lld)", id,
                  ql_state_name(j->state), j->priority, (long long)j->create_time);
    else
        f->found_state++;
    const char *projects[2] = {j->project, ""};
    for (int i = 0; i < 2; i++) {
        size_t kl = ql_job_recent_key(k, projects[i], j);
        if (!exists(f, DB_JOB_RECENT, k, kl, &v))
            VIOLATION(f, "job %s: no job_recent entry under %s%s%s for modify time %lld", id,
                      i ? "" : "project '", i ? "all projects" : j->project, i ? "" : "'",
                      (long long)j->modify_time);
        else if (v.mv_size != 1 || ((const uint8_t *)v.mv_data)[0] != (uint8_t)j->state)
            VIOLATION(f, "job %s: job_recent entry under %s has the wrong state", id,
                      i ? "all projects" : j->project);
        else
            f->found_recent++;
    }
    if (ql_id_is_zero(&j->model))
        return;
    ql_job_model_key(k, j);
    if (!exists(f, DB_JOB_MODELS, k, QL_JOB_MODEL_KEY_LEN, NULL))
        VIOLATION(f, "job %s: no job_models entry", id);
    else
        f->found_models++;
    ql_job_live_entry(k, lv, j);
    bool found = exists(f, DB_JOB_LIVE, k, QL_LIVE_KEY_LEN, &v);
    if (ql_state_is_final(j->state)) {
        if (found)
            VIOLATION(f, "job %s: %s, yet listed in job_live", id, ql_state_name(j->state));
        return;
    }
    if (!found)
        VIOLATION(f, "job %s: %s, yet missing from job_live", id, ql_state_name(j->state));
    else if (v.mv_size != QL_LIVE_VAL_LEN || memcmp(v.mv_data, lv, QL_LIVE_VAL_LEN) != 0)
        VIOLATION(f, "job %s: job_live entry does not match the record (state or range)", id);
    else
        f->found_live++;
}

/* Names the entries of a job index that no job record expects. `id_at` is where the job id
 * sits in the key; `expect` writes the key(s) the job expects (returns their count). */
typedef size_t (*expect_fn)(const ql_job_t *j, int which, uint8_t *k, size_t *klen);

static size_t expect_state(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    (void)which;
    ql_job_state_key(k, j);
    *klen = QL_JOB_STATE_KEY_LEN;
    return 1;
}

static size_t expect_recent(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    *klen = ql_job_recent_key(k, which ? "" : j->project, j);
    return 2;
}

static size_t expect_live(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    uint8_t v[QL_LIVE_VAL_LEN];
    (void)which;
    if (ql_id_is_zero(&j->model) || ql_state_is_final(j->state))
        return 0;
    ql_job_live_entry(k, v, j);
    *klen = QL_LIVE_KEY_LEN;
    return 1;
}

static size_t expect_model(const ql_job_t *j, int which, uint8_t *k, size_t *klen) {
    (void)which;
    if (ql_id_is_zero(&j->model))
        return 0;
    ql_job_model_key(k, j);
    *klen = QL_JOB_MODEL_KEY_LEN;
    return 1;
}

static int find_stale(ql_fsck_t *f, int db, const char *name, expect_fn expect) {
    MDB_cursor *c;
    int rc = cursor(f, db, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        const uint8_t *kp = k.mv_data;
        size_t id_at;
        if (db == DB_JOB_STATES)
            id_at = 10;
        else if (db == DB_JOB_LIVE || db == DB_JOB_MODELS)
            id_at = 24;
        else
            id_at = k.mv_size >= 24 ? k.mv_size - 16 : 0;
        bool ok = false;
        if (k.mv_size >= id_at + 16) {
            ql_id_t jid;
            memcpy(jid.b, kp + id_at, 16);
            ql_job_t j;
            if (ql_job_get(f->txn, &jid, 0, &j) == 0) {
                if ((unsigned)j.state < QL_JOB_STATE_COUNT) {
                    uint8_t ek[QL_JOB_RECENT_KEY_MAX];
                    size_t el = 0;
                    for (int w = 0; !ok && (size_t)w < expect(&j, w, ek, &el); w++)
                        ok = el == k.mv_size && memcmp(ek, kp, el) == 0;
                }
                ql_job_free(&j);
            }
            idstr(kp + id_at, id);
        } else {
            snprintf(id, sizeof id, "(key of %zu bytes)", k.mv_size);
        }
        if (!ok)
            VIOLATION(f, "%s: stale entry for job %s (no job record expects it)", name, id);
    }
    mdb_cursor_close(c);
    return 0;
}

int ql_fsck_job_index_stale(ql_fsck_t *f) {
    /* Every entry ql_fsck_job_indexes found is one a job expects, and no two jobs expect the
     * same key (it holds the job id): an index with more entries than were found has stale
     * ones. */
    int rc;
    struct {
        int db;
        const char *name;
        uint64_t found;
        expect_fn fn;
    } idx[] = {
        {DB_JOB_STATES, "job_states", f->found_state, expect_state},
        {DB_JOB_RECENT, "job_recent", f->found_recent, expect_recent},
        {DB_JOB_LIVE, "job_live", f->found_live, expect_live},
        {DB_JOB_MODELS, "job_models", f->found_models, expect_model},
    };
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
        if (entries(f, idx[i].db) != idx[i].found &&
            (rc = find_stale(f, idx[i].db, idx[i].name, idx[i].fn)))
            return rc;
    return 0;
}

/*
 * The ranged live jobs of a model never overlap one another: every mutation that creates one
 * refuses an overlap (KE-010032206), and the overlap query of ql_job_foreach_live_overlapping
 * rests on it. job_live sorts a model's entries by range start, so one walk with the largest
 * end so far finds any overlap.
 */
int ql_fsck_live_disjoint(ql_fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_JOB_LIVE, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    uint8_t model[16] = {0}, widest[16] = {0};
    int64_t max_end = INT64_MIN;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        if (k.mv_size != QL_LIVE_KEY_LEN || v.mv_size != QL_LIVE_VAL_LEN)
            continue; /* reported by the index checks */
        const uint8_t *kp = k.mv_data, *vp = v.mv_data;
        if (memcmp(kp, model, 16) != 0) {
            memcpy(model, kp, 16);
            max_end = INT64_MIN;
        }
        if (!vp[1])
            continue; /* no range */
        int64_t start = ql_get_key_i64(vp + 2), end = ql_get_key_i64(vp + 10);
        if (start < max_end) {
            char a[QL_ID_STR_LEN + 1], b[QL_ID_STR_LEN + 1];
            idstr(widest, a);
            idstr(kp + 24, b);
            VIOLATION(f, "live jobs %s and %s of one model overlap (from %lld to %lld)", a, b,
                      (long long)start, (long long)(end < max_end ? end : max_end));
        }
        if (end > max_end) {
            max_end = end;
            memcpy(widest, kp + 24, 16);
        }
    }
    mdb_cursor_close(c);
    return 0;
}
