/* svc_int.h - what the service files share. */
#ifndef CETCD_SVC_SVC_INT_H
#define CETCD_SVC_SVC_INT_H

#include "mvcc/mvcc.h"
#include "svc/svc.h"

/* svc__done_dup copies done to the heap for a request answered later
 * through a server callback that carries one pointer (free it with
 * mem_free once fn was called), or NULL (out of memory). */
struct svc_done *svc__done_dup(struct svc_done done);

/* svc__done_take calls the held completion with err and reply and frees
 * it: the end of an answer that came through svc__done_dup. */
void svc__done_take(struct svc_done *held, int err,
                    const ProtobufCMessage *reply);

/* svc__done_metadata is a svc_done.metadata for an inner request whose
 * ctx is a held outer completion (svc__done_dup): it reads the outer
 * caller's metadata, so the inner request runs as the same user. */
const char *svc__done_metadata(void *held, const char *key, size_t *len);

/* svc__auth_raw: an auth error (ERR_AUTH_USER_EMPTY, _USER_NOT_FOUND,
 * _PERMISSION_DENIED, _INVALID_TOKEN) as etcd's maintenance server answers
 * it (ERR_AUTH_RAW_*); any other code unchanged. */
int svc__auth_raw(int rc);

/* svc__auth_stamp sets ir's auth_user (pointing into buf, cap bytes) and
 * auth_revision from the caller's token (svc_auth_who).  Errors:
 * ERR_AUTH_INVALID_TOKEN. */
int svc__auth_stamp(struct server *s, struct svc_done done,
                    Cetcdpb__InternalRequest *ir, char *buf, size_t cap);

/* --- Watch response encoding (watch_encode.c) --------------------------- */

/* One event's protobuf-c messages, filled together. */
struct svc__ev_pb {
    Mvccpb__Event ev;          /* the event */
    Mvccpb__KeyValue kv, prev; /* its kv and prev_kv */
};

/* svc__watch_event_pb points pb at kv's bytes (kv must outlive pb). */
void svc__watch_event_pb(const struct mvcc_kv *kv, Mvccpb__KeyValue *pb);

/* svc__watch_ev_fill builds p from e (prev_kv only when e has one). */
void svc__watch_ev_fill(const struct mvcc_event *e, struct svc__ev_pb *p);

/* svc__watch_events_shared returns in *uf_out n protobuf-c unknown fields
 * that are evs encoded as WatchResponse.events (field 11), from the
 * calling thread's cache when the previous call had the same events.  The
 * fields stay valid until the thread's next call.  Errors: ERR_FULL (more
 * than the cache holds: pack the events the normal way), ERR_NOMEM. */
int svc__watch_events_shared(const struct mvcc_event *evs, size_t n,
                             ProtobufCMessageUnknownField **uf_out);

#endif
