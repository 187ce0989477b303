/* Helpers for tests that run a ql_node in the test's own process on a real loop. */
#ifndef QL_TEST_NODE_UTIL_H
#define QL_TEST_NODE_UTIL_H

#include "server/ql_node.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* A new server configuration for tests: store at data (on the backend under test,
 * ql_test_store_settings), templates file, a 1 GiB map, then each
 * "key=value" of settings (NULL-terminated, may be NULL) in order; asserts each is accepted. */
ql_config_t *ql_test_node_config(const char *data, const char *templates,
                                 const char *const *settings);

/* Submits an INC_BUILD of [start, end) of model through node's submission service (the one
 * submission path, submitter ADMIN, created at now; the range normalized with the model's
 * format), drives loop until it is acknowledged and asserts it was accepted (within
 * deadline_ms); the service has kicked the node's fetcher by then. Returns the job's id. */
ql_id_t ql_test_node_build(uv_loop_t *loop, ql_node_t *node, const ql_id_t *model, int64_t start,
                           int64_t end, int64_t now, int64_t deadline_ms);
/* Reads through node's store, each in a read transaction of its own; each asserts the record
 * is there. The job and step returned are the caller's to free (ql_job_free, ql_step_free). */
ql_job_t ql_test_node_job(ql_node_t *node, const ql_id_t *id);
ql_step_t ql_test_node_step(ql_node_t *node, const ql_id_t *id, uint32_t seq);
/* Whether node's store has model name in project; when it has, *id (unless NULL) gets its id.
 * Any read error counts as absent. */
bool ql_test_node_find_model(ql_node_t *node, const char *project, const char *name, ql_id_t *id);
/* The job engine lock's fencing epoch as stored (job_engine_epoch). */
uint64_t ql_test_node_epoch(ql_node_t *node);
/* Drives loop until step seq of job runs with a recorded process group (within deadline_ms);
 * returns that pgid, or 0 when the deadline passed (the caller asserts, saying what it
 * waited for). */
int ql_test_node_wait_pgid(uv_loop_t *loop, ql_node_t *node, const ql_id_t *job, uint32_t seq,
                           int64_t deadline_ms);
/* Asserts that the first step of job printed "ppid=<pid>": a step whose template echoes
 * $PPID ran on the server with that pid. */
void ql_test_node_assert_ran_on(ql_node_t *node, const ql_id_t *job, long pid);

/* Stops node and drives loop until it has stopped (asserted within deadline_ms). */
void ql_test_node_stop(uv_loop_t *loop, ql_node_t *node, int64_t deadline_ms);

/* Job templates (with @DIR@ for ql_test_write_with_dir) for the lock and pause tests: INC_BUILD
 * prints the pid of the server that runs it (the step's parent, ppid=N); a model with
 * job_template `marker` sleeps 30 s on its first try and succeeds on later ones. */
extern const char ql_test_ppid_templates[];

#endif
