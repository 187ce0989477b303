/* The job server's engine composition: see ql_node.h. */
#include "node_int.h"

#include "node_changes.h"
#include "node_dist.h"
#include "node_wake.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How often a standby tries the lock and the master checks it still holds it. */
#define LOCK_POLL_MS 1000

struct ql_node {
    ql_node_opts_t opts;
    const ql_config_t *cfg;
    ql_store_t *store;
    ql_writer_t *writer;
    ql_clock_t *clock;
    const ql_templates_t *templates;
    ql_lock_t *lock;
    /* What the node made itself and frees; the rest is borrowed from the options. */
    bool own_store, own_clock, own_lock;
    ql_templates_t *own_templates;
    ql_sched_t *sched;
    /* scheduler 2 (node_dist.h): the job scheduler every job server runs; the election's
     * winner only adds the dispatcher and retention (leading), and sched stays NULL */
    node_dist_t *dist;
    bool leading;
    ql_dispatcher_t *dispatcher;
    ql_retention_t *retention;   /* the master's deletion of old final jobs; NULL: off */
    uint64_t retention_removed;  /* jobs deleted by the retention tasks this node freed */
    ql_node_space_t space;       /* the last measure of the store's fullness */
    int64_t space_checked_ms;    /* when (monotonic), 0: never */
    ql_submission_t *submission; /* clients' submissions; wakes the scheduler (ql_node_kick) */
    node_changes_t *changes;     /* other servers' writes wake the scheduler (node_changes.h) */
    node_wake_t *wake;           /* the threaded writer's wake-up of the loop (node_wake.h) */
    ql_timer_t lock_timer;
    bool lock_timer_init;
    ql_timer_t lease_timer; /* the master renews its lease in the lock file */
    bool lease_timer_init;
    char holder[256];
    char exec_helper[PATH_MAX];
    char log_dir[PATH_MAX];
    bool stopping;
    bool demoting; /* the lock is lost: the scheduler is stopping, then back to standby */
    bool paused;   /* the lock is suspended (ZooKeeper connection lost): no picks, no scans */
    bool fenced;   /* the scheduler saw a change refused by fencing */
    int closing;
    void (*stop_done)(void *);
    void *stop_arg;
};

static void wake_cb(void *arg) {
    ql_node_t *n = arg;
    ql_writer_complete(n->writer);
}

static void notify_cb(void *arg) {
    ql_node_t *n = arg;
    node_wake_send(n->wake);
}

/* The submission service's wake-up, once per committed submission. */
static void submission_wake(void *arg) {
    ql_node_kick(arg);
}

/* The scheduler that may pick a submission in its own transaction (ql_submission.h): the
 * master's, while it may act on its holding; scheduler 2 has no n->sched (its picks take a
 * job's lock first), a standby or a query server none at all. */
static ql_sched_t *submission_picker(void *arg) {
    ql_node_t *n = arg;
    return ql_node_is_master(n) && !n->paused ? n->sched : NULL;
}

static void on_submitted(void *arg, const ql_id_t *job) {
    ql_node_t *n = arg;
    ql_node_kick(n);
    if (n->opts.hooks.on_submitted)
        n->opts.hooks.on_submitted(n->opts.hooks.arg, job);
}

static int submit_fault(void *arg) {
    ql_node_t *n = arg;
    return n->opts.hooks.submit_fault(n->opts.hooks.arg);
}

/* The dispatcher scans only while this server may act on its holding. */
static bool is_master(void *arg) {
    ql_node_t *n = arg;
    return ql_node_is_master(n) && !n->paused;
}

/* The path of qilin-exec: the option, or the file next to the running executable. */
static void find_exec_helper(ql_node_t *n) {
    if (n->opts.exec_helper) {
        snprintf(n->exec_helper, sizeof n->exec_helper, "%s", n->opts.exec_helper);
        return;
    }
    char self[PATH_MAX];
    size_t len = sizeof self;
    if (uv_exepath(self, &len) == 0) {
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(n->exec_helper, sizeof n->exec_helper, "%.*s/qilin-exec", PATH_MAX - 16, self);
            if (access(n->exec_helper, X_OK) == 0)
                return;
            snprintf(n->exec_helper, sizeof n->exec_helper, "%.*s/../tools/qilin-exec",
                     PATH_MAX - 32, self);
            if (access(n->exec_helper, X_OK) == 0)
                return;
        }
    }
    snprintf(n->exec_helper, sizeof n->exec_helper, "qilin-exec");
}

