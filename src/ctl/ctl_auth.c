/*
 * ctl_auth.c - "auth enable" and "auth disable", as etcdctl 3.4.23 runs
 * them, and the output-format dispatch the auth, user and role commands
 * share (ctl_auth_display).
 *
 * "auth enable" makes what the server needs first: when AuthEnable fails
 * because root lacks the root role ("etcdserver: root user does not have
 * root role"), etcdctl adds the role root, grants it to the user root and
 * tries again; any other error (notably "etcdserver: root user does not
 * exist", which etcdctl does not repair) ends the command.  The text is
 * "Authentication Enabled" whatever --write-out says, but the format is
 * still checked (etcdctl builds its printer with the client).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "ctl/commands.h"
#include "ctl/print.h"
#include "etcdserverpb/rpc.pb-c.h"

/* etcd's ErrRootRoleNotExist, the error auth enable repairs. */
#define ROOT_ROLE_MISSING "etcdserver: root user does not have root role"

bool ctl_auth_display(enum ctl_output out, const ProtobufCMessage *resp,
                      bool fields)
{
    assert(resp != NULL);
    switch (out) {
    case CTL_OUT_JSON:
        ctl_json_message(stdout, resp);
        return true;
    case CTL_OUT_PROTOBUF:
        (void)ctl_pb_message(stdout, resp);
        return true;
    case CTL_OUT_TABLE:
        ctl_exit(CTL_EXIT_BAD_FEATURE, "table not supported as output format");
    case CTL_OUT_FIELDS:
        if (!fields)
            ctl_exit(CTL_EXIT_BAD_FEATURE,
                     "fields not supported as output format");
        return false;
    case CTL_OUT_SIMPLE:
        break;
    }
    return false;
}

/* call makes one unary call of auth enable on the shared client; returns
 * 0, or the failed call's status in st (logged as etcdctl logs it). */
static int call(const char *method, const ProtobufCMessage *req,
                const ProtobufCMessageDescriptor *desc,
                struct cetcd_status *st)
{
    ProtobufCMessage *resp = NULL;
    int rc = ctl_unary(ctl_client(), method, req, desc, &resp, st);
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return rc;
}

/* add_root_role creates the role root and grants it to the user root. */
static int add_root_role(struct cetcd_status *st)
{
    Etcdserverpb__AuthRoleAddRequest add =
        ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT;
    add.name = "root";
    int rc = call("/etcdserverpb.Auth/RoleAdd", &add.base,
                  &etcdserverpb__auth_role_add_response__descriptor, st);
    if (rc != 0)
        return rc;
    Etcdserverpb__AuthUserGrantRoleRequest grant =
        ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;
    grant.user = "root";
    grant.role = "root";
    return call("/etcdserverpb.Auth/UserGrantRole", &grant.base,
                &etcdserverpb__auth_user_grant_role_response__descriptor, st);
}

static int enable_run(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "auth enable command does not accept any arguments");
    (void)ctl_output_format();
    Etcdserverpb__AuthEnableRequest req =
        ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;
    struct cetcd_status st = {0};
    int rc;
    /* Each repair makes progress (the role is new, so a second failure
     * ends at RoleAdd's "role name already exists"): the loop is short. */
    for (;;) {
        rc = call("/etcdserverpb.Auth/AuthEnable", &req.base,
                  &etcdserverpb__auth_enable_response__descriptor, &st);
        if (rc == 0 || strcmp(st.message, ROOT_ROLE_MISSING) != 0)
            break;
        if ((rc = add_root_role(&st)) != 0)
            break;
    }
    if (rc != 0)
        ctl_exit_status(CTL_EXIT_ERROR, &st);
    printf("Authentication Enabled\n");
    return CTL_EXIT_SUCCESS;
}

static int disable_run(int argc, char **argv)
{
    (void)argv;
    if (argc != 0)
        ctl_exit(CTL_EXIT_BAD_ARGS,
                 "auth disable command does not accept any arguments");
    (void)ctl_output_format();
    Etcdserverpb__AuthDisableRequest req =
        ETCDSERVERPB__AUTH_DISABLE_REQUEST__INIT;
    ProtobufCMessage *resp =
        ctl_call("/etcdserverpb.Auth/AuthDisable", &req.base,
                 &etcdserverpb__auth_disable_response__descriptor);
    protobuf_c_message_free_unpacked(resp, NULL);
    printf("Authentication Disabled\n");
    return CTL_EXIT_SUCCESS;
}

static const struct ctl_cmd enable_cmd = {
    .use = "enable",
    .short_desc = "Enables authentication",
    .run = enable_run,
};

static const struct ctl_cmd disable_cmd = {
    .use = "disable",
    .short_desc = "Disables authentication",
    .run = disable_run,
};

static const struct ctl_cmd *const subs[] = {&enable_cmd, &disable_cmd,
                                             NULL};

const struct ctl_cmd ctl_cmd_auth = {
    .use = "auth <enable or disable>",
    .short_desc = "Enable or disable authentication",
    .subs = subs,
};
