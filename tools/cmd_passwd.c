/*
 * qilin passwd [--user NAME] [--role ROLE]: reads a password and prints its argon2id hash
 * (ql_auth_hash_password) for qilin.server.users.
 *
 * From a terminal the password is read twice with echo off; otherwise (a pipe, a file) one
 * line is read from stdin, for scripts. While echo is off, SIGINT, SIGTERM, SIGQUIT and SIGHUP
 * get an empty handler without SA_RESTART, so the read returns EINTR and the terminal is
 * restored before we exit: a ^C never leaves the user's shell without echo. The password is
 * wiped from memory once hashed.
 */
#include "cli.h"
#include "http/ql_auth.h"

#include <errno.h>
#include <signal.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define MAX_PASSWORD 1024

enum { PW_OK = 0, PW_FAIL = 1, PW_USAGE = 2 };

static void usage(FILE *out) {
    fprintf(out, "usage: qilin passwd [--user NAME] [--role ROLE]\n"
                 "\n"
                 "Hash a password for the server's qilin.server.users (argon2id, libsodium's "
                 "interactive\nlimits). From a terminal the password is asked twice without echo; "
                 "otherwise one line is\nread from stdin. Prints the hash, or with --user a whole "
                 "entry for the users list.\n"
                 "\n"
                 "Options:\n"
                 "  --user NAME   print a qilin.server.users entry for NAME\n"
                 "  --role ROLE   its role (ADMIN, the default, or VIEWER: read-only)\n"
                 "  -h, --help    show this help\n"
                 "\n"
                 "Example:\n"
                 "  qilin passwd --user alice\n"
                 "  - {name: alice, password_hash: '$argon2id$v=19$m=65536,t=2,p=1$...', role: "
                 "ADMIN}\n"
                 "  printf '%%s\\n' \"$PW\" | qilin passwd      # scripts: one line on stdin\n"
                 "\n"
                 "Exit status: 0 printed, 1 no password (empty, mismatch, end of input), 2 usage "
                 "error.\n");
}

static void on_signal(int sig) {
    (void)sig; /* nothing to do: the interrupted read returns EINTR */
}

/* Reads one line from fd into buf (without the newline or a trailing CR); an empty line and
 * end of input both give 0, which the caller refuses. Returns the length, -2 when interrupted
 * by a signal, -3 when the line does not fit. */
static int read_line(int fd, char *buf, size_t size) {
    size_t n = 0;
    for (;;) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR)
            return -2;
        if (r <= 0)
            break;
        if (c == '\n')
            break;
        if (n + 1 >= size)
            return -3;
        buf[n++] = c;
    }
    if (n && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    return (int)n;
}

/* Prompts on stderr and reads a line with echo off. Same returns as read_line. */
static int read_hidden(const char *prompt, char *buf, size_t size) {
    struct termios old, quiet;
    if (tcgetattr(STDIN_FILENO, &old) != 0)
        return read_line(STDIN_FILENO, buf, size);
    quiet = old;
    quiet.c_lflag &= (tcflag_t) ~(ECHO | ECHOE | ECHOK | ECHONL);
    quiet.c_lflag |= ICANON;
    struct sigaction sa = {.sa_handler = on_signal}, saved[4];
    static const int sigs[] = {SIGINT, SIGTERM, SIGQUIT, SIGHUP};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &sa, &saved[i]);
    fputs(prompt, stderr);
    fflush(stderr);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    int n = read_line(STDIN_FILENO, buf, size);
    tcsetattr(STDIN_FILENO, TCSANOW, &old); /* keep what was typed after the line */
    fputc('\n', stderr);
    for (int i = 0; i < 4; i++)
        sigaction(sigs[i], &saved[i], NULL);
    return n;
}

/* A user name as a YAML flow scalar: plain when it is safe, single-quoted otherwise. */
static void print_name(const char *name) {
    bool plain = *name != '\0';
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.' || *p == '@'))
            plain = false;
    if (plain && (name[0] == '-' || name[0] == '.' || name[0] == '@'))
        plain = false;
    if (plain) {
        fputs(name, stdout);
        return;
    }
    putchar('\'');
    for (const char *p = name; *p; p++) {
        if (*p == '\'')
            putchar('\'');
        putchar(*p);
    }
    putchar('\'');
}

int ql_cmd_passwd(int argc, char **argv) {
    const char *user = NULL, *role_text = "ADMIN";
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            return PW_OK;
        }
        const char **dst = !strcmp(arg, "--user")   ? &user
                           : !strcmp(arg, "--role") ? &role_text
                                                    : NULL;
        if (!strncmp(arg, "--user=", 7)) {
            user = arg + 7;
        } else if (!strncmp(arg, "--role=", 7)) {
            role_text = arg + 7;
        } else if (dst && i + 1 < argc) {
            *dst = argv[++i];
        } else {
            fprintf(stderr, "qilin passwd: %s '%s' (see qilin passwd --help)\n",
                    dst ? "missing value for" : "unexpected argument", arg);
            return PW_USAGE;
        }
    }
    ql_auth_role_t role;
    if (ql_auth_role_parse(role_text, &role) != 0) {
        fprintf(stderr, "qilin passwd: unknown role '%s' (known: ADMIN, VIEWER)\n", role_text);
        return PW_USAGE;
    }
    if (user && (!*user || strchr(user, '\n'))) {
        fprintf(stderr, "qilin passwd: --user needs a name on one line\n");
        return PW_USAGE;
    }
    char pw[MAX_PASSWORD], again[MAX_PASSWORD];
    int rc = PW_OK, n;
    bool tty = isatty(STDIN_FILENO);
    if (tty) {
        n = read_hidden("Password: ", pw, sizeof pw);
        if (n > 0) {
            int m = read_hidden("Retype password: ", again, sizeof again);
            if (m == -2)
                n = -2;
            else if (m != n || sodium_memcmp(pw, again, (size_t)n) != 0)
                n = -4;
        }
    } else {
        n = read_line(STDIN_FILENO, pw, sizeof pw);
    }
    sodium_memzero(again, sizeof again);
    if (n == -2) {
        rc = 130; /* like a shell's exit status after SIGINT */
    } else if (n == -3) {
        fprintf(stderr, "qilin passwd: the password is longer than %d bytes\n", MAX_PASSWORD - 1);
        rc = PW_FAIL;
    } else if (n == -4) {
        fprintf(stderr, "qilin passwd: the passwords do not match\n");
        rc = PW_FAIL;
    } else if (n <= 0) {
        fprintf(stderr, "qilin passwd: no password given (an empty password is not accepted)\n");
        rc = PW_FAIL;
    }
    char hash[QL_AUTH_HASH_MAX];
    if (rc == PW_OK && ql_auth_hash_password(pw, hash, sizeof hash) != 0) {
        fprintf(stderr, "qilin passwd: cannot hash the password (out of memory?)\n");
        rc = PW_FAIL;
    }
    sodium_memzero(pw, sizeof pw);
    if (rc != PW_OK)
        return rc;
    if (user) {
        fputs("- {name: ", stdout);
        print_name(user);
        /* Single quotes: the hash holds '$' and ',' which YAML flow context would misread. */
        printf(", password_hash: '%s', role: %s}\n", hash, ql_auth_role_name(role));
    } else {
        printf("%s\n", hash);
    }
    return fflush(stdout) == 0 ? PW_OK : PW_FAIL;
}
