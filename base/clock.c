/*
 * The real and the virtual clock behind ql_clock.h.
 *
 * DESIGN. One struct serves both kinds; `virtual` selects the behaviour of every call. The real
 * clock is a thin layer over libuv: its timers are uv_timer_t handles and its callbacks run from
 * the loop. The virtual clock keeps its armed timers in one singly linked list sorted by
 * (due_mono, seq); seq grows with every arming, so timers due at the same instant fire in the
 * order they were armed. Firing unlinks a timer before its callback runs, so the callback may
 * re-arm, stop or close it (or any other timer) freely. Both clocks are single-threaded.
 *
 * The virtual clock keeps two time lines: mono (starts at 0, only moves forward, orders timers)
 * and wall (epoch ms). Advancing moves both by the same amount; ql_vclock_set_wall moves wall
 * alone, which is how the simulator models an NTP step or a manual clock change.
 */
#include "base/ql_clock.h"

#include "base/ql_error.h"

#include <stdlib.h>
#include <time.h>

struct ql_clock {
    bool is_virtual;
    /* real clock */
    uv_loop_t *loop;
    /* virtual clock */
    int64_t wall_ms;
    int64_t mono_ms;
    uint64_t next_seq;
    ql_timer_t *armed; /* sorted by (due_mono, seq) */
    bool running;      /* inside run_for/run_due: nested runs are refused */
};

int ql_clock_real_new(uv_loop_t *loop, ql_clock_t **out) {
    if (!loop || !out)
        return QL_EINVAL;
    ql_clock_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    c->loop = loop;
    *out = c;
    return 0;
}

int ql_clock_virtual_new(int64_t start_ms, ql_clock_t **out) {
    if (!out)
        return QL_EINVAL;
    ql_clock_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    c->is_virtual = true;
    c->wall_ms = start_ms;
    *out = c;
    return 0;
}

void ql_clock_free(ql_clock_t *clock) {
    if (!clock)
        return;
    /* Leave no timer pointing into a list that is about to disappear, so a late ql_timer_stop
     * on one of them is harmless. */
    for (ql_timer_t *t = clock->armed, *next; t; t = next) {
        next = t->next;
        t->next = NULL;
        t->armed = false;
    }
    free(clock);
}

bool ql_clock_is_virtual(const ql_clock_t *clock) {
    return clock->is_virtual;
}

