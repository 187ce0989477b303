/* qilin model create|list|status|auto-build (rename, partition and delete are in
 * client_lifecycle.c): the /models endpoints (docs/design/rest-api.md). */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const model_types[] = {"BATCH", "STREAMING", NULL};
static const char *const model_statuses[] = {"ONLINE", "OFFLINE", "BROKEN", NULL};

/* Why a request body or path could not be built. */
#define NOT_SENT "out of memory or text that is not UTF-8"

static int finish(ql_cli_t *cli, int rc, json_t *data, const char *line, const char *name) {
    return rc ? rc : ql_cli_done(cli, data, "%s %s", line, name);
}

/* Splits "a,b,,c" into a JSON array of the non-empty items. */
static json_t *split_list(const char *s) {
    json_t *arr = json_array();
    while (arr && *s) {
        size_t n = strcspn(s, ",");
        if (n && json_array_append_new(arr, json_stringn(s, n))) {
            json_decref(arr);
            return NULL;
        }
        s += n + (s[n] == ',');
    }
    return arr;
}

static int create_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *type = ql_cli_get(a, "type"), *status = ql_cli_get(a, "status");
    const char *col = ql_cli_get(a, "partition-column"), *fmt = ql_cli_get(a, "partition-format");
    const char *multi = ql_cli_get(a, "multi-partition"), *tmpl = ql_cli_get(a, "template");
    int rc = 0;
    if (type)
        rc = ql_cli_pick(cli, "--type", type, model_types, &type);
    if (!rc && status)
        rc = ql_cli_pick(cli, "--status", status, model_statuses, &status);
    if (rc)
        return rc;
    if (!col != !fmt)
        return ql_cli_usage(cli, "--partition-column and --partition-format go together "
                                 "(e.g. --partition-column DT --partition-format yyyy-MM-dd)");
    /* Only what was given is sent: the server owns the defaults (BATCH, ONLINE, the default
     * template), so the client cannot drift from them. */
    json_t *body = json_pack("{s:s,s:s}", "project", ql_cli_get(a, "project"), "name", a->pos[0]);
    if (!body)
        return ql_cli_usage(cli, "names must be UTF-8");
    if (type)
        json_object_set_new(body, "model_type", json_string(type));
    if (status)
        json_object_set_new(body, "status", json_string(status));
    if (col)
        json_object_set_new(
            body, "partition_desc",
            json_pack("{s:s,s:s}", "partition_date_column", col, "partition_date_format", fmt));
    if (multi)
        json_object_set_new(body, "multi_partition_desc",
                            json_pack("{s:o}", "columns", split_list(multi)));
    if (tmpl)
        json_object_set_new(body, "job_template", json_string(tmpl));
    json_t *data = NULL;
    rc = ql_cli_call(cli, "POST", "/models", NULL, 0, body, &data);
    json_decref(body);
    return finish(cli, rc, data, "created model", a->pos[0]);
}

static const ql_cli_col_t model_cols[] = {
    {"NAME", "name|alias", QL_CLI_TEXT},
    {"STATUS", "status", QL_CLI_TEXT},
    {"TYPE", "model_type", QL_CLI_TEXT},
    {"PARTITION", "partition_desc.partition_date_column", QL_CLI_TEXT},
    {"FORMAT", "partition_desc.partition_date_format", QL_CLI_TEXT},
    {"AUTO-BUILD", "segment_config.auto_segment_build.enabled|auto_segment_build.enabled",
     QL_CLI_ONOFF},
    {"TRIGGER", "segment_config.auto_segment_build.trigger_time|auto_segment_build.trigger_time",
     QL_CLI_TEXT},
    {"TEMPLATE", "job_template", QL_CLI_TEXT},
    {"CREATED", "create_time|create_time_utc", QL_CLI_TIME},
};

