/*
 * msg_codec.c - compact binary encodings of raft messages and of conf
 * change entry payloads.  All integers are little-endian.
 *
 * Message (version 1):
 *   u8  version = 1
 *   u8  type            (enum raft_msg_type, 1..RAFT_MSG_TYPE_MAX)
 *   u8  flags           bit0 reject, bit1 campaign_transfer, bit2 snapshot
 *   u64 from, to, term, log_term, index, commit, reject_hint
 *   u32 ctx_len, then ctx bytes
 *   u32 n_entries, then per entry:
 *       u64 term, u64 index, u8 type (0..2), u32 len, then len data bytes
 *   if flags.bit2 (snapshot):
 *       u64 index, u64 term, conf state (below), u32 len, then data bytes
 * Conf state:
 *   u8 n_voters, n_voters_outgoing, n_learners, n_learners_next (each
 *   <= RAFT_MAX_MEMBERS), then that many u64 ids in the same order,
 *   u8 auto_leave (0/1)
 * Conf change (entry data of CONF_CHANGE and CONF_CHANGE_V2 entries):
 *   u8 version = 1, u8 transition (0..2), u8 n_changes (<= MAX),
 *   n_changes x (u8 type (0..3), u64 node_id), u32 ctx_len, ctx bytes
 *
 * The decoder never trusts a length: every read is bounds-checked and any
 * inconsistency yields ERR_CORRUPT.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/err.h"
#include "util/mem.h"

#define MSG_VERSION 1
#define MSG_HEADER (3 + 7 * 8 + 4 + 4)
#define ENTRY_HEADER (8 + 8 + 1 + 4)

struct wbuf {
    uint8_t *p;   /* output */
    size_t cap;   /* capacity */
    size_t n;     /* written */
};

struct rbuf {
    const uint8_t *p; /* input */
    size_t len;       /* total */
    size_t off;       /* read so far */
    bool bad;         /* a read went out of bounds */
};

static void put(struct wbuf *w, const void *src, size_t n)
{
    if (w->n + n <= w->cap && n > 0)
        memcpy(w->p + w->n, src, n);
    w->n += n;
}

static void put_u8(struct wbuf *w, uint8_t v)
{
    put(w, &v, 1);
}

static void put_u32(struct wbuf *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}

static void put_u64(struct wbuf *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}

