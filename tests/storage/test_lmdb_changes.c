/*
 * Wake-ups across servers on the embedded LMDB store (ql_store.h, "changes made by other
 * servers"; storage/store_lmdb_changes.c). The listener is a store of this process; each writer
 * is a child process with a store of its own on the same data directory, as a standby is. What
 * a writer commits, the listener hears; what is rolled back, nobody hears; another data directory
 * hears nothing; the socket of a listener that died is removed by the next sender; a replaced
 * session first reports "anything may have changed"; a data directory whose path is too long
 * for a socket address still works; a read-only store has no session.
 *
 * Every "nothing was heard" is checked against a marker job committed afterwards: datagrams
 * from one writer arrive in order, so once the marker is heard, anything committed before it
 * has been too. Waits poll the socket with a deadline.
 */
#include "storage/storage.h"
#include "storage/store_int.h"

#include "tests/common/loop_util.h"
#include "tests/common/store_util.h"
#include "tests/common/tmp_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_MS 10000

static ql_store_t *open_store(const char *d) {
    ql_test_require_backend("lmdb");
    ql_store_opts_t o = {.path = d};
    ql_store_t *s;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), 0, "%s", err.msg);
    return s;
}

static ql_store_t *open_listening(const char *d) {
    ql_store_t *s = open_store(d);
    ql_err_t err = {0};
    cr_assert_eq(ql_store_changes_listen(s, &err), 0, "%s", err.msg);
    cr_assert_geq(ql_store_changes_fd(s), 0);
    return s;
}

/* ---- what a listener heard ---- */

#define HEARD_MAX 256
typedef struct heard {
    ql_id_t ids[HEARD_MAX];
    size_t n;
    unsigned anything;
} heard_t;

static void on_change(void *arg, const ql_id_t *job) {
    heard_t *h = arg;
    if (!job)
        h->anything++;
    else if (h->n < HEARD_MAX)
        h->ids[h->n++] = *job;
}

static bool has(const heard_t *h, const ql_id_t *id) {
    for (size_t i = 0; i < h->n; i++)
        if (ql_id_eq(&h->ids[i], id))
            return true;
    return false;
}

/* Drains s until job was heard (NULL: until "anything"), polling its socket, within the
 * deadline. */
static void wait_heard(ql_store_t *s, heard_t *h, const ql_id_t *job) {
    int64_t deadline = ql_test_mono_ms() + DEADLINE_MS;
    for (;;) {
        int rc = ql_store_changes_drain(s, on_change, h);
        cr_assert_eq(rc, 0, "the change session broke: %s", ql_strerror(rc));
        if (job ? has(h, job) : h->anything > 0)
            return;
        int64_t left = deadline - ql_test_mono_ms();
        cr_assert_gt(left, 0, "not heard within %d ms", DEADLINE_MS);
        struct pollfd p = {.fd = ql_store_changes_fd(s), .events = POLLIN};
        poll(&p, 1, (int)left);
    }
}

/* ---- the writer: a child process with its own store ---- */

static ql_job_t adhoc(ql_state_t st, uint8_t tag) {
    ql_job_t j = {0};
    j.id.b[0] = 0x01;
    j.id.b[6] = 0x70; /* a version-7-looking id; unique per tag within a test */
    j.id.b[15] = tag;
    strcpy(j.project, "p");
    strcpy(j.type, "ADHOC");
    j.state = st;
    j.priority = 3;
    j.create_time = j.modify_time = 1;
    return j;
}

enum { W_PLAIN, W_ROLLBACKS, W_MANY };

/* In the child: commits what `what` says, then the marker (tag 0xff). Exit status 0 when every
 * call did what it should. */
static int writer_body(const char *d, int what) {
    ql_store_opts_t o = {.path = d};
    ql_store_t *s;
    ql_err_t err = {0};
    if (ql_store_open(&o, &s, &err))
        return 2;
    ql_txn_t *t, *n;
    int bad = 0;
    if (what == W_PLAIN) {
        ql_job_t a = adhoc(QL_READY, 1), b = adhoc(QL_RUNNING, 2);
        bad |=
            ql_txn_begin(s, true, &t) || ql_job_put(t, &a) || ql_job_put(t, &b) || ql_txn_commit(t);
        b.state = QL_PAUSED; /* a job action from outside: heard */
        bad |= ql_txn_begin(s, true, &t) || ql_job_put(t, &b) || ql_txn_commit(t);
    } else if (what == W_ROLLBACKS) {
        ql_job_t aborted = adhoc(QL_READY, 1), nested = adhoc(QL_READY, 2),
                 kept = adhoc(QL_READY, 3);
        bad |= ql_txn_begin(s, true, &t) || ql_job_put(t, &aborted);
        ql_txn_abort(t);
        bad |= ql_txn_begin(s, true, &t) || ql_txn_begin_nested(t, &n) || ql_job_put(n, &nested);
        ql_txn_abort(n);
        bad |= ql_txn_begin_nested(t, &n) || ql_job_put(n, &kept) || ql_txn_commit(n) ||
               ql_txn_commit(t);
    } else {
        bad |= ql_txn_begin(s, true, &t);
        for (int i = 0; i < 100 && !bad; i++) {
            ql_job_t j = adhoc(QL_READY, (uint8_t)(i + 1));
            j.id.b[14] = 0x42;
            bad |= ql_job_put(t, &j);
        }
        bad |= ql_txn_commit(t);
    }
    ql_job_t m = adhoc(QL_READY, 0xff);
    bad |= ql_txn_begin(s, true, &t) || ql_job_put(t, &m) || ql_txn_commit(t);
    ql_store_close(s);
    return bad ? 1 : 0;
}

