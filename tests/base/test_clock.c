/* The virtual clock's ordering and time rules, and the real clock on a real libuv loop. */
#include "base/ql_clock.h"
#include "base/ql_error.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define START_MS 1788192000000LL /* 2026-09-01 00:00:00 UTC */

/* What each callback saw, in firing order. */
typedef struct {
    ql_clock_t *clock;
    int order[16];
    int64_t wall[16];
    int64_t mono[16];
    int n;
} trace_t;

typedef struct {
    trace_t *trace;
    int id;
    ql_timer_t *other; /* a timer this callback acts on */
    int64_t delay;     /* for callbacks that arm */
} probe_t;

static void record(probe_t *p) {
    trace_t *tr = p->trace;
    cr_assert_lt(tr->n, 16);
    tr->order[tr->n] = p->id;
    tr->wall[tr->n] = ql_clock_now_ms(tr->clock);
    tr->mono[tr->n] = ql_clock_mono_ms(tr->clock);
    tr->n++;
}

static void record_cb(ql_timer_t *timer, void *arg) {
    (void)timer;
    record(arg);
}

static ql_clock_t *vclock(void) {
    ql_clock_t *c = NULL;
    cr_assert_eq(ql_clock_virtual_new(START_MS, &c), 0);
    cr_assert(ql_clock_is_virtual(c));
    cr_assert_null(ql_clock_loop(c));
    return c;
}

Test(vclock, starts_at_given_wall_and_zero_mono) {
    ql_clock_t *c = vclock();
    cr_assert_eq(ql_clock_now_ms(c), START_MS);
    cr_assert_eq(ql_clock_mono_ms(c), 0);
    cr_assert_eq(ql_vclock_next_due(c), -1);
    cr_assert_eq(ql_vclock_run_for(c, 1000, true), 0);
    cr_assert_eq(ql_clock_now_ms(c), START_MS + 1000);
    cr_assert_eq(ql_clock_mono_ms(c), 1000);
    ql_clock_free(c);
}

Test(vclock, fires_by_due_time_then_arming_order) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t[4] = {0};
    probe_t p[4];
    /* Armed in the order 0..3 with due times 30, 10, 30, 10: expect 1, 3, 0, 2. */
    int64_t delays[4] = {30, 10, 30, 10};
    for (int i = 0; i < 4; i++) {
        p[i] = (probe_t){.trace = &tr, .id = i};
        cr_assert_eq(ql_timer_init(c, &t[i]), 0);
        cr_assert_eq(ql_timer_start(&t[i], delays[i], record_cb, &p[i]), 0);
    }
    cr_assert_eq(ql_vclock_next_due(c), 10);
    cr_assert_eq(ql_vclock_run_for(c, 100, false), 4);
    int want[4] = {1, 3, 0, 2};
    int64_t want_mono[4] = {10, 10, 30, 30};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tr.order[i], want[i], "position %d fired timer %d", i, tr.order[i]);
        cr_assert_eq(tr.mono[i], want_mono[i]);
        cr_assert_eq(tr.wall[i], START_MS + want_mono[i], "wall moves with mono");
        cr_assert_not(t[i].armed);
    }
    cr_assert_eq(ql_clock_mono_ms(c), 100);
    cr_assert_eq(ql_vclock_next_due(c), -1);
    ql_clock_free(c);
}

Test(vclock, rearming_moves_timer_behind_equal_due_times) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t a = {0}, b = {0};
    probe_t pa = {.trace = &tr, .id = 1}, pb = {.trace = &tr, .id = 2};
    ql_timer_init(c, &a);
    ql_timer_init(c, &b);
    cr_assert_eq(ql_timer_start(&a, 5, record_cb, &pa), 0);
    cr_assert_eq(ql_timer_start(&b, 5, record_cb, &pb), 0);
    cr_assert_eq(ql_timer_start(&a, 5, record_cb, &pa), 0); /* re-armed: now after b */
    cr_assert_eq(ql_vclock_run_for(c, 5, true), 2);
    cr_assert_eq(tr.order[0], 2);
    cr_assert_eq(tr.order[1], 1);
    ql_clock_free(c);
}

static void arm_other_cb(ql_timer_t *timer, void *arg) {
    (void)timer;
    probe_t *p = arg;
    record(p);
    cr_assert_eq(ql_timer_start(p->other, p->delay, record_cb, p + 1), 0);
}

