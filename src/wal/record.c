/*
 * record.c - the WAL's on-disk record format: encoding, decoding, and the
 * scan of one segment that tells a clean end, a torn tail and corruption
 * apart.
 *
 * SEGMENT FILE
 *
 *   <dir>/%016llx-%016llx.wal  (sequence number, first raft index expected
 *   in it; both lower-case hex).  Sequence numbers are contiguous; the
 *   oldest ones may have been released.  A segment is preallocated (fallocate)
 *   to the configured size, so its tail after the last record reads as
 *   zeros; it may be larger than that size when one batch did not fit.
 *   A segment is a sequence of records packed from offset 0, each aligned to
 *   8 bytes.  The first record of every segment is a CRC record, the second a
 *   METADATA record; a segment started by a cut then repeats the latest
 *   SNAPSHOT marker and HARDSTATE (if any), so that releasing older segments
 *   loses nothing but old entries.
 *
 * RECORD (all integers little-endian)
 *
 *   offset size  field
 *   0      4     crc      CRC-32C of bytes [4, 16 + len + pad) of this
 *                         record, chained: crc32c_extend(prev, bytes) where
 *                         prev is the crc field of the previous record (for
 *                         a CRC record: the prev_crc it carries, see below)
 *   4      4     len      payload bytes (not counting padding)
 *   8      1     type     1 CRC, 2 METADATA, 3 ENTRY, 4 HARDSTATE, 5 SNAPSHOT
 *   9      7     zero     reserved, must be zero
 *   16     len   payload  as below
 *   16+len pad   zero     pad = (8 - len % 8) % 8 zero bytes
 *
 *   A header of 16 zero bytes (type 0) marks the end of the records.
 *
 * PAYLOADS
 *
 *   CRC (len 8)        0 u32 prev_crc: the crc of the last record of the
 *                        previous segment (0 in the first segment); the
 *                        chain continues through it across segments
 *                      4 u32 zero
 *   METADATA (len 16)  0 u64 node_id, 8 u64 cluster_id
 *   ENTRY (len 24+n)   0 u64 index, 8 u64 term, 16 u32 entry type,
 *                      20 u32 zero, 24 n bytes of entry data
 *   HARDSTATE (len 24) 0 u64 term, 8 u64 vote, 16 u64 commit
 *   SNAPSHOT (len 16)  0 u64 index, 8 u64 term
 *
 * DAMAGE
 *
 *   Scanning stops at the first record that is partial, has a bad shape or
 *   a bad CRC.  If everything after it is zero the segment simply ended
 *   there.  Otherwise, if some record after it still verifies (chained on
 *   the bad record's stored or recomputed crc, or on the record just before
 *   it), valid data follows the damage: corruption.  If nothing verifies the
 *   damage can be a torn tail (the remains of one unsynced write), but only
 *   if the bad record is shaped like one: it runs past the end of the file,
 *   or one of its pieces that lies in one 512-byte disk sector (aligned in
 *   the file) is all zero, a sector of the write that never reached the
 *   disk (the segment was zero before it; a disk writes a sector whole).
 *   A complete record whose sectors all hold data but whose crc does not
 *   match was changed after it was written, even as the last record of a
 *   clean shutdown: corruption, refused ("crc mismatch"), as etcd's
 *   decoder does (its isTornEntry).
 */
#include <endian.h>
#include <stddef.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/err.h"
#include "wal/wal_int.h"

/* The smallest disk sector: a write reaches the disk in whole sectors, so a
 * torn record has at least one sector piece still zero (see DAMAGE). */
#define WAL__SECTOR_BYTES 512u

/* The header as laid out on disk (encoded byte by byte, never cast). */
struct wal__header_layout {
    uint32_t crc;
    uint32_t len;
    uint8_t type;
    uint8_t zero[7];
};
_Static_assert(sizeof(struct wal__header_layout) == WAL__HEADER_BYTES,
               "record header is 16 bytes");
