/*
 * fuzz_wal.c - libFuzzer target for the WAL decoder.  The input bytes become
 * the only segment file of a WAL dir; wal_open and wal_replay must never
 * crash, leak or trip a sanitizer - only return errors.  When the WAL opens,
 * an append + sync + reopen + replay checks that the repaired file is
 * writable and that what was appended survives.
 *
 * The first input byte picks the segment's name (sequence 0 or 1, first
 * index 1 or a large one) so that naming and chain checks get exercised.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "util/log.h"
#include "wal/wal.h"

static char dir[64];

static void dir_clear(void)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    char path[512];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    closedir(d);
}

static int count_ent(void *arg, const struct wal_entry *e)
{
    uint64_t *n = arg;
    (*n)++;
    if (e->len > 0 && e->data == NULL)
        abort();
    return 0;
}

static const struct wal_replay_cb cbs = {NULL, NULL, NULL, count_ent};

static void write_seg(const uint8_t *data, size_t size)
{
    char path[512];
    uint8_t sel = size > 0 ? data[0] : 0;
    snprintf(path, sizeof path, "%s/%016llx-%016llx.wal", dir,
             (unsigned long long)(sel & 1), (sel & 2) ? 0x1000ull : 1ull);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        abort();
    if (size > 1 && write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
        abort();
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (dir[0] == '\0') {
        strcpy(dir, "/tmp/fuzz_wal.XXXXXX");
        if (mkdtemp(dir) == NULL)
            abort();
        log_set_level(LOG_FATAL);
    }
    dir_clear();
    write_seg(data, size);
    struct wal_options opts = {WAL_SEGMENT_BYTES_MIN, true};
    struct wal *w;
    if (wal_open(dir, &opts, &w) != 0)
        return 0;
    uint64_t n = 0;
    int rv = wal_replay(w, NULL, &cbs, &n);
    uint64_t last = wal_last_index(w);
    struct wal_entry e = {last + 1, 1, 0, "fuzz", 4};
    struct wal_hardstate hs = {1, 0, 0};
    if (wal_append(w, &hs, &e, 1) == 0 && wal_sync(w) == 0) {
        wal_close(w);
        if (wal_open(dir, &opts, &w) != 0)
            abort(); /* what we wrote ourselves must open */
        if (wal_last_index(w) != last + 1)
            abort();
        uint64_t n2 = 0;
        if (rv == 0 && wal_replay(w, NULL, &cbs, &n2) == 0 && n2 == 0)
            abort(); /* the appended entry must come back */
    }
    wal_close(w);
    return 0;
}
