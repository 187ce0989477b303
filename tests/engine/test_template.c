/* Job templates: conf/jobs.yaml, load-time errors, substitution, ad-hoc jobs, the stored form. */
#include "base/ql_error.h"
#include "base/ql_yaml.h"
#include "engine/ql_template.h"
#include "tests/common/mem_util.h"

#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define JOBS_YAML QL_SOURCE_DIR "/conf/jobs.yaml"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static ql_templates_t *load_ok(const char *text) {
    ql_templates_t *t = NULL;
    ql_err_t err;
    ql_err_clear(&err);
    int rc = ql_templates_load_buffer(text, strlen(text), "jobs.yaml", &t, &err);
    cr_assert_eq(rc, 0, "load failed: %s\n%s", err.msg, text);
    return t;
}

/* Asserts that text fails with QL_EINVAL and a message that starts with want. */
static void expect_error(const char *text, const char *want) {
    ql_templates_t *t = NULL;
    ql_err_t err;
    ql_err_clear(&err);
    int rc = ql_templates_load_buffer(text, strlen(text), "jobs.yaml", &t, &err);
    cr_assert_eq(rc, QL_EINVAL, "expected an error '%s' for:\n%s\ngot rc %d", want, text, rc);
    cr_assert_null(t);
    cr_assert_eq(strncmp(err.msg, want, strlen(want)), 0, "message\n  '%s'\nshould start\n  '%s'",
                 err.msg, want);
}

/* A file whose INC_BUILD chain is the given step lines (which start at line 4, indented by 6). */
#define STEPS(lines) "templates:\n  INC_BUILD:\n    steps:\n" lines

static const ql_stepdef_t *find_step(const ql_templates_t *t, const char *set, const char *type,
                                     size_t i) {
    const ql_chain_t *c;
    ql_err_t err;
    cr_assert_eq(ql_templates_find(t, set, type, &c, &err), 0, "%s", err.msg);
    cr_assert_lt(i, c->n_steps);
    return &c->steps[i];
}

/* The parameters a runner would pass for a build of model m1, with a hostile model name. */
#define HOSTILE_MODEL "m1\"; rm -rf ~; echo $(id) `id` '"
static const ql_param_t build_params[] = {
    {"QILIN_JOB_ID", "job-1"},
    {"QILIN_JOB_TYPE", "INC_BUILD"},
    {"QILIN_PROJECT", "p1"},
    {"QILIN_MODEL", HOSTILE_MODEL},
    {"QILIN_SEGMENT_ID", "seg-1"},
    {"QILIN_SEGMENT_START", "1788192000000"},
    {"QILIN_SEGMENT_END", "1788278400000"},
    {"QILIN_SEGMENT_START_FMT", "2026-09-01"},
    {"QILIN_SEGMENT_END_FMT", "2026-09-02"},
    {"QILIN_STEP_ID", "job-1_01"},
};
#define N_BUILD_PARAMS (sizeof build_params / sizeof build_params[0])

static bool env_has(char **envp, const char *entry) {
    for (; *envp; envp++)
        if (strcmp(*envp, entry) == 0)
            return true;
    return false;
}

