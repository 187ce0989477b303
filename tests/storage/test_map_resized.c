/*
 * Two processes sharing a store with different map sizes (docs/design/cluster.md, Shared metadata).
 * When the one with the larger qilin.storage.map-size grows the data past the other's map, LMDB
 * answers the other's transactions with MDB_MAP_RESIZED. That must read as what it is, with
 * the fix (QL_EMAPSIZE: same map size everywhere, restart), not as a corrupt store; and a
 * restart with the larger size reads everything.
 *
 * The child opens the store itself with a 64 MiB map and writes 8 MiB into it. It makes no
 * Criterion call, and nothing before the fork does either (with --full-stats the child would
 * carry the runner's pending report and send it again).
 */
#include "storage/storage.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SMALL_MAP (2u << 20)
#define LARGE_MAP (64u << 20)
#define OUTPUTS 8
#define OUTPUT_SIZE (1u << 20)

static int grow(const char *dir) {
    ql_store_opts_t o = {.path = dir, .map_size = LARGE_MAP};
    ql_err_t err = {0};
    ql_store_t *store;
    if (ql_store_open(&o, &store, &err))
        return 10;
    char *text = malloc(OUTPUT_SIZE);
    if (!text)
        return 11;
    memset(text, 'x', OUTPUT_SIZE);
    ql_id_t job;
    ql_store_new_id(store, &job);
    ql_txn_t *t;
    int rc = ql_txn_begin(store, true, &t);
    for (uint32_t i = 0; !rc && i < OUTPUTS; i++)
        rc = ql_output_put(t, &job, i, text, OUTPUT_SIZE);
    if (!rc)
        rc = ql_txn_commit(t);
    free(text);
    ql_store_close(store);
    return rc ? 12 : 0;
}

Test(map_resized, a_store_grown_past_this_map_size_says_so_and_a_restart_reads_it) {
    char dir[256];
    bool made = ql_test_tmpdir_try(dir, sizeof dir, "ql_resized") == 0;
    ql_store_opts_t small = {.path = dir, .map_size = SMALL_MAP};
    ql_err_t err = {0};
    ql_store_t *store = NULL;
    int open_rc = made ? ql_store_open(&small, &store, &err) : -1;
    pid_t pid = open_rc == 0 ? fork() : -1;
    if (pid == 0)
        _exit(grow(dir));
    cr_assert(made, "mkdtemp");
    cr_assert_eq(open_rc, 0, "%s", err.msg);
    cr_assert_geq(pid, 0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the growing process failed (%d)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    ql_txn_t *t = NULL;
    int rc = ql_txn_begin(store, true, &t);
    if (rc == 0) {
        ql_txn_abort(t);
        cr_assert_fail("a write transaction began on a map smaller than the data");
    }
    cr_assert_eq(rc, QL_EMAPSIZE, "got %s", ql_strerror(rc));
    cr_assert(strstr(ql_strerror(rc), "qilin.storage.map-size"), "%s", ql_strerror(rc));
    cr_assert_str_eq(ql_error_code(rc), "QL-00025");
    ql_store_close(store);

    /* Restarted with the larger map, this process reads what the other wrote. */
    ql_store_opts_t large = {.path = dir, .map_size = LARGE_MAP};
    cr_assert_eq(ql_store_open(&large, &store, &err), 0, "%s", err.msg);
    ql_test_assert_fsck_clean(store);
    ql_store_close(store);
    ql_test_rm_tree(dir);
}