int64_t ql_clock_now_ms(ql_clock_t *clock) {
    if (clock->is_virtual)
        return clock->wall_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ql_clock_mono_ms(ql_clock_t *clock) {
    if (clock->is_virtual)
        return clock->mono_ms;
    /* uv_hrtime rather than uv_now: uv_now is cached at the start of a loop iteration and would
     * under-measure work done inside one callback. */
    return (int64_t)(uv_hrtime() / 1000000);
}

uv_loop_t *ql_clock_loop(ql_clock_t *clock) {
    return clock->is_virtual ? NULL : clock->loop;
}

/* ---- real clock ---- */

static void real_fire_cb(uv_timer_t *handle) {
    ql_timer_t *t = handle->data;
    t->armed = false;
    t->cb(t, t->arg);
}

static void real_close_cb(uv_handle_t *handle) {
    ql_timer_t *t = handle->data;
    if (t->close_cb)
        t->close_cb(t);
}

/* ---- virtual clock ---- */

static void vunlink(ql_timer_t *t) {
    ql_timer_t **pp = &t->clock->armed;
    while (*pp && *pp != t)
        pp = &(*pp)->next;
    if (*pp)
        *pp = t->next;
    t->next = NULL;
    t->armed = false;
}

static void vinsert(ql_timer_t *t) {
    ql_clock_t *c = t->clock;
    ql_timer_t **pp = &c->armed;
    /* Equal due times keep arming order because seq only grows: insert after every timer that
     * is due at or before this one. */
    while (*pp && (*pp)->due_mono <= t->due_mono)
        pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    t->armed = true;
}

/* Moves both time lines to mono (never backwards). */
static void vadvance_to(ql_clock_t *c, int64_t mono) {
    if (mono > c->mono_ms) {
        c->wall_ms += mono - c->mono_ms;
        c->mono_ms = mono;
    }
}

/* Fires timers due before end (or at end when include_end) in order; returns how many ran. */
static int vrun_until(ql_clock_t *c, int64_t end, bool include_end) {
    int fired = 0;
    c->running = true;
    for (;;) {
        ql_timer_t *t = c->armed;
        if (!t || t->due_mono > end || (t->due_mono == end && !include_end))
            break;
        c->armed = t->next;
        t->next = NULL;
        t->armed = false;
        /* A timer that became due during a skip fires at the current time: mono never goes
         * back. */
        vadvance_to(c, t->due_mono);
        t->cb(t, t->arg);
        fired++;
    }
    vadvance_to(c, end);
    c->running = false;
    return fired;
}

void ql_vclock_set_wall(ql_clock_t *clock, int64_t wall_ms) {
    if (clock->is_virtual)
        clock->wall_ms = wall_ms;
}

void ql_vclock_skip(ql_clock_t *clock, int64_t delta_ms) {
    if (clock->is_virtual && delta_ms > 0)
        vadvance_to(clock, clock->mono_ms + delta_ms);
}

int ql_vclock_run_for(ql_clock_t *clock, int64_t delta_ms, bool include_end) {
    if (!clock->is_virtual || delta_ms < 0 || clock->running)
        return QL_EINVAL;
    return vrun_until(clock, clock->mono_ms + delta_ms, include_end);
}

int ql_vclock_run_due(ql_clock_t *clock) {
    return ql_vclock_run_for(clock, 0, true);
}

int64_t ql_vclock_next_due(ql_clock_t *clock) {
    if (!clock->is_virtual || !clock->armed)
        return -1;
    return clock->armed->due_mono;
}

/* ---- timers, both clocks ---- */

int ql_timer_init(ql_clock_t *clock, ql_timer_t *timer) {
    if (!clock || !timer)
        return QL_EINVAL;
    timer->clock = clock;
    timer->cb = NULL;
    timer->arg = NULL;
    timer->close_cb = NULL;
    timer->armed = false;
    timer->next = NULL;
    timer->due_mono = 0;
    timer->seq = 0;
    if (clock->is_virtual)
        return 0;
    int rc = uv_timer_init(clock->loop, &timer->uv);
    if (rc == 0)
        timer->uv.data = timer;
    return rc;
}

int ql_timer_start(ql_timer_t *timer, int64_t delay_ms, ql_timer_cb cb, void *arg) {
    if (!timer || !timer->clock || !cb || delay_ms < 0)
        return QL_EINVAL;
    ql_clock_t *c = timer->clock;
    if (!c->is_virtual) {
        /* The loop's cached time may be stale after a long callback; refresh it so the delay
         * counts from now, not from the start of the loop iteration. */
        uv_update_time(c->loop);
        int rc = uv_timer_start(&timer->uv, real_fire_cb, (uint64_t)delay_ms, 0);
        if (rc != 0)
            return rc;
        timer->cb = cb;
        timer->arg = arg;
        timer->armed = true;
        return 0;
    }
    if (timer->armed)
        vunlink(timer);
    timer->cb = cb;
    timer->arg = arg;
    timer->due_mono = c->mono_ms + delay_ms;
    timer->seq = c->next_seq++;
    vinsert(timer);
    return 0;
}

void ql_timer_stop(ql_timer_t *timer) {
    if (!timer || !timer->clock)
        return;
    if (timer->clock->is_virtual) {
        if (timer->armed)
            vunlink(timer);
        return;
    }
    uv_timer_stop(&timer->uv);
    timer->armed = false;
}

void ql_timer_close(ql_timer_t *timer, void (*close_cb)(ql_timer_t *timer)) {
    if (!timer)
        return;
    timer->close_cb = close_cb;
    if (!timer->clock || timer->clock->is_virtual) {
        /* Never initialised, or virtual: nothing refers to the memory once it is stopped. */
        ql_timer_stop(timer);
        if (close_cb)
            close_cb(timer);
        return;
    }
    timer->armed = false;
    uv_close((uv_handle_t *)&timer->uv, real_close_cb);
}
