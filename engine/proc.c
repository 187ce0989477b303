/*
 * One step process on a libuv loop: spawn through qilin-exec, capture output, stop, time out.
 *
 * DESIGN. Everything here runs on the loop thread (see ql_proc.h for the contract). A proc owns
 * five handles: the uv_process_t, the read ends of two pipes (the step's stdout+stderr, and the
 * helper's exec-status fd 3), a timeout timer and a grace timer. Its life:
 *   spawned -> [stop: SIGTERM to the group, grace timer]
 *           -> [grace expiry: SIGKILL to the group, drain timer]
 *           -> completed (exited && both pipes at EOF, or exited && drain expired)
 *           -> [stopped: the group SIGKILLed, polled until none of it runs code, at most
 *               QL_PROC_DRAIN_MS]
 *           -> exit callback (once) -> closing (all handles) -> close callback -> free.
 * Invariants: the exit callback runs at most once and never after ql_proc_close(); the memory
 * is freed only when the last of the handles' close callbacks ran; a uv_process_t is closed
 * only after its exit was reaped (closing it earlier would leave a zombie libuv never waits
 * for), which is why ql_proc_close() on a running proc kills it and defers the close.
 *
 * The pipes are made with uv_pipe() and handed to the child as UV_INHERIT_FD rather than
 * UV_CREATE_PIPE, so that stdout and stderr can share one pipe (see ql_proc.h, Output). The
 * parent closes its write ends right after uv_spawn(): otherwise EOF would never come.
 */
#include "engine/ql_proc.h"

#include "base/ql_procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

enum {
    QL_PROC_READ_CHUNK = 65536,
    QL_PROC_STATUS_FD = 3, /* the helper's fd for exec errors, see tools/qilin-exec.c */
    QL_PROC_MIN_ALLOC = 4096,
    QL_PROC_GROUP_POLL_MS = 1, /* a SIGKILLed process is gone within a scheduling round */
};

/* The tail of the output: a ring of at most cap bytes, grown on demand up to cap. While it has
 * not wrapped, head == 0 and the bytes are buf[0, len). */
typedef struct ql_proc_ring {
    char *buf;
    size_t cap;   /* max bytes kept (spec.max_output) */
    size_t alloc; /* bytes allocated, <= cap */
    size_t head;  /* index of the oldest kept byte */
    size_t len;   /* bytes kept */
    uint64_t total;
} ql_proc_ring_t;

struct ql_proc {
    uv_loop_t *loop;
    uv_process_t process;
    uv_pipe_t out;
    uv_pipe_t status;
    uv_timer_t timeout_timer;
    uv_timer_t grace_timer;
    ql_proc_exit_cb exit_cb;
    ql_proc_close_cb close_cb;
    void *arg;
    pid_t pid;
    int log_fd;
    int log_error;
    int64_t timeout_ms;
    int64_t grace_ms;
    uint64_t start_ns;
    ql_proc_ring_t ring;
    char status_buf[32];
    size_t status_len;
    int64_t exit_status;
    int term_signal;
    ql_proc_stop_reason_t stop_reason;
    int pending_closes;
    bool process_inited; /* uv_spawn() was called: the process handle must be closed */
    bool spawned;        /* uv_spawn() succeeded */
    bool exited;
    bool out_eof;
    bool status_eof;
    bool killed;    /* the stop sequence reached SIGKILL */
    bool force_eof; /* stop waiting for EOF once the process exited */
    bool timed_out;
    bool completed;
    bool group_lingered;    /* the report stopped waiting for the stopped group to go */
    uint64_t group_wait_ns; /* when the wait for a stopped group began */
    bool close_requested;
    bool closing; /* handles are being closed */
    char file[256];
    char read_buf[QL_PROC_READ_CHUNK];
};

/* ---- output ring ---- */

