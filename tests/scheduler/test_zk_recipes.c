/*
 * The recipes on the ZooKeeper session (scheduler/include/scheduler/ql_zk.h): the global job
 * engine lock, leader election, per-job locks and fence_id, each participant a session of its
 * own on the test's loop, against the fixture's ZooKeeper. The tests that kill, stop or wedge a
 * participant's process are in test_zk_cluster.c.
 */
#include "scheduler/zk_int.h"

#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"
#include "tests/common/zk_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define MAX_EVENTS 32

typedef struct part {
    char id[16];
    ql_zk_t *zk;
    ql_test_zk_rec_t rec;
    ql_zk_elect_t *elect;
    ql_zk_lock_t *lock;
    ql_zk_jobs_t *jobs;
    /* holdings reported */
    size_t n;
    ql_zk_hold_kind_t kind[MAX_EVENTS];
    uint64_t token[MAX_EVENTS];
    char holder[MAX_EVENTS][256];
    char node[MAX_EVENTS][256];
    int64_t at[MAX_EVENTS];
    /* job lock events */
    size_t n_vanished;
    char vanished[MAX_EVENTS][72];
    int listed;
} part_t;

static char dir[256];
static uv_loop_t loop;
static char base[64];
static part_t parts[4];

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_zk_recipes");
    uv_loop_init(&loop);
    ql_test_zk_base(base, sizeof base);
    memset(parts, 0, sizeof parts);
}

static void part_leave(part_t *p) {
    ql_zk_elect_free(p->elect);
    ql_zk_lock_free(p->lock);
    ql_zk_jobs_free(p->jobs);
    p->elect = NULL;
    p->lock = NULL;
    p->jobs = NULL;
}

static void part_close(part_t *p) {
    part_leave(p);
    ql_test_zk_close(&loop, p->zk, &p->rec);
    p->zk = NULL;
}

