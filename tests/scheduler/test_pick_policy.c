/*
 * The pick policy (scheduler/pick_policy.h) as a table: one row per rule and per edge. A row
 * gives the server's limits, the projects (their stored override and running count) and the
 * READY candidates, and the plan it must make, written as "<candidate> <verdict>" in decision
 * order, where candidate a is the row's first, b its second, and so on.
 *
 * The rows are written from the rules in the header's comment, not from the code: a change to
 * either side fails a row. The walk that feeds the policy from the store is tested end to end
 * by tests/scheduler/test_sched.c (fetcher).
 */
#include "scheduler/pick_policy.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#define T 1788220800000LL /* 2026-09-01T00:00:00Z: create times are T + n */

/* A READY job with id n, priority, created at T + ct, in project p (an index into the row's
 * projects). */
#define JOB(n, prio, ct, p)                                                                        \
    { .id = {.b = {[15] = (n)}}, .priority = (prio), .create_time = T + (ct), .project = (p) }
/* A READY job with id n that has a run on the scheduler already; its project is not known. */
#define HAS_RUN_JOB(n, prio, ct)                                                                   \
    {                                                                                              \
        .id = {.b = {[15] = (n)}}, .priority = (prio), .create_time = T + (ct), .has_run = true,   \
        .project = (size_t)-1                                                                      \
    }
/* A READY job with id n that the takeover grace holds; its project is not known. */
#define GRACE_JOB(n, prio, ct)                                                                     \
    {                                                                                              \
        .id = {.b = {[15] = (n)}}, .priority = (prio), .create_time = T + (ct), .in_grace = true,  \
        .project = (size_t)-1                                                                      \
    }
/* The server: its kylin.job.max-concurrent-jobs and the runs counting against it. */
#define SERVER(max, run)                                                                           \
    { .max_concurrent_jobs = (max), .running = (run) }
#define HOLDING(max, run)                                                                          \
    { .max_concurrent_jobs = (max), .running = (run), .holding = true }
/* A project with its stored override (NULL: none) and its running jobs. */
#define PROJECT(override, run)                                                                     \
    { .limit = (override), .running = (run) }

#define MAX_CANDS 6
#define MAX_PROJECTS 3

typedef struct row {
    const char *rule;
    ql_pick_limits_t lim;
    size_t n_proj;
    ql_pick_project_t proj[MAX_PROJECTS];
    size_t n;
    ql_pick_cand_t cand[MAX_CANDS];
    const char *want;               /* the plan, in decision order */
    int want_started[MAX_PROJECTS]; /* the plan's starts per project */
} row_t;

