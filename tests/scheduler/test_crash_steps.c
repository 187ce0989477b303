/*
 * A step's processes after a crash (engine/ql_proc.h, Markers): a whole job server process
 * (tests/scheduler/node_driver.c) is SIGKILLed while a shell step runs, and restarted.
 *
 * The step is a shell script that starts two grandchildren, each holding an exclusive flock on
 * a file for its whole life: one stays in the step's process group, the other leaves it with
 * setsid, as a wrapper's JVM or a daemonising tool may. At its start a try checks that nobody
 * holds either lock, and a grandchild that cannot take its lock logs OVERLAP: two tries of the
 * step alive at once are seen by the step itself, at the instant they overlap. The test also
 * records every try (host, pid, when it was seen to start and to be gone) and asserts that when
 * a try starts, no process of an earlier try is alive.
 *
 * This process is a child subreaper, so the orphans of a killed server become its children: it
 * reaps them and, at the end, kills whatever descends from it.
 */
#include "engine/ql_proc.h"
#include "storage/storage.h"
#include "tests/common/loop_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#define ROUNDS 50
#define MAX_TRIES (ROUNDS + 1)
#define MAX_CHILDREN 4
#define DEADLINE_MS 15000

static void reap_all(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* /proc/PID/stat: the start time (field 22) and the parent (field 4); 0 when pid is not a live
 * process (gone, or a zombie: it no longer runs). */
static unsigned long long proc_start(pid_t pid, pid_t *ppid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    char state;
    int pp;
    unsigned long long start = 0;
    if (sscanf(p + 2,
               "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
               &state, &pp, &start) != 3 ||
        state == 'Z' || state == 'X')
        return 0;
    if (ppid)
        *ppid = pp;
    return start;
}

/* Kills everything that descends from this process (a subreaper:
 * a killed process's children come to us and are killed on a later pass). Bounded. */
static void kill_descendants(void) {
    int64_t deadline = ql_test_mono_ms() + 5000;
    for (int pass = 0; pass < 200 && ql_test_mono_ms() < deadline; pass++) {
        reap_all();
        int found = 0;
        DIR *d = opendir("/proc");
        if (!d)
            return;
        struct dirent *de;
        while ((de = readdir(d))) {
            pid_t pid = (pid_t)atoi(de->d_name), pp = 0;
            if (pid > 1 && proc_start(pid, &pp) && pp == getpid()) {
                kill(pid, SIGKILL);
                found++;
            }
        }
        closedir(d);
        if (!found)
            break;
        struct timespec ms = {0, 2000000}; /* let the killed exit before the next look */
        nanosleep(&ms, NULL);
    }
    reap_all();
}

/* ---- the world: a directory, a template, the driver ---- */

static char dir[64], data[128], log_path[128], templates_path[128], script[128];

static void make_world(const char *name, const char *step_body, const char *more_env) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "ql_%s", name);
    ql_test_tmpdir(dir, sizeof dir, prefix);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(log_path, sizeof log_path, "%s/steps.log", dir);
    snprintf(templates_path, sizeof templates_path, "%s/jobs.yaml", dir);
    snprintf(script, sizeof script, "%s/step.sh", dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fputs(step_body, f);
    fclose(f);
    f = fopen(templates_path, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "templates:\n  INC_BUILD:\n    steps:\n"
            "      - name: hold\n"
            "        kind: shell\n"
            "        argv: [/bin/sh, '%s']\n"
            "        env: {D: '%s'%s}\n",
            script, dir, more_env);
    fclose(f);
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
}

/* The running driver and the pid-reuse sleeper, for the teardown. */
static pid_t driver_pid, sleeper_pid;

/* Teardown, also after a failed assertion: no process or file of the test is left. */
static void remove_world(void) {
    if (driver_pid > 0) {
        kill(driver_pid, SIGKILL);
        waitpid(driver_pid, NULL, 0);
        driver_pid = 0;
    }
    if (sleeper_pid > 0) {
        kill(sleeper_pid, SIGKILL);
        waitpid(sleeper_pid, NULL, 0);
        sleeper_pid = 0;
    }
    kill_descendants();
    if (dir[0])
        ql_test_rm_tree(dir);
    dir[0] = '\0';
}

