/*
 * Scheduler 2, distributed job servers (docs/zookeeper.md, Scheduler 2): real qilind processes
 * on one store (one LMDB data directory, or one PostgreSQL schema for @pg) and the real
 * ZooKeeper of the zk fixture, under a base path of this test's own, session timeout 1.5 s.
 *
 * - Failover: two job servers, 20 builds of a three-step template, each server running at most
 *   10 jobs. Every job's middle step waits on its first try until the test releases it, so both
 *   servers run 10 jobs each when one is SIGKILLed. The other takes each of the dead server's
 *   jobs over (its lock vanished with the session) and resumes it from the middle step; the
 *   first step is never run again; no two tries of a step of a job ran at once; every job ends
 *   SUCCEED exactly once, under its lock's claimed token; fsck is clean.
 * - assigned-servers: the builds of a model whose kylin.cube.schedule.assigned-servers names one
 *   server run on that server only, though the other is idle.
 * - A job PAUSEd through the other server: the running server stops its step and releases its
 *   lock, so that, once RESUMEd, the server the model is now assigned to runs it on.
 * - A job taken over but not yet picked (the taking server has no room) and then PAUSEd: the
 *   taking server releases the lock it kept, so that, once RESUMEd, a server the model is
 *   assigned to now runs it.
 * - The per-job token: a later lock's claim (made by the test in the store) refuses the end of
 *   the running step; the job moves no further there, and the server runs its other jobs.
 *
 * Every try of a step appends "start JOB SEQ PID MS" and "end JOB SEQ PID MS" (PID: the qilind
 * that ran it, MS: wall ms) to a trace file and holds an flock on a file of its job's step for
 * as long as any of its processes lives; a try that finds it taken records "overlap ...". The
 * assertions read the trace back. Waits poll with deadlines.
 */
#include "tests/api/rest_util.h"
#include "tests/common/zk_util.h"

#define N 2
#define JOBS 20
#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */
/* qilin.cluster.session-timeout-ms. 3 s, not less: a live server whose ZooKeeper connection
 * stalls past a quarter of it (after the client's own silence of two thirds) stops its steps
 * and runs them again, as it must; at 1.5 s a sanitizer build on a loaded 2-core machine ran
 * a step of the live server twice, which such a stall explains. */
#define T_MS 3000
#define GRACE_MS 1000 /* qilin.cluster.takeover-grace-ms */

static qd_t S[N];
static char dir[256]; /* the steps' directory: script, trace, locks */
static char base[64]; /* this test's ZooKeeper base path */
static long spid[N];  /* the trace names servers by pid */
static int max_jobs;  /* kylin.job.max-concurrent-jobs of the next launch (0: JOBS / N) */

static void teardown(void) {
    for (int i = 0; i < N; i++)
        qd_cleanup(&S[i]);
    rm_rf(dir);
}

TestSuite(zk_sched2, .fini = teardown, .timeout = 120);

/* The middle step's first try of each job waits for the file "release", or "release.PID" for
 * the tries of the server PID alone (bounded). */
static const char step_script[] =
    "seq=$1; srv=$2; d=$3; job=$QILIN_JOB_ID\n"
    "now() { date +%s%3N; }\n"
    "exec 9>\"$d/$job.$seq.lock\"\n"
    "if ! flock -n 9; then echo \"overlap $job $seq $srv $$ $(now)\" >> \"$d/trace\"; exit 75; fi\n"
    "hold=0\n"
    "if [ \"$seq\" = 1 ] && [ ! -e \"$d/$job.first\" ]; then : > \"$d/$job.first\"; hold=1; fi\n"
    "echo \"start $job $seq $srv $$ $(now)\" >> \"$d/trace\"\n"
    "i=0; while [ $hold = 1 ] && [ ! -e \"$d/release\" ] && [ ! -e \"$d/release.$srv\" ] &&\n"
    "  [ $i -lt 1200 ]; do\n"
    "  sleep 0.05; i=$((i+1)); done\n"
    "echo \"end $job $seq $srv $$ $(now)\" >> \"$d/trace\"\n";

