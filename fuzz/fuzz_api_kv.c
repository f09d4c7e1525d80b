/*
 * fuzz_api_kv.c - goal: the KV request decoders and etcd's request checks
 * never crash, leak or loop on arbitrary bytes from the network.  Method:
 * the first byte picks the request type; the rest is unpacked with
 * protobuf-c (a Txn after util/pbwalk.h's nesting check, as api/kv.c
 * does) and, when it decodes, run through the same checks the KV
 * service runs before proposing.
 */
#include <stddef.h>
#include <stdint.h>

#include "svc/kv_check.h"
#include "util/pbwalk.h"
#include "etcdserverpb/rpc.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: {
        /* As api/kv.c: the nesting is looked at before protobuf-c. */
        if (pb_walk_check(&etcdserverpb__txn_request__descriptor, p, n,
                          2048) != 0)
            break;
        Etcdserverpb__TxnRequest *r = etcdserverpb__txn_request__unpack(NULL, n, p);
        if (r != NULL) {
            (void)kv_check_txn(r, 128);
            (void)kv_txn_is_readonly(r);
            etcdserverpb__txn_request__free_unpacked(r, NULL);
        }
        break;
    }
    case 1: {
        Etcdserverpb__PutRequest *r = etcdserverpb__put_request__unpack(NULL, n, p);
        if (r != NULL) {
            (void)kv_check_put(r);
            etcdserverpb__put_request__free_unpacked(r, NULL);
        }
        break;
    }
    case 2: {
        Etcdserverpb__RangeRequest *r =
            etcdserverpb__range_request__unpack(NULL, n, p);
        if (r != NULL) {
            (void)kv_check_range(r);
            etcdserverpb__range_request__free_unpacked(r, NULL);
        }
        break;
    }
    default: {
        Etcdserverpb__DeleteRangeRequest *r =
            etcdserverpb__delete_range_request__unpack(NULL, n, p);
        if (r != NULL) {
            (void)kv_check_delete(r);
            etcdserverpb__delete_range_request__free_unpacked(r, NULL);
        }
        break;
    }
    }
    return 0;
}
