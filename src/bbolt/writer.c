/*
 * writer.c - the streaming bbolt writer (bbolt.h "THE WRITER").
 *
 * Each open bucket keeps a stack of levels: level 0 gathers the leaf
 * entries of the page being filled, level i > 0 the (first key, page)
 * pairs of the branch page above.  When the next entry would not fit in a
 * 4096-byte page the level's page is written (page numbers are handed out
 * in file order) and its first key goes up one level.  When the bucket
 * ends, the levels are closed bottom-up; the topmost single page is the
 * bucket's root (or the leaf is put inline into the parent when bbolt
 * would).  A level holds one page's entries, or, around a value larger
 * than a page (written with overflow pages), the entries that share that
 * value's pages: at most the pages of two entries.
 */
#include <string.h>

#include "bbolt/bbolt.h"
#include "bbolt/bbolt_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* Tree height is bounded by the keys: each branch page holds at least two
 * entries unless a key fills it, so 64 levels is never reached in
 * practice; past it the writer refuses. */
#define LEVELS_MAX 64

/* One entry of a level: a leaf element (flags, key, value) or a branch
 * element (key, pgid).  Its bytes live in the level's data. */
struct elem {
    uint32_t flags;  /* leaf: 0 or BBOLT_LEAF_BUCKET */
    uint32_t klen;   /* key bytes */
    uint32_t vlen;   /* leaf: value bytes */
    uint64_t pgid;   /* branch: the child */
    size_t off;      /* key (then value) at data + off */
};

/* The page being filled at one tree level. */
struct level {
    struct elem *e;    /* n entries */
    size_t n;          /* used */
    size_t cap;        /* allocated */
    uint8_t *data;     /* keys and values */
    size_t len;        /* used bytes of data */
    size_t dcap;       /* allocated bytes of data */
    size_t bytes;      /* page bytes if written now */
    uint64_t written;  /* pages this level has written */
};

/* One open bucket. */
struct wbucket {
    struct level lv[LEVELS_MAX]; /* lv[0] leaf; n_lv in use */
    int n_lv;                    /* levels in use (>= 1) */
    uint8_t *name;               /* owned copy (NULL for the root bucket) */
    size_t name_len;             /* its length */
    uint8_t *last;               /* the last key given (owned) */
    size_t last_len;             /* its length */
    size_t last_cap;             /* allocated */
    bool has_last;               /* a key was given */
    bool has_nested;             /* holds a nested bucket (never inline) */
};

struct bbolt_writer {
    struct wbucket b[BBOLT_DEPTH_MAX + 1]; /* b[0] the root bucket */
    int depth;                             /* innermost open: b[depth] */
    bool planning;                         /* plan pass: nothing written */
    struct bbolt_plan plan;                /* the write pass's plan */
    struct bbolt_sink sink;                /* write pass output */
    uint64_t next_pgid;                    /* next page number */
    uint64_t bytes;                        /* written (or counted) */
    int err;                               /* first error: refuse all */
    uint8_t *page;                         /* page image buffer */
    size_t page_cap;                       /* its bytes */
};

/* --- small helpers ------------------------------------------------------- */

static int keycmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

static int fail(struct bbolt_writer *w, int err)
{
    if (w->err == 0)
        w->err = err;
    return err;
}

/* Copies key as b's last key after checking it ascends. */
static int order_take(struct wbucket *b, const void *key, size_t len)
{
    if (b->has_last && keycmp(key, len, b->last, b->last_len) <= 0)
        return ERR_BBOLT_ORDER;
    if (len > b->last_cap) {
        uint8_t *p = mem_realloc(b->last, len);
        if (p == NULL)
            return ERR_NOMEM;
        b->last = p;
        b->last_cap = len;
    }
    memcpy(b->last, key, len);
    b->last_len = len;
    b->has_last = true;
    return 0;
}

/* Appends an entry to a level (room is the caller's business). */
static int level_push(struct level *lv, uint32_t flags, const void *k,
                      size_t kl, const void *v, size_t vl, uint64_t pgid)
{
    struct elem *e = mem_grow(lv->e, &lv->cap, lv->n, sizeof *e, 16);
    if (e == NULL)
        return ERR_NOMEM;
    lv->e = e;
    size_t need = lv->len + kl + vl;
    if (need > lv->dcap) {
        size_t cap = lv->dcap ? lv->dcap : BBOLT_PAGE_SIZE;
        while (cap < need)
            cap *= 2;
        uint8_t *d = mem_realloc(lv->data, cap);
        if (d == NULL)
            return ERR_NOMEM;
        lv->data = d;
        lv->dcap = cap;
    }
    e[lv->n] = (struct elem){.flags = flags, .klen = (uint32_t)kl,
                             .vlen = (uint32_t)vl, .pgid = pgid,
                             .off = lv->len};
    memcpy(lv->data + lv->len, k, kl);
    if (vl > 0)
        memcpy(lv->data + lv->len + kl, v, vl);
    lv->len += kl + vl;
    lv->bytes += BBOLT_ELEM + kl + vl;
    lv->n++;
    return 0;
}

