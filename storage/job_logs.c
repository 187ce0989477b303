/* The step logs of a job on this host: <data directory>/logs/<job>/<step>.log, written by the
 * scheduler (docs/step-processes.md). */
#include "store_ops.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

int ql_store_remove_job_logs(ql_store_t *store, const ql_id_t *job) {
    char id[QL_ID_STR_LEN + 1], dir[PATH_MAX];
    ql_id_format(job, id);
    if (snprintf(dir, sizeof dir, "%s/logs/%s", store->path, id) >= (int)sizeof dir)
        return UV_ENAMETOOLONG;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : uv_translate_sys_error(errno);
    int rc = 0;
    int fd = dirfd(d);
    /* A job has at most QL_JOB_STEPS_MAX logs; the bound also ends a directory that keeps
     * refilling. */
    for (int i = 0; i < 4 * QL_JOB_STEPS_MAX; i++) {
        struct dirent *e = readdir(d);
        if (!e)
            break;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(fd, e->d_name, 0) != 0 && errno != ENOENT && !rc)
            rc = uv_translate_sys_error(errno);
    }
    closedir(d);
    if (rmdir(dir) != 0 && errno != ENOENT && !rc)
        rc = uv_translate_sys_error(errno);
    return rc;
}