Test(vclock, zero_delay_timer_armed_by_callback_fires_in_same_run) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t first = {0}, second = {0}, later = {0};
    probe_t p[2] = {{.trace = &tr, .id = 1, .other = &second, .delay = 0}, {.trace = &tr, .id = 2}};
    probe_t pl = {.trace = &tr, .id = 3};
    ql_timer_init(c, &first);
    ql_timer_init(c, &second);
    ql_timer_init(c, &later);
    ql_timer_start(&first, 10, arm_other_cb, &p[0]);
    /* Already armed for the same instant: fires after `first`, but before `second`, which was
     * armed later (inside first's callback). */
    ql_timer_start(&later, 10, record_cb, &pl);
    cr_assert_eq(ql_vclock_run_for(c, 20, false), 3);
    cr_assert_eq(tr.order[0], 1);
    cr_assert_eq(tr.order[1], 3);
    cr_assert_eq(tr.order[2], 2);
    cr_assert_eq(tr.mono[2], 10, "the zero-delay timer fires at its arming instant");
    ql_clock_free(c);
}

Test(vclock, run_due_fires_zero_delay_chain) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t first = {0}, second = {0};
    probe_t p[2] = {{.trace = &tr, .id = 1, .other = &second, .delay = 0}, {.trace = &tr, .id = 2}};
    ql_timer_init(c, &first);
    ql_timer_init(c, &second);
    ql_timer_start(&first, 0, arm_other_cb, &p[0]);
    cr_assert_eq(ql_vclock_run_due(c), 2);
    cr_assert_eq(ql_clock_mono_ms(c), 0);
    ql_clock_free(c);
}

static void stop_other_cb(ql_timer_t *timer, void *arg) {
    (void)timer;
    probe_t *p = arg;
    record(p);
    ql_timer_stop(p->other);
}

static void stop_self_cb(ql_timer_t *timer, void *arg) {
    record(arg);
    /* The timer is already disarmed; stopping and closing it again must be harmless. */
    cr_assert_not(timer->armed);
    ql_timer_stop(timer);
    ql_timer_close(timer, NULL);
}

Test(vclock, stop_inside_callback) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t killer = {0}, victim = {0}, self = {0};
    probe_t pk = {.trace = &tr, .id = 1, .other = &victim};
    probe_t pv = {.trace = &tr, .id = 2};
    probe_t ps = {.trace = &tr, .id = 3};
    ql_timer_init(c, &killer);
    ql_timer_init(c, &victim);
    ql_timer_init(c, &self);
    ql_timer_start(&killer, 10, stop_other_cb, &pk);
    ql_timer_start(&victim, 10, record_cb, &pv); /* same instant, after the killer */
    ql_timer_start(&self, 15, stop_self_cb, &ps);
    cr_assert_eq(ql_vclock_run_for(c, 50, true), 2);
    cr_assert_eq(tr.n, 2);
    cr_assert_eq(tr.order[0], 1);
    cr_assert_eq(tr.order[1], 3);
    cr_assert_not(victim.armed);
    cr_assert_eq(ql_vclock_next_due(c), -1);
    ql_clock_free(c);
}

static void rearm_self_cb(ql_timer_t *timer, void *arg) {
    probe_t *p = arg;
    record(p);
    if (p->trace->n < 3)
        cr_assert_eq(ql_timer_start(timer, p->delay, rearm_self_cb, p), 0);
}

Test(vclock, callback_rearms_itself) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0};
    probe_t p = {.trace = &tr, .id = 1, .delay = 7};
    ql_timer_init(c, &t);
    ql_timer_start(&t, 7, rearm_self_cb, &p);
    cr_assert_eq(ql_vclock_run_for(c, 100, false), 3);
    cr_assert_eq(tr.mono[0], 7);
    cr_assert_eq(tr.mono[1], 14);
    cr_assert_eq(tr.mono[2], 21);
    ql_clock_free(c);
}

