/*
 * force_new.c - --force-new-cluster: restart a member from its data as a
 * one-member cluster (etcd's restartAsStandaloneNode, learned from its
 * behaviour).  Runs once in server__raft_open, on the thread calling
 * server_start, before any other server thread exists, and only when the
 * member had a WAL (a member without data ignores the flag, as etcd).
 *
 * What it does to the raft log read from the WAL:
 *   1. the entries past the WAL's commit index are dropped (nobody may have
 *      acknowledged them; logged as etcd: "discarding N uncommitted WAL
 *      entries");
 *   2. the members raft knows at the commit index are computed: the store's
 *      members table (raft's configuration at the applied index) updated by
 *      the conf changes among the committed entries above it;
 *   3. one conf change entry per other member removes it (and, if this
 *      member is not among them, one first adds it), at the last term, at
 *      commit + 1, ...; their context is the InternalRequest the members
 *      store applies, as for a MemberRemove;
 *   4. they are written to the WAL with a HardState whose commit is the last
 *      of them, and synced, before raft starts: they are committed by this
 *      member's say alone, which is what forcing means.
 * Raft then starts as usual on the WAL's entries; applying the new entries
 * removes the members from raft and from the members store, so the cluster
 * id, the data and the revisions stay, and a later restart without the
 * flag finds a one-member cluster in the WAL and the store.
 *
 * Difference from etcd 3.4.23: etcd computes the members from the
 * snapshot's voters only, so a learner of the old cluster stays a learner
 * of the "one-member" cluster; here learners are removed too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cetcdpb/internal.pb-c.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

/* The member ids raft knows, voters and learners alike. */
struct id_set {
    uint64_t id[2 * RAFT_MAX_MEMBERS];
    size_t n;
};

static bool set_has(const struct id_set *set, uint64_t id)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->id[i] == id)
            return true;
    return false;
}

static void set_add(struct id_set *set, uint64_t id)
{
    if (id != 0 && !set_has(set, id) &&
        set->n < sizeof set->id / sizeof set->id[0])
        set->id[set->n++] = id;
}

