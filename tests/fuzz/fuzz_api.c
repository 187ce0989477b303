/*
 * libFuzzer harness for the REST API's request handling that needs no store: the router with
 * every API route registered, and the JSON body validators of the write endpoints
 * (api/api_requests.c, api/api_json.c), plus the Accept header check.
 *
 * Input: "METHOD PATH\n" then the body. The path is matched against the API's routes; the body
 * goes to the validator of the matched route, or to every validator when nothing matched.
 * Besides crashes and sanitizer reports it checks the contract handlers rely on: a refusal
 * always carries a negative code and a message; an accepted body satisfies the rules the
 * handlers then assume (start < end, priority 0..4, ids present and unique, ...).
 *
 * Build with -DQL_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt); seeds in tests/fuzz/corpus/api.
 */
#include "api/api_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static ql_api_t *fuzz_api;

static void check_refusal(int rc, const ql_err_t *err) {
    if (rc == 0)
        return;
    if (rc > 0 || err->code != rc || (rc != UV_ENOMEM && err->msg[0] == '\0'))
        __builtin_trap();
}

static void check_ids(const ql_api_ids_req_t *r) {
    if (r->n == 0 || r->n > QL_API_MAX_IDS || !r->ids)
        __builtin_trap();
    for (size_t i = 0; i < r->n; i++)
        for (size_t k = 0; k < i; k++)
            if (ql_id_eq(&r->ids[i], &r->ids[k]))
                __builtin_trap();
}

/* PUT segments by names instead of ids: no ids, every name a string, none twice. */
static void check_names(const ql_api_ids_req_t *r) {
    if (r->n != 0 || r->n_names == 0 || r->n_names > QL_API_MAX_IDS || !r->names)
        __builtin_trap();
    for (size_t i = 0; i < r->n_names; i++) {
        if (!r->names[i])
            __builtin_trap();
        for (size_t k = 0; k < i; k++)
            if (!strcmp(r->names[i], r->names[k]))
                __builtin_trap();
    }
}

