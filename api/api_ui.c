/*
 * The web console under /ui (docs/user-guide.md, "Web console"): the static files of ui/
 * (ql_ui.h), served without credentials because they hold no data; every piece of data the
 * console shows comes from /kylin/api with the user's Basic credentials, like any script's.
 *
 *   /ui/assets/<file>   the file, or 404 (a missing module must fail loudly, not load HTML)
 *   /ui, /ui/<anything> the application shell, index.html: deep links such as
 *                       /ui/projects/p/models/m load the shell, which routes on the client
 *
 * Every answer carries a Content-Security-Policy that allows scripts, styles and connections
 * from this origin only (no inline script, no eval, no framing), nosniff and no referrer. Files
 * are revalidated on each use (Cache-Control: no-cache) and answered 304 when the ETag, the
 * start of the file's SHA-256 computed at build time, still matches: an upgraded server never
 * serves a stale module, and an unchanged one costs a 304 of a few hundred bytes.
 */
#include "api_int.h"
#include "ui/ql_ui.h"

#include <stdio.h>
#include <string.h>

#define UI_PREFIX "/ui"
#define UI_ASSETS UI_PREFIX "/assets"

const char ql_api_ui_csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                             "img-src 'self' data:; connect-src 'self'; font-src 'self'; "
                             "manifest-src 'self'; base-uri 'none'; form-action 'none'; "
                             "frame-ancestors 'none'";

bool ql_api_etag_matches(const char *if_none_match, const char *etag) {
    if (!if_none_match)
        return false;
    size_t n = strlen(etag);
    const char *p = if_none_match;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2; /* weak comparison, as RFC 9110 asks for If-None-Match */
        size_t len = strcspn(p, ", \t");
        if (len == n && memcmp(p, etag, n) == 0)
            return true;
        p += len;
    }
    return false;
}

static int security_headers(ql_http_req_t *req) {
    int rc = ql_http_add_header(req, "Content-Security-Policy", ql_api_ui_csp);
    if (!rc)
        rc = ql_http_add_header(req, "X-Content-Type-Options", "nosniff");
    if (!rc)
        rc = ql_http_add_header(req, "X-Frame-Options", "DENY");
    if (!rc)
        rc = ql_http_add_header(req, "Referrer-Policy", "no-referrer");
    if (!rc)
        rc = ql_http_add_header(req, "Cross-Origin-Opener-Policy", "same-origin");
    if (!rc)
        rc = ql_http_add_header(req, "Cross-Origin-Resource-Policy", "same-origin");
    return rc;
}

static void serve(ql_http_req_t *req, const ql_ui_asset_t *a) {
    if (security_headers(req) || ql_http_add_header(req, "Cache-Control", "no-cache") ||
        ql_http_add_header(req, "ETag", a->etag)) {
        ql_http_respond_error(req, 500, UV_ENOMEM, "out of memory");
        return;
    }
    if (ql_api_etag_matches(ql_http_req_header(req, "If-None-Match"), a->etag)) {
        ql_http_respond(req, 304, NULL, NULL, 0);
        return;
    }
    ql_http_respond(req, 200, a->content_type, (const char *)a->body, a->len);
}

static void h_ui(ql_http_req_t *req, void *arg) {
    (void)arg;
    const char *path = ql_http_req_path(req);
    size_t n = strlen(UI_ASSETS);
    if (strncmp(path, UI_ASSETS, n) == 0 && (path[n] == '/' || path[n] == '\0')) {
        const ql_ui_asset_t *a = path[n] ? ql_ui_find(path + n) : NULL;
        if (!a) {
            security_headers(req);
            ql_http_respond_error(req, 404, QL_ENOTFOUND, "no file %s in the console", path);
            return;
        }
        serve(req, a);
        return;
    }
    serve(req, ql_ui_shell());
}

int ql_api_routes_ui(ql_api_t *api) {
    /* The router matches whole segments, so one route per depth: /ui, /ui/{p1}, ... */
    char pattern[128] = UI_PREFIX;
    for (int depth = 0; depth <= QL_HTTP_MAX_PARAMS; depth++) {
        if (depth > 0) {
            size_t len = strlen(pattern);
            snprintf(pattern + len, sizeof pattern - len, "/{p%d}", depth);
        }
        int rc = ql_http_router_add(api->router, "GET", pattern, "ui", 0, h_ui, api);
        if (rc)
            return rc;
    }
    return 0;
}
