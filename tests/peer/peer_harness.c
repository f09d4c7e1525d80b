/*
 * peer_harness.c - the scaffolding the peer transport programs share: see
 * peer_harness.h.
 */
#include "peer_harness.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>

int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

bool files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool eq = fa != NULL && fb != NULL;
    static char ba[1 << 16], bb[1 << 16];
    while (eq) {
        size_t na = fread(ba, 1, sizeof(ba), fa);
        size_t nb = fread(bb, 1, sizeof(bb), fb);
        eq = na == nb && memcmp(ba, bb, na) == 0;
        if (na == 0)
            break;
    }
    if (fa != NULL)
        fclose(fa);
    if (fb != NULL)
        fclose(fb);
    return eq;
}

void random_file(const char *path, uint64_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < size / 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: any bytes */
        fwrite(&x, 8, 1, f);
    }
    fclose(f);
}

void node_init(struct node *nd, raft_id id, const char *root)
{
    memset(nd, 0, sizeof(*nd));
    nd->id = id;
    pthread_mutex_init(&nd->mu, NULL);
    if (root == NULL)
        return;
    snprintf(nd->dir, sizeof(nd->dir), "%s/n%llu", root,
             (unsigned long long)id);
    CHECK(mkdir(nd->dir, 0700) == 0, "mkdir %s", nd->dir);
}

void node_listen(struct node *nd, const struct rpc_server_config *scfg,
                 void (*more)(struct node *nd))
{
    CHECK(rpc_server_create(scfg, &nd->srv) == 0, "server create");
    CHECK(peer_transport_register(nd->t, nd->srv) == 0, "register");
    if (more != NULL)
        more(nd);
    CHECK(rpc_server_start(nd->srv) == 0, "server start on %s",
          scfg->urls[0]);
    nd->port = rpc_server_port(nd->srv, 0);
    snprintf(nd->url, sizeof(nd->url), "%s://127.0.0.1:%d",
             scfg->tls_cert_pem != NULL ? "https" : "http", nd->port);
}

void node_stop(struct node *nd)
{
    if (nd->srv != NULL)
        rpc_server_close(nd->srv); /* Before the transport: see peer.h. */
    nd->srv = NULL;
    peer_transport_close(nd->t);
    nd->t = NULL;
}

void link_url(struct node *from, const struct node *to, const char *url)
{
    const char *urls[1] = {url};
    CHECK(peer_add(from->t, to->id, urls, 1) == 0, "peer_add %s", url);
}

void link_peer(struct node *from, const struct node *to)
{
    link_url(from, to, to->url);
}

struct peer_stats stats(struct node *a, raft_id id)
{
    struct peer_stats st;
    CHECK(peer_stats(a->t, id, &st) == 0, "stats");
    return st;
}

int64_t wait_active(struct node *a, raft_id id, int64_t max_ms)
{
    int64_t t0 = now_us();
    while (!stats(a, id).active) {
        CHECK(now_us() - t0 < max_ms * 1000, "%llu -> %llu not active",
              (unsigned long long)a->id, (unsigned long long)id);
        usleep(2000);
    }
    return (now_us() - t0) / 1000;
}

uint64_t got(struct node *nd, raft_id from)
{
    pthread_mutex_lock(&nd->mu);
    uint64_t n = nd->got[from];
    pthread_mutex_unlock(&nd->mu);
    return n;
}

void on_snapshot_status(void *arg, raft_id to, bool ok)
{
    struct node *nd = arg;
    (void)to;
    pthread_mutex_lock(&nd->mu);
    if (ok)
        nd->snap_ok++;
    else
        nd->snap_fail++;
    pthread_mutex_unlock(&nd->mu);
}
