/*
 * qilin cluster reset-coordination DATA_DIR | --url URL [--schema NAME]: clears the store's
 * coordination record (server/node_guard.c) and the recorded ZooKeeper ensemble (ql_lock.h), so
 * the next job server records its own settings and adopts the ensemble it finds. For a
 * deliberate change of scheduler, lock kind or ensemble, run once every job server of the store
 * is stopped (docs/user-guide.md, Several servers). Exit 0 done, 2 failed.
 */
#include "cli.h"
#include "server/ql_node.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *out, int code) {
    fprintf(out, "usage: qilin cluster reset-coordination DATA_DIR\n"
                 "       qilin cluster reset-coordination --url URL [--schema NAME]\n\n"
                 "Forgets how the store's job servers coordinate (scheduler and job engine lock,\n"
                 "recorded by the first job server) and the ZooKeeper ensemble they use, so the\n"
                 "next job server records its own.\n"
                 "Run it only after stopping every job server of the store: servers configured\n"
                 "differently must never schedule on one store together.\n");
    return code;
}

int ql_cmd_cluster(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
    if (strcmp(argv[1], "reset-coordination") != 0)
        return usage(stderr, 2);
    ql_store_opts_t o = {0};
    if (argc == 3 && argv[2][0] != '-') {
        o.path = argv[2];
    } else if ((argc == 4 || argc == 6) && !strcmp(argv[2], "--url")) {
        o.path = ".";
        o.url = argv[3];
        if (argc == 6 && strcmp(argv[4], "--schema") != 0)
            return usage(stderr, 2);
        o.pg_schema = argc == 6 ? argv[5] : NULL;
    } else {
        return usage(stderr, 2);
    }
    ql_store_t *store;
    ql_err_t err = {0};
    if (ql_store_open(&o, &store, &err)) {
        fprintf(stderr, "qilin cluster: %s\n", err.msg);
        return 2;
    }
    char old[256], ensemble[64] = "";
    uint64_t epoch_was = 0;
    ql_txn_t *txn;
    int rc = ql_txn_begin(store, false, &txn);
    if (!rc) {
        rc = ql_meta_get_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, ensemble, sizeof ensemble);
        ql_txn_abort(txn);
        rc = rc == QL_ENOTFOUND ? 0 : rc;
    }
    if (rc)
        ql_err_set(&err, rc, "cannot read the recorded ZooKeeper ensemble: %s", ql_strerror(rc));
    else
        rc = ql_node_reset_coordination(store, old, sizeof old, &epoch_was, &err);
    ql_store_close(store);
    if (rc) {
        fprintf(stderr, "qilin cluster: %s\n", err.msg);
        return 2;
    }
    if (old[0])
        printf("forgot the coordination '%s'; the next job server records its own\n", old);
    if (ensemble[0])
        printf("forgot the ZooKeeper ensemble fence_id=%s; the next job server adopts the one it "
               "finds\n",
               ensemble);
    if (epoch_was)
        printf("reset the fencing epoch from %llu to 0 (and the live jobs' fences): the new "
               "ensemble's tokens start small\n",
               (unsigned long long)epoch_was);
    if (!old[0] && !ensemble[0])
        printf("no coordination was recorded; nothing changed\n");
    return 0;
}
