/*
 * watch_index.c - the synced group's index and the id table.
 *
 * Single-key watchers sit in a chained hash table keyed by their key, so
 * a put costs one bucket walk.  Range watchers sit in a treap ordered by
 * (start key, end), each node also holding the node of largest end in
 * its subtree: a stab query for key k skips every subtree whose largest
 * end is <= k and every right subtree of a node starting after k, so it
 * costs O(log n + matches) expected (the interval tree of etcd's
 * pkg/adt, as a treap because it needs no colour cases).
 *
 * Watchers of the same key or range share one entry: the first is the
 * head (in the table or the treap), the others are chained behind it
 * (gnext/gprev), and a stab hands out the whole chain without comparing
 * keys again.  Many watchers of one prefix (Kubernetes informers, 10k in
 * the fan-out benchmark) cost one treap node per event instead of three
 * key comparisons each.  Removing a head promotes the first member into
 * its place.  The id table maps (stream, watch id) to the watcher for
 * create and cancel.
 */
#include <string.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "watch/watch_int.h"

int watch__cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n > 0 ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c < 0 ? -1 : 1;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

bool watch__contains(const struct watch_watcher *w, const uint8_t *k,
                     size_t kl)
{
    int c = watch__cmp(k, kl, w->key, w->key_len);
    if (w->end_len == 0 && !w->end_inf)
        return c == 0;
    if (c < 0)
        return false;
    return w->end_inf || watch__cmp(k, kl, w->end, w->end_len) < 0;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t x = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        x = (x ^ p[i]) * 1099511628211ull;
    return x ^ (x >> 29);
}

/* grow_table doubles a chained table of *nb buckets once it holds more
 * entries than buckets; chains are relinked through next_of. */
static int grow_table(struct watch_watcher ***tab, size_t *nb, size_t count,
                      struct watch_watcher **(*next_of)(struct watch_watcher *),
                      uint64_t (*hash_of)(const struct watch_watcher *))
{
    if (count < *nb && *tab != NULL)
        return 0;
    size_t nnb = *nb ? *nb * 2 : 64;
    struct watch_watcher **nt = mem_calloc(nnb, sizeof *nt);
    if (nt == NULL)
        return *tab != NULL ? 0 : ERR_NOMEM; /* a full table still works */
    for (size_t i = 0; i < *nb; i++) {
        struct watch_watcher *w = (*tab)[i], *nx;
        for (; w != NULL; w = nx) {
            nx = *next_of(w);
            size_t b = hash_of(w) & (nnb - 1);
            *next_of(w) = nt[b];
            nt[b] = w;
        }
    }
    mem_free(*tab);
    *tab = nt;
    *nb = nnb;
    return 0;
}

static struct watch_watcher **hnext_of(struct watch_watcher *w)
{
    return &w->hnext;
}

static uint64_t key_hash_of(const struct watch_watcher *w)
{
    return hash_bytes(w->key, w->key_len);
}

/* hprev_fix sets every key chain's back links after a rehash. */
static void hprev_fix(struct watch_hub *h)
{
    for (size_t b = 0; b < h->n_keys_buckets; b++) {
        struct watch_watcher *prev = NULL;
        for (struct watch_watcher *w = h->keys[b]; w != NULL; w = w->hnext) {
            w->hprev = prev;
            prev = w;
        }
    }
}

static struct watch_watcher **inext_of(struct watch_watcher *w)
{
    return &w->inext;
}

static uint64_t id_hash(const struct watch_stream *st, int64_t id)
{
    uint64_t x = (uint64_t)(uintptr_t)st * 0x9e3779b97f4a7c15ull;
    x ^= (uint64_t)id * 0xc2b2ae3d27d4eb4full;
    return x ^ (x >> 31);
}

static uint64_t id_hash_of(const struct watch_watcher *w)
{
    return id_hash(w->st, w->id);
}

/* --- treap of ranges ------------------------------------------------------ */

/* cmp_end orders range ends; an infinite end is above every key. */
static int cmp_end(const struct watch_watcher *a, const struct watch_watcher *b)
{
    if (a->end_inf || b->end_inf)
        return a->end_inf == b->end_inf ? 0 : a->end_inf ? 1 : -1;
    return watch__cmp(a->end, a->end_len, b->end, b->end_len);
}

/* node_cmp orders ranges by start key, then end (one node per range). */
static int node_cmp(const struct watch_watcher *a,
                    const struct watch_watcher *b)
{
    int c = watch__cmp(a->key, a->key_len, b->key, b->key_len);
    return c != 0 ? c : cmp_end(a, b);
}

static bool node_less(const struct watch_watcher *a,
                      const struct watch_watcher *b)
{
    return node_cmp(a, b) < 0;
}

static void fix(struct watch_watcher *t)
{
    t->maxw = t;
    if (t->left != NULL && cmp_end(t->left->maxw, t->maxw) > 0)
        t->maxw = t->left->maxw;
    if (t->right != NULL && cmp_end(t->right->maxw, t->maxw) > 0)
        t->maxw = t->right->maxw;
}

