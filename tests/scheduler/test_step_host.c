/*
 * Steps know their host (engine/ql_step_host.h, docs/step-processes.md, Several hosts): on a
 * store that servers on several hosts share, recovery kills and sweeps only the tries this
 * server ran in this boot, leaves another server's try to its own host, and holds that job for
 * the takeover grace before its next try starts.
 *
 * Two server ids in one process: the test writes a job whose step is RUNNING as if a server
 * had crashed (or been cut off) in the middle of it, with a recorded server id, boot id, marker
 * and process group, the group being a real `setsid sleep` carrying the marker, and then runs
 * the recovery of a scheduler with a server id of its own. Every process the test starts is
 * recorded (pid, what it was for) and its fate asserted; all are killed and reaped at the end.
 * The store is the backend under test (LMDB, or PostgreSQL for <name>@pg); on LMDB the host
 * rule is switched on through the scheduler's option, as a PostgreSQL store switches it on.
 * The grace runs on the virtual clock. The last two cases start a slow_exit process
 * (tests/engine/slow_exit.c) instead of `sleep`, to catch it still exiting when the wait of
 * recovery's group kill, or of the next try's sweep, ends.
 */
#include "engine/engine.h"
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"
#include "tests/common/loop_util.h"
#include "tests/common/slow_exit_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */
#define THIS_SERVER "host-a:7070"
#define OTHER_SERVER "host-b:7070"
#define DEADLINE_MS 10000

extern char **environ;

/* ---- the world ---- */

typedef struct world {
    char dir[64];
    ql_store_t *store;
    ql_templates_t *tpl;
    ql_writer_t *writer;
    ql_clock_t *clock;
    ql_sched_t *sched;
    ql_log_t log;
    ql_id_t model;
    char lines[64][512]; /* what the scheduler logged */
    int n_lines;
    int64_t starts[8]; /* clock ms of each step start */
    ql_id_t started[8];
    int n_starts;
    pid_t sleeper; /* the fake try's process, killed and reaped by the teardown */
} world_t;

static world_t w;

static void sink(void *arg, ql_log_level_t level, const char *line) {
    (void)arg;
    (void)level;
    if (w.n_lines < 64)
        snprintf(w.lines[w.n_lines++], sizeof w.lines[0], "%s", line);
}

static bool logged(const char *a, const char *b) {
    for (int i = 0; i < w.n_lines; i++)
        if (strstr(w.lines[i], a) && (!b || strstr(w.lines[i], b)))
            return true;
    return false;
}

static void start_hook(void *arg, const ql_id_t *job, uint32_t seq) {
    (void)arg;
    (void)seq;
    if (w.n_starts < 8) {
        w.started[w.n_starts] = *job;
        w.starts[w.n_starts++] = ql_clock_now_ms(w.clock);
    }
}

static const char TEMPLATES[] = "templates:\n"
                                "  INC_BUILD:\n"
                                "    steps:\n"
                                "      - {name: build, kind: sleep, duration: 1m}\n";

static void open_world(void) {
    memset(&w, 0, sizeof w);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_stephost");
    ql_log_init(&w.log, QL_LOG_INFO);
    w.log.sink = sink;
    ql_store_opts_t so;
    ql_test_store_opts(w.dir, &so);
    so.map_size = 64u << 20;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &w.store, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_templates_load_buffer(TEMPLATES, strlen(TEMPLATES), "jobs.yaml", &w.tpl, &err),
                 0, "%s", err.msg);
    cr_assert_eq(ql_test_create_dt_model(w.store, "p", "m", BASE, &w.model, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_clock_virtual_new(BASE, &w.clock), 0);
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(w.store, &wo, &w.writer), 0);
}

/* The scheduler of THIS_SERVER, judging steps by their host (spans), with a grace, waiting
 * drain_ms for what its sweeps kill (0: QL_PROC_DRAIN_MS). */
static void open_sched_drain(bool spans, int64_t grace_ms, int drain_ms) {
    ql_sched_opts_t o = {.store = w.store,
                         .writer = w.writer,
                         .clock = w.clock,
                         .log = &w.log,
                         .templates = w.tpl,
                         .max_concurrent_jobs = 10,
                         .poll_interval_ms = 30000,
                         .spans_hosts = spans,
                         .takeover_grace_ms = grace_ms,
                         .proc_drain_ms = drain_ms};
    snprintf(o.server_id, sizeof o.server_id, THIS_SERVER);
    snprintf(o.server_addr, sizeof o.server_addr, "127.0.0.1:7070");
    cr_assert_eq(ql_sched_new(&o, &w.sched), 0);
    ql_sched_set_step_start_hook(w.sched, start_hook, NULL);
}

