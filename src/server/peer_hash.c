/*
 * peer_hash.c - a peer's HashKV for the corruption checks, asked on its
 * peer listener.
 *
 * etcd 3.4's checks ask each peer's /members/hashkv on the peer URL; a
 * client API call would need the client credentials (auth: HashKV needs
 * root; --client-cert-auth: a client certificate of the client CA), which
 * a member does not have.  cetcd asks the peer listener's
 * /cetcdpb.Maintenance/HashKV (api/maintenance.c) through peer_call: the
 * peer transport's URLs and TLS material, one call on a thread of the
 * transport, while the caller (a corruption check's thread) waits.
 */
#include <pthread.h>
#include <string.h>

#include "cetcdpb/internal.pb-c.h"
#include "peer/peer.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"

#define PEER_HASH_PATH "/cetcdpb.Maintenance/HashKV"

/* The caller's wait for the one answer of peer_call. */
struct wait_answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    struct server_peer_hash *out;
};

int server__peer_hash_decode(const uint8_t *reply, size_t len,
                             struct server_peer_hash *out)
{
    Cetcdpb__PeerHashResponse *r =
        cetcdpb__peer_hash_response__unpack(NULL, len, reply);
    if (r == NULL)
        return ERR_IO;
    /* Only the refusals svc_peer_hash_kv sends travel in the message; any
     * other value is a member that speaks another version of it. */
    int err = r->error == 0 || r->error == ERR_COMPACTED ||
                      r->error == ERR_FUTURE_REV
                  ? r->error
                  : ERR_IO;
    out->hash = r->hash;
    out->rev = r->revision;
    out->compact_rev = r->compact_revision;
    cetcdpb__peer_hash_response__free_unpacked(r, NULL);
    return err;
}

/* The answer, on the peer_call thread. */
static void answered(void *arg, int err, const uint8_t *reply, size_t len)
{
    struct wait_answer *w = arg;
    if (err == 0)
        err = server__peer_hash_decode(reply, len, w->out);
    pthread_mutex_lock(&w->mu);
    w->out->err = err;
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu); /* w is the waiter's: not touched after */
}

int server_peer_hash_kv(struct server *s, uint64_t id, int64_t rev,
                        bool compacted, uint32_t timeout_ms,
                        struct server_peer_hash *out)
{
    CHECK(s != NULL && out != NULL && timeout_ms > 0);
    memset(out, 0, sizeof *out);
    if (s->transport == NULL) /* one member: no peers */
        return out->err = ERR_NOTFOUND;
    Cetcdpb__PeerHashRequest req = CETCDPB__PEER_HASH_REQUEST__INIT;
    req.cluster_id = s->cluster_id;
    req.from = s->member_id;
    req.revision = rev;
    req.compacted = compacted;
    uint8_t buf[64];
    size_t len = cetcdpb__peer_hash_request__get_packed_size(&req);
    CHECK(len <= sizeof buf);
    cetcdpb__peer_hash_request__pack(&req, buf);
    struct wait_answer w = {.done = false, .out = out};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    int rc = peer_call(s->transport, id, PEER_HASH_PATH, buf, len,
                       timeout_ms, answered, &w);
    if (rc == 0) {
        /* peer_call answers exactly once, within timeout_ms (or at once
         * when the transport closes). */
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
    } else {
        out->err = rc;
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return out->err;
}