static void init_servers(void) {
    cr_assert_eq(system("command -v flock > /dev/null"), 0, "flock(1) (util-linux) is needed");
    ql_test_zk_base(base, sizeof base);
    make_tmpdir(dir, sizeof dir);
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
    qd_init(&S[0]);
    qd_init(&S[1]);
    if (!strcmp(ql_test_store_backend(), "lmdb"))
        snprintf(S[1].data, sizeof S[1].data, "%s", S[0].data);
    else
        ql_test_store_share(S[1].data, S[0].data);
}

static void launch(int i) {
    static char set[N][9][300];
    snprintf(set[i][0], sizeof set[i][0], "qilin.server.id=s%d", i);
    snprintf(set[i][1], sizeof set[i][1], "qilin.jobs.templates=%s/jobs.yaml", dir);
    snprintf(set[i][2], sizeof set[i][2], "kylin.job.scheduler.default=2");
    snprintf(set[i][3], sizeof set[i][3], "kylin.env.zookeeper-connect-string=%s",
             ql_test_zk_connect());
    snprintf(set[i][4], sizeof set[i][4], "kylin.env.zookeeper-base-path=%s", base);
    snprintf(set[i][5], sizeof set[i][5], "qilin.cluster.session-timeout-ms=%d", T_MS);
    snprintf(set[i][6], sizeof set[i][6], "qilin.cluster.takeover-grace-ms=%d", GRACE_MS);
    snprintf(set[i][7], sizeof set[i][7], "kylin.job.scheduler.poll-interval-second=1");
    snprintf(set[i][8], sizeof set[i][8], "kylin.job.max-concurrent-jobs=%d",
             max_jobs ? max_jobs : JOBS / N);
    const char *extra[20];
    int n = 0;
    for (int k = 0; k < 9; k++) {
        extra[n++] = "--set";
        extra[n++] = set[i][k];
    }
    extra[n] = NULL;
    qd_start_async(&S[i], extra);
}

static void start_both(void) {
    launch(0);
    launch(1);
    for (int i = 0; i < N; i++) {
        qd_wait_up(&S[i]);
        spid[i] = (long)S[i].pid;
        wait_log(&S[i], "distributed job server (scheduler 2)", 10000);
    }
}

typedef struct {
    char what[16];
    char job[40];
    int seq;
    long pid; /* the server's */
    long try; /* the try's own (its shell's) */
    int64_t ms;
} line_t;

typedef struct {
    int n;
    line_t e[1024];
} trace_t;

static void read_trace(trace_t *t) {
    t->n = 0;
    FILE *f = fopen(path_in(dir, "trace"), "r");
    if (!f)
        return;
    while (t->n < 1024 &&
           fscanf(f, "%15s %39s %d %ld %ld %lld", t->e[t->n].what, t->e[t->n].job, &t->e[t->n].seq,
                  &t->e[t->n].pid, &t->e[t->n].try, (long long *)&t->e[t->n].ms) == 6)
        t->n++;
    fclose(f);
}

/* The "what" lines of step seq of job (job NULL: of any job), their pids in pids (may be NULL,
 * room for 8). */
static int lines(const trace_t *t, const char *what, const char *job, int seq, long *pids) {
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].what, what) && (!job || !strcmp(t->e[i].job, job)) &&
            (seq < 0 || t->e[i].seq == seq)) {
            if (pids && n < 8)
                pids[n] = t->e[i].pid;
            n++;
        }
    return n;
}

/* No two tries of a step of job that both recorded their end overlap (a try killed before its
 * end is covered by the flock: its successor would have recorded "overlap"). A try's end is the
 * one its own shell wrote: two tries on one server share the server's pid. */
static void dump_trace(const trace_t *t, const char *job);

