/*
 * Internals of the PostgreSQL backend, shared by store_pg*.c (not public; the only files that
 * include libpq-fe.h). docs/postgresql.md describes the schema and the guarantees.
 */
#ifndef QL_STORE_PG_INT_H
#define QL_STORE_PG_INT_H

#include "store_ops.h"

#include <libpq-fe.h>
#include <pthread.h>

/* Prepared statements: each connection prepares a statement the first time it runs it. */
typedef enum pg_stmt {
    S_META_GET,
    S_META_GET_SHARE,
    S_META_GET_UPDATE,
    S_META_PUT,
    S_META_DELETE,
    S_META_BUMP,
    S_PROJ_GET,
    S_PROJ_GET_SHARE,
    S_PROJ_PUT,
    S_PROJ_COUNT,
    S_MODEL_GET,
    S_MODEL_GET_SHARE,
    S_MODEL_GET_SHARE_LOCK,
    S_MODEL_SEG_EXISTS,
    S_MODEL_ID_BY_NAME,
    S_MODEL_FIND,
    S_MODEL_FIND_PROJ,
    S_MODEL_FIND_SHARE,
    S_MODEL_OLD,
    S_MODEL_INSERT,
    S_MODEL_UPDATE,
    S_MODEL_COUNT,
    S_SEG_GET,
    S_SEG_GET_UPDATE,
    S_SEG_EXISTS,
    S_SEG_OLD,
    S_SEG_UPSERT,
    S_SEG_PUT_SAME,
    S_SEG_PUT_SAME_LOCK,
    S_SEG_DELETE,
    S_SEG_COUNT,
    S_JOB_GET,
    S_JOB_GET_UPDATE,
    S_JOB_OLD,
    S_JOB_INSERT,
    S_JOB_UPDATE,
    S_JOB_UPDATE_LOCK,
    S_JOB_DELETE,
    S_JOB_MODEL,
    S_MODEL_DELETE,
    S_PROJ_DELETE,
    S_JOB_COUNT,
    S_JOB_COUNT_ALL,
    S_STEP_GET,
    S_STEP_PUT,
    S_OUT_GET,
    S_OUT_PUT,
    S_STEP_ALL,
    S_XACT_STATUS,
    S_FENCE_CLAIM,
    S_COUNT
} pg_stmt_t;

/* Queries walked with a cursor (DECLARE ... CURSOR, FETCH 32, then 256), so that a callback may
 * query again on the same connection. */
typedef enum pg_walk {
    W_PROJECTS,
    W_MODELS,
    W_SEGMENTS,
    W_SEG_OVERLAP,
    W_JOB_STATE,
    W_JOB_STATE_REF,
    W_JOB_MODEL,
    W_JOB_LIVE,
    W_JOB_LIVE_OVERLAP,
    W_JOB_RECENT_P_DESC,
    W_JOB_RECENT_P_ASC,
    W_JOB_RECENT_DESC,
    W_JOB_RECENT_ASC,
    W_STEPS,
    W_RANGE_PROBE,
    W_COUNT
} pg_walk_t;

/* A command queued on a connection, sent in the same round trip as the next statement
 * (store_pg_pipe.c): its answer matters only when it fails. */
typedef enum pg_qkind {
    Q_LEVEL, /* fails the savepoint level that queued it (a SAVEPOINT, a model lock) */
    Q_TOP,   /* fails the whole transaction (BEGIN, RELEASE, ROLLBACK TO, CLOSE) */
    Q_XID,   /* the transaction id of a write: kept in the top level's xid */
} pg_qkind_t;

#define PG_QUEUE_MAX 8
struct pg_args;
typedef struct pg_queued {
    char sql[120];
    uint8_t kind;         /* pg_qkind_t */
    bool lock;            /* the model lock (PG_LOCK_STMT) of the key in sql, in decimal */
    unsigned level;       /* the savepoint level that queued it */
    int stmt;             /* >= 0: a deferred write, prepared statement stmt (pg_defer) */
    int none_err;         /* a deferred write that must return a row: else its level fails so */
    struct pg_args *args; /* owned: its parameters, copied */
} pg_queued_t;

