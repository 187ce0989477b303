/*
 * The round trips of a PostgreSQL session (store_pg_int.h, docs/postgresql.md): commands whose
 * answer only matters when they fail (BEGIN, SAVEPOINT, RELEASE, ROLLBACK TO, the model lock,
 * CLOSE, and the deferred writes of pg_defer: step and output puts) are queued on the connection
 * and go out in libpq's pipeline mode with the next statement, in one round trip. A locking read
 * that needs a second statement's answer too sends both in one pipeline (pg_run_calls). The server
 * runs a pipeline's statements one after the other, in order, and skips the rest of it after an
 * error, so the statement after a model lock still runs under the lock, and after a failed
 * SAVEPOINT nothing of its level runs.
 *
 * Failures. A queued command's error is the error of the level that queued it (Q_LEVEL, when
 * that level sends it) or of the whole transaction (Q_TOP, Q_XID, or a Q_LEVEL command of
 * another level): the top level is then marked failed, so its COMMIT is not sent and every
 * mutation of the batch fails with the error, instead of a success being answered for a level
 * whose RELEASE failed. A deferred write is therefore sent by its own level: with the level's
 * next statement or at its end (pg_end_level), never for a level rolled back, and before a
 * nested level's SAVEPOINT (pg_txn_begin sends it first).
 */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The parameters of a deferred write, copied: values point into data. */
typedef struct pg_args {
    int n;
    const char *v[PG_MAX_PARAMS];
    int len[PG_MAX_PARAMS];
    int fmt[PG_MAX_PARAMS];
    char data[];
} pg_args_t;

static void queued_free(pg_queued_t *q, int n) {
    for (int i = 0; i < n; i++) {
        free(q[i].args);
        q[i].args = NULL;
    }
}

void pg_queue_clear(pg_conn_t *c) {
    queued_free(c->queued, c->n_queued);
    c->n_queued = 0;
}

bool pg_queue_has_writes(const pg_conn_t *c) {
    for (int i = 0; i < c->n_queued; i++)
        if (c->queued[i].stmt >= 0)
            return true;
    return false;
}

pg_txn_t *pg_top(pg_txn_t *t) {
    while (t->base.parent)
        t = pgt(t->base.parent);
    return t;
}

int pg_result_err(pg_txn_t *t, PGresult *r) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    int rc = PQstatus(t->conn->c) == CONNECTION_BAD || !r ? QL_EUNAVAILABLE : pg_sqlstate_err(st);
    if (getenv("QL_PG_DEBUG"))
        fprintf(stderr, "pg: %s (%s)\n", r ? PQresultErrorMessage(r) : PQerrorMessage(t->conn->c),
                st ? st : "-");
    t->failed = rc;
    return rc;
}

/* The results of one pipeline: steps of them, then the sync. The first error found is kept in
 * first_err and err_r; the results of the calls (their steps in out_step) in out. */
#define PG_CALLS_MAX 2
typedef struct {
    int first_err;               /* step of the first error, -1: none */
    PGresult *err_r;             /* its result (NULL: the connection failed) */
    int out_step[PG_CALLS_MAX];  /* the steps of the calls, -1: none */
    PGresult *out[PG_CALLS_MAX]; /* their results */
    char xid[32];
    int xid_step;
    int none_err; /* the first error is a deferred write that returned no row: this one */
} pipe_res_t;