/* split t into the nodes less than n (*l) and the others (*r). */
static void split(struct watch_watcher *t, const struct watch_watcher *n,
                  struct watch_watcher **l, struct watch_watcher **r)
{
    if (t == NULL) {
        *l = *r = NULL;
    } else if (node_less(t, n)) {
        split(t->right, n, &t->right, r);
        fix(t);
        *l = t;
    } else {
        split(t->left, n, l, &t->left);
        fix(t);
        *r = t;
    }
}

static struct watch_watcher *merge(struct watch_watcher *l,
                                   struct watch_watcher *r)
{
    if (l == NULL || r == NULL)
        return l != NULL ? l : r;
    if (l->prio > r->prio) {
        l->right = merge(l->right, r);
        fix(l);
        return l;
    }
    r->left = merge(l, r->left);
    fix(r);
    return r;
}

static struct watch_watcher *tinsert(struct watch_watcher *t,
                                     struct watch_watcher *n)
{
    if (t == NULL)
        return n;
    if (n->prio > t->prio) {
        split(t, n, &n->left, &n->right);
        fix(n);
        return n;
    }
    if (node_less(n, t))
        t->left = tinsert(t->left, n);
    else
        t->right = tinsert(t->right, n);
    fix(t);
    return t;
}

static struct watch_watcher *tdelete(struct watch_watcher *t,
                                     struct watch_watcher *n)
{
    CHECK(t != NULL); /* n is in the tree */
    if (t == n) {
        struct watch_watcher *m = merge(t->left, t->right);
        n->left = n->right = NULL;
        return m;
    }
    if (node_less(n, t))
        t->left = tdelete(t->left, n);
    else
        t->right = tdelete(t->right, n);
    fix(t);
    return t;
}

/* tfind: the node of w's range, or NULL. */
static struct watch_watcher *tfind(struct watch_watcher *t,
                                   const struct watch_watcher *w)
{
    while (t != NULL) {
        int c = node_cmp(w, t);
        if (c == 0)
            return t;
        t = c < 0 ? t->left : t->right;
    }
    return NULL;
}

/* treplace puts n in old's place (same range, so the same order). */
static struct watch_watcher *treplace(struct watch_watcher *t,
                                      struct watch_watcher *old,
                                      struct watch_watcher *n)
{
    CHECK(t != NULL); /* old is in the tree */
    if (t == old) {
        n->left = old->left;
        n->right = old->right;
        n->prio = old->prio;
        fix(n);
        old->left = old->right = NULL;
        return n;
    }
    if (node_less(old, t))
        t->left = treplace(t->left, old, n);
    else
        t->right = treplace(t->right, old, n);
    fix(t); /* an ancestor's largest end may have been old */
    return t;
}

/* visit_group hands head and the members chained behind it to fn. */
static int visit_group(struct watch_watcher *head, watch__visit_fn fn,
                       void *arg)
{
    int rc = 0;
    for (struct watch_watcher *w = head; w != NULL && rc == 0; w = w->gnext)
        rc = fn(arg, w);
    return rc;
}

/* group_join chains w behind head (same key or range). */
static void group_join(struct watch_watcher *head, struct watch_watcher *w)
{
    w->gmember = true;
    w->gprev = head;
    w->gnext = head->gnext;
    if (w->gnext != NULL)
        w->gnext->gprev = w;
    head->gnext = w;
}

/* end_above: whether w's end is above key k (k is before the end). */
static bool end_above(const struct watch_watcher *w, const uint8_t *k,
                      size_t kl)
{
    return w->end_inf || watch__cmp(k, kl, w->end, w->end_len) < 0;
}

static int tstab(struct watch_watcher *t, const uint8_t *k, size_t kl,
                 watch__visit_fn fn, void *arg)
{
    int rc = 0;
    while (rc == 0 && t != NULL && end_above(t->maxw, k, kl)) {
        if ((rc = tstab(t->left, k, kl, fn, arg)) != 0)
            break;
        if (watch__cmp(t->key, t->key_len, k, kl) > 0)
            break; /* t and everything right of it start after k */
        if (end_above(t, k, kl))
            rc = visit_group(t, fn, arg);
        t = t->right;
    }
    return rc;
}

/* --- public to the module ------------------------------------------------- */

static bool is_range(const struct watch_watcher *w)
{
    return w->end_len > 0 || w->end_inf;
}

/* key_head: the head of w's key in the hash table, or NULL. */
static struct watch_watcher *key_head(struct watch_hub *h,
                                      const struct watch_watcher *w)
{
    if (h->n_keys == 0)
        return NULL;
    size_t b = key_hash_of(w) & (h->n_keys_buckets - 1);
    for (struct watch_watcher *x = h->keys[b]; x != NULL; x = x->hnext)
        if (watch__cmp(x->key, x->key_len, w->key, w->key_len) == 0)
            return x;
    return NULL;
}

