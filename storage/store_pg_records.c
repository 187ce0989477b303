/*
 * The records of the PostgreSQL backend: meta values, projects, models and jobs (segments are in
 * store_pg_segments.c, steps and outputs in store_pg_steps.c). Records are the same msgpack as on
 * LMDB (bytea), next to the columns that the indexes and constraints need (docs/postgresql.md,
 * Schema). The locking rules of a write transaction are in store_pg.c's DESIGN comment; each
 * function below says which it applies.
 */
#include "storage/ql_meta.h"
#include "store_pg_int.h"

#include <stdlib.h>
#include <string.h>

#define EPOCH_KEY "job_engine_epoch"

int pg_count_of(pg_txn_t *t, pg_stmt_t st, const pg_params_t *p, uint64_t *out) {
    PGresult *r;
    int rc = pg_one_row(t, st, p, &r);
    if (rc)
        return rc;
    *out = (uint64_t)pg_get_i64(r, 0, 0);
    PQclear(r);
    return 0;
}

msgpack_zone *pg_zone(pg_txn_t *t) {
    return ql_txn_zone(&t->base);
}

/* ---- meta ---- */

int pg_meta_get_u64(ql_txn_t *bt, const char *key, uint64_t *out) {
    pg_txn_t *t = pgt(bt);
    if (!strcmp(key, EPOCH_KEY))
        return pg_fence_epoch(t, out);
    pg_params_t p = {0};
    pg_p_text(&p, key);
    PGresult *r;
    int rc = pg_one_row(t, bt->write ? S_META_GET_UPDATE : S_META_GET, &p, &r);
    if (rc)
        return rc;
    if (PQgetlength(r, 0, 0) != 8)
        rc = QL_ECORRUPT;
    else
        *out = (uint64_t)pg_get_i64(r, 0, 0);
    PQclear(r);
    return rc;
}

static int meta_put(pg_txn_t *t, const char *key, const void *v, size_t len) {
    if (!t->base.write || !key[0])
        return QL_EINVAL;
    if (!strcmp(key, EPOCH_KEY))
        pg_fence_forget(t);
    pg_params_t p = {0};
    pg_p_text(&p, key);
    pg_p_bytes(&p, v, len);
    return pg_exec(t, S_META_PUT, &p, NULL);
}

int pg_meta_delete(ql_txn_t *bt, const char *key) {
    pg_params_t p = {0};
    pg_p_text(&p, key);
    return pg_exec(pgt(bt), S_META_DELETE, &p, NULL);
}

int pg_meta_put_u64(ql_txn_t *bt, const char *key, uint64_t value) {
    uint8_t b[8];
    for (int i = 7; i >= 0; i--) {
        b[i] = (uint8_t)value;
        value >>= 8;
    }
    return meta_put(pgt(bt), key, b, 8);
}

/* One statement raises the epoch to token unless it is larger, and locks the row either way
 * (store_pg.c, S_FENCE_CLAIM): two servers claiming at once wait for each other instead of
 * both share-locking the row and deadlocking on the upgrade. The epoch kept for later checks
 * of this transaction is the value the row now holds. */
int pg_fence_claim(ql_txn_t *bt, uint64_t token, uint64_t *cur) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write)
        return QL_EINVAL;
    pg_params_t p = {0};
    pg_p_i64(&p, (int64_t)token);
    PGresult *r;
    pg_fence_forget(t);
    int rc = pg_exec(t, S_FENCE_CLAIM, &p, &r);
    if (rc)
        return rc;
    bool claimed = PQntuples(r) == 1;
    PQclear(r);
    if (claimed) {
        t->epoch_cached = true;
        t->epoch_rc = 0;
        t->epoch = token;
        *cur = token;
        return 0;
    }
    if ((rc = pg_fence_epoch(t, cur)))
        return rc;
    return QL_EFENCED;
}

