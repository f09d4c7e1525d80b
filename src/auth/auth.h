/*
 * auth.h - the auth store of a member (etcd 3.4's auth/store.go and
 * simple_token.go are the reference for what it does; this is our own
 * code): users (name, bcrypt hash, roles, no_password), roles (key
 * permissions READ / WRITE / READWRITE on a key, a range [key, range_end)
 * or every key from key on, range_end "\0"), the enabled flag, the auth
 * revision, the permission checks, and the simple tokens.
 *
 * The store is memory only: server/auth_apply.c applies the auth requests
 * that came through raft to it (so every member holds the same store) and
 * writes its records (auth_store_each) into the LMDB bucket "auth" in the
 * same batch; each store open reads them back (auth_store_load_*).  It
 * never sees a password in the clear: callers hash before they call
 * (server: bcrypt before the request enters raft).
 *
 * Revision.  A new store is at revision 1 (etcd's NewAuthStore commits 1,
 * and a JWT carries the number, so it must be etcd's).  Every change
 * bumps the auth revision by one (etcd's commitRevision), as etcd: a grant of a role the user already has and
 * AuthEnable on an enabled store change nothing and bump nothing.
 * auth_check_* take the revision the caller saw when it checked the token
 * and refuse a request that saw an older store (ERR_AUTH_OLD_REVISION).
 *
 * Threads.  One rwlock: the apply side changes, any thread reads and
 * checks.  The token table has its own mutex (auth_tokens_*).
 *
 * Errors are ERR_* codes (util/err.h, ERR_AUTH_*), and ERR_NOMEM.
 */
#ifndef CETCD_AUTH_AUTH_H
#define CETCD_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Permission types, authpb.Permission.Type's numbers. */
enum auth_perm_type {
    AUTH_READ = 0,
    AUTH_WRITE = 1,
    AUTH_READWRITE = 2,
};

#define AUTH_ROOT_USER "root"
#define AUTH_ROOT_ROLE "root"

/* Names are at most this long (bytes); longer ones: ERR_INVAL. */
#define AUTH_NAME_MAX 4096
/* The store holds at most this many users, roles, and permissions per
 * role (more: ERR_TOO_MANY_REQUESTS), so its memory is bounded. */
#define AUTH_USERS_MAX 65536
#define AUTH_ROLES_MAX 65536
#define AUTH_PERMS_MAX 4096

struct auth_store;

/* One permission as the store lists it (borrowed views). */
struct auth_perm {
    enum auth_perm_type type;
    const uint8_t *key;
    size_t key_len;
    const uint8_t *end; /* range_end; end_len 0: the key alone */
    size_t end_len;
};

int auth_store_create(struct auth_store **out);
void auth_store_destroy(struct auth_store *as);

/* auth_store_clear empties the store (before loading it again). */
void auth_store_clear(struct auth_store *as);

bool auth_store_enabled(struct auth_store *as);
uint64_t auth_store_revision(struct auth_store *as);

/* --- changes (the apply side) -------------------------------------------
 * Each returns 0 (and bumps the revision when something changed) or an
 * ERR_*.  etcd's rules: */

/* auth_enable: ERR_AUTH_ROOT_USER_NOT_EXIST, ERR_AUTH_ROOT_ROLE_NOT_EXIST;
 * enabling an enabled store is a no-op.  auth_disable: a no-op when
 * disabled.  Neither touches the tokens: the caller does. */
int auth_enable(struct auth_store *as);
int auth_disable(struct auth_store *as);

/* auth_user_add: hash (bcrypt, may be empty with no_password).  Errors:
 * ERR_AUTH_USER_EMPTY, ERR_AUTH_USER_EXISTS. */
int auth_user_add(struct auth_store *as, const char *name, const uint8_t *hash,
                  size_t hash_len, bool no_password);
/* auth_user_delete: ERR_AUTH_INVALID_MGMT (root while enabled),
 * ERR_AUTH_USER_NOT_FOUND. */
int auth_user_delete(struct auth_store *as, const char *name);
/* auth_user_password: ERR_AUTH_USER_NOT_FOUND. */
int auth_user_password(struct auth_store *as, const char *name,
                       const uint8_t *hash, size_t hash_len);
/* auth_user_grant: the role "root" needs no role record.  Errors:
 * ERR_AUTH_USER_NOT_FOUND, ERR_AUTH_ROLE_NOT_FOUND. */
int auth_user_grant(struct auth_store *as, const char *user, const char *role);
/* auth_user_revoke: ERR_AUTH_INVALID_MGMT (root from root while enabled),
 * ERR_AUTH_USER_NOT_FOUND, ERR_AUTH_ROLE_NOT_GRANTED. */
