/*
 * fuzz_corpus.c - writes the seed corpus of fuzz/fuzz_raft.c.
 *
 * GOAL: the fuzzer starts from inputs that already reach deep states of
 * node 1 (leader with followers in every progress state, joint configs,
 * snapshots, reads, transfers; follower repairing conflicts and installing
 * snapshots; PreVote/CheckQuorum step-down), instead of discovering the
 * message format byte by byte.
 *
 * METHOD: each corpus file is a scripted conversation in the harness's
 * input format (one config byte, then records of u8 ops, u16 length,
 * encoded message; see fuzz_raft.c): the messages are what peers 2, 3 and
 * 5 would send node 1 in that scenario, encoded with raft_msg_encode.
 * Deterministic; the raft.fuzz_corpus test checks the committed files are
 * what this program writes and replays them through the harness.
 *
 * Usage: raft_fuzz_corpus OUTDIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/raft.h"

enum { OP_TICK = 1, OP_PROPOSE = 2, OP_CAMPAIGN = 4, OP_READ = 8,
       OP_CONF = 16, OP_TRANSFER = 32, OP_REPORT = 64, OP_SNAPSHOT = 128 };
enum { CFG_PRE_VOTE = 1, CFG_CHECK_QUORUM = 2, CFG_LEASE = 4, CFG_SMALL = 8,
       CFG_SNAP = 16 };

static uint8_t out[1 << 16];
static size_t n_out;

static void put(const void *p, size_t n)
{
    if (n == 0)
        return;
    if (n_out + n > sizeof(out)) {
        fprintf(stderr, "corpus file too large\n");
        exit(1);
    }
    memcpy(out + n_out, p, n);
    n_out += n;
}

static void begin(uint8_t cfg)
{
    n_out = 0;
    put(&cfg, 1);
}

/* A record carrying raw bytes (ops that read their data from the record). */
static void raw(uint8_t ops, const void *bytes, size_t len)
{
    uint8_t h[3] = {ops, (uint8_t)len, (uint8_t)(len >> 8)};
    put(h, 3);
    put(bytes, len);
}

/* A record carrying message m (to node 1), returning where its bytes
 * start in out (the harness reads ctx for ReadIndex from them). */
static size_t msg(uint8_t ops, struct raft_msg m)
{
    m.to = 1;
    uint8_t buf[4096];
    size_t len;
    if (raft_msg_encode(&m, buf, sizeof(buf), &len) != 0) {
        fprintf(stderr, "encode\n");
        exit(1);
    }
    size_t at = n_out + 3;
    raw(ops, buf, len);
    return at;
}

static struct raft_msg resp(uint8_t type, raft_id from, raft_term term,
                            raft_index index)
{
    return (struct raft_msg){.type = type, .from = from, .term = term,
                             .index = index};
}

