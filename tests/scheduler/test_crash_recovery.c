/*
 * Crash recovery (docs/design/jobs.md, Startup recovery and Orphans): a whole job server process
 * (tests/scheduler/node_driver.c) is killed with SIGKILL at random moments while it submits and
 * runs jobs, and restarted each time; in the end it runs until every job is final.
 *
 * Every step is a shell that appends "<step id> start <pid>" and "<step id> end <pid>" to one
 * shared log with a short random sleep in between, so the log is the history of every try of
 * every step. A try cut by a crash has a start without an end. The test checks:
 *   - nothing acknowledged is lost: every job the driver printed as ACK exists and SUCCEEDs,
 *     and every job in the store ends final;
 *   - no step ever ran twice at the same time: after each kill, every try left open in the log
 *     is reaped by this process (a child subreaper, so orphans of the dead server become its
 *     children) as killed by SIGKILL, which only PR_SET_PDEATHSIG (qilin-exec) sends at that
 *     point, BEFORE the next server starts; a "ROUND n" line is then appended, and no pid that
 *     died in a round ever writes a line after that round's marker;
 *   - recovery ran: the restarted servers logged interrupted jobs put back to READY;
 *   - fsck finds no violation.
 *
 * The kill moments come from a PRNG seeded with QL_CRASH_SEED (printed, to replay a failure).
 */
#include "storage/storage.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DRIVER QL_BUILD_DIR "/tests/node_driver"
#define ROUNDS 24
#define JOBS 60
#define MAX_PIDS 4096
#define MAX_ACKS 1024

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* ---- children reaped by this subreaper ---- */

typedef struct reaped {
    pid_t pid[MAX_PIDS];
    int status[MAX_PIDS];
    int n;
} reaped_t;

static reaped_t reaped;

static void reap_all(void) {
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (reaped.n < MAX_PIDS) {
            reaped.pid[reaped.n] = p;
            reaped.status[reaped.n++] = st;
        }
}

static int reaped_status(pid_t pid, bool *found) {
    for (int i = reaped.n - 1; i >= 0; i--)
        if (reaped.pid[i] == pid) {
            *found = true;
            return reaped.status[i];
        }
    *found = false;
    return 0;
}

/* ---- the shared log ---- */

typedef struct step_hist {
    char id[QL_ID_STR_LEN + 8];
    long open_pid; /* a try that started and has not ended, 0: none */
    int open_round;
    int starts, ends;
} step_hist_t;

typedef struct killed {
    long pid;
    char step[QL_ID_STR_LEN + 8];
    int round; /* it died before marker ROUND <round> */
} killed_t;

typedef struct history {
    step_hist_t *steps;
    size_t n, cap;
    killed_t killed[MAX_PIDS];
    int n_killed;
} history_t;

static step_hist_t *step_of(history_t *h, const char *id) {
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->steps[i].id, id) == 0)
            return &h->steps[i];
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 256;
        h->steps = realloc(h->steps, h->cap * sizeof *h->steps);
    }
    step_hist_t *s = &h->steps[h->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->id, sizeof s->id, "%s", id);
    return s;
}

/* The round before whose marker the try of step by pid was killed, or -1. (Keyed by step too:
 * a pid number may be reused by a later try of another step.) */
static int killed_round(const history_t *h, const char *step, long pid) {
    for (int i = 0; i < h->n_killed; i++)
        if (h->killed[i].pid == pid && strcmp(h->killed[i].step, step) == 0)
            return h->killed[i].round;
    return -1;
}

/*
 * Replays the log. Fails the test on a violation: two tries of one step open at once within a
 * round, an end from a pid that is not the step's open try, a line from a pid after the marker
 * of the round it was killed in. Returns the pids of the tries still open (out, up to cap).
 */
typedef struct open_try {
    long pid;
    const char *step;
} open_try_t;

