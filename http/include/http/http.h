/*
 * http: an HTTP/1.1 server with no knowledge of the REST API. The one header other libraries
 * include.
 *
 *   ql_http.h      the server, requests and responses, the router
 *   ql_auth.h      HTTP Basic authentication: users, roles, password hashes, login limits
 *   ql_addr_key.h  a client address as a key (per-address limits)
 */
#ifndef QL_HTTP_H_ALL
#define QL_HTTP_H_ALL

#include "http/ql_addr_key.h"
#include "http/ql_auth.h"
#include "http/ql_http.h"

#endif
