/*
 * A batch of step ends and picks split across the writer's lanes (ql_writer.h, Lanes;
 * docs/postgresql.md, Writer lanes).
 *
 * One batch is one transaction, its statements one after the other on one session. On a store
 * whose write transactions run at once, the runs' mutations are split into a batch per lane,
 * so that their statements run side by side. The split keeps the rule that a pick never
 * commits before the end of the job whose slot it takes (ql_sched_flush_finishing), whatever
 * order the parts commit in:
 * - the ends are dealt out in turn, and each part takes at most as many picks as it has ends
 *   of jobs that end (`ending`): a part that commits alone then adds no more RUNNING jobs than
 *   it removes; a pick goes first to a part with an end of a job of its own project, whose
 *   project slot it may be taking (a project's own limit), then to any part with room;
 * - the picks left over take slots that were free, or that ends queued earlier give up: every
 *   part with picks carries the write keys of those earlier ends (submit_batch_keyed in
 *   sched.c), so it commits after them on any lane.
 * With one lane (LMDB, the simulator's manual writer) the batch stays one.
 */
#include "sched_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t n;  /* entries */
    size_t at; /* where its entries begin in the split batch */
    int rc;    /* ql_sched_submit_batch's answer */
} part_t;

void ql_sched_deal(const batch_ent_t *e, size_t n, size_t n_parts, size_t *dest) {
    size_t ending[QL_WRITER_LANES_MAX] = {0}, picks[QL_WRITER_LANES_MAX] = {0};
    size_t next_end = 0, next_pick = 0;
    for (size_t i = 0; i < n; i++) {
        dest[i] = n_parts;
        if (e[i].fn != ql_sched_pick_fn) {
            dest[i] = next_end++ % n_parts;
            ending[dest[i]] += e[i].r->ending;
        }
    }
    /* A pick first goes with an end of its own project's job: the fetcher counted that job's
     * project slot as free already (sched_pick.c), so the pick must not commit before it. */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; e[i].fn == ql_sched_pick_fn && dest[i] == n_parts && k < n; k++) {
            if (e[k].fn == ql_sched_pick_fn || !e[k].r->ending ||
                strcmp(e[k].r->project, e[i].r->project) != 0)
                continue;
            size_t j = dest[k]; /* that end's part */
            if (picks[j] < ending[j]) {
                dest[i] = j;
                picks[j]++;
            }
        }
    for (size_t i = 0; i < n; i++) {
        if (e[i].fn != ql_sched_pick_fn || dest[i] != n_parts)
            continue;
        size_t d = n_parts;
        for (size_t j = 0; j < n_parts && d == n_parts; j++)
            if (picks[j] < ending[j])
                d = j;
        if (d == n_parts)
            d = next_pick++ % n_parts;
        picks[d]++;
        dest[i] = d;
    }
}

void ql_sched_submit_or_drop(ql_sched_t *s, const batch_ent_t *e, size_t n) {
    size_t lanes = ql_writer_lanes(s->opts.writer), n_ends = 0;
    for (size_t i = 0; i < n; i++)
        n_ends += e[i].fn != ql_sched_pick_fn;
    size_t n_parts = n_ends ? n_ends : n;
    if (n_parts > lanes)
        n_parts = lanes; /* at most QL_WRITER_LANES_MAX */
    part_t *parts = n_parts > 1 ? calloc(n_parts, sizeof *parts) : NULL;
    size_t *dest = parts ? malloc(n * sizeof *dest) : NULL;
    batch_ent_t *out = dest ? malloc(n * sizeof *out) : NULL;
    if (!out) { /* one lane, or no memory to split: one batch */
        free(dest);
        free(parts);
        ql_sched_submit_one_or_drop(s, e, n);
        return;
    }
    ql_sched_deal(e, n, n_parts, dest);
    /* Each part's entries in the batch's order (ends before picks), one part after another. */
    for (size_t i = 0; i < n; i++)
        parts[dest[i]].n++;
    for (size_t j = 1; j < n_parts; j++)
        parts[j].at = parts[j - 1].at + parts[j - 1].n;
    for (size_t j = 0; j < n_parts; j++)
        parts[j].n = 0;
    for (size_t i = 0; i < n; i++) {
        part_t *p = &parts[dest[i]];
        out[p->at + p->n++] = e[i];
    }
    /* The flags are cleared before a run is dropped: a drop may free it. */
    for (size_t i = 0; i < n; i++)
        e[i].r->in_split = true;
    for (size_t j = 0; j < n_parts; j++)
        parts[j].rc = parts[j].n ? ql_sched_submit_batch(s, out + parts[j].at, parts[j].n) : 0;
    for (size_t i = 0; i < n; i++)
        e[i].r->in_split = false;
    for (size_t j = 0; j < n_parts; j++)
        for (size_t i = 0; parts[j].rc && i < parts[j].n; i++) {
            run_t *r = out[parts[j].at + i].r;
            r->refs--;
            ql_sched_run_drop(r);
        }
    free(out);
    free(dest);
    free(parts);
}
