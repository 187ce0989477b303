#include "base/ql_error.h"
#include "base/ql_log.h"

#include <string.h>
#include <time.h>

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};

void ql_log_init(ql_log_t *log, ql_log_level_t level) {
    memset(log, 0, sizeof *log);
    log->level = level;
}

const char *ql_log_level_name(ql_log_level_t level) {
    return (unsigned)level <= QL_LOG_OFF ? level_names[level] : "?";
}

int ql_log_level_parse(const char *name, ql_log_level_t *out) {
    static const char *const lower[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i <= QL_LOG_OFF; i++)
        if (strcmp(name, lower[i]) == 0 || strcmp(name, level_names[i]) == 0) {
            *out = (ql_log_level_t)i;
            return 0;
        }
    return QL_EINVAL;
}

void ql_log_format_time(int64_t ms, char *buf, size_t cap) {
    time_t secs = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    int frac = (int)(ms - (int64_t)secs * 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    int n = snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
    if (n < 0 && cap > 0) /* cannot happen for these formats; keep the buffer a string anyway */
        buf[0] = '\0';
}

void ql_logv(ql_log_t *log, ql_log_level_t level, const char *module, const char *fmt, va_list ap) {
    if (!ql_log_enabled(log, level))
        return;
    int64_t now;
    if (log->now) {
        now = log->now(log->now_arg);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    }
    char line[2048], ts[40];
    ql_log_format_time(now, ts, sizeof ts);
    int n = snprintf(line, sizeof line, "%-5s %s %s: ", ql_log_level_name(level), ts, module);
    if (n > 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (log->sink) {
        log->sink(log->sink_arg, level, line);
        return;
    }
    FILE *out = log->out ? log->out : stderr;
    size_t len = strlen(line);
    if (len < sizeof line - 1) {
        line[len] = '\n';
        line[len + 1] = '\0';
    }
    fputs(line, out);
}

void ql_log(ql_log_t *log, ql_log_level_t level, const char *module, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ql_logv(log, level, module, fmt, ap);
    va_end(ap);
}
