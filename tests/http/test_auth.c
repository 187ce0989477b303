/*
 * Basic auth: verification in the threadpool, the cache, joins, rate limiting, hash formats.
 * The test drives the loop itself (uv_run UV_RUN_ONCE until an answer, with a deadline) and
 * injects the clock and a counting verifier through ql_auth_config_t's seams.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <crypt.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/ql_auth.h"

typedef struct env {
    uv_loop_t loop;
    ql_auth_t *auth;
    int64_t now;
    atomic_int verifies;
    atomic_bool deny; /* counting_verify refuses every password */
    char argon[crypto_pwhash_STRBYTES];
    char yescrypt[CRYPT_OUTPUT_SIZE];
    char sha512[CRYPT_OUTPUT_SIZE];
} env_t;

static env_t E;

typedef struct answer {
    bool done;
    int status;
    char user[64];
    ql_auth_role_t role;
    bool cached;
    bool rate_limited;
} answer_t;

static int counting_verify(const char *hash, const char *password, void *arg) {
    env_t *e = arg;
    atomic_fetch_add(&e->verifies, 1);
    if (atomic_load(&e->deny))
        return QL_EAUTH;
    return ql_auth_verify_hash(hash, password, NULL);
}

static int64_t fake_now(void *arg) {
    return ((env_t *)arg)->now;
}

static void make_crypt(const char *prefix, const char *pw, char *out) {
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    cr_assert_not_null(crypt_gensalt_rn(prefix, 0, NULL, 0, salt, sizeof salt));
    struct crypt_data *cd = calloc(1, sizeof *cd);
    const char *h = crypt_rn(pw, salt, cd, sizeof *cd);
    cr_assert_not_null(h);
    strcpy(out, h);
    free(cd);
}

static void setup(void) {
    memset(&E, 0, sizeof E);
    cr_assert_geq(sodium_init(), 0);
    cr_assert_eq(uv_loop_init(&E.loop), 0);
    E.now = 1000000;
    /* Minimal argon2id cost keeps the suite fast; the format is what matters here. */
    cr_assert_eq(crypto_pwhash_str(E.argon, "s3cret", 6, crypto_pwhash_OPSLIMIT_MIN,
                                   crypto_pwhash_MEMLIMIT_MIN),
                 0);
    make_crypt("$y$", "yes-pass", E.yescrypt);
    make_crypt("$6$", "sha-pass", E.sha512);
}

static void teardown(void) {
    if (E.auth)
        ql_auth_free(E.auth);
    E.auth = NULL;
    /* Run until the threadpool work is drained, then the loop must close cleanly. */
    uv_run(&E.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&E.loop), 0);
}

static ql_auth_config_t base_config(void) {
    static ql_auth_user_t users[3];
    users[0] = (ql_auth_user_t){"alice", E.argon, QL_AUTH_ROLE_ADMIN};
    users[1] = (ql_auth_user_t){"bob", E.yescrypt, QL_AUTH_ROLE_ADMIN};
    users[2] = (ql_auth_user_t){"carol", E.sha512, QL_AUTH_ROLE_NONE};
    ql_auth_config_t cfg;
    ql_auth_config_default(&cfg);
    cfg.users = users;
    cfg.n_users = 3;
    cfg.verify = counting_verify;
    cfg.verify_arg = &E;
    cfg.now = fake_now;
    cfg.now_arg = &E;
    return cfg;
}

static void start(const ql_auth_config_t *cfg) {
    ql_err_t err = {0};
    cr_assert_eq(ql_auth_new(&E.loop, cfg, &E.auth, &err), 0, "%s", err.msg);
}

static const char *basic(const char *user, const char *pw) {
    static char out[4][512];
    static int next;
    char raw[256];
    snprintf(raw, sizeof raw, "%s:%s", user, pw);
    char *o = out[next++ % 4];
    strcpy(o, "Basic ");
    sodium_bin2base64(o + 6, sizeof out[0] - 6, (const unsigned char *)raw, strlen(raw),
                      sodium_base64_VARIANT_ORIGINAL);
    return o;
}

