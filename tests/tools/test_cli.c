/*
 * The `qilin` command, end to end: the real binary runs as a child process (stdin, stdout,
 * stderr on pipes, a private HOME so no user config leaks in, every wait bounded by a
 * deadline).
 *
 * Three kinds of tests:
 *   - no server: --help of every group and command, usage errors (exit 2), an unreachable
 *     server (exit 3), qilin passwd;
 *   - a fake server: a tiny HTTP/1.1 responder on a thread of this process that answers from
 *     a per-test handler and records each request, for what the real server cannot be made to
 *     do on demand (pages of exactly N items, a 401, a non-Kylin answer, a job that goes
 *     RUNNING -> FINISHED on the third poll) and to check the exact requests sent;
 *   - the real qilind (skipped when build/tools/qilind does not exist): a project, a model,
 *     automatic builds, a manual build waited for, segments, --json, a 409.
 */
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http/ql_auth.h"

#define QILIN QL_BUILD_DIR "/tools/qilin"
#define QILIND QL_BUILD_DIR "/tools/qilind"
#define RUN_DEADLINE_MS 60000

extern char **environ;

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- running qilin ---- */

typedef struct run {
    int status; /* exit code, or 128 + signal */
    char *out, *err;
} run_t;

/* Per-test settings every run gets: a private HOME and, when set, QILIN_SERVER. */
static char g_home[256];
static char g_server[128];
/* When set, runs get QILIN_PASSWORD_FILE=g_pwfile (the real server's generated password). */
static char g_pwfile[400];
/* When set, the child runs in this directory. */
static char g_cwd[400];

typedef struct sbuf {
    char *d;
    size_t n;
} sbuf_t;

static void sbuf_add(sbuf_t *b, const char *s, size_t n) {
    b->d = realloc(b->d, b->n + n + 1);
    cr_assert_not_null(b->d);
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = '\0';
}

/* Builds the child's environment: ours without QILIN_*, HOME and XDG_CONFIG_HOME, then
 * HOME=g_home, QILIN_SERVER=g_server (when set), then extra ("K=V" strings). */
static char **child_env(const char *const *extra) {
    size_t n = 0;
    while (environ[n])
        n++;
    size_t n_extra = 0;
    while (extra && extra[n_extra])
        n_extra++;
    char **env = calloc(n + n_extra + 4, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "QILIN_", 6) && strncmp(environ[i], "HOME=", 5) &&
            strncmp(environ[i], "XDG_CONFIG_HOME=", 16))
            env[k++] = strdup(environ[i]);
    char *h = malloc(strlen(g_home) + 6);
    sprintf(h, "HOME=%s", g_home);
    env[k++] = h;
    if (g_server[0]) {
        char *s = malloc(strlen(g_server) + 14);
        sprintf(s, "QILIN_SERVER=%s", g_server);
        env[k++] = s;
    }
    if (g_pwfile[0]) {
        char *s = malloc(strlen(g_pwfile) + 21);
        sprintf(s, "QILIN_PASSWORD_FILE=%s", g_pwfile);
        env[k++] = s;
    }
    for (size_t i = 0; i < n_extra; i++)
        env[k++] = strdup(extra[i]);
    return env;
}

static void free_env(char **env) {
    for (char **e = env; *e; e++)
        free(*e);
    free(env);
}

/* Runs qilin with args (NULL-terminated, without argv[0]), feeding in (may be NULL) on stdin.
 * Fails the test when the child does not end within RUN_DEADLINE_MS. */
static void run_full(run_t *r, const char *in, const char *const *extra_env,
                     const char *const *args) {
    size_t n = 0;
    while (args[n])
        n++;
    char **argv = calloc(n + 2, sizeof *argv);
    argv[0] = (char *)QILIN;
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    char **env = child_env(extra_env);
    int pin[2], pout[2], perr[2];
    cr_assert_eq(pipe(pin), 0);
    cr_assert_eq(pipe(pout), 0);
    cr_assert_eq(pipe(perr), 0);
    /* No assertion between fork and exec: with --full-stats even a passing one is a message to
     * Criterion's runner, which must come from the test's own process. */
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        for (int fd = 3; fd < 64; fd++)
            close(fd);
        if (g_cwd[0] && chdir(g_cwd) != 0)
            _exit(126);
        execve(QILIN, argv, env);
        _exit(127);
    }
    cr_assert(pid > 0);
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    if (in) {
        /* Small inputs only: they fit the pipe buffer, so this cannot block. */
        ssize_t w = write(pin[1], in, strlen(in));
        cr_assert_eq(w, (ssize_t)strlen(in));
    }
    close(pin[1]);
    sbuf_t out = {0}, err = {0};
    sbuf_add(&out, "", 0);
    sbuf_add(&err, "", 0);
    int64_t deadline = mono_ms() + RUN_DEADLINE_MS;
    struct pollfd fds[2] = {{.fd = pout[0], .events = POLLIN}, {.fd = perr[0], .events = POLLIN}};
    int open_fds = 2;
    while (open_fds > 0) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            cr_assert_fail("qilin %s did not end within %d ms", args[0], RUN_DEADLINE_MS);
        }
        int pr = poll(fds, 2, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        cr_assert(pr >= 0);
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got > 0) {
                sbuf_add(i ? &err : &out, buf, (size_t)got);
            } else {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r->out = out.d;
    r->err = err.d;
    free(argv);
    free_env(env);
}

