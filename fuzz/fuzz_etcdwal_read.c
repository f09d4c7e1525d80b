/*
 * fuzz_etcdwal_read.c - the etcd WAL reader (src/etcdwal/reader.c) on
 * arbitrary bytes, as the last file (torn tails allowed) and as a middle
 * one, with every record's payload decoded by its type.  It answers 0 or
 * ERR_CORRUPT (naming an offset), never crashes or reads past the input.
 * The same bytes are also decoded as a snap file (etcdwal_snap_decode).
 * Seeds: fuzz/corpus/etcdwal_read/ (the head of a real etcd 3.4.23 WAL,
 * the WAL and the snap file `etcdctl snapshot restore` writes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdwal/etcdwal.h"
#include "util/err.h"

static int decode(void *arg, const struct etcdwal_record *r)
{
    (void)arg;
    struct etcdwal_entry e;
    struct etcdwal_state s;
    struct etcdwal_snapshot sn;
    struct etcdwal_metadata m;
    switch (r->type) {
    case ETCDWAL_ENTRY:
        return etcdwal_entry_decode(r->data, r->len, &e) == 0 ? 0 : 0;
    case ETCDWAL_STATE:
        return etcdwal_state_decode(r->data, r->len, &s) == 0 ? 0 : 0;
    case ETCDWAL_SNAPSHOT:
        return etcdwal_snapshot_decode(r->data, r->len, &sn) == 0 ? 0 : 0;
    case ETCDWAL_METADATA:
        return etcdwal_metadata_decode(r->data, r->len, &m) == 0 ? 0 : 0;
    default:
        return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    for (int last = 0; last < 2; last++) {
        struct etcdwal_reader r = {0};
        int rc = etcdwal_read_mem(&r, "fuzz.wal", buf, size, last, decode,
                                  NULL);
        if (rc != 0 && rc != ERR_CORRUPT)
            abort();
        if (rc == ERR_CORRUPT && strstr(r.err, "offset") == NULL)
            abort();
    }
    /* The same bytes as a snap file (etcdwal_snap_decode). */
    struct etcdwal_snap sn;
    char err[128];
    int rc = etcdwal_snap_decode(buf, size, &sn, err, sizeof err);
    if (rc != 0 && (rc != ERR_CORRUPT || strstr(err, "offset") == NULL))
        abort();
    if (rc == 0 && sn.store_len > size)
        abort();
    free(buf);
    return 0;
}
