/*
 * decode.c - JSON text into a protobuf-c message, accepting what jsonpb
 * (grpc-gateway's unmarshaler in etcd 3.4) accepts; json.h has the rules.
 * json-c parses the text (strict mode, bounded depth); we walk its tree
 * with the message's descriptor.  Everything is allocated with malloc, as
 * protobuf-c's default allocator does, so that the caller frees the result
 * with protobuf_c_message_free_unpacked(m, NULL) (and svc_kv_range, which
 * takes its request as unpacked, can own it).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "json/json.h"
#include "json/json_int.h"
#include "util/err.h"
#include "util/mem.h"

/* One decode's state. */
struct dec {
    char *err;                 /* the refusal's message */
    size_t cap;                /* its room */
    struct json_pb_info *info; /* what the caller learns */
};

static int fail(struct dec *d, const char *fmt, const char *a,
                const char *b)
{
    snprintf(d->err, d->cap, fmt, a, b);
    return ERR_INVAL;
}

/* kind: Go's word for a JSON value in "cannot unmarshal X". */
static const char *kind(struct json_object *o)
{
    switch (json_object_get_type(o)) {
    case json_type_boolean: return "bool";
    case json_type_double:
    case json_type_int: return "number";
    case json_type_object: return "object";
    case json_type_array: return "array";
    case json_type_string: return "string";
    default: return "null";
    }
}

/* go_type: Go's name of the field's type in the same message. */
static const char *go_type(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: return "int32";
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return "uint32";
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return "int64";
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return "uint64";
    case PROTOBUF_C_TYPE_BOOL: return "bool";
    case PROTOBUF_C_TYPE_STRING: return "string";
    case PROTOBUF_C_TYPE_BYTES: return "[]uint8";
    case PROTOBUF_C_TYPE_FLOAT: return "float32";
    case PROTOBUF_C_TYPE_DOUBLE: return "float64";
    default: return "map[string]json.RawMessage";
    }
}

static int mismatch(struct dec *d, const ProtobufCFieldDescriptor *f,
                    struct json_object *o)
{
    return fail(d, "json: cannot unmarshal %s into Go value of type %s",
                kind(o), go_type(f));
}

/* number_like: s is a JSON number (what Go's decoder would read as one). */
static bool number_like(const char *s)
{
    if (*s == '-')
        s++;
    if (!isdigit((unsigned char)*s))
        return false;
    char *end = NULL;
    errno = 0;
    (void)strtod(s, &end);
    return end != NULL && *end == '\0';
}

/* integer reads o (a JSON integer, or a string holding one) as a signed
 * (or unsigned) 64-bit value within [lo, hi] (unsigned: [0, uhi]). */
static int integer(struct dec *d, const ProtobufCFieldDescriptor *f,
                   struct json_object *o, bool is_signed, int64_t lo,
                   int64_t hi, uint64_t uhi, void *out)
{
    enum json_type t = json_object_get_type(o);
    const char *s;
    if (t == json_type_string || t == json_type_int || t == json_type_double)
        s = json_object_get_string(o);
    else
        return mismatch(d, f, o);
    /* json-c keeps an integer's text only through its value: take the
     * string form and parse it ourselves, so a string and a number take
     * one path, and anything but plain decimal digits is refused as
     * Go's json refuses "1e2" and 5.5 for an integer. */
    if (t == json_type_double)
        s = json_object_get_string(o);
    const char *p = s;
    if (*p == '-' && is_signed)
        p++;
    bool digits = *p != '\0';
    for (const char *q = p; *q; q++)
        digits &= isdigit((unsigned char)*q) != 0;
    /* jsonpb unquotes a string and reads its text as a JSON value: a
     * number there is named as one, anything else is a syntax error */
    char what[96];
    snprintf(what, sizeof what, "number %.64s", s);
    if (t == json_type_string && !digits && !number_like(s)) {
        char c[2] = {*s ? *s : ' ', '\0'};
        return fail(d, *s ? "invalid character '%s' looking for beginning "
                            "of value%s"
                          : "unexpected end of JSON input%s%s",
                    *s ? c : "", "");
    }
    if (!digits || t == json_type_double)
        return fail(d, "json: cannot unmarshal %s into Go value of type %s",
                    what, go_type(f));
    errno = 0;
    char *end = NULL;
    if (is_signed) {
        long long v = strtoll(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < lo || v > hi)
            return fail(d, "json: cannot unmarshal %s into Go value of "
                        "type %s", what, go_type(f));
        *(int64_t *)out = v;
    } else {
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v > uhi)
            return fail(d, "json: cannot unmarshal %s into Go value of "
                        "type %s", what, go_type(f));
        *(uint64_t *)out = v;
    }
    return 0;
}

