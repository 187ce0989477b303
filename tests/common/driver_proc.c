/* See driver_proc.h. */
#include "tests/common/driver_proc.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
    (void)hint;
    ql_test_driver_t *d = h->data;
    buf->base = d->buf + d->len;
    buf->len = sizeof d->buf - d->len - 1;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    (void)buf;
    ql_test_driver_t *d = s->data;
    if (n <= 0)
        return;
    d->len += (size_t)n;
    d->buf[d->len] = '\0';
    char *nl;
    while ((nl = strchr(d->buf, '\n'))) {
        *nl = '\0';
        if (strcmp(d->buf, "MASTER") == 0)
            d->master = true;
        size_t used = (size_t)(nl + 1 - d->buf);
        memmove(d->buf, nl + 1, d->len - used + 1);
        d->len -= used;
    }
}

static void on_closed(uv_handle_t *h) {
    ql_test_driver_t *d = h->data;
    d->closes++;
}

static void on_proc_exit(uv_process_t *p, int64_t status, int sig) {
    ql_test_driver_t *d = p->data;
    d->exited = true;
    d->exit_status = status;
    d->term_signal = sig;
    uv_close((uv_handle_t *)p, on_closed);
}

static bool cond_master(const void *arg) {
    return ((const ql_test_driver_t *)arg)->master;
}

static bool cond_gone(const void *arg) {
    const ql_test_driver_t *d = arg;
    return d->exited && d->closes >= 1;
}

static bool cond_closed(const void *arg) {
    return ((const ql_test_driver_t *)arg)->closes == 2;
}

void ql_test_driver_start(ql_test_driver_t *d, uv_loop_t *loop, char **args, const char *err_path,
                          int64_t deadline_ms) {
    memset(d, 0, sizeof *d);
    d->loop = loop;
    uv_pipe_init(loop, &d->out, 0);
    d->out.data = d;
    d->proc.data = d;
    int err_fd = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    cr_assert_geq(err_fd, 0, "cannot open %s", err_path);
    uv_stdio_container_t io[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&d->out},
        {.flags = UV_INHERIT_FD, .data.fd = err_fd},
    };
    uv_process_options_t o = {
        .file = args[0], .args = args, .exit_cb = on_proc_exit, .stdio = io, .stdio_count = 3};
    int rc = uv_spawn(loop, &d->proc, &o);
    close(err_fd);
    /* Not cr_assert_eq with uv_strerror in its message: under --full-stats Criterion formats
     * the message of a passing assertion too, and uv_strerror(0) allocates. */
    if (rc)
        cr_assert_fail("cannot start %s: %s", args[0], uv_strerror(rc));
    uv_read_start((uv_stream_t *)&d->out, on_alloc, on_read);
    cr_assert(ql_test_drive_until(loop, cond_master, d, deadline_ms),
              "%s never took the lock (its log: %s)", args[0], err_path);
}

void ql_test_driver_start_node(ql_test_driver_t *d, uv_loop_t *loop, const char *driver,
                               const char *data, const char *templates, const char *err_path,
                               int64_t deadline_ms) {
    /* uv_spawn takes char **; it does not write to the strings. */
    char *args[12] = {(char *)driver,    "--data",         (char *)data, "--templates",
                      (char *)templates, "--poll-seconds", "1"};
    const char *store[2];
    int n = 7, n_store = ql_test_store_settings(data, store); /* the backend under test */
    for (int i = 0; i < n_store; i++) {
        args[n++] = "--set";
        args[n++] = (char *)store[i];
    }
    args[n] = NULL;
    ql_test_driver_start(d, loop, args, err_path, deadline_ms);
}

void ql_test_driver_stop(ql_test_driver_t *d, int sig, int64_t deadline_ms) {
    cr_assert_eq(uv_process_kill(&d->proc, sig), 0);
    cr_assert(ql_test_drive_until(d->loop, cond_gone, d, deadline_ms), "the driver did not exit");
    uv_close((uv_handle_t *)&d->out, on_closed);
    cr_assert(ql_test_drive_until(d->loop, cond_closed, d, deadline_ms));
}

void ql_test_driver_reap(ql_test_driver_t *d, bool term_first, int64_t deadline_ms) {
    if (!d->loop)
        return; /* never started */
    if (!d->exited) {
        uv_process_kill(&d->proc, term_first ? SIGTERM : SIGKILL);
        if (!ql_test_drive_until(d->loop, cond_gone, d, deadline_ms) && term_first) {
            uv_process_kill(&d->proc, SIGKILL);
            ql_test_drive_until(d->loop, cond_gone, d, deadline_ms);
        }
    }
    if (!uv_is_closing((uv_handle_t *)&d->out))
        uv_close((uv_handle_t *)&d->out, on_closed);
}
