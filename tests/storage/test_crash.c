/*
 * Crash safety: a child process (crash_child.c) streams group-committed builds into the store
 * and reports each acknowledged job; the test SIGKILLs it at a random moment, reopens the store,
 * and checks that every acknowledged job is there with its segment and all its steps (never
 * half a mutation) and that fsck finds no violation. Many rounds on the same store.
 */
#include "storage/storage.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 60

/* Checks in loops that run thousands of times: an assertion only when one fails, because
 * Criterion reports every passing cr_assert under --full-stats (which ctest uses). */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            cr_assert_fail(__VA_ARGS__);                                                           \
    } while (0)
#define CHILD QL_BUILD_DIR "/tests/storage_crash_child"

extern char **environ;

static char dir[64];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_crash");
}

static void teardown(void) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(crash, .init = setup, .fini = teardown);

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct {
    ql_id_t *ids;
    size_t n, cap;
    char line[128];
    size_t line_len;
    bool ready;
} acks_t;

/* Consumes bytes from the child: "ready" once, then one job id per line. */
static void feed(acks_t *a, const char *buf, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n') {
            CHECK(a->line_len < sizeof a->line - 1, "overlong line from the child");
            a->line[a->line_len++] = buf[i];
            continue;
        }
        a->line[a->line_len] = '\0';
        a->line_len = 0;
        if (strcmp(a->line, "ready") == 0) {
            a->ready = true;
            continue;
        }
        if (a->n == a->cap) {
            a->cap = a->cap ? a->cap * 2 : 1024;
            a->ids = realloc(a->ids, a->cap * sizeof *a->ids);
            CHECK(a->ids, "out of memory");
        }
        CHECK(ql_id_parse(a->line, &a->ids[a->n]) == 0, "bad line '%s'", a->line);
        a->n++;
    }
}

/* Reads what the child wrote until the deadline (or EOF), or until more than `until_acks` builds
 * are acknowledged (SIZE_MAX: no such stop); returns false on EOF. */
static bool read_until(int fd, acks_t *a, int64_t deadline, size_t until_acks) {
    char buf[4096];
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0 || (until_acks != SIZE_MAX && a->ready && a->n > until_acks))
            return true;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        CHECK(rc >= 0, "poll: %s", strerror(errno));
        if (rc == 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n >= 0, "read: %s", strerror(errno));
        if (n == 0)
            return false;
        feed(a, buf, (size_t)n);
    }
}

static void verify_store(const acks_t *a, int round) {
    ql_store_opts_t o = {.path = dir};
    ql_store_t *store;
    ql_err_t err;
    cr_assert_eq(ql_store_open(&o, &store, &err), 0, "round %d: reopen: %s", round, err.msg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    for (size_t i = 0; i < a->n; i++) {
        char id[QL_ID_STR_LEN + 1];
        ql_id_format(&a->ids[i], id);
        ql_job_t j;
        int rc = ql_job_get(t, &a->ids[i], 0, &j);
        CHECK(rc == 0, "round %d: acknowledged job %s is lost (%s)", round, id, ql_strerror(rc));
        CHECK(j.n_steps == 3, "round %d: job %s has %u steps", round, id, j.n_steps);
        for (uint32_t s = 0; s < j.n_steps; s++) {
            ql_step_t st;
            CHECK(ql_step_get(t, &j.id, s, &st) == 0, "round %d: job %s lacks step %u", round, id,
                  s);
            ql_step_free(&st);
        }
        ql_segment_t seg;
        CHECK(ql_segment_get(t, &j.segment, &seg) == 0, "round %d: job %s lacks its segment", round,
              id);
        CHECK(ql_id_eq(&seg.job, &j.id) && seg.start == j.range_start,
              "round %d: job %s and its segment disagree", round, id);
        ql_segment_free(&seg);
        ql_job_free(&j);
    }
    uint64_t jobs;
    cr_assert_eq(ql_job_count(t, NULL, 0xff, &jobs), 0);
    cr_assert_geq(jobs, a->n, "fewer jobs than acknowledged");
    ql_txn_abort(t);

    ql_fsck_report_t r;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    cr_assert_eq(ql_store_fsck(store, out, &r), 0);
    fclose(out);
    cr_assert_eq(r.violations, 0, "round %d: fsck found violations:\n%s", round, text);
    cr_assert_eq(r.warnings, 0, "round %d: fsck warned:\n%s", round, text);
    cr_assert_eq(r.steps, 3 * r.jobs, "round %d: a job without all of its steps", round);
    free(text);
    ql_store_close(store);
}

Test(crash, sigkill_never_loses_an_acknowledged_build, .timeout = 600) {
    cr_assert_eq(access(CHILD, X_OK), 0, "%s is not built", CHILD);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    acks_t a = {0};
    size_t acked_per_round[ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        int fds[2];
        cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
        char *argv[] = {CHILD, dir, "4", NULL};
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, CHILD, &fa, NULL, argv, environ), 0);
        posix_spawn_file_actions_destroy(&fa);
        close(fds[1]);

        /* Wait (deadline) until its first build of this round is acknowledged, so the writer
         * is streaming, then let it run 1..50 ms more and kill it. */
        a.ready = false;
        size_t before = a.n;
        bool open = read_until(fds[0], &a, mono_ms() + 30000, before);
        cr_assert(open && a.n > before, "round %d: the child did not start streaming", round);
        int delay = 1 + rand() % 50;
        open = read_until(fds[0], &a, mono_ms() + delay, SIZE_MAX);
        cr_assert(open, "round %d: the child stopped on its own", round);
        cr_assert_eq(kill(pid, SIGKILL), 0);
        /* Whatever it wrote before dying is acknowledged too. */
        while (read_until(fds[0], &a, mono_ms() + 30000, SIZE_MAX))
            cr_assert_fail("round %d: the pipe did not close after the kill", round);
        close(fds[0]);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "round %d: the child ended by itself (status %d)", round, status);
        acked_per_round[round] = a.n - before;

        verify_store(&a, round);
    }
    size_t min = SIZE_MAX, max = 0;
    for (int r = 0; r < ROUNDS; r++) {
        min = acked_per_round[r] < min ? acked_per_round[r] : min;
        max = acked_per_round[r] > max ? acked_per_round[r] : max;
    }
    cr_log_info("%d rounds, %zu acknowledged builds (%zu to %zu a round)", ROUNDS, a.n, min, max);
    free(a.ids);
}
