/* The cycle cache: a chained hash table over a fixed pool of entries with an LRU list. */
#include "dispatch_cache.h"

#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

typedef struct entry {
    ql_cycle_key_t key;
    ql_cycle_state_t state;
    uint32_t n_related;
    ql_id_t covering; /* the first segment of the covering set */
    int64_t used;
    uint32_t hnext;      /* bucket chain */
    uint32_t prev, next; /* LRU list: head most recent */
    bool live;
} entry_t;

struct ql_cycle_cache {
    entry_t *e;
    uint32_t *buckets;
    size_t cap, n_buckets, size;
    uint32_t head, tail, free_top;
    int64_t ttl;
};

static size_t hash_key(const ql_cycle_key_t *k, size_t n) {
    uint64_t h;
    memcpy(&h, k->model.b, 8);
    h ^= (uint64_t)k->occurrence * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t)k->start * 0xc2b2ae3d27d4eb4full;
    h ^= (uint64_t)k->end * 0x165667b19e3779f9ull;
    h ^= h >> 29;
    return (size_t)(h * 0xbf58476d1ce4e5b9ull >> 17) & (n - 1);
}

static bool key_eq(const ql_cycle_key_t *a, const ql_cycle_key_t *b) {
    return ql_id_eq(&a->model, &b->model) && a->occurrence == b->occurrence &&
           a->start == b->start && a->end == b->end;
}

int ql_cycle_cache_new(size_t capacity, int64_t ttl_ms, ql_cycle_cache_t **out) {
    ql_cycle_cache_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    c->cap = capacity ? capacity : 1;
    c->n_buckets = 16;
    while (c->n_buckets < c->cap * 2)
        c->n_buckets *= 2;
    c->e = calloc(c->cap, sizeof *c->e);
    c->buckets = malloc(c->n_buckets * sizeof *c->buckets);
    if (!c->e || !c->buckets) {
        ql_cycle_cache_free(c);
        return UV_ENOMEM;
    }
    c->ttl = ttl_ms;
    ql_cycle_cache_clear(c);
    *out = c;
    return 0;
}

void ql_cycle_cache_free(ql_cycle_cache_t *c) {
    if (!c)
        return;
    free(c->e);
    free(c->buckets);
    free(c);
}

void ql_cycle_cache_clear(ql_cycle_cache_t *c) {
    for (size_t i = 0; i < c->n_buckets; i++)
        c->buckets[i] = NIL;
    /* The free list threads through `next`. */
    for (size_t i = 0; i < c->cap; i++) {
        c->e[i].live = false;
        c->e[i].next = i + 1 < c->cap ? (uint32_t)(i + 1) : NIL;
    }
    c->free_top = 0;
    c->head = c->tail = NIL;
    c->size = 0;
}

static void lru_unlink(ql_cycle_cache_t *c, uint32_t i) {
    entry_t *x = &c->e[i];
    if (x->prev != NIL)
        c->e[x->prev].next = x->next;
    else
        c->head = x->next;
    if (x->next != NIL)
        c->e[x->next].prev = x->prev;
    else
        c->tail = x->prev;
}

static void lru_push_front(ql_cycle_cache_t *c, uint32_t i) {
    entry_t *x = &c->e[i];
    x->prev = NIL;
    x->next = c->head;
    if (c->head != NIL)
        c->e[c->head].prev = i;
    c->head = i;
    if (c->tail == NIL)
        c->tail = i;
}

static void remove_entry(ql_cycle_cache_t *c, uint32_t i) {
    entry_t *x = &c->e[i];
    uint32_t *pp = &c->buckets[hash_key(&x->key, c->n_buckets)];
    while (*pp != NIL && *pp != i)
        pp = &c->e[*pp].hnext;
    if (*pp == i)
        *pp = x->hnext;
    lru_unlink(c, i);
    x->live = false;
    x->next = c->free_top;
    c->free_top = i;
    c->size--;
}

static uint32_t find(const ql_cycle_cache_t *c, const ql_cycle_key_t *key) {
    for (uint32_t i = c->buckets[hash_key(key, c->n_buckets)]; i != NIL; i = c->e[i].hnext)
        if (key_eq(&c->e[i].key, key))
            return i;
    return NIL;
}

ql_cycle_state_t ql_cycle_cache_get(ql_cycle_cache_t *c, const ql_cycle_key_t *key, int64_t now) {
    return ql_cycle_cache_lookup(c, key, now, NULL, NULL);
}

void ql_cycle_cache_put(ql_cycle_cache_t *c, const ql_cycle_key_t *key, ql_cycle_state_t state,
                        int64_t now) {
    ql_cycle_cache_store(c, key, state, now, NULL, 0);
}

ql_cycle_state_t ql_cycle_cache_lookup(ql_cycle_cache_t *c, const ql_cycle_key_t *key, int64_t now,
                                       ql_id_t *covering, uint32_t *n_related) {
    uint32_t i = find(c, key);
    if (i == NIL)
        return QL_CYCLE_NONE;
    if (c->ttl > 0 && now - c->e[i].used > c->ttl) {
        remove_entry(c, i);
        return QL_CYCLE_NONE;
    }
    c->e[i].used = now;
    lru_unlink(c, i);
    lru_push_front(c, i);
    if (covering)
        *covering = c->e[i].covering;
    if (n_related)
        *n_related = c->e[i].n_related;
    return c->e[i].state;
}

void ql_cycle_cache_store(ql_cycle_cache_t *c, const ql_cycle_key_t *key, ql_cycle_state_t state,
                          int64_t now, const ql_id_t *covering, uint32_t n_related) {
    uint32_t i = find(c, key);
    ql_id_t none = {0};
    if (!covering)
        covering = &none;
    if (i != NIL) {
        c->e[i].state = state;
        c->e[i].covering = *covering;
        c->e[i].n_related = n_related;
        c->e[i].used = now;
        lru_unlink(c, i);
        lru_push_front(c, i);
        return;
    }
    if (c->free_top == NIL)
        remove_entry(c, c->tail);
    i = c->free_top;
    c->free_top = c->e[i].next;
    entry_t *x = &c->e[i];
    x->key = *key;
    x->state = state;
    x->covering = *covering;
    x->n_related = n_related;
    x->used = now;
    x->live = true;
    size_t b = hash_key(key, c->n_buckets);
    x->hnext = c->buckets[b];
    c->buckets[b] = i;
    lru_push_front(c, i);
    c->size++;
}

size_t ql_cycle_cache_size(const ql_cycle_cache_t *c) {
    return c->size;
}
