/*
 * ZooKeeper coordination (docs/zookeeper.md): one ZooKeeper session per server, on the server's
 * libuv loop, and the recipes the ZooKeeper schedulers hold on it: the global job engine lock
 * (scheduler 0), leader election (scheduler 100, and scheduler 2's dispatcher), per-job locks
 * (scheduler 2) and the ensemble's identity (the fence_id node).
 *
 * DESIGN.
 * - Threads. libzookeeper_mt runs an I/O thread and a completion thread per handle. Only its
 *   asynchronous calls are used. Its completions and watch events are copied by its completion
 *   thread into a queue that the loop drains (uv_async_t), like the writer's answers
 *   (storage/include/storage/ql_writer.h): every callback of this header runs on the loop
 *   thread, and every function is for the loop thread unless it says otherwise. The library's
 *   calls that may block (zookeeper_init resolves host names; zookeeper_close sends the close
 *   request and waits for its answer) run on a helper thread of the session.
 * - Identity. The session is the identity of every holding: while it lives, the nodes it made
 *   are its own, so they are deleted without comparing their data, and a node found after a
 *   lost answer is adopted only when its ephemeral owner is this session.
 * - Tokens. Every holding's token is its node's creation zxid (czxid), which only grows: every
 *   acquisition makes a new node. A holder claims it in the store (ql_fence_claim,
 *   ql_job_claim in storage/include/storage/ql_meta.h) before acting on it, and every change
 *   it makes under the holding is checked against the store inside its transaction. Nothing
 *   here is safety on its own: ZooKeeper can only say what was true a moment ago.
 * - Liveness follows the loop. The loop stamps a heartbeat every QL_ZK_HEARTBEAT_MS; the
 *   helper thread closes the session when the heartbeat is older than half the session
 *   timeout, so a wedged or stopped server loses its ephemeral nodes at once instead of keeping
 *   them alive from the library's own threads. The loop learns it when it runs again
 *   (QL_ZK_EXPIRED).
 * - States (ql_zk_state_t) are reported to listeners in this order of life:
 *   CONNECTING -> CONNECTED (a new session whose persistent parents exist) -> SUSPENDED (the
 *   connection was lost; the session may live on) -> RECONNECTED (it did: every holding is
 *   intact) or DOUBTFUL (suspended for suspend_kill_ms: stop running steps) and then
 *   RECONNECTED or EXPIRED (the session ended: every holding is gone). After EXPIRED the
 *   session has no handle until ql_zk_reopen. FAILED is fatal (authentication failed, or
 *   ZooKeeper refused the cluster's paths); the reason says which.
 * - Recipes join by themselves whenever the session becomes CONNECTED and report their
 *   holdings (HELD with the token, STANDBY with the holder, LOST with the reason). A recipe's
 *   callbacks never run after its free.
 */
#ifndef QL_ZK_H
#define QL_ZK_H

#include "base/base.h"
#include "config/ql_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* How often the loop stamps the heartbeat the watchdog reads. */
#define QL_ZK_HEARTBEAT_MS 250

typedef struct ql_zk ql_zk_t;

typedef enum ql_zk_state {
    QL_ZK_CONNECTING = 0,
    QL_ZK_CONNECTED,   /* a new session; its paths exist: recipes (re)join */
    QL_ZK_SUSPENDED,   /* connection lost: stop picking and scanning, keep steps running */
    QL_ZK_RECONNECTED, /* the same session again: every holding is intact */
    QL_ZK_DOUBTFUL,    /* still suspended after suspend_kill_ms: stop every running step */
    QL_ZK_EXPIRED,     /* the session ended (expired, or closed by the watchdog): all is lost */
    QL_ZK_FAILED,      /* fatal: authentication failed or the paths were refused */
} ql_zk_state_t;

/* "connecting", "connected", ... */
const char *ql_zk_state_name(ql_zk_state_t s);

typedef struct ql_zk_event {
    ql_zk_state_t state;
    int64_t session_id; /* the session's id (0: none yet) */
    int timeout_ms;     /* the session timeout ZooKeeper granted (0: not connected yet) */
    const char *reason; /* why (EXPIRED, FAILED, SUSPENDED, DOUBTFUL), for the log; "" else */
} ql_zk_event_t;

typedef void (*ql_zk_state_cb)(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg);

/* A listener of the session's states; the memory is the caller's, borrowed until
 * ql_zk_unlisten (which may be called from inside the callback). */
