/*
 * The metadata store: projects, models, segments, jobs, steps and step outputs, with the indexes
 * that keep every hot path a B-tree lookup (docs/design/metadata.md, Store). Two backends give
 * the same guarantees: one LMDB environment under a data directory (the default, described
 * below), or a PostgreSQL database that several servers may share (opts.url; what differs is in
 * docs/postgresql.md, and tests/storage/test_store_contract.c is the contract of both).
 *
 * DESIGN.
 * - Transactions: every read or change goes through a ql_txn_t. A write transaction changes
 *   records and all their index entries together; LMDB's MVCC means a reader never sees half of
 *   it. Only the writer thread (ql_writer.h) opens write transactions in a running server; tools
 *   and tests may open them directly (one at a time per environment: LMDB serialises writers).
 * - Other processes: each top-level write transaction holds the store's writer guard
 *   (writer_guard.h) from begin to commit or abort, so waiting for another process's write is
 *   bounded: a holder stopped for longer than writer_stall_ms is killed.
 * - Read transactions may be used from any thread (the environment is opened with MDB_NOTLS),
 *   one thread at a time per transaction.
 * - Records read inside a transaction are decoded into caller-owned structs before the
 *   callback or function returns: nothing returned points into the map, so results outlive the
 *   transaction. Release them with the record's _free function.
 * - Durability: a write transaction's commit is synced (LMDB's default; MDB_NOSYNC is never
 *   used). ql_txn_commit() returns only once the data is on disk.
 * - Map size: fixed at open (default QL_STORE_DEFAULT_MAP_SIZE; the file grows only as used).
 *   A write that does not fit fails with QL_EMAPFULL; reads keep working.
 *
 * Iteration callbacks return 0 to continue, a positive value to stop (the foreach returns 0),
 * or a negative error (the foreach returns it).
 */
#ifndef QL_STORE_H
#define QL_STORE_H

#include "base/ql_error.h"
#include "storage/ql_records.h"

#include <stdbool.h>
#include <stdint.h>

#define QL_STORE_DEFAULT_MAP_SIZE (64ull << 30)
#define QL_STORE_DEFAULT_WRITER_STALL_MS 2000
/* Schema of the environment: a build refuses a store whose major version is higher. */
#define QL_SCHEMA_MAJOR 2
#define QL_SCHEMA_MINOR 0

typedef struct ql_store ql_store_t;
typedef struct ql_txn ql_txn_t;

typedef struct ql_store_opts {
    const char *path;     /* data directory, created when missing (not in read_only mode) */
    uint64_t map_size;    /* bytes; 0: QL_STORE_DEFAULT_MAP_SIZE */
    unsigned max_readers; /* 0: 126 */
    bool read_only;
    uint64_t id_seed; /* nonzero: deterministic ids from this seed (simulator, tests) */
    /* How long a write transaction waits for another process's before it looks at that
     * process, and kills it if it is stopped (the writer guard, storage/writer_guard.h;
     * qilin.storage.writer-stall-ms). 0: QL_STORE_DEFAULT_WRITER_STALL_MS. */
    int64_t writer_stall_ms;
    struct ql_log *log; /* borrowed, may be NULL (stderr): the writer guard's decisions */
    /* PostgreSQL (docs/postgresql.md): NULL or "": the LMDB store under path. Otherwise a
     * postgresql:// URL or a libpq conninfo of the database that holds the metadata; path then
     * only holds the step logs. map_size and max_readers do not apply; writer_stall_ms bounds
     * how long a write transaction may sit idle between two statements (its client stopped)
     * before the database ends its session, which frees the rows it locked. */
    const char *url;
    const char *pg_schema;      /* NULL or "": "qilin" (created when missing) */
    unsigned pg_pool_size;      /* connections kept; 0: 6 */
    int64_t pg_lock_timeout_ms; /* a write's wait for another's lock; 0: 2000 */
    bool pg_drop_at_close;      /* the schema is this store's alone (the simulator's): it is
                                   dropped, with everything in it, when the store closes */
    /* Refuse to open (QL_EINVAL) unless the database commits synchronously to a standby
     * (synchronous_standby_names set, synchronous_commit not local or off): a failover to an
     * asynchronous replica could lose acknowledged commits (docs/postgresql.md). */
    bool pg_require_sync_replication;
} ql_store_opts_t;

