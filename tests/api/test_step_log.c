/*
 * A running step's log stays on the host that runs it (docs/rest.md, GET .../output): the real
 * qilind (server id test-a) runs a shell step that prints a line and sleeps; the test reads the
 * step's live log through GET .../output, then rewrites the step's record in the store as if
 * another server (host-b) ran it, with and without an API address, and reads it again. On a
 * store that servers on several hosts share (PostgreSQL, <name>@pg) the answer is 307 to that
 * server's address, or 404 naming the server; on LMDB every server of the store runs on this
 * host and shares its data directory, so the log is served here whatever the record says.
 */
#include "tests/api/rest_util.h"

#include "engine/engine.h"

static qd_t Q;

static const char TEMPLATES[] = "templates:\n"
                                "  INC_BUILD:\n"
                                "    steps:\n"
                                "      - name: live\n"
                                "        kind: shell\n"
                                "        argv: [/bin/sh, -c, 'printf \"live-line\\n\"; "
                                "exec sleep 600']\n";

#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */

static void setup(void) {
    qd_init(&Q);
    static char tpl_arg[512];
    char path[400];
    snprintf(path, sizeof path, "%s/jobs.yaml", Q.dir);
    write_file(path, TEMPLATES);
    snprintf(tpl_arg, sizeof tpl_arg, "qilin.jobs.templates=%s", path);
    const char *args[] = {"--set", tpl_arg, "--set", "qilin.server.id=test-a", NULL};
    qd_start(&Q, args);
}

static void teardown(void) {
    if (Q.pid > 0)
        qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
}

TestSuite(step_log, .init = setup, .fini = teardown, .timeout = 120);

/* Rewrites where step 0 of job ran (the server's store, the backend under test); returns what
 * the server had recorded itself in *before (may be NULL). */
static void place_step(const char *job, const char *server, const char *addr, ql_step_t *before) {
    ql_store_opts_t so;
    ql_test_store_opts(Q.data, &so);
    ql_store_t *store;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &store, &err), 0, "%s", err.msg);
    ql_id_t id;
    cr_assert_eq(ql_id_parse(job, &id), 0);
    ql_txn_t *txn;
    cr_assert_eq(ql_txn_begin(store, true, &txn), 0);
    ql_step_t st;
    cr_assert_eq(ql_step_get(txn, &id, 0, &st), 0);
    cr_assert_eq(st.state, QL_RUNNING);
    if (before)
        cr_assert_eq(ql_step_copy(before, &st), 0);
    snprintf(st.server_id, sizeof st.server_id, "%s", server);
    snprintf(st.server_addr, sizeof st.server_addr, "%s", addr);
    cr_assert_eq(ql_step_put(txn, &st), 0);
    ql_step_free(&st);
    cr_assert_eq(ql_txn_commit(txn), 0);
    ql_store_close(store);
}

/* GET the step's output; the answer (the caller frees it). */
static resp_t get_output(const char *job, char *path, size_t cap) {
    snprintf(path, cap, "/kylin/api/jobs/%s/steps/%s_00/output?project=p1", job, job);
    return http_req(&Q, "GET", path, NULL, NULL, NULL);
}

static bool served_here(const resp_t *r) {
    const char *out =
        json_string_value(json_object_get(json_object_get(r->json, "data"), "cmd_output"));
    return r->status == 200 && out && strstr(out, "live-line");
}

Test(step_log, another_hosts_running_step_redirects_to_its_server) {
    bool shared = strcmp(ql_test_store_backend(), "pg") == 0;
    make_model(&Q, "p1", "m1", NULL);
    char job[64], path[256];
    snprintf(job, sizeof job, "%s", build(&Q, "p1", "m1", D0, D0 + DAY));
    wait_job_state(&Q, "p1", job, "RUNNING", 20000);

    /* Its own step: the live log, from this server's disk. */
    int64_t deadline = now_ms() + 20000;
    for (;;) {
        resp_t r = get_output(job, path, sizeof path);
        bool ok = served_here(&r);
        cr_assert(r.status == 200, "%s: %ld %s", path, r.status, r.body ? r.body : "");
        resp_free(&r);
        if (ok)
            break;
        cr_assert_lt(now_ms(), deadline, "the live log never showed the step's line");
        poll_pause();
    }

    /* The server recorded itself with the try: its id and the boot id, with the marker. */
    ql_step_t mine;
    place_step(job, "host-b:7070", "10.1.2.3:7171", &mine);
    cr_assert_str_eq(mine.server_id, "test-a");
    cr_assert_str_eq(mine.server_addr, "", "listening on port 0: no address to send anyone to");
    cr_assert_neq(mine.token[0], '\0');
    char boot[QL_PROC_BOOT_ID_LEN + 1];
    cr_assert_eq(ql_proc_boot_id(boot), 0);
    cr_assert_str_eq(mine.boot_id, boot);
    ql_step_free(&mine);

    /* Another server's step, with its address. */
    resp_t r = get_output(job, path, sizeof path);
    if (shared) {
        cr_assert_eq(r.status, 307, "%s: %ld %s", path, r.status, r.body ? r.body : "");
        char want[512];
        snprintf(want, sizeof want, "http://10.1.2.3:7171%s", path);
        cr_assert_str_eq(r.location, want);
        cr_assert_not_null(r.json, "%s", r.body);
        cr_assert(strstr(jstr(r.json, "msg"), "host-b:7070"), "%s", r.body);
    } else {
        cr_assert(served_here(&r), "one host: served here (%ld %s)", r.status, r.body);
        cr_assert_str_eq(r.location, "");
    }
    resp_free(&r);

    /* Another server's step without an address: the answer names the server. */
    place_step(job, "host-b:7070", "", NULL);
    if (shared) {
        api_err(&Q, "GET", path, NULL, 404, "QL-00001", "'host-b:7070'");
    } else {
        r = get_output(job, path, sizeof path);
        cr_assert(served_here(&r), "one host: served here (%ld %s)", r.status, r.body);
        resp_free(&r);
    }

    /* Back on this server: served here again. */
    place_step(job, "test-a", "", NULL);
    r = get_output(job, path, sizeof path);
    cr_assert(served_here(&r), "%ld %s", r.status, r.body ? r.body : "");
    resp_free(&r);

    char body[256];
    snprintf(body, sizeof body, "{\"project\":\"p1\",\"job_ids\":[\"%s\"],\"action\":\"DISCARD\"}",
             job);
    json_decref(api_ok(&Q, "PUT", "/kylin/api/jobs/status", body));
}
