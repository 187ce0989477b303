/*
 * The writer (storage/ql_writer.h): manual and threaded modes, group commit under many
 * concurrent submitters, a failing mutation failing alone, no answer before the sync of its
 * transaction, ql_writer_call, shutdown, and the notify + complete path.
 *
 * Waiting is on condition variables with a deadline, never a sleep.
 */
#include "storage/storage.h"

#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Checks in loops over thousands of mutations: an assertion only when one fails, because
 * Criterion reports every passing cr_assert under --full-stats (which ctest uses). */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            cr_assert_fail(__VA_ARGS__);                                                           \
    } while (0)

static char dir[64];
static ql_store_t *store;
static ql_id_t model;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static const ql_step_spec_t steps[2] = {{.name = "build", .kind = "noop"},
                                        {.name = "update", .kind = "noop"}};

/* Commits seen by the store's commit hook (after each sync). */
static atomic_ulong commits;

static void commit_hook(void *arg) {
    (void)arg;
    atomic_fetch_add(&commits, 1);
}

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_writer");
    ql_test_store_open(dir, &store);
    ql_err_t err;
    cr_assert_eq(ql_test_create_daily_model(store, "p", "m", &model, &err), 0, "%s", err.msg);
    atomic_store(&commits, 0);
    ql_store_set_commit_hook(store, commit_hook, NULL);
}

static void teardown(void) {
    ql_store_close(store);
    store = NULL;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(writer, .init = setup, .fini = teardown);

/* ---- mutations ---- */

typedef struct answers answers_t;

typedef struct {
    answers_t *answers;
    int64_t start, end;
    bool fail_after_write; /* writes a project, then fails */
    unsigned long commits_at_apply;
    ql_id_t job;
    int status;
    char msg[512];
    bool answered;
    bool answered_early; /* answered before a commit after its apply had completed */
    pthread_t answered_on;
} build_t;

struct answers {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n;
    int early;
};

static void answers_init(answers_t *a) {
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cond, NULL);
    a->n = 0;
    a->early = 0;
}

static void answers_destroy(answers_t *a) {
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
}

/* Waits until n answers arrived, at most 60 s. */
static void answers_wait(answers_t *a, int n) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&a->lock);
    int rc = 0;
    while (a->n < n && rc == 0)
        rc = pthread_cond_timedwait(&a->cond, &a->lock, &deadline);
    int got = a->n;
    pthread_mutex_unlock(&a->lock);
    cr_assert_geq(got, n, "only %d of %d answers within the deadline", got, n);
}

static int build_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    build_t *b = arg;
    b->commits_at_apply = atomic_load(&commits);
    if (b->fail_after_write) {
        ql_project_t p = {0};
        strcpy(p.name, "must_not_exist");
        int rc = ql_project_put(txn, &p);
        if (rc)
            return rc;
        return ql_err_set(err, QL_EINVAL, "this mutation fails after writing");
    }
    ql_job_spec_t spec = {
        .priority = 3, .submitter = "System", .now = b->start, .steps = steps, .n_steps = 2};
    return ql_meta_submit_build(txn, &model, b->start, b->end, &spec, &b->job, NULL, err);
}

static void build_done(void *arg, int status, const ql_err_t *err) {
    build_t *b = arg;
    b->status = status;
    snprintf(b->msg, sizeof b->msg, "%s", err ? err->msg : "");
    /* The batch holding this change committed (and synced) after the mutation ran: the commit
     * counter must have moved past what the mutation saw. */
    b->answered_early = status == 0 && atomic_load(&commits) <= b->commits_at_apply;
    b->answered_on = pthread_self();
    answers_t *a = b->answers;
    pthread_mutex_lock(&a->lock);
    b->answered = true;
    a->n++;
    a->early += b->answered_early;
    pthread_cond_broadcast(&a->cond);
    pthread_mutex_unlock(&a->lock);
}