static struct sockaddr_storage addr4(const char *ip) {
    struct sockaddr_storage ss = {0};
    cr_assert_eq(uv_ip4_addr(ip, 1234, (struct sockaddr_in *)&ss), 0);
    return ss;
}

static struct sockaddr_storage addr6(const char *ip) {
    struct sockaddr_storage ss = {0};
    cr_assert_eq(uv_ip6_addr(ip, 1234, (struct sockaddr_in6 *)&ss), 0);
    return ss;
}

static void on_answer(int status, const ql_auth_result_t *res, void *arg) {
    answer_t *a = arg;
    cr_assert_not(a->done, "answered twice");
    a->done = true;
    a->status = status;
    if (res->user)
        snprintf(a->user, sizeof a->user, "%s", res->user);
    a->role = res->role;
    a->cached = res->cached;
    a->rate_limited = res->rate_limited;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drives the loop until every answer in as[0..n) arrived (10 s deadline). */
static void wait_all(answer_t *as, size_t n) {
    int64_t deadline = mono_ms() + 10000;
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < n; i++)
            done += as[i].done;
        if (done == n)
            return;
        cr_assert_lt(mono_ms(), deadline, "timed out waiting for the verification");
        uv_run(&E.loop, UV_RUN_ONCE);
    }
}

static answer_t check_from(const char *header, const struct sockaddr_storage *peer) {
    answer_t a = {0};
    cr_assert_eq(ql_auth_check(E.auth, header, (const struct sockaddr *)peer, on_answer, &a), 0);
    wait_all(&a, 1);
    return a;
}

static answer_t check(const char *header) {
    struct sockaddr_storage peer = addr4("10.0.0.1");
    return check_from(header, &peer);
}

TestSuite(auth, .init = setup, .fini = teardown, .timeout = 60);

Test(auth, right_password_in_every_format) {
    ql_auth_config_t cfg = base_config();
    start(&cfg);
    answer_t a = check(basic("alice", "s3cret"));
    cr_assert_eq(a.status, 0);
    cr_assert_str_eq(a.user, "alice");
    cr_assert_eq(a.role, QL_AUTH_ROLE_ADMIN);
    cr_assert_not(a.cached);
    a = check(basic("bob", "yes-pass"));
    cr_assert_eq(a.status, 0, "yescrypt");
    cr_assert_str_eq(a.user, "bob");
    a = check(basic("CAROL", "sha-pass"));
    cr_assert_eq(a.status, 0, "sha512-crypt, user names are case-insensitive");
    cr_assert_str_eq(a.user, "carol");
    cr_assert_eq(a.role, QL_AUTH_ROLE_ADMIN, "a user without a role gets ADMIN, the only one");
    cr_assert_eq(atomic_load(&E.verifies), 3);
}

Test(auth, wrong_password_and_unknown_user) {
    ql_auth_config_t cfg = base_config();
    start(&cfg);
    answer_t a = check(basic("alice", "nope"));
    cr_assert_eq(a.status, QL_EAUTH);
    cr_assert_str_eq(a.user, "");
    a = check(basic("bob", "s3cret"));
    cr_assert_eq(a.status, QL_EAUTH, "another user's password");
    a = check(basic("mallory", "s3cret"));
    cr_assert_eq(a.status, QL_EAUTH);
    /* The unknown user was verified too (against a real hash), so timing hides who exists. */
    cr_assert_eq(atomic_load(&E.verifies), 3);
    ql_auth_stats_t st;
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.failures, 3);
    cr_assert_eq(st.pending, 0);
}

