/*
 * A host of its own on the network, for tests that must cut a server off (tests/common).
 *
 * DESIGN. A network namespace that a test makes itself and that dies with it: a holder process
 * unshares a new namespace and waits; a veth pair joins it to the test's namespace, with
 * link-local addresses (169.254.0.0/16, a /30 chosen from the test's pid that no interface
 * holds yet) and nothing else: no route out, no forwarding, no NAT. A server started in the
 * namespace (qd_t.netns_pid, tests/api/rest_util.h) reaches the test's side only at host_addr,
 * where a relay (tcp_relay.h) forwards to the loopback service it needs. Cutting the link
 * (taking the test's end down) is a partition: the namespace's packets are dropped, its
 * sockets stay open and see no error, and what they send is retransmitted until the link
 * comes back or their own timeouts end them. The namespace, and the veth pair with it, are gone
 * when the holder and every process started in it have ended; the holder dies with the test
 * (PR_SET_PDEATHSIG) and is killed by the child cleanup (tmp_util.h) as well.
 *
 * Needs CAP_SYS_ADMIN and CAP_NET_ADMIN (root), iproute2's `ip` and util-linux's `nsenter`.
 * Test thread only; no Criterion calls: the caller decides to skip or fail.
 */
#ifndef QL_TEST_NETNS_UTIL_H
#define QL_TEST_NETNS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct ql_test_netns {
    pid_t holder;       /* a process in the namespace; 0: none */
    int holder_fd;      /* the holder ends when this pipe end is closed */
    char host_if[16];   /* the test's end of the veth pair */
    char ns_if[16];     /* the namespace's end */
    char host_addr[32]; /* 169.254.X.Y+1, on host_if */
    char ns_addr[32];   /* 169.254.X.Y+2, on ns_if */
} ql_test_netns_t;

/* Makes the namespace and its link, up. Returns 0, or a negative errno with why (cap bytes)
 * saying what the machine refused (not permitted, no `ip`), after undoing what was made. */
int ql_test_netns_open(ql_test_netns_t *ns, char *why, size_t cap);
/* Takes the test's end of the link down (up = false: the partition) or up again. Returns 0 or
 * -1 when `ip` failed. */
int ql_test_netns_link(ql_test_netns_t *ns, bool up);
/* Ends the holder; the namespace goes once the processes started in it have ended too.
 * Harmless on a namespace never opened or already closed. */
void ql_test_netns_close(ql_test_netns_t *ns);

#endif
