/*
 * fuzz_server_seed.c - goal: the <member>/seed file, which a member with
 * data (a WAL) whose store is empty (rebuilt) reads its first members
 * from (src/server/members.c, seed_load/seed_parse), never crashes it,
 * leaks or trips a sanitizer, whatever the bytes: bad bytes are
 * ERR_CORRUPT, and a seed it accepted gives a members table the member
 * can use, which the store then holds (a second open reads the same).
 *
 * Method: the real server__members_open on a real LMDB environment with
 * empty members buckets, a member dir holding a valid ids file and a WAL
 * directory with one segment name (so the member counts as having data),
 * and the input as the seed file; see members_env.h.
 */
#include <fcntl.h>

#include "members_env.h"

static void wal_make(void)
{
    char wal[200], seg[300];
    snprintf(wal, sizeof wal, "%s/wal", member_dir);
    check(mkdir(wal, 0700) == 0);
    snprintf(seg, sizeof seg, "%s/0000000000000000-0000000000000000.wal",
             wal);
    int fd = open(seg, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    check(fd >= 0);
    close(fd);
}

static void seed_file_write(const uint8_t *p, size_t n)
{
    char path[200];
    snprintf(path, sizeof path, "%s/seed", member_dir);
    FILE *f = fopen(path, "wb");
    check(f != NULL);
    check(fwrite(p, 1, n, f) == n);
    check(fclose(f) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t ids[] = "0000000000000001"
                                 "00000000000000c1\n";
    if (be == NULL) {
        log_set_level(LOG_FATAL);
        env_build("server_seed");
        wal_make();
    }
    store_write(NULL, 0);
    ids_write(ids, sizeof ids - 1, true);
    seed_file_write(data, size);
    struct server *s = member_new(NULL);
    int rc = server__members_open(s);
    if (rc != 0) {
        check(rc == ERR_CORRUPT || rc == ERR_MEMBER_REMOVED);
        member_free(s);
        return 0;
    }
    check(s->ms->n > 0);
    table_check(s->ms);
    reopen_same_free(s);
    return 0;
}
