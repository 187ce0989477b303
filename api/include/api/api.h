/*
 * api: the HTTP/1.1 server, the router and Basic auth, and Qilin's REST API on top of them.
 * The one header other libraries and tools include.
 *
 *   ql_http.h  HTTP server on libuv, requests, responses, router, counters (docs/http.md)
 *   ql_auth.h  HTTP Basic authentication with a verification cache and rate limits
 *   ql_api.h   the REST API (docs/design/rest-api.md, docs/rest.md), /healthz and /metrics
 */
#ifndef QL_API_UMBRELLA_H
#define QL_API_UMBRELLA_H

#include "api/ql_api.h"
#include "http/ql_auth.h"
#include "http/ql_http.h"

#endif