static void teardown(void) {
    for (int i = 0; i < 4; i++)
        part_close(&parts[i]);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

TestSuite(zk_recipes, .init = setup, .fini = teardown, .timeout = 120);

static part_t *part_open(int i, int timeout_ms) {
    part_t *p = &parts[i];
    snprintf(p->id, sizeof p->id, "%c", 'a' + i);
    ql_zk_opts_t o;
    ql_test_zk_opts(&o, base, p->id, timeout_ms);
    p->zk = ql_test_zk_open(&loop, &o, &p->rec);
    return p;
}

static void jobs_cb(void *arg, ql_zk_jobs_kind_t kind, const char *job_id);

static void hold_cb(void *arg, const ql_zk_hold_event_t *ev) {
    part_t *p = arg;
    if (p->n == MAX_EVENTS)
        return;
    p->kind[p->n] = ev->kind;
    p->token[p->n] = ev->token;
    snprintf(p->holder[p->n], sizeof p->holder[0], "%s", ev->holder);
    snprintf(p->node[p->n], sizeof p->node[0], "%s", ev->node);
    p->at[p->n] = ql_test_mono_ms();
    p->n++;
}

static int find_hold(const part_t *p, size_t from, ql_zk_hold_kind_t kind) {
    for (size_t i = from; i < p->n; i++)
        if (p->kind[i] == kind)
            return (int)i;
    return -1;
}

typedef struct hold_wait {
    const part_t *p;
    size_t from;
    ql_zk_hold_kind_t kind;
} hold_wait_t;

static bool cond_hold(const void *arg) {
    const hold_wait_t *w = arg;
    return find_hold(w->p, w->from, w->kind) >= 0;
}

static int wait_hold(part_t *p, size_t from, ql_zk_hold_kind_t kind, int64_t ms) {
    hold_wait_t w = {p, from, kind};
    ql_test_drive_until(&loop, cond_hold, &w, ms);
    int i = find_hold(p, from, kind);
    cr_assert_geq(i, 0, "participant %s: no %s within %lld ms (%zu events)", p->id,
                  kind == QL_ZK_HELD      ? "HELD"
                  : kind == QL_ZK_STANDBY ? "STANDBY"
                                          : "LOST",
                  (long long)ms, p->n);
    return i;
}

/* ---- raw requests, waited for ---- */

typedef struct answer {
    bool done;
    int rc;
    struct Stat stat;
    char kids[8][128];
    size_t n_kids;
} answer_t;

static void answer_cb(ql_zk_t *z, const zk_result_t *r, void *arg) {
    (void)z;
    answer_t *a = arg;
    a->done = true;
    a->rc = r->rc;
    if (r->stat)
        a->stat = *r->stat;
    for (size_t i = 0; i < r->n_kids && i < 8; i++)
        snprintf(a->kids[i], sizeof a->kids[i], "%s", r->kids[i]);
    a->n_kids = r->n_kids;
}

static bool cond_done(const void *arg) {
    return ((const answer_t *)arg)->done;
}

static void await(answer_t *a) {
    cr_assert(ql_test_drive_until(&loop, cond_done, a, 10000), "no answer within 10 s");
}

static int raw_exists(ql_zk_t *zk, const char *path, answer_t *a) {
    memset(a, 0, sizeof *a);
    cr_assert_eq(zk_exists(zk, path, NULL, answer_cb, a), 0);
    await(a);
    return a->rc;
}

static int raw_children(ql_zk_t *zk, const char *path, answer_t *a) {
    memset(a, 0, sizeof *a);
    cr_assert_eq(zk_children(zk, path, NULL, answer_cb, a), 0);
    await(a);
    return a->rc;
}

static int raw_delete(ql_zk_t *zk, const char *path) {
    answer_t a = {0};
    cr_assert_eq(zk_delete(zk, path, answer_cb, &a), 0);
    await(&a);
    return a.rc;
}

static int raw_create(ql_zk_t *zk, const char *path, int mode, answer_t *a) {
    memset(a, 0, sizeof *a);
    cr_assert_eq(zk_create(zk, path, "", mode, answer_cb, a), 0);
    await(a);
    return a->rc;
}

/* ---- the global job engine lock ---- */

Test(zk_recipes, one_server_holds_the_lock_the_other_waits_and_takes_over_at_release) {
    part_t *a = part_open(0, 10000), *b = part_open(1, 10000);
    cr_assert_eq(ql_zk_lock_new(a->zk, hold_cb, a, &a->lock), 0);
    int h = wait_hold(a, 0, QL_ZK_HELD, 5000);
    uint64_t ta = a->token[h];
    char path[256];
    snprintf(path, sizeof path, "%s/global_job_engine_lock", ql_zk_root(a->zk));
    cr_assert_str_eq(a->node[h], path);
    answer_t x;
    cr_assert_eq(raw_exists(a->zk, path, &x), ZOK);
    cr_assert_eq((uint64_t)x.stat.czxid, ta, "the token is the node's czxid");
    cr_assert_eq(x.stat.ephemeralOwner, ql_zk_session_id(a->zk));

    cr_assert_eq(ql_zk_lock_new(b->zk, hold_cb, b, &b->lock), 0);
    int s = wait_hold(b, 0, QL_ZK_STANDBY, 5000);
    cr_assert(strstr(b->holder[s], "server=a pid="), "the standby names the holder: %s",
              b->holder[s]);
    ql_test_drive_for(&loop, 300);
    cr_assert_eq(find_hold(b, 0, QL_ZK_HELD), -1, "only one holds it");

    /* The holder releases: the standby's watch wakes it at once (the session timeout is 10 s;
     * nothing here polls). */
    int64_t released = ql_test_mono_ms();
    ql_zk_lock_free(a->lock);
    a->lock = NULL;
    int hb = wait_hold(b, 0, QL_ZK_HELD, 5000);
    cr_assert_lt(b->at[hb] - released, 1000, "took %lld ms", (long long)(b->at[hb] - released));
    cr_assert_gt(b->token[hb], ta, "a later holding has a larger token");
}

Test(zk_recipes, a_lock_whose_create_answer_was_lost_is_adopted_by_its_session) {
    part_t *a = part_open(0, 4000);
    zk_test_lose_next_create(a->zk);
    cr_assert_eq(ql_zk_lock_new(a->zk, hold_cb, a, &a->lock), 0);
    int h = wait_hold(a, 0, QL_ZK_HELD, 10000);
    cr_assert_geq(ql_test_zk_rec_find(&a->rec, 0, QL_ZK_SUSPENDED), 0,
                  "the connection really dropped");
    answer_t x;
    cr_assert_eq(raw_exists(a->zk, a->node[h], &x), ZOK);
    cr_assert_eq((uint64_t)x.stat.czxid, a->token[h], "the node this session made");
    cr_assert_eq(find_hold(a, 0, QL_ZK_STANDBY), -1, "never mistaken for another's");
}

Test(zk_recipes, a_lock_node_deleted_from_outside_is_lost_and_taken_again) {
    part_t *a = part_open(0, 4000), *b = part_open(1, 4000);
    cr_assert_eq(ql_zk_lock_new(a->zk, hold_cb, a, &a->lock), 0);
    int h = wait_hold(a, 0, QL_ZK_HELD, 5000);
    cr_assert_eq(raw_delete(b->zk, a->node[h]), ZOK);
    int l = wait_hold(a, (size_t)h, QL_ZK_LOST, 5000);
    cr_assert_eq(a->token[l], a->token[h]);
    int h2 = wait_hold(a, (size_t)l, QL_ZK_HELD, 5000);
    cr_assert_gt(a->token[h2], a->token[h]);
}

/* Recipes made while the session is suspended join once it is back. */
typedef struct late {
    ql_zk_listener_t listener;
    part_t *p;
    bool made;
} late_t;

static void make_on_suspension(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    late_t *l = arg;
    if (ev->state != QL_ZK_SUSPENDED || l->made)
        return;
    l->made = true;
    cr_assert_eq(ql_zk_lock_new(zk, hold_cb, l->p, &l->p->lock), 0);
    cr_assert_eq(ql_zk_jobs_new(zk, jobs_cb, l->p, &l->p->jobs), 0);
}

static bool cond_listed(const void *arg);

Test(zk_recipes, a_recipe_made_while_suspended_joins_once_reconnected) {
    part_t *a = part_open(0, 4000);
    late_t late = {.p = a};
    ql_zk_listen(a->zk, &late.listener, make_on_suspension, &late);
    zk_test_drop_connection(a->zk);
    int r = ql_test_zk_rec_wait(&loop, &a->rec, 1, QL_ZK_RECONNECTED, 5000);
    cr_assert(late.made, "made while suspended");
    cr_assert_eq(a->rec.sessions[r], a->rec.sessions[0]);
    wait_hold(a, 0, QL_ZK_HELD, 5000);
    cr_assert(ql_test_drive_until(&loop, cond_listed, a, 5000), "the job locks listed");
    ql_zk_unlisten(a->zk, &late.listener);
}

/* ---- leader election ---- */

static int leaders(void) {
    int n = 0;
    for (int i = 0; i < 4; i++) {
        int last = -1;
        for (size_t k = 0; k < parts[i].n; k++)
            last = (int)k;
        if (parts[i].elect && last >= 0 && parts[i].kind[last] == QL_ZK_HELD)
            n++;
    }
    return n;
}

Test(zk_recipes, three_participants_elect_one_leader_and_a_resignation_hands_over_at_once) {
    part_t *p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = part_open(i, 10000);
        cr_assert_eq(ql_zk_elect_new(p[i]->zk, hold_cb, p[i], &p[i]->elect), 0);
        wait_hold(p[i], 0, i == 0 ? QL_ZK_HELD : QL_ZK_STANDBY, 5000);
    }
    cr_assert_eq(leaders(), 1);
    uint64_t t0 = p[0]->token[find_hold(p[0], 0, QL_ZK_HELD)];
    for (int i = 1; i < 3; i++) {
        int s = find_hold(p[i], 0, QL_ZK_STANDBY);
        cr_assert(strstr(p[i]->holder[s], "server=a "), "standby %d names the leader: %s", i,
                  p[i]->holder[s]);
    }
    char leader_dir[256];
    snprintf(leader_dir, sizeof leader_dir, "%s/leader", ql_zk_root(p[0]->zk));
    answer_t x;
    cr_assert_eq(raw_children(p[0]->zk, leader_dir, &x), ZOK);
    cr_assert_eq(x.n_kids, 3, "one node per participant");

    uint64_t prev = t0;
    for (int i = 0; i < 2; i++) {
        int64_t resigned = ql_test_mono_ms();
        part_leave(p[i]);
        int h = wait_hold(p[i + 1], 0, QL_ZK_HELD, 5000);
        cr_assert_lt(p[i + 1]->at[h] - resigned, 1000, "the next leads at once (%lld ms)",
                     (long long)(p[i + 1]->at[h] - resigned));
        cr_assert_gt(p[i + 1]->token[h], prev, "tokens grow with every new leader");
        prev = p[i + 1]->token[h];
        cr_assert_eq(leaders(), 1);
    }
}

