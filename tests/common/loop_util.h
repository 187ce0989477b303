/* Helpers for tests that drive a real libuv loop and real processes (tests/common). */
#ifndef QL_TEST_LOOP_UTIL_H
#define QL_TEST_LOOP_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* Monotonic milliseconds. */
int64_t ql_test_mono_ms(void);
/* A repeating timer callback that does nothing: it keeps uv_run(ONCE) from blocking for long. */
void ql_test_tick_cb(uv_timer_t *t);

typedef bool (*ql_test_cond_fn)(const void *arg);
/* Runs loop until cond holds or ms pass (a deadline, not a sleep); returns whether it held. */
bool ql_test_drive_until(uv_loop_t *loop, ql_test_cond_fn cond, const void *arg, int64_t ms);
/* Runs loop for ms whatever happens (to show that something does NOT happen). */
void ql_test_drive_for(uv_loop_t *loop, int64_t ms);

/* True when no process of group pgid runs or holds anything any more (base/ql_procinfo.h,
 * ql_proc_group_running: each is a zombie). */
bool ql_test_group_gone(int pgid);
/* Process pid's state, parent and process group from /proc/PID/stat; false when it is gone. */
bool ql_test_proc_stat(long pid, char *state, long *ppid, long *pgrp);
/* ql_test_group_gone for ql_test_drive_until: arg points to the int pgid. */
bool ql_test_cond_group_gone(const void *arg);

/* Whether the file at path has a line holding every needle (NULL-terminated); false when the
 * file cannot be read (yet). For the logs of servers run as child processes. */
bool ql_test_file_has_line(const char *path, const char *const *needles);

/* Removes dir and everything below it. */
void ql_test_rm_tree(const char *dir);
/* Writes text to path with every "@DIR@" replaced by dir (test templates that name the test's
 * directory); asserts it worked. */
void ql_test_write_with_dir(const char *path, const char *text, const char *dir);

#endif
