/*
 * The public store API (ql_store.h) over the backend table (store_ops.h): opening picks the
 * backend from the options, every other call is a one-line wrapper over the operation of the
 * store's or transaction's backend. What every backend shares lives here too: ids, the commit
 * hook, the transaction's decode zone, and the sorted overlap list.
 */
#include "store_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

/* Creates path and its missing parents 0750: the store, its lock and the step logs are the
 * server user's (and its group's, for an operator's tools), never every local user's. An existing
 * directory keeps its mode; the node warns when others may enter it. Both backends need it:
 * on PostgreSQL it still holds the step logs and the job engine lock file. */
static int mkdir_p(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return UV_ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0750) && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0750) && errno != EEXIST)
        return -errno;
    return 0;
}

int ql_store_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err) {
    *out = NULL;
    if (!opts || !opts->path || !opts->path[0])
        return ql_err_set(err, QL_EINVAL, "qilin.storage.path: no data directory given");
    int rc;
    if (!opts->read_only && (rc = mkdir_p(opts->path)))
        return ql_err_set(err, rc, "qilin.storage.path: cannot create %s: %s", opts->path,
                          ql_strerror(rc));
    if (opts->url && opts->url[0])
        return ql_store_pg_open(opts, out, err);
    return ql_store_lmdb_open(opts, out, err);
}

int store_base_init(ql_store_t *s, const store_ops_t *ops, const ql_store_opts_t *opts) {
    if (!(s->path = strdup(opts->path)))
        return UV_ENOMEM;
    s->ops = ops;
    pthread_mutex_init(&s->id_lock, NULL);
    s->read_only = opts->read_only;
    s->id_state = opts->id_seed;
    return 0;
}

void store_base_fini(ql_store_t *s) {
    pthread_mutex_destroy(&s->id_lock);
    free(s->path);
    s->path = NULL;
}

void store_txn_fini(ql_txn_t *t) {
    if (t->zone_ready)
        msgpack_zone_destroy(&t->zone);
    t->zone_ready = false;
    ql_buf_free(&t->buf);
}

msgpack_zone *ql_txn_zone(ql_txn_t *t) {
    if (!t->zone_ready) {
        if (!msgpack_zone_init(&t->zone, 4096))
            return NULL;
        t->zone_ready = true;
    }
    return &t->zone;
}

void store_run_commit_hook(ql_txn_t *t) {
    if (t->write && !t->parent && t->store->commit_hook)
        t->store->commit_hook(t->store->commit_hook_arg);
}

void ql_store_close(ql_store_t *s) {
    if (s)
        s->ops->close(s);
}

int ql_store_compact(ql_store_t *s, const char *dir) {
    return s->ops->compact ? s->ops->compact(s, dir) : UV_ENOTSUP;
}

const char *ql_store_path(const ql_store_t *s) {
    return s->path;
}

int ql_store_maintain(ql_store_t *s, int *cleared) {
    return s->ops->maintain(s, cleared);
}