/* The driver of round `round`, with configuration `set` (KEY=VALUE, or NULL). */
static pid_t start_driver_set(int round, const char *set) {
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/driver-%02d.err", dir, round);
    pid_t pid = fork(); /* no Criterion call may run in the child */
    if (pid == 0) {
        int o = open("/dev/null", O_WRONLY);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o >= 0)
            dup2(o, STDOUT_FILENO);
        if (e >= 0)
            dup2(e, STDERR_FILENO);
        execl(DRIVER, DRIVER, "--data", data, "--templates", templates_path, "--jobs", "1",
              "--concurrency", "1", set ? "--set" : (char *)NULL, set, (char *)NULL);
        _exit(127);
    }
    cr_assert_geq(pid, 0);
    driver_pid = pid;
    return pid;
}

static pid_t start_driver(int round) {
    return start_driver_set(round, NULL);
}

static void kill_driver(pid_t pid) {
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    driver_pid = 0;
}

static void stop_driver(pid_t pid) {
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    driver_pid = 0;
}

/* ---- the log ---- */

typedef struct try {
    pid_t pid; /* the step's shell */
    unsigned long long start_ticks;
    char host[64];
    int64_t seen_start; /* ms: the first look that found its start line */
    int64_t checked;    /* ms: the look after that, which found every earlier try gone */
    int64_t gone_by;    /* ms: the first look that found all its processes gone, 0: not yet */
    pid_t child[MAX_CHILDREN];
    unsigned long long child_ticks[MAX_CHILDREN];
    int n_children;
}
try_t;

typedef struct hist {
    try_t tries[MAX_TRIES];
    int n;
    int checked_upto; /* tries checked by check_earlier_gone */
    int overlaps;
    char overlap[256];
} hist_t;

/* Reads the log anew: "start PID HOST", "child PID PARENT", "OVERLAP ...". New tries and
 * children get their start time now, while they live. */
static void read_log(hist_t *h) {
    FILE *f = fopen(log_path, "r");
    if (!f)
        return;
    char line[256];
    int n = 0;
    h->overlaps = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n'))
            break; /* being written */
        long pid, parent;
        char host[64];
        if (sscanf(line, "start %ld %63s", &pid, host) == 2) {
            cr_assert_lt(n, MAX_TRIES, "more tries than rounds");
            try_t *t = &h->tries[n++];
            if (n > h->n) {
                memset(t, 0, sizeof *t);
                t->pid = (pid_t)pid;
                t->start_ticks = proc_start(t->pid, NULL);
                snprintf(t->host, sizeof t->host, "%s", host);
                t->seen_start = ql_test_mono_ms();
                h->n = n;
            }
        } else if (sscanf(line, "child %ld %ld", &pid, &parent) == 2) {
            for (int i = 0; i < h->n; i++) {
                try_t *t = &h->tries[i];
                if (t->pid != parent)
                    continue;
                bool known = false;
                for (int c = 0; c < t->n_children; c++)
                    known |= t->child[c] == pid;
                if (!known && t->n_children < MAX_CHILDREN) {
                    t->child[t->n_children] = (pid_t)pid;
                    t->child_ticks[t->n_children++] = proc_start((pid_t)pid, NULL);
                }
            }
        } else if (strncmp(line, "OVERLAP", 7) == 0) {
            if (!h->overlaps++)
                snprintf(h->overlap, sizeof h->overlap, "%s", line);
        }
    }
    fclose(f);
}

/* The first live process of try t (its shell or a child, the same process as recorded), or 0. */
static pid_t try_alive(const try_t *t) {
    if (t->start_ticks && proc_start(t->pid, NULL) == t->start_ticks)
        return t->pid;
    for (int c = 0; c < t->n_children; c++)
        if (t->child_ticks[c] && proc_start(t->child[c], NULL) == t->child_ticks[c])
            return t->child[c];
    return 0;
}

