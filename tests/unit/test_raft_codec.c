/*
 * test_raft_codec.c - goal: the raft wire codecs (src/raft/msg_codec.c) are
 * exact and never trust their input.
 *
 * Method: for messages of every type (with entries, context, snapshot and
 * conf state) and for conf changes: encode, decode, compare field by field;
 * every strict prefix of a valid encoding and every encoding with a byte
 * appended is rejected with ERR_CORRUPT; bad version/type/flags/lengths are
 * rejected; a too-small buffer gives ERR_FULL and the exact size; seeded
 * random byte strings and random mutations of valid encodings never crash
 * (run under ASan+UBSan in the sanitizer build) and, when accepted,
 * re-encode to the same bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "raft/raft.h"
#include "util/err.h"
#include "util/mem.h"

static uint64_t seed = 0x1234567;
static uint64_t rnd(void)
{
    uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint8_t *encode(const struct raft_msg *m, size_t *len)
{
    size_t n = raft_msg_encoded_size(m);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(raft_msg_encode(m, buf, n, len), 0);
    assert_int_equal(*len, n);
    return buf;
}

static void assert_conf_equal(const struct raft_conf_state *a,
                              const struct raft_conf_state *b)
{
    assert_int_equal(a->n_voters, b->n_voters);
    assert_int_equal(a->n_voters_outgoing, b->n_voters_outgoing);
    assert_int_equal(a->n_learners, b->n_learners);
    assert_int_equal(a->n_learners_next, b->n_learners_next);
    assert_memory_equal(a->voters, b->voters, a->n_voters * sizeof(raft_id));
    assert_memory_equal(a->voters_outgoing, b->voters_outgoing,
                        a->n_voters_outgoing * sizeof(raft_id));
    assert_memory_equal(a->learners, b->learners,
                        a->n_learners * sizeof(raft_id));
    assert_memory_equal(a->learners_next, b->learners_next,
                        a->n_learners_next * sizeof(raft_id));
    assert_int_equal(a->auto_leave, b->auto_leave);
}

static void assert_msg_equal(const struct raft_msg *a, const struct raft_msg *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->from, b->from);
    assert_int_equal(a->to, b->to);
    assert_int_equal(a->term, b->term);
    assert_int_equal(a->log_term, b->log_term);
    assert_int_equal(a->index, b->index);
    assert_int_equal(a->commit, b->commit);
    assert_int_equal(a->reject_hint, b->reject_hint);
    assert_int_equal(a->reject, b->reject);
    assert_int_equal(a->campaign_transfer, b->campaign_transfer);
    assert_int_equal(a->ctx_len, b->ctx_len);
    if (a->ctx_len)
        assert_memory_equal(a->ctx, b->ctx, a->ctx_len);
    assert_int_equal(a->n_entries, b->n_entries);
    for (size_t k = 0; k < a->n_entries; k++) {
        assert_int_equal(a->entries[k].term, b->entries[k].term);
        assert_int_equal(a->entries[k].index, b->entries[k].index);
        assert_int_equal(a->entries[k].type, b->entries[k].type);
        assert_int_equal(a->entries[k].len, b->entries[k].len);
        if (a->entries[k].len)
            assert_memory_equal(a->entries[k].data, b->entries[k].data,
                                a->entries[k].len);
    }
    assert_int_equal(a->snapshot != NULL, b->snapshot != NULL);
    if (a->snapshot) {
        assert_int_equal(a->snapshot->meta.index, b->snapshot->meta.index);
        assert_int_equal(a->snapshot->meta.term, b->snapshot->meta.term);
        assert_conf_equal(&a->snapshot->meta.conf, &b->snapshot->meta.conf);
        assert_int_equal(a->snapshot->len, b->snapshot->len);
        if (a->snapshot->len)
            assert_memory_equal(a->snapshot->data, b->snapshot->data,
                                a->snapshot->len);
    }
}

/* A rich message of the given type: all fields set, entries, ctx, and a
 * snapshot for MsgSnap. */
