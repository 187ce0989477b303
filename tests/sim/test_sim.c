/*
 * The simulation harness (sim/ql_sim.h, tools/sim.c): the scenario parser's errors with
 * file:line, the exit codes and messages of `qilin sim`, determinism of its output, the steps
 * that must fail (refused actions, unexpected build results), a manual build racing the
 * dispatcher inside one writer batch, shell steps, and a restart with a step in flight.
 */
#include "scheduler/ql_submit.h"
#include "sim/ql_sim.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define QILIN QL_BUILD_DIR "/tools/qilin"
#define SCENARIOS QL_SOURCE_DIR "/tests/scenarios"

static char tmpdir[256];

static void make_tmp(void) {
    ql_test_tmpdir(tmpdir, sizeof tmpdir, "qilin-test-sim");
}

static void rm_tmp(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(sim, .init = make_tmp, .fini = rm_tmp);

static const char *write_file(const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = calloc(1, (size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

/* Runs `qilin sim ARGS`; returns the exit status, stdout and stderr (malloc'd). */
static int run_cli(const char *args, char **out, char **err) {
    char cmd[4096], o[300], e[300];
    snprintf(o, sizeof o, "%s/cli.out", tmpdir);
    snprintf(e, sizeof e, "%s/cli.err", tmpdir);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' sim %s >'%s' 2>'%s'", tmpdir, QILIN, args, o, e);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "%s", cmd);
    *out = read_all(o);
    *err = read_all(e);
    return WEXITSTATUS(st);
}

/* Loads text as a scenario named t.yaml; returns the error message ("" when it loads). */
static const char *load_error(const char *text) {
    static ql_err_t err;
    memset(&err, 0, sizeof err);
    ql_sim_scenario_t *sc = NULL;
    int rc = ql_sim_scenario_load_buffer(text, strlen(text), "t.yaml", &sc, &err);
    ql_sim_scenario_free(sc);
    return rc ? err.msg : "";
}

#define BASE                                                                                       \
    "name: t\n"                                                                                    \
    "start: \"2026-09-01 10:00:00\"\n"                                                             \
    "projects:\n"                                                                                  \
    "  - name: p1\n"                                                                               \
    "    auto_segment_build_enabled: true\n"                                                       \
    "    models:\n"                                                                                \
    "      - name: m1\n"                                                                           \
    "        partition: {column: DT, format: yyyy-MM-dd}\n"                                        \
    "        auto_segment_build: {enabled: true, trigger_time: \"01:00:00\",\n"                    \
    "                             logical_date_offset_days: 1,\n"                                  \
    "                             data_range_start_time: \"00:00:00\",\n"                          \
    "                             data_range_end_time: \"24:00:00\"}\n"

/* ---- the parser ---- */

static void expect_load_error(const char *text, const char *want) {
    const char *msg = load_error(text);
    cr_expect(strstr(msg, want) != NULL, "want \"%s\" in \"%s\"", want, msg);
}

Test(sim, parser_rejects_unknown_keys_at_every_depth) {
    expect_load_error("name: t\nstart: 0\nstep: []\n", "t.yaml:3: unknown key 'step'");
    expect_load_error(BASE "        segments:\n"
                           "          - {start: 0, end: 10, stauts: READY}\n"
                           "steps: []\n",
                      "t.yaml:14: unknown key 'stauts'");
    expect_load_error(BASE "        auto_segment_build_x: 1\nsteps: []\n",
                      "t.yaml:13: unknown key 'auto_segment_build_x'");
    expect_load_error(BASE "steps:\n"
                           "  - scan\n"
                           "  - expect:\n"
                           "      cycles:\n"
                           "        - {model: m1, state: COVERED,\n"
                           "           targte: [0, 1]}\n",
                      "t.yaml:18: unknown key 'targte'");
    expect_load_error(BASE "steps:\n  - jobs: {model: m1}\n", "t.yaml:14: unknown step 'jobs'");
    expect_load_error(BASE "steps:\n  - job: {model: m1, range: [0, 1], action: PAUSE, x: 1}\n",
                      "t.yaml:14: unknown key 'x'");
    expect_load_error(BASE "templates:\n"
                           "  INC_BUILD:\n"
                           "    steps:\n"
                           "      - {name: a, kind: noop, argv: [x]}\n"
                           "steps: []\n",
                      "t.yaml:16:");
    /* A config key the server does not know is refused with its line and a suggestion. */
    expect_load_error("name: t\nstart: 0\nconfig:\n"
                      "  kylin.model.auto-segment-build.dispatcher-interval: 10\nsteps: []\n",
                      "t.yaml:4: unknown key 'kylin.model.auto-segment-build.dispatcher-interval'");
    expect_load_error("name: t\nstart: 0\nconfig:\n"
                      "  kylin.model.auto-segment-build.dispatcher-interval-ms: 5\nsteps: []\n",
                      "t.yaml:4: kylin.model.auto-segment-build.dispatcher-interval-ms");
}

Test(sim, parser_rejects_bad_times_and_missing_keys) {
    expect_load_error("name: t\nstart: \"2026-9-01 10:00:00\"\nsteps: []\n",
                      "t.yaml:2: key 'start': expected a time \"YYYY-MM-DD HH:mm:ss\"");
    expect_load_error("name: t\nstart: \"2026-02-30 10:00:00\"\nsteps: []\n", "t.yaml:2:");
    expect_load_error("name: t\nstart: \"2026-09-01T10:00:00\"\nsteps: []\n", "t.yaml:2:");
    expect_load_error("start: 0\nsteps: []\n", "t.yaml:1: missing required key 'name'");
    expect_load_error("name: t\nsteps: []\n", "t.yaml:1: missing required key 'start'");
    expect_load_error("name: t\nstart: 0\n", "t.yaml:1: missing required key 'steps'");
    expect_load_error("name: t\ntimezone: Mars/Olympus\nstart: 0\nsteps: []\n",
                      "t.yaml:2: timezone: 'Mars/Olympus' is not a known time zone");
    expect_load_error(BASE "steps:\n  - advance: 90 s\n", "t.yaml:14:");
    expect_load_error(BASE "steps:\n  - set_time: yesterday\n", "t.yaml:14: set_time: expected");
    expect_load_error(BASE "steps:\n  - build: {model: m1, start: 0}\n",
                      "t.yaml:14: missing required key 'end'");
    expect_load_error(BASE "        segments:\n"
                           "          - {start: 10, end: 10, status: READY}\n"
                           "steps: []\n",
                      "t.yaml:14: segment: start must be earlier than end");
}

Test(sim, parser_resolves_names_at_load_time) {
    expect_load_error(BASE "steps:\n  - build: {model: m2, start: 0, end: 1}\n",
                      "t.yaml:14: unknown model 'm2'");
    expect_load_error(BASE "steps:\n  - set: {project: p9, auto_segment_build_enabled: true}\n",
                      "t.yaml:14: unknown project 'p9'");
    /* Two projects with the same model name need project:. */
    expect_load_error("name: t\nstart: 0\nprojects:\n"
                      "  - {name: p1, models: [{name: m1}]}\n"
                      "  - {name: p2, models: [{name: m1}]}\n"
                      "steps:\n  - expect: {segments: [{model: m1, none: true}]}\n",
                      "t.yaml:7: model 'm1' is in several projects");
    cr_expect_str_empty(
        load_error("name: t\nstart: 0\nprojects:\n"
                   "  - {name: p1, models: [{name: m1}]}\n"
                   "  - {name: p2, models: [{name: m1}]}\n"
                   "steps:\n"
                   "  - expect: {segments: [{project: p2, model: m1, none: true}]}\n"));
    expect_load_error(BASE "        segments:\n"
                           "          - {start: 0, end: 10, status: READY, job: RUNNING}\n"
                           "steps: []\n",
                      "t.yaml:14: job: only a NEW segment has a job");
    expect_load_error(BASE "steps:\n  - expect: {cycles: [{model: m1, state: NO_OVERLAP}]}\n",
                      "t.yaml:14: state: a scan that finds NO_OVERLAP submits");
    expect_load_error(BASE "steps:\n  - job: {model: m1, range: [0, 1]}\n",
                      "t.yaml:14: job: give exactly one of action: or finish:");
}

/* ---- the command ---- */

Test(sim, cli_exit_codes_and_messages) {
    write_file("pass.yaml", BASE "steps:\n"
                                 "  - scan\n"
                                 "  - expect: {cycles: [{model: m1, state: SUBMITTED}]}\n");
    write_file("fail.yaml", BASE "steps:\n"
                                 "  - scan\n"
                                 "  - expect:\n"
                                 "      cycles:\n"
                                 "        - {model: m1, state: COVERED}\n");
    write_file("invalid.yaml", BASE "steps:\n  - scan\n  - expect: {cycles: [{modle: m1}]}\n");
    char *out, *err;
    cr_expect_eq(run_cli("pass.yaml", &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "ok pass.yaml") != NULL, "%s", out);
    free(out);
    free(err);

    cr_expect_eq(run_cli("fail.yaml", &out, &err), 1);
    cr_expect(strstr(err, "fail.yaml: step 2 (line 15) failed") != NULL, "%s", err);
    cr_expect(strstr(err, "fail.yaml:17: cycles p1/m1: expected state COVERED, found SUBMITTED") !=
                  NULL,
              "%s", err);
    free(out);
    free(err);

    cr_expect_eq(run_cli("invalid.yaml", &out, &err), 2);
    cr_expect(strstr(err, "invalid.yaml:15: unknown key 'modle'") != NULL, "%s", err);
    free(out);
    free(err);

    /* Every file runs; the worst status wins. */
    cr_expect_eq(run_cli("pass.yaml fail.yaml pass.yaml", &out, &err), 1);
    free(out);
    free(err);
    cr_expect_eq(run_cli("fail.yaml invalid.yaml pass.yaml", &out, &err), 2);
    cr_expect(strstr(out, "ok pass.yaml") != NULL);
    free(out);
    free(err);
    cr_expect_eq(run_cli("missing.yaml", &out, &err), 2);
    cr_expect(strstr(err, "missing.yaml") != NULL, "%s", err);
    free(out);
    free(err);
    cr_expect_eq(run_cli("--help", &out, &err), 0);
    cr_expect(strstr(out, "usage: qilin sim") != NULL);
    free(out);
    free(err);
    cr_expect_eq(run_cli("--bogus pass.yaml", &out, &err), 2);
    free(out);
    free(err);
    cr_expect_eq(run_cli("", &out, &err), 2);
    free(out);
    free(err);
}

Test(sim, cli_trace_one_line_per_model_per_scan) {
    write_file("trace.yaml", BASE "      - name: m2\n"
                                  "steps:\n"
                                  "  - scan\n"
                                  "  - run: 2m\n");
    char *out, *err;
    cr_assert_eq(run_cli("--trace trace.yaml", &out, &err), 0, "%s", err);
    /* 1 scan + 4 scans of the run (interval 30 s), two models each. */
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "] step ")); p++)
        lines++;
    cr_expect_eq(lines, 10, "%s", out);
    cr_expect(strstr(out, "[2026-09-01 10:00:00+00:00] step 1 scan p1/m1: SUBMITTED") != NULL, "%s",
              out);
    cr_expect(strstr(out, "[2026-09-01 10:01:30+00:00] step 2 scan p1/m2: SKIPPED "
                          "reason=full_load") != NULL,
              "%s", out);
    free(out);
    free(err);
    cr_assert_eq(run_cli("--json trace.yaml", &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "{\"event\":\"decision\",\"file\":\"trace.yaml\",\"step\":1,") != NULL,
              "%s", out);
    cr_expect(strstr(out, "\"event\":\"result\",\"file\":\"trace.yaml\",\"name\":\"t\","
                          "\"status\":\"pass\",\"exit\":0}") != NULL,
              "%s", out);
    free(out);
    free(err);
}

Test(sim, json_output_is_byte_identical_across_runs) {
    const char *files = SCENARIOS "/chain_templates_sim_duration_job_lifecycle.yaml " SCENARIOS
                                  "/restart_cache_loss_covered_again_from_metadata.yaml " SCENARIOS
                                  "/dst_pacific_apia_skipped_day.yaml " SCENARIOS
                                  "/run_fixed_delay_scan_count.yaml";
    char args[2048];
    snprintf(args, sizeof args, "--json %s", files);
    char *a, *b, *ea, *eb;
    cr_assert_eq(run_cli(args, &a, &ea), 0, "%s", ea);
    cr_assert_eq(run_cli(args, &b, &eb), 0, "%s", eb);
    cr_expect(strlen(a) > 1000);
    cr_expect_str_eq(a, b);
    free(a);
    free(b);
    free(ea);
    free(eb);
}

/* The library: every scenario file, traced as JSON twice into memory, gives the same bytes, and
 * the ids in it (deterministic store ids) too. */
Test(sim, every_scenario_is_deterministic) {
    FILE *ls = popen("ls " SCENARIOS "/*.yaml", "r");
    cr_assert_not_null(ls);
    char path[1024];
    int n = 0;
    while (fgets(path, sizeof path, ls)) {
        path[strcspn(path, "\n")] = '\0';
        char *buf[2] = {0};
        size_t len[2] = {0};
        for (int k = 0; k < 2; k++) {
            FILE *mem = open_memstream(&buf[k], &len[k]);
            ql_sim_opts_t opts = {.trace = mem, .json = true};
            ql_sim_result_t res;
            cr_expect_eq(ql_sim_run_file(path, &opts, &res), QL_SIM_PASS, "%s: %s", path, res.msg);
            fclose(mem);
        }
        cr_expect_eq(len[0], len[1], "%s", path);
        cr_expect(memcmp(buf[0], buf[1], len[0]) == 0, "%s", path);
        free(buf[0]);
        free(buf[1]);
        n++;
    }
    pclose(ls);
    cr_expect_gt(n, 50);
}

/* ---- steps that must fail ---- */

static ql_sim_scenario_t *load(const char *text) {
    ql_sim_scenario_t *sc;
    ql_err_t err = {0};
    cr_assert_eq(ql_sim_scenario_load_buffer(text, strlen(text), "t.yaml", &sc, &err), 0, "%s",
                 err.msg);
    return sc;
}

static int exec(ql_sim_t *sim, const char *step, ql_sim_result_t *res) {
    return ql_sim_exec_buffer(sim, step, strlen(step), res);
}

#define R "[\"2026-08-31 00:00:00\", \"2026-09-01 00:00:00\"]"
#define SEG(state)                                                                                 \
    "        segments:\n"                                                                          \
    "          - {start: \"2026-08-31 00:00:00\", end: \"2026-09-01 00:00:00\", status: NEW,\n"    \
    "             job: " state "}\n"
#define MODEL(name)                                                                                \
    "      - name: " name "\n"                                                                     \
    "        partition: {column: DT, format: yyyy-MM-dd}\n"

static const char refusals[] =
    "name: t\n"
    "start: \"2026-09-01 10:00:00\"\n"
    "projects:\n"
    "  - name: p1\n"
    "    models:\n" MODEL("m_ready") SEG("READY") MODEL("m_running") SEG("RUNNING") MODEL("m_error")
        SEG("ERROR") MODEL("m_paused") SEG("PAUSED") MODEL("m_succeed") SEG("SUCCEED")
            MODEL("m_discarded") SEG("DISCARDED") "steps: []\n";

/* docs/design/jobs.md, Actions: every action in a state the table does not allow fails the step. */
Test(sim, refused_actions_fail_the_scenario) {
    ql_sim_scenario_t *sc = load(refusals);
    ql_sim_t *sim;
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_new(sc, NULL, &sim, &res), QL_SIM_PASS, "%s", res.msg);
    static const struct {
        const char *model, *action;
    } refused[] = {
        {"m_running", "RESUME"},   {"m_ready", "RESUME"},      {"m_ready", "RESTART"},
        {"m_error", "PAUSE"},      {"m_paused", "PAUSE"},      {"m_succeed", "PAUSE"},
        {"m_succeed", "RESUME"},   {"m_succeed", "RESTART"},   {"m_succeed", "DISCARD"},
        {"m_discarded", "RESUME"}, {"m_discarded", "DISCARD"}, {"m_discarded", "RESTART"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char step[256];
        snprintf(step, sizeof step, "job: {model: %s, range: " R ", action: %s}", refused[i].model,
                 refused[i].action);
        cr_expect_eq(exec(sim, step, &res), QL_SIM_FAIL, "%s", step);
        cr_expect(strstr(res.msg, "is not allowed while the job is") != NULL, "%s", res.msg);
        cr_expect(strstr(res.msg, "QL-00007") != NULL, "%s", res.msg);
    }
    /* finish needs a READY, PENDING or RUNNING job. */
    cr_expect_eq(exec(sim, "job: {model: m_error, range: " R ", finish: SUCCEED}", &res),
                 QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "only READY, PENDING or RUNNING jobs can be finished") != NULL, "%s",
              res.msg);
    /* No job with that range. */
    cr_expect_eq(exec(sim, "job: {model: m_ready, range: [0, 1], action: PAUSE}", &res),
                 QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "expected a job with that data range, found none") != NULL, "%s",
              res.msg);
    /* Nothing changed: the states are as set up. */
    cr_expect_eq(exec(sim,
                      "expect: {jobs: [{model: m_running, state: RUNNING}, {model: m_error, "
                      "state: ERROR}, {model: m_succeed, state: SUCCEED}]}",
                      &res),
                 QL_SIM_PASS, "%s", res.msg);
    /* And what the table allows passes. */
    cr_expect_eq(exec(sim, "job: {model: m_ready, range: " R ", action: PAUSE}", &res), QL_SIM_PASS,
                 "%s", res.msg);
    cr_expect_eq(exec(sim, "job: {model: m_ready, range: " R ", action: RESUME}", &res),
                 QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "job: {model: m_running, range: " R ", action: RESTART}", &res),
                 QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "job: {model: m_running, range: " R ", finish: WARNING}", &res),
                 QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim,
                      "expect: {segments: [{model: m_running, start: \"2026-08-31 00:00:00\", "
                      "end: \"2026-09-01 00:00:00\", status: WARNING}]}",
                      &res),
                 QL_SIM_PASS, "%s", res.msg);
    /* An unparsable step is invalid, not failed. */
    cr_expect_eq(exec(sim, "job: {model: nope, range: [0, 1], action: PAUSE}", &res),
                 QL_SIM_INVALID);
    ql_sim_free(sim);
    ql_sim_scenario_free(sc);
}

