/* The LMDB backend: open/close, schema version, transactions, low-level table access, and its
 * backend table (store_ops.h). */
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

static const char *const db_names[DB_COUNT] = {
    "meta",       "projects", "models",     "model_names", "segments", "segment_ids", "jobs",
    "job_states", "job_live", "job_models", "job_recent",  "counts",   "steps",       "outputs",
};

int ql_store_mdb_err(int rc) {
    switch (rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_NOTFOUND:
        return QL_ENOTFOUND;
    case MDB_KEYEXIST:
        return QL_EEXIST;
    case MDB_MAP_FULL:
    case MDB_TXN_FULL:
        return QL_EMAPFULL;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_BAD_TXN:
        return QL_ECORRUPT;
    case MDB_BAD_VALSIZE:
        /* A key that is empty or longer than LMDB's limit: bad input, never a corrupt store
         * (ql_db_* refuse such keys before LMDB sees them; this is the backstop). */
        return QL_EINVAL;
    case MDB_VERSION_MISMATCH:
        return QL_EVERSION;
    case MDB_MAP_RESIZED:
        return QL_EMAPSIZE;
    case ENOSPC:
    case EDQUOT:
        return QL_EDISKFULL;
    default:
        if (rc > 0)
            return -rc; /* an errno value */
        return QL_ECORRUPT;
    }
}

/*
 * Brings an older store up to this schema in the transaction txn (consumed). Schema 1 keyed
 * job_live by (model, id); schema 2 by (model, range start, id). A read-only open cannot
 * write, so it says how to upgrade instead.
 */
static int upgrade_schema(ql_store_t *s, ql_txn_t *txn, uint64_t major, uint64_t minor,
                          ql_err_t *err) {
    if (s->read_only || major != 1) {
        ql_txn_abort(txn);
        return ql_err_set(
            err, QL_EVERSION, "the store at %s has schema %llu.%llu and this build reads %d.x%s",
            s->path, (unsigned long long)major, (unsigned long long)minor, QL_SCHEMA_MAJOR,
            major == 1 ? ": start qilind on it once (or any writing command) to "
                         "upgrade it in place"
                       : "");
    }
    int rc = ql_store_migrate_job_live(txn);
    if (!rc)
        rc = ql_meta_put_u64(txn, "schema_major", QL_SCHEMA_MAJOR);
    if (!rc)
        rc = ql_meta_put_u64(txn, "schema_minor", QL_SCHEMA_MINOR);
    if (rc) {
        ql_txn_abort(txn);
        return ql_err_set(err, rc, "cannot upgrade the store at %s from schema %llu.%llu: %s",
                          s->path, (unsigned long long)major, (unsigned long long)minor,
                          ql_strerror(rc));
    }
    if ((rc = ql_txn_commit(txn)))
        return ql_err_set(err, rc, "cannot upgrade the store at %s: %s", s->path, ql_strerror(rc));
    s->upgraded_major = major;
    s->upgraded_minor = minor;
    return 0;
}

static int check_schema(ql_store_t *s, ql_err_t *err) {
    ql_txn_t *txn;
    int rc = ql_txn_begin(s, !s->read_only, &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot begin a transaction on %s: %s", s->path,
                          ql_strerror(rc));
    uint64_t major = 0, minor = 0;
    rc = ql_meta_get_u64(txn, "schema_major", &major);
    if (rc == QL_ENOTFOUND && !s->read_only) {
        rc = ql_meta_put_u64(txn, "schema_major", QL_SCHEMA_MAJOR);
        if (!rc)
            rc = ql_meta_put_u64(txn, "schema_minor", QL_SCHEMA_MINOR);
        if (!rc)
            rc = ql_meta_put_str(txn, "created_by", "qilin " QL_VERSION);
        if (!rc)
            return ql_txn_commit(txn);
        ql_txn_abort(txn);
        return ql_err_set(err, rc, "cannot initialise the store at %s: %s", s->path,
                          ql_strerror(rc));
    }
    if (rc) {
        ql_txn_abort(txn);
        return ql_err_set(err, rc == QL_ENOTFOUND ? QL_ECORRUPT : rc,
                          "the store at %s has no schema version", s->path);
    }
    ql_meta_get_u64(txn, "schema_minor", &minor);
    if (major < QL_SCHEMA_MAJOR)
        return upgrade_schema(s, txn, major, minor, err);
    ql_txn_abort(txn);
    if (major > QL_SCHEMA_MAJOR)
        return ql_err_set(err, QL_EVERSION,
                          "the store at %s was written by a newer Qilin (schema %llu.%llu); "
                          "this build reads schema %d.x: upgrade Qilin or use another data "
                          "directory",
                          s->path, (unsigned long long)major, (unsigned long long)minor,
                          QL_SCHEMA_MAJOR);
    return 0;
}

