/*
 * engine: jobs and steps (state machine, actions), YAML job templates and step processes. The
 * one header other libraries include.
 *
 *   ql_template.h  job templates, step definitions, parameter substitution, ad-hoc jobs
 *   ql_proc.h      a step's child process (own process group, capped output, stop sequence)
 *   ql_jobs.h      job/step transitions, actions, recovery, the writes that move jobs
 *   ql_step_host.h which host a step's recorded processes and log belong to
 */
#ifndef QL_ENGINE_H
#define QL_ENGINE_H

#include "engine/ql_jobs.h"
#include "engine/ql_proc.h"
#include "engine/ql_step_host.h"
#include "engine/ql_template.h"
#include "storage/storage.h"

#endif