int pg_meta_get_str(ql_txn_t *bt, const char *key, char *buf, size_t cap) {
    pg_params_t p = {0};
    pg_p_text(&p, key);
    PGresult *r;
    int rc = pg_one_row(pgt(bt), bt->write ? S_META_GET_UPDATE : S_META_GET, &p, &r);
    if (rc)
        return rc;
    size_t n = (size_t)PQgetlength(r, 0, 0);
    if (n >= cap) {
        rc = QL_ETOOBIG;
    } else {
        memcpy(buf, PQgetvalue(r, 0, 0), n);
        buf[n] = '\0';
    }
    PQclear(r);
    return rc;
}

int pg_meta_put_str(ql_txn_t *bt, const char *key, const char *value) {
    return meta_put(pgt(bt), key, value, strlen(value));
}

int pg_metadata_generation(ql_txn_t *bt, uint64_t *out) {
    pg_params_t p = {0};
    pg_p_text(&p, "metadata_generation");
    PGresult *r;
    /* Read without a lock even in a write transaction: the bump is one atomic statement. */
    int rc = pg_one_row(pgt(bt), S_META_GET, &p, &r);
    if (rc == QL_ENOTFOUND) {
        *out = 0;
        return 0;
    }
    if (rc)
        return rc;
    if (PQgetlength(r, 0, 0) != 8)
        rc = QL_ECORRUPT;
    else
        *out = (uint64_t)pg_get_i64(r, 0, 0);
    PQclear(r);
    return rc;
}

/* ---- projects ---- */

int pg_project_get(ql_txn_t *bt, const char *name, unsigned flags, ql_project_t *out) {
    pg_txn_t *t = pgt(bt);
    if (!name[0] || strlen(name) > QL_NAME_MAX)
        return QL_ENOTFOUND;
    pg_params_t p = {0};
    pg_p_text(&p, name);
    PGresult *r;
    int rc = pg_one_row(t, bt->write ? S_PROJ_GET_SHARE : S_PROJ_GET, &p, &r);
    if (rc)
        return rc;
    msgpack_zone *z = pg_zone(t);
    rc = z ? ql_project_decode_z(z, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), flags, out)
           : UV_ENOMEM;
    PQclear(r);
    return rc;
}

int pg_project_put(ql_txn_t *bt, const ql_project_t *pr) {
    pg_txn_t *t = pgt(bt);
    size_t n = strlen(pr->name);
    if (!bt->write || n == 0 || n > QL_NAME_MAX)
        return QL_EINVAL;
    ql_buf_reset(&bt->buf);
    int rc = ql_project_encode(pr, &bt->buf);
    if (rc || (rc = pg_exec(t, S_META_BUMP, NULL, NULL)))
        return rc;
    pg_params_t p = {0};
    pg_p_text(&p, pr->name);
    pg_p_bytes(&p, bt->buf.data, bt->buf.len);
    return pg_exec(t, S_PROJ_PUT, &p, NULL);
}

static int project_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    msgpack_zone *z = pg_zone(w->t);
    if (!z)
        return UV_ENOMEM;
    ql_project_t p;
    int rc = ql_project_decode_z(z, PQgetvalue(r, row, 0), (size_t)PQgetlength(r, row, 0), 0, &p);
    if (rc)
        return rc;
    rc = ((ql_project_cb)w->cb)(&p, w->arg);
    ql_project_free(&p);
    return rc;
}

int pg_project_foreach(ql_txn_t *bt, ql_project_cb cb, void *arg) {
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    return pg_walk(pgt(bt), W_PROJECTS, NULL, project_row, &w);
}

int pg_project_count(ql_txn_t *bt, uint64_t *out) {
    return pg_count_of(pgt(bt), S_PROJ_COUNT, NULL, out);
}

/* ---- models ---- */

static int model_decode(pg_txn_t *t, PGresult *r, int row, unsigned flags, ql_model_t *out) {
    msgpack_zone *z = pg_zone(t);
    return z ? ql_model_decode_z(z, PQgetvalue(r, row, 0), (size_t)PQgetlength(r, row, 0), flags,
                                 out)
             : UV_ENOMEM;
}

