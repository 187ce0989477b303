/*
 * The ZooKeeper session's helper thread and the session events of the library's threads
 * (scheduler/include/scheduler/ql_zk.h, DESIGN; zk_int.h).
 *
 * DESIGN.
 * - The helper runs the library's calls that may block, one at a time and in the order they
 *   were asked: zookeeper_init (it resolves the connect string's host names) and
 *   zookeeper_close (it sends the close request and waits up to seconds for the answer). Each
 *   answers the loop with its connection's EV_OPENED or EV_CLOSED. Closing one handle before
 *   opening the next keeps every answer of an ended session ahead of the next session's events.
 * - The watchdog. The same thread wakes every WATCHDOG_TICK_MS and compares the loop's
 *   heartbeat (stamped every QL_ZK_HEARTBEAT_MS by a loop timer) with half the session timeout.
 *   When the loop has not stamped it for longer, the loop is wedged or the process was stopped:
 *   the helper takes the handle away from the loop (under zh_lock, so no request is using it)
 *   and closes it. ZooKeeper then deletes this session's ephemeral nodes at once and another
 *   server takes over well before the session could have expired, instead of the library's
 *   own threads keeping a dead server's locks alive. It runs beside, not on, the library's
 *   completion thread: that thread runs only when the library has something to deliver, and
 *   zookeeper_close called from it is a special case of the library (it detaches itself).
 * - The global watcher runs on a handle's completion thread. It does not allocate: each
 *   connection has one session event, queued at most once, carrying the latest state and a
 *   count of connection losses, so a loss followed at once by a reconnect is never missed.
 */
#include "zk_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_TICK_MS 50

int64_t zk_now_ms(void) {
    return (int64_t)(uv_hrtime() / 1000000);
}

void zk_push(ql_zk_t *zk, zk_ev_t *ev) {
    ev->next = NULL;
    pthread_mutex_lock(&zk->q_lock);
    if (zk->q_tail)
        zk->q_tail->next = ev;
    else
        zk->q_head = ev;
    zk->q_tail = ev;
    pthread_mutex_unlock(&zk->q_lock);
    uv_async_send(&zk->async);
}

zhandle_t *zk_steal(ql_zk_t *zk, zk_conn_t *c) {
    pthread_mutex_lock(&zk->zh_lock);
    zhandle_t *zh = c->zh;
    c->zh = NULL;
    if (zk->watched == c)
        zk->watched = NULL;
    pthread_mutex_unlock(&zk->zh_lock);
    return zh;
}

void zk_global_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)path;
    zk_conn_t *c = ctx;
    if (type != ZOO_SESSION_EVENT || !c)
        return;
    ql_zk_t *zk = c->zk;
    pthread_mutex_lock(&zk->q_lock);
    c->z_state = state;
    if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE)
        c->z_losses++;
    if (state == ZOO_CONNECTED_STATE) {
        c->z_session_id = zoo_client_id(zh)->client_id;
        c->z_timeout_ms = zoo_recv_timeout(zh);
    }
    bool queue = !c->sess_queued;
    c->sess_queued = true;
    pthread_mutex_unlock(&zk->q_lock);
    if (queue) /* its kind and conn were set when c was made: the loop may be reading them */
        zk_push(zk, &c->sess_ev);
}

/* ---- the helper thread ---- */

static void run_open(ql_zk_t *zk, zk_conn_t *c) {
    errno = 0;
    zhandle_t *zh = zookeeper_init(zk->connect, zk_global_watcher, zk->timeout_ms, NULL, c, 0);
    int rc = 0;
    if (!zh)
        rc = errno ? -errno : UV_EINVAL;
    pthread_mutex_lock(&zk->zh_lock);
    c->zh = zh;
    pthread_mutex_unlock(&zk->zh_lock);
    c->opened_ev.kind = EV_OPENED;
    c->opened_ev.conn = c;
    c->opened_ev.rc = rc;
    zk_push(zk, &c->opened_ev);
}

static void run_close(ql_zk_t *zk, zk_conn_t *c, zhandle_t *zh, bool by_watchdog, int64_t age) {
    zookeeper_close(zh);
    c->closed_ev.kind = EV_CLOSED;
    c->closed_ev.conn = c;
    c->closed_ev.by_watchdog = by_watchdog;
    c->closed_ev.stall_ms = age;
    zk_push(zk, &c->closed_ev);
}

