/* Human output of the REST client: aligned tables, field lists, ISO times, durations; --json
 * output; and the parsing of time arguments, kept next to their formatting so both use the
 * same zone rules (base/ql_time.h, the tz database through CCTZ). */
#include "client_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

json_t *ql_cli_field(json_t *obj, const char *keys) {
    const char *alt = keys;
    while (alt && *alt) {
        const char *bar = strchr(alt, '|');
        size_t alt_len = bar ? (size_t)(bar - alt) : strlen(alt);
        json_t *v = obj;
        const char *seg = alt;
        while (v && seg < alt + alt_len) {
            const char *dot = memchr(seg, '.', (size_t)(alt + alt_len - seg));
            size_t n = dot ? (size_t)(dot - seg) : (size_t)(alt + alt_len - seg);
            v = json_is_object(v) ? json_object_getn(v, seg, n) : NULL;
            seg += n + (dot ? 1 : 0);
        }
        if (v && !json_is_null(v))
            return v;
        alt = bar ? bar + 1 : NULL;
    }
    return NULL;
}

int ql_cli_json_int(json_t *v, int64_t *out) {
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != (double)(int64_t)d)
            return -1;
        *out = (int64_t)d;
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = n;
    return 0;
}

const char *ql_cli_format_time(const ql_cli_t *cli, int64_t ms, char *buf, size_t size) {
    ql_civil_t c;
    int off = 0;
    if (cli->tz) {
        ql_tz_to_civil(cli->tz, ms, &c);
        off = ql_tz_offset_sec(cli->tz, ms);
    } else {
        ql_civil_from_utc_ms(ms, &c);
    }
    int n = snprintf(buf, size, "%04lld-%02d-%02dT%02d:%02d:%02d", (long long)c.year, c.month,
                     c.day, c.hour, c.minute, c.second);
    if (n < 0 || (size_t)n >= size)
        return buf;
    if (!cli->tz || (off == 0 && !strcmp(ql_tz_name(cli->tz), "UTC")))
        snprintf(buf + n, size - (size_t)n, "Z");
    else
        snprintf(buf + n, size - (size_t)n, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 3600,
                 abs(off) / 60 % 60);
    return buf;
}

