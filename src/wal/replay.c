/*
 * replay.c - wal_replay: read every segment again, rebuild the final raft
 * log above the caller's snapshot (applying log truncation: an entry at an
 * index <= the last one replaces the tail), and deliver it with the
 * metadata, the snapshot marker and the last HardState.
 */
#include <string.h>

#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal_int.h"

/* The log being rebuilt; entries own copies of their data. */
struct replay_ctx {
    struct wal_snapshot from;  /* deliver entries above from.index */
    bool has_hs;               /* hs is valid */
    struct wal_hardstate hs;   /* last HardState */
    bool has_snap;             /* snap is valid */
    struct wal_snapshot snap;  /* latest marker with index <= from.index */
    uint64_t last;             /* last index of the log so far */
    bool any_entry;            /* an entry has been seen */
    struct wal_entry *ents;    /* the log above from.index, contiguous */
    size_t n;                  /* entries in ents */
    size_t cap;                /* capacity of ents */
};

static void ents_truncate(struct replay_ctx *c, uint64_t index)
{
    while (c->n > 0 && c->ents[c->n - 1].index >= index) {
        c->n--;
        mem_free((void *)c->ents[c->n].data);
    }
}

static int ents_push(struct replay_ctx *c, const struct wal__rec *rec,
                     uint64_t index)
{
    struct wal_entry *p = mem_grow(c->ents, &c->cap, c->n, sizeof *p, 256);
    if (p == NULL)
        return ERR_NOMEM;
    c->ents = p;
    struct wal_entry *e = &c->ents[c->n];
    e->index = index;
    e->term = wal__get64(rec->payload + 8);
    e->type = wal__get32(rec->payload + 16);
    e->len = rec->len - WAL__ENTRY_FIXED_BYTES;
    e->data = NULL;
    if (e->len > 0) {
        e->data = mem_dup(rec->payload + WAL__ENTRY_FIXED_BYTES, e->len);
        if (e->data == NULL)
            return ERR_NOMEM;
    }
    c->n++;
    return 0;
}

static int visit_entry(struct replay_ctx *c, const struct wal__rec *rec,
                       const char **why)
{
    uint64_t index = wal__get64(rec->payload);
    if (index == 0 || (c->any_entry && index > c->last + 1)) {
        *why = "gap in entry indexes";
        return ERR_CORRUPT;
    }
    c->any_entry = true;
    c->last = index;
    ents_truncate(c, index);
    if (index <= c->from.index)
        return 0;
    if (c->n == 0 && index != c->from.index + 1) {
        *why = "entries above the snapshot are missing";
        return ERR_WAL_GAP;
    }
    WAL_ASSERT(c->n == 0 || c->ents[c->n - 1].index + 1 == index);
    return ents_push(c, rec, index);
}

static int replay_visit(void *arg, const struct wal__rec *rec,
                        const char **why)
{
    struct replay_ctx *c = arg;
    const unsigned char *p = rec->payload;
    struct wal_snapshot s;
    switch (rec->type) {
    case WAL__REC_ENTRY:
        return visit_entry(c, rec, why);
    case WAL__REC_HARDSTATE:
        c->hs = (struct wal_hardstate){wal__get64(p), wal__get64(p + 8),
                                       wal__get64(p + 16)};
        c->has_hs = true;
        return 0;
    case WAL__REC_SNAPSHOT:
        s = (struct wal_snapshot){wal__get64(p), wal__get64(p + 8)};
        if (s.index <= c->from.index && (!c->has_snap ||
                                         s.index >= c->snap.index)) {
            c->snap = s;
            c->has_snap = true;
        }
        if (s.index > c->last) {
            /* The log jumps to a snapshot (installed from the leader). */
            c->last = s.index;
            ents_truncate(c, 0);
        }
        return 0;
    default:
        return 0; /* CRC and METADATA were checked by the scan / open */
    }
}

/* replay_segs scans every segment into c. */
static int replay_segs(struct wal *w, struct replay_ctx *c)
{
    uint32_t crc = 0;
    c->last = w->segs[0].first_index - (w->segs[0].first_index > 0);
    for (size_t i = 0; i < w->nsegs; i++) {
        const struct wal__seg *seg = &w->segs[i];
        char name[WAL__NAME_BYTES];
        wal__seg_name(name, seg->seq, seg->first_index);
        /* Open checked each segment whole: its records end at .end (the
         * tail's at the write offset), and only zeros follow. */
        uint64_t end = i + 1 == w->nsegs ? w->offset : seg->end;
        size_t size;
        int rv = wal__seg_read(w->dir_fd, name, end, &w->buf, &w->buf_cap,
                               &size);
        if (rv != 0)
            return rv;
        struct wal__scan sc;
        rv = wal__segment_scan(w->buf, size, crc, i > 0, replay_visit, c, &sc);
        if (rv == 0 && (sc.damage != 0 || sc.nrecords < 2))
            rv = ERR_CORRUPT;
        if (rv == ERR_WAL_GAP)
            log_error("wal", "%s/%s: entries above snapshot index %llu are "
                      "missing (released, or a stale snapshot was given)",
                      w->dir, name, (unsigned long long)c->from.index);
        if (rv == ERR_CORRUPT)
            wal__log_corrupt(w, seg->seq, seg->first_index,
                             sc.damage != 0 ? sc.damage_off : sc.end,
                             sc.why ? sc.why : "segment head missing");
        if (rv != 0)
            return rv;
        crc = sc.crc;
    }
    return 0;
}

static int deliver(const struct wal *w, const struct replay_ctx *c,
                   const struct wal_replay_cb *cb, void *arg)
{
    int rv = 0;
    if (cb->on_metadata != NULL)
        rv = cb->on_metadata(arg, w->node_id, w->cluster_id);
    if (rv == 0 && c->has_snap && cb->on_snapshot != NULL)
        rv = cb->on_snapshot(arg, &c->snap);
    if (rv == 0 && c->has_hs && cb->on_hardstate != NULL)
        rv = cb->on_hardstate(arg, &c->hs);
    for (size_t i = 0; rv == 0 && i < c->n && cb->on_entry != NULL; i++)
        rv = cb->on_entry(arg, &c->ents[i]);
    return rv;
}

int wal_replay(struct wal *wal, const struct wal_snapshot *from_snap,
               const struct wal_replay_cb *cb, void *arg)
{
    WAL_ASSERT(wal != NULL && cb != NULL);
    WAL_ASSERT(wal->nsegs >= 1);
    struct replay_ctx c;
    memset(&c, 0, sizeof c);
    if (from_snap != NULL)
        c.from = *from_snap;
    int rv = replay_segs(wal, &c);
    if (rv == 0)
        rv = deliver(wal, &c, cb, arg);
    WAL_ASSERT(c.n == 0 || c.ents[0].index == c.from.index + 1);
    ents_truncate(&c, 0);
    mem_free(c.ents);
    return rv;
}
