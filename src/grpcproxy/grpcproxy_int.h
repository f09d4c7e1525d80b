/*
 * grpcproxy_int.h - what the grpcproxy module's files share.  Not a
 * public interface: grpcproxy.h is the module's manual.
 *
 * Two pure parts, without I/O or threads of their own (unit-tested in
 * tests/unit/test_grpcproxy_*.c):
 *   cache.c, cache_ivl.c, cache_txn.c  the KV proxy's cache of
 *            serializable Range replies (its interval index, its txns)
 *   ns.c, ns_msgs.c  --namespace: rewriting of request and reply bytes
 * and the proxy around them:
 *   proxy.c  start and close, the method table, the upstream thread
 *   unary.c  unary calls; stream.c  streams and their flow control
 *   cluster.c  MemberList; register.c  the --resolver-prefix registration
 *   http.c   /health and /metrics
 */
#ifndef CETCD_GRPCPROXY_INT_H
#define CETCD_GRPCPROXY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "cetcd/cetcd.h"
#include "dial/dial.h"
#include "rpc/rpc.h"

/* --- cache.c ------------------------------------------------------------
 *
 * etcd 3.4's proxy cache (proxy/grpcproxy/cache/store.go, kv.go): an LRU
 * of at most max_entries Range replies keyed by the request with
 * serializable set; every cached revision-0 request's [key, range_end) is
 * kept in an interval index, so a write through the proxy drops the
 * entries whose interval it touches (fixed-revision reads never go stale
 * and are not indexed); a compaction to rev drops entries below it and
 * later lookups of revisions in (0, rev) answer COMPACTED; as in etcd,
 * only requests above the compacted revision (-1 at first) are added, so
 * after a compaction revision-0 reads are not cached any more.  On
 * purpose, and only ever dropping more than etcd: a range end of "\0"
 * reaches to the end of the keyspace (etcd's index never matches it and
 * serves stale `--from-key` replies), writes in nested txns invalidate,
 * and undecodable writes empty the cache (cache.c's header has the
 * details).  Every function takes the raw protobuf bytes of the messages
 * as they cross the proxy, and is safe from any thread (one mutex).
 * Memory: the entries (struct, key, range, reply bytes), bounded by
 * max_entries and max_bytes. */

#define GP_CACHE_MAX_ENTRIES 2048          /* etcd's DefaultMaxEntries */
#define GP_CACHE_MAX_BYTES (64u << 20)     /* ours: replies held at most */

struct gp_cache;

/* gp_cache_open makes an empty cache (0 = the defaults above).  Returns 0
 * or ERR_NOMEM. */
int gp_cache_open(size_t max_entries, size_t max_bytes,
                  struct gp_cache **out);
void gp_cache_close(struct gp_cache *c); /* NULL is fine */

/* What gp_cache_range_lookup found. */
enum gp_cache_hit {
    GP_CACHE_NONE,      /* not serializable, undecodable: ask upstream */
    GP_CACHE_MISS,      /* serializable, not cached: ask upstream */
    GP_CACHE_HIT,       /* *resp_out, *len_out: a copy (free()) */
    GP_CACHE_COMPACTED, /* answer OUT_OF_RANGE "etcdserver: mvcc: required
                           revision has been compacted" */
};

/* gp_cache_range_lookup: a RangeRequest arriving at the proxy.  who names
 * the caller (its "token" metadata, "" for none): a reply is only served
 * to the caller whose request cached it.  Better than etcd 3.4.23, whose
 * cache serves a reply cached for root to any caller, one without a token
 * too (a read around auth). */
enum gp_cache_hit gp_cache_range_lookup(struct gp_cache *c, const char *who,
                                        const uint8_t *req, size_t len,
                                        uint8_t **resp_out,
                                        size_t *len_out);
/* gp_cache_range_done: the upstream's RangeResponse to req (any Range,
 * serializable or not, is cached as the serializable request). */
void gp_cache_range_done(struct gp_cache *c, const char *who,
                         const uint8_t *req,
                         size_t req_len, const uint8_t *resp,
                         size_t resp_len);
