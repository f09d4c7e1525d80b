/*
 * ctl_put.c - "put": stores a key, as etcdctl 3.4.23's put command (the
 * value from the arguments or standard input, --lease in hex, --prev-kv,
 * --ignore-value, --ignore-lease, and the answer in every output format).
 * txn builds its put operations here too (ctl_kv_put_kind).
 */
#include <errno.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/commands.h"
#include "ctl/ctl_kv.h"
#include "ctl/print.h"

static const char *lease;
static bool prev_kv, ignore_value, ignore_lease;

static struct ctl_flag flags[] = {
    {"lease", 0, CTL_FLAG_STRING, &lease, "0",
     "lease ID (in hexadecimal) to attach to the key", false},
    {"prev-kv", 0, CTL_FLAG_BOOL, &prev_kv, "false",
     "return the previous key-value pair before modification", false},
    {"ignore-value", 0, CTL_FLAG_BOOL, &ignore_value, "false",
     "updates the key using its current value", false},
    {"ignore-lease", 0, CTL_FLAG_BOOL, &ignore_lease, "false",
     "updates the key using its current lease", false},
    CTL_FLAG_END,
};

#define NEEDS_ARGS "put command needs 1 argument and input from stdin or 2 " \
                   "arguments"

/* read_fd0 reads what is left on file descriptor 0 (kept), past stdio's
 * buffer: etcdctl reads os.Stdin itself, so in a txn (whose lines come
 * through a buffered reader) a put without a value gets only the input
 * beyond that buffer, usually nothing. */
static char *read_fd0(size_t *len_out)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf)
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        ssize_t k = read(STDIN_FILENO, buf + len, cap - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
        if (len == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    buf[len] = '\0';
    *len_out = len;
    return ctl_kv_keep(buf);
}

/* put_build checks the arguments in etcdctl's order and fills r. */
static void put_build(const struct ctl_kv_arg *a, int n,
                      Etcdserverpb__PutRequest *r)
{
    assert(r != NULL && n >= 0);
    assert(n == 0 || a != NULL);
    if (n == 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, NEEDS_ARGS);
    if (ignore_value && n > 1)
        ctl_exit(CTL_EXIT_BAD_ARGS, "put command needs only 1 argument when "
                                    "'ignore-value' is set");
    r->key = (ProtobufCBinaryData){a[0].n, (uint8_t *)a[0].p};
    if (!ignore_value && n > 1) {
        r->value = (ProtobufCBinaryData){a[1].n, (uint8_t *)a[1].p};
    } else if (!ignore_value) {
        size_t len;
        char *v = read_fd0(&len);
        if (len == 0)
            ctl_exit(CTL_EXIT_BAD_ARGS, NEEDS_ARGS);
        r->value = (ProtobufCBinaryData){len, (uint8_t *)v};
    }
    int64_t id;
    char err[512];
    if (ctl_kv_parse_int(lease, strlen(lease), 16, &id, err, sizeof err))
        ctl_exit(CTL_EXIT_BAD_ARGS, "bad lease ID (%s), expecting ID in Hex",
                 err);
    r->lease = id;
    r->prev_kv = prev_kv;
    r->ignore_value = ignore_value;
    r->ignore_lease = ignore_lease;
}

static void build_op(const struct ctl_kv_arg *a, int n,
                     Etcdserverpb__RequestOp *op)
{
    Etcdserverpb__PutRequest *r = ctl_kv_keep(malloc(sizeof *r));
    *r = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
    put_build(a, n, r);
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op->request_put = r;
}

void ctl_kv_put_simple(const Etcdserverpb__PutResponse *r)
{
    fputs("OK\n", stdout);
    if (r->prev_kv)
        ctl_simple_kv(stdout, ctl_g.hex, false, r->prev_kv);
}

static void display(enum ctl_output out, const Etcdserverpb__PutResponse *r)
{
    switch (out) {
    case CTL_OUT_SIMPLE:
        ctl_kv_put_simple(r);
        break;
    case CTL_OUT_JSON:
        ctl_json_message(stdout, &r->base);
        break;
    case CTL_OUT_PROTOBUF:
        ctl_pb_message(stdout, &r->base);
        break;
    case CTL_OUT_FIELDS:
        ctl_fields_put(stdout, r);
        break;
    case CTL_OUT_TABLE: /* etcdctl has written the key by now */
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    }
}

static int run(int argc, char **argv)
{
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    put_build(ctl_kv_args_from(argc, argv), argc, &req);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__PutResponse *resp = (Etcdserverpb__PutResponse *)ctl_call(
        "/etcdserverpb.KV/Put", &req.base,
        &etcdserverpb__put_response__descriptor);
    display(out, resp);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    ctl_kv_release();
    return CTL_EXIT_SUCCESS;
}

/* etcdctl's Long text of put, without its last newline: ctl_cmd_put's
 * long_desc adds it back, ctl_kv_put_kind's help_head goes without. */
#define PUT_LONG \
        "\n" \
        "Puts the given key into the store.\n" \
        "\n" \
        "When <value> begins with '-', <value> is interpreted as a flag.\n" \
        "Insert '--' for workaround:\n" \
        "\n" \
        "$ put <key> -- <value>\n" \
        "$ put -- <key> <value>\n" \
        "\n" \
        "If <value> isn't given as a command line argument and " \
        "'--ignore-value' is not specified,\n" \
        "this command tries to read the value from standard input.\n" \
        "\n" \
        "If <lease> isn't given as a command line argument and " \
        "'--ignore-lease' is not specified,\n" \
        "this command tries to read the value from standard input.\n" \
        "\n" \
        "For example,\n" \
        "$ cat file | put <key>\n" \
        "will store the content of the file to <key>."

const struct ctl_cmd ctl_cmd_put = {
    .use = "put [options] <key> <value> (<value> can also be given from "
           "stdin)",
    .short_desc = "Puts the given key into the store",
    .long_desc = PUT_LONG "\n",
    .flags = flags,
    .run = run,
};

const struct ctl_kv_kind ctl_kv_put_kind = {
    .name = "put",
    .flags = flags,
    /* cobra's help prints Long with its trailing blanks trimmed */
    .help_head = PUT_LONG,
    .usage =
        "Usage:\n"
        "   put [options] <key> <value> (<value> can also be given from "
        "stdin) [flags]\n"
        "\n"
        "Flags:\n"
        "  -h, --help           help for put\n"
        "      --ignore-lease   updates the key using its current lease\n"
        "      --ignore-value   updates the key using its current value\n"
        "      --lease string   lease ID (in hexadecimal) to attach to the "
        "key (default \"0\")\n"
        "      --prev-kv        return the previous key-value pair before "
        "modification\n",
    .build = build_op,
};
