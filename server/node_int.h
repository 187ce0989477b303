/* What the files of server/ share (private to the library). */
#ifndef QL_NODE_INT_H
#define QL_NODE_INT_H

#include "server/ql_node.h"

/* The job engine lock a node makes for itself, chosen by the store's backend: on PostgreSQL the
 * store's advisory lock (servers on several hosts; ql_lock_pg_new), otherwise the data
 * directory's file lock (ql_lock_file_new). Both lease with qilin.server.master-lease-ms and log
 * to log (borrowed). The PostgreSQL lock records the server id and the API address of
 * qilin.server.listen (ql_node_set_api_address corrects a port 0). *out is the caller's. */
int node_lock_new(const ql_config_t *cfg, ql_store_t *store, ql_log_t *log, ql_lock_t **out,
                  ql_err_t *err);

#endif
