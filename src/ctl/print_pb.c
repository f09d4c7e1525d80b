/*
 * print_pb.c - etcdctl -w protobuf: the wire format gogo's generated
 * Marshal writes for the Go struct of a response, and the errors of the
 * answers that have none.
 *
 * gogo writes fields by number, leaves out proto3 zero values (not oneof
 * members, not present messages, even empty ones), packs repeated scalars,
 * and knows no unknown fields: etcdctl 3.4 decoded the response into its
 * own structs and marshals them again.  protobuf-c's pack would repeat the
 * unknown fields and cetcd's later-version fields, so the encoder is ours:
 * one walk that counts (f NULL) or writes, the count giving each nested
 * message's length prefix.
 */
#include <assert.h>
#include <string.h>

#include "ctl/print.h"
#include "ctl/print_int.h"
#include "util/err.h"

/* The sink of a walk: bytes are counted, and written when f is set. */
struct out {
    FILE *f;  /* NULL: count only */
    size_t n; /* bytes so far */
};

static void put(struct out *o, const void *p, size_t n)
{
    if (o->f != NULL && n > 0)
        fwrite(p, 1, n, o->f);
    o->n += n;
}

static void put_varint(struct out *o, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v != 0)
            b[n] |= 0x80;
        n++;
    } while (v != 0);
    put(o, b, n);
}

static void put_fixed(struct out *o, uint64_t v, size_t bytes)
{
    unsigned char b[8];
    for (size_t i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put(o, b, bytes);
}

static void put_tag(struct out *o, uint32_t id, unsigned wire)
{
    put_varint(o, (uint64_t)id << 3 | wire);
}

static size_t walk(struct out *o, const ProtobufCMessage *m);

/* wire_type is the wire type of one value of type t. */
static unsigned wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 1;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return 2;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return 5;
    default:
        return 0;
    }
}

/* scalar writes one value of a numeric type stored at p. */
static void scalar(struct out *o, ProtobufCType t, const void *p)
{
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    if (t == PROTOBUF_C_TYPE_BOOL)
        u32 = *(const protobuf_c_boolean *)p ? 1 : 0;
    else if (wire_type(t) == 1 || t == PROTOBUF_C_TYPE_INT64 ||
             t == PROTOBUF_C_TYPE_UINT64 || t == PROTOBUF_C_TYPE_SINT64)
        memcpy(&u64, p, 8);
    else
        memcpy(&u32, p, 4);
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_ENUM: /* negative: sign-extended to ten bytes */
        put_varint(o, (uint64_t)(int64_t)(int32_t)u32);
        break;
    case PROTOBUF_C_TYPE_SINT32:
        put_varint(o, (u32 << 1) ^ (uint32_t)((int32_t)u32 >> 31));
        break;
    case PROTOBUF_C_TYPE_SINT64:
        put_varint(o, (u64 << 1) ^ (uint64_t)((int64_t)u64 >> 63));
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
        put_varint(o, u64);
        break;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        put_fixed(o, u32, 4);
        break;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        put_fixed(o, u64, 8);
        break;
    default: /* UINT32, BOOL */
        put_varint(o, u32);
        break;
    }
}

/* one writes fd's tag and one value stored at p. */
static void one(struct out *o, const ProtobufCFieldDescriptor *fd,
                const void *p)
{
    put_tag(o, fd->id, wire_type(fd->type));
    if (fd->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = *(char *const *)p;
        size_t n = s != NULL ? strlen(s) : 0;
        put_varint(o, n);
        put(o, s, n);
    } else if (fd->type == PROTOBUF_C_TYPE_BYTES) {
        const ProtobufCBinaryData *b = p;
        put_varint(o, b->len);
        put(o, b->data, b->len);
    } else if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        struct out count = {NULL, 0};
        put_varint(o, walk(&count, sub));
        walk(o, sub);
    } else {
        scalar(o, fd->type, p);
    }
}

static void repeated(struct out *o, const ProtobufCMessage *m,
                     const ProtobufCFieldDescriptor *fd)
{
    size_t n = *(const size_t *)((const char *)m + fd->quantifier_offset);
    const char *a = *(char *const *)ctl__field_ptr(m, fd);
    size_t es = ctl__elem_size(fd->type);
    if (n == 0)
        return;
    if ((fd->flags & PROTOBUF_C_FIELD_FLAG_PACKED) &&
        wire_type(fd->type) != 2) {
        struct out count = {NULL, 0};
        for (size_t i = 0; i < n; i++)
            scalar(&count, fd->type, a + i * es);
        put_tag(o, fd->id, 2);
        put_varint(o, count.n);
        for (size_t i = 0; i < n; i++)
            scalar(o, fd->type, a + i * es);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (fd->type == PROTOBUF_C_TYPE_MESSAGE &&
            *(void *const *)(a + i * es) == NULL)
            continue;
        one(o, fd, a + i * es);
    }
}

/* walk writes m's fields (m NULL: none) and returns the bytes they take. */
static size_t walk(struct out *o, const ProtobufCMessage *m)
{
    size_t start = o->n;
    if (m == NULL)
        return 0;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    assert(d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        const void *p = ctl__field_ptr(m, fd);
        if (!ctl__field_in_v34(d, fd))
            continue;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            repeated(o, m, fd);
        } else if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (ctl__oneof_set(m, fd) == fd &&
                !(fd->type == PROTOBUF_C_TYPE_MESSAGE &&
                  *(void *const *)p == NULL))
                one(o, fd, p);
        } else if (ctl__field_present(m, fd)) {
            one(o, fd, p);
        }
    }
    assert(o->n >= start);
    return o->n - start;
}

int ctl_pb_message(FILE *f, const ProtobufCMessage *m)
{
    struct out o = {f, 0};
    assert(f != NULL);
    walk(&o, m);
    return ferror(f) ? ERR_IO : 0;
}

int ctl_pb_watch_response(FILE *f, const Etcdserverpb__WatchResponse *r)
{
    static const Etcdserverpb__ResponseHeader empty =
        ETCDSERVERPB__RESPONSE_HEADER__INIT;
    Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    assert(f != NULL);
    /* etcdctl builds a new pb.WatchResponse from clientv3's fields; the
     * header is a pointer to a struct member, so never nil. */
    w.header = (Etcdserverpb__ResponseHeader *)&empty;
    if (r != NULL) {
        if (r->header != NULL)
            w.header = r->header;
        w.n_events = r->n_events;
        w.events = r->events;
        w.compact_revision = r->compact_revision;
        w.canceled = r->canceled;
        w.created = r->created;
    }
    return ctl_pb_message(f, &w.base);
}

void ctl_pb_lease_revoke_error(FILE *f,
                               const Etcdserverpb__LeaseRevokeResponse *r)
{
    assert(f != NULL);
    /* Go's %v of the struct: its one field, a message pointer, through the
     * message's String (the compact text format), or <nil>. */
    fputs("marshal unsupported for type clientv3.LeaseRevokeResponse ({", f);
    if (r != NULL && r->header != NULL)
        ctl_text_message(f, &r->header->base);
    else
        fputs("<nil>", f);
    fputs("})", f);
}

void ctl_unsupported(FILE *f, const char *format)
{
    assert(f != NULL && format != NULL);
    fprintf(f, "%s not supported as output format", format);
}
