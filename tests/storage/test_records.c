/*
 * Records and their msgpack encoding (storage/ql_records.h): round trips with every field set,
 * unknown fields surviving a decode + encode, version and corruption errors, ids, step ids and
 * string maps.
 */
#include "base/ql_error.h"
#include "storage/ql_records.h"
#include "tests/common/mem_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static ql_id_t make_id(uint8_t seed) {
    ql_id_t id;
    for (int i = 0; i < 16; i++)
        id.b[i] = (uint8_t)(seed * 17 + i * 31 + 1);
    return id;
}

static void assert_id_eq(const ql_id_t *a, const ql_id_t *b) {
    cr_assert(ql_id_eq(a, b), "ids differ");
}

/* ---- round trips ---- */

Test(records, project_round_trip) {
    ql_project_t p = {0};
    strcpy(p.name, "sales_analytics");
    p.description = strdup("Sales, all regions");
    cr_assert_eq(ql_strmap_set(&p.config, "kylin.web.timezone", "Asia/Shanghai"), 0);
    cr_assert_eq(ql_strmap_set(&p.config, "kylin.job.max-concurrent-jobs", "4"), 0);
    p.auto_segment_build_enabled = true;
    p.create_time = 1788192000000;
    p.modify_time = -42;

    ql_buf_t buf = {0};
    cr_assert_eq(ql_project_encode(&p, &buf), 0);
    ql_project_t q;
    cr_assert_eq(ql_project_decode(buf.data, buf.len, QL_DECODE_KEEP_EXTRA, &q), 0);
    cr_assert_str_eq(q.name, p.name);
    cr_assert_str_eq(q.description, p.description);
    cr_assert_eq(q.config.n, 2);
    cr_assert_str_eq(ql_strmap_get(&q.config, "kylin.web.timezone"), "Asia/Shanghai");
    cr_assert_str_eq(ql_strmap_get(&q.config, "kylin.job.max-concurrent-jobs"), "4");
    cr_assert(q.auto_segment_build_enabled);
    cr_assert_eq(q.create_time, p.create_time);
    cr_assert_eq(q.modify_time, p.modify_time);
    cr_assert_eq(q.extra.count, 0);
    ql_project_free(&q);
    ql_project_free(&p);
    ql_buf_free(&buf);
}

Test(records, model_round_trip) {
    ql_model_t m = {0};
    m.id = make_id(1);
    strcpy(m.name, "orders_model");
    strcpy(m.project, "sales");
    m.status = QL_MODEL_BROKEN;
    m.type = QL_MODEL_STREAMING;
    m.partitioned = true;
    strcpy(m.partition_column, "ORDERS.ORDER_DATE");
    strcpy(m.partition_format, "yyyy-MM-dd HH:mm:ss");
    m.multi_partition_columns = strdup("REGION,CHANNEL");
    m.auto_build.present = true;
    m.auto_build.enabled = true;
    strcpy(m.auto_build.trigger_time, "01:30:00");
    m.auto_build.logical_date_offset_days = -2;
    strcpy(m.auto_build.data_range_start_time, "00:00:00");
    strcpy(m.auto_build.data_range_end_time, "23:59:59");
    strcpy(m.job_template, "nightly");
    cr_assert_eq(ql_strmap_set(&m.config, "kylin.job.retry", "2"), 0);
    m.create_time = 1;
    m.modify_time = 2;

    ql_buf_t buf = {0};
    cr_assert_eq(ql_model_encode(&m, &buf), 0);
    ql_model_t q;
    cr_assert_eq(ql_model_decode(buf.data, buf.len, QL_DECODE_KEEP_EXTRA, &q), 0);
    assert_id_eq(&q.id, &m.id);
    cr_assert_str_eq(q.name, m.name);
    cr_assert_str_eq(q.project, m.project);
    cr_assert_eq(q.status, QL_MODEL_BROKEN);
    cr_assert_eq(q.type, QL_MODEL_STREAMING);
    cr_assert(q.partitioned);
    cr_assert_str_eq(q.partition_column, m.partition_column);
    cr_assert_str_eq(q.partition_format, m.partition_format);
    cr_assert_str_eq(q.multi_partition_columns, "REGION,CHANNEL");
    cr_assert(q.auto_build.present && q.auto_build.enabled);
    cr_assert_str_eq(q.auto_build.trigger_time, "01:30:00");
    cr_assert_eq(q.auto_build.logical_date_offset_days, -2);
    cr_assert_str_eq(q.auto_build.data_range_start_time, "00:00:00");
    cr_assert_str_eq(q.auto_build.data_range_end_time, "23:59:59");
    cr_assert_str_eq(q.job_template, "nightly");
    cr_assert_str_eq(ql_strmap_get(&q.config, "kylin.job.retry"), "2");
    cr_assert_eq(q.create_time, 1);
    cr_assert_eq(q.modify_time, 2);
    ql_model_free(&q);

    /* A full-load model without auto build config, and a non-integer offset (INT64_MIN). */
    ql_model_free(&m);
    m.id = make_id(2);
    strcpy(m.name, "dim");
    strcpy(m.project, "sales");
    m.auto_build.present = true;
    m.auto_build.logical_date_offset_days = INT64_MIN;
    ql_buf_reset(&buf);
    cr_assert_eq(ql_model_encode(&m, &buf), 0);
    cr_assert_eq(ql_model_decode(buf.data, buf.len, 0, &q), 0);
    cr_assert(!q.partitioned);
    cr_assert_null(q.multi_partition_columns);
    cr_assert(q.auto_build.present);
    cr_assert_eq(q.auto_build.logical_date_offset_days, INT64_MIN);
    ql_model_free(&q);
    ql_model_free(&m);
    ql_buf_free(&buf);
}

