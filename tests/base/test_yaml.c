/* The YAML document layer: positions, strict typing, and the inputs it must refuse. */
#include "base/ql_error.h"
#include "base/ql_yaml.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Loads text (NUL-terminated) named "t.yaml"; returns the code, doc set on success. */
static int load(const char *text, ql_yaml_doc_t **doc, ql_err_t *err) {
    ql_err_clear(err);
    return ql_yaml_load_buffer(text, strlen(text), "t.yaml", 0, doc, err);
}

static const ql_yaml_node_t *load_ok(const char *text, ql_yaml_doc_t **doc) {
    ql_err_t err;
    int rc = load(text, doc, &err);
    cr_assert_eq(rc, 0, "load failed: %s", err.msg);
    return ql_yaml_doc_root(*doc);
}

/* Asserts that text fails to load with QL_EINVAL and a message starting with prefix. */
static void expect_load_error(const char *text, const char *prefix, const char *fragment) {
    ql_yaml_doc_t *doc = NULL;
    ql_err_t err;
    int rc = load(text, &doc, &err);
    cr_assert_eq(rc, QL_EINVAL, "expected QL_EINVAL for <<%s>>, got %d (%s)", text, rc, err.msg);
    cr_assert_eq(strncmp(err.msg, prefix, strlen(prefix)), 0, "message '%s' should start '%s'",
                 err.msg, prefix);
    if (fragment)
        cr_assert(strstr(err.msg, fragment), "message '%s' should contain '%s'", err.msg, fragment);
}

Test(yaml, tree_keeps_positions_and_file_name) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("# header\n"
                                         "name: job\n"
                                         "list:\n"
                                         "  - a\n"
                                         "  - 'b c'\n"
                                         "map: {x: 1}\n",
                                         &doc);
    cr_assert_eq(root->kind, QL_YAML_MAPPING);
    cr_assert_eq(root->n_pairs, 3);
    cr_assert_str_eq(root->pairs[0].key->str, "name");
    cr_assert_eq(root->pairs[0].key->line, 2);
    cr_assert_eq(root->pairs[0].key->column, 1);
    cr_assert_eq(root->pairs[0].value->column, 7);
    const ql_yaml_node_t *list = ql_yaml_map_find(root, "list");
    cr_assert_eq(list->kind, QL_YAML_SEQUENCE);
    cr_assert_eq(list->n_items, 2);
    cr_assert_eq(list->items[1]->line, 5);
    cr_assert_str_eq(list->items[1]->str, "b c");
    cr_assert(list->items[0]->plain);
    cr_assert_not(list->items[1]->plain);
    const ql_yaml_node_t *map = ql_yaml_map_find(root, "map");
    cr_assert_eq(map->line, 6);
    cr_assert_str_eq(map->file, "t.yaml");
    cr_assert_str_eq(ql_yaml_doc_name(doc), "t.yaml");
    cr_assert_null(ql_yaml_map_find(root, "nope"));
    cr_assert_null(ql_yaml_map_find(list, "a"));
    ql_yaml_doc_free(doc);
}

Test(yaml, json_object_parses_like_yaml) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("{\n"
                                         "\t\"project\": \"p1\",\n"
                                         "\t\"priority\":2,\n"
                                         "\t\"ok\": true,\n"
                                         "\t\"none\": null,\n"
                                         "\t\"esc\": \"a\\/b\\u00e9\\n\",\n"
                                         "\t\"list\": [\"x\", 1, {\"k\": []}]\n"
                                         "}\n",
                                         &doc);
    ql_err_t err;
    const char *s;
    int64_t i;
    bool b;
    cr_assert_eq(ql_yaml_get_str(root, "project", QL_YAML_REQUIRED, &s, &err), 0, "%s", err.msg);
    cr_assert_str_eq(s, "p1");
    cr_assert_eq(ql_yaml_get_int(root, "priority", QL_YAML_REQUIRED, 0, 4, &i, &err), 0);
    cr_assert_eq(i, 2);
    cr_assert_eq(ql_yaml_get_bool(root, "ok", QL_YAML_REQUIRED, &b, &err), 0);
    cr_assert(b);
    cr_assert(ql_yaml_is_null(ql_yaml_map_find(root, "none")));
    cr_assert_eq(ql_yaml_get_str(root, "esc", QL_YAML_REQUIRED, &s, &err), 0);
    cr_assert_str_eq(s, "a/b\xc3\xa9\n");
    const ql_yaml_node_t *list = ql_yaml_map_find(root, "list");
    cr_assert_eq(list->n_items, 3);
    cr_assert_eq(list->items[2]->kind, QL_YAML_MAPPING);
    cr_assert_eq(list->items[2]->line, 7);
    ql_yaml_doc_free(doc);
}

