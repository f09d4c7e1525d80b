/*
 * server_harness.h - an in-process single member for the server and svc
 * unit tests: the set-up they all repeated (a temporary data dir, the
 * single-member config, start, a synchronous put, log capture).
 *
 *   char dir[256];
 *   harness_dir_make(dir, sizeof dir, "members-retry");  (cmocka setup)
 *   struct server_config c = harness_config(dir);        (change fields)
 *   struct server *s = harness_start(&c);                (asserts rc 0)
 *   assert_int_equal(harness_put(s, "k", "v"), 0);
 *   ...
 *   server_stop(s);
 *   harness_dir_remove(dir);                              (cmocka teardown)
 *
 * Log capture: harness_log_begin(path) sends stderr (the log) to path,
 * harness_log_end() restores it; harness_log_count(path, needle) counts
 * the needle's occurrences in the file (the first MiB of it).
 *
 * Everything asserts with cmocka: a failure fails the calling test.
 * Linked into every unit test of the server and svc modules
 * (tests/CMakeLists.txt).
 */
#ifndef CETCD_TESTS_SERVER_HARNESS_H
#define CETCD_TESTS_SERVER_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "server/server.h"

/* mkdtemp of /tmp/cetcd-<tag>-XXXXXX into dir; 0 or -1 (cmocka setup). */
int harness_dir_make(char *dir, size_t cap, const char *tag);
/* rm -rf dir; the command's status (cmocka teardown). */
int harness_dir_remove(const char *dir);

/* The single-member config the tests start from: member "default" with
 * etcd's default URLs, token and sizes, heartbeat 100 ms, election
 * 1000 ms, snapshot count 100000, in data dir dir. */
struct server_config harness_config(const char *dir);
/* server_start(c), asserted to succeed. */
struct server *harness_start(const struct server_config *c);
/* Waits (real time, up to 5 s) until s has published itself; asserts it. */
void harness_wait_published(struct server *s);

/* Proposes ir through raft and waits for its answer: the answer's error
 * (0 = applied; a refusal before raft is answered too). */
int harness_propose(struct server *s, Cetcdpb__InternalRequest *ir);

/* Proposes a put of key=value through raft and waits for its answer:
 * the answer's error (0 = applied). */
int harness_put(struct server *s, const char *key, const char *value);

/* Proposes a LeaseGrant of lease id with ttl seconds (past the API's
 * checks) and waits for its answer: its error (0 = applied). */
int harness_lease_grant(struct server *s, int64_t id, int64_t ttl);

/* Renews lease id on this member (server_lease_renew, local only) and
 * waits for the answer: its error, and the TTL into *ttl_out (may be
 * NULL). */
int harness_lease_renew(struct server *s, int64_t id, int64_t *ttl_out);

void harness_sleep_ms(long ms);
uint64_t harness_now_ms(void); /* CLOCK_MONOTONIC */

void harness_log_begin(const char *path);
void harness_log_end(void);
size_t harness_log_count(const char *path, const char *needle);

#endif
