/*
 * ctl_user.c - "user": add, delete, get, list, passwd, grant-role and
 * revoke-role, as etcdctl 3.4.23's user commands answer them, with its
 * two ways of reading a new password.
 *
 * Passwords.  "user add name:pw" splits at the first colon;
 * --new-user-password gives it whole (the name then keeps any colon);
 * --no-password sends none.  Otherwise, as with "user passwd":
 * --interactive (the default) asks twice through ctl_password_ask
 * ("Password of <name>: ", "Type password of <name> again for
 * confirmation: "), refusing an empty or unconfirmed one (exit 128);
 * --interactive=false reads it as Go's fmt.Scanf("%s") does (scan_word).
 * Passwords are read before the client is made, as etcdctl reads them
 * before its own --user prompt.
 *
 * Improvement over etcdctl: as in ctl_role.c, the calls have the
 * --command-timeout deadline where etcdctl waits forever.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

/* The flags; --interactive is shared by add and passwd as in etcdctl. */
static bool interactive, no_password, show_detail;
static const char *new_user_password;

/* ------------------------------------------------------------------------
 * fmt.Scanf("%s", &password) on stdin
 * ---------------------------------------------------------------------- */

/* A rune reader over stdin as fmt's: one byte per read(2), so nothing
 * after the word's delimiter is consumed (a --user prompt that follows
 * reads the next line, as under etcdctl); bytes after an invalid UTF-8
 * lead are kept for the next rune. */
struct rune_in {
    uint8_t pend[4]; /* bytes read but not yet decoded */
    int npend;       /* how many */
    bool failed;     /* a read error (fmt gives up: no word) */
};

#define RUNE_EOF (-1L)
#define RUNE_ERROR 0xfffdL

static int byte_in(struct rune_in *in)
{
    uint8_t c;
    if (in->npend > 0) {
        c = in->pend[0];
        memmove(in->pend, in->pend + 1, (size_t)--in->npend);
        return c;
    }
    for (;;) {
        ssize_t r = read(STDIN_FILENO, &c, 1);
        if (r == 1)
            return c;
        if (r < 0 && errno == EINTR)
            continue;
        in->failed = r < 0;
        return -1;
    }
}

/* utf8_len is the length a lead byte announces (1 for ASCII and for
 * bytes that cannot lead), and lo/hi the range of its second byte. */
static int utf8_len(uint8_t b, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80, *hi = 0xbf;
    if (b < 0xc2 || b > 0xf4)
        return 1;
    if (b < 0xe0)
        return 2;
    if (b < 0xf0) {
        *lo = b == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
        *hi = b == 0xed ? 0x9f : 0xbf; /* no surrogates */
        return 3;
    }
    *lo = b == 0xf0 ? 0x90 : 0x80;
    *hi = b == 0xf4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
    return 4;
}

/* rune_next decodes the next rune as Go's utf8.DecodeRune: an invalid
 * sequence gives U+FFFD for its first byte alone.  RUNE_EOF at the end. */
static long rune_next(struct rune_in *in)
{
    long r;
    uint8_t b[4], lo, hi;
    int c = byte_in(in), n = 1;
    if (c < 0)
        return RUNE_EOF;
    b[0] = (uint8_t)c;
    int want = utf8_len(b[0], &lo, &hi);
    if (b[0] < 0x80)
        return b[0];
    /* read while the bytes so far are a valid beginning (utf8.FullRune) */
    while (n < want && (n < 2 || (b[1] >= lo && b[1] <= hi)) &&
           (n < 3 || (b[2] >= 0x80 && b[2] <= 0xbf)) &&
           (c = byte_in(in)) >= 0)
        b[n++] = (uint8_t)c;
    bool ok = n == want && n > 1 && b[1] >= lo && b[1] <= hi;
    for (int i = 2; ok && i < n; i++)
        ok = b[i] >= 0x80 && b[i] <= 0xbf;
    if (!ok) {
        memcpy(in->pend + in->npend, b + 1, (size_t)(n - 1));
        in->npend += n - 1;
        return RUNE_ERROR;
    }
    r = b[0] & (0x7f >> n);
    for (int i = 1; i < n; i++)
        r = r << 6 | (b[i] & 0x3f);
    return r;
}

