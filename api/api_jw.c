/*
 * A streaming JSON writer for answers built from records (lists, records): it appends straight
 * into the response buffer, with no tree of values and no per-field allocation. Answers built
 * this way cost a fraction of a jansson tree plus json_dumps, which dominated GET /jobs (see
 * docs/performance.md, REST API). Strings are escaped per RFC 8259; bytes that are not valid
 * UTF-8 (a step's message may carry any) become U+FFFD, so the output is always valid JSON.
 */
#include "api_int.h"
#include "base/ql_buf.h"

#include <stdlib.h>
#include <string.h>

#define JSON_TYPE "application/json;charset=utf-8"

/* Makes room for n more bytes and a NUL; false (and failed set) when out of memory. */
static bool grow(ql_api_sb_t *b, size_t n) {
    if (b->failed)
        return false;
    /* n is the length of bytes in memory, so len + n + 1 cannot overflow. */
    if (ql_array_reserve(&b->p, &b->cap, b->len + n + 1, 1, 8192)) {
        b->failed = true;
        return false;
    }
    return true;
}

/* The hot path of every answer: one bounds check and a memcpy. The buffer is NUL-terminated
 * only when the answer is complete. */
static inline void put(ql_api_jw_t *w, const char *s, size_t n) {
    ql_api_sb_t *b = &w->b;
    if (__builtin_expect(b->cap - b->len <= n, 0) && !grow(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static inline void putc_(ql_api_jw_t *w, char c) {
    ql_api_sb_t *b = &w->b;
    if (__builtin_expect(b->cap - b->len <= 1, 0) && !grow(b, 1))
        return;
    b->p[b->len++] = c;
}

/* Room for n more bytes: a pointer to write them at (the caller adds what it wrote to len),
 * or NULL when out of memory. */
static inline char *reserve(ql_api_jw_t *w, size_t n) {
    ql_api_sb_t *b = &w->b;
    if (__builtin_expect(b->cap - b->len <= n, 0) && !grow(b, n))
        return NULL;
    return b->p + b->len;
}

/* The separator before a value or key: none right after a key or at the start of a container. */
static inline void sep(ql_api_jw_t *w) {
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        uint64_t bit = 1ull << (w->depth - 1);
        if (w->nonempty & bit)
            putc_(w, ',');
        w->nonempty |= bit;
    }
}

void ql_api_jw_init(ql_api_jw_t *w) {
    memset(w, 0, sizeof *w);
}

void ql_api_jw_free(ql_api_jw_t *w) {
    ql_api_sb_free(&w->b);
    memset(w, 0, sizeof *w);
}

void ql_api_jw_open(ql_api_jw_t *w, char c) {
    sep(w);
    putc_(w, c);
    if (w->depth < 63) {
        w->depth++;
        w->nonempty &= ~(1ull << (w->depth - 1));
    } else {
        w->b.failed = true; /* deeper than any answer of ours: a bug */
    }
}

void ql_api_jw_close(ql_api_jw_t *w, char c) {
    putc_(w, c);
    if (w->depth > 0)
        w->depth--;
}

static const char hex[] = "0123456789abcdef";

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

/* The slow path of a string: escapes and UTF-8 checks, byte by byte. */
static void strn_escaped(ql_api_jw_t *w, const unsigned char *p, size_t n) {
    size_t run = 0; /* bytes copied as they are, flushed in one put */
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            run++;
            i++;
            continue;
        }
        size_t ul = c >= 0x80 ? utf8_len(p + i, n - i) : 0;
        if (ul) {
            run += ul;
            i += ul;
            continue;
        }
        put(w, (const char *)p + i - run, run);
        run = 0;
        char esc[8];
        size_t el = 2;
        esc[0] = '\\';
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            if (c < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                el = 6;
            } else {
                memcpy(esc, "\\ufffd", 6);
                el = 6;
            }
        }
        put(w, esc, el);
        i++;
    }
    put(w, (const char *)p + n - run, run);
}

void ql_api_jw_strn(ql_api_jw_t *w, const char *s, size_t n) {
    sep(w);
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && p[i] >= 0x20 && p[i] < 0x80 && p[i] != '"' && p[i] != '\\')
        i++;
    if (i == n) {
        /* Plain ASCII, the usual case: one copy between the quotes. */
        char *d = reserve(w, n + 2);
        if (!d)
            return;
        d[0] = '"';
        memcpy(d + 1, s, n);
        d[n + 1] = '"';
        w->b.len += n + 2;
        return;
    }
    putc_(w, '"');
    strn_escaped(w, p, n);
    putc_(w, '"');
}

