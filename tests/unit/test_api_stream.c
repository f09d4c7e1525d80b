/*
 * test_api_stream.c - goal: api/stream.c puts a struct svc_stream on a
 * gRPC server stream faithfully: inbound bytes reach the service decoded,
 * one by one, and a message that does not decode ends the stream with
 * grpc-go's INTERNAL "grpc: error unmarshalling request" (the service
 * hears no more); the service's sends go to rpc_stream_send (send_ctrl to
 * rpc_stream_send_ctrl), its metadata lookups to rpc_stream_metadata; its close
 * ends the stream with api_error's status; a refused open ends it with the
 * refusal; the service hears end exactly once, also after an early
 * release; the runtime's stream is released exactly once.
 *
 * Method: the test plays the runtime.  The link wraps (--wrap, see
 * tests/CMakeLists.txt) rpc_server_register_stream (records the ops) and
 * the rpc_stream_* functions the adapter calls (record what it did on a
 * fake stream); the test then calls on_open, on_message and on_close as a
 * loop would.  The ASan build checks that every adapter is freed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "util/err.h"

/* --- the runtime, as the adapter sees it --------------------------------- */

/* A fake rpc_stream: what the adapter did to it. */
struct fake {
    void *data;            /* rpc_stream_data_set */
    int sends;             /* rpc_stream_send calls that queued */
    int ctrl_sends;        /* rpc_stream_send_ctrl calls that queued */
    int64_t last_rev;      /* header.revision of the last PutResponse sent */
    int finishes;          /* rpc_stream_finish calls that took */
    grpc_status_code code; /* the first finish's */
    char msg[160];
    int releases;          /* rpc_stream_release calls */
};

static const struct rpc_stream_ops *ops;
static void *ops_ctx;

int __wrap_rpc_server_register_stream(struct rpc_server *srv, const char *path,
                                      const struct rpc_stream_ops *o,
                                      void *ctx)
{
    (void)srv;
    assert_string_equal(path, "/test.Echo/Stream");
    ops = o;
    ops_ctx = ctx;
    return 0;
}

int __wrap_rpc_stream_send(struct rpc_stream *s, const ProtobufCMessage *m)
{
    struct fake *f = (struct fake *)s;
    if (f->finishes > 0)
        return ERR_CLOSED;
    assert_ptr_equal(m->descriptor, &etcdserverpb__put_response__descriptor);
    f->last_rev = ((const Etcdserverpb__PutResponse *)m)->header->revision;
    f->sends++;
    return 0;
}

int __wrap_rpc_stream_send_ctrl(struct rpc_stream *s,
                                const ProtobufCMessage *m)
{
    struct fake *f = (struct fake *)s;
    assert_ptr_equal(m->descriptor, &etcdserverpb__put_response__descriptor);
    f->ctrl_sends++;
    return 0;
}

/* The client sent one metadata pair: hasleader: true. */
const char *__wrap_rpc_stream_metadata(const struct rpc_stream *s,
                                       const char *key, size_t *len_out)
{
    (void)s;
    if (strcmp(key, "hasleader") != 0)
        return NULL;
    *len_out = 4;
    return "true";
}

int __wrap_rpc_stream_finish(struct rpc_stream *s, grpc_status_code code,
                             const char *msg)
{
    struct fake *f = (struct fake *)s;
    if (f->finishes++ > 0)
        return ERR_CLOSED;
    f->code = code;
    snprintf(f->msg, sizeof f->msg, "%s", msg ? msg : "");
    return 0;
}

void __wrap_rpc_stream_release(struct rpc_stream *s)
{
    ((struct fake *)s)->releases++;
}

void __wrap_rpc_stream_data_set(struct rpc_stream *s, void *data)
{
    ((struct fake *)s)->data = data;
}

void *__wrap_rpc_stream_data_get(const struct rpc_stream *s)
{
    return ((const struct fake *)s)->data;
}

/* --- a streaming service ------------------------------------------------- */

/* Echo: every PutRequest is answered with a PutResponse whose revision is
 * the value's length; a value "close" closes with ERR_NO_SPACE, "release"
 * releases the stream at once. */