static void level_reset(struct level *lv)
{
    lv->n = 0;
    lv->len = 0;
    lv->bytes = BBOLT_PAGE_HDR;
}

static void level_free(struct level *lv)
{
    mem_free(lv->e);
    mem_free(lv->data);
    memset(lv, 0, sizeof *lv);
}

static int page_room(struct bbolt_writer *w, size_t len)
{
    if (len <= w->page_cap)
        return 0;
    uint8_t *p = mem_realloc(w->page, len);
    if (p == NULL)
        return ERR_NOMEM;
    w->page = p;
    w->page_cap = len;
    return 0;
}

/* Lays level lv out as a page image at dst (lv->bytes long, zeroed by the
 * caller): header with id and overflow, elements, then keys and values. */
static void level_image(const struct level *lv, bool leaf, uint8_t *dst,
                        uint64_t id, uint32_t overflow)
{
    CHECK(lv->n <= 0xFFFF);
    bbolt__put64(dst, id);
    bbolt__put16(dst + 8, leaf ? BBOLT_FLAG_LEAF : BBOLT_FLAG_BRANCH);
    bbolt__put16(dst + 10, (uint16_t)lv->n);
    bbolt__put32(dst + 12, overflow);
    size_t data = BBOLT_PAGE_HDR + BBOLT_ELEM * lv->n;
    for (size_t i = 0; i < lv->n; i++) {
        const struct elem *e = &lv->e[i];
        uint8_t *p = dst + BBOLT_PAGE_HDR + BBOLT_ELEM * i;
        uint32_t pos = (uint32_t)(data - (BBOLT_PAGE_HDR + BBOLT_ELEM * i));
        if (leaf) {
            bbolt__put32(p, e->flags);
            bbolt__put32(p + 4, pos);
            bbolt__put32(p + 8, e->klen);
            bbolt__put32(p + 12, e->vlen);
        } else {
            bbolt__put32(p, pos);
            bbolt__put32(p + 4, e->klen);
            bbolt__put64(p + 8, e->pgid);
        }
        memcpy(dst + data, lv->data + e->off, (size_t)e->klen + e->vlen);
        data += (size_t)e->klen + e->vlen;
    }
    CHECK(data == lv->bytes);
}

/* Writes (or counts) one page image of npages pages from w->page. */
static int emit(struct bbolt_writer *w, size_t npages)
{
    uint64_t len = (uint64_t)npages * BBOLT_PAGE_SIZE;
    w->bytes += len;
    w->next_pgid += npages;
    if (w->planning)
        return 0;
    if (w->next_pgid > w->plan.pages)
        return ERR_BBOLT_PLAN;
    return w->sink.write(w->sink.ctx, w->page, (size_t)len);
}

/* --- levels -------------------------------------------------------------- */

static int level_add(struct bbolt_writer *w, struct wbucket *b, int i,
                     uint32_t flags, const void *k, size_t kl, const void *v,
                     size_t vl, uint64_t pgid);

/* Writes level i's page and hands its first key up; *pgid_out = its page. */
static int level_flush(struct bbolt_writer *w, struct wbucket *b, int i,
                       bool push_up, uint64_t *pgid_out)
{
    struct level *lv = &b->lv[i];
    size_t npages = (lv->bytes + BBOLT_PAGE_SIZE - 1) / BBOLT_PAGE_SIZE;
    if (npages > 0xFFFFFFFFu)
        return ERR_TOO_LARGE;
    int rc = page_room(w, npages * BBOLT_PAGE_SIZE);
    if (rc != 0)
        return rc;
    uint64_t id = w->next_pgid;
    memset(w->page, 0, npages * BBOLT_PAGE_SIZE);
    level_image(lv, i == 0, w->page, id, (uint32_t)(npages - 1));
    rc = emit(w, npages);
    if (rc != 0)
        return rc;
    lv->written++;
    if (pgid_out != NULL)
        *pgid_out = id;
    if (push_up) {
        if (i + 1 >= LEVELS_MAX)
            return ERR_TOO_LARGE;
        if (b->n_lv < i + 2) {
            b->n_lv = i + 2;
            level_reset(&b->lv[i + 1]);
        }
        CHECK(lv->n > 0);
        rc = level_add(w, b, i + 1, 0, lv->data + lv->e[0].off,
                       lv->e[0].klen, NULL, 0, id);
    }
    level_reset(lv);
    return rc;
}

static size_t pages_of(size_t bytes)
{
    return (bytes + BBOLT_PAGE_SIZE - 1) / BBOLT_PAGE_SIZE;
}

