/*
 * Wake-ups across servers on PostgreSQL (docs/postgresql.md, Wake-ups; the contract is in
 * ql_store.h, "changes made by other servers").
 *
 * DESIGN.
 * - Sending: a job put that wakes a scheduler (store_change_wakes, store_ops.h) notes the job's id
 * on its transaction level. The ids follow the savepoints as the model locks do: a released level
 *   hands them to its parent, a level rolled back drops them. The top-level commit sends them
 *   in one pg_notify, in the same round trip as its COMMIT ("SELECT pg_notify(...); COMMIT"):
 *   no statement of its own, and PostgreSQL delivers it only if the transaction commits, after
 *   the commit is visible, in commit order. More than PG_WAKE_NAMED ids (or no memory to note
 *   them) are sent as "*", anything may have changed; a payload must stay under 8000 bytes.
 * - The channel is per schema, so that several clusters can share one database:
 *   qilin_jobs_<schema> when the name is short and plain, else qilin_jobs_h<hash of the name>
 *   (a channel name has at most 63 bytes). Either way it needs no quoting in SQL.
 * - Receiving: a connection of its own, not from the pool, that LISTENs; its socket is watched
 *   by the caller, and a drain reads without blocking (PQconsumeInput, PQnotifies). TCP
 *   keepalives (idle 5 s, then 3 probes 2 s apart, unless the URL sets them) let a session
 *   whose peer vanished break instead of waiting silently forever. The caller watches a
 *   duplicate of the session's socket that the store closes only at the next listen or at
 *   close: libpq closes its own socket as soon as it finds the connection broken, inside a
 *   drain, and a descriptor closed under a poll could be reused by another thread meanwhile.
 * - Cost: NOTIFY makes committing transactions that notify take turns on a lock of the
 *   database (PostgreSQL serialises the notification queue), which is one more reason a
 *   server's writer batches; measured in docs/performance.md.
 */
#include "store_pg_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ids named in one notification at most: 200 x 37 bytes stays under PostgreSQL's 8000. */
#define PG_WAKE_NAMED 200

/* ---- sending ---- */

void pg_changes_note(pg_txn_t *t, const ql_id_t *job) {
    if (t->woke_all)
        return;
    for (size_t i = t->n_woke; i-- > 0 && i + 8 >= t->n_woke;)
        if (ql_id_eq(&t->woke[i], job))
            return; /* the same job again (a pick and a pause in one batch): once is enough */
    if (t->n_woke == PG_WAKE_NAMED) {
        t->woke_all = true;
        return;
    }
    if (t->n_woke == t->cap_woke) {
        size_t cap = t->cap_woke ? t->cap_woke * 2 : 8;
        ql_id_t *p = realloc(t->woke, cap * sizeof *p);
        if (!p) {
            t->woke_all = true;
            return;
        }
        t->woke = p;
        t->cap_woke = cap;
    }
    t->woke[t->n_woke++] = *job;
}

void pg_changes_merge(pg_txn_t *into, pg_txn_t *from) {
    if (from->woke_all)
        into->woke_all = true;
    for (size_t i = 0; i < from->n_woke && !into->woke_all; i++)
        pg_changes_note(into, &from->woke[i]);
}

const char *pg_changes_commit_sql(pg_txn_t *t, char *buf) {
    if (!t->n_woke && !t->woke_all)
        return "COMMIT";
    pg_store_t *s = pgs(t->base.store);
    size_t n = (size_t)snprintf(buf, PG_COMMIT_SQL_MAX, "SELECT pg_notify('%s', '", s->channel);
    if (t->woke_all) {
        buf[n++] = '*';
    } else {
        for (size_t i = 0; i < t->n_woke; i++) {
            if (i)
                buf[n++] = ',';
            ql_id_format(&t->woke[i], buf + n);
            n += QL_ID_STR_LEN;
        }
    }
    snprintf(buf + n, PG_COMMIT_SQL_MAX - n, "'); COMMIT");
    return buf;
}

/* ---- the channel ---- */