/* b64 decodes standard base64 as Go's StdEncoding does (padding needed,
 * \r and \n skipped); errors name the input byte as Go does. */
static int b64(struct dec *d, const char *s, size_t n, ProtobufCBinaryData *out)
{
    uint8_t *buf = malloc(n / 4 * 3 + 3);
    if (buf == NULL)
        return ERR_NOMEM;
    size_t o = 0, i = 0;
    char pos[32];
    while (i < n) {
        uint32_t v = 0;
        int j = 0, pad = 0;
        size_t q0 = i;
        while (j < 4) {
            if (i == n) {
                if (j == 0)
                    break;
                snprintf(pos, sizeof pos, "%zu", q0);
                goto bad;
            }
            char c = s[i++];
            if (c == '\r' || c == '\n')
                continue;
            int x = c >= 'A' && c <= 'Z'   ? c - 'A'
                    : c >= 'a' && c <= 'z' ? c - 'a' + 26
                    : c >= '0' && c <= '9' ? c - '0' + 52
                    : c == '+'             ? 62
                    : c == '/'             ? 63
                                           : -1;
            if (c == '=' && j >= 2) {
                pad = 4 - j;
                if (pad == 2 && (i == n || s[i] != '=')) {
                    snprintf(pos, sizeof pos, "%zu", i - 1 < n ? i : n);
                    goto bad;
                }
                i += pad == 2 ? 1 : 0;
                while (i < n && (s[i] == '\r' || s[i] == '\n'))
                    i++;
                if (i < n) {
                    snprintf(pos, sizeof pos, "%zu", i);
                    goto bad;
                }
                break;
            }
            if (x < 0) {
                snprintf(pos, sizeof pos, "%zu", i - 1);
                goto bad;
            }
            v = v << 6 | (uint32_t)x;
            j++;
        }
        if (j == 0)
            break;
        v <<= 6 * (4 - j);
        buf[o++] = (uint8_t)(v >> 16);
        if (j > 2)
            buf[o++] = (uint8_t)(v >> 8);
        if (j > 3)
            buf[o++] = (uint8_t)v;
        if (pad)
            break;
    }
    if (o == 0) {
        free(buf);
        buf = NULL;
    }
    out->data = buf;
    out->len = o;
    return 0;
bad:
    free(buf);
    return fail(d, "illegal base64 data at input byte %s%s", pos, "");
}

/* go_enum_name: etcd's Go type name of an enum ("etcdserverpb.
 * RangeRequest_SortOrder" for etcdserverpb.RangeRequest.SortOrder). */
static void go_enum_name(const ProtobufCEnumDescriptor *e, char *out,
                         size_t cap)
{
    snprintf(out, cap, "%s", e->name);
    size_t pkg = e->package_name ? strlen(e->package_name) : 0;
    for (size_t i = pkg + 1; i < cap && out[i]; i++)
        if (out[i] == '.')
            out[i] = '_';
}

static int decode_obj(struct dec *d, const ProtobufCMessageDescriptor *md,
                      struct json_object *o, ProtobufCMessage **m_out);

