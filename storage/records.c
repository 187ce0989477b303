/* Record helpers: ids, string maps, enum names, frees and copies. The msgpack codecs of each
 * record live in record_codecs.c. */
#include "base/ql_error.h"
#include "base/ql_hex.h"
#include "storage/ql_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

bool ql_id_is_zero(const ql_id_t *id) {
    static const ql_id_t zero;
    return memcmp(id->b, zero.b, sizeof id->b) == 0;
}

bool ql_id_eq(const ql_id_t *a, const ql_id_t *b) {
    return memcmp(a->b, b->b, sizeof a->b) == 0;
}

void ql_id_format(const ql_id_t *id, char *buf) {
    static const char hex[] = "0123456789abcdef";
    char *p = buf;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[id->b[i] >> 4];
        *p++ = hex[id->b[i] & 15];
    }
    *p = '\0';
}

int ql_id_parse(const char *s, ql_id_t *out) {
    if (!s || strlen(s) != QL_ID_STR_LEN)
        return QL_EINVAL;
    int n = 0;
    for (int i = 0; i < QL_ID_STR_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return QL_EINVAL;
            continue;
        }
        int hi = ql_hex_digit(s[i]), lo = ql_hex_digit(s[i + 1]);
        if (hi < 0 || lo < 0)
            return QL_EINVAL;
        out->b[n++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    return 0;
}

void ql_step_id_format(const ql_id_t *job, uint32_t seq, char *buf) {
    ql_id_format(job, buf);
    snprintf(buf + QL_ID_STR_LEN, 8, "_%02u", (unsigned)seq);
}

int ql_step_id_parse(const char *s, ql_id_t *job, uint32_t *seq) {
    size_t n = s ? strlen(s) : 0;
    if (n < QL_ID_STR_LEN + 3 || n > QL_ID_STR_LEN + 5 || s[QL_ID_STR_LEN] != '_')
        return QL_EINVAL;
    char idbuf[QL_ID_STR_LEN + 1];
    memcpy(idbuf, s, QL_ID_STR_LEN);
    idbuf[QL_ID_STR_LEN] = '\0';
    if (ql_id_parse(idbuf, job))
        return QL_EINVAL;
    uint32_t v = 0;
    for (const char *p = s + QL_ID_STR_LEN + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return QL_EINVAL;
        v = v * 10 + (uint32_t)(*p - '0');
    }
    *seq = v;
    return 0;
}

const char *ql_strmap_get(const ql_strmap_t *m, const char *key) {
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->items[i].key, key) == 0)
            return m->items[i].value;
    return NULL;
}

int ql_strmap_set(ql_strmap_t *m, const char *key, const char *value) {
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->items[i].key, key) != 0)
            continue;
        if (!value) {
            free(m->items[i].key);
            free(m->items[i].value);
            m->items[i] = m->items[--m->n];
            return 0;
        }
        char *v = strdup(value);
        if (!v)
            return UV_ENOMEM;
        free(m->items[i].value);
        m->items[i].value = v;
        return 0;
    }
    if (!value)
        return 0;
    ql_strmap_entry_t *items = realloc(m->items, (m->n + 1) * sizeof *items);
    if (!items)
        return UV_ENOMEM;
    m->items = items;
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return UV_ENOMEM;
    }
    m->items[m->n].key = k;
    m->items[m->n].value = v;
    m->n++;
    return 0;
}

int ql_strmap_copy(ql_strmap_t *dst, const ql_strmap_t *src) {
    memset(dst, 0, sizeof *dst);
    for (size_t i = 0; i < src->n; i++) {
        int rc = ql_strmap_set(dst, src->items[i].key, src->items[i].value);
        if (rc) {
            ql_strmap_free(dst);
            return rc;
        }
    }
    return 0;
}

void ql_strmap_free(ql_strmap_t *m) {
    for (size_t i = 0; i < m->n; i++) {
        free(m->items[i].key);
        free(m->items[i].value);
    }
    free(m->items);
    memset(m, 0, sizeof *m);
}

void ql_extra_free(ql_extra_t *e) {
    free(e->data);
    memset(e, 0, sizeof *e);
}

static int extra_copy(ql_extra_t *dst, const ql_extra_t *src) {
    memset(dst, 0, sizeof *dst);
    if (!src->len)
        return 0;
    dst->data = malloc(src->len);
    if (!dst->data)
        return UV_ENOMEM;
    memcpy(dst->data, src->data, src->len);
    dst->len = src->len;
    dst->count = src->count;
    return 0;
}

static int bytes_copy(uint8_t **dst, const uint8_t *src, size_t len) {
    *dst = NULL;
    if (!len)
        return 0;
    *dst = malloc(len);
    if (!*dst)
        return UV_ENOMEM;
    memcpy(*dst, src, len);
    return 0;
}

static int str_copy(char **dst, const char *src) {
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : UV_ENOMEM;
}

static const char *const state_names[QL_STATE_COUNT] = {
    "READY",     "PENDING", "RUNNING",  "ERROR", "PAUSED",
    "DISCARDED", "SUCCEED", "SUICIDAL", "SKIP",  "WARNING",
};

const char *ql_state_name(ql_state_t s) {
    return (unsigned)s < QL_STATE_COUNT ? state_names[s] : "UNKNOWN";
}

