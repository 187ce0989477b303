/*
 * Reader slots of dead processes (docs/design/cluster.md, Shared metadata: the store is shared by
 * the processes of one host). A process killed inside a read transaction leaves its slot in LMDB's
 * reader table; while any other process keeps the store open nothing frees it, and its snapshot
 * keeps every page freed since from reuse. ql_store_maintain frees such slots.
 *
 * The child opens the store itself, begins a read transaction, says so through a pipe and
 * waits to be killed. It makes no Criterion call, and nothing before the fork does either
 * (with --full-stats the child would carry the runner's pending report and send it again).
 */
#include "storage/storage.h"

#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void child_main(const char *dir, int ready_fd) {
    ql_store_opts_t o = {.path = dir};
    ql_err_t err = {0};
    ql_store_t *store;
    ql_txn_t *t;
    char ok = 'y';
    if (ql_store_open(&o, &store, &err) || ql_txn_begin(store, false, &t))
        ok = 'n';
    if (write(ready_fd, &ok, 1) != 1)
        _exit(2);
    for (;;)
        pause(); /* killed here, inside the read transaction */
}

Test(stale_readers, the_slot_of_a_process_killed_in_a_read_transaction_is_freed) {
    char dir[256];
    bool made = ql_test_tmpdir_try(dir, sizeof dir, "ql_readers") == 0;
    int fds[2] = {-1, -1};
    bool piped = made && pipe(fds) == 0;
    /* The parent's store is opened before the child dies, so LMDB's own reset at the first
     * open of a store cannot be what frees the slot. */
    ql_store_opts_t o = {.path = dir};
    ql_err_t err = {0};
    ql_store_t *store = NULL;
    int open_rc = piped ? ql_store_open(&o, &store, &err) : -1;
    pid_t pid = open_rc == 0 ? fork() : -1;
    if (pid == 0) {
        close(fds[0]);
        child_main(dir, fds[1]);
    }
    cr_assert(made && piped, "temporary directory or pipe");
    cr_assert_eq(open_rc, 0, "%s", err.msg);
    cr_assert_geq(pid, 0);
    close(fds[1]);
    char ok = 0;
    cr_assert_eq(read(fds[0], &ok, 1), 1);
    close(fds[0]);
    cr_assert_eq(ok, 'y', "the child could not open the store or begin its read");

    int cleared = -1;
    cr_assert_eq(ql_store_maintain(store, &cleared), 0);
    cr_assert_eq(cleared, 0, "the child is alive: its slot is not stale");

    cr_assert_eq(kill(pid, SIGKILL), 0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    cr_assert_eq(ql_store_maintain(store, &cleared), 0);
    cr_assert_eq(cleared, 1, "the dead child's slot is freed");
    cr_assert_eq(ql_store_maintain(store, &cleared), 0);
    cr_assert_eq(cleared, 0, "and only once");
    ql_store_close(store);
    ql_test_rm_tree(dir);
}
