/*
 * import_db.c - etcd's bbolt db (member/snap/db) into the new store, in
 * the import's one write txn (import_int.h).
 *
 * etcd's buckets (bbolt.h reads the file; server/snapshot_etcd.c writes
 * the same records) and where each goes:
 *   key              revision (main BE, '_', sub BE, 't' for a deletion)
 *                    -> mvccpb.KeyValue: every version as it is
 *                    (mvcc_batch_import), in revision order
 *   meta             consistent_index (u64 BE), scheduledCompactRev (a
 *                    revision key): the store's consistent index, then a
 *                    compaction at that revision (it keeps what etcd kept);
 *                    etcd 3.5's term (u64 BE, the term of the entry at the
 *                    consistent index): used when the WAL does not tell it;
 *                    3.5's confState (JSON), finishedCompactRev and 3.6's
 *                    storageVersion: not read
 *   lease            id (u64 BE) -> leasepb.Lease {1 ID, 2 TTL,
 *                    3 RemainingTTL} -> cetcd's "lease" bucket
 *   auth             authEnabled (1 byte), authRevision (u64 BE)
 *   authUsers        name -> authpb.User     \ cetcd's "auth" bucket: the
 *   authRoles        name -> authpb.Role     / same records (bcrypt hashes)
 *   members          not read: etcd 3.4 starts from the members of its v2
 *   members_removed  store (the snap file) and its log (import_wal.c),
 *                    and `etcdctl snapshot restore` leaves the old
 *                    cluster's members in the db
 *   alarm            etcdserverpb.AlarmMember -> cetcd's 12-byte key
 *   cluster          clusterVersion, 3.5's downgrade: not read (cetcd
 *                    reports its own version)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authpb/auth.pb-c.h"
#include "bbolt/bbolt.h"
#include "server/alarm.h"
#include "server/import_int.h"
#include "server/lease.h"
#include "server/members.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

#define LOG_MOD "etcdserver"

static bool in_bucket(const struct bbolt_entry *e, const char *name)
{
    return e->depth == 1 && !e->is_bucket && e->path_len[0] == strlen(name) &&
           memcmp(e->path[0], name, e->path_len[0]) == 0;
}

static bool key_is(const struct bbolt_entry *e, const char *k)
{
    return e->key_len == strlen(k) && memcmp(e->key, k, e->key_len) == 0;
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* A record that does not decode: names the file, bucket and key. */
static int bad(struct import *im, const struct bbolt_entry *e, const char *why)
{
    char hex[2 * 24 + 1];
    size_t n = e->key_len < 24 ? e->key_len : 24;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", e->key[i]);
    hex[2 * n] = '\0';
    log_error(LOG_MOD, "%s: bucket %.*s, key %s%s: %s", im->path,
              (int)e->path_len[0], e->path[0], hex, e->key_len > n ? "..." : "",
              why);
    return ERR_CORRUPT;
}

static int on_meta(void *arg, const struct bbolt_entry *e)
{
    struct import *im = arg;
    if (!in_bucket(e, "meta"))
        return 0;
    if (key_is(e, "consistent_index")) {
        if (e->value_len != 8)
            return bad(im, e, "not 8 bytes");
        im->ci = be64(e->value);
    } else if (key_is(e, "term")) {
        if (e->value_len != 8)
            return bad(im, e, "not 8 bytes");
        im->db_term = be64(e->value);
    } else if (key_is(e, "scheduledCompactRev")) {
        if (e->value_len < 8)
            return bad(im, e, "not a revision");
        im->compact = (mvcc_rev)be64(e->value);
        if (im->compact < 0)
            return bad(im, e, "a negative revision");
    }
    return 0;
}

/* The bbolt reader's message, with the file's path when it lacks it (a
 * fault found by a walk names the page and offset only). */
static void bbolt_fault(const struct import *im, const struct bbolt_reader *r)
{
    const char *why = bbolt_reader_error(r);
    if (strncmp(why, im->path, strlen(im->path)) == 0)
        log_error(LOG_MOD, "%s", why);
    else
        log_error(LOG_MOD, "%s: %s", im->path, why);
}

