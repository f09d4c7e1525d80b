/*
 * print_util.c - Go's formatting of single values, as etcdctl's printers
 * get it from fmt, strconv and go-humanize: %q of a string, --hex keys,
 * humanize.Bytes, time.Duration.String and %x of an ID.
 */
#include <assert.h>
#include <inttypes.h>
#include <math.h>

#include "ctl/print.h"
#include "ctl/print_int.h"
#include "util/str.h"

static const char hexdigits[] = "0123456789abcdef";

/* esc_rune writes the escape %q uses for the non-printable rune r. */
static void esc_rune(FILE *f, uint32_t r)
{
    static const char names[] = "abtnvfr"; /* \a (7) to \r (13) */
    if (r >= 7 && r <= 13) {
        fputc('\\', f);
        fputc(names[r - 7], f);
    } else if (r < ' ' || r == 0x7f) {
        fprintf(f, "\\x%c%c", hexdigits[r >> 4], hexdigits[r & 15]);
    } else if (r < 0x10000) {
        fprintf(f, "\\u%04" PRIx32, r);
    } else {
        fprintf(f, "\\U%08" PRIx32, r);
    }
}

void ctl_quote(FILE *f, const void *p, size_t n)
{
    const unsigned char *s = p;
    assert(f != NULL);
    assert(s != NULL || n == 0);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        uint32_t r;
        size_t w = ctl__utf8_decode(s + i, n - i, &r);
        if (w == 1 && r == CTL__RUNE_ERROR) {
            fprintf(f, "\\x%c%c", hexdigits[s[i] >> 4], hexdigits[s[i] & 15]);
        } else if (r == '"' || r == '\\') {
            fputc('\\', f);
            fputc((int)r, f);
        } else if (ctl__in(ctl__printable, ctl__printable_n, r)) {
            fwrite(s + i, 1, w, f);
        } else {
            esc_rune(f, r);
        }
        i += w;
    }
    fputc('"', f);
}

void ctl_hex_escaped(FILE *f, const void *p, size_t n)
{
    const unsigned char *s = p;
    assert(s != NULL || n == 0);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "\\x%c%c", hexdigits[s[i] >> 4], hexdigits[s[i] & 15]);
}

/* kv_line prints one of printKV's lines. */
static void kv_line(FILE *f, bool hex, const ProtobufCBinaryData *b)
{
    if (hex)
        ctl_hex_escaped(f, b->data, b->len);
    else if (b->len > 0)
        fwrite(b->data, 1, b->len, f);
    fputc('\n', f);
}

void ctl_simple_kv(FILE *f, bool hex, bool value_only,
                   const Mvccpb__KeyValue *kv)
{
    static const ProtobufCBinaryData none = {0, NULL};
    assert(f != NULL);
    if (!value_only)
        kv_line(f, hex, kv != NULL ? &kv->key : &none);
    kv_line(f, hex, kv != NULL ? &kv->value : &none);
}

char *ctl_humanize_bytes(char *buf, size_t cap, uint64_t n)
{
    static const char *const sizes[] = {"B",  "kB", "MB", "GB",
                                        "TB", "PB", "EB"};
    assert(buf != NULL && cap > 0);
    if (n < 10) {
        snprintf(buf, cap, "%" PRIu64 " B", n);
        return buf;
    }
    /* go-humanize works in float64 with these very steps; its rounding
     * (999999 is "1000 kB", 999999999999999 is "1.0 PB") follows them. */
    double e = floor(log((double)n) / log(1000.0));
    double val = floor((double)n / pow(1000.0, e) * 10 + 0.5) / 10;
    int ei = (int)e;
    assert(ei >= 0 && ei <= 6);
    snprintf(buf, cap, val < 10 ? "%.1f %s" : "%.0f %s", val, sizes[ei]);
    return buf;
}

char *ctl_duration(char *buf, size_t cap, int64_t ns)
{
    assert(buf != NULL && cap > 1);
    if (ns >= 0)
        return str_go_duration(buf, cap, (unsigned long long)ns);
    /* The magnitude of INT64_MIN fits in an unsigned 64-bit integer. */
    buf[0] = '-';
    str_go_duration(buf + 1, cap - 1, 0ull - (unsigned long long)ns);
    return buf;
}

char *ctl_id_hex(char *buf, size_t cap, uint64_t id)
{
    assert(buf != NULL && cap > 0);
    snprintf(buf, cap, "%" PRIx64, id);
    return buf;
}
