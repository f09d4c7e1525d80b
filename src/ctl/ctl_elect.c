/*
 * ctl_elect.c - "elect <election-name> [proposal]": etcdctl's elect,
 * clientv3/concurrency's Election on a session lease: a candidate puts
 * <election-name>/<lease hex> = proposal and leads once every key created
 * before it is gone (it prints the leader key and value, and resigns on
 * SIGINT/SIGTERM); with -l it observes and prints each leader and each new
 * value of the leader key, as Election.Observe does.
 */
#define _GNU_SOURCE /* asprintf */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_session.h"
#include "ctl/print.h"

#define RESPONSE_RANGE ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE

static bool elect_listen;

static struct ctl_flag elect_flags[] = {
    {"listen", 'l', CTL_FLAG_BOOL, &elect_listen, "false", "observation mode",
     false},
    CTL_FLAG_END,
};

/* One candidacy (concurrency.Election), owned by the main thread. */
struct election {
    struct ctl_session *s; /* the session whose lease the key carries */
    char *pfx;             /* "<election-name>/" (owned) */
    char *key;             /* "<election-name>/<lease hex>" (owned) */
    int64_t rev;           /* the key's create revision */
    bool leader;           /* the key is ours to resign (leaderSession) */
};

static ProtobufCBinaryData bin(const char *s)
{
    ProtobufCBinaryData b = {strlen(s), (uint8_t *)s};
    return b;
}

/* key_txn runs: if the key's create revision is cmp_rev then `then` else
 * `els` (either may be NULL). */
static int key_txn(const struct election *el, int64_t cmp_rev,
                   Etcdserverpb__RequestOp *then, Etcdserverpb__RequestOp *els,
                   bool patient, Etcdserverpb__TxnResponse **out,
                   struct ctl_sess_err *e)
{
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.key = bin(el->key);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.create_revision = cmp_rev;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1, txn.compare = cmps;
    txn.n_success = then ? 1 : 0, txn.success = &then;
    txn.n_failure = els ? 1 : 0, txn.failure = &els;
    ProtobufCMessage *resp = NULL;
    int rc = ctl_sess_call("/etcdserverpb.KV/Txn", &txn.base,
                           &etcdserverpb__txn_response__descriptor, patient,
                           &resp, e);
    *out = (Etcdserverpb__TxnResponse *)resp;
    return rc;
}

/* put_op fills a put of the key with val and the session's lease. */
static void put_op(const struct election *el, const char *val,
                   Etcdserverpb__PutRequest *put, Etcdserverpb__RequestOp *op)
{
    put->key = bin(el->key);
    put->value = bin(val);
    put->lease = ctl_session_lease(el->s);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op->request_put = put;
}

/* resign is Election.Resign: delete the key if it is still ours (one try
 * within --command-timeout). */
static int resign(struct election *el, struct ctl_sess_err *e)
{
    if (!el->leader)
        return CTL_SESS_OK;
    el->leader = false;
    Etcdserverpb__DeleteRangeRequest del =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del.key = bin(el->key);
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    op.request_delete_range = &del;
    Etcdserverpb__TxnResponse *t = NULL;
    int rc = key_txn(el, el->rev, &op, NULL, false, &t, e);
    if (t)
        protobuf_c_message_free_unpacked(&t->base, NULL);
    return rc;
}

/* proclaim is Election.Proclaim: a new value on the key we hold. */
static int proclaim(struct election *el, const char *val,
                    struct ctl_sess_err *e)
{
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT;
    put_op(el, val, &put, &op);
    Etcdserverpb__TxnResponse *t = NULL;
    int rc = key_txn(el, el->rev, &op, NULL, true, &t, e);
    if (rc == CTL_SESS_OK && !t->succeeded) {
        snprintf(e->text, sizeof e->text, "election: not leader");
        rc = CTL_SESS_FAILED;
    }
    if (t)
        protobuf_c_message_free_unpacked(&t->base, NULL);
    return rc;
}

/* campaign_txn creates the key (or finds it, when a retried txn had
 * already done so) and sets el->rev. */
