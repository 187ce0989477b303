/*
 * The coordination guard (docs/user-guide.md, Several servers; docs/design/multi-host.md §2.1).
 *
 * Every job server of a store must coordinate the same way: the same scheduler and the same
 * kind of job engine lock (and, for ZooKeeper, the same ensemble path). Two clusters that point
 * at one store with different settings would each elect their own master and both schedule; the
 * fencing epoch would keep their writes apart, but they would refuse each other's work forever.
 * So the first job server records how it coordinates in meta "coordination", in one write
 * transaction with the server that recorded it, and every later job server compares: a server
 * configured differently refuses to start and names both configurations. `qilin cluster
 * reset-coordination` clears the record for a deliberate change, once the old servers are gone,
 * and with it the recorded ZooKeeper ensemble (QL_LOCK_ZK_ENSEMBLE_KEY, ql_lock.h), so that the
 * next server adopts the ensemble it finds.
 */
#include "server/ql_node.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define COORD_KEY "coordination"
#define COORD_BY_KEY "coordination_by"

void ql_node_coordination(const ql_config_t *cfg, const char *lock_kind, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "scheduler=%lld lock=%s",
                     (long long)ql_config_get_int(cfg, "kylin.job.scheduler.default"), lock_kind);
    if (!strcmp(lock_kind, "zk") && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " zk-path=%s/%s",
                 ql_config_get_str(cfg, "kylin.env.zookeeper-base-path"),
                 ql_config_get_str(cfg, "kylin.server.cluster-name"));
}

/* The record and who made it, or empty strings when there is none. */
static int read_record(ql_txn_t *txn, char *rec, size_t rcap, char *by, size_t bcap) {
    rec[0] = by[0] = '\0';
    int rc = ql_meta_get_str(txn, COORD_KEY, rec, rcap);
    if (rc == QL_ENOTFOUND)
        return 0;
    if (rc == 0 && (rc = ql_meta_get_str(txn, COORD_BY_KEY, by, bcap)) == QL_ENOTFOUND)
        rc = 0;
    return rc;
}

int ql_node_guard_coordination(ql_store_t *store, const char *mine, const char *server_id,
                               int64_t now_ms, ql_log_t *log, ql_err_t *err) {
    ql_txn_t *txn;
    int rc = ql_txn_begin(store, true, &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot read the store's coordination record: %s",
                          ql_strerror(rc));
    char rec[256], by[256];
    if ((rc = read_record(txn, rec, sizeof rec, by, sizeof by))) {
        ql_txn_abort(txn);
        return ql_err_set(err, rc, "cannot read the store's coordination record: %s",
                          ql_strerror(rc));
    }
    if (rec[0]) {
        ql_txn_abort(txn);
        if (!strcmp(rec, mine))
            return 0;
        return ql_err_set(err, QL_ECOORD,
                          "this server is configured as '%s', but the job servers of this store "
                          "coordinate as '%s' (recorded by %s): two clusters scheduling on one "
                          "store would both run its jobs. Configure this server like the others; "
                          "to change how the store is coordinated, stop every job server, then "
                          "run `qilin cluster reset-coordination`",
                          mine, rec, by[0] ? by : "an unknown server");
    }
    time_t secs = (time_t)(now_ms / 1000);
    struct tm tm;
    char when[32] = "";
    if (gmtime_r(&secs, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(by, sizeof by, "%s at %s", server_id, when);
    if ((rc = ql_meta_put_str(txn, COORD_KEY, mine)) ||
        (rc = ql_meta_put_str(txn, COORD_BY_KEY, by)))
        ql_txn_abort(txn);
    else
        rc = ql_txn_commit(txn); /* frees txn, also on failure */
    if (rc)
        return ql_err_set(err, rc, "cannot record the store's coordination: %s", ql_strerror(rc));
    ql_log(log, QL_LOG_INFO, "node", "recorded how this store's job servers coordinate: %s", mine);
    return 0;
}

/* Whether the store's tokens came from ZooKeeper: its record names the zk lock, or an ensemble
 * was recorded. */
static int zk_coordinated(ql_txn_t *txn, const char *record, bool *zk) {
    char ensemble[64] = "";
    int rc = ql_meta_get_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, ensemble, sizeof ensemble);
    if (rc && rc != QL_ENOTFOUND)
        return rc;
    *zk = strstr(record, " lock=zk") != NULL || ensemble[0] != '\0';
    return 0;
}

int ql_node_reset_coordination(ql_store_t *store, char *old, size_t cap, uint64_t *epoch_was,
                               ql_err_t *err) {
    *epoch_was = 0;
    ql_txn_t *txn;
    int rc = ql_txn_begin(store, true, &txn);
    if (rc)
        return ql_err_set(err, rc, "cannot open a write transaction: %s", ql_strerror(rc));
    char by[256];
    bool zk = false;
    if ((rc = read_record(txn, old, cap, by, sizeof by)) || (rc = zk_coordinated(txn, old, &zk))) {
        ql_txn_abort(txn);
        return ql_err_set(err, rc, "cannot read the coordination record: %s", ql_strerror(rc));
    }
    /* A new ensemble's zxids start small: without this its claims would all be refused. */
    if (zk && (rc = ql_fence_reset(txn, epoch_was, err))) {
        ql_txn_abort(txn);
        return rc;
    }
    if ((rc = ql_meta_put_str(txn, COORD_KEY, "")) ||
        (rc = ql_meta_put_str(txn, COORD_BY_KEY, "")) ||
        (rc = ql_meta_put_str(txn, QL_LOCK_ZK_ENSEMBLE_KEY, ""))) {
        ql_txn_abort(txn);
        return ql_err_set(err, rc, "cannot clear the coordination record: %s", ql_strerror(rc));
    }
    if ((rc = ql_txn_commit(txn)))
        return ql_err_set(err, rc, "cannot clear the coordination record: %s", ql_strerror(rc));
    return 0;
}
