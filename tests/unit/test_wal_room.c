/*
 * test_wal_room.c - goal: on a disk that is full, a batch written past a
 * put-off segment cut (the next segment could not be pre-created) is
 * refused with ERR_NOSPC and nothing written: the wal is not broken, the
 * same batch is accepted once space is freed, and a reopen replays every
 * entry once, intact (before: the pwrite failed midway and the wal was
 * broken for good, which stopped the member).  Method: fallocate is
 * wrapped (--wrap) to fail with ENOSPC while the test says so; segments
 * are 4 KiB so a few entries go past one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"
#include "wal/wal.h"

static bool disk_full;
static int refused;

int __real_fallocate(int fd, int mode, off_t offset, off_t len);

int __wrap_fallocate(int fd, int mode, off_t offset, off_t len)
{
    if (disk_full) {
        refused++;
        errno = ENOSPC;
        return -1;
    }
    return __real_fallocate(fd, mode, offset, len);
}

static char dir[256];
static uint64_t seen[256];
static size_t n_seen;
static bool data_ok;

static int on_meta(void *arg, uint64_t node, uint64_t cluster)
{
    (void)arg, (void)node, (void)cluster;
    return 0;
}

static int on_snap(void *arg, const struct wal_snapshot *s)
{
    (void)arg, (void)s;
    return 0;
}

static int on_hs(void *arg, const struct wal_hardstate *hs)
{
    (void)arg, (void)hs;
    return 0;
}

static char payload[300];

static int on_ent(void *arg, const struct wal_entry *e)
{
    (void)arg;
    if (n_seen >= 256)
        return -999;
    if (e->len != sizeof payload ||
        memcmp(e->data, payload, sizeof payload) != 0)
        data_ok = false;
    seen[n_seen++] = e->index;
    return 0;
}

static int append(struct wal *w, uint64_t index)
{
    struct wal_entry e = {.index = index, .term = 1, .data = payload,
                          .len = sizeof payload};
    return wal_append(w, NULL, &e, 1);
}

static void test_full_disk_past_the_cut(void **state)
{
    (void)state;
    memset(payload, 'p', sizeof payload);
    struct wal_options o = {.segment_bytes = 4096, .no_fsync = true};
    struct wal *w;
    assert_int_equal(wal_create(dir, &o, 1, 2, &w), 0);
    disk_full = true; /* from now the next segment cannot be pre-created */
    uint64_t index = 1;
    int rc = 0;
    /* Past the segment's 4 KiB the blocks are needed: refused. */
    for (; index < 40 && (rc = append(w, index)) == 0; index++)
        ;
    assert_int_equal(rc, ERR_NOSPC);
    assert_true(index > 5); /* the preallocated segment took the first */
    assert_true(wal_space_low(w));
    assert_false(wal_broken(w)); /* nothing written, usable */
    assert_int_equal(wal_last_index(w), index - 1);
    assert_int_equal(append(w, index), ERR_NOSPC); /* still full */
    assert_false(wal_broken(w));

    disk_full = false; /* space freed: the same batch goes in */
    assert_int_equal(append(w, index), 0);
    assert_int_equal(append(w, index + 1), 0);
    assert_int_equal(wal_sync(w), 0);
    uint64_t last = index + 1;
    wal_close(w);
    assert_true(refused >= 2);

    assert_int_equal(wal_open(dir, &o, &w), 0);
    const struct wal_replay_cb cbs = {on_meta, on_snap, on_hs, on_ent};
    n_seen = 0;
    data_ok = true;
    assert_int_equal(wal_replay(w, NULL, &cbs, NULL), 0);
    wal_close(w);
    assert_true(data_ok);
    assert_int_equal(n_seen, last);
    for (size_t i = 0; i < n_seen; i++)
        assert_int_equal(seen[i], i + 1);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/cetcd-wal-room-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_full_disk_past_the_cut, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
