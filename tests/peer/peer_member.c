/*
 * peer_member.c - what the peer transport does for membership: refusing a
 * removed member so that it stops, and peer_call (a unary call to a
 * peer's own services, as a follower forwards a promotion to the leader).
 *
 * Goal: show that a member the receiver knows was removed is refused with
 * the distinct "removed" status and hears it through on_removed promptly,
 * both on a stream that was open when it was removed (peer_remove ends
 * it) and when it dials again after a restart; that an unknown member is
 * refused without being told it was removed; and that peer_call returns
 * the reply, or ERR_UNSUPPORTED, ERR_TIMEOUT, ERR_IO, ERR_NOTFOUND,
 * ERR_BUSY and ERR_STOPPED exactly when it should.
 *
 * Method: nodes are {peer_transport, api_server on 127.0.0.1 port 0} in
 * one process, as in peer_pair.c; each api_server also serves an echo
 * method and a slow one (answered from a helper thread after 1.5 s).
 * Every check fails the program with a message; timings are printed.
 * Run under ASan for the leak and memory checks.
 */
#include <stdlib.h>
#include <string.h>

#include "peer/peer_int.h"
#include "peer_harness.h"
#include "util/err.h"
#include "util/log.h"

#define CLUSTER 0xc2u
/* Members have ids below this (nodes 1 to 7). */
#define MEMBER_NODES 8
#define ECHO_PATH "/cetcdpb.Test/Echo"
#define SLOW_PATH "/cetcdpb.Test/Slow"
#define SLOW_MS 1500

static struct node nodes[NODES_MAX];
static atomic_int slow_pending; /* slow calls not answered yet */

static void on_messages(void *arg, raft_id from, const struct raft_msg *msgs,
                        size_t n)
{
    struct node *nd = arg;
    (void)msgs;
    pthread_mutex_lock(&nd->mu);
    nd->got[from < NODES_MAX ? from : 0] += n;
    pthread_mutex_unlock(&nd->mu);
}

static bool is_removed(void *arg, raft_id id)
{
    struct node *nd = arg;
    pthread_mutex_lock(&nd->mu);
    bool r = id < MEMBER_NODES && nd->removed[id];
    pthread_mutex_unlock(&nd->mu);
    return r;
}

static void on_removed(void *arg, raft_id by)
{
    struct node *nd = arg;
    CHECK(by > 0 && by < MEMBER_NODES, "removed by %llu",
          (unsigned long long)by);
    pthread_mutex_lock(&nd->mu);
    if (nd->removed_by++ == 0)
        nd->removed_at_us = now_us();
    pthread_mutex_unlock(&nd->mu);
}

/* The echo method answers "echo:" and the request. */
static void echo(struct rpc_call *call, const uint8_t *req, size_t len,
                 void *ctx)
{
    uint8_t out[256];
    (void)ctx;
    CHECK(len + 5 <= sizeof(out), "echo request of %zu bytes", len);
    memcpy(out, "echo:", 5);
    memcpy(out + 5, req, len);
    rpc_call_reply_bytes(call, out, len + 5);
}

/* The count drops before the answer: rpc_server_close returns once every
 * call was answered, so main's check after it must not race with this
 * thread's last steps (it did, once in ~15 ASan runs). */
static void *slow_answer(void *arg)
{
    usleep(SLOW_MS * 1000);
    atomic_fetch_sub(&slow_pending, 1);
    rpc_call_reply_bytes(arg, (const uint8_t *)"late", 4);
    return NULL;
}

/* The slow method answers after SLOW_MS, from a thread of its own. */
static void slow(struct rpc_call *call, const uint8_t *req, size_t len,
                 void *ctx)
{
    pthread_t th;
    (void)req, (void)len, (void)ctx;
    atomic_fetch_add(&slow_pending, 1);
    CHECK(pthread_create(&th, NULL, slow_answer, call) == 0, "thread");
    pthread_detach(th);
}

/* test_methods registers the echo and slow methods on nd's server. */
static void test_methods(struct node *nd)
{
    CHECK(rpc_server_register_unary(nd->srv, ECHO_PATH, echo, nd) == 0,
          "echo");
    CHECK(rpc_server_register_unary(nd->srv, SLOW_PATH, slow, nd) == 0,
          "slow");
}

