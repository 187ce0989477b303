/* Retention: see ql_retention.h. */
#include "scheduler/ql_retention.h"

#include <stddef.h>
#include <stdlib.h>

struct ql_retention {
    ql_retention_opts_t opts;
    ql_timer_t timer;
    /* The batch in the writer: its threshold, and the ids the mutation deleted (written by the
     * mutation on the writer thread, read here once it is answered). */
    int64_t before;
    ql_id_t *ids;
    size_t n;
    bool pending;
    bool closing;      /* the owner freed r: nothing is armed again */
    bool timer_closed; /* and the timer's close completed: the last of it and the answer frees r */
    ql_retention_stats_t stats;
};

static void release(ql_retention_t *r) {
    free(r->ids);
    free(r);
}

static int purge_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    ql_retention_t *r = arg;
    r->n = 0; /* a mutation may run more than once (ql_writer.h): its outputs are written anew */
    int rc = ql_fence_check(txn, r->opts.fence, err);
    if (rc)
        return rc;
    size_t n = 0;
    if ((rc = ql_meta_purge_jobs(txn, r->before, r->opts.batch, r->ids, &n)))
        return ql_err_set(err, rc, "retention: cannot delete old jobs: %s", ql_strerror(rc));
    r->n = n;
    return 0;
}

static void sweep_cb(ql_timer_t *t, void *arg);

/* The deleted jobs' logs go once their records did (also while closing: they are gone). */
static void remove_logs(ql_retention_t *r) {
    for (size_t i = 0; i < r->n; i++) {
        int rc = ql_store_remove_job_logs(r->opts.store, &r->ids[i]);
        if (rc) {
            char id[QL_ID_STR_LEN + 1];
            ql_id_format(&r->ids[i], id);
            ql_log(r->opts.log, QL_LOG_WARN, "retention",
                   "cannot remove the step logs of deleted job %s: %s", id, ql_strerror(rc));
        }
    }
}

static void purge_done(void *arg, int status, const ql_err_t *err) {
    ql_retention_t *r = arg;
    r->pending = false;
    if (!status)
        remove_logs(r);
    if (r->closing) {
        if (r->timer_closed)
            release(r);
        return;
    }
    if (status) {
        r->stats.last_error = status;
        ql_log(r->opts.log, QL_LOG_WARN, "retention", "deleting old jobs failed: %s%s",
               err && err->msg[0] ? err->msg : ql_strerror(status),
               status == QL_EFENCED ? " (this server no longer holds the job engine lock: "
                                      "retention stops here)"
                                    : "; the next sweep tries again");
        if (status != QL_EFENCED)
            ql_timer_start(&r->timer, r->opts.interval_ms, sweep_cb, r);
        return;
    }
    r->stats.last_error = 0;
    if (r->n) {
        r->stats.removed += r->n;
        r->stats.batches++;
        ql_log(r->opts.log, QL_LOG_INFO, "retention",
               "deleted final jobs with their steps, outputs and logs count=%zu "
               "ended_before=%lld reason=\"older than "
               "kylin.garbage.storage.executable-survival-time-threshold\"",
               r->n, (long long)r->before);
    }
    if (r->n == r->opts.batch) {
        ql_timer_start(&r->timer, QL_RETENTION_BATCH_PAUSE_MS, sweep_cb, r);
        return;
    }
    r->stats.sweeps++;
    ql_timer_start(&r->timer, r->opts.interval_ms, sweep_cb, r);
}

static void sweep_cb(ql_timer_t *t, void *arg) {
    (void)t;
    ql_retention_t *r = arg;
    if (r->pending || r->closing)
        return;
    r->before = ql_clock_now_ms(r->opts.clock) - r->opts.survival_ms;
    r->pending = true;
    int rc = ql_writer_submit(r->opts.writer, purge_fn, r, purge_done);
    if (rc) {
        r->pending = false;
        if (rc != QL_ESHUTDOWN)
            ql_timer_start(&r->timer, r->opts.interval_ms, sweep_cb, r);
        return;
    }
    /* In manual mode the answer runs inside the flush; it re-arms the timer itself. */
    if (r->opts.manual_flush)
        ql_writer_flush(r->opts.writer);
}

int ql_retention_new(const ql_retention_opts_t *opts, ql_retention_t **out) {
    *out = NULL;
    if (!opts->store || !opts->writer || !opts->clock || opts->survival_ms < 0 ||
        opts->interval_ms < 0)
        return QL_EINVAL;
    ql_retention_t *r = calloc(1, sizeof *r);
    if (!r)
        return UV_ENOMEM;
    r->opts = *opts;
    if (!r->opts.batch)
        r->opts.batch = 100;
    if (!(r->ids = calloc(r->opts.batch, sizeof *r->ids))) {
        free(r);
        return UV_ENOMEM;
    }
    int rc = ql_timer_init(opts->clock, &r->timer);
    if (rc) {
        release(r);
        return rc;
    }
    *out = r;
    return 0;
}

void ql_retention_start(ql_retention_t *r) {
    ql_timer_start(&r->timer, 0, sweep_cb, r);
}

static void timer_closed(ql_timer_t *t) {
    ql_retention_t *r = (ql_retention_t *)(void *)((char *)t - offsetof(ql_retention_t, timer));
    r->timer_closed = true;
    if (!r->pending)
        release(r);
}

void ql_retention_free(ql_retention_t *r) {
    if (!r)
        return;
    r->closing = true;
    ql_timer_close(&r->timer, timer_closed);
}

void ql_retention_get_stats(const ql_retention_t *r, ql_retention_stats_t *out) {
    *out = r->stats;
}
