/* fuzz_auth.c - the auth decoders: stored records (auth_store_load, then
 * the store is checked and written back), simple tokens (auth_token_parse,
 * lookups), and the Auth requests as the service decodes them, applied to
 * a store (names, permissions, ranges of any bytes).
 *
 * Input: byte 0 picks the part; the rest is its bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "auth/auth.h"
#include "cetcdpb/internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "util/check.h"
#include "util/err.h"

static int drop(void *ctx, const void *k, size_t kl, const void *v, size_t vl)
{
    (void)ctx;
    (void)k;
    (void)kl;
    (void)v;
    (void)vl;
    return 0;
}

/* Records: key NUL value, repeated (separated by 0xff). */
static void records(const uint8_t *p, size_t n)
{
    struct auth_store *as;
    if (auth_store_create(&as) != 0)
        return;
    while (n > 0) {
        const uint8_t *end = memchr(p, 0xff, n);
        size_t len = end ? (size_t)(end - p) : n;
        const uint8_t *nul = memchr(p, 0, len);
        if (nul != NULL)
            (void)auth_store_load(as, p, (size_t)(nul - p), nul + 1,
                                  len - (size_t)(nul - p) - 1);
        p += len + (end ? 1 : 0);
        n -= len + (end ? 1 : 0);
    }
    (void)auth_check_range(as, "root", auth_store_revision(as),
                           (const uint8_t *)"a", 1, (const uint8_t *)"\0", 1,
                           AUTH_READ);
    (void)auth_store_each(as, drop, NULL);
    auth_store_destroy(as);
}

static void tokens(const uint8_t *p, size_t n)
{
    uint64_t idx;
    (void)auth_token_parse((const char *)p, n, &idx);
    struct auth_tokens *t;
    if (auth_tokens_create(1000, &t) != 0)
        return;
    char tok[AUTH_TOKEN_MAX_LEN + 1];
    size_t len = n < AUTH_TOKEN_MAX_LEN ? n : AUTH_TOKEN_MAX_LEN;
    memcpy(tok, p, len);
    tok[len] = '\0';
    (void)auth_tokens_assign(t, "abcdefghijklmnop.1", "u", 0);
    (void)auth_tokens_assign(t, tok, "v", 0);
    char user[64];
    (void)auth_tokens_user(t, (const char *)p, n, 1, user, sizeof user);
    auth_tokens_destroy(t);
}

/* An InternalRequest as the applier decodes it, applied to a store that
 * has a user and a role. */
static void requests(const uint8_t *p, size_t n)
{
    Cetcdpb__InternalRequest *r = cetcdpb__internal_request__unpack(NULL, n, p);
    if (r == NULL)
        return;
    struct auth_store *as;
    if (auth_store_create(&as) != 0)
        goto out;
    (void)auth_user_add(as, "u", (const uint8_t *)"h", 1, false);
    (void)auth_role_add(as, "r");
    (void)auth_user_grant(as, "u", "r");
    switch (r->request_case) {
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_ADD:
        (void)auth_user_add(as, r->auth_user_add->name,
                            r->auth_user_add->hashed_password.data,
                            r->auth_user_add->hashed_password.len, false);
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_GRANT_PERMISSION:
        if (r->auth_role_grant_permission->perm != NULL) {
            const Authpb__Permission *q = r->auth_role_grant_permission->perm;
            struct auth_perm ap = {(enum auth_perm_type)q->permtype,
                                   q->key.data, q->key.len,
                                   q->range_end.data, q->range_end.len};
            (void)auth_role_grant(as, "r", &ap);
            (void)auth_check_range(as, "u", auth_store_revision(as),
                                   q->key.data, q->key.len,
                                   q->range_end.data, q->range_end.len,
                                   AUTH_WRITE);
        }
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_REVOKE_PERMISSION:
        (void)auth_role_revoke(
            as, r->auth_role_revoke_permission->role,
            r->auth_role_revoke_permission->key.data,
            r->auth_role_revoke_permission->key.len,
            r->auth_role_revoke_permission->range_end.data,
            r->auth_role_revoke_permission->range_end.len);
        break;
    case CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_GRANT_ROLE:
        (void)auth_user_grant(as, r->auth_user_grant_role->user,
                              r->auth_user_grant_role->role);
        break;
    default:
        break;
    }
    (void)auth_store_each(as, drop, NULL);
    auth_store_destroy(as);
out:
    cetcdpb__internal_request__free_unpacked(r, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0:
        records(data + 1, size - 1);
        break;
    case 1:
        tokens(data + 1, size - 1);
        break;
    default:
        requests(data + 1, size - 1);
        break;
    }
    return 0;
}
