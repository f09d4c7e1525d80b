/*
 * svc.h - the etcd v3 services of a member, transport-neutral: KV, Cluster,
 * Maintenance, and the peer listener's Join and Promote.  A service takes a
 * DECODED request (the protobuf-c message) and answers through a
 * completion with 0 and a reply message, or with an ERR_* code
 * (util/err.h).  It never sees gRPC: decoding the bytes, encoding the
 * reply and mapping ERR_* codes to a wire status (gRPC: api/errors.c; the
 * HTTP gateway to come: its own) are the transport's.  The layer sits
 * between api/ (the gRPC adapters) and server/ (docs/ARCHITECTURE.md).
 * Files: kv.c, kv_check.c (etcd's request checks, kv_check.h), cluster.c,
 * maintenance.c, lease.c, lease_keepalive.c, watch.c, stream.c (the
 * in-process stream), lock.c, lock_wait.c, lock_ops.c, election.c,
 * observe.c (v3lock and v3election, lock_int.h).
 *
 * State.  svc keeps none of its own: every function takes the member it
 * serves (struct server, borrowed; it must be running, see server.h) and
 * everything a pending request needs travels with that request.
 *
 * Requests.  Unless a function says otherwise, the request is BORROWED for
 * the call only: the service copies what it keeps (a write is packed into
 * its raft proposal before the function returns), so the caller may free
 * the request as soon as the function returns, even while the answer is
 * still to come.
 *
 * Completions.  Every service function calls done.fn EXACTLY ONCE, with
 *   err == 0 and reply: the response message (its type is named at each
 *        function), borrowed for the callback only: pack or copy it there;
 *   err < 0 and reply == NULL: an ERR_* code from the function's list
 *        (any function may also give ERR_NOMEM).
 * done.fn may run before the service function returns (inline: a refusal,
 * a local answer, a serializable read) or later on another thread: the
 * apply thread (a write applied), a read worker (a linearizable read), the
 * raft thread or whichever thread runs a raft pass (a leader transfer, a
 * failed read round or proposal), the house thread (a request timed out:
 * ERR_TIMEOUT and its two variants, see server/timeout.h), a peer-call
 * thread (a promotion forwarded to the leader).  It runs under the
 * server's locks (docs/ARCHITECTURE.md "Lock order"): it must not block
 * and must not call back into the server; handing the reply to another
 * thread (api/ pushes the answer onto an event loop) is what it is for.
 *
 * Checks.  The services make etcd's request checks (v3rpc/key.go,
 * quota.go, member.go) before anything reaches raft: the quota first (a
 * write that would pass the backend quota gets ERR_NO_SPACE and raises the
 * NOSPACE alarm), then the request's own shape (kv_check.h).
 *
 * Streams (Watch: watch.c; LeaseKeepAlive: lease_keepalive.c; Lock and
 * Campaign: lock_wait.c; Observe: observe.c; Snapshot: snapshot.c).
 * A streaming service works on a struct svc_stream, the transport's end of
 * one open stream, below (gRPC's: api/stream.c; in-process: stream.c).
 */
#ifndef CETCD_SVC_SVC_H
#define CETCD_SVC_SVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "cetcdpb/internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

struct server;

/* The completion of one request (see "Completions" above).  fn is called
 * exactly once with ctx; ctx is the caller's (api/: the gRPC call).
 * metadata, when set, gives the caller's request metadata (as
 * svc_stream.metadata: the value of a lower-case key, not NUL-terminated,
 * or NULL) until fn is called: the services read the auth token there
 * ("token", or "authorization" as etcd's gateway sends it).  NULL: an
 * in-process caller with no identity (with auth enabled its requests are
 * refused "user name is empty", as etcd's for a request without token). */
typedef void (*svc_done_fn)(void *ctx, int err, const ProtobufCMessage *reply);
/* The metadata key under which a transport gives the common name of the
 * caller's verified client certificate when --client-cert-auth is on
 * (etcd's AuthInfoFromTLS: the caller's user when it sends no token).  No
 * client can send it: the transport answers it itself, never from the
 * request's headers (api/done.c, api/stream.c; the gateway, as etcd's,
 * gives none). */
