/*
 * peer_pair.c - the peer transport between real gRPC servers in one
 * process.
 *
 * Goal: show that raft messages flow in order and fast between members,
 * that a dead or restarted member neither stops the others nor stays
 * unreachable, that another cluster and unknown members are refused, and
 * that snapshots arrive verified (and a corrupted one does not).
 *
 * Method: nodes are {peer_transport, api_server on 127.0.0.1 port 0}.
 * Every message carries a sequence number in raft_msg.index; receivers
 * check that each sender's numbers only grow and count gaps.  Timings are
 * printed so the report can quote them; each check fails the program with
 * a message.  Run under ASan for the leak and memory checks.
 */
#include <assert.h>
#include <sched.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "peer/peer_int.h"
#include "peer_harness.h"
#include "util/err.h"
#include "util/log.h"

#define CLUSTER 0xc1u
/* Senders have ids below this (nodes 1 to 7). */
#define PAIR_NODES 10

static struct node nodes[NODES_MAX];
static char tmp_root[64];

static void on_messages(void *arg, raft_id from, const struct raft_msg *msgs,
                        size_t n)
{
    struct node *nd = arg;
    CHECK(from > 0 && from < PAIR_NODES, "from %llu", (unsigned long long)from);
    while (atomic_load(&nd->stall)) /* a member that stopped reading */
        usleep(1000);
    pthread_mutex_lock(&nd->mu);
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = msgs[i].index;
        if (seq <= nd->last[from])
            nd->disorder++;
        else if (seq != nd->last[from] + 1 && nd->last[from] != 0)
            nd->gaps[from] += seq - nd->last[from] - 1;
        nd->last[from] = seq;
        nd->got[from]++;
    }
    pthread_mutex_unlock(&nd->mu);
}

static void on_unreachable(void *arg, raft_id id)
{
    struct node *nd = arg;
    pthread_mutex_lock(&nd->mu);
    nd->unreachable[id < PAIR_NODES ? id : 0]++;
    pthread_mutex_unlock(&nd->mu);
}

static int on_snapshot(void *arg, raft_id from, const struct raft_msg *m,
                       const char *path)
{
    struct node *nd = arg;
    CHECK(m->type == RAFT_MSG_SNAP && m->snapshot != NULL, "bad snap msg");
    CHECK(m->snapshot->meta.index == 777, "snap index %llu",
          (unsigned long long)m->snapshot->meta.index);
    CHECK(files_equal(path, nd->expect_file), "received file differs");
    unlink(path);
    pthread_mutex_lock(&nd->mu);
    nd->snaps_in++;
    pthread_mutex_unlock(&nd->mu);
    return 0;
}

/* node_start creates the transport and its server (port 0 the first
 * time, the same port on a restart). */
static void node_start(struct node *nd)
{
    struct peer_config cfg = {
        .self = nd->id,
        .cluster_id = nd->cluster,
        .snap_dir = nd->dir,
        .cb = {nd, on_messages, on_unreachable, on_snapshot,
               on_snapshot_status},
        .limits = {.backoff_max_ms = 1000, .send_timeout_ms = 2000},
    };
    CHECK(peer_transport_create(&cfg, &nd->t) == 0, "create");
    char listen[64];
    snprintf(listen, sizeof(listen), "http://127.0.0.1:%d", nd->port);
    struct rpc_server_config scfg = {.urls = {listen}, .urls_n = 1,
                                     .max_request_bytes = 4 << 20};
    node_listen(nd, &scfg, NULL);
}

/* node_in inits nd as a member of cluster, with its snapshot directory. */
static void node_in(struct node *nd, raft_id id, uint64_t cluster)
{
    node_init(nd, id, tmp_root);
    nd->cluster = cluster;
}

static uint64_t seqs[NODES_MAX][NODES_MAX]; /* last number sent a -> b */

/* wait_got waits until nd has n messages from `from`. */
static void wait_got(struct node *nd, raft_id from, uint64_t n, int64_t ms)
{
    int64_t t0 = now_us();
    while (got(nd, from) < n) {
        CHECK(now_us() - t0 < ms * 1000, "%llu got %llu of %llu from %llu",
              (unsigned long long)nd->id, (unsigned long long)got(nd, from),
              (unsigned long long)n, (unsigned long long)from);
        sched_yield(); /* Not usleep: the pings measure microseconds. */
    }
}

