/*
 * A master cut off from PostgreSQL steps down, and its late writes are refused, on PostgreSQL
 * only (docs/postgresql.md, The job engine lock and Tests). api_test_pg_partition@pg.
 *
 * Three real qilind (s0, s1, s2) with data directories, ports and server ids of their own share
 * one schema. s0 runs in a network namespace of the test's (tests/common/netns_util.h) and
 * reaches the database only through the veth pair that joins it to the test's namespace, where
 * a relay (tests/common/tcp_relay.h) forwards its connections to the PostgreSQL fixture on
 * loopback; s1 and s2 connect directly. s0 starts first and is the master. A build of a
 * three-step template, posted to the standby s1, runs on s0; its middle step sleeps on its first
 * try. Then the test takes the link down: a partition, s0's packets to and from the database
 * are dropped while every socket stays open. Expected (docs/postgresql.md, Stepping down):
 *   - s0 finds its lease renewal unanswered for half the lease (2.5 s) and steps down, stopping
 *     its running step;
 *   - once the lease is 5 s old, a standby ends s0's lock session, takes the lock (raising the
 *     epoch) and, after the takeover grace (2 s here), runs the middle step again;
 *   - what s0 still writes as it steps down (its job put back to READY) is not applied: it
 *     fails while the link is cut (the pool's sessions give up on a silent network after 2 s,
 *     storage/store_pg.c), or, had it waited for the heal, it would be refused by fencing
 *     (QL-00011); when the link is back, s0 stands by under the new master.
 * The job must end SUCCEED exactly once, the first step must not run again, no two tries of a
 * step may overlap, fsck must be clean. The test prints the time from the cut to s0's step-down
 * line, to the new master's "scheduling:" line and to the step's new try.
 *
 * What each try did is recorded by the steps themselves, as in test_multihost.c: "start", "end"
 * and, when a stop signal ends it, "stop" lines with the step, the pid of the qilind that ran it
 * and the wall time; each try holds an flock of its step while any of its processes lives, and
 * a try that finds it taken writes "overlap" and fails. Needs root for the namespace: skipped
 * with the reason where the machine refuses it, failed in CI (CI=true).
 */
#include "tests/api/step_trace.h"
#include "tests/common/netns_util.h"
#include "tests/common/tcp_relay.h"

#include <libpq-fe.h>

#define N 3
#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */
#define LEASE_MS 5000      /* qilin.server.master-lease-ms, the default */
#define GRACE_SETTING "qilin.cluster.takeover-grace-ms=2000"
#define GRACE_MS 2000

static qd_t S[N];
static char dir[256]; /* the steps' directory: script, trace, locks */
static long server_pid[N];
static ql_test_netns_t ns;
static ql_test_relay_t *relay;

static void teardown(void) {
    for (int i = 0; i < N; i++)
        qd_cleanup(&S[i]);
    ql_test_relay_stop(relay);
    relay = NULL;
    ql_test_netns_close(&ns);
}

TestSuite(pg_partition, .fini = teardown, .timeout = 180);

/* The step: takes its step's flock (held by every process of the try), records its start and
 * end; the middle step's first try sleeps until it is stopped, and records the stop. */
static const char step_script[] =
    "seq=$1; srv=$2; d=$3\n"
    "now() { date +%s%3N; }\n"
    "exec 9>\"$d/step$seq.lock\"\n"
    "if ! flock -n 9; then echo \"overlap $seq $srv $(now)\" >> \"$d/trace\"; exit 75; fi\n"
    "echo \"start $seq $srv $(now)\" >> \"$d/trace\"\n"
    "if [ \"$seq\" = 1 ] && [ ! -e \"$d/long.marker\" ]; then\n"
    "  : > \"$d/long.marker\"\n"
    "  trap 'echo \"stop $seq $srv $(now)\" >> \"$d/trace\"; exit 143' TERM\n"
    "  sleep 120 & wait $!\n"
    "fi\n"
    "echo \"end $seq $srv $(now)\" >> \"$d/trace\"\n";

static void write_templates(void) {
    char text[2048];
    write_file(path_in(dir, "step.sh"), step_script);
    int n = snprintf(text, sizeof text, "templates:\n  INC_BUILD:\n    steps:\n");
    for (int seq = 0; seq < 3; seq++)
        n += snprintf(text + n, sizeof text - (size_t)n,
                      "      - {name: s%d, kind: shell, argv: [/bin/sh, -c, 'exec /bin/sh "
                      "%s/step.sh %d $PPID %s']}\n",
                      seq, dir, seq, dir);
    write_file(path_in(dir, "jobs.yaml"), text);
}

