/*
 * HTTP Basic authentication against users configured with password hashes.
 *
 * DESIGN. ql_auth_t lives on one libuv loop thread: every call below except
 * ql_auth_verify_hash() and ql_auth_hash_password() must be made on that thread, and callbacks
 * run on it. A real password hash costs 10-70 ms, so verification runs in libuv's threadpool
 * (uv_queue_work); the work item owns copies of the hash and password, and its after_work
 * callback (on the loop thread) updates the cache and the failure table and answers the
 * waiters. State touched by the threadpool: none but the work item itself.
 *
 * Checking a header, in order:
 *   1. malformed or missing header                  -> QL_EAUTH at once (not counted as a failure)
 *   2. the (address, user name) is rate-limited     -> QL_EAUTH at once, result.rate_limited
 *   3. a cached verification of this exact header   -> 0 at once, result.cached
 *   4. a verification of the same header in flight  -> joined: answered when it finishes
 *   5. otherwise a new verification in the threadpool (an unknown user is verified against a
 *      configured hash too, so timing does not tell which users exist)
 * The cache is keyed by SipHash (libsodium crypto_shorthash, random key per ql_auth_t) of the
 * whole header; only successful verifications are cached, for cache_ttl_ms, at most cache_max
 * entries (set-associative, oldest evicted). A hit in the last quarter of an entry's life also
 * starts a refresh: the header is verified again in the threadpool, nobody waiting, and the
 * entry renewed (or dropped, when it no longer verifies), so a steady client never waits for a
 * verification on expiry. Rate limit, per (address, user name): the address
 * is an IPv4 address or the /64 of an IPv6 one, the name is the one sent, case-folded, whether
 * or not such a user exists. A pair with fail_limit failures, counting its verifications still
 * in flight, within fail_window_ms since its first failure gets QL_EAUTH without verification
 * until the window has passed, even with the right password or cached credentials (a cache hit
 * let through would tell a guesser which guess is right); a success clears the pair's record.
 * Other users at the same address are never refused for it. Because ever new names would each
 * get fail_limit verifications, one address may have at most max_pending_per_address
 * verifications in flight (joins excepted); more get QL_ETRANSIENT. The table holds at most
 * fail_table_max pairs; when a set is full, the pair with the fewest failures not in flight is
 * forgotten, the oldest among equals (bounded memory wins over precision).
 *
 * Accepted hashes: libsodium's "$argon2id$" and "$argon2i$" (crypto_pwhash_str_verify) and the
 * crypt(3) families of libxcrypt "$y$" (yescrypt), "$gy$", "$7$", "$6$", "$5$", "$2b$", "$2y$"
 * (crypt_rn). Older crypt schemes (DES, MD5) are refused when the users are loaded.
 */
#ifndef QL_AUTH_H
#define QL_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "base/ql_error.h"

typedef struct ql_auth ql_auth_t;

typedef enum ql_auth_role {
    QL_AUTH_ROLE_NONE = 0,
    QL_AUTH_ROLE_ADMIN = 1,  /* everything */
    QL_AUTH_ROLE_VIEWER = 2, /* reads only: the API answers its writes 403 */
} ql_auth_role_t;

/* Parses "ADMIN" or "VIEWER" (case-insensitive) into *out. Returns 0 or QL_EINVAL. */
int ql_auth_role_parse(const char *text, ql_auth_role_t *out);
/* "ADMIN", "VIEWER", "NONE" (static). */
const char *ql_auth_role_name(ql_auth_role_t role);

typedef struct ql_auth_user {
    const char *name; /* matched ASCII case-insensitively, as Kylin does */
    const char *hash; /* one of the accepted hash formats */
    ql_auth_role_t role;
} ql_auth_user_t;

/* Kylin's default user and its public password. No user has it unless an operator configures
 * its hash on purpose (for Kylin's own scripts); ql_auth_check_listen() then keeps it local. */
#define QL_AUTH_DEFAULT_USER "ADMIN"
#define QL_AUTH_DEFAULT_PASSWORD "KYLIN"

/* Verifies password against hash: 0 on a match, QL_EAUTH on a mismatch, QL_EINVAL for a hash in
 * no accepted format, UV_ENOMEM. Runs in the threadpool, so it must be thread-safe. */
typedef int (*ql_auth_verify_fn)(const char *hash, const char *password, void *arg);
/* Monotonic milliseconds. */
typedef int64_t (*ql_auth_now_fn)(void *arg);

