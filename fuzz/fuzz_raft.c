/*
 * fuzz_raft.c - libFuzzer target for src/raft: the message decoder and the
 * state machine behind it.
 *
 * GOAL: no input crashes raft or breaks its invariants.
 * METHOD: the input is one config byte, then a sequence of records:
 *     u8 ops, u16 length (little-endian), length bytes of message.
 * Config byte bits: 0 pre_vote, 1 check_quorum, 2 lease reads (with
 * check_quorum), 3 max one entry per append, 4 start with a snapshot at
 * index 1 holding the membership (voters 1 2 3, learner 4).
 * The message is decoded with raft_msg_decode (which must reject garbage
 * with an error) and, if valid, re-addressed to node 1 of the cluster and
 * stepped.  Then the ops bits drive node 1: 0 tick, 1 propose, 2 campaign,
 * 3 read index, 4 propose a conf change (v2, from the message bytes),
 * 5 transfer leadership, 6 report-unreachable / report-snapshot, 7 take a
 * snapshot and compact.  After each record the node's Ready is processed
 * (committed conf changes applied) and we check invariants visible from
 * outside: commit <= last index, applied <= commit, the term never
 * decreases, a vote never changes within a term, and the codec
 * round-trips every outgoing message byte for byte.
 *
 * Seed corpus: fuzz/corpus/raft/, written by tests/raft/fuzz_corpus.c
 * (valid message sequences that elect node 1, replicate, snapshot, change
 * membership, read and transfer), so coverage starts deep.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "raft/raft.h"
#include "util/err.h"

/* Replay builds (tests/raft/fuzz_replay.c) define this to see how deep an
 * input got; libFuzzer builds leave it undefined. */
void fuzz_raft_report(const struct raft_status *st) __attribute__((weak));

static void check(int cond)
{
    if (!cond)
        abort();
}

static void drain(struct raft *r, raft_index *applied)
{
    while (raft_has_ready(r)) {
        struct raft_ready rd;
        check(raft_ready(r, &rd) == 0);
        if (rd.snapshot)
            *applied = rd.snapshot->meta.index;
        for (size_t k = 0; k < rd.n_committed; k++) {
            const struct raft_entry *e = &rd.committed[k];
            check(e->index == *applied + 1);
            *applied = e->index;
            if (e->type != RAFT_ENTRY_NORMAL) {
                struct raft_conf_change cc;
                struct raft_conf_state cs;
                if (raft_conf_change_decode(e->data, e->len, &cc) == 0)
                    raft_apply_conf_change(r, &cc, &cs);
            }
        }
        for (size_t k = 0; k < rd.n_msgs; k++) {
            size_t n = raft_msg_encoded_size(&rd.msgs[k]);
            uint8_t *buf = malloc(n);
            struct raft_msg back;
            check(raft_msg_encode(&rd.msgs[k], buf, n, &n) == 0);
            check(raft_msg_decode(buf, n, &back) == 0);
            size_t n2 = raft_msg_encoded_size(&back);
            uint8_t *again = malloc(n2);
            check(raft_msg_encode(&back, again, n2, &n2) == 0);
            check(n2 == n && memcmp(buf, again, n) == 0);
            raft_msg_release(&back);
            free(again);
            free(buf);
        }
        check(raft_advance(r, &rd) == 0);
    }
}

static void do_ops(struct raft *r, uint8_t ops, const uint8_t *rec,
                   size_t len, raft_index applied)
{
    if (ops & 1)
        raft_tick(r);
    if (ops & 2)
        raft_propose(r, rec, len < 64 ? len : 64);
    if (ops & 4)
        raft_campaign(r);
    if (ops & 8)
        raft_read_index(r, rec, len < 8 ? len : 8);
    if (ops & 16) {
        struct raft_conf_change cc = {0};
        if (len > 0) {
            cc.n_changes = 1;
            cc.changes[0].type = rec[len - 1] & 3;
            cc.changes[0].node_id = 1 + rec[len - 1] % 5;
            cc.transition = (rec[len - 1] >> 4) % 3;
        }
        raft_propose_conf_change(r, &cc, true);
    }
    if (ops & 32)
        raft_transfer_leader(r, 1 + len % 4);
    if (ops & 64) {
        raft_report_unreachable(r, 2 + len % 3);
        raft_report_snapshot(r, 2 + len % 3, len & 1);
    }
    if ((ops & 128) && applied > 1 &&
        raft_snapshot_create(r, applied, NULL, "s", 1) == 0)
        raft_log_compact(r, applied - (len % 2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t cfgb = data[0];
    struct raft_config c = {0};
    c.id = 1;
    c.election_tick = 10;
    c.heartbeat_tick = 1;
    c.pre_vote = cfgb & 1;
    c.check_quorum = (cfgb >> 1) & 1;
    c.read_only = c.check_quorum && (cfgb & 4) ? RAFT_READ_ONLY_LEASE_BASED
                                               : RAFT_READ_ONLY_SAFE;
    c.max_size_per_msg = (cfgb & 8) ? 1 : 1024;
    c.max_inflight_msgs = 4;
    struct raft_conf_state conf = {.n_voters = 3, .voters = {1, 2, 3},
                                   .n_learners = 1, .learners = {4}};
    if (cfgb & 16) {
        c.snapshot.meta.index = 1;
        c.snapshot.meta.term = 1;
        c.snapshot.meta.conf = conf;
        c.hard_state = (struct raft_hard_state){1, 0, 1};
        c.applied = 1;
    }
    c.conf = conf;
    struct raft *r = malloc(raft_sizeof());
    check(raft_init(r, &c) == 0);
    raft_index applied = c.applied;
    struct raft_status st;
    raft_status(r, &st);
    raft_term term = st.term;
    raft_id vote = st.vote;
    size_t off = 1;
    while (off + 3 <= size) {
        uint8_t ops = data[off];
        size_t len = data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (len > size - off)
            len = size - off;
        const uint8_t *rec = data + off;
        off += len;
        struct raft_msg m;
        if (raft_msg_decode(rec, len, &m) == 0) {
            m.to = 1;
            if (m.from == 1)
                m.from = 2;
            raft_step(r, &m);
            raft_msg_release(&m);
        }
        drain(r, &applied);
        do_ops(r, ops, rec, len, applied);
        drain(r, &applied);
        raft_status(r, &st);
        check(st.commit <= st.last_index);
        check(st.applied <= st.commit);
        check(st.applied == applied);
        check(st.term >= term);
        check(st.term > term || vote == 0 || st.vote == vote);
        term = st.term;
        vote = st.vote;
    }
    if (fuzz_raft_report != NULL)
        fuzz_raft_report(&st);
    raft_close(r);
    free(r);
    return 0;
}
