/*
 * The REST client behind `qilin project|model|segment|job|auto-build` (docs/cli.md). Private
 * to tools/client*.c.
 *
 * DESIGN. Each command group is a constant table of commands (client_project.c, ...); a command
 * is its synopsis, help text, example, option table and a run function. client.c finds the
 * command, parses the arguments against the command's options plus the global ones
 * (client_args.c), resolves the server and credentials (flags > environment > config file >
 * Kylin's defaults) and calls run with a ql_cli_t, the one context every helper takes: there
 * is no global mutable state. Requests go through client_http.c (libcurl, one easy handle per
 * run so the connection is reused, the Kylin envelope checked in one place); human output
 * through client_out.c (aligned tables, UTC ISO times).
 *
 * Exit codes, returned by every run function and by the helpers that can fail:
 *   0 success; 1 the server refused the request (its msg and error_code are printed) or, for
 *   `job wait`, the job did not finish; 2 usage error (nothing was sent); 3 the server cannot
 *   be reached, does not speak the Kylin API, or refused the credentials (HTTP 401).
 * Helpers print their own message before returning a non-zero code, so callers just pass the
 * code up.
 */
#ifndef QL_TOOLS_CLIENT_INT_H
#define QL_TOOLS_CLIENT_INT_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/ql_time.h"

enum {
    QL_CLI_OK = 0,
    QL_CLI_REFUSED = 1,
    QL_CLI_USAGE = 2,
    QL_CLI_UNREACHABLE = 3,
};

/* ---- options and arguments (client_args.c) ---- */

enum {
    QL_CLI_OPT_REQUIRED = 1u << 0, /* the command cannot run without it */
};

/* One option of a command. Tables end with an entry whose name is NULL. */
typedef struct ql_cli_opt {
    const char *name;    /* long name without the leading "--" */
    char short_name;     /* 'p' for -p, or 0 */
    const char *metavar; /* the value's placeholder in help ("NAME"); NULL for a flag */
    unsigned flags;      /* QL_CLI_OPT_* */
    const char *help;    /* one line */
} ql_cli_opt_t;

/* The options every list command has (paging): --limit N and --page-size N. */
#define QL_CLI_LIST_OPTS                                                                           \
    {"limit", 0, "N", 0, "show at most N items (default: all, following the pages)"}, {            \
        "page-size", 0, "N", 0, "items fetched per request (default 100, at most 1000)"            \
    }

#define QL_CLI_MAX_OPTS 40

/* Parsed arguments. Values and positionals are borrowed from argv. */
typedef struct ql_cli_args {
    const ql_cli_opt_t *opts[QL_CLI_MAX_OPTS]; /* the command's options, then the global ones */
    const char *vals[QL_CLI_MAX_OPTS];         /* NULL: absent; "" for a flag that is present */
    size_t n_opts;
    char **pos; /* positional arguments (owned by the args: ql_cli_args_free) */
    size_t n_pos;
} ql_cli_args_t;

typedef struct ql_cli ql_cli_t;

typedef struct ql_cli_cmd {
    const char *name;
    const char *synopsis; /* what follows "qilin GROUP NAME" in the usage line */
    const char *summary;  /* one line, for the group's help */
    const char *help;     /* what it does, in full sentences (may be NULL) */
    const char *example;  /* one or more command lines (may be NULL) */
    const ql_cli_opt_t *opts;
    int min_pos, max_pos; /* positional argument count; max_pos -1 means any */
    int (*run)(ql_cli_t *cli, const ql_cli_args_t *a);
} ql_cli_cmd_t;

typedef struct ql_cli_group {
    const char *name;
    const char *summary;
    const char *help; /* may be NULL */
    const ql_cli_cmd_t *cmds;
    size_t n_cmds;
} ql_cli_group_t;

extern const ql_cli_group_t ql_cli_group_project;
extern const ql_cli_group_t ql_cli_group_model;
extern const ql_cli_group_t ql_cli_group_segment;
extern const ql_cli_group_t ql_cli_group_job;
extern const ql_cli_group_t ql_cli_group_autobuild;

/* The global options (--server, --user, ...), accepted by every command. */
extern const ql_cli_opt_t ql_cli_global_opts[];

/*
 * Parses argv[1..argc) (argv[0] is the command name) against cmd's options and the global
 * ones into *out: options may come anywhere, as --name VALUE, --name=VALUE or -x VALUE; "--"
 * ends them. Returns 0, QL_CLI_USAGE after printing the reason (prefix names the command), or
 * -1 when --help/-h was given (nothing printed). *out must be freed with ql_cli_args_free in
 * every case.
 */
int ql_cli_args_parse(const ql_cli_cmd_t *cmd, const char *prefix, int argc, char **argv,
                      ql_cli_args_t *out);
void ql_cli_args_free(ql_cli_args_t *a);
/* The value of option name (borrowed), or NULL when absent. name must be one of the options. */
const char *ql_cli_get(const ql_cli_args_t *a, const char *name);
/* Whether option name was given. */
bool ql_cli_has(const ql_cli_args_t *a, const char *name);
/* Prints cmd's help (usage, description, options, example) to out. prefix is "qilin GROUP". */
void ql_cli_cmd_help(const ql_cli_cmd_t *cmd, const char *prefix, FILE *out);
/* Prints a group's help (usage and its commands) to out. */
void ql_cli_group_help(const ql_cli_group_t *g, FILE *out);