/* one decodes a single value of f from o into p. */
static int one(struct dec *d, const ProtobufCFieldDescriptor *f,
               struct json_object *o, void *p)
{
    int64_t i64;
    uint64_t u64;
    int rc;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        rc = integer(d, f, o, true, INT32_MIN, INT32_MAX, 0, &i64);
        if (rc == 0)
            *(int32_t *)p = (int32_t)i64;
        return rc;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        rc = integer(d, f, o, false, 0, 0, UINT32_MAX, &u64);
        if (rc == 0)
            *(uint32_t *)p = (uint32_t)u64;
        return rc;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return integer(d, f, o, true, INT64_MIN, INT64_MAX, 0, p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return integer(d, f, o, false, 0, 0, UINT64_MAX, p);
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_object_is_type(o, json_type_boolean))
            return mismatch(d, f, o);
        *(protobuf_c_boolean *)p = json_object_get_boolean(o);
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        if (!json_object_is_type(o, json_type_double) &&
            !json_object_is_type(o, json_type_int))
            return mismatch(d, f, o);
        if (f->type == PROTOBUF_C_TYPE_FLOAT)
            *(float *)p = (float)json_object_get_double(o);
        else
            *(double *)p = json_object_get_double(o);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        if (json_object_is_type(o, json_type_string)) {
            const char *s = json_object_get_string(o);
            const ProtobufCEnumValue *ev =
                protobuf_c_enum_descriptor_get_value_by_name(f->descriptor,
                                                             s);
            if (ev == NULL) {
                char tn[128];
                go_enum_name(f->descriptor, tn, sizeof tn);
                char v[96];
                snprintf(v, sizeof v, "%.80s", s);
                return fail(d, "unknown value \"%s\" for enum %s", v, tn);
            }
            *(int *)p = ev->value;
            return 0;
        }
        rc = integer(d, f, o, true, INT32_MIN, INT32_MAX, 0, &i64);
        if (rc == 0)
            *(int *)p = (int)i64;
        return rc;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_object_is_type(o, json_type_string))
            return mismatch(d, f, o);
        size_t n = (size_t)json_object_get_string_len(o);
        const char *s = json_object_get_string(o);
        if (memchr(s, '\0', n) != NULL && d->info != NULL)
            d->info->nul_in_string = true;
        /* Go's decoder turns each invalid UTF-8 byte into U+FFFD (3 bytes) */
        char *c = malloc(3 * n + 1);
        if (c == NULL)
            return ERR_NOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t len = json__utf8_len((const unsigned char *)s + i, n - i,
                                        &cp);
            if (len == 0) {
                memcpy(c + k, "\xef\xbf\xbd", 3);
                k += 3;
                i++;
            } else {
                memcpy(c + k, s + i, len);
                k += len;
                i += len;
            }
        }
        c[k] = '\0';
        char **slot = p;
        if (*slot != NULL && *slot != f->default_value)
            free(*slot);
        *slot = c;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_object_is_type(o, json_type_string))
            return mismatch(d, f, o);
        ProtobufCBinaryData *bd = p;
        ProtobufCBinaryData nb = {0, NULL};
        rc = b64(d, json_object_get_string(o),
                 (size_t)json_object_get_string_len(o), &nb);
        if (rc != 0)
            return rc;
        free(bd->data);
        *bd = nb;
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage **slot = p, *sub = NULL;
        rc = decode_obj(d, f->descriptor, o, &sub);
        if (rc != 0)
            return rc;
        if (*slot != NULL)
            protobuf_c_message_free_unpacked(*slot, NULL);
        *slot = sub;
        return 0;
    }
    default:
        return fail(d, "unsupported field type in %s%s", f->name, "");
    }
}

/* parsed: json-c's verdict on a value (je) as Go's decoder words it, or
 * the value o decoded into *m_out. */
static int parsed(struct dec *d, const ProtobufCMessageDescriptor *md,
                  struct json_object *o, enum json_tokener_error je,
                  ProtobufCMessage **m_out)
{
    if (je == json_tokener_continue)
        return fail(d, "unexpected EOF%s%s", "", "");
    if (je != json_tokener_success)
        return fail(d, "%s%s", json_tokener_error_desc(je), "");
    return decode_obj(d, md, o, m_out);
}

static size_t elem_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    default: return 4;
    }
}

/* repeated decodes the array o into the repeated field f of m, replacing
 * what an earlier key of the same name left. */