/* send_n sends n APP messages with `payload` bytes of entry data from a to
 * every id in to[0..k), 64 per peer_send call, keeping each queue below
 * 3000 so the run measures the transport, not its overflow. */
static void send_n(struct node *a, const raft_id *to, size_t k, uint64_t n,
                   uint32_t payload)
{
    static uint8_t data[4096];
    struct raft_entry ents[64 * 4];
    struct raft_msg msgs[64 * 4];
    assert(k <= 4 && payload <= sizeof(data));
    for (uint64_t done = 0; done < n;) {
        size_t c = n - done < 64 ? (size_t)(n - done) : 64, m = 0;
        for (size_t j = 0; j < k; j++)
            while (stats(a, to[j]).queued_msgs > 3000)
                usleep(50);
        for (size_t i = 0; i < c; i++) {
            for (size_t j = 0; j < k; j++, m++) {
                ents[m] = (struct raft_entry){.term = 1, .index = done + i + 1,
                                              .len = payload, .data = data};
                msgs[m] = (struct raft_msg){
                    .type = RAFT_MSG_APP, .from = a->id, .to = to[j],
                    .term = 1, .index = ++seqs[a->id][to[j]],
                    .n_entries = 1, .entries = &ents[m]};
            }
        }
        CHECK(peer_send(a->t, msgs, m) == 0, "peer_send");
        done += c;
    }
}

/* ping_p50_us sends one message at a time from a to b and returns the
 * median time until b has it, over n pings. */
static int64_t ping_p50_us(struct node *a, struct node *b, int n)
{
    int64_t lat[256];
    raft_id to = b->id;
    assert(n <= 256);
    for (int i = 0; i < n; i++) {
        uint64_t before = got(b, a->id);
        int64_t t0 = now_us();
        send_n(a, &to, 1, 1, 16);
        wait_got(b, a->id, before + 1, 2000);
        lat[i] = now_us() - t0;
    }
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && lat[j] < lat[j - 1]; j--) {
            int64_t x = lat[j];
            lat[j] = lat[j - 1];
            lat[j - 1] = x;
        }
    return lat[n / 2];
}

static void check_clean(struct node *nd, raft_id from)
{
    pthread_mutex_lock(&nd->mu);
    CHECK(nd->disorder == 0, "%llu saw %llu out-of-order messages",
          (unsigned long long)nd->id, (unsigned long long)nd->disorder);
    CHECK(nd->gaps[from] == 0, "%llu lost %llu messages from %llu",
          (unsigned long long)nd->id, (unsigned long long)nd->gaps[from],
          (unsigned long long)from);
    pthread_mutex_unlock(&nd->mu);
}

/* Baseline: thousands of messages from A to B and C at once, in order,
 * none lost; then A to B alone for the throughput figure. */
static double test_throughput(struct node *a, struct node *b, struct node *c)
{
    const uint64_t n = 100000;
    raft_id both[2] = {b->id, c->id};
    int64_t t0 = now_us();
    send_n(a, both, 2, n, 128);
    wait_got(b, a->id, n, 30000);
    wait_got(c, a->id, n, 30000);
    double both_s = (double)(now_us() - t0) / 1e6;
    check_clean(b, a->id);
    check_clean(c, a->id);
    uint64_t base = got(b, a->id);
    t0 = now_us();
    send_n(a, &both[0], 1, 2 * n, 128);
    wait_got(b, a->id, base + 2 * n, 30000);
    double rate = (double)(2 * n) / ((double)(now_us() - t0) / 1e6);
    check_clean(b, a->id);
    struct peer_stats st;
    peer_stats(a->t, b->id, &st);
    printf("ok throughput: A->{B,C} %llu msgs each in %.3f s; A->B %.0f "
           "msgs/s (128-byte entries), %.1f msgs per batch, 0 lost\n",
           (unsigned long long)n, both_s, rate,
           (double)st.sent_msgs / (double)st.sent_batches);
    CHECK(st.dropped_msgs == 0, "dropped %llu",
          (unsigned long long)st.dropped_msgs);
    return rate;
}

/* free_port returns a port nobody listens on (bound, then released). */
static int free_port(void)
{
    struct rpc_server *srv;
    struct rpc_server_config scfg = {.urls = {"http://127.0.0.1:0"},
                                     .urls_n = 1};
    CHECK(rpc_server_create(&scfg, &srv) == 0, "probe create");
    CHECK(rpc_server_start(srv) == 0, "probe start");
    int port = rpc_server_port(srv, 0);
    rpc_server_close(srv);
    return port;
}

