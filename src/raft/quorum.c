/*
 * quorum.c - majority arithmetic over sorted id sets: the committed index
 * of a majority config and the outcome of a vote.  Joint quorums combine
 * two majorities (see confchange.c): both must agree.
 */
#include <string.h>

#include "raft/raft_int.h"

bool raft__set_has(const struct raft_idset *s, raft_id id)
{
    for (uint32_t k = 0; k < s->n; k++)
        if (s->ids[k] == id)
            return true;
    return false;
}

/* Inserts keeping ascending order (deterministic iteration); false if the
 * set is full.  Adding a present id is a no-op. */
bool raft__set_add(struct raft_idset *s, raft_id id)
{
    if (raft__set_has(s, id))
        return true;
    if (s->n == RAFT_MAX_MEMBERS)
        return false;
    uint32_t k = s->n;
    while (k > 0 && s->ids[k - 1] > id) {
        s->ids[k] = s->ids[k - 1];
        k--;
    }
    s->ids[k] = id;
    s->n++;
    return true;
}

void raft__set_del(struct raft_idset *s, raft_id id)
{
    for (uint32_t k = 0; k < s->n; k++) {
        if (s->ids[k] == id) {
            memmove(&s->ids[k], &s->ids[k + 1],
                    (s->n - k - 1) * sizeof(raft_id));
            s->n--;
            return;
        }
    }
}

/* The highest index acked by a majority.  An empty config commits
 * everything, so that a joint config with an empty half defers to the
 * other half. */
raft_index raft__majority_committed(const struct raft_idset *s,
                                    raft_ack_fn look, void *arg)
{
    if (s->n == 0)
        return UINT64_MAX;
    raft_index v[RAFT_MAX_MEMBERS];
    for (uint32_t k = 0; k < s->n; k++) {
        raft_index i = 0;
        if (!look(arg, s->ids[k], &i))
            i = 0;
        /* insertion sort, descending */
        uint32_t j = k;
        while (j > 0 && v[j - 1] < i) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = i;
    }
    uint32_t q = s->n / 2 + 1;
    RAFT_ASSERT(q >= 1 && q <= s->n);
    return v[q - 1];
}

int raft__majority_vote(const struct raft_idset *s, raft_vote_fn f, void *arg)
{
    if (s->n == 0)
        return RAFT_VOTE_WON;
    uint32_t yes = 0, missing = 0;
    for (uint32_t k = 0; k < s->n; k++) {
        int v = f(arg, s->ids[k]);
        if (v > 0)
            yes++;
        else if (v < 0)
            missing++;
    }
    uint32_t q = s->n / 2 + 1;
    if (yes >= q)
        return RAFT_VOTE_WON;
    if (yes + missing >= q)
        return RAFT_VOTE_PENDING;
    return RAFT_VOTE_LOST;
}
