/*
 * The held list of Kylin 5 request bodies (the JSON files of tests/api/kylin_requests, described in
 * its README.md) replayed against the real qilind on 127.0.0.1: each file is a scenario run in
 * order on a fresh server and data directory. A request is sent with its exact body and must
 * answer its status (and, for a failure, its error code and a part of its message); values
 * captured from earlier answers are substituted as ${NAME}; `wait` polls a job's state with a
 * deadline; `expect` checks values of the answer. Every file that is there is replayed: adding
 * a request body is adding a JSON object.
 */
#include "tests/api/rest_util.h"

#include <dirent.h>

#define REQ_DIR QL_SOURCE_DIR "/tests/api/kylin_requests"
#define MAX_VARS 32

static qd_t Q;

/* INC_BUILD, INDEX_REFRESH and INDEX_MERGE print the parameters Kylin's optional fields pass
 * to steps; the "slow" set's builds wait 10 minutes (for the job action scenarios), the "fails"
 * set's fail in their second step. */
static const char TEMPLATES[] =
    "templates:\n"
    "  INC_BUILD:\n"
    "    steps:\n"
    "      - name: build\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'printf \"queue=%s tag=%s\\n\" \"$QILIN_YARN_QUEUE\" "
    "\"$QILIN_TAG\"']\n"
    "  INDEX_REFRESH:\n"
    "    steps:\n"
    "      - name: refresh\n"
    "        kind: shell\n"
    "        argv: [/bin/sh, -c, 'printf \"queue=%s tag=%s\\n\" \"$QILIN_YARN_QUEUE\" "
    "\"$QILIN_TAG\"']\n"
    "  INDEX_MERGE: {steps: [{name: merge, kind: noop}]}\n"
    "template_sets:\n"
    "  slow:\n"
    "    INC_BUILD: {steps: [{name: wait, kind: sleep, duration: 10m}]}\n"
    "  fails:\n"
    "    INC_BUILD: {steps: [{name: ok, kind: noop}, {name: fail, kind: shell, argv: "
    "[/bin/false]}]}\n";

typedef struct vars {
    char name[MAX_VARS][32];
    char value[MAX_VARS][128];
    size_t n;
} vars_t;

static void start_server(void) {
    qd_init(&Q);
    static char templates[512], config[400];
    char path[400];
    snprintf(path, sizeof path, "%s/jobs.yaml", Q.dir);
    write_file(path, TEMPLATES);
    snprintf(templates, sizeof templates, "qilin.jobs.templates=%s", path);
    snprintf(config, sizeof config, "%s/qilin.yaml", Q.dir);
    write_file(config, "kylin.job.scheduler.poll-interval-second: 1\n"
                       "qilin.step.kill-grace-ms: 2s\n");
    const char *args[] = {"--config", config, "--set", templates, NULL};
    qd_start(&Q, args);
}

static void stop_server(void) {
    if (Q.pid > 0)
        qd_stop_ok(&Q, 20000);
    qd_cleanup(&Q);
}

