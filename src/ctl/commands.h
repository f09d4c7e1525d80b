/*
 * commands.h - the commands of cetcdctl, one struct ctl_cmd each (a group
 * such as "member" holds its sub-commands).  Each is defined in its
 * ctl_<group>.c file and listed by main.c.
 */
#ifndef CETCD_CTL_COMMANDS_H
#define CETCD_CTL_COMMANDS_H

#include "ctl/ctl.h"

extern const struct ctl_cmd ctl_cmd_version; /* ctl_version.c */
extern const struct ctl_cmd ctl_cmd_get;        /* ctl_get.c */
extern const struct ctl_cmd ctl_cmd_put;        /* ctl_put.c */
extern const struct ctl_cmd ctl_cmd_del;        /* ctl_del.c */
extern const struct ctl_cmd ctl_cmd_txn;        /* ctl_txn.c */
extern const struct ctl_cmd ctl_cmd_compaction; /* ctl_compaction.c */
extern const struct ctl_cmd ctl_cmd_auth;    /* ctl_auth.c */
extern const struct ctl_cmd ctl_cmd_user;    /* ctl_user.c */
extern const struct ctl_cmd ctl_cmd_role;    /* ctl_role.c */
extern const struct ctl_cmd ctl_cmd_alarm;       /* ctl_alarm.c */
extern const struct ctl_cmd ctl_cmd_endpoint;    /* ctl_endpoint.c */
extern const struct ctl_cmd ctl_cmd_move_leader; /* ctl_move_leader.c */
extern const struct ctl_cmd ctl_cmd_member;      /* ctl_member.c */
extern const struct ctl_cmd ctl_cmd_watch;       /* ctl_watch.c */
extern const struct ctl_cmd ctl_cmd_make_mirror; /* ctl_mirror.c */
extern const struct ctl_cmd ctl_cmd_lease; /* ctl_lease.c */
extern const struct ctl_cmd ctl_cmd_lock;  /* ctl_lock.c */
extern const struct ctl_cmd ctl_cmd_elect; /* ctl_elect.c */
extern const struct ctl_cmd ctl_cmd_defrag;   /* ctl_defrag.c */
extern const struct ctl_cmd ctl_cmd_snapshot; /* ctl_snapshot.c */
extern const struct ctl_cmd ctl_cmd_check;    /* ctl_check.c */
extern const struct ctl_cmd ctl_cmd_migrate;  /* ctl_migrate.c */

/* Shared by defrag --data-dir and snapshot restore (ctl_snapshot_util.c).
 * ctl_bbolt_copy rewrites the bbolt database src into the new file dst
 * (0600, fsynced) with the project's validating reader and writer: every
 * bucket and entry, compacted.  ci >= 0 also does what etcd's mvcc store
 * does to a restored db: makes the key, lease and meta buckets if missing
 * and sets meta/consistent_index to ci.  Returns 0, or an ERR_* code with
 * the reason in err.  ctl_fsync_dir fsyncs the directory holding path
 * (best effort). */
int ctl_bbolt_copy(const char *src, const char *dst, int64_t ci, char *err,
                   size_t cap);
void ctl_fsync_dir(const char *path);

/* Shared by the member, move-leader and alarm commands (ctl_member.c).
 * ctl_cluster_id_parse parses a member ID as etcdctl does (Go's
 * strconv.ParseUint(s, 16, 64)): 0, or -1 with Go's error text in err.
 * ctl_cluster_print_rpc prints a response for -w json or protobuf, and
 * exits with etcdctl's "<format> not supported as output format" for
 * fields and table (not for simple). */
int ctl_cluster_id_parse(const char *s, uint64_t *id_out, char *err,
                         size_t cap);
void ctl_cluster_print_rpc(enum ctl_output o, const ProtobufCMessage *m);

/* Shared by the auth, user and role commands.  ctl_auth_display prints an
 * auth response in json or protobuf and returns true; for table (and for
 * fields when fields is false) it exits with etcdctl's "<format> not
 * supported as output format"; otherwise it returns false and the caller
 * prints the simple or fields form (ctl_auth.c). */
bool ctl_auth_display(enum ctl_output out, const ProtobufCMessage *resp,
                      bool fields);
/* ctl_role_get_call gets a role (exits on failure; the caller frees the
 * response with protobuf_c_message_free_unpacked) and
 * ctl_role_get_display prints it as "role get" does (ctl_role.c). */
struct Etcdserverpb__AuthRoleGetResponse;
struct Etcdserverpb__AuthRoleGetResponse *ctl_role_get_call(const char *role);
void ctl_role_get_display(enum ctl_output out, const char *role,
                          const struct Etcdserverpb__AuthRoleGetResponse *r);

#endif
