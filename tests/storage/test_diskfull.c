/*
 * A full disk (docs/design/metadata.md, Store: "MDB_MAP_FULL or a full disk fails the write with a
 * clear error; it never corrupts the store or stops reads").
 *
 * The store lives on a real 2 MiB tmpfs, mounted in a private mount namespace of a forked child
 * (unshare(2); as an unprivileged user, in a user namespace of its own too). The child fills it
 * with builds, one transaction each, until a commit fails; it checks the failure is
 * QL_EDISKFULL with a message saying so, that every committed build is still readable, that
 * fsck finds nothing wrong, and that the store reopens. The child makes no Criterion call (that
 * hangs the runner); it reports through its exit code, which the test decodes. Where the
 * machine allows no namespace, the test is skipped and says why.
 */
#include "storage/storage.h"

#include "tests/common/loop_util.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
    CHILD_OK = 0,
    CHILD_NO_NAMESPACE = 77,
    CHILD_SETUP = 10,      /* the store or its model could not be created */
    CHILD_NEVER_FULL = 11, /* 2 MiB took every build: the disk never filled */
    CHILD_WRONG_ERROR = 12,
    CHILD_VAGUE_MESSAGE = 13,
    CHILD_LOST_BUILDS = 14,
    CHILD_FSCK = 15,
    CHILD_REOPEN = 16,
};

static const char *const child_failures[] = {
    [CHILD_SETUP] = "the store or its model could not be created on the tmpfs",
    [CHILD_NEVER_FULL] = "100000 builds fit in 2 MiB: the disk never filled",
    [CHILD_WRONG_ERROR] = "the failed commit was not QL_EDISKFULL",
    [CHILD_VAGUE_MESSAGE] = "the error's message does not say the disk is full",
    [CHILD_LOST_BUILDS] = "committed builds are missing after the failure",
    [CHILD_FSCK] = "fsck found violations after the failure",
    [CHILD_REOPEN] = "the store did not reopen, or lost builds on reopening",
};

static uint8_t fat_def[1500];

static const ql_step_spec_t steps[2] = {
    {.name = "a", .kind = "noop", .def = fat_def, .def_len = sizeof fat_def},
    {.name = "b", .kind = "noop", .def = fat_def, .def_len = sizeof fat_def},
};

static int enter_private_tmpfs(const char *dir) {
    if (unshare(CLONE_NEWNS) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return -1;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    return mount("tmpfs", dir, "tmpfs", 0, "size=2m");
}

static uint64_t segment_count(ql_store_t *store, const ql_id_t *model) {
    ql_txn_t *t;
    uint64_t n = UINT64_MAX;
    if (ql_txn_begin(store, false, &t) == 0) {
        if (ql_segment_count(t, model, &n) != 0)
            n = UINT64_MAX;
        ql_txn_abort(t);
    }
    return n;
}

static int child_main(const char *dir) {
    /* Criterion's crash handlers would report from a process it does not know: a crash here
     * must show as this child's signal instead. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    if (enter_private_tmpfs(dir) != 0)
        return CHILD_NO_NAMESPACE;
    char path[300];
    snprintf(path, sizeof path, "%s/data", dir);
    ql_store_opts_t o = {.path = path, .map_size = 64u << 20};
    ql_err_t err = {0};
    ql_store_t *store;
    if (ql_store_open(&o, &store, &err))
        return CHILD_SETUP;
    ql_txn_t *t;
    ql_model_t m = {0};
    if (ql_test_create_daily_model(store, "p", "m", &m.id, &err))
        return CHILD_SETUP;

    uint64_t committed = 0;
    int failure = 0;
    for (int64_t i = 0; i < 100000 && !failure; i++) {
        ql_job_spec_t spec = {.priority = 3, .now = i, .steps = steps, .n_steps = 2};
        if (ql_txn_begin(store, true, &t))
            return CHILD_SETUP;
        int rc = ql_meta_submit_build(t, &m.id, i * 10, i * 10 + 10, &spec, NULL, NULL, &err);
        if (rc) {
            ql_txn_abort(t); /* a put that needed a page the file system could not give */
            failure = rc;
        } else if ((rc = ql_txn_commit(t))) {
            failure = rc;
        } else {
            committed++;
        }
    }
    if (!failure)
        return CHILD_NEVER_FULL;
    if (failure != QL_EDISKFULL)
        return CHILD_WRONG_ERROR;
    if (!strstr(ql_strerror(failure), "disk") || strcmp(ql_error_code(failure), "QL-00024"))
        return CHILD_VAGUE_MESSAGE;
    if (segment_count(store, &m.id) != committed)
        return CHILD_LOST_BUILDS;
    ql_fsck_report_t r;
    FILE *devnull = fopen("/dev/null", "w");
    int frc = ql_store_fsck(store, devnull, &r);
    fclose(devnull);
    if (frc || r.violations)
        return CHILD_FSCK;
    ql_store_close(store);
    if (ql_store_open(&o, &store, &err) || segment_count(store, &m.id) != committed)
        return CHILD_REOPEN;
    ql_store_close(store);
    umount(dir);
    return CHILD_OK;
}

Test(diskfull, a_full_file_system_fails_the_commit_clearly_and_loses_nothing, .timeout = 120) {
    /* No Criterion call before the fork either: with --full-stats the child would carry
     * the runner's pending report of it and send it again. */
    char dir[256];
    bool made = ql_test_tmpdir_try(dir, sizeof dir, "ql_diskfull") == 0;
    pid_t pid = made ? fork() : -1;
    if (pid == 0)
        _exit(child_main(dir));
    cr_assert(made, "mkdtemp failed");
    cr_assert_geq(pid, 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    ql_test_rm_tree(dir);
    cr_assert(WIFEXITED(status), "the child died (signal %d)", WTERMSIG(status));
    int code = WEXITSTATUS(status);
    if (code == CHILD_NO_NAMESPACE)
        cr_skip_test("no private mount namespace here (unshare or mount refused): cannot make "
                     "a small file system to fill");
    if (code != CHILD_OK)
        cr_assert_fail("%s (child exit %d)",
                       code < (int)(sizeof child_failures / sizeof child_failures[0]) &&
                               child_failures[code]
                           ? child_failures[code]
                           : "unexpected failure",
                       code);
}