static row_t rows[] = {
    /* ---- the server's limit ---- */
    {"no candidates: an empty plan",
     SERVER(10, 0),
     1,
     {PROJECT(NULL, 0)},
     0,
     {{.priority = 0}},
     "",
     {0}},
    {"room: the job starts",
     SERVER(10, 0),
     1,
     {PROJECT(NULL, 0)},
     1,
     {JOB(1, 3, 0, 0)},
     "a START",
     {1}},
    {"server limit 1: the first job starts, the next has no room",
     SERVER(1, 0),
     1,
     {PROJECT(NULL, 0)},
     3,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0)},
     "a START, b NO_ROOM, c NO_ROOM",
     {1}},
    {"server limit N: the room is N minus what runs",
     SERVER(3, 1),
     1,
     {PROJECT(NULL, 1)},
     4,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0), JOB(4, 3, 3, 0)},
     "a START, b START, c NO_ROOM, d NO_ROOM",
     {2}},
    {"server limit reached by what runs: nothing starts",
     SERVER(2, 2),
     1,
     {PROJECT(NULL, 2)},
     2,
     {JOB(1, 0, 0, 0), JOB(2, 0, 1, 0)},
     "a NO_ROOM, b NO_ROOM",
     {0}},
    {"more running than the limit (it was lowered): nothing starts",
     SERVER(2, 5),
     1,
     {PROJECT(NULL, 5)},
     1,
     {JOB(1, 0, 0, 0)},
     "a NO_ROOM",
     {0}},
    {"the server's limit counts every project's jobs",
     SERVER(2, 0),
     2,
     {PROJECT(NULL, 0), PROJECT(NULL, 0)},
     3,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 1), JOB(3, 3, 2, 1)},
     "a START, b START, c NO_ROOM",
     {1, 1}},

    /* ---- held: step ends wait for the store ---- */
    {"holding: nothing starts, with room",
     HOLDING(10, 0),
     1,
     {PROJECT(NULL, 0)},
     2,
     {JOB(1, 0, 0, 0), JOB(2, 3, 1, 0)},
     "a HOLDING, b HOLDING",
     {0}},
    {"holding goes before every other rule",
     HOLDING(1, 1),
     1,
     {PROJECT("x", 0)},
     2,
     {HAS_RUN_JOB(1, 0, 0), JOB(2, 0, 1, 0)},
     "a HOLDING, b HOLDING",
     {0}},

    /* ---- a job with a run ---- */
    {"a job with a run: skipped, the next one takes the room",
     SERVER(2, 1),
     1,
     {PROJECT(NULL, 1)},
     2,
     {HAS_RUN_JOB(1, 0, 0), JOB(2, 3, 1, 0)},
     "a HAS_RUN, b START",
     {1}},
    {"no room goes before a run",
     SERVER(1, 1),
     1,
     {PROJECT(NULL, 1)},
     1,
     {HAS_RUN_JOB(1, 0, 0)},
     "a NO_ROOM",
     {0}},

    /* ---- a job the takeover grace holds ---- */
    {"a job in its takeover grace: skipped without taking room, the next one starts",
     SERVER(1, 0),
     1,
     {PROJECT("1", 0)},
     2,
     {GRACE_JOB(1, 0, 0), JOB(2, 3, 1, 0)},
     "a TAKEOVER_GRACE, b START",
     {1}},
    {"no room and a run go before the grace",
     SERVER(2, 1),
     1,
     {PROJECT(NULL, 1)},
     3,
     {HAS_RUN_JOB(1, 0, 0), JOB(2, 0, 1, 0), GRACE_JOB(3, 0, 2)},
     "a HAS_RUN, b START, c NO_ROOM",
     {1}},

    /* ---- a project's own limit ---- */
    {"no override: the server's limit alone",
     SERVER(3, 0),
     1,
     {PROJECT(NULL, 0)},
     3,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0)},
     "a START, b START, c START",
     {3}},
    {"project limit 1: one of its jobs starts, the others wait, another project's start",
     SERVER(10, 0),
     2,
     {PROJECT("1", 0), PROJECT(NULL, 0)},
     4,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 1), JOB(4, 3, 3, 0)},
     "a START, b PROJECT_FULL, c START, d PROJECT_FULL",
     {1, 1}},
    {"project limit 1 reached by a running job",
     SERVER(10, 1),
     1,
     {PROJECT("1", 1)},
     1,
     {JOB(1, 0, 0, 0)},
     "a PROJECT_FULL",
     {0}},
    {"project limit N: N minus its running jobs start",
     SERVER(10, 1),
     1,
     {PROJECT("3", 1)},
     4,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0), JOB(4, 3, 3, 0)},
     "a START, b START, c PROJECT_FULL, d PROJECT_FULL",
     {2}},
    {"a full project takes no room: a later job of another project starts",
     SERVER(2, 0),
     2,
     {PROJECT("1", 1), PROJECT(NULL, 0)},
     3,
     {JOB(1, 0, 0, 0), JOB(2, 0, 1, 0), JOB(3, 4, 2, 1)},
     "a PROJECT_FULL, b PROJECT_FULL, c START",
     {0, 1}},
    {"project limit above the server's: the server's wins",
     SERVER(2, 0),
     1,
     {PROJECT("5", 0)},
     3,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0)},
     "a START, b START, c NO_ROOM",
     {2}},
    {"project limit below the server's: the project's wins",
     SERVER(5, 0),
     1,
     {PROJECT("2", 0)},
     3,
     {JOB(1, 3, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0)},
     "a START, b START, c PROJECT_FULL",
     {2}},
    {"a job with a run does not count against its project in the plan",
     SERVER(5, 1),
     1,
     {PROJECT("2", 1)},
     3,
     {HAS_RUN_JOB(1, 0, 0), JOB(2, 3, 1, 0), JOB(3, 3, 2, 0)},
     "a HAS_RUN, b START, c PROJECT_FULL",
     {1}},

    /* ---- a bad stored project limit: its jobs are held ---- */
    {"override not a number: the project's jobs held, another project's start",
     SERVER(10, 0),
     2,
     {PROJECT("lots", 0), PROJECT(NULL, 0)},
     3,
     {JOB(1, 0, 0, 0), JOB(2, 3, 1, 1), JOB(3, 3, 2, 0)},
     "a LIMIT_INVALID, b START, c LIMIT_INVALID",
     {0, 1}},
    {"override 0 (below the key's minimum 1): held, not unlimited",
     SERVER(10, 0),
     1,
     {PROJECT("0", 0)},
     1,
     {JOB(1, 0, 0, 0)},
     "a LIMIT_INVALID",
     {0}},
    {"override above the key's maximum: held",
     SERVER(10, 0),
     1,
     {PROJECT("10001", 0)},
     1,
     {JOB(1, 0, 0, 0)},
     "a LIMIT_INVALID",
     {0}},
    {"override empty or negative: held",
     SERVER(10, 0),
     2,
     {PROJECT("", 0), PROJECT("-1", 0)},
     2,
     {JOB(1, 0, 0, 0), JOB(2, 0, 1, 1)},
     "a LIMIT_INVALID, b LIMIT_INVALID",
     {0, 0}},
    {"override at the key's bounds is valid",
     SERVER(10, 0),
     2,
     {PROJECT("1", 0), PROJECT("10000", 0)},
     3,
     {JOB(1, 0, 0, 0), JOB(2, 0, 1, 1), JOB(3, 0, 2, 1)},
     "a START, b START, c START",
     {1, 2}},
    {"a project the caller could not give (index out of range): held",
     SERVER(10, 0),
     1,
     {PROJECT(NULL, 0)},
     2,
     {JOB(1, 0, 0, 7), JOB(2, 0, 1, 0)},
     "a LIMIT_INVALID, b START",
     {1}},
    {"no room goes before an invalid override",
     SERVER(1, 1),
     1,
     {PROJECT("bad", 0)},
     1,
     {JOB(1, 0, 0, 0)},
     "a NO_ROOM",
     {0}},

    /* ---- the order: priority, then create time, then id ---- */
    {"in index order already: taken as given",
     SERVER(2, 0),
     1,
     {PROJECT(NULL, 0)},
     3,
     {JOB(1, 0, 5, 0), JOB(2, 1, 0, 0), JOB(3, 4, 0, 0)},
     "a START, b START, c NO_ROOM",
     {2}},
    {"priority first (0 is the highest), whatever the create times",
     SERVER(2, 0),
     1,
     {PROJECT(NULL, 0)},
     4,
     {JOB(1, 4, 0, 0), JOB(2, 0, 9, 0), JOB(3, 3, 1, 0), JOB(4, 1, 8, 0)},
     "b START, d START, c NO_ROOM, a NO_ROOM",
     {2}},
    {"equal priority: the older job first",
     SERVER(1, 0),
     1,
     {PROJECT(NULL, 0)},
     3,
     {JOB(1, 2, 30, 0), JOB(2, 2, 10, 0), JOB(3, 2, 20, 0)},
     "b START, c NO_ROOM, a NO_ROOM",
     {1}},
    {"equal priority and create time: the smaller id first",
     SERVER(1, 0),
     1,
     {PROJECT(NULL, 0)},
     3,
     {JOB(9, 2, 10, 0), JOB(3, 2, 10, 0), JOB(5, 2, 10, 0)},
     "b START, c NO_ROOM, a NO_ROOM",
     {1}},
    {"the order decides which job of a limited project starts",
     SERVER(10, 0),
     1,
     {PROJECT("1", 0)},
     2,
     {JOB(1, 3, 0, 0), JOB(2, 1, 5, 0)},
     "b START, a PROJECT_FULL",
     {1}},

    /* ---- together ---- */
    {"every rule in one pass",
     SERVER(3, 1),
     3,
     {PROJECT("1", 1), PROJECT("2", 0), PROJECT("nope", 0)},
     6,
     {JOB(1, 0, 0, 0), HAS_RUN_JOB(2, 0, 1), JOB(3, 1, 0, 2), JOB(4, 1, 1, 1), JOB(5, 2, 0, 1),
      JOB(6, 3, 0, 1)},
     "a PROJECT_FULL, b HAS_RUN, c LIMIT_INVALID, d START, e START, f NO_ROOM",
     {0, 2, 0}},
};

