/*
 * ctl_role.c - "role": add, delete, get, list, grant-permission and
 * revoke-permission, as etcdctl 3.4.23's role commands answer them, and
 * the display of a role that "user get --detail" shares.
 *
 * Every sub-command checks its arguments, then builds the client (which
 * validates --write-out), makes its one call and prints the answer in the
 * chosen format: the simple texts below, json and protobuf of the
 * response, fields for what etcdctl's fields printer covers; anything else
 * is "<format> not supported as output format" after the call, as etcdctl
 * finds out only when it prints.
 *
 * Improvement over etcdctl: etcdctl makes these calls without a deadline
 * (context.TODO()), so against an endpoint that does not answer it waits
 * forever; cetcdctl gives them --command-timeout (ctl_call) and exits with
 * "context deadline exceeded" as etcdctl's other commands do.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

/* --prefix and --from-key, shared by grant-permission and
 * revoke-permission (etcdctl shares its variables too). */
static bool perm_prefix, perm_from_key;

/* The key range a permission covers: key, and range_end ("" = the key
 * alone, "\0" = open ended).  They point into the arguments, static
 * bytes or owned. */
struct perm_range {
    ProtobufCBinaryData key;       /* the first key */
    ProtobufCBinaryData range_end; /* the end, or empty */
    uint8_t *owned;                /* a computed prefix end (free it) */
};

/* ------------------------------------------------------------------------
 * The simple printer of a role
 * ---------------------------------------------------------------------- */

/* prefix_end returns clientv3.GetPrefixRangeEnd(key) (malloc'd, the
 * caller frees data): the key with its last byte below 0xff incremented
 * and the rest cut, or "\0" when every byte is 0xff (no end: open
 * ended). */
static ProtobufCBinaryData prefix_end(ProtobufCBinaryData key)
{
    ProtobufCBinaryData end = {1, malloc(key.len + 1)};
    if (!end.data)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    end.data[0] = 0;
    for (size_t i = key.len; i-- > 0;) {
        if (key.data[i] < 0xff) {
            memcpy(end.data, key.data, i);
            end.data[i] = (uint8_t)(key.data[i] + 1);
            end.len = i + 1;
            break;
        }
    }
    assert(end.len >= 1 && end.len <= key.len + 1);
    return end;
}

static bool bytes_equal(ProtobufCBinaryData a, const void *b, size_t n)
{
    return a.len == n && (n == 0 || memcmp(a.data, b, n) == 0);
}

/* print_perm_range prints one permission line of "role get". */
static void print_perm_range(const Authpb__Permission *p)
{
    putchar('\t');
    if (p->range_end.len == 0) {
        fwrite(p->key.data, 1, p->key.len, stdout);
        putchar('\n');
        return;
    }
    putchar('[');
    fwrite(p->key.data, 1, p->key.len, stdout);
    if (bytes_equal(p->range_end, "", 1)) {
        fputs(", <open ended>", stdout);
    } else {
        fputs(", ", stdout);
        fwrite(p->range_end.data, 1, p->range_end.len, stdout);
        putchar(')');
    }
    ProtobufCBinaryData end = prefix_end(p->key);
    if (bytes_equal(p->range_end, end.data, end.len)) {
        fputs(" (prefix ", stdout);
        fwrite(p->key.data, 1, p->key.len, stdout);
        putchar(')');
    }
    free(end.data);
    putchar('\n');
}

static void role_get_simple(const char *role,
                            const Etcdserverpb__AuthRoleGetResponse *r)
{
    printf("Role %s\nKV Read:\n", role);
    for (size_t i = 0; i < r->n_perm; i++)
        if (r->perm[i]->permtype != AUTHPB__PERMISSION__TYPE__WRITE)
            print_perm_range(r->perm[i]);
    printf("KV Write:\n");
    for (size_t i = 0; i < r->n_perm; i++)
        if (r->perm[i]->permtype != AUTHPB__PERMISSION__TYPE__READ)
            print_perm_range(r->perm[i]);
}

