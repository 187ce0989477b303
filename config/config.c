/*
 * Configuration values: parsing and validation by type, --set and project overrides. The
 * option table is in config_table.c, the file loader in config_load.c, the getters and the
 * effective-config dump in config_get.c.
 *
 * Every way a value arrives (default, file, --set, project override) goes through parse_value(),
 * so one option has one set of rules. A value is parsed into a fresh value_t and swapped in only
 * when it is valid: a failed set never leaves a half-updated option behind.
 */
#include "config/ql_config.h"
#include "config_int.h"

#include "base/ql_yaml.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define ZONEINFO_DIR "/usr/share/zoneinfo"
#define SHOWN 120 /* longest piece of a value quoted back in an error message */

/* ---- small helpers ---- */

static char *dupn(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static char *str_dup(const char *s) {
    return dupn(s, strlen(s));
}

static void users_free(ql_config_user_t *users, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free((char *)users[i].name);
        free((char *)users[i].password_hash);
        free((char *)users[i].role);
    }
    free(users);
}

static void value_clear(value_t *v) {
    free(v->text);
    for (size_t i = 0; i < v->nitems; i++)
        free(v->items[i]);
    free(v->items);
    free(v->host);
    users_free(v->users, v->nusers);
    free(v->source);
    memset(v, 0, sizeof *v);
}

/* Formats `why` for a failed parse. Returns -1 so parsers can `return fail(...)`. */
__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

static bool in_allowed(const char *const *allowed, const char *s) {
    for (size_t i = 0; allowed[i]; i++)
        if (strcmp(allowed[i], s) == 0)
            return true;
    return false;
}

static bool has_control(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* ---- numbers ---- */

/* Parses a decimal integer with an optional unit suffix (after optional spaces). *unit points
 * at the suffix ("" when none). Returns -1 when there are no digits or the number overflows. */
static int parse_number(const char *s, int64_t *out, const char **unit, bool allow_sign) {
    const char *p = s;
    if (allow_sign && (*p == '-' || *p == '+'))
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return -1;
    while (*end == ' ')
        end++;
    *out = v;
    *unit = end;
    return 0;
}

/* Durations share ql_yaml_parse_duration's syntax with job templates (a bare number is ms). */
static int parse_ms(const ql_config_option_t *o, const char *text, int64_t *out, char *why,
                    size_t len) {
    char acc[160];
    ql_config_describe(o, acc, sizeof acc);
    int64_t ms;
    if (ql_yaml_parse_duration(text, &ms) != 0)
        return fail(why, len,
                    "'%.*s' is not a duration (accepted: %s; ms, or numbers with units ms s m h "
                    "d such as 30s or 1h30m)",
                    SHOWN, text, acc);
    if (ms < o->min || ms > o->max)
        return fail(why, len, "'%.*s' is out of range (accepted: %s)", SHOWN, text, acc);
    *out = ms;
    return 0;
}

static int parse_size(const ql_config_option_t *o, const char *text, int64_t *out, char *why,
                      size_t len) {
    static const struct {
        const char *name;
        int shift;
    } units[] = {{"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
    char acc[160];
    ql_config_describe(o, acc, sizeof acc);
    int64_t n;
    const char *unit;
    if (parse_number(text, &n, &unit, false) != 0)
        return fail(why, len,
                    "'%.*s' is not a size (accepted: %s; bytes, or a unit B KiB MiB "
                    "GiB TiB)",
                    SHOWN, text, acc);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(unit, units[i].name) != 0)
            continue;
        if (n > (INT64_MAX >> units[i].shift) || (n << units[i].shift) < o->min ||
            (n << units[i].shift) > o->max)
            return fail(why, len, "'%.*s' is out of range (accepted: %s)", SHOWN, text, acc);
        *out = n << units[i].shift;
        return 0;
    }
    return fail(why, len, "'%.*s' has an unknown unit '%.*s' (accepted: B KiB MiB GiB TiB)", SHOWN,
                text, 16, unit);
}

static int parse_int(const ql_config_option_t *o, const char *text, int64_t *out, char *why,
                     size_t len) {
    char acc[160];
    ql_config_describe(o, acc, sizeof acc);
    int64_t n;
    const char *rest;
    if (parse_number(text, &n, &rest, true) != 0 || *rest)
        return fail(why, len, "'%.*s' is not an integer (accepted: %s)", SHOWN, text, acc);
    if (o->allowed) {
        char canon[32];
        snprintf(canon, sizeof canon, "%" PRId64, n);
        if (!in_allowed(o->allowed, canon))
            return fail(why, len, "'%.*s' is not allowed (accepted: %s)", SHOWN, text, acc);
    } else if (n < o->min || n > o->max) {
        return fail(why, len, "'%.*s' is out of range (accepted: %s)", SHOWN, text, acc);
    }
    *out = n;
    return 0;
}

/* ---- strings, lists, addresses, zones ---- */

static bool valid_hostname(const char *h, size_t n) {
    if (n == 0 || n > 253)
        return false;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c == '.') {
            if (label == 0 || h[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)c) && c != '-')
            return false;
        if (c == '-' && label == 0)
            return false;
        if (++label > 63)
            return false;
    }
    return h[n - 1] != '-';
}