/* Runs an expanded shell step the way a runner would (execve, nothing else), returns stdout. */
static char *run(const ql_step_exec_t *ex) {
    size_t n = ex->n_env;
    char **envp = calloc(n + 2, sizeof *envp);
    memcpy(envp, ex->envp, n * sizeof *envp);
    envp[n] = "PATH=/usr/bin:/bin";
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* Nothing of Criterion's may run in the child: with --full-stats even a passing
         * assertion messages the runner, which hangs on a message from a stranger. */
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execve(ex->argv[0], ex->argv, envp);
        _exit(127);
    }
    cr_assert_geq(pid, 0);
    close(fds[1]);
    static char out[4096];
    size_t got = 0;
    ssize_t r;
    while ((r = read(fds[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "step exited with %d", status);
    free(envp);
    return out;
}

/* ---- conf/jobs.yaml ------------------------------------------------------------------------ */

Test(template, default_file_loads) {
    ql_templates_t *t = NULL;
    ql_err_t err;
    cr_assert_eq(ql_templates_load_file(JOBS_YAML, &t, &err), 0, "%s", err.msg);
    cr_assert_str_eq(t->source, JOBS_YAML);
    const char *types[] = {"INC_BUILD", "INDEX_REFRESH", "INDEX_MERGE", "INDEX_BUILD"};
    for (size_t i = 0; i < 4; i++) {
        const ql_chain_t *c;
        cr_assert_eq(ql_templates_find(t, NULL, types[i], &c, &err), 0, "%s", err.msg);
        cr_assert_str_eq(c->job_type, types[i]);
        cr_assert_geq(c->n_steps, 2);
        /* Defaults must stay fast: nothing sleeps longer than a second. */
        for (size_t j = 0; j < c->n_steps; j++) {
            cr_assert(c->steps[j].kind != QL_STEP_SLEEP || c->steps[j].duration_ms <= 1000);
            cr_assert(c->steps[j].kind != QL_STEP_FAIL);
        }
        cr_assert_str_eq(c->steps[c->n_steps - 1].name, "Update metadata");
        cr_assert_eq(c->steps[c->n_steps - 1].kind, QL_STEP_NOOP);
    }
    const ql_stepdef_t *s = find_step(t, NULL, "INC_BUILD", 1);
    cr_assert_str_eq(s->name, "Load data to index");
    cr_assert_eq(s->kind, QL_STEP_SHELL);
    cr_assert_eq(s->argc, 3);
    cr_assert_str_eq(s->argv[0], "/bin/sh");
    cr_assert_eq(s->timeout_ms, 60000);
    cr_assert_eq(s->retries, -1, "unset retries defer to kylin.job.retry");
    cr_assert(ql_templates_has_set(t, "echo"));
    ql_templates_free(t);
}

Test(template, default_build_step_runs_and_keeps_values_out_of_the_script) {
    ql_templates_t *t = NULL;
    ql_err_t err;
    cr_assert_eq(ql_templates_load_file(JOBS_YAML, &t, &err), 0, "%s", err.msg);
    const ql_stepdef_t *s = find_step(t, NULL, "INC_BUILD", 1);
    ql_step_exec_t ex;
    cr_assert_eq(ql_template_expand_step(s, build_params, N_BUILD_PARAMS, &ex, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(ex.argv[2], s->argv[2], "the script text is constant");
    cr_assert(env_has(ex.envp, "QILIN_MODEL=" HOSTILE_MODEL));
    cr_assert(env_has(ex.envp, "QILIN_SEGMENT_START_FMT=2026-09-01"));
    char *out = run(&ex);
    cr_assert_str_eq(out, "building " HOSTILE_MODEL " segment seg-1 [2026-09-01, 2026-09-02)\n");
    ql_step_exec_free(&ex);

    /* The echo set substitutes into argv: each value is exactly one argument. */
    s = find_step(t, "echo", "INC_BUILD", 0);
    cr_assert_eq(ql_template_expand_step(s, build_params, N_BUILD_PARAMS, &ex, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ex.argc, 7);
    cr_assert_str_eq(ex.argv[3], HOSTILE_MODEL);
    out = run(&ex);
    cr_assert_str_eq(out, "building p1 " HOSTILE_MODEL " seg-1 2026-09-01 2026-09-02\n");
    ql_step_exec_free(&ex);
    ql_templates_free(t);
}

Test(template, every_default_shell_step_runs) {
    ql_templates_t *t = NULL;
    ql_err_t err;
    cr_assert_eq(ql_templates_load_file(JOBS_YAML, &t, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < t->defaults.n_chains; i++) {
        const ql_chain_t *c = &t->defaults.chains[i];
        for (size_t j = 0; j < c->n_steps; j++) {
            if (c->steps[j].kind != QL_STEP_SHELL)
                continue;
            ql_step_exec_t ex;
            cr_assert_eq(
                ql_template_expand_step(&c->steps[j], build_params, N_BUILD_PARAMS, &ex, &err), 0,
                "%s", err.msg);
            char *out = run(&ex);
            /* Each default script names the model it works on. */
            cr_assert(strstr(out, HOSTILE_MODEL), "%s/%s printed '%s'", c->job_type,
                      c->steps[j].name, out);
            ql_step_exec_free(&ex);
        }
    }
    ql_templates_free(t);
}

Test(template, truncated_default_file_errors_cleanly) {
    size_t len;
    char *text = read_all(JOBS_YAML, &len);
    int ok = 0, failed = 0;
    for (size_t n = 0; n <= len; n++) {
        /* A private copy of exactly n bytes so ASan catches any read past the end. */
        char *prefix = malloc(n ? n : 1);
        memcpy(prefix, text, n);
        ql_templates_t *t = NULL;
        ql_err_t err;
        ql_err_clear(&err);
        int rc = ql_templates_load_buffer(prefix, n, "jobs.yaml", &t, &err);
        if (rc == 0) {
            cr_assert_not_null(t);
            ql_templates_free(t);
            ok++;
        } else {
            cr_assert_eq(rc, QL_EINVAL, "prefix %zu: rc %d", n, rc);
            cr_assert_null(t);
            cr_assert_eq(strncmp(err.msg, "jobs.yaml:", 10), 0, "prefix %zu: '%s'", n, err.msg);
            failed++;
        }
        free(prefix);
    }
    cr_assert_gt(failed, 0);
    cr_assert_gt(ok, 0, "prefixes ending after a complete step should load");
    free(text);
}

/* ---- sets ---------------------------------------------------------------------------------- */

Test(template, set_falls_back_to_defaults) {
    ql_templates_t *t = load_ok("templates:\n"
                                "  INC_BUILD: {steps: [{name: default build, kind: noop}]}\n"
                                "  INDEX_MERGE: {steps: [{name: default merge, kind: noop}]}\n"
                                "template_sets:\n"
                                "  spark:\n"
                                "    INC_BUILD: {steps: [{name: spark build, kind: noop}]}\n"
                                "    MY_EXPORT: {steps: [{name: export, kind: noop}]}\n"
                                "  empty: {}\n");
    cr_assert_str_eq(find_step(t, "spark", "INC_BUILD", 0)->name, "spark build");
    cr_assert_str_eq(find_step(t, "spark", "INDEX_MERGE", 0)->name, "default merge");
    cr_assert_str_eq(find_step(t, "spark", "MY_EXPORT", 0)->name, "export");
    cr_assert_str_eq(find_step(t, NULL, "INC_BUILD", 0)->name, "default build");
    cr_assert_str_eq(find_step(t, "", "INC_BUILD", 0)->name, "default build");
    cr_assert_str_eq(find_step(t, "default", "INC_BUILD", 0)->name, "default build");
    cr_assert_str_eq(find_step(t, "empty", "INC_BUILD", 0)->name, "default build");

    const ql_chain_t *c;
    ql_err_t err;
    cr_assert_eq(ql_templates_find(t, NULL, "MY_EXPORT", &c, &err), QL_ENOTFOUND,
                 "a set's custom type is not in the defaults");
    cr_assert(strstr(err.msg, "MY_EXPORT"), "%s", err.msg);
    cr_assert_eq(ql_templates_find(t, "spark", "INDEX_BUILD", &c, &err), QL_ENOTFOUND);
    cr_assert(strstr(err.msg, "'spark'") && strstr(err.msg, "INDEX_BUILD"), "%s", err.msg);
    cr_assert_eq(ql_templates_find(t, "sparc", "INC_BUILD", &c, &err), QL_ENOTFOUND);
    cr_assert(strstr(err.msg, "'sparc'"), "%s", err.msg);
    cr_assert(ql_templates_has_set(t, "spark"));
    cr_assert(ql_templates_has_set(t, NULL));
    cr_assert_not(ql_templates_has_set(t, "sparc"));
    ql_templates_free(t);
}

Test(template, load_nodes_for_embedding_documents) {
    /* A scenario file embeds `templates:` beside its own keys. */
    const char *text =
        "name: a scenario\n"
        "templates:\n"
        "  INC_BUILD:\n"
        "    steps:\n"
        "      - {name: build, kind: sleep, duration: 10m}\n"
        "      - {name: publish, kind: shell, argv: [/bin/true], sim_duration: 1m}\n";
    ql_yaml_doc_t *doc;
    ql_err_t err;
    cr_assert_eq(ql_yaml_load_buffer(text, strlen(text), "sc.yaml", 0, &doc, &err), 0);
    ql_templates_t *t = NULL;
    cr_assert_eq(ql_templates_load_nodes(ql_yaml_map_find(ql_yaml_doc_root(doc), "templates"), NULL,
                                         &t, &err),
                 0, "%s", err.msg);
    ql_yaml_doc_free(doc); /* the templates own copies */
    const ql_stepdef_t *s = find_step(t, NULL, "INC_BUILD", 0);
    cr_assert_eq(ql_stepdef_sim_duration(s), 600000, "a sleep simulates its duration");
    s = find_step(t, NULL, "INC_BUILD", 1);
    cr_assert_eq(ql_stepdef_sim_duration(s), 60000);
    cr_assert_str_eq(t->source, "sc.yaml");
    ql_templates_free(t);
}

/* ---- load-time errors ---------------------------------------------------------------------- */

Test(template, errors_in_the_file_structure) {
    expect_error(
        "templatez: {}\n",
        "jobs.yaml:1: unknown key 'templatez' (expected one of: templates, template_sets)");
    expect_error("template_sets: {}\n", "jobs.yaml:1: missing required key 'templates'");
    expect_error("[1, 2]\n", "jobs.yaml:1: the document: expected a mapping, got a sequence");
    expect_error("", "jobs.yaml:1: the document is empty");
    expect_error("templates: [a]\n",
                 "jobs.yaml:1: key 'templates': expected a mapping, got a sequence");
    expect_error("templates:\n  inc_build: {steps: [{name: a, kind: noop}]}\n",
                 "jobs.yaml:2: key 'templates': invalid job type 'inc_build'");
    expect_error("templates:\n  INC-BUILD: {steps: [{name: a, kind: noop}]}\n",
                 "jobs.yaml:2: key 'templates': invalid job type 'INC-BUILD'");
    expect_error("templates:\n  INC_BUILD: [a]\n",
                 "jobs.yaml:2: job type 'INC_BUILD': expected a mapping, got a sequence");
    expect_error("templates:\n  INC_BUILD:\n    stepz: []\n",
                 "jobs.yaml:3: unknown key 'stepz' (expected one of: description, params, steps)");
    expect_error("templates:\n  INC_BUILD:\n    description: x\n",
                 "jobs.yaml:3: missing required key 'steps'");
    expect_error("templates:\n  INC_BUILD:\n    steps: []\n",
                 "jobs.yaml:3: key 'steps': expected a non-empty sequence, got a sequence");
    expect_error("templates:\n  INC_BUILD:\n    steps: noop\n",
                 "jobs.yaml:3: key 'steps': expected a non-empty sequence, got 'noop'");
    expect_error("templates:\n  INC_BUILD: {steps: [{name: a, kind: noop}]}\n"
                 "  INC_BUILD: {steps: [{name: b, kind: noop}]}\n",
                 "jobs.yaml:3: duplicate key 'INC_BUILD' (first at line 2)");
    expect_error("templates:\n  INC_BUILD:\n    steps:\n\t- {name: a, kind: noop}\n",
                 "jobs.yaml:4:");
}

Test(template, errors_in_template_sets) {
    const char *ok = "templates: {INC_BUILD: {steps: [{name: a, kind: noop}]}}\n";
    char text[512];
    snprintf(text, sizeof text, "%stemplate_sets: [a]\n", ok);
    expect_error(text, "jobs.yaml:2: key 'template_sets': expected a mapping, got a sequence");
    snprintf(text, sizeof text, "%stemplate_sets:\n  bad name: {}\n", ok);
    expect_error(text, "jobs.yaml:3: key 'template_sets': invalid set name 'bad name'");
    snprintf(text, sizeof text, "%stemplate_sets:\n  default: {}\n", ok);
    expect_error(text, "jobs.yaml:3: key 'template_sets': the name 'default' is reserved");
    snprintf(text, sizeof text, "%stemplate_sets:\n  spark: [x]\n", ok);
    expect_error(text, "jobs.yaml:3: template set 'spark': expected a mapping, got a sequence");
    snprintf(text, sizeof text, "%stemplate_sets:\n  spark:\n    build: {steps: []}\n", ok);
    expect_error(text, "jobs.yaml:4: template set 'spark': invalid job type 'build'");
    snprintf(text, sizeof text,
             "%stemplate_sets:\n  spark:\n    INC_BUILD:\n      steps:\n"
             "        - {name: x, kind: nope}\n",
             ok);
    expect_error(text, "jobs.yaml:6: step 'x': unknown kind 'nope'");
}

Test(template, errors_in_steps) {
    expect_error(STEPS("      - noop\n"), "jobs.yaml:4: step: expected a mapping, got 'noop'");
    expect_error(STEPS("      - kind: noop\n"), "jobs.yaml:4: missing required key 'name'");
    expect_error(STEPS("      - name: a\n"), "jobs.yaml:4: missing required key 'kind'");
    expect_error(STEPS("      - name: ''\n        kind: noop\n"),
                 "jobs.yaml:4: key 'name': must not be empty");
    expect_error(STEPS("      - name: [a]\n        kind: noop\n"),
                 "jobs.yaml:4: key 'name': expected a string, got a sequence");
    expect_error(STEPS("      - name: a\n        kind: bash\n"),
                 "jobs.yaml:5: step 'a': unknown kind 'bash' (expected one of: shell, noop, "
                 "sleep, fail, warn)");
    expect_error(
        STEPS("      - name: a\n        kind: noop\n        nmae: b\n"),
        "jobs.yaml:6: unknown key 'nmae' (expected one of: name, kind, sim_duration, when)");
    /* An unknown key is reported even when the kind is missing (a typo is the likelier cause). */
    expect_error(STEPS("      - name: a\n        knid: noop\n"),
                 "jobs.yaml:5: unknown key 'knid' (expected one of: name, kind, sim_duration, "
                 "when, argv");
    expect_error(STEPS("      - name: a\n        kind: noop\n        argv: [x]\n"),
                 "jobs.yaml:6: key 'argv' does not apply to a noop step (expected one of: name, "
                 "kind, sim_duration, when)");
    expect_error(STEPS("      - name: a\n        kind: shell\n        argv: [x]\n"
                       "        duration: 5s\n"),
                 "jobs.yaml:7: key 'duration' does not apply to a shell step");
    expect_error(STEPS("      - name: a\n        kind: sleep\n        duration: 5s\n"
                       "        retries: 1\n"),
                 "jobs.yaml:7: key 'retries' does not apply to a sleep step (expected one of: "
                 "name, kind, sim_duration, when, duration)");
    expect_error(STEPS("      - name: a\n        kind: warn\n        timeout: 5s\n"),
                 "jobs.yaml:6: key 'timeout' does not apply to a warn step");
    expect_error(STEPS("      - name: a\n        kind: sleep\n"),
                 "jobs.yaml:4: missing required key 'duration'");
    expect_error(STEPS("      - name: a\n        kind: sleep\n        duration: forever\n"),
                 "jobs.yaml:6: key 'duration': expected a duration");
    expect_error(STEPS("      - name: a\n        kind: fail\n        message: [x]\n"),
                 "jobs.yaml:6: key 'message': expected a string, got a sequence");
    expect_error(STEPS("      - name: a\n        kind: noop\n        sim_duration: -1s\n"),
                 "jobs.yaml:6: key 'sim_duration': expected a duration");
    expect_error(STEPS("      - {name: a, kind: noop}\n      - {name: b, kind: noop, x: 1}\n"),
                 "jobs.yaml:5: unknown key 'x'");
}

Test(template, errors_in_shell_steps) {
#define SHELL(extra) STEPS("      - name: a\n        kind: shell\n" extra)
    expect_error(SHELL(""), "jobs.yaml:4: missing required key 'argv'");
    expect_error(SHELL("        argv: []\n"),
                 "jobs.yaml:6: key 'argv': expected a non-empty sequence of strings, got a "
                 "sequence");
    expect_error(SHELL("        argv: /bin/true\n"),
                 "jobs.yaml:6: key 'argv': expected a non-empty sequence of strings, got "
                 "'/bin/true'");
    expect_error(SHELL("        argv:\n          - /bin/echo\n          - {a: 1}\n"),
                 "jobs.yaml:8: key 'argv' item 2: expected a string, got a mapping");
    expect_error(SHELL("        argv: ['', x]\n"),
                 "jobs.yaml:6: key 'argv': the program (item 1) is empty");
    expect_error(SHELL("        argv: [x]\n        env: [A]\n"),
                 "jobs.yaml:7: key 'env': expected a mapping, got a sequence");
    expect_error(SHELL("        argv: [x]\n        env: {A-B: 1}\n"),
                 "jobs.yaml:7: key 'env': 'A-B' is not a valid environment variable name");
    expect_error(
        SHELL("        argv: [x]\n        env:\n          OK: 1\n          QILIN_MODEL: x\n"),
        "jobs.yaml:9: key 'env': 'QILIN_MODEL' is reserved");
    expect_error(SHELL("        argv: [x]\n        env: {A: [1]}\n"),
                 "jobs.yaml:7: env 'A': expected a string, got a sequence");
    expect_error(SHELL("        argv: [x]\n        cwd: ''\n"),
                 "jobs.yaml:7: key 'cwd': must not be empty");
    expect_error(SHELL("        argv: [x]\n        timeout: soon\n"),
                 "jobs.yaml:7: key 'timeout': expected a duration such as 500ms, 90s, 5m, 2h, "
                 "1d or 1h30m (a bare number is milliseconds), got 'soon'");
    expect_error(SHELL("        argv: [x]\n        timeout: 0s\n"),
                 "jobs.yaml:7: key 'timeout': must be more than 0");
    expect_error(SHELL("        argv: [x]\n        retries: -1\n"),
                 "jobs.yaml:7: key 'retries': expected an integer between 0 and 1000, got '-1'");
    expect_error(SHELL("        argv: [x]\n        retries: \"2\"\n"),
                 "jobs.yaml:7: key 'retries': expected an integer between 0 and 1000, got '2'");
    expect_error(SHELL("        argv: [x]\n        retries: true\n"),
                 "jobs.yaml:7: key 'retries': expected an integer");
    expect_error(SHELL("        argv: [x]\n        retry_interval: 1 minute\n"),
                 "jobs.yaml:7: key 'retry_interval': expected a duration");
    expect_error(SHELL("        argv: [x]\n        warning_exit_code: 0\n"),
                 "jobs.yaml:7: key 'warning_exit_code': expected an integer between 1 and 255, "
                 "got '0'");
    expect_error(SHELL("        argv: [x]\n        warning_exit_code: 256\n"),
                 "jobs.yaml:7: key 'warning_exit_code': expected an integer between 1 and 255");
#undef SHELL
}

Test(template, shell_step_fields) {
    ql_templates_t *t = load_ok(STEPS("      - name: export\n"
                                      "        kind: shell\n"
                                      "        argv: [/usr/bin/env, '${QILIN_MODEL}']\n"
                                      "        env: {MODE: fast, TARGET: 'out/${QILIN_JOB_ID}'}\n"
                                      "        cwd: /tmp/${QILIN_PROJECT}\n"
                                      "        timeout: 1h30m\n"
                                      "        retries: 3\n"
                                      "        retry_interval: 10s\n"
                                      "        warning_exit_code: 3\n"
                                      "        sim_duration: 2m\n"
                                      "      - {name: wait, kind: sleep, duration: 250ms}\n"
                                      "      - {name: boom, kind: fail, message: it broke}\n"
                                      "      - {name: careful, kind: warn}\n"));
    const ql_stepdef_t *s = find_step(t, NULL, "INC_BUILD", 0);
    cr_assert_eq(s->argc, 2);
    cr_assert_str_eq(s->argv[1], "${QILIN_MODEL}", "definitions keep the template text");
    cr_assert_eq(s->n_env, 2);
    cr_assert_str_eq(s->env[1].name, "TARGET");
    cr_assert_str_eq(s->env[1].value, "out/${QILIN_JOB_ID}");
    cr_assert_str_eq(s->cwd, "/tmp/${QILIN_PROJECT}");
    cr_assert_eq(s->timeout_ms, 5400000);
    cr_assert_eq(s->retries, 3);
    cr_assert_eq(s->retry_interval_ms, 10000);
    cr_assert_eq(s->warning_exit_code, 3);
    cr_assert_eq(s->sim_duration_ms, 120000);
    s = find_step(t, NULL, "INC_BUILD", 1);
    cr_assert_eq(s->kind, QL_STEP_SLEEP);
    cr_assert_eq(s->duration_ms, 250);
    cr_assert_eq(ql_stepdef_sim_duration(s), 250);
    s = find_step(t, NULL, "INC_BUILD", 2);
    cr_assert_eq(s->kind, QL_STEP_FAIL);
    cr_assert_str_eq(s->message, "it broke");
    cr_assert_eq(ql_stepdef_sim_duration(s), 0);
    s = find_step(t, NULL, "INC_BUILD", 3);
    cr_assert_eq(s->kind, QL_STEP_WARN);
    cr_assert_null(s->message);
    ql_templates_free(t);
}

Test(template, too_many_steps) {
    char *text = malloc(64 * 1024);
    size_t o = (size_t)sprintf(text, "templates:\n  INC_BUILD:\n    steps:\n");
    for (int i = 0; i < QL_JOB_STEPS_MAX; i++)
        o += (size_t)sprintf(text + o, "      - {name: s%d, kind: noop}\n", i);
    ql_templates_t *t = load_ok(text);
    cr_assert_eq(find_step(t, NULL, "INC_BUILD", 99)->kind, QL_STEP_NOOP);
    ql_templates_free(t);
    sprintf(text + o, "      - {name: one too many, kind: noop}\n");
    /* A block sequence starts at its first item. */
    expect_error(text, "jobs.yaml:4: key 'steps': 101 steps, at most 100 are allowed");
    free(text);
}

Test(template, parameter_references_are_checked_at_load) {
#define ARGV(a) STEPS("      - name: a\n        kind: shell\n        argv: [/bin/echo, " a "]\n")
    expect_error(ARGV("'${NOPE}'"), "jobs.yaml:6: key 'argv' item 2: unknown parameter ${NOPE} "
                                    "(expected a QILIN_* job parameter");
    expect_error(ARGV("'${QILIN_MODEL'"), "jobs.yaml:6: key 'argv' item 2: '${QILIN_MODEL' has "
                                          "no closing '}'");
    expect_error(ARGV("'${}'"), "jobs.yaml:6: key 'argv' item 2: '${}' is not a parameter "
                                "reference");
    expect_error(ARGV("'${1X}'"), "jobs.yaml:6: key 'argv' item 2: '${1X}' is not a parameter");
    expect_error(ARGV("'${A B}'"), "jobs.yaml:6: key 'argv' item 2: '${A B}' is not a parameter");
    expect_error(ARGV("'${qilin_model}'"), "jobs.yaml:6: key 'argv' item 2: unknown parameter");
    expect_error(STEPS("      - name: a\n        kind: shell\n        argv: [x]\n"
                       "        env: {A: '${HOME}'}\n"),
                 "jobs.yaml:7: env 'A': unknown parameter ${HOME}");
    expect_error(STEPS("      - name: a\n        kind: shell\n        argv: [x]\n"
                       "        cwd: '/data/${WHERE}'\n"),
                 "jobs.yaml:7: key 'cwd': unknown parameter ${WHERE}");
    /* Escapes, shell-style $VAR and every well-known name are fine. */
    ql_templates_t *t = load_ok(ARGV("'$${HOME}', '$HOME', '$$', '$', 'a$', '${QILIN_JOB_ID}', "
                                     "'${QILIN_JOB_TYPE}${QILIN_PROJECT}${QILIN_MODEL}', "
                                     "'${QILIN_SEGMENT_ID}${QILIN_SEGMENT_START}', "
                                     "'${QILIN_SEGMENT_END}${QILIN_SEGMENT_START_FMT}', "
                                     "'${QILIN_SEGMENT_END_FMT}${QILIN_STEP_ID}'"));
    ql_templates_free(t);
#undef ARGV
}

Test(template, declared_params) {
    ql_templates_t *t = load_ok("templates:\n"
                                "  MY_EXPORT:\n"
                                "    params: [TABLE, target_dir]\n"
                                "    steps:\n"
                                "      - name: export\n"
                                "        kind: shell\n"
                                "        argv: [/bin/echo, '${TABLE}', '${target_dir}']\n");
    const ql_chain_t *c;
    ql_err_t err;
    cr_assert_eq(ql_templates_find(t, NULL, "MY_EXPORT", &c, &err), 0);
    cr_assert_eq(c->n_params, 2);
    ql_kv_t good[] = {{"TABLE", "t1"}, {"target_dir", "/tmp"}};
    cr_assert_eq(ql_chain_check_params(c, good, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_chain_check_params(c, good, 1, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "'target_dir' is required"), "%s", err.msg);
    ql_kv_t extra[] = {{"TABLE", "t1"}, {"target_dir", "/tmp"}, {"TABEL", "x"}};
    cr_assert_eq(ql_chain_check_params(c, extra, 3, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "'TABEL' is not a parameter") && strstr(err.msg, "TABLE, target_dir"),
              "%s", err.msg);
    ql_templates_free(t);

    expect_error("templates:\n  X:\n    params: [QILIN_X]\n    steps: [{name: a, kind: noop}]\n",
                 "jobs.yaml:3: key 'params': 'QILIN_X' is not a valid parameter name");
    expect_error("templates:\n  X:\n    params: [A, A]\n    steps: [{name: a, kind: noop}]\n",
                 "jobs.yaml:3: key 'params': 'A' is declared twice");
    /* A name declared for one chain is unknown in another. */
    expect_error("templates:\n  X:\n    params: [A]\n    steps: [{name: a, kind: noop}]\n"
                 "  Y:\n    steps: [{name: b, kind: shell, argv: [e, '${A}']}]\n",
                 "jobs.yaml:6: key 'argv' item 2: unknown parameter ${A}");
}

/* ---- substitution -------------------------------------------------------------------------- */

static char *subst_ok(const char *in, const ql_param_t *p, size_t n) {
    char *out = NULL;
    ql_err_t err;
    cr_assert_eq(ql_template_subst(in, p, n, &out, &err), 0, "'%s': %s", in, err.msg);
    return out;
}

Test(template, substitution_and_escapes) {
    const ql_param_t p[] = {{"A", "1"}, {"B", "two"}, {"EMPTY", ""}, {"QILIN_MODEL", "m1"}};
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"${A}", "1"},
        {"pre-${A}-${B}-post", "pre-1-two-post"},
        {"${A}${B}${A}", "1two1"},
        {"[${EMPTY}]", "[]"},
        {"$${A}", "${A}"},
        {"$${", "${"},
        {"x$${A}y${B}", "x${A}ytwo"},
        {"$$${A}", "$${A}"},
        {"$A $B $$ $", "$A $B $$ $"},
        {"a$", "a$"},
        {"", ""},
        {"no refs at all", "no refs at all"},
        {"model=${QILIN_MODEL}", "model=m1"},
        {"}{$}{", "}{$}{"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = subst_ok(cases[i].in, p, 4);
        cr_assert_str_eq(out, cases[i].out, "'%s'", cases[i].in);
        free(out);
    }
    ql_err_t err;
    char *out = (char *)"untouched";
    cr_assert_eq(ql_template_subst("${MISSING}", p, 4, &out, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "unknown parameter ${MISSING} has no value");
    cr_assert_str_eq(out, "untouched");
    cr_assert_eq(ql_template_subst("x${A", p, 4, &out, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "no closing"), "%s", err.msg);
    cr_assert_eq(ql_template_subst("${-}", p, 4, &out, &err), QL_EINVAL);
}

Test(template, substituted_values_are_never_reparsed) {
    static const char *const hostile[] = {
        "a; rm -rf /",
        "$(reboot)",
        "`id`",
        "\"double\" 'single'",
        "${QILIN_JOB_ID}",  /* not expanded again */
        "$${QILIN_JOB_ID}", /* nor unescaped */
        "with space\tand tab\nand newline",
        "|| true && false > /etc/passwd < x &",
        "",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        const ql_param_t p[] = {{"QILIN_MODEL", hostile[i]}, {"QILIN_JOB_ID", "job-9"}};
        char *out = subst_ok("${QILIN_MODEL}", p, 2);
        cr_assert_str_eq(out, hostile[i]);
        free(out);

        /* In a step: the value is one argv element, verbatim, and so is its env variable. */
        ql_stepdef_t s;
        ql_stepdef_init(&s);
        s.name = strdup("x");
        s.kind = QL_STEP_SHELL;
        char *argv[] = {"/bin/echo", "--model=${QILIN_MODEL}", "${QILIN_MODEL}", NULL};
        s.argv = argv;
        s.argc = 3;
        ql_step_exec_t ex;
        ql_err_t err;
        cr_assert_eq(ql_template_expand_step(&s, p, 2, &ex, &err), 0, "%s", err.msg);
        cr_assert_eq(ex.argc, 3);
        cr_assert_null(ex.argv[3]);
        char want[256];
        snprintf(want, sizeof want, "--model=%s", hostile[i]);
        cr_assert_str_eq(ex.argv[1], want);
        cr_assert_str_eq(ex.argv[2], hostile[i]);
        snprintf(want, sizeof want, "QILIN_MODEL=%s", hostile[i]);
        cr_assert(env_has(ex.envp, want));
        ql_step_exec_free(&ex);
        s.argv = NULL;
        ql_stepdef_clear(&s);
    }
}

Test(template, expand_builds_env_and_cwd) {
    ql_templates_t *t =
        load_ok("templates:\n"
                "  MY_EXPORT:\n"
                "    params: [TABLE]\n"
                "    steps:\n"
                "      - name: export\n"
                "        kind: shell\n"
                "        argv: [/bin/echo, '${TABLE}']\n"
                "        env: {OUT: '/data/${QILIN_PROJECT}/${TABLE}', LIT: '$${X}'}\n"
                "        cwd: '/work/${QILIN_JOB_ID}'\n"
                "      - {name: done, kind: noop}\n");
    const ql_param_t p[] = {{"QILIN_JOB_ID", "j1"}, {"QILIN_PROJECT", "p1"}, {"TABLE", "t 1"}};
    ql_step_exec_t ex;
    ql_err_t err;
    const ql_stepdef_t *s = find_step(t, NULL, "MY_EXPORT", 0);
    cr_assert_eq(ql_template_expand_step(s, p, 3, &ex, &err), 0, "%s", err.msg);
    cr_assert_str_eq(ex.argv[1], "t 1");
    cr_assert_eq(ex.n_env, 5);
    cr_assert_str_eq(ex.envp[0], "QILIN_JOB_ID=j1");
    cr_assert_str_eq(ex.envp[1], "QILIN_PROJECT=p1");
    cr_assert_str_eq(ex.envp[2], "QILIN_PARAM_TABLE=t 1", "custom params are namespaced");
    cr_assert_str_eq(ex.envp[3], "OUT=/data/p1/t 1");
    cr_assert_str_eq(ex.envp[4], "LIT=${X}");
    cr_assert_null(ex.envp[5]);
    cr_assert_str_eq(ex.cwd, "/work/j1");
    ql_step_exec_free(&ex);
    cr_assert_null(ex.argv);

    /* A noop has no argv, but still gets the parameters. */
    s = find_step(t, NULL, "MY_EXPORT", 1);
    cr_assert_eq(ql_template_expand_step(s, p, 3, &ex, &err), 0);
    cr_assert_null(ex.argv);
    cr_assert_null(ex.cwd);
    cr_assert_eq(ex.n_env, 3);
    ql_step_exec_free(&ex);

    /* A parameter the caller forgot is named in the error. */
    s = find_step(t, NULL, "MY_EXPORT", 0);
    cr_assert_eq(ql_template_expand_step(s, p, 2, &ex, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "step 'export': argv item 2: unknown parameter ${TABLE} has no "
                              "value");
    cr_assert_null(ex.argv, "nothing is left allocated on failure");
    const ql_param_t bad[] = {{"NOT VALID", "x"}};
    cr_assert_eq(ql_template_expand_step(find_step(t, NULL, "MY_EXPORT", 1), bad, 1, &ex, &err),
                 QL_EINVAL);
    ql_templates_free(t);
}

/* ---- ad-hoc jobs --------------------------------------------------------------------------- */

static const char adhoc_json[] =
    "{\n"
    "  \"project\": \"p1\",\n"
    "  \"model\": \"m1\",\n"
    "  \"type\": \"MY_EXPORT\",\n"
    "  \"priority\": 2,\n"
    "  \"params\": {\"TABLE\": \"t; rm -rf /\", \"N\": 5, \"FLAG\": true},\n"
    "  \"steps\": [\n"
    "    {\"name\": \"export\", \"kind\": \"shell\",\n"
    "     \"argv\": [\"/bin/echo\", \"${TABLE}\", \"${N}\", \"${QILIN_MODEL}\"],\n"
    "     \"timeout\": \"5m\", \"retries\": 1},\n"
    "    {\"name\": \"wait\", \"kind\": \"sleep\", \"duration\": 1500}\n"
    "  ]\n"
    "}\n";

Test(template, adhoc_json_definition) {
    ql_adhoc_job_t job;
    ql_err_t err;
    cr_assert_eq(ql_adhoc_parse(adhoc_json, strlen(adhoc_json), "<request body>", &job, &err), 0,
                 "%s", err.msg);
    cr_assert_str_eq(job.project, "p1");
    cr_assert_str_eq(job.model, "m1");
    cr_assert_str_eq(job.type, "MY_EXPORT");
    cr_assert_eq(job.priority, 2);
    cr_assert_eq(job.n_params, 3);
    cr_assert_str_eq(job.params[0].name, "TABLE");
    cr_assert_str_eq(job.params[0].value, "t; rm -rf /");
    cr_assert_str_eq(job.params[1].value, "5");
    cr_assert_str_eq(job.params[2].value, "true");
    cr_assert_eq(job.n_steps, 2);
    cr_assert_eq(job.steps[0].timeout_ms, 300000);
    cr_assert_eq(job.steps[1].duration_ms, 1500);

    /* What a runner does with it: well-known parameters plus the job's own. */
    ql_param_t p[3 + 1];
    for (size_t i = 0; i < job.n_params; i++)
        p[i] = (ql_param_t){job.params[i].name, job.params[i].value};
    p[3] = (ql_param_t){"QILIN_MODEL", job.model};
    ql_step_exec_t ex;
    cr_assert_eq(ql_template_expand_step(&job.steps[0], p, 4, &ex, &err), 0, "%s", err.msg);
    cr_assert_eq(ex.argc, 4);
    cr_assert_str_eq(ex.argv[1], "t; rm -rf /");
    cr_assert_str_eq(ex.argv[2], "5");
    cr_assert_str_eq(ex.argv[3], "m1");
    cr_assert(env_has(ex.envp, "QILIN_PARAM_TABLE=t; rm -rf /"));
    cr_assert(env_has(ex.envp, "QILIN_PARAM_FLAG=true"));
    ql_step_exec_free(&ex);
    ql_adhoc_job_clear(&job);
    cr_assert_null(job.project);
}

Test(template, adhoc_yaml_definition_and_defaults) {
    const char *text = "project: p1\ntype: INDEX_BUILD\n";
    ql_adhoc_job_t job;
    ql_err_t err;
    cr_assert_eq(ql_adhoc_parse(text, strlen(text), "<request body>", &job, &err), 0, "%s",
                 err.msg);
    cr_assert_null(job.model);
    cr_assert_eq(job.priority, 3);
    cr_assert_eq(job.n_params, 0);
    cr_assert_eq(job.n_steps, 0, "no steps: the job runs its type's template");
    ql_adhoc_job_clear(&job);

    text = "project: p1\n"
           "type: CLEANUP\n"
           "params: {DAYS: 30}\n"
           "steps:\n"
           "  - {name: clean, kind: shell, argv: [/usr/bin/find, /tmp, -mtime, '+${DAYS}']}\n";
    cr_assert_eq(ql_adhoc_parse(text, strlen(text), NULL, &job, &err), 0, "%s", err.msg);
    cr_assert_str_eq(job.steps[0].argv[3], "+${DAYS}");
    ql_adhoc_job_clear(&job);
}

static void expect_adhoc_error(const char *text, const char *want) {
    ql_adhoc_job_t job;
    ql_err_t err;
    ql_err_clear(&err);
    int rc = ql_adhoc_parse(text, strlen(text), "<request body>", &job, &err);
    cr_assert_eq(rc, QL_EINVAL, "expected '%s' for:\n%s", want, text);
    cr_assert_eq(strncmp(err.msg, want, strlen(want)), 0, "message\n  '%s'\nshould start\n  '%s'",
                 err.msg, want);
    cr_assert_null(job.project, "cleared on failure");
    cr_assert_null(job.steps);
}

Test(template, adhoc_errors) {
    expect_adhoc_error("{\"type\": \"X\"}", "<request body>:1: missing required key 'project'");
    expect_adhoc_error("{\"project\": \"p1\"}", "<request body>:1: missing required key 'type'");
    expect_adhoc_error("{\"project\": \"p1\",\n \"type\": \"X\",\n \"priority\": 5}",
                       "<request body>:3: key 'priority': expected an integer between 0 and 4, "
                       "got '5'");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\", \"priority\": \"1\"}",
                       "<request body>:1: key 'priority': expected an integer");
    expect_adhoc_error("{\"project\": \"p1\",\n \"type\": \"my_export\"}",
                       "<request body>:2: key 'type': 'my_export' is not a job type");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\",\n \"prio\": 1}",
                       "<request body>:2: unknown key 'prio' (expected one of: project, model, "
                       "type, priority, params, steps)");
    expect_adhoc_error("{\"project\": \"\", \"type\": \"X\"}",
                       "<request body>:1: key 'project': expected a name");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\", \"params\": [1]}",
                       "<request body>:1: key 'params': expected a mapping, got a sequence");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\",\n \"params\": {\"A\": {\"b\": 1}}}",
                       "<request body>:2: param 'A': expected a string, got a mapping");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\",\n \"params\": {\"A\": null}}",
                       "<request body>:2: param 'A': expected a string, got null");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\",\n \"params\": {\"QILIN_MODEL\": 1}}",
                       "<request body>:2: key 'params': 'QILIN_MODEL' is not a valid parameter");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\",\n \"params\": {\"a-b\": 1}}",
                       "<request body>:2: key 'params': 'a-b' is not a valid parameter");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\", \"steps\": []}",
                       "<request body>:1: key 'steps': expected a non-empty sequence");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\", \"params\": {\"A\": 1},\n"
                       " \"steps\": [\n"
                       "  {\"name\": \"s\", \"kind\": \"shell\", \"argv\": [\"e\", \"${B}\"]}]}",
                       "<request body>:3: key 'argv' item 2: unknown parameter ${B} (expected a "
                       "QILIN_* job parameter such as QILIN_MODEL or QILIN_SEGMENT_START_FMT, or "
                       "one of the declared, A;");
    expect_adhoc_error("{\"project\": \"p1\", \"type\": \"X\",\n"
                       " \"steps\": [{\"name\": \"s\", \"kind\": \"noop\", \"argv\": [\"x\"]}]}",
                       "<request body>:2: key 'argv' does not apply to a noop step");
    expect_adhoc_error("{\"project\": \"p1\",\n \"type\": \"X\",,}", "<request body>:2:");
    expect_adhoc_error("{\"project\": \"p1\", \"project\": \"p2\", \"type\": \"X\"}",
                       "<request body>:1: duplicate key 'project'");
    expect_adhoc_error("", "<request body>:1: the document is empty");
    expect_adhoc_error("[]", "<request body>:1: the job definition: expected a mapping");
}

