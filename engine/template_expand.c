/*
 * ${NAME} substitution and step expansion. One scanner serves both the load-time check (are
 * the names known?) and the run-time expansion (insert the values), so the two can never
 * disagree on what counts as a reference.
 *
 * Why values are safe: expansion builds each argv element, env value and cwd as a fresh string
 * from the template text and the parameter values, and the runner passes argv to execve. No
 * shell sees a value unless the template itself runs one, and then only through the
 * environment (see conf/jobs.yaml).
 */
#include "base/ql_buf.h"
#include "engine/ql_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

const char *const ql_template_wellknown[] = {
    "QILIN_JOB_ID",
    "QILIN_JOB_TYPE",
    "QILIN_PROJECT",
    "QILIN_MODEL",
    "QILIN_SEGMENT_ID",
    "QILIN_SEGMENT_START",
    "QILIN_SEGMENT_END",
    "QILIN_SEGMENT_START_FMT",
    "QILIN_SEGMENT_END_FMT",
    "QILIN_STEP_ID",
    "QILIN_YARN_QUEUE",
    "QILIN_TAG",
    NULL,
};

/* Appends n bytes of s to the expansion (first capacity 64 bytes). */
static int sb_add(ql_strbuf_t *b, const char *s, size_t n) {
    return ql_strbuf_append_cap(b, s, n, 64);
}

enum scan_result {
    SCAN_OK = 0,
    SCAN_UNTERMINATED = 1, /* "${" without "}" */
    SCAN_BADNAME = 2,      /* "${...}" whose content is not a name */
    SCAN_UNKNOWN = 3,      /* a name the lookup does not know */
};

/* Resolves a name to its value (expansion) or to "" (check); NULL when unknown. */
typedef const char *(*lookup_fn)(const void *ctx, const char *name, size_t len);

static bool name_char(char c, bool first) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/*
 * Walks in; out (may be NULL for a check) receives the substituted text. On a failure *bad
 * points at the offending reference's start inside in and *bad_len is its name's length.
 * Returns a scan_result or UV_ENOMEM.
 */
static int scan(const char *in, lookup_fn lookup, const void *ctx, ql_strbuf_t *out,
                const char **bad, size_t *bad_len) {
    const char *p = in;
    while (*p) {
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
            if (out && sb_add(out, "${", 2))
                return UV_ENOMEM;
            p += 3;
            continue;
        }
        if (p[0] == '$' && p[1] == '{') {
            const char *name = p + 2, *end = strchr(name, '}');
            *bad = p;
            if (!end) {
                *bad_len = strlen(name);
                return SCAN_UNTERMINATED;
            }
            size_t len = (size_t)(end - name);
            *bad_len = len;
            bool ok = len > 0 && len <= 128;
            for (size_t i = 0; ok && i < len; i++)
                ok = name_char(name[i], i == 0);
            if (!ok)
                return SCAN_BADNAME;
            const char *value = lookup(ctx, name, len);
            if (!value)
                return SCAN_UNKNOWN;
            if (out && sb_add(out, value, strlen(value)))
                return UV_ENOMEM;
            p = end + 1;
            continue;
        }
        const char *next = strchr(p + 1, '$');
        size_t n = next ? (size_t)(next - p) : strlen(p);
        if (out && sb_add(out, p, n))
            return UV_ENOMEM;
        p += n;
    }
    if (out && !out->p && sb_add(out, "", 0))
        return UV_ENOMEM;
    return SCAN_OK;
}

static bool name_eq(const char *a, const char *name, size_t len) {
    return strlen(a) == len && memcmp(a, name, len) == 0;
}

typedef struct declared_ctx {
    const char *const *declared;
    size_t n;
} declared_ctx_t;

static const char *lookup_declared(const void *ctx, const char *name, size_t len) {
    const declared_ctx_t *d = ctx;
    for (size_t i = 0; ql_template_wellknown[i]; i++)
        if (name_eq(ql_template_wellknown[i], name, len))
            return "";
    for (size_t i = 0; i < d->n; i++)
        if (name_eq(d->declared[i], name, len))
            return "";
    return NULL;
}

typedef struct params_ctx {
    const ql_param_t *params;
    size_t n;
} params_ctx_t;

static const char *lookup_params(const void *ctx, const char *name, size_t len) {
    const params_ctx_t *pc = ctx;
    for (size_t i = 0; i < pc->n; i++)
        if (pc->params[i].name && name_eq(pc->params[i].name, name, len))
            return pc->params[i].value ? pc->params[i].value : "";
    return NULL;
}

/* Describes a scan failure into msg. */
static void describe(int r, const char *bad, size_t bad_len, const char *unknown_hint, char *msg,
                     size_t size) {
    int n = bad_len > 64 ? 64 : (int)bad_len;
    switch (r) {
    case SCAN_UNTERMINATED:
        snprintf(msg, size, "'${%.*s' has no closing '}' (write $${ for a literal ${)", n, bad + 2);
        break;
    case SCAN_BADNAME:
        snprintf(msg, size,
                 "'${%.*s}' is not a parameter reference: a name is [A-Za-z_][A-Za-z0-9_]* "
                 "(write $${ for a literal ${)",
                 n, bad + 2);
        break;
    default:
        snprintf(msg, size, "unknown parameter ${%.*s}%s", n, bad + 2, unknown_hint);
        break;
    }
}