static void save(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(out, 1, n_out, f) != n_out || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* Node 1 campaigns and wins term 2 with 2's vote, commits its empty entry,
 * replicates proposals, serves a read, changes membership (adds 5, which
 * needs the snapshot, then a joint change), compacts, transfers. */
static void leader(const char *dir)
{
    begin(CFG_SNAP);
    raw(OP_CAMPAIGN, NULL, 0);
    msg(0, resp(RAFT_MSG_VOTE_RESP, 2, 2, 0));
    msg(0, resp(RAFT_MSG_APP_RESP, 2, 2, 2));
    msg(OP_PROPOSE, resp(RAFT_MSG_APP_RESP, 3, 2, 2));
    msg(OP_PROPOSE, resp(RAFT_MSG_APP_RESP, 2, 2, 3));
    msg(0, resp(RAFT_MSG_APP_RESP, 3, 2, 4));
    /* ReadIndex: ctx = the first 8 bytes of this record's message. */
    size_t at = msg(OP_READ, resp(RAFT_MSG_HEARTBEAT_RESP, 3, 2, 0));
    uint8_t ctx[8];
    memcpy(ctx, out + at, 8);
    struct raft_msg hb = resp(RAFT_MSG_HEARTBEAT_RESP, 2, 2, 0);
    hb.ctx = ctx;
    hb.ctx_len = 8;
    msg(0, hb);
    /* Add voter 5 (byte 0x04: add node, id 1 + 4 % 5). */
    raw(OP_CONF, (uint8_t[]){0x04}, 1);
    msg(0, resp(RAFT_MSG_APP_RESP, 2, 2, 5));
    msg(OP_TICK, resp(RAFT_MSG_APP_RESP, 3, 2, 5));
    /* 5 is empty: it rejects, needs the snapshot at 1. */
    struct raft_msg rej = resp(RAFT_MSG_APP_RESP, 5, 2, 5);
    rej.reject = true;
    rej.reject_hint = 0;
    msg(0, rej);
    msg(OP_REPORT, resp(RAFT_MSG_APP_RESP, 5, 2, 1));
    msg(OP_TICK, resp(RAFT_MSG_HEARTBEAT_RESP, 5, 2, 0));
    msg(0, resp(RAFT_MSG_APP_RESP, 5, 2, 5));
    /* Joint: remove 3, implicit (0x11: remove, id 1 + 17 % 5, implicit). */
    raw(OP_CONF, (uint8_t[]){0x11}, 1);
    msg(0, resp(RAFT_MSG_APP_RESP, 2, 2, 6));
    msg(0, resp(RAFT_MSG_APP_RESP, 5, 2, 6));
    msg(0, resp(RAFT_MSG_APP_RESP, 2, 2, 7));
    msg(0, resp(RAFT_MSG_APP_RESP, 5, 2, 7));
    msg(OP_SNAPSHOT, resp(RAFT_MSG_APP_RESP, 3, 2, 7));
    /* A lagging follower rejects with a term hint, then is transferred
     * leadership to (OP_TRANSFER: 1 + len % 4). */
    struct raft_msg rej2 = resp(RAFT_MSG_APP_RESP, 2, 2, 7);
    rej2.reject = true;
    rej2.reject_hint = 3;
    rej2.log_term = 2;
    msg(OP_TICK, rej2);
    msg(OP_TRANSFER, resp(RAFT_MSG_APP_RESP, 2, 2, 7));
    struct raft_msg tl = resp(RAFT_MSG_TRANSFER_LEADER, 2, 2, 0);
    msg(OP_TICK, tl);
    for (int k = 0; k < 12; k++)
        raw(OP_TICK, NULL, 0);
    save(dir, "leader");
}

/* Node 1 follows 2 at term 2, commits a conf change, has an uncommitted
 * suffix replaced by leader 3 at term 3, installs a snapshot, forwards a
 * proposal and a read, then wins an election after MsgTimeoutNow. */
static void follower(const char *dir)
{
    begin(CFG_SNAP | CFG_SMALL);
    uint8_t ccbuf[64];
    size_t cclen;
    struct raft_conf_change cc = {.n_changes = 1};
    cc.changes[0] = (struct raft_cc_single){RAFT_CC_ADD_LEARNER, 5};
    raft_conf_change_encode(&cc, ccbuf, sizeof(ccbuf), &cclen);
    struct raft_entry e1[4] = {
        {.term = 2, .index = 2},
        {.term = 2, .index = 3, .len = 1, .data = (uint8_t *)"a"},
        {.term = 2, .index = 4, .type = RAFT_ENTRY_CONF_CHANGE_V2,
         .len = (uint32_t)cclen, .data = ccbuf},
        {.term = 2, .index = 5, .len = 1, .data = (uint8_t *)"b"}};
    struct raft_msg app = {.type = RAFT_MSG_APP, .from = 2, .term = 2,
                           .log_term = 1, .index = 1, .commit = 1,
                           .n_entries = 4, .entries = e1};
    msg(0, app);
    struct raft_msg hb = {.type = RAFT_MSG_HEARTBEAT, .from = 2, .term = 2,
                          .commit = 4};
    msg(0, hb);
    struct raft_entry e2[2] = {
        {.term = 3, .index = 5, .len = 1, .data = (uint8_t *)"x"},
        {.term = 3, .index = 6, .len = 1, .data = (uint8_t *)"y"}};
    struct raft_msg app3 = {.type = RAFT_MSG_APP, .from = 3, .term = 3,
                            .log_term = 2, .index = 4, .commit = 5,
                            .n_entries = 2, .entries = e2};
    msg(0, app3);
    /* A probe beyond our log: rejected with a hint. */
    struct raft_msg far = {.type = RAFT_MSG_APP, .from = 3, .term = 3,
                           .log_term = 3, .index = 9, .commit = 6};
    msg(0, far);
    struct raft_snapshot snap = {.data = (uint8_t *)"image", .len = 5};
    snap.meta.index = 10;
    snap.meta.term = 3;
    snap.meta.conf.n_voters = 3;
    snap.meta.conf.voters[0] = 1;
    snap.meta.conf.voters[1] = 2;
    snap.meta.conf.voters[2] = 3;
    snap.meta.conf.n_learners = 1;
    snap.meta.conf.learners[0] = 5;
    struct raft_msg sm = {.type = RAFT_MSG_SNAP, .from = 3, .term = 3,
                          .snapshot = &snap};
    msg(0, sm);
    struct raft_entry e3 = {.term = 3, .index = 11, .len = 1,
                            .data = (uint8_t *)"z"};
    struct raft_msg app4 = {.type = RAFT_MSG_APP, .from = 3, .term = 3,
                            .log_term = 3, .index = 10, .commit = 11,
                            .n_entries = 1, .entries = &e3};
    msg(OP_PROPOSE | OP_READ, app4);
    struct raft_entry rctx = {.len = 4, .data = (uint8_t *)"read"};
    struct raft_msg rir = {.type = RAFT_MSG_READ_INDEX_RESP, .from = 3,
                           .term = 3, .index = 11, .n_entries = 1,
                           .entries = &rctx};
    msg(OP_SNAPSHOT, rir);
    struct raft_msg tn = {.type = RAFT_MSG_TIMEOUT_NOW, .from = 3,
                          .term = 3};
    msg(0, tn);
    msg(0, resp(RAFT_MSG_VOTE_RESP, 2, 4, 0));
    msg(OP_PROPOSE, resp(RAFT_MSG_APP_RESP, 2, 4, 12));
    msg(OP_TICK, resp(RAFT_MSG_APP_RESP, 3, 4, 13));
    save(dir, "follower");
}

/* PreVote + CheckQuorum + lease reads: node 1 pre-campaigns, wins, serves
 * a lease read, steps down after an election timeout without answers,
 * then hears a higher-term PreVote and Vote. */
static void prevote(const char *dir)
{
    begin(CFG_SNAP | CFG_PRE_VOTE | CFG_CHECK_QUORUM | CFG_LEASE);
    raw(OP_CAMPAIGN, NULL, 0);
    msg(0, resp(RAFT_MSG_PRE_VOTE_RESP, 2, 2, 0));
    msg(0, resp(RAFT_MSG_VOTE_RESP, 3, 2, 0));
    msg(OP_READ, resp(RAFT_MSG_APP_RESP, 2, 2, 2));
    msg(OP_READ, resp(RAFT_MSG_APP_RESP, 3, 2, 2));
    for (int k = 0; k < 22; k++)
        raw(OP_TICK, NULL, 0);
    struct raft_msg pv = {.type = RAFT_MSG_PRE_VOTE, .from = 3, .term = 3,
                          .log_term = 2, .index = 2};
    msg(0, pv);
    struct raft_msg v = pv;
    v.type = RAFT_MSG_VOTE;
    msg(0, v);
    struct raft_msg hb = {.type = RAFT_MSG_HEARTBEAT, .from = 3, .term = 3,
                          .commit = 2};
    msg(OP_TICK, hb);
    /* A stale leader's append gets our term back. */
    struct raft_msg old = {.type = RAFT_MSG_APP, .from = 2, .term = 2,
                           .log_term = 2, .index = 2, .commit = 2};
    msg(0, old);
    save(dir, "prevote");
}

/* A brand-new member with no state at all (config byte 0) learns
 * everything from messages. */
static void fresh(const char *dir)
{
    begin(0);
    struct raft_msg hb = {.type = RAFT_MSG_HEARTBEAT, .from = 2, .term = 5};
    msg(0, hb);
    struct raft_entry e = {.term = 5, .index = 1, .len = 2,
                           .data = (uint8_t *)"hi"};
    struct raft_msg app = {.type = RAFT_MSG_APP, .from = 2, .term = 5,
                           .commit = 1, .n_entries = 1, .entries = &e};
    msg(OP_PROPOSE, app);
    msg(OP_TICK, hb);
    save(dir, "fresh");
}

/* Regression (found by fuzz_raft): a message with term 2^64-1 was adopted
 * and the next campaign wrapped the term to 0 (assertion).  Terms above
 * RAFT_TERM_MAX are now refused. */
static void huge_term(const char *dir)
{
    begin(CFG_SNAP | CFG_PRE_VOTE);
    struct raft_msg hb = {.type = RAFT_MSG_HEARTBEAT, .from = 2,
                          .term = UINT64_MAX};
    msg(OP_CAMPAIGN, hb);
    hb.term = RAFT_TERM_MAX;
    msg(OP_CAMPAIGN, hb);
    for (int k = 0; k < 25; k++)
        raw(OP_TICK, NULL, 0);
    save(dir, "huge-term");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: raft_fuzz_corpus OUTDIR\n");
        return 2;
    }
    leader(argv[1]);
    follower(argv[1]);
    prevote(argv[1]);
    fresh(argv[1]);
    huge_term(argv[1]);
    return 0;
}
