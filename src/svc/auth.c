/*
 * auth.c - the Auth service (svc.h "Auth") and the caller's identity for
 * the other services: the token in the request metadata names a user
 * (server_auth_token_user); a proposal carries that user and the auth
 * revision seen (svc__auth_stamp), and the auth applier checks it on
 * every member; a read is checked here (svc_auth_check_read).
 *
 * bcrypt (about 50-100 ms at the default cost 10 per UserAdd,
 * ChangePassword and Authenticate) runs on cetcd-slow, not on the event
 * loop that decoded the request; etcd runs it on the request's goroutine.
 */
#include "svc/svc.h"

#include <string.h>

#include "auth/auth.h"
#include "server/server.h"
#include "svc/svc_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

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
 * now.  An empty CN (or none) names the user "" at that revision, as
 * etcd: its checks answer "permission denied" (no such user), while an
 * admin request answers "user name is empty".  A CN too long for any
 * user name is taken as "" too (no user could match it either). */
static int peer_cn_user(struct server *s, struct svc_done done,
                        char *user_out, size_t cap, uint64_t *rev_out)
{
    size_t len = 0;
    const char *cn = done.metadata != NULL
                         ? done.metadata(done.ctx, SVC_META_PEER_CN, &len)
                         : NULL;
    if (cn == NULL)
        return 0;
    if (len >= cap)
        len = 0;
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
                        ProtobufCBinaryData key, ProtobufCBinaryData end,
                        uint64_t *rev_out)
{
    struct auth_store *as = server_auth_store(s);
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev;
    bool enabled = auth_store_enabled(as);
    int rc = svc_auth_who(s, done, user, sizeof user, &rev);
    if (rc == 0)
        rc = auth_check_range(as, user, rev, key.data, key.len, end.data,
                              end.len, AUTH_READ);
    if (rev_out != NULL)
        *rev_out = rc == 0 && enabled ? rev : 0;
    return rc;
}

int svc_auth_check_admin(struct server *s, struct svc_done done)
{
    char user[AUTH_NAME_MAX + 1];
    uint64_t rev;
    int rc = svc_auth_who(s, done, user, sizeof user, &rev);
    return rc != 0 ? rc : auth_check_admin(server_auth_store(s), user);
}

/* etcd 3.4's maintenance server hands the auth store's own errors to gRPC
 * as they are (gRPC Unknown, "auth: ..."), where the other services turn
 * them into rpctypes ("etcdserver: ...", with a code). */
int svc__auth_raw(int rc)
{
    switch (rc) {
    case ERR_AUTH_USER_EMPTY: return ERR_AUTH_RAW_USER_EMPTY;
    case ERR_AUTH_USER_NOT_FOUND: return ERR_AUTH_RAW_USER_NOT_FOUND;
    case ERR_AUTH_PERMISSION_DENIED: return ERR_AUTH_RAW_PERMISSION_DENIED;
    case ERR_AUTH_INVALID_TOKEN: return ERR_AUTH_RAW_INVALID_TOKEN;
    default: return rc;
    }
}