static void assert_no_overlap(const trace_t *t, const char *job) {
    for (int seq = 0; seq < 3; seq++) {
        int64_t s[8], e[8];
        int n = 0;
        for (int i = 0; i < t->n && n < 8; i++) {
            const line_t *l = &t->e[i];
            if (strcmp(l->job, job) || l->seq != seq || strcmp(l->what, "start"))
                continue;
            s[n] = l->ms;
            e[n] = -1;
            for (int k = i + 1; k < t->n; k++)
                if (!strcmp(t->e[k].job, job) && t->e[k].seq == seq && t->e[k].try == l->try &&
                    !strcmp(t->e[k].what, "end")) {
                    e[n] = t->e[k].ms;
                    break;
                }
            n++;
        }
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (e[a] >= 0 && e[b] >= 0 && !(e[a] <= s[b] || e[b] <= s[a])) {
                    dump_trace(t, job);
                    cr_assert_fail("job %s step %d: tries %d and %d overlap", job, seq, a, b);
                }
    }
}

/* Lines of the logs of the n servers holding both needles. */
static int log_lines_of(const qd_t *servers, int n, const char *a, const char *b) {
    int found = 0;
    for (int i = 0; i < n; i++) {
        char *text = read_file(servers[i].log);
        for (char *line = text; line && *line;) {
            char *eol = strchr(line, '\n');
            if (eol)
                *eol = '\0';
            if (strstr(line, a) && strstr(line, b))
                found++;
            line = eol ? eol + 1 : line + strlen(line);
        }
        free(text);
    }
    return found;
}

static void dump_logs(void) {
    for (int i = 0; i < N; i++) {
        char *log = read_file(S[i].log);
        const char *tail = log ? log : "(none)";
        if (strlen(tail) > 8000)
            tail += strlen(tail) - 8000;
        fprintf(stderr, "---- the end of s%d's log:\n%s\n", i, tail);
        free(log);
    }
}

/* What a failing assertion needs to be explained: the servers (by pid), the trace's lines of
 * job and the end of both servers' logs. */
static void dump_trace(const trace_t *t, const char *job) {
    fprintf(stderr, "---- s0 is pid %ld, s1 is pid %ld; the trace of job %s:\n", spid[0], spid[1],
            job);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].job, job))
            fprintf(stderr, "%s %d server %ld try %ld %lld\n", t->e[i].what, t->e[i].seq,
                    t->e[i].pid, t->e[i].try, (long long)t->e[i].ms);
    dump_logs();
}

/* Waits until the trace has `want` "start" lines of step seq. */
static void wait_starts(int seq, int want, int timeout_ms) {
    static trace_t t;
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        read_trace(&t);
        int n = lines(&t, "start", NULL, seq, NULL);
        if (n >= want)
            return;
        if (now_ms() >= deadline)
            dump_logs();
        cr_assert_lt(now_ms(), deadline, "only %d of %d tries of step %d started", n, want, seq);
        poll_pause();
    }
}

/* The job's record in the store: its state and token. */
static void stored_job(ql_store_t *store, const char *job, ql_state_t *state, uint64_t *fence) {
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, false, &txn), 0);
    ql_id_t id;
    cr_assert_eq(ql_id_parse(job, &id), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(txn, &id, 0, &j), 0);
    *state = j.state;
    *fence = j.fence;
    ql_job_free(&j);
    ql_txn_abort(txn);
}

static char jobs[JOBS][64];