static void run_free(run_t *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

#define RUN(r, ...) run_full((r), NULL, NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_ENV(r, env, ...) run_full((r), NULL, (env), (const char *const[]){__VA_ARGS__, NULL})

#define EXPECT_EXIT(r, code)                                                                       \
    cr_assert_eq((r)->status, (code), "exit %d, expected %d\nstdout:\n%s\nstderr:\n%s",            \
                 (r)->status, (code), (r)->out, (r)->err)
#define EXPECT_IN(hay, needle)                                                                     \
    cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in:\n%s", (needle), (hay))

static void make_home(void) {
    cr_assert_eq(access(QILIN, X_OK), 0, "%s is missing: build the qilin target first", QILIN);
    ql_test_tmpdir(g_home, sizeof g_home, "qilin-cli-home");
    g_server[0] = '\0';
    g_pwfile[0] = '\0';
    g_cwd[0] = '\0';
}

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* ---- a fake Kylin server ---- */

typedef struct req {
    char method[16];
    char target[1024]; /* path and query, as sent */
    char auth[256];    /* the Authorization header value */
    char ctype[128];
    char *body;
} req_t;

typedef struct fake fake_t;
/* Writes the answer's status and body; body is malloc'd by the handler (freed by the fake). */
typedef void (*fake_handler)(fake_t *f, const req_t *rq, int *status, char **body);

#define MAX_REQS 64

struct fake {
    int lfd, wake[2];
    int port;
    pthread_t thread;
    fake_handler handler;
    pthread_mutex_t mu;
    req_t reqs[MAX_REQS]; /* every request, in order (under mu) */
    int n_reqs;
    int counter; /* for handlers that change their answer over time (under mu) */
};

static fake_t F;

static char *strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *strdupf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    cr_assert(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    return s;
}

static void header_value(const char *head, const char *name, char *out, size_t size) {
    out[0] = '\0';
    size_t nl = strlen(name);
    for (const char *p = head; (p = strchr(p, '\n'));) {
        p++;
        if (!strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            size_t n = strcspn(v, "\r\n");
            snprintf(out, size, "%.*s", (int)n, v);
            return;
        }
    }
}

static void serve_one(fake_t *f, int fd) {
    char buf[65536];
    size_t n = 0;
    char *end = NULL;
    int64_t deadline = mono_ms() + 10000;
    while (!end && n < sizeof buf - 1 && mono_ms() < deadline) {
        ssize_t got = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (got <= 0)
            return;
        n += (size_t)got;
        buf[n] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    if (!end)
        return;
    req_t rq = {0};
    sscanf(buf, "%15s %1023s", rq.method, rq.target);
    char cl[32];
    header_value(buf, "Content-Length", cl, sizeof cl);
    header_value(buf, "Authorization", rq.auth, sizeof rq.auth);
    header_value(buf, "Content-Type", rq.ctype, sizeof rq.ctype);
    size_t body_len = (size_t)atol(cl), have = n - (size_t)(end + 4 - buf);
    rq.body = calloc(1, body_len + 1);
    memcpy(rq.body, end + 4, have < body_len ? have : body_len);
    while (have < body_len && mono_ms() < deadline) {
        ssize_t got = recv(fd, rq.body + have, body_len - have, 0);
        if (got <= 0)
            break;
        have += (size_t)got;
    }
    int status = 500;
    char *answer = NULL;
    f->handler(f, &rq, &status, &answer);
    pthread_mutex_lock(&f->mu);
    if (f->n_reqs < MAX_REQS)
        f->reqs[f->n_reqs++] = rq;
    else
        free(rq.body);
    pthread_mutex_unlock(&f->mu);
    const char *type = answer && answer[0] == '<' ? "text/html" : "application/json";
    char *resp = strdupf("HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n%s",
                         status, type, answer ? strlen(answer) : 0, answer ? answer : "");
    size_t len = strlen(resp), off = 0;
    while (off < len) {
        ssize_t w = send(fd, resp + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(resp);
    free(answer);
}

static void *fake_main(void *arg) {
    fake_t *f = arg;
    for (;;) {
        struct pollfd fds[2] = {{.fd = f->lfd, .events = POLLIN},
                                {.fd = f->wake[0], .events = POLLIN}};
        if (poll(fds, 2, -1) < 0 && errno == EINTR)
            continue;
        if (fds[1].revents)
            return NULL;
        int c = accept(f->lfd, NULL, NULL);
        if (c < 0)
            continue;
        serve_one(f, c);
        close(c);
    }
}

static void fake_start(fake_handler h) {
    memset(&F, 0, sizeof F);
    F.handler = h;
    pthread_mutex_init(&F.mu, NULL);
    F.lfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(F.lfd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(F.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(F.lfd, 16), 0);
    socklen_t sl = sizeof sa;
    getsockname(F.lfd, (struct sockaddr *)&sa, &sl);
    F.port = ntohs(sa.sin_port);
    cr_assert_eq(pipe(F.wake), 0);
    cr_assert_eq(pthread_create(&F.thread, NULL, fake_main, &F), 0);
    snprintf(g_server, sizeof g_server, "http://127.0.0.1:%d", F.port);
}

static void fake_stop(void) {
    cr_assert_eq(write(F.wake[1], "x", 1), 1);
    pthread_join(F.thread, NULL);
    close(F.lfd);
    close(F.wake[0]);
    close(F.wake[1]);
    for (int i = 0; i < F.n_reqs; i++)
        free(F.reqs[i].body);
}

static char *envelope(json_t *data) {
    json_t *e = json_pack("{s:s,s:O,s:s}", "code", "000", "data", data, "msg", "");
    char *s = json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(e);
    json_decref(data);
    return s;
}

static char *error_envelope(const char *msg, const char *code) {
    json_t *e =
        json_pack("{s:s,s:n,s:s,s:s}", "code", "999", "data", "msg", msg, "error_code", code);
    char *s = json_dumps(e, JSON_COMPACT);
    json_decref(e);
    return s;
}

/* Reads an integer query parameter from a request target; def when absent. */
static long query_int(const char *target, const char *key, long def) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    for (const char *p = strchr(target, '?'); p; p = strchr(p + 1, '&')) {
        if (!strncmp(p + 1, pat, strlen(pat)))
            return atol(p + 1 + strlen(pat));
    }
    return def;
}

static void setup_none(void) {
    make_home();
}
static void teardown_none(void) {
    rm_rf(g_home);
}

/* ---- without a server ---- */

TestSuite(cli, .init = setup_none, .fini = teardown_none, .timeout = 120);

Test(cli, group_help_names_commands) {
    static const struct {
        const char *group;
        const char *cmds[11];
    } groups[] = {
        {"project", {"create", "list", "config", "auto-build"}},
        {"model", {"create", "list", "status", "auto-build"}},
        {"segment", {"build", "list", "merge", "refresh", "delete"}},
        {"job",
         {"list", "show", "pause", "resume", "discard", "restart", "logs", "delete", "submit",
          "wait"}},
        {"auto-build", {"status"}},
    };
    for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) {
        run_t r;
        RUN(&r, groups[g].group, "--help");
        EXPECT_EXIT(&r, 0);
        EXPECT_IN(r.out, "usage: qilin ");
        for (size_t c = 0; groups[g].cmds[c]; c++) {
            EXPECT_IN(r.out, groups[g].cmds[c]);
            run_t rc;
            RUN(&rc, groups[g].group, groups[g].cmds[c], "--help");
            EXPECT_EXIT(&rc, 0);
            char usage[128];
            snprintf(usage, sizeof usage, "usage: qilin %s %s", groups[g].group, groups[g].cmds[c]);
            EXPECT_IN(rc.out, usage);
            EXPECT_IN(rc.out, "Example:");
            EXPECT_IN(rc.out, "Exit status");
            run_free(&rc);
        }
        run_free(&r);
        /* A group alone is a usage error that still shows what it has. */
        RUN(&r, groups[g].group);
        EXPECT_EXIT(&r, 2);
        EXPECT_IN(r.err, "Commands:");
        run_free(&r);
    }
    run_t r;
    RUN(&r, "passwd", "--help");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "qilin.server.users");
    run_free(&r);
    RUN(&r, "--help");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "segment");
    run_free(&r);
}

Test(cli, time_help_says_utc) {
    run_t r;
    RUN(&r, "segment", "build", "--help");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "UTC unless --timezone");
    run_free(&r);
}

