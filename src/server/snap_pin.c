/*
 * snap_pin.c - the store's durable points: how a store torn by a power
 * loss is rebuilt without a full copy of it (see snapshot.c's header for
 * how pins, raft snapshots and the WAL fit together).
 *
 * A pin (backend.h, "Pins") is a committed state P of the store, kept
 * intact on disk by a read txn that stays open until the next pin is
 * durable, with P's two meta pages saved here.  File, in <member>/snap/:
 *
 *   <index %016x>.pin   (index: P's consistent index)
 *     bytes 0..7    "CETCDPIN"
 *     8..11         version, 1 (u32, little endian, as every field)
 *     12..15        meta_len: bytes of the meta pages (two pages)
 *     16..23        P's consistent index
 *     24..31        P's LMDB txn id
 *     32..39        st_dev of db/data.mdb when P was pinned
 *     40..47        st_ino of it (the file P's pages live in)
 *     48..          meta_len bytes: pages 0 and 1 of data.mdb at the pin
 *     48+meta_len   CRC-32C of every byte before it (u32)
 *
 * Written to a temp name, fsynced, renamed, dir fsynced; the older pin
 * file is then removed.  With --unsafe-no-fsync none of a pin's syncs is
 * made (the store's pages, the pin file, the dir), as etcd turns off all
 * of its fsyncs with that flag: a kill -9 or a clean stop still loses
 * nothing (the page cache holds every write), but after a power loss the
 * pin the boot guard rebuilds from may be torn, as the WAL may be.
 * Two may exist after a crash: the newest valid one wins (the older one's
 * read txn was held until the newer was durable).
 *
 * A pin is valid only while its read txn is (or, after a power loss, was)
 * held: a new process holds none, so server__pin_locked pins the store
 * again at start-up before anything writes to it, and a replaced store
 * (a snapshot installed) drops the old pin and its file first.  A
 * defragmentation instead keeps the old pin FILE until the new store's
 * pin is durable: the old store's file stays linked as db/prev.mdb
 * (defrag.c), which find_aside also looks for after a power loss.
 */
#include "util/check.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/crc32c.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

#define PIN_HDR 48u
#define PIN_VERSION 1u
#define PIN_META_MAX (2u * 65536u) /* two pages of LMDB's largest size */
#define PIN_PATH_MAX 4400

/* What a pin holds, and when the next is taken.  While a pin's read txn
 * is open LMDB reuses no page freed after it: every copy-on-write page of
 * every commit since is a new page (the hot pages of each tree are copied
 * at every commit), and those pages come back only once the next pin is
 * durable and this one ends.  So the file holds the pages in use plus
 * what the commits since the older of the two pins freed.
 *
 * A new pin is asked for once the pages freed since the durable pin
 * (backend_freed_since: the freelist's records after its txn, which are
 * exactly the pages it holds back) pass PIN_HELD_DIV-th of the store's
 * extent, at least PIN_HELD_MIN: a VOLUME, whatever the write rate.  So
 * the file stays near in use + 1/32 + what is freed while the next pin is
 * made durable (its fsync; the one part that still grows with the write
 * rate against the disk's speed).  Before (session 16) the rule was a
 * TIME, a pin 250 ms after the last once 16 commits followed it: a fast
 * writer (64 clients on a quiet machine) freed 30-40 MiB in 250 ms and
 * the file reached 4-5x its pages in use; before that, growth alone (the
 * rule below) was a ratchet: the pages freed under one pin are reused
 * only after the next is durable, and a pin asked for growth only comes
 * after the file grew again, so the file grew by at least PIN_GROW_MIN
 * per pin.  A pin costs one sync of the pages written meanwhile and a pin
 * file (three more fsyncs), on cetcd-snap, beside the writer: about one
 * pin per 100 puts of 256 B at one client with a small store, one per
 * ~800 at 100 clients (PIN_HELD_MIN is the knob between pins and space).
 * Every page a commit writes is a new one until the next pin, and a sync
 * of the file writes them all, a few MiB: done at once it held the WAL's
 * fsync beside it for several ms (1 client p99 3.6-4.5 ms, etcd 2.4), so
 * it is paced (backend_sync_paced: 2.0 ms, docs/BENCHMARKS.md session 18).
 * Since session 20 a pin after the first writes only the pages it reaches
 * that the durable pin did not (backend_pin_sync): most pages written
 * between two pins are copied again before the next one and need no
 * write at all (at one client ~11 pages written per put before, ~4
 * after, docs/BENCHMARKS.md session 20).  Until
 * session 18 the store was written through a writable map and the sync
 * also write-protected its hot pages, a fault each at their next write:
 * a quarter of a put's CPU at 100 clients. */
