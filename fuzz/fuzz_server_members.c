/*
 * fuzz_server_members.c - goal: what a member reads back of its members
 * store at start-up (src/server/members.c: the "members" and
 * "members_removed" LMDB buckets, and the <member>/ids file) never
 * crashes it, leaks or trips a sanitizer, whatever the bytes; bad bytes
 * are an error, and a store it accepted is one it can use: at most
 * SERVER_MEMBERS_MAX members sorted by distinct ids, bounded strings,
 * non-zero member and cluster ids, the initial members table equal to the
 * store's.  And what it wrote then (a seeded table, the ids) it reads back
 * the same at the next start.  The other reader of the "members" bucket,
 * server__members_conf_read (the membership of a snapshot's store, as
 * raft's ConfState), gives one raft accepts or an error, and the same
 * voters and learners as the table when both accept the records.
 *
 * Method: the real server__members_open runs on a real LMDB environment
 * (in /dev/shm when there is one) whose two buckets hold the input's
 * records, with the input's ids file, for a struct server built with the
 * few fields the members store uses (the store, the member dir, the
 * flags' ids and initial cluster: members 1, 2, 3); see members_env.h,
 * shared with fuzz_cmd_join.c.  When it succeeds the store is closed and
 * opened again, and both opens must agree.
 *
 * Input: u8 flags (bit 0: an ids file), u8 length and the ids file's
 * bytes (when bit 0), then records: u8 bucket (even: members, odd:
 * members_removed), u8 key length, the key, u16 LE value length, the
 * value.  Seeds: fuzz/seeds.c (a store as members.c writes it, a removed
 * member, the self removed, an empty store).
 */
#include "members_env.h"

/* conf_check: a ConfState read from a store is one raft accepts. */
static void conf_check(const struct raft_conf_state *cs)
{
    uint32_t n = cs->n_voters + cs->n_learners;
    check(cs->n_voters > 0 && n <= RAFT_MAX_MEMBERS);
    for (uint32_t i = 0; i < n; i++) {
        raft_id a = i < cs->n_voters ? cs->voters[i]
                                     : cs->learners[i - cs->n_voters];
        check(a != 0);
        for (uint32_t k = 0; k < i; k++)
            check(a != (k < cs->n_voters ? cs->voters[k]
                                         : cs->learners[k - cs->n_voters]));
    }
}

static bool conf_same(const struct raft_conf_state *a,
                      const struct raft_conf_state *b)
{
    return a->n_voters == b->n_voters && a->n_learners == b->n_learners &&
           memcmp(a->voters, b->voters, a->n_voters * sizeof a->voters[0]) ==
               0 &&
           memcmp(a->learners, b->learners,
                  a->n_learners * sizeof a->learners[0]) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (be == NULL) {
        log_set_level(LOG_FATAL);
        env_build("server_members");
    }
    if (size < 2)
        return 0;
    bool has_ids = data[0] & 1;
    size_t ids_len = has_ids ? data[1] : 0;
    if (ids_len > size - 2)
        ids_len = size - 2;
    ids_write(data + 2, ids_len, has_ids);
    store_write(data + 2 + ids_len, size - 2 - ids_len);
    /* What a snapshot's receiver reads of the same records. */
    struct raft_conf_state cs, table;
    int crc = server__members_conf_read(be, &cs);
    check(crc == 0 || crc == ERR_NOTFOUND || crc == ERR_CORRUPT);
    if (crc == 0)
        conf_check(&cs);
    struct server *s = member_new(NULL);
    int rc = server__members_open(s);
    if (rc != 0) {
        check(rc == ERR_CORRUPT || rc == ERR_MEMBER_REMOVED);
        member_free(s);
        return 0;
    }
    store_check(s);
    /* Both readers of the bucket agree on the membership. */
    server__members_conf(s, &table);
    check(crc != 0 || conf_same(&cs, &table));
    reopen_same_free(s);
    return 0;
}