static void run_parser(const char *route, const char *body, size_t len) {
    ql_err_t err = {0};
    int rc;
    if (!route || !strcmp(route, "projects.create")) {
        ql_api_project_req_t r;
        rc = ql_api_parse_project(body, len, &r, &err);
        check_refusal(rc, &err);
        if (!rc && ql_meta_check_name("name", r.name, NULL))
            __builtin_trap();
        ql_api_project_req_free(&r);
    }
    if (!route || !strcmp(route, "projects.config")) {
        ql_api_config_req_t r;
        rc = ql_api_parse_config(body, len, &r, &err);
        check_refusal(rc, &err);
        if (!rc && (r.n == 0 || r.n > QL_API_MAX_CONFIG_KEYS))
            __builtin_trap();
        ql_api_config_req_free(&r);
    }
    if (!route || !strcmp(route, "projects.segment_config")) {
        ql_api_project_segcfg_req_t r;
        check_refusal(ql_api_parse_project_segcfg(body, len, &r, &err), &err);
        json_decref(r.root);
    }
    if (!route || !strcmp(route, "models.create")) {
        ql_api_model_req_t r;
        rc = ql_api_parse_model(body, len, &r, &err);
        check_refusal(rc, &err);
        if (!rc && (!r.model.name[0] || !r.model.project[0] ||
                    (r.model.partitioned &&
                     (!r.model.partition_column[0] || !r.model.partition_format[0]))))
            __builtin_trap();
        ql_model_free(&r.model);
        json_decref(r.root);
    }
    if (!route || !strcmp(route, "models.segment_config")) {
        ql_api_model_segcfg_req_t r;
        rc = ql_api_parse_model_segcfg(body, len, &r, &err);
        check_refusal(rc, &err);
        if (!rc && (!r.project || !r.project[0] ||
                    (r.has_offset &&
                     (r.offset_days < 1 || r.offset_days > QL_AUTO_BUILD_MAX_OFFSET_DAYS))))
            __builtin_trap();
        json_decref(r.root);
    }
    if (!route || !strcmp(route, "models.status")) {
        ql_api_model_status_req_t r;
        check_refusal(ql_api_parse_model_status(body, len, &r, &err), &err);
        json_decref(r.root);
    }
    if (!route || !strcmp(route, "segments.build")) {
        ql_api_build_req_t r;
        rc = ql_api_parse_build(body, len, &r, &err);
        check_refusal(rc, &err);
        if (!rc && ((r.has_range && (r.start >= r.end || r.start < 0 || r.end > QL_TIME_MAX)) ||
                    r.priority < QL_PRIORITY_MIN || r.priority > QL_PRIORITY_MAX || !r.project ||
                    !r.project[0] || strlen(r.project) > QL_NAME_MAX))
            __builtin_trap();
        json_decref(r.root);
    }
    if (!route || !strcmp(route, "segments.merge_refresh")) {
        ql_api_ids_req_t r;
        rc = ql_api_parse_segments_put(body, len, &r, &err);
        check_refusal(rc, &err);
        if (!rc) {
            if (r.n_names)
                check_names(&r);
            else
                check_ids(&r);
            if (r.merge && r.n + r.n_names < 2)
                __builtin_trap();
        }
        ql_api_ids_req_free(&r);
    }
    if (!route || !strcmp(route, "jobs.status")) {
        ql_api_ids_req_t r;
        rc = ql_api_parse_job_status(body, len, &r, &err);
        check_refusal(rc, &err);
        /* Accepted: job ids, or (Kylin's form for many jobs) statuses with a project. */
        if (!rc && r.n)
            check_ids(&r);
        else if (!rc && (!r.status_mask || !r.project || !r.project[0]))
            __builtin_trap();
        ql_api_ids_req_free(&r);
    }
    if (!route || !strcmp(route, "jobs.submit")) {
        json_t *root;
        check_refusal(ql_api_json_parse(body, len, &root, &err), &err);
        json_decref(root);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fuzz_api) {
        /* The routes need only the router and the configuration (for /metrics' auth flag). */
        fuzz_api = calloc(1, sizeof *fuzz_api);
        ql_config_t *cfg;
        if (!fuzz_api || ql_config_new(&cfg) || ql_http_router_new(&fuzz_api->router))
            __builtin_trap();
        fuzz_api->cfg = cfg;
        if (ql_api_routes_projects(fuzz_api) || ql_api_routes_models(fuzz_api) ||
            ql_api_routes_segments(fuzz_api) || ql_api_routes_jobs(fuzz_api) ||
            ql_api_routes_job_actions(fuzz_api) || ql_api_routes_adhoc(fuzz_api) ||
            ql_api_routes_status(fuzz_api))
            __builtin_trap();
    }
    /* NUL-terminated copies: the request line and the body, as the HTTP layer hands them. */
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *nl = memchr(buf, '\n', size);
    const char *body = nl ? nl + 1 : buf;
    size_t body_len = nl ? size - (size_t)(nl + 1 - buf) : size;
    const char *route = NULL;
    if (nl) {
        *nl = '\0';
        char *sp = strchr(buf, ' ');
        if (sp) {
            *sp = '\0';
            ql_http_match_t m;
            if (ql_http_router_match(fuzz_api->router, buf, sp + 1, &m) == 0) {
                route = m.name;
                if (!m.handler || m.n_params > QL_HTTP_MAX_PARAMS)
                    __builtin_trap();
            } else if (strlen(m.allow) >= sizeof m.allow) {
                __builtin_trap();
            }
        }
    }
    run_parser(route, body, body_len);
    /* The Accept check runs on header values; the body's first line will do as one. */
    (void)ql_api_accept_ok(body);
    int64_t v;
    (void)ql_api_parse_i64(body, &v);
    free(buf);
    return 0;
}
