/*
 * libFuzzer harness for the YAML layer, the job template loader and the ad-hoc job parser.
 *
 * Each input is fed to both parsers. Besides crashes and sanitizer reports, it checks the
 * invariants callers rely on: a failure always carries a "name:line: reason" message and
 * allocates nothing; every loaded step definition survives the stored form
 * (encode -> decode) and expands with the well-known parameters.
 *
 * Build with -DQL_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt); seeds in tests/fuzz/corpus/yaml.
 */
#include "base/ql_yaml.h"
#include "engine/ql_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const ql_param_t fuzz_params[] = {
    {"QILIN_JOB_ID", "job-1"},
    {"QILIN_JOB_TYPE", "INC_BUILD"},
    {"QILIN_PROJECT", "p1"},
    {"QILIN_MODEL", "m1"},
    {"QILIN_SEGMENT_ID", "seg-1"},
    {"QILIN_SEGMENT_START", "0"},
    {"QILIN_SEGMENT_END", "86400000"},
    {"QILIN_SEGMENT_START_FMT", "1970-01-01"},
    {"QILIN_SEGMENT_END_FMT", "1970-01-02"},
    {"QILIN_STEP_ID", "job-1_00"},
};

static void check_error(int rc, const ql_err_t *err, const char *name) {
    if (rc == 0)
        return;
    /* Only allocation failures may lack a position. */
    if (rc != UV_ENOMEM && strncmp(err->msg, name, strlen(name)) != 0)
        __builtin_trap();
}

/* Encodes, decodes and expands s; any failure is a bug. */
static void exercise(const ql_stepdef_t *s, const ql_param_t *extra, size_t n_extra) {
    uint8_t *buf = NULL;
    size_t len = 0;
    if (ql_stepdef_encode(s, &buf, &len) != 0)
        __builtin_trap();
    ql_stepdef_t back;
    ql_err_t err;
    if (ql_stepdef_decode(buf, len, &back, &err) != 0 || strcmp(back.name, s->name) != 0 ||
        back.kind != s->kind || back.argc != s->argc || back.n_env != s->n_env)
        __builtin_trap();
    ql_stepdef_clear(&back);
    free(buf);

    size_t n = sizeof fuzz_params / sizeof fuzz_params[0];
    ql_param_t *p = malloc((n + n_extra) * sizeof *p);
    if (!p)
        return;
    memcpy(p, fuzz_params, sizeof fuzz_params);
    if (n_extra)
        memcpy(p + n, extra, n_extra * sizeof *p);
    ql_step_exec_t ex;
    /* Every reference was checked at load, so expansion with all parameters must succeed. */
    if (ql_template_expand_step(s, p, n + n_extra, &ex, &err) != 0)
        __builtin_trap();
    if (s->kind == QL_STEP_SHELL && ex.argc != s->argc)
        __builtin_trap();
    ql_step_exec_free(&ex);
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    ql_err_t err;

    ql_templates_t *t = NULL;
    ql_err_clear(&err);
    int rc = ql_templates_load_buffer(text, size, "fuzz.yaml", &t, &err);
    check_error(rc, &err, "fuzz.yaml");
    if (rc == 0) {
        for (size_t s = 0; s <= t->n_sets; s++) {
            const ql_template_set_t *set = s == 0 ? &t->defaults : &t->sets[s - 1];
            for (size_t c = 0; c < set->n_chains; c++) {
                const ql_chain_t *chain = &set->chains[c];
                ql_param_t extra[QL_TEMPLATE_MAX_PARAMS];
                for (size_t i = 0; i < chain->n_params; i++)
                    extra[i] = (ql_param_t){chain->params[i], "v"};
                for (size_t i = 0; i < chain->n_steps; i++)
                    exercise(&chain->steps[i], extra, chain->n_params);
            }
        }
        ql_templates_free(t);
    } else if (t) {
        __builtin_trap();
    }

    ql_adhoc_job_t job;
    ql_err_clear(&err);
    rc = ql_adhoc_parse(text, size, "<request body>", &job, &err);
    check_error(rc, &err, "<request body>");
    if (rc == 0) {
        ql_param_t extra[QL_TEMPLATE_MAX_PARAMS];
        for (size_t i = 0; i < job.n_params; i++)
            extra[i] = (ql_param_t){job.params[i].name, job.params[i].value};
        for (size_t i = 0; i < job.n_steps; i++)
            exercise(&job.steps[i], extra, job.n_params);
        ql_adhoc_job_clear(&job);
    } else if (job.project || job.steps) {
        __builtin_trap();
    }
    return 0;
}