Test(zk_recipes, the_leader_is_the_lowest_sequence_not_the_first_name) {
    part_t *a = part_open(0, 4000), *b = part_open(1, 4000), *c = part_open(2, 4000);
    cr_assert_eq(ql_zk_elect_new(a->zk, hold_cb, a, &a->elect), 0);
    wait_hold(a, 0, QL_ZK_HELD, 5000);
    /* A node whose name sorts before any participant's ('-' < '0'), made after a's. */
    char path[256];
    snprintf(path, sizeof path, "%s/leader/--n_", ql_zk_root(b->zk));
    answer_t x;
    cr_assert_eq(raw_create(b->zk, path, ZOO_EPHEMERAL_SEQUENTIAL, &x), ZOK);
    cr_assert_eq(ql_zk_elect_new(c->zk, hold_cb, c, &c->elect), 0);
    int s = wait_hold(c, 0, QL_ZK_STANDBY, 5000);
    cr_assert(strstr(c->holder[s], "server=a "), "the leader is a's node: %s", c->holder[s]);
    ql_test_drive_for(&loop, 300);
    cr_assert_eq(find_hold(a, 0, QL_ZK_LOST), -1);
    cr_assert_eq(find_hold(c, 0, QL_ZK_HELD), -1);
}

Test(zk_recipes, a_participant_whose_create_answer_was_lost_finds_its_node_and_no_other) {
    part_t *a = part_open(0, 4000);
    zk_test_lose_next_create(a->zk);
    cr_assert_eq(ql_zk_elect_new(a->zk, hold_cb, a, &a->elect), 0);
    int h = wait_hold(a, 0, QL_ZK_HELD, 10000);
    cr_assert_geq(ql_test_zk_rec_find(&a->rec, 0, QL_ZK_SUSPENDED), 0,
                  "the connection really dropped after the node was made");
    char leader_dir[256];
    snprintf(leader_dir, sizeof leader_dir, "%s/leader", ql_zk_root(a->zk));
    answer_t x;
    cr_assert_eq(raw_children(a->zk, leader_dir, &x), ZOK);
    cr_assert_eq(x.n_kids, 1, "no second node of its own (%zu)", x.n_kids);
    cr_assert_str_eq(x.kids[0], ql_zk_elect_node(a->elect));
    answer_t y;
    cr_assert_eq(raw_exists(a->zk, a->node[h], &y), ZOK);
    cr_assert_eq((uint64_t)y.stat.czxid, a->token[h]);

    /* The election goes on: a later participant follows, then leads when a resigns. */
    part_t *b = part_open(1, 4000);
    cr_assert_eq(ql_zk_elect_new(b->zk, hold_cb, b, &b->elect), 0);
    wait_hold(b, 0, QL_ZK_STANDBY, 5000);
    part_leave(a);
    int hb = wait_hold(b, 0, QL_ZK_HELD, 5000);
    cr_assert_gt(b->token[hb], a->token[h]);
}