static void set_del(struct id_set *set, uint64_t id)
{
    for (size_t i = 0; i < set->n; i++)
        if (set->id[i] == id) {
            set->id[i] = set->id[--set->n];
            return;
        }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The members at the commit index: the store's table, then the committed
 * conf changes of ents (all of them are committed by now). */
static int ids_at_commit(struct server *s, const struct raft_entry *ents,
                         size_t n, struct id_set *set)
{
    struct raft_conf_state cs;
    server__members_conf(s, &cs);
    memset(set, 0, sizeof *set);
    for (size_t i = 0; i < cs.n_voters; i++)
        set_add(set, cs.voters[i]);
    for (size_t i = 0; i < cs.n_learners; i++)
        set_add(set, cs.learners[i]);
    for (size_t i = 0; i < n; i++) {
        if (ents[i].type == RAFT_ENTRY_NORMAL)
            continue;
        struct raft_conf_change cc;
        if (raft_conf_change_decode(ents[i].data, ents[i].len, &cc) != 0) {
            log_error("etcdserver", "cannot decode the conf change at %llu",
                      (unsigned long long)ents[i].index);
            return ERR_CORRUPT;
        }
        for (uint32_t k = 0; k < cc.n_changes; k++) {
            const struct raft_cc_single *c = &cc.changes[k];
            if (c->type == RAFT_CC_REMOVE_NODE)
                set_del(set, c->node_id);
            else if (c->type != RAFT_CC_UPDATE_NODE)
                set_add(set, c->node_id);
        }
    }
    qsort(set->id, set->n, sizeof set->id[0], cmp_u64);
    return 0;
}

/* A conf change entry at index/term: type for id, with the members store's
 * InternalRequest (kind, member {id, peer_url}) as its context.  e->data is
 * allocated (mem_free). */
static int cc_entry(uint8_t type, int kind, uint64_t id, const char *peer_url,
                    uint64_t index, uint64_t term, struct raft_entry *e)
{
    char *urls[1] = {(char *)peer_url};
    Etcdserverpb__Member m = ETCDSERVERPB__MEMBER__INIT;
    m.id = id;
    m.n_peerurls = peer_url != NULL ? 1 : 0;
    m.peerurls = urls;
    Cetcdpb__MemberChange mc = CETCDPB__MEMBER_CHANGE__INIT;
    mc.kind = kind;
    mc.member = &m;
    Cetcdpb__InternalRequest req = CETCDPB__INTERNAL_REQUEST__INIT;
    req.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_MEMBER_CHANGE;
    req.member_change = &mc; /* id 0: no waiter anywhere */
    uint8_t ctx[1024];
    size_t ctx_len = cetcdpb__internal_request__get_packed_size(&req);
    if (ctx_len > sizeof ctx)
        return ERR_TOO_LARGE;
    cetcdpb__internal_request__pack(&req, ctx);
    struct raft_conf_change cc;
    memset(&cc, 0, sizeof cc);
    cc.n_changes = 1;
    cc.changes[0] = (struct raft_cc_single){type, id};
    cc.ctx = ctx;
    cc.ctx_len = ctx_len;
    size_t cap = raft_conf_change_encoded_size(&cc), len = 0;
    uint8_t *d = mem_malloc(cap);
    if (d == NULL)
        return ERR_NOMEM;
    int rc = raft_conf_change_encode(&cc, d, cap, &len);
    if (rc != 0) {
        mem_free(d);
        return rc;
    }
    *e = (struct raft_entry){.term = term, .index = index,
                             .type = RAFT_ENTRY_CONF_CHANGE,
                             .len = (uint32_t)len, .data = d};
    return 0;
}

/* This member's first advertised peer URL (for the add, which etcd makes
 * with http://localhost:2380). */
static const char *own_peer_url(const struct server *s, char *buf, size_t cap)
{
    const char *u = s->cfg.peer_urls;
    if (u == NULL || *u == '\0')
        return "http://localhost:2380";
    snprintf(buf, cap, "%s", u);
    char *comma = strchr(buf, ',');
    if (comma != NULL)
        *comma = '\0';
    return buf;
}

/* The entries that leave this member alone: add it if missing, then
 * remove every other one (raft must never be left without a voter). */
static int make_entries(struct server *s, const struct id_set *set,
                        uint64_t term, uint64_t commit,
                        struct raft_entry *out, size_t *n_out)
{
    size_t n = 0;
    uint64_t next = commit + 1;
    int rc = 0;
    char url[1024];
    if (!set_has(set, s->member_id))
        rc = cc_entry(RAFT_CC_ADD_NODE, CETCDPB__MEMBER_CHANGE__KIND__ADD,
                      s->member_id, own_peer_url(s, url, sizeof url), next++,
                      term, &out[n++]);
    for (size_t i = 0; rc == 0 && i < set->n; i++) {
        if (set->id[i] == s->member_id)
            continue;
        rc = cc_entry(RAFT_CC_REMOVE_NODE,
                      CETCDPB__MEMBER_CHANGE__KIND__REMOVE, set->id[i], NULL,
                      next++, term, &out[n++]);
    }
    if (rc != 0) {
        n--; /* the failed one holds nothing */
        for (size_t i = 0; i < n; i++)
            mem_free(out[i].data);
        return rc;
    }
    *n_out = n;
    return 0;
}

/* The new entries and a HardState committing them, durable before raft
 * starts. */
static int persist(struct server *s, const struct raft_hard_state *hs,
                   const struct raft_entry *ents, size_t n)
{
    struct wal_entry w[SERVER_FORCE_ENTRIES_MAX];
    CHECK(n <= sizeof w / sizeof w[0]);
    for (size_t i = 0; i < n; i++)
        w[i] = (struct wal_entry){.index = ents[i].index,
                                  .term = ents[i].term, .type = ents[i].type,
                                  .data = ents[i].data, .len = ents[i].len};
    struct wal_hardstate whs = {hs->term, hs->vote, hs->commit};
    int rc = wal_append(s->wal, &whs, w, n);
    return rc == 0 ? wal_sync(s->wal) : rc;
}

int server__force_new_cluster(struct server *s, struct raft_hard_state *hs,
                              struct raft_entry *ents, size_t *n,
                              struct raft_entry *added, size_t *n_added)
{
    CHECK(s->wal != NULL && hs != NULL && n != NULL && n_added != NULL);
    size_t keep = 0;
    while (keep < *n && ents[keep].index <= hs->commit)
        keep++;
    if (keep < *n)
        log_info("etcdserver", "discarding %zu uncommitted WAL entries",
                 *n - keep);
    for (size_t i = keep; i < *n; i++)
        mem_free(ents[i].data);
    *n = keep;
    struct id_set set;
    int rc = ids_at_commit(s, ents, keep, &set);
    if (rc == 0)
        rc = make_entries(s, &set, hs->term, hs->commit, added, n_added);
    if (rc != 0)
        return rc;
    if (*n_added > 0)
        hs->commit = added[*n_added - 1].index;
    rc = *n_added > 0 ? persist(s, hs, added, *n_added) : 0;
    if (rc != 0) {
        for (size_t i = 0; i < *n_added; i++)
            mem_free(added[i].data);
        *n_added = 0;
        return rc;
    }
    log_info("etcdserver", "forcing restart of member %016llx in cluster "
             "%016llx at commit index %llu",
             (unsigned long long)s->member_id,
             (unsigned long long)s->cluster_id,
             (unsigned long long)hs->commit);
    CHECK(*n_added <= SERVER_FORCE_ENTRIES_MAX);
    return 0;
}