static void watchdog_check(ql_zk_t *zk) {
    int limit = atomic_load(&zk->watchdog_limit_ms);
    int64_t age = zk_now_ms() - atomic_load(&zk->heartbeat_ms);
    if (limit <= 0 || age <= limit)
        return;
    pthread_mutex_lock(&zk->zh_lock);
    zk_conn_t *c = zk->watched;
    zhandle_t *zh = c ? c->zh : NULL;
    if (zh) {
        c->zh = NULL;
        zk->watched = NULL;
    }
    pthread_mutex_unlock(&zk->zh_lock);
    if (!zh)
        return;
    ql_log(zk->log, QL_LOG_WARN, "zk",
           "watchdog: the loop has not run for %lld ms (limit %d ms, half the session timeout): "
           "closing the ZooKeeper session so that its locks go at once",
           (long long)age, limit);
    run_close(zk, c, zh, true, age);
}

static void *helper_main(void *arg) {
    ql_zk_t *zk = arg;
    pthread_mutex_lock(&zk->h_lock);
    for (;;) {
        if (!zk->cmd_head && !zk->helper_stop) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += WATCHDOG_TICK_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&zk->h_cond, &zk->h_lock, &ts);
        }
        zk_conn_t *c = zk->cmd_head;
        if (c) {
            zk->cmd_head = c->cmd_next;
            if (!zk->cmd_head)
                zk->cmd_tail = NULL;
        } else if (zk->helper_stop) {
            break;
        }
        pthread_mutex_unlock(&zk->h_lock);
        if (c && c->cmd == CMD_OPEN)
            run_open(zk, c);
        else if (c)
            run_close(zk, c, c->close_zh, false, 0);
        watchdog_check(zk);
        pthread_mutex_lock(&zk->h_lock);
    }
    pthread_mutex_unlock(&zk->h_lock);
    return NULL;
}

int zk_helper_start(ql_zk_t *zk) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&zk->h_cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&zk->h_lock, NULL);
    int rc = pthread_create(&zk->helper, NULL, helper_main, zk);
    if (rc) {
        pthread_cond_destroy(&zk->h_cond);
        pthread_mutex_destroy(&zk->h_lock);
        return -rc;
    }
    zk->helper_started = true;
    return 0;
}

void zk_helper_stop(ql_zk_t *zk) {
    if (!zk->helper_started)
        return;
    pthread_mutex_lock(&zk->h_lock);
    zk->helper_stop = true;
    pthread_cond_signal(&zk->h_cond);
    pthread_mutex_unlock(&zk->h_lock);
    pthread_join(zk->helper, NULL);
    pthread_cond_destroy(&zk->h_cond);
    pthread_mutex_destroy(&zk->h_lock);
    zk->helper_started = false;
}

void zk_helper_cmd(ql_zk_t *zk, zk_conn_t *c, int cmd) {
    c->cmd = cmd;
    c->cmd_next = NULL;
    pthread_mutex_lock(&zk->h_lock);
    if (zk->cmd_tail)
        zk->cmd_tail->cmd_next = c;
    else
        zk->cmd_head = c;
    zk->cmd_tail = c;
    pthread_cond_signal(&zk->h_cond);
    pthread_mutex_unlock(&zk->h_lock);
}

/* ---- test hooks ---- */

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr);
    }
    return false;
}

/* Shuts down every socket of this process whose peer is the server zh is connected to. */
static void drop_sockets(zhandle_t *zh) {
    struct sockaddr_storage srv;
    socklen_t len = sizeof srv;
    memset(&srv, 0, sizeof srv);
    if (!zookeeper_get_connected_host(zh, (struct sockaddr *)&srv, &len))
        return;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        struct stat st;
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d) || fstat(fd, &st) ||
            !S_ISSOCK(st.st_mode))
            continue;
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        memset(&peer, 0, sizeof peer);
        if (!getpeername(fd, (struct sockaddr *)&peer, &plen) && same_addr(&peer, &srv))
            shutdown(fd, SHUT_RDWR);
    }
    closedir(d);
}

void zk_test_drop_connection_of(ql_zk_t *zk, zk_conn_t *c) {
    pthread_mutex_lock(&zk->zh_lock);
    if (c && c->zh)
        drop_sockets(c->zh);
    pthread_mutex_unlock(&zk->zh_lock);
}

void zk_test_drop_connection(ql_zk_t *zk) {
    zk_test_drop_connection_of(zk, zk->cur);
}
