#!/usr/bin/env bash
# Installs the Debian 12 packages Qilin needs to build and test, when they are missing.
# Safe to run again: it installs only what is absent. Needs root (or sudo).
set -euo pipefail

packages=(
    build-essential g++ cmake pkg-config
    libuv1-dev liblmdb-dev lmdb-utils libmsgpack-dev libyaml-dev libcriterion-dev
    libicu-dev libcctz-dev tzdata libjansson-dev libhttp-parser-dev
    libcurl4-openssl-dev libzookeeper-mt-dev libsodium-dev
    postgresql-15 postgresql-contrib libpq-dev pgbouncer
    zookeeper  # the server for the ZooKeeper tests, started by them; never zookeeperd (a system service on every interface)
    clang libclang-rt-14-dev clang-format
    curl
    iproute2  # ip: the partition test's network namespace and link (docs/testing.md)
    chromium
)
# The web console's browser test (tests/ui): node and npm, unless a node is installed already
# (a newer one from elsewhere: Debian's npm package would conflict with it).
command -v node > /dev/null && command -v npm > /dev/null || packages+=(nodejs npm)

# puppeteer-core, pinned by tests/ui/package-lock.json; it drives Debian's chromium and never
# downloads a browser of its own.
npm_ci() {
    local dir
    dir="$(cd "$(dirname "$0")/.." && pwd)/tests/ui"
    if [ ! -d "$dir/node_modules/puppeteer-core" ]; then
        echo "setup: npm ci in $dir" >&2
        (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund >&2)
    fi
}

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    npm_ci
    exit 0
fi
echo "setup: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
npm_ci
