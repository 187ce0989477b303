/*
 * ql_store_fsck: checks the invariants of docs/design/metadata.md and every index against the
 * records, inside one read transaction (so it may run next to a live writer and sees one consistent
 * snapshot).
 *
 * Cost: every table is walked once with a cursor, in key order. Record-to-index checks are exact
 * B-tree lookups. The index-to-record direction is proven by counting: each record has exactly
 * one expected entry per index (distinct, since the key holds the record's id), so once every
 * expected entry was found, the index has no stale entry iff its entry count equals the number
 * of records that expect one; only an index whose count differs is walked to name the stale
 * entries. Jobs and steps share their key prefix (the job id), so they are walked side by side
 * (a merge join) rather than with a seek per job. The only pass that is not linear is the
 * overlap check of one model's segments: a sorted sweep whose active set is the segments still
 * open at each start (one or two in every state the rules allow).
 *
 * Findings are printed one a line, "violation: ..." for a broken invariant and "warning: ..."
 * for a state the rules allow but an operator should look at (an orphan NEW segment).
 *
 * This file is the driver, the findings and the per-project tallies; each pass has a file of
 * its own (see fsck_int.h).
 */
#include "fsck_int.h"

#include <stdarg.h>
#include <stdlib.h>

void ql_fsck_finding(ql_fsck_t *f, bool violation, const char *fmt, ...) {
    if (violation)
        f->r->violations++;
    else
        f->r->warnings++;
    if (!f->out)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs(violation ? "violation: " : "warning: ", f->out);
    vfprintf(f->out, fmt, ap);
    fputc('\n', f->out);
    va_end(ap);
}

/* ---- per-project tallies, a small open-addressing table ---- */

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

ql_fsck_proj_t *ql_fsck_proj_lookup(ql_fsck_projects_t *t, const char *name, size_t n) {
    if (n == 0 || n > QL_NAME_MAX)
        return NULL;
    if ((t->n + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        ql_fsck_proj_t *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].used)
                continue;
            size_t h = hash_name(t->slots[i].name, strlen(t->slots[i].name)) & (cap - 1);
            while (slots[h].used)
                h = (h + 1) & (cap - 1);
            slots[h] = t->slots[i];
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    size_t h = hash_name(name, n) & (t->cap - 1);
    while (t->slots[h].used) {
        if (strlen(t->slots[h].name) == n && memcmp(t->slots[h].name, name, n) == 0)
            return &t->slots[h];
        h = (h + 1) & (t->cap - 1);
    }
    ql_fsck_proj_t *e = &t->slots[h];
    e->used = true;
    memcpy(e->name, name, n);
    e->name[n] = '\0';
    t->n++;
    return e;
}

int lmdb_fsck(ql_store_t *store, void *out_file, ql_fsck_report_t *report) {
    ql_fsck_report_t local;
    ql_fsck_t f = {.store = store, .out = out_file, .r = report ? report : &local};
    memset(f.r, 0, sizeof *f.r);
    int rc = ql_txn_begin(store, false, &f.txn);
    if (rc)
        return rc;
    f.mt = ql_mdb_txn(f.txn);
    f.zone = ql_txn_zone(f.txn);
    if (!f.zone)
        rc = UV_ENOMEM;
    if (!rc)
        rc = ql_fsck_meta(&f);
    if (!rc)
        rc = ql_fsck_projects(&f);
    if (!rc)
        rc = ql_fsck_models(&f);
    if (!rc)
        rc = ql_fsck_segments(&f);
    if (!rc)
        rc = ql_fsck_jobs(&f);
    if (!rc)
        rc = ql_fsck_live_disjoint(&f);
    if (!rc)
        rc = ql_fsck_outputs(&f);
    if (!rc)
        rc = ql_fsck_counts(&f);
    ql_txn_abort(f.txn);
    free(f.projects.slots);
    if (f.out)
        fflush(f.out);
    return rc;
}
