/*
 * The option table: every key Qilin reads from its configuration, in documentation order.
 *
 * Adding an option is adding a row here (and a getter call where it is used); then regenerate
 * docs/configuration.md with tools/gen-config-doc, or the docs test fails. Defaults are text and
 * go through the same parser as any configured value (a test parses every default).
 */
#include "config/ql_config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#define KIB (INT64_C(1) << 10)
#define MIB (INT64_C(1) << 20)
#define GIB (INT64_C(1) << 30)
#define TIB (INT64_C(1) << 40)
#define SEC_MS INT64_C(1000)
#define MIN_MS (60 * SEC_MS)
#define HOUR_MS (60 * MIN_MS)
#define DAY_MS (24 * HOUR_MS)

static const char *const server_modes[] = {"all", "job", "query", NULL};
static const char *const scheduler_ids[] = {"0", "2", "100", NULL};
static const char *const shutdown_modes[] = {"pause", "wait", NULL};
static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};

/* The name becomes one ZooKeeper node under the base path, so it must be a single, plain path
 * element. */
static bool check_cluster_name(const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n > 64 || strcmp(v, ".") == 0 || strcmp(v, "..") == 0)
        return false;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-", *p))
            return false;
    return true;
}

/* ZooKeeper refuses relative paths, empty elements and a trailing slash. */
static bool check_zk_path(const char *v) {
    if (v[0] != '/' || strstr(v, "//") || (v[1] && v[strlen(v) - 1] == '/'))
        return false;
    if (strstr(v, "/./") || strstr(v, "/../"))
        return false;
    const char *last = strrchr(v, '/');
    if (strcmp(last, "/.") == 0 || strcmp(last, "/..") == 0)
        return false;
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return false;
    return true;
}

/* "" (no ZooKeeper: the embedded lock) or HOST:PORT[,HOST:PORT...][/chroot], the form the
 * ZooKeeper C client's zookeeper_init() takes. */
static bool check_zk_connect(const char *v) {
    if (!*v)
        return true;
    const char *chroot = strchr(v, '/');
    size_t hosts_len = chroot ? (size_t)(chroot - v) : strlen(v);
    if (chroot && !check_zk_path(chroot))
        return false;
    const char *p = v, *hosts_end = v + hosts_len;
    if (hosts_len == 0)
        return false;
    for (;;) {
        const char *end = memchr(p, ',', (size_t)(hosts_end - p));
        if (!end)
            end = hosts_end;
        /* The last colon splits host from port, so a bracketed IPv6 host keeps its own. */
        const char *colon = NULL;
        for (const char *q = p; q < end; q++)
            if (*q == ':')
                colon = q;
        if (!colon || colon == p || colon + 1 == end || end - (colon + 1) > 5)
            return false;
        for (const char *q = p; q < colon; q++)
            if (!isalnum((unsigned char)*q) && !strchr("-._[]:", *q))
                return false;
        long port = 0;
        for (const char *q = colon + 1; q < end; q++) {
            if (!isdigit((unsigned char)*q))
                return false;
            port = port * 10 + (*q - '0');
        }
        if (port < 1 || port > 65535)
            return false;
        if (end == hosts_end)
            break;
        p = end + 1;
    }
    return true;
}

/* One item of assigned-servers: a host name, an IPv4 address or an IPv6 address, matched
 * against the server's own names and addresses. */
static bool check_server_name(const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n > 253)
        return false;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-_:", *p))
            return false;
    return true;
}

/* A server id is written into logs, lock holders and step records: printable, no spaces. */
static bool check_server_id(const char *v) {
    size_t n = strlen(v);
    if (n > 200)
        return false;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr(".-_:@", *p))
            return false;
    return true;
}

