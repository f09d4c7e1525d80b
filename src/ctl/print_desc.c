/*
 * print_desc.c - questions about protobuf-c descriptors that the JSON,
 * wire and text writers all ask: is a field at its default, is it a field
 * etcd 3.4 has, which oneof member is set.
 */
#include <assert.h>
#include <string.h>

#include "ctl/print_int.h"

/* Fields of cetcd's protos that etcd 3.4.23's Go structs lack, as
 * "message full name", "field name". */
static const char *const v35_fields[][2] = {
    {"etcdserverpb.HashKVResponse", "hash_revision"},
    {"etcdserverpb.MemberListRequest", "linearizable"},
};

bool ctl__field_in_v34(const ProtobufCMessageDescriptor *d,
                       const ProtobufCFieldDescriptor *fd)
{
    assert(d != NULL && fd != NULL);
    for (size_t i = 0; i < sizeof v35_fields / sizeof v35_fields[0]; i++) {
        if (strcmp(d->name, v35_fields[i][0]) == 0 &&
            strcmp(fd->name, v35_fields[i][1]) == 0)
            return false;
    }
    return true;
}

bool ctl__field_is_zero(const ProtobufCFieldDescriptor *fd, const void *p)
{
    assert(fd->label != PROTOBUF_C_LABEL_REPEATED);
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        return *(const uint32_t *)p == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return *(const uint64_t *)p == 0;
    case PROTOBUF_C_TYPE_FLOAT:
        return *(const float *)p == 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return *(const double *)p == 0;
    case PROTOBUF_C_TYPE_BOOL:
        return !*(const protobuf_c_boolean *)p;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return s == NULL || s[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)p == NULL;
    }
    return true;
}

bool ctl__field_present(const ProtobufCMessage *m,
                        const ProtobufCFieldDescriptor *fd)
{
    const void *p = ctl__field_ptr(m, fd);
    assert(fd->label != PROTOBUF_C_LABEL_REPEATED);
    assert(!(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF));
    switch (fd->label) {
    case PROTOBUF_C_LABEL_REQUIRED:
        return true;
    case PROTOBUF_C_LABEL_OPTIONAL:
        if (fd->type == PROTOBUF_C_TYPE_MESSAGE ||
            fd->type == PROTOBUF_C_TYPE_STRING)
            return *(void *const *)p != NULL;
        return *(const protobuf_c_boolean *)((const char *)m +
                                             fd->quantifier_offset);
    default:
        return !ctl__field_is_zero(fd, p);
    }
}

bool ctl__oneof_first(const ProtobufCMessageDescriptor *d,
                      const ProtobufCFieldDescriptor *fd)
{
    assert(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
    for (const ProtobufCFieldDescriptor *o = d->fields; o < fd; o++) {
        if ((o->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            o->quantifier_offset == fd->quantifier_offset)
            return false;
    }
    return true;
}

const ProtobufCFieldDescriptor *
ctl__oneof_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    uint32_t which =
        *(const uint32_t *)((const char *)m + fd->quantifier_offset);
    assert(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
    if (which == 0)
        return NULL;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *o = &d->fields[i];
        if ((o->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            o->quantifier_offset == fd->quantifier_offset && o->id == which)
            return o;
    }
    return NULL;
}

size_t ctl__elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

bool ctl__in(const struct ctl__range *t, size_t n, uint32_t r)
{
    size_t lo = 0, hi = n;
    assert(t != NULL);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid].hi < r)
            lo = mid + 1;
        else if (t[mid].lo > r)
            hi = mid;
        else
            return true;
    }
    return false;
}

size_t ctl__utf8_decode(const unsigned char *s, size_t n, uint32_t *r_out)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    size_t len;
    uint32_t r;
    assert(n > 0);
    *r_out = CTL__RUNE_ERROR;
    if (c < 0x80) {
        *r_out = c;
        return 1;
    }
    if (c < 0xc2 || c > 0xf4)
        return 1;
    if (c < 0xe0) {
        len = 2;
        r = c & 0x1f;
    } else if (c < 0xf0) {
        len = 3;
        r = c & 0x0f;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong form */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogate */
    } else {
        len = 4;
        r = c & 0x07;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* nothing past U+10FFFF */
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 1;
    for (size_t i = 1; i < len; i++) {
        if (i > 1 && (s[i] < 0x80 || s[i] > 0xbf))
            return 1;
        r = r << 6 | (s[i] & 0x3f);
    }
    *r_out = r;
    return len;
}