#define N_ROWS (sizeof rows / sizeof rows[0])

/* The parameters are row numbers: a row holds pointers, which Criterion's copy of a parameter
 * into the test's process does not carry. */
static size_t row_numbers[N_ROWS];

ParameterizedTestParameters(pick_policy, plan) {
    for (size_t i = 0; i < N_ROWS; i++)
        row_numbers[i] = i;
    return cr_make_param_array(size_t, row_numbers, N_ROWS);
}

ParameterizedTest(size_t *number, pick_policy, plan) {
    row_t *row = &rows[*number];
    ql_pick_decision_t out[MAX_CANDS];
    memset(out, 0xff, sizeof out);
    for (size_t i = 0; i < row->n_proj; i++)
        row->proj[i].started = -1; /* the plan must write every project's count */
    size_t started = ql_pick_plan(&row->lim, row->proj, row->n_proj, row->cand, row->n, out);

    char got[256] = "";
    size_t o = 0, starts = 0;
    for (size_t i = 0; i < row->n; i++) {
        cr_assert_lt(out[i].cand, row->n, "%s: decision %zu names no candidate", row->rule, i);
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%c %s", i ? ", " : "",
                              (char)('a' + out[i].cand), ql_pick_verdict_name(out[i].verdict));
        starts += out[i].verdict == QL_PICK_START;
    }
    cr_assert_str_eq(got, row->want, "%s: got \"%s\", want \"%s\"", row->rule, got, row->want);
    cr_assert_eq(started, starts, "%s: returns the number of starts", row->rule);
    for (size_t i = 0; i < row->n_proj; i++)
        cr_assert_eq(row->proj[i].started, row->want_started[i],
                     "%s: project %zu: %d started, want %d", row->rule, i, row->proj[i].started,
                     row->want_started[i]);
}