/* Adds an entry to level i, writing the level's page first when the
 * entry would not fit in it. */
static int level_add(struct bbolt_writer *w, struct wbucket *b, int i,
                     uint32_t flags, const void *k, size_t kl, const void *v,
                     size_t vl, uint64_t pgid)
{
    struct level *lv = &b->lv[i];
    size_t size = BBOLT_ELEM + kl + vl;
    /* A page that would spill over is written first, unless sharing
     * pages saves one: a value larger than a page then fills the tail of
     * its last page with what follows, as bbolt's pages do. */
    if (lv->n > 0 && lv->bytes + size > BBOLT_PAGE_SIZE &&
        pages_of(lv->bytes + size) >=
            pages_of(lv->bytes) + pages_of(BBOLT_PAGE_HDR + size)) {
        int rc = level_flush(w, b, i, true, NULL);
        if (rc != 0)
            return rc;
    }
    return level_push(lv, flags, k, kl, v, vl, pgid);
}

/* Closes b's levels bottom-up; *root_out = the root page.  The topmost
 * level with a single child needs no page of its own. */
static int tree_close(struct bbolt_writer *w, struct wbucket *b,
                      uint64_t *root_out)
{
    for (int i = 0;; i++) {
        CHECK(i < b->n_lv);
        struct level *lv = &b->lv[i];
        bool top = i == b->n_lv - 1;
        if (top && i > 0 && lv->n == 1) {
            *root_out = lv->e[0].pgid;
            return 0;
        }
        if (top)
            return level_flush(w, b, i, false, root_out);
        if (lv->n > 0) {
            int rc = level_flush(w, b, i, true, NULL);
            if (rc != 0)
                return rc;
        }
    }
}

static void bucket_init(struct wbucket *b)
{
    memset(b, 0, sizeof *b);
    b->n_lv = 1;
    level_reset(&b->lv[0]);
}

static void bucket_free(struct wbucket *b)
{
    for (int i = 0; i < LEVELS_MAX; i++)
        level_free(&b->lv[i]);
    mem_free(b->name);
    mem_free(b->last);
    memset(b, 0, sizeof *b);
}

/* The value of bucket b in its parent: header, or header + inline leaf
 * (at w->page, *len_out bytes). */
static int bucket_value(struct bbolt_writer *w, struct wbucket *b,
                        size_t *len_out)
{
    struct level *leaf = &b->lv[0];
    bool inl = b->n_lv == 1 && leaf->written == 0 && !b->has_nested &&
               leaf->bytes <= BBOLT_INLINE_MAX;
    uint64_t root = 0;
    if (!inl) {
        int rc = tree_close(w, b, &root);
        if (rc != 0)
            return rc;
    }
    size_t len = BBOLT_BUCKET_HDR + (inl ? leaf->bytes : 0);
    int rc = page_room(w, len);
    if (rc != 0)
        return rc;
    memset(w->page, 0, len);
    bbolt__put64(w->page, root);
    if (inl)
        level_image(leaf, true, w->page + BBOLT_BUCKET_HDR, 0, 0);
    *len_out = len;
    return 0;
}

/* --- meta pages ---------------------------------------------------------- */

void bbolt__meta_image(uint8_t *page, uint64_t id, uint64_t root,
                       uint64_t freelist, uint64_t pages, uint64_t txid)
{
    memset(page, 0, BBOLT_PAGE_SIZE);
    bbolt__put64(page, id);
    bbolt__put16(page + 8, BBOLT_FLAG_META);
    uint8_t *m = page + BBOLT_PAGE_HDR;
    bbolt__put32(m, BBOLT_MAGIC);
    bbolt__put32(m + 4, BBOLT_VERSION);
    bbolt__put32(m + 8, BBOLT_PAGE_SIZE);
    bbolt__put64(m + 16, root);
    bbolt__put64(m + 32, freelist);
    bbolt__put64(m + 40, pages);
    bbolt__put64(m + 48, txid);
    bbolt__put64(m + 56, bbolt__fnv64a(m, 56));
}

/* The write pass's first three pages: meta 0, meta 1, the freelist. */
static int write_head(struct bbolt_writer *w)
{
    int rc = page_room(w, BBOLT_PAGE_SIZE);
    for (uint64_t id = 0; rc == 0 && id < 2; id++) {
        bbolt__meta_image(w->page, id, w->plan.root, 2, w->plan.pages, id);
        rc = emit(w, 1);
    }
    if (rc != 0)
        return rc;
    memset(w->page, 0, BBOLT_PAGE_SIZE);
    bbolt__put64(w->page, 2);
    bbolt__put16(w->page + 8, BBOLT_FLAG_FREELIST);
    return emit(w, 1);
}

/* --- API ----------------------------------------------------------------- */

