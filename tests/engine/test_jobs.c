/*
 * The job and step state machines, the actions and the segment effects of job outcomes
 * (docs/design/jobs.md: States, Actions, Segment effects) against engine/jobs.c on a real store.
 *
 * The legal pairs are written out below from the spec, not read from the code's tables, so a
 * change to either side fails a test. Every test gets a fresh data directory. Jobs are set up
 * in the state a test starts from by writing their records directly (force()), which bypasses
 * the state machine on purpose; everything under test then goes through ql_job_set_state,
 * ql_step_set_state or ql_job_apply_action.
 *
 * The segment effects are checked where they happen in a server: a scheduler on a virtual
 * clock runs real chains through a manual writer, and a commit hook inspects the store after
 * EVERY commit: a job is never seen final without its segment effects, nor its segment changed
 * while the job is not final, which is what "in the same transaction" means to a reader.
 */
#include "engine/engine.h"
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"
#include "tests/common/tmp_util.h"

#include "tests/common/store_util.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY 86400000LL
#define BASE 1788220800000LL /* 2026-09-01T00:00:00Z */

static char dir[64];
static ql_store_t *store;
static ql_templates_t *templates;
static ql_id_t model;      /* "m": INC_BUILD runs three noop steps */
static ql_id_t warn_model; /* "mw": template set "warnset", whose second step warns */
static int64_t now = BASE + 1000 * DAY;

static const char TEMPLATES[] = "templates:\n"
                                "  INC_BUILD:\n"
                                "    steps:\n"
                                "      - {name: first, kind: noop}\n"
                                "      - {name: second, kind: noop}\n"
                                "      - {name: third, kind: noop}\n"
                                "  INDEX_REFRESH:\n"
                                "    steps:\n"
                                "      - {name: refresh, kind: noop}\n"
                                "  INDEX_MERGE:\n"
                                "    steps:\n"
                                "      - {name: merge, kind: noop}\n"
                                "template_sets:\n"
                                "  warnset:\n"
                                "    INC_BUILD:\n"
                                "      steps:\n"
                                "        - {name: first, kind: noop}\n"
                                "        - {name: careful, kind: warn, message: look at this}\n";

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void new_model(ql_txn_t *t, const char *name, const char *set, ql_id_t *out) {
    ql_model_t m = {0};
    snprintf(m.name, sizeof m.name, "%s", name);
    snprintf(m.project, sizeof m.project, "p");
    m.partitioned = true;
    snprintf(m.partition_column, sizeof m.partition_column, "dt");
    snprintf(m.partition_format, sizeof m.partition_format, "yyyy-MM-dd");
    snprintf(m.job_template, sizeof m.job_template, "%s", set);
    ql_err_t err = {0};
    cr_assert_eq(ql_meta_create_model(t, &m, now, &err), 0, "%s", err.msg);
    *out = m.id;
}

static void setup(void) {
    ql_test_tmpdir(dir, sizeof dir, "ql_jobs");
    ql_store_opts_t so;
    ql_test_store_opts(dir, &so);
    so.map_size = 64u << 20;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&so, &store, &err), 0, "%s", err.msg);
    cr_assert_eq(
        ql_templates_load_buffer(TEMPLATES, strlen(TEMPLATES), "jobs.yaml", &templates, &err), 0,
        "%s", err.msg);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_project_t p = {0};
    snprintf(p.name, sizeof p.name, "p");
    cr_assert_eq(ql_meta_create_project(t, &p, now, &err), 0, "%s", err.msg);
    new_model(t, "m", "", &model);
    new_model(t, "mw", "warnset", &warn_model);
    cr_assert_eq(ql_txn_commit(t), 0);
}

static void teardown(void) {
    ql_store_set_commit_hook(store, NULL, NULL);
    ql_store_close(store);
    ql_templates_free(templates);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- store helpers ---- */

static void fsck_clean(void) {
    ql_fsck_report_t r = {0};
    cr_assert_eq(ql_store_fsck(store, NULL, &r), 0);
    if (r.violations) /* again, to show them */
        ql_store_fsck(store, stderr, &r);
    cr_assert_eq(r.violations, 0, "fsck found %llu violations", (unsigned long long)r.violations);
}

/* Submits through the one submission path (a writer mutation, run here in a direct txn). */
static ql_id_t submit(ql_submit_kind_t kind, const ql_id_t *mdl, int day, const ql_id_t *ids,
                      size_t n) {
    ql_submit_op_t op = {
        .kind = kind,
        .templates = templates,
        .model = *mdl,
        .start = BASE + day * DAY,
        .end = BASE + (day + 1) * DAY,
        .ids = ids,
        .n_ids = n,
        .priority = 3,
        .submitter = "ADMIN",
        .now = ++now,
    };
    ql_txn_t *t;
    ql_err_t err = {0};
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_submit_fn(t, &op, &err), 0, "submit: %s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    return op.job;
}

static ql_id_t build(int day) {
    return submit(QL_SUBMIT_BUILD, &model, day, NULL, 0);
}

static ql_job_t get_job(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, 0, &j), 0);
    ql_txn_abort(t);
    return j;
}

static ql_step_t get_step(const ql_id_t *id, uint32_t seq) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, id, seq, &s), 0);
    ql_txn_abort(t);
    return s;
}

static ql_state_t job_state(const ql_id_t *id) {
    ql_job_t j = get_job(id);
    ql_state_t s = j.state;
    ql_job_free(&j);
    return s;
}

static ql_state_t step_state(const ql_id_t *id, uint32_t seq) {
    ql_step_t s = get_step(id, seq);
    ql_state_t st = s.state;
    ql_step_free(&s);
    return st;
}

static ql_id_t job_segment(const ql_id_t *id) {
    ql_job_t j = get_job(id);
    ql_id_t seg = j.segment;
    ql_job_free(&j);
    return seg;
}

