#include "tests/common/mem_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

size_t ql_test_mapped_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

void ql_test_cap_address_space(size_t headroom) {
    struct rlimit capped;
    cr_assert_eq(getrlimit(RLIMIT_AS, &capped), 0);
    capped.rlim_cur = ql_test_mapped_bytes() + headroom;
    cr_assert_eq(setrlimit(RLIMIT_AS, &capped), 0);
}