static void lock_timer_cb(ql_timer_t *t, void *arg);

/* Every QL_LOCK_RENEW_MS while the lock is held: from the loop, so a loop that is stopped or
 * wedged stops renewing, and a standby replaces this server after qilin.server.master-lease-ms.
 * It goes on while the server stops (running steps may take qilin.shutdown.grace-ms to finish)
 * or steps down: the loop is alive, and the lock is released at the end of either. */
static void lease_timer_cb(ql_timer_t *t, void *arg) {
    ql_node_t *n = arg;
    if (!n->lock || !n->lock->held)
        return;
    ql_lock_renew(n->lock);
    ql_timer_start(t, QL_LOCK_RENEW_MS, lease_timer_cb, n);
}

/* From a write's answer: run the lock check at the next loop turn, not inside the answer. */
static void on_fenced(void *arg) {
    ql_node_t *n = arg;
    n->fenced = true;
    if (!n->stopping && !n->demoting)
        ql_timer_start(&n->lock_timer, 0, lock_timer_cb, n);
}

/* Frees the dispatcher and the retention task (the master's periodic writers), keeping the
 * retention count for /metrics. */
static void stop_master_tasks(ql_node_t *n) {
    ql_dispatcher_free(n->dispatcher);
    n->dispatcher = NULL;
    if (n->retention) {
        ql_retention_stats_t rs;
        ql_retention_get_stats(n->retention, &rs);
        n->retention_removed += rs.removed;
        ql_retention_free(n->retention);
        n->retention = NULL;
    }
}

/* Retention (ql_retention.h), under the holding's fencing token; none when its interval is 0. */
static int start_retention(ql_node_t *n, ql_err_t *err) {
    ql_retention_opts_t ro = {
        .store = n->store,
        .writer = n->writer,
        .clock = n->clock,
        .log = n->opts.log,
        .survival_ms =
            ql_config_get_ms(n->cfg, "kylin.garbage.storage.executable-survival-time-threshold"),
        .interval_ms = ql_config_get_ms(n->cfg, "qilin.retention.interval-ms"),
        .batch = (size_t)ql_config_get_int(n->cfg, "qilin.retention.batch"),
        .fence = n->lock->fence,
        .manual_flush = n->opts.writer == QL_NODE_WRITER_INLINE,
    };
    if (ro.interval_ms == 0)
        return 0;
    int rc = ql_retention_new(&ro, &n->retention);
    if (rc)
        return ql_err_set(err, rc, "cannot create the retention task: %s", ql_strerror(rc));
    ql_retention_start(n->retention);
    return 0;
}

/* What every scheduler of this node runs on: the master's (fenced by the lock) and scheduler 2's
 * own (fenced per job). */
static ql_sched_opts_t sched_base_opts(const ql_node_t *n) {
    return (ql_sched_opts_t){
        .store = n->store,
        .writer = n->writer,
        .clock = n->clock,
        .log = n->opts.log,
        .templates = n->templates,
        .exec_helper = n->exec_helper,
        .log_dir = n->log_dir,
        .proc_drain_ms = n->opts.proc_drain_ms,
    };
}

