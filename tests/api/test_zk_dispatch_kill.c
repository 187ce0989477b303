/*
 * The scheduler-100 leader stopped at random moments while its dispatcher submits, on ZooKeeper:
 * exactly one INC_BUILD per cycle (docs/zookeeper.md, Tests). api_test_zk_dispatch_kill, and
 * @pg; it needs the zk fixture.
 *
 * Three real qilind (s0, s1, s2) under scheduler 100 on the fixture's ZooKeeper (a base path of
 * this test's own, session timeout T), on one store (one LMDB data directory, or one PostgreSQL
 * schema), the dispatcher scanning every 100 ms. Project p has the automatic build on and MODELS
 * daily models. As in api_test_pg_dispatch_kill (whose approach this is), each round makes a new
 * cycle due for every model at once by rewriting every model's auto_segment_build in one
 * transaction (the day 3r+1 days back in round r); the leader's next scan hands MODELS builds to
 * its writer. At a random moment (QL_CRASH_SEED, printed, replays them) the leader is stopped.
 * On PostgreSQL the writer commits the builds 48 per transaction, and the stop comes a random
 * delay after the first of them is visible, so that it often lands between two commits. On LMDB
 * the writer commits them all in one transaction: the stop comes 0 to 150 ms after the new cycle
 * is in the store, before the leader's scan, between the scan and the commit, or after it.
 * Another server leads and submits what is missing; the stopped one is restarted and joins the
 * election again; the round ends when every model has its build of the round.
 *
 * 55 rounds on LMDB: 50 SIGKILLs and 5 SIGTERMs (a graceful stop, the other way a leader goes);
 * 11 on PostgreSQL (10 and 1), whose 50 kills during dispatch are api_test_pg_dispatch_kill@pg's
 * on its own lock. After a SIGKILL nobody leads until ZooKeeper expires the dead leader's
 * session, about T (here 3 s) later. In one kill round of 11 the test waits for that expiry; in
 * the others, once the killed process has exited, it deletes the dead server's election node
 * itself (a node whose data names the dead pid: nothing a live server holds), which is what the
 * expiry does T later, so that 50 kills fit the ZooKeeper suite's budget. The expiry itself, and
 * its timing, are what api_test_zk_servers and scheduler_test_zk_cluster test; here it is what
 * the leader left behind in the store that is tested.
 *
 * What each process did is recorded per round and printed: which server (id, pid) led and was
 * stopped how and when, the round's builds in the store when it had exited (after a SIGKILL,
 * exactly the ones it committed: nobody else leads before its session expires), the "cycle
 * SUBMITTED" lines of the round's day each server logged, and who led next, how fast. At the
 * end:
 *   - every model has, for every round, exactly one INC_BUILD job and one segment of that
 *     round's day, submitted by System and ended SUCCEED / READY; nothing else exists;
 *   - no server logged a (model, day) as SUBMITTED twice, nor two servers the same one;
 *   - a stopped leader logged no more submissions than the store had at its exit;
 *   - never two servers led at once for longer than the session timeout (every look at the
 *     /metrics gauges), and each stop was followed by exactly one new holding of the lock;
 *     fsck is clean;
 *   - at least one stop came before the round's builds were all committed (on PostgreSQL:
 *     after some of them, on LMDB: before the one commit).
 * The builds run a noop step, so the jobs also run, and are taken over, while the leaders go.
 */
#include "dispatch_rounds.h"
#include "rest_util.h"
#include "storage/storage.h"
#include "tests/common/store_util.h"
#include "tests/common/zk_util.h"

#define N 3
#define MODELS 100
#define MAX_ROUNDS 55     /* on LMDB; 11 on PostgreSQL (see above) */
#define STOPS_PER_KIND 11 /* in every 11 rounds: 1 SIGTERM, 1 kill waiting for the expiry */
/* qilin.cluster.session-timeout-ms. A server closes its own session when its loop stalls for
 * T / 2. Under the sanitizer on a busy machine, with T = 1 s, the next leader's loop stalled
 * about 0.9 s while a SIGTERMed leader stopped (until it had exited), so it lost its new
 * session and lock at once, and a round had two new holdings instead of one. */
