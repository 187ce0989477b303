/*
 * What the steps of the multi-server tests recorded (test_multihost.c, test_pg_partition.c):
 * each try of a step appends "start SEQ PID MS" and "end SEQ PID MS" lines (PID: the qilind that
 * ran it, MS: wall ms), or "overlap ...", to DIR/trace. And the servers' logs, read together.
 * Header-only helpers over rest_util.h, like it.
 */
#ifndef QL_TEST_STEP_TRACE_H
#define QL_TEST_STEP_TRACE_H

#include "tests/api/rest_util.h"

typedef struct trace {
    int n;
    struct {
        char what[16];
        int seq;
        long pid;
        int64_t ms;
    } e[64];
} trace_t;

/* The lines of dir/trace so far (none when it does not exist yet). */
UNUSED static trace_t read_trace(const char *dir) {
    trace_t t = {0};
    FILE *f = fopen(path_in(dir, "trace"), "r");
    if (!f)
        return t;
    while (t.n < 64 && fscanf(f, "%15s %d %ld %lld", t.e[t.n].what, &t.e[t.n].seq, &t.e[t.n].pid,
                              (long long *)&t.e[t.n].ms) == 4)
        t.n++;
    fclose(f);
    return t;
}

/* How many "what" lines step seq has. */
UNUSED static int count(const trace_t *t, const char *what, int seq) {
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].what, what) && t->e[i].seq == seq)
            n++;
    return n;
}

/* The k-th (0-based) "what" line of step seq: its pid and wall ms; false when there is none. */
UNUSED static bool nth(const trace_t *t, const char *what, int seq, int k, long *pid, int64_t *ms) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].what, what) && t->e[i].seq == seq && k-- == 0) {
            *pid = t->e[i].pid;
            *ms = t->e[i].ms;
            return true;
        }
    return false;
}

/* Waits until step seq has started k+1 times; returns when (wall ms) and on which server. */
UNUSED static int64_t wait_start(const char *dir, int seq, int k, long *pid, int timeout_ms) {
    int64_t deadline = now_ms() + timeout_ms, ms = 0;
    for (;;) {
        trace_t t = read_trace(dir);
        if (nth(&t, "start", seq, k, pid, &ms))
            return ms;
        cr_assert_lt(now_ms(), deadline, "step %d never started %d times", seq, k + 1);
        poll_pause();
    }
}

/* Lines of the logs of the n servers holding both needles. */
UNUSED static int log_lines(const qd_t *servers, int n, const char *a, const char *b) {
    int found = 0;
    for (int i = 0; i < n; i++) {
        char *s = read_file(servers[i].log);
        for (char *line = s; line && *line;) {
            char *eol = strchr(line, '\n');
            if (eol)
                *eol = '\0';
            if (strstr(line, a) && strstr(line, b))
                found++;
            line = eol ? eol + 1 : line + strlen(line);
        }
        free(s);
    }
    return found;
}

#endif
