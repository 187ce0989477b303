/* The configuration: defaults, the YAML file, --set, project overrides, users and the docs. */
#include "config/ql_config.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes text to a new temporary file; returns its path (caller frees and unlinks). */
static char *write_temp(const char *text) {
    char dir[256];
    ql_test_tmpdir(dir, sizeof dir, "ql_config");
    char *path = malloc(strlen(dir) + 16);
    cr_assert_not_null(path);
    sprintf(path, "%s/config.yaml", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    cr_assert_geq(fd, 0);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static ql_config_t *fresh(void) {
    ql_config_t *cfg = NULL;
    cr_assert_eq(ql_config_new(&cfg), 0);
    return cfg;
}

/* Loads text as a config file into cfg; returns the result, err filled. */
static int load_text(ql_config_t *cfg, const char *text, ql_err_t *err, char **path_out) {
    char *path = write_temp(text);
    int rc = ql_config_load_file(cfg, path, err);
    unlink(path);
    if (path_out)
        *path_out = path;
    else
        free(path);
    return rc;
}

#define assert_contains(hay, needle)                                                               \
    cr_assert(strstr((hay), (needle)) != NULL, "expected '%s' in: %s", (needle), (hay))

/* Sets key=value through the --set path and expects success. */
static void set_ok(ql_config_t *cfg, const char *key, const char *value) {
    ql_err_t err = {0};
    int rc = ql_config_set(cfg, key, value, "test", 0, &err);
    cr_assert_eq(rc, 0, "%s=%s: %s", key, value, err.msg);
}

/* Expects key=value to be refused, with the message naming the key and containing want. */
static void set_bad(ql_config_t *cfg, const char *key, const char *value, const char *want) {
    ql_err_t err = {0};
    int rc = ql_config_set(cfg, key, value, "test", 0, &err);
    cr_assert_eq(rc, QL_EINVAL, "%s=%s should be refused", key, value);
    assert_contains(err.msg, key);
    if (want)
        assert_contains(err.msg, want);
}

Test(config, defaults) {
    ql_config_t *cfg = fresh();
    const char *const *items;
    cr_assert_eq(ql_config_get_list(cfg, "kylin.server.mode", &items), 1);
    cr_assert_str_eq(items[0], "all");
    cr_assert(ql_config_serves_jobs(cfg));
    cr_assert(ql_config_serves_queries(cfg));
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.scheduler.default"), 0);
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.scheduler.poll-interval-second"), 30);
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.max-concurrent-jobs"), 10);
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 0);
    cr_assert_eq(ql_config_get_ms(cfg, "kylin.job.retry-interval"), 30000);
    cr_assert_eq(ql_config_get_size(cfg, "kylin.job.execute-output.max-size"), 10485760u);
    cr_assert_eq(ql_config_get_ms(cfg, "kylin.model.auto-segment-build.dispatcher-interval-ms"),
                 30000);
    cr_assert_str_eq(ql_config_get_str(cfg, "kylin.web.timezone"), "");
    cr_assert_str_eq(ql_config_get_str(cfg, "kylin.env.zookeeper-connect-string"), "");
    cr_assert_str_eq(ql_config_get_str(cfg, "kylin.env.zookeeper-base-path"), "/kylin");
    cr_assert_str_eq(ql_config_get_str(cfg, "kylin.server.cluster-name"), "qilin");
    cr_assert_eq(ql_config_get_list(cfg, "kylin.cube.schedule.assigned-servers", &items), 0);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.server.listen"), "127.0.0.1:7070");
    const char *host;
    int port;
    ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_eq(port, 7070);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.storage.path"), "./data");
    cr_assert_eq(ql_config_get_size(cfg, "qilin.storage.map-size"), 64ull << 30);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.jobs.templates"), "conf/jobs.yaml");
    cr_assert_eq(ql_config_get_size(cfg, "qilin.http.max-body-bytes"), 1u << 20);
    cr_assert_eq(ql_config_get_size(cfg, "qilin.http.max-header-bytes"), 16u << 10);
    cr_assert_eq(ql_config_get_int(cfg, "qilin.api.page-size-max"), 1000);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.shutdown.running-steps"), "pause");
    cr_assert_eq(ql_config_get_ms(cfg, "qilin.step.kill-grace-ms"), 10000);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.log.level"), "info");
    cr_assert(ql_config_get_bool(cfg, "qilin.metrics.require-auth"));
    int line = -1;
    cr_assert_str_eq(ql_config_source(cfg, "kylin.job.retry", &line), "default");
    cr_assert_eq(line, 0);
    ql_config_free(cfg);
}

Test(config, default_user_is_builtin_and_detectable) {
    ql_config_t *cfg = fresh();
    cr_assert(ql_config_default_user_in_use(cfg));
    const ql_config_user_t *users;
    cr_assert_eq(ql_config_users(cfg, &users), 1);
    cr_assert_str_eq(users[0].name, "ADMIN");
    cr_assert_str_eq(users[0].role, "ADMIN");
    cr_assert(users[0].builtin);
    cr_assert_null(users[0].password_hash);
    ql_err_t err = {0};
    cr_assert_eq(ql_config_check(cfg, &err), 0, "loopback with the default user is fine");
    ql_config_free(cfg);
}

Test(config, every_default_satisfies_its_own_rules) {
    size_t n;
    const ql_config_option_t *opts = ql_config_options(&n);
    cr_assert_gt(n, 25);
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(opts[i].doc, "%s has no description", opts[i].key);
        cr_assert_eq(ql_config_find_option(opts[i].key), &opts[i], "%s twice", opts[i].key);
        ql_config_t *cfg = fresh();
        ql_err_t err = {0};
        cr_assert_eq(ql_config_set(cfg, opts[i].key, opts[i].def, "test", 0, &err), 0, "%s: %s",
                     opts[i].key, err.msg);
        ql_config_free(cfg);
    }
}

