/*
 * The dispatcher's model list (decoded only when the metadata generation changed) and its
 * decisions by model id (an open-addressing index over a growable array). The scan that uses
 * them is in dispatcher.c.
 */
#include "base/ql_buf.h"
#include "dispatch_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- decisions ---- */

static size_t id_hash(const ql_id_t *id, size_t n) {
    uint64_t h;
    memcpy(&h, id->b + 4, 8);
    return (size_t)(h * 0x9e3779b97f4a7c15ull >> 20) & (n - 1);
}

static int dindex_grow(ql_dispatcher_t *d) {
    size_t n = d->n_dindex ? d->n_dindex * 2 : 1024;
    uint32_t *idx = calloc(n, sizeof *idx);
    if (!idx)
        return UV_ENOMEM;
    for (size_t i = 0; i < d->n_decisions; i++) {
        size_t b = id_hash(&d->decisions[i].model, n);
        while (idx[b])
            b = (b + 1) & (n - 1);
        idx[b] = (uint32_t)i + 1;
    }
    free(d->dindex);
    d->dindex = idx;
    d->n_dindex = n;
    return 0;
}

drec_t *ql_dispatch_decision_find(const ql_dispatcher_t *d, const ql_id_t *id) {
    if (!d->n_dindex)
        return NULL;
    for (size_t b = id_hash(id, d->n_dindex);; b = (b + 1) & (d->n_dindex - 1)) {
        uint32_t v = d->dindex[b];
        if (!v)
            return NULL;
        if (ql_id_eq(&d->decisions[v - 1].model, id))
            return &d->decisions[v - 1];
    }
}

static int decision_slot(ql_dispatcher_t *d, const ql_id_t *id, uint32_t *out) {
    drec_t *r = ql_dispatch_decision_find(d, id);
    if (r) {
        *out = (uint32_t)(r - d->decisions);
        return 0;
    }
    if ((d->n_decisions + 1) * 2 > d->n_dindex && dindex_grow(d))
        return UV_ENOMEM;
    if (QL_ARRAY_RESERVE(d->decisions, d->cap_decisions, d->n_decisions + 1, 256))
        return UV_ENOMEM;
    drec_t *n = &d->decisions[d->n_decisions];
    memset(n, 0, sizeof *n);
    n->model = *id;
    n->warned_day = -1;
    size_t b = id_hash(id, d->n_dindex);
    while (d->dindex[b])
        b = (b + 1) & (d->n_dindex - 1);
    d->dindex[b] = (uint32_t)d->n_decisions + 1;
    *out = (uint32_t)d->n_decisions++;
    return 0;
}

void ql_dispatch_set_msg(drec_t *r, const char *msg) {
    free(r->msg);
    r->msg = msg && msg[0] ? strdup(msg) : NULL;
}

/* ---- the model list ---- */

static uint32_t combo_for(ql_dispatcher_t *d, const char *zone, const char *format,
                          const ql_auto_build_cfg_t *cfg) {
    for (size_t i = 0; i < d->n_combos; i++) {
        combo_t *c = &d->combos[i];
        if (!strcmp(c->zone, zone) && !strcmp(c->format, format) &&
            c->cfg.trigger_sec == cfg->trigger_sec && c->cfg.offset_days == cfg->offset_days &&
            c->cfg.start_sec == cfg->start_sec && c->cfg.end_sec == cfg->end_sec)
            return (uint32_t)i;
    }
    combo_t *p = realloc(d->combos, (d->n_combos + 1) * sizeof *p);
    if (!p)
        return UINT32_MAX;
    d->combos = p;
    combo_t *c = &d->combos[d->n_combos];
    memset(c, 0, sizeof *c);
    snprintf(c->zone, sizeof c->zone, "%s", zone);
    snprintf(c->format, sizeof c->format, "%s", format);
    c->cfg = *cfg;
    c->scan_id = -1;
    return (uint32_t)d->n_combos++;
}

typedef struct {
    ql_dispatcher_t *d;
    const ql_project_t *p;
    uint32_t pidx;
    char zone[64];
    int rc;
} build_ctx_t;

static int add_model_cb(const ql_model_t *m, void *arg) {
    build_ctx_t *b = arg;
    ql_dispatcher_t *d = b->d;
    if (QL_ARRAY_RESERVE(d->models, d->cap_models, d->n_models + 1, 1024))
        return b->rc = UV_ENOMEM;
    mentry_t *e = &d->models[d->n_models];
    memset(e, 0, sizeof *e);
    e->id = m->id;
    snprintf(e->name, sizeof e->name, "%s", m->name);
    e->project = b->pidx;
    e->combo = UINT32_MAX;
    ql_auto_build_cfg_t cfg;
    ql_err_t err = {0};
    e->skip = ql_dispatch_eligibility(b->p, m, &cfg, &err);
    if (e->skip == QL_SKIP_INVALID_CONFIG)
        snprintf(e->skip_msg, sizeof e->skip_msg, "%.199s", err.msg);
    if (e->skip == QL_SKIP_NONE) {
        e->combo = combo_for(d, b->zone, m->partition_format, &cfg);
        if (e->combo == UINT32_MAX)
            return b->rc = UV_ENOMEM;
    }
    if ((b->rc = decision_slot(d, &m->id, &e->decision)))
        return b->rc;
    d->decisions[e->decision].mentry = (uint32_t)d->n_models;
    d->n_models++;
    return 0;
}

static int add_project_cb(const ql_project_t *p, void *arg) {
    build_ctx_t *b = arg;
    ql_dispatcher_t *d = b->d;
    pentry_t *np = realloc(d->projects, (d->n_projects + 1) * sizeof *np);
    if (!np)
        return b->rc = UV_ENOMEM;
    d->projects = np;
    snprintf(d->projects[d->n_projects].name, sizeof np->name, "%s", p->name);
    b->p = p;
    b->pidx = (uint32_t)d->n_projects++;
    ql_submit_project_timezone(p, d->opts.server_timezone, b->zone, sizeof b->zone);
    return 0;
}

typedef struct {
    build_ctx_t *b;
    ql_txn_t *txn;
} proj_walk_t;

static int walk_project_cb(const ql_project_t *p, void *arg) {
    proj_walk_t *w = arg;
    int rc = add_project_cb(p, w->b);
    if (rc)
        return rc;
    rc = ql_model_foreach(w->txn, p->name, add_model_cb, w->b);
    return rc ? rc : w->b->rc;
}

int ql_dispatch_rebuild_list(ql_dispatcher_t *d, ql_txn_t *txn, uint64_t gen) {
    d->n_projects = d->n_models = d->n_combos = 0;
    for (size_t i = 0; i < d->n_decisions; i++)
        d->decisions[i].mentry = UINT32_MAX;
    build_ctx_t b = {.d = d};
    proj_walk_t w = {.b = &b, .txn = txn};
    int rc = ql_project_foreach(txn, walk_project_cb, &w);
    if (rc) {
        d->list_valid = false;
        return rc;
    }
    d->list_valid = true;
    d->generation = gen;
    return 0;
}