void ql_api_jw_str(ql_api_jw_t *w, const char *s) {
    if (!s) {
        ql_api_jw_null(w);
        return;
    }
    ql_api_jw_strn(w, s, strlen(s));
}

void ql_api_jw_keyn(ql_api_jw_t *w, const char *key, size_t n) {
    /* Keys are our own constants: plain ASCII without characters to escape. */
    sep(w);
    char *d = reserve(w, n + 3);
    if (d) {
        d[0] = '"';
        memcpy(d + 1, key, n);
        d[n + 1] = '"';
        d[n + 2] = ':';
        w->b.len += n + 3;
    }
    w->after_key = true;
}

void ql_api_jw_key(ql_api_jw_t *w, const char *key) {
    ql_api_jw_keyn(w, key, strlen(key));
}

void ql_api_jw_key_text(ql_api_jw_t *w, const char *key) {
    ql_api_jw_str(w, key);
    put(w, ":", 1);
    w->after_key = true;
}

void ql_api_jw_int(ql_api_jw_t *w, int64_t v) {
    sep(w);
    /* Two digits per division: epoch milliseconds have 13 of them. */
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233"
        "34353637383940414243444546474849505152535455565758596061626364656667"
        "6869707172737475767778798081828384858687888990919293949596979899";
    char buf[24];
    size_t i = sizeof buf;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        buf[--i] = pairs[d + 1];
        buf[--i] = pairs[d];
    }
    if (u >= 10) {
        buf[--i] = pairs[u * 2 + 1];
        buf[--i] = pairs[u * 2];
    } else {
        buf[--i] = (char)('0' + u);
    }
    if (v < 0)
        buf[--i] = '-';
    char *d = reserve(w, sizeof buf - i);
    if (d) {
        memcpy(d, buf + i, sizeof buf - i);
        w->b.len += sizeof buf - i;
    }
}

void ql_api_jw_bool(ql_api_jw_t *w, bool v) {
    sep(w);
    if (v)
        put(w, "true", 4);
    else
        put(w, "false", 5);
}

void ql_api_jw_null(ql_api_jw_t *w) {
    sep(w);
    put(w, "null", 4);
}

void ql_api_jw_id(ql_api_jw_t *w, const ql_id_t *id) {
    if (ql_id_is_zero(id)) {
        ql_api_jw_strn(w, "", 0);
        return;
    }
    sep(w);
    /* The id is formatted in place: a quote, 36 characters (and ql_id_format's NUL, which the
     * closing quote overwrites). */
    char *d = reserve(w, QL_ID_STR_LEN + 3);
    if (!d)
        return;
    d[0] = '"';
    ql_id_format(id, d + 1);
    d[QL_ID_STR_LEN + 1] = '"';
    w->b.len += QL_ID_STR_LEN + 2;
}

void ql_api_jw_raw(ql_api_jw_t *w, const char *json, size_t n) {
    sep(w);
    put(w, json, n);
}

void ql_api_jw_envelope(ql_api_jw_t *w) {
    ql_api_jw_init(w);
    ql_api_jw_open(w, '{');
    ql_api_jw_key(w, "code");
    ql_api_jw_strn(w, "000", 3);
    ql_api_jw_key(w, "data");
}

void ql_api_jw_respond(ql_http_req_t *req, ql_api_jw_t *w, const char *msg) {
    ql_api_jw_key(w, "msg");
    ql_api_jw_str(w, msg ? msg : "");
    ql_api_jw_close(w, '}');
    putc_(w, '\0'); /* room for the terminator, then not counted */
    w->b.len--;
    if (w->b.failed || w->depth != 0)
        ql_http_respond_error(req, 500, UV_ENOMEM, "cannot build the answer");
    else
        ql_http_respond(req, 200, JSON_TYPE, w->b.p, w->b.len);
    ql_api_jw_free(w);
}

void ql_api_jw_page_open(ql_api_jw_t *w) {
    ql_api_jw_open(w, '{');
    ql_api_jw_key(w, "value");
    ql_api_jw_open(w, '[');
}

void ql_api_jw_page_start(ql_api_jw_t *w) {
    ql_api_jw_envelope(w);
    ql_api_jw_page_open(w);
}

void ql_api_jw_page_close(ql_api_jw_t *w, const ql_api_page_t *p, uint64_t total) {
    ql_api_jw_close(w, ']');
    ql_api_jw_key(w, "offset");
    ql_api_jw_int(w, (int64_t)p->offset);
    ql_api_jw_key(w, "limit");
    ql_api_jw_int(w, (int64_t)p->limit);
    ql_api_jw_key(w, "total_size");
    ql_api_jw_int(w, (int64_t)total);
    ql_api_jw_close(w, '}');
}
