/*
 * The ZooKeeper session (scheduler/include/scheduler/ql_zk.h, scheduler/zk_int.h) against the
 * real ZooKeeper of the zk fixture (docs/testing.md, ZooKeeper): its paths, its requests and
 * watches answered on the loop, suspension and reconnection, expiry and reopening, and the
 * watchdog that closes the session of a stalled loop.
 */
#include "scheduler/zk_int.h"

#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"
#include "tests/common/zk_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char dir[256];
static uv_loop_t loop;
static char base[64];
static ql_zk_t *zk;
static ql_test_zk_rec_t rec;

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_zk_session");
    uv_loop_init(&loop);
    ql_test_zk_base(base, sizeof base);
}

static void teardown(void) {
    ql_test_zk_close(&loop, zk, &rec);
    zk = NULL;
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0, "the session left a handle open");
}

TestSuite(zk_session, .init = setup, .fini = teardown, .timeout = 120);

/* ---- requests as calls that wait (driving the loop) ---- */

typedef struct fired {
    int n;
    int type;
    char path[512];
} fired_t;

/* The answer of a request and what its watch saw (one arg serves both). */
typedef struct answer {
    fired_t fired;
    bool done;
    int rc;
    struct Stat stat;
    char path[512];
    char data[256];
    size_t n_kids;
    bool on_loop_thread;
} answer_t;

static pthread_t loop_thread;

static void answer_cb(ql_zk_t *z, const zk_result_t *r, void *arg) {
    (void)z;
    answer_t *a = arg;
    a->done = true;
    a->rc = r->rc;
    a->on_loop_thread = pthread_equal(pthread_self(), loop_thread);
    if (r->stat)
        a->stat = *r->stat;
    snprintf(a->path, sizeof a->path, "%s", r->path ? r->path : "");
    snprintf(a->data, sizeof a->data, "%s", r->data ? r->data : "");
    a->n_kids = r->n_kids;
}

static bool cond_done(const void *arg) {
    return ((const answer_t *)arg)->done;
}

static void await(answer_t *a) {
    cr_assert(ql_test_drive_until(&loop, cond_done, a, 10000), "no answer within 10 s");
    cr_assert(a->on_loop_thread, "the answer ran on another thread than the loop's");
}

static int op_create(ql_zk_t *z, const char *path, int mode, answer_t *a) {
    memset(a, 0, sizeof *a);
    cr_assert_eq(zk_create(z, path, "x", mode, answer_cb, a), 0);
    await(a);
    return a->rc;
}

static int op_exists(ql_zk_t *z, const char *path, answer_t *a) {
    memset(a, 0, sizeof *a);
    cr_assert_eq(zk_exists(z, path, NULL, answer_cb, a), 0);
    await(a);
    return a->rc;
}

static void watch_cb(ql_zk_t *z, uint64_t gen, int type, const char *path, void *arg) {
    (void)z, (void)gen;
    fired_t *f = &((answer_t *)arg)->fired;
    f->n++;
    f->type = type;
    snprintf(f->path, sizeof f->path, "%s", path);
}

static bool cond_fired(const void *arg) {
    return ((const answer_t *)arg)->fired.n > 0;
}

static ql_zk_t *open_session(const char *id, int timeout_ms, ql_test_zk_rec_t *r) {
    loop_thread = pthread_self();
    ql_zk_opts_t o;
    ql_test_zk_opts(&o, base, id, timeout_ms);
    return ql_test_zk_open(&loop, &o, r);
}

Test(zk_session, connects_and_makes_the_cluster_paths) {
    zk = open_session("a", 2000, &rec);
    char want[128];
    snprintf(want, sizeof want, "%s/c/job_engine", base);
    cr_assert_str_eq(ql_zk_root(zk), want);
    cr_assert_neq(rec.sessions[0], 0);
    cr_assert_eq(ql_zk_session_id(zk), rec.sessions[0]);
    cr_assert(strstr(ql_zk_node_data(zk), "server=a pid="), "%s", ql_zk_node_data(zk));
    answer_t a;
    char path[256];
    snprintf(path, sizeof path, "%s/leader", ql_zk_root(zk));
    cr_assert_eq(op_exists(zk, path, &a), ZOK, "leader/ exists once CONNECTED");
    snprintf(path, sizeof path, "%s/lock", ql_zk_root(zk));
    cr_assert_eq(op_exists(zk, path, &a), ZOK, "lock/ exists once CONNECTED");
    cr_assert_eq(a.stat.ephemeralOwner, 0, "the parents are persistent");

    /* A second server of the cluster finds them made (ZNODEEXISTS is fine). */
    ql_test_zk_rec_t rec2;
    ql_zk_t *zk2 = open_session("b", 2000, &rec2);
    cr_assert_neq(rec2.sessions[0], rec.sessions[0]);
    ql_test_zk_close(&loop, zk2, &rec2);
}