#define PIN_HELD_MIN ((uint64_t)4 << 20)
#define PIN_HELD_DIV 32u
/* ... and once the file grew by this much, or by PIN_GROW_DIV-th of its
 * size, since the last pin: writes that free little (new keys, large
 * values on overflow pages) still pin, which releases the WAL behind
 * them (snap_raft.c) and bounds what a power loss replays. */
#define PIN_GROW_MIN ((uint64_t)4 << 20)
#define PIN_GROW_DIV 64u
/* While the store's disk is nearly full (backend_space_low), a pin as
 * soon as anything was freed: a compaction's steps there take the pages
 * the previous ones freed, reusable only behind a new pin, and a step
 * left with little room frees little (a larger budget could leave the
 * compaction waiting for a pin that never comes). */
#define PIN_HELD_LOW ((uint64_t)1)
/* The free list is counted (for the pages in use) at most every this
 * many pins unless the extent moved (promote). */
#define PIN_IN_USE_EVERY 64u
/* The raft thread counts the pages freed since the pin at most this
 * often (a read txn and a walk of the new free-list records). */
#define PIN_COUNT_MS 5u

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void pin_dir(const struct server *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/snap", s->member_dir);
}

/* The pin file of `index` (suffix ".pin"), or its temp (".pin.tmp"). */
static void pin_path_sfx(const struct server *s, uint64_t index,
                         const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/snap/%016" PRIx64 "%s", s->member_dir, index,
             suffix);
}

static void pin_path(const struct server *s, uint64_t index, char *buf,
                     size_t cap)
{
    pin_path_sfx(s, index, ".pin", buf, cap);
}

/* The indexes of the pin files, ascending (mem_free *out). */
static int pin_list(const struct server *s, uint64_t **out, size_t *n_out)
{
    char dir[PIN_PATH_MAX];
    pin_dir(s, dir, sizeof dir);
    return server__snap_indexes(dir, ".pin", out, n_out);
}

/* --unsafe-no-fsync: the pins are not made durable (the file's head). */
static bool no_sync(const struct server *s)
{
    return s->cfg.unsafe_no_fsync;
}

/* The spare: a released pin file kept (renamed, not removed) so that the
 * next pin file is written into its blocks.  A pin then needs no new
 * space: on a full disk a compaction's deletes come back for reuse only
 * once a pin after them is durable (backend.h, "A full disk"), and that
 * pin could not be written.  A pin written without a spare leaves one
 * (spare_make), so the disk may fill up before a second pin ever was.
 * Not a *.pin name: never read as a pin. */
static void spare_path(const struct server *s, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/snap/pin.spare", s->member_dir);
}

/* Releases the files named by v[0..n) (suffix: ".pin" or ".pin.tmp")
 * but *keep's (keep NULL: all): the first becomes the spare while
 * *want_spare, the others are removed. */
static int release_files(const struct server *s, const uint64_t *v, size_t n,
                         const char *suffix, const uint64_t *keep,
                         bool *want_spare)
{
    char spare[PIN_PATH_MAX];
    spare_path(s, spare, sizeof spare);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char p[PIN_PATH_MAX];
        pin_path_sfx(s, v[i], suffix, p, sizeof p);
        if (keep != NULL && v[i] == *keep)
            continue;
        if (*want_spare && rename(p, spare) == 0) {
            *want_spare = false;
            continue;
        }
        if (unlink(p) != 0 && errno != ENOENT)
            rc = err_from_errno(errno);
    }
    return rc;
}

/* Removes every pin file but *keep's (keep NULL: all, the spare too;
 * else the first one released becomes the spare if there is none), and
 * the temp files a crash left behind (pin_file_write's), and syncs the
 * dir. */