Test(yaml, json_errors_have_lines) {
    expect_load_error("{\n  \"a\": 1,\n  \"b\": [1, 2\n}\n", "t.yaml:", NULL);
    expect_load_error("{\"a\": 1, \"a\": 2}", "t.yaml:1: duplicate key 'a'", NULL);
}

Test(yaml, duplicate_keys_are_errors) {
    expect_load_error("a: 1\nb: 2\na: 3\n", "t.yaml:3: duplicate key 'a' (first at line 1)", NULL);
    expect_load_error("outer:\n  x: 1\n  \"x\": 2\n", "t.yaml:3: duplicate key 'x'", NULL);
    /* The same key in different mappings is fine. */
    ql_yaml_doc_t *doc;
    load_ok("a: {x: 1}\nb: {x: 2}\n", &doc);
    ql_yaml_doc_free(doc);
}

Test(yaml, a_second_document_is_an_error) {
    expect_load_error("a: 1\n---\nb: 2\n", "t.yaml:2: a second YAML document", NULL);
    expect_load_error("---\na: 1\n...\n---\nb: 2\n", "t.yaml:4:", "second YAML document");
}

Test(yaml, empty_input) {
    expect_load_error("", "t.yaml:1: the document is empty", NULL);
    expect_load_error("# nothing but a comment\n\n", "t.yaml:1: the document is empty", NULL);
    ql_yaml_doc_t *doc;
    ql_err_t err;
    cr_assert_eq(ql_yaml_load_buffer("", 0, "c.yaml", QL_YAML_ALLOW_EMPTY, &doc, &err), 0);
    const ql_yaml_node_t *root = ql_yaml_doc_root(doc);
    cr_assert(ql_yaml_is_null(root));
    cr_assert_eq(root->line, 1);
    ql_yaml_doc_free(doc);
}

Test(yaml, tabs_get_a_hint) {
    expect_load_error("a:\n\tb: 2\n", "t.yaml:2:", "tabs");
    expect_load_error("a: 1\n\tb: 2\n", "t.yaml:2:", "tab");
}

Test(yaml, syntax_errors_name_the_line) {
    expect_load_error("a: 1\n  b: 2\n", "t.yaml:2: mapping values are not allowed", NULL);
    expect_load_error("a: [1, 2\n", "t.yaml:1:", "flow sequence");
    expect_load_error("a: 1\nb: \"open\n", "t.yaml:2:", "quoted scalar");
    expect_load_error("a: 1\nb: 2\nc: \xc3\x28\n", "t.yaml:3:", "UTF-8");
}

Test(yaml, aliases_resolve_to_the_anchored_node) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("base: &b {x: 1, y: [a, b]}\n"
                                         "copy: *b\n",
                                         &doc);
    const ql_yaml_node_t *base = ql_yaml_map_find(root, "base");
    const ql_yaml_node_t *copy = ql_yaml_map_find(root, "copy");
    cr_assert_eq(base, copy);
    cr_assert_eq(copy->line, 1, "an alias keeps the position of the anchored definition");
    ql_yaml_doc_free(doc);
}

