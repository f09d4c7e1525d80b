/*
 * fuzz_mvcc.c - libFuzzer target for the store's record decoders: the
 * index entries of `kv` and `kvl` (mvcc_kv_decode: format 3, a short key
 * in the composite key and a 26-byte header; format 4, a long key in the
 * value under a prefix-plus-hash index) and the revision log's entries of
 * `rev` (mvcc_log_decode: revision key, header, key, value).  Each must be
 * rejected with ERR_CORRUPT or decoded into pointers that stay inside the
 * input, never crash or assert.  Input: [u16 LE key_len][key][value]; the
 * low bit of the first byte picks the decoder.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mvcc/mvcc.h"

static void index_entry(const uint8_t *k, size_t klen, const uint8_t *v,
                        size_t vlen)
{
    struct mvcc_kv kv;
    bool tomb;
    if (mvcc_kv_decode(k, klen, v, vlen, &kv, &tomb) != 0)
        return;
    bool lg = vlen > 0 && v[0] == 4;
    if (lg) /* the key in the value, longer than its index */
        assert(kv.key >= v && kv.key + kv.key_len == v + vlen &&
               kv.key_len > klen - 17);
    else
        assert(kv.key == k && kv.key_len < klen && vlen == 26);
    assert(kv.mod_rev > 0 && kv.value == NULL && kv.value_len == 0);
    assert(tomb ? kv.create_rev == 0 && kv.version == 0
                : kv.create_rev > 0 && kv.create_rev <= kv.mod_rev &&
                      kv.version > 0);
}

static void log_entry(const uint8_t *k, size_t klen, const uint8_t *v,
                      size_t vlen)
{
    struct mvcc_event ev;
    if (mvcc_log_decode(k, klen, v, vlen, &ev) != 0)
        return;
    const struct mvcc_kv *kv = &ev.kv;
    assert(klen == 16 && kv->mod_rev > 0 && ev.sub_rev >= 0);
    assert(kv->key_len >= 1 && kv->key >= v && kv->key + kv->key_len <= v + vlen);
    assert(ev.type == MVCC_EVENT_DELETE
               ? kv->value == NULL && kv->value_len == 0 &&
                     kv->key + kv->key_len == v + vlen
               : kv->value == kv->key + kv->key_len &&
                     kv->value + kv->value_len == v + vlen);
    assert(ev.prev_kv.mod_rev == 0 && !ev.prev_no_value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t klen = (size_t)data[0] >> 1 | (size_t)data[1] << 7;
    if (klen > size - 2)
        klen = size - 2;
    const uint8_t *k = data + 2, *v = k + klen;
    size_t vlen = size - 2 - klen;
    if (data[0] & 1)
        log_entry(k, klen, v, vlen);
    else
        index_entry(k, klen, v, vlen);
    return 0;
}
