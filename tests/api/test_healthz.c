/*
 * GET /healthz and the writer: 503 while store writes fail (a full map, filled for real) and
 * while the writer holds a mutation past qilin.server.healthz-writer-stall-ms without
 * committing (held on the store's commit hook); 200 when idle, however long ago the last commit
 * was, and again once writes work.
 *
 * A node and its API run in this process on a real loop, driven by the test's thread; each
 * request is made by a short-lived client thread with a blocking socket, while the test drives
 * the loop until the client has its answer (a deadline, never a sleep).
 */
#include "api/ql_api.h"

#include "tests/common/loop_util.h"
#include "tests/common/node_util.h"
#include "tests/common/tmp_util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEADLINE_MS 10000
#define STALL_MS 200

typedef struct world {
    char dir[64];
    char data[128];
    uv_loop_t loop;
    uv_timer_t tick;
    ql_log_t log;
    ql_config_t *cfg;
    ql_node_t *node;
    ql_api_t *api;
    int port;
    bool api_closed, node_stopped;
    /* the commit hook: holds the writer thread while `hold` is set */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool hold, holding;
} world_t;

static world_t w;

static const char templates[] = "templates:\n"
                                "  INC_BUILD:\n"
                                "    steps:\n"
                                "      - {name: a, kind: noop}\n";

static void commit_hook(void *arg) {
    (void)arg;
    pthread_mutex_lock(&w.mu);
    while (w.hold) {
        w.holding = true;
        pthread_cond_wait(&w.cv, &w.mu);
    }
    w.holding = false;
    pthread_mutex_unlock(&w.mu);
}

static void start(const char *map_size) {
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    ql_test_tmpdir(w.dir, sizeof w.dir, "ql_healthz");
    snprintf(w.data, sizeof w.data, "%s/data", w.dir);
    char path[256];
    snprintf(path, sizeof path, "%s/jobs.yaml", w.dir);
    ql_test_write_with_dir(path, templates, w.dir);
    char map[64];
    snprintf(map, sizeof map, "qilin.storage.map-size=%s", map_size);
    const char *const settings[] = {map, "qilin.server.healthz-writer-stall-ms=200", NULL};
    w.cfg = ql_test_node_config(w.data, path, settings);

    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    uv_timer_start(&w.tick, ql_test_tick_cb, 5, 5);
    ql_log_init(&w.log, getenv("QL_TEST_DEBUG") ? QL_LOG_DEBUG : QL_LOG_OFF);
    ql_err_t err = {0};
    ql_node_opts_t no = {.config = w.cfg, .loop = &w.loop, .log = &w.log};
    cr_assert_eq(ql_node_start(&no, &w.node, &err), 0, "%s", err.msg);
    ql_store_set_commit_hook(ql_node_store(w.node), commit_hook, NULL);
    ql_api_opts_t ao = {.loop = &w.loop, .node = w.node, .log = &w.log};
    cr_assert_eq(ql_api_new(&ao, &w.api, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_api_listen(w.api, "127.0.0.1:0", &err), 0, "%s", err.msg);
    cr_assert_eq(ql_api_port(w.api, &w.port), 0);
}

static void release_writer(void) {
    pthread_mutex_lock(&w.mu);
    w.hold = false;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
}

static void set_flag(void *arg) {
    *(bool *)arg = true;
}

static bool cond_flag(const void *arg) {
    return *(const bool *)arg;
}

static void teardown(void) {
    if (!w.node)
        return;
    release_writer(); /* a failed test may leave the writer held */
    ql_api_close(w.api, set_flag, &w.api_closed);
    cr_assert(ql_test_drive_until(&w.loop, cond_flag, &w.api_closed, DEADLINE_MS));
    ql_node_stop(w.node, set_flag, &w.node_stopped);
    cr_assert(ql_test_drive_until(&w.loop, cond_flag, &w.node_stopped, DEADLINE_MS));
    ql_api_free(w.api);
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "a handle was left open");
    ql_config_free(w.cfg);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    ql_test_rm_tree(w.dir);
    w.node = NULL;
}

TestSuite(healthz, .fini = teardown, .timeout = 60);

/* ---- a GET /healthz from a client thread ---- */

typedef struct {
    int port;
    int status; /* 0 until answered, -1 on a transport error */
    char body[2048];
    bool done; /* set last, with release order; read with acquire */
} get_t;

static void *client_main(void *arg) {
    get_t *g = arg;
    char buf[4096];
    size_t len = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static const char req[] =
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    g->status = -1;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
        ssize_t n;
        while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
            len += (size_t)n;
        buf[len] = '\0';
        const char *body = strstr(buf, "\r\n\r\n");
        if (sscanf(buf, "HTTP/1.1 %d", &g->status) != 1)
            g->status = -1;
        snprintf(g->body, sizeof g->body, "%s", body ? body + 4 : "");
    }
    if (fd >= 0)
        close(fd);
    __atomic_store_n(&g->done, true, __ATOMIC_RELEASE);
    return NULL;
}

static bool cond_answered(const void *arg) {
    return __atomic_load_n(&((const get_t *)arg)->done, __ATOMIC_ACQUIRE);
}

/* GET /healthz while the loop runs; returns the status, body in g. */
static int healthz(get_t *g) {
    memset(g, 0, sizeof *g);
    g->port = w.port;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, client_main, g), 0);
    bool ok = ql_test_drive_until(&w.loop, cond_answered, g, DEADLINE_MS);
    pthread_join(t, NULL); /* the client's read ends with the answer or its connection */
    cr_assert(ok, "no answer to GET /healthz");
    return g->status;
}