/* Marks the tries before `upto` whose processes are all gone. */
static void note_ends(hist_t *h, int upto) {
    for (int i = 0; i < upto; i++)
        if (!h->tries[i].gone_by && !try_alive(&h->tries[i]))
            h->tries[i].gone_by = ql_test_mono_ms();
}

/* Try `round` has been seen started: every earlier one must be gone now. The new try is still
 * running (it never ends on its own), so a live earlier process is an overlap. */
static void check_earlier_gone(hist_t *h, int round) {
    try_t *now = &h->tries[round];
    now->checked = ql_test_mono_ms();
    for (int i = 0; i < round; i++) {
        pid_t p = try_alive(&h->tries[i]);
        cr_assert_eq(p, 0, "round %d: try %d (pid %d) started while pid %d of try %d is alive",
                     round, round, now->pid, p, i);
        if (!h->tries[i].gone_by)
            h->tries[i].gone_by = now->checked;
    }
    cr_assert_eq(h->overlaps, 0, "round %d: %s", round, h->overlap);
}

/*
 * One try, the same in both tests: "start" comes after both holders are started, and each
 * holder logs its pid with the step's. `flock -n F true` at the start fails while anyone holds
 * F: an earlier try's holder still alive.
 */
static const char hold_script[] =
    "if ! flock -n \"$D/lock-group\" true || ! flock -n \"$D/lock-session\" true; then\n"
    "    echo \"OVERLAP $$: a lock is held as the try starts\" >> \"$D/steps.log\"\n"
    "fi\n"
    "sh -c 'echo \"child $$ $1\" >> \"$D/steps.log\"; flock -n \"$D/lock-group\" sleep 600 ||\n"
    "    echo \"OVERLAP $$: the group lock is held\" >> \"$D/steps.log\"' sh $$ &\n"
    "setsid sh -c 'echo \"child $$ $1\" >> \"$D/steps.log\"; flock -n \"$D/lock-session\" sleep "
    "600 "
    "||\n"
    "    echo \"OVERLAP $$: the session lock is held\" >> \"$D/steps.log\"' sh $$ &\n"
    "echo \"start $$ $(uname -n)\" >> \"$D/steps.log\"\n"
    "wait\n";

/* ---- bystanders: processes the server must never kill ---- */

#define N_SENTINELS 3

typedef struct sentinel {
    pid_t pid;
    unsigned long long ticks;
    const char *what;
} sentinel_t;

/* Starts `argv` as a child of this process (the subreaper; remove_world kills it) with env
 * (NULL-terminated) added. No Criterion call in the child. */
