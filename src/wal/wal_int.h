/*
 * wal_int.h - declarations shared between the files of src/wal (not part of
 * the module's interface; see wal.h for that and record.c for the format).
 */
#ifndef CETCD_WAL_WAL_INT_H
#define CETCD_WAL_WAL_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "wal/wal.h"

/* WAL_ASSERT checks an invariant and stays on in release builds (NDEBUG
 * does not remove it): a broken invariant in the WAL must stop the process
 * before it writes wrong data.  Never used on disk input. */
#define WAL_ASSERT(cond)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: wal: assertion failed: %s\n", __FILE__,  \
                    __LINE__, #cond);                                        \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* Record types (byte 8 of a record header). */
enum {
    WAL__REC_CRC = 1,       /* segment head: running CRC of the chain */
    WAL__REC_METADATA = 2,  /* node id, cluster id */
    WAL__REC_ENTRY = 3,     /* one raft entry */
    WAL__REC_HARDSTATE = 4, /* term, vote, commit */
    WAL__REC_SNAPSHOT = 5,  /* snapshot marker: index, term */
};

#define WAL__HEADER_BYTES 16u
#define WAL__ENTRY_FIXED_BYTES 24u
#define WAL__ALIGN 8u
/* Name of the pre-created next segment inside the WAL dir. */
#define WAL__TMP_NAME "next.wal.tmp"
/* Length of "%016llx-%016llx.wal" plus its NUL. */
#define WAL__NAME_BYTES 38u

/* One record as found in a buffer; payload points into that buffer. */
struct wal__rec {
    uint8_t type;                  /* WAL__REC_* */
    uint32_t len;                  /* payload bytes */
    uint32_t crc;                  /* the record's (chained) CRC */
    size_t off;                    /* offset of the header in the buffer */
    size_t size;                   /* header + payload + padding */
    const unsigned char *payload;  /* len bytes */
};

/* Outcome of scanning one segment buffer. */
struct wal__scan {
    size_t end;         /* offset just past the last valid record */
    uint32_t crc;       /* CRC of the last valid record */
    size_t nrecords;    /* valid records */
    int damage;         /* 0: clean end; ERR_WAL_TORN or ERR_CORRUPT */
    size_t damage_off;  /* offset of the first bad record (if damage) */
    size_t nonzero_end; /* one past the last non-zero byte (if damage) */
    const char *why;    /* static reason of the damage, for the log */
};

/* Called for each valid record in order; returns 0 or an ERR_* that stops
 * the scan (and sets *why_out, a static string, for ERR_CORRUPT). */
typedef int (*wal__visit_fn)(void *arg, const struct wal__rec *rec,
                             const char **why_out);

/* Decoding helpers for payloads (little-endian). */
uint64_t wal__get64(const unsigned char *p);
uint32_t wal__get32(const unsigned char *p);

/* wal__record_size is the bytes a record with a len-byte payload takes. */
size_t wal__record_size(size_t len);

/* wal__record_put encodes a record at dst: header, fixed (flen bytes), data
 * (dlen bytes), zero padding; chains *crc_inout.  Returns bytes written
 * (wal__record_size(flen + dlen)).  dst must have room. */
size_t wal__record_put(unsigned char *dst, uint8_t type, const void *fixed,
                       size_t flen, const void *data, size_t dlen,
                       uint32_t *crc_inout);

/* Payload builders: fill out (fixed part) and return its length. */
size_t wal__crc_payload(unsigned char out[8], uint32_t prev_crc);
size_t wal__metadata_payload(unsigned char out[16], uint64_t node_id,
                             uint64_t cluster_id);
size_t wal__entry_payload(unsigned char out[24], const struct wal_entry *e);
size_t wal__hardstate_payload(unsigned char out[24],
                              const struct wal_hardstate *hs);
size_t wal__snapshot_payload(unsigned char out[16],
                             const struct wal_snapshot *s);

/* wal__segment_scan walks the records of one segment (buf, size).  If
 * check_prev, the head CRC record must carry prev_crc (the chain of the
 * previous segment).  It calls visit for each valid record.  Returns 0 with
 * *out describing where the valid records end and what follows, or the
 * error a visitor returned (out->damage_off/why then name the record). */
int wal__segment_scan(const unsigned char *buf, size_t size, uint32_t prev_crc,
                      bool check_prev, wal__visit_fn visit, void *arg,
                      struct wal__scan *out);

/* Segment files (segment.c). */
struct wal__seg {
    uint64_t seq;         /* sequence number from the name */
    uint64_t first_index; /* first index from the name */
    uint64_t max_index;   /* highest entry index in it, 0 = none */
    uint64_t end;         /* bytes its records take, once known (open's
                             scan, or the cut that closed it); 0 = not
                             known.  Past it the file reads as zeros. */
};