/* utf8_put encodes r (a valid rune) into out; returns its length. */
static size_t utf8_put(long r, char *out)
{
    if (r < 0x80)
        return out[0] = (char)r, 1;
    if (r < 0x800) {
        out[0] = (char)(0xc0 | r >> 6);
        out[1] = (char)(0x80 | (r & 0x3f));
        return 2;
    }
    size_t n = r < 0x10000 ? 3 : 4;
    out[0] = (char)(n == 3 ? 0xe0 | r >> 12 : 0xf0 | r >> 18);
    for (size_t i = 1; i < n; i++)
        out[i] = (char)(0x80 | ((r >> (6 * (n - 1 - i))) & 0x3f));
    return n;
}

static bool rune_is_space(long r)
{
    char u[4];
    size_t n = utf8_put(r, u);
    return ctl_go_space_len(u, n) == n;
}

/* scan_word reads stdin as Go's fmt.Scanf("%s", &s): blanks are skipped
 * but a newline before the word is an error, and the word ends at the
 * next Unicode space or the end; errors leave it empty.  Invalid UTF-8
 * comes out as U+FFFD, as fmt writes the runes it decoded.  Returns a
 * malloc'd string. */
static char *scan_word(void)
{
    struct rune_in in = {.npend = 0, .failed = false};
    long r;
    while ((r = rune_next(&in)) != RUNE_EOF && r != '\n' &&
           rune_is_space(r))
        continue; /* "\r\n" ends at the '\n' as well */
    size_t len = 0, cap = 64;
    char *w = malloc(cap);
    if (!w)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    for (; r != RUNE_EOF && r != '\n' && !rune_is_space(r);
         r = rune_next(&in)) {
        if (len + 5 > cap && !(w = realloc(w, cap *= 2)))
            ctl_exit(CTL_EXIT_ERROR, "out of memory");
        len += utf8_put(r, w + len);
    }
    if (in.failed)
        len = 0;
    w[len] = '\0';
    assert(len < cap && in.npend >= 0 && in.npend <= 3);
    assert(strlen(w) <= len); /* a NUL may come from stdin */
    return w;
}

/* ------------------------------------------------------------------------
 * Reading a new password
 * ---------------------------------------------------------------------- */

/* ask asks once with prompt fmt (holding one %s for the name). */
static char *ask(const char *fmt, const char *name)
{
    size_t cap = strlen(fmt) + strlen(name) + 1;
    char *prompt = malloc(cap), err[256];
    if (!prompt)
        ctl_exit(CTL_EXIT_ERROR, "out of memory");
    snprintf(prompt, cap, fmt, name);
    char *pw = ctl_password_ask(prompt, err, sizeof err);
    free(prompt);
    if (!pw)
        ctl_exit(CTL_EXIT_BAD_ARGS, "failed to ask password: %s", err);
    return pw;
}

/* read_password gets the new password of name as etcdctl's
 * readPasswordInteractive, or Scanf with --interactive=false. */
static char *read_password(const char *name)
{
    if (!interactive)
        return scan_word();
    char *pw = ask("Password of %s: ", name);
    if (pw[0] == '\0')
        ctl_exit(CTL_EXIT_BAD_ARGS, "empty password");
    char *again = ask("Type password of %s again for confirmation: ", name);
    if (strcmp(pw, again) != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "given passwords are different");
    free(again);
    return pw;
}

/* ------------------------------------------------------------------------
 * The sub-commands
 * ---------------------------------------------------------------------- */

/* header_display prints a response that says nothing but its header:
 * the simple line (printed by the caller when false is returned) or the
 * header in fields. */
static bool header_display(enum ctl_output out, const ProtobufCMessage *m,
                           const Etcdserverpb__ResponseHeader *h)
{
    if (ctl_auth_display(out, m, true))
        return true;
    if (out == CTL_OUT_FIELDS)
        ctl_fields_hdr(stdout, h);
    return out == CTL_OUT_FIELDS;
}

/* user_add_request fills req from the argument and the flags; returns
 * the password when it was read (the caller frees it), else NULL. */