Test(config, file_load_sets_values_and_sources) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    char *path = NULL;
    int rc = load_text(cfg,
                       "# a comment\n"
                       "kylin.server.mode: job,query\n"
                       "kylin.job.retry: 3\n"
                       "kylin.job.retry-interval: 5s\n"
                       "qilin.storage.map-size: 2GiB\n"
                       "kylin.web.timezone: Asia/Shanghai\n"
                       "qilin.server.listen: \"[::1]:8080\"\n"
                       "qilin.metrics.require-auth: false\n"
                       "kylin.cube.schedule.assigned-servers: [node-1, 10.0.0.2]\n"
                       "kylin.env.zookeeper-connect-string: zk1:2181,zk2:2181/qilin\n",
                       &err, &path);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert(ql_config_serves_jobs(cfg));
    cr_assert(ql_config_serves_queries(cfg));
    cr_assert_not(ql_config_list_has(cfg, "kylin.server.mode", "all"));
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 3);
    cr_assert_eq(ql_config_get_ms(cfg, "kylin.job.retry-interval"), 5000);
    cr_assert_eq(ql_config_get_size(cfg, "qilin.storage.map-size"), 2ull << 30);
    cr_assert_str_eq(ql_config_get_str(cfg, "kylin.web.timezone"), "Asia/Shanghai");
    const char *host;
    int port;
    ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
    cr_assert_str_eq(host, "::1");
    cr_assert_eq(port, 8080);
    cr_assert_not(ql_config_get_bool(cfg, "qilin.metrics.require-auth"));
    const char *const *items;
    cr_assert_eq(ql_config_get_list(cfg, "kylin.cube.schedule.assigned-servers", &items), 2);
    cr_assert_str_eq(items[0], "node-1");
    cr_assert_str_eq(items[1], "10.0.0.2");
    int line = 0;
    cr_assert_str_eq(ql_config_source(cfg, "kylin.job.retry", &line), path);
    cr_assert_eq(line, 3);
    cr_assert_str_eq(ql_config_source(cfg, "qilin.log.level", &line), "default");
    free(path);
    ql_config_free(cfg);
}

Test(config, empty_and_comment_only_files_keep_defaults) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(load_text(cfg, "", &err, NULL), 0, "%s", err.msg);
    cr_assert_eq(load_text(cfg, "# nothing here\n\n", &err, NULL), 0, "%s", err.msg);
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 0);
    ql_config_free(cfg);
}

Test(config, missing_file_is_an_error_naming_it) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    int rc = ql_config_load_file(cfg, "/nonexistent/qilin.yaml", &err);
    cr_assert_lt(rc, 0);
    assert_contains(err.msg, "/nonexistent/qilin.yaml");
    ql_config_free(cfg);
}

Test(config, int_bounds) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "kylin.job.retry", "0");
    set_ok(cfg, "kylin.job.retry", "100");
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 100);
    set_bad(cfg, "kylin.job.retry", "-1", "'-1' is out of range (accepted: 0..100)");
    set_bad(cfg, "kylin.job.retry", "101", "'101' is out of range (accepted: 0..100)");
    set_bad(cfg, "kylin.job.retry", "abc", "'abc' is not an integer (accepted: 0..100)");
    set_bad(cfg, "kylin.job.retry", "3.5", "not an integer");
    set_bad(cfg, "kylin.job.retry", "", "not an integer");
    set_bad(cfg, "kylin.job.retry", "99999999999999999999", "not an integer");
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 100, "a refused set changes nothing");
    set_ok(cfg, "kylin.job.max-concurrent-jobs", "1");
    set_bad(cfg, "kylin.job.max-concurrent-jobs", "0", "1..10000");
    set_ok(cfg, "qilin.api.page-size-max", "1000");
    set_bad(cfg, "qilin.api.page-size-max", "999", "1000..100000");
    /* An int restricted to a set of values. */
    set_ok(cfg, "kylin.job.scheduler.default", "2");
    set_ok(cfg, "kylin.job.scheduler.default", "100");
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.scheduler.default"), 100);
    set_bad(cfg, "kylin.job.scheduler.default", "1", "one of 0, 2, 100");
    ql_config_free(cfg);
}

Test(config, duration_bounds_and_units) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "kylin.job.retry-interval", "0");
    set_ok(cfg, "kylin.job.retry-interval", "1d");
    cr_assert_eq(ql_config_get_ms(cfg, "kylin.job.retry-interval"), 86400000);
    set_ok(cfg, "kylin.job.retry-interval", "86400000");
    set_bad(cfg, "kylin.job.retry-interval", "86400001", "out of range (accepted: 0ms..1d)");
    set_ok(cfg, "kylin.job.retry-interval", "1h30m");
    cr_assert_eq(ql_config_get_ms(cfg, "kylin.job.retry-interval"), 5400000);
    set_ok(cfg, "kylin.job.retry-interval", "250ms");
    cr_assert_eq(ql_config_get_ms(cfg, "kylin.job.retry-interval"), 250);
    set_bad(cfg, "kylin.job.retry-interval", "-1", "not a duration");
    set_bad(cfg, "kylin.job.retry-interval", "5 minutes", "not a duration");
    set_ok(cfg, "kylin.model.auto-segment-build.dispatcher-interval-ms", "100");
    set_bad(cfg, "kylin.model.auto-segment-build.dispatcher-interval-ms", "99", "100ms..1d");
    set_ok(cfg, "qilin.step.kill-grace-ms", "1h");
    set_bad(cfg, "qilin.step.kill-grace-ms", "3600001", "0ms..1h");
    ql_config_free(cfg);
}