/* q[0..n): the queued commands, the pipeline's first steps. */
static void read_results(PGconn *c, const pg_queued_t *q, int n, int steps, pipe_res_t *pr) {
    bool lost = false;
    for (int i = 0; i < steps && !lost; i++) {
        PGresult *r = PQgetResult(c);
        if (!r) {
            lost = true;
            break;
        }
        /* Each statement's results end with a NULL (bounded: one statement, one result). */
        for (int k = 0; k < 4; k++) {
            PGresult *x = PQgetResult(c);
            if (!x)
                break;
            PQclear(x);
        }
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
            if (pr->first_err < 0) {
                pr->first_err = i;
                pr->err_r = r;
                r = NULL;
            }
        } else if (i < n && q[i].none_err && PQntuples(r) == 0) {
            /* The server ran it (and what followed); its level fails as if it had refused. */
            if (pr->first_err < 0) {
                pr->first_err = i;
                pr->none_err = q[i].none_err;
            }
        } else if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
            if (i == pr->xid_step && PQntuples(r) == 1)
                snprintf(pr->xid, sizeof pr->xid, "%s", PQgetvalue(r, 0, 0));
            for (int k = 0; k < PG_CALLS_MAX; k++)
                if (i == pr->out_step[k]) {
                    pr->out[k] = r;
                    r = NULL;
                }
        }
        PQclear(r);
    }
    if (lost) {
        if (pr->first_err < 0)
            pr->first_err = steps - 1;
        return;
    }
    PGresult *s = PQgetResult(c); /* the sync */
    if (!s || PQresultStatus(s) != PGRES_PIPELINE_SYNC) {
        if (pr->first_err < 0)
            pr->first_err = steps - 1;
    }
    PQclear(s);
}

static void clear_outs(pipe_res_t *pr) {
    for (int k = 0; k < PG_CALLS_MAX; k++)
        PQclear(pr->out[k]);
}

/* Sends the queued commands and the calls (each prepared first when the connection has not yet),
 * in one pipeline. Returns the number of steps, -1 when a send failed. */
static int send_all(pg_conn_t *pc, const pg_queued_t *q, int n, const pg_call_t *calls, int ncalls,
                    bool *prep, pipe_res_t *pr) {
    PGconn *c = pc->c;
    static const pg_params_t none;
    int steps = 0;
    bool ok = PQenterPipelineMode(c);
    for (int i = 0; ok && i < n; i++, steps++) {
        const char *key = q[i].sql;
        const pg_args_t *a = q[i].args;
        char name[16];
        if (q[i].stmt >= 0) {
            snprintf(name, sizeof name, "q%d", q[i].stmt);
            ok = PQsendQueryPrepared(c, name, a->n, a->v, a->len, a->fmt, 1);
        } else {
            ok = q[i].lock ? PQsendQueryPrepared(c, PG_LOCK_STMT, 1, &key, NULL, NULL, 0)
                           : PQsendQueryParams(c, q[i].sql, 0, NULL, NULL, NULL, NULL, 0);
        }
        if (q[i].kind == Q_XID)
            pr->xid_step = i;
    }
    for (int k = 0; ok && k < ncalls; k++) {
        const pg_call_t *call = &calls[k];
        const pg_params_t *p = call->p ? call->p : &none;
        prep[k] = call->name && !pg_prepared_has(pc, call->prep_bit);
        if (prep[k] && (ok = PQsendPrepare(c, call->name, call->sql, 0, NULL)))
            steps++;
        ok =
            ok &&
            (call->name
                 ? PQsendQueryPrepared(c, call->name, p->n, p->v, p->len, p->fmt, call->format)
                 : PQsendQueryParams(c, call->sql, p->n, NULL, p->v, p->len, p->fmt, call->format));
        if (ok)
            pr->out_step[k] = steps++;
    }
    ok = ok && PQpipelineSync(c);
    return ok ? steps : -1;
}

/* Sends the queue, then calls[0..ncalls) (none: only the queue), in one pipeline, and reads the
 * answers: res[k] gets the result of calls[k]. */