static int repeated(struct dec *d, const ProtobufCFieldDescriptor *f,
                    struct json_object *o, ProtobufCMessage *m)
{
    if (!json_object_is_type(o, json_type_array))
        return fail(d, "json: cannot unmarshal %s into Go value of type "
                    "[]json.RawMessage", kind(o), "");
    size_t *count = (size_t *)((char *)m + f->quantifier_offset);
    void **arr = (void **)((char *)m + f->offset);
    if (*count > 0)
        return fail(d, "repeated field \"%s\" given twice%s", f->name, "");
    size_t n = json_object_array_length(o);
    if (n == 0)
        return 0;
    char *a = calloc(n, elem_size(f));
    if (a == NULL)
        return ERR_NOMEM;
    *arr = a;
    for (size_t k = 0; k < n; k++) {
        struct json_object *e = json_object_array_get_idx(o, k);
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            /* a NULL slot is not freed by free_unpacked's string loop:
             * give it the empty default until it is filled */
            ((char **)a)[k] = NULL;
        }
        int rc = e == NULL ? 0 : one(d, f, e, a + k * elem_size(f));
        if (rc == 0 && e == NULL && f->type == PROTOBUF_C_TYPE_MESSAGE)
            rc = decode_obj(d, f->descriptor, NULL,
                            (ProtobufCMessage **)(a + k * elem_size(f)));
        if (rc != 0) {
            *count = k; /* what free_unpacked must free */
            return rc;
        }
        if (f->type == PROTOBUF_C_TYPE_STRING && ((char **)a)[k] == NULL) {
            ((char **)a)[k] = strdup("");
            if (((char **)a)[k] == NULL) {
                *count = k;
                return ERR_NOMEM;
            }
        }
    }
    *count = n;
    return 0;
}

/* camel_is: name is f's lowerCamelCase JSON name (protoc's rule: drop
 * each '_' and capitalise the letter after it). */
static bool camel_is(const char *name, const char *orig)
{
    bool up = false;
    for (; *orig; orig++) {
        if (*orig == '_') {
            up = true;
            continue;
        }
        char c = up ? (char)toupper((unsigned char)*orig) : *orig;
        up = false;
        if (*name++ != c)
            return false;
    }
    return *name == '\0';
}

static const ProtobufCFieldDescriptor *
field_find(const ProtobufCMessageDescriptor *md, const char *name)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(md, name);
    if (f != NULL)
        return f;
    for (unsigned i = 0; i < md->n_fields; i++)
        if (camel_is(name, md->fields[i].name))
            return &md->fields[i];
    return NULL;
}

/* field_set decodes value v (not null) of field f into m. */
static int field_set(struct dec *d, const ProtobufCFieldDescriptor *f,
                     struct json_object *v, ProtobufCMessage *m)
{
    char *base = (char *)m;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return repeated(d, f, v, m);
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        uint32_t *which = (uint32_t *)(base + f->quantifier_offset);
        if (*which != 0 && *which != f->id) {
            /* another member of the oneof was set: jsonpb refuses */
            return fail(d, "more than one field of a oneof set: %s%s",
                        f->name, "");
        }
        int rc = one(d, f, v, base + f->offset);
        if (rc == 0)
            *which = f->id;
        return rc;
    }
    int rc = one(d, f, v, base + f->offset);
    if (rc == 0 && f->label == PROTOBUF_C_LABEL_OPTIONAL &&
        f->quantifier_offset != 0 && f->type != PROTOBUF_C_TYPE_MESSAGE &&
        f->type != PROTOBUF_C_TYPE_STRING)
        *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    return rc;
}

/* decode_obj makes a message of type md from o (an object, or NULL/null:
 * the empty message). */
static int decode_obj(struct dec *d, const ProtobufCMessageDescriptor *md,
                      struct json_object *o, ProtobufCMessage **m_out)
{
    assert(md->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
    if (o != NULL && !json_object_is_type(o, json_type_object))
        return fail(d, "json: cannot unmarshal %s into Go value of type "
                    "map[string]json.RawMessage", kind(o), "");
    ProtobufCMessage *m = malloc(md->sizeof_message);
    if (m == NULL)
        return ERR_NOMEM;
    md->message_init(m);
    int rc = 0;
    if (o != NULL) {
        json_object_object_foreach(o, key, v)
        {
            const ProtobufCFieldDescriptor *f = field_find(md, key);
            if (f == NULL || v == NULL)
                continue; /* unknown fields ignored; null: default */
            rc = field_set(d, f, v, m);
            if (rc != 0)
                break;
        }
    }
    if (rc != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return rc;
    }
    *m_out = m;
    return 0;
}

/* blank: n bytes of JSON whitespace only. */
static bool blank(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] != ' ' && t[i] != '\t' && t[i] != '\r' && t[i] != '\n')
            return false;
    return true;
}