void ctl_role_get_display(enum ctl_output out, const char *role,
                          const struct Etcdserverpb__AuthRoleGetResponse *r)
{
    assert(role && r);
    if (ctl_auth_display(out, &r->base, true))
        return;
    if (out == CTL_OUT_FIELDS)
        ctl_fields_role_get(stdout, r);
    else
        role_get_simple(role, r);
}

/* ------------------------------------------------------------------------
 * add, delete, get, list
 * ---------------------------------------------------------------------- */

/* need_args exits with etcdctl's message unless argc is n. */
static void need_args(int argc, int n, const char *msg)
{
    if (argc != n)
        ctl_exit(CTL_EXIT_BAD_ARGS, "%s", msg);
}

/* header_display prints a response that says nothing but its header:
 * the simple line (fmt with the role name), or the header in fields. */
static void header_display(enum ctl_output out, const ProtobufCMessage *m,
                           const Etcdserverpb__ResponseHeader *h,
                           const char *fmt, const char *role)
{
    if (ctl_auth_display(out, m, true))
        return;
    if (out == CTL_OUT_FIELDS)
        ctl_fields_hdr(stdout, h);
    else
        printf(fmt, role);
}

static int add_run(int argc, char **argv)
{
    need_args(argc, 1, "role add command requires role name as its "
                       "argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthRoleAddRequest req =
        ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT;
    req.name = argv[0];
    Etcdserverpb__AuthRoleAddResponse *r =
        (Etcdserverpb__AuthRoleAddResponse *)ctl_call(
            "/etcdserverpb.Auth/RoleAdd", &req.base,
            &etcdserverpb__auth_role_add_response__descriptor);
    header_display(out, &r->base, r->header, "Role %s created\n", argv[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static int delete_run(int argc, char **argv)
{
    need_args(argc, 1, "role delete command requires role name as its "
                       "argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthRoleDeleteRequest req =
        ETCDSERVERPB__AUTH_ROLE_DELETE_REQUEST__INIT;
    req.role = argv[0];
    Etcdserverpb__AuthRoleDeleteResponse *r =
        (Etcdserverpb__AuthRoleDeleteResponse *)ctl_call(
            "/etcdserverpb.Auth/RoleDelete", &req.base,
            &etcdserverpb__auth_role_delete_response__descriptor);
    header_display(out, &r->base, r->header, "Role %s deleted\n", argv[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

struct Etcdserverpb__AuthRoleGetResponse *ctl_role_get_call(const char *role)
{
    Etcdserverpb__AuthRoleGetRequest req =
        ETCDSERVERPB__AUTH_ROLE_GET_REQUEST__INIT;
    req.role = (char *)role;
    return (Etcdserverpb__AuthRoleGetResponse *)ctl_call(
        "/etcdserverpb.Auth/RoleGet", &req.base,
        &etcdserverpb__auth_role_get_response__descriptor);
}

static int get_run(int argc, char **argv)
{
    need_args(argc, 1, "role get command requires role name as its "
                       "argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthRoleGetResponse *r = ctl_role_get_call(argv[0]);
    ctl_role_get_display(out, argv[0], r);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static int list_run(int argc, char **argv)
{
    (void)argv;
    need_args(argc, 0, "role list command requires no arguments");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthRoleListRequest req =
        ETCDSERVERPB__AUTH_ROLE_LIST_REQUEST__INIT;
    Etcdserverpb__AuthRoleListResponse *r =
        (Etcdserverpb__AuthRoleListResponse *)ctl_call(
            "/etcdserverpb.Auth/RoleList", &req.base,
            &etcdserverpb__auth_role_list_response__descriptor);
    if (!ctl_auth_display(out, &r->base, true)) {
        if (out == CTL_OUT_FIELDS)
            ctl_fields_role_list(stdout, r);
        for (size_t i = 0; out == CTL_OUT_SIMPLE && i < r->n_roles; i++)
            printf("%s\n", r->roles[i]);
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * grant-permission, revoke-permission
 * ---------------------------------------------------------------------- */

/* perm_type parses etcdctl's permission type: any case, as Go's
 * strings.ToUpper (which also upper-cases "ı", U+0131, to "I"). */
static Authpb__Permission__Type perm_type(const char *s)
{
    static const char *const names[] = {"READ", "WRITE", "READWRITE"};
    char up[16];
    size_t n = 0;
    const char *p = s;
    for (; *p && n + 1 < sizeof up; p++, n++) {
        if ((unsigned char)p[0] == 0xc4 && (unsigned char)p[1] == 0xb1)
            up[n] = 'I', p++;
        else
            up[n] = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    }
    up[n] = '\0';
    for (int t = 0; t < 3 && *p == '\0'; t++)
        if (strcmp(up, names[t]) == 0)
            return (Authpb__Permission__Type)t;
    ctl_exit(CTL_EXIT_BAD_ARGS, "invalid permission type: %s", s);
}

/* range_end_from_flags: the end for a non-empty key given alone (args
 * holds the key) or with an end key (two or more arguments; the rest are
 * ignored, as by etcdctl).  A prefix end goes to r->owned. */
static void range_end_from_flags(int argc, char **argv, struct perm_range *r)
{
    if (argc >= 2) {
        if (perm_prefix)
            ctl_exit(CTL_EXIT_BAD_ARGS,
                     "unexpected endkey argument with --prefix flag");
        if (perm_from_key)
            ctl_exit(CTL_EXIT_BAD_ARGS,
                     "unexpected endkey argument with --from-key flag");
        r->range_end.data = (uint8_t *)argv[1];
        r->range_end.len = strlen(argv[1]);
        return;
    }
    if (perm_prefix && perm_from_key)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "--from-key and --prefix flags are mutually exclusive");
    if (perm_prefix) {
        r->range_end = prefix_end(r->key);
        r->owned = r->range_end.data;
    } else if (perm_from_key) {
        r->range_end.len = 1, r->range_end.data = (uint8_t *)"";
    }
}

/* perm_range computes the range of args (key [endkey]) as etcdctl's
 * permRange: an empty key is "\0" (the smallest key), whose end is open
 * with --prefix or --from-key and which ignores an end key. */
static struct perm_range perm_range(int argc, char **argv)
{
    assert(argc >= 1);
    struct perm_range r = {{strlen(argv[0]), (uint8_t *)argv[0]},
                           {0, NULL},
                           NULL};
    if (r.key.len == 0) {
        if (perm_prefix && perm_from_key)
            ctl_exit(CTL_EXIT_BAD_ARGS,
                     "--from-key and --prefix flags are mutually exclusive");
        r.key.len = 1, r.key.data = (uint8_t *)"";
        if (perm_prefix || perm_from_key)
            r.range_end.len = 1, r.range_end.data = (uint8_t *)"";
        return r;
    }
    range_end_from_flags(argc, argv, &r);
    assert(r.key.len > 0);
    return r;
}

static int grant_run(int argc, char **argv)
{
    if (argc < 3)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "role grant command requires role name, permission type, "
                 "and key [endkey] as its argument");
    Authpb__Permission perm = AUTHPB__PERMISSION__INIT;
    perm.permtype = perm_type(argv[1]);
    struct perm_range pr = perm_range(argc - 2, argv + 2);
    perm.key = pr.key;
    perm.range_end = pr.range_end;
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthRoleGrantPermissionRequest req =
        ETCDSERVERPB__AUTH_ROLE_GRANT_PERMISSION_REQUEST__INIT;
    req.name = argv[0];
    req.perm = &perm;
    Etcdserverpb__AuthRoleGrantPermissionResponse *r =
        (Etcdserverpb__AuthRoleGrantPermissionResponse *)ctl_call(
            "/etcdserverpb.Auth/RoleGrantPermission", &req.base,
            &etcdserverpb__auth_role_grant_permission_response__descriptor);
    header_display(out, &r->base, r->header, "Role %s updated\n", argv[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    free(pr.owned);
    return CTL_EXIT_SUCCESS;
}

/* revoke_simple prints etcdctl's line, naming the key as given (an empty
 * key stays empty) and the end it computed. */
static void revoke_simple(const char *role, const char *key,
                          ProtobufCBinaryData end)
{
    if (end.len == 0) {
        printf("Permission of key %s is revoked from role %s\n", key, role);
        return;
    }
    printf("Permission of range [%s, ", key);
    if (bytes_equal(end, "", 1)) {
        fputs("<open ended>", stdout);
    } else {
        fwrite(end.data, 1, end.len, stdout);
        putchar(')');
    }
    printf(" is revoked from role %s\n", role);
}

static int revoke_run(int argc, char **argv)
{
    if (argc < 2)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "role revoke-permission command requires role name and "
                 "key [endkey] as its argument");
    struct perm_range pr = perm_range(argc - 1, argv + 1);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthRoleRevokePermissionRequest req =
        ETCDSERVERPB__AUTH_ROLE_REVOKE_PERMISSION_REQUEST__INIT;
    req.role = argv[0];
    req.key = pr.key;
    req.range_end = pr.range_end;
    Etcdserverpb__AuthRoleRevokePermissionResponse *r =
        (Etcdserverpb__AuthRoleRevokePermissionResponse *)ctl_call(
            "/etcdserverpb.Auth/RoleRevokePermission", &req.base,
            &etcdserverpb__auth_role_revoke_permission_response__descriptor);
    if (!ctl_auth_display(out, &r->base, true)) {
        if (out == CTL_OUT_FIELDS)
            ctl_fields_hdr(stdout, r->header);
        else
            revoke_simple(argv[0], argv[1], pr.range_end);
    }
    free(pr.owned);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The commands
 * ---------------------------------------------------------------------- */

static struct ctl_flag grant_flags[] = {
    {"prefix", 0, CTL_FLAG_BOOL, &perm_prefix, "false",
     "grant a prefix permission", false},
    {"from-key", 0, CTL_FLAG_BOOL, &perm_from_key, "false",
     "grant a permission of keys that are greater than or equal to the "
     "given key using byte compare",
     false},
    CTL_FLAG_END,
};

static struct ctl_flag revoke_flags[] = {
    {"prefix", 0, CTL_FLAG_BOOL, &perm_prefix, "false",
     "revoke a prefix permission", false},
    {"from-key", 0, CTL_FLAG_BOOL, &perm_from_key, "false",
     "revoke a permission of keys that are greater than or equal to the "
     "given key using byte compare",
     false},
    CTL_FLAG_END,
};

static const struct ctl_cmd add_cmd = {
    .use = "add <role name>",
    .short_desc = "Adds a new role",
    .run = add_run,
};

static const struct ctl_cmd delete_cmd = {
    .use = "delete <role name>",
    .short_desc = "Deletes a role",
    .run = delete_run,
};

static const struct ctl_cmd get_cmd = {
    .use = "get <role name>",
    .short_desc = "Gets detailed information of a role",
    .run = get_run,
};

static const struct ctl_cmd list_cmd = {
    .use = "list",
    .short_desc = "Lists all roles",
    .run = list_run,
};

static const struct ctl_cmd grant_cmd = {
    .use = "grant-permission [options] <role name> <permission type> <key> "
           "[endkey]",
    .short_desc = "Grants a key to a role",
    .flags = grant_flags,
    .run = grant_run,
};

static const struct ctl_cmd revoke_cmd = {
    .use = "revoke-permission <role name> <key> [endkey]",
    .short_desc = "Revokes a key from a role",
    .flags = revoke_flags,
    .run = revoke_run,
};

static const struct ctl_cmd *const subs[] = {
    &add_cmd, &delete_cmd, &get_cmd, &list_cmd, &grant_cmd, &revoke_cmd,
    NULL,
};

const struct ctl_cmd ctl_cmd_role = {
    .use = "role <subcommand>",
    .short_desc = "Role related commands",
    .subs = subs,
};
