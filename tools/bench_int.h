/*
 * Helpers shared by the benchmarks of the ql_bench library (tools/bench_*.c); not public.
 * Each is a plain function of the process: no state, callable from any thread.
 */
#ifndef QL_BENCH_INT_H
#define QL_BENCH_INT_H

#include <stdint.h>

/* The monotonic clock in nanoseconds. */
int64_t ql_bench_now_ns(void);
/* The process's peak resident set so far (getrusage ru_maxrss), in MiB. */
double ql_bench_peak_rss_mib(void);
/* Removes path and everything below it, as far as it can (errors are ignored). */
void ql_bench_rm_rf(const char *path);
/* The disk space of the LMDB data file in dir (dir/data.mdb), in GiB; 0 when it has none. */
double ql_bench_store_gib(const char *dir);

#endif