static void node_start(struct node *nd)
{
    struct peer_config cfg = {
        .self = nd->id,
        .cluster_id = CLUSTER,
        .cb = {.arg = nd, .on_messages = on_messages,
               .is_removed = is_removed, .on_removed = on_removed},
        .limits = {.backoff_min_ms = 50, .backoff_max_ms = 200},
    };
    CHECK(peer_transport_create(&cfg, &nd->t) == 0, "create");
    char listen[64];
    snprintf(listen, sizeof(listen), "http://127.0.0.1:%d", nd->port);
    struct rpc_server_config scfg = {.urls = {listen}, .urls_n = 1};
    node_listen(nd, &scfg, test_methods);
}

static int removed_by(struct node *nd, int64_t *at_us)
{
    pthread_mutex_lock(&nd->mu);
    int n = nd->removed_by;
    if (at_us != NULL)
        *at_us = nd->removed_at_us;
    pthread_mutex_unlock(&nd->mu);
    return n;
}

/* wait_removed waits until nd was told it is removed; returns the ms
 * from t0_us until it was. */
static int64_t wait_removed(struct node *nd, int64_t t0_us, int64_t max_ms)
{
    int64_t at = 0;
    while (removed_by(nd, &at) == 0) {
        CHECK(now_us() - t0_us < max_ms * 1000,
              "%llu not told it was removed in %lld ms",
              (unsigned long long)nd->id, (long long)max_ms);
        usleep(1000);
    }
    return (at - t0_us) / 1000;
}

static void send_one(struct node *a, raft_id to)
{
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = a->id,
                         .to = to, .term = 1};
    CHECK(peer_send(a->t, &m, 1) == 0, "peer_send");
}

/* D is a peer of A with an open stream; A records D as removed and drops
 * it: D's open stream ends with the removed status at once, D hears it,
 * and after a restart D is refused the same way on its first dial. */
static void test_removed(struct node *a, struct node *d, struct node *u)
{
    node_start(d);
    link_peer(a, d);
    link_peer(d, a);
    wait_active(d, a->id, 5000);
    wait_active(a, d->id, 5000);
    send_one(d, a->id);
    CHECK(removed_by(d, NULL) == 0, "told removed too early");
    pthread_mutex_lock(&a->mu);
    a->removed[d->id] = true;
    pthread_mutex_unlock(&a->mu);
    int64_t t0 = now_us();
    CHECK(peer_remove(a->t, d->id) == 0, "remove");
    int64_t ms = wait_removed(d, t0, 2000);
    struct peer_stats st;
    CHECK(peer_stats(d->t, a->id, &st) == 0, "stats");
    CHECK(st.refusals >= 1, "refusal not counted");
    printf("ok removed: open stream refused as removed %lld ms after "
           "peer_remove\n", (long long)ms);
    /* Restarted (its data knows nothing): refused on the first dial. */
    node_stop(d);
    pthread_mutex_lock(&d->mu);
    d->removed_by = 0;
    pthread_mutex_unlock(&d->mu);
    t0 = now_us();
    node_start(d);
    link_peer(d, a);
    ms = wait_removed(d, t0, 2000);
    printf("ok removed: restarted member refused as removed %lld ms after "
           "it started\n", (long long)ms);
    node_stop(d);
    /* A member A does not know at all is refused, but not as removed. */
    node_start(u);
    link_peer(u, a);
    t0 = now_us();
    do {
        CHECK(peer_stats(u->t, a->id, &st) == 0, "stats");
        CHECK(now_us() - t0 < 5000 * 1000, "unknown member not refused");
        usleep(2000);
    } while (st.refusals < 2);
    CHECK(removed_by(u, NULL) == 0, "unknown member told it was removed");
    printf("ok removed: unknown member refused %llu times, never as "
           "removed\n", (unsigned long long)st.refusals);
    node_stop(u);
}

/* The outcome of one peer_call. */
struct outcome {
    pthread_mutex_t mu;  /* guards the fields below */
    int calls;           /* callbacks so far */
    int err;             /* the last one's error */
    char reply[64];      /* and its reply, NUL-terminated */
    int64_t at_us;       /* when it came */
};

static struct outcome oc = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void answered(void *arg, int err, const uint8_t *reply, size_t len)
{
    struct outcome *o = arg;
    CHECK((err == 0) == (reply != NULL), "reply %p with err %d",
          (const void *)reply, err);
    pthread_mutex_lock(&o->mu);
    o->calls++;
    o->err = err;
    o->at_us = now_us();
    size_t n = len < sizeof(o->reply) - 1 ? len : sizeof(o->reply) - 1;
    memcpy(o->reply, reply != NULL ? (const char *)reply : "", n);
    o->reply[n] = '\0';
    pthread_mutex_unlock(&o->mu);
}