static char *user_add_request(char *arg,
                              Etcdserverpb__AuthUserAddRequest *req)
{
    char *colon = strchr(arg, ':');
    req->name = arg;
    req->password = "";
    if (no_password) {
        req->options->no_password = true;
    } else if (new_user_password[0]) {
        req->password = (char *)new_user_password;
    } else if (colon) {
        *colon = '\0';
        req->password = colon + 1;
        if (arg[0] == '\0')
            ctl_exit(CTL_EXIT_BAD_ARGS, "empty user name is not allowed");
    } else {
        return req->password = read_password(arg);
    }
    return NULL;
}

static int add_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "user add command requires user name as its argument");
    Authpb__UserAddOptions opts = AUTHPB__USER_ADD_OPTIONS__INIT;
    Etcdserverpb__AuthUserAddRequest req =
        ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
    req.options = &opts;
    char *owned = user_add_request(argv[0], &req);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserAddResponse *r =
        (Etcdserverpb__AuthUserAddResponse *)ctl_call(
            "/etcdserverpb.Auth/UserAdd", &req.base,
            &etcdserverpb__auth_user_add_response__descriptor);
    if (!header_display(out, &r->base, r->header))
        printf("User %s created\n", req.name);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    free(owned);
    return CTL_EXIT_SUCCESS;
}

