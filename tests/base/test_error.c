/*
 * The error table (base/ql_error_codes.def) and what is derived from it: every code has a
 * row with a status, a strerror and doc texts, and docs/errors.md's code table is the generated
 * one, as docs/configuration.md is for the option table.
 */
#include "base/ql_error.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    char *buf = NULL;
    size_t cap = 0;
    FILE *mem = open_memstream(&buf, &cap);
    cr_assert_not_null(mem);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(f);
    fclose(mem);
    *len = cap;
    return buf;
}

/* The text ql_error_write_markdown makes of doc; the caller frees it. */
static char *generate(const char *doc, size_t len, size_t *gen_len, int *rc) {
    char *gen = NULL;
    FILE *mem = open_memstream(&gen, gen_len);
    cr_assert_not_null(mem);
    *rc = ql_error_write_markdown(doc, len, mem);
    fclose(mem);
    return gen;
}

Test(error_table, docs_file_is_up_to_date) {
    size_t len, gen_len;
    int rc;
    char *doc = read_all(QL_SOURCE_DIR "/docs/errors.md", &len);
    char *gen = generate(doc, len, &gen_len, &rc);
    cr_assert_eq(rc, 0, "docs/errors.md has lost its marker lines around the code table");
    cr_assert(len == gen_len && memcmp(doc, gen, len) == 0,
              "docs/errors.md is stale: regenerate it with "
              "`build/tools/gen-error-doc docs/errors.md`");
    free(doc);
    free(gen);
}

static bool cell_ok(const char *s) {
    return s && *s && !strchr(s, '|') && !strchr(s, '\n');
}