static int ring_append(ql_proc_ring_t *r, const char *data, size_t n) {
    r->total += n;
    if (r->cap == 0 || n == 0)
        return 0;
    if (n >= r->cap) {
        if (r->alloc < r->cap) {
            char *nb = realloc(r->buf, r->cap);
            if (nb == NULL)
                return UV_ENOMEM;
            r->buf = nb;
            r->alloc = r->cap;
        }
        memcpy(r->buf, data + (n - r->cap), r->cap);
        r->head = 0;
        r->len = r->cap;
        return 0;
    }
    if (r->len + n > r->alloc && r->alloc < r->cap) {
        /* Not wrapped yet (head == 0): growing keeps the bytes where they are. */
        size_t want = r->alloc * 2;
        if (want < r->len + n)
            want = r->len + n;
        if (want < QL_PROC_MIN_ALLOC)
            want = QL_PROC_MIN_ALLOC;
        if (want > r->cap)
            want = r->cap;
        char *nb = realloc(r->buf, want);
        if (nb == NULL)
            return UV_ENOMEM;
        r->buf = nb;
        r->alloc = want;
    }
    if (r->len + n <= r->alloc && r->head == 0) {
        memcpy(r->buf + r->len, data, n);
        r->len += n;
        return 0;
    }
    /* Full size and overflowing: write at the logical end, wrapping, and drop the oldest. */
    size_t w = (r->head + r->len) % r->cap;
    size_t first = r->cap - w < n ? r->cap - w : n;
    memcpy(r->buf + w, data, first);
    memcpy(r->buf, data + first, n - first);
    if (r->len + n > r->cap) {
        r->head = (r->head + r->len + n - r->cap) % r->cap;
        r->len = r->cap;
    } else {
        r->len += n;
    }
    return 0;
}

static unsigned char ring_at(const ql_proc_ring_t *r, size_t i) {
    return (unsigned char)r->buf[(r->head + i) % r->cap];
}

/* Builds marker + tail into a new malloc'ed, NUL-terminated buffer (owned by the caller). */
static int ring_take(const ql_proc_ring_t *r, char **out, size_t *out_len, uint64_t *truncated) {
    size_t skip = 0;
    /* Only a cut tail can start inside a character: skip at most 3 continuation bytes. */
    if (r->total > r->len)
        while (skip < r->len && skip < 3 && (ring_at(r, skip) & 0xC0) == 0x80)
            skip++;
    size_t keep = r->len - skip;
    uint64_t dropped = r->total - keep;
    char marker[64] = "";
    int mlen = 0;
    if (dropped > 0)
        mlen = snprintf(marker, sizeof marker, "...(%llu characters truncated)...\n",
                        (unsigned long long)dropped);
    char *buf = malloc((size_t)mlen + keep + 1);
    if (buf == NULL)
        return UV_ENOMEM;
    memcpy(buf, marker, (size_t)mlen);
    if (keep > 0) {
        size_t start = (r->head + skip) % r->cap;
        size_t first = r->cap - start < keep ? r->cap - start : keep;
        memcpy(buf + mlen, r->buf + start, first);
        memcpy(buf + mlen + first, r->buf, keep - first);
    }
    buf[(size_t)mlen + keep] = '\0';
    *out = buf;
    *out_len = (size_t)mlen + keep;
    *truncated = dropped;
    return 0;
}

/* ---- helpers ---- */

/* Creates the parent directories of path (like mkdir -p of its dirname). */
static int make_parents(const char *path) {
    size_t n = strlen(path);
    char *dir = malloc(n + 1);
    if (dir == NULL)
        return UV_ENOMEM;
    memcpy(dir, path, n + 1);
    int rc = 0;
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
            rc = -errno;
            break;
        }
        *p = '/';
    }
    free(dir);
    return rc;
}

static int write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Signals the step's process group; a group that is already gone is not an error. */
static int signal_group(pid_t pgid, int sig) {
    if (pgid <= 1)
        return UV_EINVAL;
    if (kill(-pgid, sig) != 0 && errno != ESRCH)
        return -errno;
    return 0;
}

static size_t key_len(const char *kv) {
    const char *eq = strchr(kv, '=');
    return eq ? (size_t)(eq - kv) : strlen(kv);
}

/* Builds the child's environment: the server's, with spec's additions replacing equal keys.
 * Returns a malloc'ed NULL-terminated array; entries [0, *n_owned) are malloc'ed too. */
