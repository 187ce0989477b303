/*
 * qilin store compact DATA_DIR [OUTPUT_DIR]: writes a compacted copy of an LMDB store. LMDB reuses
 * the pages of deleted records but never gives them back to the file system, so after a large
 * deletion (retention catching up, a dropped project) data.mdb keeps its size; the copy leaves the
 * free pages out. The copy is one read transaction (consistent even beside a running server); it
 * replaces the store only by hand, with every server of the directory stopped (docs/user-guide.md,
 * Deleting old jobs). Exit 0 done, 2 failed.
 */
#include "cli.h"
#include "storage/storage.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int ql_cmd_store_compact(int argc, char **argv);

static void human(uint64_t b, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static uint64_t file_size(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int ql_cmd_store_compact(int argc, char **argv) {
    if (argc < 2 || argc > 3 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        bool help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
        fprintf(
            help ? stdout : stderr,
            "usage: qilin store compact DATA_DIR [OUTPUT_DIR]\n\n"
            "Writes a compacted copy of the LMDB store in DATA_DIR to OUTPUT_DIR/data.mdb\n"
            "(default DATA_DIR/compact, created; it must not hold a data.mdb yet) and says how\n"
            "much it saved. The copy is consistent even while servers run. To use it, stop\n"
            "every server of DATA_DIR, move OUTPUT_DIR/data.mdb over DATA_DIR/data.mdb, and\n"
            "start them again.\n");
        return help ? 0 : 2;
    }
    const char *data = argv[1];
    char out[4096];
    if (argc == 3)
        snprintf(out, sizeof out, "%s", argv[2]);
    else
        snprintf(out, sizeof out, "%s/compact", data);
    if (mkdir(out, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "qilin store compact: cannot create %s: %s\n", out, strerror(errno));
        return 2;
    }
    if (file_size(out) > 0) {
        fprintf(stderr,
                "qilin store compact: %s/data.mdb exists: remove it or name another "
                "folder\n",
                out);
        return 2;
    }
    ql_store_opts_t o = {.path = data, .read_only = true};
    ql_store_t *store;
    ql_err_t err = {0};
    if (ql_store_open(&o, &store, &err)) {
        fprintf(stderr, "qilin store compact: %s\n", err.msg);
        return 2;
    }
    ql_store_stat_t st = {0};
    ql_store_stat(store, &st);
    int rc = ql_store_compact(store, out);
    ql_store_close(store);
    if (rc) {
        fprintf(stderr, "qilin store compact: cannot write the copy to %s: %s\n", out,
                ql_strerror(rc));
        return 2;
    }
    uint64_t before = st.file_bytes, after = file_size(out);
    uint64_t saved = before > after ? before - after : 0;
    char b[32], a[32], s[32];
    human(before, b, sizeof b);
    human(after, a, sizeof a);
    human(saved, s, sizeof s);
    printf("compacted %s/data.mdb (%s) into %s/data.mdb (%s): saved %s (%.0f%%)\n"
           "to use it: stop every server of %s, move %s/data.mdb over %s/data.mdb, start them\n",
           data, b, out, a, s, before ? 100.0 * (double)saved / (double)before : 0.0, data, out,
           data);
    return 0;
}
