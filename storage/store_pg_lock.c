/*
 * The job engine lock of a shared PostgreSQL store: a session advisory lock on a session of its
 * own, the holder's record and its lease (ql_store.h, "the job engine lock of a shared store";
 * docs/postgresql.md, The job engine lock).
 *
 * DESIGN.
 * - The session is never one of the pool's: a session advisory lock belongs to the backend
 *   that took it and lasts until it is unlocked or the session ends, so the holding is exactly
 *   the life of this session. A process that dies closes its socket and the backend ends; a
 *   host that is gone is found by TCP keepalives (both ends) or tcp_user_timeout.
 * - The key is two int4 derived from the schema name (two clusters in one database have two
 *   locks); the two-key form is a lock space of its own, apart from the int8 keys of the model
 *   and schema locks (store_pg.c, store_pg_schema.c).
 * - Winning writes, in one store write transaction: the raised fencing epoch, the holder's
 *   record (meta "engine_holder") and the lease (meta "engine_lease", the database's clock in
 *   ms). A standby judges a holder only by a record whose backend pid is the lock's current
 *   holder in pg_locks (a new holder that has not recorded itself yet is not judged), and ends it
 *   with one statement that checks again, at that instant, that the lease is stale and the
 *   backend still holds the lock.
 * - The renewal is one UPDATE of the lease, conditional on the stored epoch still being the
 *   holding's, sent without waiting (renew) and collected by the next call (renew or
 *   still_held): the loop thread never waits for the database while it holds the lock. Only
 *   one renewal is in flight; one unanswered past the bound means the holder is cut off.
 * - Every pg_backend_pid() the session reports must be the one it had at open: a proxy that
 *   pools transactions would move the session (and the lock's meaning) between backends.
 */
#include "base/ql_log.h"
#include "storage/ql_meta.h"
#include "store_pg_int.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STATEMENT_TIMEOUT_MS 2000
/* After a termination, how long the try polls for the freed lock. */
#define FREE_WAIT_MS 500
/* How long release waits for a renewal's answer before it closes the session instead. */
#define DRAIN_MS 1000

#define DB_NOW_MS "(extract(epoch FROM clock_timestamp()) * 1000)::int8"
#define VALUE_I64 "('x' || encode(value, 'hex'))::bit(64)::int8"
#define HELD_BY(pid)                                                                               \
    "EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid AND "  \
    "objid = $2::int4::oid AND objsubid = 2 AND granted AND pid = " pid ")"

static const char try_sql[] = "SELECT pg_try_advisory_lock($1::int4, $2::int4), pg_backend_pid()";
static const char unlock_sql[] = "SELECT pg_advisory_unlock($1::int4, $2::int4)";
/* The recorded holder, its lease's age and the backend that holds the lock now. */
static const char holder_sql[] =
    "SELECT (SELECT convert_from(value, 'UTF8') FROM meta WHERE key = 'engine_holder'), "
    "(SELECT " DB_NOW_MS " - " VALUE_I64 " FROM meta WHERE key = 'engine_lease'), "
    "(SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid AND "
    "objid = $2::int4::oid AND objsubid = 2 AND granted LIMIT 1)";
/* Ends backend $3 only if, now, the lease is older than $4 ms and $3 holds the lock; waits up to
 * 2 s for the backend to be gone, which frees the lock (pg_terminate_backend's timeout,
 * PostgreSQL 14 and later). */
static const char terminate_sql[] = "SELECT pg_terminate_backend($3::int4, 2000) FROM meta "
                                    "WHERE key = 'engine_lease' AND " DB_NOW_MS " - " VALUE_I64
                                    " > $4::int8 AND " HELD_BY("$3::int4");
static const char lease_sql[] =
    "INSERT INTO meta (key, value) VALUES ('engine_lease', int8send(" DB_NOW_MS ")) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value";
static const char renew_sql[] =
    "UPDATE meta SET value = int8send(" DB_NOW_MS ") WHERE key = 'engine_lease' AND (SELECT "
    "value FROM meta WHERE key = 'job_engine_epoch') = int8send($1::int8) "
    "RETURNING pg_backend_pid()";

