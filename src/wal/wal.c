/*
 * wal.c - the WAL handle: create, append (buffered, one pwrite per batch),
 * sync (one fdatasync per batch), segment cuts, release, close.  Opening an
 * existing WAL (check + torn-tail repair) is in open.c; replay in replay.c;
 * the record format in record.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/metrics.h"
#include "wal/wal_int.h"

/* Upper bound of a segment head: CRC, METADATA, SNAPSHOT, HARDSTATE. */
#define HEAD_BYTES_MAX (4 * (WAL__HEADER_BYTES + 24))

int wal__opts_fill(const struct wal_options *in, struct wal_options *out)
{
    memset(out, 0, sizeof *out);
    if (in != NULL)
        *out = *in;
    if (out->segment_bytes == 0)
        out->segment_bytes = WAL_SEGMENT_BYTES_DEFAULT;
    if (out->segment_bytes < WAL_SEGMENT_BYTES_MIN ||
        out->segment_bytes > (1ull << 40))
        return ERR_INVAL;
    if (out->released_keep_bytes == 0)
        out->released_keep_bytes = UINT64_MAX;
    return 0;
}

int wal__alloc(const char *dir, const struct wal_options *opts,
               struct wal **wal_out)
{
    struct wal_options o;
    int rv = wal__opts_fill(opts, &o);
    if (rv != 0)
        return rv;
    struct wal *w = mem_calloc(1, sizeof *w);
    if (w == NULL)
        return ERR_NOMEM;
    w->dir = mem_dup(dir, strlen(dir) + 1);
    if (w->dir == NULL) {
        mem_free(w);
        return ERR_NOMEM;
    }
    w->opts = o;
    w->fd = w->tmp_fd = -1;
    w->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dir_fd < 0) {
        rv = err_from_errno(errno);
        wal_close(w);
        return rv;
    }
    *wal_out = w;
    return 0;
}

void wal_close(struct wal *wal)
{
    if (wal == NULL)
        return;
    if (wal->fd >= 0)
        close(wal->fd);
    if (wal->tmp_fd >= 0)
        close(wal->tmp_fd);
    if (wal->dir_fd >= 0)
        close(wal->dir_fd);
    mem_free(wal->segs);
    mem_free(wal->buf);
    mem_free(wal->dir);
    mem_free(wal);
}

int wal__buf_reserve(struct wal *wal, size_t bytes)
{
    if (bytes <= wal->buf_cap)
        return 0;
    size_t cap = wal->buf_cap ? wal->buf_cap : 4096;
    while (cap < bytes)
        cap *= 2;
    unsigned char *p = mem_realloc(wal->buf, cap);
    if (p == NULL)
        return ERR_NOMEM;
    wal->buf = p;
    wal->buf_cap = cap;
    return 0;
}

void wal__log_corrupt(const struct wal *wal, uint64_t seq, uint64_t first,
                      size_t off, const char *why)
{
    char name[WAL__NAME_BYTES];
    wal__seg_name(name, seq, first);
    log_error("wal", "%s/%s: corrupt at offset %zu: %s; refusing to start "
              "(restore this member from a snapshot or remove it)",
              wal->dir, name, off, why);
}

/* segs_reserve makes room for one more segment (before any I/O, so that
 * ERR_NOMEM leaves the wal untouched). */
static int segs_reserve(struct wal *w)
{
    struct wal__seg *p =
        mem_grow(w->segs, &w->segs_cap, w->nsegs, sizeof *p, 8);
    if (p == NULL)
        return ERR_NOMEM;
    w->segs = p;
    return 0;
}

/* head_put encodes the head of a new segment into w->buf. */
static size_t head_put(struct wal *w, uint32_t *crc)
{
    unsigned char p[24];
    size_t off = 0;
    off += wal__record_put(w->buf + off, WAL__REC_CRC, p,
                           wal__crc_payload(p, *crc), NULL, 0, crc);
    off += wal__record_put(w->buf + off, WAL__REC_METADATA, p,
                           wal__metadata_payload(p, w->node_id, w->cluster_id),
                           NULL, 0, crc);
    if (w->has_snap)
        off += wal__record_put(w->buf + off, WAL__REC_SNAPSHOT, p,
                               wal__snapshot_payload(p, &w->snap), NULL, 0,
                               crc);
    if (w->has_hs)
        off += wal__record_put(w->buf + off, WAL__REC_HARDSTATE, p,
                               wal__hardstate_payload(p, &w->hs), NULL, 0,
                               crc);
    WAL_ASSERT(off <= HEAD_BYTES_MAX);
    return off;
}

