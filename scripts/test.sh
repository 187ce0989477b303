#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, checks the
# formatting, builds and runs every test twice (a normal build, then AddressSanitizer +
# UndefinedBehaviorSanitizer with -fno-sanitize-recover=all), then runs every fuzzer for 40 s
# from its committed corpus (docs/fuzzing.md). Exits non-zero on the first failure.
#
#   bash scripts/test.sh            everything
#   QL_TEST_QUICK=1 bash scripts/test.sh   the normal build only (for a quick local check)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/setup.sh

jobs=$(nproc)
step() { printf '\n=== %s\n' "$*"; }
# Runs ctest in the build directory $1 (the other arguments go to ctest) with TMPDIR a fresh,
# empty $1/test-tmp and QL_TEST_RUN marking every process the suite starts, then fails, listing
# them, if the tests left any path there or any process running (docs/testing.md). The check
# runs after a failed ctest too: the leftovers of failing tests are the ones to see.
ctest_clean() {
    local dir=$1 rc=0
    shift
    local tmp=$root/$dir/test-tmp run="$$-$dir-$(date +%s)"
    rm -rf "$tmp" && mkdir -p "$tmp"
    (cd "$dir" && TMPDIR=$tmp QL_TEST_RUN=$run ctest "$@") || rc=$?
    bash scripts/check-leftovers.sh "$tmp" "$run" || rc=1
    return "$rc"
}

step "format (clang-format, see .clang-format)"
mapfile -t sources < <(git ls-files '*.c' '*.h' '*.cc' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
if ! clang-format --dry-run --Werror "${sources[@]}" 2> build-format.log; then
    head -40 build-format.log
    echo "formatting differs: run clang-format -i on the files above" >&2
    exit 1
fi
rm -f build-format.log

step "build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j"$jobs"

step "tests (normal build)"
ctest_clean build --output-on-failure -j"$jobs" --timeout 900

if [ "${QL_TEST_QUICK:-0}" = 1 ]; then
    exit 0
fi

step "build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DQL_SANITIZE=ON > /dev/null
cmake --build build-asan -j"$jobs"

step "tests (ASan + UBSan)"
# Every ASan/UBSan error aborts its test (Criterion counts an abort as a failure), and so does a
# leak: LeakSanitizer checks each test process at exit, and every program a test runs (qilind,
# qilin, node_driver, ...) inherits these options, so a leak in a server a test stops fails the
# test that checks its exit status. Criterion formats the message of a passing assertion too
# (--full-stats): a message argument that allocates leaks, so tests build such messages only
# when the assertion fails, or free them after it (tests/api/rest_util.h).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
# The one reviewed suppression: small allocations inside Debian's uninstrumented libzookeeper_mt
# (tests/lsan.supp says which and why).
export LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest_clean build-asan --output-on-failure -j"$jobs" --timeout 1800

step "fuzzers (libFuzzer, 40 s each, two at a time)"
# Each fuzzer is one process on one core, so two at a time on a 2-core runner take half the
# time (about 2 minutes for five) without slowing each other down. A crash fails its ctest with
# the fuzzer's report; the input is kept in build-fuzz/tests/fuzz/fuzz-artifacts/.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DQL_FUZZ=ON > /dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_http fuzz_yaml fuzz_api fuzz_records fuzz_scenario
(cd build-fuzz && ctest --output-on-failure -L '^fuzz$' -j2)

echo
echo "all tests passed ($root)"
