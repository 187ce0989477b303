#include "tests/common/store_util.h"
#include "storage/store_int.h"
#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static uint64_t pg_store_hash(ql_store_t *store);

uint64_t ql_test_store_hash(ql_store_t *store) {
    if (!strcmp(ql_test_store_backend(), "pg"))
        return pg_store_hash(store);
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

/* ---- the backend under test ---- */

/* The schemas this process made, dropped at exit (fixed arrays: no allocation for LeakSanitizer
 * to see, as in tmp_util.c). */
#define MAX_SCHEMAS 64
static struct {
    char dir[512];
    char schema[48];
    char url_kv[1100];  /* qilin.storage.url=... (ql_test_store_settings) */
    char schema_kv[80]; /* qilin.storage.pg.schema=... */
} schemas[MAX_SCHEMAS];
static int n_schemas;
static pid_t schemas_pid;
static char pg_url[1024];

const char *ql_test_store_backend(void) {
    const char *b = getenv("QL_TEST_STORE");
    return b && !strcmp(b, "pg") ? "pg" : "lmdb";
}

void ql_test_require_backend(const char *backend) {
    if (strcmp(ql_test_store_backend(), backend) != 0)
        cr_skip_test("this case is about the %s backend only (QL_TEST_STORE=%s)", backend,
                     ql_test_store_backend());
}

static const char *find_pg_url(void) {
    const char *env = getenv("QL_TEST_PG_URL");
    if (env && env[0])
        return env;
    if (pg_url[0])
        return pg_url;
    char path[1024];
    snprintf(path, sizeof path, "%s/pg/url", QL_TEST_BUILD_DIR);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    if (!fgets(pg_url, sizeof pg_url, f))
        pg_url[0] = '\0';
    fclose(f);
    size_t n = strlen(pg_url);
    while (n && (pg_url[n - 1] == '\n' || pg_url[n - 1] == ' '))
        pg_url[--n] = '\0';
    return pg_url[0] ? pg_url : NULL;
}

const char *ql_test_pg_url(void) {
    return find_pg_url();
}

ql_job_t ql_test_live_job(ql_store_t *s, const ql_id_t *model, ql_state_t st, int64_t a,
                          int64_t b) {
    ql_job_t j = {0};
    ql_store_new_id(s, &j.id);
    strcpy(j.project, "p");
    j.model = *model;
    strcpy(j.type, "INC_BUILD");
    j.state = st;
    j.priority = 3;
    j.create_time = j.modify_time = 1;
    j.has_range = true;
    j.range_start = a;
    j.range_end = b;
    return j;
}

bool ql_test_project_exists(ql_store_t *s, const char *name) {
    ql_txn_t *t;
    ql_project_t p;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    int rc = ql_project_get(t, name, 0, &p);
    ql_txn_abort(t);
    if (!rc)
        ql_project_free(&p);
    return rc == 0;
}

long long ql_test_pg_scalar(const char *sql) {
    PGconn *c = PQconnectdb(ql_test_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    PGresult *r = PQexec(c, sql);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s: %s", sql, PQresultErrorMessage(r));
    long long v = PQntuples(r) ? atoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(c);
    return v;
}

static void drop_schemas(void) {
    if (getpid() != schemas_pid || n_schemas == 0)
        return;
    PGconn *c = PQconnectdb(find_pg_url());
    if (PQstatus(c) == CONNECTION_OK) {
        PQclear(PQexec(c, "SET lock_timeout = 5000; SET client_min_messages = warning"));
        for (int i = 0; i < n_schemas; i++) {
            char sql[128];
            snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", schemas[i].schema);
            PQclear(PQexec(c, sql));
        }
    }
    PQfinish(c);
    n_schemas = 0;
}

void ql_test_store_opts(const char *dir, ql_store_opts_t *opts) {
    memset(opts, 0, sizeof *opts);
    opts->path = dir;
    if (strcmp(ql_test_store_backend(), "pg") != 0)
        return;
    const char *url = find_pg_url();
    if (!url) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true"))
            cr_assert_fail(
                "QL_TEST_STORE=pg but no PostgreSQL: set QL_TEST_PG_URL or run the pg_start "
                "fixture (tests/common/pg_fixture.sh)");
        cr_skip_test("QL_TEST_STORE=pg but no PostgreSQL server is available (the pg_start "
                     "fixture found no server binaries): skipped");
    }
    opts->url = url;
    if (schemas_pid != getpid()) {
        schemas_pid = getpid(); /* a forked test process starts its own list */
        n_schemas = 0;
        /* After the test's own processes are gone: a server it started and did not stop would
         * hold locks on the schema's tables and make the DROP wait. */
        ql_test_cleanup_add(drop_schemas);
    }
    for (int i = 0; i < n_schemas; i++)
        if (!strcmp(schemas[i].dir, dir)) {
            opts->pg_schema = schemas[i].schema;
            return;
        }
    cr_assert_lt(n_schemas, MAX_SCHEMAS, "too many test stores in one process");
    snprintf(schemas[n_schemas].dir, sizeof schemas[n_schemas].dir, "%s", dir);
    snprintf(schemas[n_schemas].schema, sizeof schemas[n_schemas].schema, "qt_%ld_%d",
             (long)getpid(), n_schemas);
    opts->pg_schema = schemas[n_schemas].schema;
    n_schemas++;
}

int ql_test_store_settings(const char *dir, const char *out[2]) {
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    if (!o.url)
        return 0;
    /* o.pg_schema is schemas[i].schema, the entry of dir. */
    for (int i = 0; i < n_schemas; i++)
        if (!strcmp(schemas[i].dir, dir)) {
            char schema[sizeof schemas[i].schema];
            memcpy(schema, schemas[i].schema, sizeof schema);
            snprintf(schemas[i].url_kv, sizeof schemas[i].url_kv, "qilin.storage.url=%s",
                     find_pg_url());
            snprintf(schemas[i].schema_kv, sizeof schemas[i].schema_kv,
                     "qilin.storage.pg.schema=%s", schema);
            out[0] = schemas[i].url_kv;
            out[1] = schemas[i].schema_kv;
            return 2;
        }
    cr_assert_fail("no schema for %s", dir);
    return 0;
}

void ql_test_store_open(const char *dir, ql_store_t **store) {
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    ql_err_t err = {0};
    int rc = ql_store_open(&o, store, &err);
    cr_assert_eq(rc, 0, "cannot open the test store (%s): %s", ql_test_store_backend(), err.msg);
}

bool ql_test_pg_await_lock_wait(const char *dir, int64_t ms) {
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    char waiting[256];
    snprintf(waiting, sizeof waiting,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'qilin/%s' AND "
             "wait_event_type = 'Lock'",
             o.pg_schema);
    for (int64_t deadline = ql_test_mono_ms() + ms;;) {
        if (ql_test_pg_scalar(waiting) > 0)
            return true;
        if (ql_test_mono_ms() >= deadline)
            return false;
    }
}

ql_store_t *ql_test_pg_store_open(char *dir, size_t cap, const char *name) {
    ql_test_require_backend("pg");
    if (!dir[0])
        ql_test_tmpdir(dir, cap, name);
    ql_store_t *s;
    ql_test_store_open(dir, &s);
    return s;
}

/* The PostgreSQL form of ql_test_store_hash: every row of every table of the store's schema, in
 * key order, hashed with FNV-1a. */
static uint64_t pg_store_hash(ql_store_t *store) {
    const char *schema = NULL;
    for (int i = 0; i < n_schemas; i++)
        if (!strcmp(schemas[i].dir, ql_store_path(store)))
            schema = schemas[i].schema;
    cr_assert_not_null(schema, "the store was not opened by ql_test_store_open");
    PGconn *c = PQconnectdb(find_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    static const char *const tables[] = {"meta key",        "projects name", "models id",
                                         "segments id",     "jobs id",       "steps job, seq",
                                         "outputs job, seq"};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        char name[32], sql[256];
        sscanf(tables[i], "%31s", name);
        snprintf(sql, sizeof sql, "SELECT t::text FROM %s.%s t ORDER BY %s", schema, name,
                 tables[i] + strlen(name) + 1);
        PGresult *r = PQexec(c, sql);
        cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
        for (int row = 0; row < PQntuples(r); row++) {
            const uint8_t *b = (const uint8_t *)PQgetvalue(r, row, 0);
            for (int k = 0; k < PQgetlength(r, row, 0); k++)
                h = (h ^ b[k]) * 1099511628211ull;
            h = (h ^ (uint64_t)i << 32) * 1099511628211ull;
        }
        PQclear(r);
    }
    PQfinish(c);
    return h;
}

/* The schema ql_test_store_opts gave dir (NULL when none). */
static const char *schema_of(const char *dir) {
    for (int i = 0; i < n_schemas; i++)
        if (!strcmp(schemas[i].dir, dir))
            return schemas[i].schema;
    return NULL;
}

void ql_test_store_share(const char *dir, const char *as) {
    ql_store_opts_t o;
    ql_test_store_opts(as, &o);
    if (!o.url)
        return;
    cr_assert_null(schema_of(dir), "%s has a schema of its own already", dir);
    cr_assert_lt(n_schemas, MAX_SCHEMAS, "too many test stores in one process");
    snprintf(schemas[n_schemas].dir, sizeof schemas[n_schemas].dir, "%s", dir);
    snprintf(schemas[n_schemas].schema, sizeof schemas[n_schemas].schema, "%s", o.pg_schema);
    n_schemas++;
}

void ql_test_pg_sql(const char *sql, char *out, size_t cap) {
    const char *url = find_pg_url();
    cr_assert_not_null(url, "no PostgreSQL for the test");
    PGconn *c = PQconnectdb(url);
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    PQclear(PQexec(c, "SET client_min_messages = error"));
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    bool ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", PQresultErrorMessage(r));
    if (out && cap)
        snprintf(out, cap, "%s",
                 ok && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    PQfinish(c);
    cr_assert(ok, "%s: %s", sql, msg);
}

int ql_test_pg_lock_backend(const char *dir) {
    const char *schema = schema_of(dir);
    cr_assert_not_null(schema, "no PostgreSQL store was opened on %s", dir);
    char sql[512], pid[32];
    snprintf(sql, sizeof sql,
             "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE "
             "l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted AND a.application_name = "
             "'qilin-lock/%s'",
             schema);
    ql_test_pg_sql(sql, pid, sizeof pid);
    return atoi(pid);
}
