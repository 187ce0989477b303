/* A network namespace joined to the test's by a veth pair (netns_util.h). */
#include "tests/common/netns_util.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs a shell command line made from fmt; returns its exit status (-1: did not run). Its
 * output is discarded unless it fails, when its stderr goes to the test's. */
static int run(const char *fmt, ...) {
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/* Whether some interface already holds an address of 169.254.x.y/30. */
static bool subnet_taken(int x, int y) {
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ip -o -4 addr show to 169.254.%d.%d/30 2>/dev/null", x, y);
    FILE *p = popen(cmd, "r");
    if (!p)
        return true;
    char line[256];
    bool taken = fgets(line, sizeof line, p) != NULL;
    pclose(p);
    return taken;
}

/* The holder: a process in a new network namespace that lives until its pipe closes or the
 * test dies. Reports unshare's errno (0: done) on ready. Only system calls after the fork. */
static void holder_main(int ready, int hold) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int e = unshare(CLONE_NEWNET) == 0 ? 0 : errno;
    if (write(ready, &e, sizeof e) != (ssize_t)sizeof e)
        _exit(1);
    char b;
    while (read(hold, &b, 1) > 0)
        ;
    _exit(0);
}

int ql_test_netns_open(ql_test_netns_t *ns, char *why, size_t cap) {
    memset(ns, 0, sizeof *ns);
    ns->holder_fd = -1;
    if (run("command -v ip > /dev/null && command -v nsenter > /dev/null") != 0) {
        snprintf(why, cap, "iproute2's ip and util-linux's nsenter are needed");
        return -ENOENT;
    }
    int ready[2], hold[2];
    if (pipe(ready) || pipe(hold)) {
        snprintf(why, cap, "pipe: %s", strerror(errno));
        return -errno;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]);
        holder_main(ready[1], hold[0]);
    }
    close(ready[1]);
    close(hold[0]);
    int e = EIO;
    bool told = pid > 0 && read(ready[0], &e, sizeof e) == (ssize_t)sizeof e;
    close(ready[0]);
    ns->holder = pid > 0 ? pid : 0;
    ns->holder_fd = hold[1];
    if (!told || e) {
        snprintf(why, cap, "cannot make a network namespace: %s", strerror(told ? e : EIO));
        ql_test_netns_close(ns);
        return -(told ? e : EIO);
    }
    /* A /30 of 169.254.0.0/16 from the pid, avoiding 169.254.169.0/24 (cloud metadata
     * services live at .169.254) and any subnet an interface already has. */
    int x = 0, y = 0;
    for (int k = 0; k < 64 && !x; k++) {
        long v = (long)getpid() + k;
        int cx = 1 + (int)(v / 64 % 253), cy = (int)(v % 64) * 4;
        if (cx != 169 && !subnet_taken(cx, cy))
            x = cx, y = cy;
    }
    if (!x) {
        snprintf(why, cap, "no free link-local /30 found");
        ql_test_netns_close(ns);
        return -EADDRINUSE;
    }
    /* Interface names have at most 15 characters. */
    snprintf(ns->host_if, sizeof ns->host_if, "qlh%d", (int)(pid % 10000000));
    snprintf(ns->ns_if, sizeof ns->ns_if, "qln%d", (int)(pid % 10000000));
    snprintf(ns->host_addr, sizeof ns->host_addr, "169.254.%d.%d", x, y + 1);
    snprintf(ns->ns_addr, sizeof ns->ns_addr, "169.254.%d.%d", x, y + 2);
    if (run("ip link add %s type veth peer name %s netns %ld", ns->host_if, ns->ns_if, (long)pid) !=
        0) {
        snprintf(why, cap, "ip link add %s type veth failed", ns->host_if);
        ql_test_netns_close(ns);
        return -EPERM;
    }
    if (run("ip addr add %s/30 dev %s && ip link set %s up", ns->host_addr, ns->host_if,
            ns->host_if) != 0 ||
        run("nsenter --net=/proc/%ld/ns/net sh -c 'ip addr add %s/30 dev %s && ip link set %s up "
            "&& ip link set lo up'",
            (long)pid, ns->ns_addr, ns->ns_if, ns->ns_if) != 0) {
        snprintf(why, cap, "cannot configure the veth pair %s/%s", ns->host_if, ns->ns_if);
        ql_test_netns_close(ns);
        return -EIO;
    }
    return 0;
}

int ql_test_netns_link(ql_test_netns_t *ns, bool up) {
    return run("ip link set %s %s", ns->host_if, up ? "up" : "down") == 0 ? 0 : -1;
}

void ql_test_netns_close(ql_test_netns_t *ns) {
    if (ns->holder_fd >= 0)
        close(ns->holder_fd);
    ns->holder_fd = -1;
    if (ns->holder > 0) {
        kill(ns->holder, SIGKILL);
        waitpid(ns->holder, NULL, 0);
    }
    ns->holder = 0;
    /* Gone with the namespace once nothing runs in it; removed here in case a server is still
     * in it (the test's cleanup kills it later). */
    if (ns->host_if[0])
        run("ip link del %s 2> /dev/null", ns->host_if);
    ns->host_if[0] = '\0';
}
