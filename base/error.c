#include "base/ql_error.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

/* The rows of base/ql_error_codes.def, in value order. */
static const ql_error_info_t ql_errors[] = {
#define QL_ERROR(name, value, client_code, status, status_doc, text, meaning, what_to_do)          \
    {name, #name, client_code, status, status_doc, text, meaning, what_to_do},
#include "base/ql_error_codes.def"
#undef QL_ERROR
};

/* ql_error_info() indexes the table by value: a gap or a stale QL_ERR_LAST would misindex it. */
_Static_assert(sizeof ql_errors / sizeof ql_errors[0] == QL_ERR_FIRST - QL_ERR_LAST - 1,
               "ql_error_codes.def: values must run from QL_ERR_FIRST - 1 to QL_ERR_LAST + 1");

const ql_error_info_t *ql_error_table(size_t *n) {
    *n = sizeof ql_errors / sizeof ql_errors[0];
    return ql_errors;
}

/* The values are contiguous (ql_error_codes.def), so a code indexes its row. */
const ql_error_info_t *ql_error_info(int code) {
    if (code >= QL_ERR_FIRST || code <= QL_ERR_LAST)
        return NULL;
    const ql_error_info_t *e = &ql_errors[QL_ERR_FIRST - 1 - code];
    return e->code == code ? e : NULL;
}

const char *ql_strerror(int code) {
    if (code == 0)
        return "success";
    const ql_error_info_t *e = ql_error_info(code);
    if (e)
        return e->strerror;
    if (code < 0 && code > -4096)
        return uv_strerror(code);
    return "unknown error";
}

const char *ql_error_code(int code) {
    const ql_error_info_t *e = ql_error_info(code);
    return e ? e->client_code : "QL-00000";
}

int ql_err_vset(ql_err_t *err, int code, const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int ql_err_set(ql_err_t *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ql_err_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void ql_err_clear(ql_err_t *err) {
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
