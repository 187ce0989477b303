/*
 * Internals of the ZooKeeper session (zk_session.c, zk_thread.c, zk_ops.c) and the requests the
 * recipes (zk_lock.c, zk_elect.c, zk_jobs.c, zk_fence_id.c) make on it. Private to scheduler/;
 * tests may include it for its hooks. The public contract is ql_zk.h; docs/zookeeper.md says
 * what the recipes guarantee.
 *
 * Threads and ownership, in short (ql_zk.h's DESIGN has the why):
 * - loop thread: everything marked "loop"; all callbacks of this file run there.
 * - helper thread (zk_thread.c): zookeeper_init and zookeeper_close, and the watchdog.
 * - completion thread (one per handle, the library's): zk_ops.c's completion and watcher
 *   functions, which only copy results and queue them (q_lock) for the loop.
 * A connection (zk_conn_t) is one zhandle_t, i.e. one ZooKeeper session. Its requests and
 * watches are owned by it until answered (or fired) and drained, or until the handle is closed
 * (EV_CLOSED drained): then the requests still owed an answer get ZCLOSING and the watches are
 * dropped. So every request accepted gets exactly one callback, unless cancelled.
 */
#ifndef QL_ZK_INT_H
#define QL_ZK_INT_H

#include "scheduler/ql_zk.h"

#include <pthread.h>
#include <stdatomic.h>
#include <zookeeper/zookeeper.h>

typedef struct zk_conn zk_conn_t;
typedef struct zk_req zk_req_t;
typedef struct zk_watch zk_watch_t;

/* ---- requests (zk_ops.c) ---- */

/* A request's answer, on the loop. Borrowed for the callback. */
typedef struct zk_result {
    int rc;       /* ZooKeeper's code: ZOK, ZNODEEXISTS, ZNONODE, ZCONNECTIONLOSS, ZCLOSING, ... */
    uint64_t gen; /* the connection (session) it was made on: ql_zk_gen() at the time */
    const struct Stat *stat; /* create, exists, get, children; NULL unless rc == ZOK */
    const char *path;        /* create: the node made (a sequential node's full name) */
    const char *data;        /* get: the node's data (NUL-terminated copy), else NULL */
    size_t len;              /* get: its length */
    const char *const *kids; /* children: the names */
    size_t n_kids;
} zk_result_t;
typedef void (*zk_done_cb)(ql_zk_t *zk, const zk_result_t *r, void *arg);
/* A watch fired: type is ZOO_DELETED_EVENT, ZOO_CREATED_EVENT, ZOO_CHANGED_EVENT or
 * ZOO_CHILD_EVENT; path the node's. Watches are one-shot; session events never reach them. */
typedef void (*zk_watch_cb)(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg);

/*
 * The requests. Each returns 0 and later calls cb once on the loop (unless cancelled), or
 * returns an error and never calls it: QL_EZOOKEEPER when the session has no handle (before
 * it is opened, after it ended) or the library refused the call, QL_EINVAL for a path the
 * library refuses, UV_ENOMEM. cb may be NULL (nobody waits for the answer). arg identifies the
 * caller for zk_cancel. A create of an ephemeral node that succeeds after its caller cancelled
 * it is deleted again at once, so a cancelled holder never leaves a node behind (except when
 * the answer was lost with the connection: then the node lives until the session ends).
 */
int zk_create(ql_zk_t *zk, const char *path, const char *data, int mode, zk_done_cb cb, void *arg);
int zk_delete(ql_zk_t *zk, const char *path, zk_done_cb cb, void *arg);
/* watch NULL: no watch. A watch set on a missing node fires when it is created. */
int zk_exists(ql_zk_t *zk, const char *path, zk_watch_cb watch, zk_done_cb cb, void *arg);
int zk_get(ql_zk_t *zk, const char *path, zk_watch_cb watch, zk_done_cb cb, void *arg);
int zk_children(ql_zk_t *zk, const char *path, zk_watch_cb watch, zk_done_cb cb, void *arg);
/* No callback or watch with this arg runs after this call (loop). */
void zk_cancel(ql_zk_t *zk, void *arg);

/* ---- the session's internals ---- */

