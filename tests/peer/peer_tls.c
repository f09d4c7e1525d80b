/*
 * peer_tls.c - the peer transport dialling https:// and unixs:// members.
 *
 * Goal: show that TLS peer links carry raft messages and snapshots as the
 * plain ones do, with both kinds of certificates etcd 3.4 members use:
 * (1) self-signed ones (--peer-auto-tls), which are accepted without
 * verification, and (2) CA-signed ones with client certificate
 * authentication (--peer-cert-file/--peer-key-file/--peer-trusted-ca-file
 * and --peer-client-cert-auth), verified both ways, over TCP and over a
 * unixs:// socket; and that the wrong material is refused: a server
 * certificate from another CA (or a self-signed one) when verifying, a
 * missing client certificate when the listener requires one.  Also: a
 * transport without TLS refuses https:// URLs, one with TLS still dials
 * http:// members in the clear, and half a key pair is refused.
 *
 * Method: nodes are {peer_transport, api_server with TLS on 127.0.0.1 port
 * 0}, in one process.  Self-signed certificates are generated with
 * rpc_tls_self_cert; the CA-signed ones are etcd's own test fixtures
 * (server.crt for localhost and 127.0.0.1, signed by ca.crt; another CA,
 * CommonName-root.crt), and that part is skipped when they are missing.  A
 * refused dialler is one the receiver knows as a peer (so a completed
 * handshake would bring its stream up) whose stream never comes up and was
 * never refused by the receiver's identity check.  Run under ASan too,
 * and by ctest twice: with gRPC's default poller and, as peer.tls.poll,
 * with the "poll" one cetcd's main() picks (src/cmd/cetcd.c).  Before
 * returning, main waits for gRPC's own threads to end (grpc_quiesce), so
 * LeakSanitizer's exit check sees a quiet process.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/grpc.h>

#include "rpc/tls.h"
#include "dial/dial.h"
#include "peer_harness.h"
#include "util/err.h"
#include "util/log.h"

#define CLUSTER 0x7157u
#define FIXTURES "/usr/share/gocode/src/go.etcd.io/etcd/integration/fixtures"
#define SNAP_INDEX 4242
/* The longest wait for anything expected (a stream up, messages, a
 * snapshot, failed attempts): generous, for ASan on two loaded cores. */
#define WAIT_MS 30000

/* TLS material of one node (malloc'd PEM strings, or NULL). */
struct material {
    char *cert, *key;     /* the node's certificate and key */
    char *ca;             /* CA it verifies others with */
    bool verify_clients;  /* its listener requires client certificates */
    bool skip_verify;     /* its transport accepts any server certificate */
};

static struct node nodes[NODES_MAX];
static char tmp_root[64];
static char snap_file[128]; /* the snapshot every node sends */

static int64_t now_ms(void)
{
    return now_us() / 1000;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    char *s = malloc(n + 1);
    CHECK(s != NULL, "malloc");
    memcpy(s, buf, n);
    s[n] = '\0';
    return s;
}

static void on_messages(void *arg, raft_id from, const struct raft_msg *msgs,
                        size_t n)
{
    struct node *nd = arg;
    CHECK(from > 0 && from < NODES_MAX, "from %llu", (unsigned long long)from);
    pthread_mutex_lock(&nd->mu);
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].index != nd->last[from] + 1)
            nd->disorder++;
        nd->last[from] = msgs[i].index;
        nd->got[from]++;
    }
    pthread_mutex_unlock(&nd->mu);
}

static int on_snapshot(void *arg, raft_id from, const struct raft_msg *m,
                       const char *path)
{
    struct node *nd = arg;
    (void)from;
    CHECK(m->snapshot != NULL && m->snapshot->meta.index == SNAP_INDEX,
          "bad snapshot message");
    CHECK(files_equal(path, snap_file), "received snapshot differs");
    unlink(path);
    pthread_mutex_lock(&nd->mu);
    nd->snaps_in++;
    pthread_mutex_unlock(&nd->mu);
    return 0;
}

/* node_start makes nd's transport with m's dialling material (NULL: no
 * TLS) and, when listen, its server: https:// with m (plain http:// when m
 * is NULL), plus a unixs:// socket when with_unix. */
