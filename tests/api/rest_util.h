/*
 * Helpers for the process-level REST tests: start the real qilind (${QL_BUILD_DIR}/tools/qilind)
 * on 127.0.0.1 port 0 with a temporary data directory, read its real port from the "listening
 * on" line, talk to it with libcurl, and stop it. Waiting is always polling a condition with a
 * deadline. Included by tests/api/test_rest*.c and test_server.c (functions are static and may
 * go unused in one of them).
 */
#ifndef QL_TEST_REST_UTIL_H
#define QL_TEST_REST_UTIL_H

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNUSED __attribute__((unused))
#define QILIND QL_BUILD_DIR "/tools/qilind"
#define START_TIMEOUT_MS 20000

typedef struct qd {
    pid_t pid;
    int port;
    char dir[256];  /* the test's temporary directory */
    char data[300]; /* data directory */
    char log[300];  /* the server's stderr */
    char url[64];   /* http://127.0.0.1:PORT */
    int exit_status;
    size_t log_skip; /* the log's length when the server was last launched */
    pid_t netns_pid; /* 0, or a process whose network namespace the server runs in */
} qd_t;

UNUSED static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The wall clock in epoch ms: what steps write in their traces and the server in job times. */
UNUSED static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The pause between two looks at a condition polled with a deadline. */
UNUSED static void poll_pause(void) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

UNUSED static void make_tmpdir(char *out, size_t cap) {
    ql_test_tmpdir(out, cap, "qilin-rest");
}

/* dir/name, in one of four static buffers used in turn, so that up to four paths may be passed
 * to one call; valid until the fourth call after. Test thread only. */
UNUSED static char *path_in(const char *dir, const char *name) {
    static char buf[4][400];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, 400, "%s/%s", dir, name);
    return p;
}

UNUSED static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* The whole file as a NUL-terminated string (caller frees); NULL when unreadable. */
UNUSED static char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    fclose(f);
    return buf;
}

UNUSED static bool file_contains(const char *path, const char *needle) {
    char *s = read_file(path);
    bool found = s && strstr(s, needle);
    free(s);
    return found;
}

/* Asserts that the file at path contains needle; the message shows the whole file. The file is
 * read once, for the check and the message, and freed (it stays behind only when the assertion
 * fails: Criterion formats the message of a passing assertion too under --full-stats). */
UNUSED static void assert_file_contains(const char *path, const char *needle) {
    char *s = read_file(path);
    cr_assert(s && strstr(s, needle), "no '%s' in %s:\n%s", needle, path, s ? s : "(unreadable)");
    free(s);
}

UNUSED static void rm_rf(const char *dir) {
    if (!dir[0])
        return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int rc = system(cmd);
    (void)rc;
}

/* Prepares q with a fresh temporary directory (data under it). */
UNUSED static void qd_init(qd_t *q) {
    memset(q, 0, sizeof *q);
    make_tmpdir(q->dir, sizeof q->dir);
    snprintf(q->data, sizeof q->data, "%s/data", q->dir);
}

/* Whether the server exited; reaps it (exit_status) when it did. */
UNUSED static bool qd_exited(qd_t *q) {
    if (q->pid <= 0)
        return true;
    int st;
    pid_t r = waitpid(q->pid, &st, WNOHANG);
    if (r == q->pid) {
        q->exit_status = st;
        q->pid = 0;
        return true;
    }
    return false;
}

/* Waits for the server to exit; false on timeout. */
UNUSED static bool qd_wait_exit(qd_t *q, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    while (!qd_exited(q)) {
        if (now_ms() > deadline)
            return false;
        poll_pause();
    }
    return true;
}

/*
 * Starts qilind with argv (NULL-terminated, without the program name) and its stderr in q->log
 * (appended, so a restart keeps the earlier lines), without waiting for it to serve: see
 * qd_wait_listening. With "--data DIR" among args the store of DIR is put on the backend under
 * test (ql_test_store_settings, appended as --set). With q->netns_pid set, the server runs in
 * that process's network namespace.
 */