typedef enum zk_ev_kind {
    EV_REQ,     /* a request answered (req) */
    EV_WATCH,   /* a watch fired (watch) */
    EV_SESSION, /* the handle's state changed (state, session_id, timeout_ms) */
    EV_OPENED,  /* zookeeper_init returned on the helper (rc: 0 or -errno) */
    EV_CLOSED,  /* zookeeper_close returned on the helper (by_watchdog: why) */
} zk_ev_kind_t;

typedef struct zk_ev {
    struct zk_ev *next;
    zk_ev_kind_t kind;
    zk_conn_t *conn;
    zk_req_t *req;
    zk_watch_t *watch;
    int state;
    int rc;
    int64_t session_id;
    int timeout_ms;
    bool by_watchdog;
    int64_t stall_ms; /* by_watchdog: how old the heartbeat was */
} zk_ev_t;

struct zk_req {
    zk_req_t *prev, *next; /* in conn->reqs while the library owes the answer (q_lock) */
    zk_ev_t ev;            /* its EV_REQ, queued by the completion thread */
    zk_conn_t *conn;
    int kind;
    bool ephemeral_create;
    zk_done_cb cb; /* loop; NULL: cancelled or nobody waits */
    void *arg;
    zk_watch_t *watch; /* the watch it sets, or NULL */
    char *path;        /* the path asked for (owned) */
    /* the answer, written by the completion thread */
    int rc;
    bool has_stat;
    struct Stat stat;
    char *str; /* create: the node made; get: its data (owned) */
    size_t len;
    char **kids; /* children (owned) */
    size_t n_kids;
};

struct zk_watch {
    zk_watch_t *prev, *next; /* in conn->watches until it fires or the handle closes (q_lock) */
    zk_ev_t ev;              /* its EV_WATCH */
    zk_conn_t *conn;
    zk_watch_cb cb; /* loop; NULL: cancelled */
    void *arg;
    bool fired; /* q_lock */
    int type;   /* once fired */
    char *path; /* once fired (owned) */
};

struct zk_conn {
    ql_zk_t *zk;
    zk_conn_t *next_conn; /* in zk->conns (loop) */
    uint64_t gen;         /* 1, 2, ...: which of the session's handles */
    zhandle_t *zh;        /* zk->zh_lock; NULL until opened and once handed to be closed */
    zk_ev_t opened_ev, closed_ev, sess_ev;
    /* q_lock */
    zk_req_t *reqs;
    zk_watch_t *watches;
    bool sess_queued;     /* sess_ev is in the queue */
    int z_state;          /* the latest state the library reported */
    unsigned z_losses;    /* connection losses reported so far */
    int64_t z_session_id; /* as of the latest CONNECTED */
    int z_timeout_ms;
    /* loop */
    bool opened;        /* EV_OPENED drained */
    bool early;         /* a session event arrived before EV_OPENED */
    bool closing;       /* handed to the helper to close (or to be, once opened) */
    bool was_connected; /* the handle reached CONNECTED once */
    bool connected;     /* connected as far as the loop knows */
    bool ready;         /* CONNECTED reported: its paths exist */
    bool suspended;
    unsigned seen_losses;
    unsigned paths_left; /* parent creates still unanswered */
    bool paths_lost;     /* one was lost with the connection: create them again on reconnect */
    int64_t session_id;
    int timeout_ms;
    /* the test hook: the next ephemeral create's answer is reported as lost, the connection
     * dropped */
    atomic_bool lose_next_create;
    /* the helper's queue (h_lock) */
    zk_conn_t *cmd_next;
    int cmd;             /* CMD_OPEN or CMD_CLOSE */
    zhandle_t *close_zh; /* CMD_CLOSE: the handle to close */
};

enum { CMD_OPEN = 1, CMD_CLOSE = 2 };

struct ql_zk {
    uv_loop_t *loop;
    ql_log_t *log;
    char *connect;
    char *root; /* <base>/<cluster>/job_engine */
    char *node_data;
    int timeout_ms;      /* asked for */
    int suspend_kill_ms; /* 0: a quarter of the negotiated timeout */
    uint64_t suspend_ms; /* the running suspension timer's delay */
    uint64_t next_gen;
    zk_conn_t *cur;   /* the current handle, NULL after it ended until ql_zk_reopen (loop) */
    zk_conn_t *conns; /* every handle not finalized yet (loop) */
    ql_zk_state_t state;
    char reason[256];
    ql_zk_listener_t *listeners;
    ql_zk_listener_t *iter_next; /* the listener dispatch goes to next (ql_zk_unlisten moves it) */
    unsigned live_conns;         /* handles not finalized yet (loop) */
    bool closing;
    void (*closed_cb)(void *arg);
    void *closed_arg;
    unsigned handles_open; /* uv handles not closed yet, during ql_zk_close */

