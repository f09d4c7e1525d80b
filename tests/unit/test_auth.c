/* test_auth.c - the auth store (src/auth): etcd's rules for users, roles and
 * the enabled flag, the revision, permission coverage (points, ranges,
 * prefixes, "\0"), records round trip, simple tokens, bcrypt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "auth/auth.h"
#include "util/err.h"

static struct auth_store *fresh(void)
{
    struct auth_store *as;
    assert_int_equal(auth_store_create(&as), 0);
    return as;
}

static const uint8_t H[] = "$2b$04$hash";

static void grant(struct auth_store *as, const char *role,
                  enum auth_perm_type t, const char *key, const char *end,
                  size_t end_len)
{
    struct auth_perm p = {t, (const uint8_t *)key, strlen(key),
                          (const uint8_t *)end, end_len};
    assert_int_equal(auth_role_grant(as, role, &p), 0);
}

static int check(struct auth_store *as, const char *user, const char *key,
                 const char *end, size_t end_len, enum auth_perm_type t)
{
    return auth_check_range(as, user, auth_store_revision(as),
                            (const uint8_t *)key, strlen(key),
                            (const uint8_t *)end, end_len, t);
}

static void test_users_roles_rules(void **state)
{
    (void)state;
    struct auth_store *as = fresh();
    assert_int_equal(auth_user_add(as, "", H, sizeof H, false),
                     ERR_AUTH_USER_EMPTY);
    assert_int_equal(auth_enable(as), ERR_AUTH_ROOT_USER_NOT_EXIST);
    assert_int_equal(auth_user_add(as, "root", H, sizeof H, false), 0);
    assert_int_equal(auth_user_add(as, "root", H, sizeof H, false),
                     ERR_AUTH_USER_EXISTS);
    assert_int_equal(auth_enable(as), ERR_AUTH_ROOT_ROLE_NOT_EXIST);
    /* the root role needs no record */
    assert_int_equal(auth_user_grant(as, "root", "root"), 0);
    assert_int_equal(auth_user_grant(as, "root", "x"), ERR_AUTH_ROLE_NOT_FOUND);
    assert_int_equal(auth_user_grant(as, "nobody", "root"),
                     ERR_AUTH_USER_NOT_FOUND);
    assert_int_equal(auth_role_add(as, ""), ERR_AUTH_ROLE_EMPTY);
    assert_int_equal(auth_role_add(as, "r"), 0);
    assert_int_equal(auth_role_add(as, "r"), ERR_AUTH_ROLE_EXISTS);
    uint64_t rev = auth_store_revision(as);
    assert_int_equal(auth_user_grant(as, "root", "root"), 0); /* again */
    assert_int_equal(auth_store_revision(as), rev); /* no change, no bump */
    assert_int_equal(auth_enable(as), 0);
    assert_true(auth_store_enabled(as));
    assert_int_equal(auth_store_revision(as), rev); /* etcd: no bump */
    assert_int_equal(auth_user_delete(as, "root"), ERR_AUTH_INVALID_MGMT);
    assert_int_equal(auth_user_revoke(as, "root", "root"),
                     ERR_AUTH_INVALID_MGMT);
    assert_int_equal(auth_role_delete(as, "root"), ERR_AUTH_INVALID_MGMT);
    assert_int_equal(auth_user_revoke(as, "root", "r"),
                     ERR_AUTH_ROLE_NOT_GRANTED);
    assert_int_equal(auth_role_revoke(as, "r", (const uint8_t *)"k", 1, NULL,
                                      0),
                     ERR_AUTH_PERMISSION_NOT_GRANTED);
    assert_int_equal(auth_disable(as), 0);
    assert_int_equal(auth_store_revision(as), rev + 1);
    assert_int_equal(auth_user_delete(as, "root"), 0);
    auth_store_destroy(as);
}

static void test_role_delete_revokes(void **state)
{
    (void)state;
    struct auth_store *as = fresh();
    assert_int_equal(auth_user_add(as, "u", H, sizeof H, false), 0);
    assert_int_equal(auth_role_add(as, "r"), 0);
    assert_int_equal(auth_user_grant(as, "u", "r"), 0);
    assert_true(auth_user_has_role(as, "u", "r"));
    assert_int_equal(auth_role_delete(as, "r"), 0);
    assert_false(auth_user_has_role(as, "u", "r"));
    auth_store_destroy(as);
}