static struct {
    int refuse;             /* what open returns */
    struct svc_stream *st;  /* the open stream */
    int recvs, half_closes; /* recv calls with a message / NULL */
    int ends;               /* end calls */
    bool cancelled;         /* the last end's */
    bool released;          /* the service released st */
    bool md_seen;           /* "md" found the client's metadata */
} echo;

static int echo_open(struct server *s, struct svc_stream *st, void **out)
{
    assert_ptr_equal(s, (struct server *)&echo);
    if (echo.refuse != 0)
        return echo.refuse;
    assert_int_equal(st->queue_max, 7);
    echo.st = st;
    *out = &echo;
    return 0;
}

static void echo_recv(void *state, const ProtobufCMessage *m)
{
    assert_ptr_equal(state, &echo);
    if (m == NULL) {
        echo.half_closes++;
        assert_int_equal(echo.st->close(echo.st->ctx, 0), 0);
        return;
    }
    echo.recvs++;
    const Etcdserverpb__PutRequest *p = (const Etcdserverpb__PutRequest *)m;
    if (p->value.len == 5 && memcmp(p->value.data, "close", 5) == 0) {
        assert_int_equal(echo.st->close(echo.st->ctx, ERR_NO_SPACE), 0);
        return;
    }
    if (p->value.len == 4 && memcmp(p->value.data, "ctrl", 4) == 0) {
        Etcdserverpb__PutResponse r = ETCDSERVERPB__PUT_RESPONSE__INIT;
        assert_int_equal(echo.st->send_ctrl(echo.st->ctx, &r.base), 0);
        return;
    }
    if (p->value.len == 2 && memcmp(p->value.data, "md", 2) == 0) {
        size_t n = 0;
        const char *v = echo.st->metadata(echo.st->ctx, "hasleader", &n);
        assert_non_null(v);
        assert_int_equal(n, 4);
        assert_memory_equal(v, "true", 4);
        assert_null(echo.st->metadata(echo.st->ctx, "token", &n));
        echo.md_seen = true;
        return;
    }
    if (p->value.len == 7 && memcmp(p->value.data, "release", 7) == 0) {
        echo.released = true;
        echo.st->release(echo.st->ctx);
        return;
    }
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    h.revision = (int64_t)p->value.len;
    Etcdserverpb__PutResponse r = ETCDSERVERPB__PUT_RESPONSE__INIT;
    r.header = &h;
    assert_int_equal(echo.st->send(echo.st->ctx, &r.base), 0);
}

static void echo_end(void *state, bool cancelled)
{
    assert_ptr_equal(state, &echo);
    echo.ends++;
    echo.cancelled = cancelled;
    if (!echo.released) {
        echo.released = true;
        echo.st->release(echo.st->ctx);
    }
}

static const struct svc_stream_handler handler = {
    &etcdserverpb__put_request__descriptor, echo_open, echo_recv, echo_end};
static const struct api_stream_method method = {
    &handler, (struct server *)&echo, 7};

/* deliver hands the adapter one client PutRequest with value val. */
static void deliver(struct fake *f, const char *val)
{
    Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
    p.key = (ProtobufCBinaryData){1, (uint8_t *)"k"};
    p.value = (ProtobufCBinaryData){strlen(val), (uint8_t *)val};
    uint8_t buf[128];
    size_t n = etcdserverpb__put_request__pack(&p, buf);
    ops->on_message((struct rpc_stream *)f, buf, n, ops_ctx);
}

static int setup(void **state)
{
    (void)state;
    memset(&echo, 0, sizeof echo);
    assert_int_equal(api__stream_register((struct rpc_server *)&echo,
                                          "/test.Echo/Stream", &method),
                     0);
    assert_non_null(ops);
    return 0;
}

/* --- the tests ----------------------------------------------------------- */

