/*
 * open.c - opening an existing WAL: list the segments, check every record
 * of every segment, repair a torn tail of the last segment, refuse any other
 * damage (see "DAMAGE" in record.c), and position the writer after the last
 * valid record.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "wal/wal_int.h"

/* State carried across the records of all segments while opening. */
struct open_ctx {
    struct wal *w;    /* the handle being filled */
    size_t seg;       /* index of the segment being scanned */
    bool have_meta;   /* metadata seen (later copies must match) */
    bool any_entry;   /* an entry has been seen (gaps are checked) */
    uint64_t head_end; /* offset after the METADATA record of this seg */
};

static int visit_entry(struct open_ctx *c, const struct wal__rec *rec,
                       const char **why)
{
    struct wal *w = c->w;
    uint64_t index = wal__get64(rec->payload);
    if (index == 0 || (c->any_entry && index > w->last_index + 1)) {
        *why = index == 0 ? "entry with index 0" : "gap in entry indexes";
        return ERR_CORRUPT;
    }
    c->any_entry = true;
    w->last_index = index;
    if (index > w->segs[c->seg].max_index)
        w->segs[c->seg].max_index = index;
    return 0;
}

static int open_visit(void *arg, const struct wal__rec *rec, const char **why)
{
    struct open_ctx *c = arg;
    struct wal *w = c->w;
    const unsigned char *p = rec->payload;
    switch (rec->type) {
    case WAL__REC_METADATA:
        c->head_end = rec->off + rec->size;
        if (c->have_meta && (wal__get64(p) != w->node_id ||
                             wal__get64(p + 8) != w->cluster_id)) {
            *why = "metadata differs from the first segment's";
            return ERR_CORRUPT;
        }
        w->node_id = wal__get64(p);
        w->cluster_id = wal__get64(p + 8);
        c->have_meta = true;
        return 0;
    case WAL__REC_ENTRY:
        return visit_entry(c, rec, why);
    case WAL__REC_HARDSTATE:
        w->hs = (struct wal_hardstate){wal__get64(p), wal__get64(p + 8),
                                       wal__get64(p + 16)};
        w->has_hs = true;
        return 0;
    case WAL__REC_SNAPSHOT:
        if (!w->has_snap || wal__get64(p) >= w->snap.index)
            w->snap = (struct wal_snapshot){wal__get64(p), wal__get64(p + 8)};
        w->has_snap = true;
        if (wal__get64(p) > w->last_index)
            w->last_index = wal__get64(p);
        return 0;
    default:
        return 0;
    }
}

/* repair zeroes the torn tail [sc->end, sc->nonzero_end) of the last
 * segment (whose bytes are in w->buf) and syncs it. */
static int repair(struct wal *w, const struct wal__seg *seg,
                  const struct wal__scan *sc)
{
    WAL_ASSERT(sc->damage == ERR_WAL_TORN);
    WAL_ASSERT(sc->nonzero_end > sc->end);
    char name[WAL__NAME_BYTES];
    wal__seg_name(name, seg->seq, seg->first_index);
    log_warn("wal", "%s/%s: torn record at offset %zu (%s); zeroing %zu "
             "bytes of unsynced tail", w->dir, name, sc->end, sc->why,
             sc->nonzero_end - sc->end);
    size_t len = sc->nonzero_end - sc->end;
    memset(w->buf + sc->end, 0, len);
    int rv = fs_pwrite_all(w->fd, w->buf + sc->end, len, sc->end);
    if (rv == 0 && !w->opts.no_fsync && fdatasync(w->fd) != 0)
        rv = err_from_errno(errno);
    return rv;
}

