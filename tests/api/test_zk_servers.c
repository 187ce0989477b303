/*
 * Job servers coordinated by ZooKeeper (docs/zookeeper.md, How a server uses it;
 * docs/user-guide.md, Several servers): real qilind processes on one store (one LMDB data
 * directory, or one PostgreSQL schema for @pg) and the real ZooKeeper of the zk fixture, each
 * test under a base path of its own, with short session timeouts.
 *
 * - Scheduler 100 (leader election): two servers start together; exactly one leads. A build of a
 *   three-step template runs on the leader, whose middle step sleeps on its first try; the leader
 *   is SIGKILLed; the other leads after the session timeout and finishes the job from the
 *   middle step.
 * - Scheduler 0 with a connect string (the node global_job_engine_lock): the holder is stopped
 *   gracefully (SIGTERM) in the middle of the job; it deletes its node as it stops, so the standby
 *   takes over at once, well within the session timeout, and finishes the job.
 * - The pause nemesis: the scheduler-100 leader is stopped (SIGSTOP) for twice the session
 *   timeout mid-step; the other leads and reruns the step, the continued one steps down.
 * - ZooKeeper paused past the session timeout while the leader runs a step: the leader suspends,
 *   steps down and stops its step; afterwards one server leads with a larger token (or the old
 *   leader with its own, when its session was revived).
 * - A build POSTed to the server that does not lead starts on the leader at once (median under
 *   100 ms over serial builds), with schedulers 0 and 100, the poll interval at Kylin's 30 s:
 *   the other server's commit wakes the leader (docs/postgresql.md and docs/architecture.md,
 *   Wake-ups across servers).
 * - The settings a server refuses at start (scheduler 100 or 2 without a connect string, ...),
 *   one test each, and the coordination guard: a server
 *   configured differently from the store's other job servers does not start.
 *
 * Every try of a step appends "start SEQ PID MS" and "end SEQ PID MS" (PID: the qilind that ran
 * it, MS: wall ms) to a trace file, and holds an flock on a file of its step for as long as any
 * of its processes lives; a try that finds it taken (two tries of one step at once) records
 * "overlap ..." and fails. The assertions read the trace back. Waits poll with deadlines.
 */
#include "scheduler/ql_lock.h"
#include "tests/api/step_trace.h"
#include "tests/common/zk_util.h"

#define N 2
#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */
/* qilin.cluster.takeover-grace-ms: on PostgreSQL the new leader waits this long before it runs
 * again a step the old one was running (docs/step-processes.md, Several hosts). */
#define GRACE_MS 1000

static qd_t S[N];
static char dir[256];      /* the steps' directory: script, trace, locks */
static char base[64];      /* this test's ZooKeeper base path */
static long server_pid[N]; /* the trace names servers by pid */
static pid_t zk_stopped;   /* the ZooKeeper server while a test holds it stopped */

static void teardown(void) {
    if (zk_stopped > 0)
        kill(zk_stopped, SIGCONT);
    zk_stopped = 0;
    for (int i = 0; i < N; i++) {
        if (S[i].pid > 0)
            kill(S[i].pid, SIGCONT);
        qd_cleanup(&S[i]);
    }
    ql_test_zk_private_stop();
    rm_rf(dir);
}

TestSuite(zk_servers, .fini = teardown, .timeout = 120);

/* The step: takes its step's flock (held by every process of the try), records its start and
 * end in the trace and in its own output; the middle step's first try sleeps until it is
 * stopped (its marker is made before its start is recorded: the test acts on that line). */
static const char step_script[] =
    "seq=$1; srv=$2; d=$3\n"
    "now() { date +%s%3N; }\n"
    "exec 9>\"$d/step$seq.lock\"\n"
    "if ! flock -n 9; then echo \"overlap $seq $srv $(now)\" >> \"$d/trace\"; exit 75; fi\n"
    "long=0\n"
    "if [ \"$seq\" = 1 ] && [ ! -e \"$d/long.marker\" ]; then : > \"$d/long.marker\"; long=1; fi\n"
    "echo \"start $seq $srv $(now)\" | tee -a \"$d/trace\"\n"
    "if [ $long = 1 ]; then sleep 120; fi\n"
    "echo \"end $seq $srv $(now)\" | tee -a \"$d/trace\"\n";

