/*
 * Deleting jobs (docs/design/jobs.md, Deleting jobs): ql_job_delete, ql_meta_delete_jobs and
 * retention's ql_meta_purge_jobs on every backend, and the step logs of a job on disk. A
 * deleted job leaves nothing behind: no record, step, output, index entry or count, which fsck
 * and the listings check; a refused delete writes nothing (the store's hash is unchanged).
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[4096];
static ql_store_t *store;
static ql_id_t model;
static int64_t now = 1788192000000;
static const int64_t DAY = 86400000;

static const ql_step_spec_t steps[2] = {
    {.name = "Detect resource", .kind = "noop"},
    {.name = "Update metadata", .kind = "noop"},
};

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "qljobdel");
    ql_test_store_open(dir, &store);
    ql_err_t err;
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m", &model, &err), 0, "%s", err.msg);
}

static void teardown(void) {
    ql_store_close(store);
}

TestSuite(job_delete, .init = setup, .fini = teardown);

/* A build of day `day` (a READY job owning a NEW segment, with its steps); its id. */
static ql_id_t submit(int day) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "ADMIN", .now = ++now, .steps = steps, .n_steps = 2};
    ql_id_t job, seg;
    ql_err_t err;
    int64_t s = (int64_t)day * DAY;
    int rc = ql_meta_submit_build(t, &model, s, s + DAY, &spec, &job, &seg, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    return job;
}

/* Ends job in st at time `at` (with its segment effects), storing an output for each step. */
static void finish_at(const ql_id_t *job, ql_state_t st, int64_t at) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, job, QL_DECODE_KEEP_EXTRA, &j), 0);
    cr_assert_eq(ql_meta_apply_job_outcome(t, &j, st, false, at), 0);
    j.state = st;
    j.end_time = j.modify_time = at;
    cr_assert_eq(ql_job_put(t, &j), 0);
    ql_job_free(&j);
    for (uint32_t seq = 0; seq < 2; seq++)
        cr_assert_eq(ql_output_put(t, job, seq, "step output", 11), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void finish(const ql_id_t *job, ql_state_t st) {
    finish_at(job, st, ++now);
}

static int delete_jobs(const char *project, const ql_id_t *ids, size_t n, ql_err_t *err) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    int rc = ql_meta_delete_jobs(t, project, ids, n, err);
    if (rc)
        ql_txn_abort(t);
    else
        cr_assert_eq(ql_txn_commit(t), 0);
    return rc;
}

static int count_step(const ql_step_t *s, void *arg) {
    (void)s;
    ++*(int *)arg;
    return 0;
}

static int count_ref(const ql_id_t *id, ql_state_t state, int64_t mtime, void *arg) {
    (void)id;
    (void)state;
    (void)mtime;
    ++*(int *)arg;
    return 0;
}

static int count_job(const ql_job_t *j, void *arg) {
    (void)j;
    ++*(int *)arg;
    return 0;
}

/* Whether anything of job is left: record, steps, outputs; and the listings' sizes. */
typedef struct {
    bool record;
    int steps, outputs, recent, recent_all, of_model;
    uint64_t counted;
} left_t;

static left_t left_of(const ql_id_t *job) {
    left_t l = {0};
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    int rc = ql_job_get(t, job, 0, &j);
    cr_assert(rc == 0 || rc == QL_ENOTFOUND, "%s", ql_strerror(rc));
    l.record = rc == 0;
    if (rc == 0)
        ql_job_free(&j);
    cr_assert_eq(ql_step_foreach(t, job, count_step, &l.steps), 0);
    for (uint32_t seq = 0; seq < 2; seq++) {
        char *out = NULL;
        size_t len;
        rc = ql_output_get(t, job, seq, &out, &len);
        cr_assert(rc == 0 || rc == QL_ENOTFOUND, "%s", ql_strerror(rc));
        l.outputs += rc == 0;
        free(out);
    }
    cr_assert_eq(ql_job_foreach_recent(t, "p", false, count_ref, &l.recent), 0);
    cr_assert_eq(ql_job_foreach_recent(t, NULL, true, count_ref, &l.recent_all), 0);
    cr_assert_eq(ql_job_foreach_model(t, &model, count_job, &l.of_model), 0);
    cr_assert_eq(ql_job_count(t, "p", 0xffffffffu, &l.counted), 0);
    ql_txn_abort(t);
    return l;
}

Test(job_delete, final_job_goes_with_steps_outputs_and_index_entries) {
    ql_id_t a = submit(0), b = submit(1);
    finish(&a, QL_SUCCEED);
    finish(&b, QL_DISCARDED);
    left_t before = left_of(&a);
    cr_assert(before.record);
    cr_assert_eq(before.steps, 2);
    cr_assert_eq(before.outputs, 2);
    cr_assert_eq(before.recent, 2);
    cr_assert_eq(before.counted, 2);

    ql_err_t err;
    cr_assert_eq(delete_jobs("p", &a, 1, &err), 0, "%s", err.msg);
    left_t after = left_of(&a);
    cr_assert_not(after.record);
    cr_assert_eq(after.steps, 0);
    cr_assert_eq(after.outputs, 0);
    cr_assert_eq(after.recent, 1);
    cr_assert_eq(after.recent_all, 1);
    cr_assert_eq(after.of_model, 1);
    cr_assert_eq(after.counted, 1);
    /* The other job is whole. */
    left_t other = left_of(&b);
    cr_assert(other.record);
    cr_assert_eq(other.steps, 2);
    cr_assert_eq(other.outputs, 2);

    /* A built segment outlives the job that built it. */
    ql_txn_t *t;
    uint64_t segs;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    cr_assert_eq(ql_segment_count(t, &model, &segs), 0);
    ql_txn_abort(t);
    cr_assert_eq(segs, 1);
    ql_test_assert_fsck_clean(store);
}