/* The status of a segment, or -1 when it does not exist. */
static int seg_status(const ql_id_t *id) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    ql_segment_t s;
    int rc = ql_segment_get(t, id, &s);
    int status = -1;
    if (rc == 0) {
        status = (int)s.status;
        ql_segment_free(&s);
    } else {
        cr_assert_eq(rc, QL_ENOTFOUND);
    }
    ql_txn_abort(t);
    return status;
}

/* Writes a job's state and its steps' states directly, bypassing the state machine: how a
 * test puts a job where it starts from. steps (n_steps entries) may be NULL: the typical steps
 * of that job state (see typical_steps). */
static void force(const ql_id_t *id, ql_state_t js, const ql_state_t *steps) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, id, QL_DECODE_KEEP_EXTRA, &j), 0);
    for (uint32_t i = 0; i < j.n_steps; i++) {
        ql_state_t st;
        if (steps) {
            st = steps[i];
        } else {
            /* Finished steps before the "current" one, the current one in the state that fits
             * the job's, READY after it. */
            uint32_t cur = j.n_steps > 1 ? 1 : 0;
            ql_state_t at = js == QL_RUNNING     ? QL_RUNNING
                            : js == QL_ERROR     ? QL_ERROR
                            : js == QL_SUCCEED   ? QL_SUCCEED
                            : js == QL_DISCARDED ? QL_DISCARDED
                                                 : QL_READY;
            st = i < cur    ? (js == QL_READY || js == QL_PENDING || js == QL_SUICIDAL ? QL_READY
                                                                                       : QL_SUCCEED)
                 : i == cur ? at
                            : (js == QL_SUCCEED     ? QL_SUCCEED
                               : js == QL_DISCARDED ? QL_DISCARDED
                                                    : QL_READY);
        }
        ql_step_t s;
        cr_assert_eq(ql_step_get(t, id, i, &s), 0);
        s.state = st;
        if (st == QL_RUNNING) {
            s.attempts = 1;
            s.start_time = now;
            s.pgid = 4242; /* a recorded process group and marker, which actions keep */
            memcpy(s.token, "0123456789abcdef0123456789abcdef", QL_STEP_TOKEN_LEN + 1);
        }
        if (st == QL_ERROR) {
            s.attempts = 3;
            s.start_time = now - 10;
            s.end_time = now;
        }
        if (st == QL_SUCCEED) {
            s.start_time = now - 20;
            s.end_time = now - 15;
        }
        cr_assert_eq(ql_step_put(t, &s), 0);
        ql_step_free(&s);
    }
    j.state = js;
    j.modify_time = ++now;
    cr_assert_eq(ql_job_put(t, &j), 0);
    ql_job_free(&j);
    cr_assert_eq(ql_txn_commit(t), 0);
}

/* ---- the job transition table (docs/design/jobs.md, States) ---- */

typedef struct pair {
    ql_state_t from, to;
} pair_t;

static const pair_t job_legal[] = {
    {QL_READY, QL_PENDING},    {QL_READY, QL_PAUSED},   {QL_READY, QL_DISCARDED},
    {QL_READY, QL_SUICIDAL},   {QL_PENDING, QL_READY},  {QL_PENDING, QL_RUNNING},
    {QL_PENDING, QL_ERROR},    {QL_PENDING, QL_PAUSED}, {QL_PENDING, QL_DISCARDED},
    {QL_PENDING, QL_SUICIDAL}, {QL_RUNNING, QL_READY},  {QL_RUNNING, QL_SUCCEED},
    {QL_RUNNING, QL_ERROR},    {QL_RUNNING, QL_PAUSED}, {QL_RUNNING, QL_DISCARDED},
    {QL_RUNNING, QL_SUICIDAL}, {QL_PAUSED, QL_READY},   {QL_PAUSED, QL_DISCARDED},
    {QL_PAUSED, QL_SUICIDAL},  {QL_ERROR, QL_READY},    {QL_ERROR, QL_DISCARDED},
    {QL_ERROR, QL_SUICIDAL},   {QL_SUCCEED, QL_READY},
};
#define N_JOB_LEGAL (sizeof job_legal / sizeof job_legal[0])

static bool in_table(const pair_t *t, size_t n, ql_state_t from, ql_state_t to) {
    for (size_t i = 0; i < n; i++)
        if (t[i].from == from && t[i].to == to)
            return true;
    return false;
}

ParameterizedTestParameters(job_transition, legal) {
    return cr_make_param_array(pair_t, (void *)job_legal, N_JOB_LEGAL);
}

