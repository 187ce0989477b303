/*
 * The writer thread and group commit. See ql_writer.h for the design; the invariant this file
 * keeps is: a mutation's answer is queued only after mdb_txn_commit() of its batch returned,
 * and LMDB's commit returns only after its fsync.
 */
#include "base/ql_buf.h"
#include "storage/ql_writer.h"
#include "store_ops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct waiter waiter_t;

typedef struct mutation {
    bool passed; /* a lane took mutations queued after it: none may pass it again */
    ql_write_fn fn;
    void *arg;
    ql_write_done_cb done;
    waiter_t *waiter;   /* ql_writer_call: signalled directly, never through complete() */
    uint64_t queued_ns; /* when it was queued (uv_hrtime), for ql_writer_health */
    int status;
    ql_err_t err;
    struct mutation *next;
    size_t n_keys; /* its write keys (ql_writer.h, Lanes); none: every key */
    uint64_t keys[];
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

/* A set of write keys; `all` stands for every key. */
typedef struct keyset {
    uint64_t *k;
    size_t n, cap;
    bool all;
} keyset_t;

/* A lane: a thread applying one batch at a time (ql_writer.h, Lanes). Under the writer's lock. */
typedef struct lane {
    ql_writer_t *w;
    pthread_t thread;
    bool started;
    keyset_t busy;           /* the keys of the batch it applies; empty while idle */
    size_t n_applying;       /* mutations of that batch */
    uint64_t applying_since; /* queued_ns of that batch's oldest mutation */
} lane_t;

struct ql_writer {
    ql_store_t *store;
    ql_writer_opts_t opts;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    mqueue_t queue; /* submitted, not yet applied: FIFO */
    mqueue_t done;  /* committed, not yet answered */
    ql_writer_stats_t stats;
    size_t n_lanes; /* 1 in manual mode and on a store that runs one write transaction at once */
    lane_t lanes[QL_WRITER_LANES_MAX];
    keyset_t blocked; /* take_batch's: the keys of the mutations it passed over */
    /* health (under lock): see ql_writer_health */
    size_t n_queued;         /* mutations in queue */
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
 * Runs ms[0..n) in one write transaction, each in a nested transaction (a lone one in the
 * transaction itself), and commits once (synced). Returns the number of transactions committed.
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
        /* A lone mutation runs in the top-level transaction itself: its failure aborts that,
         * which leaves what a nested abort would (nothing), without the nested transaction's
         * cost (a SAVEPOINT and its RELEASE on PostgreSQL, a nested LMDB transaction). */
        ql_txn_t *child = top;
        if (n > 1 && (m->status = ql_txn_begin_nested(top, &child))) {
            ql_err_set(&m->err, m->status, "cannot begin a nested transaction: %s",
                       ql_strerror(m->status));
            transient |= m->status == QL_ETRANSIENT;
            continue;
        }
        m->status = m->fn(child, m->arg, &m->err);
        if (m->status) {
            if (child != top)
                ql_txn_abort(child);
            if (!m->err.code)
                ql_err_set(&m->err, m->status, "%s", ql_strerror(m->status));
        } else if (child != top && (m->status = ql_txn_commit(child))) {
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

/* Runs one batch (a list) on lane: see run_mutations. */
static void apply_batch(ql_writer_t *w, lane_t *lane, mutation_t *batch) {
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
    lane->n_applying = 0;
    lane->busy.n = 0;
    lane->busy.all = false;
    if (w->n_lanes > 1)
        pthread_cond_broadcast(&w->wake); /* what waited for this batch's keys may go now */
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

static bool keyset_meets(const keyset_t *set, const mutation_t *m) {
    if (set->all)
        return true;
    if (!m->n_keys)
        return set->n > 0; /* every key */
    for (size_t i = 0; i < m->n_keys; i++)
        for (size_t j = 0; j < set->n; j++)
            if (m->keys[i] == set->k[j])
                return true;
    return false;
}

/* Adds m's keys to set; without memory for them, set stands for every key (safe: it only
 * holds back more). */
static void keyset_add(keyset_t *set, const mutation_t *m) {
    if (set->all)
        return;
    if (!m->n_keys || QL_ARRAY_RESERVE(set->k, set->cap, set->n + m->n_keys, 16)) {
        set->all = true;
        return;
    }
    memcpy(set->k + set->n, m->keys, m->n_keys * sizeof *m->keys);
    set->n += m->n_keys;
}

static void keyset_free(keyset_t *set) {
    free(set->k);
    *set = (keyset_t){0};
}

/*
 * Takes the next batch for lane (under lock) and notes it as being applied there: the queued
 * mutations in order, up to max_batch, passing over each whose keys meet those of another
 * lane's batch or of a mutation passed over before it, so that no mutation overtakes an earlier
 * one it shares a key with (ql_writer.h, Lanes). A mutation is passed over once at most: the
 * next take stops at it, so it waits for one batch, not for a stream of others. With one lane
 * nothing is passed over: the queue's head.
 */
static mutation_t *take_batch(ql_writer_t *w, lane_t *lane) {
    if (w->n_lanes == 1) { /* the queue's head, without the keys' bookkeeping */
        mutation_t *batch = mq_take(&w->queue, w->opts.max_batch);
        size_t n = 0;
        for (mutation_t *m = batch; m; m = m->next)
            n++;
        w->n_queued -= n;
        lane->n_applying = n;
        if (batch)
            lane->applying_since = batch->queued_ns; /* the queue is FIFO: the oldest */
        return batch;
    }
    keyset_t *blocked = &w->blocked;
    blocked->n = 0;
    blocked->all = false;
    for (size_t i = 0; i < w->n_lanes; i++) {
        const keyset_t *b = &w->lanes[i].busy;
        if (&w->lanes[i] == lane || (!b->n && !b->all))
            continue;
        if (b->all || QL_ARRAY_RESERVE(blocked->k, blocked->cap, blocked->n + b->n, 16)) {
            blocked->all = true;
            break;
        }
        memcpy(blocked->k + blocked->n, b->k, b->n * sizeof *b->k);
        blocked->n += b->n;
    }
    /* Its share of the queue when other lanes are idle: they take the rest at once. */
    size_t idle = 0;
    for (size_t i = 0; i < w->n_lanes; i++)
        idle += !w->lanes[i].busy.n && !w->lanes[i].busy.all;
    size_t max = idle > 1 ? (w->n_queued + idle - 1) / idle : w->n_queued;
    if (max > w->opts.max_batch)
        max = w->opts.max_batch;
    mutation_t *batch = NULL, **tail = &batch, **link = &w->queue.head, *kept = NULL;
    mutation_t *passed = NULL; /* the last mutation left in the queue before one taken */
    size_t n = 0;
    while (*link && n < max) {
        mutation_t *m = *link;
        if (keyset_meets(blocked, m)) {
            if (m->passed)
                break; /* its turn: nothing more passes it */
            keyset_add(blocked, m);
            if (blocked->all)
                break;
            kept = m;
            link = &m->next;
            continue;
        }
        passed = kept;
        *link = m->next;
        if (w->queue.tail == m)
            w->queue.tail = kept;
        m->next = NULL;
        *tail = m;
        tail = &m->next;
        if (!n)
            lane->applying_since = m->queued_ns; /* the first taken is the oldest */
        keyset_add(&lane->busy, m);
        n++;
    }
    /* What this batch overtook (everything left in the queue up to `passed`) has been passed. */
    for (mutation_t *m = passed ? w->queue.head : NULL; m; m = m == passed ? NULL : m->next)
        m->passed = true;
    w->n_queued -= n;
    lane->n_applying = n;
    return batch;
}

static void *lane_main(void *arg) {
    lane_t *lane = arg;
    ql_writer_t *w = lane->w;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        mutation_t *batch = take_batch(w, lane);
        if (batch) {
            if (w->queue.head && w->n_lanes > 1)
                pthread_cond_signal(&w->wake); /* another lane may take what is left */
            pthread_mutex_unlock(&w->lock);
            apply_batch(w, lane, batch);
            pthread_mutex_lock(&w->lock);
            continue;
        }
        if (w->stopping && !w->queue.head)
            break; /* stopping and drained (what another lane still applies is its own) */
        pthread_cond_wait(&w->wake, &w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void stop_lanes(ql_writer_t *w) {
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    for (size_t i = 0; i < w->n_lanes; i++)
        if (w->lanes[i].started)
            pthread_join(w->lanes[i].thread, NULL);
}

uint64_t ql_writer_key(const ql_id_t *id) {
    uint64_t k;
    memcpy(&k, id->b + 8, sizeof k); /* the random half of a UUID (v4 or v7) */
    return k;
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
    /* Lanes only where write transactions of several sessions run at once: on LMDB a second
     * would wait for the first's commit at its begin. */
    w->n_lanes = 1;
    if (!w->opts.manual && store->ops->parallel_writes && w->opts.lanes > 1)
        w->n_lanes = w->opts.lanes < QL_WRITER_LANES_MAX ? w->opts.lanes : QL_WRITER_LANES_MAX;
    w->last_commit_ns = uv_hrtime();
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    for (size_t i = 0; i < w->n_lanes; i++)
        w->lanes[i].w = w;
    for (size_t i = 0; i < w->n_lanes && !w->opts.manual; i++) {
        int rc = pthread_create(&w->lanes[i].thread, NULL, lane_main, &w->lanes[i]);
        if (rc) {
            stop_lanes(w);
            pthread_cond_destroy(&w->wake);
            pthread_mutex_destroy(&w->lock);
            free(w);
            return -rc;
        }
        w->lanes[i].started = true;
    }
    *out = w;
    return 0;
}

void ql_writer_free(ql_writer_t *w) {
    if (!w)
        return;
    stop_lanes(w);
    if (w->opts.manual)
        ql_writer_flush(w);
    ql_writer_complete(w);
    for (size_t i = 0; i < w->n_lanes; i++)
        keyset_free(&w->lanes[i].busy);
    keyset_free(&w->blocked);
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
    return ql_writer_submit_keyed(w, NULL, 0, fn, arg, done);
}

int ql_writer_submit_keyed(ql_writer_t *w, const uint64_t *keys, size_t n_keys, ql_write_fn fn,
                           void *arg, ql_write_done_cb done) {
    mutation_t *m = calloc(1, sizeof *m + n_keys * sizeof *keys);
    if (!m)
        return UV_ENOMEM;
    if (n_keys)
        memcpy(m->keys, keys, n_keys * sizeof *keys);
    m->n_keys = n_keys;
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
        mutation_t *batch = take_batch(w, &w->lanes[0]);
        pthread_mutex_unlock(&w->lock);
        if (!batch)
            break;
        for (mutation_t *m = batch; m; m = m->next)
            applied++;
        apply_batch(w, &w->lanes[0], batch);
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
    out->pending = w->n_queued;
    uint64_t oldest = w->queue.head ? w->queue.head->queued_ns : 0;
    for (size_t i = 0; i < w->n_lanes; i++) {
        const lane_t *l = &w->lanes[i];
        out->pending += l->n_applying;
        if (l->n_applying && (!oldest || l->applying_since < oldest))
            oldest = l->applying_since;
    }
    if (oldest)
        out->oldest_pending_ms = age_ms(now, oldest);
    out->error = w->fail_code;
    if (w->fail_code) {
        snprintf(out->error_msg, sizeof out->error_msg, "%s", w->fail_msg);
        out->failing_ms = age_ms(now, w->fail_since_ns);
        out->failures = w->fail_count;
    }
    pthread_mutex_unlock(&w->lock);
}

size_t ql_writer_lanes(const ql_writer_t *w) {
    return w->n_lanes;
}

ql_store_t *ql_writer_store(ql_writer_t *w) {
    return w->store;
}
