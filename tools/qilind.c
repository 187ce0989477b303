/*
 * qilind: the Qilin job server. A thin main over the libraries: configuration (scheduler/
 * ql_config.h), the engine (server/ql_node.h) and the REST API (api/ql_api.h) on one libuv
 * loop.
 *
 * DESIGN. One loop thread runs everything but the store's writer thread and libuv's threadpool
 * (password verification). Start-up refuses any configuration error before opening anything.
 * SIGTERM or SIGINT stops gracefully: the API stops accepting and closes its connections, the
 * node stops scheduling (running steps paused back to READY, or waited for, per
 * qilin.shutdown.running-steps), the writer is drained (every acknowledged change is durable),
 * every handle is closed and the process exits 0. A second signal exits at once (steps die with
 * it: qilin-exec gives them PR_SET_PDEATHSIG, and recovery puts their jobs back to READY).
 */
#include "api/api.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_CONFIG "conf/qilin.yaml"

typedef struct qilind {
    uv_loop_t loop;
    ql_config_t *cfg;
    ql_log_t log;
    ql_node_t *node;
    ql_api_t *api;
    uv_signal_t sig[2];
    int n_sig;
    int signals;
    bool api_closed, node_stopped;
} qilind_t;

static void usage(FILE *out) {
    fprintf(out,
            "usage: qilind [--config FILE] [--data DIR] [--set KEY=VALUE ...] [--print-config]\n"
            "              [--help] [--version]\n"
            "\n"
            "The Qilin job server: Kylin's build scheduling and REST API (/kylin/api).\n"
            "\n"
            "  --config FILE     YAML configuration (default: " DEFAULT_CONFIG " when it exists);\n"
            "                    keys and values: docs/configuration.md\n"
            "  --data DIR        data directory (the same as --set qilin.storage.path=DIR)\n"
            "  --set KEY=VALUE   override one key; repeatable, applied after the file\n"
            "  --print-config    print the effective configuration with each value's source\n"
            "  --help            this text\n"
            "  --version         the version\n"
            "\n"
            "Relative paths in the file (qilin.storage.path, qilin.jobs.templates) are\n"
            "relative to the file's folder; in --data and --set, to the working directory.\n"
            "qilin-exec is looked for next to qilind. The server\n"
            "prints \"qilind listening on http://HOST:PORT\" on stderr once it serves; SIGTERM\n"
            "or SIGINT stops it gracefully.\n");
}

/* ---- shutdown ---- */

static void close_signals(qilind_t *d) {
    for (int i = 0; i < d->n_sig; i++)
        uv_close((uv_handle_t *)&d->sig[i], NULL);
    d->n_sig = 0;
}

static void maybe_finished(qilind_t *d) {
    if (!d->api_closed || !d->node_stopped)
        return;
    ql_api_free(d->api);
    d->api = NULL;
    close_signals(d);
    ql_log(&d->log, QL_LOG_INFO, "qilind", "stopped");
}

static void node_stopped(void *arg) {
    qilind_t *d = arg;
    d->node = NULL;
    d->node_stopped = true;
    maybe_finished(d);
}

/* The node (and with it the store) stops only once the API has no read in flight. */
static void api_closed(void *arg) {
    qilind_t *d = arg;
    d->api_closed = true;
    if (d->node)
        ql_node_stop(d->node, node_stopped, d);
    else
        d->node_stopped = true;
    maybe_finished(d);
}

static void on_signal(uv_signal_t *h, int signum) {
    qilind_t *d = h->data;
    if (d->signals++) {
        ql_log(&d->log, QL_LOG_WARN, "qilind", "second signal: exiting at once signal=%s",
               strsignal(signum));
        _exit(128 + signum);
    }
    ql_log(&d->log, QL_LOG_INFO, "qilind", "shutting down signal=%s running_steps=%s",
           strsignal(signum), ql_config_get_str(d->cfg, "qilin.shutdown.running-steps"));
    ql_api_close(d->api, api_closed, d);
}

/* ---- start-up ---- */

static int load_config(qilind_t *d, int argc, char **argv, const char **config_path, bool *print) {
    const char *config = NULL, *data = NULL;
    *print = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--version")) {
            printf("qilind %s\n", QL_VERSION);
            exit(0);
        } else if (!strcmp(a, "--print-config")) {
            *print = true;
        } else if (!strcmp(a, "--config") || !strcmp(a, "--data") || !strcmp(a, "--set")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "qilind: %s needs a value (see qilind --help)\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--config"))
                config = v;
            else if (!strcmp(a, "--data"))
                data = v;
        } else if (!strncmp(a, "--config=", 9)) {
            config = a + 9;
        } else if (!strncmp(a, "--data=", 7)) {
            data = a + 7;
        } else if (!strncmp(a, "--set=", 6)) {
            /* applied below, in order */
        } else {
            fprintf(stderr, "qilind: unknown argument '%s' (see qilind --help)\n", a);
            return 2;
        }
    }
    if (ql_config_new(&d->cfg)) {
        fprintf(stderr, "qilind: out of memory\n");
        return 1;
    }
    ql_err_t err = {0};
    if (!config && access(DEFAULT_CONFIG, F_OK) == 0)
        config = DEFAULT_CONFIG;
    if (config && ql_config_load_file(d->cfg, config, &err)) {
        fprintf(stderr, "qilind: %s\n", err.msg[0] ? err.msg : ql_strerror(err.code));
        return 2;
    }
    if (data && ql_config_set(d->cfg, "qilin.storage.path", data, "--data", 0, &err)) {
        fprintf(stderr, "qilind: %s\n", err.msg);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--set"))
            v = argv[++i];
        else if (!strncmp(argv[i], "--set=", 6))
            v = argv[i] + 6;
        else if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "--data"))
            i++;
        if (v && ql_config_set_arg(d->cfg, v, &err)) {
            fprintf(stderr, "qilind: %s\n", err.msg);
            return 2;
        }
    }
    *config_path = config;
    return 0;
}

