/*
 * The ZooKeeper session of a server (scheduler/include/scheduler/ql_zk.h has the contract and
 * its DESIGN; zk_int.h the internals): its handles, its states, the loop's side of the queue,
 * the heartbeat and the suspension timer. The helper thread and the watchdog are in
 * zk_thread.c, the requests in zk_ops.c.
 *
 * Time here is the monotonic clock and libuv's timers, not a ql_clock_t: a session lives on a
 * real loop with a real ZooKeeper, and the watchdog, on its own thread, reads the same clock.
 */
#include "zk_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char *const state_names[] = {
    [QL_ZK_CONNECTING] = "connecting", [QL_ZK_CONNECTED] = "connected",
    [QL_ZK_SUSPENDED] = "suspended",   [QL_ZK_RECONNECTED] = "reconnected",
    [QL_ZK_DOUBTFUL] = "doubtful",     [QL_ZK_EXPIRED] = "expired",
    [QL_ZK_FAILED] = "failed",
};

const char *ql_zk_state_name(ql_zk_state_t s) {
    return (unsigned)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "?";
}

/* ---- reporting ---- */

/* c: the handle the state is about. */
static void report(ql_zk_t *zk, const zk_conn_t *c, ql_zk_state_t state, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void report(ql_zk_t *zk, const zk_conn_t *c, ql_zk_state_t state, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(zk->reason, sizeof zk->reason, fmt, ap);
    va_end(ap);
    zk->state = state;
    ql_zk_event_t ev = {.state = state,
                        .session_id = c ? c->session_id : 0,
                        .timeout_ms = c ? c->timeout_ms : 0,
                        .reason = zk->reason};
    ql_log_level_t lvl = state == QL_ZK_CONNECTED || state == QL_ZK_RECONNECTED ? QL_LOG_INFO
                         : state == QL_ZK_FAILED                                ? QL_LOG_ERROR
                                                                                : QL_LOG_WARN;
    ql_log(zk->log, lvl, "zk", "session %s: session=0x%llx timeout_ms=%d%s%s",
           ql_zk_state_name(state), (unsigned long long)ev.session_id, ev.timeout_ms,
           zk->reason[0] ? " reason=" : "", zk->reason);
    ql_zk_listener_t *saved = zk->iter_next;
    for (ql_zk_listener_t *l = zk->listeners; l; l = zk->iter_next) {
        zk->iter_next = l->next;
        l->cb(zk, &ev, l->arg);
    }
    zk->iter_next = saved;
}

void ql_zk_listen(ql_zk_t *zk, ql_zk_listener_t *l, ql_zk_state_cb cb, void *arg) {
    l->cb = cb;
    l->arg = arg;
    l->next = NULL;
    ql_zk_listener_t **p = &zk->listeners;
    while (*p)
        p = &(*p)->next;
    *p = l;
}

void ql_zk_unlisten(ql_zk_t *zk, ql_zk_listener_t *l) {
    for (ql_zk_listener_t **p = &zk->listeners; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            if (zk->iter_next == l)
                zk->iter_next = l->next;
            return;
        }
}

/* ---- handles ---- */

static int open_conn(ql_zk_t *zk) {
    zk_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    c->zk = zk;
    c->gen = ++zk->next_gen;
    c->sess_ev.kind = EV_SESSION;
    c->sess_ev.conn = c;
    c->next_conn = zk->conns;
    zk->conns = c;
    zk->live_conns++;
    zk->cur = c;
    pthread_mutex_lock(&zk->zh_lock);
    zk->watched = c;
    pthread_mutex_unlock(&zk->zh_lock);
    atomic_store(&zk->heartbeat_ms, zk_now_ms());
    atomic_store(&zk->watchdog_limit_ms, zk->timeout_ms / 2);
    zk->state = QL_ZK_CONNECTING;
    zk_helper_cmd(zk, c, CMD_OPEN);
    return 0;
}

static void finish_close(ql_zk_t *zk);

/* c's handle is closed (or was never made): answers what it still owed, frees it. */
static void finalize(ql_zk_t *zk, zk_conn_t *c) {
    zk_conn_flush(zk, c);
    for (zk_conn_t **p = &zk->conns; *p; p = &(*p)->next_conn)
        if (*p == c) {
            *p = c->next_conn;
            break;
        }
    if (zk->cur == c)
        zk->cur = NULL;
    free(c);
    zk->live_conns--;
    if (zk->closing && zk->live_conns == 0)
        finish_close(zk);
}

/* Hands c's handle to the helper to close; without one yet, the close follows its opening. */
static void close_conn(ql_zk_t *zk, zk_conn_t *c) {
    if (c->closing)
        return;
    c->closing = true;
    zhandle_t *zh = zk_steal(zk, c);
    if (zh) {
        c->close_zh = zh;
        zk_helper_cmd(zk, c, CMD_CLOSE);
    }
    /* else: not opened yet (EV_OPENED closes it), or the watchdog took it (EV_CLOSED comes) */
}

/* The current session ended: nothing it held is held any more. */
static void end_session(ql_zk_t *zk, zk_conn_t *c, ql_zk_state_t state, const char *reason) {
    uv_timer_stop(&zk->suspend_timer);
    c->connected = false;
    close_conn(zk, c);
    if (zk->cur == c)
        zk->cur = NULL; /* so that a listener may reopen at once */
    report(zk, c, state, "%s", reason);
}

/* ---- the cluster's persistent parents ---- */

static void create_paths(ql_zk_t *zk, zk_conn_t *c);

static void paths_done(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    zk_conn_t *c = arg;
    c->paths_left--;
    if (r->rc == ZCONNECTIONLOSS || r->rc == ZOPERATIONTIMEOUT || r->rc == ZCLOSING ||
        r->rc == ZSESSIONEXPIRED || r->rc == ZSESSIONMOVED) {
        c->paths_lost = true;
    } else if (r->rc != ZOK && r->rc != ZNODEEXISTS && c == zk->cur && !c->closing) {
        char why[200];
        snprintf(why, sizeof why, "ZooKeeper refused to create the cluster's path: %s",
                 zerror(r->rc));
        end_session(zk, c, QL_ZK_FAILED, why);
        return;
    }
    if (c->paths_left || c != zk->cur || c->closing)
        return;
    if (!c->paths_lost) {
        c->ready = true;
        report(zk, c, QL_ZK_CONNECTED, "%s", "");
    } else if (c->connected) {
        create_paths(zk, c);
    }
}

/* Creates each prefix of the root, then leader/ and lock/ (ZNODEEXISTS is fine): one session's
 * requests are answered in order, so the parents exist before a child is made. */
static void create_paths(ql_zk_t *zk, zk_conn_t *c) {
    c->paths_lost = false;
    char path[1024];
    const char *kids[] = {"leader", "lock"};
    size_t n = strlen(zk->root);
    for (size_t i = 1; i <= n; i++) {
        if (zk->root[i] != '/' && zk->root[i] != '\0')
            continue;
        snprintf(path, sizeof path, "%.*s", (int)i, zk->root);
        if (zk_create(zk, path, "", ZOO_PERSISTENT, paths_done, c) == 0)
            c->paths_left++;
        else
            c->paths_lost = true;
    }
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", zk->root, kids[i]);
        if (zk_create(zk, path, "", ZOO_PERSISTENT, paths_done, c) == 0)
            c->paths_left++;
        else
            c->paths_lost = true;
    }
}