static void node_start(struct node *nd, raft_id id, const struct material *m,
                       bool listen, bool with_unix)
{
    node_init(nd, id, tmp_root);
    struct dial_tls tls = {0};
    if (m != NULL)
        tls = (struct dial_tls){.cert_pem = m->cert, .key_pem = m->key,
                                .ca_pem = m->ca,
                                .skip_verify = m->skip_verify};
    struct peer_config cfg = {
        .self = id, .cluster_id = CLUSTER, .snap_dir = nd->dir,
        .cb = {nd, on_messages, NULL, on_snapshot, on_snapshot_status},
        .limits = {.backoff_min_ms = 50, .backoff_max_ms = 200},
        .tls = m != NULL ? &tls : NULL};
    CHECK(peer_transport_create(&cfg, &nd->t) == 0, "create %llu",
          (unsigned long long)id);
    if (!listen)
        return;
    char unix_listen[160];
    snprintf(unix_listen, sizeof(unix_listen), "unixs://%s/n%llu.sock",
             tmp_root, (unsigned long long)id);
    struct rpc_server_config scfg = {
        .urls = {m != NULL ? "https://127.0.0.1:0" : "http://127.0.0.1:0",
                 unix_listen},
        .urls_n = with_unix ? 2 : 1,
        .max_request_bytes = 4 << 20,
        .tls_cert_pem = m != NULL ? m->cert : NULL,
        .tls_key_pem = m != NULL ? m->key : NULL,
        .tls_ca_pem = m != NULL ? m->ca : NULL,
        .tls_verify_clients = m != NULL && m->verify_clients};
    node_listen(nd, &scfg, NULL);
    if (with_unix)
        snprintf(nd->unix_url, sizeof(nd->unix_url), "%s", unix_listen);
}

/* node_end stops nd and removes its snapshot directory. */
static void node_end(struct node *nd)
{
    node_stop(nd);
    rmdir(nd->dir);
}

static uint64_t seqs[NODES_MAX][NODES_MAX]; /* last number sent a -> b */

/* exchange sends n numbered messages from a to b and waits for them. */
static void exchange(struct node *a, struct node *b, uint64_t n)
{
    uint64_t before = got(b, a->id);
    struct raft_msg msgs[50];
    for (uint64_t done = 0; done < n;) {
        size_t c = n - done < 50 ? (size_t)(n - done) : 50;
        while (stats(a, b->id).queued_msgs > 2000)
            usleep(100);
        for (size_t i = 0; i < c; i++)
            msgs[i] = (struct raft_msg){.type = RAFT_MSG_HEARTBEAT,
                                        .from = a->id, .to = b->id,
                                        .term = 1,
                                        .index = ++seqs[a->id][b->id]};
        CHECK(peer_send(a->t, msgs, c) == 0, "peer_send");
        done += c;
    }
    int64_t t0 = now_ms();
    while (got(b, a->id) < before + n) {
        CHECK(now_ms() - t0 < WAIT_MS, "%llu got %llu of %llu from %llu",
              (unsigned long long)b->id,
              (unsigned long long)(got(b, a->id) - before),
              (unsigned long long)n, (unsigned long long)a->id);
        sched_yield();
    }
    pthread_mutex_lock(&b->mu);
    CHECK(b->disorder == 0, "out of order at %llu", (unsigned long long)b->id);
    pthread_mutex_unlock(&b->mu);
}

/* snapshot sends snap_file from a to b and waits for the outcome. */
static void snapshot(struct node *a, struct node *b)
{
    struct raft_snapshot snap = {.meta = {.index = SNAP_INDEX, .term = 2}};
    snap.meta.conf.n_voters = 2;
    snap.meta.conf.voters[0] = a->id;
    snap.meta.conf.voters[1] = b->id;
    struct raft_msg m = {.type = RAFT_MSG_SNAP, .from = a->id, .to = b->id,
                         .term = 2, .snapshot = &snap};
    struct stat sb;
    CHECK(stat(snap_file, &sb) == 0, "stat");
    int fd = open(snap_file, O_RDONLY);
    CHECK(fd >= 0, "open %s", snap_file);
    pthread_mutex_lock(&a->mu);
    int ok_before = a->snap_ok, in_before = b->snaps_in;
    pthread_mutex_unlock(&a->mu);
    CHECK(peer_send_snapshot(a->t, b->id, &m, fd, (uint64_t)sb.st_size) == 0,
          "send snapshot");
    int64_t t0 = now_ms();
    for (;;) {
        pthread_mutex_lock(&a->mu);
        int ok = a->snap_ok, fail = a->snap_fail;
        pthread_mutex_unlock(&a->mu);
        CHECK(fail == 0, "snapshot %llu -> %llu failed",
              (unsigned long long)a->id, (unsigned long long)b->id);
        if (ok > ok_before)
            break;
        CHECK(now_ms() - t0 < WAIT_MS, "snapshot never finished");
        usleep(1000);
    }
    pthread_mutex_lock(&b->mu);
    CHECK(b->snaps_in == in_before + 1, "snapshot not taken");
    pthread_mutex_unlock(&b->mu);
}