static void write_templates(void) {
    char path[400], text[2048];
    snprintf(path, sizeof path, "%s/step.sh", dir);
    write_file(path, step_script);
    int n = snprintf(text, sizeof text, "templates:\n  INC_BUILD:\n    steps:\n");
    for (int seq = 0; seq < 3; seq++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "      - {name: s%d, kind: shell, argv: [/bin/sh, -c, 'exec /bin/sh "
                      "%s/step.sh %d $PPID %s']}\n",
                      seq, dir, seq, dir);
    snprintf(path, sizeof path, "%s/jobs.yaml", dir);
    write_file(path, text);
}

/* Two servers' directories on one store: one LMDB data directory, or one PostgreSQL schema. */
static void init_servers(void) {
    cr_assert_eq(system("command -v flock > /dev/null"), 0, "flock(1) (util-linux) is needed");
    ql_test_zk_base(base, sizeof base);
    make_tmpdir(dir, sizeof dir);
    write_templates();
    qd_init(&S[0]);
    qd_init(&S[1]);
    if (!strcmp(ql_test_store_backend(), "lmdb"))
        snprintf(S[1].data, sizeof S[1].data, "%s", S[0].data);
    else
        ql_test_store_share(S[1].data, S[0].data);
}

/* Launches server i with scheduler `scheduler` on the fixture's ZooKeeper, the session timeout
 * timeout_ms and extra settings (NULL-terminated "KEY=VALUE" list, may be NULL). */
static void launch(int i, int scheduler, int timeout_ms, const char *const *more) {
    static char set[N][8][300];
    snprintf(set[i][0], sizeof set[i][0], "qilin.server.id=s%d", i);
    snprintf(set[i][1], sizeof set[i][1], "qilin.jobs.templates=%s/jobs.yaml", dir);
    snprintf(set[i][2], sizeof set[i][2], "kylin.job.scheduler.default=%d", scheduler);
    snprintf(set[i][3], sizeof set[i][3], "kylin.env.zookeeper-connect-string=%s",
             ql_test_zk_connect());
    snprintf(set[i][4], sizeof set[i][4], "kylin.env.zookeeper-base-path=%s", base);
    snprintf(set[i][5], sizeof set[i][5], "qilin.cluster.session-timeout-ms=%d", timeout_ms);
    snprintf(set[i][6], sizeof set[i][6], "qilin.cluster.takeover-grace-ms=%d", GRACE_MS);
    /* A one-second poll bounds what a lost wake-up could cost the tests; the wake-up tests
     * below set Kylin's 30 s. */
    snprintf(set[i][7], sizeof set[i][7], "kylin.job.scheduler.poll-interval-second=1");
    const char *extra[40];
    int n = 0;
    for (int k = 0; k < 8; k++) {
        extra[n++] = "--set";
        extra[n++] = set[i][k];
    }
    for (int k = 0; more && more[k] && n < 38; k++) {
        extra[n++] = "--set";
        extra[n++] = more[k];
    }
    extra[n] = NULL;
    qd_start_async(&S[i], extra);
}

static void start(int i, int scheduler, int timeout_ms) {
    launch(i, scheduler, timeout_ms, NULL);
    qd_wait_up(&S[i]);
    server_pid[i] = (long)S[i].pid;
}

/* Whether server q says it is the master (its /metrics gauge). */
static bool is_master(const qd_t *q) {
    resp_t r = http_req(q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body ? r.body : "");
    bool m = strstr(r.body, "\nqilin_scheduler_master 1\n") != NULL;
    resp_free(&r);
    return m;
}

/* The end of each server's log on stderr, for a failure's diagnosis. */
static void dump_logs(void) {
    for (int i = 0; i < N; i++) {
        char *log = read_file(S[i].log);
        const char *tail = log ? log : "(none)";
        if (strlen(tail) > 6000)
            tail += strlen(tail) - 6000;
        fprintf(stderr, "---- the end of s%d's log:\n%s\n", i, tail);
        free(log);
    }
}

/* Waits until exactly one running server leads, then checks for a while that it stays the only
 * one; returns its index. */