Test(records, segment_round_trip) {
    ql_segment_t s = {0};
    s.id = make_id(3);
    s.model = make_id(4);
    s.start = -86400000;
    s.end = QL_RANGE_FULL_END;
    s.status = QL_SEG_WARNING;
    s.create_time = 10;
    s.last_build_time = 20;
    s.job = make_id(5);
    s.layer = 1;
    ql_buf_t buf = {0};
    cr_assert_eq(ql_segment_encode(&s, &buf), 0);
    ql_segment_t q;
    cr_assert_eq(ql_segment_decode(buf.data, buf.len, QL_DECODE_KEEP_EXTRA, &q), 0);
    assert_id_eq(&q.id, &s.id);
    assert_id_eq(&q.model, &s.model);
    assert_id_eq(&q.job, &s.job);
    cr_assert_eq(q.start, s.start);
    cr_assert_eq(q.end, QL_RANGE_FULL_END);
    cr_assert_eq(q.status, QL_SEG_WARNING);
    cr_assert_eq(q.create_time, 10);
    cr_assert_eq(q.last_build_time, 20);
    cr_assert_eq(q.layer, 1);
    ql_segment_free(&q);
    ql_buf_free(&buf);
}

Test(records, job_round_trip) {
    ql_job_t j = {0};
    j.id = make_id(6);
    strcpy(j.project, "sales");
    j.model = make_id(7);
    strcpy(j.model_name, "orders_model");
    strcpy(j.type, "INDEX_MERGE");
    j.state = QL_SUICIDAL;
    j.priority = 0;
    strcpy(j.submitter, "System");
    j.segment = make_id(8);
    ql_id_t sources[3] = {make_id(9), make_id(10), make_id(11)};
    j.sources = sources;
    j.n_sources = 3;
    j.has_range = true;
    j.range_start = 1000;
    j.range_end = 5000;
    j.n_steps = 7;
    j.create_time = 100;
    j.start_time = 200;
    j.end_time = 300;
    j.modify_time = 301;
    j.fence = UINT64_MAX;
    char params[] = "\x81\xa1k\xa1v";
    j.params = params;
    j.params_len = sizeof params - 1;

    ql_buf_t buf = {0};
    cr_assert_eq(ql_job_encode(&j, &buf), 0);
    ql_job_t q;
    cr_assert_eq(ql_job_decode(buf.data, buf.len, QL_DECODE_KEEP_EXTRA, &q), 0);
    assert_id_eq(&q.id, &j.id);
    cr_assert_str_eq(q.project, "sales");
    assert_id_eq(&q.model, &j.model);
    cr_assert_str_eq(q.model_name, "orders_model");
    cr_assert_str_eq(q.type, "INDEX_MERGE");
    cr_assert_eq(q.state, QL_SUICIDAL);
    cr_assert_eq(q.priority, 0);
    cr_assert_str_eq(q.submitter, "System");
    assert_id_eq(&q.segment, &j.segment);
    cr_assert_eq(q.n_sources, 3);
    for (int i = 0; i < 3; i++)
        assert_id_eq(&q.sources[i], &sources[i]);
    cr_assert(q.has_range);
    cr_assert_eq(q.range_start, 1000);
    cr_assert_eq(q.range_end, 5000);
    cr_assert_eq(q.n_steps, 7);
    cr_assert_eq(q.create_time, 100);
    cr_assert_eq(q.start_time, 200);
    cr_assert_eq(q.end_time, 300);
    cr_assert_eq(q.modify_time, 301);
    cr_assert_eq(q.fence, UINT64_MAX);
    cr_assert_eq(q.params_len, j.params_len);
    cr_assert_eq(memcmp(q.params, params, j.params_len), 0);

    ql_job_t c;
    cr_assert_eq(ql_job_copy(&c, &q), 0);
    cr_assert_neq(c.sources, q.sources, "a copy owns its sources");
    assert_id_eq(&c.sources[2], &sources[2]);
    ql_job_free(&c);
    ql_job_free(&q);
    cr_assert_null(q.sources, "free leaves the struct zeroed");
    ql_buf_free(&buf);
}

