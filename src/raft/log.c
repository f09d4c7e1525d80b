/*
 * log.c - the in-memory raft log: a contiguous array of entries after the
 * compaction point, with the "stabled" mark splitting what the caller has
 * persisted from what it has not, plus the latest snapshot.
 *
 * Entry data is owned by the log (one allocation per entry) and freed when
 * the entry is truncated or compacted away.
 */
#include <string.h>

#include "raft/raft_int.h"
#include "util/mem.h"

void *raft__xmalloc(size_t n)
{
    void *p = mem_malloc(n ? n : 1);
    RAFT_ASSERT(p != NULL);
    return p;
}

void *raft__xrealloc(void *p, size_t n)
{
    void *q = mem_realloc(p, n ? n : 1);
    RAFT_ASSERT(q != NULL);
    return q;
}

void raft__log_init(struct raft_log *l)
{
    memset(l, 0, sizeof(*l));
}

static void free_from(struct raft_log *l, size_t k)
{
    for (size_t j = k; j < l->n; j++)
        mem_free(l->ents[j].data);
    l->n = k;
}

void raft__log_free(struct raft_log *l)
{
    free_from(l, 0);
    mem_free(l->ents);
    mem_free(l->snap.data);
    memset(l, 0, sizeof(*l));
}

raft_index raft__log_first(const struct raft_log *l)
{
    return l->offset + 1;
}

raft_index raft__log_last(const struct raft_log *l)
{
    return l->offset + l->n;
}

int raft__log_term(const struct raft_log *l, raft_index i, raft_term *t)
{
    if (i < l->offset)
        return ERR_RAFT_COMPACTED;
    if (i > raft__log_last(l))
        return ERR_RAFT_UNAVAILABLE;
    *t = i == l->offset ? l->offset_term : l->ents[i - l->offset - 1].term;
    return 0;
}

raft_term raft__log_term_or0(const struct raft_log *l, raft_index i)
{
    raft_term t = 0;
    if (raft__log_term(l, i, &t) != 0)
        return 0;
    return t;
}

raft_term raft__log_last_term(const struct raft_log *l)
{
    return raft__log_term_or0(l, raft__log_last(l));
}

bool raft__log_match(const struct raft_log *l, raft_index i, raft_term t)
{
    raft_term got;
    return raft__log_term(l, i, &got) == 0 && got == t;
}

/* Raft §5.4.1: a candidate's log is at least as up-to-date as ours. */
bool raft__log_up_to_date(const struct raft_log *l, raft_index i, raft_term t)
{
    raft_term lt = raft__log_last_term(l);
    return t > lt || (t == lt && i >= raft__log_last(l));
}

const struct raft_entry *raft__log_at(const struct raft_log *l, raft_index i)
{
    if (i <= l->offset || i > raft__log_last(l))
        return NULL;
    return &l->ents[i - l->offset - 1];
}

static void reserve(struct raft_log *l, size_t more)
{
    if (l->n + more <= l->cap)
        return;
    size_t cap = l->cap ? l->cap * 2 : 64;
    while (cap < l->n + more)
        cap *= 2;
    l->ents = raft__xrealloc(l->ents, cap * sizeof(*l->ents));
    l->cap = cap;
}

/* Drops entries >= i; entries the caller persisted beyond i are overwritten
 * by the next Ready (the WAL truncates on a lower index). */
static void truncate_from(struct raft_log *l, raft_index i)
{
    RAFT_ASSERT(i > l->committed);
    RAFT_ASSERT(i > l->offset);
    if (i > raft__log_last(l))
        return;
    free_from(l, (size_t)(i - l->offset - 1));
    if (l->stabled >= i)
        l->stabled = i - 1;
}

void raft__log_append(struct raft_log *l, const struct raft_entry *ents,
                      size_t n)
{
    if (n == 0)
        return;
    truncate_from(l, ents[0].index);
    RAFT_ASSERT(ents[0].index == raft__log_last(l) + 1);
    reserve(l, n);
    for (size_t k = 0; k < n; k++) {
        struct raft_entry *e = &l->ents[l->n];
        *e = ents[k];
        e->data = NULL;
        if (ents[k].len > 0) {
            e->data = raft__xmalloc(ents[k].len);
            memcpy(e->data, ents[k].data, ents[k].len);
        }
        l->n++;
    }
    RAFT_ASSERT(raft__log_last(l) == ents[n - 1].index);
}

