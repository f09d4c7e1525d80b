/*
 * cache.c - the KV proxy's cache of Range replies, as etcd 3.4's proxy
 * keeps it (proxy/grpcproxy/cache/store.go, used by kv.go).
 *
 * An entry is one RangeRequest, serialized with serializable set and
 * without unknown fields (etcd's keyFunc: the request's Marshal), and the
 * upstream's reply bytes.  Entries live in
 *   - an LRU list (most recently added or hit first), bounded by
 *     max_entries (etcd's groupcache LRU) and by max_bytes (ours: the
 *     bytes of the entries, struct included);
 *   - a hash table on the key bytes (lookups);
 *   - the interval index (cache_ivl.c) when the request's revision is 0:
 *     etcd indexes only those, since a read at a fixed revision never goes
 *     stale.  The interval is [key, range_end); a single key's is [key,
 *     key + "\0") when range_end is empty.
 *
 * Revisions, exactly as store.go: the compacted revision starts at -1; a
 * reply is added only when its request's revision is above it (so after a
 * compaction through the proxy, revision-0 reads are no longer cached:
 * 0 is not above it); a lookup with 0 < revision < compacted answers
 * COMPACTED (and drops that entry) whether cached or not.
 *
 * Where we differ from etcd on purpose, each time only to drop more:
 *   - range_end "\0" (every key from key on) is treated as the end of the
 *     keyspace.  etcd's index compares it as the one-byte string "\0", so
 *     such an interval ends before it begins and no write ever reaches it:
 *     etcd 3.4.23's proxy goes on serving a `get --from-key` reply after
 *     writes through it (seen on the real binary).
 *   - writes inside nested txns invalidate too (etcd's kv.go does not look
 *     into them, and serves stale replies after them).
 *   - a compaction drops at once the entries no lookup can answer any more
 *     (0 < revision < compacted); etcd drops them when next asked, so its
 *     keys gauge counts them until then.
 *   - a write or txn whose bytes do not decode here, or whose txn nests
 *     deeper than GP_TXN_DEPTH_MAX, empties the cache.
 *
 * Thread-safety: every function takes c->mu; the decoding and the copies
 * are done outside it.
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/err.h"
#include "util/mem.h"

/* One cached request and its reply; one allocation with its bytes after
 * it.  Owned by the cache, under its mutex. */
struct gp__cache_entry {
    /* Its node in the index, if indexed; first, so that a node found in
     * the index is its entry. */
    struct gp__ivl_node ivl;
    struct gp__cache_entry *newer; /* LRU neighbour towards the head */
    struct gp__cache_entry *older; /* LRU neighbour towards the tail */
    struct gp__cache_entry *hnext; /* next in its hash chain */
    struct gp__cache_entry *doomed; /* next victim of an invalidation */
    uint64_t hash;                  /* of key */
    int64_t rev;                    /* the request's revision */
    bool indexed;                   /* in the index (rev == 0) */
    size_t charge;                  /* what it counts against max_bytes */
    const uint8_t *key;             /* the serialized request */
    size_t key_len;                 /* its bytes */
    const uint8_t *resp;            /* the RangeResponse bytes */
    size_t resp_len;                /* their number */
    uint8_t data[];                 /* key, begin, end, resp */
};

struct gp_cache {
    pthread_mutex_t mu;               /* guards everything below */
    size_t max_entries;               /* LRU bound on entries */
    size_t max_bytes;                 /* bound on the sum of charges */
    size_t n;                         /* entries held */
    size_t bytes;                     /* their charges */
    struct gp__cache_entry *newest;   /* LRU head */
    struct gp__cache_entry *oldest;   /* LRU tail: evicted first */
    struct gp__cache_entry **buckets; /* hash chains */
    size_t buckets_mask;              /* the bucket count (a power of 2) - 1 */
    struct gp__ivl_node *root;        /* the interval index */
    uint64_t seq;                     /* last index seq handed out */
    int64_t compacted;                /* etcd's compactedRev, -1 at first */
    uint64_t hits, misses;            /* the metrics' counters */
};