Test(zk_session, requests_and_watches_are_answered_on_the_loop) {
    zk = open_session("a", 2000, &rec);
    char path[256];
    snprintf(path, sizeof path, "%s/node", ql_zk_root(zk));
    answer_t a;
    cr_assert_eq(op_create(zk, path, ZOO_EPHEMERAL, &a), ZOK);
    cr_assert_str_eq(a.path, path);
    cr_assert_gt(a.stat.czxid, 0, "create2 gives the node's czxid");
    cr_assert_eq(a.stat.ephemeralOwner, ql_zk_session_id(zk));
    int64_t czxid = a.stat.czxid;
    cr_assert_eq(op_create(zk, path, ZOO_EPHEMERAL, &a), ZNODEEXISTS);

    answer_t g = {0};
    cr_assert_eq(zk_get(zk, path, watch_cb, answer_cb, &g), 0);
    await(&g);
    cr_assert_eq(g.rc, ZOK);
    cr_assert_str_eq(g.data, "x");
    cr_assert_eq(g.stat.czxid, czxid);

    memset(&a, 0, sizeof a);
    cr_assert_eq(zk_children(zk, ql_zk_root(zk), NULL, answer_cb, &a), 0);
    await(&a);
    cr_assert_eq(a.n_kids, 3, "leader, lock and node");

    memset(&a, 0, sizeof a);
    cr_assert_eq(zk_delete(zk, path, answer_cb, &a), 0);
    await(&a);
    cr_assert_eq(a.rc, ZOK);
    cr_assert(ql_test_drive_until(&loop, cond_fired, &g, 5000), "the watch fires");
    cr_assert_eq(g.fired.type, ZOO_DELETED_EVENT);
    cr_assert_str_eq(g.fired.path, path);
    ql_test_drive_for(&loop, 200);
    cr_assert_eq(g.fired.n, 1, "a watch fires once");

    cr_assert_eq(zk_create(zk, "no-slash", "", 0, answer_cb, &a), QL_EINVAL,
                 "a path the library refuses: no callback will come");
}

Test(zk_session, a_cancelled_request_stays_silent_and_its_node_is_undone) {
    zk = open_session("a", 2000, &rec);
    char path[256];
    snprintf(path, sizeof path, "%s/cancelled", ql_zk_root(zk));
    answer_t a = {0}, f = {0};
    char other[256];
    snprintf(other, sizeof other, "%s/other", ql_zk_root(zk));
    cr_assert_eq(zk_create(zk, path, "", ZOO_EPHEMERAL, answer_cb, &a), 0);
    cr_assert_eq(zk_exists(zk, other, watch_cb, NULL, &f), 0);
    zk_cancel(zk, &a);
    zk_cancel(zk, &f);
    answer_t b;
    cr_assert_eq(op_create(zk, other, ZOO_EPHEMERAL, &b), ZOK, "the watched node appears");
    ql_test_drive_for(&loop, 300);
    cr_assert(!a.done, "a cancelled request is not answered");
    cr_assert_eq(f.fired.n, 0, "a cancelled watch does not fire");
    cr_assert_eq(op_exists(zk, path, &b), ZNONODE,
                 "an ephemeral node whose maker gave it up while it was made is deleted again");
}

Test(zk_session, a_lost_connection_suspends_then_reconnects_the_same_session) {
    zk = open_session("a", 2000, &rec);
    char path[256];
    snprintf(path, sizeof path, "%s/held", ql_zk_root(zk));
    answer_t a;
    cr_assert_eq(op_create(zk, path, ZOO_EPHEMERAL, &a), ZOK);
    int64_t sid = ql_zk_session_id(zk);
    zk_test_drop_connection(zk);
    int s = ql_test_zk_rec_wait(&loop, &rec, 1, QL_ZK_SUSPENDED, 5000);
    int r = ql_test_zk_rec_wait(&loop, &rec, (size_t)s, QL_ZK_RECONNECTED, 5000);
    cr_assert_eq(rec.sessions[r], sid, "the same session");
    cr_assert_eq(ql_test_zk_rec_find(&rec, 1, QL_ZK_EXPIRED), -1);
    cr_assert_eq(op_exists(zk, path, &a), ZOK, "its holding survived the suspension");
    cr_assert_eq(a.stat.ephemeralOwner, sid);
}

