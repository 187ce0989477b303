/*
 * The writer's wake-up of the node's loop (server/node_wake.h): a send from another thread is
 * never lost, not even one that lands while the callback runs (the callback must run again and
 * see it), and a stopped wake-up calls nobody while sends stay harmless until it is freed.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "server/node_wake.h"
#include "tests/common/loop_util.h"

#define ROUNDS 2000

typedef struct env {
    uv_loop_t loop;
    node_wake_t *w;
    atomic_long sent; /* incremented before each send */
    atomic_long seen; /* what the last callback saw */
    atomic_bool lost; /* the sender waited in vain */
    long calls;
    int closed;
} env_t;

static int64_t now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void on_wake(void *arg) {
    env_t *e = arg;
    atomic_store(&e->seen, atomic_load(&e->sent));
    e->calls++;
    /* Busy (no sleep) while the sender, which has just seen the store above, sends again. */
    for (int64_t end = now_us() + 20; now_us() < end;) {
    }
}

/* Ping-pong: each send waits until a callback saw it (2 s deadline), so the next one lands
 * while that callback is still busy. */
static void *sender(void *arg) {
    env_t *e = arg;
    for (long i = 1; i <= ROUNDS && !atomic_load(&e->lost); i++) {
        atomic_store(&e->sent, i);
        node_wake_send(e->w);
        int64_t deadline = now_us() + 2000000;
        while (atomic_load(&e->seen) < i)
            if (now_us() > deadline) {
                atomic_store(&e->lost, true);
                break;
            }
    }
    return NULL;
}

static bool done(const void *arg) {
    const env_t *e = arg;
    return atomic_load(&e->seen) == ROUNDS || atomic_load(&e->lost);
}

static void on_closed(void *arg) {
    ((env_t *)arg)->closed++;
}

Test(node_wake, no_send_from_another_thread_is_lost) {
    static env_t e;
    cr_assert_eq(uv_loop_init(&e.loop), 0);
    cr_assert_eq(node_wake_start(&e.loop, on_wake, &e, &e.w), 0);
    uv_timer_t tick; /* keeps uv_run(ONCE) from blocking on a wake-up that never comes */
    cr_assert_eq(uv_timer_init(&e.loop, &tick), 0);
    cr_assert_eq(uv_timer_start(&tick, ql_test_tick_cb, 10, 10), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, sender, &e), 0);
    bool ok = ql_test_drive_until(&e.loop, done, &e, 30000);
    if (!ok)
        atomic_store(&e.lost, true); /* the sender stops at its next look */
    pthread_join(t, NULL);
    cr_assert(ok && !atomic_load(&e.lost), "a send was lost: the loop saw %ld of %ld",
              (long)atomic_load(&e.seen), (long)atomic_load(&e.sent));
    long calls = e.calls;
    node_wake_stop(e.w, on_closed, &e);
    node_wake_send(e.w); /* after the stop: harmless, nobody called */
    ql_test_drive_for(&e.loop, 50);
    cr_assert_eq(e.closed, 1);
    cr_assert_eq(e.calls, calls, "called after the stop");
    node_wake_free(e.w);
    uv_close((uv_handle_t *)&tick, NULL);
    cr_assert_eq(uv_run(&e.loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(uv_loop_close(&e.loop), 0);
}
