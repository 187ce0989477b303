/*
 * ZooKeeper holdings across processes and failures (docs/zookeeper.md), against the fixture's
 * real server: zk_member processes (tests/scheduler/zk_member.c) are killed, stopped gracefully
 * or wedged, and the ZooKeeper server itself is paused. Every member prints what it did with its
 * pid, its id and the monotonic time (the clock this test reads too), and the assertions are
 * made on those records: who held what, from when, with which token.
 */
#include "scheduler/zk_int.h"

#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"
#include "tests/common/zk_util.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define T_MS 1000
#define WATCHDOG_T_MS 2000 /* the watchdog case: its margin is T/2, kept wide under load */

static char dir[256];
static char err_path[300];
static uv_loop_t loop;
static char base[64];
static ql_test_zk_member_t members[3];
static pid_t paused_server; /* resumed by the teardown whatever happens */
static uv_timer_t tick;     /* bounds every wait of the loop (nothing else may wake it) */

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_zk_cluster");
    snprintf(err_path, sizeof err_path, "%s/members.log", dir);
    uv_loop_init(&loop);
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, ql_test_tick_cb, 20, 20);
    ql_test_zk_base(base, sizeof base);
    memset(members, 0, sizeof members);
    paused_server = 0;
}

static void teardown(void) {
    if (paused_server)
        kill(paused_server, SIGCONT);
    for (int i = 0; i < 3; i++)
        ql_test_zk_member_reap(&members[i]);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_loop_close(&loop);
    ql_test_zk_private_stop();
}

TestSuite(zk_cluster, .init = setup, .fini = teardown, .timeout = 120);

static ql_test_zk_member_t *start(int i, const char *mode, int timeout_ms,
                                  const char *const *extra) {
    char id[8];
    snprintf(id, sizeof id, "%c", 'a' + i);
    ql_test_zk_member_start(&members[i], &loop, id, mode, base, timeout_ms, extra, err_path);
    return &members[i];
}

/* The index of the member (other than except) that printed HELD at or after line from[k]. */
static int new_holder(const size_t from[3], int except) {
    for (int k = 0; k < 3; k++)
        if (k != except && members[k].loop && !members[k].exited &&
            ql_test_zk_member_find(&members[k], from[k], "HELD") >= 0)
            return k;
    return -1;
}

typedef struct holder_wait {
    const size_t *from;
    int except;
} holder_wait_t;

static bool cond_new_holder(const void *arg) {
    const holder_wait_t *w = arg;
    return new_holder(w->from, w->except) >= 0;
}

Test(zk_cluster, killing_the_leader_hands_over_within_the_session_timeout) {
    ql_test_zk_member_t *m[3];
    for (int i = 0; i < 3; i++) {
        m[i] = start(i, "elect", T_MS, NULL);
        ql_test_zk_member_wait(m[i], 0, i == 0 ? "HELD" : "STANDBY", 10000);
    }
    int leader = 0;
    int line = ql_test_zk_member_find(m[0], 0, "HELD");
    uint64_t token = ql_test_zk_member_num(m[0], line, "token");
    for (int round = 0; round < 2; round++) {
        size_t from[3];
        for (int k = 0; k < 3; k++)
            from[k] = m[k]->n_lines;
        int64_t killed = ql_test_mono_ms();
        ql_test_zk_member_stop(m[leader], SIGKILL, 5000);
        holder_wait_t w = {from, leader};
        cr_assert(ql_test_drive_until(&loop, cond_new_holder, &w, T_MS + 3000),
                  "round %d: nobody took over", round);
        int next = new_holder(from, leader);
        int h = ql_test_zk_member_find(m[next], from[next], "HELD");
        int64_t took = m[next]->lines[h].ms - killed;
        cr_log_info("round %d: %s (pid %d) took over %lld ms after the SIGKILL of %s (pid %d)",
                    round, m[next]->id, (int)m[next]->pid, (long long)took, m[leader]->id,
                    (int)m[leader]->pid);
        cr_assert_geq(took, 0, "no second leader while the first lived");
        cr_assert_leq(took, T_MS + 1000, "within T + 1 s: took %lld ms", (long long)took);
        uint64_t t = ql_test_zk_member_num(m[next], h, "token");
        cr_assert_gt(t, token, "a larger token for every new leader");
        token = t;
        /* Exactly one leader: the third member still follows. */
        for (int k = 0; k < 3; k++)
            if (k != leader && k != next && !m[k]->exited)
                cr_assert_eq(ql_test_zk_member_find(m[k], from[k], "HELD"), -1);
        leader = next;
    }
}

