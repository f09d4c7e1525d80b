/*
 * ctl_mirror.c - "make-mirror" as etcdctl 3.4.23 runs it: copy the keys
 * of --prefix (every key without it) at the source's current revision to
 * the destination cluster (under --dest-prefix, or the same prefix, or
 * the root with --no-dest-prefix), then follow the source with a watch
 * from the next revision and apply each revision's events there in one
 * Txn.  Every 30 s it prints how many keys it has copied so far.  It runs
 * until an error, which it prints and exits 1 with.
 *
 * etcdctl makes every call of make-mirror without a deadline (its gRPC
 * calls then wait for a connection): a cluster that cannot be reached
 * makes it wait, not fail.  The calls here retry while the server cannot
 * be reached.  The destination client has its own TLS flags and never
 * authenticates, as etcdctl's.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl/commands.h"
#include "ctl/ctl_watch.h"
#include "etcdserverpb/rpc.pb-c.h"

/* clientv3/mirror's batch of keys per Range. */
#define MIRROR_BATCH 1000
/* How often the count of keys is printed. */
#define MIRROR_REPORT_S 30

static const char *mm_prefix, *mm_dest_prefix, *mm_cert, *mm_key,
    *mm_cacert;
static bool mm_no_dest_prefix, mm_insecure_tr;

static struct ctl_flag mirror_flags[] = {
    {"prefix", 0, CTL_FLAG_STRING, &mm_prefix, "",
     "Key-value prefix to mirror", false},
    {"dest-prefix", 0, CTL_FLAG_STRING, &mm_dest_prefix, "",
     "destination prefix to mirror a prefix to a different prefix in the "
     "destination cluster",
     false},
    {"no-dest-prefix", 0, CTL_FLAG_BOOL, &mm_no_dest_prefix, "false",
     "mirror key-values to the root of the destination cluster", false},
    {"dest-cert", 0, CTL_FLAG_STRING, &mm_cert, "",
     "Identify secure client using this TLS certificate file for the "
     "destination cluster",
     false},
    {"dest-key", 0, CTL_FLAG_STRING, &mm_key, "",
     "Identify secure client using this TLS key file", false},
    {"dest-cacert", 0, CTL_FLAG_STRING, &mm_cacert, "",
     "Verify certificates of TLS enabled secure servers using this CA "
     "bundle",
     false},
    {"dest-insecure-transport", 0, CTL_FLAG_BOOL, &mm_insecure_tr, "true",
     "Disable transport security for client connections", false},
    CTL_FLAG_END,
};

/* Keys copied and events applied, printed by the reporter thread. */
static atomic_llong total;

/* ------------------------------------------------------------------------
 * The destination client
 * ---------------------------------------------------------------------- */

/* pem_read reads a TLS file whole; exits as Go's open fails. */
static char *pem_read(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        char why[256];
        snprintf(why, sizeof why, "%s", strerror(errno));
        why[0] = (char)tolower((unsigned char)why[0]); /* Go's text */
        ctl_exit(CTL_EXIT_BAD_ARGS, "open %s: %s", path, why);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    if (!m)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}

/* dest_tls is etcdctl's newClientCfg for the --dest-* flags: TLS when a
 * file is given or --dest-insecure-transport=false; NULL: plain text. */
static const struct cetcd_tls *dest_tls(void)
{
    static struct cetcd_tls t;
    bool files = mm_cert[0] || mm_key[0] || mm_cacert[0];
    if ((mm_cert[0] || mm_key[0]) && !(mm_cert[0] && mm_key[0]))
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "KeyFile and CertFile must both be present[key: %s, cert: "
                 "%s]",
                 mm_key, mm_cert);
    if (mm_cert[0]) {
        t.cert_pem = pem_read(mm_cert);
        t.key_pem = pem_read(mm_key);
    }
    if (mm_cacert[0])
        t.ca_pem = pem_read(mm_cacert);
    return files || !mm_insecure_tr ? &t : NULL;
}

static struct cetcd_client *dest_client(const char *endpoint)
{
    struct cetcd_client_opts o = {0};
    struct cetcd_client *c = NULL;
    struct cetcd_status st = {0};
    int64_t dial_ms = ctl_g.dial_timeout_ns / 1000000;
    o.endpoints = endpoint;
    o.dial_timeout_ms = dial_ms < 1 ? 1 : dial_ms > 600000 ? 600000
                                                           : (int)dial_ms;
    o.tls = dest_tls();
    if (cetcd_client_open(&o, &c, &st) != 0)
        ctl_exit(CTL_EXIT_BAD_CONNECTION, "%s", st.message);
    return c;
}

/* ------------------------------------------------------------------------
 * Calls that wait for their server
 * ---------------------------------------------------------------------- */

/* unreachable: the call failed because no connection could be made, so
 * nothing was sent (or, for reads, may be sent again). */
static bool unreachable(const struct cetcd_status *st, bool read)
{
    if (st->code == CETCD_UNAVAILABLE &&
        strncmp(st->message, "cannot connect to ", 18) == 0)
        return true;
    return read && (st->code == CETCD_UNAVAILABLE ||
                    (st->code == CETCD_DEADLINE_EXCEEDED &&
                     strncmp(st->message, "etcdserver: ", 12) != 0));
}

