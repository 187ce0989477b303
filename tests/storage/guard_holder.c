/*
 * guard_holder: a process that holds the store's write transaction, standing in for a server
 * caught inside a write (tests/storage/test_writer_guard.c, tests/scheduler/test_pause.c).
 *
 * Usage: guard_holder DIR HOLD_MS
 *
 * It opens the store at DIR (1 GiB map, like the test servers), begins a write transaction
 * through the storage write path (which takes the writer guard, then LMDB's write mutex),
 * writes meta "guard_holder" = "uncommitted", says HOLDING on stdout (write(2), so a test reads
 * it at once) and then either keeps the transaction open until it is killed (HOLD_MS < 0: the
 * test stops it with SIGSTOP) or, for HOLD_MS >= 0, works that long (a slow commit), commits,
 * says COMMITTED and exits 0.
 */
#include "storage/storage.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void say(const char *s) {
    if (write(STDOUT_FILENO, s, strlen(s)) < 0)
        exit(3);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: guard_holder DIR HOLD_MS\n");
        return 2;
    }
    long hold_ms = atol(argv[2]);
    ql_store_opts_t o = {.path = argv[1], .map_size = 1ull << 30};
    ql_store_t *store;
    ql_err_t err = {0};
    if (ql_store_open(&o, &store, &err)) {
        fprintf(stderr, "guard_holder: %s\n", err.msg);
        return 2;
    }
    ql_txn_t *t;
    if (ql_txn_begin(store, true, &t) || ql_meta_put_str(t, "guard_holder", "uncommitted")) {
        fprintf(stderr, "guard_holder: cannot write\n");
        return 2;
    }
    say("HOLDING\n");
    if (hold_ms < 0) {
        for (;;)
            pause(); /* until the test kills it (or the writer guard of another process does) */
    }
    /* Busy in small slices, as a slow commit would be: the process runs (state R or S). */
    struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    if (ql_meta_put_str(t, "guard_holder", "committed") || ql_txn_commit(t)) {
        fprintf(stderr, "guard_holder: cannot commit\n");
        return 2;
    }
    say("COMMITTED\n");
    ql_store_close(store);
    return 0;
}
