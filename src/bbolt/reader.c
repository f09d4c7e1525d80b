/*
 * reader.c - the validating bbolt reader (bbolt.h "THE READER").
 *
 * Open checks the meta pages and the freelist, then walks every bucket
 * once without a callback: each page is checked (bounds, header id, type,
 * elements inside the page, keys ascending across the whole bucket) and
 * marked in a bitmap, so a page reached twice (a loop, a shared child) is
 * an error, and so is a page below the high-water mark that is neither
 * reached nor free (bbolt's tx.Check).  Later walks repeat the same
 * checks, so a walk can never go astray either.  All arithmetic on
 * offsets from the file is done in 64 bits against the mapped length.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bbolt/bbolt.h"
#include "bbolt/bbolt_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* Deepest branch nesting walked (a tree of 4096-byte pages is never more
 * than a few levels; a deeper one is a loop or garbage). */
#define HEIGHT_MAX 64
#define SHA256_LEN 32

struct bbolt_reader {
    const uint8_t *buf;  /* the database bytes */
    uint64_t len;        /* usable length */
    void *map;           /* mmap of a file, or NULL */
    size_t map_len;      /* its length */
    uint64_t pages;      /* meta pgid */
    uint64_t root;       /* root bucket's root page */
    uint64_t freelist;   /* freelist page */
    uint8_t *seen;       /* bitmap of pages reached (open's walk) */
    char err[512];       /* last error */
};

/* State of one bucket's walk. */
struct bwalk {
    struct bbolt_reader *r;
    bbolt_walk_fn fn;              /* NULL: only check */
    void *arg;
    struct bbolt_entry e;          /* path so far; depth = this bucket's */
    const uint8_t *prev;           /* previous key of this bucket */
    size_t prev_len;
    bool has_prev;
};

static int corrupt(struct bbolt_reader *r, uint64_t off, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, sizeof r->err, "bbolt: %s (page %llu, offset %llu)",
             what, (unsigned long long)(off / BBOLT_PAGE_SIZE),
             (unsigned long long)off);
    return ERR_BBOLT_CORRUPT;
}

static int keycmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

static int walk_tree(struct bwalk *w, uint64_t pgid, int height);

/* One leaf element: order, then the entry (a nested bucket recursing). */
static int on_leaf_elem(struct bwalk *w, uint64_t off, uint32_t flags,
                        const uint8_t *k, uint32_t kl, const uint8_t *v,
                        uint32_t vl);

/* Checks and walks the elements of a leaf or branch page image at p
 * (span bytes, at file offset off). */