/* Opens (creating if needed) the store. On failure *out is NULL and err says why, e.g. a store
 * written by a newer incompatible version (QL_EVERSION). */
int ql_store_open(const ql_store_opts_t *opts, ql_store_t **out, ql_err_t *err);
/* Closes the store. No transaction may be open. */
void ql_store_close(ql_store_t *store);
/* The data directory (borrowed, valid until close). */
const char *ql_store_path(const ql_store_t *store);
/* The backend's upkeep, called at open and by job servers every second; cheap. LMDB frees the
 * reader slots of processes that died inside a read transaction (SIGKILL, a crash): a stale
 * slot pins the pages of its snapshot, so while other processes keep the store open the file
 * would grow with every write; one pass over the reader table. *cleared (may be NULL) gets how
 * many slots were freed. PostgreSQL needs nothing here (*cleared = 0): its pool replaces a
 * broken session when it hands it out. */
int ql_store_maintain(ql_store_t *store, int *cleared);
/* Whether this open upgraded the store from an older schema: true with the old version in
 * *major and *minor (for the caller to log), false for a store that was current. */
bool ql_store_upgraded_from(const ql_store_t *store, uint64_t *major, uint64_t *minor);
/* A fresh id: a time-ordered random UUID (version 7), so that records created together sit
 * together in the B-trees (or, with id_seed, the next deterministic one). Thread-safe. */
void ql_store_new_id(ql_store_t *store, ql_id_t *out);

typedef struct ql_store_stat {
    const char *backend; /* "lmdb" or "postgresql" (static string) */
    uint64_t map_size;   /* configured limit, bytes (0: none, PostgreSQL) */
    uint64_t used_bytes; /* pages in use times page size */
    uint64_t file_bytes; /* size of the data file on disk */
} ql_store_stat_t;
int ql_store_stat(ql_store_t *store, ql_store_stat_t *out);
/* Writes a compacted copy of the store into the existing, empty folder dir (LMDB's data.mdb
 * without its free pages: LMDB reuses freed pages but never gives them back, so the file never
 * shrinks by itself). The copy is one read transaction: consistent, and safe beside writers.
 * UV_ENOTSUP on PostgreSQL (VACUUM FULL is the database's own tool); an I/O error or a full disk
 * as a negative code. Blocks for as long as the copy takes. */
int ql_store_compact(ql_store_t *store, const char *dir);

/* Whether servers on other hosts may share this store: true for PostgreSQL, where a step's
 * recorded server (ql_step_t.server_id) says which host its processes and its log are on;
 * false for LMDB, whose every server runs on this machine and shares its data directory
 * (docs/step-processes.md, Several hosts). */
bool ql_store_spans_hosts(const ql_store_t *store);
/* The store's backend: "lmdb" or "postgresql" (static string, no I/O; ql_store_stat_t.backend
 * without the statistics). */
const char *ql_store_backend(const ql_store_t *store);

/* Seam for tests: called after every successful commit of a top-level write transaction (the
 * sync has completed when it runs), on the committing thread. NULL to remove. */
typedef void (*ql_store_commit_hook)(void *arg);
void ql_store_set_commit_hook(ql_store_t *store, ql_store_commit_hook hook, void *arg);