Test(auth, malformed_headers_are_refused_at_once) {
    ql_auth_config_t cfg = base_config();
    start(&cfg);
    char nocolon[64] = "Basic ", emptyuser[64] = "Basic ";
    sodium_bin2base64(nocolon + 6, 58, (const unsigned char *)"alice", 5,
                      sodium_base64_VARIANT_ORIGINAL);
    sodium_bin2base64(emptyuser + 6, 58, (const unsigned char *)":s3cret", 7,
                      sodium_base64_VARIANT_ORIGINAL);
    const char *bad[] = {NULL,    "",        "Bearer abc",
                         "Basic", "Basic ",  "Basic !!!!",
                         nocolon, emptyuser, "Basicx YWxpY2U6czNjcmV0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        answer_t a = {0};
        cr_assert_eq(ql_auth_check(E.auth, bad[i], NULL, on_answer, &a), 0);
        cr_assert(a.done, "case %zu answered synchronously", i);
        cr_assert_eq(a.status, QL_EAUTH, "case %zu", i);
    }
    cr_assert_eq(atomic_load(&E.verifies), 0);
    /* Scheme case and padding are tolerated. */
    cr_assert_eq(check("basic   YWxpY2U6czNjcmV0").status, 0);
    cr_assert_eq(check("Basic YWxpY2U6czNjcmV0ZQ").status, QL_EAUTH, "unpadded, wrong pw");
}

Test(auth, cache_hit_does_not_verify_again_until_ttl) {
    ql_auth_config_t cfg = base_config();
    cfg.cache_ttl_ms = 5000;
    start(&cfg);
    const char *h = basic("alice", "s3cret");
    cr_assert_eq(check(h).status, 0);
    cr_assert_eq(atomic_load(&E.verifies), 1);
    answer_t a = {0};
    cr_assert_eq(ql_auth_check(E.auth, h, NULL, on_answer, &a), 0);
    cr_assert(a.done, "a cache hit answers synchronously");
    cr_assert_eq(a.status, 0);
    cr_assert(a.cached);
    cr_assert_str_eq(a.user, "alice");
    cr_assert_eq(atomic_load(&E.verifies), 1);
    /* Failures are never cached. */
    cr_assert_eq(check(basic("alice", "bad")).status, QL_EAUTH);
    cr_assert_eq(check(basic("alice", "bad")).status, QL_EAUTH);
    cr_assert_eq(atomic_load(&E.verifies), 3);
    /* Past the TTL the header is verified again. */
    E.now += 5000;
    a = check(h);
    cr_assert_eq(a.status, 0);
    cr_assert_not(a.cached);
    cr_assert_eq(atomic_load(&E.verifies), 4);
    ql_auth_stats_t st;
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.cache_hits, 1);
}

/* Drives the loop until no verification is in flight (10 s deadline). */
static void wait_idle(void) {
    int64_t deadline = mono_ms() + 10000;
    for (;;) {
        ql_auth_stats_t st;
        ql_auth_stats(E.auth, &st);
        if (st.pending == 0)
            return;
        cr_assert_lt(mono_ms(), deadline, "timed out waiting for the verification");
        uv_run(&E.loop, UV_RUN_ONCE);
    }
}

/* A synchronous check from peer (the cache must answer it): its answer. */
static answer_t hit_from(const char *h, const struct sockaddr_storage *peer) {
    answer_t a = {0};
    cr_assert_eq(ql_auth_check(E.auth, h, (const struct sockaddr *)peer, on_answer, &a), 0);
    cr_assert(a.done, "a cache hit answers synchronously");
    return a;
}

static answer_t hit(const char *h) {
    return hit_from(h, NULL);
}

