/*
 * test_backend_journal.c - goal: the backend's journal (backend.h
 * "Journal") brings a compacting copy taken while the writer runs to
 * exactly the live env's state, whatever write calls made it (put, the
 * reserves, del, cursor_del), skips aborted txns, opens on the copy the
 * buckets created after it, and fails cleanly (the writer unharmed) when
 * its bound is passed.  Method: a live env opened as the member opens its
 * store (write_map, no fsync) with a plain and a REVKEY bucket; writes
 * before the copy, between the copy and the first replay, and after it;
 * then every bucket of both envs is compared entry by entry.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "util/err.h"

struct fixture {
    char dir[64];        /* temporary directory: live/ and copy/ */
    char live[96];       /* the live env's directory */
    char copy[96];       /* the copy's */
    struct backend *be;  /* the live env */
    backend_bucket plain, rev;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    strcpy(f->dir, "/tmp/cetcd-test-journal-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->live, sizeof f->live, "%s/live", f->dir);
    snprintf(f->copy, sizeof f->copy, "%s/copy", f->dir);
    struct backend_options o = {.no_fsync = true, .write_map = true};
    assert_int_equal(backend_open(f->live, &o, &f->be), 0);
    assert_int_equal(backend_bucket_open(f->be, "plain", 0, &f->plain), 0);
    assert_int_equal(backend_bucket_open(f->be, "rev", BACKEND_BUCKET_REVKEY,
                                         &f->rev), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    backend_journal_stop(f->be);
    backend_close(f->be);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* A REVKEY key: user bytes + 17 suffix bytes carrying n. */
static size_t revkey(char *buf, const char *user, unsigned n)
{
    size_t u = strlen(user);
    memcpy(buf, user, u);
    memset(buf + u, 0, BACKEND_REVKEY_SUFFIX);
    memcpy(buf + u + BACKEND_REVKEY_SUFFIX - sizeof n, &n, sizeof n);
    return u + BACKEND_REVKEY_SUFFIX;
}

/* One write txn of every kind of write, numbered by round so that each
 * round changes values, adds keys and deletes some of the previous. */
static void write_round(struct fixture *f, unsigned round)
{
    struct backend_txn *t;
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    char k[64], v[64];
    for (unsigned i = 0; i < 200; i++) {
        int kl = snprintf(k, sizeof k, "k%04u", (i * 7 + round * 13) % 500);
        int vl = snprintf(v, sizeof v, "r%u-i%u", round, i);
        assert_int_equal(backend_put(t, f->plain, k, (size_t)kl, v,
                                     (size_t)vl), 0);
    }
    for (unsigned i = 0; i < 50; i++) { /* deletes, some of absent keys */
        int kl = snprintf(k, sizeof k, "k%04u", (i * 11 + round) % 500);
        int rc = backend_del(t, f->plain, k, (size_t)kl);
        assert_true(rc == 0 || rc == ERR_NOTFOUND);
    }
    void *data;
    int kl = snprintf(k, sizeof k, "reserved");
    assert_int_equal(backend_put_reserve(t, f->plain, k, (size_t)kl, 8,
                                         &data), 0);
    memcpy(data, &round, sizeof round);
    memset((char *)data + sizeof round, 'r', 8 - sizeof round);
    for (unsigned i = 0; i < 100; i++) { /* ascending revisions */
        size_t n = revkey(k, i % 2 ? "b" : "a", round * 1000 + i);
        assert_int_equal(backend_append_reserve(t, f->rev, k, n, 4, &data),
                         0);
        memcpy(data, &i, 4);
    }
    /* A cursor: overwrite one entry, delete the next two. */
    struct backend_cursor *c;
    assert_int_equal(backend_cursor_open(t, f->rev, &c), 0);
    struct backend_val key;
    if (backend_cursor_first(c, &key, NULL) == 0) {
        char copy[64];
        memcpy(copy, key.data, key.len);
        assert_int_equal(backend_cursor_put_reserve(c, copy, key.len, 3,
                                                    &data), 0);
        memcpy(data, "cur", 3);
        for (int i = 0; i < 2; i++)
            if (backend_cursor_next(c, NULL, NULL) == 0)
                assert_int_equal(backend_cursor_del(c), 0);
    }
    assert_int_equal(backend_write_commit(t), 0);
}

/* A txn that is aborted: none of it may reach the copy. */
static void aborted_txn(struct fixture *f)
{
    struct backend_txn *t;
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_put(t, f->plain, "aborted", 7, "x", 1), 0);
    backend_write_abort(t);
}

static int copy_to(struct fixture *f)
{
    assert_int_equal(mkdir(f->copy, 0700), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/data.mdb", f->copy);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    int rc = backend_copy_fd(f->be, fd, true);
    close(fd);
    return rc;
}

/* Every entry of bucket name equal in both envs. */
static void assert_same_bucket(struct backend *a, struct backend *b,
                               const char *name, unsigned flags)
{
    backend_bucket ba, bb;
    assert_int_equal(backend_bucket_open(a, name, flags, &ba), 0);
    assert_int_equal(backend_bucket_open(b, name, flags, &bb), 0);
    struct backend_txn *ta, *tb;
    assert_int_equal(backend_read_begin(a, &ta), 0);
    assert_int_equal(backend_read_begin(b, &tb), 0);
    struct backend_cursor *ca, *cb;
    assert_int_equal(backend_cursor_open(ta, ba, &ca), 0);
    assert_int_equal(backend_cursor_open(tb, bb, &cb), 0);
    struct backend_val ka, va, kb, vb;
    int ra = backend_cursor_first(ca, &ka, &va);
    int rb = backend_cursor_first(cb, &kb, &vb);
    size_t n = 0;
    while (ra == 0 && rb == 0) {
        assert_int_equal(ka.len, kb.len);
        assert_memory_equal(ka.data, kb.data, ka.len);
        assert_int_equal(va.len, vb.len);
        assert_memory_equal(va.data, vb.data, va.len);
        n++;
        ra = backend_cursor_next(ca, &ka, &va);
        rb = backend_cursor_next(cb, &kb, &vb);
    }
    assert_int_equal(ra, ERR_NOTFOUND);
    assert_int_equal(rb, ERR_NOTFOUND);
    assert_true(n > 0);
    backend_cursor_close(ca);
    backend_cursor_close(cb);
    backend_read_end(ta);
    backend_read_end(tb);
}

static void test_journal_catches_copy_up(void **state)
{
    struct fixture *f = *state;
    write_round(f, 1);
    write_round(f, 2);
    assert_int_equal(backend_journal_start(f->be, 64u << 20), 0);
    assert_int_equal(backend_journal_start(f->be, 1), ERR_BUSY);
    write_round(f, 3); /* before the copy: replayed again, harmlessly */
    assert_int_equal(copy_to(f), 0);
    write_round(f, 4); /* after it: only the journal has it */
    aborted_txn(f);
    struct backend *dst;
    struct backend_options o = {.no_fsync = true};
    assert_int_equal(backend_open(f->copy, &o, &dst), 0);
    size_t n = 0;
    assert_int_equal(backend_journal_replay(f->be, dst, &n), 0);
    assert_true(n > 0);
    write_round(f, 5);
    write_round(f, 6);
    assert_int_equal(backend_journal_replay(f->be, dst, &n), 0);
    assert_true(n > 0);
    assert_int_equal(backend_journal_replay(f->be, dst, &n), 0);
    assert_int_equal(n, 0); /* nothing new */
    backend_journal_stop(f->be);
    assert_same_bucket(f->be, dst, "plain", 0);
    assert_same_bucket(f->be, dst, "rev", BACKEND_BUCKET_REVKEY);
    backend_bucket b;
    assert_int_equal(backend_bucket_open(dst, "plain", 0, &b), 0);
    struct backend_txn *t;
    struct backend_val v;
    assert_int_equal(backend_read_begin(dst, &t), 0);
    assert_int_equal(backend_get(t, b, "aborted", 7, &v), ERR_NOTFOUND);
    backend_read_end(t);
    write_round(f, 7); /* no journal: nothing recorded, nothing breaks */
    backend_close(dst);
}

static void test_journal_state_equal_at_stop(void **state)
{
    struct fixture *f = *state;
    write_round(f, 1);
    assert_int_equal(backend_journal_start(f->be, 64u << 20), 0);
    assert_int_equal(copy_to(f), 0);
    write_round(f, 2);
    struct backend *dst;
    struct backend_options o = {.no_fsync = true};
    assert_int_equal(backend_open(f->copy, &o, &dst), 0);
    assert_int_equal(backend_journal_replay(f->be, dst, NULL), 0);
    /* A bucket born after the copy: the replay creates it on dst. */
    backend_bucket late;
    assert_int_equal(backend_bucket_open(f->be, "late", 0, &late), 0);
    struct backend_txn *t;
    assert_int_equal(backend_write_begin(f->be, &t), 0);
    assert_int_equal(backend_put(t, late, "x", 1, "y", 1), 0);
    assert_int_equal(backend_write_commit(t), 0);
    write_round(f, 3);
    assert_int_equal(backend_journal_replay(f->be, dst, NULL), 0);
    backend_journal_stop(f->be);
    assert_same_bucket(f->be, dst, "plain", 0);
    assert_same_bucket(f->be, dst, "rev", BACKEND_BUCKET_REVKEY);
    assert_same_bucket(f->be, dst, "late", 0);
    backend_close(dst);
}

static void test_journal_full_fails_cleanly(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(backend_journal_start(f->be, 1000), 0);
    assert_int_equal(copy_to(f), 0);
    write_round(f, 1); /* far more than 1000 bytes of records */
    write_round(f, 2); /* the writer goes on */
    struct backend *dst;
    assert_int_equal(backend_open(f->copy, NULL, &dst), 0);
    assert_int_equal(backend_journal_replay(f->be, dst, NULL),
                     ERR_DEFRAG_JOURNAL_FULL);
    assert_int_equal(backend_journal_replay(f->be, dst, NULL),
                     ERR_DEFRAG_JOURNAL_FULL);
    backend_journal_stop(f->be);
    /* A new journal starts afresh. */
    assert_int_equal(backend_journal_start(f->be, 64u << 20), 0);
    write_round(f, 3);
    assert_int_equal(backend_journal_replay(f->be, dst, NULL), 0);
    backend_journal_stop(f->be);
    backend_close(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_journal_catches_copy_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_journal_state_equal_at_stop,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_journal_full_fails_cleanly,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