static int parse_address(const ql_config_option_t *o, const char *text, value_t *v, char *why,
                         size_t len) {
    char acc[160];
    ql_config_describe(o, acc, sizeof acc);
    const char *host = text, *host_end, *colon;
    char buf[INET6_ADDRSTRLEN + 1];
    if (*text == '[') {
        host = text + 1;
        host_end = strchr(host, ']');
        if (!host_end || host_end[1] != ':' || (size_t)(host_end - host) >= sizeof buf)
            return fail(why, len, "'%.*s' is not HOST:PORT (accepted: %s; IPv6 as [::1]:7070)",
                        SHOWN, text, acc);
        colon = host_end + 1;
        memcpy(buf, host, (size_t)(host_end - host));
        buf[host_end - host] = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, buf, &a6) != 1)
            return fail(why, len, "'%.*s': '%s' is not an IPv6 address", SHOWN, text, buf);
    } else {
        colon = strrchr(text, ':');
        if (!colon || colon == text)
            return fail(why, len, "'%.*s' is not HOST:PORT (accepted: %s)", SHOWN, text, acc);
        if (memchr(text, ':', (size_t)(colon - text)))
            return fail(why, len, "'%.*s': an IPv6 host needs brackets, as in [::1]:7070", SHOWN,
                        text);
        host_end = colon;
        size_t hn = (size_t)(host_end - host);
        bool numeric = true;
        for (size_t i = 0; i < hn; i++)
            if (!isdigit((unsigned char)host[i]) && host[i] != '.')
                numeric = false;
        struct in_addr a4;
        if (numeric) {
            if (hn >= sizeof buf)
                return fail(why, len, "'%.*s': the host is not an IPv4 address", SHOWN, text);
            memcpy(buf, host, hn);
            buf[hn] = '\0';
            if (inet_pton(AF_INET, buf, &a4) != 1)
                return fail(why, len, "'%.*s': '%s' is not an IPv4 address", SHOWN, text, buf);
        } else if (!valid_hostname(host, hn)) {
            return fail(why, len, "'%.*s': the host is not a valid host name", SHOWN, text);
        }
    }
    int64_t port;
    const char *rest;
    if (parse_number(colon + 1, &port, &rest, false) != 0 || *rest || port < o->min ||
        port > o->max)
        return fail(why, len, "'%.*s': bad port (accepted: %s)", SHOWN, text, acc);
    v->host = dupn(host, (size_t)(host_end - host));
    v->port = (int)port;
    return v->host ? 0 : fail(why, len, "out of memory");
}

/* A zone is valid when the system's tz database has a TZif file for it. The name is checked
 * first so that it cannot point outside the zoneinfo directory. */
static int parse_timezone(const char *text, char *why, size_t len) {
    if (!*text)
        return 0;
    static const char *const accepted =
        "an IANA zone name such as Asia/Shanghai or UTC, from " ZONEINFO_DIR "; empty for UTC";
    bool ok = strlen(text) < 128 && text[0] != '/' && !strstr(text, "..") && !strstr(text, "//");
    for (const char *p = text; ok && *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/_+-", *p))
            ok = false;
    if (ok) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", ZONEINFO_DIR, text);
        FILE *f = fopen(path, "rb");
        char magic[4] = {0};
        ok = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "TZif", 4) == 0;
        if (f)
            fclose(f);
    }
    if (!ok)
        return fail(why, len, "'%.*s' is not a time zone this system knows (accepted: %s)", SHOWN,
                    text, accepted);
    return 0;
}

