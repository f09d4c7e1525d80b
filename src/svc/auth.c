/*
 * auth.c - the Auth service (svc.h "Auth") and the caller's identity for
 * the other services: the token in the request metadata names a user
 * (server_auth_token_user); a proposal carries that user and the auth
 * revision seen (svc__auth_stamp), and the auth applier checks it on
 * every member; a read is checked here (svc_auth_check_read).
 *
 * bcrypt runs on the caller's thread (an event loop: about 50-100 ms at
 * the default cost 10 per UserAdd, ChangePassword and Authenticate); etcd
 * runs it on the request's goroutine.
 */
#include "svc/svc.h"

#include <string.h>

#include "auth/auth.h"
#include "server/server.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"

/* The token metadata: etcd's "token", or "authorization" (its gateway). */
static const char *token_of(struct svc_done done, size_t *len)
{
    if (done.metadata == NULL)
        return NULL;
    const char *t = done.metadata(done.ctx, "token", len);
    if (t == NULL)
        t = done.metadata(done.ctx, "authorization", len);
    return t;
}

/* etcd's AuthInfoFromTLS: no token, but a verified client certificate
 * (--client-cert-auth) names the user by its CN, at the store's revision
 * now.  A CN too long for a user name names nobody. */
static int peer_cn_user(struct server *s, struct svc_done done,
                        char *user_out, size_t cap, uint64_t *rev_out)
{
    size_t len = 0;
    const char *cn = done.metadata != NULL
                         ? done.metadata(done.ctx, SVC_META_PEER_CN, &len)
                         : NULL;
    if (cn == NULL || len == 0 || len >= cap)
        return 0;
    memcpy(user_out, cn, len);
    user_out[len] = '\0';
    *rev_out = auth_store_revision(server_auth_store(s));
    return 0;
}

int svc_auth_who(struct server *s, struct svc_done done, char *user_out,
                 size_t cap, uint64_t *rev_out)
{
    CHECK(cap > 0);
    user_out[0] = '\0';
    *rev_out = 0;
    size_t len = 0;
    const char *t = token_of(done, &len);
    if (t == NULL)
        return peer_cn_user(s, done, user_out, cap, rev_out);
    /* read the revision first: a change after it makes the applier refuse
     * the request as old, never accept it as new (a JWT replaces it with
     * the revision it was signed at, as etcd) */
    uint64_t rev = auth_store_revision(server_auth_store(s));
    int rc = server_auth_token_user(s, t, len, user_out, cap, &rev);
    if (rc != 0) {
        user_out[0] = '\0';
        return ERR_AUTH_INVALID_TOKEN;
    }
    *rev_out = rev;
    return 0;
}

int svc__auth_stamp(struct server *s, struct svc_done done,
                    Cetcdpb__InternalRequest *ir, char *buf, size_t cap)
{
    uint64_t rev;
    int rc = svc_auth_who(s, done, buf, cap, &rev);
    if (rc != 0)
        return rc;
    ir->auth_user = buf;
    ir->auth_revision = rev;
    return 0;
}

int svc_auth_check_read(struct server *s, struct svc_done done,
                        ProtobufCBinaryData key, ProtobufCBinaryData end)
{
    struct auth_store *as = server_auth_store(s);
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev;
    int rc = svc_auth_who(s, done, user, sizeof user, &rev);
    if (rc == 0)
        rc = auth_check_range(as, user, rev, key.data, key.len, end.data,
                              end.len, AUTH_READ);
    return rc;
}

int svc_auth_check_admin(struct server *s, struct svc_done done)
{
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev;
    int rc = svc_auth_who(s, done, user, sizeof user, &rev);
    return rc != 0 ? rc : auth_check_admin(server_auth_store(s), user);
}

/* --- proposals ------------------------------------------------------------ */

static void on_applied(void *arg, const struct server_response *r)
{
    svc__done_take(arg, r->err, r->err == 0 ? r->msg : NULL);
}

/* propose sends ir (its request set) stamped with the caller. */
static void propose(struct server *s, Cetcdpb__InternalRequest *ir,
                    struct svc_done done)
{
    char user[AUTH_NAME_MAX + 1];
    int rc = svc__auth_stamp(s, done, ir, user, sizeof user);
    struct svc_done *held = rc == 0 ? svc__done_dup(done) : NULL;
    if (rc == 0 && held == NULL)
        rc = ERR_NOMEM;
    if (rc != 0) {
        done.fn(done.ctx, rc, NULL);
        return;
    }
    server_propose(s, ir, on_applied, held);
}

