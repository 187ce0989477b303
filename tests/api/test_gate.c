/*
 * The gate's pure decisions as tables (api/api_gate.c): which Host values name the server for
 * each kind of listen address, which Content-Types a write may have, and which Origin values a
 * write may come from. The process-level behaviour is in test_security.c.
 */
#include <criterion/criterion.h>

#include "api/api_int.h"

typedef struct host_case {
    const char *listen;
    const char *host;
    bool ok;
} host_case_t;

static const char *const extra[] = {"qilin.example.com"};

static const host_case_t host_cases[] = {
    /* loopback listen: the address and the loopback names, with or without a port */
    {"127.0.0.1", "127.0.0.1:7070", true},
    {"127.0.0.1", "127.0.0.1", true},
    {"127.0.0.1", "localhost:7070", true},
    {"127.0.0.1", "LOCALHOST", true},
    {"127.0.0.1", "[::1]:7070", true},
    {"127.0.0.1", "[0:0::1]", true},
    {"127.0.0.1", "qilin.example.com:7070", true}, /* qilin.server.allowed-hosts */
    {"127.0.0.1", "evil.example:7070", false},
    {"127.0.0.1", "evil.example", false},
    {"127.0.0.1", "127.0.0.2", false},
    {"127.0.0.1", "localhost.evil.example", false},
    {"127.0.0.1", "10.0.0.5:7070", false},
    /* malformed values */
    {"127.0.0.1", "", false},
    {"127.0.0.1", ":7070", false},
    {"127.0.0.1", "127.0.0.1:", false},
    {"127.0.0.1", "127.0.0.1:70x", false},
    {"127.0.0.1", "127.0.0.1:7070:1", false},
    {"127.0.0.1", "[::1", false},
    {"127.0.0.1", "[::1]x", false},
    {"127.0.0.1", "local host", false},
    {"127.0.0.1", "localhost/x", false},
    /* a specific address: itself and the allowed names, not the loopback names */
    {"10.0.0.5", "10.0.0.5:7070", true},
    {"10.0.0.5", "localhost:7070", false},
    {"10.0.0.5", "10.0.0.6", false},
    {"10.0.0.5", "qilin.example.com", true},
    /* every address: any IP literal and the loopback names; other names only when allowed */
    {"0.0.0.0", "192.168.1.20:7070", true},
    {"0.0.0.0", "[fe80::1]:7070", true},
    {"0.0.0.0", "localhost", true},
    {"0.0.0.0", "qilin.example.com", true},
    {"0.0.0.0", "evil.example", false},
    {"::", "[2001:db8::1]", true},
    {"::", "evil.example:7070", false},
    /* a listen name */
    {"jobs.local", "JOBS.local:7070", true},
    {"jobs.local", "localhost", false},
};

Test(gate, host_table) {
    for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
        const host_case_t *c = &host_cases[i];
        ql_api_hosts_t h;
        cr_assert_eq(ql_api_hosts_init(&h, c->listen, extra, 1), 0);
        bool got = ql_api_host_allowed(&h, c->host);
        ql_api_hosts_free(&h);
        cr_expect_eq(got, c->ok, "listen %s, Host '%s': %s, expected %s", c->listen, c->host,
                     got ? "allowed" : "refused", c->ok ? "allowed" : "refused");
    }
}

Test(gate, host_missing_is_refused) {
    ql_api_hosts_t h;
    cr_assert_eq(ql_api_hosts_init(&h, "127.0.0.1", NULL, 0), 0);
    cr_assert_not(ql_api_host_allowed(&h, NULL));
    ql_api_hosts_free(&h);
}

Test(gate, write_content_types) {
    static const struct {
        const char *ct;
        bool ok;
    } cases[] = {
        {"application/json", true},
        {"application/json;charset=utf-8", true},
        {"Application/JSON; charset=UTF-8", true},
        {"application/vnd.apache.kylin-v4-public+json", true},
        {"application/vnd.apache.kylin-v4+json;charset=utf-8", true},
        {"application/yaml", true},
        {"application/x-yaml", true},
        {"text/yaml", true},
        {NULL, false},
        {"", false},
        {"text/plain", false},
        {"text/plain;charset=utf-8", false},
        {"application/x-www-form-urlencoded", false},
        {"multipart/form-data; boundary=x", false},
        {"application/jsonx", false},
        {"text/json", false},
        {"application/+json", false},
        {"text/plain+json", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(ql_api_write_type_ok(cases[i].ct), cases[i].ok, "Content-Type '%s'",
                     cases[i].ct ? cases[i].ct : "(none)");
}

Test(gate, write_origins) {
    static const struct {
        const char *origin, *host;
        bool ok;
    } cases[] = {
        {NULL, "127.0.0.1:7070", true},
        {"http://127.0.0.1:7070", "127.0.0.1:7070", true},
        {"HTTP://LOCALHOST:7070", "localhost:7070", true},
        {"http://127.0.0.1:7070/", "127.0.0.1:7070", true},
        {"http://evil.example", "127.0.0.1:7070", false},
        {"http://127.0.0.1:7071", "127.0.0.1:7070", false},
        {"http://127.0.0.1", "127.0.0.1:7070", false},
        {"http://127.0.0.1:7070.evil.example", "127.0.0.1:7070", false},
        {"http://127.0.0.1:7070/x", "127.0.0.1:7070", false},
        {"null", "127.0.0.1:7070", false},
        {"", "127.0.0.1:7070", false},
        {"http://127.0.0.1:7070", NULL, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(ql_api_origin_ok(cases[i].origin, cases[i].host), cases[i].ok,
                     "Origin '%s', Host '%s'", cases[i].origin ? cases[i].origin : "(none)",
                     cases[i].host ? cases[i].host : "(none)");
}