static int start_scheduling(ql_node_t *n, ql_err_t *err) {
    ql_sched_opts_t so = sched_base_opts(n);
    so.fence = n->lock->fence;
    so.on_fenced = on_fenced;
    so.hook_arg = n;
    ql_node_engine_opts(n->cfg, &so, NULL);
    int rc = 0;
    uint64_t recovered = 0;
    /* Scheduler 2: jobs are run and recovered by every server's own scheduler (node_dist.c),
     * each under its lock; the leader adds only the master's periodic tasks. */
    if (!n->dist && (rc = ql_sched_new(&so, &n->sched)))
        return ql_err_set(err, rc, "cannot create the scheduler: %s", ql_strerror(rc));
    if (n->sched && (rc = ql_sched_recover(n->sched, &recovered, err)))
        return rc;
    ql_dispatcher_opts_t dopts = {
        .store = n->store,
        .writer = n->writer,
        .clock = n->clock,
        .log = n->opts.log,
        .templates = n->templates,
        .is_master = is_master,
        .master_arg = n,
        .on_submitted = on_submitted,
        .hook_arg = n,
        .fence = n->lock->fence,
        .manual_flush = n->opts.writer == QL_NODE_WRITER_INLINE,
        .submit_fault = n->opts.hooks.submit_fault ? submit_fault : NULL,
        .on_decision = n->opts.hooks.on_decision,
        .decision_arg = n->opts.hooks.arg,
    };
    ql_node_engine_opts(n->cfg, NULL, &dopts);
    if ((rc = ql_dispatcher_new(&dopts, &n->dispatcher)))
        return ql_err_set(err, rc, "cannot create the dispatcher: %s", ql_strerror(rc));
    if (n->sched)
        ql_sched_start(n->sched);
    n->leading = n->dist != NULL;
    if (!n->opts.driver_scans)
        ql_dispatcher_start(n->dispatcher);
    if ((rc = start_retention(n, err)))
        return rc;
    ql_lock_renew(n->lock);  /* recovery may have taken a while */
    if (n->lock->ops->renew) /* a lock without a lease has nothing to renew */
        ql_timer_start(&n->lease_timer, QL_LOCK_RENEW_MS, lease_timer_cb, n);
    ql_log(n->opts.log, QL_LOG_INFO, "node",
           "scheduling: holding the job engine lock fence=%llu recovered=%llu",
           (unsigned long long)n->lock->fence, (unsigned long long)recovered);
    return 0;
}

/* Tries the lock; starts scheduling when it is ours. */
static int try_lock(ql_node_t *n, ql_err_t *err) {
    bool acquired;
    char holder[256] = "";
    int rc = ql_lock_try_acquire(n->lock, &acquired, holder, sizeof holder);
    if (rc)
        return ql_err_set(err, rc, "cannot take the job engine lock: %s",
                          n->lock->why[0] ? n->lock->why : ql_strerror(rc));
    if (acquired) {
        n->holder[0] = '\0';
        if ((rc = start_scheduling(n, err))) {
            /* Not half a master: drop what started and the lock, so the next poll tries again
             * (or another server takes over). */
            stop_master_tasks(n);
            ql_sched_free(n->sched);
            n->sched = NULL;
            n->leading = false;
            ql_lock_release(n->lock);
        }
        return rc;
    }
    if (strcmp(holder, n->holder) != 0) {
        ql_log(n->opts.log, QL_LOG_INFO, "node",
               "standby: the job engine lock is held by %s; this server serves the API and takes "
               "over when the lock is released",
               holder);
        snprintf(n->holder, sizeof n->holder, "%s", holder);
    }
    return 0;
}

/* Why the master's holding is over, or NULL while it lasts: the lock itself (its file replaced),
 * or the store's epoch moved past our token (another server took the lock). */
static const char *holding_lost(ql_node_t *n, char *buf, size_t cap) {
    if (n->fenced)
        return "a change was refused by fencing (another server took the lock)";
    if (!ql_lock_still_held(n->lock))
        return n->lock->why[0] ? n->lock->why : "the lock file was removed or replaced";
    /* A cut-off master must not wait for the network here: it would notice its unanswered
     * renewal only after the read gave up (docs/postgresql.md, Stepping down). */
    if (n->lock->ops->renewal_checks_epoch)
        return NULL;
    ql_txn_t *txn;
    uint64_t epoch = 0;
    if (ql_txn_begin(n->store, false, &txn) == 0) {
        int rc = ql_fence_current(txn, &epoch);
        ql_txn_abort(txn);
        if (rc == 0 && epoch != n->lock->fence) {
            snprintf(buf, cap, "the fencing epoch is now %llu, this server's token is %llu",
                     (unsigned long long)epoch, (unsigned long long)n->lock->fence);
            return buf;
        }
    }
    return NULL;
}

