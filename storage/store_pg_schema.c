/* The PostgreSQL store's schema: created and upgraded at open (docs/postgresql.md). */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the schema ---- */

/* Taken around schema creation and upgrades: two servers starting together on one database. */
#define SCHEMA_LOCK_KEY 0x71696c696e736368ll /* "qilinsch" */

static const char schema_ddl[] =
    "CREATE TABLE meta (key text PRIMARY KEY, value bytea NOT NULL);"
    "CREATE TABLE projects (name text PRIMARY KEY, rec bytea NOT NULL);"
    "CREATE TABLE models (id uuid PRIMARY KEY, project text NOT NULL REFERENCES projects(name),"
    "  name text NOT NULL, rec bytea NOT NULL, UNIQUE (project, name));"
    "CREATE TABLE segments (id uuid PRIMARY KEY, model uuid NOT NULL REFERENCES models(id),"
    "  start_ms bigint NOT NULL, end_ms bigint NOT NULL, status smallint NOT NULL,"
    "  rec bytea NOT NULL, CHECK (start_ms < end_ms));"
    "CREATE INDEX segments_range ON segments USING gist (model, int8range(start_ms, end_ms));"
    "CREATE TABLE jobs (id uuid PRIMARY KEY, project text NOT NULL, model uuid,"
    "  state smallint NOT NULL, priority smallint NOT NULL, create_time bigint NOT NULL,"
    "  modify_time bigint NOT NULL, has_range boolean NOT NULL, range_start bigint NOT NULL,"
    "  range_end bigint NOT NULL, fence bigint NOT NULL DEFAULT 0, rec bytea NOT NULL,"
    "  CONSTRAINT live_jobs_disjoint EXCLUDE USING gist"
    "    (model WITH =, int8range(range_start, range_end) WITH &&)"
    "    WHERE (state IN (0, 1, 2, 3, 4) AND has_range AND model IS NOT NULL));"
    "CREATE INDEX jobs_ready ON jobs (priority, create_time, id) WHERE state = 0;"
    "CREATE INDEX jobs_state ON jobs (state, priority, create_time, id);"
    "CREATE INDEX jobs_model ON jobs (model, create_time, id);"
    "CREATE INDEX jobs_recent ON jobs (project, modify_time, id);"
    "CREATE INDEX jobs_recent_all ON jobs (modify_time, id);"
    "CREATE INDEX jobs_count ON jobs (project, state);"
    "CREATE TABLE steps (job uuid NOT NULL, seq int NOT NULL, rec bytea NOT NULL,"
    "  PRIMARY KEY (job, seq));"
    "CREATE TABLE outputs (job uuid NOT NULL, seq int NOT NULL, body bytea NOT NULL,"
    "  PRIMARY KEY (job, seq));";

static int exec_simple(PGconn *c, const char *sql, char *msg, size_t cap) {
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int rc = 0;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        rc = pg_sqlstate_err(PQresultErrorField(r, PG_DIAG_SQLSTATE));
        if (PQstatus(c) == CONNECTION_BAD)
            rc = QL_EUNAVAILABLE;
        snprintf(msg, cap, "%s", PQresultErrorMessage(r));
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = '\0';
    }
    PQclear(r);
    return rc;
}

/* qilin.storage.pg.require-sync-replication: every commit must reach a synchronous standby
 * before it returns, or a failover could lose what Qilin acknowledged (a fencing claim among
 * it). The settings are what the server applies to this session's commits. */
static int check_sync_replication(pg_store_t *s, PGconn *c, ql_err_t *err) {
    PGresult *r = PQexec(c, "SELECT current_setting('synchronous_standby_names'), "
                            "current_setting('synchronous_commit')");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        PQclear(r);
        return ql_err_set(err, QL_EUNAVAILABLE, "cannot read the replication settings of %s",
                          s->masked);
    }
    const char *names = PQgetvalue(r, 0, 0), *commit = PQgetvalue(r, 0, 1);
    bool sync = names[0] && strcmp(commit, "local") != 0 && strcmp(commit, "off") != 0;
    int rc = 0;
    if (!sync)
        rc = ql_err_set(err, QL_EINVAL,
                        "qilin.storage.pg.require-sync-replication: the database at %s does not "
                        "commit synchronously to a standby (synchronous_standby_names='%s', "
                        "synchronous_commit=%s): a failover to an asynchronous replica could lose "
                        "commits Qilin acknowledged, fencing claims among them. Set "
                        "synchronous_standby_names on the primary, or set this key to false",
                        s->masked, names, commit);
    PQclear(r);
    return rc;
}

