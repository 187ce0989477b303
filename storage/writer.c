/*
 * The writer thread and group commit. See ql_writer.h for the design; the invariant this file
 * keeps is: a mutation's answer is queued only after mdb_txn_commit() of its batch returned,
 * and LMDB's commit returns only after its fsync.
 */
#include "storage/ql_writer.h"
#include "store_ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct waiter waiter_t;

typedef struct mutation {
    ql_write_fn fn;
    void *arg;
    ql_write_done_cb done;
    waiter_t *waiter;   /* ql_writer_call: signalled directly, never through complete() */
    uint64_t queued_ns; /* when it was queued (uv_hrtime), for ql_writer_health */
    int status;
    ql_err_t err;
    struct mutation *next;
} mutation_t;

struct waiter {
    pthread_cond_t cond;
    bool answered;
    int status;
    ql_err_t err;
};

typedef struct {
    mutation_t *head, *tail;
} mqueue_t;

struct ql_writer {
    ql_store_t *store;
    ql_writer_opts_t opts;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    mqueue_t queue; /* submitted, not yet applied */
    mqueue_t done;  /* committed, not yet answered */
    ql_writer_stats_t stats;
    /* health (under lock): see ql_writer_health */
    size_t n_queued;         /* mutations in queue */
    size_t n_applying;       /* mutations of the batch being applied */
    uint64_t applying_since; /* queued_ns of that batch's oldest mutation */
    uint64_t last_commit_ns; /* the last commit, or the writer's start before the first */
    int fail_code;           /* the store error writes fail with, 0 when they work */
    char fail_msg[512];      /* its message */
    uint64_t fail_since_ns;  /* the first failure since the last clean commit */
    uint64_t fail_count;     /* mutations failed by store errors since then */
};

bool ql_writer_store_error(int code) {
    switch (code) {
    case QL_EMAPFULL:
    case QL_EDISKFULL:
    case QL_EMAPSIZE:
    case QL_ETRANSIENT:
    case UV_EIO:
    case UV_ENOSPC:
    case UV_ENOMEM:
        return true;
    default:
        return false;
    }
}

static void mq_push(mqueue_t *q, mutation_t *m) {
    m->next = NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
}

static mutation_t *mq_take(mqueue_t *q, size_t max) {
    mutation_t *head = q->head, *m = head;
    if (!head)
        return NULL;
    size_t n = 1;
    while (m->next && n < max) {
        m = m->next;
        n++;
    }
    q->head = m->next;
    if (!q->head)
        q->tail = NULL;
    m->next = NULL;
    return head;
}

/*
 * Runs ms[0..n) in one write transaction, each in a nested transaction, and commits once
 * (synced). Returns the number of transactions committed.
 *
 * A nested transaction that hits MDB_MAP_FULL is aborted and fails alone: LMDB sets its error
 * flag on the child only and restores the parent's page state on abort, so the parent goes on.
 * But the mutations that did fit can fill the map so far that the top-level commit, which needs
 * a few pages of its own (the free list), fails with MDB_MAP_FULL too. Failing all of them would
 * refuse work that fits, and the next batch would fill the map and fail the same way. So on a
 * full map the mutations that had succeeded are run again in two halves, recursively: in the
 * end a mutation fails with QL_EMAPFULL only if it does not fit after those committed before it.
 */