Test(cli, usage_errors_exit_2) {
    static const char *const cases[][14] = {
        {"project", "frobnicate", NULL},
        {"project", "create", NULL},
        {"project", "create", "a", "b", NULL},
        {"project", "list", "--no-such-option", NULL},
        {"project", "auto-build", "p", "maybe", NULL},
        {"project", "config", "p", "novalue", NULL},
        {"model", "create", "m", NULL}, /* --project missing */
        {"model", "create", "-p", "p", "m", "--partition-column", "DT", NULL},
        {"model", "status", "-p", "p", "m", "SLEEPING", NULL},
        {"model", "auto-build", "-p", "p", "m", "--trigger", "01:00:00", NULL},
        {"segment", "build", "-p", "p", "-m", "m", "--start", "yesterday", NULL},
        {"segment", "build", "-p", "p", "-m", "m", "--start", "2026-02-30", "--end", "1", NULL},
        {"segment", "build", "-p", "p", "-m", "m", "-s", "1", "-e", "2", "--priority", "x"},
        {"segment", "list", "-p", "p", "-m", "m", "--status", "DONE", NULL},
        {"job", "list", "--status", "FINISHED,BOGUS", NULL},
        {"job", "wait", "ID", "--timeout", "soon", NULL},
        {"job", "show", NULL},
        {"project", "list", "--timezone", "Mars/Olympus", NULL},
        {"project", "list", "--limit", "0", NULL},
        {"project", "list", "--json=yes", NULL},
        {"passwd", "--frob", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_t r;
        run_full(&r, NULL, NULL, cases[i]);
        EXPECT_EXIT(&r, 2);
        cr_assert(strlen(r.err) > 0, "case %zu printed no message", i);
        cr_assert_eq(r.out[0], '\0', "case %zu printed on stdout: %s", i, r.out);
        run_free(&r);
    }
}

Test(cli, unreachable_server_exits_3) {
    /* A port that was just free: nothing listens there. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(s, (struct sockaddr *)&sa, &sl);
    close(s);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    run_t r;
    RUN(&r, "project", "list", "--server", url);
    EXPECT_EXIT(&r, 3);
    EXPECT_IN(r.err, "cannot reach the server");
    run_free(&r);
    RUN(&r, "job", "wait", "some-id", "--server", url, "--timeout", "5s");
    EXPECT_EXIT(&r, 3);
    run_free(&r);
}

Test(cli, global_options_may_come_before_the_command) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(s, (struct sockaddr *)&sa, &sl);
    close(s);
    char url[64], eq[80];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    snprintf(eq, sizeof eq, "--server=%s", url);
    run_t r;
    /* The server given before the command is the one tried: nothing listens there (exit 3),
     * where the default server or an "unknown command" would say otherwise. */
    RUN(&r, "--server", url, "project", "list");
    EXPECT_EXIT(&r, 3);
    EXPECT_IN(r.err, "cannot reach the server");
    EXPECT_IN(r.err, url);
    run_free(&r);
    RUN(&r, "--json", eq, "-u", "someone", "job", "list", "--project", "p");
    EXPECT_EXIT(&r, 3);
    EXPECT_IN(r.err, url);
    run_free(&r);
    RUN(&r, "--server", url);
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err, "no command");
    run_free(&r);
}

Test(cli, bad_config_file_exits_2) {
    char path[300];
    snprintf(path, sizeof path, "%s/bad.yaml", g_home);
    write_file(path, "server: http://x\npasword: typo\n", 0600);
    run_t r;
    RUN(&r, "project", "list", "--config", path);
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err, "bad.yaml:2");
    EXPECT_IN(r.err, "pasword");
    run_free(&r);
    RUN(&r, "project", "list", "--config", "/nonexistent/cli.yaml");
    EXPECT_EXIT(&r, 2);
    run_free(&r);
}

static char *extract_hash(const char *out) {
    const char *p = strstr(out, "password_hash: '");
    cr_assert_not_null(p, "no password_hash in: %s", out);
    p += strlen("password_hash: '");
    const char *q = strchr(p, '\'');
    cr_assert_not_null(q);
    return strndup(p, (size_t)(q - p));
}

Test(cli, passwd_hash_verifies) {
    run_t r;
    run_full(&r, "s3cret pass\n", NULL, (const char *const[]){"passwd", "--user", "alice", NULL});
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "- {name: alice, password_hash: '$argon2id$");
    EXPECT_IN(r.out, "role: ADMIN}");
    char *hash = extract_hash(r.out);
    cr_assert_eq(ql_auth_verify_hash(hash, "s3cret pass", NULL), 0);
    cr_assert_neq(ql_auth_verify_hash(hash, "s3cret", NULL), 0);
    free(hash);
    run_free(&r);

    /* Without --user: the bare hash; a CRLF line ending is not part of the password. */
    run_full(&r, "pw\r\n", NULL, (const char *const[]){"passwd", NULL});
    EXPECT_EXIT(&r, 0);
    r.out[strcspn(r.out, "\n")] = '\0';
    cr_assert_eq(strncmp(r.out, "$argon2id$", 10), 0, "%s", r.out);
    cr_assert_eq(ql_auth_verify_hash(r.out, "pw", NULL), 0);
    run_free(&r);

    /* A name YAML would misread is quoted. */
    run_full(&r, "pw\n", NULL, (const char *const[]){"passwd", "--user", "o'brien: x", NULL});
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "name: 'o''brien: x'");
    run_free(&r);

    run_full(&r, "", NULL, (const char *const[]){"passwd", NULL});
    EXPECT_EXIT(&r, 1);
    run_free(&r);
}

/* ---- against the fake server ---- */

static void teardown_fake(void) {
    fake_stop();
    rm_rf(g_home);
}

/* Five projects, served in pages of page_size. */
static void projects_handler(fake_t *f, const req_t *rq, int *status, char **body) {
    (void)f;
    long off = query_int(rq->target, "page_offset", 0),
         size = query_int(rq->target, "page_size", 10);
    json_t *value = json_array();
    for (long i = off * size; i < (off + 1) * size && i < 5; i++)
        json_array_append_new(value, json_pack("{s:s,s:s,s:b,s:I}", "name",
                                               (char[]){(char)('a' + i), 0}, "description",
                                               "line one\nline two", "auto_segment_build_enabled",
                                               i % 2, "create_time", (json_int_t)1788134400000));
    *status = 200;
    *body = envelope(json_pack("{s:o,s:i,s:i,s:i}", "value", value, "offset", (int)off, "limit",
                               (int)size, "total_size", 5));
}