Test(auth, a_hit_near_expiry_refreshes_the_entry_off_the_path) {
    ql_auth_config_t cfg = base_config();
    cfg.cache_ttl_ms = 4000;
    start(&cfg);
    const char *h = basic("alice", "s3cret");
    cr_assert_eq(check(h).status, 0);
    cr_assert_eq(atomic_load(&E.verifies), 1);
    /* Early in its life a hit starts nothing. */
    E.now += 2000;
    cr_assert(hit(h).cached);
    ql_auth_stats_t st;
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.pending, 0);
    /* In its last quarter the hit is answered at once and the header verified again behind it;
     * a second hit meanwhile starts no second refresh. */
    E.now += 1100;
    answer_t a = hit(h);
    cr_assert_eq(a.status, 0);
    cr_assert(a.cached);
    cr_assert(hit(h).cached);
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.pending, 1);
    wait_idle();
    cr_assert_eq(atomic_load(&E.verifies), 2);
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.refreshes, 1);
    cr_assert_eq(st.verifications, 2);
    /* Past the first verification's expiry the renewed entry still answers at once. */
    E.now += 2000;
    a = hit(h);
    cr_assert_eq(a.status, 0);
    cr_assert(a.cached);
    cr_assert_str_eq(a.user, "alice");
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.pending, 0, "early in the renewed entry's life: no refresh");
    cr_assert_eq(atomic_load(&E.verifies), 2);
}

/* Refreshes take at most half of an address's share of verifications in flight: a new header
 * from that address is never refused for them. */
Test(auth, a_refresh_leaves_the_address_its_share_of_verifications) {
    ql_auth_config_t cfg = base_config();
    cfg.cache_ttl_ms = 4000;
    cfg.max_pending_per_address = 2;
    start(&cfg);
    struct sockaddr_storage peer = addr4("10.0.0.1");
    const char *h = basic("alice", "s3cret");
    cr_assert_eq(check_from(h, &peer).status, 0);
    E.now += 3500;
    answer_t other = {0}, a = {0};
    cr_assert_eq(ql_auth_check(E.auth, basic("bob", "yes-pass"), (struct sockaddr *)&peer,
                               on_answer, &other),
                 0);
    cr_assert_eq(ql_auth_check(E.auth, h, (struct sockaddr *)&peer, on_answer, &a), 0);
    cr_assert(a.done && a.cached);
    ql_auth_stats_t st;
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.pending, 1, "a refresh took the address's last slot");
    wait_all(&other, 1);
    cr_assert_eq(other.status, 0);
    /* With the slot free again, the next hit refreshes. */
    cr_assert(hit_from(h, &peer).cached);
    wait_idle();
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.refreshes, 1);
}

Test(auth, a_refresh_that_fails_drops_the_entry) {
    ql_auth_config_t cfg = base_config();
    cfg.cache_ttl_ms = 4000;
    start(&cfg);
    const char *h = basic("alice", "s3cret");
    cr_assert_eq(check(h).status, 0);
    E.now += 3500;
    atomic_store(&E.deny, true); /* the password no longer verifies */
    cr_assert(hit(h).cached);
    wait_idle();
    cr_assert_eq(atomic_load(&E.verifies), 2);
    /* Still within the first entry's life, but not served from the cache any more. */
    answer_t a = check(h);
    cr_assert_eq(a.status, QL_EAUTH);
    cr_assert_not(a.cached);
}

Test(auth, cache_is_bounded) {
    ql_auth_config_t cfg = base_config();
    cfg.cache_max = 8; /* one set of 8 ways */
    start(&cfg);
    /* Ten distinct valid headers for alice: "Basic" scheme spelled differently. */
    char headers[10][64];
    for (int i = 0; i < 10; i++) {
        snprintf(headers[i], sizeof headers[i], "Basic%.*sYWxpY2U6czNjcmV0", i + 1, "          ");
        E.now++;
        cr_assert_eq(check(headers[i]).status, 0);
    }
    cr_assert_eq(atomic_load(&E.verifies), 10);
    /* The newest are cached, the two oldest were evicted. */
    cr_assert(check(headers[9]).cached);
    cr_assert(check(headers[2]).cached);
    cr_assert_not(check(headers[0]).cached);
}