struct ql_store_lock {
    pg_store_t *s;
    PGconn *c;       /* the lock's session, NULL when closed */
    int backend_pid; /* its pg_backend_pid() at open */
    char k1[16], k2[16];
    ql_store_lock_opts_t opts; /* server_id and address point to the copies below */
    char server_id[208];
    char address[128];
    bool held;
    uint64_t epoch;
    bool in_flight;  /* a renewal was sent and its answer not collected yet */
    int64_t sent_ms; /* when it was sent (monotonic) */
    bool lost;
    char why[400];    /* why the holding is over (lost) */
    int said_backend; /* the holder a refused termination was logged for, once */
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void quiet_notice(void *arg, const char *msg) {
    (void)arg;
    (void)msg;
}

/* The server's message on one line (libpq's may hold newlines and tabs). */
static void copy_msg(char *out, size_t cap, const char *msg) {
    snprintf(out, cap, "%s", msg && msg[0] ? msg : "no message");
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    char *o = out;
    for (const char *p = out; *p; p++)
        if (*p != '\n' && *p != '\t')
            *o++ = *p;
        else if (o > out && o[-1] != ' ')
            *o++ = ' ';
    *o = '\0';
}

static int reported_pid(ql_store_lock_t *l, int pid) {
    return l->opts.backend_pid_hook ? l->opts.backend_pid_hook(l->opts.hook_arg, pid) : pid;
}

static void close_session(ql_store_lock_t *l) {
    PQfinish(l->c);
    l->c = NULL;
    l->in_flight = false;
}

/* The holding is over: why says so (the first reason stays). */
static void lose(ql_store_lock_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lose(ql_store_lock_t *l, const char *fmt, ...) {
    if (l->lost)
        return;
    l->lost = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->why, sizeof l->why, fmt, ap);
    va_end(ap);
}

/* A blocking statement on the session with text parameters (k1, k2, then extra); *out (may be
 * NULL) gets a tuples result, which the caller clears. msg gets the server's message on error. */
static int run(ql_store_lock_t *l, const char *sql, int n_extra, const char *const *extra,
               PGresult **out, char *msg, size_t cap) {
    const char *v[4] = {l->k1, l->k2, NULL, NULL};
    for (int i = 0; i < n_extra && i < 2; i++)
        v[2 + i] = extra[i];
    int n = strstr(sql, "$1") ? 2 + n_extra : 0;
    PGresult *r = n ? PQexecParams(l->c, sql, n, NULL, v, NULL, NULL, 0) : PQexec(l->c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
        if (out)
            *out = r;
        else
            PQclear(r);
        return 0;
    }
    const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    copy_msg(msg, cap, primary ? primary : PQerrorMessage(l->c));
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    int rc = PQstatus(l->c) == CONNECTION_BAD   ? QL_EUNAVAILABLE
             : state && !strcmp(state, "42501") ? UV_EPERM /* insufficient privilege */
                                                : pg_sqlstate_err(state);
    PQclear(r);
    return rc;
}

/* Unlocks once. Session locks count (a second pg_try_advisory_lock of the same session takes
 * it again), so a session that may still hold it after this is closed instead. */
static void unlock(ql_store_lock_t *l) {
    PGresult *r;
    char msg[256];
    bool done = l->c && run(l, unlock_sql, 0, NULL, &r, msg, sizeof msg) == 0;
    if (done) {
        done = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
        PQclear(r);
    }
    if (!done)
        close_session(l);
}

static int one_pid(PGconn *c, int *pid) {
    PGresult *r = PQexec(c, "SELECT pg_backend_pid()");
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? 0 : QL_EUNAVAILABLE;
    if (!rc)
        *pid = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return rc;
}

/* A new session on s's database with the lock's settings (keepalives, timeouts). */
static PGconn *connect_session(pg_store_t *s) {
    char app[64];
    snprintf(app, sizeof app, "qilin-lock/%s", s->schema);
    /* dbname first and expanded: the configured URL or conninfo, the keywords after it win. */
    static const char *const kw[] = {"dbname",
                                     "keepalives",
                                     "keepalives_idle",
                                     "keepalives_interval",
                                     "keepalives_count",
                                     "tcp_user_timeout",
                                     "connect_timeout",
                                     "application_name",
                                     NULL};
    const char *const val[] = {s->conninfo, "1", "5", "2", "3", "10000", "5", app, NULL};
    return PQconnectdbParams(kw, val, 1);
}

static const char *const pooling_advice =
    "the job engine lock is a session advisory lock, which a proxy that pools transactions "
    "(PgBouncer's pool_mode=transaction or statement) hands to other clients between two "
    "statements; point qilin.storage.url at PostgreSQL itself or at a session-pooling proxy";

/* Refuses a session that a transaction-pooling proxy serves: its backend changes between two
 * statements, or a second session is served by the same backend (a proxy that reuses its last
 * server connection, as PgBouncer does, gives the probe the backend the first one just left). */
static int check_pooling(ql_store_lock_t *l, ql_err_t *err) {
    int p1 = 0, p2 = -1, p3 = 0;
    int rc = one_pid(l->c, &p1);
    PGconn *probe = connect_session(l->s);
    if (!rc && probe && PQstatus(probe) == CONNECTION_OK)
        rc = one_pid(probe, &p2);
    PQfinish(probe);
    if (!rc)
        rc = one_pid(l->c, &p3);
    if (rc)
        return ql_err_set(err, rc, "the job engine lock's session on %s: cannot read its backend",
                          l->s->masked);
    p1 = reported_pid(l, p1);
    p3 = reported_pid(l, p3);
    if (p1 != p3)
        return ql_err_set(err, QL_EINVAL,
                          "qilin.storage.url: %s: the job engine lock's session moved from backend "
                          "%d to backend %d between two statements: %s",
                          l->s->masked, p1, p3, pooling_advice);
    if (p1 == p2)
        return ql_err_set(err, QL_EINVAL,
                          "qilin.storage.url: %s: two sessions were served by the same backend "
                          "%d: %s",
                          l->s->masked, p1, pooling_advice);
    l->backend_pid = p1;
    return 0;
}

static int open_session(ql_store_lock_t *l, ql_err_t *err) {
    close_session(l);
    l->c = connect_session(l->s);
    if (!l->c || PQstatus(l->c) != CONNECTION_OK) {
        char msg[256];
        copy_msg(msg, sizeof msg, l->c ? PQerrorMessage(l->c) : "out of memory");
        close_session(l);
        return ql_err_set(err, QL_EUNAVAILABLE,
                          "cannot open the job engine lock's session on %s: %s", l->s->masked, msg);
    }
    PQsetNoticeProcessor(l->c, quiet_notice, NULL);
    /* The server's own keepalives: they find a holder whose host is gone (the client's settings
     * above only find a database that is gone). No superuser needed for any of these. */
    char sql[512], msg[256];
    snprintf(sql, sizeof sql,
             "SET search_path TO %s, public; SET statement_timeout = %d; SET lock_timeout = %d; "
             "SET synchronous_commit = off; SET client_min_messages = error; "
             "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; "
             "SET tcp_keepalives_count = 3; SET tcp_user_timeout = 10000",
             l->s->schema_ident, STATEMENT_TIMEOUT_MS, STATEMENT_TIMEOUT_MS);
    int rc = run(l, sql, 0, NULL, NULL, msg, sizeof msg);
    if (rc) {
        close_session(l);
        return ql_err_set(err, rc, "cannot set up the job engine lock's session on %s: %s",
                          l->s->masked, msg);
    }
    if ((rc = check_pooling(l, err)))
        close_session(l);
    return rc;
}

/* ---- the holder's record ---- */

static void format_record(const ql_store_lock_t *l, uint64_t epoch, char *out, size_t cap) {
    snprintf(out, cap, "server=%s address=%s pid=%ld epoch=%llu backend=%d", l->server_id,
             l->address[0] ? l->address : "-", (long)getpid(), (unsigned long long)epoch,
             l->backend_pid);
}

static bool parse_record(const char *rec, ql_store_holder_t *h) {
    unsigned long long epoch;
    int n = sscanf(rec, "server=%207s address=%127s pid=%ld epoch=%llu backend=%d", h->server_id,
                   h->address, &h->pid, &epoch, &h->backend_pid);
    h->epoch = epoch;
    return n == 5;
}

/* Raises the epoch and records the holding and its lease, in one write transaction. */
static int record_holding(ql_store_lock_t *l, ql_err_t *err) {
    ql_txn_t *txn;
    int rc = ql_txn_begin(&l->s->base, true, &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot begin the job engine lock's write: %s", ql_strerror(rc));
    uint64_t epoch;
    char rec[400];
    if (!(rc = ql_fence_raise(txn, &epoch))) {
        format_record(l, epoch, rec, sizeof rec);
        if (!(rc = ql_meta_put_str(txn, "engine_holder", rec)))
            rc = pg_cmd(pgt(txn), lease_sql);
    }
    if (rc) {
        ql_txn_abort(txn);
        return ql_err_set(err, rc, "cannot raise the fencing epoch for the job engine lock: %s",
                          ql_strerror(rc));
    }
    if ((rc = ql_txn_commit(txn)))
        return ql_err_set(err, rc, "cannot commit the job engine lock's fencing epoch: %s",
                          ql_strerror(rc));
    l->epoch = epoch; /* only an epoch that is stored becomes the token */
    return 0;
}

/* ---- trying ---- */

/* pg_try_advisory_lock once; a backend other than the session's is a pooling proxy. */
static int try_once(ql_store_lock_t *l, bool *got, ql_err_t *err) {
    PGresult *r;
    char msg[256];
    int rc = run(l, try_sql, 0, NULL, &r, msg, sizeof msg);
    if (rc)
        return ql_err_set(err, rc, "cannot try the job engine lock on %s: %s", l->s->masked, msg);
    *got = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    int pid = reported_pid(l, atoi(PQntuples(r) == 1 ? PQgetvalue(r, 0, 1) : "0"));
    PQclear(r);
    if (pid != l->backend_pid) {
        close_session(l); /* whatever backend holds the lock now lets go of it */
        *got = false;
        return ql_err_set(err, QL_EINVAL,
                          "qilin.storage.url: %s: the job engine lock's session moved from "
                          "backend %d to backend %d: %s",
                          l->s->masked, l->backend_pid, pid, pooling_advice);
    }
    return 0;
}

/* Who holds the lock: the record, and whether it is the current holding's. */
static int read_holder(ql_store_lock_t *l, ql_store_holder_t *h, ql_err_t *err) {
    memset(h, 0, sizeof *h);
    h->lease_age_ms = -1;
    PGresult *r;
    char msg[256];
    int rc = run(l, holder_sql, 0, NULL, &r, msg, sizeof msg);
    if (rc)
        return ql_err_set(err, rc, "cannot read the job engine lock's holder: %s", msg);
    if (PQntuples(r) == 1) {
        bool parsed = !PQgetisnull(r, 0, 0) && parse_record(PQgetvalue(r, 0, 0), h);
        if (!PQgetisnull(r, 0, 1))
            h->lease_age_ms = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        int actual = PQgetisnull(r, 0, 2) ? 0 : atoi(PQgetvalue(r, 0, 2));
        h->known = parsed && actual != 0 && actual == h->backend_pid;
    }
    PQclear(r);
    if (!h->known) {
        int64_t age = h->lease_age_ms;
        memset(h, 0, sizeof *h);
        h->lease_age_ms = age;
    }
    return 0;
}

/*
 * The holder's lease is older than lease_ms: it is stopped (its kernel still answers the
 * keepalives, so its session lives), wedged or cut off, and schedules nothing while it keeps
 * the lock. Ends its lock session, if the lease is still stale and the backend still the holder
 * at that instant, and says why. Returns whether it was ended.
 */
static bool end_stale_holder(ql_store_lock_t *l, const ql_store_holder_t *h) {
    char pid[16], lease[24], msg[256];
    snprintf(pid, sizeof pid, "%d", h->backend_pid);
    snprintf(lease, sizeof lease, "%lld", (long long)l->opts.lease_ms);
    const char *extra[2] = {pid, lease};
    PGresult *r;
    int rc = run(l, terminate_sql, 2, extra, &r, msg, sizeof msg);
    if (rc) {
        if (l->said_backend != h->backend_pid)
            ql_log(l->opts.log, QL_LOG_ERROR, "node",
                   "standby: the master server=%s address=%s pid=%ld epoch=%llu has not renewed "
                   "its lease for %lld ms, but this server cannot end its lock session "
                   "backend=%d: %s%s",
                   h->server_id, h->address, h->pid, (unsigned long long)h->epoch,
                   (long long)h->lease_age_ms, h->backend_pid, msg,
                   rc == UV_EPERM ? " (the role of qilin.storage.url must be the master's role, "
                                    "or a member of it or of pg_signal_backend; a superuser's "
                                    "session only a superuser may end)"
                                  : "");
        l->said_backend = h->backend_pid;
        return false;
    }
    bool ended = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!ended)
        return false; /* renewed meanwhile, or gone already */
    ql_log(l->opts.log, QL_LOG_WARN, "node",
           "standby: ended the master's job engine lock session backend=%d server=%s address=%s "
           "pid=%ld epoch=%llu lease_age_ms=%lld reason=\"its lease is older than "
           "qilin.server.master-lease-ms=%lld by the database's clock: it is stopped, wedged or "
           "cut off and schedules nothing while it keeps the lock; ending its session frees the "
           "lock for this server, and the fencing epoch this server raises refuses anything it "
           "still writes\"",
           h->backend_pid, h->server_id, h->address, h->pid, (unsigned long long)h->epoch,
           (long long)h->lease_age_ms, (long long)l->opts.lease_ms);
    l->said_backend = 0;
    return true;
}

/* Collects a renewal's answer (blocking up to ms); false when it did not come. */
static bool drain(ql_store_lock_t *l, int ms) {
    int64_t until = mono_ms() + ms;
    while (l->in_flight && l->c) {
        if (!PQconsumeInput(l->c))
            return false;
        if (!PQisBusy(l->c)) {
            PGresult *r;
            while ((r = PQgetResult(l->c)))
                PQclear(r);
            l->in_flight = false;
            break;
        }
        int64_t left = until - mono_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = PQsocket(l->c), .events = POLLIN};
        (void)poll(&p, 1, (int)left);
    }
    return l->c != NULL;
}

