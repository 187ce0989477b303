/* qilin segment build|list|merge|refresh|delete: /models/{model}/segments
 * (docs/design/rest-api.md). */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

/* Kylin's yarn_queue and tag of a build, merge or refresh (--yarn-queue, --tag: sent as a
 * string) into body. Returns 0, or the usage error. */
static int add_job_extras(ql_cli_t *cli, const ql_cli_args_t *a, json_t *body) {
    const char *const keys[] = {"yarn-queue", "tag"}, *const fields[] = {"yarn_queue", "tag"};
    for (int i = 0; i < 2; i++) {
        const char *v = ql_cli_get(a, keys[i]);
        json_t *js = v ? json_string(v) : NULL;
        if (v && (!js || json_object_set_new(body, fields[i], js)))
            return ql_cli_usage(cli, "--%s must be UTF-8", keys[i]);
    }
    return 0;
}

static int build_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    int64_t start = 0, end = 0, priority = -1;
    bool ranged = ql_cli_get(a, "start") || ql_cli_get(a, "end");
    int rc = 0;
    if (ranged && !(ql_cli_get(a, "start") && ql_cli_get(a, "end")))
        return ql_cli_usage(cli, "--start and --end go together (neither: a full-load model's "
                                 "full build)");
    if (ranged) {
        rc = ql_cli_parse_time(cli, "--start", ql_cli_get(a, "start"), &start);
        if (!rc)
            rc = ql_cli_parse_time(cli, "--end", ql_cli_get(a, "end"), &end);
    }
    if (!rc)
        rc = ql_cli_get_int(cli, a, "priority", 0, 4, &priority);
    if (rc)
        return rc;
    json_t *body = json_pack("{s:s}", "project", ql_cli_get(a, "project"));
    if (!body)
        return ql_cli_usage(cli, "--project must be UTF-8");
    if (ranged) {
        /* Numeric strings, as Kylin's own scripts send them (the API takes numbers too). */
        char s[24], e[24];
        snprintf(s, sizeof s, "%lld", (long long)start);
        snprintf(e, sizeof e, "%lld", (long long)end);
        json_object_set_new(body, "start", json_string(s));
        json_object_set_new(body, "end", json_string(e));
    }
    if (priority >= 0)
        json_object_set_new(body, "priority", json_integer(priority));
    if ((rc = add_job_extras(cli, a, body))) {
        json_decref(body);
        return rc;
    }
    json_t *data;
    rc = ql_cli_send(cli, "POST", ql_cli_pathf(cli, "/models/%s/segments", ql_cli_get(a, "model")),
                     body, &data, QL_CLI_UNREACHABLE, "out of memory");
    return rc ? rc : ql_cli_print_jobs(cli, data, ql_cli_has(a, "quiet"));
}

static const ql_cli_col_t segment_cols[] = {
    {"ID", "id|uuid", QL_CLI_TEXT},
    {"NAME", "name", QL_CLI_TEXT},
    {"STATUS", "status|status_to_display", QL_CLI_TEXT},
    {"START", "start|segRange.date_range_start", QL_CLI_TIME},
    {"END", "end|segRange.date_range_end", QL_CLI_TIME},
    {"CREATED", "create_time|create_time_utc", QL_CLI_TIME},
    {"LAST BUILD", "last_build_time", QL_CLI_TIME},
};

static int list_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    static const char *const statuses[] = {"NEW", "READY", "WARNING", NULL};
    const char *status = ql_cli_get(a, "status");
    int rc = status ? ql_cli_pick(cli, "--status", status, statuses, &status) : 0;
    if (rc)
        return rc;
    char *path = ql_cli_pathf(cli, "/models/%s/segments", ql_cli_get(a, "model"));
    if (!path)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    ql_cli_kv_t q[] = {{"project", ql_cli_get(a, "project")}, {"status", status}};
    rc = ql_cli_show_list(cli, a, path, q, 2, segment_cols,
                          sizeof segment_cols / sizeof *segment_cols, "segments");
    free(path);
    return rc;
}

