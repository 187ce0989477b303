/*
 * HTTP Basic authentication: header parsing, the verified-credentials cache, the per-address
 * failure table and the threadpool verifications. DESIGN: see http/ql_auth.h. In short, all of
 * ql_auth_t belongs to the loop thread; a verification's work item carries its own copies of
 * the hash and password into the threadpool and back, and nothing else crosses threads.
 */
#include "http/ql_addr_key.h"
#include "http/ql_auth.h"

#include <crypt.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WAYS 8
#define MAX_CREDENTIALS 1024 /* decoded "user:password" bytes */

typedef struct user {
    char *name;
    char *hash;
    ql_auth_role_t role;
} user_t;

typedef struct cache_entry {
    uint64_t key;
    int64_t expires;
    size_t user;
    bool used;
} cache_entry_t;

/* The address arrays below (addr, starter) hold a client address key. */
_Static_assert(QL_ADDR_KEY_LEN == 16, "the address arrays of auth.c are 16 bytes");

/* One (address, user name) pair's failures. The user is the keyed hash of the name as sent,
 * case-folded (names match case-insensitively), whether or not such a user exists, so the
 * table behaves the same for unknown names and does not tell which users exist. */
typedef struct fail_entry {
    unsigned char addr[16];
    uint64_t user;
    int64_t first_ms;
    unsigned fails;
    unsigned inflight;
    bool used;
} fail_entry_t;

typedef struct waiter {
    ql_auth_cb cb;
    void *arg;
    unsigned char addr[16];
    struct waiter *next;
} waiter_t;

typedef struct pending {
    uv_work_t work;
    ql_auth_t *auth;
    struct pending *next;
    uint64_t key;
    char *header;   /* exact header, so joins never rely on the 64-bit hash alone */
    char *password; /* wiped before free */
    char *hash;
    long user; /* -1: unknown user, verified against a configured hash for equal timing */
    int result;
    unsigned char starter[16]; /* the address whose inflight count this verification holds */
    uint64_t user_key;         /* the failure table's key of the user name sent */
    bool refresh; /* a cached header verified again before it expires: nobody waits, no inflight */
    waiter_t *waiters;
    waiter_t **waiters_tail;
} pending_t;

struct ql_auth {
    uv_loop_t *loop;
    ql_auth_config_t cfg;
    user_t *users;
    size_t n_users;
    unsigned char key[crypto_shorthash_KEYBYTES];
    cache_entry_t *cache;
    size_t cache_sets;
    fail_entry_t *fails;
    size_t fail_sets;
    pending_t *pending;
    size_t n_pending;
    unsigned in_cb;
    bool closing;
    int default_pw; /* -1 not yet known, else 0/1 */
    ql_auth_stats_t stats;
};

/* ---- roles, hashes ---- */

int ql_auth_role_parse(const char *text, ql_auth_role_t *out) {
    if (text && strcasecmp(text, "ADMIN") == 0) {
        *out = QL_AUTH_ROLE_ADMIN;
        return 0;
    }
    if (text && strcasecmp(text, "VIEWER") == 0) {
        *out = QL_AUTH_ROLE_VIEWER;
        return 0;
    }
    return QL_EINVAL;
}

const char *ql_auth_role_name(ql_auth_role_t role) {
    return role == QL_AUTH_ROLE_ADMIN ? "ADMIN" : role == QL_AUTH_ROLE_VIEWER ? "VIEWER" : "NONE";
}

enum { HASH_BAD, HASH_SODIUM, HASH_CRYPT };

static int hash_kind(const char *h) {
    static const char *const crypt_prefixes[] = {"$y$", "$gy$", "$7$", "$6$",
                                                 "$5$", "$2b$", "$2y$"};
    if (!h)
        return HASH_BAD;
    if (strncmp(h, "$argon2id$", 10) == 0 || strncmp(h, "$argon2i$", 9) == 0)
        return HASH_SODIUM;
    for (size_t i = 0; i < sizeof crypt_prefixes / sizeof crypt_prefixes[0]; i++)
        if (strncmp(h, crypt_prefixes[i], strlen(crypt_prefixes[i])) == 0)
            return HASH_CRYPT;
    return HASH_BAD;
}