Test(yaml, bad_aliases_are_errors) {
    expect_load_error("a: *nope\n", "t.yaml:1: alias '*nope' refers to no anchor", NULL);
    /* An anchor cannot be used inside its own node (that would be a cycle). */
    expect_load_error("a: &x [1, *x]\n", "t.yaml:1: alias '*x'", NULL);
    expect_load_error("base: &b {x: 1}\n<<: *b\n", "t.yaml:2: merge keys", NULL);
    expect_load_error("? [1]\n: 2\n", "t.yaml:1: mapping keys must be scalars", NULL);
}

Test(yaml, billion_laughs_is_refused) {
    /* 10 levels of 10 aliases each would expand to 10^10 nodes. */
    char text[4096];
    size_t o = (size_t)snprintf(text, sizeof text, "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i <= 10; i++) {
        o += (size_t)snprintf(text + o, sizeof text - o, "l%d: &l%d [", i, i);
        for (int j = 0; j < 10; j++)
            o += (size_t)snprintf(text + o, sizeof text - o, "%s*l%d", j ? ", " : "", i - 1);
        o += (size_t)snprintf(text + o, sizeof text - o, "]\n");
    }
    ql_yaml_doc_t *doc = NULL;
    ql_err_t err;
    cr_assert_eq(load(text, &doc, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "expands to more than"), "%s", err.msg);
    /* Level 5 holds 10^6 x's plus the sequences: the budget runs out on line 6 or 7. */
    cr_assert(strncmp(err.msg, "t.yaml:6:", 9) == 0 || strncmp(err.msg, "t.yaml:7:", 9) == 0, "%s",
              err.msg);
}

Test(yaml, deep_nesting_is_refused) {
    size_t depth = QL_YAML_MAX_DEPTH + 10;
    char *text = malloc(2 * depth + 1);
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[2 * depth] = '\0';
    expect_load_error(text, "t.yaml:1: nesting deeper than", NULL);
    free(text);
}

Test(yaml, tags_other_than_core_ones_are_refused) {
    expect_load_error("a: !!int 3\n", "t.yaml:1: tag 'tag:yaml.org,2002:int' is not supported",
                      NULL);
    expect_load_error("a: !custom x\n", "t.yaml:1: tag '!custom'", NULL);
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("a: !!str 3\n", &doc);
    const ql_yaml_node_t *a = ql_yaml_map_find(root, "a");
    cr_assert_not(a->plain, "!!str makes a string");
    ql_err_t err;
    int64_t v;
    cr_assert_eq(ql_yaml_as_int(a, "key 'a'", 0, 10, &v, &err), QL_EINVAL);
    ql_yaml_doc_free(doc);
}