static int build_env(const ql_proc_spec_t *spec, char ***out, size_t *n_owned) {
    size_t n_env = 0;
    while (environ != NULL && environ[n_env] != NULL)
        n_env++;
    char **env = calloc(n_env + spec->env_count + 1, sizeof *env);
    if (env == NULL)
        return UV_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < spec->env_count; i++) {
        const char *key = spec->env[i].key;
        const char *val = spec->env[i].value ? spec->env[i].value : "";
        bool later = false;
        for (size_t j = i + 1; j < spec->env_count && !later; j++)
            later = strcmp(spec->env[j].key, key) == 0;
        if (later)
            continue;
        size_t kl = strlen(key), vl = strlen(val);
        env[k] = malloc(kl + vl + 2);
        if (env[k] == NULL) {
            for (size_t j = 0; j < k; j++)
                free(env[j]);
            free(env);
            return UV_ENOMEM;
        }
        memcpy(env[k], key, kl);
        env[k][kl] = '=';
        memcpy(env[k] + kl + 1, val, vl + 1);
        k++;
    }
    *n_owned = k;
    for (size_t i = 0; i < n_env; i++) {
        size_t kl = key_len(environ[i]);
        bool replaced = false;
        for (size_t j = 0; j < spec->env_count && !replaced; j++)
            replaced =
                strlen(spec->env[j].key) == kl && memcmp(spec->env[j].key, environ[i], kl) == 0;
        if (!replaced)
            env[k++] = environ[i];
    }
    env[k] = NULL;
    *out = env;
    return 0;
}

static void free_env(char **env, size_t n_owned) {
    if (env == NULL)
        return;
    for (size_t i = 0; i < n_owned; i++)
        free(env[i]);
    free(env);
}

static int validate(const ql_proc_spec_t *spec, ql_err_t *err) {
    if (spec == NULL)
        return ql_err_set(err, UV_EINVAL, "proc: no spec");
    if (spec->argv == NULL || spec->argv[0] == NULL || spec->argv[0][0] == '\0')
        return ql_err_set(err, UV_EINVAL, "proc: argv is empty");
    if (spec->exec_helper == NULL || spec->exec_helper[0] == '\0')
        return ql_err_set(err, UV_EINVAL, "proc: no exec helper path");
    if (spec->timeout_ms < 0)
        return ql_err_set(err, UV_EINVAL, "proc: timeout_ms %lld is negative",
                          (long long)spec->timeout_ms);
    if (spec->grace_ms < 0)
        return ql_err_set(err, UV_EINVAL, "proc: grace_ms %lld is negative",
                          (long long)spec->grace_ms);
    if (spec->env_count > 0 && spec->env == NULL)
        return ql_err_set(err, UV_EINVAL, "proc: env_count without env");
    for (size_t i = 0; i < spec->env_count; i++) {
        const char *key = spec->env[i].key;
        if (key == NULL || key[0] == '\0' || strchr(key, '=') != NULL)
            return ql_err_set(err, UV_EINVAL, "proc: env key %zu '%s' is empty or has '='", i,
                              key ? key : "");
    }
    return 0;
}

/* ---- closing ---- */

static void handle_closed_cb(uv_handle_t *handle) {
    ql_proc_t *proc = handle->data;
    if (--proc->pending_closes > 0)
        return;
    if (proc->close_cb)
        proc->close_cb(proc->arg);
    free(proc->ring.buf);
    free(proc);
}

static void close_one(ql_proc_t *proc, uv_handle_t *handle) {
    if (uv_is_closing(handle))
        return;
    proc->pending_closes++;
    uv_close(handle, handle_closed_cb);
}

/* Closes every handle; the memory goes with the last close callback. */
static void close_handles(ql_proc_t *proc) {
    if (proc->closing)
        return;
    proc->closing = true;
    if (proc->log_fd >= 0) {
        close(proc->log_fd);
        proc->log_fd = -1;
    }
    if (proc->process_inited)
        close_one(proc, (uv_handle_t *)&proc->process);
    close_one(proc, (uv_handle_t *)&proc->out);
    close_one(proc, (uv_handle_t *)&proc->status);
    close_one(proc, (uv_handle_t *)&proc->timeout_timer);
    close_one(proc, (uv_handle_t *)&proc->grace_timer);
}

/* ---- completion ---- */

static void report(ql_proc_t *proc);

/* Polls a stopped step's group until nothing of it runs code, or until QL_PROC_DRAIN_MS have
 * passed (a process stuck in an uninterruptible sleep, say on a dead NFS server, dies only when
 * the kernel lets it): then it reports anyway and says so. */
