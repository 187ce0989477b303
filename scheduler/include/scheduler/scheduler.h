/*
 * scheduler: what runs jobs and decides builds. The one header other libraries include.
 *
 *   ql_sched.h          the fetcher and the runner pool: picks READY jobs, runs their steps
 *   ql_dispatch.h       the dispatcher: submits each model's due incremental build
 *   ql_dispatch_time.h  the dispatcher's calendar: trigger times and target ranges
 *   ql_submit.h         the one write that submits a build, merge, refresh or ad-hoc job
 *   ql_lock.h           the job engine lock and its fencing epoch
 *   ql_retention.h      the master deletes final jobs past their survival time
 *   ql_zk.h             the ZooKeeper session and its recipes (locks, election, fence_id)
 */
#ifndef QL_SCHEDULER_H
#define QL_SCHEDULER_H

#include "scheduler/ql_dispatch.h"
#include "scheduler/ql_dispatch_time.h"
#include "scheduler/ql_lock.h"
#include "scheduler/ql_retention.h"
#include "scheduler/ql_sched.h"
#include "scheduler/ql_submit.h"
#include "scheduler/ql_zk.h"

#endif