/* ---- the job engine lock of a shared store (PostgreSQL only) ----
 *
 * Several servers on several hosts share one PostgreSQL store; one of them, the master, holds
 * the job engine lock (docs/postgresql.md, The job engine lock; docs/design/multi-host.md). The
 * lock is a session advisory lock, pg_try_advisory_lock(<key derived from the schema>), taken on
 * a session of its own (never one of the pool's): the lock lives exactly as long as that
 * session, so it frees itself when the holder's process dies. The session has TCP keepalives
 * on both ends (idle 5 s, interval 2 s, 3 probes) and tcp_user_timeout 10 s, so a holder whose
 * host is gone loses it in about 11 s; a statement timeout of 2 s bounds each of its queries.
 *
 * Winning the lock raises the fencing epoch (ql_fence_raise, meta "job_engine_epoch") and
 * records the holder (meta "engine_holder": server id, API address, pid, epoch and the backend
 * pid of its lock session) and its lease (meta "engine_lease": the database's clock) in one write
 * transaction. The holder renews the lease every QL_LOCK_RENEW_MS (ql_store_lock_renew). A
 * server whose try finds the lock held reads the holder, and when the lease is older than
 * lease_ms by the database's clock (the holder is stopped, wedged or cut off, and its session
 * may still be alive: a stopped process's kernel answers keepalives) it ends the holder's lock
 * session with pg_terminate_backend, logs why, and takes the freed lock the normal way, raising
 * the epoch: whatever the old holder still writes is refused by fencing (QL-00011).
 *
 * A transaction-pooling proxy (PgBouncer's pool_mode=transaction) would hand the session's
 * backend, and its lock, to other clients between statements: ql_store_lock_open refuses one,
 * seen as a lock session whose pg_backend_pid() changes between two statements or is shared
 * with another session; a change seen later ends the holding.
 *
 * LMDB has no such lock (its servers share a data directory on one host and use the file lock,
 * scheduler/ql_lock.h): ql_store_lock_open answers UV_ENOTSUP there.
 *
 * Threads: a lock object is used by one thread at a time (the node's loop thread).
 * ql_store_lock_open, _try, _release and _set_address make blocking round trips, bounded by the
 * statement timeout and the keepalives; ql_store_lock_renew and _still_held never wait for the
 * database: the renewal is sent and its answer collected by the next call. */
typedef struct ql_store_lock ql_store_lock_t;

typedef struct ql_store_lock_opts {
    const char *server_id; /* ql_config_server_id; copied */
    const char *address;   /* the API's "host:port"; copied (see ql_store_lock_set_address) */
    /* A server whose try finds the holder's lease older than this ends the holder's session
     * (qilin.server.master-lease-ms); 0: never. The holder also counts itself cut off when a
     * renewal stays unanswered for half of it (at least 1 s; 10 s when 0). */
    int64_t lease_ms;
    struct ql_log *log; /* borrowed, may be NULL: terminations and refusals */
    /* Fault seam for tests: every pg_backend_pid() read on the lock session goes through it
     * (the value it returns is used), to play a transaction-pooling proxy. NULL in servers. */
    int (*backend_pid_hook)(void *arg, int pid);
    void *hook_arg;
} ql_store_lock_opts_t;

/* Who holds the lock, as recorded by the holding (ql_store_lock_try fills it when the lock is
 * someone else's). */
typedef struct ql_store_holder {
    bool known; /* the details below are the current holding's (false: it has not recorded
                   them yet, or the holder is another kind of client) */
    char server_id[208];
    char address[128];
    long pid;
    uint64_t epoch;
    int backend_pid;      /* the holder's lock session on the database server */
    int64_t lease_age_ms; /* by the database's clock; -1: unknown */
} ql_store_holder_t;

/* Opens the lock's own session on store's database and checks that it is a real session (no
 * transaction pooling). store is borrowed and must outlive the lock. Errors: UV_ENOTSUP on LMDB;
 * QL_EUNAVAILABLE (the database cannot be reached); QL_EINVAL (a transaction-pooling proxy),
 * with err saying why. *out is the caller's, freed by ql_store_lock_close. */
int ql_store_lock_open(ql_store_t *store, const ql_store_lock_opts_t *opts, ql_store_lock_t **out,
                       ql_err_t *err);
/* Tries the lock once (reconnecting the session first when it was lost). Won (or held
 * already): *acquired and *epoch (the holding's fencing token). Held by another: *acquired is
 * false and holder (may be NULL) says who; if its lease is stale it is ended first (see above)
 * and the lock taken if that freed it. An error (err says why) leaves the lock not held. */
