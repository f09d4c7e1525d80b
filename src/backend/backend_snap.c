/*
 * backend_snap.c - pins: a committed state of the store kept intact on
 * disk, so that a store torn by a power loss can be brought back to it by
 * rewriting two pages (backend.h, "Pins").
 *
 * What this relies on in LMDB 0.9 (checked at run time where it can be):
 * - Pages 0 and 1 of data.mdb are the two meta pages.  A commit writes the
 *   meta page of slot (txnid % 2); an open picks the valid meta with the
 *   higher txnid.  The meta page of txnid T holds, at byte META_MAGIC_OFF,
 *   LMDB's magic and, at byte META_TXNID_OFF, T (a 16-byte page header,
 *   then MDB_meta: magic, version, address, mapsize, two 48-byte MDB_db,
 *   last_pg, txnid).  backend_pin_begin checks that one of the two pages
 *   it read says exactly that, so a different layout refuses pins
 *   (ERR_CORRUPT) instead of saving pages it does not understand.
 * - Copy-on-write: a commit never writes a page that the state of an open
 *   read txn reaches; a page freed by txn F is reused only once every
 *   reader began at or after F.  So while the pin's read txn is open,
 *   later commits write other pages and the meta slots only.
 * - LMDB writes the meta page with pwrite, or in place through the map
 *   with WRITEMAP; pread of the file sees the same page cache pages.
 */
#include "backend/backend.h"

#include "util/check.h"
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend_int.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/mem.h"

#define META_MAGIC 0xBEEFC0DEu
#define META_MAGIC_OFF 16u
#define META_TXNID_OFF 144u
#define META_PSIZE_OFF 40u /* mm_psize: mm_dbs[FREE_DBI].md_pad */
#define META_PAGE_MIN 512u
#define META_PAGE_MAX 65536u

_Static_assert(sizeof(size_t) == 8 && sizeof(void *) == 8,
               "META_TXNID_OFF assumes LMDB's 64-bit meta layout");

static MDB_txn *mtxn(struct backend_txn *t)
{
    return (MDB_txn *)t;
}

int backend_meta_check(const void *meta, size_t len, uint64_t txnid)
{
    const uint8_t *m = meta;
    size_t ps = len / 2;
    /* Two whole LMDB pages: a power of two that LMDB can use. */
    if (len % 2 != 0 || ps < META_PAGE_MIN || ps > META_PAGE_MAX ||
        (ps & (ps - 1)) != 0)
        return ERR_CORRUPT;
    uint64_t best = 0;
    const uint8_t *newest = NULL;
    for (size_t i = 0; i < 2; i++) {
        const uint8_t *p = m + i * ps;
        if (backend__get32(p + META_MAGIC_OFF) != META_MAGIC)
            continue;
        uint64_t t = backend__get64(p + META_TXNID_OFF);
        if (newest == NULL || t > best) {
            best = t;
            newest = p;
        }
    }
    /* The page LMDB will open must say the page size it was cut at. */
    return newest != NULL && best == txnid &&
                   backend__get32(newest + META_PSIZE_OFF) == ps
               ? 0
               : ERR_CORRUPT;
}

int backend_pin_begin(struct backend *be, struct backend_pin *out)
{
    CHECK(be != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    struct backend_txn *t;
    int rc = backend_read_begin(be, &t);
    if (rc != 0)
        return rc;
    MDB_env *env = mdb_txn_env(mtxn(t));
    MDB_stat st;
    mdb_filehandle_t fd;
    rc = mdb_env_stat(env, &st) == 0 && mdb_env_get_fd(env, &fd) == 0
             ? 0 : ERR_IO;
    size_t len = 2 * (size_t)st.ms_psize;
    uint8_t *meta = rc == 0 ? mem_malloc(len) : NULL;
    if (rc == 0 && meta == NULL)
        rc = ERR_NOMEM;
    uint64_t txnid = mdb_txn_id(mtxn(t));
    if (rc == 0)
        rc = fs_pread_all(fd, meta, len, 0);
    if (rc == 0)
        rc = backend_meta_check(meta, len, txnid);
    if (rc != 0) {
        mem_free(meta);
        backend_read_end(t);
        return rc;
    }
    *out = (struct backend_pin){.txn = t, .txnid = txnid, .meta = meta,
                                .meta_len = len};
    CHECK(out->meta_len >= 2 * META_PAGE_MIN);
    return 0;
}

void backend_pin_end(struct backend_pin *p)
{
    CHECK(p != NULL);
    if (p->txn != NULL)
        backend_read_end(p->txn);
    mem_free(p->meta);
    memset(p, 0, sizeof *p);
}

uint64_t backend_txnid(struct backend *be)
{
    CHECK(be != NULL);
    struct backend_txn *t;
    if (backend_read_begin(be, &t) != 0)
        return 0;
    uint64_t id = mdb_txn_id(mtxn(t));
    backend_read_end(t);
    return id;
}

int backend_file_id(struct backend *be, uint64_t *dev_out, uint64_t *ino_out)
{
    CHECK(be != NULL && dev_out != NULL && ino_out != NULL);
    struct backend_txn *t;
    int rc = backend_read_begin(be, &t);
    if (rc != 0)
        return rc;
    mdb_filehandle_t fd;
    struct stat st;
    rc = mdb_env_get_fd(mdb_txn_env(mtxn(t)), &fd) == 0 && fstat(fd, &st) == 0
             ? 0 : ERR_IO;
    backend_read_end(t);
    if (rc == 0) {
        *dev_out = (uint64_t)st.st_dev;
        *ino_out = (uint64_t)st.st_ino;
    }
    return rc;
}

int backend_meta_restore(const char *dir, const void *meta, size_t len)
{
    CHECK(dir != NULL && meta != NULL);
    if (len % 2 != 0 || len / 2 < META_PAGE_MIN)
        return ERR_INVAL;
    char path[4200];
    int n = snprintf(path, sizeof path, "%s/data.mdb", dir);
    if (n < 0 || (size_t)n >= sizeof path)
        return ERR_INVAL;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return err_from_errno(errno);
    int rc = fs_pwrite_all(fd, meta, len, 0);
    if (rc == 0 && fdatasync(fd) != 0)
        rc = err_from_errno(errno);
    close(fd);
    return rc;
}