static int the_leader(int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    int which = -1;
    for (;;) {
        int n = 0;
        for (int i = 0; i < N; i++)
            if (S[i].pid > 0 && is_master(&S[i])) {
                n++;
                which = i;
            }
        cr_assert_leq(n, 1, "two servers lead at once");
        if (n == 1)
            break;
        if (now_ms() >= deadline)
            dump_logs();
        cr_assert_lt(now_ms(), deadline, "no server leads after %d ms", timeout_ms);
        poll_pause();
    }
    /* Exactly one: the other keeps standing by (a few looks over half a second). */
    int64_t until = now_ms() + 500;
    while (now_ms() < until) {
        for (int i = 0; i < N; i++)
            if (i != which && S[i].pid > 0)
                cr_assert_not(is_master(&S[i]), "s%d leads besides s%d", i, which);
        poll_pause();
    }
    return which;
}

/* The fence= of the last "scheduling: holding the job engine lock" line of server i's log. */
static uint64_t scheduling_fence(int i) {
    char *log = read_file(S[i].log);
    cr_assert_not_null(log);
    uint64_t fence = 0;
    for (const char *p = log; (p = strstr(p, "scheduling: holding the job engine lock fence="));
         p++)
        fence = strtoull(strchr(p, '=') + 1, NULL, 10);
    free(log);
    cr_assert_gt(fence, 0, "s%d never scheduled", i);
    return fence;
}

/* No step ran twice at once: no try found its step's flock taken, and every two tries with both
 * a start and an end line do not overlap. */
static void assert_no_overlap(const trace_t *t) {
    for (int seq = 0; seq < 3; seq++) {
        cr_assert_eq(count(t, "overlap", seq), 0, "two tries of step %d ran at once", seq);
        int tries = count(t, "start", seq);
        for (int a = 0; a < tries; a++)
            for (int b = a + 1; b < tries; b++) {
                long pa, pb, ea, eb;
                int64_t sa, sb, fa, fb;
                nth(t, "start", seq, a, &pa, &sa);
                nth(t, "start", seq, b, &pb, &sb);
                if (!nth(t, "end", seq, a, &ea, &fa) || !nth(t, "end", seq, b, &eb, &fb))
                    continue;
                cr_assert(fa <= sb || fb <= sa, "step %d: tries %d and %d overlap", seq, a, b);
            }
    }
}

/* The job ended SUCCEED once, under the new leader's claimed token; the interrupted middle step
 * ran again on the new leader only; the store is clean. */
static void check_outcome_from(const char *job, int leader, int old, uint64_t old_fence) {
    wait_job_state(&S[leader], "p", job, "SUCCEED", 60000);
    trace_t t = read_trace(dir);
    assert_no_overlap(&t);
    cr_assert_eq(count(&t, "start", 0), 1, "the first step, SUCCEED before the takeover, reran");
    cr_assert_eq(count(&t, "start", 1), 2, "the interrupted try and the new leader's");
    cr_assert_eq(count(&t, "end", 1), 1, "only the new leader's try of the middle step ended");
    cr_assert_eq(count(&t, "start", 2), 1);
    long pid;
    int64_t ms;
    nth(&t, "start", 0, 0, &pid, &ms);
    cr_assert_eq(pid, server_pid[old], "the first step ran on the first leader");
    nth(&t, "start", 1, 0, &pid, &ms);
    cr_assert_eq(pid, server_pid[old], "the interrupted try ran on the first leader");
    nth(&t, "start", 1, 1, &pid, &ms);
    cr_assert_eq(pid, server_pid[leader], "the middle step was resumed by the new leader");
    nth(&t, "end", 1, 0, &pid, &ms);
    cr_assert_eq(pid, server_pid[leader]);
    nth(&t, "start", 2, 0, &pid, &ms);
    cr_assert_eq(pid, server_pid[leader]);
    /* The transition's own line ("... by another process" is a server noticing it). */
    cr_assert_eq(log_lines(S, N, "job RUNNING -> SUCCEED job=", job), 1, "the job must end once");

    uint64_t new_fence = scheduling_fence(leader);
    if (new_fence == old_fence) {
        /* Only the same holding has the same token: the old leader's session lived on. */
        cr_assert_eq(leader, old, "another server leads with the old leader's token");
        assert_file_contains(S[old].log, "zk: session reconnected");
    } else {
        cr_assert_gt(new_fence, old_fence, "the new holding's token (czxid) is larger");
    }
    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, false, &txn), 0);
    ql_id_t id;
    cr_assert_eq(ql_id_parse(job, &id), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(txn, &id, 0, &j), 0);
    cr_assert_eq(j.state, QL_SUCCEED);
    uint64_t epoch;
    cr_assert_eq(ql_fence_current(txn, &epoch), 0);
    cr_assert_eq(epoch, new_fence, "the store's epoch is the new leader's claimed czxid");
    cr_assert_eq(j.fence, epoch, "the job's last moves were the new leader's");
    ql_job_free(&j);
    ql_txn_abort(txn);
    ql_test_assert_fsck_clean(store);
    ql_store_close(store);
}