Test(sim, unexpected_build_results_fail_the_scenario) {
    ql_sim_scenario_t *sc = load(BASE "steps: []\n");
    ql_sim_t *sim;
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_new(sc, NULL, &sim, &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim,
                      "build: {model: m1, start: \"2026-08-31 00:00:00\", end: \"2026-09-01 "
                      "00:00:00\", expect_error: KE-010022202}",
                      &res),
                 QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "expected error KE-010022202, found it accepted") != NULL, "%s",
              res.msg);
    cr_expect_eq(exec(sim,
                      "build: {model: m1, start: \"2026-08-31 00:00:00\", end: \"2026-09-01 "
                      "00:00:00\"}",
                      &res),
                 QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "expected it to be accepted, found error KE-010022202") != NULL, "%s",
              res.msg);
    cr_expect_eq(exec(sim,
                      "build: {model: m1, start: \"2026-08-31 12:00:00\", end: \"2026-09-02 "
                      "00:00:00\", expect_error: QL-00015}",
                      &res),
                 QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "expected error QL-00015, found KE-010022202") != NULL, "%s",
              res.msg);
    cr_expect_eq(exec(sim, "expect: {submitted: 0, jobs: [{model: m1, submitter: ADMIN}]}", &res),
                 QL_SIM_PASS, "%s", res.msg);
    ql_sim_free(sim);
    ql_sim_scenario_free(sc);
}

