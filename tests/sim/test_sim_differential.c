/*
 * The simulator differential (docs/postgresql.md, Tests): a dozen scenario files run by the real
 * `qilin sim --json --log debug`, once on LMDB and once on PostgreSQL (--store-url), give
 * byte-identical output (the decisions of every scan, every log line with its virtual time and
 * ids) and the same exit status. Ids come from the simulator's fixed seed and time from its
 * virtual clock, so any difference is a backend answering differently.
 *
 * Needs QL_TEST_STORE=pg (sim_test_sim_differential@pg, which requires the pg fixture) and
 * skips otherwise.
 */
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define QILIN QL_BUILD_DIR "/tools/qilin"

/* Chosen for breadth: restarts and recovery, the set-up written as is, step chains, the
 * fetcher, the cache, blocking jobs and actions, orphans, errors, a standby taking over, a race
 * with a manual build, and a DST day. */
static const char *const files[] = {
    "restart_recovers_pending_and_running_jobs",
    "restart_cache_loss_covered_again_from_metadata",
    "setup_written_as_is_even_refused_states",
    "chain_warn_and_fail_steps",
    "jobs_fetcher_priority_and_max_concurrent",
    "cache_complete_cycle_not_looked_at_again",
    "boundary_overlapping_job_paused_or_error_blocked",
    "action_pause_resume_blocking_job",
    "classify_finished_job_does_not_count_orphan_blocked",
    "outcome_error_keeps_new_segment_blocked",
    "server_standby_takes_over_when_the_lock_is_released",
    "race_manual_build_after_scan_overlap_refused",
    "dst_america_new_york_fall_back_repeated_hour",
};

/* Runs `qilin sim --json --log debug [--store-url URL] FILE` with stderr joined to stdout; the
 * output is malloc'ed (the caller frees it), *status is the exit status. */
static char *run_sim(const char *file, const char *url, int *status) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s sim --json --log debug %s%s%s %s 2>&1", QILIN,
             url ? "--store-url '" : "", url ? url : "", url ? "'" : "", file);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        fwrite(buf, 1, n, m);
    fclose(m);
    int st = pclose(p);
    cr_assert(WIFEXITED(st), "%s: status %#x", cmd, st);
    *status = WEXITSTATUS(st);
    return out;
}

/* The first line where a and b differ, for the failure message. */
static void first_difference(const char *a, const char *b, char *msg, size_t cap) {
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    snprintf(msg, cap, "line %d:\n  lmdb: %.*s\n  pg:   %.*s", line, (int)strcspn(la, "\n"), la,
             (int)strcspn(lb, "\n"), lb);
}

Test(sim_differential, a_dozen_scenarios_give_the_same_output_on_lmdb_and_postgresql,
     .timeout = 300) {
    ql_test_require_backend("pg");
    char dir[256];
    ql_test_tmpdir(dir, sizeof dir, "ql_simdiff");
    ql_store_opts_t o;
    ql_test_store_opts(dir, &o); /* skips without a server */
    cr_assert_null(strchr(o.url, '\''), "the conninfo is quoted for the shell");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char file[512];
        snprintf(file, sizeof file, "%s/tests/scenarios/%s.yaml", QL_SOURCE_DIR, files[i]);
        int st_lmdb, st_pg;
        char *lmdb = run_sim(file, NULL, &st_lmdb);
        char *pg = run_sim(file, o.url, &st_pg);
        cr_assert_eq(st_lmdb, 0, "%s fails on LMDB:\n%s", files[i], lmdb);
        cr_assert_gt(strlen(lmdb), 1000, "%s: too little output to compare:\n%s", files[i], lmdb);
        if (strcmp(lmdb, pg) != 0) {
            char msg[2048];
            first_difference(lmdb, pg, msg, sizeof msg);
            cr_assert_fail("%s: the output differs at %s", files[i], msg);
        }
        cr_assert_eq(st_pg, st_lmdb, "%s", files[i]);
        free(lmdb);
        free(pg);
    }
}