typedef struct pg_conn {
    PGconn *c;
    uint64_t prepared[2]; /* bit per pg_stmt_t, then per pg_walk_t (pg_prepared_has) */
    bool rollback_sent;   /* a ROLLBACK sent without waiting: its answer is read at the next use */
    int n_queued;
    pg_queued_t queued[PG_QUEUE_MAX];
    struct pg_conn *next;
} pg_conn_t;

/* The bits of pg_conn_t.prepared: statement s is bit s, walk w bit S_COUNT + w. */
#define PG_PREPARED_BITS (64 * 2)
static inline bool pg_prepared_has(const pg_conn_t *c, unsigned bit) {
    return (c->prepared[bit / 64] >> (bit % 64)) & 1;
}
static inline void pg_prepared_set(pg_conn_t *c, unsigned bit) {
    c->prepared[bit / 64] |= 1ull << (bit % 64);
}

typedef struct pg_store {
    ql_store_t base;
    char *conninfo;
    char *masked; /* conninfo with any password replaced by "***": the one that is logged */
    char *schema;
    char *schema_ident; /* quoted */
    unsigned pool_size;
    int64_t lock_timeout_ms;
    int64_t idle_write_ms; /* a write transaction idle this long ends its session (stall bound) */
    bool drop_at_close;    /* opts.pg_drop_at_close */
    bool require_sync;     /* opts.pg_require_sync_replication */
    pthread_mutex_t pool_lock;
    pthread_cond_t pool_cond;
    pg_conn_t *idle;
    unsigned n_open;
    /* Wake-ups (store_pg_changes.c): the NOTIFY channel of the schema, and the change session
     * that LISTENs on it (NULL: none; used by one thread at a time, see ql_store.h). */
    char channel[64];
    PGconn *listen;
    int listen_fd;      /* a duplicate of its socket, for the caller to watch; -1: none */
    bool listen_tried;  /* a listen was tried before: a later session may have missed changes */
    bool listen_broken; /* a drain found the session lost: the next listen replaces it */
    bool listen_resync; /* report "anything may have changed" at the next drain */
    /* This server's announcement (store_pg_servers.c), made again by every change session. */
    char *announcement;
} pg_store_t;

/* A job row a write transaction holds FOR UPDATE (it read or wrote it), with the columns a put
 * checks: a put of it needs no read of the old row (store_pg_locks.c). */
typedef struct pg_jobrow {
    ql_id_t id, model;
    int64_t create_time;
    int16_t state;
    char project[QL_NAME_MAX + 1];
    /* The job's steps (columns seq, rec; by seq), read in the round trip of the locking read,
     * after it: owned (PQclear), NULL when not known (store_pg_steps.c). */
    PGresult *steps;
} pg_jobrow_t;

/* Models whose lock a transaction level took (kept per savepoint level: ROLLBACK TO releases
 * the advisory locks taken after the savepoint, RELEASE keeps them, docs/postgresql.md). */
typedef struct pg_txn {
    ql_txn_t base;
    pg_conn_t *conn;
    unsigned level; /* 0: top level; n: savepoint s<n> */
    int failed;     /* the error that aborted this level (PostgreSQL refuses more), 0: none */
    int64_t *locked;
    size_t n_locked, cap_locked;
    /* Job rows this level locked (kept per savepoint level like the model locks: a rollback
     * releases the row locks taken after the savepoint). */
    pg_jobrow_t *rows;
    size_t n_rows, cap_rows;
    /* The segment this level read last FOR UPDATE, and its model: a put of it into that model
     * changes the row in place, so it is deferred (pg_segment_put). */
    bool seg_held;
    ql_id_t seg_held_id, seg_held_model;
    unsigned cursors;  /* cursor names used so far (top level counts for all) */
    char xid[32];      /* top-level write: pg_current_xact_id(), for an ambiguous commit */
    bool begun;        /* top level: its BEGIN went out (it is queued until the first statement) */
    bool lookups;      /* top level: read without BEGIN, each statement on its own (no ROLLBACK) */
    bool epoch_cached; /* this level read the fence epoch FOR SHARE (or a released child did) */
    int epoch_rc;
    uint64_t epoch;
    /* Jobs this level woke (pg_changes_note), notified with the top-level commit; kept per
     * savepoint level like the model locks. woke_all: too many to name, or out of memory. */
    ql_id_t *woke;
    size_t n_woke, cap_woke;
    bool woke_all;
} pg_txn_t;

