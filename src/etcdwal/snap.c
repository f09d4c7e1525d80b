/*
 * snap.c - etcd's snap files (etcdwal.h "snap files"): the CRC of the
 * wrapper, then raftpb.Snapshot's metadata and the v2 store bytes.
 */
#include <stdio.h>
#include <string.h>

#include "etcdwal/etcdwal.h"
#include "etcdwal/etcdwal_int.h"
#include "util/check.h"
#include "util/crc32c.h"
#include "util/err.h"

static int bad(char *err, size_t err_len, const char *what, size_t off)
{
    if (err != NULL)
        snprintf(err, err_len, "etcd snap: %s (offset %zu)", what, off);
    return ERR_CORRUPT;
}

/* Appends the ids of a repeated uint64 field (one value or packed). */
static int ids_add(const struct etcdwal_field *f, uint64_t *v, size_t *n)
{
    if (f->wt == 0) {
        if (*n >= ETCDWAL_SNAP_IDS_MAX)
            return ERR_CORRUPT;
        v[(*n)++] = f->v;
        return 0;
    }
    if (f->wt != 2)
        return ERR_CORRUPT;
    size_t pos = 0;
    while (pos < f->blen) {
        uint64_t id;
        if (*n >= ETCDWAL_SNAP_IDS_MAX ||
            etcdwal__varint(f->b, f->blen, &pos, &id) != 0)
            return ERR_CORRUPT;
        v[(*n)++] = id;
    }
    return 0;
}

static int conf_state(const uint8_t *p, size_t len, struct etcdwal_snap *out)
{
    size_t pos = 0;
    struct etcdwal_field f;
    int rc;
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 1)
            rc = ids_add(&f, out->voters, &out->n_voters);
        else if (f.num == 2)
            rc = ids_add(&f, out->learners, &out->n_learners);
        if (rc != 0)
            return rc;
    }
    return rc == 1 ? 0 : rc;
}

static int metadata(const uint8_t *p, size_t len, struct etcdwal_snap *out)
{
    size_t pos = 0;
    struct etcdwal_field f;
    int rc;
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 1 && f.wt == 2)
            rc = conf_state(f.b, f.blen, out);
        else if ((f.num == 2 || f.num == 3) && f.wt == 0)
            *(f.num == 2 ? &out->index : &out->term) = f.v;
        else if (f.num <= 3)
            rc = ERR_CORRUPT;
        if (rc != 0)
            return rc;
    }
    return rc == 1 ? 0 : rc;
}

int etcdwal_snap_decode(const uint8_t *buf, size_t len,
                        struct etcdwal_snap *out, char *err, size_t err_len)
{
    CHECK(out != NULL && (buf != NULL || len == 0));
    memset(out, 0, sizeof *out);
    size_t pos = 0;
    struct etcdwal_field f;
    const uint8_t *data = NULL;
    size_t data_len = 0, data_off = 0;
    uint64_t crc = 0;
    bool has_crc = false;
    int rc;
    while ((rc = etcdwal_field_next(buf, len, &pos, &f)) == 0) {
        if (f.num == 1 && f.wt == 0 && f.v <= UINT32_MAX) {
            crc = f.v;
            has_crc = true;
        } else if (f.num == 2 && f.wt == 2) {
            data = f.b;
            data_len = f.blen;
            data_off = (size_t)(f.b - buf);
        } else if (f.num <= 2) {
            return bad(err, err_len, "bad snappb field", pos);
        }
    }
    if (rc != 1)
        return bad(err, err_len, "cut short or bad framing", pos);
    if (!has_crc || data == NULL)
        return bad(err, err_len, "no crc or no data", len);
    if (crc32c_extend(0, data, data_len) != (uint32_t)crc)
        return bad(err, err_len, "crc mismatch", data_off);
    pos = 0;
    while ((rc = etcdwal_field_next(data, data_len, &pos, &f)) == 0) {
        if (f.num == 1 && f.wt == 2) {
            out->store = f.b;
            out->store_len = f.blen;
        } else if (f.num == 2 && f.wt == 2) {
            rc = metadata(f.b, f.blen, out);
            if (rc != 0)
                return bad(err, err_len, "bad metadata", data_off + pos);
        } else if (f.num <= 2) {
            return bad(err, err_len, "bad raftpb.Snapshot field",
                       data_off + pos);
        }
    }
    return rc == 1 ? 0 : bad(err, err_len, "bad raftpb.Snapshot",
                             data_off + pos);
}
