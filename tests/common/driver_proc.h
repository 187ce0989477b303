/*
 * A node in a process of its own (tests/scheduler/node_driver.c), driven from a test's loop:
 * its stdout is read line by line for MASTER (it holds the job engine lock), its stderr goes to
 * a file the test can read, and its exit is recorded.
 */
#ifndef QL_TEST_DRIVER_PROC_H
#define QL_TEST_DRIVER_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct ql_test_driver {
    uv_loop_t *loop;
    uv_process_t proc;
    uv_pipe_t out;
    char buf[4096];
    size_t len;
    bool master;
    bool exited;
    int64_t exit_status;
    int term_signal;
    int closes; /* handles closed so far: 2 once the process and the pipe are */
} ql_test_driver_t;

/* Spawns args[0] with args (NULL-terminated) on loop, stderr appended to err_path, and drives
 * the loop until the process says MASTER (asserted, within deadline_ms). */
void ql_test_driver_start(ql_test_driver_t *d, uv_loop_t *loop, char **args, const char *err_path,
                          int64_t deadline_ms);
/* Starts node_driver (driver is its path) as a server on the store at data with the templates
 * file templates (on the backend under test, ql_test_store_settings), trying the lock every
 * second (--poll-seconds 1), with ql_test_driver_start:
 * asserts it says MASTER within deadline_ms. The strings are borrowed for the call only. */
void ql_test_driver_start_node(ql_test_driver_t *d, uv_loop_t *loop, const char *driver,
                               const char *data, const char *templates, const char *err_path,
                               int64_t deadline_ms);
/* Sends sig and drives the loop until the process exited and both handles closed (asserted). */
void ql_test_driver_stop(ql_test_driver_t *d, int sig, int64_t deadline_ms);
/* For a teardown: stops the process if it still runs (SIGTERM first when term_first, SIGKILL
 * after deadline_ms either way) and closes the pipe. No assertions. */
void ql_test_driver_reap(ql_test_driver_t *d, bool term_first, int64_t deadline_ms);

#endif
