/*
 * fuzz_util_log.c - zap lines from arbitrary bytes stay one JSON line.
 *
 * Input: byte 0 picks the buffer size (512..4095), then the message and a
 * string field's value, split at the first NUL.  Log text comes from
 * clients (keys, names, peer addresses in messages), so any bytes must
 * give one bounded, valid JSON object: balanced strings and brackets, no
 * raw control byte, one '\n' at the end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static void check(const char *b, size_t n, size_t cap)
{
    if (n == 0 || n >= cap || b[n - 1] != '\n' || b[0] != '{')
        abort();
    int depth = 0;
    int in_str = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c < 0x20)
            abort(); /* raw control byte (or an early newline) */
        if (in_str) {
            if (c == '\\') {
                i++;
                continue;
            }
            in_str = c != '"';
            continue;
        }
        in_str = c == '"';
        depth += (c == '{' || c == '[') - (c == '}' || c == ']');
        if (depth < 0)
            abort();
    }
    if (in_str || depth != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t cap = 512 + (size_t)data[0] * 14;
    char text[8192];
    size_t len = size - 1 < sizeof text - 1 ? size - 1 : sizeof text - 1;
    memcpy(text, data + 1, len);
    text[len] = '\0';
    const char *field = text + strlen(text);
    if ((size_t)(field - text) < len)
        field++;
    struct log_field f[] = {LOG_STR("s", field), LOG_CSV("urls", field),
                            LOG_ID("id", len), LOG_DUR_NS("d", -(int64_t)len)};
    static char buf[4096];
    size_t n = log_format_zap(buf, cap, LOG_INFO, "a/b.c", 1, text, f, 4);
    check(buf, n, cap);
    return 0;
}
