/*
 * Internals of the REST API shared by api/api*.c (not public). Everything runs on the loop
 * thread (see ql_api.h) except the mutation functions (ql_write_fn), which run on the writer
 * thread and touch nothing but their transaction and their own context.
 */
#ifndef QL_API_INT_H
#define QL_API_INT_H

#include "api/api.h"
#include "scheduler/ql_dispatch_time.h"
#include "scheduler/ql_submission.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* The names a request's Host header may give (api_gate.c). */
typedef struct ql_api_hosts {
    char **names; /* owned; compared ignoring case, IP literals by address */
    size_t n;
    bool any_ip; /* listening on every address: any IP literal is this server */
} ql_api_hosts_t;

struct ql_api {
    uv_loop_t *loop;
    ql_node_t *node;
    const ql_config_t *cfg;
    ql_log_t *log;
    ql_auth_t *auth;
    ql_http_router_t *router;
    ql_http_server_t *server;
    bool closing;
    bool listening;
    bool writes_allowed;  /* kylin.server.mode has all or job */
    char mode[64];        /* kylin.server.mode as configured, for messages */
    ql_api_hosts_t hosts; /* Host values accepted (listen address, allowed-hosts) */
    bool adhoc_commands;  /* qilin.adhoc.allow-commands: ad-hoc jobs may give shell steps */
    int64_t page_size_max;
    /* qilin.server.id: a step another server ran has its full log there (GET .../output) */
    char server_id[QL_STEP_SERVER_ID_MAX + 1];
    void (*close_done)(void *arg);
    void *close_arg;
    bool server_closed;
    unsigned works; /* threadpool work items in flight (scans); close waits for them */
    /* <data>/servers/server-<pid>.json, locked while this server lives (api_presence.c) */
    char presence_path[4200];
    int presence_fd;
    ql_api_stats_t stats;
};

/* ---- responses ---------------------------------------------------------------------- */

/* The HTTP status for a Qilin or libuv error code (docs/errors.md). */
int ql_api_http_status(int code);

/* Answers 200 with {"code":"000","data":DATA,"msg":MSG}; takes the reference on data (NULL is
 * JSON null); msg may be NULL (""). Consumes req. */
void ql_api_ok(ql_http_req_t *req, json_t *data, const char *msg);
/* Answers 307 Temporary Redirect to location (an absolute URL, borrowed) with the success
 * envelope, data null and msg saying why. Consumes req. */