#define SVC_META_PEER_CN ":peer-cn"
struct svc_done {
    svc_done_fn fn; /* called exactly once */
    void *ctx;      /* passed to fn, untouched */
    const char *(*metadata)(void *ctx, const char *key, size_t *len_out);
};

/* --- KV (kv.c) ----------------------------------------------------------- */

/* svc_kv_range checks req (ERR_EMPTY_KEY) and serves it: a serializable
 * read, or any read on a lone leading voter, at once on the caller's
 * thread; a linearizable one after a ReadIndex round, on a read worker.
 * TAKES OWNERSHIP of req, which must come from
 * etcdserverpb__range_request__unpack with the default allocator (NULL):
 * it is freed with free_unpacked once answered (it is kept for the read).
 * Reply: Etcdserverpb__RangeResponse (its keys point into the store; they
 * stay valid during done.fn only).  With auth on, the caller's read
 * permission is checked once the read's consistency point is reached
 * (after the ReadIndex wait, as etcd), so done.metadata is read on the
 * thread that serves the read.  Errors: ERR_EMPTY_KEY, ERR_COMPACTED,
 * ERR_FUTURE_REV, ERR_TIMEOUT (no ReadIndex answer within the request
 * timeout), ERR_LEADER_CHANGED, ERR_STOPPED, ERR_NOMEM, and those of
 * svc_auth_check_read. */
void svc_kv_range(struct server *s, Etcdserverpb__RangeRequest *req,
                  struct svc_done done);

/* The writes: the quota check (Put, Txn), etcd's request checks, then a
 * raft proposal; answered once applied here, on the apply thread.
 * Errors of every write: ERR_REQUEST_TOO_LARGE (over
 * --max-request-bytes), ERR_TOO_MANY_REQUESTS (the proposal queue is
 * full), ERR_STOPPED, ERR_TIMEOUT, ERR_TIMEOUT_LEADER_FAIL,
 * ERR_TIMEOUT_CONN_LOST (server_propose), ERR_NO_SPACE (the quota, or the
 * NOSPACE alarm at apply time), ERR_NOMEM; and those named below. */

/* svc_kv_put: reply Etcdserverpb__PutResponse.  Errors: ERR_EMPTY_KEY,
 * ERR_VALUE_PROVIDED, ERR_LEASE_PROVIDED (ignore_* misuse), ERR_KEY_NOT_FOUND
 * (ignore_value on a missing key), ERR_LEASE_NOT_FOUND, ERR_TOO_LARGE (a key
 * past the store's limit). */
void svc_kv_put(struct server *s, const Etcdserverpb__PutRequest *req,
                struct svc_done done);

/* svc_kv_delete_range: reply Etcdserverpb__DeleteRangeResponse.  Errors:
 * ERR_EMPTY_KEY. */
void svc_kv_delete_range(struct server *s,
                         const Etcdserverpb__DeleteRangeRequest *req,
                         struct svc_done done);

/* svc_kv_txn: reply Etcdserverpb__TxnResponse.  A read-only txn goes
 * through raft too (linearizable; one log entry more than etcd).  Errors:
 * ERR_TOO_MANY_OPS (--max-txn-ops, nested ops counted), ERR_EMPTY_KEY,
 * ERR_KEY_NOT_FOUND (an empty op), ERR_DUPLICATE_KEY, ERR_COMPACTED and
 * ERR_FUTURE_REV (a range inside), and the errors of Put. */
void svc_kv_txn(struct server *s, const Etcdserverpb__TxnRequest *req,
                struct svc_done done);

/* svc_kv_compact: reply Etcdserverpb__CompactionResponse.  Errors:
 * ERR_COMPACTED, ERR_FUTURE_REV. */
void svc_kv_compact(struct server *s,
                    const Etcdserverpb__CompactionRequest *req,
                    struct svc_done done);

/* --- Cluster (cluster.c) ------------------------------------------------- */