/* Creates the schema when missing, or checks its version, in one transaction under the schema
 * lock. The versions follow LMDB's rules: a newer major version is refused. */
int pg_schema_setup(pg_store_t *s, ql_err_t *err) {
    pg_conn_t *c;
    int rc = pg_conn_open(s, &c, err);
    if (rc)
        return rc;
    char msg[512] = "", sql[1024];
    if (s->require_sync && (rc = check_sync_replication(s, c->c, err)))
        goto out;
    snprintf(sql, sizeof sql,
             "BEGIN; SELECT pg_advisory_xact_lock(%lld); CREATE SCHEMA IF NOT EXISTS %s",
             (long long)SCHEMA_LOCK_KEY, s->schema_ident);
    if ((rc = exec_simple(c->c, sql, msg, sizeof msg))) {
        ql_err_set(err, rc, "cannot create the schema %s on %s: %s", s->schema, s->masked, msg);
        goto out;
    }
    /* btree_gist (postgresql-contrib) gives GiST its uuid = for the exclusion constraint. Only
     * created when missing: on PostgreSQL 15 an ordinary role may not create in public, and an
     * administrator may have installed it once for every schema. */
    PGresult *r = PQexec(c->c, "SELECT 1 FROM pg_extension WHERE extname = 'btree_gist'");
    bool have_gist = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    if (!have_gist &&
        (rc = exec_simple(c->c, "CREATE EXTENSION IF NOT EXISTS btree_gist SCHEMA public", msg,
                          sizeof msg))) {
        ql_err_set(err, rc,
                   "cannot create the extension btree_gist on %s (an administrator can: CREATE "
                   "EXTENSION btree_gist): %s",
                   s->masked, msg);
        goto out;
    }
    const char *v[1] = {s->schema};
    r = PQexecParams(c->c,
                     "SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = "
                     "'meta'",
                     1, NULL, v, NULL, NULL, 0);
    bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    if (!exists) {
        char init[512];
        snprintf(init, sizeof init,
                 "INSERT INTO meta VALUES ('schema_major', int8send(%d)), ('schema_minor', "
                 "int8send(%d)), ('created_by', convert_to('qilin %s', 'UTF8'))",
                 QL_SCHEMA_MAJOR, QL_SCHEMA_MINOR, QL_VERSION);
        if (s->base.read_only) {
            rc = ql_err_set(err, QL_ENOTFOUND, "the schema %s on %s holds no Qilin store",
                            s->schema, s->masked);
            goto out;
        }
        if ((rc = exec_simple(c->c, schema_ddl, msg, sizeof msg)) ||
            (rc = exec_simple(c->c, init, msg, sizeof msg))) {
            ql_err_set(err, rc, "cannot create the tables of schema %s on %s: %s", s->schema,
                       s->masked, msg);
            goto out;
        }
    } else {
        r = PQexec(c->c, "SELECT key, ('x' || encode(value, 'hex'))::bit(64)::bigint FROM meta "
                         "WHERE key IN ('schema_major', 'schema_minor') AND length(value) = 8");
        long long major = -1, minor = 0;
        if (PQresultStatus(r) == PGRES_TUPLES_OK)
            for (int i = 0; i < PQntuples(r); i++) {
                long long val = atoll(PQgetvalue(r, i, 1));
                if (!strcmp(PQgetvalue(r, i, 0), "schema_major"))
                    major = val;
                else
                    minor = val;
            }
        PQclear(r);
        if (major < 0) {
            rc = ql_err_set(err, QL_ECORRUPT, "the store in schema %s on %s has no schema version",
                            s->schema, s->masked);
            goto out;
        }
        if (major > QL_SCHEMA_MAJOR) {
            rc = ql_err_set(err, QL_EVERSION,
                            "the store in schema %s on %s was written by a newer Qilin (schema "
                            "%lld.%lld); this build reads schema %d.x: upgrade Qilin or use "
                            "another schema",
                            s->schema, s->masked, major, minor, QL_SCHEMA_MAJOR);
            goto out;
        }
        /* Schema 2 is the first PostgreSQL schema: nothing older to upgrade from. */
    }
    if ((rc = exec_simple(c->c, "COMMIT", msg, sizeof msg)))
        ql_err_set(err, rc, "cannot commit the schema %s on %s: %s", s->schema, s->masked, msg);
out:
    pg_conn_close(c);
    return rc;
}

void pg_schema_drop(pg_store_t *s) {
    pg_conn_t *c;
    ql_err_t err = {0};
    if (pg_conn_open(s, &c, &err))
        return;
    char sql[512], msg[256];
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", s->schema_ident);
    exec_simple(c->c, sql, msg, sizeof msg);
    pg_conn_close(c);
}
