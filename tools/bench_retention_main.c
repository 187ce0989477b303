/* qilin-bench-retention: the retention benchmark as a standalone binary (docs/performance.md). */
#include "bench.h"

int main(int argc, char **argv) {
    return ql_bench_retention_main(argc, argv);
}