static const uint8_t *get(struct rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

static uint8_t get_u8(struct rbuf *r)
{
    const uint8_t *p = get(r, 1);
    return p ? p[0] : 0;
}

static uint32_t get_u32(struct rbuf *r)
{
    const uint8_t *p = get(r, 4);
    uint32_t v = 0;
    for (int i = 0; p && i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_u64(struct rbuf *r)
{
    const uint8_t *p = get(r, 8);
    uint64_t v = 0;
    for (int i = 0; p && i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void put_conf(struct wbuf *w, const struct raft_conf_state *cs)
{
    const raft_id *lists[4] = {cs->voters, cs->voters_outgoing, cs->learners,
                               cs->learners_next};
    uint32_t ns[4] = {cs->n_voters, cs->n_voters_outgoing, cs->n_learners,
                      cs->n_learners_next};
    for (int i = 0; i < 4; i++)
        put_u8(w, (uint8_t)ns[i]);
    for (int i = 0; i < 4; i++)
        for (uint32_t k = 0; k < ns[i]; k++)
            put_u64(w, lists[i][k]);
    put_u8(w, cs->auto_leave ? 1 : 0);
}

static void get_conf(struct rbuf *r, struct raft_conf_state *cs)
{
    raft_id *lists[4] = {cs->voters, cs->voters_outgoing, cs->learners,
                         cs->learners_next};
    uint32_t *ns[4] = {&cs->n_voters, &cs->n_voters_outgoing, &cs->n_learners,
                       &cs->n_learners_next};
    memset(cs, 0, sizeof(*cs));
    for (int i = 0; i < 4; i++) {
        *ns[i] = get_u8(r);
        if (*ns[i] > RAFT_MAX_MEMBERS)
            r->bad = true;
    }
    for (int i = 0; i < 4 && !r->bad; i++)
        for (uint32_t k = 0; k < *ns[i]; k++)
            lists[i][k] = get_u64(r);
    uint8_t al = get_u8(r);
    if (al > 1)
        r->bad = true;
    cs->auto_leave = al == 1;
}

static void encode(const struct raft_msg *m, struct wbuf *w)
{
    uint8_t flags = (m->reject ? 1 : 0) | (m->campaign_transfer ? 2 : 0) |
                    (m->snapshot ? 4 : 0);
    put_u8(w, MSG_VERSION);
    put_u8(w, m->type);
    put_u8(w, flags);
    uint64_t f[7] = {m->from,  m->to,     m->term,       m->log_term,
                     m->index, m->commit, m->reject_hint};
    for (int i = 0; i < 7; i++)
        put_u64(w, f[i]);
    put_u32(w, (uint32_t)m->ctx_len);
    put(w, m->ctx, m->ctx_len);
    put_u32(w, (uint32_t)m->n_entries);
    for (size_t k = 0; k < m->n_entries; k++) {
        const struct raft_entry *e = &m->entries[k];
        put_u64(w, e->term);
        put_u64(w, e->index);
        put_u8(w, e->type);
        put_u32(w, e->len);
        put(w, e->data, e->len);
    }
    if (m->snapshot) {
        put_u64(w, m->snapshot->meta.index);
        put_u64(w, m->snapshot->meta.term);
        put_conf(w, &m->snapshot->meta.conf);
        put_u32(w, (uint32_t)m->snapshot->len);
        put(w, m->snapshot->data, m->snapshot->len);
    }
}

size_t raft_msg_encoded_size(const struct raft_msg *m)
{
    struct wbuf w = {NULL, 0, 0};
    encode(m, &w);
    return w.n;
}

int raft_msg_encode(const struct raft_msg *m, uint8_t *buf, size_t cap,
                    size_t *len_out)
{
    struct wbuf w = {buf, cap, 0};
    encode(m, &w);
    *len_out = w.n;
    if (w.n > cap)
        return ERR_FULL;
    RAFT_ASSERT(w.n >= MSG_HEADER);
    return 0;
}

static int decode_body(struct rbuf *r, struct raft_msg *m, uint8_t flags)
{
    m->ctx_len = get_u32(r);
    m->ctx = get(r, m->ctx_len);
    if (m->ctx_len == 0)
        m->ctx = NULL;
    uint32_t n = get_u32(r);
    if (r->bad || n > (r->len - r->off) / ENTRY_HEADER)
        return ERR_CORRUPT;
    size_t sz = n * sizeof(struct raft_entry) +
                ((flags & 4) ? sizeof(struct raft_snapshot) : 0);
    uint8_t *blob = mem_malloc(sz ? sz : 1);
    if (blob == NULL)
        return ERR_NOMEM;
    m->owned_ = blob;
    m->n_entries = n;
    m->entries = n ? (struct raft_entry *)(void *)blob : NULL;
    for (uint32_t k = 0; k < n; k++) {
        struct raft_entry *e = &m->entries[k];
        e->term = get_u64(r);
        e->index = get_u64(r);
        e->type = get_u8(r);
        e->len = get_u32(r);
        e->data = (uint8_t *)get(r, e->len);
        if (r->bad || e->type > RAFT_ENTRY_CONF_CHANGE_V2)
            return ERR_CORRUPT;
    }
    if (flags & 4) {
        struct raft_snapshot *s =
            (struct raft_snapshot *)(void *)(blob + n * sizeof(*m->entries));
        s->meta.index = get_u64(r);
        s->meta.term = get_u64(r);
        get_conf(r, &s->meta.conf);
        s->len = get_u32(r);
        s->data = (uint8_t *)get(r, s->len);
        m->snapshot = s;
    }
    return r->bad || r->off != r->len ? ERR_CORRUPT : 0;
}

int raft_msg_decode(const uint8_t *buf, size_t len, struct raft_msg *m)
{
    struct rbuf r = {buf, len, 0, false};
    memset(m, 0, sizeof(*m));
    if (buf == NULL || len < MSG_HEADER)
        return ERR_CORRUPT;
    uint8_t version = get_u8(&r);
    m->type = get_u8(&r);
    uint8_t flags = get_u8(&r);
    if (version != MSG_VERSION || m->type < 1 ||
        m->type > RAFT_MSG_TYPE_MAX || (flags & ~7u) != 0)
        return ERR_CORRUPT;
    m->reject = flags & 1;
    m->campaign_transfer = (flags & 2) != 0;
    uint64_t *f[7] = {&m->from,  &m->to,     &m->term,       &m->log_term,
                      &m->index, &m->commit, &m->reject_hint};
    for (int i = 0; i < 7; i++)
        *f[i] = get_u64(&r);
    int rc = decode_body(&r, m, flags);
    if (rc != 0) {
        raft_msg_release(m);
        return rc;
    }
    return 0;
}

void raft_msg_release(struct raft_msg *m)
{
    mem_free(m->owned_);
    memset(m, 0, sizeof(*m));
}

static void encode_cc(const struct raft_conf_change *cc, struct wbuf *w)
{
    put_u8(w, 1);
    put_u8(w, cc->transition);
    put_u8(w, (uint8_t)cc->n_changes);
    for (uint32_t k = 0; k < cc->n_changes; k++) {
        put_u8(w, cc->changes[k].type);
        put_u64(w, cc->changes[k].node_id);
    }
    put_u32(w, (uint32_t)cc->ctx_len);
    put(w, cc->ctx, cc->ctx_len);
}

size_t raft_conf_change_encoded_size(const struct raft_conf_change *cc)
{
    struct wbuf w = {NULL, 0, 0};
    encode_cc(cc, &w);
    return w.n;
}

int raft_conf_change_encode(const struct raft_conf_change *cc, uint8_t *buf,
                            size_t cap, size_t *len_out)
{
    if (cc->n_changes > RAFT_MAX_MEMBERS)
        return ERR_INVAL;
    struct wbuf w = {buf, cap, 0};
    encode_cc(cc, &w);
    *len_out = w.n;
    return w.n > cap ? ERR_FULL : 0;
}

int raft_conf_change_decode(const uint8_t *data, size_t len,
                            struct raft_conf_change *cc)
{
    struct rbuf r = {data, len, 0, false};
    memset(cc, 0, sizeof(*cc));
    if (data == NULL || get_u8(&r) != 1)
        return ERR_CORRUPT;
    cc->transition = get_u8(&r);
    cc->n_changes = get_u8(&r);
    if (cc->transition > RAFT_CC_TRANSITION_EXPLICIT ||
        cc->n_changes > RAFT_MAX_MEMBERS)
        return ERR_CORRUPT;
    for (uint32_t k = 0; k < cc->n_changes; k++) {
        cc->changes[k].type = get_u8(&r);
        cc->changes[k].node_id = get_u64(&r);
        if (cc->changes[k].type > RAFT_CC_ADD_LEARNER)
            return ERR_CORRUPT;
    }
    cc->ctx_len = get_u32(&r);
    cc->ctx = get(&r, cc->ctx_len);
    if (cc->ctx_len == 0)
        cc->ctx = NULL;
    return r.bad || r.off != r.len ? ERR_CORRUPT : 0;
}
