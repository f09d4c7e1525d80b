/*
 * encode.c - a protobuf-c message as jsonpb (OrigName, no defaults) writes
 * it; json.h has the rules.  Walks the message's descriptor: each field's
 * label, type, offset and quantifier offset say where its value is and
 * whether it is set.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "json/json.h"
#include "json/json_int.h"
#include "util/err.h"
#include "util/mem.h"

void json_buf_put(struct json_buf *b, const void *p, size_t n)
{
    if (b->nomem || n == 0)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        char *q = mem_realloc(b->p, cap);
        if (q == NULL) {
            b->nomem = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void json_buf_str(struct json_buf *b, const char *s)
{
    json_buf_put(b, s, strlen(s));
}

size_t json__utf8_len(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

void json_pb_string(struct json_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    json_buf_put(b, "\"", 1);
    size_t run = 0; /* start of the bytes copied as they are */
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        uint32_t cp = 0;
        size_t len = json__utf8_len(u + i, n - i, &cp);
        bool plain = len > 1 ? cp != 0x2028 && cp != 0x2029
                             : len == 1 && c >= 0x20 && c != '"' &&
                                   c != '\\' && c != '<' && c != '>' &&
                                   c != '&';
        if (plain) {
            i += len;
            continue;
        }
        json_buf_put(b, s + run, i - run);
        char e[8];
        if (len == 0) {
            json_buf_str(b, "\\ufffd"); /* invalid UTF-8: one byte */
            len = 1;
        } else if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c;
            json_buf_put(b, e, 2);
        } else if (c == '\n' || c == '\r' || c == '\t') {
            e[0] = '\\', e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            json_buf_put(b, e, 2);
        } else {
            snprintf(e, sizeof e, "\\u%c%c%c%c", hex[cp >> 12 & 15],
                     hex[cp >> 8 & 15], hex[cp >> 4 & 15], hex[cp & 15]);
            json_buf_put(b, e, 6);
        }
        i += len;
        run = i;
    }
    json_buf_put(b, s + run, n - run);
    json_buf_put(b, "\"", 1);
}

static void base64(struct json_buf *b, const uint8_t *p, size_t n)
{
    static const char a[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    json_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        char q[4] = {a[v >> 18 & 63], a[v >> 12 & 63],
                     i + 1 < n ? a[v >> 6 & 63] : '=',
                     i + 2 < n ? a[v & 63] : '='};
        json_buf_put(b, q, 4);
    }
    json_buf_put(b, "\"", 1);
}

static int encode_msg(const ProtobufCMessage *m, struct json_buf *b,
                      int depth);

/* value writes one value of field f stored at p. */
static int value(const ProtobufCFieldDescriptor *f, const void *p,
                 struct json_buf *b, int depth)
{
    char t[32];
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        snprintf(t, sizeof t, "%" PRId32, *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        snprintf(t, sizeof t, "%" PRIu32, *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(t, sizeof t, "\"%" PRId64 "\"", *(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(t, sizeof t, "\"%" PRIu64 "\"", *(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        snprintf(t, sizeof t, "%.9g", (double)*(const float *)p);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        snprintf(t, sizeof t, "%.17g", *(const double *)p);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        snprintf(t, sizeof t, "%s",
                 *(const protobuf_c_boolean *)p ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        if (ev != NULL) {
            json_pb_string(b, ev->name, strlen(ev->name));
            return 0;
        }
        snprintf(t, sizeof t, "%d", v);
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        json_pb_string(b, s ? s : "", s ? strlen(s) : 0);
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *d = p;
        base64(b, d->data, d->len);
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        if (sub == NULL) {
            json_buf_str(b, "null");
            return 0;
        }
        return encode_msg(sub, b, depth + 1);
    }
    default:
        return ERR_INVAL;
    }
    json_buf_str(b, t);
    return 0;
}

/* size_of: the bytes one value of f takes in the message. */
static size_t size_of(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

/* is_default: the single value at p is its type's zero. */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        return s == NULL || s[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(const void *const *)p == NULL;
    default: {
        static const uint8_t zero[8];
        return memcmp(p, zero, size_of(f)) == 0;
    }
    }
}

/* present: whether jsonpb writes field f of m. */
static bool present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    const char *base = (const char *)m;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return *(const size_t *)(base + f->quantifier_offset) > 0;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset != 0 &&
        f->type != PROTOBUF_C_TYPE_MESSAGE &&
        f->type != PROTOBUF_C_TYPE_STRING)
        return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
    return !is_default(f, base + f->offset);
}

static int encode_msg(const ProtobufCMessage *m, struct json_buf *b,
                      int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    assert(d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
    if (depth > JSON_PB_DEPTH_MAX)
        return ERR_INVAL;
    json_buf_put(b, "{", 1);
    bool first = true;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (!present(m, f))
            continue;
        if (!first)
            json_buf_put(b, ",", 1);
        first = false;
        json_pb_string(b, f->name, strlen(f->name));
        json_buf_put(b, ":", 1);
        const char *p = (const char *)m + f->offset;
        int rc = 0;
        if (f->label != PROTOBUF_C_LABEL_REPEATED) {
            rc = value(f, p, b, depth);
        } else {
            size_t n = *(const size_t *)((const char *)m +
                                         f->quantifier_offset);
            const char *arr = *(const char *const *)p;
            json_buf_put(b, "[", 1);
            for (size_t k = 0; k < n && rc == 0; k++) {
                if (k > 0)
                    json_buf_put(b, ",", 1);
                rc = value(f, arr + k * size_of(f), b, depth);
            }
            json_buf_put(b, "]", 1);
        }
        if (rc != 0)
            return rc;
    }
    json_buf_put(b, "}", 1);
    return b->nomem ? ERR_NOMEM : 0;
}

int json_pb_encode(const ProtobufCMessage *m, struct json_buf *b)
{
    assert(m != NULL && b != NULL);
    int rc = encode_msg(m, b, 0);
    return b->nomem ? ERR_NOMEM : rc;
}
