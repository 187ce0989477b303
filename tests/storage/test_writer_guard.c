/*
 * The writer guard (storage/writer_guard.h): another process caught inside a write transaction
 * of the store (tests/storage/guard_holder.c). Stopped (SIGSTOP), it is killed once this
 * process has waited the stall bound, and this process's write goes through; running but slow,
 * it is waited for and logged once, never killed.
 *
 * Waits are polls with deadlines; the write under test runs on a thread of its own, so a write
 * that stays blocked (the code before the guard) fails the deadline instead of hanging.
 */
#include "base/ql_procinfo.h"
#include "storage/storage.h"
#include "tests/common/tmp_util.h"

#include "tests/common/holder_proc.h"
#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLACK_MS 3000

static struct {
    char dir[64];
    ql_store_t *store;
    ql_log_t log;
    pthread_mutex_t log_mu;
    char lines[32][640];
    int n_lines;
    ql_test_holder_t holder;
    pthread_t writer;
    bool writer_started;
    atomic_int write_rc; /* 1: not done yet */
} w;

static void log_sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    (void)level;
    pthread_mutex_lock(&w.log_mu);
    if (w.n_lines < 32)
        snprintf(w.lines[w.n_lines++], sizeof w.lines[0], "%s", line);
    pthread_mutex_unlock(&w.log_mu);
}

/* How many logged lines hold both needles. */
static int count_lines(const char *a, const char *b) {
    int n = 0;
    pthread_mutex_lock(&w.log_mu);
    for (int i = 0; i < w.n_lines; i++)
        n += strstr(w.lines[i], a) && (!b || strstr(w.lines[i], b));
    pthread_mutex_unlock(&w.log_mu);
    return n;
}

static void open_store(int64_t stall_ms) {
    ql_log_init(&w.log, QL_LOG_INFO);
    w.log.sink = log_sink;
    ql_store_opts_t o = {
        .path = w.dir, .map_size = 1ull << 30, .writer_stall_ms = stall_ms, .log = &w.log};
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &w.store, &err), 0, "%s", err.msg);
}

static void setup(void) {
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.log_mu, NULL);
    atomic_store(&w.write_rc, 1);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_guard");
}

static void teardown(void) {
    /* The holder first: a write still blocked behind it ends with its death. */
    ql_test_holder_reap(&w.holder);
    if (w.writer_started)
        pthread_join(w.writer, NULL);
    ql_store_close(w.store);
    ql_test_rm_tree(w.dir);
    pthread_mutex_destroy(&w.log_mu);
}

static void *write_main(void *arg) {
    (void)arg;
    ql_txn_t *t;
    int rc = ql_txn_begin(w.store, true, &t);
    if (!rc && (rc = ql_meta_put_str(t, "test_write", "done")))
        ql_txn_abort(t);
    else if (!rc)
        rc = ql_txn_commit(t);
    atomic_store(&w.write_rc, rc);
    return NULL;
}

static void start_write(void) {
    cr_assert_eq(pthread_create(&w.writer, NULL, write_main, NULL), 0);
    w.writer_started = true;
}

static bool write_done_within(int64_t ms) {
    for (int64_t until = ql_test_mono_ms() + ms; ql_test_mono_ms() < until;) {
        if (atomic_load(&w.write_rc) != 1)
            return true;
        usleep(1000);
    }
    return atomic_load(&w.write_rc) != 1;
}

static bool holder_exited_within(int64_t ms) {
    for (int64_t until = ql_test_mono_ms() + ms; ql_test_mono_ms() < until;) {
        if (ql_test_holder_exited(&w.holder))
            return true;
        usleep(1000);
    }
    return ql_test_holder_exited(&w.holder);
}

static bool meta_is(const char *key, const char *want) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(w.store, false, &t), 0);
    char buf[64];
    int rc = ql_meta_get_str(t, key, buf, sizeof buf);
    ql_txn_abort(t);
    return want ? rc == 0 && strcmp(buf, want) == 0 : rc == QL_ENOTFOUND;
}

