/*
 * storage: Qilin's metadata store and metadata rules. The one header other libraries include.
 *
 *   ql_error.h    error codes, ql_strerror, ql_err_t
 *   ql_records.h  project, model, segment, job and step records and their msgpack encoding
 *   ql_store.h    the LMDB store: transactions, records, indexes, fsck
 *   ql_writer.h   the writer thread: group commit of queued mutations
 *   ql_meta.h     metadata rules: validation, range math, overlap checks, build submission
 *   ql_time.h     time zones (CCTZ) and civil time
 *   ql_datefmt.h  Java-style partition date formats (ICU patterns on wall times)
 *   ql_hex.h      the value of a hex digit
 */
#ifndef QL_STORAGE_H
#define QL_STORAGE_H

#include "storage/ql_datefmt.h"
#include "storage/ql_error.h"
#include "storage/ql_hex.h"
#include "storage/ql_log.h"
#include "storage/ql_meta.h"
#include "storage/ql_records.h"
#include "storage/ql_store.h"
#include "storage/ql_time.h"
#include "storage/ql_writer.h"

#endif
