/*
 * The YAML document layer, parsing half: libyaml events -> an arena-allocated node tree with
 * positions. The getters are in yaml_get.c. See ql_yaml.h for what is accepted and why.
 */
#include "base/ql_buf.h"
#include "base/ql_yaml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>
#include <yaml.h>

/* ---- arena ------------------------------------------------------------------------------ */

typedef struct arena_block {
    struct arena_block *next;
    size_t used;
    size_t cap;
    _Alignas(16) unsigned char data[];
} arena_block_t;

struct ql_yaml_doc {
    arena_block_t *blocks;
    char *name;
    const ql_yaml_node_t *root;
};

static void *arena_alloc(ql_yaml_doc_t *doc, size_t size) {
    size = (size + 15u) & ~(size_t)15u;
    arena_block_t *b = doc->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 16384 ? size : 16384;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = doc->blocks;
        doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    return p;
}

void ql_yaml_doc_free(ql_yaml_doc_t *doc) {
    if (!doc)
        return;
    arena_block_t *b = doc->blocks;
    while (b) {
        arena_block_t *next = b->next;
        free(b);
        b = next;
    }
    free(doc->name);
    free(doc);
}

const ql_yaml_node_t *ql_yaml_doc_root(const ql_yaml_doc_t *doc) {
    return doc->root;
}

const char *ql_yaml_doc_name(const ql_yaml_doc_t *doc) {
    return doc->name;
}

/* ---- anchors: a small open-addressing hash, because a hostile input may hold many ---------- */

typedef struct anchor {
    char *name; /* malloc'd; NULL = empty slot */
    const ql_yaml_node_t *node;
} anchor_t;

typedef struct anchors {
    anchor_t *slots;
    size_t cap; /* power of two or 0 */
    size_t used;
} anchors_t;