int ql_store_lock_try(ql_store_lock_t *lock, bool *acquired, uint64_t *epoch,
                      ql_store_holder_t *holder, ql_err_t *err);
/* Whether the holding is still in force as far as the lock can tell: its session is alive,
 * the last renewal was not refused (the epoch moved) and none has waited for an answer past the
 * bound. When not, why (cap bytes, may be NULL) says why, and the holding is over (release it).
 * Never waits for the database. */
bool ql_store_lock_still_held(ql_store_lock_t *lock, char *why, size_t cap);
/* The holder renews its lease: collects the previous renewal's answer and sends the next
 * (nothing while one is unanswered). Call every QL_LOCK_RENEW_MS while held. */
void ql_store_lock_renew(ql_store_lock_t *lock);
/* Ends the holding: the lock is unlocked, or its session closed when the holding was lost
 * (which frees whatever it still held). Nothing when not held. */
void ql_store_lock_release(ql_store_lock_t *lock);
/* Changes the API address recorded for the holdings (a server listening on port 0 knows its
 * address only once it listens); a current holding's record is rewritten, fenced. */
int ql_store_lock_set_address(ql_store_lock_t *lock, const char *address);
/* Releases, closes the session and frees the lock. NULL is fine. */
void ql_store_lock_close(ql_store_lock_t *lock);

/* ---- changes made by other servers (docs/architecture.md and docs/postgresql.md, Wake-ups) ----
 *
 * Several servers may share a PostgreSQL store. Every committed write that creates a READY job
 * or moves a job to READY, PAUSED or DISCARDED (a submission, a job action) notifies the other
 * users of the schema: its commit sends one NOTIFY naming the jobs, which PostgreSQL delivers
 * only when the transaction commits, in commit order. A server hears them on a session of its
 * own (LISTEN) whose socket it watches, so the master starts a build submitted elsewhere, and
 * stops a step paused elsewhere, without waiting for its next poll. On LMDB (whose writers are
 * processes of one host) the same commits send one unix datagram naming the jobs to every
 * listener's socket in the data directory's wake/ folder, after the commit; a server's change
 * session is its own socket there (store_lmdb_changes.c). A read-only LMDB store cannot
 * listen: UV_ENOTSUP, and there is no socket.
 *
 * Threads: the three calls use the change session, which belongs to one thread at a time (the
 * loop thread of a server); they run beside transactions on other threads. The session is
 * closed with the store. */

/* Opens the change session (a connection of its own, LISTEN on the schema's channel), first
 * closing a broken one: 0; UV_ENOTSUP on a read-only LMDB store; QL_EUNAVAILABLE when PostgreSQL
 * cannot be reached (err says why; try again later, with backoff). After a session was lost, the
 * next drain of the new one first reports "anything may have changed" (job NULL): what was sent
 * while nobody listened is gone. Blocks for the connection's round trips. */
int ql_store_changes_listen(ql_store_t *store, ql_err_t *err);
/* The descriptor to watch for readability (uv_poll) while listening: a duplicate of the change
 * session's socket, owned by the store; -1 without a session (never opened). It stays open
 * until the next ql_store_changes_listen or the store's close, also once a drain found the
 * session broken (libpq's own socket is closed then): stop watching it before either. */
int ql_store_changes_fd(ql_store_t *store);
/* What a drain reports: a job named by a committed change, or NULL: anything may have changed
 * (the session was replaced, or a transaction changed too many jobs to name). The id is
 * borrowed for the call. A job may be reported more than once. */
typedef void (*ql_store_change_cb)(void *arg, const ql_id_t *job);
/* Reads what arrived on the change session without blocking and reports it through cb: 0;
 * QL_EUNAVAILABLE when the session is broken (or there is none): stop watching its socket and
 * call ql_store_changes_listen again later. */
int ql_store_changes_drain(ql_store_t *store, ql_store_change_cb cb, void *arg);

