/*
 * fuzz_bbolt_read.c - the bbolt reader (src/bbolt/reader.c) on arbitrary
 * bytes: open (which checks the whole file) then a full walk.  Whatever
 * the input, it answers 0 or ERR_BBOLT_CORRUPT with a message naming an
 * offset, never crashes, loops or reads outside the buffer.
 * Seeds: fuzz/corpus/bbolt_read/ (databases from the writer: an empty
 * one, a small one with etcd's buckets, one with a two-level tree).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bbolt/bbolt.h"
#include "util/err.h"

static int count(void *arg, const struct bbolt_entry *e)
{
    size_t *n = arg;
    *n += e->key_len + e->value_len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so ASan sees any read past it. */
    uint8_t *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    struct bbolt_reader *r = NULL;
    int rc = bbolt_reader_open_mem(buf, size, &r);
    size_t n = 0;
    if (rc == 0)
        rc = bbolt_reader_walk(r, count, &n);
    if (rc != 0 && rc != ERR_BBOLT_CORRUPT && rc != ERR_NOMEM)
        abort();
    if (rc == ERR_BBOLT_CORRUPT && strstr(bbolt_reader_error(r), "offset") == NULL)
        abort();
    bbolt_reader_free(r);
    free(buf);
    return 0;
}
