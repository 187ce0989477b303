/* Binary statement parameters of the PostgreSQL store, the URL as it may be logged, and the
 * server's SQLSTATEs as Qilin's codes (docs/postgresql.md, Errors). */
#include "store_pg_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters ---- */

static void put_be(char *dst, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) {
        dst[i] = (char)(v & 0xff);
        v >>= 8;
    }
}

static void p_add(pg_params_t *p, const char *v, int len) {
    p->v[p->n] = v;
    p->len[p->n] = len;
    p->fmt[p->n] = 1;
    p->n++;
}

void pg_put_be32(uint8_t *d, uint32_t v) {
    d[0] = (uint8_t)(v >> 24);
    d[1] = (uint8_t)(v >> 16);
    d[2] = (uint8_t)(v >> 8);
    d[3] = (uint8_t)v;
}

/* ndim 1, no NULLs, the element type, then the one dimension: its length and lower bound 1. */
uint8_t *pg_array_head(uint8_t *d, uint32_t oid, size_t n) {
    pg_put_be32(d, 1);
    pg_put_be32(d + 4, 0);
    pg_put_be32(d + 8, oid);
    pg_put_be32(d + 12, (uint32_t)n);
    pg_put_be32(d + 16, 1);
    return d + PG_ARRAY_HEAD;
}

void pg_p_uuid(pg_params_t *p, const ql_id_t *id) {
    p_add(p, id && !ql_id_is_zero(id) ? (const char *)id->b : NULL, 16);
}

void pg_p_i64(pg_params_t *p, int64_t v) {
    put_be(p->scratch[p->n], (uint64_t)v, 8);
    p_add(p, p->scratch[p->n], 8);
}

void pg_p_i32(pg_params_t *p, int32_t v) {
    put_be(p->scratch[p->n], (uint32_t)v, 4);
    p_add(p, p->scratch[p->n], 4);
}

void pg_p_i16(pg_params_t *p, int16_t v) {
    put_be(p->scratch[p->n], (uint16_t)v, 2);
    p_add(p, p->scratch[p->n], 2);
}

void pg_p_bool(pg_params_t *p, bool v) {
    p->scratch[p->n][0] = v ? 1 : 0;
    p_add(p, p->scratch[p->n], 1);
}

void pg_p_text(pg_params_t *p, const char *s) {
    p_add(p, s, s ? (int)strlen(s) : 0);
}

void pg_p_bytes(pg_params_t *p, const void *data, size_t len) {
    /* A zero-length bytea must not be NULL. */
    p_add(p, len ? (const char *)data : "", (int)len);
}

/* The conninfo or URL with the password's value replaced by "***". */
char *pg_mask_password(const char *url) {
    size_t n = strlen(url);
    char *out = malloc(n + 8);
    if (!out)
        return NULL;
    const char *p = url;
    char *o = out;
    const char *scheme = strstr(url, "://");
    if (scheme && (!strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11))) {
        const char *auth = scheme + 3;
        const char *at = strchr(auth, '@'), *slash = strchr(auth, '/');
        const char *colon = strchr(auth, ':');
        if (at && (!slash || at < slash) && colon && colon < at) {
            memcpy(o, url, (size_t)(colon + 1 - url));
            o += colon + 1 - url;
            memcpy(o, "***", 3);
            o += 3;
            p = at;
        }
    }
    while (*p) {
        if (!strncmp(p, "password=", 9)) {
            memcpy(o, "password=***", 12);
            o += 12;
            p += 9;
            char end = *p == '\'' ? '\'' : 0;
            if (end)
                p++;
            while (*p && (end ? *p != end : (*p != ' ' && *p != '&')))
                p += *p == '\\' && p[1] ? 2 : 1;
            if (end && *p)
                p++;
            continue;
        }
        *o++ = *p++;
    }
    *o = '\0';
    return out;
}

/* ---- errors ---- */

int pg_sqlstate_err(const char *st) {
    if (!st)
        return QL_EUNAVAILABLE; /* no server answer: the connection is gone */
    if (!strcmp(st, "23505"))
        return QL_EEXIST;
    if (!strcmp(st, "23P01"))
        return QL_EJOBCONFLICT;
    if (!strcmp(st, "23503"))
        return QL_ENOTFOUND;
    if (!strcmp(st, "53100"))
        return QL_EDISKFULL;
    if (!strcmp(st, "40001") || !strcmp(st, "40P01") || !strcmp(st, "55P03"))
        return QL_ETRANSIENT;
    if (!strncmp(st, "08", 2) || !strcmp(st, "57P01") || !strcmp(st, "57P02") ||
        !strcmp(st, "57P03") || !strcmp(st, "25006"))
        return QL_EUNAVAILABLE;
    if (!strncmp(st, "22", 2) || !strcmp(st, "23514"))
        return QL_EINVAL; /* data exception, check violation: the caller's bad value */
    if (!strncmp(st, "53", 2))
        return UV_ENOMEM; /* e.g. 53200: the lock table is full (max_locks_per_transaction) */
    /* Anything else is the server's error, not a record that failed to decode: QL_ECORRUPT
     * stays the codec's (docs/postgresql.md, Errors). */
    return UV_EIO;
}
