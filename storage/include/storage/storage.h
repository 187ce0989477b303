/*
 * storage: Qilin's metadata store and metadata rules. The one header other libraries include.
 *
 *   ql_records.h  project, model, segment, job and step records and their msgpack encoding
 *   ql_store.h    the store: transactions, records, indexes, fsck
 *   ql_writer.h   the writer thread: group commit of queued mutations
 *   ql_meta.h     metadata rules: validation, range math, overlap checks, build submission
 */
#ifndef QL_STORAGE_H
#define QL_STORAGE_H

#include "base/base.h"
#include "storage/ql_meta.h"
#include "storage/ql_records.h"
#include "storage/ql_store.h"
#include "storage/ql_writer.h"

#endif
