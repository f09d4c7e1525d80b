/*
 * cache_ivl.c - the interval index of the proxy's KV cache (cache.c): an
 * AVL tree of half-open key intervals [begin, end), ordered by (begin,
 * seq) and augmented with the greatest end of each subtree, so that the
 * intervals overlapping a query are found in O(k + log n) instead of a
 * scan of every cached request (etcd keeps the same index in its
 * pkg/adt interval tree).
 *
 * Bounds are byte strings compared as etcd compares keys (bytewise, a
 * prefix before its extensions), plus two forms that need no copy: "the
 * key followed by one zero byte" (the end of a single key's interval) and
 * "past every key" (the end of a range_end of "\0").  Nodes are intrusive
 * (struct gp__ivl_node lives in its cache entry) and the tree allocates
 * nothing, so neither insertion, removal nor a query can fail.
 */
#include <assert.h>
#include <string.h>

#include "grpcproxy/grpcproxy_int.h"

/* byte_at: byte i of bound b as an int, or -1 past its end (only used for
 * GP__BOUND_KEY and GP__BOUND_SUCC). */
static int byte_at(const struct gp__bound *b, size_t i)
{
    if (i < b->len)
        return b->p[i];
    if (i == b->len && b->kind == GP__BOUND_SUCC)
        return 0;
    return -1;
}

int gp__bound_cmp(const struct gp__bound *a, const struct gp__bound *b)
{
    assert(a != NULL && b != NULL);
    if (a->kind == GP__BOUND_INF || b->kind == GP__BOUND_INF) {
        if (a->kind == b->kind)
            return 0;
        return a->kind == GP__BOUND_INF ? 1 : -1;
    }
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n > 0 ? memcmp(a->p, b->p, n) : 0;
    if (c != 0)
        return c < 0 ? -1 : 1;
    /* Equal over the common part: at most two more positions decide (the
     * longer one's next byte against the other's virtual zero or end). */
    for (size_t i = n;; i++) {
        int x = byte_at(a, i), y = byte_at(b, i);
        if (x != y)
            return x < y ? -1 : 1;
        if (x < 0)
            return 0;
    }
}

bool gp__bound_overlap(const struct gp__bound *b1, const struct gp__bound *e1,
                       const struct gp__bound *b2, const struct gp__bound *e2)
{
    return gp__bound_cmp(b1, e2) < 0 && gp__bound_cmp(b2, e1) < 0;
}

/* node_cmp orders nodes by begin, then by seq (unique per node). */
static int node_cmp(const struct gp__ivl_node *a, const struct gp__ivl_node *b)
{
    int c = gp__bound_cmp(&a->begin, &b->begin);
    if (c != 0)
        return c;
    return a->seq < b->seq ? -1 : a->seq > b->seq ? 1 : 0;
}

static int height(const struct gp__ivl_node *n)
{
    return n != NULL ? n->height : 0;
}

/* fix recomputes n's height and subtree maximum from its children. */
static void fix(struct gp__ivl_node *n)
{
    int hl = height(n->left), hr = height(n->right);
    n->height = 1 + (hl > hr ? hl : hr);
    n->max = n->end;
    if (n->left != NULL && gp__bound_cmp(&n->left->max, &n->max) > 0)
        n->max = n->left->max;
    if (n->right != NULL && gp__bound_cmp(&n->right->max, &n->max) > 0)
        n->max = n->right->max;
}

static struct gp__ivl_node *rotate_right(struct gp__ivl_node *n)
{
    struct gp__ivl_node *l = n->left;
    n->left = l->right;
    l->right = n;
    fix(n);
    fix(l);
    return l;
}

static struct gp__ivl_node *rotate_left(struct gp__ivl_node *n)
{
    struct gp__ivl_node *r = n->right;
    n->right = r->left;
    r->left = n;
    fix(n);
    fix(r);
    return r;
}

/* balance restores the AVL property at n (its children are balanced and
 * differ in height by at most 2) and returns the subtree's new root. */
static struct gp__ivl_node *balance(struct gp__ivl_node *n)
{
    fix(n);
    int d = height(n->left) - height(n->right);
    assert(d >= -2 && d <= 2);
    if (d > 1) {
        if (height(n->left->left) < height(n->left->right))
            n->left = rotate_left(n->left);
        return rotate_right(n);
    }
    if (d < -1) {
        if (height(n->right->right) < height(n->right->left))
            n->right = rotate_right(n->right);
        return rotate_left(n);
    }
    return n;
}

static struct gp__ivl_node *insert(struct gp__ivl_node *t,
                                   struct gp__ivl_node *n)
{
    if (t == NULL)
        return n;
    int c = node_cmp(n, t);
    assert(c != 0);
    if (c < 0)
        t->left = insert(t->left, n);
    else
        t->right = insert(t->right, n);
    return balance(t);
}

void gp__ivl_insert(struct gp__ivl_node **root, struct gp__ivl_node *n)
{
    assert(root != NULL && n != NULL);
    n->left = n->right = NULL;
    fix(n);
    *root = insert(*root, n);
    assert(*root != NULL);
}

/* remove_min unlinks the leftmost node of t into *min_out and returns the
 * rest, rebalanced. */
static struct gp__ivl_node *remove_min(struct gp__ivl_node *t,
                                       struct gp__ivl_node **min_out)
{
    if (t->left == NULL) {
        *min_out = t;
        return t->right;
    }
    t->left = remove_min(t->left, min_out);
    return balance(t);
}

static struct gp__ivl_node *remove_node(struct gp__ivl_node *t,
                                        struct gp__ivl_node *n)
{
    assert(t != NULL); /* n is in the tree */
    int c = node_cmp(n, t);
    if (c < 0) {
        t->left = remove_node(t->left, n);
        return balance(t);
    }
    if (c > 0) {
        t->right = remove_node(t->right, n);
        return balance(t);
    }
    assert(t == n);
    if (t->left == NULL)
        return t->right;
    if (t->right == NULL)
        return t->left;
    struct gp__ivl_node *m = NULL;
    struct gp__ivl_node *rest = remove_min(t->right, &m);
    m->left = t->left;
    m->right = rest;
    return balance(m);
}

void gp__ivl_remove(struct gp__ivl_node **root, struct gp__ivl_node *n)
{
    assert(root != NULL && *root != NULL && n != NULL);
    *root = remove_node(*root, n);
    n->left = n->right = NULL;
}

void gp__ivl_stab(struct gp__ivl_node *t, const struct gp__bound *qb,
                  const struct gp__bound *qe, gp__ivl_visit_fn *visit,
                  void *arg)
{
    assert(qb != NULL && qe != NULL && visit != NULL);
    /* Nothing below t ends after qb: no overlap in this subtree. */
    if (t == NULL || gp__bound_cmp(&t->max, qb) <= 0)
        return;
    gp__ivl_stab(t->left, qb, qe, visit, arg);
    /* t and everything right of it begin at or after t's begin. */
    if (gp__bound_cmp(&t->begin, qe) >= 0)
        return;
    if (gp__bound_cmp(qb, &t->end) < 0)
        visit(t, arg);
    gp__ivl_stab(t->right, qb, qe, visit, arg);
}
