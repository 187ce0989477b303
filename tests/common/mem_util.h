/* Address-space helpers for tests that must show a decoder asks for no large allocation. */
#ifndef QL_TEST_MEM_UTIL_H
#define QL_TEST_MEM_UTIL_H

#include <stddef.h>

/* The address space this process maps now, in bytes (/proc/self/statm's first field). */
size_t ql_test_mapped_bytes(void);

/* Caps RLIMIT_AS at what the process maps now plus headroom bytes, so an allocation sized by a
 * corrupt count fails with ENOMEM where the system would otherwise hand out untouched virtual
 * memory and hide it. The cap lasts for the rest of the (per-test) process. */
void ql_test_cap_address_space(size_t headroom);

#endif
