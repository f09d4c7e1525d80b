/*
 * corrupt.h - the corruption checks of etcd 3.4 (etcdserver/corrupt.go):
 * this member's HashKV compared with its peers' at the same revision.
 *
 * How a member asks a peer: as etcd 3.4 POSTs to the peer URL's
 * /members/hashkv, a member asks each peer's peer listener
 * (server_peer_hash_kv: /cetcdpb.Maintenance/HashKV, through the peer
 * transport, with its URLs and peer TLS), never the client API, so the
 * checks compare with auth enabled (HashKV needs root there) and with
 * --client-cert-auth.  A peer that does not answer (down, unreachable,
 * refusing) is logged and skipped, never counted as a mismatch.  One peer
 * at a time, each for up to the request timeout; at most
 * CORRUPT_PEERS_MAX peers.  A member with no peers computes no hash.
 *
 *  - corrupt_check_initial (--experimental-initial-corrupt-check): before
 *    the member serves clients.  A peer of the same compact revision with
 *    a different hash is a mismatch; a peer that lags (future revision) or
 *    has compacted past it, or does not answer, is logged and skipped.
 *    Any mismatch fails the start (etcd: "<id> found data inconsistency
 *    with peers", fatal).
 *  - corrupt_monitor (--experimental-corrupt-check-time): every interval,
 *    while this member leads, it hashes its store, asks the peers at that
 *    revision, passes a linearizable barrier and hashes again; its own
 *    hash changing at the same revision, a peer ahead of it (revision or
 *    compact revision), or a peer of the same compact revision with
 *    another hash raises the CORRUPT alarm (member 0, as etcd) through
 *    raft: every member then refuses writes "etcdserver: corrupt cluster"
 *    until `etcdctl alarm disarm`.
 *
 *  - the compaction-time check (etcd 3.5's --experimental-compact-hash-
 *    check-enabled, every --experimental-compact-hash-check-time, on the
 *    leader): once the store's compact revision C is new, the leader's
 *    hash of what it holds at or below C (server_hash_kv_compacted: it
 *    depends only on the history up to C) is compared with each peer's at
 *    C (server_peer_hash_kv with compacted; plain HashKV at C answers
 *    "compacted", as etcd 3.4's).  A peer of the same
 *    compact revision with another hash raises CORRUPT (member 0, as etcd
 *    3.5); peers not at C are skipped and C is tried again at the next
 *    pass until every peer was compared.  Each member hashes only when
 *    asked, so at most once per compaction and peer pass, never while no
 *    compaction happens.
 *
 * Defaults (cmd/flags.c; etcd has them all off): the initial check on,
 * the periodic check every 5 minutes, the compaction-time check every
 * minute, both stretched to a CPU budget (CORRUPT_CPU_BUDGET below).  Each
 * pass hashes every revision the store keeps (a full scan, not an
 * incremental hash), a cost per pass that grows with the store; measured
 * in docs/BENCHMARKS.md "Corruption checks".  An explicit false or 0
 * turns a check off.
 */
#ifndef CETCD_CMD_CORRUPT_H
#define CETCD_CMD_CORRUPT_H

#include <stdbool.h>
#include <stdint.h>

#include "server/server.h"

#define CORRUPT_PEERS_MAX 64

/* corrupt_check_initial runs the initial check on s (started, its peer
 * listener serving, not yet serving clients).  Returns 0 (no mismatch
 * found; peers that do not answer are only logged), ERR_HASH_MISMATCH
 * (logged), or an error of this member's own hash (server_hash_kv's).
 * Blocks up to the request timeout per peer that is reachable but does
 * not answer. */
int corrupt_check_initial(struct server *s, uint32_t election_ms);

struct corrupt_monitor;

/* The CPU budget of a monitor whose interval is cetcd's default: after a
 * pass that took C of this thread's CPU (its own hashes), the next waits
 * at least CORRUPT_CPU_BUDGET x C, so each monitor spends at most 1/1000
 * of a core on this member once past its first pass, and its peers'
 * answers (one hash each per pass, the leader hashes one or two) about as
 * much: both monitors together stay near 0.2 % of one core on every
 * member whatever the store's size and the compaction rate
 * (docs/BENCHMARKS.md "Corruption checks", session 23: at the fixed
 * defaults a 1-minute auto-compaction over 100k keys cost 5.7 % of the
 * members' CPU; a budget of 200 still 2.7 % over 400 s).  A check then
 * runs less often on a large store (a 1 s hash: every ~17 minutes).  An
 * interval given explicitly (flag, variable or config file) is kept as
 * given, as etcd. */
#define CORRUPT_CPU_BUDGET 1000

/* corrupt_next_wait_ms: the wait after a pass of pass_cpu_ns: interval_ms,
 * or with budget at least CORRUPT_CPU_BUDGET x the pass.  Pure. */
uint64_t corrupt_next_wait_ms(uint64_t interval_ms, uint64_t pass_cpu_ns,
                              bool budget);

/* corrupt_monitor_start starts the periodic check's thread (interval_ms >
 * 0), or with compact the compaction-time check's; budget: interval_ms is
 * the default, stretched to the CPU budget (above).  Returns 0,
 * ERR_NOMEM, or ERR_IO (no thread). */
int corrupt_monitor_start(struct server *s, uint32_t election_ms,
                          uint64_t interval_ms, bool compact, bool budget,
                          struct corrupt_monitor **out);

/* corrupt_monitor_stop stops and joins the thread (within one peer call's
 * timeout) and frees m; NULL is fine.  Before server_stop. */
void corrupt_monitor_stop(struct corrupt_monitor *m);

#endif