Test(auth, concurrent_checks_of_one_header_join) {
    ql_auth_config_t cfg = base_config();
    start(&cfg);
    const char *h = basic("alice", "s3cret");
    struct sockaddr_storage p1 = addr4("10.0.0.1"), p2 = addr4("10.0.0.2");
    answer_t as[4] = {{0}};
    cr_assert_eq(ql_auth_check(E.auth, h, (struct sockaddr *)&p1, on_answer, &as[0]), 0);
    cr_assert_eq(ql_auth_check(E.auth, h, (struct sockaddr *)&p2, on_answer, &as[1]), 0);
    cr_assert_eq(ql_auth_check(E.auth, h, NULL, on_answer, &as[2]), 0);
    /* A different header is a different verification. */
    cr_assert_eq(ql_auth_check(E.auth, basic("alice", "x"), NULL, on_answer, &as[3]), 0);
    cr_assert_not(as[0].done || as[1].done || as[2].done || as[3].done);
    ql_auth_stats_t st;
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.pending, 2);
    cr_assert_eq(st.joins, 2);
    wait_all(as, 4);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(as[i].status, 0, "waiter %d", i);
        cr_assert_str_eq(as[i].user, "alice");
    }
    cr_assert_eq(as[3].status, QL_EAUTH);
    cr_assert_eq(atomic_load(&E.verifies), 2);
}

Test(auth, rate_limit_kicks_in_and_expires) {
    ql_auth_config_t cfg = base_config();
    cfg.fail_limit = 3;
    cfg.fail_window_ms = 1000;
    start(&cfg);
    struct sockaddr_storage bad = addr4("10.0.0.9"), good = addr4("10.0.0.10");
    for (int i = 0; i < 3; i++) {
        answer_t a = check_from(basic("alice", "guess"), &bad);
        cr_assert_eq(a.status, QL_EAUTH);
        cr_assert_not(a.rate_limited, "attempt %d is verified", i);
    }
    cr_assert_eq(atomic_load(&E.verifies), 3);
    /* Now even the right password is refused at once, without verification... */
    answer_t a = {0};
    cr_assert_eq(
        ql_auth_check(E.auth, basic("alice", "s3cret"), (struct sockaddr *)&bad, on_answer, &a), 0);
    cr_assert(a.done);
    cr_assert_eq(a.status, QL_EAUTH);
    cr_assert(a.rate_limited);
    cr_assert_eq(atomic_load(&E.verifies), 3);
    /* ...while another address is unaffected. */
    cr_assert_eq(check_from(basic("alice", "s3cret"), &good).status, 0);
    /* The window is counted from the first failure. */
    E.now += 999;
    cr_assert(check_from(basic("alice", "s3cret"), &bad).rate_limited);
    E.now += 1;
    a = check_from(basic("alice", "s3cret"), &bad);
    cr_assert_eq(a.status, 0);
    cr_assert(a.cached, "verified for the other address a moment ago");
    ql_auth_stats_t st;
    ql_auth_stats(E.auth, &st);
    cr_assert_eq(st.rate_limited, 2);
}

Test(auth, rate_limit_counts_verifications_in_flight) {
    ql_auth_config_t cfg = base_config();
    cfg.fail_limit = 2;
    start(&cfg);
    struct sockaddr_storage p = addr6("2001:db8::1"), same64 = addr6("2001:db8::2");
    answer_t as[3] = {{0}};
    cr_assert_eq(
        ql_auth_check(E.auth, basic("alice", "g1"), (struct sockaddr *)&p, on_answer, &as[0]), 0);
    cr_assert_eq(
        ql_auth_check(E.auth, basic("alice", "g2"), (struct sockaddr *)&same64, on_answer, &as[1]),
        0);
    /* Two guesses from one /64 are in flight: a third is refused before they finish. */
    cr_assert_eq(
        ql_auth_check(E.auth, basic("alice", "g3"), (struct sockaddr *)&p, on_answer, &as[2]), 0);
    cr_assert(as[2].done);
    cr_assert(as[2].rate_limited);
    wait_all(as, 2);
    cr_assert_eq(atomic_load(&E.verifies), 2);
    /* And the two failures keep it limited. */
    cr_assert(check_from(basic("alice", "s3cret"), &p).rate_limited);
}

