/*
 * Helpers for the tests of the ZooKeeper session and recipes (tests/scheduler/test_zk_*.c):
 * the fixture's server (docs/testing.md, ZooKeeper), session options, and zk_member processes
 * (tests/scheduler/zk_member.c) driven from a test's loop, whose every line is recorded with
 * the member's pid and the monotonic time it printed it at.
 */
#ifndef QL_TEST_ZK_UTIL_H
#define QL_TEST_ZK_UTIL_H

#include "scheduler/ql_zk.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* The path of zk_member (QL_TEST_BUILD_DIR: the build directory, defined for the helpers). */
#define QL_TEST_ZK_MEMBER QL_TEST_BUILD_DIR "/tests/zk_member"

/* The fixture's HOST:PORT (static). Skips the test when there is none (the zk_start fixture
 * found no ZooKeeper), and fails it in CI (CI=true). */
const char *ql_test_zk_connect(void);
/* The fixture server's pid (the java process), for the tests that pause it; asserts. */
pid_t ql_test_zk_server_pid(void);
/* Starts a ZooKeeper server of this test's own under dir (tests/common/zk_fixture.sh, the same
 * settings as the fixture's) and makes ql_test_zk_connect and ql_test_zk_server_pid name it from
 * then on in this process: for the tests that stop the server (SIGSTOP), so that the other
 * ZooKeeper tests can share the fixture's server meanwhile. Asserts it started. */
void ql_test_zk_private_start(const char *dir);
/* Stops the private server (by its recorded pid) and removes it; no assertions, for a teardown.
 * Does nothing when none was started. */
void ql_test_zk_private_stop(void);

/* Deletes the nodes directly under path whose data names pid (" pid=<pid> ", the data every
 * Qilin node carries), as ZooKeeper does once their owner's session has expired; returns how
 * many. Through a session of the test's own, blocking; asserts on errors. */
int ql_test_zk_delete_nodes_of(const char *path, long pid);

/* A base path of its own for this test ("/qt_<pid>_<n>"), so tests never see each other's
 * nodes; written to out. */
void ql_test_zk_base(char *out, size_t cap);
/* Session options for the fixture under base, cluster "c", server id id, timeout_ms. */
void ql_test_zk_opts(ql_zk_opts_t *o, const char *base, const char *id, int timeout_ms);

/* ---- sessions in the test's own process ---- */

/* The states a session reported, in order. */
#define QL_TEST_ZK_STATES 64
typedef struct ql_test_zk_rec {
    ql_zk_listener_t listener;
    ql_zk_state_t states[QL_TEST_ZK_STATES];
    int64_t sessions[QL_TEST_ZK_STATES];
    int64_t at_ms[QL_TEST_ZK_STATES];
    char reasons[QL_TEST_ZK_STATES][200];
    size_t n;
} ql_test_zk_rec_t;

/* Opens a session on loop (ql_test_zk_opts), records its states in rec (zeroed here) and
 * drives the loop until it is CONNECTED (asserted within 10 s). */
ql_zk_t *ql_test_zk_open(uv_loop_t *loop, const ql_zk_opts_t *o, ql_test_zk_rec_t *rec);
/* Removes rec's listener, closes the session and drives the loop until it is freed
 * (asserted). */
void ql_test_zk_close(uv_loop_t *loop, ql_zk_t *zk, ql_test_zk_rec_t *rec);
/* The index of the first state s recorded at or after from, or -1. */
int ql_test_zk_rec_find(const ql_test_zk_rec_t *rec, size_t from, ql_zk_state_t s);
/* Drives loop until rec holds state s at or after from (asserted within deadline_ms);
 * returns its index. */
int ql_test_zk_rec_wait(uv_loop_t *loop, ql_test_zk_rec_t *rec, size_t from, ql_zk_state_t s,
                        int64_t deadline_ms);

/* One line a member printed, and when the test read it. */
typedef struct ql_test_zk_line {
    char text[512];
    int64_t ms; /* the member's own monotonic ms= field, or the read time without one */
} ql_test_zk_line_t;

#define QL_TEST_ZK_LINES 256

typedef struct ql_test_zk_member {
    uv_loop_t *loop;
    uv_process_t proc;
    uv_pipe_t out;
    char buf[4096];
    size_t len;
    ql_test_zk_line_t lines[QL_TEST_ZK_LINES];
    size_t n_lines;
    pid_t pid;
    char id[64];
    bool exited;
    int64_t exit_status;
    int term_signal;
    int64_t exit_ms;
    int closes;
} ql_test_zk_member_t;

/*
 * Starts zk_member as server id in mode ("elect" or "lock") under base with the session timeout
 * timeout_ms; extra (NULL-terminated, may be NULL) are more arguments (--wedge MS,
 * --lose-create). Its stderr is appended to err_path. Asserts it starts.
 */
void ql_test_zk_member_start(ql_test_zk_member_t *m, uv_loop_t *loop, const char *id,
                             const char *mode, const char *base, int timeout_ms,
                             const char *const *extra, const char *err_path);
/* The index of the first line at or after from starting with prefix, or -1. */
int ql_test_zk_member_find(const ql_test_zk_member_t *m, size_t from, const char *prefix);
/* Drives loop until m printed a line starting with prefix at or after line from (asserted
 * within deadline_ms); returns its index. */
int ql_test_zk_member_wait(ql_test_zk_member_t *m, size_t from, const char *prefix,
                           int64_t deadline_ms);
/* The unsigned number after "key=" in line i (asserted present). */
uint64_t ql_test_zk_member_num(const ql_test_zk_member_t *m, int i, const char *key);
/* Sends sig (0: none, it is exiting by itself) and drives the loop until it exited and its
 * handles closed (asserted). */
void ql_test_zk_member_stop(ql_test_zk_member_t *m, int sig, int64_t deadline_ms);
/* For a teardown: SIGKILLs it if it runs, closes its handles. No assertions. */
void ql_test_zk_member_reap(ql_test_zk_member_t *m);

#endif
