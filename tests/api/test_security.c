/*
 * Safe defaults of qilind as a process (docs/user-guide.md, Security): the generated ADMIN
 * password file and the refusal of Kylin's public ADMIN/KYLIN, the Host check against DNS
 * rebinding, JSON-only writes and the Origin check against cross-site posts, ad-hoc shell steps
 * only with qilin.adhoc.allow-commands, and a data directory other local users cannot enter
 * (0750, files 0600, step logs 0640; another uid cannot open the job engine lock).
 */
#include "tests/api/rest_util.h"

#include <ctype.h>
#include <dirent.h>
#include <grp.h>

static qd_t Q, Q2;

static void teardown(void) {
    qd_cleanup(&Q2);
    qd_cleanup(&Q);
}

TestSuite(security, .fini = teardown, .timeout = 120);

/* argon2id of KYLIN (libsodium's interactive limits), as `echo KYLIN | qilin passwd` makes it:
 * the explicit opt-in for Kylin's own scripts. */
#define KYLIN_HASH                                                                                 \
    "$argon2id$v=19$m=65536,t=2,p=1$myVrpqv/5lxq7JrbHqaosw$"                                       \
    "EfVtjqupYJiPub2MQx0N2exeRgsQc5aAbuCLYnbcF8o"

static char *data_path(const qd_t *q, const char *name) {
    return path_in(q->data, name);
}

static unsigned mode_of(const char *path) {
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
    return (unsigned)(st.st_mode & 07777);
}

static char *read_password(const qd_t *q) {
    char *pw = read_file(data_path(q, "admin.password"));
    cr_assert_not_null(pw, "no %s", data_path(q, "admin.password"));
    pw[strcspn(pw, "\r\n")] = '\0';
    return pw;
}

static long status_of(const qd_t *q, const char *method, const char *path, const char *body,
                      const char *user, const char *const *headers) {
    resp_t r = http_req(q, method, path, body, user, headers);
    long st = r.status;
    resp_free(&r);
    return st;
}

/* The error answer's msg (static copy), asserting the status and the JSON envelope. */
static const char *refusal(const qd_t *q, const char *method, const char *path, const char *body,
                           const char *const *headers, long status, const char *error_code) {
    static char msg[600];
    resp_t r = http_req(q, method, path, body, NULL, headers);
    cr_assert_eq(r.status, status, "%s %s: status %ld, expected %ld: %s", method, path, r.status,
                 status, r.body ? r.body : "");
    cr_assert_not_null(r.json, "not JSON: %s", r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "error_code")), error_code);
    snprintf(msg, sizeof msg, "%s", json_string_value(json_object_get(r.json, "msg")));
    resp_free(&r);
    return msg;
}

static size_t project_count(const qd_t *q) {
    json_t *d = api_ok(q, "GET", "/kylin/api/projects?page_size=100", NULL);
    size_t n = json_array_size(json_object_get(d, "value"));
    json_decref(d);
    return n;
}

/* ---- the ADMIN password ---- */

Test(security, the_admin_password_is_generated_0600_random_and_reused_on_restart) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    const char *path = data_path(&Q, "admin.password");
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "no %s", path);
    cr_assert(S_ISREG(st.st_mode));
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));
    char *pw = read_password(&Q);
    cr_assert_eq(strlen(pw), 24, "'%s'", pw);
    for (const char *p = pw; *p; p++)
        cr_assert(isalnum((unsigned char)*p) || *p == '-' || *p == '_', "'%s'", pw);
    /* The log names the file, never the password. */
    assert_file_contains(Q.log, "password_file=");
    assert_file_contains(Q.log, path);
    cr_assert_not(file_contains(Q.log, pw), "the password is in the log");

    /* Another data directory gets another password. */
    qd_init(&Q2);
    qd_start(&Q2, NULL);
    char *pw2 = read_password(&Q2);
    cr_assert_str_neq(pw, pw2);
    free(pw2);

    /* A restart reads the same file: the old password still works. */
    qd_stop_ok(&Q, 20000);
    qd_start(&Q, NULL); /* the same data directory */
    char *again = read_password(&Q);
    cr_assert_str_eq(again, pw);
    char up[64];
    snprintf(up, sizeof up, "ADMIN:%s", pw);
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, up, NULL), 200);
    assert_file_contains(Q.log, "password read user=ADMIN");
    free(again);
    free(pw);
}