static const char *format_duration(int64_t ms, char *buf, size_t size) {
    if (ms < 1000) {
        snprintf(buf, size, "%lldms", (long long)ms);
        return buf;
    }
    if (ms < 60000) {
        snprintf(buf, size, "%lld.%llds", (long long)(ms / 1000), (long long)(ms % 1000 / 100));
        return buf;
    }
    int64_t s = ms / 1000;
    if (s < 3600)
        snprintf(buf, size, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else if (s < 86400)
        snprintf(buf, size, "%lldh%02lldm%02llds", (long long)(s / 3600), (long long)(s / 60 % 60),
                 (long long)(s % 60));
    else
        snprintf(buf, size, "%lldd%02lldh%02lldm", (long long)(s / 86400),
                 (long long)(s / 3600 % 24), (long long)(s / 60 % 60));
    return buf;
}

/* Text of a scalar or array for a table cell: control characters (a description's newlines)
 * become spaces so one item stays one line. */
static void format_text(json_t *v, char *buf, size_t size) {
    buf[0] = '\0';
    if (json_is_string(v)) {
        snprintf(buf, size, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, size, "%g", json_real_value(v));
    } else if (json_is_boolean(v)) {
        snprintf(buf, size, "%s", json_is_true(v) ? "true" : "false");
    } else if (json_is_array(v)) {
        size_t used = 0, i;
        json_t *item;
        json_array_foreach(v, i, item) {
            char one[256];
            format_text(item, one, sizeof one);
            int n = snprintf(buf + used, size - used, "%s%s", i ? "," : "", one);
            if (n < 0 || (size_t)n >= size - used)
                break;
            used += (size_t)n;
        }
    } else if (v && !json_is_null(v)) {
        char *s = json_dumps(v, JSON_COMPACT);
        snprintf(buf, size, "%s", s ? s : "");
        free(s);
    }
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
}

const char *ql_cli_format(const ql_cli_t *cli, json_t *v, ql_cli_kind_t kind, char *buf,
                          size_t size) {
    int64_t n;
    snprintf(buf, size, "-");
    if (!v || json_is_null(v))
        return buf;
    switch (kind) {
    case QL_CLI_TIME:
        if (ql_cli_json_int(v, &n))
            break;
        if (n == INT64_MAX)
            snprintf(buf, size, "MAX"); /* the open end of a full-load segment */
        else if (n != 0)
            ql_cli_format_time(cli, n, buf, size);
        return buf;
    case QL_CLI_DURATION:
        if (ql_cli_json_int(v, &n))
            break;
        return n > 0 ? format_duration(n, buf, size) : buf;
    case QL_CLI_ONOFF:
        if (json_is_boolean(v)) {
            snprintf(buf, size, "%s", json_is_true(v) ? "on" : "off");
            return buf;
        }
        break;
    case QL_CLI_TEXT:
        break;
    }
    format_text(v, buf, size);
    if (!buf[0])
        snprintf(buf, size, "-");
    return buf;
}

/* Display width of UTF-8 text: one column per code point (wide CJK characters are rare in
 * names and cost only a misaligned row). */
static size_t width(const char *s) {
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

int ql_cli_print_table(ql_cli_t *cli, json_t *items, const ql_cli_col_t *cols, size_t n_cols,
                       const char *noun, int64_t total) {
    size_t rows = json_array_size(items);
    if (rows == 0) {
        fprintf(cli->err, "no %s\n", noun);
        return 0;
    }
    char **cells = calloc(rows * n_cols, sizeof *cells);
    size_t *w = calloc(n_cols, sizeof *w);
    if (!cells || !w) {
        free(cells);
        free(w);
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    }
    for (size_t c = 0; c < n_cols; c++)
        w[c] = width(cols[c].title);
    char buf[1024];
    for (size_t r = 0; r < rows; r++) {
        json_t *item = json_array_get(items, r);
        for (size_t c = 0; c < n_cols; c++) {
            ql_cli_format(cli, ql_cli_field(item, cols[c].keys), cols[c].kind, buf, sizeof buf);
            cells[r * n_cols + c] = strdup(buf);
            size_t cw = cells[r * n_cols + c] ? width(buf) : 0;
            if (cw > w[c])
                w[c] = cw;
        }
    }
    for (size_t r = 0; r <= rows; r++) {
        for (size_t c = 0; c < n_cols; c++) {
            const char *s = r == 0 ? cols[c].title : cells[(r - 1) * n_cols + c];
            if (!s)
                s = "?";
            if (c + 1 == n_cols)
                fprintf(cli->out, "%s\n", s);
            else
                fprintf(cli->out, "%s%*s", s, (int)(w[c] - width(s) + 2), "");
        }
    }
    for (size_t i = 0; i < rows * n_cols; i++)
        free(cells[i]);
    free(cells);
    free(w);
    if (total > (int64_t)rows)
        fprintf(cli->err, "(%zu of %lld %s shown; --limit N shows more)\n", rows, (long long)total,
                noun);
    return 0;
}

void ql_cli_print_fields(ql_cli_t *cli, json_t *obj, const ql_cli_col_t *cols, size_t n_cols) {
    size_t w = 0;
    for (size_t c = 0; c < n_cols; c++)
        if (width(cols[c].title) > w)
            w = width(cols[c].title);
    char buf[1024];
    for (size_t c = 0; c < n_cols; c++)
        fprintf(cli->out, "%-*s  %s\n", (int)w, cols[c].title,
                ql_cli_format(cli, ql_cli_field(obj, cols[c].keys), cols[c].kind, buf, sizeof buf));
}

int ql_cli_print_json(ql_cli_t *cli, json_t *v) {
    json_dumpf(v, cli->out, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fputc('\n', cli->out);
    return 0;
}

int ql_cli_print_list_json(ql_cli_t *cli, json_t *items, int64_t total) {
    json_t *o = json_pack("{s:O,s:i,s:I,s:I}", "value", items, "offset", 0, "limit",
                          (json_int_t)json_array_size(items), "total_size", (json_int_t)total);
    if (!o)
        return ql_cli_fail(cli, QL_CLI_UNREACHABLE, "out of memory");
    ql_cli_print_json(cli, o);
    json_decref(o);
    return 0;
}

int ql_cli_show_list(ql_cli_t *cli, const ql_cli_args_t *a, const char *path,
                     const ql_cli_kv_t *query, size_t n_query, const ql_cli_col_t *cols,
                     size_t n_cols, const char *noun) {
    json_t *items;
    int64_t total;
    int rc = ql_cli_list(cli, a, path, query, n_query, &items, &total);
    if (rc)
        return rc;
    if (cli->json)
        ql_cli_print_list_json(cli, items, total);
    else
        ql_cli_print_table(cli, items, cols, n_cols, noun, total);
    json_decref(items);
    return 0;
}

int ql_cli_done(ql_cli_t *cli, json_t *data, const char *fmt, ...) {
    if (cli->json) {
        ql_cli_print_json(cli, data);
    } else {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(cli->out, fmt, ap);
        va_end(ap);
        fputc('\n', cli->out);
    }
    json_decref(data);
    return 0;
}

/* Reads exactly n digits at *p into *out and advances *p. */
static bool digits(const char **p, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9')
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

int ql_cli_parse_time(ql_cli_t *cli, const char *what, const char *text, int64_t *out) {
    const char *p = text;
    if (*p >= '0' && *p <= '9' && strspn(p, "0123456789") == strlen(p)) {
        errno = 0;
        long long n = strtoll(p, NULL, 10);
        if (errno)
            return ql_cli_usage(cli, "%s: '%s' is out of range", what, text);
        *out = n;
        return 0;
    }
    ql_civil_t c = {0};
    int year = 0;
    bool ok = digits(&p, 4, &year) && *p++ == '-' && digits(&p, 2, &c.month) && *p++ == '-' &&
              digits(&p, 2, &c.day);
    if (ok && (*p == ' ' || *p == 'T')) {
        p++;
        ok = digits(&p, 2, &c.hour) && *p++ == ':' && digits(&p, 2, &c.minute);
        if (ok && *p == ':') {
            p++;
            ok = digits(&p, 2, &c.second);
        }
    }
    c.year = year;
    if (!ok || *p || ql_civil_check(&c))
        return ql_cli_usage(cli,
                            "%s: '%s' is not a time: give epoch milliseconds or "
                            "YYYY-MM-DD[ HH:mm[:ss]] (read in %s)",
                            what, text, cli->tz ? ql_tz_name(cli->tz) : "UTC");
    int rc = cli->tz ? ql_tz_from_civil(cli->tz, &c, out) : ql_civil_to_utc_ms(&c, out);
    if (rc)
        return ql_cli_usage(cli, "%s: '%s' is not a valid time", what, text);
    return 0;
}
