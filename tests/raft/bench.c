/*
 * bench.c - microbenchmark (not a test) of src/raft: committed entries per
 * second for a 3-node in-memory cluster.
 *
 * METHOD: three nodes exchange messages through in-memory queues (no codec,
 * no disk: a Ready is "persisted" by acknowledging it).  The leader gets
 * proposals of SIZE bytes in batches of BATCH per Ready cycle; we count
 * entries applied on the leader and divide by CPU time.  This measures the
 * library alone: what is left of the budget for WAL, network and apply.
 *
 * Usage: raft_bench [entries=1000000] [size=128] [batch=64]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft/raft.h"

struct q {
    struct raft_msg *m;  /* messages deep-copied via encode/decode */
    uint8_t **bufs;
    size_t n, cap;
};

static struct raft *nodes[4];
static struct q qs[4];

static void enqueue(const struct raft_msg *m)
{
    struct q *q = &qs[m->to];
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 256;
        q->m = realloc(q->m, q->cap * sizeof(*q->m));
        q->bufs = realloc(q->bufs, q->cap * sizeof(*q->bufs));
    }
    size_t len = raft_msg_encoded_size(m);
    uint8_t *buf = malloc(len);
    raft_msg_encode(m, buf, len, &len);
    raft_msg_decode(buf, len, &q->m[q->n]);
    q->bufs[q->n++] = buf;
}

static uint64_t applied;

static void ready(int id)
{
    while (raft_has_ready(nodes[id])) {
        struct raft_ready rd;
        raft_ready(nodes[id], &rd);
        for (size_t k = 0; k < rd.n_msgs; k++)
            enqueue(&rd.msgs[k]);
        if (id == 1)
            applied += rd.n_committed;
        raft_advance(nodes[id], &rd);
    }
}

static void deliver(int id)
{
    struct q *q = &qs[id];
    size_t n = q->n;
    struct raft_msg *m = q->m;
    uint8_t **bufs = q->bufs;
    memset(q, 0, sizeof(*q));
    for (size_t k = 0; k < n; k++) {
        raft_step(nodes[id], &m[k]);
        raft_msg_release(&m[k]);
        free(bufs[k]);
    }
    free(m);
    free(bufs);
}

int main(int argc, char **argv)
{
    uint64_t total = 1000000;
    size_t size = 128, batch = 64;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "entries=", 8))
            total = strtoull(argv[i] + 8, NULL, 10);
        else if (!strncmp(argv[i], "size=", 5))
            size = strtoull(argv[i] + 5, NULL, 10);
        else if (!strncmp(argv[i], "batch=", 6))
            batch = strtoull(argv[i] + 6, NULL, 10);
    }
    for (int id = 1; id <= 3; id++) {
        struct raft_config c = {0};
        c.id = (raft_id)id;
        c.election_tick = 10;
        c.heartbeat_tick = 1;
        c.pre_vote = true;
        c.check_quorum = true;
        c.max_size_per_msg = 1 << 20;
        c.max_inflight_msgs = 256;
        c.conf.n_voters = 3;
        for (int k = 0; k < 3; k++)
            c.conf.voters[k] = (raft_id)k + 1;
        c.seed = 42;
        nodes[id] = malloc(raft_sizeof());
        raft_init(nodes[id], &c);
    }
    raft_campaign(nodes[1]);
    for (int round = 0; round < 10; round++)
        for (int id = 1; id <= 3; id++) {
            ready(id);
            deliver(id);
        }
    uint8_t *payload = calloc(1, size);
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    uint64_t start = applied, proposed = 0;
    while (applied - start < total) {
        for (size_t k = 0; k < batch && proposed < total; k++, proposed++)
            raft_propose(nodes[1], payload, size);
        for (int id = 1; id <= 3; id++) {
            ready(id);
            deliver(id);
        }
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("raft_bench: 3 nodes, %zu-byte entries, batch %zu: %.0f committed "
           "entries/s (%.2f us CPU per entry for the whole cluster)\n",
           size, batch, (double)(applied - start) / s,
           s * 1e6 / (double)(applied - start));
    for (int id = 1; id <= 3; id++) {
        raft_close(nodes[id]);
        free(nodes[id]);
    }
    free(payload);
    return 0;
}