/* A dead member (never started) must not slow A's messages to B. */
static void test_dead_peer(struct node *a, struct node *b, double base_rate)
{
    int64_t p50_before = ping_p50_us(a, b, 101);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", free_port());
    const char *urls[1] = {url};
    CHECK(peer_add(a->t, 4, urls, 1) == 0, "add dead peer");
    usleep(300 * 1000); /* Let the first attempts fail. */
    raft_id both[2] = {b->id, 4};
    uint64_t n = 100000, base = got(b, a->id);
    int64_t t0 = now_us();
    send_n(a, both, 2, n, 128);
    wait_got(b, a->id, base + n, 30000);
    double rate = (double)n / ((double)(now_us() - t0) / 1e6);
    int64_t p50_after = ping_p50_us(a, b, 101);
    check_clean(b, a->id);
    struct peer_stats st;
    CHECK(peer_stats(a->t, 4, &st) == 0, "stats");
    pthread_mutex_lock(&a->mu);
    uint64_t unr = a->unreachable[4];
    pthread_mutex_unlock(&a->mu);
    printf("ok dead peer: A->B %.0f msgs/s while sending to a dead peer "
           "(%.0f%% of baseline); ping p50 %lld us before, %lld us after; "
           "dead peer: %llu dropped, %llu failed attempts, %llu unreachable "
           "reports\n",
           rate, 100.0 * rate / base_rate, (long long)p50_before,
           (long long)p50_after, (unsigned long long)st.dropped_msgs,
           (unsigned long long)st.failures, (unsigned long long)unr);
    CHECK(!st.active && st.dropped_msgs > 0 && unr > 0, "dead peer stats");
    /* Loose: two shared cores make single runs noisy. */
    CHECK(rate > base_rate * 0.25, "dead peer slowed A->B");
    CHECK(p50_after < 20000, "ping p50 %lld us", (long long)p50_after);
    CHECK(peer_remove(a->t, 4) == 0, "remove");
    CHECK(peer_remove(a->t, 4) == ERR_NOTFOUND, "remove twice");
}

/* stuck_fails sends 1 KiB appends from a to b and to a stuck peer `stuck`,
 * measuring b's latency between them, until a's stream to stuck has
 * failed; it checks that it did within limit_s, that b's ping p50 stayed
 * under 50 ms and that b lost nothing.  It returns the ms until the
 * failure, with the worst ping p50 to b in *worst_out and stuck's stats in
 * *st. */
static int64_t stuck_fails(struct node *a, struct node *b, raft_id stuck,
                           int64_t limit_s, const char *what,
                           int64_t *worst_out, struct peer_stats *st)
{
    raft_id both[2] = {b->id, stuck};
    int64_t t0 = now_us(), worst = 0;
    do {
        send_n(a, both, 2, 64, 1024);
        int64_t p = ping_p50_us(a, b, 5);
        worst = p > worst ? p : worst;
        *st = stats(a, stuck);
    } while (st->failures == 0 && now_us() - t0 < limit_s * 1000000LL);
    CHECK(st->failures > 0 && !st->active, "%s peer never failed", what);
    CHECK(worst < 50000, "B delayed: ping %lld us", (long long)worst);
    check_clean(b, a->id);
    *worst_out = worst;
    return (now_us() - t0) / 1000;
}

/* A listener that accepts TCP connections but never speaks HTTP/2 (a
 * stopped process): the connection fails, B is not delayed meanwhile. */
static void test_mute_peer(struct node *a, struct node *b)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(ls, 4) == 0 &&
              getsockname(ls, (struct sockaddr *)&sa, &sl) == 0,
          "listener");
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
    const char *urls[1] = {url};
    CHECK(peer_add(a->t, 9, urls, 1) == 0, "add mute peer");
    int64_t worst;
    struct peer_stats st;
    int64_t ms = stuck_fails(a, b, 9, 10, "mute", &worst, &st);
    printf("ok mute peer: stream failed after %lld ms (%llu dropped); "
           "worst ping p50 to B meanwhile %lld us\n", (long long)ms,
           (unsigned long long)st.dropped_msgs, (long long)worst);
    CHECK(peer_remove(a->t, 9) == 0, "remove");
    close(ls);
}

/* G's receiver stops reading after its stream was up (a stuck member):
 * A's writes stall once the flow-control windows are full, the send
 * timeout breaks the stream, and B is not delayed meanwhile. */
