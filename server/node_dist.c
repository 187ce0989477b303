/*
 * Scheduler 2's job scheduler (node_dist.h; docs/zookeeper.md, Scheduler 2): every job server
 * runs one from its start to its stop, whoever leads the election. It takes a ZooKeeper lock per
 * job (ql_zk_jobs on the job engine lock's session) and takes over the jobs whose lock vanished.
 *
 * DESIGN.
 * - The session is the ZooKeeper lock's (ql_lock_zk_session): one per server. Its states drive
 *   the fetcher: no picks while the connection is lost (SUSPENDED; running steps go on), picks
 *   again once it is back. DOUBTFUL (lost for qilin.cluster.suspend-kill-ms) and EXPIRED mean
 *   another server may take the jobs over: the scheduler stops its running steps and puts their
 *   jobs back to READY (each write checked against its job's token, so a job already taken over
 *   is left to its new holder), then a new scheduler replaces it and fetches once the session is
 *   back.
 * - Every listing of lock/ (at start and after each new session) takes over the RUNNING and
 *   PENDING jobs without a lock node; every vanished node the job it locked.
 * - Stop: the scheduler stops as a master's does (qilin.shutdown.running-steps), then the
 *   recipe is freed, deleting this server's job locks so that other servers take over at once.
 */
#include "node_dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node_dist {
    ql_zk_t *zk;
    ql_zk_jobs_t *jobs;
    ql_zk_listener_t listener;
    ql_sched_t *sched;
    ql_sched_opts_t so; /* to make it again after DOUBTFUL or EXPIRED */
    ql_log_t *log;
    bool started;    /* fetching was started (the first CONNECTED, or at once if connected) */
    bool restarting; /* the scheduler stops its steps after DOUBTFUL or EXPIRED */
    void (*done)(void *arg);
    void *done_arg;
};

static void on_jobs(void *arg, ql_zk_jobs_kind_t kind, const char *job_id) {
    node_dist_t *d = arg;
    if (!d->sched || d->restarting)
        return; /* the new scheduler looks for orphans itself */
    if (kind == QL_ZK_JOBS_LISTED)
        ql_sched_adopt_orphans(d->sched);
    else
        ql_sched_lock_vanished(d->sched, job_id);
}

static bool connected(const node_dist_t *d) {
    ql_zk_state_t st = ql_zk_state(d->zk);
    return st == QL_ZK_CONNECTED || st == QL_ZK_RECONNECTED;
}

static void free_all(node_dist_t *d) {
    ql_zk_unlisten(d->zk, &d->listener);
    ql_sched_free(d->sched);
    ql_zk_jobs_free(d->jobs); /* deletes this server's job locks */
    free(d);
}

/* The steps stopped after DOUBTFUL or EXPIRED: a new scheduler, fetching once connected; or,
 * when the node stops meanwhile, the end. */
static void doubt_stopped(void *arg) {
    node_dist_t *d = arg;
    d->restarting = false;
    if (d->done) {
        void (*done)(void *) = d->done;
        void *done_arg = d->done_arg;
        free_all(d);
        done(done_arg);
        return;
    }
    ql_sched_free(d->sched);
    d->sched = NULL;
    int rc = ql_sched_new(&d->so, &d->sched);
    if (rc) {
        ql_log(d->log, QL_LOG_ERROR, "node",
               "cannot make the job scheduler again: %s; this server runs no more jobs",
               ql_strerror(rc));
        return;
    }
    if (connected(d)) {
        ql_sched_start(d->sched);
        ql_sched_adopt_orphans(d->sched);
    }
}

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    (void)zk;
    node_dist_t *d = arg;
    if (!d->sched || d->restarting || ev->state == QL_ZK_CONNECTING)
        return;
    if (ev->state == QL_ZK_CONNECTED || ev->state == QL_ZK_RECONNECTED) {
        ql_sched_start(d->sched);
        d->started = true;
        return;
    }
    bool lost = ev->state == QL_ZK_DOUBTFUL || ev->state == QL_ZK_EXPIRED;
    if (lost && !ql_sched_idle(d->sched)) {
        ql_log(d->log, QL_LOG_WARN, "node",
               "job locks lost or in doubt state=%s reason=\"%s\": stopping the running steps, "
               "whose jobs other servers may take over",
               ql_zk_state_name(ev->state), ev->reason);
        d->restarting = true;
        ql_sched_stop(d->sched, true, 0, doubt_stopped, d);
        return;
    }
    if (d->started)
        ql_log(d->log, QL_LOG_WARN, "node",
               "job locks in doubt state=%s reason=\"%s\": picking no new job until the "
               "ZooKeeper session is back",
               ql_zk_state_name(ev->state), ev->reason);
    ql_sched_pause_fetching(d->sched);
}