static void group_wait_cb(uv_timer_t *timer) {
    ql_proc_t *proc = timer->data;
    bool running = ql_proc_group_running(proc->pid);
    if (running && uv_hrtime() - proc->group_wait_ns < (uint64_t)QL_PROC_DRAIN_MS * 1000000u)
        return;
    uv_timer_stop(timer);
    proc->group_lingered = running;
    report(proc);
}

static void complete(ql_proc_t *proc) {
    proc->completed = true;
    uv_timer_stop(&proc->timeout_timer);
    uv_timer_stop(&proc->grace_timer);
    uv_read_stop((uv_stream_t *)&proc->out);
    uv_read_stop((uv_stream_t *)&proc->status);
    /* What is left of the group would outlive the step with nobody tracking it. */
    signal_group(proc->pid, SIGKILL);
    if (proc->log_fd >= 0) {
        close(proc->log_fd);
        proc->log_fd = -1;
    }
    if (proc->close_requested) {
        close_handles(proc);
        return;
    }
    /* A stopped step's group was signalled, but a signalled process runs on until the kernel
     * schedules its exit: the report waits until none of it runs code, so that what comes next
     * (the step's next try, a resumed job) never overlaps the stopped try. */
    if (proc->stop_reason != QL_PROC_STOP_NONE && ql_proc_group_running(proc->pid)) {
        proc->group_wait_ns = uv_hrtime();
        uv_timer_start(&proc->grace_timer, group_wait_cb, QL_PROC_GROUP_POLL_MS,
                       QL_PROC_GROUP_POLL_MS);
        return;
    }
    report(proc);
}

/* Hands the result to the exit callback: the last thing a completed proc does before closing. */
static void report(ql_proc_t *proc) {
    ql_proc_result_t result;
    memset(&result, 0, sizeof result);
    result.exit_status = proc->exit_status;
    result.term_signal = proc->term_signal;
    result.timed_out = proc->timed_out;
    result.stop_reason = proc->stop_reason;
    result.output_total = proc->ring.total;
    result.log_error = proc->log_error;
    result.output_incomplete = !(proc->out_eof && proc->status_eof);
    result.group_lingered = proc->group_lingered;
    result.duration_ms = (int64_t)((uv_hrtime() - proc->start_ns) / 1000000);
    result.timeout_ms = proc->timeout_ms;
    memcpy(result.file, proc->file, sizeof result.file);
    if (proc->status_len > 0) {
        proc->status_buf[proc->status_len] = '\0';
        result.exec_errno = atoi(proc->status_buf);
    }
    if (ring_take(&proc->ring, &result.output, &result.output_len, &result.truncated) != 0) {
        /* Out of memory: report the step's fate without its output rather than not at all. */
        result.output = NULL;
        result.output_len = 0;
        result.truncated = proc->ring.total;
    }
    free(proc->ring.buf);
    proc->ring.buf = NULL;
    proc->ring.alloc = 0;

    proc->exit_cb(proc, &result, proc->arg);
    free(result.output);
}

static void maybe_complete(ql_proc_t *proc) {
    if (proc->completed || !proc->exited)
        return;
    if ((proc->out_eof && proc->status_eof) || proc->force_eof)
        complete(proc);
}

/* ---- callbacks ---- */

static void exit_cb(uv_process_t *process, int64_t exit_status, int term_signal) {
    ql_proc_t *proc = process->data;
    proc->exited = true;
    proc->exit_status = exit_status;
    proc->term_signal = term_signal;
    maybe_complete(proc);
}

static void alloc_cb(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    ql_proc_t *proc = handle->data;
    /* One read at a time per pipe, and the loop is single-threaded: one buffer serves both. */
    *buf = uv_buf_init(proc->read_buf, sizeof proc->read_buf);
}

static void out_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    ql_proc_t *proc = stream->data;
    if (nread > 0) {
        if (proc->log_fd >= 0) {
            int rc = write_all(proc->log_fd, buf->base, (size_t)nread);
            if (rc != 0) {
                proc->log_error = rc;
                close(proc->log_fd);
                proc->log_fd = -1;
            }
        }
        if (ring_append(&proc->ring, buf->base, (size_t)nread) != 0) {
            /* Out of memory: keep counting (everything counts as truncated), stop keeping. */
            proc->ring.cap = 0;
            proc->ring.len = 0;
            proc->ring.head = 0;
        }
        return;
    }
    if (nread < 0) {
        /* UV_EOF, or a read error: either way nothing more will come. */
        uv_read_stop(stream);
        proc->out_eof = true;
        maybe_complete(proc);
    }
}