static struct raft_entry ents[3];
static struct raft_snapshot snap;
static uint8_t payload[] = "payload-bytes";
static struct raft_msg sample(uint8_t type)
{
    for (int k = 0; k < 3; k++)
        ents[k] = (struct raft_entry){.term = 7, .index = 11 + (uint64_t)k,
                                      .type = (uint8_t)(k % 3),
                                      .len = (uint32_t)(k * 5),
                                      .data = k ? payload : NULL};
    memset(&snap, 0, sizeof(snap));
    snap.meta.index = 10;
    snap.meta.term = 6;
    snap.meta.conf.n_voters = 2;
    snap.meta.conf.voters[0] = 1;
    snap.meta.conf.voters[1] = 2;
    snap.meta.conf.n_voters_outgoing = 1;
    snap.meta.conf.voters_outgoing[0] = 3;
    snap.meta.conf.n_learners = 1;
    snap.meta.conf.learners[0] = 4;
    snap.meta.conf.n_learners_next = 1;
    snap.meta.conf.learners_next[0] = 3;
    snap.meta.conf.auto_leave = true;
    snap.data = payload;
    snap.len = sizeof(payload);
    struct raft_msg m = {.type = type, .from = 0x0102030405060708ULL,
                         .to = 2, .term = 7, .log_term = 6, .index = 10,
                         .commit = 9, .reject_hint = 8, .reject = type & 1,
                         .campaign_transfer = type == RAFT_MSG_VOTE};
    if (type == RAFT_MSG_APP || type == RAFT_MSG_PROP) {
        m.n_entries = 3;
        m.entries = ents;
    }
    if (type == RAFT_MSG_HEARTBEAT || type == RAFT_MSG_HEARTBEAT_RESP) {
        m.ctx = (const uint8_t *)"ctx";
        m.ctx_len = 3;
    }
    if (type == RAFT_MSG_SNAP)
        m.snapshot = &snap;
    return m;
}

static void test_msg_round_trip_every_type(void **state)
{
    (void)state;
    for (uint8_t t = 1; t <= RAFT_MSG_TYPE_MAX; t++) {
        struct raft_msg m = sample(t), back;
        size_t len;
        uint8_t *buf = encode(&m, &len);
        assert_int_equal(raft_msg_decode(buf, len, &back), 0);
        assert_msg_equal(&m, &back);
        /* Decoded data points into buf (zero copy). */
        if (back.n_entries > 1)
            assert_true(back.entries[1].data >= buf &&
                        back.entries[1].data < buf + len);
        raft_msg_release(&back);
        free(buf);
    }
}

static void test_msg_every_truncation_rejected(void **state)
{
    (void)state;
    for (uint8_t t = 1; t <= RAFT_MSG_TYPE_MAX; t++) {
        struct raft_msg m = sample(t), back;
        size_t len;
        uint8_t *buf = encode(&m, &len);
        for (size_t cut = 0; cut < len; cut++) {
            /* A fresh allocation of exactly cut bytes lets ASan catch any
             * read past the end. */
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf, cut);
            assert_int_equal(raft_msg_decode(p, cut, &back), ERR_CORRUPT);
            assert_null(back.owned_);
            free(p);
        }
        uint8_t *longer = malloc(len + 1);
        memcpy(longer, buf, len);
        longer[len] = 0;
        assert_int_equal(raft_msg_decode(longer, len + 1, &back), ERR_CORRUPT);
        free(longer);
        free(buf);
    }
}

static void test_msg_bad_header_fields(void **state)
{
    (void)state;
    struct raft_msg m = sample(RAFT_MSG_APP), back;
    size_t len;
    uint8_t *buf = encode(&m, &len);
    uint8_t saved;
    /* version, type 0, type too big, unknown flag bit, entry type 3 */
    const struct { size_t off; uint8_t v; } bad[] = {
        {0, 2}, {1, 0}, {1, RAFT_MSG_TYPE_MAX + 1}, {2, 8}, {2, 0x80}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        saved = buf[bad[k].off];
        buf[bad[k].off] = bad[k].v;
        assert_int_equal(raft_msg_decode(buf, len, &back), ERR_CORRUPT);
        buf[bad[k].off] = saved;
    }
    /* The first entry header starts after 3 + 56 + 4 (ctx_len 0) + 4. */
    size_t e0 = 3 + 7 * 8 + 4 + 4;
    saved = buf[e0 + 16];
    buf[e0 + 16] = 3; /* entry type */
    assert_int_equal(raft_msg_decode(buf, len, &back), ERR_CORRUPT);
    buf[e0 + 16] = saved;
    /* An entry count far beyond what the bytes could hold. */
    buf[e0 - 4] = 0xff;
    buf[e0 - 1] = 0x7f;
    assert_int_equal(raft_msg_decode(buf, len, &back), ERR_CORRUPT);
    free(buf);
    assert_int_equal(raft_msg_decode(NULL, 0, &back), ERR_CORRUPT);
}

