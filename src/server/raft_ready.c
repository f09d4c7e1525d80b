/*
 * raft_ready.c - one Ready of raft.h's contract, run by the raft-pass
 * holder (raft_mu held: the raft thread, or a thread running an inline
 * pass, see server.h "Execution contexts and lock order"):
 *   install a snapshot -> (a leader) send -> persist entries + HardState
 *   to the WAL with ONE fdatasync (group commit) -> (others) send -> hand
 *   committed entries to the applier -> answer read states -> advance.
 * A lone voter's new entries may go to the applier while their fsync runs
 * (the speculative apply, apply.c).
 */
#include <stdio.h>
#include <string.h>

#include "raft/raft.h"
#include "server/boot_guard.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal.h"

/* --- the loop ---------------------------------------------------------- */

void server__wal_buf_free(struct server_wal_buf *wb)
{
    mem_free(wb->v);
    wb->v = NULL;
    wb->cap = 0;
}

/* Writes rd's entries and HardState to the WAL (not yet synced). */
static int persist_append(struct server *s, const struct raft_ready *rd,
                          struct server_wal_buf *wb)
{
    if (rd->n_entries > wb->cap) {
        size_t cap = rd->n_entries * 2;
        void *p = mem_realloc(wb->v, cap * sizeof *wb->v);
        if (p == NULL)
            return ERR_NOMEM;
        wb->v = p;
        wb->cap = cap;
    }
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *e = &rd->entries[i];
        wb->v[i] = (struct wal_entry){.index = e->index, .term = e->term,
                                      .type = e->type, .data = e->data,
                                      .len = e->len};
    }
    struct wal_hardstate hs = {rd->hard_state.term, rd->hard_state.vote,
                               rd->hard_state.commit};
    return wal_append(s->wal, rd->has_hard_state ? &hs : NULL, wb->v,
                      rd->n_entries);
}

static int persist_sync(struct server *s, const struct raft_ready *rd)
{
    if (!rd->must_sync)
        return 0;
    atomic_fetch_add(&s->stat_wal_syncs, 1);
    return wal_sync(s->wal);
}

/* A server entry (for the applier) holding len bytes of src. */
static struct server_entry *entry_new(uint64_t index, const uint8_t *src,
                                      size_t len)
{
    struct server_entry *x = mem_malloc(sizeof *x + len);
    if (x == NULL)
        return NULL;
    x->next = NULL;
    x->index = index;
    x->id = 0;
    x->len = len;
    x->tentative = false;
    if (len)
        memcpy(x->data, src, len);
    return x;
}

/* s->lone_voter := raft's configuration has this member as its only voter
 * (not joint).  Called whenever the configuration may have changed: at
 * start, after a conf change is applied, after a snapshot is installed. */
void server__lone_voter_update(struct server *s)
{
    struct raft_status st;
    raft_status(s->node.raft, &st);
    atomic_store(&s->lone_voter, st.conf.n_voters == 1 &&
                                     st.conf.voters[0] == s->member_id &&
                                     st.conf.n_voters_outgoing == 0);
}

/* Reads the varint at p[*i..n) into *v and moves *i past it; false when
 * it does not end within n bytes or 64 bits. */
static bool varint_at(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int sh = 0; *i < n && sh <= 63; sh += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << sh;
        if ((b & 0x80) == 0)
            return true;
    }
    return false;
}

bool server__entry_compacts(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint64_t tag, v;
        if (!varint_at(p, n, &i, &tag))
            return true;
        switch (tag & 7) {
        case 0: /* varint */
            if (!varint_at(p, n, &i, &v))
                return true;
            break;
        case 1: i += 8; break;
        case 5: i += 4; break;
        case 2: /* length-delimited: field 6 is the Compaction */
            if (tag >> 3 == 6 || !varint_at(p, n, &i, &v) || v > n - i)
                return true;
            i += (size_t)v;
            break;
        default:
            return true;
        }
    }
    return i != n;
}

/* May rd's new entries be applied while their fsync runs (apply.c,
 * "Speculative apply")?  Only when this member is the only voter (its own
 * fsync commits them and no other leader can replace them), no conf change
 * is among them or committed with them (the voters could change before
 * they commit), no compaction is among them (a tentative batch may not
 * delete what its pinned readers see, so a physical compaction there could
 * not be done before its answer: apply_kv.c do_compact), and no tentative
 * batch is out. */
static bool may_speculate(struct server *s, const struct raft_ready *rd)
{
    if (!s->spec_ok || !s->node.is_leader || rd->n_entries == 0 ||
        rd->n_committed != 0 || rd->snapshot != NULL || !rd->must_sync)
        return false;
    for (size_t i = 0; i < rd->n_entries; i++)
        if (rd->entries[i].type != RAFT_ENTRY_NORMAL ||
            server__entry_compacts(rd->entries[i].data, rd->entries[i].len))
            return false;
    return atomic_load(&s->lone_voter) && server__spec_last(s) == 0;
}

