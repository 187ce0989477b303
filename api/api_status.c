/*
 * GET /healthz (no auth) and GET /metrics (Prometheus text format 0.0.4; auth per
 * qilin.metrics.require-auth). Both are outside /kylin/api and read only counters: the job
 * counts come from the store's per-state counters, never from a scan.
 */
#include "api_int.h"

#include <stdlib.h>
#include <string.h>

#define TEXT_TYPE "text/plain; charset=utf-8"
#define PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define JSON_TYPE "application/json;charset=utf-8"

/* Answers 503 with body (a JSON object, taken: freed here) naming why the server is unhealthy. */
static void unhealthy(ql_http_req_t *req, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    static const char fallback[] = "{\"status\":\"unhealthy\"}";
    if (text)
        ql_http_respond(req, 503, JSON_TYPE, text, strlen(text));
    else
        ql_http_respond(req, 503, JSON_TYPE, fallback, sizeof fallback - 1);
    free(text);
}

/*
 * The writer's part of the health check: a server whose writes fail (a full map or disk) or
 * whose writer has held a mutation past the stall bound without committing anything cannot do
 * its job, even though it answers and reads. An idle writer is healthy however long ago its
 * last commit was. Returns whether it answered (503).
 */
static bool writer_unhealthy(ql_api_t *api, ql_http_req_t *req) {
    ql_writer_health_t h;
    ql_writer_health(ql_node_writer(api->node), &h);
    if (h.error) {
        unhealthy(req, json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "status", "unhealthy", "reason",
                                 "writes_failing", "code", ql_error_code(h.error), "message",
                                 h.error_msg, "failing_ms", (json_int_t)h.failing_ms, "failures",
                                 (json_int_t)h.failures));
        return true;
    }
    int64_t bound = ql_config_get_ms(api->cfg, "qilin.server.healthz-writer-stall-ms");
    if (h.pending && h.oldest_pending_ms > bound && h.since_commit_ms > bound) {
        unhealthy(req,
                  json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "status", "unhealthy", "reason",
                            "writer_stalled", "pending", (json_int_t)h.pending, "oldest_pending_ms",
                            (json_int_t)h.oldest_pending_ms, "since_commit_ms",
                            (json_int_t)h.since_commit_ms, "stall_ms", (json_int_t)bound));
        return true;
    }
    return false;
}

static void h_healthz(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    static const char down[] = "shutting down\n";
    if (api->closing) {
        ql_http_respond(req, 503, TEXT_TYPE, down, sizeof down - 1);
        return;
    }
    /* This handler runs on the loop thread, so answering proves the loop is alive; a read
     * transaction and a counter read prove the store is readable. */
    ql_txn_t *txn;
    uint64_t n = 0;
    int rc = ql_txn_begin(ql_node_store(api->node), false, &txn);
    if (!rc) {
        rc = ql_project_count(txn, &n);
        ql_txn_abort(txn);
    }
    if (rc) {
        char msg[160];
        int len = snprintf(msg, sizeof msg, "store unreadable: %s\n", ql_strerror(rc));
        ql_http_respond(req, 503, TEXT_TYPE, msg, (size_t)len);
        return;
    }
    if (writer_unhealthy(api, req))
        return;
    static const char ok[] = "ok";
    ql_http_respond(req, 200, TEXT_TYPE, ok, sizeof ok - 1);
}