static int replay(const char *path, history_t *h, open_try_t *open, int cap) {
    for (size_t i = 0; i < h->n; i++) {
        h->steps[i].open_pid = 0;
        h->steps[i].starts = h->steps[i].ends = 0;
    }
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int round = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n'))
            continue; /* a line being written */
        int r;
        if (sscanf(line, "ROUND %d", &r) == 1) {
            round = r;
            continue;
        }
        char id[64], what[16];
        long pid;
        cr_assert_eq(sscanf(line, "%63s %15s %ld", id, what, &pid), 3, "bad log line '%s'", line);
        int kr = killed_round(h, id, pid);
        cr_assert(kr < 0 || round < kr,
                  "pid %ld, killed with its server before ROUND %d, wrote '%s' in round %d", pid,
                  kr, id, round);
        step_hist_t *s = step_of(h, id);
        if (strcmp(what, "start") == 0) {
            if (s->open_pid) {
                /* The previous try was cut: only a crash may do that, and its process must have
                 * been found dead before this server started. */
                cr_assert_lt(s->open_round, round,
                             "step %s: try of pid %ld started while pid %ld's try of round %d "
                             "was still running",
                             id, pid, s->open_pid, s->open_round);
                cr_assert_geq(killed_round(h, id, s->open_pid), 0,
                              "step %s: the cut try of pid %ld was never seen dead", id,
                              s->open_pid);
            }
            s->open_pid = pid;
            s->open_round = round;
            s->starts++;
        } else {
            cr_assert_str_eq(what, "end", "bad log line '%s'", line);
            cr_assert_eq(s->open_pid, pid, "step %s: end from pid %ld, but the open try is %ld", id,
                         pid, s->open_pid);
            s->open_pid = 0;
            s->ends++;
        }
    }
    fclose(f);
    int n = 0;
    for (size_t i = 0; i < h->n; i++)
        if (h->steps[i].open_pid && n < cap)
            open[n++] = (open_try_t){h->steps[i].open_pid, h->steps[i].id};
    return n;
}

/* ---- the driver ---- */

typedef struct driver {
    pid_t pid;
    int out; /* its stdout */
    char buf[8192];
    size_t len;
    bool done;
    bool master; /* it said MASTER: it holds the lock and schedules */
} driver_t;

static char dir[64], data[128], log_path[128], templates_path[128];
static char acks[MAX_ACKS][QL_ID_STR_LEN + 1];
static int n_acks;

static void start_driver(driver_t *d, int round, bool final) {
    memset(d, 0, sizeof *d);
    const char *store[2] = {NULL, NULL};
    int n_store = ql_test_store_settings(data, store); /* before the fork: it may assert */
    int fds[2];
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/driver-%02d.err", dir, round);
    pid_t pid = fork(); /* no Criterion call may run in the child (see test_template.c) */
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL); /* the driver's libuv needs SIGCHLD */
        dup2(fds[1], STDOUT_FILENO);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (e >= 0)
            dup2(e, STDERR_FILENO);
        char jobs[16];
        snprintf(jobs, sizeof jobs, "%d", JOBS);
        const char *argv[24] = {
            DRIVER, "--data",        data, "--templates",       templates_path, "--jobs",
            jobs,   "--concurrency", "4",  "--submit-every-ms", "10",           "--batch",
            "2"};
        int n = 13;
        for (int i = 0; i < n_store; i++) {
            argv[n++] = "--set";
            argv[n++] = store[i];
        }
        if (final)
            argv[n++] = "--exit-when-done";
        argv[n] = NULL;
        execv(DRIVER, (char *const *)argv);
        _exit(127);
    }
    cr_assert_geq(pid, 0);
    close(fds[1]);
    d->pid = pid;
    d->out = fds[0];
    fcntl(d->out, F_SETFL, O_NONBLOCK);
}