Test(auth, one_users_failures_do_not_lock_out_another_user_at_the_address) {
    ql_auth_config_t cfg = base_config();
    start(&cfg);
    struct sockaddr_storage office = addr4("10.0.0.20"), home = addr4("10.0.0.21");
    /* bob logs in first, so his credentials are cached when alice starts mistyping. */
    cr_assert_eq(check_from(basic("bob", "yes-pass"), &office).status, 0);
    for (int i = 0; i < 5; i++) {
        answer_t a = check_from(basic("alice", "typo"), &office);
        cr_assert_eq(a.status, QL_EAUTH);
        cr_assert_not(a.rate_limited, "attempt %d is verified", i);
    }
    answer_t a = check_from(basic("alice", "typo"), &office);
    cr_assert(a.rate_limited, "alice is locked out at this address");
    /* bob's cached credentials and carol's fresh verification still pass at the address. */
    a = check_from(basic("bob", "yes-pass"), &office);
    cr_assert_eq(a.status, 0);
    cr_assert(a.cached);
    a = check_from(basic("carol", "sha-pass"), &office);
    cr_assert_eq(a.status, 0);
    cr_assert_not(a.cached);
    /* The lock is on (address, name), the name case-folded: ALICE is alice. alice's right
     * password is refused too at this address (letting it through would tell a guesser which
     * guess is right), and passes from another address. */
    a = check_from(basic("ALICE", "s3cret"), &office);
    cr_assert_eq(a.status, QL_EAUTH);
    cr_assert(a.rate_limited);
    cr_assert_eq(check_from(basic("alice", "s3cret"), &home).status, 0);
    a = check_from(basic("alice", "s3cret"), &office);
    cr_assert(a.rate_limited, "even once cached from the other address");
}

Test(auth, one_address_has_a_bounded_share_of_verifications) {
    ql_auth_config_t cfg = base_config();
    cfg.max_pending_per_address = 2;
    start(&cfg);
    struct sockaddr_storage sprayer = addr4("10.0.0.30"), other = addr4("10.0.0.31");
    answer_t as[5] = {{0}};
    const char *names[] = {"n1", "n2", "n3"};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ql_auth_check(E.auth, basic(names[i], "x"), (struct sockaddr *)&sprayer,
                                   on_answer, &as[i]),
                     0);
    /* Ever new names would each get their own failure record: the third is refused now. */
    cr_assert(as[2].done);
    cr_assert_eq(as[2].status, QL_ETRANSIENT);
    cr_assert_eq(ql_auth_check(E.auth, basic("alice", "s3cret"), (struct sockaddr *)&other,
                               on_answer, &as[3]),
                 0);
    cr_assert_not(as[3].done, "another address is verified");
    wait_all(as, 2);
    wait_all(&as[3], 1);
    cr_assert_eq(as[3].status, 0);
    cr_assert_eq(check_from(basic("n3", "x"), &sprayer).status, QL_EAUTH, "room again");
}

Test(auth, success_clears_failures) {
    ql_auth_config_t cfg = base_config();
    cfg.fail_limit = 2;
    start(&cfg);
    cr_assert_eq(check(basic("alice", "typo")).status, QL_EAUTH);
    cr_assert_eq(check(basic("alice", "s3cret")).status, 0);
    cr_assert_eq(check(basic("alice", "typo2")).status, QL_EAUTH);
    cr_assert_not(check(basic("bob", "yes-pass")).rate_limited, "one failure since the success");
}