Test(zk_sched2, a_killed_job_server_s_jobs_are_resumed_by_the_other_from_their_step) {
    init_servers();
    start_both();
    make_model(&S[0], "p", "m", NULL);
    for (int k = 0; k < JOBS; k++)
        snprintf(jobs[k], sizeof jobs[k], "%s",
                 build(&S[k % N], "p", "m", D0 + k * DAY, D0 + (k + 1) * DAY));
    wait_starts(1, JOBS, 30000);
    static trace_t t;
    read_trace(&t);
    int on[N] = {0};
    for (int k = 0; k < JOBS; k++) {
        long pid[8];
        int n = lines(&t, "start", jobs[k], 1, pid);
        if (n != 1)
            dump_trace(&t, jobs[k]);
        cr_assert_eq(n, 1, "job %s: %d tries of step 1 started before any was released", jobs[k],
                     n);
        on[pid[0] == spid[1]]++;
    }
    cr_assert_eq(on[0], JOBS / N, "each server runs its max-concurrent-jobs: s0 runs %d", on[0]);
    cr_assert_eq(on[1], JOBS / N, "s1 runs %d", on[1]);

    int64_t w0 = wall_ms();
    kill(S[0].pid, SIGKILL);
    cr_assert(qd_wait_exit(&S[0], 5000));
    /* Only the live server's tries may end: a try of the dead one is stopped by its watcher a
     * few milliseconds after the server's death (longer under a sanitizer on a loaded machine),
     * and must not see a release meanwhile. */
    char mine[64];
    snprintf(mine, sizeof mine, "release.%ld", spid[1]);
    write_file(path_in(dir, mine), "");
    /* The dead server's jobs: their middle step starts again, on s1. */
    wait_starts(1, JOBS + JOBS / N, 30000);
    read_trace(&t);
    /* The resumed tries: the second start of a job's middle step. */
    int64_t first = 0, last = 0;
    for (int k = 0; k < JOBS; k++) {
        int seen = 0;
        for (int i = 0; i < t.n; i++) {
            const line_t *l = &t.e[i];
            if (strcmp(l->what, "start") || l->seq != 1 || strcmp(l->job, jobs[k]) || !seen++)
                continue;
            first = !first || l->ms < first ? l->ms : first;
            last = l->ms > last ? l->ms : last;
        }
    }
    fprintf(stderr,
            "zk_sched2: SIGKILL of a job server -> its jobs resumed on the other after %lld ms "
            "(first) to %lld ms (last of %d; session timeout %d ms, takeover grace %d ms, %s)\n",
            (long long)(first - w0), (long long)(last - w0), JOBS / N, T_MS, GRACE_MS,
            ql_test_store_backend());
    for (int k = 0; k < JOBS; k++)
        wait_job_state(&S[1], "p", jobs[k], "SUCCEED", 60000);

    read_trace(&t);
    ql_store_t *store;
    ql_test_store_open(S[1].data, &store);
    int resumed = 0;
    for (int k = 0; k < JOBS; k++) {
        const char *j = jobs[k];
        long p0[8], p1[8], e1[8], p2[8];
        cr_assert_eq(lines(&t, "overlap", j, -1, NULL), 0, "job %s: two tries at once", j);
        assert_no_overlap(&t, j);
        cr_assert_eq(lines(&t, "start", j, 0, p0), 1, "job %s: its first step ran again", j);
        int tries = lines(&t, "start", j, 1, p1);
        cr_assert_eq(lines(&t, "end", j, 1, e1), 1, "job %s: one try of step 1 ended", j);
        int last_tries = lines(&t, "start", j, 2, p2);
        if (last_tries != 1)
            dump_trace(&t, j);
        cr_assert_eq(last_tries, 1, "job %s: its last step started %d times", j, last_tries);
        cr_assert_eq(p2[0], spid[1], "job %s: its last step ran on the live server", j);
        if (p1[0] == spid[0]) {
            /* One of the dead server's jobs: resumed from its middle step, on s1. */
            resumed++;
            cr_assert_eq(p0[0], spid[0]);
            cr_assert_eq(tries, 2, "job %s: the killed try and the resumed one", j);
            cr_assert_eq(p1[1], spid[1]);
            cr_assert_eq(e1[0], spid[1], "job %s: only the resumed try ended", j);
        } else {
            cr_assert_eq(tries, 1, "job %s ran on s1 from the start: no second try", j);
        }
        cr_assert_eq(log_lines_of(S, N, "job RUNNING -> SUCCEED job=", j), 1,
                     "job %s must end once", j);
        ql_state_t st;
        uint64_t fence;
        stored_job(store, j, &st, &fence);
        cr_assert_eq(st, QL_SUCCEED);
        cr_assert_gt(fence, 0, "job %s carries its lock's claimed czxid", j);
    }
    cr_assert_eq(resumed, JOBS / N, "every job of the dead server was resumed");
    cr_assert_eq(log_lines_of(S, N, "reason=\"its lock vanished: taken over by this server\"", ""),
                 JOBS / N, "each was taken over once");
    ql_test_assert_fsck_clean(store);
    ql_store_close(store);
    qd_stop_ok(&S[1], 30000);
}