/* svc_cluster_member_list answers from the local members store once a
 * linearizable barrier (server_barrier_async) has passed: always when
 * req->linearizable (errors as the barrier's: ERR_TIMEOUT, ...), and for
 * a request without it while the member knows a leader (a failed barrier
 * then serves the local store, as etcd 3.4 would at once).  Reply:
 * Etcdserverpb__MemberListResponse, possibly on a read worker thread.
 * Errors: ERR_NOMEM. */
void svc_cluster_member_list(struct server *s,
                             const Etcdserverpb__MemberListRequest *req,
                             struct svc_done done);

/* The changes propose a raft conf change (server_member_change) and are
 * answered once it is applied here, with the members as this member's
 * store then lists them.  Peer URLs are trimmed of surrounding space in
 * place (etcd's types.NewURLs keeps the trimmed URL), so these take the
 * request non-const; it is still borrowed for the call only.  A decoder
 * that lets a URL hold a NUL byte must refuse the request itself with
 * ERR_MEMBER_BAD_URLS: the C strings end at the NUL and would look valid
 * here (api/cluster.c does so for protobuf).  Errors: those of
 * server_member_change (server.h): ERR_MEMBER_BAD_URLS,
 * ERR_PEER_URL_EXIST, ERR_MEMBER_EXIST, ERR_MEMBER_NOT_FOUND,
 * ERR_MEMBER_NOT_LEARNER, ERR_TOO_MANY_LEARNERS,
 * ERR_MEMBER_NOT_ENOUGH_STARTED, ERR_UNHEALTHY, ERR_LEARNER_NOT_READY,
 * ERR_NO_LEADER, ERR_TIMEOUT (and its two variants), ERR_STOPPED,
 * ERR_NOMEM. */

/* svc_cluster_member_add: reply Etcdserverpb__MemberAddResponse (member:
 * the new one). */
void svc_cluster_member_add(struct server *s,
                            Etcdserverpb__MemberAddRequest *req,
                            struct svc_done done);

/* svc_cluster_member_remove: reply Etcdserverpb__MemberRemoveResponse. */
void svc_cluster_member_remove(struct server *s,
                               const Etcdserverpb__MemberRemoveRequest *req,
                               struct svc_done done);

/* svc_cluster_member_update: reply Etcdserverpb__MemberUpdateResponse. */
void svc_cluster_member_update(struct server *s,
                               Etcdserverpb__MemberUpdateRequest *req,
                               struct svc_done done);

/* svc_cluster_member_promote: reply Etcdserverpb__MemberPromoteResponse.
 * On a follower the promotion is forwarded to the leader and the reply
 * lists the members as the leader does (done.fn then runs on a peer-call
 * thread). */
void svc_cluster_member_promote(struct server *s,
                                const Etcdserverpb__MemberPromoteRequest *req,
                                struct svc_done done);

/* svc_peer_join answers a member that joins with
 * --initial-cluster-state=existing (the peer listener's Join service): the
 * cluster id and its members.  Reply: Cetcdpb__JoinResponse, at once.
 * Errors: ERR_INVAL (another --initial-cluster-token), ERR_NOMEM. */
void svc_peer_join(struct server *s, const Cetcdpb__JoinRequest *req,
                   struct svc_done done);

/* svc_peer_promote runs a promotion a follower forwarded to this member
 * (the peer listener's Promote; it must lead).  The outcome of the change
 * is the reply: Cetcdpb__PromoteResponse with error 0 and the members, or
 * error set to the ERR_* code (a stable number the follower hands its
 * client as its own).  Errors of the call itself (done.fn's err): ERR_INVAL
 * (the request names another cluster id), ERR_NOMEM. */
void svc_peer_promote(struct server *s, const Cetcdpb__PromoteRequest *req,
                      struct svc_done done);

/* --- Maintenance (maintenance.c) ----------------------------------------- */

/* SVC_MOVE_LEADER_TIMEOUT_MS: a leader transfer gives up after this when
 * the caller's deadline is later or absent. */
#define SVC_MOVE_LEADER_TIMEOUT_MS 10000

/* svc_maint_status answers at once; version is the member's reported one
 * (server_status).  Reply: Etcdserverpb__StatusResponse.
 * Errors: ERR_BUSY, ERR_IO (the backend's size). */
