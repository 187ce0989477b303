/*
 * Which servers share this data directory (GET /cluster, the console's Cluster page): each
 * qilind that listens announces itself in <data>/servers/server-<pid>.json (its id, address,
 * mode, pid, start time) and holds an exclusive flock on that file for its whole life. A
 * lister takes the files whose lock is held: the kernel drops the lock when the process dies,
 * however it dies, so a crashed server's file is seen as stale (and removed) without any
 * timeout and without a write to the store. The master is the server whose pid holds the job
 * engine lock.
 *
 * On a store that servers on several hosts share (PostgreSQL), the data directories are not
 * shared, so the list comes from the store instead: each server announces the same JSON there
 * (ql_store_announce, alive exactly as long as its change session), and the store says which
 * one holds the job engine lock (docs/postgresql.md, Servers of a store). The files are
 * written too: they cost nothing and keep `ls servers/` telling the truth on every host.
 *
 * The file is written under a temporary name, locked, then renamed into place, so a lister
 * never finds an unlocked file of a live server. All of it runs on the loop thread at listen,
 * close and /cluster time; every failure is only logged: announcing is a courtesy.
 */
#include "api_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_NAME "servers"

static void dir_path(ql_api_t *api, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/" DIR_NAME, ql_config_get_str(api->cfg, "qilin.storage.path"));
}

void ql_api_presence_start(ql_api_t *api, const char *address) {
    char dir[4096], tmp[4200];
    dir_path(api, dir, sizeof dir);
    if (mkdir(dir, 0750) != 0 && errno != EEXIST) {
        ql_log(api->log, QL_LOG_WARN, "api", "cannot announce this server in %s: %s", dir,
               strerror(errno));
        return;
    }
    snprintf(tmp, sizeof tmp, "%s/server-%ld.tmp", dir, (long)getpid());
    snprintf(api->presence_path, sizeof api->presence_path, "%s/server-%ld.json", dir,
             (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ql_log(api->log, QL_LOG_WARN, "api", "cannot announce this server in %s: %s", tmp,
               strerror(errno));
        if (fd >= 0)
            close(fd);
        api->presence_path[0] = '\0';
        return;
    }
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", api->server_id, "address", address, "mode",
                  api->mode, "pid", (json_int_t)getpid(), "started", (json_int_t)ql_api_now(api));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    size_t len = text ? strlen(text) : 0;
    bool ok = text && write(fd, text, len) == (ssize_t)len && rename(tmp, api->presence_path) == 0;
    int arc =
        text ? ql_store_announce(ql_node_store(api->node), api->server_id, (long)getpid(), text)
             : UV_ENOMEM;
    if (arc && arc != UV_ENOTSUP)
        ql_log(api->log, QL_LOG_WARN, "api",
               "cannot announce this server in the store yet (the next change session will): %s",
               ql_strerror(arc));
    free(text);
    if (!ok) {
        ql_log(api->log, QL_LOG_WARN, "api", "cannot announce this server in %s: %s", dir,
               strerror(errno));
        unlink(tmp);
        close(fd);
        api->presence_path[0] = '\0';
        return;
    }
    api->presence_fd = fd; /* kept open: the lock says this server lives */
}

void ql_api_presence_stop(ql_api_t *api) {
    if (!api->presence_path[0])
        return;
    unlink(api->presence_path);
    close(api->presence_fd);
    api->presence_path[0] = '\0';
}

/* The pid that holds the job engine lock, 0 when unknown: this process when it is the master,
 * else the pid in the holder line a standby last read (the lock file's "pid 4242 on host ...",
 * or a ZooKeeper node's "server=s0 pid=4242 start=..."), else the line in the lock file itself
 * (a query server never tries the lock). */