static void test_stalled_peer(struct node *a, struct node *b, struct node *g)
{
    node_start(g);
    link_peer(g, a);
    link_peer(a, g);
    wait_active(a, g->id, 5000);
    atomic_store(&g->stall, true);
    int64_t worst;
    struct peer_stats st;
    int64_t ms = stuck_fails(a, b, g->id, 20, "stalled", &worst, &st);
    printf("ok stalled peer: stream broken after %lld ms (send timeout "
           "2000 ms, %llu dropped); worst ping p50 to B meanwhile %lld us\n",
           (long long)ms, (unsigned long long)st.dropped_msgs,
           (long long)worst);
    CHECK(peer_remove(a->t, g->id) == 0, "remove");
    atomic_store(&g->stall, false);
    node_stop(g);
}

/* C goes down and comes back on the same port: A finds it again. */
static void test_restart(struct node *a, struct node *b, struct node *c)
{
    raft_id to = c->id;
    node_stop(c);
    int64_t t0 = now_us();
    for (int i = 0; i < 20; i++) { /* Sends to a dead C are dropped. */
        send_n(a, &to, 1, 10, 16);
        usleep(20 * 1000);
    }
    struct peer_stats st;
    CHECK(peer_stats(a->t, c->id, &st) == 0 && !st.active &&
              st.active_since_ms == 0, "C still up");
    node_start(c);
    link_peer(c, a);
    link_peer(c, b);
    int64_t t1 = now_us();
    int64_t waited = wait_active(a, c->id, 5000);
    uint64_t base = got(c, a->id);
    send_n(a, &to, 1, 5000, 128);
    wait_got(c, a->id, base + 5000, 10000);
    pthread_mutex_lock(&c->mu);
    CHECK(c->disorder == 0, "disorder after restart");
    pthread_mutex_unlock(&c->mu);
    CHECK(peer_stats(a->t, c->id, &st) == 0 && st.active, "C not up");
    /* Up since the new stream came up (after C stopped), not before. */
    CHECK(st.active_since_ms >= t0 / 1000 &&
              st.active_since_ms <= now_us() / 1000, "C up since %lld",
          (long long)st.active_since_ms);
    printf("ok restart: C down %lld ms, A's stream back %lld ms after C "
           "restarted (%llu failed attempts, %llu dropped), 5000 msgs "
           "delivered in order\n",
           (long long)(t1 - t0) / 1000, (long long)waited,
           (unsigned long long)st.failures,
           (unsigned long long)st.dropped_msgs);
}

/* Another cluster and an unknown member are refused by A. */
static void test_refusal(struct node *a, struct node *e, struct node *f)
{
    node_start(e);
    node_start(f);
    link_peer(e, a);
    link_peer(f, a);
    raft_id to = a->id;
    for (int i = 0; i < 10; i++) {
        send_n(e, &to, 1, 1, 16);
        send_n(f, &to, 1, 1, 16);
        usleep(50 * 1000);
    }
    struct peer_stats se, sf;
    CHECK(peer_stats(e->t, a->id, &se) == 0, "stats");
    CHECK(peer_stats(f->t, a->id, &sf) == 0, "stats");
    CHECK(se.refusals > 0 && !se.active, "other cluster not refused");
    CHECK(sf.refusals > 0 && !sf.active, "unknown member not refused");
    CHECK(got(a, e->id) == 0 && got(a, f->id) == 0, "refused msgs arrived");
    printf("ok refusal: other cluster refused %llu times, unknown member "
           "%llu times, nothing delivered\n",
           (unsigned long long)se.refusals, (unsigned long long)sf.refusals);
    node_stop(e);
    node_stop(f);
}

static int snap_done(struct node *a)
{
    pthread_mutex_lock(&a->mu);
    int n = a->snap_ok + a->snap_fail;
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* send_snap sends path (size bytes) from a to `to` and waits for the
 * status; returns the milliseconds it took. */
static int64_t send_snap(struct node *a, raft_id to, const char *path,
                         uint64_t size)
{
    struct raft_snapshot snap = {.meta = {.index = 777, .term = 3}};
    snap.meta.conf.n_voters = 3;
    for (int i = 0; i < 3; i++)
        snap.meta.conf.voters[i] = (raft_id)i + 1;
    struct raft_msg m = {.type = RAFT_MSG_SNAP, .from = a->id, .to = to,
                         .term = 3, .snapshot = &snap};
    int before = snap_done(a);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "open %s", path);
    int64_t t0 = now_us();
    CHECK(peer_send_snapshot(a->t, to, &m, fd, size) == 0, "send snapshot");
    int fd2 = open(path, O_RDONLY);
    CHECK(peer_send_snapshot(a->t, to, &m, fd2, size) == ERR_BUSY,
          "second snapshot in flight not refused");
    close(fd2);
    while (snap_done(a) == before) {
        CHECK(now_us() - t0 < 60 * 1000000LL, "snapshot never finished");
        usleep(1000);
    }
    return (now_us() - t0) / 1000;
}