static void sched_demoted(void *arg);
static void close_handles(ql_node_t *n);

/* The lock is lost while scheduling: stop the dispatcher and the scheduler (running steps are
 * stopped; their writes are refused by fencing, and the new holder resumes the jobs), release
 * what is left of the lock and go back to standby. */
static void demote(ql_node_t *n, const char *why) {
    n->demoting = true;
    ql_log(n->opts.log, QL_LOG_ERROR, "node",
           "lost the job engine lock fence=%llu reason=\"%s\": stopping the scheduler and the "
           "dispatcher; running steps are stopped and the lock's new holder resumes their jobs; "
           "this server goes back to standby",
           (unsigned long long)n->lock->fence, why);
    stop_master_tasks(n);
    if (!n->sched) { /* scheduler 2's leader: its jobs' scheduler goes on */
        sched_demoted(n);
        return;
    }
    ql_sched_stop(n->sched, true, 0, sched_demoted, n);
}

static void sched_demoted(void *arg) {
    ql_node_t *n = arg;
    ql_sched_free(n->sched);
    n->sched = NULL;
    ql_timer_stop(&n->lease_timer);
    ql_lock_release(n->lock);
    n->leading = false;
    n->demoting = false;
    n->paused = false;
    n->fenced = false;
    n->holder[0] = '\0';
    if (n->stopping) {
        close_handles(n);
        return;
    }
    ql_timer_start(&n->lock_timer, LOCK_POLL_MS, lock_timer_cb, n);
}

/* The master follows its lock's suspension (docs/zookeeper.md, The session): while the
 * ZooKeeper connection is lost it picks nothing new and the dispatcher scans nothing, but
 * running steps go on; the lock's still_held says when the holding is over. */
static void follow_suspension(ql_node_t *n) {
    if (n->lock->suspended == n->paused)
        return;
    n->paused = n->lock->suspended;
    if (!n->sched) /* scheduler 2: its jobs' scheduler follows the session (node_dist.c) */
        return;
    if (n->paused) {
        ql_sched_pause_fetching(n->sched);
        ql_log(n->opts.log, QL_LOG_WARN, "node",
               "suspended: the ZooKeeper connection is lost fence=%llu; picking no new job and "
               "scanning nothing until it is back; running steps go on",
               (unsigned long long)n->lock->fence);
    } else {
        ql_sched_start(n->sched);
        ql_log(n->opts.log, QL_LOG_INFO, "node",
               "resumed: the ZooKeeper connection is back with the same session fence=%llu",
               (unsigned long long)n->lock->fence);
    }
}

/* Every LOCK_POLL_MS, and at once when the lock reports a change: stale reader slots are freed;
 * a standby tries the lock; the master checks it still holds it. */
static void lock_timer_cb(ql_timer_t *t, void *arg) {
    ql_node_t *n = arg;
    if (n->stopping || n->demoting)
        return;
    int cleared = 0;
    if (ql_store_maintain(n->store, &cleared) == 0 && cleared > 0)
        ql_log(n->opts.log, QL_LOG_WARN, "node",
               "freed the store's reader slots of dead processes count=%d reason=\"a process "
               "died inside a read transaction; its slot kept old pages from reuse\"",
               cleared);
    int64_t mono = ql_clock_mono_ms(n->clock);
    if (!n->space_checked_ms || mono - n->space_checked_ms >= QL_SPACE_CHECK_MS) {
        ql_node_space_t now;
        if (ql_node_space_measure(n->store, &now) == 0) {
            ql_node_space_log(n->opts.log, ql_store_path(n->store), &n->space, &now);
            n->space = now;
        }
        n->space_checked_ms = mono ? mono : 1;
    }
    if (n->sched || n->leading) {
        char buf[160];
        const char *why = holding_lost(n, buf, sizeof buf);
        if (why) {
            demote(n, why);
            return;
        }
        follow_suspension(n);
    } else {
        ql_err_t err = {0};
        if (try_lock(n, &err))
            ql_log(n->opts.log, QL_LOG_ERROR, "node", "%s", err.msg);
    }
    if (!n->stopping)
        ql_timer_start(t, LOCK_POLL_MS, lock_timer_cb, n);
}