ParameterizedTest(pair_t *p, job_transition, legal, .init = setup, .fini = teardown) {
    const char *from = ql_state_name(p->from), *to = ql_state_name(p->to);
    cr_assert(ql_job_transition_legal(p->from, p->to), "%s -> %s must be legal", from, to);
    ql_id_t job = build(0);
    ql_id_t seg = job_segment(&job);
    force(&job, p->from, NULL);

    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_job_t j;
    cr_assert_eq(ql_job_get(t, &job, QL_DECODE_KEEP_EXTRA, &j), 0);
    int64_t at = ++now;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_set_state(t, &j, p->to, false, at, &err), 0, "%s -> %s: %s", from, to,
                 err.msg);
    ql_job_free(&j);
    cr_assert_eq(ql_txn_commit(t), 0);

    j = get_job(&job);
    cr_assert_eq(j.state, p->to);
    cr_assert_eq(j.modify_time, at);
    if (p->to == QL_RUNNING)
        cr_assert_eq(j.start_time, at, "RUNNING sets the start time");
    if (ql_state_is_final(p->to) || p->to == QL_ERROR)
        cr_assert_eq(j.end_time, at, "%s sets the end time", to);
    if (p->to == QL_READY)
        cr_assert_eq(j.end_time, 0, "READY clears the end time");
    ql_job_free(&j);

    /* The indexes moved with the record: the fetcher's index and the counters. */
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    uint64_t n;
    cr_assert_eq(ql_job_count(t, "p", 1u << p->to, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(ql_job_count(t, "p", 1u << p->from, &n), 0);
    cr_assert_eq(n, 0);
    ql_txn_abort(t);

    /* Segment effects of a final state (same transaction: nothing else was committed). */
    int want = p->to == QL_SUCCEED                             ? QL_SEG_READY
               : p->to == QL_DISCARDED || p->to == QL_SUICIDAL ? -1
                                                               : QL_SEG_NEW;
    cr_assert_eq(seg_status(&seg), want, "%s -> %s: segment status %d, expected %d", from, to,
                 seg_status(&seg), want);
}

Test(job_transition, every_other_pair_is_refused_naming_both_states, .init = setup,
     .fini = teardown) {
    /* Job states and, as targets, the two step-only states and an out-of-range value. */
    const ql_state_t targets[] = {QL_READY,     QL_PENDING, QL_RUNNING,  QL_ERROR, QL_PAUSED,
                                  QL_DISCARDED, QL_SUCCEED, QL_SUICIDAL, QL_SKIP,  QL_WARNING};
    int refused = 0;
    for (int from = 0; from < QL_JOB_STATE_COUNT; from++) {
        ql_id_t job = build(from);
        force(&job, (ql_state_t)from, NULL);
        ql_job_t before = get_job(&job);
        for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
            ql_state_t to = targets[k];
            if (in_table(job_legal, N_JOB_LEGAL, (ql_state_t)from, to))
                continue;
            const char *fn = ql_state_name((ql_state_t)from), *tn = ql_state_name(to);
            cr_assert_not(ql_job_transition_legal((ql_state_t)from, to), "%s -> %s is illegal", fn,
                          tn);
            ql_txn_t *t;
            cr_assert_eq(ql_txn_begin(store, true, &t), 0);
            ql_job_t j;
            cr_assert_eq(ql_job_get(t, &job, QL_DECODE_KEEP_EXTRA, &j), 0);
            ql_err_t err = {0};
            int rc = ql_job_set_state(t, &j, to, false, ++now, &err);
            cr_assert_eq(rc, QL_ETRANSITION, "%s -> %s: rc %d", fn, tn, rc);
            cr_assert_eq(err.code, QL_ETRANSITION);
            char want[64];
            snprintf(want, sizeof want, "from %s to %s", fn, tn);
            cr_assert_not_null(strstr(err.msg, want), "'%s' should name both states ('%s')",
                               err.msg, want);
            ql_job_free(&j);
            /* Commit: a refused transition must not have written anything itself. */
            cr_assert_eq(ql_txn_commit(t), 0);
            ql_job_t after = get_job(&job);
            cr_assert_eq(after.state, before.state);
            cr_assert_eq(after.modify_time, before.modify_time);
            ql_job_free(&after);
            refused++;
        }
        ql_job_free(&before);
    }
    /* 8 x 10 targets minus the 23 legal pairs. */
    cr_assert_eq(refused, 8 * 10 - (int)N_JOB_LEGAL);
    cr_assert_not(ql_job_transition_legal((ql_state_t)42, QL_READY));
    cr_assert_not(ql_job_transition_legal(QL_READY, (ql_state_t)42));
}

/* ---- the step transitions (docs/design/jobs.md, step states) ---- */

static const pair_t step_legal[] = {
    /* READY -> RUNNING; READY -> SKIP (a template condition); non-final -> DISCARDED */
    {QL_READY, QL_RUNNING},
    {QL_READY, QL_SKIP},
    {QL_READY, QL_DISCARDED},
    /* RUNNING -> SUCCEED, WARNING or ERROR; back to READY when paused, restarted or interrupted;
     * SKIP (the job table's "steps also SKIP, WARNING"); DISCARDED with its job */
    {QL_RUNNING, QL_SUCCEED},
    {QL_RUNNING, QL_WARNING},
    {QL_RUNNING, QL_ERROR},
    {QL_RUNNING, QL_READY},
    {QL_RUNNING, QL_SKIP},
    {QL_RUNNING, QL_DISCARDED},
    /* ERROR -> READY on RESUME (and RESTART); DISCARDED with its job */
    {QL_ERROR, QL_READY},
    {QL_ERROR, QL_DISCARDED},
    /* RESTART: all steps -> READY, finished ones included */
    {QL_SUCCEED, QL_READY},
    {QL_WARNING, QL_READY},
    {QL_SKIP, QL_READY},
    /* No step transition enters PENDING or PAUSED; a step record found in one (written by an
     * older or foreign build) may still leave it the way a READY or ERROR step would. */
    {QL_PENDING, QL_READY},
    {QL_PENDING, QL_RUNNING},
    {QL_PENDING, QL_DISCARDED},
    {QL_PAUSED, QL_READY},
    {QL_PAUSED, QL_DISCARDED},
};
#define N_STEP_LEGAL (sizeof step_legal / sizeof step_legal[0])

/* Writes step seq of job in state st directly. */
static void force_step(const ql_id_t *job, uint32_t seq, ql_state_t st) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, job, seq, &s), 0);
    s.state = st;
    s.start_time = now - 5;
    s.end_time = st == QL_RUNNING || st == QL_READY ? 0 : now - 1;
    s.pgid = st == QL_RUNNING ? 777 : 0;
    cr_assert_eq(ql_step_put(t, &s), 0);
    ql_step_free(&s);
    cr_assert_eq(ql_txn_commit(t), 0);
}

ParameterizedTestParameters(step_transition, legal) {
    return cr_make_param_array(pair_t, (void *)step_legal, N_STEP_LEGAL);
}