static void open_sched(bool spans, int64_t grace_ms) {
    open_sched_drain(spans, grace_ms, 0);
}

static void teardown(void) {
    if (w.sleeper > 0) {
        kill(w.sleeper, SIGKILL);
        waitpid(w.sleeper, NULL, 0);
        w.sleeper = 0;
    }
    if (w.sched)
        ql_sched_free(w.sched);
    if (w.writer)
        ql_writer_free(w.writer);
    if (w.clock)
        ql_clock_free(w.clock);
    if (w.tpl)
        ql_templates_free(w.tpl);
    if (w.store)
        ql_store_close(w.store);
    if (w.dir[0])
        ql_test_rm_tree(w.dir);
    memset(&w, 0, sizeof w); /* a case may tear down and start over */
}

/* A build of day `day` (from BASE); returns the job. */
static ql_id_t submit_build(int day) {
    ql_submit_op_t op = {.kind = QL_SUBMIT_BUILD,
                         .templates = w.tpl,
                         .model = w.model,
                         .start = BASE + day * DAY,
                         .end = BASE + (day + 1) * DAY,
                         .priority = 3,
                         .now = BASE};
    ql_err_t err = {0};
    cr_assert_eq(ql_writer_call(w.writer, ql_submit_fn, &op, &err), 0, "%s", err.msg);
    return op.job;
}

/* What a server left of a try it was running when it went away. */
typedef struct try_rec {
    const char *server_id; /* "" : a record of a build that did not record servers */
    const char *server_addr;
    const char *token; /* "" : none */
    pid_t pgid;        /* 0: none */
} try_rec_t;

/* Writes job RUNNING, its step 0 RUNNING with the try t, as a server that died (or lost touch)
 * mid-step leaves them. */
static void write_running(const ql_id_t *id, const try_rec_t *t) {
    ql_txn_t *txn;
    ql_err_t err = {0};
    cr_assert_eq(ql_txn_begin(w.store, true, &txn), 0);
    ql_job_t job;
    cr_assert_eq(ql_job_get(txn, id, QL_DECODE_KEEP_EXTRA, &job), 0);
    cr_assert_eq(ql_job_set_state(txn, &job, QL_PENDING, false, BASE, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_job_set_state(txn, &job, QL_RUNNING, false, BASE, &err), 0, "%s", err.msg);
    ql_job_free(&job);
    ql_step_t st;
    cr_assert_eq(ql_step_get(txn, id, 0, &st), 0);
    cr_assert_eq(ql_step_set_state(txn, &st, QL_RUNNING, BASE, &err), 0, "%s", err.msg);
    st.attempts = 1;
    snprintf(st.server_id, sizeof st.server_id, "%s", t->server_id);
    snprintf(st.server_addr, sizeof st.server_addr, "%s", t->server_addr);
    snprintf(st.token, sizeof st.token, "%s", t->token);
    if (t->pgid > 0) {
        ql_proc_ident_t ident;
        cr_assert_eq(ql_proc_ident_of(t->pgid, &ident), 0);
        st.pgid = t->pgid;
        st.pg_start = ident.start;
        memcpy(st.boot_id, ident.boot_id, sizeof st.boot_id);
    }
    cr_assert_eq(ql_step_put(txn, &st), 0);
    ql_step_free(&st);
    cr_assert_eq(ql_txn_commit(txn), 0);
}

static ql_step_t read_step(const ql_id_t *id) {
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(w.store, false, &txn), 0);
    ql_step_t st;
    cr_assert_eq(ql_step_get(txn, id, 0, &st), 0);
    ql_txn_abort(txn);
    return st;
}

static ql_state_t job_state(const ql_id_t *id) {
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(w.store, false, &txn), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(txn, id, 0, &j), 0);
    ql_state_t s = j.state;
    ql_job_free(&j);
    ql_txn_abort(txn);
    return s;
}

/* ---- a try's process: `sleep` leading a session of its own, with the try's marker ---- */

static bool is_sleep(pid_t pid) {
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(comm, sizeof comm, f) && strncmp(comm, "sleep", 5) == 0;
    fclose(f);
    return ok;
}

