/*
 * Errors shared by every Qilin library.
 *
 * Functions return 0 on success or a negative code: libuv's UV_E* (negative errno) for system
 * errors, or one of the QL_E* codes below for Qilin's own. LMDB's codes never leave storage/:
 * they are translated there. ql_strerror() names any of them.
 *
 * Client-facing failures also carry a ql_err_t: the code, the Kylin-style error code shown to
 * REST clients (KE-... where Kylin has one, QL-NNNNN otherwise; see docs/errors.md) and a message
 * that names the field or object and the reason.
 */
#ifndef QL_ERROR_H
#define QL_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <uv.h> /* UV_E* codes for system errors */

enum {
    QL_ERR_FIRST = -20000,
    QL_ENOTFOUND = -20001,    /* project, model, segment, job or step does not exist */
    QL_EEXIST = -20002,       /* duplicate name or id */
    QL_EINVAL = -20003,       /* invalid input: the message names the field and reason */
    QL_ESEGOVERLAP = -20004,  /* KE-010022202: new segment overlaps built segments */
    QL_EJOBCONFLICT = -20005, /* KE-010032206: a building job for the same object exists */
    QL_ETRANSITION = -20006,  /* illegal state transition */
    QL_EACTION = -20007,      /* job action not allowed in the job's current state */
    QL_EMAPFULL = -20008,     /* the store's map size limit is reached */
    QL_EVERSION = -20009,     /* the store was written by a newer, incompatible version */
    QL_ECORRUPT = -20010,     /* a record could not be decoded */
    QL_EFENCED = -20011,      /* a write made under a lock that is no longer held */
    QL_ELOCKED = -20012,      /* the job engine lock is held by another process */
    QL_EFULLLOAD = -20013,    /* an incremental build on a full-load model */
    QL_ENORANGE = -20014,     /* a build on a partitioned model without start and end */
    QL_EEMPTYRANGE = -20015,  /* the range is empty (after normalization) */
    QL_EMERGE = -20016,       /* merge needs two or more contiguous READY/WARNING segments */
    QL_EREFRESH = -20017,     /* refresh targets must be existing READY/WARNING segments */
    QL_ESEGLOCKED = -20018,   /* a segment is being merged or refreshed by a live job */
    QL_ESHUTDOWN = -20019,    /* the component is stopping and takes no new work */
    QL_EMODE = -20020,        /* the server's mode does not serve this call */
    QL_ETOOBIG = -20021,      /* a request or value exceeds its size limit */
    QL_EAUTH = -20022,        /* missing or wrong credentials */
    QL_ETRANSIENT = -20023,   /* a transient failure: retry later */
    QL_EDISKFULL = -20024,    /* the file system of the store has no space left */
    QL_EMAPSIZE = -20025,     /* another process grew the store past this process's map size */
    QL_EFORBIDDEN = -20026,   /* the caller may not do this here (a server setting forbids it) */
    QL_ERR_LAST = -20027,
};

/* Returns a static, human-readable name for any Qilin, libuv or errno code. Thread-safe. */
const char *ql_strerror(int code);

/* The client-facing error code for a QL_E* code: "KE-010022202", "QL-00003", ... (static). */
const char *ql_error_code(int code);

typedef struct ql_err {
    int code;      /* a negative code, 0 when no error was recorded */
    char msg[512]; /* what failed and why, naming the field or object */
} ql_err_t;

/*
 * Records code and a printf-style message in err (which may be NULL) and returns code, so
 * callers can write `return ql_err_set(err, QL_EINVAL, "field 'name': ...")`.
 */
int ql_err_set(ql_err_t *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ql_err_vset(ql_err_t *err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
void ql_err_clear(ql_err_t *err);

#endif