/* ---- the servers that share a store (docs/postgresql.md, Servers of a store) ----
 *
 * On PostgreSQL each server announces itself in the store (its id, its pid and a short text
 * of its own, the API's JSON), tied to its change session: the announcement counts exactly
 * while that session lives, so a server that dies drops out at once, with no heartbeat. Any
 * server lists them all, from every host, and learns which one holds the job engine lock now.
 * LMDB keeps no such list (its servers share one data directory, whose presence files serve):
 * both calls answer UV_ENOTSUP there.
 *
 * Threads: ql_store_announce on the thread that owns the change session (the loop thread); it
 * blocks for one round trip when the session is open and is made again by every
 * ql_store_changes_listen. ql_store_servers_foreach in any transaction. */

/* Announces this server (server_id and info copied): 0, UV_ENOTSUP, or QL_EUNAVAILABLE when the
 * change session is open and the write failed (the next session announces again). */
int ql_store_announce(ql_store_t *store, const char *server_id, long pid, const char *info);
/* One live announcement: the info given, and whether its server holds the job engine lock. */
typedef void (*ql_store_server_cb)(void *arg, const char *info, bool master);
int ql_store_servers_foreach(ql_txn_t *txn, ql_store_server_cb cb, void *arg);

/* ---- transactions ---- */

int ql_txn_begin(ql_store_t *store, bool write, ql_txn_t **out);
/* A read transaction for lookups that need no snapshot in common: each sees the latest commit,
 * and two of them may see different ones. On PostgreSQL it sends no BEGIN and no ROLLBACK: each
 * statement is a transaction of its own, so a transaction of one statement reads what a
 * REPEATABLE READ one would, in a third of the statements (docs/postgresql.md, Round trips); on
 * LMDB it is an ordinary read transaction. End it with ql_txn_abort. For callers whose reads
 * are advisory (a write re-checks what it relies on) or single. */
int ql_txn_begin_lookups(ql_store_t *store, ql_txn_t **out);
/* A nested write transaction inside parent: its changes become part of parent when it commits,
 * and vanish when it aborts, leaving parent usable. */
int ql_txn_begin_nested(ql_txn_t *parent, ql_txn_t **out);
/* Commits and frees txn (also on failure). A top-level write commit is synced. */
int ql_txn_commit(ql_txn_t *txn);
/* Aborts and frees txn. */
void ql_txn_abort(ql_txn_t *txn);
bool ql_txn_is_write(const ql_txn_t *txn);
ql_store_t *ql_txn_store(ql_txn_t *txn);

/* ---- small values in the meta table (locks, fencing epochs, counters) ---- */

int ql_meta_get_u64(ql_txn_t *txn, const char *key, uint64_t *out); /* QL_ENOTFOUND */
int ql_meta_put_u64(ql_txn_t *txn, const char *key, uint64_t value);
/* Copies a string value into buf (cap bytes with NUL). */
int ql_meta_get_str(ql_txn_t *txn, const char *key, char *buf, size_t cap);
int ql_meta_put_str(ql_txn_t *txn, const char *key, const char *value);
/* Removes key in a write transaction: 0 also when it was not there; QL_EINVAL for the fencing
 * epoch, which only ever grows. */
int ql_meta_delete(ql_txn_t *txn, const char *key);

/* A counter raised by every project or model write (in the same transaction): a cached,
 * decoded copy of projects and models is exact while the generation it was read at holds. */
int ql_store_metadata_generation(ql_txn_t *txn, uint64_t *out);

/* ---- projects ---- */

int ql_project_get(ql_txn_t *txn, const char *name, unsigned flags, ql_project_t *out);
/* Inserts or replaces the project of that name. */
int ql_project_put(ql_txn_t *txn, const ql_project_t *p);
typedef int (*ql_project_cb)(const ql_project_t *p, void *arg);
/* Projects in name order (the record is borrowed for the callback's duration). */
int ql_project_foreach(ql_txn_t *txn, ql_project_cb cb, void *arg);
int ql_project_count(ql_txn_t *txn, uint64_t *out);
/* Deletes an empty project: QL_ENOTFOUND when there is none; QL_EINVAL while it still has models
 * or jobs (ql_project_drop, engine/ql_jobs.h, removes them first). */