/* Binary parameters of one statement. */
#define PG_MAX_PARAMS 14
typedef struct pg_params {
    int n;
    const char *v[PG_MAX_PARAMS];
    int len[PG_MAX_PARAMS];
    int fmt[PG_MAX_PARAMS];
    char scratch[PG_MAX_PARAMS][8];
} pg_params_t;

void pg_p_uuid(pg_params_t *p, const ql_id_t *id); /* a zero id is NULL */
void pg_p_i64(pg_params_t *p, int64_t v);
void pg_p_i32(pg_params_t *p, int32_t v);
void pg_p_i16(pg_params_t *p, int16_t v);
void pg_p_bool(pg_params_t *p, bool v);
void pg_p_text(pg_params_t *p, const char *s); /* NULL is NULL */
void pg_p_bytes(pg_params_t *p, const void *data, size_t len);
/* The binary form of a one-dimensional array parameter without NULLs (array_recv): the header
 * of n elements of type oid written at d (PG_ARRAY_HEAD bytes); the elements follow, each its
 * length (pg_put_be32) and bytes. Returns where the first element goes. */
#define PG_ARRAY_HEAD 20
#define PG_OID_INT8 20
#define PG_OID_UUID 2950
uint8_t *pg_array_head(uint8_t *d, uint32_t oid, size_t n);
void pg_put_be32(uint8_t *d, uint32_t v);

/* Runs a prepared statement in t; *res (may be NULL: cleared) gets the result, binary, which
 * the caller PQclear()s. Returns 0 or the mapped error; an error marks t failed. */
int pg_exec(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p, PGresult **res);
/* Runs prepared s1 then s2 in one round trip (pg_run_calls); res[0], res[1] get their results. */
int pg_exec_pair(pg_txn_t *t, pg_stmt_t s1, const pg_params_t *p1, pg_stmt_t s2,
                 const pg_params_t *p2, PGresult **res);
/* The single value of a one-row result of prepared st in *r; QL_ENOTFOUND without a row. */
static inline int pg_one_row(pg_txn_t *t, pg_stmt_t st, const pg_params_t *p, PGresult **r) {
    int rc = pg_exec(t, st, p, r);
    if (rc)
        return rc;
    if (PQntuples(*r) == 0) {
        PQclear(*r);
        *r = NULL;
        return QL_ENOTFOUND;
    }
    return 0;
}
/* Runs a text command on t's connection, after what is queued on it. */
int pg_cmd(pg_txn_t *t, const char *sql);

/* ---- the round trips of a connection (store_pg_pipe.c) ----
 * BEGIN, SAVEPOINT, RELEASE, ROLLBACK TO, the model lock and CLOSE are queued on the connection
 * and sent in one pipeline with the next statement, which the server runs after them in order;
 * a failure of a queued command fails the level that queued it, or the whole transaction (Q_TOP,
 * and a Q_LEVEL command of another level), so that no answer is given for a change that
 * did not happen. */

/* The model lock, prepared on every pool session when it opens. */
#define PG_LOCK_STMT "qlock"
#define PG_LOCK_SQL "SELECT pg_advisory_xact_lock($1::int8)"
/* Queues the model lock of key (Q_LEVEL), as pg_queue. */
int pg_queue_lock(pg_txn_t *t, int64_t key);
/* Queues sql (shorter than pg_queued_t.sql) of kind on t's connection; a full queue is sent
 * first. Returns 0 or the error of that send. */
