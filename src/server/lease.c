/*
 * lease.c - the lease table (lease.h): its bucket codec, loading it at
 * each store open, and applying LeaseGrant, LeaseRevoke and
 * LeaseCheckpoint inside the apply batch.  The leader's side (expiry,
 * renewals, checkpoints) is lease_primary.c.
 */
#include "server/lease.h"

#include <string.h>

#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define TAB_MIN 64

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void server__lease_encode(const struct server_lease *l,
                          uint8_t key[SERVER_LEASE_KEY_BYTES],
                          uint8_t val[SERVER_LEASE_VAL_BYTES])
{
    CHECK(l->id != 0 && l->ttl >= 1 && l->remaining >= 0);
    put_be64(key, (uint64_t)l->id);
    put_le64(val, (uint64_t)l->ttl);
    put_le64(val + 8, (uint64_t)l->remaining);
}

int server__lease_decode(const void *key, size_t key_len, const void *val,
                         size_t val_len, struct server_lease *out)
{
    if (key_len != SERVER_LEASE_KEY_BYTES || val_len != SERVER_LEASE_VAL_BYTES)
        return ERR_CORRUPT;
    memset(out, 0, sizeof *out);
    out->id = (int64_t)get_be64(key);
    out->ttl = (int64_t)get_le64(val);
    out->remaining = (int64_t)get_le64((const uint8_t *)val + 8);
    if (out->id == 0 || out->ttl < 1 || out->ttl > SERVER_LEASE_TTL_MAX ||
        out->remaining < 0 || out->remaining > SERVER_LEASE_TTL_MAX)
        return ERR_CORRUPT;
    return 0;
}

/* --- the table (leases.mu held) ---------------------------------------- */

static size_t slot_of(const struct server_leases *ls, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (ls->cap - 1);
}

static struct server_lease *find(const struct server_leases *ls, int64_t id)
{
    if (ls->cap == 0)
        return NULL;
    for (struct server_lease *l = ls->tab[slot_of(ls, id)]; l; l = l->next)
        if (l->id == id)
            return l;
    return NULL;
}

struct server_lease *server__lease_find(struct server_leases *ls, int64_t id)
{
    return find(ls, id);
}

static int grow(struct server_leases *ls)
{
    size_t cap = ls->cap ? ls->cap * 2 : TAB_MIN;
    struct server_lease **tab = mem_calloc(cap, sizeof *tab);
    if (tab == NULL)
        return ERR_NOMEM;
    struct server_lease **old = ls->tab;
    size_t old_cap = ls->cap;
    ls->tab = tab;
    ls->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        for (struct server_lease *l = old[i], *n; l != NULL; l = n) {
            n = l->next;
            size_t k = slot_of(ls, l->id);
            l->next = tab[k];
            tab[k] = l;
        }
    mem_free(old);
    ls->cp_slot = 0; /* slots moved: a running sweep starts over */
    return 0;
}

/* insert copies l into the table (id not held). */
static int insert(struct server_leases *ls, const struct server_lease *l)
{
    CHECK(find(ls, l->id) == NULL);
    if (ls->n >= SERVER_LEASES_MAX)
        return ERR_TOO_MANY_REQUESTS;
    if (ls->cap == 0 || ls->n + 1 > ls->cap / 4 * 3) {
        int rc = grow(ls);
        if (rc != 0)
            return rc;
    }
    struct server_lease *c = mem_malloc(sizeof *c);
    if (c == NULL)
        return ERR_NOMEM;
    *c = *l;
    size_t k = slot_of(ls, c->id);
    c->next = ls->tab[k];
    ls->tab[k] = c;
    ls->n++;
    return 0;
}

static void unlink_lease(struct server_leases *ls, int64_t id)
{
    struct server_lease **p = &ls->tab[slot_of(ls, id)];
    while (*p != NULL && (*p)->id != id)
        p = &(*p)->next;
    CHECK(*p != NULL);
    struct server_lease *l = *p;
    *p = l->next;
    mem_free(l);
    ls->n--;
}

static void clear(struct server_leases *ls)
{
    for (size_t i = 0; i < ls->cap; i++)
        for (struct server_lease *l = ls->tab[i], *n; l != NULL; l = n) {
            n = l->next;
            mem_free(l);
        }
    mem_free(ls->tab);
    ls->tab = NULL;
    ls->cap = ls->n = 0;
    ls->cp_slot = 0;
}

/* --- loading ------------------------------------------------------------ */

/* Reads the table; a record read here is anchored at now (read_ms): it
 * was proposed before, so it still ends no earlier than its leader's
 * deadline then (lease.h, "The bound"). */