void ql_api_redirect(ql_http_req_t *req, const char *location, const char *msg);
/* Answers the error envelope with the status for code. Consumes req. */
void ql_api_fail(ql_http_req_t *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with err's code and message (code used when err has none). */
void ql_api_fail_err(ql_http_req_t *req, int code, const ql_err_t *err);

/* ---- request gates ------------------------------------------------------------------ */

enum {
    API_READ = 0,
    API_WRITE = 1, /* refused with 503 on a query-only server */
};

/* Checks what every /kylin/api handler checks first: the API is not closing, the Accept
 * header allows JSON, and for writes the server's mode. Answers (consuming req) and returns
 * false when the request must stop here. */
bool ql_api_begin(ql_api_t *api, ql_http_req_t *req, unsigned flags);

/* A request body: len bytes at p, borrowed from the request (valid until it is answered). */
typedef struct ql_api_body {
    const char *p;
    size_t len;
} ql_api_body_t;
/* ql_api_begin for a write, and its body to *body. Returns false after answering, like
 * ql_api_begin. */
bool ql_api_begin_write(ql_api_t *api, ql_http_req_t *req, ql_api_body_t *body);
/* ql_api_begin for a read, then ql_api_read_txn: the transaction (the caller aborts it), or
 * NULL after answering. */
ql_txn_t *ql_api_begin_read(ql_api_t *api, ql_http_req_t *req);
/* After a body parser (ql_api_parse_*) returned rc: when rc fails, releases *root, answers 400
 * with err and returns true; else returns false and the caller keeps *root. */
bool ql_api_body_refused(ql_http_req_t *req, int rc, json_t **root, const ql_err_t *err);

/* ---- the gate in front of the router (api_gate.c) ---------------------------------- */

/* Fills h (caller's; ql_api_hosts_free) with the Host names a server listening on listen_host
 * (borrowed; no brackets) accepts, plus the n_extra names at extra (borrowed, copied): the
 * listen host itself; localhost, 127.0.0.1 and ::1 too when it is loopback or a wildcard; any
 * IP literal when it is a wildcard (0.0.0.0, ::). Returns 0 or UV_ENOMEM. */
int ql_api_hosts_init(ql_api_hosts_t *h, const char *listen_host, const char *const *extra,
                      size_t n_extra);
void ql_api_hosts_free(ql_api_hosts_t *h);
/* Pure decisions: whether a Host header value ("name[:port]", "[v6][:port]") names this server;
 * whether a write's Content-Type (NULL: none) is JSON or YAML; whether an Origin header (NULL:
 * none, which passes) is the Host the request was sent to. */
bool ql_api_host_allowed(const ql_api_hosts_t *h, const char *host_header);
bool ql_api_write_type_ok(const char *content_type);
bool ql_api_origin_ok(const char *origin, const char *host_header);
/* The HTTP server's handler (arg: the ql_api_t): applies the checks above, answering 400
 * (HTTP/1.1 without Host), 421 (a foreign Host), 415 (a write not in JSON or YAML) or 403 (a
 * write from a foreign Origin), and hands every other request to the router. */
void ql_api_gate_handle(ql_http_req_t *req, void *arg);

/* True when an Accept header value (NULL: none) allows a JSON answer. Pure. */
bool ql_api_accept_ok(const char *accept);

/* Queues a mutation for req: fn(txn, ctx) on the writer thread, done(ctx, ...) on the loop.
 * On failure the request is answered (503 while shutting down) and false is returned: the
 * caller still owns ctx and frees it. */
bool ql_api_submit(ql_api_t *api, ql_http_req_t *req, ql_write_fn fn, void *ctx,
                   ql_write_done_cb done);

/* Logs a committed change (INFO): what, the request's method and path and the user. */
void ql_api_log_change(ql_api_t *api, ql_http_req_t *req, const char *what);
/* The answer of a write whose data is "" (Kylin's for updates and deletes): the error when
 * status fails, else the change logged as `what` and the empty success envelope. */
void ql_api_answer_change(ql_api_t *api, ql_http_req_t *req, int status, const ql_err_t *err,
                          const char *what);
/* A submission service's failed answer: answers op's request with the error (counted as a
 * submission failure when the store's rules refused the write) and returns true; returns false
 * for a success, which the caller answers. */
bool ql_api_submission_failed(ql_api_t *api, ql_http_req_t *req, const ql_submission_result_t *res);

/* ---- per-request operations ----------------------------------------------------------
 * A write handler keeps what its mutation and its done callback need in an operation it
 * allocates, hands to ql_api_submit (or the scheduler) and frees once the request is answered.
 * Every operation struct starts with this head. */
typedef struct ql_api_op {
    ql_api_t *api;
    ql_http_req_t *req;         /* answered once, by whoever finishes the operation */
    int64_t now;                /* ql_api_now() when the request was taken */
    char user[QL_USER_MAX + 1]; /* the request's user, ADMIN when it has none (a submitter) */
} ql_api_op_t;

/* Allocates size zeroed bytes (the caller's operation struct, whose first member is a
 * ql_api_op_t) and fills in the head. Returns it, owned by the caller (free()); NULL after
 * answering 500 "out of memory" (req consumed). */
void *ql_api_op_new(ql_api_t *api, ql_http_req_t *req, size_t size);

/* Called on the loop when a threadpool work item of the API ended (after its answer). */
void ql_api_work_done(ql_api_t *api);

/* Opens a read transaction; on failure answers 500 and returns NULL. */
ql_txn_t *ql_api_read_txn(ql_api_t *api, ql_http_req_t *req);

int64_t ql_api_now(ql_api_t *api);

/* ---- paging ------------------------------------------------------------------------- */

typedef struct ql_api_page {
    uint64_t offset; /* page number (page_offset) */
    uint64_t limit;  /* page_size */
} ql_api_page_t;

/* Reads page_offset (default 0) and page_size (default 10, 1..max) from the query. QL_EINVAL
 * naming the parameter. */
int ql_api_paging(ql_http_req_t *req, int64_t max, ql_api_page_t *out, ql_err_t *err);
/* The index of the first item of the page (saturating). */
uint64_t ql_api_page_first(const ql_api_page_t *p);
/* ql_api_begin for a read of a listing, then ql_api_paging into *page: false after answering
 * (400 naming the parameter when the paging is wrong). */
bool ql_api_begin_page(ql_api_t *api, ql_http_req_t *req, ql_api_page_t *page);

/* Walks a listing through its page: ql_api_pager_take counts one more item and tells whether
 * it falls on the page; ql_api_pager_full tells whether the page is complete (a listing whose
 * total is known can stop there). */
typedef struct ql_api_pager {
    uint64_t first, limit, seen;
} ql_api_pager_t;
ql_api_pager_t ql_api_pager(const ql_api_page_t *p);
bool ql_api_pager_take(ql_api_pager_t *p);
bool ql_api_pager_full(const ql_api_pager_t *p);

/* Whether name contains filter, ignoring case; a NULL or empty filter matches every name. */
bool ql_api_name_contains(const char *name, const char *filter);

/* A query parameter (borrowed from req), NULL when it is absent or empty. */
const char *ql_api_query_given(ql_http_req_t *req, const char *key);
/* A query parameter as a bool (true/false, 1/0), default def when absent. */
int ql_api_query_bool(ql_http_req_t *req, const char *key, bool def, bool *out, ql_err_t *err);
/* A query parameter as an integer in [min, max], def when absent. */
int ql_api_query_int(ql_http_req_t *req, const char *key, int64_t def, int64_t min, int64_t max,
                     int64_t *out, ql_err_t *err);

/* ---- JSON helpers (pure) ------------------------------------------------------------- */

typedef enum ql_api_jtype {
    AJ_STRING,  /* a string */
    AJ_BOOL,    /* true or false */
    AJ_INT,     /* an integer */
    AJ_TIME,    /* epoch ms: an integer or a string of decimal digits */
    AJ_OBJECT,  /* an object (checked by the caller) */
    AJ_STRLIST, /* an array of strings */
    AJ_SCALAR,  /* a string, number or bool (config values) */
    AJ_ANY,     /* any JSON value (Kylin's tag) */
    AJ_INTLIST, /* an array of integers */
    AJ_LISTS,   /* an array of arrays of strings (Kylin's sub_partition_values) */
    AJ_INTTEXT, /* an integer or a string of decimal digits (Kylin's priority on PUT) */
} ql_api_jtype_t;

typedef struct ql_api_field {
    const char *name; /* NULL ends a table */
    ql_api_jtype_t type;
    bool required;
} ql_api_field_t;

/* Parses a request body that must be one JSON object (duplicate keys refused). *out is a new
 * reference. QL_EINVAL saying what is wrong and where. */
int ql_api_json_parse(const char *body, size_t len, json_t **out, ql_err_t *err);
/* Checks obj's fields against the table: unknown fields (named, with the known ones), wrong
 * types, missing required fields. JSON null counts as absent. where names the object in
 * messages ("request body", "partition_desc"). */
int ql_api_json_check(const json_t *obj, const char *where, const ql_api_field_t *fields,
                      ql_err_t *err);
/* A string member (borrowed from obj), NULL when absent or null. */
const char *ql_api_json_str(const json_t *obj, const char *key);
/* A member that is present and not null. */
bool ql_api_json_has(const json_t *obj, const char *key);
/* Epoch ms from an integer or a decimal string. QL_EINVAL naming field. */
int ql_api_json_time(const json_t *v, const char *field, int64_t *out, ql_err_t *err);
/* Parses a decimal int64 ("-12", no spaces, no '+'). Returns 0 or QL_EINVAL. */
int ql_api_parse_i64(const char *s, int64_t *out);

/* A growable text buffer (for /metrics). */
typedef struct ql_api_sb {
    char *p;
    size_t len, cap;
    bool failed; /* an allocation failed: the content is incomplete */
} ql_api_sb_t;
void ql_api_sb_printf(ql_api_sb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ql_api_sb_free(ql_api_sb_t *b);

/* ---- request bodies (pure parsers; the fuzz harness calls them) ----------------------
 * Each fills out from a body and returns 0, or QL_EINVAL (400) with err naming the field.
 * Strings in out are borrowed from out->root; release with json_decref(out->root) (also set
 * on failure, may be NULL). */

/* PUT /projects/{p}/config: key -> value text (NULL value: remove the override). */
#define QL_API_MAX_CONFIG_KEYS 64
typedef struct ql_api_config_req {
    json_t *root;
    size_t n;
    const char *keys[QL_API_MAX_CONFIG_KEYS];
    char *values[QL_API_MAX_CONFIG_KEYS]; /* owned (free each); NULL removes */
} ql_api_config_req_t;

typedef struct ql_api_project_req {
    json_t *root;
    const char *name;
    const char *description; /* NULL when absent */
    /* Kylin's override_kylin_properties, checked like PUT config (config.root is NULL: the
     * keys point into root) */
    ql_api_config_req_t config;
} ql_api_project_req_t;
/* POST /projects. Release with ql_api_project_req_free (also after a failure). */
int ql_api_parse_project(const char *body, size_t len, ql_api_project_req_t *out, ql_err_t *err);
void ql_api_project_req_free(ql_api_project_req_t *r);
int ql_api_parse_config(const char *body, size_t len, ql_api_config_req_t *out, ql_err_t *err);
void ql_api_config_req_free(ql_api_config_req_t *r);

/* PUT /projects/{p}/segment_config: Qilin's auto_segment_build_enabled (absent: unchanged)
 * and Kylin's auto-merge, volatile-range, retention-range and empty-segment fields, checked
 * and ignored (docs/rest.md, Kylin's optional fields). */
typedef struct ql_api_project_segcfg_req {
    json_t *root;
    bool has_enabled;
    bool enabled;
} ql_api_project_segcfg_req_t;
int ql_api_parse_project_segcfg(const char *body, size_t len, ql_api_project_segcfg_req_t *out,
                                ql_err_t *err);

typedef struct ql_api_model_req {
    json_t *root;
    ql_model_t model; /* filled: name, project, status, type, partition, multi-partition,
                         job_template; release with ql_model_free */
} ql_api_model_req_t;
int ql_api_parse_model(const char *body, size_t len, ql_api_model_req_t *out, ql_err_t *err);

/* PUT /models/{m}/segment_config: the fields given (the others keep their stored values). */
typedef struct ql_api_model_segcfg_req {
    json_t *root;
    const char *project;
    bool has_enabled, enabled;
    const char *trigger_time, *start_time, *end_time; /* NULL: not given */
    bool has_offset;
    int64_t offset_days;
} ql_api_model_segcfg_req_t;
int ql_api_parse_model_segcfg(const char *body, size_t len, ql_api_model_segcfg_req_t *out,
                              ql_err_t *err);

typedef struct ql_api_model_status_req {
    json_t *root;
    const char *project;
    ql_model_status_t status;
} ql_api_model_status_req_t;
int ql_api_parse_model_status(const char *body, size_t len, ql_api_model_status_req_t *out,
                              ql_err_t *err);

/* What a build, merge or refresh keeps of Kylin's optional fields: its priority, and the
 * yarn_queue and tag kept with the job ("": not given; the tag as compact JSON text). */
typedef struct ql_api_job_extras {
    int priority;
    char yarn_queue[QL_JOB_QUEUE_MAX + 1];
    char tag[QL_JOB_TAG_MAX + 1];
} ql_api_job_extras_t;

typedef struct ql_api_build_req {
    json_t *root;
    const char *project;
    bool has_range; /* both start and end given */
    int64_t start, end;
    int priority;
    ql_api_job_extras_t x; /* x.priority == priority */
} ql_api_build_req_t;
int ql_api_parse_build(const char *body, size_t len, ql_api_build_req_t *out, ql_err_t *err);

#define QL_API_MAX_IDS 1000
typedef struct ql_api_ids_req {
    json_t *root;
    const char *project;
    bool merge;         /* PUT segments: MERGE (true) or REFRESH */
    ql_action_t action; /* PUT jobs/status */
    size_t n;
    ql_id_t *ids; /* owned (free) */
    /* PUT segments: the segments by name instead (Kylin's names; then n is 0 until the handler
     * resolves them): an owned array of strings borrowed from root */
    const char **names;
    size_t n_names;
    ql_api_job_extras_t x; /* PUT segments */
    /* PUT jobs/status: the job states the statuses name (0: none given). With no job_ids the
     * action applies to every job of the project in these states. */
    uint32_t status_mask;
} ql_api_ids_req_t;
/* PUT /models/{m}/segments: {"project","type":"MERGE"|"REFRESH" (default REFRESH),"ids":[...]
 * or "names":[...], and Kylin's optional fields} */
int ql_api_parse_segments_put(const char *body, size_t len, ql_api_ids_req_t *out, ql_err_t *err);
/* PUT /jobs/status: {"project","job_ids":[...],"statuses":[...],"action"}: job_ids, or
 * statuses with a project */
int ql_api_parse_job_status(const char *body, size_t len, ql_api_ids_req_t *out, ql_err_t *err);
void ql_api_ids_req_free(ql_api_ids_req_t *r);

/* ---- the streaming JSON writer (api_jw.c) -------------------------------------------
 * Appends JSON text to a buffer: separators are placed by the writer (a key, then its value;
 * array items one after another). Allocation failures are remembered and reported when the
 * answer is sent. */

typedef struct ql_api_jw {
    ql_api_sb_t b;
    uint64_t nonempty; /* bit d-1: the container at depth d has an item */
    int depth;
    bool after_key;
} ql_api_jw_t;

void ql_api_jw_init(ql_api_jw_t *w);
void ql_api_jw_free(ql_api_jw_t *w);
void ql_api_jw_open(ql_api_jw_t *w, char c); /* '{' or '[' */
void ql_api_jw_close(ql_api_jw_t *w, char c);
void ql_api_jw_key(ql_api_jw_t *w, const char *key);      /* key: a constant without escapes */
void ql_api_jw_key_text(ql_api_jw_t *w, const char *key); /* any text, escaped */
void ql_api_jw_keyn(ql_api_jw_t *w, const char *key, size_t n);
/* A literal key: its length at compile time. */
#define QL_API_JW_KEY(w, lit) ql_api_jw_keyn((w), "" lit, sizeof(lit) - 1)
void ql_api_jw_str(ql_api_jw_t *w, const char *s); /* NULL writes null */
void ql_api_jw_strn(ql_api_jw_t *w, const char *s, size_t n);
void ql_api_jw_int(ql_api_jw_t *w, int64_t v);
void ql_api_jw_bool(ql_api_jw_t *w, bool v);
void ql_api_jw_null(ql_api_jw_t *w);
void ql_api_jw_id(ql_api_jw_t *w, const ql_id_t *id); /* "" for the zero id */
/* A value already in JSON text (n bytes; the caller vouches that it is valid JSON). */
void ql_api_jw_raw(ql_api_jw_t *w, const char *json, size_t n);
/* Starts an answer: initialises w and writes {"code":"000","data": ; write the data next. */
void ql_api_jw_envelope(ql_api_jw_t *w);
/* Ends the envelope with msg (NULL: ""), answers 200 (500 if the buffer failed), frees w.
 * Consumes req. */
void ql_api_jw_respond(ql_http_req_t *req, ql_api_jw_t *w, const char *msg);
/* {"value":[ ... and ],"offset":N,"limit":N,"total_size":N} */
void ql_api_jw_page_open(ql_api_jw_t *w);
/* ql_api_jw_envelope, then ql_api_jw_page_open: the start of a listing's answer. */
void ql_api_jw_page_start(ql_api_jw_t *w);
void ql_api_jw_page_close(ql_api_jw_t *w, const ql_api_page_t *p, uint64_t total);

/* ---- records as JSON (api_records.c) ------------------------------------------------- */

void ql_api_jw_project(ql_api_jw_t *w, const ql_project_t *p);
void ql_api_jw_model(ql_api_jw_t *w, const ql_model_t *m);
void ql_api_jw_segment(ql_api_jw_t *w, const ql_segment_t *s);
/* What a job's list item shows of its steps (Kylin's step_ratio and wait_time). */
typedef struct ql_api_job_steps {
    uint32_t done; /* steps finished well: SUCCEED, WARNING or SKIP */
    int64_t wait;  /* ms from the job's creation to its first step's start (to now while it
                      waits to start) */
} ql_api_job_steps_t;
/* Fills out for j; reads j's steps in txn only for a job that started and has not succeeded.
 * now: for a job still waiting. Returns 0 or the store's error. */
int ql_api_job_steps(ql_txn_t *txn, const ql_job_t *j, int64_t now, ql_api_job_steps_t *out);
/* now: for the duration of a running job or step. st: j's steps (ql_api_job_steps). */
void ql_api_jw_job(ql_api_jw_t *w, const ql_job_t *j, const ql_api_job_steps_t *st, int64_t now);
void ql_api_jw_step(ql_api_jw_t *w, const ql_step_t *s, int64_t now);
/* A job's running time in ms: to its end, or to now while it runs, or to its last change while
 * it waits (paused, in error); 0 before it started. */
int64_t ql_api_job_duration(const ql_job_t *j, int64_t now);
json_t *ql_api_id_json(const ql_id_t *id); /* the 36-character form; "" for the zero id */
/* Kylin's segment name: yyyyMMddHHmmss_yyyyMMddHHmmss in UTC, FULL_BUILD for a full load. */
void ql_api_segment_name(int64_t start, int64_t end, char *buf, size_t cap);
/* {"jobs":[{"job_name":type,"job_id":id}, ...]} */
json_t *ql_api_jobs_answer(const char *const *types, const ql_id_t *ids, size_t n);

/* ---- lookups on the loop thread ----------------------------------------------------- */

/* The project (required: QL_EINVAL when name is NULL or empty; QL_ENOTFOUND). The rule is the
 * submission service's (ql_submission_get_project), so every handler names things alike. */
int ql_api_get_project(ql_txn_t *txn, const char *name, ql_project_t *out, ql_err_t *err);
/* The model named name (or with that id) in project, decoded with flags (QL_DECODE_*).
 * QL_EINVAL without a project, QL_ENOTFOUND naming the project or model (ql_submission_get_model).
 * Also usable in a mutation on the writer thread (it touches only txn). */
int ql_api_get_model(ql_txn_t *txn, const char *project, const char *name, unsigned flags,
                     ql_model_t *out, ql_err_t *err);

/* ---- route registration (one per resource file) ---------------------------------------- */

/* One authenticated route: method, pattern (with QL_API_BASE), route name, handler. */
typedef struct ql_api_route {
    const char *method, *pattern, *name;
    ql_http_handler_cb fn;
} ql_api_route_t;
/* Adds the n routes (borrowed, constants) to api's router with QL_HTTP_ROUTE_AUTH and api as
 * the handlers' arg. Returns 0 or the first error of ql_http_router_add. */
int ql_api_add_routes(ql_api_t *api, const ql_api_route_t *routes, size_t n);

int ql_api_routes_projects(ql_api_t *api);
int ql_api_routes_models(ql_api_t *api);
int ql_api_routes_segments(ql_api_t *api);
int ql_api_routes_jobs(ql_api_t *api);
int ql_api_routes_job_actions(ql_api_t *api);
int ql_api_routes_job_delete(ql_api_t *api);
int ql_api_routes_lifecycle(ql_api_t *api);
int ql_api_routes_lifecycle(ql_api_t *api);
int ql_api_routes_adhoc(ql_api_t *api);
int ql_api_routes_status(ql_api_t *api);
int ql_api_routes_ui(ql_api_t *api);
int ql_api_routes_console(ql_api_t *api);

/* ---- the web console (api_ui.c) ------------------------------------------------------- */

/* The Content-Security-Policy of every /ui answer. */
extern const char ql_api_ui_csp[];
/* The next instant at which model's automatic build triggers in zone (an IANA name) after
 * now, epoch ms; 0 when it has no enabled schedule (or the zone cannot be loaded). */
int64_t ql_api_next_trigger(const ql_model_t *m, const char *zone, int64_t now);
/* The time zone of project p (its kylin.web.timezone, else the server's, else UTC) into buf. */
void ql_api_project_zone(ql_api_t *api, const ql_project_t *p, char *buf, size_t cap);

/* Announces this server (listening on address, "host:port") in the data directory's servers/
 * folder; ql_api_presence_stop takes it back. Failures are logged only. */
void ql_api_presence_start(ql_api_t *api, const char *address);
void ql_api_presence_stop(ql_api_t *api);
/* The servers announced whose process lives (in the data directory; on a store shared across
 * hosts, in the store, read in txn), with their role (master, standby, query) and whether each
 * is this one: a new array. */
json_t *ql_api_presence_list(ql_api_t *api, ql_txn_t *txn);

/* Whether an If-None-Match value (NULL: none) names etag (with its quotes) or is "*". Pure. */
bool ql_api_etag_matches(const char *if_none_match, const char *etag);

#define QL_API_BASE "/kylin/api"

#endif
