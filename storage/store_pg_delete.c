/* Deletions on PostgreSQL: a job with its steps and outputs, an empty model or project
 * (docs/postgresql.md). */
#include "store_pg_int.h"

#include <stdlib.h>
#include <string.h>

/* Under the model lock, taken before the job's row as pg_job_put takes them (the same order in
 * every writer, so two of them never wait for each other). A job's model never changes, so the
 * unlocked read of it is the one the delete sees. */
int pg_job_delete(ql_txn_t *bt, const ql_id_t *id) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write)
        return QL_EINVAL;
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    PGresult *r;
    int rc = pg_exec(t, S_JOB_MODEL, &p, &r);
    if (rc)
        return rc;
    bool found = PQntuples(r) == 1;
    ql_id_t model;
    if (found)
        pg_get_uuid(r, 0, 0, &model);
    PQclear(r);
    if (!found)
        return QL_ENOTFOUND;
    if ((rc = pg_lock_model(t, &model)))
        return rc;
    pg_row_forget(t, id);
    if ((rc = pg_exec(t, S_JOB_DELETE, &p, &r)))
        return rc;
    found = strcmp(PQcmdTuples(r), "0") != 0;
    PQclear(r);
    return found ? 0 : QL_ENOTFOUND;
}

/* Deletes the one row of an empty record with stmt: QL_ENOTFOUND when exists_stmt finds no
 * row, QL_EINVAL when something is left (the statement deleted nothing). */
static int delete_empty(pg_txn_t *t, pg_stmt_t exists_stmt, pg_stmt_t stmt, const pg_params_t *p) {
    PGresult *r;
    int rc = pg_exec(t, exists_stmt, p, &r);
    if (rc)
        return rc;
    bool found = PQntuples(r) == 1;
    PQclear(r);
    if (!found)
        return QL_ENOTFOUND;
    if ((rc = pg_exec(t, S_META_BUMP, NULL, NULL)) || (rc = pg_exec(t, stmt, p, &r)))
        return rc;
    found = PQntuples(r) == 1;
    PQclear(r);
    return found ? 0 : QL_EINVAL;
}

int pg_model_delete(ql_txn_t *bt, const ql_id_t *id) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write)
        return QL_EINVAL;
    int rc = pg_lock_model(t, id);
    if (rc)
        return rc;
    pg_params_t p = {0};
    pg_p_uuid(&p, id);
    return delete_empty(t, S_MODEL_GET, S_MODEL_DELETE, &p);
}

int pg_project_delete(ql_txn_t *bt, const char *name) {
    pg_txn_t *t = pgt(bt);
    if (!bt->write || !name[0])
        return QL_EINVAL;
    if (strlen(name) > QL_NAME_MAX)
        return QL_ENOTFOUND;
    pg_params_t p = {0};
    pg_p_text(&p, name);
    return delete_empty(t, S_PROJ_GET_SHARE, S_PROJ_DELETE, &p);
}
