/* qilin job delete: DELETE /jobs (docs/rest.md, Delete jobs). */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

int ql_cli_job_delete_run(ql_cli_t *cli, const ql_cli_args_t *a);

int ql_cli_job_delete_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *statuses = ql_cli_get(a, "status"), *project = ql_cli_get(a, "project");
    if (a->n_pos == 0 && !statuses)
        return ql_cli_usage(cli, "give the job ids to delete, or --status (FINISHED,DISCARDED "
                                 "deletes every final job of the project)");
    /* Repeated keys (job_ids=a&job_ids=b): each value is escaped on its own, commas included. */
    char *st = strdup(statuses ? statuses : "");
    size_t cap = 1 + a->n_pos + (st ? strlen(st) / 2 + 1 : 0), n = 0;
    ql_cli_kv_t *q = calloc(cap, sizeof *q);
    if (!st || !q) {
        free(st);
        free(q);
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    }
    q[n++] = (ql_cli_kv_t){"project", project};
    for (size_t i = 0; i < a->n_pos; i++)
        q[n++] = (ql_cli_kv_t){"job_ids", a->pos[i]};
    char *save = NULL;
    for (char *s = strtok_r(st, ",", &save); s && n < cap; s = strtok_r(NULL, ",", &save))
        q[n++] = (ql_cli_kv_t){"statuses", s};
    json_t *data = NULL;
    int rc = ql_cli_call(cli, "DELETE", "/jobs", q, n, NULL, &data);
    if (!rc) {
        if (a->n_pos)
            ql_cli_done(cli, data, "deleted %zu job%s", a->n_pos, a->n_pos == 1 ? "" : "s");
        else
            ql_cli_done(cli, data, "deleted the %s jobs of %s%s", statuses,
                        project ? "project " : "every project", project ? project : "");
    }
    free(q);
    free(st);
    return rc;
}
