/* Scheduler 2's job scheduler of a node (node_dist.c; docs/zookeeper.md, Scheduler 2): private
 * to server/. */
#ifndef QL_NODE_DIST_H
#define QL_NODE_DIST_H

#include "server/ql_node.h"

typedef struct node_dist node_dist_t;

typedef struct node_dist_opts {
    const ql_config_t *cfg; /* borrowed: the engine options, names, assigned-servers */
    ql_lock_t *lock;        /* borrowed: the ZooKeeper lock whose session it shares */
    /* store, writer, clock, log, templates, exec_helper, log_dir, hooks (borrowed, they must
     * outlive it); the rest is set from cfg */
    ql_sched_opts_t sched;
} node_dist_opts_t;

/* Makes the job locks on the lock's session and a scheduler on them, fetching once the session
 * is connected. QL_EINVAL when the lock is not the ZooKeeper lock. */
int node_dist_start(const node_dist_opts_t *opts, node_dist_t **out, ql_err_t *err);
/* Its scheduler (job actions, statistics); NULL for NULL. */
ql_sched_t *node_dist_sched(node_dist_t *d);
/* Stops the scheduler (ql_sched_stop's pause_running and grace_ms), then frees everything,
 * deleting this server's job locks, and calls done. */
void node_dist_stop(node_dist_t *d, bool pause_running, int64_t grace_ms, void (*done)(void *arg),
                    void *arg);
/* Frees at once (running steps stopped, nothing more written): the node aborts or failed. */
void node_dist_free(node_dist_t *d);

#endif
