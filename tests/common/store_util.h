/* Store set-up shared by the storage tests. */
#ifndef QL_TEST_STORE_UTIL_H
#define QL_TEST_STORE_UTIL_H

#include "storage/storage.h"

#include <stdbool.h>
#include <stdint.h>

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

/* ---- the backend under test (docs/postgresql.md, Tests) ----
 *
 * QL_TEST_STORE=lmdb (the default) or pg selects the backend the store-using tests run on; the
 * <name>@pg tests of tests/CMakeLists.txt set it. On PostgreSQL the database is QL_TEST_PG_URL,
 * else the one the pg_start fixture wrote to <build>/pg/url. Each data directory a test process
 * opens gets a schema of its own, qt_<pid>_<n> (the same one when the directory is opened
 * again, so reopening sees the data), dropped when the process exits. */

/* "lmdb" or "pg". */
const char *ql_test_store_backend(void);
/* Skips the test (cr_skip) unless the backend under test is `backend`: for cases about one
 * backend's own mechanics (LMDB's layers, key layouts, reader table, map size). */
void ql_test_require_backend(const char *backend);
/* Fills *opts for a store in dir on the backend under test (every other field zero); the
 * strings stay valid until the process exits. Skips the test when PostgreSQL is selected and
 * none is available (fails it in CI, CI=true). */
void ql_test_store_opts(const char *dir, ql_store_opts_t *opts);
/* The PostgreSQL conninfo of the tests (QL_TEST_PG_URL or the fixture's), NULL when none. */
const char *ql_test_pg_url(void);
/* An INC_BUILD job of project "p" and model in state st over [a, b), priority 3, created at 1,
 * with a new id of s; not stored. */
ql_job_t ql_test_live_job(ql_store_t *s, const ql_id_t *model, ql_state_t st, int64_t a, int64_t b);
/* Whether project name is in s's committed state (read in a transaction of its own). */
bool ql_test_project_exists(ql_store_t *s, const char *name);
/* Runs one query on a PostgreSQL session of the test's own (ql_test_pg_url); returns the first
 * row's first value as an integer, -1 without rows. Asserts that it ran. */
long long ql_test_pg_scalar(const char *sql);
/* The configuration settings ("key=value") that put the store of a server whose data
 * directory is dir (qilind, node_driver, a node of ql_test_node_config) on the backend under
 * test: none on LMDB; on PostgreSQL qilin.storage.url and qilin.storage.pg.schema, with the
 * schema ql_test_store_opts gives dir, so the test and its servers share one store and the
 * schema is dropped when the test's process exits (after its processes are killed). Writes
 * them to out and returns how many (0 or 2); the strings stay valid until the process exits.
 * Call it before a fork: it may assert or skip like ql_test_store_opts. */
int ql_test_store_settings(const char *dir, const char *out[2]);
/* Gives dir the store of `as` (before either is opened or started with dir): on PostgreSQL
 * the same schema, for several servers with data directories of their own on one shared store
 * (nothing on LMDB, whose store is its directory). */
void ql_test_store_share(const char *dir, const char *as);
/* PostgreSQL only: runs sql on a session of its own on the tests' database and asserts that it
 * worked; out (cap bytes, may be NULL) gets the first value of the first row ("" for none). */
void ql_test_pg_sql(const char *sql, char *out, size_t cap);
/* PostgreSQL only: polls until a session of dir's store waits for a lock (pg_stat_activity,
 * wait_event_type 'Lock'), for up to ms; whether one did. */
bool ql_test_pg_await_lock_wait(const char *dir, int64_t ms);
/* PostgreSQL only: the backend pid of the session that holds the job engine lock of dir's store
 * (ql_store_lock_open, storage/ql_store.h), 0 when nobody holds it. */
int ql_test_pg_lock_backend(const char *dir);
/* ql_store_open with ql_test_store_opts; asserts that it worked. */
void ql_test_store_open(const char *dir, ql_store_t **store);
/* For the PostgreSQL-only suites: skips the test unless the backend under test is PostgreSQL,
 * makes dir (cap bytes, "" until then) a temporary directory named after name on first use, and
 * opens a store on it (the same schema each time, so a reopen sees the data). */
ql_store_t *ql_test_pg_store_open(char *dir, size_t cap, const char *name);

#endif
