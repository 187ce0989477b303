/*
 * The dispatcher's cycle cache (scheduler/dispatch_cache.h): put/get, the capacity with
 * least-recently-USED eviction, expiry after two days unused (a get refreshes), clear.
 *
 * Times are plain numbers on the cache's own time line (the dispatcher passes monotonic ms).
 */
#include "scheduler/dispatch_cache.h"

#include <criterion/criterion.h>
#include <string.h>

#define DAY 86400000LL
#define TTL (2 * DAY)
#define CAP 10000

static ql_cycle_key_t key(uint32_t n) {
    ql_cycle_key_t k = {.occurrence = 1788195600000LL, .start = 1788105600000LL};
    k.end = k.start + DAY;
    memcpy(k.model.b, &n, sizeof n);
    k.model.b[15] = 0x5a;
    return k;
}

static ql_cycle_cache_t *cache_new(size_t cap) {
    ql_cycle_cache_t *c = NULL;
    cr_assert_eq(ql_cycle_cache_new(cap, TTL, &c), 0);
    cr_assert_not_null(c);
    return c;
}

TestSuite(cycle_cache);

Test(cycle_cache, put_get) {
    ql_cycle_cache_t *c = cache_new(CAP);
    ql_cycle_key_t a = key(1), b = key(2);
    cr_assert_eq(ql_cycle_cache_get(c, &a, 0), QL_CYCLE_NONE);
    ql_cycle_cache_put(c, &a, QL_CYCLE_COVERED, 0);
    ql_cycle_cache_put(c, &b, QL_CYCLE_COVERED_WITH_WARNING, 0);
    cr_assert_eq(ql_cycle_cache_size(c), 2);
    cr_assert_eq(ql_cycle_cache_get(c, &a, 1), QL_CYCLE_COVERED);
    cr_assert_eq(ql_cycle_cache_get(c, &b, 1), QL_CYCLE_COVERED_WITH_WARNING);
    /* Putting an existing key replaces its state and does not grow the cache. */
    ql_cycle_cache_put(c, &a, QL_CYCLE_COVERED_WITH_WARNING, 2);
    cr_assert_eq(ql_cycle_cache_size(c), 2);
    cr_assert_eq(ql_cycle_cache_get(c, &a, 3), QL_CYCLE_COVERED_WITH_WARNING);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, every_key_field_matters) {
    /* The cycle key is (model, occurrence, normalized range): a change of any part is a
     * different cycle. */
    ql_cycle_cache_t *c = cache_new(CAP);
    ql_cycle_key_t k = key(7);
    ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, 0);
    ql_cycle_key_t other = k;
    other.model.b[15] ^= 1;
    cr_assert_eq(ql_cycle_cache_get(c, &other, 0), QL_CYCLE_NONE);
    other = k;
    other.occurrence += DAY;
    cr_assert_eq(ql_cycle_cache_get(c, &other, 0), QL_CYCLE_NONE);
    other = k;
    other.start += 1;
    cr_assert_eq(ql_cycle_cache_get(c, &other, 0), QL_CYCLE_NONE);
    other = k;
    other.end -= 1;
    cr_assert_eq(ql_cycle_cache_get(c, &other, 0), QL_CYCLE_NONE);
    cr_assert_eq(ql_cycle_cache_get(c, &k, 0), QL_CYCLE_COVERED);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, capacity_evicts_least_recently_used) {
    ql_cycle_cache_t *c = cache_new(CAP);
    for (uint32_t i = 0; i < CAP; i++) {
        ql_cycle_key_t k = key(i);
        ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, i);
    }
    cr_assert_eq(ql_cycle_cache_size(c), CAP);
    /* Touch the two oldest entries: they become the most recently used. */
    ql_cycle_key_t k0 = key(0), k1 = key(1);
    cr_assert_eq(ql_cycle_cache_get(c, &k0, CAP), QL_CYCLE_COVERED);
    cr_assert_eq(ql_cycle_cache_get(c, &k1, CAP), QL_CYCLE_COVERED);
    /* Three more cycles push out the three least recently used: 2, 3 and 4 (not 0 and 1). */
    for (uint32_t i = CAP; i < CAP + 3; i++) {
        ql_cycle_key_t k = key(i);
        ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, CAP + 1);
    }
    cr_assert_eq(ql_cycle_cache_size(c), CAP);
    cr_assert_eq(ql_cycle_cache_get(c, &k0, CAP + 2), QL_CYCLE_COVERED);
    cr_assert_eq(ql_cycle_cache_get(c, &k1, CAP + 2), QL_CYCLE_COVERED);
    for (uint32_t i = 2; i < 5; i++) {
        ql_cycle_key_t k = key(i);
        cr_assert_eq(ql_cycle_cache_get(c, &k, CAP + 2), QL_CYCLE_NONE, "entry %u survived", i);
    }
    for (uint32_t i = 5; i < CAP + 3; i++) {
        ql_cycle_key_t k = key(i);
        cr_assert_eq(ql_cycle_cache_get(c, &k, CAP + 2), QL_CYCLE_COVERED, "entry %u lost", i);
    }
    cr_assert_eq(ql_cycle_cache_size(c), CAP);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, replacing_a_state_counts_as_use) {
    ql_cycle_cache_t *c = cache_new(3);
    ql_cycle_key_t a = key(1), b = key(2), d = key(3), e = key(4);
    ql_cycle_cache_put(c, &a, QL_CYCLE_COVERED, 0);
    ql_cycle_cache_put(c, &b, QL_CYCLE_COVERED, 1);
    ql_cycle_cache_put(c, &d, QL_CYCLE_COVERED, 2);
    ql_cycle_cache_put(c, &a, QL_CYCLE_COVERED_WITH_WARNING, 3); /* a is now the newest */
    ql_cycle_cache_put(c, &e, QL_CYCLE_COVERED, 4);              /* evicts b */
    cr_assert_eq(ql_cycle_cache_get(c, &b, 5), QL_CYCLE_NONE);
    cr_assert_eq(ql_cycle_cache_get(c, &a, 5), QL_CYCLE_COVERED_WITH_WARNING);
    cr_assert_eq(ql_cycle_cache_get(c, &d, 5), QL_CYCLE_COVERED);
    cr_assert_eq(ql_cycle_cache_get(c, &e, 5), QL_CYCLE_COVERED);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, expires_two_days_after_last_use) {
    ql_cycle_cache_t *c = cache_new(CAP);
    ql_cycle_key_t k = key(1);
    const int64_t used = 1000;
    ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, used);
    /* Exactly two days unused: still there (and that get refreshes it). */
    cr_assert_eq(ql_cycle_cache_get(c, &k, used + TTL), QL_CYCLE_COVERED);
    /* Two days after that refresh, plus 1 ms: gone, and removed. */
    cr_assert_eq(ql_cycle_cache_get(c, &k, used + TTL + TTL + 1), QL_CYCLE_NONE);
    cr_assert_eq(ql_cycle_cache_size(c), 0);
    cr_assert_eq(ql_cycle_cache_get(c, &k, used + TTL + TTL + 2), QL_CYCLE_NONE);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, unused_entry_expires_at_used_plus_two_days_plus_one_ms) {
    ql_cycle_cache_t *c = cache_new(CAP);
    ql_cycle_key_t k = key(1), fresh = key(2);
    ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, 0);
    ql_cycle_cache_put(c, &fresh, QL_CYCLE_COVERED, 0);
    /* A get a day later refreshes `fresh` only. */
    cr_assert_eq(ql_cycle_cache_get(c, &fresh, DAY), QL_CYCLE_COVERED);
    cr_assert_eq(ql_cycle_cache_get(c, &k, TTL + 1), QL_CYCLE_NONE);
    cr_assert_eq(ql_cycle_cache_get(c, &fresh, TTL + 1), QL_CYCLE_COVERED);
    cr_assert_eq(ql_cycle_cache_get(c, &fresh, TTL + 1 + TTL + 1), QL_CYCLE_NONE);
    cr_assert_eq(ql_cycle_cache_size(c), 0);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, expired_entry_can_be_put_again) {
    ql_cycle_cache_t *c = cache_new(2);
    ql_cycle_key_t a = key(1), b = key(2);
    ql_cycle_cache_put(c, &a, QL_CYCLE_COVERED, 0);
    cr_assert_eq(ql_cycle_cache_get(c, &a, TTL + 1), QL_CYCLE_NONE);
    ql_cycle_cache_put(c, &a, QL_CYCLE_COVERED_WITH_WARNING, TTL + 1);
    ql_cycle_cache_put(c, &b, QL_CYCLE_COVERED, TTL + 1);
    cr_assert_eq(ql_cycle_cache_size(c), 2);
    cr_assert_eq(ql_cycle_cache_get(c, &a, TTL + 2), QL_CYCLE_COVERED_WITH_WARNING);
    cr_assert_eq(ql_cycle_cache_get(c, &b, TTL + 2), QL_CYCLE_COVERED);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, clear_forgets_everything) {
    ql_cycle_cache_t *c = cache_new(4);
    for (uint32_t i = 0; i < 4; i++) {
        ql_cycle_key_t k = key(i);
        ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, 0);
    }
    ql_cycle_cache_clear(c);
    cr_assert_eq(ql_cycle_cache_size(c), 0);
    for (uint32_t i = 0; i < 4; i++) {
        ql_cycle_key_t k = key(i);
        cr_assert_eq(ql_cycle_cache_get(c, &k, 1), QL_CYCLE_NONE);
    }
    /* The whole capacity is usable again after a clear, with eviction still in order. */
    for (uint32_t i = 10; i < 15; i++) {
        ql_cycle_key_t k = key(i);
        ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, i);
    }
    cr_assert_eq(ql_cycle_cache_size(c), 4);
    ql_cycle_key_t first = key(10), last = key(14);
    cr_assert_eq(ql_cycle_cache_get(c, &first, 20), QL_CYCLE_NONE);
    cr_assert_eq(ql_cycle_cache_get(c, &last, 20), QL_CYCLE_COVERED);
    ql_cycle_cache_free(c);
}

Test(cycle_cache, many_evictions_keep_the_table_consistent) {
    /* Churn through ten times the capacity, with hash collisions certain at this size: the
     * size never exceeds the capacity and exactly the newest `cap` entries remain. */
    const uint32_t cap = 64;
    ql_cycle_cache_t *c = cache_new(cap);
    for (uint32_t i = 0; i < cap * 10; i++) {
        ql_cycle_key_t k = key(i);
        ql_cycle_cache_put(c, &k, QL_CYCLE_COVERED, i);
        cr_assert_leq(ql_cycle_cache_size(c), cap);
    }
    for (uint32_t i = 0; i < cap * 10; i++) {
        ql_cycle_key_t k = key(i);
        ql_cycle_state_t want = i >= cap * 9 ? QL_CYCLE_COVERED : QL_CYCLE_NONE;
        cr_assert_eq(ql_cycle_cache_get(c, &k, cap * 10), want, "entry %u", i);
    }
    ql_cycle_cache_free(c);
}