static void start_sentinel(sentinel_t *s, const char *what, bool new_session, const char *env) {
    pid_t pid = fork();
    if (pid == 0) {
        if (new_session)
            setsid();
        if (env)
            putenv((char *)env);
        int o = open("/dev/null", O_RDWR);
        if (o >= 0) {
            dup2(o, STDIN_FILENO);
            dup2(o, STDOUT_FILENO);
        }
        execl("/bin/sleep", "sleep", "600", (char *)NULL);
        _exit(127);
    }
    cr_assert_gt(pid, 0);
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    char exe[64], target[64] = "";
    snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
    /* Until it is sleep, not the fork of this test. */
    while (readlink(exe, target, sizeof target - 1) <= 0 || !strstr(target, "sleep")) {
        memset(target, 0, sizeof target);
        cr_assert_lt(ql_test_mono_ms(), deadline, "the %s never started", what);
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    *s = (sentinel_t){.pid = pid, .ticks = proc_start(pid, NULL), .what = what};
    cr_assert_gt(s->ticks, 0);
}

static void assert_sentinels_alive(const sentinel_t *s, int round) {
    for (int i = 0; i < N_SENTINELS; i++)
        cr_assert_eq(proc_start(s[i].pid, NULL), s[i].ticks,
                     "round %d: the %s (pid %d) was killed; the server may kill only its steps' "
                     "processes",
                     round, s[i].what, (int)s[i].pid);
}

/* Polls the log until try `want` has started (and checks every earlier try is gone then), or
 * until `until_ms` passes when it is not 0. Returns whether try `want` started. */
/* The last bytes of round's driver log, for a failure message (static buffer). */
static const char *driver_log_tail(int round) {
    static char tail[2048];
    char path[160];
    snprintf(path, sizeof path, "%s/driver-%02d.err", dir, round);
    tail[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return "(no log)";
    if (fseek(f, -(long)(sizeof tail - 1), SEEK_END) != 0)
        rewind(f);
    size_t n = fread(tail, 1, sizeof tail - 1, f);
    tail[n] = '\0';
    fclose(f);
    return tail;
}

/* A loaded machine (the whole suite on 2 cores) can make a server's start and recovery slow: a
 * generous bound, and the server's log in the message when it is passed. */
#define TRY_DEADLINE_MS 45000

static bool wait_try(hist_t *h, int want, int64_t until_ms, const char *round_what, int round) {
    int64_t deadline = ql_test_mono_ms() + TRY_DEADLINE_MS;
    for (;;) {
        reap_all();
        note_ends(h, h->n);
        read_log(h);
        /* A late start line of a killed server's try counts as a try too: each one seen must
         * find every earlier one gone. */
        while (h->checked_upto < h->n)
            check_earlier_gone(h, h->checked_upto++);
        if (h->n > want)
            return true;
        if (until_ms && ql_test_mono_ms() >= until_ms)
            return false;
        if (ql_test_mono_ms() >= deadline)
            cr_assert_fail("round %d: %s; the server's log ends:\n%s", round, round_what,
                           driver_log_tail(round));
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
}

/*
 * 50 rounds: a server starts, recovers the interrupted try and runs the step again, and is
 * SIGKILLed at a random moment (QL_CRASH_SEED, printed, replays them): most rounds a random 0 to
 * 40 ms after the try's start line (while its holders start up or hold), one in four at a random
 * moment between the server's start and the try's expected start (during recovery, the marker's
 * commit, the fork or the exec). Three bystanders of the server's user live through all of it:
 * a session leader, a process in this test's group, and one carrying a step marker of a try that
 * was never the server's. None may be killed.
 */
Test(crash_steps, sigkill_at_random_moments_around_step_starts_never_overlaps_two_tries,
     .timeout = 300, .fini = remove_world) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    cr_assert_eq(access("/usr/bin/flock", X_OK) == 0 || access("/bin/flock", X_OK) == 0, 1,
                 "the step needs flock(1)");
    make_world("crashsteps", hold_script, "");
    unsigned seed =
        getenv("QL_CRASH_SEED") ? (unsigned)atoi(getenv("QL_CRASH_SEED")) : (unsigned)time(NULL);
    fprintf(stderr, "crash_steps: QL_CRASH_SEED=%u\n", seed);
    srand(seed);
    static sentinel_t sentinels[N_SENTINELS];
    start_sentinel(&sentinels[0], "session leader", true, NULL);
    start_sentinel(&sentinels[1], "process in the test's group", false, NULL);
    start_sentinel(&sentinels[2], "process with a foreign step marker", true,
                   "QILIN_STEP_TOKEN=0123456789abcdef0123456789abcdef");
    static hist_t h;
    memset(&h, 0, sizeof h);
    int64_t t0 = ql_test_mono_ms(), start_ms = 50; /* server start -> try start, last seen */
    int early = 0, early_before_start = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int want = h.n;
        int64_t began = ql_test_mono_ms();
        pid_t d = start_driver(round);
        if (round > 0 && rand() % 4 == 0) {
            early++;
            int64_t at = began + rand() % (start_ms + 1);
            early_before_start += !wait_try(&h, want, at, "waiting to kill", round);
        } else {
            wait_try(&h, want, 0, "the step's next try never started", round);
            start_ms = ql_test_mono_ms() - began;
            int64_t kill_at = ql_test_mono_ms() + rand() % 41;
            while (ql_test_mono_ms() < kill_at)
                read_log(&h);
        }
        kill_driver(d);
        assert_sentinels_alive(sentinels, round);
    }
    /* One more server recovers the last try; then nothing of any try may be left. */
    pid_t d = start_driver(ROUNDS);
    wait_try(&h, h.n, 0, "the last try never started", ROUNDS);
    stop_driver(d);
    assert_sentinels_alive(sentinels, ROUNDS);

    /* The record of every try: one host, distinct live pids, each try gone before the next. */
    int with_children = 0, seen_alive = 0;
    for (int i = 0; i + 1 < h.n; i++) {
        const try_t *a = &h.tries[i], *b = &h.tries[i + 1];
        cr_assert_str_eq(a->host, h.tries[0].host);
        cr_assert_neq(a->pid, b->pid);
        /* A try killed right after its start line may be gone before this process read the
         * line (its start time is then unknown, 0); it cannot overlap a later try, which the
         * liveness checks below confirm. Start times are in clock ticks (10 ms): a try that a
         * quick kill and restart replaced within one tick has the same. */
        seen_alive += a->start_ticks > 0;
        if (a->start_ticks && b->start_ticks)
            cr_assert_geq(b->start_ticks, a->start_ticks,
                          "try %d started before try %d (ticks %llu < %llu)", i + 1, i,
                          b->start_ticks, a->start_ticks);
        cr_assert_gt(a->gone_by, 0, "try %d was never seen gone", i);
        cr_assert_leq(a->seen_start, a->gone_by);
        cr_assert_leq(a->gone_by, b->checked, "try %d outlived the start of try %d", i, i + 1);
        with_children += a->n_children == 2;
    }
    fprintf(stderr,
            "crash_steps: %d rounds, %d tries in %lld ms, %d tries seen with both holders "
            "started, %d seen alive; %d early kills, %d of them before the try's start line\n",
            ROUNDS, h.n, (long long)(ql_test_mono_ms() - t0), with_children, seen_alive, early,
            early_before_start);
    cr_assert_geq(h.n, ROUNDS - early + 1, "every round that waited for its try had one");
    cr_assert_gt(seen_alive, (ROUNDS - early) / 2, "most tries were seen alive");
    cr_assert_gt(with_children, (ROUNDS - early) / 2,
                 "most kills hit a try with both holders running");
}

/* ---- pid reuse ---- */

static int first_running_cb(const ql_id_t *id, int priority, int64_t create_time, void *arg) {
    (void)priority;
    (void)create_time;
    *(ql_id_t *)arg = *id;
    return 1; /* the first is enough */
}

/* The one RUNNING job's step as stored into *out (freed by the caller); false while there is
 * none. */
static bool running_step(ql_store_t *store, ql_step_t *out) {
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, false, &txn), 0);
    ql_id_t id = {0};
    bool found = false;
    ql_job_foreach_state_ref(txn, QL_RUNNING, first_running_cb, &id);
    if (!ql_id_is_zero(&id) && ql_step_get(txn, &id, 0, out) == 0) {
        found = out->state == QL_RUNNING;
        if (!found)
            ql_step_free(out);
    }
    ql_txn_abort(txn);
    return found;
}