static void status_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    ql_proc_t *proc = stream->data;
    if (nread > 0) {
        size_t room = sizeof proc->status_buf - 1 - proc->status_len;
        size_t n = (size_t)nread < room ? (size_t)nread : room;
        memcpy(proc->status_buf + proc->status_len, buf->base, n);
        proc->status_len += n;
        return;
    }
    if (nread < 0) {
        uv_read_stop(stream);
        proc->status_eof = true;
        maybe_complete(proc);
    }
}

static void drain_cb(uv_timer_t *timer) {
    ql_proc_t *proc = timer->data;
    proc->force_eof = true;
    maybe_complete(proc);
}

static void grace_cb(uv_timer_t *timer) {
    ql_proc_t *proc = timer->data;
    proc->killed = true;
    signal_group(proc->pid, SIGKILL);
    uv_timer_start(&proc->grace_timer, drain_cb, QL_PROC_DRAIN_MS, 0);
}

static void timeout_cb(uv_timer_t *timer) {
    ql_proc_t *proc = timer->data;
    if (proc->stop_reason == QL_PROC_STOP_NONE) {
        proc->timed_out = true;
        ql_proc_stop(proc, QL_PROC_STOP_TIMEOUT);
    }
}

/* ---- public ---- */

void ql_proc_spec_init(ql_proc_spec_t *spec) {
    memset(spec, 0, sizeof *spec);
    spec->max_output = QL_PROC_DEFAULT_MAX_OUTPUT;
    spec->grace_ms = QL_PROC_DEFAULT_GRACE_MS;
}

/* A new proc for spec with its log file open (none when spec has no log_path); no handle exists
 * yet, so a failure frees it alone. */