/* decode reads the first JSON value of text as md; *end_out: where it
 * ended (n when the text is blank). */
static int decode(const ProtobufCMessageDescriptor *md, const char *text,
                  size_t n, ProtobufCMessage **m_out,
                  struct json_pb_info *info_out, char *err, size_t cap,
                  size_t *end_out)
{
    assert(md != NULL && m_out != NULL && err != NULL && cap > 0);
    struct dec d = {.err = err, .cap = cap, .info = info_out};
    err[0] = '\0';
    *end_out = n;
    if (info_out != NULL)
        memset(info_out, 0, sizeof *info_out);
    if (n > JSON_PB_INPUT_MAX)
        return fail(&d, "http: request body too large%s%s", "", "");
    if (n == 0 || blank(text, n))
        return decode_obj(&d, md, NULL, m_out);
    struct json_tokener *tok = json_tokener_new_ex(JSON_PB_DEPTH_MAX);
    if (tok == NULL)
        return ERR_NOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
                                    JSON_TOKENER_ALLOW_TRAILING_CHARS);
    struct json_object *o = json_tokener_parse_ex(tok, text, (int)n);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t lead = 0;
    while (lead < n && strchr(" \t\r\n", text[lead]) != NULL)
        lead++;
    if (je == json_tokener_continue && lead < n &&
        strchr("{[\"", text[lead]) == NULL) {
        /* a bare literal or number ends only at a delimiter: give json-c
         * the end of the input as one */
        o = json_tokener_parse_ex(tok, "", 1);
        je = json_tokener_get_error(tok);
    } else {
        *end_out = json_tokener_get_parse_end(tok);
    }
    int rc = parsed(&d, md, o, je, m_out);
    json_object_put(o);
    json_tokener_free(tok);
    return rc;
}

int json_pb_decode(const ProtobufCMessageDescriptor *md, const char *text,
                   size_t n, ProtobufCMessage **m_out,
                   struct json_pb_info *info_out, char *err, size_t cap)
{
    size_t end;
    return decode(md, text, n, m_out, info_out, err, cap, &end);
}

int json_pb_decode_next(const ProtobufCMessageDescriptor *md,
                        const char *text, size_t n, size_t *used_out,
                        ProtobufCMessage **m_out, char *err, size_t cap)
{
    assert(used_out != NULL && err != NULL && cap > 0);
    *used_out = n;
    err[0] = '\0';
    if (n == 0 || blank(text, n))
        return ERR_NOTFOUND;
    size_t end = n;
    int rc = decode(md, text, n, m_out, NULL, err, cap, &end);
    assert(end <= n);
    if (rc == 0 && end == 0)
        end = n; /* defensive: always make progress */
    *used_out = end;
    return rc;
}

/* --- a sequence read in pieces (json.h json_pb_reader) --- */

struct json_pb_reader {
    struct json_tokener *tok; /* json-c's state inside the current value */
    /* The current value's bytes: json-c's incremental parse only finds
     * where a value ends (it takes some malformed numbers, "17-85", when
     * they come in pieces, which its one-shot parse refuses), then the
     * value is read in one shot from here, as json_pb_decode reads it. */
    char *buf;
    size_t buf_cap;
    size_t value_n;           /* bytes fed since the last value ended */
    bool started;             /* a non-blank byte since then */
    bool bare;                /* that byte began a literal or a number */
};

int json_pb_reader_new(struct json_pb_reader **r_out)
{
    assert(r_out != NULL);
    struct json_pb_reader *r = mem_calloc(1, sizeof *r);
    if (r == NULL)
        return ERR_NOMEM;
    r->tok = json_tokener_new_ex(JSON_PB_DEPTH_MAX);
    if (r->tok == NULL) {
        mem_free(r);
        return ERR_NOMEM;
    }
    json_tokener_set_flags(r->tok, JSON_TOKENER_STRICT |
                                       JSON_TOKENER_ALLOW_TRAILING_CHARS);
    *r_out = r;
    return 0;
}

