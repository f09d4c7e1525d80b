/*
 * server.c - start and stop a member: data-dir layout, member and cluster
 * ids, the start-up order (store: store.c; WAL and raft: raft_open.c;
 * transport: peers.c), the threads; and the proposal entry point
 * (server_propose), response headers, stats and status.
 */
#include "util/thread.h"
#include "server/server.h"

#include "util/check.h"
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
#include "peer/peer.h"
#include "server/boot_guard.h"
#include "server/members.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static uint64_t be64_of(const unsigned char *d)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

/* etcd's member id: SHA-1 over the member's sorted peer URLs and the
 * cluster token, first 8 bytes big-endian. */
static uint64_t member_id_of(const char *urls, const char *token)
{
    char buf[1024], *parts[64];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", urls);
    for (char *save, *t = strtok_r(buf, ",", &save); t && n < 64;
         t = strtok_r(NULL, ",", &save))
        parts[n++] = t;
    qsort(parts, n, sizeof parts[0], cmp_str);
    SHA_CTX c;
    unsigned char d[SHA_DIGEST_LENGTH];
    SHA1_Init(&c);
    for (size_t i = 0; i < n; i++)
        SHA1_Update(&c, parts[i], strlen(parts[i]));
    SHA1_Update(&c, token, strlen(token));
    SHA1_Final(d, &c);
    return be64_of(d);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The cluster id: SHA-1 over the sorted member ids (8 bytes BE each). */
static uint64_t cluster_id_of(const struct server_member *m, size_t n)
{
    uint64_t ids[SERVER_MEMBERS_MAX];
    unsigned char b[8 * SERVER_MEMBERS_MAX], d[SHA_DIGEST_LENGTH];
    for (size_t i = 0; i < n; i++)
        ids[i] = m[i].id;
    qsort(ids, n, sizeof ids[0], cmp_u64);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            b[8 * i + k] = (unsigned char)(ids[i] >> (56 - 8 * k));
    SHA1(b, 8 * n, d);
    return be64_of(d);
}

static struct server_member *member_named(struct server *s, const char *name,
                                          size_t len)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (strlen(s->members[i].name) == len &&
            strncmp(s->members[i].name, name, len) == 0)
            return &s->members[i];
    if (s->n_members == SERVER_MEMBERS_MAX || len >= sizeof s->members[0].name)
        return NULL;
    struct server_member *m = &s->members[s->n_members++];
    memcpy(m->name, name, len);
    m->name[len] = '\0';
    return m;
}

/* --initial-cluster "a=http://x:2380,a=http://y:2380,b=..." (a name may
 * repeat, one URL each time, as in etcd). */
static int parse_cluster(struct server *s)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", s->cfg.initial_cluster);
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (eq == NULL || eq == t)
            return ERR_INVAL;
        struct server_member *m = member_named(s, t, (size_t)(eq - t));
        if (m == NULL)
            return ERR_INVAL;
        size_t used = strlen(m->peer_urls);
        snprintf(m->peer_urls + used, sizeof m->peer_urls - used, "%s%s",
                 used ? "," : "", eq + 1);
    }
    for (size_t i = 0; i < s->n_members; i++)
        s->members[i].id =
            member_id_of(s->members[i].peer_urls, s->cfg.cluster_token);
    return s->n_members > 0 ? 0 : ERR_INVAL;
}

/* ignore_flags forgets what --initial-cluster gave: a member with data
 * takes its ids and members from what it stored (members.c), as etcd
 * ignores the --initial-* flags then; they need not even name it. */
static int ignore_flags(struct server *s)
{
    s->n_members = 0;
    s->member_id = 0;
    s->cluster_id = 0;
    return 0;
}