static size_t anchor_hash(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static anchor_t *anchor_slot(anchor_t *slots, size_t cap, const char *name) {
    size_t i = anchor_hash(name) & (cap - 1);
    while (slots[i].name && strcmp(slots[i].name, name) != 0)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static const ql_yaml_node_t *anchors_find(const anchors_t *a, const char *name) {
    if (a->cap == 0)
        return NULL;
    anchor_t *s = anchor_slot(a->slots, a->cap, name);
    return s->name ? s->node : NULL;
}

/* Registers (or, as YAML allows, redefines) an anchor. Takes ownership of name. */
static int anchors_put(anchors_t *a, char *name, const ql_yaml_node_t *node) {
    if ((a->used + 1) * 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        anchor_t *slots = calloc(cap, sizeof *slots);
        if (!slots) {
            free(name);
            return UV_ENOMEM;
        }
        for (size_t i = 0; i < a->cap; i++)
            if (a->slots[i].name)
                *anchor_slot(slots, cap, a->slots[i].name) = a->slots[i];
        free(a->slots);
        a->slots = slots;
        a->cap = cap;
    }
    anchor_t *s = anchor_slot(a->slots, a->cap, name);
    if (s->name) {
        free(name);
    } else {
        s->name = name;
        a->used++;
    }
    s->node = node;
    return 0;
}

static void anchors_free(anchors_t *a) {
    for (size_t i = 0; i < a->cap; i++)
        free(a->slots[i].name);
    free(a->slots);
}

/* ---- builder ------------------------------------------------------------------------------ */

typedef struct frame {
    ql_yaml_node_t *node;
    char *anchor; /* malloc'd; registered when the collection ends (so it cannot contain itself) */
    const ql_yaml_node_t **kids; /* items, or keys and values interleaved */
    size_t n;
    size_t cap;
} frame_t;

typedef struct builder {
    ql_yaml_doc_t *doc;
    const char *buf;
    size_t len;
    frame_t stack[QL_YAML_MAX_DEPTH];
    size_t depth;
    anchors_t anchors;
    size_t total; /* nodes of the expanded tree so far */
    int n_docs;
    ql_err_t *err;
} builder_t;

static ql_yaml_node_t *node_new(builder_t *b, ql_yaml_kind_t kind, yaml_mark_t mark) {
    ql_yaml_node_t *n = arena_alloc(b->doc, sizeof *n);
    if (!n)
        return NULL;
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->line = (uint32_t)(mark.line + 1);
    n->column = (uint32_t)(mark.column + 1);
    n->file = b->doc->name;
    n->weight = 1;
    return n;
}

static int nomem(builder_t *b) {
    return ql_err_set(b->err, UV_ENOMEM, "%s: out of memory while parsing", b->doc->name);
}

/* Counts weight more expanded nodes against the budget. */
static int charge(builder_t *b, const ql_yaml_node_t *at, size_t weight) {
    if (weight > QL_YAML_MAX_NODES || b->total > QL_YAML_MAX_NODES - weight)
        return ql_yaml_errorf(b->err, at,
                              "the document expands to more than %d nodes (too many aliases?)",
                              QL_YAML_MAX_NODES);
    b->total += weight;
    return 0;
}

static bool key_is_merge(const ql_yaml_node_t *k) {
    return k->plain && k->len == 2 && memcmp(k->str, "<<", 2) == 0;
}

/* Attaches a finished node to the open collection, or makes it the root. */
static int attach(builder_t *b, const ql_yaml_node_t *node) {
    if (b->depth == 0) {
        b->doc->root = node;
        return 0;
    }
    frame_t *f = &b->stack[b->depth - 1];
    if (f->node->kind == QL_YAML_MAPPING && f->n % 2 == 0) {
        if (node->kind != QL_YAML_SCALAR)
            return ql_yaml_errorf(b->err, node, "mapping keys must be scalars");
        if (key_is_merge(node))
            return ql_yaml_errorf(b->err, node,
                                  "merge keys ('<<') are not supported; write the keys out or "
                                  "alias a whole node");
    }
    if (QL_ARRAY_RESERVE(f->kids, f->cap, f->n + 1, 8))
        return nomem(b);
    f->kids[f->n++] = node;
    return 0;
}

static int register_anchor(builder_t *b, const yaml_char_t *anchor, const ql_yaml_node_t *node) {
    if (!anchor)
        return 0;
    char *name = strdup((const char *)anchor);
    if (!name)
        return nomem(b);
    int rc = anchors_put(&b->anchors, name, node);
    return rc ? nomem(b) : 0;
}

/* A tag is accepted only when it does not change what the node means to us. */
static int check_tag(builder_t *b, const yaml_char_t *tag, const char *allowed,
                     const ql_yaml_node_t *at) {
    if (!tag || strcmp((const char *)tag, "!") == 0 || strcmp((const char *)tag, allowed) == 0)
        return 0;
    return ql_yaml_errorf(b->err, at, "tag '%s' is not supported", (const char *)tag);
}

static int on_scalar(builder_t *b, const yaml_event_t *ev) {
    ql_yaml_node_t *n = node_new(b, QL_YAML_SCALAR, ev->start_mark);
    if (!n)
        return nomem(b);
    int rc = check_tag(b, ev->data.scalar.tag, YAML_STR_TAG, n);
    if (rc)
        return rc;
    size_t len = ev->data.scalar.length;
    char *s = arena_alloc(b->doc, len + 1);
    if (!s)
        return nomem(b);
    memcpy(s, ev->data.scalar.value, len);
    s[len] = '\0';
    n->str = s;
    n->len = len;
    n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
    if ((rc = charge(b, n, 1)) || (rc = register_anchor(b, ev->data.scalar.anchor, n)))
        return rc;
    return attach(b, n);
}

static int on_alias(builder_t *b, const yaml_event_t *ev) {
    const char *name = (const char *)ev->data.alias.anchor;
    const ql_yaml_node_t *target = anchors_find(&b->anchors, name);
    ql_yaml_node_t at = {.line = (uint32_t)(ev->start_mark.line + 1),
                         .column = (uint32_t)(ev->start_mark.column + 1),
                         .file = b->doc->name};
    if (!target) {
        return ql_yaml_errorf(b->err, &at,
                              "alias '*%s' refers to no anchor defined before it (an anchor "
                              "cannot be used inside its own node)",
                              name);
    }
    int rc = charge(b, &at, target->weight);
    return rc ? rc : attach(b, target);
}

static int on_start(builder_t *b, const yaml_event_t *ev, ql_yaml_kind_t kind) {
    ql_yaml_node_t *n = node_new(b, kind, ev->start_mark);
    if (!n)
        return nomem(b);
    if (b->depth == QL_YAML_MAX_DEPTH)
        return ql_yaml_errorf(b->err, n, "nesting deeper than %d levels", QL_YAML_MAX_DEPTH);
    const yaml_char_t *tag, *anchor;
    if (kind == QL_YAML_SEQUENCE) {
        tag = ev->data.sequence_start.tag;
        anchor = ev->data.sequence_start.anchor;
    } else {
        tag = ev->data.mapping_start.tag;
        anchor = ev->data.mapping_start.anchor;
    }
    int rc = check_tag(b, tag, kind == QL_YAML_SEQUENCE ? YAML_SEQ_TAG : YAML_MAP_TAG, n);
    if (rc || (rc = charge(b, n, 1)))
        return rc;
    frame_t *f = &b->stack[b->depth++];
    memset(f, 0, sizeof *f);
    f->node = n;
    if (anchor && !(f->anchor = strdup((const char *)anchor)))
        return nomem(b);
    return 0;
}

typedef struct keyref {
    const ql_yaml_node_t *key;
    size_t index;
} keyref_t;

static int keyref_cmp(const void *pa, const void *pb) {
    const keyref_t *a = pa, *b = pb;
    size_t n = a->key->len < b->key->len ? a->key->len : b->key->len;
    int c = memcmp(a->key->str, b->key->str, n);
    if (c == 0 && a->key->len != b->key->len)
        c = a->key->len < b->key->len ? -1 : 1;
    if (c == 0)
        c = a->index < b->index ? -1 : a->index > b->index;
    return c;
}

/* Duplicate keys are found by sorting, so a hostile mapping with many keys stays cheap. */
static int check_duplicates(builder_t *b, const ql_yaml_pair_t *pairs, size_t n) {
    if (n < 2)
        return 0;
    keyref_t *refs = malloc(n * sizeof *refs);
    if (!refs)
        return nomem(b);
    for (size_t i = 0; i < n; i++)
        refs[i] = (keyref_t){pairs[i].key, i};
    qsort(refs, n, sizeof *refs, keyref_cmp);
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++) {
        const ql_yaml_node_t *a = refs[i - 1].key, *k = refs[i].key;
        if (a->len == k->len && memcmp(a->str, k->str, a->len) == 0) {
            char desc[64];
            rc = ql_yaml_errorf(b->err, k, "duplicate key %s (first at line %u)",
                                ql_yaml_describe(k, desc, sizeof desc), a->line);
        }
    }
    free(refs);
    return rc;
}

static int on_end(builder_t *b) {
    frame_t *f = &b->stack[b->depth - 1];
    ql_yaml_node_t *n = f->node;
    size_t weight = 1;
    for (size_t i = 0; i < f->n; i++)
        weight += f->kids[i]->weight; /* bounded by the budget already charged */
    n->weight = weight;
    int rc = 0;
    if (n->kind == QL_YAML_SEQUENCE) {
        const ql_yaml_node_t **items = arena_alloc(b->doc, f->n * sizeof *items + 1);
        if (!items) {
            rc = nomem(b);
        } else {
            if (f->n)
                memcpy(items, f->kids, f->n * sizeof *items);
            n->items = items;
            n->n_items = f->n;
        }
    } else {
        size_t np = f->n / 2;
        ql_yaml_pair_t *pairs = arena_alloc(b->doc, np * sizeof *pairs + 1);
        if (!pairs) {
            rc = nomem(b);
        } else {
            for (size_t i = 0; i < np; i++)
                pairs[i] = (ql_yaml_pair_t){f->kids[2 * i], f->kids[2 * i + 1]};
            n->pairs = pairs;
            n->n_pairs = np;
            rc = check_duplicates(b, pairs, np);
        }
    }
    free(f->kids);
    f->kids = NULL;
    char *anchor = f->anchor;
    f->anchor = NULL;
    b->depth--;
    if (rc) {
        free(anchor);
        return rc;
    }
    if (anchor && anchors_put(&b->anchors, anchor, n))
        return nomem(b);
    return attach(b, n);
}

static int on_event(builder_t *b, const yaml_event_t *ev) {
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++b->n_docs > 1) {
            ql_yaml_node_t at = {.line = (uint32_t)(ev->start_mark.line + 1), .file = b->doc->name};
            return ql_yaml_errorf(b->err, &at,
                                  "a second YAML document starts here; only one is allowed");
        }
        return 0;
    case YAML_SCALAR_EVENT:
        return on_scalar(b, ev);
    case YAML_ALIAS_EVENT:
        return on_alias(b, ev);
    case YAML_SEQUENCE_START_EVENT:
        return on_start(b, ev, QL_YAML_SEQUENCE);
    case YAML_MAPPING_START_EVENT:
        return on_start(b, ev, QL_YAML_MAPPING);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        return on_end(b);
    default:
        return 0;
    }
}