/* ---- per-job locks ---- */

static void jobs_cb(void *arg, ql_zk_jobs_kind_t kind, const char *job_id) {
    part_t *p = arg;
    if (kind == QL_ZK_JOBS_LISTED)
        p->listed++;
    else if (p->n_vanished < MAX_EVENTS)
        snprintf(p->vanished[p->n_vanished++], sizeof p->vanished[0], "%s", job_id);
}

typedef struct locked {
    bool done;
    int status;
    uint64_t token;
} locked_t;

static void locked_cb(void *arg, int status, uint64_t token) {
    locked_t *l = arg;
    l->done = true;
    l->status = status;
    l->token = token;
}

static bool cond_locked(const void *arg) {
    return ((const locked_t *)arg)->done;
}

static locked_t lock_job(part_t *p, const char *id) {
    locked_t l = {0};
    cr_assert_eq(ql_zk_job_lock(p->jobs, id, locked_cb, &l), 0);
    cr_assert(!l.done, "never answered inside the call");
    cr_assert(ql_test_drive_until(&loop, cond_locked, &l, 10000), "no answer for %s", id);
    return l;
}

static bool cond_listed(const void *arg) {
    return ((const part_t *)arg)->listed > 0;
}

static bool cond_vanished(const void *arg) {
    return ((const part_t *)arg)->n_vanished > 0;
}