/* pair_ok: messages both ways and a snapshot each way. */
static void pair_ok(struct node *a, struct node *b, const char *what)
{
    int64_t t0 = now_ms();
    wait_active(a, b->id, WAIT_MS);
    wait_active(b, a->id, WAIT_MS);
    int64_t up = now_ms() - t0;
    exchange(a, b, 5000);
    exchange(b, a, 5000);
    snapshot(a, b);
    snapshot(b, a);
    printf("ok %s: streams up in %lld ms, 5000 messages each way in order, "
           "a 4 MiB snapshot each way verified\n", what, (long long)up);
}

/* exchange_none: messages from d never reach r. */
static void exchange_none(struct node *d, struct node *r)
{
    struct raft_msg m = {.type = RAFT_MSG_HEARTBEAT, .from = d->id,
                         .to = r->id, .term = 1, .index = 1};
    for (int i = 0; i < 10; i++)
        peer_send(d->t, &m, 1); /* dropped while the peer is down */
    usleep(200 * 1000);
    CHECK(got(r, d->id) == 0, "%llu got messages from %llu",
          (unsigned long long)r->id, (unsigned long long)d->id);
}

/* refused: d dials r (which knows d) and gets nowhere for 1.5 s at least
 * and until two attempts failed: no stream ever came up, and none failed
 * on r's identity check (the handshake itself failed).  How long a failed
 * handshake takes depends on the machine's load (under ASan on two busy
 * cores one can take over a second), so the attempts are waited for, not
 * expected within a fixed time. */
static void refused(struct node *d, struct node *r, const char *url,
                    const char *what)
{
    const char *far[1] = {"https://127.0.0.1:1"}; /* r need not reach d */
    CHECK(peer_add(r->t, d->id, far, 1) == 0, "peer_add");
    link_url(d, r, url);
    int64_t t0 = now_ms();
    struct peer_stats st = stats(d, r->id);
    while (now_ms() - t0 < 1500 || st.failures < 2) {
        CHECK(!st.active && st.connects == 0, "%s: stream came up", what);
        CHECK(now_ms() - t0 < WAIT_MS, "%s: only %llu attempts", what,
              (unsigned long long)st.failures);
        usleep(5000);
        st = stats(d, r->id);
    }
    int64_t took = now_ms() - t0;
    exchange_none(d, r);
    st = stats(d, r->id);
    CHECK(!st.active && st.connects == 0, "%s: stream came up", what);
    CHECK(st.refusals == 0, "%s: refused by identity, not TLS", what);
    printf("ok %s: refused (%llu failed handshakes in %lld ms)\n", what,
           (unsigned long long)st.failures, (long long)took);
    /* Stop dialling (and the core's handshake error lines). */
    CHECK(peer_remove(d->t, r->id) == 0, "peer_remove");
    CHECK(peer_remove(r->t, d->id) == 0, "peer_remove");
}

static struct material self_signed(const char *name)
{
    char dir[160], cert[512], key[512];
    snprintf(dir, sizeof(dir), "%s/fixtures-%s", tmp_root, name);
    CHECK(rpc_tls_self_cert(dir, "https://127.0.0.1:2380", cert, key,
                            sizeof(cert)) == 0,
          "self cert");
    struct material m = {.cert = slurp(cert), .key = slurp(key),
                         .skip_verify = true};
    unlink(cert);
    unlink(key);
    rmdir(dir);
    return m;
}

static void material_free(struct material *m)
{
    free(m->cert);
    free(m->key);
    free(m->ca);
}