static int pipeline(pg_txn_t *t, const pg_call_t *calls, int ncalls, PGresult **res) {
    pg_conn_t *pc = t->conn;
    PGconn *c = pc->c;
    pg_txn_t *top = pg_top(t);
    int n = pc->n_queued;
    pg_queued_t q[PG_QUEUE_MAX];
    memcpy(q, pc->queued, (size_t)n * sizeof *q);
    pc->n_queued = 0;
    top->begun = true;
    pipe_res_t pr = {.first_err = -1, .xid_step = -1, .out_step = {-1, -1}};
    bool prep[PG_CALLS_MAX] = {false};
    int steps = send_all(pc, q, n, calls, ncalls, prep, &pr);
    queued_free(q, n);
    bool ok = steps >= 0;
    if (ok)
        read_results(c, q, n, steps, &pr);
    else
        pr.first_err = n; /* a send failed: the transaction with it */
    if (!PQexitPipelineMode(c) && pr.first_err < 0)
        pr.first_err = steps - 1; /* answers left unread: the connection is dropped at its end */
    if (pr.xid[0])
        snprintf(top->xid, sizeof top->xid, "%s", pr.xid);
    if (pr.first_err < 0) {
        for (int k = 0; k < ncalls; k++) {
            if (prep[k])
                pg_prepared_set(pc, calls[k].prep_bit);
            if (res)
                res[k] = pr.out[k];
            else
                PQclear(pr.out[k]);
        }
        return 0;
    }
    clear_outs(&pr);
    int rc = pr.none_err ? (t->failed = pr.none_err) : pg_result_err(t, pr.err_r);
    PQclear(pr.err_r);
    /* A queued command of the transaction, or of another level, failed: so does the transaction
     * (a level that was answered as applied may not have been). A lost connection fails it too. */
    int e = pr.first_err;
    if (e >= n || !ok || rc == QL_EUNAVAILABLE) {
        if (rc == QL_EUNAVAILABLE)
            top->failed = rc;
    } else if (q[e].kind != Q_LEVEL || q[e].level != t->level) {
        top->failed = rc;
    }
    return rc;
}

int pg_run(pg_txn_t *t, const pg_call_t *call, PGresult **res) {
    if (res)
        *res = NULL;
    if (t->failed)
        return t->failed;
    pg_conn_t *pc = t->conn;
    bool prepared = !call->name || pg_prepared_has(pc, call->prep_bit);
    if (pc->n_queued || !prepared)
        return pipeline(t, call, 1, res);
    /* Nothing queued: the statement alone, without the pipeline's extra messages. */
    pg_top(t)->begun = true;
    static const pg_params_t none;
    const pg_params_t *p = call->p ? call->p : &none;
    PGresult *r =
        call->name ? PQexecPrepared(pc->c, call->name, p->n, p->v, p->len, p->fmt, call->format)
                   : PQexecParams(pc->c, call->sql, p->n, NULL, p->v, p->len, p->fmt, call->format);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        int rc = pg_result_err(t, r);
        PQclear(r);
        if (rc == QL_EUNAVAILABLE)
            pg_top(t)->failed = rc;
        return rc;
    }
    if (res)
        *res = r;
    else
        PQclear(r);
    return 0;
}

int pg_run_calls(pg_txn_t *t, const pg_call_t *calls, int ncalls, PGresult **res) {
    for (int k = 0; k < ncalls; k++)
        res[k] = NULL;
    if (ncalls < 1 || ncalls > PG_CALLS_MAX)
        return QL_EINVAL; /* a caller's bug */
    if (t->failed)
        return t->failed;
    return pipeline(t, calls, ncalls, res);
}

int pg_flush(pg_txn_t *t) {
    if (!t->conn->n_queued)
        return 0;
    return pipeline(t, NULL, 0, NULL);
}

int pg_queue(pg_txn_t *t, const char *sql, pg_qkind_t kind) {
    pg_conn_t *pc = t->conn;
    if (strlen(sql) >= sizeof pc->queued[0].sql)
        return QL_EINVAL; /* a caller's bug: never cut a command short */
    if (pc->n_queued == PG_QUEUE_MAX) {
        int rc = pipeline(t, NULL, 0, NULL);
        if (rc)
            return rc;
    }
    pg_queued_t *q = &pc->queued[pc->n_queued++];
    snprintf(q->sql, sizeof q->sql, "%s", sql);
    q->kind = (uint8_t)kind;
    q->lock = false;
    q->level = t->level;
    q->stmt = -1;
    q->none_err = 0;
    q->args = NULL;
    return 0;
}

