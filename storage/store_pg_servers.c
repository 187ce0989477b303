/*
 * The servers that share a PostgreSQL store (ql_store_announce, ql_store_servers_foreach;
 * docs/postgresql.md, Servers of a store).
 *
 * DESIGN.
 * - A server's announcement lives in meta under "server/<backend pid of its change session>"
 *   and is true exactly while that session lives: a lister keeps the rows whose backend still
 *   runs with the change session's application name on this database (pg_stat_activity shows
 *   both columns to every role). A server that dies, however it dies, loses its session, so its
 *   row is ignored at once, with no heartbeat and no timeout: the same idea as the data
 *   directory's presence files, whose flock dies with the process.
 * - Keyed by backend pid, a row of a dead session whose pid PostgreSQL reuses for another
 *   change session is overwritten by that session's own announcement; reused by any other kind
 *   of session, its application name differs and the row stays ignored.
 * - Each (re)opened change session announces again (the old row is of a dead session) and
 *   removes every row whose session is gone, so rows never pile up. All of it runs on the
 *   change session, on the loop thread, beside its LISTEN; it writes nothing a fencing token
 *   guards (an announcement is not a job-engine decision).
 * - Whether a listed server is the master: the holder record of the job engine lock names its
 *   server and pid (store_pg_lock.c), and the lock must be granted now to the backend that
 *   record names.
 */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A live announcement: its row's backend is a change session of this schema on this database.
 * $1 is the change session's application name. */
#define LIVE_ROW                                                                                   \
    "EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = current_database() AND "           \
    "a.application_name = $1 AND m.key = 'server/' || a.pid)"

static const char announce_sql[] =
    "WITH gone AS (DELETE FROM meta m WHERE m.key LIKE 'server/%' AND NOT " LIVE_ROW ") "
    "INSERT INTO meta (key, value) VALUES ('server/' || pg_backend_pid(), convert_to($2, 'UTF8')) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";

static const char list_sql[] =
    "SELECT convert_from(m.value, 'UTF8'), (SELECT convert_from(value, 'UTF8') FROM meta WHERE "
    "key = 'engine_holder') FROM meta m WHERE m.key LIKE 'server/%' AND " LIVE_ROW;

/* Whether the lock's holder record names (server_id, pid) and its backend holds a session
 * advisory lock now (the job engine lock is the only one a holder's lock session takes). */
static const char held_sql[] =
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
    "objsubid = 2 AND pid = $1::int4)";

void pg_servers_app_name(const pg_store_t *s, char *buf, size_t cap) {
    /* PostgreSQL keeps at most 63 bytes of an application name: cut the same way. */
    snprintf(buf, cap < 64 ? cap : 64, "qilin/%s/changes", s->schema);
}

/* The stored value: "<pid> <server id>\n<info>". */
int pg_servers_announce(ql_store_t *bs, const char *server_id, long pid, const char *info) {
    pg_store_t *s = pgs(bs);
    size_t cap = strlen(server_id) + strlen(info) + 32;
    char *value = malloc(cap);
    if (!value)
        return UV_ENOMEM;
    snprintf(value, cap, "%ld %s\n%s", pid, server_id, info);
    free(s->announcement);
    s->announcement = value;
    return s->listen ? pg_servers_on_listen(s) : 0;
}

int pg_servers_on_listen(pg_store_t *s) {
    if (!s->announcement || !s->listen)
        return 0;
    char app[64];
    pg_servers_app_name(s, app, sizeof app);
    const char *vals[2] = {app, s->announcement};
    PGresult *r = PQexecParams(s->listen, announce_sql, 2, NULL, vals, NULL, NULL, 0);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : QL_EUNAVAILABLE;
    PQclear(r);
    return rc;
}

/* Splits a stored value into its pid, server id (copied into id) and info. */
static const char *parse_value(const char *v, long *pid, char *id, size_t cap) {
    const char *nl = strchr(v, '\n');
    char *end;
    *pid = strtol(v, &end, 10);
    if (!nl || *end != ' ' || (size_t)(nl - end - 1) >= cap)
        return NULL;
    memcpy(id, end + 1, (size_t)(nl - end - 1));
    id[nl - end - 1] = '\0';
    return nl + 1;
}

/* The master's (pid, server id) from the holder record when its backend holds the lock now. */
static bool live_holder(pg_txn_t *t, const char *rec, long *pid, char *id, size_t cap) {
    char server[208], address[128];
    int backend;
    unsigned long long epoch;
    if (!rec || sscanf(rec, "server=%207s address=%127s pid=%ld epoch=%llu backend=%d", server,
                       address, pid, &epoch, &backend) != 5)
        return false;
    char b[16];
    snprintf(b, sizeof b, "%d", backend);
    const char *vals[1] = {b};
    PGresult *r = PQexecParams(t->conn->c, held_sql, 1, NULL, vals, NULL, NULL, 0);
    bool held =
        PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    snprintf(id, cap, "%s", server);
    return held;
}

int pg_servers_foreach(ql_txn_t *bt, ql_store_server_cb cb, void *arg) {
    pg_txn_t *t = pgt(bt);
    pg_store_t *s = pgs(bt->store);
    char app[64];
    pg_servers_app_name(s, app, sizeof app);
    const char *vals[1] = {app};
    int frc = pg_flush(t); /* the transaction's BEGIN, when this is its first statement */
    if (frc)
        return frc;
    PGresult *r = PQexecParams(t->conn->c, list_sql, 1, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        int rc = PQstatus(t->conn->c) == CONNECTION_BAD ? QL_EUNAVAILABLE : pg_sqlstate_err(st);
        PQclear(r);
        return rc;
    }
    long master_pid = 0;
    char master_id[208] = "";
    int rows = PQntuples(r);
    bool have_master =
        rows > 0 && !PQgetisnull(r, 0, 1) &&
        live_holder(t, PQgetvalue(r, 0, 1), &master_pid, master_id, sizeof master_id);
    for (int i = 0; i < rows; i++) {
        long pid;
        char id[208];
        const char *info = parse_value(PQgetvalue(r, i, 0), &pid, id, sizeof id);
        if (!info)
            continue; /* not an announcement this build wrote */
        cb(arg, info, have_master && pid == master_pid && !strcmp(id, master_id));
    }
    PQclear(r);
    return 0;
}
