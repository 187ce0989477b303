/* See node_util.h. */
#include "tests/common/node_util.h"

#include "scheduler/ql_submission.h"
#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

ql_config_t *ql_test_node_config(const char *data, const char *templates,
                                 const char *const *settings) {
    ql_config_t *cfg;
    cr_assert_eq(ql_config_new(&cfg), 0);
    ql_err_t err = {0};
    char arg[512];
    snprintf(arg, sizeof arg, "qilin.storage.path=%s", data);
    cr_assert_eq(ql_config_set_arg(cfg, arg, &err), 0, "%s", err.msg);
    snprintf(arg, sizeof arg, "qilin.jobs.templates=%s", templates);
    cr_assert_eq(ql_config_set_arg(cfg, arg, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.storage.map-size=1GiB", &err), 0, "%s", err.msg);
    const char *store[2];
    int n_store = ql_test_store_settings(data, store); /* the backend under test */
    for (int i = 0; i < n_store; i++)
        cr_assert_eq(ql_config_set_arg(cfg, store[i], &err), 0, "%s: %s", store[i], err.msg);
    for (size_t i = 0; settings && settings[i]; i++)
        cr_assert_eq(ql_config_set_arg(cfg, settings[i], &err), 0, "%s: %s", settings[i], err.msg);
    return cfg;
}

typedef struct {
    bool done;
    int calls;
    int status;
    ql_err_t err;
    ql_id_t job;
} build_t;

static void build_done(void *arg, const ql_submission_result_t *r) {
    build_t *b = arg;
    b->done = true;
    b->calls++;
    b->status = r->status;
    if (r->status)
        b->err = *r->err;
    else
        b->job = r->jobs[0];
}

static bool cond_flag(const void *arg) {
    return *(const bool *)arg;
}

ql_id_t ql_test_node_build(uv_loop_t *loop, ql_node_t *node, const ql_id_t *model, int64_t start,
                           int64_t end, int64_t now, int64_t deadline_ms) {
    build_t b = {0};
    ql_submission_req_t req = {.kind = QL_SUBMIT_BUILD,
                               .model_id = model,
                               .has_range = true,
                               .start = start,
                               .end = end,
                               .priority = 3,
                               .submitter = "ADMIN",
                               .now = now};
    cr_assert_eq(ql_submission_submit(ql_node_submission(node), &req, build_done, &b), 0);
    cr_assert(ql_test_drive_until(loop, cond_flag, &b.done, deadline_ms), "no acknowledgement");
    cr_assert_eq(b.calls, 1);
    if (b.status)
        cr_assert_fail("the build was refused: %s", b.err.msg);
    return b.job; /* the service has kicked the node's fetcher */
}

static void set_flag(void *arg) {
    *(bool *)arg = true;
}

void ql_test_node_stop(uv_loop_t *loop, ql_node_t *node, int64_t deadline_ms) {
    bool stopped = false;
    ql_node_stop(node, set_flag, &stopped);
    cr_assert(ql_test_drive_until(loop, cond_flag, &stopped, deadline_ms),
              "the node did not stop within %lld ms", (long long)deadline_ms);
}

ql_job_t ql_test_node_job(ql_node_t *node, const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

ql_step_t ql_test_node_step(ql_node_t *node, const ql_id_t *id, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), false, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, id, seq, &s), 0);
    ql_txn_abort(t);
    return s;
}

bool ql_test_node_find_model(ql_node_t *node, const char *project, const char *name, ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), false, &t), 0);
    ql_model_t m;
    int rc = ql_model_find(t, project, name, 0, &m);
    if (rc == 0) {
        if (id)
            *id = m.id;
        ql_model_free(&m);
    }
    ql_txn_abort(t);
    return rc == 0;
}

typedef struct {
    ql_node_t *node;
    ql_id_t job;
    uint32_t seq;
    int pgid;
} pgid_wait_t;

static bool cond_pgid(const void *arg) {
    pgid_wait_t *p = (pgid_wait_t *)arg; /* ql_test_drive_until passes arg through */
    ql_step_t s = ql_test_node_step(p->node, &p->job, p->seq);
    if (s.state == QL_RUNNING && s.pgid > 0)
        p->pgid = s.pgid;
    ql_step_free(&s);
    return p->pgid > 0;
}

int ql_test_node_wait_pgid(uv_loop_t *loop, ql_node_t *node, const ql_id_t *job, uint32_t seq,
                           int64_t deadline_ms) {
    pgid_wait_t p = {.node = node, .job = *job, .seq = seq};
    return ql_test_drive_until(loop, cond_pgid, &p, deadline_ms) ? p.pgid : 0;
}

uint64_t ql_test_node_epoch(ql_node_t *node) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), false, &t), 0);
    uint64_t e = 0;
    cr_assert_eq(ql_meta_get_u64(t, "job_engine_epoch", &e), 0);
    ql_txn_abort(t);
    return e;
}

void ql_test_node_assert_ran_on(ql_node_t *node, const ql_id_t *job, long pid) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(ql_node_store(node), false, &t), 0);
    char *out = NULL, want[64];
    size_t len;
    cr_assert_eq(ql_output_get(t, job, 0, &out, &len), 0);
    ql_txn_abort(t);
    snprintf(want, sizeof want, "ppid=%ld\n", pid);
    cr_assert_str_eq(out, want, "the job ran on the wrong server");
    free(out);
}

const char ql_test_ppid_templates[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - {name: who, kind: shell, argv: [/bin/sh, -c, 'echo ppid=$PPID']}\n"
    "template_sets:\n"
    "  marker:\n"
    "    INC_BUILD:\n"
    "      steps:\n"
    "        - name: long\n"
    "          kind: shell\n"
    "          argv: [/bin/sh, -c, 'if [ -f marker ]; then echo ppid=$PPID; exit 0; fi; "
    "touch marker; sleep 30']\n"
    "          cwd: @DIR@\n";
