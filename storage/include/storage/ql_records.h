/*
 * Qilin's metadata records: projects, models, segments, jobs and steps (docs/design/metadata.md,
 * docs/design/jobs.md), as plain C structs, and their msgpack encoding.
 *
 * Encoding: every record is a msgpack map keyed by field name with a format version under "v".
 * Fields this build does not know are kept, still encoded, in `extra` when the record is decoded
 * with QL_DECODE_KEEP_EXTRA, and written back unchanged by the encoder, so a rewrite by an older
 * build never drops what a newer one stored.
 *
 * Ownership: a decoded record owns its heap members (description, config maps, extra, ...);
 * release them with the record's _free function, which leaves the struct zeroed. Fixed-size
 * fields (names, ids) need no freeing. Decoding never keeps pointers into the input buffer, so
 * the buffer (an LMDB value) may go away when its transaction ends.
 */
#ifndef QL_RECORDS_H
#define QL_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QL_NAME_MAX 100   /* project, model and template names */
#define QL_COLUMN_MAX 255 /* partition column names */
#define QL_FORMAT_MAX 63  /* partition date formats */
/* Job types: [A-Z][A-Z0-9_]{0,63}. The one owner of the limit: the template loader, the ad-hoc
 * job parser, the store's checks and the REST API all use it. */
#define QL_TYPE_MAX 64
#define QL_USER_MAX 63       /* submitter names */
#define QL_STEP_NAME_MAX 127 /* step names */
#define QL_HMS_MAX 15        /* stored HH:mm:ss strings (kept as written, validated on use) */
/* Steps per job: step ids are <job_id>_NN with two digits (_00 to _99), as in Kylin. The one
 * owner of the limit, like QL_TYPE_MAX. */
#define QL_JOB_STEPS_MAX 100
#define QL_ID_STR_LEN 36            /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
#define QL_RANGE_FULL_END INT64_MAX /* a full-load model's single segment is [0, INT64_MAX) */
/* The bounds of every time a range is made of (segments, job ranges, build requests): epoch
 * milliseconds in [0, QL_TIME_MAX]. 0 is 1970-01-01T00:00:00Z (and the API's "not yet"), so a
 * range never starts before it. QL_TIME_MAX is 9999-12-31T00:00:00Z: a partition format writes
 * years up to 9999 (ql_datefmt.h), and any instant up to this one is still in year 9999 in every
 * time zone, so every time within the bounds can be normalized. The one range end past it is
 * QL_RANGE_FULL_END, and only in [0, QL_RANGE_FULL_END), a full-load model's segment. */
#define QL_TIME_MAX 253402214400000LL

#define QL_STEP_TOKEN_LEN 32      /* hex digits of a step try's marker: 128 random bits */
#define QL_STEP_BOOT_ID_LEN 36    /* /proc/sys/kernel/random/boot_id, without the newline */
#define QL_STEP_SERVER_ID_MAX 200 /* a qilin.server.id (config/config_table.c bounds it) */
/* A server's API address, "host:port" or "[v6]:port": a DNS name (253) and the rest. */
#define QL_STEP_SERVER_ADDR_MAX 263
/* Kylin's yarn_queue and tag of a job (docs/rest.md, Kylin's optional fields): kept as given,
 * the tag as the compact JSON text of whatever value the client sent. */
#define QL_JOB_QUEUE_MAX 255
#define QL_JOB_TAG_MAX 1023

/* Record format version written by this build. */
#define QL_RECORD_VERSION 1

/* A 128-bit identifier (UUID layout); all zero means "none". */
typedef struct ql_id {
    uint8_t b[16];
} ql_id_t;

bool ql_id_is_zero(const ql_id_t *id);
bool ql_id_eq(const ql_id_t *a, const ql_id_t *b);
/* Writes the 36-character lower-case form and a NUL into buf (QL_ID_STR_LEN + 1 bytes). */
void ql_id_format(const ql_id_t *id, char *buf);
/* Parses the 36-character form (either case). Returns QL_EINVAL when malformed. */
int ql_id_parse(const char *s, ql_id_t *out);

/* A string-to-string map (config overrides). Owns its strings. */
typedef struct ql_strmap_entry {
    char *key;
    char *value;
} ql_strmap_entry_t;

typedef struct ql_strmap {
    size_t n;
    ql_strmap_entry_t *items;
} ql_strmap_t;

/* Borrowed value of key, or NULL. */
const char *ql_strmap_get(const ql_strmap_t *m, const char *key);
/* Sets (copies) key to value, replacing an existing value; value NULL removes the key. */
int ql_strmap_set(ql_strmap_t *m, const char *key, const char *value);
int ql_strmap_copy(ql_strmap_t *dst, const ql_strmap_t *src);
void ql_strmap_free(ql_strmap_t *m);

/* Unknown fields of a record: a sequence of encoded msgpack key/value pairs. Owned. */
typedef struct ql_extra {
    uint8_t *data;
    size_t len;
    uint32_t count; /* number of key/value pairs */
} ql_extra_t;

void ql_extra_free(ql_extra_t *e);