/* call_wait makes one call and waits for its outcome: its error, the
 * reply in reply_out (64 bytes), the ms it took in *ms_out. */
typedef int (*call_fn)(struct peer_transport *t, raft_id to,
                       const char *method, const uint8_t *req, size_t len,
                       uint32_t timeout_ms, peer_call_fn fn, void *arg);
static call_fn caller = peer_call; /* peer_call, or peer_ask (test_ask) */

static int call_wait(struct node *a, raft_id to, const char *method,
                     uint32_t timeout_ms, char *reply_out, int64_t *ms_out)
{
    pthread_mutex_lock(&oc.mu);
    int before = oc.calls;
    pthread_mutex_unlock(&oc.mu);
    int64_t t0 = now_us();
    int rv = caller(a->t, to, method, (const uint8_t *)"hi", 2, timeout_ms,
                    answered, &oc);
    CHECK(rv == 0, "peer_call/ask: %s", err_str(rv));
    for (;;) {
        pthread_mutex_lock(&oc.mu);
        bool done = oc.calls > before;
        int err = oc.err;
        memcpy(reply_out, oc.reply, sizeof(oc.reply));
        int64_t at = oc.at_us;
        pthread_mutex_unlock(&oc.mu);
        if (done) {
            CHECK(oc.calls == before + 1, "called twice");
            *ms_out = (at - t0) / 1000;
            return err;
        }
        CHECK(now_us() - t0 < 20 * 1000000LL, "no outcome");
        usleep(1000);
    }
}

static void test_call(struct node *a, struct node *b, struct node *c)
{
    char reply[64];
    int64_t ms;
    CHECK(call_wait(a, b->id, ECHO_PATH, 5000, reply, &ms) == 0, "echo");
    CHECK(strcmp(reply, "echo:hi") == 0, "reply %s", reply);
    printf("ok call: echo answered in %lld ms\n", (long long)ms);
    int err = call_wait(a, b->id, "/cetcdpb.Test/Nope", 5000, reply, &ms);
    CHECK(err == ERR_UNSUPPORTED, "unknown method: %s", err_str(err));
    err = call_wait(a, b->id, SLOW_PATH, 300, reply, &ms);
    CHECK(err == ERR_TIMEOUT && ms >= 250 && ms < 1200,
          "slow: %s after %lld ms", err_str(err), (long long)ms);
    printf("ok call: unknown method refused, 300 ms timeout hit after "
           "%lld ms\n", (long long)ms);
    /* C is a peer but down: unreachable. */
    link_peer(a, c);
    err = call_wait(a, c->id, ECHO_PATH, 5000, reply, &ms);
    CHECK(err == ERR_IO && ms < 4000, "down peer: %s after %lld ms",
          err_str(err), (long long)ms);
    printf("ok call: down peer unreachable after %lld ms\n", (long long)ms);
    CHECK(peer_remove(a->t, c->id) == 0, "remove c");
    CHECK(peer_call(a->t, c->id, ECHO_PATH, NULL, 0, 1000, answered, &oc) ==
              ERR_NOTFOUND,
          "call to a non-peer");
    CHECK(peer_call(a->t, b->id, ECHO_PATH, NULL, 0, 0, answered, &oc) ==
              ERR_INVAL,
          "timeout 0");
}

/* peer_ask: the same outcomes as peer_call on the kept channel (echo,
 * unknown method, timeout, a down peer, a non-peer, timeout 0), and many
 * asks one after the other cost a round trip each, not a connection. */