static int compute_ids(struct server *s, bool has_data)
{
    int rc = parse_cluster(s);
    if (rc != 0 && has_data)
        return ignore_flags(s);
    if (rc != 0) {
        log_error("etcdserver", "invalid --initial-cluster \"%s\"",
                  s->cfg.initial_cluster);
        return rc;
    }
    struct server_member *self =
        member_named(s, s->cfg.name, strlen(s->cfg.name));
    if ((self == NULL || self->id == 0) && has_data)
        return ignore_flags(s);
    if (self == NULL || self->id == 0) {
        log_error("etcdserver", "couldn't find local name \"%s\" in the "
                  "initial cluster configuration", s->cfg.name);
        return ERR_INVAL;
    }
    s->member_id = self->id;
    s->cluster_id = cluster_id_of(s->members, s->n_members);
    if (s->cfg.join != NULL) {
        /* Joining: the running cluster decided both ids (MemberAdd). */
        s->member_id = s->cfg.join->member_id;
        s->cluster_id = s->cfg.join->cluster_id;
    }
    return 0;
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
    server__defrag_init(s);
    pthread_cond_init(&s->house_cv, NULL);
    pthread_mutex_init(&s->node.raft_mu, NULL);
    pthread_mutex_init(&s->node.ev_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* raft ticks */
    pthread_cond_init(&s->node.ev_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->reads.ready_mu, NULL);
    pthread_cond_init(&s->reads.ready_cv, NULL);
    arena_init(&s->apply_arena);
    arena_init(&s->spec_arena);
    pthread_mutex_init(&s->spec.mu, NULL);
    pthread_mutex_init(&s->alarms.pub_mu, NULL);
}

/* Request ids are unique across the cluster and across restarts: the
 * member id's low 16 bits, then the start time in ms, then a counter (the
 * shape of etcd's id generator). */
static void init_ids(struct server *s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t ms = (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
    atomic_store(&s->next_id, (s->member_id & 0xffffu) << 48 |
                                  (ms & 0xffffffffffull) << 8);
}

int server_start(const struct server_config *cfg, struct server **server_out)
{
    struct server *s = mem_malloc(sizeof *s);
    if (s == NULL)
        return ERR_NOMEM;
    init_state(s, cfg);
    int rc = compute_ids(s, server__member_has_wal(s));
    init_ids(s);
    if (rc == 0)
        rc = fs_mkdir_p(s->member_dir);
    if (rc == 0)
        rc = server__snap_open(s);
    if (rc == 0)
        rc = server__store_boot(s);
    if (rc == 0)
        rc = server__members_open(s);
    if (rc == 0)
        init_ids(s); /* the stored member id may differ from the flags' */
    if (rc == 0)
        rc = server__wal_open(s);
    if (rc == 0)
        rc = server__snap_recover(s);
    if (rc == 0)
        rc = server__raft_open(s);
    if (rc == 0)
        rc = server__peers_open(s, cfg->peer_listener);
    if (rc == 0)
        rc = server__read_workers_start(s);
    if (rc == 0)
        rc = server__snap_start(s);
    if (rc == 0)
        rc = server__watch_start(s);
    if (rc == 0)
        rc = server__tasks_start(s);
    if (rc == 0 && pthread_create(&s->apply_thread, NULL,
                                  server__apply_main, s) != 0)
        rc = ERR_NOMEM;
    else if (rc == 0)
        thread_name_set(s->apply_thread, "cetcd-apply");
    /* From now on the applier runs: the raft thread may speculate. */
    s->spec_ok = rc == 0 && !s->cfg.no_speculation;
    if (rc == 0 && pthread_create(&s->log_thread, NULL, server__raft_main,
                                  s) != 0) {
        server_queue_close(&s->committed);
        pthread_join(s->apply_thread, NULL);
        rc = ERR_NOMEM;
    } else if (rc == 0) {
        thread_name_set(s->log_thread, "cetcd-raft");
    }
    if (rc != 0) {
        log_error("etcdserver", "cannot start member in %s: %s",
                  s->member_dir, err_str(rc));
        server_stop(s);
        return rc;
    }
    s->threads_started = true;
    if (pthread_create(&s->house_thread, NULL, server__house_main,
                       s) != 0) {
        server_stop(s);
        return ERR_NOMEM;
    }
    thread_name_set(s->house_thread, "cetcd-house");
    s->house_started = true;
    if (!log_is_zap())
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
    server__tasks_stop(s);
    server__defrag_stop(s); /* needs the apply thread to finish a step */
    if (s->house_started) {
        pthread_mutex_lock(&s->house_mu);
        pthread_cond_broadcast(&s->house_cv);
        pthread_mutex_unlock(&s->house_mu);
        pthread_join(s->house_thread, NULL);
    }
    server__compactor_free(s);
    server_queue_close(&s->proposals);
    if (s->threads_started) {
        server__kick(s);
        pthread_join(s->log_thread, NULL);
        pthread_join(s->apply_thread, NULL);
    }
    server__read_workers_stop(s);
    size_t n;
    for (struct server_entry *e = server_queue_try_pop_all(&s->proposals, &n),
                             *next;
         e != NULL; e = next) {
        next = e->next;
        mem_free(e);
    }
    /* The transport first: its threads call into the members store (a
     * forwarded promotion's answer, a removal).  Then the waiters: a
     * pending publish's callback uses the members state (a member stopped
     * before its publish committed). */
    server__peers_close(s);
    server__lease_forward_stop(s); /* after the transport: no answers */
    server_wait_fail_all(&s->wait, ERR_STOPPED);
    server__members_close(s);
    server__snap_close(s);
    server__raft_close(s);
    wal_close(s->wal);
    server__watch_close(s);
    server__tasks_drain(s);
    server__store_close(s);
    server__leases_close(s);
    server__auth_close(s);
    server_queue_destroy(&s->proposals);
    server_queue_destroy(&s->committed);
    server_wait_destroy(&s->wait);
    pthread_mutex_destroy(&s->applied_mu);
    pthread_cond_destroy(&s->applied_cv);
    pthread_mutex_destroy(&s->house_mu);
    pthread_mutex_destroy(&s->apply_mu);
    server__defrag_free(s);
    pthread_cond_destroy(&s->house_cv);
    pthread_mutex_destroy(&s->node.raft_mu);
    pthread_mutex_destroy(&s->node.ev_mu);
    pthread_cond_destroy(&s->node.ev_cv);
    pthread_mutex_destroy(&s->reads.ready_mu);
    pthread_cond_destroy(&s->reads.ready_cv);
    arena_free(&s->apply_arena);
    arena_free(&s->spec_arena);
    pthread_mutex_destroy(&s->spec.mu);
    pthread_mutex_destroy(&s->alarms.pub_mu);
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
    if (atomic_load(&s->committed_index) >
        atomic_load(&s->applied_index) + SERVER_APPLY_GAP_MAX)
        return refuse(done, arg, ERR_TOO_MANY_REQUESTS);
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
    CHECK(e->len == len);
    uint64_t now = server__clock_ms(s);
    int rc = server_wait_register(&s->wait, e->id, done, arg, now,
                                  now + server__request_timeout_ms(s));
    if (rc != 0) { /* not registered: nobody else answers it */
        mem_free(e);
        return refuse(done, arg, rc == ERR_FULL ? ERR_TOO_MANY_REQUESTS : rc);
    }
    rc = server_queue_push(&s->proposals, e, false);
    if (rc == 0)
        server__raft_poke_turn(s);
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
    server__store_enter(s);
    server__header_fill(s, h);
    server__store_leave(s);
}

void server__header_fill(struct server *s, Etcdserverpb__ResponseHeader *h)
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

bool server_is_learner(struct server *s)
{
    return server__member_is_learner(s, s->member_id);
}

void server_metrics_get(struct server *s, struct server_metrics *out)
{
    memset(out, 0, sizeof *out);
    uint64_t lead = atomic_load(&s->lead);
    out->has_leader = lead != 0;
    out->is_leader = lead != 0 && lead == s->member_id;
    out->is_learner = server__member_is_learner(s, s->member_id);
    out->member_id = s->member_id;
    out->leader_changes = atomic_load(&s->stat_leader_changes);
    out->committed_index = atomic_load(&s->committed_index);
    out->applied_index = atomic_load(&s->applied_index);
    out->proposals_pending = server_wait_count(&s->wait);
    out->proposals_failed = atomic_load(&s->stat_proposals_failed);
    server__store_enter(s);
    if (backend_size(s->be, &out->db_size, &out->db_in_use) != 0)
        out->db_size = out->db_in_use = 0;
    out->keys = mvcc_keys(s->mvcc);
    server__store_leave(s);
    out->quota_bytes = server__quota_bytes(s);
    /* The hub is made at the first store open, before any listener, and
     * kept across store swaps. */
    if (s->watch.hub != NULL) {
        out->watchers = watch_hub_watchers(s->watch.hub);
        out->slow_watchers = watch_hub_unsynced(s->watch.hub);
    }
}

void server_peer_metrics(struct server *s,
                         void (*fn)(const struct server_peer_metrics *p,
                                    void *ctx),
                         void *ctx)
{
    CHECK(s != NULL && fn != NULL);
    if (s->transport == NULL)
        return;
    pthread_mutex_lock(&s->ms->mu);
    for (size_t i = 0; i < s->ms->n; i++) {
        struct peer_stats st;
        uint64_t id = s->ms->m[i].id;
        if (id == s->member_id || peer_stats(s->transport, id, &st) != 0)
            continue;
        struct server_peer_metrics p = {.id = id,
                                        .active = st.active,
                                        .sent_failures = st.dropped_msgs,
                                        .sent_bytes = st.sent_bytes,
                                        .received_bytes = st.received_bytes,
                                        .rtt = st.rtt};
        fn(&p, ctx);
    }
    pthread_mutex_unlock(&s->ms->mu);
}

const char *server_reported_version(const struct server *s)
{
    return s->cfg.version != NULL ? s->cfg.version
                                  : SERVER_REPORTED_VERSION_DEFAULT;
}

int server_status_get(struct server *s, struct server_status *out)
{
    memset(out, 0, sizeof *out);
    out->leader = atomic_load(&s->lead);
    out->raft_index = atomic_load(&s->committed_index);
    out->raft_term = atomic_load(&s->term);
    out->applied_index = atomic_load(&s->applied_index);
    out->is_learner = server__member_is_learner(s, s->member_id);
    out->version = s->cfg.version != NULL ? s->cfg.version
                                          : SERVER_REPORTED_VERSION_DEFAULT;
    server__store_enter(s);
    int rc = backend_size(s->be, &out->db_size, &out->db_in_use);
    server__store_leave(s);
    return rc;
}