Test(zk_cluster, a_graceful_stop_hands_over_at_once) {
    /* A 10 s session: a handover in well under a second cannot be an expiry. */
    ql_test_zk_member_t *a = start(0, "elect", 10000, NULL);
    ql_test_zk_member_wait(a, 0, "HELD", 10000);
    ql_test_zk_member_t *b = start(1, "elect", 10000, NULL);
    ql_test_zk_member_wait(b, 0, "STANDBY", 10000);
    int64_t stopped = ql_test_mono_ms();
    size_t from = b->n_lines;
    cr_assert_eq(uv_process_kill(&a->proc, SIGTERM), 0);
    int h = ql_test_zk_member_wait(b, from, "HELD", 5000);
    int64_t took = b->lines[h].ms - stopped;
    cr_log_info("graceful handover in %lld ms", (long long)took);
    cr_assert_lt(took, 1000, "the resignation hands over at once: %lld ms", (long long)took);
    ql_test_zk_member_wait(a, 0, "BYE", 5000);
    ql_test_zk_member_stop(a, 0, 5000);
    cr_assert_eq(a->exit_status, 0);
    cr_assert_eq(a->term_signal, 0);
}

Test(zk_cluster, the_watchdog_frees_a_wedged_holders_lock) {
    /* a holds the global lock, then its loop wedges for T; b is the standby. */
    const char *wedge[] = {"--wedge", "2000", "--wedge-delay", "1000", NULL};
    ql_test_zk_member_t *a = start(0, "lock", WATCHDOG_T_MS, wedge);
    int ha = ql_test_zk_member_wait(a, 0, "HELD", 10000);
    ql_test_zk_member_t *b = start(1, "lock", WATCHDOG_T_MS, NULL);
    ql_test_zk_member_wait(b, 0, "STANDBY", 5000);
    int w = ql_test_zk_member_wait(a, 0, "WEDGE ", 5000);
    int64_t wedged = a->lines[w].ms;
    int hb = ql_test_zk_member_wait(b, 0, "HELD", WATCHDOG_T_MS + 2000);
    int64_t took = b->lines[hb].ms - wedged;
    cr_log_info("the standby held the lock %lld ms after the holder's loop wedged (T = %d ms)",
                (long long)took, WATCHDOG_T_MS);
    cr_assert_gt(took, 0);
    cr_assert_lt(took, WATCHDOG_T_MS, "taken over before the session could have expired: %lld ms",
                 (long long)took);
    cr_assert_gt(ql_test_zk_member_num(b, hb, "token"), ql_test_zk_member_num(a, ha, "token"));
    /* When the wedged loop runs again it learns that its session was closed, and follows. */
    int we = ql_test_zk_member_wait(a, (size_t)w, "WEDGE-END", 5000);
    int ex = ql_test_zk_member_wait(a, (size_t)we, "STATE", 5000);
    cr_assert(strstr(a->lines[ex].text, "state=expired") && strstr(a->lines[ex].text, "watchdog"),
              "%s", a->lines[ex].text);
    ql_test_zk_member_wait(a, (size_t)ex, "LOST", 5000);
    ql_test_zk_member_wait(a, (size_t)ex, "STANDBY", 5000);
}

/* ---- the ZooKeeper server paused ---- */

typedef struct watcher {
    ql_zk_listener_t listener;
    ql_zk_t *zk;
} watcher_t;

static void reopen_on_expiry(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    (void)arg;
    if (ev->state == QL_ZK_EXPIRED)
        ql_zk_reopen(zk);
}

typedef struct leading {
    int n_held;
    uint64_t token; /* of the latest HELD */
    bool holds;     /* as of the latest event */
    uint64_t first; /* the token held before the pause */
} leading_t;

static void lead_cb(void *arg, const ql_zk_hold_event_t *ev) {
    leading_t *l = arg;
    l->holds = ev->kind == QL_ZK_HELD;
    if (ev->kind == QL_ZK_HELD) {
        l->n_held++;
        l->token = ev->token;
    }
}

typedef struct pause_state {
    ql_test_zk_rec_t *rec;
    leading_t *lead;
} pause_state_t;

static bool cond_both(const void *arg) {
    const ql_test_zk_rec_t *r = arg;
    for (int i = 0; i < 2; i++)
        if (ql_test_zk_rec_find(&r[i], 1, QL_ZK_EXPIRED) < 0 &&
            ql_test_zk_rec_find(&r[i], 1, QL_ZK_RECONNECTED) < 0)
            return false;
    return true;
}

