/*
 * err.h - every error code of cetcd, in one table.
 *
 * Functions return 0 or a negative ERR_* code.  The table gives each code a
 * name and a message; only src/api maps codes to etcd's gRPC status codes and
 * messages (those are wire facts, see api/errors.c).  Modules append codes to
 * their own section; never renumber (codes may be logged or persisted).
 */
#ifndef CETCD_UTIL_ERR_H
#define CETCD_UTIL_ERR_H

#define ERR_MAP(X)                                                           \
    /* generic */                                                            \
    X(NOMEM, -1, "out of memory")                                            \
    X(IO, -2, "I/O error")                                                   \
    X(INVAL, -3, "invalid argument")                                         \
    X(CORRUPT, -4, "data corruption detected")                               \
    X(NOTFOUND, -5, "not found")                                             \
    X(EXIST, -6, "already exists")                                           \
    X(FULL, -7, "queue or buffer full")                                      \
    X(CLOSED, -8, "object closed")                                           \
    X(BUSY, -9, "resource busy")                                             \
    X(NOSPC, -10, "no space left on device")                                 \
    X(TIMEOUT, -11, "timed out")                                             \
    X(STOPPED, -12, "server stopped")                                        \
    X(UNSUPPORTED, -13, "not supported")                                     \
    X(TOO_LARGE, -14, "too large")                                           \
    /* wal */                                                                \
    X(WAL_TORN, -100, "wal: torn record at tail")                            \
    X(WAL_CRC, -101, "wal: crc mismatch")                                    \
    X(WAL_GAP, -102, "wal: index gap")                                       \
    /* mvcc / kv semantics (mapped to etcd errors by api) */                 \
    X(COMPACTED, -200, "mvcc: required revision has been compacted")        \
    X(FUTURE_REV, -201, "mvcc: required revision is a future revision")     \
    X(EMPTY_KEY, -202, "key is not provided")                                \
    X(KEY_NOT_FOUND, -203, "key not found")                                  \
    X(VALUE_PROVIDED, -204, "value is provided")                             \
    X(LEASE_PROVIDED, -205, "lease is provided")                             \
    X(TOO_MANY_OPS, -206, "too many operations in txn request")              \
    X(DUPLICATE_KEY, -207, "duplicate key given in txn request")             \
    X(LEASE_NOT_FOUND, -208, "requested lease not found")                    \
    X(REQUEST_TOO_LARGE, -209, "request is too large")                       \
    X(NO_SPACE, -210, "mvcc: database space exceeded")                       \
    X(TOO_MANY_REQUESTS, -211, "too many requests")                          \
    X(WATCH_CTRL_UNREAD, -212, "watch control responses not read")           \
    X(LEASE_EXIST, -214, "lease already exists")                             \
    X(LEASE_TTL_TOO_LARGE, -215, "too large lease TTL")                      \
    /* server / raft */                                                      \
    X(LEADER_CHANGED, -300, "leader changed")                                \
    X(NO_LEADER, -301, "no leader")                                          \
    X(NOT_LEADER, -302, "not leader")                                        \
    X(PROPOSAL_DROPPED, -303, "raft proposal dropped")                       \
    X(RAFT_COMPACTED, -304, "requested index is unavailable due to compaction") \
    X(RAFT_UNAVAILABLE, -305, "requested entry at index is unavailable") \
    X(TIMEOUT_LEADER_FAIL, -306,                                             \
      "request timed out, possibly due to previous leader failure")         \
    X(TIMEOUT_CONN_LOST, -307,                                               \
      "request timed out, possibly due to connection lost")                 \
    /* a CORRUPT alarm is active: the request was refused (applier.h);     \
     * CORRUPT above is damaged data found by this member */               \
    X(CLUSTER_CORRUPT, -308, "corrupt cluster")                              \
    /* membership (mapped to etcd errors by api) */                         \
    X(MEMBER_EXIST, -400, "member ID already exist")                         \
    X(PEER_URL_EXIST, -401, "Peer URLs already exists")                      \
    X(MEMBER_NOT_ENOUGH_STARTED, -402,                                       \
      "re-configuration failed due to not enough started members")          \
    X(MEMBER_BAD_URLS, -403, "given member URLs are invalid")                \
    X(MEMBER_NOT_FOUND, -404, "member not found")                            \
    X(MEMBER_NOT_LEARNER, -405, "can only promote a learner member")         \
    X(LEARNER_NOT_READY, -406,                                               \
      "can only promote a learner member which is in sync with leader")     \
    X(TOO_MANY_LEARNERS, -407, "too many learner members in cluster")        \
    X(BAD_LEADER_TRANSFEREE, -408, "bad leader transferee")                  \
    X(LEADER_TRANSFER_TIMEOUT, -409,                                         \
      "request timed out, leader transfer took too long")                   \
    X(MEMBER_REMOVED, -410,                                                  \
      "the member has been permanently removed from the cluster")           \
    X(UNHEALTHY, -411, "unhealthy cluster")                                  \
    /* v3election / v3lock (concurrency's errors, plain in etcd: Unknown) */ \
    X(ELECTION_NOT_LEADER, -500, "election: not leader")                     \
    X(ELECTION_NO_LEADER, -501, "election: no leader")                       \
    X(LEADER_KEY_MISSING, -502, "\"leader\" field must be provided")         \
    X(SESSION_EXPIRED, -503, "mutex: session is expired")                   \
    /* auth (issue 19; etcd's auth/store.go errors) */                       \
    X(AUTH_ROOT_USER_NOT_EXIST, -600, "root user does not exist")            \
    X(AUTH_ROOT_ROLE_NOT_EXIST, -601, "root user does not have root role")   \
    X(AUTH_USER_EXISTS, -602, "user name already exists")                    \
    X(AUTH_USER_EMPTY, -603, "user name is empty")                           \
    X(AUTH_USER_NOT_FOUND, -604, "user name not found")                      \
    X(AUTH_ROLE_EXISTS, -605, "role name already exists")                    \
    X(AUTH_ROLE_NOT_FOUND, -606, "role name not found")                      \
    X(AUTH_ROLE_EMPTY, -607, "role name is empty")                           \
    X(AUTH_FAILED, -608,                                                     \
      "authentication failed, invalid user ID or password")                 \
    X(AUTH_PERMISSION_DENIED, -609, "permission denied")                     \
    X(AUTH_ROLE_NOT_GRANTED, -610, "role is not granted to the user")        \
    X(AUTH_PERMISSION_NOT_GRANTED, -611,                                     \
      "permission is not granted to the role")                              \
    X(AUTH_NOT_ENABLED, -612, "authentication is not enabled")               \
    X(AUTH_INVALID_TOKEN, -613, "invalid auth token")                        \
    X(AUTH_INVALID_MGMT, -614, "invalid auth management")                    \
    X(AUTH_OLD_REVISION, -615, "revision of auth store is old")           \
    /* JWT tokens (auth/token_jwt.c, -630..-649) */                          \
    X(AUTH_INVALID_OPTS, -630, "auth: invalid auth options")                 \
    X(AUTH_VERIFY_ONLY, -631,                                                \
      "auth: token signing attempted with verify-only key")                 \
    X(AUTH_SIGN, -632, "auth: failed to sign a JWT token")                  \
    /* bbolt (the etcd snapshot format) and Maintenance.Snapshot */          \
    X(BBOLT_CORRUPT, -700, "bbolt: invalid database")                        \
    X(BBOLT_ORDER, -701, "bbolt: keys not in ascending order")               \
    X(BBOLT_PLAN, -702, "bbolt: the input changed between the two passes")   \
    X(BBOLT_DEPTH, -703, "bbolt: buckets nested too deep")                   \
    /* the import of an etcd data dir (server/import_*.c) */                 \
    X(IMPORT_UNSUPPORTED, -710,                                              \
      "import: the etcd data dir holds a record cetcd cannot import")       \
    X(IMPORT_LAYOUT, -711,                                                   \
      "import: the etcd data dir's layout cannot be imported")              \
    /* online defragmentation (server/defrag.c, backend_journal.c) */        \
    X(DEFRAG_NO_DISK, -740,                                                  \
      "etcdserver: not enough free disk space to defragment the store")     \
    X(DEFRAG_JOURNAL_FULL, -741,                                             \
      "etcdserver: too many writes during defragmentation, try again")      \
    X(DEFRAG_STORE_REPLACED, -742,                                           \
      "etcdserver: the store was replaced by a snapshot during "             \
      "defragmentation")                                                    \
    /* operations (-770..-799): config file, corruption checks */          \
    X(CONFIG_FILE, -770, "bad configuration file")                         \
    X(HASH_MISMATCH, -771, "a peer's HashKV differs from this member's")  \
    /* online defragmentation, session 16 (-880..-889) */                 \
    X(DEFRAG_PIN_PENDING, -880,                                            \
      "etcdserver: the last defragmented store is not pinned yet, try "    \
      "again")                                                             \
    /* etcd's auth errors as its maintenance server answers them, not
     * turned into rpctypes (gRPC Unknown): svc_auth_check_maint
     * (-930..-939) */                                                     \
    X(AUTH_RAW_USER_EMPTY, -930, "auth: user name is empty")               \
    X(AUTH_RAW_USER_NOT_FOUND, -931, "auth: user not found")               \
    X(AUTH_RAW_PERMISSION_DENIED, -932, "auth: permission denied")         \
    X(AUTH_RAW_INVALID_TOKEN, -933, "auth: invalid auth token")            \
    /* logging (-820..-839) */                                             \
    X(LOG_OUTPUT, -820, "cannot open a log output")                        \
    /* HTTP request bodies that stay open, session 17 (-900..-909) */      \
    X(MORE, -900, "the value goes on in bytes still to come")

enum {
#define ERR_ENUM(name, code, msg) ERR_##name = (code),
    ERR_MAP(ERR_ENUM)
#undef ERR_ENUM
};

/* err_str returns the static message of code (never NULL). */
const char *err_str(int code);

/* err_name returns the static "ERR_X" name of code (never NULL). */
const char *err_name(int code);

/* err_from_errno maps an errno value (positive) to an ERR_* code. */
int err_from_errno(int errnum);

#endif
