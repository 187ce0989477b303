/*
 * What the configuration's files share (config.c parses and sets values, config_get.c reads
 * and dumps them). Not a public header: nothing outside scheduler/ includes it.
 */
#ifndef QL_CONFIG_INT_H
#define QL_CONFIG_INT_H

#include "config/ql_config.h"

#include <stdio.h>

typedef struct value {
    char *text; /* the value as given (canonical for getters of string-like types) */
    bool b;
    int64_t i;
    char **items;
    size_t nitems;
    char *host;
    int port;
    ql_config_user_t *users;
    size_t nusers;
    char *source;
    int line;
} value_t;

struct ql_config {
    const ql_config_option_t *opts;
    size_t n;
    value_t *vals;
};

/* The slot of option o in cfg->vals (o points into cfg->opts). */
static inline size_t ql_config_index_of(const ql_config_t *cfg, const ql_config_option_t *o) {
    return (size_t)(o - cfg->opts);
}

/* "source:line", or the source alone for values without a line (defaults, --set). */
static inline void ql_config_where(char *buf, size_t len, const char *source, int line) {
    if (line > 0)
        snprintf(buf, len, "%s:%d", source, line);
    else
        snprintf(buf, len, "%s", source);
}

#endif
