/*
 * Per-job locks over ZooKeeper (scheduler 2; ql_zk.h, docs/zookeeper.md): the ephemeral nodes
 * <root>/lock/<job_id>, and a children watch on lock/ that reports the ids whose node went.
 *
 * DESIGN.
 * - Each lock asked for is a small state machine of its own (a jlock_t, the argument of its
 *   requests): CREATING --ZOK--> HELD (token: czxid); CREATING --ZNODEEXISTS--> CHECKING:
 *   the node is this session's (its answer was lost earlier) or another server's (QL_ELOCKED).
 *   An answer lost with the connection is settled by CHECKING once reconnected, never by
 *   creating again blindly. A lock given up while under way goes on until it is known whether
 *   the node is ours, and deletes it if so; its caller hears nothing more.
 * - Unlocking deletes a node only this session holds: while a session lives, the node at the
 *   path it made is its own, so no data is compared (Kylin's check-then-delete could delete a
 *   successor's lock). A delete whose answer was lost is asked again once reconnected.
 * - The listing: every CHILD event lists lock/ again with a new watch; an id in one listing
 *   and not in the next is reported VANISHED. A node deleted and made again between two
 *   listings is not reported: someone holds it again. After a new session the first listing
 *   is compared with the last one of the old session, so the locks of servers (this one
 *   included) whose sessions ended meanwhile are reported too.
 * - A session's end ends every lock of it: pending locks answer QL_EZOOKEEPER; held ones are
 *   forgotten (the owner hears QL_ZK_EXPIRED from the session).
 */
#include "zk_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAX 64

typedef enum { J_CREATING, J_CHECKING, J_HELD, J_DELETING } jphase_t;

typedef struct jlock {
    struct jlock *next;
    ql_zk_jobs_t *jobs;
    char id[ID_MAX + 1];
    char path[1024];
    jphase_t phase;
    bool redo;
    bool abandoned; /* unlocked while under way: delete it if it turns out ours, tell nobody */
    uint64_t gen;
    uint64_t token;
    ql_zk_job_lock_cb done;
    void *arg;
} jlock_t;

struct ql_zk_jobs {
    ql_zk_t *zk;
    ql_zk_listener_t listener;
    ql_zk_jobs_cb cb;
    void *arg;
    char *dir;
    jlock_t *locks;
    char **listed; /* the latest listing, sorted */
    size_t n_listed;
    bool have_listing;
    bool listing; /* a listing is under way */
    bool list_redo;
    bool first_of_session;
    uint64_t list_gen;
};

static bool valid_id(const char *id) {
    size_t n = strlen(id);
    if (n == 0 || n > ID_MAX)
        return false;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            return false;
    return true;
}

static jlock_t *find(const ql_zk_jobs_t *j, const char *id) {
    for (jlock_t *l = j->locks; l; l = l->next)
        if (!strcmp(l->id, id))
            return l;
    return NULL;
}

static void drop(ql_zk_jobs_t *j, jlock_t *l) {
    for (jlock_t **p = &j->locks; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            break;
        }
    zk_cancel(j->zk, l);
    free(l);
}

/* Answers l's caller (unless abandoned) and, unless held, forgets l. */
static void answer(jlock_t *l, int status) {
    ql_zk_jobs_t *j = l->jobs;
    ql_zk_job_lock_cb done = l->abandoned ? NULL : l->done;
    void *arg = l->arg;
    uint64_t token = status ? 0 : l->token;
    l->done = NULL;
    if (status)
        drop(j, l);
    if (done)
        done(arg, status, token);
}

static void lock_step(jlock_t *l, jphase_t phase);

static void deleted(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    (void)zk;
    jlock_t *l = arg;
    if (r->gen != l->gen || l->phase != J_DELETING)
        return;
    if (zk_lost(r->rc))
        l->redo = true;
    else
        drop(l->jobs, l); /* ZOK, ZNONODE: gone; anything else: gone with the session */
}

static void held(jlock_t *l, uint64_t czxid) {
    l->token = czxid;
    if (l->abandoned) {
        lock_step(l, J_DELETING);
        return;
    }
    l->phase = J_HELD;
    answer(l, 0);
}