static void test_checks(void **state)
{
    (void)state;
    struct auth_store *as = fresh();
    assert_int_equal(auth_user_add(as, "root", H, sizeof H, false), 0);
    assert_int_equal(auth_user_grant(as, "root", "root"), 0);
    assert_int_equal(auth_user_add(as, "u", H, sizeof H, false), 0);
    assert_int_equal(auth_role_add(as, "r"), 0);
    assert_int_equal(auth_user_grant(as, "u", "r"), 0);
    grant(as, "r", AUTH_READWRITE, "/p/", "/p0", 3); /* prefix /p/ */
    grant(as, "r", AUTH_READ, "/a", "/c", 2);
    grant(as, "r", AUTH_READ, "/c", "/e", 2);        /* joins /a..c */
    grant(as, "r", AUTH_WRITE, "/w", NULL, 0);       /* the key alone */
    grant(as, "r", AUTH_READ, "/z", "\0", 1);        /* from /z on */
    /* disabled: everything passes */
    assert_int_equal(check(as, "", "x", NULL, 0, AUTH_WRITE), 0);
    assert_int_equal(auth_enable(as), 0);
    uint64_t rev = auth_store_revision(as);
    /* etcd's isOpPermitted: revision 0 is "no user given"; the user ""
     * at a revision (a certificate with an empty CN) is no such user */
    assert_int_equal(auth_check_range(as, "", 0, (const uint8_t *)"x", 1,
                                      NULL, 0, AUTH_READ),
                     ERR_AUTH_USER_EMPTY);
    assert_int_equal(auth_check_range(as, "u", 0, (const uint8_t *)"/p/1", 4,
                                      NULL, 0, AUTH_READ),
                     ERR_AUTH_USER_EMPTY);
    assert_int_equal(check(as, "", "x", NULL, 0, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "root", "x", NULL, 0, AUTH_WRITE), 0);
    assert_int_equal(check(as, "u", "/p/1", NULL, 0, AUTH_WRITE), 0);
    assert_int_equal(check(as, "u", "/p/", "/p0", 3, AUTH_READ), 0);
    assert_int_equal(check(as, "u", "/p/", "/p1", 3, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "/b", "/d", 2, AUTH_READ), 0);
    assert_int_equal(check(as, "u", "/b", "/f", 2, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "/b", NULL, 0, AUTH_WRITE),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "/w", NULL, 0, AUTH_WRITE), 0);
    assert_int_equal(check(as, "u", "/w", NULL, 0, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "/wx", NULL, 0, AUTH_WRITE),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "/zz", "\0", 1, AUTH_READ), 0);
    assert_int_equal(check(as, "u", "/y", "\0", 1, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "gone", "/p/1", NULL, 0, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    /* an empty or inverted range is checked as its key alone (etcd's
     * interval tree; test_differential_auth) */
    assert_int_equal(check(as, "u", "/p/1", "/p/1", 4, AUTH_READ), 0);
    assert_int_equal(check(as, "u", "/p/1", "/a", 2, AUTH_READ), 0);
    assert_int_equal(check(as, "u", "/q", "/a", 2, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "/q", "/q", 2, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    /* an empty key begins at the lowest key: a watch of every key (key "",
     * end "\0") needs every key, even with a from-key permission */
    assert_int_equal(check(as, "u", "", "\0", 1, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "", "/p0", 3, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "u", "", NULL, 0, AUTH_READ),
                     ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(check(as, "root", "", "\0", 1, AUTH_READ), 0);
    /* a change after the token was checked: old revision */
    assert_int_equal(auth_role_add(as, "other"), 0);
    assert_int_equal(auth_check_range(as, "u", rev, (const uint8_t *)"/p/1", 4,
                                      NULL, 0, AUTH_READ),
                     ERR_AUTH_OLD_REVISION);
    assert_int_equal(auth_check_admin(as, "u"), ERR_AUTH_PERMISSION_DENIED);
    assert_int_equal(auth_check_admin(as, "root"), 0);
    assert_int_equal(auth_check_admin(as, ""), ERR_AUTH_USER_EMPTY);
    assert_int_equal(auth_check_admin(as, "x"), ERR_AUTH_USER_NOT_FOUND);
    auth_store_destroy(as);
}

static int copy_rec(void *ctx, const void *k, size_t kl, const void *v,
                    size_t vl)
{
    return auth_store_load(ctx, k, kl, v, vl);
}

static void test_records_round_trip(void **state)
{
    (void)state;
    struct auth_store *as = fresh();
    assert_int_equal(auth_user_add(as, "root", H, sizeof H, false), 0);
    assert_int_equal(auth_user_grant(as, "root", "root"), 0);
    assert_int_equal(auth_user_add(as, "cn", NULL, 0, true), 0);
    assert_int_equal(auth_role_add(as, "r"), 0);
    grant(as, "r", AUTH_READ, "/a", "/b", 2);
    assert_int_equal(auth_user_grant(as, "cn", "r"), 0);
    assert_int_equal(auth_enable(as), 0);
    struct auth_store *copy = fresh();
    assert_int_equal(auth_store_each(as, copy_rec, copy), 0);
    assert_true(auth_store_enabled(copy));
    assert_int_equal(auth_store_revision(copy), auth_store_revision(as));
    assert_true(auth_user_has_role(copy, "cn", "r"));
    char hash[AUTH_HASH_MAX];
    bool nopw = false;
    assert_int_equal(auth_user_hash(copy, "cn", hash, sizeof hash, &nopw), 0);
    assert_true(nopw);
    assert_int_equal(check(copy, "cn", "/a1", NULL, 0, AUTH_READ), 0);
    /* garbage does not load */
    assert_int_equal(auth_store_load(copy, "user/x", 6, "\xff\xff", 2),
                     ERR_CORRUPT);
    assert_int_equal(auth_store_load(copy, "what", 4, "", 0), ERR_CORRUPT);
    auth_store_destroy(as);
    auth_store_destroy(copy);
}

static void test_tokens(void **state)
{
    (void)state;
    struct auth_tokens *t;
    assert_int_equal(auth_tokens_create(1000, &t), 0);
    char prefix[17], tok[64], user[64];
    assert_int_equal(auth_token_prefix(prefix), 0);
    snprintf(tok, sizeof tok, "%s.%d", prefix, 7);
    assert_int_equal(auth_tokens_assign(t, tok, "alice", 100), 0);
    assert_int_equal(auth_tokens_assign(t, "bad", "alice", 100), ERR_INVAL);
    assert_int_equal(auth_tokens_user(t, tok, strlen(tok), 600, user,
                                      sizeof user), 0);
    assert_string_equal(user, "alice");
    /* the use at 600 renewed it until 1600 */
    assert_int_equal(auth_tokens_user(t, tok, strlen(tok), 1500, user,
                                      sizeof user), 0);
    assert_int_equal(auth_tokens_user(t, tok, strlen(tok), 2600, user,
                                      sizeof user), ERR_AUTH_INVALID_TOKEN);
    assert_int_equal(auth_tokens_assign(t, tok, "alice", 3000), 0);
    auth_tokens_drop_user(t, "alice");
    assert_int_equal(auth_tokens_user(t, tok, strlen(tok), 3001, user,
                                      sizeof user), ERR_AUTH_INVALID_TOKEN);
    uint64_t idx;
    assert_int_equal(auth_token_parse("abcdefghijklmnop.12", 19, &idx), 0);
    assert_int_equal(idx, 12);
    assert_int_equal(auth_token_parse("abcdefghijklmno1.12", 19, &idx),
                     ERR_INVAL);
    assert_int_equal(auth_token_parse("abcdefghijklmnop.", 17, &idx),
                     ERR_INVAL);
    auth_tokens_destroy(t);
}

static void test_bcrypt(void **state)
{
    (void)state;
    char h[AUTH_HASH_MAX];
    assert_int_equal(auth_password_hash("pw", 2, 4, h), 0);
    assert_memory_equal(h, "$2b$04$", 7);
    assert_true(auth_password_check("pw", 2, h));
    assert_false(auth_password_check("pW", 2, h));
    assert_int_equal(auth_password_hash("pw", 2, 3, h), ERR_INVAL);
    /* Go's bcrypt (etcd) writes "$2a$": such a hash verifies too */
    char h2[AUTH_HASH_MAX];
    assert_int_equal(auth_password_hash("secret", 6, 4, h2), 0);
    h2[2] = 'a'; /* $2a$ and $2b$ hash alike for short ASCII passwords */
    assert_true(auth_password_check("secret", 6, h2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_users_roles_rules),
        cmocka_unit_test(test_role_delete_revokes),
        cmocka_unit_test(test_checks),
        cmocka_unit_test(test_records_round_trip),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_bcrypt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