int pg_model_get(ql_txn_t *bt, const ql_id_t *id, unsigned flags, ql_model_t *out) {
    pg_txn_t *t = pgt(bt);
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    PGresult *r;
    int rc = pg_one_row(t, bt->write ? S_MODEL_GET_SHARE : S_MODEL_GET, &p, &r);
    if (rc)
        return rc;
    rc = model_decode(t, r, 0, flags, out);
    PQclear(r);
    return rc;
}

int pg_model_get_for_probe(ql_txn_t *bt, const ql_id_t *id, unsigned flags, ql_model_t *out) {
    pg_txn_t *t = pgt(bt);
    int64_t key;
    bool carry;
    int rc = pg_lock_model_carried(t, id, &key, &carry);
    if (rc || !carry)
        return rc ? rc : pg_model_get(bt, id, flags, out);
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    pg_p_i64(&p, key);
    PGresult *r;
    if ((rc = pg_one_row(t, S_MODEL_GET_SHARE_LOCK, &p, &r)))
        return rc; /* none: the lock may not have been taken, a later put or probe takes it */
    pg_lock_carried(t, key);
    rc = model_decode(t, r, 0, flags, out);
    PQclear(r);
    return rc;
}

int pg_model_exists(ql_txn_t *bt, const ql_id_t *id) {
    static const ql_id_t none; /* a NULL segment: the model alone */
    return pg_model_segment_exists(bt, id, &none);
}

/* One statement for both lookups (the scheduler's check of every job it picks). */
int pg_model_segment_exists(ql_txn_t *bt, const ql_id_t *model, const ql_id_t *segment) {
    pg_params_t p = {0};
    pg_p_uuid(&p, model);
    pg_p_uuid(&p, segment); /* a zero id is NULL: no segment to look for */
    PGresult *r;
    int rc = pg_one_row(pgt(bt), S_MODEL_SEG_EXISTS, &p, &r);
    PQclear(r);
    return rc;
}

int pg_model_find(ql_txn_t *bt, const char *project, const char *name, unsigned flags,
                  ql_model_t *out) {
    if (strlen(project) > QL_NAME_MAX || strlen(name) > QL_NAME_MAX)
        return QL_ENOTFOUND;
    pg_params_t p = {0};
    pg_p_text(&p, project);
    pg_p_text(&p, name);
    PGresult *r;
    /* A write transaction locks it as ql_model_get does. */
    int rc = pg_one_row(pgt(bt), bt->write ? S_MODEL_FIND_SHARE : S_MODEL_FIND, &p, &r);
    if (rc)
        return rc;
    rc = model_decode(pgt(bt), r, 0, flags, out);
    PQclear(r);
    return rc;
}

/* A read transaction's lookup of a build's target (unlocked: a write transaction reads each with
 * its lock): the project's row, with the model's record or NULL. */
int pg_model_find_with_project(ql_txn_t *bt, const char *project, const char *name, unsigned flags,
                               ql_project_t *p, ql_model_t *m, bool *found) {
    pg_txn_t *t = pgt(bt);
    *found = false;
    if (!project[0] || strlen(project) > QL_NAME_MAX)
        return QL_ENOTFOUND;
    pg_params_t q = {0};
    pg_p_text(&q, project);
    pg_p_text(&q, strlen(name) > QL_NAME_MAX ? "" : name); /* no model has that name */
    PGresult *r;
    int rc = pg_one_row(t, S_MODEL_FIND_PROJ, &q, &r);
    if (rc)
        return rc;
    msgpack_zone *z = pg_zone(t);
    rc = z ? ql_project_decode_z(z, PQgetvalue(r, 0, 0), (size_t)PQgetlength(r, 0, 0), 0, p)
           : UV_ENOMEM;
    if (!rc && !PQgetisnull(r, 0, 1)) {
        rc = ql_model_decode_z(z, PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1), flags, m);
        if (rc == 0)
            *found = true;
        else
            ql_project_free(p);
    }
    PQclear(r);
    return rc;
}

