/* Deletions on PostgreSQL: a job with its steps and outputs (docs/postgresql.md). */
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
    if ((rc = pg_exec(t, S_JOB_DELETE, &p, &r)))
        return rc;
    found = strcmp(PQcmdTuples(r), "0") != 0;
    PQclear(r);
    return found ? 0 : QL_ENOTFOUND;
}