static int proc_new(uv_loop_t *loop, const ql_proc_spec_t *spec, ql_proc_exit_cb exit_cb_fn,
                    void *arg, ql_proc_t **out, ql_err_t *err) {
    ql_proc_t *proc = calloc(1, sizeof *proc);
    if (proc == NULL)
        return ql_err_set(err, UV_ENOMEM, "proc: out of memory");
    proc->loop = loop;
    proc->exit_cb = exit_cb_fn;
    proc->arg = arg;
    proc->log_fd = -1;
    proc->timeout_ms = spec->timeout_ms;
    proc->grace_ms = spec->grace_ms;
    proc->ring.cap = spec->max_output;
    snprintf(proc->file, sizeof proc->file, "%s", spec->argv[0]);

    if (spec->log_path != NULL) {
        int rc = make_parents(spec->log_path);
        if (rc == 0) {
            proc->log_fd = open(spec->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
            if (proc->log_fd < 0)
                rc = -errno;
        }
        if (rc != 0) {
            free(proc);
            return ql_err_set(err, rc, "proc: cannot open log file %s: %s", spec->log_path,
                              uv_strerror(rc));
        }
    }
    *out = proc;
    return 0;
}

/* Makes the output and status pipes; the read ends go to proc's pipe handles, the write ends
 * are left in out_fds[1] and status_fds[1] for the child (every fd still ours stays >= 0 for the
 * caller to close). Both ends are close-on-exec: only the fds dup'ed onto 1, 2 and 3 reach the
 * child. */
static int open_pipes(ql_proc_t *proc, uv_file out_fds[2], uv_file status_fds[2]) {
    int rc = uv_pipe(out_fds, 0, 0);
    if (rc == 0)
        rc = uv_pipe(status_fds, 0, 0);
    if (rc == 0) {
        rc = uv_pipe_open(&proc->out, out_fds[0]);
        if (rc == 0)
            out_fds[0] = -1;
    }
    if (rc == 0) {
        rc = uv_pipe_open(&proc->status, status_fds[0]);
        if (rc == 0)
            status_fds[0] = -1;
    }
    return rc;
}

/* Spawns the exec helper with spec's command after "--", its stdout and stderr on out_fd and
 * its status fd (QL_PROC_STATUS_FD) on status_fd, detached (its own process group). */
static int spawn_helper(ql_proc_t *proc, const ql_proc_spec_t *spec, char **env, uv_file out_fd,
                        uv_file status_fd) {
    size_t argc = 0;
    while (spec->argv[argc] != NULL)
        argc++;
    char parent_pid[24], status_fd_arg[16];
    snprintf(parent_pid, sizeof parent_pid, "%ld", (long)getpid());
    snprintf(status_fd_arg, sizeof status_fd_arg, "%d", QL_PROC_STATUS_FD);
    const char **args = calloc(argc + 7, sizeof *args);
    if (args == NULL)
        return UV_ENOMEM;
    size_t k = 0;
    args[k++] = spec->exec_helper;
    args[k++] = "--parent-pid";
    args[k++] = parent_pid;
    args[k++] = "--status-fd";
    args[k++] = status_fd_arg;
    args[k++] = "--";
    for (size_t i = 0; i < argc; i++)
        args[k++] = spec->argv[i];
    args[k] = NULL;

    uv_stdio_container_t stdio[4];
    stdio[0].flags = UV_IGNORE; /* libuv opens /dev/null for an ignored 0..2 */
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = out_fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = out_fd;
    stdio[3].flags = UV_INHERIT_FD;
    stdio[3].data.fd = status_fd;

    uv_process_options_t opts;
    memset(&opts, 0, sizeof opts);
    opts.exit_cb = exit_cb;
    opts.file = spec->exec_helper;
    opts.args = (char **)args;
    opts.env = env;
    opts.cwd = spec->cwd;
    opts.flags = UV_PROCESS_DETACHED;
    opts.stdio_count = 4;
    opts.stdio = stdio;

    proc->process_inited = true;
    proc->start_ns = uv_hrtime();
    int rc = uv_spawn(proc->loop, &proc->process, &opts);
    free(args);
    return rc;
}

int ql_proc_spawn(uv_loop_t *loop, const ql_proc_spec_t *spec, ql_proc_exit_cb exit_cb_fn,
                  void *arg, ql_proc_t **out, ql_err_t *err) {
    if (loop == NULL || exit_cb_fn == NULL || out == NULL)
        return ql_err_set(err, UV_EINVAL, "proc: missing loop, callback or out");
    int rc = validate(spec, err);
    if (rc != 0)
        return rc;
    ql_proc_t *proc = NULL;
    if ((rc = proc_new(loop, spec, exit_cb_fn, arg, &proc, err)) != 0)
        return rc;

    /* From here on the handles exist and every failure goes through close_handles(). */
    uv_pipe_init(loop, &proc->out, 0);
    uv_pipe_init(loop, &proc->status, 0);
    uv_timer_init(loop, &proc->timeout_timer);
    uv_timer_init(loop, &proc->grace_timer);
    proc->process.data = proc;
    proc->out.data = proc;
    proc->status.data = proc;
    proc->timeout_timer.data = proc;
    proc->grace_timer.data = proc;

    uv_file out_fds[2] = {-1, -1};
    uv_file status_fds[2] = {-1, -1};
    char **env = NULL;
    size_t env_owned = 0;
    const char *what = "pipe";
    rc = open_pipes(proc, out_fds, status_fds);
    if (rc == 0) {
        what = "environment";
        rc = build_env(spec, &env, &env_owned);
    }
    if (rc == 0) {
        what = "spawn";
        rc = spawn_helper(proc, spec, env, out_fds[1], status_fds[1]);
        if (rc == UV_ENOMEM && !proc->process_inited)
            what = "arguments";
    }
    /* The child has its copies (or never will): ours would keep the pipes from reaching EOF. */
    for (int i = 0; i < 2; i++) {
        if (out_fds[i] >= 0)
            close(out_fds[i]);
        if (status_fds[i] >= 0)
            close(status_fds[i]);
    }
    free_env(env, env_owned);

    if (rc != 0) {
        if (strcmp(what, "spawn") == 0)
            ql_err_set(err, rc, "proc: cannot spawn %s (helper %s, cwd %s): %s", spec->argv[0],
                       spec->exec_helper, spec->cwd ? spec->cwd : ".", uv_strerror(rc));
        else
            ql_err_set(err, rc, "proc: cannot set up the %s for %s: %s", what, spec->argv[0],
                       uv_strerror(rc));
        close_handles(proc);
        return rc;
    }

    proc->spawned = true;
    proc->pid = proc->process.pid;
    uv_read_start((uv_stream_t *)&proc->out, alloc_cb, out_read_cb);
    uv_read_start((uv_stream_t *)&proc->status, alloc_cb, status_read_cb);
    /* Timers count from the loop's cached time, which may be a whole iteration old. */
    uv_update_time(loop);
    if (spec->timeout_ms > 0)
        uv_timer_start(&proc->timeout_timer, timeout_cb, (uint64_t)spec->timeout_ms, 0);
    *out = proc;
    return 0;
}

pid_t ql_proc_pid(const ql_proc_t *proc) {
    return proc->pid;
}

pid_t ql_proc_pgid(const ql_proc_t *proc) {
    return proc->pid;
}

int ql_proc_stop(ql_proc_t *proc, ql_proc_stop_reason_t reason) {
    if (reason <= QL_PROC_STOP_NONE || reason > QL_PROC_STOP_SHUTDOWN)
        return UV_EINVAL;
    if (proc->completed || proc->close_requested)
        return UV_ESRCH;
    if (proc->stop_reason != QL_PROC_STOP_NONE)
        return 0;
    proc->stop_reason = reason;
    uv_timer_stop(&proc->timeout_timer);
    int rc = signal_group(proc->pid, SIGTERM);
    uv_update_time(proc->loop);
    uv_timer_start(&proc->grace_timer, grace_cb, (uint64_t)proc->grace_ms, 0);
    return rc;
}

void ql_proc_close(ql_proc_t *proc, ql_proc_close_cb close_cb) {
    if (proc->close_requested)
        return;
    proc->close_requested = true;
    proc->close_cb = close_cb;
    if (proc->completed) {
        close_handles(proc);
        return;
    }
    /* Still running: kill it now, and close once it has been reaped (see DESIGN). */
    uv_timer_stop(&proc->timeout_timer);
    uv_timer_stop(&proc->grace_timer);
    proc->killed = true;
    proc->force_eof = true;
    signal_group(proc->pid, SIGKILL);
    maybe_complete(proc);
}

int ql_proc_kill_group(pid_t pgid) {
    if (pgid <= 1 || pgid == getpgrp())
        return UV_EINVAL;
    return signal_group(pgid, SIGKILL);
}

const char *ql_proc_stop_reason_name(ql_proc_stop_reason_t reason) {
    switch (reason) {
    case QL_PROC_STOP_NONE:
        return "NONE";
    case QL_PROC_STOP_PAUSE:
        return "PAUSE";
    case QL_PROC_STOP_DISCARD:
        return "DISCARD";
    case QL_PROC_STOP_RESTART:
        return "RESTART";
    case QL_PROC_STOP_TIMEOUT:
        return "TIMEOUT";
    case QL_PROC_STOP_SHUTDOWN:
        return "SHUTDOWN";
    }
    return "?";
}

int ql_proc_classify(const ql_proc_result_t *r, int warning_exit_code, ql_proc_verdict_t *out) {
    if (r == NULL || out == NULL)
        return UV_EINVAL;
    out->outcome = QL_PROC_ERROR;
    out->msg[0] = '\0';
    if (r->exec_errno == ENOENT) {
        snprintf(out->msg, sizeof out->msg, "command not found: %s", r->file);
    } else if (r->exec_errno != 0) {
        snprintf(out->msg, sizeof out->msg, "cannot execute %s: %s", r->file,
                 uv_strerror(-r->exec_errno));
    } else if (r->timed_out) {
        snprintf(out->msg, sizeof out->msg, "timed out after %lld ms", (long long)r->timeout_ms);
    } else if (r->stop_reason != QL_PROC_STOP_NONE) {
        snprintf(out->msg, sizeof out->msg, "stopped (%s)",
                 ql_proc_stop_reason_name(r->stop_reason));
    } else if (r->term_signal != 0) {
        const char *abbrev = sigabbrev_np(r->term_signal);
        snprintf(out->msg, sizeof out->msg, "killed by signal %d (SIG%s)", r->term_signal,
                 abbrev ? abbrev : "?");
    } else if (r->exit_status == 0) {
        out->outcome = QL_PROC_SUCCEED;
    } else if (warning_exit_code >= 0 && r->exit_status == warning_exit_code) {
        out->outcome = QL_PROC_WARNING;
        snprintf(out->msg, sizeof out->msg, "exit code %lld (warning)", (long long)r->exit_status);
    } else {
        snprintf(out->msg, sizeof out->msg, "exit code %lld", (long long)r->exit_status);
    }
    return 0;
}
