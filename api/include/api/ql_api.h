/*
 * Qilin's REST API (docs/design/rest-api.md): Kylin's build endpoints under /kylin/api, Qilin's
 * extensions, /healthz and /metrics, served by the HTTP server of ql_http.h over a job server's
 * engine (server/ql_node.h). docs/rest.md is the reference for clients.
 *
 * DESIGN.
 * - Threads: everything here runs on the loop thread of the node. Reads open an LMDB read
 *   transaction on the loop thread, build the answer and respond before returning. Writes are
 *   writer mutations (storage/ql_writer.h): the handler queues one, keeps its request, and
 *   answers from the mutation's done callback, i.e. only once the change is durable (persist
 *   before reply). Job actions go through the scheduler when this server schedules
 *   (ql_sched_action stops a running step's process); otherwise through the writer directly.
 * - Validation happens before anything is queued: bodies are parsed by jansson (duplicate keys
 *   refused), unknown fields and wrong types named in a 400; ranges are normalized with the
 *   model's partition format outside the writer thread (ICU, CCTZ). The rules that depend on
 *   the current state (overlaps, job conflicts, duplicate names) are checked again inside the
 *   mutation's transaction, which is what answers 409.
 * - Modes: a server whose kylin.server.mode has no `all` or `job` answers every write with 503
 *   naming its mode; reads are served in every mode.
 * - Lists that must decode every job of their scope (filters other than project and status, a
 *   sort other than last_modified) run in libuv's threadpool with their own read transaction,
 *   so a long scan never stalls the loop; their answer is sent from the after-work callback.
 * - Shutdown: ql_api_close() stops accepting and closes connections; its callback runs once no
 *   scan is in flight. Requests still waiting for the writer are answered into the void when
 *   their commit completes (the writer is drained by ql_node_stop, which must come after
 *   ql_api_close's callback). ql_api_free() only after the node has stopped.
 */
#ifndef QL_API_H
#define QL_API_H

#include "http/ql_auth.h"
#include "http/ql_http.h"
#include "server/ql_node.h"

typedef struct ql_api ql_api_t;

typedef struct ql_api_opts {
    uv_loop_t *loop; /* borrowed: the node's loop */
    ql_node_t *node; /* borrowed; must outlive the api (stop the node after ql_api_close) */
    ql_log_t *log;   /* borrowed, may be NULL */
} ql_api_opts_t;

/* Creates the API over opts->node with the node's configuration: users (qilin.server.users),
 * HTTP limits (qilin.http.*), page-size-max, metrics auth. Nothing listens yet. On success *out
 * is owned by the caller (ql_api_close, then ql_api_free). Errors name the cause in err. */
int ql_api_new(const ql_api_opts_t *opts, ql_api_t **out, ql_err_t *err);

/* Listens on hostport (borrowed; "127.0.0.1:0" picks a port). Refuses (QL_EINVAL, message in
 * err saying how to set a password) a non-loopback address while the built-in default password
 * is in use. Returns 0 or the error. */
int ql_api_listen(ql_api_t *api, const char *hostport, ql_err_t *err);

/* The bound port after a successful listen. Returns 0 or UV_ENOTCONN. */
int ql_api_port(const ql_api_t *api, int *port);

/* Stops accepting and closes every connection; new work is refused. done (may be NULL) runs on
 * the loop once the HTTP server's handles are closed and no list scan is still running in the
 * threadpool: stop the node (which closes the store) only then. Idempotent. */
void ql_api_close(ql_api_t *api, void (*done)(void *arg), void *arg);

/* Frees the API. Call after ql_api_close's done ran and after the node stopped (its writer's
 * last answers may still reach API callbacks until then). NULL is a no-op. */
void ql_api_free(ql_api_t *api);

/* The router (borrowed), for tests that want to match paths. */
ql_http_router_t *ql_api_router(ql_api_t *api);

typedef struct ql_api_stats {
    uint64_t builds;          /* INC_BUILD jobs submitted through the API */
    uint64_t merges;          /* INDEX_MERGE jobs */
    uint64_t refreshes;       /* INDEX_REFRESH jobs */
    uint64_t adhoc;           /* ad-hoc jobs (POST /jobs) */
    uint64_t submit_failures; /* submissions refused by the store rules */
    uint64_t actions;         /* job actions applied */
    uint64_t jobs_deleted;    /* jobs deleted through the API (DELETE /jobs) */
} ql_api_stats_t;
void ql_api_get_stats(const ql_api_t *api, ql_api_stats_t *out);

#endif