Test(config, size_bounds_and_units) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "qilin.storage.map-size", "1MiB");
    set_ok(cfg, "qilin.storage.map-size", "1048576");
    cr_assert_eq(ql_config_get_size(cfg, "qilin.storage.map-size"), 1048576u);
    set_bad(cfg, "qilin.storage.map-size", "1048575", "out of range (accepted: 1MiB..16TiB)");
    set_bad(cfg, "qilin.storage.map-size", "1023KiB", "out of range");
    set_ok(cfg, "qilin.storage.map-size", "16TiB");
    set_bad(cfg, "qilin.storage.map-size", "17592186044417", "out of range");
    set_ok(cfg, "qilin.storage.map-size", "512 GiB");
    cr_assert_eq(ql_config_get_size(cfg, "qilin.storage.map-size"), 512ull << 30);
    set_bad(cfg, "qilin.storage.map-size", "1GB", "unknown unit 'GB'");
    set_bad(cfg, "qilin.storage.map-size", "lots", "not a size");
    set_bad(cfg, "qilin.storage.map-size", "9999999999TiB", "out of range");
    set_ok(cfg, "qilin.http.max-header-bytes", "1KiB");
    set_bad(cfg, "qilin.http.max-header-bytes", "1023", "1KiB..1MiB");
    set_ok(cfg, "kylin.job.execute-output.max-size", "1GiB");
    set_bad(cfg, "kylin.job.execute-output.max-size", "1073741825", "1KiB..1GiB");
    ql_config_free(cfg);
}

Test(config, bool_enum_path_values) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "qilin.metrics.require-auth", "false");
    cr_assert_not(ql_config_get_bool(cfg, "qilin.metrics.require-auth"));
    set_ok(cfg, "qilin.metrics.require-auth", "TRUE");
    cr_assert(ql_config_get_bool(cfg, "qilin.metrics.require-auth"));
    set_bad(cfg, "qilin.metrics.require-auth", "yes", "accepted: true or false");
    set_ok(cfg, "qilin.shutdown.running-steps", "wait");
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.shutdown.running-steps"), "wait");
    set_bad(cfg, "qilin.shutdown.running-steps", "Pause", "one of pause, wait");
    set_ok(cfg, "qilin.log.level", "debug");
    set_bad(cfg, "qilin.log.level", "trace", "one of debug, info, warn, error");
    set_ok(cfg, "qilin.storage.path", "/var/lib/qilin");
    set_bad(cfg, "qilin.storage.path", "", "non-empty path");
    set_bad(cfg, "qilin.storage.path", "a\nb", "control characters");
    ql_config_free(cfg);
}

Test(config, address_values) {
    ql_config_t *cfg = fresh();
    const char *host;
    int port;
    set_ok(cfg, "qilin.server.listen", "0.0.0.0:0");
    ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
    cr_assert_str_eq(host, "0.0.0.0");
    cr_assert_eq(port, 0);
    set_ok(cfg, "qilin.server.listen", "qilin-1.example.com:65535");
    ql_config_get_address(cfg, "qilin.server.listen", &host, &port);
    cr_assert_str_eq(host, "qilin-1.example.com");
    cr_assert_eq(port, 65535);
    set_bad(cfg, "qilin.server.listen", "localhost:65536", "bad port");
    set_bad(cfg, "qilin.server.listen", "127.0.0.1", "not HOST:PORT");
    set_bad(cfg, "qilin.server.listen", ":7070", "not HOST:PORT");
    set_bad(cfg, "qilin.server.listen", "256.1.1.1:80", "not an IPv4 address");
    set_bad(cfg, "qilin.server.listen", "1.2.3:80", "not an IPv4 address");
    set_bad(cfg, "qilin.server.listen", "::1:80", "needs brackets");
    set_bad(cfg, "qilin.server.listen", "[::g]:80", "not an IPv6 address");
    set_bad(cfg, "qilin.server.listen", "bad_host:80", "not a valid host name");
    set_bad(cfg, "qilin.server.listen", "host:-1", "bad port");
    ql_config_free(cfg);
}

Test(config, timezone_values) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "kylin.web.timezone", "Asia/Shanghai");
    set_ok(cfg, "kylin.web.timezone", "America/New_York");
    set_ok(cfg, "kylin.web.timezone", "UTC");
    set_ok(cfg, "kylin.web.timezone", "");
    set_bad(cfg, "kylin.web.timezone", "Mars/Olympus_Mons", "not a time zone this system knows");
    set_bad(cfg, "kylin.web.timezone", "../../../etc/passwd", "not a time zone");
    set_bad(cfg, "kylin.web.timezone", "/etc/localtime", "not a time zone");
    /* Files in the zoneinfo directory that are not zones. */
    set_bad(cfg, "kylin.web.timezone", "zone.tab", "not a time zone");
    set_bad(cfg, "kylin.web.timezone", "Asia", "not a time zone");
    ql_config_free(cfg);
}