/* seg_start writes the head into the pre-created segment (creating it if
 * needed), syncs it, renames it to its name and syncs the dir.  On success
 * it is the segment in use (w->fd). */
static int seg_start(struct wal *w, uint64_t seq, uint64_t first_index)
{
    int rv = segs_reserve(w);
    if (rv == 0)
        rv = wal__buf_reserve(w, HEAD_BYTES_MAX);
    if (rv == 0 && w->tmp_fd < 0) {
        rv = wal__tmp_create(w->dir_fd, w->opts.segment_bytes, &w->tmp_fd);
        w->tmp_bytes = w->opts.segment_bytes;
    }
    if (rv != 0)
        return rv;
    uint32_t crc = w->crc;
    size_t len = head_put(w, &crc);
    rv = fs_pwrite_all(w->tmp_fd, w->buf, len, 0);
    if (rv == 0 && !w->opts.no_fsync && fdatasync(w->tmp_fd) != 0)
        rv = err_from_errno(errno);
    char name[WAL__NAME_BYTES];
    wal__seg_name(name, seq, first_index);
    if (rv == 0 && renameat(w->dir_fd, WAL__TMP_NAME, w->dir_fd, name) != 0)
        rv = err_from_errno(errno);
    if (rv == 0)
        rv = wal__dir_sync(w->dir_fd, w->opts.no_fsync);
    if (rv != 0)
        return rv;
    if (w->fd >= 0)
        close(w->fd);
    if (w->nsegs > 0) /* the old tail is closed: its records end here */
        w->segs[w->nsegs - 1].end = w->offset;
    w->fd = w->tmp_fd;
    w->seg_bytes = w->tmp_bytes;
    w->tmp_fd = -1;
    w->room_end = 0; /* preallocated up to the segment size */
    w->offset = w->head_end = len;
    w->crc = crc;
    w->segs[w->nsegs++] = (struct wal__seg){seq, first_index, 0, 0};
    w->stats.segments = w->nsegs;
    w->stats.bytes_written += len;
    return 0;
}

int wal_create(const char *dir, const struct wal_options *opts,
               uint64_t node_id, uint64_t cluster_id, struct wal **wal_out)
{
    WAL_ASSERT(dir != NULL && wal_out != NULL);
    struct wal_options o;
    if (wal__opts_fill(opts, &o) != 0)
        return ERR_INVAL;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    if (wal_exists(dir))
        return ERR_EXIST;
    struct wal *w;
    int rv = wal__alloc(dir, &o, &w);
    if (rv != 0)
        return rv;
    w->node_id = node_id;
    w->cluster_id = cluster_id;
    rv = seg_start(w, 0, 1);
    if (rv != 0) {
        wal_close(w);
        return rv;
    }
    WAL_ASSERT(w->nsegs == 1 && w->fd >= 0);
    *wal_out = w;
    return 0;
}

bool wal_exists(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct wal__seg *segs = NULL;
    size_t n = 0;
    int rv = wal__seg_list(fd, &segs, &n);
    close(fd);
    mem_free(segs);
    return rv == 0 && n > 0;
}

static int purge(struct wal *w);

/* etcd's wal fsync buckets: prometheus.ExponentialBuckets(0.001, 2, 14). */
static const double fsync_bounds[] = {0.001, 0.002, 0.004, 0.008, 0.016,
                                      0.032, 0.064, 0.128, 0.256, 0.512,
                                      1.024, 2.048, 4.096, 8.192};
struct metrics_hist wal_metrics_fsync = METRICS_HIST_INIT(fsync_bounds);

