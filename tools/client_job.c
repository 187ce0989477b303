/* qilin job list|show|logs|pause|resume|discard|restart (and the group's table; wait and
 * submit are in client_job_wait.c): the /jobs endpoints (docs/design/rest-api.md,
 * docs/design/jobs.md). */
#include "client_int.h"

#include <stdlib.h>
#include <string.h>

int ql_cli_job_wait_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_job_submit_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_job_delete_run(ql_cli_t *cli, const ql_cli_args_t *a);

/* The REST display statuses (docs/design/jobs.md). */
static const char *const display_statuses[] = {"PENDING", "RUNNING",   "ERROR", "FINISHED",
                                               "STOPPED", "DISCARDED", NULL};

static const char *or_dash(const char *s) {
    return s ? s : "-";
}

const ql_cli_col_t ql_cli_job_cols[] = {
    {"ID", "id|job_id|uuid", QL_CLI_TEXT},
    {"TYPE", "job_name|job_type", QL_CLI_TEXT},
    {"STATUS", "job_status|status", QL_CLI_TEXT},
    {"PROJECT", "project", QL_CLI_TEXT},
    {"MODEL", "target_subject|target_model_alias|target_model", QL_CLI_TEXT},
    {"START", "data_range_start", QL_CLI_TIME},
    {"END", "data_range_end", QL_CLI_TIME},
    {"SUBMITTER", "submitter", QL_CLI_TEXT},
    {"PRI", "priority", QL_CLI_TEXT},
    {"CREATED", "create_time", QL_CLI_TIME},
    {"DURATION", "duration", QL_CLI_DURATION},
};
const size_t ql_cli_n_job_cols = sizeof ql_cli_job_cols / sizeof *ql_cli_job_cols;

int ql_cli_print_jobs(ql_cli_t *cli, json_t *data, bool quiet) {
    if (cli->json) {
        ql_cli_print_json(cli, data);
        json_decref(data);
        return 0;
    }
    json_t *jobs = json_object_get(data, "jobs"), *one = NULL;
    if (!json_is_array(jobs)) {
        /* An answer that is one job rather than a {"jobs": [...]} list. */
        one = json_array();
        if (one && json_is_object(data))
            json_array_append(one, data);
        jobs = one;
    }
    size_t i;
    json_t *job;
    json_array_foreach(jobs, i, job) {
        const char *id = json_string_value(ql_cli_field(job, "job_id|id|uuid"));
        const char *name = json_string_value(ql_cli_field(job, "job_name|job_type"));
        if (!id)
            continue;
        if (quiet)
            fprintf(cli->out, "%s\n", id);
        else
            fprintf(cli->out, "submitted %s job %s\n", name ? name : "a", id);
    }
    json_decref(one);
    json_decref(data);
    return 0;
}

void ql_cli_job_finder_free(ql_cli_job_finder_t *f) {
    free(f->project);
    free(f->model);
    f->project = f->model = NULL;
}

/* Looks for the job in one filtered list; *job stays NULL when it is not there. */
static int scan(ql_cli_t *cli, ql_cli_job_finder_t *f, const char *key, json_t **job) {
    ql_cli_kv_t q[] = {{"project", f->project}, {"key", key}, {"time_filter", "4"}};
    json_t *items;
    int64_t total;
    int rc = ql_cli_pages(cli, "/jobs", q, 3, 0, 1000, &items, &total);
    if (rc)
        return rc;
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *id = json_string_value(ql_cli_field(it, "id|job_id|uuid"));
        if (id && !strcmp(id, f->id)) {
            *job = json_incref(it);
            break;
        }
    }
    json_decref(items);
    return 0;
}

static char *dup_field(json_t *job, const char *keys) {
    const char *s = json_string_value(ql_cli_field(job, keys));
    return s ? strdup(s) : NULL;
}