/* Asks until the answer is `status` (within DEADLINE_MS); returns the last answer's body, parsed
 * when it is JSON (NULL otherwise; the caller frees). */
static json_t *healthz_until(int status, get_t *g) {
    int64_t end = ql_test_mono_ms() + DEADLINE_MS;
    int got;
    while ((got = healthz(g)) != status && ql_test_mono_ms() < end)
        ql_test_drive_for(&w.loop, 20);
    cr_assert_eq(got, status, "GET /healthz answered %d: %s", got, g->body);
    return json_loads(g->body, 0, NULL);
}

static const char *jstr(json_t *o, const char *key) {
    const char *v = json_string_value(json_object_get(o, key));
    cr_assert_not_null(v, "no string %s", key);
    return v;
}

/* ---- a writer held past the bound ---- */

static int put_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    (void)err;
    return ql_meta_put_u64(txn, arg, 42);
}

static bool cond_holding(const void *arg) {
    (void)arg;
    pthread_mutex_lock(&w.mu);
    bool h = w.holding;
    pthread_mutex_unlock(&w.mu);
    return h;
}

Test(healthz, a_writer_that_holds_a_mutation_past_the_bound_is_503_and_idle_is_200) {
    start("64MiB");
    get_t g;
    cr_assert_eq(healthz(&g), 200);
    cr_assert_str_eq(g.body, "ok");
    /* Idle: nothing queued is healthy, however long ago the last commit was. */
    ql_test_drive_for(&w.loop, 3 * STALL_MS);
    cr_assert_eq(healthz(&g), 200, "%s", g.body);

    /* The writer commits the next mutation, then stays in the commit hook: as a writer stuck
     * in a sync would, with the next mutation queued behind it. */
    pthread_mutex_lock(&w.mu);
    w.hold = true;
    pthread_mutex_unlock(&w.mu);
    ql_writer_t *wr = ql_node_writer(w.node);
    cr_assert_eq(ql_writer_submit(wr, put_fn, "first", NULL), 0);
    cr_assert(ql_test_drive_until(&w.loop, cond_holding, NULL, DEADLINE_MS));
    cr_assert_eq(ql_writer_submit(wr, put_fn, "second", NULL), 0);
    json_t *j = healthz_until(503, &g);
    cr_assert_not_null(j, "not JSON: %s", g.body);
    cr_assert_str_eq(jstr(j, "status"), "unhealthy");
    cr_assert_str_eq(jstr(j, "reason"), "writer_stalled");
    cr_assert_geq(json_integer_value(json_object_get(j, "pending")), 1);
    cr_assert_gt(json_integer_value(json_object_get(j, "oldest_pending_ms")), STALL_MS);
    cr_assert_eq(json_integer_value(json_object_get(j, "stall_ms")), STALL_MS);
    json_decref(j);

    release_writer();
    j = healthz_until(200, &g);
    json_decref(j);
    cr_assert_str_eq(g.body, "ok");
}

/* ---- writes failing: a full map ---- */

typedef struct {
    ql_id_t job;
    size_t len;
} out_t;

static int output_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    out_t *o = arg;
    char *text = malloc(o->len);
    if (!text)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    memset(text, 'x', o->len);
    int rc = ql_output_put(txn, &o->job, 0, text, o->len);
    free(text);
    return rc ? ql_err_set(err, rc, "cannot store the output: %s", ql_strerror(rc)) : 0;
}

static int put_output(const ql_id_t *job, size_t len) {
    out_t o = {*job, len};
    ql_err_t err = {0};
    return ql_writer_call(ql_node_writer(w.node), output_fn, &o, &err);
}

Test(healthz, writes_failing_on_a_full_map_are_503_naming_the_error_and_200_once_one_commits) {
    start("1MiB");
    ql_store_t *store = ql_node_store(w.node);
    ql_id_t ballast[8];
    for (int i = 0; i < 8; i++) {
        ql_store_new_id(store, &ballast[i]);
        cr_assert_eq(put_output(&ballast[i], 40u << 10), 0);
    }
    get_t g;
    cr_assert_eq(healthz(&g), 200, "%s", g.body);
    /* Fill the map: from 64 KiB values down to 64 bytes, until not even those fit. */
    int failed = 0;
    for (size_t len = 64u << 10; len >= 64; len /= 2)
        for (int i = 0; i < 100000; i++) {
            ql_id_t junk;
            ql_store_new_id(store, &junk);
            int rc = put_output(&junk, len);
            if (rc == QL_EMAPFULL) {
                failed++;
                break;
            }
            cr_assert_eq(rc, 0, "%s", ql_strerror(rc));
        }
    cr_assert_gt(failed, 0);

    json_t *j = healthz_until(503, &g);
    cr_assert_not_null(j, "not JSON: %s", g.body);
    cr_assert_str_eq(jstr(j, "reason"), "writes_failing");
    cr_assert_str_eq(jstr(j, "code"), "QL-00008");
    cr_assert(strlen(jstr(j, "message")) > 0);
    cr_assert_geq(json_integer_value(json_object_get(j, "failures")), 1);
    json_decref(j);

    /* Room again (the ballast shrunk, as deleting old data would): the next commit clears it. */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(put_output(&ballast[i], 1), 0, "ballast %d", i);
    j = healthz_until(200, &g);
    json_decref(j);
    cr_assert_str_eq(g.body, "ok");
}