/* Hands rd's (unsynced) entries to the applier as a tentative batch;
 * false if it did not take them. */
static bool speculate(struct server *s, const struct raft_ready *rd)
{
    struct server_entry *head = NULL, *tail = NULL;
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *e = &rd->entries[i];
        struct server_entry *x = entry_new(e->index, e->data, e->len);
        if (x == NULL)
            goto err_free;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
    }
    if (server__spec_begin(s, head, tail, rd->n_entries))
        return true;
err_free:
    while (head != NULL) {
        struct server_entry *n = head->next;
        mem_free(head);
        head = n;
    }
    return false;
}

/* Committed entries become server entries for the applier.  Conf changes
 * take effect in raft here (the applier only records the index). */
static int hand_committed(struct server *s, const struct raft_ready *rd)
{
    struct server_entry *head = NULL, *tail = NULL;
    size_t n = 0;
    uint64_t spec_last = server__spec_last(s);
    for (size_t i = 0; i < rd->n_committed; i++) {
        const struct raft_entry *e = &rd->committed[i];
        if (e->index <= spec_last) {
            /* Applied already as a tentative batch. */
            if (e->index == spec_last)
                server__spec_durable(s);
            s->node.applied_raft = e->index;
            atomic_store(&s->committed_index, e->index);
            continue;
        }
        bool normal = e->type == RAFT_ENTRY_NORMAL;
        const uint8_t *src = e->data;
        size_t len = e->len;
        /* A conf change takes effect in raft here; the applier gets its
         * context (the members store change), see members.c. */
        if (!normal) {
            server__conf_change_committed(s, e, &src, &len);
            server__lone_voter_update(s);
        }
        struct server_entry *x = entry_new(e->index, src, len);
        if (x == NULL)
            return ERR_NOMEM;
        n++;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
    }
    if (head != NULL) {
        s->node.applied_raft = tail->index;
        atomic_store(&s->committed_index, tail->index);
        server__apply_handoff(s, head, tail, n);
    }
    return 0;
}

/* Messages to peers, through the transport.  A snapshot goes out later,
 * with a copy of the store, through snapshot.c. */
static void send_msgs(struct server *s, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_msgs; i++) {
        const struct raft_msg *m = &rd->msgs[i];
        if (m->type == RAFT_MSG_SNAP) {
            server__snap_want_send(s, m); /* a store copy: snapshot.c */
        } else if (s->node.send_fn != NULL) {
            s->node.send_fn(s->node.send_arg, m);
        }
    }
}

/* This member saw a new leader (after this Ready's read states were
 * answered): the ReadIndex rounds still pending were asked of a leader
 * that is gone, and fail with etcd's retryable "leader changed" (reads
 * not yet asked join the next round).  When the new leader is this
 * member, the time is kept for server__timeout_err. */
static void leader_changed(struct server *s)
{
    atomic_fetch_add(&s->stat_leader_changes, 1);
    if (s->node.is_leader)
        atomic_store(&s->lead_elected_ms, server__clock_ms(s));
    server__reads_fail_inflight(s, ERR_LEADER_CHANGED);
}

/*
 * Held.  On a full disk the WAL refuses a write past a put-off segment
 * cut with nothing written (wal.h, ERR_NOSPC and not broken).  Such a
 * Ready is kept and written again every HELD_RETRY_MS; until then this
 * member takes no part in raft: raft refuses every other call between a
 * Ready and its advance, so it neither ticks (no campaign), nor steps
 * (no vote, no acknowledgement it could not keep), nor proposes
 * (proposals are refused as on a full store).  The others go on without
 * it and it catches up once space is freed.  etcd stops the member on any
 * WAL write error; a write that fails midway still does here.
 */
#define HELD_RETRY_MS 100

/* Writes and syncs h's Ready, then sends, applies and advances it.  A
 * Ready the WAL has no room for stays held (0 returned). */
