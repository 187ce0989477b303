#include "tests/common/store_util.h"
#include "storage/store_int.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one body of the two model helpers of store_util.h: column is the partition column. */
static int create_model(ql_store_t *store, const char *project, const char *model,
                        const char *column, int64_t created_ms, ql_id_t *id, ql_err_t *err) {
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "%s", project);
    ql_model_t m = {0};
    snprintf(m.project, sizeof m.project, "%s", project);
    snprintf(m.name, sizeof m.name, "%s", model);
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "%s", column);
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    ql_txn_t *t;
    int rc = ql_txn_begin(store, true, &t);
    if (rc)
        return ql_err_set(err, rc, "cannot begin: %s", ql_strerror(rc));
    if ((rc = ql_meta_create_project(t, &p, created_ms, err)) ||
        (rc = ql_meta_create_model(t, &m, created_ms, err))) {
        ql_txn_abort(t);
        return rc;
    }
    if ((rc = ql_txn_commit(t)))
        return ql_err_set(err, rc, "cannot commit: %s", ql_strerror(rc));
    *id = m.id;
    return 0;
}

int ql_test_create_daily_model(ql_store_t *store, const char *project, const char *model,
                               ql_id_t *id, ql_err_t *err) {
    return create_model(store, project, model, "D", 1, id, err);
}

int ql_test_create_dt_model(ql_store_t *store, const char *project, const char *model,
                            int64_t created_ms, ql_id_t *id, ql_err_t *err) {
    return create_model(store, project, model, "dt", created_ms, id, err);
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

uint64_t ql_test_store_hash(ql_store_t *store) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t h = 1469598103934665603ull;
    for (int db = 0; db < DB_COUNT; db++) {
        MDB_cursor *c;
        cr_assert_eq(ql_db_cursor(t, db, &c), 0);
        MDB_val k, v;
        for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
            const MDB_val *parts[2] = {&k, &v};
            for (int p = 0; p < 2; p++) {
                const uint8_t *b = parts[p]->mv_data;
                for (size_t i = 0; i < parts[p]->mv_size; i++)
                    h = (h ^ b[i]) * 1099511628211ull;
                h = (h ^ parts[p]->mv_size ^ (uint64_t)db << 32) * 1099511628211ull;
            }
        }
        mdb_cursor_close(c);
    }
    ql_txn_abort(t);
    return h;
}
