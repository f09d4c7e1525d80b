/*
 * auth.c - the etcdserverpb.Auth service on gRPC: decode the request by
 * its method's type, call the service (svc/auth.c), answer with its reply
 * or its error mapped by api_error.
 */
#include "api/api_int.h"
#include "svc/svc.h"

static const struct {
    const char *path;
    const ProtobufCMessageDescriptor *d;
} methods[] = {
    {"/etcdserverpb.Auth/AuthEnable", &etcdserverpb__auth_enable_request__descriptor},
    {"/etcdserverpb.Auth/AuthDisable", &etcdserverpb__auth_disable_request__descriptor},
    {"/etcdserverpb.Auth/Authenticate", &etcdserverpb__authenticate_request__descriptor},
    {"/etcdserverpb.Auth/UserAdd", &etcdserverpb__auth_user_add_request__descriptor},
    {"/etcdserverpb.Auth/UserGet", &etcdserverpb__auth_user_get_request__descriptor},
    {"/etcdserverpb.Auth/UserList", &etcdserverpb__auth_user_list_request__descriptor},
    {"/etcdserverpb.Auth/UserDelete", &etcdserverpb__auth_user_delete_request__descriptor},
    {"/etcdserverpb.Auth/UserChangePassword", &etcdserverpb__auth_user_change_password_request__descriptor},
    {"/etcdserverpb.Auth/UserGrantRole", &etcdserverpb__auth_user_grant_role_request__descriptor},
    {"/etcdserverpb.Auth/UserRevokeRole", &etcdserverpb__auth_user_revoke_role_request__descriptor},
    {"/etcdserverpb.Auth/RoleAdd", &etcdserverpb__auth_role_add_request__descriptor},
    {"/etcdserverpb.Auth/RoleGet", &etcdserverpb__auth_role_get_request__descriptor},
    {"/etcdserverpb.Auth/RoleList", &etcdserverpb__auth_role_list_request__descriptor},
    {"/etcdserverpb.Auth/RoleDelete", &etcdserverpb__auth_role_delete_request__descriptor},
    {"/etcdserverpb.Auth/RoleGrantPermission", &etcdserverpb__auth_role_grant_permission_request__descriptor},
    {"/etcdserverpb.Auth/RoleRevokePermission", &etcdserverpb__auth_role_revoke_permission_request__descriptor},
};

#define N_METHODS (sizeof methods / sizeof methods[0])

_Static_assert(N_METHODS == API_AUTH_METHODS, "one context per method");

static void auth_call(struct rpc_call *call, const uint8_t *req, size_t len,
                      void *ctx)
{
    const struct api_auth_method *m = ctx;
    ProtobufCMessage *r = protobuf_c_message_unpack(m->d, NULL, len, req);
    if (r == NULL)
        return api__bad_request(call);
    /* the service borrows r until it returns (the password is hashed or
     * checked before, never kept) */
    svc_auth_call(m->api->server, r, api__done(call));
    protobuf_c_message_free_unpacked(r, NULL);
}

int api__auth_register(struct api *api)
{
    for (size_t i = 0; i < N_METHODS; i++) {
        api->auth[i] = (struct api_auth_method){api, methods[i].d};
        int rc = rpc_server_register_unary(api->rpc, methods[i].path,
                                           auth_call, &api->auth[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}