static uint64_t run_mutations(ql_writer_t *w, mutation_t **ms, size_t n, int tries) {
    ql_txn_t *top;
    int rc = ql_txn_begin(w->store, true, &top);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            ms[i]->status = ql_err_set(&ms[i]->err, rc, "cannot begin a write transaction: %s",
                                       ql_strerror(rc));
        return 0;
    }
    /* The batch in its order, for a rerun after a transient failure (the loop below compacts
     * ms to the mutations that applied). */
    mutation_t *one[1], **orig = n == 1 ? one : malloc(n * sizeof *orig);
    if (orig)
        memcpy(orig, ms, n * sizeof *ms);
    bool transient = false;
    size_t applied = 0;
    for (size_t i = 0; i < n; i++) {
        mutation_t *m = ms[i];
        ql_err_clear(&m->err);
        ql_txn_t *child;
        m->status = ql_txn_begin_nested(top, &child);
        if (m->status) {
            ql_err_set(&m->err, m->status, "cannot begin a nested transaction: %s",
                       ql_strerror(m->status));
            transient |= m->status == QL_ETRANSIENT;
            continue;
        }
        m->status = m->fn(child, m->arg, &m->err);
        if (m->status) {
            ql_txn_abort(child);
            if (!m->err.code)
                ql_err_set(&m->err, m->status, "%s", ql_strerror(m->status));
        } else if ((m->status = ql_txn_commit(child))) {
            ql_err_set(&m->err, m->status, "cannot apply the change: %s", ql_strerror(m->status));
        } else {
            ms[applied++] = m; /* the failed ones keep their answer and drop out of ms */
        }
        transient |= m->status == QL_ETRANSIENT;
    }
    /* A lock wait that timed out or a deadlock (a shared store, docs/postgresql.md): the batch
     * runs again in halves, as on a full map, since batches of several models deadlock with
     * each other where lone mutations do not; a lone mutation is retried a few times, then fails
     * alone with QL_ETRANSIENT. Every mutation may run more than once (ql_writer.h). */
    if (transient && orig) {
        ql_txn_abort(top);
        memcpy(ms, orig, n * sizeof *ms);
        if (orig != one)
            free(orig);
        if (n > 1) {
            size_t half = n / 2;
            return run_mutations(w, ms, half, 0) + run_mutations(w, ms + half, n - half, 0);
        }
        if (tries < 3)
            return run_mutations(w, ms, 1, tries + 1);
        return 0; /* it keeps its QL_ETRANSIENT answer */
    }
    if (orig != one)
        free(orig);
    if (applied == 0) {
        ql_txn_abort(top); /* nothing to make durable */
        return 0;
    }
    rc = ql_txn_commit(top);
    if (rc == 0)
        return 1;
    if ((rc == QL_EMAPFULL || rc == QL_ETRANSIENT) && applied > 1) {
        size_t half = applied / 2;
        return run_mutations(w, ms, half, 0) + run_mutations(w, ms + half, applied - half, 0);
    }
    if (rc == QL_ETRANSIENT && tries < 3)
        return run_mutations(w, ms, applied, tries + 1);
    /* Nothing of these is durable: each fails with the commit error. */
    for (size_t i = 0; i < applied; i++)
        ms[i]->status = ql_err_set(&ms[i]->err, rc, "cannot commit: %s", ql_strerror(rc));
    return 0;
}

