/* qilin job wait and qilin job submit (the table is in client_job.c). */
#include "base/ql_buf.h"
#include "base/ql_yaml.h"
#include "client_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int ql_cli_job_wait_run(ql_cli_t *cli, const ql_cli_args_t *a);
int ql_cli_job_submit_run(ql_cli_t *cli, const ql_cli_args_t *a);

/* Larger than any server's body limit (1 MiB by default): the server gives the precise 413. */
#define MAX_DEFINITION (16u * 1024u * 1024u)

static int64_t now_ms(void) {
    /* Monotonic: a wall-clock step (NTP, a VM resume) must not end a wait early or late. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int64_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int get_duration(ql_cli_t *cli, const ql_cli_args_t *a, const char *name, int64_t *out) {
    const char *v = ql_cli_get(a, name);
    if (!v)
        return 0;
    if (ql_yaml_parse_duration(v, out) || *out <= 0)
        return ql_cli_usage(cli, "--%s: '%s' is not a duration (e.g. 500ms, 90s, 5m, 1h30m)", name,
                            v);
    return 0;
}

/* Display statuses that need someone to act before the job moves again: waiting on is
 * pointless. FINISHED is the one success. */
static bool stopped(const char *status) {
    static const char *const end[] = {"FINISHED", "DISCARDED", "ERROR", "STOPPED", NULL};
    for (const char *const *e = end; *e; e++)
        if (status && !strcmp(status, *e))
            return true;
    return false;
}

int ql_cli_job_wait_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    int64_t timeout = 0, interval = 2000;
    int rc = get_duration(cli, a, "timeout", &timeout);
    if (!rc)
        rc = get_duration(cli, a, "interval", &interval);
    if (rc)
        return rc;
    ql_cli_job_finder_t f = {.id = a->pos[0]};
    const char *project = ql_cli_get(a, "project");
    if (project && !(f.project = strdup(project)))
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    int64_t start = now_ms(), deadline = timeout ? start + timeout : INT64_MAX;
    /* Short pauses first, so a job that takes a second is seen at once, then up to
     * --interval, so a job that takes hours costs few requests. */
    int64_t delay = interval < 100 ? interval : 100;
    char last[32] = "";
    json_t *job = NULL;
    for (;;) {
        json_decref(job);
        job = NULL;
        if ((rc = ql_cli_job_find(cli, &f, &job)))
            break;
        const char *status = json_string_value(ql_cli_field(job, "job_status|status"));
        if (!status)
            status = "?";
        if (strcmp(status, last)) {
            snprintf(last, sizeof last, "%s", status);
            fprintf(cli->err, "job %s %s\n", f.id, status);
        }
        if (stopped(status))
            break;
        int64_t now = now_ms();
        if (now >= deadline) {
            rc = ql_cli_fail(cli, QL_CLI_REFUSED, "job %s is still %s after %s", f.id, status,
                             ql_cli_get(a, "timeout"));
            break;
        }
        pause_ms(delay < deadline - now ? delay : deadline - now);
        delay = delay * 2 < interval ? delay * 2 : interval;
    }
    if (!rc) {
        const char *status = json_string_value(ql_cli_field(job, "job_status|status"));
        bool ok = status && !strcmp(status, "FINISHED");
        if (cli->json) {
            ql_cli_print_json(cli, job);
        } else {
            char d[64];
            fprintf(
                cli->out, "job %s %s (%s)\n", f.id, status,
                ql_cli_format(cli, ql_cli_field(job, "duration"), QL_CLI_DURATION, d, sizeof d));
        }
        if (!ok)
            rc = ql_cli_fail(cli, QL_CLI_REFUSED,
                             "job %s did not finish: %s (see qilin job show %s)", f.id, status,
                             f.id);
    }
    json_decref(job);
    ql_cli_job_finder_free(&f);
    return rc;
}

static int read_all(ql_cli_t *cli, const char *path, char **out, size_t *len) {
    FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!in)
        return ql_cli_usage(cli, "cannot read %s: %s", path, strerror(errno));
    ql_strbuf_t b = {0};
    int rc = 0;
    for (;;) {
        /* Room for a read of at least 64 KiB less the NUL's byte: 64 KiB first, then doubled. */
        if (ql_strbuf_reserve(&b, 65535, 65536)) {
            rc = ql_cli_fail(cli, QL_CLI_USAGE, "out of memory");
            break;
        }
        size_t got = fread(b.p + b.len, 1, b.cap - b.len - 1, in);
        b.len += got;
        if (b.len > MAX_DEFINITION) {
            rc = ql_cli_usage(cli, "%s is larger than %u MiB", path, MAX_DEFINITION >> 20);
            break;
        }
        if (got == 0) {
            if (ferror(in))
                rc = ql_cli_usage(cli, "cannot read %s: %s", path, strerror(errno));
            break;
        }
    }
    if (in != stdin)
        fclose(in);
    if (rc) {
        ql_strbuf_free(&b);
        return rc;
    }
    b.p[b.len] = '\0';
    *out = b.p;
    *len = b.len;
    return 0;
}

int ql_cli_job_submit_run(ql_cli_t *cli, const ql_cli_args_t *a) {
    const char *path = a->pos[0];
    char *body = NULL;
    size_t len = 0;
    int rc = read_all(cli, path, &body, &len);
    if (rc)
        return rc;
    size_t pl = strlen(path);
    bool json = pl >= 5 && !strcmp(path + pl - 5, ".json");
    json_t *data = NULL;
    rc = ql_cli_call_raw(cli, "POST", "/jobs", NULL, 0,
                         json ? "application/json;charset=utf-8" : "application/yaml", body, len,
                         &data);
    free(body);
    if (rc)
        return rc;
    return ql_cli_print_jobs(cli, data, ql_cli_has(a, "quiet"));
}