UNUSED static void qd_launch(qd_t *q, const char *const *args) {
    if (!q->log[0]) {
        /* Through a copy: GCC cannot always tell that q->dir and q->log do not overlap. */
        char log[sizeof q->log];
        snprintf(log, sizeof log, "%s/qilind.log", q->dir);
        memcpy(q->log, log, sizeof log);
    }
    char *before = read_file(q->log);
    q->log_skip = before ? strlen(before) : 0;
    free(before);
    const char *argv[64];
    size_t n = 0;
    argv[n++] = QILIND;
    const char *data = NULL;
    for (size_t i = 0; args && args[i] && n < 59; i++) {
        if (i > 0 && strcmp(args[i - 1], "--data") == 0)
            data = args[i];
        argv[n++] = args[i];
    }
    const char *store[2];
    int n_store = data ? ql_test_store_settings(data, store) : 0;
    for (int i = 0; i < n_store; i++) {
        argv[n++] = "--set";
        argv[n++] = store[i];
    }
    argv[n] = NULL;
    char netns[64] = "";
    if (q->netns_pid > 0)
        snprintf(netns, sizeof netns, "/proc/%ld/ns/net", (long)q->netns_pid);
    pid_t pid = fork(); /* no Criterion call may run in the child (see test_template.c) */
    if (pid == 0) {
        int fd = open(q->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(fd, 2);
        if (netns[0]) {
            int ns = open(netns, O_RDONLY | O_CLOEXEC);
            if (ns < 0 || setns(ns, CLONE_NEWNET) != 0)
                _exit(125);
            close(ns);
        }
        /* Run from the test's directory: no conf/qilin.yaml is picked up by accident. */
        if (chdir(q->dir) != 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    cr_assert_neq(pid, -1);
    q->pid = pid;
    q->port = 0;
}

/* Waits for the "listening on" line of the server qd_launch started and reads the port from
 * it. Returns true when the server is serving; false when it exited first (q->exit_status
 * tells) or did not come up in time. */
UNUSED static bool qd_wait_listening(qd_t *q) {
    int64_t deadline = now_ms() + START_TIMEOUT_MS;
    for (;;) {
        char *s = read_file(q->log);
        const char *line = s && strlen(s) > q->log_skip
                               ? strstr(s + q->log_skip, "qilind listening on http://")
                               : NULL;
        if (line) {
            /* The port follows the line's last ':' ("[::1]:PORT" has others before it). */
            const char *eol = strchr(line, '\n');
            const char *colon = NULL;
            for (const char *p = line; *p && (!eol || p < eol); p++)
                if (*p == ':')
                    colon = p;
            if (!eol) {
                /* The line is not complete yet. */
                free(s);
                poll_pause();
                continue;
            }
            q->port = colon ? atoi(colon + 1) : 0;
            free(s);
            snprintf(q->url, sizeof q->url, "http://127.0.0.1:%d", q->port);
            return q->port > 0;
        }
        free(s);
        if (qd_exited(q) || now_ms() > deadline)
            return false;
        poll_pause();
    }
}

/* qd_launch, then qd_wait_listening. */
UNUSED static bool qd_spawn(qd_t *q, const char *const *args) {
    qd_launch(q, args);
    return qd_wait_listening(q);
}

/* Asserts that the server qd_launch started comes up. */
UNUSED static void qd_wait_up(qd_t *q) {
    bool up = qd_wait_listening(q);
    if (!up) {
        char *log = read_file(q->log);
        cr_assert(up, "qilind did not start; its stderr:\n%s", log ? log : "(none)");
    }
}

/* Launches qilind with --data q->data, --set qilin.server.listen=127.0.0.1:0, the shipped
 * conf/jobs.yaml, then extra (may be NULL; later values win); qd_wait_up waits for it. */
UNUSED static void qd_start_async(qd_t *q, const char *const *extra) {
    static char data_arg[320];
    snprintf(data_arg, sizeof data_arg, "%s", q->data);
    const char *args[48] = {"--data", data_arg,
                            "--set",  "qilin.server.listen=127.0.0.1:0",
                            "--set",  "qilin.jobs.templates=" QL_SOURCE_DIR "/conf/jobs.yaml"};
    size_t n = 6;
    for (size_t i = 0; extra && extra[i] && n < 47; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    qd_launch(q, args);
}

/* qd_start_async, then qd_wait_up: asserts that it comes up. */
UNUSED static void qd_start(qd_t *q, const char *const *extra) {
    qd_start_async(q, extra);
    qd_wait_up(q);
}

/* SIGTERM, then waits for a clean exit (status 0) within timeout_ms. */
UNUSED static void qd_stop_ok(qd_t *q, int timeout_ms) {
    if (q->pid <= 0)
        return;
    kill(q->pid, SIGTERM);
    bool exited = qd_wait_exit(q, timeout_ms);
    if (!exited) {
        kill(q->pid, SIGKILL);
        qd_wait_exit(q, 5000);
    }
    /* The messages show the end of its stderr only: Criterion formats a passing assertion's
     * message too (--full-stats), and hangs sending one of megabytes (a long test's log). */
    char *log = read_file(q->log);
    const char *tail = log ? log : "(unreadable)";
    if (strlen(tail) > 16384)
        tail += strlen(tail) - 16384;
    cr_assert(exited, "qilind did not stop within %d ms; the end of its stderr:\n%s", timeout_ms,
              tail);
    cr_assert(WIFEXITED(q->exit_status) && WEXITSTATUS(q->exit_status) == 0,
              "qilind exited with status %d; the end of its stderr:\n%s", q->exit_status, tail);
    free(log);
}

/* Kills the server if it still runs (teardown of a failed test) and removes the directory. */
UNUSED static void qd_cleanup(qd_t *q) {
    if (q->pid > 0) {
        kill(q->pid, SIGKILL);
        qd_wait_exit(q, 5000);
    }
    rm_rf(q->dir);
}

/* ---- HTTP ---- */

typedef struct resp {
    long status;
    char *body;
    size_t len;
    char ctype[128];
    char www_auth[128];
    char location[512]; /* the Location header, "" when none */
    char headers[4096]; /* every header line as received (truncated past 4 KiB) */
    json_t *json;       /* the parsed body when it is JSON */
} resp_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
    resp_t *r = arg;
    size_t len = size * n;
    r->body = realloc(r->body, r->len + len + 1);
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
    resp_t *r = arg;
    size_t len = size * n;
    size_t have = strlen(r->headers);
    if (have + len < sizeof r->headers) {
        memcpy(r->headers + have, p, len);
        r->headers[have + len] = '\0';
    }
    if (len > 17 && strncasecmp(p, "WWW-Authenticate:", 17) == 0)
        snprintf(r->www_auth, sizeof r->www_auth, "%.*s", (int)(len - 17), p + 17);
    if (len > 9 && strncasecmp(p, "Location:", 9) == 0) {
        size_t i = 9, e = len;
        while (i < e && p[i] == ' ')
            i++;
        while (e > i && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' '))
            e--;
        snprintf(r->location, sizeof r->location, "%.*s", (int)(e - i), p + i);
    }
    return len;
}

UNUSED static void resp_free(resp_t *r) {
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* "ADMIN:PASSWORD" with the password the server generated in q's data directory (static
 * buffer); NULL when there is no such file (the server has configured users). */
UNUSED static const char *generated_admin(const qd_t *q) {
    static char up[300];
    char path[400];
    snprintf(path, sizeof path, "%s/admin.password", q->data);
    char *pw = read_file(path);
    if (!pw)
        return NULL;
    pw[strcspn(pw, "\r\n")] = '\0';
    snprintf(up, sizeof up, "ADMIN:%s", pw);
    free(pw);
    return up;
}

/*
 * One request. user: "NAME:PASSWORD"; NULL for ADMIN with the server's generated password (or,
 * when the server configures its users, ADMIN:KYLIN); "" for no credentials. headers: a
 * NULL-terminated list of "Name: value" lines (may be NULL); a body without a Content-Type
 * header is sent as application/json.
 */
UNUSED static resp_t http_req(const qd_t *q, const char *method, const char *path, const char *body,
                              const char *user, const char *const *headers) {
    static bool inited;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = true;
    }
    resp_t r = {0};
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    char url[4096];
    snprintf(url, sizeof url, "%s%s", q->url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!user && !(user = generated_admin(q)))
        user = "ADMIN:KYLIN";
    if (user[0]) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, user);
    }
    struct curl_slist *hl = NULL;
    bool has_ct = false;
    for (size_t i = 0; headers && headers[i]; i++) {
        hl = curl_slist_append(hl, headers[i]);
        if (strncasecmp(headers[i], "Content-Type:", 13) == 0)
            has_ct = true;
    }
    if (body && !has_ct)
        hl = curl_slist_append(hl, "Content-Type: application/json;charset=utf-8");
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    CURLcode cc = curl_easy_perform(c);
    cr_assert_eq(cc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(cc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (ct)
        snprintf(r.ctype, sizeof r.ctype, "%s", ct);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    if (r.body && strncmp(r.ctype, "application/json", 16) == 0)
        r.json = json_loads(r.body, 0, NULL);
    return r;
}

/* A request that must succeed: 200, JSON, code "000". Returns data (a new reference). */
UNUSED static json_t *api_ok(const qd_t *q, const char *method, const char *path,
                             const char *body) {
    resp_t r = http_req(q, method, path, body, NULL, NULL);
    cr_assert_eq(r.status, 200, "%s %s: status %ld: %s", method, path, r.status,
                 r.body ? r.body : "");
    cr_assert_str_eq(r.ctype, "application/json;charset=utf-8");
    cr_assert_not_null(r.json, "%s %s: not JSON: %s", method, path, r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "code")), "000");
    json_t *data = json_incref(json_object_get(r.json, "data"));
    resp_free(&r);
    return data;
}