typedef struct ql_zk_listener {
    ql_zk_state_cb cb;
    void *arg;
    struct ql_zk_listener *next;
} ql_zk_listener_t;

typedef struct ql_zk_opts {
    const char *connect;    /* HOST:PORT[,...][/chroot] (kylin.env.zookeeper-connect-string) */
    const char *base_path;  /* kylin.env.zookeeper-base-path, e.g. "/kylin" */
    const char *cluster;    /* kylin.server.cluster-name */
    const char *server_id;  /* qilin.server.id: written into the nodes, for humans */
    int session_timeout_ms; /* qilin.cluster.session-timeout-ms */
    int suspend_kill_ms;    /* qilin.cluster.suspend-kill-ms; 0: a quarter of the timeout */
    ql_log_t *log;          /* borrowed, may be NULL */
} ql_zk_opts_t;

/* Fills *out from cfg (borrowed: the strings stay cfg's); server_id is the caller's
 * (ql_config_server_id). */
void ql_zk_opts_from_config(const ql_config_t *cfg, const char *server_id, ql_log_t *log,
                            ql_zk_opts_t *out);

/*
 * Starts a session on loop (borrowed; it must outlive the session): the handle is opened on the
 * helper thread and CONNECTED is reported once connected and the persistent parents of
 * <base>/<cluster>/job_engine exist. The strings of opts are copied. Errors: QL_EINVAL naming
 * the option, UV_ENOMEM, or a thread or handle that cannot be made.
 */
int ql_zk_new(uv_loop_t *loop, const ql_zk_opts_t *opts, ql_zk_t **out, ql_err_t *err);
/*
 * Closes the session (ZooKeeper deletes its ephemeral nodes at once) and frees it, then calls
 * done (may be NULL) on the loop. Every recipe and listener must have been freed or removed
 * before. The loop must run until done is called.
 */
void ql_zk_close(ql_zk_t *zk, void (*done)(void *arg), void *arg);
/* After EXPIRED (or FAILED): opens a new session (CONNECTING, then CONNECTED). 0, or
 * QL_EINVAL when the session still has a handle. */
int ql_zk_reopen(ql_zk_t *zk);

void ql_zk_listen(ql_zk_t *zk, ql_zk_listener_t *l, ql_zk_state_cb cb, void *arg);
void ql_zk_unlisten(ql_zk_t *zk, ql_zk_listener_t *l);

ql_zk_state_t ql_zk_state(const ql_zk_t *zk);
/* The current session's id, 0 when there is none (not connected yet, ended). */
int64_t ql_zk_session_id(const ql_zk_t *zk);
/* "<base>/<cluster>/job_engine": the parent of every node of this cluster. */
const char *ql_zk_root(const ql_zk_t *zk);
/* What this server writes into its nodes: "server=<id> pid=<pid> start=<ISO time>". */
const char *ql_zk_node_data(const ql_zk_t *zk);

/* ---- holdings: the job engine lock and leader election ---- */

typedef enum ql_zk_hold_kind {
    QL_ZK_HELD,    /* this server holds it: claim token, then act */
    QL_ZK_STANDBY, /* another holds it (holder: its node's data); this one waits, woken by a
                      watch (no polling) */
    QL_ZK_LOST,    /* a holding ended (reason); the recipe rejoins when it can */
} ql_zk_hold_kind_t;

typedef struct ql_zk_hold_event {
    ql_zk_hold_kind_t kind;
    uint64_t token;     /* HELD: the node's czxid; LOST: the token that was held */
    const char *holder; /* STANDBY: the holder's node data, "" when unknown */
    const char *node;   /* HELD: this server's node (full path) */
    const char *reason; /* LOST: why */
} ql_zk_hold_event_t;

typedef void (*ql_zk_hold_cb)(void *arg, const ql_zk_hold_event_t *ev);

/*
 * The global job engine lock (scheduler 0 with ZooKeeper): the ephemeral node
 * <root>/global_job_engine_lock. Whoever creates it holds the lock (token: its czxid); the
 * others read the holder from its data and watch it, and try again when it is deleted. The
 * holder watches its own node too: deleted from outside, it reports LOST and tries again.
 * Joins now when the session is CONNECTED, else when it becomes so; cb runs on the loop.
 */
typedef struct ql_zk_lock ql_zk_lock_t;
int ql_zk_lock_new(ql_zk_t *zk, ql_zk_hold_cb cb, void *arg, ql_zk_lock_t **out);
/* Releases the lock (deletes this server's node, so a standby takes over at once) and frees. */
void ql_zk_lock_free(ql_zk_lock_t *l);