static void metric(ql_api_sb_t *b, const char *name, const char *type, const char *help) {
    ql_api_sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A metric with one unlabelled sample: its HELP and TYPE lines, then "name value". */
static void metric_u64(ql_api_sb_t *b, const char *name, const char *type, const char *help,
                       uint64_t value) {
    metric(b, name, type, help);
    ql_api_sb_printf(b, "%s %llu\n", name, (unsigned long long)value);
}

static void stat_cb(const char *route, int status, uint64_t count, void *arg) {
    ql_api_sb_printf(arg, "qilin_api_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route,
                     status, (unsigned long long)count);
}

static void write_jobs(ql_api_t *api, ql_api_sb_t *b) {
    ql_txn_t *txn;
    if (ql_txn_begin(ql_node_store(api->node), false, &txn))
        return;
    metric(b, "qilin_jobs", "gauge", "Jobs in the store by state (from the state counters).");
    for (int s = 0; s < QL_JOB_STATE_COUNT; s++) {
        uint64_t n = 0;
        if (ql_job_count(txn, NULL, 1u << s, &n) == 0)
            ql_api_sb_printf(b, "qilin_jobs{state=\"%s\"} %llu\n", ql_state_name((ql_state_t)s),
                             (unsigned long long)n);
    }
    uint64_t projects = 0;
    if (ql_project_count(txn, &projects) == 0) {
        metric_u64(b, "qilin_projects", "gauge", "Projects in the store.", projects);
    }
    ql_txn_abort(txn);
}

static void write_dispatcher(ql_api_t *api, ql_api_sb_t *b) {
    ql_dispatcher_t *d = ql_node_dispatcher(api->node);
    ql_dispatcher_stats_t ds = {0};
    if (d)
        ql_dispatcher_get_stats(d, &ds);
    metric_u64(b, "qilin_dispatcher_active", "gauge",
               "1 when this server runs the automatic segment build dispatcher.", d ? 1 : 0);
    metric_u64(b, "qilin_dispatcher_scans_total", "counter", "Dispatcher scans run.", ds.scans);
    metric(b, "qilin_dispatcher_last_scan_duration_seconds", "gauge",
           "Duration of the last dispatcher scan.");
    ql_api_sb_printf(b, "qilin_dispatcher_last_scan_duration_seconds %.6f\n",
                     (double)ds.last_scan_us / 1e6);
    metric(b, "qilin_dispatcher_last_scan_cycles", "gauge",
           "Decisions of the last dispatcher scan by cycle state.");
    for (int s = QL_CYCLE_COVERED; s < QL_CYCLE_STATE_COUNT; s++)
        ql_api_sb_printf(b, "qilin_dispatcher_last_scan_cycles{state=\"%s\"} %llu\n",
                         ql_cycle_state_name((ql_cycle_state_t)s),
                         (unsigned long long)ds.states[s]);
    metric_u64(b, "qilin_dispatcher_cycle_cache_entries", "gauge",
               "Cycles in the dispatcher's cycle cache.", ds.cache_entries);

    ql_api_stats_t as = api->stats;
    metric(b, "qilin_submissions_total", "counter", "Jobs submitted, by source and job type.");
    ql_api_sb_printf(b,
                     "qilin_submissions_total{source=\"api\",type=\"INC_BUILD\"} %llu\n"
                     "qilin_submissions_total{source=\"api\",type=\"INDEX_MERGE\"} %llu\n"
                     "qilin_submissions_total{source=\"api\",type=\"INDEX_REFRESH\"} %llu\n"
                     "qilin_submissions_total{source=\"api\",type=\"adhoc\"} %llu\n"
                     "qilin_submissions_total{source=\"dispatcher\",type=\"INC_BUILD\"} %llu\n",
                     (unsigned long long)as.builds, (unsigned long long)as.merges,
                     (unsigned long long)as.refreshes, (unsigned long long)as.adhoc,
                     (unsigned long long)ds.submitted);
    metric(b, "qilin_submission_failures_total", "counter",
           "Submissions refused by the store's rules (overlaps, conflicts) or failed.");
    ql_api_sb_printf(b,
                     "qilin_submission_failures_total{source=\"api\"} %llu\n"
                     "qilin_submission_failures_total{source=\"dispatcher\"} %llu\n",
                     (unsigned long long)as.submit_failures,
                     (unsigned long long)ds.submit_failures);
    metric_u64(b, "qilin_job_actions_total", "counter", "Job actions applied through the API.",
               as.actions);
    metric(b, "qilin_jobs_deleted_total", "counter",
           "Final jobs deleted with their steps, outputs and logs: through the API (DELETE "
           "/jobs), and by retention past "
           "kylin.garbage.storage.executable-survival-time-threshold.");
    ql_api_sb_printf(b,
                     "qilin_jobs_deleted_total{source=\"api\"} %llu\n"
                     "qilin_jobs_deleted_total{source=\"retention\"} %llu\n",
                     (unsigned long long)as.jobs_deleted,
                     (unsigned long long)ql_node_retention_removed(api->node));
}

static void write_engine(ql_api_t *api, ql_api_sb_t *b) {
    ql_sched_t *s = ql_node_sched(api->node);
    ql_sched_stats_t ss = {0};
    if (s)
        ql_sched_get_stats(s, &ss);
    metric_u64(b, "qilin_scheduler_master", "gauge",
               "1 when this server holds the job engine lock and schedules.",
               ql_node_is_master(api->node) ? 1 : 0);
    metric_u64(b, "qilin_scheduler_running_jobs", "gauge", "Jobs running on this server now.",
               ss.running);
    metric_u64(b, "qilin_scheduler_jobs_picked_total", "counter", "Jobs started by this server.",
               ss.picked);
    metric_u64(b, "qilin_scheduler_steps_run_total", "counter",
               "Step tries started by this server.", ss.steps_run);

    ql_writer_stats_t ws;
    ql_writer_get_stats(ql_node_writer(api->node), &ws);
    metric_u64(b, "qilin_writer_commits_total", "counter",
               "Write transactions committed (each one fsync, shared by its batch).", ws.batches);
    metric_u64(b, "qilin_writer_mutations_total", "counter", "Mutations applied by the writer.",
               ws.mutations);
    metric_u64(b, "qilin_writer_mutations_failed_total", "counter", "Mutations that failed.",
               ws.failed);
    metric_u64(b, "qilin_writer_max_batch", "gauge", "Largest group commit so far (mutations).",
               ws.max_batch);

    ql_store_stat_t st;
    if (ql_store_stat(ql_node_store(api->node), &st) == 0) {
        metric_u64(b, "qilin_store_map_size_bytes", "gauge", "The store's map size limit.",
                   st.map_size);
        metric_u64(b, "qilin_store_used_bytes", "gauge", "Pages of the store in use.",
                   st.used_bytes);
        metric_u64(b, "qilin_store_file_bytes", "gauge", "Size of the store's data file.",
                   st.file_bytes);
    }
    ql_node_space_t sp;
    if (ql_node_space_measure(ql_node_store(api->node), &sp) == 0) {
        metric(b, "qilin_store_map_used_ratio", "gauge",
               "Pages of the store in use over qilin.storage.map-size (0 without a map).");
        ql_api_sb_printf(b, "qilin_store_map_used_ratio %.4f\n", sp.map_ratio);
        metric_u64(b, "qilin_store_disk_free_bytes", "gauge",
                   "Free space of the data directory's file system.", sp.disk_free);
        metric(b, "qilin_store_space_warning", "gauge",
               "1 when the store passed 80% of qilin.storage.map-size (map) or its disk is nearly "
               "full (disk: under 5% or 1 GiB free).");
        ql_api_sb_printf(b,
                         "qilin_store_space_warning{kind=\"map\"} %d\n"
                         "qilin_store_space_warning{kind=\"disk\"} %d\n",
                         sp.map_warning, sp.disk_warning);
    }
}

static void write_http(ql_api_t *api, ql_api_sb_t *b) {
    metric(b, "qilin_api_requests_total", "counter", "HTTP responses by route and status.");
    ql_http_server_foreach_stat(api->server, stat_cb, b);
    ql_http_counters_t hc;
    ql_http_server_counters(api->server, &hc);
    metric_u64(b, "qilin_http_connections_accepted_total", "counter", "Connections accepted.",
               hc.accepted);
    metric_u64(b, "qilin_http_connections_rejected_total", "counter",
               "Connections refused (qilin.http.max-connections).", hc.rejected);
    metric_u64(b, "qilin_http_connections_rejected_address_total", "counter",
               "Connections refused (qilin.http.max-connections-per-address).",
               hc.rejected_address);
    metric_u64(b, "qilin_http_connections_evicted_total", "counter",
               "Idle unauthenticated connections closed to make room for a new one.", hc.evicted);
    metric_u64(b, "qilin_http_connections_probation_closed_total", "counter",
               "Connections in the reserved slots closed after an unauthenticated request.",
               hc.probation_closed);
    metric_u64(b, "qilin_http_connections_active", "gauge", "Connections open now.", hc.active);
    metric(b, "qilin_http_timeouts_total", "counter", "Connections cut by a timeout, by kind.");
    ql_api_sb_printf(b,
                     "qilin_http_timeouts_total{kind=\"request\"} %llu\n"
                     "qilin_http_timeouts_total{kind=\"idle\"} %llu\n"
                     "qilin_http_timeouts_total{kind=\"send\"} %llu\n"
                     "qilin_http_timeouts_total{kind=\"first_request\"} %llu\n",
                     (unsigned long long)hc.timeouts_request, (unsigned long long)hc.timeouts_idle,
                     (unsigned long long)hc.timeouts_send, (unsigned long long)hc.timeouts_first);
    if (api->auth) {
        ql_auth_stats_t as;
        ql_auth_stats(api->auth, &as);
        metric_u64(b, "qilin_auth_verifications_total", "counter",
                   "Password hash verifications run (in the threadpool).", as.verifications);
        metric_u64(b, "qilin_auth_refreshes_total", "counter",
                   "Of them, cached credentials verified again before they expire.", as.refreshes);
        metric_u64(b, "qilin_auth_cache_hits_total", "counter",
                   "Requests authenticated from the credentials cache.", as.cache_hits);
        metric_u64(b, "qilin_auth_failures_total", "counter", "Failed authentications.",
                   as.failures);
        metric_u64(b, "qilin_auth_rate_limited_total", "counter",
                   "Attempts refused because of an address's recent failures.", as.rate_limited);
    }
}

static void h_metrics(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (api->closing) {
        ql_api_fail(req, QL_ESHUTDOWN, "the server is shutting down");
        return;
    }
    ql_api_sb_t b = {0};
    metric(&b, "qilin_info", "gauge", "Version and mode of this server.");
    ql_api_sb_printf(&b, "qilin_info{version=\"%s\",mode=\"%s\"} 1\n", QL_VERSION, api->mode);
    write_jobs(api, &b);
    write_dispatcher(api, &b);
    write_engine(api, &b);
    write_http(api, &b);
    if (b.failed) {
        ql_api_sb_free(&b);
        ql_api_fail(req, UV_ENOMEM, "out of memory");
        return;
    }
    ql_http_respond(req, 200, PROM_TYPE, b.p, b.len);
    ql_api_sb_free(&b);
}

int ql_api_routes_status(ql_api_t *api) {
    int rc = ql_http_router_add(api->router, "GET", "/healthz", "healthz", 0, h_healthz, api);
    if (rc)
        return rc;
    unsigned flags =
        ql_config_get_bool(api->cfg, "qilin.metrics.require-auth") ? QL_HTTP_ROUTE_AUTH : 0;
    return ql_http_router_add(api->router, "GET", "/metrics", "metrics", flags, h_metrics, api);
}