int pg_queue(pg_txn_t *t, const char *sql, pg_qkind_t kind);
/* Sends what is queued on t's connection now (one round trip; none when nothing is). */
int pg_flush(pg_txn_t *t);
/* Queues prepared statement stmt (already prepared on t's connection) with a copy of p, as a
 * Q_LEVEL command of t: a write whose answer is only its success. Returns 0 or the error of a
 * send that a full queue needed. */
int pg_queue_args(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p, int none_err);
/* Runs prepared stmt with p in t, or queues it (pg_queue_args) when the connection has it
 * prepared: it then goes out with the level's next statement, or when the level ends. */
int pg_defer(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p);
/* The same for a write whose statement returns the row it changed (RETURNING): one that
 * returns none fails the level with none_err, when it is answered (at once when run at once). */
int pg_defer_row(pg_txn_t *t, pg_stmt_t stmt, const pg_params_t *p, int none_err);
/* Whether a deferred write is queued on c; dropping the queue unsent (freeing what it owns). */
bool pg_queue_has_writes(const pg_conn_t *c);
void pg_queue_clear(pg_conn_t *c);
/* A statement run after what is queued: the prepared one named name (prepared from sql first
 * when the connection has not yet), or sql with parameters when name is NULL. */
typedef struct pg_call {
    const char *name;
    unsigned prep_bit; /* the bit of conn->prepared that says name is prepared */
    const char *sql;
    const pg_params_t *p;
    int format; /* of the result: 1 binary, 0 text */
} pg_call_t;
/* Runs call after what is queued, in one round trip; *res gets its result (TUPLES_OK or
 * COMMAND_OK; the caller PQclear()s it). Returns 0 or the mapped error (t marked failed). */
int pg_run(pg_txn_t *t, const pg_call_t *call, PGresult **res);
/* Runs calls[0..ncalls) (1 or 2) after what is queued, in one round trip: the server runs each
 * after the one before has finished, with a snapshot of its own (READ COMMITTED), and skips the
 * rest after an error. res[k] gets the result of calls[k] (the caller PQclear()s them; all NULL
 * on an error). Returns 0 or the mapped error of the first that failed (t marked failed). */
int pg_run_calls(pg_txn_t *t, const pg_call_t *calls, int ncalls, PGresult **res);
/* The top level of t. */
pg_txn_t *pg_top(pg_txn_t *t);
/* Ends nested level t on its connection: released (keep) or rolled back to its savepoint.
 * Nothing is sent for a level whose SAVEPOINT is still queued; otherwise the RELEASE (and
 * ROLLBACK TO) go with the parent's next statement or its COMMIT. Returns 0, or the error of a
 * send that a kept level's queued lock needed. */
int pg_end_level(pg_txn_t *t, bool keep);
/* A connection taken from the pool: reads the answer of a ROLLBACK sent without waiting;
 * false: the connection is unusable. */
bool pg_conn_settle(pg_conn_t *c);
/* Maps the error of result r (NULL: the connection's) and marks t failed. */
int pg_result_err(pg_txn_t *t, PGresult *r);

typedef int (*pg_row_fn)(PGresult *res, int row, void *arg);
/* Walks the rows of a cursor query (32, then 256 a FETCH); row returns 0 to go on, > 0 to stop (the
 * walk returns 0) or a negative error (returned). */
int pg_walk(pg_txn_t *t, pg_walk_t w, const pg_params_t *p, pg_row_fn row, void *arg);

/* ---- shared by the record files (store_pg_records.c, store_pg_segments.c) ---- */

/* The count a one-row count statement st answers, in *out. */
int pg_count_of(pg_txn_t *t, pg_stmt_t st, const pg_params_t *p, uint64_t *out);
/* The zone records decoded in t live in (ql_txn_zone); NULL: out of memory. */
msgpack_zone *pg_zone(pg_txn_t *t);
/* What a walk's row function gets: the caller's callback cb (of the record's type) and arg. */
typedef struct {
    pg_txn_t *t;
    void *cb;
    void *arg;
    int kind;
} pg_walk_ctx_t;
/* A walk over one model's rows under the model lock (so that in a write transaction the answer
 * holds until the commit: no other writer of the model can add an overlapping row meanwhile),
 * with the range [start, end) as parameters when ranged; row gets a pg_walk_ctx_t of cb, arg. */