/* Runs one batch (a list): see run_mutations. */
static void apply_batch(ql_writer_t *w, mutation_t *batch) {
    size_t n = 0, failed = 0;
    for (mutation_t *m = batch; m; m = m->next)
        n++;
    mutation_t *one[1], **ms = n == 1 ? one : malloc(n * sizeof *ms);
    uint64_t committed = 0;
    if (ms) {
        size_t i = 0;
        for (mutation_t *m = batch; m; m = m->next)
            ms[i++] = m;
        committed = run_mutations(w, ms, n, 0);
        if (ms != one)
            free(ms);
    } else {
        for (mutation_t *m = batch; m; m = m->next)
            m->status = ql_err_set(&m->err, UV_ENOMEM, "out of memory");
    }
    const mutation_t *store_failed = NULL; /* the first one the store could not take */
    for (mutation_t *m = batch; m; m = m->next) {
        failed += m->status != 0;
        if (!store_failed && ql_writer_store_error(m->status))
            store_failed = m;
    }
    uint64_t now = uv_hrtime();

    pthread_mutex_lock(&w->lock);
    w->n_applying = 0;
    if (committed)
        w->last_commit_ns = now;
    /* Writes fail from the first store error on, until a batch commits with none: a batch that
     * commits only because its mutations were too small to hit the full map does not count. */
    if (store_failed) {
        if (!w->fail_code)
            w->fail_since_ns = now;
        w->fail_code = store_failed->status;
        snprintf(w->fail_msg, sizeof w->fail_msg, "%s",
                 store_failed->err.msg[0] ? store_failed->err.msg
                                          : ql_strerror(store_failed->status));
        w->fail_count += failed;
    } else if (committed) {
        w->fail_code = 0;
        w->fail_msg[0] = '\0';
        w->fail_count = 0;
    }
    w->stats.batches += committed;
    w->stats.mutations += n;
    w->stats.failed += failed;
    if (n > w->stats.max_batch)
        w->stats.max_batch = n;
    bool queued_answers = false;
    mutation_t *direct = NULL, **direct_tail = &direct;
    for (mutation_t *m = batch, *next; m; m = next) {
        next = m->next;
        if (m->waiter) {
            m->waiter->status = m->status;
            m->waiter->err = m->err;
            m->waiter->answered = true;
            pthread_cond_broadcast(&m->waiter->cond);
            free(m);
        } else if (!w->opts.manual && !w->opts.notify) {
            *direct_tail = m;
            direct_tail = &m->next;
            m->next = NULL;
        } else {
            mq_push(&w->done, m);
            queued_answers = true;
        }
    }
    pthread_mutex_unlock(&w->lock);

    for (mutation_t *m = direct, *next; m; m = next) {
        next = m->next;
        if (m->done)
            m->done(m->arg, m->status, &m->err);
        free(m);
    }
    if (queued_answers && !w->opts.manual && w->opts.notify)
        w->opts.notify(w->opts.notify_arg);
}

/* Takes the next batch (under lock) and notes it as being applied. */
static mutation_t *take_batch(ql_writer_t *w) {
    mutation_t *batch = mq_take(&w->queue, w->opts.max_batch);
    size_t n = 0;
    for (mutation_t *m = batch; m; m = m->next)
        n++;
    w->n_queued -= n;
    w->n_applying = n;
    if (batch)
        w->applying_since = batch->queued_ns; /* the queue is FIFO: the oldest */
    return batch;
}

static void *writer_main(void *arg) {
    ql_writer_t *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->queue.head && !w->stopping)
            pthread_cond_wait(&w->wake, &w->lock);
        mutation_t *batch = take_batch(w);
        if (!batch)
            break; /* stopping and drained */
        pthread_mutex_unlock(&w->lock);
        apply_batch(w, batch);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int ql_writer_new(ql_store_t *store, const ql_writer_opts_t *opts, ql_writer_t **out) {
    *out = NULL;
    ql_writer_t *w = calloc(1, sizeof *w);
    if (!w)
        return UV_ENOMEM;
    w->store = store;
    if (opts)
        w->opts = *opts;
    if (!w->opts.max_batch)
        w->opts.max_batch = 4096;
    /* A backend's own cap (PostgreSQL: 48, its subtransaction cache, docs/postgresql.md). */
    if (store->ops->max_batch && w->opts.max_batch > store->ops->max_batch)
        w->opts.max_batch = store->ops->max_batch;
    w->last_commit_ns = uv_hrtime();
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (!w->opts.manual) {
        int rc = pthread_create(&w->thread, NULL, writer_main, w);
        if (rc) {
            pthread_cond_destroy(&w->wake);
            pthread_mutex_destroy(&w->lock);
            free(w);
            return -rc;
        }
        w->thread_started = true;
    }
    *out = w;
    return 0;
}