int auth_user_revoke(struct auth_store *as, const char *user, const char *role);
/* auth_role_add: ERR_AUTH_ROLE_EMPTY, ERR_AUTH_ROLE_EXISTS. */
int auth_role_add(struct auth_store *as, const char *name);
/* auth_role_delete (revoked from every user): ERR_AUTH_INVALID_MGMT (root
 * while enabled), ERR_AUTH_ROLE_NOT_FOUND. */
int auth_role_delete(struct auth_store *as, const char *name);
/* auth_role_grant adds p, or changes the type of the permission with the
 * same key and end.  Errors: ERR_AUTH_ROLE_NOT_FOUND. */
int auth_role_grant(struct auth_store *as, const char *role,
                    const struct auth_perm *p);
/* auth_role_revoke: ERR_AUTH_ROLE_NOT_FOUND,
 * ERR_AUTH_PERMISSION_NOT_GRANTED. */
int auth_role_revoke(struct auth_store *as, const char *role,
                     const uint8_t *key, size_t key_len, const uint8_t *end,
                     size_t end_len);

/* --- reads ---------------------------------------------------------------
 * The visitors run under the read lock: they must not call the store. */

/* auth_user_hash copies the user's hash into buf (cap bytes, NUL added)
 * and tells whether it is a no_password user.  Errors:
 * ERR_AUTH_USER_NOT_FOUND, ERR_TOO_LARGE (cap too small). */
int auth_user_hash(struct auth_store *as, const char *name, char *buf,
                   size_t cap, bool *no_password_out);

/* auth_user_roles calls fn for each role of the user, sorted.  Errors:
 * ERR_AUTH_USER_NOT_FOUND. */
int auth_user_roles(struct auth_store *as, const char *name,
                    void (*fn)(void *ctx, const char *role), void *ctx);
/* auth_users / auth_roles call fn for each name, sorted. */
void auth_users(struct auth_store *as, void (*fn)(void *ctx, const char *name),
                void *ctx);
void auth_roles(struct auth_store *as, void (*fn)(void *ctx, const char *name),
                void *ctx);
/* auth_role_perms calls fn for each permission of the role, sorted by key.
 * Errors: ERR_AUTH_ROLE_NOT_FOUND. */
int auth_role_perms(struct auth_store *as, const char *role,
                    void (*fn)(void *ctx, const struct auth_perm *p),
                    void *ctx);
/* auth_user_has_role: the user exists and has role. */
bool auth_user_has_role(struct auth_store *as, const char *user,
                        const char *role);

/* --- checks (etcd's isOpPermitted / IsAdminPermitted) --------------------
 * user: "" when the request named nobody; revision: the store's revision
 * the caller saw with the token (0: none).  With auth disabled every
 * check passes. */

/* auth_check_range: may user do type (AUTH_READ or AUTH_WRITE) on [key,
 * end) (end_len 0: the key alone; end "\0": every key from key on)?
 * Errors: ERR_AUTH_USER_EMPTY (revision 0: no user given, as etcd's
 * isOpPermitted), ERR_AUTH_OLD_REVISION, ERR_AUTH_PERMISSION_DENIED (no
 * such user, the user "" included, or not covered). */
int auth_check_range(struct auth_store *as, const char *user,
                     uint64_t revision, const uint8_t *key, size_t key_len,
                     const uint8_t *end, size_t end_len,
                     enum auth_perm_type type);
/* auth_check_admin: the user has the root role.  Errors:
 * ERR_AUTH_USER_EMPTY, ERR_AUTH_USER_NOT_FOUND,
 * ERR_AUTH_PERMISSION_DENIED. */
int auth_check_admin(struct auth_store *as, const char *user);

/* --- records (persistence) -----------------------------------------------
 * A record is a key and a value: "enabled" -> 1 byte, "revision" -> 8
 * bytes big-endian, "user/<name>" -> a packed authpb.User, "role/<name>"
 * -> a packed authpb.Role. */

/* auth_store_each calls fn with every record of the store; a nonzero
 * return stops the walk and is returned.  ERR_NOMEM. */
int auth_store_each(struct auth_store *as,
                    int (*fn)(void *ctx, const void *key, size_t key_len,
                              const void *val, size_t val_len),
                    void *ctx);
/* auth_store_load takes one record back (after auth_store_clear).
 * Errors: ERR_CORRUPT (does not decode), ERR_NOMEM. */
int auth_store_load(struct auth_store *as, const void *key, size_t key_len,
                    const void *val, size_t val_len);