/* The names assigned-servers may give this server: its id, the machine's host name, the host
 * of its listen address and of its API address. */
static void self_names(const ql_config_t *cfg, ql_sched_opts_t *so) {
    char host[256] = "", api[300];
    const char *listen;
    int port;
    gethostname(host, sizeof host - 1);
    ql_config_get_address(cfg, "qilin.server.listen", &listen, &port);
    ql_config_api_address(cfg, api, sizeof api);
    char *colon = strrchr(api, ':');
    if (colon)
        *colon = '\0';
    const char *api_host = api[0] == '[' ? api + 1 : api;
    size_t n = strlen(api_host);
    if (n && api_host[n - 1] == ']')
        api[strlen(api) - 1] = '\0';
    snprintf(so->assigned_names, sizeof so->assigned_names, "%.200s,%.255s,%.255s,%.255s",
             so->server_id, host, listen, api_host);
    const char *const *items;
    size_t k = ql_config_get_list(cfg, "kylin.cube.schedule.assigned-servers", &items);
    for (size_t i = 0, off = 0; i < k && off < sizeof so->assigned_default; i++)
        off += (size_t)snprintf(so->assigned_default + off, sizeof so->assigned_default - off,
                                "%s%s", i ? "," : "", items[i]);
}

int node_dist_start(const node_dist_opts_t *o, node_dist_t **out, ql_err_t *err) {
    *out = NULL;
    ql_zk_t *zk = ql_lock_zk_session(o->lock);
    if (!zk)
        return ql_err_set(err, QL_EINVAL,
                          "kylin.job.scheduler.default: 2 needs the ZooKeeper lock's session "
                          "(kylin.env.zookeeper-connect-string)");
    node_dist_t *d = calloc(1, sizeof *d);
    if (!d)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    d->zk = zk;
    d->log = o->sched.log;
    ql_sched_opts_t *so = &d->so;
    *so = o->sched;
    ql_node_engine_opts(o->cfg, so, NULL);
    so->fence = 0; /* every run carries its job's token */
    self_names(o->cfg, so);
    int rc = ql_zk_jobs_new(zk, on_jobs, d, &d->jobs);
    if (rc) {
        free(d);
        return ql_err_set(err, rc, "cannot make the job locks: %s", ql_strerror(rc));
    }
    so->job_locks = d->jobs;
    if ((rc = ql_sched_new(so, &d->sched))) {
        ql_zk_jobs_free(d->jobs);
        free(d);
        return ql_err_set(err, rc, "cannot create the scheduler: %s", ql_strerror(rc));
    }
    ql_zk_listen(zk, &d->listener, on_state, d);
    if (connected(d)) {
        ql_sched_start(d->sched);
        d->started = true;
    }
    ql_log(d->log, QL_LOG_INFO, "node",
           "distributed job server (scheduler 2): running jobs under a ZooKeeper lock each "
           "names=%s max_concurrent_jobs=%d",
           so->assigned_names, so->max_concurrent_jobs);
    *out = d;
    return 0;
}

ql_sched_t *node_dist_sched(node_dist_t *d) {
    return d ? d->sched : NULL;
}

void node_dist_free(node_dist_t *d) {
    if (d)
        free_all(d);
}

static void sched_stopped(void *arg) {
    node_dist_t *d = arg;
    void (*done)(void *) = d->done;
    void *done_arg = d->done_arg;
    free_all(d);
    done(done_arg);
}

void node_dist_stop(node_dist_t *d, bool pause_running, int64_t grace_ms, void (*done)(void *arg),
                    void *arg) {
    d->done = done;
    d->done_arg = arg;
    ql_zk_unlisten(d->zk, &d->listener); /* no restart of the fetcher while it stops */
    if (d->restarting)
        return; /* its steps are being stopped already: doubt_stopped ends it */
    if (!d->sched) {
        sched_stopped(d);
        return;
    }
    ql_sched_stop(d->sched, pause_running, grace_ms, sched_stopped, d);
}