Test(error_table, every_code_has_a_status_a_strerror_and_a_doc_row) {
    size_t len, n;
    char *doc = read_all(QL_SOURCE_DIR "/docs/errors.md", &len);
    const ql_error_info_t *t = ql_error_table(&n);
    cr_assert_eq(n, (size_t)(QL_ERR_FIRST - QL_ERR_LAST - 1));
    for (int code = QL_ERR_FIRST - 1; code > QL_ERR_LAST; code--) {
        const ql_error_info_t *e = ql_error_info(code);
        cr_assert_not_null(e, "code %d has no row", code);
        cr_assert_eq(e->code, code);
        cr_assert_eq(e, &t[QL_ERR_FIRST - 1 - code], "%s is out of value order", e->name);
        cr_assert(e->http_status >= 400 && e->http_status <= 599, "%s: status %d", e->name,
                  e->http_status);
        cr_assert(e->status_doc[0] == '\0' || !strchr("0123456789", e->status_doc[0]) ||
                      atoi(e->status_doc) == e->http_status,
                  "%s: the doc's status '%s' does not start with its status %d", e->name,
                  e->status_doc, e->http_status);
        cr_assert(cell_ok(e->strerror), "%s: no strerror", e->name);
        cr_assert_str_eq(ql_strerror(code), e->strerror);
        cr_assert(cell_ok(e->meaning) && cell_ok(e->what_to_do), "%s: doc texts", e->name);
        cr_assert_str_eq(ql_error_code(code), e->client_code);
        if (strncmp(e->client_code, "KE-", 3) != 0) {
            char want[16];
            snprintf(want, sizeof want, "QL-%05d", QL_ERR_FIRST - code);
            cr_assert_str_eq(e->client_code, want, "%s", e->name);
        }
        for (size_t j = 0; j < n; j++)
            cr_assert(&t[j] == e || strcmp(t[j].client_code, e->client_code) != 0,
                      "%s and %s share %s", t[j].name, e->name, e->client_code);
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` | `%s` | ", e->client_code, e->name);
        cr_assert_not_null(strstr(doc, row), "docs/errors.md has no row for %s", e->name);
    }
    /* Codes outside the band have no row and keep their old names. */
    cr_assert_null(ql_error_info(0));
    cr_assert_null(ql_error_info(QL_ERR_FIRST));
    cr_assert_null(ql_error_info(QL_ERR_LAST));
    cr_assert_null(ql_error_info(UV_ENOMEM));
    cr_assert_str_eq(ql_error_code(UV_ENOMEM), "QL-00000");
    cr_assert_str_eq(ql_error_code(QL_ERR_LAST), "QL-00000");
    cr_assert_str_eq(ql_strerror(0), "success");
    cr_assert_str_eq(ql_strerror(UV_ENOMEM), uv_strerror(UV_ENOMEM));
    cr_assert_str_eq(ql_strerror(QL_ERR_LAST), "unknown error");
    free(doc);
}

Test(error_table, markdown_keeps_the_prose_and_needs_both_markers) {
    const char *doc = "# Head\n\nprose\n\n" QL_ERROR_DOC_BEGIN "stale\n" QL_ERROR_DOC_END
                      "\n## Tail\nmore prose\n";
    size_t gen_len;
    int rc;
    char *gen = generate(doc, strlen(doc), &gen_len, &rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(strncmp(gen, "# Head\n\nprose\n\n" QL_ERROR_DOC_BEGIN "\n| error_code |",
                         strlen("# Head\n\nprose\n\n" QL_ERROR_DOC_BEGIN "\n| error_code |")),
                 0, "%s", gen);
    cr_assert_null(strstr(gen, "stale"));
    cr_assert_not_null(
        strstr(gen, "\n| `QL-00000` | a system error | 500 (or 503/507, see below) |"));
    const char *tail = "\n\n" QL_ERROR_DOC_END "\n## Tail\nmore prose\n";
    cr_assert(gen_len > strlen(tail) && strcmp(gen + gen_len - strlen(tail), tail) == 0, "%s", gen);
    /* KE- codes first, then QL- in number order. */
    const char *ke = strstr(gen, "| `KE-010032206` |"), *q0 = strstr(gen, "| `QL-00000` |"),
               *q1 = strstr(gen, "| `QL-00001` |"), *q26 = strstr(gen, "| `QL-00026` |");
    cr_assert(ke && q0 && q1 && q26 && ke < q0 && q0 < q1 && q1 < q26);
    free(gen);

    /* Without both markers, in order, nothing is written. */
    const char *bad[] = {
        "# Head\nno markers\n",
        "# Head\n" QL_ERROR_DOC_BEGIN "no end\n",
        "# Head\n" QL_ERROR_DOC_END "end first\n" QL_ERROR_DOC_BEGIN,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gen = generate(bad[i], strlen(bad[i]), &gen_len, &rc);
        cr_assert_eq(rc, QL_EINVAL, "case %zu", i);
        cr_assert_eq(gen_len, 0, "case %zu wrote '%s'", i, gen);
        free(gen);
    }
}

/* The hand-written "Statuses" section lists each code under its default status, so a reader who
 * starts from a status finds every code that answers it. */
Test(error_table, statuses_section_lists_every_code_under_its_status) {
    size_t len, n;
    char *doc = read_all(QL_SOURCE_DIR "/docs/errors.md", &len);
    const char *sec = strstr(doc, "\n## Statuses\n");
    cr_assert_not_null(sec, "docs/errors.md has no Statuses section");
    const ql_error_info_t *t = ql_error_table(&n);
    for (size_t i = 0; i < n; i++) {
        /* A code the API never answers (start-up only) has no status row. */
        if (t[i].status_doc[0] && !strchr("0123456789", t[i].status_doc[0]))
            continue;
        char head[16], cell[32];
        snprintf(head, sizeof head, "\n| %d | ", t[i].http_status);
        snprintf(cell, sizeof cell, "`%s`", t[i].client_code);
        const char *row = strstr(sec, head);
        cr_assert_not_null(row, "Statuses: no row for %d (%s)", t[i].http_status, t[i].name);
        const char *eol = strchr(row + 1, '\n');
        const char *hit = strstr(row, cell);
        cr_assert(hit && (!eol || hit < eol), "Statuses: the %d row does not list %s (%s)",
                  t[i].http_status, t[i].client_code, t[i].name);
    }
    free(doc);
}
