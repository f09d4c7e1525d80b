/*
 * stream.c - struct svc_mem_stream, the in-process struct svc_stream
 * (svc.h): each send is packed into a bounded FIFO that the owner takes
 * from; close and release are recorded.  One mutex guards it all, so the
 * service may send from any thread while the owner waits for messages.
 */
#include "svc/svc.h"

#include <errno.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

/* One packed message. */
struct packed {
    uint8_t *p; /* the bytes (owned) */
    size_t n;   /* their length */
};

/* Owned by its creator; send/close/release from any thread under mu. */
struct svc_mem_stream {
    struct svc_stream st;   /* what the service is given */
    pthread_mutex_t mu;     /* guards everything below */
    pthread_cond_t cv;      /* signalled on each send */
    struct packed *q;       /* ring of st.queue_max + the control
                               reserve messages */
    size_t cap;             /* of q */
    size_t head;            /* oldest message in q */
    size_t n;               /* messages in q */
    bool closed;            /* the service called close */
    int close_err;          /* its err */
    bool released;          /* the service called release */
    const char *md_key;     /* the one metadata pair (borrowed), or NULL */
    const char *md_value;   /* its value */
};

/* put keeps m if fewer than limit messages are kept. */
static int put(struct svc_mem_stream *ms, const ProtobufCMessage *m,
               size_t limit)
{
    CHECK(ms != NULL && m != NULL);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = mem_malloc(n > 0 ? n : 1);
    if (p == NULL)
        return ERR_NOMEM;
    CHECK(protobuf_c_message_pack(m, p) == n);
    int rc = 0;
    pthread_mutex_lock(&ms->mu);
    if (ms->closed || ms->released) {
        rc = ERR_CLOSED;
    } else if (ms->n >= limit) {
        rc = ERR_FULL;
    } else {
        ms->q[(ms->head + ms->n) % ms->cap] = (struct packed){p, n};
        ms->n++;
        p = NULL;
        pthread_cond_broadcast(&ms->cv);
    }
    pthread_mutex_unlock(&ms->mu);
    mem_free(p);
    return rc;
}

static int mem_send(void *ctx, const ProtobufCMessage *m)
{
    struct svc_mem_stream *ms = ctx;
    return put(ms, m, ms->st.queue_max);
}

static int mem_send_ctrl(void *ctx, const ProtobufCMessage *m)
{
    struct svc_mem_stream *ms = ctx;
    return put(ms, m, ms->cap);
}

static const char *mem_metadata(void *ctx, const char *key, size_t *len_out)
{
    struct svc_mem_stream *ms = ctx;
    CHECK(ms != NULL && key != NULL && len_out != NULL);
    if (ms->md_key == NULL || strcmp(ms->md_key, key) != 0)
        return NULL;
    *len_out = strlen(ms->md_value);
    return ms->md_value;
}

void svc_mem_stream_metadata_set(struct svc_mem_stream *ms, const char *key,
                                 const char *value)
{
    CHECK(ms != NULL && key != NULL && value != NULL);
    ms->md_key = key;
    ms->md_value = value;
}

static int mem_close(void *ctx, int err)
{
    struct svc_mem_stream *ms = ctx;
    CHECK(ms != NULL && err <= 0);
    int rc = 0;
    pthread_mutex_lock(&ms->mu);
    if (ms->closed || ms->released) {
        rc = ERR_CLOSED;
    } else {
        ms->closed = true;
        ms->close_err = err;
        pthread_cond_broadcast(&ms->cv);
    }
    pthread_mutex_unlock(&ms->mu);
    return rc;
}

static void mem_release(void *ctx)
{
    struct svc_mem_stream *ms = ctx;
    CHECK(ms != NULL);
    pthread_mutex_lock(&ms->mu);
    CHECK(!ms->released); /* exactly once */
    ms->released = true;
    pthread_cond_broadcast(&ms->cv);
    pthread_mutex_unlock(&ms->mu);
}

int svc_mem_stream_create(size_t queue_max, struct svc_mem_stream **out)
{
    CHECK(out != NULL);
    if (queue_max == 0)
        return ERR_INVAL;
    struct svc_mem_stream *ms = mem_calloc(1, sizeof *ms);
    if (ms == NULL)
        return ERR_NOMEM;
    ms->cap = queue_max + SVC_STREAM_CTRL_RESERVE;
    ms->q = mem_calloc(ms->cap, sizeof *ms->q);
    if (ms->q == NULL) {
        mem_free(ms);
        return ERR_NOMEM;
    }
    ms->st = (struct svc_stream){
        .send = mem_send,
        .send_ctrl = mem_send_ctrl,
        .close = mem_close,
        .release = mem_release,
        .metadata = mem_metadata,
        .ctx = ms,
        .queue_max = queue_max,
    };
    pthread_mutex_init(&ms->mu, NULL);
    pthread_cond_init(&ms->cv, NULL);
    *out = ms;
    return 0;
}

struct svc_stream *svc_mem_stream_get(struct svc_mem_stream *ms)
{
    CHECK(ms != NULL);
    return &ms->st;
}

/* deadline_at: timeout_ms from now on the cv's clock (CLOCK_REALTIME). */
static struct timespec deadline_at(int timeout_ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

int svc_mem_stream_take(struct svc_mem_stream *ms,
                        const ProtobufCMessageDescriptor *d, int timeout_ms,
                        ProtobufCMessage **m_out)
{
    CHECK(ms != NULL && d != NULL && m_out != NULL && timeout_ms >= 0);
    struct timespec until = deadline_at(timeout_ms);
    pthread_mutex_lock(&ms->mu);
    int w = 0;
    while (ms->n == 0 && w != ETIMEDOUT)
        w = pthread_cond_timedwait(&ms->cv, &ms->mu, &until);
    struct packed pk = {NULL, 0};
    if (ms->n > 0) {
        pk = ms->q[ms->head];
        ms->q[ms->head] = (struct packed){NULL, 0};
        ms->head = (ms->head + 1) % ms->cap;
        ms->n--;
    }
    pthread_mutex_unlock(&ms->mu);
    if (pk.p == NULL)
        return ERR_TIMEOUT;
    *m_out = protobuf_c_message_unpack(d, NULL, pk.n, pk.p);
    mem_free(pk.p);
    return *m_out != NULL ? 0 : ERR_CORRUPT;
}

bool svc_mem_stream_closed(struct svc_mem_stream *ms, int *err_out)
{
    CHECK(ms != NULL);
    pthread_mutex_lock(&ms->mu);
    bool closed = ms->closed;
    if (closed && err_out != NULL)
        *err_out = ms->close_err;
    pthread_mutex_unlock(&ms->mu);
    return closed;
}

bool svc_mem_stream_released(struct svc_mem_stream *ms)
{
    CHECK(ms != NULL);
    pthread_mutex_lock(&ms->mu);
    bool released = ms->released;
    pthread_mutex_unlock(&ms->mu);
    return released;
}

void svc_mem_stream_destroy(struct svc_mem_stream *ms)
{
    if (ms == NULL)
        return;
    while (ms->n > 0) {
        mem_free(ms->q[ms->head].p);
        ms->head = (ms->head + 1) % ms->cap;
        ms->n--;
    }
    mem_free(ms->q);
    pthread_cond_destroy(&ms->cv);
    pthread_mutex_destroy(&ms->mu);
    mem_free(ms);
}