/* Inserts or replaces by id. The project is read FOR SHARE (it must exist, and an update of it
 * waits for this transaction); a name taken by another model of the project is QL_EEXIST, from
 * the unique constraint with ON CONFLICT DO NOTHING so the transaction stays usable. */
int pg_model_put(ql_txn_t *bt, const ql_model_t *m) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write || !m->name[0] || !m->project[0] || ql_id_is_zero(&m->id) ||
        strlen(m->name) > QL_NAME_MAX || strlen(m->project) > QL_NAME_MAX)
        return QL_EINVAL;
    pg_params_t p = {0};
    pg_p_text(&p, m->project);
    PGresult *r;
    int rc = pg_one_row(t, S_PROJ_GET_SHARE, &p, &r);
    if (rc)
        return rc;
    PQclear(r);
    p = (pg_params_t){0};
    pg_p_text(&p, m->project);
    pg_p_text(&p, m->name);
    rc = pg_one_row(t, S_MODEL_ID_BY_NAME, &p, &r);
    if (rc == 0) {
        ql_id_t other;
        pg_get_uuid(r, 0, 0, &other);
        PQclear(r);
        if (!ql_id_eq(&other, &m->id))
            return QL_EEXIST;
    } else if (rc != QL_ENOTFOUND) {
        return rc;
    }
    p = (pg_params_t){0};
    pg_p_uuid(&p, &m->id);
    rc = pg_one_row(t, S_MODEL_OLD, &p, &r);
    bool existed = rc == 0;
    PQclear(r);
    if (rc && rc != QL_ENOTFOUND)
        return rc;
    ql_buf_reset(&bt->buf);
    if ((rc = ql_model_encode(m, &bt->buf)) || (rc = pg_exec(t, S_META_BUMP, NULL, NULL)))
        return rc;
    p = (pg_params_t){0};
    pg_p_uuid(&p, &m->id);
    pg_p_text(&p, m->project);
    pg_p_text(&p, m->name);
    pg_p_bytes(&p, bt->buf.data, bt->buf.len);
    if (existed)
        return pg_exec(t, S_MODEL_UPDATE, &p, NULL);
    if ((rc = pg_exec(t, S_MODEL_INSERT, &p, &r)))
        return rc;
    rc = PQntuples(r) == 1 ? 0 : QL_EEXIST;
    PQclear(r);
    return rc;
}

static int model_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_model_t m;
    int rc = model_decode(w->t, r, row, 0, &m);
    if (rc)
        return rc;
    rc = ((ql_model_cb)w->cb)(&m, w->arg);
    ql_model_free(&m);
    return rc;
}

int pg_model_foreach(ql_txn_t *bt, const char *project, ql_model_cb cb, void *arg) {
    if (strlen(project) > QL_NAME_MAX)
        return 0;
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_text(&p, project);
    return pg_walk(pgt(bt), W_MODELS, &p, model_row, &w);
}

int pg_model_count(ql_txn_t *bt, const char *project, uint64_t *out) {
    pg_params_t p = {0};
    pg_p_text(&p, project);
    return pg_count_of(pgt(bt), S_MODEL_COUNT, &p, out);
}

/* ---- walks of one model ---- */

/* A walk over one model's rows under the model lock (so that in a write transaction the answer
 * holds until the commit: no other writer of the model can add an overlapping row meanwhile),
 * with the range [start, end) as parameters when ranged. */