/* gp_cache_put / gp_cache_delete: a PutRequest / DeleteRangeRequest
 * arriving (etcd invalidates before sending it on). */
void gp_cache_put(struct gp_cache *c, const uint8_t *req, size_t len);
void gp_cache_delete(struct gp_cache *c, const uint8_t *req, size_t len);
/* gp_cache_txn_done: a TxnRequest and the upstream's TxnResponse: every
 * compare's range invalidated, then the taken branch's ops in order: puts
 * and deletes invalidated, ranges cached with the response of the same
 * index (etcd's kv.go); nested txns: every write of either branch
 * invalidated (etcd does not look into them), their ranges not cached. */
void gp_cache_txn_done(struct gp_cache *c, const char *who,
                       const uint8_t *req,
                       size_t req_len, const uint8_t *resp,
                       size_t resp_len);
/* gp_cache_compact_done: a CompactionRequest that succeeded upstream. */
void gp_cache_compact_done(struct gp_cache *c, const uint8_t *req,
                           size_t len);
/* Counters for /metrics (etcd_grpc_proxy_cache_*). */
struct gp_cache_stats {
    uint64_t keys, hits, misses;
};
void gp_cache_stats(struct gp_cache *c, struct gp_cache_stats *out);

/* cache.c's internals, shared with cache_txn.c (a Txn's effect).  The
 * functions taking a locked cache run between gp__cache_lock and
 * gp__cache_unlock. */
struct gp__cache_entry;               /* one cached reply */
struct Etcdserverpb__RangeRequest;
void gp__cache_lock(struct gp_cache *c);
void gp__cache_unlock(struct gp_cache *c);
/* gp__cache_range_entry builds the entry of reply resp to request r
 * (keyed as serializable; r is restored); NULL when out of memory (the
 * reply is then not cached: nothing goes stale).  Needs no lock. */
struct gp__cache_entry *
gp__cache_range_entry(struct Etcdserverpb__RangeRequest *r, const char *who,
                      const uint8_t *resp, size_t resp_len);
/* gp__cache_add (locked) takes e: etcd's Add, then the bounds. */
void gp__cache_add(struct gp_cache *c, struct gp__cache_entry *e);
/* gp__cache_invalidate (locked) drops every revision-0 entry whose
 * interval overlaps [key, end) (a single key when end is empty, every key
 * from key on when end is "\0"). */
void gp__cache_invalidate(struct gp_cache *c, const ProtobufCBinaryData *key,
                          const ProtobufCBinaryData *end);
/* gp__cache_clear (locked) drops every entry. */
void gp__cache_clear(struct gp_cache *c);

/* cache_ivl.c: cache.c's interval index (internal to the cache).
 *
 * A bound of a half-open key interval: the bytes p[0..len) (borrowed),
 * the same followed by one zero byte (the end of a single key's interval,
 * etcd's "point"), or past every key (a range_end of "\0"). */
enum gp__bound_kind {
    GP__BOUND_KEY,  /* p[0..len) */
    GP__BOUND_SUCC, /* p[0..len) + "\0" */
    GP__BOUND_INF,  /* above every key; p and len unused */
};
struct gp__bound {
    const uint8_t *p;         /* the bytes (NULL fine when len is 0) */
    size_t len;               /* how many */
    enum gp__bound_kind kind; /* how to read them */
};
/* gp__bound_cmp: -1, 0 or 1 as a sorts before, with or after b (keys
 * compare bytewise, a prefix before its extensions). */
int gp__bound_cmp(const struct gp__bound *a, const struct gp__bound *b);
/* gp__bound_overlap: [b1, e1) and [b2, e2) share a key. */
bool gp__bound_overlap(const struct gp__bound *b1, const struct gp__bound *e1,
                       const struct gp__bound *b2, const struct gp__bound *e2);
/* One interval in the index, embedded in what it indexes.  Owned by the
 * cache's mutex holder. */
