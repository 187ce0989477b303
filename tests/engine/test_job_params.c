/*
 * The stored form of a job's custom parameters (engine/ql_jobs.h, Job parameters): what the
 * encoder writes, that the decoder reads it back, and every stored form the decoder refuses.
 */
#include "engine/ql_jobs.h"

#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

Test(params, the_stored_form_is_a_msgpack_map_of_strings) {
    ql_kv_t kv[2] = {{"TABLE", "sales"}, {"WHERE", "a = 'b'; $(x)"}};
    char *buf;
    size_t len;
    cr_assert_eq(ql_job_params_encode(kv, 2, &buf, &len), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&u, buf, len, &off), MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(u.data.type, MSGPACK_OBJECT_MAP);
    cr_assert_eq(u.data.via.map.size, 2);
    const msgpack_object_kv *p = u.data.via.map.ptr;
    cr_assert_eq(p[1].val.type, MSGPACK_OBJECT_STR);
    cr_assert_eq(p[1].val.via.str.size, strlen(kv[1].value));
    cr_assert_eq(memcmp(p[1].val.via.str.ptr, kv[1].value, strlen(kv[1].value)), 0);
    msgpack_unpacked_destroy(&u);
    free(buf);
    cr_assert_eq(ql_job_params_encode(NULL, 0, &buf, &len), 0);
    cr_assert_null(buf);
    cr_assert_eq(len, 0);
}

Test(params, decode_reads_back_what_encode_wrote) {
    ql_kv_t kv[3] = {{"TABLE", "sales"}, {"WHERE", "a = 'b'; $(x)"}, {"EMPTY", ""}};
    char *buf;
    size_t len;
    cr_assert_eq(ql_job_params_encode(kv, 3, &buf, &len), 0);
    ql_kv_t *got;
    size_t n;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_params_decode(buf, len, &got, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_str_eq(got[i].name, kv[i].name);
        cr_assert_str_eq(got[i].value, kv[i].value);
    }
    ql_job_params_free(got, n);
    free(buf);
}

Test(params, no_stored_parameters_decode_to_none) {
    ql_kv_t *got = (ql_kv_t *)1;
    size_t n = 7;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_params_decode(NULL, 0, &got, &n, &err), 0);
    cr_assert_null(got);
    cr_assert_eq(n, 0);
    ql_job_params_free(NULL, 0);
}

/* Packs a map with n entries, the key of entry i from keys (NULL: an integer key) and the value
 * of every entry the string "v" unless int_value. */
static void pack_map(msgpack_sbuffer *sb, size_t n, const char *const *keys, bool int_value) {
    msgpack_sbuffer_init(sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, n);
    for (size_t i = 0; i < n; i++) {
        if (keys && keys[i])
            msgpack_pack_str_with_body(&pk, keys[i], strlen(keys[i]));
        else if (keys)
            msgpack_pack_int(&pk, 1);
        else {
            char k[16];
            int kl = snprintf(k, sizeof k, "P%zu", i);
            msgpack_pack_str_with_body(&pk, k, (size_t)kl);
        }
        if (int_value)
            msgpack_pack_int(&pk, 2);
        else
            msgpack_pack_str_with_body(&pk, "v", 1);
    }
}

static void expect_corrupt(const char *buf, size_t len, const char *why) {
    ql_kv_t *got = (ql_kv_t *)1;
    size_t n = 7;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_params_decode(buf, len, &got, &n, &err), QL_ECORRUPT, "%s", why);
    cr_assert_null(got, "%s: nothing is returned", why);
    cr_assert_eq(n, 0, "%s", why);
    cr_assert(strstr(err.msg, "the job's stored parameter"), "%s: %s", why, err.msg);
}

Test(params, decode_refuses_what_encode_never_writes) {
    msgpack_sbuffer sb;
    msgpack_packer pk;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 0);
    expect_corrupt(sb.data, sb.size, "an array, not a map");
    msgpack_sbuffer_destroy(&sb);

    expect_corrupt("\x81\xa1", 2, "a map cut short");

    const char *int_key[] = {"A", NULL};
    pack_map(&sb, 2, int_key, false);
    expect_corrupt(sb.data, sb.size, "an integer key");
    msgpack_sbuffer_destroy(&sb);

    pack_map(&sb, 1, NULL, true);
    expect_corrupt(sb.data, sb.size, "an integer value");
    msgpack_sbuffer_destroy(&sb);

    pack_map(&sb, QL_TEMPLATE_MAX_PARAMS + 1, NULL, false);
    expect_corrupt(sb.data, sb.size, "more entries than a job may have");
    msgpack_sbuffer_destroy(&sb);

    const char *bad_name[] = {"OK", "not a name"};
    pack_map(&sb, 2, bad_name, false);
    expect_corrupt(sb.data, sb.size, "an invalid name, after a valid one");
    msgpack_sbuffer_destroy(&sb);

    /* A NUL inside a name would make its copy a different, valid name. */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, "AB\0C", 4);
    msgpack_pack_str_with_body(&pk, "v", 1);
    expect_corrupt(sb.data, sb.size, "a NUL inside a name");
    msgpack_sbuffer_destroy(&sb);

    /* A map claiming more entries than its bytes could hold is refused before msgpack-c
     * allocates for them. */
    expect_corrupt("\xdf\x7f\xff\xff\xff", 5, "a map claiming 2^31 entries");
}

Test(params, the_largest_allowed_map_decodes) {
    msgpack_sbuffer sb;
    pack_map(&sb, QL_TEMPLATE_MAX_PARAMS, NULL, false);
    ql_kv_t *got;
    size_t n;
    ql_err_t err = {0};
    cr_assert_eq(ql_job_params_decode(sb.data, sb.size, &got, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, QL_TEMPLATE_MAX_PARAMS);
    cr_assert_str_eq(got[QL_TEMPLATE_MAX_PARAMS - 1].name, "P63");
    ql_job_params_free(got, n);
    msgpack_sbuffer_destroy(&sb);
}
