/*
 * raft_open.c - the raft node's start: the WAL is opened (or created), and
 * raft is set up from it.  On a restart the LMDB store is the snapshot:
 * raft starts from a snapshot marker at the store's consistent index and
 * the WAL's entries after it; what the WAL says is committed is applied
 * before the threads run (catch_up).  Runs on the thread calling
 * server_start, before any other server thread exists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mvcc/mvcc.h"
#include "raft/raft.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

static void raft_logger(void *arg, int level, const char *line)
{
    (void)arg;
    static const enum log_level map[] = {LOG_DEBUG, LOG_INFO, LOG_WARN,
                                         LOG_ERROR};
    log_msg(map[level < 0 ? 0 : level > 3 ? 3 : level], "raft", "%s", line);
}

/* The WAL in --wal-dir or <member>/wal: opened when it exists, else
 * created with this member's ids. */
int server__wal_open(struct server *s)
{
    char dir[4200];
    if (s->cfg.wal_dir != NULL)
        snprintf(dir, sizeof dir, "%s", s->cfg.wal_dir);
    else
        snprintf(dir, sizeof dir, "%s/wal", s->member_dir);
    struct wal_options wo = {.no_fsync = s->cfg.unsafe_no_fsync,
                             .segments_keep = s->cfg.wal_segments_keep};
    /* Tests only: small segments of a fixed size show WAL release after
     * snapshots without writing 64 MB segments (etcd has no such flag
     * either).  Else segments are sized to the store (snap_raft.c
     * wal_budget), the first ones the smallest. */
    const char *seg = getenv("CETCD_TEST_WAL_SEGMENT_BYTES");
    if (seg != NULL)
        wo.segment_bytes = strtoull(seg, NULL, 10);
    s->wal_seg_fixed = seg != NULL;
    if (seg == NULL) /* sized to the store from its first pin on */
        wo.segment_bytes = WAL_SEGMENT_BYTES_STORE_MIN;
    s->wal_existed = wal_exists(dir);
    if (s->wal_existed)
        return wal_open(dir, &wo, &s->wal);
    int rc = fs_mkdir_p(dir);
    if (rc == 0)
        rc = wal_create(dir, &wo, s->member_id, s->cluster_id, &s->wal);
    return rc;
}

/* What the WAL replay gathers for raft_init. */
struct restore {
    struct raft_hard_state hs;  /* last HardState in the WAL */
    struct raft_entry *ents;    /* entries above the applied index */
    size_t n, cap;
    uint64_t applied;           /* the store's consistent index */
    uint64_t applied_term;      /* term of the entry at applied */
    uint64_t meta_id;           /* member id in the WAL */
};

static int r_meta(void *arg, uint64_t node_id, uint64_t cluster_id)
{
    (void)cluster_id;
    ((struct restore *)arg)->meta_id = node_id;
    return 0;
}

/* The WAL's snapshot marker at the applied index gives its term when the
 * entry itself is not in the WAL (a snapshot installed from the leader). */
static int r_snap(void *arg, const struct wal_snapshot *snap)
{
    struct restore *r = arg;
    if (snap->index == r->applied)
        r->applied_term = snap->term;
    return 0;
}

static int r_hs(void *arg, const struct wal_hardstate *hs)
{
    struct restore *r = arg;
    r->hs = (struct raft_hard_state){hs->term, hs->vote, hs->commit};
    return 0;
}

static int r_entry(void *arg, const struct wal_entry *e)
{
    struct restore *r = arg;
    if (e->index == r->applied)
        r->applied_term = e->term;
    if (e->index <= r->applied)
        return 0;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1024;
        void *p = mem_realloc(r->ents, cap * sizeof *r->ents);
        if (p == NULL)
            return ERR_NOMEM;
        r->ents = p;
        r->cap = cap;
    }
    uint8_t *d = e->len ? mem_dup(e->data, e->len) : NULL;
    if (e->len && d == NULL)
        return ERR_NOMEM;
    r->ents[r->n++] = (struct raft_entry){.term = e->term, .index = e->index,
                                          .type = (uint8_t)e->type,
                                          .len = (uint32_t)e->len, .data = d};
    return 0;
}

/* --force-new-cluster (force_new.c): r loses its uncommitted entries and
 * gains the conf changes that leave this member alone, committed. */
static int force_new(struct server *s, struct restore *r)
{
    struct raft_entry added[SERVER_FORCE_ENTRIES_MAX];
    size_t n_added = 0;
    int rc = server__force_new_cluster(s, &r->hs, r->ents, &r->n, added,
                                       &n_added);
    for (size_t i = 0; i < n_added; i++) {
        struct wal_entry w = {.index = added[i].index,
                              .term = added[i].term, .type = added[i].type,
                              .data = added[i].data, .len = added[i].len};
        if (rc == 0)
            rc = r_entry(r, &w); /* copies */
        mem_free(added[i].data);
    }
    return rc;
}

static void restore_free(struct restore *r)
{
    for (size_t i = 0; i < r->n; i++)
        mem_free(r->ents[i].data);
    mem_free(r->ents);
}

static void fill_conf(struct server *s, struct raft_config *c)
{
    server__members_conf(s, &c->conf); /* members.c: voters, learners */
}

