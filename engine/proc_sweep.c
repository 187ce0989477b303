/*
 * Finding and killing what is left of interrupted step tries: the markers (tokens), the
 * recorded process group checked against its leader's identity, and the /proc sweep.
 *
 * DESIGN. See ql_proc.h, Markers, for the rule these functions serve. Nothing here keeps state
 * between calls and nothing runs on a loop: recovery calls it inside its write transaction, so
 * that the interrupted tries are gone before the commit that lets them run again; a crash
 * before that commit leaves the steps RUNNING with their tokens, and the next start sweeps again.
 *
 * Why /proc and not a cgroup per step: a cgroup needs a writable, delegated cgroup tree, which
 * a server run as a plain user under a service manager or in a container often does not have;
 * the environment is inherited by every fork and exec without anyone's help. Its limit (a
 * process that wipes its environment) is stated in ql_proc.h.
 *
 * Cost. One readdir of /proc, one fstatat per process (the owner) and one read of the
 * environment per process of the server's user (and of its stat when the environment is empty:
 * an exiting process); the tokens are in a hash set, so the number of interrupted steps does not
 * multiply the scan. Then one poll per process killed or found exiting, which returns once the
 * kernel has finished tearing it down: milliseconds.
 */
#include "base/ql_buf.h"
#include "base/ql_hex.h"
#include "base/ql_procinfo.h"
#include "engine/ql_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    TOKEN_BYTES = QL_PROC_TOKEN_LEN / 2,
    ENV_READ_MAX = 4 << 20, /* environments past this are read this far */
};