static int walk_page(struct bwalk *w, const uint8_t *p, uint64_t span,
                     uint64_t off, bool leaf, int height)
{
    struct bbolt_reader *r = w->r;
    uint64_t count = bbolt__get16(p + 10);
    if (BBOLT_PAGE_HDR + count * BBOLT_ELEM > span)
        return corrupt(r, off, "%llu elements do not fit the page",
                       (unsigned long long)count);
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *e = p + BBOLT_PAGE_HDR + i * BBOLT_ELEM;
        uint64_t eoff = BBOLT_PAGE_HDR + i * BBOLT_ELEM;
        uint64_t pos = bbolt__get32(e + (leaf ? 4 : 0));
        uint64_t kl = bbolt__get32(e + (leaf ? 8 : 4));
        uint64_t vl = leaf ? bbolt__get32(e + 12) : 0;
        if (eoff + pos + kl + vl > span || kl == 0)
            return corrupt(r, off + eoff,
                           "element %llu: key or value outside the page",
                           (unsigned long long)i);
        const uint8_t *k = e + pos;
        int rc;
        if (leaf) {
            rc = on_leaf_elem(w, off + eoff, bbolt__get32(e), k,
                              (uint32_t)kl, k + kl, (uint32_t)vl);
        } else {
            if (w->has_prev && keycmp(k, kl, w->prev, w->prev_len) < 0)
                return corrupt(r, off + eoff, "branch keys out of order");
            rc = walk_tree(w, bbolt__get64(e + 8), height + 1);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Marks pages [pgid, pgid + n) reached; a page reached twice is an error. */
static int mark(struct bbolt_reader *r, uint64_t pgid, uint64_t n)
{
    if (r->seen == NULL)
        return 0;
    for (uint64_t i = pgid; i < pgid + n; i++) {
        if (r->seen[i / 8] & (1u << (i % 8)))
            return corrupt(r, i * BBOLT_PAGE_SIZE, "page reached twice");
        r->seen[i / 8] |= (uint8_t)(1u << (i % 8));
    }
    return 0;
}

static int walk_tree(struct bwalk *w, uint64_t pgid, int height)
{
    struct bbolt_reader *r = w->r;
    if (height > HEIGHT_MAX)
        return corrupt(r, pgid < r->pages ? pgid * BBOLT_PAGE_SIZE : 0,
                       "tree deeper than %d", HEIGHT_MAX);
    if (pgid < 2 || pgid >= r->pages)
        return corrupt(r, 0, "child page %llu out of range [2, %llu)",
                       (unsigned long long)pgid,
                       (unsigned long long)r->pages);
    uint64_t off = pgid * BBOLT_PAGE_SIZE;
    const uint8_t *p = r->buf + off;
    uint64_t overflow = bbolt__get32(p + 12);
    uint16_t flags = bbolt__get16(p + 8);
    if (bbolt__get64(p) != pgid)
        return corrupt(r, off, "page header names page %llu",
                       (unsigned long long)bbolt__get64(p));
    if (pgid + 1 + overflow > r->pages)
        return corrupt(r, off, "overflow of %llu pages past the end",
                       (unsigned long long)overflow);
    if (flags != BBOLT_FLAG_LEAF && flags != BBOLT_FLAG_BRANCH)
        return corrupt(r, off, "page type 0x%x in a bucket tree", flags);
    int rc = mark(r, pgid, 1 + overflow);
    if (rc != 0)
        return rc;
    return walk_page(w, p, (1 + overflow) * BBOLT_PAGE_SIZE, off,
                     flags == BBOLT_FLAG_LEAF, height);
}

/* Walks the bucket whose header value is v (vl bytes, at file offset off)
 * as a child of w named k. */
static int walk_child(struct bwalk *w, uint64_t off, const uint8_t *k,
                      uint32_t kl, const uint8_t *v, uint32_t vl)
{
    struct bbolt_reader *r = w->r;
    if (vl < BBOLT_BUCKET_HDR)
        return corrupt(r, off, "bucket value of %u bytes", vl);
    if (w->e.depth >= BBOLT_DEPTH_MAX)
        return corrupt(r, off, "buckets nested deeper than %d",
                       BBOLT_DEPTH_MAX);
    struct bwalk c = {.r = r, .fn = w->fn, .arg = w->arg, .e = w->e};
    c.e.path[c.e.depth] = k;
    c.e.path_len[c.e.depth] = kl;
    c.e.depth++;
    uint64_t root = bbolt__get64(v);
    if (root != 0)
        return walk_tree(&c, root, 0);
    uint64_t span = vl - BBOLT_BUCKET_HDR;
    const uint8_t *p = v + BBOLT_BUCKET_HDR;
    uint64_t poff = (uint64_t)(p - r->buf);
    if (span < BBOLT_PAGE_HDR)
        return corrupt(r, poff, "inline bucket of %llu bytes",
                       (unsigned long long)span);
    if (bbolt__get16(p + 8) != BBOLT_FLAG_LEAF)
        return corrupt(r, poff, "inline bucket page is not a leaf");
    return walk_page(&c, p, span, poff, true, 0);
}

static int on_leaf_elem(struct bwalk *w, uint64_t off, uint32_t flags,
                        const uint8_t *k, uint32_t kl, const uint8_t *v,
                        uint32_t vl)
{
    struct bbolt_reader *r = w->r;
    if (w->has_prev && keycmp(k, kl, w->prev, w->prev_len) <= 0)
        return corrupt(r, off, "keys out of order");
    w->prev = k;
    w->prev_len = kl;
    w->has_prev = true;
    if ((flags & ~(uint32_t)BBOLT_LEAF_BUCKET) != 0)
        return corrupt(r, off, "leaf element flags 0x%x", flags);
    bool bucket = flags & BBOLT_LEAF_BUCKET;
    if (!bucket && w->e.depth == 0)
        return corrupt(r, off, "a plain key in the root bucket");
    if (w->fn != NULL) {
        struct bbolt_entry e = w->e;
        e.key = k;
        e.key_len = kl;
        e.value = bucket ? NULL : v;
        e.value_len = bucket ? 0 : vl;
        e.is_bucket = bucket;
        int rc = w->fn(w->arg, &e);
        if (rc != 0)
            return rc;
    }
    return bucket ? walk_child(w, off, k, kl, v, vl) : 0;
}

/* --- open ---------------------------------------------------------------- */

/* Is meta page id valid?  Fills *txid_out. */
static bool meta_ok(const struct bbolt_reader *r, uint64_t id,
                    uint64_t *txid_out)
{
    const uint8_t *m = r->buf + id * BBOLT_PAGE_SIZE + BBOLT_PAGE_HDR;
    if (bbolt__get32(m) != BBOLT_MAGIC || bbolt__get32(m + 4) != BBOLT_VERSION)
        return false;
    if (bbolt__fnv64a(m, 56) != bbolt__get64(m + 56))
        return false;
    *txid_out = bbolt__get64(m + 48);
    return true;
}

static int check_meta(struct bbolt_reader *r)
{
    if (r->len < 2 * BBOLT_PAGE_SIZE)
        return corrupt(r, r->len, "file of %llu bytes has no two meta pages",
                       (unsigned long long)r->len);
    uint64_t t0 = 0, t1 = 0;
    bool ok0 = meta_ok(r, 0, &t0), ok1 = meta_ok(r, 1, &t1);
    if (!ok0 && !ok1)
        return corrupt(r, 0, "no valid meta page (magic, version, checksum)");
    uint64_t id = ok0 && (!ok1 || t0 >= t1) ? 0 : 1;
    const uint8_t *m = r->buf + id * BBOLT_PAGE_SIZE + BBOLT_PAGE_HDR;
    uint64_t moff = id * BBOLT_PAGE_SIZE + BBOLT_PAGE_HDR;
    if (bbolt__get32(m + 8) != BBOLT_PAGE_SIZE)
        return corrupt(r, moff, "page size %u (only %u is read)",
                       bbolt__get32(m + 8), BBOLT_PAGE_SIZE);
    r->root = bbolt__get64(m + 16);
    r->freelist = bbolt__get64(m + 32);
    r->pages = bbolt__get64(m + 40);
    if (r->pages < 3 || r->pages > r->len / BBOLT_PAGE_SIZE)
        return corrupt(r, moff, "meta says %llu pages, the file holds %llu "
                       "(truncated?)", (unsigned long long)r->pages,
                       (unsigned long long)(r->len / BBOLT_PAGE_SIZE));
    if (r->root < 2 || r->root >= r->pages)
        return corrupt(r, moff, "root page %llu out of range",
                       (unsigned long long)r->root);
    return 0;
}

/* Checks the freelist page and marks its ids reached (they are free). */
static int check_freelist(struct bbolt_reader *r)
{
    if (r->freelist == UINT64_MAX)
        return 0; /* bbolt's NoFreelistSync: none stored */
    if (r->freelist < 2 || r->freelist >= r->pages)
        return corrupt(r, BBOLT_PAGE_HDR, "freelist page %llu out of range",
                       (unsigned long long)r->freelist);
    uint64_t off = r->freelist * BBOLT_PAGE_SIZE;
    const uint8_t *p = r->buf + off;
    uint64_t overflow = bbolt__get32(p + 12);
    if (bbolt__get16(p + 8) != BBOLT_FLAG_FREELIST ||
        bbolt__get64(p) != r->freelist)
        return corrupt(r, off, "the freelist page is not one");
    if (r->freelist + 1 + overflow > r->pages)
        return corrupt(r, off, "freelist overflow past the end");
    int rc = mark(r, r->freelist, 1 + overflow);
    uint64_t span = (1 + overflow) * BBOLT_PAGE_SIZE - BBOLT_PAGE_HDR;
    const uint8_t *ids = p + BBOLT_PAGE_HDR;
    uint64_t n = bbolt__get16(p + 10);
    if (n == 0xFFFF) {
        n = bbolt__get64(ids);
        ids += 8;
        span -= 8;
    }
    if (rc == 0 && n > span / 8)
        return corrupt(r, off, "freelist of %llu ids overflows its page",
                       (unsigned long long)n);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        uint64_t id = bbolt__get64(ids + 8 * i);
        if (id < 2 || id >= r->pages)
            return corrupt(r, off, "free page %llu out of range",
                           (unsigned long long)id);
        rc = mark(r, id, 1);
    }
    return rc;
}

/* Checks the whole database once (open). */
static int check_all(struct bbolt_reader *r)
{
    int rc = check_meta(r);
    if (rc != 0)
        return rc;
    r->seen = mem_calloc(1, r->pages / 8 + 1);
    if (r->seen == NULL)
        return ERR_NOMEM;
    r->seen[0] |= 3; /* the meta pages */
    rc = check_freelist(r);
    if (rc == 0)
        rc = bbolt_reader_walk(r, NULL, NULL);
    /* Without a stored freelist (etcd's NoFreelistSync) bbolt takes every
     * page not reached as free. */
    for (uint64_t i = 0; rc == 0 && r->freelist != UINT64_MAX && i < r->pages;
         i++)
        if (!(r->seen[i / 8] & (1u << (i % 8))))
            rc = corrupt(r, i * BBOLT_PAGE_SIZE, "page unreachable and not free");
    mem_free(r->seen);
    r->seen = NULL;
    return rc;
}

int bbolt_reader_open_mem(const void *buf, size_t len,
                          struct bbolt_reader **out)
{
    CHECK(out != NULL && (buf != NULL || len == 0));
    struct bbolt_reader *r = mem_calloc(1, sizeof *r);
    if (r == NULL)
        return ERR_NOMEM;
    r->buf = buf;
    r->len = len;
    *out = r;
    return check_all(r);
}

int bbolt_reader_open_file(const char *path, struct bbolt_reader **out)
{
    CHECK(path != NULL && out != NULL);
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? ERR_NOTFOUND : ERR_IO;
    struct stat st;
    void *map = NULL;
    int rc = fstat(fd, &st) == 0 ? 0 : ERR_IO;
    size_t len = rc == 0 ? (size_t)st.st_size : 0;
    if (rc == 0 && len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            map = NULL;
            rc = ERR_IO;
        }
    }
    close(fd);
    if (rc != 0)
        return rc;
    size_t use = len % 512 == SHA256_LEN ? len - SHA256_LEN : len;
    rc = bbolt_reader_open_mem(map, use, out);
    if (*out == NULL) {
        if (map != NULL)
            munmap(map, len);
        return rc;
    }
    (*out)->map = map;
    (*out)->map_len = len;
    if (rc == ERR_BBOLT_CORRUPT) {
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%.255s", (*out)->err);
        snprintf((*out)->err, sizeof (*out)->err, "%.200s: %.255s", path,
                 tmp);
    }
    return rc;
}

const char *bbolt_reader_error(const struct bbolt_reader *r)
{
    CHECK(r != NULL);
    return r->err;
}

int bbolt_reader_walk(struct bbolt_reader *r, bbolt_walk_fn fn, void *arg)
{
    CHECK(r != NULL);
    CHECK(r->pages >= 3);
    r->err[0] = '\0';
    struct bwalk w = {.r = r, .fn = fn, .arg = arg};
    return walk_tree(&w, r->root, 0);
}

uint64_t bbolt_reader_pages(const struct bbolt_reader *r)
{
    CHECK(r != NULL);
    return r->pages;
}

void bbolt_reader_free(struct bbolt_reader *r)
{
    if (r == NULL)
        return;
    if (r->map != NULL)
        munmap(r->map, r->map_len);
    mem_free(r->seen);
    mem_free(r);
}
