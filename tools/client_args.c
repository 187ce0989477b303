/* Argument parsing and --help for the REST client's commands (see client_int.h). A parser of
 * our own rather than getopt_long: getopt keeps its state in globals (optind), cannot mix the
 * command's options with the global ones table by table, and its messages do not name the
 * command. */
#include "client_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const ql_cli_opt_t ql_cli_global_opts[] = {
    {"server", 0, "URL", 0, "the server (default http://127.0.0.1:7070)"},
    {"user", 'u', "NAME", 0, "user name (default ADMIN)"},
    {"password", 0, "PASSWORD", 0, "password (default: read from the password file)"},
    {"password-file", 0, "FILE", 0,
     "file whose first line is the password, used when none is given (default "
     "data/admin.password, the one qilind generates in its default data directory)"},
    {"config", 0, "FILE", 0, "client config file (default ~/.config/qilin/cli.yaml)"},
    {"json", 0, NULL, 0, "print the server's data as JSON, unchanged, for scripts"},
    {"timezone", 0, "ZONE", 0, "read and show times in this IANA zone (default UTC)"},
    {"help", 'h', NULL, 0, "show this help"},
    {NULL, 0, NULL, 0, NULL},
};

static int add_opts(ql_cli_args_t *a, const ql_cli_opt_t *opts) {
    for (const ql_cli_opt_t *o = opts; o && o->name; o++) {
        if (a->n_opts == QL_CLI_MAX_OPTS)
            return -1;
        a->opts[a->n_opts++] = o;
    }
    return 0;
}

static int find_long(const ql_cli_args_t *a, const char *name, size_t len) {
    for (size_t i = 0; i < a->n_opts; i++)
        if (strlen(a->opts[i]->name) == len && !strncmp(a->opts[i]->name, name, len))
            return (int)i;
    return -1;
}

static int find_short(const ql_cli_args_t *a, char c) {
    for (size_t i = 0; i < a->n_opts; i++)
        if (a->opts[i]->short_name == c)
            return (int)i;
    return -1;
}

static int usage_err(const char *prefix, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int usage_err(const char *prefix, const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s %s: ", prefix, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see %s %s --help)\n", prefix, cmd);
    return QL_CLI_USAGE;
}

int ql_cli_args_parse(const ql_cli_cmd_t *cmd, const char *prefix, int argc, char **argv,
                      ql_cli_args_t *out) {
    memset(out, 0, sizeof *out);
    out->pos = calloc((size_t)argc + 1, sizeof *out->pos);
    if (!out->pos) {
        fprintf(stderr, "%s %s: out of memory\n", prefix, cmd->name);
        return QL_CLI_USAGE;
    }
    if (add_opts(out, cmd->opts) || add_opts(out, ql_cli_global_opts)) {
        fprintf(stderr, "%s %s: too many options (a bug)\n", prefix, cmd->name);
        return QL_CLI_USAGE;
    }
    bool help = false, options_done = false;
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (options_done || arg[0] != '-' || arg[1] == '\0') {
            out->pos[out->n_pos++] = arg;
            continue;
        }
        if (!strcmp(arg, "--")) {
            options_done = true;
            continue;
        }
        int idx;
        const char *inline_val = NULL;
        if (arg[1] == '-') {
            const char *name = arg + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            idx = find_long(out, name, len);
            if (idx < 0)
                return usage_err(prefix, cmd->name, "unknown option --%.*s", (int)len, name);
            if (eq)
                inline_val = eq + 1;
        } else {
            /* Short options take their value from the next argument or the rest of this one
             * (-pdemo), as getopt does; they are not bundled. */
            idx = find_short(out, arg[1]);
            if (idx < 0)
                return usage_err(prefix, cmd->name, "unknown option %s", arg);
            if (arg[2])
                inline_val = arg + 2;
        }
        const ql_cli_opt_t *o = out->opts[idx];
        if (!o->metavar) {
            if (inline_val)
                return usage_err(prefix, cmd->name, "--%s takes no value", o->name);
            out->vals[idx] = "";
            if (!strcmp(o->name, "help"))
                help = true;
            continue;
        }
        if (!inline_val) {
            if (i + 1 >= argc)
                return usage_err(prefix, cmd->name, "--%s needs a value (%s)", o->name, o->metavar);
            inline_val = argv[++i];
        }
        out->vals[idx] = inline_val;
    }
    /* --help wins over every other problem, so a half-typed command can still ask for it. */
    if (help)
        return -1;
    for (size_t i = 0; i < out->n_opts; i++)
        if ((out->opts[i]->flags & QL_CLI_OPT_REQUIRED) && !out->vals[i])
            return usage_err(prefix, cmd->name, "--%s is required", out->opts[i]->name);
    if ((int)out->n_pos < cmd->min_pos)
        return usage_err(prefix, cmd->name, "missing argument: expected %s", cmd->synopsis);
    if (cmd->max_pos >= 0 && (int)out->n_pos > cmd->max_pos)
        return usage_err(prefix, cmd->name, "unexpected argument '%s'", out->pos[cmd->max_pos]);
    return 0;
}