static size_t line_of_offset(const char *buf, size_t len, size_t offset) {
    size_t line = 1;
    for (size_t i = 0; i < offset && i < len; i++)
        line += buf[i] == '\n';
    return line;
}

/* True when the line holding offset is indented with a tab, or offset points at one. */
static bool tab_near(const char *buf, size_t len, size_t offset) {
    if (offset >= len)
        return false;
    if (buf[offset] == '\t')
        return true;
    size_t start = offset;
    while (start > 0 && buf[start - 1] != '\n')
        start--;
    for (size_t i = start; i < len && (buf[i] == ' ' || buf[i] == '\t'); i++)
        if (buf[i] == '\t')
            return true;
    return false;
}

/* libyaml places errors at the end of the stream one line past the last one; clamp so the
 * message names a line the file has. */
static size_t clamp_line(const builder_t *b, size_t line) {
    size_t last = line_of_offset(b->buf, b->len, b->len);
    if (b->len > 0 && b->buf[b->len - 1] == '\n' && last > 1)
        last--;
    return line > last ? last : line;
}

static int parser_error(builder_t *b, const yaml_parser_t *p) {
    const char *name = b->doc->name;
    if (p->error == YAML_MEMORY_ERROR)
        return nomem(b);
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_READER_ERROR)
        return ql_err_set(b->err, QL_EINVAL, "%s:%zu: %s (byte %zu)", name,
                          line_of_offset(b->buf, b->len, p->problem_offset), problem,
                          p->problem_offset);
    const char *hint = tab_near(b->buf, b->len, p->problem_mark.index) && !strstr(problem, "tab")
                           ? " (YAML does not allow tabs for indentation; use spaces)"
                           : "";
    if (p->context)
        return ql_err_set(b->err, QL_EINVAL, "%s:%zu: %s (%s at line %zu)%s", name,
                          clamp_line(b, p->problem_mark.line + 1), problem, p->context,
                          clamp_line(b, p->context_mark.line + 1), hint);
    return ql_err_set(b->err, QL_EINVAL, "%s:%zu: %s%s", name,
                      clamp_line(b, p->problem_mark.line + 1), problem, hint);
}

