#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then the installed qilind, started from / with the
# installed configuration (only the data directory moved to a temporary path), serves the demo:
# the API answers with the generated ADMIN password, and a segment build through the installed
# CLI runs to FINISHED, its shell steps started through the installed qilin-exec (PATH holds
# no build folder), and an online mdb_copy of its store passes fsck. Also checks what else the install put in place (docs/user-guide.md,
# Installing).
#   install_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-test-XXXXXX")
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "install_test: $*" >&2
    [ -f "$tmp/qilind.log" ] && sed 's/^/  qilind: /' "$tmp/qilind.log" >&2
    exit 1
}

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || fail "cmake --install failed"
for f in bin/qilind bin/qilin bin/qilin-exec; do
    [ -x "$prefix/$f" ] || fail "$f is not installed"
done
conf=$prefix/etc/qilin/qilin.yaml
[ -f "$conf" ] && [ -f "$prefix/etc/qilin/jobs.yaml" ] || fail "etc/qilin is incomplete"
grep -qx 'qilin.storage.path: /var/lib/qilin' "$conf" || fail "installed data directory"
unit=$prefix/lib/systemd/system/qilind.service
[ -f "$unit" ] || fail "no systemd unit"
grep -qx 'User=qilin' "$unit" || fail "the unit does not run as qilin"
grep -qE '^ExecStart=/.*/qilind --config /.*/qilin/qilin\.yaml$' "$unit" || fail "ExecStart"
grep -qx 'StateDirectory=qilin' "$unit" || fail "StateDirectory"
grep -q '^u qilin ' "$prefix/lib/sysusers.d/qilin.conf" || fail "no sysusers entry"
if command -v systemd-analyze > /dev/null; then
    # Only the unit's own syntax: the binary it names is not installed at that path here.
    out=$(systemd-analyze verify "$unit" 2>&1 || true)
    if grep -vE "is not executable|No such file|Failed to|not found|Unit .* not found" <<< "$out" |
        grep -E 'Unknown|unknown|Invalid|invalid|Ignoring' >&2; then
        fail "systemd-analyze verify complains about the unit"
    fi
fi

# Start from / with the installed configuration; only the data directory and the port change.
data=$tmp/data
(cd / && exec env -i PATH=/usr/bin:/bin "QL_TEST_RUN=${QL_TEST_RUN:-}" "$prefix/bin/qilind" \
    --config "$conf" --data "$data" --set qilin.server.listen=127.0.0.1:0 \
    2> "$tmp/qilind.log") &
pid=$!
url=
for _ in $(seq 1 200); do # 20 s at most
    url=$(sed -n 's/^qilind listening on \(http:[^ ]*\)$/\1/p' "$tmp/qilind.log")
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || fail "qilind exited at start-up"
    sleep 0.1
done
[ -n "$url" ] || fail "qilind did not start listening within 20 s"

pw=$data/admin.password
code=$(curl -s -o "$tmp/projects.json" -w '%{http_code}' -u "ADMIN:$(cat "$pw")" \
    "$url/kylin/api/projects")
[ "$code" = 200 ] || fail "GET /kylin/api/projects answered $code"
grep -q '"code":"000"' "$tmp/projects.json" || fail "GET /kylin/api/projects: $(cat "$tmp/projects.json")"

qilin() { (cd / && env -i PATH=/usr/bin:/bin QILIN_SERVER="$url" QILIN_PASSWORD_FILE="$pw" \
    "$prefix/bin/qilin" "$@"); }
qilin project create demo > /dev/null || fail "qilin project create"
qilin model create --project demo orders --partition-column DT --partition-format yyyy-MM-dd \
    > /dev/null || fail "qilin model create"
job=$(qilin segment build -q -p demo -m orders --start 2026-08-31 --end 2026-09-01) ||
    fail "qilin segment build"
qilin job wait "$job" --project demo --timeout 60s > "$tmp/wait.out" ||
    fail "job $job did not finish: $(cat "$tmp/wait.out")"
grep -q FINISHED "$tmp/wait.out" || fail "job $job: $(cat "$tmp/wait.out")"
# The shell step's output, written by the command qilin-exec started.
out=$(curl -s -u "ADMIN:$(cat "$pw")" "$url/kylin/api/jobs/$job/steps/${job}_01/output?project=demo")
grep -q 'building orders segment' <<< "$out" || fail "step output: $out"

# The backup of the user guide, taken while the server runs, is a store fsck finds sound.
if command -v mdb_copy > /dev/null; then
    mkdir "$tmp/backup"
    mdb_copy -c "$data" "$tmp/backup" || fail "mdb_copy of the live store failed"
    (cd / && env -i PATH=/usr/bin:/bin "$prefix/bin/qilin" fsck "$tmp/backup") > "$tmp/fsck.out" 2>&1 ||
        fail "fsck of the backup: $(cat "$tmp/fsck.out")"
fi

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "qilind exited with $rc on SIGTERM"
echo "install_test: installed qilind served the demo from / (job $job FINISHED)"