/* Starts it and waits until it runs `sleep` (so its environment is the one given). */
static pid_t start_sleeper(const char *token) {
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    cr_assert_not_null(envp);
    char marker[80];
    snprintf(marker, sizeof marker, "%s=%s", QL_PROC_TOKEN_ENV, token);
    memcpy(envp, environ, n * sizeof *envp); /* QL_TEST_OWNER included: the cleanup finds it */
    envp[n] = marker;
    pid_t pid = fork(); /* no Criterion call in the child */
    if (pid == 0) {
        setsid();
        char *const argv[] = {"sleep", "600", NULL};
        execve("/bin/sleep", argv, envp);
        _exit(127);
    }
    free(envp);
    cr_assert_gt(pid, 0);
    w.sleeper = pid;
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    while (!is_sleep(pid)) {
        cr_assert(waitpid(pid, NULL, WNOHANG) == 0, "the sleeper exited at once");
        cr_assert_lt(ql_test_mono_ms(), deadline, "the sleeper never ran sleep");
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL); /* the pause between two looks of a poll with a deadline */
    }
    return pid;
}

/* Whether the sleeper died of SIGKILL within the deadline (reaped), or still runs (false). */
static bool sleeper_killed(void) {
    int64_t deadline = ql_test_mono_ms() + 2000;
    for (;;) {
        int st;
        pid_t r = waitpid(w.sleeper, &st, WNOHANG);
        if (r == w.sleeper) {
            w.sleeper = 0;
            cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the sleeper ended with %d", st);
            return true;
        }
        if (ql_test_mono_ms() > deadline)
            return false;
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
    }
}

/* One recovery of a try recorded by `server` (NULL: a record without a server) on a scheduler
 * that judges by host (spans) or not; whether its process must be killed. */