static int parse_list(const ql_config_option_t *o, const char *text, value_t *v, char *why,
                      size_t len) {
    char acc[200];
    ql_config_describe(o, acc, sizeof acc);
    const char *p = text;
    while (*p == ' ')
        p++;
    bool blank = *p == '\0';
    while (!blank) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && *a == ' ')
            a++;
        while (b > a && b[-1] == ' ')
            b--;
        if (a == b)
            return fail(why, len, "'%.*s' has an empty item (accepted: %s)", SHOWN, text, acc);
        char *item = dupn(a, (size_t)(b - a));
        char **grown = item ? realloc(v->items, (v->nitems + 1) * sizeof *grown) : NULL;
        if (!grown) {
            free(item);
            return fail(why, len, "out of memory");
        }
        v->items = grown;
        v->items[v->nitems++] = item;
        bool bad = o->check && !o->check(item);
        /* Quote the whole value only when it is more than the offending item. */
        char whole[SHOWN + 8] = "";
        if (strcmp(item, text) != 0)
            snprintf(whole, sizeof whole, "'%.*s': ", SHOWN, text);
        if (o->allowed && !in_allowed(o->allowed, item))
            return fail(why, len, "%sunknown item '%.*s' (accepted: %s)", whole, SHOWN, item, acc);
        if (bad)
            return fail(why, len, "%sbad item '%.*s' (accepted: %s)", whole, SHOWN, item, acc);
        for (size_t i = 0; i + 1 < v->nitems; i++)
            if (strcmp(v->items[i], item) == 0)
                return fail(why, len, "'%.*s' lists '%.*s' twice", SHOWN, text, SHOWN, item);
        if (!*end)
            break;
        p = end + 1;
    }
    if ((int64_t)v->nitems < o->min)
        return fail(why, len, "'%.*s' needs at least %" PRId64 " item(s) (accepted: %s)", SHOWN,
                    text, o->min, acc);
    return 0;
}

/* ---- users ---- */

static int check_user(const char *name, const char *hash, const char *role, char *why, size_t len) {
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= 64;
    for (const char *p = name; ok && *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.@-", *p))
            ok = false;
    if (!ok)
        return fail(why, len, "user name '%.*s' must be 1 to 64 of A-Z a-z 0-9 _ . @ -", SHOWN,
                    name);
    /* A plain-text password here would be a leak waiting to happen: only the hash formats the
     * authenticator (http/auth.c) verifies are accepted, so a bad one fails here, at its line. */
    static const char *const prefixes[] = {"$argon2id$", "$argon2i$", "$y$",  "$gy$", "$7$",
                                           "$6$",        "$5$",       "$2b$", "$2y$"};
    size_t h = strlen(hash);
    ok = false;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(hash, prefixes[i], strlen(prefixes[i])) == 0)
            ok = h > strlen(prefixes[i]) + 4 && h <= 512;
    for (const char *p = hash; ok && *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("./$=,+-", *p))
            ok = false;
    if (!ok)
        return fail(why, len,
                    "user '%s': password_hash is not a password hash (accepted: $argon2id$..., "
                    "$y$..., $6$..., ... as made by `qilin passwd` or `mkpasswd`; never a plain "
                    "password)",
                    name);
    if (strcasecmp(role, "ADMIN") != 0 && strcasecmp(role, "VIEWER") != 0)
        return fail(why, len, "user '%s': unknown role '%.*s' (accepted: ADMIN, VIEWER)", name,
                    SHOWN, role);
    return 0;
}

static int add_user(value_t *v, const char *name, size_t nn, const char *hash, size_t hn,
                    const char *role, size_t rn, char *why, size_t len) {
    ql_config_user_t *grown = realloc(v->users, (v->nusers + 1) * sizeof *grown);
    if (!grown)
        return fail(why, len, "out of memory");
    v->users = grown;
    ql_config_user_t *u = &v->users[v->nusers];
    *u = (ql_config_user_t){
        .name = dupn(name, nn), .password_hash = dupn(hash, hn), .role = dupn(role, rn)};
    v->nusers++;
    if (!u->name || !u->password_hash || !u->role)
        return fail(why, len, "out of memory");
    if (check_user(u->name, u->password_hash, u->role, why, len) != 0)
        return -1;
    /* Canonical case; the length matched. */
    memcpy((char *)u->role, strcasecmp(u->role, "ADMIN") == 0 ? "ADMIN" : "VIEWER", rn);
    /* Names match case-insensitively at login (as in Kylin), so "admin" repeats "ADMIN". */
    for (size_t i = 0; i + 1 < v->nusers; i++)
        if (strcasecmp(v->users[i].name, u->name) == 0)
            return fail(why, len, "user '%s' is listed twice", u->name);
    return 0;
}