/* Kylin's yarn_queue and tag round-trip; a job without them is written without their keys, as
 * before they existed (older builds keep the keys of a job that has them as extra, like any
 * field they do not know: unknown_fields_survive_a_rewrite). */
Test(records, job_yarn_queue_and_tag_only_when_given) {
    ql_job_t j = {0};
    j.id = make_id(6);
    strcpy(j.project, "sales");
    strcpy(j.type, "INC_BUILD");
    j.n_steps = 1;
    ql_buf_t plain = {0}, tagged = {0};
    cr_assert_eq(ql_job_encode(&j, &plain), 0);
    cr_assert_null(memmem(plain.data, plain.len, "yarn_queue", 10), "no key when not given");
    cr_assert_null(memmem(plain.data, plain.len, "\xa3tag", 4), "no key when not given");
    strcpy(j.yarn_queue, "root.etl");
    strcpy(j.tag, "{\"team\":\"bi\"}");
    cr_assert_eq(ql_job_encode(&j, &tagged), 0);
    ql_job_t q;
    cr_assert_eq(ql_job_decode(tagged.data, tagged.len, 0, &q), 0);
    cr_assert_str_eq(q.yarn_queue, "root.etl");
    cr_assert_str_eq(q.tag, "{\"team\":\"bi\"}");
    ql_job_free(&q);
    cr_assert_eq(ql_job_decode(plain.data, plain.len, 0, &q), 0);
    cr_assert_str_eq(q.yarn_queue, "");
    cr_assert_str_eq(q.tag, "");
    ql_job_free(&q);
    ql_buf_free(&plain);
    ql_buf_free(&tagged);
}

Test(records, step_round_trip) {
    ql_step_t s = {0};
    s.job = make_id(12);
    s.seq = 42;
    strcpy(s.name, "Load data to index");
    strcpy(s.kind, "shell");
    s.state = QL_WARNING;
    s.start_time = 1;
    s.end_time = 2;
    s.attempts = 3;
    s.retry_at = 4;
    s.pgid = 12345;
    strcpy(s.token, "00112233445566778899aabbccddeeff");
    s.pg_start = 987654321;
    strcpy(s.boot_id, "5c8f0c4e-8a3b-4a8e-9d1e-0123456789ab");
    strcpy(s.server_id, "build-7.example.com:7070");
    strcpy(s.server_addr, "[fd00::7]:7070");
    s.failed_msg = strdup("exit code 2");
    uint8_t def[] = {0x92, 0x01, 0xc0};
    s.def = def;
    s.def_len = sizeof def;
    ql_buf_t buf = {0};
    cr_assert_eq(ql_step_encode(&s, &buf), 0);
    ql_step_t q;
    cr_assert_eq(ql_step_decode(buf.data, buf.len, QL_DECODE_KEEP_EXTRA, &q), 0);
    assert_id_eq(&q.job, &s.job);
    cr_assert_eq(q.seq, 42);
    cr_assert_str_eq(q.name, s.name);
    cr_assert_str_eq(q.kind, "shell");
    cr_assert_eq(q.state, QL_WARNING);
    cr_assert_eq(q.start_time, 1);
    cr_assert_eq(q.end_time, 2);
    cr_assert_eq(q.attempts, 3);
    cr_assert_eq(q.retry_at, 4);
    cr_assert_eq(q.pgid, 12345);
    cr_assert_str_eq(q.token, s.token);
    cr_assert_eq(q.pg_start, 987654321);
    cr_assert_str_eq(q.boot_id, s.boot_id);
    cr_assert_str_eq(q.server_id, "build-7.example.com:7070");
    cr_assert_str_eq(q.server_addr, "[fd00::7]:7070");
    cr_assert_str_eq(q.failed_msg, "exit code 2");
    cr_assert_eq(q.def_len, sizeof def);
    cr_assert_eq(memcmp(q.def, def, sizeof def), 0);
    cr_assert_eq(q.extra.count, 0, "every field is known");
    ql_step_free(&q);
    free(s.failed_msg);
    ql_buf_free(&buf);
}

/* ---- unknown fields, versions, corruption ---- */

/* Appends one msgpack string. */
static void pack_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

/* Looks key up in the top-level map of an encoded record. */
static bool find_field(const void *data, size_t len, const char *key, msgpack_object *out,
                       msgpack_zone *z) {
    msgpack_object obj;
    size_t off = 0;
    cr_assert_eq(msgpack_unpack(data, len, &off, z, &obj), MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(obj.type, MSGPACK_OBJECT_MAP);
    for (uint32_t i = 0; i < obj.via.map.size; i++) {
        const msgpack_object *k = &obj.via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
            memcmp(k->via.str.ptr, key, k->via.str.size) == 0) {
            *out = obj.via.map.ptr[i].val;
            return true;
        }
    }
    return false;
}

/* A step as a build that did not record the server wrote it (every field it wrote, by hand):
 * it decodes, with no server and no address; and a step that never ran encodes neither. */