/* ---- states ---- */

static void suspend_cb(uv_timer_t *t) {
    ql_zk_t *zk = t->data;
    if (zk->cur && zk->cur->suspended)
        report(zk, zk->cur, QL_ZK_DOUBTFUL,
               "not reconnected %llu ms after the connection was lost: every holding is "
               "doubtful (another server may take over before long)",
               (unsigned long long)zk->suspend_ms);
}

static void suspend(ql_zk_t *zk, zk_conn_t *c) {
    c->suspended = true;
    int t = c->timeout_ms ? c->timeout_ms : zk->timeout_ms;
    uint64_t ms = zk->suspend_kill_ms > 0 ? (uint64_t)zk->suspend_kill_ms : (uint64_t)(t / 4);
    zk->suspend_ms = ms;
    uv_timer_start(&zk->suspend_timer, suspend_cb, ms, 0);
    report(zk, c, QL_ZK_SUSPENDED, "the connection to ZooKeeper was lost; the session may live on");
}

/* The latest state of c's handle (the library's; coalesced, see zk_thread.c). */
static void session_update(ql_zk_t *zk, zk_conn_t *c) {
    pthread_mutex_lock(&zk->q_lock);
    int state = c->z_state;
    unsigned losses = c->z_losses;
    int64_t sid = c->z_session_id;
    int timeout = c->z_timeout_ms;
    pthread_mutex_unlock(&zk->q_lock);
    if (c != zk->cur || c->closing)
        return;
    if (losses != c->seen_losses) {
        c->seen_losses = losses;
        c->connected = false;
        if (c->ready && !c->suspended)
            suspend(zk, c);
    }
    if (state == ZOO_CONNECTED_STATE) {
        c->connected = true;
        c->session_id = sid;
        c->timeout_ms = timeout;
        atomic_store(&zk->watchdog_limit_ms, timeout / 2);
        if (!c->was_connected) {
            c->was_connected = true;
            create_paths(zk, c);
        } else if (!c->ready) {
            if (c->paths_lost && c->paths_left == 0)
                create_paths(zk, c);
        } else if (c->suspended) {
            c->suspended = false;
            uv_timer_stop(&zk->suspend_timer);
            report(zk, c, QL_ZK_RECONNECTED, "%s", "");
        }
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        char why[160];
        snprintf(why, sizeof why,
                 "ZooKeeper expired session 0x%llx: it heard nothing from this server for the "
                 "session timeout",
                 (unsigned long long)c->session_id);
        end_session(zk, c, QL_ZK_EXPIRED, why);
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        end_session(zk, c, QL_ZK_FAILED, "ZooKeeper refused this server's authentication");
    }
}