int watch__index_add(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(!w->synced && !w->dead);
    struct watch_watcher *head =
        is_range(w) ? tfind(h->ranges, w) : key_head(h, w);
    if (head != NULL) {
        group_join(head, w);
        return 0;
    }
    w->gmember = false;
    w->gnext = NULL;
    if (is_range(w)) {
        h->rng ^= h->rng << 13;
        h->rng ^= h->rng >> 17;
        h->rng ^= h->rng << 5;
        w->prio = h->rng;
        w->left = w->right = NULL;
        w->maxw = w;
        h->ranges = tinsert(h->ranges, w);
        return 0;
    }
    size_t nb = h->n_keys_buckets;
    int rc = grow_table(&h->keys, &h->n_keys_buckets, h->n_keys, hnext_of,
                        key_hash_of);
    if (rc != 0)
        return rc;
    if (h->n_keys_buckets != nb)
        hprev_fix(h); /* grow_table relinked the chains one way */
    size_t b = key_hash_of(w) & (h->n_keys_buckets - 1);
    w->hprev = NULL;
    w->hnext = h->keys[b];
    if (w->hnext != NULL)
        w->hnext->hprev = w;
    h->keys[b] = w;
    h->n_keys++;
    return 0;
}

void watch__index_del(struct watch_hub *h, struct watch_watcher *w)
{
    CHECK(w->synced);
    if (w->gmember) { /* a member: out of its chain */
        w->gprev->gnext = w->gnext;
        if (w->gnext != NULL)
            w->gnext->gprev = w->gprev;
        w->gmember = false;
        w->gnext = w->gprev = NULL;
        return;
    }
    struct watch_watcher *m = w->gnext;
    w->gnext = NULL;
    if (m != NULL) { /* a head with members: the first takes its place */
        CHECK(m->gmember && m->gprev == w);
        m->gmember = false;
        if (is_range(w)) {
            h->ranges = treplace(h->ranges, w, m);
            return;
        }
        m->hnext = w->hnext;
        m->hprev = w->hprev;
        if (m->hprev != NULL) {
            m->hprev->hnext = m;
        } else {
            size_t b = key_hash_of(w) & (h->n_keys_buckets - 1);
            CHECK(h->keys[b] == w);
            h->keys[b] = m;
        }
        if (m->hnext != NULL)
            m->hnext->hprev = m;
        w->hnext = w->hprev = NULL;
        return;
    }
    if (is_range(w)) {
        h->ranges = tdelete(h->ranges, w);
        return;
    }
    if (w->hprev != NULL) {
        CHECK(w->hprev->hnext == w);
        w->hprev->hnext = w->hnext;
    } else {
        size_t b = key_hash_of(w) & (h->n_keys_buckets - 1);
        CHECK(h->keys[b] == w);
        h->keys[b] = w->hnext;
    }
    if (w->hnext != NULL)
        w->hnext->hprev = w->hprev;
    w->hnext = w->hprev = NULL;
    h->n_keys--;
}

int watch__index_stab(struct watch_hub *h, const uint8_t *k, size_t kl,
                      watch__visit_fn fn, void *arg)
{
    int rc = 0;
    if (h->n_keys > 0) {
        size_t b = hash_bytes(k, kl) & (h->n_keys_buckets - 1);
        for (struct watch_watcher *w = h->keys[b]; w != NULL && rc == 0;
             w = w->hnext)
            if (watch__cmp(w->key, w->key_len, k, kl) == 0)
                rc = visit_group(w, fn, arg);
    }
    if (rc == 0)
        rc = tstab(h->ranges, k, kl, fn, arg);
    return rc;
}

int watch__ids_add(struct watch_hub *h, struct watch_watcher *w)
{
    int rc = grow_table(&h->ids, &h->n_ids_buckets, h->n_watchers, inext_of,
                        id_hash_of);
    if (rc != 0)
        return rc;
    size_t b = id_hash_of(w) & (h->n_ids_buckets - 1);
    w->inext = h->ids[b];
    h->ids[b] = w;
    return 0;
}

void watch__ids_del(struct watch_hub *h, struct watch_watcher *w)
{
    size_t b = id_hash_of(w) & (h->n_ids_buckets - 1);
    struct watch_watcher **p = &h->ids[b];
    while (*p != w) {
        CHECK(*p != NULL);
        p = &(*p)->inext;
    }
    *p = w->inext;
    w->inext = NULL;
}

struct watch_watcher *watch__ids_find(struct watch_hub *h,
                                      const struct watch_stream *st,
                                      int64_t id)
{
    if (h->ids == NULL)
        return NULL;
    size_t b = id_hash(st, id) & (h->n_ids_buckets - 1);
    for (struct watch_watcher *w = h->ids[b]; w != NULL; w = w->inext)
        if (w->st == st && w->id == id)
            return w;
    return NULL;
}
