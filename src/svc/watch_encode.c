/*
 * watch_encode.c - the events of a WatchResponse, encoded once for the many
 * watchers that get the same ones.
 *
 * A put under a prefix that 10 000 watchers watch makes 10 000 responses
 * that differ only in watch_id; packing each one's events with protobuf-c
 * was the largest cost of the fan-out (docs/BENCHMARKS.md "Watch").  So the
 * sink keeps, per thread, the last events it encoded: each event packed
 * once as an mvccpb.Event, and one protobuf-c unknown field per event
 * (tag 11, length-delimited: exactly the wire form of WatchResponse.events)
 * pointing at those bytes.  A response whose events are the same, or the
 * tail of them (the catch-up gives each watcher the tail of one history
 * batch from its next revision), takes the cached fields: protobuf-c writes unknown fields verbatim after the known
 * ones, and field 11 is WatchResponse's last field anyway, so the bytes
 * are those of a normal pack.
 *
 * "The same" is decided on what the events are, not where they live: an
 * event is fully determined by its key and its revisions (a key changes at
 * most once per revision, and history never changes), so the cache keeps
 * a copy of each key and compares key bytes, type, mod/create revision,
 * version, lease, value length and the previous pair's revision (0 when
 * the watcher did not ask for it).  Memory bounds: at most
 * ENC_CACHE_BYTES_MAX of encoded events and ENC_CACHE_EVENTS_MAX events;
 * larger responses are packed the normal way.  The thread's cache is freed
 * when the thread exits (a pthread key destructor).
 */
#include <pthread.h>
#include <string.h>

#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

#define ENC_CACHE_BYTES_MAX (1u << 20)
#define ENC_CACHE_EVENTS_MAX 4096
#define WATCH_RESPONSE_EVENTS_FIELD 11

/* What identifies one cached event. */
struct enc_id {
    int type;            /* enum mvcc_event_type */
    mvcc_rev mod, create; /* kv revisions */
    mvcc_rev prev_mod;   /* prev_kv's mod revision, 0 = none sent */
    int64_t version;     /* kv version */
    int64_t lease;       /* kv lease */
    size_t value_len;    /* kv value length (0 when no value) */
    size_t key_off;      /* the key's copy in keys */
    size_t key_len;      /* its length */
};

/* One thread's cache.  Owned by the thread (thread-specific data). */
struct enc_cache {
    size_t n;                          /* events cached (0 = empty) */
    struct enc_id *ids;                /* n identities */
    ProtobufCMessageUnknownField *uf;  /* n fields into enc */
    uint8_t *keys;                     /* the keys, back to back */
    uint8_t *enc;                      /* the packed events */
    size_t ids_cap, keys_cap, enc_cap; /* allocated sizes */
};

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    struct enc_cache *c = p;
    if (c == NULL)
        return;
    mem_free(c->ids);
    mem_free(c->uf);
    mem_free(c->keys);
    mem_free(c->enc);
    mem_free(c);
}

static void cache_key_make(void)
{
    CHECK(pthread_key_create(&cache_key, cache_free) == 0);
}

void svc__watch_event_pb(const struct mvcc_kv *kv, Mvccpb__KeyValue *pb)
{
    mvccpb__key_value__init(pb);
    pb->key.data = (uint8_t *)kv->key;
    pb->key.len = kv->key_len;
    pb->value.data = (uint8_t *)kv->value;
    pb->value.len = kv->value != NULL ? kv->value_len : 0;
    pb->create_revision = kv->create_rev;
    pb->mod_revision = kv->mod_rev;
    pb->version = kv->version;
    pb->lease = kv->lease;
}

void svc__watch_ev_fill(const struct mvcc_event *e, struct svc__ev_pb *p)
{
    mvccpb__event__init(&p->ev);
    p->ev.type = e->type == MVCC_EVENT_DELETE
                     ? MVCCPB__EVENT__EVENT_TYPE__DELETE
                     : MVCCPB__EVENT__EVENT_TYPE__PUT;
    svc__watch_event_pb(&e->kv, &p->kv);
    p->ev.kv = &p->kv;
    if (e->prev_kv.mod_rev != 0) {
        svc__watch_event_pb(&e->prev_kv, &p->prev);
        p->ev.prev_kv = &p->prev;
    }
}

static struct enc_id id_of(const struct mvcc_event *e, size_t key_off)
{
    return (struct enc_id){
        .type = (int)e->type, .mod = e->kv.mod_rev,
        .create = e->kv.create_rev, .prev_mod = e->prev_kv.mod_rev,
        .version = e->kv.version, .lease = e->kv.lease,
        .value_len = e->kv.value != NULL ? e->kv.value_len : 0,
        .key_off = key_off, .key_len = e->kv.key_len};
}

/* id_eq compares field by field (a struct memcmp would read padding). */
static bool id_eq(const struct enc_id *a, const struct enc_id *b)
{
    return a->type == b->type && a->mod == b->mod && a->create == b->create &&
           a->prev_mod == b->prev_mod && a->version == b->version &&
           a->lease == b->lease && a->value_len == b->value_len &&
           a->key_len == b->key_len;
}

