/*
 * One hexadecimal digit's value, for the parsers of ids (storage), step markers (engine) and
 * percent-escapes (api), which used to carry a copy each.
 */
#ifndef QL_HEX_H
#define QL_HEX_H

/* The value of the hex digit c (either case), or -1 when c is not one. */
static inline int ql_hex_digit(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