static void test_msg_snapshot_conf_bounds(void **state)
{
    (void)state;
    struct raft_msg m = sample(RAFT_MSG_SNAP), back;
    size_t len;
    uint8_t *buf = encode(&m, &len);
    /* Conf state counts follow u64 index + u64 term after the (empty)
     * entry list. */
    size_t cs = 3 + 7 * 8 + 4 + 0 + 4 + 16;
    uint8_t saved = buf[cs];
    buf[cs] = RAFT_MAX_MEMBERS + 1;
    assert_int_equal(raft_msg_decode(buf, len, &back), ERR_CORRUPT);
    buf[cs] = saved;
    /* auto_leave must be 0 or 1: it sits before the u32 data length. */
    size_t al = len - sizeof(payload) - 4 - 1;
    assert_int_equal(buf[al], 1);
    buf[al] = 2;
    assert_int_equal(raft_msg_decode(buf, len, &back), ERR_CORRUPT);
    buf[al] = 1;
    assert_int_equal(raft_msg_decode(buf, len, &back), 0);
    raft_msg_release(&back);
    free(buf);
}

static void test_msg_encode_full(void **state)
{
    (void)state;
    struct raft_msg m = sample(RAFT_MSG_APP);
    size_t need = raft_msg_encoded_size(&m), len = 0;
    uint8_t *buf = malloc(need);
    assert_int_equal(raft_msg_encode(&m, buf, need - 1, &len), ERR_FULL);
    assert_int_equal(len, need);
    assert_int_equal(raft_msg_encode(&m, buf, need, &len), 0);
    free(buf);
}

static void test_msg_decode_nomem(void **state)
{
    (void)state;
    struct raft_msg m = sample(RAFT_MSG_APP), back;
    size_t len;
    uint8_t *buf = encode(&m, &len);
    mem_fault_set(1);
    assert_int_equal(raft_msg_decode(buf, len, &back), ERR_NOMEM);
    mem_fault_set(0);
    free(buf);
}

/* Random bytes, and valid encodings with random bytes changed: never a
 * crash; whatever decodes re-encodes to the same bytes. */
static void test_msg_random_bytes(void **state)
{
    (void)state;
    uint8_t buf[512];
    for (int iter = 0; iter < 20000; iter++) {
        size_t len;
        if (iter % 2 == 0) {
            len = (size_t)(rnd() % sizeof(buf));
            for (size_t k = 0; k < len; k++)
                buf[k] = (uint8_t)rnd();
            if (len > 0 && rnd() % 2)
                buf[0] = 1; /* get past the version check */
        } else {
            struct raft_msg m = sample((uint8_t)(1 + rnd() % 14));
            size_t n;
            uint8_t *enc = encode(&m, &n);
            len = n < sizeof(buf) ? n : sizeof(buf);
            memcpy(buf, enc, len);
            free(enc);
            for (int f = 0; f < 1 + (int)(rnd() % 4); f++)
                buf[rnd() % len] = (uint8_t)rnd();
        }
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, buf, len);
        struct raft_msg back;
        if (raft_msg_decode(p, len, &back) == 0) {
            size_t n2;
            uint8_t *again = encode(&back, &n2);
            assert_int_equal(n2, len);
            assert_memory_equal(again, p, len);
            free(again);
            raft_msg_release(&back);
        }
        free(p);
    }
}

/* ---- conf change codec ---- */

static struct raft_conf_change sample_cc(void)
{
    struct raft_conf_change cc = {.transition = RAFT_CC_TRANSITION_EXPLICIT,
                                  .n_changes = 4};
    for (uint32_t k = 0; k < 4; k++)
        cc.changes[k] = (struct raft_cc_single){.type = (uint8_t)k,
                                                .node_id = 100 + k};
    cc.ctx = (const uint8_t *)"{\"name\":\"m1\"}";
    cc.ctx_len = 13;
    return cc;
}