#define T_MS 3000
#define DAY 86400000LL
#define OFFSET(r) (3 * (r) + 1)
#define MAX_OFFSET (OFFSET(MAX_ROUNDS) + 2)
_Static_assert(MAX_OFFSET <= DR_MAX_OFFSET, "the checks count days back up to DR_MAX_OFFSET");
/* On PostgreSQL, the stop's delay after the round's first visible build, at most max_delay ms:
 * the bound shrinks by a quarter after a stop that came after the last commit and grows by 5 ms
 * after one that came before (api_test_pg_dispatch_kill explains why). */
#define MAX_DELAY_MS 60

static qd_t S[N];
static char dir[256];
static char base[64];

static void teardown(void) {
    for (int i = 0; i < N; i++)
        qd_cleanup(&S[i]);
    rm_rf(dir);
}

TestSuite(zk_dispatch_kill, .fini = teardown, .timeout = 300);

/* Launches server i under scheduler 100 on the fixture; qd_wait_up(&S[i]) waits for it. */
static void launch_server(int i) {
    static char set[N][6][300];
    snprintf(set[i][0], sizeof set[i][0], "qilin.server.id=s%d", i);
    snprintf(set[i][1], sizeof set[i][1], "qilin.jobs.templates=%s/jobs.yaml", dir);
    snprintf(set[i][2], sizeof set[i][2], "kylin.env.zookeeper-connect-string=%s",
             ql_test_zk_connect());
    snprintf(set[i][3], sizeof set[i][3], "kylin.env.zookeeper-base-path=%s", base);
    snprintf(set[i][4], sizeof set[i][4], "qilin.cluster.session-timeout-ms=%d", T_MS);
    snprintf(set[i][5], sizeof set[i][5], "kylin.job.scheduler.default=100");
    const char *extra[] = {"--set", set[i][0], "--set", set[i][1], "--set", set[i][2], "--set",
                           set[i][3], "--set", set[i][4], "--set", set[i][5], "--set",
                           "kylin.model.auto-segment-build.dispatcher-interval-ms=100", "--set",
                           "kylin.job.max-concurrent-jobs=50",
                           /* Noop steps: nothing of a stopped leader's try can still run. */
                           "--set", "qilin.cluster.takeover-grace-ms=0", NULL};
    S[i].port = 0; /* known again once it serves (qd_wait_up) */
    qd_start_async(&S[i], extra);
}

/* The leader among the running servers that serve (their /metrics gauges), polled until there
 * is exactly one. Two leaders may show in one look without two leading at once: the gauges are
 * read one after another, so on a starved machine the first answer can be a moment old when the
 * second comes, and a leader whose session ended hears of it within the session timeout (its
 * fencing token is stale meanwhile, which the store's checks cover). Two leaders in every look
 * for longer than T_MS is the failure. The server restarted last round counts as
 * soon as it serves: it joined the election behind the others, but it leads when they lose
 * their sessions meanwhile (a watchdog closes the session of a server whose loop stalls for
 * half the session timeout, which a busy machine under the sanitizer does). A server that does
 * not serve yet leads nothing: qilind's loop, which runs the election, starts after it listens. */
static int the_leader(int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms, two_since = -1;
    for (;;) {
        int n = 0, which = -1;
        for (int i = 0; i < N; i++) {
            if (S[i].pid <= 0)
                continue;
            if (S[i].port == 0) {
                if (!dr_serving(&S[i]))
                    continue;
                qd_wait_up(&S[i]); /* learns its port */
            }
            resp_t r = http_req(&S[i], "GET", "/metrics", NULL, NULL, NULL);
            cr_assert_eq(r.status, 200, "%s", r.body ? r.body : "");
            if (strstr(r.body, "\nqilin_scheduler_master 1\n")) {
                n++;
                which = i;
            }
            resp_free(&r);
        }
        if (n < 2)
            two_since = -1;
        else if (two_since < 0)
            two_since = now_ms();
        cr_assert(n < 2 || now_ms() - two_since <= T_MS,
                  "two servers lead at once for more than the session timeout (%d ms)", T_MS);
        if (n == 1)
            return which;
        cr_assert_lt(now_ms(), deadline, "no server leads after %d ms", timeout_ms);
        poll_pause();
    }
}

/* ---- the store, as the test sees it ---- */

static ql_id_t model_ids[MODELS];

