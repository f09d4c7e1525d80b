/*
 * ctl_del.c - "del": removes a key or a range of keys, as etcdctl 3.4.23's
 * del command (--prefix, --from-key, --prev-kv, and the answer in every
 * output format).  txn builds its del operations here too
 * (ctl_kv_del_kind).
 */
#include <inttypes.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/ctl_kv.h"
#include "ctl/print.h"

static bool prefix, prev_kv, from_key;

static struct ctl_flag flags[] = {
    {"prefix", 0, CTL_FLAG_BOOL, &prefix, "false",
     "delete keys with matching prefix", false},
    {"prev-kv", 0, CTL_FLAG_BOOL, &prev_kv, "false",
     "return deleted key-value pairs", false},
    {"from-key", 0, CTL_FLAG_BOOL, &from_key, "false",
     "delete keys that are greater than or equal to the given key using "
     "byte compare",
     false},
    CTL_FLAG_END,
};

/* del_build checks the arguments in etcdctl's order and fills r. */
static void del_build(const struct ctl_kv_arg *a, int n,
                      Etcdserverpb__DeleteRangeRequest *r)
{
    assert(r != NULL && n >= 0);
    assert(n == 0 || a != NULL);
    if (n == 0 || n > 2)
        ctl_exit(CTL_EXIT_BAD_ARGS, "del command needs one argument as key "
                                    "and an optional argument as range_end");
    if (prefix && from_key)
        ctl_exit(CTL_EXIT_BAD_ARGS, "`--prefix` and `--from-key` cannot be "
                                    "set at the same time, choose one");
    if (n > 1 && (prefix || from_key))
        ctl_exit(CTL_EXIT_BAD_ARGS, "too many arguments, only accept one "
                                    "argument when `--prefix` or "
                                    "`--from-key` is set");
    r->key = (ProtobufCBinaryData){a[0].n, (uint8_t *)a[0].p};
    if (n > 1)
        r->range_end = (ProtobufCBinaryData){a[1].n, (uint8_t *)a[1].p};
    static const ProtobufCBinaryData zero = {1, (uint8_t *)"\0"};
    if ((prefix || from_key) && a[0].n == 0)
        r->key = zero; /* etcdctl: an empty key means every key */
    if (prefix && a[0].n > 0)
        r->range_end = ctl_kv_prefix_end(&a[0]);
    else if (prefix || from_key)
        r->range_end = zero;
    r->prev_kv = prev_kv;
}

static void build_op(const struct ctl_kv_arg *a, int n,
                     Etcdserverpb__RequestOp *op)
{
    Etcdserverpb__DeleteRangeRequest *r = ctl_kv_keep(malloc(sizeof *r));
    *r = (Etcdserverpb__DeleteRangeRequest)
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del_build(a, n, r);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
    op->request_delete_range = r;
}

void ctl_kv_del_simple(const Etcdserverpb__DeleteRangeResponse *r)
{
    printf("%" PRId64 "\n", r->deleted);
    for (size_t i = 0; i < r->n_prev_kvs; i++)
        ctl_simple_kv(stdout, ctl_g.hex, false, r->prev_kvs[i]);
}

static void display(enum ctl_output out,
                    const Etcdserverpb__DeleteRangeResponse *r)
{
    switch (out) {
    case CTL_OUT_SIMPLE:
        ctl_kv_del_simple(r);
        break;
    case CTL_OUT_JSON:
        ctl_json_message(stdout, &r->base);
        break;
    case CTL_OUT_PROTOBUF:
        ctl_pb_message(stdout, &r->base);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_delete(stdout, r);
        break;
    case CTL_OUT_TABLE: /* etcdctl has deleted the keys by now */
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    }
}

static int run(int argc, char **argv)
{
    Etcdserverpb__DeleteRangeRequest req =
        ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    del_build(ctl_kv_args_from(argc, argv), argc, &req);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__DeleteRangeResponse *resp =
        (Etcdserverpb__DeleteRangeResponse *)ctl_call(
            "/etcdserverpb.KV/DeleteRange", &req.base,
            &etcdserverpb__delete_range_response__descriptor);
    display(out, resp);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    ctl_kv_release();
    return CTL_EXIT_SUCCESS;
}

const struct ctl_cmd ctl_cmd_del = {
    .use = "del [options] <key> [range_end]",
    .short_desc = "Removes the specified key or range of keys [key, "
                  "range_end)",
    .flags = flags,
    .run = run,
};

const struct ctl_kv_kind ctl_kv_del_kind = {
    .name = "del",
    .flags = flags,
    .help_head = "Removes the specified key or range of keys [key, "
                 "range_end)",
    .usage = "Usage:\n"
             "   del [options] <key> [range_end] [flags]\n"
             "\n"
             "Flags:\n"
             "      --from-key   delete keys that are greater than or equal "
             "to the given key using byte compare\n"
             "  -h, --help       help for del\n"
             "      --prefix     delete keys with matching prefix\n"
             "      --prev-kv    return deleted key-value pairs\n",
    .build = build_op,
};
