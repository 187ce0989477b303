/*
 * One real qilind for the suites that change and delete metadata (test_lifecycle.c,
 * test_job_delete.c): templates whose INC_BUILD echoes, plus a "slowbuild" set whose build
 * sleeps ten minutes (a job that stays live), and a one-second poll. Header-only, like
 * rest_util.h; Q is the suite's server, started by setup and stopped by teardown.
 */
#ifndef QL_TEST_METADATA_SERVER_H
#define QL_TEST_METADATA_SERVER_H

#include "tests/api/rest_util.h"

static qd_t Q;

static const char TEMPLATES[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: build\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'echo building']\n"
    "template_sets:\n"
    "  slowbuild:\n"
    "    INC_BUILD: {steps: [{name: wait, kind: sleep, duration: 10m}]}\n";

#define DAY 86400000LL
#define D0 1788134400000LL /* 2026-08-31T00:00:00Z */

static char g_templates_arg[512];

UNUSED static void setup(void) {
    qd_init(&Q);
    char path[400];
    snprintf(path, sizeof path, "%s/jobs.yaml", Q.dir);
    write_file(path, TEMPLATES);
    snprintf(g_templates_arg, sizeof g_templates_arg, "qilin.jobs.templates=%s", path);
    const char *args[] = {"--set", g_templates_arg, "--set",
                          "kylin.job.scheduler.poll-interval-second=1", NULL};
    qd_start(&Q, args);
}

UNUSED static void teardown(void) {
    if (Q.pid > 0)
        qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
}

#endif
