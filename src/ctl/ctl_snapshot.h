/*
 * ctl_snapshot.h - what the files of cetcdctl's "snapshot" command share
 * (private to them): ctl_snapshot.c (save, status and the command group),
 * ctl_snapshot_restore.c (restore) and ctl_snapshot_util.c (the helpers
 * below).  ctl_bbolt_copy and ctl_fsync_dir, which defrag uses too, are
 * declared in commands.h and defined in ctl_snapshot_util.c.
 *
 * Everything here runs on the command's (main) thread and writes to the
 * process's stdio streams; none of it allocates memory the caller frees.
 */
#ifndef CETCD_CTL_SNAPSHOT_H
#define CETCD_CTL_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ctl/ctl.h"

/* The length of the SHA-256 trailer etcd appends to a snapshot (and of
 * any SHA-256 digest). */
#define CTL_SNAPSHOT_SHA256_LEN 32

/* The "snapshot restore" sub-command (ctl_snapshot_restore.c), listed by
 * the snapshot group in ctl_snapshot.c. */
extern const struct ctl_cmd ctl_snapshot_restore_cmd;

/* ---- zap's JSON lines on stderr (the logs etcdctl and clientv3 print)
 *
 * A line is ctl_snapshot_zap_begin, any number of ctl_snapshot_zap_field
 * (or hand-written ",\"key\":value" text on stderr), then
 * ctl_snapshot_zap_end, which ends the line and flushes stderr.  These
 * cannot fail (stdio errors are ignored, as zap ignores them). */

/* ctl_snapshot_zap_str writes s (NUL-terminated) to stderr as zap's JSON
 * encoder writes a string: quoted, with \" \\ \n \r \t, other control
 * bytes as \u00xx and invalid UTF-8 as \ufffd. */
void ctl_snapshot_zap_str(const char *s);

/* ctl_snapshot_go_float writes v to f as Go's strconv 'f' format with the
 * fewest digits that read back as v (zap's float fields). */
void ctl_snapshot_go_float(FILE *f, double v);

/* ctl_snapshot_zap_begin starts a line: level, the time now as "ts"
 * (ISO 8601 local time when iso is true, as clientv3's logger writes it,
 * else epoch seconds, as etcdctl's), caller and msg.  The strings are
 * borrowed for the call only. */
void ctl_snapshot_zap_begin(const char *level, bool iso, const char *caller,
                            const char *msg);

/* ctl_snapshot_zap_field adds the string field key (written as it is:
 * a plain name) = value (escaped) to the line begun. */
void ctl_snapshot_zap_field(const char *key, const char *value);

/* ctl_snapshot_zap_end ends the line and flushes stderr. */
void ctl_snapshot_zap_end(void);

/* ---- small file helpers */

/* ctl_snapshot_go_errno returns Go's text for errno e (syscall.Errno's
 * Error(), as etcdctl prints it): C's message with a lower-case first
 * letter.  The text is written in buf (cap bytes) or is a constant; either
 * way it stays valid while buf does. */
const char *ctl_snapshot_go_errno(int e, char *buf, size_t cap);

/* ctl_snapshot_write_all writes the n bytes at p to fd, retrying short
 * writes and EINTR.  Returns 0, or the errno of the failed write. */
int ctl_snapshot_write_all(int fd, const void *p, size_t n);

#endif /* CETCD_CTL_SNAPSHOT_H */
