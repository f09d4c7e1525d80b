/*
 * backend_int.h - declarations shared between backend.c and
 * backend_journal.c (not part of the module's manual, backend.h).
 */
#ifndef CETCD_BACKEND_BACKEND_INT_H
#define CETCD_BACKEND_BACKEND_INT_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct backend;
struct backend_journal;

/* Reads of a 16-, 32- or 64-bit field in this machine's order at any
 * alignment: LMDB's pages and meta (backend_snap.c, backend_pages.c) and
 * the journal's records (backend_journal.c). */
static inline uint16_t backend__get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t backend__get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t backend__get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Most buckets (named databases) an env holds. */
#define BACKEND__MAX_BUCKETS 16

/* Where the env keeps its journal (NULL when none runs): set and cleared
 * with the writer excluded, read by the writer. */
struct backend_journal **backend__journal_slot(struct backend *be);
/* A write txn is open (valid with the writer excluded, for asserts). */
bool backend__writing(const struct backend *be);

/* The LMDB env and its data file's descriptor (backend_pages.c). */
MDB_env *backend__env(struct backend *be);
int backend__fd(const struct backend *be);

/* Writer: the open write txn writes (dbi, key) of journal j.  A failure
 * (memory) fails the journal, never the write. */
void backend__journal_touch(struct backend_journal *j, MDB_dbi dbi,
                            const void *key, size_t key_len);
/* Writer, before mdb_txn_commit: reads the final value of every key the
 * txn touched into the txn's pending records. */
void backend__journal_capture(struct backend_journal *j, MDB_txn *txn);
/* Writer, after the commit: committed ? publish the pending records :
 * drop them (also for an aborted txn). */
void backend__journal_end_txn(struct backend_journal *j, bool committed);
/* Any thread: the name of bucket dbi (bucket_open records it), copied
 * into name (size >= 64); false if dbi was never opened. */
bool backend__bucket_name(struct backend *be, MDB_dbi dbi, char *name,
                          unsigned *flags_out);

#endif
