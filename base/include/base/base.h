/*
 * base: what every other library uses. The one header other libraries include.
 *
 *   ql_error.h     error codes (generated from ql_error_codes.def), ql_strerror, ql_err_t
 *   ql_log.h       the log: levels, one line per event
 *   ql_clock.h     real and virtual clocks, timers
 *   ql_time.h      time zones (CCTZ) and civil time
 *   ql_datefmt.h   Java-style partition date formats (ICU patterns on wall times)
 *   ql_yaml.h      YAML documents with line numbers (every loader's errors say file:line)
 *   ql_procinfo.h  a process's start time and the boot id (to tell a pid's reuse)
 *   ql_hex.h       the value of a hex digit
 *   ql_buf.h       growable byte buffers and arrays (the one doubling rule)
 */
#ifndef QL_BASE_H
#define QL_BASE_H

#include "base/ql_buf.h"
#include "base/ql_clock.h"
#include "base/ql_datefmt.h"
#include "base/ql_error.h"
#include "base/ql_hex.h"
#include "base/ql_log.h"
#include "base/ql_procinfo.h"
#include "base/ql_time.h"
#include "base/ql_yaml.h"

#endif
