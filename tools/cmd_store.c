/*
 * qilin store init|upgrade --url URL [--schema NAME]: creates the schema of a PostgreSQL
 * metadata store, or brings an older one up to this build's (docs/postgresql.md). Servers do the
 * same when they open the store; this does it by hand, e.g. before the first server starts, with
 * a role allowed to create tables. Exit 0 done, 2 failed.
 */
#include "cli.h"
#include "storage/storage.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *out, int code) {
    fprintf(out, "usage: qilin store init|upgrade --url URL [--schema NAME]\n"
                 "       qilin store compact DATA_DIR [OUTPUT_DIR]\n\n"
                 "Creates the tables of a PostgreSQL metadata store in schema NAME (default "
                 "qilin),\nor upgrades them to this build's schema; a store of a newer schema is "
                 "refused.\nURL is a postgresql:// URL or a libpq conninfo string, as "
                 "qilin.storage.url.\n");
    return code;
}

int ql_cmd_store_compact(int argc, char **argv);

int ql_cmd_store(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "compact"))
        return ql_cmd_store_compact(argc - 1, argv + 1);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
    if (strcmp(argv[1], "init") != 0 && strcmp(argv[1], "upgrade") != 0)
        return usage(stderr, 2);
    const char *url = NULL, *schema = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--url") && i + 1 < argc)
            url = argv[++i];
        else if (!strncmp(argv[i], "--url=", 6))
            url = argv[i] + 6;
        else if (!strcmp(argv[i], "--schema") && i + 1 < argc)
            schema = argv[++i];
        else if (!strncmp(argv[i], "--schema=", 9))
            schema = argv[i] + 9;
        else
            return usage(stderr, 2);
    }
    if (!url || !url[0])
        return usage(stderr, 2);
    ql_store_opts_t o = {.path = ".", .url = url, .pg_schema = schema};
    ql_store_t *store;
    ql_err_t err = {0};
    if (ql_store_open(&o, &store, &err)) {
        fprintf(stderr, "qilin store %s: %s\n", argv[1], err.msg);
        return 2;
    }
    ql_txn_t *t;
    uint64_t major = 0, minor = 0;
    if (ql_txn_begin(store, false, &t) == 0) {
        ql_meta_get_u64(t, "schema_major", &major);
        ql_meta_get_u64(t, "schema_minor", &minor);
        ql_txn_abort(t);
    }
    ql_store_close(store);
    printf("the store in schema %s has schema %llu.%llu\n", schema && schema[0] ? schema : "qilin",
           (unsigned long long)major, (unsigned long long)minor);
    return 0;
}
