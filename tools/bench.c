/*
 * qilin bench WHAT [OPTIONS]: runs one of the benchmarks of tools/bench.h, the same code as the
 * standalone qilin-bench-* programs (docs/performance.md). The REST benchmark is not here: it
 * is scripts/bench.sh (see rest_reason below).
 */
#include "bench.h"
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *prog; /* the name its usage and messages show */
    const char *what;
} benches[] = {
    {"store", ql_bench_store_main, "qilin bench store",
     "durable submissions/s (group commit against a transaction each), overlap-query\n"
     "              latency, opening and fsck of a store of a million jobs"},
    {"dispatch", ql_bench_dispatch_main, "qilin bench dispatch",
     "the automatic build dispatcher's scan (warm, cold, fully cold, after a\n"
     "              metadata change) at 100,000 models, and a table by size"},
    {"jobs", ql_bench_jobs_main, "qilin bench jobs",
     "the job engine: dispatch latency, durable throughput of noop steps, shell\n"
     "              steps against plain fork/exec, recovery of a million-job store"},
    {"retention", ql_bench_retention_main, "qilin bench retention",
     "a year of retention on the virtual clock: store size, fsck, and scans with\n"
     "              and without a retention batch, 1,000 models built daily"},
};
#define N_BENCHES (sizeof benches / sizeof benches[0])

static const char rest_reason[] =
    "the REST benchmark is a script: bash scripts/bench.sh rest\n"
    "  (it builds a release qilind, seeds a store of 100,000 jobs with qilind-bench-seed,\n"
    "  starts the server and drives it with wrk, an external load generator it installs;\n"
    "  the server and the load must be separate processes, so it is not part of qilin)\n";

static void usage(FILE *out) {
    fprintf(out, "usage: qilin bench BENCHMARK [OPTIONS]   (qilin bench BENCHMARK --help)\n"
                 "\n"
                 "Benchmarks (docs/performance.md; the defaults are the full-size runs, which "
                 "take\nminutes and gigabytes under --dir: see each one's --help for smaller "
                 "sizes):\n");
    for (size_t i = 0; i < N_BENCHES; i++)
        fprintf(out, "  %-10s  %s\n", benches[i].name, benches[i].what);
    fprintf(out,
            "\n"
            "Not here: %s"
            "\n"
            "Exit codes: 0 done (missed performance goals are only reported), 1 a phase failed "
            "or\nits result was wrong (fsck violations, scans not all COVERED), 2 usage error.\n"
            "Example: qilin bench store --models 1000 --jobs 10000 --seconds 1 --queries 1000\n",
            rest_reason);
}

int ql_cmd_bench(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *what = argv[1];
    if (!strcmp(what, "--help") || !strcmp(what, "-h") || !strcmp(what, "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_BENCHES; i++) {
        if (strcmp(what, benches[i].name) != 0)
            continue;
        /* The benchmark's own argv: its name first, so its usage says `qilin bench NAME`.
         * argv is the process's own array, which may be written (C11 5.1.2.2.1). */
        argv[1] = (char *)benches[i].prog;
        return benches[i].run(argc - 1, argv + 1);
    }
    if (!strcmp(what, "rest")) {
        fprintf(stderr, "qilin bench rest: %s", rest_reason);
        return 2;
    }
    fprintf(stderr, "qilin bench: unknown benchmark '%s' (one of", what);
    for (size_t i = 0; i < N_BENCHES; i++)
        fprintf(stderr, "%s %s", i ? "," : ":", benches[i].name);
    fprintf(stderr, "; see qilin bench --help)\n");
    return 2;
}
