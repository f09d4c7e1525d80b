/*
 * register.c - the proxy's registration under --resolver-prefix (etcd's
 * grpcproxy.Register with a concurrency.Session): one thread that makes a
 * lease of --resolver-ttl seconds, puts "<prefix>/<addr>" with it and
 * keeps the lease alive every TTL/3; when the lease is lost (expired, the
 * connection gone) it logs etcd's warnings and registers again, at most
 * once a second.  The key goes with the lease when the proxy dies, as in
 * etcd (no revoke at close either: etcd's process dies of the signal).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "grpcproxy/grpcproxy_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/thread.h"

#define LOGPKG "grpcproxy"

/* reg_stopping: close has begun. */
static bool reg_stopping(struct grpcproxy *p)
{
    bool stop;

    pthread_mutex_lock(&p->reg_mu);
    stop = p->reg_stop;
    pthread_mutex_unlock(&p->reg_mu);
    return stop;
}

/* sleep_ms waits ms, or less when close begins; false once it has. */
static bool sleep_ms(struct grpcproxy *p, int64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&p->reg_mu);
    while (!p->reg_stop) {
        if (pthread_cond_timedwait(&p->reg_cv, &p->reg_mu, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&p->reg_mu);
    return !reg_stopping(p);
}

/* json_str appends s as a Go encoding/json string to out (cap). */
static size_t json_str(char *out, size_t cap, size_t at, const char *s)
{
    static const char hex[] = "0123456789abcdef";

#define PUT(c)                                                               \
    do {                                                                     \
        if (at + 1 < cap)                                                    \
            out[at] = (c);                                                   \
        at++;                                                                \
    } while (0)
    PUT('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            PUT('\\');
            PUT((char)c);
        } else if (c == '\n') {
            PUT('\\');
            PUT('n');
        } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
            PUT('\\');
            PUT('u');
            PUT('0');
            PUT('0');
            PUT(hex[c >> 4]);
            PUT(hex[c & 15]);
        } else {
            PUT((char)c);
        }
    }
    PUT('"');
#undef PUT
    if (at < cap)
        out[at] = '\0';
    return at;
}

/* value_build: endpoints' JSON for this proxy. */
static void value_build(const struct grpcproxy *p, char *out, size_t cap)
{
    char meta[600];
    size_t at;

    at = (size_t)snprintf(meta, sizeof meta, "{\"name\":");
    at = json_str(meta, sizeof meta, at, p->hostname);
    snprintf(meta + at, sizeof meta - at, "}");
    at = (size_t)snprintf(out, cap, "{\"Op\":0,\"Addr\":");
    at = json_str(out, cap, at, p->advertise);
    at += (size_t)snprintf(out + at, cap > at ? cap - at : 0,
                           ",\"Metadata\":");
    at = json_str(out, cap, at, meta);
    snprintf(out + at, cap > at ? cap - at : 0, "}");
}

/* session registers once; returns the lease id, or 0 after a warning. */
static int64_t session(struct grpcproxy *p)
{
    Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__LeaseGrantResponse *gr = NULL;
    ProtobufCMessage *pr = NULL;
    struct cetcd_status st;
    char key[1024], value[2048];
    int64_t id;

    g.ttl = p->ttl;
    if (cetcd_call_unary(p->cli, "/etcdserverpb.Lease/LeaseGrant", &g.base,
                         &etcdserverpb__lease_grant_response__descriptor,
                         (ProtobufCMessage **)&gr, &st) != 0) {
        log_warn(LOGPKG, "failed to create a session %s", st.message);
        return 0;
    }
    id = gr->id;
    etcdserverpb__lease_grant_response__free_unpacked(gr, NULL);
    snprintf(key, sizeof key, "%s/%s", p->prefix, p->advertise);
    value_build(p, value, sizeof value);
    put.key.data = (uint8_t *)key;
    put.key.len = strlen(key);
    put.value.data = (uint8_t *)value;
    put.value.len = strlen(value);
    put.lease = id;
    if (cetcd_call_unary(p->cli, "/etcdserverpb.KV/Put", &put.base,
                         &etcdserverpb__put_response__descriptor, &pr,
                         &st) != 0) {
        log_warn(LOGPKG, "failed to create a session %s", st.message);
        return 0;
    }
    protobuf_c_message_free_unpacked(pr, NULL);
    log_info(LOGPKG, "registered \"%s\" with %d-second lease", p->advertise,
             p->ttl);
    return id;
}

/* keep_alive keeps lease id alive until it is lost (true) or close
 * begins (false). */
static bool keep_alive(struct grpcproxy *p, int64_t id)
{
    Etcdserverpb__LeaseKeepAliveRequest ka =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    struct cetcd_stream *s = NULL;
    struct cetcd_status st;
    int64_t every = (int64_t)p->ttl * 1000 / 3;
    bool lost = true;

    if (every < 100)
        every = 100;
    ka.id = id;
    if (cetcd_stream_open(p->cli, "/etcdserverpb.Lease/LeaseKeepAlive",
                          &etcdserverpb__lease_keep_alive_response__descriptor,
                          NULL, &s, &st) != 0)
        return true;
    while (!reg_stopping(p)) {
        ProtobufCMessage *m = NULL;
        Etcdserverpb__LeaseKeepAliveResponse *r;
        int64_t waited = 0;
        int rc;

        if (cetcd_stream_send(s, &ka.base, &st) != 0)
            break;
        /* The answer, within the lease's TTL (in steps, to see a close). */
        do {
            rc = cetcd_stream_recv(s, 200, &m, &st);
            waited += 200;
        } while (rc == CETCD_STREAM_WAIT_TIMEOUT && !reg_stopping(p) &&
                 waited < (int64_t)p->ttl * 1000);
        if (rc != 0 || m == NULL)
            break;
        r = (Etcdserverpb__LeaseKeepAliveResponse *)m;
        rc = r->ttl <= 0;
        protobuf_c_message_free_unpacked(m, NULL);
        if (rc)
            break;
        if (!sleep_ms(p, every)) {
            lost = false;
            break;
        }
    }
    if (reg_stopping(p))
        lost = false;
    cetcd_stream_close(s);
    return lost;
}

static void *reg_main(void *arg)
{
    struct grpcproxy *p = arg;
    struct timespec last = {0, 0}, now;

    thread_name_set(pthread_self(), "proxy-register");
    while (!reg_stopping(p)) {
        int64_t since, id;

        clock_gettime(CLOCK_MONOTONIC, &now);
        since = (now.tv_sec - last.tv_sec) * 1000 +
                (now.tv_nsec - last.tv_nsec) / 1000000;
        if (last.tv_sec != 0 && since < 1000 && !sleep_ms(p, 1000 - since))
            break;
        clock_gettime(CLOCK_MONOTONIC, &last);
        id = session(p);
        if (id == 0)
            continue;
        if (!keep_alive(p, id))
            break;
        log_warn(LOGPKG, "session expired; possible network partition or "
                         "server restart");
        log_warn(LOGPKG, "creating a new session to rejoin");
    }
    return NULL;
}

int gp_register_start(struct grpcproxy *p)
{
    if (pthread_create(&p->reg_thread, NULL, reg_main, p) != 0)
        return ERR_NOMEM;
    p->reg_started = true;
    return 0;
}

void gp_register_stop(struct grpcproxy *p)
{
    if (!p->reg_started)
        return;
    pthread_mutex_lock(&p->reg_mu);
    p->reg_stop = true;
    pthread_cond_broadcast(&p->reg_cv);
    pthread_mutex_unlock(&p->reg_mu);
    pthread_join(p->reg_thread, NULL);
    p->reg_started = false;
}