_Static_assert(offsetof(struct wal__header_layout, crc) == 0, "crc at 0");
_Static_assert(offsetof(struct wal__header_layout, len) == 4, "len at 4");
_Static_assert(offsetof(struct wal__header_layout, type) == 8, "type at 8");
_Static_assert(offsetof(struct wal__header_layout, zero) == 9, "zero at 9");
_Static_assert(WAL__HEADER_BYTES % WAL__ALIGN == 0, "header keeps alignment");

/* The fixed part of an ENTRY payload as laid out on disk. */
struct wal__entry_layout {
    uint64_t index;
    uint64_t term;
    uint32_t type;
    uint32_t zero;
};
_Static_assert(sizeof(struct wal__entry_layout) == WAL__ENTRY_FIXED_BYTES,
               "entry fixed part is 24 bytes");
_Static_assert(offsetof(struct wal__entry_layout, type) == 16, "type at 16");

static void put64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

uint64_t wal__get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

uint32_t wal__get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

size_t wal__record_size(size_t len)
{
    return WAL__HEADER_BYTES + ((len + WAL__ALIGN - 1) & ~(size_t)(WAL__ALIGN - 1));
}

size_t wal__record_put(unsigned char *dst, uint8_t type, const void *fixed,
                       size_t flen, const void *data, size_t dlen,
                       uint32_t *crc_inout)
{
    WAL_ASSERT(type >= WAL__REC_CRC && type <= WAL__REC_SNAPSHOT);
    WAL_ASSERT(flen + dlen <= UINT32_MAX - WAL__HEADER_BYTES);
    size_t len = flen + dlen;
    size_t size = wal__record_size(len);
    memset(dst, 0, WAL__HEADER_BYTES);
    put32(dst + 4, (uint32_t)len);
    dst[8] = type;
    if (flen > 0)
        memcpy(dst + WAL__HEADER_BYTES, fixed, flen);
    if (dlen > 0)
        memcpy(dst + WAL__HEADER_BYTES + flen, data, dlen);
    memset(dst + WAL__HEADER_BYTES + len, 0, size - WAL__HEADER_BYTES - len);
    uint32_t crc = crc32c_extend(*crc_inout, dst + 4, size - 4);
    put32(dst, crc);
    *crc_inout = crc;
    return size;
}

size_t wal__crc_payload(unsigned char out[8], uint32_t prev_crc)
{
    put32(out, prev_crc);
    put32(out + 4, 0);
    return 8;
}

size_t wal__metadata_payload(unsigned char out[16], uint64_t node_id,
                             uint64_t cluster_id)
{
    put64(out, node_id);
    put64(out + 8, cluster_id);
    return 16;
}

size_t wal__entry_payload(unsigned char out[24], const struct wal_entry *e)
{
    put64(out, e->index);
    put64(out + 8, e->term);
    put32(out + 16, e->type);
    put32(out + 20, 0);
    return WAL__ENTRY_FIXED_BYTES;
}

size_t wal__hardstate_payload(unsigned char out[24],
                              const struct wal_hardstate *hs)
{
    put64(out, hs->term);
    put64(out + 8, hs->vote);
    put64(out + 16, hs->commit);
    return 24;
}