static void run_writer(const char *d, int what) {
    pid_t pid = fork();
    if (pid == 0) /* no Criterion call in the child: it would report into the parent's run */
        _exit(writer_body(d, what));
    cr_assert_geq(pid, 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the writer failed: %d", status);
}

static ql_id_t marker_id(void) {
    return adhoc(QL_READY, 0xff).id;
}

/* ---- cases ---- */

Test(lmdb_changes, a_commit_of_another_process_is_heard_with_its_jobs) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *l = open_listening(d);
    heard_t h = {0};
    cr_assert_eq(ql_store_changes_drain(l, on_change, &h), 0);
    cr_assert_eq(h.n + h.anything, 0, "a first session has missed nothing");
    run_writer(d, W_PLAIN);
    ql_id_t m = marker_id();
    wait_heard(l, &h, &m);
    ql_id_t ready = adhoc(QL_READY, 1).id, paused = adhoc(QL_PAUSED, 2).id;
    cr_assert(has(&h, &ready), "a new READY job");
    cr_assert(has(&h, &paused), "a job moved to PAUSED");
    cr_assert_eq(h.n, 3, "a new RUNNING job wakes nobody: %zu heard", h.n);
    cr_assert_eq(h.anything, 0);
    ql_store_close(l);
}

Test(lmdb_changes, a_rolled_back_change_is_never_heard) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *l = open_listening(d);
    run_writer(d, W_ROLLBACKS);
    heard_t h = {0};
    ql_id_t m = marker_id(), kept = adhoc(QL_READY, 3).id;
    wait_heard(l, &h, &m);
    cr_assert(has(&h, &kept), "a committed nested level's job");
    cr_assert_eq(h.n, 2, "an aborted transaction or rolled-back level was heard: %zu", h.n);
    ql_store_close(l);
}

Test(lmdb_changes, too_many_jobs_read_as_anything_and_other_directories_hear_nothing) {
    char d[256], d2[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_test_tmpdir(d2, sizeof d2, "ql_lmdb_changes_other");
    ql_store_t *l = open_listening(d), *other = open_listening(d2);
    run_writer(d, W_MANY);
    heard_t h = {0}, ho = {0};
    wait_heard(l, &h, NULL);
    cr_assert_eq(h.anything, 1);
    ql_id_t m = marker_id();
    wait_heard(l, &h, &m);
    run_writer(d2, W_ROLLBACKS); /* the other directory's own marker */
    wait_heard(other, &ho, &m);
    cr_assert_eq(ho.anything, 0);
    cr_assert_eq(ho.n, 2, "the other directory heard %zu jobs", ho.n);
    ql_store_close(other);
    ql_store_close(l);
}

/* A socket left by a listener that died (bound, never removed) refuses the datagram: the
 * sender removes it, and the live listener still hears. */
Test(lmdb_changes, a_dead_listeners_socket_is_removed) {
    char d[256], dead[400];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *l = open_listening(d);
    snprintf(dead, sizeof dead, "%s/wake/999999999.3.sock", d);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(dead), sizeof a.sun_path);
    memcpy(a.sun_path, dead, strlen(dead) + 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "%s", dead);
    close(fd);
    cr_assert_eq(access(dead, F_OK), 0);
    run_writer(d, W_PLAIN);
    heard_t h = {0};
    ql_id_t m = marker_id();
    wait_heard(l, &h, &m);
    cr_assert_neq(access(dead, F_OK), 0, "the dead listener's socket is still there");
    ql_store_close(l);
    char mine[400];
    snprintf(mine, sizeof mine, "%s/wake", d);
    cr_assert_eq(rmdir(mine), 0, "closing the store removes its own socket");
}

/* A store's own commits are not sent to its own session (what committed has woken its process
 * already), while another store of the same process on the same directory hears them. */
Test(lmdb_changes, a_stores_own_commits_are_not_sent_to_itself) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *self = open_listening(d), *other = open_listening(d);
    ql_job_t j = adhoc(QL_READY, 0x77);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(self, true, &t), 0);
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    /* The datagrams are queued before the commit returns: the other store hears... */
    heard_t ho = {0}, hs = {0};
    wait_heard(other, &ho, &j.id);
    cr_assert_eq(ho.n, 1);
    /* ...and the committing store has nothing to read. */
    cr_assert_eq(ql_store_changes_drain(self, on_change, &hs), 0);
    cr_assert_eq(hs.n + hs.anything, 0, "the store heard its own commit");
    /* A commit of another process still reaches it. */
    run_writer(d, W_PLAIN);
    ql_id_t m = marker_id();
    wait_heard(self, &hs, &m);
    ql_store_close(other);
    ql_store_close(self);
}