void raft__log_append_owned(struct raft_log *l, raft_term term, uint8_t type,
                            uint8_t *data, uint32_t len)
{
    reserve(l, 1);
    struct raft_entry *e = &l->ents[l->n];
    e->term = term;
    e->index = raft__log_last(l) + 1;
    e->type = type;
    e->data = data;
    e->len = len;
    RAFT_ASSERT(e->term >= raft__log_last_term(l));
    l->n++;
}

/* Index of the first entry in ents that is new or disagrees with our log,
 * or 0 if we already hold all of them. */
raft_index raft__log_find_conflict(const struct raft_log *l,
                                   const struct raft_entry *ents, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (ents[k].index <= l->offset)
            continue; /* covered by our snapshot: committed, so equal */
        if (!raft__log_match(l, ents[k].index, ents[k].term))
            return ents[k].index;
    }
    return 0;
}

/* Fast backtracking: the largest index <= i whose term is <= t.  The leader
 * can skip every index in between because none of them can match. */
raft_index raft__log_find_conflict_by_term(const struct raft_log *l,
                                           raft_index i, raft_term t,
                                           raft_term *t_out)
{
    raft_term got = 0;
    for (; i > 0; i--) {
        int rc = raft__log_term(l, i, &got);
        if (rc != 0) {
            got = 0;
            break;
        }
        if (got <= t)
            break;
    }
    if (i == 0)
        got = 0; /* ran off the start: index 0 has term 0 */
    *t_out = got;
    return i;
}

int raft__log_slice(const struct raft_log *l, raft_index lo, raft_index hi,
                    uint64_t max_bytes, const struct raft_entry **out,
                    size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (lo <= l->offset)
        return ERR_RAFT_COMPACTED;
    if (hi > raft__log_last(l))
        hi = raft__log_last(l);
    if (lo > hi)
        return 0;
    const struct raft_entry *e = &l->ents[lo - l->offset - 1];
    size_t n = 0;
    uint64_t bytes = 0;
    for (raft_index i = lo; i <= hi; i++, n++) {
        bytes += e[n].len + 24;
        if (n > 0 && bytes > max_bytes)
            break;
    }
    *out = e;
    *n_out = n;
    return 0;
}

void raft__log_commit_to(struct raft_log *l, raft_index i)
{
    if (i <= l->committed)
        return;
    RAFT_ASSERT(i <= raft__log_last(l));
    l->committed = i;
}

/* Commits i only if it carries term t (Raft §5.4.2). */
bool raft__log_maybe_commit(struct raft_log *l, raft_index i, raft_term t)
{
    if (i > l->committed && raft__log_term_or0(l, i) == t) {
        raft__log_commit_to(l, i);
        return true;
    }
    return false;
}

void raft__log_set_snapshot(struct raft_log *l,
                            const struct raft_snapshot_meta *m,
                            const void *data, size_t len)
{
    uint8_t *copy = NULL;
    if (len > 0) {
        copy = raft__xmalloc(len);
        memcpy(copy, data, len);
    }
    mem_free(l->snap.data);
    l->snap.meta = *m;
    l->snap.data = copy;
    l->snap.len = len;
}

/* Replaces the whole log by snapshot s (received from a leader). */
void raft__log_restore(struct raft_log *l, const struct raft_snapshot *s)
{
    RAFT_ASSERT(s->meta.index > l->committed);
    free_from(l, 0);
    l->offset = s->meta.index;
    l->offset_term = s->meta.term;
    l->committed = s->meta.index;
    l->applied = s->meta.index;
    l->stabled = s->meta.index;
    raft__log_set_snapshot(l, &s->meta, s->data, s->len);
    l->snap_unstable = true;
}

void raft__log_compact(struct raft_log *l, raft_index i)
{
    RAFT_ASSERT(i > l->offset && i <= raft__log_last(l));
    RAFT_ASSERT(i <= l->applied);
    size_t k = (size_t)(i - l->offset);
    raft_term t = l->ents[k - 1].term;
    for (size_t j = 0; j < k; j++)
        mem_free(l->ents[j].data);
    memmove(l->ents, l->ents + k, (l->n - k) * sizeof(*l->ents));
    l->n -= k;
    l->offset = i;
    l->offset_term = t;
}