int ql_yaml_load_buffer(const char *buf, size_t len, const char *name, unsigned flags,
                        ql_yaml_doc_t **out, ql_err_t *err) {
    if (!name)
        name = "<input>";
    if (len > QL_YAML_MAX_INPUT)
        return ql_err_set(err, QL_ETOOBIG, "%s: %zu bytes is more than the %u allowed", name, len,
                          QL_YAML_MAX_INPUT);
    ql_yaml_doc_t *doc = calloc(1, sizeof *doc);
    if (!doc || !(doc->name = strdup(name))) {
        free(doc);
        return ql_err_set(err, UV_ENOMEM, "%s: out of memory", name);
    }
    builder_t *b = calloc(1, sizeof *b);
    if (!b) {
        ql_yaml_doc_free(doc);
        return ql_err_set(err, UV_ENOMEM, "%s: out of memory", name);
    }
    b->doc = doc;
    b->buf = buf;
    b->len = len;
    b->err = err;

    yaml_parser_t parser;
    int rc = 0;
    if (!yaml_parser_initialize(&parser)) {
        rc = nomem(b);
    } else {
        yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), len);
        for (;;) {
            yaml_event_t ev;
            if (!yaml_parser_parse(&parser, &ev)) {
                rc = parser_error(b, &parser);
                break;
            }
            bool done = ev.type == YAML_STREAM_END_EVENT;
            rc = on_event(b, &ev);
            yaml_event_delete(&ev);
            if (rc || done)
                break;
        }
        yaml_parser_delete(&parser);
    }
    while (b->depth > 0) {
        frame_t *f = &b->stack[--b->depth];
        free(f->kids);
        free(f->anchor);
    }
    anchors_free(&b->anchors);
    free(b);

    if (!rc && !doc->root) {
        if (flags & QL_YAML_ALLOW_EMPTY) {
            ql_yaml_node_t *n = arena_alloc(doc, sizeof *n);
            if (!n) {
                rc = ql_err_set(err, UV_ENOMEM, "%s: out of memory", name);
            } else {
                *n = (ql_yaml_node_t){.kind = QL_YAML_SCALAR,
                                      .plain = true,
                                      .line = 1,
                                      .column = 1,
                                      .file = doc->name,
                                      .str = "",
                                      .weight = 1};
                doc->root = n;
            }
        } else {
            rc = ql_err_set(err, QL_EINVAL, "%s:1: the document is empty", name);
        }
    }
    if (rc) {
        ql_yaml_doc_free(doc);
        return rc;
    }
    *out = doc;
    return 0;
}