/* --- simple tokens (token.c) ---------------------------------------------
 * etcd's simple token: "<16 letters>.<raft index>", valid on every member
 * (each assigns it when it applies the Authenticate), for ttl_ms since it
 * was last used; deleted with its user's deletion or password change and
 * all of them when auth is disabled.  At most AUTH_TOKENS_MAX live. */
#define AUTH_TOKENS_MAX 65536
#define AUTH_TOKEN_MAX_LEN 64

struct auth_tokens;
struct auth_jwt;

int auth_tokens_create(uint64_t ttl_ms, struct auth_tokens **out);
void auth_tokens_destroy(struct auth_tokens *t);

/* auth_token_prefix writes 16 random letters and a NUL into buf (17
 * bytes).  Errors: ERR_IO (no randomness). */
int auth_token_prefix(char buf[17]);

/* auth_tokens_assign: token (NUL-terminated, at most AUTH_TOKEN_MAX_LEN)
 * names user from now_ms.  Errors: ERR_INVAL (malformed),
 * ERR_TOO_MANY_REQUESTS (full of live tokens), ERR_NOMEM. */
int auth_tokens_assign(struct auth_tokens *t, const char *token,
                       const char *user, uint64_t now_ms);

/* auth_tokens_user copies the user token (len bytes, not NUL-terminated)
 * names into user_out (cap bytes, NUL-terminated) and renews its TTL.
 * Errors: ERR_AUTH_INVALID_TOKEN (unknown, expired, malformed),
 * ERR_TOO_LARGE (cap). */
int auth_tokens_user(struct auth_tokens *t, const char *token, size_t len,
                     uint64_t now_ms, char *user_out, size_t cap);

/* auth_tokens_drop_user forgets the user's tokens; auth_tokens_clear all. */
void auth_tokens_drop_user(struct auth_tokens *t, const char *user);
void auth_tokens_clear(struct auth_tokens *t);
size_t auth_tokens_count(struct auth_tokens *t);

/* auth_tokens_create_jwt: the tokens are JWTs made and checked by j
 * (token_jwt.c), which t owns from then on (on a failure the caller
 * still owns j).  Errors: ERR_NOMEM. */
int auth_tokens_create_jwt(struct auth_jwt *j, struct auth_tokens **out);
/* auth_tokens_jwt: t holds JWTs. */
bool auth_tokens_jwt(const struct auth_tokens *t);

/* auth_tokens_issue makes the token of an Authenticate of user applied at
 * raft index with the store at auth revision: simple, "<prefix>.<index>"
 * (prefix from auth_token_prefix) registered from now_ms; JWT, signed with
 * that revision and the wall clock's now + ttl as its exp (prefix, index
 * and now_ms unused).  *token_out is NUL-terminated, freed with mem_free.
 * Errors: those of auth_tokens_assign, of auth_jwt_sign. */
int auth_tokens_issue(struct auth_tokens *t, const char *prefix,
                      uint64_t index, const char *user, uint64_t revision,
                      uint64_t now_ms, char **token_out);

/* auth_tokens_info is auth_tokens_user that also tells the auth revision a
 * JWT carries in *revision_out (etcd's AuthInfo.Revision: a request with
 * a token older than the store is refused as ERR_AUTH_OLD_REVISION); for
 * a simple token *revision_out is left as it is (the caller's: the
 * store's revision it saw).  A JWT is checked against the wall clock. */
int auth_tokens_info(struct auth_tokens *t, const char *token, size_t len,
                     uint64_t now_ms, char *user_out, size_t cap,
                     uint64_t *revision_out);

/* auth_token_parse checks a simple token's shape: 16 letters, '.', a
 * decimal index (returned in *index_out).  Errors: ERR_INVAL. */
int auth_token_parse(const char *token, size_t len, uint64_t *index_out);

/* --- JWT tokens (token_jwt.c) -------------------------------------------
 * etcd's --auth-token jwt,sign-method=M,pub-key=F,priv-key=F,ttl=D: the
 * token is a JWT (RFC 7519) with the claims username, revision (the auth
 * store's at the Authenticate) and exp (Unix seconds), signed with
 * M = RS256|RS384|RS512 (RSA), PS256|PS384|PS512 (RSA-PSS),
 * ES256|ES384|ES512 (ECDSA on P-256, P-384, P-521), HS256|HS384|HS512
 * (HMAC, the secret is the priv-key file's bytes as they are) or EdDSA
 * (Ed25519: etcd 3.5 takes it, 3.4.23 refuses it at start).  A member
 * given only a public key verifies tokens and refuses to sign them
 * (etcd's verify-only member).  Tokens from etcd with the same key verify
 * here and ours there.  The caller (cmd) splits the option string and
 * reads the files; this module parses the keys (PEM: PKCS#1, PKCS#8,
 * SEC1 private keys; a PUBLIC KEY block or a certificate for the public
 * one) and signs/verifies with OpenSSL's libcrypto, claims with json-c.
 *
 * Threads: a struct auth_jwt does not change after auth_jwt_create; any
 * thread may sign and verify with it at once. */