int ql_auth_verify_hash(const char *hash, const char *password, void *arg) {
    (void)arg;
    if (!password)
        return QL_EINVAL;
    switch (hash_kind(hash)) {
    case HASH_SODIUM:
        if (sodium_init() < 0)
            return UV_EIO;
        return crypto_pwhash_str_verify(hash, password, strlen(password)) == 0 ? 0 : QL_EAUTH;
    case HASH_CRYPT: {
        /* crypt_rn with a private buffer: reentrant, so threadpool threads may run it at once. */
        struct crypt_data *cd = calloc(1, sizeof *cd);
        if (!cd)
            return UV_ENOMEM;
        const char *out = crypt_rn(password, hash, cd, (int)sizeof *cd);
        size_t n = strlen(hash);
        int rc = out && strlen(out) == n && sodium_memcmp(out, hash, n) == 0 ? 0 : QL_EAUTH;
        sodium_memzero(cd, sizeof *cd);
        free(cd);
        return rc;
    }
    default:
        return QL_EINVAL;
    }
}

int ql_auth_hash_password(const char *password, char *out, size_t out_len) {
    if (!password || out_len < QL_AUTH_HASH_MAX || crypto_pwhash_STRBYTES > QL_AUTH_HASH_MAX)
        return QL_EINVAL;
    if (sodium_init() < 0)
        return UV_EIO;
    if (crypto_pwhash_str(out, password, strlen(password), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0)
        return UV_ENOMEM; /* libsodium fails here only when it cannot get the memory */
    return 0;
}

/* ---- construction ---- */

void ql_auth_config_default(ql_auth_config_t *out) {
    memset(out, 0, sizeof *out);
    out->cache_ttl_ms = 60000;
    out->cache_max = 1024;
    out->fail_limit = 5;
    out->fail_window_ms = 60000;
    out->fail_table_max = 4096;
    out->max_pending = 256;
    out->max_pending_per_address = 8;
}

static int64_t loop_now(void *arg) {
    return (int64_t)uv_now(arg);
}

static void destroy(ql_auth_t *a) {
    for (size_t i = 0; i < a->n_users; i++) {
        free(a->users[i].name);
        free(a->users[i].hash);
    }
    free(a->users);
    free(a->cache);
    free(a->fails);
    sodium_memzero(a->key, sizeof a->key);
    free(a);
}

static int add_user(ql_auth_t *a, const char *name, const char *hash, ql_auth_role_t role,
                    ql_err_t *err) {
    if (!name || !*name || strchr(name, ':'))
        return ql_err_set(err, QL_EINVAL, "user %zu: the name must be non-empty, without ':'",
                          a->n_users);
    for (size_t i = 0; i < a->n_users; i++)
        if (strcasecmp(a->users[i].name, name) == 0)
            return ql_err_set(err, QL_EINVAL, "user %s: defined twice", name);
    if (hash_kind(hash) == HASH_BAD)
        return ql_err_set(err, QL_EINVAL,
                          "user %s: the password hash is in no accepted format ($argon2id$, $y$, "
                          "$6$, ...): make one with `qilin passwd`",
                          name);
    user_t *u = &a->users[a->n_users];
    u->name = strdup(name);
    u->hash = strdup(hash);
    u->role = role == QL_AUTH_ROLE_NONE ? QL_AUTH_ROLE_ADMIN : role;
    if (!u->name || !u->hash) {
        free(u->name);
        free(u->hash);
        return UV_ENOMEM;
    }
    a->n_users++;
    return 0;
}

int ql_auth_new(uv_loop_t *loop, const ql_auth_config_t *cfg, ql_auth_t **out, ql_err_t *err) {
    if (sodium_init() < 0)
        return ql_err_set(err, UV_EIO, "libsodium failed to initialise");
    /* There is no built-in user: a public default password is nobody's secret (the server
     * makes a random ADMIN password instead, see api/ql_admin_password.h). */
    if (!cfg || !cfg->n_users)
        return ql_err_set(err, QL_EINVAL, "no users: give at least one user with a password hash");
    ql_auth_t *a = calloc(1, sizeof *a);
    if (!a)
        return UV_ENOMEM;
    a->loop = loop;
    ql_auth_config_default(&a->cfg);
    if (cfg) {
        ql_auth_config_t def = a->cfg;
        a->cfg = *cfg;
        /* Zero means the default, as for the HTTP limits. */
        if (a->cfg.cache_ttl_ms <= 0)
            a->cfg.cache_ttl_ms = def.cache_ttl_ms;
        if (!a->cfg.cache_max)
            a->cfg.cache_max = def.cache_max;
        if (!a->cfg.fail_limit)
            a->cfg.fail_limit = def.fail_limit;
        if (a->cfg.fail_window_ms <= 0)
            a->cfg.fail_window_ms = def.fail_window_ms;
        if (!a->cfg.fail_table_max)
            a->cfg.fail_table_max = def.fail_table_max;
        if (!a->cfg.max_pending)
            a->cfg.max_pending = def.max_pending;
        if (!a->cfg.max_pending_per_address)
            a->cfg.max_pending_per_address = def.max_pending_per_address;
    }
    if (!a->cfg.verify)
        a->cfg.verify = ql_auth_verify_hash;
    if (!a->cfg.now) {
        a->cfg.now = loop_now;
        a->cfg.now_arg = loop;
    }
    a->cfg.users = NULL; /* copied below; the caller's array is not kept */
    a->default_pw = a->cfg.no_default_password ? 0 : -1;
    a->users = calloc(cfg->n_users, sizeof *a->users);
    a->cache_sets = (a->cfg.cache_max + WAYS - 1) / WAYS;
    a->fail_sets = (a->cfg.fail_table_max + WAYS - 1) / WAYS;
    a->cache = calloc(a->cache_sets * WAYS, sizeof *a->cache);
    a->fails = calloc(a->fail_sets * WAYS, sizeof *a->fails);
    if (!a->users || !a->cache || !a->fails) {
        destroy(a);
        return UV_ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < cfg->n_users && !rc; i++)
        rc = add_user(a, cfg->users[i].name, cfg->users[i].hash, cfg->users[i].role, err);
    if (rc) {
        destroy(a);
        return rc;
    }
    randombytes_buf(a->key, sizeof a->key);
    *out = a;
    return 0;
}

void ql_auth_free(ql_auth_t *auth) {
    if (!auth || auth->closing)
        return;
    auth->closing = true;
    /* Work not yet started is cancelled (after_work then runs with UV_ECANCELED); work already
     * running cannot be, so the memory waits for the last after_work. */
    for (pending_t *p = auth->pending; p; p = p->next)
        uv_cancel((uv_req_t *)&p->work);
    if (auth->n_pending == 0 && auth->in_cb == 0)
        destroy(auth);
}

void ql_auth_stats(const ql_auth_t *auth, ql_auth_stats_t *out) {
    *out = auth->stats;
    out->pending = auth->n_pending;
}

/* ---- keyed hashes, cache, failure table ---- */

static uint64_t keyed(const ql_auth_t *a, const void *data, size_t n) {
    unsigned char h[crypto_shorthash_BYTES];
    crypto_shorthash(h, data, n, a->key);
    uint64_t v;
    memcpy(&v, h, sizeof v);
    return v;
}

static cache_entry_t *cache_find(ql_auth_t *a, uint64_t key, int64_t now) {
    cache_entry_t *set = &a->cache[(key % a->cache_sets) * WAYS];
    for (size_t i = 0; i < WAYS; i++)
        if (set[i].used && set[i].key == key && set[i].expires > now)
            return &set[i];
    return NULL;
}

static void cache_put(ql_auth_t *a, uint64_t key, size_t user, int64_t now) {
    cache_entry_t *set = &a->cache[(key % a->cache_sets) * WAYS];
    cache_entry_t *victim = &set[0];
    for (size_t i = 0; i < WAYS; i++) {
        if (set[i].used && set[i].key == key) {
            victim = &set[i];
            break;
        }
        if (!set[i].used || set[i].expires <= now) {
            victim = &set[i];
            break;
        }
        if (set[i].expires < victim->expires)
            victim = &set[i];
    }
    *victim = (cache_entry_t){key, now + a->cfg.cache_ttl_ms, user, true};
}

static void cache_drop(ql_auth_t *a, uint64_t key) {
    cache_entry_t *set = &a->cache[(key % a->cache_sets) * WAYS];
    for (size_t i = 0; i < WAYS; i++)
        if (set[i].used && set[i].key == key)
            set[i].used = false;
}

/* The failure table's key of a user name: case-folded, so ALICE and alice share a record. */
static uint64_t user_key(const ql_auth_t *a, const char *name) {
    char folded[MAX_CREDENTIALS + 1];
    size_t n = 0;
    for (; name[n] && n < MAX_CREDENTIALS; n++)
        folded[n] = (char)(name[n] >= 'A' && name[n] <= 'Z' ? name[n] - 'A' + 'a' : name[n]);
    uint64_t k = keyed(a, folded, n);
    sodium_memzero(folded, n);
    return k;
}

static fail_entry_t *fail_set(ql_auth_t *a, const unsigned char addr[16], uint64_t user) {
    unsigned char k[16 + sizeof user];
    memcpy(k, addr, 16);
    memcpy(k + 16, &user, sizeof user);
    return &a->fails[(keyed(a, k, sizeof k) % a->fail_sets) * WAYS];
}

static fail_entry_t *fail_find(ql_auth_t *a, const unsigned char addr[16], uint64_t user) {
    fail_entry_t *set = fail_set(a, addr, user);
    for (size_t i = 0; i < WAYS; i++)
        if (set[i].used && set[i].user == user && memcmp(set[i].addr, addr, 16) == 0)
            return &set[i];
    return NULL;
}

static bool fail_active(const ql_auth_t *a, const fail_entry_t *e, int64_t now) {
    return e->fails > 0 && now - e->first_ms < a->cfg.fail_window_ms;
}

/* The entry for (addr, user), created when missing; NULL when the set is full of pairs with
 * verifications in flight (then the pair goes untracked rather than refused). When the set is
 * full, the pair with the fewest failures goes first, the oldest among equals: names sprayed
 * once each cannot push a locked-out pair out of the table to lift its lock. */
static fail_entry_t *fail_get(ql_auth_t *a, const unsigned char addr[16], uint64_t user,
                              int64_t now) {
    fail_entry_t *e = fail_find(a, addr, user);
    if (e)
        return e;
    fail_entry_t *set = fail_set(a, addr, user), *victim = NULL;
    for (size_t i = 0; i < WAYS; i++) {
        fail_entry_t *c = &set[i];
        if (!c->used || (c->inflight == 0 && !fail_active(a, c, now))) {
            victim = c;
            break;
        }
        if (c->inflight == 0 && (!victim || c->fails < victim->fails ||
                                 (c->fails == victim->fails && c->first_ms < victim->first_ms)))
            victim = c;
    }
    if (!victim)
        return NULL;
    memset(victim, 0, sizeof *victim);
    memcpy(victim->addr, addr, 16);
    victim->user = user;
    victim->used = true;
    return victim;
}

static bool rate_limited(ql_auth_t *a, const unsigned char addr[16], uint64_t user, int64_t now) {
    fail_entry_t *e = fail_find(a, addr, user);
    if (!e)
        return false;
    unsigned fails = fail_active(a, e, now) ? e->fails : 0;
    return fails + e->inflight >= a->cfg.fail_limit;
}

static void fail_record(ql_auth_t *a, const unsigned char addr[16], uint64_t user, int64_t now) {
    fail_entry_t *e = fail_get(a, addr, user, now);
    if (!e)
        return;
    if (!fail_active(a, e, now)) {
        e->first_ms = now;
        e->fails = 1;
    } else {
        e->fails++;
    }
}

static void fail_clear(ql_auth_t *a, const unsigned char addr[16], uint64_t user) {
    fail_entry_t *e = fail_find(a, addr, user);
    if (!e)
        return;
    e->fails = 0;
    if (e->inflight == 0)
        e->used = false;
}

/* ---- checking ---- */

/* Calls cb, guarding against ql_auth_free() from inside it. Returns false when auth is gone. */
static bool deliver(ql_auth_t *a, ql_auth_cb cb, void *arg, int status,
                    const ql_auth_result_t *res) {
    a->in_cb++;
    cb(status, res, arg);
    a->in_cb--;
    if (a->closing && a->in_cb == 0 && a->n_pending == 0) {
        destroy(a);
        return false;
    }
    return true;
}

/* Splits "Basic base64(user:password)" into buf (caller's, MAX_CREDENTIALS + 1 bytes). */
static int parse_basic(const char *h, char *buf, const char **user, const char **password) {
    if (!h)
        return QL_EAUTH;
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "Basic", 5) != 0 || (h[5] != ' ' && h[5] != '\t'))
        return QL_EAUTH;
    h += 5;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    size_t len = 0;
    if (n == 0 || (sodium_base642bin((unsigned char *)buf, MAX_CREDENTIALS, h, n, NULL, &len, NULL,
                                     sodium_base64_VARIANT_ORIGINAL) != 0 &&
                   sodium_base642bin((unsigned char *)buf, MAX_CREDENTIALS, h, n, NULL, &len, NULL,
                                     sodium_base64_VARIANT_ORIGINAL_NO_PADDING) != 0))
        return QL_EAUTH;
    buf[len] = '\0';
    char *colon = memchr(buf, ':', len);
    if (!colon || colon == buf || memchr(buf, '\0', len))
        return QL_EAUTH;
    *colon = '\0';
    *user = buf;
    *password = colon + 1;
    return 0;
}