/* The --set form: NAME:HASH:ROLE[;NAME:HASH:ROLE...]. No accepted hash contains ':' or ';'
 * (argon2 hashes do contain ',', which is why users are not comma-separated). */
static int parse_users_text(const char *text, value_t *v, char *why, size_t len) {
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        const char *c1 = memchr(p, ':', (size_t)(end - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        if (!c2)
            return fail(why, len, "'%.*s' is not NAME:PASSWORD_HASH:ROLE", (int)(end - p), p);
        if (add_user(v, p, (size_t)(c1 - p), c1 + 1, (size_t)(c2 - c1 - 1), c2 + 1,
                     (size_t)(end - c2 - 1), why, len) != 0)
            return -1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* ---- one value ---- */

/* Parses text as option o into v (which must be zeroed). On failure v may hold partial data:
 * the caller clears it. */
static int parse_value(const ql_config_option_t *o, const char *text, value_t *v, char *why,
                       size_t len) {
    if (has_control(text))
        return fail(why, len, "the value contains control characters");
    v->text = str_dup(text);
    if (!v->text)
        return fail(why, len, "out of memory");
    char acc[200];
    switch (o->type) {
    case QL_CONFIG_BOOL:
        if (strcasecmp(text, "true") == 0)
            v->b = true;
        else if (strcasecmp(text, "false") == 0)
            v->b = false;
        else
            return fail(why, len, "'%.*s' is not a boolean (accepted: true or false)", SHOWN, text);
        return 0;
    case QL_CONFIG_INT:
        return parse_int(o, text, &v->i, why, len);
    case QL_CONFIG_MS:
        return parse_ms(o, text, &v->i, why, len);
    case QL_CONFIG_SIZE:
        return parse_size(o, text, &v->i, why, len);
    case QL_CONFIG_STRING:
        if (o->check && !o->check(text)) {
            ql_config_describe(o, acc, sizeof acc);
            return fail(why, len, "'%.*s' is not valid (accepted: %s)", SHOWN, text, acc);
        }
        return 0;
    case QL_CONFIG_ENUM:
        if (!in_allowed(o->allowed, text)) {
            ql_config_describe(o, acc, sizeof acc);
            return fail(why, len, "'%.*s' is not allowed (accepted: %s)", SHOWN, text, acc);
        }
        return 0;
    case QL_CONFIG_LIST:
        return parse_list(o, text, v, why, len);
    case QL_CONFIG_ADDRESS:
        return parse_address(o, text, v, why, len);
    case QL_CONFIG_PATH:
        if (!*text || strlen(text) >= PATH_MAX)
            return fail(why, len, "'%.*s' is not a usable path (accepted: a non-empty path)", SHOWN,
                        text);
        return 0;
    case QL_CONFIG_TIMEZONE:
        return parse_timezone(text, why, len);
    case QL_CONFIG_USERS:
        return parse_users_text(text, v, why, len);
    }
    return fail(why, len, "unknown option type");
}

/* The closest known key, for "did you mean": a key that ends with the given one (a missing
 * prefix), else the smallest edit distance when it is small compared to the key. */
static const char *closest_key(const char *key) {
    size_t n;
    const ql_config_option_t *opts = ql_config_options(&n);
    size_t klen = strlen(key);
    for (size_t i = 0; i < n && klen > 2; i++) {
        size_t olen = strlen(opts[i].key);
        if (olen > klen && opts[i].key[olen - klen - 1] == '.' &&
            strcmp(opts[i].key + olen - klen, key) == 0)
            return opts[i].key;
    }
    if (klen > 128)
        return NULL;
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    size_t row[130];
    for (size_t i = 0; i < n; i++) {
        const char *b = opts[i].key;
        size_t blen = strlen(b);
        if (blen > 128)
            continue;
        for (size_t j = 0; j <= blen; j++)
            row[j] = j;
        for (size_t a = 1; a <= klen; a++) {
            size_t diag = row[0];
            row[0] = a;
            for (size_t j = 1; j <= blen; j++) {
                size_t up = row[j];
                size_t cost = key[a - 1] == b[j - 1] ? 0 : 1;
                size_t m = diag + cost;
                if (up + 1 < m)
                    m = up + 1;
                if (row[j - 1] + 1 < m)
                    m = row[j - 1] + 1;
                row[j] = m;
                diag = up;
            }
        }
        if (row[blen] < best_d) {
            best_d = row[blen];
            best = b;
        }
    }
    return best_d <= klen / 3 + 1 ? best : NULL;
}

static int unknown_key(ql_err_t *err, const char *at, const char *key) {
    const char *hint = closest_key(key);
    if (hint)
        return ql_err_set(err, QL_EINVAL, "%s%sunknown key '%.*s' (did you mean '%s'?)", at,
                          *at ? ": " : "", SHOWN, key, hint);
    return ql_err_set(err, QL_EINVAL,
                      "%s%sunknown key '%.*s' (docs/configuration.md lists every key)", at,
                      *at ? ": " : "", SHOWN, key);
}

/* Swaps a parsed value in, recording its source. Takes ownership of *v's contents. */
static int install(ql_config_t *cfg, const ql_config_option_t *o, value_t *v, const char *source,
                   int line, ql_err_t *err) {
    v->source = str_dup(source);
    if (!v->source) {
        value_clear(v);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    v->line = line;
    value_t *slot = &cfg->vals[ql_config_index_of(cfg, o)];
    value_clear(slot);
    *slot = *v;
    return 0;
}

int ql_config_set(ql_config_t *cfg, const char *key, const char *value, const char *source,
                  int line, ql_err_t *err) {
    char at[300];
    ql_config_where(at, sizeof at, source ? source : "config", line);
    const ql_config_option_t *o = ql_config_find_option(key);
    if (!o)
        return unknown_key(err, at, key ? key : "");
    if (!value)
        return ql_err_set(err, QL_EINVAL, "%s: %s: no value", at, key);
    value_t v = {0};
    char why[400];
    if (parse_value(o, value, &v, why, sizeof why) != 0) {
        value_clear(&v);
        return ql_err_set(err, QL_EINVAL, "%s: %s: %s", at, key, why);
    }
    return install(cfg, o, &v, source ? source : "config", line, err);
}

int ql_config_set_users(ql_config_t *cfg, const ql_config_user_t *users, size_t n,
                        const char *source, int line, const int *lines, ql_err_t *err) {
    const ql_config_option_t *o = ql_config_find_option("qilin.server.users");
    if (!source)
        source = "config";
    value_t v = {0};
    char why[400];
    for (size_t i = 0; i < n; i++) {
        const ql_config_user_t *u = &users[i];
        if (!u->name || !u->password_hash || !u->role) {
            snprintf(why, sizeof why, "name, password_hash and role are all required");
        } else if (add_user(&v, u->name, strlen(u->name), u->password_hash,
                            strlen(u->password_hash), u->role, strlen(u->role), why,
                            sizeof why) == 0) {
            continue;
        }
        value_clear(&v);
        char at[300];
        ql_config_where(at, sizeof at, source, lines ? lines[i] : line);
        return ql_err_set(err, QL_EINVAL, "%s: %s[%zu]: %s", at, o->key, i, why);
    }
    if (!(v.text = str_dup(n ? "(users)" : ""))) {
        value_clear(&v);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    return install(cfg, o, &v, source, line, err);
}

int ql_config_set_arg(ql_config_t *cfg, const char *arg, ql_err_t *err) {
    const char *eq = arg ? strchr(arg, '=') : NULL;
    if (!eq || eq == arg)
        return ql_err_set(err, QL_EINVAL, "--set %.*s: expected KEY=VALUE", SHOWN, arg ? arg : "");
    char *key = dupn(arg, (size_t)(eq - arg));
    if (!key)
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    char source[300];
    /* The source shows in messages and --print-config: keep password hashes out of both. */
    if (strcmp(key, "qilin.server.users") == 0)
        snprintf(source, sizeof source, "--set %s=...", key);
    else
        snprintf(source, sizeof source, "--set %.*s", 250, arg);
    int rc = ql_config_set(cfg, key, eq + 1, source, 0, err);
    free(key);
    return rc;
}

int ql_config_new(ql_config_t **out) {
    ql_config_t *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return UV_ENOMEM;
    cfg->opts = ql_config_options(&cfg->n);
    cfg->vals = calloc(cfg->n, sizeof *cfg->vals);
    if (!cfg->vals) {
        free(cfg);
        return UV_ENOMEM;
    }
    for (size_t i = 0; i < cfg->n; i++) {
        ql_err_t err;
        int rc = ql_config_set(cfg, cfg->opts[i].key, cfg->opts[i].def, "default", 0, &err);
        if (rc != 0) {
            /* Only memory can fail here: a test parses every default. */
            ql_config_free(cfg);
            return rc == QL_EINVAL ? QL_EINVAL : UV_ENOMEM;
        }
    }
    *out = cfg;
    return 0;
}

void ql_config_free(ql_config_t *cfg) {
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++)
        value_clear(&cfg->vals[i]);
    free(cfg->vals);
    free(cfg);
}

/* ---- cross-key rules and overrides ---- */

static bool is_loopback(const char *host) {
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

int ql_config_check(const ql_config_t *cfg, ql_err_t *err) {
    const char *host;
    int port;
    ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
    if (ql_config_default_user_in_use(cfg) && !is_loopback(host)) {
        int line;
        const char *src = ql_config_source(cfg, "qilin.server.listen", &line);
        char at[300];
        ql_config_where(at, sizeof at, src, line);
        return ql_err_set(err, QL_EINVAL,
                          "%s: qilin.server.listen: '%s' is not a loopback address, and no "
                          "users are configured (the generated ADMIN password is for local "
                          "use): set qilin.server.users (password_hash from `qilin passwd`) or "
                          "listen on 127.0.0.1",
                          at, ql_config_get_str(cfg, "qilin.server.listen"));
    }
    return 0;
}

static int validate_scoped(const char *key, const char *value, unsigned scope, const char *what,
                           ql_err_t *err) {
    const ql_config_option_t *o = ql_config_find_option(key);
    if (!o)
        return unknown_key(err, "", key ? key : "");
    if (!(o->scopes & scope)) {
        char list[512];
        size_t off = 0, n;
        const ql_config_option_t *opts = ql_config_options(&n);
        list[0] = '\0';
        for (size_t i = 0; i < n && off < sizeof list; i++)
            if (opts[i].scopes & scope)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", off ? ", " : "",
                                        opts[i].key);
        return ql_err_set(err, QL_EINVAL,
                          "'%s' is a server setting that a %s cannot override (%s keys: %s)", key,
                          what, what, list);
    }
    if (!value)
        return ql_err_set(err, QL_EINVAL, "%s: no value", key);
    value_t v = {0};
    char why[400];
    int rc = parse_value(o, value, &v, why, sizeof why);
    value_clear(&v);
    if (rc != 0)
        return ql_err_set(err, QL_EINVAL, "%s: %s", key, why);
    return 0;
}

int ql_config_validate_project_key(const char *key, const char *value, ql_err_t *err) {
    return validate_scoped(key, value, QL_CONFIG_SCOPE_PROJECT, "project", err);
}

int ql_config_validate_model_key(const char *key, const char *value, ql_err_t *err) {
    return validate_scoped(key, value, QL_CONFIG_SCOPE_MODEL, "model", err);
}

int ql_config_parse_int(const char *key, const char *value, int64_t *out, ql_err_t *err) {
    const ql_config_option_t *o = ql_config_find_option(key);
    if (!o)
        return unknown_key(err, "", key ? key : "");
    if (o->type != QL_CONFIG_BOOL && o->type != QL_CONFIG_INT && o->type != QL_CONFIG_MS &&
        o->type != QL_CONFIG_SIZE)
        return ql_err_set(err, QL_EINVAL, "%s: not a numeric option", key);
    value_t v = {0};
    char why[400];
    int rc = value ? parse_value(o, value, &v, why, sizeof why) : fail(why, sizeof why, "no value");
    if (rc == 0)
        *out = o->type == QL_CONFIG_BOOL ? (int64_t)v.b : v.i;
    value_clear(&v);
    return rc == 0 ? 0 : ql_err_set(err, QL_EINVAL, "%s: %s", key, why);
}