/* data_sync: fdatasync(fd), timed into wal_metrics_fsync. */
static int data_sync(int fd)
{
    int64_t t0 = metrics_now_ns();
    int rv = fdatasync(fd);
    metrics_since(&wal_metrics_fsync, t0);
    return rv;
}

/* seg_cut makes the old segment durable and starts the next one. */
static int seg_cut(struct wal *w, uint64_t first_index)
{
    WAL_ASSERT(w->nsegs >= 1 && w->fd >= 0);
    if (!w->opts.no_fsync && data_sync(w->fd) != 0)
        return err_from_errno(errno);
    uint64_t seq = w->segs[w->nsegs - 1].seq + 1;
    int rv = seg_start(w, seq, first_index);
    if (rv != 0)
        return rv;
    w->dirty = false; /* the old segment was synced, the new head too */
    w->stats.segments_cut++;
    /* A cut may take the dir over segments_keep: released segments that
     * were kept go now (etcd's purge loop would take them within 30 s). */
    return w->released > 0 ? purge(w) : 0;
}

/* Between two tries to pre-create the next segment on a full disk. */
#define NEXT_RETRY_MS 1000

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* next_ready makes sure the next segment is pre-created (fallocated in
 * full), trying again at most every NEXT_RETRY_MS on a full disk.  While it
 * cannot be, the wal says it is low (wal_space_low) and a cut is put off:
 * records go on into the current segment past its size, their blocks
 * allocated before each write (wal__room: a disk with no room at all
 * refuses the batch with nothing written, the wal usable).  The
 * caller refuses new writes meanwhile, so half a segment is left for what
 * was already accepted. */
static bool next_ready(struct wal *w)
{
    if (w->tmp_fd >= 0)
        return true;
    uint64_t now = now_ms();
    if (w->next_failed_ms != 0 && now < w->next_failed_ms + NEXT_RETRY_MS)
        return false;
    int rv = wal__tmp_create(w->dir_fd, w->opts.segment_bytes, &w->tmp_fd);
    w->tmp_bytes = w->opts.segment_bytes;
    bool low = rv != 0;
    w->next_failed_ms = low ? now : 0;
    if (low != atomic_load(&w->low)) {
        atomic_store(&w->low, low);
        if (low)
            log_error("wal", "%s: cannot create the next segment: %s; new "
                      "writes are refused until space is freed", w->dir,
                      err_str(rv));
        else
            log_info("wal", "%s: the next segment is ready again", w->dir);
    }
    return !low;
}

bool wal_space_low(const struct wal *wal)
{
    WAL_ASSERT(wal != NULL);
    return atomic_load(&((struct wal *)wal)->low);
}

bool wal_broken(const struct wal *wal)
{
    WAL_ASSERT(wal != NULL);
    return wal->failed != 0;
}

/* batch_check validates ents and returns the bytes of their records. */
static int batch_check(const struct wal *w, const struct wal_entry *ents,
                       size_t n, size_t *bytes_out)
{
    if (n > WAL_APPEND_ENTRIES_MAX)
        return ERR_TOO_LARGE;
    if (n > 0 && (ents[0].index == 0 || ents[0].index > w->last_index + 1))
        return ERR_INVAL;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (ents[i].len > WAL_ENTRY_BYTES_MAX)
            return ERR_TOO_LARGE;
        if (ents[i].len > 0 && ents[i].data == NULL)
            return ERR_INVAL;
        if (i > 0 && ents[i].index != ents[i - 1].index + 1)
            return ERR_INVAL;
        bytes += wal__record_size(WAL__ENTRY_FIXED_BYTES + ents[i].len);
    }
    *bytes_out = bytes;
    return 0;
}

/* batch_put encodes the batch into w->buf; returns its length. */
static size_t batch_put(struct wal *w, const struct wal_hardstate *hs,
                        const struct wal_entry *ents, size_t n,
                        const struct wal_snapshot *snap, uint32_t *crc)
{
    unsigned char p[24];
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += wal__record_put(w->buf + off, WAL__REC_ENTRY, p,
                               wal__entry_payload(p, &ents[i]), ents[i].data,
                               ents[i].len, crc);
    if (snap != NULL)
        off += wal__record_put(w->buf + off, WAL__REC_SNAPSHOT, p,
                               wal__snapshot_payload(p, snap), NULL, 0, crc);
    if (hs != NULL)
        off += wal__record_put(w->buf + off, WAL__REC_HARDSTATE, p,
                               wal__hardstate_payload(p, hs), NULL, 0, crc);
    return off;
}

