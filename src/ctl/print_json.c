/*
 * print_json.c - Go's encoding/json of the gogo-protobuf structs, driven
 * by the protobuf-c descriptors, and the builder the wrappers use for
 * structs that are no protobuf messages (print_json_wrap.c).
 *
 * The rules (print.h has them for the caller) come from what Go 1.19's
 * json.Marshal prints for etcd 3.4's generated structs: every field has
 * the json tag "<proto name>,omitempty"; a oneof is an interface field
 * without a tag whose value is a one-field wrapper struct, again without a
 * tag, so both print under their Go names and the member is not omitted.
 */
#include <assert.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/print.h"
#include "ctl/print_int.h"

static const char hexdigits[] = "0123456789abcdef";

void ctl_json_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    assert(f != NULL);
    assert(s != NULL || n == 0);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c < 0x80) {
            i++;
            if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' &&
                c != '&') {
                fputc(c, f);
            } else if (c == '"' || c == '\\') {
                fputc('\\', f);
                fputc(c, f);
            } else if (c == '\n' || c == '\r' || c == '\t') {
                fputc('\\', f);
                fputc(c == '\n' ? 'n' : c == '\r' ? 'r' : 't', f);
            } else {
                fprintf(f, "\\u00%c%c", hexdigits[c >> 4], hexdigits[c & 15]);
            }
            continue;
        }
        uint32_t r;
        size_t w = ctl__utf8_decode(u + i, n - i, &r);
        if (w == 1 && r == CTL__RUNE_ERROR)
            fputs("\\ufffd", f);
        else if (r == 0x2028 || r == 0x2029)
            fprintf(f, "\\u%04" PRIx32, r);
        else
            fwrite(u + i, 1, w, f);
        i += w;
    }
    fputc('"', f);
}

/* b64 writes n bytes as standard base64 with padding, in quotes. */
static void b64(FILE *f, const unsigned char *p, size_t n)
{
    static const char abc[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fputc('"', f);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        fputc(abc[v >> 18], f);
        fputc(abc[(v >> 12) & 63], f);
        fputc(i + 1 < n ? abc[(v >> 6) & 63] : '=', f);
        fputc(i + 2 < n ? abc[v & 63] : '=', f);
    }
    fputc('"', f);
}

/* json_float writes v as encoding/json does: the shortest digits that
 * read back as v (as a float when is32), in exponent form below 1e-6 and
 * from 1e21 on, with "e-07" shortened to "e-7".  Go refuses NaN and the
 * infinities (etcdctl then prints nothing); we write null. */
static void json_float(FILE *f, double v, bool is32)
{
    char buf[64];
    int p = 1;
    if (isnan(v) || isinf(v)) {
        fputs("null", f);
        return;
    }
    for (; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        double back = strtod(buf, NULL);
        if (is32 ? (float)back == (float)v : back == v)
            break;
    }
    double a = fabs(v);
    double lo = 1e-6, hi = 1e21;
    if (a != 0 && (a < lo || a >= hi)) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        char *e = strchr(buf, 'e');
        if (e != NULL && e[1] == '-' && e[2] == '0' && e[3] != '\0')
            memmove(e + 2, e + 3, strlen(e + 3) + 1);
        fputs(buf, f);
        return;
    }
    snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    int exp10 = atoi(strchr(buf, 'e') + 1);
    int decimals = p - 1 - exp10;
    fprintf(f, "%.*f", decimals > 0 ? decimals : 0, v);
}

static void object(FILE *f, const ProtobufCMessage *m);