/* A segment id (a uuid: 36 characters with dashes at 8, 13, 18, 23) rather than a name. */
static bool is_uuid(const char *s) {
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++)
        if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-'
                                                      : !strchr("0123456789abcdefABCDEF", s[i]))
            return false;
    return true;
}

static int change_run(ql_cli_t *cli, const ql_cli_args_t *a, const char *type) {
    /* Segments by id, or by Kylin's names (20260831000000_20260901000000, FULL_BUILD). */
    bool by_id = is_uuid(a->pos[0]);
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < a->n_pos; i++)
        if (is_uuid(a->pos[i]) != by_id || json_array_append_new(ids, json_string(a->pos[i]))) {
            json_decref(ids);
            return ql_cli_usage(cli, "segment '%s': give ids or names, not both (and UTF-8)",
                                a->pos[i]);
        }
    json_t *body = json_pack("{s:s,s:s,s:o}", "project", ql_cli_get(a, "project"), "type", type,
                             by_id ? "ids" : "names", ids);
    int rc = body ? add_job_extras(cli, a, body) : ql_cli_usage(cli, "--project must be UTF-8");
    if (rc) {
        json_decref(body);
        return rc;
    }
    json_t *data;
    rc = ql_cli_send(cli, "PUT", ql_cli_pathf(cli, "/models/%s/segments", ql_cli_get(a, "model")),
                     body, &data, QL_CLI_USAGE, "out of memory or text not UTF-8");
    return rc ? rc : ql_cli_print_jobs(cli, data, ql_cli_has(a, "quiet"));
}

static int merge_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    return change_run(cli, a, "MERGE");
}

static int refresh_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    return change_run(cli, a, "REFRESH");
}

static int delete_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    /* One comma list: the server reads ids=a,b and repeated ids= alike. */
    size_t len = 1;
    for (size_t i = 0; i < a->n_pos; i++)
        len += strlen(a->pos[i]) + 1;
    char *ids = malloc(len),
         *path = ql_cli_pathf(cli, "/models/%s/segments", ql_cli_get(a, "model"));
    if (!ids || !path) {
        free(ids);
        free(path);
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    }
    ids[0] = '\0';
    for (size_t i = 0; i < a->n_pos; i++) {
        if (strchr(a->pos[i], ',')) {
            free(ids);
            free(path);
            return ql_cli_usage(cli, "segment id '%s' contains a comma", a->pos[i]);
        }
        strcat(i ? strcat(ids, ",") : ids, a->pos[i]);
    }
    /* Segments by id, or by Kylin's names (the server refuses a mix). */
    ql_cli_kv_t q[] = {{"project", ql_cli_get(a, "project")},
                       {is_uuid(a->pos[0]) ? "ids" : "names", ids}};
    json_t *data = NULL;
    int rc = ql_cli_call(cli, "DELETE", path, q, 2, NULL, &data);
    free(path);
    if (!rc)
        ql_cli_done(cli, data, "deleted %zu segment%s of model %s", a->n_pos,
                    a->n_pos == 1 ? "" : "s", ql_cli_get(a, "model"));
    free(ids);
    return rc;
}

#define PROJECT_OPT                                                                                \
    { "project", 'p', "PROJECT", QL_CLI_OPT_REQUIRED, "the model's project" }
#define MODEL_OPT                                                                                  \
    { "model", 'm', "MODEL", QL_CLI_OPT_REQUIRED, "the model" }
#define QUIET_OPT                                                                                  \
    { "quiet", 'q', NULL, 0, "print only the new job ids, one per line" }
#define YARN_OPT                                                                                   \
    {                                                                                              \
        "yarn-queue", 0, "Q", 0,                                                                   \
            "Kylin's yarn_queue: kept with the job, QILIN_YARN_QUEUE in its steps"                 \
    }
#define TAG_OPT                                                                                    \
    { "tag", 0, "TEXT", 0, "Kylin's tag: kept with the job, QILIN_TAG in its steps" }

