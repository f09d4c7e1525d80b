/* errors.c - ERR_* -> etcd's gRPC status code and message (rpctypes of etcd
 * 3.4; clients match on these strings). */
#include "api/api.h"
#include "util/err.h"

grpc_status_code api_error(int err, const char **msg_out)
{
    switch (err) {
#define E(code, grpc, msg)                                                   \
    case code:                                                               \
        *msg_out = msg;                                                      \
        return grpc;
        E(ERR_EMPTY_KEY, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: key is not provided")
        E(ERR_KEY_NOT_FOUND, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: key not found")
        E(ERR_VALUE_PROVIDED, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: value is provided")
        E(ERR_LEASE_PROVIDED, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: lease is provided")
        E(ERR_TOO_MANY_OPS, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: too many operations in txn request")
        E(ERR_DUPLICATE_KEY, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: duplicate key given in txn request")
        E(ERR_COMPACTED, GRPC_STATUS_OUT_OF_RANGE,
          "etcdserver: mvcc: required revision has been compacted")
        E(ERR_FUTURE_REV, GRPC_STATUS_OUT_OF_RANGE,
          "etcdserver: mvcc: required revision is a future revision")
        E(ERR_NO_SPACE, GRPC_STATUS_RESOURCE_EXHAUSTED,
          "etcdserver: mvcc: database space exceeded")
        E(ERR_AUTH_ROOT_USER_NOT_EXIST, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: root user does not exist")
        E(ERR_AUTH_ROOT_ROLE_NOT_EXIST, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: root user does not have root role")
        E(ERR_AUTH_USER_EXISTS, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: user name already exists")
        E(ERR_AUTH_USER_EMPTY, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: user name is empty")
        E(ERR_AUTH_USER_NOT_FOUND, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: user name not found")
        E(ERR_AUTH_ROLE_EXISTS, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: role name already exists")
        E(ERR_AUTH_ROLE_NOT_FOUND, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: role name not found")
        E(ERR_AUTH_ROLE_EMPTY, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: role name is empty")
        E(ERR_AUTH_FAILED, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: authentication failed, invalid user ID or password")
        E(ERR_AUTH_PERMISSION_DENIED, GRPC_STATUS_PERMISSION_DENIED,
          "etcdserver: permission denied")
        E(ERR_AUTH_ROLE_NOT_GRANTED, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: role is not granted to the user")
        E(ERR_AUTH_PERMISSION_NOT_GRANTED, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: permission is not granted to the role")
        E(ERR_AUTH_NOT_ENABLED, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: authentication is not enabled")
        E(ERR_AUTH_INVALID_TOKEN, GRPC_STATUS_UNAUTHENTICATED,
          "etcdserver: invalid auth token")
        E(ERR_AUTH_INVALID_MGMT, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: invalid auth management")
        E(ERR_AUTH_OLD_REVISION, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: revision of auth store is old")
        /* not in etcd's rpctypes: gRPC's Unknown with the auth error */
        E(ERR_AUTH_RAW_USER_EMPTY, GRPC_STATUS_UNKNOWN,
          "auth: user name is empty")
        E(ERR_AUTH_RAW_USER_NOT_FOUND, GRPC_STATUS_UNKNOWN,
          "auth: user not found")
        E(ERR_AUTH_RAW_PERMISSION_DENIED, GRPC_STATUS_UNKNOWN,
          "auth: permission denied")
        E(ERR_AUTH_RAW_INVALID_TOKEN, GRPC_STATUS_UNKNOWN,
          "auth: invalid auth token")
        E(ERR_AUTH_VERIFY_ONLY, GRPC_STATUS_UNKNOWN,
          "auth: token signing attempted with verify-only key")
        E(ERR_AUTH_INVALID_OPTS, GRPC_STATUS_UNKNOWN,
          "auth: invalid auth options")
        E(ERR_AUTH_SIGN, GRPC_STATUS_UNKNOWN,
          "auth: failed to sign a JWT token")
        E(ERR_LEASE_NOT_FOUND, GRPC_STATUS_NOT_FOUND,
          "etcdserver: requested lease not found")
        E(ERR_LEASE_EXIST, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: lease already exists")
        E(ERR_LEASE_TTL_TOO_LARGE, GRPC_STATUS_OUT_OF_RANGE,
          "etcdserver: too large lease TTL")
        E(ERR_REQUEST_TOO_LARGE, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: request is too large")
        E(ERR_TOO_MANY_REQUESTS, GRPC_STATUS_RESOURCE_EXHAUSTED,
          "etcdserver: too many requests")
        /* Defragment: etcd answers its defrag errors as plain errors
         * (Unknown); cetcd's own causes keep that code. */
        E(ERR_DEFRAG_NO_DISK, GRPC_STATUS_UNKNOWN,
          "etcdserver: not enough free disk space to defragment the store")
        E(ERR_DEFRAG_JOURNAL_FULL, GRPC_STATUS_UNKNOWN,
          "etcdserver: too many writes during defragmentation, try again")
        E(ERR_DEFRAG_STORE_REPLACED, GRPC_STATUS_UNKNOWN,
          "etcdserver: the store was replaced by a snapshot during "
          "defragmentation")
        E(ERR_DEFRAG_PIN_PENDING, GRPC_STATUS_UNKNOWN,
          "etcdserver: the last defragmented store is not pinned yet, try "
          "again")
        /* Not an etcd error: cetcd ends a Watch stream whose client left
         * more than SVC_STREAM_CTRL_RESERVE control responses unread
         * (etcd stops reading its requests instead); Unavailable, so a
         * client reconnects. */
        E(ERR_WATCH_CTRL_UNREAD, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: watch stream closed: the client does not read its "
          "control responses")
        E(ERR_STOPPED, GRPC_STATUS_UNAVAILABLE, "etcdserver: server stopped")
        E(ERR_TIMEOUT, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: request timed out")
        E(ERR_TIMEOUT_LEADER_FAIL, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: request timed out, possibly due to previous leader "
          "failure")
        E(ERR_TIMEOUT_CONN_LOST, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: request timed out, possibly due to connection lost")
        E(ERR_LEADER_CHANGED, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: leader changed")
        E(ERR_NO_LEADER, GRPC_STATUS_UNAVAILABLE, "etcdserver: no leader")
        E(ERR_NOT_LEADER, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: not leader")
        E(ERR_CORRUPT, GRPC_STATUS_DATA_LOSS, "etcdserver: corrupt cluster")
        E(ERR_CLUSTER_CORRUPT, GRPC_STATUS_DATA_LOSS,
          "etcdserver: corrupt cluster")
        E(ERR_MEMBER_EXIST, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: member ID already exist")
        E(ERR_PEER_URL_EXIST, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: Peer URLs already exists")
        E(ERR_MEMBER_NOT_ENOUGH_STARTED, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: re-configuration failed due to not enough started "
          "members")
        E(ERR_MEMBER_BAD_URLS, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: given member URLs are invalid")
        E(ERR_MEMBER_NOT_FOUND, GRPC_STATUS_NOT_FOUND,
          "etcdserver: member not found")
        E(ERR_MEMBER_NOT_LEARNER, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: can only promote a learner member")
        E(ERR_LEARNER_NOT_READY, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: can only promote a learner member which is in sync "
          "with leader")
        E(ERR_TOO_MANY_LEARNERS, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: too many learner members in cluster")
        E(ERR_BAD_LEADER_TRANSFEREE, GRPC_STATUS_FAILED_PRECONDITION,
          "etcdserver: bad leader transferee")
        /* An unmapped Go error in etcd: code Unknown, raw text. */
        E(ERR_LEADER_TRANSFER_TIMEOUT, GRPC_STATUS_UNKNOWN,
          "etcdserver: request timed out, leader transfer took too long")
        E(ERR_UNHEALTHY, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: unhealthy cluster")
        E(ERR_MEMBER_REMOVED, GRPC_STATUS_UNAVAILABLE,
          "etcdserver: server stopped")
        /* Not an etcd error: cetcd's store takes keys up to mvcc_key_max
         * (1 GiB, far past any request --max-request-bytes lets in). */
        E(ERR_TOO_LARGE, GRPC_STATUS_INVALID_ARGUMENT,
          "etcdserver: key is too long for cetcd's store")
        /* Never answered to a client: the config file is read at start,
         * a hash mismatch raises the CORRUPT alarm (requests then get
         * ERR_CLUSTER_CORRUPT); mapped for completeness. */
        E(ERR_CONFIG_FILE, GRPC_STATUS_INTERNAL,
          "etcdserver: bad configuration file")
        E(ERR_HASH_MISMATCH, GRPC_STATUS_DATA_LOSS,
          "etcdserver: corrupt cluster")
        /* A snapshot export that fails inside the bbolt writer: etcd's
         * Snapshot answers its backend's errors as Unknown (togRPCError). */
        E(ERR_BBOLT_CORRUPT, GRPC_STATUS_UNKNOWN, "bbolt: invalid database")
        E(ERR_BBOLT_ORDER, GRPC_STATUS_UNKNOWN,
          "bbolt: keys not in ascending order")
        E(ERR_BBOLT_PLAN, GRPC_STATUS_UNKNOWN,
          "bbolt: the store changed between the snapshot's two passes")
        E(ERR_BBOLT_DEPTH, GRPC_STATUS_UNKNOWN,
          "bbolt: buckets nested too deep")
        /* Start-up only (the import of an etcd data dir); never a
         * request's answer, mapped for completeness. */
        E(ERR_IMPORT_UNSUPPORTED, GRPC_STATUS_UNKNOWN,
          "import: the etcd data dir holds a record cetcd cannot import")
        E(ERR_IMPORT_LAYOUT, GRPC_STATUS_UNKNOWN,
          "import: the etcd data dir's layout cannot be imported")
        /* Inside the gateway only (json_pb_reader: a request body that
         * stays open has more to come); never an answer. */
        E(ERR_MORE, GRPC_STATUS_UNKNOWN,
          "the value goes on in bytes still to come")
#undef E
    default:
        *msg_out = err_str(err);
        return GRPC_STATUS_UNKNOWN;
    }
}