Test(cli, list_follows_pages, .init = setup_none, .fini = teardown_fake) {
    fake_start(projects_handler);
    run_t r;
    RUN(&r, "project", "list", "--page-size", "2");
    EXPECT_EXIT(&r, 0);
    cr_assert_eq(F.n_reqs, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(query_int(F.reqs[i].target, "page_offset", -1), i);
        cr_assert_eq(query_int(F.reqs[i].target, "page_size", -1), 2);
    }
    /* A header and five rows, aligned, times in UTC, newlines of a description flattened. */
    int lines = 0;
    for (char *p = r.out; (p = strchr(p, '\n')); p++)
        lines++;
    cr_assert_eq(lines, 6, "%s", r.out);
    EXPECT_IN(r.out, "NAME  AUTO-BUILD  CREATED               DESCRIPTION");
    EXPECT_IN(r.out, "2026-08-31T00:00:00Z");
    EXPECT_IN(r.out, "line one line two");
    run_free(&r);

    RUN(&r, "project", "list", "--limit", "3", "--page-size", "2");
    EXPECT_EXIT(&r, 0);
    cr_assert_eq(F.n_reqs, 5);
    EXPECT_IN(r.err, "3 of 5 projects shown");
    run_free(&r);

    RUN(&r, "project", "list", "--json", "--timezone", "Asia/Shanghai");
    EXPECT_EXIT(&r, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    cr_assert_not_null(j, "not JSON: %s", r.out);
    cr_assert_eq(json_array_size(json_object_get(j, "value")), 5);
    cr_assert_eq(json_integer_value(json_object_get(j, "total_size")), 5);
    json_decref(j);
    run_free(&r);

    RUN(&r, "project", "list", "--timezone", "Asia/Shanghai");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "2026-08-31T08:00:00+08:00");
    run_free(&r);
}

static void refuse_handler(fake_t *f, const req_t *rq, int *status, char **body) {
    (void)f;
    (void)rq;
    *status = 409;
    *body = error_envelope("Can't build segment. The specified data range overlaps with the "
                           "built segments from 2026-08-31 to 2026-09-01",
                           "KE-010022202");
}

Test(cli, refused_request_exits_1, .init = setup_none, .fini = teardown_fake) {
    fake_start(refuse_handler);
    run_t r;
    RUN(&r, "segment", "build", "-p", "sales", "-m", "orders", "--start", "2026-08-31", "--end",
        "2026-09-01 00:00:00", "--priority", "1");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "KE-010022202");
    EXPECT_IN(r.err, "overlaps with the built segments");
    EXPECT_IN(r.err, "HTTP 409");
    /* The request as Kylin's scripts send it. */
    cr_assert_eq(F.n_reqs, 1);
    cr_assert_str_eq(F.reqs[0].method, "POST");
    cr_assert_str_eq(F.reqs[0].target, "/kylin/api/models/orders/segments");
    EXPECT_IN(F.reqs[0].ctype, "application/json");
    json_t *b = json_loads(F.reqs[0].body, 0, NULL);
    cr_assert_not_null(b);
    cr_assert_str_eq(json_string_value(json_object_get(b, "project")), "sales");
    cr_assert_str_eq(json_string_value(json_object_get(b, "start")), "1788134400000");
    cr_assert_str_eq(json_string_value(json_object_get(b, "end")), "1788220800000");
    cr_assert_eq(json_integer_value(json_object_get(b, "priority")), 1);
    json_decref(b);
    run_free(&r);

    /* --timezone moves the wall times: the contract's worked example. */
    RUN(&r, "segment", "build", "-p", "sales", "-m", "orders", "--start", "2026-08-31", "--end",
        "2026-09-01", "--timezone", "Asia/Shanghai");
    EXPECT_EXIT(&r, 1);
    b = json_loads(F.reqs[1].body, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(b, "start")), "1788105600000");
    cr_assert_str_eq(json_string_value(json_object_get(b, "end")), "1788192000000");
    json_decref(b);
    run_free(&r);
}

static void unauthorized_handler(fake_t *f, const req_t *rq, int *status, char **body) {
    (void)f;
    (void)rq;
    *status = 401;
    *body = error_envelope("Unauthorized", "KE-001");
}

static void html_handler(fake_t *f, const req_t *rq, int *status, char **body) {
    (void)f;
    (void)rq;
    *status = 200;
    *body = strdup("<html><body>It works!</body></html>");
}

Test(cli, auth_failure_exits_3, .init = setup_none, .fini = teardown_fake) {
    fake_start(unauthorized_handler);
    run_t r;
    RUN(&r, "project", "list", "--user", "bob", "--password", "wrong");
    EXPECT_EXIT(&r, 3);
    EXPECT_IN(r.err, "authentication failed for user 'bob'");
    run_free(&r);
}

Test(cli, not_a_kylin_server_exits_3, .init = setup_none, .fini = teardown_fake) {
    fake_start(html_handler);
    run_t r;
    RUN(&r, "model", "list", "-p", "x");
    EXPECT_EXIT(&r, 3);
    EXPECT_IN(r.err, "did not answer like a Qilin server");
    EXPECT_IN(r.err, "It works!");
    run_free(&r);
}

static void echo_handler(fake_t *f, const req_t *rq, int *status, char **body) {
    (void)f;
    (void)rq;
    *status = 200;
    *body = envelope(
        json_pack("{s:[],s:i,s:i,s:i}", "value", "offset", 0, "limit", 10, "total_size", 0));
}

static char *basic_user(const req_t *rq) {
    /* "Basic base64(user:password)", decoded with the shell's base64 to avoid our own. */
    cr_assert_eq(strncmp(rq->auth, "Basic ", 6), 0, "%s", rq->auth);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "printf %%s '%s' | base64 -d", rq->auth + 6);
    FILE *p = popen(cmd, "r");
    char buf[256] = "";
    cr_assert_not_null(fgets(buf, sizeof buf, p));
    pclose(p);
    return strdup(buf);
}

Test(cli, settings_precedence, .init = setup_none, .fini = teardown_fake) {
    fake_start(echo_handler);
    char dir[300], path[340], url[128];
    snprintf(dir, sizeof dir, "%s/.config/qilin", g_home);
    char mk[400];
    snprintf(mk, sizeof mk, "mkdir -p '%s'", dir);
    cr_assert_eq(system(mk), 0);
    snprintf(path, sizeof path, "%s/cli.yaml", dir);
    snprintf(url, sizeof url, "%s", g_server);
    /* The file names the server; the environment names none. */
    g_server[0] = '\0';
    char text[400];
    snprintf(text, sizeof text, "server: %s\nuser: fileuser\npassword: filepw\n", url);
    write_file(path, text, 0600);

    run_t r;
    RUN(&r, "project", "list");
    EXPECT_EXIT(&r, 0);
    char *up = basic_user(&F.reqs[0]);
    cr_assert_str_eq(up, "fileuser:filepw");
    free(up);
    EXPECT_IN(r.err, "no projects");
    run_free(&r);

    const char *env[] = {"QILIN_USER=envuser", "QILIN_PASSWORD=envpw", NULL};
    RUN_ENV(&r, env, "project", "list");
    EXPECT_EXIT(&r, 0);
    up = basic_user(&F.reqs[1]);
    cr_assert_str_eq(up, "envuser:envpw");
    free(up);
    run_free(&r);

    RUN_ENV(&r, env, "project", "list", "-u", "flaguser", "--password=flagpw");
    EXPECT_EXIT(&r, 0);
    up = basic_user(&F.reqs[2]);
    cr_assert_str_eq(up, "flaguser:flagpw");
    free(up);
    run_free(&r);

    /* Without any: ADMIN, and no password at all (Kylin's public KYLIN is never sent unasked)
     * when there is no password file. An explicit --config wins over the default file. */
    char other[340];
    snprintf(other, sizeof other, "%s/other.yaml", g_home);
    snprintf(text, sizeof text, "server: %s\n", url);
    write_file(other, text, 0644);
    snprintf(g_cwd, sizeof g_cwd, "%s", g_home); /* no data/admin.password there */
    RUN(&r, "project", "list", "--config", other);
    EXPECT_EXIT(&r, 0);
    up = basic_user(&F.reqs[3]);
    cr_assert_str_eq(up, "ADMIN:");
    free(up);
    run_free(&r);
    g_cwd[0] = '\0';

    /* A password in a file others can read earns a warning. */
    snprintf(text, sizeof text, "server: %s\npassword: x\n", url);
    write_file(other, text, 0644);
    RUN(&r, "project", "list", "--config", other);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.err, "readable by others");
    run_free(&r);
}

