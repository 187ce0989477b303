#!/usr/bin/env bash
# A throwaway ZooKeeper 3.8 server for the tests of the ZooKeeper schedulers
# (docs/design/multi-host.md, ZooKeeper fixture): one per build, started and stopped by the
# ctest fixtures zk_start and zk_stop, loopback only.
#
#   bash tests/common/zk_fixture.sh start DIR READY    starts it; writes DIR/connect (HOST:PORT)
#   bash tests/common/zk_fixture.sh stop DIR           stops it (by its recorded pid), removes it
#
# READY is the zk_ready program (tests/fixtures/zk_ready.c): the server counts as started only
# once a real client session is CONNECTED, since its four-letter `ruok` answers before it
# accepts sessions. The server runs straight from Debian's jar (package `zookeeper`, never
# `zookeeperd`, whose service would listen on every interface), in a session of its own, with
# its data and log under DIR, the admin server (Jetty on port 8080, all interfaces) off, and
# short session bounds (tickTime 200 ms: sessions of 400 ms to 30 s) so tests of expiry are
# quick.
#
# When Java or the jar is missing, `start` fails in CI (CI=true) and otherwise writes no
# connect file and succeeds with a message: the ZooKeeper tests then skip, saying why.
set -uo pipefail

jar=${QL_ZK_JAR:-/usr/share/java/zookeeper.jar}
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start DIR READY | stop DIR" >&2
    exit 2
fi

source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

stop_pid() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    return 0
}

start() {
    local ready=${3:-}
    mkdir -p "$dir" || exit 1
    rm -f "$dir/connect"
    if ! command -v java > /dev/null || [ ! -r "$jar" ] || [ ! -x "$ready" ]; then
        local msg="ZooKeeper not found (java, $jar, $ready; scripts/setup.sh installs the zookeeper package)"
        if [ "${CI:-}" = true ]; then
            echo "zk_fixture: $msg" >&2
            exit 1
        fi
        echo "zk_fixture: $msg; the ZooKeeper tests will be skipped" >&2
        exit 0
    fi
    local port tries
    for tries in 1 2; do
        rm -rf "$dir/data" && mkdir -p "$dir/data"
        port=$(free_port) || exit 1
        cat > "$dir/zoo.cfg" <<CFG
tickTime=200
minSessionTimeout=400
maxSessionTimeout=30000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr
CFG
        setsid java -Xmx128m -XX:+UseSerialGC -cp "$jar" \
            org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
            < /dev/null > "$dir/zk.log" 2>&1 &
        echo $! > "$dir/pid"
        if "$ready" "127.0.0.1:$port" 60000; then
            echo "127.0.0.1:$port" > "$dir/connect"
            return 0
        fi
        stop_pid "$(cat "$dir/pid")"
        rm -f "$dir/pid"
        [ "$tries" = 2 ] && { tail -20 "$dir/zk.log" >&2; exit 1; }
    done
}

stop() {
    if [ -f "$dir/pid" ]; then
        stop_pid "$(cat "$dir/pid")"
    fi
    rm -rf "$dir/data"
    rm -f "$dir/pid" "$dir/connect" "$dir/zoo.cfg"
}

case "$cmd" in
start) start "$@" ;;
stop) stop ;;
*)
    echo "usage: $0 start DIR READY | stop DIR" >&2
    exit 2
    ;;
esac
