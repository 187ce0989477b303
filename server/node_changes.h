/*
 * Wake-ups from other servers' writes (docs/postgresql.md, Wake-ups; ql_store.h, "changes made
 * by other servers"): the store's change session, watched on the node's loop. Private to
 * server/; node.c starts it with the node and stops it with the node's handles.
 *
 * DESIGN.
 * - Loop thread only. The session's descriptor is watched with a uv_poll_t; each readable
 *   event drains it and hands every report to the callback (a job id, or NULL: anything may
 *   have changed).
 * - A session that cannot be opened, or breaks, is opened again after a backoff of 100 ms
 *   doubling to 5 s (back to 100 ms once a session lived 5 s); the first drain of a new session
 *   reports "anything" (the store says so), so nothing missed meanwhile is lost for good. The
 *   poll interval of the scheduler remains the bound while no session is open. Opening blocks
 *   the loop for the connection's round trips, as the node's other store calls do.
 * - Memory: the watcher owns its handles; stopping closes them and frees the watcher from the
 *   last close callback, then calls `closed`. The callback may stop the watcher (the node may
 *   close its handles from inside it): nothing is touched after a stop but what the close
 *   callbacks need.
 */
#ifndef QL_NODE_CHANGES_H
#define QL_NODE_CHANGES_H

#include "base/ql_log.h"
#include "storage/ql_store.h"

#include <uv.h>

typedef struct node_changes node_changes_t;

/* Starts watching store's change session on loop (borrowed, both outlive the watcher until
 * `closed` ran; log may be NULL). A session that cannot be opened now is logged and tried again
 * later. 0 with *out NULL when the store has no change session (LMDB): nothing to stop; else 0
 * or UV_ENOMEM. */
int node_changes_start(uv_loop_t *loop, ql_store_t *store, ql_log_t *log, ql_store_change_cb cb,
                       void *arg, node_changes_t **out);
/* Stops watching: no callback runs after this returns. closed (may be NULL) runs on the loop
 * once the handles are closed and c is freed. */
void node_changes_stop(node_changes_t *c, void (*closed)(void *arg), void *arg);

#endif
