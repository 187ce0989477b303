/*
 * Logging: one line per event, `LEVEL time module: message key=value ...` (STYLE.md rule 8).
 *
 * A ql_log_t is an object passed to whoever logs (no global logger). Its time comes from a
 * callback, so the simulator's lines carry virtual time. Thread-safe as long as the sink is:
 * the default sink writes each line with one fputs to stderr, which stdio locks.
 */
#ifndef QL_LOG_H
#define QL_LOG_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ql_log_level {
    QL_LOG_DEBUG = 0,
    QL_LOG_INFO = 1,
    QL_LOG_WARN = 2,
    QL_LOG_ERROR = 3,
    QL_LOG_OFF = 4,
} ql_log_level_t;

typedef struct ql_log ql_log_t;
/* Receives a formatted line (borrowed, without newline). */
typedef void (*ql_log_sink_fn)(void *arg, ql_log_level_t level, const char *line);
/* Wall time in epoch ms. */
typedef int64_t (*ql_log_now_fn)(void *arg);

struct ql_log {
    ql_log_level_t level; /* lines below it are dropped */
    ql_log_sink_fn sink;  /* NULL: stderr (or `out` when set) */
    void *sink_arg;
    ql_log_now_fn now; /* NULL: the system clock */
    void *now_arg;
    FILE *out;
};

/* A logger writing to stderr at level. */
void ql_log_init(ql_log_t *log, ql_log_level_t level);
const char *ql_log_level_name(ql_log_level_t level);
int ql_log_level_parse(const char *name, ql_log_level_t *out);
/* log may be NULL (nothing is logged). */
void ql_log(ql_log_t *log, ql_log_level_t level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ql_logv(ql_log_t *log, ql_log_level_t level, const char *module, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static inline int ql_log_enabled(const ql_log_t *log, ql_log_level_t level) {
    return log && level >= log->level;
}
/* Formats epoch ms as ISO-8601 UTC ("2026-09-01T02:00:00.000Z") into buf (32 bytes). */
void ql_log_format_time(int64_t ms, char *buf, size_t cap);

#endif
