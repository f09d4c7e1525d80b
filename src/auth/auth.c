/*
 * auth.c - the auth store (auth.h): users and roles in sorted arrays under
 * one rwlock, etcd's rules for each change, the permission checks (the
 * union of a user's permissions must cover the requested range, as etcd's
 * interval tree Contains), and the records it is stored as.
 */
#include "auth/auth.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "authpb/auth.pb-c.h"
#include "util/check.h"
#include "util/err.h"
#include "util/mem.h"

struct perm {
    enum auth_perm_type type;
    uint8_t *key;
    size_t key_len;
    uint8_t *end;
    size_t end_len;
};

struct user {
    char *name;
    uint8_t *hash;
    size_t hash_len;
    char **roles; /* sorted */
    size_t n_roles;
    bool no_password;
};

struct role {
    char *name;
    struct perm *perms; /* sorted by key */
    size_t n_perms;
};

struct auth_store {
    pthread_rwlock_t mu;
    bool enabled;
    uint64_t revision;
    struct user *users; /* sorted by name */
    size_t n_users, cap_users;
    struct role *roles; /* sorted by name */
    size_t n_roles, cap_roles;
};

/* --- memory -------------------------------------------------------------- */

static void user_free(struct user *u)
{
    for (size_t i = 0; i < u->n_roles; i++)
        mem_free(u->roles[i]);
    mem_free(u->roles);
    mem_free(u->name);
    if (u->hash != NULL)
        memset(u->hash, 0, u->hash_len);
    mem_free(u->hash);
    memset(u, 0, sizeof *u);
}

static void perm_free(struct perm *p)
{
    mem_free(p->key);
    mem_free(p->end);
}

static void role_free(struct role *r)
{
    for (size_t i = 0; i < r->n_perms; i++)
        perm_free(&r->perms[i]);
    mem_free(r->perms);
    mem_free(r->name);
    memset(r, 0, sizeof *r);
}

static char *str_dup(const char *s)
{
    size_t n = strlen(s) + 1;
    return mem_dup(s, n);
}

int auth_store_create(struct auth_store **out)
{
    struct auth_store *as = mem_calloc(1, sizeof *as);
    if (as == NULL)
        return ERR_NOMEM;
    pthread_rwlock_init(&as->mu, NULL);
    as->revision = 1; /* etcd's NewAuthStore commits revision 1 */
    *out = as;
    return 0;
}

static void clear_locked(struct auth_store *as)
{
    for (size_t i = 0; i < as->n_users; i++)
        user_free(&as->users[i]);
    for (size_t i = 0; i < as->n_roles; i++)
        role_free(&as->roles[i]);
    as->n_users = as->n_roles = 0;
    as->enabled = false;
    as->revision = 1;
}

void auth_store_clear(struct auth_store *as)
{
    pthread_rwlock_wrlock(&as->mu);
    clear_locked(as);
    pthread_rwlock_unlock(&as->mu);
}

void auth_store_destroy(struct auth_store *as)
{
    if (as == NULL)
        return;
    clear_locked(as);
    mem_free(as->users);
    mem_free(as->roles);
    pthread_rwlock_destroy(&as->mu);
    mem_free(as);
}

bool auth_store_enabled(struct auth_store *as)
{
    pthread_rwlock_rdlock(&as->mu);
    bool on = as->enabled;
    pthread_rwlock_unlock(&as->mu);
    return on;
}

uint64_t auth_store_revision(struct auth_store *as)
{
    pthread_rwlock_rdlock(&as->mu);
    uint64_t rev = as->revision;
    pthread_rwlock_unlock(&as->mu);
    return rev;
}

/* --- lookups (lock held) -------------------------------------------------- */

/* The index of name in the sorted names of n items of size sz whose first
 * member is the name; *found tells whether it is there. */
static size_t find_name(const void *items, size_t n, size_t sz,
                        const char *name, bool *found)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *at = *(char *const *)((const char *)items + mid * sz);
        int c = strcmp(at, name);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static struct user *user_of(struct auth_store *as, const char *name)
{
    bool found;
    size_t i = find_name(as->users, as->n_users, sizeof *as->users, name,
                         &found);
    return found ? &as->users[i] : NULL;
}

