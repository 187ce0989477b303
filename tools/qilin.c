/* qilin: the command-line tool. A thin dispatcher over the commands in tools/cli.h. */
#include "cli.h"
#include "client_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out, "usage: qilin COMMAND [ARGS...]\n"
                 "\n"
                 "Talk to a Qilin server (see --help of each):\n"
                 "  project     create, list, configure and delete projects\n"
                 "  model       create, list, change and delete models\n"
                 "  segment     build, list, merge, refresh and delete segments\n"
                 "  job         list, show, act on and delete jobs; step logs\n"
                 "  auto-build  the automatic segment build status of a model\n"
                 "\n"
                 "Work on local files:\n"
                 "  sim         replay scenarios on a virtual clock (the simulation harness)\n"
                 "  fsck        check a store's invariants\n"
                 "  store       a PostgreSQL store's schema; compact an LMDB one\n"
                 "  cluster     reset-coordination: forget how a store's servers coordinate\n"
                 "  bench       run the benchmarks\n"
                 "  passwd      hash a password for qilin.server.users\n"
                 "\n"
                 "  --version   print the version\n"
                 "\n"
                 "The server commands' global options (--server, --user, --password, --config,\n"
                 "--json, --timezone) may also come before the command.\n");
}

/* How many arguments a global client option at arg takes up (1 or 2), or 0 when arg is not
 * one. --help is not hoisted: before the command it is qilin's own. */
static int global_option_len(const char *arg) {
    if (arg[0] != '-')
        return 0;
    for (const ql_cli_opt_t *o = ql_cli_global_opts; o->name; o++) {
        if (!strcmp(o->name, "help"))
            continue;
        if (arg[1] == '-') {
            const char *name = arg + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            if (strlen(o->name) == len && !strncmp(o->name, name, len))
                return o->metavar && !eq ? 2 : 1;
        } else if (o->short_name && arg[1] == o->short_name) {
            return o->metavar && !arg[2] ? 2 : 1;
        }
    }
    return 0;
}

static int dispatch(int argc, char **argv) {
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("qilin %s\n", QL_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "sim"))
        return ql_cmd_sim(argc - 1, argv + 1);
    if (!strcmp(cmd, "fsck"))
        return ql_cmd_fsck(argc - 1, argv + 1);
    if (!strcmp(cmd, "store"))
        return ql_cmd_store(argc - 1, argv + 1);
    if (!strcmp(cmd, "cluster"))
        return ql_cmd_cluster(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench"))
        return ql_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "passwd"))
        return ql_cmd_passwd(argc - 1, argv + 1);
    if (ql_cli_is_client_command(cmd))
        return ql_cmd_client(argc - 1, argv + 1);
    fprintf(stderr, "qilin: unknown command '%s' (see qilin --help)\n", cmd);
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* qilin --server URL job list: the global options before the command move after it, where
     * the command parses them like its own. */
    int lead = 1, n;
    while (lead < argc && (n = global_option_len(argv[lead])) > 0)
        lead += n;
    if (lead == 1)
        return dispatch(argc, argv);
    if (lead >= argc) {
        fprintf(stderr, "qilin: options but no command (see qilin --help)\n");
        return 2;
    }
    char **moved = malloc(((size_t)argc + 1) * sizeof *moved);
    if (!moved) {
        fprintf(stderr, "qilin: out of memory\n");
        return 1;
    }
    int k = 0;
    moved[k++] = argv[0];
    for (int i = lead; i < argc; i++)
        moved[k++] = argv[i];
    for (int i = 1; i < lead; i++)
        moved[k++] = argv[i];
    moved[k] = NULL;
    int rc = dispatch(argc, moved);
    free(moved);
    return rc;
}
