/*
 * The one growth rule for buffers and arrays: start at a caller-chosen first capacity and double
 * until the request fits. Every module used to carry its own copy of that loop; they differed
 * only in the first capacity, so each caller still names its own.
 *
 * These are pure memory management: not thread-safe on the same buffer or array, safe
 * on different ones. On failure nothing the caller holds changes.
 */
#ifndef QL_BUF_H
#define QL_BUF_H

#include <stddef.h>

/* The first capacity of a buffer grown by ql_strbuf_append. */
#define QL_STRBUF_FIRST_CAP 256

/* A growable byte buffer that keeps a NUL after its data (storage's ql_buf_t, for encoded
 * records, keeps none and has its own type). Zero-initialise it ({0}); p is malloc'ed and owned by
 * the buffer (release it with ql_strbuf_free). Once anything has been appended, p[len] is a NUL, so
 * a buffer of text can be read as a string; the NUL is not counted in len. */
typedef struct ql_strbuf {
    char *p;
    size_t len;
    size_t cap; /* bytes allocated at p, including the room for the NUL */
} ql_strbuf_t;

/* Makes room for n more bytes and a NUL after them (cap >= len + n + 1). An empty buffer grows
 * to first_cap (> 0), then doubles. Returns 0, or UV_ENOMEM (out of memory, or len + n + 1 does
 * not fit in a size_t) with the buffer unchanged. Any p the caller held is invalid after a
 * successful call that grew the buffer. */
int ql_strbuf_reserve(ql_strbuf_t *b, size_t n, size_t first_cap);

/* Appends n bytes of data (borrowed; may be NULL when n is 0) and keeps a NUL after them; an
 * empty buffer grows to first_cap first. Returns 0, or UV_ENOMEM with the buffer unchanged. */
int ql_strbuf_append_cap(ql_strbuf_t *b, const void *data, size_t n, size_t first_cap);

/* ql_strbuf_append_cap with the first capacity QL_STRBUF_FIRST_CAP. */
static inline int ql_strbuf_append(ql_strbuf_t *b, const void *data, size_t n) {
    return ql_strbuf_append_cap(b, data, n, QL_STRBUF_FIRST_CAP);
}

/* Frees p and zeroes the buffer, which is then empty and may be used again. */
void ql_strbuf_free(ql_strbuf_t *b);

/* Makes an array hold at least need elements of elem_size bytes: when *cap < need, the capacity
 * becomes first_cap (if *cap is 0) doubled until it reaches need, and the array is reallocated.
 * items_p is the address of the array's pointer (a T **; NULL or malloc'ed, owned by the
 * caller); it is read and written through memcpy, so any object pointer type works without an
 * aliasing cast. Returns 0, or UV_ENOMEM (out of memory, or the new size in bytes does not fit
 * in a size_t) with *items_p and *cap unchanged. Prefer QL_ARRAY_RESERVE, which derives
 * elem_size from the pointer's type. */
int ql_array_reserve(void *items_p, size_t *cap, size_t need, size_t elem_size, size_t first_cap);

/* ql_array_reserve for an array pointer lvalue items (T *) and its size_t capacity lvalue cap. */
#define QL_ARRAY_RESERVE(items, cap, need, first_cap)                                              \
    ql_array_reserve(&(items), &(cap), (need), sizeof *(items), (first_cap))

#endif
