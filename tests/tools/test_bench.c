/*
 * `qilin bench`, end to end: the real binary runs each benchmark at a tiny size (well under a
 * second each) in a fresh directory, and must exit 0, name its figures and leave nothing
 * behind; unknown benchmarks and bad options are usage errors (exit 2). The figures themselves
 * are not checked: at these sizes and on a shared machine they mean nothing.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"

#define QILIN QL_BUILD_DIR "/tools/qilin"
#define RUN_DEADLINE_MS 60000

typedef struct run {
    int status; /* exit code, or 128 + signal */
    char *out, *err;
} run_t;

/* g_dir (the benchmark's --dir, which must end empty) is inside the test's own g_tmp, next to
 * the files that catch qilin's output: everything is removed with g_tmp. */
static char g_tmp[256], g_dir[300];

static void setup(void) {
    ql_test_tmpdir(g_tmp, sizeof g_tmp, "ql-test-bench");
    snprintf(g_dir, sizeof g_dir, "%s/stores", g_tmp);
    cr_assert_eq(mkdir(g_dir, 0700), 0, "mkdir %s: %s", g_dir, strerror(errno));
}

static void teardown(void) {
    ql_test_rm_tree(g_tmp);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Runs qilin with args (NULL-terminated, without argv[0]); stdout and stderr go to files in
 * g_tmp (read back afterwards). Waits on a pidfd with a deadline; fails the test past it. */
static void run(run_t *r, const char *const *args) {
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    cr_assert_not_null(argv);
    argv[0] = (char *)QILIN;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    char out_path[300], err_path[300];
    snprintf(out_path, sizeof out_path, "%s/qilin.out", g_tmp);
    snprintf(err_path, sizeof err_path, "%s/qilin.err", g_tmp);
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert(fo >= 0 && fe >= 0);
    /* No assertion between fork and exec (Criterion's messages must come from the test). */
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        execv(QILIN, argv);
        _exit(127);
    }
    cr_assert(pid > 0);
    close(fo);
    close(fe);
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    cr_assert(pfd >= 0, "pidfd_open: %s", strerror(errno));
    int64_t deadline = ql_test_mono_ms() + RUN_DEADLINE_MS;
    for (;;) {
        int64_t left = deadline - ql_test_mono_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            cr_assert_fail("qilin bench %s did not end within %d ms", n > 1 ? args[1] : "",
                           RUN_DEADLINE_MS);
        }
        struct pollfd p = {.fd = pfd, .events = POLLIN};
        int pr = poll(&p, 1, (int)left);
        if (pr > 0)
            break;
        cr_assert(pr == 0 || errno == EINTR, "poll: %s", strerror(errno));
    }
    close(pfd);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = slurp(out_path);
    r->err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    free(argv);
}

static void run_free(run_t *r) {
    free(r->out);
    free(r->err);
}

#define RUN(r, ...) run((r), (const char *const[]){__VA_ARGS__, NULL})

#define EXPECT_EXIT(r, code)                                                                       \
    cr_assert_eq((r)->status, (code), "exit %d, expected %d\nstdout:\n%s\nstderr:\n%s",            \
                 (r)->status, (code), (r)->out, (r)->err)
#define EXPECT_IN(hay, needle)                                                                     \
    cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in:\n%s", (needle), (hay))

/* The benchmark removed every store it made under g_dir. */
static void expect_dir_empty(void) {
    DIR *d = opendir(g_dir);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        cr_assert(!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."), "left behind: %s/%s", g_dir,
                  e->d_name);
    closedir(d);
}

TestSuite(bench, .init = setup, .fini = teardown);