ParameterizedTest(pair_t *p, step_transition, legal, .init = setup, .fini = teardown) {
    const char *from = ql_state_name(p->from), *to = ql_state_name(p->to);
    cr_assert(ql_step_transition_legal(p->from, p->to), "step %s -> %s must be legal", from, to);
    ql_id_t job = build(0);
    force_step(&job, 0, p->from);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_step_t s;
    cr_assert_eq(ql_step_get(t, &job, 0, &s), 0);
    int64_t at = ++now;
    ql_err_t err = {0};
    cr_assert_eq(ql_step_set_state(t, &s, p->to, at, &err), 0, "%s -> %s: %s", from, to, err.msg);
    ql_step_free(&s);
    cr_assert_eq(ql_txn_commit(t), 0);
    s = get_step(&job, 0);
    cr_assert_eq(s.state, p->to);
    if (p->to == QL_RUNNING) {
        cr_assert_eq(s.start_time, at, "RUNNING records the start");
        cr_assert_eq(s.end_time, 0);
    } else if (p->to != QL_READY) {
        cr_assert_eq(s.end_time, at, "%s records the end", to);
    }
    if (p->to != QL_RUNNING)
        cr_assert_eq(s.pgid, 0, "a step that is not running has no process group");
    ql_step_free(&s);
}

Test(step_transition, every_other_pair_is_refused_naming_both_states, .init = setup,
     .fini = teardown) {
    int refused = 0;
    ql_id_t job = build(0);
    for (int from = 0; from < QL_STATE_COUNT; from++) {
        force_step(&job, 0, (ql_state_t)from);
        for (int to = 0; to < QL_STATE_COUNT; to++) {
            if (in_table(step_legal, N_STEP_LEGAL, (ql_state_t)from, (ql_state_t)to))
                continue;
            const char *fn = ql_state_name((ql_state_t)from), *tn = ql_state_name((ql_state_t)to);
            cr_assert_not(ql_step_transition_legal((ql_state_t)from, (ql_state_t)to),
                          "step %s -> %s is illegal", fn, tn);
            ql_txn_t *t;
            cr_assert_eq(ql_txn_begin(store, true, &t), 0);
            ql_step_t s;
            cr_assert_eq(ql_step_get(t, &job, 0, &s), 0);
            ql_err_t err = {0};
            int rc = ql_step_set_state(t, &s, (ql_state_t)to, ++now, &err);
            cr_assert_eq(rc, QL_ETRANSITION, "step %s -> %s: rc %d", fn, tn, rc);
            char want[64];
            snprintf(want, sizeof want, "from %s to %s", fn, tn);
            cr_assert_not_null(strstr(err.msg, want), "'%s' should name both states", err.msg);
            char sid[QL_ID_STR_LEN + 8];
            ql_step_id_format(&job, 0, sid);
            cr_assert_not_null(strstr(err.msg, sid), "'%s' should name the step %s", err.msg, sid);
            ql_step_free(&s);
            cr_assert_eq(ql_txn_commit(t), 0);
            cr_assert_eq(step_state(&job, 0), (ql_state_t)from, "a refused transition wrote");
            refused++;
        }
    }
    cr_assert_eq(refused, 10 * 10 - (int)N_STEP_LEGAL);
    /* Nothing enters the job-only states. */
    for (int from = 0; from < QL_STATE_COUNT; from++) {
        cr_assert_not(ql_step_transition_legal((ql_state_t)from, QL_PENDING));
        cr_assert_not(ql_step_transition_legal((ql_state_t)from, QL_PAUSED));
        cr_assert_not(ql_step_transition_legal((ql_state_t)from, QL_SUICIDAL));
    }
}

/* ---- display statuses ---- */

Test(display, each_state) {
    static const struct {
        ql_state_t s;
        const char *d;
    } want[] = {
        {QL_READY, "PENDING"},       {QL_PENDING, "PENDING"},    {QL_RUNNING, "RUNNING"},
        {QL_ERROR, "ERROR"},         {QL_SUCCEED, "FINISHED"},   {QL_PAUSED, "STOPPED"},
        {QL_DISCARDED, "DISCARDED"}, {QL_SUICIDAL, "DISCARDED"},
    };
    cr_assert_eq(sizeof want / sizeof want[0], QL_JOB_STATE_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert_str_eq(ql_job_display_status(want[i].s), want[i].d, "%s",
                         ql_state_name(want[i].s));
        /* The reverse mapping (REST filters) contains the state. */
        cr_assert(ql_job_display_mask(want[i].d) & (1u << want[i].s));
    }
    cr_assert_eq(ql_job_display_mask("PENDING"), (1u << QL_READY) | (1u << QL_PENDING));
    cr_assert_eq(ql_job_display_mask("DISCARDED"), (1u << QL_DISCARDED) | (1u << QL_SUICIDAL));
    cr_assert_eq(ql_job_display_mask("FINISHED"), 1u << QL_SUCCEED);
    cr_assert_eq(ql_job_display_mask("STOPPED"), 1u << QL_PAUSED);
    cr_assert_eq(ql_job_display_mask("SUCCEED"), 0, "internal names are not display statuses");
}

/* ---- the actions table ---- */

static bool spec_allows(ql_action_t a, ql_state_t s) {
    const char *d = ql_job_display_status(s);
    static const char *const allowed[4][5] = {
        [QL_ACTION_PAUSE] = {"PENDING", "RUNNING"},
        [QL_ACTION_RESUME] = {"ERROR", "STOPPED"},
        [QL_ACTION_RESTART] = {"RUNNING", "ERROR", "STOPPED"},
        [QL_ACTION_DISCARD] = {"PENDING", "RUNNING", "ERROR", "STOPPED"},
    };
    for (int i = 0; i < 5 && allowed[a][i]; i++)
        if (strcmp(allowed[a][i], d) == 0)
            return true;
    return false;
}

