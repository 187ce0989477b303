/* qilin-bench-jobs: the job engine benchmark as a standalone binary (docs/performance.md). */
#include "bench.h"

int main(int argc, char **argv) {
    return ql_bench_jobs_main(argc, argv);
}