/*
 * Leader election (scheduler 100; scheduler 2's dispatcher): each participant makes the
 * ephemeral sequential node <root>/leader/<guid>-n_<10-digit sequence>; the lowest sequence
 * leads (HELD, token: its czxid); every other participant watches only its predecessor and
 * lists the children again when it goes, so a departure wakes one participant. A participant
 * whose create lost its answer with the connection looks for a child with its guid before
 * creating another (so no phantom node of its own can stall the election).
 */
typedef struct ql_zk_elect ql_zk_elect_t;
int ql_zk_elect_new(ql_zk_t *zk, ql_zk_hold_cb cb, void *arg, ql_zk_elect_t **out);
/* Resigns (deletes this participant's node: the next one leads at once) and frees. */
void ql_zk_elect_free(ql_zk_elect_t *e);
/* This participant's node name (its child of leader/), "" when it has none. */
const char *ql_zk_elect_node(const ql_zk_elect_t *e);

/* ---- per-job locks (scheduler 2) ---- */

typedef enum ql_zk_jobs_kind {
    QL_ZK_JOBS_LISTED,   /* the children of lock/ were listed (at start, after each new
                            session): ql_zk_job_listed answers from this listing */
    QL_ZK_JOBS_VANISHED, /* job_id's lock node was in a listing and is not in the next one */
} ql_zk_jobs_kind_t;

typedef void (*ql_zk_jobs_cb)(void *arg, ql_zk_jobs_kind_t kind, const char *job_id);
/* status 0: locked, token the node's czxid (claim it with ql_job_claim in the pick's
 * transaction); QL_ELOCKED: another server holds it; QL_EZOOKEEPER: the session ended or
 * ZooKeeper refused (the message went to the log). */
typedef void (*ql_zk_job_lock_cb)(void *arg, int status, uint64_t token);

typedef struct ql_zk_jobs ql_zk_jobs_t;
/* Locks under <root>/lock/, and a children watch on it reporting through cb. */
int ql_zk_jobs_new(ql_zk_t *zk, ql_zk_jobs_cb cb, void *arg, ql_zk_jobs_t **out);
/* Deletes every node this server holds and frees; no callback runs after. */
void ql_zk_jobs_free(ql_zk_jobs_t *j);
/*
 * Makes the ephemeral node lock/<job_id> (job_id: 1 to 64 of A-Z a-z 0-9 - _). done runs once
 * on the loop, never inside this call. A node that exists is another server's (QL_ELOCKED)
 * unless its ephemeral owner is this session (an earlier answer was lost): then it is ours.
 * Returns 0, QL_EINVAL (bad id), QL_EEXIST (a lock of that job is held or under way here),
 * QL_EZOOKEEPER (no session) or UV_ENOMEM; then done never runs.
 */
int ql_zk_job_lock(ql_zk_jobs_t *j, const char *job_id, ql_zk_job_lock_cb done, void *arg);
/* Deletes this server's node of job_id (retried after a reconnect; gone anyway when the
 * session ends); a lock under way is abandoned (its done does not run). QL_ENOTFOUND when
 * this server neither holds nor asked for it. */
int ql_zk_job_unlock(ql_zk_jobs_t *j, const char *job_id);
/* Whether this server holds job_id's lock (token: its czxid). */
bool ql_zk_job_held(const ql_zk_jobs_t *j, const char *job_id, uint64_t *token);
/* Whether job_id's lock node was in the latest listing (anyone's). */
bool ql_zk_job_listed(const ql_zk_jobs_t *j, const char *job_id);

/* ---- the ensemble's identity ---- */

/* status 0: id is the 32 hex digits held by <root>/fence_id, created (made now with a random
 * 128-bit id) or read; QL_EZOOKEEPER: the session ended or ZooKeeper refused. */
typedef void (*ql_zk_fence_id_cb)(void *arg, int status, const char *id, bool created);
typedef struct ql_zk_fence_id ql_zk_fence_id_t;
/* Reads the persistent node fence_id, creating it first if it is missing, when the session is
 * (or next becomes) CONNECTED; cb runs once. A store records the id (docs/zookeeper.md): a
 * different or missing id later means ZooKeeper was reset or replaced. */
int ql_zk_fence_id_new(ql_zk_t *zk, ql_zk_fence_id_cb cb, void *arg, ql_zk_fence_id_t **out);
void ql_zk_fence_id_free(ql_zk_fence_id_t *f);

#endif