struct gp__ivl_node {
    struct gp__ivl_node *left, *right; /* the AVL tree's children */
    struct gp__bound begin, end;       /* the interval [begin, end) */
    uint64_t seq;                      /* orders equal begins; unique */
    struct gp__bound max;              /* greatest end in this subtree */
    int height;                        /* of this subtree, leaves 1 */
};
/* gp__ivl_insert links n (begin, end and seq set; seq unique in the
 * tree) into the tree at *root; gp__ivl_remove unlinks n, which must be
 * in it.  Neither allocates: they cannot fail. */
void gp__ivl_insert(struct gp__ivl_node **root, struct gp__ivl_node *n);
void gp__ivl_remove(struct gp__ivl_node **root, struct gp__ivl_node *n);
/* gp__ivl_stab calls visit(node, arg) on every node of the tree t whose
 * interval overlaps [qb, qe), in begin order.  visit must not change the
 * tree (collect, then remove). */
typedef void gp__ivl_visit_fn(struct gp__ivl_node *n, void *arg);
void gp__ivl_stab(struct gp__ivl_node *t, const struct gp__bound *qb,
                  const struct gp__bound *qe, gp__ivl_visit_fn *visit,
                  void *arg);

/* --- ns.c ---------------------------------------------------------------
 *
 * --namespace as etcd's clientv3/namespace (KV, Watch, Lease) plus Lock
 * and Election (etcd's proxy leaves those raw; see grpcproxy.h): keys and
 * range ends of requests get the prefix (a range end of "\0", every key
 * from key on, becomes the prefix's end; an empty one stays empty), keys
 * of replies and events lose it; LeaseTimeToLive drops the keys of other
 * namespaces.  Requests that clientv3/namespace refuses (an empty key in
 * a top-level Range, Put or DeleteRange) are refused as etcd's proxy
 * refuses them: UNKNOWN "etcdserver: key is not provided".  An empty
 * Unlock or LeaderKey key stays empty.  Methods without keys are SAME,
 * undecoded.  Undecodable bytes: INTERNAL "grpc: error unmarshalling
 * request" / "grpc: failed to unmarshal the received message"; txns
 * nested deeper than GP_TXN_DEPTH_MAX: INVALID_ARGUMENT (a request) or
 * INTERNAL (a reply); out of memory: RESOURCE_EXHAUSTED.  Re-encoding
 * keeps every field, unknown ones included (protobuf-c 1.4 keeps them);
 * ns.c's header says what can change in the layout. */

/* What a rewrite did. */
enum gp_ns_result {
    GP_NS_SAME = 0,  /* nothing to change: send the bytes as they are */
    GP_NS_NEW,       /* *out, *out_len: new bytes (free()) */
    GP_NS_ERROR,     /* refuse the call: *code_out, *msg_out (static) */
};

/* gp_ns_request rewrites the request (or, for streams, the client
 * message) of method ("/etcdserverpb.KV/Range", "/etcdserverpb.Watch/
 * Watch", ...) for namespace prefix ns (ns_len > 0). */
enum gp_ns_result gp_ns_request(const uint8_t *ns, size_t ns_len,
                                const char *method, const uint8_t *in,
                                size_t len, uint8_t **out, size_t *out_len,
                                int *code_out, const char **msg_out);
/* gp_ns_reply rewrites a reply (or stream message from upstream) of
 * method.  GP_NS_ERROR for undecodable bytes (INTERNAL).  Both are pure
 * and thread-safe; ns is borrowed for the call. */
enum gp_ns_result gp_ns_reply(const uint8_t *ns, size_t ns_len,
                              const char *method, const uint8_t *in,
                              size_t len, uint8_t **out, size_t *out_len,
                              int *code_out, const char **msg_out);

/* ns.c's internals, shared with ns_msgs.c (the rewrite of each message)
 * and cache_txn.c (the check before decoding). */

/* GP_TXN_DEPTH_MAX: the deepest txn nesting decoded (a txn with no txn in
 * it is 1).  protobuf-c's decoder recurses without a limit (8000 levels,
 * 58 KiB of bytes, fill an 8 MiB stack); the member refuses txns nested
 * deeper than about 1000 too (api/kv.c), and etcd's --max-txn-ops budget
 * (one op per level, 128 by default) refuses them far sooner.  A deeper
 * request is refused by ns.c with etcd's INVALID_ARGUMENT "too many
 * operations in txn request" and empties the cache (cache.c). */
