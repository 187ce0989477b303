/*
 * The dispatcher's decisions kept in the store, so that a standby, a query server and a
 * restarted server answer GET /models/{model}/auto_segment_build/status with the master's latest
 * decision instead of UNKNOWN (docs/rest.md, Qilin extensions).
 *
 * DESIGN. A decision is one meta value ("dispatch.decision.<model id>", a line of text) in both
 * backends. The master writes only decisions that changed: record() marks a decision dirty when
 * its signature (every field but the evaluation time and the from-cache flag) differs from the
 * one last written, and the end of the scan writes the dirty ones through the writer, in
 * mutations of at most PERSIST_BATCH decisions, each checking the master's fencing token in its
 * transaction (a master that lost the lock writes nothing). A scan of unchanged decisions
 * writes nothing. The stored evaluation time is therefore the time the decision was reached. A
 * write that fails leaves its decisions dirty for the next scan. The first scan after a start
 * writes every decision once (the signatures are in memory only).
 */
#include "base/ql_buf.h"
#include "dispatch_int.h"
#include "storage/ql_meta.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_PREFIX "dispatch.decision."
#define PERSIST_BATCH 512
#define TEXT_MAX (QL_DECISION_MAX_RELATED * (QL_ID_STR_LEN + 1) + 512)

/* ---- the text form ---- */

/* version, state, reason, occurrence, start, end, evaluated_at, from_cache, job, n_related,
 * related (comma list or -), message (the rest of the line) */
static int encode(const ql_decision_t *d, char *buf, size_t cap) {
    char job[QL_ID_STR_LEN + 1] = "-", rel[QL_DECISION_MAX_RELATED * (QL_ID_STR_LEN + 1) + 2] = "-";
    ql_id_t zero = {0};
    if (!ql_id_eq(&d->job, &zero))
        ql_id_format(&d->job, job);
    size_t off = 0;
    for (size_t i = 0; i < d->n_related && i < QL_DECISION_MAX_RELATED; i++) {
        if (i)
            rel[off++] = ',';
        ql_id_format(&d->related[i], rel + off);
        off += QL_ID_STR_LEN;
    }
    int n = snprintf(buf, cap,
                     "1\t%s\t%s\t%" PRId64 "\t%" PRId64 "\t%" PRId64 "\t%" PRId64
                     "\t%d\t%s\t%zu\t%s\t%s",
                     ql_cycle_state_name(d->state), ql_skip_reason_name(d->reason), d->occurrence,
                     d->target_start, d->target_end, d->evaluated_at, d->from_cache ? 1 : 0, job,
                     d->n_related, rel, d->message);
    return n < 0 || (size_t)n >= cap ? QL_ETOOBIG : 0;
}

/* The next tab-separated field of *p (NUL-terminated in place), or NULL. */
static char *field(char **p) {
    if (!*p)
        return NULL;
    char *f = *p, *tab = strchr(f, '\t');
    if (tab) {
        *tab = '\0';
        *p = tab + 1;
    } else {
        *p = NULL;
    }
    return f;
}

static int decode(char *text, ql_decision_t *d) {
    char *p = text, *f[11];
    for (int i = 0; i < 11; i++)
        if (!(f[i] = field(&p)))
            return QL_ECORRUPT;
    d->reason = QL_SKIP_NONE; /* written as "" */
    if (strcmp(f[0], "1") != 0 || ql_cycle_state_parse(f[1], &d->state) ||
        (f[2][0] && ql_skip_reason_parse(f[2], &d->reason)))
        return QL_ECORRUPT;
    d->occurrence = strtoll(f[3], NULL, 10);
    d->target_start = strtoll(f[4], NULL, 10);
    d->target_end = strtoll(f[5], NULL, 10);
    d->evaluated_at = strtoll(f[6], NULL, 10);
    d->from_cache = f[7][0] == '1';
    d->job = (ql_id_t){0};
    if (strcmp(f[8], "-") != 0 && ql_id_parse(f[8], &d->job))
        return QL_ECORRUPT;
    d->n_related = (size_t)strtoull(f[9], NULL, 10);
    size_t k = 0;
    for (char *r = f[10]; strcmp(f[10], "-") != 0 && r && k < QL_DECISION_MAX_RELATED; k++) {
        char *comma = strchr(r, ',');
        if (comma)
            *comma = '\0';
        if (ql_id_parse(r, &d->related[k]))
            return QL_ECORRUPT;
        r = comma ? comma + 1 : NULL;
    }
    snprintf(d->message, sizeof d->message, "%s", p ? p : "");
    return 0;
}

static void meta_key(const ql_id_t *model, char *buf) {
    memcpy(buf, KEY_PREFIX, sizeof KEY_PREFIX - 1);
    ql_id_format(model, buf + sizeof KEY_PREFIX - 1);
}

int ql_dispatch_decision_load(ql_txn_t *txn, const ql_id_t *model, ql_decision_t *out) {
    char key[sizeof KEY_PREFIX + QL_ID_STR_LEN], text[TEXT_MAX];
    meta_key(model, key);
    int rc = ql_meta_get_str(txn, key, text, sizeof text);
    if (rc)
        return rc;
    ql_decision_t d = *out;
    if ((rc = decode(text, &d)))
        return rc;
    d.model = *model;
    *out = d;
    return 0;
}