Test(records, step_without_a_server_decodes_as_one_that_recorded_none) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    ql_id_t job = make_id(5);
    msgpack_pack_map(&pk, 16);
    const char *const strs[][2] = {{"name", "build"},
                                   {"kind", "shell"},
                                   {"state", "RUNNING"},
                                   {"token", "00112233445566778899aabbccddeeff"},
                                   {"boot_id", "5c8f0c4e-8a3b-4a8e-9d1e-0123456789ab"},
                                   {"failed_msg", "x"}};
    const char *const ints[] = {"v",        "seq",      "start_time", "end_time",
                                "attempts", "retry_at", "pgid",       "pg_start"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        msgpack_pack_str_with_body(&pk, ints[i], strlen(ints[i]));
        msgpack_pack_int64(&pk, 1);
    }
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        msgpack_pack_str_with_body(&pk, strs[i][0], strlen(strs[i][0]));
        msgpack_pack_str_with_body(&pk, strs[i][1], strlen(strs[i][1]));
    }
    msgpack_pack_str_with_body(&pk, "job", 3);
    msgpack_pack_bin_with_body(&pk, job.b, sizeof job.b);
    msgpack_pack_str_with_body(&pk, "def", 3);
    msgpack_pack_bin_with_body(&pk, "\xc0", 1);
    ql_step_t q;
    memset(&q, 0x55, sizeof q); /* a decode must not leave old bytes in the new fields */
    cr_assert_eq(ql_step_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &q), 0);
    cr_assert_eq(q.state, QL_RUNNING);
    cr_assert_str_eq(q.boot_id, "5c8f0c4e-8a3b-4a8e-9d1e-0123456789ab");
    cr_assert_eq(q.pgid, 1);
    cr_assert_str_eq(q.server_id, "", "no server recorded");
    cr_assert_str_eq(q.server_addr, "");
    cr_assert_eq(q.extra.count, 0);

    /* Written again by this build: still no server fields (an older build reads it as it was). */
    ql_buf_t buf = {0};
    cr_assert_eq(ql_step_encode(&q, &buf), 0);
    msgpack_zone z;
    msgpack_zone_init(&z, 1024);
    msgpack_object v;
    cr_assert_not(find_field(buf.data, buf.len, "server_id", &v, &z));
    cr_assert_not(find_field(buf.data, buf.len, "server_addr", &v, &z));
    cr_assert(find_field(buf.data, buf.len, "boot_id", &v, &z));
    msgpack_zone_destroy(&z);

    /* A server id longer than any qilin.server.id is not a step record. */
    char longer[QL_STEP_SERVER_ID_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    msgpack_sbuffer_clear(&sb);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, "server_id", 9);
    msgpack_pack_str_with_body(&pk, longer, strlen(longer));
    ql_step_t bad;
    cr_assert_eq(ql_step_decode(sb.data, sb.size, 0, &bad), QL_ECORRUPT);

    ql_step_free(&q);
    ql_buf_free(&buf);
    msgpack_sbuffer_destroy(&sb);
}

Test(records, unknown_fields_survive_a_rewrite) {
    /* A project written by a newer build: two fields this build does not know. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    pack_str(&pk, "v");
    msgpack_pack_int(&pk, 1);
    pack_str(&pk, "name");
    pack_str(&pk, "p1");
    pack_str(&pk, "owner_team");
    pack_str(&pk, "data-platform");
    pack_str(&pk, "quota");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, 7);
    msgpack_pack_map(&pk, 1);
    pack_str(&pk, "gb");
    msgpack_pack_double(&pk, 1.5);
    pack_str(&pk, "create_time");
    msgpack_pack_int64(&pk, 99);

    ql_project_t p;
    cr_assert_eq(ql_project_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &p), 0);
    cr_assert_str_eq(p.name, "p1");
    cr_assert_eq(p.create_time, 99);
    cr_assert_eq(p.extra.count, 2);
    /* An older build changes a known field and writes the record back. */
    p.modify_time = 123;
    ql_buf_t buf = {0};
    cr_assert_eq(ql_project_encode(&p, &buf), 0);

    msgpack_zone z;
    msgpack_zone_init(&z, 1024);
    msgpack_object v;
    cr_assert(find_field(buf.data, buf.len, "owner_team", &v, &z));
    cr_assert_eq(v.type, MSGPACK_OBJECT_STR);
    cr_assert_eq(v.via.str.size, strlen("data-platform"));
    cr_assert_eq(memcmp(v.via.str.ptr, "data-platform", v.via.str.size), 0);
    cr_assert(find_field(buf.data, buf.len, "quota", &v, &z));
    cr_assert_eq(v.type, MSGPACK_OBJECT_ARRAY);
    cr_assert_eq(v.via.array.size, 2);
    cr_assert_eq(v.via.array.ptr[0].via.u64, 7);
    cr_assert_eq(v.via.array.ptr[1].type, MSGPACK_OBJECT_MAP);
    cr_assert_float_eq(v.via.array.ptr[1].via.map.ptr[0].val.via.f64, 1.5, 1e-9);

    ql_project_t q;
    cr_assert_eq(ql_project_decode(buf.data, buf.len, QL_DECODE_KEEP_EXTRA, &q), 0);
    cr_assert_eq(q.modify_time, 123);
    cr_assert_eq(q.extra.count, 2);
    ql_project_free(&q);

    /* Without KEEP_EXTRA the unknown fields are not kept (a read-only decode). */
    cr_assert_eq(ql_project_decode(sb.data, sb.size, 0, &q), 0);
    cr_assert_eq(q.extra.count, 0);
    cr_assert_eq(q.extra.len, 0);
    ql_project_free(&q);

    msgpack_zone_destroy(&z);
    ql_project_free(&p);
    ql_buf_free(&buf);
    msgpack_sbuffer_destroy(&sb);
}