int ql_project_delete(ql_txn_t *txn, const char *name);

/* ---- models ---- */

int ql_model_get(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_model_t *out);
/* ql_model_get for a write that goes on to probe the model's segments or live jobs: it also
 * takes the model's lock that the probes need (docs/postgresql.md, rule 1), on PostgreSQL in
 * the same statement. */
int ql_model_get_for_probe(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_model_t *out);
/* Whether the model exists, without decoding it: 0 or QL_ENOTFOUND (or an error). */
int ql_model_exists(ql_txn_t *txn, const ql_id_t *id);
/* Whether the model and the segment (a zero id: none to look for) both exist, without decoding
 * them: 0 or QL_ENOTFOUND (or an error). One statement on PostgreSQL. */
int ql_model_segment_exists(ql_txn_t *txn, const ql_id_t *model, const ql_id_t *segment);
int ql_model_find(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                  ql_model_t *out);
/* The project (QL_ENOTFOUND when there is none; p is then untouched) and, when *found, its
 * model of that name in m: one statement on PostgreSQL. Both to be freed by the caller. */
int ql_model_find_with_project(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                               ql_project_t *p, ql_model_t *m, bool *found);
/* Inserts or replaces the model with that id. QL_EEXIST when another model of the project has
 * the name; the project must exist (QL_ENOTFOUND). */
int ql_model_put(ql_txn_t *txn, const ql_model_t *m);
typedef int (*ql_model_cb)(const ql_model_t *m, void *arg);
/* Models of a project in name order (record borrowed for the callback). */
int ql_model_foreach(ql_txn_t *txn, const char *project, ql_model_cb cb, void *arg);
int ql_model_count(ql_txn_t *txn, const char *project, uint64_t *out);
/* Deletes a model with its name entry and count: QL_ENOTFOUND when there is none; QL_EINVAL
 * while it still has segments or jobs (ql_model_drop, engine/ql_jobs.h, removes them first). */
int ql_model_delete(ql_txn_t *txn, const ql_id_t *id);

/* ---- segments ---- */

int ql_segment_get(ql_txn_t *txn, const ql_id_t *id, ql_segment_t *out);
/* Whether the segment exists, without decoding it: 0 or QL_ENOTFOUND (or an error). */
int ql_segment_exists(ql_txn_t *txn, const ql_id_t *id);
/* Inserts or updates (by id) a segment. The store picks its index layer (s->layer is set). The
 * overlap RULES are not checked here (see ql_meta.h); this only keeps the indexes right. */
int ql_segment_put(ql_txn_t *txn, ql_segment_t *s);
int ql_segment_delete(ql_txn_t *txn, const ql_id_t *id);
typedef int (*ql_segment_cb)(const ql_segment_t *s, void *arg);
/* A model's segments in (start, end) order (record borrowed for the callback). */
int ql_segment_foreach(ql_txn_t *txn, const ql_id_t *model, ql_segment_cb cb, void *arg);
/* Segments of model overlapping [start, end): O(log n + k). Order: by start within each index
 * layer; use ql_segment_overlapping() for one sorted list. */
int ql_segment_foreach_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                                   ql_segment_cb cb, void *arg);
/* Collects overlapping segments sorted by (start, end, id) into out (cap entries, no extras). Sets
 * *n to the number found; returns QL_ETOOBIG when more than cap overlap (the first cap are
 * returned). No allocation. */
int ql_segment_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                           ql_segment_t *out, size_t cap, size_t *n);
int ql_segment_count(ql_txn_t *txn, const ql_id_t *model, uint64_t *out);

/* ---- jobs ---- */