void svc_maint_status(struct server *s, const Etcdserverpb__StatusRequest *req,
                      struct svc_done done);

/* svc_maint_move_leader hands leadership to the voter req->targetid (this
 * member must lead) and answers once it leads, on the raft thread.
 * deadline_ns: the caller's deadline on CLOCK_MONOTONIC in nanoseconds
 * (INT64_MAX: none); the transfer gives up at the earlier of it and
 * SVC_MOVE_LEADER_TIMEOUT_MS from now.  Reply:
 * Etcdserverpb__MoveLeaderResponse.  Errors: ERR_NOT_LEADER,
 * ERR_BAD_LEADER_TRANSFEREE, ERR_LEADER_TRANSFER_TIMEOUT, ERR_STOPPED,
 * ERR_NOMEM. */
void svc_maint_move_leader(struct server *s,
                           const Etcdserverpb__MoveLeaderRequest *req,
                           int64_t deadline_ns, struct svc_done done);

/* svc_maint_alarm: every action (GET, ACTIVATE, DEACTIVATE) goes through
 * raft, as in etcd 3.4.  Reply: Etcdserverpb__AlarmResponse, on the apply
 * thread.  Errors: those of every write (above) but ERR_NO_SPACE. */
void svc_maint_alarm(struct server *s, const Etcdserverpb__AlarmRequest *req,
                     struct svc_done done);

/* svc_maint_hash_kv answers from this member's store (etcd 3.4's hash of
 * its key bucket, server_hash_kv), computed on cetcd-slow
 * (server_task_post_slow): done runs there, or inline on a refusal.
 * Reply: Etcdserverpb__HashKVResponse (header.revision: the store's
 * current revision; compact_revision -1 when never compacted).  Errors:
 * ERR_COMPACTED, ERR_FUTURE_REV, ERR_BUSY, ERR_NOMEM, ERR_STOPPED. */
void svc_maint_hash_kv(struct server *s, const Etcdserverpb__HashKVRequest *req,
                       struct svc_done done);
/* svc_peer_hash_kv answers a peer's corruption check (cmd/corrupt.h; the
 * peer listener's /cetcdpb.Maintenance/HashKV, as etcd 3.4's peers ask
 * /members/hashkv): HashKV at req->revision, or with req->compacted the
 * hash at that compaction revision (server_hash_kv_compacted), which
 * plain HashKV refuses as compacted.  No auth check: the asker is a
 * member, not a client.  Reply: Cetcdpb__PeerHashResponse, on cetcd-slow,
 * with error ERR_COMPACTED or ERR_FUTURE_REV when this member cannot hash
 * at that revision.  Errors of the call (done.fn's err): ERR_INVAL
 * (another cluster id), ERR_BUSY, ERR_NOMEM, ERR_STOPPED, ERR_CORRUPT. */
void svc_peer_hash_kv(struct server *s, const Cetcdpb__PeerHashRequest *req,
                      struct svc_done done);
/* svc_maint_hash: Reply Etcdserverpb__HashResponse (server_hash), on
 * cetcd-slow as HashKV. */
void svc_maint_hash(struct server *s, const Etcdserverpb__HashRequest *req,
                    struct svc_done done);

/* svc_maint_defragment defragments this member's store online
 * (server_defrag; defrag.c) and answers when it is done, on the defrag
 * thread.  Reply: Etcdserverpb__DefragmentResponse (no header, as etcd's).
 * Errors: server_defrag's. */
void svc_maint_defragment(struct server *s,
                          const Etcdserverpb__DefragmentRequest *req,
                          struct svc_done done);

/* --- Lease (lease.c, lease_keepalive.c) ---------------------------------- */

/* svc_lease_grant: a grant without an id gets one (server_lease_id_next),
 * then the quota check and a raft proposal.  Reply:
 * Etcdserverpb__LeaseGrantResponse (ID, TTL: at least the minimum TTL).
 * Errors: those of every write (above), ERR_LEASE_EXIST,
 * ERR_LEASE_TTL_TOO_LARGE (TTL above 9000000000 s), ERR_TOO_MANY_REQUESTS
 * (SERVER_LEASES_MAX leases are held). */
