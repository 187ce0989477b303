/* qilin-bench-store: the storage benchmark as a standalone binary (same as `qilin bench store`). */
#include "bench.h"

int main(int argc, char **argv) {
    return ql_bench_store_main(argc, argv);
}