int ql_job_get(ql_txn_t *txn, const ql_id_t *id, unsigned flags, ql_job_t *out);
/* Inserts or updates (by id) a job and all of its index entries and counts. */
int ql_job_put(ql_txn_t *txn, const ql_job_t *j);
/* Deletes a job with its index entries and counts, its steps and their stored outputs, in txn;
 * QL_ENOTFOUND when there is no such job. Whatever the job's state: the rules (only final jobs
 * may go, and why) are the callers' (ql_meta_delete_jobs, ql_meta_purge_jobs). The step logs on
 * disk are not transactional: remove them with ql_store_remove_job_logs once txn committed. */
int ql_job_delete(ql_txn_t *txn, const ql_id_t *id);
/* Removes the step logs of a job kept by this host, <data directory>/logs/<job>/ and the files
 * in it; 0 when there were none. Blocks for the file system (a few unlinks). */
int ql_store_remove_job_logs(ql_store_t *store, const ql_id_t *job);
typedef int (*ql_job_cb)(const ql_job_t *j, void *arg);
/* The jobs ids[0..n) name, in that order (an id twice: twice), decoded with flags: cb runs once
 * per job that exists, and a missing id is skipped; its return stops the calls as a foreach's
 * does. For pages of a listing: on PostgreSQL one statement per 1,024 ids instead of one per job,
 * the rows received before the first call (cb may query again); on LMDB ql_job_get in a loop.
 * The rows are read without locks, also in a write transaction (use ql_job_get to lock one). */
int ql_job_get_many(ql_txn_t *txn, size_t n, const ql_id_t *ids, unsigned flags, ql_job_cb cb,
                    void *arg);
/* Jobs in state, in (priority, create time) order: what the fetcher picks. */
int ql_job_foreach_state(ql_txn_t *txn, ql_state_t state, ql_job_cb cb, void *arg);
/* The same order from the index alone: id, priority and create time, no record decoding. */
typedef int (*ql_job_state_ref_cb)(const ql_id_t *id, int priority, int64_t create_time, void *arg);
int ql_job_foreach_state_ref(ql_txn_t *txn, ql_state_t state, ql_job_state_ref_cb cb, void *arg);
/* The same walk, with each job's project and model when the backend has them without reading
 * the record (PostgreSQL: columns of the same query); otherwise project and model are NULL
 * (LMDB: its index holds neither, and reading the record there is cheap). model is NULL too for
 * a job without a model. */
typedef int (*ql_job_state_target_cb)(const ql_id_t *id, int priority, int64_t create_time,
                                      const char *project, const ql_id_t *model, void *arg);
int ql_job_foreach_state_target(ql_txn_t *txn, ql_state_t state, ql_job_state_target_cb cb,
                                void *arg);
/* A model's jobs in creation order. */
int ql_job_foreach_model(ql_txn_t *txn, const ql_id_t *model, ql_job_cb cb, void *arg);

/* The non-final jobs of a model, from a small index (no record decoding). */
typedef struct ql_live_job {
    ql_id_t id;
    ql_state_t state;
    bool has_range;
    int64_t start;
    int64_t end;
} ql_live_job_t;
typedef int (*ql_live_job_cb)(const ql_live_job_t *j, void *arg);
int ql_job_foreach_live(ql_txn_t *txn, const ql_id_t *model, ql_live_job_cb cb, void *arg);
/* The non-final jobs of a model whose range overlaps [start, end), by range start: O(log n + k)
 * however many live jobs the model has (see store_lmdb_jobs.c for the invariant it rests on). */
int ql_job_foreach_live_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                                    ql_live_job_cb cb, void *arg);

/* ---- overlap probes of many targets at once (the dispatcher's scan) ---- */

typedef struct ql_probe_target {
    ql_id_t model;
    int64_t start, end; /* half-open [start, end); empty when start >= end */
} ql_probe_target_t;

