/*
 * The read endpoints the web console needs beyond Kylin's (docs/rest.md, "Qilin extensions"):
 *
 *   GET /user/authentication   who the credentials belong to, their role, whether this server
 *                              takes their writes (Kylin's path and fields, plus Qilin's)
 *   GET /cluster               this server, the master as this server sees it, the fencing
 *                              epoch, the store's size against its limit, jobs by state
 *   GET /changes               a token that changes whenever what a console page shows may
 *                              have changed; the console polls it and reloads a page's data
 *                              only when it moved (docs/user-guide.md, "Web console")
 *
 * All three are reads on the loop thread: counters, one index entry, in-memory state.
 */
#include "api_int.h"
#include "scheduler/ql_submit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- GET /user/authentication ---- */

static void h_whoami(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    if (!ql_api_begin(api, req, API_READ))
        return;
    ql_auth_role_t role = ql_http_req_role(req);
    const char *user = ql_http_req_user(req);
    json_t *auths = json_array();
    /* Kylin's authorities: ROLE_ADMIN for administrators; every user is in ALL_USERS. */
    if (role == QL_AUTH_ROLE_ADMIN)
        json_array_append_new(auths, json_pack("{s:s}", "authority", "ROLE_ADMIN"));
    json_array_append_new(auths, json_pack("{s:s}", "authority", "ALL_USERS"));
    json_t *d =
        json_pack("{s:s, s:s, s:o, s:b, s:s}", "username", user ? user : "", "role",
                  ql_auth_role_name(role), "authorities", auths, "writable",
                  role == QL_AUTH_ROLE_ADMIN && api->writes_allowed, "server_mode", api->mode);
    ql_api_ok(req, d, NULL);
}

/* ---- GET /cluster ---- */

static json_t *store_json(ql_api_t *api) {
    ql_store_stat_t st;
    if (ql_store_stat(ql_node_store(api->node), &st) != 0)
        return json_null();
    return json_pack("{s:s, s:I, s:I, s:I}", "backend", st.backend, "map_size",
                     (json_int_t)st.map_size, "used_bytes", (json_int_t)st.used_bytes, "file_bytes",
                     (json_int_t)st.file_bytes);
}

static json_t *jobs_json(ql_txn_t *txn) {
    json_t *o = json_object();
    for (int s = 0; s < QL_JOB_STATE_COUNT; s++) {
        uint64_t n = 0;
        if (ql_job_count(txn, NULL, 1u << s, &n) == 0)
            json_object_set_new(o, ql_state_name((ql_state_t)s), json_integer((json_int_t)n));
    }
    return o;
}

/* The id of the server servers lists as the master, "" when none is. */
static const char *master_in(json_t *servers) {
    size_t i;
    json_t *s;
    json_array_foreach(servers, i, s) {
        const char *role = json_string_value(json_object_get(s, "role"));
        const char *id = json_string_value(json_object_get(s, "id"));
        if (role && id && !strcmp(role, "master"))
            return id;
    }
    return "";
}

static void h_cluster(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    ql_txn_t *txn = ql_api_begin_read(api, req);
    if (!txn)
        return;
    uint64_t epoch = 0;
    int rc = ql_fence_current(txn, &epoch);
    json_t *jobs = rc ? NULL : jobs_json(txn);
    json_t *servers = rc ? NULL : ql_api_presence_list(api, txn);
    ql_txn_abort(txn);
    if (rc) {
        ql_api_fail(req, rc, "cannot read the fencing epoch: %s", ql_strerror(rc));
        return;
    }
    bool master = ql_node_is_master(api->node);
    const char *holder = ql_node_lock_holder(api->node);
    /* Scheduler 2: a job server that is not the election's leader runs jobs too. */
    const char *role = !api->writes_allowed           ? "query"
                       : master                       ? "master"
                       : ql_node_runs_jobs(api->node) ? "job-server"
                                                      : "standby";
    ql_dispatcher_stats_t ds = {0};
    ql_dispatcher_t *disp = ql_node_dispatcher(api->node);
    if (disp)
        ql_dispatcher_get_stats(disp, &ds);
    ql_sched_stats_t ss = {0};
    ql_sched_t *sched = ql_node_sched(api->node);
    if (sched)
        ql_sched_get_stats(sched, &ss);
    json_t *self =
        json_pack("{s:s, s:s, s:s, s:s, s:b, s:I, s:b, s:I}", "id", api->server_id, "mode",
                  api->mode, "role", role, "version", QL_VERSION, "dispatcher_active", disp != NULL,
                  "dispatcher_scans", (json_int_t)ds.scans, "scheduler_active", sched != NULL,
                  "running_jobs", (json_int_t)ss.running);
    /* The master as this server knows it: itself, or the lock's holder line (a standby reads
     * it every second); a query server never looks at the lock. */
    if (!master && !holder[0]) /* a query server: the list may know the master */
        holder = master_in(servers);
    json_t *m =
        json_pack("{s:b, s:s}", "this_server", master, "holder", master ? api->server_id : holder);
    json_t *d =
        json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:I}", "server", self, "master", m, "servers",
                  servers, "fencing_epoch", (json_int_t)epoch, "store", store_json(api), "jobs",
                  jobs ? jobs : json_object(), "now", (json_int_t)ql_api_now(api));
    ql_api_ok(req, d, NULL);
}

/* ---- GET /changes ---- */

typedef struct change_token {
    uint64_t h; /* FNV-1a over every value below */
} change_token_t;

static void mix(change_token_t *t, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        t->h ^= (v >> (i * 8)) & 0xff;
        t->h *= 1099511628211ULL;
    }
}