static void test_api(void)
{
    struct peer_transport *t;
    struct peer_config cfg = {.self = 1, .cluster_id = CLUSTER};
    CHECK(peer_transport_create(&cfg, &t) == 0, "create");
    const char *https[1] = {"https://127.0.0.1:2380"};
    const char *unixs[1] = {"unixs:///tmp/x.sock"};
    CHECK(peer_add(t, 2, https, 1) == ERR_UNSUPPORTED, "https without TLS");
    CHECK(peer_add(t, 2, unixs, 1) == ERR_UNSUPPORTED, "unixs without TLS");
    peer_transport_close(t);
    struct dial_tls half = {.cert_pem = "x"};
    cfg.tls = &half;
    CHECK(peer_transport_create(&cfg, &t) == ERR_INVAL, "cert without key");
    struct dial_tls none = {.skip_verify = true};
    cfg.tls = &none;
    CHECK(peer_transport_create(&cfg, &t) == 0, "TLS without identity");
    const char *bad[1] = {"https://nohost"};
    CHECK(peer_add(t, 2, bad, 1) == ERR_INVAL, "bad https URL taken");
    CHECK(peer_add(t, 2, https, 1) == 0, "https with TLS refused");
    CHECK(peer_update(t, 2, unixs, 1) == 0, "unixs with TLS refused");
    peer_transport_close(t);
    printf("ok api: https/unixs refused without TLS, taken with it; half a "
           "key pair refused\n");
}

/* Self-signed certificates (--peer-auto-tls); returns A's material for
 * the CA part's checks. */
static void test_auto(struct material *ma, struct material *mb)
{
    struct node *a = &nodes[1], *b = &nodes[2], *v = &nodes[3];
    struct node *p = &nodes[4];
    node_start(a, 1, ma, true, false);
    node_start(b, 2, mb, true, false);
    link_url(a, b, b->url);
    link_url(b, a, a->url);
    pair_ok(a, b, "auto TLS (self-signed, unverified)");
    /* Verifying against the wrong self-signed certificate fails. */
    struct material mv = {.cert = mb->cert, .key = mb->key, .ca = mb->cert};
    node_start(v, 3, &mv, false, false);
    refused(v, a, a->url, "server certificate not signed by the trusted CA");
    /* A TLS transport still dials http:// members in the clear; a plain
     * one refuses https://. */
    node_start(p, 4, NULL, true, false);
    const char *far[1] = {"http://127.0.0.1:1"}; /* p need not reach a */
    CHECK(peer_add(p->t, a->id, far, 1) == 0, "peer_add");
    link_url(a, p, p->url);
    wait_active(a, p->id, WAIT_MS);
    exchange(a, p, 1000);
    const char *urls[1] = {a->url};
    CHECK(peer_update(p->t, a->id, urls, 1) == ERR_UNSUPPORTED,
          "plain https");
    printf("ok mixed: a TLS transport dials http:// in the clear\n");
}

/* The certificate must be valid for the host dialled: server-ip.crt names
 * 127.0.0.1 only, so dialling it as localhost fails (Go checks the same). */
static void test_host_name(const struct material *mc)
{
    struct material mip = {.cert = slurp(FIXTURES "/server-ip.crt"),
                           .key = slurp(FIXTURES "/server-ip.key.insecure"),
                           .ca = mc->ca, .verify_clients = true};
    struct node *q = &nodes[12], *w = &nodes[13];
    struct material dial = {.cert = mc->cert, .key = mc->key, .ca = mc->ca};
    node_start(q, 12, &mip, true, false);
    node_start(w, 13, &dial, false, false);
    char by_name[160];
    snprintf(by_name, sizeof(by_name), "https://localhost:%s",
             strrchr(q->url, ':') + 1);
    refused(w, q, by_name, "certificate not valid for the host dialled");
    const char *far[1] = {"https://127.0.0.1:1"};
    CHECK(peer_add(q->t, w->id, far, 1) == 0, "peer_add");
    link_url(w, q, q->url);
    wait_active(w, q->id, WAIT_MS);
    exchange(w, q, 100);
    printf("ok the same certificate dialled as 127.0.0.1 is accepted\n");
    free(mip.cert);
    free(mip.key);
}