Test(config, string_rules) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "kylin.server.cluster-name", "prod_cluster-2");
    set_bad(cfg, "kylin.server.cluster-name", "a/b", "1 to 64 of");
    set_bad(cfg, "kylin.server.cluster-name", "", "1 to 64 of");
    set_ok(cfg, "kylin.env.zookeeper-base-path", "/");
    set_ok(cfg, "kylin.env.zookeeper-base-path", "/a/b");
    set_bad(cfg, "kylin.env.zookeeper-base-path", "kylin", "absolute ZooKeeper path");
    set_bad(cfg, "kylin.env.zookeeper-base-path", "/kylin/", "absolute ZooKeeper path");
    set_bad(cfg, "kylin.env.zookeeper-base-path", "/a//b", "absolute ZooKeeper path");
    set_bad(cfg, "kylin.env.zookeeper-base-path", "/a/..", "absolute ZooKeeper path");
    set_ok(cfg, "kylin.env.zookeeper-connect-string", "127.0.0.1:2181");
    set_ok(cfg, "kylin.env.zookeeper-connect-string", "zk1:2181,zk2:2182/chroot/x");
    set_bad(cfg, "kylin.env.zookeeper-connect-string", "zk1", "HOST:PORT");
    set_bad(cfg, "kylin.env.zookeeper-connect-string", "zk1:2181,", "HOST:PORT");
    set_bad(cfg, "kylin.env.zookeeper-connect-string", "zk1:0", "HOST:PORT");
    set_bad(cfg, "kylin.env.zookeeper-connect-string", "zk1:2181/a/", "HOST:PORT");
    ql_config_free(cfg);
}

Test(config, server_mode_list_parsing) {
    ql_config_t *cfg = fresh();
    set_ok(cfg, "kylin.server.mode", "job,query");
    cr_assert(ql_config_serves_jobs(cfg));
    cr_assert(ql_config_serves_queries(cfg));
    set_ok(cfg, "kylin.server.mode", "job");
    cr_assert(ql_config_serves_jobs(cfg));
    cr_assert_not(ql_config_serves_queries(cfg));
    set_ok(cfg, "kylin.server.mode", " query ");
    cr_assert_not(ql_config_serves_jobs(cfg));
    cr_assert(ql_config_serves_queries(cfg));
    set_ok(cfg, "kylin.server.mode", "query , job");
    const char *const *items;
    cr_assert_eq(ql_config_get_list(cfg, "kylin.server.mode", &items), 2);
    cr_assert_str_eq(items[0], "query");
    cr_assert_str_eq(items[1], "job");
    set_bad(cfg, "kylin.server.mode", "foo", "unknown item 'foo' (accepted: a comma list");
    set_bad(cfg, "kylin.server.mode", "foo", "all, job, query");
    set_bad(cfg, "kylin.server.mode", "job,foo", "unknown item 'foo'");
    set_bad(cfg, "kylin.server.mode", "", "at least 1");
    set_bad(cfg, "kylin.server.mode", "job,,query", "empty item");
    set_bad(cfg, "kylin.server.mode", "job,job", "twice");
    /* The refused values left the last good one. */
    cr_assert(ql_config_serves_jobs(cfg));
    cr_assert(ql_config_serves_queries(cfg));
    ql_config_free(cfg);
}

Test(config, unknown_key_in_file_names_file_line_and_closest_key) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    char *path = NULL;
    int rc = load_text(cfg, "kylin.job.retry: 1\n\nkylin.job.retyr: 2\n", &err, &path);
    cr_assert_eq(rc, QL_EINVAL);
    char want[256];
    snprintf(want, sizeof want, "%s:3: unknown key 'kylin.job.retyr'", path);
    assert_contains(err.msg, want);
    assert_contains(err.msg, "did you mean 'kylin.job.retry'?");
    free(path);
    /* A missing prefix is hinted too. */
    rc = load_text(cfg, "server.mode: job\n", &err, NULL);
    cr_assert_eq(rc, QL_EINVAL);
    assert_contains(err.msg, "did you mean 'kylin.server.mode'?");
    /* Nothing close: no misleading hint. */
    rc = load_text(cfg, "zzz: 1\n", &err, NULL);
    cr_assert_eq(rc, QL_EINVAL);
    cr_assert_null(strstr(err.msg, "did you mean"), "%s", err.msg);
    ql_config_free(cfg);
}

Test(config, bad_value_in_file_names_line_key_value_and_range) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    char *path = NULL;
    int rc =
        load_text(cfg, "kylin.job.retry: 1\nkylin.job.max-concurrent-jobs: lots\n", &err, &path);
    cr_assert_eq(rc, QL_EINVAL);
    char want[512];
    snprintf(want, sizeof want,
             "%s:2: kylin.job.max-concurrent-jobs: 'lots' is not an integer (accepted: 1..10000)",
             path);
    cr_assert_str_eq(err.msg, want);
    free(path);
    ql_config_free(cfg);
}