Test(auth, too_many_in_flight_is_transient) {
    ql_auth_config_t cfg = base_config();
    cfg.max_pending = 1;
    start(&cfg);
    answer_t as[2] = {{0}};
    cr_assert_eq(ql_auth_check(E.auth, basic("alice", "s3cret"), NULL, on_answer, &as[0]), 0);
    cr_assert_eq(ql_auth_check(E.auth, basic("bob", "yes-pass"), NULL, on_answer, &as[1]), 0);
    cr_assert(as[1].done);
    cr_assert_eq(as[1].status, QL_ETRANSIENT);
    wait_all(as, 1);
    cr_assert_eq(as[0].status, 0);
}

Test(auth, free_with_verification_in_flight) {
    ql_auth_config_t cfg = base_config();
    start(&cfg);
    answer_t a = {0};
    cr_assert_eq(ql_auth_check(E.auth, basic("alice", "s3cret"), NULL, on_answer, &a), 0);
    ql_auth_free(E.auth);
    E.auth = NULL;
    wait_all(&a, 1);
    cr_assert_eq(a.status, QL_ESHUTDOWN);
}

Test(auth, there_is_no_builtin_user) {
    /* Kylin's ADMIN/KYLIN is public: without configured users nobody gets in, rather than
     * everybody (the server generates a password instead, see test_server.c). */
    ql_auth_config_t cfg;
    ql_auth_config_default(&cfg);
    ql_err_t err = {0};
    ql_auth_t *a = NULL;
    cr_assert_eq(ql_auth_new(&E.loop, &cfg, &a, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "no users"), "%s", err.msg);
    cr_assert_null(a);
    /* An ADMIN entry without a hash used to be the built-in default: now it is a bad entry. */
    ql_auth_user_t nohash[] = {{"ADMIN", NULL, QL_AUTH_ROLE_ADMIN}};
    cfg.users = nohash;
    cfg.n_users = 1;
    cr_assert_eq(ql_auth_new(&E.loop, &cfg, &a, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "user ADMIN") && strstr(err.msg, "qilin passwd"), "%s", err.msg);
    cr_assert_null(a);
}

Test(auth, configured_kylin_password_is_detected_and_kept_on_loopback) {
    /* An operator who wants Kylin's scripts to work configures the hash of KYLIN on purpose. */
    char kylin[crypto_pwhash_STRBYTES];
    cr_assert_eq(crypto_pwhash_str(kylin, "KYLIN", 5, crypto_pwhash_OPSLIMIT_MIN,
                                   crypto_pwhash_MEMLIMIT_MIN),
                 0);
    ql_auth_user_t users[] = {{"ADMIN", kylin, QL_AUTH_ROLE_ADMIN}};
    ql_auth_config_t cfg;
    ql_auth_config_default(&cfg);
    cfg.users = users;
    cfg.n_users = 1;
    start(&cfg);
    cr_assert(ql_auth_uses_default_password(E.auth));
    ql_err_t err = {0};
    cr_assert_eq(ql_auth_check_listen(E.auth, true, &err), 0);
    cr_assert_eq(ql_auth_check_listen(E.auth, false, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "loopback") && strstr(err.msg, "qilin passwd"), "%s", err.msg);
    answer_t a = check(basic("ADMIN", "KYLIN"));
    cr_assert_eq(a.status, 0);
    cr_assert_str_eq(a.user, "ADMIN");
    cr_assert_eq(check(basic("ADMIN", "kylin")).status, QL_EAUTH);
}

Test(auth, configured_admin_password_lifts_the_rule) {
    ql_auth_user_t users[] = {{"ADMIN", E.argon, QL_AUTH_ROLE_ADMIN}};
    ql_auth_config_t cfg;
    ql_auth_config_default(&cfg);
    cfg.users = users;
    cfg.n_users = 1;
    start(&cfg);
    cr_assert_not(ql_auth_uses_default_password(E.auth));
    cr_assert_eq(ql_auth_check_listen(E.auth, false, NULL), 0);
    cr_assert_eq(check(basic("ADMIN", "KYLIN")).status, QL_EAUTH);
}

