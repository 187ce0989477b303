/*
 * Which host a step's recorded try belongs to (engine/ql_step_host.h), as a table written from
 * the header's rules: on a store of one host every try is here; on a shared store a try is here
 * only when its recorded server is this one and its boot is this boot; a record without a
 * server (an older build's) is judged as before.
 */
#include "engine/ql_step_host.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define BOOT_A "5c8f0c4e-8a3b-4a8e-9d1e-0123456789ab"
#define BOOT_B "0e6c3f61-1d7a-4f0a-8a55-fedcba987654"

typedef struct row {
    const char *what;
    bool spans;                /* the store spans hosts */
    const char *server, *boot; /* recorded on the step */
    ql_step_place_t want;
    bool log_elsewhere;
} row_t;

static const row_t rows[] = {
    {"one host: another server's try is here", false, "h2:7070", BOOT_A, QL_STEP_PLACE_HERE, false},
    {"one host: another boot is left to the group's own check", false, "h1:7070", BOOT_B,
     QL_STEP_PLACE_HERE, false},
    {"shared: this server, this boot", true, "h1:7070", BOOT_A, QL_STEP_PLACE_HERE, false},
    {"shared: another server", true, "h2:7070", BOOT_A, QL_STEP_PLACE_ELSEWHERE, true},
    {"shared: another server in another boot", true, "h2:7070", BOOT_B, QL_STEP_PLACE_ELSEWHERE,
     true},
    {"shared: this server in an earlier boot", true, "h1:7070", BOOT_B, QL_STEP_PLACE_EARLIER_BOOT,
     false},
    {"shared: this server, no boot recorded", true, "h1:7070", "", QL_STEP_PLACE_HERE, false},
    {"shared: no server recorded (an older build)", true, "", BOOT_B, QL_STEP_PLACE_HERE, false},
    {"shared: a server id that only starts like this one", true, "h1:70701", BOOT_A,
     QL_STEP_PLACE_ELSEWHERE, true},
};

Test(step_host, place_table) {
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row_t *r = &rows[i];
        ql_step_t st;
        memset(&st, 0, sizeof st);
        snprintf(st.server_id, sizeof st.server_id, "%s", r->server);
        snprintf(st.boot_id, sizeof st.boot_id, "%s", r->boot);
        ql_step_host_t self = {.server_id = "h1:7070", .boot_id = BOOT_A, .spans_hosts = r->spans};
        ql_step_place_t got = ql_step_place(&st, &self);
        cr_assert_eq(got, r->want, "%s: got %s, want %s", r->what, ql_step_place_name(got),
                     ql_step_place_name(r->want));
        cr_assert_eq(ql_step_log_elsewhere(&st, &self), r->log_elsewhere, "%s: log elsewhere",
                     r->what);
    }
}

Test(step_host, an_unknown_boot_of_this_server_proves_nothing_older) {
    ql_step_t st;
    memset(&st, 0, sizeof st);
    snprintf(st.server_id, sizeof st.server_id, "h1:7070");
    snprintf(st.boot_id, sizeof st.boot_id, BOOT_B);
    ql_step_host_t self = {.server_id = "h1:7070", .boot_id = "", .spans_hosts = true};
    cr_assert_eq(ql_step_place(&st, &self), QL_STEP_PLACE_HERE);
}

Test(step_host, names) {
    cr_assert_str_eq(ql_step_place_name(QL_STEP_PLACE_HERE), "here");
    cr_assert_str_eq(ql_step_place_name(QL_STEP_PLACE_ELSEWHERE), "left to its own host");
    cr_assert(strstr(ql_step_place_name(QL_STEP_PLACE_EARLIER_BOOT), "earlier boot"));
}