static long find_user(const ql_auth_t *a, const char *name) {
    for (size_t i = 0; i < a->n_users; i++)
        if (strcasecmp(a->users[i].name, name) == 0)
            return (long)i;
    return -1;
}

static void work_cb(uv_work_t *w) {
    pending_t *p = w->data;
    int rc = p->auth->cfg.verify(p->hash, p->password, p->auth->cfg.verify_arg);
    /* An unknown user was verified only for the time it takes: it fails whatever the result. */
    p->result = p->user < 0 ? QL_EAUTH : rc;
}

static void pending_free(pending_t *p) {
    for (waiter_t *w = p->waiters, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    if (p->password) {
        sodium_memzero(p->password, strlen(p->password));
        free(p->password);
    }
    free(p->header);
    free(p->hash);
    free(p);
}

static void after_work_cb(uv_work_t *w, int status) {
    pending_t *p = w->data;
    ql_auth_t *a = p->auth;
    for (pending_t **pp = &a->pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    a->n_pending--;
    int64_t now = a->cfg.now(a->cfg.now_arg);
    fail_entry_t *starter = p->refresh ? NULL : fail_find(a, p->starter, p->user_key);
    if (starter && starter->inflight)
        starter->inflight--;
    int result = p->result;
    if (status == UV_ECANCELED || a->closing)
        result = QL_ESHUTDOWN;
    else if (result != 0 && result != QL_EAUTH && result != UV_ENOMEM)
        result = QL_EAUTH; /* a hash that cannot be checked proves nothing: deny */
    ql_auth_result_t res = {0};
    if (result == 0) {
        cache_put(a, p->key, (size_t)p->user, now);
        res.user = a->users[p->user].name;
        res.role = a->users[p->user].role;
    } else if (p->refresh && result == QL_EAUTH) {
        cache_drop(a, p->key); /* what no longer verifies is not served from the cache either */
    }
    if (result == UV_ENOMEM) {
        result = QL_ETRANSIENT;
    }
    for (waiter_t *wt = p->waiters; wt; wt = wt->next) {
        if (result == 0)
            fail_clear(a, wt->addr, p->user_key);
        else if (result == QL_EAUTH)
            fail_record(a, wt->addr, p->user_key, now);
    }
    if (result == QL_EAUTH)
        a->stats.failures++;
    bool alive = true;
    for (waiter_t *wt = p->waiters; wt; wt = wt->next) {
        if (alive) {
            alive = deliver(a, wt->cb, wt->arg, result, &res);
        } else {
            /* auth was freed by an earlier waiter's callback: the rest learn it is gone. */
            ql_auth_result_t none = {0};
            wt->cb(QL_ESHUTDOWN, &none, wt->arg);
        }
    }
    pending_free(p);
    if (alive && a->closing && a->n_pending == 0 && a->in_cb == 0)
        destroy(a);
}

/* The verification in flight of exactly this header, NULL when none. */
static pending_t *joinable(ql_auth_t *a, uint64_t key, const char *authorization) {
    for (pending_t *p = a->pending; p; p = p->next)
        if (p->key == key && strcmp(p->header, authorization) == 0)
            return p;
    return NULL;
}

/* Verifications in flight started from addr (at most max_pending to scan). */
static size_t pending_from(const ql_auth_t *a, const unsigned char addr[16]) {
    size_t n = 0;
    for (const pending_t *p = a->pending; p; p = p->next)
        n += memcmp(p->starter, addr, 16) == 0;
    return n;
}

/* A verification of header (whose decoded password is password, of user u, -1 when unknown)
 * with its first waiter w (NULL for a refresh), not yet queued; NULL when out of memory. */
static pending_t *pending_new(ql_auth_t *auth, uint64_t key, const char *authorization, long u,
                              const char *password, waiter_t *w) {
    pending_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->auth = auth;
    p->key = key;
    p->user = u;
    p->header = strdup(authorization);
    p->password = strdup(password);
    p->hash = strdup(auth->users[u >= 0 ? (size_t)u : 0].hash);
    p->waiters = w;
    p->waiters_tail = w ? &w->next : &p->waiters;
    p->work.data = p;
    if (!p->header || !p->password || !p->hash) {
        p->waiters = NULL; /* w stays the caller's */
        pending_free(p);
        return NULL;
    }
    return p;
}

/* Queues p in the threadpool and lists it. Returns 0, or the error with p freed. */
static int pending_queue(ql_auth_t *auth, pending_t *p) {
    int rc = uv_queue_work(auth->loop, &p->work, work_cb, after_work_cb);
    if (rc) {
        pending_free(p);
        return rc;
    }
    p->next = auth->pending;
    auth->pending = p;
    auth->n_pending++;
    auth->stats.verifications++;
    return 0;
}

/*
 * A cached header in the last quarter of its life is verified again in the threadpool while the
 * cache still answers for it, so that a client sending it steadily never waits for a
 * verification once its entry expires (tens of ms of argon2id on the request's path). Nobody
 * waits for the refresh; its success renews the entry, its failure drops it. One at a time per
 * header (a request after the expiry joins it), within max_pending and half the address's
 * share of verifications; it takes no slot of the failure table's in-flight count (the header
 * has verified already).
 */
static void maybe_refresh(ql_auth_t *auth, const cache_entry_t *ce, uint64_t key,
                          const char *authorization, const char *password,
                          const unsigned char addr[16], uint64_t ukey, int64_t now) {
    if (ce->expires - now > auth->cfg.cache_ttl_ms / 4 ||
        auth->n_pending >= auth->cfg.max_pending || joinable(auth, key, authorization) ||
        2 * pending_from(auth, addr) >= auth->cfg.max_pending_per_address)
        return; /* refreshes never take the address's last slots for new headers */
    pending_t *p = pending_new(auth, key, authorization, (long)ce->user, password, NULL);
    if (!p)
        return; /* the entry expires as it would have */
    p->refresh = true;
    memcpy(p->starter, addr, 16);
    p->user_key = ukey;
    if (pending_queue(auth, p) == 0)
        auth->stats.refreshes++;
}

int ql_auth_check(ql_auth_t *auth, const char *authorization, const struct sockaddr *peer,
                  ql_auth_cb cb, void *arg) {
    if (auth->closing)
        return QL_ESHUTDOWN;
    ql_auth_result_t res = {0};
    char buf[MAX_CREDENTIALS + 1];
    const char *user, *password;
    if (parse_basic(authorization, buf, &user, &password) != 0) {
        sodium_memzero(buf, sizeof buf);
        deliver(auth, cb, arg, QL_EAUTH, &res);
        return 0;
    }
    unsigned char addr[16];
    ql_addr_key(peer, addr);
    int64_t now = auth->cfg.now(auth->cfg.now_arg);
    int status = 1; /* 1: not answered yet */
    uint64_t key = 0;
    uint64_t ukey = user_key(auth, user);
    if (rate_limited(auth, addr, ukey, now)) {
        auth->stats.rate_limited++;
        res.rate_limited = true;
        status = QL_EAUTH;
    } else {
        key = keyed(auth, authorization, strlen(authorization));
        cache_entry_t *ce = cache_find(auth, key, now);
        if (ce) {
            auth->stats.cache_hits++;
            res.cached = true;
            res.user = auth->users[ce->user].name;
            res.role = auth->users[ce->user].role;
            status = 0;
            maybe_refresh(auth, ce, key, authorization, password, addr, ukey, now);
        } else if (auth->n_pending >= auth->cfg.max_pending) {
            status = QL_ETRANSIENT;
        } else if (!joinable(auth, key, authorization) &&
                   pending_from(auth, addr) >= auth->cfg.max_pending_per_address) {
            /* Failures are counted per user name, so one address could otherwise keep the
             * threadpool busy with ever new names: its share of verifications is capped. */
            status = QL_ETRANSIENT;
        }
    }
    if (status != 1) {
        sodium_memzero(buf, sizeof buf);
        deliver(auth, cb, arg, status, &res);
        return 0;
    }
    waiter_t *w = calloc(1, sizeof *w);
    if (!w) {
        sodium_memzero(buf, sizeof buf);
        return UV_ENOMEM;
    }
    w->cb = cb;
    w->arg = arg;
    memcpy(w->addr, addr, 16);
    pending_t *same = joinable(auth, key, authorization);
    if (same) {
        *same->waiters_tail = w;
        same->waiters_tail = &w->next;
        auth->stats.joins++;
        sodium_memzero(buf, sizeof buf);
        return 0;
    }
    pending_t *p = pending_new(auth, key, authorization, find_user(auth, user), password, w);
    sodium_memzero(buf, sizeof buf);
    if (!p) {
        free(w);
        return UV_ENOMEM;
    }
    memcpy(p->starter, addr, 16);
    p->user_key = ukey;
    int rc = pending_queue(auth, p);
    if (rc)
        return rc;
    fail_entry_t *fe = fail_get(auth, addr, ukey, now);
    if (fe)
        fe->inflight++;
    return 0;
}

/* ---- the default password rule ---- */

bool ql_auth_uses_default_password(ql_auth_t *auth) {
    if (auth->default_pw < 0) {
        long u = find_user(auth, QL_AUTH_DEFAULT_USER);
        auth->default_pw = u >= 0 && auth->cfg.verify(auth->users[u].hash, QL_AUTH_DEFAULT_PASSWORD,
                                                      auth->cfg.verify_arg) == 0;
    }
    return auth->default_pw == 1;
}

int ql_auth_check_listen(ql_auth_t *auth, bool listen_is_loopback, ql_err_t *err) {
    if (listen_is_loopback || !ql_auth_uses_default_password(auth))
        return 0;
    return ql_err_set(err, QL_EINVAL,
                      "user ADMIN still has the default password KYLIN, which is allowed only "
                      "while qilin.server.listen is a loopback address (127.0.0.1, [::1]): make "
                      "a hash with `qilin passwd` and set it in qilin.server.users, or listen on "
                      "127.0.0.1");
}