/* ---- the final guard: a manual build committed in the same writer batch, first ---- */

/* The writer passes one arg to the mutation and its answer: the op comes first, so the mutation
 * (ql_submit_fn) reads it as its ql_submit_op_t. */
typedef struct {
    ql_submit_op_t op;
    int status;
    bool done;
} answer_t;

static void answer_cb(void *arg, int status, const ql_err_t *err) {
    (void)err;
    answer_t *a = arg;
    a->status = status;
    a->done = true;
}

Test(sim, manual_build_racing_inside_the_writer_batch) {
    ql_sim_scenario_t *sc = load(BASE "steps: []\n");
    ql_sim_t *sim;
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_new(sc, NULL, &sim, &res), QL_SIM_PASS, "%s", res.msg);
    answer_t a = {0};
    a.op = (ql_submit_op_t){
        .kind = QL_SUBMIT_BUILD,
        .templates = ql_sim_templates(sim),
        .start = 1788134400000,
        .end = 1788220800000,
        .priority = 3,
        .submitter = "ADMIN",
        .now = ql_clock_now_ms(ql_sim_clock(sim)),
    };
    cr_assert_eq(ql_sim_model_id(sim, NULL, "m1", &a.op.model), 0);
    /* Queued, not committed: the scan reads the store without it and decides NO_OVERLAP; its
     * submission is applied after the manual build in the same batch and re-checks the overlap
     * inside its own transaction. */
    cr_assert_eq(ql_writer_submit(ql_sim_writer(sim), ql_submit_fn, &a, answer_cb), 0);
    cr_assert_eq(exec(sim, "scan", &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect(a.done);
    cr_expect_eq(a.status, 0);
    ql_decision_t d;
    cr_assert_eq(ql_dispatcher_decision(ql_sim_dispatcher(sim), &a.op.model, &d), 0);
    cr_expect_eq(d.state, QL_CYCLE_RETRYABLE_FAILURE, "%s", ql_cycle_state_name(d.state));
    cr_expect(strstr(d.message, "overlaps with the built segments") != NULL, "%s", d.message);
    cr_expect_eq(exec(sim,
                      "expect: {submitted: 0, jobs: [{model: m1, submitter: ADMIN, state: READY}], "
                      "cycles: [{model: m1, state: RETRYABLE_FAILURE}]}",
                      &res),
                 QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "scan", &res), QL_SIM_PASS);
    cr_expect_eq(
        exec(sim, "expect: {cycles: [{model: m1, state: IN_PROGRESS}], submitted: 0}", &res),
        QL_SIM_PASS, "%s", res.msg);
    ql_sim_free(sim);
    ql_sim_scenario_free(sc);
}