static int start(qilind_t *d, const char *config_path) {
    ql_err_t err = {0};
    /* Relative paths of the file were resolved against its folder when it was loaded. */
    ql_node_opts_t no = {.config = d->cfg, .loop = &d->loop, .log = &d->log};
    const char *listen = ql_config_get_str(d->cfg, "qilin.server.listen");
    const char *data = ql_config_get_str(d->cfg, "qilin.storage.path");
    ql_log(&d->log, QL_LOG_INFO, "qilind", "starting version=%s config=%s data=%s mode=%s",
           QL_VERSION, config_path ? config_path : "(defaults)", data,
           ql_config_serves_jobs(d->cfg) ? (ql_config_serves_queries(d->cfg) ? "all" : "job")
                                         : "query");
    if (ql_node_start(&no, &d->node, &err)) {
        ql_log(&d->log, QL_LOG_ERROR, "qilind", "cannot start: %s", err.msg);
        fprintf(stderr, "qilind: %s\n", err.msg);
        return 1;
    }
    ql_api_opts_t ao = {.loop = &d->loop, .node = d->node, .log = &d->log};
    int rc = ql_api_new(&ao, &d->api, &err);
    if (!rc)
        rc = ql_api_listen(d->api, listen, &err);
    if (rc) {
        ql_log(&d->log, QL_LOG_ERROR, "qilind", "cannot start: %s", err.msg);
        fprintf(stderr, "qilind: %s\n", err.msg);
        return 1;
    }
    const char *host;
    int port = 0;
    ql_config_get_address(d->cfg, "qilin.server.listen", &host, &port);
    ql_api_port(d->api, &port);
    bool v6 = strchr(host, ':') != NULL;
    char address[300];
    snprintf(address, sizeof address, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
    ql_node_set_api_address(d->node, address);
    const char *role = !ql_config_serves_jobs(d->cfg) ? "none (query mode)"
                       : ql_node_is_master(d->node)   ? "master"
                       : ql_node_runs_jobs(d->node)   ? "job-server"
                                                      : "standby";
    const char *holder = ql_node_lock_holder(d->node);
    char mode[64] = "";
    const char *const *modes;
    size_t n_modes = ql_config_get_list(d->cfg, "kylin.server.mode", &modes);
    for (size_t i = 0, off = 0; i < n_modes && off < sizeof mode; i++)
        off += (size_t)snprintf(mode + off, sizeof mode - off, "%s%s", i ? "," : "", modes[i]);
    ql_log(&d->log, QL_LOG_INFO, "qilind",
           "listening address=%s%s%s:%d data=%s mode=%s role=%s%s%s", v6 ? "[" : "", host,
           v6 ? "]" : "", port, data, mode, role, holder[0] ? " lock_holder=" : "", holder);
    fprintf(stderr, "qilind listening on http://%s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "",
            port);
    fflush(stderr);
    return 0;
}

int main(int argc, char **argv) {
    qilind_t d;
    memset(&d, 0, sizeof d);
    signal(SIGPIPE, SIG_IGN);
    const char *config_path = NULL;
    bool print = false;
    int rc = load_config(&d, argc, argv, &config_path, &print);
    if (rc) {
        ql_config_free(d.cfg);
        return rc;
    }
    if (print) {
        rc = ql_config_dump(d.cfg, stdout) ? 1 : 0;
        ql_config_free(d.cfg);
        return rc;
    }
    ql_err_t err = {0};
    if (ql_config_check(d.cfg, &err)) {
        fprintf(stderr, "qilind: %s\n", err.msg);
        ql_config_free(d.cfg);
        return 2;
    }
    ql_log_level_t level = QL_LOG_INFO;
    ql_log_level_parse(ql_config_get_str(d.cfg, "qilin.log.level"), &level);
    ql_log_init(&d.log, level);
    if ((rc = uv_loop_init(&d.loop))) {
        fprintf(stderr, "qilind: cannot create the event loop: %s\n", uv_strerror(rc));
        ql_config_free(d.cfg);
        return 1;
    }
    int exit_code = start(&d, config_path);
    if (exit_code == 0) {
        static const int signums[] = {SIGTERM, SIGINT};
        for (int i = 0; i < 2; i++) {
            uv_signal_init(&d.loop, &d.sig[i]);
            d.sig[i].data = &d;
            uv_signal_start(&d.sig[i], on_signal, signums[i]);
            d.n_sig++;
        }
    } else {
        /* Close what did start, the same way a signal would, then exit non-zero. */
        d.signals = 1;
        if (d.api)
            ql_api_close(d.api, api_closed, &d);
        else
            api_closed(&d);
    }
    uv_run(&d.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&d.loop) == UV_EBUSY) {
        /* A handle left open is a bug; report it rather than hide it. */
        ql_log(&d.log, QL_LOG_ERROR, "qilind", "handles still open at exit");
        if (!exit_code)
            exit_code = 1;
    }
    ql_config_free(d.cfg);
    return exit_code;
}