int bbolt_writer_create(const struct bbolt_plan *plan, struct bbolt_sink sink,
                        struct bbolt_writer **out)
{
    CHECK(out != NULL);
    CHECK(plan == NULL || sink.write != NULL);
    struct bbolt_writer *w = mem_calloc(1, sizeof *w);
    if (w == NULL)
        return ERR_NOMEM;
    w->planning = plan == NULL;
    if (plan != NULL)
        w->plan = *plan;
    w->sink = sink;
    bucket_init(&w->b[0]);
    if (w->planning) {
        w->next_pgid = 3;
        w->bytes = 3 * BBOLT_PAGE_SIZE;
    } else {
        int rc = write_head(w);
        if (rc != 0) {
            bbolt_writer_free(w);
            return rc;
        }
    }
    CHECK(w->next_pgid == 3);
    *out = w;
    return 0;
}

int bbolt_writer_bucket_begin(struct bbolt_writer *w, const void *name,
                              size_t name_len)
{
    CHECK(w != NULL && (name != NULL || name_len == 0));
    if (w->err != 0)
        return w->err;
    if (name_len == 0 || name_len > BBOLT_KEY_MAX)
        return ERR_INVAL;
    if (w->depth >= BBOLT_DEPTH_MAX)
        return ERR_BBOLT_DEPTH;
    struct wbucket *parent = &w->b[w->depth];
    int rc = order_take(parent, name, name_len);
    if (rc != 0)
        return rc == ERR_NOMEM ? fail(w, rc) : rc;
    struct wbucket *b = &w->b[w->depth + 1];
    bucket_init(b);
    b->name = mem_dup(name, name_len);
    if (b->name == NULL)
        return fail(w, ERR_NOMEM);
    b->name_len = name_len;
    parent->has_nested = true;
    w->depth++;
    return 0;
}

int bbolt_writer_put(struct bbolt_writer *w, const void *key, size_t key_len,
                     const void *value, size_t value_len)
{
    CHECK(w != NULL && (key != NULL || key_len == 0));
    CHECK(value != NULL || value_len == 0);
    if (w->err != 0)
        return w->err;
    if (w->depth == 0 || key_len == 0 || key_len > BBOLT_KEY_MAX ||
        value_len > BBOLT_VALUE_MAX)
        return ERR_INVAL;
    struct wbucket *b = &w->b[w->depth];
    int rc = order_take(b, key, key_len);
    if (rc != 0)
        return rc == ERR_NOMEM ? fail(w, rc) : rc;
    rc = level_add(w, b, 0, 0, key, key_len, value, value_len, 0);
    return rc != 0 ? fail(w, rc) : 0;
}

int bbolt_writer_bucket_end(struct bbolt_writer *w)
{
    CHECK(w != NULL);
    if (w->err != 0)
        return w->err;
    if (w->depth == 0)
        return ERR_INVAL;
    struct wbucket *b = &w->b[w->depth];
    size_t vlen;
    int rc = bucket_value(w, b, &vlen);
    if (rc != 0)
        return fail(w, rc);
    /* The value sits in w->page, which level_add may reuse: copy it. */
    uint8_t *v = mem_dup(w->page, vlen);
    if (v == NULL)
        return fail(w, ERR_NOMEM);
    w->depth--;
    rc = level_add(w, &w->b[w->depth], 0, BBOLT_LEAF_BUCKET, b->name,
                   b->name_len, v, vlen, 0);
    mem_free(v);
    bucket_free(b);
    return rc != 0 ? fail(w, rc) : 0;
}

int bbolt_writer_finish(struct bbolt_writer *w, struct bbolt_plan *plan_out)
{
    CHECK(w != NULL);
    if (w->err != 0)
        return w->err;
    if (w->depth != 0)
        return ERR_INVAL;
    uint64_t root;
    int rc = tree_close(w, &w->b[0], &root);
    if (rc != 0)
        return fail(w, rc);
    struct bbolt_plan got = {.root = root, .pages = w->next_pgid};
    if (!w->planning &&
        (got.root != w->plan.root || got.pages != w->plan.pages))
        return fail(w, ERR_BBOLT_PLAN);
    CHECK(w->bytes == got.pages * BBOLT_PAGE_SIZE);
    if (plan_out != NULL)
        *plan_out = got;
    w->err = ERR_CLOSED; /* finished: nothing more goes in */
    return 0;
}

uint64_t bbolt_writer_bytes(const struct bbolt_writer *w)
{
    CHECK(w != NULL);
    return w->bytes;
}

void bbolt_writer_free(struct bbolt_writer *w)
{
    if (w == NULL)
        return;
    for (int i = 0; i <= BBOLT_DEPTH_MAX; i++)
        bucket_free(&w->b[i]);
    mem_free(w->page);
    mem_free(w);
}
