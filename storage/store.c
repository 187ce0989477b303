/* The LMDB environment: open/close, schema version, transactions, ids, low-level table access. */
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

/* Creates path and its missing parents 0750: the store, its lock and the step logs are the
 * server user's (and its group's, for an operator's tools), never every local user's. An existing
 * directory keeps its mode; the node warns when others may enter it. */
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

int ql_store_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err) {
    *out = NULL;
    if (!opts || !opts->path || !opts->path[0])
        return ql_err_set(err, QL_EINVAL, "qilin.storage.path: no data directory given");
    int rc;
    if (!opts->read_only && (rc = mkdir_p(opts->path)))
        return ql_err_set(err, rc, "qilin.storage.path: cannot create %s: %s", opts->path,
                          ql_strerror(rc));
    ql_store_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(opts->path))) {
        free(s);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->id_lock, NULL);
    s->read_only = opts->read_only;
    s->map_size = opts->map_size ? opts->map_size : QL_STORE_DEFAULT_MAP_SIZE;
    s->id_state = opts->id_seed;

    /* MDB_NOMEMINIT: LMDB otherwise zeroes every page it mallocs before filling it, and a
     * writer's nested transactions (one per mutation) malloc a copy of each page they touch:
     * that memset was a fifth of the writer's instructions. What it protected, the unused bytes
     * of a page never read back, only ever holds this process's own memory in its own file. */
    unsigned flags = MDB_NOTLS | MDB_NOMEMINIT | (opts->read_only ? MDB_RDONLY : 0);
    if ((rc = mdb_env_create(&s->env)) || (rc = mdb_env_set_mapsize(s->env, s->map_size)) ||
        (rc = mdb_env_set_maxdbs(s->env, DB_COUNT + 2)) ||
        (rc = mdb_env_set_maxreaders(s->env, opts->max_readers ? opts->max_readers : 126)) ||
        /* 0600: data.mdb and lock.mdb are the server user's alone (a reader slot in lock.mdb
         * is writable state, and the metadata is nobody else's to read). */
        (rc = mdb_env_open(s->env, s->path, flags, 0600))) {
        int code = ql_store_mdb_err(rc);
        ql_err_set(err, code, "cannot open the store at %s: %s", s->path, mdb_strerror(rc));
        ql_store_close(s);
        return code;
    }

    if (!opts->read_only &&
        (rc = ql_wguard_open(s->path,
                             opts->writer_stall_ms > 0 ? opts->writer_stall_ms
                                                       : QL_STORE_DEFAULT_WRITER_STALL_MS,
                             opts->log, &s->guard))) {
        ql_err_set(err, rc, "cannot open the writer guard of the store at %s: %s", s->path,
                   ql_strerror(rc));
        ql_store_close(s);
        return rc;
    }

    MDB_txn *txn;
    if (s->guard && (rc = ql_wguard_enter(s->guard))) {
        ql_err_set(err, rc, "cannot take the writer guard of the store at %s: %s", s->path,
                   ql_strerror(rc));
        ql_store_close(s);
        return rc;
    }
    if ((rc = mdb_txn_begin(s->env, NULL, opts->read_only ? MDB_RDONLY : 0, &txn))) {
        if (s->guard)
            ql_wguard_leave(s->guard);
        int code = ql_store_mdb_err(rc);
        ql_err_set(err, code, "cannot open the store at %s: %s", s->path, mdb_strerror(rc));
        ql_store_close(s);
        return code;
    }
    for (int i = 0; i < DB_COUNT && !rc; i++)
        rc = mdb_dbi_open(txn, db_names[i], opts->read_only ? 0 : MDB_CREATE, &s->dbi[i]);
    if (!rc)
        rc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    if (s->guard)
        ql_wguard_leave(s->guard);
    if (rc) {
        int code = ql_store_mdb_err(rc);
        ql_err_set(err, code, "cannot open the tables of the store at %s: %s", s->path,
                   rc == MDB_NOTFOUND ? "not a Qilin store" : mdb_strerror(rc));
        ql_store_close(s);
        return code;
    }
    if ((rc = check_schema(s, err))) {
        ql_store_close(s);
        return rc;
    }
    ql_store_clear_stale_readers(s, NULL); /* left by processes that died before this open */
    *out = s;
    return 0;
}

int ql_store_clear_stale_readers(ql_store_t *s, int *cleared) {
    int dead = 0;
    int rc = mdb_reader_check(s->env, &dead);
    if (cleared)
        *cleared = rc ? 0 : dead;
    return ql_store_mdb_err(rc);
}

void ql_store_close(ql_store_t *s) {
    if (!s)
        return;
    if (s->env)
        mdb_env_close(s->env);
    ql_wguard_close(s->guard);
    pthread_mutex_destroy(&s->id_lock);
    free(s->path);
    free(s);
}

bool ql_store_upgraded_from(const ql_store_t *s, uint64_t *major, uint64_t *minor) {
    *major = s->upgraded_major;
    *minor = s->upgraded_minor;
    return s->upgraded_major != 0;
}

