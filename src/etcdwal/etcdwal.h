/*
 * etcdwal.h - a reader of etcd's write-ahead log (etcd 3.4/3.5
 * member/wal/NNN.wal files), for starting cetcd on an etcd data dir (issue 21's
 * second part: the import itself is not built yet; this is its first
 * piece).  Uses util only.
 *
 * THE FORMAT (etcd's wal/encoder.go, decoder.go, walpb/record.proto).
 * A directory of files named %016x-%016x.wal (sequence, first index), read
 * in name order as one stream.  Each file is a sequence of frames:
 *   [0, 8)         length field, u64 little-endian: the low 56 bits are
 *                  the record's bytes n; when the top bit is set, the low
 *                  3 bits of the top byte are the padding bytes p after it
 *   [8, 8+n)       walpb.Record {1 type int64, 2 crc uint32, 3 data bytes}
 *   [8+n, 8+n+p)   zero padding (frames are 8-byte aligned)
 * A zero length field (a file's preallocated tail) or the end of a file
 * ends that file.  crc is CRC-32C (Castagnoli) of data chained over every
 * record of the stream: crc(r) = extend(crc(previous record), r.data);
 * a crc record (type 4) instead carries the chain's value so far (each
 * file starts with one: 0 for the first file) and sets it.  Types:
 *   1 metadata  etcdserverpb.Metadata {1 NodeID, 2 ClusterID} (uint64)
 *   2 entry     raftpb.Entry {1 Type, 2 Term, 3 Index, 4 Data}
 *   3 state     raftpb.HardState {1 Term, 2 Vote, 3 Commit}
 *   4 crc       the chain's value (above)
 *   5 snapshot  walpb.Snapshot {1 Index, 2 Term}
 * A record of the last file that is cut short, or that fails its CRC and
 * has a piece between 512-byte sector boundaries all zero (etcd's
 * isTornEntry: a sector the write never reached), is a torn write (etcd
 * repairs it by truncating): the reader reports it and stops there.
 * Anything else, a bit flip in the last record too, is corruption.
 *
 * Threads: none kept; the functions are reentrant.
 */
#ifndef CETCD_ETCDWAL_ETCDWAL_H
#define CETCD_ETCDWAL_ETCDWAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum etcdwal_type {
    ETCDWAL_METADATA = 1,
    ETCDWAL_ENTRY = 2,
    ETCDWAL_STATE = 3,
    ETCDWAL_CRC = 4,
    ETCDWAL_SNAPSHOT = 5,
};

/* etcd's maxWALEntrySizeLimit: a longer record is refused. */
#define ETCDWAL_RECORD_MAX ((uint64_t)10 * 1024 * 1024)

/* One record (data borrowed for the callback's duration). */
struct etcdwal_record {
    int64_t type;          /* enum etcdwal_type (others refused) */
    uint32_t crc;          /* as stored */
    const uint8_t *data;   /* data bytes */
    size_t len;            /* their length */
    uint64_t off;          /* the frame's offset in its file */
};

typedef int (*etcdwal_fn)(void *arg, const struct etcdwal_record *r);

/* The reader's state across files. */
struct etcdwal_reader {
    uint32_t crc;       /* the chain so far */
    bool torn;          /* the stream ended in a torn record */
    uint64_t torn_off;  /* where (in the last file) */
    char err[320];      /* why the last call failed */
};

/* etcdwal_read_mem reads one file's bytes (name for messages), calling fn
 * for each valid record in order.  last: this is the last file (a torn
 * tail there sets r->torn and is not an error).  Returns 0, fn's nonzero
 * value, or ERR_CORRUPT (r->err names the file and offset). */
int etcdwal_read_mem(struct etcdwal_reader *r, const char *name,
                     const uint8_t *buf, size_t len, bool last, etcdwal_fn fn,
                     void *arg);

/* etcdwal_read_dir reads every *.wal file of dir in name order.  Errors:
 * ERR_CORRUPT, ERR_NOTFOUND (no .wal file), ERR_IO, ERR_NOMEM, fn's. */
int etcdwal_read_dir(struct etcdwal_reader *r, const char *dir, etcdwal_fn fn,
                     void *arg);

/* Decoded payloads.  decode: 0 or ERR_CORRUPT, never asserts. */
struct etcdwal_entry {
    uint64_t type;        /* raftpb.EntryType: 0 normal, 1 conf change, 2 v2 */
    uint64_t term;
    uint64_t index;
    const uint8_t *data;  /* borrowed from the record */
    size_t len;
};
struct etcdwal_state {
    uint64_t term, vote, commit;
};
struct etcdwal_snapshot {
    uint64_t index, term;
};
struct etcdwal_metadata {
    uint64_t node_id, cluster_id;
};
int etcdwal_entry_decode(const uint8_t *p, size_t len,
                         struct etcdwal_entry *out);
int etcdwal_state_decode(const uint8_t *p, size_t len,
                         struct etcdwal_state *out);
int etcdwal_snapshot_decode(const uint8_t *p, size_t len,
                            struct etcdwal_snapshot *out);
int etcdwal_metadata_decode(const uint8_t *p, size_t len,
                            struct etcdwal_metadata *out);

/* --- snap files (member/snap/%016x-%016x.snap) --------------------------
 * A snap file is snappb.Snapshot {1 crc uint32, 2 data bytes} with crc =
 * CRC-32C of data; data is raftpb.Snapshot {1 data (the v2 store as JSON:
 * etcd 3.4 keeps the members there), 2 metadata {1 conf_state {1 voters,
 * 2 learners (repeated uint64)}, 2 index, 3 term}}.
 * etcdwal_snap_decode checks and decodes a snap file's bytes (borrowed:
 * out->store points into them); up to ETCDWAL_SNAP_IDS_MAX voters and as
 * many learners.  Errors: ERR_CORRUPT (err, when not NULL, says why and
 * where), never asserts on the bytes. */
#define ETCDWAL_SNAP_IDS_MAX 64
struct etcdwal_snap {
    uint64_t index, term;                 /* metadata */
    uint64_t voters[ETCDWAL_SNAP_IDS_MAX];
    size_t n_voters;
    uint64_t learners[ETCDWAL_SNAP_IDS_MAX];
    size_t n_learners;
    const uint8_t *store;                 /* the v2 store JSON */
    size_t store_len;
};
int etcdwal_snap_decode(const uint8_t *buf, size_t len,
                        struct etcdwal_snap *out, char *err, size_t err_len);

/* --- the protobuf field reader (also the import's: etcd's records) ------
 * One field: number, wire type, varint value or bytes. */
struct etcdwal_field {
    uint64_t num;      /* field number (>= 1) */
    unsigned wt;       /* wire type: 0 varint, 1 fixed64, 2 bytes, 5 fixed32 */
    uint64_t v;        /* the value (0, 1, 5) or the length (2) */
    const uint8_t *b;  /* wire type 2: the bytes */
    size_t blen;       /* their length */
};
/* etcdwal_field_next: the field at *pos of p[0, len) into *f, *pos moved
 * past it; 1 at the end, 0, or ERR_CORRUPT (never asserts on the bytes;
 * wire types 3 and 4, groups, are ERR_CORRUPT). */
int etcdwal_field_next(const uint8_t *p, size_t len, size_t *pos,
                       struct etcdwal_field *f);

#endif
