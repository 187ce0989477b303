/*
 * Temporary directories and child processes that a test cannot leave behind (tests/common).
 *
 * DESIGN. Criterion runs every test in a process of its own, and that process ends through
 * exit() both when the test passes and when an assertion fails (in the test, in a helper it
 * calls or in its .fini): Criterion's abort path unwinds to its runner code, runs the .fini and
 * exits. So the cleanup is an atexit handler of the test's process, not a .fini: it also runs
 * when the .fini never does (exit() in the test) or itself fails an assertion. It
 *   1. kills (SIGKILL) every process that carries QL_TEST_OWNER=<this process's pid> in its
 *      environment, and every descendant of this process, and waits, with a deadline, until
 *      they are gone: the marker is set in this process's environment when the first helper
 *      below is called, so every program started after that (qilind, node_driver, the steps a
 *      server runs, `sleep`) and their children inherit it, whatever process group or session
 *      they moved to and even once they are orphans; the descendants cover forks that have not
 *      exec'd (their /proc environ is still this process's original one, without the marker);
 *   2. then removes every directory made by ql_test_tmpdir, with everything below it.
 * What it cannot catch: a process killed by a signal (a crash, an ASan abort, ctest's timeout)
 * runs no handler, and an assertion that fails in a .init ends the process without atexit.
 * Those tests fail anyway; their leftovers are named by the suite's final check
 * (scripts/check-leftovers.sh, see docs/testing.md). A program started with an environment
 * built by hand (execve with an envp not taken from environ) carries no marker: it is killed
 * only while it is still a descendant of the test, so build such environments from environ.
 *
 * The registry is process-global on purpose (the one exception to "no global mutable state" in
 * tests): an atexit handler takes no argument. It is a fixed array, so the handler frees nothing
 * and LeakSanitizer sees no allocation. A forked child inherits the handler but it does nothing
 * there: it acts only in the process that armed it.
 *
 * Not thread-safe: call these from the test's main thread.
 */
#ifndef QL_TEST_TMP_UTIL_H
#define QL_TEST_TMP_UTIL_H

#include <stddef.h>

/* The environment variable that marks the processes a test started (value: its pid). */
#define QL_TEST_OWNER_ENV "QL_TEST_OWNER"

/* Makes a fresh directory "$TMPDIR/<name>-XXXXXX" ("/tmp/..." when TMPDIR is unset or empty)
 * and writes its path to out (cap bytes, caller-owned); asserts (Criterion) that it worked.
 * The directory is removed with everything below it when the test's process exits, passed or
 * failed; a test may still remove it earlier (a second removal is harmless). Arms the child
 * cleanup too (ql_test_cleanup_arm). */
void ql_test_tmpdir(char *out, size_t cap, const char *name);

/* ql_test_tmpdir without Criterion calls, for tests that must not assert before a fork:
 * returns 0, or a negative errno with out undefined (and nothing registered): -ENAMETOOLONG when
 * the path does not fit cap (or 511 bytes), -ENOSPC past 128 directories in one process. */
int ql_test_tmpdir_try(char *out, size_t cap, const char *name);

/* Sets QL_TEST_OWNER in this process's environment and registers the exit handler, once; a test
 * that starts processes but makes no temporary directory calls it before the first start. */
void ql_test_cleanup_arm(void);

/* Arms the handler (ql_test_cleanup_arm) and has it call fn too, once, after the processes are
 * gone and before the directories are removed: for state the test's children may still be
 * using until then (the PostgreSQL schemas of store_util.c, which a live server would keep
 * locked). Up to 4 functions; a function added twice runs once. */
void ql_test_cleanup_add(void (*fn)(void));

#endif
