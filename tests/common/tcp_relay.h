/*
 * A TCP relay inside a test (tests/common): listens on an address of the test's namespace and
 * forwards every connection to a fixed host and port, both ways, byte for byte, until either
 * side closes. It lets a server in a network namespace (netns_util.h) reach a service that
 * listens on the test's loopback only (the PostgreSQL fixture).
 *
 * DESIGN. One thread accepts; each connection gets two threads, one per direction, each a
 * blocking read-then-write loop, so a direction that cannot deliver (a cut link) holds up only
 * itself. A direction that reads end-of-file or an error half-closes its destination
 * (shutdown SHUT_WR); the connection's sockets are closed when both directions are done. Up to
 * QL_TEST_RELAY_MAX connections in a relay's life. Start and stop from the test's thread; no
 * Criterion calls inside (the caller asserts on the return codes).
 */
#ifndef QL_TEST_TCP_RELAY_H
#define QL_TEST_TCP_RELAY_H

#define QL_TEST_RELAY_MAX 64

typedef struct ql_test_relay ql_test_relay_t;

/* Listens on listen_addr (an IPv4 address of this namespace) at a free port, written to *port,
 * and forwards to to_host:to_port (IPv4). Returns 0, or a negative errno (then *out is NULL). */
int ql_test_relay_start(const char *listen_addr, const char *to_host, int to_port,
                        ql_test_relay_t **out, int *port);
/* Connections accepted so far. */
int ql_test_relay_accepted(ql_test_relay_t *r);
/* Stops accepting, ends every connection (shutdown of both sockets), joins the threads, frees.
 * NULL is a no-op. */
void ql_test_relay_stop(ql_test_relay_t *r);

#endif
