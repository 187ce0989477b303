/*
 * qilin-bench-dispatch: the dispatcher benchmark as a standalone binary (tools/bench_dispatch.c,
 * docs/performance.md), which also counts every heap allocation of the process.
 *
 * Why interposition rather than -Wl,--wrap=malloc: --wrap rewrites only the references in the
 * objects linked statically (Qilin's own code), so LMDB's cursors, msgpack's zones and ICU's
 * buffers, all in shared libraries, would go uncounted. A program that defines malloc, calloc,
 * realloc and free replaces them for the whole process, shared libraries and glibc's own
 * callers (strdup, ...) included; glibc documents this ("Replacing malloc") and exports its
 * allocator as __libc_malloc and friends, which these forward to. memalign and its relatives are
 * left to glibc, whose versions are compatible with __libc_free.
 *
 * This file is linked only into this binary (not into `qilin`), and the counter is the one
 * piece of process-wide mutable state the measurement needs: an allocator hook has no context
 * pointer.
 */
#include "bench.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* AddressSanitizer replaces the allocator itself: there, count nothing rather than fight it. */
#ifndef __SANITIZE_ADDRESS__
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static atomic_uint_fast64_t allocations;

void *malloc(size_t n) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n) {
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

void free(void *p) {
    __libc_free(p);
}

static uint64_t allocation_count(void) {
    return atomic_load_explicit(&allocations, memory_order_relaxed);
}

#define ALLOCATION_COUNT allocation_count
#else
#define ALLOCATION_COUNT NULL
#endif

int main(int argc, char **argv) {
    return ql_bench_dispatch_run(argc, argv, ALLOCATION_COUNT);
}