static int pin_files_remove(const struct server *s, const uint64_t *keep)
{
    char dir[PIN_PATH_MAX], spare[PIN_PATH_MAX];
    pin_dir(s, dir, sizeof dir);
    spare_path(s, spare, sizeof spare);
    bool want_spare = keep != NULL && access(spare, F_OK) != 0;
    uint64_t *v, *t;
    size_t n, nt;
    int rc = pin_list(s, &v, &n);
    if (rc != 0)
        return rc;
    rc = release_files(s, v, n, ".pin", keep, &want_spare);
    mem_free(v);
    /* (no pin file is being written: the pins are made one at a time) */
    if (server__snap_indexes(dir, ".pin.tmp", &t, &nt) == 0) {
        int trc = release_files(s, t, nt, ".pin.tmp", NULL, &want_spare);
        rc = rc != 0 ? rc : trc;
        mem_free(t);
    }
    if (keep == NULL && unlink(spare) != 0 && errno != ENOENT)
        rc = err_from_errno(errno);
    return rc == 0 && !no_sync(s) ? fs_fsync_dir(dir) : rc;
}

/* spare_make writes a spare of len bytes (buf) after a pin that found
 * none: its blocks are what counts, not its durability (a crash that
 * loses it loses the reserve only until the next pin). */
