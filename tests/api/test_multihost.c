/*
 * Several hosts on one PostgreSQL store (docs/postgresql.md, The job engine lock;
 * docs/user-guide.md, Several servers): three real qilind processes, each with a data directory,
 * port and server id of its own (s0, s1, s2), on one schema. PostgreSQL only
 * (api_test_multihost@pg).
 *
 * s0 starts first and becomes the master; s1 and s2 stand by and log who holds the lock (server
 * id, API address, epoch). A build of a three-step template runs on s0; its middle step sleeps on
 * its first try. Then s0 is
 *   - killed (SIGKILL): its lock session ends with it, a standby takes over within its poll and
 *     resumes the job from the middle step; the time from the kill to the new master's
 *     "scheduling:" line and to the step's restart is printed (docs/performance.md);
 *   - or stopped (SIGSTOP) past the lease, then continued: a standby ends s0's lock session,
 *     takes over and resumes the job; s0, continued, finds its step-end write refused by fencing
 *     or its session gone, steps down and stands by.
 * Either way the job ends SUCCEED exactly once, the first step is not run again, fsck is clean.
 * And qilind refuses to start through PgBouncer in transaction pooling, saying why, and starts
 * through it in session pooling.
 *
 * What each try did is recorded by the steps themselves: every try appends "start SEQ PID MS" and
 * "end SEQ PID MS" lines (PID: the qilind that ran it, MS: wall ms) to a trace file, and holds an
 * flock on a file of its step for as long as any of its processes lives; a try that finds it
 * taken (two tries of one step running at once) writes "overlap ..." and fails. Waits poll with
 * deadlines.
 */
#include "tests/api/step_trace.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define N 3
#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */
#define TAKEOVER_BOUND_MS 10000
/* qilin.cluster.takeover-grace-ms of the cluster: shorter than the default 10 s to keep the test
 * quick. The old master's try counts as another host's (another server id), so the new master
 * waits this long before it starts the step again (docs/step-processes.md, Several hosts). */
#define GRACE_MS 2000
#define GRACE_SETTING "qilin.cluster.takeover-grace-ms=2000"

static qd_t S[N];
static char dir[256];      /* the steps' directory: script, trace, locks */
static long server_pid[N]; /* recorded at start: the trace names servers by pid */

static pid_t bouncer; /* pgbouncer, when a case runs one */

static void teardown(void) {
    if (bouncer > 0) {
        kill(bouncer, SIGKILL);
        waitpid(bouncer, NULL, 0);
        bouncer = 0;
    }
    for (int i = 0; i < N; i++) {
        if (S[i].pid > 0)
            kill(S[i].pid, SIGCONT);
        qd_cleanup(&S[i]);
    }
}

TestSuite(multihost, .fini = teardown, .timeout = 180);

/* The step: takes its step's flock (held by every process of the try), records its start and
 * end; the middle step's first try sleeps until it is killed. */
static const char step_script[] =
    "seq=$1; srv=$2; d=$3\n"
    "now() { date +%s%3N; }\n"
    "exec 9>\"$d/step$seq.lock\"\n"
    "if ! flock -n 9; then echo \"overlap $seq $srv $(now)\" >> \"$d/trace\"; exit 75; fi\n"
    "echo \"start $seq $srv $(now)\" >> \"$d/trace\"\n"
    "if [ \"$seq\" = 1 ] && [ ! -e \"$d/long.marker\" ]; then : > \"$d/long.marker\"; sleep 120; "
    "fi\n"
    "echo \"end $seq $srv $(now)\" >> \"$d/trace\"\n";

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

static void start_server(int i) {
    static char id[N][64], templates[400];
    snprintf(id[i], sizeof id[i], "qilin.server.id=s%d", i);
    snprintf(templates, sizeof templates, "qilin.jobs.templates=%s/jobs.yaml", dir);
    const char *extra[] = {"--set", id[i], "--set", templates, "--set", GRACE_SETTING, NULL};
    qd_start(&S[i], extra);
    server_pid[i] = (long)S[i].pid;
}

/* Three servers on one schema; s0 is the master, s1 and s2 say who it is. */
static void start_cluster(void) {
    ql_test_require_backend("pg");
    cr_assert_eq(system("command -v flock > /dev/null"), 0, "flock(1) (util-linux) is needed");
    make_tmpdir(dir, sizeof dir);
    write_templates();
    for (int i = 0; i < N; i++) {
        qd_init(&S[i]);
        if (i > 0)
            ql_test_store_share(S[i].data, S[0].data);
    }
    start_server(0);
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    for (int i = 1; i < N; i++)
        start_server(i);
    char holder[160];
    snprintf(holder, sizeof holder,
             "standby: the job engine lock is held by pid %ld of server s0 (API 127.0.0.1:%d), "
             "fencing epoch ",
             server_pid[0], S[0].port);
    for (int i = 1; i < N; i++) {
        wait_log(&S[i], holder, 10000);
        /* qilind's start line shows it too. */
        snprintf(holder, sizeof holder, "role=standby lock_holder=pid %ld of server s0 (API",
                 server_pid[0]);
        assert_file_contains(S[i].log, holder);
    }
}

