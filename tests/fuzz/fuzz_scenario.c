/*
 * libFuzzer harness for the simulator's scenario loader (sim/sim_scenario.c, sim_steps.c,
 * sim_expect.c): every input is loaded as a scenario file, then freed.
 *
 * Running a loaded scenario is left out on purpose: ql_sim_new makes a temporary LMDB store on
 * disk for every scenario, which costs milliseconds and file system work per input; the test
 * suite runs every scenario of tests/scenarios for real instead.
 *
 * Besides crashes, leaks and sanitizer reports it checks the contract ql_sim.h states:
 * - a refusal carries a negative code and a "fuzz.yaml:..." message (only allocation failures
 *   may lack the file name), and returns no scenario;
 * - an accepted scenario is complete: a name, a time zone, a configuration and templates, and
 *   every model, project and step index it holds resolved in range (a typo is an invalid file,
 *   never a failed run), every set-up range non-empty.
 *
 * Build with -DQL_FUZZ=ON and clang (tests/fuzz/CMakeLists.txt); seeds in tests/scenarios
 * (every scenario the suite runs) and tests/fuzz/corpus/scenario (what fuzzing added).
 */
#include "base/ql_error.h"
#include "sim/sim_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz.yaml"

static void check_expect(const ql_sim_scenario_t *sc, const sim_expect_t *e) {
    for (size_t i = 0; i < e->n_cycles; i++)
        if (e->cycles[i].model >= sc->n_models)
            __builtin_trap();
    for (size_t i = 0; i < e->n_jobs; i++)
        if (e->jobs[i].model >= sc->n_models)
            __builtin_trap();
    for (size_t i = 0; i < e->n_segs; i++)
        if (e->segs[i].model >= sc->n_models)
            __builtin_trap();
}

static void check_scenario(const ql_sim_scenario_t *sc) {
    if (!sc->name || !sc->tz || !sc->cfg || !sc->templates || !sc->zone[0] ||
        strcmp(ql_sim_scenario_file(sc), FUZZ_NAME) != 0 || ql_sim_scenario_name(sc) != sc->name ||
        ql_sim_scenario_steps(sc) != sc->n_steps)
        __builtin_trap();
    for (size_t m = 0; m < sc->n_models; m++) {
        const sim_model_def_t *md = &sc->models[m];
        if (md->project >= sc->n_projects || !md->name[0])
            __builtin_trap();
        for (size_t s = 0; s < md->n_segs; s++)
            if (md->segs[s].start >= md->segs[s].end)
                __builtin_trap();
    }
    for (size_t i = 0; i < sc->n_steps; i++) {
        const sim_step_t *st = &sc->steps[i];
        switch (st->kind) {
        case SIM_BUILD:
        case SIM_JOB:
        case SIM_SET_MODEL:
            if (st->model >= sc->n_models)
                __builtin_trap();
            break;
        case SIM_SET_PROJECT:
            if (st->project >= sc->n_projects)
                __builtin_trap();
            break;
        case SIM_LOCK: /* a taking names its server; "" is release */
            if (memchr(st->holder, '\0', sizeof st->holder) == NULL)
                __builtin_trap();
            break;
        case SIM_EXPECT:
            check_expect(sc, &st->expect);
            break;
        default:
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ql_sim_scenario_t *sc = (ql_sim_scenario_t *)1; /* must be reset on every path */
    ql_err_t err;
    ql_err_clear(&err);
    int rc = ql_sim_scenario_load_buffer((const char *)data, size, FUZZ_NAME, &sc, &err);
    if (rc) {
        if (rc > 0 || sc != NULL || err.code != rc)
            __builtin_trap();
        if (rc != UV_ENOMEM && strncmp(err.msg, FUZZ_NAME, strlen(FUZZ_NAME)) != 0)
            __builtin_trap();
        return 0;
    }
    check_scenario(sc);
    ql_sim_scenario_free(sc);
    return 0;
}