int import__db_meta(struct import *im)
{
    CHECK(im != NULL && im->be == NULL);
    snprintf(im->path, sizeof im->path, "%s/snap/db", im->src);
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_file(im->path, &r);
    if (rc == 0)
        rc = bbolt_reader_walk(r, on_meta, im);
    if ((rc == ERR_BBOLT_CORRUPT || rc == ERR_CORRUPT) && r != NULL &&
        bbolt_reader_error(r)[0] != '\0')
        bbolt_fault(im, r);
    else if (rc != 0 && rc != ERR_CORRUPT)
        log_error(LOG_MOD, "%s: %s", im->path, err_str(rc));
    bbolt_reader_free(r);
    return rc;
}

/* --- the write pass -------------------------------------------------------- */

/* mvccpb.KeyValue {1 key, 2 create_revision, 3 mod_revision, 4 version,
 * 5 value, 6 lease}. */
static int kv_decode(const uint8_t *p, size_t len, struct mvcc_kv *kv)
{
    struct etcdwal_field f;
    size_t pos = 0;
    int rc;
    memset(kv, 0, sizeof *kv);
    while ((rc = etcdwal_field_next(p, len, &pos, &f)) == 0) {
        if (f.num == 1 && f.wt == 2)
            kv->key = f.b, kv->key_len = f.blen;
        else if (f.num == 5 && f.wt == 2)
            kv->value = f.b, kv->value_len = f.blen;
        else if (f.num == 2 && f.wt == 0)
            kv->create_rev = (mvcc_rev)f.v;
        else if (f.num == 3 && f.wt == 0)
            kv->mod_rev = (mvcc_rev)f.v;
        else if (f.num == 4 && f.wt == 0)
            kv->version = (int64_t)f.v;
        else if (f.num == 6 && f.wt == 0)
            kv->lease = (int64_t)f.v;
    }
    return rc == 1 ? 0 : ERR_CORRUPT;
}

static int on_key(struct import *im, const struct bbolt_entry *e)
{
    bool tomb = e->key_len == 18 && e->key[17] == 't';
    if ((e->key_len != 17 && !tomb) || e->key[8] != '_')
        return bad(im, e, "not a revision key");
    mvcc_rev main = (mvcc_rev)be64(e->key);
    int64_t sub = (int64_t)be64(e->key + 9);
    struct mvcc_kv kv;
    if (kv_decode(e->value, e->value_len, &kv) != 0 || kv.key_len == 0)
        return bad(im, e, "not a mvccpb.KeyValue");
    if (main < 1 || sub < 0 ||
        (!tomb && (kv.mod_rev != main || kv.create_rev < 1 ||
                   kv.create_rev > main || kv.version < 1)))
        return bad(im, e, "revisions that do not agree");
    kv.mod_rev = main;
    int rc = mvcc_batch_import(im->b, &kv, sub, tomb);
    if (rc == ERR_INVAL)
        return bad(im, e, "out of revision order");
    im->versions++;
    im->last_rev = main;
    return rc;
}

/* leasepb.Lease {1 ID, 2 TTL, 3 RemainingTTL}. */
static int on_lease(struct import *im, const struct bbolt_entry *e)
{
    struct etcdwal_field f;
    struct server_lease l;
    size_t pos = 0;
    int rc;
    memset(&l, 0, sizeof l);
    while ((rc = etcdwal_field_next(e->value, e->value_len, &pos, &f)) == 0) {
        if (f.wt == 0 && f.num == 1)
            l.id = (int64_t)f.v;
        else if (f.wt == 0 && f.num == 2)
            l.ttl = (int64_t)f.v;
        else if (f.wt == 0 && f.num == 3)
            l.remaining = (int64_t)f.v;
    }
    uint8_t k[SERVER_LEASE_KEY_BYTES], v[SERVER_LEASE_VAL_BYTES];
    struct server_lease chk;
    server__lease_encode(&l, k, v);
    if (rc != 1 || e->key_len != 8 || be64(e->key) != (uint64_t)l.id ||
        server__lease_decode(k, sizeof k, v, sizeof v, &chk) != 0)
        return bad(im, e, "not a valid leasepb.Lease");
    im->leases++;
    return backend_put(mvcc_batch_backend_txn(im->b), im->b_lease, k, sizeof k,
                       v, sizeof v);
}