/* A standby's answer about the dispatcher names the master: server id, address, epoch. */
static void check_standby_names_master(int standby) {
    resp_t r =
        http_req(&S[standby], "GET", "/kylin/api/models/m/auto_segment_build/status?project=p",
                 NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body ? r.body : "");
    const char *msg = json_string_value(json_object_get(r.json, "msg"));
    char want[160];
    snprintf(want, sizeof want, "held by pid %ld of server s0 (API 127.0.0.1:%d), fencing epoch ",
             server_pid[0], S[0].port);
    cr_assert(msg && strstr(msg, want), "%s", r.body);
    resp_free(&r);
}

/* Whether server i says it is the master (its /metrics gauge). */
static bool is_master(const qd_t *q) {
    resp_t r = http_req(q, "GET", "/metrics", NULL, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s", r.body ? r.body : "");
    bool m = strstr(r.body, "\nqilin_scheduler_master 1\n") != NULL;
    resp_free(&r);
    return m;
}

/* Asserts that exactly one of the running servers is the master (polled: a server that was
 * just continued may still be stepping down); returns its index. */
static int the_master(void) {
    int64_t deadline = now_ms() + 10000;
    for (;;) {
        int n = 0, which = -1;
        for (int i = 0; i < N; i++)
            if (S[i].pid > 0 && is_master(&S[i])) {
                n++;
                which = i;
            }
        if (n == 1)
            return which;
        cr_assert_lt(now_ms(), deadline, "%d masters", n);
        poll_pause();
    }
}

/* Waits for the first of the servers other than `old` to log the needle; returns its index. */
static int wait_any_log(int old, const char *needle, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        for (int i = 0; i < N; i++)
            if (i != old && file_contains(S[i].log, needle))
                return i;
        cr_assert_lt(now_ms(), deadline, "no server logged '%s' within %d ms", needle, timeout_ms);
        poll_pause();
    }
}

/* A job that does not end in time leaves what each server and step did on stderr: the steps'
 * trace and the end of every server's log (a failure seen once in a loaded sanitizer run, the
 * job RUNNING 60 s after its step's new try had started, left nothing else to go on). */
#define OUTCOME_MS 60000
static void wait_succeed_or_tell(const char *job, int master) {
    char last[32];
    if (job_state_within(&S[master], "p", job, "SUCCEED", OUTCOME_MS, last))
        return;
    char path[400];
    snprintf(path, sizeof path, "%s/trace", dir);
    char *trace = read_file(path);
    fprintf(stderr, "multihost: the steps' trace:\n%s\n", trace ? trace : "(none)");
    free(trace);
    for (int i = 0; i < N; i++) {
        char *log = read_file(S[i].log);
        const char *tail = log ? log : "(unreadable)";
        if (strlen(tail) > 8192)
            tail += strlen(tail) - 8192;
        fprintf(stderr, "multihost: the end of s%d's log (pid %ld):\n%s\n", i, server_pid[i], tail);
        free(log);
    }
    cr_assert_fail("job %s is still %s after %d ms, expected SUCCEED (s%d is the master)", job,
                   last, OUTCOME_MS, master);
}

/* The job ended SUCCEED exactly once, each step's tries as expected, nothing overlapped, the
 * store is clean. */
static void check_outcome(const char *job, int master, long first_pid) {
    wait_succeed_or_tell(job, master);
    trace_t t = read_trace(dir);
    cr_assert_eq(count(&t, "overlap", 0) + count(&t, "overlap", 1) + count(&t, "overlap", 2), 0,
                 "two tries of one step ran at once");
    cr_assert_eq(count(&t, "start", 0), 1, "the first step, SUCCEED before the takeover, reran");
    cr_assert_eq(count(&t, "end", 0), 1);
    cr_assert_eq(count(&t, "start", 1), 2, "the interrupted try and the new master's");
    cr_assert_eq(count(&t, "end", 1), 1, "only the new master's try of the middle step ended");
    cr_assert_eq(count(&t, "start", 2), 1);
    long pid;
    int64_t ms;
    nth(&t, "start", 0, 0, &pid, &ms);
    cr_assert_eq(pid, first_pid, "the first step ran on the first master");
    nth(&t, "start", 1, 1, &pid, &ms);
    cr_assert_eq(pid, server_pid[master], "the middle step was resumed by the new master");
    nth(&t, "start", 2, 0, &pid, &ms);
    cr_assert_eq(pid, server_pid[master]);
    cr_assert_eq(log_lines(S, N, "job RUNNING -> SUCCEED", job), 1, "the job must end once");

    ql_store_t *store;
    ql_test_store_open(S[0].data, &store);
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
    cr_assert_eq(j.fence, epoch, "the job's last moves were the new master's");
    ql_job_free(&j);
    ql_txn_abort(txn);
    ql_test_assert_fsck_clean(store);
    ql_store_close(store);
}