typedef struct newest {
    ql_id_t id;
    int64_t modify_time;
    bool found;
} newest_t;

static int newest_cb(const ql_id_t *id, ql_state_t state, int64_t modify_time, void *arg) {
    (void)state;
    newest_t *n = arg;
    n->id = *id;
    n->modify_time = modify_time;
    n->found = true;
    return 1; /* the first is the newest: stop */
}

/* What a console page shows changes with: projects and models (the metadata generation), jobs
 * of the scope by state (counters), the most recently modified job of the scope (a transition
 * that keeps the counts), and the segments of the model when one is named. A step's progress
 * inside a running job moves none of these: the console reloads the steps of a job it shows
 * while the job is live. */
static int changes_read(ql_txn_t *txn, const char *project, const char *model, json_t *d,
                        ql_err_t *err) {
    change_token_t t = {.h = 14695981039346656037ULL};
    uint64_t gen = 0;
    int rc = ql_store_metadata_generation(txn, &gen);
    if (rc && rc != QL_ENOTFOUND)
        return ql_err_set(err, rc, "cannot read the metadata generation: %s", ql_strerror(rc));
    mix(&t, gen);
    json_t *jobs = json_object();
    json_object_set_new(d, "jobs", jobs);
    for (int s = 0; s < QL_JOB_STATE_COUNT; s++) {
        uint64_t n = 0;
        if ((rc = ql_job_count(txn, project, 1u << s, &n)))
            return ql_err_set(err, rc, "cannot count jobs: %s", ql_strerror(rc));
        mix(&t, n);
        json_object_set_new(jobs, ql_state_name((ql_state_t)s), json_integer((json_int_t)n));
    }
    newest_t nw = {0};
    rc = ql_job_foreach_recent(txn, project, false, newest_cb, &nw);
    if (rc < 0)
        return ql_err_set(err, rc, "cannot read the newest job: %s", ql_strerror(rc));
    for (size_t i = 0; i < sizeof nw.id.b; i++)
        mix(&t, nw.id.b[i]);
    mix(&t, (uint64_t)nw.modify_time);
    json_object_set_new(d, "last_modified", json_integer(nw.found ? nw.modify_time : 0));
    if (model) {
        ql_model_t m;
        if ((rc = ql_api_get_model(txn, project, model, 0, &m, err)))
            return rc;
        uint64_t n = 0;
        rc = ql_segment_count(txn, &m.id, &n);
        ql_model_free(&m);
        if (rc)
            return ql_err_set(err, rc, "cannot count segments: %s", ql_strerror(rc));
        mix(&t, n);
        json_object_set_new(d, "segments", json_integer((json_int_t)n));
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, t.h);
    json_object_set_new(d, "metadata_generation", json_integer((json_int_t)gen));
    json_object_set_new(d, "token", json_string(hex));
    return 0;
}

static void h_changes(ql_http_req_t *req, void *arg) {
    ql_api_t *api = arg;
    const char *project = ql_api_query_given(req, "project");
    const char *model = ql_api_query_given(req, "model");
    ql_txn_t *txn = ql_api_begin_read(api, req);
    if (!txn)
        return;
    ql_err_t err = {0};
    int rc = 0;
    if (project) {
        ql_project_t p;
        if (!(rc = ql_api_get_project(txn, project, &p, &err)))
            ql_project_free(&p);
    } else if (model) {
        rc = ql_err_set(&err, QL_EINVAL, "project: required with model");
    }
    json_t *d = json_object();
    if (!rc)
        rc = changes_read(txn, project, model, d, &err);
    ql_txn_abort(txn);
    if (rc) {
        json_decref(d);
        ql_api_fail_err(req, rc, &err);
        return;
    }
    ql_api_ok(req, d, NULL);
}

/* ---- the dispatcher's decision: the project's zone and the next trigger ---- */

int64_t ql_api_next_trigger(const ql_model_t *m, const char *zone, int64_t now) {
    const ql_auto_build_t *a = &m->auto_build;
    int trig;
    if (!a->present || !a->enabled || ql_hms_parse(a->trigger_time, false, &trig) != 0)
        return 0;
    ql_tz_t *tz;
    if (ql_tz_load(zone, &tz) != 0)
        return 0;
    int64_t occ = 0, next = 0;
    ql_civil_t date, after;
    /* The latest due occurrence's date plus one day, at the trigger time: the next one. */
    if (ql_dispatch_occurrence(tz, now, trig, &occ, &date) == 0) {
        if (occ > now)
            next = occ; /* a trigger moved past now by a gap (ql_dispatch_time.h) */
        else if (ql_civil_add_days(&date, 1, &after) == 0) {
            after.hour = trig / 3600;
            after.minute = trig / 60 % 60;
            after.second = trig % 60;
            after.ms = 0;
            if (ql_tz_from_civil(tz, &after, &next) != 0)
                next = 0;
        }
    }
    ql_tz_free(tz);
    return next;
}

void ql_api_project_zone(ql_api_t *api, const ql_project_t *p, char *buf, size_t cap) {
    ql_submit_project_timezone(p, ql_config_get_str(api->cfg, "kylin.web.timezone"), buf, cap);
}

int ql_api_routes_console(ql_api_t *api) {
    static const ql_api_route_t routes[] = {
        {"GET", QL_API_BASE "/user/authentication", "user.authentication", h_whoami},
        {"GET", QL_API_BASE "/cluster", "cluster", h_cluster},
        {"GET", QL_API_BASE "/changes", "changes", h_changes},
    };
    return ql_api_add_routes(api, routes, sizeof routes / sizeof routes[0]);
}
