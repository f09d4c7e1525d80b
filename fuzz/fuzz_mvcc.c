/*
 * fuzz_mvcc.c - libFuzzer target for the `kv` record decoder
 * (mvcc_kv_decode): arbitrary composite keys and value records must be
 * rejected with ERR_CORRUPT or decoded into a kv whose pointers stay inside
 * the input, never crash or assert.  Input: [u16 LE ckey_len][ckey][value].
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "mvcc/mvcc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t klen = (size_t)data[0] | (size_t)data[1] << 8;
    if (klen > size - 2)
        klen = size - 2;
    const uint8_t *k = data + 2, *v = k + klen;
    size_t vlen = size - 2 - klen;
    struct mvcc_kv kv;
    bool tomb;
    if (mvcc_kv_decode(k, klen, v, vlen, &kv, &tomb) != 0)
        return 0;
    assert(kv.key == k && kv.key_len < klen && kv.mod_rev > 0);
    assert(tomb ? kv.value == NULL
                : kv.value >= v && kv.value + kv.value_len == v + vlen);
    return 0;
}
