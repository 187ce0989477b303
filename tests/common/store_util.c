#include "tests/common/store_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
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

void ql_test_assert_fsck_clean(ql_store_t *store) {
    ql_fsck_report_t r;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(ql_store_fsck(store, out, &r), 0);
    fclose(out);
    bool clean = r.violations == 0;
    if (!clean)
        cr_assert_fail("fsck found violations:\n%s", text);
    free(text);
}