Test(template, truncated_adhoc_json_errors_cleanly) {
    /* Up to (not including) the closing brace. */
    size_t len = (size_t)(strrchr(adhoc_json, '}') - adhoc_json);
    for (size_t n = 0; n <= len; n++) {
        char *prefix = malloc(n ? n : 1);
        memcpy(prefix, adhoc_json, n);
        ql_adhoc_job_t job;
        ql_err_t err;
        ql_err_clear(&err);
        int rc = ql_adhoc_parse(prefix, n, "<request body>", &job, &err);
        /* Every proper prefix of a JSON object is incomplete. */
        cr_assert_eq(rc, QL_EINVAL, "prefix %zu parsed", n);
        cr_assert_eq(strncmp(err.msg, "<request body>:", 15), 0, "prefix %zu: %s", n, err.msg);
        free(prefix);
    }
}

/* ---- stored form --------------------------------------------------------------------------- */

static void assert_same(const ql_stepdef_t *a, const ql_stepdef_t *b) {
    cr_assert_str_eq(a->name, b->name);
    cr_assert_eq(a->kind, b->kind);
    cr_assert_eq(a->argc, b->argc);
    for (size_t i = 0; i < a->argc; i++)
        cr_assert_str_eq(a->argv[i], b->argv[i]);
    cr_assert_eq(a->argv == NULL, b->argv == NULL);
    cr_assert_eq(a->n_env, b->n_env);
    for (size_t i = 0; i < a->n_env; i++) {
        cr_assert_str_eq(a->env[i].name, b->env[i].name);
        cr_assert_str_eq(a->env[i].value, b->env[i].value);
    }
    cr_assert_eq(a->cwd == NULL, b->cwd == NULL);
    if (a->cwd)
        cr_assert_str_eq(a->cwd, b->cwd);
    cr_assert_eq(a->message == NULL, b->message == NULL);
    if (a->message)
        cr_assert_str_eq(a->message, b->message);
    cr_assert_eq(a->timeout_ms, b->timeout_ms);
    cr_assert_eq(a->retries, b->retries);
    cr_assert_eq(a->retry_interval_ms, b->retry_interval_ms);
    cr_assert_eq(a->warning_exit_code, b->warning_exit_code);
    cr_assert_eq(a->duration_ms, b->duration_ms);
    cr_assert_eq(a->sim_duration_ms, b->sim_duration_ms);
}