/* check_outcome_from, the old leader's token read from its log (its last holding). */
static void check_outcome(const char *job, int leader, int old) {
    check_outcome_from(job, leader, old, scheduling_fence(old));
}

/* Two servers of scheduler (100: election; 0: the job engine lock node): one leads, the other
 * names it; SIGKILL of the leader mid-step, and the other leads once the dead one's session
 * expires, resuming the interrupted step. Prints the takeover (docs/performance.md). */
static void a_killed_leader_is_replaced(int scheduler) {
    const int T = 1000;
    init_servers();
    launch(0, scheduler, T, NULL);
    launch(1, scheduler, T, NULL);
    qd_wait_up(&S[0]);
    qd_wait_up(&S[1]);
    server_pid[0] = (long)S[0].pid;
    server_pid[1] = (long)S[1].pid;
    int old = the_leader(10000), other = 1 - old;
    wait_log(&S[other], "standby: the job engine lock is held by server=", 10000);
    char holder[64];
    snprintf(holder, sizeof holder, "held by server=s%d pid=%ld", old, server_pid[old]);
    assert_file_contains(S[other].log, holder);

    make_model(&S[other], "p", "m", NULL); /* served by the standby, run by the leader */
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[other], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);
    cr_assert_eq(pid, server_pid[old]);

    int64_t t0 = now_ms(), w0 = wall_ms();
    kill(S[old].pid, SIGKILL);
    cr_assert(qd_wait_exit(&S[old], 5000));
    wait_log(&S[other], "scheduling: holding the job engine lock", T + 8000);
    int64_t took = now_ms() - t0;
    int64_t restart = wait_start(dir, 1, 1, &pid, 20000) - w0;
    fprintf(stderr,
            "zk_servers: SIGKILL of the scheduler-%d leader -> the other leads after %lld ms, "
            "the interrupted step's new try after %lld ms (session timeout %d ms)\n",
            scheduler, (long long)took, (long long)restart, T);
    /* The dead leader's node lives until ZooKeeper expires its session. */
    cr_assert_geq(took, T / 2, "led before the dead leader's session could end");
    cr_assert_eq(the_leader(5000), other);
    check_outcome(job, other, old);
    qd_stop_ok(&S[other], 30000);
}

Test(zk_servers, scheduler_100_elects_one_leader_and_a_killed_leader_is_replaced) {
    a_killed_leader_is_replaced(100);
}

Test(zk_servers, scheduler_0_with_zookeeper_a_killed_holder_is_replaced) {
    a_killed_leader_is_replaced(0);
}

Test(zk_servers, scheduler_0_with_zookeeper_hands_over_at_once_on_a_graceful_stop) {
    const int T = 4000;
    init_servers();
    start(0, 0, T);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    start(1, 0, T);
    char holder[96];
    snprintf(holder, sizeof holder, "standby: the job engine lock is held by server=s0 pid=%ld",
             server_pid[0]);
    wait_log(&S[1], holder, 10000);
    cr_assert_eq(the_leader(5000), 0);

    make_model(&S[0], "p", "m", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);
    cr_assert_eq(pid, server_pid[0]);

    qd_stop_ok(&S[0], 30000); /* pauses its step, releases the lock, exits */
    int64_t t0 = now_ms();
    wait_log(&S[1], "scheduling: holding the job engine lock", T);
    int64_t took = now_ms() - t0;
    fprintf(stderr,
            "zk_servers: graceful stop of the scheduler-0 holder -> the standby schedules %lld "
            "ms after it exited (session timeout %d ms)\n",
            (long long)took, T);
    cr_assert_lt(took, T / 2, "the standby waited for the session to expire");
    cr_assert_eq(the_leader(5000), 1);
    check_outcome(job, 1, 0);
    qd_stop_ok(&S[1], 30000);
}