/* A request that must fail with status, the Kylin error envelope and error_code (NULL: any);
 * msg_part (NULL: any) must occur in msg. */
UNUSED static void api_err(const qd_t *q, const char *method, const char *path, const char *body,
                           long status, const char *error_code, const char *msg_part) {
    resp_t r = http_req(q, method, path, body, NULL, NULL);
    cr_assert_eq(r.status, status, "%s %s: status %ld, expected %ld: %s", method, path, r.status,
                 status, r.body ? r.body : "");
    cr_assert_not_null(r.json, "%s %s: not JSON: %s", method, path, r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "code")), "999");
    cr_assert(json_is_null(json_object_get(r.json, "data")));
    const char *msg = json_string_value(json_object_get(r.json, "msg"));
    const char *ec = json_string_value(json_object_get(r.json, "error_code"));
    cr_assert_not_null(msg);
    cr_assert_not_null(ec);
    if (error_code)
        cr_assert_str_eq(ec, error_code, "%s %s: %s", method, path, r.body);
    if (msg_part)
        cr_assert(strstr(msg, msg_part), "%s %s: msg '%s' lacks '%s'", method, path, msg, msg_part);
    resp_free(&r);
}

UNUSED static const char *jstr(const json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    /* Criterion formats the message of a passing assertion too (--full-stats): dump only when
     * it is needed, and free the dump (it stays behind only when the assertion fails). */
    char *dump = s ? NULL : json_dumps(o, 0);
    cr_assert_not_null(s, "no string '%s' in %s", key, dump);
    free(dump);
    return s;
}

