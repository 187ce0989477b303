/*
 * The generated ADMIN password: with no users in qilin.server.users, the server's only user is
 * ADMIN with a random password kept in <data>/admin.password, readable by the server's user
 * alone. The first start makes it; later starts (and every server sharing the data directory)
 * read it; the `qilin` CLI reads it when no password is given. The password itself is never
 * logged; the server keeps only its argon2id hash (ql_auth).
 *
 * Creating it is atomic: the password is written to a private temporary file (O_EXCL, 0600),
 * synced, and linked to the final name, so two servers starting at once agree on one password
 * and nobody ever reads a half-written file. All functions are synchronous (tiny files, once at
 * start-up) and thread-safe.
 */
#ifndef QL_ADMIN_PASSWORD_H
#define QL_ADMIN_PASSWORD_H

#include <stdbool.h>
#include <stddef.h>

#include "base/ql_error.h"

/* The file's name inside the data directory. */
#define QL_ADMIN_PASSWORD_FILE "admin.password"
/* Characters of a generated password: 18 random bytes (libsodium randombytes), URL-safe
 * base64 without padding, so it can go in a URL, a shell word or a YAML scalar unquoted. */
#define QL_ADMIN_PASSWORD_LEN 24
/* A buffer that holds any password read from the file, NUL included. */
#define QL_ADMIN_PASSWORD_MAX 256

/*
 * Reads the password in the file at path (borrowed) into out (caller's, cap >= 2 bytes; wipe it
 * after use): the first line, without its line ending. strict (the server): the file must be a
 * regular file owned by this user with no group or other permission bits, or it is refused
 * (QL_EINVAL) as a password others may know. Returns 0; the negative errno of open (UV_ENOENT
 * for a missing file, UV_EACCES); QL_EINVAL with the path and reason in err (may be NULL) for
 * an empty, overlong or binary password or, when strict, a wrong owner or mode.
 */
int ql_admin_password_read(const char *path, bool strict, char *out, size_t cap, ql_err_t *err);

/*
 * The server's side: reads <dir>/admin.password (strictly), creating it first with a new
 * random password when it does not exist. dir (borrowed) must exist. out as above; *created
 * tells whether this call made the file. Returns 0, or a negative error with the path in err.
 */
int ql_admin_password_load(const char *dir, char *out, size_t cap, bool *created, ql_err_t *err);

/* Writes "<dir>/admin.password" into out (caller's). Returns out, or NULL when it does not fit. */
char *ql_admin_password_path(const char *dir, char *out, size_t cap);

#endif