static const ql_state_t after_action[4] = {
    [QL_ACTION_PAUSE] = QL_PAUSED,
    [QL_ACTION_RESUME] = QL_READY,
    [QL_ACTION_RESTART] = QL_READY,
    [QL_ACTION_DISCARD] = QL_DISCARDED,
};

static int apply(const ql_id_t *job, ql_action_t a, ql_state_t *was, ql_err_t *err) {
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    ql_err_clear(err);
    int rc = ql_job_apply_action(t, job, a, ++now, was, err);
    if (rc)
        ql_txn_abort(t);
    else
        cr_assert_eq(ql_txn_commit(t), 0);
    return rc;
}

Test(actions, each_action_in_each_state, .init = setup, .fini = teardown) {
    int day = 0, allowed = 0;
    for (int s = 0; s < QL_JOB_STATE_COUNT; s++) {
        for (int a = 0; a < 4; a++) {
            ql_state_t st = (ql_state_t)s;
            ql_action_t act = (ql_action_t)a;
            cr_assert_eq(ql_action_allowed(act, st), spec_allows(act, st), "%s in %s",
                         ql_action_name(act), ql_state_name(st));
            ql_id_t job = build(day++);
            force(&job, st, NULL);
            ql_state_t was = (ql_state_t)-1;
            ql_err_t err;
            int rc = apply(&job, act, &was, &err);
            cr_assert_eq(was, st, "*was reports the state before");
            if (spec_allows(act, st)) {
                allowed++;
                cr_assert_eq(rc, 0, "%s in %s: %s", ql_action_name(act), ql_state_name(st),
                             err.msg);
                cr_assert_eq(job_state(&job), after_action[act], "%s in %s", ql_action_name(act),
                             ql_state_name(st));
            } else {
                cr_assert_eq(rc, QL_EACTION, "%s in %s: rc %d", ql_action_name(act),
                             ql_state_name(st), rc);
                cr_assert_eq(err.code, QL_EACTION);
                cr_assert_not_null(strstr(err.msg, ql_action_name(act)), "'%s' names the action",
                                   err.msg);
                cr_assert_not_null(strstr(err.msg, ql_job_display_status(st)),
                                   "'%s' names the state", err.msg);
                cr_assert_eq(job_state(&job), st, "a refused action changed the job");
            }
        }
    }
    /* PAUSE 3 states, RESUME 2, RESTART 3, DISCARD 5 */
    cr_assert_eq(allowed, 13);
    fsck_clean();
}

Test(actions, names_and_unknown_jobs, .init = setup, .fini = teardown) {
    const char *names[] = {"PAUSE", "RESUME", "RESTART", "DISCARD"};
    for (int i = 0; i < 4; i++) {
        ql_action_t a;
        cr_assert_eq(ql_action_parse(names[i], &a), 0);
        cr_assert_eq((int)a, i);
        cr_assert_str_eq(ql_action_name(a), names[i]);
    }
    ql_action_t a;
    cr_assert_eq(ql_action_parse("STOP", &a), QL_EINVAL);
    cr_assert_eq(ql_action_parse("pause", &a), QL_EINVAL);
    ql_id_t nobody = {{1, 2, 3}};
    ql_err_t err;
    cr_assert_eq(apply(&nobody, QL_ACTION_PAUSE, NULL, &err), QL_ENOTFOUND);
    cr_assert_not_null(strstr(err.msg, "not found"), "%s", err.msg);
}

