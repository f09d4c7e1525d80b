/*
 * print_json_wrap.c - the JSON of the structs etcdctl prints that are not
 * protobuf messages: clientv3's WatchResponse and lease responses (which
 * embed *pb.ResponseHeader, so its members come first and inline), and
 * etcdctl's own epHealth, epStatus, epHashKV and snapshot.Status.  The key
 * names and which of them are omitted when empty are those structs' json
 * tags (none: the Go field name, never omitted).
 */
#include <assert.h>

#include "ctl/print.h"

/* header_object writes the value of a non-pointer pb.ResponseHeader. */
static void header_object(struct ctl_json *j,
                          const Etcdserverpb__ResponseHeader *h)
{
    if (h != NULL) {
        ctl_json_message_value(j, &h->base);
        return;
    }
    ctl_json_begin_object(j);
    ctl_json_end_object(j);
}

/* inline_header writes the members of an embedded *pb.ResponseHeader. */
static void inline_header(struct ctl_json *j,
                          const Etcdserverpb__ResponseHeader *h)
{
    ctl_json_message_fields(j, h != NULL ? &h->base : NULL);
}

static void end(struct ctl_json *j)
{
    assert(j->depth == 0);
    fputc('\n', j->f);
}

void ctl_json_watch_response(FILE *f, const Etcdserverpb__WatchResponse *r,
                             bool nil_events)
{
    static const Etcdserverpb__WatchResponse zero =
        ETCDSERVERPB__WATCH_RESPONSE__INIT;
    struct ctl_json j;
    ctl_json_init(&j, f);
    if (r == NULL)
        r = &zero;
    ctl_json_begin_object(&j);
    ctl_json_key(&j, "Header");
    header_object(&j, r->header);
    ctl_json_key(&j, "Events");
    if (nil_events) {
        ctl_json_null(&j); /* the slice clientv3 left nil */
    } else {
        ctl_json_begin_array(&j);
        for (size_t i = 0; i < r->n_events; i++)
            ctl_json_message_value(&j, &r->events[i]->base);
        ctl_json_end_array(&j);
    }
    ctl_json_key(&j, "CompactRevision");
    ctl_json_i64(&j, r->compact_revision);
    ctl_json_key(&j, "Canceled");
    ctl_json_bool(&j, r->canceled);
    ctl_json_key(&j, "Created");
    ctl_json_bool(&j, r->created);
    ctl_json_end_object(&j);
    end(&j);
}

void ctl_json_lease_grant(FILE *f, const Etcdserverpb__LeaseGrantResponse *r)
{
    static const Etcdserverpb__LeaseGrantResponse zero =
        ETCDSERVERPB__LEASE_GRANT_RESPONSE__INIT;
    struct ctl_json j;
    ctl_json_init(&j, f);
    if (r == NULL)
        r = &zero;
    ctl_json_begin_object(&j);
    inline_header(&j, r->header);
    ctl_json_key(&j, "ID");
    ctl_json_i64(&j, r->id);
    ctl_json_key(&j, "TTL");
    ctl_json_i64(&j, r->ttl);
    ctl_json_key(&j, "Error");
    ctl_json_str(&j, r->error);
    ctl_json_end_object(&j);
    end(&j);
}

void ctl_json_lease_keepalive(FILE *f,
                              const Etcdserverpb__LeaseKeepAliveResponse *r)
{
    static const Etcdserverpb__LeaseKeepAliveResponse zero =
        ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
    struct ctl_json j;
    ctl_json_init(&j, f);
    if (r == NULL)
        r = &zero;
    ctl_json_begin_object(&j);
    inline_header(&j, r->header);
    ctl_json_key(&j, "ID");
    ctl_json_i64(&j, r->id);
    ctl_json_key(&j, "TTL");
    ctl_json_i64(&j, r->ttl);
    ctl_json_end_object(&j);
    end(&j);
}

void ctl_json_lease_timetolive(FILE *f,
                               const Etcdserverpb__LeaseTimeToLiveResponse *r)
{
    static const Etcdserverpb__LeaseTimeToLiveResponse zero =
        ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
    struct ctl_json j;
    ctl_json_init(&j, f);
    if (r == NULL)
        r = &zero;
    ctl_json_begin_object(&j);
    inline_header(&j, r->header);
    ctl_json_key(&j, "id");
    ctl_json_i64(&j, r->id);
    ctl_json_key(&j, "ttl");
    ctl_json_i64(&j, r->ttl);
    ctl_json_key(&j, "granted-ttl");
    ctl_json_i64(&j, r->grantedttl);
    ctl_json_key(&j, "keys");
    if (r->n_keys == 0) {
        ctl_json_null(&j);
    } else {
        ctl_json_begin_array(&j);
        for (size_t i = 0; i < r->n_keys; i++)
            ctl_json_bytes_b64(&j, r->keys[i].data, r->keys[i].len);
        ctl_json_end_array(&j);
    }
    ctl_json_end_object(&j);
    end(&j);
}

