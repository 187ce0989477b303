/*
 * slow_exit LOCKFILE MIB READYFILE [thread]: a process that takes long to die. It holds an
 * exclusive flock on LOCKFILE and MIB MiB of memory it has touched (small pages), writes
 * READYFILE, and waits to be killed. With "thread", a second thread waits and the first one
 * calls pthread_exit() once READYFILE is written: /proc then shows the process as a zombie
 * without an environment while it runs on, which the sweep and the group check must see through.
 * When it is killed, the kernel frees that memory first (from then on its /proc environment reads
 * empty and PF_EXITING is set) and closes its files, and so releases the lock, only after that: the
 * tests of the sweep and of the group check (tests/engine/test_proc_sweep.c,
 * tests/base/test_procinfo.c) use the gap to show that a process counts as gone only once it is a
 * zombie, and those of the scheduler's sweeps (tests/scheduler/test_step_host.c,
 * tests/scheduler/test_shutdown.c) to reach what a wait that runs out does.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

static void *wait_forever(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv) {
    bool thread = argc == 5 && strcmp(argv[4], "thread") == 0;
    if (argc != 4 && !thread) {
        fprintf(stderr, "usage: slow_exit LOCKFILE MIB READYFILE [thread]\n");
        return 2;
    }
    alarm(120); /* should the test that started it fail before killing it */
    int fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        perror("slow_exit: lock");
        return 1;
    }
    size_t len = (size_t)atol(argv[2]) << 20;
    char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("slow_exit: mmap");
        return 1;
    }
    /* Small pages: freeing them one by one is what makes the exit slow. */
    madvise(mem, len, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < len; i += 4096)
        mem[i] = 1;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[3])) {
        perror("slow_exit: ready file");
        return 1;
    }
    pthread_t other;
    if (thread) {
        if (pthread_create(&other, NULL, wait_forever, NULL) != 0) {
            perror("slow_exit: thread");
            return 1;
        }
        pthread_exit(NULL);
    }
    for (;;)
        pause();
}