int ql_store_lock_try(ql_store_lock_t *l, bool *acquired, uint64_t *epoch,
                      ql_store_holder_t *holder, ql_err_t *err) {
    *acquired = false;
    ql_store_holder_t scratch;
    if (!holder)
        holder = &scratch;
    memset(holder, 0, sizeof *holder);
    holder->lease_age_ms = -1;
    if (l->held) {
        *acquired = true;
        *epoch = l->epoch;
        return 0;
    }
    int rc = 0;
    if (!l->c || PQstatus(l->c) != CONNECTION_OK || !drain(l, DRAIN_MS))
        rc = open_session(l, err);
    bool got = false;
    if (rc || (rc = try_once(l, &got, err)))
        return rc;
    if (!got) {
        if ((rc = read_holder(l, holder, err)))
            return rc;
        if (l->opts.lease_ms <= 0 || !holder->known || holder->lease_age_ms <= l->opts.lease_ms ||
            !end_stale_holder(l, holder))
            return 0;
        /* Its backend is gone (pg_terminate_backend waited for it): the lock is free, unless
         * another standby was quicker. */
        for (int64_t until = mono_ms() + FREE_WAIT_MS; !got && mono_ms() < until;) {
            if ((rc = try_once(l, &got, err)))
                return rc;
            if (!got) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        if (!got)
            return read_holder(l, holder, err);
        memset(holder, 0, sizeof *holder);
        holder->lease_age_ms = -1;
    }
    if ((rc = record_holding(l, err))) {
        unlock(l);
        return rc;
    }
    l->held = true;
    l->lost = false;
    l->why[0] = '\0';
    l->in_flight = false;
    *acquired = true;
    *epoch = l->epoch;
    return 0;
}

/* ---- holding ---- */

/* Judges a renewal's answer. */
static void judge(ql_store_lock_t *l, PGresult *r) {
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        char msg[256];
        copy_msg(msg, sizeof msg, PQresultErrorMessage(r));
        lose(l, "the lease renewal failed on the lock's session: %s", msg);
    } else if (PQntuples(r) == 0) {
        lose(l,
             "the stored fencing epoch is no longer this server's token %llu (another server "
             "took the lock)",
             (unsigned long long)l->epoch);
    } else if (reported_pid(l, atoi(PQgetvalue(r, 0, 0))) != l->backend_pid) {
        lose(l, "the lock's session moved from backend %d to backend %d: %s", l->backend_pid,
             reported_pid(l, atoi(PQgetvalue(r, 0, 0))), pooling_advice);
    }
}