/* Sets model's config key to value, in the store. */
static void set_model_config(const char *project, const char *model, const char *key,
                             const char *value) {
    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, true, &txn), 0);
    ql_model_t m;
    cr_assert_eq(ql_model_find(txn, project, model, 0, &m), 0);
    cr_assert_eq(ql_strmap_set(&m.config, key, value), 0);
    cr_assert_eq(ql_model_put(txn, &m), 0);
    ql_model_free(&m);
    cr_assert_eq(ql_txn_commit(txn), 0);
    ql_store_close(store);
}

Test(zk_sched2, a_model_assigned_to_one_server_runs_there_only) {
    init_servers();
    write_file(path_in(dir, "release"), ""); /* no step waits */
    start_both();
    make_model(&S[0], "p", "m", NULL);
    set_model_config("p", "m", "kylin.cube.schedule.assigned-servers", "s1");
    enum { K = 6 };
    for (int k = 0; k < K; k++)
        snprintf(jobs[k], sizeof jobs[k], "%s",
                 build(&S[0], "p", "m", D0 + k * DAY, D0 + (k + 1) * DAY));
    for (int k = 0; k < K; k++)
        wait_job_state(&S[0], "p", jobs[k], "SUCCEED", 60000);
    static trace_t t;
    read_trace(&t);
    cr_assert_eq(lines(&t, "start", NULL, -1, NULL), 3 * K);
    for (int i = 0; i < t.n; i++)
        cr_assert_eq(t.e[i].pid, spid[1], "a step of job %s ran on s0, which it is not assigned to",
                     t.e[i].job);
    /* Both run jobs: once one leads (the election may still be under way), the other is a job
     * server, not a standby, in either's list. */
    for (int i = 0; i < 2; i++) {
        int64_t deadline = now_ms() + 10000;
        int masters = 0, job_servers = 0;
        while (masters != 1 && now_ms() < deadline) {
            json_t *d = api_ok(&S[i], "GET", "/kylin/api/cluster", NULL);
            json_t *list = json_object_get(d, "servers");
            cr_assert_eq(json_array_size(list), 2, "s%d lists both servers", i);
            masters = job_servers = 0;
            for (size_t k = 0; k < json_array_size(list); k++) {
                const char *role = jstr(json_array_get(list, k), "role");
                masters += !strcmp(role, "master");
                job_servers += !strcmp(role, "job-server");
            }
            json_decref(d);
            if (masters != 1)
                poll_pause();
        }
        cr_assert(masters == 1 && job_servers == 1, "s%d: %d masters, %d job servers", i, masters,
                  job_servers);
    }
    qd_stop_ok(&S[0], 30000);
    qd_stop_ok(&S[1], 30000);
}

/* Claims token for job in the store, as a later lock of the job would. */
static void claim_job(const char *job, uint64_t token) {
    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, true, &txn), 0);
    ql_id_t id;
    cr_assert_eq(ql_id_parse(job, &id), 0);
    ql_err_t err = {0};
    cr_assert_eq(ql_job_claim(txn, &id, token, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(txn), 0);
    ql_store_close(store);
}

