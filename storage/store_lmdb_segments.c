/*
 * Segments, indexed by (model, layer, start).
 *
 * Why layers: the overlap query must be O(log n + k), and a B-tree ordered by start alone cannot
 * bound how far back an overlapping segment may begin once segments may nest (a merge's NEW
 * segment spans the segments it merges). So the store keeps each model's segments in two
 * layers:
 *   layer 0 holds segments that overlap no other layer-0 segment. Its segments are disjoint, so
 *           sorted by start their ends are sorted too: the segments overlapping [s, e) are the
 *           one just before s (if it ends after s) and those starting in [s, e). Two seeks.
 *   layer 1 holds segments that overlapped a layer-0 segment when written: a refresh's or
 *           merge's NEW segment over its sources, or whatever a simulation set-up loads. It is
 *           scanned whole, and is empty or tiny in every state the rules allow.
 * A layer-1 segment moves to layer 0 when it is rewritten and no longer overlaps layer 0 (a
 * merge's result once its sources are removed), so layer 1 stays small.
 */
#include "storage/ql_meta.h"
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#define SEG_KEY_LEN 41

static void seg_key(uint8_t *k, const ql_id_t *model, uint8_t layer, int64_t start,
                    const ql_id_t *id) {
    memcpy(k, model->b, 16);
    k[16] = layer;
    ql_put_key_i64(k + 17, start);
    memcpy(k + 25, id->b, 16);
}

static size_t seg_count_key(uint8_t *k, const ql_id_t *model) {
    k[0] = 'S';
    memcpy(k + 1, model->b, 16);
    return 17;
}

static int decode(ql_txn_t *txn, const MDB_val *v, unsigned flags, ql_segment_t *out) {
    msgpack_zone *z = ql_txn_zone(txn);
    return z ? ql_segment_decode_z(z, v->mv_data, v->mv_size, flags, out) : UV_ENOMEM;
}

int lmdb_segment_get(ql_txn_t *txn, const ql_id_t *id, ql_segment_t *out) {
    MDB_val key, v;
    int rc = ql_db_get(txn, DB_SEGMENT_IDS, id->b, 16, &key);
    if (rc)
        return rc;
    if (key.mv_size != SEG_KEY_LEN)
        return QL_ECORRUPT;
    uint8_t k[SEG_KEY_LEN];
    memcpy(k, key.mv_data, SEG_KEY_LEN);
    if ((rc = ql_db_get(txn, DB_SEGMENTS, k, SEG_KEY_LEN, &v)))
        return rc == QL_ENOTFOUND ? QL_ECORRUPT : rc;
    return decode(txn, &v, QL_DECODE_KEEP_EXTRA, out);
}

int lmdb_segment_exists(ql_txn_t *txn, const ql_id_t *id) {
    MDB_val key;
    return ql_db_get(txn, DB_SEGMENT_IDS, id->b, 16, &key);
}

/* Whether a layer-0 segment other than `self` overlaps [start, end). */
typedef struct {
    const ql_id_t *self;
    bool found;
} layer0_probe_t;

static int layer_scan(ql_txn_t *txn, const ql_id_t *model, uint8_t layer, int64_t start,
                      int64_t end, ql_segment_cb cb, void *arg);

static int probe_cb(const ql_segment_t *s, void *arg) {
    layer0_probe_t *p = arg;
    if (ql_id_eq(&s->id, p->self))
        return 0;
    p->found = true;
    return 1;
}