int pg_model_walk(ql_txn_t *bt, const ql_id_t *model, bool ranged, int64_t start, int64_t end,
                  pg_walk_t walk, pg_row_fn row, void *cb, void *arg);

/* Takes the model lock of the transaction (once per savepoint level chain). The locks and the
 * fence epoch are in store_pg_locks.c. */
int pg_lock_model(pg_txn_t *t, const ql_id_t *model);
/* The same lock, taken by the caller's next statement instead of a statement of its own: when
 * *carry, that statement must take pg_advisory_xact_lock(*key) before it writes, and once it
 * has run the caller notes the lock with pg_lock_carried (not before: a put that fails its
 * checks before its statement leaves the lock untaken, and the next put of the level takes it). */
int pg_lock_model_carried(pg_txn_t *t, const ql_id_t *model, int64_t *key, bool *carry);
void pg_lock_carried(pg_txn_t *t, int64_t key);
/* Adds the model locks a released savepoint level took to its parent's. */
void pg_merge_locks(pg_txn_t *into, pg_txn_t *from);
/* The job rows t holds FOR UPDATE: a row locked (read or written) by this level with its
 * columns; the one seen last, looking from t up its parents; dropping a job's rows from every
 * level (a delete: a row not found is read again, which is always right); moving a released
 * level's rows to its parent. Out of memory, nothing is kept: only a cache. */
void pg_row_note(pg_txn_t *t, const ql_id_t *id, const char *project, const ql_id_t *model,
                 int64_t create_time, int16_t state);
const pg_jobrow_t *pg_row_find(const pg_txn_t *t, const ql_id_t *id);
void pg_row_forget(pg_txn_t *t, const ql_id_t *id);
void pg_rows_merge(pg_txn_t *into, pg_txn_t *from);
/* The step cache of a job row (store_pg_steps.c): steps (owned from then on) attached to the
 * row t holds at its own level (cleared when there is none); the steps of the row pg_row_find
 * gives (NULL: not known); dropping the job's steps from every level from t up (a step put:
 * always right, since a step not known is read again). */
void pg_row_set_steps(pg_txn_t *t, const ql_id_t *id, PGresult *steps);
PGresult *pg_row_steps(const pg_txn_t *t, const ql_id_t *id);
void pg_steps_forget(pg_txn_t *t, const ql_id_t *id);
/* The job engine epoch, read FOR SHARE once per write transaction (store_pg.c). */
int pg_fence_epoch(pg_txn_t *t, uint64_t *out);
void pg_fence_forget(pg_txn_t *t);
/* ql_fence_claim on PostgreSQL (store_pg_records.c). */
int pg_fence_claim(ql_txn_t *t, uint64_t token, uint64_t *cur);

/* SQLSTATE of an error result -> Qilin code. */
int pg_sqlstate_err(const char *state);

static inline pg_txn_t *pgt(ql_txn_t *t) {
    return (pg_txn_t *)t;
}

static inline pg_store_t *pgs(ql_store_t *s) {
    return (pg_store_t *)s;
}

