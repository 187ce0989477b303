/*
 * zk_member: one ZooKeeper participant in a process of its own, for the tests that kill, stop
 * or wedge a holder (tests/scheduler/test_zk_cluster.c). It opens a session (scheduler/ql_zk.h)
 * and joins the election (--mode elect) or the job engine lock (--mode lock), and prints one
 * line per event on stdout, each with its pid, its id and the monotonic time (ms=, the clock
 * the test reads too):
 *   STATE ms= pid= id= state=<name> session=0x.. reason=...
 *   HELD ms= pid= id= token= node=...        STANDBY ms= pid= id= holder=...
 *   LOST ms= pid= id= token= reason=...      WEDGE ms= pid= id= for=   WEDGE-END ms= ...
 *   BYE ms= pid= id=                         (after a graceful stop: SIGTERM resigns, closes)
 * After EXPIRED it opens a new session at once. --wedge MS blocks its loop for MS once it first
 * holds, --wedge-delay MS after it does (the wedged server of the watchdog test);
 * --lose-create yes reports its first create's answer as lost and drops its connection.
 */
#include "scheduler/ql_zk.h"
#include "scheduler/zk_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct member {
    uv_loop_t *loop;
    ql_zk_t *zk;
    ql_zk_listener_t listener;
    ql_zk_elect_t *elect;
    ql_zk_lock_t *lock;
    const char *id;
    bool lock_mode;
    long wedge_ms;
    long wedge_delay_ms;
    bool wedged;
    bool lose_create;
    uv_signal_t term;
    uv_timer_t wedge;
    bool stopping;
} member_t;

static long long now_ms(void) {
    return (long long)(uv_hrtime() / 1000000);
}

static void say(member_t *m, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(member_t *m, const char *kind, const char *fmt, ...) {
    char rest[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    printf("%s ms=%lld pid=%d id=%s %s\n", kind, now_ms(), (int)getpid(), m->id, rest);
    fflush(stdout);
}

/* The wedge: this process's loop thread is stuck for wedge_ms, as a wedged server's would be.
 * The block is the point of the test, not a wait for a condition. */
static void wedge_cb(uv_timer_t *t) {
    member_t *m = t->data;
    say(m, "WEDGE", "for=%ld", m->wedge_ms);
    long long until = now_ms() + m->wedge_ms;
    while (now_ms() < until) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    say(m, "WEDGE-END", "%s", "");
}

static void on_hold(void *arg, const ql_zk_hold_event_t *ev) {
    member_t *m = arg;
    if (ev->kind == QL_ZK_HELD) {
        say(m, "HELD", "token=%llu node=%s", (unsigned long long)ev->token, ev->node);
        if (m->wedge_ms > 0 && !m->wedged) {
            m->wedged = true; /* once */
            uv_timer_start(&m->wedge, wedge_cb, (uint64_t)m->wedge_delay_ms, 0);
        }
    } else if (ev->kind == QL_ZK_STANDBY) {
        say(m, "STANDBY", "holder=%s", ev->holder);
    } else {
        say(m, "LOST", "token=%llu reason=%s", (unsigned long long)ev->token, ev->reason);
    }
}

static void join(member_t *m) {
    int rc = m->lock_mode ? ql_zk_lock_new(m->zk, on_hold, m, &m->lock)
                          : ql_zk_elect_new(m->zk, on_hold, m, &m->elect);
    if (rc) {
        fprintf(stderr, "zk_member: cannot join: %s\n", ql_strerror(rc));
        exit(1);
    }
}

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    member_t *m = arg;
    say(m, "STATE", "state=%s session=0x%llx reason=%s", ql_zk_state_name(ev->state),
        (unsigned long long)ev->session_id, ev->reason);
    if (ev->state == QL_ZK_CONNECTED && m->lose_create) {
        zk_test_lose_next_create(zk);
        m->lose_create = false;
    }
    if (ev->state == QL_ZK_EXPIRED && !m->stopping)
        ql_zk_reopen(zk);
}

static void closed_cb(void *arg) {
    member_t *m = arg;
    say(m, "BYE", "%s", "");
    uv_close((uv_handle_t *)&m->term, NULL);
    uv_close((uv_handle_t *)&m->wedge, NULL);
}

static void on_term(uv_signal_t *s, int sig) {
    (void)sig;
    member_t *m = s->data;
    if (m->stopping)
        return;
    m->stopping = true;
    ql_zk_elect_free(m->elect);
    ql_zk_lock_free(m->lock);
    m->elect = NULL;
    m->lock = NULL;
    ql_zk_unlisten(m->zk, &m->listener);
    ql_zk_close(m->zk, closed_cb, m);
}

int main(int argc, char **argv) {
    ql_zk_opts_t o = {.cluster = "c", .session_timeout_ms = 2000};
    member_t m = {.id = "?"};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--connect"))
            o.connect = argv[i + 1];
        else if (!strcmp(argv[i], "--base"))
            o.base_path = argv[i + 1];
        else if (!strcmp(argv[i], "--id"))
            m.id = argv[i + 1];
        else if (!strcmp(argv[i], "--timeout"))
            o.session_timeout_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mode"))
            m.lock_mode = !strcmp(argv[i + 1], "lock");
        else if (!strcmp(argv[i], "--wedge"))
            m.wedge_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--wedge-delay"))
            m.wedge_delay_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--lose-create"))
            m.lose_create = !strcmp(argv[i + 1], "yes");
        else {
            fprintf(stderr, "zk_member: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    o.server_id = m.id;
    ql_log_t log;
    ql_log_init(&log, QL_LOG_INFO);
    o.log = &log;
    m.loop = uv_default_loop();
    ql_err_t err = {0};
    if (ql_zk_new(m.loop, &o, &m.zk, &err)) {
        fprintf(stderr, "zk_member: %s\n", err.msg);
        return 1;
    }
    ql_zk_listen(m.zk, &m.listener, on_state, &m);
    uv_signal_init(m.loop, &m.term);
    m.term.data = &m;
    uv_signal_start(&m.term, on_term, SIGTERM);
    uv_timer_init(m.loop, &m.wedge);
    m.wedge.data = &m;
    join(&m);
    uv_run(m.loop, UV_RUN_DEFAULT);
    uv_loop_close(m.loop);
    return 0;
}