Test(records, unknown_fields_survive_on_every_record_type) {
    /* Encode each record, splice in an extra pair, and check it comes back out. */
    ql_buf_t buf = {0}, out = {0};
    for (int kind = 0; kind < 5; kind++) {
        ql_buf_reset(&buf);
        ql_buf_reset(&out);
        ql_project_t p = {0};
        ql_model_t m = {0};
        ql_segment_t s = {0};
        ql_job_t j = {0};
        ql_step_t st = {0};
        strcpy(p.name, "p");
        m.id = make_id(1);
        strcpy(m.name, "m");
        strcpy(m.project, "p");
        s.id = make_id(2);
        s.model = make_id(1);
        s.end = 1;
        j.id = make_id(3);
        strcpy(j.project, "p");
        st.job = make_id(3);
        switch (kind) {
        case 0:
            ql_project_encode(&p, &buf);
            break;
        case 1:
            ql_model_encode(&m, &buf);
            break;
        case 2:
            ql_segment_encode(&s, &buf);
            break;
        case 3:
            ql_job_encode(&j, &buf);
            break;
        default:
            ql_step_encode(&st, &buf);
        }
        /* Re-pack the map with one more pair at the end. */
        msgpack_zone z;
        msgpack_zone_init(&z, 1024);
        msgpack_object obj;
        size_t off = 0;
        cr_assert_eq(msgpack_unpack((const char *)buf.data, buf.len, &off, &z, &obj),
                     MSGPACK_UNPACK_SUCCESS);
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, obj.via.map.size + 1);
        for (uint32_t i = 0; i < obj.via.map.size; i++) {
            msgpack_pack_object(&pk, obj.via.map.ptr[i].key);
            msgpack_pack_object(&pk, obj.via.map.ptr[i].val);
        }
        pack_str(&pk, "from_the_future");
        msgpack_pack_uint64(&pk, 0xfeedfaceull);

        int rc;
        switch (kind) {
        case 0:
            rc = ql_project_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &p);
            cr_assert_eq(p.extra.count, 1);
            ql_project_encode(&p, &out);
            ql_project_free(&p);
            break;
        case 1:
            rc = ql_model_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &m);
            cr_assert_eq(m.extra.count, 1);
            ql_model_encode(&m, &out);
            ql_model_free(&m);
            break;
        case 2:
            rc = ql_segment_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &s);
            cr_assert_eq(s.extra.count, 1);
            ql_segment_encode(&s, &out);
            ql_segment_free(&s);
            break;
        case 3:
            rc = ql_job_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &j);
            cr_assert_eq(j.extra.count, 1);
            ql_job_encode(&j, &out);
            ql_job_free(&j);
            break;
        default:
            rc = ql_step_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &st);
            cr_assert_eq(st.extra.count, 1);
            ql_step_encode(&st, &out);
            ql_step_free(&st);
        }
        cr_assert_eq(rc, 0, "record kind %d", kind);
        msgpack_object v;
        cr_assert(find_field(out.data, out.len, "from_the_future", &v, &z), "kind %d", kind);
        cr_assert_eq(v.via.u64, 0xfeedfaceull);
        msgpack_sbuffer_destroy(&sb);
        msgpack_zone_destroy(&z);
    }
    ql_buf_free(&buf);
    ql_buf_free(&out);
}

Test(records, newer_version_is_eversion) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "v");
    msgpack_pack_int(&pk, QL_RECORD_VERSION + 1);
    pack_str(&pk, "name");
    pack_str(&pk, "p1");
    ql_project_t p;
    ql_job_t j;
    ql_segment_t s;
    cr_assert_eq(ql_project_decode(sb.data, sb.size, QL_DECODE_KEEP_EXTRA, &p), QL_EVERSION);
    cr_assert_eq(ql_job_decode(sb.data, sb.size, 0, &j), QL_EVERSION);
    cr_assert_eq(ql_segment_decode(sb.data, sb.size, 0, &s), QL_EVERSION);
    cr_assert_str_eq(ql_strerror(QL_EVERSION),
                     "the store was written by a newer, incompatible version");
    msgpack_sbuffer_destroy(&sb);

    /* The current version decodes. */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "v");
    msgpack_pack_int(&pk, QL_RECORD_VERSION);
    pack_str(&pk, "name");
    pack_str(&pk, "p1");
    cr_assert_eq(ql_project_decode(sb.data, sb.size, 0, &p), 0);
    ql_project_free(&p);
    msgpack_sbuffer_destroy(&sb);
}

