/*
 * import_int.h - private to the import of an etcd data dir
 * (import_etcd.c: files, renames, the new WAL; import_db.c: etcd's bbolt
 * buckets into the new store; import_wal.c: etcd's WAL read and its
 * entries made cetcd's).  One import runs on the main thread at start-up,
 * before the member exists (server.h server_import_etcd).
 */
#ifndef CETCD_SERVER_IMPORT_INT_H
#define CETCD_SERVER_IMPORT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "etcdwal/etcdwal.h"
#include "mvcc/mvcc.h"
#include "server/server.h"

/* Snapshot markers of etcd's WAL remembered (the newest). */
#define IMPORT_SNAPS_MAX 64

/* One entry of etcd's log kept for the import. */
struct import_ent {
    uint64_t index, term; /* raft position */
    uint64_t type;        /* raftpb.EntryType: 0 normal, 1 conf change */
    uint8_t *data;        /* owned copy (mem_malloc), NULL when empty */
    size_t len;           /* its bytes */
};

/* The import's state (main thread, one import). */
struct import {
    char src[4200];                 /* etcd's member dir (read only) */
    char tmp[4200];                 /* the new member dir being built */
    char path[4400];                /* the file being read (messages) */
    /* etcd's WAL */
    uint64_t node_id, cluster_id;   /* its metadata */
    struct etcdwal_state hs;        /* its last hard state */
    uint64_t first_index;           /* the log's first and last index */
    uint64_t last_index;            /* (0: no entry) */
    struct import_ent *ents;        /* kept: entries > ci, conf changes */
    size_t n_ents, cap_ents;
    struct etcdwal_snapshot snaps[IMPORT_SNAPS_MAX]; /* newest markers */
    size_t n_snaps;
    /* etcd's db */
    uint64_t snap_index;            /* the newest snap file's, 0: none */
    uint64_t ci;                    /* meta consistent_index */
    uint64_t ci_term;               /* the term of the entry at ci */
    uint64_t db_term;               /* meta term (etcd 3.5+), 0: none */
    mvcc_rev compact;               /* meta scheduledCompactRev, 0: none */
    mvcc_rev last_rev;              /* the newest version's revision */
    /* members (the db's, then the log's changes) */
    struct server_member_info *m;   /* SERVER_MEMBERS_MAX, sorted by id */
    size_t n_m;
    uint64_t removed[256];          /* members_removed */
    size_t n_removed;
    /* what was imported (the log line) */
    uint64_t versions, leases, users, roles, alarms, translated;
    bool auth_enabled;
    /* the new store */
    struct backend *be;
    struct mvcc_store *ms;
    struct mvcc_batch *b;           /* the one write txn of the import */
    backend_bucket b_lease, b_auth, b_members, b_removed, b_alarm;
};

/* import_wal.c: reads <src>/wal (all of it) and the newest snap file.
 * Errors: ERR_CORRUPT (logged, naming the file and offset), ERR_NOMEM,
 * ERR_IO, ERR_NOTFOUND (no WAL). */
int import__wal_read(struct import *im);
/* import_wal.c: the term of the entry at im->ci (0: unknown). */
uint64_t import__term_at(const struct import *im, uint64_t index);
/* import_wal.c: the members as etcd 3.4 starts with them: the newest snap
 * file's v2 store (read by import__wal_read into im->m), then the log's
 * conf changes and member attributes after it up to the commit index.
 * Errors: ERR_CORRUPT (logged), ERR_IMPORT_UNSUPPORTED. */
int import__members_replay(struct import *im);
/* import_wal.c: entry e (index > ci) as cetcd's log holds it: *out owned
 * (mem_malloc; NULL, 0: an empty entry).  Errors: ERR_IMPORT_UNSUPPORTED
 * (logged: a request cetcd cannot take), ERR_CORRUPT, ERR_NOMEM. */
int import__translate(struct import *im, const struct import_ent *e,
                      uint8_t **out, size_t *len_out);
/* import_wal.c: the members of a snap file's v2 store (JSON, len bytes)
 * into im->m and im->removed.  Errors: ERR_CORRUPT (logged). */
int import__v2_members(struct import *im, const uint8_t *p, size_t len);
/* import_wal.c: parses etcd's membership.Member JSON into m (id given). */
int import__member_json(const uint8_t *p, size_t len, uint64_t id,
                        struct server_member_info *m);
/* import_wal.c: id's slot in im->m, added (sorted) when absent; NULL when
 * full. */
struct server_member_info *import__member_slot(struct import *im,
                                               uint64_t id);
void import__member_remove(struct import *im, uint64_t id);

/* import_db.c: the db's meta (consistent index, compaction) without
 * writing anything.  Errors: ERR_BBOLT_CORRUPT (logged), ERR_NOMEM. */
int import__db_meta(struct import *im);
/* import_db.c: every bucket into the new store's open batch. */
int import__db_write(struct import *im);

#endif
