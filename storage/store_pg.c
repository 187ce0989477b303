/*
 * The PostgreSQL backend: connections, transactions, savepoints, errors, the schema, and its
 * backend table (store_ops.h). The records are in store_pg_records.c (steps and outputs, with
 * the step cache, in store_pg_steps.c), fsck in store_pg_fsck.c, the model lock and the fence
 * epoch in store_pg_locks.c, wake-ups (NOTIFY and the change session) in store_pg_changes.c, the
 * pipelining of a session's commands in store_pg_pipe.c.
 *
 * DESIGN (docs/postgresql.md, docs/design/multi-host.md).
 * - Connections: a mutex-guarded pool of at most pool_size sessions, each with search_path set
 *   to the schema and lock_timeout set. A transaction holds one connection from begin to its end;
 *   nested transactions are savepoints on the parent's connection. Read transactions run on any
 *   thread (one thread at a time per transaction), as on LMDB.
 * - Isolation: read transactions are REPEATABLE READ READ ONLY snapshots. Write transactions are
 *   READ COMMITTED plus a locking discipline that gives every model LMDB's single-writer
 *   semantics: the first access to a model's segments or live jobs takes a transaction-scoped
 *   advisory lock on the model (kept per savepoint level, since ROLLBACK TO releases it); point
 *   reads lock their row (jobs and segments FOR UPDATE, projects and models FOR SHARE); the fence
 *   epoch is read FOR SHARE once per transaction. Uniqueness and the live-job rule come from
 *   constraints with ON CONFLICT DO NOTHING, so an expected conflict never aborts a savepoint.
 * - Round trips: BEGIN, SAVEPOINT, RELEASE, the model lock, CLOSE and the step and output puts
 *   are queued on the connection and sent in one pipeline with the next statement
 *   (store_pg_pipe.c, which says how their failures fail a level or the whole transaction); a
 *   top-level ROLLBACK is not waited for. A locking read of a job reads its steps in the same
 *   round trip (store_pg_steps.c).
 * - Errors: a statement error aborts the (sub)transaction on the server; the level is marked
 *   failed and refuses further statements, its commit fails, and its abort rolls back to its
 *   savepoint, leaving the parent usable.
 * - Durability: COMMIT with synchronous_commit on returns after the WAL flush. A connection lost
 *   during COMMIT is resolved with pg_xact_status() of the transaction's id on a new connection
 *   before the caller is answered: committed is success, aborted is QL_ETRANSIENT (the writer
 *   reruns the batch), unknown is QL_EUNAVAILABLE.
 */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

/* ---- errors (pg_sqlstate_err: store_pg_params.c) ---- */

/* ---- statements on a transaction's connection ---- */

int pg_exec(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p, PGresult **res) {
    char name[16];
    snprintf(name, sizeof name, "q%d", (int)stmt);
    pg_call_t call = {
        .name = name, .prep_bit = (unsigned)stmt, .sql = pg_stmt_sql[stmt], .p = p, .format = 1};
    return pg_run(t, &call, res);
}

int pg_defer(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p) {
    if (t->failed || !pg_prepared_has(t->conn, (unsigned)stmt))
        return pg_exec(t, stmt, p, NULL); /* prepared by this run, deferred from the next */
    return pg_queue_args(t, stmt, p, 0);
}

int pg_defer_row(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p, int none_err) {
    if (!t->failed && pg_prepared_has(t->conn, (unsigned)stmt))
        return pg_queue_args(t, stmt, p, none_err);
    PGresult *r;
    int rc = pg_exec(t, stmt, p, &r); /* prepared by this run, deferred from the next */
    if (rc)
        return rc;
    bool none = PQntuples(r) == 0;
    PQclear(r);
    return none ? none_err : 0;
}