UNUSED static json_int_t jint(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "no integer '%s'", key);
    return json_integer_value(v);
}

/* Creates project p and a model partitioned by day (yyyy-MM-dd) with an optional template
 * set. */
UNUSED static void make_model(const qd_t *q, const char *project, const char *model,
                              const char *job_template) {
    char body[512];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", project);
    resp_t r = http_req(q, "POST", "/kylin/api/projects", body, NULL, NULL);
    cr_assert(r.status == 200 || r.status == 409, "%s", r.body);
    resp_free(&r);
    snprintf(body, sizeof body,
             "{\"project\":\"%s\",\"name\":\"%s\",\"partition_desc\":{\"partition_date_column\":"
             "\"DT\",\"partition_date_format\":\"yyyy-MM-dd\"}%s%s%s}",
             project, model, job_template ? ",\"job_template\":\"" : "",
             job_template ? job_template : "", job_template ? "\"" : "");
    json_decref(api_ok(q, "POST", "/kylin/api/models", body));
}

/* Submits a build of [start, end) and returns its job id (static buffer). */
UNUSED static const char *build(const qd_t *q, const char *project, const char *model,
                                long long start, long long end) {
    static char id[64];
    char path[256], body[256];
    snprintf(path, sizeof path, "/kylin/api/models/%s/segments", model);
    snprintf(body, sizeof body, "{\"project\":\"%s\",\"start\":%lld,\"end\":%lld}", project, start,
             end);
    json_t *d = api_ok(q, "POST", path, body);
    json_t *jobs = json_object_get(d, "jobs");
    cr_assert_eq(json_array_size(jobs), 1);
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job_name"), "INC_BUILD");
    snprintf(id, sizeof id, "%s", jstr(json_array_get(jobs, 0), "job_id"));
    json_decref(d);
    return id;
}