int gp_cache_open(size_t max_entries, size_t max_bytes, struct gp_cache **out)
{
    assert(out != NULL);
    struct gp_cache *c = mem_calloc(1, sizeof *c);
    if (c == NULL)
        return ERR_NOMEM;
    c->max_entries = max_entries ? max_entries : GP_CACHE_MAX_ENTRIES;
    c->max_bytes = max_bytes ? max_bytes : GP_CACHE_MAX_BYTES;
    /* About one chain per entry, within reason: a larger bound only makes
     * chains longer. */
    size_t nb = 16;
    while (nb < c->max_entries && nb < ((size_t)1 << 20))
        nb <<= 1;
    c->buckets = mem_calloc(nb, sizeof *c->buckets);
    if (c->buckets == NULL) {
        mem_free(c);
        return ERR_NOMEM;
    }
    c->buckets_mask = nb - 1;
    c->compacted = -1;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    assert(c->max_entries > 0 && c->max_bytes > 0);
    return 0;
}

/* hash_bytes: FNV-1a, 64 bits.  Chains stay short since entries are
 * bounded; a collision only costs a memcmp. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static struct gp__cache_entry *find(struct gp_cache *c, const uint8_t *key,
                                    size_t len, uint64_t h)
{
    for (struct gp__cache_entry *e = c->buckets[h & c->buckets_mask]; e != NULL;
         e = e->hnext)
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
            return e;
    return NULL;
}

static void lru_unlink(struct gp_cache *c, struct gp__cache_entry *e)
{
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(struct gp_cache *c, struct gp__cache_entry *e)
{
    e->newer = NULL;
    e->older = c->newest;
    if (c->newest != NULL)
        c->newest->newer = e;
    c->newest = e;
    if (c->oldest == NULL)
        c->oldest = e;
}

/* drop unlinks e from every structure and frees it. */
static void drop(struct gp_cache *c, struct gp__cache_entry *e)
{
    assert(c->n > 0 && c->bytes >= e->charge);
    struct gp__cache_entry **pp = &c->buckets[e->hash & c->buckets_mask];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(c, e);
    if (e->indexed)
        gp__ivl_remove(&c->root, &e->ivl);
    c->n--;
    c->bytes -= e->charge;
    mem_free(e);
    assert(c->n > 0 || (c->newest == NULL && c->root == NULL));
}

void gp__cache_clear(struct gp_cache *c)
{
    while (c->oldest != NULL)
        drop(c, c->oldest);
    assert(c->n == 0 && c->bytes == 0);
}

void gp__cache_lock(struct gp_cache *c)
{
    pthread_mutex_lock(&c->mu);
}

void gp__cache_unlock(struct gp_cache *c)
{
    pthread_mutex_unlock(&c->mu);
}

void gp_cache_close(struct gp_cache *c)
{
    if (c == NULL)
        return;
    gp__cache_clear(c);
    pthread_mutex_destroy(&c->mu);
    mem_free(c->buckets);
    mem_free(c);
}

/* interval: the bounds of [key, end) as etcd reads a request's range: a
 * single key when end is empty, every key from key on when end is "\0". */
static void interval(const ProtobufCBinaryData *key,
                     const ProtobufCBinaryData *end, struct gp__bound *b,
                     struct gp__bound *e)
{
    *b = (struct gp__bound){key->data, key->len, GP__BOUND_KEY};
    if (end->len == 0)
        *e = (struct gp__bound){key->data, key->len, GP__BOUND_SUCC};
    else if (end->len == 1 && end->data[0] == 0)
        *e = (struct gp__bound){NULL, 0, GP__BOUND_INF};
    else
        *e = (struct gp__bound){end->data, end->len, GP__BOUND_KEY};
}

static void collect(struct gp__ivl_node *n, void *arg)
{
    struct gp__cache_entry **victims = arg;
    struct gp__cache_entry *e =
        (struct gp__cache_entry *)n; /* ivl is the first member */
    e->doomed = *victims;
    *victims = e;
}

/* invalidate drops every indexed entry whose interval overlaps [key,
 * end) (read as interval() reads it).  Under c->mu. */
void gp__cache_invalidate(struct gp_cache *c, const ProtobufCBinaryData *key,
                          const ProtobufCBinaryData *end)
{
    struct gp__bound qb, qe;
    struct gp__cache_entry *victims = NULL;
    interval(key, end, &qb, &qe);
    gp__ivl_stab(c->root, &qb, &qe, collect, &victims);
    while (victims != NULL) {
        struct gp__cache_entry *e = victims;
        victims = e->doomed;
        drop(c, e);
    }
}