/* scan_seg reads and checks segment i; *crc carries the chain. */
static int scan_seg(struct open_ctx *c, size_t i, uint32_t *crc,
                    struct wal__scan *sc, size_t *size_out)
{
    struct wal *w = c->w;
    const struct wal__seg *seg = &w->segs[i];
    char name[WAL__NAME_BYTES];
    wal__seg_name(name, seg->seq, seg->first_index);
    int rv = wal__seg_read(w->dir_fd, name, 0, &w->buf, &w->buf_cap,
                           size_out);
    if (rv != 0)
        return rv;
    c->seg = i;
    c->head_end = 0;
    rv = wal__segment_scan(w->buf, *size_out, *crc, i > 0, open_visit, c, sc);
    bool last = i + 1 == w->nsegs;
    if (rv == 0 && sc->nrecords < 2 && sc->damage == 0)
        sc->why = "segment head missing";
    if (rv == 0 && (sc->nrecords < 2 || (sc->damage != 0 && !last) ||
                    sc->damage == ERR_CORRUPT))
        rv = ERR_CORRUPT;
    if (rv == ERR_CORRUPT)
        wal__log_corrupt(w, seg->seq, seg->first_index,
                         sc->damage != 0 ? sc->damage_off : sc->end, sc->why);
    *crc = sc->crc;
    return rv;
}

static int check_seqs(struct wal *w)
{
    for (size_t i = 1; i < w->nsegs; i++) {
        if (w->segs[i].seq != w->segs[i - 1].seq + 1) {
            wal__log_corrupt(w, w->segs[i].seq, w->segs[i].first_index, 0,
                             "segment sequence has a hole (missing file)");
            return ERR_CORRUPT;
        }
    }
    return 0;
}

/* open_tail opens the last segment for writing and repairs its tail. */
static int open_tail(struct wal *w, const struct open_ctx *c,
                     const struct wal__scan *sc)
{
    const struct wal__seg *seg = &w->segs[w->nsegs - 1];
    char name[WAL__NAME_BYTES];
    wal__seg_name(name, seg->seq, seg->first_index);
    w->fd = openat(w->dir_fd, name, O_RDWR | O_CLOEXEC);
    if (w->fd < 0)
        return err_from_errno(errno);
    /* Cut at its own preallocated size (segments are sized to the store,
     * wal_set_sizes), or at the options' if it is shorter (a file cut
     * short by a crash: appended to as before). */
    struct stat st;
    if (fstat(w->fd, &st) != 0)
        return err_from_errno(errno);
    w->seg_bytes = (uint64_t)st.st_size > w->opts.segment_bytes
                       ? (uint64_t)st.st_size : w->opts.segment_bytes;
    w->offset = sc->end;
    w->head_end = c->head_end;
    w->crc = sc->crc;
    if (sc->damage == ERR_WAL_TORN)
        return repair(w, seg, sc);
    return 0;
}

static int open_all(struct wal *w)
{
    int rv = wal__seg_list(w->dir_fd, &w->segs, &w->nsegs);
    if (rv != 0)
        return rv;
    w->segs_cap = w->nsegs;
    if (w->nsegs == 0)
        return ERR_NOTFOUND;
    if ((rv = check_seqs(w)) != 0)
        return rv;
    struct open_ctx c = {.w = w};
    struct wal__scan sc;
    uint32_t crc = 0;
    w->last_index = w->segs[0].first_index - (w->segs[0].first_index > 0);
    for (size_t i = 0; i < w->nsegs; i++) {
        size_t size;
        if ((rv = scan_seg(&c, i, &crc, &sc, &size)) != 0)
            return rv;
        w->segs[i].end = sc.end; /* replays read no further */
    }
    if (!c.any_entry && !w->has_snap)
        w->last_index = w->segs[w->nsegs - 1].first_index - 1;
    return open_tail(w, &c, &sc);
}

int wal_open(const char *dir, const struct wal_options *opts,
             struct wal **wal_out)
{
    WAL_ASSERT(dir != NULL && wal_out != NULL);
    struct wal *w;
    int rv = wal__alloc(dir, opts, &w);
    if (rv != 0)
        return rv;
    if (unlinkat(w->dir_fd, WAL__TMP_NAME, 0) != 0 && errno != ENOENT) {
        rv = err_from_errno(errno);
        goto err_close_wal;
    }
    rv = open_all(w);
    if (rv != 0)
        goto err_close_wal;
    w->stats.segments = w->nsegs;
    w->stats.last_index = w->last_index;
    WAL_ASSERT(w->fd >= 0 && w->nsegs >= 1);
    *wal_out = w;
    return 0;
err_close_wal:
    WAL_ASSERT(rv < 0);
    wal_close(w);
    return rv;
}
