/* qilin project delete, qilin model delete|rename|partition: changing and removing projects and
 * models through Kylin's endpoints (docs/rest.md). */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

int ql_cli_project_delete_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_model_delete_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_model_rename_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_model_partition_run(ql_cli_t *cli, const ql_cli_args_t *a);

int ql_cli_project_delete_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    char *path = ql_cli_pathf(cli, "/projects/%s", a->pos[0]);
    if (!path)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    ql_cli_kv_t q[] = {{"discard_jobs", ql_cli_get(a, "discard-jobs") ? "true" : NULL}};
    json_t *data = NULL;
    int rc = ql_cli_call(cli, "DELETE", path, q, 1, NULL, &data);
    free(path);
    return rc ? rc : ql_cli_done(cli, data, "deleted project %s", a->pos[0]);
}

int ql_cli_model_delete_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    char *path = ql_cli_pathf(cli, "/models/%s", a->pos[0]);
    if (!path)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    ql_cli_kv_t q[] = {{"project", ql_cli_get(a, "project")}};
    json_t *data = NULL;
    int rc = ql_cli_call(cli, "DELETE", path, q, 1, NULL, &data);
    free(path);
    return rc ? rc : ql_cli_done(cli, data, "deleted model %s", a->pos[0]);
}

int ql_cli_model_rename_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    json_t *body =
        json_pack("{s:s,s:s}", "project", ql_cli_get(a, "project"), "new_model_name", a->pos[1]);
    json_t *data;
    int rc = ql_cli_send(cli, "PUT", ql_cli_pathf(cli, "/models/%s/name", a->pos[0]), body, &data,
                         QL_CLI_USAGE, "out of memory or text that is not UTF-8");
    return rc ? rc : ql_cli_done(cli, data, "renamed model %s to %s", a->pos[0], a->pos[1]);
}

/* The server's msg (what was purged, or that nothing was) is the line printed. */
int ql_cli_model_partition_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *col = ql_cli_get(a, "column"), *fmt = ql_cli_get(a, "format");
    bool full = ql_cli_get(a, "full-load") != NULL;
    if (full == (col || fmt) || !col != !fmt)
        return ql_cli_usage(cli, "give --column C --format F, or --full-load");
    json_t *pd =
        full ? json_null()
             : json_pack("{s:s,s:s}", "partition_date_column", col, "partition_date_format", fmt);
    json_t *body = pd ? json_pack("{s:o}", "partition_desc", pd) : NULL;
    json_t *data;
    int rc = ql_cli_send(
        cli, "PUT",
        ql_cli_pathf(cli, "/models/%s/%s/partition_desc", ql_cli_get(a, "project"), a->pos[0]),
        body, &data, QL_CLI_USAGE, "out of memory or text that is not UTF-8");
    if (rc)
        return rc;
    char line[512];
    snprintf(line, sizeof line, "%s",
             cli->last_msg[0] ? cli->last_msg : "changed the partition of the model");
    return ql_cli_done(cli, data, "%s", line);
}