/* ---- shell steps ---- */

static const char shell_scenario[] =
    BASE "templates:\n"
         "  INC_BUILD:\n"
         "    steps:\n"
         "      - {name: Load, kind: shell, argv: [/bin/false], sim_duration: 5m}\n"
         "steps:\n"
         "  - run: 4m\n"
         "  - expect: {jobs: [{model: m1, state: RUNNING}]}\n"
         "  - run: 2m\n"
         "  - expect: {jobs: [{model: m1, state: SUCCEED}], cycles: [{model: m1, state: "
         "COVERED}]}\n";

Test(sim, shell_steps_need_allow_shell) {
    const char *path = write_file("shell.yaml", shell_scenario);
    ql_sim_result_t res;
    cr_expect_eq(ql_sim_run_file(path, NULL, &res), QL_SIM_INVALID);
    cr_expect(strstr(res.msg, "shell.yaml:16: step 'Load' of INC_BUILD is a shell step") != NULL,
              "%s", res.msg);
    cr_expect(strstr(res.msg, "--allow-shell") != NULL);
    /* With --allow-shell the step "runs": it succeeds after its sim_duration, nothing is spawned
     * (argv is /bin/false). */
    ql_sim_opts_t opts = {.allow_shell = true};
    cr_expect_eq(ql_sim_run_file(path, &opts, &res), QL_SIM_PASS, "%s", res.msg);
    char *out, *err;
    cr_expect_eq(run_cli("shell.yaml", &out, &err), 2);
    free(out);
    free(err);
    cr_expect_eq(run_cli("--allow-shell shell.yaml", &out, &err), 0, "%s", err);
    free(out);
    free(err);
}