typedef struct ql_project {
    char name[QL_NAME_MAX + 1];
    char *description;  /* owned, may be NULL */
    ql_strmap_t config; /* project config overrides, e.g. kylin.web.timezone */
    bool auto_segment_build_enabled;
    int64_t create_time;
    int64_t modify_time;
    ql_extra_t extra;
} ql_project_t;

typedef enum ql_model_status {
    QL_MODEL_ONLINE = 0,
    QL_MODEL_OFFLINE = 1,
    QL_MODEL_BROKEN = 2,
} ql_model_status_t;

typedef enum ql_model_type {
    QL_MODEL_BATCH = 0,
    QL_MODEL_STREAMING = 1,
} ql_model_type_t;

/* A model's stored auto_segment_build config, kept as written (a stored config may be invalid,
 * e.g. from an older version or a simulation set-up); the dispatcher validates it on use. */
typedef struct ql_auto_build {
    bool present;
    bool enabled;
    char trigger_time[QL_HMS_MAX + 1];
    int64_t logical_date_offset_days; /* INT64_MIN when the stored value was not an integer */
    char data_range_start_time[QL_HMS_MAX + 1];
    char data_range_end_time[QL_HMS_MAX + 1];
} ql_auto_build_t;

typedef struct ql_model {
    ql_id_t id;
    char name[QL_NAME_MAX + 1];
    char project[QL_NAME_MAX + 1];
    ql_model_status_t status;
    ql_model_type_t type;
    bool partitioned; /* false: full-load model */
    char partition_column[QL_COLUMN_MAX + 1];
    char partition_format[QL_FORMAT_MAX + 1];
    char *multi_partition_columns; /* owned, comma-joined; NULL: not multi-partition */
    ql_auto_build_t auto_build;
    char job_template[QL_NAME_MAX + 1]; /* template set name, "" for the default */
    ql_strmap_t config;                 /* model config overrides */
    int64_t create_time;
    int64_t modify_time;
    ql_extra_t extra;
} ql_model_t;

typedef enum ql_seg_status {
    QL_SEG_NEW = 0,
    QL_SEG_READY = 1,
    QL_SEG_WARNING = 2,
} ql_seg_status_t;

typedef struct ql_segment {
    ql_id_t id;
    ql_id_t model;
    int64_t start; /* half-open [start, end), epoch ms */
    int64_t end;
    ql_seg_status_t status;
    int64_t create_time;
    int64_t last_build_time;
    ql_id_t job;   /* the job that created it (zero: none) */
    uint8_t layer; /* index layer, managed by the store (see segments.c) */
    ql_extra_t extra;
} ql_segment_t;

/* Job and step states (docs/design/jobs.md). Steps also use SKIP and WARNING. */
typedef enum ql_state {
    QL_READY = 0,
    QL_PENDING = 1,
    QL_RUNNING = 2,
    QL_ERROR = 3,
    QL_PAUSED = 4,
    QL_DISCARDED = 5,
    QL_SUCCEED = 6,
    QL_SUICIDAL = 7,
    QL_SKIP = 8,
    QL_WARNING = 9,
} ql_state_t;

#define QL_JOB_STATE_COUNT 8
#define QL_STATE_COUNT 10

const char *ql_state_name(ql_state_t s);
/* Parses a state name (upper case). Returns QL_EINVAL when unknown. */
int ql_state_parse(const char *name, ql_state_t *out);
/* SUCCEED, DISCARDED, SUICIDAL (and for steps SKIP, WARNING are finished too). */
bool ql_state_is_final(ql_state_t s);
/* READY, PENDING, RUNNING. */
bool ql_state_is_progressing(ql_state_t s);

#define QL_PRIORITY_MIN 0
#define QL_PRIORITY_MAX 4
#define QL_PRIORITY_DEFAULT 3

typedef struct ql_job {
    ql_id_t id;
    char project[QL_NAME_MAX + 1];
    ql_id_t model; /* zero for an ad-hoc job without a model */
    char model_name[QL_NAME_MAX + 1];
    char type[QL_TYPE_MAX + 1]; /* INC_BUILD, INDEX_REFRESH, INDEX_MERGE, ... */
    ql_state_t state;
    int priority;                    /* 0 (highest) .. 4 */
    char submitter[QL_USER_MAX + 1]; /* ADMIN, a user, or System */
    ql_id_t segment;                 /* the NEW segment it builds (zero: none) */
    uint32_t n_sources;              /* segments a merge or refresh replaces */
    ql_id_t *sources;                /* owned */
    bool has_range;
    int64_t range_start;
    int64_t range_end;
    uint32_t n_steps;
    int64_t create_time;
    int64_t start_time;  /* when the first step started, 0 if not yet */
    int64_t end_time;    /* when the job reached a final state, 0 if not yet */
    int64_t modify_time; /* last change, for sorting */
    uint64_t fence;      /* token of the scheduler that last moved it (docs/design/cluster.md) */
    char *params;        /* owned, may be NULL: encoded parameters of an ad-hoc job */
    size_t params_len;
    /* Kylin's optional fields of the request that created it ("": not given); stored only
     * when given, so records without them are unchanged */
    char yarn_queue[QL_JOB_QUEUE_MAX + 1];
    char tag[QL_JOB_TAG_MAX + 1]; /* compact JSON text of the client's value */
    ql_extra_t extra;
} ql_job_t;

