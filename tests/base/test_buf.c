/* The growth rule of base/include/base/ql_buf.h: first capacity, doubling, the NUL after a
 * buffer's data, and refusals that leave what the caller holds unchanged. */
#include "base/ql_buf.h"
#include "base/ql_error.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

Test(strbuf, append_keeps_a_nul_and_starts_at_the_first_capacity) {
    ql_strbuf_t b = {0};
    cr_assert_eq(ql_strbuf_append_cap(&b, "abc", 3, 8), 0);
    cr_assert_eq(b.len, 3);
    cr_assert_eq(b.cap, 8);
    cr_assert_str_eq(b.p, "abc");
    cr_assert_eq(ql_strbuf_append_cap(&b, "defg", 4, 8), 0); /* 7 bytes and the NUL fit in 8 */
    cr_assert_eq(b.cap, 8);
    cr_assert_str_eq(b.p, "abcdefg");
    cr_assert_eq(ql_strbuf_append_cap(&b, "h", 1, 8), 0); /* the NUL no longer fits: doubles */
    cr_assert_eq(b.cap, 16);
    cr_assert_eq(b.len, 8);
    cr_assert_str_eq(b.p, "abcdefgh");
    ql_strbuf_free(&b);
    cr_assert_null(b.p);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
}

Test(strbuf, a_large_append_doubles_until_it_fits) {
    ql_strbuf_t b = {0};
    char big[100];
    memset(big, 'x', sizeof big);
    cr_assert_eq(ql_strbuf_append_cap(&b, big, sizeof big, 8), 0);
    cr_assert_eq(b.cap, 128); /* 8 -> 16 -> 32 -> 64 -> 128 >= 101 */
    cr_assert_eq(b.len, 100);
    cr_assert_eq(b.p[100], '\0');
    cr_assert_eq(memcmp(b.p, big, sizeof big), 0);
    ql_strbuf_free(&b);
}

Test(strbuf, append_uses_the_default_first_capacity_and_takes_empty_data) {
    ql_strbuf_t b = {0};
    cr_assert_eq(ql_strbuf_append(&b, NULL, 0), 0);
    cr_assert_eq(b.cap, QL_STRBUF_FIRST_CAP);
    cr_assert_eq(b.len, 0);
    cr_assert_str_eq(b.p, "");
    cr_assert_eq(ql_strbuf_append(&b, "a\0b", 3), 0); /* binary data: len counts the inner NUL */
    cr_assert_eq(b.len, 3);
    cr_assert_eq(memcmp(b.p, "a\0b\0", 4), 0);
    ql_strbuf_free(&b);
}

Test(strbuf, reserve_makes_room_for_the_bytes_and_a_nul) {
    ql_strbuf_t b = {0};
    cr_assert_eq(ql_strbuf_reserve(&b, 15, 16), 0);
    cr_assert_eq(b.cap, 16);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(ql_strbuf_reserve(&b, 16, 16), 0);
    cr_assert_eq(b.cap, 32);
    ql_strbuf_free(&b);
}

Test(strbuf, a_refused_append_leaves_the_data) {
    ql_strbuf_t b = {0};
    cr_assert_eq(ql_strbuf_append_cap(&b, "keep", 4, 8), 0);
    char *p = b.p;
    cr_assert_eq(ql_strbuf_append_cap(&b, "x", SIZE_MAX, 8), UV_ENOMEM); /* len + n + 1 overflows */
    cr_assert_eq(ql_strbuf_append_cap(&b, "x", SIZE_MAX - 4, 8), UV_ENOMEM);
    cr_assert_eq(ql_strbuf_append_cap(&b, "x", SIZE_MAX / 2 + 1, 8),
                 UV_ENOMEM); /* no doubling reaches it */
    cr_assert_eq(b.p, p);
    cr_assert_eq(b.len, 4);
    cr_assert_eq(b.cap, 8);
    cr_assert_str_eq(b.p, "keep");
    ql_strbuf_free(&b);
}

typedef struct {
    int64_t a, b;
} pair_t;

Test(array, reserve_starts_at_the_first_capacity_and_doubles) {
    pair_t *items = NULL;
    size_t cap = 0;
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, 1, 4), 0);
    cr_assert_not_null(items);
    cr_assert_eq(cap, 4);
    for (size_t i = 0; i < 4; i++)
        items[i] = (pair_t){(int64_t)i, -(int64_t)i};
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, 4, 4), 0); /* already fits: no change */
    cr_assert_eq(cap, 4);
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, 5, 4), 0);
    cr_assert_eq(cap, 8);
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, 33, 4), 0);
    cr_assert_eq(cap, 64);
    for (size_t i = 0; i < 4; i++) /* the elements survive the moves */
        cr_assert(items[i].a == (int64_t)i && items[i].b == -(int64_t)i);
    free(items);
}

Test(array, need_times_size_overflow_is_refused_and_leaves_the_array) {
    pair_t *items = NULL;
    size_t cap = 0;
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, 2, 2), 0);
    items[0] = (pair_t){7, 8};
    items[1] = (pair_t){9, 10};
    pair_t *before = items;
    /* The count fits in a size_t but its size in bytes does not. */
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, SIZE_MAX / sizeof *items + 1, 2), UV_ENOMEM);
    /* The doubled count itself would overflow. */
    cr_assert_eq(QL_ARRAY_RESERVE(items, cap, SIZE_MAX, 2), UV_ENOMEM);
    cr_assert_eq(items, before);
    cr_assert_eq(cap, 2);
    cr_assert(items[0].a == 7 && items[1].b == 10);
    free(items);
}

Test(array, reserve_works_on_byte_arrays_through_the_function) {
    char *p = NULL;
    size_t cap = 0;
    cr_assert_eq(ql_array_reserve(&p, &cap, 3, 1, 16384), 0);
    cr_assert_eq(cap, 16384);
    memcpy(p, "ok", 3);
    cr_assert_eq(ql_array_reserve(&p, &cap, 16385, 1, 16384), 0);
    cr_assert_eq(cap, 32768);
    cr_assert_str_eq(p, "ok");
    free(p);
}