Test(security, kylin_default_password_is_refused_on_loopback_by_default) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    resp_t r = http_req(&Q, "GET", "/kylin/api/projects", NULL, "ADMIN:KYLIN", NULL);
    cr_assert_eq(r.status, 401, "ADMIN:KYLIN got %ld: %s", r.status, r.body);
    resp_free(&r);
    cr_assert_eq(
        status_of(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", "ADMIN:KYLIN", NULL), 401);
    /* The generated password works. */
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, NULL, NULL), 200);
    cr_assert_eq(project_count(&Q), 0);
}

/* The generated ADMIN password is random, so no default-password warning, and none of the
 * argon2 check behind it; but an operator may write KYLIN into the file: then it is warned about
 * as when configured. */
Test(security, an_admin_password_file_holding_kylin_is_warned_about) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    cr_assert_not(file_contains(Q.log, "public default password"),
                  "a generated password was taken for KYLIN");
    qd_stop_ok(&Q, 20000);
    const char *path = data_path(&Q, "admin.password");
    cr_assert_eq(unlink(path), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "KYLIN\n", 6), 6);
    close(fd);
    qd_start(&Q, NULL);
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, "ADMIN:KYLIN", NULL), 200);
    assert_file_contains(Q.log, "accepts Kylin's public default password KYLIN");
}

Test(security, kylin_is_an_explicit_opt_in_with_a_warning) {
    qd_init(&Q);
    const char *extra[] = {"--set", "qilin.server.users=ADMIN:" KYLIN_HASH ":ADMIN", NULL};
    qd_start(&Q, extra);
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, "ADMIN:KYLIN", NULL), 200);
    assert_file_contains(Q.log, "accepts Kylin's public default password KYLIN");
    /* Configured users: no password file is generated. */
    cr_assert_neq(access(data_path(&Q, "admin.password"), F_OK), 0);
}

/* ---- Host ---- */

Test(security, a_foreign_host_is_refused_and_changes_nothing) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    char host[64];
    snprintf(host, sizeof host, "Host: evil.example:%d", Q.port);
    const char *evil[] = {host, NULL};
    const char *msg = refusal(&Q, "GET", "/kylin/api/projects", NULL, evil, 421, "QL-00003");
    cr_assert(strstr(msg, "evil.example") && strstr(msg, "qilin.server.allowed-hosts"), "%s", msg);
    refusal(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", evil, 421, "QL-00003");
    refusal(&Q, "GET", "/healthz", NULL, evil, 421, "QL-00003");
    cr_assert_eq(project_count(&Q), 0);
    /* HTTP/1.1 without Host (curl drops the header given empty). */
    const char *none[] = {"Host:", NULL};
    msg = refusal(&Q, "GET", "/kylin/api/projects", NULL, none, 400, "QL-00003");
    cr_assert(strstr(msg, "Host"), "%s", msg);
    /* The loopback names pass, with and without the port. */
    char h1[64], h2[64], h3[64];
    snprintf(h1, sizeof h1, "Host: localhost:%d", Q.port);
    snprintf(h2, sizeof h2, "Host: [::1]:%d", Q.port);
    snprintf(h3, sizeof h3, "Host: 127.0.0.1");
    const char *const ok[] = {h1, h2, h3};
    for (size_t i = 0; i < 3; i++) {
        const char *h[] = {ok[i], NULL};
        cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, NULL, h), 200, "%s", ok[i]);
    }
}