bool ql_store_upgraded_from(const ql_store_t *s, uint64_t *major, uint64_t *minor) {
    *major = s->upgraded_major;
    *minor = s->upgraded_minor;
    return s->upgraded_major != 0;
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ql_store_new_id(ql_store_t *s, ql_id_t *out) {
    if (s->id_state) {
        pthread_mutex_lock(&s->id_lock);
        uint64_t a = splitmix64(&s->id_state), b = splitmix64(&s->id_state);
        pthread_mutex_unlock(&s->id_lock);
        memcpy(out->b, &a, 8);
        memcpy(out->b + 8, &b, 8);
        out->b[6] = (uint8_t)((out->b[6] & 0x0f) | 0x40); /* version 4 */
    } else {
        /* A time-ordered UUID (version 7, RFC 9562): 48 bits of wall-clock milliseconds, a
         * 12-bit sequence that keeps ids from one store increasing within a millisecond (and
         * across a clock step back), then 62 random bits. Ids made close in time sort close
         * together, so the records of jobs submitted and run together share B-tree pages
         * (jobs, steps, outputs, segment ids): a commit of many job changes writes a few pages
         * instead of one random page per record, which with random ids dominated the writer's
         * I/O. The time is only an ordering hint, never read back as a time, which is why it
         * comes from the system clock rather than a ql_clock_t. */
        uint8_t rnd[8];
        size_t got = 0;
        while (got < sizeof rnd) {
            ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
            if (n > 0)
                got += (size_t)n;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
        pthread_mutex_lock(&s->id_lock);
        if (ms > s->id_last_ms) {
            s->id_last_ms = ms;
            s->id_seq = 0;
        } else if (++s->id_seq > 0xfff) {
            s->id_last_ms++; /* 4096 ids in one millisecond: borrow the next one */
            s->id_seq = 0;
        }
        ms = s->id_last_ms;
        uint16_t seq = s->id_seq;
        pthread_mutex_unlock(&s->id_lock);
        for (int i = 0; i < 6; i++)
            out->b[i] = (uint8_t)(ms >> (40 - 8 * i));
        out->b[6] = (uint8_t)(0x70 | (seq >> 8)); /* version 7 */
        out->b[7] = (uint8_t)seq;
        memcpy(out->b + 8, rnd, 8);
    }
    out->b[8] = (uint8_t)((out->b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
}

int ql_store_stat(ql_store_t *s, ql_store_stat_t *out) {
    memset(out, 0, sizeof *out);
    out->backend = s->ops->name;
    return s->ops->stat(s, out);
}

bool ql_store_spans_hosts(const ql_store_t *s) {
    return s->ops->spans_hosts;
}

const char *ql_store_backend(const ql_store_t *s) {
    return s->ops->name;
}

int ql_store_lock_open(ql_store_t *s, const ql_store_lock_opts_t *opts, ql_store_lock_t **out,
                       ql_err_t *err) {
    *out = NULL;
    if (!s->ops->lock_open)
        return ql_err_set(err, UV_ENOTSUP,
                          "the %s store has no job engine lock of its own (its servers use the "
                          "data directory's lock file)",
                          s->ops->name);
    return s->ops->lock_open(s, opts, out, err);
}

void ql_store_set_commit_hook(ql_store_t *s, ql_store_commit_hook hook, void *arg) {
    s->commit_hook = hook;
    s->commit_hook_arg = arg;
}

int ql_store_fsck(ql_store_t *s, void *out_file, ql_fsck_report_t *report) {
    return s->ops->fsck(s, out_file, report);
}

int ql_store_changes_listen(ql_store_t *s, ql_err_t *err) {
    return s->ops->changes_listen ? s->ops->changes_listen(s, err) : UV_ENOTSUP;
}

int ql_store_changes_fd(ql_store_t *s) {
    return s->ops->changes_fd ? s->ops->changes_fd(s) : -1;
}

int ql_store_changes_drain(ql_store_t *s, ql_store_change_cb cb, void *arg) {
    return s->ops->changes_drain ? s->ops->changes_drain(s, cb, arg) : 0;
}

int ql_store_announce(ql_store_t *s, const char *server_id, long pid, const char *info) {
    return s->ops->announce ? s->ops->announce(s, server_id, pid, info) : UV_ENOTSUP;
}

int ql_store_servers_foreach(ql_txn_t *t, ql_store_server_cb cb, void *arg) {
    return t->ops->servers_foreach ? t->ops->servers_foreach(t, cb, arg) : UV_ENOTSUP;
}

/* ---- transactions ---- */

int ql_txn_begin(ql_store_t *s, bool write, ql_txn_t **out) {
    return s->ops->txn_begin(s, NULL, write, out);
}

int ql_txn_begin_lookups(ql_store_t *s, ql_txn_t **out) {
    return s->ops->txn_begin_lookups ? s->ops->txn_begin_lookups(s, out)
                                     : s->ops->txn_begin(s, NULL, false, out);
}

int ql_txn_begin_nested(ql_txn_t *parent, ql_txn_t **out) {
    if (!parent->write)
        return QL_EINVAL;
    return parent->ops->txn_begin(parent->store, parent, true, out);
}

int ql_txn_commit(ql_txn_t *t) {
    return t->ops->txn_commit(t);
}

void ql_txn_abort(ql_txn_t *t) {
    if (t)
        t->ops->txn_abort(t);
}

bool ql_txn_is_write(const ql_txn_t *t) {
    return t->write;
}

ql_store_t *ql_txn_store(ql_txn_t *t) {
    return t->store;
}

/* ---- records ---- */

int ql_meta_get_u64(ql_txn_t *t, const char *key, uint64_t *out) {
    return t->ops->meta_get_u64(t, key, out);
}

int ql_meta_put_u64(ql_txn_t *t, const char *key, uint64_t value) {
    return t->ops->meta_put_u64(t, key, value);
}

int ql_meta_get_str(ql_txn_t *t, const char *key, char *buf, size_t cap) {
    return t->ops->meta_get_str(t, key, buf, cap);
}

int ql_meta_put_str(ql_txn_t *t, const char *key, const char *value) {
    return t->ops->meta_put_str(t, key, value);
}

int ql_meta_delete(ql_txn_t *t, const char *key) {
    /* The fencing epoch only ever grows: deleting it would let an old token write again. */
    if (!t->write || !strcmp(key, "job_engine_epoch"))
        return QL_EINVAL;
    return t->ops->meta_delete(t, key);
}

int ql_store_metadata_generation(ql_txn_t *t, uint64_t *out) {
    return t->ops->metadata_generation(t, out);
}

int ql_project_get(ql_txn_t *t, const char *name, unsigned flags, ql_project_t *out) {
    return t->ops->project_get(t, name, flags, out);
}

int ql_project_put(ql_txn_t *t, const ql_project_t *p) {
    return t->ops->project_put(t, p);
}

int ql_project_foreach(ql_txn_t *t, ql_project_cb cb, void *arg) {
    return t->ops->project_foreach(t, cb, arg);
}

int ql_project_count(ql_txn_t *t, uint64_t *out) {
    return t->ops->project_count(t, out);
}

int ql_model_get(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_model_t *out) {
    return t->ops->model_get(t, id, flags, out);
}

int ql_model_get_for_probe(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_model_t *out) {
    return t->write && t->ops->model_get_for_probe ? t->ops->model_get_for_probe(t, id, flags, out)
                                                   : t->ops->model_get(t, id, flags, out);
}

int ql_model_exists(ql_txn_t *t, const ql_id_t *id) {
    return t->ops->model_exists(t, id);
}

int ql_model_segment_exists(ql_txn_t *t, const ql_id_t *model, const ql_id_t *segment) {
    if (t->ops->model_segment_exists)
        return t->ops->model_segment_exists(t, model, segment);
    int rc = t->ops->model_exists(t, model);
    return rc || ql_id_is_zero(segment) ? rc : t->ops->segment_exists(t, segment);
}

int ql_model_find(ql_txn_t *t, const char *project, const char *name, unsigned flags,
                  ql_model_t *out) {
    return t->ops->model_find(t, project, name, flags, out);
}

int ql_model_find_with_project(ql_txn_t *t, const char *project, const char *name, unsigned flags,
                               ql_project_t *p, ql_model_t *m, bool *found) {
    *found = false;
    if (t->ops->model_find_with_project && !t->write) /* a write reads each with its lock */
        return t->ops->model_find_with_project(t, project, name, flags, p, m, found);
    int rc = t->ops->project_get(t, project, 0, p);
    if (rc)
        return rc;
    if ((rc = t->ops->model_find(t, project, name, flags, m)) == 0)
        *found = true;
    else if (rc == QL_ENOTFOUND)
        rc = 0;
    if (rc)
        ql_project_free(p);
    return rc;
}

int ql_model_put(ql_txn_t *t, const ql_model_t *m) {
    return t->ops->model_put(t, m);
}

int ql_model_foreach(ql_txn_t *t, const char *project, ql_model_cb cb, void *arg) {
    return t->ops->model_foreach(t, project, cb, arg);
}

int ql_model_count(ql_txn_t *t, const char *project, uint64_t *out) {
    return t->ops->model_count(t, project, out);
}

int ql_segment_get(ql_txn_t *t, const ql_id_t *id, ql_segment_t *out) {
    return t->ops->segment_get(t, id, out);
}

int ql_segment_exists(ql_txn_t *t, const ql_id_t *id) {
    return t->ops->segment_exists(t, id);
}

int ql_segment_put(ql_txn_t *t, ql_segment_t *s) {
    return t->ops->segment_put(t, s);
}

int ql_segment_delete(ql_txn_t *t, const ql_id_t *id) {
    return t->ops->segment_delete(t, id);
}

int ql_segment_foreach(ql_txn_t *t, const ql_id_t *model, ql_segment_cb cb, void *arg) {
    return t->ops->segment_foreach(t, model, cb, arg);
}

int ql_segment_foreach_overlapping(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                                   ql_segment_cb cb, void *arg) {
    return t->ops->segment_foreach_overlapping(t, model, start, end, cb, arg);
}

int ql_segment_count(ql_txn_t *t, const ql_id_t *model, uint64_t *out) {
    return t->ops->segment_count(t, model, out);
}

int ql_job_get(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_job_t *out) {
    return t->ops->job_get(t, id, flags, out);
}

int ql_job_get_many(ql_txn_t *t, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                    void *arg) {
    return t->ops->job_get_many(t, n, ids, flags, cb, arg);
}

int store_job_get_loop(ql_txn_t *t, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                       void *arg) {
    for (size_t i = 0; i < n; i++) {
        ql_job_t j;
        int rc = t->ops->job_get(t, &ids[i], flags, &j);
        if (rc == QL_ENOTFOUND)
            continue;
        if (rc)
            return rc;
        rc = cb(&j, arg);
        ql_job_free(&j);
        if (rc)
            return rc < 0 ? rc : 0;
    }
    return 0;
}

int ql_job_put(ql_txn_t *t, const ql_job_t *j) {
    return t->ops->job_put(t, j);
}

int ql_model_delete(ql_txn_t *t, const ql_id_t *id) {
    return t->ops->model_delete(t, id);
}

int ql_project_delete(ql_txn_t *t, const char *name) {
    return t->ops->project_delete(t, name);
}

int ql_job_delete(ql_txn_t *t, const ql_id_t *id) {
    return t->ops->job_delete(t, id);
}

int ql_job_foreach_state(ql_txn_t *t, ql_state_t state, ql_job_cb cb, void *arg) {
    return t->ops->job_foreach_state(t, state, cb, arg);
}

int ql_job_foreach_state_ref(ql_txn_t *t, ql_state_t state, ql_job_state_ref_cb cb, void *arg) {
    return t->ops->job_foreach_state_ref(t, state, cb, arg);
}

typedef struct {
    ql_job_state_target_cb cb;
    void *arg;
} target_walk_t;

static int target_without(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    const target_walk_t *w = arg;
    return w->cb(id, priority, create_time, NULL, NULL, w->arg);
}

int ql_job_foreach_state_target(ql_txn_t *t, ql_state_t state, ql_job_state_target_cb cb,
                                void *arg) {
    if (t->ops->job_foreach_state_target)
        return t->ops->job_foreach_state_target(t, state, cb, arg);
    target_walk_t w = {cb, arg};
    return t->ops->job_foreach_state_ref(t, state, target_without, &w);
}

int ql_job_foreach_model(ql_txn_t *t, const ql_id_t *model, ql_job_cb cb, void *arg) {
    return t->ops->job_foreach_model(t, model, cb, arg);
}

int ql_job_foreach_live(ql_txn_t *t, const ql_id_t *model, ql_live_job_cb cb, void *arg) {
    return t->ops->job_foreach_live(t, model, cb, arg);
}

int ql_job_foreach_live_overlapping(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                                    ql_live_job_cb cb, void *arg) {
    return t->ops->job_foreach_live_overlapping(t, model, start, end, cb, arg);
}

int ql_job_foreach_recent(ql_txn_t *t, const char *project, bool oldest_first, ql_job_ref_cb cb,
                          void *arg) {
    return t->ops->job_foreach_recent(t, project, oldest_first, cb, arg);
}

int ql_job_count(ql_txn_t *t, const char *project, uint32_t state_mask, uint64_t *out) {
    return t->ops->job_count(t, project, state_mask, out);
}

int ql_step_get(ql_txn_t *t, const ql_id_t *job, uint32_t seq, ql_step_t *out) {
    return t->ops->step_get(t, job, seq, out);
}

int ql_step_put(ql_txn_t *t, const ql_step_t *s) {
    return t->ops->step_put(t, s);
}

int ql_step_foreach(ql_txn_t *t, const ql_id_t *job, ql_step_cb cb, void *arg) {
    return t->ops->step_foreach(t, job, cb, arg);
}

int ql_output_get(ql_txn_t *t, const ql_id_t *job, uint32_t seq, char **out, size_t *len) {
    return t->ops->output_get(t, job, seq, out, len);
}

int ql_output_put(ql_txn_t *t, const ql_id_t *job, uint32_t seq, const char *text, size_t len) {
    return t->ops->output_put(t, job, seq, text, len);
}

/* ---- shared by every backend ---- */

typedef struct {
    ql_segment_t *out;
    size_t cap, n;
} collect_t;

static int collect_cb(const ql_segment_t *s, void *arg) {
    collect_t *c = arg;
    if (c->n < c->cap)
        c->out[c->n] = *s;
    c->n++;
    return 0;
}

/* A total order, so the list is the same on every backend: ties of (start, end) would
 * otherwise keep each backend's own order (LMDB's layers, PostgreSQL's ids). */
static bool seg_less(const ql_segment_t *a, const ql_segment_t *b) {
    if (a->start != b->start)
        return a->start < b->start;
    if (a->end != b->end)
        return a->end < b->end;
    return memcmp(a->id.b, b->id.b, 16) < 0;
}

int ql_segment_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                           ql_segment_t *out, size_t cap, size_t *n) {
    collect_t c = {.out = out, .cap = cap};
    int rc = ql_segment_foreach_overlapping(txn, model, start, end, collect_cb, &c);
    size_t got = c.n < cap ? c.n : cap;
    for (size_t i = 1; i < got; i++) { /* insertion sort: k is small and nearly sorted */
        ql_segment_t x = out[i];
        size_t j = i;
        while (j > 0 && seg_less(&x, &out[j - 1])) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = x;
    }
    *n = c.n;
    if (rc)
        return rc;
    return c.n > cap ? QL_ETOOBIG : 0;
}
