/*
 * auth_apply.c - the member's auth store (auth/auth.h) applied through
 * raft: the auth applier of the chain (applier.h) checks every KV and
 * lease request as the user named in the request (etcd 3.4's
 * authApplierV3) and applies the auth requests; the store is kept in the
 * LMDB bucket "auth" in the apply batch's txn, read back at each store
 * open and after an aborted batch.
 *
 * Every auth change rewrites the bucket whole (auth_store_each): O(users +
 * roles + permissions) per change, which are rare; the KV path only reads
 * the store in memory.
 */
#include <pthread.h>
#include <string.h>

#include "auth/auth.h"
#include "backend/backend.h"
#include "mvcc/mvcc.h"
#include "server/applier.h"
#include "server/arena.h"
#include "server/server_int.h"
#include "util/check.h"
#include "util/err.h"
#include "util/log.h"
#include "util/mem.h"

/* --- the store and its bucket ------------------------------------------- */

static int load_one(void *ctx, const void *k, size_t kl, const void *v,
                    size_t vl)
{
    return auth_store_load(ctx, k, kl, v, vl);
}

static int read_all(struct server *s)
{
    struct backend_txn *t;
    struct backend_cursor *c = NULL;
    auth_store_clear(s->auth.store);
    int rc = backend_read_begin(s->be, &t);
    if (rc != 0)
        return rc;
    rc = backend_cursor_open(t, s->auth.bucket, &c);
    struct backend_val k, v;
    if (rc == 0)
        rc = backend_cursor_first(c, &k, &v);
    while (rc == 0) {
        rc = load_one(s->auth.store, k.data, k.len, v.data, v.len);
        if (rc == 0)
            rc = backend_cursor_next(c, &k, &v);
    }
    backend_cursor_close(c);
    backend_read_end(t);
    return rc == ERR_NOTFOUND ? 0 : rc;
}

/* tokens_create: simple tokens, or JWTs with cfg.auth_jwt (which cmd
 * checked at start-up: a refusal here is unexpected, and logged). */
static int tokens_create(struct server *s, uint64_t ttl_ms)
{
    if (s->cfg.auth_jwt == NULL)
        return auth_tokens_create(ttl_ms, &s->auth.tokens);
    struct auth_jwt *j;
    char why[AUTH_JWT_WHY_MAX];
    int rc = auth_jwt_create(s->cfg.auth_jwt, &j, why);
    if (rc != 0) {
        log_error("etcdserver", "failed to create token provider,err is %s",
                  why[0] ? why : err_str(rc));
        return rc;
    }
    rc = auth_tokens_create_jwt(j, &s->auth.tokens);
    if (rc != 0)
        auth_jwt_destroy(j);
    return rc;
}

int server__auth_load(struct server *s)
{
    CHECK(s != NULL && s->be != NULL);
    if (s->auth.store == NULL) {
        uint64_t ttl = s->cfg.auth_token_ttl_ms ? s->cfg.auth_token_ttl_ms
                                                : 300000;
        int rc = auth_store_create(&s->auth.store);
        if (rc == 0)
            rc = tokens_create(s, ttl);
        if (rc != 0)
            return rc;
    }
    int rc = backend_bucket_open(s->be, "auth", 0, &s->auth.bucket);
    if (rc == 0)
        rc = read_all(s);
    if (rc == ERR_CORRUPT)
        log_error("etcdserver", "the store's auth bucket does not decode");
    if (rc == 0 && !auth_store_enabled(s->auth.store))
        auth_tokens_clear(s->auth.tokens);
    return rc;
}

void server__auth_reload(struct server *s)
{
    if (s->auth.store != NULL && read_all(s) != 0)
        log_error("etcdserver", "cannot read the auth store again");
}

void server__auth_close(struct server *s)
{
    auth_tokens_destroy(s->auth.tokens);
    auth_store_destroy(s->auth.store);
    s->auth.tokens = NULL;
    s->auth.store = NULL;
}

struct persist_ctx {
    struct backend_txn *t;
    backend_bucket b;
};