int ql_yaml_load_file(const char *path, unsigned flags, ql_yaml_doc_t **out, ql_err_t *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return ql_err_set(err, -e, "%s: cannot read: %s", path, strerror(e));
    }
    struct stat st;
    int stat_rc = fstat(fd, &st);
    if (stat_rc != 0 || S_ISDIR(st.st_mode)) {
        int e = stat_rc != 0 ? errno : EISDIR;
        close(fd);
        return ql_err_set(err, -e, "%s: cannot read: %s", path, strerror(e));
    }
    size_t cap = 0, len = 0;
    char *buf = NULL;
    int rc = 0;
    while (!rc) {
        if (len == cap) {
            if (cap > QL_YAML_MAX_INPUT) {
                rc = ql_err_set(err, QL_ETOOBIG, "%s: larger than the %u bytes allowed", path,
                                QL_YAML_MAX_INPUT);
                break;
            }
            /* 4 KiB first, then doubled. */
            if (ql_array_reserve(&buf, &cap, len + 1, 1, 4096)) {
                rc = ql_err_set(err, UV_ENOMEM, "%s: out of memory", path);
                break;
            }
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = ql_err_set(err, -e, "%s: cannot read: %s", path, strerror(e));
        } else if (r == 0) {
            break;
        } else {
            len += (size_t)r;
        }
    }
    close(fd);
    if (!rc)
        rc = ql_yaml_load_buffer(buf, len, path, flags, out, err);
    free(buf);
    return rc;
}