static void lock_answer(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    jlock_t *l = arg;
    if (r->gen != l->gen || (l->phase != J_CREATING && l->phase != J_CHECKING))
        return;
    if (zk_lost(r->rc)) {
        l->redo = true;
    } else if (l->phase == J_CREATING && r->rc == ZOK) {
        held(l, (uint64_t)r->stat->czxid);
    } else if (l->phase == J_CREATING && r->rc == ZNODEEXISTS) {
        lock_step(l, J_CHECKING);
    } else if (l->phase == J_CHECKING && r->rc == ZNONODE) {
        lock_step(l, J_CREATING); /* its holder let go meanwhile */
    } else if (l->phase == J_CHECKING && r->rc == ZOK) {
        if (r->stat->ephemeralOwner == ql_zk_session_id(zk))
            held(l, (uint64_t)r->stat->czxid);
        else
            answer(l, QL_ELOCKED);
    } else if (r->rc != ZCLOSING && r->rc != ZSESSIONEXPIRED) {
        ql_log(zk->log, QL_LOG_ERROR, "zk", "job lock %s: %s", l->path, zerror(r->rc));
        answer(l, QL_EZOOKEEPER);
    }
}

static void lock_step(jlock_t *l, jphase_t phase) {
    ql_zk_t *zk = l->jobs->zk;
    l->phase = phase;
    l->redo = false;
    l->gen = zk_gen(zk);
    int rc = phase == J_CREATING
                 ? zk_create(zk, l->path, ql_zk_node_data(zk), ZOO_EPHEMERAL, lock_answer, l)
             : phase == J_CHECKING ? zk_exists(zk, l->path, NULL, lock_answer, l)
                                   : zk_delete(zk, l->path, deleted, l);
    if (rc)
        l->redo = true; /* no handle now: asked again once reconnected, or ended with it */
}

int ql_zk_job_lock(ql_zk_jobs_t *j, const char *job_id, ql_zk_job_lock_cb done, void *arg) {
    if (!valid_id(job_id))
        return QL_EINVAL;
    if (find(j, job_id))
        return QL_EEXIST;
    if (!zk_ready(j->zk))
        return QL_EZOOKEEPER;
    jlock_t *l = calloc(1, sizeof *l);
    if (!l)
        return UV_ENOMEM;
    l->jobs = j;
    snprintf(l->id, sizeof l->id, "%s", job_id);
    snprintf(l->path, sizeof l->path, "%s/%s", j->dir, job_id);
    l->done = done;
    l->arg = arg;
    l->gen = zk_gen(j->zk);
    int rc = zk_create(j->zk, l->path, ql_zk_node_data(j->zk), ZOO_EPHEMERAL, lock_answer, l);
    if (rc) {
        free(l);
        return rc;
    }
    l->phase = J_CREATING;
    l->next = j->locks;
    j->locks = l;
    return 0;
}

int ql_zk_job_unlock(ql_zk_jobs_t *j, const char *job_id) {
    jlock_t *l = find(j, job_id);
    if (!l || l->abandoned || l->phase == J_DELETING)
        return QL_ENOTFOUND;
    if (l->phase == J_HELD)
        lock_step(l, J_DELETING);
    else
        l->abandoned = true;
    return 0;
}

bool ql_zk_job_held(const ql_zk_jobs_t *j, const char *job_id, uint64_t *token) {
    const jlock_t *l = find(j, job_id);
    if (!l || l->phase != J_HELD)
        return false;
    if (token)
        *token = l->token;
    return true;
}

/* ---- the listing ---- */

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

bool ql_zk_job_listed(const ql_zk_jobs_t *j, const char *job_id) {
    return j->n_listed &&
           bsearch(&job_id, j->listed, j->n_listed, sizeof *j->listed, str_cmp) != NULL;
}

static void list(ql_zk_jobs_t *j);

static void list_watch(ql_zk_t *zk, uint64_t gen, int type, const char *path, void *arg) {
    (void)zk, (void)type, (void)path;
    ql_zk_jobs_t *j = arg;
    if (gen == j->list_gen && !j->listing)
        list(j);
}