static void pause_retry(void)
{
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
}

/* call runs a unary call until it is answered; a failure that is not
 * "unreachable" ends make-mirror with etcdctl's text. */
static ProtobufCMessage *call(struct cetcd_client *c, const char *method,
                              const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *desc,
                              bool read)
{
    for (;;) {
        ProtobufCMessage *resp = NULL;
        struct cetcd_status st = {0};
        if (cetcd_call_unary(c, method, req, desc, &resp, &st) == 0)
            return resp;
        if (!unreachable(&st, read))
            ctl_exit_status(CTL_EXIT_ERROR, &st);
        pause_retry();
    }
}

static Etcdserverpb__RangeResponse *range(struct cetcd_client *c,
                                          Etcdserverpb__RangeRequest *req)
{
    return (Etcdserverpb__RangeResponse *)call(
        c, "/etcdserverpb.KV/Range", &req->base,
        &etcdserverpb__range_response__descriptor, true);
}

/* ------------------------------------------------------------------------
 * Keys at the destination
 * ---------------------------------------------------------------------- */

/* dest_key is etcdctl's modifyPrefix (strings.Replace of the first
 * --prefix in the key, which starts the key): a new buffer. */
static ProtobufCBinaryData dest_key(const ProtobufCBinaryData *key)
{
    size_t pl = strlen(mm_prefix), dl = strlen(mm_dest_prefix);
    size_t rest = key->len >= pl ? key->len - pl : 0;
    ProtobufCBinaryData out = {dl + rest, malloc(dl + rest + 1)};
    if (!out.data)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    memcpy(out.data, mm_dest_prefix, dl);
    if (rest)
        memcpy(out.data + dl, key->data + (key->len - rest), rest);
    return out;
}

static void dest_put(struct cetcd_client *dc, const Mvccpb__KeyValue *kv)
{
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    req.key = dest_key(&kv->key);
    req.value = kv->value;
    ProtobufCMessage *resp =
        call(dc, "/etcdserverpb.KV/Put", &req.base,
             &etcdserverpb__put_response__descriptor, false);
    protobuf_c_message_free_unpacked(resp, NULL);
    free(req.key.data);
    atomic_fetch_add(&total, 1);
}

/* ------------------------------------------------------------------------
 * The copy (clientv3/mirror's SyncBase)
 * ---------------------------------------------------------------------- */

