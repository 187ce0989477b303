/*
 * The coordination guard (server/node_guard.c; docs/user-guide.md, Several servers): the first
 * job server of a store records how it coordinates; a job server configured differently refuses
 * to start and names both configurations; a query server is not a scheduler and is not held to
 * it; `qilin cluster reset-coordination` forgets the record on purpose.
 */
#include "server/ql_node.h"

#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <uv.h>

#define HELPER QL_BUILD_DIR "/tools/qilin-exec"
#define QILIN QL_BUILD_DIR "/tools/qilin"
#define DEADLINE_MS 10000
#define OTHER "scheduler=100 lock=zk zk-path=/kylin/other"

static struct {
    char dir[64];
    char data[128];
    char templates[128];
    uv_loop_t loop;
} w;

static void setup(void) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_coord");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    snprintf(w.templates, sizeof w.templates, "%s/jobs.yaml", w.dir);
    ql_test_write_with_dir(w.templates, ql_test_ppid_templates, w.dir);
    cr_assert_eq(uv_loop_init(&w.loop), 0);
}

static void teardown(void) {
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_test_rm_tree(w.dir);
}

/* Starts a node with one extra setting (or none); returns its ql_node_start code, with the
 * message in err. A node that started is stopped again. */
static int start_node(const char *setting, ql_err_t *err) {
    const char *const settings[] = {"qilin.server.id=test-a:7070", setting, NULL};
    ql_config_t *cfg = ql_test_node_config(w.data, w.templates, settings);
    ql_node_opts_t no = {.config = cfg, .loop = &w.loop, .exec_helper = HELPER};
    ql_node_t *n = NULL;
    int rc = ql_node_start(&no, &n, err);
    if (rc == 0)
        ql_test_node_stop(&w.loop, n, DEADLINE_MS);
    else
        cr_assert_null(n);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    ql_config_free(cfg);
    return rc;
}

/* How a job server of this test coordinates: scheduler 0 with the backend's own lock (the data
 * directory's file on LMDB, the store's advisory lock on PostgreSQL). */
static const char *mine(void) {
    return strcmp(ql_test_store_backend(), "pg") == 0 ? "scheduler=0 lock=pg"
                                                      : "scheduler=0 lock=file";
}

/* The record and its author as stored ("" when absent). */
static void read_record(char *rec, size_t rcap, char *by, size_t bcap) {
    ql_store_t *s;
    ql_test_store_open(w.data, &s);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    rec[0] = by[0] = '\0';
    ql_meta_get_str(t, "coordination", rec, rcap);
    ql_meta_get_str(t, "coordination_by", by, bcap);
    ql_txn_abort(t);
    ql_store_close(s);
}

/* Another cluster's job server recorded OTHER in the store first. */
static void record_other(void) {
    ql_store_t *s;
    ql_test_store_open(w.data, &s);
    ql_err_t err = {0};
    cr_assert_eq(ql_node_guard_coordination(s, OTHER, "other:7070", 0, NULL, &err), 0, "%s",
                 err.msg);
    ql_store_close(s);
}

Test(coordination, the_first_job_server_records_how_it_coordinates, .init = setup,
     .fini = teardown) {
    ql_err_t err = {0};
    cr_assert_eq(start_node(NULL, &err), 0, "%s", err.msg);
    char rec[256], by[256];
    read_record(rec, sizeof rec, by, sizeof by);
    cr_assert_str_eq(rec, mine());
    cr_assert(strncmp(by, "test-a:7070 at 20", 17) == 0, "recorded by '%s'", by);
    /* The same configuration starts again, and the record stays the first one's. */
    cr_assert_eq(start_node("qilin.server.id=test-b:7071", &err), 0, "%s", err.msg);
    char by2[256];
    read_record(rec, sizeof rec, by2, sizeof by2);
    cr_assert_str_eq(by2, by);
}

Test(coordination, a_job_server_configured_differently_is_refused_naming_both, .init = setup,
     .fini = teardown) {
    record_other();
    ql_err_t err = {0};
    cr_assert_eq(start_node(NULL, &err), QL_ECOORD, "%s", err.msg);
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", mine());
    cr_assert(strstr(err.msg, quoted), "%s", err.msg);
    cr_assert(strstr(err.msg, "'" OTHER "'"), "%s", err.msg);
    cr_assert(strstr(err.msg, "recorded by other:7070 at 1970-01-01T00:00:00Z"), "%s", err.msg);
    cr_assert(strstr(err.msg, "qilin cluster reset-coordination"), "%s", err.msg);
    char rec[256], by[256];
    read_record(rec, sizeof rec, by, sizeof by);
    cr_assert_str_eq(rec, OTHER, "the refused server changed the record");
}