static void round_trip(const ql_stepdef_t *s) {
    uint8_t *buf = NULL;
    size_t len = 0;
    cr_assert_eq(ql_stepdef_encode(s, &buf, &len), 0);
    cr_assert_gt(len, 0);
    ql_stepdef_t back;
    ql_err_t err;
    cr_assert_eq(ql_stepdef_decode(buf, len, &back, &err), 0, "%s", err.msg);
    assert_same(s, &back);
    ql_stepdef_clear(&back);
    /* Every truncation is refused, never misread. */
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        int rc = ql_stepdef_decode(cut, n, &back, &err);
        cr_assert_eq(rc, QL_ECORRUPT, "prefix %zu of %zu decoded (rc %d)", n, len, rc);
        cr_assert_null(back.name);
        free(cut);
    }
    free(buf);
}

Test(template, stepdef_round_trips) {
    ql_templates_t *t = load_ok(STEPS("      - name: full\n"
                                      "        kind: shell\n"
                                      "        argv: [/bin/echo, '${QILIN_MODEL}', '', 'ü ✓']\n"
                                      "        env: {A: '1', B: ''}\n"
                                      "        cwd: /tmp\n"
                                      "        timeout: 1h\n"
                                      "        retries: 0\n"
                                      "        retry_interval: 0\n"
                                      "        warning_exit_code: 255\n"
                                      "        sim_duration: 0\n"
                                      "      - {name: min, kind: shell, argv: [x]}\n"
                                      "      - {name: n, kind: noop}\n"
                                      "      - {name: s, kind: sleep, duration: 0}\n"
                                      "      - {name: f, kind: fail, message: ''}\n"
                                      "      - {name: w, kind: warn, message: careful}\n"));
    const ql_chain_t *c;
    ql_err_t err;
    cr_assert_eq(ql_templates_find(t, NULL, "INC_BUILD", &c, &err), 0);
    for (size_t i = 0; i < c->n_steps; i++)
        round_trip(&c->steps[i]);
    /* And a copy is equal too. */
    ql_stepdef_t copy;
    cr_assert_eq(ql_stepdef_copy(&c->steps[0], &copy), 0);
    assert_same(&c->steps[0], &copy);
    ql_stepdef_clear(&copy);
    ql_templates_free(t);

    cr_assert_eq(ql_templates_load_file(JOBS_YAML, &t, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < t->defaults.n_chains; i++)
        for (size_t j = 0; j < t->defaults.chains[i].n_steps; j++)
            round_trip(&t->defaults.chains[i].steps[j]);
    ql_templates_free(t);
}

/* Packs a map from (key, value-kind) pairs for hand-made blobs. */
static void pack_s(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

Test(template, decode_ignores_unknown_fields_and_checks_version) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 6);
    pack_s(&pk, "future_field");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, 1);
    pack_s(&pk, "x");
    pack_s(&pk, "kind");
    pack_s(&pk, "sleep");
    pack_s(&pk, "name");
    pack_s(&pk, "later");
    pack_s(&pk, "duration_ms");
    msgpack_pack_int64(&pk, 42);
    pack_s(&pk, "unless"); /* another field a later version may add */
    msgpack_pack_nil(&pk);
    pack_s(&pk, "v");
    msgpack_pack_int(&pk, 1);
    ql_stepdef_t s;
    ql_err_t err;
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), 0, "%s", err.msg);
    cr_assert_str_eq(s.name, "later");
    cr_assert_eq(s.kind, QL_STEP_SLEEP);
    cr_assert_eq(s.duration_ms, 42);
    cr_assert_eq(s.retries, -1, "absent fields decode as unset");
    cr_assert_eq(s.sim_duration_ms, -1);
    ql_stepdef_clear(&s);
    msgpack_sbuffer_clear(&sb);

    /* A newer version is refused. */
    msgpack_pack_map(&pk, 3);
    pack_s(&pk, "v");
    msgpack_pack_int(&pk, QL_STEPDEF_VERSION + 1);
    pack_s(&pk, "name");
    pack_s(&pk, "n");
    pack_s(&pk, "kind");
    pack_s(&pk, "noop");
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), QL_EVERSION);
    msgpack_sbuffer_clear(&sb);

    /* Missing version, unknown kind, wrong types, a shell step without argv. */
    msgpack_pack_map(&pk, 2);
    pack_s(&pk, "name");
    pack_s(&pk, "n");
    pack_s(&pk, "kind");
    pack_s(&pk, "noop");
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), QL_ECORRUPT);
    cr_assert(strstr(err.msg, "'v'"), "%s", err.msg);
    msgpack_sbuffer_clear(&sb);

    msgpack_pack_map(&pk, 3);
    pack_s(&pk, "v");
    msgpack_pack_int(&pk, 1);
    pack_s(&pk, "name");
    pack_s(&pk, "n");
    pack_s(&pk, "kind");
    pack_s(&pk, "teleport");
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), QL_ECORRUPT);
    cr_assert(strstr(err.msg, "'kind'"), "%s", err.msg);
    msgpack_sbuffer_clear(&sb);

    msgpack_pack_map(&pk, 4);
    pack_s(&pk, "v");
    msgpack_pack_int(&pk, 1);
    pack_s(&pk, "name");
    pack_s(&pk, "n");
    pack_s(&pk, "kind");
    pack_s(&pk, "shell");
    pack_s(&pk, "retries");
    pack_s(&pk, "three");
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), QL_ECORRUPT);
    cr_assert(strstr(err.msg, "'retries'"), "%s", err.msg);
    msgpack_sbuffer_clear(&sb);

    msgpack_pack_map(&pk, 3);
    pack_s(&pk, "v");
    msgpack_pack_int(&pk, 1);
    pack_s(&pk, "name");
    pack_s(&pk, "n");
    pack_s(&pk, "kind");
    pack_s(&pk, "shell");
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), QL_ECORRUPT);
    cr_assert(strstr(err.msg, "'argv'"), "%s", err.msg);
    msgpack_sbuffer_clear(&sb);

    msgpack_pack_array(&pk, 0);
    cr_assert_eq(ql_stepdef_decode((uint8_t *)sb.data, sb.size, &s, &err), QL_ECORRUPT);
    msgpack_sbuffer_destroy(&sb);

    static const uint8_t junk[] = {0xc1, 0xff, 0x00};
    cr_assert_eq(ql_stepdef_decode(junk, sizeof junk, &s, &err), QL_ECORRUPT);
    cr_assert_null(s.name);
}

