/* What the files of server/ share (private to the library). */
#ifndef QL_NODE_INT_H
#define QL_NODE_INT_H

#include "server/ql_node.h"

/* The job engine lock a node makes for itself. With kylin.env.zookeeper-connect-string set, the
 * ZooKeeper lock on loop (borrowed; required then): leader election for scheduler 100, the node
 * global_job_engine_lock for scheduler 0 (ql_lock_zk_new), claiming its tokens through writer
 * (borrowed). Otherwise chosen by the store's
 * backend: on PostgreSQL the store's advisory lock (servers on several hosts; ql_lock_pg_new),
 * else the data directory's file lock (ql_lock_file_new); both lease with
 * qilin.server.master-lease-ms. All log to log (borrowed). The PostgreSQL lock records the server
 * id and the API address of qilin.server.listen (ql_node_set_api_address corrects a port 0).
 * *out is the caller's. */
int node_lock_new(const ql_config_t *cfg, ql_store_t *store, ql_writer_t *writer, uv_loop_t *loop,
                  ql_log_t *log, ql_lock_t **out, ql_err_t *err);

/* Refuses the scheduler settings a job server cannot run, with QL_EINVAL and a message naming
 * the key: scheduler 100 or 2 without a ZooKeeper connect string, a suspend-kill not shorter
 * than the session timeout. */
int node_check_scheduler(const ql_config_t *cfg, ql_err_t *err);

#endif