static void recover_case(const char *server, bool spans, bool killed) {
    open_world();
    ql_id_t job = submit_build(0);
    char token[QL_PROC_TOKEN_LEN + 1];
    cr_assert_eq(ql_proc_token_new(token), 0);
    pid_t pid = start_sleeper(token);
    try_rec_t t = {.server_id = server ? server : "",
                   .server_addr = server ? "10.0.0.2:7070" : "",
                   .token = token,
                   .pgid = pid};
    write_running(&job, &t);
    open_sched(spans, 10000);
    uint64_t n = 0;
    ql_err_t err = {0};
    cr_assert_eq(ql_sched_recover(w.sched, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(job_state(&job), QL_READY, "the job goes back to READY either way");
    ql_step_t st = read_step(&job);
    cr_assert_eq(st.state, QL_READY);
    if (killed) {
        cr_assert(sleeper_killed(), "the try of %s was not killed", server ? server : "(none)");
        cr_assert_str_eq(st.token, "", "a swept try's marker is forgotten");
    } else {
        cr_assert_not(sleeper_killed(), "the try of %s was killed", server);
        cr_assert_eq(kill(pid, 0), 0);
        cr_assert(logged("left the processes of an interrupted step alone", "left to its own host"),
                  "the decision is logged");
        cr_assert_str_eq(st.token, token, "the marker of a try still running stays recorded");
        cr_assert_eq(st.pgid, pid);
    }
    cr_assert_str_eq(st.server_id, server ? server : "", "where it ran stays recorded");
    ql_step_free(&st);
    if (killed)
        return;
    /* The next try, after the grace, does not sweep that marker either: it is not this host's. */
    ql_sched_start(w.sched);
    for (int i = 0; i < 11; i++)
        ql_vclock_run_for(w.clock, 1000, true);
    cr_assert_eq(w.n_starts, 1, "the next try started after the grace");
    cr_assert(logged("left the previous try of a step alone", "left to its own host"));
    cr_assert_not(sleeper_killed(), "the next try swept another host's marker");
    st = read_step(&job);
    cr_assert_eq(st.state, QL_RUNNING);
    cr_assert_str_eq(st.server_id, THIS_SERVER);
    cr_assert_eq(st.pgid, 0, "the other host's group number is not kept with this try");
    ql_step_free(&st);
}

TestSuite(step_host, .fini = teardown, .timeout = 60);

Test(step_host, recovery_leaves_another_servers_live_try_alone) {
    recover_case(OTHER_SERVER, true, false);
}

Test(step_host, recovery_kills_its_own_servers_try) {
    recover_case(THIS_SERVER, true, true);
}

Test(step_host, recovery_kills_a_try_recorded_without_a_server_as_before) {
    recover_case(NULL, true, true);
}

/* LMDB: every server of the store runs on this host, whatever server id it recorded. */
Test(step_host, on_a_store_of_one_host_every_try_is_this_hosts) {
    ql_test_require_backend("lmdb");
    recover_case(OTHER_SERVER, false, true);
}

/* ---- the takeover grace, on the virtual clock ---- */

/* Runs the clock a second at a time for `ms`. */
static void run_for(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 1000)
        ql_vclock_run_for(w.clock, 1000, true);
}

static int64_t start_of(const ql_id_t *job) {
    for (int i = 0; i < w.n_starts; i++)
        if (ql_id_eq(&w.started[i], job))
            return w.starts[i];
    return -1;
}

Test(step_host, another_servers_job_waits_the_grace_and_its_own_does_not) {
    open_world();
    ql_id_t foreign = submit_build(0), own = submit_build(1), old = submit_build(2);
    write_running(&foreign,
                  &(try_rec_t){.server_id = OTHER_SERVER, .server_addr = "", .token = ""});
    write_running(&own, &(try_rec_t){.server_id = THIS_SERVER, .server_addr = "", .token = ""});
    write_running(&old, &(try_rec_t){.server_id = "", .server_addr = "", .token = ""});
    open_sched(true, 10000);
    uint64_t n = 0;
    ql_err_t err = {0};
    int64_t t0 = ql_clock_now_ms(w.clock);
    cr_assert_eq(ql_sched_recover(w.sched, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    cr_assert(logged("job held for the takeover grace", OTHER_SERVER), "the hold is logged");
    ql_sched_start(w.sched);
    run_for(9000);
    cr_assert_eq(start_of(&own), t0, "this server's own step starts at once");
    cr_assert_eq(start_of(&old), t0, "a step recorded without a server starts at once");
    cr_assert_eq(start_of(&foreign), -1, "another server's step waits for the grace");
    cr_assert_eq(job_state(&foreign), QL_READY);
    run_for(2000);
    cr_assert_eq(start_of(&foreign), t0 + 10000, "it starts when the grace is over, not later");
    cr_assert(logged("takeover grace over", OTHER_SERVER));
    ql_step_t st = read_step(&foreign);
    cr_assert_str_eq(st.server_id, THIS_SERVER, "its new try is recorded as this server's");
    cr_assert_str_eq(st.server_addr, "127.0.0.1:7070");
    ql_step_free(&st);
}

Test(step_host, a_grace_of_zero_holds_nothing) {
    open_world();
    ql_id_t foreign = submit_build(0);
    write_running(&foreign,
                  &(try_rec_t){.server_id = OTHER_SERVER, .server_addr = "", .token = ""});
    open_sched(true, 0);
    uint64_t n = 0;
    ql_err_t err = {0};
    int64_t t0 = ql_clock_now_ms(w.clock);
    cr_assert_eq(ql_sched_recover(w.sched, &n, &err), 0, "%s", err.msg);
    cr_assert(logged("job not held", "takeover-grace-ms is 0"));
    ql_sched_start(w.sched);
    run_for(1000);
    cr_assert_eq(start_of(&foreign), t0);
}

/* ---- a killed group that is still exiting when the wait ends ---- */

/* Starts slow_exit (tests/engine/slow_exit.c) in w.dir, leading a group of its own, with a new
 * marker in token as its whole environment; the teardown kills and reaps it. */
static pid_t start_marked_slow_exit(char token[QL_PROC_TOKEN_LEN + 1]) {
    char marker[80];
    cr_assert_eq(ql_proc_token_new(token), 0);
    snprintf(marker, sizeof marker, "%s=%s", QL_PROC_TOKEN_ENV, token);
    char *env[] = {marker, NULL};
    return w.sleeper = ql_test_slow_exit_start(w.dir, env);
}

/* Recovery kills a try's recorded group and then waits until the group has let go of its files
 * (ql_proc_kill_group_checked()); a group still exiting when the wait ends (a process stuck in
 * the kernel, which the 2 s of QL_PROC_DRAIN_MS are for) fails the recovery, and nothing of it is
 * committed: the job stays RUNNING with its try recorded, for the next recovery to kill and wait
 * for again. Here the wait is 1 ms and the group slow_exit (tests/engine/slow_exit.c), which
 * needs 5 to 15 ms to free its memory; a case starved of the CPU for all of that tries again. */
Test(step_host, recovery_changes_nothing_while_a_killed_group_is_still_exiting) {
    bool caught = false;
    for (int attempt = 0; attempt < 5 && !caught; attempt++) {
        open_world();
        ql_id_t job = submit_build(0);
        char token[QL_PROC_TOKEN_LEN + 1];
        pid_t pid = start_marked_slow_exit(token);
        write_running(
            &job,
            &(try_rec_t){.server_id = THIS_SERVER, .server_addr = "", .token = token, .pgid = pid});
        open_sched_drain(true, 0, 1);
        uint64_t n = 0;
        ql_err_t err = {0};
        int rc = ql_sched_recover(w.sched, &n, &err);
        if (rc == 0) { /* it was gone in time: then its lock must be free */
            cr_assert(ql_test_slow_exit_lock_free(w.dir), "recovered beside a holder of the lock");
            teardown();
            continue;
        }
        caught = true;
        cr_assert_eq(rc, UV_EBUSY, "%s", err.msg);
        char want[96];
        snprintf(want, sizeof want, "cannot make sure the killed process group %d", (int)pid);
        cr_assert_not_null(strstr(err.msg, want), "the error names the group: %s", err.msg);
        cr_assert_eq(job_state(&job), QL_RUNNING, "a failed recovery commits nothing");
        ql_step_t st = read_step(&job);
        cr_assert_eq(st.state, QL_RUNNING);
        cr_assert_str_eq(st.token, token, "the try's marker stays recorded");
        cr_assert_eq(st.pgid, pid, "and its group");
        ql_step_free(&st);

        /* Once the group is gone, the next recovery puts the job back to READY. */
        int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
        while (!ql_test_slow_exit_lock_free(w.dir))
            cr_assert_lt(ql_test_mono_ms(), deadline, "the killed group never let go");
        cr_assert(sleeper_killed(), "recovery killed the group");
        cr_assert_eq(ql_sched_recover(w.sched, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(n, 1);
        cr_assert_eq(job_state(&job), QL_READY);
    }
    cr_assert(caught, "the group was gone before every recovery's wait ended");
}

/* Writes on step 0 of job id, still READY, the marker of a try this server ran in this boot, as
 * an action's commit leaves it (the step out of RUNNING, its try stopped only after that). */
static void write_previous_try(const ql_id_t *id, const char *token) {
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(w.store, true, &txn), 0);
    ql_step_t st;
    cr_assert_eq(ql_step_get(txn, id, 0, &st), 0);
    st.attempts = 1;
    snprintf(st.server_id, sizeof st.server_id, "%s", THIS_SERVER);
    snprintf(st.token, sizeof st.token, "%s", token);
    cr_assert_eq(ql_proc_boot_id(st.boot_id), 0);
    cr_assert_eq(ql_step_put(txn, &st), 0);
    ql_step_free(&st);
    cr_assert_eq(ql_txn_commit(txn), 0);
}

/* A step's next try sweeps its previous try's marker first (sched_pick.c); when what the sweep
 * killed is still exiting as its wait ends, the job is not started: it stays READY with the
 * marker, and a later fetch, once the process is gone, starts it. The wait is 1 ms here against
 * slow_exit's 5 to 15 ms of teardown, as in the case above. */
Test(step_host, a_next_try_waits_while_its_previous_tries_process_is_still_exiting) {
    bool caught = false;
    for (int attempt = 0; attempt < 5 && !caught; attempt++) {
        open_world();
        ql_id_t job = submit_build(0);
        char token[QL_PROC_TOKEN_LEN + 1];
        start_marked_slow_exit(token);
        write_previous_try(&job, token);
        open_sched_drain(true, 0, 1);
        ql_sched_start(w.sched);
        ql_vclock_run_for(w.clock, 1000, true);
        cr_assert(sleeper_killed(), "the next try's sweep killed the previous try's process");
        if (w.n_starts == 1) { /* it was gone in time: then its lock must be free */
            cr_assert(ql_test_slow_exit_lock_free(w.dir), "started beside a holder of the lock");
            teardown();
            continue;
        }
        caught = true;
        cr_assert_eq(w.n_starts, 0);
        cr_assert(
            logged("job not started", "cannot make sure its previous try's processes are gone"),
            "the refusal is logged");
        cr_assert_eq(job_state(&job), QL_READY, "the job waits READY");
        ql_step_t st = read_step(&job);
        cr_assert_str_eq(st.token, token, "with the previous try's marker");
        ql_step_free(&st);

        /* The process is reaped (so gone); the next fetch sweeps nothing and starts the job. */
        cr_assert(ql_test_slow_exit_lock_free(w.dir));
        for (int i = 0; i < 31; i++)
            ql_vclock_run_for(w.clock, 1000, true);
        cr_assert_eq(w.n_starts, 1, "a later fetch started it");
        cr_assert_eq(job_state(&job), QL_RUNNING);
    }
    cr_assert(caught, "the process was gone before every sweep's wait ended");
}