Test(writer_guard, a_stopped_holder_is_killed_after_the_stall_bound, .init = setup,
     .fini = teardown) {
    open_store(300);
    ql_test_holder_start(&w.holder, QL_TEST_GUARD_HOLDER, w.dir, -1, 5000);
    ql_test_holder_sigstop(&w.holder, 5000);

    int64_t t0 = ql_test_mono_ms();
    start_write();
    cr_assert(write_done_within(300 + SLACK_MS),
              "the write still waits for the stopped holder after %d ms", 300 + SLACK_MS);
    int64_t took = ql_test_mono_ms() - t0;
    cr_assert_eq(atomic_load(&w.write_rc), 0, "the write failed: %s",
                 ql_strerror(atomic_load(&w.write_rc)));
    cr_assert_geq(took, 300, "the holder was killed before the stall bound (%lld ms)",
                  (long long)took);

    cr_assert(holder_exited_within(SLACK_MS));
    cr_assert(WIFSIGNALED(w.holder.status) && WTERMSIG(w.holder.status) == SIGKILL,
              "the stopped holder was not SIGKILLed (status %#x)", w.holder.status);
    char who[48];
    snprintf(who, sizeof who, "killed pid=%ld ", (long)w.holder.pid);
    cr_assert_eq(count_lines(who, "state=T"), 1, "one line says who was killed and why");
    cr_assert_eq(count_lines(who, "qilin.storage.writer-stall-ms=300"), 1);

    /* LMDB recovered its mutex from the dead holder: its change is gone, ours is durable. */
    cr_assert(meta_is("guard_holder", NULL), "the killed holder's uncommitted write is visible");
    cr_assert(meta_is("test_write", "done"));
    ql_test_assert_fsck_clean(w.store);
}

Test(writer_guard, a_running_slow_holder_is_waited_for_and_not_killed, .init = setup,
     .fini = teardown) {
    open_store(200);
    ql_test_holder_start(&w.holder, QL_TEST_GUARD_HOLDER, w.dir, 1500, 5000);
    start_write();
    cr_assert(write_done_within(1500 + SLACK_MS), "the write never went through");
    cr_assert_eq(atomic_load(&w.write_rc), 0);
    cr_assert(holder_exited_within(SLACK_MS));
    cr_assert(WIFEXITED(w.holder.status) && WEXITSTATUS(w.holder.status) == 0,
              "the running holder was killed (status %#x)", w.holder.status);
    cr_assert(meta_is("guard_holder", "committed"), "the slow holder's commit was lost");
    cr_assert(meta_is("test_write", "done"));

    char who[64];
    snprintf(who, sizeof who, "waiting for the writer guard held by pid=%ld ", (long)w.holder.pid);
    cr_assert_eq(count_lines(who, "is waited for, not killed"), 1,
                 "the wait for a running holder is logged once");
    cr_assert_eq(count_lines("killed pid=", NULL), 0, "nobody was killed");
}

Test(writer_guard, the_guard_file_is_private_and_names_its_last_holder, .init = setup,
     .fini = teardown) {
    open_store(0);
    start_write();
    cr_assert(write_done_within(SLACK_MS));
    cr_assert_eq(atomic_load(&w.write_rc), 0);
    char path[96], buf[128] = "";
    snprintf(path, sizeof path, "%s/writer.guard", w.dir);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "no %s", path);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(buf, sizeof buf, f));
    fclose(f);
    long pid = 0;
    unsigned long long start = 0;
    long long since = 0;
    cr_assert_eq(sscanf(buf, "pid=%ld start=%llu since_boot_ms=%lld", &pid, &start, &since), 3,
                 "%s", buf);
    cr_assert_eq(pid, (long)getpid());
    cr_assert_eq(start, ql_proc_self_start());
    cr_assert_gt(since, 0);
}