/* With no password given, the password file: data/admin.password of the working directory (where
 * qilind's default data directory generates it), or --password-file / QILIN_PASSWORD_FILE /
 * the config file's password-file. A password given any other way wins over the file. */
Test(cli, password_file_is_read_when_no_password_is_given, .init = setup_none,
     .fini = teardown_fake) {
    fake_start(echo_handler);
    char dir[300], path[340], other[340];
    snprintf(dir, sizeof dir, "%s/data", g_home);
    cr_assert_eq(mkdir(dir, 0750), 0);
    snprintf(path, sizeof path, "%s/admin.password", dir);
    write_file(path, "gen3rated-Pw_0123456789ab\n", 0600);
    snprintf(other, sizeof other, "%s/other.pw", g_home);
    write_file(other, "from-the-flag\r\n", 0600);

    run_t r;
    snprintf(g_cwd, sizeof g_cwd, "%s", g_home);
    RUN(&r, "project", "list");
    EXPECT_EXIT(&r, 0);
    char *up = basic_user(&F.reqs[0]);
    cr_assert_str_eq(up, "ADMIN:gen3rated-Pw_0123456789ab");
    free(up);
    run_free(&r);

    RUN(&r, "project", "list", "--password-file", other);
    EXPECT_EXIT(&r, 0);
    up = basic_user(&F.reqs[1]);
    cr_assert_str_eq(up, "ADMIN:from-the-flag");
    free(up);
    run_free(&r);

    char envpw[400];
    snprintf(envpw, sizeof envpw, "QILIN_PASSWORD_FILE=%s", other);
    const char *env[] = {envpw, NULL};
    RUN_ENV(&r, env, "project", "list");
    EXPECT_EXIT(&r, 0);
    up = basic_user(&F.reqs[2]);
    cr_assert_str_eq(up, "ADMIN:from-the-flag");
    free(up);
    run_free(&r);

    RUN(&r, "project", "list", "--password", "given");
    EXPECT_EXIT(&r, 0);
    up = basic_user(&F.reqs[3]);
    cr_assert_str_eq(up, "ADMIN:given");
    free(up);
    run_free(&r);

    /* A file named on purpose must be there: a usage error naming it, and no request. */
    RUN(&r, "project", "list", "--password-file", "/nonexistent/pw");
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err, "/nonexistent/pw");
    run_free(&r);
    cr_assert_eq(F.n_reqs, 4);
    g_cwd[0] = '\0';
}

/* A job that is RUNNING for two polls, then ends as the test's counter says. */
static const char *g_final_status;

static void job_handler(fake_t *f, const req_t *rq, int *status, char **body) {
    *status = 200;
    if (strncmp(rq->target, "/kylin/api/jobs?", 16)) {
        *status = 404;
        *body = error_envelope("no such route", "QL-00404");
        return;
    }
    pthread_mutex_lock(&f->mu);
    int n = ++f->counter;
    pthread_mutex_unlock(&f->mu);
    json_t *job = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I}", "id", "job-1", "job_name", "INC_BUILD",
                            "job_status", n <= 2 ? "RUNNING" : g_final_status, "project", "sales",
                            "target_subject", "orders", "duration", (json_int_t)1500);
    /* A decoy whose id contains ours: the client must match ids exactly. */
    json_t *decoy =
        json_pack("{s:s,s:s,s:s}", "id", "job-10", "job_status", "ERROR", "project", "sales");
    *body = envelope(json_pack("{s:[o,o],s:i,s:i,s:i}", "value", decoy, job, "offset", 0, "limit",
                               1000, "total_size", 2));
}

Test(cli, job_wait_finished, .init = setup_none, .fini = teardown_fake) {
    g_final_status = "FINISHED";
    fake_start(job_handler);
    run_t r;
    RUN(&r, "job", "wait", "job-1", "--timeout", "30s", "--interval", "50ms");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.err, "job job-1 RUNNING");
    EXPECT_IN(r.out, "job job-1 FINISHED");
    cr_assert_eq(F.n_reqs, 3);
    EXPECT_IN(F.reqs[0].target, "key=job-1");
    EXPECT_IN(F.reqs[0].target, "time_filter=4");
    run_free(&r);
}

Test(cli, job_wait_error_exits_1, .init = setup_none, .fini = teardown_fake) {
    g_final_status = "ERROR";
    fake_start(job_handler);
    run_t r;
    RUN(&r, "job", "wait", "job-1", "--interval", "50ms");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "did not finish: ERROR");
    run_free(&r);
}

Test(cli, job_wait_timeout_exits_1, .init = setup_none, .fini = teardown_fake) {
    g_final_status = "RUNNING";
    fake_start(job_handler);
    run_t r;
    RUN(&r, "job", "wait", "job-1", "--timeout", "300ms", "--interval", "50ms");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "still RUNNING after 300ms");
    run_free(&r);
}

/* ---- against the real server ---- */

typedef struct server {
    pid_t pid;
    char dir[256];
    char log[320];
    int port;
} server_t;

static server_t S;

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(s, (struct sockaddr *)&sa, &sl);
    close(s);
    return ntohs(sa.sin_port);
}

/* Starts qilind on a free loopback port with a fresh data dir and waits for its "listening
 * on" line (its output goes to a log file that is polled, with a deadline). */