int pg_queue_args(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p, int none_err) {
    size_t total = 0;
    for (int i = 0; i < p->n; i++)
        total += p->v[i] ? (size_t)p->len[i] : 0;
    pg_args_t *a = malloc(sizeof *a + total);
    if (!a)
        return UV_ENOMEM;
    a->n = p->n;
    char *at = a->data;
    for (int i = 0; i < p->n; i++) {
        a->len[i] = p->len[i];
        a->fmt[i] = p->fmt[i];
        a->v[i] = p->v[i] ? at : NULL;
        if (p->v[i]) {
            memcpy(at, p->v[i], (size_t)p->len[i]);
            at += p->len[i];
        }
    }
    int rc = pg_queue(t, "", Q_LEVEL);
    if (rc) {
        free(a);
        return rc;
    }
    pg_queued_t *q = &t->conn->queued[t->conn->n_queued - 1];
    q->stmt = (int)stmt;
    q->none_err = none_err;
    q->args = a;
    return 0;
}

int pg_queue_lock(pg_txn_t *t, int64_t key) {
    char k[24];
    snprintf(k, sizeof k, "%lld", (long long)key);
    int rc = pg_queue(t, k, Q_LEVEL);
    if (!rc)
        t->conn->queued[t->conn->n_queued - 1].lock = true;
    return rc;
}

int pg_end_level(pg_txn_t *t, bool keep) {
    pg_conn_t *pc = t->conn;
    pg_txn_t *parent = pgt(t->base.parent);
    char sp[32];
    snprintf(sp, sizeof sp, "SAVEPOINT s%u", t->level);
    int at = -1, own = 0;
    for (int i = 0; i < pc->n_queued; i++) {
        if (pc->queued[i].kind == Q_LEVEL && pc->queued[i].level == t->level) {
            own++;
            if (!strcmp(pc->queued[i].sql, sp))
                at = i;
        }
    }
    /* Its SAVEPOINT never went out: nothing of it reached the server (what was queued after
     * the SAVEPOINT is this level's), unless it is kept with a lock queued after it. */
    if (at >= 0 && (!keep || own == 1)) {
        queued_free(pc->queued + at, pc->n_queued - at);
        pc->n_queued = at;
        return 0;
    }
    if (!keep) /* its deferred writes would be rolled back: they are not sent */
        for (int i = 0; i < pc->n_queued; i++)
            if (pc->queued[i].stmt >= 0 && pc->queued[i].level >= t->level) {
                free(pc->queued[i].args);
                memmove(pc->queued + i, pc->queued + i + 1,
                        (size_t)(pc->n_queued - i - 1) * sizeof *pc->queued);
                pc->n_queued--;
                i--;
            }
    int rc = 0;
    if (keep && own && (rc = pipeline(t, NULL, 0, NULL))) /* a lock the parent keeps */
        keep = false;
    char sql[80];
    int qrc = 0;
    if (!keep) {
        snprintf(sql, sizeof sql, "ROLLBACK TO SAVEPOINT s%u", t->level);
        qrc = pg_queue(parent, sql, Q_TOP);
    }
    snprintf(sql, sizeof sql, "RELEASE SAVEPOINT s%u", t->level);
    if (!qrc)
        qrc = pg_queue(parent, sql, Q_TOP);
    /* A rollback goes out at once (it is rare): the locks the level took are released when
     * its abort returns, as the caller may wait before its next statement. */
    if (!qrc && !keep)
        qrc = pipeline(parent, NULL, 0, NULL);
    if (qrc)
        pg_top(parent)->failed = qrc;
    return rc;
}

bool pg_conn_settle(pg_conn_t *c) {
    pg_queue_clear(c);
    if (!c->rollback_sent)
        return PQstatus(c->c) == CONNECTION_OK;
    c->rollback_sent = false;
    bool ok = true;
    for (int k = 0; k < 4; k++) {
        PGresult *r = PQgetResult(c->c);
        if (!r)
            break;
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            ok = false;
        PQclear(r);
    }
    return ok && PQstatus(c->c) == CONNECTION_OK && PQtransactionStatus(c->c) == PQTRANS_IDLE;
}