/* value writes one value of fd's type stored at p. */
static void value(FILE *f, const ProtobufCFieldDescriptor *fd, const void *p)
{
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        fprintf(f, "%" PRId32, *(const int32_t *)p);
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
    case PROTOBUF_C_TYPE_FLOAT:
        json_float(f, *(const float *)p, true);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        json_float(f, *(const double *)p, false);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        fputs(*(const protobuf_c_boolean *)p ? "true" : "false", f);
        break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        ctl_json_string(f, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        b64(f, b->data, b->len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        object(f, *(const ProtobufCMessage *const *)p);
        break;
    }
}

/* The Go names of the oneof interface fields (protobuf-c keeps no oneof
 * names): the oneofs of etcd's and cetcd's protos. */
static const char *const oneof_names[][2] = {
    {"etcdserverpb.RequestOp", "Request"},
    {"etcdserverpb.ResponseOp", "Response"},
    {"etcdserverpb.Compare", "TargetUnion"},
    {"etcdserverpb.WatchRequest", "RequestUnion"},
    {"cetcdpb.InternalRequest", "Request"},
};

static const char *oneof_name(const ProtobufCMessageDescriptor *d)
{
    for (size_t i = 0; i < sizeof oneof_names / sizeof oneof_names[0]; i++) {
        if (strcmp(d->name, oneof_names[i][0]) == 0)
            return oneof_names[i][1];
    }
    return "Oneof";
}

/* go_name writes a field name as protoc-gen-go names its Go field:
 * "response_range" is "ResponseRange". */
static void go_name(FILE *f, const char *s)
{
    size_t i = 0;
    if (s[0] == '_') {
        fputc('X', f);
        i++;
    }
    for (; s[i] != '\0'; i++) {
        char c = s[i];
        if (c == '_' && s[i + 1] >= 'a' && s[i + 1] <= 'z')
            continue;
        if (c >= '0' && c <= '9') {
            fputc(c, f);
            continue;
        }
        fputc(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c, f);
        while (s[i + 1] >= 'a' && s[i + 1] <= 'z')
            fputc(s[++i], f);
    }
}

static void key(FILE *f, const char *name, bool first)
{
    if (!first)
        fputc(',', f);
    ctl_json_string(f, name, strlen(name));
    fputc(':', f);
}

/* oneof writes the interface field of fd's oneof. */
static void oneof(FILE *f, const ProtobufCMessage *m,
                  const ProtobufCFieldDescriptor *fd, bool first)
{
    const ProtobufCFieldDescriptor *set = ctl__oneof_set(m, fd);
    key(f, oneof_name(m->descriptor), first);
    if (set == NULL) {
        fputs("null", f);
        return;
    }
    fputs("{\"", f);
    go_name(f, set->name);
    fputs("\":", f);
    if (set->type == PROTOBUF_C_TYPE_MESSAGE &&
        *(void *const *)ctl__field_ptr(m, set) == NULL)
        fputs("null", f);
    else
        value(f, set, ctl__field_ptr(m, set));
    fputc('}', f);
}

/* members writes m's members, a comma first unless first; returns whether
 * it wrote any. */
static bool members(FILE *f, const ProtobufCMessage *m, bool first)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    bool wrote = false;
    assert(d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        const void *p = ctl__field_ptr(m, fd);
        if (!ctl__field_in_v34(d, fd))
            continue;
        if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (!ctl__oneof_first(d, fd))
                continue;
            oneof(f, m, fd, first && !wrote);
        } else if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n =
                *(const size_t *)((const char *)m + fd->quantifier_offset);
            const char *a = *(char *const *)p;
            if (n == 0)
                continue;
            key(f, fd->name, first && !wrote);
            fputc('[', f);
            for (size_t k = 0; k < n; k++) {
                if (k > 0)
                    fputc(',', f);
                value(f, fd, a + k * ctl__elem_size(fd->type));
            }
            fputc(']', f);
        } else {
            if (!ctl__field_present(m, fd))
                continue;
            key(f, fd->name, first && !wrote);
            value(f, fd, p);
        }
        wrote = true;
    }
    return wrote;
}

static void object(FILE *f, const ProtobufCMessage *m)
{
    if (m == NULL) {
        fputs("null", f);
        return;
    }
    fputc('{', f);
    members(f, m, true);
    fputc('}', f);
}

void ctl_json_message(FILE *f, const ProtobufCMessage *m)
{
    assert(f != NULL);
    object(f, m);
    fputc('\n', f);
}

/* ---- The builder ---- */

void ctl_json_init(struct ctl_json *j, FILE *f)
{
    assert(j != NULL && f != NULL);
    memset(j, 0, sizeof *j);
    j->f = f;
}

/* pre writes what goes before a value or a key: a comma when the open
 * container already holds one. */
static void pre(struct ctl_json *j)
{
    if (j->keyed) {
        j->keyed = false;
        return;
    }
    if (j->depth > 0 && j->more[j->depth])
        fputc(',', j->f);
    j->more[j->depth] = true;
}

static void nest(struct ctl_json *j, char c)
{
    pre(j);
    assert(j->depth < CTL_JSON_DEPTH_MAX);
    fputc(c, j->f);
    j->depth++;
    j->more[j->depth] = false;
}

static void unnest(struct ctl_json *j, char c)
{
    assert(j->depth > 0 && !j->keyed);
    fputc(c, j->f);
    j->depth--;
}

void ctl_json_begin_object(struct ctl_json *j)
{
    nest(j, '{');
}
void ctl_json_end_object(struct ctl_json *j)
{
    unnest(j, '}');
}
void ctl_json_begin_array(struct ctl_json *j)
{
    nest(j, '[');
}
void ctl_json_end_array(struct ctl_json *j)
{
    unnest(j, ']');
}

void ctl_json_key(struct ctl_json *j, const char *name)
{
    assert(j->depth > 0 && !j->keyed);
    pre(j);
    ctl_json_string(j->f, name, strlen(name));
    fputc(':', j->f);
    j->keyed = true;
}

void ctl_json_i64(struct ctl_json *j, int64_t v)
{
    pre(j);
    fprintf(j->f, "%" PRId64, v);
}

void ctl_json_u64(struct ctl_json *j, uint64_t v)
{
    pre(j);
    fprintf(j->f, "%" PRIu64, v);
}

void ctl_json_bool(struct ctl_json *j, bool v)
{
    pre(j);
    fputs(v ? "true" : "false", j->f);
}

void ctl_json_null(struct ctl_json *j)
{
    pre(j);
    fputs("null", j->f);
}

void ctl_json_str(struct ctl_json *j, const char *s)
{
    ctl_json_strn(j, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

void ctl_json_strn(struct ctl_json *j, const char *s, size_t n)
{
    pre(j);
    ctl_json_string(j->f, s, n);
}

void ctl_json_bytes_b64(struct ctl_json *j, const void *p, size_t n)
{
    assert(p != NULL || n == 0);
    pre(j);
    b64(j->f, p, n);
}

void ctl_json_message_value(struct ctl_json *j, const ProtobufCMessage *m)
{
    pre(j);
    object(j->f, m);
}

void ctl_json_message_fields(struct ctl_json *j, const ProtobufCMessage *m)
{
    assert(j->depth > 0 && !j->keyed);
    if (m == NULL)
        return;
    if (members(j->f, m, !j->more[j->depth]))
        j->more[j->depth] = true;
}
