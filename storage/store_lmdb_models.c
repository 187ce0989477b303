/* Projects and models, with the models-by-project index and per-project model counts. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- projects ---- */

int lmdb_project_get(ql_txn_t *txn, const char *name, unsigned flags, ql_project_t *out) {
    MDB_val v;
    int rc = ql_db_get(txn, DB_PROJECTS, name, strlen(name), &v);
    if (rc)
        return rc;
    msgpack_zone *z = ql_txn_zone(txn);
    return z ? ql_project_decode_z(z, v.mv_data, v.mv_size, flags, out) : UV_ENOMEM;
}

/* Every project or model write bumps the generation, in the same transaction, so a reader that
 * keeps a decoded copy of the metadata (the dispatcher) knows exactly when it is stale. */
static int bump_generation(ql_txn_t *txn) {
    uint64_t gen = 0;
    int rc = ql_meta_get_u64(txn, "metadata_generation", &gen);
    if (rc && rc != QL_ENOTFOUND)
        return rc;
    return ql_meta_put_u64(txn, "metadata_generation", gen + 1);
}

int lmdb_metadata_generation(ql_txn_t *txn, uint64_t *out) {
    int rc = ql_meta_get_u64(txn, "metadata_generation", out);
    if (rc == QL_ENOTFOUND) {
        *out = 0;
        return 0;
    }
    return rc;
}

int lmdb_project_put(ql_txn_t *txn, const ql_project_t *p) {
    size_t n = strlen(p->name);
    if (n == 0 || n > QL_NAME_MAX)
        return QL_EINVAL;
    ql_buf_reset(&txn->buf);
    int rc = ql_project_encode(p, &txn->buf);
    if (rc || (rc = bump_generation(txn)))
        return rc;
    return ql_db_put(txn, DB_PROJECTS, p->name, n, txn->buf.data, txn->buf.len);
}

int lmdb_project_foreach(ql_txn_t *txn, ql_project_cb cb, void *arg) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_PROJECTS, &c);
    if (rc)
        return rc;
    msgpack_zone *z = ql_txn_zone(txn);
    MDB_val k, v;
    int op = MDB_FIRST;
    rc = 0;
    while (z && mdb_cursor_get(c, &k, &v, op) == 0) {
        op = MDB_NEXT;
        ql_project_t p;
        if ((rc = ql_project_decode_z(z, v.mv_data, v.mv_size, 0, &p)))
            break;
        rc = cb(&p, arg);
        ql_project_free(&p);
        if (rc)
            break;
    }
    mdb_cursor_close(c);
    if (!z)
        return UV_ENOMEM;
    return rc > 0 ? 0 : rc;
}

int lmdb_project_count(ql_txn_t *txn, uint64_t *out) {
    MDB_stat st;
    int rc = mdb_stat(ql_mdb_txn(txn), ql_lmdb(txn->store)->dbi[DB_PROJECTS], &st);
    if (rc)
        return ql_store_mdb_err(rc);
    *out = st.ms_entries;
    return 0;
}

/* ---- models ---- */

static size_t name_key(uint8_t *buf, const char *project, const char *name) {
    size_t pl = strlen(project), nl = strlen(name);
    memcpy(buf, project, pl);
    buf[pl] = '\0';
    memcpy(buf + pl + 1, name, nl);
    return pl + 1 + nl;
}

static size_t count_key(uint8_t *buf, const char *project) {
    size_t pl = strlen(project);
    buf[0] = 'M';
    memcpy(buf + 1, project, pl);
    return pl + 1;
}

int lmdb_model_get(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_model_t *out) {
    MDB_val v;
    int rc = ql_db_get(txn, DB_MODELS, id->b, 16, &v);
    if (rc)
        return rc;
    msgpack_zone *z = ql_txn_zone(txn);
    return z ? ql_model_decode_z(z, v.mv_data, v.mv_size, flags, out) : UV_ENOMEM;
}

int lmdb_model_exists(ql_txn_t *txn, const ql_id_t *id) {
    MDB_val v;
    return ql_db_get(txn, DB_MODELS, id->b, 16, &v);
}

int lmdb_model_find(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                    ql_model_t *out) {
    if (strlen(project) > QL_NAME_MAX || strlen(name) > QL_NAME_MAX)
        return QL_ENOTFOUND;
    uint8_t key[2 * QL_NAME_MAX + 2];
    MDB_val v;
    int rc = ql_db_get(txn, DB_MODEL_NAMES, key, name_key(key, project, name), &v);
    if (rc)
        return rc;
    if (v.mv_size != 16)
        return QL_ECORRUPT;
    ql_id_t id;
    memcpy(id.b, v.mv_data, 16);
    return ql_model_get(txn, &id, flags, out);
}

