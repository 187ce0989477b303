/*
 * qilin project|model|segment|job|auto-build: finds the command in its group's table, parses
 * its arguments, resolves the server and the credentials, and runs it (see client_int.h and
 * docs/cli.md).
 *
 * Settings resolve per key with the precedence flags > environment (QILIN_SERVER, QILIN_USER,
 * QILIN_PASSWORD, QILIN_PASSWORD_FILE) > the config file (--config FILE, else
 * $XDG_CONFIG_HOME/qilin/cli.yaml or ~/.config/qilin/cli.yaml; keys server, user, password,
 * password-file) > the defaults (http://127.0.0.1:7070, ADMIN, and the password in the password
 * file, by default data/admin.password: what qilind generates in its default data directory
 * when no users are configured). There is no default password: Kylin's public KYLIN is sent
 * only when given. A missing default file is fine; a missing --config file, a file that does
 * not parse or an unknown key is a usage error naming file:line.
 */
#include "api/ql_admin_password.h"
#include "base/ql_yaml.h"
#include "cli.h"
#include "client_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_SERVER "http://127.0.0.1:7070"
#define DEFAULT_USER "ADMIN"
#define DEFAULT_PASSWORD_FILE "data/" QL_ADMIN_PASSWORD_FILE

static const ql_cli_group_t *const groups[] = {
    &ql_cli_group_project, &ql_cli_group_model,     &ql_cli_group_segment,
    &ql_cli_group_job,     &ql_cli_group_autobuild,
};
#define N_GROUPS (sizeof groups / sizeof groups[0])

int ql_cli_is_client_command(const char *name) {
    for (size_t i = 0; i < N_GROUPS; i++)
        if (!strcmp(groups[i]->name, name))
            return 1;
    return 0;
}

/* The three settings as found in one source; strings borrowed from that source. */
typedef struct settings {
    const char *server, *user, *password, *password_file;
} settings_t;

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Reads the config file into *out (strings borrowed from *doc, which the caller frees).
 * Returns 0 or QL_CLI_USAGE (printed). */
static int load_file(ql_cli_t *cli, const char *explicit_path, ql_yaml_doc_t **doc,
                     settings_t *out) {
    char path[4096];
    const char *xdg = env("XDG_CONFIG_HOME"), *home = env("HOME");
    if (explicit_path)
        snprintf(path, sizeof path, "%s", explicit_path);
    else if (xdg)
        snprintf(path, sizeof path, "%s/qilin/cli.yaml", xdg);
    else if (home)
        snprintf(path, sizeof path, "%s/.config/qilin/cli.yaml", home);
    else
        return 0;
    struct stat st;
    if (!explicit_path && stat(path, &st) != 0)
        return 0; /* no file: nothing configured there */
    ql_err_t err = {0};
    if (ql_yaml_load_file(path, QL_YAML_ALLOW_EMPTY, doc, &err))
        return ql_cli_usage(cli, "config file: %s", err.msg);
    const ql_yaml_node_t *root = ql_yaml_doc_root(*doc);
    if (ql_yaml_is_null(root))
        return 0;
    static const char *const keys[] = {"server", "user", "password", "password-file", NULL};
    if (ql_yaml_expect(root, QL_YAML_MAPPING, "the config file", &err) ||
        ql_yaml_check_keys(root, keys, &err) ||
        ql_yaml_get_str(root, "server", QL_YAML_OPTIONAL, &out->server, &err) ||
        ql_yaml_get_str(root, "user", QL_YAML_OPTIONAL, &out->user, &err) ||
        ql_yaml_get_str(root, "password", QL_YAML_OPTIONAL, &out->password, &err) ||
        ql_yaml_get_str(root, "password-file", QL_YAML_OPTIONAL, &out->password_file, &err))
        return ql_cli_usage(cli, "config file: %s", err.msg);
    /* Like ssh with its keys: a password others can read deserves a word, not a refusal
     * (the file may sit on a single-user machine). */
    if (out->password && stat(path, &st) == 0 && (st.st_mode & 077))
        fprintf(cli->err,
                "%s: warning: %s holds a password and is readable by others (chmod 600 %s)\n",
                cli->prog, path, path);
    return 0;
}

/* "host:7070" -> "http://host:7070/kylin/api"; a URL already ending in /kylin/api is kept. */
static char *base_url(const char *server) {
    size_t n = strlen(server);
    while (n && server[n - 1] == '/')
        n--;
    const char *scheme = strstr(server, "://") ? "" : "http://";
    const char *suffix = "/kylin/api";
    size_t sl = strlen(suffix);
    if (n >= sl && !strncmp(server + n - sl, suffix, sl))
        suffix = "";
    size_t len = strlen(scheme) + n + strlen(suffix) + 1;
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "%s%.*s%s", scheme, (int)n, server, suffix);
    return out;
}