/* Collects what the database answered, without waiting. */
static void pump(ql_store_lock_t *l) {
    if (!l->c || l->lost)
        return;
    if (!PQconsumeInput(l->c) || PQstatus(l->c) == CONNECTION_BAD) {
        char msg[256];
        copy_msg(msg, sizeof msg, PQerrorMessage(l->c));
        lose(l,
             "the lock's session to PostgreSQL ended (another server ended it, the database "
             "restarted or the network failed): %s",
             msg);
        return;
    }
    while (l->in_flight && !PQisBusy(l->c)) {
        PGresult *r = PQgetResult(l->c);
        if (!r) {
            l->in_flight = false;
            break;
        }
        judge(l, r);
        PQclear(r);
    }
}

static int64_t stuck_ms(const ql_store_lock_t *l) {
    if (l->opts.lease_ms <= 0)
        return 10000;
    return l->opts.lease_ms / 2 > 1000 ? l->opts.lease_ms / 2 : 1000;
}

void ql_store_lock_renew(ql_store_lock_t *l) {
    if (!l->held)
        return;
    pump(l);
    if (l->lost || l->in_flight)
        return;
    char epoch[24];
    snprintf(epoch, sizeof epoch, "%llu", (unsigned long long)l->epoch);
    const char *v[1] = {epoch};
    if (!PQsendQueryParams(l->c, renew_sql, 1, NULL, v, NULL, NULL, 0)) {
        char msg[256];
        copy_msg(msg, sizeof msg, PQerrorMessage(l->c));
        lose(l, "cannot send the lease renewal on the lock's session: %s", msg);
        return;
    }
    l->in_flight = true;
    l->sent_ms = mono_ms();
}