static int campaign_txn(struct election *el, const char *val,
                        struct ctl_sess_err *e)
{
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__RequestOp then = ETCDSERVERPB__REQUEST_OP__INIT;
    put_op(el, val, &put, &then);
    Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
    get.key = bin(el->key);
    Etcdserverpb__RequestOp els = ETCDSERVERPB__REQUEST_OP__INIT;
    els.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    els.request_range = &get;
    Etcdserverpb__TxnResponse *t = NULL;
    int rc = key_txn(el, 0, &then, &els, true, &t, e);
    if (rc != CTL_SESS_OK)
        return rc;
    el->rev = t->header ? t->header->revision : 0;
    el->leader = true;
    const Etcdserverpb__ResponseOp *op = t->n_responses ? t->responses[0]
                                                        : NULL;
    bool differs = false;
    if (!t->succeeded && op && op->response_case == RESPONSE_RANGE &&
        op->response_range->n_kvs > 0) {
        const Mvccpb__KeyValue *kv = op->response_range->kvs[0];
        el->rev = kv->create_revision;
        differs = kv->value.len != strlen(val) ||
                  memcmp(kv->value.data, val, kv->value.len) != 0;
    }
    protobuf_c_message_free_unpacked(&t->base, NULL);
    if (differs && (rc = proclaim(el, val, e)) != CTL_SESS_OK) {
        struct ctl_sess_err ignored;
        (void)resign(el, &ignored);
    }
    return rc;
}

/* campaign is Election.Campaign: returns once elected. */
static int campaign(struct election *el, const char *val,
                    struct ctl_sess_err *e)
{
    int rc = campaign_txn(el, val, e);
    if (rc != CTL_SESS_OK)
        return rc;
    Etcdserverpb__RangeResponse *last = NULL;
    rc = ctl_sess_wait_deletes(el->pfx, el->rev - 1, &last, e);
    if (rc == CTL_SESS_OK) {
        protobuf_c_message_free_unpacked(&last->base, NULL);
        return rc;
    }
    if (rc == CTL_SESS_CANCELED) { /* the signal: give the key back */
        struct ctl_sess_err ignored;
        (void)resign(el, &ignored);
    }
    el->leader = false;
    return rc;
}

/* done ends the session, then exits with text if there is one. */
static int done(struct election *el, const char *text)
{
    ctl_session_close(el->s);
    if (text)
        ctl_exit(CTL_EXIT_ERROR, "%s", text);
    free(el->pfx);
    free(el->key);
    return CTL_EXIT_SUCCESS;
}

/* show prints an answer; -w table ends here as it ends etcdctl (which
 * leaves the key to the lease; cetcdctl resigns first). */
static void show(struct election *el, const Etcdserverpb__RangeResponse *r)
{
    if (ctl_sess_display_get(r) == 0)
        return;
    struct ctl_sess_err ignored;
    (void)resign(el, &ignored);
    ctl_session_close(el->s);
    ctl_sess_display_exit();
}

static void election_init(struct election *el, const char *name)
{
    memset(el, 0, sizeof *el);
    el->s = ctl_session_open(60); /* concurrency's default TTL */
    ctl_sess_catch_signals();
    if (asprintf(&el->pfx, "%s/", name) < 0 ||
        asprintf(&el->key, "%s%" PRIx64, el->pfx,
                 (uint64_t)ctl_session_lease(el->s)) < 0)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
}

static int campaign_run(const char *name, const char *val)
{
    struct election el;
    struct ctl_sess_err e;
    election_init(&el, name);
    if (campaign(&el, val, &e) != CTL_SESS_OK)
        return done(&el, e.text);
    Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
    get.key = bin(el.key);
    ProtobufCMessage *resp = NULL;
    if (ctl_sess_call("/etcdserverpb.KV/Range", &get.base,
                      &etcdserverpb__range_response__descriptor, true, &resp,
                      &e) != CTL_SESS_OK)
        return done(&el, e.text);
    show(&el, (Etcdserverpb__RangeResponse *)resp);
    protobuf_c_message_free_unpacked(resp, NULL);
    while (!ctl_sess_interrupted() && !ctl_session_done(el.s))
        ctl_sess_sleep_ms(100);
    if (!ctl_sess_interrupted())
        return done(&el, "elect: session expired");
    if (resign(&el, &e) != CTL_SESS_OK)
        return done(&el, e.text);
    return done(&el, NULL);
}

/* ------------------------------------------------------------------------
 * Observe
 * ---------------------------------------------------------------------- */

/* show_kv prints {header, [kv], more, count} as Observe hands it over. */
static void show_kv(struct election *el, const Etcdserverpb__ResponseHeader *h,
                    const Mvccpb__KeyValue *kv, bool more, int64_t count)
{
    Etcdserverpb__ResponseHeader zero = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
    Mvccpb__KeyValue *kvs[] = {(Mvccpb__KeyValue *)kv};
    r.header = (Etcdserverpb__ResponseHeader *)(h ? h : &zero);
    r.n_kvs = 1;
    r.kvs = kvs;
    r.more = more;
    r.count = count;
    show(el, &r);
}