/* The value of keyword in the tests' conninfo ("" when absent). */
static void conninfo_value(const char *keyword, char *out, size_t cap) {
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(ql_test_pg_url(), &msg);
    cr_assert_not_null(opts, "%s", msg ? msg : "cannot parse the tests' conninfo");
    out[0] = '\0';
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (!strcmp(o->keyword, keyword) && o->val)
            snprintf(out, cap, "%s", o->val);
    PQconninfoFree(opts);
}

/* The namespace and the relay from it to the database; skips where the machine refuses. */
static void open_partitionable_link(char *url_kv, size_t cap) {
    char host[128], port[16], user[128], db[128], why[256];
    conninfo_value("host", host, sizeof host);
    conninfo_value("port", port, sizeof port);
    conninfo_value("user", user, sizeof user);
    conninfo_value("dbname", db, sizeof db);
    if (strcmp(host, "127.0.0.1") || !port[0] || !user[0] || !db[0])
        cr_skip_test("the tests' conninfo names no 127.0.0.1 host, port, user and dbname");
    if (ql_test_netns_open(&ns, why, sizeof why) != 0) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true"))
            cr_assert_fail("a network namespace is needed: %s", why);
        cr_skip_test("a network namespace is needed (run as root): %s", why);
    }
    int relay_port = 0;
    cr_assert_eq(ql_test_relay_start(ns.host_addr, host, atoi(port), &relay, &relay_port), 0);
    snprintf(url_kv, cap,
             "qilin.storage.url=host=%s port=%d user=%s dbname=%s sslmode=disable "
             "gssencmode=disable",
             ns.host_addr, relay_port, user, db);
}

static void start_server(int i, const char *url_kv) {
    static char id[N][64], templates[400], data_arg[N][320];
    snprintf(id[i], sizeof id[i], "qilin.server.id=s%d", i);
    snprintf(templates, sizeof templates, "qilin.jobs.templates=%s/jobs.yaml", dir);
    if (!url_kv) {
        const char *extra[] = {"--set", id[i], "--set", templates, "--set", GRACE_SETTING, NULL};
        qd_start(&S[i], extra);
    } else {
        /* "--data=DIR": qd_launch would append the tests' own url after "--data DIR". */
        const char *store[2];
        cr_assert_eq(ql_test_store_settings(S[i].data, store), 2);
        snprintf(data_arg[i], sizeof data_arg[i], "--data=%s", S[i].data);
        const char *args[] = {data_arg[i], "--set", "qilin.server.listen=127.0.0.1:0",
                              "--set",     id[i],   "--set",
                              templates,   "--set", GRACE_SETTING,
                              "--set",     url_kv,  "--set",
                              store[1],    NULL};
        qd_launch(&S[i], args);
        qd_wait_up(&S[i]);
    }
    server_pid[i] = (long)S[i].pid;
}

/* ---- what the steps recorded ---- */

/* ---- the servers' logs ---- */

/* Whether server i logged needle since it last started. */
static bool logged(int i, const char *needle) {
    char *s = read_file(S[i].log);
    bool found = s && strlen(s) >= S[i].log_skip && strstr(s + S[i].log_skip, needle);
    free(s);
    return found;
}

/* Whether the server in the root namespace says it is the master (its /metrics gauge). */
static bool is_master(const qd_t *q) {
    resp_t r = http_req(q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body ? r.body : "");
    bool m = strstr(r.body, "\nqilin_scheduler_master 1\n") != NULL;
    resp_free(&r);
    return m;
}

/* ---- the outcome ---- */

/* What s0 still tried to write after the cut: as it stepped down, it put its job back to READY,
 * a write on the strength of a holding that was over. It must have failed: unreachable while
 * cut (the pool's sessions give up on a silent network, see storage/store_pg.c), or refused by
 * fencing (QL-00011) once the link was back; none may have been applied. */
