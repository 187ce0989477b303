/* Placeholder: this command is being written. */
#include "tools/cli.h"

#include <stdio.h>

int ql_cmd_bench(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "qilin %s: not available in this build yet\n", argv[0]);
    return 2;
}