typedef struct ql_step {
    ql_id_t job;
    uint32_t seq; /* 0-based; the step id is <job_id>_NN */
    char name[QL_STEP_NAME_MAX + 1];
    char kind[16];
    ql_state_t state;
    int64_t start_time;
    int64_t end_time;
    uint32_t attempts; /* tries started so far */
    int64_t retry_at;  /* when a failed try may run again, 0: not waiting */
    int32_t pgid;      /* process group of a running shell step, 0: none */
    char *failed_msg;  /* owned, may be NULL */
    uint8_t *def;      /* owned: the step definition, opaque to storage (engine encodes it) */
    size_t def_len;
    ql_extra_t extra;

    /* How recovery proves that processes are this try's (engine/ql_proc.h, Markers); all
     * cleared when the step leaves RUNNING. */
    char token[QL_STEP_TOKEN_LEN + 1];     /* the try's marker (hex), committed with RUNNING,
                                              before the step is spawned; "": none */
    uint64_t pg_start;                     /* pgid's leader's start time (clock ticks after
                                              boot, /proc/PID/stat field 22), 0: not recorded */
    char boot_id[QL_STEP_BOOT_ID_LEN + 1]; /* the machine's boot id, committed with RUNNING
                                              (and again with pgid) */

    /* Where the step's latest try ran (docs/step-processes.md, Several hosts): committed with
     * its RUNNING and kept after it ends, because that host keeps the try's full log. "" in
     * records written before servers recorded it. */
    char server_id[QL_STEP_SERVER_ID_MAX + 1];     /* qilin.server.id of that server */
    char server_addr[QL_STEP_SERVER_ADDR_MAX + 1]; /* its REST API, "host:port"; "": unknown */
} ql_step_t;

/* "<job-id>_NN" into buf (QL_ID_STR_LEN + 8 bytes). */
void ql_step_id_format(const ql_id_t *job, uint32_t seq, char *buf);
/* Parses "<job-id>_NN". */
int ql_step_id_parse(const char *s, ql_id_t *job, uint32_t *seq);

void ql_project_free(ql_project_t *p);
void ql_model_free(ql_model_t *m);
void ql_segment_free(ql_segment_t *s);
void ql_job_free(ql_job_t *j);
void ql_step_free(ql_step_t *s);

/* Deep copies (dst is overwritten, not freed first). */
int ql_project_copy(ql_project_t *dst, const ql_project_t *src);
int ql_model_copy(ql_model_t *dst, const ql_model_t *src);
int ql_job_copy(ql_job_t *dst, const ql_job_t *src);
int ql_step_copy(ql_step_t *dst, const ql_step_t *src);

/* Decoding flags. */
#define QL_DECODE_KEEP_EXTRA 1u /* keep unknown fields (needed before a rewrite) */

/*
 * Encoders append the record to a growable buffer; decoders fill *out from buf. Decoders return
 * QL_ECORRUPT for input that is not a record of that kind, and QL_EVERSION for a record whose
 * format version is newer than this build can read.
 */
typedef struct ql_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} ql_buf_t;

void ql_buf_reset(ql_buf_t *b);
void ql_buf_free(ql_buf_t *b);

/* 0 when buf holds one complete msgpack value whose arrays and maps claim no more elements
 * than bytes remain, else QL_ECORRUPT. Every decoder of stored msgpack bytes calls it before
 * msgpack-c, which allocates for the claimed counts before reading them (five corrupt bytes
 * could ask for 128 GB). The record decoders below already do. */
int ql_msgpack_check_counts(const void *buf, size_t len);

int ql_project_encode(const ql_project_t *p, ql_buf_t *out);
int ql_project_decode(const void *buf, size_t len, unsigned flags, ql_project_t *out);
int ql_model_encode(const ql_model_t *m, ql_buf_t *out);
int ql_model_decode(const void *buf, size_t len, unsigned flags, ql_model_t *out);
int ql_segment_encode(const ql_segment_t *s, ql_buf_t *out);
int ql_segment_decode(const void *buf, size_t len, unsigned flags, ql_segment_t *out);
int ql_job_encode(const ql_job_t *j, ql_buf_t *out);
int ql_job_decode(const void *buf, size_t len, unsigned flags, ql_job_t *out);
int ql_step_encode(const ql_step_t *s, ql_buf_t *out);
int ql_step_decode(const void *buf, size_t len, unsigned flags, ql_step_t *out);

const char *ql_model_status_name(ql_model_status_t s);
int ql_model_status_parse(const char *name, ql_model_status_t *out);
const char *ql_model_type_name(ql_model_type_t t);
int ql_model_type_parse(const char *name, ql_model_type_t *out);
const char *ql_seg_status_name(ql_seg_status_t s);
int ql_seg_status_parse(const char *name, ql_seg_status_t *out);

#endif