static int ready_finish(struct server *s, struct server_held_ready *h,
                        struct server_wal_buf *wb)
{
    struct raft_ready *rd = &h->rd;
    int rc = persist_append(s, rd, wb);
    if (rc == ERR_NOSPC && !wal_broken(s->wal)) {
        if (!h->held)
            log_error("etcdserver", "no space left to write the raft log "
                      "(WAL); this member takes no part in raft until space "
                      "is freed (writing again every %d ms)", HELD_RETRY_MS);
        h->held = true;
        h->retry_ms = server__clock_ms(s) + HELD_RETRY_MS;
        return 0;
    }
    if (h->held && rc == 0)
        log_info("etcdserver", "the raft log has room again; this member "
                 "takes part in raft again");
    h->held = false;
    bool spec = rc == 0 && may_speculate(s, rd) && speculate(s, rd);
    if (rc == 0)
        rc = persist_sync(s, rd);
    if (rc != 0) {
        /* A tentative batch may be in the store but not in the WAL. */
        if (spec) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/db", s->member_dir);
            (void)boot_guard_distrust(dir);
        }
        return rc;
    }
    if (!h->early)
        send_msgs(s, rd);
    rc = h->apply_first ? 0 : hand_committed(s, rd);
    if (rc != 0)
        return rc;
    server__reads_answer(s, rd);
    if (h->new_lead)
        leader_changed(s);
    if (rd->has_hard_state)
        atomic_store(&s->term, rd->hard_state.term);
    return raft_advance(s->node.raft, rd);
}

/* raft's node.go lines on a change of leader (etcd logs them from its
 * raft node, in both loggers). */
static void log_leader(struct server *s, const struct raft_ready *rd)
{
    uint64_t was = atomic_load(&s->lead), lead = rd->soft_state.lead;
    unsigned long long term = rd->has_hard_state ? rd->hard_state.term
                                                 : atomic_load(&s->term);
    if (lead == was)
        return;
    if (lead == 0)
        log_info("raft", "raft.node: %llx lost leader %llx at term %llu",
                 (unsigned long long)s->member_id, (unsigned long long)was,
                 term);
    else if (was == 0)
        log_info("raft", "raft.node: %llx elected leader %llx at term %llu",
                 (unsigned long long)s->member_id, (unsigned long long)lead,
                 term);
    else
        log_info("raft", "raft.node: %llx changed leader from %llx to %llx "
                 "at term %llu", (unsigned long long)s->member_id,
                 (unsigned long long)was, (unsigned long long)lead, term);
}

/* A new lessor epoch, with the index its lessor waits to have applied
 * before it is promoted (the empty entry of the new term is in the log
 * already: raft appends it on becoming leader). */
static void lead_epoch_bump(struct server *s)
{
    struct raft_status st;
    raft_status(s->node.raft, &st);
    CHECK(st.last_index > 0);
    atomic_store(&s->lead_index, st.last_index);
    atomic_fetch_add(&s->lead_epoch, 1);
}

/* Takes the next Ready: installs its snapshot, records the leader, and
 * (a leader) sends its messages and (nothing to sync) hands its committed
 * entries before the write. */
static int ready_begin(struct server *s, struct server_held_ready *h)
{
    struct raft_ready *rd = &h->rd;
    int rc = raft_ready(s->node.raft, rd);
    if (rc == 0)
        rc = rd->snapshot ? server__snap_install(s, rd->snapshot) : 0;
    if (rc == 0 && rd->snapshot)
        server__lone_voter_update(s);
    /* A new leader (not "none"), as etcd's newLeader. */
    h->new_lead = rd->has_soft_state && rd->soft_state.lead != 0 &&
                  rd->soft_state.lead != atomic_load(&s->lead);
    if (rd->has_soft_state) {
        bool was = s->node.is_leader;
        s->node.is_leader = rd->soft_state.role == RAFT_LEADER;
        if (s->node.is_leader && !was) /* a new lessor epoch */
            lead_epoch_bump(s);
        log_leader(s, rd);
        atomic_store(&s->lead, rd->soft_state.lead);
    }
    /* A leader replicates while it writes its own disk (Raft thesis
     * 10.2.1, as etcd does): its entries count toward commit only after
     * raft_advance.  Other members' messages (votes, append acks)
     * promise persisted state, so they leave after the fsync. */
    h->early = s->node.is_leader;
    if (rc == 0 && h->early)
        send_msgs(s, rd);
    /* Committed entries are durable already; when all this Ready has
     * to write is an unsynced HardState (a commit index), answer them
     * first: the write does not delay their replies. */
    h->apply_first = rc == 0 && rd->n_entries == 0 && !rd->must_sync;
    if (h->apply_first)
        rc = hand_committed(s, rd);
    return rc;
}

bool server__raft_held(const struct server *s)
{
    return s->node.held.held;
}

int server__raft_ready(struct server *s, struct server_wal_buf *wb)
{
    struct server_held_ready *h = &s->node.held;
    if (h->held) {
        if (server__clock_ms(s) < h->retry_ms)
            return 0;
        int rc = ready_finish(s, h, wb);
        if (rc != 0 || h->held)
            return rc;
    }
    while (raft_has_ready(s->node.raft)) {
        int rc = ready_begin(s, h);
        if (rc == 0)
            rc = ready_finish(s, h, wb);
        if (rc != 0 || h->held)
            return rc;
    }
    return 0;
}
