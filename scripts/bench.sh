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
#
# `PG_URL=... scripts/bench.sh pg-floor` runs pgbench on a PostgreSQL database with the jobs of
# the peers' workload written as plain SQL in Qilin's tables: the least those records cost
# PostgreSQL (see bench_pg_floor; FLOOR_BATCHES, FLOOR_CLIENTS and DURATION adjust it).
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

# The rows of one job of the peers' workload, as pgbench script lines for job number $1: the
# submission (the model's advisory lock, the overlap probe of segments and live jobs, the NEW
# segment, the READY job, its step), the pick (job and step RUNNING) and the end (step, job
# SUCCEED, segment READY), with records of the sizes Qilin writes (job 327 bytes, segment 165,
# step 220). The range [r, r + 1) is random in 2^62, so no two jobs overlap.
floor_submit() {
    local m=":m$1" r="CAST(:r$1 AS bigint)" mid="md5('m' || :m$1)::uuid"
    echo "SELECT pg_advisory_xact_lock(CAST($m AS int));"
    echo "SELECT 's', id FROM segments WHERE model = $mid AND int8range(start_ms, end_ms) && int8range($r, $r + 1) UNION ALL SELECT 'j', id FROM jobs WHERE model = $mid AND state IN (0, 1, 2, 3, 4) AND has_range AND int8range(range_start, range_end) && int8range($r, $r + 1);"
    echo "INSERT INTO segments VALUES (md5('s' || $r)::uuid, $mid, $r, $r + 1, 0, decode(repeat('ab', 165), 'hex'));"
    echo "INSERT INTO jobs VALUES (md5('j' || $r)::uuid, 'p', $mid, 0, 3, $r, $r, true, $r, $r + 1, 0, decode(repeat('ab', 327), 'hex'));"
    echo "INSERT INTO steps VALUES (md5('j' || $r)::uuid, 0, decode(repeat('ab', 220), 'hex'));"
}
floor_pick() {
    local r="CAST(:r$1 AS bigint)"
    echo "UPDATE jobs SET state = 2, modify_time = $r + 1, rec = decode(repeat('cd', 327), 'hex') WHERE id = md5('j' || $r)::uuid;"
    echo "UPDATE steps SET rec = decode(repeat('cd', 220), 'hex') WHERE job = md5('j' || $r)::uuid AND seq = 0;"
}
floor_end() {
    local r="CAST(:r$1 AS bigint)"
    echo "UPDATE steps SET rec = decode(repeat('ef', 220), 'hex') WHERE job = md5('j' || $r)::uuid AND seq = 0;"
    echo "UPDATE jobs SET state = 6, modify_time = $r + 2, rec = decode(repeat('ef', 327), 'hex') WHERE id = md5('j' || $r)::uuid;"
    echo "UPDATE segments SET status = 1, rec = decode(repeat('ef', 165), 'hex') WHERE id = md5('s' || $r)::uuid;"
}

# A pgbench script of B jobs ($1, at most 100) whose three transactions each carry all B; $2 =
# pipe sends each transaction in one round trip. A batch's jobs take ascending models (a fixed
# lock order, as the writer's), so batches never deadlock.
floor_script() {
    local b=$1 i part
    for ((i = 0; i < b; i++)); do
        echo "\\set m$i random($((i * 100 / b + 1)), $(((i + 1) * 100 / b)))"
        echo "\\set r$i random(1, 4611686018427387903)"
    done
    for part in floor_submit floor_pick floor_end; do
        if [ "$2" = pipe ]; then echo '\startpipeline'; fi
        echo "BEGIN;"
        for ((i = 0; i < b; i++)); do "$part" "$i"; done
        echo "COMMIT;"
        if [ "$2" = pipe ]; then echo '\endpipeline'; fi
    done
}

# The least a job of the peers' workload costs PostgreSQL when its records are Qilin's (the
# tables of `qilin store init`, with their indexes and the live-job exclusion constraint), with
# nothing else: no HTTP, no search for READY jobs, no reads before a write, no fence, no step
# run; pgbench is the only client. PG_URL names the database (the schema qilin_floor is made
# again in it); FLOOR_CLIENTS and FLOOR_BATCHES list what to try.
bench_pg_floor() {
    [ -n "${PG_URL:-}" ] || { echo "bench: pg-floor needs PG_URL (a database it may write)" >&2; exit 2; }
    command -v pgbench > /dev/null || { echo "bench: pgbench (postgresql-client) is missing" >&2; exit 2; }
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release > /dev/null
    cmake --build "$BUILD_DIR" -j2 --target qilin > /dev/null
    local dir
    dir=$(mktemp -d)
    trap "rm -rf '$dir'" EXIT
    export PGOPTIONS="-c search_path=qilin_floor,public -c client_min_messages=warning"
    local clients batch mode tps
    for batch in ${FLOOR_BATCHES:-1 8 64}; do
        for mode in plain pipe; do
            [ "$batch" -gt 1 ] && [ "$mode" = plain ] && continue
            floor_script "$batch" "$mode" > "$dir/job.sql"
            for clients in ${FLOOR_CLIENTS:-2 4 16}; do
                psql -q "$PG_URL" -c "DROP SCHEMA IF EXISTS qilin_floor CASCADE"
                "$BUILD_DIR/tools/qilin" store init --url "$PG_URL" --schema qilin_floor > /dev/null
                psql -q "$PG_URL" -c "INSERT INTO projects VALUES ('p', decode(repeat('ab', 80), 'hex'));
                    INSERT INTO models SELECT md5('m' || k)::uuid, 'p', 'm' || k,
                        decode(repeat('ab', 200), 'hex') FROM generate_series(1, 100) k; CHECKPOINT"
                tps=$(pgbench -n -M prepared -c "$clients" -j 2 -T "${DURATION%s}" -f "$dir/job.sql" "$PG_URL" 2>&1 |
                    sed -n 's/^tps = \([0-9.]*\).*/\1/p')
                printf 'jobs a transaction %3d  %-5s  sessions %3d  jobs/s %8.0f\n' "$batch" "$mode" "$clients" \
                    "$(awk -v t="${tps:-0}" -v b="$batch" 'BEGIN { print t * b }')"
            done
        done
    done
}

case "$what" in
rest) bench_rest ;;
pg-floor) bench_pg_floor ;;
*)
    echo "usage: scripts/bench.sh [rest|pg-floor]" >&2
    exit 2
    ;;
esac
