/*
 * Wake-ups across servers (docs/architecture.md, Wake-ups across servers), with the real
 * qilind: two servers on one store, one master and one standby; every request goes to the
 * standby. On LMDB (the plain run) the committing process's datagram to the wake/ sockets of the
 * data directory wakes the master; on PostgreSQL (the @pg run, docs/postgresql.md, Wake-ups) the
 * commit's NOTIFY. The master's fetcher polls every kylin.job.scheduler.poll-interval-second,
 * left at its 30 s default, so anything it does well within that is the wake-up at work:
 *   - a build POSTed to the standby starts on the master at once: the latency from the POST's
 *     answer to the job's exec_start_time, over SERIAL_BUILDS builds one after the other,
 *     is reported (median, p99) and its median bounded (100 ms on LMDB, 1 s on PostgreSQL);
 *   - a PAUSE sent to the standby stops the master's running step (a long sleep): its process
 *     is gone well within the poll interval; a RESUME sent there starts it again at once;
 *   - on PostgreSQL, change sessions ended by the database are reopened, and wake as before.
 *
 * One master and one other server: both servers share one data directory, whose job engine
 * lock file makes the first one the master. Each server's pid and role is recorded, and each
 * step writes the pid of the server that runs it ($PPID, as qilin-exec execs the step), which
 * must be the master's.
 */
#include "rest_util.h"

#include <libpq-fe.h>

#define SERIAL_BUILDS 100
#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */
#define POLL_S 30            /* the master's poll interval: the default, not set here */
#define START_DEADLINE_MS 10000

static qd_t master, standby;

static const char TEMPLATES[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: run\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'echo $PPID >> ran_by']\n"
    "        cwd: %s\n"
    "template_sets:\n"
    "  long:\n"
    "    INC_BUILD:\n"
    "      steps:\n"
    "        - name: long\n"
    "          kind: shell\n"
    "          argv: [/bin/sh, -c, 'if [ -f marker ]; then echo $PPID >> ran_by; exit 0; fi; "
    "touch marker; echo $$ $PPID > step.pid; exec sleep 300']\n"
    "          cwd: %s\n";

/* Starts the master, then the standby on the same data directory and schema; both use the
 * master's templates (in its temporary directory, where the steps run). */
static void start_pair(void) {
    qd_init(&master);
    qd_init(&standby);
    snprintf(standby.data, sizeof standby.data, "%s", master.data);
    char *tpl = path_in(master.dir, "jobs.yaml");
    char text[2048];
    snprintf(text, sizeof text, TEMPLATES, master.dir, master.dir);
    write_file(tpl, text);
    static char tpl_kv[400];
    snprintf(tpl_kv, sizeof tpl_kv, "qilin.jobs.templates=%s", tpl);
    const char *extra[] = {"--set", tpl_kv, NULL};
    int64_t t0 = wall_ms();
    qd_start(&master, extra);
    wait_log(&master, "scheduling: holding the job engine lock", START_DEADLINE_MS);
    qd_start(&standby, extra);
    wait_log(&standby, "standby: the job engine lock is held by", START_DEADLINE_MS);
    fprintf(stderr, "wakeups: master pid=%d port=%d, standby pid=%d port=%d (started %lld ms)\n",
            (int)master.pid, master.port, (int)standby.pid, standby.port,
            (long long)(wall_ms() - t0));
    cr_assert_not(file_contains(master.log, "change session is down"), "master: no change session");
}

static void stop_pair(void) {
    qd_stop_ok(&standby, 20000);
    qd_stop_ok(&master, 20000);
    fprintf(stderr, "wakeups: both servers stopped cleanly at %lld\n", (long long)wall_ms());
    qd_cleanup(&standby);
    qd_cleanup(&master);
}

/* The job's exec_start_time (0: not started), as the standby's GET /jobs shows it. */
static int64_t exec_start(const char *id) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs?project=p&key=%.13s&page_size=100", id);
    json_t *d = api_ok(&standby, "GET", path, NULL);
    int64_t t = -1;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(d, "value"), i, j) {
        if (strcmp(jstr(j, "id"), id) == 0)
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

/* Every line of dir/ran_by is the master's pid; returns how many there are. */
static int runs_by_master(void) {
    char *s = read_file(path_in(master.dir, "ran_by"));
    cr_assert_not_null(s, "no step ran");
    int n = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"), n++)
        cr_assert_eq(atoi(line), (int)master.pid, "step %d ran under pid %s, not the master's", n,
                     line);
    free(s);
    return n;
}

Test(wakeups, a_build_posted_to_the_standby_starts_on_the_master_at_once, .timeout = 300) {
    start_pair();
    make_model(&standby, "p", "m", NULL);
    static int64_t lat[SERIAL_BUILDS];
    for (int i = 0; i < SERIAL_BUILDS; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s",
                 build(&standby, "p", "m", BASE + i * DAY, BASE + (i + 1) * DAY));
        int64_t answered = wall_ms(), deadline = now_ms() + START_DEADLINE_MS, started;
        while ((started = exec_start(id)) == 0) {
            cr_assert_lt(now_ms(), deadline,
                         "build %d (job %s) did not start within %d ms (the poll interval is %d s)",
                         i, id, START_DEADLINE_MS, POLL_S);
            struct timespec ts = {0, 1000 * 1000};
            nanosleep(&ts, NULL); /* the next look; the figure is the server's own timestamp */
        }
        lat[i] = started - answered;
    }
    qsort(lat, SERIAL_BUILDS, sizeof lat[0], cmp_i64);
    int64_t median = lat[SERIAL_BUILDS / 2], p99 = lat[(SERIAL_BUILDS * 99) / 100 - 1];
    fprintf(stderr,
            "wakeups: %d builds POSTed to the standby, from the answer to exec_start_time on "
            "the master: min %lld ms, median %lld ms, p99 %lld ms, max %lld ms\n",
            SERIAL_BUILDS, (long long)lat[0], (long long)median, (long long)p99,
            (long long)lat[SERIAL_BUILDS - 1]);
    const char *pg = getenv("QL_TEST_STORE");
    int64_t bound = pg && !strcmp(pg, "pg") ? 1000 : 100;
    cr_assert_lt(median, bound, "median %lld ms", (long long)median);
    /* Every build ran, each on the master (the last ones may still be finishing). */
    int64_t deadline = now_ms() + START_DEADLINE_MS;
    int n;
    while ((n = runs_by_master()) < SERIAL_BUILDS) {
        cr_assert_lt(now_ms(), deadline, "%d of %d steps ran", n, SERIAL_BUILDS);
        poll_pause();
    }
    cr_assert_eq(n, SERIAL_BUILDS);
    stop_pair();
}

