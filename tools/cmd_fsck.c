/* qilin fsck DATA_DIR | --url URL [--schema NAME]: checks a store's invariants (LMDB in a data
 * directory, or PostgreSQL); exit 0 clean, 1 violations, 2 unusable. */
#include "cli.h"
#include "storage/storage.h"

#include <stdio.h>
#include <string.h>

int ql_cmd_fsck(int argc, char **argv) {
    ql_store_opts_t o = {.path = argc == 2 ? argv[1] : NULL, .read_only = true};
    if (argc >= 3 && !strcmp(argv[1], "--url")) {
        o.path = ".";
        o.url = argv[2];
        if (argc == 5 && !strcmp(argv[3], "--schema"))
            o.pg_schema = argv[4];
        else if (argc != 3)
            o.path = NULL;
    }
    if (!o.path || !strcmp(o.path, "--help") || !strcmp(o.path, "-h")) {
        FILE *out = argc == 2 ? stdout : stderr;
        fprintf(
            out,
            "usage: qilin fsck DATA_DIR\n       qilin fsck --url URL [--schema NAME]\n\n"
            "Checks the store in DATA_DIR (read-only; a running server may keep using "
            "it):\nlegal job and step states, no overlapping segments except a live "
            "refresh's or merge's\nNEW segment over its sources, orphan NEW segments "
            "(reported as warnings), and that\nevery index entry and counter matches "
            "the records.\nWith --url, the PostgreSQL store of qilin.storage.url "
            "(schema NAME, default qilin):\nthe same rules, and that the indexed "
            "columns equal the records.\n\nExit status: 0 no violation, 1 violations found, 2 the "
            "store cannot be read.\n");
        return argc == 2 ? 0 : 2;
    }
    ql_store_t *store;
    ql_err_t err = {0};
    if (ql_store_open(&o, &store, &err)) {
        fprintf(stderr, "qilin fsck: %s\n", err.msg);
        return 2;
    }
    ql_fsck_report_t r = {0};
    int rc = ql_store_fsck(store, stdout, &r);
    ql_store_close(store);
    if (rc) {
        fprintf(stderr, "qilin fsck: the check could not run: %s\n", ql_strerror(rc));
        return 2;
    }
    printf("checked %llu projects, %llu models, %llu segments, %llu jobs, %llu steps: "
           "%llu violations, %llu warnings\n",
           (unsigned long long)r.projects, (unsigned long long)r.models,
           (unsigned long long)r.segments, (unsigned long long)r.jobs, (unsigned long long)r.steps,
           (unsigned long long)r.violations, (unsigned long long)r.warnings);
    return r.violations ? 1 : 0;
}
