/*
 * The automatic segment build dispatcher (docs/design/auto-segment-build.md).
 *
 * DESIGN.
 * - Pure decisions: ql_dispatch_eligibility() and ql_dispatch_classify() take records and time
 *   as arguments (tests and the simulator call them directly); the time math is in
 *   ql_dispatch_time.h.
 * - A scan (ql_dispatcher_scan) runs on the loop thread: one read transaction over the
 *   projects, models, the segments overlapping each target and the model's non-final jobs;
 *   NO_OVERLAP cycles are submitted through the writer with the same mutation as a manual build
 *   (ql_submit_fn), which re-checks overlaps inside its transaction, so a race with a manual
 *   build or another server can only make the submission fail (RETRYABLE_FAILURE), never
 *   duplicate a range. The scan ends when every submission has been answered.
 * - Fixed delay: the timer arms the next scan `interval` after the previous one ended; a scan
 *   runs only when is_master() says so, and never two at once (an in-process guard).
 * - Caches, all exact or advisory:
 *   the model list is decoded once and reused while the store's metadata generation is
 *   unchanged (every project/model write raises it in its own transaction), so it is exact;
 *   the time math is computed once per distinct (zone, trigger, offset, range, format) a scan;
 *   the cycle cache (capacity 10,000, two days of inactivity) remembers completed cycles
 *   (COVERED, COVERED_WITH_WARNING): such a cycle is skipped while its entry lives, as in Kylin;
 *   every other decision is the one the store alone gives.
 */
#ifndef QL_DISPATCH_H
#define QL_DISPATCH_H

#include "engine/engine.h"
#include "scheduler/ql_dispatch_time.h"

typedef enum ql_cycle_state {
    QL_CYCLE_NONE = 0, /* not evaluated yet */
    QL_CYCLE_COVERED,
    QL_CYCLE_COVERED_WITH_WARNING,
    QL_CYCLE_IN_PROGRESS,
    QL_CYCLE_BLOCKED,
    QL_CYCLE_PARTIAL_OVERLAP,
    QL_CYCLE_NO_OVERLAP,
    QL_CYCLE_SUBMITTED,
    QL_CYCLE_RETRYABLE_FAILURE,
    QL_CYCLE_SKIPPED,
    QL_CYCLE_STATE_COUNT
} ql_cycle_state_t;

typedef enum ql_skip_reason {
    QL_SKIP_NONE = 0,
    QL_SKIP_PROJECT_DISABLED,
    QL_SKIP_BROKEN,
    QL_SKIP_STREAMING,
    QL_SKIP_FULL_LOAD,
    QL_SKIP_MULTI_PARTITION,
    QL_SKIP_MODEL_DISABLED,
    QL_SKIP_INVALID_CONFIG,
    QL_SKIP_EMPTY_RANGE,
    QL_SKIP_REASON_COUNT
} ql_skip_reason_t;

const char *ql_cycle_state_name(ql_cycle_state_t s);
int ql_cycle_state_parse(const char *name, ql_cycle_state_t *out);
const char *ql_skip_reason_name(ql_skip_reason_t r);
int ql_skip_reason_parse(const char *name, ql_skip_reason_t *out);

/*
 * Eligibility of a model in its project (spec order: project_disabled, broken, streaming,
 * full_load, multi_partition, model_disabled, invalid_config). On QL_SKIP_NONE, *cfg is the
 * validated config; on QL_SKIP_INVALID_CONFIG, err names the field. (empty_range is found
 * later, after normalization.)
 */
ql_skip_reason_t ql_dispatch_eligibility(const ql_project_t *p, const ql_model_t *m,
                                         ql_auto_build_cfg_t *cfg, ql_err_t *err);

/* A segment overlapping the target, as classification sees it. */
typedef struct ql_dispatch_seg {
    ql_id_t id;
    int64_t start, end;
    ql_seg_status_t status;
    bool has_live_job;    /* NEW segment: a non-final job owns it */
    ql_state_t job_state; /* that job's state */
} ql_dispatch_seg_t;

/* Classifies the target [start, end) against the segments that overlap it (any order), by the
 * table of docs/design/auto-segment-build.md step 5: coverage first, then BLOCKED over IN_PROGRESS,
 * then PARTIAL_OVERLAP, else NO_OVERLAP. */
ql_cycle_state_t ql_dispatch_classify(int64_t start, int64_t end, const ql_dispatch_seg_t *segs,
                                      size_t n);