static const ql_cli_opt_t build_opts[] = {
    PROJECT_OPT,
    MODEL_OPT,
    {"start", 's', "T", 0, "start of the range (inclusive); none: a full-load model's build"},
    {"end", 'e', "T", 0, "end of the range (exclusive)"},
    {"priority", 0, "N", 0, "0 (highest) to 4 (lowest); default 3"},
    YARN_OPT,
    TAG_OPT,
    QUIET_OPT,
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t list_opts[] = {
    PROJECT_OPT,
    MODEL_OPT,
    {"status", 0, "S", 0, "only segments in status NEW, READY or WARNING"},
    QL_CLI_LIST_OPTS,
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t change_opts[] = {
    PROJECT_OPT, MODEL_OPT, YARN_OPT, TAG_OPT, QUIET_OPT, {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t delete_opts[] = {
    PROJECT_OPT,
    MODEL_OPT,
    {NULL, 0, NULL, 0, NULL},
};

static const ql_cli_cmd_t cmds[] = {
    {"build",
     "--project P --model M [--start T --end T] [--priority N] [--yarn-queue Q] [--tag TEXT] [-q]",
     "Build a new segment over [start, end), or a full-load model's whole range",
     "Submits an INC_BUILD job and prints its id; 'qilin job wait ID' waits for it.\n"
     "T is epoch milliseconds or YYYY-MM-DD[ HH:mm:ss], read in UTC unless --timezone ZONE is "
     "given.\nThe server normalises both ends with the model's partition format and refuses "
     "a range that\noverlaps an existing segment (KE-010022202) or a building job "
     "(KE-010032206)\n(POST /models/{model}/segments). Without --start and --end: the full build "
     "of a full-load\nmodel (one segment over the whole range).",
     "  qilin segment build -p sales -m orders --start 2026-08-31 --end 2026-09-01\n"
     "  job=$(qilin segment build -q -p sales -m orders --start \"$(date -u -d yesterday "
     "+%F)\" \\\n      --end \"$(date -u +%F)\") && qilin job wait \"$job\"",
     build_opts, 0, 0, build_run},
    {"list", "--project P --model M [--status S]", "List the segments of a model",
     "Times show in UTC (ISO 8601) unless --timezone is given; an open end is MAX\n"
     "(GET /models/{model}/segments).",
     "  qilin segment list -p sales -m orders --status READY", list_opts, 0, 0, list_run},
    {"merge", "--project P --model M SEG... [-q]", "Merge contiguous segments into one",
     "Needs two or more contiguous READY or WARNING segments; submits an INDEX_MERGE job and "
     "prints\nits id (PUT /models/{model}/segments, type MERGE). SEG is a segment id or its "
     "name.",
     "  qilin segment merge -p sales -m orders SEG1 SEG2 SEG3", change_opts, 1, -1, merge_run},
    {"refresh", "--project P --model M SEG... [-q]", "Rebuild existing segments",
     "Submits one INDEX_REFRESH job per segment and prints their ids (PUT "
     "/models/{model}/segments,\ntype REFRESH). SEG is a segment id or its name (FULL_BUILD for "
     "a full load).",
     "  qilin segment refresh -p sales -m orders SEG1", change_opts, 1, -1, refresh_run},
    {"delete", "--project P --model M SEG...", "Delete segments (by id or name)",
     "Segments being merged or refreshed cannot be deleted until that job ends\n"
     "(DELETE /models/{model}/segments).",
     "  qilin segment delete -p sales -m orders SEG1 SEG2", delete_opts, 1, -1, delete_run},
};

const ql_cli_group_t ql_cli_group_segment = {
    "segment",
    "Build, list, merge, refresh and delete segments",
    "Time arguments (T) are epoch milliseconds or YYYY-MM-DD[ HH:mm:ss], read in UTC unless "
    "--timezone\nZONE is given; times are shown in UTC (ISO 8601) unless --timezone is given.",
    cmds,
    sizeof cmds / sizeof *cmds,
};