void json_pb_reader_free(struct json_pb_reader *r)
{
    if (r == NULL)
        return;
    json_tokener_free(r->tok);
    mem_free(r->buf);
    mem_free(r);
}

/* keep appends n bytes of the current value to r->buf. */
static int keep(struct json_pb_reader *r, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (r->value_n + n > r->buf_cap) {
        size_t cap = r->buf_cap < 256 ? 256 : r->buf_cap;
        while (cap < r->value_n + n)
            cap *= 2;
        char *b = mem_realloc(r->buf, cap);
        if (b == NULL)
            return ERR_NOMEM;
        r->buf = b;
        r->buf_cap = cap;
    }
    memcpy(r->buf + r->value_n, p, n);
    r->value_n += n;
    return 0;
}

/* reader_done turns a value json-c finished (o, or its error je) into a
 * message, and readies r for the next value. */
static int reader_done(struct json_pb_reader *r,
                       const ProtobufCMessageDescriptor *md,
                       struct json_object *o, enum json_tokener_error je,
                       ProtobufCMessage **m_out, char *err, size_t cap)
{
    struct dec d = {.err = err, .cap = cap};
    int rc = parsed(&d, md, o, je, m_out);
    json_object_put(o);
    if (rc == 0) { /* read again in one shot: json_pb_decode's verdict */
        protobuf_c_message_free_unpacked(*m_out, NULL);
        *m_out = NULL;
        size_t end = 0;
        rc = decode(md, r->buf, r->value_n, m_out, NULL, err, cap, &end);
    }
    json_tokener_reset(r->tok);
    r->value_n = 0;
    r->started = r->bare = false;
    return rc;
}

int json_pb_reader_next(struct json_pb_reader *r,
                        const ProtobufCMessageDescriptor *md,
                        const char *text, size_t n, bool end, size_t max,
                        size_t *used_out, ProtobufCMessage **m_out,
                        char *err, size_t cap)
{
    assert(r != NULL && md != NULL && used_out != NULL && m_out != NULL);
    assert(err != NULL && cap > 0 && (text != NULL || n == 0));
    struct dec d = {.err = err, .cap = cap};
    err[0] = '\0';
    *used_out = n;
    size_t lead = 0;
    if (!r->started) { /* blanks between values are not the value's */
        while (lead < n && (text[lead] == ' ' || text[lead] == '\t' ||
                            text[lead] == '\r' || text[lead] == '\n'))
            lead++;
        if (lead < n) {
            r->started = true;
            r->bare = strchr("{[\"", text[lead]) == NULL;
        }
    }
    if (!r->started)
        return end ? ERR_NOTFOUND : ERR_MORE;
    if (n - lead > INT_MAX || r->value_n + (n - lead) > max) {
        json_tokener_reset(r->tok);
        r->value_n = 0;
        r->started = r->bare = false;
        return fail(&d, "http: request body too large%s%s", "", "");
    }
    struct json_object *o = NULL;
    if (n > lead)
        o = json_tokener_parse_ex(r->tok, text + lead, (int)(n - lead));
    enum json_tokener_error je =
        n > lead ? json_tokener_get_error(r->tok) : json_tokener_continue;
    size_t took = n - lead;
    if (je != json_tokener_continue)
        took = json_tokener_get_parse_end(r->tok);
    if (keep(r, text + lead, took) != 0) {
        json_object_put(o);
        return ERR_NOMEM;
    }
    if (je == json_tokener_continue && !end)
        return ERR_MORE;
    if (je == json_tokener_continue && r->bare) {
        /* a bare literal or number ends only at a delimiter: give json-c
         * the end of the input as one */
        o = json_tokener_parse_ex(r->tok, "", 1);
        je = json_tokener_get_error(r->tok);
    } else if (je != json_tokener_continue) {
        *used_out = lead + took;
    }
    return reader_done(r, md, o, je, m_out, err, cap);
}