static int list_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    ql_cli_kv_t q[] = {{"project", ql_cli_get(a, "project")},
                       {"model_name", ql_cli_get(a, "name")}};
    return ql_cli_show_list(cli, a, "/models", q, 2, model_cols,
                            sizeof model_cols / sizeof *model_cols, "models");
}

static int status_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *status;
    int rc = ql_cli_pick(cli, "the status", a->pos[1], model_statuses, &status);
    if (rc)
        return rc;
    json_t *body = json_pack("{s:s,s:s}", "project", ql_cli_get(a, "project"), "status", status);
    json_t *data;
    rc = ql_cli_send(cli, "PUT", ql_cli_pathf(cli, "/models/%s/status", a->pos[0]), body, &data,
                     QL_CLI_USAGE, NOT_SENT);
    if (rc)
        return rc;
    char line[64];
    snprintf(line, sizeof line, "%s is now", a->pos[0]);
    return finish(cli, rc, data, line, status);
}

static int autobuild_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    bool disable = ql_cli_has(a, "disable");
    static const char *const need[] = {"trigger", "offset", "start", "end", NULL};
    if (!disable)
        for (const char *const *n = need; *n; n++)
            if (!ql_cli_has(a, *n))
                return ql_cli_usage(cli, "--%s is required to enable automatic builds", *n);
    int64_t offset = 0;
    int rc = ql_cli_get_int(cli, a, "offset", 1, 100000, &offset);
    if (rc)
        return rc;
    /* The times are sent as typed: the server checks HH:mm:ss strictly and names the field,
     * one rule in one place. */
    json_t *cfg = json_pack("{s:b}", "enabled", !disable);
    static const struct {
        const char *opt, *field;
    } times[] = {{"trigger", "trigger_time"},
                 {"start", "data_range_start_time"},
                 {"end", "data_range_end_time"}};
    for (size_t i = 0; cfg && i < sizeof times / sizeof *times; i++)
        if (ql_cli_has(a, times[i].opt))
            json_object_set_new(cfg, times[i].field, json_string(ql_cli_get(a, times[i].opt)));
    if (cfg && ql_cli_has(a, "offset"))
        json_object_set_new(cfg, "logical_date_offset_days", json_integer(offset));
    json_t *body =
        json_pack("{s:s,s:o}", "project", ql_cli_get(a, "project"), "auto_segment_build", cfg);
    json_t *data;
    rc = ql_cli_send(cli, "PUT", ql_cli_pathf(cli, "/models/%s/segment_config", a->pos[0]), body,
                     &data, QL_CLI_USAGE, NOT_SENT);
    return finish(cli, rc, data,
                  disable ? "automatic segment builds disabled for model"
                          : "automatic segment builds enabled for model",
                  a->pos[0]);
}

#define PROJECT_OPT                                                                                \
    { "project", 'p', "PROJECT", QL_CLI_OPT_REQUIRED, "the model's project" }