/* Parses exactly QL_PROC_TOKEN_LEN hex digits at s (n bytes available, not NUL-terminated). */
static bool token_parse(const char *s, size_t n, uint8_t out[TOKEN_BYTES]) {
    if (n != QL_PROC_TOKEN_LEN)
        return false;
    for (size_t i = 0; i < TOKEN_BYTES; i++) {
        int hi = ql_hex_digit(s[2 * i]), lo = ql_hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

int ql_proc_token_new(char out[QL_PROC_TOKEN_LEN + 1]) {
    if (sodium_init() < 0)
        return UV_EIO;
    uint8_t b[TOKEN_BYTES];
    randombytes_buf(b, sizeof b);
    sodium_bin2hex(out, QL_PROC_TOKEN_LEN + 1, b, sizeof b);
    return 0;
}

bool ql_proc_token_valid(const char *s) {
    uint8_t b[TOKEN_BYTES];
    return s && token_parse(s, strlen(s), b);
}

/* ---- the process group, checked ---- */

/* Reads from fd until EOF or cap bytes; returns how many, or a UV_E* code. */
static ssize_t read_upto(int fd, char *buf, size_t cap) {
    size_t len = 0;
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        len += (size_t)n;
    }
    return (ssize_t)len;
}

/* Reads a whole small file into buf (NUL-terminated); returns its length or a UV_E* code. */
static ssize_t read_small(int dirfd, const char *path, char *buf, size_t cap) {
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t len = read_upto(fd, buf, cap - 1);
    close(fd);
    buf[len > 0 ? len : 0] = '\0';
    return len;
}

int ql_proc_boot_id(char out[QL_PROC_BOOT_ID_LEN + 1]) {
    char buf[64];
    ssize_t n = read_small(AT_FDCWD, "/proc/sys/kernel/random/boot_id", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    if (n < QL_PROC_BOOT_ID_LEN)
        return UV_EIO;
    memcpy(out, buf, QL_PROC_BOOT_ID_LEN);
    out[QL_PROC_BOOT_ID_LEN] = '\0';
    return 0;
}

int ql_proc_ident_of(pid_t pid, ql_proc_ident_t *out) {
    memset(out, 0, sizeof *out);
    if (pid <= 0)
        return UV_EINVAL;
    out->pgid = pid;
    ql_proc_info_t info;
    int rc = ql_proc_info(pid, &info);
    out->start = rc ? 0 : info.start;
    if (!rc)
        rc = ql_proc_boot_id(out->boot_id);
    return rc;
}

int ql_proc_kill_group_checked(const ql_proc_ident_t *id, const char *boot_id, int drain_ms,
                               ql_proc_group_fate_t *fate) {
    *fate = QL_PROC_GROUP_UNRECORDED;
    if (id->pgid <= 1 || id->pgid == getpgrp())
        return UV_EINVAL;
    if (id->start == 0 || id->boot_id[0] == '\0')
        return 0;
    if (strcmp(boot_id, id->boot_id) != 0) {
        *fate = QL_PROC_GROUP_REBOOTED;
        return 0;
    }
    /* After a crash most leaders died with the server (PR_SET_PDEATHSIG): one kill(0) tells
     * that at a tenth of the cost of failing to open /proc/PID/stat, 10,000 times over. */
    if (kill(id->pgid, 0) != 0 && errno == ESRCH) {
        *fate = QL_PROC_GROUP_LEADER_GONE;
        return 0;
    }
    ql_proc_info_t info;
    int rc = ql_proc_info(id->pgid, &info);
    if (rc == UV_ESRCH) {
        *fate = QL_PROC_GROUP_LEADER_GONE;
        return 0;
    }
    if (rc)
        return rc;
    if (info.start != id->start) {
        *fate = QL_PROC_GROUP_PID_REUSED;
        return 0;
    }
    /* The leader is the recorded one, so the group is: a group id stays taken while its leader
     * lives. (Between the look and the kill the leader could die and the number be reused by a
     * whole new group; that needs the pid counter to wrap in microseconds.) */
    if (kill(-id->pgid, SIGKILL) != 0 && errno != ESRCH)
        return -errno;
    *fate = QL_PROC_GROUP_KILLED;
    /* Killed is not gone: a process frees its memory before it closes its files. */
    return ql_proc_group_wait_gone(id->pgid, drain_ms);
}

const char *ql_proc_group_fate_name(ql_proc_group_fate_t fate) {
    switch (fate) {
    case QL_PROC_GROUP_KILLED:
        return "killed";
    case QL_PROC_GROUP_UNRECORDED:
        return "not recorded";
    case QL_PROC_GROUP_REBOOTED:
        return "the machine has rebooted since";
    case QL_PROC_GROUP_LEADER_GONE:
        return "its leader is gone";
    case QL_PROC_GROUP_PID_REUSED:
        return "the pid belongs to another process";
    }
    return "?";
}

/* ---- the token set ---- */

typedef struct slot {
    uint8_t b[TOKEN_BYTES];
    bool used;
} slot_t;

struct ql_proc_tokens {
    slot_t *slots;
    size_t cap; /* a power of two, at least twice n */
    size_t n;
};

int ql_proc_tokens_new(ql_proc_tokens_t **out) {
    ql_proc_tokens_t *t = calloc(1, sizeof *t);
    if (!t || !(t->slots = calloc(16, sizeof *t->slots))) {
        free(t);
        return UV_ENOMEM;
    }
    t->cap = 16;
    *out = t;
    return 0;
}

void ql_proc_tokens_free(ql_proc_tokens_t *t) {
    if (t) {
        free(t->slots);
        free(t);
    }
}

size_t ql_proc_tokens_count(const ql_proc_tokens_t *t) {
    return t->n;
}

/* The bytes are random: the first eight are a good hash. */
static size_t slot_of(const ql_proc_tokens_t *t, const uint8_t b[TOKEN_BYTES]) {
    uint64_t h;
    memcpy(&h, b, sizeof h);
    size_t i = (size_t)h & (t->cap - 1);
    while (t->slots[i].used && memcmp(t->slots[i].b, b, TOKEN_BYTES) != 0)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static bool tokens_has(const ql_proc_tokens_t *t, const uint8_t b[TOKEN_BYTES]) {
    return t->slots[slot_of(t, b)].used;
}

int ql_proc_tokens_add(ql_proc_tokens_t *t, const char *token) {
    uint8_t b[TOKEN_BYTES];
    if (!token || !token_parse(token, strlen(token), b))
        return UV_EINVAL;
    if ((t->n + 1) * 2 > t->cap) {
        ql_proc_tokens_t bigger = {calloc(t->cap * 2, sizeof *t->slots), t->cap * 2, 0};
        if (!bigger.slots)
            return UV_ENOMEM;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].used)
                bigger.slots[slot_of(&bigger, t->slots[i].b)] = t->slots[i];
        bigger.n = t->n;
        free(t->slots);
        *t = bigger;
    }
    slot_t *s = &t->slots[slot_of(t, b)];
    if (!s->used) {
        memcpy(s->b, b, TOKEN_BYTES);
        s->used = true;
        t->n++;
    }
    return 0;
}

/* ---- the sweep ---- */

/* Whether the environment env[0, len) (NUL-separated entries) holds a token of t. Every entry
 * counts, not only the first of the name as getenv() would: the value is random, so any copy
 * of it was inherited from the step. */
static bool env_marked(const ql_proc_tokens_t *t, const char *env, size_t len) {
    static const char key[] = QL_PROC_TOKEN_ENV "=";
    const size_t kl = sizeof key - 1;
    for (size_t i = 0; i < len;) {
        const char *e = env + i;
        const char *nul = memchr(e, '\0', len - i);
        size_t el = nul ? (size_t)(nul - e) : len - i;
        uint8_t b[TOKEN_BYTES];
        if (el > kl && memcmp(e, key, kl) == 0 && token_parse(e + kl, el - kl, b) &&
            tokens_has(t, b))
            return true;
        i += el + 1;
    }
    return false;
}

/* Reads /proc/<name>/environ into *buf (grown as needed); returns its length or a UV_E* code. */
static ssize_t read_environ(int procfd, const char *name, char **buf, size_t *cap) {
    char path[300]; /* a d_name has at most 255 bytes */
    snprintf(path, sizeof path, "%s/environ", name);
    int fd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    while (*cap < ENV_READ_MAX || len < *cap) {
        if (ql_array_reserve(buf, cap, len + 1, 1, 16384)) {
            close(fd);
            return UV_ENOMEM;
        }
        size_t want = *cap - len;
        ssize_t n = read_upto(fd, *buf + len, want);
        if (n < 0) {
            close(fd);
            return n;
        }
        len += (size_t)n;
        if ((size_t)n < want)
            break; /* EOF */
    }
    close(fd);
    return (ssize_t)len;
}

/* Reads the environment of the process /proc/<name>: its first thread's, or when that one has
 * none, another thread's (a first thread that called pthread_exit() shows no memory while the
 * others run on with the memory and the environment they share). Returns its length; 0 or
 * UV_ESRCH when no thread has one (an empty environment, or a process whose memory is gone:
 * exiting); or another UV_E* code. */
static ssize_t read_process_environ(int procfd, const char *name, char **buf, size_t *cap) {
    ssize_t n = read_environ(procfd, name, buf, cap);
    if (n != 0 && n != UV_ESRCH)
        return n;
    char path[300];
    snprintf(path, sizeof path, "%s/task", name);
    int fd = openat(procfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return n;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9' || strcmp(de->d_name, name) == 0)
            continue;
        char thread[300];
        snprintf(thread, sizeof thread, "%s/task/%.32s", name, de->d_name);
        ssize_t m = read_environ(procfd, thread, buf, cap);
        if (m > 0 || m == UV_ENOMEM) {
            n = m;
            break;
        }
    }
    closedir(d);
    return n;
}

/* Processes a sweep waits for until each is a zombie or gone: a pidfd and the pid it pins. */
typedef struct {
    int fd;
    pid_t pid;
} waited_t;

typedef struct {
    waited_t *v;
    size_t n, cap;
} waits_t;

static void waits_close(waits_t *w) {
    for (size_t i = 0; i < w->n; i++)
        close(w->v[i].fd);
    free(w->v);
    *w = (waits_t){0};
}

/* The entry of w for pid, or NULL. */
static waited_t *waits_find(const waits_t *w, pid_t pid) {
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].pid == pid)
            return &w->v[i];
    return NULL;
}