Test(security, a_configured_allowed_host_passes) {
    qd_init(&Q);
    const char *extra[] = {"--set", "qilin.server.allowed-hosts=qilin.example.com,jobs.internal",
                           NULL};
    qd_start(&Q, extra);
    char h1[64], h2[64], h3[64];
    snprintf(h1, sizeof h1, "Host: qilin.example.com:%d", Q.port);
    snprintf(h2, sizeof h2, "Host: JOBS.internal");
    snprintf(h3, sizeof h3, "Host: other.example.com:%d", Q.port);
    const char *a[] = {h1, NULL}, *b[] = {h2, NULL}, *c[] = {h3, NULL};
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, NULL, a), 200);
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, NULL, b), 200);
    cr_assert_eq(status_of(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", NULL, a), 200);
    refusal(&Q, "GET", "/kylin/api/projects", NULL, c, 421, "QL-00003");
}

/* ---- writes from web pages ---- */

Test(security, a_write_not_in_json_is_refused_and_changes_nothing) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    static const char *const types[] = {"Content-Type: text/plain",
                                        "Content-Type: application/x-www-form-urlencoded",
                                        "Content-Type: multipart/form-data; boundary=x"};
    for (size_t i = 0; i < 3; i++) {
        const char *h[] = {types[i], NULL};
        const char *msg =
            refusal(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", h, 415, "QL-00003");
        cr_assert(strstr(msg, "Content-Type") && strstr(msg, "application/json"), "%s", msg);
    }
    /* An empty form post carries its type too. */
    const char *form[] = {types[1], NULL};
    refusal(&Q, "PUT", "/kylin/api/jobs/status", "", form, 415, "QL-00003");
    cr_assert_eq(project_count(&Q), 0);
    /* What Kylin's scripts and clients send passes. */
    const char *kylin[] = {"Content-Type: application/json;charset=utf-8", NULL};
    cr_assert_eq(status_of(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", NULL, kylin),
                 200);
    const char *v4[] = {"Content-Type: application/vnd.apache.kylin-v4-public+json", NULL};
    cr_assert_eq(status_of(&Q, "POST", "/kylin/api/projects", "{\"name\":\"q\"}", NULL, v4), 200);
    cr_assert_eq(project_count(&Q), 2);
}

Test(security, a_write_from_a_foreign_origin_is_refused) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    const char *evil[] = {"Origin: http://evil.example", NULL};
    const char *msg =
        refusal(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", evil, 403, "QL-00026");
    cr_assert(strstr(msg, "evil.example"), "%s", msg);
    const char *null[] = {"Origin: null", NULL};
    refusal(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", null, 403, "QL-00026");
    cr_assert_eq(project_count(&Q), 0);
    /* Reads are not writes; the server's own origin may write. */
    cr_assert_eq(status_of(&Q, "GET", "/kylin/api/projects", NULL, NULL, evil), 200);
    char own[80];
    snprintf(own, sizeof own, "Origin: http://127.0.0.1:%d", Q.port);
    const char *same[] = {own, NULL};
    cr_assert_eq(status_of(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}", NULL, same), 200);
}

/* ---- ad-hoc commands ---- */

#define SHELL_JOB                                                                                  \
    "{\"project\":\"p\",\"type\":\"X\",\"steps\":[{\"name\":\"id\",\"kind\":\"shell\","            \
    "\"argv\":[\"/bin/sh\",\"-c\",\"echo ran\"]}]}"

static size_t job_count(const qd_t *q) {
    json_t *d = api_ok(q, "GET", "/kylin/api/jobs?project=p&time_filter=4&page_size=100", NULL);
    size_t n = json_array_size(json_object_get(d, "value"));
    json_decref(d);
    return n;
}

Test(security, adhoc_shell_steps_need_allow_commands) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    json_decref(api_ok(&Q, "POST", "/kylin/api/projects", "{\"name\":\"p\"}"));
    const char *msg = refusal(&Q, "POST", "/kylin/api/jobs", SHELL_JOB, NULL, 403, "QL-00026");
    cr_assert(strstr(msg, "qilin.adhoc.allow-commands"), "%s", msg);
    const char *yaml[] = {"Content-Type: application/yaml", NULL};
    refusal(&Q, "POST", "/kylin/api/jobs",
            "project: p\ntype: X\nsteps:\n  - {name: a, kind: noop}\n"
            "  - {name: b, kind: shell, argv: [/usr/bin/id]}\n",
            yaml, 403, "QL-00026");
    cr_assert_eq(job_count(&Q), 0);
    /* Built-in step kinds stay allowed. */
    json_decref(api_ok(&Q, "POST", "/kylin/api/jobs",
                       "{\"project\":\"p\",\"type\":\"X\",\"steps\":[{\"name\":\"n\","
                       "\"kind\":\"noop\"}]}"));
    cr_assert_eq(job_count(&Q), 1);

    /* With the key set, the shell step is accepted and runs; its log is 0640. */
    qd_stop_ok(&Q, 20000);
    const char *allow[] = {"--set", "qilin.adhoc.allow-commands=true", "--set",
                           "kylin.job.scheduler.poll-interval-second=1", NULL};
    qd_start(&Q, allow);
    json_t *d = api_ok(&Q, "POST", "/kylin/api/jobs", SHELL_JOB);
    char id[64];
    snprintf(id, sizeof id, "%s", jstr(json_array_get(json_object_get(d, "jobs"), 0), "job_id"));
    json_decref(d);
    wait_job_state(&Q, "p", id, "SUCCEED", 30000);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/logs/%s", Q.data, id);
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp, "no step log directory %s", dir);
    struct dirent *e;
    int logs = 0;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        char p[900];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        cr_assert_eq(mode_of(p), 0640, "%s: mode %o", p, mode_of(p));
        logs++;
    }
    closedir(dp);
    cr_assert_eq(logs, 1);
    cr_assert_eq(mode_of(dir) & 007, 0, "%s: mode %o", dir, mode_of(dir));
}

/* ---- the data directory ---- */

Test(security, the_data_directory_and_its_files_are_private) {
    qd_init(&Q);
    qd_start(&Q, NULL);
    cr_assert_eq(mode_of(Q.data), 0750);
    static const char *const files[] = {"data.mdb", "lock.mdb", "job_engine.lock",
                                        "admin.password"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(mode_of(data_path(&Q, files[i])), 0600, "%s: mode %o", files[i],
                     mode_of(data_path(&Q, files[i])));
    cr_assert_not(file_contains(Q.log, "open to every local user"));
}

Test(security, an_open_data_directory_is_kept_but_warned_about_and_the_lock_tightened) {
    qd_init(&Q);
    cr_assert_eq(mkdir(Q.data, 0755), 0);
    cr_assert_eq(chmod(Q.data, 0755), 0); /* whatever the umask */
    int fd = open(data_path(&Q, "job_engine.lock"), O_WRONLY | O_CREAT, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(fchmod(fd, 0644), 0);
    close(fd);
    qd_start(&Q, NULL);
    cr_assert_eq(mode_of(Q.data), 0755, "an existing directory keeps its mode");
    assert_file_contains(Q.log, "open to every local user");
    cr_assert_eq(mode_of(data_path(&Q, "job_engine.lock")), 0600);
}

/* Opens path as uid/gid 65534 in a child: 0 when it opened, else the errno. */
static int open_as_nobody(const char *path) {
    pid_t pid = fork(); /* no Criterion call in the child */
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(200);
        int fd = open(path, O_RDONLY);
        _exit(fd >= 0 ? 0 : errno);
    }
    cr_assert(pid > 0);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st));
    cr_assert_neq(WEXITSTATUS(st), 200, "the child could not become uid 65534");
    return WEXITSTATUS(st);
}

Test(security, another_user_cannot_open_the_lock_file) {
    if (geteuid() != 0)
        cr_skip_test("needs root to run a child as another uid (65534)");
    qd_init(&Q);
    /* The test's directory must be enterable, so only the data directory's own modes count. */
    cr_assert_eq(chmod(Q.dir, 0755), 0);
    qd_start(&Q, NULL);
    cr_assert_eq(open_as_nobody(data_path(&Q, "job_engine.lock")), EACCES);
    cr_assert_eq(open_as_nobody(data_path(&Q, "admin.password")), EACCES);
    /* The files alone refuse too, when an old directory is still open to everyone. */
    cr_assert_eq(chmod(Q.data, 0755), 0);
    cr_assert_eq(open_as_nobody(data_path(&Q, "job_engine.lock")), EACCES);
    cr_assert_eq(open_as_nobody(data_path(&Q, "data.mdb")), EACCES);
}
