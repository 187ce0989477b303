#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, starts qilind on the embedded
# store (./demo-data) and sets up a demo whose automatic segment build triggers within a minute.
# The server stays in the foreground with its log; Ctrl-C stops it (gracefully).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j"$(nproc)" --target qilind qilin qilin-exec

port=${QILIN_DEMO_PORT:-7070}
server=http://127.0.0.1:$port
log=$(mktemp)
./build/tools/qilind --config conf/demo.yaml --set "qilin.server.listen=127.0.0.1:$port" \
    2> >(tee "$log" >&2) &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT INT TERM

for _ in $(seq 1 100); do
    grep -q 'listening on' "$log" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || { echo "qilind did not start (see its log above)" >&2; exit 1; }
    sleep 0.1
done

export QILIN_SERVER=$server
# No users are configured, so qilind generated ADMIN's password into the data directory
# (conf/demo.yaml: the repository's demo-data/), readable by this user only; the CLI reads it
# from there.
pwfile=demo-data/admin.password
export QILIN_PASSWORD_FILE=$pwfile
qilin=./build/tools/qilin
# Idempotent set-up: a second run finds the project and model already there.
$qilin project create demo --description "Qilin demo" > /dev/null 2>&1 || true
$qilin model create --project demo orders --partition-column DT --partition-format yyyy-MM-dd \
    > /dev/null 2>&1 || true
$qilin project auto-build demo on > /dev/null
# Trigger one minute from now (UTC): the first scan builds the latest due cycle at once, and a
# minute later the new day's cycle is due.
trigger=$(date -u -d '+1 minute' +%H:%M:%S)
$qilin model auto-build --project demo orders --trigger "$trigger" --offset 1 \
    --start 00:00:00 --end 24:00:00 > /dev/null

cat <<MSG

Qilin demo is running at $server (user ADMIN; its password was generated into
$pwfile, which only you can read).
Project 'demo', model 'orders': automatic daily builds triggered at $trigger UTC.
Watch it from another terminal, in this directory:
  export QILIN_PASSWORD_FILE=$pwfile
  ./build/tools/qilin job list --project demo
  ./build/tools/qilin segment list --project demo --model orders
  ./build/tools/qilin auto-build status --project demo orders
  curl -s -u "ADMIN:\$(cat $pwfile)" '$server/kylin/api/jobs?project=demo'
A segment goes NEW -> READY within seconds; Ctrl-C stops the server.

The web console:  $server/ui   (the demo's model: $server/ui/projects/demo/models/orders)
  log in as ADMIN with the password in $pwfile:  cat $pwfile

MSG
wait $pid
