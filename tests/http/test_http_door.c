/*
 * The HTTP front door: what one client can do to the others. Connections per address, the
 * first-request timeout, the reserve and eviction for authenticated clients, and requests the
 * parser cannot even begin (pipelined junk, a lone invalid request, "Host : x"). Clients bind
 * to different 127.0.0.x addresses to be different clients (the harness: http_util.h).
 */
#include "tests/http/http_util.h"

#define AUTH_ALICE "Authorization: Basic YWxpY2U6czNjcmV0\r\n" /* alice:s3cret */

TestSuite(http_door, .fini = srv_stop, .timeout = 60);

static void close_fds(int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Opens per_addr idle connections from each of 127.0.0.first .. 127.0.0.(first + n_addr - 1)
 * into fds (room for n_addr * per_addr); they send nothing. */
static void open_idle(int *fds, int first, int n_addr, int per_addr) {
    for (int a = 0; a < n_addr; a++) {
        char ip[32];
        snprintf(ip, sizeof ip, "127.0.0.%d", first + a);
        for (int i = 0; i < per_addr; i++)
            fds[a * per_addr + i] = fd_connect_from(ip);
    }
}

Test(http_door, one_address_cannot_fill_the_server_for_another) {
    ql_http_limits_t lim = {.max_connections = 100, .max_connections_per_address = 10};
    srv_start(&lim);
    enum { FLOOD = 300 };
    static int fds[FLOOD];
    open_idle(fds, 2, 1, FLOOD);
    WAIT_FOR(counters().rejected_address == FLOOD - 10);
    cr_assert_eq(counters().active, 10);
    /* A refused connection is told why. */
    client_t refused = {.fd = fds[FLOOD - 1]};
    response_t r;
    cr_assert_eq(cl_response(&refused, &r), 0);
    cr_assert_eq(r.status, 503);
    cr_assert(strstr(r.body, "from your address"), "%s", r.body);
    cr_assert_str_eq(find_header(&r, "Retry-After"), "1");
    /* Another address is served, and so is the flooding one once it closes its connections. */
    client_t *c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    close_fds(fds, FLOOD);
    WAIT_FOR(counters().active == 1);
    client_t *again = cl_connect_from("127.0.0.2");
    cl_send(again, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(again, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_close(again);
    cl_close(c);
}

Test(http_door, a_connection_that_sends_nothing_is_closed_after_the_first_request_timeout) {
    ql_http_limits_t lim = {
        .first_request_timeout_ms = 200, .idle_timeout_ms = 60000, .request_timeout_ms = 60000};
    srv_start(&lim);
    int64_t t0 = now_ms();
    client_t *silent = cl_connect();
    cr_assert(cl_closed(silent), "closed before the client's 5 s read timeout");
    int64_t took = now_ms() - t0;
    cr_assert(took >= 150 && took < 3000, "closed after %lld ms", (long long)took);
    cr_assert_eq(counters().timeouts_first, 1);
    /* A first request that trickles in gets 408 after the same short time. */
    client_t *slow = cl_connect();
    cl_send(slow, "GET /echo HTTP/1.1\r\nHo");
    response_t r;
    cr_assert_eq(cl_response(slow, &r), 0);
    cr_assert_eq(r.status, 408);
    cr_assert(strstr(r.body, "headers not received within 200 ms"), "%s", r.body);
    /* A connection that delivered a request is then under the idle timeout only. */
    client_t *ok = cl_connect();
    cl_send(ok, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(ok, &r), 0);
    struct pollfd p = {.fd = ok->fd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 600), 0, "still open, nothing sent, three timeouts later");
    cl_send(ok, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(ok, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(counters().timeouts_first, 2);
    cl_close(ok);
    cl_close(slow);
    cl_close(silent);
}

Test(http_door, an_idle_unauthenticated_connection_gives_way_when_the_server_is_full) {
    ql_http_limits_t lim = {.max_connections = 2};
    srv_start(&lim);
    client_t *a = cl_connect(), *b = cl_connect();
    response_t r;
    cl_send(a, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(a, &r), 0);
    WAIT_FOR(counters().active == 2);
    client_t *c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(cl_closed(a), "the oldest idle connection gave way");
    cr_assert_eq(counters().evicted, 1);
    cr_assert_eq(counters().rejected, 0);
    cl_close(a);
    cl_close(b);
    cl_close(c);
}

Test(http_door, an_authenticated_client_is_served_when_unauthenticated_connections_fill_it) {
    ql_http_limits_t lim = {
        .max_connections = 20, .max_connections_per_address = 5, .auth_reserve = 4};
    srv_start(&lim);
    srv_use_alice();
    /* Ten addresses try five idle connections each: more than the server holds. */
    enum { FLOOD = 50 };
    static int fds[FLOOD], more[FLOOD];
    open_idle(fds, 2, 10, 5);
    WAIT_FOR(counters().accepted + counters().rejected == FLOOD);
    cr_assert_eq(counters().active, 20);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /kylin/api/user HTTP/1.1\r\nHost: t\r\n" AUTH_ALICE "\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_str_eq(r.body, "user=alice role=ADMIN");
    cr_assert_null(find_header(&r, "Connection"), "kept open");
    /* More idle connections keep coming: the authenticated one is never the one to go. */
    open_idle(more, 20, 10, 5);
    WAIT_FOR(counters().accepted + counters().rejected == 2 * FLOOD + 1);
    cl_send(c, "GET /kylin/api/user HTTP/1.1\r\nHost: t\r\n" AUTH_ALICE "\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(counters().active, 20);
    close_fds(fds, FLOOD);
    close_fds(more, FLOOD);
    cl_close(c);
}

Test(http_door, a_reserved_slot_is_kept_only_by_authenticating) {
    ql_http_limits_t lim = {
        .max_connections = 20, .max_connections_per_address = 5, .auth_reserve = 4};
    srv_start(&lim);
    srv_use_alice();
    /* Sixteen unauthenticated connections take every slot but the reserve. */
    static int fds[16];
    open_idle(fds, 2, 4, 4);
    WAIT_FOR(counters().accepted == 16);
    /* A newcomer without credentials is answered, then closed. */
    client_t *anon = cl_connect_from("127.0.0.9");
    response_t r;
    cl_send(anon, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\nGET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(anon, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(find_header(&r, "Connection"), "close");
    cr_assert(cl_closed(anon));
    cr_assert_eq(handled(), 1, "the pipelined second request was never run");
    cr_assert_eq(counters().probation_closed, 1);
    /* Wrong credentials are no better; right ones keep the connection. */
    client_t *wrong = cl_connect_from("127.0.0.9");
    cl_send(wrong, "GET /kylin/api/user HTTP/1.1\r\nHost: t\r\n"
                   "Authorization: Basic YWxpY2U6d3Jvbmc=\r\n\r\n");
    cr_assert_eq(cl_response(wrong, &r), 0);
    cr_assert_eq(r.status, 401);
    cr_assert(cl_closed(wrong));
    client_t *alice = cl_connect_from("127.0.0.9");
    cl_send(alice, "GET /kylin/api/user HTTP/1.1\r\nHost: t\r\n" AUTH_ALICE "\r\n");
    cr_assert_eq(cl_response(alice, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_send(alice, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(alice, &r), 0);
    cr_assert_eq(r.status, 200, "once authenticated, any request");
    cr_assert_null(find_header(&r, "Connection"));
    close_fds(fds, 16);
    cl_close(anon);
    cl_close(wrong);
    cl_close(alice);
}

Test(http_door, junk_after_a_pipelined_request_gets_its_answer_then_400_and_close) {
    srv_start(NULL);
    client_t *c = cl_connect();
    /* A POST whose handler answers later (as a store write does), then a byte that cannot
     * start a method. */
    static const char req[] = "POST /hold HTTP/1.1\r\nHost: t\r\nContent-Length: 17\r\n\r\n"
                              "{\"name\":\"pipe_x\"}\x00";
    cl_sendn(c, req, sizeof req - 1);
    WAIT_FOR(n_held() == 1);
    cr_assert(cl_nothing_yet(c), "the 400 waits behind the POST's answer");
    on_loop(&S, do_respond_held, (void *)0);
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "held 0 path=/hold");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 400);
    cr_assert(strstr(r.body, "malformed request"), "%s", r.body);
    cr_assert_str_eq(find_header(&r, "Connection"), "close");
    cr_assert(cl_closed(c));
    cr_assert_eq(handled(), 1, "the POST ran once");
    cl_close(c);
}

Test(http_door, a_lone_invalid_request_gets_400_then_close) {
    srv_start(NULL);
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {"\x00", 1},
        {"get /echo HTTP/1.1\r\n\r\n", 22},
        {"{\"name\":\"x\"}\r\n\r\n", 16},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cl_expect_400_close(bad[i].bytes, bad[i].len, i);
    cr_assert_eq(handled(), 0);
}

Test(http_door, whitespace_before_a_header_colon_gets_400) {
    srv_start(NULL);
    const char *bad[] = {
        "GET /echo HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET /echo HTTP/1.1\r\nHost\t: x\r\n\r\n",
        "GET /echo HTTP/1.1\r\n Host: x\r\n\r\n",
        "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cl_expect_400_close(bad[i], strlen(bad[i]), i);
    cr_assert_eq(handled(), 0);
    /* Whitespace after the colon is fine. */
    client_t *c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.1\r\nHost:   x  \r\n\r\n");
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_close(c);
}