/* The job's exec_start_time (0: not started) as server q lists it. */
static int64_t exec_start_on(const qd_t *q, const char *id) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs?project=p&key=%.13s&page_size=100", id);
    json_t *d = api_ok(q, "GET", path, NULL);
    int64_t t = -1;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(d, "value"), i, j) {
        if (!strcmp(jstr(j, "id"), id))
            t = jint(j, "exec_start_time");
    }
    json_decref(d);
    cr_assert_geq(t, 0, "job %s is not listed", id);
    return t;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* 10 jobs of three steps: 60 trace lines, within what read_trace keeps (64). */
#define SERIAL_BUILDS 10

/* Serial builds POSTed to the server that does not lead, under `scheduler`, with Kylin's poll
 * interval of 30 s: from each answer to the job's exec_start_time on the leader, median < 100 ms.
 */
static void posted_to_the_other_starts_at_once(int scheduler) {
    static const char *const poll30[] = {"kylin.job.scheduler.poll-interval-second=30", NULL};
    init_servers();
    write_file(path_in(dir, "long.marker"), ""); /* no step sleeps here */
    launch(0, scheduler, 4000, poll30);
    qd_wait_up(&S[0]);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    launch(1, scheduler, 4000, poll30);
    qd_wait_up(&S[1]);
    server_pid[0] = (long)S[0].pid;
    server_pid[1] = (long)S[1].pid;
    int leader = the_leader(10000), other = 1 - leader;
    make_model(&S[other], "p", "m", NULL);
    int64_t lat[SERIAL_BUILDS];
    for (int i = 0; i < SERIAL_BUILDS; i++) {
        char id[64];
        int64_t sent = wall_ms();
        snprintf(id, sizeof id, "%s", build(&S[other], "p", "m", D0 + i * DAY, D0 + (i + 1) * DAY));
        int64_t deadline = now_ms() + 10000, started;
        while ((started = exec_start_on(&S[other], id)) == 0) {
            cr_assert_lt(now_ms(), deadline, "build %d (job %s) did not start within 10 s", i, id);
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL); /* the next look; the figure is the leader's own timestamp */
        }
        lat[i] = started - sent;
        /* One job at a time: the steps' trace locks are per step, not per job. */
        wait_job_state(&S[other], "p", id, "SUCCEED", 30000);
    }
    qsort(lat, SERIAL_BUILDS, sizeof lat[0], cmp_i64);
    int64_t median = lat[SERIAL_BUILDS / 2];
    fprintf(stderr,
            "zk_servers: scheduler %d on %s, %d builds POSTed to the server that does not lead: "
            "from the request to exec_start_time min %lld, median %lld, max %lld ms\n",
            scheduler, ql_test_store_backend(), SERIAL_BUILDS, (long long)lat[0], (long long)median,
            (long long)lat[SERIAL_BUILDS - 1]);
    cr_assert_lt(median, 100, "median %lld ms", (long long)median);
    /* Every try ran on the leader. */
    trace_t t = read_trace(dir);
    cr_assert_eq(count(&t, "start", 0), SERIAL_BUILDS);
    for (int i = 0; i < t.n; i++)
        cr_assert_eq(t.e[i].pid, server_pid[leader], "a step ran on pid %ld (%s)", t.e[i].pid,
                     t.e[i].what);
    qd_stop_ok(&S[other], 30000);
    qd_stop_ok(&S[leader], 30000);
}

Test(zk_servers, scheduler_100_a_build_posted_to_the_other_server_starts_at_once) {
    posted_to_the_other_starts_at_once(100);
}

Test(zk_servers, scheduler_0_a_build_posted_to_the_other_server_starts_at_once) {
    posted_to_the_other_starts_at_once(0);
}

/* The pause nemesis: the leader is stopped (SIGSTOP) in the middle of a step for twice the
 * session timeout. The other server leads once the paused one's session has expired, and runs
 * the step again (at once on LMDB, where it kills the old try's process group on this host;
 * after the takeover grace on PostgreSQL, here 2T: the takeover comes at least T after the
 * pause began, so the new try starts at least T after the paused leader is continued, time for
 * it to stop its own try). Continued, the old leader finds its session ended or its late write
 * refused by fencing, steps down and stands by. Nothing overlaps and the job ends once. */