void svc_lease_grant(struct server *s, const Etcdserverpb__LeaseGrantRequest *req,
                     struct svc_done done);

/* svc_lease_revoke: a raft proposal; every key attached is deleted in one
 * revision.  Reply: Etcdserverpb__LeaseRevokeResponse.  Errors: those of
 * every write but ERR_NO_SPACE, ERR_LEASE_NOT_FOUND. */
void svc_lease_revoke(struct server *s,
                      const Etcdserverpb__LeaseRevokeRequest *req,
                      struct svc_done done);

/* svc_lease_time_to_live asks the leader (server_lease_time_to_live).
 * Reply: Etcdserverpb__LeaseTimeToLiveResponse; an unknown or expired
 * lease is answered TTL -1 (etcd 3.4's LeaseServer does so rather than
 * fail).  Errors: ERR_TIMEOUT, ERR_NO_LEADER, ERR_STOPPED, ERR_BUSY,
 * ERR_NOMEM. */
void svc_lease_time_to_live(struct server *s,
                            const Etcdserverpb__LeaseTimeToLiveRequest *req,
                            struct svc_done done);

/* svc_lease_leases lists this member's leases, at once.  Reply:
 * Etcdserverpb__LeaseLeasesResponse.  Errors: ERR_NOMEM. */
void svc_lease_leases(struct server *s,
                      const Etcdserverpb__LeaseLeasesRequest *req,
                      struct svc_done done);

/* svc_lease_keepalive_handler is etcd's LeaseKeepAlive: inbound
 * Etcdserverpb__LeaseKeepAliveRequest, outbound
 * Etcdserverpb__LeaseKeepAliveResponse (TTL 0 for an unknown or expired
 * lease), one answer per request (lease_keepalive.c). */
extern const struct svc_stream_handler svc_lease_keepalive_handler;

/* The peer listener's lease services (a follower forwards to the leader,
 * server/lease_forward.c).  svc_peer_lease_renew: reply
 * Etcdserverpb__LeaseKeepAliveResponse (TTL 0: unknown lease).
 * svc_peer_lease_ttl: reply Etcdserverpb__LeaseTimeToLiveResponse (TTL
 * -1: unknown lease).  Errors: ERR_NOT_LEADER (this member does not lead),
 * and those of server_lease_renew / server_lease_time_to_live. */
void svc_peer_lease_renew(struct server *s,
                          const Etcdserverpb__LeaseKeepAliveRequest *req,
                          struct svc_done done);
void svc_peer_lease_ttl(struct server *s,
                        const Etcdserverpb__LeaseTimeToLiveRequest *req,
                        struct svc_done done);

/* --- Lock and Election (lock.c, lock_wait.c, election.c, observe.c) -------
 *
 * etcd 3.4's v3lock and v3election services (its servers run
 * clientv3/concurrency against the member; here the same KV steps run in
 * the member, lock_wait.c has them).  A key is name/<lease in hex>; the
 * oldest key of the prefix name/ (by create revision) holds the lock or
 * leads.  Lock and Campaign wait: they are served as streams (unary on the
 * wire: one request, one answer) so that a client that goes away ends
 * the wait and its key is deleted.  Their steps run on cetcd-task
 * (server.h "Tasks"); nothing blocks a server thread.  At most
 * SVC_LOCK_WAITERS_MAX Lock, Campaign and Observe streams are open per
 * process (more: ERR_TOO_MANY_REQUESTS at open).  A lease 0 gets a lease
 * of SVC_LOCK_SESSION_TTL_S granted (concurrency.NewSession's default). */
#define SVC_LOCK_WAITERS_MAX 10000
#define SVC_LOCK_SESSION_TTL_S 60

/* svc_lock_handler is Lock: inbound V3lockpb__LockRequest, outbound one
 * V3lockpb__LockResponse {header, key} once the lock is held, then OK.
 * Errors (the stream's): those of svc_kv_txn and svc_kv_range,
 * ERR_LEASE_NOT_FOUND, ERR_SESSION_EXPIRED (the waiter's key was deleted
 * while it waited: its lease expired, or an Unlock), ERR_STOPPED. */
