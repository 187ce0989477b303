/*
 * The writer's lanes (storage/ql_writer.h, Lanes; docs/postgresql.md, Writer lanes): on a
 * store whose write transactions run at once, batches of mutations with different write keys
 * are applied side by side; mutations that share a key never run at once and keep the order
 * they were queued in; a mutation without keys runs alone; a mutation is passed over by one
 * batch at most. LMDB and manual mode keep one lane.
 *
 * The mutations here write nothing: they record when they ran. Waiting is on a condition
 * variable with a deadline, never a sleep; where a test asserts that something did NOT happen,
 * it waits a bounded time for it and checks that it did not come.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            cr_assert_fail(__VA_ARGS__);                                                           \
    } while (0)

static char dir[96];
static ql_store_t *store;

static void teardown(void) {
    if (store)
        ql_store_close(store);
    store = NULL;
}

TestSuite(writer_lanes, .fini = teardown);

/* ---- shared state of the mutations ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* Events, under mu: which mutations have started (and not been released). */
static bool started[64];
static bool released[64];

static struct timespec deadline_in(int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

/* Waits (under mu) until *flag or ms have passed; whether the flag came. */
static bool wait_flag(const bool *flag, int64_t ms) {
    struct timespec until = deadline_in(ms);
    int rc = 0;
    while (!*flag && rc == 0)
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    return *flag;
}

static void set_flag(bool *flag) {
    pthread_mutex_lock(&mu);
    *flag = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void reset_flags(void) {
    pthread_mutex_lock(&mu);
    memset(started, 0, sizeof started);
    memset(released, 0, sizeof released);
    pthread_mutex_unlock(&mu);
}

/* A mutation that marks itself started, then (hold) waits up to wait_ms for flag `until`. */
typedef struct {
    int id;
    const bool *until; /* NULL: returns at once */
    int64_t wait_ms;
    bool saw;      /* whether `until` came while it waited */
    int status;    /* under mu */
    bool answered; /* under mu */
} hold_t;

static int hold_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    (void)txn;
    (void)err;
    hold_t *h = arg;
    set_flag(&started[h->id]);
    if (h->until) {
        pthread_mutex_lock(&mu);
        h->saw = wait_flag(h->until, h->wait_ms);
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

static void hold_done(void *arg, int status, const ql_err_t *err) {
    (void)err;
    hold_t *h = arg;
    pthread_mutex_lock(&mu);
    h->status = status;
    pthread_mutex_unlock(&mu);
    set_flag(&h->answered);
}

static void await_answer(hold_t *h) {
    pthread_mutex_lock(&mu);
    bool answered = wait_flag(&h->answered, 30000);
    int status = h->status;
    pthread_mutex_unlock(&mu);
    cr_assert(answered, "mutation %d was not answered in 30 s", h->id);
    cr_assert_eq(status, 0, "mutation %d failed", h->id);
}

static bool await_started(int id, int64_t ms) {
    pthread_mutex_lock(&mu);
    bool ok = wait_flag(&started[id], ms);
    pthread_mutex_unlock(&mu);
    return ok;
}

static ql_writer_t *lanes_writer(unsigned lanes) {
    store = ql_test_pg_store_open(dir, sizeof dir, "ql_wlanes");
    reset_flags();
    ql_writer_t *w;
    ql_writer_opts_t o = {.lanes = lanes};
    cr_assert_eq(ql_writer_new(store, &o, &w), 0);
    cr_assert_eq(ql_writer_lanes(w), lanes);
    return w;
}

static const ql_id_t id_a = {{1, 0, 0, 0, 0, 0, 0, 0, 0xa1}},
                     id_b = {{2, 0, 0, 0, 0, 0, 0, 0, 0xb2}},
                     id_c = {{3, 0, 0, 0, 0, 0, 0, 0, 0xc3}};

/* Queues mutation `first` (keys k0[0..n0), none: every key) holding its lane for up to wait_ms
 * until the second starts, and once it runs, the second (k1[0..n1)); waits for both answers.
 * Whether the second started while the first ran. */
static bool ran_beside(ql_writer_t *w, int first, const uint64_t *k0, size_t n0, const uint64_t *k1,
                       size_t n1, int64_t wait_ms) {
    hold_t h0 = {.id = first, .until = &started[first + 1], .wait_ms = wait_ms},
           h1 = {.id = first + 1};
    cr_assert_eq(ql_writer_submit_keyed(w, k0, n0, hold_fn, &h0, hold_done), 0);
    cr_assert(await_started(first, 30000));
    cr_assert_eq(ql_writer_submit_keyed(w, k1, n1, hold_fn, &h1, hold_done), 0);
    await_answer(&h0);
    await_answer(&h1);
    return h0.saw;
}

/* ---- tests ---- */

Test(writer_lanes, mutations_of_different_keys_run_at_once) {
    ql_writer_t *w = lanes_writer(2);
    uint64_t ka = ql_writer_key(&id_a), kb = ql_writer_key(&id_b);
    cr_assert_neq(ka, kb);
    /* The first waits for the second to start: with one lane at a time it would wait its whole
     * 20 s out. */
    cr_assert(ran_beside(w, 0, &ka, 1, &kb, 1, 20000),
              "the second lane did not run the other key's mutation while the first ran");
    ql_writer_free(w);
}

Test(writer_lanes, mutations_of_one_key_never_run_at_once_and_keep_their_order) {
    ql_writer_t *w = lanes_writer(2);
    uint64_t ka = ql_writer_key(&id_a);
    /* The first holds for 300 ms: the second, of the same key, must not start meanwhile
     * although a lane is free. */
    cr_assert_not(ran_beside(w, 0, &ka, 1, &ka, 1, 300),
                  "a mutation of the same key ran while the first still ran");
    ql_writer_free(w);
}

Test(writer_lanes, a_mutation_without_keys_runs_alone) {
    ql_writer_t *w = lanes_writer(2);
    uint64_t kb = ql_writer_key(&id_b);
    /* The first has every key: the second, queued after it with a key of its own, waits. */
    cr_assert_not(ran_beside(w, 0, NULL, 0, &kb, 1, 300),
                  "a keyed mutation ran beside one without keys");
    /* And the other way round: a keyed one runs; one without keys waits for it. */
    cr_assert_not(ran_beside(w, 2, &kb, 1, NULL, 0, 300),
                  "a mutation without keys ran beside a keyed one");
    ql_writer_free(w);
}

Test(writer_lanes, a_mutation_is_passed_over_once_at_most) {
    ql_writer_t *w = lanes_writer(2);
    uint64_t ka = ql_writer_key(&id_a), kb = ql_writer_key(&id_b), kc = ql_writer_key(&id_c);
    /* 0 (key a) holds one lane until released. 1 (key a) must wait for it; 2 (key b) may pass
     * 1 on the other lane. Once 1 has been passed, 3 (key c) must not pass it again: it waits
     * until 0 is done and 1 has its turn. */
    hold_t h0 = {.id = 0, .until = &released[0], .wait_ms = 20000}, h1 = {.id = 1}, h2 = {.id = 2},
           h3 = {.id = 3};
    cr_assert_eq(ql_writer_submit_keyed(w, &ka, 1, hold_fn, &h0, hold_done), 0);
    cr_assert(await_started(0, 30000));
    cr_assert_eq(ql_writer_submit_keyed(w, &ka, 1, hold_fn, &h1, hold_done), 0);
    cr_assert_eq(ql_writer_submit_keyed(w, &kb, 1, hold_fn, &h2, hold_done), 0);
    await_answer(&h2); /* it passed 1 */
    cr_assert_eq(ql_writer_submit_keyed(w, &kc, 1, hold_fn, &h3, hold_done), 0);
    cr_assert_not(await_started(3, 300), "a mutation passed one that had been passed already");
    cr_assert_not(await_started(1, 0), "a mutation ran beside another of its key");
    set_flag(&released[0]);
    await_answer(&h0);
    await_answer(&h1);
    await_answer(&h3);
    cr_assert(h0.saw);
    ql_writer_free(w);
}

/* Many submitters, three keys and some mutations without keys: per key, no two at once and
 * the order of submission; a mutation without keys beside nothing. */
#define N_SUB 4
#define PER_SUB 150

static atomic_int running_total, running_of[3];
static atomic_int next_seq[3]; /* the next sequence number each key expects to apply */
static atomic_int violations;

typedef struct {
    int key; /* 0..2, or -1: without keys */
    int seq; /* its key's sequence number, assigned at submission */
    atomic_bool answered;
    atomic_int status;
} mix_t;

static int mix_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    (void)txn;
    (void)err;
    mix_t *m = arg;
    int total = atomic_fetch_add(&running_total, 1);
    if (m->key < 0) {
        if (total != 0)
            atomic_fetch_add(&violations, 1); /* something ran beside a keyless mutation */
    } else {
        if (atomic_fetch_add(&running_of[m->key], 1) != 0)
            atomic_fetch_add(&violations, 1); /* two of one key at once */
        /* In the order of submission (a mutation may run again after a transient failure:
         * then it repeats the number it had). */
        int want = atomic_load(&next_seq[m->key]);
        if (m->seq == want)
            atomic_store(&next_seq[m->key], want + 1);
        else if (m->seq != want - 1)
            atomic_fetch_add(&violations, 1);
        atomic_fetch_sub(&running_of[m->key], 1);
    }
    atomic_fetch_sub(&running_total, 1);
    return 0;
}

static void mix_done(void *arg, int status, const ql_err_t *err) {
    (void)err;
    mix_t *m = arg;
    atomic_store(&m->status, status);
    atomic_store(&m->answered, true);
}

static ql_writer_t *mix_writer;
static mix_t mixes[N_SUB][PER_SUB];
static pthread_mutex_t seq_mu = PTHREAD_MUTEX_INITIALIZER;
static int seq_of[3];
static const ql_id_t *mix_ids[3] = {&id_a, &id_b, &id_c};

static void *mix_submitter(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < PER_SUB; i++) {
        mix_t *m = &mixes[t][i];
        m->key = (i % 25 == 24) ? -1 : (int)((unsigned)(t * 7 + i * 13) % 3);
        uint64_t k = m->key >= 0 ? ql_writer_key(mix_ids[m->key]) : 0;
        /* The number and the queueing under one lock: the order of numbers is the queue's. */
        pthread_mutex_lock(&seq_mu);
        if (m->key >= 0)
            m->seq = seq_of[m->key]++;
        int rc = ql_writer_submit_keyed(mix_writer, &k, m->key >= 0 ? 1 : 0, mix_fn, m, mix_done);
        pthread_mutex_unlock(&seq_mu);
        if (rc)
            atomic_fetch_add(&violations, 1000);
    }
    return NULL;
}

Test(writer_lanes, many_submitters_keep_the_rules_of_keys, .timeout = 120) {
    mix_writer = lanes_writer(3);
    pthread_t th[N_SUB];
    for (int t = 0; t < N_SUB; t++)
        pthread_create(&th[t], NULL, mix_submitter, (void *)(intptr_t)t);
    for (int t = 0; t < N_SUB; t++)
        pthread_join(th[t], NULL);
    ql_writer_free(mix_writer); /* applies and answers what is still queued */
    for (int t = 0; t < N_SUB; t++)
        for (int i = 0; i < PER_SUB; i++) {
            CHECK(atomic_load(&mixes[t][i].answered), "mutation %d/%d not answered", t, i);
            CHECK(atomic_load(&mixes[t][i].status) == 0, "mutation %d/%d failed", t, i);
        }
    cr_assert_eq(atomic_load(&violations), 0, "%d violations of the lanes' rules",
                 atomic_load(&violations));
    for (int k = 0; k < 3; k++)
        cr_assert_eq(atomic_load(&next_seq[k]), seq_of[k], "key %d applied %d of %d", k,
                     atomic_load(&next_seq[k]), seq_of[k]);
}

Test(writer_lanes, lmdb_and_manual_mode_have_one_lane) {
    ql_test_tmpdir(dir, sizeof dir, "ql_wlanes_lmdb");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    ql_err_t err;
    cr_assert_eq(ql_store_open(&o, &store, &err), 0, "%s", err.msg);
    ql_writer_t *w;
    ql_writer_opts_t threaded = {.lanes = 4}, manual = {.manual = true, .lanes = 4};
    cr_assert_eq(ql_writer_new(store, &threaded, &w), 0);
    /* LMDB has one writer at a time: a second lane would wait at its begin. */
    cr_assert_eq(ql_writer_lanes(w), strcmp(ql_test_store_backend(), "pg") == 0 ? 4u : 1u);
    ql_writer_free(w);
    cr_assert_eq(ql_writer_new(store, &manual, &w), 0);
    cr_assert_eq(ql_writer_lanes(w), 1u);
    ql_writer_free(w);
}