static void server_start(void) {
    make_home();
    if (access(QILIND, X_OK) != 0)
        cr_skip_test("%s is not built yet", QILIND);
    ql_test_tmpdir(S.dir, sizeof S.dir, "qilin-cli-srv");
    snprintf(S.log, sizeof S.log, "%s/qilind.log", S.dir);
    S.port = free_port();
    char listen_kv[64], data_kv[320];
    snprintf(listen_kv, sizeof listen_kv, "qilin.server.listen=127.0.0.1:%d", S.port);
    snprintf(data_kv, sizeof data_kv, "qilin.storage.path=%s/data", S.dir);
    /* The backend under test; on LMDB there is no setting, and the listen one goes twice. */
    const char *store[2] = {listen_kv, listen_kv};
    char data_dir[320];
    snprintf(data_dir, sizeof data_dir, "%s/data", S.dir);
    ql_test_store_settings(data_dir, store);
    S.pid = fork();
    if (S.pid == 0) {
        int fd = open(S.log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        if (chdir(QL_SOURCE_DIR) != 0)
            _exit(126);
        execl(QILIND, QILIND, "--set", listen_kv, "--set", data_kv, "--set",
              "kylin.model.auto-segment-build.dispatcher-interval-ms=200", "--set", store[0],
              "--set", store[1], (char *)NULL);
        _exit(127);
    }
    cr_assert(S.pid > 0);
    int64_t deadline = mono_ms() + 30000;
    for (;;) {
        FILE *f = fopen(S.log, "r");
        char line[1024];
        bool up = false;
        while (f && fgets(line, sizeof line, f))
            up = up || strstr(line, "listening on") != NULL;
        if (f)
            fclose(f);
        if (up)
            break;
        int st;
        if (waitpid(S.pid, &st, WNOHANG) == S.pid) {
            S.pid = 0;
            cr_assert_fail("qilind exited before listening (see %s)", S.log);
        }
        cr_assert(mono_ms() < deadline, "qilind did not print 'listening on' within 30 s");
        /* The condition is a line in a file: re-check it every 20 ms until the deadline. */
        poll(NULL, 0, 20);
    }
    snprintf(g_server, sizeof g_server, "http://127.0.0.1:%d", S.port);
    snprintf(g_pwfile, sizeof g_pwfile, "%s/data/admin.password", S.dir);
}

static void server_stop(void) {
    if (S.pid > 0) {
        kill(S.pid, SIGTERM);
        int64_t deadline = mono_ms() + 15000;
        int st;
        while (waitpid(S.pid, &st, WNOHANG) == 0) {
            if (mono_ms() > deadline) {
                kill(S.pid, SIGKILL);
                waitpid(S.pid, &st, 0);
                break;
            }
            poll(NULL, 0, 20);
        }
        S.pid = 0;
    }
    if (S.dir[0])
        rm_rf(S.dir);
    rm_rf(g_home);
}

static char *first_line(const char *s) {
    return strndup(s, strcspn(s, "\n"));
}

Test(cli, real_server_session, .init = server_start, .fini = server_stop, .timeout = 180) {
    run_t r;
    RUN(&r, "project", "create", "demo", "--description", "CLI test");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "project", "create", "demo");
    EXPECT_EXIT(&r, 1); /* a duplicate name: 409 */
    run_free(&r);
    RUN(&r, "model", "create", "-p", "demo", "orders", "--partition-column", "DT",
        "--partition-format", "yyyy-MM-dd");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "project", "auto-build", "demo", "on");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "model", "auto-build", "-p", "demo", "orders", "--trigger", "00:00:00", "--offset", "1",
        "--start", "00:00:00", "--end", "24:00:00");
    EXPECT_EXIT(&r, 0);
    run_free(&r);

    RUN(&r, "model", "list", "-p", "demo");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "orders");
    EXPECT_IN(r.out, "yyyy-MM-dd");
    run_free(&r);

    /* A manual build far from the automatic one's range. */
    RUN(&r, "segment", "build", "-q", "-p", "demo", "-m", "orders", "--start", "2020-01-01",
        "--end", "2020-01-02");
    EXPECT_EXIT(&r, 0);
    char *job = first_line(r.out);
    cr_assert(strlen(job) > 0);
    run_free(&r);
    RUN(&r, "job", "wait", job, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "FINISHED");
    run_free(&r);

    RUN(&r, "segment", "list", "-p", "demo", "-m", "orders", "--status", "READY");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "READY");
    EXPECT_IN(r.out, "2020-01-01T00:00:00Z");
    EXPECT_IN(r.out, "2020-01-02T00:00:00Z");
    run_free(&r);

    RUN(&r, "segment", "list", "-p", "demo", "-m", "orders", "--json");
    EXPECT_EXIT(&r, 0);
    json_error_t je;
    json_t *j = json_loads(r.out, 0, &je);
    cr_assert_not_null(j, "not JSON (%s): %s", je.text, r.out);
    json_t *v = json_object_get(j, "value");
    cr_assert(json_array_size(v) >= 1);
    bool ready = false;
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *seg = json_array_get(v, i);
        if (json_integer_value(json_object_get(seg, "start")) == 1577836800000LL)
            ready = !strcmp(json_string_value(json_object_get(seg, "status")), "READY");
    }
    cr_assert(ready, "%s", r.out);
    json_decref(j);
    run_free(&r);

    RUN(&r, "job", "show", job);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "FINISHED");
    EXPECT_IN(r.out, "INC_BUILD");
    run_free(&r);
    RUN(&r, "job", "logs", job);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "==> ");
    run_free(&r);
    RUN(&r, "job", "list", "-p", "demo", "--json");
    EXPECT_EXIT(&r, 0);
    j = json_loads(r.out, 0, &je);
    cr_assert_not_null(j, "not JSON: %s", r.out);
    json_decref(j);
    run_free(&r);

    /* The same range again: the segment exists, the server refuses with Kylin's code. */
    RUN(&r, "segment", "build", "-p", "demo", "-m", "orders", "--start", "2020-01-01", "--end",
        "2020-01-02");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "KE-010022202");
    run_free(&r);

    /* An adjacent day, then a merge of the two manual segments. */
    RUN(&r, "segment", "build", "-q", "-p", "demo", "-m", "orders", "--start", "1577923200000",
        "--end", "2020-01-03 00:00:00");
    EXPECT_EXIT(&r, 0);
    char *job2 = first_line(r.out);
    run_free(&r);
    RUN(&r, "job", "wait", job2, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    free(job2);
    RUN(&r, "segment", "list", "-p", "demo", "-m", "orders", "--json");
    EXPECT_EXIT(&r, 0);
    j = json_loads(r.out, 0, &je);
    cr_assert_not_null(j, "not JSON: %s", r.out);
    const char *merge_args[16] = {"segment", "merge", "-q", "-p", "demo", "-m", "orders"};
    size_t n_args = 7;
    v = json_object_get(j, "value");
    for (size_t i = 0; i < json_array_size(v) && n_args < 15; i++) {
        json_t *seg = json_array_get(v, i);
        if (json_integer_value(json_object_get(seg, "start")) < 1578009600000LL)
            merge_args[n_args++] = json_string_value(json_object_get(seg, "id"));
    }
    cr_assert_eq(n_args, 9, "expected two manual segments: %s", r.out);
    run_t m;
    run_full(&m, NULL, NULL, merge_args);
    json_decref(j);
    run_free(&r);
    EXPECT_EXIT(&m, 0);
    char *merge_job = first_line(m.out);
    run_free(&m);
    RUN(&r, "job", "wait", merge_job, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    free(merge_job);
    RUN(&r, "segment", "list", "-p", "demo", "-m", "orders");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "2020-01-01T00:00:00Z  2020-01-03T00:00:00Z");
    run_free(&r);

    /* The dispatcher builds yesterday (trigger 00:00:00 UTC, offset 1) on its own. */
    int64_t deadline = mono_ms() + 60000;
    for (;;) {
        RUN(&r, "auto-build", "status", "-p", "demo", "orders", "--json");
        EXPECT_EXIT(&r, 0);
        j = json_loads(r.out, 0, &je);
        cr_assert_not_null(j, "not JSON: %s", r.out);
        const char *state = json_string_value(json_object_get(j, "state"));
        bool covered = state && !strcmp(state, "COVERED");
        json_decref(j);
        run_free(&r);
        if (covered)
            break;
        cr_assert(mono_ms() < deadline, "the automatic build was not COVERED within 60 s");
        poll(NULL, 0, 50);
    }
    RUN(&r, "auto-build", "status", "-p", "demo", "orders");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "COVERED");
    EXPECT_IN(r.out, "dispatcher"); /* the source: this server's own dispatcher decided */
    run_free(&r);

    free(job);
    job = NULL;
    /* Actions on an ad-hoc job that sleeps: pause, wait (STOPPED), discard, a refused resume. */
    char def[400];
    snprintf(def, sizeof def, "%s/nap.yaml", g_home);
    write_file(def,
               "project: demo\ntype: NAP\nsteps:\n  - {name: nap, kind: sleep, duration: 1h}\n",
               0644);
    RUN(&r, "job", "submit", "-q", def);
    EXPECT_EXIT(&r, 0);
    job = first_line(r.out);
    run_free(&r);
    deadline = mono_ms() + 30000;
    for (;;) {
        RUN(&r, "job", "show", job, "--json");
        EXPECT_EXIT(&r, 0);
        j = json_loads(r.out, 0, &je);
        cr_assert_not_null(j, "not JSON: %s", r.out);
        const char *st =
            json_string_value(json_object_get(json_object_get(j, "job"), "job_status"));
        bool running = st && !strcmp(st, "RUNNING");
        json_decref(j);
        run_free(&r);
        if (running)
            break;
        cr_assert(mono_ms() < deadline, "the ad-hoc job did not start within 30 s");
        poll(NULL, 0, 20);
    }
    RUN(&r, "job", "pause", job);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "paused job");
    run_free(&r);
    RUN(&r, "job", "wait", job, "--timeout", "30s", "--interval", "100ms");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.out, "STOPPED");
    run_free(&r);
    RUN(&r, "job", "discard", job, "-p", "demo");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "job", "resume", job);
    EXPECT_EXIT(&r, 1); /* DISCARDED is final */
    run_free(&r);
    RUN(&r, "job", "list", "-p", "demo", "--status", "DISCARDED", "--type", "NAP");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, job);
    run_free(&r);
    RUN(&r, "job", "show", "no-such-job", "-p", "demo");
    EXPECT_EXIT(&r, 1);
    run_free(&r);

    /* A wrong password is an authentication failure. */
    RUN(&r, "project", "list", "--password", "nope");
    EXPECT_EXIT(&r, 3);
    run_free(&r);
    free(job);
}