void wal__seg_name(char out[WAL__NAME_BYTES], uint64_t seq,
                   uint64_t first_index);
/* wal__seg_list lists the segments of the dir open as dir_fd, sorted by
 * sequence; *segs_out is owned by the caller (mem_free). */
int wal__seg_list(int dir_fd, struct wal__seg **segs_out, size_t *n_out);
/* wal__seg_read reads file name (in dir_fd) into *buf (grown with
 * mem_realloc, *cap its size): its first limit bytes (0: all of it).
 * *size_out gets the length of what was read, which stops at the end of
 * the last data region: what follows (an unwritten preallocated tail)
 * reads as zeros. */
int wal__seg_read(int dir_fd, const char *name, uint64_t limit,
                  unsigned char **buf, size_t *cap, size_t *size_out);
/* wal__tmp_create creates (truncating) the pre-created segment, preallocated
 * to bytes; returns its fd in *fd_out. */
int wal__tmp_create(int dir_fd, uint64_t bytes, int *fd_out);
/* wal__room allocates the blocks of [offset, offset + len) of fd (and up
 * to WAL__ROOM_STEP more when there is room) before a write past the
 * preallocated size, so that a full disk fails here with nothing written
 * instead of in the middle of a record.  *end_out: the end of what is now
 * allocated (UINT64_MAX when the fs cannot preallocate).  ERR_NOSPC etc. */
#define WAL__ROOM_STEP (1u << 20)
int wal__room(int fd, uint64_t offset, uint64_t len, uint64_t *end_out);
/* wal__dir_sync fsyncs the dir (unless no_fsync). */
int wal__dir_sync(int dir_fd, bool no_fsync);

/* The handle; owned by one thread (see wal.h). */
struct wal {
    char *dir;                 /* path of the WAL dir (owned) */
    struct wal_options opts;   /* options, defaults filled in */
    int dir_fd;                /* the dir, for *at() calls and fsync */
    int fd;                    /* the last segment (appends go here) */
    int tmp_fd;                /* pre-created next segment, -1 = none */
    uint64_t offset;           /* write offset in the last segment */
    uint64_t seg_bytes;        /* the last segment's preallocated size: it
                                  is cut there (opts.segment_bytes when it
                                  was pre-created, or its size at open) */
    uint64_t tmp_bytes;        /* the pre-created one's size */
    uint64_t head_end;         /* offset after the last segment's head */
    uint32_t crc;              /* CRC of the last record written */
    uint64_t node_id;          /* metadata */
    uint64_t cluster_id;       /* metadata */
    uint64_t last_index;       /* last entry index in the log, 0 = none */
    bool has_hs;               /* hs is valid */
    struct wal_hardstate hs;   /* latest HardState (repeated at heads) */
    bool has_snap;             /* snap is valid */
    struct wal_snapshot snap;  /* latest snapshot marker (repeated) */
    uint64_t released;         /* segments wholly below this index are
                                  released (wal_release_before); 0 = none */
    struct wal__seg *segs;     /* segments in the dir, oldest first */
    size_t nsegs;              /* entries in segs (>= 1 once open) */
    size_t segs_cap;           /* capacity of segs */
    unsigned char *buf;        /* reusable write/read buffer */
    size_t buf_cap;            /* capacity of buf */
    bool dirty;                /* appended since the last sync */
    int failed;                /* 0, or the error that broke the wal */
    _Atomic bool low;          /* the next segment cannot be pre-created
                                  (wal_space_low; any thread reads) */
    uint64_t next_failed_ms;   /* when it last failed (0: it did not) */
    uint64_t room_end;         /* past the segment size (a put-off cut):
                                  blocks are allocated up to here (0: none
                                  yet, UINT64_MAX: the fs cannot tell) */
    struct wal_stats stats;    /* counters */
};

/* wal__opts_fill copies in (NULL: defaults) to out with defaults filled
 * in; ERR_INVAL for a bad size. */
int wal__opts_fill(const struct wal_options *in, struct wal_options *out);
/* wal__alloc allocates a handle for dir (which must exist) with no segment
 * open yet. */
int wal__alloc(const char *dir, const struct wal_options *opts,
               struct wal **wal_out);
/* wal__buf_reserve grows wal->buf to at least bytes. */
int wal__buf_reserve(struct wal *wal, size_t bytes);
/* wal__log_corrupt logs the one error line of a refusal. */
void wal__log_corrupt(const struct wal *wal, uint64_t seq, uint64_t first,
                      size_t off, const char *why);

#endif
