/* How full the store and its disk are (see ql_node_space in ql_node.h). */
#include "node_int.h"

#include <string.h>
#include <sys/statvfs.h>

bool ql_node_disk_nearly_full(uint64_t free, uint64_t total) {
    return free < QL_SPACE_DISK_MIN_FREE || (double)free < QL_SPACE_DISK_WARN * (double)total;
}

int ql_node_space_measure(ql_store_t *store, ql_node_space_t *out) {
    memset(out, 0, sizeof *out);
    ql_store_stat_t st;
    int rc = ql_store_stat(store, &st);
    if (rc)
        return rc;
    out->used_bytes = st.used_bytes;
    out->map_size = st.map_size;
    if (st.map_size)
        out->map_ratio = (double)st.used_bytes / (double)st.map_size;
    out->map_warning = out->map_ratio > QL_SPACE_MAP_WARN;
    struct statvfs vfs;
    if (statvfs(ql_store_path(store), &vfs) == 0) {
        out->disk_total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
        out->disk_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        out->disk_warning = ql_node_disk_nearly_full(out->disk_free, out->disk_total);
    }
    return 0;
}

void ql_node_space_log(ql_log_t *log, const char *path, const ql_node_space_t *was,
                       const ql_node_space_t *now) {
    if (now->map_warning && !was->map_warning)
        ql_log(log, QL_LOG_WARN, "node",
               "the store passed %.0f%% of qilin.storage.map-size used=%llu map_size=%llu "
               "ratio=%.3f: raise qilin.storage.map-size, lower "
               "kylin.garbage.storage.executable-survival-time-threshold, or delete old jobs; "
               "writes fail once it is full",
               QL_SPACE_MAP_WARN * 100, (unsigned long long)now->used_bytes,
               (unsigned long long)now->map_size, now->map_ratio);
    else if (!now->map_warning && was->map_warning)
        ql_log(log, QL_LOG_INFO, "node",
               "the store is back under %.0f%% of qilin.storage.map-size "
               "ratio=%.3f",
               QL_SPACE_MAP_WARN * 100, now->map_ratio);
    if (now->disk_warning && !was->disk_warning)
        ql_log(log, QL_LOG_WARN, "node",
               "the disk of the data directory is nearly full path=%s free=%llu total=%llu: "
               "free space before writes fail",
               path, (unsigned long long)now->disk_free, (unsigned long long)now->disk_total);
    else if (!now->disk_warning && was->disk_warning)
        ql_log(log, QL_LOG_INFO, "node",
               "the disk of the data directory has room again path=%s "
               "free=%llu",
               path, (unsigned long long)now->disk_free);
}
