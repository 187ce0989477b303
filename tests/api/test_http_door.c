/*
 * The HTTP front door: requests the parser cannot even begin (pipelined junk, a lone invalid
 * request) and header shapes that smuggle requests ("Host : x"). The harness: http_util.h.
 */
#include "http_util.h"

TestSuite(http_door, .fini = srv_stop, .timeout = 60);

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
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        client_t *c = cl_connect();
        cl_sendn(c, bad[i].bytes, bad[i].len);
        response_t r;
        cr_assert_eq(cl_response(c, &r), 0, "case %zu", i);
        cr_assert_eq(r.status, 400, "case %zu", i);
        cr_assert(cl_closed(c), "case %zu", i);
        cl_close(c);
    }
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
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        client_t *c = cl_connect();
        cl_send(c, bad[i]);
        response_t r;
        cr_assert_eq(cl_response(c, &r), 0, "case %zu", i);
        cr_assert_eq(r.status, 400, "case %zu", i);
        cr_assert(cl_closed(c), "case %zu", i);
        cl_close(c);
    }
    cr_assert_eq(handled(), 0);
    /* Whitespace after the colon is fine. */
    client_t *c = cl_connect();
    cl_send(c, "GET /echo HTTP/1.1\r\nHost:   x  \r\n\r\n");
    response_t r;
    cr_assert_eq(cl_response(c, &r), 0);
    cr_assert_eq(r.status, 200);
    cl_close(c);
}
