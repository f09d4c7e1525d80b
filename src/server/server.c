/*
 * server.c - start and stop a member: data-dir layout, member and cluster
 * ids, LMDB + mvcc, WAL create or replay above the consistent index, the
 * log and apply threads; and the proposal entry point.
 */
#include "server/server.h"

#include <assert.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "server/boot_guard.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

static int mkdir_p(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ERR_INVAL;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return err_from_errno(errno);
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* etcd's member id: SHA-1 over the sorted peer URLs and the cluster token,
 * first 8 bytes big-endian; the cluster id: SHA-1 over the member ids. */
static void compute_ids(struct server *s)
{
    char urls[4096], *parts[64];
    size_t n = 0;
    snprintf(urls, sizeof urls, "%s", s->cfg.peer_urls);
    for (char *save, *t = strtok_r(urls, ",", &save); t && n < 64;
         t = strtok_r(NULL, ",", &save))
        parts[n++] = t;
    qsort(parts, n, sizeof parts[0], cmp_str);
    SHA_CTX c;
    unsigned char d[SHA_DIGEST_LENGTH];
    SHA1_Init(&c);
    for (size_t i = 0; i < n; i++)
        SHA1_Update(&c, parts[i], strlen(parts[i]));
    SHA1_Update(&c, s->cfg.cluster_token, strlen(s->cfg.cluster_token));
    SHA1_Final(d, &c);
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | d[i];
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(id >> (56 - 8 * i));
    SHA1(be, 8, d);
    uint64_t cid = 0;
    for (int i = 0; i < 8; i++)
        cid = cid << 8 | d[i];
    s->member_id = id;
    s->cluster_id = cid;
}

/* --- WAL replay -------------------------------------------------------- */

struct replay {
    struct server *s;           /* the member */
    uint64_t above;             /* consistent index: skip entries <= it */
    struct server_entry *head;  /* entries to apply, in order */
    struct server_entry *tail;
    size_t n;
    uint64_t term;              /* last HardState term */
};

static int on_meta(void *arg, uint64_t node_id, uint64_t cluster_id)
{
    struct replay *r = arg;
    r->s->member_id = node_id;
    r->s->cluster_id = cluster_id;
    return 0;
}

static int on_hs(void *arg, const struct wal_hardstate *hs)
{
    ((struct replay *)arg)->term = hs->term;
    return 0;
}

static int on_entry(void *arg, const struct wal_entry *ent)
{
    struct replay *r = arg;
    if (ent->term > r->term)
        r->term = ent->term;
    if (ent->index <= r->above)
        return 0;
    struct server_entry *e = mem_malloc(sizeof *e + ent->len);
    if (e == NULL)
        return ERR_NOMEM;
    e->next = NULL;
    e->index = ent->index;
    e->id = 0;
    e->len = ent->len;
    if (ent->len)
        memcpy(e->data, ent->data, ent->len);
    if (r->tail)
        r->tail->next = e;
    else
        r->head = e;
    r->tail = e;
    r->n++;
    return 0;
}

static void free_chain(struct server_entry *e)
{
    while (e != NULL) {
        struct server_entry *n = e->next;
        mem_free(e);
        e = n;
    }
}

static int replay_wal(struct server *s, const char *dir,
                      const struct wal_options *wo)
{
    int rc = wal_open(dir, wo, &s->wal);
    if (rc != 0)
        return rc;
    struct replay r = {.s = s, .above = mvcc_consistent_index(s->mvcc)};
    struct wal_replay_cb cb = {.on_metadata = on_meta,
                               .on_hardstate = on_hs,
                               .on_entry = on_entry};
    rc = wal_replay(s->wal, NULL, &cb, &r);
    if (rc == 0 && r.n > 0) {
        log_info("etcdserver", "replaying %zu WAL entries above applied "
                 "index %llu", r.n, (unsigned long long)r.above);
        rc = server__apply_entries(s, r.head, r.n, false);
        arena_reset(&s->apply_arena);
    }
    free_chain(r.head);
    s->last_index = wal_last_index(s->wal);
    atomic_store(&s->term, r.term + 1);
    return rc;
}

static int open_wal(struct server *s)
{
    char dir[4200];
    if (s->cfg.wal_dir != NULL)
        snprintf(dir, sizeof dir, "%s", s->cfg.wal_dir);
    else
        snprintf(dir, sizeof dir, "%s/wal", s->member_dir);
    struct wal_options wo = {.no_fsync = s->cfg.unsafe_no_fsync};
    int rc;
    if (wal_exists(dir)) {
        rc = replay_wal(s, dir, &wo);
    } else {
        rc = mkdir_p(dir);
        if (rc == 0)
            rc = wal_create(dir, &wo, s->member_id, s->cluster_id, &s->wal);
        atomic_store(&s->term, 2); /* bootstrap term 1, then self-elected */
    }
    if (rc != 0)
        return rc;
    /* Make the new term durable before serving in it. */
    struct wal_hardstate hs = {.term = atomic_load(&s->term),
                               .vote = s->member_id,
                               .commit = s->last_index};
    rc = wal_append(s->wal, &hs, NULL, 0);
    if (rc == 0)
        rc = wal_sync(s->wal);
    atomic_store(&s->committed_index, s->last_index);
    atomic_store(&s->applied_index, s->last_index);
    return rc;
}

/* A store the boot guard cannot vouch for is moved aside (kept for
 * inspection) and rebuilt from the WAL. */
static int set_aside(const char *dir)
{
    char aside[4300];
    snprintf(aside, sizeof aside, "%s.untrusted.%ld", dir, (long)time(NULL));
    log_warn("etcdserver", "the store in %s was not shut down cleanly before "
             "a reboot; moving it to %s and rebuilding it from the WAL",
             dir, aside);
    char state[4300];
    snprintf(state, sizeof state, "%s.state", dir);
    if (rename(dir, aside) != 0 && errno != ENOENT)
        return err_from_errno(errno);
    unlink(state);
    return 0;
}

/* The store commits without fsync; see boot_guard.h for why that is safe. */
static int open_store(struct server *s)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/db", s->member_dir);
    bool trusted;
    int rc = boot_guard_check(dir, &trusted);
    if (rc == 0 && !trusted)
        rc = set_aside(dir);
    if (rc == 0)
        rc = boot_guard_mark(dir, false);
    struct backend_options bo = {.no_fsync = true};
    if (rc == 0)
        rc = backend_open(dir, &bo, &s->be);
    if (rc == 0)
        rc = mvcc_store_open(s->be, NULL, &s->mvcc);
    return rc;
}