static int put_one(void *ctx, const void *k, size_t kl, const void *v,
                   size_t vl)
{
    struct persist_ctx *p = ctx;
    return backend_put(p->t, p->b, k, kl, v, vl);
}

/* persist rewrites the bucket from the store, in b's txn. */
static int persist(struct server *s, struct mvcc_batch *b)
{
    struct persist_ctx p = {mvcc_batch_backend_txn(b), s->auth.bucket};
    struct backend_cursor *c;
    int rc = backend_cursor_open(p.t, p.b, &c);
    if (rc != 0)
        return rc;
    struct backend_val k, v;
    while ((rc = backend_cursor_first(c, &k, &v)) == 0) {
        rc = backend_cursor_del(c);
        if (rc != 0)
            break;
    }
    backend_cursor_close(c);
    if (rc != ERR_NOTFOUND)
        return rc;
    return auth_store_each(s->auth.store, put_one, &p);
}

/* --- the public side (server.h) ------------------------------------------ */

struct auth_store *server_auth_store(struct server *s)
{
    return s->auth.store;
}

int server_bcrypt_cost(const struct server *s)
{
    return s->cfg.bcrypt_cost ? s->cfg.bcrypt_cost : AUTH_BCRYPT_COST_DEFAULT;
}

int server_auth_token_user(struct server *s, const char *token, size_t len,
                           char *user_out, size_t cap, uint64_t *revision_out)
{
    return auth_tokens_info(s->auth.tokens, token, len, server__clock_ms(s),
                            user_out, cap, revision_out);
}

/* --- the auth applier ----------------------------------------------------- */

/* The user the request names ("" for none) and the auth revision it saw. */
static const char *who(const struct applier_call *c)
{
    return c->req->auth_user != NULL ? c->req->auth_user : "";
}

static int check_range(const struct applier_call *c, ProtobufCBinaryData key,
                       ProtobufCBinaryData end, enum auth_perm_type type)
{
    return auth_check_range(c->s->auth.store, who(c), c->req->auth_revision,
                            key.data, key.len, end.data, end.len, type);
}

static const ProtobufCBinaryData NO_END = {0, NULL};

struct lease_check {
    const struct applier_call *c;
};

static int lease_key_writable(void *arg, const uint8_t *key, size_t key_len)
{
    const struct lease_check *lc = arg;
    ProtobufCBinaryData k = {key_len, (uint8_t *)key};
    return check_range(lc->c, k, NO_END, AUTH_WRITE);
}

/* etcd's checkLeasePuts: the user may write every key attached to lease
 * (as the batch stands: keys attached earlier in it count).  A lease that
 * is not held, or holds no key, passes (the store applier answers a
 * missing lease).  With auth off nothing is walked. */
static int check_lease_keys(const struct applier_call *c, int64_t lease)
{
    if (lease == 0 || !auth_store_enabled(c->s->auth.store) ||
        !server__lease_exists(c->s, lease))
        return 0;
    struct lease_check lc = {c};
    return mvcc_batch_lease_keys(c->b, lease, lease_key_writable, &lc);
}

/* etcd's order: the key, the lease's keys, then prev_kv's read.  Unlike
 * etcd 3.4 (and 3.5), a put inside a Txn is checked for its lease too
 * (see auth_txn), and for prev_kv's read: etcd 3.4.23, 3.5 and main check
 * a Txn's put for write only (their checkTxnReqsPermission), so there a
 * write-only user reads a key's value through a Txn put with prev_kv,
 * which their own Put refuses (test_auth.py
 * test_txn_put_prev_kv_needs_read shows both). */
static int check_put(const struct applier_call *c,
                     const Etcdserverpb__PutRequest *r)
{
    int rc = check_range(c, r->key, NO_END, AUTH_WRITE);
    if (rc == 0)
        rc = check_lease_keys(c, r->lease);
    if (rc == 0 && r->prev_kv)
        rc = check_range(c, r->key, NO_END, AUTH_READ);
    return rc;
}

