/*
 * snap_int.h - what the store-snapshot files share: snapshot.c (the design
 * and the life cycle), snap_files.c (paths and files), snap_worker.c (the
 * worker thread), snap_raft.c (the raft-pass holder's side) and store.c
 * (the store, its gate and swap).  Private to src/server; the server-wide
 * declarations (snap_pin.c's among them) are in server_int.h.
 */
#ifndef CETCD_SERVER_SNAP_INT_H
#define CETCD_SERVER_SNAP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raft/raft.h"

struct server;

#define SNAP_LOG_KEEP 5000        /* entries kept behind a snapshot */
#define SNAP_APPLY_WAIT_MS 10000  /* a copy waits this long for apply */
#define SNAP_RESEND_MS 3000       /* the same copy again only after this */
#define SNAP_EXPORT_KEEP_MS 30000 /* an unused export is removed after this */
#define SNAP_PATH_MAX 4400

/* A received snapshot on its way from the transport to raft. */
struct server_snap_recv {
    struct server_snap_recv *next; /* FIFO link */
    uint64_t index;                /* the MsgSnap's snapshot index */
    struct raft_conf_state conf;   /* the staged store's members */
    bool has_conf;                 /* conf was read (a cetcd store) */
    char path[SNAP_PATH_MAX];      /* the transport's verified file */
    size_t len;                    /* bytes of msg */
    uint8_t msg[];                 /* raft_msg_encode of the MsgSnap */
};

/* --- snap_files.c (any thread; paths are truncated at cap) --- */
/* snprintf for paths (a wrapper: paths are bounded by member_dir, and a
 * truncated one only fails the open/rename that uses it). */
__attribute__((format(printf, 3, 4))) void
server__pathf(char *buf, size_t cap, const char *fmt, ...);
/* <member>/snap, <member>/snap/<index>.snap.db, <member>/db,
 * <member>/snap/export-<index>.db */
void server__snap_dir(const struct server *s, char *buf, size_t cap);
void server__snap_file(const struct server *s, uint64_t index, char *buf,
                       size_t cap);
void server__db_dir(const struct server *s, char *buf, size_t cap);
void server__snap_export_file(const struct server *s, uint64_t index,
                              char *buf, size_t cap);
/* Removes a staging dir and the two files LMDB keeps there. */
void server__snap_rm_staging(const char *dir);
/* Copies src to dst (created or truncated) and fsyncs dst.  Errors: the
 * syscalls'. */
int server__copy_file(const char *src, const char *dst);
/* Opens the LMDB file <dir>/data.mdb as a store and reads its consistent
 * index and its members (ERR_NOTFOUND in *conf_rc_out and an empty conf
 * for a store without a members table).  Errors: the backend's. */
int server__snap_read_meta(const char *dir, uint64_t *index_out,
                           struct raft_conf_state *conf_out,
                           int *conf_rc_out);
/* "voters=(id,...) learners=(id,...)" for the log. */
void server__conf_fmt(const struct raft_conf_state *cs, char *buf,
                      size_t cap);
/* The same membership (as sets). */
bool server__conf_same(const struct raft_conf_state *a,
                       const struct raft_conf_state *b);
/* The indexes of the received snap files, ascending (mem_free *out). */
int server__snap_list(const struct server *s, uint64_t **out, size_t *n_out);
/* Removes the received snap files the store's pin has gone past. */
void server__snap_prune(struct server *s);
/* Raft thread: removes the export file (a send in flight keeps its fd). */
void server__snap_export_drop(struct server *s);

/* --- snap_worker.c --- */
void *server__snap_worker_main(void *arg);

/* --- store.c: closing the gate and swapping the store (raft_mu and
 * apply_mu held, or before the threads run; see server.h) --- */
/* Closes the store gate and waits until no reader is inside. */
void server__store_gate_close(struct server *s);
void server__store_gate_open(struct server *s);
/* Replaces the store by the LMDB file src (moved, or copied when !move)
 * and reopens it (members reloaded, pinned).  Nobody may use the store
 * meanwhile: before the threads run, or with apply_mu held and the gate
 * closed.  Errors: the syscalls', the backend's, the pin's. */
int server__store_replace(struct server *s, const char *src, bool move);

#endif