static void user_add(struct server *s, const Etcdserverpb__AuthUserAddRequest *r,
                     struct svc_done done)
{
    Cetcdpb__AuthUserAddInternal q = CETCDPB__AUTH_USER_ADD_INTERNAL__INIT;
    char hash[AUTH_HASH_MAX] = "";
    q.name = r->name;
    q.options = r->options;
    if (r->name[0] == '\0') /* etcd refuses it at apply; no hash needed */
        return done.fn(done.ctx, ERR_AUTH_USER_EMPTY, NULL);
    if (r->options == NULL || !r->options->no_password) {
        int rc = auth_password_hash(r->password, strlen(r->password),
                                    server_bcrypt_cost(s), hash);
        if (rc != 0)
            return done.fn(done.ctx, rc, NULL);
        q.hashed_password = (ProtobufCBinaryData){strlen(hash),
                                                  (uint8_t *)hash};
    }
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_ADD;
    ir.auth_user_add = &q;
    propose(s, &ir, done);
    memset(hash, 0, sizeof hash);
}

static void user_password(struct server *s,
                          const Etcdserverpb__AuthUserChangePasswordRequest *r,
                          struct svc_done done)
{
    Cetcdpb__AuthUserAddInternal q = CETCDPB__AUTH_USER_ADD_INTERNAL__INIT;
    char hash[AUTH_HASH_MAX];
    int rc = auth_password_hash(r->password, strlen(r->password),
                                server_bcrypt_cost(s), hash);
    if (rc != 0)
        return done.fn(done.ctx, rc, NULL);
    q.name = r->name;
    q.hashed_password = (ProtobufCBinaryData){strlen(hash), (uint8_t *)hash};
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case =
        CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_CHANGE_PASSWORD;
    ir.auth_user_change_password = &q;
    propose(s, &ir, done);
    memset(hash, 0, sizeof hash);
}

static void authenticate(struct server *s,
                         const Etcdserverpb__AuthenticateRequest *r,
                         struct svc_done done)
{
    struct auth_store *as = server_auth_store(s);
    if (!auth_store_enabled(as))
        return done.fn(done.ctx, ERR_AUTH_NOT_ENABLED, NULL);
    char hash[AUTH_HASH_MAX];
    bool nopw = false;
    int rc = auth_user_hash(as, r->name, hash, sizeof hash, &nopw);
    if (rc != 0 || nopw ||
        !auth_password_check(r->password, strlen(r->password), hash))
        rc = ERR_AUTH_FAILED;
    memset(hash, 0, sizeof hash);
    char prefix[17];
    if (rc == 0)
        rc = auth_token_prefix(prefix);
    if (rc != 0)
        return done.fn(done.ctx, rc, NULL);
    Cetcdpb__AuthenticateInternal q = CETCDPB__AUTHENTICATE_INTERNAL__INIT;
    q.name = r->name;
    q.simple_token = prefix;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_AUTHENTICATE;
    ir.authenticate = &q;
    propose(s, &ir, done);
}

/* The requests that go to raft as they are: descriptor -> oneof case. */
static const struct {
    const ProtobufCMessageDescriptor *d;
    Cetcdpb__InternalRequest__RequestCase kind;
} plain[] = {
    {&etcdserverpb__auth_enable_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ENABLE},
    {&etcdserverpb__auth_disable_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_DISABLE},
    {&etcdserverpb__auth_user_get_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_GET},
    {&etcdserverpb__auth_user_list_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_LIST},
    {&etcdserverpb__auth_user_delete_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_DELETE},
    {&etcdserverpb__auth_user_grant_role_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_GRANT_ROLE},
    {&etcdserverpb__auth_user_revoke_role_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_REVOKE_ROLE},
    {&etcdserverpb__auth_role_add_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_ADD},
    {&etcdserverpb__auth_role_get_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_GET},
    {&etcdserverpb__auth_role_list_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_LIST},
    {&etcdserverpb__auth_role_delete_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_DELETE},
    {&etcdserverpb__auth_role_grant_permission_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_GRANT_PERMISSION},
    {&etcdserverpb__auth_role_revoke_permission_request__descriptor,
     CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_ROLE_REVOKE_PERMISSION},
};

void svc_auth_call(struct server *s, const ProtobufCMessage *req,
                   struct svc_done done)
{
    CHECK(s != NULL && req != NULL && done.fn != NULL);
    const ProtobufCMessageDescriptor *d = req->descriptor;
    if (d == &etcdserverpb__auth_user_add_request__descriptor)
        return user_add(s, (const void *)req, done);
    if (d == &etcdserverpb__auth_user_change_password_request__descriptor)
        return user_password(s, (const void *)req, done);
    if (d == &etcdserverpb__authenticate_request__descriptor)
        return authenticate(s, (const void *)req, done);
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        if (plain[i].d != d)
            continue;
        Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
        ir.request_case = plain[i].kind;
        /* every member of the oneof is a message pointer */
        ir.auth_enable = (Etcdserverpb__AuthEnableRequest *)req;
        return propose(s, &ir, done);
    }
    done.fn(done.ctx, ERR_INVAL, NULL);
}