static int read_all(struct server *s, struct server_leases *ls,
                    uint64_t read_ms)
{
    struct backend_txn *t;
    struct backend_cursor *c = NULL;
    int rc = backend_read_begin(s->be, &t);
    if (rc != 0)
        return rc;
    rc = backend_cursor_open(t, ls->bucket, &c);
    struct backend_val k, v;
    if (rc == 0)
        rc = backend_cursor_first(c, &k, &v);
    while (rc == 0) {
        struct server_lease l;
        rc = server__lease_decode(k.data, k.len, v.data, v.len, &l);
        if (rc == 0 && l.remaining > 0)
            l.rec_ms = read_ms;
        if (rc == 0)
            rc = insert(ls, &l);
        if (rc == 0)
            rc = backend_cursor_next(c, &k, &v);
    }
    backend_cursor_close(c);
    backend_read_end(t);
    return rc == ERR_NOTFOUND ? 0 : rc;
}

static int load(struct server *s)
{
    struct server_leases *ls = &s->leases;
    pthread_mutex_lock(&ls->mu);
    clear(ls);
    ls->epoch = 0; /* promoted again by the next tick or keep-alive */
    int rc = read_all(s, ls, server__clock_ms(s));
    pthread_mutex_unlock(&ls->mu);
    if (rc == ERR_CORRUPT)
        log_error("etcdserver", "the store's lease bucket does not decode");
    return rc;
}

int server__leases_load(struct server *s)
{
    CHECK(s != NULL && s->be != NULL);
    struct server_leases *ls = &s->leases;
    if (!ls->inited) {
        pthread_mutex_init(&ls->mu, NULL);
        pthread_mutex_init(&ls->fwd_mu, NULL);
        ls->inited = true;
    }
    int rc = backend_bucket_open(s->be, "lease", 0, &ls->bucket);
    return rc == 0 ? load(s) : rc;
}

int server__leases_rebind(struct server *s)
{
    CHECK(s != NULL && s->be != NULL && s->leases.inited);
    return backend_bucket_open(s->be, "lease", 0, &s->leases.bucket);
}

void server__leases_reload(struct server *s)
{
    if (load(s) != 0)
        log_error("etcdserver", "cannot read the leases again");
}

void server__leases_close(struct server *s)
{
    struct server_leases *ls = &s->leases;
    if (!ls->inited)
        return;
    pthread_mutex_lock(&ls->mu);
    clear(ls);
    pthread_mutex_unlock(&ls->mu);
    pthread_mutex_destroy(&ls->mu);
    server__lease_forward_stop(s); /* normally done already: empty */
    pthread_mutex_destroy(&ls->fwd_mu);
    ls->inited = false;
}

bool server__lease_exists(struct server *s, int64_t id)
{
    pthread_mutex_lock(&s->leases.mu);
    bool held = find(&s->leases, id) != NULL;
    pthread_mutex_unlock(&s->leases.mu);
    return held;
}

/* --- applying ----------------------------------------------------------- */

static int persist(struct server *s, struct mvcc_batch *b,
                   const struct server_lease *l)
{
    uint8_t key[SERVER_LEASE_KEY_BYTES], val[SERVER_LEASE_VAL_BYTES];
    server__lease_encode(l, key, val);
    return backend_put(mvcc_batch_backend_txn(b), s->leases.bucket, key,
                       sizeof key, val, sizeof val);
}

/* etcd's minimum TTL: 1.5 election timeouts, in whole seconds (rounded
 * up), so that a lease outlives a leader election. */
int64_t server__lease_min_ttl(const struct server *s)
{
    uint64_t hb = s->cfg.heartbeat_ms ? s->cfg.heartbeat_ms : 100;
    uint64_t ticks = s->cfg.election_ms ? s->cfg.election_ms / hb : 10;
    uint64_t ms = (3 * ticks) / 2 * hb;
    return (int64_t)((ms + 999) / 1000);
}

int server__lease_grant_apply(struct server *s, struct mvcc_batch *b,
                              const Etcdserverpb__LeaseGrantRequest *r,
                              struct arena *a, ProtobufCMessage **msg_out)
{
    CHECK(s != NULL && b != NULL && r != NULL);
    if (r->id == 0)
        return ERR_LEASE_NOT_FOUND;
    if (r->ttl > SERVER_LEASE_TTL_MAX)
        return ERR_LEASE_TTL_TOO_LARGE;
    struct server_leases *ls = &s->leases;
    int64_t min = server__lease_min_ttl(s);
    struct server_lease l = {.id = r->id, .ttl = r->ttl < min ? min : r->ttl};
    Etcdserverpb__LeaseGrantResponse *resp = arena_alloc(a, sizeof *resp);
    Etcdserverpb__ResponseHeader *h = arena_alloc(a, sizeof *h);
    if (resp == NULL || h == NULL)
        return ERR_NOMEM;
    pthread_mutex_lock(&ls->mu);
    int rc = find(ls, l.id) != NULL ? ERR_LEASE_EXIST : 0;
    if (rc == 0 && ls->n >= SERVER_LEASES_MAX)
        rc = ERR_TOO_MANY_REQUESTS;
    if (rc == 0)
        rc = persist(s, b, &l);
    if (rc == 0 && ls->epoch != 0) { /* a next leader: the full TTL */
        l.cp_ms = server__clock_ms(s);
        l.expiry_ms = l.cp_ms + (uint64_t)l.ttl * 1000u;
    }
    if (rc == 0)
        rc = insert(ls, &l);
    if (rc == 0 && ls->epoch != 0)
        server__lease_wake(s, &l);
    pthread_mutex_unlock(&ls->mu);
    if (rc != 0)
        return rc;
    etcdserverpb__lease_grant_response__init(resp);
    etcdserverpb__response_header__init(h);
    resp->header = h;
    resp->id = l.id;
    resp->ttl = l.ttl;
    resp->error = "";
    *msg_out = &resp->base;
    return 0;
}

