/*
 * ui_seed: fills a data directory for the console's browser test (tests/ui/console.test.mjs)
 * with direct write transactions, as a server would have after years of daily builds:
 * project `shop` (time zone Asia/Shanghai) with model `orders` (yyyy-MM-dd), N consecutive
 * daily segments from 2000-01-01 UTC with their finished INC_BUILD jobs, every 1000th day left
 * out (a gap, so N segments span N + N/999 days) and every 500th built with a warning
 * (WARNING); models `live` (template set
 * `slow`) and `broken` (`failing`) without segments, for the jobs the test submits.
 *
 *   ui_seed --data DIR --templates FILE [--segments N]
 *
 * Run it while no server uses DIR.
 */
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DAY_MS 86400000LL
#define BASE_MS 946684800000LL /* 2000-01-01T00:00:00Z */
#define PER_TXN 5000

static int fail(const char *what, int rc, const ql_err_t *err) {
    fprintf(stderr, "ui_seed: %s: %s\n", what, err && err->msg[0] ? err->msg : ql_strerror(rc));
    return 1;
}

static int model(ql_txn_t *txn, const char *name, const char *set, int64_t now, ql_id_t *id) {
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m.project, sizeof m.project, "shop");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "DT");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    snprintf(m.job_template, sizeof m.job_template, "%s", set);
    ql_err_t err = {0};
    int rc = ql_meta_create_model(txn, &m, now, &err);
    if (rc)
        return fail(name, rc, &err);
    *id = m.id;
    return 0;
}

int main(int argc, char **argv) {
    const char *data = NULL, *templates = NULL;
    long n = 10000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data"))
            data = argv[i + 1];
        else if (!strcmp(argv[i], "--templates"))
            templates = argv[i + 1];
        else if (!strcmp(argv[i], "--segments"))
            n = atol(argv[i + 1]);
    }
    if (!data || !templates || n < 0) {
        fprintf(stderr, "usage: ui_seed --data DIR --templates FILE [--segments N]\n");
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
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 - n * 1000;
    ql_txn_t *txn;
    if ((rc = ql_txn_begin(store, true, &txn)))
        return fail("begin", rc, NULL);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "shop");
    char desc[] = "Orders of the web shop", key[] = "kylin.web.timezone", val[] = "Asia/Shanghai";
    p.description = desc;
    ql_strmap_entry_t zone = {key, val};
    p.config.items = &zone;
    p.config.n = 1;
    if ((rc = ql_meta_create_project(txn, &p, now, &err)))
        return fail("project", rc, &err);
    ql_id_t orders, other;
    if (model(txn, "orders", "", now, &orders) || model(txn, "live", "slow", now, &other) ||
        model(txn, "broken", "failing", now, &other))
        return 1;
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "ADMIN", .steps = steps.specs, .n_steps = steps.n};
    for (long i = 0, built = 0; built < n; i++) {
        if (i % 1000 == 999)
            continue; /* a gap */
        built++;
        ql_id_t job;
        int64_t start = BASE_MS + (int64_t)i * DAY_MS;
        spec.now = now + i * 1000;
        if ((rc = ql_meta_submit_build(txn, &orders, start, start + DAY_MS, &spec, &job, NULL,
                                       &err)) ||
            (rc = ql_job_force_finish(txn, &job, QL_SUCCEED, i % 500 == 495, spec.now, &err)))
            return fail("build", rc, &err);
        if (built % PER_TXN == 0 &&
            ((rc = ql_txn_commit(txn)) || (rc = ql_txn_begin(store, true, &txn))))
            return fail("commit", rc, NULL);
    }
    if ((rc = ql_txn_commit(txn)))
        return fail("commit", rc, NULL);
    ql_job_steps_free(&steps);
    ql_templates_free(t);
    ql_store_close(store);
    printf("seeded %ld days of model orders\n", n);
    return 0;
}