Test(config, wrong_shapes_in_file) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(load_text(cfg, "kylin.job.retry: [1, 2]\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, ":1: kylin.job.retry takes a single value, not a list");
    cr_assert_eq(load_text(cfg, "x: 1\nkylin.job.retry:\n  a: 1\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, "unknown key 'x'");
    cr_assert_eq(load_text(cfg, "kylin.job.retry:\n  a: 1\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, ":2: kylin.job.retry takes a single value, not a mapping");
    cr_assert_eq(load_text(cfg, "- kylin.job.retry\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, ":1: expected a mapping");
    /* Nested Kylin-style keys are not the flat form. */
    cr_assert_eq(load_text(cfg, "kylin:\n  job:\n    retry: 1\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, ":1: unknown key 'kylin'");
    cr_assert_eq(load_text(cfg, "kylin.server.mode: [job, [query]]\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, "list items must be plain values");
    cr_assert_eq(load_text(cfg, "kylin.server.mode:\n  - job\n  - 'a,b'\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, ":3: kylin.server.mode: item 1");
    cr_assert_eq(load_text(cfg, "kylin.job.retry: : :\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, ":1:");
    ql_config_free(cfg);
}

Test(config, duplicate_key_in_file) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    char *path = NULL;
    int rc = load_text(cfg, "kylin.job.retry: 1\nqilin.log.level: warn\nkylin.job.retry: 2\n", &err,
                       &path);
    cr_assert_eq(rc, QL_EINVAL);
    char want[256];
    snprintf(want, sizeof want, "%s:3:", path);
    assert_contains(err.msg, want);
    assert_contains(err.msg, "duplicate key");
    assert_contains(err.msg, "line 1");
    free(path);
    ql_config_free(cfg);
}

Test(config, set_arg_overrides_file_and_names_argument_on_error) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(load_text(cfg, "kylin.job.retry: 3\n", &err, NULL), 0, "%s", err.msg);
    cr_assert_eq(ql_config_set_arg(cfg, "kylin.job.retry=5", &err), 0, "%s", err.msg);
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 5);
    int line = -1;
    cr_assert_str_eq(ql_config_source(cfg, "kylin.job.retry", &line), "--set kylin.job.retry=5");
    cr_assert_eq(line, 0);
    /* A value may contain '='. */
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.storage.path=/srv/a=b", &err), 0, "%s", err.msg);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.storage.path"), "/srv/a=b");

    cr_assert_eq(ql_config_set_arg(cfg, "kylin.job.retry=500", &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "--set kylin.job.retry=500: kylin.job.retry: '500' is out of range "
                              "(accepted: 0..100)");
    cr_assert_eq(ql_config_get_int(cfg, "kylin.job.retry"), 5);
    cr_assert_eq(ql_config_set_arg(cfg, "kylin.job.retyr=1", &err), QL_EINVAL);
    assert_contains(err.msg, "--set kylin.job.retyr=1: unknown key 'kylin.job.retyr'");
    assert_contains(err.msg, "did you mean 'kylin.job.retry'?");
    cr_assert_eq(ql_config_set_arg(cfg, "kylin.job.retry", &err), QL_EINVAL);
    assert_contains(err.msg, "--set kylin.job.retry: expected KEY=VALUE");
    cr_assert_eq(ql_config_set_arg(cfg, "=3", &err), QL_EINVAL);
    ql_config_free(cfg);
}

Test(config, project_overridable_vs_not) {
    ql_err_t err = {0};
    cr_assert_eq(ql_config_validate_project_key("kylin.web.timezone", "Asia/Shanghai", &err), 0,
                 "%s", err.msg);
    cr_assert_eq(ql_config_validate_project_key("kylin.job.max-concurrent-jobs", "20", &err), 0,
                 "%s", err.msg);
    cr_assert_eq(
        ql_config_validate_project_key("kylin.cube.schedule.assigned-servers", "a,b", &err), 0,
        "%s", err.msg);
    cr_assert_eq(ql_config_validate_project_key("kylin.web.timezone", "Mars/Base", &err),
                 QL_EINVAL);
    assert_contains(err.msg, "kylin.web.timezone: 'Mars/Base' is not a time zone");
    cr_assert_eq(ql_config_validate_project_key("kylin.job.max-concurrent-jobs", "0", &err),
                 QL_EINVAL);
    assert_contains(err.msg, "1..10000");
    cr_assert_eq(ql_config_validate_project_key("kylin.server.mode", "job", &err), QL_EINVAL);
    assert_contains(err.msg, "'kylin.server.mode' is a server setting");
    assert_contains(err.msg, "kylin.web.timezone");
    cr_assert_eq(ql_config_validate_project_key("qilin.storage.path", "/x", &err), QL_EINVAL);
    cr_assert_eq(ql_config_validate_project_key("kylin.web.timezon", "UTC", &err), QL_EINVAL);
    assert_contains(err.msg, "did you mean 'kylin.web.timezone'?");
    cr_assert_eq(ql_config_validate_project_key("kylin.web.timezone", NULL, &err), QL_EINVAL);
    /* Models may set only model-scoped keys. */
    cr_assert_eq(
        ql_config_validate_model_key("kylin.cube.schedule.assigned-servers", "node-1", &err), 0,
        "%s", err.msg);
    cr_assert_eq(ql_config_validate_model_key("kylin.web.timezone", "UTC", &err), QL_EINVAL);
    cr_assert_eq(ql_config_validate_model_key("kylin.cube.schedule.assigned-servers", "a b", &err),
                 QL_EINVAL);
}

Test(config, parse_int_reads_overrides_like_the_server_value) {
    ql_err_t err = {0};
    int64_t v = -1;
    cr_assert_eq(ql_config_parse_int("kylin.job.max-concurrent-jobs", "20", &v, &err), 0);
    cr_assert_eq(v, 20);
    cr_assert_eq(ql_config_parse_int("kylin.job.retry-interval", "2m", &v, &err), 0);
    cr_assert_eq(v, 120000);
    cr_assert_eq(ql_config_parse_int("qilin.metrics.require-auth", "true", &v, &err), 0);
    cr_assert_eq(v, 1);
    v = -1;
    cr_assert_eq(ql_config_parse_int("kylin.job.retry", "x", &v, &err), QL_EINVAL);
    cr_assert_eq(v, -1, "no output on failure");
    cr_assert_eq(ql_config_parse_int("kylin.web.timezone", "UTC", &v, &err), QL_EINVAL);
}

#define HASH1 "$6$saltsalt$qFmFH.bQmmtXzyBY0s9v7Oicd2z4XSIecDzlB5KiA2/jctKu9YterLp8wwnSq.qc"
#define HASH2 "$y$j9T$abcdefghijklmnop$ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef/"
/* What `qilin passwd` makes (libsodium argon2id): note the commas. */
#define HASH3 "$argon2id$v=19$m=65536,t=2,p=1$myVrpqv/5lxq7JrbHqaosw$6oN+0Zb7b2Q1zk9mH1k0rQ"

Test(config, users_list_from_file) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    int rc = load_text(cfg,
                       "qilin.server.listen: 0.0.0.0:7070\n"
                       "qilin.server.users:\n"
                       "  - name: ADMIN\n"
                       "    password_hash: \"" HASH1 "\"\n"
                       "    role: ADMIN\n"
                       "  - {name: ops, password_hash: '" HASH2 "', role: ADMIN}\n"
                       "  - {name: dev, password_hash: '" HASH3 "', role: ADMIN}\n",
                       &err, NULL);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_not(ql_config_default_user_in_use(cfg));
    const ql_config_user_t *users;
    cr_assert_eq(ql_config_users(cfg, &users), 3);
    cr_assert_str_eq(users[2].password_hash, HASH3);
    cr_assert_str_eq(users[0].name, "ADMIN");
    cr_assert_str_eq(users[0].password_hash, HASH1);
    cr_assert_not(users[0].builtin);
    cr_assert_str_eq(users[1].name, "ops");
    cr_assert_str_eq(users[1].password_hash, HASH2);
    cr_assert_str_eq(users[1].role, "ADMIN");
    cr_assert_eq(ql_config_check(cfg, &err), 0, "configured users may listen anywhere");
    /* An empty list goes back to the built-in user. */
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.server.users=", &err), 0, "%s", err.msg);
    cr_assert(ql_config_default_user_in_use(cfg));
    ql_config_free(cfg);
}

Test(config, users_errors_name_the_entry_and_line) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    char *path = NULL;
    int rc = load_text(cfg,
                       "qilin.server.users:\n"
                       "  - name: a\n"
                       "    password_hash: '" HASH1 "'\n"
                       "    role: ADMIN\n"
                       "  - name: b\n"
                       "    password_hash: KYLIN\n"
                       "    role: ADMIN\n",
                       &err, &path);
    cr_assert_eq(rc, QL_EINVAL);
    char want[256];
    snprintf(want, sizeof want,
             "%s:5: qilin.server.users[1]: user 'b': password_hash is not a "
             "password hash",
             path);
    assert_contains(err.msg, want);
    free(path);
    cr_assert(ql_config_default_user_in_use(cfg), "a refused list changes nothing");

    cr_assert_eq(load_text(cfg, "qilin.server.users:\n  - name: a\n    role: ADMIN\n", &err, NULL),
                 QL_EINVAL);
    assert_contains(err.msg, "missing required key 'password_hash'");
    cr_assert_eq(load_text(cfg,
                           "qilin.server.users:\n  - name: a\n    password: x\n"
                           "    password_hash: '" HASH1 "'\n    role: ADMIN\n",
                           &err, NULL),
                 QL_EINVAL);
    assert_contains(err.msg, ":3: unknown key 'password'");
    cr_assert_eq(load_text(cfg,
                           "qilin.server.users:\n  - {name: a, password_hash: '" HASH1
                           "', role: ANALYST}\n",
                           &err, NULL),
                 QL_EINVAL);
    assert_contains(err.msg, "unknown role 'ANALYST' (accepted: ADMIN, VIEWER)");
    cr_assert_eq(load_text(cfg,
                           "qilin.server.users:\n  - {name: a, password_hash: '" HASH1
                           "', role: ADMIN}\n  - {name: a, password_hash: '" HASH2
                           "', role: ADMIN}\n",
                           &err, NULL),
                 QL_EINVAL);
    assert_contains(err.msg, ":3: qilin.server.users[1]: user 'a' is listed twice");
    cr_assert_eq(load_text(cfg, "qilin.server.users: [ADMIN]\n", &err, NULL), QL_EINVAL);
    assert_contains(err.msg, "expected a mapping");
    ql_config_free(cfg);
}

Test(config, users_from_set_arg) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(
        ql_config_set_arg(cfg, "qilin.server.users=ADMIN:" HASH1 ":ADMIN;x:" HASH3 ":admin", &err),
        0, "%s", err.msg);
    const ql_config_user_t *users;
    cr_assert_eq(ql_config_users(cfg, &users), 2);
    cr_assert_str_eq(users[1].name, "x");
    cr_assert_str_eq(users[1].password_hash, HASH3);
    cr_assert_str_eq(users[1].role, "ADMIN", "the role is stored in canonical case");
    int line;
    cr_assert_null(strstr(ql_config_source(cfg, "qilin.server.users", &line), "$6$"),
                   "the source does not repeat the hash");
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.server.users=ADMIN:KYLIN:ADMIN", &err), QL_EINVAL);
    assert_contains(err.msg, "not a password hash");
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.server.users=ADMIN", &err), QL_EINVAL);
    assert_contains(err.msg, "NAME:PASSWORD_HASH:ROLE");
    cr_assert_eq(
        ql_config_set_arg(cfg, "qilin.server.users=a:" HASH1 ":ADMIN;A:" HASH2 ":ADMIN", &err),
        QL_EINVAL);
    assert_contains(err.msg, "user 'A' is listed twice");
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.server.users=a:$1$abcdefgh$xyz:ADMIN", &err),
                 QL_EINVAL, "MD5 crypt is not a format the authenticator accepts");
    ql_config_free(cfg);
}

Test(config, generated_admin_refused_off_loopback) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    static const char *const loopback[] = {"127.0.0.1:7070", "127.1.2.3:1", "localhost:7070",
                                           "[::1]:7070"};
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++) {
        set_ok(cfg, "qilin.server.listen", loopback[i]);
        cr_assert_eq(ql_config_check(cfg, &err), 0, "%s: %s", loopback[i], err.msg);
    }
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.server.listen=0.0.0.0:7070", &err), 0);
    cr_assert_eq(ql_config_check(cfg, &err), QL_EINVAL);
    assert_contains(err.msg, "--set qilin.server.listen=0.0.0.0:7070: qilin.server.listen");
    assert_contains(err.msg, "no users are configured");
    assert_contains(err.msg, "set qilin.server.users");
    set_ok(cfg, "qilin.server.listen", "[::]:7070");
    cr_assert_eq(ql_config_check(cfg, &err), QL_EINVAL);
    ql_config_free(cfg);
}

Test(config, getter_of_unknown_key_aborts, .signal = SIGABRT) {
    ql_config_t *cfg = fresh();
    ql_config_get_int(cfg, "kylin.job.no-such-key");
}

Test(config, getter_of_wrong_type_aborts, .signal = SIGABRT) {
    ql_config_t *cfg = fresh();
    ql_config_get_int(cfg, "kylin.job.retry-interval"); /* a duration: ql_config_get_ms */
}

Test(config, dump_round_trips) {
    ql_config_t *a = fresh();
    set_ok(a, "kylin.server.mode", "job,query");
    set_ok(a, "kylin.job.retry", "7");
    set_ok(a, "kylin.job.retry-interval", "2m");
    set_ok(a, "qilin.storage.map-size", "3GiB");
    set_ok(a, "qilin.storage.path", "/srv/\"quoted\" \\dir");
    set_ok(a, "kylin.web.timezone", "Europe/Berlin");
    set_ok(a, "qilin.metrics.require-auth", "false");
    set_ok(a, "qilin.server.listen", "[::1]:9000");
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    cr_assert_eq(ql_config_dump(a, mem), 0);
    fclose(mem);
    assert_contains(buf, "kylin.job.retry: 7  # test\n");
    assert_contains(buf, "qilin.log.level: \"info\"  # default\n");
    assert_contains(buf, "qilin.server.users: []");

    ql_config_t *b = fresh();
    ql_err_t err = {0};
    cr_assert_eq(load_text(b, buf, &err, NULL), 0, "%s\n%s", err.msg, buf);
    cr_assert_eq(ql_config_get_int(b, "kylin.job.retry"), 7);
    cr_assert_eq(ql_config_get_ms(b, "kylin.job.retry-interval"), 120000);
    cr_assert_eq(ql_config_get_size(b, "qilin.storage.map-size"), 3ull << 30);
    cr_assert_str_eq(ql_config_get_str(b, "qilin.storage.path"), "/srv/\"quoted\" \\dir");
    cr_assert_str_eq(ql_config_get_str(b, "kylin.web.timezone"), "Europe/Berlin");
    cr_assert_not(ql_config_get_bool(b, "qilin.metrics.require-auth"));
    cr_assert(ql_config_serves_jobs(b) && ql_config_serves_queries(b));
    cr_assert_not(ql_config_list_has(b, "kylin.server.mode", "all"));
    cr_assert_str_eq(ql_config_get_str(b, "qilin.server.listen"), "[::1]:9000");
    free(buf);
    ql_config_free(a);
    ql_config_free(b);
}

Test(config, dump_redacts_password_hashes) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.server.users=ADMIN:" HASH1 ":ADMIN", &err), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    cr_assert_eq(ql_config_dump(cfg, mem), 0);
    fclose(mem);
    cr_assert_null(strstr(buf, "$6$"), "%s", buf);
    assert_contains(buf, "name: \"ADMIN\"");
    free(buf);
    ql_config_free(cfg);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    char *buf = NULL;
    size_t cap = 0;
    FILE *mem = open_memstream(&buf, &cap);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(f);
    fclose(mem);
    *len = cap;
    return buf;
}

Test(config, docs_file_is_up_to_date) {
    char *gen = NULL;
    size_t gen_len = 0;
    FILE *mem = open_memstream(&gen, &gen_len);
    cr_assert_eq(ql_config_write_markdown(mem), 0);
    fclose(mem);
    size_t len;
    char *doc = read_all(QL_SOURCE_DIR "/docs/configuration.md", &len);
    cr_assert(len == gen_len && memcmp(doc, gen, len) == 0,
              "docs/configuration.md is stale: regenerate it with "
              "`build/tools/gen-config-doc docs/configuration.md`");
    /* Every key is documented. */
    size_t n;
    const ql_config_option_t *opts = ql_config_options(&n);
    for (size_t i = 0; i < n; i++) {
        char cell[160];
        snprintf(cell, sizeof cell, "| `%s` |", opts[i].key);
        assert_contains(doc, cell);
    }
    free(doc);
    free(gen);
}

Test(config, shipped_config_file_loads_and_passes_checks) {
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(ql_config_load_file(cfg, QL_SOURCE_DIR "/conf/qilin.yaml", &err), 0, "%s",
                 err.msg);
    cr_assert_eq(ql_config_check(cfg, &err), 0, "%s", err.msg);
    /* Every commonly changed key appears in it, at least as a comment. */
    size_t len;
    char *text = read_all(QL_SOURCE_DIR "/conf/qilin.yaml", &len);
    static const char *const keys[] = {"kylin.server.mode",
                                       "kylin.job.scheduler.default",
                                       "kylin.job.max-concurrent-jobs",
                                       "kylin.web.timezone",
                                       "qilin.server.listen",
                                       "qilin.server.users",
                                       "qilin.storage.path",
                                       "kylin.env.zookeeper-connect-string",
                                       "qilin.log.level"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_contains(text, keys[i]);
    free(text);
    ql_config_free(cfg);
}

/* Where other servers send a client for this server's REST API (a step's log): the listen host,
 * a name for a wildcard listen address, nothing while the port is not known. */
Test(config, api_address_for_other_servers) {
    char host[256] = "localhost", want[300], buf[300];
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    const struct {
        const char *listen, *allowed, *want; /* want NULL: the machine's host name, port 7070 */
    } t[] = {
        {"10.0.0.5:7070", "", "10.0.0.5:7070"},
        {"build-1.example.com:8080", "", "build-1.example.com:8080"},
        {"[fd00::7]:7070", "", "[fd00::7]:7070"},
        {"0.0.0.0:7070", "qilin.example.com,other", "qilin.example.com:7070"},
        {"[::]:7070", "fd00::9", "[fd00::9]:7070"},
        {"0.0.0.0:7070", "", NULL},
        {"127.0.0.1:0", "", ""},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ql_config_t *cfg = fresh();
        set_ok(cfg, "qilin.server.listen", t[i].listen);
        set_ok(cfg, "qilin.server.allowed-hosts", t[i].allowed);
        if (t[i].want)
            snprintf(want, sizeof want, "%s", t[i].want);
        else
            snprintf(want, sizeof want, "%s:7070", host);
        cr_assert_str_eq(ql_config_api_address(cfg, buf, sizeof buf), want, "listen %s",
                         t[i].listen);
        ql_config_free(cfg);
    }
}

/* Writes text to dir/name (both borrowed). */
static void put_file(const char *dir, const char *name, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* A relative path key in a file is relative to the file's folder, whatever the working
 * directory; an absolute one is kept; --set stays relative to the working directory; and a
 * file written for the working directory (nothing at the file-relative path, something at the
 * working-directory one) keeps working. */
Test(config, relative_paths_in_a_file_resolve_against_its_folder) {
    char dir[4096], etc[4200], file[4300], cwd[4096], real[4096];
    ql_test_tmpdir(dir, sizeof dir, "config-relpath");
    snprintf(etc, sizeof etc, "%s/etc", dir);
    cr_assert_eq(mkdir(etc, 0700), 0);
    put_file(etc, "jobs.yaml", "templates: {}\n");
    put_file(etc, "qilin.yaml", "qilin.storage.path: ./data\nqilin.jobs.templates: jobs.yaml\n");
    snprintf(file, sizeof file, "%s/qilin.yaml", etc);
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir("/"), 0);
    cr_assert_not_null(realpath(etc, real));
    ql_config_t *cfg = fresh();
    ql_err_t err = {0};
    cr_assert_eq(ql_config_load_file(cfg, file, &err), 0, "%s", err.msg);
    char want[4300];
    snprintf(want, sizeof want, "%s/data", real);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.storage.path"), want);
    snprintf(want, sizeof want, "%s/jobs.yaml", real);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.jobs.templates"), want);
    int line = 0;
    cr_assert_str_eq(ql_config_source(cfg, "qilin.storage.path", &line), file);
    cr_assert_eq(line, 1);
    /* --set (and --data) values are the working directory's. */
    cr_assert_eq(ql_config_set_arg(cfg, "qilin.storage.path=rel", &err), 0, "%s", err.msg);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.storage.path"), "rel");
    ql_config_free(cfg);

    /* Loaded through a relative file name from the folder above: the same absolute paths. */
    cr_assert_eq(chdir(dir), 0);
    cfg = fresh();
    cr_assert_eq(ql_config_load_file(cfg, "etc/qilin.yaml", &err), 0, "%s", err.msg);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.jobs.templates"), want);
    ql_config_free(cfg);

    /* Written for the working directory: etc/other.yaml names "etc/jobs.yaml", which exists
     * from dir but not from etc/: kept as written. An absolute path is kept too. */
    put_file(etc, "other.yaml",
             "qilin.jobs.templates: etc/jobs.yaml\nqilin.storage.path: /srv/q\n");
    cfg = fresh();
    cr_assert_eq(ql_config_load_file(cfg, "etc/other.yaml", &err), 0, "%s", err.msg);
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.jobs.templates"), "etc/jobs.yaml");
    cr_assert_str_eq(ql_config_get_str(cfg, "qilin.storage.path"), "/srv/q");
    ql_config_free(cfg);

    /* The shipped files, loaded from /: their data directories are the repository's. */
    cr_assert_eq(chdir("/"), 0);
    char repo[4096];
    cr_assert_not_null(realpath(QL_SOURCE_DIR, repo));
    static const struct {
        const char *file, *data;
    } shipped[] = {{"conf/qilin.yaml", "data"}, {"conf/demo.yaml", "demo-data"}};
    for (size_t i = 0; i < 2; i++) {
        cfg = fresh();
        snprintf(file, sizeof file, "%s/%s", repo, shipped[i].file);
        cr_assert_eq(ql_config_load_file(cfg, file, &err), 0, "%s", err.msg);
        snprintf(want, sizeof want, "%s/%s", repo, shipped[i].data);
        cr_assert_str_eq(ql_config_get_str(cfg, "qilin.storage.path"), want);
        snprintf(want, sizeof want, "%s/conf/jobs.yaml", repo);
        cr_assert_str_eq(ql_config_get_str(cfg, "qilin.jobs.templates"), want);
        ql_config_free(cfg);
    }
    cr_assert_eq(chdir(cwd), 0);
}