static int check_delete(const struct applier_call *c,
                        const Etcdserverpb__DeleteRangeRequest *r)
{
    int rc = check_range(c, r->key, r->range_end, AUTH_WRITE);
    if (rc == 0 && r->prev_kv)
        rc = check_range(c, r->key, r->range_end, AUTH_READ);
    return rc;
}

static int check_txn(const struct applier_call *c,
                     const Etcdserverpb__TxnRequest *t);

static int check_ops(const struct applier_call *c, Etcdserverpb__RequestOp **ops,
                     size_t n)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const Etcdserverpb__RequestOp *op = ops[i];
        switch (op->request_case) {
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
            rc = check_range(c, op->request_range->key,
                             op->request_range->range_end, AUTH_READ);
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
            rc = check_put(c, op->request_put);
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
            rc = check_delete(c, op->request_delete_range);
            break;
        case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
            rc = check_txn(c, op->request_txn); /* nested (3.4: 3.5's) */
            break;
        default:
            break;
        }
    }
    return rc;
}

static int check_txn(const struct applier_call *c,
                     const Etcdserverpb__TxnRequest *t)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->n_compare; i++)
        rc = check_range(c, t->compare[i]->key, t->compare[i]->range_end,
                         AUTH_READ);
    if (rc == 0)
        rc = check_ops(c, t->success, t->n_success);
    if (rc == 0)
        rc = check_ops(c, t->failure, t->n_failure);
    return rc;
}

static int auth_put(const struct applier *self, struct applier_call *c)
{
    int rc = check_put(c, c->req->put);
    return rc != 0 ? rc : server__applier_next(self, c);
}

static int auth_delete(const struct applier *self, struct applier_call *c)
{
    int rc = check_delete(c, c->req->delete_range);
    return rc != 0 ? rc : server__applier_next(self, c);
}

static int auth_txn(const struct applier *self, struct applier_call *c)
{
    int rc = check_txn(c, c->req->txn);
    return rc != 0 ? rc : server__applier_next(self, c);
}

/* etcd's authApplierV3.LeaseRevoke: the user may write every key the
 * revoke would delete.  The lessor's own revokes of expired leases are
 * proposed as root (lease_primary.c, etcd's WithRoot). */
static int auth_lease_revoke(const struct applier *self,
                             struct applier_call *c)
{
    int rc = check_lease_keys(c, c->req->lease_revoke->id);
    return rc != 0 ? rc : server__applier_next(self, c);
}

static int auth_range(const struct applier *self, struct applier_call *c)
{
    int rc = check_range(c, c->req->range->key, c->req->range->range_end,
                         AUTH_READ);
    return rc != 0 ? rc : server__applier_next(self, c);
}

/* A response with just a header, in the arena; its header is filled by
 * apply.c (fill_headers). */
#define SIMPLE_RESPONSE(type, init, c)                                       \
    ({                                                                       \
        type *r_ = arena_alloc((c)->a, sizeof *r_);                         \
        Etcdserverpb__ResponseHeader *h_ = arena_alloc((c)->a, sizeof *h_); \
        if (r_ != NULL && h_ != NULL) {                                      \
            init(r_);                                                        \
            etcdserverpb__response_header__init(h_);                         \
            r_->header = h_;                                                 \
        }                                                                    \
        (r_ != NULL && h_ != NULL) ? r_ : NULL;                              \
    })

/* etcd's needAdminPermission: every auth change and the lists. */
static int admin(const struct applier_call *c)
{
    return auth_check_admin(c->s->auth.store, who(c));
}

/* done answers a change: persisted in the batch's txn, then the reply. */
static int changed(struct applier_call *c, int rc, ProtobufCMessage *m)
{
    if (rc == 0)
        rc = persist(c->s, c->b);
    if (rc == 0 && m == NULL)
        rc = ERR_NOMEM;
    if (rc == 0)
        *c->msg_out = m;
    return rc;
}

