/*
 * members_env.h - what fuzz_server_members.c and fuzz_cmd_join.c share: a
 * real LMDB environment and member dir (in /dev/shm when there is one)
 * for the members store, a struct server with the few fields the store
 * uses, and the checks of a store server__members_open accepted.
 * Static functions: each target includes it once.
 */
#ifndef CETCD_FUZZ_MEMBERS_ENV_H
#define CETCD_FUZZ_MEMBERS_ENV_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "fuzz_dir.h"
#include "server/members.h"
#include "util/err.h"
#include "util/log.h"

static void check(int cond)
{
    if (!cond)
        abort();
}

static char dir[128], member_dir[160], ids_path[192];
static struct backend *be;
static backend_bucket b_members, b_removed;

/* env_build makes the environment of the target named target. */
static void env_build(const char *target)
{
    check(fuzz_dir_make(target, dir, sizeof dir));
    snprintf(member_dir, sizeof member_dir, "%s/member", dir);
    check(mkdir(member_dir, 0700) == 0);
    snprintf(ids_path, sizeof ids_path, "%s/ids", member_dir);
    char db[128];
    snprintf(db, sizeof db, "%s/db", dir);
    struct backend_options o = {.map_size_bytes = 64 << 20, .no_fsync = true};
    check(backend_open(db, &o, &be) == 0);
    check(backend_bucket_open(be, "members", 0, &b_members) == 0);
    check(backend_bucket_open(be, "members_removed", 0, &b_removed) == 0);
}

static void bucket_clear(struct backend_txn *txn, backend_bucket b)
{
    struct backend_cursor *c;
    check(backend_cursor_open(txn, b, &c) == 0);
    int rc = backend_cursor_first(c, NULL, NULL);
    while (rc == 0) {
        check(backend_cursor_del(c) == 0);
        rc = backend_cursor_current(c, NULL, NULL);
    }
    check(rc == ERR_NOTFOUND);
}

/* store_write replaces both buckets with the records p[0..n) holds: each
 * u8 bucket (even: members, odd: members_removed), u8 key length, the key,
 * u16 LE value length, the value (n == 0: empty buckets). */
static void store_write(const uint8_t *p, size_t n)
{
    struct backend_txn *txn;
    check(backend_write_begin(be, &txn) == 0);
    bucket_clear(txn, b_members);
    bucket_clear(txn, b_removed);
    while (n >= 2) {
        backend_bucket b = p[0] & 1 ? b_removed : b_members;
        size_t klen = p[1] < n - 2 ? p[1] : n - 2;
        const uint8_t *key = p + 2;
        p += 2 + klen;
        n -= 2 + klen;
        size_t vlen = 0;
        if (n >= 2) {
            vlen = (size_t)p[0] | (size_t)p[1] << 8;
            p += 2;
            n -= 2;
        }
        if (vlen > n)
            vlen = n;
        if (klen > 0) /* LMDB refuses empty keys */
            check(backend_put(txn, b, key, klen, p, vlen) == 0);
        p += vlen;
        n -= vlen;
    }
    check(backend_write_commit(txn) == 0);
}

static void ids_write(const uint8_t *p, size_t n, bool present)
{
    unlink(ids_path);
    if (!present)
        return;
    FILE *f = fopen(ids_path, "wb");
    check(f != NULL);
    check(fwrite(p, 1, n, f) == n);
    check(fclose(f) == 0);
}

/* The member as server_start has it before opening the store: members
 * 1, 2 and 3 from the flags, or, joining, the ids of join. */