/* The recorded process group of the one RUNNING job's step, 0 while none is recorded. */
static int recorded_pgid(ql_store_t *store) {
    ql_step_t st;
    if (!running_step(store, &st))
        return 0;
    int pgid = st.pgid;
    ql_step_free(&st);
    return pgid;
}

/* Forks `setsid sleep 600` as the process with pid `want` (through ns_last_pid). Tests run
 * in parallel, so another process may hold the number for a while or take it between the
 * write and the fork: the number is waited for (polled, 20 s deadline) and tried again.
 * Returns its pid, or 0 (then `holder` says what held the number at the end). */
static pid_t sleeper_with_pid(pid_t want, char *holder, size_t holder_size) {
    int64_t deadline = ql_test_mono_ms() + 20000;
    snprintf(holder, holder_size, "nothing");
    while (ql_test_mono_ms() < deadline) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)want);
        FILE *held = fopen(path, "r");
        if (held) {
            size_t n = fread(holder, 1, holder_size - 1, held);
            holder[n] = '\0';
            fclose(held);
            reap_all();
            struct timespec tick = {0, 5000000};
            nanosleep(&tick, NULL);
            continue;
        }
        FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
        if (!f)
            return 0;
        fprintf(f, "%d", (int)want - 1);
        fclose(f);
        pid_t pid = fork();
        if (pid == 0) {
            setsid();
            execl("/bin/sleep", "sleep", "600", (char *)NULL);
            _exit(127);
        }
        if (pid == want)
            return pid;
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
    }
    return 0;
}

