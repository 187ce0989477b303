/* fsck pass over the counters (jobs by project and state, models by project, segments by
 * model) against the tallies of the passes before; a tally without a counter is a violation too.
 */
#include "fsck_int.h"

int ql_fsck_counts(ql_fsck_t *f) {
    MDB_cursor *c;
    int rc = cursor(f, DB_COUNTS, &c);
    if (rc)
        return rc;
    MDB_cursor *segc;
    if ((rc = cursor(f, DB_SEGMENTS, &segc))) {
        mdb_cursor_close(c);
        return rc;
    }
    MDB_val k, v;
    char id[QL_ID_STR_LEN + 1];
    for (int op = MDB_FIRST; mdb_cursor_get(c, &k, &v, op) == 0; op = MDB_NEXT) {
        const uint8_t *kp = k.mv_data;
        if (v.mv_size != 8) {
            VIOLATION(f, "counts: a value of %zu bytes under key '%c' is not a counter", v.mv_size,
                      k.mv_size ? kp[0] : '?');
            continue;
        }
        uint64_t n = ql_get_be64(v.mv_data);
        if (k.mv_size >= 2 && kp[0] == 'J') {
            unsigned st = kp[1];
            const char *pname = (const char *)kp + 2;
            size_t pl = k.mv_size - 2;
            if (st >= QL_JOB_STATE_COUNT) {
                VIOLATION(f, "counts: a job counter for state %u, which is not a job state", st);
                continue;
            }
            uint64_t real;
            if (pl == 0) {
                real = f->all_jobs[st];
                f->seen_all[st] = true;
            } else {
                ql_fsck_proj_t *e = ql_fsck_proj_lookup(&f->projects, pname, pl);
                if (!e) {
                    VIOLATION(f, "counts: a job counter for an invalid project name");
                    continue;
                }
                real = e->jobs[st];
                e->seen_j[st] = true;
            }
            if (real != n)
                VIOLATION(f, "counts: %s%.*s%s has %llu %s jobs, its counter says %llu",
                          pl ? "project '" : "all projects", (int)pl, pname, pl ? "'" : "",
                          (unsigned long long)real, ql_state_name((ql_state_t)st),
                          (unsigned long long)n);
        } else if (k.mv_size >= 2 && kp[0] == 'M') {
            ql_fsck_proj_t *e =
                ql_fsck_proj_lookup(&f->projects, (const char *)kp + 1, k.mv_size - 1);
            if (!e) {
                VIOLATION(f, "counts: a model counter for an invalid project name");
                continue;
            }
            e->seen_m = true;
            if (e->models != n)
                VIOLATION(f, "counts: project '%s' has %llu models, its counter says %llu", e->name,
                          (unsigned long long)e->models, (unsigned long long)n);
        } else if (k.mv_size == 17 && kp[0] == 'S') {
            /* Counted groups were compared in the segment pass; only a model with no segment
             * at all is left to check. */
            MDB_val sk = ql_val(kp + 1, 16), sv;
            bool any = mdb_cursor_get(segc, &sk, &sv, MDB_SET_RANGE) == 0 && sk.mv_size >= 16 &&
                       memcmp(sk.mv_data, kp + 1, 16) == 0;
            if (!any) {
                idstr(kp + 1, id);
                VIOLATION(f, "counts: model %s has no segments, its counter says %llu", id,
                          (unsigned long long)n);
            }
        } else {
            VIOLATION(f, "counts: unknown counter key of %zu bytes starting with 0x%02x", k.mv_size,
                      k.mv_size ? kp[0] : 0);
        }
    }
    mdb_cursor_close(segc);
    mdb_cursor_close(c);

    for (int s = 0; s < QL_JOB_STATE_COUNT; s++)
        if (f->all_jobs[s] && !f->seen_all[s])
            VIOLATION(f, "counts: all projects have %llu %s jobs, but there is no counter",
                      (unsigned long long)f->all_jobs[s], ql_state_name((ql_state_t)s));
    for (size_t i = 0; i < f->projects.cap; i++) {
        const ql_fsck_proj_t *e = &f->projects.slots[i];
        if (!e->used)
            continue;
        if (e->models && !e->seen_m)
            VIOLATION(f, "counts: project '%s' has %llu models, but there is no counter", e->name,
                      (unsigned long long)e->models);
        for (int s = 0; s < QL_JOB_STATE_COUNT; s++)
            if (e->jobs[s] && !e->seen_j[s])
                VIOLATION(f, "counts: project '%s' has %llu %s jobs, but there is no counter",
                          e->name, (unsigned long long)e->jobs[s], ql_state_name((ql_state_t)s));
    }
    return 0;
}
