/*
 * A small YAML document layer over libyaml, shared by every Qilin loader (job templates, the
 * server config file, simulation scenarios, ad-hoc job definitions).
 *
 * DESIGN. A document is parsed in one pass into an immutable tree of nodes (scalar, sequence,
 * mapping). Every node keeps its 1-based line and column and the document's name, so a loader
 * can report any problem as "file:line: reason" long after parsing. All memory of a document
 * (nodes, strings, arrays) lives in one arena freed by ql_yaml_doc_free(): pointers obtained
 * from a document are borrowed and valid until then. A document is read-only after loading
 * and may be read from several threads.
 *
 * What is accepted, and why:
 *   - Exactly one document per input: a second "---" document is an error, because a loader
 *     reading only the first would silently ignore the rest.
 *   - Anchors and aliases are resolved by sharing the anchored node (the tree is a DAG).
 *     To stop "billion laughs" inputs, every node counts with the size of its expanded subtree
 *     and the whole document may expand to at most QL_YAML_MAX_NODES nodes; nesting is limited
 *     to QL_YAML_MAX_DEPTH levels so recursive readers cannot overflow the stack. Merge keys
 *     ("<<") are rejected rather than half-supported.
 *   - Duplicate keys in a mapping are an error (YAML says so; libyaml does not check).
 *   - Mapping keys must be scalars; tags other than !!str, !!seq, !!map and "!" are rejected.
 *   - Tabs cannot indent (a YAML rule): the libyaml error gets a hint saying so.
 *   - JSON is YAML: a JSON object parses into the same tree (quoted strings are non-plain
 *     scalars, numbers, true, false and null plain ones).
 *
 * Typing follows the YAML 1.2 core schema, strictly: null is a plain `~`, `null`, `Null`,
 * `NULL` or an empty value; a boolean is a plain `true` or `false` (not yes/no/on/off); an
 * integer is a plain decimal (`-12`, `0`, `300`; no leading zeros, no 0x, no `_`); a quoted
 * scalar is always a string. A string getter accepts any non-null scalar, so `name: 123` is the
 * string "123".
 *
 * Durations (ql_yaml_parse_duration) are one or more <number><unit> groups with units ms, s,
 * m, h, d (`500ms`, `90s`, `5m`, `2h`, `1d`, `1h30m`); a bare integer is milliseconds, which
 * is Kylin's unit for its own duration settings (kylin.job.retry-interval=30000).
 */
#ifndef QL_YAML_H
#define QL_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ql_error.h"

/* At most this many nodes after expanding aliases (guards against alias bombs). */
#define QL_YAML_MAX_NODES 1000000
/* At most this many nested sequences/mappings. */
#define QL_YAML_MAX_DEPTH 128
/* Inputs larger than this are refused with QL_ETOOBIG. */
#define QL_YAML_MAX_INPUT (64u * 1024u * 1024u)

typedef enum ql_yaml_kind {
    QL_YAML_SCALAR,
    QL_YAML_SEQUENCE,
    QL_YAML_MAPPING,
} ql_yaml_kind_t;

typedef struct ql_yaml_node ql_yaml_node_t;
typedef struct ql_yaml_doc ql_yaml_doc_t;

typedef struct ql_yaml_pair {
    const ql_yaml_node_t *key; /* always a scalar */
    const ql_yaml_node_t *value;
} ql_yaml_pair_t;

/* A node. Read-only; owned by its document. An aliased node appears at every place that
 * refers to it, with the position of its anchored definition. */
struct ql_yaml_node {
    ql_yaml_kind_t kind;
    /* Scalar written without quotes, block style or tag: only plain scalars can be null,
     * booleans or integers. */
    bool plain;
    uint32_t line;    /* 1-based */
    uint32_t column;  /* 1-based */
    const char *file; /* the document's name, for messages */
    /* QL_YAML_SCALAR: NUL-terminated text; len excludes the terminator (the text itself may
     * contain a NUL written as "\0", which the string getters reject). */
    const char *str;
    size_t len;
    /* QL_YAML_SEQUENCE */
    const ql_yaml_node_t *const *items;
    size_t n_items;
    /* QL_YAML_MAPPING, in document order, keys unique */
    const ql_yaml_pair_t *pairs;
    size_t n_pairs;
    /* Nodes in the expanded subtree, this one included (internal: the alias budget). */
    size_t weight;
};

/* Load flags. */
enum {
    /* An input without any document (empty, or only comments) loads as a null root at line 1
     * instead of failing with "the document is empty". */
    QL_YAML_ALLOW_EMPTY = 1u << 0,
};

/*
 * Reads and parses the file at path (borrowed). The file's path is the name used in messages.
 * On success *out is a new document owned by the caller (ql_yaml_doc_free). Errors: the
 * negative errno of a failed read (message "path: cannot read: ..."), QL_ETOOBIG, QL_EINVAL
 * with "path:line: reason", UV_ENOMEM.
 */
int ql_yaml_load_file(const char *path, unsigned flags, ql_yaml_doc_t **out, ql_err_t *err);

/*
 * Parses len bytes at buf (borrowed; need not be NUL-terminated) named name in messages
 * (borrowed; copied, e.g. "<request body>"). Same results as ql_yaml_load_file.
 */
