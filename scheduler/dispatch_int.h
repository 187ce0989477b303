/*
 * What the dispatcher's files share: dispatcher.c (the scan and the timer) and dispatch_index.c
 * (the model list and the decisions by model). Not a public header: nothing outside scheduler/
 * includes it.
 */
#ifndef QL_DISPATCH_INT_H
#define QL_DISPATCH_INT_H

#include "dispatch_cache.h"
#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_submit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEG_BUF 64
#define DAY_MS 86400000LL

/* One distinct time computation per scan. */
typedef struct combo {
    char zone[64];
    char format[QL_FORMAT_MAX + 1];
    ql_auto_build_cfg_t cfg;
    /* computed per scan */
    int64_t scan_id;
    int rc; /* 0, QL_EEMPTYRANGE, or another error */
    int64_t occurrence, start, end;
    char msg[160];
} combo_t;

/* The fields every scan reads come first, so a warm scan touches one cache line per model. */
typedef struct mentry {
    ql_id_t id;
    uint32_t project;
    ql_skip_reason_t skip; /* static eligibility (project_disabled included) */
    uint32_t combo;
    uint32_t decision;
    char name[QL_NAME_MAX + 1];
    char skip_msg[200];
} mentry_t;

typedef struct pentry {
    char name[QL_NAME_MAX + 1];
} pentry_t;

/* What the dispatcher remembers per model; the public ql_decision_t is filled from it. What
 * every scan writes and compares comes first; the related segments, written only when a model
 * is evaluated from the store, last. */
typedef struct drec {
    ql_id_t model;
    ql_cycle_state_t state;
    ql_skip_reason_t reason;
    int64_t occurrence, start, end;
    int64_t evaluated_at;
    char *msg;
    uint32_t n_related;
    uint32_t mentry; /* index in the model list it was last seen at, or UINT32_MAX */
    bool from_cache;
    bool dirty;         /* on the dispatcher's dirty list (dispatch_store.c) */
    uint64_t saved_sig; /* signature of what was last written to the store; 0: nothing */
    /* log suppression */
    bool failure_logged;
    ql_cycle_state_t logged_state;
    int64_t logged_occurrence, logged_start, logged_end;
    int64_t warned_day;
    ql_skip_reason_t warned_reason;
    ql_id_t job;
    ql_id_t related[QL_DECISION_MAX_RELATED];
} drec_t;

typedef struct pending {
    ql_dispatcher_t *d;
    ql_submit_op_t op;
    uint32_t decision;
    char project[QL_NAME_MAX + 1];
    char name[QL_NAME_MAX + 1];
} pending_t;

struct ql_dispatcher {
    ql_dispatcher_opts_t opts;
    ql_cycle_cache_t *cache;
    ql_tzcache_t *tzcache;
    ql_submit_cache_t *formats; /* partition formats, opened once per pattern */
    /* the model list, valid for `generation` */
    bool list_valid;
    uint64_t generation;
    pentry_t *projects;
    size_t n_projects;
    mentry_t *models;
    size_t n_models, cap_models;
    combo_t *combos;
    size_t n_combos;
    /* decisions by model id */
    drec_t *decisions;
    size_t n_decisions, cap_decisions;
    uint32_t *dindex;
    size_t n_dindex;
    /* decisions changed since they were last written to the store (dispatch_store.c) */
    uint32_t *dirty;
    size_t n_dirty, cap_dirty;
    size_t persisting; /* decision writes not answered yet */
    /* scan state */
    bool scanning;
    bool timer_on;
    int64_t scan_id;
    int64_t scan_started_mono;
    int64_t scan_started_us;
    size_t pending;
    bool freed; /* ql_dispatcher_free ran while submissions were pending: the last answer frees */
    void (*scan_done)(void *arg);
    void *scan_done_arg;
    ql_timer_t timer;
    ql_dispatcher_stats_t stats;
    /* one scan's overlap probe (dispatcher.c): what each model needs, the targets probed in one
     * ql_probe_targets call, and per target its model's index and its probe's error */
    uint8_t *scan_kind;
    size_t cap_kind;
    ql_probe_target_t *targets;
    uint32_t *target_model;
    int *target_rc;
    size_t n_targets, cap_targets;
};

/* The decision kept for model id, or NULL. */
drec_t *ql_dispatch_decision_find(const ql_dispatcher_t *d, const ql_id_t *id);

/* Replaces r's message with a copy of msg (NULL or empty clears it; out of memory leaves none). */
void ql_dispatch_set_msg(drec_t *r, const char *msg);

/* Rebuilds the model list from the store for metadata generation gen. */
int ql_dispatch_rebuild_list(ql_dispatcher_t *d, ql_txn_t *txn, uint64_t gen);

/* A write of the dispatcher's was answered, a submission or (decision_write) a decision write:
 * the last submission ends the scan (decision writes never hold a scan up); the last write of
 * either kind frees a dispatcher whose owner is gone. */
void ql_dispatch_answered(ql_dispatcher_t *d, bool decision_write);

/* Puts r on the dirty list when it differs from what was last written (record() calls it). */
void ql_dispatch_mark(ql_dispatcher_t *d, drec_t *r);
/* Writes the dirty decisions through the writer (the end of a scan); the list is emptied. */
void ql_dispatch_persist(ql_dispatcher_t *d);

#endif