#define GP_TXN_DEPTH_MAX 1000
#define GP__PB_FIELD_MAX 536870911 /* 2^29 - 1, protobuf's last field */
/* gp__pb_check walks the wire bytes of a message of type d before
 * protobuf-c decodes them: 0, ERR_CORRUPT when they are not protobuf as
 * Go reads it (cut fields, groups, field number 0 or above
 * GP__PB_FIELD_MAX: protobuf-c takes some of those and re-encodes them as
 * bytes it refuses itself), ERR_TOO_LARGE when txns nest deeper than
 * GP_TXN_DEPTH_MAX.  Allocates nothing; recursion depth bounded by the
 * limit. */
int gp__pb_check(const ProtobufCMessageDescriptor *d, const uint8_t *b,
                 size_t len);

/* One rewrite: the prefix, and what happened (owned by the caller's
 * stack). */
struct gp__ns {
    const uint8_t *ns; /* the prefix (borrowed) */
    size_t ns_len;     /* > 0 */
    bool changed;      /* a byte of the message changed */
    int err;           /* ERR_NOMEM when a copy failed */
    int code;          /* with msg: refuse the call with this gRPC code */
    const char *msg;   /* static, or NULL */
};
struct Mvccpb__KeyValue;
/* A message's rewrite (m: the decoded message of the method's direction;
 * it may refuse with gp__ns_refuse). */
typedef void gp__ns_fn(struct gp__ns *x, ProtobufCMessage *m);
/* gp__ns_prefix: key becomes ns + key (empty keys too). */
void gp__ns_prefix(struct gp__ns *x, ProtobufCBinaryData *key);
/* gp__ns_prefix_end: a range end as clientv3/namespace prefixes it (empty
 * stays, "\0" becomes the namespace's end, others get the prefix). */
void gp__ns_prefix_end(struct gp__ns *x, ProtobufCBinaryData *end);
/* gp__ns_strip drops the prefix from key where key starts with it; false
 * (key untouched) where it does not. */
bool gp__ns_strip(struct gp__ns *x, ProtobufCBinaryData *key);
void gp__ns_strip_kv(struct gp__ns *x, struct Mvccpb__KeyValue *kv);
/* gp__ns_refuse: the call is refused with code and msg (static; the first
 * refusal wins). */
void gp__ns_refuse(struct gp__ns *x, int code, const char *msg);
/* ns_msgs.c: the request (_req) and reply (_resp) rewrites. */
gp__ns_fn gp__ns_range_req, gp__ns_range_resp, gp__ns_put_req,
    gp__ns_put_resp, gp__ns_delete_req, gp__ns_delete_resp, gp__ns_txn_req,
    gp__ns_txn_resp, gp__ns_watch_req, gp__ns_watch_resp, gp__ns_ttl_resp,
    gp__ns_lock_req, gp__ns_lock_resp, gp__ns_unlock_req,
    gp__ns_campaign_req, gp__ns_campaign_resp, gp__ns_proclaim_req,
    gp__ns_resign_req, gp__ns_leader_req, gp__ns_leader_resp;

/* --- the proxy (proxy.c, unary.c, stream.c, cluster.c, http.c) ---------- */

/* What the proxy does with a method beyond passing it on. */
enum gp_kind {
    GP_PLAIN = 0,      /* bytes up, bytes back */
    GP_RANGE,          /* KV.Range: the cache */
    GP_PUT,            /* KV.Put: invalidates */
    GP_DELETE,         /* KV.DeleteRange: invalidates */
    GP_TXN,            /* KV.Txn: invalidates and caches */
    GP_COMPACT,        /* KV.Compact: the cache's compaction */
    GP_MEMBER_LIST,    /* Cluster.MemberList: the proxies (cluster.c) */
    GP_MEMBER_PROMOTE, /* Cluster.MemberPromote: etcd's proxy refuses it */
};

/* One method the proxy serves.  stream: served through stream.c (the
 * streaming methods, and Lock and Campaign, which may wait for ever and
 * must be cancelled upstream when their client leaves). */
