/* The SQL of the PostgreSQL store's prepared statements and walks (docs/postgresql.md; the
 * schema they run on: store_pg_schema.c). Each is prepared on a session the first time it runs
 * there (pg_conn_t.prepared). */
#include "store_pg_int.h"

#define LIVE "state IN (0, 1, 2, 3, 4)"

const char *const pg_stmt_sql[S_COUNT] = {
    [S_META_GET] = "SELECT value FROM meta WHERE key = $1::text",
    [S_META_GET_SHARE] = "SELECT value FROM meta WHERE key = $1::text FOR SHARE",
    [S_META_GET_UPDATE] = "SELECT value FROM meta WHERE key = $1::text FOR UPDATE",
    [S_META_PUT] = "INSERT INTO meta (key, value) VALUES ($1::text, $2::bytea) "
                   "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    [S_META_DELETE] = "DELETE FROM meta WHERE key = $1::text",
    [S_META_BUMP] = "INSERT INTO meta (key, value) VALUES ('metadata_generation', "
                    "int8send(1)) ON CONFLICT (key) DO UPDATE SET value = "
                    "int8send(('x' || encode(meta.value, 'hex'))::bit(64)::bigint + 1)",
    [S_PROJ_GET] = "SELECT rec FROM projects WHERE name = $1::text",
    [S_PROJ_GET_SHARE] = "SELECT rec FROM projects WHERE name = $1::text FOR SHARE",
    [S_PROJ_PUT] = "INSERT INTO projects (name, rec) VALUES ($1::text, $2::bytea) "
                   "ON CONFLICT (name) DO UPDATE SET rec = EXCLUDED.rec",
    [S_PROJ_COUNT] = "SELECT count(*) FROM projects",
    [S_MODEL_GET] = "SELECT rec FROM models WHERE id = $1::uuid",
    [S_MODEL_GET_SHARE] = "SELECT rec FROM models WHERE id = $1::uuid FOR SHARE",
    /* Taking the model lock $2 too (pg_model_get_for_probe); FOR SHARE reads the latest row. */
    [S_MODEL_GET_SHARE_LOCK] =
        "SELECT m.rec FROM models m, (SELECT pg_advisory_xact_lock($2::int8)) "
        "l WHERE m.id = $1::uuid FOR SHARE OF m",
    [S_MODEL_SEG_EXISTS] = "SELECT 1 FROM models WHERE id = $1::uuid AND ($2::uuid IS NULL OR "
                           "EXISTS (SELECT 1 FROM segments WHERE id = $2::uuid))",
    [S_MODEL_ID_BY_NAME] = "SELECT id FROM models WHERE project = $1::text AND name = $2::text",
    [S_MODEL_FIND] = "SELECT rec FROM models WHERE project = $1::text AND name = $2::text",
    [S_MODEL_FIND_PROJ] = "SELECT p.rec, m.rec FROM projects p LEFT JOIN models m ON m.project = "
                          "p.name AND m.name = $2::text WHERE p.name = $1::text",
    [S_MODEL_FIND_SHARE] = "SELECT rec FROM models WHERE project = $1::text AND name = $2::text "
                           "FOR SHARE",
    [S_MODEL_OLD] = "SELECT project, name FROM models WHERE id = $1::uuid FOR UPDATE",
    [S_MODEL_INSERT] = "INSERT INTO models (id, project, name, rec) VALUES ($1::uuid, $2::text, "
                       "$3::text, $4::bytea) ON CONFLICT DO NOTHING RETURNING 1",
    [S_MODEL_UPDATE] = "UPDATE models SET project = $2::text, name = $3::text, rec = $4::bytea "
                       "WHERE id = $1::uuid",
    [S_MODEL_COUNT] = "SELECT count(*) FROM models WHERE project = $1::text",
    [S_SEG_GET] = "SELECT rec FROM segments WHERE id = $1::uuid",
    [S_SEG_GET_UPDATE] = "SELECT rec FROM segments WHERE id = $1::uuid FOR UPDATE",
    [S_SEG_EXISTS] = "SELECT 1 FROM segments WHERE id = $1::uuid",
    [S_SEG_OLD] = "SELECT model FROM segments WHERE id = $1::uuid",
    [S_SEG_UPSERT] = "INSERT INTO segments (id, model, start_ms, end_ms, status, rec) VALUES "
                     "($1::uuid, $2::uuid, $3::int8, $4::int8, $5::int2, $6::bytea) "
                     "ON CONFLICT (id) DO UPDATE SET model = EXCLUDED.model, start_ms = "
                     "EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms, status = EXCLUDED.status, "
                     "rec = EXCLUDED.rec",
    /* The common put: the segment is new or stays in its model (whose lock the put holds). No
     * row: it exists in another model, whose lock the put must take first (pg_segment_put). */
    [S_SEG_PUT_SAME] = "INSERT INTO segments (id, model, start_ms, end_ms, status, rec) VALUES "
                       "($1::uuid, $2::uuid, $3::int8, $4::int8, $5::int2, $6::bytea) "
                       "ON CONFLICT (id) DO UPDATE SET start_ms = EXCLUDED.start_ms, end_ms = "
                       "EXCLUDED.end_ms, status = EXCLUDED.status, rec = EXCLUDED.rec WHERE "
                       "segments.model = EXCLUDED.model RETURNING 1",
    /* The same taking the model lock $7 first, in the row's source (pg_lock_model_carried). */
    [S_SEG_PUT_SAME_LOCK] = "INSERT INTO segments (id, model, start_ms, end_ms, status, rec) "
                            "SELECT $1::uuid, $2::uuid, $3::int8, $4::int8, $5::int2, $6::bytea "
                            "FROM (SELECT pg_advisory_xact_lock($7::int8)) l ON CONFLICT (id) DO "
                            "UPDATE SET start_ms = EXCLUDED.start_ms, end_ms = EXCLUDED.end_ms, "
                            "status = EXCLUDED.status, rec = EXCLUDED.rec WHERE segments.model = "
                            "EXCLUDED.model RETURNING 1",
    [S_SEG_DELETE] = "DELETE FROM segments WHERE id = $1::uuid RETURNING model",
    [S_SEG_COUNT] = "SELECT count(*) FROM segments WHERE model = $1::uuid",
    [S_JOB_GET] = "SELECT rec FROM jobs WHERE id = $1::uuid",
    [S_JOB_GET_UPDATE] = "SELECT rec, project, model, create_time, state FROM jobs WHERE id = "
                         "$1::uuid FOR UPDATE",
    [S_JOB_OLD] = "SELECT project, model, create_time, state FROM jobs WHERE id = $1::uuid "
                  "FOR UPDATE",
    [S_JOB_INSERT] = "INSERT INTO jobs (id, project, model, state, priority, create_time, "
                     "modify_time, has_range, range_start, range_end, fence, rec) VALUES "
                     "($1::uuid, $2::text, $3::uuid, $4::int2, $5::int2, $6::int8, $7::int8, "
                     "$8::bool, $9::int8, $10::int8, $11::int8, $12::bytea) "
                     "ON CONFLICT DO NOTHING RETURNING 1",
    [S_JOB_UPDATE] = "UPDATE jobs SET state = $4::int2, priority = $5::int2, modify_time = "
                     "$7::int8, has_range = $8::bool, range_start = $9::int8, range_end = "
                     "$10::int8, fence = $11::int8, rec = $12::bytea WHERE id = $1::uuid AND "
                     "project = $2::text AND model IS NOT DISTINCT FROM $3::uuid AND "
                     "create_time = $6::int8 RETURNING 1",
    /* Taking the model lock $13 first (pg_lock_model_carried), in a subquery run before. */
    [S_JOB_UPDATE_LOCK] = "UPDATE jobs SET state = $4::int2, priority = $5::int2, modify_time = "
                          "$7::int8, has_range = $8::bool, range_start = $9::int8, range_end = "
                          "$10::int8, fence = $11::int8, rec = $12::bytea FROM (SELECT "
                          "pg_advisory_xact_lock($13::int8)) l WHERE id = $1::uuid AND project = "
                          "$2::text AND model IS NOT DISTINCT FROM $3::uuid AND create_time = "
                          "$6::int8 RETURNING 1",
    /* The steps and outputs with the job, in one statement (data-modifying WITH). */
    [S_JOB_DELETE] = "WITH o AS (DELETE FROM outputs WHERE job = $1::uuid), s AS (DELETE FROM "
                     "steps WHERE job = $1::uuid) DELETE FROM jobs WHERE id = $1::uuid",
    /* Only an empty model or project goes (ql_store.h): 0 rows when something is left. */
    [S_MODEL_DELETE] = "DELETE FROM models m WHERE id = $1::uuid AND NOT EXISTS (SELECT 1 FROM "
                       "segments WHERE model = $1::uuid) AND NOT EXISTS (SELECT 1 FROM jobs "
                       "WHERE model = $1::uuid) RETURNING 1",
    [S_PROJ_DELETE] = "DELETE FROM projects WHERE name = $1::text AND NOT EXISTS (SELECT 1 FROM "
                      "models WHERE project = $1::text) AND NOT EXISTS (SELECT 1 FROM jobs WHERE "
                      "project = $1::text) RETURNING 1",
    [S_JOB_MODEL] = "SELECT model FROM jobs WHERE id = $1::uuid",
    [S_JOB_COUNT] = "SELECT count(*) FROM jobs WHERE project = $1::text AND "
                    "((($2::int4) >> state) & 1) = 1",
    [S_JOB_COUNT_ALL] = "SELECT count(*) FROM jobs WHERE ((($1::int4) >> state) & 1) = 1",
    [S_STEP_GET] = "SELECT rec FROM steps WHERE job = $1::uuid AND seq = $2::int4",
    [S_STEP_PUT] = "INSERT INTO steps (job, seq, rec) VALUES ($1::uuid, $2::int4, $3::bytea) "
                   "ON CONFLICT (job, seq) DO UPDATE SET rec = EXCLUDED.rec",
    [S_STEP_ALL] = "SELECT seq, rec FROM steps WHERE job = $1::uuid ORDER BY seq",
    [S_OUT_GET] = "SELECT body FROM outputs WHERE job = $1::uuid AND seq = $2::int4",
    [S_OUT_PUT] = "INSERT INTO outputs (job, seq, body) VALUES ($1::uuid, $2::int4, $3::bytea) "
                  "ON CONFLICT (job, seq) DO UPDATE SET body = EXCLUDED.body",
    [S_XACT_STATUS] = "SELECT pg_xact_status($1::text::xid8)",
    /* ON CONFLICT DO UPDATE locks the existing row even when its WHERE refuses the update, so
     * a refused claim still holds the row until the transaction ends. */
    [S_FENCE_CLAIM] =
        "INSERT INTO meta (key, value) VALUES ('job_engine_epoch', int8send($1::int8)) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE "
        "('x' || encode(meta.value, 'hex'))::bit(64)::bigint <= $1::int8 "
        "RETURNING 1",
};

