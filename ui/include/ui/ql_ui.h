/*
 * The web console's static files (docs/user-guide.md, "Web console"): HTML, CSS and JavaScript
 * modules from ui/assets/, compiled into the program at build time (ui/embed.cmake), so a
 * qilind binary serves its own console wherever it is installed. This library only finds them;
 * serving them (paths under /ui, headers, ETags) is the API's (api/api_ui.c).
 *
 * Everything here is constant data: thread-safe, nothing to free.
 */
#ifndef QL_UI_H
#define QL_UI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ql_ui_asset {
    const char *path;          /* "/index.html", "/js/app.js": relative to ui/assets/ */
    const unsigned char *body; /* len bytes, followed by a NUL */
    size_t len;
    const char *content_type; /* from the file's extension, e.g. "text/javascript; charset=utf-8" */
    const char *etag;         /* a strong ETag with its quotes: the start of the file's SHA-256 */
} ql_ui_asset_t;

/* The asset at path ("/js/app.js"; no query, already percent-decoded), or NULL when there is
 * none. The pointer is to static data. */
const ql_ui_asset_t *ql_ui_find(const char *path);

/* The application shell, "/index.html": every console page is this document, which routes on
 * the client (History API). Never NULL in a build (the build fails without the file). */
const ql_ui_asset_t *ql_ui_shell(void);

/* The number of assets and the i-th one (in path order), for tests and listings. */
size_t ql_ui_count(void);
const ql_ui_asset_t *ql_ui_at(size_t i);

#endif