/* sync_base copies every key of the range at revision rev, in batches. */
static void sync_base(struct cetcd_client *c, struct cetcd_client *dc,
                      int64_t rev, ProtobufCBinaryData key,
                      ProtobufCBinaryData end)
{
    uint8_t *next = NULL;
    for (;;) {
        Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
        req.key = key;
        req.range_end = end;
        req.limit = MIRROR_BATCH;
        req.revision = rev;
        Etcdserverpb__RangeResponse *r = range(c, &req);
        for (size_t i = 0; i < r->n_kvs; i++)
            dest_put(dc, r->kvs[i]);
        bool more = r->more && r->n_kvs > 0;
        if (more) { /* on from the key after the last one */
            const ProtobufCBinaryData *last = &r->kvs[r->n_kvs - 1]->key;
            free(next);
            next = malloc(last->len + 1);
            if (!next)
                ctl_exit(CTL_EXIT_ERROR, "out of memory");
            memcpy(next, last->data, last->len);
            next[last->len] = 0;
            key = (ProtobufCBinaryData){last->len + 1, next};
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
        if (!more)
            break;
    }
    free(next);
}

/* ------------------------------------------------------------------------
 * Following the source (SyncUpdates)
 * ---------------------------------------------------------------------- */

/* The operations of one revision, sent as one Txn. */
struct batch {
    Etcdserverpb__RequestOp *op;         /* n operations */
    Etcdserverpb__RequestOp **opp;       /* pointers to them */
    Etcdserverpb__PutRequest *put;       /* one per operation */
    Etcdserverpb__DeleteRangeRequest *del; /* one per operation */
    size_t n;                            /* operations so far */
};

static void batch_commit(struct cetcd_client *dc, struct batch *b)
{
    if (b->n == 0)
        return;
    Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
    req.n_success = b->n;
    req.success = b->opp;
    ProtobufCMessage *resp =
        call(dc, "/etcdserverpb.KV/Txn", &req.base,
             &etcdserverpb__txn_response__descriptor, false);
    protobuf_c_message_free_unpacked(resp, NULL);
    for (size_t i = 0; i < b->n; i++) {
        free(b->put[i].key.data);
        free(b->del[i].key.data);
    }
    b->n = 0;
}

/* batch_add adds the event's put or delete at the destination. */
static void batch_add(struct batch *b, const struct cetcd_watch_event *ev)
{
    size_t i = b->n;
    ProtobufCBinaryData k = {ev->kv.key_len, (uint8_t *)ev->kv.key};
    Etcdserverpb__RequestOp *op = &b->op[i];
    *op = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
    b->put[i] = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
    b->del[i] = (Etcdserverpb__DeleteRangeRequest)
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    if (ev->type == CETCD_EVENT_PUT) {
        b->put[i].key = dest_key(&k);
        b->put[i].value.data = (uint8_t *)ev->kv.value;
        b->put[i].value.len = ev->kv.value_len;
        op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op->request_put = &b->put[i];
    } else {
        b->del[i].key = dest_key(&k);
        op->request_case =
            ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        op->request_delete_range = &b->del[i];
    }
    b->opp[i] = op;
    b->n++;
    atomic_fetch_add(&total, 1);
}

/* apply sends a response's events, one Txn per revision. */
static void apply(struct cetcd_client *dc,
                  const struct cetcd_watch_response *r)
{
    size_t n = r->events_len + 1;
    struct batch b = {calloc(n, sizeof *b.op), calloc(n, sizeof *b.opp),
                      calloc(n, sizeof *b.put), calloc(n, sizeof *b.del), 0};
    if (!b.op || !b.opp || !b.put || !b.del)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    int64_t last = 0;
    for (size_t i = 0; i < r->events_len; i++) {
        const struct cetcd_watch_event *ev = &r->events[i];
        if (last != 0 && ev->kv.mod_revision > last)
            batch_commit(dc, &b);
        last = ev->kv.mod_revision;
        if (ev->type == CETCD_EVENT_PUT || ev->type == CETCD_EVENT_DELETE)
            batch_add(&b, ev);
    }
    batch_commit(dc, &b);
    free(b.op), free(b.opp), free(b.put), free(b.del);
}

static void on_update(void *ctx, struct ctl_watcher *w,
                      const struct cetcd_watch_response *r, const char *err)
{
    (void)w;
    if (!r) {
        /* etcdctl returns no error when the watch ends and prints
         * "Error: <nil>"; the reason, when there is one, says more */
        ctl_exit(CTL_EXIT_ERROR, "%s",
                 err ? err : "watch is canceled by the server");
    }
    if (r->compact_revision != 0)
        ctl_exit(CTL_EXIT_ERROR,
                 "etcdserver: mvcc: required revision has been compacted");
    apply(ctx, r);
}

/* ------------------------------------------------------------------------
 * The command
 * ---------------------------------------------------------------------- */

/* reporter prints the count every 30 s, as etcdctl's goroutine does. */
static void *reporter(void *arg)
{
    (void)arg;
    for (;;) {
        struct timespec ts = {MIRROR_REPORT_S, 0};
        while (nanosleep(&ts, &ts) != 0)
            ;
        printf("%lld\n", (long long)atomic_load(&total));
        fflush(stdout);
    }
    return NULL;
}

/* current_rev is SyncBase's first Get("foo"): the revision to copy at. */
static int64_t current_rev(struct cetcd_client *c)
{
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    req.key = (ProtobufCBinaryData){3, (uint8_t *)"foo"};
    Etcdserverpb__RangeResponse *r = range(c, &req);
    int64_t rev = r->header ? r->header->revision : 0;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return rev;
}

static void follow(struct cetcd_client *c, struct cetcd_client *dc,
                   int64_t rev, ProtobufCBinaryData key,
                   ProtobufCBinaryData end)
{
    static struct ctl_wengine e;
    e.client = c;
    e.fn = on_update;
    e.ctx = dc;
    ctl_wengine_add(&e, key.data, key.len, end.data, end.len, rev + 1, false,
                  NULL);
    for (;;)
        ctl_wengine_step(&e, -1);
}

static int run(int argc, char **argv)
{
    static uint8_t zero[1], end_buf[4096];
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "make-mirror takes one destination argument");
    struct cetcd_client *dc = dest_client(argv[0]);
    (void)ctl_output_format();
    struct cetcd_client *c = ctl_client();
    pthread_t t;
    if (pthread_create(&t, NULL, reporter, NULL) == 0)
        pthread_detach(t);
    int64_t rev = current_rev(c);
    if (mm_no_dest_prefix && mm_dest_prefix[0])
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "`--dest-prefix` and `--no-dest-prefix` cannot be set at "
                 "the same time, choose one");
    if (!mm_no_dest_prefix && !mm_dest_prefix[0])
        mm_dest_prefix = mm_prefix;
    size_t pl = strlen(mm_prefix);
    ProtobufCBinaryData key = {1, zero}, end = {1, zero};
    uint8_t *eb = pl < sizeof end_buf ? end_buf : malloc(pl);
    if (!eb)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    if (pl > 0) { /* else every key: from "\0" to the end */
        key = (ProtobufCBinaryData){pl, (uint8_t *)mm_prefix};
        end = (ProtobufCBinaryData){
            ctl_wengine_prefix_end((const uint8_t *)mm_prefix, pl, eb), eb};
    }
    sync_base(c, dc, rev, key, end);
    follow(c, dc, rev, key, end);
    return CTL_EXIT_ERROR;
}

const struct ctl_cmd ctl_cmd_make_mirror = {
    .use = "make-mirror [options] <destination>",
    .short_desc = "Makes a mirror at the destination etcd cluster",
    .flags = mirror_flags,
    .run = run,
};