Test(template, encode_then_trailing_bytes_are_corrupt) {
    ql_stepdef_t s;
    ql_stepdef_init(&s);
    s.name = strdup("n");
    s.kind = QL_STEP_NOOP;
    uint8_t *buf;
    size_t len;
    cr_assert_eq(ql_stepdef_encode(&s, &buf, &len), 0);
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0xc0;
    ql_stepdef_t back;
    ql_err_t err;
    cr_assert_eq(ql_stepdef_decode(longer, len + 1, &back, &err), QL_ECORRUPT);
    cr_assert(strstr(err.msg, "trailing"), "%s", err.msg);
    free(longer);
    free(buf);
    ql_stepdef_clear(&s);
    cr_assert_eq(ql_stepdef_encode(&s, &buf, &len), QL_EINVAL, "a definition needs a name");
}

Test(template, names) {
    cr_assert(ql_job_type_valid("INC_BUILD"));
    cr_assert(ql_job_type_valid("X"));
    cr_assert(ql_job_type_valid("MY_EXPORT_2"));
    cr_assert_not(ql_job_type_valid("my_export"));
    cr_assert_not(ql_job_type_valid("_X"));
    cr_assert_not(ql_job_type_valid("2X"));
    cr_assert_not(ql_job_type_valid(""));
    char long_name[70];
    memset(long_name, 'A', 64);
    long_name[64] = '\0';
    cr_assert(ql_job_type_valid(long_name));
    long_name[64] = 'A';
    long_name[65] = '\0';
    cr_assert_not(ql_job_type_valid(long_name));
    cr_assert(ql_template_param_name_valid("TABLE"));
    cr_assert(ql_template_param_name_valid("_x1"));
    cr_assert_not(ql_template_param_name_valid("QILIN_X"));
    cr_assert_not(ql_template_param_name_valid("1X"));
    cr_assert_not(ql_template_param_name_valid("A-B"));
    ql_step_kind_t k;
    cr_assert_eq(ql_step_kind_parse("sleep", &k), 0);
    cr_assert_eq(k, QL_STEP_SLEEP);
    cr_assert_str_eq(ql_step_kind_name(QL_STEP_WARN), "warn");
    cr_assert_eq(ql_step_kind_parse("Sleep", &k), QL_EINVAL);
}

