/* qilin: the command-line tool. A thin dispatcher over the commands in tools/cli.h. */
#include "tools/cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out, "usage: qilin COMMAND [ARGS...]\n"
                 "\n"
                 "Talk to a Qilin server (see --help of each):\n"
                 "  project     create, list and configure projects\n"
                 "  model       create, list and configure models\n"
                 "  segment     build, list, merge, refresh and delete segments\n"
                 "  job         list, show, pause, resume, discard, restart jobs; step logs\n"
                 "  auto-build  the automatic segment build status of a model\n"
                 "\n"
                 "Work on local files:\n"
                 "  sim         replay scenarios on a virtual clock (the simulation harness)\n"
                 "  fsck        check a store's invariants\n"
                 "  bench       run the benchmarks\n"
                 "  passwd      hash a password for qilin.server.users\n"
                 "\n"
                 "  --version   print the version\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
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
    if (!strcmp(cmd, "bench"))
        return ql_cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "passwd"))
        return ql_cmd_passwd(argc - 1, argv + 1);
    if (ql_cli_is_client_command(cmd))
        return ql_cmd_client(argc - 1, argv + 1);
    fprintf(stderr, "qilin: unknown command '%s' (see qilin --help)\n", cmd);
    return 2;
}
