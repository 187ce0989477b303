#include "storage/ql_error.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

static const struct {
    int code;
    const char *name;
    const char *client_code;
} ql_errors[] = {
    {QL_ENOTFOUND, "not found", "QL-00001"},
    {QL_EEXIST, "already exists", "QL-00002"},
    {QL_EINVAL, "invalid argument", "QL-00003"},
    {QL_ESEGOVERLAP,
     "Can't build segment. The specified data range overlaps with the built segments",
     "KE-010022202"},
    {QL_EJOBCONFLICT, "a building job for the same object already exists", "KE-010032206"},
    {QL_ETRANSITION, "illegal state transition", "QL-00006"},
    {QL_EACTION, "action not allowed in the job's state", "QL-00007"},
    {QL_EMAPFULL, "the store is full (map size limit reached)", "QL-00008"},
    {QL_EVERSION, "the store was written by a newer, incompatible version", "QL-00009"},
    {QL_ECORRUPT, "a record could not be decoded", "QL-00010"},
    {QL_EFENCED, "the lock this write depends on is no longer held", "QL-00011"},
    {QL_ELOCKED, "the job engine lock is held by another process", "QL-00012"},
    {QL_EFULLLOAD, "incremental builds are not supported on a full-load model", "QL-00013"},
    {QL_ENORANGE, "a build on a partitioned model needs start and end", "QL-00014"},
    {QL_EEMPTYRANGE, "the range is empty", "QL-00015"},
    {QL_EMERGE, "merge needs two or more contiguous READY or WARNING segments", "QL-00016"},
    {QL_EREFRESH, "refresh needs existing READY or WARNING segments", "QL-00017"},
    {QL_ESEGLOCKED, "the segment is being merged or refreshed", "QL-00018"},
    {QL_ESHUTDOWN, "shutting down", "QL-00019"},
    {QL_EMODE, "the server's mode does not serve this call", "QL-00020"},
    {QL_ETOOBIG, "too large", "QL-00021"},
    {QL_EAUTH, "authentication required", "QL-00022"},
    {QL_ETRANSIENT, "transient failure, try again", "QL-00023"},
    {QL_EDISKFULL, "the disk of the store is full (no space left on the file system)", "QL-00024"},
    {QL_EMAPSIZE,
     "the store outgrew this process's qilin.storage.map-size (another process sharing the "
     "data directory has a larger one): give every server the same map size and restart this "
     "one",
     "QL-00025"},
    {QL_EFORBIDDEN, "forbidden by the server's configuration", "QL-00026"},
};

const char *ql_strerror(int code) {
    if (code == 0)
        return "success";
    for (size_t i = 0; i < sizeof ql_errors / sizeof ql_errors[0]; i++)
        if (ql_errors[i].code == code)
            return ql_errors[i].name;
    if (code < 0 && code > -4096)
        return uv_strerror(code);
    return "unknown error";
}

const char *ql_error_code(int code) {
    for (size_t i = 0; i < sizeof ql_errors / sizeof ql_errors[0]; i++)
        if (ql_errors[i].code == code)
            return ql_errors[i].client_code;
    return "QL-00000";
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