/* ---- when: a step's conditions (docs/design/jobs.md: READY -> SKIP when a template condition
 * skips it) ---- */

Test(template, when_takes_a_value_or_a_list_per_parameter) {
    ql_templates_t *t =
        load_ok("templates:\n"
                "  INC_BUILD:\n"
                "    params: [TABLE]\n"
                "    steps:\n"
                "      - name: a\n"
                "        kind: noop\n"
                "        when: {QILIN_MODEL: [orders, returns], TABLE: fact}\n"
                "      - {name: b, kind: sleep, duration: 1s, when: {QILIN_JOB_TYPE: "
                "INC_BUILD}}\n");
    const ql_stepdef_t *a = find_step(t, NULL, "INC_BUILD", 0);
    cr_assert_eq(a->n_when, 2);
    cr_assert_str_eq(a->when[0].param, "QILIN_MODEL");
    cr_assert_eq(a->when[0].n_values, 2);
    cr_assert_str_eq(a->when[0].values[1], "returns");
    cr_assert_str_eq(a->when[1].param, "TABLE");
    cr_assert_eq(a->when[1].n_values, 1);
    cr_assert_str_eq(a->when[1].values[0], "fact");

    ql_param_t p[] = {{"QILIN_MODEL", "returns"}, {"TABLE", "fact"}};
    const char *value = NULL;
    cr_assert_null(ql_when_unmet(a, p, 2, &value), "every condition holds");
    p[1].value = "dim";
    const ql_when_t *w = ql_when_unmet(a, p, 2, &value);
    cr_assert_not_null(w);
    cr_assert_str_eq(w->param, "TABLE");
    cr_assert_str_eq(value, "dim");
    w = ql_when_unmet(a, p, 0, &value);
    cr_assert(w && !strcmp(w->param, "QILIN_MODEL") && !strcmp(value, ""),
              "a parameter without a value meets no condition");

    /* Stored with the job: the conditions survive encoding, and copying. */
    uint8_t *buf;
    size_t len;
    cr_assert_eq(ql_stepdef_encode(a, &buf, &len), 0);
    ql_stepdef_t back, copy;
    ql_err_t err = {0};
    cr_assert_eq(ql_stepdef_decode(buf, len, &back, &err), 0, "%s", err.msg);
    free(buf);
    cr_assert_eq(ql_stepdef_copy(&back, &copy), 0);
    for (int k = 0; k < 2; k++) {
        const ql_stepdef_t *d = k ? &copy : &back;
        cr_assert_eq(d->n_when, 2);
        cr_assert_str_eq(d->when[0].values[0], "orders");
        cr_assert_str_eq(d->when[0].values[1], "returns");
        cr_assert_str_eq(d->when[1].param, "TABLE");
    }
    ql_stepdef_clear(&back);
    ql_stepdef_clear(&copy);
    cr_assert_eq(find_step(t, NULL, "INC_BUILD", 1)->n_when, 1);
    ql_templates_free(t);
}