/* ---- a restart with a step in flight ---- */

/* docs/design/jobs.md, Startup recovery: "resume from the first step that did not succeed". The
 * first step (5 minutes) is done when the process dies in the second (30 minutes): after the
 * restart only the second runs again, so the job ends 30 minutes after the restart, not 35. */
Test(sim, restart_with_a_step_in_flight_resumes_from_the_unfinished_step) {
    ql_sim_scenario_t *sc = load(BASE "templates:\n"
                                      "  INC_BUILD:\n"
                                      "    steps:\n"
                                      "      - {name: one, kind: noop, sim_duration: 5m}\n"
                                      "      - {name: two, kind: sleep, duration: 30m}\n"
                                      "steps: []\n");
    ql_sim_t *sim;
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_new(sc, NULL, &sim, &res), QL_SIM_PASS, "%s", res.msg);
    cr_assert_eq(exec(sim, "run: 10m", &res), QL_SIM_PASS);
    cr_assert_eq(exec(sim, "restart", &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "expect: {jobs: [{model: m1, state: READY}]}", &res), QL_SIM_PASS, "%s",
                 res.msg);
    cr_expect_eq(exec(sim, "run: 29m", &res), QL_SIM_PASS);
    cr_expect_eq(exec(sim, "expect: {jobs: [{model: m1, state: RUNNING}]}", &res), QL_SIM_PASS,
                 "%s", res.msg);
    cr_expect_eq(exec(sim, "run: 1m1ms", &res), QL_SIM_PASS);
    cr_expect_eq(exec(sim,
                      "expect: {jobs: [{model: m1, state: SUCCEED}], cycles: [{model: m1, "
                      "state: COVERED}], submitted: 1}",
                      &res),
                 QL_SIM_PASS, "%s", res.msg);
    /* Restarts in the middle of a run's steps, again and again, leave nothing behind. */
    cr_expect_eq(exec(sim, "set_time: \"2026-09-03 10:00:00\"", &res), QL_SIM_PASS);
    for (int i = 0; i < 5; i++) {
        cr_expect_eq(exec(sim, "run: 3m", &res), QL_SIM_PASS);
        cr_expect_eq(exec(sim, "restart", &res), QL_SIM_PASS);
    }
    cr_expect_eq(exec(sim, "run: 40m", &res), QL_SIM_PASS);
    cr_expect_eq(exec(sim, "expect: {submitted: 2, cycles: [{model: m1, state: COVERED}]}", &res),
                 QL_SIM_PASS, "%s", res.msg);
    ql_sim_free(sim);
    ql_sim_scenario_free(sc);
}