/* Reads what the driver printed (for up to ms), recording ACKs. */
static void read_driver(driver_t *d, int ms) {
    struct pollfd p = {.fd = d->out, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return;
    for (;;) {
        ssize_t n = read(d->out, d->buf + d->len, sizeof d->buf - d->len - 1);
        if (n <= 0)
            break;
        d->len += (size_t)n;
        d->buf[d->len] = '\0';
        char *nl;
        while ((nl = strchr(d->buf, '\n'))) {
            *nl = '\0';
            char id[QL_ID_STR_LEN + 1];
            if (sscanf(d->buf, "ACK %36s", id) == 1 && n_acks < MAX_ACKS)
                memcpy(acks[n_acks++], id, sizeof id);
            if (strcmp(d->buf, "DONE") == 0)
                d->done = true;
            if (strcmp(d->buf, "MASTER") == 0)
                d->master = true;
            size_t used = (size_t)(nl + 1 - d->buf);
            memmove(d->buf, nl + 1, d->len - used + 1);
            d->len -= used;
        }
    }
}

static void append_marker(int round) {
    /* Every try cut in this round was found among the processes reaped in it; what was reaped
     * is forgotten now, so that a pid the kernel hands out again later (pids wrap around on a
     * busy machine) is never taken for a try that already died. */
    reaped.n = 0;
    FILE *f = fopen(log_path, "a");
    cr_assert_not_null(f);
    fprintf(f, "ROUND %d\n", round);
    fclose(f);
}

/* Waits (at most 50 ms, and not past deadline) for a child of ours to change state: SIGCHLD
 * is blocked and taken here, so none is missed between two looks. */
static void wait_child_event(int64_t deadline) {
    int64_t left = deadline - mono_ms();
    if (left <= 0)
        return;
    if (left > 50)
        left = 50;
    struct timespec ts = {0, left * 1000000};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigtimedwait(&set, NULL, &ts);
}

static int count_in_file(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

Test(crash_recovery, sigkill_at_random_moments_loses_nothing_and_never_runs_a_step_twice,
     .timeout = 300) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    cr_assert_eq(access("/bin/bash", X_OK), 0, "the steps need bash ($RANDOM)");
    ql_test_tmpdir(dir, sizeof dir, "ql_crashrec");
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log_path, sizeof log_path, "%s/steps.log", dir);
    snprintf(templates_path, sizeof templates_path, "%s/jobs.yaml", dir);
    FILE *t = fopen(templates_path, "w");
    cr_assert_not_null(t);
    fputs("templates:\n  INC_BUILD:\n    steps:\n", t);
    for (int i = 0; i < 3; i++)
        fprintf(t,
                "      - name: step %d\n"
                "        kind: shell\n"
                "        argv: [/bin/bash, -c, 'echo \"$QILIN_STEP_ID start $$\" >> \"$LOG\"; "
                "sleep 0.0$RANDOM; echo \"$QILIN_STEP_ID end $$\" >> \"$LOG\"']\n"
                "        env: {LOG: '%s'}\n",
                i, log_path);
    fclose(t);
    /* Orphans of a killed server become our children, so we can see how they died. */
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    cr_assert_eq(sigprocmask(SIG_BLOCK, &chld, NULL), 0);

    unsigned seed =
        getenv("QL_CRASH_SEED") ? (unsigned)atoi(getenv("QL_CRASH_SEED")) : (unsigned)time(NULL);
    fprintf(stderr, "crash_recovery: QL_CRASH_SEED=%u\n", seed);
    srand(seed);

    history_t h = {0};
    int cut_tries = 0;
    for (int round = 0; round < ROUNDS; round++) {
        driver_t d;
        start_driver(&d, round, false);
        /* Anything from right after start-up to well into the run: one round in six at a
         * moment counted from the start (often during start-up or recovery), the others at a
         * moment counted from when the driver schedules, so that on a slow machine or store
         * (start-up takes longer on PostgreSQL under load) kills still hit running steps. */
        int64_t kill_at = mono_ms() + 20 + rand() % 380;
        if (rand() % 6 != 0) {
            int64_t deadline = mono_ms() + 15000;
            while (!d.master && mono_ms() < deadline)
                read_driver(&d, (int)(deadline - mono_ms()));
            cr_assert(d.master, "round %d: the driver never became the master", round);
            kill_at = mono_ms() + rand() % 400;
        }
        while (mono_ms() < kill_at)
            read_driver(&d, (int)(kill_at - mono_ms()));
        cr_assert_eq(kill(d.pid, SIGKILL), 0);
        int st;
        cr_assert_eq(waitpid(d.pid, &st, 0), d.pid);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "round %d: the driver exited %d",
                  round, st);
        read_driver(&d, 0);
        close(d.out);

        /* Every try left open must be dead, killed by SIGKILL, before the next server runs. */
        int64_t deadline = mono_ms() + 10000;
        for (;;) {
            reap_all();
            open_try_t open[64];
            int n = replay(log_path, &h, open, 64), pending = 0;
            for (int i = 0; i < n; i++) {
                if (killed_round(&h, open[i].step, open[i].pid) >= 0)
                    continue; /* cut in an earlier round, its step not retried yet */
                bool found;
                int s = reaped_status((pid_t)open[i].pid, &found);
                if (!found) {
                    pending++;
                    continue;
                }
                cr_assert(WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL,
                          "round %d: the cut try of pid %ld ended with status %d, not SIGKILL",
                          round, open[i].pid, s);
                cr_assert_lt(h.n_killed, MAX_PIDS);
                killed_t *k = &h.killed[h.n_killed++];
                k->pid = open[i].pid;
                snprintf(k->step, sizeof k->step, "%s", open[i].step);
                k->round = round + 1;
                cut_tries++;
            }
            if (pending == 0)
                break;
            cr_assert_lt(mono_ms(), deadline, "round %d: %d cut tries still alive", round, pending);
            wait_child_event(deadline);
        }
        append_marker(round + 1);
    }

    /* The last run goes on until every job is final. */
    driver_t d;
    start_driver(&d, ROUNDS, true);
    int64_t deadline = mono_ms() + 120000;
    while (!d.done && mono_ms() < deadline)
        read_driver(&d, 100);
    cr_assert(d.done, "the last server did not finish the jobs");
    int st;
    cr_assert_eq(waitpid(d.pid, &st, 0), d.pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the last driver exited with %d", st);
    close(d.out);
    reap_all();
    open_try_t open[64];
    int still_open = replay(log_path, &h, open, 64);
    for (int i = 0; i < still_open; i++)
        cr_assert_geq(killed_round(&h, open[i].step, open[i].pid), 0,
                      "step %s: the try of pid %ld never ended", open[i].step, open[i].pid);

    /* The store: every acknowledged job exists and succeeded; every job is final. */
    ql_store_opts_t so;
    ql_test_store_opts(data, &so); /* the backend under test, the drivers' store */
    so.map_size = 1u << 30;
    ql_store_t *store;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &store, &err), 0, "%s", err.msg);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, false, &txn), 0);
    for (int i = 0; i < n_acks; i++) {
        ql_id_t id;
        cr_assert_eq(ql_id_parse(acks[i], &id), 0);
        ql_job_t j;
        cr_assert_eq(ql_job_get(txn, &id, 0, &j), 0, "acknowledged job %s is lost", acks[i]);
        cr_assert_eq(j.state, QL_SUCCEED, "job %s is %s", acks[i], ql_state_name(j.state));
        for (uint32_t k = 0; k < j.n_steps; k++) {
            char sid[QL_ID_STR_LEN + 8];
            ql_step_id_format(&id, k, sid);
            step_hist_t *s = step_of(&h, sid);
            cr_assert_geq(s->ends, 1, "step %s of a SUCCEED job never finished a try", sid);
        }
        ql_job_free(&j);
    }
    uint64_t all, succeed;
    cr_assert_eq(ql_job_count(txn, NULL, 0xffu, &all), 0);
    cr_assert_eq(ql_job_count(txn, NULL, 1u << QL_SUCCEED, &succeed), 0);
    ql_txn_abort(txn);
    cr_assert_eq(all, JOBS);
    cr_assert_eq(succeed, JOBS, "every job reaches SUCCEED");
    cr_assert_geq((uint64_t)n_acks, JOBS / 2, "most submissions were acknowledged");
    ql_fsck_report_t r = {0};
    cr_assert_eq(ql_store_fsck(store, NULL, &r), 0);
    if (r.violations)
        ql_store_fsck(store, stderr, &r);
    cr_assert_eq(r.violations, 0, "fsck found %llu violations", (unsigned long long)r.violations);
    ql_store_close(store);

    /* Recovery ran in the restarted servers (and killed what was left of cut steps' groups). */
    int recovered = 0, killed_groups = 0;
    for (int round = 1; round <= ROUNDS; round++) {
        char p[160];
        snprintf(p, sizeof p, "%s/driver-%02d.err", dir, round);
        recovered += count_in_file(p, "recovered interrupted jobs");
        killed_groups += count_in_file(p, "killed the process group of an interrupted step");
    }
    fprintf(stderr,
            "crash_recovery: %d rounds, %d acknowledged, %d tries cut by a kill, %d recoveries, "
            "%d process groups killed by recovery\n",
            ROUNDS, n_acks, cut_tries, recovered, killed_groups);
    cr_assert_gt(cut_tries, 0, "no kill ever hit a running step: the test proved nothing");
    cr_assert_gt(recovered, 0, "no restarted server recovered an interrupted job");
    free(h.steps);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
