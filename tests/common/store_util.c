#include "tests/common/store_util.h"

#include <stdio.h>
#include <string.h>

int ql_test_create_daily_model(ql_store_t *store, const char *project, const char *model,
                               ql_id_t *id, ql_err_t *err) {
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", project);
    ql_model_t m = {0};
    snprintf(m.project, sizeof m.project, "%s", project);
    snprintf(m.name, sizeof m.name, "%s", model);
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "D");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    ql_txn_t *t;
    int rc = ql_txn_begin(store, true, &t);
    if (rc)
        return ql_err_set(err, rc, "cannot begin: %s", ql_strerror(rc));
    if ((rc = ql_meta_create_project(t, &p, 1, err)) ||
        (rc = ql_meta_create_model(t, &m, 1, err))) {
        ql_txn_abort(t);
        return rc;
    }
    if ((rc = ql_txn_commit(t)))
        return ql_err_set(err, rc, "cannot commit: %s", ql_strerror(rc));
    *id = m.id;
    return 0;
}
