/*
 * snapshot_etcd.c - the store as an etcd 3.4 bbolt database
 * (server.h server_snapshot_etcd), for Maintenance.Snapshot.
 *
 * One LMDB read txn (an mvcc read, inside the store gate) gives a
 * consistent point in time; the member keeps applying and serving
 * meanwhile (LMDB readers never block the writer; the store only keeps
 * the pages the txn sees until it ends).  The database is written in two
 * passes over that same txn (bbolt.h: the plan pass counts pages, so the
 * size is known before the first byte, as etcd knows its file's size).
 *
 * etcd 3.4's buckets and records, in bbolt's order of bucket names:
 *   alarm            key: marshaled etcdserverpb.AlarmMember, value empty
 *   auth             "authEnabled" -> 1 byte 1 while auth is enabled
 *                    (absent otherwise: a fresh etcd has none, cetcd does
 *                    not tell "disabled" from "never enabled");
 *                    "authRevision" -> u64 BE, the auth store's revision
 *                    (1 when cetcd's bucket has none, as a fresh etcd)
 *   authRoles        name -> authpb.Role    \ cetcd's "auth" bucket's
 *   authUsers        name -> authpb.User    / records, the same bytes
 *   cluster          "clusterVersion" -> "3.4.0"
 *   key              mvcc_etcd_walk (revision -> mvccpb.KeyValue)
 *   lease            id (u64 BE) -> leasepb.Lease {1 ID, 2 TTL,
 *                    3 RemainingTTL when checkpointed}
 *   members          id in lower-case hex -> etcd's membership.Member as
 *                    Go's encoding/json writes it
 *   members_removed  id in hex -> "removed"
 *   meta             "consistent_index" -> u64 BE; "finishedCompactRev"
 *                    and "scheduledCompactRev" -> the compact revision as
 *                    a revision key (main BE, '_', sub 0) when compacted
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbolt/bbolt.h"
#include "mvcc/mvcc.h"
#include "server/members.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/varint.h"

#define CLUSTER_VERSION "3.4.0"
/* A members-bucket entry this long or longer is refused (URLs are
 * bounded far below it by the member change checks). */
#define MEMBER_JSON_MAX (1u << 20)

/* One export. */
struct export {
    struct server *s;
    struct mvcc_read *r;
    struct backend_txn *txn;   /* r's */
    struct bbolt_writer *w;    /* the current pass */
    const struct server_snapshot_sink *sink;
    uint64_t polls;            /* records since the start (on_key) */
};

/* A sorted record of a small bucket (alarm, members, members_removed). */
struct rec {
    char key[40];      /* hex id, or marshaled AlarmMember */
    size_t key_len;
    char *val;         /* owned (mem_malloc), or NULL */
    size_t val_len;
};

static int rec_cmp(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c != 0)
        return c;
    return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

/* Sorts and writes n records as bucket name; frees their values. */
static int put_recs(struct export *x, const char *name, struct rec *v,
                    size_t n, int rc)
{
    if (rc == 0)
        qsort(v, n, sizeof *v, rec_cmp);
    if (rc == 0)
        rc = bbolt_writer_bucket_begin(x->w, name, strlen(name));
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && (i == 0 || rec_cmp(&v[i - 1], &v[i]) != 0))
            rc = bbolt_writer_put(x->w, v[i].key, v[i].key_len, v[i].val,
                                  v[i].val_len);
        mem_free(v[i].val);
    }
    if (rc == 0)
        rc = bbolt_writer_bucket_end(x->w);
    return rc;
}

/* --- alarm ---------------------------------------------------------------- */

static int bucket_alarm(struct export *x)
{
    struct rec v[SERVER_ALARMS_MAX];
    size_t n = 0;
    struct backend_cursor *c;
    int rc = backend_cursor_open(x->txn, x->s->alarms.bucket, &c);
    if (rc != 0)
        return rc;
    struct backend_val k, val;
    for (rc = backend_cursor_first(c, &k, &val); rc == 0 && n < SERVER_ALARMS_MAX;
         rc = backend_cursor_next(c, &k, &val)) {
        struct server_alarm a;
        if (server__alarm_key_decode(k.data, k.len, &a) != 0)
            continue; /* the alarm list skips it too */
        v[n] = (struct rec){0};
        uint8_t *p = (uint8_t *)v[n].key;
        size_t len = 0;
        p[len++] = 1 << 3; /* memberID */
        len += varint_put(p + len, a.member_id);
        p[len++] = 2 << 3; /* alarm */
        len += varint_put(p + len, a.type);
        v[n++].key_len = len;
    }
    backend_cursor_close(c);
    if (rc == ERR_NOTFOUND || rc == 0)
        rc = 0;
    return put_recs(x, "alarm", v, n, rc);
}