static bool cond_one_leader(const void *arg) {
    const leading_t *l = arg;
    return l[0].holds + l[1].holds == 1;
}

Test(zk_cluster, a_paused_zookeeper_suspends_every_session_which_then_ends_or_resumes) {
    ql_test_zk_rec_t rec[2];
    watcher_t w[2];
    leading_t lead[2] = {0};
    ql_zk_elect_t *e[2];
    ql_zk_t *zk[2];
    /* A server of this test's own: stopping the fixture's would stop the other tests' too. */
    char zk_dir[300];
    snprintf(zk_dir, sizeof zk_dir, "%s/zk", dir);
    ql_test_zk_private_start(zk_dir);
    for (int i = 0; i < 2; i++) {
        ql_zk_opts_t o;
        ql_test_zk_opts(&o, base, i ? "b" : "a", T_MS);
        zk[i] = ql_test_zk_open(&loop, &o, &rec[i]);
        ql_zk_listen(zk[i], &w[i].listener, reopen_on_expiry, NULL);
        cr_assert_eq(ql_zk_elect_new(zk[i], lead_cb, &lead[i], &e[i]), 0);
    }
    cr_assert(ql_test_drive_until(&loop, cond_one_leader, lead, 5000));
    int before = lead[0].holds ? 0 : 1;
    uint64_t token_before = lead[before].token;

    /* The nemesis: ZooKeeper stopped for 2.5 T. */
    pid_t server = ql_test_zk_server_pid();
    int64_t paused = ql_test_mono_ms();
    cr_assert_eq(kill(server, SIGSTOP), 0);
    paused_server = server;
    for (int i = 0; i < 2; i++) {
        int s = ql_test_zk_rec_wait(&loop, &rec[i], 1, QL_ZK_SUSPENDED, T_MS + 1000);
        int d = ql_test_zk_rec_wait(&loop, &rec[i], (size_t)s, QL_ZK_DOUBTFUL, T_MS);
        cr_log_info("session %d: suspended %lld ms and doubtful %lld ms after the pause", i,
                    (long long)(rec[i].at_ms[s] - paused), (long long)(rec[i].at_ms[d] - paused));
        cr_assert_geq(rec[i].at_ms[d] - rec[i].at_ms[s], T_MS / 4 - 50,
                      "doubtful a quarter of the timeout after the suspension");
    }
    int64_t left = paused + 5 * T_MS / 2 - ql_test_mono_ms();
    if (left > 0)
        ql_test_drive_for(&loop, left);
    cr_assert_eq(kill(server, SIGCONT), 0);
    paused_server = 0;

    /* Each session either expired (ZooKeeper's expiry ran first when it resumed) or was
     * revived by its own client's reconnect (which reached the resumed server first): that race
     * is ZooKeeper's, and both outcomes must leave the holdings right. */
    cr_assert(ql_test_drive_until(&loop, cond_both, rec, 15000), "the sessions settle");
    bool leader_expired = false;
    for (int i = 0; i < 2; i++) {
        int x = ql_test_zk_rec_find(&rec[i], 1, QL_ZK_EXPIRED);
        cr_log_info("session %d after the pause: %s", i, x >= 0 ? "expired" : "reconnected");
        if (x >= 0) {
            int c = ql_test_zk_rec_wait(&loop, &rec[i], (size_t)x, QL_ZK_CONNECTED, 10000);
            cr_assert_neq(rec[i].sessions[c], rec[i].sessions[0], "a new session");
            leader_expired |= i == before;
        } else {
            int r = ql_test_zk_rec_find(&rec[i], 1, QL_ZK_RECONNECTED);
            cr_assert_eq(rec[i].sessions[r], rec[i].sessions[0], "the same session");
        }
    }
    cr_assert(ql_test_drive_until(&loop, cond_one_leader, lead, 10000), "one leader again");
    int after = lead[0].holds ? 0 : 1;
    if (leader_expired) {
        cr_assert_gt(lead[after].token, token_before, "re-acquired with a larger token");
    } else {
        cr_assert_eq(after, before, "a revived session kept its leadership");
        cr_assert_eq(lead[after].token, token_before);
        cr_assert_eq(lead[after].n_held, 1, "and never lost it");
    }
    for (int i = 0; i < 2; i++) {
        ql_zk_elect_free(e[i]);
        ql_zk_unlisten(zk[i], &w[i].listener);
        ql_test_zk_close(&loop, zk[i], &rec[i]);
    }
}