static const store_ops_t lmdb_ops;
static void lmdb_close(ql_store_t *s);
static int lmdb_maintain(ql_store_t *s, int *cleared);

int ql_store_lmdb_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err) {
    *out = NULL;
    int rc; /* the data directory exists: ql_store_open made it */
    lmdb_store_t *L = calloc(1, sizeof *L);
    if (!L || store_base_init(&L->base, &lmdb_ops, opts)) {
        free(L);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    ql_store_t *s = &L->base;
    L->wake_fd = L->wake_dir = -1;
    atomic_init(&L->wake_self, -1);
    if (!opts->read_only && lmdb_wake_peers_open(s)) {
        store_base_fini(s);
        free(L);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    L->map_size = opts->map_size ? opts->map_size : QL_STORE_DEFAULT_MAP_SIZE;

    /* MDB_NOMEMINIT: LMDB otherwise zeroes every page it mallocs before filling it, and a
     * writer's nested transactions (one per mutation) malloc a copy of each page they touch:
     * that memset was a fifth of the writer's instructions. What it protected, the unused bytes
     * of a page never read back, only ever holds this process's own memory in its own file. */
    unsigned flags = MDB_NOTLS | MDB_NOMEMINIT | (opts->read_only ? MDB_RDONLY : 0);
    if ((rc = mdb_env_create(&L->env)) || (rc = mdb_env_set_mapsize(L->env, L->map_size)) ||
        (rc = mdb_env_set_maxdbs(L->env, DB_COUNT + 2)) ||
        (rc = mdb_env_set_maxreaders(L->env, opts->max_readers ? opts->max_readers : 126)) ||
        /* 0600: data.mdb and lock.mdb are the server user's alone (a reader slot in lock.mdb
         * is writable state, and the metadata is nobody else's to read). */
        (rc = mdb_env_open(L->env, s->path, flags, 0600))) {
        int code = ql_store_mdb_err(rc);
        ql_err_set(err, code, "cannot open the store at %s: %s", s->path, mdb_strerror(rc));
        lmdb_close(s);
        return code;
    }

    if (!opts->read_only &&
        (rc = ql_wguard_open(s->path,
                             opts->writer_stall_ms > 0 ? opts->writer_stall_ms
                                                       : QL_STORE_DEFAULT_WRITER_STALL_MS,
                             opts->log, &L->guard))) {
        ql_err_set(err, rc, "cannot open the writer guard of the store at %s: %s", s->path,
                   ql_strerror(rc));
        lmdb_close(s);
        return rc;
    }

    MDB_txn *txn;
    if (L->guard && (rc = ql_wguard_enter(L->guard))) {
        ql_err_set(err, rc, "cannot take the writer guard of the store at %s: %s", s->path,
                   ql_strerror(rc));
        lmdb_close(s);
        return rc;
    }
    if ((rc = mdb_txn_begin(L->env, NULL, opts->read_only ? MDB_RDONLY : 0, &txn))) {
        if (L->guard)
            ql_wguard_leave(L->guard);
        int code = ql_store_mdb_err(rc);
        ql_err_set(err, code, "cannot open the store at %s: %s", s->path, mdb_strerror(rc));
        lmdb_close(s);
        return code;
    }
    for (int i = 0; i < DB_COUNT && !rc; i++)
        rc = mdb_dbi_open(txn, db_names[i], opts->read_only ? 0 : MDB_CREATE, &L->dbi[i]);
    if (!rc)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    if (L->guard)
        ql_wguard_leave(L->guard);
    if (rc) {
        int code = ql_store_mdb_err(rc);
        ql_err_set(err, code, "cannot open the tables of the store at %s: %s", s->path,
                   rc == MDB_NOTFOUND ? "not a Qilin store" : mdb_strerror(rc));
        lmdb_close(s);
        return code;
    }
    if ((rc = check_schema(s, err))) {
        lmdb_close(s);
        return rc;
    }
    lmdb_maintain(s, NULL); /* stale reader slots left by processes that died before this open */
    *out = s;
    return 0;
}

static int lmdb_maintain(ql_store_t *s, int *cleared) {
    int dead = 0;
    int rc = mdb_reader_check(ql_lmdb(s)->env, &dead);
    if (cleared)
        *cleared = rc ? 0 : dead;
    return ql_store_mdb_err(rc);
}

static void lmdb_close(ql_store_t *s) {
    if (!s)
        return;
    lmdb_store_t *L = ql_lmdb(s);
    lmdb_changes_close(s);
    lmdb_wake_peers_close(s);
    if (L->env)
        mdb_env_close(L->env);
    ql_wguard_close(L->guard);
    store_base_fini(s);
    free(L);
}

static int lmdb_stat(ql_store_t *s, ql_store_stat_t *out) {
    MDB_envinfo info;
    MDB_stat st;
    int rc = mdb_env_info(ql_lmdb(s)->env, &info);
    if (!rc)
        rc = mdb_env_stat(ql_lmdb(s)->env, &st);
    if (rc)
        return ql_store_mdb_err(rc);
    out->backend = "lmdb";
    out->map_size = info.me_mapsize;
    out->used_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
    char file[4096];
    struct stat sb;
    snprintf(file, sizeof file, "%s/data.mdb", s->path);
    out->file_bytes = stat(file, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    return 0;
}

/* A compacted copy (MDB_CP_COMPACT: free pages left out, pages renumbered), taken in one read
 * transaction, so it is consistent even while servers write. */
static int lmdb_compact(ql_store_t *s, const char *dir) {
    return ql_store_mdb_err(mdb_env_copy2(ql_lmdb(s)->env, dir, MDB_CP_COMPACT));
}

/* ---- transactions ---- */

static int lmdb_txn_begin(ql_store_t *s, ql_txn_t *parent, bool write, ql_txn_t **out) {
    *out = NULL;
    if (write && s->read_only)
        return UV_EROFS;
    lmdb_store_t *L = ql_lmdb(s);
    lmdb_txn_t *lt = calloc(1, sizeof *lt);
    if (!lt)
        return UV_ENOMEM;
    ql_txn_t *t = &lt->base;
    /* A top-level write transaction takes the writer guard first, so a wait for another
     * process's write happens where that process can be looked at (writer_guard.h). */
    bool guard = write && !parent && L->guard;
    int rc;
    if (guard && (rc = ql_wguard_enter(L->guard))) {
        free(lt);
        return rc;
    }
    rc =
        mdb_txn_begin(L->env, parent ? ql_mdb_txn(parent) : NULL, write ? 0 : MDB_RDONLY, &lt->txn);
    if (rc) {
        if (guard)
            ql_wguard_leave(L->guard);
        free(lt);
        return ql_store_mdb_err(rc);
    }
    t->ops = s->ops;
    t->store = s;
    t->parent = parent;
    t->write = write;
    *out = t;
    return 0;
}

static void txn_free(ql_txn_t *t) {
    free(((lmdb_txn_t *)t)->woke);
    store_txn_fini(t);
    free(t);
}

/* LMDB reports a write cut short by a full file system as EIO ("short write, filesystem
 * full?"), which a real I/O error also gives: told apart by whether the file system has room
 * (fewer than 64 pages) for this process (root may use the reserved blocks too). A heuristic: an
 * I/O error that happens while the disk is nearly full is reported as a full disk. */
static bool disk_is_full(const ql_store_t *s) {
    struct statvfs fs;
    if (statvfs(s->path, &fs) != 0)
        return false;
    uint64_t blocks = geteuid() == 0 ? fs.f_bfree : fs.f_bavail;
    return blocks * fs.f_frsize < 64 * 4096;
}

/* Whether t holds the writer guard (a top-level write transaction of a writable store). */
static bool holds_guard(const ql_txn_t *t) {
    return t->write && !t->parent && ql_lmdb(t->store)->guard;
}

static int lmdb_txn_commit(ql_txn_t *t) {
    int mrc = mdb_txn_commit(ql_mdb_txn(t));
    if (holds_guard(t))
        ql_wguard_leave(ql_lmdb(t->store)->guard); /* LMDB's write mutex is free again */
    int rc =
        mrc == EIO && t->write && disk_is_full(t->store) ? QL_EDISKFULL : ql_store_mdb_err(mrc);
    if (!rc)
        store_run_commit_hook(t);
    if (!rc && t->parent)
        lmdb_changes_merge(t->parent, t);
    else if (!rc && t->write)
        lmdb_changes_send(t); /* after the commit: a woken server reads what it names */
    txn_free(t);
    return rc;
}

static void lmdb_txn_abort(ql_txn_t *t) {
    mdb_txn_abort(ql_mdb_txn(t));
    if (holds_guard(t))
        ql_wguard_leave(ql_lmdb(t->store)->guard);
    txn_free(t);
}

/* ---- low-level access ---- */

/* LMDB refuses an empty key and one longer than its limit (511 bytes) with MDB_BAD_VALSIZE, an
 * error that says nothing about which value was bad. A key is made from a caller's value (a
 * project or model name), so such a key is the caller's bad input: QL_EINVAL, and the store is
 * never asked. QL_ECORRUPT stays reserved for a store that really is corrupt. */
static bool key_ok(const ql_txn_t *t, size_t klen) {
    return klen > 0 && klen <= (size_t)mdb_env_get_maxkeysize(ql_lmdb(t->store)->env);
}

int ql_db_get(ql_txn_t *t, int db, const void *key, size_t klen, MDB_val *val) {
    if (!key_ok(t, klen))
        return QL_EINVAL;
    MDB_val k = ql_val(key, klen);
    return ql_store_mdb_err(mdb_get(ql_mdb_txn(t), ql_lmdb(t->store)->dbi[db], &k, val));
}

int ql_db_put(ql_txn_t *t, int db, const void *key, size_t klen, const void *val, size_t vlen) {
    if (!t->write || !key_ok(t, klen))
        return QL_EINVAL;
    MDB_val k = ql_val(key, klen), v = ql_val(val, vlen);
    return ql_store_mdb_err(mdb_put(ql_mdb_txn(t), ql_lmdb(t->store)->dbi[db], &k, &v, 0));
}

int ql_db_del(ql_txn_t *t, int db, const void *key, size_t klen) {
    if (!t->write || !key_ok(t, klen))
        return QL_EINVAL;
    MDB_val k = ql_val(key, klen);
    int rc = mdb_del(ql_mdb_txn(t), ql_lmdb(t->store)->dbi[db], &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : ql_store_mdb_err(rc);
}

int ql_db_cursor(ql_txn_t *t, int db, MDB_cursor **out) {
    return ql_store_mdb_err(mdb_cursor_open(ql_mdb_txn(t), ql_lmdb(t->store)->dbi[db], out));
}

int ql_count_get(ql_txn_t *t, const void *key, size_t klen, uint64_t *out) {
    MDB_val v;
    int rc = ql_db_get(t, DB_COUNTS, key, klen, &v);
    if (rc == QL_ENOTFOUND) {
        *out = 0;
        return 0;
    }
    if (rc)
        return rc;
    if (v.mv_size != 8)
        return QL_ECORRUPT;
    *out = ql_get_be64(v.mv_data);
    return 0;
}

int ql_count_add(ql_txn_t *t, const void *key, size_t klen, int64_t delta) {
    uint64_t n;
    int rc = ql_count_get(t, key, klen, &n);
    if (rc)
        return rc;
    if (delta < 0 && (uint64_t)-delta > n)
        n = 0;
    else
        n = (uint64_t)((int64_t)n + delta);
    if (n == 0)
        return ql_db_del(t, DB_COUNTS, key, klen);
    uint8_t buf[8];
    ql_put_be64(buf, n);
    return ql_db_put(t, DB_COUNTS, key, klen, buf, 8);
}

/* ---- meta values ---- */

int lmdb_meta_get_u64(ql_txn_t *t, const char *key, uint64_t *out) {
    MDB_val v;
    int rc = ql_db_get(t, DB_META, key, strlen(key), &v);
    if (rc)
        return rc;
    if (v.mv_size != 8)
        return QL_ECORRUPT;
    *out = ql_get_be64(v.mv_data);
    return 0;
}

int lmdb_meta_put_u64(ql_txn_t *t, const char *key, uint64_t value) {
    uint8_t buf[8];
    ql_put_be64(buf, value);
    return ql_db_put(t, DB_META, key, strlen(key), buf, 8);
}

int lmdb_meta_get_str(ql_txn_t *t, const char *key, char *buf, size_t cap) {
    MDB_val v;
    int rc = ql_db_get(t, DB_META, key, strlen(key), &v);
    if (rc)
        return rc;
    if (v.mv_size >= cap)
        return QL_ETOOBIG;
    memcpy(buf, v.mv_data, v.mv_size);
    buf[v.mv_size] = '\0';
    return 0;
}

int lmdb_meta_put_str(ql_txn_t *t, const char *key, const char *value) {
    return ql_db_put(t, DB_META, key, strlen(key), value, strlen(value));
}

static int lmdb_meta_delete(ql_txn_t *t, const char *key) {
    return ql_db_del(t, DB_META, key, strlen(key));
}

static const store_ops_t lmdb_ops = {
    .name = "lmdb",
    .close = lmdb_close,
    .changes_listen = lmdb_changes_listen,
    .changes_fd = lmdb_changes_fd,
    .changes_drain = lmdb_changes_drain,
    .maintain = lmdb_maintain,
    .stat = lmdb_stat,
    .compact = lmdb_compact,
    .fsck = lmdb_fsck,
    .txn_begin = lmdb_txn_begin,
    .txn_commit = lmdb_txn_commit,
    .txn_abort = lmdb_txn_abort,
    .meta_get_u64 = lmdb_meta_get_u64,
    .meta_put_u64 = lmdb_meta_put_u64,
    .meta_get_str = lmdb_meta_get_str,
    .meta_put_str = lmdb_meta_put_str,
    .meta_delete = lmdb_meta_delete,
    .metadata_generation = lmdb_metadata_generation,
    .project_get = lmdb_project_get,
    .project_put = lmdb_project_put,
    .project_foreach = lmdb_project_foreach,
    .project_count = lmdb_project_count,
    .model_get = lmdb_model_get,
    .model_exists = lmdb_model_exists,
    .model_find = lmdb_model_find,
    .model_put = lmdb_model_put,
    .model_foreach = lmdb_model_foreach,
    .model_count = lmdb_model_count,
    .segment_get = lmdb_segment_get,
    .segment_exists = lmdb_segment_exists,
    .segment_put = lmdb_segment_put,
    .segment_delete = lmdb_segment_delete,
    .segment_foreach = lmdb_segment_foreach,
    .segment_foreach_overlapping = lmdb_segment_foreach_overlapping,
    .segment_count = lmdb_segment_count,
    .job_get = lmdb_job_get,
    .job_get_many = store_job_get_loop,
    .job_put = lmdb_job_put,
    .job_delete = lmdb_job_delete,
    .project_delete = lmdb_project_delete,
    .model_delete = lmdb_model_delete,
    .job_foreach_state = lmdb_job_foreach_state,
    .job_foreach_state_ref = lmdb_job_foreach_state_ref,
    .job_foreach_model = lmdb_job_foreach_model,
    .job_foreach_live = lmdb_job_foreach_live,
    .job_foreach_live_overlapping = lmdb_job_foreach_live_overlapping,
    .probe_targets = store_probe_loop,
    .probe_range = store_probe_range_pair,
    .job_foreach_recent = lmdb_job_foreach_recent,
    .job_count = lmdb_job_count,
    .step_get = lmdb_step_get,
    .step_put = lmdb_step_put,
    .step_foreach = lmdb_step_foreach,
    .output_get = lmdb_output_get,
    .output_put = lmdb_output_put,
};