int server__lease_revoke_apply(struct server *s, struct mvcc_batch *b,
                               const Etcdserverpb__LeaseRevokeRequest *r,
                               struct arena *a, ProtobufCMessage **msg_out)
{
    CHECK(s != NULL && b != NULL && r != NULL);
    struct server_leases *ls = &s->leases;
    Etcdserverpb__LeaseRevokeResponse *resp = arena_alloc(a, sizeof *resp);
    Etcdserverpb__ResponseHeader *h = arena_alloc(a, sizeof *h);
    if (resp == NULL || h == NULL)
        return ERR_NOMEM;
    if (!server__lease_exists(s, r->id))
        return ERR_LEASE_NOT_FOUND;
    /* Every attached key goes in one revision, then the lease. */
    struct mvcc_txn *t = mvcc_txn_begin(b);
    int64_t deleted = 0;
    int rc = mvcc_txn_delete_lease(t, r->id, &deleted);
    mvcc_txn_end(t);
    uint8_t key[SERVER_LEASE_KEY_BYTES];
    put_be64(key, (uint64_t)r->id);
    if (rc == 0)
        rc = backend_del(mvcc_batch_backend_txn(b), ls->bucket, key,
                         sizeof key);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&ls->mu);
    unlink_lease(ls, r->id);
    pthread_mutex_unlock(&ls->mu);
    etcdserverpb__lease_revoke_response__init(resp);
    etcdserverpb__response_header__init(h);
    resp->header = h;
    *msg_out = &resp->base;
    return 0;
}

/* One checkpoint (mu held).  Every member anchors a record at the time
 * it applies it (rec_ms): the entry was proposed before, when its leader
 * had at most rem seconds left, so rec_ms + rem is no earlier than that
 * leader's deadline, and a next leader starts the lease from there
 * (lease_primary.c: promote).  On the leader its own expiry stands: it
 * only records what a next leader starts from; a cleared record (0) is a
 * renewal that waited for it (lease_primary.c), renews, and leaves no
 * anchor.  Either way the checkpoint proposed here is no longer on its
 * way (cp_sent). */
static int checkpoint_one(struct server *s, struct mvcc_batch *b,
                          const Etcdserverpb__LeaseCheckpoint *cp)
{
    struct server_lease *l = find(&s->leases, cp->id);
    if (l == NULL)
        return 0; /* revoked meanwhile */
    int64_t rem = cp->remaining_ttl < 0 ? 0 : cp->remaining_ttl;
    if (rem > SERVER_LEASE_TTL_MAX)
        rem = SERVER_LEASE_TTL_MAX;
    uint64_t now = server__clock_ms(s);
    l->cp_sent = false;
    l->rec_ms = rem > 0 ? now : 0;
    l->rec_live = rem > 0;
    l->inherited = l->inherited && rem > 0;
    if (rem == 0 && s->leases.epoch != 0) {
        l->cp_ms = now;
        l->expiry_ms = now + (uint64_t)l->ttl * 1000u;
    }
    CHECK((l->rec_ms != 0) == (rem > 0));
    if (s->leases.epoch != 0) /* renewed, or no longer inherited */
        server__lease_wake(s, l);
    if (rem == l->remaining)
        return 0;
    l->remaining = rem;
    return persist(s, b, l);
}

int server__lease_checkpoint_apply(
    struct server *s, struct mvcc_batch *b,
    const Etcdserverpb__LeaseCheckpointRequest *r, struct arena *a,
    ProtobufCMessage **msg_out)
{
    CHECK(s != NULL && b != NULL && r != NULL);
    Etcdserverpb__LeaseCheckpointResponse *resp = arena_alloc(a, sizeof *resp);
    Etcdserverpb__ResponseHeader *h = arena_alloc(a, sizeof *h);
    if (resp == NULL || h == NULL)
        return ERR_NOMEM;
    int rc = 0;
    pthread_mutex_lock(&s->leases.mu);
    for (size_t i = 0; i < r->n_checkpoints && rc == 0; i++)
        rc = checkpoint_one(s, b, r->checkpoints[i]);
    pthread_mutex_unlock(&s->leases.mu);
    if (rc != 0)
        return rc;
    etcdserverpb__lease_checkpoint_response__init(resp);
    etcdserverpb__response_header__init(h);
    resp->header = h;
    *msg_out = &resp->base;
    return 0;
}