Test(zk_servers, scheduler_100_leader_paused_past_its_session_is_replaced_and_steps_down) {
    const int T = 1000;
    init_servers();
    const char *grace[] = {"qilin.cluster.takeover-grace-ms=2000", NULL};
    launch(0, 100, T, grace);
    qd_wait_up(&S[0]);
    server_pid[0] = (long)S[0].pid;
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    launch(1, 100, T, grace);
    qd_wait_up(&S[1]);
    server_pid[1] = (long)S[1].pid;
    cr_assert_eq(the_leader(5000), 0);

    make_model(&S[0], "p", "m", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);
    cr_assert_eq(pid, server_pid[0]);

    int64_t t0 = now_ms();
    kill(S[0].pid, SIGSTOP);
    wait_log(&S[1], "scheduling: holding the job engine lock", T + 8000);
    int64_t took = now_ms() - t0;
    cr_assert_geq(took, T / 2, "led before the paused leader's session could end");
    /* The pause lasts 2T whatever happens meanwhile: its length is what is tested. */
    while (now_ms() - t0 < 2 * T) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    trace_t t = read_trace(dir);
    cr_assert_eq(count(&t, "overlap", 1), 0);
    kill(S[0].pid, SIGCONT);
    fprintf(stderr,
            "zk_servers: SIGSTOP of the scheduler-100 leader for %d ms -> the other led after "
            "%lld ms\n",
            2 * T, (long long)took);
    wait_log(&S[0], "lost the job engine lock", 10000);
    char holder[64];
    snprintf(holder, sizeof holder, "held by server=s1 pid=%ld", server_pid[1]);
    wait_log(&S[0], holder, 10000);
    cr_assert_eq(the_leader(5000), 1);
    check_outcome(job, 1, 0);
    cr_assert_eq(the_leader(1000), 1, "the continued server stays a standby");
    qd_stop_ok(&S[0], 30000);
    qd_stop_ok(&S[1], 30000);
}

/* ZooKeeper itself stopped (SIGSTOP of its server) for 2.5 session timeouts while the leader runs
 * a step: the leader suspends (picks nothing new), and once suspended for
 * qilin.cluster.suspend-kill-ms it steps down and stops its step, before ZooKeeper could let
 * another server lead. When ZooKeeper runs again, each session is either expired or revived
 * (docs/zookeeper.md, What none of this guarantees): one server leads, with a larger token, or
 * the old leader with its own token when its session lived on (its node was kept, not left
 * behind as a node nobody acts on); it runs the step again and finishes the job; nothing
 * overlaps. */
Test(zk_servers, zookeeper_paused_past_the_session_timeout_stops_the_leader_then_one_leads) {
    const int T = 1000;
    /* The session's states drive the node the same way on either store: LMDB only, to keep the
     * ZooKeeper suite short. */
    ql_test_require_backend("lmdb");
    init_servers();
    /* A server of this test's own: stopping the fixture's would stop the other tests' too. */
    ql_test_zk_private_start(path_in(dir, "zk"));
    launch(0, 100, T, NULL);
    qd_wait_up(&S[0]);
    server_pid[0] = (long)S[0].pid;
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    launch(1, 100, T, NULL);
    qd_wait_up(&S[1]);
    server_pid[1] = (long)S[1].pid;
    wait_log(&S[1], "standby: the job engine lock is held by server=s0", 10000);
    uint64_t first = scheduling_fence(0);

    make_model(&S[0], "p", "m", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);
    cr_assert_eq(pid, server_pid[0]);

    zk_stopped = ql_test_zk_server_pid();
    int64_t t0 = now_ms();
    cr_assert_eq(kill(zk_stopped, SIGSTOP), 0);
    /* Suspended after 2T/3 without an answer, doubtful T/4 later: well inside the pause. */
    wait_log(&S[0], "suspended: the ZooKeeper connection is lost", 2 * T);
    wait_log(&S[0], "lost the job engine lock", 2 * T);
    int64_t stepped_down = now_ms() - t0;
    assert_file_contains(S[0].log, "qilin.cluster.suspend-kill-ms");
    /* The pause lasts 2.5T whatever happens meanwhile: its length is what is tested. */
    while (now_ms() - t0 < 5 * T / 2) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kill(zk_stopped, SIGCONT);
    zk_stopped = 0;
    fprintf(stderr,
            "zk_servers: ZooKeeper stopped for %d ms -> the leader stepped down after %lld ms\n",
            5 * T / 2, (long long)stepped_down);
    int leader = the_leader(10000);
    check_outcome_from(job, leader, 0, first);
    qd_stop_ok(&S[0], 30000);
    qd_stop_ok(&S[1], 30000);
}

