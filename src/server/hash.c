/*
 * hash.c - the store's hashes for Maintenance.Hash and HashKV
 * (server.h server_hash, server_hash_kv), computed on this member's own
 * store as etcd does (no barrier), inside the store gate.
 */
#include "mvcc/mvcc.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"

/* Runs fn on a read snapshot of the store; out->rev = its revision. */
static int with_read(struct server *s, int64_t rev, bool etcd,
                     struct server_hash *out)
{
    server__store_enter(s);
    struct mvcc_read *r;
    int rc = mvcc_read_begin(s->mvcc, &r);
    if (rc == 0) {
        mvcc_rev compact = 0;
        rc = etcd ? mvcc_hash_kv_etcd(r, rev, &out->hash, NULL)
                  : mvcc_hash_kv(r, 0, &out->hash, &compact);
        out->rev = mvcc_read_rev(r);
        compact = mvcc_read_compact_rev(r);
        /* etcd's -1 when never compacted, 0 after a Compact at 0. */
        out->compact_rev = compact > 0                        ? compact
                           : atomic_load(&s->compacted_at_zero) ? 0
                                                                : -1;
        mvcc_read_end(r);
    }
    server__store_leave(s);
    return rc;
}

int server_hash_kv(struct server *s, int64_t rev, struct server_hash *out)
{
    CHECK(s != NULL && out != NULL);
    return with_read(s, rev, true, out);
}

int server_hash_kv_compacted(struct server *s, int64_t rev,
                             struct server_hash *out)
{
    CHECK(s != NULL && out != NULL);
    server__store_enter(s);
    struct mvcc_read *r;
    int rc = mvcc_read_begin(s->mvcc, &r);
    if (rc == 0) {
        mvcc_rev compact = mvcc_read_compact_rev(r);
        rc = compact > rev ? ERR_COMPACTED : compact < rev ? ERR_FUTURE_REV
                                                           : 0;
        if (rc == 0)
            rc = mvcc_hash_kv_compacted(r, &out->hash);
        out->rev = mvcc_read_rev(r);
        out->compact_rev = compact;
        mvcc_read_end(r);
    }
    server__store_leave(s);
    CHECK(rc != 0 || out->compact_rev == rev);
    return rc;
}

int64_t server_compact_rev(struct server *s)
{
    CHECK(s != NULL);
    server__store_enter(s);
    int64_t c = mvcc_compact_rev(s->mvcc);
    server__store_leave(s);
    CHECK(c >= 0);
    return c;
}

int server_hash(struct server *s, struct server_hash *out)
{
    CHECK(s != NULL && out != NULL);
    return with_read(s, 0, false, out);
}