void zk_session_event(ql_zk_t *zk, zk_ev_t *ev) {
    zk_conn_t *c = ev->conn;
    switch (ev->kind) {
    case EV_SESSION:
        if (c->opened)
            session_update(zk, c);
        else
            c->early = true;
        break;
    case EV_OPENED:
        c->opened = true;
        if (ev->rc) {
            if (c == zk->cur && !c->closing) {
                char why[300];
                snprintf(why, sizeof why, "cannot start a ZooKeeper client for '%s': %s",
                         zk->connect, ql_strerror(ev->rc));
                end_session(zk, c, QL_ZK_FAILED, why);
            }
            finalize(zk, c);
        } else if (c->closing) {
            c->closing = false;
            close_conn(zk, c);
        } else if (c->early) {
            session_update(zk, c);
        }
        break;
    case EV_CLOSED:
        if (ev->by_watchdog && c == zk->cur && !c->closing) {
            char why[200];
            snprintf(why, sizeof why,
                     "the watchdog closed the session: this server's loop did not run for %lld "
                     "ms, more than half the session timeout",
                     (long long)ev->stall_ms);
            c->closing = true;
            end_session(zk, c, QL_ZK_EXPIRED, why);
        }
        finalize(zk, c);
        break;
    default:
        break;
    }
}

/* Drains the queue one event at a time: a connection's session event may be queued again by
 * the library's thread as soon as it is taken out. */
static void async_cb(uv_async_t *a) {
    ql_zk_t *zk = a->data;
    for (;;) {
        pthread_mutex_lock(&zk->q_lock);
        zk_ev_t *ev = zk->q_head;
        if (ev) {
            zk->q_head = ev->next;
            if (!zk->q_head)
                zk->q_tail = NULL;
            if (ev->kind == EV_SESSION)
                ev->conn->sess_queued = false;
        }
        pthread_mutex_unlock(&zk->q_lock);
        if (!ev)
            return;
        if (ev->kind == EV_REQ)
            zk_req_drained(zk, ev->req);
        else if (ev->kind == EV_WATCH)
            zk_watch_drained(zk, ev->watch);
        else
            zk_session_event(zk, ev);
    }
}

static void heartbeat_cb(uv_timer_t *t) {
    ql_zk_t *zk = t->data;
    atomic_store(&zk->heartbeat_ms, zk_now_ms());
}

/* ---- life ---- */

void ql_zk_opts_from_config(const ql_config_t *cfg, const char *server_id, ql_log_t *log,
                            ql_zk_opts_t *out) {
    memset(out, 0, sizeof *out);
    out->connect = ql_config_get_str(cfg, "kylin.env.zookeeper-connect-string");
    out->base_path = ql_config_get_str(cfg, "kylin.env.zookeeper-base-path");
    out->cluster = ql_config_get_str(cfg, "kylin.server.cluster-name");
    out->server_id = server_id;
    out->session_timeout_ms = (int)ql_config_get_ms(cfg, "qilin.cluster.session-timeout-ms");
    out->suspend_kill_ms = (int)ql_config_get_ms(cfg, "qilin.cluster.suspend-kill-ms");
    out->log = log;
}

static void free_zk(ql_zk_t *zk) {
    pthread_mutex_destroy(&zk->q_lock);
    pthread_mutex_destroy(&zk->zh_lock);
    free(zk->connect);
    free(zk->root);
    free(zk->node_data);
    free(zk);
}