int pg_model_walk(ql_txn_t *bt, const ql_id_t *model, bool ranged, int64_t start, int64_t end,
                  pg_walk_t walk, pg_row_fn row, void *cb, void *arg) {
    pg_txn_t *t = pgt(bt);
    int rc = pg_lock_model(t, model);
    if (rc)
        return rc;
    pg_walk_ctx_t w = {.t = t, .cb = cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_uuid(&p, model);
    if (ranged) {
        pg_p_i64(&p, start);
        pg_p_i64(&p, end);
    }
    return pg_walk(t, walk, &p, row, &w);
}

/* ---- jobs ---- */

static int job_decode(pg_txn_t *t, PGresult *r, int row, unsigned flags, ql_job_t *out) {
    msgpack_zone *z = pg_zone(t);
    return z ? ql_job_decode_z(z, PQgetvalue(r, row, 0), (size_t)PQgetlength(r, row, 0), flags, out)
             : UV_ENOMEM;
}

/* FOR UPDATE in a write transaction: two servers cannot both move one job. The job's steps are
 * read in the same round trip, after the row lock is held, for the step reads that follow
 * (store_pg_steps.c). */
int pg_job_get(ql_txn_t *bt, const ql_id_t *id, unsigned flags, ql_job_t *out) {
    pg_txn_t *t = pgt(bt);
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    if (!bt->write) {
        PGresult *r;
        int rc = pg_one_row(t, S_JOB_GET, &p, &r);
        if (!rc)
            rc = job_decode(t, r, 0, flags, out);
        PQclear(r);
        return rc;
    }
    PGresult *r[2];
    int rc = pg_exec_pair(t, S_JOB_GET_UPDATE, &p, S_STEP_ALL, &p, r);
    if (!rc && PQntuples(r[0]) == 0)
        rc = QL_ENOTFOUND;
    if (!rc)
        rc = job_decode(t, r[0], 0, flags, out);
    if (!rc) { /* locked: a put of it needs no read of the old row, nor a step read its row */
        ql_id_t model;
        pg_get_uuid(r[0], 0, 2, &model);
        pg_row_note(t, id, PQgetvalue(r[0], 0, 1), &model, pg_get_i64(r[0], 0, 3),
                    pg_get_i16(r[0], 0, 4));
        pg_row_set_steps(t, id, r[1]);
        r[1] = NULL;
    }
    PQclear(r[0]);
    PQclear(r[1]);
    return rc;
}

/* Writes job j (parameters p) under the model lock (carry: the update takes it, key *carry): an
 * update of a row this transaction holds (pg_row_find), deferred; otherwise an insert, and only
 * when its id is taken, the old row read FOR UPDATE and updated. *existed, *was: the old row and
 * its state. */
static int job_write(pg_txn_t *t, const ql_job_t *j, const pg_params_t *p, const int64_t *carry,
                     bool *existed, ql_state_t *was) {
    const pg_jobrow_t *row = pg_row_find(t, &j->id);
    PGresult *r;
    int rc;
    if (!row) {
        if ((rc = pg_exec(t, S_JOB_INSERT, p, &r)))
            return rc;
        bool inserted = PQntuples(r) == 1;
        PQclear(r);
        *existed = false;
        *was = QL_READY;
        if (inserted)
            return 0;
        pg_params_t id = {0};
        pg_p_uuid(&id, &j->id);
        if ((rc = pg_one_row(t, S_JOB_OLD, &id, &r)))
            return rc == QL_ENOTFOUND ? QL_EJOBCONFLICT : rc; /* the live-jobs constraint */
        ql_id_t model;
        pg_get_uuid(r, 0, 1, &model);
        pg_row_note(t, &j->id, PQgetvalue(r, 0, 0), &model, pg_get_i64(r, 0, 2),
                    pg_get_i16(r, 0, 3));
        PQclear(r);
        if (!(row = pg_row_find(t, &j->id)))
            return UV_ENOMEM;
    }
    /* The creation-time index and the project never change for a job. */
    if (strcmp(row->project, j->project) || !ql_id_eq(&row->model, &j->model) ||
        row->create_time != j->create_time)
        return QL_EINVAL;
    *existed = true;
    *was = (ql_state_t)row->state;
    /* Its answer is only its success: it goes out with the level's next statement (the server
     * runs it first, model lock and all), and a row that is gone, though this transaction holds
     * it, fails the level then. */
    if ((rc = pg_defer_row(t, carry ? S_JOB_UPDATE_LOCK : S_JOB_UPDATE, p, QL_ECORRUPT)))
        return rc;
    if (carry)
        pg_lock_carried(t, *carry);
    return 0;
}

/* Under the model lock. A new job that would overlap a live job of its model is refused by the
 * exclusion constraint (ON CONFLICT DO NOTHING: QL_EJOBCONFLICT, the transaction usable), the
 * backstop of the rule in meta.c. A put that makes the job READY, PAUSED or DISCARDED notes it
 * for the NOTIFY of the commit (store_change_wakes), which costs no round trip of its own. */
int pg_job_put(ql_txn_t *bt, const ql_job_t *j) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write || ql_id_is_zero(&j->id) || !j->project[0] || strlen(j->project) > QL_NAME_MAX ||
        (unsigned)j->state >= QL_JOB_STATE_COUNT || j->priority < QL_PRIORITY_MIN ||
        j->priority > QL_PRIORITY_MAX ||
        (j->has_range &&
         ql_meta_check_range("range_start", "range_end", j->range_start, j->range_end, true, NULL)))
        return QL_EINVAL;
    /* The model lock: carried by the update of a row this transaction holds, else queued. */
    int64_t key;
    bool carry = false;
    int rc = pg_row_find(t, &j->id) ? pg_lock_model_carried(t, &j->model, &key, &carry)
                                    : pg_lock_model(t, &j->model);
    if (rc)
        return rc;
    ql_buf_reset(&bt->buf);
    if ((rc = ql_job_encode(j, &bt->buf)))
        return rc;
    pg_params_t p = {0};
    pg_p_uuid(&p, &j->id);
    pg_p_text(&p, j->project);
    pg_p_uuid(&p, &j->model);
    pg_p_i16(&p, (int16_t)j->state);
    pg_p_i16(&p, (int16_t)j->priority);
    pg_p_i64(&p, j->create_time);
    pg_p_i64(&p, j->modify_time);
    pg_p_bool(&p, j->has_range);
    /* Without a range the columns are not read (the constraint and the probes look at ranged
     * jobs only); a valid empty range keeps the column expressions defined. */
    pg_p_i64(&p, j->has_range ? j->range_start : 0);
    pg_p_i64(&p, j->has_range ? j->range_end : 0);
    pg_p_i64(&p, (int64_t)j->fence);
    pg_p_bytes(&p, bt->buf.data, bt->buf.len);
    if (carry)
        pg_p_i64(&p, key);
    bool existed;
    ql_state_t was;
    if ((rc = job_write(t, j, &p, carry ? &key : NULL, &existed, &was)))
        return rc;
    pg_row_note(t, &j->id, j->project, &j->model, j->create_time, (int16_t)j->state);
    if (store_change_wakes(existed, was, j->state))
        pg_changes_note(t, &j->id);
    return 0;
}

