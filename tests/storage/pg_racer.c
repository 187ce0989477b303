/*
 * pg_racer: one of the two processes of the PostgreSQL race test (tests/storage/test_pg_race.c),
 * standing in for a server on another host that submits builds to the shared store.
 *
 * Usage: pg_racer DIR CONNINFO SCHEMA MODEL_ID
 *
 * It opens the PostgreSQL store (DIR is its local data directory), then for each line "N" read
 * on stdin submits an incremental build of [N * 1000, N * 1000 + 1000) on the model, in one write
 * transaction, and answers "N RC" on stdout (write(2), so the test reads it at once): RC is 0
 * when its build was committed, else the (negative) code that refused it. It exits 0 at the end
 * of stdin, 2 when the store cannot be opened.
 */
#include "storage/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int submit(ql_store_t *store, const ql_id_t *model, long long n) {
    static const ql_step_spec_t steps[1] = {{.name = "build", .kind = "noop"}};
    ql_job_spec_t sp = {
        .priority = 3, .submitter = "ADMIN", .now = 5, .steps = steps, .n_steps = 1};
    ql_txn_t *t;
    int rc = ql_txn_begin(store, true, &t);
    if (rc)
        return rc;
    ql_err_t err = {0};
    ql_id_t job, seg;
    rc = ql_meta_submit_build(t, model, n * 1000, n * 1000 + 1000, &sp, &job, &seg, &err);
    if (rc) {
        ql_txn_abort(t);
        return rc;
    }
    return ql_txn_commit(t);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: pg_racer DIR CONNINFO SCHEMA MODEL_ID\n");
        return 2;
    }
    ql_id_t model;
    if (ql_id_parse(argv[4], &model)) {
        fprintf(stderr, "pg_racer: %s is not an id\n", argv[4]);
        return 2;
    }
    ql_store_opts_t o = {.path = argv[1], .url = argv[2], .pg_schema = argv[3]};
    ql_store_t *store;
    ql_err_t err = {0};
    if (ql_store_open(&o, &store, &err)) {
        fprintf(stderr, "pg_racer: %s\n", err.msg);
        return 2;
    }
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        long long n = atoll(line);
        char answer[64];
        int len = snprintf(answer, sizeof answer, "%lld %d\n", n, submit(store, &model, n));
        if (write(STDOUT_FILENO, answer, (size_t)len) != len)
            break;
    }
    ql_store_close(store);
    return 0;
}