Test(records, garbage_is_ecorrupt) {
    ql_project_t p;
    ql_model_t m;
    ql_segment_t s;
    ql_job_t j;
    ql_step_t st;
    const uint8_t junk[] = {0xc1, 0xff, 0x00, 0x13, 0x37};
    cr_assert_eq(ql_project_decode(junk, sizeof junk, 0, &p), QL_ECORRUPT);
    cr_assert_eq(ql_model_decode(junk, sizeof junk, 0, &m), QL_ECORRUPT);
    cr_assert_eq(ql_segment_decode(junk, sizeof junk, 0, &s), QL_ECORRUPT);
    cr_assert_eq(ql_job_decode(junk, sizeof junk, 0, &j), QL_ECORRUPT);
    cr_assert_eq(ql_step_decode(junk, sizeof junk, 0, &st), QL_ECORRUPT);
    cr_assert_eq(ql_project_decode(junk, 0, 0, &p), QL_ECORRUPT, "empty input");

    /* Valid msgpack that is not a map. */
    const uint8_t integer[] = {0x2a};
    cr_assert_eq(ql_job_decode(integer, sizeof integer, 0, &j), QL_ECORRUPT);

    /* A truncated record. */
    ql_job_t full = {0};
    full.id = make_id(1);
    strcpy(full.project, "p");
    ql_buf_t buf = {0};
    cr_assert_eq(ql_job_encode(&full, &buf), 0);
    for (size_t cut = 1; cut < buf.len; cut += 7)
        cr_assert_eq(ql_job_decode(buf.data, buf.len - cut, 0, &j), QL_ECORRUPT, "cut %zu", cut);

    /* A known field with the wrong type, an unknown state, an id of the wrong size. */
    const struct {
        const char *key;
        int kind; /* 0 int, 1 str */
        const char *str;
    } bad[] = {
        {"name", 0, NULL}, {"state", 1, "FLYING"}, {"id", 1, "short"}, {"priority", 0, NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        pack_str(&pk, "v");
        msgpack_pack_int(&pk, 1);
        pack_str(&pk, bad[i].key);
        if (bad[i].kind == 0)
            msgpack_pack_int(&pk, 99);
        else
            pack_str(&pk, bad[i].str);
        int rc = strcmp(bad[i].key, "name") == 0 ? ql_project_decode(sb.data, sb.size, 0, &p)
                                                 : ql_job_decode(sb.data, sb.size, 0, &j);
        cr_assert_eq(rc, QL_ECORRUPT, "field %s", bad[i].key);
        msgpack_sbuffer_destroy(&sb);
    }
    ql_buf_free(&buf);
}

/*
 * A corrupt value whose array or map header claims billions of elements (found by
 * fuzz_records): msgpack-c allocates the objects for the claimed count before reading any, so
 * five bytes asked for up to 128 GB. The address space is capped 256 MB above what the test
 * maps already, so such a request fails with ENOMEM (where the system would otherwise hand out
 * untouched virtual memory and hide it); the decoders must refuse without asking at all.
 */
Test(records, huge_claimed_count_is_ecorrupt_without_allocating) {
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
    } inputs[] = {
        {"map32 of 2^32-1 pairs", {0xdf, 0xff, 0xff, 0xff, 0xff}, 5},
        {"array32 of 2^31 items", {0xdd, 0x80, 0x00, 0x00, 0x00}, 5},
        /* {"v": 1, "name": [2^30 items]}: nested, after a valid field. */
        {"nested array32",
         {0x82, 0xa1, 'v', 0x01, 0xa4, 'n', 'a', 'm', 'e', 0xdd, 0x40, 0x00, 0x00, 0x00},
         14},
    };
    struct rlimit old, capped;
    cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
    capped = old;
    capped.rlim_cur = ql_test_mapped_bytes() + ((rlim_t)256 << 20);
    cr_assert_eq(setrlimit(RLIMIT_AS, &capped), 0);
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        const void *b = inputs[i].bytes;
        size_t n = inputs[i].len;
        ql_project_t p;
        ql_model_t m;
        ql_segment_t s;
        ql_job_t j;
        ql_step_t st;
        int rc[5];
        errno = 0;
        rc[0] = ql_project_decode(b, n, QL_DECODE_KEEP_EXTRA, &p);
        rc[1] = ql_model_decode(b, n, QL_DECODE_KEEP_EXTRA, &m);
        rc[2] = ql_segment_decode(b, n, QL_DECODE_KEEP_EXTRA, &s);
        rc[3] = ql_job_decode(b, n, QL_DECODE_KEEP_EXTRA, &j);
        rc[4] = ql_step_decode(b, n, QL_DECODE_KEEP_EXTRA, &st);
        int saved = errno;
        for (int k = 0; k < 5; k++)
            cr_expect_eq(rc[k], QL_ECORRUPT, "%s: decoder %d: %d", inputs[i].what, k, rc[k]);
        cr_expect_neq(saved, ENOMEM, "%s: an allocation failed, sized by the claimed count",
                      inputs[i].what);
    }
    /* A record whose counts fit its bytes still decodes under the cap. */
    ql_project_t p = {0};
    strcpy(p.name, "p1");
    cr_assert_eq(ql_strmap_set(&p.config, "kylin.web.timezone", "UTC"), 0);
    ql_buf_t buf = {0};
    cr_assert_eq(ql_project_encode(&p, &buf), 0);
    ql_project_t q;
    cr_assert_eq(ql_project_decode(buf.data, buf.len, 0, &q), 0);
    cr_assert_eq(q.config.n, 1);
    ql_project_free(&q);
    ql_project_free(&p);
    ql_buf_free(&buf);
    cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
}