/* A full-load model through the CLI: its build needs no range and keeps Kylin's yarn_queue and
 * tag, which `job show` prints; a second build is refused (the overlap, exit 1); a refresh by
 * the segment's name rebuilds it, and a delete by that name removes it. */
Test(cli, full_build_with_kylin_fields, .init = server_start, .fini = server_stop, .timeout = 180) {
    run_t r;
    RUN(&r, "project", "create", "demo");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "model", "create", "-p", "demo", "dates");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "segment", "build", "-q", "-p", "demo", "-m", "dates", "--yarn-queue", "root.cli",
        "--tag", "nightly");
    EXPECT_EXIT(&r, 0);
    char *job = first_line(r.out);
    run_free(&r);
    RUN(&r, "job", "wait", job, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "job", "show", job);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "root.cli");
    EXPECT_IN(r.out, "nightly");
    run_free(&r);
    RUN(&r, "segment", "build", "-p", "demo", "-m", "dates");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "KE-010022202");
    run_free(&r);
    RUN(&r, "segment", "build", "-p", "demo", "-m", "dates", "--start", "2020-01-01");
    EXPECT_EXIT(&r, 2); /* --start without --end */
    run_free(&r);
    RUN(&r, "segment", "refresh", "-q", "-p", "demo", "-m", "dates", "FULL_BUILD", "--tag",
        "again");
    EXPECT_EXIT(&r, 0);
    char *refresh = first_line(r.out);
    run_free(&r);
    RUN(&r, "job", "wait", refresh, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "job", "list", "-p", "demo", "--json");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "\"tag\": \"again\"");
    run_free(&r);
    RUN(&r, "segment", "delete", "-p", "demo", "-m", "dates", "FULL_BUILD");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "segment", "list", "-p", "demo", "-m", "dates");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.err, "no segments");
    run_free(&r);
    free(refresh);
    free(job);
}

/* Waits until the job's status (GET /jobs) is status, through `qilin job show`. */
static void wait_status(const char *job, const char *status) {
    int64_t deadline = mono_ms() + 30000;
    for (;;) {
        run_t r;
        RUN(&r, "job", "show", job, "--json");
        EXPECT_EXIT(&r, 0);
        json_error_t je;
        json_t *j = json_loads(r.out, 0, &je);
        cr_assert_not_null(j, "not JSON: %s", r.out);
        const char *st =
            json_string_value(json_object_get(json_object_get(j, "job"), "job_status"));
        bool there = st && !strcmp(st, status);
        json_decref(j);
        run_free(&r);
        if (there)
            return;
        cr_assert(mono_ms() < deadline, "job %s is not %s within 30 s", job, status);
        poll(NULL, 0, 20);
    }
}