static int a_enable(const struct applier *self, struct applier_call *c)
{
    (void)self;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_enable(c->s->auth.store);
    Etcdserverpb__AuthEnableResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthEnableResponse, etcdserverpb__auth_enable_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_disable(const struct applier *self, struct applier_call *c)
{
    (void)self;
    int rc = admin(c);
    if (rc == 0) {
        rc = auth_disable(c->s->auth.store);
        auth_tokens_clear(c->s->auth.tokens);
    }
    Etcdserverpb__AuthDisableResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthDisableResponse,
        etcdserverpb__auth_disable_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_authenticate(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Cetcdpb__AuthenticateInternal *q = c->req->authenticate;
    struct auth_store *as = c->s->auth.store;
    if (!auth_store_enabled(as))
        return ERR_AUTH_NOT_ENABLED;
    char hash[AUTH_HASH_MAX];
    bool nopw = false;
    int rc = auth_user_hash(as, q->name, hash, sizeof hash, &nopw);
    memset(hash, 0, sizeof hash);
    if (rc != 0 || nopw)
        return ERR_AUTH_FAILED;
    /* etcd's simple token: the prefix made by the proposer, ".<index>";
     * a JWT: signed with the store's revision now (auth.h) */
    char *token = NULL;
    rc = auth_tokens_issue(c->s->auth.tokens, q->simple_token, c->req->id,
                           q->name, auth_store_revision(as),
                           server__clock_ms(c->s), &token);
    if (rc != 0)
        return rc;
    Etcdserverpb__AuthenticateResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthenticateResponse,
        etcdserverpb__authenticate_response__init, c);
    char *tok = r ? arena_dup(c->a, token, strlen(token) + 1) : NULL;
    mem_free(token);
    if (tok == NULL)
        return ERR_NOMEM;
    r->token = tok;
    *c->msg_out = &r->base;
    return 0;
}

static int a_user_add(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Cetcdpb__AuthUserAddInternal *q = c->req->auth_user_add;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_user_add(c->s->auth.store, q->name, q->hashed_password.data,
                           q->hashed_password.len,
                           q->options != NULL && q->options->no_password);
    Etcdserverpb__AuthUserAddResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserAddResponse,
        etcdserverpb__auth_user_add_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_user_delete(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const char *name = c->req->auth_user_delete->name;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_user_delete(c->s->auth.store, name);
    if (rc == 0)
        auth_tokens_drop_user(c->s->auth.tokens, name);
    Etcdserverpb__AuthUserDeleteResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserDeleteResponse,
        etcdserverpb__auth_user_delete_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_user_password(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Cetcdpb__AuthUserAddInternal *q = c->req->auth_user_change_password;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_user_password(c->s->auth.store, q->name,
                                q->hashed_password.data,
                                q->hashed_password.len);
    if (rc == 0)
        auth_tokens_drop_user(c->s->auth.tokens, q->name);
    Etcdserverpb__AuthUserChangePasswordResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserChangePasswordResponse,
        etcdserverpb__auth_user_change_password_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_user_grant(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Etcdserverpb__AuthUserGrantRoleRequest *q =
        c->req->auth_user_grant_role;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_user_grant(c->s->auth.store, q->user, q->role);
    Etcdserverpb__AuthUserGrantRoleResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserGrantRoleResponse,
        etcdserverpb__auth_user_grant_role_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_user_revoke(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Etcdserverpb__AuthUserRevokeRoleRequest *q =
        c->req->auth_user_revoke_role;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_user_revoke(c->s->auth.store, q->name, q->role);
    Etcdserverpb__AuthUserRevokeRoleResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserRevokeRoleResponse,
        etcdserverpb__auth_user_revoke_role_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_role_add(const struct applier *self, struct applier_call *c)
{
    (void)self;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_role_add(c->s->auth.store, c->req->auth_role_add->name);
    Etcdserverpb__AuthRoleAddResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthRoleAddResponse,
        etcdserverpb__auth_role_add_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_role_delete(const struct applier *self, struct applier_call *c)
{
    (void)self;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_role_delete(c->s->auth.store, c->req->auth_role_delete->role);
    Etcdserverpb__AuthRoleDeleteResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthRoleDeleteResponse,
        etcdserverpb__auth_role_delete_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_role_grant(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Etcdserverpb__AuthRoleGrantPermissionRequest *q =
        c->req->auth_role_grant_permission;
    int rc = admin(c);
    if (rc == 0 && q->perm == NULL)
        rc = ERR_INVAL;
    if (rc == 0) {
        struct auth_perm p = {(enum auth_perm_type)q->perm->permtype,
                              q->perm->key.data, q->perm->key.len,
                              q->perm->range_end.data,
                              q->perm->range_end.len};
        rc = auth_role_grant(c->s->auth.store, q->name, &p);
    }
    Etcdserverpb__AuthRoleGrantPermissionResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthRoleGrantPermissionResponse,
        etcdserverpb__auth_role_grant_permission_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

static int a_role_revoke(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const Etcdserverpb__AuthRoleRevokePermissionRequest *q =
        c->req->auth_role_revoke_permission;
    int rc = admin(c);
    if (rc == 0)
        rc = auth_role_revoke(c->s->auth.store, q->role, q->key.data,
                              q->key.len, q->range_end.data, q->range_end.len);
    Etcdserverpb__AuthRoleRevokePermissionResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthRoleRevokePermissionResponse,
        etcdserverpb__auth_role_revoke_permission_response__init, c);
    return changed(c, rc, r ? &r->base : NULL);
}

/* --- the reads (through raft as in etcd 3.4) ------------------------------ */

struct names {
    struct arena *a;
    char **v;
    size_t n, cap;
    bool nomem;
};

static void add_name(void *ctx, const char *name)
{
    struct names *ns = ctx;
    if (ns->nomem)
        return;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 8;
        char **v = arena_alloc(ns->a, cap * sizeof *v);
        if (v == NULL) {
            ns->nomem = true;
            return;
        }
        if (ns->n)
            memcpy(v, ns->v, ns->n * sizeof *v);
        ns->v = v;
        ns->cap = cap;
    }
    char *d = arena_dup(ns->a, name, strlen(name) + 1);
    if (d == NULL)
        ns->nomem = true;
    else
        ns->v[ns->n++] = d;
}

static int a_user_get(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const char *name = c->req->auth_user_get->name;
    /* etcd: an admin, or the user about itself */
    int rc = admin(c);
    if (rc != 0 && strcmp(name, who(c)) == 0)
        rc = 0;
    struct names ns = {.a = c->a};
    if (rc == 0)
        rc = auth_user_roles(c->s->auth.store, name, add_name, &ns);
    if (rc == 0 && ns.nomem)
        rc = ERR_NOMEM;
    Etcdserverpb__AuthUserGetResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserGetResponse,
        etcdserverpb__auth_user_get_response__init, c);
    if (rc != 0)
        return rc;
    if (r == NULL)
        return ERR_NOMEM;
    r->roles = ns.v;
    r->n_roles = ns.n;
    *c->msg_out = &r->base;
    return 0;
}

static int a_user_list(const struct applier *self, struct applier_call *c)
{
    (void)self;
    int rc = admin(c);
    if (rc != 0)
        return rc;
    struct names ns = {.a = c->a};
    auth_users(c->s->auth.store, add_name, &ns);
    Etcdserverpb__AuthUserListResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthUserListResponse,
        etcdserverpb__auth_user_list_response__init, c);
    if (r == NULL || ns.nomem)
        return ERR_NOMEM;
    r->users = ns.v;
    r->n_users = ns.n;
    *c->msg_out = &r->base;
    return 0;
}

static int a_role_list(const struct applier *self, struct applier_call *c)
{
    (void)self;
    int rc = admin(c);
    if (rc != 0)
        return rc;
    struct names ns = {.a = c->a};
    auth_roles(c->s->auth.store, add_name, &ns);
    Etcdserverpb__AuthRoleListResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthRoleListResponse,
        etcdserverpb__auth_role_list_response__init, c);
    if (r == NULL || ns.nomem)
        return ERR_NOMEM;
    r->roles = ns.v;
    r->n_roles = ns.n;
    *c->msg_out = &r->base;
    return 0;
}

struct perms {
    struct arena *a;
    Authpb__Permission **v;
    size_t n, cap;
    bool nomem;
};

static void add_perm(void *ctx, const struct auth_perm *p)
{
    struct perms *ps = ctx;
    if (ps->nomem)
        return;
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 8;
        Authpb__Permission **v = arena_alloc(ps->a, cap * sizeof *v);
        if (v == NULL) {
            ps->nomem = true;
            return;
        }
        if (ps->n)
            memcpy(v, ps->v, ps->n * sizeof *v);
        ps->v = v;
        ps->cap = cap;
    }
    Authpb__Permission *m = arena_alloc(ps->a, sizeof *m);
    uint8_t *k = p->key_len ? arena_dup(ps->a, p->key, p->key_len) : NULL;
    uint8_t *e = p->end_len ? arena_dup(ps->a, p->end, p->end_len) : NULL;
    if (m == NULL || (p->key_len && k == NULL) || (p->end_len && e == NULL)) {
        ps->nomem = true;
        return;
    }
    authpb__permission__init(m);
    m->permtype = (Authpb__Permission__Type)p->type;
    m->key = (ProtobufCBinaryData){p->key_len, k};
    m->range_end = (ProtobufCBinaryData){p->end_len, e};
    ps->v[ps->n++] = m;
}

static int a_role_get(const struct applier *self, struct applier_call *c)
{
    (void)self;
    const char *role = c->req->auth_role_get->role;
    /* etcd: an admin, or a user that has the role */
    int rc = admin(c);
    if (rc != 0 && auth_user_has_role(c->s->auth.store, who(c), role))
        rc = 0;
    struct perms ps = {.a = c->a};
    if (rc == 0)
        rc = auth_role_perms(c->s->auth.store, role, add_perm, &ps);
    if (rc == 0 && ps.nomem)
        rc = ERR_NOMEM;
    if (rc != 0)
        return rc;
    Etcdserverpb__AuthRoleGetResponse *r = SIMPLE_RESPONSE(
        Etcdserverpb__AuthRoleGetResponse,
        etcdserverpb__auth_role_get_response__init, c);
    if (r == NULL)
        return ERR_NOMEM;
    r->perm = ps.v;
    r->n_perm = ps.n;
    *c->msg_out = &r->base;
    return 0;
}

const struct applier_ops server__applier_auth_ops = {
    .name = "auth",
    .fn = {
        [APPLIER_RANGE] = auth_range,
        [APPLIER_PUT] = auth_put,
        [APPLIER_DELETE_RANGE] = auth_delete,
        [APPLIER_TXN] = auth_txn,
        [APPLIER_LEASE_REVOKE] = auth_lease_revoke,
        [APPLIER_AUTHENTICATE] = a_authenticate,
        [APPLIER_AUTH_ENABLE] = a_enable,
        [APPLIER_AUTH_DISABLE] = a_disable,
        [APPLIER_USER_ADD] = a_user_add,
        [APPLIER_USER_DELETE] = a_user_delete,
        [APPLIER_USER_CHANGE_PASSWORD] = a_user_password,
        [APPLIER_USER_GRANT_ROLE] = a_user_grant,
        [APPLIER_USER_GET] = a_user_get,
        [APPLIER_USER_REVOKE_ROLE] = a_user_revoke,
        [APPLIER_USER_LIST] = a_user_list,
        [APPLIER_ROLE_ADD] = a_role_add,
        [APPLIER_ROLE_GRANT_PERMISSION] = a_role_grant,
        [APPLIER_ROLE_GET] = a_role_get,
        [APPLIER_ROLE_REVOKE_PERMISSION] = a_role_revoke,
        [APPLIER_ROLE_DELETE] = a_role_delete,
        [APPLIER_ROLE_LIST] = a_role_list,
    },
};
