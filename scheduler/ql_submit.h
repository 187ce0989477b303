/*
 * Submitting builds: the one code path for incremental builds, whoever asks (the REST API, the
 * CLI, the simulator's `build:` step, the dispatcher), plus merges, refreshes and other jobs.
 *
 * A submission is a writer mutation (ql_write_fn) over an op struct: it looks up the model's
 * job template, snapshots the chain's step definitions into the new job, and calls the
 * ql_meta_submit_* rule that re-checks overlaps inside the transaction. Before queueing it, the
 * caller normalizes a client's range with ql_submit_normalize() (ICU and CCTZ run outside the
 * writer thread; the mutation re-checks that the range is not empty).
 */
#ifndef QL_SUBMIT_H
#define QL_SUBMIT_H

#include "engine/engine.h"

typedef enum ql_submit_kind {
    QL_SUBMIT_BUILD,   /* INC_BUILD of [start, end) */
    QL_SUBMIT_MERGE,   /* INDEX_MERGE of segments */
    QL_SUBMIT_REFRESH, /* INDEX_REFRESH of one segment */
} ql_submit_kind_t;

typedef struct ql_submit_op {
    /* in (borrowed for the mutation's life) */
    ql_submit_kind_t kind;
    const ql_templates_t *templates;
    ql_id_t model;
    int64_t start, end; /* BUILD: normalized range */
    const ql_id_t *ids; /* MERGE: the segments; REFRESH: ids[0] */
    size_t n_ids;
    int priority;
    const char *submitter;
    int64_t now;
    uint64_t fence;
    /* out */
    ql_id_t job;
    ql_id_t segment;
} ql_submit_op_t;

/* The mutation: arg is a ql_submit_op_t. */
int ql_submit_fn(ql_txn_t *txn, void *arg, ql_err_t *err);

/* The time zone that applies to a project: its kylin.web.timezone, else the server's (may be
 * NULL or ""), else UTC. Copies it into buf. */
void ql_submit_project_timezone(const ql_project_t *p, const char *server_tz, char *buf,
                                size_t cap);

/* Normalizes [start, end) with the model's partition format in the project's time zone
 * (auto-segment-build.md step 3), as the dispatcher does. QL_EEMPTYRANGE when the result is
 * empty; QL_EINVAL for an unusable zone or format (the message says which). */
int ql_submit_normalize(const ql_project_t *p, const ql_model_t *m, const char *server_tz,
                        int64_t start, int64_t end, int64_t *ns, int64_t *ne, ql_err_t *err);

#endif