Test(multihost, a_killed_master_is_replaced_and_the_job_resumes_from_its_step) {
    start_cluster();
    cr_assert_eq(the_master(), 0);
    make_model(&S[0], "p", "m", NULL);
    check_standby_names_master(1);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);
    cr_assert_eq(pid, server_pid[0]);

    int64_t t0 = now_ms(), w0 = wall_ms();
    kill(S[0].pid, SIGKILL);
    cr_assert(qd_wait_exit(&S[0], 5000));
    int m = wait_any_log(0, "scheduling: holding the job engine lock", TAKEOVER_BOUND_MS);
    int64_t took = now_ms() - t0;
    int64_t restart = wait_start(dir, 1, 1, &pid, TAKEOVER_BOUND_MS + GRACE_MS) - w0;
    fprintf(stderr,
            "multihost: SIGKILL of the master -> s%d's 'scheduling:' line %lld ms, the "
            "interrupted step's new try %lld ms (after the %d ms takeover grace)\n",
            m, (long long)took, (long long)restart, GRACE_MS);
    cr_assert_lt(took, TAKEOVER_BOUND_MS);
    /* The new master cannot tell a dead master from a paused one on another host: it holds
     * the job for the grace before the step's next try. */
    assert_file_contains(S[m].log, "job held for the takeover grace");
    cr_assert_geq(restart, took + GRACE_MS - 100, "the step restarted within the grace");
    cr_assert_eq(the_master(), m);
    check_outcome(job, m, server_pid[0]);
    for (int i = 1; i < N; i++)
        qd_stop_ok(&S[i], 30000);
}

Test(multihost, a_stopped_master_is_replaced_and_steps_down_when_continued) {
    start_cluster();
    make_model(&S[0], "p", "m", NULL);
    char job[64];
    snprintf(job, sizeof job, "%s", build(&S[0], "p", "m", D0, D0 + DAY));
    long pid;
    wait_start(dir, 1, 0, &pid, 30000);

    int64_t t0 = now_ms();
    kill(S[0].pid, SIGSTOP);
    /* The lease is 5 s (qilin.server.master-lease-ms), the standbys try every second. */
    int m = wait_any_log(0, "scheduling: holding the job engine lock", 5000 + TAKEOVER_BOUND_MS);
    int64_t took = now_ms() - t0;
    fprintf(stderr, "multihost: SIGSTOP of the master -> s%d's 'scheduling:' line %lld ms\n", m,
            (long long)took);
    cr_assert_geq(took, 4500, "taken over before the lease (5 s) was stale");
    char ended[128];
    snprintf(ended, sizeof ended, "server=s0 address=127.0.0.1:%d pid=%ld", S[0].port,
             server_pid[0]);
    /* Both standbys watch the lease: the one that ends the stale session is not always the one
     * that takes the lock next (the other may try first once the session is gone). */
    int e = wait_any_log(0, "standby: ended the master's job engine lock session", 5000);
    assert_file_contains(S[e].log, ended);

    kill(S[0].pid, SIGCONT);
    wait_log(&S[0], "lost the job engine lock", 10000);
    char holder[96];
    snprintf(holder, sizeof holder, "standby: the job engine lock is held by pid %ld of server s%d",
             server_pid[m], m);
    wait_log(&S[0], holder, 10000);
    /* Its late write (the step's end, or the step put back to READY as it steps down) is
     * refused by the epoch the new master raised. */
    assert_file_contains(S[0].log, "fenced: this change was made under the job engine lock with "
                                   "fencing token 1, but the lock's epoch is now 2");
    cr_assert_eq(the_master(), m, "one master among the three");
    check_outcome(job, m, server_pid[0]);
    for (int i = 0; i < N; i++)
        qd_stop_ok(&S[i], 30000);
}

/* ---- a pooling proxy in front of the database ---- */

/* A loopback port nobody listened on a moment ago. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
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

/* Starts pgbouncer (pool_mode mode) in front of the tests' database, on a loopback port, and
 * returns the conninfo that reaches the database through it (static buffer). */