/* ZooKeeper ends a session when another handle that connected with its id and password
 * closes it: the deterministic way to end one. The session's own client may win its
 * connection back in between (the server moves a session to whichever connected last), and
 * then the other handle's close sends nothing; so it is tried until the session reports the
 * end, at most 5 times. The blocking calls are the test's, not the session's. */
static void expire_from_outside(ql_zk_t *z, ql_test_zk_rec_t *r) {
    pthread_mutex_lock(&z->zh_lock);
    clientid_t id = *zoo_client_id(z->cur->zh);
    pthread_mutex_unlock(&z->zh_lock);
    for (int tries = 0; tries < 5 && ql_test_zk_rec_find(r, 0, QL_ZK_EXPIRED) < 0; tries++) {
        zhandle_t *other = zookeeper_init(ql_test_zk_connect(), NULL, 2000, &id, NULL, 0);
        cr_assert_not_null(other);
        int64_t until = ql_test_mono_ms() + 5000;
        while (zoo_state(other) != ZOO_CONNECTED_STATE && ql_test_mono_ms() < until)
            uv_run(&loop, UV_RUN_ONCE); /* keeps the session's loop (and heartbeat) going */
        zookeeper_close(other);
        until = ql_test_mono_ms() + 2000;
        while (ql_test_zk_rec_find(r, 0, QL_ZK_EXPIRED) < 0 && ql_test_mono_ms() < until)
            uv_run(&loop, UV_RUN_ONCE);
    }
}

Test(zk_session, an_ended_session_is_reported_and_a_new_one_opened) {
    zk = open_session("a", 2000, &rec);
    char path[256];
    snprintf(path, sizeof path, "%s/held", ql_zk_root(zk));
    answer_t a;
    cr_assert_eq(op_create(zk, path, ZOO_EPHEMERAL, &a), ZOK);
    int64_t sid = ql_zk_session_id(zk);
    expire_from_outside(zk, &rec);
    int e = ql_test_zk_rec_wait(&loop, &rec, 1, QL_ZK_EXPIRED, 10000);
    cr_assert(strstr(rec.reasons[e], "expired"), "%s", rec.reasons[e]);
    cr_assert_eq(zk_exists(zk, path, NULL, answer_cb, &a), QL_EZOOKEEPER,
                 "no requests without a session");
    cr_assert_eq(ql_zk_reopen(zk), 0);
    cr_assert_eq(ql_zk_reopen(zk), QL_EINVAL, "one handle at a time");
    int c = ql_test_zk_rec_wait(&loop, &rec, (size_t)e, QL_ZK_CONNECTED, 10000);
    cr_assert_neq(rec.sessions[c], sid, "a new session");
    cr_assert_eq(op_exists(zk, path, &a), ZNONODE, "the ended session's nodes are gone");
}

Test(zk_session, the_watchdog_closes_the_session_of_a_stalled_loop) {
    /* T = 4 s: the watchdog acts after 2 s of stall, ZooKeeper could not expire the session
     * before 4 s, and everything below is checked before then. */
    zk = open_session("a", 4000, &rec);
    cr_assert_eq(rec.states[0], QL_ZK_CONNECTED);
    char path[256];
    snprintf(path, sizeof path, "%s/held", ql_zk_root(zk));
    answer_t a;
    cr_assert_eq(op_create(zk, path, ZOO_EPHEMERAL, &a), ZOK);
    /* The stall: this thread runs no loop for 2.5 s (the point of the test, not a wait). */
    int64_t start = ql_test_mono_ms();
    while (ql_test_mono_ms() < start + 2500) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int e = ql_test_zk_rec_wait(&loop, &rec, 1, QL_ZK_EXPIRED, 1000);
    cr_assert(strstr(rec.reasons[e], "watchdog"), "%s", rec.reasons[e]);
    cr_assert_eq(ql_zk_reopen(zk), 0);
    ql_test_zk_rec_wait(&loop, &rec, (size_t)e, QL_ZK_CONNECTED, 1000);
    cr_assert_eq(op_exists(zk, path, &a), ZNONODE,
                 "the closed session's node is gone before the session could have expired");
    cr_assert_lt(ql_test_mono_ms() - start, 4000);
}