void ctl_json_lease_leases(FILE *f, const Etcdserverpb__LeaseLeasesResponse *r)
{
    static const Etcdserverpb__LeaseLeasesResponse zero =
        ETCDSERVERPB__LEASE_LEASES_RESPONSE__INIT;
    struct ctl_json j;
    ctl_json_init(&j, f);
    if (r == NULL)
        r = &zero;
    ctl_json_begin_object(&j);
    inline_header(&j, r->header);
    ctl_json_key(&j, "leases");
    ctl_json_begin_array(&j); /* clientv3 makes the slice: [] when empty */
    for (size_t i = 0; i < r->n_leases; i++) {
        ctl_json_begin_object(&j);
        ctl_json_key(&j, "id");
        ctl_json_i64(&j, r->leases[i]->id);
        ctl_json_end_object(&j);
    }
    ctl_json_end_array(&j);
    ctl_json_end_object(&j);
    end(&j);
}

void ctl_json_endpoint_health(FILE *f, const struct ctl_ep_health *v, size_t n)
{
    struct ctl_json j;
    assert(v != NULL || n == 0);
    ctl_json_init(&j, f);
    ctl_json_begin_array(&j);
    for (size_t i = 0; i < n; i++) {
        ctl_json_begin_object(&j);
        ctl_json_key(&j, "endpoint");
        ctl_json_str(&j, v[i].ep);
        ctl_json_key(&j, "health");
        ctl_json_bool(&j, v[i].health);
        ctl_json_key(&j, "took");
        ctl_json_str(&j, v[i].took);
        if (v[i].error != NULL && v[i].error[0] != '\0') {
            ctl_json_key(&j, "error");
            ctl_json_str(&j, v[i].error);
        }
        ctl_json_end_object(&j);
    }
    ctl_json_end_array(&j);
    end(&j);
}

/* ep_list writes [{"Endpoint":ep,"<name>":resp}..] for status and hashkv. */
static void ep_list(FILE *f, const char *name, size_t n,
                    const char *(*ep)(const void *v, size_t i),
                    const ProtobufCMessage *(*resp)(const void *v, size_t i),
                    const void *v)
{
    struct ctl_json j;
    ctl_json_init(&j, f);
    ctl_json_begin_array(&j);
    for (size_t i = 0; i < n; i++) {
        ctl_json_begin_object(&j);
        ctl_json_key(&j, "Endpoint");
        ctl_json_str(&j, ep(v, i));
        ctl_json_key(&j, name);
        ctl_json_message_value(&j, resp(v, i));
        ctl_json_end_object(&j);
    }
    ctl_json_end_array(&j);
    end(&j);
}

static const char *status_ep(const void *v, size_t i)
{
    return ((const struct ctl_ep_status *)v)[i].ep;
}

static const ProtobufCMessage *status_resp(const void *v, size_t i)
{
    const Etcdserverpb__StatusResponse *r =
        ((const struct ctl_ep_status *)v)[i].resp;
    return r != NULL ? &r->base : NULL;
}

static const char *hashkv_ep(const void *v, size_t i)
{
    return ((const struct ctl_ep_hashkv *)v)[i].ep;
}

static const ProtobufCMessage *hashkv_resp(const void *v, size_t i)
{
    const Etcdserverpb__HashKVResponse *r =
        ((const struct ctl_ep_hashkv *)v)[i].resp;
    return r != NULL ? &r->base : NULL;
}

void ctl_json_endpoint_status(FILE *f, const struct ctl_ep_status *v, size_t n)
{
    assert(v != NULL || n == 0);
    ep_list(f, "Status", n, status_ep, status_resp, v);
}

void ctl_json_endpoint_hashkv(FILE *f, const struct ctl_ep_hashkv *v, size_t n)
{
    assert(v != NULL || n == 0);
    ep_list(f, "HashKV", n, hashkv_ep, hashkv_resp, v);
}

void ctl_json_db_status(FILE *f, const struct ctl_db_status *s)
{
    static const struct ctl_db_status zero;
    struct ctl_json j;
    ctl_json_init(&j, f);
    if (s == NULL)
        s = &zero;
    ctl_json_begin_object(&j);
    ctl_json_key(&j, "hash");
    ctl_json_u64(&j, s->hash);
    ctl_json_key(&j, "revision");
    ctl_json_i64(&j, s->revision);
    ctl_json_key(&j, "totalKey");
    ctl_json_i64(&j, s->total_key);
    ctl_json_key(&j, "totalSize");
    ctl_json_i64(&j, s->total_size);
    ctl_json_end_object(&j);
    end(&j);
}
