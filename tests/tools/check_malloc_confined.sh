#!/usr/bin/env bash
# The allocation counter of qilin-bench-dispatch replaces malloc, calloc, realloc and free for
# its whole process (tools/bench_dispatch_main.c). This check keeps that replacement confined to
# that one binary: no library and no other program of the build may define those symbols, so
# nothing links against the counter by accident.
#   check_malloc_confined.sh BUILD_DIR
set -euo pipefail
build=$1
bad=0
defines_malloc() { nm --defined-only "$1" 2>/dev/null | grep -E ' [TW] (malloc|calloc|realloc|free)$' >/dev/null; }
while IFS= read -r f; do
    case $(basename "$f") in qilin-bench-dispatch) continue ;; esac
    if defines_malloc "$f"; then
        echo "$f defines an allocator function (only qilin-bench-dispatch may)" >&2
        bad=1
    fi
done < <(find "$build" -path "$build/test-tmp" -prune -o -type f \( -name '*.a' -o -perm -u+x \) \
             -print | grep -v -e '/CMakeFiles/' -e '\.sh$')
exe=$build/tools/qilin-bench-dispatch
if [ ! -x "$exe" ]; then
    echo "$exe is not built" >&2
    exit 1
fi
# Under AddressSanitizer the counter is compiled out (ASan owns the allocator).
if ! nm "$exe" | grep __asan_init >/dev/null && ! defines_malloc "$exe"; then
    echo "$exe no longer defines malloc: its allocation count would read n/a" >&2
    bad=1
fi
exit $bad
