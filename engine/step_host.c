/* Which host a step's recorded processes belong to: see ql_step_host.h. */
#include "engine/ql_step_host.h"

#include <string.h>

bool ql_step_log_elsewhere(const ql_step_t *st, const ql_step_host_t *self) {
    return self->spans_hosts && st->server_id[0] && strcmp(st->server_id, self->server_id) != 0;
}

ql_step_place_t ql_step_place(const ql_step_t *st, const ql_step_host_t *self) {
    if (!self->spans_hosts || !st->server_id[0])
        return QL_STEP_PLACE_HERE;
    if (strcmp(st->server_id, self->server_id) != 0)
        return QL_STEP_PLACE_ELSEWHERE;
    /* Without a recorded boot id the group's own check (its leader's boot) still applies. */
    if (st->boot_id[0] && self->boot_id[0] && strcmp(st->boot_id, self->boot_id) != 0)
        return QL_STEP_PLACE_EARLIER_BOOT;
    return QL_STEP_PLACE_HERE;
}

const char *ql_step_place_name(ql_step_place_t p) {
    switch (p) {
    case QL_STEP_PLACE_HERE:
        return "here";
    case QL_STEP_PLACE_ELSEWHERE:
        return "left to its own host";
    case QL_STEP_PLACE_EARLIER_BOOT:
        return "this server's try of an earlier boot: its processes died with the machine";
    }
    return "?";
}