/* The lock learned something by an event (ZooKeeper): look at once, from the loop. */
static void lock_changed(void *arg) {
    ql_node_t *n = arg;
    if (!n->stopping && !n->demoting && n->lock_timer_init)
        ql_timer_start(&n->lock_timer, 0, lock_timer_cb, n);
}

static int load_templates(ql_node_t *n, ql_err_t *err) {
    if (n->opts.templates) {
        n->templates = n->opts.templates;
        return 0;
    }
    const char *path = ql_config_get_str(n->cfg, "qilin.jobs.templates");
    char full[PATH_MAX];
    if (path[0] != '/' && n->opts.config_dir)
        snprintf(full, sizeof full, "%s/%s", n->opts.config_dir, path);
    else
        snprintf(full, sizeof full, "%s", path);
    int rc = ql_templates_load_file(full, &n->own_templates, err);
    n->templates = n->own_templates;
    return rc;
}

static void free_node(ql_node_t *n) {
    ql_writer_free(n->writer); /* answers what is still queued, submissions too */
    node_wake_free(n->wake);   /* the writer thread, its only sender, has ended */
    ql_submission_free(n->submission);
    if (n->own_lock) {
        ql_lock_free(n->lock);
    } else if (n->lock) {
        n->lock->changed = NULL; /* the lock is the caller's and outlives this node */
        if (n->lock->held)
            ql_lock_release(n->lock);
    }
    if (n->own_store)
        ql_store_close(n->store);
    ql_templates_free(n->own_templates);
    if (n->own_clock)
        ql_clock_free(n->clock);
    void (*done)(void *) = n->stop_done;
    void *arg = n->stop_arg;
    free(n);
    if (done)
        done(arg);
}

static void handle_closed(ql_node_t *n) {
    if (--n->closing == 0)
        free_node(n);
}

static void wake_closed(void *arg) {
    handle_closed(arg);
}

static void timer_closed(ql_timer_t *t) {
    handle_closed(t->arg);
}

/* ---- wake-ups from other servers (docs/postgresql.md, Wake-ups) ---- */

/* A job another server changed (NULL: any): the master's scheduler fetches, and stops the step
 * of a job of its own that is no longer RUNNING; a standby has nothing to do. */
static void on_store_change(void *arg, const ql_id_t *job) {
    ql_node_t *n = arg;
    if (n->sched)
        ql_sched_notice(n->sched, job);
    else if (n->dist && node_dist_sched(n->dist))
        ql_sched_notice(node_dist_sched(n->dist), job);
}

static void changes_closed(void *arg) {
    handle_closed(arg);
}

/* Watches the store's change session (PostgreSQL; nothing on LMDB or without a loop). */
static int watch_changes(ql_node_t *n, ql_err_t *err) {
    if (!n->opts.loop)
        return 0;
    int rc =
        node_changes_start(n->opts.loop, n->store, n->opts.log, on_store_change, n, &n->changes);
    return rc ? ql_err_set(err, rc, "cannot watch the store's changes: %s", ql_strerror(rc)) : 0;
}

/* Part of close_handles: counts as one of the node's handles until the watcher is closed. */
static void unwatch_changes(ql_node_t *n) {
    if (!n->changes)
        return;
    n->closing++;
    node_changes_stop(n->changes, changes_closed, n);
    n->changes = NULL;
}

static void close_handles(ql_node_t *n) {
    n->closing = 1; /* this function's own reference */
    unwatch_changes(n);
    if (n->lock_timer_init) {
        n->closing++;
        ql_timer_stop(&n->lock_timer);
        n->lock_timer.arg = n;
        ql_timer_close(&n->lock_timer, timer_closed);
    }
    if (n->lease_timer_init) {
        n->closing++;
        ql_timer_stop(&n->lease_timer);
        n->lease_timer.arg = n;
        ql_timer_close(&n->lease_timer, timer_closed);
    }
    if (n->wake) {
        n->closing++;
        /* Answers still queued are run by ql_writer_free (in free_node). */
        node_wake_stop(n->wake, wake_closed, n);
    }
    handle_closed(n);
}

