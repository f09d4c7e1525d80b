/*
 * members.c - the members store: etcd's membership.RaftCluster for cetcd.
 *
 * Every member keeps the cluster's members {id, name, peer URLs, client
 * URLs, learner} in memory (for MemberList, Status, the strict reconfig
 * check) and in two LMDB buckets written inside the apply batch, so the
 * table is exactly as of the consistent index after any crash:
 *   "members"          key: member id, 8 bytes big-endian
 *                      value: etcdserverpb.Member, protobuf-encoded
 *   "members_removed"  key: member id, 8 bytes big-endian; value empty
 * A new cluster seeds the table from --initial-cluster (names known, no
 * client URLs), a joining member from the running cluster's answer; the
 * seed is kept in <member>/seed, and a member with data (a WAL) whose
 * store is empty (rebuilt) seeds from that file, never from the flags,
 * which etcd ignores once a member has data.  The files ids and seed are
 * 0600, written atomically (members_files.c).  The
 * table changes only by applying committed log entries: conf changes
 * (their context is a MemberChange) and MemberAttr (a member publishing
 * its name and client URLs after it starts, as etcd's publish).
 */
#include "server/members.h"

#include "util/check.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mvcc/mvcc.h"
#include "peer/peer.h"
#include "raft/raft.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

#define META_KEY "meta"
/* A publish proposal forwarded while the stream to the leader is still
 * coming up is lost without an answer until the request timeout (7 s by
 * default; etcd retries only then).  cetcd proposes again every second
 * while the member is not published, a few in flight at most: applying
 * the same attributes twice changes nothing. */
#define PUBLISH_RETRY_MS 1000
#define PUBLISH_IN_FLIGHT_MAX 8

void server__be64_put(uint8_t *d, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        d[i] = (uint8_t)(v >> (56 - 8 * i));
}

uint64_t server__be64_get(const uint8_t *d)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

