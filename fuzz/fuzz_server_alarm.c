/*
 * fuzz_server_alarm.c - goal: the alarm list's key decoder (alarm.h: the
 * keys of the store's "alarm" bucket) takes any bytes without crashing,
 * accepts only the 12-byte keys of known alarm types, and what it accepts
 * encodes back to the same bytes.  Method: the input is one key.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/alarm.h"
#include "util/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct server_alarm a;
    int rc = server__alarm_key_decode(data, size, &a);
    if (rc != 0) {
        if (rc != ERR_CORRUPT)
            abort();
        return 0;
    }
    uint8_t back[SERVER_ALARM_KEY_BYTES];
    server__alarm_key_encode(back, &a);
    if (size != sizeof back || memcmp(back, data, size) != 0)
        abort();
    return 0;
}
