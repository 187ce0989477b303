/*
 * Which host a step's recorded processes belong to (docs/step-processes.md, Several hosts).
 *
 * A step's try records, in the transaction that marks it RUNNING, the server that runs it
 * (qilin.server.id, with that server's API address) and the machine's boot id, next to its
 * marker; the process group and its leader's start time follow after the spawn. A process
 * group number, a marker's sweep over /proc and a log file mean something only on the host
 * that ran the try: on a store that servers on several hosts share (ql_store_spans_hosts), a
 * server kills, sweeps and serves the log of only the tries it ran itself, in this boot. A try
 * another server ran is left to its own host: PR_SET_PDEATHSIG kills it if that host's server
 * died, its server stops it when it loses the job engine lock, and a new master waits the
 * takeover grace (qilin.cluster.takeover-grace-ms) before it starts the step again.
 *
 * On a store of one host (LMDB) every try is this host's whoever ran it, and so is a try
 * recorded by a build that did not record its server: both are judged as before this rule,
 * by the leader identity of their group (ql_proc_kill_group_checked) and their marker.
 *
 * Pure and thread-safe: nothing is read but the arguments.
 */
#ifndef QL_STEP_HOST_H
#define QL_STEP_HOST_H

#include "storage/ql_records.h"

#include <stdbool.h>

/* Who "this host" is: all borrowed, for the duration of the call. */
typedef struct ql_step_host {
    const char *server_id; /* this server's qilin.server.id (ql_config_server_id) */
    const char *boot_id;   /* this machine's boot id (ql_proc_boot_id), "" when unknown */
    bool spans_hosts;      /* the store is shared with other hosts (ql_store_spans_hosts) */
} ql_step_host_t;

typedef enum ql_step_place {
    /* This server's try in this boot, a try on a store of one host, or a record without a
     * server: its group and marker are killed and swept as they always were. */
    QL_STEP_PLACE_HERE = 0,
    /* Another server's try: left to its own host. */
    QL_STEP_PLACE_ELSEWHERE,
    /* This server's try in an earlier boot: its processes died with the machine. */
    QL_STEP_PLACE_EARLIER_BOOT,
} ql_step_place_t;

/* Where step st's recorded try ran, seen from self. */
ql_step_place_t ql_step_place(const ql_step_t *st, const ql_step_host_t *self);

/* Whether step st's full log (the file of its latest try) is on another host than self's:
 * the store spans hosts and the step records another server. A step without a recorded server
 * is taken to be local (its log, if any, is in this data directory). */
bool ql_step_log_elsewhere(const ql_step_t *st, const ql_step_host_t *self);

/* "here", "left to its own host", "this server's try of an earlier boot: its processes died
 * with the machine" (static). */
const char *ql_step_place_name(ql_step_place_t p);

#endif