extern const struct svc_stream_handler svc_lock_handler;

/* svc_lock_unlock deletes req->key.  Reply: V3lockpb__UnlockResponse.
 * Errors: those of svc_kv_delete_range. */
void svc_lock_unlock(struct server *s, const V3lockpb__UnlockRequest *req,
                     struct svc_done done);

/* svc_campaign_handler is Campaign: inbound V3electionpb__CampaignRequest,
 * outbound one V3electionpb__CampaignResponse {header, leader {name, key,
 * rev, lease}} once leader.  Errors: as Lock's, ERR_ELECTION_NOT_LEADER
 * (the key held another value and proclaiming the new one failed). */
extern const struct svc_stream_handler svc_campaign_handler;

/* svc_election_proclaim: reply V3electionpb__ProclaimResponse.  Errors:
 * ERR_LEADER_KEY_MISSING, ERR_ELECTION_NOT_LEADER, those of svc_kv_txn. */
void svc_election_proclaim(struct server *s,
                           const V3electionpb__ProclaimRequest *req,
                           struct svc_done done);

/* svc_election_leader: reply V3electionpb__LeaderResponse.  Errors:
 * ERR_ELECTION_NO_LEADER, those of svc_kv_range. */
void svc_election_leader(struct server *s,
                         const V3electionpb__LeaderRequest *req,
                         struct svc_done done);

/* svc_election_resign: reply V3electionpb__ResignResponse.  Errors:
 * ERR_LEADER_KEY_MISSING, those of svc_kv_txn. */
void svc_election_resign(struct server *s,
                         const V3electionpb__ResignRequest *req,
                         struct svc_done done);

/* svc_observe_handler is Observe: inbound V3electionpb__LeaderRequest,
 * outbound V3electionpb__LeaderResponse for the leader now and at every
 * change, in order, until the client ends it (observe.c). */
extern const struct svc_stream_handler svc_observe_handler;

/* --- Snapshot (snapshot.c) ------------------------------------------------
 * svc_snapshot_handler is Maintenance.Snapshot: inbound one
 * Etcdserverpb__SnapshotRequest, outbound Etcdserverpb__SnapshotResponse
 * chunks of the store as etcd's bbolt database (server_snapshot_etcd),
 * SVC_SNAPSHOT_CHUNK bytes each (the last one shorter) with
 * remaining_bytes counting down, then {0, SHA-256 of the database}, as
 * etcd 3.4 sends it.  Each stream's export runs on its own thread; at
 * most SVC_SNAPSHOTS_MAX at once (more: ERR_TOO_MANY_REQUESTS).  The
 * transport's queue for it should hold SVC_SNAPSHOT_QUEUE messages: the
 * thread naps SVC_SNAPSHOT_NAP_MS while it is full. */
#define SVC_SNAPSHOT_CHUNK (32 * 1024)
#define SVC_SNAPSHOTS_MAX 4
#define SVC_SNAPSHOT_QUEUE 16
#define SVC_SNAPSHOT_NAP_MS 2
extern const struct svc_stream_handler svc_snapshot_handler;

/* --- Auth (auth.c) ---------------------------------------------------------
 *
 * svc_auth_call serves one etcdserverpb.Auth request; req's descriptor
 * names the method (AuthEnableRequest ... RoleRevokePermissionRequest).
 * Every one goes through raft and is answered once applied, with the
 * matching *Response (etcd 3.4: the lists and gets too).  Passwords are
 * hashed with bcrypt at --bcrypt-cost here, before the proposal: no
 * password enters the log.  Authenticate checks the password here, then
 * proposes the token to assign.  Errors: those of every write, and the
 * ERR_AUTH_* of etcd's auth store (util/err.h), ERR_INVAL (not an Auth
 * request). */
void svc_auth_call(struct server *s, const ProtobufCMessage *req,
                   struct svc_done done);