/* ---- logs ---- */

/* Log lines carry virtual time: a scenario starting in 2011 logs in 2011. */
Test(sim, log_lines_carry_virtual_time) {
    ql_sim_scenario_t *sc = load("name: t\n"
                                 "start: \"2011-12-30 10:00:00\"\n"
                                 "projects:\n"
                                 "  - name: p1\n"
                                 "    auto_segment_build_enabled: true\n"
                                 "    models:\n"
                                 "      - name: m1\n"
                                 "        partition: {column: DT, format: yyyy-MM-dd}\n"
                                 "        auto_segment_build: {enabled: true, trigger_time: "
                                 "\"01:00:00\", logical_date_offset_days: 1, "
                                 "data_range_start_time: \"00:00:00\", data_range_end_time: "
                                 "\"24:00:00\"}\n"
                                 "steps:\n"
                                 "  - advance: 90s\n"
                                 "  - run: 1m\n");
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    ql_sim_opts_t opts = {.log_out = mem, .log_level = QL_LOG_INFO};
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_run(sc, &opts, &res), QL_SIM_PASS, "%s", res.msg);
    fclose(mem);
    cr_expect(strstr(buf, "INFO  2011-12-30T10:01:30.000Z dispatcher: cycle SUBMITTED project=p1 "
                          "model=m1") != NULL,
              "%s", buf);
    cr_expect(strstr(buf, "INFO  2011-12-30T10:01:30.000Z scheduler: job RUNNING -> SUCCEED") !=
                  NULL,
              "%s", buf);
    free(buf);
    ql_sim_scenario_free(sc);
}