static const char *start_bouncer(const char *mode) {
    const char *bin = "/usr/sbin/pgbouncer";
    if (access(bin, X_OK) != 0) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true"))
            cr_assert_fail("%s is missing (scripts/setup.sh installs pgbouncer)", bin);
        cr_skip_test("%s is missing (scripts/setup.sh installs pgbouncer): skipped", bin);
    }
    char host[128], port[16], user[128], db[128], path[400], text[1024];
    conninfo_value("host", host, sizeof host);
    conninfo_value("port", port, sizeof port);
    conninfo_value("user", user, sizeof user);
    conninfo_value("dbname", db, sizeof db);
    if (!host[0] || !port[0] || !user[0] || !db[0])
        cr_skip_test("the tests' conninfo names no host, port, user and dbname");
    make_tmpdir(dir, sizeof dir);
    chmod(dir, 0755); /* as root, pgbouncer runs as postgres and reads its files */
    int listen = free_port();
    snprintf(path, sizeof path, "%s/users.txt", dir);
    snprintf(text, sizeof text, "\"%s\" \"\"\n", user);
    write_file(path, text);
    snprintf(text, sizeof text,
             "[databases]\n* = host=%s port=%s\n[pgbouncer]\nlisten_addr = 127.0.0.1\n"
             "listen_port = %d\nunix_socket_dir =\nauth_type = trust\nauth_file = %s\n"
             "pool_mode = %s\nignore_startup_parameters = extra_float_digits,options\n",
             host, port, listen, path, mode);
    snprintf(path, sizeof path, "%s/pgbouncer.ini", dir);
    write_file(path, text);
    char log[400];
    snprintf(log, sizeof log, "%s/pgbouncer.log", dir);
    bouncer = fork();
    if (bouncer == 0) { /* no Criterion call in the child */
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        if (geteuid() == 0)
            execl(bin, bin, "-u", "postgres", path, (char *)NULL);
        else
            execl(bin, bin, path, (char *)NULL);
        _exit(127);
    }
    cr_assert_gt(bouncer, 0);
    static char url[512];
    snprintf(url, sizeof url,
             "host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable gssencmode=disable", listen,
             user, db);
    int64_t deadline = now_ms() + 10000;
    for (;;) {
        PGconn *c = PQconnectdb(url);
        bool up = PQstatus(c) == CONNECTION_OK;
        PQfinish(c);
        if (up)
            return url;
        char *l = read_file(log);
        cr_assert_lt(now_ms(), deadline, "pgbouncer did not come up: %s", l ? l : "");
        free(l);
        poll_pause();
    }
}

static void stop_bouncer(void) {
    kill(bouncer, SIGTERM);
    waitpid(bouncer, NULL, 0);
    bouncer = 0;
}

Test(multihost, qilind_refuses_a_transaction_pooling_proxy_and_accepts_session_pooling) {
    ql_test_require_backend("pg");
    const char *url = start_bouncer("transaction");
    qd_init(&S[0]);
    static char data_arg[400], url_kv[600], schema_kv[200];
    const char *store[2];
    cr_assert_eq(ql_test_store_settings(S[0].data, store), 2);
    snprintf(schema_kv, sizeof schema_kv, "%s", store[1]);
    snprintf(url_kv, sizeof url_kv, "qilin.storage.url=%s", url);
    /* "--data=DIR", not "--data DIR": qd_spawn would add the tests' own url after these. */
    snprintf(data_arg, sizeof data_arg, "--data=%s", S[0].data);
    const char *with_schema[] = {
        data_arg,  "--set", "qilin.server.listen=127.0.0.1:0",
        "--set",   url_kv,  "--set",
        schema_kv, "--set", "qilin.jobs.templates=" QL_SOURCE_DIR "/conf/jobs.yaml",
        NULL};
    cr_assert_not(qd_spawn(&S[0], with_schema), "qilind started through transaction pooling");
    cr_assert(qd_wait_exit(&S[0], 20000));
    cr_assert(WIFEXITED(S[0].exit_status) && WEXITSTATUS(S[0].exit_status) != 0);
    assert_file_contains(S[0].log, "two sessions were served by the same backend");
    assert_file_contains(S[0].log, "pool_mode=transaction");
    stop_bouncer();

    url = start_bouncer("session");
    snprintf(url_kv, sizeof url_kv, "qilin.storage.url=%s", url);
    cr_assert(qd_spawn(&S[0], with_schema), "qilind did not start through session pooling");
    wait_log(&S[0], "scheduling: holding the job engine lock", 10000);
    qd_stop_ok(&S[0], 30000);
    stop_bouncer();
}