/* svc_auth_who finds the caller's user from done.metadata's token (or
 * its client certificate's CN): user_out (cap bytes) gets "" when the
 * request carries none, and *rev_out the auth store's revision at the
 * check (0 with no identity: etcd's "user name is empty"; a certificate
 * with an empty CN names user "" at a revision != 0, as etcd).  Errors:
 * ERR_AUTH_INVALID_TOKEN (a token this member does not know, expired). */
int svc_auth_who(struct server *s, struct svc_done done, char *user_out,
                 size_t cap, uint64_t *rev_out);

/* svc_auth_check_admin: the caller has the root role (etcd's
 * authMaintenanceServer for Hash, HashKV, MoveLeader, Defragment,
 * Snapshot).  0, or ERR_AUTH_INVALID_TOKEN, ERR_AUTH_USER_EMPTY,
 * ERR_AUTH_USER_NOT_FOUND, ERR_AUTH_PERMISSION_DENIED. */
int svc_auth_check_admin(struct server *s, struct svc_done done);

/* svc_auth_check_maint: svc_auth_check_admin for the Maintenance methods
 * etcd's authMaintenanceServer guards (Hash, HashKV, Defragment, Snapshot;
 * and MoveLeader, which etcd 3.4.23 lets anyone call: cetcd needs root),
 * with etcd's errors for them: gRPC Unknown, "auth: permission denied",
 * "auth: user name is empty", "auth: user not found", "auth: invalid auth
 * token" (ERR_AUTH_RAW_*). */
int svc_auth_check_maint(struct server *s, struct svc_done done);

/* svc_auth_check_read: may the caller read [key, end)?  0, or the error
 * to answer (etcd's IsRangePermitted with the caller's token).  rev_out
 * (NULL: not wanted) gets the auth store's revision the answer was made
 * at, 0 when it depended on none (auth off: etcd's AuthInfo of such a
 * request has revision 0). */
int svc_auth_check_read(struct server *s, struct svc_done done,
                        ProtobufCBinaryData key, ProtobufCBinaryData end,
                        uint64_t *rev_out);

/* --- Streams ------------------------------------------------------------- */

/*
 * struct svc_stream: the transport's end of one open stream, given to the
 * streaming service (which only calls its functions).  The transport fills
 * it and keeps it valid until the service calls release.
 *
 * Outbound.  send queues one message (packed before it returns, so the
 * caller may free it) from any thread.  The transport holds at most
 * queue_max messages not yet written: past that send queues nothing and
 * returns ERR_FULL, and the service decides (etcd's watch, for one, drops
 * a watcher that cannot keep up).  Errors: ERR_FULL, ERR_CLOSED (the
 * stream ended or is finishing), ERR_NOMEM.
 *
 * send_ctrl is send for the answers a service must never drop (the
 * watch's created/canceled): it may also use SVC_STREAM_CTRL_RESERVE
 * slots past queue_max, shared by every send_ctrl of the stream, and is
 * ordered with send.  Errors: as send's; ERR_FULL only once the reserve
 * is used up too (a client that does not read: the service ends the
 * stream rather than hold more).
 *
 * metadata returns the value of the client's request metadata key (lower
 * case, e.g. "hasleader") and its length in *len_out, or NULL when the
 * client sent none; not NUL-terminated, valid until release.  Any thread.
 *
 * close ends the stream once the queued messages are written: err 0 ends
 * it OK, an ERR_* code ends it with that error (the transport maps it as
 * for unary calls).  Any thread.  Errors: ERR_CLOSED (already ending).
 *
 * Inbound.  The transport decodes each client message and hands it to the
 * service's recv (struct svc_stream_handler) on one thread at a time, the
 * next one only after recv has returned: a service that cannot take more
 * for now keeps the message it got and the transport reads no further, so
 * the inbound queue is one message deep and the rest waits in the
 * transport's flow control.  recv(NULL) tells that the client has
 * half-closed its side.  end runs exactly once when the stream is over
 * (closed by the service, cancelled by the client, a deadline, shutdown);
 * after it, send and close return ERR_CLOSED.
 *
 * release: the service is done with the stream (after its open succeeded,
 * exactly once, from any thread, also from inside end); afterwards it must
 * not touch the stream.  A stream whose service released it before end
 * still gets its end.
 */
