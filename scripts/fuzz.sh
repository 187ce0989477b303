#!/usr/bin/env bash
# Runs one libFuzzer harness longer than CI does and merges what it finds into the committed
# corpus, which is the one CI starts from (docs/fuzzing.md).
#
#   bash scripts/fuzz.sh NAME [SECONDS]   fuzz for SECONDS (default 300) on a scratch copy, then
#                                         add to tests/fuzz/corpus/NAME only the new inputs that
#                                         reach coverage the corpus (and its seeds) do not
#   bash scripts/fuzz.sh --minimise NAME  reduce the inputs fuzzing added (the files named by
#                                         their hash) to those that add coverage to the named
#                                         seeds; named files are kept as they are
#   bash scripts/fuzz.sh --seeds records  rewrite the records seeds from the encoders (after a
#                                         record gains a field)
#
# NAME is a harness of tests/fuzz: http, yaml, api, records, scenario. The options each runs
# with (-max_len, extra seed directories such as tests/scenarios) are read from its ctest in
# tests/fuzz/CMakeLists.txt, so they are written once. Builds build-fuzz (clang, -DQL_FUZZ=ON)
# first. A crash stops the script before anything is merged: the input that crashed is in
# build-fuzz/tests/fuzz/fuzz-artifacts/; reproduce it with build-fuzz/tests/fuzz/fuzz_NAME FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
    sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

mode=grow
case "${1:-}" in
--minimise) mode=minimise; shift ;;
--seeds) mode=seeds; shift ;;
-* | '') usage ;;
esac
name=${1:-}
seconds=${2:-300}
[ -n "$name" ] || usage
[[ "$seconds" =~ ^[0-9]+$ ]] || usage

CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DQL_FUZZ=ON > /dev/null
corpus=$root/tests/fuzz/corpus/$name

if [ "$mode" = seeds ]; then
    [ "$name" = records ] || { echo "only the records corpus has generated seeds" >&2; exit 2; }
    cmake --build build-fuzz -j2 --target fuzz_records_seeds > /dev/null
    rm -f "$corpus"/seed_*.msgpack
    build-fuzz/tests/fuzz/fuzz_records_seeds "$corpus"
    echo "wrote $(ls "$corpus"/seed_*.msgpack | wc -l) seeds into tests/fuzz/corpus/records"
    exit 0
fi

cmake --build build-fuzz -j2 --target "fuzz_$name" > /dev/null
# The ctest's command line: the binary, its options, then the build-tree corpus, the committed
# corpus and any seed directories.
cmd=$(cd build-fuzz && ctest -N -V -R "^fuzz_${name}\$" | sed -n 's/.*Test command: //p')
[ -n "$cmd" ] || { echo "no ctest fuzz_$name: is '$name' a harness of tests/fuzz?" >&2; exit 2; }
read -r -a words <<< "$cmd"
bin=${words[0]//\"/}
max_len=4096
dirs=()
for w in "${words[@]:1}"; do
    w=${w//\"/}
    case "$w" in
    -max_len=*) max_len=${w#-max_len=} ;;
    -*) ;;
    *) dirs+=("$w") ;;
    esac
done
seeds=("${dirs[@]:2}") # after the build-tree corpus and the committed one
artifacts=$root/build-fuzz/tests/fuzz/fuzz-artifacts
mkdir -p "$corpus" "$artifacts"
opts=(-timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -artifact_prefix="$artifacts/$name-")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# merge KEEP SRC: lists in $work/added the inputs of SRC (copied to $work/merged) that reach
# coverage which the files listed in KEEP (paths) and the extra seeds do not (libFuzzer's
# -merge=1 against them).
merge() {
    rm -rf "$work/merged" && mkdir "$work/merged"
    while read -r f; do cp "$f" "$work/merged"/; done < "$1"
    for s in "${seeds[@]}"; do cp "$s"/* "$work/merged"/; done
    ls "$work/merged" | sort > "$work/present"
    "$bin" "${opts[@]}" -merge=1 "$work/merged" "$2" > "$work/merge.log" 2>&1 ||
        { tail -20 "$work/merge.log"; exit 1; }
    ls "$work/merged" | sort | comm -13 "$work/present" - > "$work/added"
}
add_merged() {
    while read -r f; do cp "$work/merged/$f" "$corpus"/; done < "$work/added"
}

if [ "$mode" = minimise ]; then
    # Files with a name of their own (hand-written or generated seeds) stay as they are; the
    # ones libFuzzer named after their hash are reduced to those that add coverage to them.
    before=$(ls "$corpus" | wc -l)
    hashed=(-maxdepth 1 -type f -regextype posix-extended -regex '.*/[0-9a-f]{40}')
    mkdir "$work/hashed"
    find "$corpus" "${hashed[@]}" -exec cp {} "$work/hashed"/ \;
    find "$corpus" -maxdepth 1 -type f -regextype posix-extended -not -regex '.*/[0-9a-f]{40}' \
        > "$work/keep"
    merge "$work/keep" "$work/hashed"
    find "$corpus" "${hashed[@]}" -delete
    add_merged
    echo "tests/fuzz/corpus/$name: $before files before, $(ls "$corpus" | wc -l) after"
    exit 0
fi

# Fuzz on a scratch directory first (new inputs land there), reading the corpus and the seeds.
mkdir "$work/new"
log=$root/build-fuzz/tests/fuzz/fuzz-$name.log
if ! "$bin" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    "$work/new" "$corpus" "${seeds[@]}" > "$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz_$name failed (full output in $log); nothing merged" >&2
    exit 1
fi
grep -E '^#[0-9]+[[:space:]]+DONE|^Done|exec_per_sec|peak_rss' "$log"

# Merge: what the corpus and the seeds already reach counts as covered, so only the scratch
# inputs that reach more are kept, and the existing files keep their names.
find "$corpus" -maxdepth 1 -type f > "$work/keep"
merge "$work/keep" "$work/new"
add_merged
echo "tests/fuzz/corpus/$name: $(wc -l < "$work/added") new inputs, $(ls "$corpus" | wc -l) files"