static uint64_t segment_count(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t n;
    cr_assert_eq(ql_segment_count(t, &model, &n), 0);
    ql_txn_abort(t);
    return n;
}

/* ---- manual mode ---- */

Test(writer, manual_mode_applies_only_on_flush) {
    ql_writer_opts_t o = {.manual = true};
    ql_writer_t *w;
    cr_assert_eq(ql_writer_new(store, &o, &w), 0);
    cr_assert_eq(ql_writer_store(w), store);
    answers_t a;
    answers_init(&a);
    build_t b[10] = {0};
    for (int i = 0; i < 10; i++) {
        b[i] = (build_t){.answers = &a, .start = i * 100, .end = i * 100 + 100};
        cr_assert_eq(ql_writer_submit(w, build_fn, &b[i], build_done), 0);
    }
    cr_assert(ql_writer_pending(w));
    cr_assert_eq(segment_count(), 0, "nothing runs before flush");
    cr_assert_eq(a.n, 0);
    cr_assert_eq(ql_writer_flush(w), 10);
    cr_assert(!ql_writer_pending(w));
    cr_assert_eq(a.n, 10, "flush answers in the calling thread");
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(b[i].status, 0, "%s", b[i].msg);
        cr_assert(pthread_equal(b[i].answered_on, pthread_self()));
        cr_assert(!b[i].answered_early);
    }
    cr_assert_eq(segment_count(), 10);
    ql_writer_stats_t st;
    ql_writer_get_stats(w, &st);
    cr_assert_eq(st.batches, 1, "one transaction for the whole queue");
    cr_assert_eq(st.mutations, 10);
    cr_assert_eq(st.failed, 0);
    cr_assert_eq(st.max_batch, 10);
    cr_assert_eq(ql_writer_flush(w), 0);
    ql_writer_free(w);
    answers_destroy(&a);
    ql_test_assert_fsck_clean(store);
}

Test(writer, max_batch_splits_transactions) {
    ql_writer_opts_t o = {.manual = true, .max_batch = 4};
    ql_writer_t *w;
    cr_assert_eq(ql_writer_new(store, &o, &w), 0);
    answers_t a;
    answers_init(&a);
    build_t b[10] = {0};
    for (int i = 0; i < 10; i++) {
        b[i] = (build_t){.answers = &a, .start = i * 100, .end = i * 100 + 100};
        cr_assert_eq(ql_writer_submit(w, build_fn, &b[i], build_done), 0);
    }
    cr_assert_eq(ql_writer_flush(w), 10);
    ql_writer_stats_t st;
    ql_writer_get_stats(w, &st);
    cr_assert_eq(st.batches, 3);
    cr_assert_eq(st.max_batch, 4);
    cr_assert_eq(atomic_load(&commits), 3);
    ql_writer_free(w);
    answers_destroy(&a);
}

/* ---- a failing mutation fails alone ---- */

/* What build_fn's fail_after_write wrote before failing (a project) is not in the store. */
static void assert_failed_writes_discarded(void) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_project_t p;
    cr_assert_eq(ql_project_get(t, "must_not_exist", 0, &p), QL_ENOTFOUND,
                 "a failed mutation's writes are discarded");
    ql_txn_abort(t);
}