void ql_cli_args_free(ql_cli_args_t *a) {
    free(a->pos);
    a->pos = NULL;
    a->n_pos = 0;
}

static int index_of(const ql_cli_args_t *a, const char *name) {
    for (size_t i = 0; i < a->n_opts; i++)
        if (!strcmp(a->opts[i]->name, name))
            return (int)i;
    return -1;
}

const char *ql_cli_get(const ql_cli_args_t *a, const char *name) {
    int i = index_of(a, name);
    return i < 0 ? NULL : a->vals[i];
}

bool ql_cli_has(const ql_cli_args_t *a, const char *name) {
    return ql_cli_get(a, name) != NULL;
}

static void print_opts(const ql_cli_opt_t *opts, FILE *out) {
    for (const ql_cli_opt_t *o = opts; o && o->name; o++) {
        char left[64];
        int n = 0;
        if (o->short_name)
            n = snprintf(left, sizeof left, "-%c, ", o->short_name);
        snprintf(left + n, sizeof left - (size_t)n, "--%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(out, "  %-24s %s%s\n", left, o->help,
                (o->flags & QL_CLI_OPT_REQUIRED) ? " (required)" : "");
    }
}

void ql_cli_cmd_help(const ql_cli_cmd_t *cmd, const char *prefix, FILE *out) {
    fprintf(out, "usage: %s %s %s\n\n%s.\n", prefix, cmd->name, cmd->synopsis, cmd->summary);
    if (cmd->help)
        fprintf(out, "\n%s\n", cmd->help);
    if (cmd->opts && cmd->opts->name) {
        fprintf(out, "\nOptions:\n");
        print_opts(cmd->opts, out);
    }
    fprintf(out, "\nGlobal options:\n");
    print_opts(ql_cli_global_opts, out);
    fprintf(out, "  Flags win over QILIN_SERVER, QILIN_USER and QILIN_PASSWORD, which win over the "
                 "config\n  file (keys server, user, password), which wins over the defaults.\n");
    if (cmd->example)
        fprintf(out, "\nExample:\n%s\n", cmd->example);
    fprintf(out, "\nExit status: 0 done, 1 the server refused (its message and error code are "
                 "printed),\n2 usage error, 3 the server cannot be reached or refused the "
                 "credentials.\n");
}

void ql_cli_group_help(const ql_cli_group_t *g, FILE *out) {
    fprintf(out, "usage: qilin %s COMMAND [ARGS...] [OPTIONS]\n\n%s.\n", g->name, g->summary);
    if (g->help)
        fprintf(out, "\n%s\n", g->help);
    fprintf(out, "\nCommands:\n");
    for (size_t i = 0; i < g->n_cmds; i++)
        fprintf(out, "  %-12s %s\n", g->cmds[i].name, g->cmds[i].summary);
    fprintf(out,
            "\nRun 'qilin %s COMMAND --help' for a command's options and an example.\n"
            "Global options (every command): --server URL, --user NAME, --password P, "
            "--config FILE,\n--json, --timezone ZONE. See docs/cli.md.\n",
            g->name);
}

int ql_cli_usage(ql_cli_t *cli, const char *fmt, ...) {
    va_list ap;
    fprintf(cli->err, "%s: ", cli->prog);
    va_start(ap, fmt);
    vfprintf(cli->err, fmt, ap);
    va_end(ap);
    fprintf(cli->err, " (see %s --help)\n", cli->prog);
    return QL_CLI_USAGE;
}

int ql_cli_fail(ql_cli_t *cli, int code, const char *fmt, ...) {
    va_list ap;
    fprintf(cli->err, "%s: ", cli->prog);
    va_start(ap, fmt);
    vfprintf(cli->err, fmt, ap);
    va_end(ap);
    fputc('\n', cli->err);
    return code;
}

int ql_cli_get_int(ql_cli_t *cli, const ql_cli_args_t *a, const char *name, int64_t min,
                   int64_t max, int64_t *out) {
    const char *v = ql_cli_get(a, name);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max)
        return ql_cli_usage(cli, "--%s: expected an integer from %lld to %lld, got '%s'", name,
                            (long long)min, (long long)max, v);
    *out = n;
    return 0;
}

int ql_cli_pick(ql_cli_t *cli, const char *what, const char *text, const char *const *allowed,
                const char **out) {
    char list[256] = "";
    size_t used = 0;
    for (const char *const *w = allowed; *w; w++) {
        if (!strcasecmp(text, *w)) {
            *out = *w;
            return 0;
        }
        int n = snprintf(list + used, sizeof list - used, "%s%s", w == allowed ? "" : ", ", *w);
        if (n > 0 && (size_t)n < sizeof list - used)
            used += (size_t)n;
    }
    return ql_cli_usage(cli, "%s: expected one of %s, got '%s'", what, list, text);
}