static int fill(ql_zk_t *zk, const ql_zk_opts_t *o, ql_err_t *err) {
    if (!o->connect || !o->connect[0])
        return ql_err_set(err, QL_EINVAL, "kylin.env.zookeeper-connect-string: empty");
    if (!o->base_path || o->base_path[0] != '/')
        return ql_err_set(err, QL_EINVAL, "kylin.env.zookeeper-base-path: not an absolute path");
    if (!o->cluster || !o->cluster[0] || strchr(o->cluster, '/'))
        return ql_err_set(err, QL_EINVAL, "kylin.server.cluster-name: empty or holds a /");
    if (o->session_timeout_ms < 100)
        return ql_err_set(err, QL_EINVAL, "qilin.cluster.session-timeout-ms: %d is too short",
                          o->session_timeout_ms);
    const char *base = strcmp(o->base_path, "/") ? o->base_path : "";
    char start[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    if (asprintf(&zk->root, "%s/%s/job_engine", base, o->cluster) < 0 ||
        asprintf(&zk->node_data, "server=%s pid=%d start=%s",
                 o->server_id && o->server_id[0] ? o->server_id : "?", (int)getpid(), start) < 0 ||
        !(zk->connect = strdup(o->connect))) {
        zk->root = zk->node_data = NULL;
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    zk->timeout_ms = o->session_timeout_ms;
    zk->suspend_kill_ms = o->suspend_kill_ms;
    zk->log = o->log;
    return 0;
}

int ql_zk_new(uv_loop_t *loop, const ql_zk_opts_t *opts, ql_zk_t **out, ql_err_t *err) {
    *out = NULL;
    ql_zk_t *zk = calloc(1, sizeof *zk);
    if (!zk)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    pthread_mutex_init(&zk->q_lock, NULL);
    pthread_mutex_init(&zk->zh_lock, NULL);
    int rc = fill(zk, opts, err);
    if (rc) {
        free_zk(zk);
        return rc;
    }
    zk->loop = loop;
    /* The client's own lines (one per connect at INFO) go to stderr in its format; its
     * warnings and errors are enough there, the session logs its states itself. */
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    if ((rc = zk_helper_start(zk))) {
        free_zk(zk);
        return ql_err_set(err, rc, "cannot start the ZooKeeper session's thread: %s",
                          ql_strerror(rc));
    }
    uv_async_init(loop, &zk->async, async_cb);
    zk->async.data = zk;
    uv_timer_init(loop, &zk->heartbeat);
    zk->heartbeat.data = zk;
    uv_timer_init(loop, &zk->suspend_timer);
    zk->suspend_timer.data = zk;
    uv_timer_start(&zk->heartbeat, heartbeat_cb, QL_ZK_HEARTBEAT_MS, QL_ZK_HEARTBEAT_MS);
    if ((rc = open_conn(zk))) {
        /* Nothing was queued to the helper; the handles close before the memory goes. */
        ql_zk_close(zk, NULL, NULL);
        return ql_err_set(err, rc, "out of memory");
    }
    *out = zk;
    return 0;
}

int ql_zk_reopen(ql_zk_t *zk) {
    if (zk->closing)
        return QL_ESHUTDOWN;
    if (zk->cur)
        return QL_EINVAL;
    return open_conn(zk);
}

static void handle_closed(uv_handle_t *h) {
    ql_zk_t *zk = h->data;
    if (--zk->handles_open)
        return;
    void (*done)(void *) = zk->closed_cb;
    void *arg = zk->closed_arg;
    free_zk(zk);
    if (done)
        done(arg);
}

static void finish_close(ql_zk_t *zk) {
    zk_helper_stop(zk);
    zk->handles_open = 3;
    uv_close((uv_handle_t *)&zk->async, handle_closed);
    uv_close((uv_handle_t *)&zk->heartbeat, handle_closed);
    uv_close((uv_handle_t *)&zk->suspend_timer, handle_closed);
}

void ql_zk_close(ql_zk_t *zk, void (*done)(void *arg), void *arg) {
    zk->closing = true;
    zk->closed_cb = done;
    zk->closed_arg = arg;
    uv_timer_stop(&zk->heartbeat);
    uv_timer_stop(&zk->suspend_timer);
    atomic_store(&zk->watchdog_limit_ms, 0);
    zk_conn_t *c = zk->cur;
    zk->cur = NULL;
    if (c)
        close_conn(zk, c);
    if (zk->live_conns == 0)
        finish_close(zk);
}

ql_zk_state_t ql_zk_state(const ql_zk_t *zk) {
    return zk->state;
}

int64_t ql_zk_session_id(const ql_zk_t *zk) {
    return zk->cur && zk->cur->was_connected ? zk->cur->session_id : 0;
}

const char *ql_zk_root(const ql_zk_t *zk) {
    return zk->root;
}

const char *ql_zk_node_data(const ql_zk_t *zk) {
    return zk->node_data;
}

uint64_t zk_gen(const ql_zk_t *zk) {
    return zk->cur ? zk->cur->gen : 0;
}

bool zk_ready(const ql_zk_t *zk) {
    return zk->cur && zk->cur->ready && zk->cur->connected && !zk->cur->closing;
}

bool zk_current(const ql_zk_t *zk, uint64_t gen) {
    return zk->cur && !zk->cur->closing && zk->cur->gen == gen;
}

void zk_random_hex(char out[33]) {
    uint8_t b[16];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n < 0 && errno != EINTR)
            break;
    }
    if (got < sizeof b) /* no entropy source at all: still unique enough among this session's */
        for (size_t i = 0; i < sizeof b; i++)
            b[i] ^= (uint8_t)(uv_hrtime() >> (8 * (i % 8))) ^ (uint8_t)getpid();
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}