struct svc_stream {
    int (*send)(void *ctx, const ProtobufCMessage *m); /* any thread */
    int (*send_ctrl)(void *ctx, const ProtobufCMessage *m); /* any thread */
    int (*close)(void *ctx, int err);                  /* any thread */
    void (*release)(void *ctx);                        /* once */
    const char *(*metadata)(void *ctx, const char *key,
                            size_t *len_out);          /* any thread */
    void *ctx;        /* the transport's, passed to the functions above */
    size_t queue_max; /* sends queued at most before ERR_FULL */
};

/* The slots send_ctrl may use past queue_max (etcd's watch: 16 control
 * responses, ctrlStreamBufLen). */
#define SVC_STREAM_CTRL_RESERVE 16

/* The service's side of a stream, called by the transport. */
struct svc_stream_handler {
    /* the inbound message type (for the transport's decoder) */
    const ProtobufCMessageDescriptor *request;
    /* open: a client opened a stream on s; the service keeps st and
     * returns its per-stream state in *state_out, or an ERR_* code: the
     * transport then ends the stream with it (no release, no end). */
    int (*open)(struct server *s, struct svc_stream *st, void **state_out);
    /* recv: one decoded message, borrowed for the call; NULL: the client
     * half-closed. */
    void (*recv)(void *state, const ProtobufCMessage *m);
    /* end: the stream is over; cancelled when it ended without the
     * service's close (client cancel, deadline, shutdown). */
    void (*end)(void *state, bool cancelled);
};

/* --- Watch (watch.c) ------------------------------------------------------
 * svc_watch_handler is etcd's Watch service: inbound Etcdserverpb__
 * WatchRequest, outbound Etcdserverpb__WatchResponse, on the member's watch
 * hub (server.h "Watch"); etcd 3.4's answers, see watch.c. */
extern const struct svc_stream_handler svc_watch_handler;

/* struct svc_mem_stream: an in-process svc_stream (stream.c) for tests and
 * in-process callers: every send is packed and kept, in order, until
 * taken; at most queue_max are kept (then ERR_FULL; send_ctrl: the
 * reserve more).  close records the
 * code; end is the caller's to drive.  Thread-safe: send and close from
 * any thread, the rest from the owner. */
struct svc_mem_stream;

/* svc_mem_stream_create: queue_max > 0 (send_ctrl may keep
 * SVC_STREAM_CTRL_RESERVE more).  Errors: ERR_INVAL, ERR_NOMEM. */
int svc_mem_stream_create(size_t queue_max, struct svc_mem_stream **out);

/* svc_mem_stream_metadata_set makes metadata(key) answer value (both
 * borrowed: they must outlive ms); one pair, set before the service opens
 * the stream. */
void svc_mem_stream_metadata_set(struct svc_mem_stream *ms, const char *key,
                                 const char *value);

/* svc_mem_stream_get: its struct svc_stream, valid until destroy. */
struct svc_stream *svc_mem_stream_get(struct svc_mem_stream *ms);

/* svc_mem_stream_take unpacks the oldest kept message as type d into
 * *m_out (free it with protobuf_c_message_free_unpacked(m, NULL)) and
 * drops it, waiting up to timeout_ms for one.  Errors: ERR_TIMEOUT (none
 * came), ERR_CORRUPT (not a d), ERR_NOMEM. */
int svc_mem_stream_take(struct svc_mem_stream *ms,
                        const ProtobufCMessageDescriptor *d, int timeout_ms,
                        ProtobufCMessage **m_out);

/* svc_mem_stream_closed: the service called close (its err in *err_out).
 * svc_mem_stream_released: the service called release. */
bool svc_mem_stream_closed(struct svc_mem_stream *ms, int *err_out);
bool svc_mem_stream_released(struct svc_mem_stream *ms);

/* svc_mem_stream_destroy frees ms and what it still keeps. */
void svc_mem_stream_destroy(struct svc_mem_stream *ms);

#endif