/* batch_commit updates the in-memory state after a successful write. */
static void batch_commit(struct wal *w, const struct wal_hardstate *hs,
                         const struct wal_entry *ents, size_t n,
                         const struct wal_snapshot *snap)
{
    struct wal__seg *seg = &w->segs[w->nsegs - 1];
    if (n > 0) {
        w->last_index = ents[n - 1].index;
        if (w->last_index > seg->max_index)
            seg->max_index = w->last_index;
    }
    if (snap != NULL) {
        if (!w->has_snap || snap->index >= w->snap.index)
            w->snap = *snap;
        w->has_snap = true;
        if (snap->index > w->last_index)
            w->last_index = snap->index;
    }
    if (hs != NULL) {
        w->hs = *hs;
        w->has_hs = true;
    }
    w->stats.last_index = w->last_index;
}

/* append_batch is wal_append with an optional snapshot marker. */
static int append_batch(struct wal *w, const struct wal_hardstate *hs,
                        const struct wal_entry *ents, size_t n,
                        const struct wal_snapshot *snap)
{
    size_t bytes;
    int rv = batch_check(w, ents, n, &bytes);
    if (rv != 0)
        return rv;
    bytes += hs != NULL ? wal__record_size(24) : 0;
    bytes += snap != NULL ? wal__record_size(16) : 0;
    rv = wal__buf_reserve(w, bytes > HEAD_BYTES_MAX ? bytes : HEAD_BYTES_MAX);
    if (rv != 0)
        return rv; /* nothing written: the wal stays usable */
    if (w->offset + bytes > w->seg_bytes && w->offset > w->head_end &&
        next_ready(w)) {
        rv = seg_cut(w, n > 0 ? ents[0].index : w->last_index + 1);
        if (rv != 0)
            goto err_broken;
    }
    /* Past a put-off cut the blocks are not preallocated: allocate them
     * first, so that a full disk refuses the batch with nothing written
     * and the wal stays usable (the caller retries it). */
    if (w->offset + bytes > w->seg_bytes &&
        w->offset + bytes > w->room_end) {
        rv = wal__room(w->fd, w->offset, bytes, &w->room_end);
        if (rv != 0)
            return rv;
    }
    uint32_t crc = w->crc;
    size_t len = batch_put(w, hs, ents, n, snap, &crc);
    WAL_ASSERT(len == bytes);
    rv = fs_pwrite_all(w->fd, w->buf, len, w->offset);
    if (rv != 0)
        goto err_broken;
    w->offset += len;
    w->crc = crc;
    w->dirty = true;
    w->stats.bytes_written += len;
    batch_commit(w, hs, ents, n, snap);
    if (w->tmp_fd < 0 && w->offset >= w->seg_bytes / 2)
        (void)next_ready(w);
    return 0;
err_broken:
    WAL_ASSERT(rv < 0);
    w->failed = rv;
    return rv;
}

int wal_append(struct wal *wal, const struct wal_hardstate *hs_or_null,
               const struct wal_entry *ents, size_t n)
{
    WAL_ASSERT(wal != NULL && wal->fd >= 0);
    WAL_ASSERT(n == 0 || ents != NULL);
    if (wal->failed != 0)
        return wal->failed;
    if (n == 0 && hs_or_null == NULL)
        return 0;
    return append_batch(wal, hs_or_null, ents, n, NULL);
}

int wal_sync(struct wal *wal)
{
    WAL_ASSERT(wal != NULL && wal->fd >= 0);
    if (wal->failed != 0)
        return wal->failed;
    if (!wal->dirty)
        return 0;
    if (!wal->opts.no_fsync) {
        if (data_sync(wal->fd) != 0) {
            wal->failed = err_from_errno(errno);
            return wal->failed;
        }
        wal->stats.syncs++;
    }
    wal->dirty = false;
    return 0;
}