/* One target's answer. Both arrays are borrowed for the callback's duration. */
typedef struct ql_probe_result {
    size_t index; /* into targets[] */
    /* The model's segments overlapping [start, end), by (start, end, id): what
     * ql_segment_foreach_overlapping() gives, sorted. */
    const ql_segment_t *segs;
    size_t n_segs;
    /* The model's live (non-final) ranged jobs overlapping the span of the NEW segments among
     * segs, from their lowest start to their highest end, by range start: the jobs that can own
     * those NEW segments (a NEW segment's job has the segment's range). None when no segment is
     * NEW: ql_job_foreach_live_overlapping() over that span. */
    const ql_live_job_t *jobs;
    size_t n_jobs;
} ql_probe_result_t;
typedef int (*ql_probe_cb)(const ql_probe_result_t *r, void *arg);

/* Answers n targets (n may be 0): cb runs once per target, in the order of targets[], also for
 * a target that nothing overlaps. A non-zero return of cb stops the probe and is returned. The
 * answers are those of the per-model probes in the same transaction; in a write transaction
 * every target's model lock is taken as by those probes. LMDB runs the per-model probes in a
 * loop; PostgreSQL answers thousands of targets per round trip (docs/postgresql.md), which is
 * what makes a scan of 100,000 models possible there. */
int ql_probe_targets(ql_txn_t *txn, size_t n, const ql_probe_target_t *targets, ql_probe_cb cb,
                     void *arg);

/* A build's two overlap probes in one call: the segments of model overlapping [start, end), as
 * ql_segment_foreach_overlapping() gives them, to seg_cb, then the live ranged jobs overlapping
 * it, as ql_job_foreach_live_overlapping() gives them, to job_cb (records borrowed for the
 * callback). A positive return of either callback stops the whole probe (the jobs are then not
 * given) and 0 is returned; a negative one is returned. Nothing when start >= end. The model
 * lock is taken as by those probes. PostgreSQL answers both in one statement
 * (docs/postgresql.md, Round trips); LMDB runs the two probes. */
int ql_probe_range(ql_txn_t *txn, const ql_id_t *model, int64_t start, int64_t end,
                   ql_segment_cb seg_cb, ql_live_job_cb job_cb, void *arg);

/* Jobs of a project (NULL: of every project), most recently modified first (or oldest first
 * when oldest_first). The callback gets the id and state from the index; decode with
 * ql_job_get only what is shown. */
typedef int (*ql_job_ref_cb)(const ql_id_t *id, ql_state_t state, int64_t modify_time, void *arg);
int ql_job_foreach_recent(ql_txn_t *txn, const char *project, bool oldest_first, ql_job_ref_cb cb,
                          void *arg);
/* Number of jobs of a project (NULL: all) whose state is in state_mask (bit 1 << state), from
 * counters on LMDB (no scan); an index-only count on PostgreSQL. */
int ql_job_count(ql_txn_t *txn, const char *project, uint32_t state_mask, uint64_t *out);

/* ---- steps and their output ---- */

int ql_step_get(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, ql_step_t *out);
int ql_step_put(ql_txn_t *txn, const ql_step_t *s);
typedef int (*ql_step_cb)(const ql_step_t *s, void *arg);
/* A job's steps in sequence order. */
int ql_step_foreach(ql_txn_t *txn, const ql_id_t *job, ql_step_cb cb, void *arg);
/* The stored (capped) output of a step: *out is a malloc'd NUL-terminated copy the caller
 * frees; QL_ENOTFOUND when none was stored. */
int ql_output_get(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, char **out, size_t *len);
int ql_output_put(ql_txn_t *txn, const ql_id_t *job, uint32_t seq, const char *text, size_t len);

/* ---- consistency check (qilin fsck) ---- */

typedef struct ql_fsck_report {
    uint64_t projects, models, segments, jobs, steps;
    uint64_t violations; /* broken invariants: fsck fails */
    uint64_t warnings;   /* e.g. orphan NEW segments: reported, not failures */
} ql_fsck_report_t;

/* Checks every invariant of docs/design/metadata.md and the indexes against the records, printing
 * one line per finding to out (may be NULL). Returns 0 when the check ran (see violations). */
int ql_store_fsck(ql_store_t *store, void *out_file, ql_fsck_report_t *report);

#endif