Test(job_delete, a_live_job_refuses_the_whole_call_naming_it) {
    ql_id_t ids[3] = {submit(0), submit(1), submit(2)};
    finish(&ids[0], QL_SUCCEED);
    finish(&ids[2], QL_SUICIDAL);
    uint64_t hash = ql_test_store_hash(store);
    ql_err_t err;
    cr_assert_eq(delete_jobs("p", ids, 3, &err), QL_EACTION);
    char live[QL_ID_STR_LEN + 1];
    ql_id_format(&ids[1], live);
    cr_assert(strstr(err.msg, live), "%s", err.msg);
    cr_assert(strstr(err.msg, "READY"), "%s", err.msg);
    cr_assert_eq(ql_test_store_hash(store), hash, "a refused delete wrote nothing");

    /* Once the job is final the same call deletes all three. */
    finish(&ids[1], QL_DISCARDED);
    cr_assert_eq(delete_jobs("p", ids, 3, &err), 0, "%s", err.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_not(left_of(&ids[i]).record);
    cr_assert_eq(left_of(&ids[0]).counted, 0);
    ql_test_assert_fsck_clean(store);
}

Test(job_delete, unknown_jobs_and_other_projects_are_not_found) {
    ql_id_t a = submit(0);
    finish(&a, QL_SUCCEED);
    ql_id_t ids[2] = {a, {{0}}};
    ids[1].b[0] = 0x42;
    ql_err_t err;
    cr_assert_eq(delete_jobs("p", ids, 2, &err), QL_ENOTFOUND);
    cr_assert(strstr(err.msg, "not found"), "%s", err.msg);
    cr_assert(left_of(&a).record, "nothing deleted when one id is unknown");
    cr_assert_eq(delete_jobs("other", &a, 1, &err), QL_ENOTFOUND);
    cr_assert(strstr(err.msg, "other"), "%s", err.msg);
    /* A job listed twice is deleted once; no project: any project. */
    ql_id_t twice[2] = {a, a};
    cr_assert_eq(delete_jobs(NULL, twice, 2, &err), 0, "%s", err.msg);
    cr_assert_not(left_of(&a).record);
    ql_test_assert_fsck_clean(store);
}

static size_t purge(int64_t before, size_t max, ql_id_t *out) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    size_t n;
    int rc = ql_meta_purge_jobs(t, before, max, out, &n);
    cr_assert_eq(rc, 0, "%s", ql_strerror(rc));
    cr_assert_eq(ql_txn_commit(t), 0);
    return n;
}

Test(job_delete, purge_takes_the_oldest_final_jobs_in_batches) {
    /* Jobs ending on days 1..5; the one of day 3 stays live (an old PAUSED-like job). */
    ql_id_t ids[6];
    int64_t base = now;
    for (int i = 0; i < 6; i++)
        ids[i] = submit(i);
    for (int i = 0; i < 6; i++)
        if (i != 3)
            finish_at(&ids[i], i % 2 ? QL_DISCARDED : QL_SUCCEED, base + (i + 1) * DAY);
    int64_t before = base + 5 * DAY + 1; /* days 1..5 are older: ids 0..4 */
    ql_id_t out[4];
    cr_assert_eq(purge(before, 2, out), 2);
    cr_assert(ql_id_eq(&out[0], &ids[0]) && ql_id_eq(&out[1], &ids[1]), "oldest first");
    cr_assert_not(left_of(&ids[0]).record);
    cr_assert_eq(left_of(&ids[0]).steps, 0);
    /* The live job is skipped, not deleted. */
    cr_assert_eq(purge(before, 4, out), 2);
    cr_assert(ql_id_eq(&out[0], &ids[2]) && ql_id_eq(&out[1], &ids[4]));
    cr_assert(left_of(&ids[3]).record);
    cr_assert(left_of(&ids[5]).record, "a job that ended after the threshold stays");
    cr_assert_eq(purge(before, 4, out), 0, "nothing older is left");
    cr_assert_eq(left_of(&ids[5]).counted, 2);
    ql_test_assert_fsck_clean(store);
}

static void write_file(const char *path) {
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs("log line\n", f);
    fclose(f);
}

Test(job_delete, step_logs_are_removed_with_their_folder) {
    ql_id_t a = submit(0);
    char id[QL_ID_STR_LEN + 1], path[8192];
    ql_id_format(&a, id);
    snprintf(path, sizeof path, "%s/logs", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/logs/%s", dir, id);
    cr_assert_eq(mkdir(path, 0755), 0);
    for (int i = 0; i < 2; i++) {
        char f[8300];
        snprintf(f, sizeof f, "%s/%s_%02d.log", path, id, i);
        write_file(f);
    }
    cr_assert_eq(ql_store_remove_job_logs(store, &a), 0);
    struct stat sb;
    cr_assert_neq(stat(path, &sb), 0, "the job's log folder is gone");
    cr_assert_eq(ql_store_remove_job_logs(store, &a), 0, "no logs is fine");
}