struct gp_method {
    const char *path;
    enum gp_kind kind;
    bool stream;
    enum rpc_method_type wire;
};

extern const struct gp_method gp_methods[];
extern const size_t gp_methods_n;

/* A registration's context: the proxy and the method. */
struct gp_route {
    struct grpcproxy *p;
    const struct gp_method *m;
};

/* The scheme of an endpoint: none ("host:port": TLS when the client has
 * TLS material), http://, https://. */
enum gp_scheme { GP_SCHEME_NONE, GP_SCHEME_HTTP, GP_SCHEME_HTTPS };

struct grpcproxy {
    struct rpc_server *srv;         /* the client side */
    struct rpc_server *metrics_srv; /* --metrics-addr, or NULL */
    struct cetcd_client *cli;       /* the upstream side */
    struct cetcd_async_queue *q;    /* upstream completions */
    pthread_t q_thread;             /* runs q */
    bool q_started;
    atomic_bool stopping;           /* close has begun */
    struct gp_route *routes;        /* one per gp_methods entry */
    struct gp_cache *cache;
    uint8_t *ns;                    /* --namespace bytes, or NULL */
    size_t ns_len;
    size_t max_send;                /* --max-send-bytes */
    char *advertise;                /* --advertise-client-url, or NULL */
    char *prefix;                   /* --resolver-prefix, or NULL */
    int ttl;                        /* --resolver-ttl */
    char hostname[256];             /* os.Hostname() */
    char *metrics_target;           /* the first endpoint, for /metrics */
    enum gp_scheme metrics_scheme;  /* its scheme */
    struct dial_tls *metrics_tls;   /* the client's TLS material for it
                                       (NULL: none given) */
    /* register.c: the registration's thread. */
    pthread_t reg_thread;
    bool reg_started;
    pthread_mutex_t reg_mu;         /* with reg_cv: the thread's sleeps */
    bool reg_stop;                  /* under reg_mu: close has begun */
    pthread_cond_t reg_cv;
};

/* gp_md_fill: the metadata passed up ("token", "hasleader") from a
 * lookup function over the client's call or stream; the values are
 * copied into buf (cap bytes).  Returns the number of pairs in md. */
size_t gp_md_fill(const char *(*get)(const void *obj, const char *key,
                                     size_t *len),
                  const void *obj, struct cetcd_md *md, char *buf,
                  size_t cap);

/* gp_unary: the handler of every unary method not served as a stream
 * (ctx: its struct gp_route). */
void gp_unary(struct rpc_call *call, const uint8_t *req, size_t len,
              void *ctx);

/* gp_stream_ops: the callbacks of the methods served as streams. */
extern const struct rpc_stream_ops gp_stream_ops;
extern const struct rpc_stream_ops gp_stream_ops_unary;
extern const struct rpc_stream_ops gp_stream_ops_server;

/* gp_ns_apply runs --namespace over one message of method (a reply or
 * server message when reply, else a request or client message): with no
 * namespace or nothing to change it leaves *msg and *len; with a rewrite it
 * points them at *out (the caller frees it).  False when the message is
 * refused: *code_out and *msg_out say how to end the call. */
bool gp_ns_apply(const struct grpcproxy *p, const char *method, bool reply,
                 const uint8_t **msg, size_t *len, uint8_t **out,
                 int *code_out, const char **msg_out);

/* gp_too_big: a message above --max-send-bytes gets grpc-go's client
 * error in msg (cap bytes); returns true then. */
bool gp_too_big(const struct grpcproxy *p, size_t len, char *msg,
                size_t cap);

/* cluster.c: MemberList's local answer (true: answered or under way);
 * register.c: the registration under --resolver-prefix (start/stop). */
bool gp_member_list(struct grpcproxy *p, struct rpc_call *call);
int gp_register_start(struct grpcproxy *p);
void gp_register_stop(struct grpcproxy *p);

/* http.c: /health and /metrics (the rpc server's HTTP handler). */
void gp_http(struct rpc_call *call, const uint8_t *body, size_t len,
             void *ctx);

#endif
