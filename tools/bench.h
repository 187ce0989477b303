/*
 * The benchmarks (docs/performance.md): the ql_bench library, linked into `qilin` (`qilin bench
 * NAME`, tools/bench.c) and into the standalone qilin-bench-* programs (tools/bench_*_main.c).
 * Each takes the arguments after its name, with argv[0] the name its usage shows (`qilin bench
 * store`, or the program's path), prints its figures to stdout and returns a process exit
 * status (0 ok, 1 the run failed, 2 bad arguments). Each forks a child per phase and may call
 * exit() in it; it is meant to be the whole of a process's work.
 */
#ifndef QL_BENCH_H
#define QL_BENCH_H

#include <stdint.h>

/* `qilin bench store`: durable submissions per second (group commit against one transaction per
 * submission), overlap-query latency on a large segment index, store open time and fsck on a
 * store of a million jobs. See --help and docs/performance.md. */
int ql_bench_store_main(int argc, char **argv);

/* `qilin bench dispatch`: the dispatcher's scan time at scale (warm, cold and fully cold cycle
 * caches on 100,000 models x 100 segments by default, and a table by model and segment count),
 * peak RSS and allocations per scan. See --help and docs/performance.md. */
int ql_bench_dispatch_main(int argc, char **argv);
/* The same, counting allocations with alloc_count (NULL: not counted): the standalone binary
 * passes its process-wide allocation counter (tools/bench_dispatch_main.c). */
int ql_bench_dispatch_run(int argc, char **argv, uint64_t (*alloc_count)(void));

/* `qilin bench jobs`: the job engine. Idle dispatch latency (acknowledged submission -> first
 * step started), durable throughput of noop chains, shell-step throughput against a plain
 * fork/exec loop, and recovery time on a store of a million jobs; peak RSS of each. See --help
 * and docs/performance.md, "Job engine". */
int ql_bench_jobs_main(int argc, char **argv);

#endif