/* The job as GET /jobs shows it (new reference), NULL when not listed. */
UNUSED static json_t *find_job(const qd_t *q, const char *project, const char *id) {
    char path[256];
    snprintf(path, sizeof path, "/kylin/api/jobs?project=%s&page_size=1000", project);
    json_t *d = api_ok(q, "GET", path, NULL);
    json_t *found = NULL;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(d, "value"), i, j) {
        if (strcmp(jstr(j, "id"), id) == 0)
            found = json_incref(j);
    }
    json_decref(d);
    return found;
}

/* Polls until the job's job_state is state: true, or false once timeout_ms passed, with the
 * state it was in last in last[32]. */
UNUSED static bool job_state_within(const qd_t *q, const char *project, const char *id,
                                    const char *state, int timeout_ms, char *last) {
    int64_t deadline = now_ms() + timeout_ms;
    snprintf(last, 32, "(not listed)");
    for (;;) {
        json_t *j = find_job(q, project, id);
        if (j) {
            snprintf(last, 32, "%s", jstr(j, "job_state"));
            json_decref(j);
            if (strcmp(last, state) == 0)
                return true;
        }
        if (now_ms() >= deadline)
            return false;
        poll_pause();
    }
}

/* Waits until the job's job_state is state; asserts within timeout_ms. */
UNUSED static void wait_job_state(const qd_t *q, const char *project, const char *id,
                                  const char *state, int timeout_ms) {
    char last[32];
    cr_assert(job_state_within(q, project, id, state, timeout_ms, last),
              "job %s is still %s after %d ms, expected %s", id, last, timeout_ms, state);
}

/* Waits until the server's log contains needle. */
UNUSED static void wait_log(const qd_t *q, const char *needle, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms;
    while (!file_contains(q->log, needle)) {
        if (now_ms() > deadline) {
            char *log = read_file(q->log);
            const char *tail = log ? log : "(unreadable)";
            if (strlen(tail) > 16384) /* see qd_stop_ok */
                tail += strlen(tail) - 16384;
            cr_assert_fail("'%s' not logged within %d ms; the end of the log:\n%s", needle,
                           timeout_ms, tail);
        }
        poll_pause();
    }
}

#endif