/* text with every ${NAME} replaced by its captured value (a new string). */
static char *subst(const char *text, const vars_t *v, const char *file) {
    size_t cap = strlen(text) + 1 + MAX_VARS * 128, o = 0;
    char *out = malloc(cap);
    for (const char *p = text; *p;) {
        if (p[0] == '$' && p[1] == '{') {
            const char *e = strchr(p, '}');
            cr_assert_not_null(e, "%s: unterminated ${ in %s", file, text);
            size_t i;
            for (i = 0; i < v->n; i++)
                if (strlen(v->name[i]) == (size_t)(e - p - 2) &&
                    strncmp(v->name[i], p + 2, (size_t)(e - p - 2)) == 0)
                    break;
            cr_assert(i < v->n, "%s: ${%.*s} was not captured", file, (int)(e - p - 2), p + 2);
            size_t n = strlen(v->value[i]);
            cr_assert(o + n < cap);
            memcpy(out + o, v->value[i], n);
            o += n;
            p = e + 1;
        } else {
            cr_assert(o + 1 < cap);
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

/* The value at a path like "data.value[0].tag" in root (borrowed), NULL when absent. */
static json_t *at(json_t *root, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && cur;
         tok = strtok_r(NULL, ".", &save)) {
        char *br = strchr(tok, '[');
        if (br)
            *br = '\0';
        if (tok[0])
            cur = json_object_get(cur, tok);
        while (br && cur) {
            cur = json_array_get(cur, strtoul(br + 1, NULL, 10));
            br = strchr(br + 1, '[');
        }
    }
    return cur;
}

/* Checks one `expect` item against the answer; a string to compare may use ${NAME}. */
static void check_expect(json_t *answer, const json_t *e, const vars_t *v, const char *where) {
    const char *path = json_string_value(json_object_get(e, "at"));
    cr_assert_not_null(path, "%s: an expect item needs \"at\"", where);
    json_t *got = at(answer, path);
    char *dump = json_dumps(answer, JSON_COMPACT);
    const json_t *want;
    if ((want = json_object_get(e, "equals"))) {
        json_t *own = NULL;
        if (json_is_string(want)) {
            char *t = subst(json_string_value(want), v, where);
            want = own = json_string(t);
            free(t);
        }
        bool same = got && json_equal(got, (json_t *)want);
        /* Numbers compare by value whether integer or real (step_ratio is 1.0 or 1). */
        if (!same && got && json_is_number(got) && json_is_number(want))
            same = json_number_value(got) == json_number_value(want);
        cr_assert(same, "%s: %s is not as expected in %s", where, path, dump);
        json_decref(own);
    }
    if ((want = json_object_get(e, "contains")))
        cr_assert(json_is_string(got) && strstr(json_string_value(got), json_string_value(want)),
                  "%s: %s lacks '%s' in %s", where, path, json_string_value(want), dump);
    if ((want = json_object_get(e, "type"))) {
        const char *t = json_string_value(want);
        bool ok = strcmp(t, "integer") == 0  ? json_is_integer(got)
                  : strcmp(t, "number") == 0 ? json_is_number(got)
                  : strcmp(t, "null") == 0   ? json_is_null(got)
                                             : json_is_string(got);
        cr_assert(ok, "%s: %s is not a %s in %s", where, path, t, dump);
    }
    free(dump);
}

/* Polls GET /jobs until the job reaches the state (job_state) within 30 s. */
static void wait_state(const json_t *w, const vars_t *v, const char *where) {
    char *project = subst(json_string_value(json_object_get(w, "project")), v, where);
    char *job = subst(json_string_value(json_object_get(w, "job")), v, where);
    wait_job_state(&Q, project, job, json_string_value(json_object_get(w, "state")), 30000);
    free(project);
    free(job);
}

static void send_one(const json_t *r, vars_t *v, const char *where) {
    const char *method = json_string_value(json_object_get(r, "method"));
    const char *path0 = json_string_value(json_object_get(r, "path"));
    cr_assert(method && path0, "%s: a request needs method and path", where);
    char *path = subst(path0, v, where);
    const json_t *b = json_object_get(r, "body");
    char *body = NULL;
    if (b) {
        char *text = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        body = subst(text, v, where);
        free(text);
    }
    resp_t res = http_req(&Q, method, path, body, NULL, NULL);
    long want = (long)json_integer_value(json_object_get(r, "status"));
    cr_assert_eq(res.status, want, "%s: %s %s answered %ld, expected %ld: %s", where, method, path,
                 res.status, want, res.body ? res.body : "");
    cr_assert_not_null(res.json, "%s: not JSON: %s", where, res.body);
    const char *code = json_string_value(json_object_get(res.json, "code"));
    cr_assert_str_eq(code, want == 200 ? "000" : "999", "%s: %s", where, res.body);
    const char *ec = json_string_value(json_object_get(r, "error_code"));
    if (ec)
        cr_assert_str_eq(json_string_value(json_object_get(res.json, "error_code")), ec, "%s: %s",
                         where, res.body);
    const char *msg = json_string_value(json_object_get(r, "msg_contains"));
    if (msg)
        cr_assert(strstr(json_string_value(json_object_get(res.json, "msg")), msg),
                  "%s: the message lacks '%s': %s", where, msg, res.body);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r, "expect"), i, e) check_expect(res.json, e, v, where);
    const char *key;
    json_t *p;
    json_object_foreach(json_object_get(r, "capture"), key, p) {
        json_t *val = at(res.json, json_string_value(p));
        cr_assert(json_is_string(val), "%s: nothing to capture at %s: %s", where,
                  json_string_value(p), res.body);
        cr_assert(v->n < MAX_VARS);
        snprintf(v->name[v->n], sizeof v->name[0], "%s", key);
        snprintf(v->value[v->n], sizeof v->value[0], "%s", json_string_value(val));
        v->n++;
    }
    resp_free(&res);
    free(body);
    free(path);
}

/* Replays one file on a fresh server; returns the number of requests sent. */
static size_t replay(const char *file) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", REQ_DIR, file);
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    cr_assert_not_null(doc, "%s:%d: %s", file, jerr.line, jerr.text);
    json_t *steps = json_object_get(doc, "requests");
    cr_assert(json_array_size(steps) > 0, "%s: no requests", file);
    start_server();
    vars_t v = {0};
    size_t i, sent = 0;
    json_t *r;
    json_array_foreach(steps, i, r) {
        char where[700];
        snprintf(where, sizeof where, "%s request %zu", file, i);
        const json_t *w = json_object_get(r, "wait");
        if (w) {
            wait_state(w, &v, where);
            continue;
        }
        send_one(r, &v, where);
        sent++;
    }
    stop_server();
    json_decref(doc);
    return sent;
}

static int json_file(const struct dirent *d) {
    size_t n = strlen(d->d_name);
    return n > 5 && strcmp(d->d_name + n - 5, ".json") == 0;
}

TestSuite(kylin_requests, .fini = stop_server, .timeout = 600);

Test(kylin_requests, every_held_request_answers_as_recorded) {
    struct dirent **files;
    int n = scandir(REQ_DIR, &files, json_file, alphasort);
    cr_assert_gt(n, 0, "%s: no request files", REQ_DIR);
    size_t sent = 0;
    for (int i = 0; i < n; i++) {
        sent += replay(files[i]->d_name);
        free(files[i]);
    }
    free(files);
    cr_log_info("replayed %zu requests from %d files", sent, n);
    cr_assert_gt(sent, 20);
}