Test(bench, help_lists_every_benchmark) {
    run_t r;
    RUN(&r, "bench", "--help");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "usage: qilin bench BENCHMARK");
    EXPECT_IN(r.out, "  store ");
    EXPECT_IN(r.out, "  dispatch ");
    EXPECT_IN(r.out, "  jobs ");
    EXPECT_IN(r.out, "  retention ");
    EXPECT_IN(r.out, "bash scripts/bench.sh rest");
    run_free(&r);

    static const char *const names[] = {"store", "dispatch", "jobs", "retention"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        RUN(&r, "bench", names[i], "--help");
        EXPECT_EXIT(&r, 0);
        char want[64];
        snprintf(want, sizeof want, "usage: qilin bench %s [", names[i]);
        EXPECT_IN(r.out, want);
        run_free(&r);
    }
}

Test(bench, store_tiny) {
    run_t r;
    RUN(&r, "bench", "store", "--dir", g_dir, "--models", "10", "--segments-per-model", "3",
        "--jobs", "20", "--seconds", "0.05", "--queries", "20", "--tx-models", "3");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "builds rotating over 3 models");
    EXPECT_IN(r.out, "builds/s");
    EXPECT_IN(r.out, "group commit (writer)");
    EXPECT_IN(r.out, "txn per submission");
    EXPECT_IN(r.out, "overlap query on 10 models x 3 segments");
    EXPECT_IN(r.out, "open + first read");
    EXPECT_IN(r.out, "0 violations");
    EXPECT_IN(r.out, "peak RSS of (c)");
    run_free(&r);
    expect_dir_empty();
}

Test(bench, dispatch_tiny) {
    run_t r;
    RUN(&r, "bench", "dispatch", "--dir", g_dir, "--projects", "1", "--models-per-project", "4",
        "--segments", "2", "--scans", "1", "--map-gib", "1");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "1 projects x 4 models = 4 models");
    EXPECT_IN(r.out, "(a) warm");
    EXPECT_IN(r.out, "(b) cold");
    EXPECT_IN(r.out, "(c) fully cold");
    EXPECT_IN(r.out, "(d) after a metadata change");
    EXPECT_IN(r.out, "counted only by qilin-bench-dispatch");
    run_free(&r);
    expect_dir_empty();
}

Test(bench, jobs_tiny) {
    run_t r;
    RUN(&r, "bench", "jobs", "--dir", g_dir, "--latency-n", "3", "--jobs", "10", "--shell-jobs",
        "3", "--finished", "10", "--interrupted", "2", "--concurrency", "2");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "(a) idle dispatch latency");
    EXPECT_IN(r.out, "jobs/s");
    EXPECT_IN(r.out, "transitions/s");
    EXPECT_IN(r.out, "(c) shell-step throughput");
    EXPECT_IN(r.out, "all 2 resumed jobs SUCCEED");
    run_free(&r);
    expect_dir_empty();
}

Test(bench, unknown_benchmark_exits_2) {
    run_t r;
    RUN(&r, "bench", "nosuch");
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err,
              "qilin bench: unknown benchmark 'nosuch' (one of: store, dispatch, jobs, retention");
    cr_assert_eq(r.out[0], '\0', "stdout: %s", r.out);
    run_free(&r);

    RUN(&r, "bench");
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err, "usage: qilin bench");
    run_free(&r);

    RUN(&r, "bench", "rest");
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err, "bash scripts/bench.sh rest");
    run_free(&r);
}

Test(bench, bad_options_exit_2) {
    static const char *const cases[][3] = {
        {"store", "--models", "many"},  {"store", "--tx-models", "0"},
        {"dispatch", "--scans", "-1"},  {"jobs", "--nosuch", "1"},
        {"retention", "--models", "0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_t r;
        RUN(&r, "bench", cases[i][0], cases[i][1], cases[i][2], "--dir", g_dir);
        EXPECT_EXIT(&r, 2);
        EXPECT_IN(r.err, "bad argument");
        char want[64];
        snprintf(want, sizeof want, "usage: qilin bench %s", cases[i][0]);
        EXPECT_IN(r.err, want);
        run_free(&r);
    }
    expect_dir_empty();
}