int pg_exec_pair(pg_txn_t *t, pg_stmt_t s1, const pg_params_t *p1, pg_stmt_t s2,
                 const pg_params_t *p2, PGresult **res) {
    char n1[16], n2[16];
    snprintf(n1, sizeof n1, "q%d", (int)s1);
    snprintf(n2, sizeof n2, "q%d", (int)s2);
    pg_call_t calls[2] = {
        {.name = n1, .prep_bit = (unsigned)s1, .sql = pg_stmt_sql[s1], .p = p1, .format = 1},
        {.name = n2, .prep_bit = (unsigned)s2, .sql = pg_stmt_sql[s2], .p = p2, .format = 1},
    };
    return pg_run_calls(t, calls, 2, res);
}

int pg_cmd(pg_txn_t *t, const char *sql) {
    int rc = pg_flush(t);
    if (rc)
        return rc;
    PGresult *r = PQexec(t->conn->c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = pg_result_err(t, r);
    PQclear(r);
    return rc;
}

/* A cursor's rows per FETCH. Its DECLARE and first FETCH go in one round trip, and that FETCH
 * takes fewer rows: a walk often stops early (the fetcher wants a pass's worth of READY jobs, a
 * listing a page), and each row fetched costs the server a heap read and the row's bytes. */
#define WALK_FIRST_ROWS 32
#define WALK_ROWS 256

/* Walks that are small by nature (one model's overlaps or live jobs, one job's steps, one
 * project's models, one model's segments) run as one prepared statement whose whole result is
 * received before the first callback, which leaves the connection free for the callbacks'
 * queries at a cost of one round trip. The others (every job in a state, the recent list, every
 * project) may be long: they use a cursor (WALK_FIRST_ROWS, then WALK_ROWS per FETCH). */
_Static_assert(S_COUNT + W_COUNT <= PG_PREPARED_BITS,
               "one bit of pg_conn_t.prepared per statement, walk");

static const bool walk_small[W_COUNT] = {
    [W_MODELS] = true,           [W_SEGMENTS] = true, [W_SEG_OVERLAP] = true, [W_JOB_LIVE] = true,
    [W_JOB_LIVE_OVERLAP] = true, [W_STEPS] = true,    [W_RANGE_PROBE] = true,
};

static int walk_all(pg_txn_t *t, pg_walk_t w, const pg_params_t *p, pg_row_fn row, void *arg) {
    char name[16];
    snprintf(name, sizeof name, "w%d", (int)w);
    pg_call_t call = {.name = name,
                      .prep_bit = S_COUNT + (unsigned)w,
                      .sql = pg_walk_sql[w],
                      .p = p,
                      .format = 1};
    PGresult *r;
    int rc = pg_run(t, &call, &r);
    if (rc)
        return rc;
    for (int i = 0; i < PQntuples(r) && !rc; i++) {
        rc = row(r, i, arg);
        if (!rc && t->failed)
            rc = t->failed;
    }
    PQclear(r);
    return rc > 0 ? 0 : rc;
}

int pg_walk(pg_txn_t *t, pg_walk_t w, const pg_params_t *p, pg_row_fn row, void *arg) {
    if (t->failed)
        return t->failed;
    static const pg_params_t none;
    if (!p)
        p = &none;
    if (walk_small[w])
        return walk_all(t, w, p, row, arg);
    pg_txn_t *top = t;
    while (top->base.parent)
        top = pgt(top->base.parent);
    int rc;
    if (top->lookups) { /* a cursor lives in a transaction: the lookups from here on share it */
        top->lookups = false;
        if ((rc = pg_queue(top, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", Q_TOP)))
            return rc;
    }
    unsigned id = top->cursors++;
    char decl[1024], first[64], fetch[64], close_[64];
    snprintf(decl, sizeof decl, "DECLARE qc%u BINARY NO SCROLL CURSOR FOR %s", id, pg_walk_sql[w]);
    snprintf(first, sizeof first, "FETCH %d FROM qc%u", WALK_FIRST_ROWS, id);
    snprintf(fetch, sizeof fetch, "FETCH %d FROM qc%u", WALK_ROWS, id);
    snprintf(close_, sizeof close_, "CLOSE qc%u", id);
    pg_call_t calls[2] = {{.sql = decl, .p = p, .format = 1}, {.sql = first, .format = 1}};
    PGresult *res[2];
    if ((rc = pg_run_calls(t, calls, 2, res)))
        return rc;
    PQclear(res[0]);
    PGresult *r = res[1];
    int want = WALK_FIRST_ROWS;
    for (;;) {
        int n = PQntuples(r);
        for (int i = 0; i < n && !rc; i++)
            rc = row(r, i, arg);
        PQclear(r);
        if (!rc && t->failed) /* a callback's statement failed this level */
            rc = t->failed;
        if (rc || n < want)
            break;
        pg_call_t call = {.sql = fetch, .format = 1};
        if ((rc = pg_run(t, &call, &r)))
            return rc;
        want = WALK_ROWS;
    }
    if (!t->failed) { /* sent with the next statement */
        int crc = pg_queue(t, close_, Q_TOP);
        if (!rc)
            rc = crc;
    }
    return rc > 0 ? 0 : rc;
}

/* ---- connections ---- */

/* A pool session with bounds on a silent network (docs/postgresql.md, The job engine lock):
 * a statement sent into a partition fails once it has gone unacknowledged for
 * tcp_user_timeout, instead of when the kernel gives up (about 15 minutes), and an idle
 * session is probed by keepalives. The server's loop thread reads through these sessions (REST
 * requests, the scheduler's poll, a master's put-back of its jobs as it steps down), so without
 * the bound one blocked read would stop a cut-off master from ever noticing that it must step
 * down. 2 s is under half the default lease. Keywords before dbname: the URL (expanded from
 * dbname) overrides them. */
static PGconn *connect_pool_session(const pg_store_t *s) {
    static const char *const kw[] = {"keepalives",
                                     "keepalives_idle",
                                     "keepalives_interval",
                                     "keepalives_count",
                                     "tcp_user_timeout",
                                     "connect_timeout",
                                     "dbname",
                                     NULL};
    const char *const val[] = {"1", "5", "2", "3", "2000", "2", s->conninfo, NULL};
    return PQconnectdbParams(kw, val, 1);
}

/* Whether a set-up command of a new session (its result r, cleared here) succeeded; if not,
 * the session is closed and err says why. */
static bool session_set_up(const pg_store_t *s, PGconn *c, PGresult *r, ql_err_t *err) {
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        ql_err_set(err, QL_EUNAVAILABLE, "cannot set up a session on %s: %s", s->masked,
                   PQresultErrorMessage(r));
    PQclear(r);
    if (!ok)
        PQfinish(c);
    return ok;
}

int pg_conn_open(pg_store_t *s, pg_conn_t **out, ql_err_t *err) {
    *out = NULL;
    PGconn *c = connect_pool_session(s);
    if (!c)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    if (PQstatus(c) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c));
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = '\0';
        PQfinish(c);
        return ql_err_set(err, QL_EUNAVAILABLE, "cannot connect to the metadata store %s: %s",
                          s->masked, msg);
    }
    /* The application name carries the schema, so an operator (or a test) can tell which
     * store's sessions are which in pg_stat_activity. */
    char app[64];
    snprintf(app, sizeof app, "qilin/%s", s->schema);
    char *app_lit = PQescapeLiteral(c, app, strlen(app));
    char sql[768];
    snprintf(sql, sizeof sql,
             "SET search_path TO %s, public; SET lock_timeout = %lld; SET synchronous_commit = "
             "on; SET application_name = %s; SET client_min_messages = warning",
             s->schema_ident, (long long)s->lock_timeout_ms, app_lit ? app_lit : "'qilin'");
    PQfreemem(app_lit);
    if (!session_set_up(s, c, PQexec(c, sql), err) ||
        !session_set_up(s, c, PQprepare(c, PG_LOCK_STMT, PG_LOCK_SQL, 0, NULL), err))
        return QL_EUNAVAILABLE;
    pg_conn_t *pc = calloc(1, sizeof *pc);
    if (!pc) {
        PQfinish(c);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    pc->c = c;
    *out = pc;
    return 0;
}

void pg_conn_close(pg_conn_t *c) {
    if (c) {
        PQfinish(c->c);
        free(c);
    }
}

static int pool_get(pg_store_t *s, pg_conn_t **out) {
    pthread_mutex_lock(&s->pool_lock);
    for (;;) {
        if (s->idle) {
            pg_conn_t *c = s->idle;
            s->idle = c->next;
            pthread_mutex_unlock(&s->pool_lock);
            c->next = NULL;
            if (pg_conn_settle(c)) {
                *out = c;
                return 0;
            }
            pg_conn_close(c); /* broken while idle: open a fresh one */
            pthread_mutex_lock(&s->pool_lock);
            s->n_open--;
            continue;
        }
        if (s->n_open < s->pool_size) {
            s->n_open++;
            pthread_mutex_unlock(&s->pool_lock);
            ql_err_t err = {0};
            int rc = pg_conn_open(s, out, &err);
            if (rc) {
                pthread_mutex_lock(&s->pool_lock);
                s->n_open--;
                pthread_cond_signal(&s->pool_cond);
                pthread_mutex_unlock(&s->pool_lock);
            }
            return rc;
        }
        pthread_cond_wait(&s->pool_cond, &s->pool_lock);
    }
}

static void pool_put(pg_store_t *s, pg_conn_t *c) {
    /* A connection whose ROLLBACK was sent without waiting is settled at its next use. */
    bool broken = PQstatus(c->c) != CONNECTION_OK || PQpipelineStatus(c->c) != PQ_PIPELINE_OFF ||
                  (!c->rollback_sent && PQtransactionStatus(c->c) != PQTRANS_IDLE);
    pg_queue_clear(c);
    pthread_mutex_lock(&s->pool_lock);
    if (broken) {
        s->n_open--;
    } else {
        c->next = s->idle;
        s->idle = c;
    }
    pthread_cond_signal(&s->pool_cond);
    pthread_mutex_unlock(&s->pool_lock);
    if (broken)
        pg_conn_close(c);
}

/* ---- transactions ---- */

/* Ends a top-level transaction without waiting for the answer, which the connection's next
 * user reads (pg_conn_settle): the server has ended it (locks and snapshot released) by the
 * time the answer arrives either way. */
static void rollback_nowait(pg_conn_t *c) {
    pg_queue_clear(c);
    if (PQsendQuery(c->c, "ROLLBACK"))
        c->rollback_sent = true;
}

static void txn_free(pg_txn_t *t) {
    store_txn_fini(&t->base);
    free(t->locked);
    for (size_t i = 0; i < t->n_rows; i++)
        PQclear(t->rows[i].steps);
    free(t->rows);
    free(t->woke);
    free(t);
}

/* lookups: a read transaction without BEGIN (ql_txn_begin_lookups). */
static int txn_begin(ql_store_t *s, ql_txn_t *parent, bool write, bool lookups, ql_txn_t **out) {
    *out = NULL;
    if (write && s->read_only)
        return UV_EROFS;
    pg_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return UV_ENOMEM;
    t->base.ops = s->ops;
    t->base.store = s;
    t->base.parent = parent;
    t->base.write = write;
    int rc;
    if (parent) {
        pg_txn_t *pt = pgt(parent);
        if (pt->failed) {
            rc = pt->failed;
            free(t);
            return rc;
        }
        /* A deferred write of the parent goes out first, so that its failure is the parent's
         * and not the whole transaction's (a queued command of another level fails that). */
        if (pg_queue_has_writes(pt->conn) && (rc = pg_flush(pt))) {
            free(t);
            return rc;
        }
        t->conn = pt->conn;
        t->level = pt->level + 1;
        char sql[32]; /* sent with the level's first statement, or never */
        snprintf(sql, sizeof sql, "SAVEPOINT s%u", t->level);
        if ((rc = pg_queue(t, sql, Q_LEVEL))) {
            pt->failed = rc;
            free(t);
            return rc;
        }
        *out = &t->base;
        return 0;
    }
    if ((rc = pool_get(pgs(s), &t->conn))) {
        free(t);
        return rc;
    }
    /* The BEGIN is queued: it goes out with the first statement, in the same round trip (a
     * transaction that runs none sends nothing). A write whose client stops (SIGSTOP) between
     * statements would keep its row locks, the fence row's among them, and so hold up a new
     * master's epoch raise: the server ends the session once it idles inside the transaction
     * past the stall bound. The write's transaction id is read for an ambiguous commit. */
    if (write) {
        char xid[120]; /* the id, and SET LOCAL of the timeout, in one statement */
        snprintf(xid, sizeof xid,
                 "SELECT pg_current_xact_id()::text, set_config('idle_in_transaction_session_"
                 "timeout', '%lld', true)",
                 (long long)pgs(s)->idle_write_ms);
        if (!(rc = pg_queue(t, "BEGIN ISOLATION LEVEL READ COMMITTED", Q_TOP)))
            rc = pg_queue(t, xid, Q_XID);
    } else if (!(t->lookups = lookups)) {
        rc = pg_queue(t, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", Q_TOP);
    }
    if (rc) {
        pool_put(pgs(s), t->conn);
        free(t);
        return rc;
    }
    *out = &t->base;
    return 0;
}

static int pg_txn_begin(ql_store_t *s, ql_txn_t *parent, bool write, ql_txn_t **out) {
    return txn_begin(s, parent, write, false, out);
}

static int pg_txn_begin_lookups(ql_store_t *s, ql_txn_t **out) {
    return txn_begin(s, NULL, false, true, out);
}

/* A connection lost during COMMIT: asks a new one how the transaction ended, waiting while
 * it is still in progress (its backend has not noticed the loss yet). */
static int resolve_commit(pg_txn_t *t) {
    pg_store_t *s = pgs(t->base.store);
    pg_conn_t *c;
    ql_err_t err = {0};
    for (int attempt = 0; attempt < 100; attempt++) {
        if (pg_conn_open(s, &c, &err)) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL); /* the database is restarting: poll, bounded */
            continue;
        }
        const char *v[1] = {t->xid};
        PGresult *r = PQexecParams(c->c, pg_stmt_sql[S_XACT_STATUS], 1, NULL, v, NULL, NULL, 0);
        int rc = QL_EUNAVAILABLE;
        bool again = false;
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
            const char *st = PQgetvalue(r, 0, 0);
            if (!strcmp(st, "committed"))
                rc = 0;
            else if (!strcmp(st, "aborted"))
                rc = QL_ETRANSIENT;
            else
                again = true; /* in progress */
        }
        PQclear(r);
        pg_conn_close(c);
        if (!again)
            return rc;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return QL_EUNAVAILABLE;
}

static int pg_txn_commit(ql_txn_t *bt) {
    pg_txn_t *t = pgt(bt);
    pg_store_t *s = pgs(bt->store);
    int rc;
    if (bt->parent) {
        pg_txn_t *pt = pgt(bt->parent);
        if ((rc = t->failed)) {
            pg_end_level(t, false);
        } else if (!(rc = pg_end_level(t, true))) {
            pg_merge_locks(pt, t);
            pg_rows_merge(pt, t);
            pg_changes_merge(pt, t);
            if (t->epoch_cached && !pt->epoch_cached) {
                pt->epoch_cached = true;
                pt->epoch_rc = t->epoch_rc;
                pt->epoch = t->epoch;
            }
        }
        txn_free(t);
        return rc;
    }
    if (bt->write && !t->failed && pg_queue_has_writes(t->conn))
        pg_flush(t);               /* its failure fails the transaction, which then rolls back */
    if (!t->begun || t->lookups) { /* no transaction to commit or roll back */
        rc = t->failed;
    } else if (!bt->write || t->failed) {
        rc = t->failed;
        rollback_nowait(t->conn);
    } else {
        /* COMMIT, after the NOTIFY of the jobs it wakes and what is still queued (a RELEASE) */
        char tail[PG_COMMIT_SQL_MAX], sql[PG_COMMIT_SQL_MAX + PG_QUEUE_MAX * 128];
        size_t n = 0;
        for (int i = 0; i < t->conn->n_queued; i++)
            n += (size_t)snprintf(sql + n, sizeof sql - n, "%s; ", t->conn->queued[i].sql);
        pg_queue_clear(t->conn);
        snprintf(sql + n, sizeof sql - n, "%s", pg_changes_commit_sql(t, tail));
        PGresult *r = PQexec(t->conn->c, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(r), "COMMIT"))
            rc = 0;
        else if (PQstatus(t->conn->c) == CONNECTION_BAD)
            rc = resolve_commit(t);
        else
            rc = st == PGRES_COMMAND_OK ? QL_ETRANSIENT : pg_result_err(t, r);
        PQclear(r);
    }
    pool_put(s, t->conn);
    if (!rc)
        store_run_commit_hook(bt);
    txn_free(t);
    return rc;
}

static void pg_txn_abort(ql_txn_t *bt) {
    pg_txn_t *t = pgt(bt);
    if (bt->parent) {
        pg_end_level(t, false);
        txn_free(t); /* with the epoch it kept: its share lock went with the rollback */
        return;
    }
    if (t->begun && !t->lookups)
        rollback_nowait(t->conn);
    pool_put(pgs(bt->store), t->conn);
    txn_free(t);
}

/* ---- the store ---- */

static void pg_close(ql_store_t *bs) {
    pg_store_t *s = pgs(bs);
    pg_changes_close(s);
    if (s->drop_at_close && s->schema_ident)
        pg_schema_drop(s);
    while (s->idle) {
        pg_conn_t *c = s->idle;
        s->idle = c->next;
        pg_conn_close(c);
    }
    pthread_mutex_destroy(&s->pool_lock);
    pthread_cond_destroy(&s->pool_cond);
    free(s->conninfo);
    free(s->masked);
    free(s->schema);
    free(s->announcement);
    PQfreemem(s->schema_ident);
    store_base_fini(bs);
    free(s);
}

int ql_store_pg_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err) {
    *out = NULL;
    pg_store_t *s = calloc(1, sizeof *s);
    if (!s || store_base_init(&s->base, &ql_pg_ops, opts)) {
        free(s);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_cond_init(&s->pool_cond, NULL);
    s->listen_fd = -1;
    s->pool_size = opts->pg_pool_size ? opts->pg_pool_size : 6;
    s->lock_timeout_ms = opts->pg_lock_timeout_ms > 0 ? opts->pg_lock_timeout_ms : 2000;
    s->idle_write_ms =
        opts->writer_stall_ms > 0 ? opts->writer_stall_ms : QL_STORE_DEFAULT_WRITER_STALL_MS;
    s->drop_at_close = opts->pg_drop_at_close;
    s->require_sync = opts->pg_require_sync_replication;
    s->conninfo = strdup(opts->url);
    s->masked = pg_mask_password(opts->url);
    s->schema = strdup(opts->pg_schema && opts->pg_schema[0] ? opts->pg_schema : "qilin");
    if (!s->conninfo || !s->masked || !s->schema) {
        pg_close(&s->base);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    pg_changes_init(s);
    /* The identifier is quoted by libpq, which needs a connection for the encoding. */
    PGconn *c = PQconnectdb(s->conninfo);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", c ? PQerrorMessage(c) : "out of memory");
        size_t n = strlen(msg);
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = '\0';
        PQfinish(c);
        ql_err_set(err, QL_EUNAVAILABLE, "qilin.storage.url: cannot connect to %s: %s", s->masked,
                   msg);
        pg_close(&s->base);
        return QL_EUNAVAILABLE;
    }
    s->schema_ident = PQescapeIdentifier(c, s->schema, strlen(s->schema));
    PQfinish(c);
    if (!s->schema_ident) {
        pg_close(&s->base);
        return ql_err_set(err, QL_EINVAL, "qilin.storage.pg.schema: not a valid name");
    }
    int rc = pg_schema_setup(s, err);
    if (rc) {
        pg_close(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

static int pg_maintain(ql_store_t *s, int *cleared) {
    (void)s;
    if (cleared)
        *cleared = 0;
    return 0;
}

static int pg_stat(ql_store_t *bs, ql_store_stat_t *out) {
    ql_txn_t *t;
    int rc = ql_txn_begin(bs, false, &t);
    if (rc)
        return rc;
    pg_call_t call = {.sql = "SELECT pg_database_size(current_database())"};
    PGresult *r;
    if (!(rc = pg_run(pgt(t), &call, &r))) {
        out->map_size = 0;
        out->used_bytes = out->file_bytes = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    ql_txn_abort(t);
    return rc;
}

const store_ops_t ql_pg_ops = {
    .name = "postgresql",
    /* PostgreSQL caches 64 subtransaction ids per backend (PGPROC_MAX_CACHED_SUBXIDS); past that
     * a transaction "suboverflows" and every session's snapshots slow down. Each mutation is a
     * savepoint, so a batch stays below the cache with room to spare. */
    .max_batch = 48,
    .parallel_writes = true,
    .spans_hosts = true,
    .close = pg_close,
    .maintain = pg_maintain,
    .stat = pg_stat,
    .fsck = pg_fsck,
    .lock_open = pg_lock_open,
    .changes_listen = pg_changes_listen,
    .changes_fd = pg_changes_fd,
    .changes_drain = pg_changes_drain,
    .announce = pg_servers_announce,
    .servers_foreach = pg_servers_foreach,
    .txn_begin = pg_txn_begin,
    .txn_begin_lookups = pg_txn_begin_lookups,
    .txn_commit = pg_txn_commit,
    .txn_abort = pg_txn_abort,
    .meta_get_u64 = pg_meta_get_u64,
    .meta_put_u64 = pg_meta_put_u64,
    .fence_claim = pg_fence_claim,
    .meta_get_str = pg_meta_get_str,
    .meta_put_str = pg_meta_put_str,
    .meta_delete = pg_meta_delete,
    .metadata_generation = pg_metadata_generation,
    .project_get = pg_project_get,
    .project_put = pg_project_put,
    .project_foreach = pg_project_foreach,
    .project_count = pg_project_count,
    .model_get = pg_model_get,
    .model_get_for_probe = pg_model_get_for_probe,
    .model_exists = pg_model_exists,
    .model_segment_exists = pg_model_segment_exists,
    .model_find = pg_model_find,
    .model_find_with_project = pg_model_find_with_project,
    .model_put = pg_model_put,
    .model_foreach = pg_model_foreach,
    .model_count = pg_model_count,
    .segment_get = pg_segment_get,
    .segment_exists = pg_segment_exists,
    .segment_put = pg_segment_put,
    .segment_delete = pg_segment_delete,
    .segment_foreach = pg_segment_foreach,
    .segment_foreach_overlapping = pg_segment_foreach_overlapping,
    .segment_count = pg_segment_count,
    .job_get = pg_job_get,
    .job_get_many = pg_job_get_many,
    .job_put = pg_job_put,
    .job_delete = pg_job_delete,
    .project_delete = pg_project_delete,
    .model_delete = pg_model_delete,
    .job_foreach_state = pg_job_foreach_state,
    .job_foreach_state_ref = pg_job_foreach_state_ref,
    .job_foreach_state_target = pg_job_foreach_state_target,
    .job_foreach_model = pg_job_foreach_model,
    .job_foreach_live = pg_job_foreach_live,
    .job_foreach_live_overlapping = pg_job_foreach_live_overlapping,
    .probe_targets = pg_probe_targets,
    .probe_range = pg_probe_range,
    .job_foreach_recent = pg_job_foreach_recent,
    .job_count = pg_job_count,
    .step_get = pg_step_get,
    .step_put = pg_step_put,
    .step_foreach = pg_step_foreach,
    .output_get = pg_output_get,
    .output_put = pg_output_put,
};