/* ---- the helpers the walk shares with the plan ---- */

Test(pick_policy, room) {
    const struct {
        ql_pick_limits_t lim;
        int want;
    } t[] = {
        {SERVER(10, 0), 10}, {SERVER(10, 9), 1}, {SERVER(1, 0), 1},
        {SERVER(1, 1), 0},   {SERVER(3, 7), 0},  {HOLDING(10, 0), 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        cr_assert_eq(ql_pick_room(&t[i].lim), t[i].want, "row %zu: max %d running %d holding %d", i,
                     t[i].lim.max_concurrent_jobs, t[i].lim.running, t[i].lim.holding);
}

Test(pick_policy, project_limit) {
    const struct {
        const char *value;
        int rc, limit;
    } t[] = {
        {NULL, 0, 0},         {"1", 0, 1},         {"7", 0, 7},
        {"10000", 0, 10000},  {"0", QL_EINVAL, 0}, {"10001", QL_EINVAL, 0},
        {"-3", QL_EINVAL, 0}, {"x", QL_EINVAL, 0}, {"", QL_EINVAL, 0},
        {"2x", QL_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int limit = -5;
        ql_err_t err = {0};
        int rc = ql_pick_project_limit(t[i].value, &limit, &err);
        cr_assert_eq(rc, t[i].rc, "'%s': rc %d, want %d", t[i].value ? t[i].value : "(none)", rc,
                     t[i].rc);
        cr_assert_eq(limit, t[i].limit, "'%s': limit %d, want %d",
                     t[i].value ? t[i].value : "(none)", limit, t[i].limit);
        if (rc)
            cr_assert(strstr(err.msg, "kylin.job.max-concurrent-jobs"),
                      "'%s': the error names the key: %s", t[i].value, err.msg);
    }
}
