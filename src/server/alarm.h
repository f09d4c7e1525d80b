/*
 * alarm.h - the member's alarms (etcd 3.4's alarm store): a list of
 * (member id, alarm type) raised through raft and applied by every member,
 * kept in the store's "alarm" bucket so that it survives a restart.
 *
 * While a NOSPACE alarm is active anywhere in the cluster, every member
 * applies writes "capped", as etcd's applierV3Capped does: a Put, a Txn
 * with puts (a cost above 0) and a LeaseGrant are answered ErrNoSpace and
 * change nothing; reads, deletes, compactions and Txns without puts are
 * served.  While a CORRUPT alarm is active, every KV and lease request but
 * a read-only Txn is answered ErrCorrupt (ERR_CLUSTER_CORRUPT), as etcd's
 * applierV3Corrupt.  `etcdctl alarm disarm` (DEACTIVATE) ends either.
 * Those are appliers put in front of the apply chain (applier.h): this
 * file relinks the chain whenever the list is loaded or changed.
 *
 * A NOSPACE alarm is raised (ACTIVATE, this member's id) when the API
 * refuses a write because the backend quota (--quota-backend-bytes) is
 * reached, or because the store's disk is full (backend_space_low): see
 * server_quota_allows.
 *
 * Threads: the list is the apply side's (whoever holds apply_mu: the apply
 * thread, or the store's open before the threads run); `nospace` is read by
 * any thread, and so is the copy under pub_mu (server_alarms_list).
 *
 * On disk: one key per alarm in the "alarm" bucket, the value empty.  The
 * key is 12 bytes: the member id (8 bytes, big-endian), then the alarm
 * type (4 bytes, big-endian, etcdserverpb.AlarmType: 1 NOSPACE, 2
 * CORRUPT).  Any other length or type is ERR_CORRUPT.
 */
#ifndef CETCD_SERVER_ALARM_H
#define CETCD_SERVER_ALARM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "server/server.h"

#define SERVER_ALARM_KEY_BYTES 12

/* Part of struct server (server_int.h).  SERVER_ALARMS_MAX and struct
 * server_alarm are in server.h (server_alarms_list). */
struct server_alarms {
    backend_bucket bucket;                 /* the "alarm" bucket */
    struct server_alarm v[SERVER_ALARMS_MAX]; /* the active alarms */
    size_t n;                              /* entries in v */
    pthread_mutex_t pub_mu;                /* guards pub and pub_n */
    struct server_alarm pub[SERVER_ALARMS_MAX]; /* a copy of v for other
                                              threads, made whenever the
                                              list changes or is read */
    size_t pub_n;                          /* entries in pub */
    _Atomic bool nospace;                  /* a NOSPACE alarm is in v */
    _Atomic bool corrupt;                  /* a CORRUPT alarm is in v */
    _Atomic uint64_t raised_ms;            /* last ACTIVATE this member
                                              proposed (rate limit) */
};

/* The 12-byte key of an alarm; decode: 0 or ERR_CORRUPT (any bytes). */
void server__alarm_key_encode(uint8_t out[SERVER_ALARM_KEY_BYTES],
                              const struct server_alarm *a);
int server__alarm_key_decode(const void *key, size_t len,
                             struct server_alarm *out);

struct server;
struct mvcc_batch;
struct arena;

/* server__alarms_load opens the bucket on s->be and reads the list (each
 * store open: start, snapshot install).  Errors: the backend's,
 * ERR_CORRUPT (a key that does not decode, more than SERVER_ALARMS_MAX). */
int server__alarms_load(struct server *s);

/* server__alarm_apply applies an AlarmRequest inside batch b: GET lists
 * the alarms of r's type (NONE: all), ACTIVATE adds (member, type) and
 * answers it, DEACTIVATE removes it and answers it (nothing if absent).
 * *msg_out is an AlarmResponse in arena a (header filled by the caller).
 * Errors: ERR_INVAL (ACTIVATE of NONE or an unknown type), ERR_FULL (the
 * list is full), ERR_NOMEM, storage errors (which poison the batch: the
 * caller then calls server__alarms_reload). */
int server__alarm_apply(struct server *s, struct mvcc_batch *b,
                        const Etcdserverpb__AlarmRequest *r,
                        struct arena *a, ProtobufCMessage **msg_out);

/* server__alarms_reload reads the list again from the store (after a
 * batch that may have changed it was aborted). */
void server__alarms_reload(struct server *s);

/* Any thread: a NOSPACE alarm is active (writes are capped). */
bool server__alarm_nospace(struct server *s);

/* API threads (never the apply thread: it proposes): propose ACTIVATE
 * NOSPACE for this member, at most once a second, unless it is active. */
void server__alarm_raise_nospace(struct server *s);

#endif
