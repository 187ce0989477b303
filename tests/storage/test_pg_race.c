/*
 * Two processes race overlapping builds on one model of a shared PostgreSQL store, as two hosts'
 * servers would (docs/postgresql.md, Tests): each round both submit the same range at once, and
 * exactly one build goes through; the other is refused by its overlap probe, which waited on the
 * model lock. At the end every range has exactly one job and one segment, and fsck is clean.
 * Which process won is recorded per round; both must have won some rounds (the race is real,
 * not one process always first).
 *
 * The racers are tests/storage/pg_racer.c, fork+exec'd with pipes: the test writes "go N" to
 * both, then reads both answers, so the two submissions of a round start together. Needs
 * QL_TEST_STORE=pg (storage_test_pg_race@pg) and skips otherwise.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RACER QL_BUILD_DIR "/tests/storage_pg_racer"
#define ROUNDS 1000

extern char **environ;

typedef struct {
    pid_t pid;
    FILE *in;  /* its stdin */
    FILE *out; /* its stdout */
} racer_t;

static void racer_start(racer_t *r, const char *dir, const char *url, const char *schema,
                        const char *model) {
    int to[2], from[2];
    cr_assert_eq(pipe2(to, O_CLOEXEC), 0); /* the other racer must not hold them */
    cr_assert_eq(pipe2(from, O_CLOEXEC), 0);
    pid_t pid = fork();
    /* No Criterion call in the child: with --full-stats even a passing assertion is a message
     * to the runner, which refuses one from a process it did not start. */
    if (pid == 0) {
        dup2(to[0], STDIN_FILENO);
        dup2(from[1], STDOUT_FILENO);
        close(to[0]);
        close(to[1]);
        close(from[0]);
        close(from[1]);
        char *argv[] = {(char *)RACER,  (char *)dir,   (char *)url,
                        (char *)schema, (char *)model, NULL};
        execve(RACER, argv, environ);
        _exit(127);
    }
    cr_assert_geq(pid, 0);
    close(to[0]);
    close(from[1]);
    r->pid = pid;
    r->in = fdopen(to[1], "w");
    r->out = fdopen(from[0], "r");
    cr_assert(r->in && r->out);
    setvbuf(r->in, NULL, _IONBF, 0);
}

/* Its answer to round n: the code of its submission. */
static int racer_answer(racer_t *r, int n) {
    char line[64];
    cr_assert_not_null(fgets(line, sizeof line, r->out), "racer %ld died in round %d", (long)r->pid,
                       n);
    int got, rc;
    cr_assert_eq(sscanf(line, "%d %d", &got, &rc), 2, "racer said '%s'", line);
    cr_assert_eq(got, n);
    return rc;
}

static void racer_stop(racer_t *r) {
    fclose(r->in); /* end of its stdin: it exits */
    int status;
    cr_assert_eq(waitpid(r->pid, &status, 0), r->pid);
    fclose(r->out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer exited with %#x", status);
}

typedef struct {
    unsigned per_range[ROUNDS];
    unsigned other;
} ranges_t;

static int count_job(const ql_job_t *j, void *arg) {
    ranges_t *r = arg;
    long long n = j->range_start / 1000;
    if (j->has_range && j->range_start == n * 1000 && j->range_end == n * 1000 + 1000 && n >= 0 &&
        n < ROUNDS)
        r->per_range[n]++;
    else
        r->other++;
    return 0;
}

Test(pg_race, two_processes_racing_overlapping_builds_make_one_job_per_range, .timeout = 120) {
    ql_test_require_backend("pg");
    char dir[256];
    ql_test_tmpdir(dir, sizeof dir, "ql_pgrace");
    ql_store_t *s;
    ql_test_store_open(dir, &s);
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o);
    ql_id_t m;
    ql_err_t err = {0};
    cr_assert_eq(ql_test_create_daily_model(s, "p", "m", &m, &err), 0, "%s", err.msg);
    char mid[QL_ID_STR_LEN + 1];
    ql_id_format(&m, mid);

    racer_t r[2];
    for (int k = 0; k < 2; k++)
        racer_start(&r[k], dir, o.url, o.pg_schema, mid);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char winner[ROUNDS + 1];
    unsigned wins[2] = {0, 0};
    for (int n = 0; n < ROUNDS; n++) {
        for (int k = 0; k < 2; k++)
            fprintf(r[k].in, "%d\n", n);
        int rc[2];
        for (int k = 0; k < 2; k++)
            rc[k] = racer_answer(&r[k], n);
        if ((rc[0] == 0) + (rc[1] == 0) != 1)
            cr_assert_fail("round %d: codes %s and %s, not exactly one winner", n,
                           ql_strerror(rc[0]), ql_strerror(rc[1]));
        int w = rc[0] == 0 ? 0 : 1;
        cr_assert_eq(rc[1 - w], QL_ESEGOVERLAP, "round %d: the loser got %s, not the overlap", n,
                     ql_strerror(rc[1 - w]));
        wins[w]++;
        winner[n] = (char)('a' + w);
    }
    winner[ROUNDS] = '\0';
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (int k = 0; k < 2; k++)
        racer_stop(&r[k]);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_log_info("%d rounds in %.1f s; process a won %u, b won %u: %s", ROUNDS, secs, wins[0],
                wins[1], winner);
    cr_assert(wins[0] > 0 && wins[1] > 0, "one process won every round (a %u, b %u)", wins[0],
              wins[1]);

    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, false, &t), 0);
    ranges_t *ranges = calloc(1, sizeof *ranges);
    cr_assert_eq(ql_job_foreach_model(t, &m, count_job, ranges), 0);
    uint64_t segs;
    cr_assert_eq(ql_segment_count(t, &m, &segs), 0);
    ql_txn_abort(t);
    cr_assert_eq(ranges->other, 0);
    for (int n = 0; n < ROUNDS; n++)
        cr_assert_eq(ranges->per_range[n], 1, "range %d has %u jobs", n, ranges->per_range[n]);
    free(ranges);
    cr_assert_eq(segs, ROUNDS);
    ql_test_assert_fsck_clean(s);
    ql_store_close(s);
}