static const ql_config_option_t options[] = {
    /* server */
    {.key = "kylin.server.mode",
     .type = QL_CONFIG_LIST,
     .def = "all",
     .min = 1,
     .allowed = server_modes,
     .doc = "What this server does: `all`, or a comma list of `job` (scheduler and dispatcher) "
            "and `query` (read endpoints; writes answer 503)."},
    {.key = "kylin.server.cluster-name",
     .type = QL_CONFIG_STRING,
     .def = "qilin",
     .doc = "Name of this cluster of servers: the ZooKeeper node under the base path that holds "
            "its locks and leader election.",
     .check = check_cluster_name,
     .accepts = "1 to 64 of A-Z a-z 0-9 _ . - (not . or ..)"},
    {.key = "qilin.server.listen",
     .type = QL_CONFIG_ADDRESS,
     .def = "127.0.0.1:7070",
     .min = 0,
     .max = 65535,
     .doc = "Address the REST API listens on; port 0 lets the system pick a free port. Any "
            "address other than loopback needs `qilin.server.users` set."},
    {.key = "qilin.server.users",
     .type = QL_CONFIG_USERS,
     .def = "",
     .doc = "API users: a sequence of {name, password_hash, role} (role ADMIN or VIEWER, "
            "read-only). Empty means ADMIN with a "
            "random password generated into <data>/admin.password, on loopback only (see "
            "Users)."},
    {.key = "qilin.server.id",
     .type = QL_CONFIG_STRING,
     .def = "",
     .doc = "This server's name among the servers sharing a store: recorded with the job engine "
            "lock's holder and with every step it runs, so recovery and the step log know which "
            "host a step ran on. Empty: `<hostname>:<port>` of `qilin.server.listen` "
            "(`<hostname>:pid-<pid>` with port 0). Give each server a distinct one.",
     .check = check_server_id,
     .accepts = "empty, or 1 to 200 of A-Z a-z 0-9 . - _ : @"},
    {.key = "qilin.server.allowed-hosts",
     .type = QL_CONFIG_LIST,
     .def = "",
     .doc = "Names (besides the listen address, and localhost when it is loopback) a request's "
            "Host header may give, e.g. the server's DNS name; any other Host gets 421, so a web "
            "page cannot reach the API by DNS rebinding.",
     .check = check_server_name,
     .accepts = "host names or addresses (A-Z a-z 0-9 . - _ :)"},
    {.key = "qilin.adhoc.allow-commands",
     .type = QL_CONFIG_BOOL,
     .def = "false",
     .doc = "Whether an ad-hoc job (POST /kylin/api/jobs) may give its own shell steps (any "
            "argv, run as the server's user). Off: ad-hoc jobs take their type's template steps "
            "or noop/sleep/warn/fail steps only, and shell steps get 403."},
    {.key = "qilin.server.healthz-writer-stall-ms",
     .type = QL_CONFIG_MS,
     .def = "5000",
     .min = 100,
     .max = HOUR_MS,
     .doc = "GET /healthz answers 503 when a store write has waited this long with no commit "
            "meanwhile (the writer is stuck, e.g. on a slow disk); an idle writer is healthy."},
    {.key = "qilin.server.master-lease-ms",
     .type = QL_CONFIG_MS,
     .def = "5000",
     .min = 1000,
     .max = HOUR_MS,
     .doc = "The master renews a lease of the job engine lock every 250 ms: in the lock file "
            "(LMDB), or in the store on the database's clock (PostgreSQL). A standby that finds "
            "it older than this replaces the master (stopped, traced, wedged or cut off): on "
            "LMDB it kills the master's process, on PostgreSQL it ends the master's lock "
            "session; then it takes the lock. On PostgreSQL a master whose renewal stays "
            "unanswered for half of it steps down. Must exceed `qilin.storage.writer-stall-ms` "
            "(see Several servers in the user guide)."},
    {.key = "qilin.cluster.takeover-grace-ms",
     .type = QL_CONFIG_MS,
     .def = "10000",
     .min = 0,
     .max = HOUR_MS,
     .doc = "On a store shared by servers on several hosts (PostgreSQL): how long a new master "
            "waits before it starts again a step that another server was running when it took "
            "over. That server may only be paused or cut off, its step still running; by then "
            "it has lost its lock session and stopped its steps. The default is about the time "
            "PostgreSQL's keepalives take to end a dead lock session. 0: no wait. Steps this "
            "server ran itself are killed at once and need none (see Several servers in the "
            "user guide)."},
    /* scheduler */
    {.key = "kylin.job.scheduler.default",
     .type = QL_CONFIG_INT,
     .def = "0",
     .allowed = scheduler_ids,
     .doc = "Scheduler: 0 one scheduling server per store (job engine lock), 2 distributed job "
            "servers (every job server runs jobs, each under a ZooKeeper lock of its own; one "
            "elected server runs the dispatcher), 100 leader election over ZooKeeper (2 and 100 "
            "need `kylin.env.zookeeper-connect-string`)."},
    {.key = "kylin.job.scheduler.poll-interval-second",
     .type = QL_CONFIG_INT,
     .def = "30",
     .min = 1,
     .max = 86400,
     .doc = "Seconds between two looks for READY jobs; submissions, resumes and finished jobs "
            "also wake the fetcher at once (on a PostgreSQL store also those made on another "
            "server)."},
    {.key = "kylin.job.max-concurrent-jobs",
     .type = QL_CONFIG_INT,
     .def = "10",
     .min = 1,
     .max = 10000,
     .scopes = QL_CONFIG_SCOPE_PROJECT,
     .doc = "Most jobs this server runs at once; a project's value limits that project's jobs."},
    {.key = "kylin.job.retry",
     .type = QL_CONFIG_INT,
     .def = "0",
     .min = 0,
     .max = 100,
     .doc = "Extra tries for a failing step before it goes to ERROR (a template may set its "
            "own)."},
    {.key = "kylin.job.retry-interval",
     .type = QL_CONFIG_MS,
     .def = "30000",
     .min = 0,
     .max = DAY_MS,
     .doc = "Wait between two tries of a failing step."},
    {.key = "kylin.job.execute-output.max-size",
     .type = QL_CONFIG_SIZE,
     .def = "10485760",
     .min = KIB,
     .max = GIB,
     .doc = "Most bytes of a step's output kept in the store; the full log stays on disk under "
            "the data directory."},
    {.key = "kylin.garbage.storage.executable-survival-time-threshold",
     .type = QL_CONFIG_MS,
     .def = "30d",
     .min = MIN_MS,
     .max = 36500 * DAY_MS,
     .doc = "Final jobs (FINISHED, DISCARDED) whose last change is older than this are deleted "
            "by the master, with their steps, outputs and step logs (retention, as Kylin's "
            "metadata cleanup)."},
    {.key = "qilin.retention.interval-ms",
     .type = QL_CONFIG_MS,
     .def = "1h",
     .min = 0,
     .max = 7 * DAY_MS,
     .doc = "How often the master looks for jobs past "
            "`kylin.garbage.storage.executable-survival-time-threshold`; 0 turns retention "
            "off."},
    {.key = "qilin.retention.batch",
     .type = QL_CONFIG_INT,
     .def = "100",
     .min = 1,
     .max = 10000,
     .doc = "Jobs deleted per write transaction by retention; a full batch is followed by the "
            "next 50 ms later, so other writes go between and none waits long."},
    {.key = "kylin.cube.schedule.assigned-servers",
     .type = QL_CONFIG_LIST,
     .def = "",
     .scopes = QL_CONFIG_SCOPE_PROJECT | QL_CONFIG_SCOPE_MODEL,
     .doc = "With the distributed scheduler (2): the servers (host names or addresses) that may "
            "run the jobs; empty means any job server.",
     .check = check_server_name,
     .accepts = "host names or addresses (A-Z a-z 0-9 . - _ :)"},
    {.key = "qilin.jobs.templates",
     .type = QL_CONFIG_PATH,
     .def = "conf/jobs.yaml",
     .doc = "YAML file with the job templates (the steps of each job type)."},
    {.key = "qilin.step.kill-grace-ms",
     .type = QL_CONFIG_MS,
     .def = "10000",
     .min = 0,
     .max = HOUR_MS,
     .doc = "How long a step's process has between SIGTERM and SIGKILL when it is paused, "
            "discarded or timed out."},
    {.key = "qilin.shutdown.running-steps",
     .type = QL_CONFIG_ENUM,
     .def = "pause",
     .allowed = shutdown_modes,
     .doc = "What SIGTERM does to running steps: `pause` stops them (they resume from that step "
            "after restart), `wait` lets them finish first (for `qilin.shutdown.grace-ms` at "
            "most)."},
    {.key = "qilin.shutdown.grace-ms",
     .type = QL_CONFIG_MS,
     .def = "30000",
     .min = 0,
     .max = DAY_MS,
     .doc = "Longest a shutdown waits for running steps (with `wait`) before pausing them "
            "anyway: their jobs go back to READY, their processes get SIGTERM (SIGKILL after "
            "`qilin.step.kill-grace-ms`), and they resume from that step after a restart. 0 "
            "pauses them at once."},
    /* automatic segment builds */
    {.key = "kylin.model.auto-segment-build.dispatcher-interval-ms",
     .type = QL_CONFIG_MS,
     .def = "30000",
     .min = 100,
     .max = DAY_MS,
     .doc = "Fixed delay between the end of one dispatcher scan and the start of the next."},
    {.key = "kylin.web.timezone",
     .type = QL_CONFIG_TIMEZONE,
     .def = "",
     .scopes = QL_CONFIG_SCOPE_PROJECT,
     .doc = "IANA time zone of trigger times and date ranges; empty means UTC. A project's "
            "value wins over the server's."},
    /* ZooKeeper */
    {.key = "kylin.env.zookeeper-connect-string",
     .type = QL_CONFIG_STRING,
     .def = "",
     .doc = "ZooKeeper servers; empty means no ZooKeeper (scheduler 0 with the store's job "
            "engine lock). Set, scheduler 0 holds the ZooKeeper node "
            "`<base>/<cluster>/job_engine/global_job_engine_lock` instead, and scheduler 100 "
            "(which needs it) elects its leader there (see Several servers in the user guide).",
     .check = check_zk_connect,
     .accepts = "empty, or HOST:PORT[,HOST:PORT...] with an optional /chroot"},
    {.key = "kylin.env.zookeeper-base-path",
     .type = QL_CONFIG_STRING,
     .def = "/kylin",
     .doc = "ZooKeeper path under which each cluster keeps its nodes.",
     .check = check_zk_path,
     .accepts = "an absolute ZooKeeper path such as /kylin (no empty, . or .. element, no "
                "trailing /)"},
    {.key = "qilin.cluster.session-timeout-ms",
     .type = QL_CONFIG_MS,
     .def = "10000",
     .min = 400,
     .max = 120000,
     .doc = "ZooKeeper session timeout asked for (the server may narrow it to its own bounds): "
            "how long ZooKeeper waits after a server of this cluster stopped answering before it "
            "ends its session and frees its locks and leadership. The server closes its own "
            "session when its loop stalls for half of it. The default equals the default "
            "`qilin.cluster.takeover-grace-ms` (docs/zookeeper.md)."},
    {.key = "qilin.cluster.suspend-kill-ms",
     .type = QL_CONFIG_MS,
     .def = "0",
     .min = 0,
     .max = HOUR_MS,
     .doc = "After the ZooKeeper connection is lost, how long the server waits for it to come "
            "back before it treats its locks as doubtful and stops its running steps (another "
            "server may legally take over about a third of the session timeout after the loss). "
            "0: a quarter of the session timeout; must be shorter than the session timeout "
            "(docs/zookeeper.md)."},
    /* storage */
    {.key = "qilin.storage.path",
     .type = QL_CONFIG_PATH,
     .def = "./data",
     .doc = "Data directory: the LMDB store, its lock and the step logs."},
    {.key = "qilin.storage.map-size",
     .type = QL_CONFIG_SIZE,
     .def = "64GiB",
     .min = MIB,
     .max = 16 * TIB,
     .doc = "Largest size the store may grow to (address space reserved, not disk used); "
            "writes fail cleanly beyond it."},
    {.key = "qilin.storage.writer-stall-ms",
     .type = QL_CONFIG_MS,
     .def = "2000",
     .min = 100,
     .max = HOUR_MS,
     .doc = "How long a write waits for another process's write transaction on the store "
            "before it looks at that process: one that is stopped or traced (SIGSTOP, a "
            "debugger) is killed, so it cannot stall every server's writes; one that runs is "
            "waited for (see Several servers in the user guide). On PostgreSQL: how long a "
            "write transaction may sit idle between two statements (its server stopped) before "
            "the database ends its session and frees the rows it locked."},
    {.key = "qilin.storage.url",
     .type = QL_CONFIG_STRING,
     .def = "",
     .doc = "Where the metadata lives. Empty: the embedded LMDB store under "
            "`qilin.storage.path`. Otherwise a PostgreSQL 15+ database, as a "
            "`postgresql://user@host:port/db?...` URL or a libpq conninfo string, which "
            "several servers may share (docs/postgresql.md). A password is better kept in "
            "`PGPASSFILE` or `PGPASSWORD`; one in the URL is never logged."},
    {.key = "qilin.storage.pg.schema",
     .type = QL_CONFIG_STRING,
     .def = "qilin",
     .doc = "PostgreSQL schema that holds the metadata (created at the first start), so one "
            "database can hold several clusters."},
    {.key = "qilin.storage.pg.pool-size",
     .type = QL_CONFIG_INT,
     .def = "6",
     .min = 2,
     .max = 64,
     .doc = "PostgreSQL connections the server keeps for its transactions (read transactions "
            "run on the loop and in the thread pool)."},
    {.key = "qilin.storage.pg.writers",
     .type = QL_CONFIG_INT,
     .def = "2",
     .min = 1,
     .max = 16,
     .doc = "Write transactions the server runs on PostgreSQL at once, each batch on a session of "
            "its own; changes of one model still commit in the order they were made "
            "(docs/postgresql.md, Writer lanes). Keep it below pool-size."},
    {.key = "qilin.storage.pg.lock-timeout-ms",
     .type = QL_CONFIG_MS,
     .def = "2000",
     .min = 10,
     .max = HOUR_MS,
     .doc = "How long a PostgreSQL write waits for a row or model lock another server holds "
            "before the batch is retried in halves (then fails with QL-00023)."},
    {.key = "qilin.storage.pg.require-sync-replication",
     .type = QL_CONFIG_BOOL,
     .def = "false",
     .doc = "Refuse to start unless the PostgreSQL primary commits synchronously to a standby "
            "(`synchronous_standby_names` set): with asynchronous replication, a failover can "
            "lose commits the server already acknowledged (see docs/postgresql.md)."},
    /* HTTP and API */
    {.key = "qilin.http.max-body-bytes",
     .type = QL_CONFIG_SIZE,
     .def = "1MiB",
     .min = KIB,
     .max = GIB,
     .doc = "Largest request body; a larger one gets 413."},
    {.key = "qilin.http.max-header-bytes",
     .type = QL_CONFIG_SIZE,
     .def = "16KiB",
     .min = KIB,
     .max = MIB,
     .doc = "Largest request line plus headers; a larger request is refused and closed."},
    {.key = "qilin.http.idle-timeout-ms",
     .type = QL_CONFIG_MS,
     .def = "60000",
     .min = 100,
     .max = DAY_MS,
     .doc = "A keep-alive connection with no request in flight is closed after this long."},
    {.key = "qilin.http.request-timeout-ms",
     .type = QL_CONFIG_MS,
     .def = "30000",
     .min = 100,
     .max = HOUR_MS,
     .doc = "Longest time to receive a whole request once it has started (slow clients are cut "
            "off)."},
    {.key = "qilin.http.max-connections",
     .type = QL_CONFIG_INT,
     .def = "1024",
     .min = 1,
     .max = 1000000,
     .doc = "Most client connections open at once. When all are taken, a new connection takes "
            "the place of the oldest unauthenticated one with nothing in flight; when there is "
            "none it gets 503 and is closed."},
    {.key = "qilin.http.max-connections-per-address",
     .type = QL_CONFIG_INT,
     .def = "64",
     .min = 1,
     .max = 1000000,
     .doc = "Most connections open at once from one client address (an IPv4 address, or an IPv6 "
            "/64); further ones get 503 and are closed. Behind a reverse proxy every client has "
            "the proxy's address: raise it there."},
    {.key = "qilin.http.first-request-timeout-ms",
     .type = QL_CONFIG_MS,
     .def = "10000",
     .min = 100,
     .max = HOUR_MS,
     .doc = "A new connection must deliver the headers of its first request within this long, "
            "or it is closed (408 when it had started one)."},
    {.key = "qilin.http.auth-reserved-connections",
     .type = QL_CONFIG_INT,
     .def = "64",
     .min = 1,
     .max = 1000000,
     .doc = "Connection slots that unauthenticated connections cannot keep (at most a quarter "
            "of `qilin.http.max-connections` applies): a connection accepted into them is "
            "closed after its first answer unless that request had valid credentials."},
    {.key = "qilin.api.page-size-max",
     .type = QL_CONFIG_INT,
     .def = "1000",
     .min = 1000,
     .max = 100000,
     .doc = "Largest `page_size` a paged list accepts."},
    {.key = "qilin.metrics.require-auth",
     .type = QL_CONFIG_BOOL,
     .def = "true",
     .doc = "Whether GET /metrics needs the same Basic auth as the API (/healthz never does)."},
    /* logging */
    {.key = "qilin.log.level",
     .type = QL_CONFIG_ENUM,
     .def = "info",
     .allowed = log_levels,
     .doc = "Least severe log level written."},
};