static int raft_start(struct server *s, struct restore *r)
{
    struct raft_config c;
    memset(&c, 0, sizeof c);
    c.id = s->member_id;
    c.heartbeat_tick = 1;
    c.election_tick = (int)(s->cfg.election_ms / s->cfg.heartbeat_ms);
    c.pre_vote = s->cfg.pre_vote;
    c.check_quorum = true;
    c.max_size_per_msg = 1u << 20;
    c.max_inflight_msgs = 512;
    c.read_only = RAFT_READ_ONLY_SAFE;
    c.seed = s->member_id ^ server__clock_ms(s);
    c.logger = raft_logger;
    fill_conf(s, &c);
    c.hard_state = r->hs;
    if (r->applied > 0) {
        c.snapshot.meta.index = r->applied;
        c.snapshot.meta.term = r->applied_term;
        c.snapshot.meta.conf = c.conf;
    }
    c.entries = r->ents;
    c.n_entries = r->n;
    c.applied = r->applied;
    s->node.raft = mem_malloc(raft_sizeof());
    if (s->node.raft == NULL)
        return ERR_NOMEM;
    int rc = raft_init(s->node.raft, &c);
    if (rc != 0) {
        mem_free(s->node.raft);
        s->node.raft = NULL;
        return rc;
    }
    s->node.applied_raft = r->applied;
    s->node.snap_index = r->applied;
    atomic_store(&s->applied_index, r->applied); /* the store holds it */
    return 0;
}

/* Before serving, apply what the WAL says is committed (the threads are
 * not running yet, so the batches are applied here, in order). */
static int catch_up(struct server *s)
{
    struct server_wal_buf wb = {NULL, 0};
    int rc = server__raft_ready(s, &wb);
    server__wal_buf_free(&wb);
    return rc;
}

int server__raft_open(struct server *s)
{
    struct restore r;
    memset(&r, 0, sizeof r);
    r.applied = mvcc_consistent_index(s->mvcc);
    struct wal_replay_cb cb = {.on_metadata = r_meta,
                               .on_hardstate = r_hs,
                               .on_entry = r_entry};
    /* The applied index's term: a snapshot marker there is authoritative
     * (after an install the WAL may even hold a stale entry at that index
     * from an older term); else the entry itself, read from one below. */
    struct wal_snapshot from = {r.applied, 0};
    cb.on_snapshot = r_snap;
    int rc = wal_replay(s->wal, &from, &cb, &r);
    if (rc == 0 && r.applied > 0 && r.applied_term == 0) {
        restore_free(&r);
        uint64_t applied = r.applied;
        memset(&r, 0, sizeof r);
        r.applied = applied;
        from.index = applied - 1;
        cb.on_snapshot = NULL;
        rc = wal_replay(s->wal, &from, &cb, &r);
    }
    if (rc == 0 && r.applied > 0 && r.applied_term == 0) {
        log_error("etcdserver", "the WAL does not hold the store's applied "
                  "index %llu", (unsigned long long)r.applied);
        rc = ERR_CORRUPT;
    }
    if (rc == 0 && r.hs.commit < r.applied)
        r.hs.commit = r.applied;
    bool forced = rc == 0 && s->cfg.force_new_cluster && s->wal_existed;
    if (forced)
        rc = force_new(s, &r);
    if (rc == 0 && log_is_zap() && (r.hs.term > 0 || r.applied > 0))
        log_zap(LOG_INFO, "restarting local member",
                LOG_ID("cluster-id", s->cluster_id),
                LOG_ID("local-member-id", s->member_id),
                LOG_UINT("commit-index", r.hs.commit));
    else if (rc == 0 && log_is_zap())
        log_zap(LOG_INFO, "starting local member",
                LOG_ID("local-member-id", s->member_id),
                LOG_ID("cluster-id", s->cluster_id));
    if (rc == 0)
        rc = raft_start(s, &r);
    if (rc == 0 && r.n > 0 && !log_is_zap())
        log_info("etcdserver", "restarting member %016llx: %zu WAL entries "
                 "above applied index %llu (commit %llu, term %llu)",
                 (unsigned long long)s->member_id, r.n,
                 (unsigned long long)r.applied,
                 (unsigned long long)r.hs.commit,
                 (unsigned long long)r.hs.term);
    restore_free(&r);
    if (rc == 0)
        server__lone_voter_update(s);
    /* A lone voter need not wait an election timeout (etcd fast-forwards
     * its ticks the same way). */
    if (rc == 0 && atomic_load(&s->lone_voter))
        rc = raft_campaign(s->node.raft);
    if (rc == 0)
        rc = catch_up(s);
    /* Conf changes applied by the catch-up changed the members table:
     * the transport (not open yet) starts from the table as it is now. */
    if (rc == 0)
        rc = server__members_reload(s, true);
    /* Forced: alone now, so elected at once (raft_pass runs the Ready). */
    if (rc == 0 && forced && atomic_load(&s->lone_voter))
        rc = raft_campaign(s->node.raft);
    if (rc == 0 && forced)
        rc = catch_up(s);
    return rc;
}

void server__raft_close(struct server *s)
{
    if (s->node.raft != NULL) {
        raft_close(s->node.raft);
        mem_free(s->node.raft);
        s->node.raft = NULL;
    }
}