/* ---- the server: the lock and the server expectation (docs/simulation.md, The server) ---- */

Test(sim, lock_and_server_keys_are_checked_at_load_time) {
    expect_load_error(BASE "steps:\n  - lock: {take: db2, give: x}\n", "give");
    expect_load_error(BASE "steps:\n  - lock: grab\n", "lock: expected {take: NAME} or release");
    expect_load_error(BASE "steps:\n  - lock: {take: \"\"}\n", "the server's name must have");
    /* At the top level there is nothing to release: only {take: NAME}. */
    expect_load_error(BASE "lock: release\nsteps: []\n", "lock: expected {take: NAME}");
    expect_load_error(BASE "steps:\n  - expect: {server: {}}\n", "server: nothing to check");
    expect_load_error(BASE "steps:\n  - expect: {server: {master: maybe}}\n", "master");
    expect_load_error(BASE "steps:\n  - expect: {server: {epoch: -1}}\n", "epoch");
    cr_expect_str_eq(load_error(BASE "lock: {take: db2}\nsteps:\n  - lock: release\n"), "");
}

/* A lock step that does not fit the lock's state fails the run; the server expectation says
 * what it found. */
Test(sim, lock_steps_and_server_expectations_fail_with_what_was_found) {
    ql_sim_scenario_t *sc = load(BASE "steps: []\n");
    ql_sim_t *sim;
    ql_sim_result_t res;
    cr_assert_eq(ql_sim_new(sc, NULL, &sim, &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "lock: release", &res), QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "no other server holds the job engine lock") != NULL, "%s", res.msg);
    cr_expect_eq(exec(sim, "expect: {server: {master: true, epoch: 1}}", &res), QL_SIM_PASS, "%s",
                 res.msg);
    cr_expect_eq(exec(sim, "lock: {take: db2}", &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "lock: {take: db3}", &res), QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "server 'db2' already holds the job engine lock") != NULL, "%s",
              res.msg);
    /* Not told yet: still the master, with the epoch moved. */
    cr_expect_eq(exec(sim, "expect: {server: {master: false, epoch: 1}}", &res), QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "expected the fencing epoch 1, found 2") != NULL, "%s", res.msg);
    cr_expect(strstr(res.msg, "expected not the master, found the master") != NULL, "%s", res.msg);
    /* Its check of the epoch, a second after its start, demotes it; the scheduler and the
     * dispatcher are gone, and a cycle expectation says why there is no decision. A second
     * later it tries the lock again and learns who holds it. */
    cr_expect_eq(exec(sim, "run: 3s", &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_null(ql_sim_sched(sim));
    cr_expect_null(ql_sim_dispatcher(sim));
    cr_expect_eq(exec(sim, "expect: {server: {master: true}}", &res), QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "the job engine lock is held by server 'db2'") != NULL, "%s",
              res.msg);
    cr_expect_eq(exec(sim, "expect: {cycles: [{model: m1}]}", &res), QL_SIM_FAIL);
    cr_expect(strstr(res.msg, "the server is not the master") != NULL, "%s", res.msg);
    /* A restart while db2 holds the lock starts a standby. */
    cr_expect_eq(exec(sim, "restart", &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "expect: {server: {master: false, epoch: 2}}", &res), QL_SIM_PASS, "%s",
                 res.msg);
    cr_expect_eq(exec(sim, "lock: release", &res), QL_SIM_PASS, "%s", res.msg);
    /* Its first try after the restart takes the lock; the scan 30 s into the run submits. */
    cr_expect_eq(exec(sim, "run: 1m", &res), QL_SIM_PASS, "%s", res.msg);
    cr_expect_eq(exec(sim, "expect: {server: {master: true, epoch: 3}, submitted: 1}", &res),
                 QL_SIM_PASS, "%s", res.msg);
    cr_expect_not_null(ql_sim_sched(sim));
    ql_sim_free(sim);
    ql_sim_scenario_free(sc);
}