Test(actions, pause_of_running_returns_the_running_step_to_ready, .init = setup, .fini = teardown) {
    ql_id_t job = build(0);
    ql_id_t seg = job_segment(&job);
    force(&job, QL_RUNNING, (ql_state_t[]){QL_SUCCEED, QL_RUNNING, QL_READY});
    ql_err_t err;
    cr_assert_eq(apply(&job, QL_ACTION_PAUSE, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(job_state(&job), QL_PAUSED);
    cr_assert_eq(step_state(&job, 0), QL_SUCCEED, "a finished step stays finished");
    ql_step_t s = get_step(&job, 1);
    cr_assert_eq(s.state, QL_READY, "the running step returns to READY");
    /* The action commits before the try is stopped: its next try sweeps what a crash left. */
    cr_assert_eq(s.pgid, 4242, "its process group is kept");
    cr_assert_str_eq(s.token, "0123456789abcdef0123456789abcdef", "its marker is kept");
    ql_step_free(&s);
    cr_assert_eq(step_state(&job, 2), QL_READY);
    cr_assert_eq(seg_status(&seg), QL_SEG_NEW, "a paused job keeps its NEW segment");
    fsck_clean();
}

Test(actions, resume_readies_the_first_error_step_only, .init = setup, .fini = teardown) {
    ql_id_t job = build(0);
    ql_id_t seg = job_segment(&job);
    force(&job, QL_ERROR, (ql_state_t[]){QL_SUCCEED, QL_ERROR, QL_READY});
    ql_step_t done_before = get_step(&job, 0);
    ql_err_t err;
    cr_assert_eq(apply(&job, QL_ACTION_RESUME, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(job_state(&job), QL_READY);
    ql_step_t s0 = get_step(&job, 0), s1 = get_step(&job, 1);
    cr_assert_eq(s0.state, QL_SUCCEED, "completed steps are not rerun");
    cr_assert_eq(s0.end_time, done_before.end_time, "and keep their times");
    cr_assert_eq(s1.state, QL_READY, "the failed step is ready again");
    cr_assert_eq(s1.attempts, 0, "with a fresh retry budget");
    cr_assert_eq(step_state(&job, 2), QL_READY);
    cr_assert_eq(seg_status(&seg), QL_SEG_NEW);
    ql_step_free(&s0);
    ql_step_free(&s1);
    ql_step_free(&done_before);

    /* A paused job resumes where it stopped. */
    ql_id_t paused = build(1);
    force(&paused, QL_PAUSED, (ql_state_t[]){QL_SUCCEED, QL_READY, QL_READY});
    cr_assert_eq(apply(&paused, QL_ACTION_RESUME, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(job_state(&paused), QL_READY);
    cr_assert_eq(step_state(&paused, 0), QL_SUCCEED);
    fsck_clean();
}

Test(actions, restart_readies_every_step_and_keeps_the_segment_new, .init = setup,
     .fini = teardown) {
    ql_id_t job = build(0);
    ql_id_t seg = job_segment(&job);
    force(&job, QL_ERROR, (ql_state_t[]){QL_SUCCEED, QL_ERROR, QL_READY});
    ql_err_t err;
    cr_assert_eq(apply(&job, QL_ACTION_RESTART, NULL, &err), 0, "%s", err.msg);
    ql_job_t j = get_job(&job);
    cr_assert_eq(j.state, QL_READY);
    cr_assert_eq(j.start_time, 0, "a restarted job has not started yet");
    ql_job_free(&j);
    for (uint32_t i = 0; i < 3; i++) {
        ql_step_t s = get_step(&job, i);
        cr_assert_eq(s.state, QL_READY, "step %u", i);
        cr_assert_eq(s.attempts, 0);
        cr_assert_null(s.failed_msg);
        ql_step_free(&s);
    }
    cr_assert_eq(seg_status(&seg), QL_SEG_NEW, "the segment is kept NEW and rebuilt");

    /* Restarting a running job also readies its running step. */
    ql_id_t running = build(1);
    force(&running, QL_RUNNING, (ql_state_t[]){QL_SUCCEED, QL_RUNNING, QL_READY});
    cr_assert_eq(apply(&running, QL_ACTION_RESTART, NULL, &err), 0, "%s", err.msg);
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_eq(step_state(&running, i), QL_READY, "step %u", i);
    fsck_clean();
}

/* DISCARD of a job of kind `kind`: non-final steps DISCARDED, the job DISCARDED, its NEW segment
 * gone, the sources of a refresh or merge kept; all or nothing (an aborted transaction leaves
 * everything as it was). */
static void discard_case(ql_submit_kind_t kind) {
    ql_id_t a = build(0), b = build(1);
    force(&a, QL_RUNNING, (ql_state_t[]){QL_SUCCEED, QL_SUCCEED, QL_RUNNING});
    force(&b, QL_RUNNING, (ql_state_t[]){QL_SUCCEED, QL_SUCCEED, QL_RUNNING});
    /* Finish the two builds for real so that their segments can be refreshed or merged. */
    ql_txn_t *t;
    ql_err_t err = {0};
    for (int i = 0; i < 2; i++) {
        const ql_id_t *id = i ? &b : &a;
        cr_assert_eq(ql_txn_begin(store, true, &t), 0);
        ql_step_t s;
        cr_assert_eq(ql_step_get(t, id, 2, &s), 0);
        cr_assert_eq(ql_step_set_state(t, &s, QL_SUCCEED, ++now, &err), 0, "%s", err.msg);
        ql_step_free(&s);
        ql_job_t j;
        cr_assert_eq(ql_job_get(t, id, QL_DECODE_KEEP_EXTRA, &j), 0);
        cr_assert_eq(ql_job_set_state(t, &j, QL_SUCCEED, false, ++now, &err), 0, "%s", err.msg);
        ql_job_free(&j);
        cr_assert_eq(ql_txn_commit(t), 0);
    }
    ql_id_t sa = job_segment(&a), sb = job_segment(&b);
    cr_assert_eq(seg_status(&sa), QL_SEG_READY);
    ql_id_t job, srcs[2] = {sa, sb};
    size_t n_src = 0;
    switch (kind) {
    case QL_SUBMIT_BUILD:
        job = build(5);
        break;
    case QL_SUBMIT_REFRESH:
        job = submit(QL_SUBMIT_REFRESH, &model, 0, srcs, 1);
        n_src = 1;
        break;
    case QL_SUBMIT_MERGE:
        job = submit(QL_SUBMIT_MERGE, &model, 0, srcs, 2);
        n_src = 2;
        break;
    case QL_SUBMIT_ADHOC:
        cr_assert_fail("an ad-hoc job has no segment to discard");
    }
    ql_id_t seg = job_segment(&job);
    cr_assert_eq(seg_status(&seg), QL_SEG_NEW);
    ql_job_t j = get_job(&job);
    uint32_t n = j.n_steps;
    ql_job_free(&j);
    force(&job, QL_RUNNING, NULL);

    /* Aborted: nothing happened, neither to the job nor to the segment. */
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_job_apply_action(t, &job, QL_ACTION_DISCARD, ++now, NULL, &err), 0, "%s",
                 err.msg);
    ql_txn_abort(t);
    cr_assert_eq(job_state(&job), QL_RUNNING);
    cr_assert_eq(seg_status(&seg), QL_SEG_NEW);

    /* Committed: everything happened in that one transaction. */
    cr_assert_eq(apply(&job, QL_ACTION_DISCARD, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(job_state(&job), QL_DISCARDED);
    cr_assert_eq(seg_status(&seg), -1, "the NEW segment is removed");
    for (uint32_t i = 0; i < n; i++) {
        ql_state_t st = step_state(&job, i);
        if (n > 1 && i == 0)
            cr_assert_eq(st, QL_SUCCEED, "a finished step stays finished");
        else
            cr_assert_eq(st, QL_DISCARDED, "step %u is %s", i, ql_state_name(st));
    }
    for (size_t i = 0; i < n_src; i++)
        cr_assert_eq(seg_status(&srcs[i]), QL_SEG_READY, "a discarded job's sources stay");
    fsck_clean();
}

Test(actions, discard_inc_build, .init = setup, .fini = teardown) {
    discard_case(QL_SUBMIT_BUILD);
}
Test(actions, discard_refresh, .init = setup, .fini = teardown) {
    discard_case(QL_SUBMIT_REFRESH);
}
Test(actions, discard_merge, .init = setup, .fini = teardown) {
    discard_case(QL_SUBMIT_MERGE);
}

/* ---- outcomes through a scheduler on a virtual clock ---- */

typedef struct tracked {
    ql_id_t job;
    ql_id_t seg;
    ql_id_t sources[2];
    size_t n_sources;
    bool warned;
} tracked_t;

typedef struct vworld {
    ql_clock_t *clock;
    ql_writer_t *writer;
    ql_sched_t *sched;
    tracked_t tracked[8];
    size_t n_tracked;
    uint64_t commits_checked;
    int ended[QL_STATE_COUNT];
} vworld_t;

static vworld_t vw;

/* After every commit: a job is final exactly when its segment effects are in place. */
static void check_invariants(void *arg) {
    vworld_t *w = arg;
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, false, &t), 0);
    for (size_t i = 0; i < w->n_tracked; i++) {
        const tracked_t *k = &w->tracked[i];
        ql_job_t j;
        cr_assert_eq(ql_job_get(t, &k->job, 0, &j), 0);
        ql_segment_t s;
        int rc = ql_segment_get(t, &k->seg, &s);
        if (j.state == QL_SUCCEED) {
            cr_assert_eq(rc, 0, "a SUCCEED job's segment exists");
            cr_assert_eq(s.status, k->warned ? QL_SEG_WARNING : QL_SEG_READY,
                         "job SUCCEED in the same commit as its segment status (got %s)",
                         ql_seg_status_name(s.status));
        } else if (ql_state_is_final(j.state)) {
            cr_assert_eq(rc, QL_ENOTFOUND, "a %s job's NEW segment is gone",
                         ql_state_name(j.state));
        } else {
            cr_assert_eq(rc, 0);
            cr_assert_eq(s.status, QL_SEG_NEW, "a %s job's segment is still NEW",
                         ql_state_name(j.state));
        }
        if (rc == 0)
            ql_segment_free(&s);
        for (size_t x = 0; x < k->n_sources; x++) {
            int src = ql_segment_get(t, &k->sources[x], &s);
            if (j.state == QL_SUCCEED) {
                cr_assert_eq(src, QL_ENOTFOUND, "replaced in the commit that ends the job");
            } else {
                cr_assert_eq(src, 0, "a source stays until its job succeeds");
                ql_segment_free(&s);
            }
        }
        ql_job_free(&j);
    }
    ql_txn_abort(t);
    w->commits_checked++;
}

static void on_job_end(void *arg, const ql_id_t *job, ql_state_t state) {
    (void)job;
    ((vworld_t *)arg)->ended[state]++;
}

static void vworld_start(void) {
    memset(&vw, 0, sizeof vw);
    cr_assert_eq(ql_clock_virtual_new(now, &vw.clock), 0);
    ql_writer_opts_t wo = {.manual = true};
    cr_assert_eq(ql_writer_new(store, &wo, &vw.writer), 0);
    ql_sched_opts_t so = {
        .store = store,
        .writer = vw.writer,
        .clock = vw.clock,
        .templates = templates,
        .max_concurrent_jobs = 4,
        .poll_interval_ms = 1000,
        .on_job_end = on_job_end,
        .hook_arg = &vw,
    };
    cr_assert_eq(ql_sched_new(&so, &vw.sched), 0);
}

static void vworld_stop(void) {
    ql_store_set_commit_hook(store, NULL, NULL);
    ql_sched_free(vw.sched);
    ql_writer_free(vw.writer);
    ql_clock_free(vw.clock);
}

/* Runs virtual time until no job in the store is progressing. */
static void vworld_run_until_quiet(void) {
    for (int i = 0; i < 10000; i++) {
        ql_vclock_run_for(vw.clock, 100, true);
        ql_txn_t *t;
        cr_assert_eq(ql_txn_begin(store, false, &t), 0);
        uint64_t n;
        cr_assert_eq(
            ql_job_count(t, NULL, (1u << QL_READY) | (1u << QL_PENDING) | (1u << QL_RUNNING), &n),
            0);
        ql_txn_abort(t);
        if (n == 0 && ql_sched_idle(vw.sched))
            return;
    }
    cr_assert_fail("jobs still progressing after 1000 s of virtual time");
}

static void track(const ql_id_t *job, const ql_id_t *srcs, size_t n, bool warned) {
    tracked_t *k = &vw.tracked[vw.n_tracked++];
    k->job = *job;
    k->seg = job_segment(job);
    for (size_t i = 0; i < n; i++)
        k->sources[i] = srcs[i];
    k->n_sources = n;
    k->warned = warned;
}

Test(outcomes, segment_effects_commit_with_the_final_state, .init = setup, .fini = teardown) {
    vworld_start();
    ql_id_t b0 = build(0), b1 = build(1), b2 = build(2);
    ql_id_t w0 = submit(QL_SUBMIT_BUILD, &warn_model, 0, NULL, 0);
    track(&b0, NULL, 0, false);
    track(&b1, NULL, 0, false);
    track(&b2, NULL, 0, false);
    track(&w0, NULL, 0, true);
    ql_store_set_commit_hook(store, check_invariants, &vw);
    ql_sched_start(vw.sched);
    vworld_run_until_quiet();
    cr_assert_eq(vw.ended[QL_SUCCEED], 4);
    cr_assert_eq(step_state(&w0, 1), QL_WARNING, "the warn step ended WARNING");
    cr_assert_eq(job_state(&w0), QL_SUCCEED, "and the job still succeeded");
    cr_assert_eq(seg_status(&vw.tracked[3].seg), QL_SEG_WARNING);
    cr_assert_eq(seg_status(&vw.tracked[0].seg), QL_SEG_READY);

    /* A refresh replaces its segment; a merge replaces its sources. */
    ql_store_set_commit_hook(store, NULL, NULL);
    ql_id_t s0 = vw.tracked[0].seg, s12[2] = {vw.tracked[1].seg, vw.tracked[2].seg};
    vw.n_tracked = 0; /* the builds' segments are about to be replaced */
    ql_id_t r = submit(QL_SUBMIT_REFRESH, &model, 0, &s0, 1);
    ql_id_t m = submit(QL_SUBMIT_MERGE, &model, 0, s12, 2);
    track(&r, &s0, 1, false);
    track(&m, s12, 2, false);
    uint64_t before = vw.commits_checked;
    ql_store_set_commit_hook(store, check_invariants, &vw);
    ql_sched_kick(vw.sched);
    vworld_run_until_quiet();
    cr_assert_eq(vw.ended[QL_SUCCEED], 6);
    cr_assert_geq(vw.commits_checked, before + 2, "the hook saw the pick and the end");
    for (size_t i = 0; i < 2; i++)
        cr_assert_eq(seg_status(&vw.tracked[i].seg), QL_SEG_READY);
    cr_assert_eq(seg_status(&s0), -1, "the refreshed segment is replaced");
    cr_assert_eq(seg_status(&s12[0]), -1, "merge sources are replaced");
    cr_assert_eq(seg_status(&s12[1]), -1);
    ql_job_t mj = get_job(&m);
    cr_assert_eq(mj.range_start, BASE + DAY);
    cr_assert_eq(mj.range_end, BASE + 3 * DAY);
    ql_job_free(&mj);
    vworld_stop();
    fsck_clean();
}

Test(outcomes, a_job_whose_target_is_gone_becomes_suicidal, .init = setup, .fini = teardown) {
    vworld_start();
    /* Two READY segments to merge. */
    ql_id_t b1 = build(1), b2 = build(2);
    ql_sched_start(vw.sched);
    vworld_run_until_quiet();
    ql_id_t srcs[2] = {job_segment(&b1), job_segment(&b2)};
    ql_sched_pause_fetching(vw.sched);

    /* A build whose NEW segment was deleted, and a merge whose source was deleted, both before
     * the scheduler looked at them. */
    ql_id_t orphan = build(5);
    ql_id_t orphan_seg = job_segment(&orphan);
    ql_id_t merge = submit(QL_SUBMIT_MERGE, &model, 0, srcs, 2);
    ql_id_t merge_seg = job_segment(&merge);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    cr_assert_eq(ql_segment_delete(t, &orphan_seg), 0);
    cr_assert_eq(ql_segment_delete(t, &srcs[1]), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_id_t fine = build(6);

    ql_sched_start(vw.sched);
    vworld_run_until_quiet();
    cr_assert_eq(job_state(&orphan), QL_SUICIDAL);
    cr_assert_eq(job_state(&merge), QL_SUICIDAL);
    cr_assert_eq(job_state(&fine), QL_SUCCEED, "the other jobs run as usual");
    cr_assert_eq(vw.ended[QL_SUICIDAL], 2);
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_eq(step_state(&orphan, i), QL_READY, "no step of a suicidal job ran");
    cr_assert_eq(seg_status(&merge_seg), -1, "the merge's NEW segment is removed with it");
    cr_assert_eq(seg_status(&srcs[0]), QL_SEG_READY, "the remaining source is untouched");
    ql_job_t j = get_job(&orphan);
    cr_assert_gt(j.end_time, 0);
    ql_job_free(&j);
    vworld_stop();
    fsck_clean();
}

/* RESTART and DISCARD commit before the running try is stopped, as PAUSE does: the marker stays
 * on the step for its next try's sweep; recovery (which sweeps before it commits) forgets it. */
Test(actions, restart_and_discard_keep_the_running_try_marker_recovery_forgets_it, .init = setup,
     .fini = teardown) {
    const char *tok = "0123456789abcdef0123456789abcdef";
    ql_action_t acts[] = {QL_ACTION_RESTART, QL_ACTION_DISCARD};
    ql_state_t to[] = {QL_READY, QL_DISCARDED};
    for (int i = 0; i < 2; i++) {
        ql_id_t job = build(i);
        force(&job, QL_RUNNING, (ql_state_t[]){QL_SUCCEED, QL_RUNNING, QL_READY});
        ql_err_t err;
        cr_assert_eq(apply(&job, acts[i], NULL, &err), 0, "%s", err.msg);
        ql_step_t s = get_step(&job, 1);
        cr_assert_eq(s.state, to[i]);
        cr_assert_str_eq(s.token, tok, "%s keeps the marker", ql_action_name(acts[i]));
        cr_assert_eq(s.pgid, 4242);
        ql_step_free(&s);
    }
    ql_id_t job = build(2);
    force(&job, QL_RUNNING, (ql_state_t[]){QL_SUCCEED, QL_RUNNING, QL_READY});
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(store, true, &t), 0);
    uint64_t n = 0;
    ql_err_t err;
    cr_assert_eq(ql_jobs_recover(t, 1000, NULL, NULL, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_txn_commit(t), 0);
    ql_step_t s = get_step(&job, 1);
    cr_assert_eq(s.state, QL_READY);
    cr_assert_str_eq(s.token, "", "recovery forgets the marker it swept");
    cr_assert_eq(s.pgid, 0);
    ql_step_free(&s);
}