static void check_late_writes(void) {
    char *s = read_file(S[0].log);
    cr_assert_not_null(s);
    const char *cut = strstr(s, "node: lost the job engine lock");
    cr_assert_not_null(cut);
    int unreachable = 0, fenced = 0, applied = 0;
    for (const char *line = cut; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char buf[2048];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (strstr(buf, "job RUNNING -> READY"))
            applied++;
        if (strstr(buf, "cannot put the job back to READY")) {
            unreachable += strstr(buf, "the metadata store is unreachable") != NULL;
            fenced += strstr(buf, "fencing token 1, but the lock's epoch is now 2") != NULL;
        }
        line = eol ? eol + 1 : NULL;
    }
    free(s);
    fprintf(stderr,
            "pg_partition: s0's late writes: %d failed unreachable during the cut, %d refused by "
            "fencing after the heal\n",
            unreachable, fenced);
    cr_assert_eq(applied, 0, "s0 put its job back to READY after the cut");
    cr_assert_geq(unreachable + fenced, 1, "s0 did not try to put its job back");
}

static void check_store(const char *job) {
    ql_store_t *store;
    ql_test_store_open(S[1].data, &store);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, false, &txn), 0);
    ql_id_t id;
    cr_assert_eq(ql_id_parse(job, &id), 0);
    static const uint32_t attempts[3] = {1, 2, 1};
    for (uint32_t seq = 0; seq < 3; seq++) {
        ql_step_t s;
        cr_assert_eq(ql_step_get(txn, &id, seq, &s), 0);
        cr_assert_eq(s.state, QL_SUCCEED, "step %u", seq);
        cr_assert_eq(s.attempts, attempts[seq], "step %u: %u tries", seq, s.attempts);
        ql_step_free(&s);
    }
    ql_job_t j;
    cr_assert_eq(ql_job_get(txn, &id, 0, &j), 0);
    cr_assert_eq(j.state, QL_SUCCEED);
    uint64_t epoch;
    cr_assert_eq(ql_fence_current(txn, &epoch), 0);
    cr_assert_eq(epoch, 2, "one takeover raised the epoch once");
    cr_assert_eq(j.fence, epoch, "the job's last moves were the new master's");
    ql_job_free(&j);
    ql_txn_abort(txn);
    ql_test_assert_fsck_clean(store);
    ql_store_close(store);
}

/* Every try as the steps recorded it: nothing overlapped, the first step ran once on s0, the
 * middle step's first try (s0's) was stopped before the new master's began, the rest ran on
 * the new master. */
static void check_tries(int m, int64_t down_wall) {
    trace_t t = read_trace(dir);
    for (int seq = 0; seq < 3; seq++)
        cr_assert_eq(count(&t, "overlap", seq), 0, "two tries of step %d ran at once", seq);
    cr_assert_eq(count(&t, "start", 0), 1, "the first step, SUCCEED before the cut, reran");
    cr_assert_eq(count(&t, "start", 1), 2, "the cut master's try and the new master's");
    cr_assert_eq(count(&t, "stop", 1), 1, "the cut master stopped its try");
    cr_assert_eq(count(&t, "end", 1), 1, "only the new master's try of the middle step ended");
    cr_assert_eq(count(&t, "start", 2), 1);
    long pid;
    int64_t first, stopped, second, ms;
    cr_assert(nth(&t, "start", 0, 0, &pid, &ms));
    cr_assert_eq(pid, server_pid[0], "the first step ran on s0");
    cr_assert(nth(&t, "start", 1, 0, &pid, &first));
    cr_assert_eq(pid, server_pid[0]);
    cr_assert(nth(&t, "stop", 1, 0, &pid, &stopped));
    cr_assert_eq(pid, server_pid[0]);
    cr_assert(nth(&t, "start", 1, 1, &pid, &second));
    cr_assert_eq(pid, server_pid[m], "the middle step was resumed by the new master");
    cr_assert(nth(&t, "start", 2, 0, &pid, &ms));
    cr_assert_eq(pid, server_pid[m]);
    cr_assert_lt(stopped, second, "s0's try (stopped at %lld) overlapped the new one (%lld)",
                 (long long)stopped, (long long)second);
    /* s0 stops the step as it steps down (SIGTERM at once; the step's trap writes the line). */
    cr_assert_lt(stopped - down_wall, 2000, "s0 stopped its step %lld ms after stepping down",
                 (long long)(stopped - down_wall));
    fprintf(stderr,
            "pg_partition: the middle step's tries: s0 %lld..%lld (stopped), s%d from %lld; "
            "%lld ms apart\n",
            (long long)first, (long long)stopped, m, (long long)second,
            (long long)(second - stopped));
}