/* A clean stop: the store is synced, so the next boot may trust it. */
static void close_store(struct server *s)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/db", s->member_dir);
    bool clean = s->be != NULL && s->fatal == 0 && backend_sync(s->be) == 0;
    mvcc_store_close(s->mvcc);
    backend_close(s->be);
    if (clean)
        boot_guard_mark(dir, true);
}

/* The housekeeping thread: once a second, drop the process's mappings of
 * store pages (the page cache keeps them), so RSS follows the working set
 * instead of every page ever read. */
static void *house_main(void *arg)
{
    struct server *s = arg;
    pthread_mutex_lock(&s->house_mu);
    while (!atomic_load(&s->stopping)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->house_cv, &s->house_mu, &ts);
        if (!atomic_load(&s->stopping))
            backend_rss_trim(s->be);
    }
    pthread_mutex_unlock(&s->house_mu);
    return NULL;
}

static void init_state(struct server *s, const struct server_config *cfg)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    snprintf(s->member_dir, sizeof s->member_dir, "%s/member", cfg->data_dir);
    server_queue_init(&s->proposals, SERVER_PROPOSALS_MAX);
    server_queue_init(&s->committed, SIZE_MAX);
    server_wait_init(&s->wait);
    pthread_mutex_init(&s->applied_mu, NULL);
    pthread_cond_init(&s->applied_cv, NULL);
    pthread_mutex_init(&s->house_mu, NULL);
    pthread_mutex_init(&s->apply_mu, NULL);
    pthread_cond_init(&s->house_cv, NULL);
    arena_init(&s->apply_arena);
    atomic_store(&s->next_id, 1);
    compute_ids(s);
}

int server_start(const struct server_config *cfg, struct server **server_out)
{
    struct server *s = mem_malloc(sizeof *s);
    if (s == NULL)
        return ERR_NOMEM;
    init_state(s, cfg);
    int rc = mkdir_p(s->member_dir);
    if (rc == 0)
        rc = open_store(s);
    if (rc == 0)
        rc = open_wal(s);
    if (rc == 0 && pthread_create(&s->apply_thread, NULL,
                                  server__apply_main, s) != 0)
        rc = ERR_NOMEM;
    if (rc == 0 && pthread_create(&s->log_thread, NULL, server__log_main,
                                  s) != 0) {
        server_queue_close(&s->committed);
        pthread_join(s->apply_thread, NULL);
        rc = ERR_NOMEM;
    }
    if (rc != 0) {
        log_error("etcdserver", "cannot start member in %s: %s",
                  s->member_dir, err_str(rc));
        server_stop(s);
        return rc;
    }
    s->threads_started = true;
    if (pthread_create(&s->house_thread, NULL, house_main, s) != 0) {
        server_stop(s);
        return ERR_NOMEM;
    }
    s->house_started = true;
    log_info("etcdserver", "starting member %016llx in cluster %016llx",
             (unsigned long long)s->member_id,
             (unsigned long long)s->cluster_id);
    *server_out = s;
    return 0;
}