int ql_state_parse(const char *name, ql_state_t *out) {
    for (int i = 0; i < QL_STATE_COUNT; i++)
        if (strcmp(name, state_names[i]) == 0) {
            *out = (ql_state_t)i;
            return 0;
        }
    return QL_EINVAL;
}

bool ql_state_is_final(ql_state_t s) {
    return s == QL_SUCCEED || s == QL_DISCARDED || s == QL_SUICIDAL || s == QL_SKIP ||
           s == QL_WARNING;
}

bool ql_state_is_progressing(ql_state_t s) {
    return s == QL_READY || s == QL_PENDING || s == QL_RUNNING;
}

static int parse_name(const char *const *names, int n, const char *name, int *out) {
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return QL_EINVAL;
}

static const char *const model_status_names[] = {"ONLINE", "OFFLINE", "BROKEN"};
static const char *const model_type_names[] = {"BATCH", "STREAMING"};
static const char *const seg_status_names[] = {"NEW", "READY", "WARNING"};

const char *ql_model_status_name(ql_model_status_t s) {
    return (unsigned)s < 3 ? model_status_names[s] : "UNKNOWN";
}

int ql_model_status_parse(const char *name, ql_model_status_t *out) {
    int v;
    int rc = parse_name(model_status_names, 3, name, &v);
    if (!rc)
        *out = (ql_model_status_t)v;
    return rc;
}

const char *ql_model_type_name(ql_model_type_t t) {
    return (unsigned)t < 2 ? model_type_names[t] : "UNKNOWN";
}

int ql_model_type_parse(const char *name, ql_model_type_t *out) {
    int v;
    int rc = parse_name(model_type_names, 2, name, &v);
    if (!rc)
        *out = (ql_model_type_t)v;
    return rc;
}

const char *ql_seg_status_name(ql_seg_status_t s) {
    return (unsigned)s < 3 ? seg_status_names[s] : "UNKNOWN";
}

int ql_seg_status_parse(const char *name, ql_seg_status_t *out) {
    int v;
    int rc = parse_name(seg_status_names, 3, name, &v);
    if (!rc)
        *out = (ql_seg_status_t)v;
    return rc;
}

void ql_project_free(ql_project_t *p) {
    free(p->description);
    ql_strmap_free(&p->config);
    ql_extra_free(&p->extra);
    memset(p, 0, sizeof *p);
}

void ql_model_free(ql_model_t *m) {
    free(m->multi_partition_columns);
    ql_strmap_free(&m->config);
    ql_extra_free(&m->extra);
    memset(m, 0, sizeof *m);
}

void ql_segment_free(ql_segment_t *s) {
    ql_extra_free(&s->extra);
    memset(s, 0, sizeof *s);
}

void ql_job_free(ql_job_t *j) {
    free(j->sources);
    free(j->params);
    ql_extra_free(&j->extra);
    memset(j, 0, sizeof *j);
}

void ql_step_free(ql_step_t *s) {
    free(s->failed_msg);
    free(s->def);
    ql_extra_free(&s->extra);
    memset(s, 0, sizeof *s);
}

int ql_project_copy(ql_project_t *dst, const ql_project_t *src) {
    *dst = *src;
    memset(&dst->config, 0, sizeof dst->config);
    dst->description = NULL;
    memset(&dst->extra, 0, sizeof dst->extra);
    if (str_copy(&dst->description, src->description) ||
        ql_strmap_copy(&dst->config, &src->config) || extra_copy(&dst->extra, &src->extra)) {
        ql_project_free(dst);
        return UV_ENOMEM;
    }
    return 0;
}

int ql_model_copy(ql_model_t *dst, const ql_model_t *src) {
    *dst = *src;
    dst->multi_partition_columns = NULL;
    memset(&dst->config, 0, sizeof dst->config);
    memset(&dst->extra, 0, sizeof dst->extra);
    if (str_copy(&dst->multi_partition_columns, src->multi_partition_columns) ||
        ql_strmap_copy(&dst->config, &src->config) || extra_copy(&dst->extra, &src->extra)) {
        ql_model_free(dst);
        return UV_ENOMEM;
    }
    return 0;
}

int ql_job_copy(ql_job_t *dst, const ql_job_t *src) {
    *dst = *src;
    dst->sources = NULL;
    dst->params = NULL;
    memset(&dst->extra, 0, sizeof dst->extra);
    if (bytes_copy((uint8_t **)&dst->sources, (const uint8_t *)src->sources,
                   src->n_sources * sizeof *src->sources) ||
        bytes_copy((uint8_t **)&dst->params, (const uint8_t *)src->params, src->params_len) ||
        extra_copy(&dst->extra, &src->extra)) {
        ql_job_free(dst);
        return UV_ENOMEM;
    }
    return 0;
}

int ql_step_copy(ql_step_t *dst, const ql_step_t *src) {
    *dst = *src;
    dst->failed_msg = NULL;
    dst->def = NULL;
    memset(&dst->extra, 0, sizeof dst->extra);
    if (str_copy(&dst->failed_msg, src->failed_msg) ||
        bytes_copy(&dst->def, src->def, src->def_len) || extra_copy(&dst->extra, &src->extra)) {
        ql_step_free(dst);
        return UV_ENOMEM;
    }
    return 0;
}
