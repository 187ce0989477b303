/*
 * Writes the code table of docs/errors.md from base/ql_error_codes.def. Only the block between
 * the two marker lines is generated; the prose around it stays hand-written in the Markdown file,
 * so editing it needs no generator run. Rows are sorted by client code, so Kylin's KE- codes come
 * first, then the QL- codes in number order (QL-00000, the uncoded system errors, among them).
 */
#include "base/ql_error.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct doc_row {
    const char *client_code;
    const char *internal; /* the enum name, or a phrase for an uncoded row */
    bool quote_internal;  /* enum names are `code`, phrases are plain text */
    int status;           /* 0 when status_doc says it all */
    const char *status_doc;
    const char *meaning;
    const char *what_to_do;
} doc_row_t;

static const doc_row_t uncoded[] = {
#define QL_ERROR(...)
#define QL_ERROR_UNCODED(client_code, internal, status_doc, meaning, what_to_do)                   \
    {client_code, internal, false, 0, status_doc, meaning, what_to_do},
#include "base/ql_error_codes.def"
#undef QL_ERROR
};

static int by_client_code(const void *a, const void *b) {
    return strcmp(((const doc_row_t *)a)->client_code, ((const doc_row_t *)b)->client_code);
}

static void write_table(FILE *out, const doc_row_t *rows, size_t n) {
    fputs("\n| error_code | internal | HTTP status | meaning | what to do |\n"
          "| --- | --- | --- | --- | --- |\n",
          out);
    for (size_t i = 0; i < n; i++) {
        const doc_row_t *r = &rows[i];
        fprintf(out, "| `%s` | ", r->client_code);
        fprintf(out, r->quote_internal ? "`%s`" : "%s", r->internal);
        if (r->status_doc[0])
            fprintf(out, " | %s", r->status_doc);
        else
            fprintf(out, " | %d", r->status);
        fprintf(out, " | %s | %s |\n", r->meaning, r->what_to_do);
    }
    fputs("\n", out);
}

int ql_error_write_markdown(const char *doc, size_t len, FILE *out) {
    const char *end = doc + len;
    const char *b = memmem(doc, len, QL_ERROR_DOC_BEGIN, strlen(QL_ERROR_DOC_BEGIN));
    if (!b)
        return QL_EINVAL;
    const char *body = b + strlen(QL_ERROR_DOC_BEGIN);
    const char *e = memmem(body, (size_t)(end - body), QL_ERROR_DOC_END, strlen(QL_ERROR_DOC_END));
    if (!e)
        return QL_EINVAL;

    size_t ncoded, nun = sizeof uncoded / sizeof uncoded[0];
    const ql_error_info_t *t = ql_error_table(&ncoded);
    doc_row_t *rows = malloc((ncoded + nun) * sizeof *rows);
    if (!rows)
        return UV_ENOMEM;
    for (size_t i = 0; i < ncoded; i++)
        rows[i] = (doc_row_t){
            .client_code = t[i].client_code,
            .internal = t[i].name,
            .quote_internal = true,
            .status = t[i].http_status,
            .status_doc = t[i].status_doc,
            .meaning = t[i].meaning,
            .what_to_do = t[i].what_to_do,
        };
    memcpy(rows + ncoded, uncoded, sizeof uncoded);
    qsort(rows, ncoded + nun, sizeof *rows, by_client_code);

    fwrite(doc, 1, (size_t)(body - doc), out);
    write_table(out, rows, ncoded + nun);
    fwrite(e, 1, (size_t)(end - e), out);
    free(rows);
    return ferror(out) ? UV_EIO : 0;
}
