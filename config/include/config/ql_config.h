/*
 * The server configuration: one table of typed options, a YAML file, --set overrides, project
 * (and model) overrides validated by the same table, and the generated reference docs.
 *
 * DESIGN. Every option is one row of the table in config_table.c: key, type, default (as text,
 * parsed by the same code as any other value, so a default can never break its own rules),
 * bounds or allowed values, the scopes that may override it and a one-line description. That
 * table drives everything here: parsing and validation, the typed getters, --print-config
 * (ql_config_dump) and docs/configuration.md (ql_config_write_markdown, via
 * tools/gen-config-doc; a test fails when the checked-in file differs).
 *
 * Sources apply in order: defaults, then the YAML file (ql_config_load_file), then each --set
 * (ql_config_set_arg); a later source replaces an earlier value. Inside one file a key may
 * appear once. Any error is fatal to start-up: the message reads `file:line: reason` (or
 * `--set KEY=VALUE: reason`), names the key, the value and what is accepted, and for an unknown
 * key suggests the closest known one. A failed set leaves the previous value in place.
 *
 * The file is a flat YAML mapping whose keys are the dotted names (Kylin's property names where
 * Kylin has one, Qilin's own under `qilin.`). List-typed keys take a comma-separated string or a
 * YAML sequence; `qilin.server.users` takes a sequence of {name, password_hash, role} mappings.
 *
 * Users. When `qilin.server.users` is empty (the default) the server has exactly one user,
 * ADMIN, whose password the API generates into <data>/admin.password (api/ql_admin_password.h):
 * its entry has builtin = true and no hash (the config layer does not link a password hasher).
 * ql_config_default_user_in_use() tells that this is the case, and
 * ql_config_check() refuses it on a non-loopback listen address. Configured users must give a
 * hash in a format the authenticator verifies (`$argon2id$` from `qilin passwd`, or crypt(3)
 * `$y$`, `$6$`, `$2b$`, ...), never a plain-text password; names are unique ignoring case.
 *
 * A ql_config_t is not thread-safe for writing; once loaded it is read-only and may be read from
 * any thread.
 */
#ifndef QL_CONFIG_H
#define QL_CONFIG_H

#include "base/ql_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ql_config_type {
    QL_CONFIG_BOOL,     /* true or false */
    QL_CONFIG_INT,      /* decimal integer in [min, max], or one of `allowed` when given */
    QL_CONFIG_MS,       /* duration in ms: 1500, 1500ms, 30s, 5m, 1h30m (ql_yaml_parse_duration) */
    QL_CONFIG_SIZE,     /* size in bytes: 1048576, 512B, 64KiB, 1MiB, 64GiB, 1TiB */
    QL_CONFIG_STRING,   /* free text, subject to the option's own check */
    QL_CONFIG_ENUM,     /* exactly one of `allowed` */
    QL_CONFIG_LIST,     /* comma list; each item one of `allowed` when given */
    QL_CONFIG_ADDRESS,  /* HOST:PORT; HOST an IPv4 address, [IPv6] or a host name */
    QL_CONFIG_PATH,     /* a file or directory path; in a file, relative to that file's folder */
    QL_CONFIG_TIMEZONE, /* an IANA zone name the system's tz database has; empty = UTC */
    QL_CONFIG_USERS,    /* the user list, see above */
} ql_config_type_t;

/* Scopes that may override a server option (bit flags). */
enum {
    QL_CONFIG_SCOPE_PROJECT = 1 << 0, /* PUT /projects/{p}/config */
    QL_CONFIG_SCOPE_MODEL = 1 << 1,   /* a model's own config */
};