static int job_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_job_t j;
    int rc = job_decode(w->t, r, row, 0, &j);
    if (rc)
        return rc;
    rc = ((ql_job_cb)w->cb)(&j, w->arg);
    ql_job_free(&j);
    return rc;
}

int pg_job_foreach_state(ql_txn_t *bt, ql_state_t state, ql_job_cb cb, void *arg) {
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_i16(&p, (int16_t)state);
    return pg_walk(pgt(bt), W_JOB_STATE, &p, job_row, &w);
}

static int state_ref_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_id_t id;
    pg_get_uuid(r, row, 0, &id);
    return ((ql_job_state_ref_cb)w->cb)(&id, pg_get_i16(r, row, 1), pg_get_i64(r, row, 2), w->arg);
}

int pg_job_foreach_state_ref(ql_txn_t *bt, ql_state_t state, ql_job_state_ref_cb cb, void *arg) {
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_i16(&p, (int16_t)state);
    return pg_walk(pgt(bt), W_JOB_STATE_REF, &p, state_ref_row, &w);
}

/* The ref walk's query has the project and model columns too: one prepared walk serves both. */
static int state_target_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_id_t id, model;
    pg_get_uuid(r, row, 0, &id);
    bool has_model = !PQgetisnull(r, row, 4);
    if (has_model)
        pg_get_uuid(r, row, 4, &model);
    return ((ql_job_state_target_cb)w->cb)(&id, pg_get_i16(r, row, 1), pg_get_i64(r, row, 2),
                                           PQgetvalue(r, row, 3), has_model ? &model : NULL,
                                           w->arg);
}

