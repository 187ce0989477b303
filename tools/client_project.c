/* qilin project create|list|config|auto-build (delete is in client_lifecycle.c): the /projects
 * endpoints (docs/design/rest-api.md). */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

static int create_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *desc = ql_cli_get(a, "description");
    json_t *body = json_pack("{s:s,s:s}", "name", a->pos[0], "description", desc ? desc : "");
    if (!body)
        return ql_cli_usage(cli, "the name and description must be UTF-8");
    json_t *data = NULL;
    int rc = ql_cli_call(cli, "POST", "/projects", NULL, 0, body, &data);
    json_decref(body);
    if (rc)
        return rc;
    char line[160];
    snprintf(line, sizeof line, "created project %s", a->pos[0]);
    return ql_cli_done(cli, data, "%s", line);
}

static const ql_cli_col_t project_cols[] = {
    {"NAME", "name", QL_CLI_TEXT},
    {"AUTO-BUILD", "auto_segment_build_enabled|segment_config.auto_segment_build_enabled",
     QL_CLI_ONOFF},
    {"CREATED", "create_time|create_time_utc|created", QL_CLI_TIME},
    {"DESCRIPTION", "description", QL_CLI_TEXT},
};

static int list_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    ql_cli_kv_t q[] = {{"project", ql_cli_get(a, "filter")}};
    return ql_cli_show_list(cli, a, "/projects", q, 1, project_cols,
                            sizeof project_cols / sizeof *project_cols, "projects");
}

static int config_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    json_t *body = json_object();
    if (!body)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    for (size_t i = 1; i < a->n_pos; i++) {
        const char *kv = a->pos[i], *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            json_decref(body);
            return ql_cli_usage(cli, "'%s' is not KEY=VALUE", kv);
        }
        if (json_object_setn_new(body, kv, (size_t)(eq - kv), json_string(eq + 1))) {
            json_decref(body);
            return ql_cli_usage(cli, "'%s': keys and values must be UTF-8", kv);
        }
    }
    json_t *data;
    int rc = ql_cli_send(cli, "PUT", ql_cli_pathf(cli, "/projects/%s/config", a->pos[0]), body,
                         &data, QL_CLI_UNREACHABLE, "out of memory");
    if (rc)
        return rc;
    char line[160];
    snprintf(line, sizeof line, "updated the config of project %s", a->pos[0]);
    return ql_cli_done(cli, data, "%s", line);
}

static int autobuild_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    static const char *const words[] = {"on", "off", "true", "false", NULL};
    const char *w;
    int rc = ql_cli_pick(cli, "the switch", a->pos[1], words, &w);
    if (rc)
        return rc;
    bool on = !strcmp(w, "on") || !strcmp(w, "true");
    json_t *body = json_pack("{s:b}", "auto_segment_build_enabled", on);
    json_t *data;
    rc = ql_cli_send(cli, "PUT", ql_cli_pathf(cli, "/projects/%s/segment_config", a->pos[0]), body,
                     &data, QL_CLI_UNREACHABLE, "out of memory");
    if (rc)
        return rc;
    char line[160];
    snprintf(line, sizeof line, "automatic segment builds are %s for project %s", on ? "on" : "off",
             a->pos[0]);
    return ql_cli_done(cli, data, "%s", line);
}

static const ql_cli_opt_t create_opts[] = {
    {"description", 'd', "TEXT", 0, "what the project is for"},
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t list_opts[] = {
    {"filter", 0, "TEXT", 0, "only projects whose name matches TEXT (the server's 'project')"},
    QL_CLI_LIST_OPTS,
    {NULL, 0, NULL, 0, NULL},
};

int ql_cli_project_delete_run(ql_cli_t *cli, const ql_cli_args_t *a);
static const ql_cli_opt_t delete_opts[] = {
    {"discard-jobs", 0, NULL, 0, "discard the project's live jobs first (else they refuse it)"},
    {NULL, 0, NULL, 0, NULL},
};

static const ql_cli_cmd_t cmds[] = {
    {"create", "NAME [--description TEXT]", "Create a project",
     "NAME is 1 to 100 letters, digits or underscores, unique on the server "
     "(POST /projects).",
     "  qilin project create sales --description 'Sales cubes'", create_opts, 1, 1, create_run},
    {"list", "[--filter TEXT]", "List projects",
     "Follows the server's pages until every project is shown (or --limit) (GET /projects).",
     "  qilin project list\n  qilin project list --filter sales --json", list_opts, 0, 0, list_run},
    {"config", "NAME KEY=VALUE...", "Override server settings for one project",
     "Each KEY=VALUE sets one project-level config key; the server rejects keys a project "
     "may not\noverride (PUT /projects/{project}/config). kylin.web.timezone is the zone "
     "the\nautomatic builds of the project use.",
     "  qilin project config sales kylin.web.timezone=Asia/Shanghai "
     "kylin.job.max-concurrent-jobs=4",
     NULL, 2, -1, config_run},
    {"auto-build", "NAME on|off", "Switch automatic segment builds of a project on or off",
     "The project switch: off stops the dispatcher for every model of the project and leaves "
     "the models'\nown settings untouched (PUT /projects/{project}/segment_config). See also "
     "'qilin model auto-build'.",
     "  qilin project auto-build sales on", NULL, 2, 2, autobuild_run},
    {"delete", "NAME [--discard-jobs]", "Delete a project with its models, segments and jobs",
     "Everything goes in one transaction, step logs included (DELETE /projects/{project}). "
     "While the\nproject has live jobs it is refused (exit 1), unless --discard-jobs.",
     "  qilin project delete sales --discard-jobs", delete_opts, 1, 1, ql_cli_project_delete_run},
};

const ql_cli_group_t ql_cli_group_project = {
    "project",
    "Create, list, configure and delete projects",
    NULL,
    cmds,
    sizeof cmds / sizeof *cmds,
};
