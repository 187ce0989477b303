/*
 * The key a client address is counted under, shared by the per-address tables of the HTTP
 * server (open connections, http/http_peers.c) and of authentication (failures and
 * verifications in flight, http/auth.c), so both limits treat the same clients as one.
 */
#ifndef QL_ADDR_KEY_H
#define QL_ADDR_KEY_H

#include <netinet/in.h>
#include <sys/socket.h>

#define QL_ADDR_KEY_LEN 16

/* Writes the 16-byte key of sa to out: an IPv4 address as ::ffff:a.b.c.d (so IPv4 and IPv6
 * share one table), an IPv4-mapped IPv6 address as itself, any other IPv6 address as its /64
 * followed by zeros (one host owns a whole /64, so counting single IPv6 addresses would let it
 * open connections or try passwords without limit). sa is borrowed; NULL or another family
 * gives the all-zero key. Any thread. */
void ql_addr_key(const struct sockaddr *sa, unsigned char out[QL_ADDR_KEY_LEN]);

#endif
