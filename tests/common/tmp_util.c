/* See tmp_util.h. */
#include "tests/common/tmp_util.h"

#include "tests/common/loop_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIRS 128
#define DIR_CAP 512
#define MAX_PROCS 8192 /* processes looked at in one pass over /proc */
/* How long the handler waits for killed processes to be gone before it removes the
 * directories anyway (SIGKILL is not refusable, so this is only the kernel's delay). */
#define KILL_DEADLINE_MS 5000

static pid_t g_owner; /* the process that armed the handler; 0 before */
static int g_ndirs;
static char g_dirs[MAX_DIRS][DIR_CAP];
#define MAX_HOOKS 4
static void (*g_hooks[MAX_HOOKS])(void);
static int g_nhooks;

/* Whether /proc/<pid>/environ holds exactly the entry want (NUL-separated entries). */
static bool environ_has(long pid, const char *want) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false; /* gone, a zombie, or not ours */
    static char buf[1 << 16];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    size_t wl = strlen(want);
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, want, wl + 1) == 0)
            return true;
    return false;
}

/* Whether pid is alive and not a zombie (a killed child of ours stays a zombie until this
 * process exits; it holds no files then); *ppid gets its parent. */
static bool alive(long pid, long *ppid) {
    char state;
    long pgrp;
    return ql_test_proc_stat(pid, &state, ppid, &pgrp) && state != 'Z' && state != 'X';
}

/* Sends SIGKILL to every marked process and to every descendant of ours; returns how many are
 * still alive (killed or not). Descendants are found apart from the marker because
 * /proc/<pid>/environ shows the environment a process was started with: a child forked but not
 * (yet) exec'd shows ours from before setenv, without the marker, and so do its own forks. Once
 * orphaned such a process would be found by neither, so the tree is taken before any kill. */
static int kill_marked(const char *want) {
    static long pids[MAX_PROCS], ppids[MAX_PROCS];
    static bool hit[MAX_PROCS];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_PROCS) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == g_owner || !alive(pid, &ppids[n]))
            continue;
        pids[n] = pid;
        hit[n] = ppids[n] == g_owner || environ_has(pid, want);
        n++;
    }
    closedir(d);
    for (bool grew = true; grew;) { /* the descendants of what is already hit */
        grew = false;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n && !hit[i]; j++)
                if (hit[j] && ppids[i] == pids[j])
                    hit[i] = grew = true;
    }
    int left = 0;
    for (int i = 0; i < n; i++)
        if (hit[i]) {
            kill((pid_t)pids[i], SIGKILL);
            left++;
        }
    return left;
}

static void cleanup_at_exit(void) {
    if (getpid() != g_owner)
        return; /* a forked child that inherited the handler */
    char want[64];
    snprintf(want, sizeof want, QL_TEST_OWNER_ENV "=%d", (int)g_owner);
    int64_t deadline = ql_test_mono_ms() + KILL_DEADLINE_MS;
    while (kill_marked(want) > 0 && ql_test_mono_ms() < deadline) {
        /* Reap our own killed children so they stop counting; others are reparented. */
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < g_nhooks; i++)
        g_hooks[i]();
    g_nhooks = 0;
    for (int i = 0; i < g_ndirs; i++)
        ql_test_rm_tree(g_dirs[i]);
    g_ndirs = 0;
}

void ql_test_cleanup_arm(void) {
    if (g_owner == getpid())
        return;
    /* A forked child that calls this becomes an owner of its own, with a fresh registry. */
    g_owner = getpid();
    g_ndirs = 0;
    g_nhooks = 0;
    char v[32];
    snprintf(v, sizeof v, "%d", (int)g_owner);
    setenv(QL_TEST_OWNER_ENV, v, 1);
    static pid_t registered_in;
    if (registered_in == 0) {
        atexit(cleanup_at_exit);
        registered_in = g_owner;
    }
}

void ql_test_cleanup_add(void (*fn)(void)) {
    ql_test_cleanup_arm();
    for (int i = 0; i < g_nhooks; i++)
        if (g_hooks[i] == fn)
            return;
    if (g_nhooks < MAX_HOOKS)
        g_hooks[g_nhooks++] = fn;
}

int ql_test_tmpdir_try(char *out, size_t cap, const char *name) {
    ql_test_cleanup_arm();
    const char *base = getenv("TMPDIR");
    if (!base || !base[0])
        base = "/tmp";
    int n = snprintf(out, cap, "%s/%s-XXXXXX", base, name);
    if (n < 0 || (size_t)n >= cap || n >= DIR_CAP)
        return -ENAMETOOLONG;
    if (g_ndirs == MAX_DIRS)
        return -ENOSPC;
    if (!mkdtemp(out))
        return -errno;
    snprintf(g_dirs[g_ndirs++], DIR_CAP, "%s", out);
    return 0;
}

void ql_test_tmpdir(char *out, size_t cap, const char *name) {
    int rc = ql_test_tmpdir_try(out, cap, name);
    if (rc == -ENOSPC)
        cr_assert_fail("more than %d temporary directories in one test: reuse one", MAX_DIRS);
    if (rc)
        cr_assert_fail("cannot make a temporary directory %s-XXXXXX under $TMPDIR: %s", name,
                       strerror(-rc));
}