static const ql_cli_opt_t create_opts[] = {
    PROJECT_OPT,
    {"type", 0, "TYPE", 0, "BATCH (default) or STREAMING"},
    {"status", 0, "STATUS", 0, "ONLINE (default), OFFLINE or BROKEN"},
    {"partition-column", 0, "COLUMN", 0, "the partition date column (none: a full-load model)"},
    {"partition-format", 0, "FORMAT", 0, "its date format, a Java pattern such as yyyy-MM-dd"},
    {"multi-partition", 0, "COLS", 0, "comma-separated multi-partition columns"},
    {"template", 0, "SET", 0, "the job template set its builds use (default: the server's)"},
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t list_opts[] = {
    PROJECT_OPT,
    {"name", 0, "MODEL", 0, "only the model named MODEL (the server's 'model_name')"},
    QL_CLI_LIST_OPTS,
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t project_opts[] = {
    PROJECT_OPT,
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t autobuild_opts[] = {
    PROJECT_OPT,
    {"trigger", 0, "HH:mm:ss", 0, "when the daily build is due, in the project's time zone"},
    {"offset", 0, "DAYS", 0, "build the logical date this many days before the trigger's date"},
    {"start", 0, "HH:mm:ss", 0, "start of the range on the logical date"},
    {"end", 0, "HH:mm:ss", 0, "end of the range (24:00:00 = the midnight ending it)"},
    {"disable", 0, NULL, 0, "switch the model's automatic builds off (the times are optional)"},
    {NULL, 0, NULL, 0, NULL},
};

int ql_cli_model_delete_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_model_rename_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_model_partition_run(ql_cli_t *cli, const ql_cli_args_t *a);
static const ql_cli_opt_t partition_opts[] = {
    PROJECT_OPT,
    {"column", 0, "C", 0, "the new partition column"},
    {"format", 0, "F", 0, "its date format (yyyy-MM-dd, yyyyMMdd, ...)"},
    {"full-load", 0, NULL, 0, "no partition column: a full-load model"},
    {NULL, 0, NULL, 0, NULL},
};

static const ql_cli_cmd_t cmds[] = {
    {"create",
     "--project P NAME [--type BATCH|STREAMING] [--status S]\n"
     "       [--partition-column C --partition-format F] [--multi-partition COLS] [--template SET]",
     "Create a model",
     "A model without a partition column is a full-load model: builds of it are refused\n"
     "(QL-00013) and the dispatcher skips it (POST /models).",
     "  qilin model create --project sales orders --partition-column DT --partition-format "
     "yyyy-MM-dd",
     create_opts, 1, 1, create_run},
    {"list", "--project P [--name MODEL]", "List the models of a project",
     "Follows the server's pages until every model is shown (or --limit) (GET /models).",
     "  qilin model list --project sales", list_opts, 0, 0, list_run},
    {"status", "--project P NAME ONLINE|OFFLINE|BROKEN", "Set a model's status",
     "Offline models still build automatically; broken ones do not (PUT "
     "/models/{model}/status).",
     "  qilin model status --project sales orders OFFLINE", project_opts, 2, 2, status_run},
    {"auto-build",
     "--project P NAME --trigger HH:mm:ss --offset N\n"
     "       --start HH:mm:ss --end HH:mm:ss [--disable]",
     "Configure a model's automatic daily segment build",
     "Every day at the trigger time (project time zone) the server builds the range [start, "
     "end) of the\nlogical date that lies --offset days before, unless segments already cover "
     "it. The project switch\n('qilin project auto-build P on') must be on too (PUT "
     "/models/{model}/segment_config).",
     "  qilin model auto-build --project sales orders --trigger 01:00:00 --offset 1 \\\n"
     "      --start 00:00:00 --end 24:00:00\n"
     "  qilin model auto-build --project sales orders --disable",
     autobuild_opts, 1, 1, autobuild_run},
    {"rename", "--project P NAME NEW_NAME", "Rename a model",
     "Its segments, jobs and settings stay with it (PUT /models/{model}/name).",
     "  qilin model rename --project sales orders orders_v2", project_opts, 2, 2,
     ql_cli_model_rename_run},
    {"partition", "--project P NAME (--column C --format F | --full-load)",
     "Change a model's partition column or format",
     "As in Kylin, a change purges the model's segments and ends its live jobs SUICIDAL; the "
     "line\nprinted says how many (PUT /models/{project}/{model}/partition_desc).",
     "  qilin model partition --project sales orders --column DAY --format yyyyMMdd",
     partition_opts, 1, 1, ql_cli_model_partition_run},
    {"delete", "--project P NAME", "Delete a model with its segments and jobs",
     "Its live jobs are discarded, then everything goes in one transaction, step logs "
     "included\n(DELETE /models/{model}).",
     "  qilin model delete --project sales orders", project_opts, 1, 1, ql_cli_model_delete_run},
};

const ql_cli_group_t ql_cli_group_model = {
    "model",
    "Create, list, configure, rename, repartition and delete models",
    NULL,
    cmds,
    sizeof cmds / sizeof *cmds,
};
