/* The choice of a node's job engine lock and the checks of the scheduler settings (node_int.h;
 * docs/postgresql.md, The job engine lock; docs/zookeeper.md, How a server uses it). */
#include "node_int.h"

#include <stdio.h>
#include <string.h>

int node_check_scheduler(const ql_config_t *cfg, ql_err_t *err) {
    int64_t scheduler = ql_config_get_int(cfg, "kylin.job.scheduler.default");
    bool zk = ql_config_get_str(cfg, "kylin.env.zookeeper-connect-string")[0] != '\0';
    if (scheduler == 2 && !zk)
        return ql_err_set(err, QL_EINVAL,
                          "kylin.job.scheduler.default: 2 (distributed job servers, a lock per "
                          "job) needs ZooKeeper: set kylin.env.zookeeper-connect-string, or use "
                          "scheduler 0 (the store's job engine lock)");
    if (scheduler == 100 && !zk)
        return ql_err_set(err, QL_EINVAL,
                          "kylin.job.scheduler.default: 100 (leader election) needs ZooKeeper: "
                          "set kylin.env.zookeeper-connect-string, or use scheduler 0 (the "
                          "store's job engine lock)");
    if (!zk)
        return 0;
    int64_t timeout = ql_config_get_ms(cfg, "qilin.cluster.session-timeout-ms");
    int64_t kill = ql_config_get_ms(cfg, "qilin.cluster.suspend-kill-ms");
    /* Past the session timeout the session has ended anyway: the steps would be stopped only
     * after another server may have started them again. */
    if (kill >= timeout)
        return ql_err_set(err, QL_EINVAL,
                          "qilin.cluster.suspend-kill-ms: %lld ms must be shorter than "
                          "qilin.cluster.session-timeout-ms (%lld ms); 0 means a quarter of it",
                          (long long)kill, (long long)timeout);
    return 0;
}

static int zk_lock_new(const ql_config_t *cfg, ql_store_t *store, ql_writer_t *writer,
                       uv_loop_t *loop, ql_log_t *log, ql_lock_t **out, ql_err_t *err) {
    if (!loop)
        return ql_err_set(err, QL_EINVAL,
                          "kylin.env.zookeeper-connect-string: the ZooKeeper lock needs the "
                          "server's event loop");
    char id[256];
    ql_lock_zk_opts_t zo = {
        .loop = loop,
        .store = store,
        .writer = writer,
        /* 100, and scheduler 2's dispatcher: leader election at leader/ */
        .elect = ql_config_get_int(cfg, "kylin.job.scheduler.default") != 0,
    };
    ql_zk_opts_from_config(cfg, ql_config_server_id(cfg, id, sizeof id), log, &zo.zk);
    return ql_lock_zk_new(&zo, out, err);
}

int node_lock_new(const ql_config_t *cfg, ql_store_t *store, ql_writer_t *writer, uv_loop_t *loop,
                  ql_log_t *log, ql_lock_t **out, ql_err_t *err) {
    if (ql_config_get_str(cfg, "kylin.env.zookeeper-connect-string")[0])
        return zk_lock_new(cfg, store, writer, loop, log, out, err);
    int64_t lease_ms = ql_config_get_ms(cfg, "qilin.server.master-lease-ms");
    if (strcmp(ql_store_backend(store), "postgresql") == 0) {
        /* Servers on several hosts: a lock file would be one per host. */
        char id[256], address[300];
        const char *host;
        int port;
        ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
        bool v6 = strchr(host, ':') != NULL;
        snprintf(address, sizeof address, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
        ql_lock_pg_opts_t po = {
            .server_id = ql_config_server_id(cfg, id, sizeof id),
            .address = address,
            .lease_ms = lease_ms,
            .log = log,
        };
        return ql_lock_pg_new(store, &po, out, err);
    }
    ql_lock_file_opts_t fo = {.lease_ms = lease_ms, .log = log};
    int rc = ql_lock_file_new(ql_store_path(store), store, &fo, out);
    if (rc)
        return ql_err_set(err, rc, "cannot create the job engine lock: %s", ql_strerror(rc));
    return 0;
}