/* range_key serializes r as the cache's key: serializable set, unknown
 * fields left out (etcd's keyFunc marshals the known fields only), then a
 * NUL and the caller who.  r is restored before returning.  *out:
 * mem_malloc'd.  0 or ERR_NOMEM. */
static int range_key(Etcdserverpb__RangeRequest *r, const char *who,
                     uint8_t **out, size_t *len_out)
{
    size_t who_len = strlen(who);
    protobuf_c_boolean ser = r->serializable;
    unsigned nu = r->base.n_unknown_fields;
    r->serializable = 1;
    r->base.n_unknown_fields = 0;
    size_t n = protobuf_c_message_get_packed_size(&r->base);
    uint8_t *b = mem_malloc(n + 1 + who_len);
    if (b != NULL) {
        protobuf_c_message_pack(&r->base, b);
        b[n] = '\0';
        memcpy(b + n + 1, who, who_len);
    }
    r->serializable = ser;
    r->base.n_unknown_fields = nu;
    if (b == NULL)
        return ERR_NOMEM;
    *out = b;
    *len_out = n + 1 + who_len;
    return 0;
}

/* entry_new builds the entry of request r (its key already serialized)
 * and reply bytes; NULL when out of memory. */
static struct gp__cache_entry *entry_new(const Etcdserverpb__RangeRequest *r,
                                         const uint8_t *key, size_t key_len,
                                         const uint8_t *resp, size_t resp_len)
{
    size_t end_len = r->range_end.len;
    size_t data = key_len + r->key.len + end_len + resp_len;
    struct gp__cache_entry *e = mem_malloc(sizeof *e + data);
    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof *e);
    uint8_t *p = e->data;
    memcpy(p, key, key_len);
    e->key = p;
    e->key_len = key_len;
    p += key_len;
    ProtobufCBinaryData k = {r->key.len, p}, end = {end_len, p + r->key.len};
    if (r->key.len > 0)
        memcpy(k.data, r->key.data, r->key.len);
    if (end_len > 0)
        memcpy(end.data, r->range_end.data, end_len);
    interval(&k, &end, &e->ivl.begin, &e->ivl.end);
    p += r->key.len + end_len;
    if (resp_len > 0)
        memcpy(p, resp, resp_len);
    e->resp = p;
    e->resp_len = resp_len;
    e->rev = r->revision;
    e->hash = hash_bytes(key, key_len);
    e->charge = sizeof *e + data;
    return e;
}

/* add is etcd's Add under c->mu: e replaces any entry of its key, then
 * the bounds evict from the old end.  Takes e (frees it when not kept). */
void gp__cache_add(struct gp_cache *c, struct gp__cache_entry *e)
{
    /* etcd adds only above the compacted revision, and leaves an older
     * reply of the request in place then. */
    if (e->rev <= c->compacted) {
        mem_free(e);
        return;
    }
    struct gp__cache_entry *old = find(c, e->key, e->key_len, e->hash);
    if (old != NULL)
        drop(c, old);
    if (e->charge > c->max_bytes) {
        mem_free(e); /* alone above the bound: not cached */
        return;
    }
    struct gp__cache_entry **head = &c->buckets[e->hash & c->buckets_mask];
    e->hnext = *head;
    *head = e;
    lru_push(c, e);
    if (e->rev == 0) {
        e->ivl.seq = ++c->seq;
        gp__ivl_insert(&c->root, &e->ivl);
        e->indexed = true;
    }
    c->n++;
    c->bytes += e->charge;
    while (c->n > c->max_entries || c->bytes > c->max_bytes)
        drop(c, c->oldest);
    assert(c->n <= c->max_entries && c->bytes <= c->max_bytes);
}

/* range_entry builds the entry of the reply resp to request r
 * (serializable or not: it is keyed as serializable).  NULL when out of
 * memory: the reply is then not cached, which leaves nothing stale (an
 * older reply of the same request is as current as the index keeps it). */
struct gp__cache_entry *gp__cache_range_entry(Etcdserverpb__RangeRequest *r,
                                              const char *who,
                                              const uint8_t *resp,
                                              size_t resp_len)
{
    uint8_t *key = NULL;
    size_t key_len = 0;
    if (range_key(r, who, &key, &key_len) != 0)
        return NULL;
    struct gp__cache_entry *e = entry_new(r, key, key_len, resp, resp_len);
    mem_free(key);
    return e;
}