/* A caller that knows no password is Kylin's default (qilind's generated ADMIN) spares the
 * argon2 check of KYLIN against ADMIN's hash: none is verified. */
Test(auth, no_default_password_answers_without_verifying) {
    ql_auth_user_t users[] = {{"ADMIN", E.argon, QL_AUTH_ROLE_ADMIN}};
    ql_auth_config_t cfg = base_config();
    cfg.users = users;
    cfg.n_users = 1;
    cfg.no_default_password = true;
    start(&cfg);
    cr_assert_not(ql_auth_uses_default_password(E.auth));
    cr_assert_eq(ql_auth_check_listen(E.auth, false, NULL), 0);
    cr_assert_eq(atomic_load(&E.verifies), 0, "the default password was verified");
}

Test(auth, bad_user_config_is_refused) {
    ql_auth_config_t cfg;
    ql_auth_config_default(&cfg);
    ql_err_t err = {0};
    ql_auth_t *a = NULL;
    ql_auth_user_t md5[] = {{"old", "$1$abc$0123456789abcdef012345", QL_AUTH_ROLE_ADMIN}};
    cfg.users = md5;
    cfg.n_users = 1;
    cr_assert_eq(ql_auth_new(&E.loop, &cfg, &a, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "user old"), "%s", err.msg);
    ql_auth_user_t plain[] = {{"p", "secret", QL_AUTH_ROLE_ADMIN}};
    cfg.users = plain;
    cr_assert_eq(ql_auth_new(&E.loop, &cfg, &a, &err), QL_EINVAL);
    ql_auth_user_t dup[] = {{"x", E.argon, QL_AUTH_ROLE_ADMIN}, {"X", E.sha512, 0}};
    cfg.users = dup;
    cfg.n_users = 2;
    cr_assert_eq(ql_auth_new(&E.loop, &cfg, &a, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "twice"), "%s", err.msg);
    ql_auth_user_t colon[] = {{"a:b", E.argon, QL_AUTH_ROLE_ADMIN}};
    cfg.users = colon;
    cfg.n_users = 1;
    cr_assert_eq(ql_auth_new(&E.loop, &cfg, &a, &err), QL_EINVAL);
}

Test(auth, hash_password_round_trip) {
    char out[QL_AUTH_HASH_MAX];
    cr_assert_eq(ql_auth_hash_password("n3w-pass", out, sizeof out), 0);
    cr_assert_eq(strncmp(out, "$argon2id$", 10), 0, "%s", out);
    cr_assert_eq(ql_auth_verify_hash(out, "n3w-pass", NULL), 0);
    cr_assert_eq(ql_auth_verify_hash(out, "n3w-pas", NULL), QL_EAUTH);
    cr_assert_eq(ql_auth_hash_password("x", out, 16), QL_EINVAL);
    cr_assert_eq(ql_auth_verify_hash(E.yescrypt, "yes-pass", NULL), 0);
    cr_assert_eq(ql_auth_verify_hash(E.sha512, "yes-pass", NULL), QL_EAUTH);
    cr_assert_eq(ql_auth_verify_hash("plain", "plain", NULL), QL_EINVAL);
    cr_assert_eq(ql_auth_verify_hash("$6$broken", "x", NULL), QL_EAUTH);
}

Test(auth, roles) {
    ql_auth_role_t r;
    cr_assert_eq(ql_auth_role_parse("admin", &r), 0);
    cr_assert_eq(r, QL_AUTH_ROLE_ADMIN);
    cr_assert_eq(ql_auth_role_parse("ROOT", &r), QL_EINVAL);
    cr_assert_str_eq(ql_auth_role_name(QL_AUTH_ROLE_ADMIN), "ADMIN");
}
