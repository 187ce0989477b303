#!/usr/bin/env bash
# Checks that a test run left nothing behind (docs/testing.md): nothing in the run's temporary
# directory, no process still running that carries the run's marker in its environment, and no
# test making temporary files its own way (those ignore TMPDIR, so the first check misses them).
#
#   bash scripts/check-leftovers.sh TMPDIR RUN_ID
#
# TMPDIR is the directory the run had as $TMPDIR (made empty before it); RUN_ID the value of
# QL_TEST_RUN the run had (every process the suite started inherits it). Prints each leftover
# path and process and exits 1 when there is any; the processes found are killed (SIGKILL) after
# they are listed, so that a failed check does not leave them running. The files stay for a
# look; the next run empties the directory first.
set -uo pipefail
if [ $# -ne 2 ] || [ -z "$1" ] || [ -z "$2" ]; then
    echo "usage: $0 TMPDIR RUN_ID" >&2
    exit 2
fi
tmp=$1
run=$2
failed=0

mapfile -t paths < <(find "$tmp" -mindepth 1 -maxdepth 1 2>/dev/null | sort)
if [ "${#paths[@]}" -gt 0 ]; then
    failed=1
    echo "the tests left ${#paths[@]} path(s) in $tmp (each test must remove what it makes;" \
        "use ql_test_tmpdir from tests/common/tmp_util.h):" >&2
    for p in "${paths[@]}"; do
        echo "  $p ($(find "$p" 2>/dev/null | wc -l) entries)" >&2
    done
fi

# A test that calls mkdtemp itself usually names /tmp and is invisible to the first check.
root=$(cd "$(dirname "$0")/.." && pwd)
mapfile -t raw < <(cd "$root" && grep -rnE '\b(mkdtemp|mkstemps?|tmpfile|tmpnam)\(' tests \
    --include='*.c' --include='*.h' | grep -v '^tests/common/tmp_util\.c:')
if [ "${#raw[@]}" -gt 0 ]; then
    failed=1
    echo "these tests make temporary files themselves; use ql_test_tmpdir" \
        "(tests/common/tmp_util.h), which honours TMPDIR and removes them:" >&2
    printf '  %s\n' "${raw[@]}" >&2
fi

# /proc/<pid>/environ is the environment a process started with: the marker stays even if it
# changed its own. This script itself does not carry it (test.sh sets it for ctest only).
procs=()
for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [ "$pid" = $$ ] && continue
    if grep -qzxF "QL_TEST_RUN=$run" "$env" 2>/dev/null; then
        state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$pid/stat" 2>/dev/null)
        [ -z "$state" ] || [ "$state" = Z ] && continue
        procs+=("$pid")
    fi
done
if [ "${#procs[@]}" -gt 0 ]; then
    failed=1
    echo "the tests left ${#procs[@]} process(es) running (each test must stop what it starts):" >&2
    for pid in "${procs[@]}"; do
        cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)
        echo "  pid $pid: ${cmd:-?}" >&2
    done
    kill -KILL "${procs[@]}" 2>/dev/null || true
fi

if [ "$failed" = 0 ]; then
    echo "no leftovers: $tmp is empty and no process of run $run is running"
fi
exit "$failed"