int ql_dispatch_decision_forget(ql_txn_t *txn, const ql_id_t *model) {
    char key[sizeof KEY_PREFIX + QL_ID_STR_LEN];
    meta_key(model, key);
    return ql_meta_delete(txn, key);
}

/* ---- what changed ---- */

/* One 64-bit word into the running hash (a multiply and a shift: cheap enough for every model of
 * every scan, which is when record() asks). */
static inline uint64_t mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static uint64_t mix_id(uint64_t h, const ql_id_t *id) {
    uint64_t w[2];
    memcpy(w, id->b, 16);
    return mix(mix(h, w[0]), w[1]);
}

/* A hash of what the stored form says but the evaluation time and the from-cache flag, word by
 * word. */
static uint64_t signature(const drec_t *r) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = mix(h, (uint64_t)r->state << 32 | (uint64_t)r->reason << 8 | r->n_related);
    h = mix(mix(mix(h, (uint64_t)r->occurrence), (uint64_t)r->start), (uint64_t)r->end);
    h = mix_id(h, &r->job);
    for (uint32_t i = 0; i < r->n_related && i < QL_DECISION_MAX_RELATED; i++)
        h = mix_id(h, &r->related[i]);
    if (r->msg) {
        size_t n = strlen(r->msg);
        for (size_t i = 0; i < n; i += 8) {
            uint64_t w = 0;
            memcpy(&w, r->msg + i, n - i < 8 ? n - i : 8);
            h = mix(h, w);
        }
        h = mix(h, n);
    }
    return h | 1; /* 0 means "never written" */
}

void ql_dispatch_mark(ql_dispatcher_t *d, drec_t *r) {
    if (r->dirty || signature(r) == r->saved_sig)
        return;
    if (QL_ARRAY_RESERVE(d->dirty, d->cap_dirty, d->n_dirty + 1, 256))
        return; /* out of memory: the next scan tries again */
    r->dirty = true;
    d->dirty[d->n_dirty++] = (uint32_t)(r - d->decisions);
}

/* ---- the write ---- */

typedef struct persist_op {
    ql_dispatcher_t *d;
    uint64_t fence;
    size_t n;
    ql_id_t model[PERSIST_BATCH];
    uint64_t sig[PERSIST_BATCH];
    char *text[PERSIST_BATCH];
} persist_op_t;

static void op_free(persist_op_t *op) {
    for (size_t i = 0; i < op->n; i++)
        free(op->text[i]);
    free(op);
}

/* May run twice (ql_writer.h): every put is idempotent. */
static int persist_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    persist_op_t *op = arg;
    int rc = ql_fence_check(txn, op->fence, err);
    for (size_t i = 0; !rc && i < op->n; i++) {
        char key[sizeof KEY_PREFIX + QL_ID_STR_LEN];
        meta_key(&op->model[i], key);
        if ((rc = ql_meta_put_str(txn, key, op->text[i])))
            ql_err_set(err, rc, "dispatch decision: %s", ql_strerror(rc));
    }
    return rc;
}

static void persist_done(void *arg, int status, const ql_err_t *err) {
    persist_op_t *op = arg;
    ql_dispatcher_t *d = op->d;
    if (!d->freed) {
        if (status)
            ql_log(d->opts.log, QL_LOG_WARN, "dispatcher",
                   "cannot keep decisions in the store (the next scan tries again) count=%zu "
                   "reason=%s",
                   op->n, err && err->msg[0] ? err->msg : ql_strerror(status));
        for (size_t i = 0; !status && i < op->n; i++) {
            drec_t *r = ql_dispatch_decision_find(d, &op->model[i]);
            if (r)
                r->saved_sig = op->sig[i];
        }
        d->stats.decisions_written += status ? 0 : op->n;
    }
    op_free(op);
    ql_dispatch_answered(d, true);
}

/* Takes up to PERSIST_BATCH dirty decisions off the end of the list into one write. */
static int persist_batch(ql_dispatcher_t *d) {
    persist_op_t *op = calloc(1, sizeof *op);
    if (!op)
        return UV_ENOMEM;
    op->d = d;
    op->fence = d->opts.fence;
    while (d->n_dirty && op->n < PERSIST_BATCH) {
        drec_t *r = &d->decisions[d->dirty[--d->n_dirty]];
        r->dirty = false;
        ql_decision_t pub;
        char text[TEXT_MAX];
        if (ql_dispatcher_decision(d, &r->model, &pub) || encode(&pub, text, sizeof text))
            continue;
        if (!(op->text[op->n] = strdup(text)))
            break;
        op->model[op->n] = r->model;
        op->sig[op->n] = signature(r);
        op->n++;
    }
    if (op->n == 0) {
        op_free(op);
        return 0;
    }
    d->persisting++;
    if (ql_writer_submit(d->opts.writer, persist_fn, op, persist_done)) {
        d->persisting--;
        op_free(op);
        return QL_ESHUTDOWN;
    }
    return 0;
}

void ql_dispatch_persist(ql_dispatcher_t *d) {
    if (!d->opts.writer) {
        d->n_dirty = 0;
        return;
    }
    while (d->n_dirty)
        if (persist_batch(d))
            break;
    /* What could not be queued stays unwritten until it changes again or the server restarts;
     * the list is emptied so that it never grows without bound. */
    for (size_t i = 0; i < d->n_dirty; i++)
        d->decisions[d->dirty[i]].dirty = false;
    d->n_dirty = 0;
    if (d->persisting && d->opts.manual_flush)
        ql_writer_flush(d->opts.writer);
}