int ql_cli_job_find(ql_cli_t *cli, ql_cli_job_finder_t *f, json_t **job) {
    *job = NULL;
    int rc = 0;
    if (f->key_is_id || !f->model)
        rc = scan(cli, f, f->id, job);
    if (!rc && *job && !f->model)
        f->key_is_id = true;
    if (!rc && !*job && !f->key_is_id)
        rc = scan(cli, f, f->model, job); /* NULL key: every job of the project */
    if (rc)
        return rc;
    if (!*job)
        return ql_cli_fail(cli, QL_CLI_REFUSED, "no job '%s'%s%s", f->id,
                           f->project ? " in project " : "", f->project ? f->project : "");
    if (!f->project)
        f->project = dup_field(*job, "project");
    if (!f->model)
        f->model = dup_field(*job, "target_subject|target_model_alias|target_model");
    return 0;
}

static int list_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *st = ql_cli_get(a, "status");
    char statuses[256] = "";
    /* Checked here so a typo is a usage error rather than an empty list. */
    for (const char *p = st; p && *p;) {
        size_t n = strcspn(p, ",");
        char one[32];
        snprintf(one, sizeof one, "%.*s", (int)(n < 31 ? n : 31), p);
        const char *canon;
        if (n) {
            int rc = ql_cli_pick(cli, "--status", one, display_statuses, &canon);
            if (rc)
                return rc;
            size_t used = strlen(statuses);
            snprintf(statuses + used, sizeof statuses - used, "%s%s", used ? "," : "", canon);
        }
        p += n + (p[n] == ',');
    }
    ql_cli_kv_t q[] = {
        {"project", ql_cli_get(a, "project")},
        {"statuses", statuses[0] ? statuses : NULL},
        {"key", ql_cli_get(a, "model")},
        {"job_names", ql_cli_get(a, "type")},
        /* Kylin's default view is the last week; --all-time lifts it. */
        {"time_filter", ql_cli_has(a, "all-time") ? "4" : "1"},
    };
    return ql_cli_show_list(cli, a, "/jobs", q, sizeof q / sizeof *q, ql_cli_job_cols,
                            ql_cli_n_job_cols, "jobs");
}

static const ql_cli_col_t step_cols[] = {
    {"#", "sequence_id", QL_CLI_TEXT},
    {"STEP", "id", QL_CLI_TEXT},
    {"NAME", "name", QL_CLI_TEXT},
    {"STATUS", "step_status|status", QL_CLI_TEXT},
    {"STARTED", "exec_start_time", QL_CLI_TIME},
    {"ENDED", "exec_end_time", QL_CLI_TIME},
    {"DURATION", "duration", QL_CLI_DURATION},
};

/* GET /jobs/{id}/detail: the steps, as an array (a new reference in *steps). */
static int get_steps(ql_cli_t *cli, const ql_cli_job_finder_t *f, json_t **steps) {
    json_t *data;
    int rc = ql_cli_get_in(cli, ql_cli_pathf(cli, "/jobs/%s/detail", f->id), f->project, &data);
    if (rc)
        return rc;
    /* The steps are the data itself; tolerate a {"steps": [...]} wrapper. */
    if (!json_is_array(data) && json_is_array(json_object_get(data, "steps"))) {
        json_t *s = json_incref(json_object_get(data, "steps"));
        json_decref(data);
        data = s;
    }
    if (!json_is_array(data)) {
        json_decref(data);
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "the job detail is not a list of steps");
    }
    *steps = data;
    return 0;
}