bool ql_store_lock_still_held(ql_store_lock_t *l, char *why, size_t cap) {
    if (!l->held) {
        if (why && cap)
            snprintf(why, cap, "the job engine lock is not held");
        return false;
    }
    pump(l);
    int64_t waited = mono_ms() - l->sent_ms;
    if (l->in_flight && waited > stuck_ms(l))
        lose(l,
             "PostgreSQL has not answered the lease renewal for %lld ms (the database or the "
             "network is unreachable); a standby may end this server's lock session once the "
             "lease is %lld ms old",
             (long long)waited, (long long)l->opts.lease_ms);
    if (l->lost && why && cap)
        snprintf(why, cap, "%s", l->why);
    return !l->lost;
}

void ql_store_lock_release(ql_store_lock_t *l) {
    if (!l->held)
        return;
    l->held = false;
    l->epoch = 0;
    /* A lost holding's session is closed: that frees whatever it might still hold. */
    if (l->lost || !drain(l, DRAIN_MS))
        close_session(l);
    else
        unlock(l);
    l->lost = false;
    l->why[0] = '\0';
}

int ql_store_lock_set_address(ql_store_lock_t *l, const char *address) {
    snprintf(l->address, sizeof l->address, "%s", address ? address : "");
    if (!l->held || l->lost)
        return 0;
    ql_txn_t *txn;
    int rc = ql_txn_begin(&l->s->base, true, &txn);
    if (rc)
        return rc;
    char rec[400];
    format_record(l, l->epoch, rec, sizeof rec);
    /* Fenced: a holding that is over must not overwrite its successor's record. */
    if ((rc = ql_fence_check(txn, l->epoch, NULL)) ||
        (rc = ql_meta_put_str(txn, "engine_holder", rec))) {
        ql_txn_abort(txn);
        return rc;
    }
    return ql_txn_commit(txn);
}