/* One row of the option table. All pointers are static constants. */
typedef struct ql_config_option {
    const char *key;
    ql_config_type_t type;
    const char *def; /* default, as text ("" = empty) */
    /* INT, MS, SIZE: inclusive bounds; ADDRESS: port bounds; LIST: least number of items. */
    int64_t min, max;
    const char *const *allowed; /* ENUM, LIST, INT: NULL-terminated allowed values, or NULL */
    unsigned scopes;            /* QL_CONFIG_SCOPE_* that may override it */
    const char *doc;            /* one line, a full sentence */
    /* Extra rule for a STRING value or each LIST item (NULL when the type's rules suffice), and
     * the text saying what it accepts, used in errors and the docs. */
    bool (*check)(const char *value);
    const char *accepts;
} ql_config_option_t;

/* The option table (static, in documentation order) and its length. */
const ql_config_option_t *ql_config_options(size_t *count);
/* The row for key, or NULL when there is none. The result is static. */
const ql_config_option_t *ql_config_find_option(const char *key);
/* Writes what option o (borrowed) accepts, e.g. "0..100" or "one of pause, wait", into buf
 * (caller's) and returns buf. */
const char *ql_config_describe(const ql_config_option_t *o, char *buf, size_t len);

/* A user of qilin.server.users. Strings are owned by the config and live as long as it. */
typedef struct ql_config_user {
    const char *name;
    const char *password_hash; /* argon2/crypt(3) string; NULL for the built-in default user */
    const char *role;          /* "ADMIN" or "VIEWER" */
    bool builtin;              /* ADMIN with the generated password: no users are configured */
} ql_config_user_t;

/* Kylin's default user and its public password, which no server accepts unless an operator
 * configures its hash (for Kylin's own scripts). */
#define QL_CONFIG_DEFAULT_USER "ADMIN"
#define QL_CONFIG_DEFAULT_PASSWORD "KYLIN"

typedef struct ql_config ql_config_t;

/* Creates a configuration holding every default. *out is owned by the caller and freed with
 * ql_config_free(). Returns 0 or UV_ENOMEM. */
int ql_config_new(ql_config_t **out);
void ql_config_free(ql_config_t *cfg);

/*
 * Applies the YAML file at path (borrowed) on top of cfg, parsed by base/ql_yaml.h (one
 * document; duplicate keys, alias bombs and bad syntax refused there). An empty or
 * comment-only file changes nothing. Errors (bad YAML, not a flat mapping, unknown or duplicate
 * key, bad value) return QL_EINVAL with "path:line: reason" in err; an unreadable file returns
 * the negative errno, a file over QL_YAML_MAX_INPUT QL_ETOOBIG. Values applied before the error
 * stay applied: a failed load means the server must not start, not a partial retry.
 * A relative value of a path key is resolved against the file's folder and stored absolute;
 * when nothing exists there but the value names something that exists relative to the working
 * directory, the value is kept as written (files written before this rule).
 */
int ql_config_load_file(ql_config_t *cfg, const char *path, ql_err_t *err);

/*
 * Sets key to value (both borrowed, copied) after the same validation as the file. source
 * (borrowed, copied; e.g. the file name) and line (> 0, or 0 for none) say where the value came
 * from: they prefix error messages ("source:line: " or "source: ") and show in ql_config_dump.
 * Returns 0, or QL_EINVAL with the message in err and cfg unchanged.
 */
int ql_config_set(ql_config_t *cfg, const char *key, const char *value, const char *source,
                  int line, ql_err_t *err);

/*
 * Sets qilin.server.users to the n users at users (borrowed, copied; builtin is ignored; n = 0
 * restores the built-in default user) after validating each. lines (borrowed, n entries, may be
 * NULL) gives each user's own line for messages; otherwise line is used. Errors name the entry:
 * "source:line: qilin.server.users[i]: reason"; cfg is then unchanged.
 */
int ql_config_set_users(ql_config_t *cfg, const ql_config_user_t *users, size_t n,
                        const char *source, int line, const int *lines, ql_err_t *err);

/* Applies one command-line override "KEY=VALUE" (borrowed). Errors name the argument:
 * "--set KEY=VALUE: reason". */
int ql_config_set_arg(ql_config_t *cfg, const char *arg, ql_err_t *err);

/* Cross-key rules checked once every source is applied: the generated ADMIN user (no users
 * configured) is refused unless qilin.server.listen is a loopback address. Returns 0 or
 * QL_EINVAL. */