void server_stop(struct server *s)
{
    if (s == NULL)
        return;
    atomic_store(&s->stopping, true);
    if (s->house_started) {
        pthread_mutex_lock(&s->house_mu);
        pthread_cond_broadcast(&s->house_cv);
        pthread_mutex_unlock(&s->house_mu);
        pthread_join(s->house_thread, NULL);
    }
    server_queue_close(&s->proposals);
    if (s->threads_started) {
        pthread_join(s->log_thread, NULL);
        pthread_join(s->apply_thread, NULL);
    }
    server_wait_fail_all(&s->wait, ERR_STOPPED);
    wal_close(s->wal);
    close_store(s);
    server_queue_destroy(&s->proposals);
    server_queue_destroy(&s->committed);
    server_wait_destroy(&s->wait);
    pthread_mutex_destroy(&s->applied_mu);
    pthread_cond_destroy(&s->applied_cv);
    pthread_mutex_destroy(&s->house_mu);
    pthread_mutex_destroy(&s->apply_mu);
    pthread_cond_destroy(&s->house_cv);
    arena_free(&s->apply_arena);
    mem_free(s);
}

static int refuse(server_done_fn done, void *arg, int err)
{
    struct server_response r = {.err = err, .msg = NULL};
    done(arg, &r);
    return err;
}

int server_propose(struct server *s, Cetcdpb__InternalRequest *req,
                   server_done_fn done, void *arg)
{
    if (atomic_load(&s->stopping))
        return refuse(done, arg, ERR_STOPPED);
    req->id = atomic_fetch_add(&s->next_id, 1);
    size_t len = cetcdpb__internal_request__get_packed_size(req);
    if (len > s->cfg.max_request_bytes)
        return refuse(done, arg, ERR_REQUEST_TOO_LARGE);
    struct server_entry *e = mem_malloc(sizeof *e + len);
    if (e == NULL)
        return refuse(done, arg, ERR_NOMEM);
    e->next = NULL;
    e->index = 0;
    e->id = req->id;
    e->len = cetcdpb__internal_request__pack(req, e->data);
    assert(e->len == len);
    int rc = server_wait_register(&s->wait, e->id, done, arg);
    if (rc == 0)
        rc = server_queue_push(&s->proposals, e, false);
    if (rc != 0) {
        server_done_fn d;
        void *a;
        mem_free(e);
        if (server_wait_take(&s->wait, req->id, &d, &a) || rc == ERR_NOMEM)
            return refuse(done, arg,
                          rc == ERR_FULL ? ERR_TOO_MANY_REQUESTS : rc);
        return rc; /* already answered by shutdown */
    }
    atomic_fetch_add(&s->stat_proposals, 1);
    return 0;
}

void server_header_fill(struct server *s, Etcdserverpb__ResponseHeader *h)
{
    h->cluster_id = s->cluster_id;
    h->member_id = s->member_id;
    h->raft_term = atomic_load(&s->term);
    if (h->revision == 0)
        h->revision = mvcc_current_rev(s->mvcc);
}

uint64_t server_max_request_bytes(const struct server *s)
{
    return s->cfg.max_request_bytes;
}

uint32_t server_max_txn_ops(const struct server *s)
{
    return s->cfg.max_txn_ops;
}

uint64_t server_member_id(const struct server *s)
{
    return s->member_id;
}

uint64_t server_cluster_id(const struct server *s)
{
    return s->cluster_id;
}

void server_stats_get(struct server *s, struct server_stats *out)
{
    out->proposals = atomic_load(&s->stat_proposals);
    out->wal_syncs = atomic_load(&s->stat_wal_syncs);
    out->apply_batches = atomic_load(&s->stat_apply_batches);
    out->applied_index = atomic_load(&s->applied_index);
}

int server_status_get(struct server *s, struct server_status *out)
{
    memset(out, 0, sizeof *out);
    out->leader = s->member_id; /* a single member leads itself */
    out->raft_index = atomic_load(&s->committed_index);
    out->raft_term = atomic_load(&s->term);
    out->applied_index = atomic_load(&s->applied_index);
    return backend_size(s->be, &out->db_size, &out->db_in_use);
}