Test(pg_partition, a_master_cut_off_from_the_database_steps_down_and_its_late_writes_are_refused) {
    ql_test_require_backend("pg");
    cr_assert_eq(system("command -v flock > /dev/null"), 0, "flock(1) (util-linux) is needed");
    static char url_kv[600];
    make_tmpdir(dir, sizeof dir);
    write_templates();
    for (int i = 0; i < N; i++) {
        qd_init(&S[i]);
        if (i > 0)
            ql_test_store_share(S[i].data, S[0].data);
    }
    open_partitionable_link(url_kv, sizeof url_kv);
    S[0].netns_pid = ns.holder;
    start_server(0, url_kv);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    cr_assert_gt(ql_test_relay_accepted(relay), 0, "s0 does not reach the database via the link");
    for (int i = 1; i < N; i++)
        start_server(i, NULL);
    char holder[160];
    snprintf(holder, sizeof holder,
             "standby: the job engine lock is held by pid %ld of server s0 (API 127.0.0.1:%d), "
             "fencing epoch 1",
             server_pid[0], S[0].port);
    for (int i = 1; i < N; i++)
        wait_log(&S[i], holder, 10000);

    /* The build goes through a standby; the master hears of it through the database. */
    make_model(&S[1], "p", "m", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[1], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);
    cr_assert_eq(pid, server_pid[0], "the job runs on s0");

    /* The cut. */
    int64_t t0 = now_ms(), w0 = wall_ms();
    cr_assert_eq(ql_test_netns_link(&ns, false), 0);
    int m = -1;
    int64_t down = -1, took = -1, deadline = t0 + 3 * LEASE_MS + 5000;
    while (down < 0 || took < 0) {
        if (down < 0 && logged(0, "node: lost the job engine lock"))
            down = now_ms() - t0;
        for (int i = 1; i < N && took < 0; i++)
            if (logged(i, "node: scheduling: holding the job engine lock")) {
                took = now_ms() - t0;
                m = i;
            }
        cr_assert_lt(now_ms(), deadline,
                     "after the cut: s0 stepped down after %lld ms, a standby "
                     "took over after %lld ms (-1: not yet)",
                     (long long)down, (long long)took);
        poll_pause();
    }
    int64_t restart = wait_start(dir, 1, 1, &pid, GRACE_MS + 10000) - w0;
    fprintf(stderr,
            "pg_partition: link cut -> s0's step-down line %lld ms, s%d's 'scheduling:' line %lld "
            "ms, the middle step's new try %lld ms (lease %d ms, takeover grace %d ms)\n",
            (long long)down, m, (long long)took, (long long)restart, LEASE_MS, GRACE_MS);
    /* s0 steps down on its own, at half the lease, before anyone may take over at the full
     * lease; the new master ended s0's lock session, which s0 cannot do itself while cut. */
    assert_file_contains(S[0].log, "PostgreSQL has not answered the lease renewal");
    cr_assert_lt(down, took, "s0 stepped down after the takeover");
    cr_assert_geq(took, LEASE_MS - 500, "taken over before the lease was stale");
    char ended[128];
    snprintf(ended, sizeof ended, "server=s0 address=127.0.0.1:%d pid=%ld", S[0].port,
             server_pid[0]);
    assert_file_contains(S[m].log, "standby: ended the master's job engine lock session");
    assert_file_contains(S[m].log, ended);
    assert_file_contains(S[m].log, "job held for the takeover grace");
    cr_assert_geq(restart, took + GRACE_MS - 100, "the step restarted within the grace");

    /* The heal: s0 reaches the database again and stands by under the new master. */
    cr_assert_eq(ql_test_netns_link(&ns, true), 0);
    snprintf(holder, sizeof holder, "standby: the job engine lock is held by pid %ld of server s%d",
             server_pid[m], m);
    wait_log(&S[0], holder, 30000);
    wait_job_state(&S[m], "p", job, "SUCCEED", 30000);
    check_late_writes();

    check_tries(m, w0 + down);
    cr_assert_eq(log_lines(S, N, "job RUNNING -> SUCCEED", job), 1, "the job must end once");
    int masters = 0;
    for (int i = 1; i < N; i++)
        masters += is_master(&S[i]);
    cr_assert_eq(masters, 1);
    cr_assert(is_master(&S[m]));
    check_store(job);
    for (int i = 0; i < N; i++)
        qd_stop_ok(&S[i], 30000);
}