/* ---- the context ---- */

struct ql_cli {
    char prog[96];      /* "qilin segment build", for messages */
    char *base;         /* "http://127.0.0.1:7070/kylin/api" (owned) */
    char *user;         /* owned */
    char *password;     /* owned; wiped when freed */
    char pw_note[600];  /* why there is no password (an unreadable password file), for a 401 */
    bool json;          /* --json: print the server's data verbatim */
    ql_tz_t *tz;        /* --timezone (owned); NULL means UTC */
    CURL *curl;         /* owned; created on the first request */
    char last_msg[512]; /* the msg of the last successful answer ("" when it had none) */
    FILE *out, *err;
};

/* Prints "PROG: <message>" and a pointer to --help on cli->err; returns QL_CLI_USAGE. */
int ql_cli_usage(ql_cli_t *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "PROG: <message>" on cli->err and returns code. */
int ql_cli_fail(ql_cli_t *cli, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses a decimal integer option value into [min, max]; absent leaves *out unchanged.
 * Returns 0 or QL_CLI_USAGE (printed). */
int ql_cli_get_int(ql_cli_t *cli, const ql_cli_args_t *a, const char *name, int64_t min,
                   int64_t max, int64_t *out);
/* Checks that text is one of the NULL-terminated allowed words, ignoring case, and writes the
 * canonical (allowed) spelling to *out (borrowed from allowed). what names the value in the
 * message. Returns 0 or QL_CLI_USAGE. */
int ql_cli_pick(ql_cli_t *cli, const char *what, const char *text, const char *const *allowed,
                const char **out);

/* ---- HTTP (client_http.c) ---- */

/* A query parameter; a NULL value is left out. Both are borrowed and escaped when sent. */
typedef struct ql_cli_kv {
    const char *key;
    const char *value;
} ql_cli_kv_t;

/*
 * Builds a path from fmt, where each %s is replaced by the next argument, percent-escaped as
 * one path segment ("/models/%s/segments"). Returns a new string (free) or NULL when out of
 * memory.
 */
char *ql_cli_pathf(ql_cli_t *cli, const char *fmt, ...);

/*
 * Sends METHOD base+path?query with body (borrowed JSON, or NULL for none) and checks the
 * Kylin envelope. On success returns 0 and, when data is not NULL, a new reference to the
 * envelope's data in *data (json_decref it; JSON null when the server sent none). Otherwise
 * prints why and returns QL_CLI_REFUSED (an error envelope: its msg and error_code) or
 * QL_CLI_UNREACHABLE (connection failure, timeout, HTTP 401, not a Kylin answer).
 */
int ql_cli_call(ql_cli_t *cli, const char *method, const char *path, const ql_cli_kv_t *query,
                size_t n_query, json_t *body, json_t **data);
/* The same with a raw body of len bytes (borrowed) sent as content_type. */
int ql_cli_call_raw(ql_cli_t *cli, const char *method, const char *path, const ql_cli_kv_t *query,
                    size_t n_query, const char *content_type, const char *body, size_t len,
                    json_t **data);

/*
 * ql_cli_call without a query, for a path and a body the caller built: takes both (either may
 * be NULL, when building it failed) and frees them. With a NULL one nothing is sent: prints
 * fail_msg and returns fail_code.
 */
int ql_cli_send(ql_cli_t *cli, const char *method, char *path, json_t *body, json_t **data,
                int fail_code, const char *fail_msg);
/* GET path?project=PROJECT (project NULL: no query) as ql_cli_call; takes path (from
 * ql_cli_pathf) and frees it; a NULL path prints "out of memory" and returns
 * QL_CLI_UNREACHABLE. */
int ql_cli_get_in(ql_cli_t *cli, char *path, const char *project, json_t **data);

/*
 * GETs a paged list (data = {value, offset, limit, total_size}), following the pages with
 * page_offset/page_size until every item, or --limit items, have been fetched (a's --limit and
 * --page-size). query must leave room: it is copied and the paging keys are added. On success
 * *items is a new array of every item fetched and *total the server's total_size (or the item
 * count when the server sent none). Returns as ql_cli_call, or QL_CLI_USAGE for a bad --limit.
 */
int ql_cli_list(ql_cli_t *cli, const ql_cli_args_t *a, const char *path, const ql_cli_kv_t *query,
                size_t n_query, json_t **items, int64_t *total);
/* The same with limit (0: all) and page_size (1..1000) given directly. */
int ql_cli_pages(ql_cli_t *cli, const char *path, const ql_cli_kv_t *query, size_t n_query,
                 int64_t limit, int64_t page_size, json_t **items, int64_t *total);

/* ---- output (client_out.c) ---- */

/* How a column shows its value. */
typedef enum ql_cli_kind {
    QL_CLI_TEXT,     /* strings as is, numbers in decimal, booleans, arrays comma-joined */
    QL_CLI_TIME,     /* epoch ms as an ISO time (UTC "Z", or --timezone); 0 or absent "-" */
    QL_CLI_DURATION, /* milliseconds as "1h02m03s" */
    QL_CLI_ONOFF,    /* a boolean as on/off */
} ql_cli_kind_t;

/* A column or field: title and where the value is. keys is one or more '|'-separated dotted
 * paths tried in order ("create_time|create_time_utc", "partition_desc.partition_date_column"),
 * so the client reads what the server sends without caring which spelling it chose. */
typedef struct ql_cli_col {
    const char *title;
    const char *keys;
    ql_cli_kind_t kind;
} ql_cli_col_t;

/* The value at keys in obj (borrowed), or NULL. */
json_t *ql_cli_field(json_t *obj, const char *keys);
/* Formats v as kind into buf (size >= 64) and returns buf; NULL or JSON null give "-". */
const char *ql_cli_format(const ql_cli_t *cli, json_t *v, ql_cli_kind_t kind, char *buf,
                          size_t size);
/* Formats epoch ms as an ISO time in --timezone (UTC "Z" by default). */
const char *ql_cli_format_time(const ql_cli_t *cli, int64_t ms, char *buf, size_t size);
/* Reads v as an integer: a JSON integer, a real with an integral value, or a numeric string.
 * Returns 0 or -1. */
int ql_cli_json_int(json_t *v, int64_t *out);

/* Prints items (an array of objects) as an aligned table with cols, or "no <noun>" on
 * cli->err when empty. When shown < total, says how many were left out. Returns 0. */
int ql_cli_print_table(ql_cli_t *cli, json_t *items, const ql_cli_col_t *cols, size_t n_cols,
                       const char *noun, int64_t total);
/* Prints obj's fields as aligned "title  value" lines. */
void ql_cli_print_fields(ql_cli_t *cli, json_t *obj, const ql_cli_col_t *cols, size_t n_cols);
/* Prints v as indented JSON on cli->out (--json). Returns 0. */
int ql_cli_print_json(ql_cli_t *cli, json_t *v);
/* Prints the data of a paged list for --json: {"value": items, "offset": 0, "limit": the item
 * count, "total_size": total}, one object however many pages were fetched. Returns 0. */
int ql_cli_print_list_json(ql_cli_t *cli, json_t *items, int64_t total);

/* The end of a list command: GETs the list as ql_cli_list and prints it, for --json as
 * ql_cli_print_list_json, else as a table of cols (ql_cli_print_table). Returns 0 or as
 * ql_cli_list. */
int ql_cli_show_list(ql_cli_t *cli, const ql_cli_args_t *a, const char *path,
                     const ql_cli_kv_t *query, size_t n_query, const ql_cli_col_t *cols,
                     size_t n_cols, const char *noun);
/* The end of a command that changed something: prints data (consumed) for --json, else the
 * line fmt makes and a newline. Returns 0. */
int ql_cli_done(ql_cli_t *cli, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Parses a time argument: epoch milliseconds (digits only), or "YYYY-MM-DD", "YYYY-MM-DD
 * HH:mm[:ss]" or "YYYY-MM-DDTHH:mm[:ss]" read in --timezone (UTC by default). what names the
 * option. Returns 0 or QL_CLI_USAGE (printed).
 */
int ql_cli_parse_time(ql_cli_t *cli, const char *what, const char *text, int64_t *out);

/* ---- jobs (client_job.c), shared with segment commands ---- */

/*
 * Finds one job's summary (an item of GET /jobs) by id. The API has no GET /jobs/{id}, so the
 * list is filtered: first key=ID (Kylin matches the key against job ids too), then, when the
 * server's key matches models only, key=MODEL once the model is known, else every job of the
 * project (or of all projects) over all time. What a find learns (project, model, which
 * filter works) is kept in the finder, so polling one job stays one small request.
 */
typedef struct ql_cli_job_finder {
    const char *id; /* borrowed */
    char *project;  /* owned: --project when given, else the job's once found */
    char *model;    /* owned: the job's target model once found */
    bool key_is_id; /* key=ID found the job: keep using it */
} ql_cli_job_finder_t;

/* Sets *job to a new reference to the job's summary. Returns 0, QL_CLI_REFUSED when no such
 * job exists (printed), or as ql_cli_call. */
int ql_cli_job_find(ql_cli_t *cli, ql_cli_job_finder_t *f, json_t **job);
/* Frees the finder's strings. */
void ql_cli_job_finder_free(ql_cli_job_finder_t *f);
/* The job summary columns of `job list` and the fields of `job show`. */
extern const ql_cli_col_t ql_cli_job_cols[];
extern const size_t ql_cli_n_job_cols;

/* Prints the job ids of a {"jobs":[{"job_name","job_id"}]} answer: "submitted TYPE job ID"
 * lines, or only the ids with quiet, or data itself with --json. Consumes data; returns 0. */
int ql_cli_print_jobs(ql_cli_t *cli, json_t *data, bool quiet);

#endif