size_t server__urls_split(char *buf, const char **out, size_t cap)
{
    size_t n = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t && n < cap;
         t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

static void urls_join(char *dst, size_t cap, char *const *urls, size_t n)
{
    size_t used = 0;
    dst[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(dst + used, cap - used, "%s%s",
                                 i ? "," : "", urls[i]);
}

struct server_member_info *server__ms_find(struct server_ms *ms, uint64_t id)
{
    for (size_t i = 0; i < ms->n; i++)
        if (ms->m[i].id == id)
            return &ms->m[i];
    return NULL;
}

bool server__ms_is_removed(const struct server_ms *ms, uint64_t id)
{
    for (size_t i = 0; i < ms->n_removed; i++)
        if (ms->removed[i] == id)
            return true;
    return false;
}

/* Inserts (or returns) id's slot, keeping the table sorted by id. */
struct server_member_info *server__ms_slot(struct server_ms *ms,
                                           uint64_t id)
{
    struct server_member_info *m = server__ms_find(ms, id);
    if (m != NULL || ms->n == SERVER_MEMBERS_MAX)
        return m;
    size_t i = 0;
    while (i < ms->n && ms->m[i].id < id)
        i++;
    memmove(&ms->m[i + 1], &ms->m[i], (ms->n - i) * sizeof ms->m[0]);
    ms->n++;
    memset(&ms->m[i], 0, sizeof ms->m[i]);
    ms->m[i].id = id;
    return &ms->m[i];
}

static void ms_drop(struct server_ms *ms, uint64_t id)
{
    struct server_member_info *m = server__ms_find(ms, id);
    if (m != NULL) {
        size_t i = (size_t)(m - ms->m);
        memmove(&ms->m[i], &ms->m[i + 1], (ms->n - i - 1) * sizeof ms->m[0]);
        ms->n--;
    }
    if (!server__ms_is_removed(ms, id) && ms->n_removed < SERVER_REMOVED_MAX)
        ms->removed[ms->n_removed++] = id;
}

/* --- records ------------------------------------------------------------ */

void server__ms_info_from_pb(struct server_member_info *m,
                             const Etcdserverpb__Member *pb)
{
    m->id = pb->id;
    snprintf(m->name, sizeof m->name, "%s", pb->name ? pb->name : "");
    urls_join(m->peer_urls, sizeof m->peer_urls, pb->peerurls,
              pb->n_peerurls);
    urls_join(m->client_urls, sizeof m->client_urls, pb->clienturls,
              pb->n_clienturls);
    m->is_learner = pb->islearner;
}

/* server__ms_member_pack encodes m as an etcdserverpb.Member into buf (cap bytes);
 * *len_out gets its length.  ERR_TOO_LARGE when it does not fit. */
int server__ms_member_pack(const struct server_member_info *m,
                           uint8_t *buf, size_t cap, size_t *len_out)
{
    char peers[sizeof m->peer_urls], clients[sizeof m->client_urls];
    const char *pu[PEER_URLS_MAX * 2], *cu[PEER_URLS_MAX * 2];
    snprintf(peers, sizeof peers, "%s", m->peer_urls);
    snprintf(clients, sizeof clients, "%s", m->client_urls);
    Etcdserverpb__Member pb = ETCDSERVERPB__MEMBER__INIT;
    pb.id = m->id;
    pb.name = (char *)m->name;
    pb.n_peerurls = server__urls_split(peers, pu, PEER_URLS_MAX * 2);
    pb.peerurls = (char **)pu;
    pb.n_clienturls = server__urls_split(clients, cu, PEER_URLS_MAX * 2);
    pb.clienturls = (char **)cu;
    pb.islearner = m->is_learner;
    size_t len = etcdserverpb__member__get_packed_size(&pb);
    if (len > cap)
        return ERR_TOO_LARGE;
    *len_out = etcdserverpb__member__pack(&pb, buf);
    CHECK(*len_out == len);
    return 0;
}

/* Writes m's record in txn. */
static int record_put(struct server_ms *ms, struct backend_txn *txn,
                      const struct server_member_info *m)
{
    uint8_t buf[4096], key[8];
    size_t len;
    int rc = server__ms_member_pack(m, buf, sizeof buf, &len);
    if (rc != 0)
        return rc;
    server__be64_put(key, m->id);
    return backend_put(txn, ms->b_members, key, 8, buf, len);
}

static int record_remove(struct server_ms *ms, struct backend_txn *txn,
                         uint64_t id)
{
    uint8_t key[8];
    server__be64_put(key, id);
    int rc = backend_del(txn, ms->b_members, key, 8);
    if (rc == ERR_NOTFOUND)
        rc = 0;
    if (rc == 0)
        rc = backend_put(txn, ms->b_removed, key, 8, "", 0);
    return rc;
}

static int load_bucket(struct server *s, struct backend_txn *txn, bool removed,
                       uint8_t meta[16], bool *has_meta)
{
    struct server_ms *ms = s->ms;
    struct backend_cursor *c;
    int rc = backend_cursor_open(txn, removed ? ms->b_removed : ms->b_members,
                                 &c);
    if (rc != 0)
        return rc;
    struct backend_val k, v;
    for (rc = backend_cursor_first(c, &k, &v); rc == 0;
         rc = backend_cursor_next(c, &k, &v)) {
        if (!removed && k.len == 4 && memcmp(k.data, META_KEY, 4) == 0 &&
            v.len == 16) {
            memcpy(meta, v.data, 16);
            *has_meta = true;
            continue;
        }
        if (k.len != 8)
            continue;
        if (removed) {
            if (ms->n_removed < SERVER_REMOVED_MAX)
                ms->removed[ms->n_removed++] = server__be64_get(k.data);
            continue;
        }
        Etcdserverpb__Member *pb =
            etcdserverpb__member__unpack(NULL, v.len, v.data);
        if (pb == NULL) {
            rc = ERR_CORRUPT;
            break;
        }
        struct server_member_info *m = server__ms_slot(ms, pb->id);
        if (m != NULL)
            server__ms_info_from_pb(m, pb);
        etcdserverpb__member__free_unpacked(pb, NULL);
    }
    backend_cursor_close(c);
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* Reads both buckets; *has_meta tells whether ids were stored. */
static int load(struct server *s, uint8_t meta[16], bool *has_meta)
{
    struct backend_txn *txn;
    int rc = backend_read_begin(s->be, &txn);
    if (rc != 0)
        return rc;
    *has_meta = false;
    s->ms->n = 0;
    s->ms->n_removed = 0;
    rc = load_bucket(s, txn, false, meta, has_meta);
    if (rc == 0)
        rc = load_bucket(s, txn, true, meta, has_meta);
    backend_read_end(txn);
    return rc;
}

/* A new cluster: the members of --initial-cluster, or the join answer. */
static void seed_table(struct server *s)
{
    struct server_ms *ms = s->ms;
    const struct server_join *j = s->cfg.join;
    if (j != NULL) {
        for (size_t i = 0; i < j->n_members; i++) {
            struct server_member_info *m = server__ms_slot(ms, j->members[i]->id);
            if (m != NULL)
                server__ms_info_from_pb(m, j->members[i]);
        }
        return;
    }
    for (size_t i = 0; i < s->n_members; i++) {
        struct server_member_info *m = server__ms_slot(ms, s->members[i].id);
        if (m == NULL)
            continue;
        snprintf(m->name, sizeof m->name, "%s", s->members[i].name);
        snprintf(m->peer_urls, sizeof m->peer_urls, "%s",
                 s->members[i].peer_urls);
    }
}

/* Writes the seeded table and the ids (start-up: no other writer yet). */
static int seed_write(struct server *s)
{
    struct backend_txn *txn;
    int rc = backend_write_begin(s->be, &txn);
    if (rc != 0)
        return rc;
    for (size_t i = 0; rc == 0 && i < s->ms->n; i++)
        rc = record_put(s->ms, txn, &s->ms->m[i]);
    if (rc != 0) {
        backend_write_abort(txn);
        return rc;
    }
    return backend_write_commit(txn);
}

/* s->members (what peers.c and raft_open.c start from) := the table. */
static void publish_to_initial(struct server *s)
{
    struct server_ms *ms = s->ms;
    s->n_members = 0;
    for (size_t i = 0; i < ms->n; i++) {
        struct server_member *dst = &s->members[s->n_members++];
        dst->id = ms->m[i].id;
        snprintf(dst->name, sizeof dst->name, "%s", ms->m[i].name);
        snprintf(dst->peer_urls, sizeof dst->peer_urls, "%s",
                 ms->m[i].peer_urls);
    }
}

bool server__member_has_wal(const struct server *s)
{
    char dir[4200];
    if (s->cfg.wal_dir != NULL)
        snprintf(dir, sizeof dir, "%s", s->cfg.wal_dir);
    else
        snprintf(dir, sizeof dir, "%s/wal", s->member_dir);
    return wal_exists(dir);
}

/* seed fills an empty table.  A member without data takes the members of
 * --initial-cluster or of the join answer and remembers them (seed file).
 * A member with data (a WAL) whose store was rebuilt takes them from the
 * seed file, as the flags may have changed since; only a data dir written
 * before the seed file existed falls back to the flags. */
static int seed(struct server *s)
{
    CHECK(s->ms->n == 0);
    if (!server__member_has_wal(s)) {
        seed_table(s);
        int rc = server__ms_seed_save(s);
        return rc == 0 ? seed_write(s) : rc;
    }
    int rc = server__ms_seed_load(s);
    if (rc == 0)
        log_info("etcdserver", "the store is empty: it starts from the "
                 "members in %s/seed and the WAL; the --initial-* flags are "
                 "ignored", s->member_dir);
    if (rc == ERR_NOTFOUND && s->n_members > 0) {
        log_warn("etcdserver", "the store is empty and %s/seed is missing "
                 "(written by an older cetcd): its members come from "
                 "--initial-cluster", s->member_dir);
        seed_table(s);
        rc = 0;
    } else if (rc == ERR_NOTFOUND) {
        log_error("etcdserver", "the store is empty and %s/seed is missing: "
                  "cannot tell the members this member started with",
                  s->member_dir);
        rc = ERR_CORRUPT;
    }
    return rc == 0 ? seed_write(s) : rc;
}

static int adopt_ids(struct server *s, const uint8_t meta[16])
{
    uint64_t id = server__be64_get(meta), cid = server__be64_get(meta + 8);
    if (id != s->member_id || cid != s->cluster_id)
        log_info("etcdserver", "using the stored member id %016llx and "
                 "cluster id %016llx (flags give %016llx / %016llx)",
                 (unsigned long long)id, (unsigned long long)cid,
                 (unsigned long long)s->member_id,
                 (unsigned long long)s->cluster_id);
    s->member_id = id;
    s->cluster_id = cid;
    return 0;
}

/* The member has data but no ids file, and the flags name no member id
 * (the flags are ignored once a member has data). */
static int no_ids(struct server *s)
{
    log_error("etcdserver", "%s/ids is missing: cannot tell this member's "
              "id and cluster id", s->member_dir);
    return ERR_CORRUPT;
}

static int open_buckets(struct server *s)
{
    int rc = backend_bucket_open(s->be, "members", 0, &s->ms->b_members);
    if (rc == 0)
        rc = backend_bucket_open(s->be, "members_removed", 0,
                                 &s->ms->b_removed);
    return rc;
}

static void log_change(struct server *s, int kind, uint64_t id,
                       const char *urls);

/* A new cluster's members, as etcd logs applying its bootstrap conf
 * changes ("added member"). */
static void log_seeded(struct server *s)
{
    for (size_t i = 0; i < s->ms->n; i++)
        log_change(s, 0, s->ms->m[i].id, s->ms->m[i].peer_urls);
}

int server__members_open(struct server *s)
{
    CHECK(s->ms == NULL && s->be != NULL);
    s->ms = mem_calloc(1, sizeof *s->ms);
    if (s->ms == NULL)
        return ERR_NOMEM;
    pthread_mutex_init(&s->ms->mu, NULL);
    uint8_t meta[16], ids[16];
    bool has_meta;
    int rc = open_buckets(s);
    if (rc == 0)
        rc = load(s, meta, &has_meta);
    bool seeded = rc == 0 && s->ms->n == 0;
    if (seeded)
        rc = seed(s);
    int irc = rc == 0 ? server__ms_ids_read(s, ids) : rc;
    if (irc == 0)
        rc = adopt_ids(s, ids);
    else if (irc == ERR_NOTFOUND && s->member_id != 0)
        rc = server__ms_ids_write(s);
    else if (irc == ERR_NOTFOUND)
        rc = no_ids(s);
    else
        rc = irc;
    if (rc == 0 && server__ms_is_removed(s->ms, s->member_id)) {
        log_error("etcdserver", "the member has been permanently removed "
                  "from the cluster; the data-dir used by this member must "
                  "be removed");
        rc = ERR_MEMBER_REMOVED;
    }
    if (rc == 0 && seeded)
        log_seeded(s);
    if (rc == 0 && s->ms->n > 0)
        publish_to_initial(s);
    return rc;
}

static void transport_follow(struct server *s, int kind, uint64_t id,
                             const char *peer_urls);

/* The transport follows a table that changed all at once (a snapshot
 * replaced the store): etcd's applySnapshot re-adds every peer. */
static void transport_sync(struct server *s,
                           const struct server_member_info *old, size_t n_old)
{
    struct server_ms *ms = s->ms;
    for (size_t i = 0; i < ms->n; i++) {
        const struct server_member_info *m = &ms->m[i], *o = NULL;
        for (size_t k = 0; k < n_old && o == NULL; k++)
            if (old[k].id == m->id)
                o = &old[k];
        if (o == NULL || strcmp(o->peer_urls, m->peer_urls) != 0)
            transport_follow(s, CETCDPB__MEMBER_CHANGE__KIND__ADD, m->id,
                             m->peer_urls);
    }
    for (size_t k = 0; k < n_old; k++)
        if (server__ms_find(ms, old[k].id) == NULL)
            transport_follow(s, CETCDPB__MEMBER_CHANGE__KIND__REMOVE,
                             old[k].id, "");
}

int server__members_reload(struct server *s, bool starting)
{
    struct server_ms *ms = s->ms;
    uint8_t meta[16];
    bool has_meta;
    struct server_member_info *old =
        mem_malloc(sizeof *old * SERVER_MEMBERS_MAX);
    if (old == NULL)
        return ERR_NOMEM;
    pthread_mutex_lock(&ms->mu);
    size_t n_old = ms->n;
    memcpy(old, ms->m, n_old * sizeof *old);
    int rc = open_buckets(s);
    if (rc == 0)
        rc = load(s, meta, &has_meta);
    pthread_mutex_unlock(&ms->mu);
    /* The transport is touched outside mu, as when a change is applied;
     * the table changes only by applying, and the applier is held off
     * while a store is replaced. */
    if (rc == 0 && starting && ms->n > 0)
        publish_to_initial(s);
    else if (rc == 0)
        transport_sync(s, old, n_old);
    mem_free(old);
    return rc;
}

/* Adds member id to cs as a voter or a learner; false when cs is full. */
static bool conf_add(struct raft_conf_state *cs, uint64_t id, bool learner)
{
    if (cs->n_voters + cs->n_learners >= RAFT_MAX_MEMBERS)
        return false;
    if (learner)
        cs->learners[cs->n_learners++] = id;
    else
        cs->voters[cs->n_voters++] = id;
    return true;
}

void server__members_conf(struct server *s, struct raft_conf_state *cs)
{
    struct server_ms *ms = s->ms;
    memset(cs, 0, sizeof *cs);
    pthread_mutex_lock(&ms->mu);
    for (size_t i = 0; i < ms->n; i++)
        if (!conf_add(cs, ms->m[i].id, ms->m[i].is_learner))
            break;
    pthread_mutex_unlock(&ms->mu);
    CHECK(cs->n_voters + cs->n_learners <= RAFT_MAX_MEMBERS);
}

/* The ConfState of the "members" bucket of txn's store. */
static int conf_of_bucket(struct backend_txn *txn, backend_bucket b,
                          struct raft_conf_state *cs)
{
    struct backend_cursor *c;
    int rc = backend_cursor_open(txn, b, &c);
    if (rc != 0)
        return rc;
    struct backend_val k, v;
    for (rc = backend_cursor_first(c, &k, &v); rc == 0;
         rc = backend_cursor_next(c, &k, &v)) {
        if (k.len != 8)
            continue; /* the "meta" record of older stores */
        Etcdserverpb__Member *pb =
            etcdserverpb__member__unpack(NULL, v.len, v.data);
        bool ok = pb != NULL && pb->id == server__be64_get(k.data) && pb->id != 0 &&
                  conf_add(cs, pb->id, pb->islearner);
        if (pb != NULL)
            etcdserverpb__member__free_unpacked(pb, NULL);
        if (!ok) {
            rc = ERR_CORRUPT;
            break;
        }
    }
    backend_cursor_close(c);
    return rc == ERR_NOTFOUND ? 0 : rc;
}

int server__members_conf_read(struct backend *be,
                              struct raft_conf_state *cs_out)
{
    CHECK(be != NULL && cs_out != NULL);
    memset(cs_out, 0, sizeof *cs_out);
    backend_bucket b;
    int rc = backend_bucket_open(be, "members", 0, &b);
    struct backend_txn *txn = NULL;
    if (rc == 0)
        rc = backend_read_begin(be, &txn);
    if (rc == 0) {
        rc = conf_of_bucket(txn, b, cs_out);
        backend_read_end(txn);
    }
    if (rc == 0 && cs_out->n_voters == 0)
        rc = ERR_NOTFOUND; /* no members table: not a cetcd store */
    CHECK(rc != 0 || cs_out->n_voters + cs_out->n_learners <=
                          RAFT_MAX_MEMBERS);
    return rc;
}

/* --- reading ----------------------------------------------------------- */

size_t server_members_list(struct server *s, struct server_member_info *out,
                           size_t cap)
{
    pthread_mutex_lock(&s->ms->mu);
    size_t n = s->ms->n;
    memcpy(out, s->ms->m, (n < cap ? n : cap) * sizeof *out);
    pthread_mutex_unlock(&s->ms->mu);
    return n;
}

bool server__member_is_learner(struct server *s, uint64_t id)
{
    if (s->ms == NULL)
        return false;
    pthread_mutex_lock(&s->ms->mu);
    struct server_member_info *m = server__ms_find(s->ms, id);
    bool l = m != NULL && m->is_learner;
    pthread_mutex_unlock(&s->ms->mu);
    return l;
}

bool server_published(struct server *s)
{
    return s->ms != NULL && atomic_load(&s->ms->published);
}

bool server_removed(struct server *s)
{
    return s->ms != NULL && atomic_load(&s->ms->removed_self);
}

int server_join_info(struct server *s, const char *cluster_token,
                     uint64_t *cluster_id_out, struct server_member_info *out,
                     size_t cap, size_t *n_out)
{
    /* etcd does not compare tokens here: the joining member takes the
     * running cluster's ids whatever its own --initial-cluster-token (etcd's
     * e2e TestIssue6361 joins a restored cluster with the default token).
     * Said once in the log, since a token that differs is often a mistake. */
    if (cluster_token != NULL && strcmp(cluster_token, s->cfg.cluster_token) != 0)
        log_warn("etcdserver", "a member joins with --initial-cluster-token "
                 "\"%.64s\", not this member's; as etcd, tokens are not "
                 "compared: it takes this cluster's ids", cluster_token);
    *cluster_id_out = s->cluster_id;
    *n_out = server_members_list(s, out, cap);
    return 0;
}

/* --- applying ---------------------------------------------------------- */

/* The transport follows the table (not for ourselves). */
static void transport_follow(struct server *s, int kind, uint64_t id,
                             const char *peer_urls)
{
    if (s->transport == NULL || id == s->member_id)
        return;
    char buf[1024];
    const char *urls[PEER_URLS_MAX];
    snprintf(buf, sizeof buf, "%s", peer_urls);
    size_t n = server__urls_split(buf, urls, PEER_URLS_MAX);
    int rc;
    if (kind == CETCDPB__MEMBER_CHANGE__KIND__REMOVE)
        rc = peer_remove(s->transport, id);
    else if (kind == CETCDPB__MEMBER_CHANGE__KIND__UPDATE)
        rc = peer_update(s->transport, id, urls, n);
    else
        rc = peer_add(s->transport, id, urls, n);
    if (rc == ERR_EXIST)
        rc = peer_update(s->transport, id, urls, n);
    if (rc != 0 && rc != ERR_NOTFOUND)
        log_warn("rafthttp", "cannot update peer %016llx (%s): %s",
                 (unsigned long long)id, peer_urls, err_str(rc));
}

/* What an applied member request does outside the store, run once its
 * batch is committed: a MemberChange kind (CETCDPB__MEMBER_CHANGE__KIND_*)
 * or EFFECT_PUBLISHED (this member's attributes are applied). */
#define EFFECT_PUBLISHED (-1)
struct server_ms_effect {
    int kind;
    uint64_t id;
    char urls[1024]; /* peer URLs, comma-separated */
};

/* Apply thread.  Grows with the batch's member requests: raft has one
 * conf change pending at a time, so a batch holds few (a WAL replay, at
 * most its batch). */
static int stage(struct server_ms *ms, const struct server_ms_effect *e)
{
    if (ms->n_staged == ms->staged_cap) {
        size_t cap = ms->staged_cap ? ms->staged_cap * 2 : 4;
        struct server_ms_effect *n =
            mem_realloc(ms->staged, cap * sizeof *n);
        if (n == NULL)
            return ERR_NOMEM;
        ms->staged = n;
        ms->staged_cap = cap;
    }
    ms->staged[ms->n_staged++] = *e;
    return 0;
}

/* etcd's zap lines for a membership change (membership/cluster.go). */
static void log_change_zap(struct server *s, int kind, uint64_t id,
                           const char *urls)
{
    switch (kind & 3) {
    case 0:
        log_zap(LOG_INFO, "added member", LOG_ID("cluster-id", s->cluster_id),
                LOG_ID("local-member-id", s->member_id),
                LOG_ID("added-peer-id", id),
                LOG_CSV("added-peer-peer-urls", urls));
        return;
    case 1:
        log_zap(LOG_INFO, "removed member",
                LOG_ID("cluster-id", s->cluster_id),
                LOG_ID("local-member-id", s->member_id),
                LOG_ID("removed-remote-peer-id", id),
                LOG_CSV("removed-remote-peer-urls", urls));
        return;
    case 2:
        log_zap(LOG_INFO, "updated member",
                LOG_ID("cluster-id", s->cluster_id),
                LOG_ID("local-member-id", s->member_id),
                LOG_ID("updated-remote-peer-id", id),
                LOG_CSV("updated-remote-peer-urls", urls));
        return;
    default:
        log_zap(LOG_INFO, "promote member",
                LOG_ID("cluster-id", s->cluster_id),
                LOG_ID("local-member-id", s->member_id));
        return;
    }
}

static void log_change(struct server *s, int kind, uint64_t id,
                       const char *urls)
{
    static const char *what[] = {"added", "removed", "updated", "promoted"};
    if (log_is_zap()) {
        log_change_zap(s, kind, id, urls);
        return;
    }
    log_info("membership", "%s member %016llx %s%s%s in cluster %016llx",
             what[kind & 3], (unsigned long long)id, *urls ? "[" : "", urls,
             *urls ? "]" : "", (unsigned long long)s->cluster_id);
}

static int apply_change(struct server *s, struct backend_txn *txn,
                        const Cetcdpb__MemberChange *c)
{
    struct server_ms *ms = s->ms;
    if (c->member == NULL)
        return 0;
    uint64_t id = c->member->id;
    char urls[1024];
    urls_join(urls, sizeof urls, c->member->peerurls, c->member->n_peerurls);
    int rc = 0;
    pthread_mutex_lock(&ms->mu);
    struct server_member_info *m = server__ms_find(ms, id);
    switch (c->kind) {
    case CETCDPB__MEMBER_CHANGE__KIND__ADD:
        if (m == NULL && !server__ms_is_removed(ms, id))
            m = server__ms_slot(ms, id);
        if (m != NULL) {
            snprintf(m->peer_urls, sizeof m->peer_urls, "%s", urls);
            m->is_learner = c->member->islearner;
        }
        break;
    case CETCDPB__MEMBER_CHANGE__KIND__REMOVE:
        ms_drop(ms, id);
        m = NULL;
        rc = record_remove(ms, txn, id);
        break;
    case CETCDPB__MEMBER_CHANGE__KIND__UPDATE:
        if (m != NULL)
            snprintf(m->peer_urls, sizeof m->peer_urls, "%s", urls);
        break;
    case CETCDPB__MEMBER_CHANGE__KIND__PROMOTE:
        if (m != NULL)
            m->is_learner = false;
        break;
    default:
        m = NULL;
        break;
    }
    if (m != NULL)
        rc = record_put(ms, txn, m);
    pthread_mutex_unlock(&ms->mu);
    if (rc != 0)
        return rc;
    struct server_ms_effect e = {.kind = c->kind, .id = id};
    snprintf(e.urls, sizeof e.urls, "%s", urls);
    return stage(ms, &e);
}

static int apply_attr(struct server *s, struct backend_txn *txn,
                      const Cetcdpb__MemberAttr *a)
{
    struct server_ms *ms = s->ms;
    int rc = 0;
    pthread_mutex_lock(&ms->mu);
    struct server_member_info *m = server__ms_find(ms, a->member_id);
    if (m != NULL) {
        snprintf(m->name, sizeof m->name, "%s", a->name ? a->name : "");
        urls_join(m->client_urls, sizeof m->client_urls, a->client_urls,
                  a->n_client_urls);
        rc = record_put(ms, txn, m);
    }
    pthread_mutex_unlock(&ms->mu);
    if (rc == 0 && a->member_id == s->member_id)
        rc = stage(ms, &(struct server_ms_effect){.kind = EFFECT_PUBLISHED});
    return rc;
}

/* etcd's attributes are Go's %+v of {Name ClientURLs}: the URLs
 * space-separated. */
static void log_published(struct server *s)
{
    const char *urls = s->cfg.client_urls ? s->cfg.client_urls : "";
    if (!log_is_zap()) {
        log_info("etcdserver", "published {Name:%s ClientURLs:[%s]} to "
                 "cluster %016llx", s->cfg.name, urls,
                 (unsigned long long)s->cluster_id);
        return;
    }
    char attrs[1200], path[64], *p;
    snprintf(attrs, sizeof attrs, "{Name:%s ClientURLs:[%s]}", s->cfg.name,
             urls);
    for (p = attrs; (p = strchr(p, ',')) != NULL;)
        *p = ' ';
    snprintf(path, sizeof path, "/0/members/%llx/attributes",
             (unsigned long long)s->member_id);
    log_zap(LOG_INFO, "published local member to cluster through raft",
            LOG_ID("local-member-id", s->member_id),
            LOG_STR("local-member-attributes", attrs),
            LOG_STR("request-path", path),
            LOG_ID("cluster-id", s->cluster_id),
            LOG_DUR_MS("publish-timeout", server__request_timeout_ms(s)));
}

static void effect_run(struct server *s, const struct server_ms_effect *e)
{
    struct server_ms *ms = s->ms;
    if (e->kind == EFFECT_PUBLISHED) {
        if (!atomic_exchange(&ms->published, true))
            log_published(s);
        return;
    }
    log_change(s, e->kind, e->id, e->urls);
    if (e->kind != CETCDPB__MEMBER_CHANGE__KIND__PROMOTE)
        transport_follow(s, e->kind, e->id, e->urls);
    if (e->kind == CETCDPB__MEMBER_CHANGE__KIND__REMOVE &&
        e->id == s->member_id) {
        log_warn("etcdserver", "the member has been permanently removed from "
                 "the cluster; the data-dir used by this member must be "
                 "removed");
        atomic_store(&ms->removed_self, true);
    }
}

/* Aborted: the table as the store has it.  The transport saw none of the
 * staged changes, so it is left alone (no transport_sync). */
static void table_reload(struct server *s)
{
    uint8_t meta[16];
    bool has_meta;
    pthread_mutex_lock(&s->ms->mu);
    int rc = load(s, meta, &has_meta);
    pthread_mutex_unlock(&s->ms->mu);
    CHECK(rc == 0); /* the store read it at start: a failure is a bug */
}

void server__members_batch_end(struct server *s, bool committed)
{
    struct server_ms *ms = s->ms;
    if (ms == NULL || ms->n_staged == 0)
        return;
    if (committed)
        for (size_t i = 0; i < ms->n_staged; i++)
            effect_run(s, &ms->staged[i]);
    else
        table_reload(s);
    ms->n_staged = 0;
}

int server__members_apply(struct server *s, struct mvcc_batch *b,
                          const Cetcdpb__InternalRequest *req)
{
    struct backend_txn *txn = mvcc_batch_backend_txn(b);
    CHECK(txn != NULL);
    if (req->request_case == CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR)
        return apply_attr(s, txn, req->member_attr);
    CHECK(req->request_case ==
           CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE);
    return apply_change(s, txn, req->member_change);
}

/* --- publishing -------------------------------------------------------- */

static void published(void *arg, const struct server_response *r)
{
    struct server *s = arg;
    /* Quiet when stopping (as etcd) or when another attempt succeeded. */
    if (r->err != 0 && r->err != ERR_STOPPED &&
        !atomic_load(&s->ms->published))
        log_warn("etcdserver", "failed to publish local member to cluster "
                 "through raft: %s", err_str(r->err));
    atomic_fetch_sub(&s->ms->publishing, 1);
}

/* --- removal ------------------------------------------------------------ */

bool server__member_id_removed(struct server *s, uint64_t id)
{
    if (s->ms == NULL)
        return false;
    pthread_mutex_lock(&s->ms->mu);
    bool removed = server__ms_is_removed(s->ms, id);
    pthread_mutex_unlock(&s->ms->mu);
    return removed;
}

void server__member_removed_by(struct server *s, uint64_t by)
{
    /* A removed member often never sees its removal commit: the others
     * stop sending to it once they apply it.  They refuse its streams as
     * removed instead (etcd answers 410 Gone), which lands here. */
    if (atomic_exchange(&s->ms->removed_self, true))
        return;
    log_warn("etcdserver", "the member has been permanently removed from "
             "the cluster (refused by member %016llx); the data-dir used "
             "by this member must be removed", (unsigned long long)by);
}

void server__members_house(struct server *s)
{
    struct server_ms *ms = s->ms;
    uint64_t now = server__clock_ms(s);
    if (atomic_load(&ms->published) ||
        atomic_load(&ms->publishing) >= PUBLISH_IN_FLIGHT_MAX ||
        atomic_load(&s->lead) == 0 || now < atomic_load(&ms->publish_at))
        return;
    atomic_store(&ms->publish_at, now + PUBLISH_RETRY_MS);
    char buf[1024];
    const char *urls[PEER_URLS_MAX * 2];
    snprintf(buf, sizeof buf, "%s", s->cfg.client_urls ? s->cfg.client_urls
                                                      : "");
    Cetcdpb__MemberAttr a = CETCDPB__MEMBER_ATTR__INIT;
    a.member_id = s->member_id;
    a.name = (char *)s->cfg.name;
    a.n_client_urls = server__urls_split(buf, urls, PEER_URLS_MAX * 2);
    a.client_urls = (char **)urls;
    Cetcdpb__InternalRequest req = CETCDPB__INTERNAL_REQUEST__INIT;
    req.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_ATTR;
    req.member_attr = &a;
    atomic_fetch_add(&ms->publishing, 1);
    server_propose(s, &req, published, s);
}