/* The jobs of project p (every round before r has exactly MODELS when round r runs). */
static long long project_jobs(ql_store_t *store) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t n = 0;
    cr_assert_eq(ql_job_count(t, "p", 0xffffffffu, &n), 0);
    ql_txn_abort(t);
    return (long long)n;
}

/* ---- what each round did ---- */

typedef struct round {
    int64_t day;         /* the round's target day (start, epoch ms) */
    bool graceful;       /* stopped by SIGTERM, else SIGKILL */
    bool expired;        /* a SIGKILL followed by the session's expiry, not the node's delete */
    int stopped;         /* index of the leader stopped */
    long stopped_pid;    /* its pid */
    int64_t delay_ms;    /* from its first visible build to the signal */
    long long at_exit;   /* the round's builds in the store when it had exited */
    int logged[N];       /* the round's "cycle SUBMITTED" lines in each server's log */
    int successor;       /* the new leader */
    int64_t takeover_ms; /* from the signal to the new leader's gauge */
} round_t;

static round_t R[MAX_ROUNDS];
static int rounds; /* this backend's */

/* Whether line is a "cycle SUBMITTED" line of day (or the next, if UTC midnight passed). */
static bool submitted_of(const char *line, int64_t day) {
    if (!strstr(line, "dispatcher: cycle SUBMITTED "))
        return false;
    for (int k = 0; k < 2; k++) {
        char ts[40], want[80];
        ql_log_format_time(day + k * DAY, ts, sizeof ts);
        snprintf(want, sizeof want, "target=[%s,", ts);
        if (strstr(line, want))
            return true;
    }
    return false;
}

/* Counts server i's "cycle SUBMITTED" lines of day (its whole log, every start of it) into
 * *n, and asserts that no model appears twice among them nor in seen (the models some server
 * already logged for this day), which it extends. */
static void logged_submissions(int i, int64_t day, char seen[MODELS], int *n) {
    char *s = read_file(S[i].log);
    cr_assert_not_null(s);
    *n = 0;
    /* memchr over the known length, not strchr: under the sanitizer's strict string checks
     * every strchr reads the whole rest of the string, which makes this loop quadratic. */
    char *end = s + strlen(s);
    for (char *line = s; line < end;) {
        char *eol = memchr(line, '\n', (size_t)(end - line));
        if (eol)
            *eol = '\0';
        const char *m = strstr(line, " model=m");
        if (submitted_of(line, day) && m) {
            int k = atoi(m + strlen(" model=m"));
            cr_assert(k >= 0 && k < MODELS, "%s", line);
            cr_assert_not(seen[k], "m%03d's cycle logged SUBMITTED twice (the second by s%d)", k,
                          i);
            seen[k] = 1;
            (*n)++;
        }
        line = eol ? eol + 1 : end;
    }
    free(s);
}

/* Polls until the round's builds (the project's beyond the earlier rounds') number at least n;
 * returns when (monotonic ms). Meanwhile, every 20 looks, waits for `starting` (may be NULL)
 * once it serves, so that its start costs the round nothing. */
static int64_t wait_round_jobs(ql_store_t *store, int r, long long n, int timeout_ms,
                               qd_t *starting) {
    int64_t deadline = now_ms() + timeout_ms;
    for (int i = 0;; i++) {
        long long have = project_jobs(store) - (long long)r * MODELS;
        if (have >= n)
            return now_ms();
        cr_assert_lt(now_ms(), deadline, "round %d: %lld of %lld builds after %d ms", r, have, n,
                     timeout_ms);
        if (starting && i % 20 == 0 && dr_serving(starting)) {
            qd_wait_up(starting);
            starting = NULL;
        }
        struct timespec ts = {0, 1000 * 1000}; /* a tight poll: the stop's moment hangs on it */
        nanosleep(&ts, NULL);
    }
}

/* Waits until the moment of round r's stop; returns its delay (ms). On PostgreSQL: a random
 * delay after the round's first build is visible, while the writer commits the rest 48 at a
 * time. On LMDB the writer commits all of a scan's builds in one transaction, so there is no
 * moment between two of its commits: the stop comes a random 0 to 150 ms after the new cycle is
 * in the store, before the leader's scan (every 100 ms), between its scan and its commit, or
 * after. */