const char *ql_store_path(const ql_store_t *s) {
    return s->path;
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
    MDB_envinfo info;
    MDB_stat st;
    int rc = mdb_env_info(s->env, &info);
    if (!rc)
        rc = mdb_env_stat(s->env, &st);
    if (rc)
        return ql_store_mdb_err(rc);
    out->map_size = info.me_mapsize;
    out->used_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
    char file[4096];
    struct stat sb;
    snprintf(file, sizeof file, "%s/data.mdb", s->path);
    out->file_bytes = stat(file, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    return 0;
}

void ql_store_set_commit_hook(ql_store_t *s, ql_store_commit_hook hook, void *arg) {
    s->commit_hook = hook;
    s->commit_hook_arg = arg;
}

/* ---- transactions ---- */

static int txn_new(ql_store_t *s, ql_txn_t *parent, bool write, ql_txn_t **out) {
    *out = NULL;
    if (write && s->read_only)
        return UV_EROFS;
    ql_txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return UV_ENOMEM;
    /* A top-level write transaction takes the writer guard first, so a wait for another
     * process's write happens where that process can be looked at (writer_guard.h). */
    bool guard = write && !parent && s->guard;
    int rc;
    if (guard && (rc = ql_wguard_enter(s->guard))) {
        free(t);
        return rc;
    }
    rc = mdb_txn_begin(s->env, parent ? parent->txn : NULL, write ? 0 : MDB_RDONLY, &t->txn);
    if (rc) {
        if (guard)
            ql_wguard_leave(s->guard);
        free(t);
        return ql_store_mdb_err(rc);
    }
    t->store = s;
    t->parent = parent;
    t->write = write;
    *out = t;
    return 0;
}

int ql_txn_begin(ql_store_t *s, bool write, ql_txn_t **out) {
    return txn_new(s, NULL, write, out);
}

int ql_txn_begin_nested(ql_txn_t *parent, ql_txn_t **out) {
    if (!parent->write)
        return QL_EINVAL;
    return txn_new(parent->store, parent, true, out);
}

static void txn_free(ql_txn_t *t) {
    if (t->zone_ready)
        msgpack_zone_destroy(&t->zone);
    ql_buf_free(&t->buf);
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
    return t->write && !t->parent && t->store->guard;
}

int ql_txn_commit(ql_txn_t *t) {
    int mrc = mdb_txn_commit(t->txn);
    if (holds_guard(t))
        ql_wguard_leave(t->store->guard); /* LMDB's write mutex is free again */
    int rc =
        mrc == EIO && t->write && disk_is_full(t->store) ? QL_EDISKFULL : ql_store_mdb_err(mrc);
    if (!rc && t->write && !t->parent && t->store->commit_hook)
        t->store->commit_hook(t->store->commit_hook_arg);
    txn_free(t);
    return rc;
}

void ql_txn_abort(ql_txn_t *t) {
    if (!t)
        return;
    mdb_txn_abort(t->txn);
    if (holds_guard(t))
        ql_wguard_leave(t->store->guard);
    txn_free(t);
}

bool ql_txn_is_write(const ql_txn_t *t) {
    return t->write;
}

ql_store_t *ql_txn_store(ql_txn_t *t) {
    return t->store;
}

msgpack_zone *ql_txn_zone(ql_txn_t *t) {
    if (!t->zone_ready) {
        if (!msgpack_zone_init(&t->zone, 4096))
            return NULL;
        t->zone_ready = true;
    }
    return &t->zone;
}

/* ---- low-level access ---- */

/* LMDB refuses an empty key and one longer than its limit (511 bytes) with MDB_BAD_VALSIZE, an
 * error that says nothing about which value was bad. A key is made from a caller's value (a
 * project or model name), so such a key is the caller's bad input: QL_EINVAL, and the store is
 * never asked. QL_ECORRUPT stays reserved for a store that really is corrupt. */
static bool key_ok(const ql_txn_t *t, size_t klen) {
    return klen > 0 && klen <= (size_t)mdb_env_get_maxkeysize(t->store->env);
}

int ql_db_get(ql_txn_t *t, int db, const void *key, size_t klen, MDB_val *val) {
    if (!key_ok(t, klen))
        return QL_EINVAL;
    MDB_val k = ql_val(key, klen);
    return ql_store_mdb_err(mdb_get(t->txn, t->store->dbi[db], &k, val));
}

int ql_db_put(ql_txn_t *t, int db, const void *key, size_t klen, const void *val, size_t vlen) {
    if (!t->write || !key_ok(t, klen))
        return QL_EINVAL;
    MDB_val k = ql_val(key, klen), v = ql_val(val, vlen);
    return ql_store_mdb_err(mdb_put(t->txn, t->store->dbi[db], &k, &v, 0));
}

int ql_db_del(ql_txn_t *t, int db, const void *key, size_t klen) {
    if (!t->write || !key_ok(t, klen))
        return QL_EINVAL;
    MDB_val k = ql_val(key, klen);
    int rc = mdb_del(t->txn, t->store->dbi[db], &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : ql_store_mdb_err(rc);
}

int ql_db_cursor(ql_txn_t *t, int db, MDB_cursor **out) {
    return ql_store_mdb_err(mdb_cursor_open(t->txn, t->store->dbi[db], out));
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

int ql_meta_get_u64(ql_txn_t *t, const char *key, uint64_t *out) {
    MDB_val v;
    int rc = ql_db_get(t, DB_META, key, strlen(key), &v);
    if (rc)
        return rc;
    if (v.mv_size != 8)
        return QL_ECORRUPT;
    *out = ql_get_be64(v.mv_data);
    return 0;
}

int ql_meta_put_u64(ql_txn_t *t, const char *key, uint64_t value) {
    uint8_t buf[8];
    ql_put_be64(buf, value);
    return ql_db_put(t, DB_META, key, strlen(key), buf, 8);
}

int ql_meta_get_str(ql_txn_t *t, const char *key, char *buf, size_t cap) {
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

int ql_meta_put_str(ql_txn_t *t, const char *key, const char *value) {
    return ql_db_put(t, DB_META, key, strlen(key), value, strlen(value));
}