size_t wal__snapshot_payload(unsigned char out[16],
                             const struct wal_snapshot *s)
{
    put64(out, s->index);
    put64(out + 8, s->term);
    return 16;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* The payload length a record type must have (entries: at least). */
static bool len_fits_type(uint8_t type, uint32_t len)
{
    switch (type) {
    case WAL__REC_CRC:
        return len == 8;
    case WAL__REC_METADATA:
    case WAL__REC_SNAPSHOT:
        return len == 16;
    case WAL__REC_HARDSTATE:
        return len == 24;
    case WAL__REC_ENTRY:
        return len >= WAL__ENTRY_FIXED_BYTES &&
               len - WAL__ENTRY_FIXED_BYTES <= WAL_ENTRY_BYTES_MAX;
    default:
        return false;
    }
}

/* parse_shape decodes the header at off and checks everything but the CRC.
 * Returns 0, or ERR_WAL_TORN (does not fit in size) / ERR_CORRUPT (bad
 * shape) with *why set. */
static int parse_shape(const unsigned char *buf, size_t size, size_t off,
                       struct wal__rec *rec, const char **why)
{
    if (size - off < WAL__HEADER_BYTES) {
        *why = "partial record header";
        return ERR_WAL_TORN;
    }
    const unsigned char *h = buf + off;
    rec->off = off;
    rec->crc = wal__get32(h);
    rec->len = wal__get32(h + 4);
    rec->type = h[8];
    if (!all_zero(h + 9, 7) || !len_fits_type(rec->type, rec->len)) {
        *why = "bad record header";
        return ERR_CORRUPT;
    }
    rec->size = wal__record_size(rec->len);
    if (size - off < rec->size) {
        *why = "record runs past the end of the file";
        return ERR_WAL_TORN;
    }
    rec->payload = h + WAL__HEADER_BYTES;
    if (!all_zero(rec->payload + rec->len, rec->size - WAL__HEADER_BYTES -
                                               rec->len)) {
        *why = "non-zero record padding";
        return ERR_CORRUPT;
    }
    if ((rec->type == WAL__REC_CRC && wal__get32(rec->payload + 4) != 0) ||
        (rec->type == WAL__REC_ENTRY && wal__get32(rec->payload + 20) != 0)) {
        *why = "non-zero reserved payload field";
        return ERR_CORRUPT;
    }
    return 0;
}

/* verify_at is true if a well-shaped record at off verifies chained on
 * prev. */
static bool verify_at(const unsigned char *buf, size_t size, size_t off,
                      uint32_t prev, struct wal__rec *rec)
{
    const char *why;
    if (off >= size || parse_shape(buf, size, off, rec, &why) != 0)
        return false;
    return crc32c_extend(prev, buf + off + 4, rec->size - 4) == rec->crc;
}

/* valid_after is true if any record after the bad one at off verifies: on
 * the bad record's stored crc, on its recomputed crc (when only its crc
 * field is damaged), or on the stored crc of the record just before it. */
static bool valid_after(const unsigned char *buf, size_t size, size_t off,
                        uint32_t prev_crc, size_t nonzero_end)
{
    struct wal__rec bad, rec, next;
    uint32_t stored = size - off >= 4 ? wal__get32(buf + off) : 0;
    uint32_t recomputed = stored;
    const char *why;
    if (parse_shape(buf, size, off, &bad, &why) == 0)
        recomputed = crc32c_extend(prev_crc, buf + off + 4, bad.size - 4);
    for (size_t p = off + WAL__ALIGN; p < nonzero_end; p += WAL__ALIGN) {
        if (verify_at(buf, size, p, stored, &rec) ||
            verify_at(buf, size, p, recomputed, &rec))
            return true;
        if (parse_shape(buf, size, p, &rec, &why) == 0 &&
            verify_at(buf, size, p + rec.size, rec.crc, &next))
            return true;
    }
    return false;
}

/* bad_extent is the bytes the bad record at off claims: its whole size when
 * its length fits its type, else its header; never past size. */
static size_t bad_extent(const unsigned char *buf, size_t size, size_t off)
{
    WAL_ASSERT(off < size);
    size_t n = WAL__HEADER_BYTES;
    if (size - off >= WAL__HEADER_BYTES &&
        len_fits_type(buf[off + 8], wal__get32(buf + off + 4)))
        n = wal__record_size(wal__get32(buf + off + 4));
    return n < size - off ? n : size - off;
}

/* has_zero_sector is true if some piece of [off, off + n) that lies in one
 * disk sector (WAL__SECTOR_BYTES, aligned in the file) is all zero: that
 * sector of the write never reached the disk. */
static bool has_zero_sector(const unsigned char *buf, size_t off, size_t n)
{
    WAL_ASSERT(n > 0);
    size_t end = off + n;
    while (off < end) {
        size_t next = (off / WAL__SECTOR_BYTES + 1) * WAL__SECTOR_BYTES;
        size_t stop = next < end ? next : end;
        if (all_zero(buf + off, stop - off))
            return true;
        off = stop;
    }
    return false;
}

/* torn_shaped is true if the bad record at off (failed with rv) can be the
 * remains of a torn write: it runs past the end of what is on disk, or one
 * of its sectors is still zero.  A complete record whose sectors all hold
 * data but whose crc or shape is wrong was changed after it was written. */
static bool torn_shaped(const unsigned char *buf, size_t size, size_t off,
                        int rv)
{
    if (rv == ERR_WAL_TORN)
        return true;
    WAL_ASSERT(rv == ERR_CORRUPT || rv == ERR_WAL_CRC);
    return has_zero_sector(buf, off, bad_extent(buf, size, off));
}

/* classify fills out->damage for the first bad record at off, which failed
 * with rv. */
static void classify(const unsigned char *buf, size_t size, size_t off,
                     uint32_t prev_crc, int rv, const char *why,
                     struct wal__scan *out)
{
    size_t nz = size;
    while (nz > off && buf[nz - 1] == 0)
        nz--;
    out->nonzero_end = nz;
    out->damage_off = off;
    out->why = why;
    if (nz <= off) {
        out->damage = 0; /* only zeros follow: the records end here */
        return;
    }
    if (valid_after(buf, size, off, prev_crc, nz) ||
        !torn_shaped(buf, size, off, rv))
        out->damage = ERR_CORRUPT;
    else
        out->damage = ERR_WAL_TORN;
}

/* check_head enforces the segment head: CRC record first (carrying
 * prev_crc when check_prev), METADATA second. */
static int check_head(const struct wal__rec *rec, size_t i, uint32_t prev_crc,
                      bool check_prev, const char **why)
{
    if (i == 0 && rec->type != WAL__REC_CRC) {
        *why = "segment does not start with a crc record";
        return ERR_CORRUPT;
    }
    if (i == 0 && check_prev && wal__get32(rec->payload) != prev_crc) {
        *why = "crc chain broken between segments";
        return ERR_CORRUPT;
    }
    if (i == 1 && rec->type != WAL__REC_METADATA) {
        *why = "segment head lacks a metadata record";
        return ERR_CORRUPT;
    }
    if (i > 0 && rec->type == WAL__REC_CRC) {
        *why = "crc record inside a segment";
        return ERR_CORRUPT;
    }
    return 0;
}

int wal__segment_scan(const unsigned char *buf, size_t size, uint32_t prev_crc,
                      bool check_prev, wal__visit_fn visit, void *arg,
                      struct wal__scan *out)
{
    WAL_ASSERT(buf != NULL || size == 0);
    WAL_ASSERT(out != NULL);
    memset(out, 0, sizeof *out);
    uint32_t crc = prev_crc;
    size_t off = 0;
    for (;;) {
        struct wal__rec rec;
        const char *why = NULL;
        if (off == size) /* exactly at the end of the file */
            break;
        int rv = parse_shape(buf, size, off, &rec, &why);
        uint32_t chain = rv == 0 && rec.type == WAL__REC_CRC
                             ? wal__get32(rec.payload) : crc;
        if (rv == 0 && crc32c_extend(chain, buf + off + 4, rec.size - 4) !=
                           rec.crc) {
            rv = ERR_WAL_CRC;
            why = "crc mismatch";
        }
        if (rv != 0) {
            classify(buf, size, off, crc, rv, why, out);
            break;
        }
        rv = check_head(&rec, out->nrecords, prev_crc, check_prev, &why);
        if (rv == 0 && visit != NULL)
            rv = visit(arg, &rec, &why);
        if (rv != 0) {
            out->damage_off = off;
            out->why = why != NULL ? why : "record rejected";
            return rv;
        }
        crc = rec.crc;
        off += rec.size;
        out->nrecords++;
    }
    out->end = off;
    out->crc = crc;
    WAL_ASSERT(out->end <= size);
    return 0;
}