int lmdb_segment_put(ql_txn_t *txn, ql_segment_t *s) {
    if (ql_id_is_zero(&s->id) || ql_id_is_zero(&s->model) ||
        ql_meta_check_range("start", "end", s->start, s->end, true, NULL))
        return QL_EINVAL;
    MDB_val oldkey;
    uint8_t ok[SEG_KEY_LEN];
    int rc = ql_db_get(txn, DB_SEGMENT_IDS, s->id.b, 16, &oldkey);
    bool existed = rc == 0;
    if (rc && rc != QL_ENOTFOUND)
        return rc;
    if (existed) {
        if (oldkey.mv_size != SEG_KEY_LEN)
            return QL_ECORRUPT;
        memcpy(ok, oldkey.mv_data, SEG_KEY_LEN);
    }

    layer0_probe_t probe = {.self = &s->id};
    /* probe_cb stops the scan with 1 at the first overlap: only a negative value is an error. */
    if ((rc = layer_scan(txn, &s->model, 0, s->start, s->end, probe_cb, &probe)) < 0)
        return rc;
    s->layer = probe.found ? 1 : 0;

    uint8_t k[SEG_KEY_LEN];
    seg_key(k, &s->model, s->layer, s->start, &s->id);
    bool moved = !existed || memcmp(ok, k, SEG_KEY_LEN) != 0;
    if (existed && moved && (rc = ql_db_del(txn, DB_SEGMENTS, ok, SEG_KEY_LEN)))
        return rc;
    /* A new segment counts in its model; one that moves leaves its old model's count (its old
     * key begins with that model) for the new one's. */
    ql_id_t old_model = {0};
    if (existed)
        memcpy(old_model.b, ok, 16);
    if (!existed || !ql_id_eq(&old_model, &s->model)) {
        uint8_t ck[17];
        if ((existed && (rc = ql_count_add(txn, ck, seg_count_key(ck, &old_model), -1))) ||
            (rc = ql_count_add(txn, ck, seg_count_key(ck, &s->model), 1)))
            return rc;
    }
    ql_buf_reset(&txn->buf);
    if ((rc = ql_segment_encode(s, &txn->buf)) ||
        (rc = ql_db_put(txn, DB_SEGMENTS, k, SEG_KEY_LEN, txn->buf.data, txn->buf.len)))
        return rc;
    /* A status change keeps the key: segment_ids already points at it. */
    return moved ? ql_db_put(txn, DB_SEGMENT_IDS, s->id.b, 16, k, SEG_KEY_LEN) : 0;
}

int lmdb_segment_delete(ql_txn_t *txn, const ql_id_t *id) {
    MDB_val key;
    int rc = ql_db_get(txn, DB_SEGMENT_IDS, id->b, 16, &key);
    if (rc)
        return rc;
    if (key.mv_size != SEG_KEY_LEN)
        return QL_ECORRUPT;
    uint8_t k[SEG_KEY_LEN];
    memcpy(k, key.mv_data, SEG_KEY_LEN);
    ql_id_t model;
    memcpy(model.b, k, 16);
    uint8_t ck[17];
    if ((rc = ql_db_del(txn, DB_SEGMENTS, k, SEG_KEY_LEN)) ||
        (rc = ql_db_del(txn, DB_SEGMENT_IDS, id->b, 16)))
        return rc;
    return ql_count_add(txn, ck, seg_count_key(ck, &model), -1);
}

static bool same_prefix(const MDB_val *k, const uint8_t *prefix) {
    return k->mv_size == SEG_KEY_LEN && memcmp(k->mv_data, prefix, 17) == 0;
}

/* How a layer walk left the cursor, for the next layer's walk with the same cursor. */
typedef enum walk_end {
    WALK_INSIDE, /* on a key of the layer walked (or stopped early): the next layer must seek */
    WALK_PAST,   /* on the first key after the model's keys of that layer */
    WALK_EOF,    /* no key after them */
} walk_end_t;

/*
 * Calls cb for the segments of one layer that overlap [start, end), in start order, moving
 * cursor c. from says where the previous layer's walk left c: after layer 0, a cursor that went
 * past the model's layer-0 keys stands exactly where a seek to its first layer-1 key would land
 * (keys are model, layer, start, id), so no seek is needed. *how (may be NULL) tells the same
 * for this walk.
 */
static int layer_walk(MDB_cursor *c, ql_txn_t *txn, const ql_id_t *model, uint8_t layer,
                      int64_t start, int64_t end, walk_end_t from, walk_end_t *how,
                      ql_segment_cb cb, void *arg) {
    uint8_t k0[SEG_KEY_LEN];
    static const ql_id_t zero;
    /* Layer 0 is disjoint: start the walk at the segment before `start`, which is the only one
     * beginning earlier that can still reach into the range. Layer 1 is scanned whole. */
    seg_key(k0, model, layer, layer == 0 ? start : INT64_MIN, &zero);
    MDB_val k = ql_val(k0, SEG_KEY_LEN), v;
    int mrc;
    if (from == WALK_EOF)
        mrc = MDB_NOTFOUND;
    else if (from == WALK_PAST)
        mrc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
    else
        mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    /* When a layer-0 segment begins exactly at `start`, the one before it ends at or before
     * `start` (the layer is disjoint), so there is nothing to step back to. This is the common
     * case of the dispatcher's query (a target that a segment starts at) and saves a step and a
     * decode per query. */
    bool at_start =
        mrc == 0 && same_prefix(&k, k0) && ql_get_key_i64((const uint8_t *)k.mv_data + 17) == start;
    if (layer == 0 && !at_start) {
        MDB_val pk, pv;
        int prc = mrc == 0 ? mdb_cursor_get(c, &pk, &pv, MDB_PREV)
                           : mdb_cursor_get(c, &pk, &pv, MDB_LAST);
        if (prc == 0 && same_prefix(&pk, k0)) {
            k = pk;
            v = pv;
            mrc = 0;
        } else {
            /* No earlier segment in this layer: back to the first candidate. */
            k = ql_val(k0, SEG_KEY_LEN);
            mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
        }
    }
    int rc = 0;
    while (mrc == 0 && same_prefix(&k, k0)) {
        int64_t s_start = ql_get_key_i64((const uint8_t *)k.mv_data + 17);
        if (s_start >= end)
            break;
        ql_segment_t seg;
        if ((rc = decode(txn, &v, 0, &seg)))
            break;
        if (seg.end > start && seg.start < end) {
            rc = cb(&seg, arg);
            if (rc)
                break;
        }
        mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
    }
    if (how)
        *how = rc || (mrc == 0 && same_prefix(&k, k0)) ? WALK_INSIDE
               : mrc == 0                              ? WALK_PAST
                                                       : WALK_EOF;
    return rc;
}

