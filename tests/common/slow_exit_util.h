/*
 * A process that takes long to die (tests/engine/slow_exit.c): it holds a file lock until the
 * kernel has freed its large memory, so a test can tell "killed" and "exiting" from "gone".
 */
#ifndef QL_TEST_SLOW_EXIT_UTIL_H
#define QL_TEST_SLOW_EXIT_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

/* The helper program (QL_TEST_BUILD_DIR is defined for the test helpers). */
#define QL_TEST_SLOW_EXIT QL_TEST_BUILD_DIR "/tests/engine_slow_exit"
/* Its memory: freeing 256 MiB of small pages takes the kernel some 5 to 15 ms, a gap the
 * 1 ms steps of a sweep cannot miss. */
#define QL_TEST_SLOW_EXIT_MIB "256"

/* Starts slow_exit in a process group of its own (it leads it) with exactly the environment env,
 * holding the lock file "<dir>/lock", and returns its pid once it holds the lock and its memory
 * (asserted within a deadline). The caller reaps it. */
pid_t ql_test_slow_exit_start(const char *dir, char *const env[]);
/* The same with little memory, and its first thread exits (pthread_exit()) while a second one
 * runs on: returns once /proc shows the first thread a zombie (asserted within a deadline). */
pid_t ql_test_slow_exit_start_threaded(const char *dir, char *const env[]);
/* Whether "<dir>/lock" can be locked now (it is then unlocked again). */
bool ql_test_slow_exit_lock_free(const char *dir);

#endif