static int64_t stop_moment(ql_store_t *store, int r, int64_t retuned, int64_t max_delay,
                           qd_t *restarted) {
    bool lmdb = !strcmp(ql_test_store_backend(), "lmdb");
    int64_t from = lmdb ? retuned : wait_round_jobs(store, r, 1, 20000, restarted);
    int64_t delay = rand() % ((lmdb ? 150 : max_delay) + 1);
    while (now_ms() < from + delay) {
        struct timespec ts = {0, 200 * 1000}; /* the stop's moment, not a wait for a condition */
        nanosleep(&ts, NULL);
    }
    return delay;
}

static void run_round(ql_store_t *store, int r, int *leader, int64_t *max_delay) {
    round_t *o = &R[r];
    int64_t offset = OFFSET(r);
    o->day = wall_ms() / DAY * DAY - offset * DAY;
    o->graceful = r % STOPS_PER_KIND == STOPS_PER_KIND - 1;
    o->expired = r % STOPS_PER_KIND == STOPS_PER_KIND / 2;
    qd_t *restarted = r > 0 ? &S[R[r - 1].stopped] : NULL;
    bool lmdb = !strcmp(ql_test_store_backend(), "lmdb");
    /* On LMDB the round's clock starts now, whether or not the server restarted last round
     * serves yet: it is not the one stopped, and it is waited for once the round's new leader
     * leads. On PostgreSQL it is waited for while the round's first build is awaited. */
    if (restarted && lmdb && dr_serving(restarted))
        qd_wait_up(restarted);
    dr_retune_models(store, model_ids, MODELS, offset);
    o->delay_ms = stop_moment(store, r, now_ms(), *max_delay, restarted);
    if (restarted && !lmdb)
        qd_wait_up(restarted);
    o->stopped = *leader;
    o->stopped_pid = (long)S[*leader].pid;
    int64_t t0 = now_ms();
    cr_assert_eq(kill(S[*leader].pid, o->graceful ? SIGTERM : SIGKILL), 0);
    cr_assert(qd_wait_exit(&S[*leader], 20000), "round %d: s%d did not exit", r, *leader);
    if (o->graceful)
        cr_assert(WIFEXITED(S[*leader].exit_status) && WEXITSTATUS(S[*leader].exit_status) == 0,
                  "round %d: s%d's graceful stop exited with status %d", r, *leader,
                  S[*leader].exit_status);
    o->at_exit = project_jobs(store) - (long long)r * MODELS;
    if (!o->graceful && !o->expired) {
        char leader_dir[128];
        snprintf(leader_dir, sizeof leader_dir, "%s/qilin/job_engine/leader", base);
        /* None when ZooKeeper ended the session already (a slow round): nothing to do. */
        cr_assert_leq(ql_test_zk_delete_nodes_of(leader_dir, o->stopped_pid), 1);
    }
    o->successor = the_leader(10000);
    o->takeover_ms = now_ms() - t0;
    if (restarted && restarted->port == 0)
        qd_wait_up(restarted);
    /* Restarted once another server leads: it joins the election behind it. */
    launch_server(o->stopped);
    wait_round_jobs(store, r, MODELS, 20000, NULL);
    *leader = o->successor;
    if (o->at_exit >= MODELS)
        *max_delay = *max_delay * 3 / 4 > 2 ? *max_delay * 3 / 4 : 2;
    else
        *max_delay = *max_delay + 5 < MAX_DELAY_MS ? *max_delay + 5 : MAX_DELAY_MS;
}

/* ---- the end ---- */

static int unfinished(ql_store_t *store) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t n = 0;
    cr_assert_eq(ql_job_count(t, "p", ~(1u << QL_SUCCEED), &n), 0);
    ql_txn_abort(t);
    return (int)n;
}

