/*
 * test_server_import.c - the import's handling of what etcd 3.5 writes
 * differently from 3.4 (server/import_wal.c, import_int.h).
 *
 * Goal: entries of an etcd 3.5 log become cetcd's: a UserAdd or
 * ChangePassword carrying 3.5's hashedPassword becomes cetcd's
 * AuthUserAddInternal with that hash (and the request header's user and
 * auth revision), a user added without a password too (either version);
 * a password in the clear (3.4) is refused when the db lacks the user;
 * 3.5's AuthStatus, ClusterVersionSet and DowngradeInfoSet become empty
 * entries; 3.5's ClusterMemberAttrSet names a member added by a conf
 * change.  No etcd 3.5 binary is on this machine: the inputs are built
 * here from etcd 3.5's message definitions (raft_internal.proto,
 * rpc.proto, membership.proto field numbers).  The WAL and snap file
 * shapes of 3.5 (walpb.Snapshot.conf_state, ConfState's joint-consensus
 * fields) are in test_etcdwal.c.
 * Method: hand-encoded protobuf entries through import__translate and
 * import__members_replay; the translations unpacked with protobuf-c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cetcdpb/internal.pb-c.h"
#include "server/import_int.h"
#include "server/server_int.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/varint.h"

/* A bcrypt hash as etcd 3.5 logs it (any bytes do: cetcd keeps them). */
static const char HASH[] =
    "$2a$10$Yq8n1G7yHnq1Vh9S4uYx4eZQ8YV8pQz4F6m2H0a1b2c3d4e5f6g7h";

struct pb {
    uint8_t p[1024];
    size_t n;
};

static void pb_bytes(struct pb *b, unsigned num, const void *v, size_t len)
{
    b->n += varint_put(b->p + b->n, (uint64_t)num << 3 | 2);
    b->n += varint_put(b->p + b->n, len);
    memcpy(b->p + b->n, v, len);
    b->n += len;
}

static void pb_str(struct pb *b, unsigned num, const char *s)
{
    pb_bytes(b, num, s, strlen(s));
}

static void pb_varint(struct pb *b, unsigned num, uint64_t v)
{
    b->n += varint_put(b->p + b->n, (uint64_t)num << 3);
    b->n += varint_put(b->p + b->n, v);
}

static void pb_msg(struct pb *b, unsigned num, const struct pb *m)
{
    pb_bytes(b, num, m->p, m->n);
}

/* An InternalRaftRequest {1 ID, 100 header {1 ID, 2 username, 3
 * auth_revision}, <num> inner}. */
static void request(struct pb *out, unsigned num, const struct pb *inner)
{
    struct pb hdr = {.n = 0};
    memset(out, 0, sizeof *out);
    pb_varint(out, 1, 77);
    pb_varint(&hdr, 1, 77);
    pb_str(&hdr, 2, "root");
    pb_varint(&hdr, 3, 5);
    pb_msg(out, 100, &hdr);
    pb_msg(out, num, inner);
}