Test(zk_recipes, a_job_lock_is_held_by_one_server_and_its_end_is_seen_by_the_others) {
    part_t *a = part_open(0, 4000), *b = part_open(1, 4000);
    cr_assert_eq(ql_zk_jobs_new(a->zk, jobs_cb, a, &a->jobs), 0);
    cr_assert_eq(ql_zk_jobs_new(b->zk, jobs_cb, b, &b->jobs), 0);
    cr_assert(ql_test_drive_until(&loop, cond_listed, b, 5000));
    locked_t la = lock_job(a, "job-1");
    cr_assert_eq(la.status, 0);
    uint64_t t;
    cr_assert(ql_zk_job_held(a->jobs, "job-1", &t));
    cr_assert_eq(t, la.token);
    char path[256];
    snprintf(path, sizeof path, "%s/lock/job-1", ql_zk_root(a->zk));
    answer_t x;
    cr_assert_eq(raw_exists(a->zk, path, &x), ZOK);
    cr_assert_eq((uint64_t)x.stat.czxid, la.token, "the token is the node's czxid");

    locked_t lb = lock_job(b, "job-1");
    cr_assert_eq(lb.status, QL_ELOCKED, "the other server gets ZNODEEXISTS");
    cr_assert(!ql_zk_job_held(b->jobs, "job-1", NULL));
    cr_assert_eq(ql_zk_job_lock(a->jobs, "job-1", locked_cb, &la), QL_EEXIST);
    cr_assert_eq(ql_zk_job_lock(a->jobs, "job/1", locked_cb, &la), QL_EINVAL);

    /* The holder's session ends: the watcher sees the id vanish, and may lock it then. */
    part_close(a);
    cr_assert(ql_test_drive_until(&loop, cond_vanished, b, 5000), "no vanished job");
    cr_assert_str_eq(b->vanished[0], "job-1");
    cr_assert_eq(b->n_vanished, 1);
    cr_assert(!ql_zk_job_listed(b->jobs, "job-1"));
    lb = lock_job(b, "job-1");
    cr_assert_eq(lb.status, 0);
    cr_assert_gt(lb.token, la.token, "the next holding has a larger token");
    cr_assert_eq(ql_zk_job_unlock(b->jobs, "job-1"), 0);
    cr_assert(!ql_zk_job_held(b->jobs, "job-1", NULL));
    cr_assert_eq(ql_zk_job_unlock(b->jobs, "job-1"), QL_ENOTFOUND);
    ql_test_drive_for(&loop, 300);
    cr_assert_eq(raw_exists(b->zk, path, &x), ZNONODE, "unlock deleted the node");
}

Test(zk_recipes, a_job_lock_whose_create_answer_was_lost_is_this_servers) {
    part_t *a = part_open(0, 4000);
    cr_assert_eq(ql_zk_jobs_new(a->zk, jobs_cb, a, &a->jobs), 0);
    cr_assert(ql_test_drive_until(&loop, cond_listed, a, 5000));
    zk_test_lose_next_create(a->zk);
    locked_t l = lock_job(a, "job-2");
    cr_assert_eq(l.status, 0, "adopted, not refused as another's");
    cr_assert_geq(ql_test_zk_rec_find(&a->rec, 0, QL_ZK_SUSPENDED), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/lock/job-2", ql_zk_root(a->zk));
    answer_t x;
    cr_assert_eq(raw_exists(a->zk, path, &x), ZOK);
    cr_assert_eq((uint64_t)x.stat.czxid, l.token);
}

/* ---- fence_id ---- */

typedef struct fid {
    bool done;
    int status;
    char id[40];
    bool created;
} fid_t;

static void fid_cb(void *arg, int status, const char *id, bool created) {
    fid_t *f = arg;
    f->done = true;
    f->status = status;
    snprintf(f->id, sizeof f->id, "%s", id);
    f->created = created;
}

static bool cond_fid(const void *arg) {
    return ((const fid_t *)arg)->done;
}

Test(zk_recipes, the_first_server_makes_fence_id_and_the_others_read_it) {
    part_t *a = part_open(0, 4000), *b = part_open(1, 4000);
    fid_t fa = {0}, fb = {0};
    ql_zk_fence_id_t *xa, *xb;
    cr_assert_eq(ql_zk_fence_id_new(a->zk, fid_cb, &fa, &xa), 0);
    cr_assert(ql_test_drive_until(&loop, cond_fid, &fa, 5000));
    cr_assert_eq(fa.status, 0);
    cr_assert(fa.created);
    cr_assert_eq(strlen(fa.id), 32);
    cr_assert_eq(ql_zk_fence_id_new(b->zk, fid_cb, &fb, &xb), 0);
    cr_assert(ql_test_drive_until(&loop, cond_fid, &fb, 5000));
    cr_assert_eq(fb.status, 0);
    cr_assert(!fb.created);
    cr_assert_str_eq(fb.id, fa.id, "one id for the ensemble");
    char path[256];
    snprintf(path, sizeof path, "%s/fence_id", ql_zk_root(a->zk));
    answer_t x;
    cr_assert_eq(raw_exists(a->zk, path, &x), ZOK);
    cr_assert_eq(x.stat.ephemeralOwner, 0, "persistent");
    ql_zk_fence_id_free(xa);
    ql_zk_fence_id_free(xb);
}