static bool dir_empty_now(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool empty = true;
    while (d != NULL && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = false;
    if (d != NULL)
        closedir(d);
    return empty;
}

/* dir_empty says whether dir holds no file; the receiver removes a
 * cancelled transfer's temp file when its call closes, which may be just
 * after the sender saw the failure, so this waits up to 2 s. */
static bool dir_empty(const char *dir)
{
    for (int i = 0; i < 200; i++) {
        if (dir_empty_now(dir))
            return true;
        usleep(10 * 1000);
    }
    return false;
}

static void test_snapshot(struct node *a, struct node *b)
{
    const uint64_t size = 20u << 20;
    char path[128];
    snprintf(path, sizeof(path), "%s/source.db", tmp_root);
    random_file(path, size);
    b->expect_file = path;
    int64_t ms = send_snap(a, b->id, path, size);
    CHECK(a->snap_ok == 1 && b->snaps_in == 1, "snapshot not accepted");
    printf("ok snapshot: 20 MiB in %lld ms (%.0f MiB/s), verified\n",
           (long long)ms, 20.0 * 1000.0 / (double)(ms > 0 ? ms : 1));
    peer__test_corrupt(a->t, true);
    ms = send_snap(a, b->id, path, size);
    peer__test_corrupt(a->t, false);
    CHECK(a->snap_fail == 1 && b->snaps_in == 1, "corrupt snapshot taken");
    CHECK(dir_empty(b->dir), "temp file left in %s", b->dir);
    /* A file shorter than announced fails on the sender's side. */
    send_snap(a, b->id, path, size + 100);
    CHECK(a->snap_fail == 2 && b->snaps_in == 1, "short file taken");
    CHECK(dir_empty(b->dir), "temp file left in %s", b->dir);
    printf("ok snapshot: corrupted copy refused in %lld ms, short file "
           "refused, no temp files left\n", (long long)ms);
    unlink(path);
}

int main(void)
{
    log_set_level(getenv("PEER_PAIR_LOG") ? LOG_DEBUG : LOG_ERROR);
    snprintf(tmp_root, sizeof(tmp_root), "/tmp/peer_pair.XXXXXX");
    CHECK(mkdtemp(tmp_root) != NULL, "mkdtemp");
    int64_t t0 = now_us();
    struct node *a = &nodes[1], *b = &nodes[2], *c = &nodes[3];
    node_in(a, 1, CLUSTER);
    node_in(b, 2, CLUSTER);
    node_in(c, 3, CLUSTER);
    node_in(&nodes[5], 5, CLUSTER + 1); /* another cluster */
    node_in(&nodes[6], 6, CLUSTER);     /* unknown to everyone */
    node_in(&nodes[7], 7, CLUSTER);     /* stops reading */
    node_start(a);
    node_start(b);
    node_start(c);
    for (int i = 1; i <= 3; i++)
        for (int j = 1; j <= 3; j++)
            if (i != j)
                link_peer(&nodes[i], &nodes[j]);
    printf("ok connect: A->B up in %lld ms\n",
           (long long)wait_active(a, b->id, 5000));
    wait_active(a, c->id, 5000);
    double rate = test_throughput(a, b, c);
    test_dead_peer(a, b, rate);
    test_mute_peer(a, b);
    test_stalled_peer(a, b, &nodes[7]);
    test_restart(a, b, c);
    test_refusal(a, &nodes[5], &nodes[6]);
    test_snapshot(a, b);
    node_stop(a);
    node_stop(b);
    node_stop(c);
    for (int i = 1; i <= 7; i++)
        if (i != 4)
            rmdir(nodes[i].dir);
    CHECK(rmdir(tmp_root) == 0, "rmdir %s", tmp_root);
    printf("peer.pair passed in %.1f s\n", (double)(now_us() - t0) / 1e6);
    return 0;
}
