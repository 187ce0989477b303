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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* `qilin bench retention`: a year of retention on the virtual clock (tools/bench_retention.c,
 * docs/performance.md, Retention): the store's size and record counts every few simulated days,
 * fsck, and the dispatcher's scan time with and without a retention batch before it. */
int ql_bench_retention_main(int argc, char **argv);

typedef struct ql_bench_retention_opts {
    int models;                    /* built daily (trigger 01:00, one noop step) */
    int days;                      /* simulated */
    int sample_days;               /* a sample every this many days, and at the end */
    int survival_days;             /* kylin.garbage.storage.executable-survival-time-threshold */
    int64_t scan_interval_ms;      /* the dispatcher's */
    int64_t retention_interval_ms; /* qilin.retention.interval-ms when on */
    int batch;                     /* qilin.retention.batch */
    bool retention;                /* false: qilin.retention.interval-ms 0 */
    uint64_t map_size;             /* the LMDB map, bytes */
    const char *dir;               /* borrowed: where the temporary store goes; NULL: $TMPDIR */
    FILE *progress;                /* borrowed, NULL: each sample is printed there */
} ql_bench_retention_opts_t;

typedef struct ql_bench_retention_sample {
    int day;
    uint64_t used_bytes, file_bytes; /* ql_store_stat */
    uint64_t jobs, steps, segments;  /* ql_store_fsck */
    uint64_t violations;             /* ql_store_fsck */
    uint64_t removed;                /* jobs retention deleted so far */
    double wall_s;                   /* since the start */
} ql_bench_retention_sample_t;

typedef struct ql_bench_retention_dist {
    size_t n;
    double mean, p50, p99, max; /* ms */
} ql_bench_retention_dist_t;

/* The scans of the first hours of the day are also timed by their time of day, at most this
 * many (the first 3 hours): a batch's cost is then the same scan with and without retention. */
#define QL_BENCH_RETENTION_SLOTS 18

typedef struct ql_bench_retention_result {
    ql_bench_retention_sample_t *samples; /* owned: ql_bench_retention_result_free */
    size_t n_samples;
    uint64_t removed, scans;
    /* Scans after the survival time passed, [0] without and [1] with a retention batch since
     * the previous scan: the scan's wall time and the wall time since the previous scan. */
    ql_bench_retention_dist_t scan[2], gap[2];
    /* The same scans at time of day i x the scan interval, i < n_slots, and how many of them
     * followed a retention batch. */
    ql_bench_retention_dist_t slot[QL_BENCH_RETENTION_SLOTS];
    uint64_t slot_after_batch[QL_BENCH_RETENTION_SLOTS];
    size_t n_slots;
    double wall_s;
    char msg[4096]; /* why the run failed */
} ql_bench_retention_result_t;

/* The full-size defaults (1,000 models, 365 days, ...). */
void ql_bench_retention_defaults(ql_bench_retention_opts_t *o);
/* Runs o (borrowed) into *res (free it with ql_bench_retention_result_free, also after an
 * error). 0, or a negative code with res->msg saying what failed (fsck violations are
 * QL_EINVAL). Blocks for the whole run; its temporary store is removed. */
int ql_bench_retention_run(const ql_bench_retention_opts_t *o, ql_bench_retention_result_t *res);
void ql_bench_retention_result_free(ql_bench_retention_result_t *res);

#endif