struct fixture {
    struct import im;
    struct server_member_info m[SERVER_MEMBERS_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->im.m = f->m;
    f->im.ci = 10;
    f->im.hs.commit = 100;
    f->im.first_index = 1;
    snprintf(f->im.path, sizeof f->im.path, "test-wal");
    log_set_level(LOG_FATAL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

/* The entry translated; NULL when it became empty. */
static Cetcdpb__InternalRequest *translate(struct import *im,
                                           const struct pb *data, int *rc)
{
    struct import_ent e = {.index = 11, .term = 2, .type = 0,
                           .data = (uint8_t *)data->p, .len = data->n};
    uint8_t *out = NULL;
    size_t len = 0;
    *rc = import__translate(im, &e, &out, &len);
    if (*rc != 0 || out == NULL)
        return NULL;
    Cetcdpb__InternalRequest *r =
        cetcdpb__internal_request__unpack(NULL, len, out);
    assert_non_null(r);
    mem_free(out);
    return r;
}

static void test_user_add_hashed_35(void **state)
{
    struct fixture *f = *state;
    struct pb add = {.n = 0}, ent;
    pb_str(&add, 1, "bob");
    pb_str(&add, 4, HASH); /* 3.5's hashedPassword, no password */
    request(&ent, 1100, &add);
    int rc;
    Cetcdpb__InternalRequest *r = translate(&f->im, &ent, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(r);
    assert_int_equal(r->request_case,
                     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_ADD);
    assert_string_equal(r->auth_user_add->name, "bob");
    assert_int_equal(r->auth_user_add->hashed_password.len, strlen(HASH));
    assert_memory_equal(r->auth_user_add->hashed_password.data, HASH,
                        strlen(HASH));
    assert_null(r->auth_user_add->options);
    assert_string_equal(r->auth_user, "root");
    assert_int_equal(r->auth_revision, 5);
    cetcdpb__internal_request__free_unpacked(r, NULL);
    assert_int_equal(f->im.translated, 1);
}

static void test_change_password_hashed_35(void **state)
{
    struct fixture *f = *state;
    struct pb chg = {.n = 0}, ent;
    pb_str(&chg, 1, "bob");
    pb_str(&chg, 3, HASH); /* 3.5's hashedPassword */
    request(&ent, 1103, &chg);
    int rc;
    Cetcdpb__InternalRequest *r = translate(&f->im, &ent, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(r);
    assert_int_equal(
        r->request_case,
        CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_CHANGE_PASSWORD);
    assert_string_equal(r->auth_user_change_password->name, "bob");
    assert_memory_equal(r->auth_user_change_password->hashed_password.data,
                        HASH, strlen(HASH));
    cetcdpb__internal_request__free_unpacked(r, NULL);
}

static void test_user_add_no_password(void **state)
{
    struct fixture *f = *state;
    struct pb add = {.n = 0}, opts = {.n = 0}, ent;
    pb_varint(&opts, 1, 1); /* UserAddOptions.no_password */
    pb_str(&add, 1, "np");
    pb_msg(&add, 3, &opts);
    request(&ent, 1100, &add);
    int rc;
    Cetcdpb__InternalRequest *r = translate(&f->im, &ent, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(r);
    assert_string_equal(r->auth_user_add->name, "np");
    assert_int_equal(r->auth_user_add->hashed_password.len, 0);
    assert_non_null(r->auth_user_add->options);
    assert_true(r->auth_user_add->options->no_password);
    cetcdpb__internal_request__free_unpacked(r, NULL);
}

static void test_clear_password_refused(void **state)
{
    struct fixture *f = *state;
    /* 3.4: the password in the clear, and no store that holds the user */
    for (unsigned num = 1100; num <= 1103; num += 3) {
        struct pb u = {.n = 0}, ent;
        pb_str(&u, 1, "carol");
        pb_str(&u, 2, "secret");
        request(&ent, num, &u);
        int rc;
        assert_null(translate(&f->im, &ent, &rc));
        assert_int_equal(rc, ERR_IMPORT_UNSUPPORTED);
    }
    /* 3.5 with both (etcd clears the password first; a log holding both
     * still carries a password in the clear) */
    struct pb u = {.n = 0}, ent;
    pb_str(&u, 1, "carol");
    pb_str(&u, 2, "secret");
    pb_str(&u, 4, HASH);
    request(&ent, 1100, &u);
    int rc;
    assert_null(translate(&f->im, &ent, &rc));
    assert_int_equal(rc, ERR_IMPORT_UNSUPPORTED);
    assert_int_equal(f->im.translated, 0);
}

static void test_35_records_become_empty(void **state)
{
    struct fixture *f = *state;
    struct pb empty = {.n = 0}, ver = {.n = 0}, down = {.n = 0}, ent;
    pb_str(&ver, 1, "3.5.0");   /* ClusterVersionSetRequest.ver */
    pb_varint(&down, 1, 1);     /* DowngradeInfoSetRequest.enabled */
    pb_str(&down, 2, "3.4.0");  /* .ver */
    const struct {
        unsigned num;
        const struct pb *inner;
    } cases[] = {{1013, &empty}, {1300, &ver}, {1302, &down}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        request(&ent, cases[i].num, cases[i].inner);
        int rc;
        assert_null(translate(&f->im, &ent, &rc));
        assert_int_equal(rc, 0);
    }
    assert_int_equal(f->im.translated, 0);
    /* a field neither version has is refused, not dropped */
    request(&ent, 1400, &empty);
    int rc;
    assert_null(translate(&f->im, &ent, &rc));
    assert_int_equal(rc, ERR_IMPORT_UNSUPPORTED);
}

static void test_member_attr_set_35(void **state)
{
    struct fixture *f = *state;
    /* entry 5: a conf change adding member 0xabc (etcd's Member JSON as
     * its context); entry 6: 3.5's ClusterMemberAttrSetRequest {1
     * member_ID, 2 Attributes {1 name, 2 client_urls}} */
    static const char ctx[] =
        "{\"id\":2748,\"peerURLs\":[\"http://127.0.0.1:2380\"]}";
    struct pb cc = {.n = 0}, attrs = {.n = 0}, set = {.n = 0}, ent;
    pb_varint(&cc, 1, 1);   /* ID */
    pb_varint(&cc, 2, 0);   /* ConfChangeAddNode */
    pb_varint(&cc, 3, 0xabc);
    pb_str(&cc, 4, ctx);
    pb_str(&attrs, 1, "m1");
    pb_str(&attrs, 2, "http://127.0.0.1:2379");
    pb_str(&attrs, 2, "http://127.0.0.1:22379");
    pb_varint(&set, 1, 0xabc);
    pb_msg(&set, 2, &attrs);
    request(&ent, 1301, &set);
    struct import_ent ents[] = {
        {.index = 5, .term = 1, .type = 1, .data = cc.p, .len = cc.n},
        {.index = 6, .term = 1, .type = 0, .data = ent.p, .len = ent.n},
    };
    f->im.ents = ents;
    f->im.n_ents = 2;
    assert_int_equal(import__members_replay(&f->im), 0);
    f->im.ents = NULL;
    f->im.n_ents = 0;
    assert_int_equal(f->im.n_m, 1);
    assert_int_equal(f->m[0].id, 0xabc);
    assert_string_equal(f->m[0].name, "m1");
    assert_string_equal(f->m[0].peer_urls, "http://127.0.0.1:2380");
    assert_string_equal(f->m[0].client_urls,
                        "http://127.0.0.1:2379,http://127.0.0.1:22379");
    /* and the entry after the consistent index becomes an empty one */
    struct import_ent after = ents[1];
    after.index = 11;
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(import__translate(&f->im, &after, &out, &len), 0);
    assert_null(out);
}

/* A header may repeat its fields (protobuf keeps the last), and each
 * becomes a field with a two-byte key: an entry of 400 two-byte
 * auth_revisions translates to 1.5 times its size (the fuzzer's case:
 * the output buffer was sized for the entry plus 64 bytes). */
static void test_header_repeated_fields_grow(void **state)
{
    struct fixture *f = *state;
    static struct pb hdr, put, data;
    memset(&hdr, 0, sizeof hdr);
    memset(&put, 0, sizeof put);
    memset(&data, 0, sizeof data);
    for (unsigned i = 1; i <= 400; i++)
        pb_varint(&hdr, 3, i % 100 + 1);
    pb_str(&hdr, 2, "root");
    pb_str(&put, 1, "k");
    pb_str(&put, 2, "v");
    pb_msg(&data, 100, &hdr);
    pb_msg(&data, 4, &put);
    int rc;
    Cetcdpb__InternalRequest *r = translate(&f->im, &data, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(r);
    assert_int_equal(r->auth_revision, 1); /* the last: 400 % 100 + 1 */
    assert_string_equal(r->auth_user, "root");
    assert_non_null(r->put);
    assert_int_equal(r->put->key.len, 1);
    assert_memory_equal(r->put->key.data, "k", 1);
    cetcdpb__internal_request__free_unpacked(r, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_user_add_hashed_35, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_change_password_hashed_35, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_user_add_no_password, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_clear_password_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_35_records_become_empty, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_member_attr_set_35, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_header_repeated_fields_grow,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