Test(crash_steps, recovery_leaves_a_process_that_reused_the_recorded_pgid_alone, .timeout = 60,
     .fini = remove_world) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    if (geteuid() != 0 || access("/proc/sys/kernel/ns_last_pid", W_OK) != 0)
        cr_skip_test("choosing the next pid (/proc/sys/kernel/ns_last_pid) needs root");
    make_world("pidreuse", hold_script, "");
    static hist_t h;
    memset(&h, 0, sizeof h);

    /* A try runs and its group is recorded; then its server dies. */
    pid_t d = start_driver(0);
    ql_store_opts_t so = {.path = data, .map_size = 1u << 30};
    ql_store_t *store = NULL;
    ql_err_t err = {0};
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    int pgid = 0;
    while (!pgid) {
        read_log(&h);
        if (h.n && !store)
            cr_assert_eq(ql_store_open(&so, &store, &err), 0, "%s", err.msg);
        if (store)
            pgid = recorded_pgid(store);
        cr_assert_lt(ql_test_mono_ms(), deadline, "the step's process group was never recorded");
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    ql_store_close(store);
    cr_assert_eq(pgid, h.tries[0].pid, "the step leads its group");
    kill_driver(d);

    /* Its processes die as if on their own (nothing of the step is left to find), and an
     * unrelated session leader gets the recorded number. */
    kill_descendants();
    char holder[256];
    pid_t sleeper = sleeper_pid = sleeper_with_pid(pgid, holder, sizeof holder);
    cr_assert_gt(sleeper, 0, "could not start a process with pid %d in 20 s (held by: %s)", pgid,
                 holder);

    d = start_driver(1);
    deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (h.n < 2) {
        read_log(&h);
        cr_assert_lt(ql_test_mono_ms(), deadline, "the step's next try never started");
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    /* Recovery is over: the next try runs. The sleeper must not have been touched; a SIGKILL
     * sent just now may take a moment to end it, so it is watched for a while (to show that
     * something does NOT happen). */
    int64_t until = ql_test_mono_ms() + 300;
    while (ql_test_mono_ms() < until) {
        int st;
        cr_assert_eq(waitpid(sleeper, &st, WNOHANG), 0,
                     "recovery killed pid %d, which only had the step's old process group id",
                     sleeper);
        struct timespec tick = {0, 2000000};
        nanosleep(&tick, NULL);
    }
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/driver-01.err", dir);
    const char *why[] = {"left the recorded process group", "the pid belongs to another process",
                         NULL};
    cr_assert(ql_test_file_has_line(err_path, why), "recovery did not say why it left pid %d alone",
              sleeper);
    stop_driver(d);
}

/* The marker reaches the step as QILIN_STEP_TOKEN and is the one in the store, also when the
 * server itself runs with that variable (started from another server's step). (A template
 * cannot set QILIN_* variables at all.) */
Test(crash_steps, the_step_gets_its_stored_marker_in_its_environment, .timeout = 60,
     .fini = remove_world) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    make_world("marker",
               "echo \"$QILIN_STEP_TOKEN\" > \"$D/token.tmp\"; mv \"$D/token.tmp\" \"$D/token\"\n"
               "exec sleep 600\n",
               "");
    setenv(QL_PROC_TOKEN_ENV, "00000000000000000000000000000000", 1);
    pid_t d = start_driver(0);
    unsetenv(QL_PROC_TOKEN_ENV);
    char path[160], seen[128] = "";
    snprintf(path, sizeof path, "%s/token", dir);
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f) {
            bool ok = fgets(seen, sizeof seen, f) != NULL;
            fclose(f);
            if (ok)
                break;
        }
        cr_assert_lt(ql_test_mono_ms(), deadline, "the step never wrote its token");
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    seen[strcspn(seen, "\n")] = '\0';
    ql_store_opts_t so = {.path = data, .map_size = 1u << 30};
    ql_store_t *store;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &store, &err), 0, "%s", err.msg);
    ql_step_t st;
    bool running = running_step(store, &st);
    ql_store_close(store);
    cr_assert(running, "the step is RUNNING while it sleeps");
    cr_assert_str_eq(seen, st.token, "the step's environment has the stored marker");
    cr_assert_eq(strlen(st.token), QL_STEP_TOKEN_LEN);
    ql_step_free(&st);
    stop_driver(d);
}