int ql_template_check_refs(const ql_yaml_node_t *at, const char *what, const char *s,
                           const char *const *declared, size_t n_declared, ql_err_t *err) {
    declared_ctx_t ctx = {declared, n_declared};
    const char *bad = NULL;
    size_t bad_len = 0;
    int r = scan(s, lookup_declared, &ctx, NULL, &bad, &bad_len);
    if (r == SCAN_OK)
        return 0;
    char msg[1024], hint[640], list[256] = "";
    if (n_declared) {
        size_t o = 0;
        for (size_t i = 0; i < n_declared && o < sizeof list; i++) {
            int w = snprintf(list + o, sizeof list - o, ", %s", declared[i]);
            if (w < 0)
                break;
            o += (size_t)w;
        }
    }
    snprintf(hint, sizeof hint,
             " (expected a QILIN_* job parameter such as QILIN_MODEL or QILIN_SEGMENT_START_FMT%s"
             "%s; write $${ for a literal ${)",
             n_declared ? ", or one of the declared" : "", list);
    describe(r, bad, bad_len, hint, msg, sizeof msg);
    return ql_yaml_errorf(err, at, "%s: %s", what, msg);
}

int ql_template_subst(const char *in, const ql_param_t *params, size_t n, char **out,
                      ql_err_t *err) {
    params_ctx_t ctx = {params, n};
    ql_strbuf_t b = {0};
    const char *bad = NULL;
    size_t bad_len = 0;
    int r = scan(in, lookup_params, &ctx, &b, &bad, &bad_len);
    if (r == UV_ENOMEM) {
        free(b.p);
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    }
    if (r != SCAN_OK) {
        free(b.p);
        char msg[384];
        describe(r, bad, bad_len, " has no value", msg, sizeof msg);
        return ql_err_set(err, QL_EINVAL, "%s", msg);
    }
    *out = b.p;
    return 0;
}

void ql_step_exec_free(ql_step_exec_t *e) {
    ql_yaml_strv_free(e->argv);
    ql_yaml_strv_free(e->envp);
    free(e->cwd);
    memset(e, 0, sizeof *e);
}

/* "NAME=value" as a new string. */
static char *env_entry(const char *prefix, const char *name, const char *value) {
    size_t np = strlen(prefix), nn = strlen(name), nv = strlen(value);
    char *s = malloc(np + nn + nv + 2);
    if (s) {
        memcpy(s, prefix, np);
        memcpy(s + np, name, nn);
        s[np + nn] = '=';
        memcpy(s + np + nn + 1, value, nv + 1);
    }
    return s;
}

static bool param_name_ok(const char *name) {
    if (!name || !name_char(name[0], true))
        return false;
    for (const char *p = name + 1; *p; p++)
        if (!name_char(*p, false))
            return false;
    return true;
}

static int expand(const ql_stepdef_t *step, const ql_param_t *params, size_t n, ql_step_exec_t *out,
                  ql_err_t *err) {
    char sub_err_ctx[300];
    int rc;
    if (step->kind == QL_STEP_SHELL && step->argv) {
        if (!(out->argv = calloc(step->argc + 1, sizeof *out->argv)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        for (size_t i = 0; i < step->argc; i++) {
            if ((rc = ql_template_subst(step->argv[i], params, n, &out->argv[i], err))) {
                snprintf(sub_err_ctx, sizeof sub_err_ctx,
                         "step '%s': argv item %zu: ", step->name ? step->name : "?", i + 1);
                goto fail;
            }
            out->argc++;
        }
    }
    if (!(out->envp = calloc(n + step->n_env + 1, sizeof *out->envp)))
        return ql_err_set(err, UV_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *name = params[i].name, *value = params[i].value ? params[i].value : "";
        if (!param_name_ok(name))
            return ql_err_set(err, QL_EINVAL, "step '%s': invalid parameter name '%s'",
                              step->name ? step->name : "?", name ? name : "(null)");
        /* Well-known parameters keep their names; custom ones are namespaced so that a job's
         * parameter can never replace PATH, LD_PRELOAD or a QILIN_* variable. */
        bool wellknown = strncmp(name, "QILIN_", 6) == 0;
        if (!(out->envp[out->n_env] = env_entry(wellknown ? "" : "QILIN_PARAM_", name, value)))
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        out->n_env++;
    }
    for (size_t i = 0; i < step->n_env; i++) {
        char *value;
        if ((rc = ql_template_subst(step->env[i].value, params, n, &value, err))) {
            snprintf(sub_err_ctx, sizeof sub_err_ctx,
                     "step '%s': env '%s': ", step->name ? step->name : "?", step->env[i].name);
            goto fail;
        }
        out->envp[out->n_env] = env_entry("", step->env[i].name, value);
        free(value);
        if (!out->envp[out->n_env])
            return ql_err_set(err, UV_ENOMEM, "out of memory");
        out->n_env++;
    }
    if (step->cwd && (rc = ql_template_subst(step->cwd, params, n, &out->cwd, err))) {
        snprintf(sub_err_ctx, sizeof sub_err_ctx,
                 "step '%s': cwd: ", step->name ? step->name : "?");
        goto fail;
    }
    return 0;
fail:
    /* Prefix the substitution error with where it happened. */
    if (err && rc == QL_EINVAL) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        ql_err_set(err, rc, "%s%s", sub_err_ctx, msg);
    }
    return rc;
}

int ql_template_expand_step(const ql_stepdef_t *step, const ql_param_t *params, size_t n,
                            ql_step_exec_t *out, ql_err_t *err) {
    memset(out, 0, sizeof *out);
    int rc = expand(step, params, n, out, err);
    if (rc)
        ql_step_exec_free(out);
    return rc;
}