int ql_yaml_load_buffer(const char *buf, size_t len, const char *name, unsigned flags,
                        ql_yaml_doc_t **out, ql_err_t *err);

/* The root node (never NULL for a loaded document); borrowed from doc. */
const ql_yaml_node_t *ql_yaml_doc_root(const ql_yaml_doc_t *doc);
/* The document's name as given at load (borrowed from doc). */
const char *ql_yaml_doc_name(const ql_yaml_doc_t *doc);
/* Frees doc and every node and string obtained from it. NULL is a no-op. */
void ql_yaml_doc_free(ql_yaml_doc_t *doc);

/* True for a plain null scalar (~, null, Null, NULL, or nothing). */
bool ql_yaml_is_null(const ql_yaml_node_t *node);
/* A short description of node for messages: "null", "a sequence", "a mapping", or the scalar
 * quoted and truncated ('abc'). Writes into buf (caller's, size >= 8) and returns buf. */
const char *ql_yaml_describe(const ql_yaml_node_t *node, char *buf, size_t size);

/*
 * Records QL_EINVAL in err with the message "file:line: " followed by the printf-style
 * message, and returns QL_EINVAL. node (borrowed) gives the position; NULL gives none.
 */
int ql_yaml_errorf(ql_err_t *err, const ql_yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fails with "file:line: <what>: expected a mapping|sequence|scalar, got ..." unless node
 * has that kind. what (borrowed) names the value, e.g. "key 'env'". */
int ql_yaml_expect(const ql_yaml_node_t *node, ql_yaml_kind_t kind, const char *what,
                   ql_err_t *err);

/* The value of key in map, or NULL when map is not a mapping or lacks the key. Borrowed. */
const ql_yaml_node_t *ql_yaml_map_find(const ql_yaml_node_t *map, const char *key);

/*
 * Checks that every key of map is one of allowed (a NULL-terminated list, borrowed). An other
 * key fails with "file:line: unknown key 'x' (expected one of: a, b, c)" at the key's line.
 * map must be a mapping (ql_yaml_expect first).
 */
int ql_yaml_check_keys(const ql_yaml_node_t *map, const char *const *allowed, ql_err_t *err);

/* Formats "a, b, c" from a NULL-terminated list into buf (caller's) and returns buf. */
const char *ql_yaml_join(const char *const *names, char *buf, size_t size);

/*
 * Typed getters on a node. what (borrowed) names the value in messages ("key 'retries'",
 * "argv item 2"); a mismatch fails with "file:line: <what>: expected <type>, got <value>".
 * Outputs are written only on success.
 */
/* Any non-null scalar without an embedded NUL; *out is borrowed from the document. */
int ql_yaml_as_str(const ql_yaml_node_t *node, const char *what, const char **out, ql_err_t *err);
/* Plain true or false only. */
int ql_yaml_as_bool(const ql_yaml_node_t *node, const char *what, bool *out, ql_err_t *err);
/* A plain decimal integer in [min, max]. */
int ql_yaml_as_int(const ql_yaml_node_t *node, const char *what, int64_t min, int64_t max,
                   int64_t *out, ql_err_t *err);
/* A duration (see the top of this file), in milliseconds. */
int ql_yaml_as_duration(const ql_yaml_node_t *node, const char *what, int64_t *out_ms,
                        ql_err_t *err);
/*
 * A sequence of strings, copied: *out is a new NULL-terminated array of new strings owned by
 * the caller (ql_yaml_strv_free), *n its length (may be NULL). With nonempty, an empty
 * sequence is an error.
 */
int ql_yaml_as_strv(const ql_yaml_node_t *node, const char *what, bool nonempty, char ***out,
                    size_t *n, ql_err_t *err);
/* Frees an array from ql_yaml_as_strv / ql_yaml_get_strv. NULL is a no-op. */
void ql_yaml_strv_free(char **v);

/*
 * The same getters on key of map. When the key is absent: QL_YAML_REQUIRED fails with
 * "file:line: missing required key 'k'" (the mapping's position); QL_YAML_OPTIONAL returns 0
 * and leaves *out unchanged, so preset the default. A present null value is a type error.
 */
typedef enum ql_yaml_need {
    QL_YAML_OPTIONAL = 0,
    QL_YAML_REQUIRED = 1,
} ql_yaml_need_t;

int ql_yaml_get_str(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need,
                    const char **out, ql_err_t *err);
int ql_yaml_get_bool(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, bool *out,
                     ql_err_t *err);
int ql_yaml_get_int(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, int64_t min,
                    int64_t max, int64_t *out, ql_err_t *err);
int ql_yaml_get_duration(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need,
                         int64_t *out_ms, ql_err_t *err);
int ql_yaml_get_strv(const ql_yaml_node_t *map, const char *key, ql_yaml_need_t need, bool nonempty,
                     char ***out, size_t *n, ql_err_t *err);

/*
 * Parses a duration string (s, borrowed, NUL-terminated) into milliseconds. Pure; for other
 * parsers (command-line flags) that want the same syntax. Returns 0 or QL_EINVAL (syntax,
 * or more than about 292 million years).
 */
int ql_yaml_parse_duration(const char *s, int64_t *out_ms);

#endif
