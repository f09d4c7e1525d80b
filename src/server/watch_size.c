/*
 * watch_size.c - the exact encoded sizes the watch hub splits fragments by
 * (watch.h "Fragmentation", etcd's sendFragments compares a
 * WatchResponse's Size() with --max-request-bytes): one event as a field
 * of a WatchResponse, and a response without its events, with this
 * member's header.  The messages are built on the stack, borrowing the
 * event's bytes, and only sized (protobuf-c), never packed.
 */
#include "server/server_int.h"
#include "util/check.h"
#include "util/varint.h"

static void kv_fill(const struct mvcc_kv *kv, Mvccpb__KeyValue *pb)
{
    mvccpb__key_value__init(pb);
    pb->key.data = (uint8_t *)kv->key;
    pb->key.len = kv->key_len;
    pb->value.data = (uint8_t *)kv->value;
    pb->value.len = kv->value != NULL ? kv->value_len : 0;
    pb->create_revision = kv->create_rev;
    pb->mod_revision = kv->mod_rev;
    pb->version = kv->version;
    pb->lease = kv->lease;
}

size_t server__watch_event_size(const struct mvcc_event *ev, void *arg)
{
    (void)arg;
    CHECK(ev != NULL);
    Mvccpb__Event e = MVCCPB__EVENT__INIT;
    Mvccpb__KeyValue kv, prev;
    e.type = ev->type == MVCC_EVENT_DELETE ? MVCCPB__EVENT__EVENT_TYPE__DELETE
                                           : MVCCPB__EVENT__EVENT_TYPE__PUT;
    kv_fill(&ev->kv, &kv);
    e.kv = &kv;
    if (ev->prev_kv.mod_rev != 0) { /* as svc/watch.c encodes it */
        kv_fill(&ev->prev_kv, &prev);
        e.prev_kv = &prev;
    }
    size_t n = mvccpb__event__get_packed_size(&e);
    return 1 + varint_len(n) + n; /* field 11 of WatchResponse: 1-byte tag */
}

size_t server__watch_base_size(const struct watch_response *r, void *arg)
{
    struct server *s = arg;
    CHECK(s != NULL && r != NULL);
    Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
    server_watch_header(s, &h, r->header_rev);
    Etcdserverpb__WatchResponse m = ETCDSERVERPB__WATCH_RESPONSE__INIT;
    m.header = &h;
    m.watch_id = r->watch_id;
    m.created = r->created;
    m.canceled = r->canceled;
    m.compact_revision = r->compact_rev;
    m.fragment = r->fragment;
    return etcdserverpb__watch_response__get_packed_size(&m);
}
