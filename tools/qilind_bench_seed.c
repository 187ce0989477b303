/*
 * qilind-bench-seed: fills a data directory for the REST benchmark (scripts/bench.sh,
 * docs/performance.md "REST API") with big direct write transactions, as a server would have
 * after a long life: project `bench`, model `days` (yyyy-MM-dd) with N finished INC_BUILD jobs
 * on consecutive days (each with its READY segment and three steps), and M models `s0` ..
 * `s<M-1>` (yyyy-MM-dd HH:mm:ss, template set `bench`) that take the benchmark's new builds,
 * spread over many models as builds are in a real store (the job-conflict check of a
 * submission reads the model's live jobs).
 *
 *   qilind-bench-seed --data DIR --templates FILE [--jobs N] [--submit-models M]
 *
 * Run it while no server uses DIR. Not part of qilind: it opens the store directly.
 */
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DAY_MS 86400000LL
#define BASE_MS 946684800000LL /* 2000-01-01T00:00:00Z */
#define PER_TXN 5000

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(const char *what, int rc, const ql_err_t *err) {
    fprintf(stderr, "qilind-bench-seed: %s: %s\n", what,
            err && err->msg[0] ? err->msg : ql_strerror(rc));
    return 1;
}

static int ensure_model(ql_txn_t *txn, const char *name, const char *format, const char *set,
                        int64_t now, ql_id_t *id) {
    ql_model_t m;
    if (ql_model_find(txn, "bench", name, 0, &m) == 0) {
        *id = m.id;
        ql_model_free(&m);
        return 0;
    }
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m.project, sizeof m.project, "bench");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "DT");
    snprintf(m.partition_format, sizeof m.partition_format, "%s", format);
    snprintf(m.job_template, sizeof m.job_template, "%s", set);
    ql_err_t err = {0};
    int rc = ql_meta_create_model(txn, &m, now, &err);
    if (rc)
        return fail("create model", rc, &err);
    *id = m.id;
    return 0;
}

int main(int argc, char **argv) {
    const char *data = NULL, *templates = NULL;
    long jobs = 100000, submit_models = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc)
            data = argv[++i];
        else if (!strcmp(argv[i], "--templates") && i + 1 < argc)
            templates = argv[++i];
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            jobs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--submit-models") && i + 1 < argc)
            submit_models = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: qilind-bench-seed --data DIR --templates FILE [--jobs N] "
                            "[--submit-models M]\n");
            return 2;
        }
    }
    if (!data || !templates || jobs < 0 || submit_models < 0) {
        fprintf(stderr, "usage: qilind-bench-seed --data DIR --templates FILE [--jobs N] "
                        "[--submit-models M]\n");
        return 2;
    }
    ql_err_t err = {0};
    ql_templates_t *t;
    int rc = ql_templates_load_file(templates, &t, &err);
    if (rc)
        return fail("templates", rc, &err);
    ql_store_opts_t so = {.path = data};
    ql_store_t *store;
    if ((rc = ql_store_open(&so, &store, &err)))
        return fail("open", rc, &err);
    ql_job_steps_t steps;
    if ((rc = ql_job_steps_from_template(t, NULL, "INC_BUILD", &steps, &err)))
        return fail("steps", rc, &err);
    int64_t now = wall_ms();
    ql_txn_t *txn;
    ql_id_t days, sub;
    if ((rc = ql_txn_begin(store, true, &txn)))
        return fail("begin", rc, NULL);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "bench");
    ql_project_t old;
    if (ql_project_get(txn, "bench", 0, &old) == 0)
        ql_project_free(&old);
    else if ((rc = ql_meta_create_project(txn, &p, now, &err)))
        return fail("create project", rc, &err);
    if (ensure_model(txn, "days", "yyyy-MM-dd", "", now, &days))
        return 1;
    for (long i = 0; i < submit_models; i++) {
        char name[32];
        snprintf(name, sizeof name, "s%ld", i);
        if (ensure_model(txn, name, "yyyy-MM-dd HH:mm:ss", "bench", now, &sub))
            return 1;
    }
    uint64_t have = 0;
    if ((rc = ql_segment_count(txn, &days, &have)))
        return fail("count", rc, NULL);
    int64_t t0 = wall_ms();
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "ADMIN", .steps = steps.specs, .n_steps = steps.n};
    for (long i = (long)have; i < jobs; i++) {
        ql_id_t job;
        int64_t start = BASE_MS + (int64_t)i * DAY_MS;
        spec.now = now - (jobs - i);
        if ((rc = ql_meta_submit_build(txn, &days, start, start + DAY_MS, &spec, &job, NULL,
                                       &err)) ||
            (rc = ql_job_force_finish(txn, &job, QL_SUCCEED, false, spec.now, &err)))
            return fail("build", rc, &err);
        if ((i + 1) % PER_TXN == 0) {
            if ((rc = ql_txn_commit(txn)) || (rc = ql_txn_begin(store, true, &txn)))
                return fail("commit", rc, NULL);
        }
    }
    if ((rc = ql_txn_commit(txn)))
        return fail("commit", rc, NULL);
    ql_store_stat_t st = {0};
    ql_store_stat(store, &st);
    printf("seeded %ld jobs (%ld new) in %.1f s; store uses %.1f MiB\n", jobs, jobs - (long)have,
           (double)(wall_ms() - t0) / 1000.0, (double)st.used_bytes / 1048576.0);
    ql_job_steps_free(&steps);
    ql_templates_free(t);
    ql_store_close(store);
    return 0;
}
