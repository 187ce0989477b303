# Sourced by the server fixtures (pg_fixture.sh, zk_fixture.sh): free_port prints a TCP port
# nobody listens on, from the unprivileged range. A server may still take it before the fixture
# does, so each fixture retries its start once on a collision.
free_port() {
    local used p
    used=$(ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://')
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 40000))
        if ! grep -qx "$p" <<<"$used"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}