static long master_pid(ql_api_t *api) {
    if (ql_node_is_master(api->node))
        return (long)getpid();
    long pid = 0;
    const char *holder = ql_node_lock_holder(api->node);
    const char *zk_pid = strstr(holder, " pid=");
    if (sscanf(holder, "pid %ld", &pid) == 1 || (zk_pid && sscanf(zk_pid, " pid=%ld", &pid) == 1))
        return pid;
    char path[4200], line[128] = "";
    snprintf(path, sizeof path, "%s/job_engine.lock",
             ql_config_get_str(api->cfg, "qilin.storage.path"));
    FILE *f = fopen(path, "re");
    if (f) {
        if (!fgets(line, sizeof line, f) || sscanf(line, "pid %ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid;
}

/* The server file at path when its owner lives (its lock is held): a new object; NULL for a
 * stale file, which is removed, or one that cannot be read. */
static json_t *read_live(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        unlink(path); /* nobody holds it: its server is gone */
        close(fd);
        return NULL;
    }
    char buf[2048];
    ssize_t n = errno == EWOULDBLOCK ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    json_t *o = json_loads(buf, 0, NULL);
    if (o && !json_is_object(o)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* The role of a job server that is not the master: under scheduler 2 every job server runs
 * jobs (docs/zookeeper.md, Scheduler 2), otherwise it stands by. The coordination guard holds
 * every job server of a store to this server's scheduler. */
static const char *other_job_server_role(const ql_api_t *api) {
    return ql_config_get_int(api->cfg, "kylin.job.scheduler.default") == 2 ? "job-server"
                                                                           : "standby";
}

typedef struct store_list {
    json_t *arr;
    ql_api_t *api;
    long self;
} store_list_t;

/* Whether the server (id, pid) holds a ZooKeeper lock or leads, as this server knows it: itself
 * when it is the master, else the holder line its watch last read ("server=ID pid=PID ...").
 * The store decides the master only for its own lock (PostgreSQL's), which servers coordinated
 * by ZooKeeper never take. */
static bool zk_holder_is(ql_api_t *api, const char *id, long pid) {
    if (!id)
        return false;
    if (ql_node_is_master(api->node))
        return pid == (long)getpid() && !strcmp(id, api->server_id);
    const char *holder = ql_node_lock_holder(api->node);
    if (strncmp(holder, "server=", 7) != 0)
        return false;
    size_t n = strcspn(holder + 7, " ");
    const char *at = strstr(holder, " pid=");
    long hpid = 0;
    return strlen(id) == n && !strncmp(holder + 7, id, n) && at &&
           sscanf(at, " pid=%ld", &hpid) == 1 && hpid == pid;
}

static void add_announced(void *arg, const char *info, bool master) {
    store_list_t *l = arg;
    json_t *o = json_loads(info, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return;
    }
    long pid = (long)json_integer_value(json_object_get(o, "pid"));
    const char *id = json_string_value(json_object_get(o, "id"));
    const char *mode = json_string_value(json_object_get(o, "mode"));
    bool jobs = mode && (strstr(mode, "all") || strstr(mode, "job"));
    master = master || zk_holder_is(l->api, id, pid);
    json_object_set_new(o, "role",
                        json_string(master ? "master"
                                    : jobs ? other_job_server_role(l->api)
                                           : "query"));
    /* A pid alone is not a server across hosts: the id must match too. */
    json_object_set_new(o, "this_server",
                        json_boolean(pid == l->self && id && !strcmp(id, l->api->server_id)));
    json_array_append_new(l->arr, o);
}

json_t *ql_api_presence_list(ql_api_t *api, ql_txn_t *txn) {
    json_t *arr = json_array();
    store_list_t sl = {arr, api, (long)getpid()};
    int rc = ql_store_servers_foreach(txn, add_announced, &sl);
    if (rc != UV_ENOTSUP) {
        if (rc)
            ql_log(api->log, QL_LOG_WARN, "api", "cannot list the servers of the store: %s",
                   ql_strerror(rc));
        return arr;
    }
    char dir[4096];
    dir_path(api, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return arr;
    long master = master_pid(api), self = (long)getpid();
    struct dirent *e;
    for (int i = 0; i < 1000 && (e = readdir(d)); i++) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "server-", 7) != 0 || len < 6 ||
            strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_t *o = read_live(path);
        if (!o)
            continue;
        long pid = (long)json_integer_value(json_object_get(o, "pid"));
        const char *mode = json_string_value(json_object_get(o, "mode"));
        bool jobs = mode && (strstr(mode, "all") || strstr(mode, "job"));
        json_object_set_new(o, "role",
                            json_string(pid == master ? "master"
                                        : jobs        ? other_job_server_role(api)
                                                      : "query"));
        json_object_set_new(o, "this_server", json_boolean(pid == self));
        json_array_append_new(arr, o);
    }
    closedir(d);
    return arr;
}
