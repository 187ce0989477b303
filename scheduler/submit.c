/* The shared submission path for builds, merges and refreshes. */
#include "scheduler/ql_submit.h"

#include <stdio.h>
#include <string.h>

int ql_submit_fn(ql_txn_t *txn, void *arg, ql_err_t *err) {
    ql_submit_op_t *op = arg;
    ql_model_t m;
    int rc = ql_model_get(txn, &op->model, 0, &m);
    if (rc == QL_ENOTFOUND)
        return ql_err_set(err, rc, "model not found");
    if (rc)
        return ql_err_set(err, rc, "cannot read the model: %s", ql_strerror(rc));
    static const char *const types[] = {"INC_BUILD", "INDEX_MERGE", "INDEX_REFRESH"};
    ql_job_steps_t steps;
    rc = ql_job_steps_from_template(op->templates, m.job_template, types[op->kind], &steps, err);
    ql_model_free(&m);
    if (rc)
        return rc;
    ql_job_spec_t spec = {
        .priority = op->priority,
        .submitter = op->submitter,
        .now = op->now,
        .fence = op->fence,
        .steps = steps.specs,
        .n_steps = steps.n,
    };
    switch (op->kind) {
    case QL_SUBMIT_BUILD:
        rc = ql_meta_submit_build(txn, &op->model, op->start, op->end, &spec, &op->job,
                                  &op->segment, err);
        break;
    case QL_SUBMIT_MERGE:
        rc = ql_meta_submit_merge(txn, &op->model, op->ids, op->n_ids, &spec, &op->job, err);
        break;
    case QL_SUBMIT_REFRESH:
        rc = op->n_ids == 1
                 ? ql_meta_submit_refresh(txn, &op->model, &op->ids[0], &spec, &op->job, err)
                 : ql_err_set(err, QL_EREFRESH, "a refresh names one segment");
        break;
    }
    ql_job_steps_free(&steps);
    return rc;
}

void ql_submit_project_timezone(const ql_project_t *p, const char *server_tz, char *buf,
                                size_t cap) {
    const char *z = p ? ql_strmap_get(&p->config, "kylin.web.timezone") : NULL;
    if (!z || !z[0])
        z = server_tz;
    if (!z || !z[0])
        z = "UTC";
    snprintf(buf, cap, "%s", z);
}

int ql_submit_normalize(const ql_project_t *p, const ql_model_t *m, const char *server_tz,
                        int64_t start, int64_t end, int64_t *ns, int64_t *ne, ql_err_t *err) {
    if (!m->partitioned) {
        *ns = start;
        *ne = end;
        return 0;
    }
    char zone[128];
    ql_submit_project_timezone(p, server_tz, zone, sizeof zone);
    ql_tz_t *tz;
    if (ql_tz_load(zone, &tz))
        return ql_err_set(err, QL_EINVAL, "kylin.web.timezone: '%s' is not a known time zone",
                          zone);
    ql_datefmt_t *fmt;
    int rc = ql_datefmt_open(m->partition_format, &fmt, err);
    if (rc) {
        ql_tz_free(tz);
        return rc;
    }
    rc = ql_normalize_range(tz, fmt, start, end, ns, ne);
    ql_datefmt_free(fmt);
    ql_tz_free(tz);
    if (rc == QL_EEMPTYRANGE)
        return ql_err_set(err, rc,
                          "the range [%lld, %lld) is empty after normalization with the partition "
                          "format '%s' (start must be earlier than end)",
                          (long long)start, (long long)end, m->partition_format);
    if (rc)
        return ql_err_set(err, rc, "cannot normalize [%lld, %lld) with the partition format '%s'",
                          (long long)start, (long long)end, m->partition_format);
    return 0;
}