static void test_messages_and_half_close(void **state)
{
    (void)state;
    struct fake f = {0};
    ops->on_open((struct rpc_stream *)&f, ops_ctx);
    assert_non_null(f.data);
    deliver(&f, "abc");
    deliver(&f, "");
    assert_int_equal(echo.recvs, 2);
    assert_int_equal(f.sends, 2);
    assert_int_equal(f.last_rev, 0);
    ops->on_message((struct rpc_stream *)&f, NULL, 0, ops_ctx);
    assert_int_equal(echo.half_closes, 1);
    assert_int_equal(f.finishes, 1);
    assert_int_equal(f.code, GRPC_STATUS_OK);
    assert_int_equal(f.releases, 0);
    ops->on_close((struct rpc_stream *)&f, false, ops_ctx);
    assert_int_equal(echo.ends, 1);
    assert_false(echo.cancelled);
    assert_int_equal(f.releases, 1);
}

static void test_bad_bytes(void **state)
{
    (void)state;
    struct fake f = {0};
    ops->on_open((struct rpc_stream *)&f, ops_ctx);
    static const uint8_t junk[] = {0xff, 0xff, 0xff};
    ops->on_message((struct rpc_stream *)&f, junk, sizeof junk, ops_ctx);
    assert_int_equal(f.finishes, 1);
    assert_int_equal(f.code, GRPC_STATUS_INTERNAL);
    assert_string_equal(f.msg, "grpc: error unmarshalling request");
    deliver(&f, "later"); /* not heard */
    assert_int_equal(echo.recvs, 0);
    ops->on_close((struct rpc_stream *)&f, false, ops_ctx);
    assert_int_equal(echo.ends, 1);
    assert_int_equal(f.releases, 1);
}

/* The service's close maps its ERR_* as a unary call would; a cancel
 * still tells end. */
static void test_close_error_and_cancel(void **state)
{
    (void)state;
    struct fake f = {0};
    ops->on_open((struct rpc_stream *)&f, ops_ctx);
    deliver(&f, "close");
    assert_int_equal(f.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_string_equal(f.msg, "etcdserver: mvcc: database space exceeded");
    assert_int_equal(echo.st->close(echo.st->ctx, 0), ERR_CLOSED);
    ops->on_close((struct rpc_stream *)&f, true, ops_ctx);
    assert_int_equal(echo.ends, 1);
    assert_true(echo.cancelled);
    assert_int_equal(f.releases, 1);
}

/* A release before the end: the end still comes, the stream is released
 * once. */
static void test_early_release(void **state)
{
    (void)state;
    struct fake f = {0};
    ops->on_open((struct rpc_stream *)&f, ops_ctx);
    deliver(&f, "release");
    assert_int_equal(f.releases, 1);
    ops->on_close((struct rpc_stream *)&f, true, ops_ctx);
    assert_int_equal(echo.ends, 1);
    assert_int_equal(f.releases, 1);
}

/* send_ctrl and metadata reach the runtime's stream. */
static void test_ctrl_and_metadata(void **state)
{
    (void)state;
    struct fake f = {0};
    ops->on_open((struct rpc_stream *)&f, ops_ctx);
    deliver(&f, "ctrl");
    assert_int_equal(f.ctrl_sends, 1);
    assert_int_equal(f.sends, 0);
    deliver(&f, "md");
    assert_true(echo.md_seen);
    ops->on_close((struct rpc_stream *)&f, true, ops_ctx);
    assert_int_equal(f.releases, 1);
}

static void test_open_refused(void **state)
{
    (void)state;
    struct fake f = {0};
    echo.refuse = ERR_NO_LEADER;
    ops->on_open((struct rpc_stream *)&f, ops_ctx);
    assert_int_equal(f.finishes, 1);
    assert_int_equal(f.code, GRPC_STATUS_UNAVAILABLE);
    assert_string_equal(f.msg, "etcdserver: no leader");
    assert_int_equal(f.releases, 1);
    deliver(&f, "x");
    ops->on_message((struct rpc_stream *)&f, NULL, 0, ops_ctx);
    ops->on_close((struct rpc_stream *)&f, true, ops_ctx);
    assert_int_equal(echo.recvs + echo.half_closes + echo.ends, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_messages_and_half_close, setup),
        cmocka_unit_test_setup(test_bad_bytes, setup),
        cmocka_unit_test_setup(test_close_error_and_cancel, setup),
        cmocka_unit_test_setup(test_early_release, setup),
        cmocka_unit_test_setup(test_ctrl_and_metadata, setup),
        cmocka_unit_test_setup(test_open_refused, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