/* The latest decision for a model (for the REST status call and the simulator). */
#define QL_DECISION_MAX_RELATED 8
typedef struct ql_decision {
    ql_id_t model;
    char project[QL_NAME_MAX + 1];
    char model_name[QL_NAME_MAX + 1];
    ql_cycle_state_t state;
    ql_skip_reason_t reason;
    char message[256];  /* why, for SKIPPED / RETRYABLE_FAILURE / BLOCKED */
    int64_t occurrence; /* 0 when not computed */
    int64_t target_start;
    int64_t target_end;
    ql_id_t related[QL_DECISION_MAX_RELATED];
    size_t n_related; /* may exceed QL_DECISION_MAX_RELATED (only the first are kept) */
    ql_id_t job;      /* SUBMITTED: the job created */
    int64_t evaluated_at;
    bool from_cache; /* skipped because the cycle cache says it is complete */
} ql_decision_t;

typedef struct ql_dispatcher ql_dispatcher_t;

typedef struct ql_dispatcher_opts {
    ql_store_t *store;
    ql_writer_t *writer;
    ql_clock_t *clock;
    ql_log_t *log;
    const ql_templates_t *templates;
    int64_t interval_ms;          /* kylin.model.auto-segment-build.dispatcher-interval-ms */
    const char *server_timezone;  /* kylin.web.timezone of the server (NULL/"": UTC) */
    size_t cache_capacity;        /* cycles; 0: 10000 */
    int64_t cache_ttl_ms;         /* 0: two days */
    bool manual_flush;            /* the writer is in manual mode: flush it after submitting */
    bool (*is_master)(void *arg); /* NULL: always master */
    void *master_arg;
    uint64_t fence; /* the job engine lock's fencing token, carried by every submission */
    /* Called for each job the dispatcher created (e.g. to kick the fetcher). */
    void (*on_submitted)(void *arg, const ql_id_t *job);
    /* Fault injection (simulator): returns nonzero to fail this submission as transient. */
    int (*submit_fault)(void *arg);
    void *hook_arg;
    /* Called once per model per scan with the decision (simulator traces). */
    void (*on_decision)(void *arg, const ql_decision_t *d);
    void *decision_arg;
} ql_dispatcher_opts_t;

int ql_dispatcher_new(const ql_dispatcher_opts_t *opts, ql_dispatcher_t **out);
/* Stops the timer and frees. Submissions still in the writer may answer later (the writer's
 * ql_writer_complete or ql_writer_free): their answers are dropped and the last frees d. */
void ql_dispatcher_free(ql_dispatcher_t *d);

/* Starts the fixed-delay timer: a scan now (at the next loop turn), then one `interval` after
 * each scan ends. */
void ql_dispatcher_start(ql_dispatcher_t *d);
void ql_dispatcher_stop(ql_dispatcher_t *d);

/* Runs one scan now. done (may be NULL) runs when it ended (all submissions answered).
 * QL_EINVAL-free: returns QL_ETRANSIENT when a scan is already running (the guard), 0 when
 * started (or skipped because this server is not the master). */
int ql_dispatcher_scan(ql_dispatcher_t *d, void (*done)(void *arg), void *arg);
bool ql_dispatcher_scanning(const ql_dispatcher_t *d);

/* Forgets the cycle cache (as a restart or failover would). */
void ql_dispatcher_clear_cache(ql_dispatcher_t *d);
/* Forgets everything in memory: cycle cache, decisions, log suppression (a restart). */
void ql_dispatcher_reset(ql_dispatcher_t *d);

/* The latest decision for model; QL_ENOTFOUND when it was never evaluated. */
int ql_dispatcher_decision(const ql_dispatcher_t *d, const ql_id_t *model, ql_decision_t *out);

/* The decision the master last wrote to the store for model (the dispatcher writes each
 * decision that changed at the end of its scan, under its fencing token): what a standby, a
 * query server or a restarted server answers before a dispatcher of its own has evaluated the
 * model. Fills every field but project and model_name, which keep out's values; evaluated_at is
 * when the master reached this decision. QL_ENOTFOUND when none was written, QL_ECORRUPT when
 * the stored text is not a decision. txn is any transaction. */
int ql_dispatch_decision_load(ql_txn_t *txn, const ql_id_t *model, ql_decision_t *out);
/* Removes model's stored decision (a model that is dropped), in the write transaction txn; 0
 * also when there was none. */
int ql_dispatch_decision_forget(ql_txn_t *txn, const ql_id_t *model);

typedef struct ql_dispatcher_stats {
    uint64_t scans;
    uint64_t submitted;
    uint64_t submit_failures;
    int64_t last_scan_ms;                  /* duration of the last scan, wall ms (monotonic) */
    int64_t last_scan_us;                  /* the same in microseconds */
    uint64_t states[QL_CYCLE_STATE_COUNT]; /* decisions of the last scan by state */
    size_t cache_entries;
    uint64_t decisions_written; /* decisions written to the store (only changed ones are) */
} ql_dispatcher_stats_t;
void ql_dispatcher_get_stats(const ql_dispatcher_t *d, ql_dispatcher_stats_t *out);

#endif
