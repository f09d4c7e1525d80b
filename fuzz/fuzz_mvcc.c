/*
 * fuzz_mvcc.c - libFuzzer target for the `kv` and `kvl` record decoder
 * (mvcc_kv_decode): arbitrary composite keys and value records (format 1,
 * a short key in the composite key; format 2, a long key in the value
 * under a prefix-plus-hash index) must be rejected with ERR_CORRUPT or
 * decoded into a kv whose pointers stay inside the input, never crash or
 * assert.  Input: [u16 LE ckey_len][ckey][value].
 */
#include <assert.h>
#include <stdbool.h>
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
    bool lg = vlen > 0 && v[0] == 2;
    if (lg) /* the key in the value, longer than its index */
        assert(kv.key >= v && kv.key + kv.key_len <= v + vlen &&
               kv.key_len > klen - 17);
    else
        assert(kv.key == k && kv.key_len < klen);
    assert(kv.mod_rev > 0);
    assert(tomb ? kv.value == NULL
                : kv.value >= v && kv.value + kv.value_len == v + vlen);
    assert(!lg || tomb || kv.value == kv.key + kv.key_len);
    return 0;
}
