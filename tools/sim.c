/*
 * qilin sim: runs scenario files on the simulator (sim/ql_sim.h; docs/design/scenarios.md;
 * the user guide is docs/simulation.md). Exit 0 when every expectation of every file holds, 1 when
 * one fails, 2 when a file is invalid; every file runs, and the worst status is the exit code.
 */
#include "cli.h"
#include "sim/ql_sim.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: qilin sim [--trace] [--json] [--allow-shell] [--log LEVEL] [--store-url URL]\n"
            "                 FILE.yaml [FILE.yaml ...]\n"
            "\n"
            "Replays each scenario on the real scheduler, dispatcher and store, on a virtual\n"
            "clock, in a fresh temporary store, and checks its expectations (docs/simulation.md).\n"
            "\n"
            "  --trace        print each scan's decision per model, one line each, with the\n"
            "                 virtual time\n"
            "  --json         the same as JSON lines, plus one result line per file\n"
            "  --allow-shell  let shell steps of the templates \"run\": they succeed after their\n"
            "                 sim_duration (without it, a scenario with a shell step is invalid)\n"
            "  --log LEVEL    write the engine's log lines (debug, info, warn, error) to stderr;\n"
            "                 they carry virtual time\n"
            "  --store-url URL  run on a PostgreSQL store instead of LMDB: a fresh schema of\n"
            "                 the database at URL (a postgresql:// URL or a libpq conninfo),\n"
            "                 dropped after each file; the output is the same as on LMDB\n"
            "\n"
            "Exit status: 0 every expectation holds, 1 one failed (the file, step, expected and\n"
            "found are printed), 2 a file is invalid (file:line: reason).\n");
}

static const char *status_name(int status) {
    return status == QL_SIM_PASS ? "pass" : status == QL_SIM_FAIL ? "fail" : "invalid";
}

static void print_json_result(const char *file, const char *name, const ql_sim_result_t *res) {
    json_t *o = json_pack("{s:s, s:s, s:s?, s:s, s:i}", "event", "result", "file", file, "name",
                          name, "status", status_name(res->status), "exit", res->status);
    if (!o)
        return;
    if (res->status != QL_SIM_PASS) {
        if (res->step)
            json_object_set_new(o, "step", json_integer((json_int_t)res->step));
        if (res->line)
            json_object_set_new(o, "line", json_integer(res->line));
        json_object_set_new(o, "message", json_string(res->msg));
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(o);
}

/* Prints a failure: the file, the step number and line, then each mismatch indented. */
static void print_failure(const char *file, const ql_sim_result_t *res) {
    if (res->status == QL_SIM_INVALID) {
        fprintf(stderr, "%s\n", res->msg);
        return;
    }
    fprintf(stderr, "%s: step %zu (line %u) failed:\n", file, res->step, res->line);
    const char *p = res->msg;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(stderr, "  %.*s\n", (int)n, p);
        p += n + (nl ? 1 : 0);
    }
}

int ql_cmd_sim(int argc, char **argv) {
    ql_sim_opts_t opts = {.log_level = QL_LOG_OFF};
    bool json = false, trace = false;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first++) {
        const char *a = argv[first];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--trace")) {
            trace = true;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--allow-shell")) {
            opts.allow_shell = true;
        } else if (!strcmp(a, "--store-url") && first + 1 < argc) {
            opts.store_url = argv[++first];
        } else if (!strncmp(a, "--store-url=", 12)) {
            opts.store_url = a + 12;
        } else if (!strcmp(a, "--log") && first + 1 < argc) {
            if (ql_log_level_parse(argv[++first], &opts.log_level)) {
                fprintf(stderr, "qilin sim: --log: '%s' is not debug, info, warn or error\n",
                        argv[first]);
                return 2;
            }
            opts.log_out = stderr;
        } else if (!strcmp(a, "--")) {
            first++;
            break;
        } else {
            fprintf(stderr, "qilin sim: unknown option '%s' (see qilin sim --help)\n", a);
            return 2;
        }
    }
    if (first >= argc) {
        usage(stderr);
        return 2;
    }
    if (trace || json) {
        opts.trace = stdout;
        opts.json = json;
    }
    int worst = QL_SIM_PASS;
    for (int i = first; i < argc; i++) {
        const char *file = argv[i];
        ql_sim_result_t res;
        ql_sim_scenario_t *sc = NULL;
        ql_err_t err = {0};
        if (ql_sim_scenario_load_file(file, &sc, &err)) {
            memset(&res, 0, sizeof res);
            res.status = QL_SIM_INVALID;
            snprintf(res.msg, sizeof res.msg, "%s", err.msg);
        } else {
            ql_sim_run(sc, &opts, &res);
        }
        const char *name = sc ? ql_sim_scenario_name(sc) : NULL;
        if (json)
            print_json_result(file, name, &res);
        if (res.status != QL_SIM_PASS)
            print_failure(file, &res);
        else if (!json)
            printf("ok %s: %s (%zu steps)\n", file, name, ql_sim_scenario_steps(sc));
        fflush(stdout);
        if (res.status > worst)
            worst = res.status;
        ql_sim_scenario_free(sc);
    }
    return worst;
}
