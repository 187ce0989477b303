/*
 * The HTTP server, end to end: a real server on 127.0.0.1 port 0, its loop on a thread, and
 * plain blocking sockets as clients (the harness is tests/http/http_util.h).
 */
#include "tests/http/http_util.h"

/* ---- tests ---- */

TestSuite(http, .fini = srv_stop, .timeout = 60);

Test(http, get_and_post) {
    srv_start(NULL);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /echo?x=1 HTTP/1.1\r\nHost: t\r\nUser-Agent: crit\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "method=GET path=/echo route=echo"), "%s", r.body);
    cr_assert(strstr(r.body, "x=1 "), "%s", r.body);
    cr_assert(strstr(r.body, "ua=crit peer_lo=1"), "%s", r.body);
    cr_assert_str_eq(find_header(&r, "Content-Type"), "text/plain");
    cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "method=POST"), "%s", r.body);
    cr_assert(strstr(r.body, "body=hello world"), "%s", r.body);
    cr_assert_eq(stat_of("echo", 200), 1);
    cr_assert_eq(stat_of("echo_post", 200), 1);
    cl_close(c);
}

Test(http, keep_alive_many_requests_one_connection) {
    srv_start(NULL);
    client_t *c = cl_connect();
    response_t r;
    for (int i = 0; i < 5; i++) {
        char req[128];
        snprintf(req, sizeof req, "GET /echo?x=%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
        cl_send(c, req);
        cr_assert_eq(cl_response(c, &r), 0);
        cr_assert_eq(r.status, 200);
        char want[16];
        snprintf(want, sizeof want, "x=%d ", i);
        cr_assert(strstr(r.body, want), "%s", r.body);
        cr_assert_null(find_header(&r, "Connection"));
    }
    ql_http_counters_t k = counters();
    cr_assert_eq(k.accepted, 1);
    cr_assert_eq(k.active, 1);
    cr_assert_eq(k.requests, 5);
    cl_close(c);
}

Test(http, connection_close_and_http10) {
    srv_start(NULL);
    response_t r;
    client_t *c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(find_header(&r, "Connection"), "close");
    cr_assert(cl_closed(c));
    cl_close(c);

    c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.0\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(cl_closed(c), "HTTP/1.0 without keep-alive closes");
    cl_close(c);

    c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_str_eq(find_header(&r, "Connection"), "keep-alive");
    cl_send(c, "GET /echo?x=2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert(strstr(r.body, "x=2 "));
    cl_close(c);
}

Test(http, head_has_length_but_no_body) {
    srv_start(NULL);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response_m(c, &r, true), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_gt(strtoul(find_header(&r, "Content-Length"), NULL, 10), 0);
    /* The next response starts right after the headers: no body bytes were sent. */
    cl_send(c, "GET /echo?x=after HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert(strstr(r.body, "x=after"), "%s", r.body);
    cl_close(c);
}

Test(http, pipelining_keeps_order_behind_a_deferred_response) {
    srv_start(NULL);
    client_t *c = cl_connect();
    cl_send(c, "GET /hold?x=0 HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /echo?x=1 HTTP/1.1\r\nHost: t\r\n\r\n"
               "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
    /* All three are parsed and handled although the first has no response yet... */
    WAIT_FOR(handled() == 3);
    /* ...and the two synchronous answers wait behind it. */
    on_loop(&S, do_counters, &(counters_arg_t){0});
    cr_assert(cl_nothing_yet(c), "a response overtook the pending first one");
    on_loop(&S, do_respond_held, (void *)0);
    cr_assert_eq(S.held_respond_rc, 0);
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_str_eq(r.body, "held 0 path=/hold");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert(strstr(r.body, "x=1 "), "%s", r.body);
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert(strstr(r.body, "body=abc"), "%s", r.body);
    cl_close(c);
}

Test(http, pipelining_back_pressure_at_max_pipeline) {
    ql_http_limits_t lim = {.max_pipeline = 2};
    srv_start(&lim);
    client_t *c = cl_connect();
    cl_send(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /echo?x=1 HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /echo?x=2 HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /echo?x=3 HTTP/1.1\r\nHost: t\r\n\r\n");
    WAIT_FOR(handled() == 2);
    /* Two loop round trips: the bytes are in, yet no third request is parsed. */
    on_loop(&S, do_counters, &(counters_arg_t){0});
    on_loop(&S, do_counters, &(counters_arg_t){0});
    cr_assert_eq(handled(), 2);
    on_loop(&S, do_respond_held, (void *)0);
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_str_eq(r.body, "held 0 path=/hold");
    for (int i = 1; i <= 3; i++) {
        cr_assert_eq(cl_response(c, &r), 0);
        char want[16];
        snprintf(want, sizeof want, "x=%d ", i);
        cr_assert(strstr(r.body, want), "%d: %s", i, r.body);
    }
    cr_assert_eq(handled(), 4);
    cl_close(c);
}

Test(http, chunked_body_is_joined) {
    srv_start(NULL);
    client_t *c = cl_connect();
    cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
               "5\r\nhello\r\n");
    cl_send(c, "5\r\n worl\r\n1;ext=1\r\nd\r\n0\r\nX-Trailer: t\r\n\r\n");
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "body=hello world"), "%s", r.body);
    cl_close(c);
}

Test(http, expect_100_continue) {
    srv_start(NULL);
    client_t *c = cl_connect();
    cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n"
               "\r\n");
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 100);
    cl_send(c, "data");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "body=data"), "%s", r.body);
    cl_close(c);
}

