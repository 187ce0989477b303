/* Helpers shared by the benchmarks (tools/bench_int.h). */
#include "bench_int.h"

#include <ftw.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

int64_t ql_bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double ql_bench_peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void ql_bench_rm_rf(const char *path) {
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

double ql_bench_store_gib(const char *dir) {
    char file[4100];
    struct stat st;
    snprintf(file, sizeof file, "%s/data.mdb", dir);
    return stat(file, &st) == 0 ? (double)st.st_blocks * 512.0 / (1 << 30) : 0.0;
}