/* wait_put waits for the first put under pfx from rev: *w_out holds it
 * (its event *ev_out). */
static int wait_put(const char *pfx, int64_t rev,
                    Etcdserverpb__WatchResponse **w_out,
                    const Mvccpb__KeyValue **kv_out, struct ctl_sess_err *e)
{
    struct ctl_watch w;
    ctl_watch_open(&w, pfx, true, rev);
    int rc;
    for (;;) {
        Etcdserverpb__WatchResponse *r = NULL;
        if ((rc = ctl_watch_next(&w, &r, e)) != CTL_SESS_OK)
            break;
        size_t i = 0;
        while (i < r->n_events &&
               r->events[i]->type != MVCCPB__EVENT__EVENT_TYPE__PUT)
            i++;
        if (i < r->n_events && r->events[i]->kv) {
            *w_out = r;
            *kv_out = r->events[i]->kv;
            break;
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    ctl_watch_close(&w);
    return rc;
}

/* follow prints each new value of the leader key until it is deleted;
 * more and count are those of the Range that found the leader (Observe
 * reuses that answer for them). */
static int follow(struct election *el, const char *key, int64_t rev,
                  bool more, int64_t count, struct ctl_sess_err *e)
{
    struct ctl_watch w;
    ctl_watch_open(&w, key, false, rev);
    int rc;
    bool deleted = false;
    while (!deleted) {
        Etcdserverpb__WatchResponse *r = NULL;
        if ((rc = ctl_watch_next(&w, &r, e)) != CTL_SESS_OK)
            break;
        for (size_t i = 0; i < r->n_events && !deleted; i++) {
            const Mvccpb__Event *ev = r->events[i];
            deleted = ev->type == MVCCPB__EVENT__EVENT_TYPE__DELETE;
            if (!deleted && ev->kv)
                show_kv(el, r->header, ev->kv, more, count);
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    ctl_watch_close(&w);
    return deleted ? CTL_SESS_OK : rc;
}

/* observe_round finds the leader (or waits for one), prints it and
 * follows it until it is gone. */
static int observe_round(struct election *el, struct ctl_sess_err *e)
{
    Etcdserverpb__RangeResponse *g = NULL;
    int rc = ctl_sess_range_first(el->pfx, true, 0, &g, e);
    if (rc != CTL_SESS_OK)
        return rc;
    Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    if (g->header)
        hdr = *g->header;
    Etcdserverpb__WatchResponse *w = NULL;
    const Mvccpb__KeyValue *kv = g->n_kvs ? g->kvs[0] : NULL;
    if (!kv && (rc = wait_put(el->pfx, hdr.revision, &w, &kv, e)) != 0) {
        protobuf_c_message_free_unpacked(&g->base, NULL);
        return rc;
    }
    if (w) { /* the watch's header, at the put's revision */
        hdr = w->header ? *w->header : hdr;
        hdr.revision = kv->mod_revision;
    }
    show_kv(el, &hdr, kv, false, 0);
    char *key = strndup((const char *)kv->key.data, kv->key.len);
    if (!key)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    bool more = g->more;
    int64_t count = g->count;
    if (w)
        protobuf_c_message_free_unpacked(&w->base, NULL);
    protobuf_c_message_free_unpacked(&g->base, NULL);
    rc = follow(el, key, hdr.revision + 1, more, count, e);
    free(key);
    return rc;
}

/* observe_run prints leaders until a signal; any failure before it is
 * etcdctl's "observer lost". */
static int observe_run(const char *name)
{
    struct election el;
    struct ctl_sess_err e;
    election_init(&el, name);
    while (observe_round(&el, &e) == CTL_SESS_OK)
        ;
    return done(&el, ctl_sess_interrupted() ? NULL : "elect: observer lost");
}

static int elect_run(int argc, char **argv)
{
    if (argc != 1 && argc != 2)
        ctl_exit(CTL_EXIT_BAD_ARGS, "elect takes one election name argument "
                                    "and an optional proposal argument");
    (void)ctl_output_format();
    (void)ctl_client();
    if (argc == 1) {
        if (!elect_listen)
            ctl_exit(CTL_EXIT_BAD_ARGS, "no proposal argument but -l not set");
        return observe_run(argv[0]);
    }
    if (elect_listen)
        ctl_exit(CTL_EXIT_BAD_ARGS, "proposal given but -l is set");
    return campaign_run(argv[0], argv[1]);
}

const struct ctl_cmd ctl_cmd_elect = {
    .use = "elect <election-name> [proposal]",
    .short_desc = "Observes and participates in leader election",
    .flags = elect_flags,
    .run = elect_run,
};