Test(http, body_too_large_by_content_length) {
    ql_http_limits_t lim = {.max_body_bytes = 1024};
    srv_start(&lim);
    client_t *c = cl_connect();
    /* With Expect, the client must get 413 instead of 100: the body is never read. */
    cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
               "Expect: 100-continue\r\n\r\n");
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 413);
    cr_assert(strstr(r.body, "\"error_code\":\"QL-00021\""), "%s", r.body);
    cr_assert_str_eq(find_header(&r, "Connection"), "close");
    cr_assert(cl_closed(c));
    cr_assert_eq(handled(), 0);
    cr_assert_eq(stat_of("none", 413), 1);
    cl_close(c);
}

Test(http, body_too_large_while_streaming) {
    ql_http_limits_t lim = {.max_body_bytes = 1024};
    srv_start(&lim);
    client_t *c = cl_connect();
    cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    char chunk[600];
    memset(chunk, 'a', sizeof chunk);
    for (int i = 0; i < 4; i++) {
        cl_send(c, "258\r\n"); /* 600 */
        cl_sendn(c, chunk, sizeof chunk);
        cl_send(c, "\r\n");
    }
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 413);
    cr_assert(cl_closed(c));
    cr_assert_eq(handled(), 0);
    cl_close(c);
}

Test(http, headers_too_large) {
    ql_http_limits_t lim = {.max_header_bytes = 4096, .max_headers = 10};
    srv_start(&lim);
    client_t *c = cl_connect();
    char big[6000];
    memset(big, 'v', sizeof big);
    big[sizeof big - 1] = '\0';
    cl_send(c, "GET /echo HTTP/1.1\r\nHost: t\r\nX-Big: ");
    cl_send(c, big);
    cl_send(c, "\r\n\r\n");
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 431);
    cr_assert(cl_closed(c));
    cl_close(c);

    /* Many small headers: the count limit. */
    c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.1\r\n");
    for (int i = 0; i < 12; i++) {
        char h[32];
        snprintf(h, sizeof h, "X-H%d: %d\r\n", i, i);
        cl_send(c, h);
    }
    cl_send(c, "\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 431);
    cl_close(c);

    /* A long URL counts too. */
    c = cl_connect();
    cl_send(c, "GET /echo?q=");
    cl_send(c, big);
    cl_send(c, " HTTP/1.1\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 431);
    cl_close(c);
    cr_assert_eq(handled(), 0);
}

Test(http, malformed_requests_get_400_and_close) {
    srv_start(NULL);
    const char *bad[] = {
        "GARBAGE\r\n\r\n",
        "GET /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "GET /echo HTTP/1.1\r\nBad Header\r\n\r\n",
        "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        /* one request in two literals (parenthesised: the concatenation is meant) */
        ("POST /echo HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\r\n0\r\n\r\n"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cl_expect_400_close(bad[i], strlen(bad[i]), i);
    /* A bad escape in the path is answered 400 but the connection survives. */
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /echo%zz HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 400);
    cl_send(c, "GET /ec%68o?x=%00 HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 400, "an encoded NUL is refused");
    cl_send(c, "GET /ec%68o HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_close(c);
    cr_assert_eq(handled(), 1);
    cr_assert_geq(counters().bad_requests, 6);
}

Test(http, router_404_405_params_and_query) {
    srv_start(NULL);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 404);
    cr_assert(strstr(r.body, "\"code\":\"999\""), "%s", r.body);

    cl_send(c, "DELETE /kylin/api/models/m1/segments HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(find_header(&r, "Allow"), "PUT, POST");

    cl_send(c, "PUT /kylin/api/models/my%20model/segments?project=p%2B1&ids=a,b&ids=c%2Cd"
               "&x=y+z&ids= HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "path=/kylin/api/models/my model/segments"), "%s", r.body);
    cr_assert(strstr(r.body, "route=segments_update pattern=/kylin/api/models/{model}/segments "
                             "model=my model project=p+1 x=y z"),
              "%s", r.body);
    cr_assert(strstr(r.body, "ids=3:a,b,c,d "), "%s", r.body);
    cr_assert_eq(stat_of("segments_update", 200), 1);
    cr_assert_eq(stat_of("none", 404), 1);
    cr_assert_eq(stat_of("none", 405), 1);
    cl_close(c);
}

Test(http, error_envelope_and_extra_headers) {
    srv_start(NULL);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /error HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 409);
    cr_assert_str_eq(r.body, "{\"code\":\"999\",\"data\":null,\"msg\":\"segment \\\"s1\\\" "
                             "overlaps\",\"error_code\":\"KE-010022202\"}");
    cr_assert_str_eq(find_header(&r, "X-Good"), "yes");
    cr_assert_null(find_header(&r, "Injected"));
    cr_assert_str_eq(find_header(&r, "Content-Type"), "application/json;charset=utf-8");
    cl_close(c);
}

/* The handler's answer, read on the loop thread: the client can have the response before the
 * handler has stored what ql_http_respond returned. */
static void do_read_respond_rc(srv_t *s, void *arg) {
    *(int *)arg = s->held_respond_rc;
}

Test(http, invalid_status_becomes_500) {
    srv_start(NULL);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /badstatus HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 500);
    int rc;
    on_loop(&S, do_read_respond_rc, &rc);
    cr_assert_eq(rc, QL_EINVAL);
    cl_send(c, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0, "the connection is still in sync");
    cr_assert_eq(r.status, 200);
    cl_close(c);
}

Test(http, slow_client_gets_408_without_stalling_others) {
    ql_http_limits_t lim = {.request_timeout_ms = 300, .idle_timeout_ms = 60000};
    srv_start(&lim);
    client_t *slow = cl_connect();
    int64_t start = now_ms();
    /* Trickle header bytes: each byte would reset an idle timer, never the request timer. */
    const char *req = "GET /echo HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    size_t sent = 0;
    bool answered = false;
    client_t *other = cl_connect();
    response_t r;
    cl_send(other, "GET /echo?x=fast HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(other, &r), 0, "another client is served meanwhile");
    cr_assert_eq(r.status, 200);
    while (!answered && sent < strlen(req) && now_ms() - start < 5000) {
        cl_sendn(slow, req + sent++, 1);
        struct pollfd p = {.fd = slow->fd, .events = POLLIN};
        answered = poll(&p, 1, 20) == 1;
    }
    cr_assert(answered, "no 408 while trickling");
    cr_assert_eq(cl_response(slow, &r), 0);
    cr_assert_eq(r.status, 408);
    cr_assert_geq(now_ms() - start, 250);
    cr_assert(cl_closed(slow));
    cr_assert_eq(counters().timeouts_request, 1);
    /* The other connection is still usable. */
    cl_send(other, "GET /echo?x=again HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(other, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_close(slow);
    cl_close(other);
}

Test(http, idle_connection_is_closed) {
    ql_http_limits_t lim = {.idle_timeout_ms = 200};
    srv_start(&lim);
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    int64_t start = now_ms();
    cr_assert(cl_closed(c));
    cr_assert_geq(now_ms() - start, 150);
    WAIT_FOR(counters().active == 0);
    cr_assert_eq(counters().timeouts_idle, 1);
    cl_close(c);
}

Test(http, client_that_does_not_read_is_closed) {
    ql_http_limits_t lim = {.send_timeout_ms = 300};
    srv_start(&lim);
    client_t *c = cl_connect();
    int small = 4096;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    cl_send(c, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    /* The client reads nothing: no write progress, so the send deadline closes it. */
    WAIT_FOR(counters().timeouts_send == 1);
    WAIT_FOR(counters().active == 0);
    cl_close(c);
}

Test(http, held_request_survives_client_disconnect) {
    srv_start(NULL);
    client_t *c = cl_connect();
    cl_send(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    WAIT_FOR(n_held() == 1);
    cl_close(c);
    WAIT_FOR(counters().active == 0);
    on_loop(&S, do_respond_held, (void *)0);
    cr_assert(S.held_gone);
    cr_assert_eq(S.held_respond_rc, UV_ECONNRESET);
    cr_assert_eq(counters().responses_dropped, 1);
}

Test(http, held_request_survives_server_close) {
    srv_start(NULL);
    client_t *c = cl_connect();
    cl_send(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    WAIT_FOR(n_held() == 1);
    on_loop(&S, do_close_server, NULL);
    cr_assert(cl_closed(c));
    WAIT_FOR(S.server_closed);
    /* The connection's handles are closed and the server is done; the request still works. */
    on_loop(&S, do_respond_held, (void *)0);
    cr_assert(S.held_gone);
    cr_assert_eq(S.held_respond_rc, UV_ECONNRESET);
    cl_close(c);
}

Test(http, max_connections_gets_503) {
    ql_http_limits_t lim = {.max_connections = 2};
    srv_start(&lim);
    client_t *a = cl_connect(), *b = cl_connect();
    response_t r;
    /* Both connections have a request with a handler: neither may give way to a newcomer (an
     * idle one would, see test_http_door.c). */
    cl_send(a, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    cl_send(b, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    WAIT_FOR(n_held() == 2);
    client_t *third = cl_connect();
    cr_assert_eq(cl_response(third, &r), 0);
    cr_assert_eq(r.status, 503);
    cr_assert(strstr(r.body, "too many connections"), "%s", r.body);
    cr_assert(cl_closed(third));
    cr_assert_eq(counters().rejected, 1);
    on_loop(&S, do_respond_held, (void *)1);
    on_loop(&S, do_respond_held, (void *)0);
    cr_assert_eq(cl_response(a, &r), 0);
    cr_assert_eq(cl_response(b, &r), 0);
    /* A freed slot is usable again. */
    cl_close(a);
    WAIT_FOR(counters().active == 1);
    client_t *d = cl_connect();
    cl_send(d, "GET /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(d, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_close(b);
    cl_close(third);
    cl_close(d);
}

Test(http, client_half_close_gets_queued_answers_but_drops_deferred_ones) {
    srv_start(NULL);
    response_t r;
    /* Answers already given are delivered after the client's EOF... */
    client_t *c = cl_connect();
    cl_send(c,
            "GET /echo?x=1 HTTP/1.1\r\nHost: t\r\n\r\nGET /echo?x=2 HTTP/1.1\r\nHost: t\r\n\r\n");
    shutdown(c->fd, SHUT_WR);
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert(strstr(r.body, "x=1 "), "%s", r.body);
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert(strstr(r.body, "x=2 "), "%s", r.body);
    cr_assert(cl_closed(c));
    cl_close(c);
    /* ...but EOF while a handler works means the client is gone. */
    c = cl_connect();
    cl_send(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
    WAIT_FOR(n_held() == 1);
    shutdown(c->fd, SHUT_WR);
    cr_assert(cl_closed(c));
    cr_assert_eq(c->len, 0);
    on_loop(&S, do_respond_held, (void *)0);
    cr_assert(S.held_gone);
    cr_assert_eq(S.held_respond_rc, UV_ECONNRESET);
    cl_close(c);
}

Test(http, auth_route_401_then_200) {
    srv_start(NULL);
    srv_use_alice();
    client_t *c = cl_connect();
    response_t r;
    cl_send(c, "GET /kylin/api/user HTTP/1.1\r\nHost: t\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 401);
    cr_assert_str_eq(find_header(&r, "WWW-Authenticate"),
                     "Basic realm=\"Kylin\", charset=\"UTF-8\"");
    /* alice:wrong, then alice:s3cret */
    cl_send(c, "GET /kylin/api/user HTTP/1.1\r\nAuthorization: Basic YWxpY2U6d3Jvbmc=\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 401);
    cl_send(c, "GET /kylin/api/user HTTP/1.1\r\nAuthorization: Basic YWxpY2U6czNjcmV0\r\n\r\n");
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "user=alice role=ADMIN");
    cr_assert_eq(stat_of("user", 401), 2);
    cr_assert_eq(stat_of("user", 200), 1);
    cl_close(c);
}

Test(http, listen_ipv6_loopback) {
    start_args_t a = {.listen = "[::1]:0"};
    srv_start_on(&S, &a);
    bool lo = ql_http_server_is_loopback(S.server);
    cr_assert(lo);
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)S.port)};
    sa.sin6_addr = in6addr_loopback;
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    const char *req = "GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    cr_assert_eq(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
    char buf[2048] = {0};
    size_t n = 0;
    ssize_t k;
    while ((k = recv(fd, buf + n, sizeof buf - 1 - n, 0)) > 0)
        n += (size_t)k;
    cr_assert(strstr(buf, "HTTP/1.1 200 OK"), "%s", buf);
    cr_assert(strstr(buf, "peer_lo=1"), "%s", buf);
    close(fd);
}

/* ---- pure parts, no server ---- */

Test(http_pure, hostport_parsing) {
    struct sockaddr_storage ss;
    cr_assert_eq(ql_http_parse_hostport("127.0.0.1:7070", &ss), 0);
    cr_assert_eq(ss.ss_family, AF_INET);
    cr_assert_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 7070);
    cr_assert(ql_http_addr_is_loopback((struct sockaddr *)&ss));
    cr_assert_eq(ql_http_parse_hostport("[::1]:0", &ss), 0);
    cr_assert_eq(ss.ss_family, AF_INET6);
    cr_assert(ql_http_addr_is_loopback((struct sockaddr *)&ss));
    cr_assert_eq(ql_http_parse_hostport("localhost:80", &ss), 0);
    cr_assert(ql_http_addr_is_loopback((struct sockaddr *)&ss));
    cr_assert_eq(ql_http_parse_hostport("0.0.0.0:80", &ss), 0);
    cr_assert_not(ql_http_addr_is_loopback((struct sockaddr *)&ss));
    cr_assert_eq(ql_http_parse_hostport("[::ffff:127.0.0.2]:1", &ss), 0);
    cr_assert(ql_http_addr_is_loopback((struct sockaddr *)&ss));
    const char *bad[] = {"",        "127.0.0.1",       "127.0.0.1:", "127.0.0.1:65536", "::1:80",
                         "[::1]80", "host.example:80", "1.2.3.4:8x", "[::1:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(ql_http_parse_hostport(bad[i], &ss), QL_EINVAL, "%s", bad[i]);
}

static void h_nop(ql_http_req_t *req, void *arg) {
    (void)req;
    (void)arg;
}

Test(http_pure, router_matching) {
    ql_http_router_t *r;
    cr_assert_eq(ql_http_router_new(&r), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/kylin/api/jobs/{job_id}/detail", "job_detail", 0,
                                    h_nop, NULL),
                 0);
    cr_assert_eq(
        ql_http_router_add(r, "PUT", "/kylin/api/jobs/status", "job_status", 0, h_nop, NULL), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/kylin/api/jobs/{job_id}", "job", 0, h_nop, NULL),
                 0);
    cr_assert_eq(
        ql_http_router_add(r, "GET", "/kylin/api/jobs/status", "job_status_get", 0, h_nop, NULL),
        0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/kylin/api/jobs/{id}/steps/{step}/output", NULL, 0,
                                    h_nop, NULL),
                 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/", "root", 0, h_nop, NULL), 0);
    cr_assert_eq(ql_http_router_add(r, "GET", "/kylin/api/jobs/{job_id}", "dup", 0, h_nop, NULL),
                 QL_EEXIST);
    cr_assert_eq(ql_http_router_add(r, "GET", "no-slash", NULL, 0, h_nop, NULL), QL_EINVAL);
    cr_assert_eq(ql_http_router_add(r, "GET", "/a//b", NULL, 0, h_nop, NULL), QL_EINVAL);
    cr_assert_eq(ql_http_router_add(r, "GET", "/a/{}", NULL, 0, h_nop, NULL), QL_EINVAL);
    cr_assert_eq(ql_http_router_add(r, "GET", "/a/x{y}", NULL, 0, h_nop, NULL), QL_EINVAL);

    ql_http_match_t m;
    cr_assert_eq(ql_http_router_match(r, "GET", "/kylin/api/jobs/j1/detail", &m), 0);
    cr_assert_str_eq(m.name, "job_detail");
    cr_assert_eq(m.n_params, 1);
    cr_assert_str_eq(m.param_names[0], "job_id");
    cr_assert_eq(m.param_len[0], 2);
    /* The literal "status" beats {job_id} for GET. */
    cr_assert_eq(ql_http_router_match(r, "GET", "/kylin/api/jobs/status", &m), 0);
    cr_assert_str_eq(m.name, "job_status_get");
    cr_assert_eq(ql_http_router_match(r, "GET", "/kylin/api/jobs/other/", &m), 0);
    cr_assert_str_eq(m.name, "job");
    cr_assert_eq(ql_http_router_match(r, "HEAD", "/kylin/api/jobs/x", &m), 0, "HEAD uses GET");
    cr_assert_str_eq(m.name, "job");
    cr_assert_eq(ql_http_router_match(r, "GET", "/kylin/api/jobs/1/steps/2/output", &m), 0);
    cr_assert_str_eq(m.name, "/kylin/api/jobs/{id}/steps/{step}/output");
    cr_assert_eq(m.n_params, 2);
    cr_assert_eq(ql_http_router_match(r, "GET", "/", &m), 0);
    cr_assert_str_eq(m.name, "root");
    cr_assert_eq(ql_http_router_match(r, "DELETE", "/kylin/api/jobs/status", &m), QL_ENOTFOUND);
    cr_assert_str_eq(m.allow, "PUT, GET");
    cr_assert_eq(ql_http_router_match(r, "GET", "/kylin/api/jobs//detail", &m), QL_ENOTFOUND);
    cr_assert_str_eq(m.allow, "");
    cr_assert_eq(ql_http_router_match(r, "GET", "/kylin/api/nothing", &m), QL_ENOTFOUND);
    cr_assert_str_eq(m.allow, "");
    ql_http_router_free(r);
}