Test(writer, a_failing_mutation_fails_alone) {
    ql_writer_opts_t o = {.manual = true};
    ql_writer_t *w;
    cr_assert_eq(ql_writer_new(store, &o, &w), 0);
    answers_t a;
    answers_init(&a);
    build_t b[5] = {
        {.answers = &a, .start = 0, .end = 100},
        {.answers = &a, .start = 50, .end = 150}, /* overlaps the first, same batch */
        {.answers = &a, .start = 100, .end = 200},
        {.answers = &a, .fail_after_write = true},
        {.answers = &a, .start = 200, .end = 300},
    };
    for (int i = 0; i < 5; i++)
        cr_assert_eq(ql_writer_submit(w, build_fn, &b[i], build_done), 0);
    cr_assert_eq(ql_writer_flush(w), 5);
    cr_assert_eq(b[0].status, 0, "%s", b[0].msg);
    cr_assert_eq(b[1].status, QL_ESEGOVERLAP);
    cr_assert_not_null(strstr(b[1].msg, "overlaps"), "%s", b[1].msg);
    cr_assert_eq(b[2].status, 0, "%s", b[2].msg);
    cr_assert_eq(b[3].status, QL_EINVAL);
    cr_assert_str_eq(b[3].msg, "this mutation fails after writing");
    cr_assert_eq(b[4].status, 0, "%s", b[4].msg);
    ql_writer_stats_t st;
    ql_writer_get_stats(w, &st);
    cr_assert_eq(st.batches, 1);
    cr_assert_eq(st.failed, 2);
    cr_assert_eq(segment_count(), 3);
    assert_failed_writes_discarded();
    ql_writer_free(w);
    answers_destroy(&a);
    ql_test_assert_fsck_clean(store);
}

/* A batch of one runs its mutation in the write transaction itself: its failure must still
 * leave nothing, commit nothing, and leave the writer usable. */
Test(writer, a_lone_failing_mutation_leaves_nothing_and_commits_nothing) {
    ql_writer_opts_t o = {.manual = true};
    ql_writer_t *w;
    cr_assert_eq(ql_writer_new(store, &o, &w), 0);
    answers_t a;
    answers_init(&a);
    build_t b[3] = {
        {.answers = &a, .fail_after_write = true},
        {.answers = &a, .start = 0, .end = 100},
        {.answers = &a, .start = 50, .end = 150}, /* overlaps the one before */
    };
    for (int i = 0; i < 3; i++) {
        unsigned long before = atomic_load(&commits);
        cr_assert_eq(ql_writer_submit(w, build_fn, &b[i], build_done), 0);
        cr_assert_eq(ql_writer_flush(w), 1);
        cr_assert_eq(atomic_load(&commits) - before, i == 1 ? 1u : 0u,
                     "only the lone success commits (mutation %d)", i);
    }
    cr_assert_eq(b[0].status, QL_EINVAL);
    cr_assert_str_eq(b[0].msg, "this mutation fails after writing");
    cr_assert_eq(b[1].status, 0, "%s", b[1].msg);
    cr_assert_eq(b[2].status, QL_ESEGOVERLAP, "%s", b[2].msg);
    ql_writer_stats_t st;
    ql_writer_get_stats(w, &st);
    cr_assert_eq(st.failed, 2);
    cr_assert_eq(segment_count(), 1);
    assert_failed_writes_discarded();
    ql_writer_free(w);
    answers_destroy(&a);
    ql_test_assert_fsck_clean(store);
}

/* ---- many concurrent submitters ---- */

#define THREADS 8
#define PER_THREAD 1000

typedef struct {
    ql_writer_t *w;
    build_t *b;
    int n;
    int submit_errors;
} submitter_t;

static void *submitter_main(void *arg) {
    submitter_t *s = arg;
    for (int i = 0; i < s->n; i++)
        if (ql_writer_submit(s->w, build_fn, &s->b[i], build_done))
            s->submit_errors++;
    return NULL;
}

