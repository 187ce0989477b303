/* fsck passes over the metadata records: meta, projects, models and their model_names index. */
#include "fsck_int.h"

/* ---- meta and projects ---- */

int ql_fsck_meta(ql_fsck_t *f) {
    uint64_t major;
    int rc = ql_meta_get_u64(f->txn, "schema_major", &major);
    if (rc == QL_ENOTFOUND || rc == QL_ECORRUPT)
        VIOLATION(f, "meta: schema_major is %s", rc == QL_ENOTFOUND ? "missing" : "malformed");
    else if (rc)
        return rc;
    else if (major > QL_SCHEMA_MAJOR)
        VIOLATION(f, "meta: schema_major %llu is newer than this build (%d)",
                  (unsigned long long)major, QL_SCHEMA_MAJOR);
    return 0;
}

int ql_fsck_projects(ql_fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_PROJECTS, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        f->r->projects++;
        ql_project_t p;
        int drc = ql_project_decode_z(f->zone, v.mv_data, v.mv_size, 0, &p);
        if (drc) {
            VIOLATION(f, "project '%.*s': record does not decode: %s", (int)k.mv_size,
                      (const char *)k.mv_data, ql_strerror(drc));
            continue;
        }
        if (strlen(p.name) != k.mv_size || memcmp(p.name, k.mv_data, k.mv_size) != 0)
            VIOLATION(f, "project '%.*s': the record is named '%s'", (int)k.mv_size,
                      (const char *)k.mv_data, p.name);
        ql_project_free(&p);
        ql_fsck_proj_t *e = ql_fsck_proj_lookup(&f->projects, k.mv_data, k.mv_size);
        if (!e) {
            rc = UV_ENOMEM;
            break;
        }
        e->exists = true;
    }
    mdb_cursor_close(c);
    return rc;
}

/* ---- models and model_names ---- */

static size_t model_name_key(uint8_t *k, const char *project, const char *name) {
    size_t pl = strlen(project), nl = strlen(name);
    memcpy(k, project, pl);
    k[pl] = '\0';
    memcpy(k + pl + 1, name, nl);
    return pl + 1 + nl;
}

int ql_fsck_models(ql_fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_MODELS, &c);
    if (rc)
        return rc;
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    uint64_t named = 0;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        f->r->models++;
        if (k.mv_size != 16) {
            VIOLATION(f, "models: a key of %zu bytes is not a model id", k.mv_size);
            continue;
        }
        idstr(k.mv_data, id);
        ql_model_t m;
        int drc = ql_model_decode_z(f->zone, v.mv_data, v.mv_size, 0, &m);
        if (drc) {
            VIOLATION(f, "model %s: record does not decode: %s", id, ql_strerror(drc));
            continue;
        }
        if (memcmp(m.id.b, k.mv_data, 16) != 0)
            VIOLATION(f, "model %s: the record carries another id", id);
        ql_fsck_proj_t *e = ql_fsck_proj_lookup(&f->projects, m.project, strlen(m.project));
        if (e) {
            e->models++;
            if (!e->exists)
                VIOLATION(f, "model %s '%s': its project '%s' does not exist", id, m.name,
                          m.project);
        } else {
            VIOLATION(f, "model %s '%s': project name '%s' is not valid", id, m.name, m.project);
        }
        uint8_t nk[2 * QL_NAME_MAX + 2];
        MDB_val nv;
        if (!exists(f, DB_MODEL_NAMES, nk, model_name_key(nk, m.project, m.name), &nv))
            VIOLATION(f, "model %s '%s': no model_names entry for project '%s'", id, m.name,
                      m.project);
        else if (nv.mv_size != 16 || memcmp(nv.mv_data, k.mv_data, 16) != 0)
            VIOLATION(f, "model %s '%s': model_names maps '%s'/'%s' to another model", id, m.name,
                      m.project, m.name);
        else
            named++;
        ql_model_free(&m);
    }
    mdb_cursor_close(c);

    /* Every model found its own name entry; any further entry is stale. */
    if (entries(f, DB_MODEL_NAMES) == named)
        return 0;
    if ((rc = cursor(f, DB_MODEL_NAMES, &c)))
        return rc;
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        const char *kp = k.mv_data;
        const char *sep = memchr(kp, '\0', k.mv_size);
        bool ok = false;
        ql_model_t m;
        if (sep && v.mv_size == 16 && exists(f, DB_MODELS, v.mv_data, 16, NULL)) {
            ql_id_t mid;
            memcpy(mid.b, v.mv_data, 16);
            if (ql_model_get(f->txn, &mid, 0, &m) == 0) {
                uint8_t nk[2 * QL_NAME_MAX + 2];
                size_t nl = model_name_key(nk, m.project, m.name);
                ok = nl == k.mv_size && memcmp(nk, k.mv_data, nl) == 0;
                ql_model_free(&m);
            }
        }
        if (!ok) {
            size_t pl = sep ? (size_t)(sep - kp) : k.mv_size;
            size_t nl = sep ? k.mv_size - pl - 1 : 0;
            VIOLATION(f, "model_names: stale entry '%.*s'/'%.*s' (no model of that name)", (int)pl,
                      kp, (int)nl, sep ? sep + 1 : "");
        }
    }
    mdb_cursor_close(c);
    return 0;
}