static int show_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    ql_cli_job_finder_t f = {.id = a->pos[0]};
    const char *project = ql_cli_get(a, "project");
    if (project && !(f.project = strdup(project)))
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    json_t *job = NULL, *steps = NULL;
    int rc = ql_cli_job_find(cli, &f, &job);
    if (!rc)
        rc = get_steps(cli, &f, &steps);
    if (!rc && cli->json) {
        json_t *both = json_pack("{s:O,s:O}", "job", job, "steps", steps);
        ql_cli_print_json(cli, both);
        json_decref(both);
    } else if (!rc) {
        static const ql_cli_col_t fields[] = {
            {"job", "id|job_id", QL_CLI_TEXT},
            {"type", "job_name", QL_CLI_TEXT},
            {"status", "job_status", QL_CLI_TEXT},
            {"project", "project", QL_CLI_TEXT},
            {"model", "target_subject|target_model_alias|target_model", QL_CLI_TEXT},
            {"segments", "target_segments", QL_CLI_TEXT},
            {"range start", "data_range_start", QL_CLI_TIME},
            {"range end", "data_range_end", QL_CLI_TIME},
            {"submitter", "submitter", QL_CLI_TEXT},
            {"priority", "priority", QL_CLI_TEXT},
            {"created", "create_time", QL_CLI_TIME},
            {"started", "exec_start_time", QL_CLI_TIME},
            {"ended", "exec_end_time", QL_CLI_TIME},
            {"duration", "duration", QL_CLI_DURATION},
            {"waited", "wait_time", QL_CLI_DURATION},
            {"yarn queue", "yarn_queue", QL_CLI_TEXT},
            {"tag", "tag", QL_CLI_TEXT},
        };
        ql_cli_print_fields(cli, job, fields, sizeof fields / sizeof *fields);
        fputc('\n', cli->out);
        ql_cli_print_table(cli, steps, step_cols, sizeof step_cols / sizeof *step_cols, "steps", 0);
        size_t i;
        json_t *s;
        json_array_foreach(steps, i, s) {
            const char *msg = json_string_value(json_object_get(s, "failed_msg"));
            if (msg && *msg)
                fprintf(cli->out, "\n%s failed: %s\n",
                        or_dash(json_string_value(json_object_get(s, "id"))), msg);
        }
    }
    json_decref(job);
    json_decref(steps);
    ql_cli_job_finder_free(&f);
    return rc;
}

/* GET one step's output; *data is the endpoint's data (a new reference). */
static int get_output(ql_cli_t *cli, const ql_cli_job_finder_t *f, const char *step,
                      json_t **data) {
    return ql_cli_get_in(cli, ql_cli_pathf(cli, "/jobs/%s/steps/%s/output", f->id, step),
                         f->project, data);
}

static void print_output(ql_cli_t *cli, json_t *data) {
    const char *out = json_string_value(json_object_get(data, "cmd_output"));
    if (out && *out)
        fprintf(cli->out, "%s%s", out, out[strlen(out) - 1] == '\n' ? "" : "\n");
}

static int logs_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    ql_cli_job_finder_t f = {.id = a->pos[0]};
    const char *project = ql_cli_get(a, "project");
    if (project && !(f.project = strdup(project)))
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    json_t *job = NULL, *steps = NULL, *data = NULL;
    int rc = f.project ? 0 : ql_cli_job_find(cli, &f, &job);
    if (!rc && a->n_pos == 2) {
        /* A step is named by its id (JOB_00) or by its number (0, 00). */
        const char *step = a->pos[1];
        char id[256];
        if (strspn(step, "0123456789") == strlen(step) && strlen(step) <= 2) {
            snprintf(id, sizeof id, "%s_%02d", f.id, atoi(step));
            step = id;
        }
        rc = get_output(cli, &f, step, &data);
        if (!rc && cli->json)
            ql_cli_print_json(cli, data);
        else if (!rc)
            print_output(cli, data);
    } else if (!rc && !(rc = get_steps(cli, &f, &steps))) {
        /* Every step in order, each under a header, as tail(1) shows several files. */
        json_t *all = json_array();
        size_t i;
        json_t *s;
        json_array_foreach(steps, i, s) {
            const char *sid = json_string_value(json_object_get(s, "id"));
            if (!sid)
                continue;
            json_t *out = NULL;
            if ((rc = get_output(cli, &f, sid, &out)))
                break;
            if (cli->json) {
                json_array_append(all, out);
            } else {
                fprintf(cli->out, "%s==> %s %s [%s] <==\n", i ? "\n" : "", sid,
                        or_dash(json_string_value(json_object_get(s, "name"))),
                        or_dash(json_string_value(ql_cli_field(s, "step_status|status"))));
                print_output(cli, out);
            }
            json_decref(out);
        }
        if (!rc && cli->json)
            ql_cli_print_json(cli, all);
        json_decref(all);
    }
    json_decref(job);
    json_decref(steps);
    json_decref(data);
    ql_cli_job_finder_free(&f);
    return rc;
}

