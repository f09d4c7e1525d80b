/*
 * call.c - one unary gRPC call as a single batch of six ops: send initial
 * metadata, send message, close from client, receive initial metadata,
 * receive message, receive status (dial_unary_ops).  Sync and async calls
 * share it; they differ only in how they wait for the batch's one
 * completion.
 */
#include <assert.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>

#include "client/client_int.h"

grpc_byte_buffer *client__pack(const ProtobufCMessage *req)
{
    size_t len = protobuf_c_message_get_packed_size(req);
    grpc_slice s = grpc_slice_malloc(len);
    grpc_byte_buffer *bb;
    size_t packed;

    packed = protobuf_c_message_pack(req, GRPC_SLICE_START_PTR(s));
    assert(packed == len);
    (void)packed;
    bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

int client__call_start(struct cetcd_client *c, size_t ep,
                       grpc_completion_queue *cq, const char *method_path,
                       const ProtobufCMessage *req, void *tag,
                       struct client__call *call)
{
    grpc_op ops[DIAL_UNARY_OPS];
    grpc_slice method;
    grpc_call_error err;

    assert(c != NULL && ep < c->n_eps);
    assert(req != NULL && method_path != NULL);
    memset(call, 0, sizeof(*call));
    call->send_buf = client__pack(req);
    if (call->send_buf == NULL)
        return CETCD_RESOURCE_EXHAUSTED;
    if (c->token != NULL) {
        call->md[0].key = grpc_slice_from_static_string("token");
        call->md[0].value = grpc_slice_from_copied_string(c->token);
        call->md_len = 1;
    }
    if (c->md_key != NULL) {
        call->md[call->md_len].key = grpc_slice_from_static_string(c->md_key);
        call->md[call->md_len].value =
            grpc_slice_from_copied_string(c->md_value);
        call->md_len++;
    }
    method = grpc_slice_from_copied_string(method_path);
    call->call = grpc_channel_create_call(
        c->eps[ep].channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
        client__deadline(c->call_timeout_ms), NULL);
    grpc_slice_unref(method);
    dial_reply_init(&call->reply);
    dial_unary_ops(ops, call->md, call->md_len, call->send_buf, &call->reply);
    err = grpc_call_start_batch(call->call, ops, DIAL_UNARY_OPS, tag, NULL);
    if (err != GRPC_CALL_OK) {
        client__call_finish(call, 0, NULL, NULL, NULL);
        return CETCD_INTERNAL;
    }
    return 0;
}

/* status_copy fills st from the call's status, details and error string. */
static int status_copy(struct client__call *call, struct cetcd_status *st)
{
    const struct dial_reply *r = &call->reply;
    size_t len = GRPC_SLICE_LENGTH(r->details);
    int code = (int)r->status;

    if (code == 0)
        return client__status_set(st, 0, "%s", "");
    if (len > 0)
        return client__status_set(st, code, "%.*s", (int)len,
                                  (const char *)GRPC_SLICE_START_PTR(
                                      r->details));
    return client__status_set(st, code, "%s",
                              r->error_string ? r->error_string
                                              : cetcd_code_name(code));
}

static int decode(struct client__call *call,
                  const ProtobufCMessageDescriptor *desc,
                  ProtobufCMessage **out, struct cetcd_status *st)
{
    grpc_byte_buffer_reader r;
    grpc_slice s;

    if (call->reply.msg == NULL)
        return client__status_set(st, CETCD_INTERNAL, "no reply message");
    if (!grpc_byte_buffer_reader_init(&r, call->reply.msg))
        return client__status_set(st, CETCD_INTERNAL, "bad reply buffer");
    s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    *out = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s),
                                     GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    if (*out == NULL)
        return client__status_set(st, CETCD_INTERNAL,
                                  "cannot decode %s", desc->name);
    return 0;
}

int client__call_finish(struct client__call *call, int ok,
                        const ProtobufCMessageDescriptor *resp_desc,
                        ProtobufCMessage **resp_out, struct cetcd_status *st)
{
    int rc;

    assert(call != NULL && call->call != NULL);
    if (resp_out != NULL)
        *resp_out = NULL;
    if (!ok)
        rc = client__status_set(st, CETCD_INTERNAL, "batch failed");
    else
        rc = status_copy(call, st);
    if (rc == 0 && resp_desc != NULL && resp_out != NULL)
        rc = decode(call, resp_desc, resp_out, st);
    for (size_t i = 0; i < call->md_len; i++)
        grpc_slice_unref(call->md[i].value);
    dial_reply_release(&call->reply);
    grpc_byte_buffer_destroy(call->send_buf);
    grpc_call_unref(call->call);
    call->call = NULL;
    return rc;
}