void ql_writer_free(ql_writer_t *w) {
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    if (w->thread_started)
        pthread_join(w->thread, NULL);
    else
        ql_writer_flush(w);
    ql_writer_complete(w);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

static int enqueue(ql_writer_t *w, mutation_t *m) {
    pthread_mutex_lock(&w->lock);
    if (w->stopping && !m->waiter) {
        pthread_mutex_unlock(&w->lock);
        return QL_ESHUTDOWN;
    }
    m->queued_ns = uv_hrtime();
    mq_push(&w->queue, m);
    w->n_queued++;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

int ql_writer_submit(ql_writer_t *w, ql_write_fn fn, void *arg, ql_write_done_cb done) {
    mutation_t *m = calloc(1, sizeof *m);
    if (!m)
        return UV_ENOMEM;
    m->fn = fn;
    m->arg = arg;
    m->done = done;
    int rc = enqueue(w, m);
    if (rc)
        free(m);
    return rc;
}

int ql_writer_call(ql_writer_t *w, ql_write_fn fn, void *arg, ql_err_t *err) {
    waiter_t wt = {.answered = false};
    pthread_cond_init(&wt.cond, NULL);
    mutation_t *m = calloc(1, sizeof *m);
    if (!m) {
        pthread_cond_destroy(&wt.cond);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    m->fn = fn;
    m->arg = arg;
    m->waiter = &wt;
    pthread_mutex_lock(&w->lock);
    bool stopping = w->stopping;
    pthread_mutex_unlock(&w->lock);
    if (stopping) {
        free(m);
        pthread_cond_destroy(&wt.cond);
        return ql_err_set(err, QL_ESHUTDOWN, "the store is shutting down");
    }
    enqueue(w, m);
    if (w->opts.manual) {
        ql_writer_flush(w);
    } else {
        pthread_mutex_lock(&w->lock);
        while (!wt.answered)
            pthread_cond_wait(&wt.cond, &w->lock);
        pthread_mutex_unlock(&w->lock);
    }
    pthread_cond_destroy(&wt.cond);
    if (err)
        *err = wt.err;
    return wt.status;
}

void ql_writer_complete(ql_writer_t *w) {
    for (;;) {
        pthread_mutex_lock(&w->lock);
        mutation_t *list = mq_take(&w->done, SIZE_MAX);
        pthread_mutex_unlock(&w->lock);
        if (!list)
            return;
        for (mutation_t *m = list, *next; m; m = next) {
            next = m->next;
            if (m->done)
                m->done(m->arg, m->status, &m->err);
            free(m);
        }
    }
}

size_t ql_writer_flush(ql_writer_t *w) {
    size_t applied = 0;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        mutation_t *batch = take_batch(w);
        pthread_mutex_unlock(&w->lock);
        if (!batch)
            break;
        for (mutation_t *m = batch; m; m = m->next)
            applied++;
        apply_batch(w, batch);
        ql_writer_complete(w);
    }
    return applied;
}

bool ql_writer_pending(ql_writer_t *w) {
    pthread_mutex_lock(&w->lock);
    bool pending = w->queue.head != NULL;
    pthread_mutex_unlock(&w->lock);
    return pending;
}

bool ql_writer_is_manual(const ql_writer_t *w) {
    return w->opts.manual;
}

void ql_writer_get_stats(ql_writer_t *w, ql_writer_stats_t *out) {
    pthread_mutex_lock(&w->lock);
    *out = w->stats;
    pthread_mutex_unlock(&w->lock);
}

static int64_t age_ms(uint64_t now, uint64_t then) {
    return now > then ? (int64_t)((now - then) / 1000000) : 0;
}

void ql_writer_health(ql_writer_t *w, ql_writer_health_t *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&w->lock);
    uint64_t now = uv_hrtime();
    out->commits = w->stats.batches;
    out->since_commit_ms = age_ms(now, w->last_commit_ns);
    out->pending = w->n_queued + w->n_applying;
    if (w->n_applying)
        out->oldest_pending_ms = age_ms(now, w->applying_since);
    else if (w->queue.head)
        out->oldest_pending_ms = age_ms(now, w->queue.head->queued_ns);
    out->error = w->fail_code;
    if (w->fail_code) {
        snprintf(out->error_msg, sizeof out->error_msg, "%s", w->fail_msg);
        out->failing_ms = age_ms(now, w->fail_since_ns);
        out->failures = w->fail_count;
    }
    pthread_mutex_unlock(&w->lock);
}

ql_store_t *ql_writer_store(ql_writer_t *w) {
    return w->store;
}