Test(cli, job_delete_removes_final_jobs, .init = server_start, .fini = server_stop,
     .timeout = 180) {
    run_t r;
    RUN(&r, "project", "create", "demo");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "model", "create", "-p", "demo", "orders", "--partition-column", "DT",
        "--partition-format", "yyyy-MM-dd");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "segment", "build", "-q", "-p", "demo", "-m", "orders", "--start", "2020-01-01",
        "--end", "2020-01-02");
    EXPECT_EXIT(&r, 0);
    char *built = first_line(r.out);
    run_free(&r);
    RUN(&r, "job", "wait", built, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    char def[400];
    snprintf(def, sizeof def, "%s/nap.yaml", g_home);
    write_file(def,
               "project: demo\ntype: NAP\nsteps:\n  - {name: nap, kind: sleep, duration: 1h}\n",
               0644);
    RUN(&r, "job", "submit", "-q", def);
    EXPECT_EXIT(&r, 0);
    char *nap = first_line(r.out);
    run_free(&r);
    wait_status(nap, "RUNNING");

    RUN(&r, "job", "delete");
    EXPECT_EXIT(&r, 2); /* neither ids nor --status */
    run_free(&r);
    RUN(&r, "job", "delete", built, nap);
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "QL-00007");
    EXPECT_IN(r.err, nap);
    run_free(&r);
    RUN(&r, "job", "show", built);
    EXPECT_EXIT(&r, 0); /* nothing was deleted */
    run_free(&r);
    RUN(&r, "job", "delete", built);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "deleted 1 job");
    run_free(&r);
    RUN(&r, "job", "show", built, "-p", "demo");
    EXPECT_EXIT(&r, 1);
    run_free(&r);

    RUN(&r, "job", "discard", nap, "-p", "demo");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    wait_status(nap, "DISCARDED");
    RUN(&r, "job", "delete", "-p", "demo", "--status", "FINISHED,DISCARDED");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "job", "list", "-p", "demo", "--all-time", "--json");
    EXPECT_EXIT(&r, 0);
    cr_assert_null(strstr(r.out, nap), "%s", r.out);
    run_free(&r);
    free(built);
    free(nap);
}

/* A store grown by jobs with large outputs, then emptied of most of them: the compacted copy is
 * smaller, holds what was kept, and is clean. */
Test(cli, store_compact_writes_a_smaller_clean_copy) {
    ql_test_require_backend("lmdb");
    char data[256];
    ql_test_tmpdir(data, sizeof data, "qilin-compact");
    ql_store_t *store;
    ql_test_store_open(data, &store);
    ql_err_t err;
    ql_id_t model;
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m", &model, &err), 0, "%s", err.msg);
    static const ql_step_spec_t steps[1] = {{.name = "s", .kind = "noop"}};
    static char text[16384];
    memset(text, 'x', sizeof text);
    enum { N = 600 };
    ql_id_t ids[N];
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    for (int i = 0; i < N; i++) {
        ql_job_spec_t spec = {.priority = 3,
                              .submitter = "ADMIN",
                              .now = 1788220800000LL + i,
                              .steps = steps,
                              .n_steps = 1};
        int64_t s = (int64_t)i * 86400000LL;
        cr_assert_eq(ql_meta_submit_build(t, &model, s, s + 86400000LL, &spec, &ids[i], NULL, &err),
                     0, "%s", err.msg);
        cr_assert_eq(ql_output_put(t, &ids[i], 0, text, sizeof text), 0);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    /* Every job but the last is deleted (the records only: this test is about the file). */
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    for (int i = 0; i < N - 1; i++) {
        cr_assert_eq(ql_job_delete(t, &ids[i]), 0);
    }
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_store_close(store);

    run_t r;
    RUN(&r, "store", "compact", data);
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "saved");
    run_free(&r);
    char path[400];
    struct stat before, after;
    snprintf(path, sizeof path, "%s/data.mdb", data);
    cr_assert_eq(stat(path, &before), 0);
    snprintf(path, sizeof path, "%s/compact/data.mdb", data);
    cr_assert_eq(stat(path, &after), 0);
    cr_assert_lt(after.st_size * 4, before.st_size, "%lld vs %lld", (long long)after.st_size,
                 (long long)before.st_size);

    /* The copy is a store: the kept job and its output are there, and fsck is clean. */
    snprintf(path, sizeof path, "%s/compact", data);
    ql_store_t *copy;
    ql_test_store_open(path, &copy);
    cr_assert_eq(ql_txn_begin(copy, false, &t), 0);
    char *out = NULL;
    size_t len = 0;
    cr_assert_eq(ql_output_get(t, &ids[N - 1], 0, &out, &len), 0);
    cr_assert_eq(len, sizeof text);
    free(out);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &ids[0], 0, &j), QL_ENOTFOUND);
    ql_txn_abort(t);
    ql_test_assert_fsck_clean(copy);
    ql_store_close(copy);

    /* A second run refuses to overwrite the copy. */
    RUN(&r, "store", "compact", data);
    EXPECT_EXIT(&r, 2);
    EXPECT_IN(r.err, "exists");
    run_free(&r);
}

Test(cli, project_and_model_lifecycle, .init = server_start, .fini = server_stop, .timeout = 180) {
    run_t r;
    RUN(&r, "project", "create", "demo");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "model", "create", "-p", "demo", "orders", "--partition-column", "DT",
        "--partition-format", "yyyy-MM-dd");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "segment", "build", "-q", "-p", "demo", "-m", "orders", "--start", "2020-01-01",
        "--end", "2020-01-02");
    EXPECT_EXIT(&r, 0);
    char *built = first_line(r.out);
    run_free(&r);
    RUN(&r, "job", "wait", built, "--timeout", "120s");
    EXPECT_EXIT(&r, 0);
    run_free(&r);

    RUN(&r, "model", "rename", "-p", "demo", "orders", "sales_orders");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "model", "list", "-p", "demo");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "sales_orders");
    run_free(&r);
    RUN(&r, "model", "partition", "-p", "demo", "sales_orders", "--full-load", "--column", "X");
    EXPECT_EXIT(&r, 2);
    run_free(&r);
    RUN(&r, "model", "partition", "-p", "demo", "sales_orders", "--column", "DAY", "--format",
        "yyyyMMdd");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "1 segments were purged");
    run_free(&r);
    RUN(&r, "segment", "list", "-p", "demo", "-m", "sales_orders", "--json");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "\"total_size\": 0");
    run_free(&r);
    RUN(&r, "model", "delete", "-p", "demo", "sales_orders");
    EXPECT_EXIT(&r, 0);
    run_free(&r);
    RUN(&r, "job", "show", built, "-p", "demo");
    EXPECT_EXIT(&r, 1); /* the model's jobs went with it */
    run_free(&r);

    /* A project with a running job: refused, then deleted with --discard-jobs. */
    char def[400];
    snprintf(def, sizeof def, "%s/nap.yaml", g_home);
    write_file(def,
               "project: demo\ntype: NAP\nsteps:\n  - {name: nap, kind: sleep, duration: 1h}\n",
               0644);
    RUN(&r, "job", "submit", "-q", def);
    EXPECT_EXIT(&r, 0);
    char *nap = first_line(r.out);
    run_free(&r);
    RUN(&r, "project", "delete", "demo");
    EXPECT_EXIT(&r, 1);
    EXPECT_IN(r.err, "QL-00007");
    run_free(&r);
    RUN(&r, "project", "delete", "demo", "--discard-jobs");
    EXPECT_EXIT(&r, 0);
    EXPECT_IN(r.out, "deleted project demo");
    run_free(&r);
    RUN(&r, "project", "list");
    EXPECT_EXIT(&r, 0);
    cr_assert_null(strstr(r.out, "demo"), "%s", r.out);
    run_free(&r);
    free(built);
    free(nap);
}