    uv_async_t async;
    uv_timer_t heartbeat;
    uv_timer_t suspend_timer;

    pthread_mutex_t q_lock; /* the event queue, every conn's reqs and watches */
    zk_ev_t *q_head, *q_tail;

    pthread_mutex_t zh_lock; /* every conn->zh, and watched */
    zk_conn_t *watched;      /* the handle the watchdog guards */

    /* the helper thread (zk_thread.c) */
    pthread_t helper;
    bool helper_started;
    pthread_mutex_t h_lock;
    pthread_cond_t h_cond;
    zk_conn_t *cmd_head, *cmd_tail;   /* h_lock */
    bool helper_stop;                 /* h_lock */
    atomic_int_fast64_t heartbeat_ms; /* stamped by the loop every QL_ZK_HEARTBEAT_MS */
    atomic_int watchdog_limit_ms;     /* half the negotiated session timeout */
};

/* Monotonic milliseconds (any thread). */
int64_t zk_now_ms(void);
/* Queues an event for the loop and wakes it (any thread; takes q_lock). */
void zk_push(ql_zk_t *zk, zk_ev_t *ev);
/* The session's handling of one drained event (zk_session.c; loop). */
void zk_session_event(ql_zk_t *zk, zk_ev_t *ev);
/* Drained EV_REQ and EV_WATCH (zk_ops.c; loop). */
void zk_req_drained(ql_zk_t *zk, zk_req_t *req);
void zk_watch_drained(ql_zk_t *zk, zk_watch_t *w);
/* After its handle was closed: answers the requests still owed with ZCLOSING and drops its
 * watches (zk_ops.c; loop). */
void zk_conn_flush(ql_zk_t *zk, zk_conn_t *c);

/* The helper thread (zk_thread.c). */
int zk_helper_start(ql_zk_t *zk);
void zk_helper_stop(ql_zk_t *zk); /* joins it; every command must have been drained */
/* Queues an open (zookeeper_init) or close (zookeeper_close of close_zh) of c. */
void zk_helper_cmd(ql_zk_t *zk, zk_conn_t *c, int cmd);
/* Takes c's handle under zh_lock (NULL when it has none) so no request uses it any more. */
zhandle_t *zk_steal(ql_zk_t *zk, zk_conn_t *c);
/* The global watcher of every handle (zk_thread.c; completion thread). */
void zk_global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx);

/* Test hooks. ql_zk_test_lose_next_create: the next create's answer, when it arrives, is
 * reported to its caller as ZCONNECTIONLOSS and the connection is dropped (the node exists:
 * what a connection lost after the server made the node looks like).
 * zk_test_drop_connection: shuts down every socket of this process connected to the current
 * server, as a network cut would; meant for a process with one session. It scans the
 * process's descriptors while the library's I/O thread may close one (a race ThreadSanitizer
 * reports, harmless in a test process and never run by a server). */
void zk_test_lose_next_create(ql_zk_t *zk);
void zk_test_drop_connection(ql_zk_t *zk);
void zk_test_drop_connection_of(ql_zk_t *zk, zk_conn_t *c);
/* ---- for the recipes ---- */

/* The generation of the current handle (0: none). */
uint64_t zk_gen(const ql_zk_t *zk);
/* Whether requests can be made now: the current handle is connected and its paths exist. */
bool zk_ready(const ql_zk_t *zk);
/* Whether gen is the current handle's: an answer or watch of an ended session is stale. */
bool zk_current(const ql_zk_t *zk, uint64_t gen);
/* An answer lost with the connection: the request may or may not have been applied; ask
 * again once RECONNECTED. */
static inline bool zk_lost(int rc) {
    return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED;
}
/* 32 random hex digits (128 bits) and a NUL into out. */
void zk_random_hex(char out[33]);

#endif
