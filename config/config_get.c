/*
 * Reading the configuration: the typed getters (a key of the wrong type is a bug in the caller
 * and aborts) and the effective-config dump of --print-config. Values are set in config.c.
 */
#include "config/ql_config.h"
#include "config_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

/* What ql_config_users gives when no users are configured: ADMIN, whose password the server
 * generates (see api/admin_password.c). */
static const ql_config_user_t builtin_user = {
    .name = QL_CONFIG_DEFAULT_USER, .password_hash = NULL, .role = "ADMIN", .builtin = true};

/* ---- getters ---- */

/* The value of key, which must exist and have one of the types in mask (bits of 1 << type).
 * Anything else is a bug in the caller, reported loudly even in release builds. */
static const value_t *must_get(const ql_config_t *cfg, const char *key, unsigned mask,
                               const char *getter) {
    const ql_config_option_t *o = ql_config_find_option(key);
    if (!o || !(mask & (1u << o->type))) {
        fprintf(stderr, "%s(\"%s\"): %s\n", getter, key ? key : "(null)",
                o ? "the option has another type" : "no such option");
        abort();
    }
    return &cfg->vals[ql_config_index_of(cfg, o)];
}

#define T(t) (1u << (t))

bool ql_config_get_bool(const ql_config_t *cfg, const char *key) {
    return must_get(cfg, key, T(QL_CONFIG_BOOL), __func__)->b;
}

int64_t ql_config_get_int(const ql_config_t *cfg, const char *key) {
    return must_get(cfg, key, T(QL_CONFIG_INT), __func__)->i;
}

int64_t ql_config_get_ms(const ql_config_t *cfg, const char *key) {
    return must_get(cfg, key, T(QL_CONFIG_MS), __func__)->i;
}

uint64_t ql_config_get_size(const ql_config_t *cfg, const char *key) {
    return (uint64_t)must_get(cfg, key, T(QL_CONFIG_SIZE), __func__)->i;
}

const char *ql_config_get_str(const ql_config_t *cfg, const char *key) {
    unsigned mask = T(QL_CONFIG_STRING) | T(QL_CONFIG_ENUM) | T(QL_CONFIG_PATH) |
                    T(QL_CONFIG_ADDRESS) | T(QL_CONFIG_TIMEZONE);
    return must_get(cfg, key, mask, __func__)->text;
}

size_t ql_config_get_list(const ql_config_t *cfg, const char *key, const char *const **items) {
    const value_t *v = must_get(cfg, key, T(QL_CONFIG_LIST), __func__);
    *items = (const char *const *)v->items;
    return v->nitems;
}

bool ql_config_list_has(const ql_config_t *cfg, const char *key, const char *item) {
    const char *const *items;
    size_t n = ql_config_get_list(cfg, key, &items);
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i], item) == 0)
            return true;
    return false;
}

void ql_config_get_address(const ql_config_t *cfg, const char *key, const char **host, int *port) {
    const value_t *v = must_get(cfg, key, T(QL_CONFIG_ADDRESS), __func__);
    *host = v->host;
    *port = v->port;
}

size_t ql_config_users(const ql_config_t *cfg, const ql_config_user_t **users) {
    const value_t *v = must_get(cfg, "qilin.server.users", T(QL_CONFIG_USERS), __func__);
    if (v->nusers == 0) {
        *users = &builtin_user;
        return 1;
    }
    *users = v->users;
    return v->nusers;
}

bool ql_config_default_user_in_use(const ql_config_t *cfg) {
    return must_get(cfg, "qilin.server.users", T(QL_CONFIG_USERS), __func__)->nusers == 0;
}

bool ql_config_serves_jobs(const ql_config_t *cfg) {
    return ql_config_list_has(cfg, "kylin.server.mode", "all") ||
           ql_config_list_has(cfg, "kylin.server.mode", "job");
}

bool ql_config_serves_queries(const ql_config_t *cfg) {
    return ql_config_list_has(cfg, "kylin.server.mode", "all") ||
           ql_config_list_has(cfg, "kylin.server.mode", "query");
}

const char *ql_config_source(const ql_config_t *cfg, const char *key, int *line) {
    const value_t *v = must_get(cfg, key, ~0u, __func__);
    if (line)
        *line = v->line;
    return v->source;
}

/* ---- dump ---- */

static void put_quoted(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

int ql_config_dump(const ql_config_t *cfg, FILE *out) {
    fprintf(out, "# Effective Qilin configuration; the comment after each value is its source.\n");
    for (size_t i = 0; i < cfg->n; i++) {
        const ql_config_option_t *o = &cfg->opts[i];
        const value_t *v = &cfg->vals[i];
        char src[320];
        ql_config_where(src, sizeof src, v->source, v->line);
        fprintf(out, "%s: ", o->key);
        switch (o->type) {
        case QL_CONFIG_BOOL:
            fputs(v->b ? "true" : "false", out);
            break;
        case QL_CONFIG_INT:
        case QL_CONFIG_MS:
        case QL_CONFIG_SIZE:
            fprintf(out, "%" PRId64, v->i);
            break;
        case QL_CONFIG_USERS:
            if (v->nusers == 0) {
                fprintf(out, "[]  # %s: the built-in %s user\n", src, QL_CONFIG_DEFAULT_USER);
                continue;
            }
            fprintf(out, " # %s (password hashes redacted)\n", src);
            for (size_t u = 0; u < v->nusers; u++) {
                fputs("  - name: ", out);
                put_quoted(out, v->users[u].name);
                fputs("\n    password_hash: \"(redacted)\"\n    role: ", out);
                put_quoted(out, v->users[u].role);
                fputc('\n', out);
            }
            continue;
        default:
            put_quoted(out, v->text);
            break;
        }
        fprintf(out, "  # %s\n", src);
    }
    return ferror(out) ? UV_EIO : 0;
}

const char *ql_config_server_id(const ql_config_t *cfg, char *buf, size_t cap) {
    const char *id = ql_config_get_str(cfg, "qilin.server.id");
    if (id[0]) {
        snprintf(buf, cap, "%s", id);
        return buf;
    }
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    const char *lhost;
    int port;
    ql_config_get_address(cfg, "qilin.server.listen", &lhost, &port);
    if (port == 0)
        snprintf(buf, cap, "%s:pid-%ld", host, (long)getpid());
    else
        snprintf(buf, cap, "%s:%d", host, port);
    return buf;
}

const char *ql_config_api_address(const ql_config_t *cfg, char *buf, size_t cap) {
    const char *host;
    int port;
    ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
    buf[0] = '\0';
    if (port == 0)
        return buf; /* known only once bound: another server cannot be sent here */
    char name[256] = "";
    bool wildcard = !host[0] || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
    if (!wildcard) {
        snprintf(name, sizeof name, "%s", host);
    } else {
        /* A name the server's Host gate accepts (api_gate.c), else the machine's. */
        const char *const *allowed;
        if (ql_config_get_list(cfg, "qilin.server.allowed-hosts", &allowed) > 0)
            snprintf(name, sizeof name, "%s", allowed[0]);
        else if (gethostname(name, sizeof name) != 0)
            name[0] = '\0';
        name[sizeof name - 1] = '\0';
    }
    if (!name[0])
        return buf;
    bool v6 = strchr(name, ':') != NULL && name[0] != '[';
    snprintf(buf, cap, "%s%s%s:%d", v6 ? "[" : "", name, v6 ? "]" : "", port);
    return buf;
}