Test(coordination, a_query_server_is_not_held_to_it, .init = setup, .fini = teardown) {
    record_other();
    ql_err_t err = {0};
    cr_assert_eq(start_node("kylin.server.mode=query", &err), 0, "%s", err.msg);
}

Test(coordination, reset_lets_the_next_job_server_record_its_own, .init = setup, .fini = teardown) {
    record_other();
    ql_store_t *s;
    ql_test_store_open(w.data, &s);
    char old[256];
    uint64_t was;
    ql_err_t err = {0};
    cr_assert_eq(ql_node_reset_coordination(s, old, sizeof old, &was, &err), 0, "%s", err.msg);
    ql_store_close(s);
    cr_assert_str_eq(old, OTHER);
    cr_assert_eq(start_node(NULL, &err), 0, "%s", err.msg);
    char rec[256], by[256];
    read_record(rec, sizeof rec, by, sizeof by);
    cr_assert_str_eq(rec, mine());
}

static uint64_t epoch_of_store(void) {
    ql_store_t *s;
    ql_test_store_open(w.data, &s);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    uint64_t e;
    cr_assert_eq(ql_fence_current(t, &e), 0);
    ql_txn_abort(t);
    ql_store_close(s);
    return e;
}

static uint64_t reset(char *old, size_t cap) {
    ql_store_t *s;
    ql_test_store_open(w.data, &s);
    uint64_t was = 99;
    ql_err_t err = {0};
    cr_assert_eq(ql_node_reset_coordination(s, old, cap, &was, &err), 0, "%s", err.msg);
    ql_store_close(s);
    return was;
}

/* A store coordinated by ZooKeeper holds czxids as its epoch: leaving the ensemble resets it so
 * the next ensemble's small zxids can claim; a store-minted epoch (file or PostgreSQL lock) is
 * left alone, since the next holder continues from it. */
Test(coordination, reset_lowers_the_epoch_only_when_zookeeper_coordinated, .init = setup,
     .fini = teardown) {
    record_other();
    ql_store_t *s;
    ql_test_store_open(w.data, &s);
    ql_txn_t *t;
    ql_err_t err = {0};
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_fence_claim(t, 0x500000007, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(s);
    char old[256];
    cr_assert_eq(reset(old, sizeof old), 0x500000007, "the zk-coordinated epoch is reset");
    cr_assert_eq(epoch_of_store(), 0);

    cr_assert_eq(start_node(NULL, &err), 0, "%s", err.msg);
    uint64_t minted = epoch_of_store();
    cr_assert_gt(minted, 0, "the store's own lock minted an epoch");
    cr_assert_eq(reset(old, sizeof old), 0, "a store-minted epoch is not reset");
    cr_assert_str_eq(old, mine());
    cr_assert_eq(epoch_of_store(), minted);
}

/* The command line: qilin cluster reset-coordination on the store of the backend under test. */
Test(coordination, the_cli_forgets_the_record_and_says_what_it_was, .init = setup,
     .fini = teardown) {
    record_other();
    ql_store_opts_t o;
    ql_test_store_opts(w.data, &o);
    char cmd[1024], out[128];
    snprintf(out, sizeof out, "%s/cli.out", w.dir);
    if (o.url)
        snprintf(cmd, sizeof cmd, "%s cluster reset-coordination --url '%s' --schema %s > %s",
                 QILIN, o.url, o.pg_schema, out);
    else
        snprintf(cmd, sizeof cmd, "%s cluster reset-coordination %s > %s", QILIN, w.data, out);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", cmd, st);
    const char *const said[] = {"forgot the coordination '" OTHER "'", NULL};
    cr_assert(ql_test_file_has_line(out, said), "the CLI did not say what it forgot");
    char rec[256], by[256];
    read_record(rec, sizeof rec, by, sizeof by);
    cr_assert_str_eq(rec, "");
    st = system(QILIN " cluster reset-coordination > /dev/null 2>&1");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "no store given: usage, exit 2");
}
