/*
 * Writes the configuration reference generated from the option table:
 *     gen-config-doc > docs/configuration.md      (or: gen-config-doc docs/configuration.md)
 * tests/config/test_config.c fails when the checked-in file differs from this output.
 */
#include "config/ql_config.h"

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: %s [OUTPUT.md]\n", argv[0]);
        return 2;
    }
    FILE *out = argc == 2 ? fopen(argv[1], "w") : stdout;
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    int rc = ql_config_write_markdown(out);
    if (fflush(out) != 0)
        rc = -1;
    if (argc == 2 && fclose(out) != 0)
        rc = -1;
    if (rc != 0) {
        fprintf(stderr, "%s: write failed\n", argv[0]);
        return 1;
    }
    return 0;
}
