/* The client address key of http/ql_addr_key.h. */
#include "http/ql_addr_key.h"

#include <string.h>

void ql_addr_key(const struct sockaddr *sa, unsigned char out[QL_ADDR_KEY_LEN]) {
    memset(out, 0, QL_ADDR_KEY_LEN);
    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(b, mapped, 12) == 0)
            memcpy(out, b, 16);
        else
            memcpy(out, b, 8);
    }
}
