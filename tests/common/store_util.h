/* Store set-up shared by the storage tests. */
#ifndef QL_TEST_STORE_UTIL_H
#define QL_TEST_STORE_UTIL_H

#include "storage/storage.h"

/* Creates project `project` and in it the daily model `model` (partition column D, format
 * yyyy-MM-dd), in one write transaction; *id gets the model's id. Makes no Criterion call, so a
 * forked child may use it: returns 0 or the failing code, with err saying why. */
int ql_test_create_daily_model(ql_store_t *store, const char *project, const char *model,
                               ql_id_t *id, ql_err_t *err);
/* The same with partition column dt, project and model created at created_ms: the model the
 * scheduler tests build on. */
int ql_test_create_dt_model(ql_store_t *store, const char *project, const char *model,
                            int64_t created_ms, ql_id_t *id, ql_err_t *err);

/* Runs fsck on store and asserts it finds no violation (the report is in the failure). */
void ql_test_assert_fsck_clean(ql_store_t *store);

/* A hash (FNV-1a) of every key and value of every table: equal before and after a refused
 * change means the change wrote nothing. Asserts (Criterion) that the store can be read. */
uint64_t ql_test_store_hash(ql_store_t *store);

#endif
