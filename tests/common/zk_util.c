/* See zk_util.h. */
#include "tests/common/zk_util.h"

#include "tests/common/loop_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifndef THREADED
#define THREADED /* the blocking calls of libzookeeper_mt */
#endif
#include <zookeeper/zookeeper.h>

/* The directory of this process's private server (ql_test_zk_private_start), or empty. */
static char private_dir[512];

static int read_file_line(const char *name, char *out, size_t cap) {
    char path[1024];
    if (private_dir[0])
        snprintf(path, sizeof path, "%s/%s", private_dir, name);
    else
        snprintf(path, sizeof path, "%s/zk/%s", QL_TEST_BUILD_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    bool ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\r\n")] = '\0';
    return out[0] ? 0 : -1;
}

const char *ql_test_zk_connect(void) {
    static char connect[256], private_connect[256];
    if (private_dir[0]) {
        cr_assert_eq(read_file_line("connect", private_connect, sizeof private_connect), 0,
                     "no %s/connect", private_dir);
        return private_connect;
    }
    if (connect[0])
        return connect;
    if (read_file_line("connect", connect, sizeof connect) == 0)
        return connect;
    connect[0] = '\0';
    const char *ci = getenv("CI");
    if (ci && !strcmp(ci, "true"))
        cr_assert_fail("no ZooKeeper: the zk_start fixture wrote no %s/zk/connect "
                       "(tests/common/zk_fixture.sh)",
                       QL_TEST_BUILD_DIR);
    cr_skip_test("no ZooKeeper server is available (the zk_start fixture found none): skipped");
    return NULL;
}

pid_t ql_test_zk_server_pid(void) {
    char line[64];
    cr_assert_eq(read_file_line("pid", line, sizeof line), 0, "no %s/zk/pid", QL_TEST_BUILD_DIR);
    pid_t pid = (pid_t)atol(line);
    cr_assert_gt(pid, 1);
    return pid;
}

static int zk_fixture(const char *cmd, const char *dir) {
    char line[2048];
    snprintf(line, sizeof line, "bash '%s/tests/common/zk_fixture.sh' %s '%s' '%s/tests/zk_ready'",
             QL_TEST_SOURCE_DIR, cmd, dir, QL_TEST_BUILD_DIR);
    return system(line);
}

void ql_test_zk_private_start(const char *dir) {
    (void)ql_test_zk_connect(); /* skips, or fails in CI, where there is no ZooKeeper at all */
    cr_assert_eq(private_dir[0], '\0', "a private ZooKeeper server runs already");
    int rc = zk_fixture("start", dir);
    cr_assert_eq(rc, 0, "tests/common/zk_fixture.sh start %s: status %d", dir, rc);
    snprintf(private_dir, sizeof private_dir, "%s", dir);
}

void ql_test_zk_private_stop(void) {
    if (!private_dir[0])
        return;
    (void)zk_fixture("stop", private_dir);
    private_dir[0] = '\0';
}

int ql_test_zk_delete_nodes_of(const char *path, long pid) {
    zhandle_t *zh = zookeeper_init(ql_test_zk_connect(), NULL, 10000, NULL, NULL, 0);
    cr_assert_not_null(zh);
    int64_t deadline = ql_test_mono_ms() + 10000;
    while (zoo_state(zh) != ZOO_CONNECTED_STATE) {
        cr_assert_lt(ql_test_mono_ms(), deadline, "the test's ZooKeeper session did not connect");
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    struct String_vector kids = {0};
    int rc = zoo_get_children(zh, path, 0, &kids);
    cr_assert_eq(rc, ZOK, "%s: %s", path, zerror(rc));
    char want[40];
    snprintf(want, sizeof want, " pid=%ld ", pid);
    int deleted = 0;
    for (int32_t i = 0; i < kids.count; i++) {
        char child[512], data[512];
        snprintf(child, sizeof child, "%s/%s", path, kids.data[i]);
        int len = (int)sizeof data - 1;
        struct Stat st;
        rc = zoo_get(zh, child, 0, data, &len, &st);
        if (rc == ZNONODE)
            continue;
        cr_assert_eq(rc, ZOK, "%s: %s", child, zerror(rc));
        data[len > 0 ? len : 0] = '\0';
        if (!strstr(data, want))
            continue;
        rc = zoo_delete(zh, child, -1);
        cr_assert(rc == ZOK || rc == ZNONODE, "%s: %s", child, zerror(rc));
        deleted += rc == ZOK;
    }
    deallocate_String_vector(&kids);
    zookeeper_close(zh);
    return deleted;
}

void ql_test_zk_base(char *out, size_t cap) {
    static int n;
    snprintf(out, cap, "/qt_%ld_%d", (long)getpid(), ++n);
}

void ql_test_zk_opts(ql_zk_opts_t *o, const char *base, const char *id, int timeout_ms) {
    memset(o, 0, sizeof *o);
    o->connect = ql_test_zk_connect();
    o->base_path = base;
    o->cluster = "c";
    o->server_id = id;
    o->session_timeout_ms = timeout_ms;
}

/* ---- sessions in the test's own process ---- */

static void rec_cb(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    (void)zk;
    ql_test_zk_rec_t *r = arg;
    if (r->n == QL_TEST_ZK_STATES)
        return;
    r->states[r->n] = ev->state;
    r->sessions[r->n] = ev->session_id;
    r->at_ms[r->n] = ql_test_mono_ms();
    snprintf(r->reasons[r->n], sizeof r->reasons[r->n], "%s", ev->reason);
    r->n++;
}

ql_zk_t *ql_test_zk_open(uv_loop_t *loop, const ql_zk_opts_t *o, ql_test_zk_rec_t *rec) {
    memset(rec, 0, sizeof *rec);
    ql_zk_t *zk;
    ql_err_t err = {0};
    cr_assert_eq(ql_zk_new(loop, o, &zk, &err), 0, "%s", err.msg);
    ql_zk_listen(zk, &rec->listener, rec_cb, rec);
    ql_test_zk_rec_wait(loop, rec, 0, QL_ZK_CONNECTED, 10000);
    return zk;
}

static void closed(void *arg) {
    *(bool *)arg = true;
}

static bool cond_true(const void *arg) {
    return *(const bool *)arg;
}

void ql_test_zk_close(uv_loop_t *loop, ql_zk_t *zk, ql_test_zk_rec_t *rec) {
    if (!zk)
        return;
    if (rec)
        ql_zk_unlisten(zk, &rec->listener);
    bool done = false;
    ql_zk_close(zk, closed, &done);
    cr_assert(ql_test_drive_until(loop, cond_true, &done, 15000), "the session did not close");
}

int ql_test_zk_rec_find(const ql_test_zk_rec_t *rec, size_t from, ql_zk_state_t s) {
    for (size_t i = from; i < rec->n; i++)
        if (rec->states[i] == s)
            return (int)i;
    return -1;
}

typedef struct rec_wait {
    const ql_test_zk_rec_t *rec;
    size_t from;
    ql_zk_state_t s;
} rec_wait_t;

static bool cond_state(const void *arg) {
    const rec_wait_t *w = arg;
    return ql_test_zk_rec_find(w->rec, w->from, w->s) >= 0;
}

int ql_test_zk_rec_wait(uv_loop_t *loop, ql_test_zk_rec_t *rec, size_t from, ql_zk_state_t s,
                        int64_t deadline_ms) {
    rec_wait_t w = {rec, from, s};
    ql_test_drive_until(loop, cond_state, &w, deadline_ms);
    int i = ql_test_zk_rec_find(rec, from, s);
    cr_assert_geq(i, 0, "no %s within %lld ms (%zu states, last: %s %s)", ql_zk_state_name(s),
                  (long long)deadline_ms, rec->n,
                  rec->n ? ql_zk_state_name(rec->states[rec->n - 1]) : "-",
                  rec->n ? rec->reasons[rec->n - 1] : "");
    return i;
}

/* ---- members ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    (void)hint;
    ql_test_zk_member_t *m = h->data;
    buf->base = m->buf + m->len;
    buf->len = sizeof m->buf - m->len - 1;
}

static void keep_line(ql_test_zk_member_t *m, const char *text) {
    if (m->n_lines == QL_TEST_ZK_LINES)
        return;
    ql_test_zk_line_t *l = &m->lines[m->n_lines++];
    size_t n = strnlen(text, sizeof l->text - 1);
    memcpy(l->text, text, n);
    l->text[n] = '\0';
    const char *ms = strstr(text, " ms=");
    l->ms = ms ? atoll(ms + 4) : ql_test_mono_ms();
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    (void)buf;
    ql_test_zk_member_t *m = s->data;
    if (n <= 0)
        return;
    m->len += (size_t)n;
    m->buf[m->len] = '\0';
    char *nl;
    while ((nl = strchr(m->buf, '\n'))) {
        *nl = '\0';
        keep_line(m, m->buf);
        size_t used = (size_t)(nl + 1 - m->buf);
        memmove(m->buf, nl + 1, m->len - used + 1);
        m->len -= used;
    }
}

static void on_closed(uv_handle_t *h) {
    ql_test_zk_member_t *m = h->data;
    m->closes++;
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
    ql_test_zk_member_t *m = p->data;
    m->exited = true;
    m->exit_status = status;
    m->term_signal = sig;
    m->exit_ms = ql_test_mono_ms();
    uv_close((uv_handle_t *)p, on_closed);
}

void ql_test_zk_member_start(ql_test_zk_member_t *m, uv_loop_t *loop, const char *id,
                             const char *mode, const char *base, int timeout_ms,
                             const char *const *extra, const char *err_path) {
    memset(m, 0, sizeof *m);
    m->loop = loop;
    snprintf(m->id, sizeof m->id, "%s", id);
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", timeout_ms);
    const char *args[24] = {QL_TEST_ZK_MEMBER,
                            "--connect",
                            ql_test_zk_connect(),
                            "--base",
                            base,
                            "--id",
                            id,
                            "--timeout",
                            timeout,
                            "--mode",
                            mode};
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 23; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    uv_pipe_init(loop, &m->out, 0);
    m->out.data = m;
    m->proc.data = m;
    int err_fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    cr_assert_geq(err_fd, 0, "cannot open %s", err_path);
    uv_stdio_container_t io[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&m->out},
        {.flags = UV_INHERIT_FD, .data.fd = err_fd},
    };
    /* uv_spawn takes char **; it does not write to the strings. */
    uv_process_options_t o = {.file = args[0],
                              .args = (char **)args,
                              .exit_cb = on_exit_cb,
                              .stdio = io,
                              .stdio_count = 3};
    int rc = uv_spawn(loop, &m->proc, &o);
    close(err_fd);
    if (rc)
        cr_assert_fail("cannot start %s: %s", args[0], uv_strerror(rc));
    m->pid = m->proc.pid;
    uv_read_start((uv_stream_t *)&m->out, on_alloc, on_read);
}

int ql_test_zk_member_find(const ql_test_zk_member_t *m, size_t from, const char *prefix) {
    for (size_t i = from; i < m->n_lines; i++)
        if (!strncmp(m->lines[i].text, prefix, strlen(prefix)))
            return (int)i;
    return -1;
}

typedef struct waiting {
    const ql_test_zk_member_t *m;
    size_t from;
    const char *prefix;
} waiting_t;

static bool cond_line(const void *arg) {
    const waiting_t *w = arg;
    return ql_test_zk_member_find(w->m, w->from, w->prefix) >= 0 || w->m->exited;
}

int ql_test_zk_member_wait(ql_test_zk_member_t *m, size_t from, const char *prefix,
                           int64_t deadline_ms) {
    waiting_t w = {m, from, prefix};
    ql_test_drive_until(m->loop, cond_line, &w, deadline_ms);
    int i = ql_test_zk_member_find(m, from, prefix);
    cr_assert_geq(i, 0, "member %s (pid %d) printed no '%s' within %lld ms (%zu lines, last: %s)",
                  m->id, (int)m->pid, prefix, (long long)deadline_ms, m->n_lines,
                  m->n_lines ? m->lines[m->n_lines - 1].text : "-");
    return i;
}

uint64_t ql_test_zk_member_num(const ql_test_zk_member_t *m, int i, const char *key) {
    char k[64];
    snprintf(k, sizeof k, " %s=", key);
    const char *p = strstr(m->lines[i].text, k);
    cr_assert_not_null(p, "no %s in '%s'", key, m->lines[i].text);
    return strtoull(p + strlen(k), NULL, 0);
}

static bool cond_gone(const void *arg) {
    const ql_test_zk_member_t *m = arg;
    return m->exited && m->closes >= 1;
}

static bool cond_closed(const void *arg) {
    return ((const ql_test_zk_member_t *)arg)->closes == 2;
}

void ql_test_zk_member_stop(ql_test_zk_member_t *m, int sig, int64_t deadline_ms) {
    if (sig)
        cr_assert_eq(uv_process_kill(&m->proc, sig), 0);
    cr_assert(ql_test_drive_until(m->loop, cond_gone, m, deadline_ms), "member %s did not exit",
              m->id);
    uv_close((uv_handle_t *)&m->out, on_closed);
    cr_assert(ql_test_drive_until(m->loop, cond_closed, m, deadline_ms));
}

void ql_test_zk_member_reap(ql_test_zk_member_t *m) {
    if (!m->loop)
        return;
    if (!m->exited) {
        uv_process_kill(&m->proc, SIGKILL);
        ql_test_drive_until(m->loop, cond_gone, m, 5000);
    }
    if (!uv_is_closing((uv_handle_t *)&m->out))
        uv_close((uv_handle_t *)&m->out, on_closed);
    ql_test_drive_until(m->loop, cond_closed, m, 5000);
}