int svc_auth_check_maint(struct server *s, struct svc_done done)
{
    return svc__auth_raw(svc_auth_check_admin(s, done));
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

/* --- bcrypt, on cetcd-slow --------------------------------------------------
 * A bcrypt hash or check holds a CPU for tens of milliseconds at the
 * default cost (10): UserAdd, UserChangePassword and Authenticate run it on
 * the server's slow runner (server_task_post_slow), never on the event
 * loop that decoded the request (its other connections would wait), then
 * propose from there.  The password is copied for the job and wiped
 * before it is freed; only its hash goes into raft. */

enum pw_kind { PW_USER_ADD, PW_CHANGE, PW_AUTHENTICATE };

struct pw_job {
    struct server_task task; /* on cetcd-slow */
    struct server *s;
    enum pw_kind kind;
    bool hash_it;            /* UserAdd without no_password */
    Authpb__UserAddOptions *options; /* UserAdd's, or NULL */
    Authpb__UserAddOptions opts;     /* its copy (no_password only) */
    struct svc_done *held;   /* the request's completion */
    char *name;              /* copies (mem_malloc'd) */
    char *password;
    size_t password_len;
};

static void pass_on(void *ctx, int err, const ProtobufCMessage *reply)
{
    svc__done_take(ctx, err, reply);
}

static void pw_free(struct pw_job *j)
{
    if (j->password != NULL)
        memset(j->password, 0, j->password_len);
    mem_free(j->password);
    mem_free(j->name);
    mem_free(j);
}

/* pw_propose_user: UserAdd and UserChangePassword with hash (NULL:
 * UserAdd with no_password). */
static void pw_propose_user(struct pw_job *j, const char *hash,
                            struct svc_done done)
{
    Cetcdpb__AuthUserAddInternal q = CETCDPB__AUTH_USER_ADD_INTERNAL__INIT;
    q.name = j->name;
    q.options = j->options;
    if (hash != NULL)
        q.hashed_password = (ProtobufCBinaryData){strlen(hash),
                                                  (uint8_t *)hash};
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    if (j->kind == PW_USER_ADD) {
        ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_ADD;
        ir.auth_user_add = &q;
    } else {
        q.options = NULL;
        ir.request_case =
            CETCDPB__INTERNAL_REQUEST__REQUEST_AUTH_USER_CHANGE_PASSWORD;
        ir.auth_user_change_password = &q;
    }
    propose(j->s, &ir, done);
}

static void pw_authenticate(struct pw_job *j, struct svc_done done)
{
    struct auth_store *as = server_auth_store(j->s);
    char hash[AUTH_HASH_MAX];
    bool nopw = false;
    int rc = auth_user_hash(as, j->name, hash, sizeof hash, &nopw);
    if (rc != 0 || nopw ||
        !auth_password_check(j->password, j->password_len, hash))
        rc = ERR_AUTH_FAILED;
    memset(hash, 0, sizeof hash);
    char prefix[17];
    if (rc == 0)
        rc = auth_token_prefix(prefix);
    if (rc != 0)
        return done.fn(done.ctx, rc, NULL);
    Cetcdpb__AuthenticateInternal q = CETCDPB__AUTHENTICATE_INTERNAL__INIT;
    q.name = j->name;
    q.simple_token = prefix;
    Cetcdpb__InternalRequest ir = CETCDPB__INTERNAL_REQUEST__INIT;
    ir.request_case = CETCDPB__INTERNAL_REQUEST__REQUEST_AUTHENTICATE;
    ir.authenticate = &q;
    propose(j->s, &ir, done);
}

/* On cetcd-slow; stopping: the member is going away, no server call. */
static void pw_run(struct server_task *t, bool stopping)
{
    struct pw_job *j = t->arg;
    struct svc_done done = {pass_on, j->held, svc__done_metadata};
    if (stopping) {
        svc__done_take(j->held, ERR_STOPPED, NULL);
    } else if (j->kind == PW_AUTHENTICATE) {
        pw_authenticate(j, done);
    } else if (!j->hash_it) {
        pw_propose_user(j, NULL, done);
    } else {
        char hash[AUTH_HASH_MAX];
        int rc = auth_password_hash(j->password, j->password_len,
                                    server_bcrypt_cost(j->s), hash);
        if (rc != 0)
            svc__done_take(j->held, rc, NULL);
        else
            pw_propose_user(j, hash, done);
        memset(hash, 0, sizeof hash);
    }
    pw_free(j);
}

static char *str_dup(const char *p)
{
    size_t n = strlen(p);
    char *c = mem_malloc(n + 1);
    if (c != NULL)
        memcpy(c, p, n + 1);
    return c;
}

/* pw_post hands the request to cetcd-slow, or answers ERR_NOMEM. */
static void pw_post(struct server *s, enum pw_kind kind, const char *name,
                    const char *password,
                    const Authpb__UserAddOptions *options,
                    struct svc_done done)
{
    struct pw_job *j = mem_calloc(1, sizeof(*j));
    if (j == NULL)
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    j->s = s;
    j->kind = kind;
    j->name = str_dup(name);
    j->password = str_dup(password != NULL ? password : "");
    j->password_len = password != NULL ? strlen(password) : 0;
    j->hash_it = kind == PW_CHANGE ||
                 (kind == PW_USER_ADD &&
                  (options == NULL || !options->no_password));
    if (options != NULL) { /* its one field: the request's memory goes */
        j->opts = (Authpb__UserAddOptions)AUTHPB__USER_ADD_OPTIONS__INIT;
        j->opts.no_password = options->no_password;
        j->options = &j->opts;
    }
    j->held = j->name != NULL && j->password != NULL ? svc__done_dup(done)
                                                     : NULL;
    if (j->held == NULL) {
        pw_free(j);
        return done.fn(done.ctx, ERR_NOMEM, NULL);
    }
    j->task = (struct server_task){.fn = pw_run, .arg = j};
    server_task_post_slow(s, &j->task);
}

static void user_add(struct server *s, const Etcdserverpb__AuthUserAddRequest *r,
                     struct svc_done done)
{
    if (r->name[0] == '\0') /* etcd refuses it at apply; no hash needed */
        return done.fn(done.ctx, ERR_AUTH_USER_EMPTY, NULL);
    pw_post(s, PW_USER_ADD, r->name, r->password, r->options, done);
}

static void user_password(struct server *s,
                          const Etcdserverpb__AuthUserChangePasswordRequest *r,
                          struct svc_done done)
{
    pw_post(s, PW_CHANGE, r->name, r->password, NULL, done);
}

static void authenticate(struct server *s,
                         const Etcdserverpb__AuthenticateRequest *r,
                         struct svc_done done)
{
    if (!auth_store_enabled(server_auth_store(s)))
        return done.fn(done.ctx, ERR_AUTH_NOT_ENABLED, NULL);
    pw_post(s, PW_AUTHENTICATE, r->name, r->password, NULL, done);
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