static void test_cc_round_trip(void **state)
{
    (void)state;
    struct raft_conf_change ccs[3] = {sample_cc(), {0}, {0}};
    ccs[2].n_changes = 1; /* v1 style, no ctx */
    ccs[2].changes[0] = (struct raft_cc_single){RAFT_CC_REMOVE_NODE, 7};
    for (int i = 0; i < 3; i++) {
        uint8_t buf[256];
        size_t len;
        struct raft_conf_change back;
        assert_int_equal(raft_conf_change_encode(&ccs[i], buf, sizeof(buf),
                                                 &len), 0);
        assert_int_equal(len, raft_conf_change_encoded_size(&ccs[i]));
        assert_int_equal(raft_conf_change_decode(buf, len, &back), 0);
        assert_int_equal(back.transition, ccs[i].transition);
        assert_int_equal(back.n_changes, ccs[i].n_changes);
        assert_memory_equal(back.changes, ccs[i].changes,
                            ccs[i].n_changes * sizeof(back.changes[0]));
        assert_int_equal(back.ctx_len, ccs[i].ctx_len);
        if (back.ctx_len)
            assert_memory_equal(back.ctx, ccs[i].ctx, back.ctx_len);
        else
            assert_null(back.ctx);
    }
}

static void test_cc_every_truncation_rejected(void **state)
{
    (void)state;
    struct raft_conf_change cc = sample_cc(), back;
    uint8_t buf[256];
    size_t len;
    assert_int_equal(raft_conf_change_encode(&cc, buf, sizeof(buf), &len), 0);
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, buf, cut);
        assert_int_equal(raft_conf_change_decode(p, cut, &back), ERR_CORRUPT);
        free(p);
    }
    buf[len] = 0;
    assert_int_equal(raft_conf_change_decode(buf, len + 1, &back),
                     ERR_CORRUPT);
    /* bad version, transition, count, change type */
    const struct { size_t off; uint8_t v; } bad[] = {
        {0, 2}, {1, 3}, {2, RAFT_MAX_MEMBERS + 1}, {3, 4}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        uint8_t saved = buf[bad[k].off];
        buf[bad[k].off] = bad[k].v;
        assert_int_equal(raft_conf_change_decode(buf, len, &back),
                         ERR_CORRUPT);
        buf[bad[k].off] = saved;
    }
    assert_int_equal(raft_conf_change_decode(NULL, 0, &back), ERR_CORRUPT);
}

static void test_cc_encode_limits(void **state)
{
    (void)state;
    struct raft_conf_change cc = sample_cc();
    uint8_t buf[8];
    size_t len;
    assert_int_equal(raft_conf_change_encode(&cc, buf, sizeof(buf), &len),
                     ERR_FULL);
    assert_int_equal(len, raft_conf_change_encoded_size(&cc));
    cc.n_changes = RAFT_MAX_MEMBERS + 1;
    assert_int_equal(raft_conf_change_encode(&cc, buf, sizeof(buf), &len),
                     ERR_INVAL);
}

static void test_cc_random_bytes(void **state)
{
    (void)state;
    uint8_t buf[200];
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(rnd() % sizeof(buf));
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)(rnd() % 4 ? rnd() % 5 : rnd());
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, buf, len);
        struct raft_conf_change back;
        if (raft_conf_change_decode(p, len, &back) == 0) {
            uint8_t again[256];
            size_t n;
            assert_int_equal(raft_conf_change_encode(&back, again,
                                                     sizeof(again), &n), 0);
            assert_int_equal(n, len);
            assert_memory_equal(again, p, len);
        }
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msg_round_trip_every_type),
        cmocka_unit_test(test_msg_every_truncation_rejected),
        cmocka_unit_test(test_msg_bad_header_fields),
        cmocka_unit_test(test_msg_snapshot_conf_bounds),
        cmocka_unit_test(test_msg_encode_full),
        cmocka_unit_test(test_msg_decode_nomem),
        cmocka_unit_test(test_msg_random_bytes),
        cmocka_unit_test(test_cc_round_trip),
        cmocka_unit_test(test_cc_every_truncation_rejected),
        cmocka_unit_test(test_cc_encode_limits),
        cmocka_unit_test(test_cc_random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