typedef struct ql_auth_config {
    const ql_auth_user_t *users; /* copied; at least one (there is no built-in user) */
    size_t n_users;
    int64_t cache_ttl_ms;   /* default 60000 */
    size_t cache_max;       /* default 1024 entries */
    unsigned fail_limit;    /* default 5 failures ... */
    int64_t fail_window_ms; /* ... within 60000 ms */
    size_t fail_table_max;  /* default 4096 (address, user) pairs */
    size_t max_pending;     /* verifications in flight; more get QL_ETRANSIENT. Default 256 */
    size_t max_pending_per_address; /* of those, started from one address; more get
                                       QL_ETRANSIENT. Default 8 */
    /* The caller knows that no user has Kylin's default password (the users' passwords were
     * generated at random): ql_auth_uses_default_password answers false without verifying
     * it against ADMIN's hash, one argon2 computation less at every start. */
    bool no_default_password;
    /* Seams for tests; NULL means ql_auth_verify_hash and uv_now(loop). The args are borrowed
     * and must outlive the ql_auth_t. */
    ql_auth_verify_fn verify;
    void *verify_arg;
    ql_auth_now_fn now;
    void *now_arg;
} ql_auth_config_t;

/* Fills out with the defaults above (no users, no seams). */
void ql_auth_config_default(ql_auth_config_t *out);

/* Creates the authenticator on loop (borrowed, must outlive it). cfg and its users are copied.
 * *out is owned by the caller (ql_auth_free). Returns 0, QL_EINVAL naming the user in err (may
 * be NULL) for an empty or duplicate name or a hash in no accepted format, UV_ENOMEM, or
 * UV_EIO when libsodium cannot initialise; QL_EINVAL too when cfg has no users. */
int ql_auth_new(uv_loop_t *loop, const ql_auth_config_t *cfg, ql_auth_t **out, ql_err_t *err);

/* Frees auth. Verifications in flight finish first: their waiters are then called with
 * QL_ESHUTDOWN and the memory is released in the last after_work callback, so the loop must
 * keep running until then. */
void ql_auth_free(ql_auth_t *auth);

typedef struct ql_auth_result {
    const char *user;    /* the configured name, borrowed from auth; NULL unless status is 0 */
    ql_auth_role_t role; /* QL_AUTH_ROLE_NONE unless status is 0 */
    bool cached;         /* answered from the cache */
    bool rate_limited;   /* refused because of the address's failures, without verifying */
} ql_auth_result_t;

/* Called on the loop thread. status: 0 (authenticated), QL_EAUTH (missing, malformed or wrong
 * credentials, unknown user, rate-limited), QL_ETRANSIENT (too many verifications in flight),
 * QL_ESHUTDOWN (auth was freed meanwhile). result is borrowed for the call. */
typedef void (*ql_auth_cb)(int status, const ql_auth_result_t *result, void *arg);

/* Checks an Authorization header value (borrowed for the call; NULL when absent) sent from
 * peer (borrowed; NULL when unknown). Answers through cb with arg: synchronously, before this
 * returns, for cases 1-3 above and QL_ETRANSIENT; later otherwise. Returns 0 when cb has run or
 * will run, or UV_ENOMEM / QL_ESHUTDOWN, in which case cb never runs. */
int ql_auth_check(ql_auth_t *auth, const char *authorization, const struct sockaddr *peer,
                  ql_auth_cb cb, void *arg);

typedef struct ql_auth_stats {
    uint64_t verifications; /* started in the threadpool (refreshes included) */
    uint64_t refreshes;     /* of them, cached headers verified again before they expire */
    uint64_t cache_hits;
    uint64_t joins; /* checks that joined a verification in flight */
    uint64_t failures;
    uint64_t rate_limited;
    uint64_t pending; /* verifications in flight now */
} ql_auth_stats_t;

void ql_auth_stats(const ql_auth_t *auth, ql_auth_stats_t *out);

/* True when a user named ADMIN accepts the password KYLIN (only when configured so on purpose).
 * Verifies synchronously once (tens of ms) and remembers: call it at start-up.
 * The rule the server applies (ql_auth_check_listen): the default password is allowed only
 * while the server listens on loopback addresses only. */
bool ql_auth_uses_default_password(ql_auth_t *auth);

/* Applies that rule: returns 0, or QL_EINVAL with a message in err (may be NULL) saying how to
 * set a password when the default one is in use and listen_is_loopback is false. */
int ql_auth_check_listen(ql_auth_t *auth, bool listen_is_loopback, ql_err_t *err);

/* Verifies password (borrowed) against hash (borrowed), synchronously. Returns as
 * ql_auth_verify_fn. Thread-safe. */
int ql_auth_verify_hash(const char *hash, const char *password, void *arg);

/* Size of a buffer that holds any hash ql_auth_hash_password() writes, NUL included. */
#define QL_AUTH_HASH_MAX 128

/* Hashes password (borrowed) into out (caller's buffer of out_len >= QL_AUTH_HASH_MAX bytes) as
 * an argon2id string with libsodium's interactive limits (2 passes, 64 MiB), for the config
 * file ("qilin passwd"). Thread-safe; takes tens of ms. Returns 0, QL_EINVAL (out_len too
 * small), UV_ENOMEM. */
int ql_auth_hash_password(const char *password, char *out, size_t out_len);

#endif