Test(yaml, check_keys_lists_the_expected_ones) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("a: 1\nb: 2\nx: 3\n", &doc);
    static const char *const allowed[] = {"a", "b", "c", NULL};
    ql_err_t err;
    cr_assert_eq(ql_yaml_check_keys(root, allowed, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:3: unknown key 'x' (expected one of: a, b, c)");
    static const char *const all[] = {"a", "b", "x", NULL};
    cr_assert_eq(ql_yaml_check_keys(root, all, &err), 0);
    ql_yaml_doc_free(doc);
}

Test(yaml, string_getter) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("s: hello\n"
                                         "n: 123\n"
                                         "q: 'true'\n"
                                         "nul: ~\n"
                                         "empty:\n"
                                         "seq: [1]\n"
                                         "zero: \"a\\0b\"\n",
                                         &doc);
    ql_err_t err;
    const char *s = "default";
    cr_assert_eq(ql_yaml_get_str(root, "s", QL_YAML_REQUIRED, &s, &err), 0);
    cr_assert_str_eq(s, "hello");
    cr_assert_eq(ql_yaml_get_str(root, "n", QL_YAML_REQUIRED, &s, &err), 0);
    cr_assert_str_eq(s, "123");
    cr_assert_eq(ql_yaml_get_str(root, "q", QL_YAML_REQUIRED, &s, &err), 0);
    cr_assert_str_eq(s, "true");
    s = "default";
    cr_assert_eq(ql_yaml_get_str(root, "missing", QL_YAML_OPTIONAL, &s, &err), 0);
    cr_assert_str_eq(s, "default", "an absent optional key leaves the default");
    cr_assert_eq(ql_yaml_get_str(root, "missing", QL_YAML_REQUIRED, &s, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:1: missing required key 'missing'");
    cr_assert_eq(ql_yaml_get_str(root, "nul", QL_YAML_OPTIONAL, &s, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:4: key 'nul': expected a string, got null");
    cr_assert_eq(ql_yaml_get_str(root, "empty", QL_YAML_OPTIONAL, &s, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "t.yaml:5: key 'empty': expected a string"), "%s", err.msg);
    cr_assert_eq(ql_yaml_get_str(root, "seq", QL_YAML_OPTIONAL, &s, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:6: key 'seq': expected a string, got a sequence");
    cr_assert_eq(ql_yaml_get_str(root, "zero", QL_YAML_OPTIONAL, &s, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "NUL"), "%s", err.msg);
    ql_yaml_doc_free(doc);
}

Test(yaml, bool_getter_accepts_true_and_false_only) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root =
        load_ok("t: true\nf: false\ny: yes\non: on\nq: \"true\"\nT: True\n", &doc);
    ql_err_t err;
    bool b = false;
    cr_assert_eq(ql_yaml_get_bool(root, "t", QL_YAML_REQUIRED, &b, &err), 0);
    cr_assert(b);
    cr_assert_eq(ql_yaml_get_bool(root, "f", QL_YAML_REQUIRED, &b, &err), 0);
    cr_assert_not(b);
    const char *bad[] = {"y", "on", "q", "T"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(ql_yaml_get_bool(root, bad[i], QL_YAML_REQUIRED, &b, &err), QL_EINVAL, "%s",
                     bad[i]);
        cr_assert(strstr(err.msg, "expected true or false"), "%s", err.msg);
    }
    cr_assert_eq(ql_yaml_get_bool(root, "y", QL_YAML_REQUIRED, &b, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:3: key 'y': expected true or false, got 'yes'");
    ql_yaml_doc_free(doc);
}

Test(yaml, int_getter_checks_syntax_and_bounds) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("a: 42\n"
                                         "neg: -7\n"
                                         "big: 150\n"
                                         "hex: 0x10\n"
                                         "lead: 010\n"
                                         "float: 1.5\n"
                                         "quoted: \"5\"\n"
                                         "huge: 99999999999999999999\n"
                                         "max: 9223372036854775807\n"
                                         "min: -9223372036854775808\n",
                                         &doc);
    ql_err_t err;
    int64_t v = 0;
    cr_assert_eq(ql_yaml_get_int(root, "a", QL_YAML_REQUIRED, 0, 100, &v, &err), 0);
    cr_assert_eq(v, 42);
    cr_assert_eq(ql_yaml_get_int(root, "neg", QL_YAML_REQUIRED, -10, 10, &v, &err), 0);
    cr_assert_eq(v, -7);
    cr_assert_eq(ql_yaml_get_int(root, "big", QL_YAML_REQUIRED, 0, 100, &v, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:3: key 'big': expected an integer between 0 and 100, got "
                              "'150'");
    cr_assert_eq(ql_yaml_get_int(root, "neg", QL_YAML_REQUIRED, 0, INT64_MAX, &v, &err), QL_EINVAL);
    cr_assert(strstr(err.msg, "expected an integer >= 0"), "%s", err.msg);
    const char *bad[] = {"hex", "lead", "float", "quoted", "huge"};
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(
            ql_yaml_get_int(root, bad[i], QL_YAML_REQUIRED, INT64_MIN, INT64_MAX, &v, &err),
            QL_EINVAL, "%s should be refused", bad[i]);
    cr_assert_eq(ql_yaml_get_int(root, "max", QL_YAML_REQUIRED, INT64_MIN, INT64_MAX, &v, &err), 0);
    cr_assert_eq(v, INT64_MAX);
    cr_assert_eq(ql_yaml_get_int(root, "min", QL_YAML_REQUIRED, INT64_MIN, INT64_MAX, &v, &err), 0);
    cr_assert_eq(v, INT64_MIN);
    ql_yaml_doc_free(doc);
}

Test(yaml, durations) {
    static const struct {
        const char *text;
        int64_t ms;
    } good[] = {
        {"500ms", 500},   {"90s", 90000},       {"5m", 300000}, {"2h", 7200000},
        {"1d", 86400000}, {"1h30m", 5400000},   {"0", 0},       {"250", 250},
        {"1m30s", 90000}, {"2d12h", 216000000}, {"0s", 0},      {"1s500ms", 1500},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int64_t ms = -1;
        cr_assert_eq(ql_yaml_parse_duration(good[i].text, &ms), 0, "%s", good[i].text);
        cr_assert_eq(ms, good[i].ms, "%s: %lld", good[i].text, (long long)ms);
    }
    static const char *const bad[] = {
        "",   "s", "5x", "-5s", "5 s", "1.5h", "h5", "5S", "5mm", "ms", "99999999999999999999d",
        "1e3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 77;
        cr_assert_eq(ql_yaml_parse_duration(bad[i], &ms), QL_EINVAL, "'%s' should fail", bad[i]);
        cr_assert_eq(ms, 77, "no output on failure");
    }

    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root =
        load_ok("t: 5m\nq: \"90s\"\nn: 1500\nbad: 5 minutes\nnul: ~\nj: {\"x\": \"2h\"}\n", &doc);
    ql_err_t err;
    int64_t ms;
    cr_assert_eq(ql_yaml_get_duration(root, "t", QL_YAML_REQUIRED, &ms, &err), 0);
    cr_assert_eq(ms, 300000);
    cr_assert_eq(ql_yaml_get_duration(root, "q", QL_YAML_REQUIRED, &ms, &err), 0);
    cr_assert_eq(ms, 90000);
    cr_assert_eq(ql_yaml_get_duration(root, "n", QL_YAML_REQUIRED, &ms, &err), 0);
    cr_assert_eq(ms, 1500, "a bare number is milliseconds");
    cr_assert_eq(
        ql_yaml_get_duration(ql_yaml_map_find(root, "j"), "x", QL_YAML_REQUIRED, &ms, &err), 0);
    cr_assert_eq(ms, 7200000);
    cr_assert_eq(ql_yaml_get_duration(root, "bad", QL_YAML_REQUIRED, &ms, &err), QL_EINVAL);
    cr_assert(strncmp(err.msg, "t.yaml:4: key 'bad': expected a duration", 40) == 0, "%s", err.msg);
    cr_assert(strstr(err.msg, "'5 minutes'"), "%s", err.msg);
    cr_assert_eq(ql_yaml_get_duration(root, "nul", QL_YAML_REQUIRED, &ms, &err), QL_EINVAL);
    ql_yaml_doc_free(doc);
}

Test(yaml, string_sequences) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root =
        load_ok("argv: [prog, '--x=1', 3]\nempty: []\nmixed:\n  - a\n  - [b]\nnot: s\n", &doc);
    ql_err_t err;
    char **v = NULL;
    size_t n = 0;
    cr_assert_eq(ql_yaml_get_strv(root, "argv", QL_YAML_REQUIRED, true, &v, &n, &err), 0);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(v[0], "prog");
    cr_assert_str_eq(v[1], "--x=1");
    cr_assert_str_eq(v[2], "3");
    cr_assert_null(v[3]);
    ql_yaml_strv_free(v);
    v = NULL;
    cr_assert_eq(ql_yaml_get_strv(root, "empty", QL_YAML_REQUIRED, false, &v, &n, &err), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(v[0]);
    ql_yaml_strv_free(v);
    v = NULL;
    cr_assert_eq(ql_yaml_get_strv(root, "empty", QL_YAML_REQUIRED, true, &v, &n, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg,
                     "t.yaml:2: key 'empty': expected a non-empty sequence of strings, got a "
                     "sequence");
    cr_assert_eq(ql_yaml_get_strv(root, "mixed", QL_YAML_REQUIRED, true, &v, &n, &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:5: key 'mixed' item 2: expected a string, got a sequence");
    cr_assert_null(v, "nothing is returned on failure");
    cr_assert_eq(ql_yaml_get_strv(root, "not", QL_YAML_REQUIRED, false, &v, &n, &err), QL_EINVAL);
    ql_yaml_doc_free(doc);
}

Test(yaml, expect_and_describe) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root =
        load_ok("s: a very long scalar value that goes on and on and on past forty chars\n"
                "ctl: \"a\\tb\"\n",
                &doc);
    ql_err_t err;
    cr_assert_eq(ql_yaml_expect(root, QL_YAML_MAPPING, "the document", &err), 0);
    cr_assert_eq(ql_yaml_expect(root, QL_YAML_SEQUENCE, "the document", &err), QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:1: the document: expected a sequence, got a mapping");
    char buf[64];
    ql_yaml_describe(ql_yaml_map_find(root, "s"), buf, sizeof buf);
    cr_assert(strlen(buf) < 50 && strstr(buf, "..."), "%s", buf);
    ql_yaml_describe(ql_yaml_map_find(root, "ctl"), buf, sizeof buf);
    cr_assert_str_eq(buf, "'a?b'");
    ql_yaml_doc_free(doc);
}

Test(yaml, load_file_and_missing_file) {
    char dir[256], path[300];
    ql_test_tmpdir(dir, sizeof dir, "ql_yaml_test");
    snprintf(path, sizeof path, "%s/t.yaml", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    cr_assert_geq(fd, 0);
    const char *text = "a: 1\nb: [x\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ql_yaml_doc_t *doc = NULL;
    ql_err_t err;
    cr_assert_eq(ql_yaml_load_file(path, 0, &doc, &err), QL_EINVAL);
    char prefix[320];
    snprintf(prefix, sizeof prefix, "%s:2:", path);
    cr_assert_eq(strncmp(err.msg, prefix, strlen(prefix)), 0, "%s", err.msg);
    unlink(path);
    int rc = ql_yaml_load_file(path, 0, &doc, &err);
    cr_assert_lt(rc, 0);
    cr_assert_neq(rc, QL_EINVAL);
    cr_assert(strstr(err.msg, "cannot read"), "%s", err.msg);
    cr_assert_lt(ql_yaml_load_file(dir, 0, &doc, &err), 0); /* a directory */
}

Test(yaml, errorf_prefixes_position) {
    ql_yaml_doc_t *doc;
    const ql_yaml_node_t *root = load_ok("a:\n  b: 1\n", &doc);
    ql_err_t err;
    const ql_yaml_node_t *b = ql_yaml_map_find(ql_yaml_map_find(root, "a"), "b");
    cr_assert_eq(ql_yaml_errorf(&err, b, "bad %s", "thing"), QL_EINVAL);
    cr_assert_eq(err.code, QL_EINVAL);
    cr_assert_str_eq(err.msg, "t.yaml:2: bad thing");
    ql_yaml_doc_free(doc);
}

Test(yaml, oversized_input_is_refused) {
    ql_yaml_doc_t *doc;
    ql_err_t err;
    static const char c = 'a';
    cr_assert_eq(ql_yaml_load_buffer(&c, (size_t)QL_YAML_MAX_INPUT + 1, "big", 0, &doc, &err),
                 QL_ETOOBIG);
}