#define RECENT "SELECT id, state, modify_time FROM jobs "
const char *const pg_walk_sql[W_COUNT] = {
    [W_PROJECTS] = "SELECT rec FROM projects ORDER BY name COLLATE \"C\"",
    [W_MODELS] = "SELECT rec FROM models WHERE project = $1::text ORDER BY name COLLATE \"C\"",
    [W_SEGMENTS] = "SELECT rec FROM segments WHERE model = $1::uuid ORDER BY start_ms, end_ms, id",
    [W_SEG_OVERLAP] = "SELECT rec FROM segments WHERE model = $1::uuid AND int8range(start_ms, "
                      "end_ms) && int8range($2::int8, $3::int8) ORDER BY start_ms, end_ms, id",
    [W_JOB_STATE] = "SELECT rec FROM jobs WHERE state = $1::int2 ORDER BY priority, create_time, "
                    "id",
    [W_JOB_STATE_REF] = "SELECT id, priority, create_time, project, model FROM jobs WHERE state = "
                        "$1::int2 ORDER BY priority, create_time, id",
    [W_JOB_MODEL] = "SELECT rec FROM jobs WHERE model = $1::uuid ORDER BY create_time, id",
    [W_JOB_LIVE] = "SELECT id, state, has_range, range_start, range_end FROM jobs WHERE model = "
                   "$1::uuid AND " LIVE " ORDER BY CASE WHEN has_range THEN range_start ELSE "
                   "-9223372036854775808 END, id",
    [W_JOB_LIVE_OVERLAP] = "SELECT id, state, has_range, range_start, range_end FROM jobs WHERE "
                           "model = $1::uuid AND " LIVE " AND has_range AND int8range(range_start, "
                           "range_end) && int8range($2::int8, $3::int8) ORDER BY range_start, id",
    [W_JOB_RECENT_P_DESC] = RECENT "WHERE project = $1::text ORDER BY modify_time DESC, id DESC",
    [W_JOB_RECENT_P_ASC] = RECENT "WHERE project = $1::text ORDER BY modify_time, id",
    [W_JOB_RECENT_DESC] = RECENT "ORDER BY modify_time DESC, id DESC",
    [W_JOB_RECENT_ASC] = RECENT "ORDER BY modify_time, id",
    [W_STEPS] = "SELECT rec FROM steps WHERE job = $1::uuid ORDER BY seq",
    /* W_SEG_OVERLAP's rows then W_JOB_LIVE_OVERLAP's, in their orders, in one statement
     * (pg_probe_range): k tells which; o orders segments by end, jobs by id only. */
    [W_RANGE_PROBE] =
        "SELECT 0 AS k, rec, id, NULL::int2 AS state, start_ms AS a, end_ms AS b, end_ms AS o "
        "FROM segments WHERE model = $1::uuid AND int8range(start_ms, end_ms) && "
        "int8range($2::int8, $3::int8) UNION ALL SELECT 1, NULL, id, state, range_start, "
        "range_end, 0 FROM jobs WHERE model = $1::uuid AND " LIVE " AND has_range AND "
        "int8range(range_start, range_end) && int8range($2::int8, $3::int8) ORDER BY k, a, o, id",
};