int pg_job_foreach_state_target(ql_txn_t *bt, ql_state_t state, ql_job_state_target_cb cb,
                                void *arg) {
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_i16(&p, (int16_t)state);
    return pg_walk(pgt(bt), W_JOB_STATE_REF, &p, state_target_row, &w);
}

int pg_job_foreach_model(ql_txn_t *bt, const ql_id_t *model, ql_job_cb cb, void *arg) {
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    pg_params_t p = {0};
    pg_p_uuid(&p, model);
    return pg_walk(pgt(bt), W_JOB_MODEL, &p, job_row, &w);
}

static int live_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_live_job_t lj;
    pg_get_uuid(r, row, 0, &lj.id);
    lj.state = (ql_state_t)pg_get_i16(r, row, 1);
    lj.has_range = pg_get_bool(r, row, 2);
    lj.start = pg_get_i64(r, row, 3);
    lj.end = pg_get_i64(r, row, 4);
    return ((ql_live_job_cb)w->cb)(&lj, w->arg);
}

int pg_job_foreach_live(ql_txn_t *bt, const ql_id_t *model, ql_live_job_cb cb, void *arg) {
    return pg_model_walk(bt, model, false, 0, 0, W_JOB_LIVE, live_row, (void *)cb, arg);
}

int pg_job_foreach_live_overlapping(ql_txn_t *bt, const ql_id_t *model, int64_t start, int64_t end,
                                    ql_live_job_cb cb, void *arg) {
    if (start >= end)
        return 0;
    return pg_model_walk(bt, model, true, start, end, W_JOB_LIVE_OVERLAP, live_row, (void *)cb,
                         arg);
}

static int recent_row(PGresult *r, int row, void *arg) {
    pg_walk_ctx_t *w = arg;
    ql_id_t id;
    pg_get_uuid(r, row, 0, &id);
    return ((ql_job_ref_cb)w->cb)(&id, (ql_state_t)pg_get_i16(r, row, 1), pg_get_i64(r, row, 2),
                                  w->arg);
}

int pg_job_foreach_recent(ql_txn_t *bt, const char *project, bool oldest_first, ql_job_ref_cb cb,
                          void *arg) {
    if (project && !project[0])
        project = NULL;
    if (project && strlen(project) > QL_NAME_MAX)
        return 0;
    pg_walk_ctx_t w = {.t = pgt(bt), .cb = (void *)cb, .arg = arg};
    pg_params_t p = {0};
    pg_walk_t q;
    if (project) {
        pg_p_text(&p, project);
        q = oldest_first ? W_JOB_RECENT_P_ASC : W_JOB_RECENT_P_DESC;
    } else {
        q = oldest_first ? W_JOB_RECENT_ASC : W_JOB_RECENT_DESC;
    }
    return pg_walk(pgt(bt), q, &p, recent_row, &w);
}

int pg_job_count(ql_txn_t *bt, const char *project, uint32_t state_mask, uint64_t *out) {
    *out = 0;
    if (project && !project[0])
        project = NULL;
    if (project && strlen(project) > QL_NAME_MAX)
        return 0;
    pg_params_t p = {0};
    if (project)
        pg_p_text(&p, project);
    pg_p_i32(&p, (int32_t)(state_mask & ((1u << QL_JOB_STATE_COUNT) - 1)));
    return pg_count_of(pgt(bt), project ? S_JOB_COUNT : S_JOB_COUNT_ALL, &p, out);
}