/* PUT /jobs/status for every job given, one request per project (the body names one). */
static int action_run(ql_cli_t *cli, const ql_cli_args_t *a, const char *action, const char *done) {
    size_t n = a->n_pos;
    char **projects = calloc(n, sizeof *projects);
    if (!projects)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    const char *given = ql_cli_get(a, "project");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (given) {
            projects[i] = strdup(given);
            continue;
        }
        ql_cli_job_finder_t f = {.id = a->pos[i]};
        json_t *job = NULL;
        rc = ql_cli_job_find(cli, &f, &job);
        projects[i] = f.project;
        f.project = NULL;
        ql_cli_job_finder_free(&f);
        json_decref(job);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        if (!projects[i]) {
            rc = ql_cli_fail(cli, QL_CLI_UNREACHABLE, "the server did not say the project of %s",
                             a->pos[i]);
            break;
        }
        bool first = true;
        for (size_t j = 0; j < i; j++)
            first = first && strcmp(projects[j], projects[i]) != 0;
        if (!first)
            continue;
        json_t *ids = json_array();
        for (size_t j = i; j < n; j++)
            if (projects[j] && !strcmp(projects[j], projects[i]))
                json_array_append_new(ids, json_string(a->pos[j]));
        json_t *body =
            json_pack("{s:s,s:o,s:s}", "project", projects[i], "job_ids", ids, "action", action);
        json_t *data = NULL;
        rc = body ? ql_cli_call(cli, "PUT", "/jobs/status", NULL, 0, body, &data)
                  : ql_cli_fail(cli, QL_CLI_USAGE, "job ids must be UTF-8");
        json_decref(body);
        if (!rc && cli->json)
            ql_cli_print_json(cli, data);
        for (size_t j = i; !rc && !cli->json && j < n; j++)
            if (!strcmp(projects[j], projects[i]))
                fprintf(cli->out, "%s job %s\n", done, a->pos[j]);
        json_decref(data);
    }
    for (size_t i = 0; i < n; i++)
        free(projects[i]);
    free(projects);
    return rc;
}

static int pause_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    return action_run(cli, a, "PAUSE", "paused");
}
static int resume_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    return action_run(cli, a, "RESUME", "resumed");
}
static int discard_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    return action_run(cli, a, "DISCARD", "discarded");
}
static int restart_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    return action_run(cli, a, "RESTART", "restarted");
}

#define PROJECT_OPT                                                                                \
    { "project", 'p', "PROJECT", 0, "the job's project (found from the job id when not given)" }

