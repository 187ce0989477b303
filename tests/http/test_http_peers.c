/*
 * The per-address connection counts behind max_connections_per_address (http/http_peers.c):
 * keys (IPv4, IPv6 /64), and the open-addressing table checked against a plain array model
 * through growth and removals in a scrambled order (backward-shift deletion must keep every
 * remaining key findable).
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <string.h>

#include "http/http_int.h"

static void key_of(const char *ip, unsigned char out[QL_HTTP_PEER_KEY]) {
    struct sockaddr_storage ss = {0};
    if (strchr(ip, ':'))
        cr_assert_eq(uv_ip6_addr(ip, 80, (struct sockaddr_in6 *)&ss), 0);
    else
        cr_assert_eq(uv_ip4_addr(ip, 80, (struct sockaddr_in *)&ss), 0);
    ql_http_peer_key((struct sockaddr *)&ss, out);
}

Test(http_peers, keys_group_an_ipv6_slash_64_and_map_ipv4) {
    unsigned char a[16], b[16], c[16], d[16], e[16];
    key_of("2001:db8:1:2::1", a);
    key_of("2001:db8:1:2:ffff::9", b);
    key_of("2001:db8:1:3::1", c);
    key_of("10.1.2.3", d);
    key_of("::ffff:10.1.2.3", e);
    cr_assert_eq(memcmp(a, b, 16), 0, "one /64 is one client");
    cr_assert_neq(memcmp(a, c, 16), 0);
    cr_assert_eq(memcmp(d, e, 16), 0, "IPv4 and its mapped IPv6 form are one address");
}

Test(http_peers, counts_match_a_model_through_growth_and_removal) {
    enum { N = 3000 };
    static unsigned char keys[N][16];
    static unsigned model[N];
    ql_http_peers_t t;
    cr_assert_eq(ql_http_peers_init(&t), 0);
    for (size_t i = 0; i < N; i++) {
        memset(keys[i], 0, 16);
        keys[i][10] = keys[i][11] = 0xff;
        keys[i][12] = 10;
        keys[i][13] = (unsigned char)(i >> 16);
        keys[i][14] = (unsigned char)(i >> 8);
        keys[i][15] = (unsigned char)i;
    }
    /* Key i gets i % 3 + 1 connections. */
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k <= i % 3; k++) {
            cr_assert_eq(ql_http_peers_add(&t, keys[i]), 0);
            model[i]++;
        }
    cr_assert_eq(t.used, N);
    /* Remove one connection at a time in a scrambled order (7919 is prime to N's factors). */
    size_t steps = 0;
    for (size_t round = 0; round < 3; round++) {
        for (size_t j = 0; j < N; j++) {
            size_t i = (j * 7919) % N;
            if (!model[i])
                continue;
            ql_http_peers_remove(&t, keys[i]);
            model[i]--;
            if (++steps % 97 != 0)
                continue;
            /* One assertion per check: --full-stats records every assertion made. */
            size_t wrong = 0, first = N;
            for (size_t x = 0; x < N; x++)
                if (ql_http_peers_count(&t, keys[x]) != model[x] && wrong++ == 0)
                    first = x;
            cr_assert_eq(wrong, 0, "%zu keys miscounted after %zu removals, first key %zu", wrong,
                         steps, first);
        }
    }
    size_t left = 0;
    for (size_t x = 0; x < N; x++)
        left += ql_http_peers_count(&t, keys[x]);
    cr_assert_eq(left, 0);
    cr_assert_eq(t.used, 0);
    ql_http_peers_free(&t);
}
