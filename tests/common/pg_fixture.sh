#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for the tests that run against the PostgreSQL backend
# (docs/postgresql.md, Tests): one per build, started and stopped by the ctest fixtures pg_start
# and pg_stop, loopback only.
#
#   bash tests/common/pg_fixture.sh start DIR    initdb + start; writes DIR/url (a conninfo)
#   bash tests/common/pg_fixture.sh stop DIR     stops it and removes its data
#
# The cluster lives in a directory of its own made with mktemp under /tmp and opened to every
# user (chmod 755): initdb and postgres refuse to run as root, so as root they run as the
# `postgres` user (runuser), which must be able to enter it; a build directory under a 0700
# checkout would not do. DIR/pgdir records where it is.
#
# When the server binaries are missing, `start` fails in CI (CI=true) and otherwise writes no
# url and succeeds with a message: the @pg tests then skip, saying why.
set -uo pipefail

bindir=${QL_PG_BINDIR:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop DIR" >&2
    exit 2
fi

as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

start() {
    mkdir -p "$dir" || exit 1
    rm -f "$dir/url"
    if [ ! -x "$bindir/initdb" ] || [ ! -x "$bindir/pg_ctl" ] ||
        { [ "$(id -u)" -eq 0 ] && ! id postgres > /dev/null 2>&1; }; then
        local msg="PostgreSQL 15 server binaries not found in $bindir (scripts/setup.sh installs postgresql-15)"
        if [ "${CI:-}" = true ]; then
            echo "pg_fixture: $msg" >&2
            exit 1
        fi
        echo "pg_fixture: $msg; the @pg tests will be skipped" >&2
        exit 0
    fi
    local pgdir
    pgdir=$(mktemp -d /tmp/qlpg.XXXX) || exit 1
    chmod 755 "$pgdir"
    echo "$pgdir" > "$dir/pgdir"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres "$pgdir"
    fi
    if ! as_pg "$bindir/initdb" -D "$pgdir/data" -U qilin --auth=trust -E UTF8 --locale=C \
        > "$pgdir/initdb.log" 2>&1; then
        cat "$pgdir/initdb.log" >&2
        exit 1
    fi
    local port tries
    for tries in 1 2; do
        port=$(free_port) || exit 1
        {
            echo "listen_addresses = '127.0.0.1'"
            echo "port = $port"
            echo "unix_socket_directories = '$pgdir'"
            echo "shared_buffers = 32MB"
            # Two suites at once, each with up to three servers of a pool of 6 plus their
            # lock and listen sessions: 60 came close enough that a refused session was a
            # suspect in a stalled multi-host run. A session slot costs a few hundred KiB.
            echo "max_connections = 150"
            echo "fsync = on"
        } > "$pgdir/data/qilin.conf"
        grep -q "include 'qilin.conf'" "$pgdir/data/postgresql.conf" ||
            echo "include 'qilin.conf'" >> "$pgdir/data/postgresql.conf"
        if as_pg "$bindir/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 start \
            > /dev/null; then
            echo "host=127.0.0.1 port=$port user=qilin dbname=postgres sslmode=disable gssencmode=disable" \
                > "$dir/url"
            return 0
        fi
        [ "$tries" = 2 ] && { tail -20 "$pgdir/server.log" >&2; exit 1; }
    done
}

stop() {
    [ -f "$dir/pgdir" ] || exit 0
    local pgdir
    pgdir=$(cat "$dir/pgdir")
    case "$pgdir" in /tmp/qlpg.*) ;; *) echo "pg_fixture: odd pgdir $pgdir" >&2; exit 1 ;; esac
    if [ -f "$pgdir/data/postmaster.pid" ]; then
        if ! as_pg "$bindir/pg_ctl" -D "$pgdir/data" -m fast -w -t 30 stop > /dev/null; then
            local pid
            pid=$(head -1 "$pgdir/data/postmaster.pid" 2>/dev/null)
            [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null
        fi
    fi
    rm -rf "$pgdir"
    rm -f "$dir/pgdir" "$dir/url"
}

case "$cmd" in
start) start ;;
stop) stop ;;
*)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