/* ---- refusals ---- */

/* Starts server 0 with settings (NULL-terminated "KEY=VALUE" list) and asserts that it refuses
 * to start, with needle in its stderr. */
static void assert_refused(int scheduler, const char *const *more, const char *needle) {
    /* Refused for the configuration alone, the same on either store: checked on LMDB only. */
    ql_test_require_backend("lmdb");
    launch(0, scheduler, 2000, more);
    cr_assert_not(qd_wait_listening(&S[0]), "qilind started");
    cr_assert(qd_wait_exit(&S[0], 20000));
    cr_assert(WIFEXITED(S[0].exit_status) && WEXITSTATUS(S[0].exit_status) != 0);
    assert_file_contains(S[0].log, needle);
}

Test(zk_servers, scheduler_100_without_a_connect_string_is_refused) {
    init_servers();
    const char *more[] = {"kylin.env.zookeeper-connect-string=", NULL};
    assert_refused(100, more,
                   "kylin.job.scheduler.default: 100 (leader election) needs ZooKeeper: set "
                   "kylin.env.zookeeper-connect-string");
}

Test(zk_servers, scheduler_2_without_a_connect_string_is_refused) {
    init_servers();
    const char *more[] = {"kylin.env.zookeeper-connect-string=", NULL};
    assert_refused(2, more,
                   "kylin.job.scheduler.default: 2 (distributed job servers, a lock per job) "
                   "needs ZooKeeper: set kylin.env.zookeeper-connect-string");
}

Test(zk_servers, a_suspend_kill_not_shorter_than_the_session_timeout_is_refused) {
    init_servers();
    const char *more[] = {"qilin.cluster.suspend-kill-ms=2000", NULL};
    assert_refused(100, more,
                   "qilin.cluster.suspend-kill-ms: 2000 ms must be shorter than "
                   "qilin.cluster.session-timeout-ms (2000 ms)");
}

Test(zk_servers, a_server_without_zookeeper_is_refused_on_a_store_coordinated_by_it) {
    init_servers();
    start(0, 100, 2000);
    wait_log(&S[0], "recorded how this store's job servers coordinate: scheduler=100 lock=zk",
             5000);
    qd_stop_ok(&S[0], 30000);
    qd_t *q = &S[1];
    const char *more[] = {"--set", "qilin.server.id=s1", NULL};
    qd_start_async(q, more);
    cr_assert_not(qd_wait_listening(q), "qilind started with the store's lock");
    cr_assert(qd_wait_exit(q, 20000));
    cr_assert(WIFEXITED(q->exit_status) && WEXITSTATUS(q->exit_status) != 0);
    char want[400];
    snprintf(want, sizeof want,
             "this server is configured as 'scheduler=0 lock=%s', but the job servers of this "
             "store coordinate as 'scheduler=100 lock=zk zk-path=%s/qilin'",
             strcmp(ql_test_store_backend(), "lmdb") ? "pg" : "file", base);
    assert_file_contains(q->log, want);
}

Test(zk_servers, another_cluster_name_is_refused_on_a_store_coordinated_by_zookeeper) {
    init_servers();
    start(0, 0, 2000);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    const char *more[] = {"kylin.server.cluster-name=other", NULL};
    launch(1, 0, 2000, more);
    cr_assert_not(qd_wait_listening(&S[1]), "qilind started in another cluster");
    cr_assert(qd_wait_exit(&S[1], 20000));
    cr_assert(WIFEXITED(S[1].exit_status) && WEXITSTATUS(S[1].exit_status) != 0);
    char want[400];
    snprintf(want, sizeof want,
             "configured as 'scheduler=0 lock=zk zk-path=%s/other', but the job servers of this "
             "store coordinate as 'scheduler=0 lock=zk zk-path=%s/qilin'",
             base, base);
    assert_file_contains(S[1].log, want);
    qd_stop_ok(&S[0], 30000);
}

/* ---- the ensemble's identity ---- */

#define QILIN QL_BUILD_DIR "/tools/qilin"
#define OTHER_ENSEMBLE "0123456789abcdef0123456789abcdef"

