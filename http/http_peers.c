/*
 * Open connections per client address, for max_connections_per_address (http/http.c).
 *
 * An open-addressing table with linear probing, keyed by the 16-byte address key of
 * http/ql_addr_key.h (an IPv4 address as ::ffff:a.b.c.d, or the /64 of an IPv6 address). The probe
 * position is a keyed hash (SipHash, random key per table) so clients cannot choose
 * addresses that collide. Entries are deleted by shifting back the cluster behind them, so
 * there are no tombstones and a lookup stops at the first empty slot. Loop thread only.
 */
#include "http_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static size_t slot_of(const ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]) {
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, key, QL_HTTP_PEER_KEY, t->hash_key);
    uint64_t v;
    memcpy(&v, h, sizeof v);
    return (size_t)(v & (t->cap - 1));
}

int ql_http_peers_init(ql_http_peers_t *t) {
    memset(t, 0, sizeof *t);
    if (sodium_init() < 0)
        return UV_EIO;
    randombytes_buf(t->hash_key, sizeof t->hash_key);
    return 0;
}

void ql_http_peers_free(ql_http_peers_t *t) {
    free(t->slots);
    t->slots = NULL;
    t->cap = t->used = 0;
}

static ql_http_peer_t *find(const ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]) {
    if (!t->cap)
        return NULL;
    for (size_t i = slot_of(t, key);; i = (i + 1) & (t->cap - 1)) {
        ql_http_peer_t *e = &t->slots[i];
        if (!e->n)
            return NULL;
        if (memcmp(e->key, key, QL_HTTP_PEER_KEY) == 0)
            return e;
    }
}

static void insert(ql_http_peers_t *t, const ql_http_peer_t *p) {
    size_t i = slot_of(t, p->key);
    while (t->slots[i].n)
        i = (i + 1) & (t->cap - 1);
    t->slots[i] = *p;
}

static int grow(ql_http_peers_t *t) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    ql_http_peer_t *old = t->slots, *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return UV_ENOMEM;
    size_t old_cap = t->cap;
    t->slots = slots;
    t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].n)
            insert(t, &old[i]);
    free(old);
    return 0;
}

size_t ql_http_peers_count(const ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]) {
    const ql_http_peer_t *e = find(t, key);
    return e ? e->n : 0;
}

int ql_http_peers_add(ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]) {
    ql_http_peer_t *e = find(t, key);
    if (e) {
        e->n++;
        return 0;
    }
    /* At most half full, so probe runs stay short. */
    if (2 * (t->used + 1) > t->cap) {
        int rc = grow(t);
        if (rc)
            return rc;
    }
    ql_http_peer_t p = {.n = 1};
    memcpy(p.key, key, QL_HTTP_PEER_KEY);
    insert(t, &p);
    t->used++;
    return 0;
}

void ql_http_peers_remove(ql_http_peers_t *t, const unsigned char key[QL_HTTP_PEER_KEY]) {
    ql_http_peer_t *e = find(t, key);
    if (!e || --e->n > 0)
        return;
    /* Backward-shift deletion: move later members of the cluster into the hole when their
     * home slot is not between the hole and where they sit. */
    size_t mask = t->cap - 1, hole = (size_t)(e - t->slots);
    for (size_t j = (hole + 1) & mask; t->slots[j].n; j = (j + 1) & mask) {
        size_t home = slot_of(t, t->slots[j].key);
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    memset(&t->slots[hole], 0, sizeof t->slots[hole]);
    t->used--;
}