int wal_save_snapshot(struct wal *wal, const struct wal_snapshot *snap)
{
    WAL_ASSERT(wal != NULL && wal->fd >= 0);
    WAL_ASSERT(snap != NULL);
    if (wal->failed != 0)
        return wal->failed;
    int rv = append_batch(wal, NULL, NULL, 0, snap);
    if (rv != 0)
        return rv;
    return wal_sync(wal);
}

/* seg_blocks: the bytes segment i's file takes on disk (0 if unknown). */
static uint64_t seg_blocks(const struct wal *w, size_t i)
{
    char name[WAL__NAME_BYTES];
    wal__seg_name(name, w->segs[i].seq, w->segs[i].first_index);
    struct stat st;
    if (fstatat(w->dir_fd, name, &st, 0) != 0)
        return 0;
    return (uint64_t)st.st_blocks * 512u;
}

/* purge deletes the oldest released segments (wholly below w->released)
 * while the dir holds more than opts.segments_keep or the released ones
 * take more than opts.released_keep_bytes, never the segment in use, and
 * fsyncs the dir after a deletion.  The segments deleted are dropped from
 * w->segs even when a later unlink or the fsync fails. */
static int purge(struct wal *w)
{
    WAL_ASSERT(w->nsegs >= 1);
    uint64_t keep = w->opts.segments_keep;
    uint64_t kept = 0; /* bytes of the released segments */
    bool by_bytes = w->opts.released_keep_bytes != UINT64_MAX &&
                    keep != WAL_SEGMENTS_KEEP_ALL; /* --max-wals=0: all */
    for (size_t i = 0; by_bytes && i + 1 < w->nsegs &&
                       w->segs[i].max_index < w->released; i++)
        kept += seg_blocks(w, i);
    size_t k = 0;
    int rv = 0;
    while (k + 1 < w->nsegs && w->segs[k].max_index < w->released &&
           (w->nsegs - k > keep ||
            (by_bytes && kept > w->opts.released_keep_bytes))) {
        uint64_t b = by_bytes ? seg_blocks(w, k) : 0;
        char name[WAL__NAME_BYTES];
        wal__seg_name(name, w->segs[k].seq, w->segs[k].first_index);
        if (unlinkat(w->dir_fd, name, 0) != 0) {
            rv = err_from_errno(errno);
            break;
        }
        kept -= b < kept ? b : kept;
        k++;
    }
    if (k > 0) {
        memmove(w->segs, w->segs + k, (w->nsegs - k) * sizeof *w->segs);
        w->nsegs -= k;
        w->stats.segments = w->nsegs;
        int rv2 = wal__dir_sync(w->dir_fd, w->opts.no_fsync);
        rv = rv != 0 ? rv : rv2;
    }
    WAL_ASSERT(w->nsegs >= 1);
    return rv;
}

void wal_set_sizes(struct wal *wal, uint64_t segment_bytes,
                   uint64_t keep_bytes)
{
    WAL_ASSERT(wal != NULL);
    WAL_ASSERT(segment_bytes == 0 || segment_bytes >= WAL_SEGMENT_BYTES_MIN);
    if (segment_bytes != 0)
        wal->opts.segment_bytes = segment_bytes;
    wal->opts.released_keep_bytes = keep_bytes == 0 ? UINT64_MAX : keep_bytes;
}

int wal_release_before(struct wal *wal, uint64_t index)
{
    WAL_ASSERT(wal != NULL && wal->nsegs >= 1);
    if (wal->failed != 0)
        return wal->failed;
    if (index > wal->released)
        wal->released = index;
    int rv = purge(wal);
    if (rv != 0)
        wal->failed = rv;
    return rv;
}

void wal_stats(const struct wal *wal, struct wal_stats *stats_out)
{
    WAL_ASSERT(wal != NULL && stats_out != NULL);
    *stats_out = wal->stats;
    stats_out->last_index = wal->last_index;
}

uint64_t wal_last_index(const struct wal *wal)
{
    WAL_ASSERT(wal != NULL);
    return wal->last_index;
}
