/* The growth rule of base/include/base/ql_buf.h. */
#include "base/ql_buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

int ql_array_reserve(void *items_p, size_t *cap, size_t need, size_t elem_size, size_t first_cap) {
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : (first_cap ? first_cap : 1);
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return UV_ENOMEM;
        nc *= 2;
    }
    if (elem_size && nc > SIZE_MAX / elem_size)
        return UV_ENOMEM;
    void *items;
    memcpy(&items, items_p, sizeof items);
    void *p = realloc(items, nc * elem_size);
    if (!p)
        return UV_ENOMEM;
    memcpy(items_p, &p, sizeof p);
    *cap = nc;
    return 0;
}

int ql_strbuf_reserve(ql_strbuf_t *b, size_t n, size_t first_cap) {
    if (n > SIZE_MAX - 1 - b->len)
        return UV_ENOMEM;
    return ql_array_reserve(&b->p, &b->cap, b->len + n + 1, 1, first_cap);
}

int ql_strbuf_append_cap(ql_strbuf_t *b, const void *data, size_t n, size_t first_cap) {
    int rc = ql_strbuf_reserve(b, n, first_cap);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void ql_strbuf_free(ql_strbuf_t *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
