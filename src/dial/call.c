/*
 * call.c - the ops of a client call's batches that libcetcd's unary calls
 * and the peer transport's calls (a forwarded request, a snapshot transfer)
 * build alike (see dial.h).
 */
#include <assert.h>
#include <string.h>

#include <grpc/support/alloc.h>

#include "dial/dial.h"

void dial_reply_init(struct dial_reply *r)
{
    assert(r != NULL);
    memset(r, 0, sizeof(*r));
    grpc_metadata_array_init(&r->init_md);
    grpc_metadata_array_init(&r->trail_md);
    r->details = grpc_empty_slice();
    assert(r->msg == NULL && r->error_string == NULL);
}

void dial_reply_ops(grpc_op ops[DIAL_REPLY_OPS], struct dial_reply *r)
{
    assert(ops != NULL && r != NULL);
    memset(ops, 0, sizeof(grpc_op) * DIAL_REPLY_OPS);
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &r->init_md;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &r->msg;
    ops[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[2].data.recv_status_on_client.trailing_metadata = &r->trail_md;
    ops[2].data.recv_status_on_client.status = &r->status;
    ops[2].data.recv_status_on_client.status_details = &r->details;
    ops[2].data.recv_status_on_client.error_string = &r->error_string;
}

void dial_unary_ops(grpc_op ops[DIAL_UNARY_OPS], grpc_metadata *md,
                    size_t md_len, grpc_byte_buffer *req, struct dial_reply *r)
{
    assert(ops != NULL && req != NULL && r != NULL);
    assert(md != NULL || md_len == 0);
    memset(ops, 0, sizeof(grpc_op) * (DIAL_UNARY_OPS - DIAL_REPLY_OPS));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = md_len;
    ops[0].data.send_initial_metadata.metadata = md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = req;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    dial_reply_ops(&ops[DIAL_UNARY_OPS - DIAL_REPLY_OPS], r);
}

void dial_reply_release(struct dial_reply *r)
{
    assert(r != NULL);
    grpc_metadata_array_destroy(&r->init_md);
    grpc_metadata_array_destroy(&r->trail_md);
    if (r->msg != NULL)
        grpc_byte_buffer_destroy(r->msg);
    r->msg = NULL;
    grpc_slice_unref(r->details);
    r->details = grpc_empty_slice();
    gpr_free((void *)r->error_string);
    r->error_string = NULL;
}