/* The step's pid and its server's pid, from step.pid (0 0 until it ran). */
static void step_pids(int *pid, int *server) {
    *pid = *server = 0;
    char *s = read_file(path_in(master.dir, "step.pid"));
    if (s && sscanf(s, "%d %d", pid, server) != 2)
        *pid = *server = 0;
    free(s);
}

/* Whether pid is gone (or a zombie, dead but not yet reaped). */
static bool process_gone(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    char *s = read_file(path);
    if (!s)
        return true;
    const char *close_paren = strrchr(s, ')');
    bool zombie = close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
    free(s);
    return zombie;
}

static void job_action(const char *id, const char *action) {
    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p\",\"job_ids\":[\"%s\"],\"action\":\"%s\"}", id,
             action);
    json_decref(api_ok(&standby, "PUT", "/kylin/api/jobs/status", body));
}

Test(wakeups, a_pause_sent_to_the_standby_stops_the_masters_step_at_once, .timeout = 120) {
    start_pair();
    make_model(&standby, "p", "m", "long");
    char id[64];
    snprintf(id, sizeof id, "%s", build(&standby, "p", "m", BASE, BASE + DAY));
    int pid = 0, server = 0;
    int64_t deadline = now_ms() + START_DEADLINE_MS;
    while (step_pids(&pid, &server), pid == 0) {
        cr_assert_lt(now_ms(), deadline, "the long step did not start");
        poll_pause();
    }
    cr_assert_eq(server, (int)master.pid, "the step runs under pid %d, not the master", server);
    cr_assert_not(process_gone(pid));
    job_action(id, "PAUSE");
    int64_t answered = now_ms();
    deadline = answered + 10000;
    while (!process_gone(pid)) {
        cr_assert_lt(now_ms(), deadline, "the step's process %d outlived the PAUSE by 10 s", pid);
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int64_t stopped_ms = now_ms() - answered;
    fprintf(stderr,
            "wakeups: PAUSE answered by the standby; the master's step process %d was gone "
            "%lld ms later (the poll interval is %d s)\n",
            pid, (long long)stopped_ms, POLL_S);
    cr_assert_lt(stopped_ms, 5000);
    wait_log(&master, "by another process: stopping its step", 5000);
    wait_job_state(&standby, "p", id, "PAUSED", 5000);
    /* Resumed through the standby: the master runs the step again (it finds its marker and
     * ends) long before a poll. */
    job_action(id, "RESUME");
    int64_t resumed = now_ms();
    wait_job_state(&standby, "p", id, "SUCCEED", 10000);
    fprintf(stderr, "wakeups: RESUME through the standby: SUCCEED %lld ms after its answer\n",
            (long long)(now_ms() - resumed));
    cr_assert_eq(runs_by_master(), 1);
    stop_pair();
}

/* Ends every change session of the pair's schema from a session of the test's own; returns
 * how many there were. */
static int kill_change_sessions(void) {
    ql_store_opts_t o;
    ql_test_store_opts(master.data, &o);
    PGconn *c = PQconnectdb(ql_test_pg_url());
    cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
    char app[128], sql[512];
    snprintf(app, sizeof app, "qilin/%s/changes", o.pg_schema);
    char *lit = PQescapeLiteral(c, app, strlen(app));
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
             "application_name = %s",
             lit);
    PQfreemem(lit);
    PGresult *r = PQexec(c, sql);
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQresultErrorMessage(r));
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return n;
}

Test(wakeups, a_lost_change_session_is_reopened_and_wakes_again, .timeout = 120) {
    ql_test_require_backend("pg");
    start_pair();
    make_model(&standby, "p", "m", NULL);
    cr_assert_eq(kill_change_sessions(), 2, "one change session per server");
    wait_log(&master, "the store's change session is down", 5000);
    wait_log(&master, "the store's change session is back", 5000);
    wait_log(&standby, "the store's change session is back", 5000);
    /* The new session wakes the master as the first did. */
    char id[64];
    snprintf(id, sizeof id, "%s", build(&standby, "p", "m", BASE, BASE + DAY));
    int64_t answered = now_ms(), deadline = answered + START_DEADLINE_MS;
    while (exec_start(id) == 0) {
        cr_assert_lt(now_ms(), deadline,
                     "the build did not start within %d ms after the "
                     "session was reopened",
                     START_DEADLINE_MS);
        poll_pause();
    }
    fprintf(stderr, "wakeups: after a reopened change session a build started within %lld ms\n",
            (long long)(now_ms() - answered));
    stop_pair();
}
