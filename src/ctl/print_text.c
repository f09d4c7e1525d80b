/*
 * print_text.c - the protobuf compact text format, as gogo's
 * proto.CompactTextString writes it and so as Go's %v prints a message:
 * for each field in number order that is set (proto3 zero values and nil
 * messages left out, a set oneof member always in), "name:value " with the
 * proto field name; every element of a repeated field the same way;
 * messages as "name:<fields> "; enums by value name (the number when the
 * value has none); strings and bytes in double quotes with \n \r \t \" \\
 * and every byte outside 0x20..0x7e as a three-digit octal escape.
 */
#include <assert.h>
#include <float.h>
#include <inttypes.h>
#include <string.h>

#include "ctl/print.h"
#include "ctl/print_int.h"

static void text_bytes(FILE *f, const unsigned char *p, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            fputc(c, f);
        else
            fprintf(f, "\\%03o", c);
    }
    fputc('"', f);
}

static void text_enum(FILE *f, const ProtobufCFieldDescriptor *fd, int32_t v)
{
    const ProtobufCEnumValue *ev =
        protobuf_c_enum_descriptor_get_value(fd->descriptor, v);
    if (ev != NULL)
        fputs(ev->name, f);
    else
        fprintf(f, "%" PRId32, v);
}

/* text_value writes one value of fd's type stored at p, then the space
 * that ends every field. */
static void text_value(FILE *f, const ProtobufCFieldDescriptor *fd,
                       const void *p)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        fprintf(f, "%" PRId32, *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_ENUM:
        text_enum(f, fd, *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        fprintf(f, "%" PRIu32, *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        fprintf(f, "%" PRId64, *(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        fprintf(f, "%" PRIu64, *(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT: /* not in etcd's messages; Go's %v */
        fprintf(f, "%.*g", FLT_DIG, *(const float *)p);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        fprintf(f, "%.*g", DBL_DIG, *(const double *)p);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        fputs(*(const protobuf_c_boolean *)p ? "true" : "false", f);
        break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        text_bytes(f, (const unsigned char *)(s != NULL ? s : ""),
                   s != NULL ? strlen(s) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        text_bytes(f, b->data, b->len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        if (sub == NULL) {
            fputs("<nil>", f);
            break;
        }
        fputc('<', f);
        ctl_text_message(f, sub);
        fputc('>', f);
        break;
    }
    }
    fputc(' ', f);
}

void ctl_text_message(FILE *f, const ProtobufCMessage *m)
{
    assert(f != NULL && m != NULL);
    const ProtobufCMessageDescriptor *d = m->descriptor;
    assert(d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        const void *p = ctl__field_ptr(m, fd);
        if (!ctl__field_in_v34(d, fd))
            continue;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n =
                *(const size_t *)((const char *)m + fd->quantifier_offset);
            const char *a = *(char *const *)p;
            for (size_t k = 0; k < n; k++) {
                fprintf(f, "%s:", fd->name);
                text_value(f, fd, a + k * ctl__elem_size(fd->type));
            }
            continue;
        }
        if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                ? ctl__oneof_set(m, fd) != fd
                : !ctl__field_present(m, fd))
            continue;
        fprintf(f, "%s:", fd->name);
        text_value(f, fd, p);
    }
}