static const ql_cli_opt_t list_opts[] = {
    {"project", 'p', "PROJECT", 0, "only jobs of this project (default: all projects)"},
    {"status", 0, "S,...", 0, "only these: PENDING, RUNNING, ERROR, FINISHED, STOPPED, DISCARDED"},
    {"model", 'm', "MODEL", 0, "only jobs of this model (the server's 'key')"},
    {"type", 0, "T,...", 0, "only these job types (INC_BUILD, INDEX_MERGE, INDEX_REFRESH, ...)"},
    {"all-time", 0, NULL, 0, "jobs created at any time (default: the last week)"},
    QL_CLI_LIST_OPTS,
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t id_opts[] = {
    PROJECT_OPT,
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t delete_opts[] = {
    {"project", 'p', "PROJECT", 0, "only jobs of this project (default: any project)"},
    {"status", 0, "S,...", 0, "the jobs with these statuses (without IDs: every such job)"},
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t submit_opts[] = {
    {"quiet", 'q', NULL, 0, "print only the new job ids, one per line"},
    {NULL, 0, NULL, 0, NULL},
};
static const ql_cli_opt_t wait_opts[] = {
    PROJECT_OPT,
    {"timeout", 't', "DURATION", 0, "give up after this long (120s, 5m, 1h30m; default: never)"},
    {"interval", 0, "DURATION", 0, "longest pause between two polls (default 2s)"},
    {NULL, 0, NULL, 0, NULL},
};

#define ACTION_HELP                                                                                \
    "Allowed states (docs/design/jobs.md): PAUSE from PENDING or RUNNING; RESUME from ERROR or "   \
    "STOPPED;\nRESTART from RUNNING, ERROR or STOPPED; DISCARD from PENDING, RUNNING, ERROR "      \
    "or STOPPED.\nAny other state is refused by the server (exit 1) (PUT /jobs/status)."

static const ql_cli_cmd_t cmds[] = {
    {"list", "[--project P] [--status S,...] [--model M] [--type T,...] [--all-time]",
     "List jobs, newest first",
     "Statuses are the REST display statuses: READY and PENDING jobs show as PENDING, PAUSED "
     "as STOPPED,\nSUCCEED as FINISHED, SUICIDAL as DISCARDED. Follows the pages (GET /jobs).",
     "  qilin job list -p sales --status RUNNING,PENDING\n"
     "  qilin job list --all-time --type INC_BUILD --json",
     list_opts, 0, 0, list_run},
    {"show", "ID [--project P]", "Show a job and its steps",
     "With --json: {\"job\": the job's list item, \"steps\": GET /jobs/{id}/detail}.",
     "  qilin job show 1c5f3e0a-...", id_opts, 1, 1, show_run},
    {"logs", "ID [STEP] [--project P]", "Print the output of a job's steps",
     "STEP is a step id (ID_00) or its number (0, 1, ...); without it every step's output is "
     "printed\nunder a header (GET /jobs/{id}/steps/{step}/output). The server keeps at most\n"
     "kylin.job.execute-output.max-size characters per step; the full log is under its data "
     "directory.",
     "  qilin job logs 1c5f3e0a-... 1", id_opts, 1, 2, logs_run},
    {"pause", "ID... [--project P]", "Pause jobs", ACTION_HELP, "  qilin job pause ID1 ID2",
     id_opts, 1, -1, pause_run},
    {"resume", "ID... [--project P]", "Resume paused or failed jobs", ACTION_HELP,
     "  qilin job resume ID", id_opts, 1, -1, resume_run},
    {"discard", "ID... [--project P]", "Discard jobs (their NEW segments are removed)", ACTION_HELP,
     "  qilin job discard ID", id_opts, 1, -1, discard_run},
    {"restart", "ID... [--project P]", "Restart jobs from their first step", ACTION_HELP,
     "  qilin job restart ID", id_opts, 1, -1, restart_run},
    {"delete", "[ID...] [--status S,...] [--project P]", "Delete final jobs with their logs",
     "Deletes FINISHED and DISCARDED jobs with their steps, outputs and step logs (DELETE "
     "/jobs). The\njobs are the IDs given (those with a --status among them when it is given), "
     "or without IDs\nevery job of --project (of every project without it) with a --status. A "
     "job that is not\nfinal refuses the whole command (exit 1) and nothing is deleted: "
     "discard it first.",
     "  qilin job delete ID1 ID2\n  qilin job delete -p sales --status FINISHED,DISCARDED",
     delete_opts, 0, -1, ql_cli_job_delete_run},
    {"submit", "FILE.yaml|FILE.json|- [-q]", "Submit an ad-hoc job from a definition",
     "The definition is sent as is (POST /jobs): a .json file as JSON, anything else (and - "
     "for stdin)\nas YAML. See docs/job-templates.md for the format.",
     "  qilin job submit backfill.yaml", submit_opts, 1, 1, ql_cli_job_submit_run},
    {"wait", "ID [--timeout DURATION] [--project P]", "Wait until a job stops",
     "Polls the job until it is FINISHED (exit 0) or DISCARDED, ERROR or STOPPED (exit 1: "
     "these need\nsomeone to act), or until --timeout passes (exit 1). Status changes are "
     "reported on stderr.",
     "  qilin job wait 1c5f3e0a-... --timeout 30m", wait_opts, 1, 1, ql_cli_job_wait_run},
};

const ql_cli_group_t ql_cli_group_job = {
    "job",
    "List, show, pause, resume, discard, restart, delete, submit and wait for jobs; step logs",
    "Job ids are unique across projects: --project is optional wherever an ID is given.",
    cmds,
    sizeof cmds / sizeof *cmds,
};