int lmdb_model_put(ql_txn_t *txn, const ql_model_t *m) {
    if (!m->name[0] || !m->project[0] || ql_id_is_zero(&m->id))
        return QL_EINVAL;
    MDB_val v;
    int rc = ql_db_get(txn, DB_PROJECTS, m->project, strlen(m->project), &v);
    if (rc)
        return rc;

    uint8_t key[2 * QL_NAME_MAX + 2];
    size_t klen = name_key(key, m->project, m->name);
    rc = ql_db_get(txn, DB_MODEL_NAMES, key, klen, &v);
    if (rc == 0 && (v.mv_size != 16 || memcmp(v.mv_data, m->id.b, 16) != 0))
        return QL_EEXIST;
    if (rc && rc != QL_ENOTFOUND)
        return rc;

    ql_model_t old;
    rc = ql_model_get(txn, &m->id, 0, &old);
    bool existed = rc == 0;
    if (rc && rc != QL_ENOTFOUND)
        return rc;
    if (existed) {
        bool moved = strcmp(old.project, m->project) != 0 || strcmp(old.name, m->name) != 0;
        if (moved) {
            uint8_t okey[2 * QL_NAME_MAX + 2];
            rc = ql_db_del(txn, DB_MODEL_NAMES, okey, name_key(okey, old.project, old.name));
            if (!rc && strcmp(old.project, m->project) != 0) {
                uint8_t ck[QL_NAME_MAX + 1];
                rc = ql_count_add(txn, ck, count_key(ck, old.project), -1);
                existed = false;
            }
        }
        ql_model_free(&old);
        if (rc)
            return rc;
    }
    if (!existed) {
        uint8_t ck[QL_NAME_MAX + 1];
        if ((rc = ql_count_add(txn, ck, count_key(ck, m->project), 1)))
            return rc;
    }
    if ((rc = ql_db_put(txn, DB_MODEL_NAMES, key, klen, m->id.b, 16)) ||
        (rc = bump_generation(txn)))
        return rc;
    ql_buf_reset(&txn->buf);
    if ((rc = ql_model_encode(m, &txn->buf)))
        return rc;
    return ql_db_put(txn, DB_MODELS, m->id.b, 16, txn->buf.data, txn->buf.len);
}

int lmdb_model_foreach(ql_txn_t *txn, const char *project, ql_model_cb cb, void *arg) {
    size_t pl = strlen(project);
    if (pl > QL_NAME_MAX)
        return 0;
    uint8_t prefix[QL_NAME_MAX + 1];
    memcpy(prefix, project, pl);
    prefix[pl] = '\0';
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_MODEL_NAMES, &c);
    if (rc)
        return rc;
    MDB_val k = ql_val(prefix, pl + 1), v;
    int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (mrc == 0 && k.mv_size > pl && memcmp(k.mv_data, prefix, pl + 1) == 0) {
        if (v.mv_size != 16) {
            rc = QL_ECORRUPT;
            break;
        }
        ql_id_t id;
        memcpy(id.b, v.mv_data, 16);
        ql_model_t m;
        if ((rc = ql_model_get(txn, &id, 0, &m)))
            break;
        rc = cb(&m, arg);
        ql_model_free(&m);
        if (rc)
            break;
        mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

int lmdb_model_count(ql_txn_t *txn, const char *project, uint64_t *out) {
    if (strlen(project) > QL_NAME_MAX) {
        *out = 0;
        return 0;
    }
    uint8_t ck[QL_NAME_MAX + 1];
    return ql_count_get(txn, ck, count_key(ck, project), out);
}

/* ---- deletion ---- */

/* Whether db has a key starting with prefix (plen bytes). */
static int has_prefix(ql_txn_t *txn, int db, const void *prefix, size_t plen, bool *out) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, db, &c);
    if (rc)
        return rc;
    MDB_val k = ql_val(prefix, plen), v;
    int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    *out = mrc == 0 && k.mv_size >= plen && memcmp(k.mv_data, prefix, plen) == 0;
    mdb_cursor_close(c);
    return mrc == 0 || mrc == MDB_NOTFOUND ? 0 : ql_store_mdb_err(mrc);
}

int lmdb_model_delete(ql_txn_t *txn, const ql_id_t *id) {
    if (!txn->write)
        return QL_EINVAL;
    ql_model_t m;
    int rc = ql_model_get(txn, id, 0, &m);
    if (rc)
        return rc;
    bool segs = false, jobs = false;
    if (!(rc = has_prefix(txn, DB_SEGMENTS, id->b, 16, &segs)) &&
        !(rc = has_prefix(txn, DB_JOB_MODELS, id->b, 16, &jobs)) && (segs || jobs))
        rc = QL_EINVAL; /* ql_store.h: its segments and jobs go first */
    uint8_t key[2 * QL_NAME_MAX + 2], ck[QL_NAME_MAX + 1];
    if (!rc)
        rc = ql_db_del(txn, DB_MODEL_NAMES, key, name_key(key, m.project, m.name));
    if (!rc)
        rc = ql_count_add(txn, ck, count_key(ck, m.project), -1);
    ql_model_free(&m);
    if (!rc)
        rc = bump_generation(txn);
    return rc ? rc : ql_db_del(txn, DB_MODELS, id->b, 16);
}

int lmdb_project_delete(ql_txn_t *txn, const char *name) {
    size_t n = strlen(name);
    if (!txn->write || n == 0 || n > QL_NAME_MAX)
        return n > QL_NAME_MAX ? QL_ENOTFOUND : QL_EINVAL;
    MDB_val v;
    int rc = ql_db_get(txn, DB_PROJECTS, name, n, &v);
    if (rc)
        return rc;
    uint8_t prefix[QL_NAME_MAX + 1];
    memcpy(prefix, name, n);
    prefix[n] = '\0';
    bool models = false, jobs = false;
    if ((rc = has_prefix(txn, DB_MODEL_NAMES, prefix, n + 1, &models)) ||
        (rc = has_prefix(txn, DB_JOB_RECENT, prefix, n + 1, &jobs)))
        return rc;
    if (models || jobs)
        return QL_EINVAL; /* ql_store.h: its models and jobs go first */
    if ((rc = bump_generation(txn)))
        return rc;
    return ql_db_del(txn, DB_PROJECTS, name, n);
}