/* Kills the marked process pid through a pidfd kept in w, to be waited for: the environment is
 * read again once the pidfd pins the process, so the signal goes to the process that carries
 * the marker even if the number was reused since the scan read it. Returns 0 (also when it is
 * gone) or UV_ENOMEM. */
static int kill_marked(int procfd, const char *name, pid_t pid, const ql_proc_tokens_t *t,
                       char **buf, size_t *cap, waits_t *w, ql_proc_sweep_t *st) {
    /* Killed in an earlier pass and not yet scheduled to die: signalled again through the pidfd
     * it already has (a number stays taken until its zombie is reaped, so while the signal
     * finds the process this is the one). */
    waited_t *seen = waits_find(w, pid);
    if (seen && pidfd_send_signal(seen->fd, SIGKILL, NULL, 0) == 0) {
        st->killed++;
        return 0;
    }
    if (QL_ARRAY_RESERVE(w->v, w->cap, w->n + 1, 8))
        return UV_ENOMEM;
    int pfd = pidfd_open(pid, 0);
    if (pfd < 0)
        return errno == ESRCH ? 0 : -errno; /* gone since the scan, or out of descriptors */
    ssize_t n = read_process_environ(procfd, name, buf, cap);
    if (n == UV_ENOMEM) {
        close(pfd);
        return UV_ENOMEM;
    }
    /* No environment now: it began to exit since the scan read it, and is waited for all the
     * same. An environment without the marker: the number names another process now. */
    bool exiting = n == 0 || n == UV_ESRCH;
    bool marked = n > 0 && env_marked(t, *buf, (size_t)n);
    if (!exiting && (!marked || pidfd_send_signal(pfd, SIGKILL, NULL, 0) != 0)) {
        close(pfd);
        return 0;
    }
    st->killed += marked;
    w->v[w->n++] = (waited_t){pfd, pid};
    return 0;
}

/* A process none of whose threads has an environment may be one that is exiting: the kernel
 * freed its memory, environment included, but it may still hold its files. Whose it was cannot
 * be told any more, so one that is exiting (PF_EXITING on its first thread, or that thread
 * already a zombie) and not yet gone (its pidfd polls readable only once every thread has
 * exited) is waited for: it runs no code, so this takes as long as the kernel needs to close
 * its files. Returns 0 or UV_ENOMEM. */