Test(vclock, set_wall_backwards_neither_fires_nor_delays) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0};
    probe_t p = {.trace = &tr, .id = 1};
    ql_timer_init(c, &t);
    ql_timer_start(&t, 1000, record_cb, &p);
    cr_assert_eq(ql_vclock_run_for(c, 400, false), 0);
    ql_vclock_set_wall(c, START_MS - 3600000); /* an hour back */
    cr_assert_eq(ql_clock_now_ms(c), START_MS - 3600000);
    cr_assert_eq(ql_clock_mono_ms(c), 400, "set_wall leaves the monotonic line alone");
    cr_assert_eq(ql_vclock_next_due(c), 1000);
    cr_assert_eq(ql_vclock_run_due(c), 0, "moving wall does not fire anything");
    cr_assert_eq(ql_vclock_run_for(c, 599, true), 0);
    cr_assert_eq(ql_vclock_run_for(c, 1, true), 1, "fires 1000 ms after arming, as before");
    cr_assert_eq(tr.mono[0], 1000);
    cr_assert_eq(tr.wall[0], START_MS - 3600000 + 600, "wall keeps the shifted offset");
    ql_clock_free(c);
}

Test(vclock, set_wall_forwards_does_not_fire_early) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0};
    probe_t p = {.trace = &tr, .id = 1};
    ql_timer_init(c, &t);
    ql_timer_start(&t, 1000, record_cb, &p);
    ql_vclock_set_wall(c, START_MS + 86400000);
    cr_assert_eq(ql_vclock_run_for(c, 999, true), 0);
    cr_assert_eq(ql_vclock_run_for(c, 1, true), 1);
    ql_clock_free(c);
}

Test(vclock, include_end_false_leaves_timer_due_at_end) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0};
    probe_t p = {.trace = &tr, .id = 1};
    ql_timer_init(c, &t);
    ql_timer_start(&t, 100, record_cb, &p);
    cr_assert_eq(ql_vclock_run_for(c, 100, false), 0);
    cr_assert(t.armed);
    cr_assert_eq(ql_clock_mono_ms(c), 100, "time still reaches the end");
    cr_assert_eq(ql_clock_now_ms(c), START_MS + 100);
    /* It is due now: the next run fires it, at the same instant. */
    cr_assert_eq(ql_vclock_run_due(c), 1);
    cr_assert_eq(tr.mono[0], 100);
    ql_clock_free(c);
}

Test(vclock, include_end_true_fires_timer_due_at_end) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0}, after = {0};
    probe_t p = {.trace = &tr, .id = 1}, pa = {.trace = &tr, .id = 2};
    ql_timer_init(c, &t);
    ql_timer_init(c, &after);
    ql_timer_start(&t, 100, record_cb, &p);
    ql_timer_start(&after, 101, record_cb, &pa);
    cr_assert_eq(ql_vclock_run_for(c, 100, true), 1);
    cr_assert_eq(tr.order[0], 1);
    cr_assert_eq(tr.wall[0], START_MS + 100);
    cr_assert(after.armed);
    ql_timer_stop(&after);
    ql_clock_free(c);
}

Test(vclock, skip_defers_firing_to_next_run_at_current_time) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0};
    probe_t p = {.trace = &tr, .id = 1};
    ql_timer_init(c, &t);
    ql_timer_start(&t, 10, record_cb, &p);
    ql_vclock_skip(c, 50);
    cr_assert_eq(tr.n, 0);
    cr_assert_eq(ql_clock_now_ms(c), START_MS + 50);
    cr_assert_eq(ql_vclock_run_due(c), 1);
    cr_assert_eq(tr.mono[0], 50, "fires at the then-current time, not back at 10");
    cr_assert_eq(tr.wall[0], START_MS + 50);
    ql_clock_free(c);
}

static void nested_run_cb(ql_timer_t *timer, void *arg) {
    probe_t *p = arg;
    record(p);
    cr_assert_eq(ql_vclock_run_for(timer->clock, 10, true), QL_EINVAL);
}

Test(vclock, rejects_bad_arguments_and_nested_runs) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    ql_timer_t t = {0}, unbound = {0};
    probe_t p = {.trace = &tr, .id = 1};
    ql_timer_init(c, &t);
    cr_assert_eq(ql_timer_start(&t, -1, record_cb, &p), QL_EINVAL);
    cr_assert_eq(ql_timer_start(&t, 1, NULL, &p), QL_EINVAL);
    cr_assert_eq(ql_timer_start(&unbound, 1, record_cb, &p), QL_EINVAL);
    cr_assert_not(t.armed);
    cr_assert_eq(ql_vclock_run_for(c, -5, true), QL_EINVAL);
    ql_timer_start(&t, 1, nested_run_cb, &p);
    cr_assert_eq(ql_vclock_run_for(c, 5, true), 1);
    cr_assert_eq(ql_clock_mono_ms(c), 5);
    ql_clock_free(c);
}