static int auth_put(struct import *im, const char *prefix,
                    const struct bbolt_entry *e)
{
    char key[512];
    if (e->key_len == 0 || e->key_len > 400)
        return bad(im, e, "a name of a wrong length");
    int n = snprintf(key, sizeof key, "%s%.*s", prefix, (int)e->key_len,
                     (const char *)e->key);
    return backend_put(mvcc_batch_backend_txn(im->b), im->b_auth, key,
                       (size_t)n, e->value, e->value_len);
}

static int on_auth(struct import *im, const struct bbolt_entry *e)
{
    bool users = in_bucket(e, "authUsers");
    if (users || in_bucket(e, "authRoles")) {
        /* checked here: cetcd's auth store reads these at every open */
        ProtobufCMessage *m =
            users ? (ProtobufCMessage *)authpb__user__unpack(
                        NULL, e->value_len, e->value)
                  : (ProtobufCMessage *)authpb__role__unpack(
                        NULL, e->value_len, e->value);
        if (m == NULL)
            return bad(im, e, users ? "not an authpb.User"
                                    : "not an authpb.Role");
        protobuf_c_message_free_unpacked(m, NULL);
        *(users ? &im->users : &im->roles) += 1;
        return auth_put(im, users ? "user/" : "role/", e);
    }
    struct backend_txn *txn = mvcc_batch_backend_txn(im->b);
    if (key_is(e, "authEnabled")) {
        if (e->value_len != 1)
            return bad(im, e, "not 1 byte");
        im->auth_enabled = e->value[0] == 1;
        uint8_t on = im->auth_enabled;
        return backend_put(txn, im->b_auth, "enabled", 7, &on, 1);
    }
    if (key_is(e, "authRevision")) {
        if (e->value_len != 8)
            return bad(im, e, "not 8 bytes");
        return backend_put(txn, im->b_auth, "revision", 8, e->value, 8);
    }
    return 0;
}

/* etcdserverpb.AlarmMember {1 memberID, 2 alarm} as the key. */
static int on_alarm(struct import *im, const struct bbolt_entry *e)
{
    struct etcdwal_field f;
    struct server_alarm a = {0, 0};
    size_t pos = 0;
    int rc;
    while ((rc = etcdwal_field_next(e->key, e->key_len, &pos, &f)) == 0) {
        if (f.wt == 0 && f.num == 1)
            a.member_id = f.v;
        else if (f.wt == 0 && f.num == 2 && f.v <= UINT32_MAX)
            a.type = (uint32_t)f.v;
    }
    uint8_t k[SERVER_ALARM_KEY_BYTES];
    struct server_alarm chk;
    server__alarm_key_encode(k, &a);
    if (rc != 1 || server__alarm_key_decode(k, sizeof k, &chk) != 0)
        return bad(im, e, "not an etcdserverpb.AlarmMember");
    im->alarms++;
    return backend_put(mvcc_batch_backend_txn(im->b), im->b_alarm, k, sizeof k,
                       "", 0);
}

static int on_entry(void *arg, const struct bbolt_entry *e)
{
    struct import *im = arg;
    if (e->depth != 1 || e->is_bucket)
        return 0; /* etcd nests no bucket; top-level ones open here */
    if (in_bucket(e, "key"))
        return on_key(im, e);
    if (in_bucket(e, "lease"))
        return on_lease(im, e);
    if (in_bucket(e, "auth") || in_bucket(e, "authUsers") ||
        in_bucket(e, "authRoles"))
        return on_auth(im, e);
    if (in_bucket(e, "alarm"))
        return on_alarm(im, e);
    return 0;
}

int import__db_write(struct import *im)
{
    CHECK(im != NULL && im->b != NULL);
    snprintf(im->path, sizeof im->path, "%s/snap/db", im->src);
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_file(im->path, &r);
    if (rc == 0)
        rc = bbolt_reader_walk(r, on_entry, im);
    if (rc == ERR_BBOLT_CORRUPT && r != NULL)
        bbolt_fault(im, r);
    bbolt_reader_free(r);
    if (rc != 0)
        return rc;
    mvcc_batch_import_rev(im->b, im->compact > im->last_rev ? im->compact
                                                             : im->last_rev);
    if (im->compact > 0)
        rc = mvcc_compact(im->b, im->compact);
    for (bool more = rc == 0 && im->compact > 0; more;) {
        rc = mvcc_compact_step(im->b, 100000, &more);
        if (rc != 0)
            break;
    }
    CHECK(rc <= 0);
    return rc;
}