static void test_ask(struct node *a, struct node *b, struct node *c)
{
    char reply[64];
    int64_t ms;
    caller = peer_ask;
    CHECK(call_wait(a, b->id, ECHO_PATH, 5000, reply, &ms) == 0, "ask echo");
    CHECK(strcmp(reply, "echo:hi") == 0, "reply %s", reply);
    int64_t t0 = now_us();
    for (int i = 0; i < 500; i++) {
        CHECK(call_wait(a, b->id, ECHO_PATH, 5000, reply, &ms) == 0,
              "ask echo %d", i);
        CHECK(strcmp(reply, "echo:hi") == 0, "reply %s", reply);
    }
    double rate = 500.0 / ((double)(now_us() - t0) / 1e6);
    CHECK(rate > 200, "asks one after another: %.0f a second", rate);
    printf("ok ask: 500 echoes one after another at %.0f a second\n", rate);
    int err = call_wait(a, b->id, "/cetcdpb.Test/Nope", 5000, reply, &ms);
    CHECK(err == ERR_UNSUPPORTED, "ask unknown method: %s", err_str(err));
    err = call_wait(a, b->id, SLOW_PATH, 300, reply, &ms);
    CHECK(err == ERR_TIMEOUT && ms >= 250 && ms < 1200,
          "ask slow: %s after %lld ms", err_str(err), (long long)ms);
    link_peer(a, c);
    err = call_wait(a, c->id, ECHO_PATH, 5000, reply, &ms);
    CHECK(err == ERR_IO && ms < 4000, "ask down peer: %s after %lld ms",
          err_str(err), (long long)ms);
    CHECK(peer_remove(a->t, c->id) == 0, "remove c");
    CHECK(peer_ask(a->t, c->id, ECHO_PATH, NULL, 0, 1000, answered, &oc) ==
              ERR_NOTFOUND,
          "ask a non-peer");
    CHECK(peer_ask(a->t, b->id, ECHO_PATH, NULL, 0, 0, answered, &oc) ==
              ERR_INVAL,
          "ask timeout 0");
    printf("ok ask: unknown method, timeout, down peer, non-peer, timeout 0\n");
    caller = peer_call;
}

static struct outcome oa = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* PEER_CALLS_MAX slow calls in flight: one more is refused; closing the
 * transport ends them all with ERR_STOPPED, at once, and 3 slow asks
 * too. */
static void test_call_close(struct node *a, struct node *b)
{
    pthread_mutex_lock(&oc.mu);
    int before = oc.calls;
    pthread_mutex_unlock(&oc.mu);
    for (int i = 0; i < PEER_CALLS_MAX; i++)
        CHECK(peer_call(a->t, b->id, SLOW_PATH, NULL, 0, 10000, answered,
                        &oc) == 0,
              "call %d", i);
    CHECK(peer_call(a->t, b->id, SLOW_PATH, NULL, 0, 10000, answered, &oc) ==
              ERR_BUSY,
          "one call too many");
    for (int i = 0; i < 3; i++)
        CHECK(peer_ask(a->t, b->id, SLOW_PATH, NULL, 0, 10000, answered,
                       &oa) == 0,
              "ask %d", i);
    usleep(200 * 1000); /* let them reach B */
    int64_t t0 = now_us();
    node_stop(a);
    int64_t ms = (now_us() - t0) / 1000;
    pthread_mutex_lock(&oc.mu);
    CHECK(oc.calls == before + PEER_CALLS_MAX && oc.err == ERR_STOPPED,
          "%d outcomes, last %s", oc.calls - before, err_str(oc.err));
    pthread_mutex_unlock(&oc.mu);
    CHECK(ms < SLOW_MS, "close waited %lld ms", (long long)ms);
    pthread_mutex_lock(&oa.mu);
    CHECK(oa.calls == 3 && oa.err == ERR_STOPPED, "%d ask outcomes, last %s",
          oa.calls, err_str(oa.err));
    pthread_mutex_unlock(&oa.mu);
    printf("ok call: %d calls in flight, one more refused; close ended them "
           "in %lld ms\n", PEER_CALLS_MAX, (long long)ms);
}

int main(void)
{
    log_set_level(getenv("PEER_PAIR_LOG") ? LOG_DEBUG : LOG_ERROR);
    int64_t t0 = now_us();
    for (int i = 1; i < MEMBER_NODES; i++)
        node_init(&nodes[i], (raft_id)i, NULL);
    struct node *a = &nodes[1], *b = &nodes[2], *c = &nodes[3];
    node_start(a);
    node_start(b);
    node_start(c);
    node_stop(c); /* C's port is known, nobody listens there now */
    link_peer(a, b);
    link_peer(b, a);
    wait_active(a, b->id, 5000);
    test_removed(a, &nodes[4], &nodes[5]);
    test_call(a, b, c);
    test_ask(a, b, c);
    test_call_close(a, b);
    node_stop(b); /* waits for the slow calls' answers */
    CHECK(atomic_load(&slow_pending) == 0, "slow calls unanswered");
    printf("peer.member passed in %.1f s\n", (double)(now_us() - t0) / 1e6);
    return 0;
}
