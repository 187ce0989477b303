/* The generated ADMIN password file (see api/ql_admin_password.h). */
#include "api/ql_admin_password.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

char *ql_admin_password_path(const char *dir, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s/%s", dir, QL_ADMIN_PASSWORD_FILE);
    return n < 0 || (size_t)n >= cap ? NULL : out;
}

int ql_admin_password_read(const char *path, bool strict, char *out, size_t cap, ql_err_t *err) {
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int rc = -errno;
        return ql_err_set(err, rc, "%s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ql_err_set(err, QL_EINVAL, "%s: not a regular file", path);
    }
    if (strict && (st.st_uid != geteuid() || (st.st_mode & 077))) {
        close(fd);
        return ql_err_set(err, QL_EINVAL,
                          "%s: the ADMIN password file must belong to this user and be readable "
                          "by it alone (mode %03o, owner %u): chmod 600 it, or delete it to have "
                          "a new password generated",
                          path, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
    }
    char buf[QL_ADMIN_PASSWORD_MAX + 1];
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    if (n < 0)
        return ql_err_set(err, -saved, "%s: %s", path, strerror(saved));
    size_t len = 0;
    while (len < (size_t)n && buf[len] != '\n' && buf[len] != '\r')
        len++;
    int rc = 0;
    if (len == 0)
        rc = ql_err_set(err, QL_EINVAL, "%s: the file holds no password", path);
    else if (len >= cap || len >= QL_ADMIN_PASSWORD_MAX)
        rc = ql_err_set(err, QL_EINVAL, "%s: the password is longer than %d bytes", path,
                        QL_ADMIN_PASSWORD_MAX - 1);
    for (size_t i = 0; !rc && i < len; i++)
        if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
            rc = ql_err_set(err, QL_EINVAL, "%s: the password holds a control character", path);
    if (!rc) {
        memcpy(out, buf, len);
        out[len] = '\0';
    }
    sodium_memzero(buf, sizeof buf);
    return rc;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : UV_EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes a new random password to a temporary file and links it to path. Returns 0, EEXIST
 * (negative) when another process made path first, or another negative errno. */
static int create_file(const char *dir, const char *path, ql_err_t *err) {
    if (sodium_init() < 0)
        return ql_err_set(err, UV_EIO, "libsodium failed to initialise");
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s/.%s.%ld.tmp", dir, QL_ADMIN_PASSWORD_FILE, (long)getpid()) >=
        (int)sizeof tmp)
        return ql_err_set(err, UV_ENAMETOOLONG, "%s: path too long", dir);
    unsigned char raw[QL_ADMIN_PASSWORD_LEN * 3 / 4];
    char pw[QL_ADMIN_PASSWORD_LEN + 2]; /* the password, its newline and the NUL */
    randombytes_buf(raw, sizeof raw);
    sodium_bin2base64(pw, sizeof pw, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    sodium_memzero(raw, sizeof raw);
    size_t len = strlen(pw);
    pw[len++] = '\n';
    (void)unlink(tmp); /* left by a process of the same pid that died here */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : 0;
    if (!rc)
        rc = write_all(fd, pw, len);
    sodium_memzero(pw, sizeof pw);
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && link(tmp, path) != 0)
        rc = -errno;
    if (fd >= 0)
        (void)unlink(tmp);
    if (rc == -EEXIST)
        return rc;
    if (rc)
        return ql_err_set(err, rc, "%s: cannot create the ADMIN password file: %s", path,
                          strerror(-rc));
    /* The new name must survive a crash as the password's only copy. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

int ql_admin_password_load(const char *dir, char *out, size_t cap, bool *created, ql_err_t *err) {
    char path[4096];
    *created = false;
    if (!ql_admin_password_path(dir, path, sizeof path))
        return ql_err_set(err, UV_ENAMETOOLONG, "%s: path too long", dir);
    int rc = ql_admin_password_read(path, true, out, cap, err);
    if (rc != UV_ENOENT)
        return rc;
    rc = create_file(dir, path, err);
    if (rc && rc != -EEXIST)
        return rc;
    *created = rc == 0;
    return ql_admin_password_read(path, true, out, cap, err);
}