/* --- members ---------------------------------------------------------------- */

struct jbuf {
    char *p;
    size_t len, cap;
    int err;
};

static void jput(struct jbuf *b, const char *s, size_t n)
{
    if (b->err != 0)
        return;
    if (b->len + n > MEMBER_JSON_MAX) {
        b->err = ERR_TOO_LARGE;
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *p = mem_realloc(b->p, cap);
        if (p == NULL) {
            b->err = ERR_NOMEM;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void jlit(struct jbuf *b, const char *s)
{
    jput(b, s, strlen(s));
}

/* A JSON string as Go's encoding/json writes it (HTML-safe escapes). */
static void jstr(struct jbuf *b, const char *s)
{
    jput(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            jput(b, esc, 2);
        } else if (*c == '\n' || *c == '\r' || *c == '\t') {
            esc[0] = '\\';
            esc[1] = *c == '\n' ? 'n' : *c == '\r' ? 'r' : 't';
            jput(b, esc, 2);
        } else if (*c < 0x20 || *c == '<' || *c == '>' || *c == '&') {
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            jput(b, esc, 6);
        } else {
            jput(b, (const char *)c, 1);
        }
    }
    jput(b, "\"", 1);
}

static void jstrs(struct jbuf *b, char **v, size_t n)
{
    if (n == 0) {
        jlit(b, "null"); /* Go marshals a nil slice so */
        return;
    }
    jput(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            jput(b, ",", 1);
        jstr(b, v[i]);
    }
    jput(b, "]", 1);
}

/* etcd's membership.Member: {"id", "peerURLs", "isLearner" (if set),
 * "name" (if set), "clientURLs" (if any)}. */
static int member_json(const Etcdserverpb__Member *m, struct rec *out)
{
    struct jbuf b = {0};
    char num[32];
    snprintf(num, sizeof num, "%" PRIu64, m->id);
    jlit(&b, "{\"id\":");
    jlit(&b, num);
    jlit(&b, ",\"peerURLs\":");
    jstrs(&b, m->peerurls, m->n_peerurls);
    if (m->islearner)
        jlit(&b, ",\"isLearner\":true");
    if (m->name != NULL && m->name[0] != '\0') {
        jlit(&b, ",\"name\":");
        jstr(&b, m->name);
    }
    if (m->n_clienturls > 0) {
        jlit(&b, ",\"clientURLs\":");
        jstrs(&b, m->clienturls, m->n_clienturls);
    }
    jput(&b, "}", 1);
    if (b.err != 0) {
        mem_free(b.p);
        return b.err;
    }
    out->key_len = (size_t)snprintf(out->key, sizeof out->key, "%" PRIx64,
                                    m->id);
    out->val = b.p;
    out->val_len = b.len;
    return 0;
}

static int bucket_members(struct export *x, bool removed)
{
    enum { MAX = SERVER_MEMBERS_MAX + SERVER_REMOVED_MAX };
    struct rec *v = mem_calloc(MAX, sizeof *v);
    if (v == NULL)
        return ERR_NOMEM;
    size_t n = 0;
    struct backend_cursor *c = NULL;
    int rc = backend_cursor_open(
        x->txn, removed ? x->s->ms->b_removed : x->s->ms->b_members, &c);
    if (rc != 0) {
        mem_free(v);
        return rc;
    }
    struct backend_val k, val;
    for (rc = backend_cursor_first(c, &k, &val); rc == 0 && n < MAX;
         rc = backend_cursor_next(c, &k, &val)) {
        if (k.len != 8)
            continue; /* the ids record ("meta") */
        uint64_t id = server__be64_get(k.data);
        if (removed) {
            v[n].key_len = (size_t)snprintf(v[n].key, sizeof v[n].key,
                                            "%" PRIx64, id);
            v[n].val = mem_dup("removed", 7);
            v[n].val_len = 7;
            if (v[n++].val == NULL)
                rc = ERR_NOMEM;
            continue;
        }
        Etcdserverpb__Member *pb =
            etcdserverpb__member__unpack(NULL, val.len, val.data);
        if (pb == NULL) {
            rc = ERR_CORRUPT;
            break;
        }
        rc = member_json(pb, &v[n]);
        n += rc == 0;
        etcdserverpb__member__free_unpacked(pb, NULL);
    }
    backend_cursor_close(c);
    rc = rc == ERR_NOTFOUND ? 0 : rc;
    rc = put_recs(x, removed ? "members_removed" : "members", v, n, rc);
    mem_free(v);
    return rc;
}

/* --- lease, key, meta, fixed buckets --------------------------------------- */

static int bucket_lease(struct export *x)
{
    struct backend_cursor *c;
    int rc = bbolt_writer_bucket_begin(x->w, "lease", 5);
    if (rc == 0)
        rc = backend_cursor_open(x->txn, x->s->leases.bucket, &c);
    if (rc != 0)
        return rc;
    struct backend_val k, v;
    for (rc = backend_cursor_first(c, &k, &v); rc == 0;
         rc = backend_cursor_next(c, &k, &v)) {
        struct server_lease l;
        if ((rc = server__lease_decode(k.data, k.len, v.data, v.len, &l)) != 0)
            break;
        uint8_t pb[40];
        size_t n = 0;
        pb[n++] = 1 << 3;
        n += varint_put(pb + n, (uint64_t)l.id);
        pb[n++] = 2 << 3;
        n += varint_put(pb + n, (uint64_t)l.ttl);
        if (l.remaining != 0) {
            pb[n++] = 3 << 3;
            n += varint_put(pb + n, (uint64_t)l.remaining);
        }
        if ((rc = bbolt_writer_put(x->w, k.data, k.len, pb, n)) != 0)
            break;
    }
    backend_cursor_close(c);
    if (rc == ERR_NOTFOUND)
        rc = bbolt_writer_bucket_end(x->w);
    return rc;
}

static int on_key(void *arg, const uint8_t *key, size_t key_len,
                  const uint8_t *val, size_t val_len)
{
    struct export *x = arg;
    if ((++x->polls & 255) == 0) {
        if (atomic_load(&x->s->stopping))
            return ERR_STOPPED;
        if (x->sink->cancelled != NULL && x->sink->cancelled(x->sink->ctx))
            return ERR_CLOSED;
    }
    return bbolt_writer_put(x->w, key, key_len, val, val_len);
}

static int bucket_simple(struct export *x, const char *name, const char *key,
                         const void *val, size_t val_len)
{
    int rc = bbolt_writer_bucket_begin(x->w, name, strlen(name));
    if (rc == 0 && key != NULL)
        rc = bbolt_writer_put(x->w, key, strlen(key), val, val_len);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(x->w);
    return rc;
}

static int bucket_meta(struct export *x)
{
    uint8_t ci[8], comp[17] = {0};
    server__be64_put(ci, mvcc_read_consistent_index(x->r));
    mvcc_rev c = mvcc_read_compact_rev(x->r);
    server__be64_put(comp, (uint64_t)c);
    comp[8] = '_';
    int rc = bbolt_writer_bucket_begin(x->w, "meta", 4);
    if (rc == 0)
        rc = bbolt_writer_put(x->w, "consistent_index", 16, ci, 8);
    if (rc == 0 && c > 0)
        rc = bbolt_writer_put(x->w, "finishedCompactRev", 18, comp, 17);
    if (rc == 0 && c > 0)
        rc = bbolt_writer_put(x->w, "scheduledCompactRev", 19, comp, 17);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(x->w);
    return rc;
}

/* --- auth ------------------------------------------------------------------
 * From the same read txn as the rest: cetcd's "auth" bucket (auth/auth.h
 * "records") holds etcd's records under other keys. */

static int auth_get(struct export *x, const char *key, struct backend_val *v)
{
    int rc = backend_get(x->txn, x->s->auth.bucket, key, strlen(key), v);
    return rc == ERR_NOTFOUND ? 1 : rc;
}

static int bucket_auth(struct export *x)
{
    static const uint8_t one = 1, rev1[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    struct backend_val en, rev;
    int rc = bbolt_writer_bucket_begin(x->w, "auth", 4);
    int has_en = rc == 0 ? auth_get(x, "enabled", &en) : rc;
    int has_rev = has_en >= 0 ? auth_get(x, "revision", &rev) : has_en;
    if (has_rev < 0)
        return has_rev;
    if (has_en == 0 && en.len == 1 && ((const uint8_t *)en.data)[0] == 1)
        rc = bbolt_writer_put(x->w, "authEnabled", 11, &one, 1);
    if (rc == 0 && has_rev == 0 && rev.len == 8)
        rc = bbolt_writer_put(x->w, "authRevision", 12, rev.data, 8);
    else if (rc == 0)
        rc = bbolt_writer_put(x->w, "authRevision", 12, rev1, 8);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(x->w);
    return rc;
}

/* Bucket name from cetcd's records "<prefix><name>", in name order. */
static int bucket_auth_names(struct export *x, const char *name,
                             const char *prefix)
{
    size_t pl = strlen(prefix);
    struct backend_cursor *c;
    int rc = bbolt_writer_bucket_begin(x->w, name, strlen(name));
    if (rc == 0)
        rc = backend_cursor_open(x->txn, x->s->auth.bucket, &c);
    if (rc != 0)
        return rc;
    struct backend_val k, v;
    for (rc = backend_cursor_seek(c, prefix, pl, &k, &v);
         rc == 0 && k.len > pl && memcmp(k.data, prefix, pl) == 0;
         rc = backend_cursor_next(c, &k, &v))
        if ((rc = bbolt_writer_put(x->w, (const uint8_t *)k.data + pl,
                                   k.len - pl, v.data, v.len)) != 0)
            break;
    backend_cursor_close(c);
    if (rc == 0 || rc == ERR_NOTFOUND)
        rc = bbolt_writer_bucket_end(x->w);
    return rc;
}

/* One pass: every bucket, in name order. */
static int feed(struct export *x)
{
    int rc = bucket_alarm(x);
    if (rc == 0)
        rc = bucket_auth(x);
    if (rc == 0)
        rc = bucket_auth_names(x, "authRoles", "role/");
    if (rc == 0)
        rc = bucket_auth_names(x, "authUsers", "user/");
    if (rc == 0)
        rc = bucket_simple(x, "cluster", "clusterVersion", CLUSTER_VERSION,
                           strlen(CLUSTER_VERSION));
    if (rc == 0)
        rc = bbolt_writer_bucket_begin(x->w, "key", 3);
    if (rc == 0)
        rc = mvcc_etcd_walk(x->r, on_key, x);
    if (rc == 0)
        rc = bbolt_writer_bucket_end(x->w);
    if (rc == 0)
        rc = bucket_lease(x);
    if (rc == 0)
        rc = bucket_members(x, false);
    if (rc == 0)
        rc = bucket_members(x, true);
    if (rc == 0)
        rc = bucket_meta(x);
    return rc;
}

/* The write pass's sink: the caller's, stopping with the server. */
static int sink_write(void *ctx, const void *buf, size_t len)
{
    struct export *x = ctx;
    if (atomic_load(&x->s->stopping))
        return ERR_STOPPED;
    return x->sink->write(x->sink->ctx, buf, len);
}

/* Both passes on x's read txn. */
static int export_run(struct export *x)
{
    struct bbolt_plan plan;
    int rc = bbolt_writer_create(NULL, (struct bbolt_sink){0}, &x->w);
    if (rc == 0)
        rc = feed(x);
    if (rc == 0)
        rc = bbolt_writer_finish(x->w, &plan);
    bbolt_writer_free(x->w);
    x->w = NULL;
    if (rc == 0)
        rc = x->sink->begin(x->sink->ctx, plan.pages * BBOLT_PAGE_SIZE);
    if (rc == 0)
        rc = bbolt_writer_create(&plan, (struct bbolt_sink){sink_write, x},
                                 &x->w);
    if (rc == 0)
        rc = feed(x);
    if (rc == 0)
        rc = bbolt_writer_finish(x->w, NULL);
    bbolt_writer_free(x->w);
    x->w = NULL;
    return rc;
}

int server_snapshot_etcd(struct server *s,
                         const struct server_snapshot_sink *sink)
{
    CHECK(s != NULL && sink != NULL);
    CHECK(sink->begin != NULL && sink->write != NULL);
    if (atomic_load(&s->stopping))
        return ERR_STOPPED;
    struct export x = {.s = s, .sink = sink};
    server__store_enter(s);
    int rc = mvcc_read_begin(s->mvcc, &x.r);
    if (rc == 0) {
        x.txn = mvcc_read_backend_txn(x.r);
        rc = export_run(&x);
        mvcc_read_end(x.r);
    }
    server__store_leave(s);
    return rc;
}