static struct server *member_new(const struct server_join *join)
{
    static const char *urls[] = {"http://127.0.0.1:2380",
                                 "http://127.0.0.2:2380,unix://m2.sock",
                                 "https://[::1]:2380"};
    struct server *s = calloc(1, sizeof *s);
    check(s != NULL);
    s->be = be;
    snprintf(s->member_dir, sizeof s->member_dir, "%s", member_dir);
    s->cfg.name = "m1";
    s->cfg.cluster_token = "fuzz-token";
    s->member_id = 1;
    s->cluster_id = 0xc1;
    for (size_t i = 0; i < 3; i++) {
        s->members[i].id = i + 1;
        snprintf(s->members[i].name, sizeof s->members[i].name, "m%zu",
                 i + 1);
        snprintf(s->members[i].peer_urls, sizeof s->members[i].peer_urls,
                 "%s", urls[i]);
    }
    s->n_members = 3;
    if (join != NULL) {
        s->cfg.join = join;
        s->member_id = join->member_id;
        s->cluster_id = join->cluster_id;
    }
    return s;
}

static bool str_ok(const char *p, size_t cap)
{
    return memchr(p, '\0', cap) != NULL;
}

/* The members table is one the member can use: at most
 * SERVER_MEMBERS_MAX members sorted by distinct ids, bounded strings. */
static void table_check(const struct server_ms *ms)
{
    check(ms->n <= SERVER_MEMBERS_MAX);
    check(ms->n_removed <= SERVER_REMOVED_MAX);
    for (size_t i = 0; i < ms->n; i++) {
        const struct server_member_info *m = &ms->m[i];
        check(i == 0 || ms->m[i - 1].id < m->id);
        check(str_ok(m->name, sizeof m->name));
        check(str_ok(m->peer_urls, sizeof m->peer_urls));
        check(str_ok(m->client_urls, sizeof m->client_urls));
    }
}

/* A store server__members_open accepted is one the member can use. */
static void store_check(const struct server *s)
{
    const struct server_ms *ms = s->ms;
    check(s->member_id != 0 && s->cluster_id != 0);
    table_check(ms);
    check(ms->n > 0 && s->n_members == ms->n);
    for (size_t i = 0; i < ms->n; i++) {
        check(s->members[i].id == ms->m[i].id);
        check(strcmp(s->members[i].peer_urls, ms->m[i].peer_urls) == 0);
    }
    check(!server__ms_is_removed(ms, s->member_id));
}

/* urls_same: a and b are the same URLs as MemberList shows them (split
 * at commas, empty ones dropped, the first 16).  The store keeps a
 * member's URLs as one comma list, so a URL from a join answer or a
 * record that holds a comma, or is empty, comes back split or dropped:
 * the API shows them so from the start. */
static bool urls_same(const char *a, const char *b)
{
    char x[1024], y[1024];
    const char *u[16], *v[16];
    snprintf(x, sizeof x, "%s", a);
    snprintf(y, sizeof y, "%s", b);
    size_t n = server__urls_split(x, u, 16);
    if (server__urls_split(y, v, 16) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(u[i], v[i]) != 0)
            return false;
    return true;
}

static void same_store(const struct server *a, const struct server *b)
{
    check(a->member_id == b->member_id && a->cluster_id == b->cluster_id);
    check(a->ms->n == b->ms->n && a->ms->n_removed == b->ms->n_removed);
    for (size_t i = 0; i < a->ms->n; i++) {
        const struct server_member_info *x = &a->ms->m[i], *y = &b->ms->m[i];
        check(x->id == y->id && x->is_learner == y->is_learner);
        check(strcmp(x->name, y->name) == 0);
        check(urls_same(x->peer_urls, y->peer_urls));
        check(urls_same(x->client_urls, y->client_urls));
    }
    for (size_t i = 0; i < a->ms->n_removed; i++)
        check(server__ms_is_removed(b->ms, a->ms->removed[i]));
}

static void member_free(struct server *s)
{
    server__members_close(s);
    free(s);
}

/* reopen_same_free checks that a second member opening the store s opened
 * finds the same membership, then frees both. */
static inline void reopen_same_free(struct server *s)
{
    struct server *again = member_new(NULL);
    check(server__members_open(again) == 0);
    store_check(again);
    same_store(s, again);
    member_free(again);
    member_free(s);
}

#endif
