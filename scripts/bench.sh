#!/usr/bin/env bash
# Benchmarks (docs/performance.md). `scripts/bench.sh rest` (the default) runs the REST API
# benchmark: a store of 100,000 finished jobs (built with big direct transactions by
# qilind-bench-seed), a release qilind on loopback, and Debian's wrk as the load generator:
#   reads    GET /kylin/api/jobs?page_size=10 (Basic auth, the credentials cache)
#   writes   POST /kylin/api/models/sN/segments, every request its own one-second range, the
#            requests spread over WRITE_MODELS models (s0..s999 exist; 1 puts every build on
#            s0, where the job-conflict check meets every earlier build's live job)
# It prints req/s, p50 and p99 from wrk and the server's RSS (VmRSS/VmHWM) after each phase.
#
# Environment: JOBS (100000), DURATION (15s), THREADS (2), CONNS (32), WRITE_CONNS (64),
# WRITE_MODELS (1000, at most 1000), BUILD_DIR (build-bench), KEEP=1 keeps the data directory.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-rest}
JOBS=${JOBS:-100000}
DURATION=${DURATION:-15s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-32}
WRITE_CONNS=${WRITE_CONNS:-64}
WRITE_MODELS=${WRITE_MODELS:-1000}
BUILD_DIR=${BUILD_DIR:-build-bench}

install_wrk() {
    command -v wrk > /dev/null && return
    echo "bench: installing wrk" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >&2 ||
        { $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq wrk >&2; }
}

rss() { # VmRSS and VmHWM of a pid, in MiB
    awk '/^VmRSS/ {r=$2} /^VmHWM/ {h=$2} END {printf "rss %.1f MiB, peak %.1f MiB", r/1024, h/1024}' \
        "/proc/$1/status"
}

bench_rest() {
    install_wrk
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target qilind qilind-bench-seed qilin-exec > /dev/null


    dir=$(mktemp -d /tmp/qilin-bench-rest-XXXXXX)
    pid=""
    cleanup() {
        if [ -n "$pid" ]; then
            kill -TERM "$pid" 2> /dev/null || true
            wait "$pid" 2> /dev/null || true
        fi
        [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
    }
    trap cleanup EXIT

    # The seeded jobs use shell steps like conf/jobs.yaml's; the benchmark's new builds (models
    # s0..s999, set `bench`) wait an hour, and one job runs at a time, so the runs do not
    # compete with the submissions being measured: every new job stays READY.
    cat > "$dir/jobs.yaml" << 'YAML'
templates:
  INC_BUILD:
    steps:
      - name: Detect resource
        kind: shell
        argv: [/bin/sh, -c, 'printf "detect resource: %s %s\n" "$QILIN_PROJECT" "$QILIN_MODEL"']
      - name: Load data to index
        kind: shell
        argv: [/bin/sh, -c, 'printf "building %s [%s, %s)\n" "$QILIN_MODEL" "$QILIN_SEGMENT_START_FMT" "$QILIN_SEGMENT_END_FMT"']
      - name: Update metadata
        kind: noop
template_sets:
  bench:
    INC_BUILD:
      steps:
        - {name: wait, kind: sleep, duration: 1h}
YAML

    # Each wrk thread has its own Lua state: thread i submits its n-th build to model
    # s(n % WRITE_MODELS) with the range [2100-01-01 + (i*1e8 + n) s, +1 s), so no two requests
    # overlap. (The here-document expands only $WRITE_MODELS; the Lua has no other $.)
    cat > "$dir/submit.lua" << LUA
local n = 0
local created = 0
function setup(thread)
  thread:set("tid", created)
  created = created + 1
end
request = function()
  n = n + 1
  local start = 4102444800000 + (tid * 100000000 + n) * 1000
  local body = string.format('{"project":"bench","start":%d,"end":%d}', start, start + 1000)
  return wrk.format("POST", string.format("/kylin/api/models/s%d/segments", n % $WRITE_MODELS), nil, body)
end
LUA

    echo "== seeding $JOBS jobs"
    "$BUILD_DIR/tools/qilind-bench-seed" --data "$dir/data" --templates "$dir/jobs.yaml" --jobs "$JOBS"

    "$BUILD_DIR/tools/qilind" --data "$dir/data" \
        --set qilin.server.listen=127.0.0.1:0 --set "qilin.jobs.templates=$dir/jobs.yaml" \
        --set kylin.job.max-concurrent-jobs=1 --set qilin.log.level=warn \
        --set qilin.http.max-connections=4096 2> "$dir/qilind.log" &
    pid=$!
    local port=""
    for _ in $(seq 1 200); do
        port=$(sed -n 's/^qilind listening on http:\/\/[^ ]*:\([0-9]*\)$/\1/p' "$dir/qilind.log")
        [ -n "$port" ] && break
        kill -0 "$pid" 2> /dev/null || { cat "$dir/qilind.log" >&2; exit 1; }
        sleep 0.05
    done
    [ -n "$port" ] || { echo "qilind did not start" >&2; cat "$dir/qilind.log" >&2; exit 1; }
    local url="http://127.0.0.1:$port/kylin/api"
    # No users configured: ADMIN's password is the one qilind generated in the data directory.
    local up
    up="ADMIN:$(cat "$dir/data/admin.password")"
    local auth="Authorization: Basic $(printf '%s' "$up" | base64 -w0)"
    echo "== qilind pid $pid on port $port: $(rss "$pid")"
    curl -sf -u "$up" "$url/jobs?page_size=1" | head -c 300
    echo

    echo "== GET /kylin/api/jobs?page_size=10: wrk -t$THREADS -c$CONNS -d$DURATION"
    wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -H "$auth" "$url/jobs?page_size=10"
    echo "server after reads: $(rss "$pid")"

    echo "== POST /kylin/api/models/sN/segments: wrk -t$THREADS -c$WRITE_CONNS -d$DURATION"
    wrk -t"$THREADS" -c"$WRITE_CONNS" -d"$DURATION" --latency -s "$dir/submit.lua" \
        -H "$auth" -H "Content-Type: application/json" "$url/models/s0/segments"
    echo "server after writes: $(rss "$pid")"
    curl -sf -u "$up" "http://127.0.0.1:$port/metrics" |
        grep -E '^qilin_(writer_(commits|mutations)_total|writer_max_batch|auth_(verifications|cache_hits)_total|jobs\{state="READY"\}|store_used_bytes)'
}

case "$what" in
rest) bench_rest ;;
*)
    echo "usage: scripts/bench.sh [rest]" >&2
    exit 2
    ;;
esac