static void spare_make(const struct server *s, const uint8_t *buf,
                       size_t len)
{
    char spare[PIN_PATH_MAX];
    spare_path(s, spare, sizeof spare);
    int fd = open(spare, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    int rc = fs_pwrite_all(fd, buf, len, 0);
    close(fd);
    if (rc != 0) /* a full disk: no spare rather than a short one */
        unlink(spare);
}

/* Writes the pin file of p (consistent index `index`) durably. */
static int pin_file_write(struct server *s, uint64_t index,
                          const struct backend_pin *p)
{
    uint64_t dev, ino;
    int rc = server__defrag_dir_settle(s); /* db/data.mdb names that file */
    if (rc == 0)
        rc = backend_file_id(s->be, &dev, &ino);
    if (rc != 0)
        return rc;
    CHECK(p->meta_len > 0 && p->meta_len <= PIN_META_MAX);
    size_t len = PIN_HDR + p->meta_len + 4;
    uint8_t *buf = mem_malloc(len);
    if (buf == NULL)
        return ERR_NOMEM;
    memcpy(buf, "CETCDPIN", 8);
    put32(buf + 8, PIN_VERSION);
    put32(buf + 12, (uint32_t)p->meta_len);
    put64(buf + 16, index);
    put64(buf + 24, p->txnid);
    put64(buf + 32, dev);
    put64(buf + 40, ino);
    memcpy(buf + PIN_HDR, p->meta, p->meta_len);
    put32(buf + PIN_HDR + p->meta_len,
          crc32c_extend(0, buf, PIN_HDR + p->meta_len));
    char path[PIN_PATH_MAX], tmp[PIN_PATH_MAX + 8], dir[PIN_PATH_MAX];
    pin_path(s, index, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    pin_dir(s, dir, sizeof dir);
    /* Into the spare's blocks when there is one (the same length: the
     * page size does not change; a longer one is cut). */
    char spare[PIN_PATH_MAX];
    spare_path(s, spare, sizeof spare);
    int fd = -1;
    bool had_spare = rename(spare, tmp) == 0;
    if (had_spare)
        fd = open(tmp, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    rc = fd < 0 ? err_from_errno(errno) : fs_pwrite_all(fd, buf, len, 0);
    struct stat st;
    if (rc == 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > len &&
        ftruncate(fd, (off_t)len) != 0)
        rc = err_from_errno(errno);
    if (rc == 0 && !no_sync(s) && fsync(fd) != 0)
        rc = err_from_errno(errno);
    if (fd >= 0)
        close(fd);
    /* A pin at the durable pin's index (no entry applied since) replaces
     * its file: that file's blocks become the spare (released pins make
     * it otherwise, pin_files_remove; before, a full disk that stopped
     * the writes found no spare for the pin after a compaction). */
    if (rc == 0 && had_spare)
        (void)link(path, spare);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = err_from_errno(errno);
    if (rc == 0 && !no_sync(s))
        rc = fs_fsync_dir(dir);
    /* a failed pin keeps the spare's blocks (as the spare again) */
    if (rc != 0 &&
        !(had_spare && access(spare, F_OK) != 0 && rename(tmp, spare) == 0))
        unlink(tmp);
    if (rc == 0 && !had_spare)
        spare_make(s, buf, len);
    mem_free(buf);
    return rc;
}

int server__pin_file_read(const struct server *s, struct server_pin_file *out)
{
    CHECK(s != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    uint64_t *v;
    size_t n;
    int rc = pin_list(s, &v, &n);
    if (rc != 0)
        return rc;
    rc = ERR_NOTFOUND;
    for (size_t i = n; i-- > 0 && rc != 0;) {
        char path[PIN_PATH_MAX];
        pin_path(s, v[i], path, sizeof path);
        rc = server__pin_decode(path, out);
        if (rc == 0 && out->index != v[i])
            rc = ERR_CORRUPT;
        if (rc != 0) {
            log_warn("etcdserver", "ignoring the store pin %s: %s", path,
                     err_str(rc));
            mem_free(out->meta);
            memset(out, 0, sizeof *out);
        }
    }
    mem_free(v);
    return rc;
}

/* Reads and checks the pin file at path (see the layout above). */
int server__pin_decode(const char *path, struct server_pin_file *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_from_errno(errno);
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : err_from_errno(errno);
    size_t len = rc == 0 ? (size_t)st.st_size : 0;
    if (rc == 0 && (len < PIN_HDR + 4 || len > PIN_HDR + PIN_META_MAX + 4))
        rc = ERR_CORRUPT;
    uint8_t *buf = rc == 0 ? mem_malloc(len) : NULL;
    if (rc == 0 && buf == NULL)
        rc = ERR_NOMEM;
    if (rc == 0)
        rc = fs_pread_all(fd, buf, len, 0);
    close(fd);
    if (rc == 0 && (memcmp(buf, "CETCDPIN", 8) != 0 ||
                    get32(buf + 8) != PIN_VERSION ||
                    get32(buf + 12) != len - PIN_HDR - 4 ||
                    get32(buf + len - 4) != crc32c_extend(0, buf, len - 4)))
        rc = ERR_CORRUPT;
    if (rc == 0) {
        out->index = get64(buf + 16);
        out->txnid = get64(buf + 24);
        out->dev = get64(buf + 32);
        out->ino = get64(buf + 40);
        out->meta_len = len - PIN_HDR - 4;
        memmove(buf, buf + PIN_HDR, out->meta_len);
        out->meta = buf;
        rc = backend_meta_check(out->meta, out->meta_len, out->txnid);
    }
    if (rc != 0) {
        mem_free(buf);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

/* --- taking pins ----------------------------------------------------------- */

/* Pins the store's latest state into *p, with its index and members
 * (and the file's extent then in *bytes).  The writer must be excluded
 * (apply_mu held, or no threads). */
static int capture(struct server *s, struct backend_pin *p, uint64_t *index,
                   struct raft_conf_state *conf, uint64_t *bytes)
{
    *bytes = backend_file_bytes(s->be);
    /* Before the pin: reading the members bucket may begin (and commit,
     * empty) a write txn to open it, which must not follow the pin. */
    int rc = server__members_conf_read(s->be, conf);
    if (rc == ERR_NOTFOUND) {
        memset(conf, 0, sizeof *conf); /* a store without members yet */
        rc = 0;
    }
    if (rc == 0)
        rc = backend_pin_begin(s->be, p);
    if (rc == 0)
        *index = mvcc_consistent_index(s->mvcc);
    return rc;
}

/* The durable pin is now p (index): the previous one is released.
 * Caller: inside the gate (worker) or with the store to itself. */
static void promote(struct server *s, struct backend_pin *p, uint64_t index,
                    uint64_t bytes)
{
    struct server_snap *sn = &s->snap;
    struct backend_pin old = sn->pin;
    pthread_mutex_lock(&sn->mu);
    sn->pin = *p;
    sn->pin_index = index;
    sn->pin_bytes = bytes;
    sn->pin_ms = server__clock_ms(s);
    pthread_mutex_unlock(&sn->mu);
    memset(p, 0, sizeof *p);
    (void)pin_files_remove(s, &index);
    backend_pin_end(&old);
    /* The pages in use, what the WAL's budget is measured against: a walk
     * of the whole free list, so only when the extent moved by 1/16 since
     * the last count, and every PIN_IN_USE_EVERY pins (deletes). */
    uint64_t ext = backend_file_bytes(s->be), in_use = 0;
    if ((sn->in_use_pins++ % PIN_IN_USE_EVERY == 0 ||
         ext > sn->in_use_extent + sn->in_use_extent / 16 ||
         ext < sn->in_use_extent) &&
        backend_size(s->be, NULL, &in_use) == 0) {
        sn->in_use_extent = ext;
        pthread_mutex_lock(&sn->mu);
        sn->pin_in_use = in_use;
        pthread_mutex_unlock(&sn->mu);
    }
    server__defrag_pinned(s); /* the older pin's file, if defrag kept it */
}

int server__pin_locked(struct server *s)
{
    CHECK(s->be != NULL && s->mvcc != NULL);
    struct backend_pin p = {0};
    struct raft_conf_state conf;
    uint64_t index = 0, bytes = 0;
    int rc = capture(s, &p, &index, &conf, &bytes);
    if (rc == 0 && !no_sync(s))
        rc = backend_sync(s->be);
    if (rc == 0)
        rc = pin_file_write(s, index, &p);
    if (rc != 0) {
        log_error("etcdserver", "cannot pin the store at index %" PRIu64
                  ": %s", index, err_str(rc));
        backend_pin_end(&p);
        return rc;
    }
    promote(s, &p, index, bytes);
    return 0;
}

/* Worker: is the pin made at generation gen still on the open store? */
static bool still_current(struct server *s, uint64_t gen)
{
    pthread_mutex_lock(&s->snap.mu);
    bool ok = s->snap.pin_gen == gen && s->snap.pin_next.txn != NULL;
    pthread_mutex_unlock(&s->snap.mu);
    return ok;
}

int server__pin_worker(struct server *s, uint64_t *index_out,
                       struct raft_conf_state *conf_out)
{
    struct server_snap *sn = &s->snap;
    struct backend_pin p = {0};
    uint64_t index = 0, gen, bytes = 0;
    pthread_mutex_lock(&s->apply_mu); /* no write txn meanwhile */
    server__store_enter(s);
    int rc = capture(s, &p, &index, conf_out, &bytes);
    pthread_mutex_unlock(&s->apply_mu);
    pthread_mutex_lock(&sn->mu);
    gen = sn->pin_gen;
    if (rc == 0)
        sn->pin_next = p; /* a store swap ends it (server__pin_drop) */
    pthread_mutex_unlock(&sn->mu);
    if (rc == 0 && !no_sync(s)) {
        /* The durable pin: only promote (this thread) and a store swap
         * (the gate closed: not while we are inside) end it. */
        pthread_mutex_lock(&sn->mu);
        struct backend_pin since = sn->pin;
        pthread_mutex_unlock(&sn->mu);
        uint64_t pages; /* the writer goes on meanwhile */
        rc = backend_pin_sync(s->be, since.txn != NULL ? &since : NULL, &p,
                              &pages);
    }
    server__store_leave(s);
    /* A lone voter's store may hold a tentative batch (speculative apply,
     * apply.c) whose WAL fsync has not returned: the pin stands for a
     * committed state only once that index is applied (published). */
    if (rc == 0 && !server__snap_wait_applied(s, index))
        rc = atomic_load(&s->stopping) ? ERR_STOPPED : ERR_TIMEOUT;
    server__store_enter(s);
    bool current = still_current(s, gen);
    if (rc == 0 && !current)
        rc = ERR_STOPPED; /* the store was replaced meanwhile */
    if (rc == 0)
        rc = pin_file_write(s, index, &sn->pin_next);
    pthread_mutex_lock(&sn->mu);
    p = sn->pin_next;
    memset(&sn->pin_next, 0, sizeof sn->pin_next);
    pthread_mutex_unlock(&sn->mu);
    if (rc == 0)
        promote(s, &p, index, bytes);
    else if (current)
        backend_pin_end(&p);
    server__store_leave(s);
    *index_out = index;
    return rc;
}

void server__pin_drop(struct server *s)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    struct backend_pin cur = sn->pin, next = sn->pin_next;
    memset(&sn->pin, 0, sizeof sn->pin);
    memset(&sn->pin_next, 0, sizeof sn->pin_next);
    sn->pin_index = 0;
    sn->pin_gen++;
    pthread_mutex_unlock(&sn->mu);
    backend_pin_end(&cur);
    backend_pin_end(&next);
}

int server__pin_forget(struct server *s)
{
    server__pin_drop(s);
    return pin_files_remove(s, NULL);
}

/* Raft thread: the pages freed since the durable pin at txnid (which it
 * holds back), counted from where the last call stopped.  False: the
 * store is being swapped (not counted now). */
static bool held_pages(struct server *s, uint64_t txnid, uint64_t *pages)
{
    struct server_snap *sn = &s->snap;
    if (sn->freed_pin_txnid != txnid) { /* a new pin: count afresh */
        sn->freed_pin_txnid = txnid;
        /* LMDB reuses a record only below its oldest reader: the pin's
         * own txn's record is held too. */
        sn->freed_scanned = txnid > 0 ? txnid - 1 : 0;
        sn->freed_pages = 0;
    }
    *pages = sn->freed_pages;
    if (backend_txnid_last(s->be) <= sn->freed_scanned)
        return true; /* nothing committed since the last count */
    uint64_t now = server__clock_ms(s);
    if (now >= sn->freed_ms && now - sn->freed_ms < PIN_COUNT_MS)
        return true; /* counted a moment ago */
    sn->freed_ms = now;
    pthread_mutex_lock(&sn->gate_mu); /* never wait on a swap here */
    bool open = !sn->gate_closed;
    if (open)
        sn->gate_users++;
    pthread_mutex_unlock(&sn->gate_mu);
    if (!open)
        return false;
    uint64_t upto = 0, n = 0;
    if (backend_freed_since(s->be, sn->freed_scanned, &upto, &n) == 0) {
        sn->freed_scanned = upto;
        sn->freed_pages += n;
    }
    server__store_leave(s);
    *pages = sn->freed_pages;
    return true;
}

bool server__pin_grown(struct server *s)
{
    struct server_snap *sn = &s->snap;
    pthread_mutex_lock(&sn->mu);
    uint64_t at = sn->pin_bytes, ms = sn->pin_ms, txnid = sn->pin.txnid;
    bool has = sn->pin.txn != NULL;
    pthread_mutex_unlock(&sn->mu);
    /* No pin: a defragmentation swapped the store (its old pin stays
     * valid until this one is durable, defrag.c). */
    if (!has)
        return true;
    uint64_t now = backend_file_bytes(s->be);
    uint64_t grow = at / PIN_GROW_DIV;
    if (grow < PIN_GROW_MIN)
        grow = PIN_GROW_MIN;
    if (now > at + grow)
        return true;
    /* Tests that hold one pin set a least interval between pins. */
    uint64_t least = s->cfg.pin_interval_ms, now_ms = server__clock_ms(s);
    if (least != 0 && (now_ms < ms || now_ms - ms < least))
        return false;
    uint64_t budget = now / PIN_HELD_DIV, pages;
    if (budget < PIN_HELD_MIN)
        budget = PIN_HELD_MIN;
    if (backend_space_low(s->be))
        budget = PIN_HELD_LOW;
    return held_pages(s, txnid, &pages) &&
           pages * backend_page_bytes(s->be) >= budget;
}

/* --- restoring after a power loss ----------------------------------------- */

/* The file of the newest dir "<member>/db.untrusted.<n>" (server.c sets
 * a distrusted store aside under that name) that is the pinned file:
 * its data.mdb, or its prev.mdb (the store a defragmentation replaced,
 * kept until the new store's pin is durable: defrag.c). */
static int find_aside(const struct server *s, const struct server_pin_file *pf,
                      char *out, size_t cap)
{
    static const char *const names[] = {"data.mdb", "prev.mdb"};
    DIR *d = opendir(s->member_dir);
    if (d == NULL)
        return err_from_errno(errno);
    long long best = -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *pre = "db.untrusted.";
        if (strncmp(e->d_name, pre, strlen(pre)) != 0)
            continue;
        long long n = strtoll(e->d_name + strlen(pre), NULL, 10);
        for (size_t i = 0; i < 2 && n > best; i++) {
            char path[PIN_PATH_MAX];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s/%s", s->member_dir,
                     e->d_name, names[i]);
            if (stat(path, &st) != 0 || (uint64_t)st.st_dev != pf->dev ||
                (uint64_t)st.st_ino != pf->ino)
                continue;
            best = n;
            snprintf(out, cap, "%s", path);
        }
    }
    closedir(d);
    return best >= 0 ? 0 : ERR_NOTFOUND;
}

/* The store in db opens as the pinned state: its txn id and index. */
static int verify(const char *db, const struct server_pin_file *pf)
{
    struct backend_options bo = {.no_fsync = true, .max_readers = 8,
                                .no_ahead = true};
    struct backend *be;
    struct mvcc_store *mv;
    int rc = backend_open(db, &bo, &be);
    if (rc != 0)
        return rc;
    rc = backend_txnid(be) == pf->txnid ? 0 : ERR_CORRUPT;
    if (rc == 0)
        rc = mvcc_store_open(be, NULL, &mv);
    if (rc == 0) {
        if (mvcc_consistent_index(mv) != pf->index)
            rc = ERR_CORRUPT;
        mvcc_store_close(mv);
    }
    backend_close(be);
    return rc;
}

/* Moves the pinned file `from` (in a set-aside dir) into db and restores
 * the pinned meta pages; on failure the file goes back where it was. */
static int restore_into(const struct server *s, const char *from,
                        const char *db, const struct server_pin_file *pf)
{
    char to[PIN_PATH_MAX + 16], lock[PIN_PATH_MAX + 16], aside[PIN_PATH_MAX];
    snprintf(aside, sizeof aside, "%s", from);
    char *slash = strrchr(aside, '/');
    if (slash != NULL)
        *slash = '\0';
    snprintf(to, sizeof to, "%s/data.mdb", db);
    snprintf(lock, sizeof lock, "%s/lock.mdb", db);
    if (mkdir(db, 0700) != 0 && errno != EEXIST)
        return err_from_errno(errno);
    unlink(lock);
    int rc = rename(from, to) == 0 ? 0 : err_from_errno(errno);
    if (rc == 0)
        rc = fs_fsync_dir(db);
    if (rc == 0)
        rc = fs_fsync_dir(aside);
    if (rc == 0)
        rc = backend_meta_restore(db, pf->meta, pf->meta_len);
    if (rc == 0)
        rc = verify(db, pf);
    if (rc != 0 && access(to, F_OK) == 0) {
        unlink(lock);
        (void)rename(to, from);
    }
    (void)s;
    return rc;
}

int server__pin_restore(struct server *s, const char *db)
{
    struct server_pin_file pf;
    int rc = server__pin_file_read(s, &pf);
    if (rc != 0)
        return rc == ERR_NOTFOUND ? rc : ERR_NOTFOUND;
    char aside[PIN_PATH_MAX];
    rc = find_aside(s, &pf, aside, sizeof aside);
    if (rc != 0) {
        log_warn("etcdserver", "the store pinned at index %" PRIu64 " is "
                 "gone (no set-aside data.mdb or prev.mdb is that file)", pf.index);
    } else {
        rc = restore_into(s, aside, db, &pf);
        if (rc != 0)
            log_error("etcdserver", "cannot restore the store pinned at "
                      "index %" PRIu64 " from %s: %s", pf.index, aside,
                      err_str(rc));
        else
            log_warn("etcdserver", "rebuilding the store from its state "
                     "pinned at index %" PRIu64 " (the file set aside as %s,"
                     " its meta pages restored) and the WAL after it",
                     pf.index, aside);
    }
    mem_free(pf.meta);
    return rc == 0 ? 0 : ERR_NOTFOUND;
}
