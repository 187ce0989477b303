/* Facts about processes, from /proc: see ql_procinfo.h. */
#include "base/ql_procinfo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

/* include/linux/sched.h: set as do_exit() begins (proc(5) names that header for field 9). */
#define PF_EXITING 0x00000004u

/* Parses /proc/<dir>/stat. The command (field 2) is in parentheses and may hold spaces and
 * parentheses itself, so the fields are counted from its last ')'. */
static int read_stat(const char *dir, ql_proc_info_t *out) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%s/stat", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? UV_ESRCH : -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return UV_ESRCH; /* a process that exited between open and read */
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return UV_EINVAL;
    p += 2;
    out->state = *p;
    /* p is at field 3: the group is field 5, the flags field 9, the start time field 22. */
    for (int field = 3; field < 22; field++) {
        if (field == 5)
            out->pgrp = (pid_t)strtol(p, NULL, 10);
        else if (field == 9)
            out->exiting = (strtoull(p, NULL, 10) & PF_EXITING) != 0;
        p = strchr(p, ' ');
        if (!p)
            return UV_EINVAL;
        p++;
    }
    out->start = strtoull(p, NULL, 10);
    return 0;
}

int ql_proc_info(pid_t pid, ql_proc_info_t *out) {
    if (pid <= 0)
        return UV_ESRCH;
    char dir[32];
    snprintf(dir, sizeof dir, "%ld", (long)pid);
    int rc = read_stat(dir, out);
    if (rc)
        return rc;
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%s", dir);
    if (stat(path, &st) != 0)
        return errno == ENOENT ? UV_ESRCH : -errno;
    out->uid = st.st_uid;
    return 0;
}

uint64_t ql_proc_self_start(void) {
    ql_proc_info_t me;
    return read_stat("self", &me) == 0 ? me.start : 0;
}

int ql_proc_kill(pid_t pid, uint64_t start, int sig) {
    /* The pidfd pins the process: once it is open, the start time read after it is that of the
     * process the pidfd refers to (or /proc says it is gone), and the signal goes to it alone. */
    int pfd = pidfd_open(pid, 0);
    if (pfd < 0)
        return errno == ESRCH ? UV_ESRCH : -errno;
    ql_proc_info_t now;
    int rc = ql_proc_info(pid, &now);
    if (rc == 0 && now.start != start)
        rc = UV_ESRCH;
    if (rc == 0 && pidfd_send_signal(pfd, sig, NULL, 0) != 0)
        rc = errno == ESRCH ? UV_ESRCH : -errno;
    close(pfd);
    return rc;
}

/* Whether zombie pid is done: a first thread that called pthread_exit() shows as a zombie while
 * the process's other threads run on, and its pidfd polls readable only once all have exited.
 * A pidfd that cannot be opened for another reason than ESRCH cannot tell: not done. */
static bool zombie_done(pid_t pid) {
    int pfd = pidfd_open(pid, 0);
    if (pfd < 0)
        return errno == ESRCH;
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    bool done = poll(&p, 1, 0) == 1;
    close(pfd);
    return done;
}

bool ql_proc_group_running(pid_t pgid) {
    if (pgid <= 0 || (kill(-pgid, 0) != 0 && errno == ESRCH))
        return false;
    DIR *d = opendir("/proc");
    if (!d)
        return true; /* cannot tell: the caller must not take the group for stopped */
    bool running = false;
    struct dirent *e;
    while (!running && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        ql_proc_info_t info = {0};
        if (read_stat(e->d_name, &info) == 0 && info.pgrp == pgid &&
            ((info.state != 'Z' && info.state != 'X') || !zombie_done((pid_t)atol(e->d_name))))
            running = true;
    }
    closedir(d);
    return running;
}

int ql_proc_group_wait_gone(pid_t pgid, int timeout_ms) {
    int64_t deadline = ql_boot_ms() + timeout_ms;
    while (ql_proc_group_running(pgid)) {
        if (ql_boot_ms() >= deadline)
            return UV_EBUSY;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return 0;
}

int64_t ql_boot_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