/* cache_hit: whether evs are the cached events or their tail (catch-up
 * hands the watchers of one history batch its tails, from their next
 * revisions: watch_sync.c); *off_out = where they start in the cache. */
static bool cache_hit(const struct enc_cache *c, const struct mvcc_event *evs,
                      size_t n, size_t *off_out)
{
    if (c->n < n)
        return false;
    size_t off = c->n - n;
    for (size_t i = 0; i < n; i++) {
        const struct enc_id *b = &c->ids[off + i];
        struct enc_id a = id_of(&evs[i], b->key_off);
        if (!id_eq(&a, b) ||
            memcmp(c->keys + a.key_off, evs[i].kv.key, a.key_len) != 0)
            return false;
    }
    *off_out = off;
    return true;
}

static int grow(void *pp, size_t *cap, size_t need, size_t size)
{
    void **p = pp;
    if (need <= *cap)
        return 0;
    void *q = mem_realloc(*p, need * size);
    if (q == NULL)
        return ERR_NOMEM;
    *p = q;
    *cap = need;
    return 0;
}

/* varint_put writes v as a protobuf varint at p; returns its length. */
static size_t varint_put(uint8_t *p, size_t v)
{
    size_t n = 0;
    do {
        p[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v != 0)
            p[n] |= 0x80;
        n++;
    } while (v != 0);
    return n;
}

/* sizes returns the packed bytes of evs (each with its length varint), their key bytes, or 0 when over
 * the cache's bounds. */
static size_t sizes(const struct mvcc_event *evs, size_t n, size_t *keys_out)
{
    struct svc__ev_pb p;
    size_t enc = 0, keys = 0;
    for (size_t i = 0; i < n; i++) {
        svc__watch_ev_fill(&evs[i], &p);
        size_t len = mvccpb__event__get_packed_size(&p.ev);
        enc += len + (len < 128 ? 1 : len < 16384 ? 2 : len < 2097152 ? 3 : 5);
        keys += evs[i].kv.key_len;
        if (enc > ENC_CACHE_BYTES_MAX)
            return 0;
    }
    *keys_out = keys;
    return enc;
}

/* cache_fill encodes evs into c; on failure c is left empty. */
static int cache_fill(struct enc_cache *c, const struct mvcc_event *evs,
                      size_t n)
{
    size_t keys = 0, enc = sizes(evs, n, &keys), ids_cap = c->ids_cap;
    c->n = 0;
    if (enc == 0)
        return ERR_FULL;
    if (grow(&c->ids, &ids_cap, n, sizeof *c->ids) != 0)
        return ERR_NOMEM;
    ids_cap = c->ids_cap;
    if (grow(&c->uf, &ids_cap, n, sizeof *c->uf) != 0)
        return ERR_NOMEM;
    c->ids_cap = ids_cap;
    if (grow(&c->keys, &c->keys_cap, keys > 0 ? keys : 1, 1) != 0 ||
        grow(&c->enc, &c->enc_cap, enc, 1) != 0)
        return ERR_NOMEM;
    size_t ko = 0, eo = 0;
    for (size_t i = 0; i < n; i++) {
        struct svc__ev_pb p;
        svc__watch_ev_fill(&evs[i], &p);
        /* An unknown field's data is everything after its tag: for a
         * length-delimited field, the length varint and the bytes. */
        size_t len = mvccpb__event__get_packed_size(&p.ev);
        size_t vl = varint_put(c->enc + eo, len);
        CHECK(eo + vl + len <= enc);
        CHECK(mvccpb__event__pack(&p.ev, c->enc + eo + vl) == len);
        c->ids[i] = id_of(&evs[i], ko);
        memcpy(c->keys + ko, evs[i].kv.key, evs[i].kv.key_len);
        ko += evs[i].kv.key_len;
        c->uf[i] = (ProtobufCMessageUnknownField){
            .tag = WATCH_RESPONSE_EVENTS_FIELD,
            .wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED,
            .len = vl + len, .data = c->enc + eo};
        eo += vl + len;
    }
    CHECK(eo == enc && ko == keys);
    c->n = n;
    return 0;
}

int svc__watch_events_shared(const struct mvcc_event *evs, size_t n,
                             ProtobufCMessageUnknownField **uf_out)
{
    CHECK(evs != NULL && n > 0 && uf_out != NULL);
    if (n > ENC_CACHE_EVENTS_MAX)
        return ERR_FULL;
    pthread_once(&cache_once, cache_key_make);
    struct enc_cache *c = pthread_getspecific(cache_key);
    if (c == NULL) {
        c = mem_calloc(1, sizeof *c);
        if (c == NULL || pthread_setspecific(cache_key, c) != 0) {
            mem_free(c);
            return ERR_NOMEM;
        }
    }
    size_t off = 0;
    if (!cache_hit(c, evs, n, &off)) {
        int rc = cache_fill(c, evs, n);
        if (rc != 0)
            return rc;
    }
    CHECK(off + n == c->n);
    *uf_out = c->uf + off;
    return 0;
}