Test(lmdb_changes, a_replaced_session_reports_anything_first) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *l = open_listening(d);
    ql_err_t err = {0};
    cr_assert_eq(ql_store_changes_listen(l, &err), 0, "%s", err.msg);
    heard_t h = {0};
    cr_assert_eq(ql_store_changes_drain(l, on_change, &h), 0);
    cr_assert_eq(h.anything, 1);
    run_writer(d, W_PLAIN);
    ql_id_t m = marker_id();
    wait_heard(l, &h, &m);
    cr_assert_eq(h.anything, 1);
    ql_store_close(l);
}

/* A unix socket address has room for 107 bytes: a longer data directory is reached through
 * /proc/self/fd. */
Test(lmdb_changes, a_long_data_directory_path_works) {
    char base[256], d[512];
    ql_test_tmpdir(base, sizeof base, "ql_lmdb_changes");
    snprintf(d, sizeof d, "%s/%0120d", base, 7);
    cr_assert_eq(mkdir(d, 0700), 0);
    cr_assert_gt(strlen(d), 110);
    ql_store_t *l = open_listening(d);
    run_writer(d, W_PLAIN);
    heard_t h = {0};
    ql_id_t m = marker_id();
    wait_heard(l, &h, &m);
    cr_assert_eq(h.n, 3);
    ql_store_close(l);
}

Test(lmdb_changes, a_read_only_store_has_no_session) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_close(open_store(d));
    ql_store_opts_t o = {.path = d, .read_only = true};
    ql_store_t *s;
    ql_err_t err = {0};
    cr_assert_eq(ql_store_open(&o, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(ql_store_changes_listen(s, &err), UV_ENOTSUP);
    cr_assert_eq(ql_store_changes_fd(s), -1);
    heard_t h = {0};
    cr_assert_eq(ql_store_changes_drain(s, on_change, &h), QL_EUNAVAILABLE);
    ql_store_close(s);
}

/* ---- the sender's list of sockets (store_lmdb_wake_peers.c) ---- */

/* Sets the wake folder's modification time 10 s back, as if its last change were old. */
static void age_wake_folder(const char *d) {
    char w[400];
    snprintf(w, sizeof w, "%s/wake", d);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct timespec times[2] = {now, {.tv_sec = now.tv_sec - 10, .tv_nsec = now.tv_nsec}};
    cr_assert_eq(utimensat(AT_FDCWD, w, times, 0), 0, "%s", w);
}

/* Commits a new READY job (tag) from s. */
static ql_id_t commit_ready(ql_store_t *s, uint8_t tag) {
    ql_job_t j = adhoc(QL_READY, tag);
    ql_txn_t *t;
    cr_assert_eq(ql_txn_begin(s, true, &t), 0);
    cr_assert_eq(ql_job_put(t, &j), 0);
    cr_assert_eq(ql_txn_commit(t), 0);
    return j.id;
}

/* The folder is read once while it does not change; a listener that joins later changes it,
 * and the next commit reaches that listener too. */
Test(lmdb_changes, the_folder_is_read_again_only_when_a_listener_joins) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *sender = open_store(d), *a = open_listening(d);
    age_wake_folder(d);
    heard_t ha = {0}, hb = {0};
    ql_id_t j1 = commit_ready(sender, 1), j2 = commit_ready(sender, 2);
    wait_heard(a, &ha, &j2);
    cr_assert(has(&ha, &j1));
    cr_assert_eq(lmdb_wake_peers_scans(sender), 1, "an unchanged folder was read again");
    ql_store_t *b = open_listening(d);
    ql_id_t j3 = commit_ready(sender, 3);
    wait_heard(b, &hb, &j3);
    wait_heard(a, &ha, &j3);
    cr_assert_eq(lmdb_wake_peers_scans(sender), 2);
    ql_store_close(b);
    ql_store_close(a);
    ql_store_close(sender);
}

/* A listing read soon after the folder changed may have missed a change made in the same tick
 * of the file system's clock: it is read again on every send until the change is old. */
Test(lmdb_changes, a_listing_read_soon_after_a_change_is_not_reused) {
    char d[256];
    ql_test_tmpdir(d, sizeof d, "ql_lmdb_changes");
    ql_store_t *sender = open_store(d), *a = open_listening(d); /* the folder changed just now */
    heard_t h = {0};
    ql_id_t j1 = commit_ready(sender, 1), j2 = commit_ready(sender, 2);
    wait_heard(a, &h, &j2);
    cr_assert(has(&h, &j1));
    cr_assert_eq(lmdb_wake_peers_scans(sender), 2, "a racy listing was reused");
    age_wake_folder(d);
    commit_ready(sender, 3);
    ql_id_t j4 = commit_ready(sender, 4);
    wait_heard(a, &h, &j4);
    cr_assert_eq(lmdb_wake_peers_scans(sender), 3, "an old listing was read again");
    ql_store_close(a);
    ql_store_close(sender);
}
