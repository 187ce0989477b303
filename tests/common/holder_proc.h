/*
 * A guard_holder process (tests/storage/guard_holder.c): another process inside a write
 * transaction of the store, for the tests of the writer guard.
 */
#ifndef QL_TEST_HOLDER_PROC_H
#define QL_TEST_HOLDER_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The path of guard_holder, for a test (QL_BUILD_DIR is defined for test executables). */
#define QL_TEST_GUARD_HOLDER QL_BUILD_DIR "/tests/storage_guard_holder"

typedef struct ql_test_holder {
    pid_t pid; /* 0: not started */
    int out_fd;
    bool reaped;
    int status; /* waitpid's, once reaped */
} ql_test_holder_t;

/* Spawns guard_holder (exe: QL_TEST_GUARD_HOLDER) on data holding for hold_ms (< 0: until
 * killed) and waits until it holds the write transaction (asserted within deadline_ms). */
void ql_test_holder_start(ql_test_holder_t *h, const char *exe, const char *data, long hold_ms,
                          int64_t deadline_ms);
/* SIGSTOPs it and waits until the kernel shows it stopped (asserted within deadline_ms). */
void ql_test_holder_sigstop(ql_test_holder_t *h, int64_t deadline_ms);
/* Reaps it if it has exited; returns whether it has. */
bool ql_test_holder_exited(ql_test_holder_t *h);
/* For a teardown: SIGKILLs it if it still runs (even stopped), reaps it. No assertions; does
 * nothing on a zeroed struct. */
void ql_test_holder_reap(ql_test_holder_t *h);

#endif
