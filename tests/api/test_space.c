/*
 * The disk-space rule and its log lines (server/node_space.c; docs/user-guide.md, Deleting old
 * jobs): a file system is nearly full under 1 GiB or 5% free, and a server logs the warning once
 * when a measure passes a threshold and a note once when it is back under. The map-size warning
 * is tested end to end in test_lifecycle.c; a nearly full disk cannot be made in a test, so its
 * rule and its lines are tested here on measures built by hand.
 */
#include "server/ql_node.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1ull << 30)

Test(space, under_one_gib_free_is_nearly_full_on_any_disk) {
    cr_assert(ql_node_disk_nearly_full(GIB - 1, 10 * GIB));
    cr_assert(ql_node_disk_nearly_full(0, 0));
    cr_assert_not(ql_node_disk_nearly_full(GIB, 10 * GIB));
}

Test(space, under_five_percent_free_is_nearly_full_on_a_big_disk) {
    uint64_t total = 1000 * GIB;
    cr_assert(ql_node_disk_nearly_full(49 * GIB, total));
    cr_assert_not(ql_node_disk_nearly_full(50 * GIB, total));
}

typedef struct lines {
    int n;
    char text[4][512];
    ql_log_level_t level[4];
} lines_t;

static void sink(void *arg, ql_log_level_t level, const char *line) {
    lines_t *l = arg;
    if (l->n < 4) {
        l->level[l->n] = level;
        snprintf(l->text[l->n++], sizeof l->text[0], "%s", line);
    }
}

Test(space, the_disk_warning_is_logged_once_when_passed_and_once_when_back) {
    lines_t got = {0};
    ql_log_t log;
    ql_log_init(&log, QL_LOG_INFO);
    log.sink = sink;
    log.sink_arg = &got;
    ql_node_space_t ok = {.disk_free = 20 * GIB, .disk_total = 100 * GIB};
    ql_node_space_t full = {.disk_free = GIB / 2, .disk_total = 100 * GIB, .disk_warning = true};
    ql_node_space_log(&log, "/data", &ok, &ok);
    cr_assert_eq(got.n, 0, "nothing changed, nothing said");
    ql_node_space_log(&log, "/data", &ok, &full);
    cr_assert_eq(got.n, 1);
    cr_assert_eq(got.level[0], QL_LOG_WARN);
    cr_assert(strstr(got.text[0], "nearly full path=/data free=536870912"), "%s", got.text[0]);
    ql_node_space_log(&log, "/data", &full, &full);
    cr_assert_eq(got.n, 1, "a warning is said once, not at every measure");
    ql_node_space_log(&log, "/data", &full, &ok);
    cr_assert_eq(got.n, 2);
    cr_assert_eq(got.level[1], QL_LOG_INFO);
    cr_assert(strstr(got.text[1], "has room again"), "%s", got.text[1]);
}