static void free_listing(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void listed(ql_zk_t *zk, const zk_result_t *r, void *arg) {
    ql_zk_jobs_t *j = arg;
    if (r->gen != j->list_gen || !j->listing)
        return;
    j->listing = false;
    if (r->rc != ZOK) {
        j->list_redo = true;
        if (!zk_lost(r->rc) && r->rc != ZCLOSING && r->rc != ZSESSIONEXPIRED)
            ql_log(zk->log, QL_LOG_ERROR, "zk", "job locks: cannot list %s: %s", j->dir,
                   zerror(r->rc));
        return;
    }
    char **now = calloc(r->n_kids ? r->n_kids : 1, sizeof *now);
    size_t n = 0;
    for (size_t i = 0; now && i < r->n_kids; i++)
        if ((now[n] = strdup(r->kids[i])))
            n++;
    if (!now || n != r->n_kids) {
        free_listing(now, n);
        j->list_redo = true;
        return;
    }
    qsort(now, n, sizeof *now, str_cmp);
    char **old = j->listed;
    size_t n_old = j->n_listed;
    bool compare = j->have_listing;
    j->listed = now;
    j->n_listed = n;
    j->have_listing = true;
    bool first = j->first_of_session;
    j->first_of_session = false;
    /* The callbacks may call back into this recipe (lock, unlock): the listing is in place. */
    for (size_t i = 0; compare && i < n_old; i++)
        if (!bsearch(&old[i], now, n, sizeof *now, str_cmp))
            j->cb(j->arg, QL_ZK_JOBS_VANISHED, old[i]);
    free_listing(old, n_old);
    if (first)
        j->cb(j->arg, QL_ZK_JOBS_LISTED, NULL);
}

static void list(ql_zk_jobs_t *j) {
    j->listing = true;
    j->list_redo = false;
    j->list_gen = zk_gen(j->zk);
    if (zk_children(j->zk, j->dir, list_watch, listed, j)) {
        j->listing = false;
        j->list_redo = true;
    }
}

/* ---- the session ---- */

static void on_state(ql_zk_t *zk, const ql_zk_event_t *ev, void *arg) {
    ql_zk_jobs_t *j = arg;
    if (ev->state == QL_ZK_CONNECTED) {
        j->first_of_session = true;
        j->listing = false;
        list(j);
    } else if (ev->state == QL_ZK_RECONNECTED) {
        if (!j->have_listing && !j->listing) /* made while the session was suspended */
            j->first_of_session = true;
        if ((j->list_redo || !j->have_listing) && !j->listing)
            list(j);
        for (jlock_t *l = j->locks, *next; l; l = next) {
            next = l->next;
            if (l->redo)
                lock_step(l, l->phase == J_CREATING ? J_CHECKING : l->phase);
        }
    } else if (ev->state == QL_ZK_EXPIRED || ev->state == QL_ZK_FAILED) {
        zk_cancel(zk, j);
        j->listing = false;
        while (j->locks) {
            jlock_t *l = j->locks;
            if (l->phase == J_CREATING || l->phase == J_CHECKING)
                answer(l, QL_EZOOKEEPER);
            else
                drop(j, l);
        }
    }
}

int ql_zk_jobs_new(ql_zk_t *zk, ql_zk_jobs_cb cb, void *arg, ql_zk_jobs_t **out) {
    *out = NULL;
    ql_zk_jobs_t *j = calloc(1, sizeof *j);
    if (!j || asprintf(&j->dir, "%s/lock", ql_zk_root(zk)) < 0) {
        free(j);
        return UV_ENOMEM;
    }
    j->zk = zk;
    j->cb = cb;
    j->arg = arg;
    ql_zk_listen(zk, &j->listener, on_state, j);
    if (zk_ready(zk)) {
        j->first_of_session = true;
        list(j);
    }
    *out = j;
    return 0;
}

void ql_zk_jobs_free(ql_zk_jobs_t *j) {
    if (!j)
        return;
    ql_zk_unlisten(j->zk, &j->listener);
    zk_cancel(j->zk, j);
    while (j->locks) {
        jlock_t *l = j->locks;
        /* Held (or being deleted): this session's node, deleted without an answer awaited. A
         * create under way is undone when it answers (zk_create's cancellation rule). */
        if ((l->phase == J_HELD || l->phase == J_DELETING) && zk_current(j->zk, l->gen))
            zk_delete(j->zk, l->path, NULL, NULL);
        drop(j, l);
    }
    free_listing(j->listed, j->n_listed);
    free(j->dir);
    free(j);
}