static int note_exiting(pid_t pid, waits_t *w, ql_proc_sweep_t *st) {
    ql_proc_info_t info;
    if (waits_find(w, pid) || ql_proc_info(pid, &info) != 0 ||
        !(info.exiting || info.state == 'Z' || info.state == 'X'))
        return 0;
    if (QL_ARRAY_RESERVE(w->v, w->cap, w->n + 1, 8))
        return UV_ENOMEM;
    int pfd = pidfd_open(pid, 0);
    if (pfd < 0) {
        st->lingered += errno != ESRCH; /* cannot be waited for */
        return 0;
    }
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    if (poll(&p, 1, 0) == 1) {
        close(pfd); /* gone: a zombie whose every thread has exited */
        return 0;
    }
    st->exiting++;
    w->v[w->n++] = (waited_t){pfd, pid};
    return 0;
}

/* One pass: kills every marked process; *found gets how many were found. */
static int sweep_once(const ql_proc_tokens_t *t, char **buf, size_t *cap, unsigned *found,
                      waits_t *killed, waits_t *exiting, ql_proc_sweep_t *st) {
    *found = 0;
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        return -errno;
    DIR *d = fdopendir(procfd);
    if (!d) {
        int e = -errno;
        close(procfd);
        return e;
    }
    const uid_t me = geteuid();
    const pid_t self = getpid();
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 1 || pid == self)
            continue;
        struct stat sb;
        if (fstatat(procfd, de->d_name, &sb, 0) != 0 || sb.st_uid != me)
            continue;
        ssize_t n = read_process_environ(procfd, de->d_name, buf, cap);
        if (n == UV_ENOMEM) {
            rc = UV_ENOMEM;
            break;
        }
        if (n == 0 || n == UV_ESRCH) {
            /* No environment (newer kernels refuse the read of a process whose memory is gone,
             * older ones read nothing): gone, exiting, or a process with an empty one. */
            rc = note_exiting((pid_t)pid, exiting, st);
            continue;
        }
        if (n < 0) {
            if (n != UV_ENOENT && st->scans == 1)
                st->unreadable++;
            continue;
        }
        if (st->scans == 1)
            st->examined++;
        if (env_marked(t, *buf, (size_t)n)) {
            (*found)++;
            rc = kill_marked(procfd, de->d_name, (pid_t)pid, t, buf, cap, killed, st);
        }
    }
    closedir(d);
    return rc;
}

/* Waits until every process of w is a zombie or gone: a pidfd polls readable only then, that is
 * after the kernel closed the process's files (ql_procinfo.h, ql_proc_group_running()), or
 * until deadline (ql_boot_ms()). Returns how many were still there then, or a UV_E* code. */
static int wait_gone(const waits_t *w, int64_t deadline) {
    int left = 0;
    for (size_t i = 0; i < w->n;) {
        struct pollfd p = {.fd = w->v[i].fd, .events = POLLIN};
        int64_t ms = deadline - ql_boot_ms();
        int r = poll(&p, 1, ms > 0 ? (int)ms : 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        left += r == 0;
        i++;
    }
    return left;
}

int ql_proc_kill_tokens(const ql_proc_tokens_t *t, int drain_ms, ql_proc_sweep_t *stats) {
    ql_proc_sweep_t st = {0};
    char *buf = NULL;
    size_t cap = 0;
    waits_t killed = {0}, exiting = {0};
    int rc = 0;
    unsigned found = 0;
    if (t->n) {
        do {
            if (st.scans) {
                /* The processes killed in the last pass may not have been scheduled to exit
                 * yet; a short pause instead of a busy loop over /proc. */
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
            }
            st.scans++;
            rc = sweep_once(t, &buf, &cap, &found, &killed, &exiting, &st);
        } while (!rc && found && st.scans < QL_PROC_SWEEP_MAX_SCANS);
        if (!rc && found)
            rc = UV_EBUSY;
        /* A scan that finds none proves only that no marked process still has its memory: one
         * that was killed (here, by its step's death or by its watcher) and whose memory the
         * kernel has freed may still hold its files. */
        const int64_t deadline = ql_boot_ms() + drain_ms;
        if (!rc && (rc = wait_gone(&killed, deadline)) > 0)
            rc = UV_EBUSY;
        if (!rc && (rc = wait_gone(&exiting, deadline)) > 0) {
            st.lingered = (unsigned)rc;
            rc = 0;
        }
    }
    waits_close(&killed);
    waits_close(&exiting);
    free(buf);
    if (stats)
        *stats = st;
    return rc;
}