int ql_config_check(const ql_config_t *cfg, ql_err_t *err);

/*
 * Validates a project override (PUT /projects/{p}/config): key must exist and be overridable by
 * projects, and value must pass the server option's rules. Returns 0 or QL_EINVAL with a
 * message naming the key (and, for a bad value, the value and what is accepted).
 */
int ql_config_validate_project_key(const char *key, const char *value, ql_err_t *err);
/* The same for a model's own config (QL_CONFIG_SCOPE_MODEL keys). */
int ql_config_validate_model_key(const char *key, const char *value, ql_err_t *err);

/* Parses value (borrowed) as key's type for a BOOL (0/1), INT, MS or SIZE option into *out
 * (written only on success): lets a caller read a validated project override the way the server
 * value was read. Returns 0 or QL_EINVAL. */
int ql_config_parse_int(const char *key, const char *value, int64_t *out, ql_err_t *err);

/*
 * Typed getters. key must name an option of the getter's type: anything else is a programming
 * error and aborts with a message (as an assert that stays on in release builds). Returned
 * pointers are owned by cfg and valid until its next set or its free.
 */
bool ql_config_get_bool(const ql_config_t *cfg, const char *key);
int64_t ql_config_get_int(const ql_config_t *cfg, const char *key);   /* INT */
int64_t ql_config_get_ms(const ql_config_t *cfg, const char *key);    /* MS */
uint64_t ql_config_get_size(const ql_config_t *cfg, const char *key); /* SIZE */
/* STRING, ENUM, PATH, ADDRESS ("HOST:PORT" as given) and TIMEZONE ("" = UTC). */
const char *ql_config_get_str(const ql_config_t *cfg, const char *key);
/* LIST: the items (no empty ones, no duplicates) and their count. */
size_t ql_config_get_list(const ql_config_t *cfg, const char *key, const char *const **items);
bool ql_config_list_has(const ql_config_t *cfg, const char *key, const char *item);
/* ADDRESS: host without brackets and the port. */
void ql_config_get_address(const ql_config_t *cfg, const char *key, const char **host, int *port);
/* The users; always at least one (the built-in default when none is configured). */
size_t ql_config_users(const ql_config_t *cfg, const ql_config_user_t **users);
bool ql_config_default_user_in_use(const ql_config_t *cfg);

/* qilin.server.id, or its default `<hostname>:<port>` (`<hostname>:pid-<pid>` when the listen
 * port is 0), written into buf (cap bytes, truncated). Returns buf. */
const char *ql_config_server_id(const ql_config_t *cfg, char *buf, size_t cap);
/* The address other servers send a client to for this server's REST API (a step's log,
 * docs/rest.md), as "host:port" ("[v6]:port"), written into buf (cap bytes, truncated): the
 * host of qilin.server.listen, or for a wildcard listen address (0.0.0.0, ::) the first of
 * qilin.server.allowed-hosts, else the machine's host name. "" when the port is 0 (known only
 * once bound). Returns buf. */
const char *ql_config_api_address(const ql_config_t *cfg, char *buf, size_t cap);

/* kylin.server.mode: `all` or `job` runs the scheduler; `all` or `query` serves queries. */
bool ql_config_serves_jobs(const ql_config_t *cfg);
bool ql_config_serves_queries(const ql_config_t *cfg);

/* Where key's value came from: "default", a file name or "--set ..." (owned by cfg), and the
 * line (0 when none). */
const char *ql_config_source(const ql_config_t *cfg, const char *key, int *line);

/* Writes the effective configuration as YAML that ql_config_load_file accepts, each line
 * commented with its source (password hashes are redacted). Returns 0 or UV_EIO. */
int ql_config_dump(const ql_config_t *cfg, FILE *out);

/* Writes the configuration reference (docs/configuration.md) generated from the table. Returns 0
 * or UV_EIO. */
int ql_config_write_markdown(FILE *out);

#endif