static struct role *role_of(struct auth_store *as, const char *name)
{
    bool found;
    size_t i = find_name(as->roles, as->n_roles, sizeof *as->roles, name,
                         &found);
    return found ? &as->roles[i] : NULL;
}

static bool has_role(const struct user *u, const char *role)
{
    bool found;
    find_name(u->roles, u->n_roles, sizeof *u->roles, role, &found);
    return found;
}

static int bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

/* --- changes -------------------------------------------------------------- */

static bool name_ok(const char *name)
{
    return strlen(name) <= AUTH_NAME_MAX;
}

int auth_enable(struct auth_store *as)
{
    pthread_rwlock_wrlock(&as->mu);
    int rc = 0;
    if (!as->enabled) {
        struct user *root = user_of(as, AUTH_ROOT_USER);
        if (root == NULL)
            rc = ERR_AUTH_ROOT_USER_NOT_EXIST;
        else if (!has_role(root, AUTH_ROOT_ROLE))
            rc = ERR_AUTH_ROOT_ROLE_NOT_EXIST;
        else
            as->enabled = true; /* etcd: no revision bump on enable */
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_disable(struct auth_store *as)
{
    pthread_rwlock_wrlock(&as->mu);
    if (as->enabled) {
        as->enabled = false;
        as->revision++;
    }
    pthread_rwlock_unlock(&as->mu);
    return 0;
}

int auth_user_add(struct auth_store *as, const char *name, const uint8_t *hash,
                  size_t hash_len, bool no_password)
{
    if (name[0] == '\0')
        return ERR_AUTH_USER_EMPTY;
    if (!name_ok(name))
        return ERR_INVAL;
    pthread_rwlock_wrlock(&as->mu);
    bool found;
    size_t i = find_name(as->users, as->n_users, sizeof *as->users, name,
                         &found);
    int rc = 0;
    if (found)
        rc = ERR_AUTH_USER_EXISTS;
    else if (as->n_users >= AUTH_USERS_MAX)
        rc = ERR_TOO_MANY_REQUESTS;
    struct user u = {0};
    if (rc == 0) {
        u.name = str_dup(name);
        u.hash = hash_len ? mem_dup(hash, hash_len) : NULL;
        u.hash_len = hash_len;
        u.no_password = no_password;
        void *grown = mem_grow(as->users, &as->cap_users, as->n_users,
                               sizeof *as->users, 8);
        if (u.name == NULL || (hash_len && u.hash == NULL) || grown == NULL)
            rc = ERR_NOMEM;
        else
            as->users = grown;
    }
    if (rc == 0) {
        memmove(&as->users[i + 1], &as->users[i],
                (as->n_users - i) * sizeof *as->users);
        as->users[i] = u;
        as->n_users++;
        as->revision++;
    } else {
        user_free(&u);
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_user_delete(struct auth_store *as, const char *name)
{
    pthread_rwlock_wrlock(&as->mu);
    int rc = 0;
    bool found;
    size_t i = find_name(as->users, as->n_users, sizeof *as->users, name,
                         &found);
    if (as->enabled && strcmp(name, AUTH_ROOT_USER) == 0)
        rc = ERR_AUTH_INVALID_MGMT;
    else if (!found)
        rc = ERR_AUTH_USER_NOT_FOUND;
    if (rc == 0) {
        user_free(&as->users[i]);
        memmove(&as->users[i], &as->users[i + 1],
                (as->n_users - i - 1) * sizeof *as->users);
        as->n_users--;
        as->revision++;
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_user_password(struct auth_store *as, const char *name,
                       const uint8_t *hash, size_t hash_len)
{
    uint8_t *copy = hash_len ? mem_dup(hash, hash_len) : NULL;
    if (hash_len && copy == NULL)
        return ERR_NOMEM;
    pthread_rwlock_wrlock(&as->mu);
    struct user *u = user_of(as, name);
    int rc = u == NULL ? ERR_AUTH_USER_NOT_FOUND : 0;
    if (rc == 0) {
        if (u->hash != NULL)
            memset(u->hash, 0, u->hash_len);
        mem_free(u->hash);
        u->hash = copy;
        u->hash_len = hash_len;
        copy = NULL;
        as->revision++;
    }
    pthread_rwlock_unlock(&as->mu);
    mem_free(copy);
    return rc;
}

/* Inserts role into u's sorted roles (not there yet). */
static int roles_insert(struct user *u, const char *role)
{
    bool found;
    size_t i = find_name(u->roles, u->n_roles, sizeof *u->roles, role, &found);
    CHECK(!found);
    char *dup = str_dup(role);
    char **grown = mem_realloc(u->roles, (u->n_roles + 1) * sizeof *u->roles);
    if (dup == NULL || grown == NULL) {
        mem_free(dup);
        if (grown != NULL)
            u->roles = grown;
        return ERR_NOMEM;
    }
    u->roles = grown;
    memmove(&u->roles[i + 1], &u->roles[i],
            (u->n_roles - i) * sizeof *u->roles);
    u->roles[i] = dup;
    u->n_roles++;
    return 0;
}

static bool roles_remove(struct user *u, const char *role)
{
    bool found;
    size_t i = find_name(u->roles, u->n_roles, sizeof *u->roles, role, &found);
    if (!found)
        return false;
    mem_free(u->roles[i]);
    memmove(&u->roles[i], &u->roles[i + 1],
            (u->n_roles - i - 1) * sizeof *u->roles);
    u->n_roles--;
    return true;
}

int auth_user_grant(struct auth_store *as, const char *user, const char *role)
{
    pthread_rwlock_wrlock(&as->mu);
    struct user *u = user_of(as, user);
    int rc = 0;
    if (u == NULL)
        rc = ERR_AUTH_USER_NOT_FOUND;
    else if (strcmp(role, AUTH_ROOT_ROLE) != 0 && role_of(as, role) == NULL)
        rc = ERR_AUTH_ROLE_NOT_FOUND;
    else if (!has_role(u, role)) { /* granted again: etcd ignores it */
        if (u->n_roles >= AUTH_ROLES_MAX)
            rc = ERR_TOO_MANY_REQUESTS;
        else
            rc = roles_insert(u, role);
        if (rc == 0)
            as->revision++;
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_user_revoke(struct auth_store *as, const char *user, const char *role)
{
    pthread_rwlock_wrlock(&as->mu);
    int rc = 0;
    struct user *u = user_of(as, user);
    if (as->enabled && strcmp(user, AUTH_ROOT_USER) == 0 &&
        strcmp(role, AUTH_ROOT_ROLE) == 0)
        rc = ERR_AUTH_INVALID_MGMT;
    else if (u == NULL)
        rc = ERR_AUTH_USER_NOT_FOUND;
    else if (!roles_remove(u, role))
        rc = ERR_AUTH_ROLE_NOT_GRANTED;
    else
        as->revision++;
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_role_add(struct auth_store *as, const char *name)
{
    if (name[0] == '\0')
        return ERR_AUTH_ROLE_EMPTY;
    if (!name_ok(name))
        return ERR_INVAL;
    pthread_rwlock_wrlock(&as->mu);
    bool found;
    size_t i = find_name(as->roles, as->n_roles, sizeof *as->roles, name,
                         &found);
    int rc = 0;
    if (found)
        rc = ERR_AUTH_ROLE_EXISTS;
    else if (as->n_roles >= AUTH_ROLES_MAX)
        rc = ERR_TOO_MANY_REQUESTS;
    char *dup = NULL;
    if (rc == 0) {
        dup = str_dup(name);
        void *grown = mem_grow(as->roles, &as->cap_roles, as->n_roles,
                               sizeof *as->roles, 8);
        if (dup == NULL || grown == NULL)
            rc = ERR_NOMEM;
        else
            as->roles = grown;
    }
    if (rc == 0) {
        memmove(&as->roles[i + 1], &as->roles[i],
                (as->n_roles - i) * sizeof *as->roles);
        as->roles[i] = (struct role){.name = dup};
        as->n_roles++;
        as->revision++;
    } else {
        mem_free(dup);
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_role_delete(struct auth_store *as, const char *name)
{
    pthread_rwlock_wrlock(&as->mu);
    int rc = 0;
    bool found;
    size_t i = find_name(as->roles, as->n_roles, sizeof *as->roles, name,
                         &found);
    if (as->enabled && strcmp(name, AUTH_ROOT_ROLE) == 0)
        rc = ERR_AUTH_INVALID_MGMT;
    else if (!found)
        rc = ERR_AUTH_ROLE_NOT_FOUND;
    if (rc == 0) {
        role_free(&as->roles[i]);
        memmove(&as->roles[i], &as->roles[i + 1],
                (as->n_roles - i - 1) * sizeof *as->roles);
        as->n_roles--;
        for (size_t k = 0; k < as->n_users; k++)
            roles_remove(&as->users[k], name);
        as->revision++;
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

static bool perm_same_range(const struct perm *p, const uint8_t *key,
                            size_t key_len, const uint8_t *end,
                            size_t end_len)
{
    return bytes_cmp(p->key, p->key_len, key, key_len) == 0 &&
           bytes_cmp(p->end, p->end_len, end, end_len) == 0;
}

int auth_role_grant(struct auth_store *as, const char *role,
                    const struct auth_perm *p)
{
    if (p->type > AUTH_READWRITE)
        return ERR_INVAL;
    pthread_rwlock_wrlock(&as->mu);
    struct role *r = role_of(as, role);
    int rc = r == NULL ? ERR_AUTH_ROLE_NOT_FOUND : 0;
    size_t at = 0;
    bool same = false;
    if (rc == 0) {
        /* etcd: the first permission whose key is >= the new one's. */
        while (at < r->n_perms &&
               bytes_cmp(r->perms[at].key, r->perms[at].key_len, p->key,
                         p->key_len) < 0)
            at++;
        same = at < r->n_perms &&
               perm_same_range(&r->perms[at], p->key, p->key_len, p->end,
                               p->end_len);
        if (same)
            r->perms[at].type = p->type;
        else if (r->n_perms >= AUTH_PERMS_MAX)
            rc = ERR_TOO_MANY_REQUESTS;
    }
    if (rc == 0 && !same) {
        struct perm np = {.type = p->type, .key_len = p->key_len,
                          .end_len = p->end_len};
        np.key = p->key_len ? mem_dup(p->key, p->key_len) : NULL;
        np.end = p->end_len ? mem_dup(p->end, p->end_len) : NULL;
        struct perm *grown =
            mem_realloc(r->perms, (r->n_perms + 1) * sizeof *r->perms);
        if ((p->key_len && np.key == NULL) || (p->end_len && np.end == NULL) ||
            grown == NULL) {
            perm_free(&np);
            if (grown != NULL)
                r->perms = grown;
            rc = ERR_NOMEM;
        } else {
            r->perms = grown;
            /* after the permissions with the same key (stable order) */
            while (at < r->n_perms &&
                   bytes_cmp(r->perms[at].key, r->perms[at].key_len, p->key,
                             p->key_len) == 0)
                at++;
            memmove(&r->perms[at + 1], &r->perms[at],
                    (r->n_perms - at) * sizeof *r->perms);
            r->perms[at] = np;
            r->n_perms++;
        }
    }
    if (rc == 0)
        as->revision++;
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_role_revoke(struct auth_store *as, const char *role,
                     const uint8_t *key, size_t key_len, const uint8_t *end,
                     size_t end_len)
{
    pthread_rwlock_wrlock(&as->mu);
    struct role *r = role_of(as, role);
    int rc = r == NULL ? ERR_AUTH_ROLE_NOT_FOUND : 0;
    if (rc == 0) {
        size_t kept = 0;
        for (size_t i = 0; i < r->n_perms; i++) {
            if (perm_same_range(&r->perms[i], key, key_len, end, end_len))
                perm_free(&r->perms[i]);
            else
                r->perms[kept++] = r->perms[i];
        }
        if (kept == r->n_perms)
            rc = ERR_AUTH_PERMISSION_NOT_GRANTED;
        else
            as->revision++;
        r->n_perms = kept;
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

/* --- reads ---------------------------------------------------------------- */

int auth_user_hash(struct auth_store *as, const char *name, char *buf,
                   size_t cap, bool *no_password_out)
{
    pthread_rwlock_rdlock(&as->mu);
    struct user *u = user_of(as, name);
    int rc = u == NULL ? ERR_AUTH_USER_NOT_FOUND : 0;
    if (rc == 0 && u->hash_len >= cap)
        rc = ERR_TOO_LARGE;
    if (rc == 0) {
        if (u->hash_len)
            memcpy(buf, u->hash, u->hash_len);
        buf[u->hash_len] = '\0';
        *no_password_out = u->no_password;
    }
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_user_roles(struct auth_store *as, const char *name,
                    void (*fn)(void *ctx, const char *role), void *ctx)
{
    pthread_rwlock_rdlock(&as->mu);
    struct user *u = user_of(as, name);
    if (u != NULL)
        for (size_t i = 0; i < u->n_roles; i++)
            fn(ctx, u->roles[i]);
    pthread_rwlock_unlock(&as->mu);
    return u == NULL ? ERR_AUTH_USER_NOT_FOUND : 0;
}

void auth_users(struct auth_store *as, void (*fn)(void *ctx, const char *name),
                void *ctx)
{
    pthread_rwlock_rdlock(&as->mu);
    for (size_t i = 0; i < as->n_users; i++)
        fn(ctx, as->users[i].name);
    pthread_rwlock_unlock(&as->mu);
}

void auth_roles(struct auth_store *as, void (*fn)(void *ctx, const char *name),
                void *ctx)
{
    pthread_rwlock_rdlock(&as->mu);
    for (size_t i = 0; i < as->n_roles; i++)
        fn(ctx, as->roles[i].name);
    pthread_rwlock_unlock(&as->mu);
}

static struct auth_perm perm_view(const struct perm *p)
{
    return (struct auth_perm){p->type, p->key, p->key_len, p->end,
                              p->end_len};
}

int auth_role_perms(struct auth_store *as, const char *role,
                    void (*fn)(void *ctx, const struct auth_perm *p),
                    void *ctx)
{
    pthread_rwlock_rdlock(&as->mu);
    struct role *r = role_of(as, role);
    if (r != NULL)
        for (size_t i = 0; i < r->n_perms; i++) {
            struct auth_perm v = perm_view(&r->perms[i]);
            fn(ctx, &v);
        }
    pthread_rwlock_unlock(&as->mu);
    return r == NULL ? ERR_AUTH_ROLE_NOT_FOUND : 0;
}

bool auth_user_has_role(struct auth_store *as, const char *user,
                        const char *role)
{
    pthread_rwlock_rdlock(&as->mu);
    struct user *u = user_of(as, user);
    bool has = u != NULL && has_role(u, role);
    pthread_rwlock_unlock(&as->mu);
    return has;
}

/* --- checks --------------------------------------------------------------- */

/* A bound of an interval: empty is +infinity (etcd's BytesAffineComparable:
 * a range end "\0" and a missing end both become empty). */
struct bound {
    const uint8_t *b;
    size_t n;
};

static int bound_cmp(struct bound x, struct bound y)
{
    if (x.n == 0)
        return y.n == 0 ? 0 : 1;
    if (y.n == 0)
        return -1;
    return bytes_cmp(x.b, x.n, y.b, y.n);
}

/* One permission as an interval; a lone key is [key, key "\0") (own holds
 * that end). */
struct span {
    struct bound b, e;
    uint8_t *own;
};

static void spans_free(struct span *sp, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mem_free(sp[i].own);
    mem_free(sp);
}

/* The user's permissions of type (READWRITE counts for both) as spans. */
static int spans_of(struct auth_store *as, const struct user *u,
                    enum auth_perm_type type, struct span **out, size_t *n_out)
{
    size_t n = 0, cap = 0;
    struct span *sp = NULL;
    for (size_t i = 0; i < u->n_roles; i++) {
        struct role *r = role_of(as, u->roles[i]);
        for (size_t k = 0; r != NULL && k < r->n_perms; k++) {
            const struct perm *p = &r->perms[k];
            if (p->type != AUTH_READWRITE && p->type != type)
                continue;
            struct span *grown = mem_grow(sp, &cap, n, sizeof *sp, 8);
            if (grown == NULL) {
                spans_free(sp, n);
                return ERR_NOMEM;
            }
            sp = grown;
            struct span s = {.b = {p->key, p->key_len}};
            if (p->end_len == 0) {
                s.own = mem_malloc(p->key_len + 1);
                if (s.own == NULL) {
                    spans_free(sp, n);
                    return ERR_NOMEM;
                }
                if (p->key_len)
                    memcpy(s.own, p->key, p->key_len);
                s.own[p->key_len] = 0;
                s.e = (struct bound){s.own, p->key_len + 1};
            } else if (p->end_len == 1 && p->end[0] == 0) {
                s.e = (struct bound){NULL, 0};
            } else {
                s.e = (struct bound){p->end, p->end_len};
            }
            sp[n++] = s;
        }
    }
    *out = sp;
    *n_out = n;
    return 0;
}

/* covered: does the union of the spans cover [begin, end)?  From begin,
 * take the furthest end of the spans that start at or before the point
 * reached and end past it, until end (etcd's interval tree Contains). */
static bool covered(const struct span *sp, size_t n, struct bound begin,
                    struct bound end)
{
    struct bound at = begin;
    while (bound_cmp(at, end) < 0) {
        struct bound best = at;
        for (size_t i = 0; i < n; i++)
            if (bound_cmp(sp[i].b, at) <= 0 && bound_cmp(sp[i].e, best) > 0)
                best = sp[i].e;
        if (bound_cmp(best, at) == 0)
            return false;
        at = best;
    }
    return true;
}

int auth_check_range(struct auth_store *as, const char *user,
                     uint64_t revision, const uint8_t *key, size_t key_len,
                     const uint8_t *end, size_t end_len,
                     enum auth_perm_type type)
{
    pthread_rwlock_rdlock(&as->mu);
    int rc = 0;
    if (!as->enabled)
        goto out;
    /* etcd's isOpPermitted: only revision 0 means "no user given"; the
     * user "" at a revision (a client certificate with an empty CN) is
     * looked up and not found: permission denied. */
    if (revision == 0) {
        rc = ERR_AUTH_USER_EMPTY;
        goto out;
    }
    if (revision < as->revision) {
        rc = ERR_AUTH_OLD_REVISION;
        goto out;
    }
    struct user *u = user_of(as, user != NULL ? user : "");
    if (u == NULL) {
        rc = ERR_AUTH_PERMISSION_DENIED;
        goto out;
    }
    if (has_role(u, AUTH_ROOT_ROLE))
        goto out;
    struct span *sp;
    size_t n;
    rc = spans_of(as, u, type, &sp, &n);
    if (rc != 0)
        goto out;
    bool ok;
    /* "" is below every key: as a begin it is "\0", the smallest key a
     * store holds.  Read as a bound it would be +infinity, the range
     * [+inf, end) empty and so permitted: any user could watch every key
     * (key "", range_end "\0"), which etcd 3.4.23 refuses
     * (test_auth.py test_watch_empty_key). */
    static const uint8_t lowest[1] = {0};
    if (key_len == 0) {
        key = lowest;
        key_len = 1;
    }
    struct bound b = {key, key_len};
    bool from_key = end_len == 1 && end[0] == 0;
    /* An empty or inverted range [key, end) with end <= key holds no key.
     * etcd's interval tree visits the permissions that hold key itself,
     * so it permits such a range when the key alone is permitted; with
     * several permissions its answer also depends on the tree's shape
     * (its pruning assumes begin < end), which is no contract: we take
     * the key alone.  (Before, any user passed: the auth differential
     * test found it.) */
    if (end_len != 0 && !from_key &&
        bound_cmp(b, (struct bound){end, end_len}) >= 0)
        end_len = 0;
    if (end_len == 0) {
        /* a point: [key, key "\0") */
        uint8_t *pt = mem_malloc(key_len + 1);
        if (pt == NULL) {
            spans_free(sp, n);
            rc = ERR_NOMEM;
            goto out;
        }
        if (key_len)
            memcpy(pt, key, key_len);
        pt[key_len] = 0;
        ok = covered(sp, n, b, (struct bound){pt, key_len + 1});
        mem_free(pt);
    } else if (from_key) {
        ok = covered(sp, n, b, (struct bound){NULL, 0});
    } else {
        ok = covered(sp, n, b, (struct bound){end, end_len});
    }
    spans_free(sp, n);
    if (!ok)
        rc = ERR_AUTH_PERMISSION_DENIED;
out:
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

int auth_check_admin(struct auth_store *as, const char *user)
{
    pthread_rwlock_rdlock(&as->mu);
    int rc = 0;
    if (!as->enabled)
        goto out;
    if (user == NULL || user[0] == '\0') {
        rc = ERR_AUTH_USER_EMPTY;
        goto out;
    }
    struct user *u = user_of(as, user);
    if (u == NULL)
        rc = ERR_AUTH_USER_NOT_FOUND;
    else if (!has_role(u, AUTH_ROOT_ROLE))
        rc = ERR_AUTH_PERMISSION_DENIED;
out:
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

/* --- records -------------------------------------------------------------- */

static int each_user(struct user *u,
                     int (*fn)(void *, const void *, size_t, const void *,
                               size_t),
                     void *ctx)
{
    Authpb__User m = AUTHPB__USER__INIT;
    Authpb__UserAddOptions o = AUTHPB__USER_ADD_OPTIONS__INIT;
    m.name = (ProtobufCBinaryData){strlen(u->name), (uint8_t *)u->name};
    m.password = (ProtobufCBinaryData){u->hash_len, u->hash};
    m.roles = u->roles;
    m.n_roles = u->n_roles;
    o.no_password = u->no_password;
    m.options = &o;
    size_t klen = 5 + strlen(u->name);
    size_t vlen = authpb__user__get_packed_size(&m);
    char *key = mem_malloc(klen + 1);
    uint8_t *val = mem_malloc(vlen ? vlen : 1);
    int rc = key && val ? 0 : ERR_NOMEM;
    if (rc == 0) {
        memcpy(key, "user/", 5);
        memcpy(key + 5, u->name, klen - 5);
        authpb__user__pack(&m, val);
        rc = fn(ctx, key, klen, val, vlen);
        memset(val, 0, vlen); /* it held the hash */
    }
    mem_free(key);
    mem_free(val);
    return rc;
}

static int each_role(struct role *r,
                     int (*fn)(void *, const void *, size_t, const void *,
                               size_t),
                     void *ctx)
{
    Authpb__Role m = AUTHPB__ROLE__INIT;
    m.name = (ProtobufCBinaryData){strlen(r->name), (uint8_t *)r->name};
    Authpb__Permission *ps = mem_calloc(r->n_perms + 1, sizeof *ps);
    Authpb__Permission **pp = mem_calloc(r->n_perms + 1, sizeof *pp);
    int rc = ps && pp ? 0 : ERR_NOMEM;
    for (size_t i = 0; rc == 0 && i < r->n_perms; i++) {
        authpb__permission__init(&ps[i]);
        ps[i].permtype = (Authpb__Permission__Type)r->perms[i].type;
        ps[i].key = (ProtobufCBinaryData){r->perms[i].key_len,
                                          r->perms[i].key};
        ps[i].range_end = (ProtobufCBinaryData){r->perms[i].end_len,
                                                r->perms[i].end};
        pp[i] = &ps[i];
    }
    m.keypermission = pp;
    m.n_keypermission = r->n_perms;
    size_t klen = 5 + strlen(r->name);
    size_t vlen = rc == 0 ? authpb__role__get_packed_size(&m) : 0;
    char *key = rc == 0 ? mem_malloc(klen + 1) : NULL;
    uint8_t *val = rc == 0 ? mem_malloc(vlen ? vlen : 1) : NULL;
    if (rc == 0 && (key == NULL || val == NULL))
        rc = ERR_NOMEM;
    if (rc == 0) {
        memcpy(key, "role/", 5);
        memcpy(key + 5, r->name, klen - 5);
        authpb__role__pack(&m, val);
        rc = fn(ctx, key, klen, val, vlen);
    }
    mem_free(key);
    mem_free(val);
    mem_free(ps);
    mem_free(pp);
    return rc;
}

int auth_store_each(struct auth_store *as,
                    int (*fn)(void *ctx, const void *key, size_t key_len,
                              const void *val, size_t val_len),
                    void *ctx)
{
    pthread_rwlock_rdlock(&as->mu);
    uint8_t en = as->enabled ? 1 : 0;
    uint8_t rev[8];
    for (int i = 0; i < 8; i++)
        rev[i] = (uint8_t)(as->revision >> (56 - 8 * i));
    int rc = fn(ctx, "enabled", 7, &en, 1);
    if (rc == 0)
        rc = fn(ctx, "revision", 8, rev, 8);
    for (size_t i = 0; rc == 0 && i < as->n_users; i++)
        rc = each_user(&as->users[i], fn, ctx);
    for (size_t i = 0; rc == 0 && i < as->n_roles; i++)
        rc = each_role(&as->roles[i], fn, ctx);
    pthread_rwlock_unlock(&as->mu);
    return rc;
}

/* A name from a record: bytes without NUL, at most AUTH_NAME_MAX. */
static char *name_dup(const uint8_t *b, size_t n)
{
    if (n == 0 || n > AUTH_NAME_MAX || memchr(b, 0, n) != NULL)
        return NULL;
    char *s = mem_malloc(n + 1);
    if (s != NULL) {
        memcpy(s, b, n);
        s[n] = '\0';
    }
    return s;
}

static int load_user(struct auth_store *as, const void *val, size_t len)
{
    Authpb__User *m = authpb__user__unpack(NULL, len, val);
    if (m == NULL)
        return ERR_CORRUPT;
    char *name = name_dup(m->name.data, m->name.len);
    int rc = name == NULL ? ERR_CORRUPT : 0;
    if (rc == 0)
        rc = auth_user_add(as, name, m->password.data, m->password.len,
                           m->options != NULL && m->options->no_password);
    for (size_t i = 0; rc == 0 && i < m->n_roles; i++) {
        pthread_rwlock_wrlock(&as->mu);
        struct user *u = user_of(as, name);
        rc = strlen(m->roles[i]) > AUTH_NAME_MAX ? ERR_CORRUPT
             : has_role(u, m->roles[i])           ? 0
                                                  : roles_insert(u, m->roles[i]);
        pthread_rwlock_unlock(&as->mu);
    }
    if (m->password.len)
        memset(m->password.data, 0, m->password.len);
    authpb__user__free_unpacked(m, NULL);
    mem_free(name);
    return rc;
}

static int load_role(struct auth_store *as, const void *val, size_t len)
{
    Authpb__Role *m = authpb__role__unpack(NULL, len, val);
    if (m == NULL)
        return ERR_CORRUPT;
    char *name = name_dup(m->name.data, m->name.len);
    int rc = name == NULL ? ERR_CORRUPT : auth_role_add(as, name);
    for (size_t i = 0; rc == 0 && i < m->n_keypermission; i++) {
        const Authpb__Permission *p = m->keypermission[i];
        struct auth_perm ap = {(enum auth_perm_type)p->permtype, p->key.data,
                               p->key.len, p->range_end.data,
                               p->range_end.len};
        rc = auth_role_grant(as, name, &ap);
        if (rc == ERR_INVAL)
            rc = ERR_CORRUPT;
    }
    authpb__role__free_unpacked(m, NULL);
    mem_free(name);
    return rc;
}

int auth_store_load(struct auth_store *as, const void *key, size_t key_len,
                    const void *val, size_t val_len)
{
    const uint8_t *v = val;
    if (key_len == 7 && memcmp(key, "enabled", 7) == 0) {
        if (val_len != 1 || v[0] > 1)
            return ERR_CORRUPT;
        pthread_rwlock_wrlock(&as->mu);
        as->enabled = v[0] == 1;
        pthread_rwlock_unlock(&as->mu);
        return 0;
    }
    if (key_len == 8 && memcmp(key, "revision", 8) == 0) {
        if (val_len != 8)
            return ERR_CORRUPT;
        uint64_t rev = 0;
        for (int i = 0; i < 8; i++)
            rev = rev << 8 | v[i];
        pthread_rwlock_wrlock(&as->mu);
        as->revision = rev != 0 ? rev : 1; /* etcd: 0 is committed as 1 */
        pthread_rwlock_unlock(&as->mu);
        return 0;
    }
    /* loading is no change: the stored revision stays */
    uint64_t rev = auth_store_revision(as);
    int rc = ERR_CORRUPT;
    if (key_len > 5 && memcmp(key, "user/", 5) == 0)
        rc = load_user(as, val, val_len);
    else if (key_len > 5 && memcmp(key, "role/", 5) == 0)
        rc = load_role(as, val, val_len);
    pthread_rwlock_wrlock(&as->mu);
    as->revision = rev;
    pthread_rwlock_unlock(&as->mu);
    return rc;
}