/* The store of qilin.storage.path, opened with its settings. */
static int open_store(ql_node_t *n, ql_err_t *err) {
    const char *path = ql_config_get_str(n->cfg, "qilin.storage.path");
    ql_store_opts_t so = {
        .path = path,
        .map_size = ql_config_get_size(n->cfg, "qilin.storage.map-size"),
        .writer_stall_ms = ql_config_get_ms(n->cfg, "qilin.storage.writer-stall-ms"),
        .log = n->opts.log,
        .url = ql_config_get_str(n->cfg, "qilin.storage.url"),
        .pg_schema = ql_config_get_str(n->cfg, "qilin.storage.pg.schema"),
        .pg_pool_size = (unsigned)ql_config_get_int(n->cfg, "qilin.storage.pg.pool-size"),
        .pg_lock_timeout_ms = ql_config_get_ms(n->cfg, "qilin.storage.pg.lock-timeout-ms"),
        .pg_require_sync_replication =
            ql_config_get_bool(n->cfg, "qilin.storage.pg.require-sync-replication"),
    };
    int rc = ql_store_open(&so, &n->store, err);
    if (rc)
        return rc;
    n->own_store = true;
    struct stat dst;
    if (stat(path, &dst) == 0 && (dst.st_mode & 007))
        ql_log(n->opts.log, QL_LOG_WARN, "node",
               "the data directory is open to every local user (mode %03o): files an older "
               "version made readable there stay readable; chmod o-rwx it path=%s",
               (unsigned)(dst.st_mode & 0777), path);
    uint64_t old_major, old_minor;
    if (ql_store_upgraded_from(n->store, &old_major, &old_minor))
        ql_log(n->opts.log, QL_LOG_INFO, "node",
               "store upgraded in place from=%llu.%llu to=%d.%d path=%s",
               (unsigned long long)old_major, (unsigned long long)old_minor, QL_SCHEMA_MAJOR,
               QL_SCHEMA_MINOR, path);
    return 0;
}

/* The coordination guard (ql_node.h): this server coordinates as the store's other job
 * servers do, or it does not start. */
static int guard_coordination(ql_node_t *n, ql_err_t *err) {
    char mine[256], id[256];
    ql_node_coordination(n->cfg, n->lock->ops->kind ? n->lock->ops->kind : "custom", mine,
                         sizeof mine);
    ql_config_server_id(n->cfg, id, sizeof id);
    return ql_node_guard_coordination(n->store, mine, id, ql_clock_now_ms(n->clock), n->opts.log,
                                      err);
}

/* The writer in the mode the options ask for. */
static int start_writer(ql_node_t *n, ql_err_t *err) {
    ql_writer_opts_t wo = {.manual = true};
    if (n->opts.writer == QL_NODE_WRITER_THREAD) {
        if (!n->opts.loop)
            return ql_err_set(err, QL_EINVAL, "a threaded writer needs a loop");
        int rc = node_wake_start(n->opts.loop, wake_cb, n, &n->wake);
        if (rc)
            return ql_err_set(err, rc, "cannot create the writer's wake-up: %s", ql_strerror(rc));
        /* Lanes take effect only on a store that runs write transactions at once (PostgreSQL). */
        wo = (ql_writer_opts_t){
            .notify = notify_cb,
            .notify_arg = n,
            .lanes = (unsigned)ql_config_get_int(n->cfg, "qilin.storage.pg.writers")};
    }
    int rc = ql_writer_new(n->store, &wo, &n->writer);
    if (rc)
        return ql_err_set(err, rc, "cannot start the writer: %s", ql_strerror(rc));
    if (ql_writer_lanes(n->writer) > 1)
        ql_log(n->opts.log, QL_LOG_INFO, "node",
               "writer lanes=%zu: batches of different models commit side by side "
               "(qilin.storage.pg.writers)",
               ql_writer_lanes(n->writer));
    return 0;
}

