/* The server's configuration mapped to the scheduler's and the dispatcher's options: see
 * ql_node_engine_opts in ql_node.h. */
#include "server/ql_node.h"

void ql_node_engine_opts(const ql_config_t *cfg, ql_sched_opts_t *sched,
                         ql_dispatcher_opts_t *disp) {
    const char *tz = ql_config_get_str(cfg, "kylin.web.timezone");
    if (sched) {
        sched->max_concurrent_jobs = (int)ql_config_get_int(cfg, "kylin.job.max-concurrent-jobs");
        sched->poll_interval_ms =
            ql_config_get_int(cfg, "kylin.job.scheduler.poll-interval-second") * 1000;
        sched->retry = (int)ql_config_get_int(cfg, "kylin.job.retry");
        sched->retry_interval_ms = ql_config_get_ms(cfg, "kylin.job.retry-interval");
        sched->output_max = (size_t)ql_config_get_size(cfg, "kylin.job.execute-output.max-size");
        sched->kill_grace_ms = ql_config_get_ms(cfg, "qilin.step.kill-grace-ms");
        sched->default_timezone = tz;
        ql_config_server_id(cfg, sched->server_id, sizeof sched->server_id);
        ql_config_api_address(cfg, sched->server_addr, sizeof sched->server_addr);
        sched->takeover_grace_ms = ql_config_get_ms(cfg, "qilin.cluster.takeover-grace-ms");
    }
    if (disp) {
        disp->interval_ms =
            ql_config_get_ms(cfg, "kylin.model.auto-segment-build.dispatcher-interval-ms");
        disp->server_timezone = tz;
    }
}
