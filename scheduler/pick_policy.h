/*
 * The pick policy: which READY jobs a fetcher pass starts (not public). A pure function of its
 * inputs: no store, no clock, no I/O, no memory of its own. The walk in sched_pick.c collects the
 * inputs (the READY index, the runs, the projects' overrides) and applies the plan; the rules
 * read as a table in tests/scheduler/test_pick_policy.c.
 *
 * The rules, applied to each candidate in turn (the first that applies decides):
 *   0. Candidates are taken in (priority, create time, id) order, the order of the READY index:
 *      a higher priority (a smaller number) first, then the older job, then the smaller id.
 *   1. HOLDING       step ends wait for the store (sched_hold.c): nothing new starts.
 *   2. NO_ROOM       the server's limit (kylin.job.max-concurrent-jobs) is reached by the runs
 *                    that count against it and the candidates started before this one.
 *   3. HAS_RUN       the job has a run on this scheduler already (its pick is in flight, or its
 *                    previous try is still being stopped).
 *   3b. TAKEOVER_GRACE recovery holds the job: its step was running on another server, which
 *                    gets the takeover grace to stop it (sched_grace.c).
 *   4. LIMIT_INVALID the project's stored override of kylin.job.max-concurrent-jobs does not
 *                    parse with the server key's bounds: the limit it meant is unknown, so its
 *                    jobs wait (are held) rather than run unlimited.
 *   5. PROJECT_FULL  the project's own limit is reached the same way as in 2.
 *   6. START         otherwise; it counts against both limits for the candidates after it.
 * A project without an override has no limit of its own (the server's alone applies).
 */
#ifndef QL_PICK_POLICY_H
#define QL_PICK_POLICY_H

#include "base/ql_error.h"
#include "storage/ql_records.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ql_pick_verdict {
    QL_PICK_START,
    QL_PICK_HOLDING,
    QL_PICK_NO_ROOM,
    QL_PICK_HAS_RUN,
    QL_PICK_LIMIT_INVALID,
    QL_PICK_PROJECT_FULL,
    QL_PICK_TAKEOVER_GRACE,
} ql_pick_verdict_t;

/* What the policy knows of the server: its limit and what counts against it. */
typedef struct ql_pick_limits {
    int max_concurrent_jobs; /* the server's kylin.job.max-concurrent-jobs */
    int running;             /* runs that count against it (a run whose job is ending does not) */
    bool holding;            /* step ends wait for the store (ql_sched_holding) */
} ql_pick_limits_t;

/* What the policy knows of one project. */
typedef struct ql_pick_project {
    /* its stored kylin.job.max-concurrent-jobs override, NULL when it has none (borrowed: valid
     * for the call) */
    const char *limit;
    int running; /* its runs that count against its limit (as ql_pick_limits_t.running) */
    int started; /* written by ql_pick_plan: how many of its candidates the plan starts */
} ql_pick_project_t;

/* One READY job, as the index and its record give it. */
typedef struct ql_pick_cand {
    ql_id_t id;
    int priority; /* 0 (highest) .. 4 */
    int64_t create_time;
    bool has_run;  /* the job has a run on this scheduler */
    bool in_grace; /* a takeover grace holds the job (sched_grace.c) */
    /* its project: an index into the projects passed with it; ignored when has_run or in_grace
     * (the walk does not read the record of a job it cannot start). An index out of range is
     * treated as an invalid limit: the job waits. */
    size_t project;
} ql_pick_cand_t;

/* One decision of a plan: the candidate (an index into the candidates) and its verdict. */
typedef struct ql_pick_decision {
    size_t cand;
    ql_pick_verdict_t verdict;
} ql_pick_decision_t;

/*
 * Plans a pass over cands[0..n): out[0..n) (the caller's array) gets one decision per
 * candidate, in the order of rule 0, which is the order the starts are to be applied in, and
 * each of projects[0..n_projects) its `started`. Returns how many decisions are START. Nothing
 * is read but the arguments; nothing is written but out and `started`.
 */
size_t ql_pick_plan(const ql_pick_limits_t *lim, ql_pick_project_t *projects, size_t n_projects,
                    const ql_pick_cand_t *cands, size_t n, ql_pick_decision_t *out);

/* How many more jobs the server's limit lets start now (rule 1 and 2 before any candidate):
 * 0 while holding or when the limit is reached. */
int ql_pick_room(const ql_pick_limits_t *lim);

/* A project's own limit from its stored override value (borrowed; NULL: none): *limit gets it,
 * 0 for none. Returns 0, or QL_EINVAL with err saying why (rule 4); *limit is then 0. */
int ql_pick_project_limit(const char *value, int *limit, ql_err_t *err);

/* The verdict's name ("START", "PROJECT_FULL", ...), for logs and test messages. */
const char *ql_pick_verdict_name(ql_pick_verdict_t v);

#endif