const ql_config_option_t *ql_config_options(size_t *count) {
    *count = sizeof options / sizeof options[0];
    return options;
}

const ql_config_option_t *ql_config_find_option(const char *key) {
    if (!key)
        return NULL;
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (strcmp(options[i].key, key) == 0)
            return &options[i];
    return NULL;
}

/* ---- descriptions: errors and the generated reference ---- */

/* Formats a duration in the largest unit that divides it, in a form the parser accepts. */
static void fmt_ms(int64_t ms, char *buf, size_t len) {
    static const struct {
        int64_t unit;
        const char *name;
    } units[] = {{DAY_MS, "d"}, {HOUR_MS, "h"}, {MIN_MS, "m"}, {SEC_MS, "s"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (ms != 0 && ms % units[i].unit == 0) {
            snprintf(buf, len, "%" PRId64 "%s", ms / units[i].unit, units[i].name);
            return;
        }
    snprintf(buf, len, "%" PRId64 "ms", ms);
}

/* Formats a size in the largest binary unit that divides it, in a form the parser accepts. */
static void fmt_size(int64_t b, char *buf, size_t len) {
    static const struct {
        int64_t unit;
        const char *name;
    } units[] = {{TIB, "TiB"}, {GIB, "GiB"}, {MIB, "MiB"}, {KIB, "KiB"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (b != 0 && b % units[i].unit == 0) {
            snprintf(buf, len, "%" PRId64 "%s", b / units[i].unit, units[i].name);
            return;
        }
    snprintf(buf, len, "%" PRId64 "B", b);
}

static void join_allowed(const char *const *allowed, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; allowed[i] && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", allowed[i]);
}

const char *ql_config_describe(const ql_config_option_t *o, char *buf, size_t len) {
    char lo[32], hi[32], list[160];
    switch (o->type) {
    case QL_CONFIG_BOOL:
        snprintf(buf, len, "true or false");
        break;
    case QL_CONFIG_INT:
        if (o->allowed) {
            join_allowed(o->allowed, list, sizeof list);
            snprintf(buf, len, "one of %s", list);
        } else {
            snprintf(buf, len, "%" PRId64 "..%" PRId64, o->min, o->max);
        }
        break;
    case QL_CONFIG_MS:
        fmt_ms(o->min, lo, sizeof lo);
        fmt_ms(o->max, hi, sizeof hi);
        snprintf(buf, len, "%s..%s", lo, hi);
        break;
    case QL_CONFIG_SIZE:
        fmt_size(o->min, lo, sizeof lo);
        fmt_size(o->max, hi, sizeof hi);
        snprintf(buf, len, "%s..%s", lo, hi);
        break;
    case QL_CONFIG_STRING:
        snprintf(buf, len, "%s", o->accepts ? o->accepts : "any text");
        break;
    case QL_CONFIG_ENUM:
        join_allowed(o->allowed, list, sizeof list);
        snprintf(buf, len, "one of %s", list);
        break;
    case QL_CONFIG_LIST:
        if (o->allowed)
            join_allowed(o->allowed, list, sizeof list);
        else
            snprintf(list, sizeof list, "%s", o->accepts ? o->accepts : "items");
        if (o->min > 0)
            snprintf(buf, len, "a comma list (at least %" PRId64 ") of %s", o->min, list);
        else
            snprintf(buf, len, "a comma list of %s", list);
        break;
    case QL_CONFIG_ADDRESS:
        snprintf(buf, len, "HOST:PORT, port %" PRId64 "..%" PRId64, o->min, o->max);
        break;
    case QL_CONFIG_PATH:
        snprintf(buf, len, "a non-empty path");
        break;
    case QL_CONFIG_TIMEZONE:
        snprintf(buf, len, "an IANA zone name such as Asia/Shanghai, or empty for UTC");
        break;
    case QL_CONFIG_USERS:
        snprintf(buf, len, "a YAML sequence of users, or NAME:PASSWORD_HASH:ADMIN[;...]");
        break;
    }
    return buf;
}

static const char *type_name(ql_config_type_t t) {
    static const char *const names[] = {
        [QL_CONFIG_BOOL] = "bool",     [QL_CONFIG_INT] = "int",
        [QL_CONFIG_MS] = "duration",   [QL_CONFIG_SIZE] = "size",
        [QL_CONFIG_STRING] = "string", [QL_CONFIG_ENUM] = "enum",
        [QL_CONFIG_LIST] = "list",     [QL_CONFIG_ADDRESS] = "address",
        [QL_CONFIG_PATH] = "path",     [QL_CONFIG_TIMEZONE] = "time zone",
        [QL_CONFIG_USERS] = "users",
    };
    return names[t];
}

/* Writes s escaping what would break a Markdown table cell. */
static void md_cell(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static const char md_head[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated by tools/gen-config-doc from config/config_table.c. Do not edit: change "
    "the table and regenerate (a test fails when this file is stale). -->\n"
    "\n"
    "`qilind` reads a YAML file (`--config FILE`, default `conf/qilin.yaml`): a flat mapping of "
    "`key: value` lines whose keys are the dotted names below. Then each `--set KEY=VALUE` "
    "applies in order, with the same rules. Any error stops the server before it starts, with "
    "`file:line: reason` (or `--set KEY=VALUE: reason`): an unknown key (with the closest known "
    "key), a key given twice in the file, or a value of the wrong type or outside its range. "
    "`qilind --print-config` prints the effective configuration and where each value came "
    "from.\n"
    "\n"
    "Keys that Apache Kylin has keep Kylin's property names; Qilin's own start with `qilin.`. "
    "Keys marked *project* may also be set per project with `PUT "
    "/kylin/api/projects/{project}/config` (validated by the same rules); a project's value wins "
    "for that project. Keys marked *model* may also be set in a model's own config.\n"
    "\n"
    "## Value types\n"
    "\n"
    "| type | syntax |\n"
    "| --- | --- |\n"
    "| bool | `true` or `false` |\n"
    "| int | a decimal integer |\n"
    "| duration | milliseconds (`1500`), or numbers with units `ms`, `s`, `m`, `h`, `d` (`30s`, "
    "`5m`, `1h30m`) |\n"
    "| size | bytes (`1048576`), or a number with one unit `B`, `KiB`, `MiB`, `GiB`, `TiB` "
    "(`64GiB`) |\n"
    "| string | text; some keys restrict it (see accepted) |\n"
    "| enum | exactly one of the accepted words |\n"
    "| list | a comma list (`job,query`) or a YAML sequence (`[job, query]`); no empty or "
    "repeated items |\n"
    "| address | `HOST:PORT`: an IPv4 address, `[IPv6]` or a host name |\n"
    "| path | a file or directory; a relative path in the configuration file is relative to the "
    "file's folder (kept relative to the working directory when nothing exists there but "
    "something does in the working directory); given by `--set`, `--data` or as the default, "
    "relative to qilind's working directory |\n"
    "| time zone | an IANA name from the system's tz database (`/usr/share/zoneinfo`), e.g. "
    "`Asia/Shanghai`; empty means UTC |\n"
    "| users | see [Users](#users) |\n"
    "\n"
    "## Options\n"
    "\n"
    "| key | type | default | accepted | override | description |\n"
    "| --- | --- | --- | --- | --- | --- |\n";

static const char md_users[] =
    "\n"
    "## Users\n"
    "\n"
    "Every `/kylin/api` call needs HTTP Basic auth. With `qilin.server.users` empty (the "
    "default) there is one user, `ADMIN`, whose password the server generates at its first "
    "start (24 random characters) into `admin.password` in the data directory, a file only the "
    "server's user can read (mode 0600); later starts read it, and the `qilin` CLI reads it "
    "when no password is given. It is never logged, and the server refuses to start on any "
    "address but loopback until users are configured. Kylin's public `ADMIN`/`KYLIN` is not "
    "accepted unless you configure its hash yourself (`echo KYLIN | qilin passwd --user ADMIN`, "
    "for Kylin's own scripts); the server then logs a warning, and still listens on loopback "
    "only. To set users, give password hashes made by `qilin passwd` (argon2id; crypt(3) hashes "
    "such as `$y$`, `$6$` or `$2b$` from `mkpasswd` work too), never plain passwords. Names "
    "match case-insensitively:\n"
    "\n"
    "```yaml\n"
    "qilin.server.users:\n"
    "  - name: ADMIN\n"
    "    password_hash: \"$argon2id$v=19$m=65536,t=2,p=1$...\"\n"
    "    role: ADMIN\n"
    "```\n"
    "\n"
    "On the command line the same list is `--set "
    "qilin.server.users='NAME:HASH:ROLE[;NAME:HASH:ROLE...]'` (quoted for the shell: hashes "
    "contain `$`). Roles: `ADMIN` may do everything; `VIEWER` may read (the REST API, the web "
    "console, `/metrics`) and every write it sends is refused with 403.\n";

int ql_config_write_markdown(FILE *out) {
    fputs(md_head, out);
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        const ql_config_option_t *o = &options[i];
        char acc[300];
        fprintf(out, "| `%s` | %s | ", o->key, type_name(o->type));
        if (o->type == QL_CONFIG_USERS)
            fputs("ADMIN, generated password", out);
        else if (o->type == QL_CONFIG_TIMEZONE && !*o->def)
            fputs("(empty: UTC)", out);
        else if (!*o->def)
            fputs("(empty)", out);
        else
            fprintf(out, "`%s`", o->def);
        fputs(" | ", out);
        md_cell(out, ql_config_describe(o, acc, sizeof acc));
        bool p = o->scopes & QL_CONFIG_SCOPE_PROJECT, m = o->scopes & QL_CONFIG_SCOPE_MODEL;
        fprintf(out, " | %s%s%s | ", p ? "project" : "", p && m ? ", " : "",
                m ? "model" : (p ? "" : "no"));
        md_cell(out, o->doc);
        fputs(" |\n", out);
    }
    fputs(md_users, out);
    return ferror(out) ? UV_EIO : 0;
}