/* Scheduler 2: this server's own job scheduler, whoever leads (node_dist.h). */
static int start_dist(ql_node_t *n, ql_err_t *err) {
    if (ql_config_get_int(n->cfg, "kylin.job.scheduler.default") != 2)
        return 0;
    node_dist_opts_t o = {.cfg = n->cfg, .lock = n->lock, .sched = sched_base_opts(n)};
    return node_dist_start(&o, &n->dist, err);
}

int ql_node_start(const ql_node_opts_t *opts, ql_node_t **out, ql_err_t *err) {
    *out = NULL;
    ql_node_t *n = calloc(1, sizeof *n);
    if (!n)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    n->opts = *opts;
    n->cfg = opts->config;
    find_exec_helper(n);
    int rc = 0;
    if (opts->clock) {
        n->clock = opts->clock;
    } else if ((rc = ql_clock_real_new(opts->loop, &n->clock))) {
        free(n);
        return ql_err_set(err, rc, "cannot create the clock: %s", ql_strerror(rc));
    } else {
        n->own_clock = true;
    }
    if (opts->store)
        n->store = opts->store;
    else if ((rc = open_store(n, err)))
        goto fail;
    const char *path = ql_store_path(n->store);
    snprintf(n->log_dir, sizeof n->log_dir, "%s/logs", path);
    if ((rc = load_templates(n, err)) || (rc = start_writer(n, err)))
        goto fail;
    ql_submission_opts_t subo = {
        .writer = n->writer,
        .templates = n->templates,
        .server_timezone = ql_config_get_str(n->cfg, "kylin.web.timezone"),
        .wake = submission_wake,
        .wake_arg = n,
        .picker = submission_picker,
        .picker_arg = n,
    };
    if ((rc = ql_submission_new(&subo, &n->submission))) {
        ql_err_set(err, rc, "cannot create the submission service: %s", ql_strerror(rc));
        goto fail;
    }
    if (!ql_config_serves_jobs(n->cfg)) {
        ql_log(opts->log, QL_LOG_INFO, "node",
               "mode %s: no scheduler and no dispatcher on this server", "query");
        *out = n;
        return 0;
    }
    if ((rc = node_check_scheduler(n->cfg, err)))
        goto fail;
    /* A new master may wait up to the stall bound for another process's write while it takes
     * the lock (raising the epoch), without renewing: a lease that short would get it killed. */
    int64_t lease_ms = ql_config_get_ms(n->cfg, "qilin.server.master-lease-ms");
    int64_t stall_ms = ql_config_get_ms(n->cfg, "qilin.storage.writer-stall-ms");
    if (lease_ms <= stall_ms) {
        rc = ql_err_set(err, QL_EINVAL,
                        "qilin.server.master-lease-ms: %lld ms must be longer than "
                        "qilin.storage.writer-stall-ms (%lld ms)",
                        (long long)lease_ms, (long long)stall_ms);
        goto fail;
    }
    if (opts->lock) {
        n->lock = opts->lock;
    } else {
        if ((rc = node_lock_new(n->cfg, n->store, n->writer, opts->loop, opts->log, &n->lock, err)))
            goto fail;
        n->own_lock = true;
    }
    if ((rc = guard_coordination(n, err)) || (rc = watch_changes(n, err)) ||
        (rc = start_dist(n, err)))
        goto fail;
    ql_timer_init(n->clock, &n->lease_timer);
    n->lease_timer_init = true;
    ql_timer_init(n->clock, &n->lock_timer);
    n->lock_timer_init = true;
    n->lock->changed = lock_changed;
    n->lock->changed_arg = n;
    if ((rc = try_lock(n, err)))
        goto fail;
    ql_timer_start(&n->lock_timer, LOCK_POLL_MS, lock_timer_cb, n);
    *out = n;
    return 0;
fail:
    /* Nothing has run on the loop yet; handles are closed the normal way. */
    n->stopping = true; /* a lock's event meanwhile must not restart a closing timer */
    if (n->sched) {
        ql_sched_free(n->sched);
        n->sched = NULL;
    }
    node_dist_free(n->dist);
    n->dist = NULL;
    stop_master_tasks(n);
    close_handles(n);
    return rc;
}

