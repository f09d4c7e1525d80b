/*
 * test_raft_log.c - goal: the in-memory raft log (src/raft/log.c) keeps its
 * indexes, terms, stable/unstable split, compaction point and snapshot
 * straight.
 *
 * Method: build logs entry by entry and check every accessor after each
 * operation: term lookup (inside, at the compaction point, compacted,
 * beyond the end), append with truncation of a conflicting suffix (which
 * also pulls "stabled" back), conflict search, fast-backtracking hints,
 * slicing under a byte budget, commit rules (only the caller's term via
 * maybe_commit), compaction and restore from a snapshot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "raft/raft_int.h"

static struct raft_entry ent(raft_index i, raft_term t, const char *data)
{
    return (struct raft_entry){.term = t, .index = i, .type = 0,
                               .len = data ? (uint32_t)strlen(data) : 0,
                               .data = (uint8_t *)data};
}

/* A log holding terms[k] at index k + 1. */
static void build(struct raft_log *l, const raft_term *terms, size_t n)
{
    raft__log_init(l);
    for (size_t k = 0; k < n; k++) {
        struct raft_entry e = ent(k + 1, terms[k], "x");
        raft__log_append(l, &e, 1);
    }
}

static void test_empty_log(void **state)
{
    (void)state;
    struct raft_log l;
    raft__log_init(&l);
    raft_term t = 99;
    assert_int_equal(raft__log_first(&l), 1);
    assert_int_equal(raft__log_last(&l), 0);
    assert_int_equal(raft__log_last_term(&l), 0);
    assert_int_equal(raft__log_term(&l, 0, &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(raft__log_term(&l, 1, &t), ERR_RAFT_UNAVAILABLE);
    assert_null(raft__log_at(&l, 1));
    assert_true(raft__log_match(&l, 0, 0));
    raft__log_free(&l);
}

static void test_term_lookup(void **state)
{
    (void)state;
    struct raft_log l;
    build(&l, (raft_term[]){1, 1, 2, 3, 3}, 5);
    raft_term t;
    assert_int_equal(raft__log_last(&l), 5);
    assert_int_equal(raft__log_last_term(&l), 3);
    assert_int_equal(raft__log_term(&l, 3, &t), 0);
    assert_int_equal(t, 2);
    assert_int_equal(raft__log_term(&l, 6, &t), ERR_RAFT_UNAVAILABLE);
    assert_int_equal(raft__log_term_or0(&l, 6), 0);
    assert_true(raft__log_match(&l, 4, 3));
    assert_false(raft__log_match(&l, 4, 2));
    assert_false(raft__log_match(&l, 9, 3));
    assert_int_equal(raft__log_at(&l, 2)->term, 1);
    /* Compaction: the term at the compaction point is kept. */
    l.applied = 5;
    raft__log_compact(&l, 3);
    assert_int_equal(raft__log_first(&l), 4);
    assert_int_equal(raft__log_term(&l, 3, &t), 0);
    assert_int_equal(t, 2);
    assert_int_equal(raft__log_term(&l, 2, &t), ERR_RAFT_COMPACTED);
    assert_null(raft__log_at(&l, 3));
    assert_int_equal(raft__log_at(&l, 4)->term, 3);
    raft__log_free(&l);
}

static void test_append_truncates_conflict(void **state)
{
    (void)state;
    struct raft_log l;
    build(&l, (raft_term[]){1, 1, 2, 2, 2}, 5);
    l.stabled = 5;
    l.committed = 2;
    /* Entries 4.. of term 3 replace 4 and 5 of term 2. */
    struct raft_entry e[2] = {ent(4, 3, "new4"), ent(5, 3, NULL)};
    assert_int_equal(raft__log_find_conflict(&l, e, 2), 4);
    raft__log_append(&l, e, 2);
    assert_int_equal(raft__log_last(&l), 5);
    assert_int_equal(raft__log_term_or0(&l, 4), 3);
    assert_int_equal(raft__log_at(&l, 4)->len, 4);
    assert_memory_equal(raft__log_at(&l, 4)->data, "new4", 4);
    assert_null(raft__log_at(&l, 5)->data);
    /* The persisted suffix from 4 on is no longer ours. */
    assert_int_equal(l.stabled, 3);
    /* Appending a shorter replacement drops the tail too. */
    struct raft_entry f = ent(3, 3, "three");
    raft__log_append(&l, &f, 1);
    assert_int_equal(raft__log_last(&l), 3);
    assert_int_equal(l.stabled, 2);
    /* No conflict for what we already hold, new ones only beyond. */
    struct raft_entry g[2] = {ent(3, 3, "three"), ent(4, 3, "four")};
    assert_int_equal(raft__log_find_conflict(&l, g, 1), 0);
    assert_int_equal(raft__log_find_conflict(&l, g, 2), 4);
    /* Owned append stamps the next index. */
    uint8_t *d = raft__xmalloc(2);
    memcpy(d, "ab", 2);
    raft__log_append_owned(&l, 4, RAFT_ENTRY_NORMAL, d, 2);
    assert_int_equal(raft__log_last(&l), 4);
    assert_int_equal(raft__log_last_term(&l), 4);
    raft__log_free(&l);
}

static void test_find_conflict_by_term(void **state)
{
    (void)state;
    struct raft_log l;
    /* index: 1 2 3 4 5 6 7 */
    build(&l, (raft_term[]){1, 1, 2, 2, 4, 4, 5}, 7);
    raft_term t;
    /* Largest index <= i whose term <= t. */
    assert_int_equal(raft__log_find_conflict_by_term(&l, 7, 5, &t), 7);
    assert_int_equal(t, 5);
    assert_int_equal(raft__log_find_conflict_by_term(&l, 7, 3, &t), 4);
    assert_int_equal(t, 2);
    assert_int_equal(raft__log_find_conflict_by_term(&l, 6, 4, &t), 6);
    assert_int_equal(raft__log_find_conflict_by_term(&l, 7, 0, &t), 0);
    assert_int_equal(t, 0);
    /* A compacted region stops the search (term unknown: 0). */
    l.applied = 7;
    raft__log_compact(&l, 4);
    assert_int_equal(raft__log_find_conflict_by_term(&l, 7, 3, &t), 4);
    assert_int_equal(t, 2);
    assert_int_equal(raft__log_find_conflict_by_term(&l, 7, 1, &t), 3);
    assert_int_equal(t, 0);
    raft__log_free(&l);
}

static void test_up_to_date(void **state)
{
    (void)state;
    struct raft_log l;
    build(&l, (raft_term[]){1, 2, 2}, 3);
    assert_true(raft__log_up_to_date(&l, 3, 2));  /* same */
    assert_true(raft__log_up_to_date(&l, 4, 2));  /* longer */
    assert_false(raft__log_up_to_date(&l, 2, 2)); /* shorter */
    assert_true(raft__log_up_to_date(&l, 1, 3));  /* later term wins */
    assert_false(raft__log_up_to_date(&l, 9, 1)); /* earlier term loses */
    raft__log_free(&l);
}

static void test_slice(void **state)
{
    (void)state;
    struct raft_log l;
    build(&l, (raft_term[]){1, 1, 1, 1, 1}, 5); /* each entry 1 + 24 bytes */
    const struct raft_entry *out;
    size_t n;
    assert_int_equal(raft__log_slice(&l, 2, 4, UINT64_MAX, &out, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].index, 2);
    /* At least one entry even if it alone exceeds the budget. */
    assert_int_equal(raft__log_slice(&l, 2, 5, 1, &out, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(raft__log_slice(&l, 1, 5, 50, &out, &n), 0);
    assert_int_equal(n, 2);
    /* hi is capped to the end; lo beyond the end gives nothing. */
    assert_int_equal(raft__log_slice(&l, 4, 99, UINT64_MAX, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(raft__log_slice(&l, 6, 9, UINT64_MAX, &out, &n), 0);
    assert_int_equal(n, 0);
    l.applied = 5;
    raft__log_compact(&l, 2);
    assert_int_equal(raft__log_slice(&l, 2, 5, UINT64_MAX, &out, &n),
                     ERR_RAFT_COMPACTED);
    raft__log_free(&l);
}

static void test_commit_rules(void **state)
{
    (void)state;
    struct raft_log l;
    build(&l, (raft_term[]){1, 2, 2, 3}, 4);
    /* maybe_commit commits only an index carrying the given term. */
    assert_false(raft__log_maybe_commit(&l, 3, 3));
    assert_int_equal(l.committed, 0);
    assert_true(raft__log_maybe_commit(&l, 3, 2));
    assert_int_equal(l.committed, 3);
    assert_false(raft__log_maybe_commit(&l, 2, 2)); /* never backwards */
    raft__log_commit_to(&l, 1);
    assert_int_equal(l.committed, 3);
    raft__log_commit_to(&l, 4);
    assert_int_equal(l.committed, 4);
    raft__log_free(&l);
}

static void test_snapshot_restore(void **state)
{
    (void)state;
    struct raft_log l;
    build(&l, (raft_term[]){1, 1, 2}, 3);
    l.committed = 2;
    l.stabled = 3;
    struct raft_snapshot s = {.data = (uint8_t *)"image", .len = 5};
    s.meta.index = 10;
    s.meta.term = 4;
    s.meta.conf.n_voters = 1;
    s.meta.conf.voters[0] = 1;
    raft__log_restore(&l, &s);
    assert_int_equal(raft__log_first(&l), 11);
    assert_int_equal(raft__log_last(&l), 10);
    assert_int_equal(raft__log_last_term(&l), 4);
    assert_int_equal(l.committed, 10);
    assert_int_equal(l.applied, 10);
    assert_int_equal(l.stabled, 10);
    assert_true(l.snap_unstable);
    assert_int_equal(l.snap.meta.index, 10);
    assert_memory_equal(l.snap.data, "image", 5);
    assert_true(l.snap.data != s.data); /* copied */
    /* The log continues after the snapshot. */
    struct raft_entry e = ent(11, 4, "eleven");
    raft__log_append(&l, &e, 1);
    assert_int_equal(raft__log_last(&l), 11);
    assert_int_equal(raft__log_term_or0(&l, 10), 4);
    /* A newer local snapshot replaces the old image. */
    struct raft_snapshot_meta m = {.index = 11, .term = 4};
    raft__log_set_snapshot(&l, &m, "new", 3);
    assert_int_equal(l.snap.meta.index, 11);
    assert_int_equal(l.snap.len, 3);
    raft__log_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_log),
        cmocka_unit_test(test_term_lookup),
        cmocka_unit_test(test_append_truncates_conflict),
        cmocka_unit_test(test_find_conflict_by_term),
        cmocka_unit_test(test_up_to_date),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_commit_rules),
        cmocka_unit_test(test_snapshot_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