/* layer_walk with a cursor of its own. */
static int layer_scan(ql_txn_t *txn, const ql_id_t *model, uint8_t layer, int64_t start,
                      int64_t end, ql_segment_cb cb, void *arg) {
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_SEGMENTS, &c);
    if (rc)
        return rc;
    rc = layer_walk(c, txn, model, layer, start, end, WALK_INSIDE, NULL, cb, arg);
    mdb_cursor_close(c);
    return rc;
}

int lmdb_segment_foreach_overlapping(ql_txn_t *txn, const ql_id_t *model, int64_t start,
                                     int64_t end, ql_segment_cb cb, void *arg) {
    if (start >= end)
        return 0;
    /* One cursor for both layers: when the layer-0 walk ran past the model's layer-0 keys (the
     * dispatcher's query of its latest target does), layer 1 needs no seek of its own. */
    MDB_cursor *c;
    int rc = ql_db_cursor(txn, DB_SEGMENTS, &c);
    if (rc)
        return rc;
    walk_end_t how;
    rc = layer_walk(c, txn, model, 0, start, end, WALK_INSIDE, &how, cb, arg);
    if (rc == 0)
        rc = layer_walk(c, txn, model, 1, start, end, how, NULL, cb, arg);
    mdb_cursor_close(c);
    return rc > 0 ? 0 : rc;
}

int lmdb_segment_foreach(ql_txn_t *txn, const ql_id_t *model, ql_segment_cb cb, void *arg) {
    /* Merge the two layers' cursors by start. */
    MDB_cursor *c[2];
    MDB_val k[2], v[2];
    int ok[2];
    uint8_t prefix[2][SEG_KEY_LEN];
    static const ql_id_t zero;
    int rc = 0;
    for (int l = 0; l < 2; l++) {
        if ((rc = ql_db_cursor(txn, DB_SEGMENTS, &c[l]))) {
            if (l == 1)
                mdb_cursor_close(c[0]);
            return rc;
        }
        seg_key(prefix[l], model, (uint8_t)l, INT64_MIN, &zero);
        k[l] = ql_val(prefix[l], SEG_KEY_LEN);
        ok[l] =
            mdb_cursor_get(c[l], &k[l], &v[l], MDB_SET_RANGE) == 0 && same_prefix(&k[l], prefix[l]);
    }
    while (ok[0] || ok[1]) {
        int l;
        if (!ok[1])
            l = 0;
        else if (!ok[0])
            l = 1;
        else
            l = memcmp((uint8_t *)k[0].mv_data + 17, (uint8_t *)k[1].mv_data + 17, 8) <= 0 ? 0 : 1;
        ql_segment_t seg;
        if ((rc = decode(txn, &v[l], 0, &seg)))
            break;
        if ((rc = cb(&seg, arg)))
            break;
        ok[l] = mdb_cursor_get(c[l], &k[l], &v[l], MDB_NEXT) == 0 && same_prefix(&k[l], prefix[l]);
    }
    mdb_cursor_close(c[0]);
    mdb_cursor_close(c[1]);
    return rc > 0 ? 0 : rc;
}

int lmdb_segment_count(ql_txn_t *txn, const ql_id_t *model, uint64_t *out) {
    uint8_t ck[17];
    return ql_count_get(txn, ck, seg_count_key(ck, model), out);
}