static void check_store(ql_store_t *store) {
    int64_t deadline = now_ms() + 60000;
    int left;
    while ((left = unfinished(store)) > 0) {
        cr_assert_lt(now_ms(), deadline, "%d jobs have not ended SUCCEED", left);
        poll_pause();
    }
    int64_t days[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        days[r] = R[r].day;
    dr_check_models(store, days, rounds, MODELS);
    cr_assert_eq(project_jobs(store), (long long)MODELS * rounds);
    ql_test_assert_fsck_clean(store);
}

/* Reads back and prints what every server logged of each round. */
static void report_rounds(void) {
    for (int r = 0; r < rounds; r++) {
        round_t *o = &R[r];
        char seen[MODELS] = {0};
        for (int i = 0; i < N; i++)
            logged_submissions(i, o->day, seen, &o->logged[i]);
        cr_assert_leq(o->logged[o->stopped], o->at_exit,
                      "round %d: s%d logged %d submissions, the store had %lld at its exit", r,
                      o->stopped, o->logged[o->stopped], o->at_exit);
        fprintf(stderr,
                "zk_dispatch_kill: round %d: day %lld: s%d (pid %ld) %s %lld ms after %s; %lld of "
                "%d in the store at its exit; SUBMITTED logged by s0 %d, s1 %d, "
                "s2 %d; s%d led %lld ms after the signal\n",
                r, (long long)(o->day / DAY), o->stopped, o->stopped_pid,
                o->graceful  ? "SIGTERM"
                : o->expired ? "SIGKILL (expiry)"
                             : "SIGKILL",
                (long long)o->delay_ms,
                strcmp(ql_test_store_backend(), "lmdb") ? "its first build" : "the new cycle",
                o->at_exit, MODELS, o->logged[0], o->logged[1], o->logged[2], o->successor,
                (long long)o->takeover_ms);
    }
}

Test(zk_dispatch_kill, leaders_stopped_during_submissions_leave_one_build_per_cycle) {
    ql_test_zk_base(base, sizeof base);
    make_tmpdir(dir, sizeof dir);
    write_file(path_in(dir, "jobs.yaml"),
               "templates:\n  INC_BUILD:\n    steps:\n      - {name: s, kind: noop}\n");
    for (int i = 0; i < N; i++) {
        qd_init(&S[i]);
        if (i == 0)
            continue;
        if (!strcmp(ql_test_store_backend(), "lmdb"))
            snprintf(S[i].data, sizeof S[i].data, "%s", S[0].data);
        else
            ql_test_store_share(S[i].data, S[0].data);
    }
    launch_server(0);
    qd_wait_up(&S[0]);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    for (int i = 1; i < N; i++)
        launch_server(i);
    for (int i = 1; i < N; i++)
        qd_wait_up(&S[i]);
    int leader = the_leader(10000);
    cr_assert_eq(leader, 0);
    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
    dr_create_models(store, model_ids, MODELS);
    if (strcmp(ql_test_store_backend(), "lmdb"))
        dr_slow_build_inserts(S[0].data);

    unsigned seed =
        getenv("QL_CRASH_SEED") ? (unsigned)atoi(getenv("QL_CRASH_SEED")) : (unsigned)time(NULL);
    bool lmdb = !strcmp(ql_test_store_backend(), "lmdb");
    rounds = lmdb ? MAX_ROUNDS : STOPS_PER_KIND;
    fprintf(stderr, "zk_dispatch_kill: QL_CRASH_SEED=%u, session timeout %d ms, on %s\n", seed,
            T_MS, ql_test_store_backend());
    srand(seed);
    int64_t began = now_ms(), max_delay = MAX_DELAY_MS;
    for (int r = 0; r < rounds; r++)
        run_round(store, r, &leader, &max_delay);
    int64_t took = now_ms() - began;
    qd_wait_up(&S[R[rounds - 1].stopped]);

    report_rounds();
    int holdings = 0, during = 0, kills = 0, expiries = 0;
    for (int i = 0; i < N; i++)
        holdings += dr_count_lines(S[i].log, "node: scheduling: holding the job engine lock");
    cr_assert_eq(holdings, rounds + 1, "one holding at the start and one per stop");
    for (int r = 0; r < rounds; r++) {
        during += lmdb ? R[r].at_exit == 0 : R[r].at_exit > 0 && R[r].at_exit < MODELS;
        kills += !R[r].graceful;
        expiries += R[r].expired;
    }
    cr_assert_eq(kills, lmdb ? 50 : 10);
    fprintf(stderr,
            "zk_dispatch_kill: %d rounds (%d SIGKILL, %d of them waiting for the expiry, %d "
            "SIGTERM) in %lld ms; %d stops came before the round's builds were all committed "
            "(%s)\n",
            rounds, kills, expiries, rounds - kills, (long long)took, during,
            lmdb ? "none of them" : "some but not all of them");
    check_store(store);
    ql_store_close(store);
    cr_assert_geq(during, 1, "no stop came before the round's builds were all committed");
    for (int i = 0; i < N; i++)
        qd_stop_ok(&S[i], 30000);
}