static void test_ca(struct material *ma, struct material *mb)
{
    struct material mc = {.cert = slurp(FIXTURES "/server.crt"),
                          .key = slurp(FIXTURES "/server.key.insecure"),
                          .ca = slurp(FIXTURES "/ca.crt"),
                          .verify_clients = true};
    struct node *c = &nodes[5], *d = &nodes[6];
    node_start(c, 5, &mc, true, true);
    node_start(d, 6, &mc, true, true);
    link_url(c, d, d->url);
    link_url(d, c, c->unix_url);
    pair_ok(c, d, "CA-signed + client cert auth (https:// and unixs://)");
    struct material other = {.cert = mc.cert, .key = mc.key,
                             .ca = slurp(FIXTURES "/CommonName-root.crt")};
    node_start(&nodes[7], 7, &other, false, false);
    refused(&nodes[7], c, c->url, "server certificate from another CA");
    struct material anon = {.ca = mc.ca};
    node_start(&nodes[8], 8, &anon, false, false);
    refused(&nodes[8], c, c->url, "no client certificate");
    struct material anon_skip = {.skip_verify = true};
    node_start(&nodes[9], 9, &anon_skip, false, false);
    refused(&nodes[9], c, c->url, "no client certificate, unverified server");
    struct material self = {.cert = ma->cert, .key = ma->key,
                            .skip_verify = true};
    node_start(&nodes[10], 10, &self, false, false);
    refused(&nodes[10], c, c->url, "self-signed client certificate");
    struct material strict = {.cert = mc.cert, .key = mc.key, .ca = mc.ca};
    node_start(&nodes[11], 11, &strict, false, false);
    refused(&nodes[11], &nodes[2], nodes[2].url,
            "verifying a self-signed server certificate");
    (void)mb;
    test_host_name(&mc);
    for (int i = 5; i <= 13; i++)
        node_end(&nodes[i]);
    free(other.ca);
    material_free(&mc);
}

/* threads_n returns how many threads the process has. */
static int threads_n(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL, "open /proc/self/status");
    while (n < 0 && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Threads: %d", &n) != 1)
            n = -1;
    fclose(f);
    CHECK(n > 0, "no Threads: line");
    return n;
}

/* grpc_quiesce waits, once every transport and server is closed, until
 * gRPC has finished shutting down and all its threads have exited, so that
 * main returns with none running.  The last grpc_shutdown_blocking of the
 * transports and servers does not end the library: subchannels hold
 * references of their own, dropped on gRPC's threads up to a back-off
 * later (a retry timer, a connect attempt being cancelled), and the last
 * one runs the clean-up on a detached thread.  Returning from main
 * meanwhile runs OpenSSL's atexit clean-up, which deletes OpenSSL's
 * thread-local keys while gRPC's threads still run: the per-thread error
 * state (ERR_STATE, from ERR_clear_error in the TLS handshakers) of every
 * thread that exits after that is never freed, and LeakSanitizer reported
 * it ("libcrypto leak", more often on a loaded machine).  Nothing leaks in
 * the transport: this only orders the process's exit. */
static void grpc_quiesce(void)
{
    int64_t t0 = now_ms();
    while (grpc_is_initialized() || threads_n() > 1) {
        CHECK(now_ms() - t0 < WAIT_MS, "gRPC still running");
        usleep(1000);
    }
}

static void make_snap_file(void)
{
    snprintf(snap_file, sizeof(snap_file), "%s/source.db", tmp_root);
    random_file(snap_file, 4u << 20);
}

int main(void)
{
    log_set_level(getenv("PEER_TLS_LOG") ? LOG_DEBUG : LOG_ERROR);
    /* test_host_name resolves "localhost"; gRPC's c-ares resolver leaks 10
     * bytes on its first lookup (LeakSanitizer stops the run), the native
     * one does not. */
    setenv("GRPC_DNS_RESOLVER", "native", 0);
    snprintf(tmp_root, sizeof(tmp_root), "/tmp/peer_tls.XXXXXX");
    CHECK(mkdtemp(tmp_root) != NULL, "mkdtemp");
    int64_t t0 = now_ms();
    make_snap_file();
    test_api();
    struct material ma = self_signed("a"), mb = self_signed("b");
    test_auto(&ma, &mb);
    if (access(FIXTURES "/server.crt", R_OK) == 0)
        test_ca(&ma, &mb);
    else
        printf("skip CA-signed part: %s not installed\n", FIXTURES);
    for (int i = 1; i <= 4; i++)
        node_end(&nodes[i]);
    material_free(&ma);
    material_free(&mb);
    grpc_quiesce();
    unlink(snap_file);
    CHECK(rmdir(tmp_root) == 0, "rmdir %s", tmp_root);
    printf("peer.tls passed in %.1f s\n", (double)(now_ms() - t0) / 1e3);
    return 0;
}