/* A run's changes carry its job's token, not the server's: once a later lock of the job has
 * claimed a larger one, the end of the running step is refused and the job moves no further on
 * this server, while the server goes on running its other jobs. */
Test(zk_sched2, a_run_whose_job_token_moved_on_changes_nothing_more) {
    init_servers();
    launch(0);
    qd_wait_up(&S[0]);
    spid[0] = (long)S[0].pid;
    wait_log(&S[0], "distributed job server (scheduler 2)", 10000);
    make_model(&S[0], "p", "m", NULL);
    snprintf(jobs[0], sizeof jobs[0], "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    wait_starts(1, 1, 30000);
    const uint64_t later = (uint64_t)1 << 62;
    claim_job(jobs[0], later);
    write_file(path_in(dir, "release"), "");
    wait_log(&S[0], "step end not recorded step=01 reason=\"fenced\"", 10000);
    assert_file_contains(S[0].log, "lost the job's lock");
    /* Its lock, released with the run, is taken again by the takeover, whose claim cannot pass
     * the larger token either: it keeps the lock instead of trying again and again. */
    wait_log(&S[0], "job not taken over fence=", 10000);
    snprintf(jobs[1], sizeof jobs[1], "%s", build(&S[0], "p", "m", D0 + DAY, D0 + 2 * DAY));
    wait_job_state(&S[0], "p", jobs[1], "SUCCEED", 30000);
    static trace_t t;
    read_trace(&t);
    cr_assert_eq(lines(&t, "end", jobs[0], 1, NULL), 1, "the step itself ran to its end");
    cr_assert_eq(lines(&t, "start", jobs[0], 2, NULL), 0, "the refused run started its next step");
    cr_assert_eq(log_lines_of(S, 1, "job not taken over fence=", jobs[0]), 1,
                 "the takeover is not retried in a loop");
    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
    ql_state_t st;
    uint64_t fence;
    stored_job(store, jobs[0], &st, &fence);
    cr_assert_eq(st, QL_RUNNING, "the job is the later lock's to move");
    cr_assert_eq(fence, later);
    ql_store_close(store);
    qd_stop_ok(&S[0], 30000);
}

static void job_action(const qd_t *q, const char *job, const char *action) {
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p\",\"job_ids\":[\"%s\"],\"action\":\"%s\"}", job,
             action);
    json_decref(api_ok(q, "PUT", "/kylin/api/jobs/status", body));
}

/* A job PAUSEd through the server that does not run it: the running server stops the step and
 * releases the job's lock. The model is then assigned to the other server alone and the job
 * RESUMEd: only that server may run it, which it can only once the lock is released; it runs the
 * job from the paused step, never beside the stopped try. */