/* Packs {"v": 1, key: <len bytes at val>} (or, with in_map, {"v": 1, key: {<val>: "1"}}). */
static void pack_nul_record(msgpack_sbuffer *sb, const char *key, const char *val, size_t len,
                            bool in_map) {
    msgpack_packer pk;
    msgpack_sbuffer_init(sb);
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "v");
    msgpack_pack_int(&pk, QL_RECORD_VERSION);
    pack_str(&pk, key);
    if (in_map)
        msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, val, len);
    if (in_map)
        pack_str(&pk, "1");
}

/*
 * A stored string holding a NUL (found by fuzz_records): the encoders write C strings, so no
 * build writes one, and accepting it cut the string at the NUL for every reader and changed
 * it on the next rewrite ("a\0b" decoded, encoded back as "a"). It is a corrupt record.
 */
Test(records, string_with_nul_is_ecorrupt) {
    msgpack_sbuffer sb;
    ql_project_t p;
    ql_job_t j;
    ql_step_t st;

    pack_nul_record(&sb, "name", "a\0b", 3, false); /* fixed-size field */
    cr_expect_eq(ql_project_decode(sb.data, sb.size, 0, &p), QL_ECORRUPT, "project name");
    msgpack_sbuffer_destroy(&sb);
    pack_nul_record(&sb, "description", "sales\0", 6, false); /* heap string */
    cr_expect_eq(ql_project_decode(sb.data, sb.size, 0, &p), QL_ECORRUPT, "description");
    msgpack_sbuffer_destroy(&sb);
    pack_nul_record(&sb, "config", "kylin.web.timezone\0x", 20, true); /* map key */
    cr_expect_eq(ql_project_decode(sb.data, sb.size, 0, &p), QL_ECORRUPT, "config key");
    msgpack_sbuffer_destroy(&sb);
    pack_nul_record(&sb, "type", "INC_BUILD\0!", 11, false);
    cr_expect_eq(ql_job_decode(sb.data, sb.size, 0, &j), QL_ECORRUPT, "job type");
    msgpack_sbuffer_destroy(&sb);
    pack_nul_record(&sb, "failed_msg", "\0", 1, false);
    cr_expect_eq(ql_step_decode(sb.data, sb.size, 0, &st), QL_ECORRUPT, "failed_msg");
    msgpack_sbuffer_destroy(&sb);

    /* The same strings without the NUL decode. */
    pack_nul_record(&sb, "config", "kylin.web.timezone", 18, true);
    cr_assert_eq(ql_project_decode(sb.data, sb.size, 0, &p), 0);
    cr_assert_str_eq(p.config.items[0].key, "kylin.web.timezone");
    ql_project_free(&p);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- ids ---- */

Test(records, id_format_and_parse) {
    ql_id_t id;
    for (int i = 0; i < 16; i++)
        id.b[i] = (uint8_t)(0x10 * (i % 16) + i);
    char s[QL_ID_STR_LEN + 1];
    ql_id_format(&id, s);
    cr_assert_str_eq(s, "00112233-4455-6677-8899-aabbccddeeff");
    ql_id_t back;
    cr_assert_eq(ql_id_parse(s, &back), 0);
    cr_assert(ql_id_eq(&id, &back));
    cr_assert_eq(ql_id_parse("00112233-4455-6677-8899-AABBCCDDEEFF", &back), 0, "upper case");
    cr_assert(ql_id_eq(&id, &back));

    const char *bad[] = {
        "",
        "00112233-4455-6677-8899-aabbccddeef",   /* short */
        "00112233-4455-6677-8899-aabbccddeeff0", /* long */
        "0011223304455-6677-8899-aabbccddeeff",  /* dash missing */
        "00112233-4455-6677-8899-aabbccddeefg",  /* not hex */
        "001122-33-4455-6677-8899aabbccddeeff",  /* dash misplaced */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(ql_id_parse(bad[i], &back), QL_EINVAL, "'%s'", bad[i]);
    cr_assert_eq(ql_id_parse(NULL, &back), QL_EINVAL);

    ql_id_t zero = {0};
    cr_assert(ql_id_is_zero(&zero));
    cr_assert(!ql_id_is_zero(&id));
    ql_id_format(&zero, s);
    cr_assert_str_eq(s, "00000000-0000-0000-0000-000000000000");
}

Test(records, step_id_format_and_parse) {
    ql_id_t job = make_id(9), back;
    char s[QL_ID_STR_LEN + 8], want[QL_ID_STR_LEN + 8];
    ql_id_format(&job, want);
    strcat(want, "_03");
    ql_step_id_format(&job, 3, s);
    cr_assert_str_eq(s, want);
    uint32_t seq = 77;
    cr_assert_eq(ql_step_id_parse(s, &back, &seq), 0);
    cr_assert(ql_id_eq(&job, &back));
    cr_assert_eq(seq, 3);

    ql_step_id_format(&job, 42, s);
    cr_assert_eq(ql_step_id_parse(s, &back, &seq), 0);
    cr_assert_eq(seq, 42);
    cr_assert_eq(s[QL_ID_STR_LEN + 1], '4');

    char id[QL_ID_STR_LEN + 1];
    ql_id_format(&job, id);
    char bad[4][64];
    snprintf(bad[0], sizeof bad[0], "%s", id);       /* no suffix */
    snprintf(bad[1], sizeof bad[1], "%s-01", id);    /* wrong separator */
    snprintf(bad[2], sizeof bad[2], "%s_0x", id);    /* not a number */
    snprintf(bad[3], sizeof bad[3], "%s_00001", id); /* too long */
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ql_step_id_parse(bad[i], &back, &seq), QL_EINVAL, "'%s'", bad[i]);
    cr_assert_eq(ql_step_id_parse("zz_01", &back, &seq), QL_EINVAL);
    cr_assert_eq(ql_step_id_parse(NULL, &back, &seq), QL_EINVAL);
}

/* ---- states and names ---- */

Test(records, state_names_and_classes) {
    for (int s = 0; s < QL_STATE_COUNT; s++) {
        ql_state_t back;
        cr_assert_eq(ql_state_parse(ql_state_name((ql_state_t)s), &back), 0);
        cr_assert_eq(back, (ql_state_t)s);
    }
    ql_state_t back;
    cr_assert_eq(ql_state_parse("ready", &back), QL_EINVAL, "names are upper case");
    cr_assert(ql_state_is_final(QL_SUCCEED) && ql_state_is_final(QL_DISCARDED) &&
              ql_state_is_final(QL_SUICIDAL));
    cr_assert(!ql_state_is_final(QL_ERROR) && !ql_state_is_final(QL_PAUSED));
    cr_assert(ql_state_is_progressing(QL_READY) && ql_state_is_progressing(QL_PENDING) &&
              ql_state_is_progressing(QL_RUNNING));
    cr_assert(!ql_state_is_progressing(QL_ERROR) && !ql_state_is_progressing(QL_PAUSED));
}

/* ---- string maps ---- */

Test(records, strmap) {
    ql_strmap_t m = {0};
    cr_assert_null(ql_strmap_get(&m, "a"));
    cr_assert_eq(ql_strmap_set(&m, "a", "1"), 0);
    cr_assert_eq(ql_strmap_set(&m, "b", "2"), 0);
    cr_assert_eq(ql_strmap_set(&m, "c", "3"), 0);
    cr_assert_eq(m.n, 3);
    cr_assert_str_eq(ql_strmap_get(&m, "b"), "2");
    cr_assert_eq(ql_strmap_set(&m, "b", "two"), 0, "replace");
    cr_assert_eq(m.n, 3);
    cr_assert_str_eq(ql_strmap_get(&m, "b"), "two");
    cr_assert_eq(ql_strmap_set(&m, "a", NULL), 0, "remove");
    cr_assert_eq(m.n, 2);
    cr_assert_null(ql_strmap_get(&m, "a"));
    cr_assert_str_eq(ql_strmap_get(&m, "c"), "3");
    cr_assert_eq(ql_strmap_set(&m, "missing", NULL), 0, "removing a missing key is fine");

    /* The map owns copies: changing the caller's buffer changes nothing. */
    char key[] = "k", val[] = "v";
    cr_assert_eq(ql_strmap_set(&m, key, val), 0);
    key[0] = 'x';
    val[0] = 'y';
    cr_assert_str_eq(ql_strmap_get(&m, "k"), "v");

    ql_strmap_t c;
    cr_assert_eq(ql_strmap_copy(&c, &m), 0);
    cr_assert_eq(c.n, m.n);
    cr_assert_eq(ql_strmap_set(&m, "c", "changed"), 0);
    cr_assert_str_eq(ql_strmap_get(&c, "c"), "3", "a copy is deep");
    ql_strmap_free(&c);
    ql_strmap_free(&m);
    cr_assert_eq(m.n, 0);
    cr_assert_null(m.items);
}
