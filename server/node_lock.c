/* The choice of a node's job engine lock (node_int.h; docs/postgresql.md, The job engine
 * lock). */
#include "node_int.h"

#include <stdio.h>
#include <string.h>

int node_lock_new(const ql_config_t *cfg, ql_store_t *store, ql_log_t *log, ql_lock_t **out,
                  ql_err_t *err) {
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