void pg_changes_init(pg_store_t *s) {
    const char *name = s->schema;
    size_t len = strlen(name);
    bool plain = len > 0 && len <= sizeof s->channel - 1 - strlen("qilin_jobs_");
    for (size_t i = 0; plain && i < len; i++)
        plain = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                (name[i] >= '0' && name[i] <= '9') || name[i] == '_';
    if (plain) {
        snprintf(s->channel, sizeof s->channel, "qilin_jobs_%s", name);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: stable across builds and hosts */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
    snprintf(s->channel, sizeof s->channel, "qilin_jobs_h%016llx", (unsigned long long)h);
}

/* ---- receiving ---- */

void pg_changes_close(pg_store_t *s) {
    if (s->listen)
        PQfinish(s->listen);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    s->listen = NULL;
    s->listen_fd = -1;
    s->listen_broken = false;
}

/* The server's goodbye to a terminated session arrives as a notice: the drain reports the
 * loss, so libpq need not print it to stderr. */
static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* The first line of libpq's message, for an error (no password in it: libpq never prints it). */
static void conn_message(PGconn *c, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", c ? PQerrorMessage(c) : "out of memory");
    buf[strcspn(buf, "\n")] = '\0';
}

int pg_changes_listen(ql_store_t *bs, ql_err_t *err) {
    pg_store_t *s = pgs(bs);
    /* Every session but a first one that opens at the first try may have missed changes. */
    bool missed = s->listen_tried;
    s->listen_tried = true;
    pg_changes_close(s);
    /* Keywords before dbname: the URL (expanded from dbname) overrides them. */
    const char *const keys[] = {"keepalives",       "keepalives_idle", "keepalives_interval",
                                "keepalives_count", "dbname",          NULL};
    const char *const vals[] = {"1", "5", "2", "3", s->conninfo, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    char msg[512];
    if (!c || PQstatus(c) != CONNECTION_OK) {
        conn_message(c, msg, sizeof msg);
        PQfinish(c);
        return ql_err_set(err, QL_EUNAVAILABLE,
                          "cannot open the change session on %s (wake-ups from other servers "
                          "wait for the poll meanwhile): %s",
                          s->masked, msg);
    }
    char app[64];
    pg_servers_app_name(s, app, sizeof app);
    char *app_lit = PQescapeLiteral(c, app, strlen(app));
    char sql[768];
    snprintf(sql, sizeof sql,
             "SET application_name = %s; SET search_path TO %s, public; LISTEN \"%s\"",
             app_lit ? app_lit : "'qilin'", s->schema_ident, s->channel);
    PQfreemem(app_lit);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        snprintf(msg, sizeof msg, "%s", PQresultErrorMessage(r));
        msg[strcspn(msg, "\n")] = '\0';
        PQclear(r);
        PQfinish(c);
        return ql_err_set(err, QL_EUNAVAILABLE, "cannot LISTEN on %s: %s", s->masked, msg);
    }
    PQclear(r);
    int fd = fcntl(PQsocket(c), F_DUPFD_CLOEXEC, 0); /* as libpq's own: no step inherits it */
    if (fd < 0) {
        int rc = -errno;
        PQfinish(c);
        return ql_err_set(err, rc, "cannot watch the change session: %s", ql_strerror(rc));
    }
    PQsetNoticeProcessor(c, quiet, NULL);
    s->listen = c;
    s->listen_fd = fd;
    s->listen_resync = missed;
    /* The server's announcement lives with this session (store_pg_servers.c); a failure here
     * only leaves this server out of the list until the next session. */
    (void)pg_servers_on_listen(s);
    return 0;
}

int pg_changes_fd(ql_store_t *bs) {
    pg_store_t *s = pgs(bs);
    return s->listen_fd;
}

/* Reports one notification's payload: ids separated by commas, or "*" (an operator's bare
 * NOTIFY on the channel, without a payload, counts as "*" too). */
static void report(const char *payload, ql_store_change_cb cb, void *arg) {
    char one[QL_ID_STR_LEN + 1];
    const char *p = payload;
    if (!*p)
        cb(arg, NULL);
    while (*p) {
        size_t n = strcspn(p, ",");
        ql_id_t id;
        if (n != QL_ID_STR_LEN || (memcpy(one, p, n), one[n] = '\0', ql_id_parse(one, &id))) {
            cb(arg, NULL); /* "*" (or a payload of another version): anything may have changed */
            return;
        }
        cb(arg, &id);
        p += n;
        if (*p == ',')
            p++;
    }
}

int pg_changes_drain(ql_store_t *bs, ql_store_change_cb cb, void *arg) {
    pg_store_t *s = pgs(bs);
    if (!s->listen || s->listen_broken)
        return QL_EUNAVAILABLE;
    if (s->listen_resync) {
        s->listen_resync = false;
        cb(arg, NULL);
    }
    /* What was read before a failure is still reported: it was committed. */
    bool ok = PQconsumeInput(s->listen) && PQstatus(s->listen) == CONNECTION_OK;
    PGnotify *nf;
    while ((nf = PQnotifies(s->listen))) {
        if (!strcmp(nf->relname, s->channel))
            report(nf->extra, cb, arg);
        PQfreemem(nf);
    }
    if (!ok) {
        s->listen_broken = true;
        return QL_EUNAVAILABLE;
    }
    return 0;
}
