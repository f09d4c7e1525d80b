/*
 * boot_guard.h - when may the LMDB store be trusted after a crash?
 *
 * The store commits without fsync (MDB_NOSYNC): the WAL is the durable log
 * and the store is a cache of it, so no fsync sits on the write path but
 * the WAL's.  A killed process loses nothing the store committed (its
 * writes are in the page cache), but a machine that loses power may leave
 * the store torn.  So the member records "dirty + this boot's id" before
 * serving and "clean" after a final sync at shutdown.  At the next start,
 * a store left dirty by an EARLIER boot is not trusted: it is moved aside
 * and rebuilt from the WAL.  A store left dirty in the same boot (kill -9)
 * is fine as it is.
 */
#ifndef CETCD_SERVER_BOOT_GUARD_H
#define CETCD_SERVER_BOOT_GUARD_H

#include <stdbool.h>

/* boot_guard_check: *trusted_out = false when the store in db_dir must be
 * rebuilt.  A missing state file means a fresh store (trusted).  Errors:
 * ERR_IO. */
int boot_guard_check(const char *db_dir, bool *trusted_out);
/* boot_guard_mark writes the state file ("dirty" or "clean" with this
 * boot's id) durably (file and directory fsync).  Errors: ERR_IO. */
int boot_guard_mark(const char *db_dir, bool clean);
/* boot_guard_distrust records that the store must not be trusted even in
 * this boot (it may hold batches the WAL failed to make durable): the next
 * boot_guard_check answers false.  Errors: ERR_IO. */
int boot_guard_distrust(const char *db_dir);
/* boot_guard_set_boot_id overrides the boot id (tests simulate a reboot);
 * NULL restores /proc/sys/kernel/random/boot_id. */
void boot_guard_set_boot_id(const char *id);

#endif