Test(template, when_errors_name_the_line_and_reason) {
    expect_error(STEPS("      - {name: a, kind: noop, when: {MODEL: x}}\n"),
                 "jobs.yaml:4: key 'when': 'MODEL' is not a job parameter");
    expect_error(STEPS("      - {name: a, kind: noop, when: {}}\n"),
                 "jobs.yaml:4: key 'when': no condition");
    expect_error(STEPS("      - {name: a, kind: noop, when: [QILIN_MODEL]}\n"),
                 "jobs.yaml:4: key 'when': expected a mapping, got a sequence");
    expect_error(STEPS("      - {name: a, kind: noop, when: {QILIN_MODEL: {a: b}}}\n"),
                 "jobs.yaml:4: when 'QILIN_MODEL': expected");
    expect_error(STEPS("      - {name: a, kind: noop, when: {QILIN_MODEL: []}}\n"),
                 "jobs.yaml:4: when 'QILIN_MODEL'");
}

/*
 * A stored step definition whose array or map header claims billions of elements: msgpack-c
 * allocates for the claimed count before reading any, so it must be refused before msgpack-c
 * sees it. The address space is capped 256 MB above what the test maps, so such a request
 * fails with ENOMEM instead of being handed untouched virtual memory.
 */
Test(template, stepdef_with_a_huge_claimed_count_is_corrupt_without_allocating) {
    static const uint8_t map32[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t array32[] = {0x81, 0xa4, 'a', 'r', 'g', 'v', 0xdd, 0x40, 0x00, 0x00, 0x00};
    ql_test_cap_address_space((size_t)256 << 20);
    const struct {
        const uint8_t *b;
        size_t n;
    } inputs[] = {{map32, sizeof map32}, {array32, sizeof array32}};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        ql_stepdef_t s;
        ql_err_t err = {0};
        int rc = ql_stepdef_decode(inputs[i].b, inputs[i].n, &s, &err);
        cr_expect_eq(rc, QL_ECORRUPT, "input %zu: %d (%s)", i, rc, err.msg);
    }
}