static void run_concurrent(ql_writer_t *w, build_t *b, answers_t *a) {
    pthread_t th[THREADS];
    submitter_t sub[THREADS];
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER_THREAD; i++) {
            int64_t k = (int64_t)t * PER_THREAD + i;
            b[k] = (build_t){.answers = a, .start = k * 1000, .end = k * 1000 + 1000};
        }
        sub[t] = (submitter_t){.w = w, .b = b + (size_t)t * PER_THREAD, .n = PER_THREAD};
        cr_assert_eq(pthread_create(&th[t], NULL, submitter_main, &sub[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        cr_assert_eq(sub[t].submit_errors, 0);
}

Test(writer, concurrent_submitters_share_commits, .timeout = 120) {
    ql_writer_t *w;
    cr_assert_eq(ql_writer_new(store, NULL, &w), 0);
    answers_t a;
    answers_init(&a);
    build_t *b = calloc(THREADS * PER_THREAD, sizeof *b);
    run_concurrent(w, b, &a);
    answers_wait(&a, THREADS * PER_THREAD);

    for (int i = 0; i < THREADS * PER_THREAD; i++)
        CHECK(b[i].status == 0, "mutation %d: %s", i, b[i].msg);
    cr_assert_eq(a.early, 0, "%d answers came before their transaction's sync", a.early);
    ql_writer_stats_t st;
    ql_writer_get_stats(w, &st);
    cr_assert_eq(st.mutations, THREADS * PER_THREAD);
    cr_assert_eq(st.failed, 0);
    cr_assert_lt(st.batches, st.mutations, "group commit: %llu batches for %llu mutations",
                 (unsigned long long)st.batches, (unsigned long long)st.mutations);
    cr_assert_gt(st.max_batch, 1);
    cr_assert_eq(atomic_load(&commits), st.batches, "one synced commit per batch");
    ql_writer_free(w);
    cr_assert_eq(segment_count(), THREADS * PER_THREAD);

    /* Every answered job is there with its steps. */
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    for (int i = 0; i < THREADS * PER_THREAD; i += 97) {
        ql_job_t j;
        CHECK(ql_job_get(t, &b[i].job, 0, &j) == 0, "job %d is missing", i);
        CHECK(j.range_start == b[i].start, "job %d has another range", i);
        ql_job_free(&j);
        ql_step_t s;
        CHECK(ql_step_get(t, &b[i].job, 1, &s) == 0, "job %d lacks a step", i);
        ql_step_free(&s);
    }
    uint64_t n;
    cr_assert_eq(ql_job_count(t, NULL, 1u << QL_READY, &n), 0);
    cr_assert_eq(n, THREADS * PER_THREAD);
    ql_txn_abort(t);
    free(b);
    answers_destroy(&a);
    ql_test_assert_fsck_clean(store);
}

/* ---- the notify hook and ql_writer_complete ---- */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned long notified;
} notifier_t;

static void notify_cb(void *arg) {
    notifier_t *n = arg;
    pthread_mutex_lock(&n->lock);
    n->notified++;
    pthread_cond_broadcast(&n->cond);
    pthread_mutex_unlock(&n->lock);
}

Test(writer, notify_hook_and_complete_answer_on_the_owner_thread, .timeout = 120) {
    notifier_t nt = {.notified = 0};
    pthread_mutex_init(&nt.lock, NULL);
    pthread_cond_init(&nt.cond, NULL);
    ql_writer_opts_t o = {.notify = notify_cb, .notify_arg = &nt};
    ql_writer_t *w;
    cr_assert_eq(ql_writer_new(store, &o, &w), 0);
    answers_t a;
    answers_init(&a);
    build_t *b = calloc(THREADS * PER_THREAD, sizeof *b);
    run_concurrent(w, b, &a);

    /* The owner's loop: wait for a notification (deadline), then drain the answers. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    unsigned long seen = 0;
    while (a.n < THREADS * PER_THREAD) {
        pthread_mutex_lock(&nt.lock);
        int rc = 0;
        while (nt.notified == seen && rc == 0)
            rc = pthread_cond_timedwait(&nt.cond, &nt.lock, &deadline);
        seen = nt.notified;
        pthread_mutex_unlock(&nt.lock);
        cr_assert_eq(rc, 0, "no notification within the deadline (%d answers)", a.n);
        ql_writer_complete(w);
    }
    cr_assert_eq(a.n, THREADS * PER_THREAD);
    for (int i = 0; i < THREADS * PER_THREAD; i++) {
        CHECK(b[i].status == 0, "mutation %d: %s", i, b[i].msg);
        CHECK(pthread_equal(b[i].answered_on, pthread_self()),
              "answers run on the thread that calls complete");
    }
    cr_assert_eq(a.early, 0);
    cr_assert_gt(seen, 0);
    ql_writer_free(w);
    free(b);
    answers_destroy(&a);
    pthread_cond_destroy(&nt.cond);
    pthread_mutex_destroy(&nt.lock);
}

/* ---- ql_writer_call ---- */

Test(writer, call_returns_the_mutation_status_and_message) {
    for (int manual = 0; manual < 2; manual++) {
        ql_writer_opts_t o = {.manual = manual};
        ql_writer_t *w;
        cr_assert_eq(ql_writer_new(store, &o, &w), 0);
        int64_t base = manual * 10000;
        build_t b = {.start = base, .end = base + 100};
        ql_err_t err = {0};
        unsigned long before = atomic_load(&commits);
        cr_assert_eq(ql_writer_call(w, build_fn, &b, &err), 0, "%s", err.msg);
        cr_assert_gt(atomic_load(&commits), before, "call returns after the commit");
        cr_assert_gt(atomic_load(&commits), b.commits_at_apply);
        build_t over = {.start = base + 50, .end = base + 60};
        cr_assert_eq(ql_writer_call(w, build_fn, &over, &err), QL_ESEGOVERLAP);
        cr_assert_eq(err.code, QL_ESEGOVERLAP);
        cr_assert_not_null(strstr(err.msg, "overlaps"), "%s", err.msg);
        cr_assert_eq(ql_writer_call(w, build_fn, &over, NULL), QL_ESEGOVERLAP, "err may be NULL");
        ql_writer_free(w);
    }
    cr_assert_eq(segment_count(), 2);
}

/* ---- shutdown ---- */

typedef struct {
    ql_writer_t *w;
    int resubmit_rc;
    int status;
    bool answered;
} resubmit_t;

static int noop_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    (void)arg;
    (void)err;
    return ql_meta_put_u64(txn, "touched", 1);
}

static void resubmit_done(void *arg, int status, const ql_err_t *err) {
    (void)err;
    resubmit_t *r = arg;
    r->status = status;
    r->answered = true;
    r->resubmit_rc = ql_writer_submit(r->w, noop_fn, r, NULL);
}

Test(writer, submit_while_stopping_is_eshutdown) {
    /* Manual and notify modes answer inside ql_writer_free (after it set the writer stopping),
     * so the resubmission is sure to come too late. */
    for (int mode = 0; mode < 2; mode++) {
        notifier_t nt = {.notified = 0};
        pthread_mutex_init(&nt.lock, NULL);
        pthread_cond_init(&nt.cond, NULL);
        ql_writer_opts_t o = {.manual = mode == 0};
        if (mode == 1) {
            o.notify = notify_cb;
            o.notify_arg = &nt;
        }
        ql_writer_t *w;
        cr_assert_eq(ql_writer_new(store, &o, &w), 0);
        resubmit_t r = {.w = w, .resubmit_rc = 1};
        cr_assert_eq(ql_writer_submit(w, noop_fn, &r, resubmit_done), 0);
        /* free applies what is queued and answers it; anything submitted meanwhile is refused,
         * and its done callback never runs. */
        ql_writer_free(w);
        cr_assert(r.answered, "mode %d: a queued mutation is still answered", mode);
        cr_assert_eq(r.status, 0);
        cr_assert_eq(r.resubmit_rc, QL_ESHUTDOWN, "mode %d", mode);
        cr_assert_str_eq(ql_strerror(QL_ESHUTDOWN), "shutting down");
        pthread_cond_destroy(&nt.cond);
        pthread_mutex_destroy(&nt.lock);
    }
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t v;
    cr_assert_eq(ql_meta_get_u64(t, "touched", &v), 0, "the queued mutation was committed");
    ql_txn_abort(t);
}