static inline int64_t pg_get_i64(PGresult *r, int row, int col) {
    const uint8_t *p = (const uint8_t *)PQgetvalue(r, row, col);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static inline int32_t pg_get_i32(PGresult *r, int row, int col) {
    const uint8_t *p = (const uint8_t *)PQgetvalue(r, row, col);
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int16_t pg_get_i16(PGresult *r, int row, int col) {
    const uint8_t *p = (const uint8_t *)PQgetvalue(r, row, col);
    return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline bool pg_get_bool(PGresult *r, int row, int col) {
    return PQgetvalue(r, row, col)[0] != 0;
}

/* A uuid column (NULL: the zero id). */
static inline void pg_get_uuid(PGresult *r, int row, int col, ql_id_t *out) {
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 16)
        memset(out->b, 0, 16);
    else
        memcpy(out->b, PQgetvalue(r, row, col), 16);
}

extern const store_ops_t ql_pg_ops;

/* The SQL of each statement and walk (store_pg_sql.c). */
extern const char *const pg_stmt_sql[S_COUNT];
extern const char *const pg_walk_sql[W_COUNT];

/* Record operations (store_pg_records.c) and fsck (store_pg_fsck.c). */
int pg_meta_get_u64(ql_txn_t *t, const char *key, uint64_t *out);
int pg_meta_put_u64(ql_txn_t *t, const char *key, uint64_t value);
int pg_meta_get_str(ql_txn_t *t, const char *key, char *buf, size_t cap);
int pg_meta_put_str(ql_txn_t *t, const char *key, const char *value);
int pg_meta_delete(ql_txn_t *t, const char *key);
int pg_metadata_generation(ql_txn_t *t, uint64_t *out);
int pg_project_get(ql_txn_t *t, const char *name, unsigned flags, ql_project_t *out);
int pg_project_put(ql_txn_t *t, const ql_project_t *p);
int pg_project_foreach(ql_txn_t *t, ql_project_cb cb, void *arg);
int pg_project_count(ql_txn_t *t, uint64_t *out);
int pg_project_delete(ql_txn_t *t, const char *name);
int pg_model_delete(ql_txn_t *t, const ql_id_t *id);
int pg_model_get(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_model_t *out);
int pg_model_exists(ql_txn_t *t, const ql_id_t *id);
int pg_model_get_for_probe(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_model_t *out);
int pg_model_find_with_project(ql_txn_t *t, const char *project, const char *name, unsigned flags,
                               ql_project_t *p, ql_model_t *m, bool *found);
int pg_model_segment_exists(ql_txn_t *t, const ql_id_t *model, const ql_id_t *segment);
int pg_model_find(ql_txn_t *t, const char *project, const char *name, unsigned flags,
                  ql_model_t *out);
int pg_model_put(ql_txn_t *t, const ql_model_t *m);
int pg_model_foreach(ql_txn_t *t, const char *project, ql_model_cb cb, void *arg);
int pg_model_count(ql_txn_t *t, const char *project, uint64_t *out);
int pg_segment_get(ql_txn_t *t, const ql_id_t *id, ql_segment_t *out);
int pg_segment_exists(ql_txn_t *t, const ql_id_t *id);
int pg_segment_put(ql_txn_t *t, ql_segment_t *s);
int pg_segment_delete(ql_txn_t *t, const ql_id_t *id);
int pg_segment_foreach(ql_txn_t *t, const ql_id_t *model, ql_segment_cb cb, void *arg);
int pg_segment_foreach_overlapping(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                                   ql_segment_cb cb, void *arg);
int pg_segment_count(ql_txn_t *t, const ql_id_t *model, uint64_t *out);
int pg_job_get(ql_txn_t *t, const ql_id_t *id, unsigned flags, ql_job_t *out);
int pg_job_put(ql_txn_t *t, const ql_job_t *j);
int pg_job_delete(ql_txn_t *t, const ql_id_t *id);
int pg_job_foreach_state(ql_txn_t *t, ql_state_t state, ql_job_cb cb, void *arg);
int pg_job_foreach_state_ref(ql_txn_t *t, ql_state_t state, ql_job_state_ref_cb cb, void *arg);
int pg_job_foreach_state_target(ql_txn_t *t, ql_state_t state, ql_job_state_target_cb cb,
                                void *arg);
int pg_job_foreach_model(ql_txn_t *t, const ql_id_t *model, ql_job_cb cb, void *arg);
int pg_job_foreach_live(ql_txn_t *t, const ql_id_t *model, ql_live_job_cb cb, void *arg);
int pg_job_foreach_live_overlapping(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                                    ql_live_job_cb cb, void *arg);
int pg_probe_range(ql_txn_t *t, const ql_id_t *model, int64_t start, int64_t end,
                   ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg);
int pg_job_foreach_recent(ql_txn_t *t, const char *project, bool oldest_first, ql_job_ref_cb cb,
                          void *arg);
int pg_job_count(ql_txn_t *t, const char *project, uint32_t state_mask, uint64_t *out);
int pg_step_get(ql_txn_t *t, const ql_id_t *job, uint32_t seq, ql_step_t *out);
int pg_step_put(ql_txn_t *t, const ql_step_t *s);
int pg_step_foreach(ql_txn_t *t, const ql_id_t *job, ql_step_cb cb, void *arg);
int pg_output_get(ql_txn_t *t, const ql_id_t *job, uint32_t seq, char **out, size_t *len);
int pg_output_put(ql_txn_t *t, const ql_id_t *job, uint32_t seq, const char *text, size_t len);
/* ql_job_get_many in one query per chunk of ids (store_pg_job_many.c). */
int pg_job_get_many(ql_txn_t *t, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                    void *arg);
/* ql_probe_targets in one query per chunk of targets (store_pg_probe.c). */
int pg_probe_targets(ql_txn_t *t, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                     void *arg);
int pg_fsck(ql_store_t *s, void *out_file, ql_fsck_report_t *report);
/* ql_store_lock_open (store_pg_lock.c). */
int pg_lock_open(ql_store_t *s, const ql_store_lock_opts_t *opts, ql_store_lock_t **out,
                 ql_err_t *err);

/* Creates or upgrades the schema at open, under an advisory lock (store_pg_schema.c). */
int pg_schema_setup(pg_store_t *s, ql_err_t *err);
/* Drops the schema with everything in it (ql_store_opts_t.pg_drop_at_close), best effort. */
void pg_schema_drop(pg_store_t *s);
/* A malloc'ed copy of url (conninfo or URL) with the password replaced by "***", or NULL. */
char *pg_mask_password(const char *url);

/* ---- wake-ups (store_pg_changes.c, docs/postgresql.md) ---- */

/* Notes that t's write wakes job: it is named in the NOTIFY of the top-level commit. Never
 * fails: without memory the commit notifies "anything may have changed". */
void pg_changes_note(pg_txn_t *t, const ql_id_t *job);
/* Moves what a released savepoint level noted to its parent. */
void pg_changes_merge(pg_txn_t *into, pg_txn_t *from);
/* The statement that commits t: "COMMIT", preceded in the same round trip by the pg_notify
 * of what t noted. Written into buf (PG_COMMIT_SQL_MAX bytes). */
#define PG_COMMIT_SQL_MAX 8448
const char *pg_changes_commit_sql(pg_txn_t *t, char *buf);
/* Sets s->channel from the schema's name (at open). */
void pg_changes_init(pg_store_t *s);
/* Closes the change session (at close). */
void pg_changes_close(pg_store_t *s);
int pg_changes_listen(ql_store_t *s, ql_err_t *err);
int pg_changes_fd(ql_store_t *s);
int pg_changes_drain(ql_store_t *s, ql_store_change_cb cb, void *arg);

/* ---- the servers of the store (store_pg_servers.c, docs/postgresql.md) ---- */
/* The change session's application name, which marks a live announcement. */
void pg_servers_app_name(const pg_store_t *s, char *buf, size_t cap);
int pg_servers_announce(ql_store_t *s, const char *server_id, long pid, const char *info);
/* Announces again on a change session just opened; best effort (0 or QL_EUNAVAILABLE). */
int pg_servers_on_listen(pg_store_t *s);
int pg_servers_foreach(ql_txn_t *t, ql_store_server_cb cb, void *arg);

/* Opens a connection of s with its session settings and prepared statements; closes one. */
int pg_conn_open(pg_store_t *s, pg_conn_t **out, ql_err_t *err);
void pg_conn_close(pg_conn_t *c);

#endif