enum gp_cache_hit gp_cache_range_lookup(struct gp_cache *c, const char *who,
                                        const uint8_t *req,
                                        size_t len, uint8_t **resp_out,
                                        size_t *len_out)
{
    assert(c != NULL && resp_out != NULL && len_out != NULL);
    Etcdserverpb__RangeRequest *r =
        etcdserverpb__range_request__unpack(NULL, len, req);
    uint8_t *key = NULL;
    size_t key_len = 0;
    enum gp_cache_hit hit = GP_CACHE_NONE;
    if (r == NULL || !r->serializable ||
        range_key(r, who, &key, &key_len) != 0)
        goto out;
    uint64_t h = hash_bytes(key, key_len);
    pthread_mutex_lock(&c->mu);
    struct gp__cache_entry *e = find(c, key, key_len, h);
    if (r->revision > 0 && r->revision < c->compacted) {
        if (e != NULL)
            drop(c, e);
        c->hits++;
        hit = GP_CACHE_COMPACTED;
    } else if (e != NULL &&
               (*resp_out = mem_dup(e->resp, e->resp_len)) != NULL) {
        *len_out = e->resp_len;
        lru_unlink(c, e);
        lru_push(c, e);
        c->hits++;
        hit = GP_CACHE_HIT;
    } else {
        c->misses++;
        hit = GP_CACHE_MISS;
    }
    pthread_mutex_unlock(&c->mu);
out:
    mem_free(key);
    if (r != NULL)
        etcdserverpb__range_request__free_unpacked(r, NULL);
    return hit;
}

void gp_cache_range_done(struct gp_cache *c, const char *who,
                         const uint8_t *req, size_t req_len,
                         const uint8_t *resp, size_t resp_len)
{
    assert(c != NULL);
    Etcdserverpb__RangeRequest *r =
        etcdserverpb__range_request__unpack(NULL, req_len, req);
    if (r == NULL)
        return; /* nothing to key it by: not cached */
    struct gp__cache_entry *e = gp__cache_range_entry(r, who, resp, resp_len);
    etcdserverpb__range_request__free_unpacked(r, NULL);
    if (e == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    gp__cache_add(c, e);
    pthread_mutex_unlock(&c->mu);
}

void gp_cache_put(struct gp_cache *c, const uint8_t *req, size_t len)
{
    assert(c != NULL);
    Etcdserverpb__PutRequest *r =
        etcdserverpb__put_request__unpack(NULL, len, req);
    static const ProtobufCBinaryData none = {0, NULL};
    pthread_mutex_lock(&c->mu);
    if (r != NULL)
        gp__cache_invalidate(c, &r->key, &none);
    else
        gp__cache_clear(c); /* what it writes is unknown here */
    pthread_mutex_unlock(&c->mu);
    if (r != NULL)
        etcdserverpb__put_request__free_unpacked(r, NULL);
}

void gp_cache_delete(struct gp_cache *c, const uint8_t *req, size_t len)
{
    assert(c != NULL);
    Etcdserverpb__DeleteRangeRequest *r =
        etcdserverpb__delete_range_request__unpack(NULL, len, req);
    pthread_mutex_lock(&c->mu);
    if (r != NULL)
        gp__cache_invalidate(c, &r->key, &r->range_end);
    else
        gp__cache_clear(c);
    pthread_mutex_unlock(&c->mu);
    if (r != NULL)
        etcdserverpb__delete_range_request__free_unpacked(r, NULL);
}

void gp_cache_compact_done(struct gp_cache *c, const uint8_t *req, size_t len)
{
    assert(c != NULL);
    Etcdserverpb__CompactionRequest *r =
        etcdserverpb__compaction_request__unpack(NULL, len, req);
    if (r == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (r->revision > c->compacted) {
        c->compacted = r->revision;
        /* Entries no lookup can be answered from any more. */
        struct gp__cache_entry *e = c->oldest, *newer;
        for (; e != NULL; e = newer) {
            newer = e->newer;
            if (e->rev > 0 && e->rev < c->compacted)
                drop(c, e);
        }
    }
    pthread_mutex_unlock(&c->mu);
    etcdserverpb__compaction_request__free_unpacked(r, NULL);
}

void gp_cache_stats(struct gp_cache *c, struct gp_cache_stats *out)
{
    assert(c != NULL && out != NULL);
    pthread_mutex_lock(&c->mu);
    out->keys = c->n;
    out->hits = c->hits;
    out->misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}