static int delete_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "user delete command requires user name as its argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserDeleteRequest req =
        ETCDSERVERPB__AUTH_USER_DELETE_REQUEST__INIT;
    req.name = argv[0];
    Etcdserverpb__AuthUserDeleteResponse *r =
        (Etcdserverpb__AuthUserDeleteResponse *)ctl_call(
            "/etcdserverpb.Auth/UserDelete", &req.base,
            &etcdserverpb__auth_user_delete_response__descriptor);
    if (!header_display(out, &r->base, r->header))
        printf("User %s deleted\n", argv[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

/* get_detail prints "user get --detail": the name, then each role as
 * "role get" shows it, after a blank line (in every format). */
static void get_detail(enum ctl_output out, const char *name,
                       const Etcdserverpb__AuthUserGetResponse *r)
{
    printf("User: %s\n", name);
    for (size_t i = 0; i < r->n_roles; i++) {
        printf("\n");
        struct Etcdserverpb__AuthRoleGetResponse *role =
            ctl_role_get_call(r->roles[i]);
        ctl_role_get_display(out, r->roles[i], role);
        protobuf_c_message_free_unpacked(&role->base, NULL);
    }
}

static int get_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "user get command requires user name as its argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserGetRequest req =
        ETCDSERVERPB__AUTH_USER_GET_REQUEST__INIT;
    req.name = argv[0];
    Etcdserverpb__AuthUserGetResponse *r =
        (Etcdserverpb__AuthUserGetResponse *)ctl_call(
            "/etcdserverpb.Auth/UserGet", &req.base,
            &etcdserverpb__auth_user_get_response__descriptor);
    if (show_detail) {
        get_detail(out, argv[0], r);
    } else if (!ctl_auth_display(out, &r->base, false)) {
        printf("User: %s\nRoles:", argv[0]);
        for (size_t i = 0; i < r->n_roles; i++)
            printf(" %s", r->roles[i]);
        printf("\n");
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static int list_run(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS, "user list command requires no arguments");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserListRequest req =
        ETCDSERVERPB__AUTH_USER_LIST_REQUEST__INIT;
    Etcdserverpb__AuthUserListResponse *r =
        (Etcdserverpb__AuthUserListResponse *)ctl_call(
            "/etcdserverpb.Auth/UserList", &req.base,
            &etcdserverpb__auth_user_list_response__descriptor);
    if (!ctl_auth_display(out, &r->base, false))
        for (size_t i = 0; i < r->n_users; i++)
            printf("%s\n", r->users[i]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static int passwd_run(int argc, char **argv)
{
    if (argc != 1)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "user passwd command requires user name as its argument");
    Etcdserverpb__AuthUserChangePasswordRequest req =
        ETCDSERVERPB__AUTH_USER_CHANGE_PASSWORD_REQUEST__INIT;
    req.name = argv[0];
    req.password = read_password(argv[0]);
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserChangePasswordResponse *r =
        (Etcdserverpb__AuthUserChangePasswordResponse *)ctl_call(
            "/etcdserverpb.Auth/UserChangePassword", &req.base,
            &etcdserverpb__auth_user_change_password_response__descriptor);
    if (!header_display(out, &r->base, r->header))
        printf("Password updated\n");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    free(req.password);
    return CTL_EXIT_SUCCESS;
}

static int grant_run(int argc, char **argv)
{
    if (argc != 2)
        ctl_exit(CTL_EXIT_BAD_ARGS, "user grant command requires user name "
                                    "and role name as its argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserGrantRoleRequest req =
        ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;
    req.user = argv[0];
    req.role = argv[1];
    Etcdserverpb__AuthUserGrantRoleResponse *r =
        (Etcdserverpb__AuthUserGrantRoleResponse *)ctl_call(
            "/etcdserverpb.Auth/UserGrantRole", &req.base,
            &etcdserverpb__auth_user_grant_role_response__descriptor);
    if (!header_display(out, &r->base, r->header))
        printf("Role %s is granted to user %s\n", argv[1], argv[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

static int revoke_run(int argc, char **argv)
{
    if (argc != 2)
        ctl_exit(CTL_EXIT_BAD_ARGS, "user revoke-role requires user name and "
                                    "role name as its argument");
    enum ctl_output out = ctl_output_format();
    Etcdserverpb__AuthUserRevokeRoleRequest req =
        ETCDSERVERPB__AUTH_USER_REVOKE_ROLE_REQUEST__INIT;
    req.name = argv[0];
    req.role = argv[1];
    Etcdserverpb__AuthUserRevokeRoleResponse *r =
        (Etcdserverpb__AuthUserRevokeRoleResponse *)ctl_call(
            "/etcdserverpb.Auth/UserRevokeRole", &req.base,
            &etcdserverpb__auth_user_revoke_role_response__descriptor);
    if (!header_display(out, &r->base, r->header))
        printf("Role %s is revoked from user %s\n", argv[1], argv[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return CTL_EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------
 * The commands
 * ---------------------------------------------------------------------- */

static struct ctl_flag add_flags[] = {
    {"interactive", 0, CTL_FLAG_BOOL, &interactive, "true",
     "Read password from stdin instead of interactive terminal", false},
    {"new-user-password", 0, CTL_FLAG_STRING, &new_user_password, "",
     "Supply password from the command line flag", false},
    {"no-password", 0, CTL_FLAG_BOOL, &no_password, "false",
     "Create a user without password (CN based auth only)", false},
    CTL_FLAG_END,
};

static struct ctl_flag get_flags[] = {
    {"detail", 0, CTL_FLAG_BOOL, &show_detail, "false",
     "Show permissions of roles granted to the user", false},
    CTL_FLAG_END,
};

static struct ctl_flag passwd_flags[] = {
    {"interactive", 0, CTL_FLAG_BOOL, &interactive, "true",
     "If true, read password from stdin instead of interactive terminal",
     false},
    CTL_FLAG_END,
};

static const struct ctl_cmd add_cmd = {
    .use = "add <user name or user:password> [options]",
    .short_desc = "Adds a new user",
    .flags = add_flags,
    .run = add_run,
};

static const struct ctl_cmd delete_cmd = {
    .use = "delete <user name>",
    .short_desc = "Deletes a user",
    .run = delete_run,
};

static const struct ctl_cmd get_cmd = {
    .use = "get <user name> [options]",
    .short_desc = "Gets detailed information of a user",
    .flags = get_flags,
    .run = get_run,
};

static const struct ctl_cmd list_cmd = {
    .use = "list",
    .short_desc = "Lists all users",
    .run = list_run,
};

static const struct ctl_cmd passwd_cmd = {
    .use = "passwd <user name> [options]",
    .short_desc = "Changes password of user",
    .flags = passwd_flags,
    .run = passwd_run,
};

static const struct ctl_cmd grant_cmd = {
    .use = "grant-role <user name> <role name>",
    .short_desc = "Grants a role to a user",
    .run = grant_run,
};

static const struct ctl_cmd revoke_cmd = {
    .use = "revoke-role <user name> <role name>",
    .short_desc = "Revokes a role from a user",
    .run = revoke_run,
};

static const struct ctl_cmd *const subs[] = {
    &add_cmd,    &delete_cmd, &get_cmd,    &list_cmd,
    &passwd_cmd, &grant_cmd,  &revoke_cmd, NULL,
};

const struct ctl_cmd ctl_cmd_user = {
    .use = "user <subcommand>",
    .short_desc = "User related commands",
    .subs = subs,
};