static int setup(ql_cli_t *cli, const ql_cli_args_t *a) {
    ql_yaml_doc_t *doc = NULL;
    settings_t file = {0};
    int rc = load_file(cli, ql_cli_get(a, "config"), &doc, &file);
    if (rc) {
        ql_yaml_doc_free(doc);
        return rc;
    }
    const char *server = ql_cli_get(a, "server"), *user = ql_cli_get(a, "user"),
               *password = ql_cli_get(a, "password");
    if (!server && !(server = env("QILIN_SERVER")) && !(server = file.server))
        server = DEFAULT_SERVER;
    if (!user && !(user = env("QILIN_USER")) && !(user = file.user))
        user = DEFAULT_USER;
    char pw_buf[QL_ADMIN_PASSWORD_MAX];
    pw_buf[0] = '\0';
    if (!password && !(password = env("QILIN_PASSWORD")) && !(password = file.password)) {
        const char *pw_file = ql_cli_get(a, "password-file");
        bool given =
            pw_file || (pw_file = env("QILIN_PASSWORD_FILE")) || (pw_file = file.password_file);
        if (!pw_file)
            pw_file = DEFAULT_PASSWORD_FILE;
        ql_err_t err = {0};
        if (ql_admin_password_read(pw_file, false, pw_buf, sizeof pw_buf, &err)) {
            if (given) {
                ql_yaml_doc_free(doc);
                return ql_cli_usage(cli, "--password-file: %s", err.msg);
            }
            /* The server will say 401; the note then says what was tried. */
            snprintf(cli->pw_note, sizeof cli->pw_note,
                     "no password given, and none read from the password file (%s)", err.msg);
        }
        password = pw_buf;
    }
    if (!*server) {
        ql_yaml_doc_free(doc);
        return ql_cli_usage(cli, "the server URL is empty");
    }
    /* Copies: the strings may live in the config document, freed here. */
    cli->base = base_url(server);
    cli->user = strdup(user);
    cli->password = strdup(password);
    sodium_memzero(pw_buf, sizeof pw_buf);
    ql_yaml_doc_free(doc);
    if (!cli->base || !cli->user || !cli->password)
        return ql_cli_fail(cli, QL_CLI_USAGE, "out of memory");
    cli->json = ql_cli_has(a, "json");
    const char *tz = ql_cli_get(a, "timezone");
    if (tz && ql_tz_load(tz, &cli->tz))
        return ql_cli_usage(cli,
                            "--timezone: '%s' is not a time zone of the tz database "
                            "(e.g. UTC, Asia/Shanghai, America/New_York)",
                            tz);
    return 0;
}

static void cli_free(ql_cli_t *cli) {
    if (cli->curl)
        curl_easy_cleanup(cli->curl);
    if (cli->password) {
        /* The password does not need to linger in a core dump. */
        volatile char *p = cli->password;
        while (*p)
            *p++ = '\0';
    }
    free(cli->password);
    free(cli->user);
    free(cli->base);
    ql_tz_free(cli->tz);
}

static int run_cmd(const ql_cli_group_t *g, const ql_cli_cmd_t *cmd, int argc, char **argv) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "qilin %s", g->name);
    ql_cli_args_t a;
    int rc = ql_cli_args_parse(cmd, prefix, argc, argv, &a);
    if (rc < 0) {
        ql_cli_cmd_help(cmd, prefix, stdout);
        ql_cli_args_free(&a);
        return QL_CLI_OK;
    }
    if (rc) {
        ql_cli_args_free(&a);
        return rc;
    }
    ql_cli_t cli = {.out = stdout, .err = stderr};
    snprintf(cli.prog, sizeof cli.prog, "%s %s", prefix, cmd->name);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        ql_cli_args_free(&a);
        return ql_cli_fail(&cli, QL_CLI_UNREACHABLE, "cannot initialise libcurl");
    }
    rc = setup(&cli, &a);
    if (!rc)
        rc = cmd->run(&cli, &a);
    fflush(cli.out);
    cli_free(&cli);
    curl_global_cleanup();
    ql_cli_args_free(&a);
    return rc;
}

int ql_cmd_client(int argc, char **argv) {
    const ql_cli_group_t *g = NULL;
    for (size_t i = 0; i < N_GROUPS && !g; i++)
        if (!strcmp(groups[i]->name, argv[0]))
            g = groups[i];
    if (!g) {
        fprintf(stderr, "qilin: unknown command '%s'\n", argv[0]);
        return QL_CLI_USAGE;
    }
    if (argc < 2) {
        ql_cli_group_help(g, stderr);
        return QL_CLI_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        ql_cli_group_help(g, stdout);
        return QL_CLI_OK;
    }
    for (size_t i = 0; i < g->n_cmds; i++)
        if (!strcmp(g->cmds[i].name, name))
            return run_cmd(g, &g->cmds[i], argc - 1, argv + 1);
    fprintf(stderr, "qilin %s: unknown command '%s' (see qilin %s --help)\n", g->name, name,
            g->name);
    return QL_CLI_USAGE;
}