void ql_store_lock_close(ql_store_lock_t *l) {
    if (!l)
        return;
    ql_store_lock_release(l);
    close_session(l);
    free(l);
}

int pg_lock_open(ql_store_t *bs, const ql_store_lock_opts_t *opts, ql_store_lock_t **out,
                 ql_err_t *err) {
    pg_store_t *s = pgs(bs);
    ql_store_lock_t *l = calloc(1, sizeof *l);
    if (!l)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    l->s = s;
    if (opts)
        l->opts = *opts;
    snprintf(l->server_id, sizeof l->server_id, "%s",
             l->opts.server_id && l->opts.server_id[0] ? l->opts.server_id : "-");
    snprintf(l->address, sizeof l->address, "%s", l->opts.address ? l->opts.address : "");
    l->opts.server_id = l->server_id;
    l->opts.address = l->address;
    /* FNV-1a of the schema's name: 62 bits as two non-negative int4. */
    uint64_t h = 1469598103934665603ull;
    static const char tag[] = "qilin job engine lock:";
    for (const char *p = tag; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    for (const char *p = s->schema; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    snprintf(l->k1, sizeof l->k1, "%d", (int)(h >> 33));
    snprintf(l->k2, sizeof l->k2, "%d", (int)(h & 0x7fffffff));
    int rc = open_session(l, err);
    if (rc) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}
