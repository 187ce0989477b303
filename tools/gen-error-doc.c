/*
 * Regenerates the code table of docs/errors.md from base/ql_error_codes.def:
 *     gen-error-doc docs/errors.md        (rewrites the file in place)
 *     gen-error-doc < docs/errors.md      (writes the result to stdout)
 * Only the block between the marker comments is generated; the prose around it is kept.
 * tests/base/test_error.c fails when the checked-in file differs from this output.
 */
#include "base/ql_error.h"

#include <stdio.h>
#include <stdlib.h>

static char *read_all(FILE *in, size_t *len) {
    char *buf = NULL;
    size_t cap = 0;
    FILE *mem = open_memstream(&buf, &cap);
    if (!mem)
        return NULL;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, in)) > 0)
        fwrite(chunk, 1, n, mem);
    int bad = ferror(in) || ferror(mem);
    if (fclose(mem) != 0 || bad) {
        free(buf);
        return NULL;
    }
    *len = cap;
    return buf;
}

int main(int argc, char **argv) {
    if (argc > 2) {
        fprintf(stderr, "usage: %s [docs/errors.md]\n", argv[0]);
        return 2;
    }
    const char *path = argc == 2 ? argv[1] : "<stdin>";
    FILE *in = argc == 2 ? fopen(path, "rb") : stdin;
    if (!in) {
        perror(path);
        return 1;
    }
    size_t len = 0;
    char *doc = read_all(in, &len);
    if (argc == 2)
        fclose(in);
    if (!doc) {
        fprintf(stderr, "%s: cannot read %s\n", argv[0], path);
        return 1;
    }

    /* Build the whole text first, so a missing marker leaves the file as it was. */
    char *gen = NULL;
    size_t gen_len = 0;
    FILE *mem = open_memstream(&gen, &gen_len);
    int rc = mem ? ql_error_write_markdown(doc, len, mem) : UV_ENOMEM;
    if (mem && fclose(mem) != 0 && rc == 0)
        rc = UV_EIO;
    free(doc);
    if (rc == QL_EINVAL) {
        fprintf(stderr,
                "%s: %s: the marker lines '<!-- BEGIN generated ... -->' and "
                "'<!-- END generated -->' are missing or out of order\n",
                argv[0], path);
        free(gen);
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], ql_strerror(rc));
        free(gen);
        return 1;
    }

    FILE *out = argc == 2 ? fopen(path, "wb") : stdout;
    if (!out) {
        perror(path);
        free(gen);
        return 1;
    }
    fwrite(gen, 1, gen_len, out);
    int bad = fflush(out) != 0 || ferror(out);
    if (argc == 2 && fclose(out) != 0)
        bad = 1;
    free(gen);
    if (bad) {
        fprintf(stderr, "%s: writing %s failed\n", argv[0], argc == 2 ? path : "<stdout>");
        return 1;
    }
    return 0;
}