typedef struct {
    ql_timer_t timer; /* first, so the close callback can recover the struct */
    int closed;
} closer_t;

static void count_close_cb(ql_timer_t *timer) {
    ((closer_t *)timer)->closed++;
}

Test(vclock, close_disarms_and_calls_back_immediately) {
    ql_clock_t *c = vclock();
    trace_t tr = {.clock = c};
    closer_t t = {0};
    probe_t p = {.trace = &tr, .id = 1};
    ql_timer_init(c, &t.timer);
    ql_timer_start(&t.timer, 5, record_cb, &p);
    ql_timer_close(&t.timer, count_close_cb);
    cr_assert_eq(t.closed, 1);
    cr_assert_not(t.timer.armed);
    cr_assert_eq(ql_vclock_run_for(c, 10, true), 0);
    cr_assert_eq(tr.n, 0);
    ql_clock_free(c);
}

/* ---- the real clock ---- */

typedef struct {
    int fired;
    int closed;
    int64_t fired_mono;
} real_state_t;

static void real_fire_cb(ql_timer_t *timer, void *arg) {
    real_state_t *s = arg;
    s->fired++;
    s->fired_mono = ql_clock_mono_ms(timer->clock);
}

static void real_deadline_cb(ql_timer_t *timer, void *arg) {
    (void)arg;
    uv_stop(ql_clock_loop(timer->clock));
}

static void real_close_cb(ql_timer_t *timer) {
    real_state_t *s = timer->arg;
    s->closed++;
}

Test(rclock, fires_one_ms_timer_on_a_real_loop) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ql_clock_t *c = NULL;
    cr_assert_eq(ql_clock_real_new(&loop, &c), 0);
    cr_assert_not(ql_clock_is_virtual(c));
    cr_assert_eq(ql_clock_loop(c), &loop);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall = ql_clock_now_ms(c);
    cr_assert_lt(llabs(wall - (int64_t)ts.tv_sec * 1000), 2000, "wall time is the system's");

    real_state_t s = {0};
    ql_timer_t t = {0}, deadline = {0};
    cr_assert_eq(ql_timer_init(c, &t), 0);
    cr_assert_eq(ql_timer_init(c, &deadline), 0);
    /* No assertion between arming and running the loop: under --full-stats each one is a round
     * trip to the test runner, and the checks are about the timers, not about that. */
    int64_t armed_at = ql_clock_mono_ms(c);
    int rc_t = ql_timer_start(&t, 1, real_fire_cb, &s);
    bool was_armed = t.armed;
    /* The deadline keeps a broken timer from hanging the test; it is not a sleep. */
    int rc_d = ql_timer_start(&deadline, 5000, real_deadline_cb, &s);
    while (!s.fired && deadline.armed)
        uv_run(&loop, UV_RUN_ONCE);
    cr_assert_eq(rc_t, 0);
    cr_assert(was_armed);
    cr_assert_eq(rc_d, 0);
    cr_assert_eq(s.fired, 1, "the 1 ms timer fired before the 5 s deadline");
    cr_assert_not(t.armed);
    cr_assert_geq(s.fired_mono - armed_at, 1);
    cr_assert(deadline.armed);

    ql_timer_close(&t, real_close_cb);
    ql_timer_close(&deadline, real_close_cb);
    cr_assert_eq(s.closed, 0, "the real clock closes through the loop");
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(s.closed, 2);
    ql_clock_free(c);
    cr_assert_eq(uv_loop_close(&loop), 0, "no handle left open");
}

Test(rclock, stopped_timer_does_not_fire) {
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    ql_clock_t *c = NULL;
    cr_assert_eq(ql_clock_real_new(&loop, &c), 0);
    real_state_t s = {0};
    ql_timer_t t = {0}, guard = {0};
    ql_timer_init(c, &t);
    ql_timer_init(c, &guard);
    ql_timer_start(&t, 1, real_fire_cb, &s);
    ql_timer_stop(&t);
    cr_assert_not(t.armed);
    /* With t stopped, the loop only has the 20 ms guard: it fires, then the loop is empty. */
    real_state_t g = {0};
    ql_timer_start(&guard, 20, real_fire_cb, &g);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(g.fired, 1);
    cr_assert_eq(s.fired, 0);
    ql_timer_close(&t, NULL);
    ql_timer_close(&guard, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ql_clock_free(c);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
