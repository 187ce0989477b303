/* qilin auto-build status: the dispatcher's latest decision for a model
 * (GET /models/{model}/auto_segment_build/status, docs/design/rest-api.md and
 * docs/design/auto-segment-build.md). */
#include "client_int.h"

#include <stdlib.h>

static int status_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    json_t *data;
    int rc =
        ql_cli_get_in(cli, ql_cli_pathf(cli, "/models/%s/auto_segment_build/status", a->pos[0]),
                      ql_cli_get(a, "project"), &data);
    if (rc)
        return rc;
    if (cli->json) {
        ql_cli_print_json(cli, data);
    } else if (!json_is_object(data) || !json_object_size(data)) {
        fprintf(cli->out, "model %s: not evaluated yet (the dispatcher has not scanned it)\n",
                a->pos[0]);
    } else {
        static const ql_cli_col_t fields[] = {
            {"state", "state", QL_CLI_TEXT},
            {"target start", "target_start", QL_CLI_TIME},
            {"target end", "target_end", QL_CLI_TIME},
            {"occurrence", "occurrence", QL_CLI_TIME},
            {"segments", "related_segments", QL_CLI_TEXT},
            {"reason", "reason", QL_CLI_TEXT},
            {"evaluated at", "evaluated_at", QL_CLI_TIME},
            /* dispatcher, or store: the master's decision as kept there (a standby's answer) */
            {"source", "source", QL_CLI_TEXT},
        };
        ql_cli_print_fields(cli, data, fields, sizeof fields / sizeof *fields);
    }
    json_decref(data);
    return 0;
}

static const ql_cli_opt_t status_opts[] = {
    {"project", 'p', "PROJECT", QL_CLI_OPT_REQUIRED, "the model's project"},
    {NULL, 0, NULL, 0, NULL},
};

static const ql_cli_cmd_t cmds[] = {
    {"status", "--project P MODEL", "Show the dispatcher's latest decision for a model",
     "The state is one of COVERED, COVERED_WITH_WARNING, IN_PROGRESS, BLOCKED, PARTIAL_OVERLAP,\n"
     "NO_OVERLAP, SUBMITTED or RETRYABLE_FAILURE (docs/design/auto-segment-build.md),\nwith the "
     "target range of the latest due cycle, the segments it relates to and the reason.",
     "  qilin auto-build status -p sales orders", status_opts, 1, 1, status_run},
};

const ql_cli_group_t ql_cli_group_autobuild = {
    "auto-build",
    "The automatic segment build status of a model",
    "To configure automatic builds see 'qilin project auto-build' (the project switch) and "
    "'qilin model\nauto-build' (the model's daily schedule).",
    cmds,
    sizeof cmds / sizeof *cmds,
};