Test(zk_sched2, a_job_paused_through_another_server_gives_its_lock_up) {
    init_servers();
    start_both();
    make_model(&S[0], "p", "m", NULL);
    snprintf(jobs[0], sizeof jobs[0], "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    wait_starts(1, 1, 30000);
    static trace_t t;
    read_trace(&t);
    long pid[8];
    cr_assert_eq(lines(&t, "start", jobs[0], 1, pid), 1);
    int runner = pid[0] == spid[1], other = 1 - runner;
    job_action(&S[other], jobs[0], "PAUSE");
    wait_job_state(&S[other], "p", jobs[0], "PAUSED", 10000);
    char me[8];
    snprintf(me, sizeof me, "s%d", other);
    set_model_config("p", "m", "kylin.cube.schedule.assigned-servers", me);
    write_file(path_in(dir, "release"), "");
    job_action(&S[other], jobs[0], "RESUME");
    wait_job_state(&S[other], "p", jobs[0], "SUCCEED", 30000);
    read_trace(&t);
    cr_assert_eq(lines(&t, "overlap", jobs[0], -1, NULL), 0, "two tries at once");
    assert_no_overlap(&t, jobs[0]);
    cr_assert_eq(lines(&t, "start", jobs[0], 0, NULL), 1, "the first step ran again");
    cr_assert_eq(lines(&t, "start", jobs[0], 1, pid), 2, "the paused try and the resumed one");
    cr_assert_eq(pid[0], spid[runner]);
    cr_assert_eq(pid[1], spid[other], "the resumed try ran on the server assigned now");
    cr_assert_eq(lines(&t, "end", jobs[0], 1, pid), 1, "the paused try was stopped");
    cr_assert_eq(pid[0], spid[other]);
    cr_assert_eq(lines(&t, "start", jobs[0], 2, pid), 1);
    cr_assert_eq(pid[0], spid[other]);
    qd_stop_ok(&S[0], 30000);
    qd_stop_ok(&S[1], 30000);
}

/* A job taken over from a killed server by one that has no room to run it (its one slot is
 * busy) waits READY under the lock the takeover keeps. PAUSEd meanwhile, it is neither READY nor
 * RUNNING: the taking server releases the kept lock at its next poll. The model is then assigned
 * to the killed server, started again, and the job RESUMEd: it runs there, which it could not
 * while the other server kept its lock. */
Test(zk_sched2, a_taken_over_job_paused_before_its_pick_gives_the_kept_lock_up) {
    init_servers();
    max_jobs = 1;
    start_both();
    make_model(&S[0], "p", "m", NULL);
    snprintf(jobs[0], sizeof jobs[0], "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    snprintf(jobs[1], sizeof jobs[1], "%s", build(&S[1], "p", "m", D0 + DAY, D0 + 2 * DAY));
    wait_starts(1, 2, 30000); /* one job on each server, each in its waiting middle step */
    static trace_t t;
    read_trace(&t);
    long pid[8];
    cr_assert_eq(lines(&t, "start", jobs[0], 1, pid), 1);
    int dead = pid[0] == spid[1], live = 1 - dead;
    const char *taken = jobs[0];

    kill(S[dead].pid, SIGKILL);
    cr_assert(qd_wait_exit(&S[dead], 5000));
    wait_log(&S[live], "reason=\"its lock vanished: taken over by this server\"", 10000);
    wait_job_state(&S[live], "p", taken, "READY", 10000);
    job_action(&S[live], taken, "PAUSE");
    wait_job_state(&S[live], "p", taken, "PAUSED", 10000);
    wait_log(&S[live], "job lock released job=", 10000);
    assert_file_contains(S[live].log, taken);

    char name[8];
    snprintf(name, sizeof name, "s%d", dead);
    set_model_config("p", "m", "kylin.cube.schedule.assigned-servers", name);
    max_jobs = 1;
    launch(dead);
    qd_wait_up(&S[dead]);
    long restarted = (long)S[dead].pid;
    wait_log(&S[dead], "distributed job server (scheduler 2)", 10000);
    char mine[64];
    snprintf(mine, sizeof mine, "release.%ld", restarted);
    write_file(path_in(dir, mine), "");
    job_action(&S[live], taken, "RESUME");
    wait_job_state(&S[live], "p", taken, "SUCCEED", 30000);
    read_trace(&t);
    cr_assert_eq(lines(&t, "overlap", taken, -1, NULL), 0, "two tries at once");
    assert_no_overlap(&t, taken);
    cr_assert_eq(lines(&t, "start", taken, 2, pid), 1);
    cr_assert_eq(pid[0], restarted, "the resumed job ran on the server assigned now");
    cr_assert_eq(lines(&t, "start", jobs[1], 2, NULL), 0, "the live server's job still waits");
    write_file(path_in(dir, "release"), "");
    wait_job_state(&S[live], "p", jobs[1], "SUCCEED", 30000);
    qd_stop_ok(&S[0], 30000);
    qd_stop_ok(&S[1], 30000);
}