static void sched_stopped(void *arg) {
    ql_node_t *n = arg;
    ql_timer_stop(&n->lease_timer);
    ql_sched_free(n->sched);
    n->sched = NULL;
    if (n->lock)
        ql_lock_release(n->lock);
    close_handles(n);
}

void ql_node_stop(ql_node_t *n, void (*done)(void *arg), void *arg) {
    if (n->stopping)
        return;
    n->stopping = true;
    n->stop_done = done;
    n->stop_arg = arg;
    ql_log(n->opts.log, QL_LOG_INFO, "node", "stopping");
    if (n->demoting)
        return; /* the scheduler is already stopping: sched_demoted closes the rest */
    stop_master_tasks(n);
    /* `wait`: running steps may finish, for qilin.shutdown.grace-ms at most; then they are
     * paused like with `pause` (back to READY, resumed from that step after a restart). */
    const char *how = ql_config_get_str(n->cfg, "qilin.shutdown.running-steps");
    bool pause = strcmp(how, "wait") != 0;
    int64_t grace = ql_config_get_ms(n->cfg, "qilin.shutdown.grace-ms");
    if (n->dist) {
        node_dist_t *d = n->dist;
        n->dist = NULL;
        node_dist_stop(d, pause, grace, sched_stopped, n);
        return;
    }
    if (n->sched) {
        ql_sched_stop(n->sched, pause, grace, sched_stopped, n);
        return;
    }
    close_handles(n);
}

void ql_node_abort(ql_node_t *n, void (*done)(void *arg), void *arg) {
    n->stopping = true;
    n->demoting = false; /* a scheduler stopping for a demotion is freed with the rest */
    n->stop_done = done;
    n->stop_arg = arg;
    ql_log(n->opts.log, QL_LOG_INFO, "node", "aborting: the engine stops at once, writing nothing");
    stop_master_tasks(n);
    ql_sched_free(n->sched);
    n->sched = NULL;
    node_dist_free(n->dist);
    n->dist = NULL;
    n->leading = false;
    close_handles(n); /* free_node releases the lock */
}

ql_store_t *ql_node_store(ql_node_t *n) {
    return n->store;
}
ql_writer_t *ql_node_writer(ql_node_t *n) {
    return n->writer;
}
ql_clock_t *ql_node_clock(ql_node_t *n) {
    return n->clock;
}
const ql_templates_t *ql_node_templates(ql_node_t *n) {
    return n->templates;
}
const ql_config_t *ql_node_config(ql_node_t *n) {
    return n->cfg;
}
ql_log_t *ql_node_log(ql_node_t *n) {
    return n->opts.log;
}
ql_sched_t *ql_node_sched(ql_node_t *n) {
    return n->dist ? node_dist_sched(n->dist) : n->sched;
}
ql_dispatcher_t *ql_node_dispatcher(ql_node_t *n) {
    return n->dispatcher;
}
uint64_t ql_node_retention_removed(const ql_node_t *n) {
    uint64_t removed = n->retention_removed;
    if (n->retention) {
        ql_retention_stats_t rs;
        ql_retention_get_stats(n->retention, &rs);
        removed += rs.removed;
    }
    return removed;
}
ql_submission_t *ql_node_submission(ql_node_t *n) {
    return n->submission;
}
bool ql_node_is_master(const ql_node_t *n) {
    return (n->sched != NULL || n->leading) && !n->stopping && !n->demoting;
}
bool ql_node_runs_jobs(const ql_node_t *n) {
    return (n->dist != NULL || ql_node_is_master(n)) && !n->stopping;
}
const char *ql_node_lock_holder(const ql_node_t *n) {
    return n->holder;
}
void ql_node_set_api_address(ql_node_t *n, const char *address) {
    if (n->lock)
        ql_lock_set_address(n->lock, address);
}
void ql_node_kick(ql_node_t *n) {
    if (n->sched)
        ql_sched_kick(n->sched);
    if (n->dist && node_dist_sched(n->dist))
        ql_sched_kick(node_dist_sched(n->dist));
}
