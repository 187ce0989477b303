/* Helpers for tests that drive a real libuv loop and real processes. */
#include "tests/common/loop_util.h"

#include "base/ql_procinfo.h"

#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ql_test_mono_ms(void) {
    return (int64_t)(uv_hrtime() / 1000000);
}

void ql_test_tick_cb(uv_timer_t *t) {
    (void)t;
}

bool ql_test_drive_until(uv_loop_t *loop, ql_test_cond_fn cond, const void *arg, int64_t ms) {
    int64_t end = ql_test_mono_ms() + ms;
    while (!cond(arg)) {
        if (ql_test_mono_ms() >= end)
            return false;
        uv_run(loop, UV_RUN_ONCE);
    }
    return true;
}

void ql_test_drive_for(uv_loop_t *loop, int64_t ms) {
    int64_t end = ql_test_mono_ms() + ms;
    while (ql_test_mono_ms() < end)
        uv_run(loop, UV_RUN_ONCE);
}

bool ql_test_proc_stat(long pid, char *state, long *ppid, long *pgrp) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return p && sscanf(p + 1, " %c %ld %ld", state, ppid, pgrp) == 3;
}

bool ql_test_group_gone(int pgid) {
    return !ql_proc_group_running(pgid);
}

bool ql_test_cond_group_gone(const void *arg) {
    return ql_test_group_gone(*(const int *)arg);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void ql_test_rm_tree(const char *dir) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void ql_test_write_with_dir(const char *path, const char *text, const char *dir) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    for (const char *p = text; *p; p++) {
        if (strncmp(p, "@DIR@", 5) == 0) {
            fputs(dir, f);
            p += 4;
        } else {
            fputc(*p, f);
        }
    }
    cr_assert_eq(fclose(f), 0, "cannot write %s", path);
}

bool ql_test_file_has_line(const char *path, const char *const *needles) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        found = true;
        for (size_t i = 0; needles[i]; i++)
            found = found && strstr(line, needles[i]);
    }
    fclose(f);
    return found;
}
