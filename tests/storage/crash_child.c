/*
 * The process test_crash.c kills: opens the store, makes sure project "p" and model "m" exist,
 * then streams group-committed builds on consecutive ranges from several threads through the
 * writer, forever. Each ACKNOWLEDGED job id (done callback with status 0, so its transaction is
 * durable) is written to stdout as one line; the test SIGKILLs this process at a random moment
 * and checks that everything acknowledged survived.
 *
 * usage: storage_crash_child DIR THREADS
 * stdout: "ready\n" once streaming starts, then "<job-id>\n" per acknowledged build. One write
 * per line (well under PIPE_BUF), so a kill never leaves half a line in the pipe.
 * Any failure is printed to stderr and exits with status 3, which the test reports.
 */
#include "storage/storage.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RANGE 1000
#define IN_FLIGHT 256 /* per thread, so the queue stays bounded */

typedef struct {
    ql_writer_t *w;
    ql_id_t model;
    int64_t base;
    atomic_llong next;
} child_t;

typedef struct {
    child_t *c;
    sem_t *slots;
    int64_t start;
    ql_id_t job;
} build_t;

static const ql_step_spec_t steps[3] = {
    {.name = "Detect resource", .kind = "noop"},
    {.name = "Load data to index", .kind = "noop"},
    {.name = "Update metadata", .kind = "noop"},
};

static void die(const char *what, const char *msg) {
    fprintf(stderr, "crash_child: %s: %s\n", what, msg);
    _exit(3);
}

static int setup_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    ql_id_t *model = arg;
    ql_model_t m;
    int rc = ql_model_find(txn, "p", "m", 0, &m);
    if (rc == 0) {
        *model = m.id;
        ql_model_free(&m);
        return 0;
    }
    if (rc != QL_ENOTFOUND)
        return ql_err_set(err, rc, "cannot read model m: %s", ql_strerror(rc));
    ql_project_t p = {0};
    strcpy(p.name, "p");
    if ((rc = ql_meta_create_project(txn, &p, 1, err)))
        return rc;
    memset(&m, 0, sizeof m);
    strcpy(m.project, "p");
    strcpy(m.name, "m");
    m.partitioned = true;
    strcpy(m.partition_column, "T.D");
    strcpy(m.partition_format, "yyyy-MM-dd");
    if ((rc = ql_meta_create_model(txn, &m, 1, err)))
        return rc;
    *model = m.id;
    return 0;
}

static int max_end_cb(const ql_segment_t *s, void *arg) {
    int64_t *end = arg;
    if (s->end > *end)
        *end = s->end;
    return 0;
}

static int build_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    build_t *b = arg;
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "System", .now = b->start, .steps = steps, .n_steps = 3};
    return ql_meta_submit_build(txn, &b->c->model, b->start, b->start + RANGE, &spec, &b->job, NULL,
                                err);
}

static void build_done(void *arg, int status, const ql_err_t *err) {
    build_t *b = arg;
    if (status)
        die("build", err->msg);
    char line[QL_ID_STR_LEN + 2];
    ql_id_format(&b->job, line);
    line[QL_ID_STR_LEN] = '\n';
    if (write(STDOUT_FILENO, line, QL_ID_STR_LEN + 1) != QL_ID_STR_LEN + 1)
        die("write", "short write to stdout");
    sem_post(b->slots);
    free(b);
}

static void *submitter_main(void *arg) {
    child_t *c = arg;
    sem_t slots;
    sem_init(&slots, 0, IN_FLIGHT);
    for (;;) {
        sem_wait(&slots);
        build_t *b = calloc(1, sizeof *b);
        if (!b)
            die("submit", "out of memory");
        b->c = c;
        b->slots = &slots;
        b->start = c->base + atomic_fetch_add(&c->next, 1) * RANGE;
        int rc = ql_writer_submit(c->w, build_fn, b, build_done);
        if (rc)
            die("submit", ql_strerror(rc));
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR THREADS\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[2]);
    ql_store_opts_t o = {.path = argv[1]};
    ql_store_t *store;
    ql_err_t err;
    int rc = ql_store_open(&o, &store, &err);
    if (rc)
        die("open", err.msg);
    child_t c = {0};
    /* Answers on the writer thread: the done callback writes the acknowledgement itself. */
    if ((rc = ql_writer_new(store, NULL, &c.w)))
        die("writer", ql_strerror(rc));
    if ((rc = ql_writer_call(c.w, setup_fn, &c.model, &err)))
        die("setup", err.msg);

    /* Continue after whatever an earlier (killed) run committed, acknowledged or not. */
    ql_txn_t *t;
    if ((rc = ql_txn_begin(store, false, &t)))
        die("read", ql_strerror(rc));
    int64_t end = 0;
    if ((rc = ql_segment_foreach(t, &c.model, max_end_cb, &end)))
        die("segments", ql_strerror(rc));
    ql_txn_abort(t);
    c.base = end;

    if (write(STDOUT_FILENO, "ready\n", 6) != 6)
        die("write", "short write to stdout");
    pthread_t th;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&th, NULL, submitter_main, &c))
            die("thread", "cannot start a submitter");
    for (;;)
        pause(); /* until killed */
}
