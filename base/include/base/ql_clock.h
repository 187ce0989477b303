/*
 * The clock every Qilin timer uses: "now" and one-shot timers.
 *
 * DESIGN. Nothing in Qilin calls time() or arms a uv_timer_t directly: it asks a ql_clock_t.
 * Two implementations share this interface:
 *   - the real clock wraps a libuv loop: now is the system wall clock (CLOCK_REALTIME, epoch
 *     ms) and timers are uv_timer_t handles on that loop, so callbacks run on the loop thread;
 *   - the virtual clock (simulator, tests) stands still until told to advance. Advancing fires
 *     every due timer in (due time, arming order) order, setting "now" to each timer's due time
 *     before its callback runs; a callback may arm further timers, including ones due at the
 *     current instant, which fire in the same advance.
 * A clock is used from one thread only (the loop thread for the real clock).
 *
 * Jumps of the wall clock (set_time in the simulator, NTP steps in production) move "now" but
 * do not change when an armed timer fires: a timer's delay is measured on the clock's own
 * monotonic time line, as with uv_timer_t.
 */
#ifndef QL_CLOCK_H
#define QL_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct ql_clock ql_clock_t;
typedef struct ql_timer ql_timer_t;
typedef void (*ql_timer_cb)(ql_timer_t *timer, void *arg);

/* A timer. The caller owns the memory; it must stay valid until ql_timer_close() completes
 * (immediately for the virtual clock; after the loop has run for the real clock, which is why
 * close takes a callback). Zero-initialise, then ql_timer_init(). */
struct ql_timer {
    ql_clock_t *clock;
    ql_timer_cb cb;
    void *arg;
    void (*close_cb)(ql_timer_t *timer);
    bool armed;
    /* real clock */
    uv_timer_t uv;
    /* virtual clock */
    int64_t due_mono;
    uint64_t seq;
    ql_timer_t *next;
};

/* Creates the real clock on loop (borrowed; it must outlive the clock). *out is owned by the
 * caller and freed with ql_clock_free(). Returns 0, QL_EINVAL or UV_ENOMEM. */
int ql_clock_real_new(uv_loop_t *loop, ql_clock_t **out);
/* Creates a virtual clock whose wall time starts at start_ms (epoch ms) and whose monotonic time
 * starts at 0. *out is owned by the caller and freed with ql_clock_free(). */
int ql_clock_virtual_new(int64_t start_ms, ql_clock_t **out);
/* Frees the clock (NULL is fine). Every timer must have been stopped or closed; for the real
 * clock their close callbacks must have run. */
void ql_clock_free(ql_clock_t *clock);

bool ql_clock_is_virtual(const ql_clock_t *clock);
/* Wall clock now, epoch milliseconds. */
int64_t ql_clock_now_ms(ql_clock_t *clock);
/* Monotonic milliseconds, for measuring durations; never goes back. Real clock: uv_hrtime(),
 * not the loop's cached uv_now(), so work inside one callback is measured too. */
int64_t ql_clock_mono_ms(ql_clock_t *clock);
/* The loop of a real clock (borrowed), NULL for a virtual one. */
uv_loop_t *ql_clock_loop(ql_clock_t *clock);

/* Binds timer (caller-owned, see struct ql_timer) to clock (borrowed; it must outlive the timer).
 * Call once per timer; for the real clock this is uv_timer_init. */
int ql_timer_init(ql_clock_t *clock, ql_timer_t *timer);
/* Arms (or re-arms) timer to fire once after delay_ms (>= 0) on the monotonic time line; the
 * callback runs with arg (borrowed, passed through untouched). Re-arming an armed timer moves it
 * to the new due time and counts as a new arming for the order of equal due times. The real
 * clock refreshes the loop's time first, so the delay counts from now. Returns 0 or QL_EINVAL
 * (no clock, no callback, negative delay). When it fails the callback never runs. The timer is
 * disarmed before its callback runs, so the callback may re-arm, stop or close it. */
int ql_timer_start(ql_timer_t *timer, int64_t delay_ms, ql_timer_cb cb, void *arg);
/* Disarms; safe on a timer that is not armed. */
void ql_timer_stop(ql_timer_t *timer);
/* Stops and releases the timer; close_cb (may be NULL) runs when its memory may be freed. */
void ql_timer_close(ql_timer_t *timer, void (*close_cb)(ql_timer_t *timer));

/* Virtual clock only (the real clock ignores these: run_for/run_due return QL_EINVAL,
 * next_due returns -1). */
/* Sets the wall clock to wall_ms (forwards or backwards); fires nothing and does not move the
 * monotonic time line, so no timer fires earlier or later because of it. */
void ql_vclock_set_wall(ql_clock_t *clock, int64_t wall_ms);
/* Moves time (wall and monotonic) forward by delta_ms without firing anything (timers due in
 * between fire at the next run_for/run_due, at the then-current time). delta_ms <= 0 does
 * nothing. */
void ql_vclock_skip(ql_clock_t *clock, int64_t delta_ms);
/* Advances time by delta_ms, firing due timers in order; timers due exactly at the end fire
 * only when include_end is true (otherwise they stay armed and fire at the next run). Before each
 * callback wall time moves by as much as monotonic time, so both stay in step. Afterwards both
 * have moved by exactly delta_ms. Returns the number of callbacks run, or QL_EINVAL for a negative
 * delta or a call from inside one of the clock's own callbacks (nested runs are refused). */
int ql_vclock_run_for(ql_clock_t *clock, int64_t delta_ms, bool include_end);
/* Fires every timer already due at the current instant (including ones armed meanwhile). */
int ql_vclock_run_due(ql_clock_t *clock);
/* Due time (monotonic) of the earliest armed timer, or -1 when none is armed. */
int64_t ql_vclock_next_due(ql_clock_t *clock);

#endif