/* The store's recorded ZooKeeper ensemble id (QL_LOCK_ZK_ENSEMBLE_KEY); with put, sets it
 * first. */
static void store_ensemble(const char *put, char *out, size_t cap) {
    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, put != NULL, &txn), 0);
    if (put)
        cr_assert_eq(ql_meta_put_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, put), 0);
    out[0] = '\0';
    int rc = ql_meta_get_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, out, cap);
    cr_assert(rc == 0 || rc == QL_ENOTFOUND, "%d", rc);
    if (put)
        cr_assert_eq(ql_txn_commit(txn), 0);
    else
        ql_txn_abort(txn);
    ql_store_close(store);
}

/* The first server records the ensemble's fence_id in the store. A reset or replaced ZooKeeper
 * has another id; the test makes the two differ from the store's side (the fixture's ZooKeeper
 * cannot be replaced under a running suite): a server then serves but never claims, saying why
 * and naming `qilin cluster reset-coordination`. After that command, the next server adopts the
 * ensemble it finds and leads. The check does not depend on the store: LMDB only. */
Test(zk_servers, another_zookeeper_ensemble_is_refused_until_reset_coordination) {
    ql_test_require_backend("lmdb");
    init_servers();
    start(0, 100, 2000);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    const char *rec = "recorded the ZooKeeper ensemble of this store's job servers: fence_id=";
    wait_log(&S[0], rec, 5000);
    char *log = read_file(S[0].log);
    char id[33];
    snprintf(id, sizeof id, "%s", strstr(log, rec) + strlen(rec));
    free(log);
    cr_assert_eq(strlen(id), 32, "%s", id);
    char got[64];
    store_ensemble(NULL, got, sizeof got);
    cr_assert_str_eq(got, id, "the store records the ensemble's id");
    qd_stop_ok(&S[0], 30000);

    store_ensemble(OTHER_ENSEMBLE, got, sizeof got);
    start(1, 100, 2000);
    char want[300];
    snprintf(want, sizeof want,
             "ZooKeeper was reset or replaced: its ensemble id (the fence_id node) is %s, but this "
             "store's job servers recorded %s",
             id, OTHER_ENSEMBLE);
    wait_log(&S[1], want, 10000);
    assert_file_contains(S[1].log, "run `qilin cluster reset-coordination`");
    /* It keeps refusing: no holding, at every look over a second. */
    int64_t until = now_ms() + 1000;
    while (now_ms() < until) {
        cr_assert_not(is_master(&S[1]), "a server led on another ensemble's record");
        poll_pause();
    }
    cr_assert_not(file_contains(S[1].log, "scheduling: holding the job engine lock"));
    cr_assert_eq(log_lines(&S[1], 1, "ZooKeeper was reset or replaced", ""), 1,
                 "the refusal is logged once, not at every poll");
    assert_file_contains(S[1].log, "standby: the job engine lock is held by nobody: this server "
                                   "does not claim it on another ZooKeeper ensemble");
    qd_stop_ok(&S[1], 30000);
    store_ensemble(NULL, got, sizeof got);
    cr_assert_str_eq(got, OTHER_ENSEMBLE, "a refused server changed the record");

    char cmd[800], said[120];
    const char *out = path_in(dir, "cli.out");
    snprintf(cmd, sizeof cmd, "%s cluster reset-coordination %s > %s", QILIN, S[0].data, out);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", cmd, st);
    snprintf(said, sizeof said, "forgot the ZooKeeper ensemble fence_id=%s;", OTHER_ENSEMBLE);
    assert_file_contains(out, said);
    /* The first server's claim put a czxid in the epoch: the move to another ensemble resets it. */
    assert_file_contains(out, "reset the fencing epoch from ");
    store_ensemble(NULL, got, sizeof got);
    cr_assert_str_eq(got, "", "reset-coordination forgets the ensemble");
    start(1, 100, 2000);
    wait_log(&S[1], "scheduling: holding the job engine lock", 10000);
    char adopted[120];
    snprintf(adopted, sizeof adopted, "%s%s", rec, id);
    assert_file_contains(S[1].log, adopted);
    store_ensemble(NULL, got, sizeof got);
    cr_assert_str_eq(got, id, "the next server adopts the ensemble it finds");
    qd_stop_ok(&S[1], 30000);
}