#define AUTH_JWT_TOKEN_MAX 65536 /* longer tokens are not ours: invalid */
#define AUTH_JWT_WHY_MAX 256     /* a refusal's message, with its NUL */

struct auth_jwt;

/* The parsed options (borrowed for the call). */
struct auth_jwt_config {
    const char *sign_method;  /* "RS256", ...; NULL or unknown: refused */
    const uint8_t *pub_key;   /* the pub-key file's bytes */
    size_t pub_key_len;       /* 0: none given */
    const uint8_t *priv_key;  /* the priv-key file's bytes */
    size_t priv_key_len;      /* 0: none given */
    int64_t ttl_ms;           /* a token's life (etcd's default: 5 min) */
};

/* auth_jwt_create: why gets etcd's (golang-jwt's) message on a refusal:
 * "auth: invalid auth signature method", "auth: missing key data" (no key
 * the method can use), "key is not a valid RSA private key" and the like,
 * "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key", "auth:
 * public and private keys don't match" (etcd does not check that; we
 * do), "key is invalid: ES256 needs a P-256 key" (etcd fails each
 * Authenticate then), "key is invalid: a signature by the private key does
 * not verify with its public key" (a private key file whose stored public
 * point is not its own: Go recomputes it, OpenSSL does not; the signer
 * self-tests at create).  Errors: ERR_AUTH_INVALID_OPTS, ERR_NOMEM. */
int auth_jwt_create(const struct auth_jwt_config *cfg, struct auth_jwt **out,
                    char why[AUTH_JWT_WHY_MAX]);
void auth_jwt_destroy(struct auth_jwt *j);
bool auth_jwt_verify_only(const struct auth_jwt *j);
const char *auth_jwt_method(const struct auth_jwt *j); /* "RS256", ... */

/* auth_jwt_sign: the token of user at revision, exp = now_ms + ttl
 * rounded up to whole seconds, so the token lives at least ttl (wall
 * clock, ms since the Unix epoch; etcd rounds down); *token_out freed
 * with mem_free.  Errors: ERR_AUTH_VERIFY_ONLY (public key only), ERR_INVAL
 * (the token would pass AUTH_JWT_TOKEN_MAX), ERR_AUTH_SIGN (libcrypto
 * failed), ERR_NOMEM. */
int auth_jwt_sign(struct auth_jwt *j, const char *user, uint64_t revision,
                  int64_t now_ms, char **token_out);

/* auth_jwt_verify checks token (len bytes, any bytes): three base64url
 * segments, a header with our "alg", a good signature, claims with a
 * string "username" and a numeric "revision", not expired at now_ms
 * (exp, and nbf/iat when present, as golang-jwt checks them).  Copies the
 * user into user_out (cap bytes, NUL-terminated).  Errors:
 * ERR_AUTH_INVALID_TOKEN (anything wrong), ERR_TOO_LARGE (cap),
 * ERR_NOMEM. */
int auth_jwt_verify(struct auth_jwt *j, const char *token, size_t len,
                    int64_t now_ms, char *user_out, size_t cap,
                    uint64_t *revision_out);

/* --- passwords (password.c) ----------------------------------------------
 * bcrypt through libcrypt (crypt_gensalt_rn "$2b$", crypt_r): etcd's
 * golang.org/x/crypto/bcrypt hashes ("$2a$") verify here too. */
#define AUTH_BCRYPT_COST_MIN 4  /* bcrypt.MinCost */
#define AUTH_BCRYPT_COST_MAX 31 /* bcrypt.MaxCost */
#define AUTH_BCRYPT_COST_DEFAULT 10
#define AUTH_HASH_MAX 128

/* auth_password_hash writes the bcrypt hash of password (len bytes) at
 * cost into out (AUTH_HASH_MAX bytes, NUL-terminated).  Errors: ERR_INVAL
 * (cost out of bounds, a password bcrypt cannot take: over 72 bytes is
 * cut as bcrypt does), ERR_IO (no randomness or libcrypt failed). */
int auth_password_hash(const char *password, size_t len, int cost,
                       char out[AUTH_HASH_MAX]);
/* auth_password_check: password matches hash (constant time in libcrypt's
 * compare). */
bool auth_password_check(const char *password, size_t len, const char *hash);

#endif