/* A try stopped by a graceful shutdown: what it left outside its process group (the setsid
 * holder) goes with it, or it would run beside the step's next try after the restart. */
Test(crash_steps, a_stopped_try_leaves_nothing_outside_its_group, .timeout = 60,
     .fini = remove_world) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    make_world("stopped", hold_script, "");
    static hist_t h;
    memset(&h, 0, sizeof h);
    pid_t d = start_driver(0);
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (h.n < 1 || h.tries[0].n_children < 2) {
        read_log(&h);
        cr_assert_lt(ql_test_mono_ms(), deadline, "the try never had both holders running");
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    cr_assert_neq(try_alive(&h.tries[0]), 0);
    stop_driver(d);
    deadline = ql_test_mono_ms() + DEADLINE_MS;
    pid_t p;
    while ((p = try_alive(&h.tries[0])) != 0) {
        reap_all();
        cr_assert_lt(ql_test_mono_ms(), deadline, "pid %d of the stopped try outlived the server",
                     p);
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/driver-00.err", dir);
    const char *why[] = {"killed processes the stopped step left outside its group", NULL};
    cr_assert(ql_test_file_has_line(err_path, why), "the server did not say it swept the try");
}

/* ---- a kill between a step's commit out of RUNNING and its processes' end ---- */

/* The holders of hold_script, deaf to SIGTERM: a stopped try's processes outlive its stop by
 * the whole kill grace (SIGKILL comes only then) while the server lives, which holds the window
 * open; once the server dies, the step's watcher kills them. */
static const char stubborn_prefix[] = "trap '' TERM\n";

/* The driver's log of round `round` has a line holding every needle (NULL-terminated), polled
 * until the deadline. */
static void wait_for_log(int round, const char *const *needles, const char *what) {
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/driver-%02d.err", dir, round);
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (!ql_test_file_has_line(err_path, needles)) {
        cr_assert_lt(ql_test_mono_ms(), deadline, "round %d: %s never happened", round, what);
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
}

/* Starts the world with the stubborn step and a long kill grace, and waits for try 0 to run
 * with both holders. */
static pid_t start_stubborn_try(const char *name, hist_t *h) {
    cr_assert_eq(access(DRIVER, X_OK), 0, "%s is not built", DRIVER);
    static char body[sizeof stubborn_prefix + sizeof hold_script];
    snprintf(body, sizeof body, "%s%s", stubborn_prefix, hold_script);
    make_world(name, body, "");
    memset(h, 0, sizeof *h);
    pid_t d = start_driver_set(0, "qilin.step.kill-grace-ms=20000");
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (h->n < 1 || h->tries[0].n_children < 2) {
        read_log(h);
        cr_assert_lt(ql_test_mono_ms(), deadline, "the try never had both holders running");
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    return d;
}

/* Waits for try `round` to start (reaping and noting ends meanwhile), then checks that no
 * process of an earlier try is alive and no try saw another's lock. */
static void wait_try_and_check(hist_t *h, int round) {
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (h->n <= round) {
        reap_all();
        note_ends(h, round);
        read_log(h);
        cr_assert_lt(ql_test_mono_ms(), deadline, "try %d never started", round);
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }
    check_earlier_gone(h, round);
    /* The new try's own start checked the locks; its holders log OVERLAP a moment later. */
    int64_t until = ql_test_mono_ms() + DEADLINE_MS;
    while (h->tries[round].n_children < 2 && ql_test_mono_ms() < until)
        read_log(h);
    cr_assert_eq(h->overlaps, 0, "%s", h->overlap);
}

/* SIGTERM, and SIGKILL once the shutdown has said it stops the step (old code: once it put the
 * job back to READY). The step's processes outlive the stop (its holders ignore SIGTERM and the
 * kill grace is long); the step's watcher or the next start's sweep must end them before the
 * next try. */
Test(crash_steps, sigkill_during_a_graceful_shutdown_leaves_nothing_to_the_next_try, .timeout = 90,
     .fini = remove_world) {
    static hist_t h;
    pid_t d = start_stubborn_try("shutdownkill", &h);
    cr_assert_eq(kill(d, SIGTERM), 0);
    const char *stopping[] = {"server shutting down", NULL};
    wait_for_log(0, stopping, "the shutdown's stop of the step");
    kill_driver(d);
    /* The stopped try's processes outlive their server only until the step's watcher kills them,
     * a few ms after the server's death (docs/step-processes.md; before the watcher, until the
     * next start's sweep). Which one ends them is a race, so it is not asserted: the next try
     * must find none of them alive either way, and the next start must sweep the try's marker. */
    d = start_driver(1);
    wait_try_and_check(&h, 1);
    const char *swept[] = {"swept the processes of interrupted steps", "steps=1", NULL};
    wait_for_log(1, swept, "recovery's sweep of the stopped try");
    stop_driver(d);
}

/* PAUSE through the node's action call; SIGKILL once the action is committed and answered,
 * while its step's processes still run. RESUME after the restart: the next try must come only
 * after they are gone. */
Test(crash_steps, sigkill_after_a_pause_before_its_step_stopped_leaves_nothing_to_the_next_try,
     .timeout = 90, .fini = remove_world) {
    static hist_t h;
    pid_t d = start_stubborn_try("pausekill", &h);
    cr_assert_eq(kill(d, SIGUSR1), 0);
    const char *paused[] = {"job action PAUSE", NULL};
    wait_for_log(0, paused, "the PAUSE");
    kill_driver(d);
    /* As above: the step's watcher or the next try's sweep ends the paused try's processes. */
    d = start_driver(1);
    /* SIGUSR2 would kill a driver that has not reached main yet, and one still starting ignores
     * it: sent once the driver holds the lock, until the RESUME is done. */
    const char *master[] = {"holding the job engine lock", NULL};
    wait_for_log(1, master, "the restart");
    char err_path[160];
    snprintf(err_path, sizeof err_path, "%s/driver-01.err", dir);
    const char *resumed[] = {"job action RESUME", NULL};
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (!ql_test_file_has_line(err_path, resumed)) {
        cr_assert_lt(ql_test_mono_ms(), deadline, "the RESUME never happened");
        kill(d, SIGUSR2);
        int64_t next = ql_test_mono_ms() + 100;
        while (ql_test_mono_ms() < next && !ql_test_file_has_line(err_path, resumed)) {
            struct timespec tick = {0, 2000000};
            nanosleep(&tick, NULL);
        }
    }
    wait_try_and_check(&h, 1);
    const char *swept[] = {"swept the previous try of a step before its next try", NULL};
    wait_for_log(1, swept, "the next try's sweep of the paused try");
    stop_driver(d);
}
